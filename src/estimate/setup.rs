//! What an estimate is asked: the model on a GPU at a batch shape, and how it is trained —
//! precision, optimizer, parallelism, offload, LoRA — with its validation.

use serde::{Deserialize, Serialize};

use super::error::{EstimateError, Size};
use super::parallel::{ContextKind, Schedule};
use super::{Architecture, Framework, Gpu, Parallel, Target};
use crate::model::ModelConfig;
use crate::model::params::PARAM_ALIGN_ELEMS;
use crate::plan::{AttentionKind, Checkpoint};

/// How weights, gradients and optimizer state are stored (the model states' precision; the
/// toy's step precision is [`crate::plan::Precision`], which converts into this).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatePrecision {
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

impl StatePrecision {
    pub fn parse(text: &str) -> Result<Self, EstimateError> {
        Ok(match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "f32" => StatePrecision::Fp32,
            "fp16" | "mixed-fp16" | "mixed_fp16" => StatePrecision::MixedFp16,
            "bf16" | "mixed-bf16" | "mixed_bf16" => StatePrecision::MixedBf16,
            "pure-bf16" | "pure_bf16" | "bf16-pure" => StatePrecision::PureBf16,
            other => {
                return Err(EstimateError::UnknownPrecision { got: other.to_string() });
            }
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            StatePrecision::Fp32 => "fp32",
            StatePrecision::MixedFp16 => "fp16",
            StatePrecision::MixedBf16 => "bf16",
            StatePrecision::PureBf16 => "pure-bf16",
        }
    }
    /// Bytes of a working weight, a gradient and an activation.
    pub fn value_bytes(self) -> u64 {
        if self == StatePrecision::Fp32 { 4 } else { 2 }
    }
    pub(crate) fn master_bytes(self) -> u64 {
        if matches!(self, StatePrecision::MixedFp16 | StatePrecision::MixedBf16) { 4 } else { 0 }
    }
    pub(crate) fn state_bytes(self) -> u64 {
        if self == StatePrecision::PureBf16 { 2 } else { 4 }
    }
}

