//! The lengths chapter's run, worked out apart from the app and from the plan's run prediction:
//! the CPU executor going on through the run's batches, each at its own length, its allocator
//! keeping what the batches before left cached (as the app's and the CLI's runs do).

use oomlab::app::settings::Settings;
use oomlab::backend::BackendError;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::memory::{StepMemory, StepOom};
use oomlab::plan::Phase;

/// Batches 0 to `upto` of `s`'s run through one CPU executor under its budget: each batch's
/// allocator record, and the out-of-memory error that stopped the run, if one did.
pub fn run_batches(s: &Settings, vocab: usize, upto: u64) -> (Vec<StepMemory>, Option<Box<StepOom>>) {
    let dataset = oomlab::data::Dataset::builtin();
    let first = s.plan_at(vocab, 0).expect("a plan");
    let mut exec = CpuExecutor::<f32>::with_budget(first, s.seed, s.device.budget_bytes).expect("an executor");
    let mut records = Vec::new();
    for k in 0..=upto {
        let plan = s.plan_at(vocab, k).expect("a plan");
        let (b, shape, cap) = (plan.techniques.batching, plan.global_batch_shape(), plan.model.seq_len);
        let batch = oomlab::documents::batch_for(&dataset, b, shape, cap, s.seed, k).expect("a batch");
        assert_eq!(batch.shape.seq, plan.shape.seq, "batch {k}: the plan is the batch's length");
        let moved = if k > 0 { exec.reshape(plan) } else { Ok(()) };
        let ran = moved
            .and_then(|()| exec.upload_batch(&batch))
            .and_then(|()| exec.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).map(|_| ()));
        match ran {
            Ok(()) => records.push(exec.memory().expect("an account").clone()),
            Err(BackendError::OutOfMemory(oom)) => return (records, Some(oom)),
            Err(e) => panic!("batch {k}: {e}"),
        }
    }
    (records, None)
}
