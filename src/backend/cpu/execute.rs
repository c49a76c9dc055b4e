//! Each op run by its CPU twin, on the tensors' slots, outputs rounded to their precision.

use super::{CpuExecutor, attention, ops, store_rounded};
use crate::backend::ix;
use crate::plan::{DType, Op, View, op};

impl<F: super::ops::Real> CpuExecutor<F> {
    /// Runs `f` with copies of the output views and writes them back afterwards, so outputs
    /// never alias inputs (or each other) whatever tensors they live in. Accumulating outputs
    /// start from their current values.
    fn with_outputs<const N: usize>(&mut self, views: [View; N], f: impl FnOnce(&Self, &mut [Vec<F>; N])) {
        self.with_output_list(&views, true, |s, bufs| {
            if let Ok(bufs) = <&mut [Vec<F>; N]>::try_from(bufs) {
                f(s, bufs);
            }
        });
    }

    /// [`Self::with_outputs`] for ops that set every element of every output: the buffers
    /// start with whatever they held (NaN in debug builds, so an element left unset shows up in
    /// the tests), not a copy of the tensors (the copies were ~5 % of the CPU step, measured).
    fn with_new_outputs<const N: usize>(&mut self, views: [View; N], f: impl FnOnce(&Self, &mut [Vec<F>; N])) {
        self.with_output_list(&views, false, |s, bufs| {
            if let Ok(bufs) = <&mut [Vec<F>; N]>::try_from(bufs) {
                f(s, bufs);
            }
        });
    }

    /// [`Self::with_outputs`] for a list of views whose length depends on the op.
    /// The copies are made in buffers kept from earlier ops (no fresh pages each op: page
    /// faults were a few per cent of the CPU step, measured).
    fn with_output_list(&mut self, views: &[View], keep: bool, f: impl FnOnce(&Self, &mut [Vec<F>])) {
        let mut bufs: Vec<Vec<F>> = Vec::with_capacity(views.len());
        for v in views {
            let mut b = self.scratch.pop().unwrap_or_default();
            let current = self.f(*v);
            if keep {
                b.clear();
                b.extend_from_slice(current);
            } else if cfg!(debug_assertions) {
                b.clear();
                b.resize(current.len(), F::nan());
            } else {
                b.resize(current.len(), F::zero());
            }
            bufs.push(b);
        }
        f(self, &mut bufs);
        for (v, b) in views.iter().zip(bufs) {
            self.store(*v, &b);
            self.scratch.push(b);
        }
    }

    /// Writes an op's output into its view, rounded to the tensor's precision.
    fn store(&mut self, v: View, values: &[F]) {
        let dtype = self.plan.tensors[v.tensor.0].dtype;
        if let Some(dst) = self.f_mut(v) {
            store_rounded(dtype, dst, values);
        }
    }

    /// Whether the optimizer skips this step: fp16 found an overflow.
    fn skips(&self, found_inf: Option<View>) -> bool {
        found_inf.is_some_and(|f| self.u(f).first().is_some_and(|&x| x != 0))
    }

    /// The gradients divided by the loss scale (a copy: the 16-bit gradients stay as they are).
    fn unscaled(&self, grads: View) -> Vec<F> {
        let inv = F::one() / F::from(self.loss_scale()).unwrap_or_else(F::one);
        self.f(grads).iter().map(|&g| g * inv).collect()
    }

    /// Mixed precision: the updated master weights, rounded into the 16-bit working copy.
    fn copy_weights(&mut self, master: View, copy: Option<View>) {
        if let Some(copy) = copy {
            let values = self.f(master).to_vec();
            self.store(copy, &values);
        }
    }

    /// Packed rows' document starts (empty when the rows are not packed).
    fn starts(&self, packing: Option<op::Packing>) -> &[u32] {
        packing.map_or(&[][..], |p| self.u(p.doc_starts))
    }

