//! The ops of a step: what each reads and writes, its name, its floating-point operations.

use serde::{Deserialize, Serialize};

use super::View;
use crate::model::{ModelConfig, StepShape};

/// Which part of the step an op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Forward,
    Backward,
    Optimizer,
}

/// One op of the step. Shapes use B (batch), T (sequence), C (d_model), NH (heads), V (vocab).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Zero a tensor (gradients are accumulated with `+=`).
    Zero {
        dst: View,
    },
    /// out (B,T,C) = wte[tokens] + wpe[t].
    Embedding {
        tokens: View,
        wte: View,
        wpe: View,
        out: View,
    },
    /// dwte[v] += Σ_{positions p with token v} dout[p]; dwpe[t] += Σ_b dout[b,t].
    /// `token_offsets` (V+1) and `token_positions` (B·T) index the positions of each token
    /// (built with the batch), so the GPU's scatter-add is a deterministic gather even when
    /// tokens repeat; the CPU twin reads `tokens` directly.
    EmbeddingBackward {
        tokens: View,
        token_offsets: View,
        token_positions: View,
        dout: View,
        dwte: View,
        dwpe: View,
    },
    /// out (rows,C) = (inp − mean)·rstd·weight + bias; saves mean, rstd (rows).
    LayerNorm {
        inp: View,
        weight: View,
        bias: View,
        out: View,
        mean: View,
        rstd: View,
    },
    /// dinp (+)= …, dweight += …, dbias += …; `accumulate` says whether dinp is added to.
    /// Frozen parameters (LoRA) have no gradients: `dweight` and `dbias` are both None.
    LayerNormBackward {
        inp: View,
        weight: View,
        mean: View,
        rstd: View,
        dout: View,
        dinp: View,
        dweight: Option<View>,
        dbias: Option<View>,
        accumulate: bool,
    },
    /// out (rows,n) = inp (rows,k) · W + bias, with W (k,n) (Conv1D layout) or, when
    /// `weight_transposed`, W (n,k) (the tied lm_head).
    Matmul {
        inp: View,
        weight: View,
        bias: Option<View>,
        out: View,
        rows: u64,
        k: u64,
        n: u64,
        weight_transposed: bool,
    },
    /// dinp (+)= dout·Wᵀ; dweight += inpᵀ·dout; dbias += Σ_rows dout. A frozen weight (LoRA)
    /// has no `dweight`, and then `inp` is not read; `accumulate` adds to dinp (the LoRA
    /// branch's input gradient is already there).
    MatmulBackward {
        inp: View,
        weight: View,
        dout: View,
        dinp: View,
        dweight: Option<View>,
        dbias: Option<View>,
        rows: u64,
        k: u64,
        n: u64,
        weight_transposed: bool,
        accumulate: bool,
    },
    /// out (rows,n) += alpha · inp (rows,k) · W (k,n): LoRA's up-projection (alpha = α/r).
    MatmulAdd {
        inp: View,
        weight: View,
        out: View,
        rows: u64,
        k: u64,
        n: u64,
        alpha: f64,
    },
    /// dinp = alpha·dout·Wᵀ; dweight += alpha·inpᵀ·dout.
    MatmulAddBackward {
        inp: View,
        weight: View,
        dout: View,
        dinp: View,
        dweight: View,
        rows: u64,
        k: u64,
        n: u64,
        alpha: f64,
    },
    /// Causal self-attention on qkv (B,T,3C): att (B,NH,T,T) = softmax(QKᵀ/√hs) saved for
    /// backward; out (B,T,C) = att·V.
    Attention {
        qkv: View,
        att: View,
        out: View,
    },
    /// dqkv = ∂/∂qkv given dout; `datt` (B,NH,T,T) is scratch.
    AttentionBackward {
        qkv: View,
        att: View,
        dout: View,
        datt: View,
        dqkv: View,
    },
    /// Fused (FlashAttention-style) causal self-attention: out (B,T,C) by tiles of K and V with
    /// an online softmax; saves only lse (B,NH,T), the logsumexp of each row of scores.
    FlashAttention {
        qkv: View,
        out: View,
        lse: View,
    },
    /// dqkv given dout, recomputing the scores from q, k and lse; `delta` (B,NH,T) is scratch
    /// for rowsum(dout∘out).
    FlashAttentionBackward {
        qkv: View,
        out: View,
        lse: View,
        dout: View,
        delta: View,
        dqkv: View,
    },
    /// out = GELU_tanh(inp).
    Gelu {
        inp: View,
        out: View,
    },
    GeluBackward {
        inp: View,
        dout: View,
        dinp: View,
    },
    /// out = a + b.
    Residual {
        a: View,
        b: View,
        out: View,
    },
    /// da = dout. (The other input's gradient is `dout` itself: no copy is made.)
    ResidualBackward {
        dout: View,
        da: View,
    },
    /// probs (rows,V) = softmax(logits); losses (rows) = −log probs[target]; loss (1) = mean.
    CrossEntropy {
        logits: View,
        targets: View,
        probs: View,
        losses: View,
        loss: View,
    },
    /// dlogits = (probs − onehot(target)) · scale; scale is 1/rows of the effective batch.
    CrossEntropyBackward {
        probs: View,
        targets: View,
        dlogits: View,
        scale: f64,
    },
    /// found_inf[0] = 1 if any gradient is inf or NaN (left unchanged otherwise): fp16's
    /// overflow check before the optimizer (`GradScaler.unscale_`).
    CheckFinite {
        grads: View,
        found_inf: View,
    },
    /// AdamW over the flat parameters. With mixed precision `params` are the fp32 master
    /// weights, the gradients are unscaled by the loss scale, the step is skipped when
    /// `found_inf` is set, and the updated weights are also written, rounded, to `copy` (the
    /// 16-bit working copy the forward pass reads).
    AdamW {
        params: View,
        grads: View,
        m: View,
        v: View,
        copy: Option<View>,
        found_inf: Option<View>,
    },
    /// SGD, with momentum when `momentum` is present; mixed precision as for AdamW.
    Sgd {
        params: View,
        grads: View,
        momentum: Option<View>,
        copy: Option<View>,
        found_inf: Option<View>,
    },
}

