//! The lessons panel: where the learner is, the chapter's computed words, the guess and the
//! reveal, and the highlight around the widget the chapter talks about ([`super::lessons`]).

use super::lesson_state::{ChapterTexts, agree, step_and_plan, verdict_text};
use super::lessons::{CONTROL_TARGETS, Guess, Question, chapters};
use super::{Asks, Teaching};
use crate::app::settings::Settings;
use crate::app::views;
use crate::i18n::Catalog;

impl Teaching {
    /// The lessons panel: the chapter's title, text, question and, once revealed, the answer.
    /// `narrow`: a phone's layout, where the chapter's control is in the drawer.
    pub fn lessons_panel(
        &mut self,
        ui: &mut egui::Ui,
        t: &Catalog,
        settings: &mut Settings,
        vocab: usize,
        narrow: bool,
    ) -> Asks {
        let Some(lesson) = self.lesson.clone() else { return Asks::default() };
        let all = chapters();
        let chapter = &all[lesson.chapter];
        let revealed = lesson.verdict.is_some();
        let fresh = self.lesson_texts.as_ref().is_some_and(|c| c.is_for(lesson.chapter, settings, t, revealed));
        if !fresh {
            self.lesson_texts = Some(ChapterTexts::new(lesson.chapter, chapter, settings, vocab, t, revealed));
        }
        let words = self.lesson_texts.as_ref().and_then(|c| c.words.as_ref());
        let mut go_to = None;
        let mut close = false;
        let mut guess = lesson.guess.clone();
        let mut reveal = false;
        ui.horizontal_wrapped(|ui| {
            let n = (lesson.chapter + 1).to_string();
            ui.label(t.format("lesson-chapter", &[("n", n.into()), ("count", all.len().to_string().into())]));
            if ui.add_enabled(lesson.chapter > 0, egui::Button::new(t.text("lesson-prev"))).clicked() {
                go_to = Some(lesson.chapter - 1);
            }
            if ui.add_enabled(lesson.chapter + 1 < all.len(), egui::Button::new(t.text("lesson-next"))).clicked() {
                go_to = Some(lesson.chapter + 1);
            }
            if ui.button(t.text("lessons-close")).clicked() {
                close = true;
            }
        });
        ui.heading(t.text(&format!("lesson-{}-title", chapter.id)));
        // On a phone the controls are in the drawer: the chapter's control is one tap away.
        let mut show_control = false;
        let control = CONTROL_TARGETS.iter().find(|(target, _)| *target == chapter.target);
        if narrow && control.is_some_and(|(_, c)| c.is_none_or(|c| self.restrictions.shows(c))) {
            show_control = ui.button(t.text("lesson-show-control")).clicked();
        }
        if let Some((body, question, _)) = words {
            ui.label(body);
            // Every figure of a chapter is the plan's prediction; the reveal's step adds the
            // allocator's column.
            let source = views::Source::Predicted.word(t);
            ui.label(egui::RichText::new(t.format("lesson-source", &[("source", source.into())])).small());
            ui.strong(question);
        }
        match (&chapter.question, &mut guess) {
            (Question::Ratio { .. }, Guess::Ratio(g)) => {
                ui.horizontal(|ui| {
                    // The field is named by its label for a screen reader ("Your guess").
                    let label = ui.label(t.text("lesson-your-guess"));
                    let field = egui::DragValue::new(g).range(0.1..=100.0).speed(0.05).fixed_decimals(2).prefix("× ");
                    ui.add(field).labelled_by(label.id);
                });
            }
            (Question::Choice { options, .. }, Guess::Choice(g)) => {
                for (i, key) in options.iter().enumerate() {
                    ui.radio_value(g, Some(i), t.text(key));
                }
            }
            _ => {}
        }
        if ui.button(t.text("lesson-reveal")).clicked() {
            reveal = true;
        }
        if let Some(v) = &lesson.verdict {
            let text = verdict_text(t, v, &chapter.question);
            ui.strong(text);
            if let Some(line) = step_and_plan(t, &lesson, &chapter.question) {
                ui.label(line);
            }
            if lesson.from_step && lesson.planned.as_ref().is_some_and(|p| !agree(p, v)) {
                ui.colored_label(ui.visuals().warn_fg_color, t.text("lesson-step-differs"));
            }
            if let Some((_, _, Some(answer))) = words {
                ui.label(answer);
            }
            ui.label(egui::RichText::new(t.text("lesson-step-note")).small());
        }
        self.guess(guess);
        if reveal {
            self.reveal(settings, vocab);
        }
        let mut asks = Asks::default();
        if let Some(i) = go_to {
            asks = self.open_chapter(i, settings);
        }
        if close {
            self.lesson = None;
        }
        if show_control {
            asks.open_drawer = true;
            self.scroll_to_target = true;
        }
        asks
    }

    /// Draws the highlight around the chapter's widget, over everything.
    pub fn highlight(&mut self, ctx: &egui::Context) {
        if std::mem::take(&mut self.scroll_to_target)
            && let Some(l) = &self.lesson
        {
            views::scroll_to(ctx, chapters()[l.chapter].target);
        }
        let Some(lesson) = &self.lesson else { return };
        let all = chapters();
        let Some(rect) = views::marked(ctx, all[lesson.chapter].target) else { return };
        let painter =
            ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("lesson_highlight")));
        let stroke = egui::Stroke::new(3.0, egui::Color32::from_rgb(255, 200, 0));
        painter.rect_stroke(rect.expand(4.0), 6.0, stroke, egui::StrokeKind::Outside);
    }
}
