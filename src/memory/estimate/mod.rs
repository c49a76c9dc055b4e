//! The large-model estimator: the same memory categories as the toy's plan, in closed form, for
//! real architectures on real GPUs — GPT-2, LLaMA-2, Mistral or a custom one — with data, tensor
//! and sequence parallelism, ZeRO, offload and LoRA/QLoRA.
//!
//! Every term is a count of tensors the training step keeps, written out tensor by tensor, with
//! its source next to it. On the toy's own architecture and dtypes (`Runtime::Oomlab`: no
//! dropout, fp32 LayerNorm statistics, the toy's parameter padding, no fixed costs) the estimate
//! equals the toy's plan to the byte — every category and the peak, over every combination of
//! techniques (`tests/estimate.rs`): the toy and the real-model view tell one story.
//!
//! Units: bytes. Notation (Korthikanti et al. 2022): s sequence length, b micro-batch, h hidden
//! size, a heads, L layers, V vocabulary, f the MLP's inner width, t tensor-parallel size.

pub mod claims;
pub mod presets;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model::ModelConfig;
use crate::model::params::PARAM_ALIGN_ELEMS;
use crate::plan::{AttentionKind, Checkpoint};

pub use presets::Gpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// Weight and bias; saves its input and two fp32 statistics per row (mean, 1/std).
    LayerNorm,
    /// Weight only (Zhang & Sennrich 2019); saves its input and one fp32 statistic per row.
    RmsNorm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// `W₂·gelu(W₁x)`, two matrices.
    Gelu,
    /// `W_down·(silu(W_gate x) ⊙ W_up x)` (Shazeer 2020), three matrices.
    SwiGlu,
}

/// A decoder-only transformer, as far as memory is concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub name: String,
    /// V.
    pub vocab: u64,
    /// h (d_model).
    pub hidden: u64,
    /// L.
    pub layers: u64,
    /// a (query heads).
    pub heads: u64,
    /// Key/value heads: `heads` for multi-head attention, fewer for grouped-query attention
    /// (Ainslie et al. 2023).
    pub kv_heads: u64,
    /// f, the MLP's inner width (4h in GPT-2; 11008 in LLaMA-2 7B).
    pub ffn: u64,
    /// Rows of a learned position table (GPT-2: 1024); 0 for rotary positions.
    pub positions: u64,
    pub norm: Norm,
    pub mlp: Mlp,
    /// lm_head shares the token embedding.
    pub tied_embeddings: bool,
    /// Linear layers have biases.
    pub biases: bool,
    /// q, k and v come from one matrix (GPT-2's `c_attn`) rather than three.
    pub fused_qkv: bool,
    /// Trained with dropout (a 1-byte mask per dropped value; GPT-2's recipe, not LLaMA's).
    pub dropout: bool,
}

/// What a parameter tensor is, for LoRA/QLoRA (which freeze, quantize or adapt by role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Embedding,
    Norm,
    Bias,
    /// A linear layer inside a block, with its LoRA target and (in, out) features.
    Linear(Target, u64, u64),
}

/// The projections LoRA can adapt, named as in the toy (`--lora-targets qkv,proj,mlp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Qkv,
    Proj,
    Mlp,
}

impl Architecture {
    /// The toy GPT-2 (`ModelConfig`) as an architecture: no dropout (the toy has none).
    pub fn from_toy(model: &ModelConfig) -> Self {
        let h = model.d_model as u64;
        Self {
            name: "oomlab toy".into(),
            vocab: model.vocab as u64,
            hidden: h,
            layers: model.n_layers as u64,
            heads: model.n_heads as u64,
            kv_heads: model.n_heads as u64,
            ffn: 4 * h,
            positions: model.seq_len as u64,
            norm: Norm::LayerNorm,
            mlp: Mlp::Gelu,
            tied_embeddings: true,
            biases: true,
            fused_qkv: true,
            dropout: false,
        }
    }

    pub fn head_dim(&self) -> u64 {
        self.hidden / self.heads.max(1)
    }

    /// Width of k (and of v): kv_heads · head size.
    pub fn kv_hidden(&self) -> u64 {
        self.kv_heads * self.head_dim()
    }

    pub fn validate(&self) -> Result<(), EstimateError> {
        let dims = [
            ("vocab", self.vocab, 1 << 24),
            ("hidden", self.hidden, 1 << 18),
            ("layers", self.layers, 1 << 12),
            ("heads", self.heads, 1 << 12),
            ("kv_heads", self.kv_heads, 1 << 12),
            ("ffn", self.ffn, 1 << 20),
        ];
        for (name, value, max) in dims {
            if value == 0 || value > max {
                return Err(EstimateError::Invalid(format!("{name} must be between 1 and {max} (got {value})")));
            }
        }
        if self.positions > 1 << 24 {
            return Err(EstimateError::Invalid(format!(
                "positions must be at most {} (got {})",
                1 << 24,
                self.positions
            )));
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(EstimateError::Invalid(format!(
                "hidden ({}) must be divisible by heads ({})",
                self.hidden, self.heads
            )));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(EstimateError::Invalid(format!(
                "heads ({}) must be a multiple of kv_heads ({}) for grouped-query attention",
                self.heads, self.kv_heads
            )));
        }
        Ok(())
    }

    /// One block's linear layers: (role, in features, out features), in order.
    fn block_linears(&self) -> Vec<(Target, u64, u64)> {
        let (h, kv, f) = (self.hidden, self.kv_hidden(), self.ffn);
        let mut v = if self.fused_qkv {
            vec![(Target::Qkv, h, h + 2 * kv)]
        } else {
            vec![(Target::Qkv, h, h), (Target::Qkv, h, kv), (Target::Qkv, h, kv)]
        };
        v.push((Target::Proj, h, h));
        match self.mlp {
            Mlp::Gelu => v.extend([(Target::Mlp, h, f), (Target::Mlp, f, h)]),
            Mlp::SwiGlu => v.extend([(Target::Mlp, h, f), (Target::Mlp, h, f), (Target::Mlp, f, h)]),
        }
        v
    }

    /// Every parameter tensor: (role, elements). Counted from the architecture: embeddings, each
    /// block's norms, linear weights and biases, the final norm and an untied lm_head.
    pub fn parameter_tensors(&self) -> Vec<(Role, u64)> {
        let h = self.hidden;
        let norm = |v: &mut Vec<(Role, u64)>| {
            v.push((Role::Norm, h));
            if self.norm == Norm::LayerNorm {
                v.push((Role::Norm, h));
            }
        };
        let mut v = vec![(Role::Embedding, self.vocab * h)];
        if self.positions > 0 {
            v.push((Role::Embedding, self.positions * h));
        }
        for _ in 0..self.layers {
            norm(&mut v);
            for (i, (target, k, n)) in self.block_linears().into_iter().enumerate() {
                if i == if self.fused_qkv { 1 } else { 3 } {
                    norm(&mut v); // the second norm sits between attention and the MLP
                }
                v.push((Role::Linear(target, k, n), k * n));
                if self.biases {
                    v.push((Role::Bias, n));
                }
            }
        }
        norm(&mut v);
        if !self.tied_embeddings {
            v.push((Role::Embedding, self.vocab * h));
        }
        v
    }

