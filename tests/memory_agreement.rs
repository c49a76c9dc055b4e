//! Measured = predicted = formula: what the allocator sees while each backend executes a step
//! equals the plan's prediction exactly — per category, at the peak and at every op — and the
//! saved activations equal the closed-form formula.

mod common;

use common::gpu;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::Dataset;
use oomlab::memory::allocator::Event;
use oomlab::memory::device::DeviceMemory;
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
        let gpu_mem = gpu_exec.memory().expect("a step ran").clone();
        same(&format!("gpu {what}"), &predicted, &gpu_mem);
        assert_eq!(gpu_mem.activation_peak_bytes, formula, "gpu = formula");
        // the reserved bytes are real wgpu buffers…
        assert_eq!(gpu_exec.reserved_buffer_bytes(), gpu_mem.stats.reserved_bytes, "{what}: real GPU memory");
        assert_eq!(gpu_mem.stats.reserved_bytes, predicted.peak_reserved_bytes(), "{what}: nothing was released");
        // …and the driver layer says so: every segment's buffer, by its label, up to the driver's
        // own rounding of each buffer, nothing missing and nothing left over.
        check_device(&what, &gpu_exec, &gpu_mem);
        // A second step allocates the same bytes, op by op, from the segments the first left
        // cached (PyTorch's warm steps): it reserves nothing new.
        gpu_exec.train_step(&batch_data).expect("second step");
        let warm = gpu_exec.memory().expect("a step ran");
        assert_eq!(warm.peak_allocated, predicted.peak_allocated, "{what}: warm step");
        for (p, w) in predicted.timeline.iter().zip(&warm.timeline) {
            assert_eq!(p.allocated, w.allocated, "{what}: warm step at op {:?}", p.op);
            assert_eq!(
                w.reserved_bytes,
                predicted.peak_reserved_bytes(),
                "{what}: the cache holds the first step's segments"
            );
        }
        assert_eq!(warm.stats.segment_allocs, predicted.stats.segment_allocs, "{what}: no segment since creation");
        check_device(&format!("warm {what}"), &gpu_exec, warm);
        println!(
            "{what}: peak allocated {} reserved {} activations {}",
            predicted.peak_allocated_bytes(),
            predicted.peak_reserved_bytes(),
            formula
        );
    }
}

/// The device report matches the allocator's segments one to one, each up to the driver's
/// rounding (48 bytes per buffer on lavapipe; less than 64 KiB on any driver).
fn check_device(what: &str, exec: &GpuExecutor, mem: &StepMemory) -> DeviceMemory {
    let device = exec.device_figures().reported().expect("lavapipe's Vulkan backend reports its allocations").clone();
    assert!(device.missing.is_empty(), "{what}: segments the driver does not list: {:?}", device.missing);
    assert!(device.leftover.is_empty(), "{what}: buffers left over: {:?}", device.leftover);
    assert_eq!(device.segments.len() as u64, mem.stats.segments, "{what}: one buffer per segment");
    assert_eq!(device.requested_bytes(), mem.stats.reserved_bytes, "{what}: the allocator's reserved bytes");
    for s in &device.segments {
        assert!((0..65536).contains(&s.rounding_bytes()), "{what}: {s:?}");
    }
    let (blocks, block_bytes) = device.segment_blocks();
    assert!(blocks >= 1 && block_bytes >= device.segment_bytes(), "{what}: the driver's blocks hold the buffers");
    // wgpu's own counters (feature `counters`): at least our buffers, holding at least their bytes.
    let c = device.counters.expect("wgpu counts its buffers");
    assert!(c.buffers >= device.segments.len() as u64, "{what}: {c:?}");
    assert!(c.buffer_memory_bytes >= device.requested_bytes(), "{what}: {c:?}");
    println!(
        "{what}: device {} B in {} buffers (+{} B driver rounding), {blocks} blocks of {block_bytes} B",
        device.segment_bytes(),
        device.segments.len(),
        device.rounding_bytes()
    );
    device
}

