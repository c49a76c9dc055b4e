//! The snapshot's memory timeline at any size: a min/max pyramid over the trace (level k holds
//! the smallest and largest value of each run of 2^k events), so a frame draws one vertical
//! stroke per pixel column — its events' smallest and largest — whatever the zoom: a few
//! thousand points for 450,000 events, and no spike is ever lost between columns. Clicking the
//! chart or moving the slider scrubs to an event. The run's phases are bands behind the lines
//! (forward, backward, optimizer step, any `record_function` range), each named above the chart
//! too; after a replay through oomlab's allocator, its reserved bytes are a third line.

use egui::{Color32, Ui};
use egui_plot::{Line, Plot, PlotPoints, VLine};

use crate::app::views;
use crate::i18n::Catalog;
use crate::memory::snapshot::phase::{Phase, PhaseKind};
use crate::memory::snapshot::replay;

/// At most this many phase bands are drawn (a compiled run annotates thousands of ranges).
const BANDS: usize = 200;

/// A phase's colour (Okabe and Ito's: told apart under every common colour-vision deficiency),
/// drawn faint behind the lines; its name is written beside it too.
pub fn phase_color(k: PhaseKind) -> Color32 {
    match k {
        PhaseKind::Forward => Color32::from_rgb(0, 114, 178),
        PhaseKind::Backward => Color32::from_rgb(230, 159, 0),
        PhaseKind::Optimizer => Color32::from_rgb(0, 158, 115),
        PhaseKind::ZeroGrad => Color32::from_rgb(204, 121, 167),
        PhaseKind::Named => Color32::from_rgb(150, 150, 150),
    }
}

/// A phase's name in the reader's language (an annotation's own name as written).
pub fn phase_words(t: &Catalog, p: &Phase) -> String {
    match p.kind {
        PhaseKind::Named => p.name.clone(),
        k => t.text(&format!("phase-{}", k.key())),
    }
}

/// The phases in words, for the legend and a screen reader: "forward: events 430–5119 (from the
/// stacks); …" (the first few, then how many more).
pub fn phases_text(t: &Catalog, phases: &[Phase]) -> String {
    const SAID: usize = 8;
    let mut parts: Vec<String> = phases
        .iter()
        .take(SAID)
        .map(|p| {
            let source = match p.source {
                crate::memory::snapshot::phase::PhaseSource::Annotation => "snap-phase-annotation",
                crate::memory::snapshot::phase::PhaseSource::Stacks => "snap-phase-stacks",
            };
            t.format(
                "snap-phase",
                &[
                    ("phase", phase_words(t, p).into()),
                    ("first", p.first.to_string().into()),
                    ("last", p.last.to_string().into()),
                    ("source", t.text(source).into()),
                ],
            )
        })
        .collect();
    if phases.len() > SAID {
        parts.push(t.format("snap-phase-more", &[("count", (phases.len() - SAID).to_string().into())]));
    }
    let separator = if t.lang() == crate::i18n::Lang::Zh { "；" } else { "; " };
    parts.join(separator)
}

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

/// Allocated and reserved over the trace, with the run's phases, the peak, the OOM events and
/// the scrubbed event, and the replay's reserved bytes if one ran; a click on the chart or the
/// slider moves `selected`.
pub fn chart(
    ui: &mut Ui,
    t: &Catalog,
    r: &replay::Replay,
    lines: &(Envelope, Envelope),
    replayed: Option<&Envelope>,
    selected: &mut Option<usize>,
) {
    if r.timeline.is_empty() {
        ui.label(t.text("snap-no-trace"));
        return;
    }
    let blue = Color32::from_rgb(90, 160, 230);
    let orange = Color32::from_rgb(240, 160, 60);
    let purple = Color32::from_rgb(170, 68, 153);
    let mut legend = vec![
        (t.text("snap-allocated"), blue),
        (t.text("tl-reserved"), Color32::GRAY),
        (t.text("tl-peak"), Color32::RED),
        (t.text("snap-oom-line"), orange),
    ];
    if replayed.is_some() {
        legend.push((t.text("snap-replayed-line"), purple));
    }
    views::legend(ui, &legend);
    // The phases: a swatch and a name for each kind the bands use, then each band in words.
    if !r.phases.is_empty() {
        const KINDS: [PhaseKind; 5] =
            [PhaseKind::Forward, PhaseKind::Backward, PhaseKind::Optimizer, PhaseKind::ZeroGrad, PhaseKind::Named];
        let items: Vec<(String, Color32)> = KINDS
            .iter()
            .filter(|&&k| r.phases.iter().any(|p| p.kind == k))
            .map(|&k| {
                let name = match k {
                    PhaseKind::Named => t.text("snap-phase-named"),
                    k => t.text(&format!("phase-{}", k.key())),
                };
                (name, phase_color(k))
            })
            .collect();
        ui.horizontal_wrapped(|ui| {
            ui.label(egui::RichText::new(t.text("snap-phases")).small().strong());
            for (name, color) in &items {
                views::swatch(ui, *color);
                ui.label(egui::RichText::new(name).small());
            }
        });
        ui.label(egui::RichText::new(phases_text(t, &r.phases)).small().weak());
    }
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
            // The replay's reserved bytes over the run's (dashed: where they agree, both show).
            if let Some(rep) = replayed {
                p.line(
                    Line::new(t.text("snap-replayed-line"), PlotPoints::from(rep.columns(x0, x1, columns)))
                        .color(purple)
                        .width(2.0)
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
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
    // The phases as faint bands over the plot's frame, each named at its top where it is wide
    // enough (painted here rather than as plot items: one thing less in the web module).
    let frame = *drawn.transform.frame();
    let painter = ui.painter_at(frame);
    for ph in r.phases.iter().take(BANDS) {
        let x0 = drawn.transform.position_from_point_x(ph.first as f64).max(frame.left());
        let x1 = drawn.transform.position_from_point_x((ph.last + 1) as f64).min(frame.right());
        if x1 <= x0 {
            continue;
        }
        let c = phase_color(ph.kind);
        let band = egui::Rect::from_x_y_ranges(x0..=x1, frame.y_range());
        painter.rect_filled(band, 0.0, Color32::from_rgba_unmultiplied(c.r(), c.g(), c.b(), 36));
        let words = phase_words(t, ph);
        // (About 7 points a character at this size: a name wider than its band is left out.)
        if x1 - x0 > 7.0 * words.chars().count() as f32 + 8.0 {
            painter.text(
                egui::pos2((x0 + x1) / 2.0, frame.top() + 4.0),
                egui::Align2::CENTER_TOP,
                words,
                egui::FontId::proportional(12.0),
                ui.visuals().text_color(),
            );
        }
    }
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
    let description = if r.phases.is_empty() {
        description
    } else {
        format!("{description} {}", t.format("chart-snapshot-phases", &[("phases", phases_text(t, &r.phases).into())]))
    };
    let description = match replayed.and_then(|e| e.range(0, e.len())) {
        Some((_, peak)) => format!(
            "{description} {}",
            t.format("chart-snapshot-replayed", &[("peak", super::size(t, super::bytes(peak)).into())])
        ),
        None => description,
    };
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
