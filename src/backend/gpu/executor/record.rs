//! The plan's dispatches, recorded once against tensor views: each op's commands, and the
//! uniforms rewritten every step.

use std::ops::Range;

use super::super::GpuError;
use super::super::kernels::attention::AttnShape;
use super::super::kernels::cross_entropy::CrossEntropyParams;
use super::super::kernels::{Kernels, Recorder, SgdParams, SgdViews};
use crate::backend::ix;
use crate::plan::{Op, Plan, op};

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
        // Offload's ops run on the host, between the submissions (`executor::host`).
        if plan.runs_on_host(&node.op) {
            return Ok(());
        }
        match node.op {
            // Every rank at once: the cluster runs them between the ranks' ops.
            Op::AllReduce(_) | Op::ReduceScatter(_) | Op::AllGather(_) => {}
            Op::CopyToHost(_) | Op::CopyToDevice(_) => {}
            Op::Zero(op::Zero { dst }) => rec.clear(dst),
            Op::Embedding(o) => k.embedding.forward(rec, &o, t, c, v)?,
            Op::EmbeddingBackward(o) => k.embedding.backward(rec, &o, t, c, v)?,
            Op::LayerNorm(o) => k.layernorm.forward(rec, &o, c)?,
            Op::LayerNormBackward(o) => k.layernorm.backward(rec, &o, c)?,
            Op::Matmul(o) => k.matmul.forward(rec, &o)?,
            Op::MatmulBackward(o) => k.matmul.backward(rec, &o)?,
            Op::MatmulAdd(o) => k.matmul.add_forward(rec, &o)?,
            Op::MatmulAddBackward(o) => k.matmul.add_backward(rec, &o)?,
            Op::Attention(o) => k.attention.forward(rec, &o, attn)?,
            Op::AttentionBackward(o) => k.attention.backward(rec, &o, attn)?,
            Op::FlashAttention(o) => k.flash_attention.forward(rec, &o, attn)?,
            Op::FlashAttentionBackward(o) => k.flash_attention.backward(rec, &o, attn)?,
            Op::KvWrite(o) => k.kv_cache.write(rec, &o, attn)?,
            Op::CachedAttention(o) => k.kv_cache.attend(rec, &o, attn)?,
            Op::Gelu(op::Gelu { inp, out }) => k.gelu.forward(rec, inp, out)?,
            Op::GeluBackward(op::GeluBackward { inp, dout, dinp }) => k.gelu.backward(rec, inp, dout, dinp)?,
            Op::Residual(op::Residual { a, b, out }) => k.residual.forward(rec, a, b, out)?,
            Op::ResidualBackward(op::ResidualBackward { dout, da }) => k.residual.backward(rec, dout, da)?,
            Op::CrossEntropy(o) => k.cross_entropy.forward(rec, &o, v)?,
            Op::CrossEntropyBackward(op::CrossEntropyBackward { probs, targets, dlogits, scale }) => {
                k.cross_entropy.backward(rec, probs, targets, dlogits, v, scale)?;
                if let Some(offset) = rec.last_uniform() {
                    dynamic.cross_entropy.push((offset, CrossEntropyParams::new(ix(targets.len), v, scale)));
                }
            }
            Op::CheckFinite(op::CheckFinite { grads, found_inf }) => k.check_finite.record(rec, grads, found_inf)?,
            Op::AdamW(o) => {
                let s = plan.adamw_step(1);
                let offset = k.adamw.step(rec, &o, &s)?;
                dynamic.adamw = Some((offset, ix(o.params.len), o.copy.is_some(), o.found_inf.is_some()));
            }
            Op::Sgd(op::Sgd { params, grads, momentum, copy, found_inf }) => {
                let o = plan.optimizer;
                let views = SgdViews { params, grads, momentum_buf: momentum, copy, found_inf };
                let p = SgdParams::new(&views, o.lr, o.momentum, o.weight_decay, 1.0);
                dynamic.sgd = Some((k.sgd.step(rec, &views, &p)?, views));
            }
        }
    }
    Ok(())
}
