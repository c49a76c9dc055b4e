//! Everything the user can set, in one serde struct: persisted on the desktop, encoded in the
//! URL hash on the web so that a link opens the same setup. Whatever comes in (an old version,
//! a tampered link) is checked; what cannot be used falls back to the defaults with a notice.

pub mod door;
pub mod real_model;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::Notice;
use crate::model::params::LoraConfig;
use crate::model::{ModelConfig, StepShape};
use crate::plan::{
    AllocatorConfig, AttentionKind, Checkpoint, ConfigError, OptimizerConfig, OptimizerKind, Plan, Precision,
    StepRequest, Techniques,
};

/// The toy configurations the controls start from (each then editable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    Tiny,
    Small,
    Medium,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Tiny, Preset::Small, Preset::Medium];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Small => "small",
            Preset::Medium => "medium",
        }
    }

    /// (d_model, layers, heads, max sequence).
    pub fn dims(self) -> ModelDims {
        match self {
            Preset::Tiny => ModelDims { d_model: 64, n_layers: 2, n_heads: 4, max_seq: 64 },
            Preset::Small => ModelDims { d_model: 128, n_layers: 4, n_heads: 4, max_seq: 128 },
            Preset::Medium => ModelDims { d_model: 256, n_layers: 6, n_heads: 8, max_seq: 256 },
        }
    }
}

/// The model's shape, editable after picking a preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDims {
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub max_seq: usize,
}

/// The largest batch the controls offer (the sweep goes this far too).
pub const MAX_BATCH: usize = 1024;

/// What a student needs to see and use the app, kept with the settings and carried by
/// a link: a teacher's link can switch them on for the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prefs {
    /// Present mode, for a projector: large type, high contrast. A teacher's link can lock it.
    pub projector: bool,
    /// No animations: panels open and scroll at once.
    pub reduced_motion: bool,
    /// The high-contrast theme (white on black, strong outlines) and the colour-blind-safe palette.
    pub high_contrast: bool,
    /// Text size, in percent of the usual (100 to 200, in steps of 25).
    pub text_percent: u16,
}

impl Default for Prefs {
    fn default() -> Self {
        Self { projector: false, reduced_motion: false, high_contrast: false, text_percent: 100 }
    }
}

impl Prefs {
    pub const TEXT_PERCENT: std::ops::RangeInclusive<u16> = 100..=200;

    /// The text size as a factor, within the range the control offers.
    pub fn text_scale(&self) -> f32 {
        f32::from(self.text_percent.clamp(*Self::TEXT_PERCENT.start(), *Self::TEXT_PERCENT.end())) / 100.0
    }

    /// A link's preferences over a student's own: a link can switch a need on, never off — a
    /// student who reads at 200 % keeps it when a teacher's link asks for 150 %.
    pub fn merged(self, mine: Prefs) -> Prefs {
        Prefs {
            projector: self.projector || mine.projector,
            reduced_motion: self.reduced_motion || mine.reduced_motion,
            high_contrast: self.high_contrast || mine.high_contrast,
            text_percent: self.text_percent.max(mine.text_percent),
        }
    }
}

/// The virtual GPU: how much memory it has, and the caching allocator's options (PyTorch's
/// `PYTORCH_CUDA_ALLOC_CONF`), which the step's techniques carry to every backend.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceSettings {
    pub budget_bytes: u64,
    pub allocator: AllocatorConfig,
    /// Data parallelism over simulated GPUs (each with this budget) and its ZeRO stage.
    pub parallel: crate::plan::Parallel,
    /// What lives in host memory instead (ZeRO-Offload).
    #[serde(default)]
    pub offload: crate::plan::Offload,
    /// How the run's batches are made from the corpus (with the run's other inputs: kept here
    /// so that a link carries it at its top, as the device's settings).
    #[serde(default)]
    pub batching: crate::plan::Batching,
}

impl DeviceSettings {
    /// A virtual GPU of `bytes`, its allocator as PyTorch's by default.
    pub fn with_budget(bytes: u64) -> Self {
        Self { budget_bytes: bytes, ..Self::default() }
    }
}

impl Default for DeviceSettings {
    fn default() -> Self {
        Self {
            budget_bytes: 64 << 20,
            allocator: AllocatorConfig::default(),
            parallel: crate::plan::Parallel::default(),
            offload: crate::plan::Offload::None,
            batching: crate::plan::Batching::Windows,
        }
    }
}

