//! Steps the app asks for: a reveal's (with the batches before the question's, for a chapter
//! about a later batch), the Step button's and training's; the views follow the step that ran.

use super::OomlabApp;
use crate::memory::Budget;

impl OomlabApp {
    /// A reveal's real step (batches of their own length start over: the question's batch, the
    /// batches before it run first when it is a later one).
    pub(super) fn reveal_step(&mut self) -> bool {
        let Some(upto) = self.teaching.take_step_request() else { return false };
        if self.settings.device.batching.varies_in_length() && (self.run.steps_done() > 0 || upto > 0) {
            self.run.settings_changed();
            self.shown.follow_step(self.run.vocab(), 0);
            if upto > 0 {
                self.run.train_for(upto as usize + 1);
                return false;
            }
        }
        true
    }

    /// Advances the run one frame; a finished step is checked against the challenge.
    pub(super) fn drive(&mut self, now: f64, want_step: bool) {
        let (seed, budget) = (self.settings.seed, Budget::Bytes(self.settings.device.budget_bytes));
        let fitted = self.run.oom.is_none();
        let finished = self.run.drive(now, want_step, &self.shown.derived.plan, seed, budget, &mut self.chrome.notices);
        // A batch of documents of its own length: the views show the step that ran (or failed).
        let ran = if finished.is_some() { self.run.steps_done().checked_sub(1) } else { None };
        if let Some(step) = ran.or_else(|| (fitted && self.run.oom.is_some()).then(|| self.run.steps_done())) {
            self.shown.follow_step(self.run.vocab(), step as u64);
        }
        if let (Some(done), Some(memory)) = (finished, &self.run.measured) {
            let (t, vocab) = (&self.chrome.catalog, self.run.vocab());
            self.teaching.check_challenge(&self.settings, memory, done.secs, t, vocab);
        }
    }
}
