//! A class as the keeper holds it in memory: its row, its students with their rate limits, who
//! answered, the chapters it opened and its recent joins; and the state everyone may see.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::class::{self, ClassState};
use crate::serve::Limits;
use crate::serve::limiter::{Bucket, Rate};
use crate::serve::rules::now_s;
use crate::serve::store::ClassRow;

pub(super) struct Student {
    pub(super) name: Option<String>,
    pub(super) joined_at: i64,
    /// The order of joining, for the teacher's list.
    pub(super) seq: u64,
    pub(super) waiting: bool,
    /// The student's answer rate limit.
    pub(super) bucket: Bucket,
}

pub(super) struct Live {
    pub(super) row: ClassRow,
    pub(super) students: HashMap<String, Student>,
    /// Who answered the current chapter.
    pub(super) answered: HashSet<String>,
    /// Every chapter the class opened (bounded by [`class::MAX_CHAPTERS_PER_CLASS`]).
    pub(super) chapters: BTreeSet<u32>,
    /// When the recent attempts to join came (at most [`JOIN_MEMORY`] of them).
    pub(super) joins: VecDeque<Instant>,
    /// The class's own join allowance (every address's joins together).
    pub(super) join_bucket: Bucket,
    pub(super) tx: watch::Sender<ClassState>,
}

/// The most join attempts a class remembers: enough to see a flood.
pub(super) const JOIN_MEMORY: usize = 256;
pub(super) const JOIN_WINDOW: Duration = Duration::from_secs(class::JOIN_WINDOW_SECS);

impl Live {
    pub(super) fn state(&self, now: Instant) -> ClassState {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let waiting = self.students.values().filter(|s| s.waiting).count();
        let joins_recent =
            count(self.joins.iter().filter(|t| now.saturating_duration_since(**t) < JOIN_WINDOW).count());
        ClassState {
            code: self.row.code.clone(),
            chapter: self.row.chapter,
            question: self.row.question.clone(),
            prompt: self.row.prompt.clone(),
            revealed: self.row.revealed.clone(),
            explanation: self.row.explanation.clone(),
            closed: self.row.closed,
            students: count(self.students.len() - waiting),
            answered: count(self.answered.len()),
            expires_at: self.row.expires_at,
            locked: self.row.locked,
            expected: self.row.expected,
            waiting: count(waiting),
            joins_recent,
            // Joins faster than a class types, or any beyond the size the teacher expected,
            // however slowly they came (those wait: the teacher decides).
            join_flood: joins_recent >= class::FLOOD_JOINS || (self.row.expected.is_some() && waiting > 0),
            round: if self.row.chapter.is_some() { self.row.round } else { 0 },
        }
    }

    /// The class's join allowance: [`Limits::class_joins`], its burst twice an expected size
    /// (at least a quarter of the default burst) when there is one.
    pub(super) fn join_rate(limits: &Limits, expected: Option<u32>) -> Rate {
        let burst = expected.map_or(limits.class_joins.burst, |e| {
            e.saturating_mul(2).clamp(limits.class_joins.burst / 4, limits.class_joins.burst.max(1))
        });
        Rate { burst, every: limits.class_joins.every }
    }

    pub(super) fn waiting(&self) -> usize {
        self.students.values().filter(|s| s.waiting).count()
    }

    pub(super) fn admitted(&self) -> usize {
        self.students.values().filter(|s| !s.waiting).count()
    }

    /// Counts an attempt to join, and forgets those past the window.
    pub(super) fn note_join(&mut self, now: Instant) {
        while self.joins.front().is_some_and(|t| now.saturating_duration_since(*t) >= JOIN_WINDOW) {
            self.joins.pop_front();
        }
        if self.joins.len() >= JOIN_MEMORY {
            self.joins.pop_front();
        }
        self.joins.push_back(now);
    }

    /// Publishes the state if it changed.
    pub(super) fn publish(&self, now: Instant) {
        let state = self.state(now);
        self.tx.send_if_modified(|old| {
            let changed = *old != state;
            if changed {
                *old = state;
            }
            changed
        });
    }
}

/// A class of `classes` that exists and has not expired (the keeper's other fields stay free to
/// borrow).
pub(super) fn live_in<'a>(classes: &'a mut HashMap<String, Live>, code: &str) -> Option<&'a mut Live> {
    let now = now_s();
    classes.get_mut(code).filter(|l| l.row.expires_at > now)
}

pub(super) fn placeholder(code: &str) -> ClassState {
    ClassState { code: code.to_string(), ..ClassState::default() }
}