/// All settings. Missing fields (an older link) take the defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub preset: Preset,
    pub dims: ModelDims,
    /// Sequences one GPU takes per optimizer step (the batch slider's; [`Self::batches`] gives
    /// the micro-batch and the global batch).
    pub batch: usize,
    pub seq: usize,
    /// The virtual GPU's memory and its allocator's options (flattened: a link's JSON has
    /// `budget_bytes` at its top, as before the options were added).
    #[serde(flatten)]
    pub device: DeviceSettings,
    pub optimizer: OptimizerKind,
    pub checkpoint: Checkpoint,
    pub precision: Precision,
    pub attention: AttentionKind,
    /// Gradient accumulation steps (the micro-batch is batch / accum).
    pub accum: usize,
    /// LoRA rank; 0 = off.
    pub lora_rank: usize,
    pub seed: u64,
    /// Present mode, reduced motion, high contrast, text size. (A link made before these were
    /// grouped keeps its settings but not its present mode, which it carried at the top.)
    pub prefs: Prefs,
    /// Up to two more technique sets overlaid on the memory-vs-batch chart.
    pub overlays: Vec<Techniques>,
    /// The large-model estimator's setup (the Real models tab). Links made before it had this
    /// name call it `real`.
    #[serde(alias = "real")]
    pub estimate: real_model::EstimateSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            preset: Preset::Tiny,
            dims: Preset::Tiny.dims(),
            batch: 16,
            seq: 64,
            device: DeviceSettings::default(),
            optimizer: OptimizerKind::AdamW,
            checkpoint: Checkpoint::Off,
            precision: Precision::Fp32,
            attention: AttentionKind::Standard,
            accum: 1,
            lora_rank: 0,
            seed: 0,
            prefs: Prefs::default(),
            overlays: Vec::new(),
            estimate: real_model::EstimateSettings::default(),
        }
    }
}

/// The budgets the controls offer.
pub const BUDGET_PRESETS: [(&str, u64); 4] =
    [("32 MiB", 32 << 20), ("64 MiB", 64 << 20), ("256 MiB", 256 << 20), ("1 GiB", 1 << 30)];

impl Settings {
    pub fn model(&self, vocab: usize) -> ModelConfig {
        ModelConfig {
            vocab,
            seq_len: self.dims.max_seq,
            d_model: self.dims.d_model,
            n_layers: self.dims.n_layers,
            n_heads: self.dims.n_heads,
        }
    }

    /// The techniques these settings switch on.
    pub fn techniques(&self) -> Techniques {
        Techniques {
            checkpoint: self.checkpoint,
            attention: self.attention,
            accum: self.accum.max(1),
            lora: (self.lora_rank > 0).then(|| LoraConfig::new(self.lora_rank).with_targets("all").ok()).flatten(),
            precision: self.precision,
            allocator: self.device.allocator,
            parallel: self.device.parallel,
            offload: self.device.offload,
            batching: self.device.batching,
        }
    }

    pub fn optimizer_config(&self) -> OptimizerConfig {
        match self.optimizer {
            OptimizerKind::AdamW => OptimizerConfig::default(),
            kind => OptimizerConfig { kind, ..OptimizerConfig::sgd_momentum(0.1, 0.9) },
        }
    }

    /// The step these settings ask for, at `batch` (effective) with `techniques`, or why the
    /// batch cannot be split into their micro-batches.
    pub fn request_with(
        &self,
        vocab: usize,
        batch: usize,
        techniques: &Techniques,
    ) -> Result<StepRequest, ConfigError> {
        self.request_at(vocab, batch, techniques, 0)
    }

    /// [`Self::request_with`] for the run's batch number `step`: padded and bucketed batches are
    /// as long as their longest document (up to the model's positions), each its own.
    pub fn request_at(
        &self,
        vocab: usize,
        batch: usize,
        techniques: &Techniques,
        step: u64,
    ) -> Result<StepRequest, ConfigError> {
        let seq = if techniques.batching.varies_in_length() {
            // The documents every GPU's share is drawn from: the global batch.
            let batches = crate::plan::Batches::per_gpu(batch, techniques.accum, techniques.parallel.gpus);
            let global = StepShape { batch: batches.map_or(batch, |b| b.global_batch()), seq: self.dims.max_seq };
            let docs = crate::documents::Documents::shared();
            docs.batch(techniques.batching, global, self.seed, step).map_or(self.seq, |b| b.shape.seq)
        } else {
            self.seq
        };
        StepRequest::with_batch(self.model(vocab), StepShape { batch, seq }, self.optimizer_config(), *techniques)
    }

