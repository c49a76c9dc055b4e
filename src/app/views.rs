//! The views. Each draws data it is given — the plan, the allocator's record of a step, a sweep
//! — and computes no memory itself, so tests render them from fixed data.

use egui::{Color32, RichText, Ui};
use egui_plot::{Bar, BarChart, HLine, Legend, Line, Plot, PlotPoints, Points, VLine};

use crate::memory::device::{DeviceFigures, DeviceMemory};
use crate::memory::map::{SegmentState, segments_at};
use crate::memory::{StepMemory, StepOom};
use crate::plan::{Category, Lifetime, Plan};
use crate::units::format_bytes;

/// A colour per category, the same in every view.
pub fn category_color(c: Category) -> Color32 {
    match c {
        Category::Parameters => Color32::from_rgb(76, 114, 176),
        Category::Gradients => Color32::from_rgb(221, 132, 82),
        Category::OptimizerState => Color32::from_rgb(85, 168, 104),
        Category::MasterWeights => Color32::from_rgb(129, 114, 179),
        Category::Activations => Color32::from_rgb(196, 78, 82),
        Category::Temporaries => Color32::from_rgb(218, 139, 195),
        Category::Input => Color32::from_rgb(147, 120, 96),
        Category::Logits => Color32::from_rgb(204, 185, 116),
        Category::Workspace => Color32::from_rgb(140, 140, 140),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// A small square of a category's colour.
pub fn swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
    ui.painter().rect_filled(rect, 2.0, color);
}

/// Where a number comes from, said next to it: the plan's prediction, oomlab's allocator as a
/// real step ran, or the driver layer's own report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Predicted,
    Allocator,
    Device,
}

impl Source {
    pub fn word(self) -> &'static str {
        match self {
            Source::Predicted => "predicted (plan)",
            Source::Allocator => "allocator (live)",
            Source::Device => "device (driver report)",
        }
    }
}

/// A short explanation under a view, collapsed by default.
pub fn explain(ui: &mut Ui, id: &str, text: &str) {
    egui::CollapsingHeader::new(RichText::new("Why?").italics()).id_salt(id).show(ui, |ui| {
        ui.label(text);
    });
}

/// The step timeline: allocated bytes over the ops, stacked by category, the peak marked; the
/// scrubber picks an op, whose label and live tensors are listed.
pub fn timeline(ui: &mut Ui, plan: &Plan, memory: &StepMemory, source: Source, scrub: &mut usize) {
    let n = memory.timeline.len();
    if n == 0 {
        ui.label("No step recorded yet.");
        return;
    }
    let peak = memory.peak_index;
    ui.label(format!(
        "Allocated memory over one step, {}: {} ops. Peak {} at {}.",
        source.word(),
        plan.ops.len(),
        format_bytes(memory.peak_allocated_bytes()),
        op_label(plan, memory.timeline[peak].op)
    ));
    // The hover labels, built once and shared by every category's chart.
    let labels: std::rc::Rc<Vec<String>> =
        std::rc::Rc::new(memory.timeline.iter().map(|p| op_label(plan, p.op)).collect());
    let mut charts: Vec<BarChart> = Vec::new();
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
        let name = c.name();
        let mut chart = BarChart::new(name, bars).color(category_color(c)).element_formatter(Box::new(
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
    let reserved: PlotPoints =
        memory.timeline.iter().enumerate().map(|(i, p)| [i as f64, mib(p.reserved_bytes)]).collect();
    *scrub = (*scrub).min(n - 1);
    let at = *scrub;
    Plot::new("timeline")
        .height(260.0)
        .legend(Legend::default())
        .x_axis_label("op of the step")
        .y_axis_label("MiB")
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| {
            for chart in charts {
                p.bar_chart(chart);
            }
            p.line(Line::new("reserved", reserved).color(Color32::GRAY));
            p.vline(VLine::new("peak", peak as f64).color(Color32::RED));
            p.vline(VLine::new("scrubber", at as f64).color(Color32::WHITE));
        });
    ui.add(egui::Slider::new(scrub, 0..=n - 1).text("op"));
    let point = &memory.timeline[at];
    ui.label(format!(
        "At {}: {} allocated, {} reserved.",
        op_label(plan, point.op),
        format_bytes(point.allocated_bytes),
        format_bytes(point.reserved_bytes)
    ));
    let live = live_tensors(plan, point.op);
    egui::CollapsingHeader::new(format!("{} tensors alive here", live.len())).id_salt("live").show(ui, |ui| {
        egui::ScrollArea::vertical().max_height(160.0).show(ui, |ui| {
            for (name, c, bytes) in live {
                ui.horizontal(|ui| {
                    swatch(ui, category_color(c));
                    ui.label(format!("{name} — {} ({})", format_bytes(bytes), c.name()));
                });
            }
        });
    });
}

/// "h.0.attn (attention)" for timeline point `op`.
pub fn op_label(plan: &Plan, op: Option<usize>) -> String {
    match op.and_then(|i| plan.ops.get(i)) {
        Some(node) => format!("{} ({})", node.label, node.op.name()),
        None => "the start of the step".into(),
    }
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
        })
        .map(|(_, t)| (t.name.clone(), t.category, t.size_bytes()))
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.2));
    out
}