    /// The exact parameter count. GPT-2 small: 12·L·h² + 13·L·h + V·h + T·h + 2h = 124,439,808
    /// (../shared/GUIDE.md §4); LLaMA-2 7B: 6,738,415,616.
    pub fn parameters(&self) -> u64 {
        self.parameter_tensors().iter().map(|(_, n)| n).sum()
    }

    /// One block's parameters (what ZeRO-3 gathers at a time).
    fn layer_parameters(&self) -> u64 {
        let norms = if self.norm == Norm::LayerNorm { 4 } else { 2 } * self.hidden;
        let linears: u64 = self.block_linears().iter().map(|(_, k, n)| k * n + if self.biases { *n } else { 0 }).sum();
        norms + linears
    }
}

/// How weights, gradients and optimizer state are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything fp32: 4 + 4 bytes per parameter, fp32 optimizer state.
    Fp32,
    /// Mixed precision (Micikevicius et al. 2018): fp16 weights, gradients and activations,
    /// fp32 master weights and optimizer state — ZeRO's 2 + 2 + 12 = 16 bytes per parameter
    /// with Adam.
    MixedFp16,
    /// The same with bf16.
    MixedBf16,
    /// Pure bf16: weights, gradients and optimizer state all bf16, no master copy (8 bytes per
    /// parameter with Adam).
    PureBf16,
}

impl Precision {
    pub fn parse(text: &str) -> Result<Self, EstimateError> {
        Ok(match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Precision::Fp32,
            "fp16" | "mixed-fp16" | "mixed_fp16" => Precision::MixedFp16,
            "bf16" | "mixed-bf16" | "mixed_bf16" => Precision::MixedBf16,
            "pure-bf16" | "pure_bf16" | "bf16-pure" => Precision::PureBf16,
            other => {
                return Err(EstimateError::Invalid(format!(
                    "unknown precision {other:?}: expected fp32, fp16, bf16 (mixed) or pure-bf16"
                )));
            }
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::MixedFp16 => "fp16",
            Precision::MixedBf16 => "bf16",
            Precision::PureBf16 => "pure-bf16",
        }
    }
    /// Bytes of a working weight, a gradient and an activation.
    pub fn value_bytes(self) -> u64 {
        if self == Precision::Fp32 { 4 } else { 2 }
    }
    fn master_bytes(self) -> u64 {
        if matches!(self, Precision::MixedFp16 | Precision::MixedBf16) { 4 } else { 0 }
    }
    fn state_bytes(self) -> u64 {
        if self == Precision::PureBf16 { 2 } else { 4 }
    }
}

impl From<crate::plan::Precision> for Precision {
    fn from(p: crate::plan::Precision) -> Self {
        match p {
            crate::plan::Precision::Fp32 => Precision::Fp32,
            crate::plan::Precision::Fp16 => Precision::MixedFp16,
            crate::plan::Precision::Bf16 => Precision::MixedBf16,
        }
    }
}

/// The optimizer, by the state it keeps per trained parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    Sgd,
    Momentum,
    Adam,
}

impl Optimizer {
    pub fn parse(text: &str) -> Result<Self, EstimateError> {
        Ok(match text.trim().to_ascii_lowercase().as_str() {
            "sgd" => Optimizer::Sgd,
            "momentum" => Optimizer::Momentum,
            "adam" | "adamw" => Optimizer::Adam,
            other => {
                return Err(EstimateError::Invalid(format!(
                    "unknown optimizer {other:?}: expected sgd, momentum or adam"
                )));
            }
        })
    }
    pub fn states(self) -> u64 {
        match self {
            Optimizer::Sgd => 0,
            Optimizer::Momentum => 1,
            Optimizer::Adam => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::Momentum => "momentum",
            Optimizer::Adam => "adam",
        }
    }
}

impl From<crate::plan::OptimizerKind> for Optimizer {
    fn from(k: crate::plan::OptimizerKind) -> Self {
        match k {
            crate::plan::OptimizerKind::Sgd => Optimizer::Sgd,
            crate::plan::OptimizerKind::Momentum => Optimizer::Momentum,
            crate::plan::OptimizerKind::AdamW => Optimizer::Adam,
        }
    }
}

/// LoRA (Hu et al. 2021): the base weights are frozen; rank-r adapters on the targets train.
/// QLoRA (Dettmers et al. 2023) stores the frozen linear weights in 4-bit NF4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adapters {
    pub rank: u64,
    pub qkv: bool,
    pub proj: bool,
    pub mlp: bool,
    /// QLoRA: 4-bit base linear weights with double-quantized block constants.
    pub quantized: bool,
}

impl Adapters {
    fn targets(&self, t: Target) -> bool {
        match t {
            Target::Qkv => self.qkv,
            Target::Proj => self.proj,
            Target::Mlp => self.mlp,
        }
    }
}

/// Data, tensor and sequence parallelism and ZeRO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallel {
    /// N_d, data-parallel GPUs.
    pub data: u64,
    /// t, tensor-parallel GPUs (Megatron-LM, Shoeybi et al. 2019).
    pub tensor: u64,
    /// Sequence parallelism (Korthikanti et al. 2022): the LayerNorm/dropout regions are split
    /// along the sequence over the t GPUs too.
    pub sequence: bool,
    /// ZeRO stage 0–3 (Rajbhandari et al. 2020) over the N_d GPUs.
    pub zero: u8,
}

impl Default for Parallel {
    fn default() -> Self {
        Self { data: 1, tensor: 1, sequence: false, zero: 0 }
    }
}

/// ZeRO-Offload (Ren et al. 2021) and ZeRO-Infinity's parameter offload (Rajbhandari et al. 2021).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// Optimizer state and fp32 master weights live in host memory, with an fp32 copy of the
    /// gradients; the optimizer step runs on the CPU.
    pub optimizer: bool,
    /// The gradients stream to the host as the backward pass produces them (through the
    /// communication buckets) instead of staying on the GPU (needs `optimizer`: ZeRO-Offload
    /// moves both).
    #[serde(default)]
    pub gradients: bool,
    /// The 16-bit parameters live in host memory too and are fetched layer by layer (ZeRO-3).
    pub parameters: bool,
}

