// Softmax cross-entropy over the vocabulary, mean over the counted positions. A target of
// IGNORE (0xFFFFFFFF, PyTorch's ignore_index: a padded position) has loss 0, no gradient, and
// is not counted.
//   forward    — one thread per row: probs = softmax(logits) (max subtracted first),
//                losses[r] = logsumexp − logits[r, target]
//   loss_mean  — one workgroup: loss[0] = mean of the counted losses by a tree reduction
//   backward   — one thread per element: dlogits = (probs − onehot(target)) · scale, where
//                scale = 1/counted targets of the effective batch (all micro-batches')
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
    if (targets[r] == IGNORE) {
        losses[r] = 0.0;
        return;
    }
    let tgt = min(targets[r], p.v - 1u);
    losses[r] = mx + log(sum) - logits[base + tgt];
}

const IGNORE: u32 = 0xFFFFFFFFu;

var<workgroup> partial: array<f32, 256>;
var<workgroup> counted: array<u32, 256>;

@compute @workgroup_size(256, 1, 1)
fn loss_mean(@builtin(local_invocation_id) lid: vec3<u32>) {
    var sum = 0.0;
    var n = 0u;
    for (var r = lid.x; r < p.rows; r = r + 256u) {
        if (targets[r] != IGNORE) {
            sum = sum + losses[r];
            n = n + 1u;
        }
    }
    partial[lid.x] = sum;
    counted[lid.x] = n;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride = stride / 2u) {
        if (lid.x < stride) {
            partial[lid.x] = partial[lid.x] + partial[lid.x + stride];
            counted[lid.x] = counted[lid.x] + counted[lid.x + stride];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        loss[0] = partial[0] / f32(max(counted[0], 1u));
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
    if (targets[r] == IGNORE) {
        dlogits[idx] = 0.0;
        return;
    }
    var onehot = 0.0;
    if (i == targets[r]) {
        onehot = 1.0;
    }
    dlogits[idx] = (probs[idx] - onehot) * p.scale;
}
