//! Mixed precision, executed: 16-bit activations, working weights and gradients on both
//! backends (and on the GPU both with native `f16` storage and packed into `u32` as on adapters
//! without `SHADER_F16`); fp32 master weights and optimizer state; fp16's dynamic loss scaling.
//!
//! Documented tolerance of a 16-bit step against fp32 (max |g − g₃₂| / max |g₃₂| over the flat
//! gradients, loss relative): fp16 ≤ 5e-3, bf16 ≤ 5e-2 (fp16 keeps 11 significant bits, bf16 8).

mod common;

use std::sync::OnceLock;

use common::{gpu, rel_err};
use oomlab::backend::Trainer;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::executor::build_kernels_with;
use oomlab::backend::gpu::kernels::GemmKind;
use oomlab::backend::gpu::{GpuContext, GpuExecutor, Kernels};
use oomlab::data::Dataset;
use oomlab::memory::simulate;
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Category, OptimizerConfig, Plan, Precision, Techniques};

const BUDGET: u64 = 1 << 30;

/// A device without `SHADER_F16`: fp16 tensors packed two per u32; with the tiled GEMM, as in a
/// browser (no subgroup GEMM there), so that its 16-bit variants run too (the shared test device
/// runs the subgroup GEMM's, bf16 packed and fp16 native).
fn packed_gpu() -> &'static (GpuContext, std::sync::Arc<Kernels>) {
    static GPU: OnceLock<(GpuContext, std::sync::Arc<Kernels>)> = OnceLock::new();
    GPU.get_or_init(|| {
        gpu(); // sets XDG_RUNTIME_DIR if needed
        let ctx = pollster::block_on(GpuContext::new_headless_with(false)).expect("a GPU adapter");
        assert!(!ctx.native_f16());
        let kernels = pollster::block_on(build_kernels_with(&ctx, GemmKind::Tiled)).expect("kernels");
        (ctx, kernels)
    })
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Cpu,
    /// The shared test device (native f16 where lavapipe offers it).
    Gpu,
    GpuPacked,
}

fn trainer(backend: Backend, plan: Plan) -> Box<dyn Trainer> {
    match backend {
        Backend::Cpu => Box::new(CpuExecutor::<f32>::with_budget(plan, 3, BUDGET).expect("cpu")),
        Backend::Gpu => {
            let g = gpu();
            Box::new(pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, 3, BUDGET)).expect("gpu"))
        }
        Backend::GpuPacked => {
            let (ctx, kernels) = packed_gpu();
            Box::new(pollster::block_on(GpuExecutor::with_budget(ctx, kernels, plan, 3, BUDGET)).expect("gpu"))
        }
    }
}

fn plan(precision: Precision) -> Plan {
    let ds = Dataset::builtin();
    let model = ModelConfig { vocab: ds.tokenizer.vocab_size(), seq_len: 32, d_model: 32, n_layers: 2, n_heads: 4 };
    let t = Techniques { precision, ..Techniques::default() };
    Plan::build_with(&model, StepShape { batch: 4, seq: 32 }, &OptimizerConfig::default(), &t).expect("plan")
}

