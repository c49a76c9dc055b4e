// fp16's overflow check (GradScaler.unscale_): found_inf[0] = 1 if any gradient is inf or NaN,
// one thread per element. Every writer writes the same 1, so the race is benign. The test is on
// the bits (exponent all ones), because WGSL lets compilers assume floats are finite.
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, _pad0: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> found_inf: array<u32>;

@compute @workgroup_size(256, 1, 1)
fn check(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i >= p.n) {
        return;
    }
    let g = grads[i];
    if ((bitcast<u32>(g) & 0x7f800000u) == 0x7f800000u) {
        found_inf[0] = 1u;
    }
}