/// The training program's conventions where they differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// PyTorch (Hugging Face, Megatron-LM, DeepSpeed): the loss computed in fp32 (the logits are
    /// upcast, so the softmax and its gradient are fp32 whatever the precision); token ids and
    /// labels as int64; each parameter its own tensor.
    #[default]
    PyTorch,
    /// The toy (oomlab's plan): the loss in the activation dtype; token ids, targets and the
    /// embedding backward's sorted index (`token_offsets`, V + 1, and `token_positions`) as u32;
    /// parameters padded to 128 elements in one flat tensor (aligned GPU bindings).
    Oomlab,
}

impl Runtime {
    fn fp32_loss(self) -> bool {
        self == Runtime::PyTorch
    }
    fn param_align(self) -> u64 {
        match self {
            Runtime::PyTorch => 1,
            Runtime::Oomlab => PARAM_ALIGN_ELEMS,
        }
    }
    /// Bytes of one micro-batch's inputs.
    fn input_bytes(self, rows: u128, vocab: u128) -> u128 {
        match self {
            Runtime::PyTorch => 2 * rows * 8,
            Runtime::Oomlab => 4 * (3 * rows + vocab + 1),
        }
    }
}

/// Everything the estimate depends on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub arch: Architecture,
    pub gpu: Gpu,
    /// b, sequences per forward pass on one GPU (the micro-batch).
    pub micro_batch: u64,
    /// s.
    pub seq: u64,
    /// Gradient accumulation: micro-batches per optimizer step.
    pub accum: u64,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub checkpoint: Checkpoint,
    pub attention: AttentionKind,
    pub lora: Option<Adapters>,
    pub parallel: Parallel,
    pub offload: Offload,
    /// How the training program stores what the formulas count.
    pub runtime: Runtime,
    /// Count the CUDA context, cuBLAS workspace, communication buffers and fragmentation
    /// margin (off for the toy, whose plan has none of them).
    pub fixed_costs: bool,
}

impl Setup {
    /// A model on a GPU with the common defaults: mixed bf16, Adam, standard attention, no
    /// checkpointing, one GPU, fp32 loss, fixed costs counted.
    pub fn new(arch: Architecture, gpu: Gpu, micro_batch: u64, seq: u64) -> Self {
        Self {
            arch,
            gpu,
            micro_batch,
            seq,
            accum: 1,
            precision: Precision::MixedBf16,
            optimizer: Optimizer::Adam,
            checkpoint: Checkpoint::Off,
            attention: AttentionKind::Standard,
            lora: None,
            parallel: Parallel::default(),
            offload: Offload::default(),
            runtime: Runtime::PyTorch,
            fixed_costs: true,
        }
    }

    /// The toy's own config and dtypes, as its plan builds them: no fixed costs, the toy's
    /// padding, the loss in the activation dtype.
    pub fn toy(
        model: &ModelConfig,
        shape: crate::model::StepShape,
        optimizer: crate::plan::OptimizerKind,
        techniques: &crate::plan::Techniques,
        capacity_bytes: u64,
    ) -> Self {
        let gpu = Gpu { name: "virtual GPU".into(), memory_bytes: capacity_bytes, compute_major: 8 };
        let mut s = Self::new(Architecture::from_toy(model), gpu, shape.batch as u64, shape.seq as u64);
        s.accum = techniques.accum as u64;
        s.precision = techniques.precision.into();
        s.optimizer = optimizer.into();
        s.checkpoint = techniques.checkpoint;
        s.attention = techniques.attention;
        s.lora = techniques.lora.map(|l| Adapters {
            rank: l.rank as u64,
            qkv: l.qkv,
            proj: l.proj,
            mlp: l.mlp,
            quantized: false,
        });
        s.runtime = Runtime::Oomlab;
        s.fixed_costs = false;
        s
    }

    pub fn validate(&self) -> Result<(), EstimateError> {
        self.arch.validate()?;
        let bad = |m: String| Err(EstimateError::Invalid(m));
        for (name, value, max) in [
            ("micro-batch", self.micro_batch, MAX_BATCH),
            ("sequence length", self.seq, 1 << 22),
            ("accumulation steps", self.accum, 1 << 20),
            ("data-parallel GPUs", self.parallel.data, 1 << 20),
            ("tensor-parallel GPUs", self.parallel.tensor, 1 << 10),
        ] {
            if value == 0 || value > max {
                return bad(format!("{name} must be between 1 and {max} (got {value})"));
            }
        }
        if self.arch.positions > 0 && self.seq > self.arch.positions {
            return bad(format!(
                "sequence length {} is longer than {}'s position table ({})",
                self.seq, self.arch.name, self.arch.positions
            ));
        }
        let t = self.parallel.tensor;
        if !self.arch.heads.is_multiple_of(t)
            || !self.arch.kv_heads.is_multiple_of(t)
            || !self.arch.ffn.is_multiple_of(t)
        {
            return bad(format!(
                "tensor parallelism {t} must divide the heads ({}), the key/value heads ({}) and the MLP width ({})",
                self.arch.heads, self.arch.kv_heads, self.arch.ffn
            ));
        }
        if self.parallel.sequence && !self.seq.is_multiple_of(t) {
            return bad(format!(
                "sequence parallelism splits the sequence ({}) over {t} GPUs: it must divide",
                self.seq
            ));
        }
        if self.parallel.zero > 3 {
            return bad(format!("ZeRO has stages 0 to 3 (got {})", self.parallel.zero));
        }
        if self.offload.gradients && !self.offload.optimizer {
            return bad(
                "gradient offload needs optimizer offload (the optimizer step must run where the gradients are)".into(),
            );
        }
        if self.offload.parameters && self.parallel.zero != 3 {
            return bad("parameter offload needs ZeRO stage 3 (it offloads the parameter shards)".into());
        }
        if let Checkpoint::Every(k) = self.checkpoint
            && (k == 0 || k as u64 > self.arch.layers)
        {
            return bad(format!("checkpoint every:{k} needs 1 <= K <= the number of layers ({})", self.arch.layers));
        }
        if let Some(l) = self.lora {
            if l.rank == 0 || l.rank >= self.arch.hidden {
                return bad(format!("LoRA rank must be between 1 and hidden - 1 (got {})", l.rank));
            }
            if !(l.qkv || l.proj || l.mlp) {
                return bad("LoRA needs at least one target projection".into());
            }
        }
        Ok(())
    }
}

/// The largest micro-batch the estimator considers.
pub const MAX_BATCH: u64 = 1 << 20;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EstimateError {
    #[error("{0}")]
    Invalid(String),
    /// A valid setup whose sizes pass [`MAX_ESTIMATE_BYTES`]: beyond any GPU, and beyond what
    /// oomlab counts.
    #[error("{what} would be {amount} bytes per GPU: more than oomlab counts ({limit} bytes at most)")]
    TooLarge { what: String, amount: u128, limit: u64 },
}

/// The largest byte count an estimate reports (4 EiB, as [`crate::plan::MAX_BUDGET_BYTES`]):
/// every quantity is computed in u128 and checked against it, so none wraps or saturates.
pub const MAX_ESTIMATE_BYTES: u64 = crate::plan::MAX_BUDGET_BYTES;

