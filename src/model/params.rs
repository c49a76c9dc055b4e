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

use super::ModelConfig;

/// 64 f32 = 256 bytes, wgpu's maximum `min_storage_buffer_offset_alignment`.
pub const PARAM_ALIGN_ELEMS: usize = 64;

/// How a parameter is initialised (GPT-2's scheme).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal(0, std).
    Normal {
        std: f32,
    },
    Zeros,
    Ones,
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
}

/// One parameter tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub kind: ParamKind,
    /// Hugging Face `GPT2LMHeadModel` state-dict name.
    pub name: String,
    /// Shape in Hugging Face layout (Conv1D weights are in×out).
    pub shape: Vec<usize>,
    /// First element in the flat parameter tensor.
    pub offset: usize,
    pub init: Init,
    /// Whether AdamW's weight decay applies.
    pub decay: bool,
}

impl ParamSpec {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.numel()
    }
}

/// The layout of all parameters in the flat tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamLayout {
    pub specs: Vec<ParamSpec>,
    /// Elements of the flat tensor, padding included.
    pub flat_len: usize,
    /// Weight decay applies to elements `[0, decay_end)`.
    pub decay_end: usize,
}

fn align(n: usize) -> usize {
    n.div_ceil(PARAM_ALIGN_ELEMS) * PARAM_ALIGN_ELEMS
}

impl ParamLayout {
    pub fn new(cfg: &ModelConfig) -> Self {
        let (v, t, c, l) = (cfg.vocab, cfg.seq_len, cfg.d_model, cfg.n_layers);
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
        let mut push = |list: Vec<(ParamKind, String, Vec<usize>, Init)>, decay: bool, offset: &mut usize| {
            for (kind, name, shape, init) in list {
                let numel: usize = shape.iter().product();
                specs.push(ParamSpec { kind, name, shape, offset: *offset, init, decay });
                *offset = align(*offset + numel);
            }
        };
        push(matrices, true, &mut offset);
        let decay_end = offset;
        push(vectors, false, &mut offset);
        Self { specs, flat_len: offset, decay_end }
    }

    /// Trainable parameters, without padding.
    pub fn num_parameters(&self) -> usize {
        self.specs.iter().map(ParamSpec::numel).sum()
    }

    /// The spec of one parameter. Every kind a valid config names exists.
    pub fn get(&self, kind: ParamKind) -> Option<&ParamSpec> {
        self.specs.iter().find(|s| s.kind == kind)
    }

    /// Element range of one parameter in the flat tensor (empty if the kind does not exist).
    pub fn range(&self, kind: ParamKind) -> std::ops::Range<usize> {
        self.get(kind).map_or(0..0, ParamSpec::range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_count_matches_the_published_figure() {
        // GUIDE §4: 12·L·d² + 13·L·d + V·d + T·d + 2·d = 124,439,808.
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
