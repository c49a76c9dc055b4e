//! The teaching, in one room: the lessons (each chapter, its guess and its reveal), the
//! challenges, teacher links, the welcome and the class taught with `oomlab serve`.
//!
//! The rest of the app sees only what this file names: [`Teaching`] (its fields private, its
//! state changed through its methods), what a panel asks of the app ([`Asks`]), the classroom,
//! and the few types and functions re-exported below. The files inside import one way — data
//! (`lessons`, `lesson_state`, `challenges`, `links`, `welcome`) below this file's state, the
//! panels (`lesson_panel`, `challenge_panel`, `share`) and the classroom above it — so that no
//! two of them import each other (checked by `tests/layout.rs`).

mod challenge_panel;
mod challenges;
mod chapter;
mod classroom;
mod facts;
mod lesson_panel;
mod lesson_state;
mod lessons;
mod links;
mod remedies;
mod share;
mod welcome;

pub use challenges::{Challenge, ChallengeRun, ChallengeState, Check, challenge_from_url_hash, challenges};
pub use classroom::full::{Bins, FullAsks, LABEL_PX, QUESTION_PX, bins, short};
pub use classroom::projector::PanelAsks;
pub use classroom::{Classroom, Failure, Msg, Phase, Projection, StartOptions, StudentList};
pub use lesson_state::{LessonState, verdict_text};
pub use lessons::{Chapter, Facts, Guess, Question, Verdict, chapters, judge};
pub use links::{Control, Restrictions, lesson_from_url_hash};
pub use welcome::{Way, link_points_somewhere, welcome_ui};

use crate::app::run::StepRecord;
use crate::app::views;
use crate::app::{Notice, Settings, Tab};
use crate::i18n::{Catalog, Lang};
use crate::memory::StepMemory;
use lesson_state::ChapterTexts;

/// The teaching's state: private, changed through the methods below and the panels'.
#[derive(Default)]
pub struct Teaching {
    /// The open lesson, if any.
    lesson: Option<LessonState>,
    /// A lesson's reveal asked for a real step.
    step_asked: bool,
    /// The open chapter's computed words.
    lesson_texts: Option<ChapterTexts>,
    /// A chapter just opened: scroll its widget into view.
    scroll_to_target: bool,
    /// The challenge under way, if any.
    challenge: Option<ChallengeState>,
    /// The challenges passed (remembered on the desktop and in the browser).
    challenges_done: Vec<String>,
    /// Whether the challenges panel is open.
    show_challenges: bool,
    /// What a teacher link locks or hides.
    restrictions: Restrictions,
    /// The gated controls the last drawn controls panel held, and whether each was enabled.
    drawn_controls: Vec<(Control, bool)>,
    /// Whether the teacher link's drawn controls were logged (once per link).
    drawn_logged: bool,
    /// The "Share this setup" window's choices (what to lock, what to hide), when it is open.
    share: Option<(Vec<Control>, Vec<Control>)>,
    /// Whether the welcome shows now, and whether a way in was ever chosen (remembered).
    welcome: bool,
    welcomed: bool,
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

/// What the rest of the app reads of the teaching.
impl Teaching {
    /// The open lesson: its chapter, the guess and, once revealed, the verdict.
    pub fn lesson(&self) -> Option<&LessonState> {
        self.lesson.as_ref()
    }

    /// The challenge under way.
    pub fn challenge(&self) -> Option<&ChallengeState> {
        self.challenge.as_ref()
    }

    /// The ids of the challenges passed.
    pub fn challenges_done(&self) -> &[String] {
        &self.challenges_done
    }

    /// Whether the challenges panel is open.
    pub fn challenges_open(&self) -> bool {
        self.show_challenges
    }

    /// What a teacher link locks or hides.
    pub fn restrictions(&self) -> &Restrictions {
        &self.restrictions
    }

    /// Whether the welcome shows now.
    pub fn welcome_showing(&self) -> bool {
        self.welcome
    }

    /// Whether a way in was ever chosen (remembered).
    pub fn welcomed(&self) -> bool {
        self.welcomed
    }

    /// Whether a side panel (a lesson or the challenges) is open.
    pub fn panel_open(&self) -> bool {
        self.lesson.is_some() || self.show_challenges
    }

    /// Whether a reveal's real step is still to run.
    pub fn step_pending(&self) -> bool {
        self.step_asked
    }
}

/// What the rest of the app changes.
impl Teaching {
    /// What was remembered from an earlier visit: the challenges passed, and whether a way in
    /// was chosen. The welcome shows to a newcomer whose link points nowhere.
    pub fn remembered(&mut self, challenges_done: Vec<String>, welcomed: bool, linked: bool) {
        (self.challenges_done, self.welcomed) = (challenges_done, welcomed);
        self.welcome = !welcomed && !linked;
    }

    /// Shows the welcome again (the top bar's menu, and the tests).
    pub fn show_welcome(&mut self) {
        self.welcome = true;
    }

    /// A way in was chosen: the welcome closes, and is not shown again.
    pub fn chose_way(&mut self) {
        (self.welcome, self.welcomed) = (false, true);
    }

