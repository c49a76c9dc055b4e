//! The memory-saving techniques a step can use. Each changes the plan — which tensors exist,
//! which ops run, when tensors die — so it changes what the backends execute, not only numbers.

use serde::{Deserialize, Serialize};

use crate::model::ModelConfig;
use crate::model::UnknownName;
use crate::model::params::LoraConfig;
use crate::plan::TechniqueError;
use crate::plan::{ConfigError, Technique};

/// Activation checkpointing (recomputation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", content = "k", rename_all = "snake_case")]
pub enum Checkpoint {
    /// Every activation the backward pass needs is saved by the forward pass.
    Off,
    /// A checkpoint every `k` blocks (`torch.utils.checkpoint.checkpoint_sequential` with
    /// segments of k blocks): the forward pass keeps only each segment's input; the backward
    /// pass recomputes a segment's forward pass just before it runs the segment's backward.
    /// `k = 1` is "every block"; `k ≈ √L` balances the kept inputs (L/k) against one segment's
    /// recomputed activations (k blocks).
    Every(usize),
    /// Selective recomputation (Korthikanti et al. 2022, §5): keep everything except the
    /// attention probabilities (the `a·s²·b` term), and recompute the attention core from the
    /// saved q, k, v during the backward pass.
    Selective,
}

impl Checkpoint {
    /// Every block (`every:1`).
    pub const BLOCKS: Checkpoint = Checkpoint::Every(1);

    /// `every:K`'s default for `layers` blocks: round(√L), at least 1.
    pub fn default_every(layers: usize) -> usize {
        ((layers as f64).sqrt().round() as usize).max(1)
    }

    /// Parses `off`, `blocks`, `every`, `every:K` or `selective`. `every` alone takes √L.
    pub fn parse(text: &str, layers: usize) -> Result<Self, ConfigError> {
        let t = text.trim().to_ascii_lowercase();
        let bad =
            || ConfigError::Name(UnknownName { what: crate::model::Setting::Checkpointing, got: text.to_string() });
        Ok(match t.as_str() {
            "off" | "none" => Checkpoint::Off,
            "blocks" | "block" | "full" => Checkpoint::BLOCKS,
            "every" => Checkpoint::Every(Self::default_every(layers)),
            "selective" => Checkpoint::Selective,
            _ => match t.strip_prefix("every:") {
                Some(k) => {
                    let k: i64 = k.trim().parse().map_err(|_| bad())?;
                    Checkpoint::Every(crate::model::check_dim(crate::model::Dim::CheckpointEvery, k)?)
                }
                None => return Err(bad()),
            },
        })
    }

    /// The flag's spelling: `off`, `blocks`, `every:K`, `selective`.
    pub fn label(&self) -> String {
        match self {
            Checkpoint::Off => "off".into(),
            Checkpoint::Every(1) => "blocks".into(),
            Checkpoint::Every(k) => format!("every:{k}"),
            Checkpoint::Selective => "selective".into(),
        }
    }
}

/// How attention is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    /// Scores and probabilities materialised as (B, NH, T, T) tensors; P is saved for backward.
    Standard,
    /// FlashAttention-style: tiles of K and V with an online softmax; the T×T matrix never
    /// exists. Saves the output and the row logsumexp; backward recomputes the scores.
    Fused,
}

impl AttentionKind {
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "standard" | "eager" => Ok(AttentionKind::Standard),
            "fused" | "flash" => Ok(AttentionKind::Fused),
            other => {
                Err(ConfigError::Name(UnknownName { what: crate::model::Setting::Attention, got: other.to_string() }))
            }
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            AttentionKind::Standard => "standard",
            AttentionKind::Fused => "fused",
        }
    }
}

/// Numeric precision of the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in fp32.
    Fp32,
    /// Mixed precision with fp16: activations, the working copy of the weights and the
    /// gradients in fp16; fp32 master weights and optimizer state; dynamic loss scaling.
    Fp16,
    /// Mixed precision with bfloat16 (fp32's range, so no loss scaling).
    Bf16,
}

impl Precision {
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "f32" | "float32" => Ok(Precision::Fp32),
            "fp16" | "f16" | "float16" | "half" => Ok(Precision::Fp16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            other => {
                Err(ConfigError::Name(UnknownName { what: crate::model::Setting::Precision, got: other.to_string() }))
            }
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }
    /// The storage type of activations, working weights and gradients.
    pub fn dtype(self) -> super::DType {
        match self {
            Precision::Fp32 => super::DType::F32,
            Precision::Fp16 => super::DType::F16,
            Precision::Bf16 => super::DType::BF16,
        }
    }
    /// Whether the loss is scaled (and overflow checked): fp16 only.
    pub fn scales_loss(self) -> bool {
        self == Precision::Fp16
    }
}

/// fp16's dynamic loss scaling, as PyTorch's `GradScaler`: the loss (so every gradient) is
/// multiplied by `scale` so small gradients do not flush to zero in fp16; the optimizer divides
/// it out. A step whose gradients overflowed (inf/NaN) is skipped and the scale halved; after
/// `growth_interval` clean steps in a row the scale doubles.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LossScaler {
    pub scale: f32,
    pub growth_interval: u32,
    /// Clean steps since the last change of scale.
    pub clean_steps: u32,
    /// Steps skipped because of an overflow, in total.
    pub skipped_steps: u64,
}

