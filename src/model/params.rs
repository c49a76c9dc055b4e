//! Where every parameter lives: Hugging Face GPT-2 names, shapes and layouts, and its offset
//! in the one flat parameter tensor.
//!
//! All parameters share one flat fp32 tensor (as FSDP's "flat parameter" does), so the optimizer
//! runs as a single kernel over it and gradients share the same layout. Each parameter starts at
//! a multiple of [`PARAM_ALIGN_ELEMS`] elements so that a GPU binding of it meets wgpu's
//! `min_storage_buffer_offset_alignment` (256 bytes on every adapter we target).
//!
//! Matrices come first and biases/LayerNorm parameters after them, so AdamW's decoupled weight
//! decay applies to `[0, decay_end)` only, as in GPT-2/nanoGPT training.

use std::collections::HashMap;

use super::ModelConfig;

/// 128 elements: 256 bytes of 16-bit values (512 of f32), a multiple of wgpu's maximum
/// `min_storage_buffer_offset_alignment` (256 bytes) whatever the precision.
pub const PARAM_ALIGN_ELEMS: u64 = 128;

/// How a parameter is initialised (GPT-2's scheme).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal(0, std).
    Normal {
        std: f32,
    },
    Zeros,
    Ones,
    /// Uniform(−bound, bound): Kaiming-uniform with a = √5, PyTorch's `nn.Linear` default and
    /// the initialisation of LoRA's A matrices.
    Uniform {
        bound: f32,
    },
}

/// A projection LoRA can adapt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoraTarget {
    /// attn.c_attn (d → 3d).
    Qkv,
    /// attn.c_proj (d → d).
    AttnProj,
    /// mlp.c_fc (d → 4d).
    Fc,
    /// mlp.c_proj (4d → d).
    FcProj,
}

impl LoraTarget {
    /// Hugging Face module path inside a block.
    pub fn module(self) -> &'static str {
        match self {
            LoraTarget::Qkv => "attn.c_attn",
            LoraTarget::AttnProj => "attn.c_proj",
            LoraTarget::Fc => "mlp.c_fc",
            LoraTarget::FcProj => "mlp.c_proj",
        }
    }
    /// (in, out) features for width d.
    pub fn features(self, d: u64) -> (u64, u64) {
        match self {
            LoraTarget::Qkv => (d, 3 * d),
            LoraTarget::AttnProj => (d, d),
            LoraTarget::Fc => (d, 4 * d),
            LoraTarget::FcProj => (4 * d, d),
        }
    }
}

/// Low-rank adapters (Hu et al. 2021): the base weights are frozen and each adapted projection
/// W gets W + (alpha/r)·A·B, with A (in×r) and B (r×out) trained.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraConfig {
    pub rank: usize,
    pub alpha: f32,
    /// Adapt attn.c_attn (q, k, v).
    pub qkv: bool,
    /// Adapt attn.c_proj (the attention output).
    pub proj: bool,
    /// Adapt the MLP's c_fc and c_proj.
    pub mlp: bool,
}

impl LoraConfig {
    /// Rank r on the qkv projection, alpha = r (scale 1), as PEFT's default targets for GPT-2.
    pub fn new(rank: usize) -> Self {
        Self { rank, alpha: rank as f32, qkv: true, proj: false, mlp: false }
    }

    /// alpha / r, the factor on A·B.
    pub fn scale(&self) -> f32 {
        self.alpha / self.rank.max(1) as f32
    }

    pub fn targets(&self) -> Vec<LoraTarget> {
        let mut t = Vec::new();
        if self.qkv {
            t.push(LoraTarget::Qkv);
        }
        if self.proj {
            t.push(LoraTarget::AttnProj);
        }
        if self.mlp {
            t.extend([LoraTarget::Fc, LoraTarget::FcProj]);
        }
        t
    }

    /// Parses "qkv,proj,mlp" (or "all") into the target flags.
    pub fn with_targets(mut self, text: &str) -> Result<Self, super::UnknownName> {
        self.qkv = false;
        self.proj = false;
        self.mlp = false;
        for part in text.split(',').map(|p| p.trim().to_ascii_lowercase()) {
            match part.as_str() {
                "qkv" | "c_attn" => self.qkv = true,
                "proj" | "output" | "o" | "c_proj" => self.proj = true,
                "mlp" | "ffn" => self.mlp = true,
                "all" => (self.qkv, self.proj, self.mlp) = (true, true, true),
                other => {
                    return Err(super::UnknownName { what: super::Setting::LoraTarget, got: other.to_string() });
                }
            }
        }
        Ok(self)
    }
}