/// One line of the estimate: a category's bytes on each GPU, and where its formula comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    pub category: &'static str,
    pub bytes: u64,
    /// Grows with the micro-batch.
    pub per_batch: bool,
    /// The formula's source, and what the number means at this moment.
    pub source: String,
}

/// The estimate for one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Parameters of the whole model (exact count, no padding).
    pub parameters: u64,
    /// Trained parameters (the adapters under LoRA).
    pub trainable_parameters: u64,
    /// Per GPU, by category, in the order shown.
    pub lines: Vec<Line>,
    /// The sum of the lines: what must fit on the GPU.
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    /// Saved activations at the end of the forward pass (when the logits are alive)…
    pub activations_end_of_forward: u64,
    /// …and at their own peak (later, with checkpointing: a recomputed segment).
    pub activations_peak: u64,
    /// The logits, their softmax and the losses; and the logits' gradient.
    pub logits_bytes: u64,
    pub logits_grad_bytes: u64,
    /// One layer's backward working set.
    pub backward_working_set_bytes: u64,
    /// Host memory per GPU for offloaded state.
    pub host_bytes: u64,
    /// Bytes over PCIe per optimizer step per GPU for offload.
    pub pcie_bytes_per_step: u64,
    /// Tokens per optimizer step over all data-parallel GPUs: b · s · accum · N_d.
    pub tokens_per_step: u64,
}

impl Estimate {
    /// "6,738,415,616 parameters", with ", N trained" when fewer train (LoRA).
    pub fn parameters_text(&self) -> String {
        let all = crate::units::group_digits(self.parameters);
        if self.trainable_parameters == self.parameters {
            format!("{all} parameters")
        } else {
            format!("{all} parameters, {} trained", crate::units::group_digits(self.trainable_parameters))
        }
    }
    pub fn fits(&self) -> bool {
        self.peak_bytes <= self.capacity_bytes
    }
    pub fn get(&self, category: &str) -> u64 {
        self.lines.iter().filter(|l| l.category == category).map(|l| l.bytes).sum()
    }
}

/// Sources, cited next to the numbers they give.
pub mod source {
    pub const PARAMS: &str = "exact count from the architecture (GPT-2: 12Lh² + 13Lh + Vh + Th + 2h)";
    pub const ZERO: &str = "Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + KΨ, partitioned over N_d by stage";
    pub const ACTIVATIONS: &str =
        "Korthikanti et al. 2022, §4: sbh(34 + 5as/h) per layer, tensor by tensor (GQA, SwiGLU, RMSNorm derived)";
    pub const LOGITS: &str =
        "the lm_head output, the softmax kept for backward (fp32: Korthikanti's 4sbv) and the losses";
    pub const LOGITS_GRAD: &str = "the gradient of the logits, alive with the softmax at the start of backward";
    pub const INPUT: &str = "the micro-batch's token ids and labels (int64 in PyTorch)";
    pub const MLP_WORKING_SET: &str =
        "the gradients alive in the last layer's MLP backward: the residual stream's and the MLP's";
    pub const WORKING_SET: &str =
        "one layer's backward working set: the gradients of its residual stream, attention and MLP";
    pub const CONTEXT: &str =
        "CUDA context and loaded kernels: ~500 MiB per process (an assumed typical value; measure it with nvidia-smi)";
    pub const WORKSPACE: &str = "cuBLAS workspace, PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:2:16:8 (8.125 MiB), 32 MiB on Hopper (aten/src/ATen/cuda/CublasHandlePool.cpp)";
    pub const DDP: &str = "PyTorch DDP gradient buckets: a copy of the gradients unless gradient_as_bucket_view=True (torch.nn.parallel.DistributedDataParallel docs)";
    pub const ZERO_BUCKETS: &str = "DeepSpeed ZeRO reduce_bucket_size and allgather_bucket_size, 5e8 elements each by default; stage 3 gathers a layer's parameters (and prefetches the next)";
    pub const SP: &str = "sequence parallelism all-gathers a layer's input to the full sequence before the column-parallel linear (Korthikanti et al. 2022, §4.2.2)";
    pub const FRAGMENTATION: &str = "allocator fragmentation margin: an assumed 5 % of the allocated bytes (reserved minus allocated; the toy's allocator map measures it)";
    pub const OFFLOAD: &str = "Ren et al. 2021 (ZeRO-Offload): fp32 state and gradients on the host, 16-bit weights and gradients cross PCIe each step";
}

/// The CUDA context, per GPU process ([`source::CONTEXT`]).
pub const CUDA_CONTEXT_BYTES: u64 = 500 << 20;
/// The fragmentation margin in percent of the allocated bytes ([`source::FRAGMENTATION`]).
pub const FRAGMENTATION_PERCENT: u64 = 5;
/// DeepSpeed's default bucket sizes, in elements ([`source::ZERO_BUCKETS`]).
pub const ZERO_BUCKET_ELEMS: u64 = 500_000_000;

/// cuBLAS's workspace on a GPU of compute capability `major` ([`source::WORKSPACE`]).
pub fn cublas_workspace_bytes(major: u32) -> u64 {
    if major >= 9 { 4096 * 8 * 1024 } else { (4096 * 2 + 16 * 8) * 1024 }
}

/// `n` values of `bytes_per` bytes each, stored in whole 4-byte words as the toy does (a no-op
/// for real sizes, exact for the toy's 16-bit tensors of odd length).
fn words(n: u128, bytes_per: u128) -> u128 {
    (n * bytes_per).div_ceil(4) * 4
}

/// The model states on one GPU: (parameters, gradients, optimizer state, master weights), and
/// host bytes and PCIe traffic for offload.
struct States {
    parameters: u128,
    gradients: u128,
    optimizer: u128,
    master: u128,
    host: u128,
    pcie: u128,
    /// Trained elements (padded) and all elements (padded), before sharding.
    trainable: u128,
    /// The largest bucket-able gradient count (for communication buffers).
    layer_params: u128,
}

