//! Why a toy configuration cannot be built: typed, with the numbers that say why, and worded by
//! the catalogs (`cfg-err-…` and the names inside them, in `i18n/`): the app in the reader's
//! language, `Display` (the CLI's and the logs' words) in English.

use std::fmt;

use crate::i18n::{Catalog, with_english};

use super::MAX_DIM;

/// A configuration that cannot be built, with a message meant for a person. It crosses from the
/// browser's CPU worker as its catalog message, [`Worded`] ([`ConfigError::Reported`]): a key and
/// arguments, worded on the page in the reader's language. (A derived deserialiser of every
/// variant was 35 kB of the web module; the page checks the same configuration first, so the
/// worker's own is rarely what a reader sees.)
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// A configuration error the CPU worker reported, as its catalog message.
    Reported(Worded),
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

/// A catalog message as data: its key and its arguments, a name inside it as that name's own key.
/// It holds no words of any language: [`Worded::text`] words it in the reader's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Worded {
    pub key: String,
    pub args: Vec<(String, Arg)>,
}

/// An argument of a [`Worded`] message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Arg {
    /// A number or a value as written (numbers as Rust writes them, never grouped).
    Text(String),
    /// A name from the catalog, worded in the same language as the message.
    Key(String),
}

impl Worded {
    fn new(key: &str, args: Vec<(&str, Arg)>) -> Self {
        Worded { key: key.into(), args: args.into_iter().map(|(k, v)| (k.into(), v)).collect() }
    }

    /// The message in `t`'s language.
    pub fn text(&self, t: &Catalog) -> String {
        let args: Vec<(&str, String)> = self
            .args
            .iter()
            .map(|(k, v)| match v {
                Arg::Text(v) => (k.as_str(), v.clone()),
                Arg::Key(key) => (k.as_str(), t.text(key)),
            })
            .collect();
        let args: Vec<_> = args.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
        t.format(&self.key, &args)
    }

    /// The catalog messages it renders: its own and the names inside it.
    pub fn keys(&self) -> Vec<&str> {
        let inner = self.args.iter().filter_map(|(_, v)| match v {
            Arg::Key(k) => Some(k.as_str()),
            Arg::Text(_) => None,
        });
        std::iter::once(self.key.as_str()).chain(inner).collect()
    }
}

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
    fn message(&self) -> Worded {
        let (key, value) = match self {
            AllocatorConfigError::NotKeyValue(v) => ("cfg-err-allocator-not-key-value", format!("{v:?}")),
            AllocatorConfigError::Unknown(v) => ("cfg-err-allocator-unknown", format!("{v:?}")),
            AllocatorConfigError::MaxSplit(v) => ("cfg-err-allocator-max-split", v.clone()),
            AllocatorConfigError::Threshold(v) => ("cfg-err-allocator-threshold", v.clone()),
            AllocatorConfigError::Expandable(v) => ("cfg-err-allocator-expandable", v.clone()),
        };
        Worded::new(key, vec![("value", Arg::Text(value))])
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        self.message().text(t)
    }
}

impl ConfigError {
    /// Its catalog message: the key and arguments (a name inside it as its own key).
    pub fn worded(&self) -> Worded {
        use Arg::{Key, Text};
        use ConfigError as C;
        let n = |v: &dyn fmt::Display| Text(v.to_string());
        let (key, args) = match self {
            C::Reported(w) => return w.clone(),
            C::Zero { name, value } => ("cfg-err-zero", vec![("name", Key(name.key().into())), ("value", n(value))]),
            C::TooLarge { name, value } => (
                "cfg-err-too-large",
                vec![("name", Key(name.key().into())), ("value", n(value)), ("limit", n(&MAX_DIM))],
            ),
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
            C::SizeLimit { what, amount, limit } => (
                "cfg-err-tensor-limit",
                vec![("what", Key(what.key().into())), ("amount", n(amount)), ("limit", n(limit))],
            ),
            C::Unknown { what, got } => (what.key(), vec![("got", Text(format!("{got:?}")))]),
            C::AccumDoesNotDivide { batch, accum } => {
                ("cfg-err-accum-divide", vec![("batch", n(batch)), ("accum", n(accum))])
            }
            C::CheckpointEvery { k, layers } => ("est-err-checkpoint-every", vec![("k", n(k)), ("layers", n(layers))]),
            C::LoraRankNotLow { rank, d_model } => ("cfg-err-lora-rank", vec![("rank", n(rank)), ("d", n(d_model))]),
            C::LoraAlpha { alpha } => ("cfg-err-lora-alpha", vec![("alpha", n(alpha))]),
            C::AllocatorOption(e) => return e.message(),
            C::Gpus { gpus, max } => ("cfg-err-gpus", vec![("gpus", n(gpus)), ("max", n(max))]),
            C::ZeroStage { stage } => ("est-err-zero-stage", vec![("stage", n(stage))]),
            C::Bucket { elems, min, max } => {
                ("cfg-err-bucket", vec![("elems", n(elems)), ("min", n(min)), ("max", n(max))])
            }
            C::NotWithSeveralGpus { what } => ("cfg-err-not-with-several-gpus", vec![("what", Key(what.key().into()))]),
            C::DocStarts(why) => ("cfg-err-doc-starts", vec![("why", Key(why.key().into()))]),
            C::OffloadWith { what: Technique::Fp16LossScaling } => ("cfg-err-offload-with-fp16", vec![]),
            C::OffloadWith { what } => ("cfg-err-offload-with", vec![("what", Key(what.key().into()))]),
            C::LoraNoTargets => ("est-err-lora-no-target", vec![]),
            C::FusedWithSelective => ("cfg-err-fused-with-selective", vec![]),
            C::FusedHeadTooLarge { max, head_size, d_model, n_heads } => (
                "cfg-err-fused-head",
                vec![("max", n(max)), ("head", n(head_size)), ("d", n(d_model)), ("heads", n(n_heads))],
            ),
            C::Optimizer { name, value, range } => (
                "cfg-err-optimizer",
                vec![("name", Text(name.to_string())), ("value", n(value)), ("range", Key(range.key().into()))],
            ),
            C::NotInVocabulary(ch) => ("cfg-err-not-in-vocabulary", vec![("char", Text(format!("{ch:?}")))]),
            C::CorpusTooShort { tokens, seq } => {
                ("cfg-err-corpus-too-short", vec![("tokens", n(tokens)), ("seq", n(seq))])
            }
            C::BatchTooLargeForHost { rows } => ("cfg-err-batch-host", vec![("rows", n(rows))]),
            C::BatchLength { inputs, targets, expected } => (
                "cfg-err-batch-length",
                vec![("inputs", n(inputs)), ("targets", n(targets)), ("expected", n(expected))],
            ),
        };
        Worded::new(key, args)
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
