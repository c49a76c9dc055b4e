//! The breakdown at the peak, from every source, and the model state tensor by tensor.

use egui::{Color32, RichText, Ui};

use super::drawn::{BreakdownDrawn, Drawn, record};
use super::veil::{hidden_cell, or_hidden};
use super::{Source, category_color, category_name, size, swatch};
use crate::i18n::Catalog;
use crate::memory::StepMemory;
use crate::memory::device::{
    DeviceFigures, NOT_REPORTED_BACKEND, NOT_REPORTED_BROWSER, NOT_REPORTED_CPU, NOT_REPORTED_YET,
};
use crate::plan::{Category, Plan};

/// Bytes and % per category at the peak — predicted by the plan, next to the allocator's live
/// account of the last real step — and the device's own figures for the segments, grouped as the
/// seed's table (activations; gradients + optimizer; parameters; buffers).
pub fn breakdown(
    ui: &mut Ui,
    t: &Catalog,
    allocator: Option<&StepMemory>,
    predicted: &StepMemory,
    device: &DeviceFigures,
) {
    let format_bytes = |b| size(t, b);
    // A chapter's open question veils every figure here (`veil`): the rows stay, the cells say "?".
    let veiled = super::veil(ui.ctx()).step;
    let cell = |ui: &mut Ui, text: String| {
        if veiled {
            hidden_cell(ui, t);
        } else {
            ui.label(text);
        }
    };
    let total_p = predicted.peak_allocated_bytes().max(1);
    let reported = allocator.and(device.reported());
    // On a phone (a browser: the device never reports) the empty device column would push the
    // table past the screen's edge; the note under the table still says why there is none.
    let device_column = device.reported().is_some() || ui.available_width() >= 520.0;
    let mut figures = BreakdownDrawn {
        predicted_total_bytes: predicted.peak_allocated_bytes(),
        allocator_total_bytes: allocator.map(StepMemory::peak_allocated_bytes),
        predicted_reserved_bytes: predicted.peak_reserved_bytes(),
        allocator_reserved_bytes: allocator.map(StepMemory::peak_reserved_bytes),
        device_reserved_bytes: reported.map(|d| d.peak_segment_bytes),
        ..BreakdownDrawn::default()
    };
    if veiled {
        figures = BreakdownDrawn { veiled: true, ..BreakdownDrawn::default() };
    }
    egui::Grid::new("breakdown").striped(true).num_columns(if device_column { 5 } else { 4 }).show(ui, |ui| {
        ui.strong(t.text("bd-at-peak"));
        ui.strong(Source::Predicted.word(t));
        ui.strong("%");
        ui.strong(Source::Allocator.word(t));
        if device_column {
            ui.strong(Source::Device.word(t));
        }
        ui.end_row();
        for c in Category::ALL {
            let p = predicted.peak_allocated.get(c);
            let m = allocator.map(|m| m.peak_allocated.get(c));
            if p == 0 && m.unwrap_or(0) == 0 {
                continue;
            }
            let row = if veiled { (0, None) } else { (p, m) };
            figures.rows.push((c.name().to_string(), row.0, row.1));
            ui.horizontal(|ui| {
                swatch(ui, category_color(c));
                ui.label(category_name(t, c));
            });
            cell(ui, format_bytes(p));
            cell(ui, format!("{:.1}%", 100.0 * p as f64 / total_p as f64));
            cell(ui, m.map_or("—".into(), format_bytes));
            // The driver sees buffers, not tensors: no categories.
            if device_column {
                ui.label("");
            }
            ui.end_row();
        }
        ui.strong(t.text("bd-total"));
        cell(ui, format_bytes(predicted.peak_allocated_bytes()));
        ui.label("100%");
        cell(ui, allocator.map_or("—".into(), |m| format_bytes(m.peak_allocated_bytes())));
        if device_column {
            ui.label("");
        }
        ui.end_row();
        ui.label(t.text("bd-reserved"));
        cell(ui, format_bytes(predicted.peak_reserved_bytes()));
        ui.label("");
        cell(ui, allocator.map_or("—".into(), |m| format_bytes(m.peak_reserved_bytes())));
        if device_column {
            cell(ui, reported.map_or("—".into(), |d| format_bytes(d.peak_segment_bytes)));
        }
        ui.end_row();
    });
    record(ui, Drawn::Breakdown(figures));
    ui.add_space(4.0);
    match (allocator, device) {
        // The driver's figures are the step's too: after the reveal.
        _ if veiled => super::veil::note(ui, t),
        (None, _) => {
            ui.label(RichText::new(t.text("bd-no-step")).small());
        }
        (Some(m), DeviceFigures::Reported(d)) => {
            let (blocks, block_bytes) = d.segment_blocks();
            let text = t.format(
                "bd-device",
                &[
                    ("segments", d.segments.len().to_string().into()),
                    ("segment_bytes", format_bytes(d.segment_bytes()).into()),
                    ("reserved", format_bytes(m.stats.reserved_bytes).into()),
                    ("rounding", d.rounding_bytes().to_string().into()),
                    ("blocks", blocks.to_string().into()),
                    ("block_bytes", format_bytes(block_bytes).into()),
                    ("others", d.other_allocations.to_string().into()),
                    ("other_bytes", format_bytes(d.other_bytes).into()),
                    (
                        "ui_textures",
                        if d.other_allocations > 3 { t.text("bd-ui-textures") } else { String::new() }.into(),
                    ),
                ],
            );
            ui.label(RichText::new(text).small());
            if let Some(c) = d.counters {
                let text = t.format(
                    "bd-counters",
                    &[
                        ("buffers", c.buffers.to_string().into()),
                        ("bytes", format_bytes(c.buffer_memory_bytes).into()),
                        ("allocations", c.memory_allocations.to_string().into()),
                    ],
                );
                ui.label(RichText::new(text).small());
            }
            if !d.missing.is_empty() || !d.leftover.is_empty() {
                ui.colored_label(
                    Color32::from_rgb(240, 80, 80),
                    t.format(
                        "bd-disagrees",
                        &[
                            ("missing", format!("{:?}", d.missing).into()),
                            ("leftover", format!("{:?}", d.leftover).into()),
                        ],
                    ),
                );
            }
        }
        (Some(_), DeviceFigures::NotReported { reason }) => {
            ui.label(
                RichText::new(t.format("bd-device-reason", &[("reason", not_reported(t, reason).into())])).small(),
            );
        }
    }
    let g = |c| predicted.peak_allocated.get(c);
    let groups = [
        ("bd-group-activations", g(Category::Activations) + g(Category::Temporaries)),
        ("bd-group-states", g(Category::Gradients) + g(Category::OptimizerState) + g(Category::MasterWeights)),
        ("category-parameters", g(Category::Parameters)),
        ("bd-group-buffers", g(Category::Input) + g(Category::Logits) + g(Category::Workspace)),
        ("category-communication", g(Category::Communication)),
    ];
    ui.add_space(4.0);
    // Communication buffers exist only with several simulated GPUs.
    for (key, bytes) in groups.into_iter().filter(|&(key, b)| key != "category-communication" || b > 0) {
        ui.label(t.format(
            "bd-group-line",
            &[
                ("name", t.text(key).into()),
                ("bytes", or_hidden(t, veiled, || format_bytes(bytes)).into()),
                ("percent", or_hidden(t, veiled, || format!("{:.0}", 100.0 * bytes as f64 / total_p as f64)).into()),
            ],
        ));
    }
}

