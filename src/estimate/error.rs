//! Why a setup or a config.json cannot be estimated: typed, with the numbers that say why, and
//! rendered through the catalogs (`est-err-…`, `est-why-…`, `est-size-…`, `est-amount-…` in
//! `i18n/`): the app in the reader's language, the CLI in the system's, `Display` in English.

use std::fmt;

use super::framework::Framework;
use crate::i18n::{Catalog, with_english};

/// Why the estimator refuses a setup or a config.json.
#[derive(Clone, Debug, PartialEq)]
pub enum EstimateError {
    /// A size that must be between 1 and `max`.
    OutOfRange {
        what: Size,
        value: u64,
        max: u64,
    },
    /// A size that may be 0 but at most `max`.
    AtMost {
        what: Size,
        value: u64,
        max: u64,
    },
    UnknownPrecision {
        got: String,
    },
    UnknownOptimizer {
        got: String,
    },
    SequenceBeyondPositions {
        seq: u64,
        model: String,
        positions: u64,
    },
    TensorParallelDivide {
        tensor: u64,
        heads: u64,
        kv_heads: u64,
        ffn: u64,
    },
    ExpertParallelNeedsMixture {
        expert: u64,
    },
    ExpertParallelDivide {
        expert: u64,
        experts: u64,
        data: u64,
    },
    LoraOnExperts,
    SequenceParallelDivide {
        seq: u64,
        tensor: u64,
    },
    MeasuredContext {
        bytes: u64,
    },
    MeasuredFragmentation {
        percent: f64,
    },
    ZeroStage {
        stage: u8,
    },
    GradientOffloadAlone,
    ParameterOffloadNeedsZero3,
    CheckpointEvery {
        k: usize,
        layers: u64,
    },
    /// A framework profile other than zero/deepspeed asked for LoRA or offload.
    ProfileFullTraining {
        framework: Framework,
    },
    AmpPrecision,
    AmpZero,
    MegatronZero,
    Fsdp2Zero,
    LoraRank {
        rank: u64,
    },
    LoraNoTarget,
    Dropout {
        value: f64,
    },
    HeadsDivide {
        hidden: u64,
        heads: u64,
    },
    KvHeadsDivide {
        heads: u64,
        kv_heads: u64,
    },
    TooManyParameters {
        model: String,
    },
    TopK {
        top_k: u64,
        experts: u64,
    },
    ExpertsNotGated,
    NoMixtureLayer {
        model: String,
    },
    DenseWidthMissing,
    PipelineStages {
        stages: u64,
        layers: u64,
    },
    InterleavedChunks {
        chunks: u64,
    },
    InterleavedDivide {
        stages: u64,
        chunks: u64,
        layers: u64,
    },
    ContextDivide {
        seq: u64,
        context: u64,
    },
    ContextNeedsFused,
    UlyssesHeads {
        heads: u64,
        kv_heads: u64,
        context: u64,
        tensor: u64,
    },
    NoModelPreset {
        name: String,
    },
    NoGpuPreset {
        name: String,
    },
    /// A config.json that cannot be read as a model.
    Config(ConfigJsonError),
    /// A valid setup whose sizes pass [`super::MAX_ESTIMATE_BYTES`]: beyond any GPU, and beyond
    /// what oomlab counts.
    TooLarge {
        what: Amount,
        amount: u128,
        limit: u64,
    },
}

/// Why a config.json is refused. `family` is its `model_type`; `got` a value as JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigJsonError {
    TooLong {
        bytes: u64,
        max: u64,
    },
    NotJson {
        detail: String,
    },
    NotObject,
    NoModelType,
    UnknownFamily {
        model_type: String,
        known: String,
    },
    UnknownKey {
        family: String,
        key: String,
    },
    Missing {
        family: String,
        key: String,
    },
    NotPositive {
        family: String,
        key: String,
        got: String,
    },
    NotWhole {
        family: String,
        key: String,
        got: String,
    },
    NotBool {
        family: String,
        key: String,
    },
    NotProbability {
        family: String,
        key: String,
        got: String,
    },
    RotaryFactor {
        family: String,
        got: String,
    },
    /// A field whose value would change memory in a way the estimator does not model.
    NotModelled {
        family: String,
        key: String,
        value: String,
        why: Unmodelled,
    },
}

/// Why a config field's value is not modelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unmodelled {
    /// Only the key's default (as JSON) is modelled.
    DefaultOnly(String),
    Gpt2Activation,
    Gpt2Untied,
    Gpt2Dropouts,
    NeoxActivation,
    NeoxAttentionBias,
    NeoxDropouts,
    GatedActivation,
    SomeBiases,
    Dropout,
    ScoresSoftcapAlone,
    LogitsSoftcapAlone,
    LatentKeyValueHeads,
    MoeLayerList,
    NoRopePattern,
    NoRotaryLayer,
    NoRopeList,
    NoRotaryTables,
    RouterLogits,
    ExpertsPerToken,
    RouterJitter,
    GroupsDivide,
    DenseAmongMixture,
}

