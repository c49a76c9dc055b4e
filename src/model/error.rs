//! Why a toy configuration cannot be built: typed, with the numbers that say why, and worded by
//! the catalogs (`cfg-err-…` and the names inside them, in `i18n/`): the app in the reader's
//! language, `Display` (the CLI's and the logs' words) in English.

use std::fmt;

use crate::i18n::{Catalog, with_english};

use super::MAX_DIM;

/// A configuration that cannot be built, with a message meant for a person. It crosses from the
/// browser's CPU worker as its English message ([`ConfigError::Reported`]): a derived
/// deserialiser of every variant was 35 kB of the web module (the page checks the same
/// configuration first, so the worker's own is rarely what a reader sees).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// A configuration error the CPU worker reported, in its words.
    Reported(String),
    Zero {
        name: Dim,
        value: i64,
    },
    TooLarge {
        name: Dim,
        value: u64,
    },
    HeadsDontDivide {
        d_model: usize,
        n_heads: usize,
    },
    SequenceTooLong {
        got: usize,
        max: usize,
    },
    TokenOutOfRange {
        id: i64,
        position: usize,
        vocab: usize,
    },
    /// A size beyond what oomlab plans: a tensor too large to count in bytes, or a step of too
    /// many ops to hold in memory.
    SizeLimit {
        what: Planned,
        amount: u128,
        limit: u64,
    },
    /// A name that is none of the ones a setting takes (a flag's value, a link's field).
    Unknown {
        what: Setting,
        got: String,
    },
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
    AllocatorOption(AllocatorConfigError),
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
    /// A packed batch's document starts are not starts (or missing, or given to unpacked rows).
    DocStarts(DocStartsWhy),
    /// A technique that offload to host memory does not run with.
    OffloadWith {
        what: Technique,
    },
    LoraNoTargets,
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
    NotInVocabulary(char),
    CorpusTooShort {
        tokens: usize,
        seq: usize,
    },
    BatchTooLargeForHost {
        rows: u64,
    },
    BatchLength {
        inputs: usize,
        targets: usize,
        expected: u64,
    },
}

/// Why an allocator options string (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`) was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocatorConfigError {
    NotKeyValue(String),
    Unknown(String),
    MaxSplit(String),
    Threshold(String),
    Expandable(String),
}

/// A dimension a configuration sets (what `check_dim` checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    Vocab,
    SeqLen,
    DModel,
    NLayers,
    NHeads,
    Batch,
    Sequence,
    CheckpointEvery,
    Accumulation,
    LoraRank,
    EffectiveBatch,
    GlobalBatch,
}

/// What would pass what oomlab plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planned {
    Parameters,
    AttentionProbabilities,
    Logits,
    MlpActivations,
    LoraAdapters,
    /// A step's ops: its layers × micro-batches.
    Step {
        layers: usize,
        micro_batches: usize,
    },
}

/// A setting written as a name (a flag's value, a link's field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    LoraTarget,
    Backend,
    Offload,
    Batching,
    Checkpointing,
    Attention,
    Precision,
}

/// A technique named in a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Technique {
    Offload,
    PaddedBatches,
    Lora,
    Fp16LossScaling,
}

/// Why a packed batch's document starts are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocStartsWhy {
    NotAStart,
    NoStarts,
    NotPacked,
}

/// The range an optimizer setting must be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    PositiveNumber,
    Unit,
    Positive,
    NonNegative,
}

/// A message's arguments, each as text (numbers as Rust writes them, never grouped).
type Args = Vec<(&'static str, String)>;

impl Dim {
    fn key(self) -> &'static str {
        match self {
            Dim::Vocab => "cfg-dim-vocab",
            Dim::SeqLen => "cfg-dim-seq-len",
            Dim::DModel => "cfg-dim-d-model",
            Dim::NLayers => "cfg-dim-n-layers",
            Dim::NHeads => "cfg-dim-n-heads",
            Dim::Batch => "cfg-dim-batch",
            Dim::Sequence => "cfg-dim-sequence",
            Dim::CheckpointEvery => "cfg-dim-checkpoint-every",
            Dim::Accumulation => "cfg-dim-accumulation",
            Dim::LoraRank => "cfg-dim-lora-rank",
            Dim::EffectiveBatch => "cfg-dim-effective-batch",
            Dim::GlobalBatch => "cfg-dim-global-batch",
        }
    }
}

