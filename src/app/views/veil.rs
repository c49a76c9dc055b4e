//! Guess first: while a lesson chapter's question is open, the figures its answer follows from are
//! veiled in every view — table cells, shares, summary lines, charts, hover texts and the
//! accessible descriptions — until the reveal. A veiled figure keeps its place as a "?" that
//! says it appears after the guess; the setting (model, batch, sequence, budget, techniques)
//! stays in view. Each chapter declares what it veils (`teaching::Chapter::veils`); the app sets
//! the frame's veil before the views draw ([`set_veil`]) and each view asks [`veil`].

use egui::{RichText, Ui};

use crate::i18n::Catalog;

/// What the open question veils.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Veil {
    /// The toy step's figures: every size and share, the charts' heights, the peak's place, the
    /// allocator's segments and the tensors alive at an op.
    pub step: bool,
    /// The category the OOM panel names for the tensor that did not fit (the tensor's name and
    /// PyTorch's message stay: the question is asked about them).
    pub oom_category: bool,
    /// Whether the step fits its budget: the out-of-memory panel (predicted, or a real step's)
    /// gives way to a line saying that the answer comes with the reveal, and a step the student
    /// runs is not announced.
    pub fits: bool,
    /// The real-model estimate's figures, and the published claims checked against it.
    pub real: bool,
}

impl Veil {
    /// Nothing veiled: explore mode, or a chapter already revealed.
    pub const NONE: Veil = Veil { step: false, oom_category: false, fits: false, real: false };

    pub fn any(self) -> bool {
        self != Veil::NONE
    }
}

fn key() -> egui::Id {
    egui::Id::unique("oomlab_veil")
}

/// Sets what this frame's views veil.
pub fn set_veil(ctx: &egui::Context, veil: Veil) {
    ctx.data_mut(|d| d.insert_temp(key(), veil));
}

/// What the views veil now.
pub fn veil(ctx: &egui::Context) -> Veil {
    ctx.data(|d| d.get_temp::<Veil>(key())).unwrap_or_default()
}

/// A veiled figure inside a sentence or a cell: "?", a sign rather than a word, the same in every
/// language (what it means is said by [`hidden_cell`]'s spoken words and by [`note`]).
pub fn hidden(_t: &Catalog) -> String {
    "?".to_string()
}

/// `figure` unless `veiled`, then the "?" in its place.
pub fn or_hidden(t: &Catalog, veiled: bool, figure: impl FnOnce() -> String) -> String {
    if veiled { hidden(t) } else { figure() }
}

/// A veiled table cell: the "?" on screen; its hover text and what a screen reader says of it
/// tell that the figure appears after the guess.
pub fn hidden_cell(ui: &mut Ui, t: &Catalog) {
    let response = ui.label(hidden(t)).on_hover_text(t.text("veil-after-guess"));
    let spoken = t.text("veil-after-guess");
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, &spoken));
}

/// A veiled chart: its place and height kept, a frame without bars, and the words that it
/// appears after the guess (also its accessible description).
pub fn hidden_chart(ui: &mut Ui, t: &Catalog, height: f32) -> egui::Response {
    let width = ui.available_width().max(120.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, height), egui::Sense::hover());
    let stroke = ui.visuals().widgets.noninteractive.bg_stroke;
    ui.painter().rect_stroke(rect, 4.0, stroke, egui::StrokeKind::Inside);
    let words = t.text("veil-chart");
    ui.painter().text(
        rect.center(),
        egui::Align2::CENTER_CENTER,
        &words,
        egui::FontId::proportional(18.0),
        ui.visuals().weak_text_color(),
    );
    super::describe_chart(&response, &words);
    response
}

/// The line under veiled views: what the "?" mean.
pub fn note(ui: &mut Ui, t: &Catalog) {
    let colour = ui.visuals().warn_fg_color;
    ui.label(RichText::new(t.text("veil-note")).italics().color(colour));
}
