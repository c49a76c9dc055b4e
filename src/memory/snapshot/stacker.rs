//! Stacks interned as the reader meets them: on a second thread where the machine has one, else
//! in line. A large dump's frame and stack lookups are a fifth of its reading time, and a
//! reader needs only an id back: on the thread, the reader gets provisional ids, numbered in
//! the order it met the stacks, and [`Stacker::finish`] says which stack each one is. The
//! browser's worker (wasm32, no threads) interns in line.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::SnapshotError;
use super::dump::{FrameRec, FrameTables, MAX_STACK};

/// Frames handed over at a time (a megabyte).
const BATCH: usize = 1 << 16;
/// Batches on their way at most (the reader waits rather than queue more).
const IN_FLIGHT: usize = 4;

/// Stacks one after another: `lens[i]` frames each.
#[derive(Default)]
struct Batch {
    frames: Vec<FrameRec>,
    lens: Vec<u32>,
}

enum Mode {
    Inline(FrameTables),
    Thread {
        to: SyncSender<Batch>,
        worker: JoinHandle<(FrameTables, Vec<u32>)>,
        batch: Batch,
        /// The next provisional id (0 is the empty stack).
        next: u32,
    },
}

/// Interns stacks of frames, in line or on a thread.
pub struct Stacker(Mode);

/// What a [`Stacker`] read: the tables, and, if ids were provisional, each one's stack.
pub struct Interned {
    pub tables: FrameTables,
    pub ids: Option<Vec<u32>>,
}

impl Interned {
    /// The stack a provisional id stands for (an id already final is itself).
    pub fn stack(&self, id: u32) -> u32 {
        match &self.ids {
            Some(ids) => ids.get(id as usize).copied().unwrap_or(0),
            None => id,
        }
    }
}

impl Stacker {
    /// On a second thread if `threaded` and one can be started, else in line.
    pub fn new(threaded: bool) -> Stacker {
        if threaded && !cfg!(target_arch = "wasm32") {
            let (to, from) = sync_channel(IN_FLIGHT);
            if let Ok(worker) = std::thread::Builder::new().name("snapshot-stacks".into()).spawn(move || intern(from)) {
                return Stacker(Mode::Thread { to, worker, batch: Batch::default(), next: 1 });
            }
        }
        Stacker(Mode::Inline(FrameTables::default()))
    }

    /// A stack's id (provisional on the thread); the empty stack is 0.
    pub fn stack(&mut self, frames: &[FrameRec]) -> u32 {
        let frames = &frames[..frames.len().min(MAX_STACK)];
        match &mut self.0 {
            Mode::Inline(t) => t.stack_of(frames),
            _ if frames.is_empty() => 0,
            Mode::Thread { to, batch, next, .. } => {
                batch.frames.extend_from_slice(frames);
                // At most MAX_STACK frames: the cast is exact.
                batch.lens.push(frames.len() as u32);
                if batch.frames.len() >= BATCH {
                    // A worker that stopped is noticed at `finish`.
                    let _ = to.send(std::mem::take(batch));
                }
                let id = *next;
                *next = next.saturating_add(1);
                id
            }
        }
    }

    /// The tables, once every stack has been met.
    pub fn finish(self) -> Result<Interned, SnapshotError> {
        match self.0 {
            Mode::Inline(tables) => Ok(Interned { tables, ids: None }),
            Mode::Thread { to, worker, batch, .. } => {
                let _ = to.send(batch);
                drop(to);
                let (tables, ids) = worker
                    .join()
                    .map_err(|_| SnapshotError::Corrupt("the thread that interns stacks stopped".into()))?;
                Ok(Interned { tables, ids: Some(ids) })
            }
        }
    }
}

/// The worker: every batch's stacks, in order, to their ids.
fn intern(from: Receiver<Batch>) -> (FrameTables, Vec<u32>) {
    let mut tables = FrameTables::default();
    let mut ids = vec![0];
    for b in from {
        let mut at = 0;
        for &n in &b.lens {
            let end = at + n as usize;
            ids.push(b.frames.get(at..end).map_or(0, |f| tables.stack_of(f)));
            at = end;
        }
    }
    (tables, ids)
}
