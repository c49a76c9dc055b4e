//! The keeper: one thread that owns the store and every class's live state. HTTP handlers send
//! it [`Request`]s and await the reply. It handles every request waiting in its queue in one
//! transaction, commits it (one disk sync for the lot, which is how 400 answers in a second fit
//! on a laptop's disk), and only then replies and publishes the classes' new states. So an
//! acknowledged answer is always on disk, and no two requests race.
//!
//! Time: a class is gone from the second it expires (every request checks), and the keeper
//! wakes at the next class's deadline (its expiry, a closed class's deletion, the end of a join
//! burst's window) rather than on a fixed sweep, so that followers see it then too.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

mod live;
mod teacher;
#[cfg(test)]
mod tests;

use live::{JOIN_WINDOW, Live, Student, live_in, placeholder};

use super::limiter::{Bucket, PerAddress, Rate};
pub use super::rules::{Limits, Refusal};
use super::rules::{now_ms, now_s, random_code, random_hex, token_hash};
use super::store::{ClassRow, Store, StoreError, StudentRow};
use crate::class::{
    self, Accepted, AnswerBody, ClassState, Create, Created, Invalid, Join, Joined, Lock, Me, Membership, Pick,
    Results, Roster, StoredAnswer,
};

type Reply<T> = oneshot::Sender<Result<T, Refusal>>;
/// A request body as it was read: the HTTP layer hands over its failure too, so that the keeper
/// checks the teacher's token before saying anything about the body.
pub type Body<T> = Result<T, Refusal>;

/// What the teacher asks, with the token.
pub enum TeacherAction {
    SetChapter(Body<class::SetChapter>, Reply<ClassState>),
    Reveal(Body<class::Reveal>, Reply<ClassState>),
    SecondRound(Body<class::SecondRound>, Reply<ClassState>),
    Close(Reply<ClassState>),
    Lock(Body<Lock>, Reply<ClassState>),
    Admit(Body<Pick>, Reply<ClassState>),
    Remove(Body<Pick>, Reply<ClassState>),
    Results(Body<u32>, Reply<Results>),
    Answers(Reply<Vec<StoredAnswer>>),
    Roster(Reply<Roster>),
}

/// A request to the keeper.
pub enum Request {
    /// A new class (the HTTP layer has checked that the teacher of this server asks).
    Create(Create, Reply<Created>),
    /// A class's state as it is now.
    State(String, Reply<ClassState>),
    /// A class's live state to follow (refused past [`Limits::followers_per_class`]).
    Follow(String, Reply<watch::Receiver<ClassState>>),
    /// A join, with the network address it came from.
    Join(String, Join, IpAddr, Reply<Joined>),
    Me(String, Me, Reply<Membership>),
    Answer(String, AnswerBody, Reply<Accepted>),
    /// A teacher's action: the code, the token (if any), the action.
    Teacher(String, Option<String>, TeacherAction),
}

