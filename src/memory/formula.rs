//! Closed-form memory of the toy GPT-2, in the style of Korthikanti et al. 2022 ("Reducing
//! Activation Recomputation in Large Transformer Models", §4), whose per-layer activation
//! memory for 16-bit GPT training with dropout is `s·b·h·(34 + 5·a·s/h)` bytes.
//!
//! Notation: s sequence length, b batch, h hidden size (d_model), a heads, L layers.

use crate::model::{ModelConfig, StepShape};
use crate::plan::{AttentionKind, Checkpoint, Techniques};

/// Bytes of activations the forward pass saves for the backward pass, fp32, no dropout.
///
/// Per transformer layer, in floats (4 bytes each):
/// - `sbh` LayerNorm-1 output (input of the qkv projection) + `2sb` its mean and 1/std;
/// - `3sbh` the fused q, k, v (input of QKᵀ and of P·V);
/// - `a·s²·b` the softmax probabilities P (input of P·V and of the softmax backward) — the term
///   that grows with the square of the sequence;
/// - `sbh` the attention output P·V (input of the output projection);
/// - `sbh` the first residual sum (input of LayerNorm-2);
/// - `sbh` LayerNorm-2 output + `2sb` its mean and 1/std;
/// - `4sbh` the MLP up-projection (input of GELU) and `4sbh` the GELU output (input of the
///   down-projection);
/// - `sbh` the block output (input of the next block).
///
/// That is `16sbh + 4sb + a·s²·b` floats, `s·b·h·(64 + 16/h + 4·a·s/h)` bytes per layer; outside
/// the layers, the embedding output (`sbh`) and the final LayerNorm's output, mean and 1/std
/// (`sbh + 2sb`). The projections' outputs that only feed a residual add are not saved (the add
/// needs no inputs for its backward); Korthikanti et al.'s 34 counts 2-byte values and 1-byte
/// dropout masks, ours 4-byte values without dropout, which is why our constants differ.
pub fn activation_bytes(model: &ModelConfig, shape: StepShape) -> u64 {
    activation_peak_bytes(model, shape, &Techniques::default())
}

/// The most bytes of saved activations alive at any point of the step, with `techniques`
/// (`shape.batch` is the micro-batch: with gradient accumulation each micro-batch's activations
/// are freed by its own backward pass, so the peak does not depend on the number of
/// micro-batches).
///
/// - Fused attention saves the row logsumexp (`a·s·b`) instead of the probabilities
///   (`a·s²·b`): the quadratic term is gone.
/// - Selective recomputation saves no probabilities either, but the backward pass recomputes
///   one layer's at a time. The peak is the larger of the end of the forward pass and the
///   moment the last layer's probabilities are recomputed, when that layer has already freed
///   its MLP activations, LayerNorm-2's, the first residual sum, the attention output, and the
///   final LayerNorm's output and the last block's output were freed too (`13sbh + 4sb`).
/// - Mixed precision stores the activations in 16 bits; LayerNorm's statistics and attention's
///   logsumexp stay fp32.
/// - With LoRA, frozen projections need no input for their backward pass, so those inputs are
///   not saved; each adapter saves its `r·s·b` intermediate.
/// - Checkpointing every k blocks saves the embedding output, each segment's output and the
///   final LayerNorm's. Recomputing segment j (n blocks) brings back, on top of the inputs of
///   segments 0..=j, each block's activations except its input (`15sbh + 4sb + att`) and the
///   outputs that feed the next block inside the segment (`(n−1)·sbh`).
pub fn activation_peak_bytes(model: &ModelConfig, shape: StepShape, techniques: &Techniques) -> u64 {
    let (s, b, h, a, l) =
        (shape.seq as u64, shape.batch as u64, model.d_model as u64, model.n_heads as u64, model.n_layers as u64);
    let (sbh, sb) = (s * b * h, s * b);
    // Bytes of one tensor of n values: in the step's precision, or fp32 (LayerNorm statistics
    // and attention's logsumexp stay fp32 under mixed precision).
    let dt = techniques.precision.dtype();
    let nb = |n: u64| dt.bytes_for(n);
    let wb = |n: u64| 4 * n;
    let fused = techniques.attention == AttentionKind::Fused;
    let att = if fused { wb(a * s * b) } else { nb(a * s * s * b) };
    // With LoRA the base weights are frozen: a projection's input is saved only when its adapter
    // needs it (or, for the attention output, when fused attention's backward reads it), and each
    // adapter saves its rank-r intermediate x·A.
    let lora = techniques.lora;
    let trained = |target: bool| lora.is_none() || target;
    let (qkv, proj, mlp) = lora.map_or((false, false, false), |l| (l.qkv, l.proj, l.mlp));
    let r = lora.map_or(0, |l| l.rank as u64);
    let adapter = nb(r * sb);
    let adapters = (qkv as u64 + proj as u64 + 2 * mlp as u64) * adapter;
    let if_ = |cond: bool, bytes: u64| if cond { bytes } else { 0 };
    let x = nb(sbh);
    let pre_att = x + 2 * wb(sb) + if_(trained(qkv), nb(sbh)) + nb(3 * sbh);
    let post_att = if_(trained(proj) || fused, nb(sbh))
        + nb(sbh)
        + 2 * wb(sb)
        + if_(trained(mlp), nb(sbh))
        + nb(4 * sbh)
        + if_(trained(mlp), nb(4 * sbh));
    let block = pre_att + att + post_att + adapters;
    // The last block's output and ln_f's statistics (and ln_f's output, the trained lm_head's input).
    let outside = x + 2 * wb(sb) + if_(lora.is_none(), nb(sbh));
    match techniques.checkpoint {
        Checkpoint::Off => l * block + outside,
        Checkpoint::Selective => {
            // The last block's adapters after the attention were freed too.
            let after_att = post_att + (proj as u64 + 2 * mlp as u64) * adapter;
            let end_of_forward = l * (block - att) + outside;
            end_of_forward.max(end_of_forward - after_att - outside + att)
        }
        Checkpoint::Every(k) => {
            let k = (k as u64).clamp(1, l);
            let segments = l.div_ceil(k);
            // The embedding output, each segment's output (the last is ln_f's input) and ln_f's.
            let end_of_forward = x * (1 + segments) + outside - x;
            (0..segments)
                .map(|j| {
                    let n = k.min(l - j * k);
                    (j + 1) * x + n * (block - x) + (n - 1) * x
                })
                .fold(end_of_forward, u64::max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        // s=2, b=1, h=4, a=2, L=1: 16·8 + 4·2 + 2·4·1 = 144 floats; outside 2·8 + 4 = 20.
        let m = ModelConfig { vocab: 3, seq_len: 2, d_model: 4, n_layers: 1, n_heads: 2 };
        assert_eq!(activation_bytes(&m, StepShape { batch: 1, seq: 2 }), 4 * (144 + 20));
    }
}
