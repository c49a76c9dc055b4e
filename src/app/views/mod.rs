//! The views. Each draws data it is given — the plan, the allocator's record of a step, a sweep
//! — and computes no memory itself, so tests render them from fixed data.
//!
//! One file per view; what they share (colours, sources, explanations) is here.

mod allocator;
mod breakdown;
mod oom;
mod sweep;
mod timeline;
mod training;

use egui::{Color32, RichText, Ui};

use crate::plan::Category;

pub use allocator::{allocator_map, driver_blocks};
pub use breakdown::{breakdown, model_state};
pub use oom::{Suggestion, oom_panel};
pub use sweep::{BatchChart, SweepSeries, batch_chart, sweep_chart};
pub use timeline::{live_tensors, op_label, timeline};
pub use training::training;

/// A colour per category, the same in every view.
pub fn category_color(c: Category) -> Color32 {
    match c {
        Category::Parameters => Color32::from_rgb(76, 114, 176),
        Category::Gradients => Color32::from_rgb(221, 132, 82),
        Category::OptimizerState => Color32::from_rgb(85, 168, 104),
        Category::MasterWeights => Color32::from_rgb(129, 114, 179),
        Category::Activations => Color32::from_rgb(196, 78, 82),
        Category::Temporaries => Color32::from_rgb(218, 139, 195),
        Category::Input => Color32::from_rgb(147, 120, 96),
        Category::Logits => Color32::from_rgb(204, 185, 116),
        Category::Workspace => Color32::from_rgb(140, 140, 140),
    }
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// A small square of a category's colour.
pub fn swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
    ui.painter().rect_filled(rect, 2.0, color);
}

/// Where a number comes from, said next to it: the plan's prediction, oomlab's allocator as a
/// real step ran, or the driver layer's own report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Predicted,
    Allocator,
    Device,
}

impl Source {
    pub fn word(self) -> &'static str {
        match self {
            Source::Predicted => "predicted (plan)",
            Source::Allocator => "allocator (live)",
            Source::Device => "device (driver report)",
        }
    }
}

/// A short explanation under a view, collapsed by default.
pub fn explain(ui: &mut Ui, id: &str, text: &str) {
    egui::CollapsingHeader::new(RichText::new("Why?").italics()).id_salt(id).show(ui, |ui| {
        ui.label(text);
    });
}
