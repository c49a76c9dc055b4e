//! Why a step cannot be planned: the techniques' refusals ([`TechniqueError`], the plan's own),
//! and [`ConfigError`], which holds any refusal of a configuration — the model's shape
//! ([`ShapeError`], the model's), a setting's unknown name, the techniques', the allocator's
//! options ([`AllocatorConfigError`], `plan::allocator`'s) — or one the browser's CPU worker
//! reported as its catalog message. Each is worded by the catalogs in the reader's language;
//! `Display` (the CLI's and the logs' words) is English.

use std::fmt;

use crate::i18n::{Catalog, with_english};
use crate::model::{Arg, ShapeError, UnknownName, Worded};

use super::allocator::AllocatorConfigError;

/// A combination of techniques (or one technique's setting) that cannot be planned.
#[derive(Debug, Clone, PartialEq)]
pub enum TechniqueError {
    /// Gradient accumulation splits the batch into equal micro-batches.
    AccumDoesNotDivide {
        batch: usize,
        accum: usize,
    },
    CheckpointEvery {
        k: usize,
        layers: usize,
    },
    LoraRankNotLow {
        rank: usize,
        d_model: usize,
    },
    LoraAlpha {
        alpha: f32,
    },
    LoraNoTargets,
    /// Data parallelism simulates between 1 and [`crate::plan::MAX_GPUS`] GPUs.
    Gpus {
        gpus: usize,
        max: usize,
    },
    ZeroStage {
        stage: u8,
    },
    Bucket {
        elems: u64,
        min: u64,
        max: u64,
    },
    /// A technique the simulated GPUs do not run together with data parallelism.
    NotWithSeveralGpus {
        what: Technique,
    },
    /// A technique that offload to host memory does not run with.
    OffloadWith {
        what: Technique,
    },
    FusedWithSelective,
    FusedHeadTooLarge {
        max: usize,
        head_size: usize,
        d_model: usize,
        n_heads: usize,
    },
    /// An optimizer setting out of its range.
    Optimizer {
        name: &'static str,
        value: f32,
        range: Range,
    },
}

/// A technique named in a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Technique {
    Offload,
    PaddedBatches,
    Lora,
    Fp16LossScaling,
}

/// The range an optimizer setting must be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    PositiveNumber,
    Unit,
    Positive,
    NonNegative,
}

/// A configuration that cannot be built: its shape, a name, its techniques or its allocator's
/// options, each the error of the layer that owns it. It crosses from the browser's CPU worker
/// as its catalog message ([`ConfigError::Reported`]: a derived deserialiser of every kind was
/// 35 kB of the web module; the page checks the same configuration first, so the worker's own
/// is rarely what a reader sees).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    Shape(ShapeError),
    Name(UnknownName),
    Technique(TechniqueError),
    AllocatorOption(AllocatorConfigError),
    /// A configuration error the CPU worker reported, as its catalog message.
    Reported(Worded),
}

impl Technique {
    fn key(self) -> &'static str {
        match self {
            Technique::Offload => "cfg-tech-offload",
            Technique::PaddedBatches => "cfg-tech-padded",
            Technique::Lora => "cfg-tech-lora",
            Technique::Fp16LossScaling => "cfg-tech-fp16",
        }
    }
}

impl Range {
    fn key(self) -> &'static str {
        match self {
            Range::PositiveNumber => "cfg-range-positive-number",
            Range::Unit => "cfg-range-unit",
            Range::Positive => "cfg-range-positive",
            Range::NonNegative => "cfg-range-non-negative",
        }
    }
}

impl TechniqueError {
    /// Its catalog message: the key and arguments (a name inside it as its own key).
    pub fn worded(&self) -> Worded {
        use Arg::{Key, Text};
        use TechniqueError as C;
        let n = |v: &dyn fmt::Display| Text(v.to_string());
        let (key, args) = match self {
            C::AccumDoesNotDivide { batch, accum } => {
                ("cfg-err-accum-divide", vec![("batch", n(batch)), ("accum", n(accum))])
            }
            C::CheckpointEvery { k, layers } => ("est-err-checkpoint-every", vec![("k", n(k)), ("layers", n(layers))]),
            C::LoraRankNotLow { rank, d_model } => ("cfg-err-lora-rank", vec![("rank", n(rank)), ("d", n(d_model))]),
            C::LoraAlpha { alpha } => ("cfg-err-lora-alpha", vec![("alpha", n(alpha))]),
            C::LoraNoTargets => ("est-err-lora-no-target", vec![]),
            C::Gpus { gpus, max } => ("cfg-err-gpus", vec![("gpus", n(gpus)), ("max", n(max))]),
            C::ZeroStage { stage } => ("est-err-zero-stage", vec![("stage", n(stage))]),
            C::Bucket { elems, min, max } => {
                ("cfg-err-bucket", vec![("elems", n(elems)), ("min", n(min)), ("max", n(max))])
            }
            C::NotWithSeveralGpus { what } => ("cfg-err-not-with-several-gpus", vec![("what", Key(what.key().into()))]),
            C::OffloadWith { what: Technique::Fp16LossScaling } => ("cfg-err-offload-with-fp16", vec![]),
            C::OffloadWith { what } => ("cfg-err-offload-with", vec![("what", Key(what.key().into()))]),
            C::FusedWithSelective => ("cfg-err-fused-with-selective", vec![]),
            C::FusedHeadTooLarge { max, head_size, d_model, n_heads } => (
                "cfg-err-fused-head",
                vec![("max", n(max)), ("head", n(head_size)), ("d", n(d_model)), ("heads", n(n_heads))],
            ),
            C::Optimizer { name, value, range } => (
                "cfg-err-optimizer",
                vec![("name", Text(name.to_string())), ("value", n(value)), ("range", Key(range.key().into()))],
            ),
        };
        Worded::new(key, args)
    }
}

impl ConfigError {
    /// Its catalog message: the key and arguments (a name inside it as its own key).
    pub fn worded(&self) -> Worded {
        match self {
            ConfigError::Shape(e) => e.worded(),
            ConfigError::Name(e) => e.worded(),
            ConfigError::Technique(e) => e.worded(),
            ConfigError::AllocatorOption(e) => e.worded(),
            ConfigError::Reported(w) => w.clone(),
        }
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        self.worded().text(t)
    }

    /// The catalog messages it renders: its own and a name inside it (what the tests check
    /// every message is reached by).
    pub fn keys(&self) -> Vec<String> {
        self.worded().keys().into_iter().map(str::to_owned).collect()
    }
}

impl From<ShapeError> for ConfigError {
    fn from(e: ShapeError) -> Self {
        ConfigError::Shape(e)
    }
}

impl From<UnknownName> for ConfigError {
    fn from(e: UnknownName) -> Self {
        ConfigError::Name(e)
    }
}

impl From<TechniqueError> for ConfigError {
    fn from(e: TechniqueError) -> Self {
        ConfigError::Technique(e)
    }
}

impl From<AllocatorConfigError> for ConfigError {
    fn from(e: AllocatorConfigError) -> Self {
        ConfigError::AllocatorOption(e)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for ConfigError {}

impl fmt::Display for TechniqueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.worded().text(en)))
    }
}

impl std::error::Error for TechniqueError {}