    /// The plan of one step with `techniques` at `batch` (effective), or why it cannot be built.
    pub fn plan_with(&self, vocab: usize, batch: usize, techniques: &Techniques) -> Result<Plan, ConfigError> {
        Ok(self.request_with(vocab, batch, techniques)?.validate()?.plan())
    }

    /// The plan of the current settings.
    pub fn plan(&self, vocab: usize) -> Result<Plan, ConfigError> {
        self.plan_at(vocab, 0)
    }

    /// The plan of the run's batch number `step` (its own length when padded or bucketed).
    pub fn plan_at(&self, vocab: usize, step: u64) -> Result<Plan, ConfigError> {
        Ok(self.request_at(vocab, self.batch, &self.techniques(), step)?.validate()?.plan())
    }

    /// The step's batch in its three senses: the batch slider's is the batch per GPU, split into
    /// `accum` micro-batches, over the simulated GPUs.
    pub fn batches(&self) -> Result<crate::plan::Batches, ConfigError> {
        crate::plan::Batches::per_gpu(self.batch, self.accum, self.device.parallel.gpus)
    }

    /// The batch per GPU within the slider's range: the one bound every change meets (the rules
    /// apply it; the keyboard's doubling asks it whether the batch would move).
    pub fn bounded_batch(batch: usize) -> usize {
        batch.clamp(1, MAX_BATCH)
    }

    /// Keeps the settings buildable: the sequence within the model, an accumulation count in
    /// 1..=batch that divides the batch (the largest such, not above the one asked for). Part
    /// of the rules ([`Self::clamped`]).
    fn normalize(&mut self) {
        self.seq = self.seq.clamp(1, self.dims.max_seq.max(1));
        self.accum = self.accum.clamp(1, self.batch.max(1));
        while crate::plan::micro_batch(self.batch, self.accum).is_err() {
            self.accum -= 1;
        }
    }

    /// Switches on what a suggestion of the OOM panel names: a change, sent through the door,
    /// whose result the rules then keep buildable.
    pub fn apply(&mut self, s: Suggestion) {
        match s {
            Suggestion::Checkpointing => self.checkpoint = Checkpoint::BLOCKS,
            Suggestion::FusedAttention => {
                self.attention = AttentionKind::Fused;
                // Fused attention never stores the probabilities selective recomputation drops.
                if self.checkpoint == Checkpoint::Selective {
                    self.checkpoint = Checkpoint::Off;
                }
            }
            Suggestion::Accumulation => self.accum = self.accum.saturating_mul(2),
            Suggestion::MixedPrecision => self.precision = Precision::Bf16,
            Suggestion::ExpandableSegments => self.device.allocator.expandable_segments = true,
            // The rules take the accumulation down to a count that divides the halved batch.
            Suggestion::SmallerBatch => self.batch /= 2,
        }
    }

    /// Clamps what the controls bound (batch, sequence, budget, overlays) so that nothing from
    /// outside can ask for absurd work.
    pub fn clamped(mut self) -> Self {
        self.batch = Self::bounded_batch(self.batch);
        self.dims.max_seq = self.dims.max_seq.clamp(1, 4096);
        self.seq = self.seq.clamp(1, self.dims.max_seq);
        self.dims.d_model = self.dims.d_model.clamp(1, 2048);
        self.dims.n_layers = self.dims.n_layers.clamp(1, 48);
        self.dims.n_heads = self.dims.n_heads.clamp(1, 64);
        self.accum = self.accum.clamp(1, MAX_BATCH);
        self.lora_rank = self.lora_rank.min(256);
        self.device.budget_bytes = self.device.budget_bytes.clamp(1 << 20, 1 << 40);
        self.overlays.truncate(2);
        let p = &mut self.prefs.text_percent;
        *p = (*p).clamp(*Prefs::TEXT_PERCENT.start(), *Prefs::TEXT_PERCENT.end()) / 25 * 25;
        self.estimate = self.estimate.clamped();
        self.normalize();
        self
    }

