//! The step plan: the single source of truth for what one training step does.
//!
//! A plan lists every tensor of the step (shape, dtype, category) and the ordered ops that read
//! and write them. The CPU and GPU backends execute it op by op; memory accounting, the CLI and
//! the views read it. It is pure Rust and needs no GPU.

pub mod allocator;
pub mod batches;
pub mod batching;
pub mod build;
pub mod error;
pub mod limits;
pub mod offload;
pub mod op;
pub mod optimizer;
pub mod parallel;
pub mod request;
pub mod serving;
pub mod techniques;
pub mod tensor;

pub use allocator::AllocatorConfig;
pub use batches::{Batches, micro_batch};
pub use batching::Batching;
pub use error::{ConfigError, Range, Technique, TechniqueError};
pub use limits::{MAX_BUDGET_BYTES, MAX_PLAN_OPS, MAX_TENSOR_ELEMS};
pub use offload::Offload;
pub use op::{Op, OpNode, Phase};
pub use optimizer::{AdamWStep, OptimizerConfig, OptimizerKind};
pub use parallel::{MAX_GPUS, Parallel};
pub use request::{StepRequest, ValidRequest};
pub use techniques::{AttentionKind, Checkpoint, LossScaler, Precision, Techniques};
pub use tensor::{Category, DType, Lifetime, TensorId, TensorInfo, View};

use crate::model::params::ParamLayout;
use crate::model::{ModelConfig, StepShape};

/// The tensors every backend uploads or reads by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Handles {
    /// The model's flat parameters.
    pub params: TensorId,
    /// What the optimizer updates: `params`, or the LoRA adapters' flat tensor.
    pub trainable: TensorId,
    /// The gradients of `trainable`.
    pub grads: TensorId,
    /// Mixed precision, or offload: the fp32 master copy of `trainable`, which the optimizer
    /// updates (offloaded: in host memory).
    pub master: Option<TensorId>,
    /// fp16: set by the overflow check when a gradient is inf or NaN (the step is skipped).
    pub found_inf: Option<TensorId>,
    /// One entry per micro-batch (one without gradient accumulation; none in a serving step).
    pub micro: Vec<MicroHandles>,
    /// A serving step's inputs, logits and caches (None in a training step).
    pub serving: Option<serving::ServeHandles>,
}

/// One micro-batch's inputs and its loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MicroHandles {
    pub tokens: TensorId,
    pub targets: TensorId,
    pub token_offsets: TensorId,
    pub token_positions: TensorId,
    pub loss: TensorId,
    /// Packed rows' document starts and positions' index.
    pub packing: Option<op::Packing>,
}

/// One training step of one model at one batch shape.
#[derive(Clone, Debug)]
pub struct Plan {
    pub model: ModelConfig,
    /// One forward pass's shape: the micro-batch (see [`Plan::batches`] for the others).
    pub shape: StepShape,
    /// The step's batch in its three senses, as its request was validated.
    pub batches: Batches,
    pub optimizer: OptimizerConfig,
    pub techniques: Techniques,
    pub layout: ParamLayout,
    /// The LoRA adapters' layout, with LoRA.
    pub lora: Option<ParamLayout>,
    pub tensors: Vec<TensorInfo>,
    pub ops: Vec<OpNode>,
    pub handles: Handles,
    /// The data-parallel rank this plan is (0 on one GPU; see [`parallel`]).
    pub rank: usize,
}

impl Plan {
    pub fn tensor(&self, id: TensorId) -> &TensorInfo {
        &self.tensors[id.0]
    }

    /// Whether `op` runs on the host (offload): a copy between device and host memory, or an op
    /// on host tensors only (the CPU's optimizer, zeroing the host's gradients).
    pub fn runs_on_host(&self, op: &Op) -> bool {
        if op.is_transfer() {
            return true;
        }
        let (reads, writes) = op.reads_writes();
        let mut views = reads.iter().chain(&writes).peekable();
        views.peek().is_some() && views.all(|v| self.tensors.get(v.tensor.0).is_some_and(|t| t.host))
    }

    /// Bytes in host memory (offload), per category: what the host holds for the whole run.
    pub fn host_bytes(&self) -> Vec<(Category, u64)> {
        Category::ALL
            .iter()
            .map(|&c| (c, self.tensors.iter().filter(|t| t.host && t.category == c).map(TensorInfo::size_bytes).sum()))
            .filter(|&(_, b)| b > 0)
            .collect()
    }

    /// The whole of a tensor as a view.
    pub fn whole(&self, id: TensorId) -> View {
        View { tensor: id, offset: 0, len: self.tensors[id.0].numel() }
    }

