// Causal softmax of attention scores, in place on att (B, NH, T, T), one thread per row.
// The scores S = QKᵀ/√hs and the products P·V, dO·Vᵀ, Pᵀ·dO, dS·K, dSᵀ·Q run on the tiled
// GEMM in matmul.wgsl; this file holds the softmax and its backward.
//   softmax_forward   — P[t1, t2] = exp(S − max) / Σ exp(S − max) for lo ≤ t2 ≤ t1, else 0
//                       (numerically stable: the row maximum is subtracted first); lo is 0,
//                       or in packed rows the query's document start (doc_starts)
//   softmax_backward  — dS = P ⊙ (dP − Σ_t2 P·dP), in place on datt
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    rows: u32, t: u32, nh: u32, packed: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> att: array<f32>;
@group(0) @binding(2) var<storage, read_write> datt: array<f32>;
@group(0) @binding(3) var<storage, read_write> doc_starts: array<u32>;

@compute @workgroup_size(64, 1, 1)
fn softmax_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = flat_id(wg, nwg, lid, 64u);
    if (row >= p.rows) {
        return;
    }
    let t1 = row % p.t;
    let base = row * p.t;
    var lo = 0u;
    if (p.packed != 0u) {
        lo = min(doc_starts[(row / (p.nh * p.t)) * p.t + t1], t1);
    }
    var mx = att[base + lo];
    for (var t2 = lo + 1u; t2 <= t1; t2 = t2 + 1u) {
        mx = max(mx, att[base + t2]);
    }
    var sum = 0.0;
    for (var t2 = lo; t2 <= t1; t2 = t2 + 1u) {
        let e = exp(att[base + t2] - mx);
        att[base + t2] = e;
        sum = sum + e;
    }
    let inv = 1.0 / sum;
    for (var t2 = 0u; t2 < p.t; t2 = t2 + 1u) {
        if (lo <= t2 && t2 <= t1) {
            att[base + t2] = att[base + t2] * inv;
        } else {
            att[base + t2] = 0.0;
        }
    }
}

@compute @workgroup_size(64, 1, 1)
fn softmax_backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = flat_id(wg, nwg, lid, 64u);
    if (row >= p.rows) {
        return;
    }
    let t1 = row % p.t;
    let base = row * p.t;
    var dot = 0.0;
    for (var t2 = 0u; t2 <= t1; t2 = t2 + 1u) {
        dot = dot + att[base + t2] * datt[base + t2];
    }
    for (var t2 = 0u; t2 < p.t; t2 = t2 + 1u) {
        if (t2 <= t1) {
            datt[base + t2] = att[base + t2] * (datt[base + t2] - dot);
        } else {
            datt[base + t2] = 0.0;
        }
    }
}
