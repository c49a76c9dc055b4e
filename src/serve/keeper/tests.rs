//! The keeper against a store whose commits fail.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::class::{Answer, Question, SetChapter};
use crate::serve::store::SqliteStore;

/// SQLite whose commits fail while `fail` is set (a full disk).
struct Flaky {
    inner: SqliteStore,
    fail: Arc<AtomicBool>,
}

impl Store for Flaky {
    fn begin(&mut self) -> Result<(), StoreError> {
        self.inner.begin()
    }
    fn commit(&mut self) -> Result<(), StoreError> {
        if self.fail.load(Ordering::Relaxed) {
            return Err(StoreError::File(std::io::Error::other("disk full")));
        }
        self.inner.commit()
    }
    fn rollback(&mut self) {
        self.inner.rollback();
    }
    fn put_class(&mut self, class: &ClassRow) -> Result<(), StoreError> {
        self.inner.put_class(class)
    }
    fn put_student(&mut self, student: &StudentRow) -> Result<(), StoreError> {
        self.inner.put_student(student)
    }
    fn put_answer(&mut self, code: &str, answer: &StoredAnswer) -> Result<(), StoreError> {
        self.inner.put_answer(code, answer)
    }
    fn delete_class(&mut self, code: &str) -> Result<(), StoreError> {
        self.inner.delete_class(code)
    }
    fn delete_student(&mut self, code: &str, id: &str) -> Result<(), StoreError> {
        self.inner.delete_student(code, id)
    }
    fn classes(&mut self) -> Result<Vec<ClassRow>, StoreError> {
        self.inner.classes()
    }
    fn students(&mut self) -> Result<Vec<StudentRow>, StoreError> {
        self.inner.students()
    }
    fn answers(&mut self, code: &str, chapter: Option<u32>) -> Result<Vec<StoredAnswer>, StoreError> {
        self.inner.answers(code, chapter)
    }
    fn answer_counts(&mut self, code: &str) -> Result<HashMap<String, u32>, StoreError> {
        self.inner.answer_counts(code)
    }
    fn chapters(&mut self, code: &str) -> Result<Vec<u32>, StoreError> {
        self.inner.chapters(code)
    }
}

/// Sends one request as a batch of its own and returns its reply.
fn ask<T>(keeper: &mut Keeper<Flaky>, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, Refusal> {
    let (tx, rx) = oneshot::channel();
    keeper.handle_batch(vec![make(tx)]);
    rx.blocking_recv().unwrap_or(Err(Refusal::Stopping))
}

#[test]
fn a_failed_commit_refills_no_rate_limit() {
    let dir = tempfile::tempdir().expect("a directory");
    let fail = Arc::new(AtomicBool::new(false));
    let store = Flaky { inner: SqliteStore::open(&dir.path().join("c.sqlite")).expect("a store"), fail: fail.clone() };
    let limits = Limits { answer_burst: 2, answer_every: Duration::from_secs(600), ..Limits::default() };
    let mut keeper = Keeper::open(store, limits).expect("a keeper");
    let class = ask(&mut keeper, |tx| Request::Create(Create::default(), tx)).expect("a class");
    let set = SetChapter { chapter: 1, question: Question::Number, prompt: None };
    let token = Some(class.teacher_token.clone());
    let code = class.code.clone();
    ask(&mut keeper, |tx| Request::Teacher(code.clone(), token, TeacherAction::SetChapter(Ok(set), tx)))
        .expect("a chapter");
    let from = IpAddr::from([127, 0, 0, 3]);
    let student = ask(&mut keeper, |tx| Request::Join(code.clone(), Join::default(), from, tx)).expect("joined");
    let answer = |keeper: &mut Keeper<Flaky>| {
        let body = AnswerBody { student: student.student.clone(), chapter: 1, answer: Answer::Number(1.0), round: 1 };
        ask(keeper, |tx| Request::Answer(code.clone(), body, tx))
    };
    assert!(answer(&mut keeper).is_ok() && answer(&mut keeper).is_ok());
    assert_eq!(answer(&mut keeper), Err(Refusal::TooFast));
    // The disk fills: the batch fails and the keeper reads its classes back.
    fail.store(true, Ordering::Relaxed);
    assert!(matches!(answer(&mut keeper), Err(Refusal::Store(_))));
    fail.store(false, Ordering::Relaxed);
    // The student's bucket is still empty: a failed commit gave no free answers.
    assert_eq!(answer(&mut keeper), Err(Refusal::TooFast));
    // The class and the student are still there.
    let state = ask(&mut keeper, |tx| Request::State(code.clone(), tx)).expect("the class");
    assert_eq!((state.students, state.answered), (1, 1));
}