/// Which tensor of the model a parameter is; lets backends find it without string matching.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    Wte,
    Wpe,
    Ln1W(usize),
    Ln1B(usize),
    QkvW(usize),
    QkvB(usize),
    AttnProjW(usize),
    AttnProjB(usize),
    Ln2W(usize),
    Ln2B(usize),
    FcW(usize),
    FcB(usize),
    FcProjW(usize),
    FcProjB(usize),
    LnFW,
    LnFB,
    /// LoRA's A (in×r) and B (r×out) of a projection in block i.
    LoraA(LoraTarget, usize),
    LoraB(LoraTarget, usize),
}

/// One parameter tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub kind: ParamKind,
    /// Hugging Face `GPT2LMHeadModel` state-dict name.
    pub name: String,
    /// Shape in Hugging Face layout (Conv1D weights are in×out).
    pub shape: Vec<u64>,
    /// First element in the flat parameter tensor.
    pub offset: u64,
    pub init: Init,
    /// Whether AdamW's weight decay applies.
    pub decay: bool,
}

impl ParamSpec {
    pub fn numel(&self) -> u64 {
        self.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }
    pub fn range(&self) -> std::ops::Range<u64> {
        self.offset..self.offset.saturating_add(self.numel())
    }
    /// [`Self::range`] as host indices, for a layout an executor holds in host memory (None
    /// where it does not fit a `usize`).
    pub fn host_range(&self) -> Option<std::ops::Range<usize>> {
        let r = self.range();
        Some(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
    }
}

/// The layout of all parameters in the flat tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamLayout {
    pub specs: Vec<ParamSpec>,
    /// Elements of the flat tensor, padding included.
    pub flat_len: u64,
    /// Weight decay applies to elements `[0, decay_end)`.
    pub decay_end: u64,
    /// Each kind's position in `specs` (a lookup per parameter, so building a plan stays linear
    /// in the number of layers).
    index: HashMap<ParamKind, usize>,
}

/// Rounds up to the alignment (saturating: `Plan::build_with` bounds the sizes first).
fn align(n: u64) -> u64 {
    n.div_ceil(PARAM_ALIGN_ELEMS).saturating_mul(PARAM_ALIGN_ELEMS)
}

/// Elements of a shape (saturating).
fn numel(shape: &[u64]) -> u64 {
    shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))
}

impl ParamLayout {
    pub fn new(cfg: &ModelConfig) -> Self {
        let (v, t, c, l) = (cfg.vocab as u64, cfg.seq_len as u64, cfg.d_model as u64, cfg.n_layers);
        let std = 0.02f32;
        // GPT-2 scales the residual projections by 1/sqrt(2L): two residual adds per block.
        let resid_std = std / ((2 * l) as f32).sqrt();
        let h = |i: usize, rest: &str| format!("transformer.h.{i}.{rest}");
        let mut matrices = vec![
            (ParamKind::Wte, "transformer.wte.weight".to_string(), vec![v, c], Init::Normal { std }),
            (ParamKind::Wpe, "transformer.wpe.weight".to_string(), vec![t, c], Init::Normal { std }),
        ];
        let mut vectors = Vec::new();
        for i in 0..l {
            matrices.push((ParamKind::QkvW(i), h(i, "attn.c_attn.weight"), vec![c, 3 * c], Init::Normal { std }));
            matrices.push((
                ParamKind::AttnProjW(i),
                h(i, "attn.c_proj.weight"),
                vec![c, c],
                Init::Normal { std: resid_std },
            ));
            matrices.push((ParamKind::FcW(i), h(i, "mlp.c_fc.weight"), vec![c, 4 * c], Init::Normal { std }));
            matrices.push((
                ParamKind::FcProjW(i),
                h(i, "mlp.c_proj.weight"),
                vec![4 * c, c],
                Init::Normal { std: resid_std },
            ));
            vectors.push((ParamKind::Ln1W(i), h(i, "ln_1.weight"), vec![c], Init::Ones));
            vectors.push((ParamKind::Ln1B(i), h(i, "ln_1.bias"), vec![c], Init::Zeros));
            vectors.push((ParamKind::QkvB(i), h(i, "attn.c_attn.bias"), vec![3 * c], Init::Zeros));
            vectors.push((ParamKind::AttnProjB(i), h(i, "attn.c_proj.bias"), vec![c], Init::Zeros));
            vectors.push((ParamKind::Ln2W(i), h(i, "ln_2.weight"), vec![c], Init::Ones));
            vectors.push((ParamKind::Ln2B(i), h(i, "ln_2.bias"), vec![c], Init::Zeros));
            vectors.push((ParamKind::FcB(i), h(i, "mlp.c_fc.bias"), vec![4 * c], Init::Zeros));
            vectors.push((ParamKind::FcProjB(i), h(i, "mlp.c_proj.bias"), vec![c], Init::Zeros));
        }
        vectors.push((ParamKind::LnFW, "transformer.ln_f.weight".to_string(), vec![c], Init::Ones));
        vectors.push((ParamKind::LnFB, "transformer.ln_f.bias".to_string(), vec![c], Init::Zeros));

        let mut specs = Vec::with_capacity(matrices.len() + vectors.len());
        let mut offset = 0;
        let mut push = |list: Vec<(ParamKind, String, Vec<u64>, Init)>, decay: bool, offset: &mut u64| {
            for (kind, name, shape, init) in list {
                let n = numel(&shape);
                specs.push(ParamSpec { kind, name, shape, offset: *offset, init, decay });
                *offset = align(offset.saturating_add(n));
            }
        };
        push(matrices, true, &mut offset);
        let decay_end = offset;
        push(vectors, false, &mut offset);
        Self::indexed(specs, offset, decay_end)
    }

