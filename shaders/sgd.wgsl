// SGD as torch.optim.SGD, one thread per element:
//   g' = g + wd·p;  buf = μ·buf + g' (when has_momentum);  p −= lr·(buf or g')
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    n: u32, has_momentum: u32, _pad0: u32, _pad1: u32,
    lr: f32, momentum: f32, weight_decay: f32, _pad2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> grads: array<f32>;
@group(0) @binding(3) var<storage, read_write> momentum_buf: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn step(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (i >= p.n) {
        return;
    }
    var g = grads[i] + p.weight_decay * params[i];
    if (p.has_momentum != 0u) {
        g = p.momentum * momentum_buf[i] + g;
        momentum_buf[i] = g;
    }
    params[i] = params[i] - p.lr * g;
}
