//! No size ever wraps: plans, predictions and estimates are computed in u64 (u128 where
//! products can pass it) with checked arithmetic, and give the same numbers where `usize` is 32
//! bits. These tests run natively and on wasm32 (`wasm-bindgen-test` under Node, see
//! `scripts/test-wasm.sh`).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use oomlab::estimate::{self, Architecture, EstimateError, Setup};
use oomlab::memory::formula::activation_peak_bytes;
use oomlab::memory::{simulate, simulate_peak};
use oomlab::model::init::Rng;
use oomlab::model::params::LoraConfig;
use oomlab::model::{ModelConfig, ShapeError, StepShape};
use oomlab::plan::ConfigError;
use oomlab::plan::{
    AttentionKind, Checkpoint, MAX_PLAN_OPS, MAX_TENSOR_ELEMS, OptimizerConfig, OptimizerKind, Plan, Precision,
    Techniques,
};

const TIB: u64 = 1 << 40;

fn plan(model: &ModelConfig, batch: usize, seq: usize) -> Result<Plan, ConfigError> {
    Plan::build(model, StepShape { batch, seq }, &OptimizerConfig::default())
}

/// The case from the issue: d 1024, 64 heads, sequence 4096. Each layer's attention
/// probabilities are batch · 64 · 4096² · 4 bytes: 2³² at batch 1 (0 once wrapped to 32 bits),
/// 2³³ at batch 2. Memory must grow with the batch, by exactly the tensors that grow.
#[test]
fn attention_of_four_gib_does_not_wrap() {
    let model = ModelConfig { vocab: 58, seq_len: 4096, d_model: 1024, n_layers: 2, n_heads: 64 };
    let mut peaks = Vec::new();
    for batch in [1, 2, 4] {
        let p = plan(&model, batch, 4096).expect("plans");
        let probs = p.tensors.iter().find(|t| t.name == "h.0.attn.probs").expect("probabilities");
        assert_eq!(probs.size_bytes(), (batch as u64) << 32, "batch {batch}");
        let m = simulate(&p, TIB).expect("fits 1 TiB");
        // Two layers' probabilities are saved for backward: at least 2 · 2³² · batch.
        assert!(m.peak_allocated_bytes() >= (batch as u64) << 33, "batch {batch}: {}", m.peak_allocated_bytes());
        let formula = activation_peak_bytes(&model, StepShape { batch, seq: 4096 }, &Techniques::default());
        assert_eq!(m.activation_peak_bytes, formula, "batch {batch}: plan = closed form");
        peaks.push(m.peak_allocated_bytes());
    }
    assert!(peaks[0] < peaks[1] && peaks[1] < peaks[2], "memory grows with the batch: {peaks:?}");
    // The same numbers on every platform (computed here in u64 from the sizes alone): the
    // activations are 2 layers of 64sbh + 16sb + 4as²b bytes, and 8sbh + 8sb outside them.
    let (s, h, a) = (4096u64, 1024u64, 64u64);
    let per_layer = |b: u64| 64 * s * b * h + 16 * s * b + 4 * a * s * s * b;
    let outside = |b: u64| 8 * s * b * h + 8 * s * b;
    let f2 = activation_peak_bytes(&model, StepShape { batch: 2, seq: 4096 }, &Techniques::default());
    assert_eq!(f2, 2 * per_layer(2) + outside(2));
    assert_eq!(f2, 18_321_047_552, "a number that passes 2³²");
}

