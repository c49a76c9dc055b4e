//! The views. Each draws data it is given — the plan, the allocator's record of a step, a sweep
//! — and computes no memory itself, so tests render them from fixed data.
//!
//! One file per view; what they share (colours, sources, explanations) is here.

mod allocator;
mod breakdown;
pub mod drawn;
pub mod host;
mod oom;
mod per_gpu;
mod sweep;
mod timeline;
mod training;
pub mod veil;
mod ways;

use egui::{Color32, RichText, Ui};

use crate::i18n::Catalog;
use crate::plan::Category;
use crate::units::format_bytes;

pub use allocator::{allocator_map, driver_blocks};
pub use breakdown::{breakdown, model_state};
pub use drawn::{Drawn, drawn, record};
pub use host::{OffloadTimes, host_memory};
pub use oom::{Suggestion, oom_panel};
pub use per_gpu::per_gpu_chart;
pub use sweep::{BatchChart, SweepSeries, batch_chart, sweep_chart};
pub use timeline::{live_tensors, op_label, timeline};
pub use training::training;
pub use veil::{Veil, set_veil, veil};
pub use ways::ways_table;

/// A colour per category, the same in every view. Present mode uses Okabe and Ito's palette,
/// which people with the common colour-vision deficiencies tell apart.
pub fn category_color(c: Category) -> Color32 {
    if SAFE_COLOURS.with(std::cell::Cell::get) {
        return match c {
            Category::Parameters => Color32::from_rgb(0, 114, 178),
            Category::Gradients => Color32::from_rgb(230, 159, 0),
            Category::OptimizerState => Color32::from_rgb(0, 158, 115),
            Category::MasterWeights => Color32::from_rgb(204, 121, 167),
            Category::Activations => Color32::from_rgb(213, 94, 0),
            Category::Temporaries => Color32::from_rgb(86, 180, 233),
            Category::Input => Color32::from_rgb(240, 228, 66),
            Category::Logits => Color32::from_rgb(255, 255, 255),
            Category::Workspace => Color32::from_rgb(150, 150, 150),
            Category::Communication => Color32::from_rgb(170, 68, 153),
            Category::KvCache => Color32::from_rgb(140, 230, 200),
        };
    }
    match c {
        Category::Parameters => Color32::from_rgb(76, 114, 176),
        Category::Gradients => Color32::from_rgb(221, 132, 82),
        // Not seaborn's green (85, 168, 104): beside the gradients' orange it was 4.8 ΔE00
        // apart under protanopia. This teal keeps every pair a stack can draw side by side
        // ≥ 10 apart under all three colour-vision deficiencies (tests/colour.rs).
        Category::OptimizerState => Color32::from_rgb(80, 192, 136),
        Category::MasterWeights => Color32::from_rgb(129, 114, 179),
        Category::Activations => Color32::from_rgb(196, 78, 82),
        Category::Temporaries => Color32::from_rgb(218, 139, 195),
        Category::Input => Color32::from_rgb(147, 120, 96),
        Category::Logits => Color32::from_rgb(204, 185, 116),
        Category::Workspace => Color32::from_rgb(140, 140, 140),
        Category::Communication => Color32::from_rgb(100, 181, 205),
        Category::KvCache => Color32::from_rgb(150, 190, 60),
    }
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Names a chart for a screen reader: `description`, computed from the numbers the chart draws
/// and in the reader's language, becomes its accessibility node's label.
pub fn describe_chart(response: &egui::Response, description: &str) {
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, description));
}

/// A small square of a category's colour.
pub fn swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
    ui.painter().rect_filled(rect, 2.0, color);
}

/// Where a number comes from, said next to it: the plan's prediction, oomlab's allocator as a
/// real step ran, or the driver layer's own report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Predicted,
    Allocator,
    Device,
    /// A PyTorch memory snapshot of a real run.
    PyTorch,
}

impl Source {
    /// The source in the reader's language: "predicted (plan)", "预测（计划）".
    pub fn word(self, t: &Catalog) -> String {
        t.text(match self {
            Source::Predicted => "source-predicted",
            Source::Allocator => "source-allocator",
            Source::Device => "source-device",
            Source::PyTorch => "source-pytorch",
        })
    }
}

