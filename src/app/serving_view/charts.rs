//! The Serving tab's charts: requests and the cache over the iterations, where the reserved bytes
//! went at the peak, the pool block by block, and the layouts side by side. Each chart is
//! described for a screen reader from the numbers it draws.

use egui::{Color32, RichText, Ui};
use egui_plot::{Line, Plot, PlotPoints};

use crate::app::views::{Source, category_color, describe_chart, swatch};
use crate::i18n::Catalog;
use crate::plan::Category;
use crate::serving::Layout;
use crate::serving::{Iteration, Report};
use crate::units::format_bytes;

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1u32 << 20)
}

/// Requests running, and the cache's reserved and used bytes, iteration by iteration.
pub fn over_iterations(ui: &mut Ui, t: &Catalog, iterations: &[Iteration]) {
    ui.label(RichText::new(t.text("serving-chart-heading")).strong());
    let running: PlotPoints = iterations.iter().enumerate().map(|(i, it)| [i as f64, it.running as f64]).collect();
    let response = Plot::new("serving_running")
        .height(120.0)
        .x_axis_label(t.text("serving-axis-iteration"))
        .y_axis_label(t.text("serving-line-running"))
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| p.line(Line::new(t.text("serving-line-running"), running)))
        .response;
    let peak = iterations.iter().map(|i| i.running).max().unwrap_or(0);
    let most = iterations.iter().fold(None::<&Iteration>, |p, i| match p {
        Some(p) if p.kv.reserved >= i.kv.reserved => Some(p),
        _ => Some(i),
    });
    let (reserved, used) = most.map_or((0, 0), |i| (i.kv.reserved, i.kv.used));
    let description = t.format_text(
        "serving-chart-desc",
        &[
            ("iterations", iterations.len().to_string()),
            ("peak", peak.to_string()),
            ("reserved", format_bytes(reserved)),
            ("used", format_bytes(used)),
        ],
    );
    describe_chart(&response, &description);
    let (r, u) = (t.text("serving-line-reserved"), t.text("serving-line-used"));
    // Told apart by the line's style as well as its colour.
    ui.label(format!("- - - {r}    —— {u}  ({})", Source::Allocator.word(t)));
    let line = |name: String, f: &dyn Fn(&Iteration) -> u64| {
        Line::new(name, iterations.iter().enumerate().map(|(i, it)| [i as f64, mib(f(it))]).collect::<PlotPoints>())
    };
    let response = Plot::new("serving_cache")
        .height(140.0)
        .x_axis_label(t.text("serving-axis-iteration"))
        .y_axis_label(t.text("serving-axis-mib"))
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| {
            p.line(line(r.clone(), &|i| i.kv.reserved).style(egui_plot::LineStyle::dashed_loose()));
            p.line(line(u.clone(), &|i| i.kv.used).color(category_color(Category::KvCache)));
        })
        .response;
    describe_chart(&response, &description);
}

/// The reserved bytes at the peak, split as the PagedAttention paper names them.
pub fn waste_parts(ui: &mut Ui, t: &Catalog, r: &Report) {
    let k = &r.waste_at_peak;
    ui.label(RichText::new(t.text("serving-parts-heading")).strong());
    let parts = [
        ("serving-part-used", k.used, category_color(Category::KvCache)),
        ("serving-part-reservation", k.reservation, Color32::from_rgb(230, 159, 0)),
        ("serving-part-internal", k.internal_fragmentation, Color32::from_rgb(213, 94, 0)),
        ("serving-part-external", k.external_fragmentation, Color32::from_rgb(150, 150, 150)),
    ];
    let total = k.reserved.max(1) as f32;
    let width = ui.available_width().min(600.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, 18.0), egui::Sense::hover());
    let mut x = rect.left();
    for (_, bytes, colour) in parts {
        let w = width * bytes as f32 / total;
        ui.painter().rect_filled(
            egui::Rect::from_min_size(egui::pos2(x, rect.top()), egui::vec2(w, 18.0)),
            0.0,
            colour,
        );
        x += w;
    }
    let mut lines = Vec::new();
    for (key, bytes, colour) in parts {
        let line = t.format_text(
            "serving-part-line",
            &[
                ("name", t.text(key)),
                ("bytes", format_bytes(bytes)),
                ("percent", format!("{:.1}", 100.0 * bytes as f32 / total)),
            ],
        );
        ui.horizontal(|ui| {
            swatch(ui, colour);
            // Wrapped within the row: a phone's width holds the longest part's words.
            ui.add(egui::Label::new(&line).wrap());
        });
        lines.push(line);
    }
    describe_chart(&response, &lines.join("; "));
}

