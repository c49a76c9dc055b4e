//! Architectures as far as memory is concerned: parameter counts, the linears LoRA adapts.

use serde::{Deserialize, Serialize};

use super::EstimateError;
use super::layers::LayerKind;
use crate::model::ModelConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// Weight and bias; saves its input and two fp32 statistics per row (mean, 1/std).
    LayerNorm,
    /// Weight only (Zhang & Sennrich 2019); saves its input and one fp32 statistic per row.
    RmsNorm,
    /// Gemma's RMSNorm: scales by (1 + weight) and keeps the normalised input in fp32 until the
    /// scaling (`GemmaRMSNorm`); the same parameters as RMSNorm.
    GemmaRmsNorm,
    /// OLMo 2's RMSNorm: the weight multiplies the normalised input in fp32, then the result is
    /// cast back (`Olmo2RMSNorm`), so the normalised input is kept in fp32; RMSNorm's parameters.
    Fp32RmsNorm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// `W₂·gelu(W₁x)`, two matrices.
    Gelu,
    /// `W_down·(silu(W_gate x) ⊙ W_up x)` (Shazeer 2020), three matrices.
    SwiGlu,
    /// `W_down·(gelu(W_gate x) ⊙ W_up x)` (Shazeer 2020; Gemma), three matrices.
    GeGlu,
    /// `W₂·gelu(W₁x)` with PyTorch's own GELU, one op that keeps only its input (GPT-NeoX's
    /// `gelu`); [`Mlp::Gelu`] is GPT-2's `gelu_new`, a chain of element-wise ops.
    TorchGelu,
    /// gpt-oss's SwiGLU: gate and up clamped, `(up + 1) · gate · σ(α·gate)`; three matrices'
    /// parameters (gate and up in one), more element-wise tensors kept than SwiGLU's.
    ClampedSwiGlu,
}

impl Mlp {
    /// A gated MLP: three matrices, the first two of width f.
    pub fn gated(self) -> bool {
        matches!(self, Mlp::SwiGlu | Mlp::GeGlu | Mlp::ClampedSwiGlu)
    }
}

/// A mixture of experts in place of each block's MLP (Shazeer et al. 2017; Fedus et al. 2021):
/// a router picks `top_k` of `experts` MLPs (each of the architecture's `ffn` width) per token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    pub experts: u64,
    /// k, the experts each token is sent to.
    pub top_k: u64,
    /// The width of a shared expert every token goes through (Qwen2-MoE's, with its sigmoid
    /// gate; DeepSeek-V3's and GLM-4.5's, ungated); 0 for none.
    #[serde(default)]
    pub shared_ffn: u64,
    /// The router renormalises its top-k weights to sum to 1 (Mixtral; Qwen's `norm_topk_prob`).
    #[serde(default)]
    pub renormalise: bool,
    /// How the router scores the experts.
    #[serde(default, skip_serializing_if = "Router::is_softmax")]
    pub router: Router,
    /// The first layers keep a dense MLP instead (DeepSeek-V3's `first_k_dense_replace`: 3).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dense_first: u64,
    /// Only every n-th layer has the mixture, the others a dense MLP (Llama 4's
    /// `interleave_moe_layer_step`); 0 or 1: every layer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub every: u64,
    /// The dense layers' MLP width (when some layers are dense).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dense_ffn: u64,
    /// The router and the experts have biases (gpt-oss).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub biases: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a mixture's router scores the experts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Router {
    /// A linear layer in the model's dtype, then a softmax in fp32 (Mixtral, Qwen).
    #[default]
    Softmax,
    /// DeepSeek-V3's (and GLM-4.5's): the linear in fp32 (the input and the weight cast up),
    /// a sigmoid, a bias that only picks, groups of experts (`n_group`); shared experts ungated.
    Sigmoid,
    /// gpt-oss's: the top k of the logits, then a softmax over those k alone, in the
    /// activations' dtype.
    TopKSoftmax,
    /// Llama 4's: the top k of the logits, a sigmoid of the scores in fp32, and (transformers'
    /// eager code) every expert runs every token, weighted 0 where not picked.
    AllExperts,
}

impl Router {
    fn is_softmax(&self) -> bool {
        *self == Router::Softmax
    }
}

