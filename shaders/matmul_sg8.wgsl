// Loaded after matmul.wgsl (kernels::SHADERS), whose Params and bindings it uses: a second
// entry point for the same GEMM (same result: C = alpha · op(A) · op(B) (+ bias) (+ C if
// accumulate)), written for 8-wide subgroups. A file of its own because only devices with
// subgroups may load it. Picked instead of matmul.wgsl's `gemm` where the device has subgroups
// of exactly 8 lanes (lavapipe on AVX2 hosts), natively (see `GemmKind`). CPU twin: the same as matmul.wgsl's (`cpu::ops::matmul_forward`/`_backward`).
// B is always read from `b` (`b_from_a` is ignored): when B is A's tensor (QKᵀ), the same view is
// bound to both (native only, where bindings may alias).
//
// Why a variant: on a CPU Vulkan driver every per-invocation load or store (storage or
// workgroup memory) is a scalar loop over the SIMD lanes, while arithmetic is one vector
// instruction for all lanes. So this kernel keeps operands in registers and shares them through
// subgroup broadcasts instead of workgroup memory: per step of depth, each lane loads four
// values of op(B) (its columns) and two of op(A) (rows l and 8 + l), then broadcasts the 16 A
// values of its subgroup's rows in turn — 6 memory accesses per 64 multiply-adds, against ~20
// for the tiled kernel. No workgroup memory, no barriers.
//
// Layout: a workgroup of 64 invocations is 8 subgroups (`subgroup_id`), 4 (rows) × 2 (columns);
// each computes 16 rows × 32 columns, lane l owning columns l, l + 8, l + 16, l + 24 of its block.
// Sizes by measurement on lavapipe (1024³, GFLOP/s): 16×32 per subgroup ~20; 16×64 16–22;
// 32×32 ~19; 8×64 ~14; 32×64 ~30 but its pipeline takes ~5 s to compile (256 accumulators),
// which the first step cannot afford; 64×64 ~29 and ~28 s to compile.
// The workgroup's tile is 64 × 64, as the tiled kernel's, so the grid is the same.
// Out-of-range rows and columns are clamped to the last one when read (their results are never
// stored), so the inner loop has no branches.

@compute @workgroup_size(64, 1, 1)
fn gemm_sg8(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let bases = batch_bases(wg.z);
    let a_base = bases.x;
    let b_base = bases.y;
    let c_base = bases.z;
    let row0 = wg.y * 64u + (sg / 2u) * 16u;
    let col0 = wg.x * 64u + (sg % 2u) * 32u;
    let st = operand_strides();
    let last_row = max(p.m, 1u) - 1u;
    let last_col = max(p.n, 1u) - 1u;
    var ia0 = a_base + min(row0 + lane, last_row) * st.a_row;
    var ia1 = a_base + min(row0 + 8u + lane, last_row) * st.a_row;
    var ib = b_base + vec4<u32>(
        min(col0 + lane, last_col),
        min(col0 + 8u + lane, last_col),
        min(col0 + 16u + lane, last_col),
        min(col0 + 24u + lane, last_col)) * st.b_col;
    var c0 = vec4<f32>(0.0); var c1 = vec4<f32>(0.0); var c2 = vec4<f32>(0.0); var c3 = vec4<f32>(0.0);
    var c4 = vec4<f32>(0.0); var c5 = vec4<f32>(0.0); var c6 = vec4<f32>(0.0); var c7 = vec4<f32>(0.0);
    var c8 = vec4<f32>(0.0); var c9 = vec4<f32>(0.0); var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
    var c12 = vec4<f32>(0.0); var c13 = vec4<f32>(0.0); var c14 = vec4<f32>(0.0); var c15 = vec4<f32>(0.0);
    for (var k = 0u; k < p.k; k = k + 1u) {
        let x0 = a[ia0];
        let x1 = a[ia1];
        let y = vec4<f32>(b[ib.x], b[ib.y], b[ib.z], b[ib.w]);
        ia0 = ia0 + st.a_k;
        ia1 = ia1 + st.a_k;
        ib = ib + vec4<u32>(st.b_k);
        c0 = c0 + subgroupBroadcast(x0, 0u) * y;
        c1 = c1 + subgroupBroadcast(x0, 1u) * y;
        c2 = c2 + subgroupBroadcast(x0, 2u) * y;
        c3 = c3 + subgroupBroadcast(x0, 3u) * y;
        c4 = c4 + subgroupBroadcast(x0, 4u) * y;
        c5 = c5 + subgroupBroadcast(x0, 5u) * y;
        c6 = c6 + subgroupBroadcast(x0, 6u) * y;
        c7 = c7 + subgroupBroadcast(x0, 7u) * y;
        c8 = c8 + subgroupBroadcast(x1, 0u) * y;
        c9 = c9 + subgroupBroadcast(x1, 1u) * y;
        c10 = c10 + subgroupBroadcast(x1, 2u) * y;
        c11 = c11 + subgroupBroadcast(x1, 3u) * y;
        c12 = c12 + subgroupBroadcast(x1, 4u) * y;
        c13 = c13 + subgroupBroadcast(x1, 5u) * y;
        c14 = c14 + subgroupBroadcast(x1, 6u) * y;
        c15 = c15 + subgroupBroadcast(x1, 7u) * y;
    }
    // One row per iteration, not unrolled: the stores' per-lane loops are the bulk of this
    // kernel's code, and a CPU driver compiles it at the first step (16 inlined copies cost
    // ~0.45 s there).
    let cols = col0 + lane;
    for (var r = 0u; r < 16u; r = r + 1u) {
        var acc = c0;
        switch r {
            case 1u: { acc = c1; }
            case 2u: { acc = c2; }
            case 3u: { acc = c3; }
            case 4u: { acc = c4; }
            case 5u: { acc = c5; }
            case 6u: { acc = c6; }
            case 7u: { acc = c7; }
            case 8u: { acc = c8; }
            case 9u: { acc = c9; }
            case 10u: { acc = c10; }
            case 11u: { acc = c11; }
            case 12u: { acc = c12; }
            case 13u: { acc = c13; }
            case 14u: { acc = c14; }
            case 15u: { acc = c15; }
            default: {}
        }
        store4(c_base, row0 + r, cols, acc);
    }
}

// Writes row `row`, columns col, col + 8, col + 16, col + 24 of C: alpha·acc (+ bias) (+ C).
fn store4(c_base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
        let cj = col + j * 8u;
        if (cj < p.n) {
            let idx = c_base + row * p.ldc + cj;
            var v = p.alpha * acc[j];
            if (p.has_bias != 0u) {
                v = v + bias[cj];
            }
            if (p.accumulate != 0u) {
                v = v + c[idx];
            }
            c[idx] = v;
        }
    }
}
