//! What the class server enforces and how it says no: its [`Limits`], its [`Refusal`]s with
//! their HTTP statuses, and the random codes, tokens and clock it relies on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::class::{self, Invalid};

/// Limits the keeper enforces.
#[derive(Clone, Debug)]
pub struct Limits {
    /// How long a class lives after it is created.
    pub class_lifetime: Duration,
    /// Open classes at once on this server.
    pub max_classes: usize,
    /// Students in one class.
    pub max_students: usize,
    /// A student's answers: a burst of this many, then one per `answer_every`.
    pub answer_burst: u32,
    pub answer_every: Duration,
    /// How often expired classes are looked for.
    pub sweep_every: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            class_lifetime: Duration::from_secs(24 * 3600),
            max_classes: 200,
            max_students: 1000,
            answer_burst: 10,
            answer_every: Duration::from_millis(500),
            sweep_every: Duration::from_secs(30),
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
    #[error("too many answers too fast: wait a moment")]
    TooFast,
    #[error("the class is full ({0} students)")]
    ClassFull(usize),
    #[error("this server holds {0} open classes, its most: close one first")]
    TooManyClasses(usize),
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
            Refusal::WrongToken | Refusal::UnknownStudent => 403,
            Refusal::Closed | Refusal::NotCurrentChapter { .. } | Refusal::Revealed(_) | Refusal::ClassFull(_) => 409,
            Refusal::TooFast => 429,
            Refusal::Invalid(_) => 422,
            Refusal::TooManyClasses(_) | Refusal::Store(_) | Refusal::Stopping => 503,
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