fn model_states(s: &Setup) -> States {
    let a = &s.arch;
    let pad = s.runtime.param_align();
    let align = |n: u64| n.div_ceil(pad) as u128 * pad as u128;
    let (w, g) = (s.precision.value_bytes() as u128, s.precision.value_bytes() as u128);
    let tensors = a.parameter_tensors();
    // Tensor parallelism splits the blocks' linear layers (and vocab-parallel embeddings) over t
    // GPUs; norms and biases of row-parallel layers are replicated — small, so the estimator
    // divides everything but the norms by t.
    let t = s.parallel.tensor as u128;
    let split = |role: Role, n: u128| if matches!(role, Role::Norm) { n } else { n.div_ceil(t) };
    let base: u128 = tensors.iter().map(|&(r, n)| split(r, align(n))).sum();
    let (stored, trainable) = match s.lora {
        None => (words(base, w), base),
        Some(l) => {
            // Adapters A (in × r) and B (r × out) on each targeted linear of each block.
            let adapters: u128 = (0..a.layers)
                .flat_map(|_| a.block_linears())
                .filter(|&(target, _, _)| l.targets(target))
                .map(|(_, k, n)| align(k * l.rank) + align(l.rank * n))
                .map(|n| n.div_ceil(t))
                .sum();
            let base_bytes = if l.quantized {
                // QLoRA: NF4 (4 bits) for the blocks' linear weights, with double-quantized
                // constants: 0.127 bits per parameter (Dettmers et al. 2023, §3) ≈ 8-bit absmax
                // per 64 weights plus an fp32 constant per 256 blocks. Embeddings, norms and
                // biases stay 16-bit.
                let quantized: u128 = tensors
                    .iter()
                    .filter(|(r, _)| matches!(r, Role::Linear(..)))
                    .map(|&(r, n)| split(r, align(n)))
                    .sum();
                let rest = base - quantized;
                quantized.div_ceil(2) + quantized.div_ceil(64) + (quantized.div_ceil(64 * 256)) * 4 + words(rest, w)
            } else {
                words(base, w)
            };
            (base_bytes + words(adapters, w), adapters)
        }
    };
    let mut states = partition(stored, trainable, s.precision, s.optimizer, s.parallel);
    if s.offload.optimizer {
        // The fp32 state moves to the host with an fp32 copy of the gradients; each step the
        // 16-bit gradients go down and the updated 16-bit weights come back: 4Ψ over PCIe with
        // 16-bit values (Ren et al. 2021, §4.1), each GPU its shard.
        let on = s.parallel.zero >= 1;
        let shard = |bytes: u128| if on { bytes.div_ceil(s.parallel.data as u128) } else { bytes };
        states.host += states.master + states.optimizer + shard(words(trainable, 4));
        states.pcie += shard(words(trainable, g)) + shard(words(trainable, w));
        states.master = 0;
        states.optimizer = 0;
        if s.offload.gradients {
            states.gradients = 0;
        }
    }
    if s.offload.parameters {
        // Each GPU's parameter shard is fetched for the forward and again for the backward pass.
        states.host += states.parameters;
        states.pcie += 2 * states.parameters;
        states.parameters = 0;
    }
    states.layer_params = a.layer_parameters().div_ceil(s.parallel.tensor) as u128;
    states
}

/// Model states over N_d data-parallel GPUs by ZeRO stage (Rajbhandari et al. 2020, §5):
/// stage 1 partitions the optimizer state (and the fp32 master weights), stage 2 the gradients
/// too, stage 3 the parameters too. `stored`: bytes of the stored weights; `trainable`: elements
/// that train (and have gradients, master weights and optimizer state).
fn partition(stored: u128, trainable: u128, precision: Precision, optimizer: Optimizer, parallel: Parallel) -> States {
    let n_d = parallel.data as u128;
    let zero = parallel.zero;
    let shard = |bytes: u128, on: bool| if on { bytes.div_ceil(n_d) } else { bytes };
    let p = precision;
    States {
        parameters: shard(stored, zero >= 3),
        gradients: shard(words(trainable, p.value_bytes() as u128), zero >= 2),
        optimizer: shard(optimizer.states() as u128 * words(trainable, p.state_bytes() as u128), zero >= 1),
        master: shard(words(trainable, p.master_bytes() as u128), zero >= 1),
        host: 0,
        pcie: 0,
        trainable,
        layer_params: 0,
    }
}

/// Model states of `parameters` trained parameters per GPU, without padding, LoRA or offload:
/// (parameters, gradients, optimizer state, master weights). ZeRO's example: 7.5 B parameters,
/// mixed-precision Adam, N_d = 64 → 120, 31.4, 16.6 and 1.9 GB for stages 0–3.
pub fn zero_model_states(parameters: u64, precision: Precision, optimizer: Optimizer, parallel: Parallel) -> [u64; 4] {
    let n = parameters as u128;
    let s = partition(words(n, precision.value_bytes() as u128), n, precision, optimizer, parallel);
    [sat(s.parameters), sat(s.gradients), sat(s.optimizer), sat(s.master)]
}

/// Saved activations: their peak over the step, and at the moments the peak can be.
///
/// Per layer, tensor by tensor (Korthikanti et al. 2022, §4.1, generalised). With p the bytes of
/// an activation value (2 in 16-bit training), `kv` the key/value width, `f` the MLP width:
/// - attention block: the layer input (LayerNorm-1's input, p·sbh) and its statistics (fp32,
///   2 per row for LayerNorm, 1 for RMSNorm); LayerNorm-1's output, the qkv projection's input
///   (p·sbh, kept only if that projection is trained or adapted); q, k, v (p·sb(h + 2kv));
///   the softmax output (p·as²b), with dropout its mask (as²b) and the dropped probabilities
///   (p·as²b) — Korthikanti's 5as²b; the attention output (p·sbh, input of the output
///   projection); with dropout the residual dropout mask (sbh);
/// - MLP block: LayerNorm-2's input (the first residual sum, p·sbh) and statistics, its output
///   (p·sbh, if the MLP is trained or adapted); GELU: its input and output (2·p·sbf; the output
///   only if the second matrix is trained); SwiGLU: the gate and up outputs and silu(gate)
///   (3·p·sbf) and their product (p·sbf, if the down projection is trained); the residual
///   dropout mask (sbh).
///
/// With GPT-2's h, f = 4h, p = 2 and dropout this is `sbh(34 + 5as/h)` plus the statistics
/// Korthikanti leave out (8sb per LayerNorm). Tensor parallelism divides the tensors between
/// the column- and row-parallel linears by t; sequence parallelism the rest too.
/// Fused attention (Dao 2022) keeps the row logsumexp (fp32, a·s·b) instead of the 5as²b.
/// LoRA adapters keep their rank-r intermediate (p·rsb each).
/// Saved activations at three moments of the step.
struct Acts {
    /// The most alive at any moment.
    peak: u128,
    /// At the end of the forward pass (the loss).
    end_of_forward: u128,
    /// When a layer's attention backward runs (its largest gradient working set), at the layer
    /// where that is most; with checkpointing every k blocks, a segment's recomputation (the
    /// gradient buffers are already allocated then).
    at_attention_backward: u128,
    /// When the last layer's MLP activation backward runs (its block still saved but for the
    /// down projection's input, the tensors outside the blocks freed).
    at_mlp_backward: u128,
    /// Checkpointing every k blocks: the end of an earlier segment's recomputation, when every
    /// gradient buffer exists (0 without one).
    earlier_recompute: u128,
}

