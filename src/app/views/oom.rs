//! The out-of-memory panel and its one-click suggestions.

use egui::{Color32, RichText, Ui};

use super::{category_name, size};
use crate::i18n::Catalog;
use crate::memory::StepOom;

pub use crate::app::settings::Suggestion;

impl Suggestion {
    /// The button's words in the reader's language.
    pub fn label(self, t: &Catalog) -> String {
        t.text(match self {
            Suggestion::Checkpointing => "suggest-checkpointing",
            Suggestion::FusedAttention => "suggest-fused",
            Suggestion::Accumulation => "suggest-accumulation",
            Suggestion::MixedPrecision => "suggest-mixed",
            Suggestion::SmallerBatch => "suggest-smaller",
            Suggestion::ExpandableSegments => "suggest-expandable",
        })
    }
}

/// The OOM panel: PyTorch's message, then in plain words which category grew and which op asked,
/// and one-click suggestions. Returns the suggestion clicked. PyTorch's message stays word for
/// word in English, as users meet it in their terminals; the explanation is the reader's language.
pub fn oom_panel(ui: &mut Ui, t: &Catalog, oom: &StepOom, available: &[Suggestion]) -> Option<Suggestion> {
    ui.colored_label(Color32::from_rgb(255, 90, 90), RichText::new(t.text("oom-title")).strong().size(18.0));
    // The diagnosing chapter asks for the tensor's category: until its reveal neither the message
    // (which names it before the tensor, "activations 'h.0.attn.probs'") nor the plain words do.
    let veiled = super::veil(ui.ctx()).oom_category;
    let message = if veiled {
        let named = format!("{} '{}'", oom.category.name(), oom.tensor_name);
        oom.message.replace(&named, &format!("{} '{}'", super::veil::hidden(t), oom.tensor_name))
    } else {
        oom.message.clone()
    };
    ui.label(RichText::new(message).monospace());
    let e = &oom.error;
    ui.label(t.format(
        "oom-explain",
        &[
            ("requested", size(t, e.requested_bytes).into()),
            ("tensor", oom.tensor_name.as_str().into()),
            ("category", super::veil::or_hidden(t, veiled, || category_name(t, oom.category)).into()),
            ("op", oom.op_label.as_str().into()),
            ("tried", size(t, e.tried_bytes).into()),
            ("free", size(t, e.free_bytes).into()),
            ("capacity", size(t, e.capacity_bytes).into()),
            ("cached_free", size(t, e.cached_free_bytes).into()),
        ],
    ));
    let mut clicked = None;
    ui.label(t.text("oom-try"));
    ui.horizontal_wrapped(|ui| {
        for s in available {
            if ui.button(s.label(t)).clicked() {
                clicked = Some(*s);
            }
        }
    });
    clicked
}
