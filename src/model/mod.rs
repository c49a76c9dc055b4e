//! The toy GPT-2: configuration, validation and the parameter layout.
//!
//! The architecture is exactly GPT-2's (pre-LayerNorm blocks, fused qkv, GELU-tanh MLP, tied
//! lm_head), so any GPT-2 implementation — Hugging Face `GPT2LMHeadModel` in particular — can
//! check it. See `params` for the Hugging Face names and layouts.

pub mod init;
pub mod params;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use params::{ParamLayout, ParamSpec};

/// Largest value accepted for any single dimension. It only keeps arithmetic on sizes far away
/// from overflow; real limits (the adapter's buffer sizes, the memory budget) are checked later
/// with their own messages.
pub const MAX_DIM: usize = 1 << 20;

/// Architecture of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Vocabulary size V.
    pub vocab: usize,
    /// Maximum sequence length T_max (rows of the position embedding).
    pub seq_len: usize,
    /// Model width d (C in the kernels).
    pub d_model: usize,
    /// Number of transformer blocks L.
    pub n_layers: usize,
    /// Number of attention heads; `d_model % n_heads == 0`.
    pub n_heads: usize,
}

/// A configuration that cannot be built, with a message meant for a person. It crosses from the
/// browser's CPU worker as its message ([`ConfigError::Reported`]): a derived deserialiser of
/// every variant was 35 kB of the web module.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A configuration error the CPU worker reported, in its words.
    #[error("{0}")]
    Reported(String),
    #[error("{name} must be at least 1 (got {value})")]
    Zero { name: Cow<'static, str>, value: i64 },
    #[error("{name} = {value} is absurdly large (the limit is {MAX_DIM})")]
    TooLarge { name: Cow<'static, str>, value: u64 },
    #[error("d_model ({d_model}) must be divisible by n_heads ({n_heads})")]
    HeadsDontDivide { d_model: usize, n_heads: usize },
    #[error("sequence length {got} is longer than the model's maximum seq_len {max}")]
    SequenceTooLong { got: usize, max: usize },
    #[error("token id {id} at position {position} is out of range for a vocabulary of {vocab}")]
    TokenOutOfRange { id: i64, position: usize, vocab: usize },
    /// A size beyond what oomlab plans: a tensor too large to count in bytes, or a step of too
    /// many ops to hold in memory.
    #[error("{what} would be {amount} {unit}: more than oomlab plans ({limit} {unit} at most)")]
    SizeLimit { what: String, amount: u128, limit: u64, unit: Cow<'static, str> },
    /// A name that is none of the ones a setting takes (a flag's value, a link's field).
    #[error("unknown {what} {got:?}: expected {expected}")]
    Unknown { what: Cow<'static, str>, got: String, expected: Cow<'static, str> },
    /// Gradient accumulation splits the batch into equal micro-batches.
    #[error(
        "batch {batch} cannot be split into {accum} equal micro-batches: the batch must be a multiple of the accumulation steps"
    )]
    AccumDoesNotDivide { batch: usize, accum: usize },
    #[error("checkpoint every:{k} needs 1 <= K <= the number of layers ({layers})")]
    CheckpointEvery { k: usize, layers: usize },
    #[error("LoRA rank {rank} is not low: it must be below d_model ({d_model})")]
    LoraRankNotLow { rank: usize, d_model: usize },
    #[error("LoRA alpha must be positive (got {alpha})")]
    LoraAlpha { alpha: f32 },
    #[error("{0}")]
    AllocatorOption(String),
    /// Data parallelism simulates between 1 and [`crate::plan::MAX_GPUS`] GPUs.
    #[error("data parallelism simulates 1 to {max} GPUs (got {gpus})")]
    Gpus { gpus: usize, max: usize },
    #[error("ZeRO has stages 0 to 3 (got {stage})")]
    ZeroStage { stage: u8 },
    #[error("the communication bucket must be a multiple of {min} elements, between {min} and {max} (got {elems})")]
    Bucket { elems: u64, min: u64, max: u64 },
    /// A technique the simulated GPUs do not run together with data parallelism.
    #[error("{what} is not simulated over several GPUs: use one GPU for it")]
    NotWithSeveralGpus { what: Cow<'static, str> },
    /// A packed batch's document starts are not starts (or missing, or given to unpacked rows).
    #[error("{0}: a packed batch (--batching packed) has each position's document start, and only it has them")]
    DocStarts(Cow<'static, str>),
    /// A technique that offload to host memory does not run with.
    #[error("offload to host memory does not run with {what} in oomlab: turn one of them off")]
    OffloadWith { what: Cow<'static, str> },
    #[error("LoRA needs at least one target projection")]
    LoraNoTargets,
    #[error(
        "selective checkpointing recomputes the attention probabilities, but fused attention never stores them (it \
         already recomputes the scores in its backward pass): use one or the other"
    )]
    FusedWithSelective,
    #[error(
        "fused attention holds a head in registers and supports head sizes up to {max}; this model's is {head_size} \
         (d_model {d_model} / {n_heads} heads)"
    )]
    FusedHeadTooLarge { max: usize, head_size: usize, d_model: usize, n_heads: usize },
    /// An optimizer setting out of its range.
    #[error("invalid optimizer setting: {name} = {value} (it must be {range})")]
    Optimizer { name: Cow<'static, str>, value: f32, range: Cow<'static, str> },
    #[error("character {0:?} is not in the vocabulary")]
    NotInVocabulary(char),
    #[error("the corpus has {tokens} tokens, too few for sequences of {seq}")]
    CorpusTooShort { tokens: usize, seq: usize },
    #[error("a batch of {rows} tokens does not fit in this machine's memory")]
    BatchTooLargeForHost { rows: u64 },
    #[error("batch holds {inputs} inputs and {targets} targets, expected {expected}")]
    BatchLength { inputs: usize, targets: usize, expected: u64 },
}

