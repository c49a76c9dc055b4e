//! Each kernel, forward and backward, against its CPU twin on random inputs of awkward shapes
//! (not multiples of the 64×64×16 GEMM tile or the 64/256-wide workgroups).

mod common;

use common::{Case, compare, gemm_gpus};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Op, OptimizerConfig, OptimizerKind, op};

const TOL: f64 = 1e-4;

fn model(vocab: usize, seq_len: usize, d_model: usize, n_heads: usize) -> ModelConfig {
    ModelConfig { vocab, seq_len, d_model, n_layers: 1, n_heads }
}

/// lavapipe (the test and CI device: 8-lane subgroups on AVX2 hosts) gets the subgroup GEMM,
/// so the tests below run both GEMM kernels there; forcing the tiled one works.
#[test]
fn lavapipe_runs_the_subgroup_gemm() {
    use oomlab::backend::gpu::kernels::GemmKind;
    let g = common::gpu();
    let info = &g.ctx.adapter_info;
    println!("{} subgroups {}..{}", info.name, info.subgroup_min_size, info.subgroup_max_size);
    if info.name.starts_with("llvmpipe") && info.name.contains("256 bits") {
        assert_eq!(g.kernels.matmul.gemm.kind(), GemmKind::Subgroup8, "{info:?}");
    }
    assert_eq!(common::gpu_tiled().kernels.matmul.gemm.kind(), GemmKind::Tiled);
}

#[test]
fn matmul_forward_and_backward_match_cpu() {
    // (rows, k, n, transposed, bias, frozen: no weight gradient, accumulate into dinp)
    for &(rows, k, n, transposed, bias, frozen, accumulate) in &[
        (37, 19, 70, false, true, false, false),
        (130, 64, 200, false, false, false, true),
        (65, 33, 17, true, false, false, false),
        (1, 5, 3, false, true, false, false),
        (50, 24, 40, false, true, true, true),
        (65, 33, 17, true, false, true, false),
    ] {
        let mut case = Case::new(model(11, 8, 8, 2), StepShape { batch: 1, seq: 8 }, rows as u64);
        let inp = case.input("inp", &[rows, k], 1.0);
        let w = case.input("w", &[k, n], 0.5);
        let b = bias.then(|| case.input("b", &[n], 0.5));
        let out = case.output("out", &[rows, n]);
        let dout = case.input("dout", &[rows, n], 1.0);
        let dinp = if accumulate { case.input("dinp", &[rows, k], 1.0) } else { case.output("dinp", &[rows, k]) };
        // accumulated into: start from random values to check `+=`
        let dw = (!frozen).then(|| case.input("dw", &[k, n], 0.1));
        let db = bias.then(|| case.input("db", &[n], 0.1));
        case.op(Op::Matmul(op::Matmul {
            inp,
            weight: w,
            bias: b,
            out,
            rows: rows as u64,
            k: k as u64,
            n: n as u64,
            weight_transposed: transposed,
        }));
        case.op(Op::MatmulBackward(op::MatmulBackward {
            inp,
            weight: w,
            dout,
            dinp,
            dweight: dw,
            dbias: db,
            rows: rows as u64,
            k: k as u64,
            n: n as u64,
            weight_transposed: transposed,
            accumulate,
        }));
        for g in gemm_gpus() {
            let (cpu, gpu) = case.run_on(g, OptimizerConfig::default(), 1);
            let kernel = g.kernels.matmul.gemm.kind().name();
            let tag = format!("matmul {kernel} {rows}x{k}x{n} T={transposed} frozen={frozen} accumulate={accumulate}");
            compare(&format!("{tag} forward"), &cpu, &gpu, out, TOL);
            compare(&format!("{tag} dinp"), &cpu, &gpu, dinp, TOL);
            if let Some(dw) = dw {
                compare(&format!("{tag} dweight"), &cpu, &gpu, dw, TOL);
            }
            if let Some(db) = db {
                compare(&format!("{tag} dbias"), &cpu, &gpu, db, TOL);
            }
        }
    }
}