    /// Applies a lesson's or a challenge's setup, keeping the student's display preferences:
    /// a chapter sets the model and the techniques, never the text size.
    pub fn keeping_prefs(&mut self, setup: fn(&mut Settings)) {
        let prefs = self.prefs;
        setup(self);
        self.prefs = prefs;
    }

    /// The settings a page opens with: a link's, when it carries any, else the remembered ones;
    /// with the student's own display preferences and the browser's added — a link can switch a
    /// need on, never off.
    pub fn opened(remembered: Settings, link: Option<Settings>, system: Prefs) -> Settings {
        let mine = remembered.prefs;
        let mut settings = link.unwrap_or(remembered);
        settings.prefs = settings.prefs.merged(mine).merged(system);
        settings
    }

    /// The URL hash that encodes these settings: `#s=` + base64url(JSON).
    pub fn to_url_hash(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("#s={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
    }

    /// Whether a URL hash has anything besides the fields that are not settings (`train=N`,
    /// `lang=xx`): a link with only those keeps the remembered settings.
    pub fn url_hash_carries_settings(hash: &str) -> bool {
        hash.split(['#', '&']).any(|kv| {
            // `teach`: the teacher's address `oomlab serve` prints starts a class.
            !kv.trim().is_empty()
                && kv != "teach"
                && !["train=", "lang=", "challenge=", "lock=", "hide=", "lesson=", "tab=", "key="]
                    .iter()
                    .any(|f| kv.starts_with(f))
        })
    }

    /// Settings from a URL hash (with or without the leading `#`). An empty hash gives the
    /// defaults silently; anything unreadable, or settings whose plan cannot be built, gives the
    /// defaults and a notice saying why.
    pub fn from_url_hash(hash: &str, vocab: usize) -> (Settings, Option<Notice>) {
        let hash = hash.trim().trim_start_matches('#');
        if hash.is_empty() {
            return (Settings::default(), None);
        }
        // Why, worded in the reader's language when the notice is shown; the details (serde's,
        // the plan's) stay as those libraries write them.
        let fallback = |why: Notice| (Settings::default(), Some(Notice::msg("link-unusable", &[("why", why)])));
        let Some(encoded) = hash.split('&').find_map(|kv| kv.strip_prefix("s=")) else {
            // Other known fields alone (`train=N` for scripted runs, `lang=zh`) carry no settings.
            if !Self::url_hash_carries_settings(hash) {
                return (Settings::default(), None);
            }
            return fallback(Notice::msg("link-no-settings", &[]));
        };
        if encoded.len() > 16 * 1024 {
            return fallback(Notice::msg("link-too-long", &[]));
        }
        let bytes = match base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded.trim_end_matches('=')) {
            Ok(b) => b,
            Err(e) => return fallback(Notice::msg("link-not-base64", &[("error", e.to_string().into())])),
        };
        // Through `from_str` as the browser's storage is read, not `from_slice`: one decoder of
        // the settings in the web module, not two (it has a size ceiling).
        let text = std::str::from_utf8(&bytes).map_err(|e| e.to_string());
        let settings: Settings = match text.and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string())) {
            Ok(s) => s,
            Err(e) => return fallback(Notice::msg("link-not-settings", &[("error", e.into())])),
        };
        let mut clamped = settings.clone().clamped();
        if let Err(e) = clamped.plan(vocab) {
            return fallback(Notice::Config(e));
        }
        // The real-model view's part: if it cannot be estimated, that part alone falls back.
        if let Err(e) = clamped.estimate.setup() {
            clamped.estimate = real_model::EstimateSettings::default();
            return (clamped, Some(Notice::msg("link-real-unusable", &[("why", Notice::Refusal(e))])));
        }
        let notice = (clamped != settings).then(|| Notice::msg("link-adjusted", &[]));
        (clamped, notice)
    }
}

/// What the user can switch on to fit, from the seed's diagnostic workflow (the OOM panel
/// offers them; [`Settings::apply`] switches them on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suggestion {
    Checkpointing,
    FusedAttention,
    Accumulation,
    MixedPrecision,
    SmallerBatch,
    /// The allocator's expandable segments: for an out-of-memory caused by fragmentation.
    ExpandableSegments,
}

#[cfg(test)]
mod tests;
