//! The saved activations at the step's moments (the peak, the end of the forward pass, a
//! layer's attention and MLP backward, a checkpointed segment's recomputation), layer by layer
//! from [`super::activations`]'s lists; the logits; the backward pass's working sets.

use super::activations::{saved_outside, saved_per_layer};
use super::saved::{Part, Saved, Sizes};
use super::states::words;
use super::{Checkpoint, LayerKind, Setup, Target};
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

fn sum(list: &[Saved], parts: &[Part]) -> u128 {
    list.iter().filter(|t| parts.contains(&t.part)).map(|t| t.bytes).sum()
}

/// One kind of layer's saved bytes, by moment: what a layer keeps, its attention core's, what
/// follows its core, its down projection's input, its input's own storage.
#[derive(Clone, Copy)]
struct LayerActs {
    block: u128,
    att: u128,
    after_att: u128,
    down_input: u128,
    own_input: u128,
}

fn layer_acts(s: &Setup) -> LayerActs {
    let a = &s.arch;
    let z = Sizes::new(s);
    let lora = s.lora;
    let layer = saved_per_layer(s);
    let pre_att = sum(&layer, &[Part::BlockInput, Part::BeforeCore]);
    let att = sum(&layer, &[Part::Core]);
    let post_att = sum(&layer, &[Part::AfterCore, Part::DownInput]);
    // Each adapter keeps x·A (r values per row).
    let adapter = |target: Target| {
        lora.filter(|l| l.targets(target)).map_or(0, |l| {
            let per_linear = words(z.sb * l.rank as u128, z.p);
            a.block_linears().iter().filter(|(tg, _, _)| *tg == target).count() as u128 * per_linear
        })
    };
    let adapters_after_att = adapter(Target::Proj) + adapter(Target::Mlp);
    LayerActs {
        block: pre_att + att + post_att + adapter(Target::Qkv) + adapters_after_att,
        att,
        // The last layer's post-attention tensors are freed by the time the backward pass
        // reaches that layer's attention.
        after_att: post_att + adapters_after_att,
        // When the last layer's MLP activation backward runs, its down projection's input
        // (GELU's output, SwiGLU's product; saved only if that projection trains) is freed.
        down_input: sum(&layer, &[Part::DownInput]),
        own_input: sum(&layer, &[Part::BlockInput]),
    }
}

/// One kind of layer's saved tensors, when a model's layers are not all alike.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindSaved {
    #[serde(flatten)]
    pub kind: LayerKind,
    /// How many layers are of this kind.
    pub layers: u64,
    pub saved: Vec<Saved>,
}

/// Each kind of layer's saved tensors and how many layers are of it, in the order they first
/// come (DeepSeek-V3: its dense layers, then those with the experts; Llama 4: with and without
/// RoPE). Empty when every layer is alike ([`saved_per_layer`] lists that one).
pub fn layer_kinds(s: &Setup) -> Vec<KindSaved> {
    let kinds = s.arch.kinds();
    if kinds.len() < 2 {
        return Vec::new();
    }
    kinds
        .into_iter()
        .map(|(kind, layers)| KindSaved {
            kind,
            layers,
            saved: saved_per_layer(&Setup { arch: s.arch.of_kind(kind), ..s.clone() }),
        })
        .collect()
}

/// Each layer's saved bytes, in order (a mixture's dense layers and the layers without RoPE
/// differ from the others), counted once per kind.
fn layers(s: &Setup) -> Vec<LayerActs> {
    let kinds = s.arch.kinds();
    if kinds.len() < 2 {
        return vec![layer_acts(s); s.arch.layers as usize];
    }
    let acts: Vec<(LayerKind, LayerActs)> =
        kinds.iter().map(|&(kind, _)| (kind, layer_acts(&Setup { arch: s.arch.of_kind(kind), ..s.clone() }))).collect();
    (0..s.arch.layers)
        .filter_map(|i| {
            let kind = s.arch.layer_kind(i);
            acts.iter().find(|(k, _)| *k == kind).map(|&(_, a)| a)
        })
        .collect()
}