    /// The flat tensor of LoRA adapters: A (Kaiming-uniform) and B (zeros, so training starts
    /// from the base model's function) for each target of each block; all decayed.
    pub fn lora(cfg: &ModelConfig, lora: &LoraConfig) -> Self {
        let (c, r) = (cfg.d_model as u64, lora.rank as u64);
        let mut specs = Vec::new();
        let mut offset = 0;
        for i in 0..cfg.n_layers {
            for target in lora.targets() {
                let (k, n) = target.features(c);
                let name = |m: &str| format!("base_model.model.transformer.h.{i}.{}.{m}.weight", target.module());
                let bound = 1.0 / (k as f32).sqrt();
                for (kind, name, shape, init) in [
                    (ParamKind::LoraA(target, i), name("lora_A"), vec![k, r], Init::Uniform { bound }),
                    (ParamKind::LoraB(target, i), name("lora_B"), vec![r, n], Init::Zeros),
                ] {
                    let n = numel(&shape);
                    specs.push(ParamSpec { kind, name, shape, offset, init, decay: true });
                    offset = align(offset.saturating_add(n));
                }
            }
        }
        Self::indexed(specs, offset, offset)
    }

    fn indexed(specs: Vec<ParamSpec>, flat_len: u64, decay_end: u64) -> Self {
        let index = specs.iter().enumerate().map(|(i, s)| (s.kind, i)).collect();
        Self { specs, flat_len, decay_end, index }
    }

    /// Trainable parameters, without padding.
    pub fn num_parameters(&self) -> u64 {
        self.specs.iter().map(ParamSpec::numel).fold(0, u64::saturating_add)
    }

    /// The spec of one parameter. Every kind a valid config names exists.
    pub fn get(&self, kind: ParamKind) -> Option<&ParamSpec> {
        self.index.get(&kind).and_then(|&i| self.specs.get(i))
    }

    /// Element range of one parameter in the flat tensor (empty if the kind does not exist).
    pub fn range(&self, kind: ParamKind) -> std::ops::Range<u64> {
        self.get(kind).map_or(0..0, ParamSpec::range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_count_matches_the_published_figure() {
        // Tied embeddings: 12·L·d² + 13·L·d + V·d + T·d + 2·d = 124,439,808, the count Hugging
        // Face's GPT2LMHeadModel reports for gpt2.
        let cfg = ModelConfig { vocab: 50257, seq_len: 1024, d_model: 768, n_layers: 12, n_heads: 12 };
        assert_eq!(ParamLayout::new(&cfg).num_parameters(), 124_439_808);
    }

    #[test]
    fn offsets_are_aligned_and_disjoint() {
        let layout = ParamLayout::new(&ModelConfig::toy(65));
        let mut end = 0;
        for s in &layout.specs {
            assert_eq!(s.offset % PARAM_ALIGN_ELEMS, 0);
            assert!(s.offset >= end);
            end = s.offset + s.numel();
            assert_eq!(s.decay, s.offset < layout.decay_end);
        }
        assert!(end <= layout.flat_len);
    }
}
