//! The teaching: the open lesson chapter (and the guess and reveal), the challenge under way and
//! the ones passed, and what a teacher's link locks or hides. Its panels live beside it
//! (`lesson_panel`, `challenges`, `teacher`); what they need of the rest of the app — another
//! tab, a step, the drawer — they ask for in an [`Asks`].

use super::Tab;
use super::challenges::ChallengeState;
use super::lesson_panel::{ChapterTexts, LessonState};
use super::teacher::{Control, Restrictions};

/// The teaching's state.
#[derive(Default)]
pub struct Teaching {
    /// The open lesson, if any.
    pub lesson: Option<LessonState>,
    /// A lesson's reveal asked for a real step.
    pub(super) step_asked: bool,
    /// The open chapter's computed words.
    pub(super) lesson_texts: Option<ChapterTexts>,
    /// A chapter just opened: scroll its widget into view.
    pub(super) scroll_to_target: bool,
    /// The challenge under way, if any.
    pub challenge: Option<ChallengeState>,
    /// The challenges passed (remembered on the desktop and in the browser).
    pub challenges_done: Vec<String>,
    /// Whether the challenges panel is open.
    pub show_challenges: bool,
    /// What a teacher link locks or hides.
    pub restrictions: Restrictions,
    /// The gated controls the last drawn controls panel held, and whether each was enabled.
    pub(super) drawn_controls: Vec<(Control, bool)>,
    /// Whether the teacher link's drawn controls were logged (once per link).
    pub(super) drawn_logged: bool,
    /// The "Share this setup" window's choices (what to lock, what to hide), when it is open.
    pub(super) share: Option<(Vec<Control>, Vec<Control>)>,
    /// Whether the welcome shows now, and whether a way in was ever chosen (remembered).
    pub welcome: bool,
    pub welcomed: bool,
}

/// What a teaching panel asks of the rest of the app.
#[derive(Debug, Default, PartialEq)]
pub struct Asks {
    /// Show this tab (a chapter's).
    pub tab: Option<Tab>,
    /// Open the controls' drawer (a phone: the chapter's control is in it).
    pub open_drawer: bool,
}

impl Asks {
    /// Both asks: `later`'s where it has one.
    pub fn and(self, later: Asks) -> Asks {
        Asks { tab: later.tab.or(self.tab), open_drawer: self.open_drawer || later.open_drawer }
    }
}

impl Teaching {
    /// Whether a side panel (a lesson or the challenges) is open.
    pub fn panel_open(&self) -> bool {
        self.lesson.is_some() || self.show_challenges
    }

    /// A real step a reveal asked for (once).
    pub fn take_step_request(&mut self) -> bool {
        std::mem::take(&mut self.step_asked)
    }

    /// Opens the "Share this setup" window with the link's current restrictions.
    pub fn open_share(&mut self) {
        let r = &self.restrictions;
        self.share = Some((r.locked.clone(), r.hidden.clone()));
    }

    /// The lessons button of the top bar: opens the first chapter, or closes the lesson.
    pub fn toggle_lessons(&mut self, settings: &mut super::Settings) -> Asks {
        if self.lesson.is_some() {
            self.lesson = None;
            Asks::default()
        } else {
            self.show_challenges = false;
            self.open_chapter(0, settings)
        }
    }

    /// The challenges button of the top bar.
    pub fn toggle_challenges(&mut self) {
        self.show_challenges = !self.show_challenges;
        self.lesson = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Settings;

    #[test]
    fn lessons_and_challenges_take_turns_and_a_reveal_asks_for_one_step() {
        let mut t = Teaching::default();
        let mut s = Settings::default();
        assert!(!t.panel_open());
        let asks = t.toggle_lessons(&mut s);
        assert_eq!(asks.tab, Some(Tab::Breakdown), "the first chapter's tab");
        assert!(t.lesson.is_some() && t.panel_open());
        t.toggle_challenges();
        assert!(t.lesson.is_none() && t.show_challenges);
        t.toggle_lessons(&mut s);
        assert!(!t.show_challenges && t.lesson.is_some());
        t.reveal(&s, 58);
        assert!(t.take_step_request());
        assert!(!t.take_step_request(), "once");
        let both = Asks { tab: Some(Tab::Sweep), open_drawer: false }.and(Asks { tab: None, open_drawer: true });
        assert_eq!(both, Asks { tab: Some(Tab::Sweep), open_drawer: true });
    }

    /// The revealed answer is read again from the real step: equal to the plan's when the step
    /// did what the plan said; the step's, and said to differ, when its record says otherwise.
    #[test]
    fn the_answer_comes_from_the_real_step_and_a_disagreement_is_said() {
        use crate::app::lesson_panel::{agree, step_and_plan};
        use crate::app::lessons::{Facts, StepRecord, Verdict, chapters};
        use crate::plan::Category;
        let t = crate::i18n::Catalog::new(crate::i18n::Lang::En);
        let mut teaching = Teaching::default();
        let mut s = Settings::default();
        teaching.toggle_lessons(&mut s);
        let facts = Facts::new(&s, 58).expect("facts");
        let ratio = |v: &Option<Verdict>| match v {
            Some(Verdict::Ratio { answer, .. }) => *answer,
            other => panic!("{other:?}"),
        };
        // The step left exactly the plan's record: the same answer, read from the step.
        teaching.reveal(&s, 58);
        assert!(teaching.take_step_request());
        teaching.settle(&s, 58, Some(StepRecord::Ran(&facts.memory)));
        let lesson = teaching.lesson.clone().expect("a lesson");
        assert!(lesson.from_step && agree(lesson.planned.as_ref().expect("plan"), lesson.verdict.as_ref().expect("v")));
        let question = &chapters()[0].question;
        let line = step_and_plan(&t, &lesson, question).expect("a line");
        assert!(line.starts_with("The real step: × ") && line.contains("allocator (live)"), "{line}");
        // A record with twice the activations: the step's answer, not the plan's, and said so.
        let mut odd = facts.memory.clone();
        let acts = odd.peak_allocated.get(Category::Activations);
        odd.peak_allocated.add(Category::Activations, acts);
        teaching.reveal(&s, 58);
        teaching.take_step_request();
        teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
        let lesson = teaching.lesson.clone().expect("a lesson");
        let (step, plan) = (ratio(&lesson.verdict), ratio(&lesson.planned));
        assert!(step > plan * 1.2, "the step's answer ({step}) is the step's, not the plan's ({plan})");
        assert!(!agree(lesson.planned.as_ref().expect("p"), lesson.verdict.as_ref().expect("v")));
        let line = step_and_plan(&t, &lesson, question).expect("a line");
        assert!(line.contains(&format!("× {step:.2}")) && line.contains(&format!("× {plan:.2}")), "{line}");
        // Not settled while the step is still asked for; a chapter that reads no step keeps the
        // plan's answer, with no step line.
        teaching.open_chapter(6, &mut s);
        teaching.reveal(&s, 58);
        teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
        assert!(teaching.lesson.as_ref().is_some_and(|l| !l.from_step && l.planned.is_some()), "step still asked");
        teaching.take_step_request();
        teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
        let lesson = teaching.lesson.clone().expect("a lesson");
        assert!(!lesson.from_step && step_and_plan(&t, &lesson, &chapters()[6].question).is_none());
    }
}