pub(super) fn activations(s: &Setup) -> Acts {
    let z = Sizes::new(s);
    let Sizes { h, p, sb, .. } = z;
    let lora = s.lora;
    let fused = s.attention == AttentionKind::Fused;
    let layers = layers(s);
    let Some(&last) = layers.last() else {
        return Acts { peak: 0, end_of_forward: 0, at_attention_backward: 0, at_mlp_backward: 0, earlier_recompute: 0 };
    };
    // The checkpoint a segment keeps: the block's input.
    let input = z.rep(sb * h, p);
    let outside: u128 = saved_outside(s).iter().map(|t| t.bytes).sum();
    let l = layers.len() as u128;
    let all: u128 = layers.iter().map(|k| k.block).sum();
    let trained = |target: Target| lora.is_none_or(|l| l.targets(target));
    let checkpoint = if fused && s.checkpoint == Checkpoint::Selective { Checkpoint::Off } else { s.checkpoint };
    match checkpoint {
        Checkpoint::Off => {
            let end_of_forward = all + outside;
            Acts {
                peak: end_of_forward,
                end_of_forward,
                at_attention_backward: end_of_forward - last.after_att - outside,
                at_mlp_backward: end_of_forward - outside - last.down_input,
                earlier_recompute: 0,
            }
        }
        Checkpoint::Selective => {
            // No attention core is kept; the backward pass recomputes one layer's at a time,
            // after that layer has freed what follows its attention (and the outside tensors).
            let end_of_forward = all - layers.iter().map(|k| k.att).sum::<u128>() + outside;
            let recompute = end_of_forward - last.after_att - outside + last.att;
            Acts {
                peak: end_of_forward.max(recompute),
                end_of_forward,
                at_attention_backward: recompute,
                at_mlp_backward: end_of_forward - outside - last.down_input,
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
                let from = (j * k) as usize;
                let blocks = &layers[from..(from + k as usize).min(layers.len())];
                // The first block's own input is the checkpoint.
                (j + 1) * input + blocks.iter().map(|b| b.block).sum::<u128>() - blocks[0].own_input
            };
            let peak = (0..segments).map(recomputed).fold(end_of_forward, u128::max);
            // The last segment is recomputed first, before any gradient buffer but the residual
            // stream's exists; its last layer's MLP and attention backward are the moments. The
            // gradient buffers, once allocated, stay while the earlier segments are recomputed:
            // those recomputations count with all of them, at their last op, when the last
            // block's projection output and its (recomputed, already consumed) output exist too.
            // (A frozen MLP saves no GELU output: its recomputation holds it as a temporary
            // while the down projection runs.)
            let last_segment = recomputed(segments - 1);
            let frozen_mlp = if trained(Target::Mlp) { 0 } else { z.tp(sb * z.f, p) };
            let tail = (2 * input).max(input + frozen_mlp);
            let earlier = (0..segments - 1).map(recomputed).map(|r| r + tail).max().unwrap_or(0);
            Acts {
                peak,
                end_of_forward,
                at_attention_backward: last_segment - last.after_att,
                at_mlp_backward: last_segment - last.down_input,
                earlier_recompute: earlier,
            }
        }
    }
}

/// The logits' bytes (logits, the softmax kept for backward, per-row losses and the loss) and the
/// logits' gradient. Vocabulary-parallel over t GPUs (Megatron-LM).
pub(super) fn logits(s: &Setup) -> (u128, u128) {
    // Only the last pipeline stage has the head.
    if s.arch.stage.is_some_and(|st| !st.head) {
        return (0, 0);
    }
    let z = Sizes::new(s);
    let n = (z.sb * s.arch.vocab as u128).div_ceil(z.t);
    let loss = if s.runtime().fp32_loss() { 4 } else { z.p };
    // Gemma 2's final soft-capping keeps its tanh output (logits-sized) too.
    let softcap = if s.arch.block.softcap { words(n, z.p) } else { 0 };
    // Each multi-token-prediction module has logits and a loss of its own.
    let heads = 1 + s.arch.block.mtp as u128;
    (heads * (words(n, z.p) + softcap + words(n, loss) + words(z.sb, 4) + 4), words(n, loss))
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
    let Sizes { sq, h, q, heads, kv, o, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let mlp = if a.mlp.gated() { 3 } else { 2 };
    // A mixture's MLP gradients are its token copies' (T·k rows of width f), with the gradients
    // of the gathered tokens and of the experts' outputs (T·k rows of h), and a shared expert's.
    let mlp_grads = match a.block.moe {
        None => mlp * tp(sb * f, p),
        Some(m) => {
            // Llama 4's eager experts run every token (Router::AllExperts).
            let k = if m.router == super::Router::AllExperts { m.experts } else { m.top_k };
            let copies = sb * k as u128;
            let moe = mlp * tp(copies * f, p) + 2 * words(copies * h, p) + mlp * tp(sb * m.shared_ffn as u128, p);
            // Its dense layers' MLP, if wider.
            let dense = if a.dense_layers() > 0 { mlp * tp(sb * m.dense_ffn as u128, p) } else { 0 };
            moe.max(dense)
        }
    };
    let core = if s.attention == AttentionKind::Fused { tp(heads * sb, 4) } else { tp(heads * sq * sb, p) };
    // LoRA: one buffer for the gradient of an adapter's rank-r intermediate, reused by every
    // adapter; it exists by the attention backward if an adapter after the attention (output
    // projection, MLP) ran its backward first.
    let lora_grad = |on: bool| s.lora.filter(|_| on).map_or(0, |l| words(sb * l.rank as u128, p));
    let (mlp_adapted, proj_adapted) = s.lora.map_or((false, false), |l| (l.mlp, l.proj));
    let at_mlp = 3 * rep(sb * h, p) + mlp_grads;
    let all = at_mlp + tp(sb * o, p) + tp(sb * (q + kv + z.v), p) + core;
    // (c) every gradient buffer, the adapters' included (an earlier segment's recomputation).
    (at_mlp, all + lora_grad(proj_adapted || mlp_adapted), all + lora_grad(true))
}
