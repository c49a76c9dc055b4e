//! Data parallelism over simulated GPUs, and ZeRO's stages (Rajbhandari et al. 2020).
//!
//! A step on N ranks is N plans, one per rank, with the same ops in the same order: each rank
//! runs its own micro-batch (the batch setting is per GPU, as each PyTorch process's
//! `DataLoader` has it; the global batch is N times it) and the ranks meet at the collectives.
//! What each stage shards, over the flat parameter layout cut into N equal shards:
//!
//! | stage | parameters | gradients | optimizer state, master weights |
//! |-------|------------|-----------|----------------------------------|
//! | 0 (DDP) | full | full, all-reduced | full |
//! | 1 | full, all-gathered after the update | full, reduce-scattered | shard |
//! | 2 | full, all-gathered after the update | shard (each layer's full gradients only until they are reduce-scattered) | shard |
//! | 3 | shard (each layer gathered for its forward and again for its backward) | shard | shard |
//!
//! The communication buffers are real tensors of their own category: DDP's gradient buckets,
//! which together hold a second copy of the gradients and are kept across steps (PyTorch's
//! `Reducer` allocates them once); DeepSpeed's two reduce buckets for stages 1–3 (its
//! `ipg_buffer`, double-buffered); and, under ZeRO-3, the parameters gathered for one unit of
//! the model at a time.

use serde::{Deserialize, Serialize};

use crate::model::params::{PARAM_ALIGN_ELEMS, ParamKind, ParamLayout};
use crate::plan::{ConfigError, TechniqueError};

/// The most simulated GPUs a step runs on.
pub const MAX_GPUS: usize = 8;

/// The communication bucket's default, in elements. PyTorch DDP's 25 MB is about a twentieth of
/// GPT-2 small's fp32 gradients; scaled to the toy (≈110 K parameters) a bucket of 16 Ki
/// elements is a sixth of its gradients, so a step fills several buckets, as a real one does.
pub const DEFAULT_BUCKET_ELEMS: u64 = 16 * 1024;

/// The largest bucket (elements): 2²⁸, a GiB of fp32.
pub const MAX_BUCKET_ELEMS: u64 = 1 << 28;

/// Data parallelism: how many simulated GPUs, which ZeRO stage, and the bucket the gradient
/// reductions pass through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Parallel {
    /// Data-parallel ranks (simulated GPUs), 1 to [`MAX_GPUS`].
    pub gpus: usize,
    /// ZeRO stage, 0 (plain data parallelism) to 3.
    pub zero: u8,
    /// Elements of one communication bucket (a multiple of the parameter alignment, 128).
    pub bucket_elems: u64,
}

impl Default for Parallel {
    fn default() -> Self {
        Self { gpus: 1, zero: 0, bucket_elems: DEFAULT_BUCKET_ELEMS }
    }
}

impl Parallel {
    /// Whether the step runs on more than one rank (a single GPU has no collectives, whatever
    /// the stage says).
    pub fn is_distributed(&self) -> bool {
        self.gpus > 1
    }

    /// The ZeRO stage in force: 0 on one GPU.
    pub fn stage(&self) -> u8 {
        if self.is_distributed() { self.zero } else { 0 }
    }

    /// Refuses a count, a stage or a bucket out of range, with the reason. What it cannot be
    /// combined with is [`super::Techniques::validate`]'s to say.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.gpus == 0 || self.gpus > MAX_GPUS {
            return Err(ConfigError::Technique(TechniqueError::Gpus { gpus: self.gpus, max: MAX_GPUS }));
        }
        if self.zero > 3 {
            return Err(ConfigError::Technique(TechniqueError::ZeroStage { stage: self.zero }));
        }
        let b = self.bucket_elems;
        if !(PARAM_ALIGN_ELEMS..=MAX_BUCKET_ELEMS).contains(&b) || !b.is_multiple_of(PARAM_ALIGN_ELEMS) {
            return Err(ConfigError::Technique(TechniqueError::Bucket {
                elems: b,
                min: PARAM_ALIGN_ELEMS,
                max: MAX_BUCKET_ELEMS,
            }));
        }
        Ok(())
    }

    /// "4 GPUs, ZeRO-2".
    pub fn describe(&self) -> String {
        match self.stage() {
            0 => format!("{} GPUs, data parallel", self.gpus),
            z => format!("{} GPUs, ZeRO-{z}", self.gpus),
        }
    }

    /// Elements of one rank's shard of a flat tensor of `flat` elements: an equal share, rounded
    /// up to whole alignment units so that every shard starts where a GPU can bind it.
    pub fn shard_len(&self, flat: u64) -> u64 {
        let n = self.gpus.max(1) as u64;
        flat.div_ceil(n.saturating_mul(PARAM_ALIGN_ELEMS)).saturating_mul(PARAM_ALIGN_ELEMS)
    }

    /// The flat tensor padded so that the N shards cover it exactly (the flat length itself on
    /// one GPU).
    pub fn padded_len(&self, flat: u64) -> u64 {
        if self.is_distributed() { self.shard_len(flat).saturating_mul(self.gpus as u64) } else { flat }
    }
}