/// Why the device gave no figures, in the reader's language: the backends' known reasons have
/// catalog messages; anything else is shown as the backend wrote it.
fn not_reported(t: &Catalog, reason: &str) -> String {
    match reason {
        NOT_REPORTED_YET => t.text("device-none-yet"),
        NOT_REPORTED_BROWSER => t.text("device-none-browser"),
        NOT_REPORTED_BACKEND => t.text("device-none-backend"),
        NOT_REPORTED_CPU => t.text("device-none-cpu"),
        other => other.to_string(),
    }
}

/// The model state tensor by tensor: each optimizer state is its own tensor (its own row), so
/// AdamW's two extra copies of the weights — three with fp32 master weights — are visible.
pub fn model_state(ui: &mut Ui, t: &Catalog, plan: &Plan) {
    let veiled = super::veil(ui.ctx()).step;
    let trainable = plan.tensor(plan.handles.trainable).size_bytes();
    // Offloaded states are kept too, in host memory: said so on their row.
    let rows: Vec<(String, Category, u64)> = plan
        .tensors
        .iter()
        .filter(|t| t.persistent)
        .map(|x| {
            let name = x.name.trim_start_matches("optimizer.");
            let name = if x.host { t.format("ms-on-host", &[("name", name.into())]) } else { name.to_string() };
            (name, x.category, x.size_bytes())
        })
        .collect();
    egui::Grid::new("model_state").striped(true).num_columns(3).show(ui, |ui| {
        ui.strong(t.text("ms-heading"));
        ui.strong(t.text("ms-bytes"));
        ui.strong(t.text("ms-times"));
        ui.end_row();
        for (name, c, bytes) in &rows {
            ui.horizontal(|ui| {
                swatch(ui, category_color(*c));
                ui.label(name);
            });
            if veiled {
                hidden_cell(ui, t);
                hidden_cell(ui, t);
            } else {
                ui.label(size(t, *bytes));
                ui.label(format!("{:.2}×", *bytes as f64 / trainable.max(1) as f64));
            }
            ui.end_row();
        }
    });
    let copies = rows
        .iter()
        .filter(|(_, c, _)| matches!(c, Category::OptimizerState | Category::MasterWeights))
        .map(|(_, _, b)| *b as f64 / trainable.max(1) as f64)
        .sum::<f64>();
    ui.label(t.format(
        "ms-summary",
        &[
            ("optimizer", plan.optimizer.kind.name().into()),
            ("count", plan.optimizer.state_names().len().to_string().into()),
            ("master", if plan.handles.master.is_some() { t.text("ms-master") } else { String::new() }.into()),
            ("copies", or_hidden(t, veiled, || format!("{copies:.1}")).into()),
        ],
    ));
}