#[test]
fn a_16_bit_step_is_within_tolerance_of_fp32_on_every_backend() {
    let ds = Dataset::builtin();
    let batch = ds.batch(StepShape { batch: 4, seq: 32 }, 1, 0).expect("batch");
    let mut reference = trainer(Backend::Cpu, plan(Precision::Fp32));
    let loss32 = reference.compute_grads(&batch).expect("fp32");
    let grads32 = reference.read_grads().expect("grads");
    for backend in [Backend::Cpu, Backend::Gpu, Backend::GpuPacked] {
        for (precision, tol) in [(Precision::Fp16, 5e-3), (Precision::Bf16, 5e-2)] {
            let mut t = trainer(backend, plan(precision));
            let loss = t.compute_grads(&batch).expect("step");
            let grads = t.read_grads().expect("grads");
            let err = rel_err(&grads, &grads32);
            let loss_err = ((loss - loss32) / loss32).abs() as f64;
            println!("{backend:?} {}: loss {loss} (fp32 {loss32}), gradients within {err:.1e}", precision.name());
            assert!(loss_err < tol, "{backend:?} {precision:?}: loss {loss} vs {loss32}");
            assert!(err < tol, "{backend:?} {precision:?}: gradients differ by {err:e} (tolerance {tol:e})");
            // The stored gradients really are 16-bit values (fp16 ones also carry the loss scale).
            let scale = t.loss_scaler().map_or(1.0, |s| s.scale);
            for g in grads.iter().take(2000) {
                let stored = g * scale;
                let rounded = match precision {
                    Precision::Fp16 => half::f16::from_f32(stored).to_f32(),
                    _ => half::bf16::from_f32(stored).to_f32(),
                };
                assert!((stored - rounded).abs() <= stored.abs() * 1e-6, "{backend:?}: {stored} is not 16-bit");
            }
        }
    }
}

#[test]
fn memory_shows_16_bit_storage_and_fp32_master_weights() {
    let p32 = simulate(&plan(Precision::Fp32), BUDGET).expect("fits");
    let n = plan(Precision::Fp32).tensor(plan(Precision::Fp32).handles.params).numel();
    for precision in [Precision::Fp16, Precision::Bf16] {
        let p = plan(precision);
        let m = simulate(&p, BUDGET).expect("fits");
        let bytes = |c| m.peak_requested.get(c);
        assert_eq!(bytes(Category::Parameters), 2 * n, "{precision:?}: 16-bit working weights");
        assert_eq!(bytes(Category::Gradients), 2 * n, "{precision:?}: 16-bit gradients");
        assert_eq!(bytes(Category::MasterWeights), 4 * n, "{precision:?}: fp32 master weights");
        assert_eq!(bytes(Category::OptimizerState), 8 * n, "{precision:?}: AdamW's fp32 m and v");
        assert_eq!(p32.peak_requested.get(Category::MasterWeights), 0);
        // Activations roughly halve (LayerNorm statistics stay fp32).
        let (a16, a32) = (m.activation_peak_bytes, p32.activation_peak_bytes);
        assert!(a16 * 2 >= a32 && a16 * 10 < a32 * 6, "{precision:?}: {a16} vs {a32}");
    }
}

/// An injected overflow (a loss scale so large the fp16 gradients become inf): the step is
/// skipped, the scale halves, the weights stay as they were and finite; the next step applies.
#[test]
fn an_overflow_skips_the_step_and_backs_off_the_scale() {
    let ds = Dataset::builtin();
    for backend in [Backend::Cpu, Backend::Gpu, Backend::GpuPacked] {
        let mut t = trainer(backend, plan(Precision::Fp16));
        let shape = t.plan().batch_shape();
        let before = t.read_params().expect("params");
        let huge = 2f32.powi(40);
        if let Some(s) = t.loss_scaler_mut() {
            s.scale = huge;
        }
        t.train_step(&ds.batch(shape, 0, 0).expect("batch")).expect("step");
        let after = t.read_params().expect("params");
        let s = *t.loss_scaler().expect("fp16 has a scaler");
        assert_eq!(s.scale, huge / 2.0, "{backend:?}: the scale backs off");
        assert_eq!(s.skipped_steps, 1, "{backend:?}");
        assert_eq!(after, before, "{backend:?}: a skipped step leaves the weights alone");
        assert!(after.iter().all(|x| x.is_finite()));
        // Back to a sane scale: the next step applies, and growth follows N clean steps.
        if let Some(s) = t.loss_scaler_mut() {
            s.scale = 1024.0;
            s.growth_interval = 2;
        }
        t.train_step(&ds.batch(shape, 0, 1).expect("batch")).expect("step");
        let applied = t.read_params().expect("params");
        assert_ne!(applied, before, "{backend:?}: the step after applies");
        assert!(applied.iter().all(|x| x.is_finite()));
        t.train_step(&ds.batch(shape, 0, 2).expect("batch")).expect("step");
        assert_eq!(t.loss_scaler().map(|s| s.scale), Some(2048.0), "{backend:?}: doubled after 2 clean steps");
    }
}