/// The step's sizes, in u128 so that no product overflows, and how a tensor splits over the
/// tensor-parallel GPUs.
struct Sizes {
    /// s, h, a (heads), the key/value width, f, t.
    sq: u128,
    h: u128,
    heads: u128,
    kv: u128,
    f: u128,
    t: u128,
    /// t with sequence parallelism, else 1: the LayerNorm/dropout region's split.
    sp: u128,
    /// Bytes of an activation value.
    p: u128,
    /// s·b, the rows.
    sb: u128,
}

impl Sizes {
    fn new(s: &Setup) -> Self {
        let a = &s.arch;
        let (sq, b) = (s.seq as u128, s.micro_batch as u128);
        let t = s.parallel.tensor as u128;
        Self {
            sq,
            h: a.hidden as u128,
            heads: a.heads as u128,
            kv: a.kv_hidden() as u128,
            f: a.ffn as u128,
            t,
            sp: if s.parallel.sequence { t } else { 1 },
            p: s.precision.value_bytes() as u128,
            sb: sq * b,
        }
    }
    /// n values of `bytes` each in the tensor-parallel region (split by t).
    fn tp(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.t), bytes)
    }
    /// n values of `bytes` each in the LayerNorm/dropout region (split by t only with sequence
    /// parallelism).
    fn rep(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.sp), bytes)
    }
}

fn activations(s: &Setup) -> Acts {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, heads, kv, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let stats = if a.norm == Norm::LayerNorm { 2 } else { 1 };
    let norm_stats = stats * rep(sb, 4);
    let lora = s.lora;
    let trained = |target: Target| lora.is_none_or(|l| l.targets(target));
    let fused = s.attention == AttentionKind::Fused;
    let if_ = |c: bool, v: u128| if c { v } else { 0 };
    let drop = a.dropout;

    let input = rep(sb * h, p);
    let qkv = if a.fused_qkv { tp(sb * (h + 2 * kv), p) } else { tp(sb * h, p) + 2 * tp(sb * kv, p) };
    let pre_att = input + norm_stats + if_(trained(Target::Qkv), rep(sb * h, p)) + qkv;
    let att = if fused {
        tp(heads * sb, 4)
    } else {
        let probs = heads * sq * sb;
        tp(probs, p) + if_(drop, tp(probs, 1) + tp(probs, p))
    };
    let mlp_acts = match a.mlp {
        Mlp::Gelu => tp(sb * f, p) + if_(trained(Target::Mlp), tp(sb * f, p)),
        Mlp::SwiGlu => 3 * tp(sb * f, p) + if_(trained(Target::Mlp), tp(sb * f, p)),
    };
    let post_att = if_(trained(Target::Proj) || fused, tp(sb * h, p))
        + if_(drop, rep(sb * h, 1))
        + rep(sb * h, p)
        + norm_stats
        + if_(trained(Target::Mlp), rep(sb * h, p))
        + mlp_acts
        + if_(drop, rep(sb * h, 1));
    // Each adapter keeps x·A (r values per row).
    let adapter = |target: Target| {
        lora.filter(|l| l.targets(target)).map_or(0, |l| {
            let per_linear = words(sb * l.rank as u128, p);
            a.block_linears().iter().filter(|(tg, _, _)| *tg == target).count() as u128 * per_linear
        })
    };
    let adapters_after_att = adapter(Target::Proj) + adapter(Target::Mlp);
    let adapters = adapter(Target::Qkv) + adapters_after_att;
    let block = pre_att + att + post_att + adapters;
    // Outside the blocks: the embedding dropout mask, the last block's output (the final norm's
    // input) and statistics, and the final norm's output (the lm_head's input, if trained).
    let outside = if_(drop, rep(sb * h, 1)) + input + norm_stats + if_(lora.is_none(), rep(sb * h, p));
    let l = a.layers as u128;
    let checkpoint = if fused && s.checkpoint == Checkpoint::Selective { Checkpoint::Off } else { s.checkpoint };
    // The last layer's post-attention tensors and the outside ones are freed by the time the
    // backward pass reaches that layer's attention.
    let after_att = post_att + adapters_after_att;
    // When the last layer's MLP activation backward runs, its down projection's input (GELU's
    // output, SwiGLU's product; saved only if that projection trains) is freed.
    let down_input = if_(trained(Target::Mlp), tp(sb * f, p));
    match checkpoint {
        Checkpoint::Off => {
            let end_of_forward = l * block + outside;
            Acts {
                peak: end_of_forward,
                end_of_forward,
                at_attention_backward: end_of_forward - after_att - outside,
                at_mlp_backward: end_of_forward - outside - down_input,
                earlier_recompute: 0,
            }
        }
        Checkpoint::Selective => {
            // No attention core is kept; the backward pass recomputes one layer's at a time,
            // after that layer has freed what follows its attention (and the outside tensors).
            let end_of_forward = l * (block - att) + outside;
            let recompute = end_of_forward - after_att - outside + att;
            Acts {
                peak: end_of_forward.max(recompute),
                end_of_forward,
                at_attention_backward: recompute,
                at_mlp_backward: end_of_forward - outside - down_input,
                earlier_recompute: 0,
            }
        }
        Checkpoint::Every(k) => {
            // Chen et al. 2016: keep each segment's input; recompute one segment (n blocks) at a
            // time, on top of the inputs of the segments before it.
            let k = (k as u128).clamp(1, l);
            let segments = l.div_ceil(k);
            let end_of_forward = input * segments + outside;
            let recomputed = |j: u128| {
                let n = k.min(l - j * k);
                (j + 1) * input + n * (block - input) + (n - 1) * input
            };
            let peak = (0..segments).map(recomputed).fold(end_of_forward, u128::max);
            // The last segment is recomputed first, before any gradient buffer but the residual
            // stream's exists; its last layer's MLP and attention backward are the moments. The
            // gradient buffers, once allocated, stay while the earlier segments are recomputed:
            // those recomputations count with all of them, at their last op, when the last
            // block's projection output and its (recomputed, already consumed) output exist too.
            // (A frozen MLP saves no GELU output: its recomputation holds it as a temporary
            // while the down projection runs.)
            let last = recomputed(segments - 1);
            let tail = (2 * input).max(input + if_(!trained(Target::Mlp), tp(sb * f, p)));
            let earlier = (0..segments - 1).map(|j| recomputed(j) + tail).max().unwrap_or(0);
            Acts {
                peak,
                end_of_forward,
                at_attention_backward: last - after_att,
                at_mlp_backward: last - down_input,
                earlier_recompute: earlier,
            }
        }
    }
}

/// The logits' bytes (logits, the softmax kept for backward, per-row losses and the loss) and the
/// logits' gradient. Vocabulary-parallel over t GPUs (Megatron-LM).
fn logits(s: &Setup) -> (u128, u128) {
    let z = Sizes::new(s);
    let n = (z.sb * s.arch.vocab as u128).div_ceil(z.t);
    let loss = if s.runtime.fp32_loss() { 4 } else { z.p };
    (words(n, z.p) + words(n, loss) + words(z.sb, 4) + 4, words(n, loss))
}