/// A budget tight enough that the allocator releases a cached segment mid-step: its buffer is
/// destroyed before the next is created, so the device never holds more than the budget —
/// though the segments created over the step add up to more.
#[test]
fn a_released_segment_leaves_the_device_before_the_next_is_created() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    // Releases are rare: a segment must be wholly free mid-step just when the budget refuses a
    // new one. d 256, batch 64 has one half a MiB below its unconstrained peak (found by search;
    // the search is repeated here so the test says why the budget is what it is).
    let model = ModelConfig { d_model: 256, ..model };
    let plan = Plan::build(&model, StepShape { batch: 64, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let unconstrained = simulate(&plan, BUDGET).expect("fits").peak_reserved_bytes();
    let (budget, predicted) = (1..128u64)
        .map(|k| unconstrained - k * (512 << 10))
        .find_map(|budget| {
            let m = simulate(&plan, budget).ok()?;
            // Room for the driver's rounding of each buffer.
            (m.stats.segment_releases > 0 && m.peak_reserved_bytes() + (1 << 16) <= budget).then_some((budget, m))
        })
        .expect("a budget that forces a release");
    let g = gpu();
    let mut exec =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan.clone(), 0, budget)).expect("fits");
    let batch = ds.batch(plan.shape, 0, 0).expect("batch");
    exec.train_step(&batch).expect("step");
    let mem = exec.memory().expect("a step ran").clone();
    same("tight budget", &predicted, &mem);
    assert!(mem.stats.segment_releases > 0, "the allocator released a segment");
    // Every segment the allocator ever reserved: those it holds now, and those it released.
    let released: u64 = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::SegmentFree { size, .. } => Some(*size),
            _ => None,
        })
        .sum();
    let created = mem.stats.reserved_bytes + released;
    let device = check_device("tight budget", &exec, &mem);
    println!("budget {budget}: segments created {created} B, device peak {} B", device.peak_segment_bytes);
    assert!(created > budget, "without destroying released buffers the device would hold {created} > {budget}");
    assert!(device.peak_segment_bytes <= budget, "device peak {} > budget {budget}", device.peak_segment_bytes);
    assert!(device.peak_segment_bytes >= device.segment_bytes());
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
        .map(|(t, _)| t.size_bytes().div_ceil(512) * 512)
        .sum();
    assert_eq!(cpu.allocator_stats().allocated_bytes, kept);
    assert!(cpu.memory().is_none(), "no step finished");

    // On the GPU too the step runs out of memory live, at the op the prediction names.
    let mut big_gpu =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, big, 0, budget)).expect("model state fits");
    match big_gpu.train_step(&batch) {
        Err(BackendError::OutOfMemory(oom)) => assert_eq!(oom.message, predicted.message, "gpu OOM = predicted OOM"),
        Err(e) => panic!("expected an OOM, got {e}"),
        Ok(_) => panic!("expected an OOM"),
    }
    assert!(big_gpu.memory().is_none(), "no step finished");
    let failed = big_gpu.instance();
    drop(big_gpu);

    let small = Plan::build(&model, StepShape { batch: 8, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let b = ds.batch(small.shape, 0, 0).expect("batch");
    let mut gpu_exec =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, small.clone(), 0, budget)).expect("fits");
    assert!(gpu_exec.train_step(&b).expect("step").is_finite());
    // Nothing of the failed step is left on the device: the report lists exactly the small
    // step's segments.
    let device = check_device("after an OOM", &gpu_exec, gpu_exec.memory().expect("a step ran"));
    let from_failed: Vec<&String> =
        device.other_executor_buffers.iter().filter(|l| l.ends_with(&format!("@{failed}"))).collect();
    assert!(from_failed.is_empty(), "buffers of the failed executor left on the device: {from_failed:?}");
    let mut cpu = CpuExecutor::<f32>::with_budget(small, 0, budget).expect("fits");
    assert!(cpu.train_step(&b).expect("step").is_finite());
}

/// A real out-of-memory from the wgpu device cannot be provoked reliably on lavapipe (it
/// overcommits host memory), so this checks the report the executor builds from one: the same
/// wording as the allocator's, naming the tensor and op whose allocation asked for the segment.
#[test]
fn a_device_oom_is_reported_like_the_allocators() {
    use oomlab::backend::gpu::executor::device_oom;
    let model = ModelConfig::toy(58);
    let plan = Plan::build(&model, StepShape { batch: 64, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let m = simulate(&plan, BUDGET).expect("fits the budget");
    // The last segment the step reserves, and the allocation that asked for it.
    let (i, segment, size) = m
        .events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::SegmentAlloc { segment, size, .. } => Some((i, *segment, *size)),
            _ => None,
        })
        .next_back()
        .expect("segments");
    let tag = m.events[i..]
        .iter()
        .find_map(|e| match e {
            Event::Alloc { tag, placement, .. } if placement.segment == segment => Some(*tag),
            _ => None,
        })
        .expect("an allocation in it");
    let oom = device_oom(&plan, tag.tensor, tag.op, size, 0, BUDGET, "Out of Memory");
    println!("{}", oom.message);
    assert!(oom.message.starts_with("GPU out of memory. Tried to allocate"), "{}", oom.message);
    assert!(oom.message.contains("wgpu device itself refused"), "{}", oom.message);
    assert!(oom.message.contains(&oom.tensor_name) && oom.message.contains(&oom.op_label));
    assert_eq!(oom.tensor, tag.tensor);
    assert_eq!(oom.error.tried_bytes, size);
    let err = BackendError::OutOfMemory(Box::new(oom));
    assert!(err.to_string().starts_with("GPU out of memory"));
}