/// A contiguous run of the flat parameter layout that data parallelism handles as one: the
/// embeddings, one block's matrices, one block's vectors (biases and LayerNorms), or ln_f. ZeRO-3
/// gathers a unit at a time, and each unit's gradients are reduced as soon as they are final.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// "embeddings", "h.0.matrices", "h.0.vectors", "ln_f".
    pub name: String,
    pub layer: Option<usize>,
    pub start: u64,
    pub end: u64,
}

impl Unit {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The units of a layout, indexed as [`unit_of`] numbers them: embeddings, then each block's
/// matrices and vectors, then ln_f. Each ends where the next begins in the flat layout (its
/// padding included), so together they cover it.
pub fn units(layout: &ParamLayout, layers: usize) -> Vec<Unit> {
    let start = |k: ParamKind| layout.range(k).start;
    let mut list = vec![("embeddings".to_string(), None, start(ParamKind::Wte))];
    for i in 0..layers {
        list.push((format!("h.{i}.matrices"), Some(i), start(ParamKind::QkvW(i))));
        list.push((format!("h.{i}.vectors"), Some(i), start(ParamKind::Ln1W(i))));
    }
    list.push(("ln_f".to_string(), None, start(ParamKind::LnFW)));
    let mut starts: Vec<u64> = list.iter().map(|u| u.2).collect();
    starts.sort_unstable();
    list.into_iter()
        .map(|(name, layer, start)| {
            let end = starts.iter().copied().find(|&s| s > start).unwrap_or(layout.flat_len);
            Unit { name, layer, start, end }
        })
        .collect()
}

/// The unit a parameter belongs to (see [`units`]).
pub fn unit_of(kind: ParamKind, layers: usize) -> usize {
    match kind {
        ParamKind::Wte | ParamKind::Wpe => 0,
        ParamKind::QkvW(i) | ParamKind::AttnProjW(i) | ParamKind::FcW(i) | ParamKind::FcProjW(i) => 1 + 2 * i,
        ParamKind::Ln1W(i)
        | ParamKind::Ln1B(i)
        | ParamKind::QkvB(i)
        | ParamKind::AttnProjB(i)
        | ParamKind::Ln2W(i)
        | ParamKind::Ln2B(i)
        | ParamKind::FcB(i)
        | ParamKind::FcProjB(i) => 2 + 2 * i,
        ParamKind::LnFW | ParamKind::LnFB => 1 + 2 * layers,
        // Adapters are refused with several GPUs (`Parallel::validate`).
        ParamKind::LoraA(_, i) | ParamKind::LoraB(_, i) => 1 + 2 * i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;

    #[test]
    fn units_cover_the_layout_and_shards_cover_the_units() {
        let model = ModelConfig::toy(65);
        let layout = ParamLayout::new(&model);
        let u = units(&layout, model.n_layers);
        assert_eq!(u.len(), 2 * model.n_layers + 2);
        let mut ranges: Vec<(u64, u64)> = u.iter().map(|u| (u.start, u.end)).collect();
        ranges.sort_unstable();
        assert_eq!(ranges.first().map(|r| r.0), Some(0));
        assert_eq!(ranges.last().map(|r| r.1), Some(layout.flat_len));
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "contiguous: {ranges:?}");
        for spec in &layout.specs {
            let unit = &u[unit_of(spec.kind, model.n_layers)];
            assert!(unit.start <= spec.offset && spec.range().end <= unit.end, "{} in {}", spec.name, unit.name);
        }
        for gpus in 1..=MAX_GPUS {
            let p = Parallel { gpus, ..Parallel::default() };
            let s = p.shard_len(layout.flat_len);
            assert!(s.is_multiple_of(PARAM_ALIGN_ELEMS) && s * gpus as u64 >= layout.flat_len);
            assert!(s * gpus as u64 - layout.flat_len < PARAM_ALIGN_ELEMS * gpus as u64, "no more than a unit each");
        }
    }

    #[test]
    fn refuses_what_it_does_not_simulate() {
        let ok = Parallel { gpus: 4, zero: 3, ..Parallel::default() };
        assert!(ok.validate().is_ok());
        for (bad, says) in [
            (Parallel { gpus: 0, ..ok }, "1 to 8 GPUs"),
            (Parallel { gpus: 9, ..ok }, "1 to 8 GPUs"),
            (Parallel { zero: 4, ..ok }, "stages 0 to 3"),
            (Parallel { bucket_elems: 100, ..ok }, "between 128"),
            (Parallel { bucket_elems: 200, ..ok }, "between 128"),
        ] {
            let e = bad.validate().expect_err("refused").to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
