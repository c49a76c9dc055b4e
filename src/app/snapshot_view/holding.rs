//! "What filled my GPU?": what is alive at the peak, at an OOM and at the scrubbed event,
//! grouped by place with each group's category (a guess from its stack, and said to be one),
//! then the diagnostic workflow on it. Computed once per moment shown (a few milliseconds for
//! 200,000 allocations), not every frame.

use egui::{Color32, RichText, Ui};

use crate::i18n::Catalog;
use crate::memory::snapshot::explain::{self, Advice, Guess, Holding};
use crate::memory::snapshot::place::{Place, Whose};
use crate::memory::snapshot::replay::Replay;

/// The groups listed per moment.
const ROWS: usize = 8;

/// The moments computed, by (device, event).
#[derive(Default)]
pub struct Holdings {
    cache: Vec<((i64, Option<usize>), Holding)>,
}

impl Holdings {
    /// What is alive after event `at` of `r` (computed once).
    pub fn at(&mut self, r: &Replay, at: Option<usize>) -> &Holding {
        let key = (r.device, at);
        let i = match self.cache.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                // A handful of moments: the peak, the OOM, the last scrubbed.
                if self.cache.len() >= 4 {
                    self.cache.remove(0);
                }
                self.cache.push((key, explain::holding(r, at, ROWS)));
                self.cache.len() - 1
            }
        };
        &self.cache[i].1
    }
}

/// A kind's word, marked as a guess when only the stack says it.
pub fn guess_word(t: &Catalog, g: Guess, guessed: bool) -> String {
    let word = t.text(&format!("guess-{}", g.key()));
    if guessed { t.format("guess-mark", &[("what", word.into())]) } else { word }
}

/// Where memory was asked for, in the reader's language.
pub fn place_words(t: &Catalog, p: &Place) -> String {
    let cpp = match (&p.op, &p.node) {
        (Some(op), Some(node)) => {
            t.format("place-op-in-node", &[("op", op.as_str().into()), ("node", node.as_str().into())])
        }
        _ => p.cpp_text(),
    };
    let words = match p.whose {
        Whose::None => t.text("place-none"),
        Whose::NoPython if cpp.is_empty() => t.text("place-no-python"),
        Whose::NoPython => t.format("place-no-python-op", &[("op", cpp.into())]),
        _ if cpp.is_empty() => p.frame_text(),
        _ => t.format("place-frame-op", &[("frame", p.frame_text().into()), ("op", cpp.into())]),
    };
    match &p.caller {
        Some(c) => t.format("place-called-from", &[("place", words.into()), ("caller", c.as_str().into())]),
        None => words,
    }
}

/// One moment's groups, under `heading`.
pub fn panel(ui: &mut Ui, t: &Catalog, heading: String, h: &Holding) {
    let size = |b: i64| super::size(t, super::bytes(b));
    ui.strong(heading);
    ui.label(t.format("snap-holding-total", &[("bytes", size(h.bytes).into()), ("count", h.count.to_string().into())]));
    let known = !h.groups.is_empty() && h.groups.iter().all(|g| g.known);
    ui.label(RichText::new(t.text(if known { "snap-holding-known" } else { "snap-holding-how" })).weak());
    // The categories as a bar, largest share first.
    ui.horizontal_wrapped(|ui| {
        for (g, b) in h.by_guess.iter().filter(|(_, b)| *b > 0) {
            let share = 100.0 * *b as f64 / h.bytes.max(1) as f64;
            ui.label(format!("{} {} ({share:.0} %)", guess_word(t, *g, false), size(*b)));
        }
    });
    // Plain wrapped lines, not a grid: a grid's cells do not wrap, and a long frame would widen
    // the whole tab past a phone's screen.
    for g in &h.groups {
        ui.label(t.format(
            "snap-holding-row",
            &[
                ("bytes", size(g.bytes).into()),
                ("count", g.count.to_string().into()),
                ("guess", guess_word(t, g.guess, g.evidence.is_guess()).into()),
                ("site", place_words(t, &g.place).into()),
            ],
        ));
        // (oomlab's own export: the heading already says each category is named, not guessed.)
        if !g.known {
            ui.label(RichText::new(t.text(&format!("evidence-{}", g.evidence.key()))).weak().small());
        }
    }
}

/// The workflow's steps, in words.
pub fn advice(ui: &mut Ui, t: &Catalog, advice: &[Advice]) {
    if advice.is_empty() {
        return;
    }
    let size = |b: i64| super::size(t, super::bytes(b));
    ui.strong(t.text("snap-advice-heading"));
    for a in advice {
        match a {
            Advice::Capacity { peak, capacity } => {
                let percent = 100.0 * *peak as f64 / (*capacity).max(1) as f64;
                ui.label(t.format(
                    "advice-capacity",
                    &[
                        ("peak", size(*peak).into()),
                        ("percent", format!("{percent:.0}").into()),
                        ("capacity", size(*capacity).into()),
                    ],
                ));
                if percent > 90.0 {
                    ui.colored_label(Color32::from_rgb(240, 160, 60), t.text("advice-capacity-over"));
                }
            }
            Advice::Fragmented { free_in_segments, request } => {
                ui.label(t.format(
                    "advice-fragmented",
                    &[("free", size(*free_in_segments).into()), ("request", size(*request).into())],
                ));
            }
            Advice::Grew { guess, bytes } => {
                ui.label(t.format(
                    "advice-grew",
                    &[("what", t.text(&format!("guess-{}", guess.key())).into()), ("bytes", size(*bytes).into())],
                ));
            }
            Advice::Where { place, bytes, .. } => {
                ui.label(t.format(
                    "advice-where",
                    &[("place", place_words(t, place).into()), ("bytes", size(*bytes).into())],
                ));
            }
            Advice::Fix { guess } => {
                ui.label(t.text(&format!("fix-{}", guess.key())));
            }
        }
    }
}
