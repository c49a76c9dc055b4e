//! The sizes a plan may reach, checked before anything is built: no tensor past
//! [`MAX_TENSOR_ELEMS`], no plan past [`MAX_PLAN_OPS`], no budget past [`MAX_BUDGET_BYTES`].

use super::Techniques;
use crate::model::ShapeError;
use crate::model::{ModelConfig, Planned, StepShape};
use crate::plan::ConfigError;

/// The most elements one tensor of a plan may have: 2⁵⁸ (1 EiB of fp32). Far beyond any GPU, it
/// keeps every byte count of a plan — a tensor's bytes, a segment, the sum of the tensors alive
/// at once under any budget up to [`MAX_BUDGET_BYTES`] — inside u64, on every platform.
pub const MAX_TENSOR_ELEMS: u64 = 1 << 58;

/// The largest memory budget (virtual GPU) anything in oomlab accepts: 2⁶² bytes (4 EiB).
pub const MAX_BUDGET_BYTES: u64 = 1 << 62;

/// The most ops one step's plan may have: a plan holds every op and tensor in host memory (about
/// 0.5 KiB each), so a longer one would take hundreds of MiB — in a browser tab too. 4,096 layers
/// without accumulation fit.
pub const MAX_PLAN_OPS: u64 = 1 << 18;

/// Refuses, before anything is built, a step whose tensors would pass [`MAX_TENSOR_ELEMS`] or
/// whose plan would pass [`MAX_PLAN_OPS`]. Products are taken in u128, where dimensions of at
/// most [`crate::model::MAX_DIM`] (2²⁰) cannot overflow (four of them make 2⁸⁰).
pub fn check_sizes(model: &ModelConfig, shape: StepShape, techniques: &Techniques) -> Result<(), ConfigError> {
    let (b, t, c, v, nh, l) = (
        shape.batch as u128,
        shape.seq as u128,
        model.d_model as u128,
        model.vocab as u128,
        model.n_heads as u128,
        model.n_layers as u128,
    );
    let pad = crate::model::params::PARAM_ALIGN_ELEMS as u128;
    let accum = techniques.accum as u128;
    let rank = techniques.lora.map_or(0, |r| r.rank as u128);
    // Every parameter tensor padded to the alignment: 4 matrices and 8 vectors per layer.
    let params = v * c + model.seq_len as u128 * c + l * (12 * c * c + 13 * c) + 2 * c + (12 * l + 4) * pad;
    let largest = [
        (Planned::Parameters, params),
        (Planned::AttentionProbabilities, b * nh * t * t),
        (Planned::Logits, b * t * v),
        (Planned::MlpActivations, b * t * 4 * c),
        (Planned::LoraAdapters, l * 4 * rank * 8 * c),
    ];
    for (what, elems) in largest {
        if elems > MAX_TENSOR_ELEMS as u128 {
            return Err(ConfigError::Shape(ShapeError::SizeLimit { what, amount: elems, limit: MAX_TENSOR_ELEMS }));
        }
    }
    // An upper bound on the ops: per layer 9 forward and 9 backward ops, 8 + 8 more for LoRA's
    // branches, one for selective recomputation and 17 for a recomputed forward pass; 9 outside
    // the layers; the optimizer's 3.
    let mut ops = accum * (60 * l + 16) + 3;
    let parallel = techniques.parallel;
    if parallel.is_distributed() {
        // A reduction per bucket of each unit (every micro-batch from ZeRO-2 on); ZeRO-3's
        // gathers and each unit's zeroed gradients (at most 8 per layer and 8 more per
        // micro-batch); the gather after the update.
        let units = 2 * l + 2;
        let buckets = params / parallel.bucket_elems.max(1) as u128 + units;
        let reductions = if parallel.stage() >= 2 { accum * buckets } else { buckets };
        ops += reductions + accum * (8 * l + 8) + 1;
    }
    if ops > MAX_PLAN_OPS as u128 {
        let what = Planned::Step { layers: model.n_layers, micro_batches: techniques.accum };
        return Err(ConfigError::Shape(ShapeError::SizeLimit { what, amount: ops, limit: MAX_PLAN_OPS }));
    }
    Ok(())
}
