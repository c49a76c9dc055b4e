//! How long real steps took, by setup: so that a view can set one technique's time beside the
//! same step's without it (offload's trade of memory for time is measured, not assumed).

use std::collections::BTreeMap;

use crate::plan::{Plan, Techniques};

/// What one real step left in the allocator: its length, its peak allocated and what stayed
/// reserved after it (the Training tab draws them step by step: with batches of varying lengths,
/// reserved memory climbs while the allocated peaks go up and down).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct StepMark {
    pub seq: usize,
    pub peak_allocated_bytes: u64,
    pub reserved_bytes: u64,
}

/// The most recent steps' times of every setup that ran since the app started, and each step's
/// memory since the settings last changed.
#[derive(Default)]
pub struct StepTimes {
    /// How long each step since the settings last changed took.
    pub step_secs: Vec<f64>,
    /// The allocator after each of those steps (GPU 0's with several simulated GPUs).
    pub memory: Vec<StepMark>,
    /// The setup of the step in flight.
    current: Option<String>,
    by_setup: BTreeMap<String, Vec<f64>>,
}

/// Steps kept per setup (the median of these is its time).
const KEPT: usize = 9;

impl StepTimes {
    /// What identifies a setup's time: the model, the batch, the techniques, the optimizer and
    /// the engine that runs it.
    pub fn key(plan: &Plan, techniques: &Techniques, engine: &str) -> String {
        // JSON, which the settings' links already serialise: no Debug code in the web module.
        let json = serde_json::to_string(&(plan.model, plan.shape, techniques, plan.optimizer.kind.name()));
        format!("{}|{engine}", json.unwrap_or_default())
    }

    /// A step of `plan` started on `engine`.
    pub fn begin(&mut self, plan: &Plan, engine: &str) {
        self.current = Some(Self::key(plan, &plan.techniques, engine));
    }

    /// The step in flight finished after `secs`.
    pub fn record(&mut self, secs: f64) {
        self.step_secs.push(secs);
        if let Some(key) = self.current.take() {
            let list = self.by_setup.entry(key).or_default();
            list.push(secs);
            if list.len() > KEPT {
                list.remove(0);
            }
        }
    }

    /// The allocator's record of the step that just finished (None: not reported).
    pub fn mark(&mut self, seq: usize, memory: Option<&crate::memory::StepMemory>) {
        if let Some(m) = memory {
            let (peak_allocated_bytes, reserved_bytes) = (m.peak_allocated_bytes(), m.stats.reserved_bytes);
            self.memory.push(StepMark { seq, peak_allocated_bytes, reserved_bytes });
        }
    }

    /// The median of the last steps of `plan` run with `techniques` on `engine` (None before one
    /// ran). The first step of a setup also creates its buffers, so the median, not the mean.
    pub fn median(&self, plan: &Plan, techniques: &Techniques, engine: &str) -> Option<f64> {
        let mut list = self.by_setup.get(&Self::key(plan, techniques, engine))?.clone();
        list.sort_by(f64::total_cmp);
        list.get(list.len() / 2).copied()
    }
}
