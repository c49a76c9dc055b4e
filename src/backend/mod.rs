//! Backends execute a [`Plan`]: `cpu` with plain-Rust twins, `gpu` with WGSL kernels.

pub mod cluster;
pub mod cpu;
mod error;
pub mod gpu;
pub mod host_optimizer;
mod open;
pub mod sliced;

pub use error::{BackendError, CpuOnly, WorkerLost};
pub use open::{Executor, Gpu, open};

use crate::data::Batch;
use crate::model::ShapeError;
use crate::model::UnknownName;
use crate::plan::{ConfigError, Plan};

/// Why the CPU backend's host cannot hold a step: with its sizes, worded by the catalogs
/// (`host-err-…`) in the reader's language where the app shows it, in English through `Display`.
/// It crosses from the browser's CPU worker as itself (a few bytes of deserialiser).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HostShortfall {
    /// Refused before allocating: the device bytes the step reserves, `per_byte` host bytes
    /// each, and the batch pass what the host has.
    Step { needed: u64, reserved: u64, per_byte: u64, available: u64 },
    /// An allocation the host refused: a tensor's memory, or its indices (`indices`).
    Tensor { tensor: String, bytes: u64, indices: bool },
}

impl HostShortfall {
    /// The message in the catalog's language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        let size = |b: &u64| crate::units::format_bytes(*b);
        match self {
            HostShortfall::Step { needed, reserved, per_byte, available } => t.format_text(
                "host-err-step",
                &[
                    ("needed", size(needed)),
                    ("reserved", size(reserved)),
                    ("per_byte", per_byte.to_string()),
                    ("available", size(available)),
                ],
            ),
            HostShortfall::Tensor { tensor, bytes, indices } => t.format_text(
                if *indices { "host-err-indices" } else { "host-err-memory" },
                &[("tensor", tensor.clone()), ("bytes", size(bytes))],
            ),
        }
    }
}

impl std::fmt::Display for HostShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::i18n::with_english(|en| self.text(en)))
    }
}

/// Runs `f`, turning a panic into [`BackendError::Internal`] with its message. Whatever `f`
/// was working on must be dropped after an error (it may be half-updated). On wasm32 a panic
/// aborts the instance instead (no unwinding there), so this only helps natively.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, BackendError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        BackendError::Internal(message)
    })
}

/// A plan size as a host index (it lives in `units`, below every layer; the model uses it too).
/// The output of a future that is already complete (the CPU backend's [`open`], native wgpu's
/// error scopes), or None if it would have to wait. Never blocks, so it is safe in a browser.
pub fn ready_now<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

pub use crate::units::ix;

/// The per-step state both executors keep, with its initial values: optimizer steps taken
/// (AdamW's t), fp16's loss scaler, and the loss scale the last backward pass used (what the
/// stored gradients are multiplied by).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepState {
    pub steps_taken: u32,
    pub scaler: Option<crate::plan::LossScaler>,
    pub backward_scale: f32,
    /// The cross-entropy gradient's scale when the batch ignores some targets (padding): 1 over
    /// the targets it counts, in place of the plan's 1 over all rows. None: every target counts.
    pub counted_scale: Option<f64>,
}

impl StepState {
    /// No step taken; a loss scaler only where the plan's precision scales the loss (fp16).
    pub fn new(plan: &Plan) -> Self {
        let scaler = plan.techniques.precision.scales_loss().then(crate::plan::LossScaler::default);
        Self { steps_taken: 0, scaler, backward_scale: 1.0, counted_scale: None }
    }

    /// A batch was uploaded: the gradient's scale follows the targets it counts, so that a
    /// padded batch's gradients are the mean over its real tokens (over every micro-batch's,
    /// as one batch of them would be).
    pub fn count_targets(&mut self, batch: &Batch) {
        let counted = batch.counted_targets();
        self.counted_scale = (counted < batch.targets.len()).then(|| 1.0 / counted.max(1) as f64);
    }

    /// The cross-entropy backward's scale: the plan's, or the batch's counted one.
    pub fn cross_entropy_scale(&self, plan_scale: f64) -> f64 {
        self.counted_scale.unwrap_or(plan_scale)
    }

    /// The loss scale of the next step (1 without fp16).
    pub fn loss_scale(&self) -> f32 {
        self.scaler.map_or(1.0, |s| s.scale)
    }

    /// A run of `phases` starts: an optimizer phase counts a step, a backward phase fixes the
    /// scale its gradients carry.
    pub fn begin(&mut self, phases: &[crate::plan::Phase]) {
        if phases.contains(&crate::plan::Phase::Optimizer) {
            self.steps_taken = self.steps_taken.saturating_add(1);
        }
        if phases.contains(&crate::plan::Phase::Backward) {
            self.backward_scale = self.loss_scale();
        }
    }

    /// A run begun with [`Self::begin`] that never ran: its optimizer step does not count.
    pub fn cancel(&mut self, phases: &[crate::plan::Phase]) {
        if phases.contains(&crate::plan::Phase::Optimizer) {
            self.steps_taken = self.steps_taken.saturating_sub(1);
        }
    }

