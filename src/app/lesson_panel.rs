//! The lessons panel: where the learner is, the chapter's computed words, the guess and the
//! reveal, and the highlight around the widget the chapter talks about ([`super::lessons`]).

use fluent_bundle::FluentValue;

use super::lessons::{CONTROL_TARGETS, Chapter, Facts, Guess, Question, StepRecord, Verdict, chapters, judge};
use super::settings::Settings;
use super::teaching::{Asks, Teaching};
use super::views;
use crate::i18n::Catalog;

/// Where the learner is in the lessons.
#[derive(Clone, Debug, PartialEq)]
pub struct LessonState {
    pub chapter: usize,
    pub guess: Guess,
    /// The revealed answer and how the guess fares against it: the plan's at the reveal, then
    /// the real step's once it ran ([`Teaching::settle`]).
    pub verdict: Option<Verdict>,
    /// The plan's verdict, kept beside the step's.
    pub planned: Option<Verdict>,
    /// Whether the reveal's real step ran and the verdict was read from it.
    pub from_step: bool,
}

impl LessonState {
    fn at(chapter: &Chapter, index: usize) -> Self {
        let guess = match chapter.question {
            Question::Ratio { .. } => Guess::Ratio(1.0),
            Question::Choice { .. } => Guess::Choice(None),
        };
        LessonState { chapter: index, guess, verdict: None, planned: None, from_step: false }
    }
}