impl From<crate::plan::Precision> for StatePrecision {
    fn from(p: crate::plan::Precision) -> Self {
        match p {
            crate::plan::Precision::Fp32 => StatePrecision::Fp32,
            crate::plan::Precision::Fp16 => StatePrecision::MixedFp16,
            crate::plan::Precision::Bf16 => StatePrecision::MixedBf16,
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
                return Err(EstimateError::UnknownOptimizer { got: other.to_string() });
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
    pub(crate) fn targets(&self, t: Target) -> bool {
        match t {
            Target::Qkv => self.qkv,
            Target::Proj => self.proj,
            Target::Mlp => self.mlp,
        }
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

/// The training program whose saved tensors the estimate counts (a *runtime profile*).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// Fused, Megatron-style kernels (Korthikanti et al. 2022): the idealised set of saved
    /// tensors — the default, and the published vectors' convention. PyTorch's loss conventions
    /// (logits upcast to fp32, int64 token ids, each parameter its own tensor).
    #[default]
    #[serde(alias = "py_torch")]
    Fused,
    /// Hugging Face transformers' eager implementations (GPT-2, LLaMA and every family
    /// [`super::hf`] reads), as they run on CUDA: what `modeling_gpt2.py`, `modeling_llama.py`,
    /// `modeling_gemma2.py`, `modeling_mixtral.py`, … leave for autograd, op by op
    /// ([`super::activations::saved_per_layer`] names each tensor and its source function).
    HfEager,
    /// The toy (oomlab's plan): the loss in the activation dtype; token ids, targets and the
    /// embedding backward's sorted index (`token_offsets`, V + 1, and `token_positions`) as u32;
    /// parameters padded to 128 elements in one flat tensor (aligned GPU bindings).
    Oomlab,
}

impl Runtime {
    /// The profiles a user chooses between for a real model (the toy's is the toy's own).
    pub const REAL: [Runtime; 2] = [Runtime::Fused, Runtime::HfEager];

    /// The name the CLI and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Fused => "fused",
            Runtime::HfEager => "hf-eager",
            Runtime::Oomlab => "oomlab",
        }
    }
    pub(crate) fn fp32_loss(self) -> bool {
        self != Runtime::Oomlab
    }
    pub(crate) fn param_align(self) -> u64 {
        match self {
            Runtime::Fused | Runtime::HfEager => 1,
            Runtime::Oomlab => PARAM_ALIGN_ELEMS,
        }
    }
    /// Bytes of one micro-batch's inputs.
    pub(crate) fn input_bytes(self, rows: u128, vocab: u128) -> u128 {
        match self {
            Runtime::Fused | Runtime::HfEager => 2 * rows * 8,
            Runtime::Oomlab => 4 * (3 * rows + vocab + 1),
        }
    }
}

/// What a user measured on their own GPU, replacing an assumption of the estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The CUDA context and loaded kernels, in bytes (e.g. `nvidia-smi` with an idle process
    /// that has touched CUDA), instead of the assumed [`super::CUDA_CONTEXT_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_bytes: Option<u64>,
    /// Reserved minus allocated, as a percentage of allocated (`torch.cuda.memory_reserved()` and
    /// `memory_allocated()` at the peak), instead of the assumed
    /// [`super::FRAGMENTATION_PERCENT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmentation_percent: Option<f64>,
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
    pub precision: StatePrecision,
    pub optimizer: Optimizer,
    pub checkpoint: Checkpoint,
    pub attention: AttentionKind,
    pub lora: Option<Adapters>,
    pub parallel: Parallel,
    pub offload: Offload,
    /// The runtime profile, if the user chose one: without a choice the estimate is the fused
    /// profile's, and the views show the HF-eager one beside it ([`Setup::runtime`]).
    #[serde(default)]
    pub runtime: Option<Runtime>,
    /// What the user measured on their GPU (replaces the assumed context and fragmentation).
    #[serde(default)]
    pub measured: Measured,
    /// Count the CUDA context, cuBLAS workspace, communication buffers and fragmentation
    /// margin (off for the toy, whose plan has none of them).
    pub fixed_costs: bool,
    /// The framework whose dtypes the model states are kept in.
    #[serde(default, skip_serializing_if = "Framework::is_default")]
    pub framework: Framework,
    /// The communication bucket, in elements, where the run sets its own (the toy's); None:
    /// the framework's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_elems: Option<u64>,
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
            precision: StatePrecision::MixedBf16,
            optimizer: Optimizer::Adam,
            checkpoint: Checkpoint::Off,
            attention: AttentionKind::Standard,
            lora: None,
            parallel: Parallel::default(),
            offload: Offload::default(),
            runtime: None,
            measured: Measured::default(),
            fixed_costs: true,
            framework: Framework::default(),
            bucket_elems: None,
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
        let p = techniques.parallel;
        s.parallel = Parallel { data: p.gpus as u64, zero: p.stage(), ..Parallel::default() };
        s.bucket_elems = Some(p.bucket_elems);
        let o = techniques.offload;
        s.offload = Offload { optimizer: o.is_on(), gradients: o.gradients(), parameters: false };
        s.runtime = Some(Runtime::Oomlab);
        s.fixed_costs = false;
        s
    }

    /// The runtime profile the estimate counts: the chosen one, else fused kernels.
    pub fn runtime(&self) -> Runtime {
        self.runtime.unwrap_or_default()
    }

    pub fn validate(&self) -> Result<(), EstimateError> {
        self.arch.validate()?;
        validate_pipeline(self)?;
        validate_context(self)?;
        use EstimateError as E;
        for (what, value, max) in [
            (Size::MicroBatch, self.micro_batch, MAX_BATCH),
            (Size::Sequence, self.seq, 1 << 22),
            (Size::Accumulation, self.accum, 1 << 20),
            (Size::DataParallel, self.parallel.data, 1 << 20),
            (Size::TensorParallel, self.parallel.tensor, 1 << 10),
            (Size::PipelineStages, self.parallel.pipeline, 1 << 10),
            (Size::ContextParallel, self.parallel.context, 1 << 10),
        ] {
            if value == 0 || value > max {
                return Err(E::OutOfRange { what, value, max });
            }
        }
        if self.arch.positions > 0 && self.seq > self.arch.positions {
            let (seq, positions, model) = (self.seq, self.arch.positions, self.arch.name.clone());
            return Err(E::SequenceBeyondPositions { seq, model, positions });
        }
        let t = self.parallel.tensor;
        let a = &self.arch;
        if !a.heads.is_multiple_of(t) || !a.kv_heads.is_multiple_of(t) || !a.ffn.is_multiple_of(t) {
            return Err(E::TensorParallelDivide { tensor: t, heads: a.heads, kv_heads: a.kv_heads, ffn: a.ffn });
        }
        let ep = self.parallel.expert;
        match self.arch.block.moe {
            None if ep != 1 => return Err(E::ExpertParallelNeedsMixture { expert: ep }),
            Some(m) if ep == 0 || !m.experts.is_multiple_of(ep) || !self.parallel.data.is_multiple_of(ep) => {
                return Err(E::ExpertParallelDivide { expert: ep, experts: m.experts, data: self.parallel.data });
            }
            _ => {}
        }
        if let (Some(_), Some(l)) = (self.arch.block.moe, self.lora)
            && l.mlp
        {
            return Err(E::LoraOnExperts);
        }
        if self.parallel.sequence && !self.seq.is_multiple_of(t) {
            return Err(E::SequenceParallelDivide { seq: self.seq, tensor: t });
        }
        if let Some(bytes) = self.measured.context_bytes
            && bytes > 1 << 40
        {
            return Err(E::MeasuredContext { bytes });
        }
        if let Some(percent) = self.measured.fragmentation_percent
            && !(0.0..=1000.0).contains(&percent)
        {
            return Err(E::MeasuredFragmentation { percent });
        }
        if self.parallel.zero > 3 {
            return Err(E::ZeroStage { stage: self.parallel.zero });
        }
        if self.offload.gradients && !self.offload.optimizer {
            return Err(E::GradientOffloadAlone);
        }
        if self.offload.parameters && self.parallel.zero != 3 {
            return Err(E::ParameterOffloadNeedsZero3);
        }
        if let Checkpoint::Every(k) = self.checkpoint
            && (k == 0 || k as u64 > self.arch.layers)
        {
            return Err(E::CheckpointEvery { k, layers: self.arch.layers });
        }
        let f = self.framework;
        if f != Framework::Zero && f != Framework::Deepspeed {
            if self.lora.is_some() || self.offload != Offload::default() {
                return Err(E::ProfileFullTraining { framework: f });
            }
            if f == Framework::PytorchAmp
                && !matches!(self.precision, StatePrecision::MixedBf16 | StatePrecision::MixedFp16)
            {
                return Err(E::AmpPrecision);
            }
            if f == Framework::PytorchAmp && self.parallel.zero > 0 {
                return Err(E::AmpZero);
            }
            if f == Framework::Megatron && self.parallel.zero > 1 {
                return Err(E::MegatronZero);
            }
            if f == Framework::Fsdp2 && self.parallel.zero != 3 {
                return Err(E::Fsdp2Zero);
            }
        }
        if let Some(l) = self.lora {
            if l.rank == 0 || l.rank >= self.arch.hidden {
                return Err(E::LoraRank { rank: l.rank });
            }
            if !(l.qkv || l.proj || l.mlp) {
                return Err(E::LoraNoTarget);
            }
        }
        Ok(())
    }
}

