// Fused causal self-attention, FlashAttention-style (Dao et al. 2022). The T×T score matrix is
// never stored: scores live in registers one tile of keys at a time.
//
// Layouts: qkv (B,T,3C), Q at column h·hs, K at C + h·hs, V at 2C + h·hs; out and dout (B,T,C);
// lse and delta (B,NH,T). One workgroup takes QT consecutive rows (queries or keys) of one
// (batch, head) pair; one invocation owns one row and keeps its vectors (≤ 64 floats each) in
// private memory. The other side streams through workgroup memory in tiles of KT rows.
//   forward      — online softmax over key tiles: running max m, running sum l, rescaled
//                  accumulator; out = acc / l, lse = m + log l (all the backward keeps).
//   backward_dq  — per query row: delta = dout·out, then over key tiles p = exp(s − lse),
//                  dp = dout·v, ds = p·(dp − delta), dq += ds·k·scale. Writes delta and dq.
//   backward_dkv — per key row, over query tiles t1 ≥ t2: dv += p·dout, dk += ds·q·scale.
//                  Reads delta from backward_dq (the next dispatch).
// Packed rows (p.packed): a query sees only the keys of its own document, from doc_starts[query]
// on; whole tiles before it are skipped, a tile that straddles it skips its first keys.
// Every element of dqkv is written exactly once (no atomics, deterministic).
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    b: u32, t: u32, c: u32, nh: u32,
    hs: u32, scale: f32, packed: u32, _pad1: u32,
}

const QT: u32 = 64u;
const KT: u32 = 16u;
const MAXHS: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<storage, read_write> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> delta: array<f32>;
@group(0) @binding(6) var<storage, read_write> dqkv: array<f32>;
@group(0) @binding(7) var<storage, read_write> doc_starts: array<u32>;

var<workgroup> tile_a: array<f32, 1024>; // KT × MAXHS: K (forward, dq) or Q (dkv)
var<workgroup> tile_b: array<f32, 1024>; // KT × MAXHS: V (forward, dq) or dout (dkv)
var<workgroup> tile_s: array<f32, 32>;   // lse and delta of a query tile (dkv)

// Element offset of row `row` of part `part` (0 q, 1 k, 2 v) of head `h` in qkv.
fn qkv_at(bi: u32, row: u32, part: u32, h: u32) -> u32 {
    return (bi * p.t + row) * 3u * p.c + part * p.c + h * p.hs;
}

// The first key query `t1` of batch row `bi` sees: its document's start in packed rows, else 0.
fn first_key(bi: u32, t1: u32) -> u32 {
    if (p.packed == 0u || t1 >= p.t) {
        return 0u;
    }
    return min(doc_starts[bi * p.t + t1], t1);
}

// Loads `KT` rows starting at `start` of qkv parts `pa` and `pb` into the tiles (zero past T).
fn load_kv(bi: u32, h: u32, start: u32, pa: u32, pb: u32, lid: u32) {
    for (var e = lid; e < KT * p.hs; e = e + QT) {
        let r = e / p.hs;
        let i = e % p.hs;
        let row = start + r;
        var a = 0.0;
        var b = 0.0;
        if (row < p.t) {
            a = qkv[qkv_at(bi, row, pa, h) + i];
            b = qkv[qkv_at(bi, row, pb, h) + i];
        }
        tile_a[r * MAXHS + i] = a;
        tile_b[r * MAXHS + i] = b;
    }
}

@compute @workgroup_size(64, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let bi = wg.y / p.nh;
    let h = wg.y % p.nh;
    let t1 = wg.x * QT + lid.x;
    let live = t1 < p.t;
    var q: array<f32, 64>;
    var acc: array<f32, 64>;
    if (live) {
        for (var i = 0u; i < p.hs; i = i + 1u) {
            q[i] = qkv[qkv_at(bi, t1, 0u, h) + i] * p.scale;
            acc[i] = 0.0;
        }
    }
    var m = -3.0e38;
    var l = 0.0;
    let lo = first_key(bi, t1);
    // Key tiles up to the last query row of this workgroup (causal).
    let last = min(wg.x * QT + QT, p.t);
    for (var start = 0u; start < last; start = start + KT) {
        workgroupBarrier();
        load_kv(bi, h, start, 1u, 2u, lid.x);
        workgroupBarrier();
        if (live && start <= t1 && start + KT > lo) {
            let n = min(KT, t1 + 1u - start);
            var s: array<f32, 16>;
            var mt = m;
            let j0 = max(lo, start) - start;
            for (var j = j0; j < n; j = j + 1u) {
                var dot = 0.0;
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    dot = dot + q[i] * tile_a[j * MAXHS + i];
                }
                s[j] = dot;
                mt = max(mt, dot);
            }
            let corr = exp(m - mt);
            l = l * corr;
            for (var i = 0u; i < p.hs; i = i + 1u) {
                acc[i] = acc[i] * corr;
            }
            for (var j = j0; j < n; j = j + 1u) {
                let e = exp(s[j] - mt);
                l = l + e;
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    acc[i] = acc[i] + e * tile_b[j * MAXHS + i];
                }
            }
            m = mt;
        }
    }
    if (live) {
        let inv = 1.0 / l;
        for (var i = 0u; i < p.hs; i = i + 1u) {
            out[(bi * p.t + t1) * p.c + h * p.hs + i] = acc[i] * inv;
        }
        lse[(bi * p.nh + h) * p.t + t1] = m + log(l);
    }
}