/// Products that pass 2⁶⁴ are refused with a typed error, not wrapped and not a panic.
#[test]
fn products_past_two_to_the_64_are_refused() {
    let max = oomlab::model::MAX_DIM;
    let model = ModelConfig { vocab: 58, seq_len: max, d_model: 1024, n_layers: 1, n_heads: 1024 };
    // batch · heads · seq² = 2²⁰ · 2¹⁰ · 2⁴⁰ = 2⁷⁰ elements.
    match plan(&model, max, max) {
        Err(e @ ConfigError::Shape(ShapeError::SizeLimit { .. })) => {
            let text = e.to_string();
            assert!(text.contains("attention probabilities") && text.contains("elements"), "{text}");
        }
        other => panic!("expected a size refusal, got {:?}", other.map(|p| p.tensors.len())),
    }
    // Just below the tensor limit plans, just above it is refused.
    let m = ModelConfig { vocab: 58, seq_len: 1 << 19, d_model: 64, n_layers: 1, n_heads: 1 };
    // 2¹⁹ · 2³⁸ = 2⁵⁷ elements: plans (without allocating any of it).
    assert!(plan(&m, 1 << 19, 1 << 19).is_ok());
    const { assert!(MAX_TENSOR_ELEMS == 1 << 58) };
    let m = ModelConfig { n_heads: 4, ..m };
    assert!(matches!(plan(&m, 1 << 19, 1 << 19), Err(ConfigError::Shape(ShapeError::SizeLimit { .. }))));
    // The estimator: sizes past u64 are refused, never saturated.
    let arch =
        Architecture { layers: 4096, hidden: 8192, heads: 64, kv_heads: 64, ffn: 32768, positions: 0, ..arch_small() };
    let gpu = estimate::presets::gpu("h200").expect("h200");
    let s = Setup::new(arch, gpu, estimate::MAX_BATCH, 1 << 22);
    match estimate::estimate(&s) {
        Err(e @ EstimateError::TooLarge { .. }) => assert!(e.to_string().contains("more than oomlab counts")),
        other => panic!("expected TooLarge, got {:?}", other.map(|e| e.peak_bytes)),
    }
    // A mixture of the most experts at the largest sizes: refused before any count is
    // multiplied out in u64 (it would pass 2⁶⁴), here and on wasm32.
    let mut moe = arch_small();
    moe.layers = 4096;
    moe.hidden = 1 << 18;
    moe.ffn = 1 << 20;
    moe.mlp = estimate::Mlp::SwiGlu;
    let wide = estimate::Moe { experts: 4096, top_k: 8, shared_ffn: 1 << 20, renormalise: true, ..Default::default() };
    moe.block.moe = Some(wide);
    let e = estimate::estimate(&Setup::new(moe.clone(), estimate::presets::gpu("h200").expect("h200"), 1, 1))
        .expect_err("too many parameters");
    assert!(e.to_string().contains("2^56 parameters"), "{e}");
    // 16 such layers (3·2⁵⁰ expert parameters each) are countable; 32 pass 2⁵⁶.
    moe.layers = 16;
    assert!(moe.validate().is_ok(), "{:?}", moe.validate());
    moe.layers = 32;
    assert!(moe.validate().is_err());
    // Dense layers among them (DeepSeek-V3's first_k_dense_replace) at the widest MLP and the
    // most layers: counted as a bound first too; a dense layer with no width is refused.
    moe.layers = 16;
    moe.block.moe = Some(estimate::Moe { dense_first: 15, dense_ffn: 1 << 20, ..wide });
    assert!(moe.validate().is_ok(), "{:?}", moe.validate());
    assert_eq!((moe.moe_layers(), moe.dense_layers()), (1, 15));
    moe.block.moe = Some(estimate::Moe { dense_first: 4095, dense_ffn: 1 << 20, ..wide });
    assert!(moe.validate().expect_err("all dense").to_string().contains("no layer"));
    moe.block.moe = Some(estimate::Moe { dense_first: 4, dense_ffn: 0, ..wide });
    assert!(moe.validate().expect_err("no width").to_string().contains("MLP width"));
    moe.layers = 4096;
    moe.block.moe = Some(estimate::Moe { dense_first: 4, dense_ffn: 1 << 20, every: 4096, ..wide });
    assert!(moe.validate().expect_err("too many").to_string().contains("2^56 parameters"));
    // The largest micro-batch and the sweep stop where the sizes stop being countable.
    assert_eq!(estimate::max_micro_batch(&s), Ok(0));
    let sweep = estimate::sweep(&s, &estimate::sweep_batches(0)).expect("valid setup");
    assert!(sweep.is_empty());
}

/// Building a plan is linear in the layers: 4,096 layers in one plan (the sweep took over
/// a minute per plan when parameters were looked up by name). Counted, not timed: every
/// parameter lookup is a map access, and the plan has the ops the bound allows.
#[test]
fn thousands_of_layers_plan_and_too_many_are_refused() {
    let model = ModelConfig { vocab: 7, seq_len: 2, d_model: 7, n_layers: 4096, n_heads: 7 };
    let p = plan(&model, 3, 2).expect("4096 layers plan");
    assert!(p.ops.len() as u64 <= MAX_PLAN_OPS);
    assert!(p.ops.len() > 4096 * 18, "every layer's ops: {}", p.ops.len());
    let m = simulate_peak(&p, TIB).expect("fits");
    assert!(m.peak_allocated_bytes() > 0);
    let deep = ModelConfig { n_layers: 1 << 20, ..model };
    match plan(&deep, 1, 2) {
        Err(e @ ConfigError::Shape(ShapeError::SizeLimit { .. })) => assert!(e.to_string().contains("ops"), "{e}"),
        other => panic!("expected an op-count refusal, got {:?}", other.map(|p| p.ops.len())),
    }
}

