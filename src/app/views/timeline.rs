//! The step timeline: allocated bytes over the ops, by category, with a scrubber.

use egui::{Color32, Ui};
use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints, VLine};

use super::drawn::{Drawn, TimelineDrawn, record};
use super::{Source, category_color, category_name, chart_height, describe_chart, mib, size, stacked_legend, swatch};
use crate::i18n::Catalog;
use crate::memory::StepMemory;
use crate::plan::{Category, Lifetime, Plan};

/// The step timeline: allocated bytes over the ops, stacked by category, the peak marked; the
/// scrubber picks an op, whose label and live tensors are listed.
pub fn timeline(ui: &mut Ui, t: &Catalog, plan: &Plan, memory: &StepMemory, source: Source, scrub: &mut usize) {
    let n = memory.timeline.len();
    if n == 0 {
        ui.label(t.text("tl-none"));
        return;
    }
    let peak = memory.peak_index;
    // A chapter's open question veils the step's figures: no heights, no peak, no live tensors.
    let veiled = super::veil(ui.ctx()).step;
    let hide = |figure: String| super::veil::or_hidden(t, veiled, || figure);
    let peak_op = hide(op_label(t, plan, memory.timeline.get(peak).and_then(|p| p.op)));
    let summary = t.format(
        "tl-summary",
        &[
            ("source", source.word(t).into()),
            ("ops", plan.ops.len().to_string().into()),
            ("peak", hide(size(t, memory.peak_allocated_bytes())).into()),
            ("op", peak_op.as_str().into()),
        ],
    );
    ui.label(&summary);
    // The hover labels, built once and shared by every category's chart.
    let labels: std::rc::Rc<Vec<String>> =
        std::rc::Rc::new(memory.timeline.iter().map(|p| op_label(t, plan, p.op)).collect());
    let mut charts: Vec<BarChart> = Vec::new();
    let mut items = Vec::new();
    for c in Category::ALL {
        if memory.timeline.iter().all(|p| p.allocated.get(c) == 0) {
            continue;
        }
        let bars = memory
            .timeline
            .iter()
            .enumerate()
            .map(|(i, p)| Bar::new(i as f64, mib(p.allocated.get(c))).width(1.0).fill(category_color(c)))
            .collect();
        let labels = labels.clone();
        let name = category_name(t, c);
        items.push((name.clone(), category_color(c)));
        let mut chart = BarChart::new(name.clone(), bars).color(category_color(c)).element_formatter(Box::new(
            move |bar: &Bar, _: &BarChart| {
                let i = bar.argument as usize;
                format!("{}\n{name}: {:.2} MiB", labels.get(i).map_or("", String::as_str), bar.value)
            },
        ));
        let below: Vec<&BarChart> = charts.iter().collect();
        if !below.is_empty() {
            chart = chart.stack_on(&below);
        }
        charts.push(chart);
    }
    // The collectives of data parallelism, each a mark where it ran.
    let collectives: Vec<usize> = memory
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, p)| p.op.and_then(|i| plan.ops.get(i)).is_some_and(|n| n.op.is_collective()))
        .map(|(i, _)| i)
        .collect();
    // Offload's copies between the GPU and the host, each a dashed mark.
    let transfers: Vec<usize> = memory
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, p)| p.op.and_then(|i| plan.ops.get(i)).is_some_and(|n| n.op.is_transfer()))
        .map(|(i, _)| i)
        .collect();
    let bus = category_color(Category::Gradients);
    let comm = category_color(Category::Communication);
    let reserved: PlotPoints =
        memory.timeline.iter().enumerate().map(|(i, p)| [i as f64, mib(p.reserved_bytes)]).collect();
    *scrub = (*scrub).min(n - 1);
    let at = *scrub;
    let stacked = items.len();
    if !collectives.is_empty() {
        items.push((t.text("tl-collectives"), comm));
    }
    if !transfers.is_empty() {
        items.push((t.text("tl-transfers"), bus));
    }
    items.extend([
        (t.text("tl-reserved"), Color32::GRAY),
        (t.text("tl-peak"), Color32::RED),
        (t.text("tl-scrubber"), ui.visuals().strong_text_color()),
    ]);
    stacked_legend(ui, t, &items, stacked);
    // The scrubber in the text colour, so that it shows on a light theme too.
    let scrubber = ui.visuals().strong_text_color();
    let mut plot = Plot::new("timeline");
    if super::fit_requested(ui) {
        plot = plot.reset();
    }
    let response = if veiled {
        super::veil::hidden_chart(ui, t, chart_height(ui))
    } else {
        plot.height(chart_height(ui))
            .x_axis_label(t.text("tl-axis-op"))
            .y_axis_label("MiB")
            .include_y(0.0)
            .allow_scroll(false)
            .show(ui, |p| {
                for chart in charts {
                    p.bar_chart(chart);
                }
                p.line(Line::new(t.text("tl-reserved"), reserved).color(Color32::GRAY));
                for &i in &collectives {
                    p.vline(VLine::new(t.text("tl-collectives"), i as f64).color(comm.gamma_multiply(0.6)));
                }
                for &i in &transfers {
                    let line = VLine::new(t.text("tl-transfers"), i as f64).color(bus);
                    p.vline(line.style(egui_plot::LineStyle::dashed_loose()));
                }
                p.vline(VLine::new(t.text("tl-peak"), peak as f64).color(Color32::RED));
                p.vline(VLine::new(t.text("tl-scrubber"), at as f64).color(scrubber));
            })
            .response
    };
    ui.add(egui::Slider::new(scrub, 0..=n - 1).text(t.text("tl-op")));
    let point = &memory.timeline[at];
    // The chart's description: the summary above it and the scrubber's figures below it.
    let at_text = t.format(
        "tl-at",
        &[
            ("op", op_label(t, plan, point.op).into()),
            ("allocated", hide(size(t, point.allocated_bytes)).into()),
            ("reserved", hide(size(t, point.reserved_bytes)).into()),
        ],
    );
    if !veiled {
        describe_chart(&response, &format!("{summary} {at_text}"));
    }
    record(
        ui,
        Drawn::Timeline(TimelineDrawn {
            source,
            points: n,
            peak_allocated_bytes: if veiled { 0 } else { memory.peak_allocated_bytes() },
            peak_op,
            scrub_op: op_label(t, plan, point.op),
            scrub_allocated_bytes: if veiled { 0 } else { point.allocated_bytes },
            scrub_reserved_bytes: if veiled { 0 } else { point.reserved_bytes },
            summary,
            collectives: collectives.clone(),
            transfers: transfers.clone(),
            veiled,
        }),
    );
    ui.label(&at_text);
    if let Some(text) = point.op.and_then(|i| collective_text(t, plan, i)).filter(|_| !veiled) {
        ui.label(text);
    }
    if let Some(text) = point.op.and_then(|i| transfer_text(t, plan, i)).filter(|_| !veiled) {
        ui.label(text);
    }
    if veiled {
        super::veil::note(ui, t);
        return;
    }
    let live = live_tensors(plan, point.op);
    let heading = t.format("tl-alive", &[("count", live.len().to_string().into())]);
    egui::CollapsingHeader::new(heading).id_salt("live").show(ui, |ui| {
        egui::ScrollArea::vertical().max_height(160.0).show(ui, |ui| {
            for (name, c, bytes) in live {
                ui.horizontal(|ui| {
                    swatch(ui, category_color(c));
                    ui.label(format!("{name} — {} ({})", size(t, bytes), category_name(t, c)));
                });
            }
        });
    });
}