    /// Closes the open lesson.
    pub fn close_lesson(&mut self) {
        self.lesson = None;
    }

    /// Opens the challenges panel (a link naming a challenge).
    pub fn open_challenges(&mut self) {
        (self.show_challenges, self.lesson) = (true, None);
    }

    /// Lifts a teacher link's locks (a teacher who clears them).
    pub fn clear_restrictions(&mut self) {
        self.restrictions = Restrictions::default();
    }

    /// A real step a reveal asked for (once).
    /// Returns the run's batch number the chapter asks about: the reveal runs the batches up to
    /// it (0: the first step alone).
    pub fn take_step_request(&mut self) -> Option<u64> {
        // Asked every frame: the chapters are looked at only when a reveal asked.
        if !std::mem::take(&mut self.step_asked) {
            return None;
        }
        Some(self.lesson.as_ref().map_or(0, |l| chapters()[l.chapter].step))
    }

    /// Opens the "Share this setup" window with the link's current restrictions.
    pub fn open_share(&mut self) {
        let r = &self.restrictions;
        self.share = Some((r.locked.clone(), r.hidden.clone()));
    }

    /// The lessons button of the top bar: opens the first chapter, or closes the lesson.
    pub fn toggle_lessons(&mut self, settings: &mut Settings) -> Asks {
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

    /// Starts challenge `index` from its setup (written into `settings`).
    pub fn start_challenge(&mut self, index: usize, settings: &mut Settings) {
        if let Some(state) = ChallengeState::start(index, settings) {
            self.lesson = None;
            self.challenge = Some(state);
        }
    }

    /// Checks the active challenge against the step that just executed with `settings`: the
    /// allocator's account of it (`memory`) and its time. A pass is remembered.
    pub fn check_challenge(&mut self, settings: &Settings, memory: &StepMemory, secs: f64, t: &Catalog, vocab: usize) {
        let Some(state) = &mut self.challenge else { return };
        if let Some(id) = state.check(settings, memory, secs, t, vocab)
            && !self.challenges_done.iter().any(|d| d == id)
        {
            self.challenges_done.push(id.to_string());
        }
    }
}

/// The lesson's chapter, guess, reveal and settling.
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
}

/// Teacher links.
impl Teaching {
    /// Applies a link's teaching parts: the lesson chapter it opens (its settings written into
    /// `settings`), and the controls it locks or hides, pinned at `settings` as they are then
    /// (the link's own). A notice names anything it did not know.
    pub fn apply_teacher_link(&mut self, hash: &str, settings: &mut Settings, notices: &mut Vec<Notice>) -> Asks {
        let asks = match lesson_from_url_hash(hash) {
            Some(chapter) => self.open_chapter(chapter, settings),
            None => Asks::default(),
        };
        let (mut restrictions, notice) = Restrictions::from_url_hash(hash);
        restrictions.pinned = Some(settings.clone());
        if !restrictions.locked.is_empty() || !restrictions.hidden.is_empty() {
            let ids = |cs: &[Control]| cs.iter().map(|c| c.id()).collect::<Vec<_>>().join(", ");
            log::info!(
                "oomlab: teacher link: locked [{}]; hidden [{}]",
                ids(&restrictions.locked),
                ids(&restrictions.hidden)
            );
        }
        self.restrictions = restrictions;
        self.drawn_logged = false;
        if let Some(n) = notice {
            log::warn!("oomlab: {}", n.text(&Catalog::new(Lang::En)));
            notices.push(n);
        }
        asks
    }

    /// Once the controls panel has been drawn under a teacher link's restrictions, logs what it
    /// held: each control enabled, disabled or absent, as the widgets were drawn.
    pub fn log_drawn_controls(&mut self) {
        let r = &self.restrictions;
        if self.drawn_logged || self.drawn_controls.is_empty() || (r.locked.is_empty() && r.hidden.is_empty()) {
            return;
        }
        self.drawn_logged = true;
        let state = |c: Control| match self.drawn_controls.iter().find(|(d, _)| *d == c) {
            Some((_, true)) => "enabled",
            Some((_, false)) => "disabled",
            None => "absent",
        };
        let all: Vec<String> = Control::ALL.iter().map(|&c| format!("{} {}", c.id(), state(c))).collect();
        log::info!("oomlab: teacher link drawn: {}", all.join(", "));
    }
    /// The link for `settings` in `lang`, with the open lesson chapter or challenge, and the
    /// controls the teacher chose to lock or hide.
    pub fn teacher_link(&self, settings: &Settings, lang: Lang, lock: &[Control], hide: &[Control]) -> String {
        let mut link = format!("{}&lang={}", settings.to_url_hash(), lang.code());
        if let Some(l) = &self.lesson {
            link.push_str(&format!("&lesson={}", l.chapter + 1));
        }
        if let Some(c) = &self.challenge {
            link.push_str(&format!("&challenge={}", challenges::challenges()[c.index].id));
        }
        let r = Restrictions { locked: lock.to_vec(), hidden: hide.to_vec(), pinned: None };
        link.push_str(&r.to_url_fields());
        link
    }
}

#[cfg(test)]
mod tests;