/// A size a setup or an architecture bounds, named in the reader's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    MicroBatch,
    Sequence,
    Accumulation,
    DataParallel,
    TensorParallel,
    PipelineStages,
    ContextParallel,
    Vocab,
    Hidden,
    Layers,
    Heads,
    KvHeads,
    Ffn,
    Experts,
    TopK,
    Positions,
    HeadDim,
    RotaryDims,
    SharedExpertWidth,
    DenseWidth,
    DenseFirst,
    MixtureStep,
}

/// What would pass the largest byte count oomlab reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    Peak,
    Logits,
    LogitsGrad,
    Parameters,
    Gradients,
    OptimizerState,
    MasterWeights,
    Activations,
    Temporaries,
    Input,
    InFlight,
    AutocastCopies,
    Communication,
    Fragmentation,
    WorkingSet,
    HostMemory,
    PcieTraffic,
    Tokens,
    SavedForBackward,
}

impl Size {
    fn key(self) -> &'static str {
        match self {
            Size::MicroBatch => "est-size-micro-batch",
            Size::Sequence => "est-size-sequence",
            Size::Accumulation => "est-size-accumulation",
            Size::DataParallel => "est-size-data-parallel",
            Size::TensorParallel => "est-size-tensor-parallel",
            Size::PipelineStages => "est-size-pipeline-stages",
            Size::ContextParallel => "est-size-context-parallel",
            Size::Vocab => "est-size-vocab",
            Size::Hidden => "est-size-hidden",
            Size::Layers => "est-size-layers",
            Size::Heads => "est-size-heads",
            Size::KvHeads => "est-size-kv-heads",
            Size::Ffn => "est-size-ffn",
            Size::Experts => "est-size-experts",
            Size::TopK => "est-size-top-k",
            Size::Positions => "est-size-positions",
            Size::HeadDim => "est-size-head-dim",
            Size::RotaryDims => "est-size-rotary-dims",
            Size::SharedExpertWidth => "est-size-shared-expert-width",
            Size::DenseWidth => "est-size-dense-width",
            Size::DenseFirst => "est-size-dense-first",
            Size::MixtureStep => "est-size-mixture-step",
        }
    }
}

impl Amount {
    fn key(self) -> &'static str {
        match self {
            Amount::Peak => "est-amount-peak",
            Amount::Logits => "est-amount-logits",
            Amount::LogitsGrad => "est-amount-logits-grad",
            Amount::Parameters => "est-amount-parameters",
            Amount::Gradients => "est-amount-gradients",
            Amount::OptimizerState => "est-amount-optimizer-state",
            Amount::MasterWeights => "est-amount-master-weights",
            Amount::Activations => "est-amount-activations",
            Amount::Temporaries => "est-amount-temporaries",
            Amount::Input => "est-amount-input",
            Amount::InFlight => "est-amount-in-flight",
            Amount::AutocastCopies => "est-amount-autocast",
            Amount::Communication => "est-amount-communication",
            Amount::Fragmentation => "est-amount-fragmentation",
            Amount::WorkingSet => "est-amount-working-set",
            Amount::HostMemory => "est-amount-host-memory",
            Amount::PcieTraffic => "est-amount-pcie",
            Amount::Tokens => "est-amount-tokens",
            Amount::SavedForBackward => "est-amount-saved-for-backward",
        }
    }
}

impl Unmodelled {
    fn key(&self) -> &'static str {
        match self {
            Unmodelled::DefaultOnly(_) => "est-why-default-only",
            Unmodelled::Gpt2Activation => "est-why-gpt2-activation",
            Unmodelled::Gpt2Untied => "est-why-gpt2-untied",
            Unmodelled::Gpt2Dropouts => "est-why-gpt2-dropouts",
            Unmodelled::NeoxActivation => "est-why-neox-activation",
            Unmodelled::NeoxAttentionBias => "est-why-neox-attention-bias",
            Unmodelled::NeoxDropouts => "est-why-neox-dropouts",
            Unmodelled::GatedActivation => "est-why-gated-activation",
            Unmodelled::SomeBiases => "est-why-some-biases",
            Unmodelled::Dropout => "est-why-dropout",
            Unmodelled::ScoresSoftcapAlone => "est-why-scores-softcap",
            Unmodelled::LogitsSoftcapAlone => "est-why-logits-softcap",
            Unmodelled::LatentKeyValueHeads => "est-why-latent-kv-heads",
            Unmodelled::MoeLayerList => "est-why-moe-layer-list",
            Unmodelled::NoRopePattern => "est-why-no-rope-pattern",
            Unmodelled::NoRotaryLayer => "est-why-no-rotary-layer",
            Unmodelled::NoRopeList => "est-why-no-rope-list",
            Unmodelled::NoRotaryTables => "est-why-no-rotary-tables",
            Unmodelled::RouterLogits => "est-why-router-logits",
            Unmodelled::ExpertsPerToken => "est-why-experts-per-token",
            Unmodelled::RouterJitter => "est-why-router-jitter",
            Unmodelled::GroupsDivide => "est-why-groups-divide",
            Unmodelled::DenseAmongMixture => "est-why-dense-among-mixture",
        }
    }

    fn text(&self, t: &Catalog) -> String {
        match self {
            Unmodelled::DefaultOnly(default) => t.format("est-why-default-only", &[("default", default.into())]),
            other => t.text(other.key()),
        }
    }
}

