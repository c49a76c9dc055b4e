//! The large-model estimator: exact parameter counts, the published vectors (ZeRO, Korthikanti
//! et al.), hand-computed vectors, calibration against the toy's plan to the byte, and
//! monotonicity.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use oomlab::estimate::{
    self, Adapters, Architecture, CUDA_CONTEXT_BYTES, Estimate, FRAGMENTATION_PERCENT, Offload, Optimizer, Parallel,
    Setup, StatePrecision, claims, cublas_workspace_bytes, max_micro_batch, presets, zero_model_states,
};
use oomlab::memory::simulate;
use oomlab::model::params::LoraConfig;
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{AttentionKind, Category, Checkpoint, OptimizerConfig, OptimizerKind, Plan, Techniques};

fn setup(model: &str, gpu: &str, batch: u64, seq: u64) -> Setup {
    Setup::new(presets::model(model).expect("model preset"), presets::gpu(gpu).expect("gpu preset"), batch, seq)
}

fn est(s: &Setup) -> Estimate {
    estimate::estimate(s).expect("valid setup")
}

#[test]
fn parameter_counts_are_exact() {
    // GPT-2: 12·L·h² + 13·L·h + V·h + T·h + 2h (../shared/GUIDE.md §4).
    let gpt2 = |l: u64, h: u64| 12 * l * h * h + 13 * l * h + 50257 * h + 1024 * h + 2 * h;
    let llama =
        |v: u64, h: u64, l: u64, kv: u64, f: u64| l * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + 2 * v * h + h;
    let expected = [
        ("gpt2", 124_439_808, gpt2(12, 768)),
        ("gpt2-medium", 354_823_168, gpt2(24, 1024)),
        ("gpt2-large", 774_030_080, gpt2(36, 1280)),
        ("gpt2-xl", 1_557_611_200, gpt2(48, 1600)),
        ("llama2-7b", 6_738_415_616, llama(32000, 4096, 32, 4096, 11008)),
        ("llama2-13b", 13_015_864_320, llama(32000, 5120, 40, 5120, 13824)),
        ("llama2-70b", 68_976_648_192, llama(32000, 8192, 80, 1024, 28672)),
        ("mistral-7b", 7_241_732_096, llama(32000, 4096, 32, 1024, 14336)),
    ];
    for (key, published, formula) in expected {
        let arch = presets::model(key).expect("preset");
        assert_eq!(arch.parameters(), published, "{key}");
        assert_eq!(formula, published, "{key}: the hand formula");
    }
    assert_eq!(presets::models().len(), 8 + oomlab::estimate::catalog::CONFIGS.len(), "the presets and the catalog");
    assert!(presets::model("Llama-2-7B").is_some() && presets::model("no-such").is_none());
    // The toy: the same count as its parameter layout, without padding.
    let toy = ModelConfig::toy(58);
    let layout = oomlab::model::params::ParamLayout::new(&toy);
    let exact: u64 = layout.specs.iter().map(|s| s.shape.iter().product::<u64>()).sum();
    assert_eq!(Architecture::from_toy(&toy).parameters(), exact);
    assert_eq!(exact, 107_904);
}

#[test]
fn gpu_presets() {
    let names: Vec<_> = presets::gpus().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["t4", "rtx4090", "a100-40", "a100-80", "h100-80", "h200"]);
    assert_eq!(presets::gpu("a100-80").expect("a100").memory_bytes, 80 << 30);
    assert_eq!(presets::gpu("48GiB").expect("custom").memory_bytes, 48 << 30);
    assert!(presets::gpu("lots").is_none());
    // cuBLAS workspace: 2·4096 KiB + 8·16 KiB before Hopper, 8·4096 KiB on Hopper.
    assert_eq!(cublas_workspace_bytes(8), 8_519_680);
    assert_eq!(cublas_workspace_bytes(9), 33_554_432);
}

#[test]
fn zero_published_vector() {
    // Rajbhandari et al. 2020: Ψ = 7.5 B, N_d = 64, mixed-precision Adam → 120 / 31.4 / 16.6 /
    // 1.9 GB per GPU.
    let psi = 7_500_000_000;
    let total = |zero| {
        let s = zero_model_states(
            psi,
            StatePrecision::MixedFp16,
            Optimizer::Adam,
            Parallel { data: 64, zero, ..Parallel::default() },
        );
        s.iter().sum::<u64>()
    };
    assert_eq!(total(0), 120_000_000_000);
    assert_eq!(total(1), 31_406_250_000); // 4Ψ + 12Ψ/64
    assert_eq!(total(2), 16_640_625_000); // 2Ψ + 14Ψ/64
    assert_eq!(total(3), 1_875_000_000); // 16Ψ/64
    for (zero, published) in [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)] {
        assert!((total(zero) as f64 / 1e9 - published).abs() < 0.05, "stage {zero}");
    }
    // By precision and optimizer, unsharded: bytes per parameter.
    let per = |p, o| zero_model_states(1000, p, o, Parallel::default()).iter().sum::<u64>() / 1000;
    assert_eq!(per(StatePrecision::Fp32, Optimizer::Adam), 16); // 4 + 4 + 8
    assert_eq!(per(StatePrecision::Fp32, Optimizer::Sgd), 8);
    assert_eq!(per(StatePrecision::Fp32, Optimizer::Momentum), 12);
    assert_eq!(per(StatePrecision::MixedBf16, Optimizer::Adam), 16); // 2 + 2 + 4 + 8
    assert_eq!(per(StatePrecision::MixedBf16, Optimizer::Sgd), 8); // 2 + 2 + 4 (master)
    assert_eq!(per(StatePrecision::PureBf16, Optimizer::Adam), 8); // 2 + 2 + 4
}

/// One layer's saved activations at the end of the forward pass: the difference between L + 1
/// and L layers.
fn per_layer(s: &Setup) -> u64 {
    let mut a = s.clone();
    a.arch.layers = 2;
    let two = est(&a).activations_end_of_forward;
    a.arch.layers = 3;
    est(&a).activations_end_of_forward - two
}

