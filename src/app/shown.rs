//! What the views show: everything derived from the settings — the toy's plan, its prediction
//! and sweep, the real-model estimate, the claims — and what the reader picked: the tab and the
//! op under the timeline's scrubber. It is brought up to date once per frame, and only what
//! changed is derived again.

use super::Tab;
use super::derived::Derived;
use super::derived::EstimateDerived;
use super::settings::Settings;
use super::settings::door::Changed;
use super::views::Source;
use crate::estimate::EstimateError;
use crate::estimate::claims::Claim;
use crate::memory::StepMemory;

pub struct Shown {
    /// The settings everything here was derived from.
    applied: Settings,
    /// The toy's plan, prediction and sweep.
    pub derived: Derived,
    /// The estimator's figures, for `applied.estimate`.
    pub estimate: EstimateDerived,
    /// The claims lesson, computed the first time it is shown.
    claims: Option<Result<Vec<Claim>, EstimateError>>,
    pub tab: Tab,
    /// The timeline point under the scrubber (also the allocator map's op).
    pub scrub: usize,
    /// The simulated GPU whose step the timeline and the allocator map show (0 on one GPU).
    pub rank: usize,
    /// A chapter's question veils the step: the scrubber starts at the step's start, not at the
    /// peak (where it starts would say where the peak is).
    scrub_from_start: bool,
    /// The Serving tab: its settings, the run in progress and the finished runs.
    pub serving: super::serving_view::ServingTab,
}

impl Shown {
    pub fn new(settings: &Settings, vocab: usize) -> Self {
        let derived = Derived::new(settings, vocab);
        let scrub = peak_index(&derived);
        Self {
            applied: settings.clone(),
            derived,
            estimate: EstimateDerived::new(&settings.estimate),
            claims: None,
            tab: Tab::Breakdown,
            scrub,
            rank: 0,
            scrub_from_start: false,
            serving: Default::default(),
        }
    }

    /// Brings everything up to date with `settings`, which the door says changed as
    /// `changed`. Returns whether the toy's part changed: its steps then start over. The
    /// real-model part changes only its own estimate; the display preferences nothing derived.
    pub fn update(&mut self, settings: &Settings, vocab: usize, changed: Changed) -> bool {
        if changed.real_model {
            self.estimate = EstimateDerived::new(&settings.estimate);
        }
        if changed.toy {
            self.derived = Derived::reusing(settings, vocab, Some((&self.applied, &mut self.derived)));
            // The scrubber starts at the peak (at the start while a question veils the step).
            self.scrub = if self.scrub_from_start { 0 } else { peak_index(&self.derived) };
        }
        if changed.any() {
            self.applied = settings.clone();
        }
        changed.toy
    }

    /// Follows the run to its batch number `step`: padded and bucketed batches have a length of
    /// their own, so the plan and its prediction are that batch's (the one a real step ran, or
    /// the next). Returns whether they changed.
    pub fn follow_step(&mut self, vocab: usize, step: u64) -> bool {
        let s = &self.applied;
        if !s.device.batching.varies_in_length() {
            return false;
        }
        let seq = |d: &Derived| d.plan.as_ref().ok().map(|p| p.shape.seq);
        let before = seq(&self.derived);
        // Every step: its prediction is the run's so far, whatever its length.
        self.derived.at_step(&self.applied.clone(), vocab, step);
        if seq(&self.derived) == before {
            return false;
        }
        self.scrub = if self.scrub_from_start { 0 } else { peak_index(&self.derived) };
        true
    }

    /// Follows the veil: the scrubber goes to the step's start when a question veils the step,
    /// and to the peak at its reveal.
    pub fn follow_veil(&mut self, veiled: bool) {
        if veiled != self.scrub_from_start {
            self.scrub_from_start = veiled;
            self.scrub = if veiled { 0 } else { peak_index(&self.derived) };
        }
    }

    /// Whether `settings` are the ones shown (a step that ran for others is stale).
    pub fn is_for(&self, settings: &Settings) -> bool {
        self.applied == *settings
    }