/// A message's arguments, each as text (numbers as Rust writes them, never grouped).
type Args = Vec<(&'static str, String)>;

impl EstimateError {
    /// Its catalog message and arguments (a reason or a size named inside it is rendered first,
    /// in the same language, and passed as an argument).
    fn message(&self, t: &Catalog) -> (&'static str, Args) {
        use EstimateError as E;
        let n = |v: &dyn fmt::Display| v.to_string();
        match self {
            E::OutOfRange { what, value, max } => {
                ("est-err-out-of-range", vec![("what", t.text(what.key())), ("value", n(value)), ("max", n(max))])
            }
            E::AtMost { what, value, max } => {
                ("est-err-at-most", vec![("what", t.text(what.key())), ("value", n(value)), ("max", n(max))])
            }
            E::UnknownPrecision { got } => ("est-err-unknown-precision", vec![("got", format!("{got:?}"))]),
            E::UnknownOptimizer { got } => ("est-err-unknown-optimizer", vec![("got", format!("{got:?}"))]),
            E::SequenceBeyondPositions { seq, model, positions } => (
                "est-err-sequence-beyond-positions",
                vec![("seq", n(seq)), ("model", model.clone()), ("positions", n(positions))],
            ),
            E::TensorParallelDivide { tensor, heads, kv_heads, ffn } => (
                "est-err-tensor-parallel-divide",
                vec![("t", n(tensor)), ("heads", n(heads)), ("kv", n(kv_heads)), ("ffn", n(ffn))],
            ),
            E::ExpertParallelNeedsMixture { expert } => ("est-err-expert-parallel-mixture", vec![("ep", n(expert))]),
            E::ExpertParallelDivide { expert, experts, data } => {
                ("est-err-expert-parallel-divide", vec![("ep", n(expert)), ("experts", n(experts)), ("data", n(data))])
            }
            E::LoraOnExperts => ("est-err-lora-experts", vec![]),
            E::SequenceParallelDivide { seq, tensor } => {
                ("est-err-sequence-parallel-divide", vec![("seq", n(seq)), ("t", n(tensor))])
            }
            E::MeasuredContext { bytes } => ("est-err-measured-context", vec![("bytes", n(bytes))]),
            E::MeasuredFragmentation { percent } => ("est-err-measured-fragmentation", vec![("percent", n(percent))]),
            E::ZeroStage { stage } => ("est-err-zero-stage", vec![("stage", n(stage))]),
            E::GradientOffloadAlone => ("est-err-gradient-offload", vec![]),
            E::ParameterOffloadNeedsZero3 => ("est-err-parameter-offload", vec![]),
            E::CheckpointEvery { k, layers } => ("est-err-checkpoint-every", vec![("k", n(k)), ("layers", n(layers))]),
            E::ProfileFullTraining { framework } => {
                ("est-err-profile-full-training", vec![("framework", framework.name().to_string())])
            }
            E::AmpPrecision => ("est-err-amp-precision", vec![]),
            E::AmpZero => ("est-err-amp-zero", vec![]),
            E::MegatronZero => ("est-err-megatron-zero", vec![]),
            E::Fsdp2Zero => ("est-err-fsdp2-zero", vec![]),
            E::LoraRank { rank } => ("est-err-lora-rank", vec![("rank", n(rank))]),
            E::LoraNoTarget => ("est-err-lora-no-target", vec![]),
            E::Dropout { value } => ("est-err-dropout", vec![("value", n(value))]),
            E::HeadsDivide { hidden, heads } => ("est-err-heads-divide", vec![("h", n(hidden)), ("heads", n(heads))]),
            E::KvHeadsDivide { heads, kv_heads } => {
                ("est-err-kv-heads-divide", vec![("heads", n(heads)), ("kv", n(kv_heads))])
            }
            E::TooManyParameters { model } => ("est-err-too-many-parameters", vec![("model", model.clone())]),
            E::TopK { top_k, experts } => ("est-err-top-k", vec![("k", n(top_k)), ("experts", n(experts))]),
            E::ExpertsNotGated => ("est-err-experts-not-gated", vec![]),
            E::NoMixtureLayer { model } => ("est-err-no-mixture-layer", vec![("model", model.clone())]),
            E::DenseWidthMissing => ("est-err-dense-width", vec![]),
            E::PipelineStages { stages, layers } => {
                ("est-err-pipeline-stages", vec![("p", n(stages)), ("layers", n(layers))])
            }
            E::InterleavedChunks { chunks } => ("est-err-interleaved-chunks", vec![("v", n(chunks))]),
            E::InterleavedDivide { stages, chunks, layers } => {
                ("est-err-interleaved-divide", vec![("p", n(stages)), ("v", n(chunks)), ("layers", n(layers))])
            }
            E::ContextDivide { seq, context } => ("est-err-context-divide", vec![("seq", n(seq)), ("c", n(context))]),
            E::ContextNeedsFused => ("est-err-context-fused", vec![]),
            E::UlyssesHeads { heads, kv_heads, context, tensor } => (
                "est-err-ulysses-heads",
                vec![("heads", n(heads)), ("kv", n(kv_heads)), ("c", n(context)), ("t", n(tensor))],
            ),
            E::NoModelPreset { name } => ("est-err-no-model-preset", vec![("name", name.clone())]),
            E::NoGpuPreset { name } => ("est-err-no-gpu-preset", vec![("name", name.clone())]),
            E::Config(c) => c.message(t),
            E::TooLarge { what, amount, limit } => {
                ("est-err-too-large", vec![("what", t.text(what.key())), ("amount", n(amount)), ("limit", n(limit))])
            }
        }
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        let (key, args) = self.message(t);
        t.format_text(key, &args)
    }

    /// The catalog messages it renders: its own (`est-err-…`) and a size, an amount or a reason
    /// named inside it (what the tests check every message is reached by).
    pub fn keys(&self) -> Vec<&'static str> {
        let own = with_english(|en| self.message(en).0);
        let inner = match self {
            EstimateError::OutOfRange { what, .. } | EstimateError::AtMost { what, .. } => Some(what.key()),
            EstimateError::TooLarge { what, .. } => Some(what.key()),
            EstimateError::Config(ConfigJsonError::NotModelled { why, .. }) => Some(why.key()),
            _ => None,
        };
        std::iter::once(own).chain(inner).collect()
    }
}