/// One configuration's memory at each batch size of a sweep.
#[derive(Clone, Debug)]
pub struct SweepSeries {
    pub name: String,
    /// (effective batch, peak memory or the OOM message).
    pub points: Vec<(usize, Result<StepMemory, String>)>,
}

impl SweepSeries {
    pub fn largest_fitting(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_ok()).map(|(b, _)| *b).max()
    }
    pub fn first_oom(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_err()).map(|(b, _)| *b).min()
    }
}

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
    pub stacks: Vec<(&'a str, Color32, BatchPoints)>,
    /// (name, (batch, peak bytes) where it fits, first out-of-memory batch).
    pub lines: Vec<(String, BatchPoints, Option<usize>)>,
    /// (label, bytes) of the horizontal capacity line.
    pub capacity: (&'a str, u64),
    pub current_batch: usize,
}

pub fn batch_chart(ui: &mut Ui, chart: BatchChart<'_>) {
    let (per_unit, unit) = chart.unit;
    let y = move |bytes: u64| bytes as f64 / per_unit;
    let x = |b: usize| (b as f64).log2();
    let mut charts: Vec<BarChart> = Vec::new();
    for (name, color, points) in chart.stacks {
        let bars: Vec<Bar> = points.iter().map(|&(b, v)| Bar::new(x(b), y(v)).width(0.35).fill(color)).collect();
        if bars.iter().all(|b| b.value == 0.0) {
            continue;
        }
        let (label, unit) = (name.to_string(), unit.to_string());
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
    let colors = [Color32::WHITE, Color32::from_rgb(255, 200, 0), Color32::from_rgb(0, 200, 255)];
    let (capacity_label, capacity) = chart.capacity;
    Plot::new(chart.id)
        .height(260.0)
        .legend(Legend::default())
        .x_axis_label("batch size (log₂)")
        .y_axis_label(format!("peak {unit}"))
        .x_axis_formatter(|mark, _| format!("{:.0}", mark.value.exp2()))
        .include_y(0.0)
        .include_y(y(capacity) * 1.1)
        .allow_scroll(false)
        .show(ui, |p| {
            for bc in charts {
                p.bar_chart(bc);
            }
            p.hline(HLine::new(capacity_label, y(capacity)).color(Color32::RED));
            p.vline(VLine::new("this batch", x(chart.current_batch)).color(Color32::GRAY));
            for (k, (name, points, first_oom)) in chart.lines.iter().enumerate() {
                let pts: PlotPoints = points.iter().map(|&(b, v)| [x(b), y(v)]).collect();
                let color = colors[k % colors.len()];
                p.line(Line::new(name.clone(), pts).color(color).width(2.0));
                if let Some(b) = first_oom {
                    let pt = Points::new(format!("{name}: OOM from batch {b}"), vec![[x(*b), y(capacity)]])
                        .radius(6.0)
                        .color(color)
                        .shape(egui_plot::MarkerShape::Cross);
                    p.points(pt);
                }
            }
        });
}

/// Memory vs batch size: the first series stacked by category, the others as lines of their
/// peak; the budget line; each series' largest fitting batch and first OOM.
pub fn sweep_chart(ui: &mut Ui, series: &[SweepSeries], budget: u64, current_batch: usize) {
    let Some(main) = series.first() else {
        ui.label("No sweep.");
        return;
    };
    fn fitting(s: &SweepSeries) -> Vec<(usize, &StepMemory)> {
        s.points.iter().filter_map(|(b, m)| m.as_ref().ok().map(|m| (*b, m))).collect()
    }
    let stacks = Category::ALL
        .iter()
        .map(|&c| {
            let points = fitting(main).into_iter().map(|(b, m)| (b, m.peak_allocated.get(c))).collect();
            (c.name(), category_color(c), points)
        })
        .collect();
    let lines = series
        .iter()
        .map(|s| {
            let points = fitting(s).into_iter().map(|(b, m)| (b, m.peak_allocated_bytes())).collect();
            (s.name.clone(), points, s.first_oom())
        })
        .collect();
    batch_chart(
        ui,
        BatchChart {
            id: "sweep",
            unit: ((1u64 << 20) as f64, "MiB"),
            stacks,
            lines,
            capacity: ("budget", budget),
            current_batch,
        },
    );
    for s in series {
        ui.label(format!(
            "{}: largest batch that fits {}; out of memory from {}",
            s.name,
            s.largest_fitting().map_or("none".to_string(), |b| b.to_string()),
            s.first_oom().map_or("— (every batch fits)".to_string(), |b| format!("batch {b}"))
        ));
    }
}

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

/// Each segment as a bar of its blocks (allocated by category, free in dark grey), at op `op`;
/// under them, when the driver reported after a real step, its memory blocks with the buffers
/// inside them (oomlab's segments by label, everything else in grey).
pub fn allocator_map(ui: &mut Ui, plan: &Plan, memory: &StepMemory, op: Option<usize>, device: Option<&DeviceMemory>) {
    let segments = segments_at(&memory.events, op);
    let reserved: u64 = segments.iter().map(|s| s.size).sum();
    let allocated: u64 = segments.iter().map(SegmentState::allocated_bytes).sum();
    let largest_free = segments.iter().map(SegmentState::largest_free_block).max().unwrap_or(0);
    ui.label(format!(
        "At {}: {} segments, {} reserved, {} allocated, {} free inside segments (largest free block {}).",
        op_label(plan, op),
        segments.len(),
        format_bytes(reserved),
        format_bytes(allocated),
        format_bytes(reserved - allocated),
        format_bytes(largest_free)
    ));
    let widest = segments.iter().map(|s| s.size).max().unwrap_or(1).max(1);
    egui::ScrollArea::vertical().max_height(260.0).id_salt("segments").show(ui, |ui| {
        for s in &segments {
            let spans: Vec<Span> = s
                .blocks
                .iter()
                .map(|b| Span {
                    offset: b.offset,
                    size: b.size,
                    color: b.tensor.map(|t| category_color(plan.tensor(t).category)),
                    hover: match b.tensor {
                        Some(t) => format!("{} — {} block", plan.tensor(t).name, format_bytes(b.size)),
                        None => format!("free — {}", format_bytes(b.size)),
                    },
                })
                .collect();
            bar_of_spans(ui, s.size, widest, 18.0, Color32::from_gray(40), &spans);
        }
    });
    if let Some(d) = device {
        driver_blocks(ui, d);
    }
}

/// The driver's memory blocks after the last step (device figures), each a bar of the
/// allocations inside it: oomlab's segment buffers in blue with their labels, others in grey.
pub fn driver_blocks(ui: &mut Ui, d: &DeviceMemory) {
    let (blocks, block_bytes) = d.segment_blocks();
    ui.label(format!(
        "Under them, {}: {blocks} memory block(s) of {} hold the segment buffers ({} requested, {} reported).",
        Source::Device.word(),
        format_bytes(block_bytes),
        format_bytes(d.requested_bytes()),
        format_bytes(d.segment_bytes())
    ));
    let widest = d.blocks.iter().map(|b| b.size_bytes).max().unwrap_or(1).max(1);
    let ours = |name: &str| crate::memory::device::parse_segment_label(name).is_some();
    for block in d.blocks.iter().filter(|b| b.allocations.iter().any(|a| ours(&a.name))) {
        let spans: Vec<Span> = block
            .allocations
            .iter()
            .map(|a| Span {
                offset: a.offset_bytes,
                size: a.size_bytes,
                color: Some(if ours(&a.name) { Color32::from_rgb(76, 114, 176) } else { Color32::from_gray(110) }),
                hover: format!(
                    "{} — {} at {}",
                    if a.name.is_empty() { "(unnamed)" } else { &a.name },
                    format_bytes(a.size_bytes),
                    a.offset_bytes
                ),
            })
            .collect();
        bar_of_spans(ui, block.size_bytes, widest, 14.0, Color32::from_gray(30), &spans);
    }
}

/// A range of a bar: a block of a segment, or an allocation of a driver memory block.
struct Span {
    offset: u64,
    size: u64,
    /// None: drawn as the background (free).
    color: Option<Color32>,
    hover: String,
}

/// One labelled bar of `total` bytes (its width relative to `widest`), with `spans` drawn at
/// their offsets and named on hover.
fn bar_of_spans(ui: &mut Ui, total: u64, widest: u64, height: f32, background: Color32, spans: &[Span]) {
    ui.horizontal(|ui| {
        ui.label(RichText::new(format!("{:>9}", format_bytes(total))).monospace());
        let width = (ui.available_width() - 8.0).max(50.0) * (total as f32 / widest.max(1) as f32).max(0.05);
        let (rect, response) = ui.allocate_exact_size(egui::vec2(width, height), egui::Sense::hover());
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 0.0, background);
        let at = |x: u64| rect.left() + rect.width() * (x as f32 / total.max(1) as f32);
        let mut hovered = None;
        for s in spans {
            let (x0, x1) = (at(s.offset), at(s.offset + s.size));
            let r = egui::Rect::from_x_y_ranges(x0..=x1.max(x0 + 1.0), rect.y_range());
            if let Some(c) = s.color {
                painter.rect_filled(r.shrink(0.5), 0.0, c);
            }
            if response.hover_pos().is_some_and(|p| r.contains(p)) {
                hovered = Some(s);
            }
        }
        if let Some(s) = hovered {
            response.on_hover_text(&s.hover);
        }
    });
}

/// What the user can switch on to fit, from the seed's diagnostic workflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suggestion {
    Checkpointing,
    FusedAttention,
    Accumulation,
    MixedPrecision,
    SmallerBatch,
}

