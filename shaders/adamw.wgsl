// AdamW (Loshchilov & Hutter 2019) over the flat parameter tensor, one thread per element:
//   m = β₁m + (1−β₁)g;  v = β₂v + (1−β₂)g²
//   p −= lr·( (m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε) + wd·p )     (decay only for i < decay_end)
// The bias corrections 1−βᵗ are computed on the host each step and written into the uniform.
// Mixed precision: g is the stored (16-bit, loss-scaled) gradient times inv_scale; `params` are
// the fp32 master weights and the result is also stored, rounded, into `weights16` (the 16-bit working
// weights); with fp16, nothing changes when found_inf[0] is set (the step is skipped).
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, decay_end: u32, _pad0: u32, _pad1: u32,
    lr: f32, beta1: f32, beta2: f32, eps: f32,
    weight_decay: f32, bias_correction1: f32, bias_correction2: f32, inv_scale: f32,
    has_copy: u32, has_flag: u32, _pad2: u32, _pad3: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> grads: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read_write> weights16: array<f32>;
@group(0) @binding(6) var<storage, read_write> found_inf: array<u32>;

@compute @workgroup_size(256, 1, 1)
fn step(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i >= p.n) {
        return;
    }
    if (p.has_flag != 0u && found_inf[0] != 0u) {
        return;
    }
    let g = grads[i] * p.inv_scale;
    let m1 = p.beta1 * m[i] + (1.0 - p.beta1) * g;
    let v1 = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = m1;
    v[i] = v1;
    let mhat = m1 / p.bias_correction1;
    let vhat = v1 / p.bias_correction2;
    var decay = 0.0;
    if (i < p.decay_end) {
        decay = p.weight_decay * params[i];
    }
    let w = params[i] - p.lr * (mhat / (sqrt(vhat) + p.eps) + decay);
    params[i] = w;
    if (p.has_copy != 0u) {
        weights16[i] = w;
    }
}
