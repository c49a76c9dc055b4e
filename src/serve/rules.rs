//! What the class server enforces and how it says no: its [`Limits`], its [`Refusal`]s with
//! their HTTP statuses, and the random codes, tokens and clock it relies on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::limiter::Rate;
use crate::class::{self, Invalid};

/// The server's limits. The book's "Reliability, privacy and limits" lists them.
#[derive(Clone, Debug)]
pub struct Limits {
    /// How long a class lives after it is created.
    pub class_lifetime: Duration,
    /// Open classes at once on this server (a closed class frees its place at once).
    pub max_classes: usize,
    /// How long a closed class's answers stay for the teacher's CSV, and how many closed classes
    /// are kept at most (the oldest closed goes first): what the server stores is bounded.
    pub keep_closed: Duration,
    pub max_closed: usize,
    /// Students in one class, those waiting to be let in included.
    pub max_students: usize,
    /// A student's answers: a burst of this many, then one per `answer_every`.
    pub answer_burst: u32,
    pub answer_every: Duration,
    /// Joins from one network address (any class): room for a class behind one school address,
    /// not for a script.
    pub joins: Rate,
    /// Joins to one class (from every address): room for a lecture hall arriving at once, not
    /// for a few machines filling a class in a second. A class with an expected size has a
    /// burst of twice that (at least `class_joins.burst / 4`), then the same pace.
    pub class_joins: Rate,
    /// Students waiting in a class with an expected size, at most this many times that size
    /// (and at least 10): past it, the waiting room is full.
    pub waiting_per_expected: u32,
    /// Requests for classes that do not exist, from one network address.
    pub misses: Rate,
    /// The longest time between expiry checks when nothing else wakes the keeper (each class's
    /// own deadline wakes it to the second).
    pub sweep_every: Duration,
    /// A connection's time to send a request's headers, which is also how long an idle
    /// connection is kept (nginx's `client_header_timeout` and `keepalive_timeout`).
    pub header_timeout: Duration,
    /// A request's time to send its whole body (nginx's `client_body_timeout`).
    pub body_timeout: Duration,
    /// Live-event streams of one class; more are told to retry (the students' page then asks
    /// for the state every few seconds instead).
    pub followers_per_class: usize,
    /// Connections at once; `None`: as many as the process's descriptor limit allows, keeping
    /// some for the database and the runtime.
    pub max_connections: Option<usize>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            class_lifetime: Duration::from_secs(24 * 3600),
            max_classes: 100,
            keep_closed: Duration::from_secs(3600),
            max_closed: 100,
            max_students: 1000,
            answer_burst: 10,
            answer_every: Duration::from_millis(500),
            joins: Rate::per_minute(60),
            class_joins: Rate { burst: 200, every: Duration::from_millis(250) },
            waiting_per_expected: 2,
            misses: Rate { burst: 20, every: Duration::from_secs(1) },
            sweep_every: Duration::from_secs(30),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            followers_per_class: 600,
            max_connections: None,
        }
    }
}

/// Why a request was refused. [`Refusal::status`] is its HTTP status.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum Refusal {
    #[error("there is no class with this code (it may have expired)")]
    NoClass,
    #[error("this class is closed")]
    Closed,
    #[error("this needs the teacher's token (Authorization: Bearer …)")]
    NoToken,
    #[error("the teacher's token is wrong")]
    WrongToken,
    #[error("this student has not joined the class")]
    UnknownStudent,
    #[error("the class is on chapter {current:?}, not chapter {asked}")]
    NotCurrentChapter { asked: u32, current: Option<u32> },
    #[error("chapter {0} is revealed: answers are closed")]
    Revealed(u32),
    #[error("chapter {chapter} is in round {current}: round {asked} is not open")]
    NotCurrentRound { chapter: u32, asked: u32, current: u32 },
    #[error("too many answers too fast: wait a moment")]
    TooFast,
    #[error("the class is full ({0} students)")]
    ClassFull(usize),
    #[error("this server holds {0} open classes, its most: close one first")]
    TooManyClasses(usize),
    #[error(
        "only the computer the server runs on, or a teacher with the key the server printed when it started, may start a class"
    )]
    NotTeacher,
    #[error("the class is locked: the teacher lets no one else join")]
    Locked,
    #[error("this student waits for the teacher to let them in")]
    Waiting,
    #[error("this class has opened {0} chapters, its most")]
    TooManyChapters(usize),
    #[error("too many joins from this network address: wait a minute")]
    TooManyJoins,
    #[error("too many joins to this class at once: wait a moment and try again")]
    ClassJoinsBusy,
    #[error("the class's waiting room is full ({0} waiting): ask the teacher")]
    WaitingRoomFull(usize),
    #[error("too many requests for unknown classes, or with wrong keys, from this network address: wait a moment")]
    TooManyMisses,
    #[error("too many live streams of this class, or from this network address: retry in a few seconds")]
    TooManyFollowers,
    /// A request body that did not read (its status and message), reported only after the
    /// token was checked, so that a request without the right token learns nothing else.
    #[error("{message}")]
    Body { status: u16, message: String },
    #[error("{0}")]
    Invalid(#[from] Invalid),
    #[error("the class database failed: {0}; nothing was saved")]
    Store(String),
    #[error("the class server is stopping")]
    Stopping,
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::NoClass => 404,
            Refusal::NoToken => 401,
            Refusal::WrongToken | Refusal::UnknownStudent | Refusal::NotTeacher => 403,
            Refusal::Closed
            | Refusal::NotCurrentChapter { .. }
            | Refusal::Revealed(_)
            | Refusal::NotCurrentRound { .. }
            | Refusal::ClassFull(_)
            | Refusal::WaitingRoomFull(_)
            | Refusal::Waiting
            | Refusal::TooManyChapters(_) => 409,
            Refusal::Locked => 423,
            Refusal::TooFast | Refusal::TooManyJoins | Refusal::ClassJoinsBusy | Refusal::TooManyMisses => 429,
            Refusal::Body { status, .. } => *status,
            Refusal::Invalid(_) => 422,
            Refusal::TooManyClasses(_) | Refusal::Store(_) | Refusal::Stopping | Refusal::TooManyFollowers => 503,
        }
    }
}

/// Seconds and milliseconds since the Unix epoch.
pub fn now_s() -> i64 {
    now_ms() / 1000
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis().try_into().unwrap_or(i64::MAX))
}

/// A teacher token as the store keeps it: `sha256:` and the hex of its SHA-256. The token is 256
/// random bits, so a plain hash is enough: nobody can guess one from its hash.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `n` random bytes as hex, from the operating system's generator.
pub fn random_hex(n: usize) -> Result<String, Refusal> {
    let mut bytes = vec![0u8; n];
    random_bytes(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn random_bytes(bytes: &mut [u8]) -> Result<(), Refusal> {
    getrandom::fill(bytes).map_err(|e| Refusal::Store(format!("no random numbers: {e}")))
}

/// A new class code: [`class::CODE_LEN`] letters of [`class::CODE_ALPHABET`].
pub fn random_code() -> Result<String, Refusal> {
    let mut bytes = [0u8; class::CODE_LEN];
    random_bytes(&mut bytes)?;
    Ok(bytes.iter().map(|b| class::CODE_ALPHABET[usize::from(b & 31)] as char).collect())
}