/// LoRA's up-projection: out += α·h·B and its backward.
#[test]
fn matmul_add_matches_cpu() {
    for &(rows, k, n, alpha) in &[(37, 4, 70, 2.0), (130, 8, 64, 0.5), (1, 1, 3, 1.0)] {
        let mut case = Case::new(model(11, 8, 8, 2), StepShape { batch: 1, seq: 8 }, rows as u64 + 7);
        let inp = case.input("h", &[rows, k], 1.0);
        let w = case.input("B", &[k, n], 0.5);
        let out = case.input("out", &[rows, n], 1.0);
        let dout = case.input("dout", &[rows, n], 1.0);
        let dinp = case.output("dh", &[rows, k]);
        let dw = case.input("dB", &[k, n], 0.1);
        case.op(Op::MatmulAdd(op::MatmulAdd {
            inp,
            weight: w,
            out,
            rows: rows as u64,
            k: k as u64,
            n: n as u64,
            alpha,
        }));
        case.op(Op::MatmulAddBackward(op::MatmulAddBackward {
            inp,
            weight: w,
            dout,
            dinp,
            dweight: dw,
            rows: rows as u64,
            k: k as u64,
            n: n as u64,
            alpha,
        }));
        for g in gemm_gpus() {
            let (cpu, gpu) = case.run_on(g, OptimizerConfig::default(), 1);
            let tag = format!("matmul_add {} {rows}x{k}x{n} α={alpha}", g.kernels.matmul.gemm.kind().name());
            compare(&format!("{tag} forward"), &cpu, &gpu, out, TOL);
            compare(&format!("{tag} dinp"), &cpu, &gpu, dinp, TOL);
            compare(&format!("{tag} dweight"), &cpu, &gpu, dw, TOL);
        }
    }
}

