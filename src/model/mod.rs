//! The toy GPT-2: configuration, validation and the parameter layout.
//!
//! The architecture is exactly GPT-2's (pre-LayerNorm blocks, fused qkv, GELU-tanh MLP, tied
//! lm_head), so any GPT-2 implementation — Hugging Face `GPT2LMHeadModel` in particular — can
//! check it. See `params` for the Hugging Face names and layouts.

mod error;
pub mod init;
pub mod params;

use serde::{Deserialize, Serialize};

pub use error::{Arg, Dim, DocStartsWhy, Planned, Setting, ShapeError, UnknownName, Worded};
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
    pub fn validate(&self) -> Result<(), ShapeError> {
        for (name, value) in [
            (Dim::Vocab, self.vocab),
            (Dim::SeqLen, self.seq_len),
            (Dim::DModel, self.d_model),
            (Dim::NLayers, self.n_layers),
            (Dim::NHeads, self.n_heads),
        ] {
            check_dim(name, value as i64)?;
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(ShapeError::HeadsDontDivide { d_model: self.d_model, n_heads: self.n_heads });
        }
        Ok(())
    }

    /// Total number of trainable parameters (tied embeddings counted once).
    pub fn num_parameters(&self) -> u64 {
        ParamLayout::new(self).num_parameters()
    }
}

/// Checks one user-supplied dimension: ≥ 1 and not absurd.
pub fn check_dim(name: Dim, value: i64) -> Result<usize, ShapeError> {
    if value < 1 {
        return Err(ShapeError::Zero { name, value });
    }
    // Compared as i64 before any conversion: `as usize` would truncate on 32-bit targets and let
    // 2³² + 5 through as 5.
    if value > MAX_DIM as i64 {
        return Err(ShapeError::TooLarge { name, value: value as u64 });
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
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ShapeError> {
        check_dim(Dim::Batch, self.batch as i64)?;
        check_dim(Dim::Sequence, self.seq as i64)?;
        if self.seq > model.seq_len {
            return Err(ShapeError::SequenceTooLong { got: self.seq, max: model.seq_len });
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
        assert!(matches!(c.validate(), Err(ShapeError::HeadsDontDivide { .. })));
        c.n_heads = 0;
        assert!(matches!(c.validate(), Err(ShapeError::Zero { .. })));
        let c = ModelConfig::toy(65);
        let s = StepShape { batch: 2, seq: 65 };
        assert!(matches!(s.validate(&c), Err(ShapeError::SequenceTooLong { got: 65, max: 64 })));
        assert!(check_dim(Dim::Batch, -3).is_err());
        assert!(check_dim(Dim::Batch, 1 << 40).is_err());
    }
}
