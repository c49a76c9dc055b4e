//! Memory per GPU against the number of simulated GPUs, one line per ZeRO stage: where sharding
//! lets a step fit that one GPU cannot hold.

use egui::{Color32, Ui};
use egui_plot::{HLine, Line, MarkerShape, Plot, PlotPoints, Points, VLine};

use super::drawn::{Drawn, PerGpuDrawn, record};
use super::{chart_height, describe_chart, legend, size};
use crate::app::derived::GpuSeries;
use crate::i18n::Catalog;

/// Each stage's name, colour and marker: Okabe and Ito's colours, a shape each, so that the
/// lines differ in more than colour.
fn style(text: Color32, t: &Catalog, stage: u8) -> (String, Color32, MarkerShape) {
    match stage {
        0 => (t.text("controls-zero-0"), text, MarkerShape::Circle),
        1 => ("ZeRO-1".into(), Color32::from_rgb(230, 159, 0), MarkerShape::Square),
        2 => ("ZeRO-2".into(), Color32::from_rgb(86, 180, 233), MarkerShape::Diamond),
        _ => ("ZeRO-3".into(), Color32::from_rgb(0, 158, 115), MarkerShape::Up),
    }
}

/// The chart, its legend, a line per stage saying the fewest GPUs on which it fits, and its
/// description for a screen reader.
pub fn per_gpu_chart(ui: &mut Ui, t: &Catalog, series: &[GpuSeries], budget: u64, batch: usize, current: usize) {
    if series.is_empty() {
        return;
    }
    // Every point is a plan's prediction: no step of the other GPU counts ran.
    ui.heading(t.format("pg-heading", &[("source", super::Source::Predicted.word(t).into())]));
    let veiled = super::veil(ui.ctx()).step;
    // DDP's line in the text colour: white on a dark theme, black on a light one.
    let text = ui.visuals().strong_text_color();
    let points = |s: &GpuSeries| -> Vec<(usize, u64)> { s.points.iter().filter_map(|&(n, p)| Some((n, p?))).collect() };
    let fewest = |s: &GpuSeries| points(s).into_iter().find(|&(_, p)| p <= budget).map(|(n, _)| n);
    let mut items: Vec<(String, Color32)> = series
        .iter()
        .map(|s| {
            let (name, color, _) = style(text, t, s.stage);
            (name, color)
        })
        .collect();
    items.push((t.text("sw-budget"), Color32::RED));
    legend(ui, &items);
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let response = if veiled {
        super::veil::hidden_chart(ui, t, chart_height(ui) * 0.7)
    } else {
        Plot::new("per-gpu")
            .height(chart_height(ui) * 0.7)
            .x_axis_label(t.text("pg-axis-gpus"))
            .y_axis_label(t.format("sw-axis-peak", &[("unit", "MiB".into())]))
            .include_y(0.0)
            .include_y(mib(budget) * 1.1)
            .allow_scroll(false)
            .show(ui, |p| {
                p.hline(HLine::new(t.text("sw-budget"), mib(budget)).color(Color32::RED).width(2.0));
                p.vline(VLine::new(t.text("pg-this"), current as f64).color(Color32::GRAY));
                for s in series {
                    let (name, color, shape) = style(text, t, s.stage);
                    let pts: Vec<[f64; 2]> = points(s).iter().map(|&(n, b)| [n as f64, mib(b)]).collect();
                    p.line(Line::new(name.clone(), PlotPoints::from(pts.clone())).color(color).width(2.0));
                    p.points(Points::new(name, pts).color(color).shape(shape).radius(4.0).filled(true));
                }
            })
            .response
    };
    let mut lines = Vec::new();
    for s in series {
        let (name, _, _) = style(text, t, s.stage);
        lines.push(match fewest(s) {
            _ if veiled => t.format("pg-fits-hidden", &[("name", name.into())]),
            Some(n) => t.format("pg-fits", &[("name", name.into()), ("gpus", n.to_string().into())]),
            None => t.format("pg-fits-none", &[("name", name.into())]),
        });
    }
    for line in &lines {
        ui.label(line);
    }
    if !veiled {
        let head =
            t.format("pg-description", &[("batch", batch.to_string().into()), ("budget", size(t, budget).into())]);
        describe_chart(&response, &format!("{head} {}.", lines.join("; ")));
    }
    let series_drawn = if veiled { Vec::new() } else { series.iter().map(|s| (s.stage, points(s))).collect() };
    let fewest_fitting = if veiled { Vec::new() } else { series.iter().map(|s| (s.stage, fewest(s))).collect() };
    record(
        ui,
        Drawn::PerGpu(PerGpuDrawn {
            batch,
            budget_bytes: budget,
            series: series_drawn,
            fewest_fitting,
            current_gpus: current,
            veiled,
        }),
    );
}