    /// After an optimizer step: fp16's scaler learns whether the gradients overflowed; a step it
    /// skipped does not count (AdamW's bias correction).
    pub fn finish_optimizer(&mut self, found_inf: bool) {
        if let Some(scaler) = self.scaler.as_mut()
            && !scaler.update(found_inf)
        {
            self.steps_taken = self.steps_taken.saturating_sub(1);
        }
    }
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
    /// Each simulated GPU's account of the last step, in rank order (one on one GPU).
    fn rank_memories(&self) -> Vec<&crate::memory::StepMemory> {
        self.memory().into_iter().collect()
    }
    /// What the driver layer reported after the last step (the "device" figures), or why
    /// there is no report.
    fn device_figures(&self) -> crate::memory::device::DeviceFigures;
    /// fp16's dynamic loss scaling (None in other precisions).
    fn loss_scaler(&self) -> Option<&crate::plan::LossScaler>;
    fn loss_scaler_mut(&mut self) -> Option<&mut crate::plan::LossScaler>;
    /// Goes on with `plan`, the same model states at another batch shape (a batch of documents
    /// of another length), keeping the weights, the optimizer's state and the allocator's cache.
    fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        let _ = plan;
        Err(BackendError::NotOnGpu(CpuOnly::UnevenBatchesOverGpus))
    }
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
            other => {
                Err(ConfigError::Name(UnknownName { what: crate::model::Setting::Backend, got: other.to_string() }))
            }
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
    /// Packed rows: the document starts, and the positions' index (offsets, rows).
    pub packing: Option<(&'a [u32], Vec<u32>, Vec<u32>)>,
}

/// Checks packed rows' document starts (each is its position, where a document begins, or the
/// previous position's start) and returns the positions' index: rows grouped by position.
fn packing_index(starts: &[u32], t: usize) -> Result<(Vec<u32>, Vec<u32>), crate::plan::ConfigError> {
    let mut positions = Vec::with_capacity(starts.len());
    for (r, &s) in starts.iter().enumerate() {
        let p = r % t.max(1);
        let ok = s as usize == p || (p > 0 && starts.get(r - 1) == Some(&s));
        if !ok {
            return Err(ConfigError::Shape(ShapeError::DocStarts(crate::model::DocStartsWhy::NotAStart)));
        }
        positions.push((p - s as usize) as u32);
    }
    Ok(crate::data::token_index(&positions, t))
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
    let packed = plan.techniques.batching.is_packed();
    match (packed, batch.doc_starts.len()) {
        (true, n) if n != batch.inputs.len() => {
            return Err(ConfigError::Shape(ShapeError::DocStarts(crate::model::DocStartsWhy::NoStarts)).into());
        }
        (false, n) if n > 0 => {
            return Err(ConfigError::Shape(ShapeError::DocStarts(crate::model::DocStartsWhy::NotPacked)).into());
        }
        _ => {}
    }
    plan.handles
        .micro
        .iter()
        .enumerate()
        .map(|(j, h)| {
            let tokens = &batch.inputs[j * per..(j + 1) * per];
            let (token_offsets, token_positions) = crate::data::token_index(tokens, plan.model.vocab);
            let packing = match batch.doc_starts.get(j * per..(j + 1) * per) {
                Some(starts) if packed => {
                    let (offsets, rows) = packing_index(starts, plan.shape.seq)?;
                    Some((starts, offsets, rows))
                }
                _ => None,
            };
            Ok(MicroUpload {
                handles: *h,
                tokens,
                targets: &batch.targets[j * per..(j + 1) * per],
                token_offsets,
                token_positions,
                packing,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use crate::plan::{LossScaler, OptimizerConfig, Phase, Precision, Techniques};

    fn plan(precision: Precision) -> Plan {
        let techniques = Techniques { precision, ..Techniques::default() };
        Plan::build_with(
            &ModelConfig::toy(58),
            crate::model::StepShape { batch: 2, seq: 8 },
            &OptimizerConfig::default(),
            &techniques,
        )
        .expect("a toy plan")
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        assert_eq!(catch_panic(|| 7).ok(), Some(7));
        let message = |f: fn()| match catch_panic(f) {
            Err(BackendError::Internal(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(message(|| panic!("gemm view out of bounds")), "gemm view out of bounds");
        assert_eq!(message(|| panic!("index {} past the end", 9)), "index 9 past the end");
        assert_eq!(message(|| std::panic::panic_any(42u8)), "a panic without a message");
        let shown = BackendError::Internal("x".into()).to_string();
        assert!(shown.contains("internal error") && shown.contains("(x)"), "{shown}");
    }

    #[test]
    fn step_state_counts_steps_and_fp16_skips() {
        let fp32 = StepState::new(&plan(Precision::Fp32));
        assert_eq!((fp32.steps_taken, fp32.scaler, fp32.backward_scale), (0, None, 1.0));
        let mut s = StepState::new(&plan(Precision::Fp16));
        let initial = LossScaler::default().scale;
        assert_eq!(s.scaler.map(|x| x.scale), Some(initial));
        // A backward pass carries the scale of its step; the optimizer counts it.
        s.begin(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
        assert_eq!((s.steps_taken, s.backward_scale), (1, initial));
        s.finish_optimizer(false);
        assert_eq!(s.steps_taken, 1);
        // An overflow halves the scale and the skipped step does not count.
        s.begin(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
        s.finish_optimizer(true);
        assert_eq!(s.steps_taken, 1);
        assert_eq!(s.loss_scale(), initial / 2.0);
        // A run that never ran gives its step back; forward alone counts nothing.
        s.begin(&[Phase::Optimizer]);
        s.cancel(&[Phase::Optimizer]);
        s.begin(&[Phase::Forward]);
        assert_eq!(s.steps_taken, 1);
        // Never below zero.
        let mut fresh = StepState::new(&plan(Precision::Fp16));
        fresh.cancel(&[Phase::Optimizer]);
        fresh.finish_optimizer(true);
        assert_eq!(fresh.steps_taken, 0);
    }
}
