//! What later families change in a transformer block, as far as memory is concerned: the norm,
//! the MLP and its mixture of experts, the router, latent attention.

use serde::{Deserialize, Serialize};

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
