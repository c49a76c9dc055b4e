//! The one door every change to the settings comes through: a control's edit, a key, a link, a
//! lesson's or a challenge's setup, an OOM panel's suggestion, a dropped config.json. Each is a
//! [`Change`] sent into one queue (the widgets, the lessons, the challenges and the teacher's
//! links edit a copy of the settings, as their panels always did, and send it as one
//! [`Change::Edited`]; keys, suggestions and a dropped file send what they mean).
//! [`Door::apply`] applies them in order, then the rules, and says what changed — so no
//! settings exist that the rules have not seen, and the views learn what to derive again from
//! the changes themselves.

use super::real_model::EstimateSettings;
use super::{Settings, Suggestion};

/// One change to the settings, from wherever it comes.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The widgets' edits this frame (the controls, a panel's own controls, the Real models
    /// view): the settings as they left them.
    Edited(Box<Settings>),
    /// B: the batch doubled, within the controls' range.
    DoubleBatch,
    /// Shift+B: the batch halved.
    HalveBatch,
    /// P: present mode on or off.
    Projector,
    /// An OOM panel's suggestion switched on.
    Suggest(Suggestion),
    /// A config.json dropped on the Snapshot tab, for the Real models view.
    RealModel(Box<EstimateSettings>),
}

/// What a round of changes touched: the toy's part (its steps start over), the Real models
/// view's, the display preferences.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    pub toy: bool,
    pub real_model: bool,
    pub prefs: bool,
}

impl Changed {
    pub fn any(self) -> bool {
        self.toy || self.real_model || self.prefs
    }

    fn or(self, other: Changed) -> Changed {
        Changed {
            toy: self.toy || other.toy,
            real_model: self.real_model || other.real_model,
            prefs: self.prefs || other.prefs,
        }
    }
}

/// The queue of changes sent and not yet applied.
#[derive(Debug, Default)]
pub struct Door {
    queue: Vec<Change>,
}

impl Door {
    /// Sends a change; it is applied with the rest at the next [`Door::apply`].
    pub fn send(&mut self, change: Change) {
        self.queue.push(change);
    }

    /// Applies every change sent, in order, then the rules: `pins` (a teacher link's locked
    /// and hidden controls keep their values), then [`rules`]. Returns what changed.
    pub fn apply(&mut self, settings: &mut Settings, pins: impl Fn(&mut Settings)) -> Changed {
        let mut changed = Changed::default();
        for change in std::mem::take(&mut self.queue) {
            changed = changed.or(apply(settings, change));
        }
        if changed.any() {
            let before = settings.clone();
            pins(settings);
            rules(settings);
            // What the rules themselves moved.
            changed = changed.or(difference(&before, settings));
        }
        changed
    }
}

/// The rules that keep settings usable, whatever changed them: every bound the controls keep
/// (batch, sequence, budget, the Real models view's setup), and an accumulation count that
/// divides the batch.
pub fn rules(settings: &mut Settings) {
    *settings = std::mem::take(settings).clamped();
}

/// One change applied, before the rules; what it touched.
fn apply(settings: &mut Settings, change: Change) -> Changed {
    match change {
        Change::Edited(edited) => {
            let changed = difference(settings, &edited);
            *settings = *edited;
            changed
        }
        // The batch within the slider's range: B at its end (or Shift+B at 1) changes nothing,
        // and the steps go on.
        Change::DoubleBatch | Change::HalveBatch => {
            let doubled = matches!(change, Change::DoubleBatch);
            let batch = if doubled { settings.batch.saturating_mul(2) } else { settings.batch / 2 };
            let batch = Settings::bounded_batch(batch);
            let moved = batch != settings.batch;
            settings.batch = batch;
            Changed { toy: moved, ..Changed::default() }
        }
        Change::Projector => {
            settings.prefs.projector = !settings.prefs.projector;
            Changed { prefs: true, ..Changed::default() }
        }
        Change::Suggest(s) => {
            let before = settings.clone();
            settings.apply(s);
            difference(&before, settings)
        }
        Change::RealModel(model) => {
            settings.estimate = *model;
            Changed { real_model: true, ..Changed::default() }
        }
    }
}

/// Which parts differ between two settings (for the widgets' edits, where the change is the
/// settings as the widgets left them).
fn difference(a: &Settings, b: &Settings) -> Changed {
    let real_model = a.estimate != b.estimate;
    let prefs = a.prefs != b.prefs;
    let toy = {
        let (mut a, mut b) = (a.clone(), b.clone());
        (a.estimate, a.prefs) = (Default::default(), Default::default());
        (b.estimate, b.prefs) = (Default::default(), Default::default());
        a != b
    };
    Changed { toy, real_model, prefs }
}
