//! Full training steps: GPU against the CPU reference, learning, and bad input.

mod common;

use common::{gpu, rel_err};
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::{Batch, Dataset};
use oomlab::model::{ModelConfig, ShapeError, StepShape};
use oomlab::plan::ConfigError;
use oomlab::plan::{OptimizerConfig, Plan};

fn executors(
    model: &ModelConfig,
    shape: StepShape,
    opt: &OptimizerConfig,
    seed: u64,
) -> (CpuExecutor<f32>, GpuExecutor) {
    let plan = Plan::build(model, shape, opt).expect("plan");
    let g = gpu();
    let gpu_exec = pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, plan.clone(), seed)).expect("gpu executor");
    (CpuExecutor::new(plan, seed).expect("cpu executor"), gpu_exec)
}

/// Loss and every parameter's gradient agree within 1e-4 (normwise relative error per tensor).
#[test]
fn gpu_step_matches_cpu_loss_and_every_gradient() {
    let ds = Dataset::builtin();
    let v = ds.tokenizer.vocab_size();
    let configs = [
        (ModelConfig::toy(v), StepShape { batch: 4, seq: 64 }),
        (ModelConfig { vocab: v, seq_len: 40, d_model: 48, n_layers: 3, n_heads: 6 }, StepShape { batch: 3, seq: 37 }),
    ];
    for (model, shape) in configs {
        let (mut cpu, mut gpu) = executors(&model, shape, &OptimizerConfig::default(), 5);
        let batch = ds.batch(shape, 5, 0).expect("batch");
        let lc = cpu.compute_grads(&batch).expect("cpu step");
        let lg = gpu.compute_grads(&batch).expect("gpu step");
        let loss_err = ((lc - lg) / lc).abs();
        println!("{model:?} {shape:?}: loss cpu {lc} gpu {lg} (rel {loss_err:.2e})");
        assert!(loss_err < 1e-4, "loss differs: cpu {lc} gpu {lg}");
        let gc = cpu.read_grads().expect("grads");
        let gg = gpu.read_grads().expect("grads");
        let mut worst = 0.0f64;
        for spec in &cpu.plan().layout.specs {
            let r = spec.host_range().expect("fits");
            let err = rel_err(&gg[r.clone()], &gc[r]);
            worst = worst.max(err);
            assert!(err < 1e-4, "gradient of {} differs by {err:.2e}", spec.name);
        }
        println!("  worst gradient relative error {worst:.2e}");
        // and the optimizer: three full steps keep the parameters together
        for i in 1..4 {
            let b = ds.batch(shape, 5, i).expect("batch");
            cpu.train_step(&b).expect("cpu");
            gpu.train_step(&b).expect("gpu");
        }
        let pc = cpu.read_params().expect("params");
        let pg = gpu.read_params().expect("params");
        let err = rel_err(&pg, &pc);
        println!("  parameters after 3 AdamW steps: relative error {err:.2e}");
        assert!(err < 1e-4);
    }
}

/// The default config at batch 16 learns on the GPU: 200 steps bring the loss well below ln(V)
/// (the loss of a uniform guess).
#[test]
fn two_hundred_steps_learn() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let shape = StepShape { batch: 16, seq: 64 };
    let (_, mut gpu) = executors(&model, shape, &OptimizerConfig::default(), 0);
    let uniform = (model.vocab as f32).ln();
    let mut losses = Vec::new();
    for step in 0..200 {
        let batch = ds.batch(shape, 0, step).expect("batch");
        losses.push(gpu.train_step(&batch).expect("step"));
    }
    let last10: f32 = losses[190..].iter().sum::<f32>() / 10.0;
    println!("ln(V) = {uniform:.3}; first loss {:.3}; mean of the last 10: {last10:.3}", losses[0]);
    assert!((losses[0] - uniform).abs() < 0.3, "an untrained model should be near ln(V)");
    assert!(last10 < uniform - 1.2, "loss {last10} is not well below ln(V) = {uniform}");
}

