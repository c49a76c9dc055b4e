//! Architectures as far as memory is concerned: parameter counts, the linears LoRA adapts.

use serde::{Deserialize, Serialize};

use super::EstimateError;
use super::block::{Block, Mlp, Norm, Router};
use crate::model::ModelConfig;

/// What sets a layer apart: whether it has the mixture of experts, whether it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LayerKind {
    pub experts: bool,
    pub rope: bool,
}

/// A decoder-only transformer, as far as memory is concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub name: String,
    /// V.
    pub vocab: u64,
    /// h (d_model).
    pub hidden: u64,
    /// L.
    pub layers: u64,
    /// a (query heads).
    pub heads: u64,
    /// Key/value heads: `heads` for multi-head attention, fewer for grouped-query attention
    /// (Ainslie et al. 2023).
    pub kv_heads: u64,
    /// f, the MLP's inner width (4h in GPT-2; 11008 in LLaMA-2 7B); in a mixture of experts,
    /// each expert's.
    pub ffn: u64,
    /// Rows of a learned position table (GPT-2: 1024); 0 for rotary positions.
    pub positions: u64,
    pub norm: Norm,
    pub mlp: Mlp,
    /// lm_head shares the token embedding.
    pub tied_embeddings: bool,
    /// Linear layers have biases.
    pub biases: bool,
    /// q, k and v come from one matrix (GPT-2's `c_attn`) rather than three.
    pub fused_qkv: bool,
    /// The dropout probability in training (GPT-2's recipe 0.1, LLaMA's 0). Above 0, each
    /// dropout keeps a 1-byte mask per value on CUDA (the CPU keeps a mask in the tensor's own
    /// dtype); at 0 (or in eval mode) PyTorch's dropout returns its input and keeps nothing.
    /// Older links held a yes/no here: yes reads as 0.1.
    #[serde(deserialize_with = "dropout_probability")]
    pub dropout: f64,
    /// What later families change in the block (head size, extra norms, experts, …); left out
    /// of links and JSON when it changes nothing.
    #[serde(default, skip_serializing_if = "Block::is_plain")]
    pub block: Block,
    /// A pipeline stage's share of the model (the estimator makes it from the pipeline's
    /// stages; never in links): None, the whole model.
    #[serde(skip)]
    pub stage: Option<Slice>,
}

/// A pipeline stage's share of the model: its layers (from `first_layer`, `Architecture::layers`
/// of them), whether it holds the embedding (the first stage) and the head (the last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Slice {
    pub first_layer: u64,
    pub embedding: bool,
    pub head: bool,
    /// Under the interleaved schedule, the layers of each of the stage's chunks (0: its layers
    /// are contiguous); the chunks start `stride` layers apart (p chunks of the model).
    pub chunk: u64,
    pub stride: u64,
}

impl Slice {
    /// The model's layer that is the stage's `i`-th (from 0).
    pub fn layer(&self, i: u64) -> u64 {
        match self.chunk {
            0 => self.first_layer + i,
            c => self.first_layer + (i / c) * self.stride + i % c,
        }
    }
}

// The two families the others grew from, built from their numbers: the presets and the Hugging
// Face reader start from them.

/// GPT-2 (Radford et al. 2019; HF `gpt2`, `gpt2-medium`, `gpt2-large`, `gpt2-xl`): LayerNorm,
/// GELU MLP of width 4h, learned positions (1024), tied embeddings, biases, dropout 0.1.
pub(crate) fn gpt2(name: &str, hidden: u64, layers: u64, heads: u64) -> Architecture {
    Architecture {
        name: name.to_string(),
        vocab: 50257,
        hidden,
        layers,
        heads,
        kv_heads: heads,
        ffn: 4 * hidden,
        positions: 1024,
        norm: Norm::LayerNorm,
        mlp: Mlp::Gelu,
        tied_embeddings: true,
        biases: true,
        fused_qkv: true,
        dropout: 0.1,
        block: Block::default(),
        stage: None,
    }
}

