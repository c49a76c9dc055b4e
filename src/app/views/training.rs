//! The loss curve, step time and steps/s.

use egui::Ui;
use egui_plot::{Line, Plot, PlotPoints};

/// Loss per step, the last step's time and steps/s.
pub fn training(ui: &mut Ui, losses: &[f32], step_secs: &[f64]) {
    match (losses.last(), step_secs.last()) {
        (Some(loss), Some(secs)) => {
            let recent = &step_secs[step_secs.len().saturating_sub(10)..];
            let mean = recent.iter().sum::<f64>() / recent.len() as f64;
            ui.label(format!(
                "Step {}: loss {loss:.4} (computed by the step). Last step {:.0} ms; {:.2} steps/s over the last {}.",
                losses.len(),
                secs * 1e3,
                1.0 / mean.max(1e-9),
                recent.len()
            ));
        }
        _ => {
            ui.label("No training step yet: press One step or Train.");
        }
    }
    let pts: PlotPoints = losses.iter().enumerate().map(|(i, l)| [i as f64 + 1.0, *l as f64]).collect();
    Plot::new("loss")
        .height(200.0)
        .x_axis_label("step")
        .y_axis_label("loss")
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| p.line(Line::new("loss", pts)));
}