/// fp16 on the GPU, with accumulation and checkpointing too, learns like fp32.
#[test]
fn mixed_precision_trains() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    for precision in [Precision::Fp16, Precision::Bf16] {
        let t =
            Techniques { precision, accum: 2, checkpoint: oomlab::plan::Checkpoint::Every(1), ..Techniques::default() };
        let plan =
            Plan::build_with(&model, StepShape { batch: 4, seq: 64 }, &OptimizerConfig::default(), &t).expect("plan");
        let predicted = simulate(&plan, BUDGET).expect("fits");
        let mut trainer = trainer(Backend::Gpu, plan);
        let shape = trainer.plan().batch_shape();
        let mut losses = Vec::new();
        for step in 0..30 {
            losses.push(trainer.train_step(&ds.batch(shape, 0, step).expect("batch")).expect("step"));
        }
        let last: f32 = losses[25..].iter().sum::<f32>() / 5.0;
        println!("{precision:?}: loss {} → {last}", losses[0]);
        assert!(last < losses[0] - 0.5, "{precision:?}: loss {} → {last}", losses[0]);
        let measured = trainer.memory().expect("a step ran");
        common::assert_warm_step(&format!("{precision:?}"), &predicted, measured);
    }
}

/// Every combination that makes sense runs on both backends: two real steps each, finite
/// losses, and the allocator measuring what the plan predicts.
#[test]
fn combinations_run_on_both_backends() {
    use oomlab::model::params::LoraConfig;
    use oomlab::plan::{AttentionKind, Checkpoint};
    let ds = Dataset::builtin();
    let model = ModelConfig { vocab: ds.tokenizer.vocab_size(), seq_len: 24, d_model: 32, n_layers: 3, n_heads: 4 };
    let lora = LoraConfig::new(4).with_targets("all").expect("targets");
    let combos = [
        Techniques {
            checkpoint: Checkpoint::Every(1),
            attention: AttentionKind::Fused,
            accum: 2,
            precision: Precision::Fp16,
            lora: None,
            ..Default::default()
        },
        Techniques {
            checkpoint: Checkpoint::Selective,
            attention: AttentionKind::Standard,
            accum: 3,
            precision: Precision::Bf16,
            lora: Some(lora),
            ..Default::default()
        },
        Techniques {
            checkpoint: Checkpoint::Every(2),
            attention: AttentionKind::Fused,
            accum: 1,
            precision: Precision::Fp16,
            lora: Some(lora),
            ..Default::default()
        },
    ];
    for t in combos {
        for kind in [oomlab::plan::OptimizerKind::AdamW, oomlab::plan::OptimizerKind::Momentum] {
            let opt = OptimizerConfig { kind, ..OptimizerConfig::default() };
            let plan = Plan::build_with(&model, StepShape { batch: 2, seq: 24 }, &opt, &t).expect("plan");
            let predicted = simulate(&plan, BUDGET).expect("fits");
            for backend in [Backend::Cpu, Backend::Gpu] {
                let mut tr = trainer(backend, plan.clone());
                let shape = tr.plan().batch_shape();
                for step in 0..2 {
                    let loss = tr.train_step(&ds.batch(shape, 0, step).expect("batch")).expect("step");
                    assert!(loss.is_finite(), "{backend:?} {}: loss {loss}", t.describe());
                }
                let measured = tr.memory().expect("a step ran");
                common::assert_warm_step(&format!("{backend:?} {}", t.describe()), &predicted, measured);
            }
        }
    }
}