/// The keeper's state.
pub struct Keeper<S: Store> {
    store: S,
    limits: Limits,
    classes: HashMap<String, Live>,
    /// Joins per network address (any class).
    joins: PerAddress,
    /// The next student's place in the join order.
    seq: u64,
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

/// An instant `secs` seconds of the Unix clock from now (at once when past).
fn instant_at(secs: i64, now: Instant) -> Instant {
    let ms = secs.saturating_mul(1000).saturating_sub(now_ms());
    now + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl<S: Store> Keeper<S> {
    /// Loads every stored class (deleting the expired ones).
    pub fn open(store: S, limits: Limits) -> Result<Keeper<S>, StoreError> {
        let joins = PerAddress::new(limits.joins);
        let mut keeper = Keeper { store, limits, classes: HashMap::new(), joins, seq: 0 };
        keeper.load()?;
        keeper.tick()?;
        Ok(keeper)
    }

    fn answer_rate(&self) -> Rate {
        Rate { burst: self.limits.answer_burst, every: self.limits.answer_every }
    }

    /// Reads every class back from the store. What the store does not keep carries over from
    /// memory: the followers' channels, each student's answer bucket and each class's recent
    /// joins, so that a failed commit, which reloads, refills no one's rate limit.
    fn load(&mut self) -> Result<(), StoreError> {
        let mut old = std::mem::take(&mut self.classes);
        let now = Instant::now();
        for row in self.store.classes()? {
            let answered = match row.chapter {
                Some(ch) => {
                    let stored = self.store.answers(&row.code, Some(ch))?.into_iter();
                    stored.filter(|a| a.round == row.round).map(|a| a.student).collect()
                }
                None => HashSet::new(),
            };
            let mut chapters: BTreeSet<u32> = self.store.chapters(&row.code)?.into_iter().collect();
            chapters.extend(row.chapter);
            let fresh = || Bucket::full(Live::join_rate(&self.limits, row.expected), Instant::now());
            let (tx, joins, join_bucket) = match old.get_mut(&row.code) {
                Some(live) => (live.tx.clone(), std::mem::take(&mut live.joins), live.join_bucket),
                None => (watch::channel(placeholder(&row.code)).0, VecDeque::new(), fresh()),
            };
            let live = Live { row, students: HashMap::new(), answered, chapters, joins, join_bucket, tx };
            self.classes.insert(live.row.code.clone(), live);
        }
        let rate = self.answer_rate();
        for s in self.store.students()? {
            let bucket = old
                .get(&s.code)
                .and_then(|l| l.students.get(&s.id))
                .map_or_else(|| Bucket::full(rate, now), |old| old.bucket);
            if let Some(live) = self.classes.get_mut(&s.code) {
                self.seq += 1;
                let student =
                    Student { name: s.name, joined_at: s.joined_at, seq: self.seq, waiting: s.waiting, bucket };
                live.students.insert(s.id, student);
            }
        }
        for live in self.classes.values() {
            live.publish(now);
        }
        Ok(())
    }

    /// A class that exists and has not expired.
    fn live(&mut self, code: &str) -> Option<&mut Live> {
        live_in(&mut self.classes, code)
    }

    /// What time does: deletes expired classes (their followers see them closed, then their
    /// stream ends) and closed ones past their keeping, and publishes join counts that fell.
    fn tick(&mut self) -> Result<(), StoreError> {
        let (now, now_secs) = (Instant::now(), now_s());
        let keep = self.keep_closed_secs();
        let gone: Vec<String> = self
            .classes
            .values()
            .filter(|l| {
                l.row.expires_at <= now_secs || l.row.closed_at.is_some_and(|c| c.saturating_add(keep) <= now_secs)
            })
            .map(|l| l.row.code.clone())
            .collect();
        self.delete(&gone)?;
        // A class whose burst of joins left the window has a new count to show; the others'
        // states did not change with time.
        for live in self.classes.values_mut() {
            let before = live.joins.len();
            while live.joins.front().is_some_and(|t| now.saturating_duration_since(*t) >= JOIN_WINDOW) {
                live.joins.pop_front();
            }
            if live.joins.len() != before {
                live.publish(now);
            }
        }
        Ok(())
    }

    /// Deletes these classes in a transaction of their own.
    fn delete(&mut self, codes: &[String]) -> Result<(), StoreError> {
        if codes.is_empty() {
            return Ok(());
        }
        self.store.begin()?;
        for code in codes {
            if let Err(e) = self.store.delete_class(code) {
                self.store.rollback();
                return Err(e);
            }
        }
        self.store.commit()?;
        let now = Instant::now();
        for code in codes {
            if let Some(mut live) = self.classes.remove(code) {
                live.row.closed = true;
                live.publish(now);
            }
        }
        Ok(())
    }

    /// How long a closed class is kept, in seconds.
    fn keep_closed_secs(&self) -> i64 {
        i64::try_from(self.limits.keep_closed.as_secs()).unwrap_or(i64::MAX)
    }

    /// [`Self::tick`], its failure logged (the requests go on being served).
    fn tick_logged(&mut self) {
        if let Err(e) = self.tick() {
            log::error!("class server: deleting old classes failed: {e}");
        }
    }

    /// When something next changes with time alone.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let keep = self.keep_closed_secs();
        self.classes
            .values()
            .flat_map(|l| {
                let expiry = instant_at(l.row.expires_at, now);
                let purge = l.row.closed_at.map(|c| instant_at(c.saturating_add(keep), now));
                let calm = l.joins.front().map(|t| *t + JOIN_WINDOW);
                [Some(expiry), purge, calm]
            })
            .flatten()
            .min()
    }

    /// Runs until every sender is gone.
    pub fn run(mut self, requests: Receiver<Request>) {
        const BATCH: usize = 1024;
        loop {
            let now = Instant::now();
            let wake = self.next_deadline(now).map_or(self.limits.sweep_every, |d| d.saturating_duration_since(now));
            // A floor, so that a deadline a failing store cannot clear does not spin the thread.
            let wake = wake.clamp(Duration::from_millis(20), self.limits.sweep_every.max(Duration::from_millis(20)));
            let first = match requests.recv_timeout(wake) {
                Ok(r) => r,
                Err(RecvTimeoutError::Timeout) => {
                    self.tick_logged();
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
            // Under steady traffic the wait never times out: what is due is done between batches.
            if self.next_deadline(Instant::now()).is_some_and(|d| d <= Instant::now()) {
                self.tick_logged();
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
            let now = Instant::now();
            for code in changed {
                if let Some(live) = self.classes.get(&code) {
                    live.publish(now);
                }
            }
        }
    }

    /// One request: its effect on memory and in the open transaction. A store failure comes back
    /// with the request's settle, and fails the whole batch.
    fn handle(&mut self, request: Request, changed: &mut HashSet<String>) -> Result<Settle, (Settle, StoreError)> {
        match request {
            Request::Create(create, reply) => outcome(reply, self.create(create), None),
            Request::State(code, reply) => {
                let now = Instant::now();
                let result = self.live(&code).map(|l| l.state(now)).ok_or(Refusal::NoClass);
                Ok(settle(reply, result))
            }
            Request::Follow(code, reply) => {
                let most = self.limits.followers_per_class;
                let result = match self.live(&code) {
                    None => Err(Refusal::NoClass),
                    Some(l) if l.tx.receiver_count() >= most => Err(Refusal::TooManyFollowers),
                    Some(l) => Ok(l.tx.subscribe()),
                };
                Ok(settle(reply, result))
            }
            Request::Join(code, join, from, reply) => {
                // Refused attempts count towards the class's join rate too.
                changed.insert(code.clone());
                outcome(reply, self.join(&code, join, from), None)
            }
            Request::Me(code, me, reply) => {
                let result = match self.live(&code) {
                    None => Err(Refusal::NoClass),
                    Some(l) => match l.students.get(&me.student) {
                        Some(s) => Ok(Membership { waiting: s.waiting }),
                        None => Err(Refusal::UnknownStudent),
                    },
                };
                Ok(settle(reply, result))
            }
            Request::Answer(code, body, reply) => {
                let result = self.answer(&code, body);
                outcome(reply, result, Some((changed, code)))
            }
            Request::Teacher(code, token, action) => self.teacher(code, token, action, changed),
        }
    }

    fn create(&mut self, create: Create) -> Result<Result<Created, Refusal>, StoreError> {
        let open = self.classes.values().filter(|l| !l.row.closed).count();
        if open >= self.limits.max_classes {
            return Ok(Err(Refusal::TooManyClasses(self.limits.max_classes)));
        }
        if create.expected == Some(0) {
            return Ok(Err(Invalid::ExpectedSize.into()));
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
        let most = u32::try_from(self.limits.max_students).unwrap_or(u32::MAX);
        let row = ClassRow {
            code: code.clone(),
            token_hash: token_hash(&token),
            created_at: now,
            expires_at: now.saturating_add(lifetime),
            chapter: None,
            question: None,
            prompt: None,
            revealed: None,
            explanation: Default::default(),
            closed: false,
            closed_at: None,
            locked: false,
            expected: create.expected.map(|n| n.min(most)),
            round: 1,
        };
        self.store.put_class(&row)?;
        let expires_at = row.expires_at;
        let tx = watch::channel(placeholder(&code)).0;
        let join_bucket = Bucket::full(Live::join_rate(&self.limits, row.expected), Instant::now());
        let live = Live {
            row,
            students: HashMap::new(),
            answered: HashSet::new(),
            chapters: BTreeSet::new(),
            joins: VecDeque::new(),
            join_bucket,
            tx,
        };
        live.publish(Instant::now());
        self.classes.insert(code.clone(), live);
        // The join address and its QR code are the HTTP layer's: it knows the public address.
        Ok(Ok(Created { code, teacher_token: token, expires_at, join_url: String::new(), qr: Vec::new() }))
    }

    fn join(&mut self, code: &str, join: Join, from: IpAddr) -> Result<Result<Joined, Refusal>, StoreError> {
        let now = Instant::now();
        let (max_students, rate) = (self.limits.max_students, self.answer_rate());
        let class_rate = |expected| Live::join_rate(&self.limits, expected);
        let waiting_per_expected = self.limits.waiting_per_expected;
        let Some(live) = live_in(&mut self.classes, code) else { return Ok(Err(Refusal::NoClass)) };
        live.note_join(now);
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        if live.row.locked {
            return Ok(Err(Refusal::Locked));
        }
        if !self.joins.take(from, now) {
            return Ok(Err(Refusal::TooManyJoins));
        }
        if live.students.len() >= max_students {
            return Ok(Err(Refusal::ClassFull(max_students)));
        }
        // The class's own allowance, whatever address asks: a few machines cannot fill it in a
        // second however many addresses they have.
        if !live.join_bucket.take(class_rate(live.row.expected), now) {
            return Ok(Err(Refusal::ClassJoinsBusy));
        }
        let waits = live.row.expected.is_some_and(|n| live.admitted() >= usize::try_from(n).unwrap_or(usize::MAX));
        if let Some(expected) = live.row.expected.filter(|_| waits) {
            let room = usize::try_from(expected.saturating_mul(waiting_per_expected)).unwrap_or(usize::MAX).max(10);
            if live.waiting() >= room {
                return Ok(Err(Refusal::WaitingRoomFull(live.waiting())));
            }
        }
        let name = match super::names::clean_name(join.name.as_deref()) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e.into())),
        };
        let id = match random_hex(16) {
            Ok(id) => id,
            Err(r) => return Ok(Err(r)),
        };
        let waiting = waits;
        let joined_at = now_s();
        self.store.put_student(&StudentRow {
            code: code.to_string(),
            id: id.clone(),
            name: name.clone(),
            joined_at,
            waiting,
        })?;
        self.seq += 1;
        let student = Student { name, joined_at, seq: self.seq, waiting, bucket: Bucket::full(rate, now) };
        live.students.insert(id.clone(), student);
        Ok(Ok(Joined { student: id, waiting }))
    }

    fn answer(&mut self, code: &str, body: AnswerBody) -> Result<Result<Accepted, Refusal>, StoreError> {
        let rate = self.answer_rate();
        let Some(live) = live_in(&mut self.classes, code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        let Some(student) = live.students.get_mut(&body.student) else { return Ok(Err(Refusal::UnknownStudent)) };
        if student.waiting {
            return Ok(Err(Refusal::Waiting));
        }
        // The rate limit: a token bucket per student session.
        if !student.bucket.take(rate, Instant::now()) {
            return Ok(Err(Refusal::TooFast));
        }
        if live.row.chapter != Some(body.chapter) {
            return Ok(Err(Refusal::NotCurrentChapter { asked: body.chapter, current: live.row.chapter }));
        }
        if live.row.revealed.is_some() {
            return Ok(Err(Refusal::Revealed(body.chapter)));
        }
        // A round that is over keeps its answers: a student who discussed votes in the next.
        if body.round != live.row.round {
            let (chapter, asked, current) = (body.chapter, body.round, live.row.round);
            return Ok(Err(Refusal::NotCurrentRound { chapter, asked, current }));
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
            round: body.round,
            answer: body.answer.clone(),
            at_ms: now_ms(),
        };
        self.store.put_answer(code, &stored)?;
        live.answered.insert(body.student);
        let answered = live.answered.len().try_into().unwrap_or(u32::MAX);
        Ok(Ok(Accepted { chapter: body.chapter, round: body.round, answer: body.answer, answered }))
    }

    /// Changes a live class's row (refused when closed) and writes it.
    fn update(
        &mut self,
        code: &str,
        change: impl FnOnce(&mut Live) -> Result<(), Refusal>,
    ) -> Result<Result<ClassState, Refusal>, StoreError> {
        let Some(live) = live_in(&mut self.classes, code) else { return Ok(Err(Refusal::NoClass)) };
        if live.row.closed {
            return Ok(Err(Refusal::Closed));
        }
        if let Err(r) = change(live) {
            return Ok(Err(r));
        }
        self.store.put_class(&live.row)?;
        Ok(Ok(live.state(Instant::now())))
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

fn refuse_teacher(action: TeacherAction, r: Refusal) -> Settle {
    match action {
        TeacherAction::SetChapter(_, reply)
        | TeacherAction::Reveal(_, reply)
        | TeacherAction::SecondRound(_, reply)
        | TeacherAction::Close(reply)
        | TeacherAction::Lock(_, reply)
        | TeacherAction::Admit(_, reply)
        | TeacherAction::Remove(_, reply) => settle(reply, Err(r)),
        TeacherAction::Results(_, reply) => settle(reply, Err(r)),
        TeacherAction::Answers(reply) => settle(reply, Err(r)),
        TeacherAction::Roster(reply) => settle(reply, Err(r)),
    }
}

fn refuse_all(request: Request, r: Refusal) -> Settle {
    match request {
        Request::Create(_, reply) => settle(reply, Err(r)),
        Request::State(_, reply) => settle(reply, Err(r)),
        Request::Follow(_, reply) => settle(reply, Err(r)),
        Request::Join(_, _, _, reply) => settle(reply, Err(r)),
        Request::Me(_, _, reply) => settle(reply, Err(r)),
        Request::Answer(_, _, reply) => settle(reply, Err(r)),
        Request::Teacher(_, _, action) => refuse_teacher(action, r),
    }
}
