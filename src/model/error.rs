//! Why the model's shape, or a batch it reads, cannot be, and a setting's name that is none: typed,
//! with the numbers that say why, and worded by the catalogs (`cfg-err-…` and the names inside
//! them, in `i18n/`): the app in the reader's language, `Display` (the CLI's and the logs'
//! words) in English. [`Worded`] is any such message as data: what crosses the browser's worker.

use std::fmt;

use crate::i18n::{Catalog, with_english};

use super::MAX_DIM;

/// Why the model's shape, or a batch it reads, cannot be: typed, with the numbers that say why.
/// (The techniques' refusals are the plan's, [`crate::plan::TechniqueError`]; the allocator's
/// options' are `plan::allocator`'s; `plan::ConfigError` holds any of them.)
#[derive(Debug, Clone, PartialEq)]
pub enum ShapeError {
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
    /// A packed batch's document starts are not starts (or missing, or given to unpacked rows).
    DocStarts(DocStartsWhy),
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

/// A name that is none of the ones a setting takes (a flag's value, a link's field).
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownName {
    pub what: Setting,
    pub got: String,
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
    /// Serving: tokens per block of the KV cache.
    BlockSize,
    /// Serving: token slots in a layer's KV cache.
    CacheSlots,
    /// Serving: blocks in a request's block table.
    TableWidth,
}

/// What would pass what oomlab plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planned {
    Parameters,
    AttentionProbabilities,
    Logits,
    MlpActivations,
    LoraAdapters,
    /// Serving: a layer's KV cache, or a step's block tables.
    KvCache,
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

/// Why a packed batch's document starts are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocStartsWhy {
    NotAStart,
    NoStarts,
    NotPacked,
}

/// A catalog message as data: its key and its arguments, a name inside it as that name's own key.
/// It holds no words of any language: [`Worded::text`] words it in the reader's. It crosses the
/// browser's worker as one string ([`Worded::encode`]): a derived deserialiser of the struct,
/// its list of pairs and its arguments' enum was 4 kB of the web module, a string's is free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worded {
    pub key: String,
    pub args: Vec<(String, Arg)>,
}

/// An argument of a [`Worded`] message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A number or a value as written (numbers as Rust writes them, never grouped).
    Text(String),
    /// A name from the catalog, worded in the same language as the message.
    Key(String),
}

impl Worded {
    pub(crate) fn new(key: &str, args: Vec<(&str, Arg)>) -> Self {
        Worded { key: key.into(), args: args.into_iter().map(|(k, v)| (k.into(), v)).collect() }
    }

    /// A message whose arguments are all values as written.
    pub fn of(key: &str, args: &[(&str, String)]) -> Self {
        Worded { key: key.into(), args: args.iter().map(|(k, v)| ((*k).into(), Arg::Text(v.clone()))).collect() }
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

    /// One string: the key, then each argument's name and value, a value marked `=` (as
    /// written) or `@` (a catalog key), each part ended by the unit separator (U+001F). A unit
    /// separator inside a part is written as U+FFFD (a control character no message holds).
    pub fn encode(&self) -> String {
        const SEP: char = '\u{1f}';
        let mut out = String::new();
        let mut part = |p: &str| {
            out.extend(p.chars().map(|c| if c == SEP { '\u{fffd}' } else { c }));
            out.push(SEP);
        };
        part(&self.key);
        for (name, value) in &self.args {
            part(name);
            match value {
                Arg::Text(v) => part(&format!("={v}")),
                Arg::Key(k) => part(&format!("@{k}")),
            }
        }
        out
    }

    /// Reads [`Worded::encode`]'s string; a malformed one reads as what it holds (a missing
    /// value is empty), never a panic.
    pub fn decode(text: &str) -> Self {
        let mut parts = text.split('\u{1f}');
        let key = parts.next().unwrap_or_default().to_string();
        let mut args = Vec::new();
        while let Some(name) = parts.next().filter(|n| !n.is_empty()) {
            let value = parts.next().unwrap_or_default();
            let arg = match value.strip_prefix('@') {
                Some(k) => Arg::Key(k.to_string()),
                None => Arg::Text(value.strip_prefix('=').unwrap_or(value).to_string()),
            };
            args.push((name.to_string(), arg));
        }
        Worded { key, args }
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
            Dim::BlockSize => "cfg-dim-block-size",
            Dim::CacheSlots => "cfg-dim-cache-slots",
            Dim::TableWidth => "cfg-dim-table-width",
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
            Planned::KvCache => "cfg-planned-kv-cache",
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

impl DocStartsWhy {
    fn key(self) -> &'static str {
        match self {
            DocStartsWhy::NotAStart => "cfg-starts-not-a-start",
            DocStartsWhy::NoStarts => "cfg-starts-none",
            DocStartsWhy::NotPacked => "cfg-starts-not-packed",
        }
    }
}

impl ShapeError {
    /// Its catalog message: the key and arguments (a name inside it as its own key).
    pub fn worded(&self) -> Worded {
        use Arg::{Key, Text};
        use ShapeError as C;
        let n = |v: &dyn fmt::Display| Text(v.to_string());
        let (key, args) = match self {
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
            C::DocStarts(why) => ("cfg-err-doc-starts", vec![("why", Key(why.key().into()))]),
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
}

impl UnknownName {
    /// Its catalog message.
    pub fn worded(&self) -> Worded {
        Worded::new(self.what.key(), vec![("got", Arg::Text(format!("{:?}", self.got)))])
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        self.worded().text(t)
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for ShapeError {}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for UnknownName {}

impl serde::Serialize for Worded {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> serde::Deserialize<'de> for Worded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(Worded::decode(&text))
    }
}