impl Moe {
    /// Whether layer `i` (from 0) has the mixture rather than a dense MLP.
    pub fn at_layer(&self, i: u64) -> bool {
        i >= self.dense_first && (i + 1).is_multiple_of(self.every.max(1))
    }
}

/// DeepSeek-V3's multi-head latent attention (DeepSeek-AI 2024): the query through a low-rank
/// latent of `q_rank` (0: one projection), keys and values from one latent of `kv_rank` shared by
/// every head, each head's query and key a part without positions (`nope_dim`) and a rotary part
/// (`rope_dim`, its key shared by the heads); values of `v_dim`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mla {
    pub q_rank: u64,
    pub kv_rank: u64,
    pub nope_dim: u64,
    pub rope_dim: u64,
    pub v_dim: u64,
}

/// What later families change in the GPT-2/LLaMA block; all off by default, so older links read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Block {
    /// Only q, k and v have biases (Qwen2's attention); with `biases`, every linear has them.
    pub qkv_bias: bool,
    /// The size of a head when it is not hidden / heads (Gemma: 256, Qwen3: 128); 0: hidden / heads.
    pub head_dim: u64,
    /// A norm over each head's query and key (Qwen3, Gemma 3), of the architecture's kind.
    pub qk_norm: bool,
    /// With `qk_norm`: one norm over the query's whole width and one over the key's (OLMo 2),
    /// not one per head.
    pub qk_norm_whole: bool,
    /// Norms on the attention's and the MLP's outputs too, four per block (Gemma 2 and 3).
    pub sandwich_norms: bool,
    /// Norms on the attention's and the MLP's outputs only, none on their inputs (OLMo 2):
    /// x + norm(attn(x)), then that + norm(mlp(that)).
    pub post_norms: bool,
    /// Attention and MLP both read the block's input: x + attn(ln₁ x) + mlp(ln₂ x) (GPT-J,
    /// GPT-NeoX/Pythia).
    pub parallel_residual: bool,
    /// The rotated dimensions of each head when not all (GPT-NeoX's `rotary_pct`); 0: all.
    pub rotary_dims: u64,
    /// Gemma 2's tanh soft-capping of the attention scores and of the final logits.
    pub softcap: bool,
    /// The rotary cos/sin tables stay fp32 whatever the precision (OLMo 2's rotary embedding
    /// does not cast them).
    pub fp32_rope: bool,
    /// Attention sinks (gpt-oss): a learned logit per head joins each row of scores, and the
    /// softmax runs over s + 1 columns in the activations' dtype.
    pub sinks: bool,
    /// The attention softmax runs in the activations' dtype (Llama 4), not in fp32 as LLaMA's.
    pub low_precision_softmax: bool,
    /// Every n-th layer has no RoPE (Llama 4's `no_rope_layer_interval`: 4); 0: every layer
    /// rotates; 1: none does (a layer kind's own architecture, [`Architecture::of_kind`]).
    pub nope_every: u64,
    /// The query and key norms have no weight (Llama 4's L2 norm) and sit only in the layers
    /// with RoPE.
    pub qk_norm_weightless: bool,
    /// The layers without RoPE scale their queries by a temperature that grows with the
    /// position (Llama 4's `attn_temperature_tuning`), keeping the scales for the backward.
    pub nope_temperature: bool,
    /// A mixture of experts in place of the MLP.
    pub moe: Option<Moe>,
    /// Multi-token prediction (DeepSeek-V3, Liu et al. 2024, §2.2): this many extra modules after
    /// the last layer, each an embedding and a hidden-state norm, a 2h → h projection, one block
    /// like the last layer, a final norm, and its own logits and loss (the embedding and the
    /// head shared with the model). Not part of transformers' model: counted only when asked.
    #[serde(skip_serializing_if = "is_zero")]
    pub mtp: u64,
    /// Multi-head latent attention in place of q, k and v projections (DeepSeek-V3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
}

impl Block {
    /// GPT-2's and LLaMA's block: nothing changed.
    pub fn is_plain(&self) -> bool {
        *self == Block::default()
    }
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
    pub stage: Option<super::pipeline::Slice>,
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
