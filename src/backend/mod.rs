//! Backends execute a [`Plan`]: `cpu` with plain-Rust twins, `gpu` with WGSL kernels.

pub mod cpu;
pub mod gpu;

use thiserror::Error;

use crate::data::Batch;
use crate::model::{ConfigError, StepShape};
use crate::plan::Plan;

#[derive(Debug, Error)]
pub enum BackendError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the batch is {batch:?} but the plan was built for {plan:?}")]
    ShapeMismatch { plan: StepShape, batch: StepShape },
    #[error(transparent)]
    Gpu(#[from] gpu::GpuError),
    /// The step does not fit the (virtual) GPU's memory.
    #[error("{0}")]
    OutOfMemory(Box<crate::memory::StepOom>),
    /// The CPU backend's host could not hold the step (refused before allocating, or an
    /// allocation the host refused).
    #[error("{0}")]
    HostMemory(String),
}

/// A capacity that never limits: the real device's (or the host's) memory does.
pub const UNLIMITED: u64 = u64::MAX / 4;

/// A plan size as a host index. Saturates rather than wraps: a plan whose sizes pass `usize`
/// (wasm32: 2³²) is refused before an executor holds it (the host-memory and adapter-limit
/// checks), so a saturated value never reaches an executing op.
pub fn ix(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// What a training loop needs from a backend.
pub trait Trainer {
    /// "gpu (Vulkan, llvmpipe …)" or "cpu (reference)".
    fn backend_name(&self) -> String;
    fn plan(&self) -> &Plan;
    /// Forward, backward and optimizer on `batch`; returns the loss (before the update).
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError>;
    /// Forward and backward only; returns the loss. Gradients can then be read.
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError>;
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError>;
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError>;
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError>;
    /// The caching allocator's account of the last step, recorded live as it ran (the
    /// "allocator" figures), once a step has run.
    fn memory(&self) -> Option<&crate::memory::StepMemory>;
    /// What the driver layer reported after the last step (the "device" figures), or why
    /// there is no report.
    fn device_figures(&self) -> crate::memory::device::DeviceFigures;
    /// fp16's dynamic loss scaling (None in other precisions).
    fn loss_scaler(&self) -> Option<&crate::plan::LossScaler>;
    fn loss_scaler_mut(&mut self) -> Option<&mut crate::plan::LossScaler>;
}

/// Which backend runs the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    Gpu,
    Cpu,
}

impl std::str::FromStr for BackendKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "gpu" => Ok(Self::Gpu),
            "cpu" => Ok(Self::Cpu),
            other => Err(ConfigError::Other(format!("unknown backend {other:?}: expected \"gpu\" or \"cpu\""))),
        }
    }
}

/// What one micro-batch uploads: its tensors and their values.
pub struct MicroUpload<'a> {
    pub handles: crate::plan::MicroHandles,
    pub tokens: &'a [u32],
    pub targets: &'a [u32],
    /// The token index (see [`crate::data::token_index`]) of this micro-batch.
    pub token_offsets: Vec<u32>,
    pub token_positions: Vec<u32>,
}

/// Checks `batch` against the plan (it must hold `micro-batch × accum` sequences) and splits it
/// into the uploads of the plan's micro-batches, in order.
pub fn micro_uploads<'a>(plan: &Plan, batch: &'a Batch) -> Result<Vec<MicroUpload<'a>>, BackendError> {
    batch.validate(&plan.model)?;
    let expected = plan.batch_shape();
    if batch.shape != expected {
        return Err(BackendError::ShapeMismatch { plan: expected, batch: batch.shape });
    }
    let per = ix(plan.shape.rows());
    Ok(plan
        .handles
        .micro
        .iter()
        .enumerate()
        .map(|(j, h)| {
            let tokens = &batch.inputs[j * per..(j + 1) * per];
            let (token_offsets, token_positions) = crate::data::token_index(tokens, plan.model.vocab);
            MicroUpload {
                handles: *h,
                tokens,
                targets: &batch.targets[j * per..(j + 1) * per],
                token_offsets,
                token_positions,
            }
        })
        .collect())
}
