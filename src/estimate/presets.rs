//! Real models and real GPUs for the estimator.
//!
//! Model configurations are the published ones (Hugging Face `config.json` of each checkpoint);
//! GPU capacities are the totals CUDA reports (`nvidia-smi` "Total", `cudaMemGetInfo`), which are
//! a little under the marketing figure where ECC or firmware reserve memory.

use super::Architecture;
use super::arch::{gpt2, llama};

/// LLaMA-2 7B, the preset the CLI and the app start from.
pub fn default_model() -> Architecture {
    llama("LLaMA-2 7B", 32000, 4096, 32, 32, 32, 11008)
}

/// The model presets, then the catalog's models ([`super::catalog`]): (key for the CLI,
/// architecture).
pub fn models() -> Vec<(&'static str, Architecture)> {
    let mut v = presets();
    v.extend(super::catalog::entries().iter().map(|e| (e.key, e.model.arch.clone())));
    v
}

/// The hand-written presets (the published papers' models).
fn presets() -> Vec<(&'static str, Architecture)> {
    vec![
        ("gpt2", gpt2("GPT-2 small", 768, 12, 12)),
        ("gpt2-medium", gpt2("GPT-2 medium", 1024, 24, 16)),
        ("gpt2-large", gpt2("GPT-2 large", 1280, 36, 20)),
        ("gpt2-xl", gpt2("GPT-2 XL", 1600, 48, 25)),
        ("llama2-7b", default_model()),
        ("llama2-13b", llama("LLaMA-2 13B", 32000, 5120, 40, 40, 40, 13824)),
        ("llama2-70b", llama("LLaMA-2 70B", 32000, 8192, 80, 64, 8, 28672)),
        ("mistral-7b", llama("Mistral 7B", 32000, 4096, 32, 32, 8, 14336)),
    ]
}

/// The model preset called `key` (case-insensitive; `-`, `_` and `.` are ignored, so
/// `Llama-2-7B` and `llama2_7b` both work).
pub fn model(key: &str) -> Option<Architecture> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_', '.', ' '], "");
    let want = norm(key);
    models().into_iter().find(|(k, a)| norm(k) == want || norm(&a.name) == want).map(|(_, a)| a)
}

/// A GPU: its memory as CUDA reports it, and its compute capability (which sets cuBLAS's
/// workspace).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gpu {
    pub name: String,
    pub memory_bytes: u64,
    /// CUDA compute capability, major version (7 Turing, 8 Ampere/Ada, 9 Hopper).
    pub compute_major: u32,
}

const MIB: u64 = 1 << 20;

fn preset_gpu(name: &str, mib: u64, major: u32) -> Gpu {
    Gpu { name: name.to_string(), memory_bytes: mib * MIB, compute_major: major }
}

/// The A100 80 GB, the GPU the CLI and the app start from.
pub fn default_gpu() -> Gpu {
    preset_gpu("A100 80 GB", 81_920, 8)
}

/// A GPU of `bytes` that is none of the presets (compute capability 8 assumed).
pub fn custom_gpu(bytes: u64) -> Gpu {
    Gpu { name: format!("custom {}", crate::units::format_bytes(bytes)), memory_bytes: bytes, compute_major: 8 }
}

/// The GPU presets: (key, GPU). Totals in MiB as `nvidia-smi` reports them.
pub fn gpus() -> Vec<(&'static str, Gpu)> {
    vec![
        ("t4", preset_gpu("T4 16 GB", 15_360, 7)),
        ("rtx4090", preset_gpu("RTX 4090 24 GB", 24_564, 8)),
        ("a100-40", preset_gpu("A100 40 GB", 40_960, 8)),
        ("a100-80", default_gpu()),
        ("h100-80", preset_gpu("H100 80 GB", 81_559, 9)),
        ("h200", preset_gpu("H200 141 GB", 143_771, 9)),
    ]
}

/// The GPU preset called `key` (case-insensitive, `-`/`_`/space ignored), or a custom size such
/// as `48GiB` / `48GB` (compute capability 8 assumed).
pub fn gpu(key: &str) -> Option<Gpu> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_', ' '], "");
    let want = norm(key);
    if let Some((_, g)) = gpus().into_iter().find(|(k, g)| norm(k) == want || norm(&g.name) == want) {
        return Some(g);
    }
    let bytes = crate::units::parse_bytes(key).ok()?;
    (bytes > 0).then(|| custom_gpu(bytes))
}
