// Softmax cross-entropy over the vocabulary, mean over all positions.
//   forward    — one thread per row: probs = softmax(logits) (max subtracted first),
//                losses[r] = logsumexp − logits[r, target]
//   loss_mean  — one workgroup: loss[0] = mean(losses) by a tree reduction
//   backward   — one thread per element: dlogits = (probs − onehot(target)) · scale, where
//                scale = 1/rows of the effective batch (rows · micro-batches when accumulating)
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    rows: u32, v: u32, scale: f32, _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> targets: array<u32>;
@group(0) @binding(3) var<storage, read_write> probs: array<f32>;
@group(0) @binding(4) var<storage, read_write> losses: array<f32>;
@group(0) @binding(5) var<storage, read_write> loss: array<f32>;
@group(0) @binding(6) var<storage, read_write> dlogits: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = flat_id(wg, nwg, lid, 64u);
    if (r >= p.rows) {
        return;
    }
    let base = r * p.v;
    var mx = logits[base];
    for (var i = 1u; i < p.v; i = i + 1u) {
        mx = max(mx, logits[base + i]);
    }
    var sum = 0.0;
    for (var i = 0u; i < p.v; i = i + 1u) {
        let e = exp(logits[base + i] - mx);
        probs[base + i] = e;
        sum = sum + e;
    }
    let inv = 1.0 / sum;
    for (var i = 0u; i < p.v; i = i + 1u) {
        probs[base + i] = probs[base + i] * inv;
    }
    let tgt = min(targets[r], p.v - 1u);
    losses[r] = mx + log(sum) - logits[base + tgt];
}

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn loss_mean(@builtin(local_invocation_id) lid: vec3<u32>) {
    var sum = 0.0;
    for (var r = lid.x; r < p.rows; r = r + 256u) {
        sum = sum + losses[r];
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride = stride / 2u) {
        if (lid.x < stride) {
            partial[lid.x] = partial[lid.x] + partial[lid.x + stride];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        loss[0] = partial[0] / f32(p.rows);
    }
}

@compute @workgroup_size(256, 1, 1)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = flat_id(wg, nwg, lid, 256u);
    if (idx >= p.rows * p.v) {
        return;
    }
    let r = idx / p.v;
    let i = idx % p.v;
    var onehot = 0.0;
    if (i == targets[r]) {
        onehot = 1.0;
    }
    dlogits[idx] = (probs[idx] - onehot) * p.scale;
}
