// Tiled, batched, strided GEMM: C = alpha · op(A) · op(B) (+ bias) (+ C if accumulate).
//
// op(A) is m×k, op(B) is k×n. Each workgroup computes a 16×64 tile of C with 64 invocations,
// staging 16×16 tiles of A in workgroup memory (see `gemm` for the access pattern).
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

var<workgroup> tile_a: array<vec4<f32>, 256>; // [TILE_K][TILE_M / 4]
var<workgroup> tile_b: array<vec4<f32>, 256>; // [TILE_K][TILE_N / 4]

@compute @workgroup_size(8, 8, 1)
fn gemm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let outer = wg.z / p.heads;
    let head = wg.z % p.heads;
    let a_base = p.a_off + outer * p.a_outer + head * p.a_head;
    let b_base = p.b_off + outer * p.b_outer + head * p.b_head;
    let c_base = p.c_off + outer * p.c_outer + head * p.c_head;
    let row0 = wg.y * TILE_M;
    let col0 = wg.x * TILE_N;
    let tid = lid3.y * 8u + lid3.x;
    var a_row_stride = p.lda;
    var a_k_stride = 1u;
    if (p.trans_a != 0u) {
        a_row_stride = 1u;
        a_k_stride = p.lda;
    }
    var b_k_stride = p.ldb;
    var b_col_stride = 1u;
    if (p.trans_b != 0u) {
        b_k_stride = 1u;
        b_col_stride = p.ldb;
    }
    var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0);
    var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
    var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0);
    var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
    var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0);
    var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
    var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0);
    var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 = k0 + TILE_K) {
        // Stage op(A)[row0.., k0..] and op(B)[k0.., col0..]: 256 vec4s each, 4 per invocation,
        // zero outside the matrices.
        for (var i = 0u; i < 4u; i = i + 1u) {
            let e = tid + i * 64u;
            let kk = e % TILE_K;
            let r4 = e / TILE_K;
            tile_a[kk * 16u + r4] = vec4<f32>(load_a(a_base, row0 + r4 * 4u, k0 + kk, a_row_stride, a_k_stride), load_a(a_base, row0 + r4 * 4u + 1u, k0 + kk, a_row_stride, a_k_stride), load_a(a_base, row0 + r4 * 4u + 2u, k0 + kk, a_row_stride, a_k_stride), load_a(a_base, row0 + r4 * 4u + 3u, k0 + kk, a_row_stride, a_k_stride));
            let c4 = e % 16u;
            let kb = e / 16u;
            tile_b[kb * 16u + c4] = vec4<f32>(load_b(b_base, k0 + kb, col0 + c4 * 4u, b_k_stride, b_col_stride), load_b(b_base, k0 + kb, col0 + c4 * 4u + 1u, b_k_stride, b_col_stride), load_b(b_base, k0 + kb, col0 + c4 * 4u + 2u, b_k_stride, b_col_stride), load_b(b_base, k0 + kb, col0 + c4 * 4u + 3u, b_k_stride, b_col_stride));
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk = kk + 1u) {
            let a0 = tile_a[kk * 16u + lid3.y * 2u];
            let a1 = tile_a[kk * 16u + lid3.y * 2u + 1u];
            let b0 = tile_b[kk * 16u + lid3.x * 2u];
            let b1 = tile_b[kk * 16u + lid3.x * 2u + 1u];
            c00 = c00 + a0.x * b0; c01 = c01 + a0.x * b1;
            c10 = c10 + a0.y * b0; c11 = c11 + a0.y * b1;
            c20 = c20 + a0.z * b0; c21 = c21 + a0.z * b1;
            c30 = c30 + a0.w * b0; c31 = c31 + a0.w * b1;
            c40 = c40 + a1.x * b0; c41 = c41 + a1.x * b1;
            c50 = c50 + a1.y * b0; c51 = c51 + a1.y * b1;
            c60 = c60 + a1.z * b0; c61 = c61 + a1.z * b1;
            c70 = c70 + a1.w * b0; c71 = c71 + a1.w * b1;
        }
        workgroupBarrier();
    }
    let row = row0 + lid3.y * 8u;
    let col = col0 + lid3.x * 8u;
    store_row(c_base, row, col, c00); store_row(c_base, row, col + 4u, c01);
    store_row(c_base, row + 1u, col, c10); store_row(c_base, row + 1u, col + 4u, c11);
    store_row(c_base, row + 2u, col, c20); store_row(c_base, row + 2u, col + 4u, c21);
    store_row(c_base, row + 3u, col, c30); store_row(c_base, row + 3u, col + 4u, c31);
    store_row(c_base, row + 4u, col, c40); store_row(c_base, row + 4u, col + 4u, c41);
    store_row(c_base, row + 5u, col, c50); store_row(c_base, row + 5u, col + 4u, c51);
    store_row(c_base, row + 6u, col, c60); store_row(c_base, row + 6u, col + 4u, c61);
    store_row(c_base, row + 7u, col, c70); store_row(c_base, row + 7u, col + 4u, c71);
}

fn load_a(base: u32, row: u32, k: u32, row_stride: u32, k_stride: u32) -> f32 {
    if (row < p.m && k < p.k) {
        return a[base + row * row_stride + k * k_stride];
    }
    return 0.0;
}

fn load_b(base: u32, k: u32, col: u32, k_stride: u32, col_stride: u32) -> f32 {
    if (k < p.k && col < p.n) {
        let bi = base + k * k_stride + col * col_stride;
        if (p.b_from_a != 0u) {
            return a[bi];
        }
        return b[bi];
    }
    return 0.0;
}

fn store_row(c_base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
        if (col + j < p.n) {
            let idx = c_base + row * p.ldc + col + j;
            var v = p.alpha * acc[j];
            if (p.has_bias != 0u) {
                v = v + bias[col + j];
            }
            if (p.accumulate != 0u) {
                v = v + c[idx];
            }
            c[idx] = v;
        }
    }
}

// db[j] (+)= Σ_{row < m} dy[row·lda + j] for j < n. One invocation per column.
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
