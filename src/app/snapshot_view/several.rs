//! Several snapshots side by side: a second run to compare with, or one file per rank of a
//! distributed run. Each file's peak, the worst and the spread, and where the worst one's extra
//! memory went — by kind (drawn, two bars a kind) and by place — at the peaks, where what is
//! alive adds up to each peak exactly.

use egui::{Color32, RichText, Ui};
use egui_plot::{Bar, BarChart, Plot};

use super::{Loaded, bytes, size};
use crate::app::views;
use crate::i18n::Catalog;
use crate::memory::snapshot::compare::{self, Ranks};

/// Places listed under the chart.
const PLACES: usize = 8;

/// The files compared (computed when a file is opened or closed).
pub struct Comparison {
    pub ranks: Ranks,
}

/// The comparison of the files open (the one shown first), once there are two or more.
pub fn compute(files: &[&Loaded]) -> Option<Comparison> {
    if files.len() < 2 {
        return None;
    }
    let named: Vec<(String, &crate::memory::snapshot::replay::Replay)> = files
        .iter()
        .filter_map(|l| {
            let r = l.replays.iter().find(|r| r.events > 0).or(l.replays.first())?;
            Some((l.name.clone(), r))
        })
        .collect();
    compare::ranks(&named).map(|ranks| Comparison { ranks })
}

/// A signed size: "+1.00 GiB", "−12.00 MiB".
fn signed(t: &Catalog, v: i64) -> String {
    if v >= 0 { format!("+{}", size(t, bytes(v))) } else { format!("−{}", size(t, bytes(v.saturating_abs()))) }
}