fn arch_small() -> Architecture {
    Architecture::from_toy(&ModelConfig::toy(58))
}

/// A dimension: sometimes 0, else roughly log-uniform in [1, 2^bits] — in integers only, so the
/// inputs are the same on every platform (a libm's `powf` may round differently).
fn dim(rng: &mut Rng, bits: u32) -> usize {
    if rng.below(50) == 0 {
        return 0;
    }
    let base = 1usize << rng.below(bits as usize);
    base + rng.below(base)
}

fn small(rng: &mut Rng, n: usize) -> usize {
    rng.below(n + 1)
}

fn random_techniques(rng: &mut Rng, layers: usize) -> Techniques {
    let checkpoint = match rng.below(4) {
        0 => Checkpoint::Off,
        1 => Checkpoint::Selective,
        2 => Checkpoint::Every(small(rng, layers + 1)),
        _ => Checkpoint::Every(dim(rng, 22)),
    };
    let lora = (rng.below(3) == 0).then(|| {
        let mut l = LoraConfig::new(if rng.below(2) == 0 { small(rng, 16) } else { dim(rng, 22) });
        l.alpha = [1.0, 16.0, -1.0, f32::NAN, 0.0][rng.below(5)];
        l.qkv = rng.below(2) == 0;
        l.proj = rng.below(2) == 0;
        l.mlp = rng.below(2) == 0;
        l
    });
    Techniques {
        checkpoint,
        attention: if rng.below(2) == 0 { AttentionKind::Standard } else { AttentionKind::Fused },
        accum: if rng.below(4) == 0 { dim(rng, 22) } else { 1 + small(rng, 3) },
        lora,
        precision: [Precision::Fp32, Precision::Fp16, Precision::Bf16][rng.below(3)],
        // The allocator's options, sometimes out of range (a typed refusal, never a panic).
        allocator: oomlab::plan::AllocatorConfig {
            expandable_segments: rng.below(3) == 0,
            max_split_size: (rng.below(6) == 0)
                .then(|| (if rng.below(4) == 0 { small(rng, 20) } else { 21 + small(rng, 64) }) as u64)
                .map(|mib| mib << 20),
            garbage_collection_threshold: (rng.below(6) == 0)
                .then(|| if rng.below(4) == 0 { 1.0 + rng.uniform() } else { rng.uniform() }),
        },
        // Data parallelism, sometimes beyond 8 GPUs, stage 3 or a bucket off the alignment.
        parallel: oomlab::plan::Parallel {
            gpus: if rng.below(8) == 0 { small(rng, 10) } else { 1 },
            zero: if rng.below(50) == 0 { 4 } else { rng.below(4) as u8 },
            bucket_elems: if rng.below(50) == 0 { dim(rng, 30) as u64 } else { 128 * (1 + small(rng, 256)) as u64 },
        },
        // Offload to host memory, sometimes with what it refuses (fp16, LoRA, several GPUs).
        offload: oomlab::plan::Offload::ALL[if rng.below(8) == 0 { 1 + rng.below(2) } else { 0 }],
        batching: oomlab::plan::Batching::Windows,
    }
}