#[test]
fn sgd_with_momentum_trains_too() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let shape = StepShape { batch: 8, seq: 32 };
    let (mut cpu, mut gpu) = executors(&model, shape, &OptimizerConfig::sgd_momentum(0.3, 0.9), 1);
    let mut first = None;
    let mut last = 0.0;
    for step in 0..30 {
        let batch = ds.batch(shape, 1, step).expect("batch");
        let lg = gpu.train_step(&batch).expect("gpu");
        let lc = cpu.train_step(&batch).expect("cpu");
        assert!(((lg - lc) / lc).abs() < 1e-3, "step {step}: gpu {lg} cpu {lc}");
        first.get_or_insert(lg);
        last = lg;
    }
    assert!(last < first.unwrap_or(f32::MAX) - 0.5, "SGD+momentum did not learn: {first:?} → {last}");
}

#[test]
fn bad_batches_are_errors_not_panics() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let shape = StepShape { batch: 2, seq: 8 };
    let (mut cpu, mut gpu) = executors(&model, shape, &OptimizerConfig::default(), 0);
    let mut batch = ds.batch(shape, 0, 0).expect("batch");
    batch.inputs[3] = 10_000;
    for t in [&mut cpu as &mut dyn Trainer, &mut gpu as &mut dyn Trainer] {
        assert!(matches!(
            t.train_step(&batch),
            Err(BackendError::Config(ConfigError::Shape(ShapeError::TokenOutOfRange { id: 10_000, .. })))
        ));
    }
    let wrong = Batch {
        shape: StepShape { batch: 1, seq: 8 },
        inputs: vec![0; 8],
        targets: vec![0; 8],
        doc_starts: Vec::new(),
    };
    assert!(matches!(gpu.train_step(&wrong), Err(BackendError::ShapeMismatch { .. })));
    // and the executor still works afterwards
    let good = ds.batch(shape, 0, 1).expect("batch");
    assert!(gpu.train_step(&good).expect("step").is_finite());
}

#[test]
fn configs_beyond_the_adapter_limits_are_clear_errors() {
    let g = gpu();
    let limit = g.ctx.limits().max_storage_buffer_binding_size.min(g.ctx.limits().max_buffer_size);
    // activations far beyond any binding limit (the attention probabilities alone are 1 TiB)
    let model = ModelConfig { vocab: 65, seq_len: 8192, d_model: 64, n_layers: 1, n_heads: 64 };
    let shape = StepShape { batch: 64, seq: 8192 };
    let plan = Plan::build(&model, shape, &OptimizerConfig::default()).expect("plan");
    assert!(plan.tensors.iter().any(|t| t.size_bytes() > limit));
    match pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, plan, 0)) {
        Err(e @ BackendError::Gpu(oomlab::backend::gpu::GpuError::ExceedsLimit { .. })) => {
            let msg = e.to_string();
            println!("{msg}");
            assert!(msg.starts_with("tensor ") && msg.contains("choose a smaller configuration"), "{msg}");
        }
        Err(other) => panic!("expected ExceedsLimit, got {other}"),
        Ok(_) => panic!("expected ExceedsLimit"),
    }
}

/// A lost device (here destroyed on purpose) gives a clear error, not a panic or a hang.
#[test]
fn a_lost_device_is_a_clear_error() {
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter");
    let kernels = pollster::block_on(oomlab::backend::gpu::executor::build_kernels(&ctx)).expect("kernels");
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let shape = StepShape { batch: 2, seq: 16 };
    let plan = Plan::build(&model, shape, &OptimizerConfig::default()).expect("plan");
    let mut exec = pollster::block_on(GpuExecutor::new(&ctx, &kernels, plan.clone(), 0)).expect("executor");
    let batch = ds.batch(shape, 0, 0).expect("batch");
    assert!(exec.train_step(&batch).expect("a step before").is_finite());
    ctx.device.destroy();
    let _ = ctx.device.poll(wgpu::PollType::wait_indefinitely());
    let err = exec.train_step(&batch).expect_err("the device is gone");
    let msg = err.to_string();
    println!("{msg}");
    assert!(msg.contains("lost"), "{msg}");
    let again = pollster::block_on(GpuExecutor::new(&ctx, &kernels, plan, 0));
    assert!(again.is_err(), "no new executor on a lost device");
}
