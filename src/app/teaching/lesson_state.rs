//! Where a learner is in a chapter and what the chapter says there: the guess, the revealed
//! verdict (the plan's, then the real step's), the chapter's words for one state, and the
//! verdict in words — plain data the panel, the class and the live line all read.

use fluent_bundle::FluentValue;

use super::lessons::{Chapter, Facts, Guess, Question, Verdict};
use crate::app::settings::Settings;
use crate::app::views;
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
    pub(super) fn at(chapter: &Chapter, index: usize) -> Self {
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
    pub(super) fn new(
        index: usize,
        chapter: &Chapter,
        settings: &Settings,
        vocab: usize,
        t: &Catalog,
        revealed: bool,
    ) -> Self {
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

    pub(super) fn is_for(&self, index: usize, settings: &Settings, t: &Catalog, revealed: bool) -> bool {
        self.chapter == index && self.lang == t.lang() && self.revealed == revealed && self.settings == *settings
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