impl Suggestion {
    pub fn label(self) -> &'static str {
        match self {
            Suggestion::Checkpointing => "Checkpoint every block",
            Suggestion::FusedAttention => "Use fused attention",
            Suggestion::Accumulation => "Accumulate: half the micro-batch, twice the steps",
            Suggestion::MixedPrecision => "Mixed precision (bf16)",
            Suggestion::SmallerBatch => "Halve the batch",
        }
    }
}

/// The OOM panel: PyTorch's message, then in plain words which category grew and which op asked,
/// and one-click suggestions. Returns the suggestion clicked.
pub fn oom_panel(ui: &mut Ui, oom: &StepOom, available: &[Suggestion]) -> Option<Suggestion> {
    ui.colored_label(Color32::from_rgb(255, 90, 90), RichText::new("Out of memory").strong().size(18.0));
    ui.label(RichText::new(&oom.message).monospace());
    let e = &oom.error;
    ui.label(format!(
        "In plain words: the step needed {} more for '{}' ({}), asked for by {}. No cached block was large \
         enough, so the allocator tried to reserve a new {} segment, but only {} of the {} budget was unreserved \
         ({} sat free inside existing segments, in pieces too small or in the wrong pool).",
        format_bytes(e.requested_bytes),
        oom.tensor_name,
        oom.category.name(),
        oom.op_label,
        format_bytes(e.tried_bytes),
        format_bytes(e.free_bytes),
        format_bytes(e.capacity_bytes),
        format_bytes(e.cached_free_bytes)
    ));
    let mut clicked = None;
    ui.label("Try:");
    ui.horizontal_wrapped(|ui| {
        for s in available {
            if ui.button(s.label()).clicked() {
                clicked = Some(*s);
            }
        }
    });
    clicked
}

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
