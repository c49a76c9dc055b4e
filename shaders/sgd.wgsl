// SGD as torch.optim.SGD, one thread per element:
//   g' = g + wd·p;  buf = μ·buf + g' (when has_momentum);  p −= lr·(buf or g')
// Mixed precision as in adamw.wgsl: g unscaled by inv_scale, fp32 master `params`, rounded
// `weights16`, skipped when found_inf[0] is set.
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, has_momentum: u32, _pad0: u32, _pad1: u32,
    lr: f32, momentum: f32, weight_decay: f32, inv_scale: f32,
    has_copy: u32, has_flag: u32, _pad2: u32, _pad3: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> grads: array<f32>;
@group(0) @binding(3) var<storage, read_write> momentum_buf: array<f32>;
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
    var g = grads[i] * p.inv_scale + p.weight_decay * params[i];
    if (p.has_momentum != 0u) {
        g = p.momentum * momentum_buf[i] + g;
        momentum_buf[i] = g;
    }
    let w = params[i] - p.lr * g;
    params[i] = w;
    if (p.has_copy != 0u) {
        weights16[i] = w;
    }
}
