//! The loss curve, step time and steps/s.

use egui::Ui;
use egui_plot::{Line, Plot, PlotPoints};

use super::drawn::{Drawn, TrainingDrawn, record};
use crate::i18n::Catalog;

/// Loss per step, the last step's time and steps/s.
pub fn training(ui: &mut Ui, t: &Catalog, losses: &[f32], step_secs: &[f64]) {
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
    record(ui, Drawn::Training(TrainingDrawn { steps: losses.len(), losses: losses.to_vec(), status }));
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
                ("steps", losses.len().to_string().into()),
                ("first", format!("{first:.4}").into()),
                ("last", format!("{last:.4}").into()),
            ],
        ),
        _ => t.text("chart-loss-none"),
    };
    super::describe_chart(&response, &description);
}
