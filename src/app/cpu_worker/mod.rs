//! The browser's CPU fallback off the page's thread: the CPU backend runs in a Web
//! Worker with its own wasm instance (built with SIMD, `web/build.sh`), and the page only sends
//! requests and reads replies, so the UI keeps its 60 fps and shows the step's progress.
//!
//! This module is the protocol, both ends of it, and nothing browser-specific: [`Handler`] is
//! what the worker runs for each request; [`CpuWorker`] is the page's side, over any
//! [`Transport`] (`src/web_worker.rs` and `web_transport` below are the browser's; the tests
//! use an in-process one). Messages are JSON. Each request carries a generation: a reply to an
//! older one (settings changed since) is dropped.

use serde::{Deserialize, Serialize};

use crate::backend::{BackendError, BackendKind, Executor, WorkerLost};
use crate::data::Dataset;
use crate::memory::map::wire::EventLog;
use crate::memory::{Budget, StepMemory, StepOom};
use crate::model::Worded;
use crate::plan::{ConfigError, Phase, StepRequest};

/// The page to the worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Make an executor for this step (the previous one is dropped). The worker checks the
    /// request itself, as it would any input, and builds the same plan the page has.
    Start { generation: u64, request: Box<StepRequest>, seed: u64, budget: Budget },
    /// Run one step on the built-in corpus's batch `index` (the app's own batch).
    Step { generation: u64, seed: u64, index: u64 },
}

/// The worker to the page.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Reply {
    /// The worker's wasm is running and listening (sent once, first).
    Alive,
    /// The executor of `generation` is ready.
    Ready {
        generation: u64,
    },
    /// Ops looked at so far of the running step (about every 50 ms).
    Progress {
        generation: u64,
        done: usize,
        total: usize,
    },
    /// A step finished: its loss and the allocator's live account of it (its events apart:
    /// the memory's own serialisation leaves them out).
    Done {
        generation: u64,
        loss: f32,
        memory: Option<Box<StepMemory>>,
        events: EventLog,
        /// The step's time in the worker, from the request to the result (seconds).
        compute_secs: f64,
        /// The other simulated GPUs' accounts (GPU 1, 2, …), their events apart likewise.
        #[serde(default)]
        ranks: Vec<(StepMemory, EventLog)>,
    },
    Failed {
        generation: u64,
        error: WireError,
    },
    /// A snapshot being read in the worker (the browser's import): bytes read of `total`.
    SnapshotProgress {
        done: u64,
        total: u64,
    },
    /// A snapshot the worker could not read, and why.
    SnapshotFailed {
        error: crate::model::Worded,
    },
}

/// A [`BackendError`] as it crosses: each kind the CPU backend can fail with, as itself
/// (out-of-memory keeps everything the OOM panel shows).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WireError {
    OutOfMemory(Box<StepOom>),
    HostMemory(crate::backend::HostShortfall),
    /// A configuration error, as its catalog message (worded on the page, in its language).
    Config(Worded),
    /// Any other failure, as its catalog message: a key and arguments, no words of any language
    /// (one small deserialiser for all of them in the web module).
    Failed(Worded),
}

impl From<BackendError> for WireError {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::OutOfMemory(oom) => WireError::OutOfMemory(oom),
            BackendError::HostMemory(m) => WireError::HostMemory(m),
            BackendError::Config(c) => WireError::Config(c.worded()),
            // Anything without a catalog message of its own (the worker's own loss, never its
            // news) crosses as an internal error in its words.
            other => WireError::Failed(
                other.worded().unwrap_or_else(|| Worded::of("backend-err-internal", &[("error", other.to_string())])),
            ),
        }
    }
}

impl From<WireError> for BackendError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::OutOfMemory(oom) => BackendError::OutOfMemory(oom),
            WireError::HostMemory(m) => BackendError::HostMemory(m),
            WireError::Config(m) => BackendError::Config(ConfigError::Reported(m)),
            WireError::Failed(w) => BackendError::Reported(w),
        }
    }
}

/// The worker's end: an executor and the corpus, driven by requests.
pub struct Handler {
    /// The CPU backend's executor: one GPU's, or the simulated GPUs' cluster.
    exec: Option<(u64, Executor)>,
    dataset: Dataset,
}

impl Default for Handler {
    fn default() -> Self {
        Self { exec: None, dataset: Dataset::builtin() }
    }
}

/// Seconds between progress replies.
const PROGRESS_SECS: f64 = 0.05;

