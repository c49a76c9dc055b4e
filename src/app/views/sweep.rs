//! Memory vs batch size: the toy's sweep and the real-model view's chart.

use egui::{Color32, Ui};
use egui_plot::{Bar, BarChart, HLine, Line, Plot, PlotPoints, Points, VLine};

use super::drawn::{Drawn, SeriesDrawn, SweepDrawn, record};
use super::{category_color, category_name, chart_height, describe_chart, size, stacked_legend};
use crate::i18n::Catalog;
use crate::memory::StepMemory;
use crate::plan::Category;

pub use crate::memory::sweep::SweepSeries;

/// (batch, bytes) at each batch of a chart.
pub type BatchPoints = Vec<(usize, u64)>;

/// A memory-vs-batch chart, shared by the toy's sweep and the real-model view: one series
/// stacked by category (bars on a log₂ batch axis), every series' peak as a line with a cross at
/// its first out-of-memory batch, the capacity line and the current batch.
pub struct BatchChart<'a> {
    pub id: &'a str,
    /// Bytes per unit of the y axis, and the unit's name ("MiB", "GiB").
    pub unit: (f64, &'a str),
    /// Stacked from the bottom: (category, colour, (batch, bytes) per batch).
    pub stacks: Vec<(String, Color32, BatchPoints)>,
    /// (name, (batch, peak bytes) where it fits, first out-of-memory batch).
    pub lines: Vec<(String, BatchPoints, Option<usize>)>,
    /// (label, bytes) of the horizontal capacity line.
    pub capacity: (String, u64),
    pub current_batch: usize,
    /// A chapter's open question veils its figures: the legend stays, the chart does not draw.
    pub veiled: bool,
}

/// A batch chart's description, from what it draws: its first line's peak at the current
/// batch, the largest stack's share of it, and where the capacity line is reached.
fn batch_description(t: &Catalog, chart: &BatchChart<'_>) -> String {
    let Some((name, points, first_oom)) = chart.lines.first() else { return String::new() };
    let batch = chart.current_batch;
    let (capacity_name, capacity) = &chart.capacity;
    let mut args = vec![
        ("name", name.as_str().into()),
        ("batch", batch.to_string().into()),
        ("capacity_name", capacity_name.as_str().into()),
        ("capacity", size(t, *capacity).into()),
        ("oom", first_oom.map_or("—".to_string(), |b| b.to_string()).into()),
    ];
    let Some(&(_, peak)) = points.iter().find(|(b, _)| *b == batch) else {
        // Past the first OOM it does not fit; otherwise the chart has no point at this batch
        // (the real models' micro-batches are powers of two), so the description has no peak.
        let past = first_oom.is_some_and(|o| batch >= o);
        return t.format(if past { "chart-batch-oom" } else { "chart-batch-range" }, &args);
    };
    let largest = chart
        .stacks
        .iter()
        .filter_map(|(name, _, points)| points.iter().find(|(b, _)| *b == batch).map(|&(_, v)| (name, v)))
        .max_by_key(|&(_, v)| v);
    let share = largest.map_or(0.0, |(_, v)| 100.0 * v as f64 / peak.max(1) as f64);
    args.extend([
        ("peak", size(t, peak).into()),
        ("largest", largest.map_or(String::new(), |(n, _)| n.clone()).into()),
        ("share", format!("{share:.0}").into()),
    ]);
    t.format(if first_oom.is_some() { "chart-batch" } else { "chart-batch-fits" }, &args)
}