#[test]
fn korthikanti_per_layer_vectors() {
    // GPT-2 XL with dropout, 16-bit: sbh(34 + 5as/h) per layer (Korthikanti et al. 2022, §4.1),
    // plus the LayerNorm statistics the paper omits: 2 LayerNorms × 2 fp32 values per row.
    let (s, b) = (1000u64, 2u64);
    let mut g = setup("gpt2-xl", "a100-80", b, s);
    let (h, a) = (g.arch.hidden, g.arch.heads);
    let stats = 2 * 2 * 4 * s * b;
    assert_eq!(per_layer(&g), s * b * h * 34 + 5 * a * s * s * b + stats);
    // Tensor parallel t = 5 (25 heads): sbh(10 + 24/t + 5as/(ht)).
    g.parallel.tensor = 5;
    assert_eq!(per_layer(&g), s * b * h * 10 + s * b * h * 24 / 5 + 5 * a * s * s * b / 5 + stats);
    // With sequence parallelism: sbh(34/t + 5as/(ht)).
    g.parallel.sequence = true;
    assert_eq!(per_layer(&g), s * b * h * 34 / 5 + 5 * a * s * s * b / 5 + stats / 5);
    g.parallel = Parallel::default();
    // Selective recomputation drops the 5as²b term (at the end of the forward pass).
    g.checkpoint = Checkpoint::Selective;
    assert_eq!(per_layer(&g), s * b * h * 34 + stats);
    // Full recomputation keeps each layer's input, 2sbh.
    g.checkpoint = Checkpoint::BLOCKS;
    assert_eq!(per_layer(&g), 2 * s * b * h);
    // Fused attention removes 5as²b and keeps an fp32 logsumexp per row and head.
    g.checkpoint = Checkpoint::Off;
    g.attention = AttentionKind::Fused;
    assert_eq!(per_layer(&g), s * b * h * 34 + 4 * a * s * b + stats);
}

#[test]
fn llama_per_layer_vector_swiglu_rmsnorm_gqa() {
    // LLaMA-2 7B (see `llama_layer`).
    let (s, b) = (4096u64, 1u64);
    assert_eq!(per_layer(&setup("llama2-7b", "a100-80", b, s)), llama_layer(s, b, 4096, 32, 4096, 11008));
    // Mistral: grouped-query attention, 8 key/value heads of 128.
    assert_eq!(per_layer(&setup("mistral-7b", "a100-80", b, s)), llama_layer(s, b, 4096, 32, 1024, 14336));
}

/// One LLaMA-style layer by hand (bf16, no dropout): input 2sbh + RMSNorm rstd 4sb, norm output
/// 2sbh, q, k, v 2sb(h + 2kv), probabilities 2as²b, attention output 2sbh, residual 2sbh + rstd
/// 4sb, norm output 2sbh, SwiGLU gate, up, silu(gate), product 4·2sbf.
fn llama_layer(s: u64, b: u64, h: u64, a: u64, kv: u64, f: u64) -> u64 {
    let sbh = s * b * h;
    2 * sbh
        + 4 * s * b
        + 2 * sbh
        + 2 * s * b * (h + 2 * kv)
        + 2 * a * s * s * b
        + 2 * sbh
        + 2 * sbh
        + 4 * s * b
        + 2 * sbh
        + 8 * s * b * f
}

#[test]
fn llama2_7b_hand_computed_estimate() {
    // LLaMA-2 7B on one A100 80 GB, bf16 mixed, Adam, b = 1, s = 4096, standard attention.
    let s = setup("llama2-7b", "a100-80", 1, 4096);
    let e = est(&s);
    let psi = 6_738_415_616u64;
    assert_eq!(e.parameters, psi);
    assert_eq!(e.get("parameters"), 2 * psi);
    assert_eq!(e.get("gradients"), 2 * psi);
    assert_eq!(e.get("master_weights"), 4 * psi);
    assert_eq!(e.get("optimizer_state"), 8 * psi);
    let (sq, v, h) = (4096u64, 32000u64, 4096u64);
    let layer = per_layer(&s);
    // Outside the blocks: the last block's output and the final norm's input/statistics/output.
    let outside = 2 * sq * h + 4 * sq + 2 * sq * h;
    assert_eq!(e.activations_end_of_forward, 32 * layer + outside);
    // Logits bf16 + fp32 softmax + fp32 losses + the loss; the fp32 gradient of the logits.
    assert_eq!(e.logits_bytes, 2 * sq * v + 4 * sq * v + 4 * sq + 4);
    assert_eq!(e.logits_grad_bytes, 4 * sq * v);
    // One layer's backward working set: 3 residual-stream gradients + the attention output's
    // (2sbh each), SwiGLU's three (2sbf each), q/k/v's (2sb·3h) and the probabilities' (2as²b).
    let (a, f) = (32u64, 11008u64);
    let working = 4 * 2 * sq * h + 3 * 2 * sq * f + 2 * sq * 3 * h + 2 * a * sq * sq;
    assert_eq!(e.backward_working_set_bytes, working);
    // The peak is the larger of two moments. The last layer's attention backward: that layer
    // has freed what follows its attention (attention output, residual, RMSNorm-2's input,
    // statistic and output, SwiGLU's four) and the outside tensors; the loss (4 bytes) remains.
    // The start of the backward pass: every activation, the logits (1.3 GB) and their gradient.
    // Here the second is larger.
    let post_att = 3 * 2 * sq * h + 4 * sq + 8 * sq * f;
    let at_layer = e.activations_end_of_forward - post_att - outside + working + 4;
    let at_loss = e.activations_end_of_forward + e.logits_bytes + e.logits_grad_bytes;
    assert!(at_loss > at_layer);
    assert_eq!(e.get("activations"), e.activations_end_of_forward);
    assert_eq!(e.get("logits"), e.logits_bytes);
    assert_eq!(e.get("temporaries"), e.logits_grad_bytes);
    assert_eq!(e.get("input"), 2 * 8 * sq, "int64 token ids and labels");
    let allocated = 16 * psi + at_loss + 2 * 8 * sq;
    // At 8192 tokens the attention matrix (quadratic) outgrows the logits (linear): the layer's
    // moment wins.
    let mut short = s.clone();
    short.seq = 8192;
    let e2 = est(&short);
    assert_eq!(e2.get("logits"), 4);
    assert_eq!(e2.get("temporaries"), e2.backward_working_set_bytes);
    assert_eq!(e.get("communication"), 0);
    assert_eq!(e.get("workspace"), 8_519_680);
    assert_eq!(e.get("cuda_context"), CUDA_CONTEXT_BYTES);
    assert_eq!(e.get("fragmentation"), allocated / 100 * FRAGMENTATION_PERCENT);
    assert_eq!(e.peak_bytes, allocated + 8_519_680 + CUDA_CONTEXT_BYTES + allocated / 100 * FRAGMENTATION_PERCENT);
    assert!(!e.fits(), "full Adam training of 7B does not fit on 80 GB: {}", e.peak_bytes);
    assert_eq!(max_micro_batch(&s).expect("valid"), 0);
    assert_eq!(e.tokens_per_step, 4096);
    let mut acc = s.clone();
    acc.accum = 8;
    acc.parallel.data = 4;
    acc.parallel.zero = 3;
    assert_eq!(est(&acc).tokens_per_step, 4096 * 8 * 4);
}