/// The backward pass's gradient buffers (the toy's plan allocates each once and reuses it layer
/// after layer; PyTorch's caching allocator reuses the same blocks), alive (a) when the last
/// layer's MLP activation backward runs: the residual stream's gradient three times (the
/// incoming gradient, the norm's input gradient and the sum) and the MLP's (two of width f for
/// GELU, three for SwiGLU); (b) during a layer's attention backward — one layer's whole working
/// set: those, the attention output's, q/k/v's, and the attention core's
/// (`a·s²·b`, or fused attention's fp32 `a·s·b` row terms); with LoRA, the adapters' shared
/// rank-r gradient buffer.
fn working_sets(s: &Setup) -> (u128, u128, u128) {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, heads, kv, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let mlp = match a.mlp {
        Mlp::Gelu => 2,
        Mlp::SwiGlu => 3,
    };
    let core = if s.attention == AttentionKind::Fused { tp(heads * sb, 4) } else { tp(heads * sq * sb, p) };
    // LoRA: one buffer for the gradient of an adapter's rank-r intermediate, reused by every
    // adapter; it exists by the attention backward if an adapter after the attention (output
    // projection, MLP) ran its backward first.
    let lora_grad = |on: bool| s.lora.filter(|_| on).map_or(0, |l| words(sb * l.rank as u128, p));
    let (mlp_adapted, proj_adapted) = s.lora.map_or((false, false), |l| (l.mlp, l.proj));
    let at_mlp = 3 * rep(sb * h, p) + mlp * tp(sb * f, p);
    let all = at_mlp + tp(sb * h, p) + tp(sb * (h + 2 * kv), p) + core;
    // (c) every gradient buffer, the adapters' included (an earlier segment's recomputation).
    (at_mlp, all + lora_grad(proj_adapted || mlp_adapted), all + lora_grad(true))
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The estimate for `setup` on each of its GPUs. A valid setup whose bytes pass
/// [`MAX_ESTIMATE_BYTES`] is [`EstimateError::TooLarge`].
pub fn estimate(setup: &Setup) -> Result<Estimate, EstimateError> {
    setup.validate()?;
    // Every u128 quantity passes through `sat`, which remembers the first one too large to
    // report; the estimate is then refused rather than shown saturated.
    let too_large: std::cell::Cell<Option<(&'static str, u128)>> = std::cell::Cell::new(None);
    let checked = |what: &'static str, v: u128| -> u64 {
        if v > MAX_ESTIMATE_BYTES as u128 {
            if too_large.get().is_none() {
                too_large.set(Some((what, v)));
            }
            MAX_ESTIMATE_BYTES
        } else {
            v as u64
        }
    };
    let st = model_states(setup);
    let acts_at = activations(setup);
    let (act_peak, act_eof) = (acts_at.peak, acts_at.end_of_forward);
    let (logit_bytes, dlogits) = logits(setup);
    // The step's transient peak, the largest of its moments: the start of the backward pass, with
    // every saved activation, the logits, their softmax and the logits' gradient alive; the last
    // layer's MLP backward; a layer's attention backward with one layer's gradient working set;
    // with checkpointing, the end of an earlier segment's recomputation with every gradient
    // buffer. The logits are gone after the first. On the toy this is the plan's peak, byte for
    // byte (tests/estimate.rs).
    let rows = setup.micro_batch as u128 * setup.seq as u128;
    // The toy's plan keeps every micro-batch's inputs for the whole step; PyTorch loads one
    // micro-batch at a time.
    let micro_batches = if setup.runtime == Runtime::Oomlab { setup.accum as u128 } else { 1 };
    let input_bytes = micro_batches * setup.runtime.input_bytes(rows, setup.arch.vocab as u128);
    // Each micro-batch's loss (one fp32 value) stays until the step ends: the toy's plan keeps
    // one per micro-batch.
    let earlier_losses = 4 * (micro_batches - 1);
    let at_loss = act_eof + logit_bytes + earlier_losses + dlogits;
    let (mlp_working, layer_working, all_working) = working_sets(setup);
    let (layer_acts, working) =
        if acts_at.earlier_recompute + all_working > acts_at.at_attention_backward + layer_working {
            (acts_at.earlier_recompute, all_working)
        } else {
            (acts_at.at_attention_backward, layer_working)
        };
    let at_layer = layer_acts + working + 4 + earlier_losses;
    let at_mlp = acts_at.at_mlp_backward + mlp_working + 4 + earlier_losses;
    let freed = || {
        format!(
            "freed by the peak, a layer's backward pass (at the loss they take {}); {}",
            crate::units::format_bytes(checked("the logits", logit_bytes + dlogits)),
            source::LOGITS
        )
    };
    let (acts, logit_line, grad_line, logit_source, grad_source) = if at_loss >= at_layer.max(at_mlp) {
        (act_eof, logit_bytes + earlier_losses, dlogits, source::LOGITS.to_string(), source::LOGITS_GRAD)
    } else if at_mlp > at_layer {
        (acts_at.at_mlp_backward, 4 + earlier_losses, mlp_working, freed(), source::MLP_WORKING_SET)
    } else {
        // The loss itself (one fp32 value) stays until the step ends.
        (layer_acts, 4 + earlier_losses, working, freed(), source::WORKING_SET)
    };
    let mut lines = vec![
        Line {
            category: "parameters",
            bytes: checked("parameters", st.parameters),
            per_batch: false,
            source: source::PARAMS.into(),
        },
        Line {
            category: "gradients",
            bytes: checked("gradients", st.gradients),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "optimizer_state",
            bytes: checked("optimizer state", st.optimizer),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "master_weights",
            bytes: checked("master weights", st.master),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "activations",
            bytes: checked("activations", acts),
            per_batch: true,
            source: source::ACTIVATIONS.into(),
        },
        Line { category: "logits", bytes: checked("logits", logit_line), per_batch: true, source: logit_source },
        Line {
            category: "temporaries",
            bytes: checked("temporaries", grad_line),
            per_batch: true,
            source: grad_source.into(),
        },
        Line { category: "input", bytes: checked("input", input_bytes), per_batch: true, source: source::INPUT.into() },
    ];
    if setup.runtime == Runtime::Oomlab && setup.precision == Precision::MixedFp16 {
        lines.push(Line {
            category: "workspace",
            bytes: 4,
            per_batch: false,
            source: "the loss scaler's overflow flag (found_inf), one u32".into(),
        });
    }
    if setup.fixed_costs {
        let p = setup.precision.value_bytes() as u128;
        let n_d = setup.parallel.data;
        let mut comm: u128 = 0;
        let mut comm_source = source::DDP;
        if n_d > 1 {
            match setup.parallel.zero {
                0 => comm += words(st.trainable, p),
                1 | 2 => {
                    comm += 2 * words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p);
                    comm_source = source::ZERO_BUCKETS;
                }
                _ => {
                    // The reduce bucket, and three layers' worth of gathered tensors: the current
                    // layer's parameters, the next layer's (prefetched) and the layer's gradients
                    // before they are reduce-scattered.
                    comm += words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p) + 3 * words(st.layer_params, p);
                    comm_source = source::ZERO_BUCKETS;
                }
            }
        }
        if setup.parallel.sequence && setup.parallel.tensor > 1 {
            comm += words(setup.seq as u128 * setup.micro_batch as u128 * setup.arch.hidden as u128, p);
            if n_d == 1 {
                comm_source = source::SP;
            }
        }
        let allocated: u64 = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
        let allocated = allocated.saturating_add(checked("communication", comm));
        lines.extend([
            Line {
                category: "communication",
                bytes: checked("communication", comm),
                per_batch: setup.parallel.sequence,
                source: comm_source.into(),
            },
            Line {
                category: "workspace",
                bytes: cublas_workspace_bytes(setup.gpu.compute_major),
                per_batch: false,
                source: source::WORKSPACE.into(),
            },
            Line {
                category: "cuda_context",
                bytes: CUDA_CONTEXT_BYTES,
                per_batch: false,
                source: source::CONTEXT.into(),
            },
            Line {
                category: "fragmentation",
                bytes: allocated / 100 * FRAGMENTATION_PERCENT,
                per_batch: true,
                source: source::FRAGMENTATION.into(),
            },
        ]);
    }
    let peak_bytes = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
    let peak_bytes = checked("the peak", peak_bytes as u128);
    if let Some((what, amount)) = too_large.get() {
        return Err(EstimateError::TooLarge { what: what.to_string(), amount, limit: MAX_ESTIMATE_BYTES });
    }
    let tokens = setup.micro_batch as u128 * setup.seq as u128 * setup.accum as u128 * setup.parallel.data as u128;
    Ok(Estimate {
        parameters: setup.arch.parameters(),
        trainable_parameters: match setup.lora {
            None => setup.arch.parameters(),
            Some(l) => (0..setup.arch.layers)
                .flat_map(|_| setup.arch.block_linears())
                .filter(|&(target, _, _)| l.targets(target))
                .map(|(_, k, n)| l.rank * (k + n))
                .sum(),
        },
        lines,
        peak_bytes,
        capacity_bytes: setup.gpu.memory_bytes,
        activations_end_of_forward: checked("activations", act_eof),
        activations_peak: checked("activations", act_peak),
        logits_bytes: checked("the logits", logit_bytes),
        logits_grad_bytes: checked("the logits' gradient", dlogits),
        backward_working_set_bytes: checked("the backward working set", working),
        host_bytes: checked("host memory", st.host),
        pcie_bytes_per_step: checked("PCIe traffic", st.pcie),
        tokens_per_step: checked("tokens per step", tokens),
    })
}

