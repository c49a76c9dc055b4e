//! Saved activations tensor by tensor (Korthikanti et al. generalised), the logits and the
//! backward pass's working sets.

use super::states::words;
use super::{Checkpoint, Mlp, Norm, Setup, Target};
use crate::plan::AttentionKind;

/// Saved activations: their peak over the step, and at the moments the peak can be.
///
/// Per layer, tensor by tensor (Korthikanti et al. 2022, §4.1, generalised). With p the bytes of
/// an activation value (2 in 16-bit training), `kv` the key/value width, `f` the MLP width:
/// - attention block: the layer input (LayerNorm-1's input, p·sbh) and its statistics (fp32,
///   2 per row for LayerNorm, 1 for RMSNorm); LayerNorm-1's output, the qkv projection's input
///   (p·sbh, kept only if that projection is trained or adapted); q, k, v (p·sb(h + 2kv));
///   the softmax output (p·as²b), with dropout its mask (as²b) and the dropped probabilities
///   (p·as²b) — Korthikanti's 5as²b; the attention output (p·sbh, input of the output
///   projection); with dropout the residual dropout mask (sbh);
/// - MLP block: LayerNorm-2's input (the first residual sum, p·sbh) and statistics, its output
///   (p·sbh, if the MLP is trained or adapted); GELU: its input and output (2·p·sbf; the output
///   only if the second matrix is trained); SwiGLU: the gate and up outputs and silu(gate)
///   (3·p·sbf) and their product (p·sbf, if the down projection is trained); the residual
///   dropout mask (sbh).
///
/// With GPT-2's h, f = 4h, p = 2 and dropout this is `sbh(34 + 5as/h)` plus the statistics
/// Korthikanti leave out (8sb per LayerNorm). Tensor parallelism divides the tensors between
/// the column- and row-parallel linears by t; sequence parallelism the rest too.
/// Fused attention (Dao 2022) keeps the row logsumexp (fp32, a·s·b) instead of the 5as²b.
/// LoRA adapters keep their rank-r intermediate (p·rsb each).
/// Saved activations at three moments of the step.
pub(super) struct Acts {
    /// The most alive at any moment.
    pub(super) peak: u128,
    /// At the end of the forward pass (the loss).
    pub(super) end_of_forward: u128,
    /// When a layer's attention backward runs (its largest gradient working set), at the layer
    /// where that is most; with checkpointing every k blocks, a segment's recomputation (the
    /// gradient buffers are already allocated then).
    pub(super) at_attention_backward: u128,
    /// When the last layer's MLP activation backward runs (its block still saved but for the
    /// down projection's input, the tensors outside the blocks freed).
    pub(super) at_mlp_backward: u128,
    /// Checkpointing every k blocks: the end of an earlier segment's recomputation, when every
    /// gradient buffer exists (0 without one).
    pub(super) earlier_recompute: u128,
}

/// The step's sizes, in u128 so that no product overflows, and how a tensor splits over the
/// tensor-parallel GPUs.
pub(super) struct Sizes {
    /// s, h, a (heads), the key/value width, f, t.
    pub(super) sq: u128,
    pub(super) h: u128,
    pub(super) heads: u128,
    pub(super) kv: u128,
    pub(super) f: u128,
    pub(super) t: u128,
    /// t with sequence parallelism, else 1: the LayerNorm/dropout region's split.
    pub(super) sp: u128,
    /// Bytes of an activation value.
    pub(super) p: u128,
    /// s·b, the rows.
    pub(super) sb: u128,
}

impl Sizes {
    fn new(s: &Setup) -> Self {
        let a = &s.arch;
        let (sq, b) = (s.seq as u128, s.micro_batch as u128);
        let t = s.parallel.tensor as u128;
        Self {
            sq,
            h: a.hidden as u128,
            heads: a.heads as u128,
            kv: a.kv_hidden() as u128,
            f: a.ffn as u128,
            t,
            sp: if s.parallel.sequence { t } else { 1 },
            p: s.precision.value_bytes() as u128,
            sb: sq * b,
        }
    }
    /// n values of `bytes` each in the tensor-parallel region (split by t).
    fn tp(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.t), bytes)
    }
    /// n values of `bytes` each in the LayerNorm/dropout region (split by t only with sequence
    /// parallelism).
    fn rep(&self, n: u128, bytes: u128) -> u128 {
        words(n.div_ceil(self.sp), bytes)
    }
}

