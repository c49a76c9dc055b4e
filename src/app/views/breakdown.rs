//! The breakdown at the peak, from every source, and the model state tensor by tensor.

use egui::{Color32, RichText, Ui};

use super::{Source, category_color, swatch};
use crate::memory::StepMemory;
use crate::memory::device::DeviceFigures;
use crate::plan::{Category, Plan};
use crate::units::format_bytes;

/// Bytes and % per category at the peak — predicted by the plan, next to the allocator's live
/// account of the last real step — and the device's own figures for the segments, grouped as the
/// seed's table (activations; gradients + optimizer; parameters; buffers).
pub fn breakdown(ui: &mut Ui, allocator: Option<&StepMemory>, predicted: &StepMemory, device: &DeviceFigures) {
    let total_p = predicted.peak_allocated_bytes().max(1);
    let reported = allocator.and(device.reported());
    egui::Grid::new("breakdown").striped(true).num_columns(5).show(ui, |ui| {
        ui.strong("at the peak");
        ui.strong(Source::Predicted.word());
        ui.strong("%");
        ui.strong(Source::Allocator.word());
        ui.strong(Source::Device.word());
        ui.end_row();
        for c in Category::ALL {
            let p = predicted.peak_allocated.get(c);
            let m = allocator.map(|m| m.peak_allocated.get(c));
            if p == 0 && m.unwrap_or(0) == 0 {
                continue;
            }
            ui.horizontal(|ui| {
                swatch(ui, category_color(c));
                ui.label(c.name());
            });
            ui.label(format_bytes(p));
            ui.label(format!("{:.1}%", 100.0 * p as f64 / total_p as f64));
            ui.label(m.map_or("—".into(), format_bytes));
            // The driver sees buffers, not tensors: no categories.
            ui.label("");
            ui.end_row();
        }
        ui.strong("total");
        ui.strong(format_bytes(predicted.peak_allocated_bytes()));
        ui.label("100%");
        ui.strong(allocator.map_or("—".into(), |m| format_bytes(m.peak_allocated_bytes())));
        ui.label("");
        ui.end_row();
        ui.label("reserved (segments)");
        ui.label(format_bytes(predicted.peak_reserved_bytes()));
        ui.label("");
        ui.label(allocator.map_or("—".into(), |m| format_bytes(m.peak_reserved_bytes())));
        ui.label(reported.map_or("—".into(), |d| format_bytes(d.peak_segment_bytes)));
        ui.end_row();
    });
    ui.add_space(4.0);
    match (allocator, device) {
        (None, _) => {
            ui.label(
                RichText::new("No real step yet: the allocator and device columns fill in once one runs.").small(),
            );
        }
        (Some(m), DeviceFigures::Reported(d)) => {
            let (blocks, block_bytes) = d.segment_blocks();
            ui.label(
                RichText::new(format!(
                    "Device, after the step: {} segment buffer(s) hold {} — the allocator's {} reserved plus {} bytes of the \
                     driver's own rounding — in {blocks} driver memory block(s) of {} in all. {} other allocation(s) ({}) \
                     lie outside oomlab's allocator (wgpu's own buffers, oomlab's uniforms and readback{}).",
                    d.segments.len(),
                    format_bytes(d.segment_bytes()),
                    format_bytes(m.stats.reserved_bytes),
                    d.rounding_bytes(),
                    format_bytes(block_bytes),
                    d.other_allocations,
                    format_bytes(d.other_bytes),
                    if d.other_allocations > 3 { ", the UI's textures" } else { "" },
                ))
                .small(),
            );
            if let Some(c) = d.counters {
                ui.label(
                    RichText::new(format!(
                        "wgpu's own counters: {} live buffers holding {}, {} memory allocations.",
                        c.buffers,
                        format_bytes(c.buffer_memory_bytes),
                        c.memory_allocations
                    ))
                    .small(),
                );
            }
            if !d.missing.is_empty() || !d.leftover.is_empty() {
                ui.colored_label(
                    Color32::from_rgb(240, 80, 80),
                    format!(
                        "The driver's report disagrees with the allocator: segments it does not list {:?}, buffers left over {:?}.",
                        d.missing, d.leftover
                    ),
                );
            }
        }
        (Some(_), DeviceFigures::NotReported { reason }) => {
            ui.label(RichText::new(format!("Device: {reason}.")).small());
        }
    }
    let g = |c| predicted.peak_allocated.get(c);
    let groups = [
        ("activations (saved for backward + temporaries)", g(Category::Activations) + g(Category::Temporaries)),
        (
            "gradients + optimizer state + master weights",
            g(Category::Gradients) + g(Category::OptimizerState) + g(Category::MasterWeights),
        ),
        ("parameters", g(Category::Parameters)),
        ("buffers (input, logits, workspace)", g(Category::Input) + g(Category::Logits) + g(Category::Workspace)),
    ];
    ui.add_space(4.0);
    for (name, bytes) in groups {
        ui.label(format!("{name}: {} ({:.0}%)", format_bytes(bytes), 100.0 * bytes as f64 / total_p as f64));
    }
}

/// The model state tensor by tensor: each optimizer state is its own tensor (its own row), so
/// AdamW's two extra copies of the weights — three with fp32 master weights — are visible.
pub fn model_state(ui: &mut Ui, plan: &Plan) {
    let trainable = plan.tensor(plan.handles.trainable).size_bytes();
    let rows: Vec<(String, Category, u64)> = plan
        .tensors
        .iter()
        .filter(|t| t.category.is_persistent())
        .map(|t| (t.name.clone(), t.category, t.size_bytes()))
        .collect();
    egui::Grid::new("model_state").striped(true).num_columns(3).show(ui, |ui| {
        ui.strong("model state");
        ui.strong("bytes");
        ui.strong("× trainable weights");
        ui.end_row();
        for (name, c, bytes) in &rows {
            ui.horizontal(|ui| {
                swatch(ui, category_color(*c));
                ui.label(name.trim_start_matches("optimizer."));
            });
            ui.label(format_bytes(*bytes));
            ui.label(format!("{:.2}×", *bytes as f64 / trainable.max(1) as f64));
            ui.end_row();
        }
    });
    let copies = rows
        .iter()
        .filter(|(_, c, _)| matches!(c, Category::OptimizerState | Category::MasterWeights))
        .map(|(_, _, b)| *b as f64 / trainable.max(1) as f64)
        .sum::<f64>();
    ui.label(format!(
        "{} keeps {} optimizer state tensor(s){}: {copies:.1}× the trainable weights' bytes on top of weights and gradients.",
        plan.optimizer.kind.name(),
        plan.optimizer.state_names().len(),
        if plan.handles.master.is_some() { " plus fp32 master weights" } else { "" }
    ));
}