/// LLaMA-2 (Touvron et al. 2023; HF `meta-llama/Llama-2-*-hf`) and Mistral (Jiang et al. 2023;
/// `mistralai/Mistral-7B-v0.1`): RMSNorm, SwiGLU MLP, rotary positions (no position table),
/// untied lm_head, no biases, no dropout; grouped-query attention where `kv_heads < heads`.
pub(crate) fn llama(
    name: &str,
    vocab: u64,
    hidden: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    ffn: u64,
) -> Architecture {
    Architecture {
        name: name.to_string(),
        vocab,
        hidden,
        layers,
        heads,
        kv_heads,
        ffn,
        positions: 0,
        norm: Norm::RmsNorm,
        mlp: Mlp::SwiGlu,
        tied_embeddings: false,
        biases: false,
        fused_qkv: false,
        dropout: 0.0,
        block: Block::default(),
        stage: None,
    }
}

/// A dropout probability, or an older link's yes/no (yes: GPT-2's 0.1).
fn dropout_probability<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Yes(bool),
        P(f64),
    }
    Ok(match Either::deserialize(d)? {
        Either::Yes(true) => 0.1,
        Either::Yes(false) => 0.0,
        Either::P(p) => p,
    })
}

/// What a parameter tensor is, for LoRA/QLoRA (which freeze, quantize or adapt by role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Embedding,
    Norm,
    Bias,
    /// A linear layer inside a block, with its LoRA target and (in, out) features.
    Linear(Target, u64, u64),
    /// One of a mixture's expert matrices, all experts' together (expert parallelism shards them).
    Experts,
}

/// The projections LoRA can adapt, named as in the toy (`--lora-targets qkv,proj,mlp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Qkv,
    Proj,
    Mlp,
}

impl Architecture {
    /// The toy GPT-2 (`ModelConfig`) as an architecture: no dropout (the toy has none).
    pub fn from_toy(model: &ModelConfig) -> Self {
        let h = model.d_model as u64;
        Self {
            name: "oomlab toy".into(),
            vocab: model.vocab as u64,
            hidden: h,
            layers: model.n_layers as u64,
            heads: model.n_heads as u64,
            kv_heads: model.n_heads as u64,
            ffn: 4 * h,
            positions: model.seq_len as u64,
            norm: Norm::LayerNorm,
            mlp: Mlp::Gelu,
            tied_embeddings: true,
            biases: true,
            fused_qkv: true,
            dropout: 0.0,
            block: Block::default(),
            stage: None,
        }
    }

    /// The size of a head's query and key (with latent attention, its two parts together).
    pub fn head_dim(&self) -> u64 {
        match self.block.mla {
            Some(m) => m.nope_dim + m.rope_dim,
            None if self.block.head_dim > 0 => self.block.head_dim,
            None => self.hidden / self.heads.max(1),
        }
    }

    /// Width of v, and of the attention's output (the output projection's input): the
    /// key/value width and the query's but with latent attention's value heads.
    pub fn v_hidden(&self) -> u64 {
        self.block.mla.map_or(self.kv_hidden(), |m| self.heads * m.v_dim)
    }

    /// Width of the attention's output (the output projection's input).
    pub fn attention_output(&self) -> u64 {
        self.block.mla.map_or(self.q_hidden(), |m| self.heads * m.v_dim)
    }

    /// Width of q (and of the attention's output): heads · head size (h, but for Gemma's and
    /// Qwen3's head sizes).
    pub fn q_hidden(&self) -> u64 {
        self.heads * self.head_dim()
    }

    /// Width of k (and of v): kv_heads · head size.
    pub fn kv_hidden(&self) -> u64 {
        self.kv_heads * self.head_dim()
    }