pub(super) fn activations(s: &Setup) -> Acts {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, heads, kv, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let stats = if a.norm == Norm::LayerNorm { 2 } else { 1 };
    let norm_stats = stats * rep(sb, 4);
    let lora = s.lora;
    let trained = |target: Target| lora.is_none_or(|l| l.targets(target));
    let fused = s.attention == AttentionKind::Fused;
    let if_ = |c: bool, v: u128| if c { v } else { 0 };
    let drop = a.dropout;

    let input = rep(sb * h, p);
    let qkv = if a.fused_qkv { tp(sb * (h + 2 * kv), p) } else { tp(sb * h, p) + 2 * tp(sb * kv, p) };
    let pre_att = input + norm_stats + if_(trained(Target::Qkv), rep(sb * h, p)) + qkv;
    let att = if fused {
        tp(heads * sb, 4)
    } else {
        let probs = heads * sq * sb;
        tp(probs, p) + if_(drop, tp(probs, 1) + tp(probs, p))
    };
    let mlp_acts = match a.mlp {
        Mlp::Gelu => tp(sb * f, p) + if_(trained(Target::Mlp), tp(sb * f, p)),
        Mlp::SwiGlu => 3 * tp(sb * f, p) + if_(trained(Target::Mlp), tp(sb * f, p)),
    };
    let post_att = if_(trained(Target::Proj) || fused, tp(sb * h, p))
        + if_(drop, rep(sb * h, 1))
        + rep(sb * h, p)
        + norm_stats
        + if_(trained(Target::Mlp), rep(sb * h, p))
        + mlp_acts
        + if_(drop, rep(sb * h, 1));
    // Each adapter keeps x·A (r values per row).
    let adapter = |target: Target| {
        lora.filter(|l| l.targets(target)).map_or(0, |l| {
            let per_linear = words(sb * l.rank as u128, p);
            a.block_linears().iter().filter(|(tg, _, _)| *tg == target).count() as u128 * per_linear
        })
    };
    let adapters_after_att = adapter(Target::Proj) + adapter(Target::Mlp);
    let adapters = adapter(Target::Qkv) + adapters_after_att;
    let block = pre_att + att + post_att + adapters;
    // Outside the blocks: the embedding dropout mask, the last block's output (the final norm's
    // input) and statistics, and the final norm's output (the lm_head's input, if trained).
    let outside = if_(drop, rep(sb * h, 1)) + input + norm_stats + if_(lora.is_none(), rep(sb * h, p));
    let l = a.layers as u128;
    let checkpoint = if fused && s.checkpoint == Checkpoint::Selective { Checkpoint::Off } else { s.checkpoint };
    // The last layer's post-attention tensors and the outside ones are freed by the time the
    // backward pass reaches that layer's attention.
    let after_att = post_att + adapters_after_att;
    // When the last layer's MLP activation backward runs, its down projection's input (GELU's
    // output, SwiGLU's product; saved only if that projection trains) is freed.
    let down_input = if_(trained(Target::Mlp), tp(sb * f, p));
    match checkpoint {
        Checkpoint::Off => {
            let end_of_forward = l * block + outside;
            Acts {
                peak: end_of_forward,
                end_of_forward,
                at_attention_backward: end_of_forward - after_att - outside,
                at_mlp_backward: end_of_forward - outside - down_input,
                earlier_recompute: 0,
            }
        }
        Checkpoint::Selective => {
            // No attention core is kept; the backward pass recomputes one layer's at a time,
            // after that layer has freed what follows its attention (and the outside tensors).
            let end_of_forward = l * (block - att) + outside;
            let recompute = end_of_forward - after_att - outside + att;
            Acts {
                peak: end_of_forward.max(recompute),
                end_of_forward,
                at_attention_backward: recompute,
                at_mlp_backward: end_of_forward - outside - down_input,
                earlier_recompute: 0,
            }
        }
        Checkpoint::Every(k) => {
            // Chen et al. 2016: keep each segment's input; recompute one segment (n blocks) at a
            // time, on top of the inputs of the segments before it.
            let k = (k as u128).clamp(1, l);
            let segments = l.div_ceil(k);
            let end_of_forward = input * segments + outside;
            let recomputed = |j: u128| {
                let n = k.min(l - j * k);
                (j + 1) * input + n * (block - input) + (n - 1) * input
            };
            let peak = (0..segments).map(recomputed).fold(end_of_forward, u128::max);
            // The last segment is recomputed first, before any gradient buffer but the residual
            // stream's exists; its last layer's MLP and attention backward are the moments. The
            // gradient buffers, once allocated, stay while the earlier segments are recomputed:
            // those recomputations count with all of them, at their last op, when the last
            // block's projection output and its (recomputed, already consumed) output exist too.
            // (A frozen MLP saves no GELU output: its recomputation holds it as a temporary
            // while the down projection runs.)
            let last = recomputed(segments - 1);
            let tail = (2 * input).max(input + if_(!trained(Target::Mlp), tp(sb * f, p)));
            let earlier = (0..segments - 1).map(|j| recomputed(j) + tail).max().unwrap_or(0);
            Acts {
                peak,
                end_of_forward,
                at_attention_backward: last - after_att,
                at_mlp_backward: last - down_input,
                earlier_recompute: earlier,
            }
        }
    }
}

