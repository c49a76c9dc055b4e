//! A run of steps through one caching allocator: each step at its own shape (batches of
//! documents padded to their longest change length from step to step), the allocator's segments
//! and cache kept between them, as an eager framework keeps them. What a step needs alone and
//! what it needs after the steps before it differ: memory freed by one length is cached in
//! segments cut for it, and the next length's tensors split those segments until a request
//! finds enough free in total but no block that holds it: fragmentation.

use super::step::{StepAllocator, StepMemory, StepOom, Trace};
use super::{Budget, Stats};
use crate::plan::Plan;

/// One step of a run: its length, what the allocator did during it, and what the same step
/// needs in a fresh allocator.
#[derive(Clone, Debug, PartialEq)]
pub struct RunStep {
    /// The step's sequence length.
    pub seq: usize,
    /// The allocator's counters at the end of the step (its peaks are the step's own: they
    /// restart at each step, as `reset_peak_stats` does).
    pub stats: Stats,
    /// The largest free block in the allocator's segments after the step.
    pub largest_free_block: u64,
    /// The same step's peak reserved bytes in a fresh allocator under the same budget (None:
    /// it does not fit even alone).
    pub alone_reserved_bytes: Option<u64>,
}

/// The step that stopped a run.
#[derive(Debug)]
pub struct RunOom {
    /// Its index among the plans.
    pub step: usize,
    pub seq: usize,
    pub error: Box<StepOom>,
    /// The same step's peak reserved bytes in a fresh allocator under the same budget (None: it
    /// does not fit even alone). Some: the steps before it made it fail.
    pub alone_reserved_bytes: Option<u64>,
}

/// A run through one allocator: the steps that ran, and the out-of-memory error that stopped
/// it, if one did.
#[derive(Debug)]
pub struct RunMemory {
    pub steps: Vec<RunStep>,
    pub oom: Option<RunOom>,
    /// The steps' own records (the allocator's log of each step, from the segments as they
    /// stood when it began), for the one that failed up to its failure.
    pub records: Vec<StepMemory>,
}

impl RunMemory {
    /// Whether the run stopped on an out-of-memory error that a fresh allocator would not have
    /// raised: the step fits alone, but not after the steps before it.
    pub fn history_caused_oom(&self) -> bool {
        self.oom.as_ref().is_some_and(|o| o.alone_reserved_bytes.is_some())
    }
}

/// What can go wrong before a run starts.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("a run needs at least one step")]
    Empty,
    #[error("step {step} keeps other model states than the first: {reason}")]
    OtherModel { step: usize, reason: super::step::ReshapeError },
}

/// Predicts a run step by step, as an executor runs it: one allocator for every step, each
/// step's plan at its own shape. The app's prediction of a step of padded or bucketed batches
/// is this (what the steps before it left cached matters), one step more each time.
#[derive(Clone, Debug)]
pub struct RunPredictor {
    /// The allocator and the plan it is shaped for, once a step came.
    at: Option<(StepAllocator, std::sync::Arc<Plan>)>,
    budget: Budget,
    /// `torch.cuda.empty_cache()` after each step.
    empty_cache: bool,
    steps: usize,
}

impl RunPredictor {
    pub fn new(budget: Budget, empty_cache: bool) -> Self {
        Self { at: None, budget, empty_cache, steps: 0 }
    }

    /// Steps predicted so far (those that ran out of memory included: the run goes on after
    /// one, as the app's does once its settings change back).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The next step, `plan`: the allocator moves to its shape (the model states stay, the cache
    /// stays), runs its ops, and releases the step's tensors. Its record starts from the
    /// segments as the steps before left them.
    pub fn step(&mut self, plan: std::sync::Arc<Plan>) -> Result<Result<StepMemory, Box<StepOom>>, RunError> {
        let step = self.steps;
        let (mut sa, ready) = match self.at.take() {
            Some((mut sa, old)) => {
                let ready = match sa.reshape(&old, &plan) {
                    Ok(ready) => ready,
                    Err(reason) => {
                        self.at = Some((sa, old));
                        return Err(RunError::OtherModel { step, reason });
                    }
                };
                (sa, ready)
            }
            None => {
                let mut sa = StepAllocator::new(&plan, self.budget, true);
                let ready = sa.setup(&plan);
                (sa, ready)
            }
        };
        self.steps += 1;
        let out = match ready {
            Err(e) => Err(e),
            Ok(()) => {
                sa.allocator.clear_events();
                sa.clear_log();
                let out = step_on(&plan, &mut sa);
                if self.empty_cache {
                    sa.allocator.empty_cache();
                }
                out
            }
        };
        self.at = Some((sa, plan));
        Ok(out)
    }

    /// The allocator's counters now (between steps).
    pub fn stats(&self) -> Option<Stats> {
        self.at.as_ref().map(|(sa, _)| sa.allocator.stats())
    }

    /// The largest free block in the allocator's segments now.
    pub fn largest_free_block(&self) -> u64 {
        self.at.as_ref().map_or(0, |(sa, _)| sa.allocator.largest_free_block())
    }
}

/// Runs `plans` (one per step, the same model states, each at its own shape) through one
/// allocator under `budget`, releasing its whole cache (`torch.cuda.empty_cache()`) after each
/// step when `empty_cache` is set. Stops at the first step that runs out of memory.
pub fn simulate_run(plans: &[Plan], budget: Budget, empty_cache: bool) -> Result<RunMemory, RunError> {
    if plans.is_empty() {
        return Err(RunError::Empty);
    }
    let mut run = RunPredictor::new(budget, empty_cache);
    let mut steps = Vec::with_capacity(plans.len());
    let mut records = Vec::with_capacity(plans.len());
    let alone = |plan: &Plan| super::simulate_peak(plan, budget).ok().map(|m| m.peak_reserved_bytes());
    for (k, plan) in plans.iter().enumerate() {
        match run.step(std::sync::Arc::new(plan.clone()))? {
            Ok(record) => records.push(record),
            Err(mut error) => {
                if let Some(record) = error.at_failure.take() {
                    records.push(*record);
                }
                let oom = RunOom { step: k, seq: plan.shape.seq, error, alone_reserved_bytes: alone(plan) };
                return Ok(RunMemory { steps, oom: Some(oom), records });
            }
        }
        steps.push(RunStep {
            seq: plan.shape.seq,
            stats: run.stats().unwrap_or_default(),
            largest_free_block: run.largest_free_block(),
            alone_reserved_bytes: alone(plan),
        });
    }
    Ok(RunMemory { steps, oom: None, records })
}

/// One step's ops through `sa` (set up for `plan`), leaving the persistent tensors and the batch
/// allocated; on an out-of-memory error, the error with the record up to it (`at_failure`), the
/// step's tensors released.
fn step_on(plan: &Plan, sa: &mut StepAllocator) -> Result<StepMemory, Box<StepOom>> {
    let mut trace = Trace::detailed();
    trace.record(sa, None);
    for i in 0..plan.ops.len() {
        if let Err(mut e) = sa.before_op(plan, i) {
            trace.record(sa, Some(i));
            e.at_failure = Some(Box::new(trace.finish(sa)));
            sa.release_step();
            return Err(e);
        }
        trace.record(sa, Some(i));
        sa.after_op(i);
    }
    let record = trace.finish(sa);
    sa.release_step();
    Ok(record)
}
