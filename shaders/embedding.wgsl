// Token + position embedding.
//   forward       — out[r, i] = wte[tokens[r], i] + wpe[pos(r), i], one thread per element;
//                   pos(r) = r mod T, counted from the document's start in packed rows
//                   (doc_starts, when p.packed is set), or positions[r] where they are given
//                   (p.given: a serving step's tokens sit after the cached ones); a position
//                   past the table reads a zero row
//   backward_wte  — dwte[v, i] += Σ dout[p, i] over the positions p holding token v. The
//                   positions come grouped by token (token_offsets / token_positions, built
//                   with the batch), so each thread owns one output element: a deterministic
//                   scatter-add that stays correct when positions repeat a token, with no atomics.
//   backward_wpe  — dwpe[t, i] += Σ_b dout[b·T + t, i]. Packed rows' positions repeat within a
//                   row: their gradient is backward_wte's gather over the positions' index.
// Token ids were validated on upload; out-of-range ids read as zero rows rather than out of
// bounds. All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    rows: u32, t: u32, c: u32, vocab: u32,
    packed: u32, given: u32, positions_max: u32, _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> wte: array<f32>;
@group(0) @binding(3) var<storage, read_write> wpe: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> token_offsets: array<u32>;
@group(0) @binding(6) var<storage, read_write> token_positions: array<u32>;
@group(0) @binding(7) var<storage, read_write> dout: array<f32>;
@group(0) @binding(8) var<storage, read_write> dwte: array<f32>;
@group(0) @binding(9) var<storage, read_write> dwpe: array<f32>;
@group(0) @binding(10) var<storage, read_write> doc_starts: array<u32>;
@group(0) @binding(11) var<storage, read_write> positions: array<u32>;

@compute @workgroup_size(256, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = flat_id(wg, nwg, lid, 256u);
    if (idx >= p.rows * p.c) {
        return;
    }
    let r = idx / p.c;
    let i = idx % p.c;
    let tok = tokens[r];
    var e = 0.0;
    if (tok < p.vocab) {
        e = wte[tok * p.c + i];
    }
    var pos = r % p.t;
    if (p.packed != 0u) {
        pos = pos - min(doc_starts[r], pos);
    }
    var w = 0.0;
    if (p.given == 0u) {
        w = wpe[pos * p.c + i];
    } else if (positions[r] < p.positions_max) {
        w = wpe[positions[r] * p.c + i];
    }
    out[idx] = e + w;
}

@compute @workgroup_size(256, 1, 1)
fn backward_wte(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = flat_id(wg, nwg, lid, 256u);
    if (idx >= p.vocab * p.c) {
        return;
    }
    let v = idx / p.c;
    let i = idx % p.c;
    var sum = 0.0;
    for (var k = token_offsets[v]; k < token_offsets[v + 1u]; k = k + 1u) {
        sum = sum + dout[token_positions[k] * p.c + i];
    }
    dwte[idx] = dwte[idx] + sum;
}

@compute @workgroup_size(256, 1, 1)
fn backward_wpe(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = flat_id(wg, nwg, lid, 256u);
    if (idx >= p.t * p.c) {
        return;
    }
    let t = idx / p.c;
    let i = idx % p.c;
    var sum = 0.0;
    for (var r = t; r < p.rows; r = r + p.t) {
        sum = sum + dout[r * p.c + i];
    }
    dwpe[idx] = dwpe[idx] + sum;
}
