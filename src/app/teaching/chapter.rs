//! What a chapter is: its question, its setup and the words it computes, and the helpers the
//! chapters share (the step's veil, an argument, a category's bytes at the peak).

use super::facts::Facts;
use crate::app::Tab;
use crate::app::settings::Settings;
use crate::app::views::Veil;
use crate::i18n::Catalog;
use crate::plan::Category;

/// What a chapter asks.
pub enum Question {
    /// A ratio to guess (×); judged close within `tolerance` (a fraction of the answer).
    Ratio { answer: fn(&Facts) -> Option<f64>, tolerance: f64 },
    /// One of several options (catalog keys); the answer's index.
    Choice { options: &'static [&'static str], answer: fn(&Facts) -> Option<usize> },
}

/// One chapter.
pub struct Chapter {
    /// Its catalog messages' stem: `lesson-<id>-…`.
    pub id: &'static str,
    pub tab: Tab,
    /// The widget it talks about ([`views::mark`]).
    pub target: &'static str,
    /// The state it starts from.
    pub setup: fn(&mut Settings),
    /// The body's and the question's arguments, from the state.
    pub args: fn(&Facts, &Catalog) -> Vec<(&'static str, String)>,
    pub question: Question,
    /// The answer's arguments, from the state.
    pub answer_args: fn(&Facts, &Catalog) -> Vec<(&'static str, String)>,
    /// What the views veil until the reveal: every figure the answer follows from.
    pub veils: Veil,
    /// Whether the answer reads the step the reveal runs (the toy's chapters but the fixes,
    /// whose answer compares steps that did not run); otherwise it is the plan's or the
    /// estimator's alone.
    pub reads_step: bool,
    /// The run's batch number the question is about (batches of their own length): the reveal
    /// runs the batches before it too, through one allocator. 0 for the rest.
    pub step: u64,
}

/// The toy chapters veil the step's figures everywhere: its sizes, shares, charts and peak.
pub const STEP: Veil = Veil { step: true, ..Veil::NONE };

pub fn arg(name: &'static str, value: impl ToString) -> (&'static str, String) {
    (name, value.to_string())
}

/// The bytes of a category's tensors at the step's peak (the allocator's record of a real step,
/// or the prediction), as the tensors have them.
pub fn tensor_bytes(f: &Facts, c: Category) -> u64 {
    f.memory.peak_requested.get(c)
}