impl Default for LossScaler {
    /// PyTorch's defaults: 2¹⁶, doubled every 2000 clean steps.
    fn default() -> Self {
        Self { scale: 65536.0, growth_interval: 2000, clean_steps: 0, skipped_steps: 0 }
    }
}

impl LossScaler {
    /// Records a step's outcome; returns whether the optimizer applied it.
    pub fn update(&mut self, found_inf: bool) -> bool {
        if found_inf {
            self.scale = (self.scale * 0.5).max(f32::MIN_POSITIVE);
            self.clean_steps = 0;
            self.skipped_steps += 1;
            false
        } else {
            self.clean_steps += 1;
            if self.clean_steps >= self.growth_interval {
                self.scale = (self.scale * 2.0).min(f32::MAX / 2.0);
                self.clean_steps = 0;
            }
            true
        }
    }
}

/// The largest head size the fused attention kernel holds in registers.
pub const FUSED_MAX_HEAD_SIZE: usize = 64;

/// Everything about a step beyond the model and the batch shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Techniques {
    pub checkpoint: Checkpoint,
    pub attention: AttentionKind,
    /// Gradient accumulation: micro-batches per optimizer step (1 = off). The plan's
    /// `shape.batch` is the micro-batch; the effective batch is `shape.batch · accum`.
    pub accum: usize,
    /// Low-rank adapters on frozen base weights.
    pub lora: Option<LoraConfig>,
    pub precision: Precision,
    /// The caching allocator's options (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`).
    #[serde(default)]
    pub allocator: super::AllocatorConfig,
    /// Data parallelism over simulated GPUs, and its ZeRO stage.
    #[serde(default)]
    pub parallel: super::Parallel,
    /// What lives in host memory (ZeRO-Offload).
    #[serde(default)]
    pub offload: super::Offload,
    /// How the batch is made from text (packed rows mask attention at documents' starts).
    #[serde(default)]
    pub batching: super::Batching,
}

impl Default for Techniques {
    fn default() -> Self {
        Self {
            checkpoint: Checkpoint::Off,
            attention: AttentionKind::Standard,
            accum: 1,
            lora: None,
            precision: Precision::Fp32,
            allocator: super::AllocatorConfig::default(),
            parallel: super::Parallel::default(),
            offload: super::Offload::None,
            batching: super::Batching::Windows,
        }
    }
}

impl Techniques {
    /// Refuses the combinations the simulation does not run yet, with the reason.
    fn simulated_together(&self) -> Result<(), ConfigError> {
        let several = self.parallel.is_distributed();
        // Each needs a collective of its own over several GPUs (the adapters' own buckets;
        // fp16's overflow flag reduced over the ranks).
        if several && self.lora.is_some() {
            return Err(ConfigError::Technique(TechniqueError::NotWithSeveralGpus { what: Technique::Lora }));
        }
        if several && self.precision.scales_loss() {
            return Err(ConfigError::Technique(TechniqueError::NotWithSeveralGpus {
                what: Technique::Fp16LossScaling,
            }));
        }
        if self.offload.is_on() {
            // ZeRO-Offload over several GPUs offloads each rank's shard; the simulated GPUs do
            // not yet run host ops between their collectives.
            if several {
                return Err(ConfigError::Technique(TechniqueError::NotWithSeveralGpus { what: Technique::Offload }));
            }
            // LoRA's adapters have almost no optimizer state to move; fp16's overflow check
            // would have to read the host's gradients before the device's loss scaler.
            if self.lora.is_some() {
                return Err(ConfigError::Technique(TechniqueError::OffloadWith { what: Technique::Lora }));
            }
            if self.precision.scales_loss() {
                return Err(ConfigError::Technique(TechniqueError::OffloadWith { what: Technique::Fp16LossScaling }));
            }
        }
        // The simulated GPUs would each go on at every batch's length together; not yet.
        if self.batching.varies_in_length() && several {
            return Err(ConfigError::Technique(TechniqueError::NotWithSeveralGpus { what: Technique::PaddedBatches }));
        }
        Ok(())
    }