#[test]
fn layernorm_forward_and_backward_match_cpu() {
    for &(rows, c, accumulate) in &[(37, 19, false), (70, 64, true), (3, 100, true)] {
        let mut case = Case::new(model(11, 8, c, 1), StepShape { batch: 1, seq: 8 }, c as u64);
        let inp = case.input("inp", &[rows, c], 2.0);
        let w = case.input("w", &[c], 1.0);
        let b = case.input("b", &[c], 1.0);
        let out = case.output("out", &[rows, c]);
        let mean = case.output("mean", &[rows]);
        let rstd = case.output("rstd", &[rows]);
        let dout = case.input("dout", &[rows, c], 1.0);
        let dinp = case.input("dinp", &[rows, c], 1.0);
        let dw = case.input("dw", &[c], 0.1);
        let db = case.input("db", &[c], 0.1);
        let (dweight, dbias) = (Some(dw), Some(db));
        case.op(Op::LayerNorm(op::LayerNorm { inp, weight: w, bias: b, out, mean, rstd }));
        case.op(Op::LayerNormBackward(op::LayerNormBackward {
            inp,
            weight: w,
            mean,
            rstd,
            dout,
            dinp,
            dweight,
            dbias,
            accumulate,
        }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("layernorm {rows}x{c}");
        compare(&format!("{tag} forward"), &cpu, &gpu, out, TOL);
        compare(&format!("{tag} mean"), &cpu, &gpu, mean, TOL);
        compare(&format!("{tag} rstd"), &cpu, &gpu, rstd, TOL);
        compare(&format!("{tag} dinp (accumulate={accumulate})"), &cpu, &gpu, dinp, TOL);
        compare(&format!("{tag} dweight"), &cpu, &gpu, dw, TOL);
        compare(&format!("{tag} dbias"), &cpu, &gpu, db, TOL);
    }
}

#[test]
fn attention_forward_and_backward_match_cpu() {
    // T 260, head size 64: each head's products (260×64×260) are large enough for the CPU twin
    // to split them by rows over its threads, inside buffers that hold the other heads too.
    for &(b, t, c, nh) in &[(2, 13, 12, 3), (1, 70, 16, 2), (3, 5, 8, 8), (1, 260, 128, 2)] {
        let mut case = Case::new(model(11, t, c, nh), StepShape { batch: b, seq: t }, t as u64);
        let qkv = case.input("qkv", &[b, t, 3 * c], 1.0);
        let att = case.output("att", &[b, nh, t, t]);
        let out = case.output("out", &[b, t, c]);
        let dout = case.input("dout", &[b, t, c], 1.0);
        let datt = case.output("datt", &[b, nh, t, t]);
        let dqkv = case.output("dqkv", &[b, t, 3 * c]);
        case.op(Op::Attention(op::Attention { qkv, att, out, packing: None }));
        case.op(Op::AttentionBackward(op::AttentionBackward { qkv, att, dout, datt, dqkv }));
        for g in gemm_gpus() {
            let (cpu, gpu) = case.run_on(g, OptimizerConfig::default(), 1);
            let tag = format!("attention {} B{b} T{t} C{c} NH{nh}", g.kernels.matmul.gemm.kind().name());
            compare(&format!("{tag} probs"), &cpu, &gpu, att, TOL);
            compare(&format!("{tag} forward"), &cpu, &gpu, out, TOL);
            compare(&format!("{tag} dqkv"), &cpu, &gpu, dqkv, TOL);
        }
    }
}

#[test]
fn fused_attention_matches_cpu_and_the_standard_path() {
    // T 70 and 130: several 64-row workgroups and 16-key tiles; head size 64: the largest.
    for &(b, t, c, nh) in &[(2, 13, 12, 3), (1, 70, 16, 2), (3, 5, 8, 8), (1, 130, 128, 2)] {
        let mut case = Case::new(model(11, t, c, nh), StepShape { batch: b, seq: t }, t as u64 + 1);
        let qkv = case.input("qkv", &[b, t, 3 * c], 1.0);
        let dout = case.input("dout", &[b, t, c], 1.0);
        let att = case.output("att", &[b, nh, t, t]);
        let out_std = case.output("out_std", &[b, t, c]);
        let datt = case.output("datt", &[b, nh, t, t]);
        let dqkv_std = case.output("dqkv_std", &[b, t, 3 * c]);
        let out = case.output("out", &[b, t, c]);
        let lse = case.output("lse", &[b, nh, t]);
        let delta = case.output("delta", &[b, nh, t]);
        let dqkv = case.output("dqkv", &[b, t, 3 * c]);
        case.op(Op::Attention(op::Attention { qkv, att, out: out_std, packing: None }));
        case.op(Op::AttentionBackward(op::AttentionBackward { qkv, att, dout, datt, dqkv: dqkv_std }));
        case.op(Op::FlashAttention(op::FlashAttention { qkv, out, lse, packing: None }));
        case.op(Op::FlashAttentionBackward(op::FlashAttentionBackward {
            qkv,
            out,
            lse,
            dout,
            delta,
            dqkv,
            packing: None,
        }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("fused attention B{b} T{t} C{c} NH{nh}");
        compare(&format!("{tag} forward"), &cpu, &gpu, out, TOL);
        compare(&format!("{tag} lse"), &cpu, &gpu, lse, TOL);
        compare(&format!("{tag} dqkv"), &cpu, &gpu, dqkv, TOL);
        // The fused path computes the same function as the standard one.
        for (name, fused, standard) in [("output", out, out_std), ("dqkv", dqkv, dqkv_std)] {
            let (f, s) = (cpu.tensor(fused.tensor), cpu.tensor(standard.tensor));
            assert_eq!(f.len(), s.len());
            // f32 sums in a different order: compare against the tensor's largest magnitude.
            let scale = s.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let worst = f.iter().zip(s).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max) / scale;
            assert!(worst < 1e-5, "{tag}: fused {name} differs from standard by {worst:e} of its largest value");
        }
        // lse is the log of the softmax denominator: exp(score − lse) sums to 1 over a row.
        let l = cpu.tensor(lse.tensor);
        let x = cpu.tensor(qkv.tensor);
        let hs = c / nh;
        let row_sum: f32 = (0..t)
            .map(|t2| {
                let s: f32 =
                    (0..hs).map(|i| x[(t - 1) * 3 * c + i] * x[t2 * 3 * c + c + i]).sum::<f32>() / (hs as f32).sqrt();
                (s - l[t - 1]).exp()
            })
            .sum();
        assert!((row_sum - 1.0).abs() < 1e-4, "{tag}: probabilities from lse sum to {row_sum}");
    }
}

#[test]
fn softmax_is_stable_for_huge_scores() {
    // Scores of ±1e4 overflow a naive exp; the max-subtracted softmax stays finite.
    let (b, t, c, nh) = (1, 9, 4, 1);
    let mut case = Case::new(model(11, t, c, nh), StepShape { batch: b, seq: t }, 5);
    let qkv = case.input("qkv", &[b, t, 3 * c], 300.0);
    let att = case.output("att", &[b, nh, t, t]);
    let out = case.output("out", &[b, t, c]);
    case.op(Op::Attention(op::Attention { qkv, att, out, packing: None }));
    let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
    let probs = pollster::block_on(gpu.read_view_async(att)).expect("readback");
    assert!(probs.iter().all(|p| p.is_finite()));
    for row in probs.chunks(t) {
        let s: f32 = row.iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "row sums to {s}");
    }
    compare("attention huge scores", &cpu, &gpu, att, TOL);
}

#[test]
fn gelu_and_residual_match_cpu() {
    let n = 1000;
    let mut case = Case::new(model(11, 8, 8, 1), StepShape { batch: 1, seq: 8 }, 9);
    let inp = case.input("inp", &[n], 3.0);
    let other = case.input("other", &[n], 1.0);
    let out = case.output("out", &[n]);
    let dout = case.input("dout", &[n], 1.0);
    let dinp = case.output("dinp", &[n]);
    let sum = case.output("sum", &[n]);
    let da = case.output("da", &[n]);
    case.op(Op::Gelu(op::Gelu { inp, out }));
    case.op(Op::GeluBackward(op::GeluBackward { inp, dout, dinp }));
    case.op(Op::Residual(op::Residual { a: inp, b: other, out: sum }));
    case.op(Op::ResidualBackward(op::ResidualBackward { dout, da }));
    let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
    compare("gelu forward", &cpu, &gpu, out, TOL);
    compare("gelu backward", &cpu, &gpu, dinp, TOL);
    compare("residual forward", &cpu, &gpu, sum, TOL);
    compare("residual backward", &cpu, &gpu, da, TOL);
}

#[test]
fn embedding_backward_is_correct_with_repeated_tokens() {
    let (b, t, c, v) = (3, 7, 10, 6);
    let mut case = Case::new(model(v, t, c, 1), StepShape { batch: b, seq: t }, 11);
    // token 2 repeats many times, token 5 never appears
    let ids: Vec<u32> = vec![2, 2, 2, 0, 1, 2, 3, 4, 2, 2, 0, 0, 1, 2, 2, 3, 3, 4, 1, 2, 2];
    let (offsets, positions) = oomlab::data::token_index(&ids, v);
    let tokens = case.input_u32("tokens", ids);
    let token_offsets = case.input_u32("offsets", offsets);
    let token_positions = case.input_u32("positions", positions);
    let wte = case.input("wte", &[v, c], 1.0);
    let wpe = case.input("wpe", &[t, c], 1.0);
    let out = case.output("out", &[b, t, c]);
    let dout = case.input("dout", &[b, t, c], 1.0);
    let dwte = case.input("dwte", &[v, c], 0.1);
    let dwpe = case.input("dwpe", &[t, c], 0.1);
    case.op(Op::Embedding(op::Embedding { tokens, wte, wpe, out, packing: None, positions: None }));
    case.op(Op::EmbeddingBackward(op::EmbeddingBackward {
        tokens,
        token_offsets,
        token_positions,
        dout,
        dwte,
        dwpe,
        packing: None,
    }));
    let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
    compare("embedding forward", &cpu, &gpu, out, TOL);
    compare("embedding backward wte", &cpu, &gpu, dwte, TOL);
    compare("embedding backward wpe", &cpu, &gpu, dwpe, TOL);
}

#[test]
fn cross_entropy_matches_cpu() {
    // (rows, vocabulary, every how many rows a target is ignored — padding; 0: none)
    for &(rows, v, ignore) in &[(37, 23, 0), (300, 65, 0), (1, 2, 0), (300, 65, 3), (37, 23, 2)] {
        let mut case = Case::new(model(v, 8, 8, 1), StepShape { batch: 1, seq: 8 }, rows as u64);
        let logits = case.input("logits", &[rows, v], 3.0);
        let ids: Vec<u32> = (0..rows)
            .map(|i| if ignore > 0 && i % ignore == 0 { oomlab::data::IGNORE } else { ((i * 7 + 3) % v) as u32 })
            .collect();
        let targets = case.input_u32("targets", ids);
        let probs = case.output("probs", &[rows, v]);
        let losses = case.output("losses", &[rows]);
        let loss = case.output("loss", &[1]);
        let dlogits = case.output("dlogits", &[rows, v]);
        case.op(Op::CrossEntropy(op::CrossEntropy { logits, targets, probs, losses, loss }));
        // A scale other than 1/rows, as with gradient accumulation over 3 micro-batches.
        let scale = 1.0 / (3 * rows) as f64;
        case.op(Op::CrossEntropyBackward(op::CrossEntropyBackward { probs, targets, dlogits, scale }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("cross-entropy {rows}x{v} ignoring every {ignore}");
        compare(&format!("{tag} probs"), &cpu, &gpu, probs, TOL);
        compare(&format!("{tag} losses"), &cpu, &gpu, losses, TOL);
        compare(&format!("{tag} mean loss"), &cpu, &gpu, loss, TOL);
        compare(&format!("{tag} dlogits"), &cpu, &gpu, dlogits, TOL);
        if ignore > 0 {
            // The twin itself: an ignored row has no loss and no gradient, and the mean is over
            // the counted rows only.
            let (l, d) = (cpu.tensor(losses.tensor), cpu.tensor(dlogits.tensor));
            let counted: Vec<f32> = (0..rows).filter(|i| i % ignore != 0).map(|i| l[i]).collect();
            let mean = counted.iter().sum::<f32>() / counted.len() as f32;
            assert!(
                (cpu.tensor(loss.tensor)[0] - mean).abs() <= 1e-5 * mean.abs(),
                "{tag}: the mean over counted rows"
            );
            for r in (0..rows).step_by(ignore) {
                assert_eq!(l[r], 0.0, "{tag}: row {r}'s loss");
                assert!(d[r * v..(r + 1) * v].iter().all(|x| *x == 0.0), "{tag}: row {r}'s gradient");
            }
        }
    }
}

#[test]
fn optimizers_match_cpu_over_several_steps() {
    let n = 1000;
    // AdamW: three steps, so the bias corrections change between steps.
    let mut case = Case::new(model(11, 8, 8, 1), StepShape { batch: 1, seq: 8 }, 13);
    let params = case.input("params", &[n], 1.0);
    let grads = case.input("grads", &[n], 1.0);
    let m = case.output("m", &[n]);
    let v = case.output("v", &[n]);
    case.op(Op::AdamW(op::AdamW { params, grads, m, v, copy: None, found_inf: None }));
    let cfg = OptimizerConfig { weight_decay: 0.1, ..OptimizerConfig::default() };
    let (cpu, gpu) = run_optimizer_steps(&case, cfg, 3);
    compare("adamw params (3 steps)", &cpu, &gpu, params, TOL);
    compare("adamw m", &cpu, &gpu, m, TOL);
    compare("adamw v", &cpu, &gpu, v, TOL);

    let mut case = Case::new(model(11, 8, 8, 1), StepShape { batch: 1, seq: 8 }, 17);
    let params = case.input("params", &[n], 1.0);
    let grads = case.input("grads", &[n], 1.0);
    let buf = case.output("momentum", &[n]);
    case.op(Op::Sgd(op::Sgd { params, grads, momentum: Some(buf), copy: None, found_inf: None }));
    let cfg = OptimizerConfig {
        kind: OptimizerKind::Momentum,
        lr: 0.1,
        momentum: 0.9,
        weight_decay: 0.01,
        ..OptimizerConfig::default()
    };
    let (cpu, gpu) = case.run(cfg, 3);
    compare("sgd momentum params (3 steps)", &cpu, &gpu, params, TOL);
    compare("sgd momentum buffer", &cpu, &gpu, buf, TOL);
}

/// Runs the case's ops `steps` times with the optimizer phase included, which is what advances
/// AdamW's step counter t (and so its bias corrections) on both backends.
fn run_optimizer_steps(
    case: &Case,
    cfg: OptimizerConfig,
    steps: usize,
) -> (oomlab::backend::cpu::CpuExecutor<f32>, oomlab::backend::gpu::GpuExecutor) {
    use oomlab::plan::Phase;
    let (mut cpu, mut gpu) = case.run(cfg, 0);
    for _ in 0..steps {
        cpu.run_phases(&[Phase::Forward, Phase::Optimizer]).expect("cpu run");
        pollster::block_on(gpu.run_phases(&[Phase::Forward, Phase::Optimizer])).expect("gpu run");
    }
    (cpu, gpu)
}

/// Document starts of `b` rows of `t` positions, documents of varied lengths (1 to 37, so that
/// some straddle the fused kernel's 16-key tiles and its 64-row workgroups).
fn doc_starts(b: usize, t: usize) -> Vec<u32> {
    let mut starts = Vec::with_capacity(b * t);
    for row in 0..b {
        let mut start = 0;
        let mut len = 3 + 7 * row;
        for p in 0..t {
            if p - start >= len {
                start = p;
                len = 1 + (len * 5 + 3) % 37;
            }
            starts.push(start as u32);
        }
    }
    starts
}

/// Packed rows: every attention path (standard, fused forward and backward) and the position
/// embedding against their CPU twins, each query seeing only its own document.
#[test]
fn packed_rows_match_cpu() {
    for &(b, t, c, nh) in &[(2, 13, 12, 3), (1, 70, 16, 2), (2, 130, 128, 2)] {
        let v = 11;
        let mut case = Case::new(model(v, t, c, nh), StepShape { batch: b, seq: t }, t as u64 + 3);
        let starts = doc_starts(b, t);
        let positions: Vec<u32> = starts.iter().enumerate().map(|(r, &s)| (r % t) as u32 - s).collect();
        let (pos_offsets, pos_rows) = oomlab::data::token_index(&positions, t);
        let ids: Vec<u32> = (0..b * t).map(|i| (i * 7 % v) as u32).collect();
        let (offsets, rows) = oomlab::data::token_index(&ids, v);
        let packing = Some(op::Packing {
            doc_starts: case.input_u32("doc_starts", starts),
            position_offsets: case.input_u32("position_offsets", pos_offsets),
            position_rows: case.input_u32("position_rows", pos_rows),
        });
        let qkv = case.input("qkv", &[b, t, 3 * c], 1.0);
        let dout = case.input("dout", &[b, t, c], 1.0);
        let (att, out_std, datt) = (
            case.output("att", &[b, nh, t, t]),
            case.output("out_std", &[b, t, c]),
            case.output("datt", &[b, nh, t, t]),
        );
        let dqkv_std = case.output("dqkv_std", &[b, t, 3 * c]);
        let (out, lse, delta) =
            (case.output("out", &[b, t, c]), case.output("lse", &[b, nh, t]), case.output("delta", &[b, nh, t]));
        let dqkv = case.output("dqkv", &[b, t, 3 * c]);
        case.op(Op::Attention(op::Attention { qkv, att, out: out_std, packing }));
        case.op(Op::AttentionBackward(op::AttentionBackward { qkv, att, dout, datt, dqkv: dqkv_std }));
        case.op(Op::FlashAttention(op::FlashAttention { qkv, out, lse, packing }));
        case.op(Op::FlashAttentionBackward(op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv, packing }));
        let tokens = case.input_u32("tokens", ids);
        let token_offsets = case.input_u32("offsets", offsets);
        let token_positions = case.input_u32("positions", rows);
        let (wte, wpe) = (case.input("wte", &[v, c], 1.0), case.input("wpe", &[t, c], 1.0));
        let emb = case.output("emb", &[b, t, c]);
        let demb = case.input("demb", &[b, t, c], 1.0);
        let (dwte, dwpe) = (case.output("dwte", &[v, c]), case.output("dwpe", &[t, c]));
        case.op(Op::Embedding(op::Embedding { tokens, wte, wpe, out: emb, packing, positions: None }));
        case.op(Op::EmbeddingBackward(op::EmbeddingBackward {
            tokens,
            token_offsets,
            token_positions,
            dout: demb,
            dwte,
            dwpe,
            packing,
        }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("packed B{b} T{t} C{c} NH{nh}");
        for (name, view) in [
            ("probs", att),
            ("standard out", out_std),
            ("standard dqkv", dqkv_std),
            ("fused out", out),
            ("fused lse", lse),
            ("fused dqkv", dqkv),
            ("embedding", emb),
            ("dwte", dwte),
            ("dwpe", dwpe),
        ] {
            compare(&format!("{tag} {name}"), &cpu, &gpu, view, TOL);
        }
        // A query never looks before its document's start: those probabilities are exactly 0.
        let probs = cpu.tensor(att.tensor);
        let s = doc_starts(b, t);
        for bi in 0..b {
            for t1 in 0..t {
                let lo = s[bi * t + t1] as usize;
                assert!(probs[(bi * nh * t + t1) * t..][..lo].iter().all(|&p| p == 0.0), "{tag}: row {t1}");
            }
        }
    }
}