#[test]
fn offload_lora_and_qlora() {
    let mut s = setup("llama2-7b", "a100-80", 1, 2048);
    let psi = 6_738_415_616u64;
    s.parallel.zero = 1;
    s.offload = Offload { optimizer: true, gradients: false, parameters: false };
    let e = est(&s);
    assert_eq!(e.get("optimizer_state") + e.get("master_weights"), 0);
    assert_eq!(e.get("gradients"), 2 * psi, "the 16-bit gradients stay on the GPU");
    assert_eq!(e.host_bytes, 8 * psi + 4 * psi + 4 * psi, "fp32 m, v, master weights and gradients on the host");
    assert_eq!(
        e.pcie_bytes_per_step,
        2 * psi + 2 * psi,
        "16-bit gradients down, 16-bit weights up (Ren et al. 2021: 4Ψ)"
    );
    s.offload.gradients = true;
    let g = est(&s);
    assert_eq!(g.get("gradients"), 0, "streamed to the host");
    assert_eq!((g.host_bytes, g.pcie_bytes_per_step), (e.host_bytes, e.pcie_bytes_per_step));
    s.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
    s.offload = Offload { optimizer: true, gradients: true, parameters: true };
    let e = est(&s);
    assert_eq!(e.get("parameters"), 0);
    assert!(e.host_bytes >= (2 * psi + 16 * psi) / 8);

    // LoRA: frozen 16-bit base, rank-r adapters trained with mixed precision.
    let mut l = setup("llama2-7b", "a100-80", 1, 2048);
    let r = 8;
    l.lora = Some(Adapters { rank: r, qkv: true, proj: false, mlp: false, quantized: false });
    let e = est(&l);
    let adapters = 32 * (r * (4096 + 4096) + 2 * r * (4096 + 4096)); // q, k, v: 4096 → 4096 each
    assert_eq!(e.trainable_parameters, adapters);
    assert_eq!(e.get("parameters"), 2 * psi + 2 * adapters);
    assert_eq!(e.get("gradients"), 2 * adapters);
    assert_eq!(e.get("optimizer_state"), 8 * adapters);
    assert_eq!(e.get("master_weights"), 4 * adapters);
    // QLoRA: the blocks' linear weights in 4 bits (+ double-quantized constants); embeddings,
    // lm_head and norms in 16 bits.
    l.lora = Some(Adapters { rank: r, qkv: true, proj: false, mlp: false, quantized: true });
    let q = est(&l);
    let linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008u64);
    let rest = psi - linear;
    let expected = linear / 2 + linear.div_ceil(64) + linear.div_ceil(64 * 256) * 4 + 2 * rest + 2 * adapters;
    assert_eq!(q.get("parameters"), expected);
    assert!(q.get("parameters") < e.get("parameters") / 3);
}

/// Bytes of the plan's tensors of one category.
fn plan_bytes(plan: &Plan, c: Category) -> u64 {
    plan.tensors.iter().filter(|t| t.category == c).map(|t| t.size_bytes()).sum()
}