/// The files in a table, the spread, and the worst one's extra memory; the file whose "Show"
/// was pressed, if any (its index in `names`).
pub fn panel(ui: &mut Ui, t: &Catalog, c: &Comparison, names: &[String]) -> Option<usize> {
    let r = &c.ranks;
    let mut show = None;
    ui.heading(t.format("snap-several-heading", &[("count", r.ranks.len().to_string().into())]));
    ui.label(RichText::new(t.text("snap-several-how")).weak());
    // On a narrow screen (a phone) each file is a wrapped line: a grid's cells do not wrap.
    let narrow = ui.available_width() < 600.0;
    if narrow {
        for rank in &r.ranks {
            let worst = rank.rank == r.worst;
            let mut line = t.format(
                "snap-several-line",
                &[
                    ("rank", rank.rank.to_string().into()),
                    ("file", rank.side.file.as_str().into()),
                    ("allocated", size(t, bytes(rank.side.peak_allocated_bytes)).into()),
                    ("reserved", size(t, bytes(rank.side.peak_reserved_bytes)).into()),
                ],
            );
            if worst {
                line = format!("{line} — {}", t.text("snap-several-worst"));
            }
            ui.add(egui::Label::new(if worst { RichText::new(line).strong() } else { RichText::new(line) }).wrap());
            let index = names.iter().position(|n| *n == rank.side.file);
            if index != Some(0) && ui.button(t.text("snap-several-show")).clicked() {
                show = index;
            }
        }
    } else {
        egui::Grid::new("snap_several").striped(true).num_columns(5).show(ui, |ui| {
            ui.strong(t.text("snap-several-rank"));
            ui.strong(t.text("snap-several-file"));
            ui.strong(t.text("snap-peak-allocated"));
            ui.strong(t.text("snap-peak-reserved"));
            ui.label("");
            ui.end_row();
            for rank in &r.ranks {
                let worst = rank.rank == r.worst;
                let label = |ui: &mut Ui, text: String| {
                    if worst { ui.label(RichText::new(text).strong()) } else { ui.label(text) }
                };
                label(ui, rank.rank.to_string());
                label(ui, rank.side.file.clone());
                label(ui, size(t, bytes(rank.side.peak_allocated_bytes)));
                label(ui, size(t, bytes(rank.side.peak_reserved_bytes)));
                ui.horizontal(|ui| {
                    if worst {
                        ui.label(RichText::new(t.text("snap-several-worst")).color(Color32::from_rgb(240, 80, 80)));
                    }
                    let index = names.iter().position(|n| *n == rank.side.file);
                    if index != Some(0) && ui.button(t.text("snap-several-show")).clicked() {
                        show = index;
                    }
                });
                ui.end_row();
            }
        });
    }
    let best = r.ranks.iter().find(|x| x.rank == r.best).map(|x| x.side.file.clone()).unwrap_or_default();
    let worst = r.ranks.iter().find(|x| x.rank == r.worst).map(|x| x.side.file.clone()).unwrap_or_default();
    ui.label(t.format(
        "snap-several-spread",
        &[
            ("worst", worst.as_str().into()),
            ("spread", size(t, bytes(r.spread_bytes)).into()),
            ("best", best.as_str().into()),
            ("percent", format!("{:.1}", r.worst_over_mean_percent).into()),
        ],
    ));
    let d = &r.extra;
    ui.strong(t.format("snap-several-extra", &[("worst", worst.as_str().into()), ("best", best.as_str().into())]));
    // By kind: two bars a kind, the best file's then the worst's.
    let kinds: Vec<_> = d.by_kind.iter().filter(|k| k.a_bytes != 0 || k.b_bytes != 0).collect();
    let grey = Color32::from_rgb(150, 150, 150);
    let red = Color32::from_rgb(213, 94, 0);
    views::legend(ui, &[(best.clone(), grey), (worst.clone(), red)]);
    let mut a_bars = Vec::new();
    let mut b_bars = Vec::new();
    for (i, k) in kinds.iter().enumerate() {
        let x = i as f64;
        a_bars.push(Bar::new(x - 0.2, views::mib(bytes(k.a_bytes))).width(0.38));
        b_bars.push(Bar::new(x + 0.2, views::mib(bytes(k.b_bytes))).width(0.38));
    }
    let names_of: Vec<String> = kinds.iter().map(|k| super::holding::guess_word(t, k.kind, false)).collect();
    let axis_names = names_of.clone();
    let drawn = Plot::new("snap_several_kinds")
        .height(180.0)
        .y_axis_label("MiB")
        .include_y(0.0)
        .allow_scroll(false)
        .allow_drag(false)
        .x_axis_formatter(move |m, _| {
            let i = m.value.round();
            if (m.value - i).abs() < 1e-6 && i >= 0.0 {
                axis_names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .show(ui, |p| {
            p.bar_chart(BarChart::new(best.clone(), a_bars).color(grey));
            p.bar_chart(BarChart::new(worst.clone(), b_bars).color(red));
        });
    let said: Vec<String> = kinds
        .iter()
        .zip(&names_of)
        .map(|(k, name)| {
            t.format(
                "snap-several-kind",
                &[
                    ("kind", name.as_str().into()),
                    ("a", size(t, bytes(k.a_bytes)).into()),
                    ("b", size(t, bytes(k.b_bytes)).into()),
                    ("change", signed(t, k.b_bytes.saturating_sub(k.a_bytes)).into()),
                ],
            )
        })
        .collect();
    let separator = if t.lang() == crate::i18n::Lang::Zh { "；" } else { "; " };
    views::describe_chart(&drawn.response, &said.join(separator));
    for line in &said {
        ui.label(RichText::new(line).small());
    }
    // By place: the largest changes.
    for p in d.by_place.iter().filter(|p| p.grew() != 0).take(PLACES) {
        ui.label(t.format(
            "snap-several-place",
            &[
                ("change", signed(t, p.grew()).into()),
                ("place", super::holding::place_words(t, &p.of).into()),
                ("a", size(t, bytes(p.a_bytes)).into()),
                ("b", size(t, bytes(p.b_bytes)).into()),
            ],
        ));
    }
    show
}