@compute @workgroup_size(64, 1, 1)
fn backward_dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let bi = wg.y / p.nh;
    let h = wg.y % p.nh;
    let t1 = wg.x * QT + lid.x;
    let live = t1 < p.t;
    var q: array<f32, 64>;
    var g: array<f32, 64>;
    var dq: array<f32, 64>;
    var d = 0.0;
    var row_lse = 0.0;
    if (live) {
        let o = (bi * p.t + t1) * p.c + h * p.hs;
        for (var i = 0u; i < p.hs; i = i + 1u) {
            q[i] = qkv[qkv_at(bi, t1, 0u, h) + i] * p.scale;
            g[i] = dout[o + i];
            d = d + g[i] * out[o + i];
            dq[i] = 0.0;
        }
        row_lse = lse[(bi * p.nh + h) * p.t + t1];
        delta[(bi * p.nh + h) * p.t + t1] = d;
    }
    let lo = first_key(bi, t1);
    let last = min(wg.x * QT + QT, p.t);
    for (var start = 0u; start < last; start = start + KT) {
        workgroupBarrier();
        load_kv(bi, h, start, 1u, 2u, lid.x);
        workgroupBarrier();
        if (live && start <= t1 && start + KT > lo) {
            let n = min(KT, t1 + 1u - start);
            for (var j = max(lo, start) - start; j < n; j = j + 1u) {
                var s = 0.0;
                var dp = 0.0;
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    s = s + q[i] * tile_a[j * MAXHS + i];
                    dp = dp + g[i] * tile_b[j * MAXHS + i];
                }
                let ds = exp(s - row_lse) * (dp - d) * p.scale;
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    dq[i] = dq[i] + ds * tile_a[j * MAXHS + i];
                }
            }
        }
    }
    if (live) {
        for (var i = 0u; i < p.hs; i = i + 1u) {
            dqkv[qkv_at(bi, t1, 0u, h) + i] = dq[i];
        }
    }
}

@compute @workgroup_size(64, 1, 1)
fn backward_dkv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let bi = wg.y / p.nh;
    let h = wg.y % p.nh;
    let t2 = wg.x * QT + lid.x;
    let live = t2 < p.t;
    var k: array<f32, 64>;
    var v: array<f32, 64>;
    var dk: array<f32, 64>;
    var dv: array<f32, 64>;
    if (live) {
        for (var i = 0u; i < p.hs; i = i + 1u) {
            k[i] = qkv[qkv_at(bi, t2, 1u, h) + i];
            v[i] = qkv[qkv_at(bi, t2, 2u, h) + i];
            dk[i] = 0.0;
            dv[i] = 0.0;
        }
    }
    // Query tiles from the first row of this workgroup on (causal: t1 ≥ t2).
    let first = wg.x * QT;
    for (var start = first - first % KT; start < p.t; start = start + KT) {
        workgroupBarrier();
        for (var e = lid.x; e < KT * p.hs; e = e + QT) {
            let r = e / p.hs;
            let i = e % p.hs;
            let row = start + r;
            var a = 0.0;
            var b = 0.0;
            if (row < p.t) {
                a = qkv[qkv_at(bi, row, 0u, h) + i] * p.scale;
                b = dout[(bi * p.t + row) * p.c + h * p.hs + i];
            }
            tile_a[r * MAXHS + i] = a;
            tile_b[r * MAXHS + i] = b;
        }
        if (lid.x < KT) {
            let row = start + lid.x;
            var a = 0.0;
            var b = 0.0;
            if (row < p.t) {
                a = lse[(bi * p.nh + h) * p.t + row];
                b = delta[(bi * p.nh + h) * p.t + row];
            }
            tile_s[lid.x] = a;
            tile_s[KT + lid.x] = b;
        }
        workgroupBarrier();
        if (live) {
            for (var j = 0u; j < KT; j = j + 1u) {
                let t1 = start + j;
                if (t1 < t2 || t1 >= p.t || first_key(bi, t1) > t2) {
                    continue;
                }
                var s = 0.0;
                var dp = 0.0;
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    s = s + tile_a[j * MAXHS + i] * k[i];
                    dp = dp + tile_b[j * MAXHS + i] * v[i];
                }
                let pr = exp(s - tile_s[j]);
                let ds = pr * (dp - tile_s[KT + j]);
                for (var i = 0u; i < p.hs; i = i + 1u) {
                    dv[i] = dv[i] + pr * tile_b[j * MAXHS + i];
                    // tile_a holds q·scale, so ds·q·scale needs no other factor.
                    dk[i] = dk[i] + ds * tile_a[j * MAXHS + i];
                }
            }
        }
    }
    if (live) {
        for (var i = 0u; i < p.hs; i = i + 1u) {
            dqkv[qkv_at(bi, t2, 1u, h) + i] = dk[i];
            dqkv[qkv_at(bi, t2, 2u, h) + i] = dv[i];
        }
    }
}