/// Draws a batch chart; its description names it for a screen reader.
pub fn batch_chart(ui: &mut Ui, t: &Catalog, chart: BatchChart<'_>) {
    if chart.veiled {
        let names: Vec<(String, Color32)> = chart.stacks.iter().map(|(n, c, _)| (n.clone(), *c)).collect();
        stacked_legend(ui, t, &names, names.len());
        super::veil::hidden_chart(ui, t, chart_height(ui));
        return;
    }
    let description = batch_description(t, &chart);
    let (per_unit, unit) = chart.unit;
    let y = move |bytes: u64| bytes as f64 / per_unit;
    let x = |b: usize| (b as f64).log2();
    let mut charts: Vec<BarChart> = Vec::new();
    let mut items = Vec::new();
    for (name, color, points) in chart.stacks {
        let bars: Vec<Bar> = points.iter().map(|&(b, v)| Bar::new(x(b), y(v)).width(0.35).fill(color)).collect();
        if bars.iter().all(|b| b.value == 0.0) {
            continue;
        }
        items.push((name.clone(), color));
        let (label, unit) = (name.clone(), unit.to_string());
        let mut bc =
            BarChart::new(name, bars).color(color).element_formatter(Box::new(move |bar: &Bar, _: &BarChart| {
                format!("batch {:.0}\n{label}: {:.2} {unit}", bar.argument.exp2(), bar.value)
            }));
        let below: Vec<&BarChart> = charts.iter().collect();
        if !below.is_empty() {
            bc = bc.stack_on(&below);
        }
        charts.push(bc);
    }
    let stacked = items.len();
    // The first line in the text colour: white on a dark theme, black on a light one.
    let colors = [ui.visuals().strong_text_color(), Color32::from_rgb(255, 200, 0), Color32::from_rgb(0, 200, 255)];
    let (capacity_label, capacity) = chart.capacity;
    items.push((capacity_label.clone(), Color32::RED));
    items.push((t.text("sw-this-batch"), Color32::GRAY));
    for (k, (name, _, first_oom)) in chart.lines.iter().enumerate() {
        items.push((name.clone(), colors[k % colors.len()]));
        if let Some(b) = first_oom {
            let label = t.format("sw-oom-from", &[("name", name.as_str().into()), ("batch", b.to_string().into())]);
            items.push((format!("× {label}"), colors[k % colors.len()]));
        }
    }
    stacked_legend(ui, t, &items, stacked);
    let mut plot = Plot::new(chart.id);
    if super::fit_requested(ui) {
        plot = plot.reset();
    }
    let response = plot
        .height(chart_height(ui))
        .x_axis_label(t.text("sw-axis-batch"))
        .y_axis_label(t.format("sw-axis-peak", &[("unit", unit.into())]))
        .x_axis_formatter(|mark, _| format!("{:.0}", mark.value.exp2()))
        .include_y(0.0)
        .include_y(y(capacity) * 1.1)
        .allow_scroll(false)
        .show(ui, |p| {
            for bc in charts {
                p.bar_chart(bc);
            }
            // The budget and the first OOM stand out at every batch range: a thick line, big crosses.
            p.hline(HLine::new(capacity_label, y(capacity)).color(Color32::RED).width(2.0));
            p.vline(VLine::new(t.text("sw-this-batch"), x(chart.current_batch)).color(Color32::GRAY));
            for (k, (name, points, first_oom)) in chart.lines.iter().enumerate() {
                let pts: PlotPoints = points.iter().map(|&(b, v)| [x(b), y(v)]).collect();
                let color = colors[k % colors.len()];
                p.line(Line::new(name.clone(), pts).color(color).width(2.0));
                if let Some(b) = first_oom {
                    let label =
                        t.format("sw-oom-from", &[("name", name.as_str().into()), ("batch", b.to_string().into())]);
                    let pt = Points::new(label, vec![[x(*b), y(capacity)]])
                        .radius(8.0)
                        .color(color)
                        .shape(egui_plot::MarkerShape::Cross);
                    p.points(pt);
                }
            }
        })
        .response;
    describe_chart(&response, &description);
}

/// Memory vs batch size: the first series stacked by category, the others as lines of their
/// peak; the budget line; each series' largest fitting batch and first OOM. `names` names the
/// series in the reader's language (a series without one keeps its own name).
pub fn sweep_chart(
    ui: &mut Ui,
    t: &Catalog,
    series: &[SweepSeries],
    names: &[String],
    budget: u64,
    current_batch: usize,
) {
    let name = |i: usize| names.get(i).unwrap_or(&series[i].name).clone();
    let Some(main) = series.first() else {
        ui.label(t.text("sw-none"));
        return;
    };
    fn fitting(s: &SweepSeries) -> Vec<(usize, &StepMemory)> {
        s.points.iter().filter_map(|(b, m)| m.as_ref().ok().map(|m| (*b, m))).collect()
    }
    // Bars at the grid's batch sizes (a bar at each of ~1000 would be a wall); lines at every one.
    let on_grid = |b: &usize| crate::app::SWEEP_BATCHES.contains(b);
    let stacks = Category::ALL
        .iter()
        .map(|&c| {
            let points = fitting(main)
                .into_iter()
                .filter(|(b, _)| on_grid(b))
                .map(|(b, m)| (b, m.peak_allocated.get(c)))
                .collect();
            (category_name(t, c), category_color(c), points)
        })
        .collect();
    let lines: Vec<(String, BatchPoints, Option<usize>)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let points = fitting(s).into_iter().map(|(b, m)| (b, m.peak_allocated_bytes())).collect();
            (name(i), points, s.first_oom())
        })
        .collect();
    let veiled = super::veil(ui.ctx()).step;
    let mut figures = SweepDrawn {
        series: lines
            .iter()
            .zip(series)
            .map(|((name, points, first_oom), s)| SeriesDrawn {
                name: name.clone(),
                points: points.clone(),
                largest_fitting: s.largest_fitting(),
                first_oom: *first_oom,
            })
            .collect(),
        budget_bytes: budget,
        current_batch,
        veiled,
    };
    if veiled {
        // The series keep their names; what each reaches is the question's.
        for s in &mut figures.series {
            (s.points, s.largest_fitting, s.first_oom) = (Vec::new(), None, None);
        }
    }
    batch_chart(
        ui,
        t,
        BatchChart {
            id: "sweep",
            unit: ((1u64 << 20) as f64, "MiB"),
            stacks,
            lines,
            capacity: (t.text("sw-budget"), budget),
            current_batch,
            veiled,
        },
    );
    record(ui, Drawn::Sweep(figures));
    let hide = |figure: String| super::veil::or_hidden(t, veiled, || figure);
    for (i, s) in series.iter().enumerate() {
        let fits = s.largest_fitting().map_or(t.text("sw-fits-none"), |b| b.to_string());
        let mut args = vec![("name", name(i).into()), ("fits", hide(fits).into())];
        let key = match s.first_oom() {
            _ if veiled => {
                args.push(("oom", super::veil::hidden(t).into()));
                "sw-summary"
            }
            Some(b) => {
                args.push(("oom", b.to_string().into()));
                "sw-summary"
            }
            None => "sw-summary-all-fit",
        };
        ui.label(t.format(key, &args));
    }
}
