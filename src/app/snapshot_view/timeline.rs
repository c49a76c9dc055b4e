//! The snapshot's memory timeline at any size: a min/max pyramid over the trace (level k holds
//! the smallest and largest value of each run of 2^k events), so a frame draws one vertical
//! stroke per pixel column — its events' smallest and largest — whatever the zoom: a few
//! thousand points for 450,000 events, and no spike is ever lost between columns. Clicking the
//! chart or moving the slider scrubs to an event.

use egui::{Color32, Ui};
use egui_plot::{Line, Plot, PlotPoints, VLine};

use crate::app::views;
use crate::i18n::Catalog;
use crate::memory::snapshot::replay;

/// Min and max of runs of 2^k values, for k = 0, 1, 2, …
#[derive(Clone, Debug, Default)]
pub struct Envelope {
    /// `levels[0]` is the values themselves.
    levels: Vec<Vec<(i64, i64)>>,
}

impl Envelope {
    pub fn new(values: impl Iterator<Item = i64>) -> Envelope {
        let mut levels = vec![values.map(|v| (v, v)).collect::<Vec<_>>()];
        while let Some(last) = levels.last().filter(|l| l.len() > 1) {
            let next =
                last.chunks(2).map(|c| c.iter().fold((i64::MAX, i64::MIN), |(a, b), &(x, y)| (a.min(x), b.max(y))));
            let next: Vec<(i64, i64)> = next.collect();
            levels.push(next);
        }
        Envelope { levels }
    }
    pub fn len(&self) -> usize {
        self.levels.first().map_or(0, Vec::len)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The smallest and largest value over events `a..b` (whole runs of the level that fits,
    /// so a range's ends may take in a few neighbours: nothing is ever left out).
    pub fn range(&self, a: usize, b: usize) -> Option<(i64, i64)> {
        let n = self.len();
        let (a, b) = (a.min(n), b.min(n));
        if a >= b {
            return None;
        }
        // The level whose runs are at most half the span: at most three runs per range.
        let span = b - a;
        let k = (usize::BITS - 1 - span.leading_zeros()).saturating_sub(1) as usize;
        let level = self.levels.get(k.min(self.levels.len() - 1))?;
        let k = k.min(self.levels.len() - 1);
        let (first, last) = (a >> k, (b - 1) >> k);
        level
            .get(first..=last.min(level.len() - 1))
            .map(|runs| runs.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &(x, y)| (lo.min(x), hi.max(y))))
    }
    /// A line over events `x0..x1` in `columns` columns: each column's smallest then largest
    /// value, in MiB (a zigzag that fills the band between them).
    pub fn columns(&self, x0: f64, x1: f64, columns: usize) -> Vec<[f64; 2]> {
        let n = self.len();
        if n == 0 || columns == 0 {
            return Vec::new();
        }
        let lo = x0.floor().clamp(0.0, n as f64) as usize;
        let hi = (x1.ceil() + 1.0).clamp(0.0, n as f64) as usize;
        let mib = |v: i64| v as f64 / (1u64 << 20) as f64;
        let mut out = Vec::with_capacity(2 * columns + 2);
        if hi <= lo {
            return out;
        }
        let per = ((hi - lo) as f64 / columns as f64).max(1.0);
        let mut c = 0usize;
        loop {
            let a = lo + (c as f64 * per) as usize;
            if a >= hi {
                break;
            }
            let b = (lo + ((c + 1) as f64 * per) as usize).clamp(a + 1, hi);
            if let Some((min, max)) = self.range(a, b) {
                let x = (a + b - 1) as f64 / 2.0;
                out.push([x, mib(min)]);
                if max != min {
                    out.push([x, mib(max)]);
                }
            }
            c += 1;
        }
        out
    }
}

/// Allocated and reserved over the trace, with the peak, the OOM events and the scrubbed event;
/// a click on the chart or the slider moves `selected`.
pub fn chart(ui: &mut Ui, t: &Catalog, r: &replay::Replay, lines: &(Envelope, Envelope), selected: &mut Option<usize>) {
    if r.timeline.is_empty() {
        ui.label(t.text("snap-no-trace"));
        return;
    }
    let blue = Color32::from_rgb(90, 160, 230);
    let orange = Color32::from_rgb(240, 160, 60);
    views::legend(
        ui,
        &[
            (t.text("snap-allocated"), blue),
            (t.text("tl-reserved"), Color32::GRAY),
            (t.text("tl-peak"), Color32::RED),
            (t.text("snap-oom-line"), orange),
        ],
    );
    let mut plot = Plot::new("snap_timeline");
    if views::fit_requested(ui) {
        plot = plot.reset();
    }
    let n = r.timeline.len();
    let strong = ui.visuals().strong_text_color();
    let drawn = plot
        .height(views::chart_height(ui).min(360.0))
        .x_axis_label(t.text("snap-axis-event"))
        .y_axis_label("MiB")
        .include_y(0.0)
        .include_x(0.0)
        .include_x(n as f64)
        .allow_scroll(false)
        .show(ui, |p| {
            // One stroke per pixel column of what is in view.
            let bounds = p.plot_bounds();
            let columns = p.transform().frame().width().max(1.0) as usize;
            let (x0, x1) = (bounds.min()[0], bounds.max()[0]);
            p.line(Line::new(t.text("snap-allocated"), PlotPoints::from(lines.0.columns(x0, x1, columns))).color(blue));
            p.line(
                Line::new(t.text("tl-reserved"), PlotPoints::from(lines.1.columns(x0, x1, columns)))
                    .color(Color32::GRAY),
            );
            if let Some(i) = r.peak_index {
                p.vline(VLine::new(t.text("tl-peak"), i as f64).color(Color32::RED));
            }
            for o in &r.ooms {
                p.vline(VLine::new(t.text("snap-oom-line"), o.index as f64).color(orange));
            }
            if let Some(i) = selected {
                p.vline(VLine::new(t.text("snap-scrub"), *i as f64).color(strong));
            }
            if p.response().clicked()
                && let Some(at) = p.pointer_coordinate()
            {
                *selected = Some((at.x.round().max(0.0) as usize).min(n - 1));
            }
        });
    views::mark(ui, "snapshot-timeline", drawn.response.rect);
    let description = t.format(
        "chart-snapshot",
        &[
            ("events", n.to_string().into()),
            ("peak", super::size(t, super::bytes(r.peak_allocated)).into()),
            ("at", r.peak_index.map_or(0, |i| i + 1).to_string().into()),
            ("reserved", super::size(t, super::bytes(r.peak_reserved)).into()),
            ("ooms", r.ooms.len().to_string().into()),
        ],
    );
    // The scrubbed event too: what a screen reader hears is what the marked line shows.
    let description = match selected.and_then(|i| r.timeline.get(i).map(|p| (i, p.allocated))) {
        Some((i, allocated)) => {
            let scrub = t.format(
                "chart-snapshot-scrub",
                &[("index", i.to_string().into()), ("bytes", super::size(t, super::bytes(allocated)).into())],
            );
            format!("{description} {scrub}")
        }
        None => description,
    };
    views::describe_chart(&drawn.response, &description);
    // The slider: the keyboard's way to scrub.
    let mut at = selected.or(r.peak_index).unwrap_or(0).min(n - 1);
    let slider = ui.add(egui::Slider::new(&mut at, 0..=n - 1).text(t.text("snap-scrub")));
    if slider.changed() {
        *selected = Some(at);
    }
}
