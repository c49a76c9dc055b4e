//! What the views show, derived from the settings: the plan, its prediction and the sweep.

use std::sync::Arc;

use super::settings::Settings;
use super::views::{Source, SweepSeries};
use crate::memory::sweep::predict;
use crate::memory::{StepMemory, StepOom, simulate};
use crate::plan::Plan;

/// The batch sizes of the memory-vs-batch chart.
pub const SWEEP_BATCHES: [usize; 20] =
    [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];

/// What the views show, derived from the settings whenever they change.
pub struct Derived {
    /// Shared, so a frame can hold it while it draws without copying the plan.
    pub plan: Result<Arc<Plan>, String>,
    /// The plan replayed through the allocator under the budget; None when there is no plan
    /// (`plan` says why).
    pub predicted: Option<Result<StepMemory, Box<StepOom>>>,
    pub sweep: Vec<SweepSeries>,
}

impl Derived {
    pub fn new(settings: &Settings, vocab: usize) -> Self {
        let plan = settings.plan(vocab).map(Arc::new).map_err(|e| e.to_string());
        let predicted = plan.as_ref().ok().map(|p| simulate(p, settings.budget_bytes));
        let mut configs = vec![("this setup".to_string(), settings.techniques())];
        configs.extend(settings.overlays.iter().map(|t| (t.describe(), *t)));
        let sweep = configs
            .into_iter()
            .map(|(name, t)| SweepSeries {
                name,
                points: {
                    let batches: Vec<usize> =
                        SWEEP_BATCHES.iter().copied().filter(|b| b.is_multiple_of(t.accum.max(1))).collect();
                    predict(&batches, settings.budget_bytes, |b| settings.plan_with(vocab, b, &t).ok())
                },
            })
            .collect();
        Self { plan, predicted, sweep }
    }
}

/// The memory the views show: the last real step's (allocator), else the plan's (predicted).
pub(super) fn shown_memory<'a>(
    measured: &'a Option<StepMemory>,
    predicted: &'a Option<Result<StepMemory, Box<StepOom>>>,
) -> Option<(&'a StepMemory, Source)> {
    match (measured, predicted) {
        (Some(m), _) => Some((m, Source::Allocator)),
        (None, Some(Ok(p))) => Some((p, Source::Predicted)),
        (None, _) => None,
    }
}
