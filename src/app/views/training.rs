//! The loss curve, step time and steps/s.

use egui::Ui;
use egui_plot::{Line, Plot, PlotPoints};

use super::drawn::{Drawn, TrainingDrawn, record};
use crate::app::timing::StepMark;
use crate::i18n::Catalog;

/// Loss per step, the last step's time and steps/s; the allocator's memory after each step.
pub fn training(ui: &mut Ui, t: &Catalog, losses: &[f32], step_secs: &[f64], memory: &[StepMark]) {
    let status = match (losses.last(), step_secs.last()) {
        (Some(loss), Some(secs)) => {
            let recent = &step_secs[step_secs.len().saturating_sub(10)..];
            let mean = recent.iter().sum::<f64>() / recent.len() as f64;
            t.format(
                "train-status",
                &[
                    ("step", losses.len().to_string().into()),
                    ("loss", format!("{loss:.4}").into()),
                    ("ms", format!("{:.0}", secs * 1e3).into()),
                    ("rate", format!("{:.2}", 1.0 / mean.max(1e-9)).into()),
                    ("window", recent.len().to_string().into()),
                ],
            )
        }
        _ => t.text("train-none"),
    };
    ui.label(&status);
    let veiled = super::veil(ui.ctx()).step;
    let shown = if veiled { Vec::new() } else { memory.to_vec() };
    let drawn =
        TrainingDrawn { steps: losses.len(), losses: losses.to_vec(), status, memory: shown, memory_veiled: veiled };
    record(ui, Drawn::Training(drawn));
    let pts: PlotPoints = losses.iter().enumerate().map(|(i, l)| [i as f64 + 1.0, *l as f64]).collect();
    let response = Plot::new("loss")
        .height(200.0)
        .x_axis_label(t.text("train-axis-step"))
        .y_axis_label(t.text("train-axis-loss"))
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| p.line(Line::new("loss", pts)))
        .response;
    // The curve's description: where it starts and ends, from the losses it draws.
    let description = match (losses.first(), losses.last()) {
        (Some(first), Some(last)) => t.format(
            "chart-loss",
            &[
                ("steps", (losses.len() as f64).into()),
                ("first", format!("{first:.4}").into()),
                ("last", format!("{last:.4}").into()),
            ],
        ),
        _ => t.text("chart-loss-none"),
    };
    super::describe_chart(&response, &description);
    ui.separator();
    memory_by_step(ui, t, memory);
}

/// The allocator after each step (allocator, live): the peak allocated and what stayed reserved.
/// Batches of one length: both flat. Batches of varying lengths: the allocated peaks go up and
/// down with the lengths while reserved climbs in steps — the cache keeps what each length cut.
fn memory_by_step(ui: &mut Ui, t: &Catalog, memory: &[StepMark]) {
    ui.label(egui::RichText::new(t.text("train-memory-heading")).strong());
    if super::veil(ui.ctx()).step {
        super::veil::hidden_chart(ui, t, 160.0);
        return;
    }
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let line = |name: String, f: &dyn Fn(&StepMark) -> u64| {
        let pts: PlotPoints = memory.iter().enumerate().map(|(i, m)| [i as f64 + 1.0, mib(f(m))]).collect();
        Line::new(name, pts)
    };
    let (allocated, reserved) = (t.text("train-memory-allocated"), t.text("train-memory-reserved"));
    // Which line is which, in words (a solid and a dashed line: not told apart by colour alone).
    ui.label(format!("—— {allocated}    - - - {reserved}"));
    let response = Plot::new("memory_by_step")
        .height(160.0)
        .x_axis_label(t.text("train-axis-step"))
        .y_axis_label(t.text("train-axis-mib"))
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| {
            p.line(line(allocated, &|m| m.peak_allocated_bytes));
            p.line(line(reserved, &|m| m.reserved_bytes).style(egui_plot::LineStyle::dashed_loose()));
        })
        .response;
    let description = match (memory.first(), memory.last()) {
        (Some(first), Some(last)) => {
            let most = memory.iter().map(|m| m.peak_allocated_bytes).max().unwrap_or(0);
            t.format(
                "chart-step-memory",
                &[
                    ("steps", (memory.len() as f64).into()),
                    ("first", super::size(t, first.reserved_bytes).into()),
                    ("last", super::size(t, last.reserved_bytes).into()),
                    ("allocated", super::size(t, most).into()),
                ],
            )
        }
        _ => t.text("chart-step-memory-none"),
    };
    super::describe_chart(&response, &description);
}