    /// Refuses combinations that cannot be built or make no sense, with the reason.
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ConfigError> {
        crate::model::check_dim(crate::model::Dim::Accumulation, self.accum as i64)?;
        self.allocator.validate().map_err(ConfigError::AllocatorOption)?;
        self.parallel.validate()?;
        self.simulated_together()?;
        if let Checkpoint::Every(k) = self.checkpoint
            && (k == 0 || k > model.n_layers)
        {
            return Err(ConfigError::Technique(TechniqueError::CheckpointEvery { k, layers: model.n_layers }));
        }
        if let Some(l) = self.lora {
            crate::model::check_dim(crate::model::Dim::LoraRank, l.rank as i64)?;
            if l.rank >= model.d_model {
                return Err(ConfigError::Technique(TechniqueError::LoraRankNotLow {
                    rank: l.rank,
                    d_model: model.d_model,
                }));
            }
            if !(l.alpha.is_finite() && l.alpha > 0.0) {
                return Err(ConfigError::Technique(TechniqueError::LoraAlpha { alpha: l.alpha }));
            }
            if l.targets().is_empty() {
                return Err(ConfigError::Technique(TechniqueError::LoraNoTargets));
            }
        }
        if self.attention == AttentionKind::Fused {
            if self.checkpoint == Checkpoint::Selective {
                return Err(ConfigError::Technique(TechniqueError::FusedWithSelective));
            }
            if model.head_size() > FUSED_MAX_HEAD_SIZE {
                return Err(ConfigError::Technique(TechniqueError::FusedHeadTooLarge {
                    max: FUSED_MAX_HEAD_SIZE,
                    head_size: model.head_size(),
                    d_model: model.d_model,
                    n_heads: model.n_heads,
                }));
            }
        }
        Ok(())
    }

    /// A one-line description, e.g. "checkpoint every:2, fused attention, accum 4".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.precision != Precision::Fp32 {
            parts.push(format!("{} mixed precision", self.precision.name()));
        }
        if self.checkpoint != Checkpoint::Off {
            parts.push(format!("checkpoint {}", self.checkpoint.label()));
        }
        if self.attention == AttentionKind::Fused {
            parts.push("fused attention".into());
        }
        if self.accum > 1 {
            parts.push(format!("accumulation ×{}", self.accum));
        }
        if let Some(l) = self.lora {
            let targets: Vec<&str> = l.targets().iter().map(|t| t.module()).collect();
            parts.push(format!("LoRA r={} α={} on {}", l.rank, l.alpha, targets.join(", ")));
        }
        if self.parallel.gpus > 1 {
            parts.push(self.parallel.describe());
        }
        if self.offload.is_on() {
            parts.push(format!("offload {}", self.offload.name()));
        }
        if self.batching != super::Batching::Windows {
            parts.push(format!("{} batches", self.batching.name()));
        }
        let conf = self.allocator.to_conf_string();
        if !conf.is_empty() {
            parts.push(format!("allocator {conf}"));
        }
        if parts.is_empty() { "baseline".into() } else { parts.join(", ") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_gpus_refuse_what_they_do_not_simulate_together() {
        let m = ModelConfig::toy(65);
        let four = super::super::Parallel { gpus: 4, zero: 3, ..Default::default() };
        let t = Techniques { parallel: four, ..Techniques::default() };
        assert!(t.validate(&m).is_ok());
        let fp16 = Techniques { precision: Precision::Fp16, ..t };
        assert!(fp16.validate(&m).expect_err("fp16").to_string().contains("loss scaling"));
        let one = Techniques { parallel: super::super::Parallel { gpus: 1, ..four }, ..fp16 };
        assert!(one.validate(&m).is_ok(), "one GPU runs everything");
    }

    #[test]
    fn parses_checkpoint_modes() {
        assert_eq!(Checkpoint::parse("off", 4).unwrap(), Checkpoint::Off);
        assert_eq!(Checkpoint::parse("blocks", 4).unwrap(), Checkpoint::Every(1));
        assert_eq!(Checkpoint::parse("every", 9).unwrap(), Checkpoint::Every(3));
        assert_eq!(Checkpoint::parse("every:2", 9).unwrap(), Checkpoint::Every(2));
        assert_eq!(Checkpoint::parse("Selective", 9).unwrap(), Checkpoint::Selective);
        assert!(Checkpoint::parse("every:0", 9).is_err());
        assert!(Checkpoint::parse("every:x", 9).is_err());
        assert!(Checkpoint::parse("sometimes", 9).is_err());
        assert_eq!(Checkpoint::Every(2).label(), "every:2");
    }

    #[test]
    fn loss_scaler_backs_off_and_grows() {
        let mut s = LossScaler { growth_interval: 3, ..LossScaler::default() };
        assert!(!s.update(true));
        assert_eq!(s.scale, 32768.0);
        assert!(s.update(false) && s.update(false));
        assert_eq!(s.scale, 32768.0);
        assert!(s.update(false));
        assert_eq!(s.scale, 65536.0);
        assert_eq!(s.skipped_steps, 1);
    }

    #[test]
    fn refuses_combinations_that_make_no_sense() {
        let m = ModelConfig::toy(65);
        let t =
            Techniques { checkpoint: Checkpoint::Selective, attention: AttentionKind::Fused, ..Techniques::default() };
        assert!(t.validate(&m).unwrap_err().to_string().contains("fused attention"));
        let t = Techniques { checkpoint: Checkpoint::Every(3), ..Techniques::default() };
        assert!(t.validate(&m).unwrap_err().to_string().contains("every:3"));
        let wide = ModelConfig { d_model: 256, n_heads: 2, ..m };
        let t = Techniques { attention: AttentionKind::Fused, ..Techniques::default() };
        assert!(t.validate(&wide).unwrap_err().to_string().contains("head sizes"));
        let t = Techniques { accum: 0, ..Techniques::default() };
        assert!(t.validate(&m).is_err());
        assert!(Techniques::default().validate(&m).is_ok());
    }
}
