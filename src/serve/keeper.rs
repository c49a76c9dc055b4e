//! The keeper: one thread that owns the store and every class's live state. HTTP handlers send
//! it [`Request`]s and await the reply. It handles every request waiting in its queue in one
//! transaction, commits it (one disk sync for the lot, which is how 400 answers in a second fit
//! on a laptop's disk), and only then replies and publishes the classes' new states. So an
//! acknowledged answer is always on disk, and no two requests race.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use subtle::ConstantTimeEq;
use tokio::sync::{oneshot, watch};

pub use super::rules::{Limits, Refusal};
use super::rules::{now_ms, now_s, random_code, random_hex};
use super::store::{ClassRow, Store, StoreError, StudentRow};
use crate::class::{self, Accepted, AnswerBody, ClassState, Created, Invalid, Join, Joined, Results, StoredAnswer};

type Reply<T> = oneshot::Sender<Result<T, Refusal>>;

/// What the teacher asks, with the token.
pub enum TeacherAction {
    SetChapter(class::SetChapter, Reply<ClassState>),
    Reveal(class::Reveal, Reply<ClassState>),
    Close(Reply<ClassState>),
    Results(u32, Reply<Results>),
    Answers(Reply<Vec<StoredAnswer>>),
}

/// A request to the keeper.
pub enum Request {
    Create(Reply<Created>),
    /// A class's live state, to read or follow.
    Subscribe(String, Reply<watch::Receiver<ClassState>>),
    Join(String, Join, Reply<Joined>),
    Answer(String, AnswerBody, Reply<Accepted>),
    /// A teacher's action: the code, the token (if any), the action.
    Teacher(String, Option<String>, TeacherAction),
}

struct Student {
    name: Option<String>,
    /// Answer tokens left, and when they were last counted.
    tokens: f64,
    counted: Instant,
}

struct Live {
    row: ClassRow,
    students: HashMap<String, Student>,
    /// Who answered the current chapter.
    answered: HashSet<String>,
    tx: watch::Sender<ClassState>,
}

impl Live {
    fn state(&self) -> ClassState {
        ClassState {
            code: self.row.code.clone(),
            chapter: self.row.chapter,
            question: self.row.question.clone(),
            prompt: self.row.prompt.clone(),
            revealed: self.row.revealed.clone(),
            closed: self.row.closed,
            students: self.students.len().try_into().unwrap_or(u32::MAX),
            answered: self.answered.len().try_into().unwrap_or(u32::MAX),
            expires_at: self.row.expires_at,
        }
    }
}

/// The keeper's state.
pub struct Keeper<S: Store> {
    store: S,
    limits: Limits,
    classes: HashMap<String, Live>,
}

/// What to do once the batch's transaction is settled: reply (with the result if it committed,
/// with a store failure if not).
type Settle = Box<dyn FnOnce(Result<(), &Refusal>) + Send>;

fn settle<T: Send + 'static>(reply: Reply<T>, result: Result<T, Refusal>) -> Settle {
    Box::new(move |committed| {
        let _ = reply.send(match committed {
            Ok(()) => result,
            Err(failure) => Err(failure.clone()),
        });
    })
}

impl<S: Store> Keeper<S> {
    /// Loads every stored class (deleting the expired ones).
    pub fn open(store: S, limits: Limits) -> Result<Keeper<S>, StoreError> {
        let mut keeper = Keeper { store, limits, classes: HashMap::new() };
        keeper.load()?;
        keeper.expire()?;
        Ok(keeper)
    }

    fn load(&mut self) -> Result<(), StoreError> {
        let old = std::mem::take(&mut self.classes);
        for row in self.store.classes()? {
            let answered = match row.chapter {
                Some(ch) => self.store.answers(&row.code, Some(ch))?.into_iter().map(|a| a.student).collect(),
                None => HashSet::new(),
            };
            // A subscriber follows the same channel across a reload.
            let tx = match old.get(&row.code) {
                Some(live) => live.tx.clone(),
                None => watch::channel(placeholder(&row.code)).0,
            };
            self.classes.insert(row.code.clone(), Live { row, students: HashMap::new(), answered, tx });
        }
        for s in self.store.students()? {
            if let Some(live) = self.classes.get_mut(&s.code) {
                let student =
                    Student { name: s.name, tokens: f64::from(self.limits.answer_burst), counted: Instant::now() };
                live.students.insert(s.id, student);
            }
        }
        for live in self.classes.values() {
            live.tx.send_replace(live.state());
        }
        Ok(())
    }

