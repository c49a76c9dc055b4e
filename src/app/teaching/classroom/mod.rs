//! Teach a class: the teacher's side of `oomlab serve`. The class follows the lesson panel: the
//! chapter the teacher opens goes to every student as a question (its words in both languages,
//! from the catalogs, with the live numbers and without the answer), the class's guesses come
//! back live, and the lesson's reveal — once its real step has run — sends the true answer. The
//! projector shows the guesses without names ([`projector`]); [`net`] talks to the server.

pub mod full;
pub mod net;
pub mod projector;

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender, channel};

use crate::class::{
    Answer, ClassState, Create, Created, Lock, Pick, Prompt, Question as Asked, Reveal, Roster, SecondRound, SetChapter,
};
use crate::i18n::{Catalog, Lang};

use super::lesson_state::{LessonState, agree};
use super::lessons::{Facts, Question, Verdict, chapters};
use crate::app::settings::Settings;
pub use net::{Failure, Msg};

/// Where the class is.
#[derive(Debug, Default)]
pub enum Phase {
    /// No class: the panel offers to start one.
    #[default]
    Off,
    /// `POST /api/classes` is on its way.
    Creating,
    /// The class runs.
    Live(Box<Created>),
}

/// The teacher's class.
pub struct Classroom {
    /// Whether the class panel is open.
    pub open: bool,
    /// The class server's address (`http://host:port`, no trailing slash).
    pub server: String,
    /// How the next class starts: the server's key, its expected size.
    pub start: StartOptions,
    pub phase: Phase,
    /// The class as the server last said.
    pub state: Option<ClassState>,
    /// The current chapter's answers with their voting round (no names are kept): what the
    /// distributions draw.
    pub answers: Vec<(u32, Answer)>,
    /// The last failure, to show until the next success.
    pub failure: Option<Failure>,
    /// What of the lesson the class was sent.
    sync: LessonSync,
    /// A results request is on its way (`Some`), and another is wanted after it (`Some(true)`).
    fetching: Option<bool>,
    /// What the projector shows: the side panel or the full-screen view.
    pub projection: Projection,
    /// The answers file the teacher asked for, when it arrives.
    pub csv: Option<Vec<u8>>,
    /// The students with their names, while the teacher's list is open.
    pub students: StudentList,
    stream: Option<net::Stream>,
    inbox: Receiver<Msg>,
    outbox: Sender<Msg>,
}

/// What the projector shows of the class.
#[derive(Debug, Default)]
pub struct Projection {
    /// The full-screen view for the back of the room ([`full`]), instead of the side panel.
    pub full: bool,
    /// The guesses last logged (the browser test reads the log).
    logged: String,
}

/// How the teacher starts a class.
#[derive(Debug, Default)]
pub struct StartOptions {
    /// The server's teacher key, for a server on another computer (its own computer needs
    /// none). The web app takes it from the teacher's link (`#teach&key=…`).
    pub key: String,
    /// The class's expected size (0: none): past it, students wait to be let in.
    pub expected: u32,
}

/// What of the lesson the class was sent.
#[derive(Debug, Default)]
struct LessonSync {
    /// The chapter and question last sent, so a change (another chapter, new numbers, another
    /// language) is sent once.
    sent: Option<SetChapter>,
    /// The chapter whose true answer was sent.
    revealed: Option<u32>,
    /// The settings the last question was computed for, and the chapter index.
    asked_for: Option<(usize, Settings)>,
    /// The plan's answer to the revealed chapter, beside the step's that was sent (None when
    /// the answer read no step), and whether the two differ.
    planned: Option<Answer>,
    differs: bool,
}

/// The teacher's list of students with their names: fetched only while it is open (it is
/// folded away by default, since names are not for the projector).
#[derive(Debug, Default)]
pub struct StudentList {
    pub open: bool,
    pub roster: Option<Roster>,
    /// The class's (students, waiting) counts the list was fetched for.
    fetched_for: Option<(u32, u32)>,
}

