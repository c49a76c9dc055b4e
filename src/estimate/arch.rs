//! Architectures as far as memory is concerned: parameter counts, the linears LoRA adapts.

use serde::{Deserialize, Serialize};

use super::EstimateError;
use crate::model::ModelConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// Weight and bias; saves its input and two fp32 statistics per row (mean, 1/std).
    LayerNorm,
    /// Weight only (Zhang & Sennrich 2019); saves its input and one fp32 statistic per row.
    RmsNorm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// `W₂·gelu(W₁x)`, two matrices.
    Gelu,
    /// `W_down·(silu(W_gate x) ⊙ W_up x)` (Shazeer 2020), three matrices.
    SwiGlu,
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
    /// f, the MLP's inner width (4h in GPT-2; 11008 in LLaMA-2 7B).
    pub ffn: u64,
    /// Rows of a learned position table (GPT-2: 1024); 0 for rotary positions.
    pub positions: u64,
    pub norm: Norm,
    pub mlp: Mlp,
    /// lm_head shares the token embedding.
    pub tied_embeddings: bool,
    /// Linear layers have biases.
    pub biases: bool,
    /// Only q, k and v have biases (Qwen2's attention); with `biases`, every linear has them.
    #[serde(default)]
    pub qkv_bias: bool,
    /// q, k and v come from one matrix (GPT-2's `c_attn`) rather than three.
    pub fused_qkv: bool,
    /// The dropout probability in training (GPT-2's recipe 0.1, LLaMA's 0). Above 0, each
    /// dropout keeps a 1-byte mask per value on CUDA (the CPU keeps a mask in the tensor's own
    /// dtype); at 0 (or in eval mode) PyTorch's dropout returns its input and keeps nothing.
    /// Older links held a yes/no here: yes reads as 0.1.
    #[serde(deserialize_with = "dropout_probability")]
    pub dropout: f64,
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
            qkv_bias: false,
            fused_qkv: true,
            dropout: 0.0,
        }
    }

    pub fn head_dim(&self) -> u64 {
        self.hidden / self.heads.max(1)
    }

    /// Width of k (and of v): kv_heads · head size.
    pub fn kv_hidden(&self) -> u64 {
        self.kv_heads * self.head_dim()
    }

    pub fn validate(&self) -> Result<(), EstimateError> {
        let dims = [
            ("vocab", self.vocab, 1 << 24),
            ("hidden", self.hidden, 1 << 18),
            ("layers", self.layers, 1 << 12),
            ("heads", self.heads, 1 << 12),
            ("kv_heads", self.kv_heads, 1 << 12),
            ("ffn", self.ffn, 1 << 20),
        ];
        for (name, value, max) in dims {
            if value == 0 || value > max {
                return Err(EstimateError::Invalid(format!("{name} must be between 1 and {max} (got {value})")));
            }
        }
        if self.positions > 1 << 24 {
            return Err(EstimateError::Invalid(format!(
                "positions must be at most {} (got {})",
                1 << 24,
                self.positions
            )));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(EstimateError::Invalid(format!(
                "dropout is a probability from 0 up to (not including) 1 (got {})",
                self.dropout
            )));
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(EstimateError::Invalid(format!(
                "hidden ({}) must be divisible by heads ({})",
                self.hidden, self.heads
            )));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(EstimateError::Invalid(format!(
                "heads ({}) must be a multiple of kv_heads ({}) for grouped-query attention",
                self.heads, self.kv_heads
            )));
        }
        Ok(())
    }

    /// One block's linear layers: (role, in features, out features), in order.
    pub(crate) fn block_linears(&self) -> Vec<(Target, u64, u64)> {
        let (h, kv, f) = (self.hidden, self.kv_hidden(), self.ffn);
        let mut v = if self.fused_qkv {
            vec![(Target::Qkv, h, h + 2 * kv)]
        } else {
            vec![(Target::Qkv, h, h), (Target::Qkv, h, kv), (Target::Qkv, h, kv)]
        };
        v.push((Target::Proj, h, h));
        match self.mlp {
            Mlp::Gelu => v.extend([(Target::Mlp, h, f), (Target::Mlp, f, h)]),
            Mlp::SwiGlu => v.extend([(Target::Mlp, h, f), (Target::Mlp, h, f), (Target::Mlp, f, h)]),
        }
        v
    }

    /// Every parameter tensor: (role, elements). Counted from the architecture: embeddings, each
    /// block's norms, linear weights and biases, the final norm and an untied lm_head.
    pub fn parameter_tensors(&self) -> Vec<(Role, u64)> {
        let h = self.hidden;
        let norm = |v: &mut Vec<(Role, u64)>| {
            v.push((Role::Norm, h));
            if self.norm == Norm::LayerNorm {
                v.push((Role::Norm, h));
            }
        };
        let mut v = vec![(Role::Embedding, self.vocab * h)];
        if self.positions > 0 {
            v.push((Role::Embedding, self.positions * h));
        }
        for _ in 0..self.layers {
            norm(&mut v);
            for (i, (target, k, n)) in self.block_linears().into_iter().enumerate() {
                if i == if self.fused_qkv { 1 } else { 3 } {
                    norm(&mut v); // the second norm sits between attention and the MLP
                }
                v.push((Role::Linear(target, k, n), k * n));
                if self.has_bias(target) {
                    v.push((Role::Bias, n));
                }
            }
        }
        norm(&mut v);
        if !self.tied_embeddings {
            v.push((Role::Embedding, self.vocab * h));
        }
        v
    }

    /// The exact parameter count. GPT-2 small: 12·L·h² + 13·L·h + V·h + T·h + 2h = 124,439,808
    /// (tied embeddings); LLaMA-2 7B: 6,738,415,616 (Hugging Face's counts for both).
    pub fn parameters(&self) -> u64 {
        self.parameter_tensors().iter().map(|(_, n)| n).sum()
    }

    /// Whether a block's linear layer for `target` has a bias.
    fn has_bias(&self, target: Target) -> bool {
        self.biases || (self.qkv_bias && target == Target::Qkv)
    }

    /// One block's parameters (what ZeRO-3 gathers at a time).
    pub(crate) fn layer_parameters(&self) -> u64 {
        let norms = if self.norm == Norm::LayerNorm { 4 } else { 2 } * self.hidden;
        let linears: u64 =
            self.block_linears().iter().map(|(t, k, n)| k * n + if self.has_bias(*t) { *n } else { 0 }).sum();
        norms + linears
    }
}