impl Op {
    /// The views this op reads (accumulated outputs count as read) and the views it writes.
    pub fn reads_writes(&self) -> (Vec<View>, Vec<View>) {
        match *self {
            Op::Zero { dst } => (vec![], vec![dst]),
            Op::Embedding { tokens, wte, wpe, out } => (vec![tokens, wte, wpe], vec![out]),
            Op::EmbeddingBackward { tokens, token_offsets, token_positions, dout, dwte, dwpe } => {
                (vec![tokens, token_offsets, token_positions, dout, dwte, dwpe], vec![dwte, dwpe])
            }
            Op::LayerNorm { inp, weight, bias, out, mean, rstd } => (vec![inp, weight, bias], vec![out, mean, rstd]),
            Op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } => {
                let grads: Vec<View> = dweight.into_iter().chain(dbias).collect();
                let mut reads = vec![inp, weight, mean, rstd, dout];
                reads.extend(&grads);
                if accumulate {
                    reads.push(dinp);
                }
                (reads, std::iter::once(dinp).chain(grads).collect())
            }
            Op::Matmul { inp, weight, bias, out, .. } => {
                (std::iter::once(inp).chain([weight]).chain(bias).collect(), vec![out])
            }
            Op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, accumulate, .. } => {
                let grads: Vec<View> = dweight.into_iter().chain(dbias).collect();
                let mut reads = vec![weight, dout];
                if dweight.is_some() {
                    reads.push(inp);
                }
                reads.extend(&grads);
                if accumulate {
                    reads.push(dinp);
                }
                (reads, std::iter::once(dinp).chain(grads).collect())
            }
            Op::MatmulAdd { inp, weight, out, .. } => (vec![inp, weight, out], vec![out]),
            Op::MatmulAddBackward { inp, weight, dout, dinp, dweight, .. } => {
                (vec![inp, weight, dout, dweight], vec![dinp, dweight])
            }
            Op::Attention { qkv, att, out } => (vec![qkv], vec![att, out]),
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => (vec![qkv, att, dout], vec![datt, dqkv]),
            Op::FlashAttention { qkv, out, lse } => (vec![qkv], vec![out, lse]),
            Op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv } => {
                (vec![qkv, out, lse, dout], vec![delta, dqkv])
            }
            Op::Gelu { inp, out } => (vec![inp], vec![out]),
            Op::GeluBackward { inp, dout, dinp } => (vec![inp, dout], vec![dinp]),
            Op::Residual { a, b, out } => (vec![a, b], vec![out]),
            Op::ResidualBackward { dout, da } => (vec![dout], vec![da]),
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                (vec![logits, targets], vec![probs, losses, loss])
            }
            Op::CrossEntropyBackward { probs, targets, dlogits, .. } => (vec![probs, targets], vec![dlogits]),
            Op::CheckFinite { grads, found_inf } => (vec![grads, found_inf], vec![found_inf]),
            Op::AdamW { params, grads, m, v, copy, found_inf } => (
                [params, grads, m, v].into_iter().chain(found_inf).collect(),
                [params, m, v].into_iter().chain(copy).collect(),
            ),
            Op::Sgd { params, grads, momentum, copy, found_inf } => (
                [params, grads].into_iter().chain(momentum).chain(found_inf).collect(),
                std::iter::once(params).chain(momentum).chain(copy).collect(),
            ),
        }
    }

    /// A short name for timelines and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Zero { .. } => "zero",
            Op::Embedding { .. } => "embedding",
            Op::EmbeddingBackward { .. } => "embedding_backward",
            Op::LayerNorm { .. } => "layernorm",
            Op::LayerNormBackward { .. } => "layernorm_backward",
            Op::Matmul { .. } => "matmul",
            Op::MatmulBackward { .. } => "matmul_backward",
            Op::MatmulAdd { .. } => "matmul_add",
            Op::MatmulAddBackward { .. } => "matmul_add_backward",
            Op::Attention { .. } => "attention",
            Op::AttentionBackward { .. } => "attention_backward",
            Op::FlashAttention { .. } => "flash_attention",
            Op::FlashAttentionBackward { .. } => "flash_attention_backward",
            Op::Gelu { .. } => "gelu",
            Op::GeluBackward { .. } => "gelu_backward",
            Op::Residual { .. } => "residual",
            Op::ResidualBackward { .. } => "residual_backward",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::CrossEntropyBackward { .. } => "cross_entropy_backward",
            Op::CheckFinite { .. } => "check_finite",
            Op::AdamW { .. } => "adamw",
            Op::Sgd { .. } => "sgd",
        }
    }

    /// Floating-point operations, multiply-adds counted as 2. Attention products are counted
    /// dense (T² per head, as the standard path's GEMMs compute them); elementwise ops by a
    /// small per-element constant. Estimates for reporting, not measurements.
    pub fn flops(&self, model: &ModelConfig, shape: StepShape) -> u64 {
        // Saturating: a count beyond u64 (absurd configs) shows as u64::MAX, never wraps.
        let mul = |xs: &[u64]| xs.iter().fold(1u64, |a, &x| a.saturating_mul(x));
        let (b, t) = (shape.batch as u64, shape.seq as u64);
        let (nh, hs) = (model.n_heads as u64, model.head_size() as u64);
        let scores = mul(&[b, nh, t, t]);
        let len = |v: &View| v.len;
        // A GEMM's 2·r·k·n, plus r·n for a bias or an accumulated output.
        let gemm = |products: u64, r: u64, k: u64, n: u64, extra: bool| {
            mul(&[2, products, r, k, n]).saturating_add(if extra { mul(&[r, n]) } else { 0 })
        };
        match self {
            Op::Zero { .. } => 0,
            Op::Embedding { out, .. } => len(out),
            Op::EmbeddingBackward { dout, .. } => len(dout),
            Op::LayerNorm { out, .. } => mul(&[8, len(out)]),
            Op::LayerNormBackward { dout, .. } => mul(&[14, len(dout)]),
            Op::Matmul { rows, k, n, bias, .. } => gemm(1, *rows, *k, *n, bias.is_some()),
            Op::MatmulBackward { rows, k, n, dbias, dweight, .. } => {
                gemm(if dweight.is_some() { 2 } else { 1 }, *rows, *k, *n, dbias.is_some())
            }
            Op::MatmulAdd { rows, k, n, .. } => gemm(1, *rows, *k, *n, true),
            Op::MatmulAddBackward { rows, k, n, .. } => gemm(2, *rows, *k, *n, true),
            // QKᵀ and P·V (2·hs each per score) and the softmax (~5 per score).
            Op::Attention { .. } => mul(&[scores, 4 * hs + 5]),
            // dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q and the softmax backward.
            Op::AttentionBackward { .. } => mul(&[scores, 8 * hs + 4]),
            Op::FlashAttention { .. } => mul(&[scores, 4 * hs + 5]),
            // The scores recomputed (2·hs) on top of the standard backward.
            Op::FlashAttentionBackward { .. } => mul(&[scores, 10 * hs + 9]),
            Op::Gelu { out, .. } => mul(&[10, len(out)]),
            Op::GeluBackward { dinp, .. } => mul(&[14, len(dinp)]),
            Op::Residual { out, .. } => len(out),
            Op::ResidualBackward { .. } => 0,
            Op::CrossEntropy { logits, .. } => mul(&[4, len(logits)]),
            Op::CrossEntropyBackward { dlogits, .. } => mul(&[2, len(dlogits)]),
            Op::CheckFinite { grads, .. } => len(grads),
            Op::AdamW { params, .. } => mul(&[12, len(params)]),
            Op::Sgd { params, .. } => mul(&[4, len(params)]),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpNode {
    pub op: Op,
    pub phase: Phase,
    /// Human-readable label, e.g. "h.0.attn.c_attn".
    pub label: String,
    /// A forward op run again during the backward pass (activation checkpointing).
    pub recompute: bool,
}
