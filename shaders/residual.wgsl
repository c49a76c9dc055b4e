// Residual add.
//   forward  — out = a + b
//   backward — da = dout (the other addend's gradient is dout itself, so no copy is made)
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, _pad0: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> da: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i < p.n) {
        out[i] = a[i] + b[i];
    }
}

@compute @workgroup_size(256, 1, 1)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i < p.n) {
        da[i] = dout[i];
    }
}
