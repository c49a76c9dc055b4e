//! Measured = predicted = formula: what the allocator sees while each backend executes a step
//! equals the plan's prediction exactly — per category, at the peak and at every op — and the
//! saved activations equal the closed-form formula.

mod common;

use common::gpu;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::Dataset;
use oomlab::memory::formula::activation_bytes;
use oomlab::memory::{StepMemory, simulate};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{OptimizerConfig, OptimizerKind, Plan};

const BUDGET: u64 = 1 << 30;

fn same(what: &str, predicted: &StepMemory, measured: &StepMemory) {
    assert_eq!(predicted.peak_allocated, measured.peak_allocated, "{what}: allocated per category at the peak");
    assert_eq!(predicted.peak_requested, measured.peak_requested, "{what}: tensor bytes per category at the peak");
    assert_eq!(predicted.peak_allocated_bytes(), measured.peak_allocated_bytes(), "{what}: peak allocated");
    assert_eq!(predicted.peak_reserved_bytes(), measured.peak_reserved_bytes(), "{what}: peak reserved");
    assert_eq!(predicted.timeline, measured.timeline, "{what}: every op");
    assert_eq!(predicted.live_at_peak, measured.live_at_peak, "{what}: tensors alive at the peak");
}

#[test]
fn measured_equals_predicted_equals_formula_on_both_backends() {
    let ds = Dataset::builtin();
    let v = ds.tokenizer.vocab_size();
    let cases = [
        (ModelConfig::toy(v), 1, 64, OptimizerKind::AdamW),
        (ModelConfig::toy(v), 16, 64, OptimizerKind::AdamW),
        (ModelConfig::toy(v), 40, 32, OptimizerKind::Momentum),
        (ModelConfig { vocab: v, seq_len: 48, d_model: 96, n_layers: 3, n_heads: 6 }, 5, 48, OptimizerKind::Sgd),
    ];
    let g = gpu();
    for (model, batch, seq, kind) in cases {
        let shape = StepShape { batch, seq };
        let opt = OptimizerConfig { kind, ..OptimizerConfig::default() };
        let plan = Plan::build(&model, shape, &opt).expect("plan");
        let predicted = simulate(&plan, BUDGET).expect("fits");
        let formula = activation_bytes(&model, shape);
        assert_eq!(predicted.activation_peak_bytes, formula, "plan = formula");
        let what = format!("d{} L{} B{batch} T{seq} {kind:?}", model.d_model, model.n_layers);

        let batch_data = ds.batch(shape, 1, 0).expect("batch");
        let mut cpu = CpuExecutor::<f32>::with_budget(plan.clone(), 1, BUDGET).expect("cpu");
        cpu.train_step(&batch_data).expect("cpu step");
        let cpu_mem = cpu.memory().expect("a step ran").clone();
        same(&format!("cpu {what}"), &predicted, &cpu_mem);
        assert_eq!(cpu_mem.activation_peak_bytes, formula, "cpu = formula");

        let mut gpu_exec =
            pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, 1, BUDGET)).expect("gpu");
        let loss = gpu_exec.train_step(&batch_data).expect("gpu step");
        assert!(loss.is_finite());
        same(&format!("gpu {what}"), &predicted, gpu_exec.memory());
        assert_eq!(gpu_exec.memory().activation_peak_bytes, formula, "gpu = formula");
        // the reserved bytes are real wgpu buffers
        assert_eq!(gpu_exec.real_reserved_bytes(), predicted.peak_reserved_bytes(), "{what}: real GPU memory");
        println!(
            "{what}: peak allocated {} reserved {} activations {}",
            predicted.peak_allocated_bytes(),
            predicted.peak_reserved_bytes(),
            formula
        );
    }
}

#[test]
fn oom_on_both_backends_then_a_smaller_config_runs() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let budget = 48 << 20;
    let big = Plan::build(&model, StepShape { batch: 256, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let predicted = simulate(&big, budget).expect_err("too big for 48 MiB");
    let g = gpu();

    let mut cpu = CpuExecutor::<f32>::with_budget(big.clone(), 0, budget).expect("model state fits");
    let batch = ds.batch(big.shape, 0, 0).expect("batch");
    match cpu.train_step(&batch) {
        Err(BackendError::OutOfMemory(oom)) => assert_eq!(oom.message, predicted.message, "cpu OOM = predicted OOM"),
        other => panic!("expected an OOM, got {:?}", other.map(|_| ())),
    }
    // the failed step released its memory: only model state, the batch and the loss remain
    let kept: u64 = big
        .tensors
        .iter()
        .zip(big.lifetimes())
        .filter(|(_, l)| !matches!(l, oomlab::plan::Lifetime::Ops { .. }))
        .map(|(t, _)| (t.size_bytes() as u64).div_ceil(512) * 512)
        .sum();
    assert_eq!(cpu.allocator_stats().allocated_bytes, kept);
    assert!(cpu.memory().is_none(), "no step finished");

    match pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, big, 0, budget)) {
        Err(BackendError::OutOfMemory(oom)) => assert_eq!(oom.message, predicted.message, "gpu OOM = predicted OOM"),
        Err(e) => panic!("expected an OOM, got {e}"),
        Ok(_) => panic!("expected an OOM"),
    }

    let small = Plan::build(&model, StepShape { batch: 8, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let b = ds.batch(small.shape, 0, 0).expect("batch");
    let mut gpu_exec =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, small.clone(), 0, budget)).expect("fits");
    assert!(gpu_exec.train_step(&b).expect("step").is_finite());
    let mut cpu = CpuExecutor::<f32>::with_budget(small, 0, budget).expect("fits");
    assert!(cpu.train_step(&b).expect("step").is_finite());
}

/// A real out-of-memory from the wgpu device cannot be provoked reliably on lavapipe (it
/// overcommits host memory), so this checks the report the executor builds from one: the same
/// wording as the allocator's, naming the tensor and op that first needed the refused segment.
#[test]
fn a_device_oom_is_reported_like_the_allocators() {
    use oomlab::backend::gpu::executor::{device_oom, place};
    let model = ModelConfig::toy(58);
    let plan = Plan::build(&model, StepShape { batch: 64, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let placed = place(&plan, BUDGET).expect("fits the budget");
    let (segment, size) = *placed.segments.last().expect("segments");
    let reserved_before: u64 = placed.segments.iter().map(|&(_, s)| s).sum::<u64>() - size;
    let oom = device_oom(&plan, &placed.placements, segment, size, reserved_before, BUDGET, "Out of Memory");
    println!("{}", oom.message);
    assert!(oom.message.starts_with("GPU out of memory. Tried to allocate"), "{}", oom.message);
    assert!(oom.message.contains("wgpu device itself refused"), "{}", oom.message);
    assert!(oom.message.contains(&oom.tensor_name) && oom.message.contains(&oom.op_label));
    let p = placed.placements[oom.tensor.0].expect("the tensor is placed");
    assert_eq!(p.segment, segment, "the named tensor lives in the refused segment");
    assert_eq!(oom.error.tried_bytes, size);
    let err = BackendError::OutOfMemory(Box::new(oom));
    assert!(err.to_string().starts_with("GPU out of memory"));
}