/// 10,000 random configurations, each control up to its limit and beyond, through
/// `Plan::build_with`, the prediction and the estimator: no panic, every refusal a typed error
/// with a message, every prediction within its budget, and the closed-form activations equal to
/// the plan's wherever the step fits.
#[test]
fn ten_thousand_random_configurations_never_panic() {
    let mut rng = Rng::new(20261130);
    let (mut planned, mut refused, mut fitted, mut oom) = (0, 0, 0, 0);
    // A digest of every number computed (a hash, so wrapping is its arithmetic): the same on
    // every platform, so wasm32 (32-bit usize) computes exactly what native does.
    let mut digest = Digest::default();
    for case in 0..10_000 {
        // Mostly small models (the ones that build and simulate), with every dimension
        // sometimes far past its limit.
        let big = rng.below(8) == 0;
        let bits = |rng: &mut Rng, small_bits: u32| if big { dim(rng, 22) } else { dim(rng, small_bits) };
        let n_heads = bits(&mut rng, 3);
        let model = ModelConfig {
            vocab: bits(&mut rng, 8),
            seq_len: bits(&mut rng, 6),
            // (A product capped at 2³⁰, so that the inputs fit a 32-bit usize alike.)
            d_model: if rng.below(2) == 0 {
                (n_heads as u64 * bits(&mut rng, 4) as u64).min(1 << 30) as usize
            } else {
                bits(&mut rng, 7)
            },
            n_layers: if rng.below(10) == 0 { dim(&mut rng, 22) } else { small(&mut rng, 4) },
            n_heads,
        };
        let seq = if rng.below(2) == 0 { model.seq_len } else { bits(&mut rng, 6) };
        let shape = StepShape { batch: bits(&mut rng, 5), seq };
        let techniques = random_techniques(&mut rng, model.n_layers);
        let kind = [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd][rng.below(3)];
        let optimizer = OptimizerConfig { kind, ..OptimizerConfig::default() };
        let budget = if rng.below(10) == 0 { u64::MAX >> rng.below(64) } else { 1u64 << (10 + rng.below(40)) };
        let what = format!("case {case}: {model:?} {shape:?} {techniques:?} budget {budget}");
        match Plan::build_with(&model, shape, &optimizer, &techniques) {
            Err(e) => {
                refused += 1;
                assert!(!e.to_string().is_empty(), "{what}: a refusal without a message");
                digest.add_text(&e.to_string());
            }
            Ok(plan) => {
                planned += 1;
                digest.add(plan.tensors.iter().map(|t| t.size_bytes()).fold(0, u64::wrapping_add));
                assert!(plan.ops.len() as u64 <= MAX_PLAN_OPS, "{what}");
                assert!(plan.tensors.iter().all(|t| t.numel() <= MAX_TENSOR_ELEMS), "{what}");
                match simulate_peak(&plan, budget) {
                    Ok(m) => {
                        fitted += 1;
                        assert!(m.peak_allocated_bytes() <= m.peak_reserved_bytes(), "{what}");
                        assert!(m.peak_reserved_bytes() <= budget, "{what}");
                        let formula = activation_peak_bytes(&model, shape, &techniques);
                        assert_eq!(m.activation_peak_bytes, formula, "{what}: plan = closed form");
                        digest.add(m.peak_allocated_bytes());
                        digest.add(m.peak_reserved_bytes());
                    }
                    Err(e) => {
                        oom += 1;
                        assert!(e.message.starts_with("GPU out of memory"), "{what}: {}", e.message);
                        digest.add_text(&e.message);
                    }
                }
            }
        }
        // The estimator, on the toy's setup and on a random real architecture.
        let toy = Setup::toy(&model, shape, kind, &techniques, budget);
        check_estimate(&toy, &what, &mut digest);
        let arch = Architecture {
            vocab: dim(&mut rng, 26) as u64,
            hidden: dim(&mut rng, 20) as u64,
            layers: dim(&mut rng, 14) as u64,
            heads: dim(&mut rng, 14) as u64,
            kv_heads: dim(&mut rng, 14) as u64,
            ffn: dim(&mut rng, 22) as u64,
            positions: if rng.below(2) == 0 { 0 } else { dim(&mut rng, 26) as u64 },
            ..arch_small()
        };
        let gpu = estimate::Gpu { name: "fuzz".into(), memory_bytes: budget, compute_major: 8 };
        let mut real = Setup::new(arch, gpu, dim(&mut rng, 22) as u64, dim(&mut rng, 24) as u64);
        real.accum = dim(&mut rng, 22) as u64;
        real.parallel.data = dim(&mut rng, 22) as u64;
        real.parallel.zero = rng.below(5) as u8;
        real.checkpoint = techniques.checkpoint;
        real.attention = techniques.attention;
        check_estimate(&real, &what, &mut digest);
    }
    println!("{planned} planned ({fitted} fit, {oom} out of memory), {refused} refused; digest {:#x}", digest.0);
    assert_eq!(digest.0, FUZZ_DIGEST, "the numbers differ from the reference platform's");
    assert!(planned > 800 && refused > 1000 && fitted > 500 && oom > 100, "the cases reach every outcome");
}

/// The digest of every number the fuzz computes, on x86-64 Linux (and asserted on wasm32 too).
const FUZZ_DIGEST: u64 = 0x9b66_47b1_001d_2b3d;