/// Where a client with no address of its own finds the class server.
pub fn default_server() -> String {
    #[cfg(target_arch = "wasm32")]
    if let Some(origin) = web_sys::window().and_then(|w| w.location().origin().ok()).filter(|o| o.starts_with("http")) {
        return origin;
    }
    "http://127.0.0.1:8080".to_string()
}

impl Default for Classroom {
    fn default() -> Self {
        let (outbox, inbox) = channel();
        Classroom {
            open: false,
            server: default_server(),
            start: StartOptions::default(),
            phase: Phase::Off,
            state: None,
            answers: Vec::new(),
            failure: None,
            sync: LessonSync::default(),
            fetching: None,
            projection: Projection::default(),
            csv: None,
            students: StudentList::default(),
            stream: None,
            inbox,
            outbox,
        }
    }
}

/// One text in each of the app's languages.
fn words(
    key: &str,
    args: &dyn Fn(&Catalog) -> Vec<(&'static str, String)>,
    catalogs: &[Catalog],
) -> BTreeMap<String, String> {
    catalogs
        .iter()
        .map(|t| {
            let a = args(t);
            let values: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
                a.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
            (t.lang().code().to_string(), t.format(key, &values))
        })
        .collect()
}

/// The question a chapter asks the class, in both languages, for these facts: the lesson's own
/// question text (never its body, whose figures would give the answer away).
pub fn chapter_question(index: usize, facts: &Facts) -> Option<SetChapter> {
    let all = chapters();
    let chapter = all.get(index)?;
    let catalogs: Vec<Catalog> = Lang::ALL.iter().map(|l| Catalog::new(*l)).collect();
    let question = words(&format!("lesson-{}-question", chapter.id), &|t| (chapter.args)(facts, t), &catalogs);
    let (asked, options, unit) = match &chapter.question {
        Question::Ratio { .. } => (Asked::Number, Vec::new(), Some("×".to_string())),
        Question::Choice { options, .. } => (
            Asked::Choice { options: options.iter().map(|k| k.to_string()).collect() },
            options.iter().map(|k| words(k, &|_| Vec::new(), &catalogs)).collect(),
            None,
        ),
    };
    let chapter_number = u32::try_from(index + 1).ok()?;
    let setting = words("class-setting", &|t| setting_args(chapter, facts, t), &catalogs);
    let prompt = Prompt { question, options, unit, setting };
    Some(SetChapter { chapter: chapter_number, question: asked, prompt: Some(prompt) })
}

/// The setting a chapter's question is about, in words: the toy's model, batch, sequence, budget
/// and techniques, or the real model and its GPUs — what the students' phones show above the
/// question (the lesson's settings, never a figure the answer follows from).
fn setting_args(chapter: &super::lessons::Chapter, facts: &Facts, t: &Catalog) -> Vec<(&'static str, String)> {
    let s = &facts.settings;
    if chapter.tab == crate::app::Tab::RealModels {
        let e = &s.estimate.0;
        let model = e.arch.name.clone();
        let gpus = format!("{} × {}", e.parallel.data, e.gpu.name);
        return vec![("what", t.format("class-setting-real", &[("model", model.into()), ("gpus", gpus.into())]))];
    }
    let args = [
        ("model", t.text(&format!("preset-{}", s.preset.name())).into()),
        ("batch", s.batch.to_string().into()),
        ("seq", s.seq.to_string().into()),
        ("budget", crate::app::views::size(t, s.device.budget_bytes).into()),
        ("techniques", crate::app::views::describe(t, &s.techniques()).into()),
    ];
    vec![("what", t.format("class-setting-toy", &args))]
}

/// The chapter's explanation (its revealed answer's words) in both languages, for the phones.
fn explanation(index: usize, facts: &Facts) -> BTreeMap<String, String> {
    let Some(chapter) = chapters().into_iter().nth(index) else { return BTreeMap::new() };
    let catalogs: Vec<Catalog> = Lang::ALL.iter().map(|l| Catalog::new(*l)).collect();
    let mut out = words(&format!("lesson-{}-answer", chapter.id), &|t| (chapter.answer_args)(facts, t), &catalogs);
    // Bounded as the contract bounds it: a long one is cut at a word.
    for text in out.values_mut() {
        if text.chars().count() > crate::class::MAX_PROMPT_CHARS {
            *text = text.chars().take(crate::class::MAX_PROMPT_CHARS - 1).collect::<String>() + "…";
        }
    }
    out
}

/// A verdict's answer, as the class contract writes it.
pub fn answer_of(question: &Question, verdict: &Verdict) -> Option<Answer> {
    match (question, verdict) {
        (Question::Ratio { .. }, Verdict::Ratio { answer, .. }) => {
            answer.is_finite().then_some(Answer::Number(*answer))
        }
        (Question::Choice { options, .. }, Verdict::Choice { answer, .. }) => {
            options.get(*answer).map(|k| Answer::Choice(k.to_string()))
        }
        _ => None,
    }
}

/// A chapter's true answer for these facts, as the class contract writes it (what the tests
/// compare the reveal's with).
#[cfg(test)]
pub fn chapter_answer(index: usize, facts: &Facts) -> Option<Answer> {
    let all = chapters();
    match &all.get(index)?.question {
        Question::Ratio { answer, .. } => answer(facts).filter(|x| x.is_finite()).map(Answer::Number),
        Question::Choice { options, answer } => options.get(answer(facts)?).map(|k| Answer::Choice(k.to_string())),
    }
}

impl Classroom {
    fn reply(&self, ctx: Option<&egui::Context>) -> net::Reply {
        net::Reply { tx: self.outbox.clone(), ctx: ctx.cloned() }
    }

    /// The running class, if any.
    pub fn class(&self) -> Option<&Created> {
        match &self.phase {
            Phase::Live(c) => Some(c),
            _ => None,
        }
    }

    /// Takes the server's teacher key out of a teacher's link (`#teach&key=…`, what
    /// `oomlab serve` prints for another computer): the next class starts with it, and the link
    /// goes into the address bar without it (the projector shows that bar to the room), and is
    /// returned. `None` when the link has no key.
    pub fn take_key_from_link(&mut self, hash: &str) -> Option<String> {
        let fields: Vec<&str> = hash.trim_start_matches('#').split('&').collect();
        let key = fields.iter().find_map(|kv| kv.strip_prefix("key="))?;
        self.start.key = key.to_string();
        let rest: Vec<&str> = fields.into_iter().filter(|kv| !kv.starts_with("key=")).collect();
        let rest = format!("#{}", rest.join("&"));
        crate::app::lang::set_page_link(&rest);
        Some(rest)
    }

    /// Asks the server for a class.
    pub fn start(&mut self, ctx: Option<&egui::Context>) {
        self.server = self.server.trim().trim_end_matches('/').to_string();
        self.failure = None;
        self.phase = Phase::Creating;
        let key = self.start.key.trim();
        let expected = self.start.expected;
        let create = Create { expected: (expected > 0).then_some(expected) };
        net::create(&self.server, (!key.is_empty()).then_some(key), &create, self.reply(ctx));
    }

    /// Locks the class (no one else joins) or opens it again.
    pub fn lock(&mut self, locked: bool, ctx: Option<&egui::Context>) {
        self.act("lock", &Lock { locked }, ctx);
    }

    /// Lets these students in (and with `all_waiting`, everyone who waits).
    pub fn admit(&mut self, pick: Pick, ctx: Option<&egui::Context>) {
        self.act("admit", &pick, ctx);
        self.students.fetched_for = None;
    }

    /// Removes these students with their answers (and with `all_waiting`, everyone who waits).
    pub fn remove(&mut self, pick: Pick, ctx: Option<&egui::Context>) {
        self.act("remove", &pick, ctx);
        self.students.fetched_for = None;
    }

    /// Asks for the students' list when it is open and the class's counts changed since.
    pub fn refresh_roster(&mut self, ctx: Option<&egui::Context>) {
        let counts = self.state.as_ref().map(|s| (s.students, s.waiting));
        if !self.students.open || counts.is_none() || self.students.fetched_for == counts {
            return;
        }
        if let Some(class) = self.class() {
            net::roster(&self.server, class, self.reply(ctx));
            self.students.fetched_for = counts;
        }
    }

    /// A teacher's action on the running class.
    fn act(&self, action: &str, body: &impl serde::Serialize, ctx: Option<&egui::Context>) {
        if let Some(class) = self.class() {
            net::act(&self.server, class, action, body, self.reply(ctx));
        }
    }

    /// Opens the current chapter's second vote: the first round's spread stays on the projector
    /// (without the answer), each student votes again.
    pub fn second_round(&mut self, ctx: Option<&egui::Context>) {
        if let Some(chapter) = self.state.as_ref().and_then(|s| s.chapter) {
            self.act("round", &SecondRound { chapter }, ctx);
        }
    }

    /// The current chapter's answers in `round`.
    pub fn round_answers(&self, round: u32) -> Vec<Answer> {
        self.answers.iter().filter(|(r, _)| *r == round).map(|(_, a)| a.clone()).collect()
    }

    /// Ends the class for everyone (its answers stay on the server until it expires).
    pub fn close(&mut self, ctx: Option<&egui::Context>) {
        self.act("close", &serde_json::json!({}), ctx);
    }

    /// Asks for every chapter's answers as CSV.
    pub fn download_csv(&mut self, ctx: Option<&egui::Context>) {
        if let Some(class) = self.class() {
            net::csv(&self.server, class, self.reply(ctx));
        }
    }

    /// Takes what the server sent since the last frame.
    pub fn poll(&mut self, ctx: Option<&egui::Context>) {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                Msg::Created(Ok(created)) => {
                    log::info!("oomlab: class started: {} at {}", created.code, created.join_url);
                    self.stream = Some(net::Stream::follow(&self.server, &created.code, self.reply(ctx)));
                    self.phase = Phase::Live(Box::new(created));
                    (self.sync, self.state, self.answers) = (LessonSync::default(), None, Vec::new());
                    (self.students.roster, self.students.fetched_for) = (None, None);
                }
                Msg::Created(Err(f)) => {
                    self.phase = Phase::Off;
                    self.failure = Some(f);
                }
                Msg::Acted(Ok(state)) | Msg::State(state) => self.take_state(state, ctx),
                Msg::Results(Ok(results)) => {
                    let again = self.fetching.take() == Some(true);
                    if self.state.as_ref().and_then(|s| s.chapter) == Some(results.chapter) {
                        self.answers = results.answers.into_iter().map(|a| (a.round, a.answer)).collect();
                    }
                    if again {
                        self.fetch_results(ctx);
                    }
                }
                Msg::Csv(Ok(bytes)) => self.csv = Some(bytes),
                Msg::Roster(Ok(roster)) => self.students.roster = Some(roster),
                Msg::Acted(Err(f)) | Msg::Csv(Err(f)) | Msg::Roster(Err(f)) => self.failure = Some(f),
                Msg::Results(Err(f)) => {
                    self.fetching = None;
                    self.failure = Some(f);
                }
                Msg::StreamEnded => {
                    // A closed class's stream ends; otherwise follow it again (the server may
                    // have restarted: the class and its answers are on its disk).
                    let closed = self.state.as_ref().is_some_and(|s| s.closed);
                    if let (false, Some(class)) = (closed, self.class()) {
                        let code = class.code.clone();
                        self.stream = Some(net::Stream::follow(&self.server, &code, self.reply(ctx)));
                    }
                }
            }
        }
    }

    fn take_state(&mut self, state: ClassState, ctx: Option<&egui::Context>) {
        // A removed student's answers leave the results: the count of students changes too.
        let key = |s: &ClassState| (s.chapter, s.round, s.answered, s.students);
        let before = self.state.as_ref().map(key);
        if self.state.as_ref().map(|s| s.chapter) != Some(state.chapter) {
            self.answers.clear();
        }
        let changed = before != Some(key(&state));
        // In the second round the first round's answers are still to be drawn.
        let counted = state.chapter.is_some() && (state.answered > 0 || state.round > 1);
        if state.answered == 0 {
            // The round's last answer was removed (or none came yet).
            self.answers.retain(|(r, _)| *r != state.round);
        }
        self.state = Some(state);
        self.failure = None;
        if changed && counted {
            self.fetch_results(ctx);
        }
        self.refresh_roster(ctx);
    }

    fn fetch_results(&mut self, ctx: Option<&egui::Context>) {
        let chapter = self.state.as_ref().and_then(|s| s.chapter);
        if self.class().is_none() || chapter.is_none() {
            return;
        }
        if self.fetching.is_some() {
            self.fetching = Some(true);
            return;
        }
        self.fetching = Some(false);
        if let (Some(class), Some(chapter)) = (self.class(), chapter) {
            net::results(&self.server, class, chapter, self.reply(ctx));
        }
    }

    /// Keeps the class on the lesson's chapter: sends its question when the chapter or its
    /// numbers change, and its true answer once the lesson is revealed and its real step ran.
    pub fn follow_lesson(
        &mut self,
        lesson: Option<&LessonState>,
        settings: &Settings,
        vocab: usize,
        step_done: bool,
        ctx: Option<&egui::Context>,
    ) {
        let Some(lesson) = lesson else { return };
        if self.class().is_none() || self.state.as_ref().is_some_and(|s| s.closed) {
            return;
        }
        let fresh = self.sync.asked_for.as_ref().is_some_and(|(i, s)| *i == lesson.chapter && s == settings);
        let revealing = lesson.verdict.is_some() && step_done;
        let number = u32::try_from(lesson.chapter + 1).unwrap_or(u32::MAX);
        if fresh && (!revealing || self.sync.revealed == Some(number)) {
            return;
        }
        let Some(facts) = Facts::new(settings, vocab) else { return };
        if !fresh {
            self.sync.asked_for = Some((lesson.chapter, settings.clone()));
            if let Some(set) = chapter_question(lesson.chapter, &facts)
                && self.sync.sent.as_ref() != Some(&set)
            {
                if self.sync.sent.as_ref().map(|s| s.chapter) != Some(set.chapter) {
                    self.sync.revealed = None;
                }
                self.act("chapter", &set, ctx);
                self.sync.sent = Some(set);
            }
        }
        // The answer sent is the lesson's: read from the reveal's real step where the chapter
        // reads one; the plan's is kept beside it for the projector.
        let question = &chapters()[lesson.chapter].question;
        if revealing
            && self.sync.revealed != Some(number)
            && let Some(answer) = lesson.verdict.as_ref().and_then(|v| answer_of(question, v))
        {
            let explanation = explanation(lesson.chapter, &facts);
            self.act("reveal", &Reveal { chapter: number, answer, explanation }, ctx);
            self.sync.revealed = Some(number);
            self.sync.planned =
                lesson.planned.as_ref().filter(|_| lesson.from_step).and_then(|v| answer_of(question, v));
            self.sync.differs = lesson.from_step
                && lesson.planned.as_ref().zip(lesson.verdict.as_ref()).is_some_and(|(p, v)| !agree(p, v));
        }
    }

    /// The catalog's words for a failure.
    pub fn failure_text(&self, t: &Catalog) -> Option<String> {
        let f = self.failure.as_ref()?;
        Some(match f {
            Failure::Unreachable => t.format("class-unreachable", &[("server", self.server.as_str().into())]),
            Failure::Unreadable => t.format("class-unreadable", &[("server", self.server.as_str().into())]),
            Failure::Refused(404, _) if self.class().is_none() => {
                t.format("class-unreachable", &[("server", self.server.as_str().into())])
            }
            Failure::Refused(404, _) => t.text("class-gone"),
            // Refused a class: this computer is not the server's and has no (right) key.
            Failure::Refused(403, _) if self.class().is_none() => t.text("class-key-needed"),
            Failure::Refused(401 | 403, _) => t.text("class-not-yours"),
            Failure::Refused(409, _) => t.text("class-moved-on"),
            Failure::Refused(422, _) => t.text("class-invalid"),
            Failure::Refused(503, reason) if reason.contains(crate::class::NOT_SAVED) => t.text("class-not-saved"),
            Failure::Refused(429 | 503, _) => t.text("class-busy"),
            Failure::Refused(status, _) => t.format("class-failed", &[("status", status.to_string().into())]),
        })
    }
}

#[cfg(test)]
mod tests;