/// The logits' bytes (logits, the softmax kept for backward, per-row losses and the loss) and the
/// logits' gradient. Vocabulary-parallel over t GPUs (Megatron-LM).
pub(super) fn logits(s: &Setup) -> (u128, u128) {
    let z = Sizes::new(s);
    let n = (z.sb * s.arch.vocab as u128).div_ceil(z.t);
    let loss = if s.runtime.fp32_loss() { 4 } else { z.p };
    (words(n, z.p) + words(n, loss) + words(z.sb, 4) + 4, words(n, loss))
}

/// The backward pass's gradient buffers (the toy's plan allocates each once and reuses it layer
/// after layer; PyTorch's caching allocator reuses the same blocks), alive (a) when the last
/// layer's MLP activation backward runs: the residual stream's gradient three times (the
/// incoming gradient, the norm's input gradient and the sum) and the MLP's (two of width f for
/// GELU, three for SwiGLU); (b) during a layer's attention backward — one layer's whole working
/// set: those, the attention output's, q/k/v's, and the attention core's
/// (`a·s²·b`, or fused attention's fp32 `a·s·b` row terms); with LoRA, the adapters' shared
/// rank-r gradient buffer.
pub(super) fn working_sets(s: &Setup) -> (u128, u128, u128) {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, heads, kv, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let mlp = match a.mlp {
        Mlp::Gelu => 2,
        Mlp::SwiGlu => 3,
    };
    let core = if s.attention == AttentionKind::Fused { tp(heads * sb, 4) } else { tp(heads * sq * sb, p) };
    // LoRA: one buffer for the gradient of an adapter's rank-r intermediate, reused by every
    // adapter; it exists by the attention backward if an adapter after the attention (output
    // projection, MLP) ran its backward first.
    let lora_grad = |on: bool| s.lora.filter(|_| on).map_or(0, |l| words(sb * l.rank as u128, p));
    let (mlp_adapted, proj_adapted) = s.lora.map_or((false, false), |l| (l.mlp, l.proj));
    let at_mlp = 3 * rep(sb * h, p) + mlp * tp(sb * f, p);
    let all = at_mlp + tp(sb * h, p) + tp(sb * (h + 2 * kv), p) + core;
    // (c) every gradient buffer, the adapters' included (an earlier segment's recomputation).
    (at_mlp, all + lora_grad(proj_adapted || mlp_adapted), all + lora_grad(true))
}
