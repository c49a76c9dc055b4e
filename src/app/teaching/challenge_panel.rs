//! The challenges panel: the list, and the active challenge's goal, its last check and its best
//! result, with the link that starts it ([`super::challenges`]).

use super::Teaching;
use super::challenges::{challenges, gflop};
use crate::app::settings::Settings;
use crate::app::views::size;
use crate::i18n::Catalog;

impl Teaching {
    /// The challenges panel: the list, and the active one's goal, check and best result.
    pub fn challenges_panel(&mut self, ui: &mut egui::Ui, t: &Catalog, settings: &mut Settings, vocab: usize) {
        let all = challenges();
        let mut start = None;
        if ui.button(t.text("challenges-close")).clicked() {
            self.show_challenges = false;
            self.challenge = None;
            return;
        }
        for (i, c) in all.iter().enumerate() {
            ui.horizontal_wrapped(|ui| {
                if ui.button(t.text("challenge-start")).clicked() {
                    start = Some(i);
                }
                ui.label(t.text(&format!("challenge-{}-title", c.id)));
                if self.challenges_done.iter().any(|d| d == c.id) {
                    ui.colored_label(egui::Color32::from_rgb(90, 200, 90), t.text("challenge-done"));
                }
            });
        }
        if let Some(state) = &mut self.challenge {
            let c = &all[state.index];
            ui.separator();
            let title = t.text(&format!("challenge-{}-title", c.id));
            ui.heading(t.format("challenge-active", &[("title", title.into())]));
            if state.goal.as_ref().is_none_or(|(lang, _)| *lang != t.lang()) {
                let goal = (c.goal_args)(&state.start, vocab, t);
                let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
                    goal.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
                state.goal = Some((t.lang(), t.format(&format!("challenge-{}-goal", c.id), &args)));
            }
            if let Some((_, goal)) = &state.goal {
                ui.label(goal.as_str());
            }
            ui.label(egui::RichText::new(t.text("challenge-run")).small());
            if let Some((passed, why)) = &state.last {
                let key = if *passed { "challenge-passed" } else { "challenge-failed" };
                let color =
                    if *passed { egui::Color32::from_rgb(90, 200, 90) } else { egui::Color32::from_rgb(240, 80, 80) };
                ui.colored_label(color, t.format(key, &[("why", why.as_str().into())]));
            }
            if let Some((peak, rate, flops)) = state.best {
                ui.label(t.format(
                    "challenge-best",
                    &[
                        ("peak", size(t, peak).into()),
                        ("source", crate::app::views::Source::Allocator.word(t).into()),
                        ("rate", format!("{rate:.0}").into()),
                        ("flops", gflop(flops).into()),
                    ],
                ));
            }
            ui.label(egui::RichText::new(t.text("challenge-share")).small());
            let link = format!("{}&challenge={}&lang={}", state.start.to_url_hash(), c.id, t.lang().code());
            // Read-only and wrapped, so a phone shows all of it.
            ui.add(egui::TextEdit::multiline(&mut link.as_str()).desired_rows(2).desired_width(f32::INFINITY));
        }
        if let Some(i) = start {
            self.start_challenge(i, settings);
        }
    }
}