#[test]
fn calibration_matches_the_toy_plan_to_the_byte() {
    let models = [ModelConfig::toy(58), ModelConfig { vocab: 37, seq_len: 24, d_model: 48, n_layers: 3, n_heads: 3 }];
    let mut checked = 0;
    for model in models {
        let mut modes = vec![Checkpoint::Off, Checkpoint::Selective];
        modes.extend((1..=model.n_layers).map(Checkpoint::Every));
        for checkpoint in modes {
            for attention in [AttentionKind::Standard, AttentionKind::Fused] {
                for precision in
                    [oomlab::plan::Precision::Fp32, oomlab::plan::Precision::Fp16, oomlab::plan::Precision::Bf16]
                {
                    for lora in [None, Some("qkv"), Some("proj"), Some("all")] {
                        for optimizer in [OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::AdamW] {
                            let lora = lora.map(|t| LoraConfig::new(4).with_targets(t).expect("targets"));
                            for (batch, accum) in [(1, 1), (3, 1), (2, 2)] {
                                let techniques =
                                    Techniques { checkpoint, attention, precision, lora, accum, ..Default::default() };
                                if techniques.validate(&model).is_err() {
                                    continue;
                                }
                                let shape = StepShape { batch, seq: model.seq_len };
                                let opt = OptimizerConfig { kind: optimizer, ..OptimizerConfig::default() };
                                let plan = Plan::build_with(&model, shape, &opt, &techniques).expect("plan");
                                let memory = simulate(&plan, 1 << 30).expect("fits");
                                let e = est(&Setup::toy(&model, shape, optimizer, &techniques, 1 << 30));
                                let what = format!("{model:?} b{batch} {techniques:?} {optimizer:?}");
                                for (category, name) in [
                                    (Category::Parameters, "parameters"),
                                    (Category::Gradients, "gradients"),
                                    (Category::OptimizerState, "optimizer_state"),
                                    (Category::MasterWeights, "master_weights"),
                                ] {
                                    assert_eq!(e.get(name), plan_bytes(&plan, category), "{name}: {what}");
                                }
                                assert_eq!(e.activations_peak, memory.activation_peak_bytes, "activations: {what}");
                                // Each micro-batch has its own logits (one set alive at a time).
                                assert_eq!(
                                    e.logits_bytes * accum as u64,
                                    plan_bytes(&plan, Category::Logits),
                                    "logits: {what}"
                                );
                                let dlogits =
                                    plan.tensors.iter().find(|t| t.name.ends_with("grad.logits")).expect("dlogits");
                                assert_eq!(e.logits_grad_bytes, dlogits.size_bytes(), "{what}");
                                assert_eq!(e.get("input"), plan_bytes(&plan, Category::Input), "input: {what}");
                                assert_eq!(e.get("workspace"), plan_bytes(&plan, Category::Workspace), "{what}");
                                assert_eq!(e.get("cuda_context") + e.get("communication") + e.get("fragmentation"), 0);
                                // The peak: the closed form takes the largest of its moments (the loss;
                                // the last layer's MLP backward; a layer's attention backward; with
                                // checkpointing, an earlier segment's recomputation), each with the
                                // gradient buffers the plan holds then — the plan's peak, to the byte.
                                let planned: u64 = memory.peak_requested.total();
                                assert_eq!(e.peak_bytes, planned, "peak: {what}");
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 1728, "every valid combination was checked");
}

#[test]
fn memory_never_falls_as_the_batch_grows_nor_rises_with_sharding() {
    let mut setups = Vec::new();
    for model in ["gpt2", "gpt2-xl", "llama2-7b", "llama2-70b", "mistral-7b"] {
        for checkpoint in [Checkpoint::Off, Checkpoint::Selective, Checkpoint::Every(1), Checkpoint::Every(3)] {
            for attention in [AttentionKind::Standard, AttentionKind::Fused] {
                let mut s = setup(model, "h100-80", 1, 1024);
                s.checkpoint = checkpoint;
                s.attention = attention;
                setups.push(s.clone());
                let tensor = if s.arch.heads.is_multiple_of(4) { 4 } else { 1 };
                s.parallel = Parallel { data: 8, tensor, sequence: true, zero: 2, expert: 1, ..Default::default() };
                s.precision = StatePrecision::PureBf16;
                setups.push(s.clone());
                s.lora = Some(Adapters { rank: 16, qkv: true, proj: true, mlp: true, quantized: true });
                s.parallel = Parallel::default();
                setups.push(s);
            }
        }
    }
    for s in &setups {
        let mut prev = 0;
        for b in (1..=48).chain([64, 100, 1000, 4096]) {
            let mut x = s.clone();
            x.micro_batch = b;
            let p = est(&x).peak_bytes;
            assert!(p >= prev, "{} b{b}: {p} < {prev} ({:?})", s.arch.name, s.checkpoint);
            prev = p;
        }
        // ZeRO: each stage needs no more than the one before, for any N_d.
        for data in [2, 8, 64] {
            let mut prev = u64::MAX;
            for zero in 0..=3 {
                let mut x = s.clone();
                x.parallel.data = data;
                x.parallel.zero = zero;
                let p = est(&x).peak_bytes;
                assert!(p <= prev, "{} N_d {data} stage {zero}: {p} > {prev}", s.arch.name);
                prev = p;
            }
        }
        // More data-parallel GPUs never raise a sharded stage's memory.
        for zero in 1..=3 {
            let mut prev = u64::MAX;
            for data in [1, 2, 4, 16, 256] {
                let mut x = s.clone();
                x.parallel.data = data;
                x.parallel.zero = zero;
                let p = est(&x).peak_bytes;
                assert!(p <= prev || data == 2, "{} stage {zero} N_d {data}: {p} > {prev}", s.arch.name);
                prev = p;
            }
        }
    }
}

#[test]
fn max_micro_batch_is_the_largest_that_fits() {
    for (model, gpu, seq) in [("gpt2", "t4", 1024), ("gpt2-xl", "a100-80", 1024), ("llama2-7b", "h200", 4096)] {
        let mut s = setup(model, gpu, 1, seq);
        s.precision = StatePrecision::MixedBf16;
        if model == "llama2-7b" {
            s.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
        }
        let m = max_micro_batch(&s).expect("valid");
        assert!(m >= 1, "{model} on {gpu}");
        s.micro_batch = m;
        assert!(est(&s).fits());
        s.micro_batch = m + 1;
        assert!(!est(&s).fits(), "{model}: {} also fits", m + 1);
    }
}

#[test]
fn bad_setups_are_refused_with_a_reason() {
    let base = setup("llama2-7b", "a100-80", 1, 4096);
    let mut cases: Vec<(Setup, &str)> = Vec::new();
    let mut s = base.clone();
    s.micro_batch = 0;
    cases.push((s, "micro-batch"));
    let mut s = base.clone();
    s.micro_batch = u64::MAX;
    cases.push((s, "micro-batch"));
    let mut s = base.clone();
    s.parallel.tensor = 3;
    cases.push((s, "tensor parallelism"));
    let mut s = base.clone();
    s.parallel.zero = 7;
    cases.push((s, "ZeRO"));
    let mut s = base.clone();
    s.offload.parameters = true;
    cases.push((s, "ZeRO stage 3"));
    let mut s = base.clone();
    s.offload.gradients = true;
    cases.push((s, "needs optimizer offload"));
    let mut s = base.clone();
    s.arch.kv_heads = 5;
    cases.push((s, "kv_heads"));
    let mut s = base.clone();
    s.lora = Some(Adapters { rank: 0, qkv: true, proj: false, mlp: false, quantized: false });
    cases.push((s, "rank"));
    let mut s = setup("gpt2", "t4", 1, 1024);
    s.seq = 2048;
    cases.push((s, "position table"));
    for (s, why) in cases {
        let err = estimate::estimate(&s).expect_err(why).to_string();
        assert!(err.contains(why), "{err:?} should mention {why:?}");
    }
    // Huge but valid sizes are refused with the quantity that passed the limit, never wrapped
    // nor saturated.
    let mut s = base.clone();
    s.micro_batch = estimate::MAX_BATCH;
    s.seq = 1 << 22;
    s.arch.positions = 0;
    match estimate::estimate(&s) {
        Err(e @ estimate::EstimateError::TooLarge { .. }) => {
            assert!(e.to_string().contains("more than oomlab counts"), "{e}")
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Just under the limit the estimate is reported as it is.
    s.micro_batch = 1;
    s.seq = 1 << 16;
    let e = est(&s);
    assert!(!e.fits() && e.peak_bytes > 1 << 40 && e.peak_bytes <= estimate::MAX_ESTIMATE_BYTES);
}

#[test]
fn claims_compute_every_number_they_print() {
    let claims = claims::claims().expect("claims");
    let by = |needle: &str| claims.iter().find(|c| c.claim.contains(needle)).expect(needle);
    let n = |c: &claims::Claim, name: &str| c.number(name).unwrap_or_else(|| panic!("{name} missing"));
    let gb = |bytes: u64| bytes as f64 / 1e9;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);

    // 1. Doubling: each ratio from the estimator, the verdict from the range, the words from
    // the ratios.
    let d = by("Doubling");
    let base = setup("llama2-7b", "h200", 1, 4096);
    let at = |s: &Setup, b: u64| {
        let mut s = s.clone();
        s.micro_batch = b;
        est(&s).peak_bytes
    };
    let ratios: Vec<f64> = [1, 2, 4, 8].iter().map(|&b| at(&base, 2 * b) as f64 / at(&base, b) as f64).collect();
    for (name, r) in ["ratio_b1", "ratio_b2", "ratio_b4", "ratio_b8"].iter().zip(&ratios) {
        assert!(close(n(d, name), *r), "{name}");
        assert!(d.finding.contains(&format!("{r:.2}")), "{}", d.finding);
    }
    assert_eq!(d.holds, ratios.iter().all(|r| (1.8..=2.5).contains(r)));
    assert!(!d.holds && ratios.iter().all(|&r| r < 2.0) && d.finding.contains("below 2× every time"));

    // 2. 38.2 GB at batch 64: the whole peak (not the model states alone), ±10 %.
    let c = by("38.2 GB");
    let mut s = setup("llama2-7b", "a100-80", 64, 512);
    let (m64, m128) = (at(&s, 64), at(&s, 128));
    s.precision = StatePrecision::PureBf16;
    let (p64, p128) = (at(&s, 64), at(&s, 128));
    assert!(close(n(c, "peak_b64_gb"), gb(m64.min(p64))));
    assert!(close(n(c, "peak_b128_gb"), gb(m128.min(p128))));
    let within = |got: f64, want: f64| (got - want).abs() <= 0.1 * want;
    let expect = within(gb(m64.min(p64)), 38.2) && within(gb(m128.min(p128)), 89.7);
    assert_eq!(c.holds, expect && within(n(c, "ratio"), 2.35));
    assert!(!c.holds, "{}", c.finding);
    assert!(c.finding.contains(&format!("{:.1} GB at batch 64", gb(m64.min(p64)))), "{}", c.finding);
    assert!(c.test.contains("whole peak"));

    // 3. ZeRO's vectors.
    let z = by("ZeRO stages");
    for (stage, want) in [120.0, 31.4, 16.6, 1.9].into_iter().enumerate() {
        let got = n(z, ["stage0_gb", "stage1_gb", "stage2_gb", "stage3_gb"][stage]);
        let states = zero_model_states(
            7_500_000_000,
            StatePrecision::MixedFp16,
            Optimizer::Adam,
            Parallel { data: 64, zero: stage as u8, ..Parallel::default() },
        );
        assert!((got - gb(states.iter().sum())).abs() < 1e-6, "stage {stage}: {got}");
        assert!((got - want).abs() < 0.05, "stage {stage}: {got}");
    }
    assert!(z.holds && z.finding.contains("120.0 / 31.4 / 16.6 / 1.9"));

    // 4. ZeRO-3's "2 → 16": the largest micro-batches, computed.
    let c = by("from 2 to 16");
    let mut s = setup("llama2-7b", "a100-80", 1, 2048);
    let without = max_micro_batch(&s).expect("max");
    let states: u64 =
        ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|k| est(&s).get(k)).sum();
    s.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
    let with = max_micro_batch(&s).expect("max");
    assert_eq!(n(c, "max_batch_without"), without as f64);
    assert_eq!(n(c, "max_batch_zero3"), with as f64);
    assert!(close(n(c, "states_gb"), gb(states)));
    assert_eq!(c.holds, without == 2 && with == 16);
    let words = if without == 0 { "not even micro-batch 1 fits".to_string() } else { format!("is {without}") };
    assert!(c.finding.contains(&words) && c.finding.contains(&format!("{:.1} GB", gb(states))), "{}", c.finding);

    // 5. QLoRA's "about 12 GB": ±10 %, in the most favourable setting.
    let c = by("12 GB");
    let mut q = setup("llama2-7b", "a100-80", 64, 512);
    q.lora = Some(Adapters { rank: 16, qkv: true, proj: true, mlp: true, quantized: true });
    let plain = est(&q).peak_bytes;
    q.checkpoint = Checkpoint::BLOCKS;
    let ckpt = est(&q).peak_bytes;
    assert!(close(n(c, "peak_b64_gb"), gb(plain)) && close(n(c, "peak_b64_checkpointed_gb"), gb(ckpt)));
    assert_eq!(c.holds, gb(plain.min(ckpt)) <= 12.0 * 1.1);
    assert!(c.test.contains("12 GB + 10 %"), "{}", c.test);

    // 6. Korthikanti's layer, to the byte.
    let c = by("sbh(34");
    assert!(c.holds, "{}", c.finding);
    assert_eq!(n(c, "layer_bytes"), n(c, "paper_bytes") + n(c, "statistics_bytes"));

    // 7. ZeRO-Offload at the bandwidth it names: 4Ψ over PCIe per step against the step's compute
    // at the A100's peak.
    let c = by("ZeRO-Offload");
    let psi = 6_738_415_616f64;
    assert!(close(n(c, "pcie_gb_per_step"), 4.0 * psi / 1e9), "{}", n(c, "pcie_gb_per_step"));
    assert!(close(n(c, "pcie_secs_at_32"), 4.0 * psi / 32e9));
    let (b, sq, l, h, v) = (1.0, 2048.0, 32.0, 4096.0, 32000.0);
    let flops = 72.0 * b * sq * l * h * h * (1.0 + sq / (6.0 * h) + v / (12.0 * h * l));
    assert!(close(n(c, "compute_secs"), flops / 312e12));
    assert_eq!(c.holds, 4.0 * psi / 32e9 <= flops / 312e12);
    assert!(!c.holds, "at batch 1 the link is the bottleneck: {}", c.finding);
    assert_eq!(n(c, "hides_from_batch"), ((4.0 * psi / 32e9) / (flops / 312e12)).ceil());
    assert!(n(c, "gpu_after_gb") < n(c, "gpu_before_gb"));

    for c in &claims {
        assert!(!c.finding.is_empty() && !c.source.is_empty() && !c.test.is_empty());
        assert!(!c.numbers.is_empty() && c.numbers.iter().all(|(_, v)| v.is_finite()), "{}", c.claim);
    }
}

#[test]
fn every_preset_per_layer_by_hand() {
    let (s, b) = (512u64, 2u64);
    for (key, arch) in presets::models().into_iter().take(8) {
        let (h, a, kv, f) = (arch.hidden, arch.heads, arch.kv_hidden(), arch.ffn);
        let expected = if key.starts_with("gpt2") {
            // Korthikanti et al.: sbh(34 + 5as/h), + two LayerNorms' fp32 mean and 1/std.
            s * b * h * 34 + 5 * a * s * s * b + 16 * s * b
        } else {
            // RMSNorm (one fp32 statistic per row), SwiGLU, grouped-query k and v, no dropout.
            llama_layer(s, b, h, a, kv, f)
        };
        assert_eq!(per_layer(&setup(key, "h200", b, s)), expected, "{key}");
    }
}

/// The later families' layers, by hand, in the fused (Korthikanti) profile: Mixtral's experts,
/// Gemma 2's wide heads, four norms and soft-capping, Qwen3's query/key norms.
#[test]
fn later_families_per_layer_by_hand() {
    let (s, b) = (512u64, 2u64);
    let (sb, sbs) = (s * b, s * s * b);
    // Mixtral 8x7B: LLaMA's attention, then a router over 8 experts, 2 per token, width f.
    let m = setup("mixtral-8x7b", "h200", b, s);
    let (h, a, kv, f) = (4096, 32, 1024, 14336);
    let attention_and_norms = llama_layer(s, b, h, a, kv, f) - 8 * sb * f;
    let (e, k) = (8, 2);
    let experts = 4 * sb * e // router probabilities, fp32
        + 8 * sb * k // top-k indices, int64
        + 4 * sb + 4 * sb * k // the renormalised top-k weights and their sum, fp32
        + 3 * 8 * sb * k + 4 * e // sorting: three int64 index lists, int32 offsets
        + 2 * sb * k * h // the gathered tokens
        + 2 * sb * k * 4 * f // gate, up, act(gate), the product
        + 4 * sb * k // the routing weights, fp32
        + 2 * sb * k * h; // the experts' outputs
    assert_eq!(per_layer(&m), attention_and_norms + experts, "Mixtral");
    // Gemma 2 9B: q is 16 heads of 256 (4096 wide, h 3584), k/v 8 heads; two more norms (input
    // and statistics), the scores' tanh; GeGLU counts as SwiGLU.
    let g = setup("gemma-2-9b", "h200", b, s);
    let (h, a, q, kv, f) = (3584, 16, 4096, 2048, 14336);
    let sbh = sb * h;
    let layer = 2 * sbh + 4 * sb + 2 * sbh // norm 1: input, statistic, output
        + 2 * sb * (q + 2 * kv) // q, k, v
        + 2 * a * sbs * 2 // tanh(scores), softmax
        + 2 * sb * q // the attention output
        + 2 * (2 * sbh + 4 * sb) // the two sandwich norms
        + 2 * sbh + 4 * sb + 2 * sbh // norm 2
        + 8 * sb * f;
    assert_eq!(per_layer(&g), layer, "Gemma 2");
    // Qwen3 8B: LLaMA's layer with 128-wide heads (h / a = 128 too) and q/k norms: their
    // statistics (one per head and row) and their outputs.
    let q3 = setup("qwen3-8b", "h200", b, s);
    let (h, a, kv, f) = (4096, 32, 1024, 12288);
    let qk = 4 * sb * (a + 8) + 2 * sb * (h + kv);
    assert_eq!(per_layer(&q3), llama_layer(s, b, h, a, kv, f) + qk, "Qwen3");
}

#[test]
fn communication_buffers_by_hand() {
    let psi = 6_738_415_616u64;
    let mut s = setup("llama2-7b", "h100-80", 1, 2048);
    let comm = |s: &Setup| est(s).get("communication");
    assert_eq!(comm(&s), 0, "one GPU, no tensor parallelism: nothing to communicate");
    // DDP (ZeRO 0) on 8 GPUs: its buckets are a bf16 copy of the gradients.
    s.parallel = Parallel { data: 8, ..Parallel::default() };
    assert_eq!(comm(&s), 2 * psi);
    // ZeRO 1 and 2: DeepSpeed's reduce and all-gather buckets, 5e8 bf16 elements each.
    for zero in [1, 2] {
        s.parallel.zero = zero;
        assert_eq!(comm(&s), 2 * 2 * 500_000_000);
    }
    // ZeRO 3: the reduce bucket, and three layers' parameters gathered (the current layer, the
    // prefetched next one, and the gradients being reduced).
    s.parallel.zero = 3;
    let layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096u64;
    assert_eq!(comm(&s), 2 * 500_000_000 + 3 * 2 * layer);
    // Sequence parallelism all-gathers one layer's input: s·b·h bf16 values (no data parallel).
    let mut sp = setup("llama2-7b", "h100-80", 2, 2048);
    sp.parallel = Parallel { data: 1, tensor: 4, sequence: true, zero: 0, expert: 1, ..Default::default() };
    assert_eq!(comm(&sp), 2 * 2048 * 2 * 4096);
    // The workspace follows the GPU generation: Hopper's 32 MiB.
    assert_eq!(est(&s).get("workspace"), 32 << 20);
}

/// A mixture of experts: every expert's states, k experts' activations; expert parallelism
/// divides the experts' states and adds the all-to-all buffers; the sweep and the largest
/// micro-batch work; what cannot be asked is refused.
#[test]
fn mixture_of_experts_states_activations_and_expert_parallelism() {
    let m = |ep: u64| {
        let mut s = setup("mixtral-8x7b", "h200", 1, 1024);
        s.parallel = Parallel { data: 8, zero: 1, expert: ep, ..Parallel::default() };
        s
    };
    let one = est(&m(1));
    let psi = 46_702_792_704u64;
    assert_eq!(one.parameters, psi);
    assert_eq!(one.get("parameters"), 2 * psi, "all 47 B parameters, in bf16");
    // Expert parallelism over 8: each GPU keeps 1 expert of 8 per layer.
    let eight = est(&m(8));
    let arch = &m(1).arch;
    let experts = arch.layers * 8 * 3 * arch.hidden * arch.ffn;
    assert_eq!(eight.get("parameters"), 2 * (psi - experts + experts / 8));
    // ZeRO-1 partitions the experts' optimizer state over the 8 / 8 = 1 GPU holding the same
    // expert, the rest over all 8.
    assert_eq!(eight.get("optimizer_state"), 8 * (psi - experts) / 8 + 8 * (experts / 8));
    // Activations do not depend on how the experts are placed (balanced routing)...
    assert_eq!(eight.get("activations"), one.get("activations"));
    // ...and the all-to-all adds a send and a receive buffer of s·b·k token copies.
    let a2a = 2 * 2 * 1024 * 2 * arch.hidden;
    assert_eq!(eight.get("communication") - one.get("communication"), a2a);
    // A mixture's activations are those of its k experts, not its E: twice the dense MLP's.
    let mut dense = m(1);
    dense.arch.block.moe = None;
    let per = |s: &Setup| per_layer(s);
    let mlp_dense = 8 * 1024 * dense.arch.ffn;
    let moe_mlp = per(&m(1)) - (per(&dense) - mlp_dense);
    assert!(moe_mlp > 2 * mlp_dense && moe_mlp < 3 * mlp_dense, "{moe_mlp} against the dense {mlp_dense}");
    // The sweep and the largest micro-batch that fits.
    let max = estimate::max_micro_batch(&m(8)).expect("bisects");
    assert!(max >= 1);
    let sweep = estimate::sweep(&m(8), &estimate::sweep_batches(max)).expect("sweeps");
    assert!(sweep.windows(2).all(|w| w[0].1.peak_bytes <= w[1].1.peak_bytes));
    let mut next = m(8);
    next.micro_batch = max + 1;
    assert!(
        est(&next).peak_bytes > est(&next).capacity_bytes
            && est(&{
                let mut s = m(8);
                s.micro_batch = max;
                s
            })
            .fits()
    );
    // Refused: EP without a mixture, EP not dividing the experts or the GPUs, LoRA on experts.
    let mut bad = setup("llama2-7b", "h200", 1, 1024);
    bad.parallel.expert = 2;
    assert!(estimate::estimate(&bad).is_err());
    let mut bad = m(3);
    bad.parallel.data = 9;
    assert!(estimate::estimate(&bad).unwrap_err().to_string().contains("divide the experts"));
    let mut bad = m(1);
    bad.lora = Some(estimate::Adapters { rank: 8, qkv: true, proj: false, mlp: true, quantized: false });
    assert!(estimate::estimate(&bad).unwrap_err().to_string().contains("experts"));
}

/// Megatron-LM's own theoretical memory report (`megatron/training/theoretical_memory_usage.py`,
/// `compute_weight_and_optimizer_memory`), ported for dense and mixture-of-experts layers without
/// pipeline parallelism: (parameters on the most loaded shard) × (18, or 6 + 12/DP with the
/// distributed optimizer). It leaves out the linear layers' biases, a learned position table and
/// a mixture's router.
fn megatron_formula(a: &oomlab::estimate::Architecture, tp: u64, dp: u64, distributed: bool) -> f64 {
    let (h, l, v) = (a.hidden as f64, a.layers as f64, a.vocab as f64);
    let ratio = a.q_hidden() as f64 / h;
    let groups = a.kv_heads as f64 / a.heads as f64;
    let gated = if a.mlp.gated() { 1.5 } else { 1.0 };
    let norm = if a.norm == oomlab::estimate::Norm::LayerNorm { 2.0 } else { 1.0 };
    let attention = 2.0 * h * h * (1.0 + groups) * ratio;
    let mlp = match a.block.moe {
        None => a.ffn as f64 * gated,
        Some(m) => a.ffn as f64 * m.experts as f64 * gated + m.shared_ffn as f64 * gated,
    };
    let layer = 2.0 * h * (mlp + norm) + attention;
    let block = layer * l + norm * h;
    let embedding = h * v;
    let mut shard = (block + embedding) / tp as f64;
    if !a.tied_embeddings {
        shard += embedding / tp as f64;
    }
    let per_parameter = if distributed { 6.0 + 12.0 / dp as f64 } else { 18.0 };
    shard * per_parameter
}

/// The Megatron profile against Megatron's formula: exact where the model has nothing the
/// formula leaves out, and off by exactly what it leaves out where it does.
#[test]
fn the_megatron_profile_matches_megatrons_formula() {
    let states = |s: &Setup| {
        let e = est(s);
        ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum::<u64>() as f64
    };
    let megatron = |model: &str, dp: u64, zero: u8| {
        let mut s = setup(model, "h200", 1, 1024);
        s.framework = oomlab::estimate::Framework::Megatron;
        s.parallel = Parallel { data: dp, zero, ..Parallel::default() };
        s
    };
    // LLaMA-2 7B: no biases, no position table: 18 bytes per parameter, exactly.
    let s = megatron("llama2-7b", 1, 0);
    assert_eq!(states(&s), megatron_formula(&s.arch, 1, 1, false));
    assert_eq!(states(&s), 18.0 * 6_738_415_616.0);
    // The distributed optimizer over 8 GPUs: 6 + 12/8 bytes.
    let s = megatron("llama2-7b", 8, 1);
    assert_eq!(states(&s), megatron_formula(&s.arch, 1, 8, true));
    // The ZeRO paper's convention keeps 16-bit gradients: 2 bytes less per parameter.
    let mut zero = megatron("llama2-7b", 1, 0);
    zero.framework = oomlab::estimate::Framework::Zero;
    assert_eq!(states(&megatron("llama2-7b", 1, 0)) - states(&zero), 2.0 * 6_738_415_616.0);
    // Mixtral: the formula leaves out the routers (E·h per layer).
    let s = megatron("mixtral-8x7b", 1, 0);
    let router = (s.arch.layers * 8 * s.arch.hidden) as f64;
    assert_eq!(states(&s) - megatron_formula(&s.arch, 1, 1, false), 18.0 * router);
    // GPT-3 175B's shape (the issue's): the formula leaves out the biases and the position table.
    let mut s = setup("gpt2", "h200", 1, 1024);
    s.arch = oomlab::estimate::Architecture {
        hidden: 12288,
        layers: 96,
        heads: 96,
        kv_heads: 96,
        ffn: 4 * 12288,
        vocab: 51200,
        positions: 2048,
        dropout: 0.0,
        ..s.arch
    };
    s.framework = oomlab::estimate::Framework::Megatron;
    let (h, l, f) = (12288f64, 96f64, 4.0 * 12288.0);
    let biases = l * (3.0 * h + h + f + h);
    let positions = 2048.0 * h;
    assert_eq!(states(&s) - megatron_formula(&s.arch, 1, 1, false), 18.0 * (biases + positions));
    // With tensor parallelism 8 the formula divides the norms too (oomlab keeps them whole on
    // each GPU, as Megatron does): within 0.1 %.
    s.parallel = Parallel { data: 1, tensor: 8, sequence: true, zero: 0, expert: 1, ..Default::default() };
    let (ours, theirs) = (states(&s), megatron_formula(&s.arch, 8, 1, false));
    assert!((ours - theirs).abs() / theirs < 1e-3, "{ours} against Megatron's {theirs}");
}

/// The framework profiles' bytes per parameter with Adam in bf16, and what each refuses.
#[test]
fn framework_profiles_keep_their_own_dtypes() {
    use oomlab::estimate::Framework;
    let psi = 6_738_415_616u64;
    let with = |f: Framework, dp: u64, zero: u8| {
        let mut s = setup("llama2-7b", "h200", 1, 1024);
        s.framework = f;
        s.parallel = Parallel { data: dp, zero, ..Parallel::default() };
        s
    };
    let per = |s: &Setup| {
        let e = est(s);
        [e.get("parameters"), e.get("gradients"), e.get("optimizer_state"), e.get("master_weights")]
    };
    assert_eq!(per(&with(Framework::Zero, 1, 0)), [2 * psi, 2 * psi, 8 * psi, 4 * psi]);
    assert_eq!(per(&with(Framework::Deepspeed, 1, 0)), per(&with(Framework::Zero, 1, 0)));
    assert_eq!(per(&with(Framework::Megatron, 1, 0)), [2 * psi, 4 * psi, 8 * psi, 4 * psi]);
    // AMP: an fp32 model, and autocast's 16-bit copies of every linear weight and the lm_head.
    let amp = with(Framework::PytorchAmp, 1, 0);
    let a = &amp.arch;
    let linear = a.layers * (4 * a.hidden * a.hidden + 3 * a.hidden * a.ffn) + a.vocab * a.hidden;
    assert_eq!(per(&amp), [4 * psi + 2 * linear, 4 * psi, 8 * psi, 0]);
    // FSDP2 over 8 GPUs: fp32 shards of everything, no master copy.
    assert_eq!(per(&with(Framework::Fsdp2, 8, 3)), [4 * psi / 8, 4 * psi / 8, 8 * psi / 8, 0]);
    for (f, dp, zero, why) in [
        (Framework::Megatron, 8, 2, "distributed optimizer"),
        (Framework::Fsdp2, 8, 1, "ZeRO stage 3"),
        (Framework::PytorchAmp, 8, 1, "plain data parallelism"),
    ] {
        let e = estimate::estimate(&with(f, dp, zero)).expect_err(why);
        assert!(e.to_string().contains(why), "{e}");
    }
    let mut pure = with(Framework::PytorchAmp, 1, 0);
    pure.precision = StatePrecision::PureBf16;
    assert!(estimate::estimate(&pure).is_err(), "AMP is mixed precision");
}