/// FNV-1a over the numbers and messages a test computes.
struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    fn add(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn add_text(&mut self, s: &str) {
        for b in s.bytes() {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn check_estimate(s: &Setup, what: &str, digest: &mut Digest) {
    match estimate::estimate(s) {
        Ok(e) => {
            assert!(e.peak_bytes <= estimate::MAX_ESTIMATE_BYTES, "{what}");
            let sum = e.lines.iter().map(|l| l.bytes as u128).sum::<u128>();
            assert_eq!(sum, e.peak_bytes as u128, "{what}: the lines add up to the peak");
            digest.add(e.peak_bytes);
        }
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{what}: a refusal without a message");
            digest.add_text(&e.to_string());
        }
    }
}

/// The browser case, through the app's own derived data (the sweep and the prediction
/// the views draw): d 1024, 32 heads, sequence 4096, a 1 TiB budget set through the link.
/// Memory must grow with the batch — it fell from 7.00 GiB to 1.66 GiB when 4 GiB tensors
/// wrapped to 0 in 32 bits.
#[test]
fn the_apps_sweep_grows_with_the_batch_past_four_gib() {
    use oomlab::app::Derived;
    use oomlab::app::settings::{ModelDims, Settings};
    let settings = Settings {
        dims: ModelDims { d_model: 1024, n_layers: 2, n_heads: 32, max_seq: 4096 },
        seq: 4096,
        batch: 2,
        device: oomlab::app::DeviceSettings::with_budget(TIB),
        ..Settings::default()
    }
    .clamped();
    let derived = Derived::new(&settings, 58);
    let predicted = derived.predicted.as_ref().expect("a plan").as_ref().expect("batch 2 fits 1 TiB");
    assert!(predicted.peak_allocated_bytes() > 8 << 30, "{}", predicted.peak_allocated_bytes());
    let points = &derived.sweep[0].points;
    let fits: Vec<(usize, u64)> =
        points.iter().filter_map(|(b, r)| r.as_ref().ok().map(|m| (*b, m.peak_allocated_bytes()))).collect();
    assert!(fits.len() >= 6, "{fits:?}");
    for w in fits.windows(2) {
        assert!(w[1].1 > w[0].1, "memory falls from batch {} to {}: {fits:?}", w[0].0, w[1].0);
    }
    assert!(fits[0].1 > 4 << 30 && fits[1].1 > fits[0].1 + (4 << 30), "{fits:?}");
    // Past the budget the sweep says out of memory, never a small number.
    assert!(points.iter().any(|(_, r)| r.is_err()), "a batch beyond 1 TiB");
}

/// A snapshot's pickle whose length fields claim 4 GiB, 2⁶³ or more bytes, or whose integers pass
/// 64 bits, is refused with a message — natively and where `usize` is 32 bits — and the largest
/// i64 sizes a real snapshot can hold sum without wrapping.
#[test]
fn hostile_snapshot_lengths_are_refused() {
    use oomlab::memory::snapshot::{Segment, Snapshot, export, read, replay};
    let cases: [&[u8]; 5] = [
        // BINUNICODE of 2³² − 1 bytes, SHORT_BINBYTES past the end, BINUNICODE8 of 2⁶³ bytes.
        &[0x80, 4, b'X', 0xff, 0xff, 0xff, 0xff, b'a'],
        &[0x80, 4, b'C', 200, 1, 2],
        &[0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x80, b'a'],
        // LONG4 claiming 2³² − 1 bytes of integer.
        &[0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff, 1],
        // A dict whose "segments" value is a 9-byte integer (beyond i64).
        &[
            0x80, 4, b'}', 0x8c, 8, b's', b'e', b'g', b'm', b'e', b'n', b't', b's', 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1,
            b's', b'.',
        ],
    ];
    for bytes in cases {
        assert!(read::from_bytes(bytes).is_err(), "{bytes:?}");
    }
    // Two segments of i64::MAX / 2 bytes each: the sums saturate, never wrap to negative.
    let big = Segment { total_size: i64::MAX / 2 + 1, ..Segment::default() };
    let snap = Snapshot { segments: vec![big.clone(), big], ..Snapshot::default() };
    let r = replay::replay(&oomlab::memory::snapshot::dump::Dump::from_wire(&snap), 0, 1);
    assert_eq!(r.final_state.reserved, i64::MAX);
    let back = read::from_bytes(&export::to_pickle(&snap).expect("pickle")).expect("reads back");
    assert_eq!(back.segments[0].total_size, i64::MAX / 2 + 1);
}
