//! The optimizer on the host (offload): the CPU backend's twins of AdamW and SGD, run on the
//! host's fp32 values by whichever backend holds them (the GPU backend between its submissions).

use super::cpu::ops;
use crate::plan::AdamWStep;

/// One AdamW step of the host's fp32 parameters.
pub fn adamw(params: &mut [f32], m: &mut [f32], v: &mut [f32], grads: &[f32], step: &AdamWStep) {
    ops::adamw_step(params, m, v, grads, step);
}

/// One SGD step (with momentum when `momentum_buf` is given) of the host's fp32 parameters.
pub fn sgd(params: &mut [f32], momentum_buf: Option<&mut [f32]>, grads: &[f32], o: &crate::plan::OptimizerConfig) {
    ops::sgd_step(params, momentum_buf, grads, o.lr, o.momentum, o.weight_decay);
}