/// The caches' blocks at the peak, a square each, coloured by the request that holds it.
pub fn block_map(ui: &mut Ui, t: &Catalog, r: &Report) {
    let Some(map) = &r.map_at_peak else {
        ui.label(t.text("serving-map-growing"));
        return;
    };
    ui.label(RichText::new(t.text("serving-map-heading")).strong());
    let free = map.iter().filter(|&&o| o == 0).count();
    let mut owners: Vec<u32> = map.iter().copied().filter(|&o| o != 0).collect();
    owners.sort_unstable();
    owners.dedup();
    let description = t.format_text(
        "serving-map-desc",
        &[
            ("blocks", map.len().to_string()),
            ("held", (map.len() - free).to_string()),
            ("requests", owners.len().to_string()),
            ("free", free.to_string()),
        ],
    );
    ui.label(&description);
    let cell = 6.0;
    let per_row = ((ui.available_width().min(900.0) / cell) as usize).max(1);
    let rows = map.len().div_ceil(per_row);
    let (rect, response) =
        ui.allocate_exact_size(egui::vec2(per_row as f32 * cell, rows as f32 * cell), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    for (i, &owner) in map.iter().enumerate() {
        let min = rect.min + egui::vec2((i % per_row) as f32 * cell, (i / per_row) as f32 * cell);
        let colour = if owner == 0 { ui.visuals().faint_bg_color } else { hue(owner) };
        painter.rect_filled(egui::Rect::from_min_size(min, egui::vec2(cell - 1.0, cell - 1.0)), 0.0, colour);
    }
    describe_chart(&response, &description);
}

/// A request's colour: hues spread by the golden angle, so neighbours differ.
fn hue(owner: u32) -> Color32 {
    let h = (owner as f32 * 0.618_034).fract();
    egui::ecolor::Hsva::new(h, 0.55, 0.85, 1.0).into()
}

/// Every finished layout in a row: how many at once, what the cache reserved and held, the
/// waste over the run and the preemptions.
pub fn compare(ui: &mut Ui, t: &Catalog, reports: &[Report]) {
    ui.label(RichText::new(t.text("serving-compare-heading")).strong());
    egui::Grid::new("serving_compare").striped(true).show(ui, |ui| {
        for key in [
            "serving-col-layout",
            "serving-col-peak",
            "serving-col-reserved",
            "serving-col-used",
            "serving-col-waste",
            "serving-col-preemptions",
        ] {
            ui.label(RichText::new(t.text(key)).strong());
        }
        ui.end_row();
        for r in reports {
            ui.label(layout_name(t, r.layout));
            ui.label(r.peak_concurrent.to_string());
            ui.label(format_bytes(r.kv_reserved_peak_bytes));
            ui.label(format_bytes(r.kv_used_at_peak_bytes));
            ui.label(format!("{:.1} %", 100.0 * r.waste_fraction));
            ui.label(r.preemptions.to_string());
            ui.end_row();
        }
    });
}

/// A layout's name in the reader's language.
pub fn layout_name(t: &Catalog, layout: Layout) -> String {
    t.text(match layout {
        Layout::Contiguous => "serving-layout-contiguous",
        Layout::Growing => "serving-layout-growing",
        Layout::Paged => "serving-layout-paged",
    })
}
