// GELU, tanh approximation (GPT-2's gelu_new): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
//   forward  — out = gelu(inp)
//   backward — dinp = gelu'(inp)·dout
// The tanh argument is clamped to ±15, where tanh is ±1 in f32, so no implementation's exp
// overflows into NaN. All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, _pad0: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> inp: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> dout: array<f32>;
@group(0) @binding(4) var<storage, read_write> dinp: array<f32>;

const K: f32 = 0.7978845608028654;
const A: f32 = 0.044715;

fn inner_tanh(x: f32) -> f32 {
    return tanh(clamp(K * (x + A * x * x * x), -15.0, 15.0));
}

@compute @workgroup_size(256, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i >= p.n) {
        return;
    }
    let x = inp[i];
    out[i] = 0.5 * x * (1.0 + inner_tanh(x));
}

@compute @workgroup_size(256, 1, 1)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i >= p.n) {
        return;
    }
    let x = inp[i];
    let th = inner_tanh(x);
    let sech2 = 1.0 - th * th;
    let local = 0.5 * (1.0 + th) + 0.5 * x * sech2 * K * (1.0 + 3.0 * A * x * x);
    dinp[i] = local * dout[i];
}