impl ConfigJsonError {
    fn message(&self, t: &Catalog) -> (&'static str, Args) {
        use ConfigJsonError as C;
        let s = |v: &String| v.clone();
        match self {
            C::TooLong { bytes, max } => {
                ("est-err-config-too-long", vec![("bytes", bytes.to_string()), ("max", max.to_string())])
            }
            C::NotJson { detail } => ("est-err-config-not-json", vec![("detail", s(detail))]),
            C::NotObject => ("est-err-config-not-object", vec![]),
            C::NoModelType => ("est-err-config-no-model-type", vec![]),
            C::UnknownFamily { model_type, known } => {
                ("est-err-config-unknown-family", vec![("family", format!("{model_type:?}")), ("known", s(known))])
            }
            C::UnknownKey { family, key } => {
                ("est-err-config-unknown-key", vec![("family", s(family)), ("key", s(key))])
            }
            C::Missing { family, key } => ("est-err-config-missing", vec![("family", s(family)), ("key", s(key))]),
            C::NotPositive { family, key, got } => {
                ("est-err-config-not-positive", vec![("family", s(family)), ("key", s(key)), ("got", s(got))])
            }
            C::NotWhole { family, key, got } => {
                ("est-err-config-not-whole", vec![("family", s(family)), ("key", s(key)), ("got", s(got))])
            }
            C::NotBool { family, key } => ("est-err-config-not-bool", vec![("family", s(family)), ("key", s(key))]),
            C::NotProbability { family, key, got } => {
                ("est-err-config-not-probability", vec![("family", s(family)), ("key", s(key)), ("got", s(got))])
            }
            C::RotaryFactor { family, got } => {
                ("est-err-config-rotary-factor", vec![("family", s(family)), ("got", s(got))])
            }
            C::NotModelled { family, key, value, why } => (
                "est-err-config-not-modelled",
                vec![("family", s(family)), ("key", s(key)), ("value", s(value)), ("why", why.text(t))],
            ),
        }
    }
}

impl From<ConfigJsonError> for EstimateError {
    fn from(e: ConfigJsonError) -> Self {
        EstimateError::Config(e)
    }
}

impl fmt::Display for EstimateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for EstimateError {}
