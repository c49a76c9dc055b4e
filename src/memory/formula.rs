//! Closed-form memory of the toy GPT-2, in the style of Korthikanti et al. 2022 ("Reducing
//! Activation Recomputation in Large Transformer Models", §4), whose per-layer activation
//! memory for 16-bit GPT training with dropout is `s·b·h·(34 + 5·a·s/h)` bytes.
//!
//! Notation: s sequence length, b batch, h hidden size (d_model), a heads, L layers.

use crate::model::{ModelConfig, StepShape};

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
    let (s, b, h, a, l) =
        (shape.seq as u64, shape.batch as u64, model.d_model as u64, model.n_heads as u64, model.n_layers as u64);
    let per_layer_floats = 16 * s * b * h + 4 * s * b + a * s * s * b;
    let outside_floats = 2 * s * b * h + 2 * s * b;
    4 * (l * per_layer_floats + outside_floats)
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
