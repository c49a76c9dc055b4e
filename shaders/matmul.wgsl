// Tiled, batched, strided GEMM: C = alpha · op(A) · op(B) (+ bias) (+ C if accumulate).
//
// op(A) is m×k, op(B) is k×n. Each workgroup computes a 64×64 tile of C with 8×8 invocations,
// each an 8×8 block held in sixteen vec4 registers. Per step of depth, op(A)[64×4] and
// op(B)[4×64] slabs are staged in workgroup memory as vec4s; every invocation then reads two
// vec4s of each and does 64 multiply-adds. The sizes were chosen by measurement on lavapipe,
// where every per-invocation memory access is a scalar loop over the SIMD lanes, so FLOPs per
// access is what counts: smaller blocks, 16×16 tiles of 4×4, or a depth of 8 or 16 were all
// slower there (see README, Performance).
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
const TILE_K: u32 = 4u;

var<workgroup> tile_a: array<vec4<f32>, 64>; // [TILE_K][TILE_M / 4]: rows 4q..4q+3 at depth kk
var<workgroup> tile_b: array<vec4<f32>, 64>; // [TILE_K][TILE_N / 4]: columns 4q..4q+3 at depth kk

// Where batch entry z = outer·heads + head starts in A, B and C (x, y, z).
fn batch_bases(z: u32) -> vec3<u32> {
    let outer = z / p.heads;
    let head = z % p.heads;
    return vec3<u32>(
        p.a_off + outer * p.a_outer + head * p.a_head,
        p.b_off + outer * p.b_outer + head * p.b_head,
        p.c_off + outer * p.c_outer + head * p.c_head,
    );
}

// Strides of op(X) for X stored row-major with leading dimension `ld`: (along op(X)'s rows,
// along its columns). A transposed X swaps them.
fn op_strides(trans: u32, ld: u32) -> vec2<u32> {
    if (trans != 0u) {
        return vec2<u32>(1u, ld);
    }
    return vec2<u32>(ld, 1u);
}

// Strides of op(A) along its rows and depth, and of op(B) along depth and its columns.
struct Strides { a_row: u32, a_k: u32, b_k: u32, b_col: u32 }

fn operand_strides() -> Strides {
    let a = op_strides(p.trans_a, p.lda);
    let b = op_strides(p.trans_b, p.ldb);
    return Strides(a.x, a.y, b.x, b.y);
}

@compute @workgroup_size(8, 8, 1)
fn gemm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let bases = batch_bases(wg.z);
    let a_base = bases.x;
    let b_base = bases.y;
    let c_base = bases.z;
    let row0 = wg.y * TILE_M;
    let col0 = wg.x * TILE_N;
    let tid = lid3.y * 8u + lid3.x;
    let st = operand_strides();
    var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0);
    var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
    var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0);
    var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
    var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0);
    var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
    var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0);
    var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 = k0 + TILE_K) {
        // Stage op(A)[row0 .. +64, k0 .. +4] and op(B)[k0 .. +4, col0 .. +64]: one vec4 of each
        // per invocation, zero outside the matrices.
        let kk = tid % TILE_K;
        let r = row0 + (tid / TILE_K) * 4u;
        tile_a[kk * 16u + tid / TILE_K] = vec4<f32>(
            load_a(a_base, r, k0 + kk, st.a_row, st.a_k),
            load_a(a_base, r + 1u, k0 + kk, st.a_row, st.a_k),
            load_a(a_base, r + 2u, k0 + kk, st.a_row, st.a_k),
            load_a(a_base, r + 3u, k0 + kk, st.a_row, st.a_k));
        let kb = tid / 16u;
        let cc = col0 + (tid % 16u) * 4u;
        tile_b[kb * 16u + tid % 16u] = vec4<f32>(
            load_b(b_base, k0 + kb, cc, st.b_k, st.b_col),
            load_b(b_base, k0 + kb, cc + 1u, st.b_k, st.b_col),
            load_b(b_base, k0 + kb, cc + 2u, st.b_k, st.b_col),
            load_b(b_base, k0 + kb, cc + 3u, st.b_k, st.b_col));
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
    // One row per iteration, not unrolled: the stores are the bulk of this kernel's code, and a
    // CPU driver compiles it at the first step (unrolled, ~0.3 s more).
    let row = row0 + lid3.y * 8u;
    let col = col0 + lid3.x * 8u;
    for (var r = 0u; r < 8u; r = r + 1u) {
        var lo = c00;
        var hi = c01;
        switch r {
            case 1u: { lo = c10; hi = c11; }
            case 2u: { lo = c20; hi = c21; }
            case 3u: { lo = c30; hi = c31; }
            case 4u: { lo = c40; hi = c41; }
            case 5u: { lo = c50; hi = c51; }
            case 6u: { lo = c60; hi = c61; }
            case 7u: { lo = c70; hi = c71; }
            default: {}
        }
        store_row(c_base, row + r, col, lo);
        store_row(c_base, row + r, col + 4u, hi);
    }
}

// Element (row, k) of op(A), zero outside m×k.
fn load_a(base: u32, row: u32, k: u32, row_stride: u32, k_stride: u32) -> f32 {
    if (row < p.m && k < p.k) {
        return a[base + row * row_stride + k * k_stride];
    }
    return 0.0;
}

// Element (k, col) of op(B), zero outside k×n; read from `a` when B is A's tensor.
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

// Writes up to four consecutive elements of one row of C: alpha·acc (+ bias) (+ C).
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
