//! Offload's side of the breakdown: what lives in host memory — never counted as GPU memory, but
//! shown — and what it costs: the bytes that cross the bus every step, and the step's measured
//! time beside the same step's without offload.

use egui::{RichText, Ui};

use super::drawn::{Drawn, HostDrawn, record};
use super::veil::or_hidden;
use super::{Source, category_color, category_name, size, swatch};
use crate::i18n::Catalog;
use crate::plan::Plan;
use crate::plan::offload::{PCIE_BYTES_PER_SEC, bus_bytes, offloaded_bytes};

/// Measured step times (seconds): this setup's, and the same step's without offload, with the
/// engine's name (None before such a step ran).
#[derive(Clone, Debug, Default)]
pub struct OffloadTimes {
    pub with: Option<f64>,
    pub without: Option<f64>,
    pub engine: String,
}

/// The host's table and the trade, for a plan with offload (nothing otherwise).
pub fn host_memory(ui: &mut Ui, t: &Catalog, plan: &Plan, times: &OffloadTimes) {
    let rows = plan.host_bytes();
    if rows.is_empty() {
        return;
    }
    let veiled = super::veil(ui.ctx()).step;
    let hide = |bytes: u64| or_hidden(t, veiled, || size(t, bytes));
    let total: u64 = rows.iter().map(|&(_, b)| b).sum();
    let (down, up) = bus_bytes(plan);
    let saved = offloaded_bytes(plan);
    ui.add_space(6.0);
    ui.strong(t.text("host-heading"));
    egui::Grid::new("host_memory").striped(true).num_columns(2).show(ui, |ui| {
        ui.strong(t.text("host-column"));
        ui.strong(Source::Predicted.word(t));
        ui.end_row();
        for &(c, bytes) in &rows {
            ui.horizontal(|ui| {
                swatch(ui, category_color(c));
                ui.label(category_name(t, c));
            });
            ui.label(hide(bytes));
            ui.end_row();
        }
        ui.strong(t.text("bd-total"));
        ui.label(hide(total));
        ui.end_row();
    });
    ui.label(t.format("host-saved", &[("saved", hide(saved).into())]));
    // Milliseconds, with three decimals below one (the toy's copies take microseconds).
    let ms = |secs: f64| if secs < 1e-3 { format!("{:.3}", secs * 1e3) } else { format!("{:.1}", secs * 1e3) };
    let bus_secs = (down + up) as f64 / PCIE_BYTES_PER_SEC;
    ui.label(t.format(
        "host-bus",
        &[
            ("bytes", hide(down + up).into()),
            ("down", hide(down).into()),
            ("up", hide(up).into()),
            ("rate", format!("{:.0} GB/s", PCIE_BYTES_PER_SEC / 1e9).into()),
            ("ms", or_hidden(t, veiled, || ms(bus_secs)).into()),
        ],
    ));
    // The time is the step's too: measured, and veiled like every figure of a step.
    let time = match (times.with, times.without) {
        _ if veiled => super::veil::hidden(t),
        (Some(with), Some(without)) => t.format(
            "host-time",
            &[
                ("with", ms(with).into()),
                ("without", ms(without).into()),
                ("ratio", format!("{:.2}", with / without.max(1e-9)).into()),
                ("engine", times.engine.as_str().into()),
            ],
        ),
        (Some(with), None) => {
            t.format("host-time-alone", &[("with", ms(with).into()), ("engine", times.engine.as_str().into())])
        }
        (None, _) => t.text("host-time-none"),
    };
    ui.label(RichText::new(time).small());
    let drawn = if veiled {
        HostDrawn { veiled: true, ..HostDrawn::default() }
    } else {
        HostDrawn {
            rows: rows.iter().map(|&(c, b)| (c.name().to_string(), b)).collect(),
            total_bytes: total,
            saved_bytes: saved,
            down_bytes: down,
            up_bytes: up,
            with_secs: times.with,
            without_secs: times.without,
            veiled: false,
        }
    };
    record(ui, Drawn::Host(drawn));
}