/// The largest micro-batch the estimator considers.
pub const MAX_BATCH: u64 = 1 << 20;

/// The largest byte count an estimate reports (4 EiB, as [`crate::plan::MAX_BUDGET_BYTES`]):
/// every quantity is computed in u128 and checked against it, so none wraps or saturates.
pub const MAX_ESTIMATE_BYTES: u64 = crate::plan::MAX_BUDGET_BYTES;

/// The pipeline's setup checks: at most one stage per layer; under the interleaved schedule the
/// layers divide into p·v chunks (as Megatron-LM asks).
fn validate_pipeline(s: &Setup) -> Result<(), EstimateError> {
    let (p, l) = (s.parallel.pipeline, s.arch.layers);
    if p == 0 || p > l {
        return Err(EstimateError::PipelineStages { stages: p, layers: l });
    }
    if let Schedule::Interleaved(v) = s.parallel.schedule {
        if !(2..=64).contains(&v) {
            return Err(EstimateError::InterleavedChunks { chunks: v });
        }
        if p < 2 || !l.is_multiple_of(p * v) {
            return Err(EstimateError::InterleavedDivide { stages: p, chunks: v, layers: l });
        }
    }
    Ok(())
}

/// Context parallelism splits the sequence evenly and runs fused attention kernels (ring
/// attention and Ulysses are built on FlashAttention); Ulysses splits the heads too.
fn validate_context(s: &Setup) -> Result<(), EstimateError> {
    let c = s.parallel.context;
    if c == 1 {
        return Ok(());
    }
    if !s.seq.is_multiple_of(c) {
        return Err(EstimateError::ContextDivide { seq: s.seq, context: c });
    }
    if s.attention != AttentionKind::Fused {
        return Err(EstimateError::ContextNeedsFused);
    }
    let (a, t) = (&s.arch, s.parallel.tensor);
    if s.parallel.context_kind == ContextKind::Ulysses
        && !(a.heads.is_multiple_of(c * t) && a.kv_heads.is_multiple_of(c * t))
    {
        return Err(EstimateError::UlyssesHeads { heads: a.heads, kv_heads: a.kv_heads, context: c, tensor: t });
    }
    Ok(())
}
