//! The plan's dispatches, recorded once against tensor views: each op's commands, and the
//! uniforms rewritten every step.

use std::ops::Range;

use super::super::GpuError;
use super::super::kernels::attention::AttnShape;
use super::super::kernels::cross_entropy::CrossEntropyParams;
use super::super::kernels::{Kernels, Recorder, SgdParams, SgdViews};
use crate::backend::ix;
use crate::plan::{Op, Plan};

/// Uniforms that change between steps, by byte offset.
#[derive(Default)]
pub(super) struct DynamicUniforms {
    /// Cross-entropy backward: the uniform with the plan's scale, to multiply by the loss scale.
    pub(super) cross_entropy: Vec<(u64, CrossEntropyParams)>,
    /// AdamW: offset, elements, whether the 16-bit copy and the overflow flag are bound.
    pub(super) adamw: Option<(u64, usize, bool, bool)>,
    pub(super) sgd: Option<(u64, SgdViews)>,
}

/// Records every op of `plan`, 16-bit tensors through their storage variants.
/// Returns the uniforms to rewrite each step and, for each op, the range of its commands.
pub(super) fn record_plan(
    k: &Kernels,
    plan: &Plan,
    rec: &mut Recorder,
    native_f16: bool,
) -> Result<(DynamicUniforms, Vec<Range<usize>>), GpuError> {
    rec.set_dtypes(plan.tensors.iter().map(|t| t.dtype).collect(), native_f16);
    let mut dynamic = DynamicUniforms::default();
    let mut ranges = Vec::with_capacity(plan.ops.len());
    let m = plan.model;
    let (b, t) = (plan.shape.batch, plan.shape.seq);
    let (c, v) = (m.d_model, m.vocab);
    let attn = AttnShape { b, t, c, nh: m.n_heads };
    for node in &plan.ops {
        let first = rec.commands.len();
        record_op(k, plan, rec, node, &mut dynamic, attn, (t, c, v))?;
        ranges.push(first..rec.commands.len());
    }
    Ok((dynamic, ranges))
}

/// Records one op's commands.
fn record_op(
    k: &Kernels,
    plan: &Plan,
    rec: &mut Recorder,
    node: &crate::plan::OpNode,
    dynamic: &mut DynamicUniforms,
    attn: AttnShape,
    (t, c, v): (usize, usize, usize),
) -> Result<(), GpuError> {
    {
        rec.set_context(node.phase, &node.label);
        match node.op {
            Op::Zero { dst } => rec.clear(dst),
            Op::Embedding { tokens, wte, wpe, out } => k.embedding.forward(rec, tokens, wte, wpe, out, t, c, v)?,
            Op::EmbeddingBackward { token_offsets, token_positions, dout, dwte, dwpe, .. } => {
                k.embedding.backward(rec, token_offsets, token_positions, dout, dwte, dwpe, t, c, v)?
            }
            Op::LayerNorm { inp, weight, bias, out, mean, rstd } => {
                k.layernorm.forward(rec, inp, weight, bias, out, mean, rstd, c)?
            }
            Op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } => {
                k.layernorm.backward(rec, inp, weight, mean, rstd, dout, dinp, dweight, dbias, c, accumulate)?
            }
            Op::Matmul { inp, weight, bias, out, rows, k: kk, n, weight_transposed } => {
                k.matmul.forward(rec, inp, weight, bias, out, ix(rows), ix(kk), ix(n), weight_transposed)?
            }
            Op::MatmulBackward {
                inp,
                weight,
                dout,
                dinp,
                dweight,
                dbias,
                rows,
                k: kk,
                n,
                weight_transposed,
                accumulate,
            } => k.matmul.backward(
                rec,
                inp,
                weight,
                dout,
                dinp,
                dweight,
                dbias,
                ix(rows),
                ix(kk),
                ix(n),
                weight_transposed,
                accumulate,
            )?,
            Op::MatmulAdd { inp, weight, out, rows, k: kk, n, alpha } => {
                k.matmul.add_forward(rec, inp, weight, out, ix(rows), ix(kk), ix(n), alpha)?
            }
            Op::MatmulAddBackward { inp, weight, dout, dinp, dweight, rows, k: kk, n, alpha } => {
                k.matmul.add_backward(rec, inp, weight, dout, dinp, dweight, ix(rows), ix(kk), ix(n), alpha)?
            }
            Op::Attention { qkv, att, out } => k.attention.forward(rec, qkv, att, out, attn)?,
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => {
                k.attention.backward(rec, qkv, att, dout, datt, dqkv, attn)?
            }
            Op::FlashAttention { qkv, out, lse } => k.flash_attention.forward(rec, qkv, out, lse, attn)?,
            Op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv } => {
                k.flash_attention.backward(rec, qkv, out, lse, dout, delta, dqkv, attn)?
            }
            Op::Gelu { inp, out } => k.gelu.forward(rec, inp, out)?,
            Op::GeluBackward { inp, dout, dinp } => k.gelu.backward(rec, inp, dout, dinp)?,
            Op::Residual { a, b, out } => k.residual.forward(rec, a, b, out)?,
            Op::ResidualBackward { dout, da } => k.residual.backward(rec, dout, da)?,
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                k.cross_entropy.forward(rec, logits, targets, probs, losses, loss, v)?
            }
            Op::CrossEntropyBackward { probs, targets, dlogits, scale } => {
                k.cross_entropy.backward(rec, probs, targets, dlogits, v, scale)?;
                if let Some(offset) = rec.last_uniform() {
                    dynamic.cross_entropy.push((offset, CrossEntropyParams::new(ix(targets.len), v, scale)));
                }
            }
            Op::CheckFinite { grads, found_inf } => k.check_finite.record(rec, grads, found_inf)?,
            Op::AdamW { params, grads, m: mm, v: vv, copy, found_inf } => {
                let s = plan.adamw_step(1);
                let offset = k.adamw.step(rec, params, grads, mm, vv, copy, found_inf, &s)?;
                dynamic.adamw = Some((offset, ix(params.len), copy.is_some(), found_inf.is_some()));
            }
            Op::Sgd { params, grads, momentum, copy, found_inf } => {
                let o = plan.optimizer;
                let views = SgdViews { params, grads, momentum_buf: momentum, copy, found_inf };
                let p = SgdParams::new(&views, o.lr, o.momentum, o.weight_decay, 1.0);
                dynamic.sgd = Some((k.sgd.step(rec, &views, &p)?, views));
            }
        }
    }
    Ok(())
}