/// The largest micro-batch whose estimate fits the GPU (0 if none does), by bisection: the
/// estimate never falls as the batch grows (tested).
pub fn max_micro_batch(setup: &Setup) -> Result<u64, EstimateError> {
    // A micro-batch too large to count fits no GPU.
    let at = |b: u64| {
        let mut s = setup.clone();
        s.micro_batch = b;
        match estimate(&s) {
            Ok(e) => Ok(e.fits()),
            Err(EstimateError::TooLarge { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    };
    if !at(1)? {
        return Ok(0);
    }
    let (mut lo, mut hi) = (1, MAX_BATCH);
    if at(hi)? {
        return Ok(hi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at(mid)? { lo = mid } else { hi = mid }
    }
    Ok(lo)
}

/// The estimate as the CLI's `--json` document (and the app's export): the settings,
/// `parameters`, `per_gpu_bytes` and `sources` by category, `peak_bytes`, `capacity_bytes`, `fits`,
/// `max_micro_batch`, `tokens_per_step`, offload's `host_bytes` and `pcie_bytes_per_step`, and the
/// `sweep` when one was made.
pub fn to_json(s: &Setup, e: &Estimate, max_micro_batch: u64, sweep: &[(u64, Estimate)]) -> serde_json::Value {
    let mut per_gpu = serde_json::Map::new();
    let mut sources = serde_json::Map::new();
    for l in &e.lines {
        let bytes = per_gpu.get(l.category).and_then(serde_json::Value::as_u64).unwrap_or(0);
        per_gpu.insert(l.category.to_string(), bytes.saturating_add(l.bytes).into());
        sources.insert(l.category.to_string(), l.source.clone().into());
    }
    serde_json::json!({
        // Every number here is the closed-form estimate's; `sources` names each category's formula.
        "source": "predicted",
        "model": s.arch.name,
        "architecture": s.arch,
        "gpu": s.gpu.name,
        "micro_batch": s.micro_batch,
        "seq_len": s.seq,
        "accum": s.accum,
        "precision": s.precision.name(),
        "optimizer": s.optimizer.name(),
        "parallel": s.parallel,
        "offload": s.offload,
        "checkpoint": s.checkpoint.label(),
        "attention": s.attention.name(),
        "lora": s.lora,
        "parameters": e.parameters,
        "trainable_parameters": e.trainable_parameters,
        "per_gpu_bytes": per_gpu,
        "sources": sources,
        "peak_bytes": e.peak_bytes,
        "capacity_bytes": e.capacity_bytes,
        "fits": e.fits(),
        "max_micro_batch": max_micro_batch,
        "tokens_per_step": e.tokens_per_step,
        "host_bytes": e.host_bytes,
        "pcie_bytes_per_step": e.pcie_bytes_per_step,
        "sweep": sweep
            .iter()
            .map(|(b, x)| serde_json::json!({"micro_batch": b, "peak_bytes": x.peak_bytes, "fits": x.fits()}))
            .collect::<Vec<_>>(),
    })
}

/// The micro-batches a memory-vs-batch chart shows: 1, 2, 4, … up to twice the largest that fits
/// (`max_fit`), at least up to 16.
pub fn sweep_batches(max_fit: u64) -> Vec<u64> {
    let top = max_fit.saturating_mul(2).clamp(16, MAX_BATCH);
    std::iter::successors(Some(1u64), |b| (b * 2 <= top).then_some(b * 2)).collect()
}

/// The estimate at each micro-batch of `batches`, up to the first too large to count (an
/// invalid setup is an error).
pub fn sweep(setup: &Setup, batches: &[u64]) -> Result<Vec<(u64, Estimate)>, EstimateError> {
    let mut out = Vec::with_capacity(batches.len());
    for &b in batches {
        let mut s = setup.clone();
        s.micro_batch = b;
        match estimate(&s) {
            Ok(e) => out.push((b, e)),
            Err(EstimateError::TooLarge { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
