//! The Real models view's settings: the estimator's own setup, stored with the rest of the
//! settings (so it persists and travels in a shared link), and bounded as its controls bound it.

use serde::{Deserialize, Serialize};

use crate::estimate::{self, EstimateError, Parallel, Setup, presets};

/// The real-model view's settings: the estimator's own [`Setup`] (part of
/// [`super::Settings`], so it persists and travels in a shared link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EstimateSettings(pub Setup);

impl std::ops::Deref for EstimateSettings {
    type Target = Setup;
    fn deref(&self) -> &Setup {
        &self.0
    }
}

impl std::ops::DerefMut for EstimateSettings {
    fn deref_mut(&mut self) -> &mut Setup {
        &mut self.0
    }
}

impl Default for EstimateSettings {
    /// LLaMA-2 7B on A100 80 GB GPUs, bf16 mixed precision with Adam, ZeRO-3 over 8 GPUs,
    /// micro-batch 1 of 2048 tokens with 8 accumulation steps: it fits (full training on one GPU
    /// does not — switch ZeRO off to see why).
    fn default() -> Self {
        let mut s = Setup::new(presets::default_model(), presets::default_gpu(), 1, 2048);
        s.accum = 8;
        s.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
        Self(s)
    }
}

impl EstimateSettings {
    /// The estimator's setup, or why it cannot be estimated.
    pub fn setup(&self) -> Result<Setup, EstimateError> {
        self.0.validate()?;
        Ok(self.0.clone())
    }

    /// Bounds what the controls bound, so that a link cannot ask for absurd work.
    pub fn clamped(mut self) -> Self {
        let s = &mut self.0;
        s.micro_batch = s.micro_batch.clamp(1, estimate::MAX_BATCH);
        s.seq = s.seq.clamp(1, 1 << 20);
        s.accum = s.accum.clamp(1, 1 << 16);
        s.parallel.data = s.parallel.data.clamp(1, 1 << 16);
        s.parallel.tensor = s.parallel.tensor.clamp(1, 64);
        s.parallel.zero = s.parallel.zero.min(3);
        s.parallel.pipeline = s.parallel.pipeline.clamp(1, 1024);
        s.parallel.context = s.parallel.context.clamp(1, 1024);
        if let estimate::pipeline::Schedule::Interleaved(v) = &mut s.parallel.schedule {
            *v = (*v).clamp(2, 64);
        }
        s.gpu.memory_bytes = s.gpu.memory_bytes.clamp(1 << 30, 1 << 50);
        self
    }
}
