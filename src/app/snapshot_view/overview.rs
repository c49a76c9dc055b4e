//! The snapshot's figures beside the toy's step, and its allocator map.

use egui::{Color32, RichText, Ui, WidgetText};

use super::super::views::{Source, size};
use super::{MAP_SEGMENTS, bytes};
use crate::i18n::Catalog;
use crate::memory::snapshot::dump::Dump;
use crate::memory::snapshot::replay;

/// The snapshot's figures beside the toy's current step.
pub(super) fn summary(ui: &mut Ui, t: &Catalog, r: &replay::Replay, toy: Option<(&crate::memory::StepMemory, Source)>) {
    let toy_free = toy.map(|(m, _)| m.stats.reserved_bytes.saturating_sub(m.stats.allocated_bytes));
    let frag = |largest: u64, free: u64| {
        let p = replay::fragmentation_percent(
            i64::try_from(largest).unwrap_or(i64::MAX),
            i64::try_from(free).unwrap_or(i64::MAX),
        );
        format!("{p:.1} %")
    };
    // On a narrow screen (a phone) the columns share the width and their words wrap: a wider
    // grid would widen the whole tab, and every line after it would be cut at the screen's edge.
    let mut grid = egui::Grid::new("snap_summary").striped(true).num_columns(3);
    let width = ui.available_width();
    let narrow = width < 600.0;
    if narrow {
        grid = grid.max_col_width(((width - 2.0 * ui.spacing().item_spacing.x) / 3.0 - 1.0).max(40.0));
    }
    let cell = |ui: &mut Ui, text: WidgetText| {
        let label = egui::Label::new(text);
        _ = ui.add(if narrow { label.wrap() } else { label.extend() })
    };
    grid.show(ui, |ui| {
        ui.strong("");
        cell(ui, RichText::new(t.text("snap-col-snapshot")).strong().into());
        let toy_heading = toy.map_or_else(
            || t.text("snap-col-toy"),
            |(_, s)| t.format("snap-col-toy-source", &[("source", s.word(t).into())]),
        );
        cell(ui, RichText::new(toy_heading).strong().into());
        ui.end_row();
        let rows: [(&str, u64, Option<u64>); 4] = [
            ("snap-peak-allocated", bytes(r.peak_allocated), toy.map(|(m, _)| m.peak_allocated_bytes())),
            ("snap-peak-reserved", bytes(r.peak_reserved), toy.map(|(m, _)| m.peak_reserved_bytes())),
            ("snap-largest-free", bytes(r.largest_free_block), toy.map(|(m, _)| m.largest_free_block)),
            ("snap-free", bytes(r.free_in_segments), toy_free),
        ];
        for (key, ours, theirs) in rows {
            cell(ui, t.text(key).into());
            cell(ui, size(t, ours).into());
            cell(ui, theirs.map_or_else(String::new, |v| size(t, v)).into());
            ui.end_row();
        }
        cell(ui, t.text("snap-fragmentation").into());
        cell(ui, format!("{:.1} %", r.fragmentation_percent()).into());
        cell(ui, toy.map_or_else(String::new, |(m, _)| frag(m.largest_free_block, toy_free.unwrap_or(0))).into());
        ui.end_row();
        // (The toy's log holds only its step's events, not its setup's: no like-for-like count.)
        cell(ui, t.text("snap-events").into());
        cell(ui, r.events.to_string().into());
        ui.label("");
        ui.end_row();
    });
}

/// The final segments, largest first: one bar each, allocated blocks filled, free ones outlined.
pub(super) fn map(ui: &mut Ui, t: &Catalog, snapshot: &Dump, device: i64) {
    let mut segments: Vec<_> = snapshot.segments.iter().filter(|g| g.device == device).collect();
    segments.sort_by(|a, b| b.total_size.cmp(&a.total_size).then(a.address.cmp(&b.address)));
    let shown = segments.len().min(MAP_SEGMENTS);
    ui.strong(
        t.format("snap-map", &[("shown", shown.to_string().into()), ("count", segments.len().to_string().into())]),
    );
    let largest = segments.first().map_or(1, |g| g.total_size.max(1)) as f32;
    let width = ui.available_width().max(50.0);
    for g in segments.iter().take(MAP_SEGMENTS) {
        let w = (width * g.total_size as f32 / largest).max(4.0);
        let (rect, response) = ui.allocate_exact_size(egui::vec2(w, 14.0), egui::Sense::hover());
        let painter = ui.painter_at(rect);
        // A private pool's segment (a CUDA graph's, a MemPool's) is outlined in its own colour.
        let outline = if g.is_private() { Color32::from_rgb(170, 68, 153) } else { Color32::GRAY };
        painter.rect_stroke(rect, 0.0, egui::Stroke::new(1.5, outline), egui::StrokeKind::Inside);
        let mut at = 0i64;
        for b in &g.blocks {
            let x0 = rect.left() + rect.width() * at as f32 / g.total_size.max(1) as f32;
            at += b.size;
            let x1 = rect.left() + rect.width() * at as f32 / g.total_size.max(1) as f32;
            if b.allocated {
                let r = egui::Rect::from_min_max(
                    egui::pos2(x0, rect.top() + 1.0),
                    egui::pos2(x1.max(x0 + 0.5), rect.bottom() - 1.0),
                );
                painter.rect_filled(r, 0.0, Color32::from_rgb(90, 160, 230));
            }
        }
        let allocated: i64 = g.blocks.iter().filter(|b| b.allocated).map(|b| b.size).sum();
        let mut text = t.format(
            "snap-segment",
            &[
                ("address", format!("{:#x}", g.address).into()),
                ("size", size(t, bytes(g.total_size)).into()),
                ("allocated", size(t, bytes(allocated)).into()),
                ("blocks", g.blocks.len().to_string().into()),
            ],
        );
        if g.is_private() {
            let pool = format!("({}, {})", g.pool[0], g.pool[1]);
            text = format!("{text} {}", t.format("snap-segment-private", &[("pool", pool.into())]));
        }
        if g.expandable {
            text = format!("{text} {}", t.text("snap-segment-expandable"));
        }
        response.on_hover_text(text);
    }
}
