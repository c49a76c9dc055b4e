//! What the chapters compute from: a chapter's settings and the plan's prediction for them, or
//! the allocator's record of the step its reveal ran.

use std::sync::Arc;

use crate::app::run::StepRecord;
use crate::app::settings::Settings;
use crate::memory::{Budget, StepMemory, simulate};
use crate::plan::{Category, Plan};

/// What the chapters compute from: the settings and the plan's prediction for them, or (after
/// the reveal's step) the allocator's record of the step that ran.
pub struct Facts {
    pub settings: Settings,
    pub vocab: usize,
    pub plan: Arc<Plan>,
    /// The step's memory: the plan's prediction, or the allocator's live record of a real step.
    pub memory: StepMemory,
    /// The real step ran out of memory: its error (the diagnosing chapter's answer reads it).
    pub step_oom: Option<crate::memory::StepOom>,
}

impl Facts {
    pub fn new(settings: &Settings, vocab: usize) -> Option<Facts> {
        let plan = Arc::new(settings.plan(vocab).ok()?);
        // No budget: the answers are about memory needed, not about fitting.
        let memory = simulate(&plan, Budget::Unlimited).ok()?;
        Some(Facts { settings: settings.clone(), vocab, plan, memory, step_oom: None })
    }

    /// The facts a real step of `settings` gives: the allocator's record in place of the plan's
    /// prediction (a chapter's other settings, a doubled batch for one, are still predicted: that
    /// step did not run), or the step's own out-of-memory error.
    pub fn from_step(settings: &Settings, vocab: usize, record: StepRecord<'_>) -> Option<Facts> {
        let mut facts = Facts::new(settings, vocab)?;
        match record {
            StepRecord::Ran(m) => facts.memory = m.clone(),
            StepRecord::OutOfMemory(oom) => facts.step_oom = Some(oom.clone()),
        }
        Some(facts)
    }

    /// The prediction for the settings changed by `change`.
    pub(super) fn with(&self, change: impl FnOnce(&mut Settings)) -> Option<Facts> {
        let mut s = self.settings.clone();
        change(&mut s);
        Facts::new(&s, self.vocab)
    }

    pub(super) fn at_peak(&self, c: Category) -> u64 {
        self.memory.peak_allocated.get(c)
    }

    pub(super) fn states(&self) -> u64 {
        [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights]
            .iter()
            .map(|&c| self.at_peak(c))
            .sum()
    }

    pub(super) fn activations(&self) -> u64 {
        self.at_peak(Category::Activations) + self.at_peak(Category::Temporaries)
    }

    /// Bytes of attention probabilities the step saves (the T² tensors).
    pub(super) fn attention_probs(&self) -> u64 {
        self.plan
            .tensors
            .iter()
            .filter(|t| t.category == Category::Activations && t.name.ends_with("probs"))
            .map(|t| t.size_bytes())
            .sum()
    }

    /// The model states a rank keeps across steps (parameters, gradients, optimizer state,
    /// master weights) at ZeRO stage `zero`, from its plan: what ZeRO shards.
    pub(super) fn kept_states(&self, zero: u8) -> Option<u64> {
        let mut s = self.settings.clone();
        s.device.parallel.zero = zero;
        let plan = s.plan(self.vocab).ok()?;
        let states = [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights];
        Some(plan.tensors.iter().filter(|t| t.persistent && states.contains(&t.category)).map(|t| t.size_bytes()).sum())
    }

    /// The peak of the same step on one GPU alone (the same batch), predicted.
    pub(super) fn alone_peak(&self) -> Option<u64> {
        let mut alone = self.settings.clone();
        alone.device.parallel.gpus = 1;
        let plan = alone.plan(self.vocab).ok()?;
        simulate(&plan, Budget::Unlimited).ok().map(|m| m.peak_allocated_bytes())
    }
}
