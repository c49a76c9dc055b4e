//! Why a step did not run: typed, worded by the catalogs (`backend-err-…`, and each inner error's
//! own) in the reader's language where the app shows it, in English through `Display` (the
//! CLI's and the logs' words).

use crate::i18n::{Catalog, with_english};
use crate::model::{StepShape, Worded};
use crate::plan::ConfigError;

use super::HostShortfall;
use super::gpu::GpuError;

#[derive(Debug, Clone)]
pub enum BackendError {
    Config(ConfigError),
    ShapeMismatch {
        plan: StepShape,
        batch: StepShape,
    },
    Gpu(GpuError),
    /// The step does not fit the (virtual) GPU's memory: PyTorch's words, as PyTorch says them.
    OutOfMemory(Box<crate::memory::StepOom>),
    /// The CPU backend's host could not hold the step (refused before allocating, or an
    /// allocation the host refused).
    HostMemory(HostShortfall),
    /// A bug in oomlab stopped the step (a panic, caught where the app drives a step so that
    /// the app keeps running): the panic's own words.
    Internal(String),
    /// An op found a tensor it reads without memory: a run of the backward pass alone, without
    /// the forward pass of the same step.
    NotProduced {
        op: String,
        tensor: String,
    },
    /// The GPU backend was asked for where no GPU is open (the CLI opens one for
    /// `--backend gpu`; the app has one when eframe's device can compute).
    NoGpu,
    /// The browser's CPU worker stopped (its wasm did not load, or it crashed): steps then run
    /// on the page's thread.
    WorkerLost(WorkerLost),
    /// The CPU worker was asked for a step of settings it has no executor for.
    WorkerHasNoExecutor,
    /// A setting the GPU backend does not run yet.
    NotOnGpu(CpuOnly),
    /// Something being built in the background was dropped before it finished.
    Cancelled,
    /// A failure the browser's CPU worker reported, as its catalog message (worded on the page).
    Reported(Worded),
}

/// What only the CPU backend runs, so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuOnly {
    /// Batches of documents of another length than the plan's, over several simulated GPUs.
    UnevenBatchesOverGpus,
    /// Mixed precision over several simulated GPUs.
    MixedPrecisionOverGpus,
}

/// Why the browser's CPU worker is gone (the page then runs steps itself, and logs this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerLost {
    /// The way to it closed: it stopped.
    Stopped,
    /// It did not say it was alive within this many seconds of being needed.
    Silent(u32),
    /// The browser's own words: its script did not load, or it threw.
    Browser(String),
    /// A message that could not be written or read, in the JSON library's words.
    Garbled(String),
}

impl From<serde_json::Error> for WorkerLost {
    fn from(e: serde_json::Error) -> Self {
        WorkerLost::Garbled(e.to_string())
    }
}

impl From<ConfigError> for BackendError {
    fn from(e: ConfigError) -> Self {
        BackendError::Config(e)
    }
}

impl From<crate::model::ShapeError> for BackendError {
    fn from(e: crate::model::ShapeError) -> Self {
        BackendError::Config(e.into())
    }
}

impl From<crate::plan::TechniqueError> for BackendError {
    fn from(e: crate::plan::TechniqueError) -> Self {
        BackendError::Config(e.into())
    }
}

impl From<GpuError> for BackendError {
    fn from(e: GpuError) -> Self {
        BackendError::Gpu(e)
    }
}

impl WorkerLost {
    /// Why, in `t`'s language.
    pub fn text(&self, t: &Catalog) -> String {
        match self {
            WorkerLost::Stopped => t.text("worker-lost-stopped"),
            WorkerLost::Silent(secs) => t.format_text("worker-lost-silent", &[("secs", secs.to_string())]),
            WorkerLost::Browser(words) => words.clone(),
            WorkerLost::Garbled(words) => t.format_text("worker-lost-garbled", &[("detail", words.clone())]),
        }
    }
}

impl BackendError {
    /// The error in `t`'s language (an out-of-memory error in PyTorch's words, as PyTorch's).
    pub fn text(&self, t: &Catalog) -> String {
        match self {
            BackendError::OutOfMemory(oom) => oom.message.clone(),
            BackendError::HostMemory(h) => h.text(t),
            BackendError::WorkerLost(why) => t.format_text("backend-err-worker-lost", &[("why", why.text(t))]),
            other => other.worded().map(|w| w.text(t)).unwrap_or_default(),
        }
    }

    /// Its catalog message, as it crosses from the browser's CPU worker; `None` for what crosses
    /// as itself (an out-of-memory error, the host's shortfall) and for a lost worker (the page's
    /// own news, never the worker's).
    pub fn worded(&self) -> Option<Worded> {
        let shape = |s: &StepShape| format!("{}×{}", s.batch, s.seq);
        let key = |k: &str| Worded::of(k, &[]);
        Some(match self {
            BackendError::OutOfMemory(_) | BackendError::HostMemory(_) | BackendError::WorkerLost(_) => return None,
            BackendError::Config(e) => e.worded(),
            BackendError::Gpu(e) => e.worded(),
            BackendError::Reported(w) => w.clone(),
            BackendError::ShapeMismatch { plan, batch } => {
                Worded::of("backend-err-shape", &[("batch", shape(batch)), ("plan", shape(plan))])
            }
            BackendError::Internal(words) => Worded::of("backend-err-internal", &[("error", words.clone())]),
            BackendError::NotProduced { op, tensor } => {
                Worded::of("backend-err-not-produced", &[("op", op.clone()), ("tensor", tensor.clone())])
            }
            BackendError::NoGpu => key("backend-err-no-gpu"),
            BackendError::WorkerHasNoExecutor => key("backend-err-no-executor"),
            BackendError::NotOnGpu(CpuOnly::UnevenBatchesOverGpus) => key("backend-err-cpu-only-uneven"),
            BackendError::NotOnGpu(CpuOnly::MixedPrecisionOverGpus) => key("backend-err-cpu-only-mixed"),
            BackendError::Cancelled => key("backend-err-cancelled"),
        })
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BackendError::Config(e) => Some(e),
            BackendError::Gpu(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for WorkerLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for WorkerLost {}