/// A category's name in the reader's language (the plan's own names, `optimizer_state`, stay
/// in code, JSON and the CLI).
pub fn category_name(t: &Catalog, c: Category) -> String {
    t.text(match c {
        Category::Parameters => "category-parameters",
        Category::Gradients => "category-gradients",
        Category::OptimizerState => "category-optimizer-state",
        Category::MasterWeights => "category-master-weights",
        Category::Activations => "category-activations",
        Category::Temporaries => "category-temporaries",
        Category::Input => "category-input",
        Category::Logits => "category-logits",
        Category::Workspace => "category-workspace",
        Category::Communication => "category-communication",
        Category::KvCache => "category-kv-cache",
    })
}

/// A size as `units::format_bytes` writes it, with "bytes" in the reader's language (KiB, MiB
/// and GiB stay as they are in both).
pub fn size(t: &Catalog, bytes: u64) -> String {
    if bytes <= 1024 { t.format("size-bytes", &[("n", bytes.to_string().into())]) } else { format_bytes(bytes) }
}

/// A configuration in words, as `Techniques::describe` writes it for the CLI, in the reader's
/// language: "bf16 mixed precision, checkpoint blocks", "baseline".
pub fn describe(t: &Catalog, tech: &crate::plan::Techniques) -> String {
    use crate::plan::{AttentionKind, Checkpoint, Precision};
    let mut parts = Vec::new();
    if tech.precision != Precision::Fp32 {
        parts.push(t.format("tech-mixed", &[("precision", tech.precision.name().into())]));
    }
    match tech.checkpoint {
        Checkpoint::Off => {}
        Checkpoint::Every(1) => parts.push(t.text("tech-checkpoint-blocks")),
        Checkpoint::Every(k) => parts.push(t.format("tech-checkpoint-every", &[("k", k.to_string().into())])),
        Checkpoint::Selective => parts.push(t.text("tech-checkpoint-selective")),
    }
    if tech.attention == AttentionKind::Fused {
        parts.push(t.text("tech-fused"));
    }
    if tech.accum > 1 {
        parts.push(t.format("tech-accum", &[("k", tech.accum.to_string().into())]));
    }
    if tech.parallel.is_distributed() {
        let gpus = tech.parallel.gpus.to_string();
        parts.push(match tech.parallel.stage() {
            0 => t.format("tech-gpus-ddp", &[("gpus", gpus.into())]),
            stage => t.format("tech-gpus-zero", &[("gpus", gpus.into()), ("stage", stage.to_string().into())]),
        });
    }
    match tech.batching {
        crate::plan::Batching::Windows => {}
        crate::plan::Batching::Padded => parts.push(t.text("tech-batching-padded")),
        crate::plan::Batching::Bucketed => parts.push(t.text("tech-batching-bucketed")),
        crate::plan::Batching::Packed => parts.push(t.text("tech-batching-packed")),
    }
    match tech.offload {
        crate::plan::Offload::None => {}
        crate::plan::Offload::Optimizer => parts.push(t.text("tech-offload-optimizer")),
        crate::plan::Offload::OptimizerGradients => parts.push(t.text("tech-offload-gradients")),
    }
    if let Some(l) = tech.lora {
        let targets: Vec<&str> = l.targets().iter().map(|t| t.module()).collect();
        parts.push(t.format(
            "tech-lora",
            &[
                ("rank", l.rank.to_string().into()),
                ("alpha", l.alpha.to_string().into()),
                ("targets", targets.join(", ").into()),
            ],
        ));
    }
    let separator = if t.lang() == crate::i18n::Lang::Zh { "，" } else { ", " };
    if parts.is_empty() { t.text("tech-baseline") } else { parts.join(separator) }
}

/// A chart's legend as a row of swatches above it, never over the data (egui_plot's own legend
/// sits inside the plot and covered the tallest bars).
pub fn legend(ui: &mut Ui, items: &[(String, Color32)]) {
    ui.horizontal_wrapped(|ui| legend_items(ui, items));
}