fn fluent<'a>(args: &'a [(&'static str, String)]) -> Vec<(&'a str, FluentValue<'a>)> {
    args.iter().map(|(k, v)| (*k, v.as_str().into())).collect()
}

/// A chapter's computed words for one state: the body, the question and (once revealed) the
/// answer. Each needs plans and simulations, so the panel keeps them until the chapter, the
/// settings, the language or the reveal change, rather than recomputing them every frame.
pub(super) struct ChapterTexts {
    chapter: usize,
    settings: Settings,
    lang: crate::i18n::Lang,
    revealed: bool,
    /// None when the settings have no plan (nothing to explain).
    pub(super) words: Option<(String, String, Option<String>)>,
}

impl ChapterTexts {
    fn new(index: usize, chapter: &Chapter, settings: &Settings, vocab: usize, t: &Catalog, revealed: bool) -> Self {
        let words = Facts::new(settings, vocab).map(|facts| {
            let args = (chapter.args)(&facts, t);
            let body = t.format(&format!("lesson-{}-body", chapter.id), &fluent(&args));
            let question = t.format(&format!("lesson-{}-question", chapter.id), &fluent(&args));
            let answer = revealed.then(|| {
                let answer = (chapter.answer_args)(&facts, t);
                t.format(&format!("lesson-{}-answer", chapter.id), &fluent(&answer))
            });
            (body, question, answer)
        });
        ChapterTexts { chapter: index, settings: settings.clone(), lang: t.lang(), revealed, words }
    }

    fn is_for(&self, index: usize, settings: &Settings, t: &Catalog, revealed: bool) -> bool {
        self.chapter == index && self.lang == t.lang() && self.revealed == revealed && self.settings == *settings
    }
}

impl Teaching {
    /// Opens chapter `index` (clamped): its settings and a fresh question; asks for its tab.
    pub fn open_chapter(&mut self, index: usize, settings: &mut Settings) -> Asks {
        let all = chapters();
        let index = index.min(all.len() - 1);
        let chapter = &all[index];
        settings.keeping_prefs(chapter.setup);
        self.lesson = Some(LessonState::at(chapter, index));
        self.scroll_to_target = true;
        Asks { tab: Some(chapter.tab), open_drawer: false }
    }

    /// What the views veil now: the open chapter's figures until its reveal, else nothing.
    pub fn veil(&self) -> views::Veil {
        match &self.lesson {
            Some(l) if l.verdict.is_none() => chapters().get(l.chapter).map_or(views::Veil::NONE, |c| c.veils),
            _ => views::Veil::NONE,
        }
    }

    /// How close a guess to the open chapter's number must be to count as close (a fraction of
    /// the answer); `None` for a choice, or no lesson.
    pub fn tolerance(&self) -> Option<f64> {
        match chapters().get(self.lesson.as_ref()?.chapter)?.question {
            Question::Ratio { tolerance, .. } => Some(tolerance),
            Question::Choice { .. } => None,
        }
    }

    /// The open chapter's revealed verdict in words (what the live line says), if revealed.
    pub fn revealed_text(&self, t: &Catalog) -> Option<String> {
        let lesson = self.lesson.as_ref()?;
        Some(verdict_text(t, lesson.verdict.as_ref()?, &chapters().get(lesson.chapter)?.question))
    }

    /// Sets the learner's guess (the panel's widgets, and the tests).
    pub fn guess(&mut self, guess: Guess) {
        if let Some(l) = &mut self.lesson {
            l.guess = guess;
        }
    }

    /// Reveals the answer: judges the guess against the prediction and asks for a real step.
    pub fn reveal(&mut self, settings: &Settings, vocab: usize) {
        let Some(lesson) = &mut self.lesson else { return };
        let all = chapters();
        let Some(facts) = Facts::new(settings, vocab) else { return };
        lesson.verdict = judge(&all[lesson.chapter], &facts, &lesson.guess);
        (lesson.planned, lesson.from_step) = (lesson.verdict.clone(), false);
        self.step_asked = true;
    }

    /// Once the reveal's real step ran: the verdict read again from what the step left (its
    /// allocator record, or its out-of-memory error), the plan's kept beside it. `record`: the
    /// step of these settings, if one ran (none: a chapter that runs no step, or a failed one —
    /// the plan's verdict stands).
    pub fn settle(&mut self, settings: &Settings, vocab: usize, record: Option<StepRecord<'_>>) {
        let Some(lesson) = &mut self.lesson else { return };
        if lesson.verdict.is_none() || lesson.planned.is_none() || lesson.from_step || self.step_asked {
            return;
        }
        lesson.from_step = true;
        let all = chapters();
        let chapter = &all[lesson.chapter];
        let facts = record.filter(|_| chapter.reads_step).and_then(|r| Facts::from_step(settings, vocab, r));
        if let Some(facts) = facts {
            lesson.verdict = judge(chapter, &facts, &lesson.guess);
        } else {
            // Nothing read from a step: the plan's (or the estimator's) answer is the answer.
            lesson.from_step = false;
            lesson.planned = None;
        }
    }

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

/// Whether the step's verdict and the plan's give the same answer (to a part in 10⁹).
pub fn agree(a: &Verdict, b: &Verdict) -> bool {
    match (a, b) {
        (Verdict::Ratio { answer: x, .. }, Verdict::Ratio { answer: y, .. }) => {
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(f64::MIN_POSITIVE)
        }
        (Verdict::Choice { answer: x, .. }, Verdict::Choice { answer: y, .. }) => x == y,
        _ => false,
    }
}

/// Where the answer comes from, once the reveal's step ran: the step's allocator record and the
/// plan's prediction side by side ("The real step: × 7.23 (allocator); the plan: × 7.23").
pub fn step_and_plan(t: &Catalog, lesson: &LessonState, question: &Question) -> Option<String> {
    let (step, plan) = (lesson.verdict.as_ref()?, lesson.planned.as_ref()?);
    if !lesson.from_step {
        return None;
    }
    let said = |v: &Verdict| match (v, question) {
        (Verdict::Ratio { answer, .. }, _) => format!("× {answer:.2}"),
        (Verdict::Choice { answer, .. }, Question::Choice { options, .. }) => {
            options.get(*answer).map_or(String::new(), |k| t.text(k))
        }
        (Verdict::Choice { .. }, _) => String::new(),
    };
    let source = views::Source::Allocator.word(t);
    Some(t.format(
        "lesson-from-step",
        &[("step", said(step).into()), ("source", source.into()), ("plan", said(plan).into())],
    ))
}

/// A revealed answer in words: the number and how close the guess was, or whether the choice
/// was right (also what the live line says).
pub fn verdict_text(t: &Catalog, v: &Verdict, question: &Question) -> String {
    match (v, question) {
        (Verdict::Ratio { answer, guess, off_percent, close }, _) => t.format(
            "lesson-number-verdict",
            &[
                ("answer", format!("{answer:.2}").into()),
                ("guess", format!("{guess:.2}").into()),
                ("off", format!("{off_percent:.0}").into()),
                ("close", if *close { "yes" } else { "no" }.into()),
            ],
        ),
        (Verdict::Choice { right: true, .. }, _) => t.text("lesson-choice-right"),
        (Verdict::Choice { answer, .. }, Question::Choice { options, .. }) => {
            let answer = options.get(*answer).map_or(String::new(), |k| t.text(k));
            t.format("lesson-choice-wrong", &[("answer", answer.into())])
        }
        (Verdict::Choice { .. }, _) => String::new(),
    }
}
