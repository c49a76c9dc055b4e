//! The batch as one idea. A step's sequences are counted three ways: the micro-batch one forward
//! pass takes, the batch one GPU takes per optimizer step (its micro-batches, one per
//! accumulation step) and the global batch over the data-parallel GPUs. [`Batches`] holds the
//! three together, made and checked here only: the app's batch slider and the CLI's `--batch`
//! name the batch per GPU, a request's shape the micro-batch, and every other count is read off
//! it.

use crate::model::{Dim, check_dim};
use crate::plan::{ConfigError, TechniqueError};

/// A step's batch in its three senses: valid by construction (each count at least 1 and at most
/// [`crate::model::MAX_DIM`], the split exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batches {
    micro: usize,
    accum: usize,
    gpus: usize,
}

impl Batches {
    /// From the batch one GPU takes per optimizer step (`per_gpu` sequences), split into
    /// `accum` equal micro-batches, over `gpus` GPUs.
    pub fn per_gpu(per_gpu: usize, accum: usize, gpus: usize) -> Result<Self, ConfigError> {
        Self::micro(micro_batch(per_gpu, accum)?, accum, gpus)
    }

    /// From the micro-batch (`micro` sequences per forward pass), `accum` of them per optimizer
    /// step, over `gpus` GPUs.
    pub fn micro(micro: usize, accum: usize, gpus: usize) -> Result<Self, ConfigError> {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        check_dim(Dim::Batch, count(micro))?;
        check_dim(Dim::Accumulation, count(accum))?;
        let per_gpu = count(micro).saturating_mul(count(accum));
        check_dim(Dim::EffectiveBatch, per_gpu)?;
        check_dim(Dim::GlobalBatch, per_gpu.saturating_mul(count(gpus.max(1))))?;
        Ok(Batches { micro, accum, gpus: gpus.max(1) })
    }

    /// Sequences per forward pass.
    pub fn micro_batch(self) -> usize {
        self.micro
    }

    /// Sequences one GPU takes per optimizer step: the micro-batch times the accumulation steps.
    pub fn per_gpu_batch(self) -> usize {
        self.micro * self.accum
    }

    /// Sequences one optimizer step takes over every GPU.
    pub fn global_batch(self) -> usize {
        self.per_gpu_batch() * self.gpus
    }
}

/// The micro-batch of `batch` sequences per GPU split into `accum` equal micro-batches, or why
/// it cannot be split: the one place the split is made (the counts themselves are checked by
/// [`Batches::micro`]).
pub fn micro_batch(batch: usize, accum: usize) -> Result<usize, ConfigError> {
    if accum == 0 || !batch.is_multiple_of(accum) {
        return Err(ConfigError::Technique(TechniqueError::AccumDoesNotDivide { batch, accum }));
    }
    Ok(batch / accum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MAX_DIM, ShapeError};

    #[test]
    fn the_three_batches_are_made_and_checked_in_one_place() {
        let b = Batches::per_gpu(12, 4, 8).expect("valid");
        assert_eq!((b.micro_batch(), b.per_gpu_batch(), b.global_batch()), (3, 12, 96));
        assert_eq!(Batches::micro(3, 4, 8), Ok(b), "either end names the same batches");
        let split = |batch, accum| ConfigError::Technique(TechniqueError::AccumDoesNotDivide { batch, accum });
        assert_eq!(Batches::per_gpu(12, 5, 1), Err(split(12, 5)));
        assert_eq!(Batches::per_gpu(12, 0, 1), Err(split(12, 0)));
        let too_large = |name| ConfigError::Shape(ShapeError::TooLarge { name, value: (MAX_DIM as u64) * 2 });
        assert_eq!(Batches::micro(MAX_DIM, 2, 1), Err(too_large(Dim::EffectiveBatch)));
        assert_eq!(Batches::micro(MAX_DIM / 2, 1, 4), Err(too_large(Dim::GlobalBatch)));
        assert!(matches!(Batches::micro(0, 1, 1), Err(ConfigError::Shape(ShapeError::Zero { name: Dim::Batch, .. }))));
        assert_eq!(micro_batch(12, 4), Ok(3));
    }
}