impl ModelConfig {
    /// The default toy: character-level vocabulary of the built-in corpus, seq 64, d 64, 2
    /// layers, 4 heads.
    pub fn toy(vocab: usize) -> Self {
        Self { vocab, seq_len: 64, d_model: 64, n_layers: 2, n_heads: 4 }
    }

    /// Head size d / heads.
    pub fn head_size(&self) -> usize {
        self.d_model / self.n_heads.max(1)
    }

    /// Checks every field; the rest of the crate may assume a validated config.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("vocab", self.vocab),
            ("seq_len", self.seq_len),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
        ] {
            check_dim(name, value as i64)?;
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ConfigError::HeadsDontDivide { d_model: self.d_model, n_heads: self.n_heads });
        }
        Ok(())
    }

    /// Total number of trainable parameters (tied embeddings counted once).
    pub fn num_parameters(&self) -> u64 {
        ParamLayout::new(self).num_parameters()
    }
}

/// Checks one user-supplied dimension: ≥ 1 and not absurd.
pub fn check_dim(name: &'static str, value: i64) -> Result<usize, ConfigError> {
    if value < 1 {
        return Err(ConfigError::Zero { name: name.into(), value });
    }
    // Compared as i64 before any conversion: `as usize` would truncate on 32-bit targets and let
    // 2³² + 5 through as 5.
    if value > MAX_DIM as i64 {
        return Err(ConfigError::TooLarge { name: name.into(), value: value as u64 });
    }
    Ok(value as usize)
}

/// One training step's shape: batch B and sequence length T (≤ `seq_len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepShape {
    pub batch: usize,
    pub seq: usize,
}

impl StepShape {
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ConfigError> {
        check_dim("batch", self.batch as i64)?;
        check_dim("sequence length", self.seq as i64)?;
        if self.seq > model.seq_len {
            return Err(ConfigError::SequenceTooLong { got: self.seq, max: model.seq_len });
        }
        Ok(())
    }

    /// Rows of the activations, B·T (u64: both dimensions are at most [`MAX_DIM`], so the
    /// product fits, where `usize` is 32 bits too).
    pub fn rows(&self) -> u64 {
        self.batch as u64 * self.seq as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_messages() {
        let mut c = ModelConfig::toy(65);
        assert!(c.validate().is_ok());
        c.n_heads = 3;
        assert!(matches!(c.validate(), Err(ConfigError::HeadsDontDivide { .. })));
        c.n_heads = 0;
        assert!(matches!(c.validate(), Err(ConfigError::Zero { .. })));
        let c = ModelConfig::toy(65);
        let s = StepShape { batch: 2, seq: 65 };
        assert!(matches!(s.validate(&c), Err(ConfigError::SequenceTooLong { got: 65, max: 64 })));
        assert!(check_dim("batch", -3).is_err());
        assert!(check_dim("batch", 1 << 40).is_err());
    }
}