    /// Every tensor's lifetime, indexed by tensor id.
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let mut span: Vec<Option<(usize, usize)>> = vec![None; self.tensors.len()];
        for (i, node) in self.ops.iter().enumerate() {
            let (reads, writes) = node.op.reads_writes();
            for v in reads.iter().chain(&writes) {
                let s = &mut span[v.tensor.0];
                *s = Some(s.map_or((i, i), |(first, _)| (first, i)));
            }
        }
        // The losses and the overflow flag (a set, so this stays linear with accumulation), and
        // a serving step's logits, which the engine reads after the step.
        let mut held = vec![false; self.tensors.len()];
        let logits = self.handles.serving.as_ref().map(|s| s.logits);
        for id in self.handles.micro.iter().map(|m| m.loss).chain(self.handles.found_inf).chain(logits) {
            if let Some(h) = held.get_mut(id.0) {
                *h = true;
            }
        }
        self.tensors
            .iter()
            .zip(span)
            .enumerate()
            .map(|(i, (t, span))| {
                let span = if held[i] { None } else { span };
                if t.host {
                    Lifetime::Host
                } else if t.persistent {
                    Lifetime::Persistent
                } else {
                    // The batch, and the loss (and overflow flag) the training loop reads after
                    // the step, are held for the whole step; so is anything no op touches.
                    match span {
                        Some((first, last)) if t.category != Category::Input => Lifetime::Ops { first, last },
                        _ => Lifetime::Step,
                    }
                }
            })
            .collect()
    }

    /// Builds the plan of one training step without memory-saving techniques.
    pub fn build(model: &ModelConfig, shape: StepShape, optimizer: &OptimizerConfig) -> Result<Plan, ConfigError> {
        Self::build_with(model, shape, optimizer, &Techniques::default())
    }

    /// Builds the plan of one training step with `techniques`. `shape.batch` is the micro-batch
    /// each forward pass runs; with accumulation the step sees `shape.batch · accum` sequences.
    pub fn build_with(
        model: &ModelConfig,
        shape: StepShape,
        optimizer: &OptimizerConfig,
        techniques: &Techniques,
    ) -> Result<Plan, ConfigError> {
        let request = StepRequest { model: *model, micro: shape, optimizer: *optimizer, techniques: *techniques };
        Ok(request.validate()?.plan())
    }

    /// "h.0.attn (attention)": op `i`'s label and kind, the one way every message and view names
    /// an op (None when there is no such op).
    pub fn op_label(&self, i: usize) -> Option<String> {
        self.ops.get(i).map(|n| format!("{} ({})", n.label, n.op.name()))
    }

    /// The flat elements this rank's shards hold (under ZeRO), or None where it holds no shard.
    pub fn shard_range(&self) -> Option<std::ops::Range<u64>> {
        let p = self.techniques.parallel;
        if !p.is_distributed() {
            return None;
        }
        let s = p.shard_len(self.trainable_layout().flat_len);
        let start = s.saturating_mul(self.rank as u64);
        Some(start..start.saturating_add(s))
    }

    /// The flat element a tensor of flat values (parameters, gradients, master weights,
    /// optimizer state) starts at: its shard's start when it is a shard, else 0.
    pub fn flat_start(&self, id: TensorId) -> u64 {
        match self.shard_range() {
            Some(r) if self.tensor(id).numel() == r.end - r.start => r.start,
            _ => 0,
        }
    }

    /// AdamW's scalars for optimizer step `step` (from 1): what both backends hand their AdamW.
    pub fn adamw_step(&self, step: u32) -> AdamWStep {
        let o = self.optimizer;
        // Under ZeRO a rank updates its shard, whose first element is flat element `start`.
        let decay_end = self.trainable_layout().decay_end;
        let decay_end = match self.shard_range().filter(|_| self.techniques.parallel.stage() >= 1) {
            Some(r) => decay_end.saturating_sub(r.start).min(r.end - r.start),
            None => decay_end,
        };
        AdamWStep {
            lr: o.lr,
            beta1: o.beta1,
            beta2: o.beta2,
            eps: o.eps,
            weight_decay: o.weight_decay,
            step,
            decay_end,
        }
    }

    /// The layout of what the optimizer updates (and of the gradients).
    pub fn trainable_layout(&self) -> &ParamLayout {
        self.lora.as_ref().unwrap_or(&self.layout)
    }

    /// The request this plan was built from (what the browser's CPU worker builds it again from).
    pub fn request(&self) -> StepRequest {
        StepRequest { model: self.model, micro: self.shape, optimizer: self.optimizer, techniques: self.techniques }
    }

    /// The step's batch in its three senses: micro, per GPU and global.
    pub fn batches(&self) -> Batches {
        self.batches
    }

    /// The shape of the batch one step consumes on one GPU: the micro-batch times the
    /// accumulation steps.
    pub fn batch_shape(&self) -> StepShape {
        StepShape { batch: self.batches.per_gpu_batch(), seq: self.shape.seq }
    }

    /// The batch one optimizer step consumes over every data-parallel rank (N times
    /// [`Self::batch_shape`]; the same on one GPU).
    pub fn global_batch_shape(&self) -> StepShape {
        StepShape { batch: self.batches.global_batch(), seq: self.shape.seq }
    }

    /// Floating-point operations of the whole step (multiply-adds count 2), and of the ops that
    /// recompute activations (checkpointing's extra compute).
    pub fn flops(&self) -> (u64, u64) {
        let mut total = 0;
        let mut recomputed = 0;
        for node in &self.ops {
            let f = node.op.flops(&self.model, self.shape);
            total = f.saturating_add(total);
            if node.recompute {
                recomputed = f.saturating_add(recomputed);
            }
        }
        (total, recomputed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_has_every_phase_and_valid_views() {
        let model = ModelConfig::toy(65);
        let plan = Plan::build(&model, StepShape { batch: 2, seq: 8 }, &OptimizerConfig::default()).unwrap();
        assert!(plan.ops.iter().any(|o| o.phase == Phase::Optimizer));
        assert_eq!(plan.tensor(plan.handles.params).numel(), plan.layout.flat_len);
        let bad = StepShape { batch: 0, seq: 8 };
        assert!(Plan::build(&model, bad, &OptimizerConfig::default()).is_err());
    }
}
