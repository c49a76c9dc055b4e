//! The allocator's options (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`) change the real step, not only
//! the prediction: each backend places the step's tensors as the plan predicts with each option,
//! the arithmetic is unchanged (the same losses), and a step whose out-of-memory is
//! fragmentation fits with expandable segments.

mod common;

use common::gpu;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::Dataset;
use oomlab::memory::allocator::Event;
use oomlab::memory::{StepMemory, simulate};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{AllocatorConfig, OptimizerConfig, Plan, Techniques};

fn plan(batch: usize, seq: usize, conf: &str) -> Plan {
    let ds = Dataset::builtin();
    let t = Techniques { allocator: AllocatorConfig::parse(conf).expect("valid"), ..Techniques::default() };
    Plan::build_with(
        &ModelConfig::toy(ds.tokenizer.vocab_size()),
        StepShape { batch, seq },
        &OptimizerConfig::default(),
        &t,
    )
    .expect("plan")
}

fn same(what: &str, predicted: &StepMemory, measured: &StepMemory) {
    assert_eq!(predicted.timeline, measured.timeline, "{what}: every op, allocated and reserved");
    assert_eq!(predicted.stats, measured.stats, "{what}: the allocator's counters");
}

#[test]
fn each_option_runs_for_real_on_both_backends() {
    let budget = 40u64 << 20;
    let ds = Dataset::builtin();
    let g = gpu();
    let mut baseline: Option<(Vec<f32>, Vec<f32>)> = None;
    for conf in ["", "expandable_segments:True", "max_split_size_mb:21", "garbage_collection_threshold:0.3"] {
        let plan = plan(24, 64, conf);
        let predicted = simulate(&plan, budget).expect("fits 40 MiB");
        let mut cpu = CpuExecutor::<f32>::with_budget(plan.clone(), 3, budget).expect("cpu");
        let mut gpu_exec =
            pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, 3, budget)).expect("gpu");
        let (mut cpu_losses, mut gpu_losses) = (Vec::new(), Vec::new());
        for step in 0..3 {
            let batch = ds.batch(StepShape { batch: 24, seq: 64 }, 3, step).expect("batch");
            cpu_losses.push(cpu.train_step(&batch).expect("cpu step"));
            gpu_losses.push(gpu_exec.train_step(&batch).expect("gpu step"));
            if step == 0 {
                same(&format!("cpu {conf:?}"), &predicted, cpu.memory().expect("a step ran"));
                same(&format!("gpu {conf:?}"), &predicted, gpu_exec.memory().expect("a step ran"));
                // With expandable segments the first step grows them while tensors live in
                // them: the GPU copies each into a larger buffer, and the losses below show
                // nothing was lost on the way.
                let grew = predicted.events.iter().any(|e| matches!(e, Event::SegmentMap { .. }));
                assert_eq!(grew, conf.starts_with("expandable"), "{conf:?}: segments grew");
            }
            // The GPU's buffers are the allocator's segments, whatever grew or shrank.
            let reserved = gpu_exec.memory().expect("a step ran").stats.reserved_bytes;
            assert_eq!(gpu_exec.reserved_buffer_bytes(), reserved, "{conf:?} step {step}: real GPU memory");
        }
        if conf.starts_with("expandable") {
            let m = cpu.memory().expect("a step ran");
            assert!(m.stats.segments <= 2, "{conf}: one segment per pool, not {}", m.stats.segments);
        }
        // Where the tensors lie changes nothing of the arithmetic: the losses are the default
        // allocator's (the CPU's to the bit; the GPU's within its reduction order).
        match &baseline {
            None => baseline = Some((cpu_losses, gpu_losses)),
            Some((c, gl)) => {
                assert_eq!(&cpu_losses, c, "{conf}: cpu losses");
                for (a, b) in gpu_losses.iter().zip(gl) {
                    assert!((a - b).abs() <= 1e-5 * b.abs(), "{conf}: gpu loss {a} against {b}");
                }
            }
        }
    }
}

#[test]
fn a_fragmented_step_fits_with_expandable_segments() {
    // The toy at batch 48 × 64 in 54 MiB: more than 20 MiB lie cached in large segments when a
    // small tensor needs a new 2 MiB small segment — an out-of-memory with enough free in total.
    let budget = 54u64 << 20;
    let ds = Dataset::builtin();
    let shape = StepShape { batch: 48, seq: 64 };
    let batch = ds.batch(shape, 0, 0).expect("batch");
    let fragmented = plan(48, 64, "");
    let oom = simulate(&fragmented, budget).expect_err("fragmented");
    assert!(oom.error.cached_free_bytes >= oom.error.requested_bytes, "{}", oom.message);
    assert!(oom.message.contains("fragmented") && oom.message.contains("expandable_segments:True"), "{}", oom.message);
    let mut cpu = CpuExecutor::<f32>::with_budget(fragmented, 0, budget).expect("model state fits");
    match cpu.train_step(&batch) {
        Err(BackendError::OutOfMemory(real)) => assert_eq!(real.message, oom.message, "the real step's OOM"),
        other => panic!("expected an OOM, got {:?}", other.map(|_| ())),
    }

    let expandable = plan(48, 64, "expandable_segments:True");
    let predicted = simulate(&expandable, budget).expect("fits with expandable segments");
    assert!(predicted.peak_reserved_bytes() <= budget);
    let mut cpu = CpuExecutor::<f32>::with_budget(expandable.clone(), 0, budget).expect("cpu");
    assert!(cpu.train_step(&batch).expect("the real step fits").is_finite());
    same("cpu expandable", &predicted, cpu.memory().expect("a step ran"));
    let g = gpu();
    let mut gpu_exec =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, expandable, 0, budget)).expect("gpu");
    assert!(gpu_exec.train_step(&batch).expect("the real step fits").is_finite());
    same("gpu expandable", &predicted, gpu_exec.memory().expect("a step ran"));
}