    pub(super) fn execute(&mut self, op: &Op) {
        let m = self.plan.model;
        let (b, t) = (self.plan.shape.batch, self.plan.shape.seq);
        let (c, nh, vocab) = (m.d_model, m.n_heads, m.vocab);
        let heads = ops::Heads { b, t, c, nh };
        match *op {
            Op::Zero(op::Zero { dst }) => {
                if self.plan.tensors[dst.tensor.0].dtype == DType::U32 {
                    self.write_tensor_u32(dst.tensor, &vec![0; ix(dst.len)]);
                } else if let Some(x) = self.f_mut(dst) {
                    x.fill(F::zero());
                }
            }
            Op::Embedding(op::Embedding { tokens, wte, wpe, out, packing, positions }) => {
                self.with_new_outputs([out], |s, [o]| {
                    let at = positions.map_or(&[][..], |p| s.u(p));
                    ops::embedding_forward(o, s.u(tokens), (s.f(wte), s.f(wpe)), (t, c), (s.starts(packing), at));
                })
            }
            Op::EmbeddingBackward(op::EmbeddingBackward { tokens, dout, dwte, dwpe, packing, .. }) => self
                .with_outputs([dwte, dwpe], |s, [gw, gp]| {
                    ops::embedding_backward((gw, gp), s.f(dout), s.u(tokens), (t, c), s.starts(packing));
                }),
            Op::LayerNorm(op::LayerNorm { inp, weight, bias, out, mean, rstd }) => {
                self.with_new_outputs([out, mean, rstd], |s, [o, mu, rs]| {
                    ops::layernorm_forward(o, mu, rs, s.f(inp), s.f(weight), s.f(bias), c);
                })
            }
            Op::LayerNormBackward(lb) => {
                let outs: Vec<View> = std::iter::once(lb.dinp).chain(lb.dweight).chain(lb.dbias).collect();
                let (dout, accumulate) = (lb.dout, lb.accumulate);
                self.with_output_list(&outs, true, |s, bufs| {
                    let (x, w, mu, rs) = (s.f(lb.inp), s.f(lb.weight), s.f(lb.mean), s.f(lb.rstd));
                    let (di, dparams) = match bufs {
                        [di, gw, gb] => (di, Some((gw.as_mut_slice(), gb.as_mut_slice()))),
                        [di, ..] => (di, None),
                        [] => return,
                    };
                    ops::layernorm_backward(di, dparams, s.f(dout), (x, w, mu, rs), c, accumulate);
                })
            }
            Op::Matmul(m) => self.with_new_outputs([m.out], |s, [o]| {
                let bias = m.bias.map(|v| s.f(v));
                ops::matmul_forward(o, s.f(m.inp), s.f(m.weight), bias, &m);
            }),
            Op::MatmulBackward(mb) => {
                let op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, accumulate, .. } = mb;
                let outs: Vec<View> = std::iter::once(dinp).chain(dweight).chain(dbias).collect();
                let (has_dw, has_db) = (dweight.is_some(), dbias.is_some());
                self.with_output_list(&outs, true, |s, bufs| {
                    let Some((di, rest)) = bufs.split_first_mut() else { return };
                    let mut rest = rest.iter_mut();
                    let gw = if has_dw { rest.next().map(|g| g.as_mut_slice()) } else { None };
                    let gb = if has_db { rest.next().map(|g| g.as_mut_slice()) } else { None };
                    let before = accumulate.then(|| di.clone());
                    let (d, w) = (s.f(dout), s.f(weight));
                    // A frozen weight's input is not read (it may already be freed).
                    let x = if has_dw { s.f(inp) } else { &[] };
                    ops::matmul_backward(di, (gw, gb), d, x, w, &mb);
                    if let Some(before) = before {
                        di.iter_mut().zip(before).for_each(|(a, b)| *a = *a + b);
                    }
                })
            }
            Op::MatmulAdd(ma) => self.with_outputs([ma.out], |s, [o]| {
                ops::matmul_add_forward(o, s.f(ma.inp), s.f(ma.weight), &ma);
            }),
            Op::MatmulAddBackward(mb) => self.with_outputs([mb.dinp, mb.dweight], |s, [di, gw]| {
                ops::matmul_add_backward(di, gw, s.f(mb.dout), s.f(mb.inp), s.f(mb.weight), &mb);
            }),
            Op::Attention(op::Attention { qkv, att, out, packing }) => {
                self.with_new_outputs([out, att], |s, [o, a]| {
                    attention::attention_forward(o, a, s.f(qkv), heads, s.starts(packing));
                })
            }
            Op::AttentionBackward(op::AttentionBackward { qkv, att, dout, datt, dqkv }) => {
                self.with_new_outputs([dqkv, datt], |s, [dq, da]| {
                    attention::attention_backward(dq, da, s.f(dout), s.f(qkv), s.f(att), heads);
                })
            }
            Op::FlashAttention(op::FlashAttention { qkv, out, lse, packing }) => {
                self.with_new_outputs([out, lse], |s, [o, l]| {
                    attention::flash_attention_forward(o, l, s.f(qkv), heads, s.starts(packing));
                })
            }
            Op::FlashAttentionBackward(op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv, packing }) => {
                self.with_new_outputs([dqkv, delta], |s, [dq, d]| {
                    let (x, o, l) = (s.f(qkv), s.f(out), s.f(lse));
                    attention::flash_attention_backward(dq, d, s.f(dout), (x, o, l), heads, s.starts(packing));
                })
            }
            Op::KvWrite(op::KvWrite { qkv, slots, cache }) => {
                // In place: the cache is the whole pool, and a step writes a few of its slots
                // (copying it out and back was most of a decode step). The new keys and values
                // are rounded to the cache's precision first.
                let src = self.f(qkv);
                let mut new = vec![F::zero(); src.len()];
                store_rounded(self.plan.tensors[cache.tensor.0].dtype, &mut new, src);
                let slots = self.u(slots).to_vec();
                if let Some(k) = self.f_mut(cache) {
                    attention::kv_write(k, &new, &slots, c);
                }
            }
            Op::CachedAttention(op::CachedAttention { qkv, cache, blocks, lens, out, block_size }) => self
                .with_new_outputs([out], |s, [o]| {
                    let table = (s.u(blocks), s.u(lens));
                    attention::cached_attention(o, s.f(qkv), s.f(cache), table, heads, block_size)
                }),
            Op::Gelu(op::Gelu { inp, out }) => self.with_new_outputs([out], |s, [o]| ops::gelu_forward(o, s.f(inp))),
            Op::GeluBackward(op::GeluBackward { inp, dout, dinp }) => {
                self.with_new_outputs([dinp], |s, [o]| ops::gelu_backward(o, s.f(inp), s.f(dout)))
            }
            Op::Residual(op::Residual { a, b: bb, out }) => {
                self.with_new_outputs([out], |s, [o]| ops::residual_forward(o, s.f(a), s.f(bb)))
            }
            Op::ResidualBackward(op::ResidualBackward { dout, da }) => {
                self.with_new_outputs([da], |s, [o]| ops::residual_backward(o, s.f(dout)))
            }
            Op::CrossEntropy(op::CrossEntropy { logits, targets, probs, losses, loss }) => {
                self.with_new_outputs([probs, losses, loss], |s, [p, l, mean]| {
                    mean[0] = ops::cross_entropy_forward(p, l, s.f(logits), s.u(targets), vocab);
                })
            }
            Op::CrossEntropyBackward(op::CrossEntropyBackward { probs, targets, dlogits, scale }) => {
                // fp16 scales the loss, so every gradient; padding counts no target.
                let scale = self.state.cross_entropy_scale(scale) * self.loss_scale();
                self.with_new_outputs([dlogits], |s, [d]| {
                    ops::cross_entropy_backward(d, s.f(probs), s.u(targets), vocab, scale);
                })
            }
            Op::CheckFinite(op::CheckFinite { grads, found_inf }) => {
                if !ops::all_finite(self.f(grads)) {
                    self.write_tensor_u32(found_inf.tensor, &[1]);
                }
            }
            Op::AdamW(op::AdamW { params, grads, m: mm, v, copy, found_inf }) => {
                if self.skips(found_inf) {
                    return;
                }
                let grads = self.unscaled(grads);
                let step = self.plan.adamw_step(self.state.steps_taken);
                self.with_outputs([params, mm, v], |_, [p, m1, m2]| ops::adamw_step(p, m1, m2, &grads, &step));
                self.copy_weights(params, copy);
            }
            Op::Sgd(op::Sgd { params, grads, momentum, copy, found_inf }) => {
                if self.skips(found_inf) {
                    return;
                }
                let grads = self.unscaled(grads);
                let o = self.plan.optimizer;
                match momentum {
                    Some(buf) => self.with_outputs([params, buf], |_, [p, mb]| {
                        ops::sgd_step(p, Some(mb), &grads, o.lr, o.momentum, o.weight_decay);
                    }),
                    None => self.with_outputs([params], |_, [p]| {
                        ops::sgd_step(p, None, &grads, o.lr, o.momentum, o.weight_decay);
                    }),
                }
                self.copy_weights(params, copy);
            }
            // Every rank at once: the cluster runs them (`backend::cluster`), which the run
            // hands each collective to.
            Op::AllReduce(_) | Op::ReduceScatter(_) | Op::AllGather(_) => {}
            // Offload's copies: host memory is this process's memory too, so a copy is a copy
            // (the GPU backend's go over the bus).
            Op::CopyToHost(op::CopyToHost { src, dst, accumulate }) => {
                let mut values = self.f(src).to_vec();
                if accumulate {
                    values.iter_mut().zip(self.f(dst)).for_each(|(x, &d)| *x = *x + d);
                }
                self.store_view(dst, &values);
            }
            Op::CopyToDevice(op::CopyToDevice { src, dst }) => self.copy_view(src, dst),
        }
    }
}