    pub fn validate(&self) -> Result<(), EstimateError> {
        use super::error::Size;
        use EstimateError as E;
        let moe = self.block.moe;
        let dims = [
            (Size::Vocab, self.vocab, 1 << 24),
            (Size::Hidden, self.hidden, 1 << 18),
            (Size::Layers, self.layers, 1 << 12),
            (Size::Heads, self.heads, 1 << 12),
            (Size::KvHeads, self.kv_heads, 1 << 12),
            (Size::Ffn, self.ffn, 1 << 20),
            (Size::Experts, moe.map_or(1, |m| m.experts), 1 << 12),
            (Size::TopK, moe.map_or(1, |m| m.top_k), 1 << 12),
        ];
        for (what, value, max) in dims {
            if value == 0 || value > max {
                return Err(E::OutOfRange { what, value, max });
            }
        }
        for (what, value, max) in [
            (Size::Positions, self.positions, 1 << 24),
            (Size::HeadDim, self.block.head_dim, 1 << 14),
            (Size::RotaryDims, self.block.rotary_dims, 1 << 14),
            (Size::SharedExpertWidth, moe.map_or(0, |m| m.shared_ffn), 1 << 20),
            (Size::DenseWidth, moe.map_or(0, |m| m.dense_ffn), 1 << 20),
            (Size::DenseFirst, moe.map_or(0, |m| m.dense_first), 1 << 12),
            (Size::MixtureStep, moe.map_or(0, |m| m.every), 1 << 12),
        ] {
            if value > max {
                return Err(E::AtMost { what, value, max });
            }
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(E::Dropout { value: self.dropout });
        }
        if self.block.head_dim == 0 && self.block.mla.is_none() && !self.hidden.is_multiple_of(self.heads) {
            return Err(E::HeadsDivide { hidden: self.hidden, heads: self.heads });
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(E::KvHeadsDivide { heads: self.heads, kv_heads: self.kv_heads });
        }
        // Every parameter count is a u64 product: refuse an architecture whose blocks (a
        // mixture's experts with them) pass 2⁵⁶ parameters before any of them is multiplied out
        // (the largest allowed sizes would otherwise wrap u64).
        let (h, f, l) = (self.hidden as u128, self.ffn as u128, self.layers as u128);
        let heads = (self.heads + 2 * self.kv_heads) as u128 * self.head_dim().max(1) as u128;
        let (experts, shared) = moe.map_or((1, 0), |m| (m.experts as u128, m.shared_ffn as u128));
        let dense_f = moe.map_or(0, |m| m.dense_ffn as u128);
        let per_layer = 2 * h * heads + 3 * experts * h * f + 3 * h * (shared + dense_f) + experts * h;
        if l * per_layer + 2 * self.vocab as u128 * h > 1 << 56 {
            return Err(E::TooManyParameters { model: self.name.clone() });
        }
        if let Some(m) = moe {
            if m.top_k > m.experts {
                return Err(E::TopK { top_k: m.top_k, experts: m.experts });
            }
            if !self.mlp.gated() {
                return Err(E::ExpertsNotGated);
            }
            if self.moe_layers() == 0 {
                return Err(E::NoMixtureLayer { model: self.name.clone() });
            }
            if self.moe_layers() < self.layers && m.dense_ffn == 0 {
                return Err(E::DenseWidthMissing);
            }
        }
        Ok(())
    }

    /// A dense MLP's linear layers: (in, out) features.
    fn mlp_linears(&self, f: u64) -> Vec<(u64, u64)> {
        let h = self.hidden;
        if self.mlp.gated() { vec![(h, f), (h, f), (f, h)] } else { vec![(h, f), (f, h)] }
    }