impl Planned {
    fn key(self) -> &'static str {
        match self {
            Planned::Parameters => "cfg-planned-parameters",
            Planned::AttentionProbabilities => "cfg-planned-attention",
            Planned::Logits => "cfg-planned-logits",
            Planned::MlpActivations => "cfg-planned-mlp",
            Planned::LoraAdapters => "cfg-planned-lora",
            Planned::Step { .. } => "cfg-err-step-limit",
        }
    }
}

impl Setting {
    fn key(self) -> &'static str {
        match self {
            Setting::LoraTarget => "cfg-err-unknown-lora-target",
            Setting::Backend => "cfg-err-unknown-backend",
            Setting::Offload => "cfg-err-unknown-offload",
            Setting::Batching => "cfg-err-unknown-batching",
            Setting::Checkpointing => "cfg-err-unknown-checkpointing",
            Setting::Attention => "cfg-err-unknown-attention",
            Setting::Precision => "cfg-err-unknown-precision",
        }
    }
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

impl DocStartsWhy {
    fn key(self) -> &'static str {
        match self {
            DocStartsWhy::NotAStart => "cfg-starts-not-a-start",
            DocStartsWhy::NoStarts => "cfg-starts-none",
            DocStartsWhy::NotPacked => "cfg-starts-not-packed",
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

impl AllocatorConfigError {
    fn message(&self) -> (&'static str, Args) {
        let (key, value) = match self {
            AllocatorConfigError::NotKeyValue(v) => ("cfg-err-allocator-not-key-value", format!("{v:?}")),
            AllocatorConfigError::Unknown(v) => ("cfg-err-allocator-unknown", format!("{v:?}")),
            AllocatorConfigError::MaxSplit(v) => ("cfg-err-allocator-max-split", v.clone()),
            AllocatorConfigError::Threshold(v) => ("cfg-err-allocator-threshold", v.clone()),
            AllocatorConfigError::Expandable(v) => ("cfg-err-allocator-expandable", v.clone()),
        };
        (key, vec![("value", value)])
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        let (key, args) = self.message();
        t.format_text(key, &args)
    }
}

impl ConfigError {
    /// Its catalog message and arguments (a name inside it is rendered first, in the same
    /// language). None: the worker's own words.
    fn message(&self, t: &Catalog) -> Option<(&'static str, Args)> {
        use ConfigError as C;
        let n = |v: &dyn fmt::Display| v.to_string();
        Some(match self {
            C::Reported(_) => return None,
            C::Zero { name, value } => ("cfg-err-zero", vec![("name", t.text(name.key())), ("value", n(value))]),
            C::TooLarge { name, value } => {
                ("cfg-err-too-large", vec![("name", t.text(name.key())), ("value", n(value)), ("limit", n(&MAX_DIM))])
            }
            C::HeadsDontDivide { d_model, n_heads } => {
                ("cfg-err-heads-divide", vec![("d", n(d_model)), ("heads", n(n_heads))])
            }
            C::SequenceTooLong { got, max } => ("cfg-err-sequence-too-long", vec![("got", n(got)), ("max", n(max))]),
            C::TokenOutOfRange { id, position, vocab } => {
                ("cfg-err-token-out-of-range", vec![("id", n(id)), ("position", n(position)), ("vocab", n(vocab))])
            }
            C::SizeLimit { what: Planned::Step { layers, micro_batches }, amount, limit } => (
                "cfg-err-step-limit",
                vec![("layers", n(layers)), ("micro", n(micro_batches)), ("amount", n(amount)), ("limit", n(limit))],
            ),
            C::SizeLimit { what, amount, limit } => {
                ("cfg-err-tensor-limit", vec![("what", t.text(what.key())), ("amount", n(amount)), ("limit", n(limit))])
            }
            C::Unknown { what, got } => (what.key(), vec![("got", format!("{got:?}"))]),
            C::AccumDoesNotDivide { batch, accum } => {
                ("cfg-err-accum-divide", vec![("batch", n(batch)), ("accum", n(accum))])
            }
            C::CheckpointEvery { k, layers } => ("est-err-checkpoint-every", vec![("k", n(k)), ("layers", n(layers))]),
            C::LoraRankNotLow { rank, d_model } => ("cfg-err-lora-rank", vec![("rank", n(rank)), ("d", n(d_model))]),
            C::LoraAlpha { alpha } => ("cfg-err-lora-alpha", vec![("alpha", n(alpha))]),
            C::AllocatorOption(e) => e.message(),
            C::Gpus { gpus, max } => ("cfg-err-gpus", vec![("gpus", n(gpus)), ("max", n(max))]),
            C::ZeroStage { stage } => ("est-err-zero-stage", vec![("stage", n(stage))]),
            C::Bucket { elems, min, max } => {
                ("cfg-err-bucket", vec![("elems", n(elems)), ("min", n(min)), ("max", n(max))])
            }
            C::NotWithSeveralGpus { what } => ("cfg-err-not-with-several-gpus", vec![("what", t.text(what.key()))]),
            C::DocStarts(why) => ("cfg-err-doc-starts", vec![("why", t.text(why.key()))]),
            C::OffloadWith { what: Technique::Fp16LossScaling } => ("cfg-err-offload-with-fp16", vec![]),
            C::OffloadWith { what } => ("cfg-err-offload-with", vec![("what", t.text(what.key()))]),
            C::LoraNoTargets => ("est-err-lora-no-target", vec![]),
            C::FusedWithSelective => ("cfg-err-fused-with-selective", vec![]),
            C::FusedHeadTooLarge { max, head_size, d_model, n_heads } => (
                "cfg-err-fused-head",
                vec![("max", n(max)), ("head", n(head_size)), ("d", n(d_model)), ("heads", n(n_heads))],
            ),
            C::Optimizer { name, value, range } => (
                "cfg-err-optimizer",
                vec![("name", name.to_string()), ("value", n(value)), ("range", t.text(range.key()))],
            ),
            C::NotInVocabulary(ch) => ("cfg-err-not-in-vocabulary", vec![("char", format!("{ch:?}"))]),
            C::CorpusTooShort { tokens, seq } => {
                ("cfg-err-corpus-too-short", vec![("tokens", n(tokens)), ("seq", n(seq))])
            }
            C::BatchTooLargeForHost { rows } => ("cfg-err-batch-host", vec![("rows", n(rows))]),
            C::BatchLength { inputs, targets, expected } => (
                "cfg-err-batch-length",
                vec![("inputs", n(inputs)), ("targets", n(targets)), ("expected", n(expected))],
            ),
        })
    }

    /// The message in the catalog's language (the worker's reported words as they came).
    pub fn text(&self, t: &Catalog) -> String {
        if let ConfigError::Reported(words) = self {
            return words.clone();
        }
        self.message(t).map(|(key, args)| t.format_text(key, &args)).unwrap_or_default()
    }

    /// The catalog messages it renders: its own and a name inside it (what the tests check
    /// every message is reached by).
    pub fn keys(&self) -> Vec<&'static str> {
        use ConfigError as C;
        let own = with_english(|en| self.message(en).map(|(key, _)| key));
        let inner = match self {
            C::Zero { name, .. } | C::TooLarge { name, .. } => Some(name.key()),
            C::SizeLimit { what, .. } if !matches!(what, Planned::Step { .. }) => Some(what.key()),
            C::NotWithSeveralGpus { what } => Some(what.key()),
            C::OffloadWith { what } if *what != Technique::Fp16LossScaling => Some(what.key()),
            C::DocStarts(why) => Some(why.key()),
            C::Optimizer { range, .. } => Some(range.key()),
            _ => None,
        };
        own.into_iter().chain(inner).collect()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for ConfigError {}

impl fmt::Display for AllocatorConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for AllocatorConfigError {}