impl Handler {
    /// Handles one request, sending its replies through `send`; `clock` is seconds from any
    /// origin (for the progress replies).
    pub fn handle(&mut self, request: Request, clock: &dyn Fn() -> f64, send: &mut dyn FnMut(Reply)) {
        match request {
            Request::Start { generation, request, seed, budget } => {
                self.exec = None;
                let opened = request.validate().map_err(BackendError::from).and_then(|valid| {
                    // The CPU backend opens at once: its future is complete on the first poll.
                    let opening = crate::backend::open(BackendKind::Cpu, None, valid.plan(), seed, budget);
                    match crate::backend::ready_now(opening) {
                        Some(Ok(exec @ (Executor::Cpu(_) | Executor::CpuCluster(_)))) => Ok(exec),
                        Some(Ok(Executor::Gpu(_) | Executor::GpuCluster(_))) | None => {
                            Err(BackendError::Internal("the CPU backend did not open at once".into()))
                        }
                        Some(Err(e)) => Err(e),
                    }
                });
                match opened {
                    Ok(exec) => {
                        self.exec = Some((generation, exec));
                        send(Reply::Ready { generation });
                    }
                    Err(e) => send(Reply::Failed { generation, error: e.into() }),
                }
            }
            Request::Step { generation, seed, index } => {
                let Some((_, ready)) = self.exec.as_mut().filter(|(g, _)| *g == generation) else {
                    return send(Reply::Failed { generation, error: BackendError::WorkerHasNoExecutor.into() });
                };
                // Padded and bucketed batches bring their own length: the executor goes on at it.
                let batch = ready.sliced().map(|e| e.plan().clone()).map(|plan| {
                    let b = &plan.techniques.batching;
                    let shape = plan.global_batch_shape();
                    let batch = crate::documents::batch_for(&self.dataset, *b, shape, plan.model.seq_len, seed, index)?;
                    ready.follow(&plan, &batch)?;
                    Ok::<_, BackendError>(batch)
                });
                let (Some(exec), Some(batch)) = (ready.sliced(), batch) else {
                    return send(Reply::Failed { generation, error: BackendError::WorkerHasNoExecutor.into() });
                };
                let batch = match batch {
                    Ok(b) => b,
                    Err(e) => return send(Reply::Failed { generation, error: e.into() }),
                };
                if let Err(e) = exec.upload(&batch) {
                    return send(Reply::Failed { generation, error: e.into() });
                }
                exec.start(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
                let began = clock();
                let mut last = began;
                loop {
                    if let Some(result) = exec.resume(4) {
                        send(match result {
                            Ok(loss) => {
                                let mut all: Vec<(StepMemory, EventLog)> = exec
                                    .rank_memories()
                                    .into_iter()
                                    .map(|m| {
                                        let mut m = m.clone();
                                        let events = std::mem::take(&mut m.events);
                                        (m, EventLog(events))
                                    })
                                    .collect();
                                let (memory, events) = if all.is_empty() {
                                    (None, EventLog::default())
                                } else {
                                    let (m, events) = all.remove(0);
                                    (Some(Box::new(m)), events)
                                };
                                let compute_secs = clock() - began;
                                Reply::Done { generation, loss, memory, events, compute_secs, ranks: all }
                            }
                            Err(e) => Reply::Failed { generation, error: e.into() },
                        });
                        return;
                    }
                    if clock() - last >= PROGRESS_SECS {
                        last = clock();
                        if let Some((done, total)) = exec.progress() {
                            send(Reply::Progress { generation, done, total });
                        }
                    }
                }
            }
        }
    }
}

/// How the page reaches the worker.
pub trait Transport {
    /// Sends a request (an error: the worker is gone).
    fn send(&mut self, request: &Request) -> Result<(), WorkerLost>;
    /// The next reply that has arrived, if any; an error when the worker died.
    fn try_recv(&mut self) -> Result<Option<Reply>, WorkerLost>;
}

/// The page's end: what it asked for, and what has come back.
pub struct CpuWorker {
    transport: Box<dyn Transport>,
    alive: bool,
    /// Requests held until the worker says it is alive.
    pending: Vec<Request>,
    generation: u64,
    /// The executor asked for (step, seed, budget), and whether it is ready.
    started: Option<(StepRequest, u64, Budget)>,
    ready: bool,
    /// A step was sent and has not come back; its progress.
    running: Option<(usize, usize)>,
    /// A failure to report from the next poll (a Start that failed).
    failed: Option<BackendError>,
    /// When the page first needed the worker (seconds, the caller's clock): one that has not
    /// said it is alive [`ALIVE_WITHIN_SECS`] later counts as lost.
    first_needed: Option<f64>,
    /// The last step's time in the worker itself (the page sees it a frame or more later).
    last_compute_secs: Option<f64>,
}

/// How long a worker may take to load its wasm and say it is alive (a slow network included).
pub const ALIVE_WITHIN_SECS: f64 = 60.0;

/// The worker is gone (the page then runs steps itself).
fn lost(e: WorkerLost) -> BackendError {
    BackendError::WorkerLost(e)
}

/// A finished step: its loss and the allocator's account of it, or why it failed.
/// A finished step: its loss, GPU 0's account of it and the other simulated GPUs'.
pub type StepResult = Result<(f32, Option<Box<StepMemory>>, Vec<StepMemory>), BackendError>;

/// What [`CpuWorker::poll`] found.
pub enum Polled {
    Nothing,
    Finished(StepResult),
}

impl CpuWorker {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Self {
            transport,
            alive: false,
            pending: Vec::new(),
            generation: 0,
            started: None,
            ready: false,
            running: None,
            failed: None,
            first_needed: None,
            last_compute_secs: None,
        }
    }