/// A stacked chart's legend: "Stacked from the bottom:" and its first `stacked` items in the
/// order the bars stack them, then the rest — so that the order tells the categories apart, not
/// their colour alone.
pub fn stacked_legend(ui: &mut Ui, t: &Catalog, items: &[(String, Color32)], stacked: usize) {
    let stacked = stacked.min(items.len());
    ui.horizontal_wrapped(|ui| {
        if stacked > 0 {
            ui.label(RichText::new(t.text("legend-stacked")).small().strong());
        }
        legend_items(ui, &items[..stacked]);
        if stacked < items.len() {
            ui.label(RichText::new("|").small());
        }
        legend_items(ui, &items[stacked..]);
    });
}

fn legend_items(ui: &mut Ui, items: &[(String, Color32)]) {
    for (name, color) in items {
        swatch(ui, *color);
        ui.label(RichText::new(name).small());
        ui.add_space(6.0);
    }
}

/// Records where widget `id` was drawn this frame, for a lesson to highlight it; scrolls it into
/// view if [`scroll_to`] asked for it.
pub fn mark(ui: &Ui, id: &'static str, rect: egui::Rect) {
    let frame = ui.ctx().cumulative_frame_nr();
    ui.ctx().data_mut(|d| d.insert_temp(egui::Id::unique(("oomlab_mark", id)), (frame, rect)));
    let wanted = ui.ctx().data(|d| d.get_temp::<&'static str>(egui::Id::unique("oomlab_scroll_to")));
    if wanted == Some(id) {
        ui.scroll_to_rect(rect, Some(egui::Align::TOP));
        ui.ctx().data_mut(|d| d.remove::<&'static str>(egui::Id::unique("oomlab_scroll_to")));
    }
}

/// Asks the widget marked `id` to scroll into view when it is next drawn.
pub fn scroll_to(ctx: &egui::Context, id: &'static str) {
    ctx.data_mut(|d| d.insert_temp(egui::Id::unique("oomlab_scroll_to"), id));
}

/// Where widget `id` was drawn this frame (or the last), if it was.
pub fn marked(ctx: &egui::Context, id: &'static str) -> Option<egui::Rect> {
    let frame = ctx.cumulative_frame_nr();
    let seen = ctx.data(|d| d.get_temp::<(u64, egui::Rect)>(egui::Id::unique(("oomlab_mark", id))));
    seen.filter(|(f, _)| f + 1 >= frame).map(|(_, r)| r)
}

/// Set for one frame when the charts should fit their data again (the F key).
const FIT: &str = "oomlab_fit_charts";

/// Asks this frame's charts to fit their data (they forget any zoom or pan).
pub fn request_fit(ctx: &egui::Context) {
    let frame = ctx.cumulative_frame_nr();
    ctx.data_mut(|d| d.insert_temp(egui::Id::unique(FIT), frame));
}

/// Whether a chart drawn now should fit its data.
pub fn fit_requested(ui: &Ui) -> bool {
    let asked = ui.ctx().data(|d| d.get_temp::<u64>(egui::Id::unique(FIT)));
    asked.is_some_and(|frame| frame + 1 >= ui.ctx().cumulative_frame_nr())
}

thread_local! {
    /// Present mode's colour-blind-safe palette (per thread: the UI's; tests render in parallel).
    static SAFE_COLOURS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Switches the category colours to the colour-blind-safe palette (present mode) or back.
pub fn use_safe_colours(on: bool) {
    SAFE_COLOURS.with(|c| c.set(on));
}

/// Where the app says how tall the selected view's chart may be (the room left in the window).
const CHART_HEIGHT: &str = "oomlab_chart_height";

/// Gives the charts drawn this frame `height` points (the app: the window's room for the view).
pub fn set_chart_height(ctx: &egui::Context, height: f32) {
    ctx.data_mut(|d| d.insert_temp(egui::Id::unique(CHART_HEIGHT), height));
}

/// The height for a chart: what the app allowed this frame, else 260 points (a view drawn alone).
pub fn chart_height(ui: &Ui) -> f32 {
    ui.ctx().data(|d| d.get_temp::<f32>(egui::Id::unique(CHART_HEIGHT))).unwrap_or(260.0).max(180.0)
}

/// A short explanation under a view, collapsed by default; `key` names it in the catalogs.
pub fn explain(ui: &mut Ui, t: &Catalog, key: &str) {
    egui::CollapsingHeader::new(RichText::new(t.text("main-why")).italics()).id_salt(key).show(ui, |ui| {
        ui.label(t.text(key));
    });
}
