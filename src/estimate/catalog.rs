//! The catalog: popular models' published `config.json`s (`data/models/`), embedded, read by
//! [`super::hf`] like a user's own. Each file keeps the fields of its model's Hugging Face config
//! that the estimator reads, with `_name` (how the views name it) and `_source` (where the
//! config is published). Their parameter counts equal what transformers builds from the same
//! files (tests/hf_config.rs, counted by scripts/check_params.py).

use std::sync::OnceLock;

use super::hf::{HfModel, from_config_named};

/// (key, config.json), in the order the views list them: by family (each family's together), then
/// size.
pub const CONFIGS: [(&str, &str); 39] = [
    ("llama-3.1-8b", include_str!("../../data/models/llama-3.1-8b.json")),
    ("llama-3.1-70b", include_str!("../../data/models/llama-3.1-70b.json")),
    ("llama-3.2-1b", include_str!("../../data/models/llama-3.2-1b.json")),
    ("llama-3.2-3b", include_str!("../../data/models/llama-3.2-3b.json")),
    ("tinyllama-1.1b", include_str!("../../data/models/tinyllama-1.1b.json")),
    ("llama-4-scout", include_str!("../../data/models/llama-4-scout.json")),
    ("mistral-7b-v0.1", include_str!("../../data/models/mistral-7b-v0.1.json")),
    ("mixtral-8x7b", include_str!("../../data/models/mixtral-8x7b.json")),
    ("mixtral-8x22b", include_str!("../../data/models/mixtral-8x22b.json")),
    ("qwen2.5-0.5b", include_str!("../../data/models/qwen2.5-0.5b.json")),
    ("qwen2.5-1.5b", include_str!("../../data/models/qwen2.5-1.5b.json")),
    ("qwen2.5-3b", include_str!("../../data/models/qwen2.5-3b.json")),
    ("qwen2.5-7b", include_str!("../../data/models/qwen2.5-7b.json")),
    ("qwen2.5-14b", include_str!("../../data/models/qwen2.5-14b.json")),
    ("qwen2.5-32b", include_str!("../../data/models/qwen2.5-32b.json")),
    ("qwen2.5-72b", include_str!("../../data/models/qwen2.5-72b.json")),
    ("qwen1.5-moe-a2.7b", include_str!("../../data/models/qwen1.5-moe-a2.7b.json")),
    ("qwen3-0.6b", include_str!("../../data/models/qwen3-0.6b.json")),
    ("qwen3-8b", include_str!("../../data/models/qwen3-8b.json")),
    ("qwen3-30b-a3b", include_str!("../../data/models/qwen3-30b-a3b.json")),
    ("qwen3-235b-a22b", include_str!("../../data/models/qwen3-235b-a22b.json")),
    ("gemma-2b", include_str!("../../data/models/gemma-2b.json")),
    ("gemma-7b", include_str!("../../data/models/gemma-7b.json")),
    ("gemma-2-2b", include_str!("../../data/models/gemma-2-2b.json")),
    ("gemma-2-9b", include_str!("../../data/models/gemma-2-9b.json")),
    ("gemma-2-27b", include_str!("../../data/models/gemma-2-27b.json")),
    ("gemma-3-1b", include_str!("../../data/models/gemma-3-1b.json")),
    ("phi-3-mini-4k", include_str!("../../data/models/phi-3-mini-4k.json")),
    ("phi-3-medium-4k", include_str!("../../data/models/phi-3-medium-4k.json")),
    ("pythia-160m", include_str!("../../data/models/pythia-160m.json")),
    ("pythia-1.4b", include_str!("../../data/models/pythia-1.4b.json")),
    ("pythia-6.9b", include_str!("../../data/models/pythia-6.9b.json")),
    ("olmo-2-7b", include_str!("../../data/models/olmo-2-7b.json")),
    ("smollm3-3b", include_str!("../../data/models/smollm3-3b.json")),
    ("granite-3.3-8b", include_str!("../../data/models/granite-3.3-8b.json")),
    ("glm-4.5-air", include_str!("../../data/models/glm-4.5-air.json")),
    ("deepseek-v3", include_str!("../../data/models/deepseek-v3.json")),
    ("gpt-oss-20b", include_str!("../../data/models/gpt-oss-20b.json")),
    ("gpt-oss-120b", include_str!("../../data/models/gpt-oss-120b.json")),
];

/// A catalog model: its key, its family (the config's `model_type`), and the architecture and
/// context its config gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: &'static str,
    pub family: String,
    pub model: HfModel,
}

/// Every catalog model, read once. A file that did not read would be a defect of the catalog
/// (tests/hf_config.rs reads every one); it is left out rather than taking the views down.
pub fn entries() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        CONFIGS
            .iter()
            .filter_map(|&(key, text)| {
                let model = from_config_named(text, key).ok()?;
                let fields: serde_json::Value = serde_json::from_str(text).ok()?;
                let family = fields.get("model_type")?.as_str()?.to_string();
                Some(Entry { key, family, model })
            })
            .collect()
    })
}

impl Entry {
    /// Its config.json, as embedded (what the serving estimate reads each layer's attention
    /// from: [`super::serve::attention_layers`]).
    pub fn config(&self) -> &'static str {
        CONFIGS.iter().find(|(key, _)| *key == self.key).map_or("{}", |(_, text)| text)
    }
}

/// The catalog model called `key` or by its name (case-insensitive; `-`, `_`, `.` and spaces
/// ignored, so `Mixtral-8x7B` and `mixtral_8x7b` both work).
pub fn find(key: &str) -> Option<&'static Entry> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_', '.', ' '], "");
    let want = norm(key);
    entries().iter().find(|e| norm(e.key) == want || norm(&e.model.arch.name) == want)
}