    /// One block's linear layers outside a mixture's experts and router: (role, in features,
    /// out features), in order (a mixture's shared expert is its MLP's).
    pub(crate) fn block_linears(&self) -> Vec<(Target, u64, u64)> {
        let (h, q, kv) = (self.hidden, self.q_hidden(), self.kv_hidden());
        let mut v = match self.block.mla {
            // The query's down and up projections (or one), the key/value latent's down
            // projection (with the shared rotary key) and its up projection to every head.
            Some(m) => {
                let mut v = match m.q_rank {
                    0 => vec![(Target::Qkv, h, q)],
                    r => vec![(Target::Qkv, h, r), (Target::Qkv, r, q)],
                };
                let kv_up = self.heads * (m.nope_dim + m.v_dim);
                v.extend([(Target::Qkv, h, m.kv_rank + m.rope_dim), (Target::Qkv, m.kv_rank, kv_up)]);
                v
            }
            None if self.fused_qkv => vec![(Target::Qkv, h, q + 2 * kv)],
            None => vec![(Target::Qkv, h, q), (Target::Qkv, h, kv), (Target::Qkv, h, kv)],
        };
        v.push((Target::Proj, self.attention_output(), h));
        let f = match self.block.moe {
            None => self.ffn,
            Some(m) => m.shared_ffn,
        };
        if f > 0 {
            v.extend(self.mlp_linears(f).into_iter().map(|(k, n)| (Target::Mlp, k, n)));
        }
        v
    }

    /// Every parameter tensor: (role, elements). Counted from the architecture: embeddings, each
    /// block's norms, linear weights and biases (a mixture's router, experts and shared expert),
    /// the final norm and an untied lm_head.
    pub fn parameter_tensors(&self) -> Vec<(Role, u64)> {
        let h = self.hidden;
        let (first, last) = self.stage.map_or((true, true), |s| (s.embedding, s.head));
        let mut v = Vec::new();
        if first {
            v.push((Role::Embedding, self.vocab * h));
            if self.positions > 0 {
                v.push((Role::Embedding, self.positions * h));
            }
        }
        let kinds: Vec<(LayerKind, Vec<(Role, u64)>)> =
            self.kinds().into_iter().map(|(k, _)| (k, self.of_kind(k).block_tensors())).collect();
        for i in 0..self.layers {
            let kind = self.layer_kind(i);
            if let Some((_, block)) = kinds.iter().find(|(k, _)| *k == kind) {
                v.extend_from_slice(block);
            }
        }
        if last {
            self.norm_tensors(&mut v, h);
            for _ in 0..self.block.mtp {
                // enorm and hnorm, eh_proj (2h → h), a block like the last layer, the final norm.
                self.norm_tensors(&mut v, h);
                self.norm_tensors(&mut v, h);
                v.push((Role::Linear(Target::Proj, 2 * h, h), 2 * h * h));
                let last_kind = self.of_kind(self.layer_kind(self.layers.saturating_sub(1)));
                v.extend(last_kind.block_tensors());
                self.norm_tensors(&mut v, h);
            }
            // A tied lm_head on a last stage without the embedding keeps its own copy of the
            // embedding (Megatron-LM's, kept equal by an all-reduce).
            if !self.tied_embeddings || !first {
                v.push((Role::Embedding, self.vocab * h));
            }
        }
        v
    }

    /// A norm's parameters over `width` values: a weight, and LayerNorm's bias.
    fn norm_tensors(&self, v: &mut Vec<(Role, u64)>, width: u64) {
        v.push((Role::Norm, width));
        if self.norm == Norm::LayerNorm {
            v.push((Role::Norm, width));
        }
    }