    /// The last finished step's time inside the worker (seconds).
    pub fn last_compute_secs(&self) -> Option<f64> {
        self.last_compute_secs
    }

    fn send(&mut self, request: Request) -> Result<(), BackendError> {
        if !self.alive {
            self.pending.push(request);
            return Ok(());
        }
        self.transport.send(&request).map_err(lost)
    }

    /// Forgets the executor and any step in flight (the settings changed): replies to them
    /// are dropped when they come.
    pub fn reset(&mut self) {
        self.generation += 1;
        self.started = None;
        self.ready = false;
        self.running = None;
        self.failed = None;
        self.pending.clear();
    }

    /// Asks for an executor of `request` if the worker has not got one; whether it is ready.
    /// `now`: seconds on any clock (a worker silent for [`ALIVE_WITHIN_SECS`] is lost).
    pub fn ensure(&mut self, request: &StepRequest, seed: u64, budget: Budget, now: f64) -> Result<bool, BackendError> {
        let since = *self.first_needed.get_or_insert(now);
        if !self.alive && now - since > ALIVE_WITHIN_SECS {
            return Err(lost(WorkerLost::Silent(ALIVE_WITHIN_SECS as u32)));
        }
        if self.running.is_some() {
            return Ok(false); // a step's result is read by `poll`, not here
        }
        let mut want = (*request, seed, budget);
        // Padded and bucketed batches change the length step by step: the same run, which the
        // worker's executor follows by itself (see `Request::Step`).
        if let Some((started, _, _)) = self.started.as_ref()
            && request.techniques.batching.varies_in_length()
        {
            want.0.micro.seq = started.micro.seq;
        }
        if self.started.as_ref() != Some(&want) {
            self.reset();
            let (request, seed, budget) = want;
            self.send(Request::Start { generation: self.generation, request: Box::new(request), seed, budget })?;
            self.started = Some(want);
        }
        self.poll_replies()?;
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(self.ready),
        }
    }

    /// Sends a step on batch `index`.
    pub fn step(&mut self, seed: u64, index: u64) -> Result<(), BackendError> {
        self.running = Some((0, 0));
        self.send(Request::Step { generation: self.generation, seed, index })
    }

    /// Whether a step was sent and has not come back.
    pub fn step_in_flight(&self) -> bool {
        self.running.is_some()
    }

    /// The running step's (ops looked at, ops in the plan), once the worker has said.
    pub fn progress(&self) -> Option<(usize, usize)> {
        self.running.filter(|&(_, total)| total > 0)
    }

    /// Reads what has arrived; a finished step once it has.
    pub fn poll(&mut self) -> Result<Polled, BackendError> {
        let finished = self.poll_replies()?;
        Ok(finished.map_or(Polled::Nothing, Polled::Finished))
    }

    fn poll_replies(&mut self) -> Result<Option<StepResult>, BackendError> {
        while let Some(reply) = self.transport.try_recv().map_err(lost)? {
            let current = |g: u64| g == self.generation;
            match reply {
                Reply::Alive => {
                    self.alive = true;
                    for request in std::mem::take(&mut self.pending) {
                        self.transport.send(&request).map_err(lost)?;
                    }
                }
                Reply::Ready { generation } if current(generation) => self.ready = true,
                Reply::Progress { generation, done, total } if current(generation) && self.running.is_some() => {
                    self.running = Some((done, total));
                }
                Reply::Done { generation, loss, memory, events, compute_secs, ranks } if current(generation) => {
                    self.running = None;
                    self.last_compute_secs = Some(compute_secs);
                    let memory = memory.map(|m| Box::new(StepMemory { events: events.0, ..*m }));
                    let ranks = ranks.into_iter().map(|(m, events)| StepMemory { events: events.0, ..m }).collect();
                    return Ok(Some(Ok((loss, memory, ranks))));
                }
                Reply::Failed { generation, error } if current(generation) => {
                    if self.running.take().is_some() {
                        return Ok(Some(Err(error.into())));
                    }
                    // The executor could not be made: said by the next `ensure`.
                    self.started = None;
                    self.failed = Some(error.into());
                }
                _ => {} // a reply for settings that have changed since
            }
        }
        Ok(None)
    }
}

mod transport;
#[cfg(not(target_arch = "wasm32"))]
pub use transport::ThreadTransport;
#[cfg(target_arch = "wasm32")]
pub use transport::web_transport;

#[cfg(test)]
mod tests;
