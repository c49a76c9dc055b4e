//! The out-of-memory panel and its one-click suggestions.

use egui::{Color32, RichText, Ui};

use crate::memory::StepOom;
use crate::units::format_bytes;

pub use crate::app::settings::Suggestion;

impl Suggestion {
    pub fn label(self) -> &'static str {
        match self {
            Suggestion::Checkpointing => "Checkpoint every block",
            Suggestion::FusedAttention => "Use fused attention",
            Suggestion::Accumulation => "Accumulate: half the micro-batch, twice the steps",
            Suggestion::MixedPrecision => "Mixed precision (bf16)",
            Suggestion::SmallerBatch => "Halve the batch",
        }
    }
}

/// The OOM panel: PyTorch's message, then in plain words which category grew and which op asked,
/// and one-click suggestions. Returns the suggestion clicked.
pub fn oom_panel(ui: &mut Ui, oom: &StepOom, available: &[Suggestion]) -> Option<Suggestion> {
    ui.colored_label(Color32::from_rgb(255, 90, 90), RichText::new("Out of memory").strong().size(18.0));
    ui.label(RichText::new(&oom.message).monospace());
    let e = &oom.error;
    ui.label(format!(
        "In plain words: the step needed {} more for '{}' ({}), asked for by {}. No cached block was large \
         enough, so the allocator tried to reserve a new {} segment, but only {} of the {} budget was unreserved \
         ({} sat free inside existing segments, in pieces too small or in the wrong pool).",
        format_bytes(e.requested_bytes),
        oom.tensor_name,
        oom.category.name(),
        oom.op_label,
        format_bytes(e.tried_bytes),
        format_bytes(e.free_bytes),
        format_bytes(e.capacity_bytes),
        format_bytes(e.cached_free_bytes)
    ));
    let mut clicked = None;
    ui.label("Try:");
    ui.horizontal_wrapped(|ui| {
        for s in available {
            if ui.button(s.label()).clicked() {
                clicked = Some(*s);
            }
        }
    });
    clicked
}
