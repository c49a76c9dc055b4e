//! The allocator map: each segment's blocks, and the driver's memory blocks under them.

use egui::{Color32, RichText, Ui};

use super::drawn::{Drawn, MapDrawn, SegmentDrawn, record};
use super::{Source, category_color, category_name, op_label, size};
use crate::i18n::Catalog;
use crate::memory::StepMemory;
use crate::memory::device::DeviceMemory;
use crate::memory::map::SegmentState;
use crate::plan::Plan;
use crate::units::format_bytes;

/// Each segment as a bar of its blocks (allocated by category, free in dark grey), at op `op`
/// of `memory` (from `source`: the plan's prediction, or the allocator's account of a real
/// step); under them, when the driver reported after a real step, its memory blocks with the
/// buffers inside them (oomlab's segments by label, everything else in grey).
pub fn allocator_map(
    ui: &mut Ui,
    t: &Catalog,
    plan: &Plan,
    memory: &StepMemory,
    source: Source,
    op: Option<usize>,
    device: Option<&DeviceMemory>,
) {
    let format_bytes = |b| size(t, b);
    let segments = memory.segments_at(op);
    let reserved: u64 = segments.iter().map(|s| s.size).sum();
    let allocated: u64 = segments.iter().map(SegmentState::allocated_bytes).sum();
    let largest_free = segments.iter().map(SegmentState::largest_free_block).max().unwrap_or(0);
    let op_text = op_label(t, plan, op);
    // A chapter's open question veils the step: the segments are not drawn, the figures say "?".
    let veiled = super::veil(ui.ctx()).step;
    let hide = |figure: String| super::veil::or_hidden(t, veiled, || figure);
    let summary = t.format(
        "al-summary",
        &[
            ("op", op_text.as_str().into()),
            ("segments", hide(segments.len().to_string()).into()),
            ("reserved", hide(format_bytes(reserved)).into()),
            ("allocated", hide(format_bytes(allocated)).into()),
            ("free", hide(format_bytes(reserved.saturating_sub(allocated))).into()),
            ("largest", hide(format_bytes(largest_free)).into()),
        ],
    );
    ui.label(&summary);
    if veiled {
        super::veil::hidden_chart(ui, t, 120.0);
        super::veil::note(ui, t);
        let figures = MapDrawn {
            source,
            op: op_text,
            segments: Vec::new(),
            reserved_bytes: 0,
            allocated_bytes: 0,
            driver_blocks: None,
            summary,
            veiled,
        };
        record(ui, Drawn::AllocatorMap(figures));
        return;
    }
    let widest = segments.iter().map(|s| s.size).max().unwrap_or(1).max(1);
    let mut labels: Vec<Vec<String>> = Vec::new();
    egui::ScrollArea::vertical().max_height(260.0).id_salt("segments").show(ui, |ui| {
        for s in &segments {
            let spans: Vec<Span> = s
                .blocks
                .iter()
                .map(|b| Span {
                    offset: b.offset,
                    size: b.size,
                    color: b.tensor.map(|t| category_color(plan.tensor(t).category)),
                    // Named where it fits, so that no category is told by its colour alone.
                    label: b.tensor.map(|id| category_name(t, plan.tensor(id).category)),
                    hover: match b.tensor {
                        Some(id) => t.format(
                            "al-block",
                            &[("tensor", plan.tensor(id).name.as_str().into()), ("bytes", format_bytes(b.size).into())],
                        ),
                        None => t.format("al-free", &[("bytes", format_bytes(b.size).into())]),
                    },
                })
                .collect();
            labels.push(bar_of_spans(ui, s.size, widest, 18.0, Color32::from_gray(40), &spans));
        }
    });
    if let Some(d) = device {
        driver_blocks(ui, t, d);
    }
    let drawn_segments = segments
        .iter()
        .zip(labels.into_iter().chain(std::iter::repeat(Vec::new())))
        .map(|(s, labels)| SegmentDrawn {
            labels,
            segment: s.segment.0,
            size_bytes: s.size,
            allocated_bytes: s.allocated_bytes(),
            tensors: s.blocks.iter().filter_map(|b| Some(plan.tensor(b.tensor?).name.clone())).collect(),
        })
        .collect();
    let driver = device.map(|d| d.blocks.iter().filter(|b| b.allocations.iter().any(|a| ours(&a.name))).count());
    record(
        ui,
        Drawn::AllocatorMap(MapDrawn {
            source,
            op: op_text,
            segments: drawn_segments,
            reserved_bytes: reserved,
            allocated_bytes: allocated,
            driver_blocks: driver,
            summary,
            veiled,
        }),
    );
}

/// Whether a driver allocation is one of oomlab's segment buffers (by its label).
fn ours(name: &str) -> bool {
    crate::memory::device::parse_segment_label(name).is_some()
}

/// The driver's memory blocks after the last step (device figures), each a bar of the
/// allocations inside it: oomlab's segment buffers in blue with their labels, others in grey.
pub fn driver_blocks(ui: &mut Ui, t: &Catalog, d: &DeviceMemory) {
    let format_bytes = |b| size(t, b);
    let (blocks, block_bytes) = d.segment_blocks();
    ui.label(t.format(
        "al-driver",
        &[
            ("source", Source::Device.word(t).into()),
            ("blocks", blocks.to_string().into()),
            ("bytes", format_bytes(block_bytes).into()),
            ("requested", format_bytes(d.requested_bytes()).into()),
            ("reported", format_bytes(d.segment_bytes()).into()),
        ],
    ));
    let widest = d.blocks.iter().map(|b| b.size_bytes).max().unwrap_or(1).max(1);
    for block in d.blocks.iter().filter(|b| b.allocations.iter().any(|a| ours(&a.name))) {
        let spans: Vec<Span> = block
            .allocations
            .iter()
            .map(|a| Span {
                offset: a.offset_bytes,
                size: a.size_bytes,
                color: Some(if ours(&a.name) { Color32::from_rgb(76, 114, 176) } else { Color32::from_gray(110) }),
                label: None,
                hover: format!(
                    "{} — {} @ {}",
                    if a.name.is_empty() { t.text("al-unnamed") } else { a.name.clone() },
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
    /// Written inside the span where it fits.
    label: Option<String>,
    hover: String,
}

/// One labelled bar of `total` bytes (its width relative to `widest`), with `spans` drawn at
/// their offsets, labelled inside where the label fits and named on hover. Returns the labels
/// written.
fn bar_of_spans(ui: &mut Ui, total: u64, widest: u64, height: f32, background: Color32, spans: &[Span]) -> Vec<String> {
    let mut written = Vec::new();
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
            if let (Some(label), Some(c)) = (&s.label, s.color) {
                let ink = if c.intensity() > 0.5 { Color32::BLACK } else { Color32::WHITE };
                let galley = painter.layout_no_wrap(label.clone(), egui::FontId::proportional(11.0), ink);
                if galley.size().x + 6.0 <= r.width() && galley.size().y <= r.height() {
                    painter.galley(egui::pos2(r.left() + 3.0, r.center().y - galley.size().y / 2.0), galley, ink);
                    written.push(label.clone());
                }
            }
            if response.hover_pos().is_some_and(|p| r.contains(p)) {
                hovered = Some(s);
            }
        }
        if let Some(s) = hovered {
            response.on_hover_text(&s.hover);
        }
    });
    written
}