/// What collective op `i` moved through its buffer, or None when it is not a collective.
fn collective_text(t: &Catalog, plan: &Plan, i: usize) -> Option<String> {
    use crate::plan::Op;
    let node = plan.ops.get(i)?;
    // The op's own name (`reduce_scatter`), as every op label writes it, in both languages.
    let buffer = match &node.op {
        Op::AllReduce(a) => a.bucket,
        Op::ReduceScatter(r) => r.bucket,
        Op::AllGather(g) => g.full,
        _ => return None,
    };
    let kind = node.op.name();
    let info = plan.tensor(buffer.tensor);
    let bytes = info.dtype.bytes_for(buffer.len);
    Some(t.format(
        "tl-collective",
        &[
            ("kind", kind.into()),
            ("what", node.label.as_str().into()),
            ("bytes", size(t, bytes).into()),
            ("buffer", info.name.as_str().into()),
        ],
    ))
}

/// What offload's copy op `i` moved over the bus, or None when it is not a copy.
fn transfer_text(t: &Catalog, plan: &Plan, i: usize) -> Option<String> {
    use crate::plan::Op;
    let node = plan.ops.get(i)?;
    let device_side = match &node.op {
        Op::CopyToHost(c) => c.src,
        Op::CopyToDevice(c) => c.dst,
        _ => return None,
    };
    let bytes = plan.tensor(device_side.tensor).dtype.bytes_for(device_side.len);
    Some(t.format(
        "tl-transfer",
        &[("kind", node.op.name().into()), ("what", node.label.as_str().into()), ("bytes", size(t, bytes).into())],
    ))
}

/// "h.0.attn (attention)" for timeline point `op` (op names stay as the plan writes them).
pub fn op_label(t: &Catalog, plan: &Plan, op: Option<usize>) -> String {
    op.and_then(|i| plan.op_label(i)).unwrap_or_else(|| t.text("tl-start"))
}

/// The tensors the plan has alive while op `op` runs (all persistent and step tensors before the
/// first op), largest first.
pub fn live_tensors(plan: &Plan, op: Option<usize>) -> Vec<(String, Category, u64)> {
    let mut out: Vec<(String, Category, u64)> = plan
        .lifetimes()
        .iter()
        .zip(&plan.tensors)
        .filter(|(l, _)| match (l, op) {
            (Lifetime::Persistent | Lifetime::Step, _) => true,
            (Lifetime::Ops { first, last }, Some(i)) => *first <= i && i <= *last,
            (Lifetime::Ops { .. }, None) => false,
            // Host memory is not the device's.
            (Lifetime::Host, _) => false,
        })
        .map(|(_, t)| (t.name.clone(), t.category, t.size_bytes()))
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.2));
    out
}