    /// Deletes the classes past their time; their followers see them closed, then their stream ends.
    fn expire(&mut self) -> Result<(), StoreError> {
        let now = now_s();
        let expired: Vec<String> =
            self.classes.values().filter(|l| l.row.expires_at <= now).map(|l| l.row.code.clone()).collect();
        if expired.is_empty() {
            return Ok(());
        }
        self.store.begin()?;
        for code in &expired {
            if let Err(e) = self.store.delete_class(code) {
                self.store.rollback();
                return Err(e);
            }
        }
        self.store.commit()?;
        for code in expired {
            if let Some(mut live) = self.classes.remove(&code) {
                live.row.closed = true;
                live.tx.send_replace(live.state());
            }
        }
        Ok(())
    }

    /// Runs until every sender is gone.
    pub fn run(mut self, requests: Receiver<Request>) {
        const BATCH: usize = 1024;
        let sweep = self.limits.sweep_every;
        let mut swept = Instant::now();
        loop {
            let first = match requests.recv_timeout(sweep.saturating_sub(swept.elapsed())) {
                Ok(r) => r,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = self.expire() {
                        log::error!("class server: deleting expired classes failed: {e}");
                    }
                    swept = Instant::now();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match requests.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.handle_batch(batch);
            if swept.elapsed() >= sweep {
                if let Err(e) = self.expire() {
                    log::error!("class server: deleting expired classes failed: {e}");
                }
                swept = Instant::now();
            }
        }
    }

    /// Handles a batch in one transaction, commits, then replies.
    pub fn handle_batch(&mut self, batch: Vec<Request>) {
        let mut settles: Vec<Settle> = Vec::with_capacity(batch.len());
        let mut changed: HashSet<String> = HashSet::new();
        let mut failure = self.store.begin().err().map(|e| Refusal::Store(e.to_string()));
        for request in batch {
            if let Some(f) = &failure {
                settles.push(refuse_all(request, f.clone()));
                continue;
            }
            match self.handle(request, &mut changed) {
                Ok(s) => settles.push(s),
                Err((s, e)) => {
                    settles.push(s);
                    failure = Some(Refusal::Store(e.to_string()));
                }
            }
        }
        if failure.is_none()
            && let Err(e) = self.store.commit()
        {
            failure = Some(Refusal::Store(e.to_string()));
        }
        if let Some(f) = &failure {
            log::error!("class server: {f}");
            self.store.rollback();
            // Memory may hold what the disk does not: read the disk back.
            if let Err(e) = self.load() {
                log::error!("class server: reloading the classes failed: {e}");
            }
        }
        for s in settles {
            s(match &failure {
                None => Ok(()),
                Some(f) => Err(f),
            });
        }
        if failure.is_none() {
            for code in changed {
                if let Some(live) = self.classes.get(&code) {
                    live.tx.send_replace(live.state());
                }
            }
        }
    }

    /// One request: its effect on memory and in the open transaction. A store failure comes back
    /// with the request's settle, and fails the whole batch.
    fn handle(&mut self, request: Request, changed: &mut HashSet<String>) -> Result<Settle, (Settle, StoreError)> {
        match request {
            Request::Create(reply) => outcome(reply, self.create(), None),
            Request::Subscribe(code, reply) => {
                let result = self.classes.get(&code).map(|l| l.tx.subscribe()).ok_or(Refusal::NoClass);
                Ok(settle(reply, result))
            }
            Request::Join(code, join, reply) => {
                let result = self.join(&code, join);
                outcome(reply, result, Some((changed, code)))
            }
            Request::Answer(code, body, reply) => {
                let result = self.answer(&code, body);
                outcome(reply, result, Some((changed, code)))
            }
            Request::Teacher(code, token, action) => self.teacher(code, token, action, changed),
        }
    }

    fn create(&mut self) -> Result<Result<Created, Refusal>, StoreError> {
        let open = self.classes.values().filter(|l| !l.row.closed).count();
        if open >= self.limits.max_classes {
            return Ok(Err(Refusal::TooManyClasses(self.limits.max_classes)));
        }
        let code = loop {
            match random_code() {
                Ok(c) if !self.classes.contains_key(&c) => break c,
                Ok(_) => continue,
                Err(r) => return Ok(Err(r)),
            }
        };
        let token = match random_hex(32) {
            Ok(t) => t,
            Err(r) => return Ok(Err(r)),
        };
        let now = now_s();
        let lifetime = i64::try_from(self.limits.class_lifetime.as_secs()).unwrap_or(i64::MAX);
        let row = ClassRow {
            code: code.clone(),
            token: token.clone(),
            created_at: now,
            expires_at: now.saturating_add(lifetime),
            chapter: None,
            question: None,
            prompt: None,
            revealed: None,
            closed: false,
        };
        self.store.put_class(&row)?;
        let expires_at = row.expires_at;
        let tx = watch::channel(placeholder(&code)).0;
        let live = Live { row, students: HashMap::new(), answered: HashSet::new(), tx };
        live.tx.send_replace(live.state());
        self.classes.insert(code.clone(), live);
        // The join address and its QR code are the HTTP layer's: it knows the public address.
        Ok(Ok(Created { code, teacher_token: token, expires_at, join_url: String::new(), qr: Vec::new() }))
    }

    fn join(&mut self, code: &str, join: Join) -> Result<Result<Joined, Refusal>, StoreError> {
        let Some(live) = self.classes.get_mut(code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        if live.students.len() >= self.limits.max_students {
            return Ok(Err(Refusal::ClassFull(self.limits.max_students)));
        }
        let name = match class::clean_name(join.name.as_deref()) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e.into())),
        };
        let id = match random_hex(16) {
            Ok(id) => id,
            Err(r) => return Ok(Err(r)),
        };
        self.store.put_student(&StudentRow {
            code: code.to_string(),
            id: id.clone(),
            name: name.clone(),
            joined_at: now_s(),
        })?;
        let student = Student { name, tokens: f64::from(self.limits.answer_burst), counted: Instant::now() };
        live.students.insert(id.clone(), student);
        Ok(Ok(Joined { student: id }))
    }

    fn answer(&mut self, code: &str, body: AnswerBody) -> Result<Result<Accepted, Refusal>, StoreError> {
        let Some(live) = self.classes.get_mut(code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        let Some(student) = live.students.get_mut(&body.student) else { return Ok(Err(Refusal::UnknownStudent)) };
        // The rate limit: a token bucket per student session.
        let now = Instant::now();
        let every = self.limits.answer_every.as_secs_f64().max(1e-9);
        let burst = f64::from(self.limits.answer_burst);
        student.tokens = (student.tokens + now.duration_since(student.counted).as_secs_f64() / every).min(burst);
        student.counted = now;
        if student.tokens < 1.0 {
            return Ok(Err(Refusal::TooFast));
        }
        student.tokens -= 1.0;
        if live.row.chapter != Some(body.chapter) {
            return Ok(Err(Refusal::NotCurrentChapter { asked: body.chapter, current: live.row.chapter }));
        }
        if live.row.revealed.is_some() {
            return Ok(Err(Refusal::Revealed(body.chapter)));
        }
        let Some(question) = &live.row.question else {
            return Ok(Err(Refusal::NotCurrentChapter { asked: body.chapter, current: None }));
        };
        if let Err(e) = question.check_answer(&body.answer) {
            return Ok(Err(e.into()));
        }
        let stored = StoredAnswer {
            student: body.student.clone(),
            name: student.name.clone(),
            chapter: body.chapter,
            answer: body.answer.clone(),
            at_ms: now_ms(),
        };
        self.store.put_answer(code, &stored)?;
        live.answered.insert(body.student);
        let answered = live.answered.len().try_into().unwrap_or(u32::MAX);
        Ok(Ok(Accepted { chapter: body.chapter, answer: body.answer, answered }))
    }

    fn teacher(
        &mut self,
        code: String,
        token: Option<String>,
        action: TeacherAction,
        changed: &mut HashSet<String>,
    ) -> Result<Settle, (Settle, StoreError)> {
        let refusal = match (self.classes.get(&code), &token) {
            (None, _) => Some(Refusal::NoClass),
            (Some(_), None) => Some(Refusal::NoToken),
            (Some(live), Some(t)) if !bool::from(live.row.token.as_bytes().ct_eq(t.as_bytes())) => {
                Some(Refusal::WrongToken)
            }
            _ => None,
        };
        if let Some(r) = refusal {
            return Ok(refuse_teacher(action, r));
        }
        match action {
            TeacherAction::SetChapter(set, reply) => {
                // A chapter the class goes back to keeps its stored answers (the latest of each
                // student counts), so its count starts from them, as it does after a restart.
                let before: HashSet<String> = match self.store.answers(&code, Some(set.chapter)) {
                    Ok(stored) => stored.into_iter().map(|a| a.student).collect(),
                    Err(e) => return Err((settle(reply, Err(Refusal::Stopping)), e)),
                };
                let result = self.update(&code, |live| {
                    if set.chapter > class::MAX_CHAPTER {
                        return Err(Invalid::ChapterTooLarge(set.chapter).into());
                    }
                    set.question.check()?;
                    if let Some(p) = &set.prompt {
                        p.check(&set.question)?;
                    }
                    if live.row.chapter != Some(set.chapter) || live.row.question.as_ref() != Some(&set.question) {
                        live.row.chapter = Some(set.chapter);
                        live.row.question = Some(set.question);
                        live.row.revealed = None;
                        live.answered = before;
                    }
                    // The same question in other words (a language switch, new numbers) keeps
                    // the answers and the reveal.
                    live.row.prompt = set.prompt;
                    Ok(())
                });
                outcome(reply, result, Some((changed, code)))
            }
            TeacherAction::Reveal(reveal, reply) => {
                let result = self.update(&code, |live| {
                    if live.row.chapter != Some(reveal.chapter) {
                        return Err(Refusal::NotCurrentChapter { asked: reveal.chapter, current: live.row.chapter });
                    }
                    if let Some(q) = &live.row.question {
                        q.check_answer(&reveal.answer)?;
                    }
                    live.row.revealed = Some(reveal.answer);
                    Ok(())
                });
                outcome(reply, result, Some((changed, code)))
            }
            TeacherAction::Close(reply) => {
                let result = self.update(&code, |live| {
                    live.row.closed = true;
                    Ok(())
                });
                outcome(reply, result, Some((changed, code)))
            }
            TeacherAction::Results(chapter, reply) => {
                let result = self.store.answers(&code, Some(chapter)).map(|answers| {
                    let count = answers.len().try_into().unwrap_or(u32::MAX);
                    Ok(Results { chapter, count, answers })
                });
                outcome(reply, result, None)
            }
            TeacherAction::Answers(reply) => outcome(reply, self.store.answers(&code, None).map(Ok), None),
        }
    }

    /// Changes a live class's row (refused when closed) and writes it.
    fn update(
        &mut self,
        code: &str,
        change: impl FnOnce(&mut Live) -> Result<(), Refusal>,
    ) -> Result<Result<ClassState, Refusal>, StoreError> {
        let Some(live) = self.classes.get_mut(code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        if let Err(r) = change(live) {
            return Ok(Err(r));
        }
        self.store.put_class(&live.row)?;
        Ok(Ok(live.state()))
    }
}

/// A request's outcome as the batch's settle. A store failure fails the whole batch; a request
/// that changed its class (when `changed` names it) has the class's new state published.
fn outcome<T: Send + 'static>(
    reply: Reply<T>,
    result: Result<Result<T, Refusal>, StoreError>,
    changed: Option<(&mut HashSet<String>, String)>,
) -> Result<Settle, (Settle, StoreError)> {
    match result {
        Ok(r) => {
            if let (Ok(_), Some((set, code))) = (&r, changed) {
                set.insert(code);
            }
            Ok(settle(reply, r))
        }
        Err(e) => Err((settle(reply, Err(Refusal::Stopping)), e)),
    }
}

fn placeholder(code: &str) -> ClassState {
    ClassState {
        code: code.to_string(),
        chapter: None,
        question: None,
        prompt: None,
        revealed: None,
        closed: false,
        students: 0,
        answered: 0,
        expires_at: 0,
    }
}

fn refuse_teacher(action: TeacherAction, r: Refusal) -> Settle {
    match action {
        TeacherAction::SetChapter(_, reply) | TeacherAction::Reveal(_, reply) | TeacherAction::Close(reply) => {
            settle(reply, Err(r))
        }
        TeacherAction::Results(_, reply) => settle(reply, Err(r)),
        TeacherAction::Answers(reply) => settle(reply, Err(r)),
    }
}

fn refuse_all(request: Request, r: Refusal) -> Settle {
    match request {
        Request::Create(reply) => settle(reply, Err(r)),
        Request::Subscribe(_, reply) => settle(reply, Err(r)),
        Request::Join(_, _, reply) => settle(reply, Err(r)),
        Request::Answer(_, _, reply) => settle(reply, Err(r)),
        Request::Teacher(_, _, action) => refuse_teacher(action, r),
    }
}