    /// One block's parameter tensors, in the order the model runs them.
    fn block_tensors(&self) -> Vec<(Role, u64)> {
        let (h, b) = (self.hidden, &self.block);
        let mut v = Vec::new();
        let linear = |v: &mut Vec<(Role, u64)>, (target, k, n): (Target, u64, u64)| {
            v.push((Role::Linear(target, k, n), k * n));
            if self.has_bias(target) {
                v.push((Role::Bias, n));
            }
        };
        let linears = self.block_linears();
        let attention = linears.iter().take_while(|l| l.0 != Target::Mlp).count();
        if !b.post_norms {
            self.norm_tensors(&mut v, h);
        }
        // Latent attention's norms over its latents, after their down projections.
        let latent_norm = |i: usize| {
            b.mla.and_then(|m| match (m.q_rank > 0, i) {
                (true, 0) => Some(m.q_rank),
                (true, 2) | (false, 1) => Some(m.kv_rank),
                _ => None,
            })
        };
        for (i, &l) in linears.iter().enumerate().take(attention) {
            if i == attention - 1 && b.qk_norm && !b.qk_norm_weightless {
                let (q, k) = if b.qk_norm_whole {
                    (self.q_hidden(), self.kv_hidden())
                } else {
                    (self.head_dim(), self.head_dim())
                };
                self.norm_tensors(&mut v, q);
                self.norm_tensors(&mut v, k);
            }
            linear(&mut v, l);
            if let Some(width) = latent_norm(i) {
                self.norm_tensors(&mut v, width);
            }
        }
        if b.sinks {
            v.push((Role::Bias, self.heads));
        }
        // The norms between the attention and the MLP: on the attention's output, on the MLP's
        // input.
        if b.sandwich_norms || b.post_norms {
            self.norm_tensors(&mut v, h);
        }
        if !b.post_norms {
            self.norm_tensors(&mut v, h);
        }
        if let Some(m) = b.moe {
            v.push((Role::Linear(Target::Mlp, h, m.experts), h * m.experts));
            if m.biases {
                v.push((Role::Bias, m.experts));
            }
            for (k, n) in self.mlp_linears(self.ffn) {
                v.push((Role::Experts, m.experts * k * n));
            }
            if m.biases {
                // gate_up_proj_bias (E, 2f) and down_proj_bias (E, h).
                v.push((Role::Experts, m.experts * 2 * self.ffn));
                v.push((Role::Experts, m.experts * h));
            }
        }
        for &l in &linears[attention.min(linears.len())..] {
            linear(&mut v, l);
        }
        if b.moe.is_some_and(|m| m.shared_ffn > 0 && m.router == Router::Softmax) {
            // Qwen2-MoE's shared expert gate: sigmoid(x·w), one value per token.
            v.push((Role::Linear(Target::Mlp, h, 1), h));
        }
        if b.sandwich_norms || b.post_norms {
            self.norm_tensors(&mut v, h);
        }
        v
    }

    /// The exact parameter count. GPT-2 small: 12·L·h² + 13·L·h + V·h + T·h + 2h = 124,439,808
    /// (tied embeddings); LLaMA-2 7B: 6,738,415,616 (Hugging Face's counts for both).
    pub fn parameters(&self) -> u64 {
        self.parameter_tensors().iter().map(|(_, n)| n).sum()
    }

    /// The parameters one token passes through: all of them but the experts it is not routed
    /// to (Mixtral 8x7B: 46.7 B in all, 12.9 B active).
    pub fn active_parameters(&self) -> u64 {
        let idle = self.block.moe.map_or(0, |m| {
            let expert: u64 = self.mlp_linears(self.ffn).iter().map(|(k, n)| k * n).sum();
            self.moe_layers() * (m.experts - m.top_k.min(m.experts)) * expert
        });
        self.parameters() - idle
    }

    /// Whether a block's linear layer for `target` has a bias.
    fn has_bias(&self, target: Target) -> bool {
        self.biases || (self.block.qkv_bias && target == Target::Qkv)
    }

    /// One block's parameters (what ZeRO-3 gathers at a time), its experts divided over `ep`
    /// GPUs.
    /// With dense layers among the mixture's: the larger of the two.
    pub(crate) fn layer_parameters(&self, ep: u64) -> u64 {
        let one = |a: &Architecture| -> u64 {
            a.block_tensors().iter().map(|&(r, n)| if r == Role::Experts { n.div_ceil(ep.max(1)) } else { n }).sum()
        };
        one(self).max(self.dense_layer().map_or(0, |d| one(&d)))
    }
}
