//! The three ways to batch the play's speeches side by side, at the current batch size: the
//! share of positions that are padding, the memory per useful token, and the largest batch that
//! fits the budget (predicted, each way at its first batch).

use egui::{RichText, Ui};

use super::drawn::{Drawn, WaysDrawn, record};
use super::size;
use super::veil::or_hidden;
use crate::app::derived::WayRow;
use crate::i18n::Catalog;
use crate::plan::Batching;

/// The way's name in the reader's language (the Batches control's).
fn way_name(t: &Catalog, way: Batching) -> String {
    t.text(match way {
        Batching::Windows => "batching-windows",
        Batching::Padded => "batching-padded",
        Batching::Bucketed => "batching-bucketed",
        Batching::Packed => "batching-packed",
    })
}

pub fn ways_table(ui: &mut Ui, t: &Catalog, rows: &[WayRow], batch: usize) {
    if rows.is_empty() {
        return;
    }
    let veiled = super::veil(ui.ctx()).step;
    ui.heading(t.format("ways-heading", &[("batch", batch.to_string().into())]));
    let cells = |r: &WayRow| {
        (
            or_hidden(t, veiled, || format!("{:.0} %", 100.0 * r.padding_share)),
            or_hidden(t, veiled, || r.bytes_per_token.map_or("—".into(), |b| size(t, b))),
            or_hidden(t, veiled, || r.largest.map_or(t.text("ways-none"), |b| b.to_string())),
        )
    };
    if ui.available_width() < 520.0 {
        // A phone: a line a way, wrapped, instead of a table wider than the screen.
        for r in rows {
            let (padding, per, largest) = cells(r);
            let args = [
                ("way", way_name(t, r.way).into()),
                ("padding", padding.into()),
                ("per", per.into()),
                ("largest", largest.into()),
            ];
            ui.label(t.format("ways-line", &args));
        }
    } else {
        egui::Grid::new("ways").striped(true).num_columns(4).show(ui, |ui| {
            for key in ["ways-way", "ways-padding", "ways-per-token", "ways-largest"] {
                ui.strong(t.text(key));
            }
            ui.end_row();
            for r in rows {
                let (padding, per, largest) = cells(r);
                ui.label(way_name(t, r.way));
                ui.label(padding);
                ui.label(per);
                ui.label(largest);
                ui.end_row();
            }
        });
    }
    ui.label(RichText::new(t.text("ways-source")).small());
    let drawn = if veiled {
        WaysDrawn { batch, rows: Vec::new(), veiled: true }
    } else {
        let rows = rows.iter().map(|r| (r.way.name().to_string(), r.padding_share, r.bytes_per_token, r.largest));
        WaysDrawn { batch, rows: rows.collect(), veiled: false }
    };
    record(ui, Drawn::Ways(drawn));
}
