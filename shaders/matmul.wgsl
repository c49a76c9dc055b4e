// Tiled, batched, strided GEMM: C = alpha · op(A) · op(B) (+ bias) (+ C if accumulate).
//
// op(A) is m×k, op(B) is k×n. Each workgroup computes a 64×64 tile of C with 16×16 threads,
// each thread a 4×4 block, staging 64×16 slabs of A and 16×64 slabs of B in workgroup memory.
// workgroup_id.z indexes a batch of (outer, head) pairs: z = outer·heads + head, so attention
// reads Q, K and V straight out of the fused qkv tensor through offsets and strides.
//
// Entry points:
//   gemm           — forward (x·W + b) and both backward products (dy·Wᵀ, xᵀ·dy)
//   bias_backward  — db[j] += Σ_rows dy[row, j]   (dy bound as `a`, db as `c`)
//
// Every storage binding is read_write, even inputs: tensors share allocator segments, and a
// buffer bound read-only and read-write in one dispatch is a usage conflict in WebGPU.
// Bindings never overlap; when A and B are the same tensor (QKᵀ), B is read from `a`.

struct Params {
    m: u32, n: u32, k: u32, heads: u32,
    a_off: u32, a_outer: u32, a_head: u32, lda: u32,
    b_off: u32, b_outer: u32, b_head: u32, ldb: u32,
    c_off: u32, c_outer: u32, c_head: u32, ldc: u32,
    trans_a: u32, trans_b: u32, has_bias: u32, accumulate: u32,
    b_from_a: u32, alpha: f32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;

const TILE_M: u32 = 64u;
const TILE_N: u32 = 64u;
const TILE_K: u32 = 16u;

var<workgroup> tile_a: array<f32, 1024>; // [TILE_K][TILE_M]
var<workgroup> tile_b: array<f32, 1024>; // [TILE_K][TILE_N]

// Element (row, col) of op(A), zero outside m×k.
fn load_a(base: u32, row: u32, col: u32) -> f32 {
    if (row >= p.m || col >= p.k) {
        return 0.0;
    }
    if (p.trans_a != 0u) {
        return a[base + col * p.lda + row];
    }
    return a[base + row * p.lda + col];
}

// Element (row, col) of op(B), zero outside k×n.
fn load_b(base: u32, row: u32, col: u32) -> f32 {
    if (row >= p.k || col >= p.n) {
        return 0.0;
    }
    var idx = base + row * p.ldb + col;
    if (p.trans_b != 0u) {
        idx = base + col * p.ldb + row;
    }
    if (p.b_from_a != 0u) {
        return a[idx];
    }
    return b[idx];
}

@compute @workgroup_size(16, 16, 1)
fn gemm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let outer = wg.z / p.heads;
    let head = wg.z % p.heads;
    let a_base = p.a_off + outer * p.a_outer + head * p.a_head;
    let b_base = p.b_off + outer * p.b_outer + head * p.b_head;
    let c_base = p.c_off + outer * p.c_outer + head * p.c_head;
    let row0 = wg.y * TILE_M;
    let col0 = wg.x * TILE_N;
    let tid = lid.y * 16u + lid.x;

    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < p.k; k0 = k0 + TILE_K) {
        for (var i = 0u; i < 4u; i = i + 1u) {
            let e = tid + i * 256u;
            let ka = e % TILE_K;
            let ra = e / TILE_K;
            tile_a[ka * TILE_M + ra] = load_a(a_base, row0 + ra, k0 + ka);
            let cb = e % TILE_N;
            let kb = e / TILE_N;
            tile_b[kb * TILE_N + cb] = load_b(b_base, k0 + kb, col0 + cb);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk = kk + 1u) {
            let ai = kk * TILE_M + lid.y * 4u;
            let bi = kk * TILE_N + lid.x * 4u;
            let av = vec4<f32>(tile_a[ai], tile_a[ai + 1u], tile_a[ai + 2u], tile_a[ai + 3u]);
            let bv = vec4<f32>(tile_b[bi], tile_b[bi + 1u], tile_b[bi + 2u], tile_b[bi + 3u]);
            acc[0] = acc[0] + av.x * bv;
            acc[1] = acc[1] + av.y * bv;
            acc[2] = acc[2] + av.z * bv;
            acc[3] = acc[3] + av.w * bv;
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < 4u; i = i + 1u) {
        let row = row0 + lid.y * 4u + i;
        if (row >= p.m) {
            continue;
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let col = col0 + lid.x * 4u + j;
            if (col >= p.n) {
                continue;
            }
            var v = p.alpha * acc[i][j];
            if (p.has_bias != 0u) {
                v = v + bias[col];
            }
            let idx = c_base + row * p.ldc + col;
            if (p.accumulate != 0u) {
                v = v + c[idx];
            }
            c[idx] = v;
        }
    }
}

// db[j] (+)= Σ_{row < m} dy[row·lda + j] for j < n. One thread per column.
@compute @workgroup_size(64, 1, 1)
fn bias_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    if (j >= p.n) {
        return;
    }
    var sum = 0.0;
    for (var row = 0u; row < p.m; row = row + 1u) {
        sum = sum + a[p.a_off + row * p.lda + j];
    }
    if (p.accumulate != 0u) {
        sum = sum + c[p.c_off + j];
    }
    c[p.c_off + j] = sum;
}