    /// The memory a view shows: the last real step's (allocator), else the plan's (predicted).
    pub fn memory<'a>(&'a self, measured: &'a Option<StepMemory>) -> Option<(&'a StepMemory, Source)> {
        memory(measured, &self.derived)
    }

    /// The claims lesson's checks (computed once, the first time they are asked for).
    pub fn claims(&mut self) -> &Result<Vec<Claim>, EstimateError> {
        self.claims.get_or_insert_with(crate::estimate::claims::claims)
    }
}

/// The memory a view shows: the last real step's (allocator), else the plan's (predicted).
pub fn memory<'a>(measured: &'a Option<StepMemory>, derived: &'a Derived) -> Option<(&'a StepMemory, Source)> {
    match (measured, &derived.predicted) {
        (Some(m), _) => Some((m, Source::Allocator)),
        (None, Some(Ok(p))) => Some((p, Source::Predicted)),
        (None, _) => None,
    }
}

fn peak_index(d: &Derived) -> usize {
    d.predicted.as_ref().and_then(|p| p.as_ref().ok()).map_or(0, |m| m.peak_index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ShapeError;
    use crate::plan::ConfigError;

    #[test]
    fn only_what_changed_is_derived_again() {
        use crate::app::settings::door::{Change, Door};
        let vocab = 58;
        let mut s = Settings::default();
        let mut shown = Shown::new(&s, vocab);
        let peak = shown.derived.predicted.as_ref().and_then(|p| p.as_ref().ok()).map(|m| m.peak_index);
        assert_eq!(Some(shown.scrub), peak, "the scrubber starts at the peak");
        let mut door = Door::default();
        let mut send = |s: &mut Settings, shown: &mut Shown, change: Change| {
            door.send(change);
            let changed = door.apply(s, |_| {});
            shown.update(s, vocab, changed)
        };
        assert!(!send(&mut s, &mut shown, Change::Edited(Box::default())), "nothing changed");
        // The display preferences: nothing derived again, the steps go on.
        assert!(!send(&mut s, &mut shown, Change::Projector));
        assert!(shown.is_for(&s));
        // The real-model part: its own estimate, the toy's steps go on.
        let mut real = s.clone();
        real.estimate.micro_batch = 2;
        assert!(!send(&mut s, &mut shown, Change::RealModel(Box::new(real.estimate.clone()))));
        assert_eq!(shown.estimate.setup.as_ref().map(|r| r.micro_batch), Ok(2));
        // The toy's part: derived again, the scrubber back at the new peak.
        shown.scrub = 0;
        let bigger = Settings { batch: 32, ..real.clone() };
        assert!(send(&mut s, &mut shown, Change::Edited(Box::new(bigger.clone()))));
        assert!(shown.is_for(&bigger) && !shown.is_for(&real));
        assert_eq!(shown.derived.plan.as_ref().map(|p| p.batch_shape().batch).ok(), Some(32));
        assert_ne!(shown.scrub, 0);
        // Settings that cannot be planned: a typed reason, no prediction.
        let broken = Settings { dims: crate::app::settings::ModelDims { d_model: 65, ..bigger.dims }, ..bigger };
        assert!(send(&mut s, &mut shown, Change::Edited(Box::new(broken))));
        assert!(matches!(shown.derived.plan, Err(ConfigError::Shape(ShapeError::HeadsDontDivide { .. }))));
        assert!(shown.memory(&None).is_none());
    }

    #[test]
    fn a_link_names_a_tab() {
        for (tab, _) in Tab::ALL {
            assert_eq!(Tab::from_url_hash(&format!("#train=2&tab={}", tab.id())), Some(tab));
        }
        assert_eq!(Tab::Allocator.id(), "allocator");
        assert_eq!(Tab::RealModels.id(), "real-models");
        assert_eq!(Tab::from_url_hash("#tab=nonsense"), None);
        assert_eq!(Tab::from_url_hash("#lesson=2"), None);
        assert!(!Settings::url_hash_carries_settings("#tab=allocator&train=2"), "a tab is not settings");
    }
}
