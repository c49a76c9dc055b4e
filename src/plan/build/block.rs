//! A transformer block's forward and backward ops, and a projection with its LoRA branch.

use super::{Builder, Mode, Saved, Scratch};
use crate::model::params::{LoraTarget, ParamKind};
use crate::plan::{AttentionKind, Category, Checkpoint, Op, Phase, View, op};

impl Builder {
    /// A projection `out = inp·W + b` of block `i` (k → n), plus its LoRA branch
    /// `out += s·(inp·A)·B` when `target` is adapted. Returns the branch's `inp·A`, saved for
    /// the backward pass.
    fn projection(
        &mut self,
        (i, target): (usize, LoraTarget),
        inp: View,
        (w, b): (ParamKind, ParamKind),
        out: View,
        (k, n): (u64, u64),
    ) -> Option<View> {
        let rows = self.shape.rows();
        let label = format!("h.{i}.{}", target.module());
        self.push(
            Phase::Forward,
            label.clone(),
            Op::Matmul(op::Matmul {
                inp,
                weight: self.p(w),
                bias: Some(self.p(b)),
                out,
                rows,
                k,
                n,
                weight_transposed: false,
            }),
        );
        let lora = self.techniques.lora.filter(|l| l.targets().contains(&target))?;
        let r = lora.rank as u64;
        let h = self.act(format!("{label}.lora_h"), &[rows, r], self.saved(), Some(i));
        let (a, bw) = (self.lp(ParamKind::LoraA(target, i)), self.lp(ParamKind::LoraB(target, i)));
        let lora_label = format!("{label}.lora");
        self.push(
            Phase::Forward,
            lora_label.clone(),
            Op::Matmul(op::Matmul { inp, weight: a, bias: None, out: h, rows, k, n: r, weight_transposed: false }),
        );
        self.push(
            Phase::Forward,
            lora_label,
            Op::MatmulAdd(op::MatmulAdd { inp: h, weight: bw, out, rows, k: r, n, alpha: lora.scale() as f64 }),
        );
        Some(h)
    }

    /// The backward of [`Self::projection`]: dinp from dout; the LoRA branch's gradients, or the
    /// base weight's when it is trained.
    /// `(inp, lora_h)`: the projection's input and its LoRA branch's saved `inp·A`; `(dout,
    /// dinp)`: the gradient in and out; `dlora`: the branch's gradient scratch.
    fn projection_backward(
        &mut self,
        (i, target): (usize, LoraTarget),
        (inp, lora_h): (View, Option<View>),
        (w, b): (ParamKind, ParamKind),
        (dout, dinp): (View, View),
        (k, n): (u64, u64),
        dlora: Option<View>,
    ) {
        let rows = self.shape.rows();
        let label = format!("h.{i}.{}", target.module());
        let lora = match (lora_h, dlora, self.techniques.lora) {
            (Some(h), Some(dh), Some(l)) => Some((h, dh, l)),
            _ => None,
        };
        if let Some((h, dh, l)) = lora {
            let r = l.rank as u64;
            let dh = View { len: rows * r, ..dh };
            let lora_label = format!("{label}.lora");
            self.push(
                Phase::Backward,
                lora_label.clone(),
                Op::MatmulAddBackward(op::MatmulAddBackward {
                    inp: h,
                    weight: self.lp(ParamKind::LoraB(target, i)),
                    dout,
                    dinp: dh,
                    dweight: self.lg(ParamKind::LoraB(target, i)),
                    rows,
                    k: r,
                    n,
                    alpha: l.scale() as f64,
                }),
            );
            self.push(
                Phase::Backward,
                lora_label,
                Op::MatmulBackward(op::MatmulBackward {
                    inp,
                    weight: self.lp(ParamKind::LoraA(target, i)),
                    dout: dh,
                    dinp,
                    dweight: Some(self.lg(ParamKind::LoraA(target, i))),
                    dbias: None,
                    rows,
                    k,
                    n: r,
                    weight_transposed: false,
                    accumulate: false,
                }),
            );
        }
        self.push(
            Phase::Backward,
            label,
            Op::MatmulBackward(op::MatmulBackward {
                inp,
                weight: self.p(w),
                dout,
                dinp,
                dweight: self.g(w),
                dbias: self.g(b),
                rows,
                k,
                n,
                weight_transposed: false,
                accumulate: lora.is_some(),
            }),
        );
    }

    /// The forward ops of block `i` on input `x`, in the builder's mode; `out_cat` is the
    /// category of the block's output.
    /// A block's LayerNorm `name` of `inp`: its output, mean and rstd, saved for backward.
    fn block_layernorm(
        &mut self,
        i: usize,
        name: &str,
        inp: View,
        (w, b): (ParamKind, ParamKind),
    ) -> (View, View, View) {
        let (batch, t, c) = (self.shape.batch as u64, self.shape.seq as u64, self.model.d_model as u64);
        let (a, li) = (self.saved(), Some(i));
        let out = self.act(format!("h.{i}.{name}.out"), &[batch, t, c], a, li);
        let mean = self.act32(format!("h.{i}.{name}.mean"), &[batch, t], a, li);
        let rstd = self.act32(format!("h.{i}.{name}.rstd"), &[batch, t], a, li);
        let (weight, bias) = (self.p(w), self.p(b));
        self.push(
            Phase::Forward,
            format!("h.{i}.{name}"),
            Op::LayerNorm(op::LayerNorm { inp, weight, bias, out, mean, rstd }),
        );
        (out, mean, rstd)
    }

    /// The backward op of a block's LayerNorm `name`: from its saved (input, mean, rstd), adds
    /// d(input) into `dinp` and accumulates the weight and bias gradients.
    fn block_layernorm_backward(
        &mut self,
        i: usize,
        name: &str,
        (inp, mean, rstd): (View, View, View),
        (w, b): (ParamKind, ParamKind),
        (dout, dinp): (View, View),
    ) {
        let (weight, dweight, dbias) = (self.p(w), self.g(w), self.g(b));
        self.push(
            Phase::Backward,
            format!("h.{i}.{name}"),
            Op::LayerNormBackward(op::LayerNormBackward {
                inp,
                weight,
                mean,
                rstd,
                dout,
                dinp,
                dweight,
                dbias,
                accumulate: true,
            }),
        );
    }

    pub(super) fn block_forward(&mut self, i: usize, x: View, out_cat: Category) -> (Saved, View) {
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, nh) = (self.model.d_model as u64, self.model.n_heads as u64);
        let li = Some(i);
        let n = |s: &str| format!("h.{i}.{s}");
        let a = self.saved();
        let tmp = Category::Temporaries;
        let (ln1, ln1_mean, ln1_rstd) = self.block_layernorm(i, "ln_1", x, (ParamKind::Ln1W(i), ParamKind::Ln1B(i)));
        let qkv = self.act(n("attn.qkv"), &[b, t, 3 * c], a, li);
        let qkv_w = (ParamKind::QkvW(i), ParamKind::QkvB(i));
        let h_qkv = self.projection((i, LoraTarget::Qkv), ln1, qkv_w, qkv, (c, 3 * c));
        let atty = self.act(n("attn.out"), &[b, t, c], a, li);
        let att = match (self.serve, self.techniques.attention) {
            (Some(io), _) => {
                // Serving: the new tokens' keys and values into the cache, then attention over it.
                let cache = self.serve_caches[i];
                self.push(Phase::Forward, n("kv_write"), Op::KvWrite(op::KvWrite { qkv, slots: io.slots, cache }));
                let (blocks, lens, block_size) = (io.blocks, io.lens, io.block_size);
                let cached = op::CachedAttention { qkv, cache, blocks, lens, out: atty, block_size };
                self.push(Phase::Forward, n("attn"), Op::CachedAttention(cached));
                lens
            }
            (None, AttentionKind::Standard) => {
                // Selective checkpointing drops the probabilities right after use.
                let cat = if self.techniques.checkpoint == Checkpoint::Selective { tmp } else { a };
                let att = self.act(n("attn.probs"), &[b, nh, t, t], cat, li);
                self.push(
                    Phase::Forward,
                    n("attn"),
                    Op::Attention(op::Attention { qkv, att, out: atty, packing: self.packing }),
                );
                att
            }
            (None, AttentionKind::Fused) => {
                let lse = self.act32(n("attn.lse"), &[b, nh, t], a, li);
                self.push(
                    Phase::Forward,
                    n("attn"),
                    Op::FlashAttention(op::FlashAttention { qkv, out: atty, lse, packing: self.packing }),
                );
                lse
            }
        };
        let attproj = self.act(n("attn.c_proj.out"), &[b, t, c], tmp, li);
        let proj_w = (ParamKind::AttnProjW(i), ParamKind::AttnProjB(i));
        let h_proj = self.projection((i, LoraTarget::AttnProj), atty, proj_w, attproj, (c, c));
        let res2 = self.act(n("residual_1"), &[b, t, c], a, li);
        self.push(Phase::Forward, n("residual_1"), Op::Residual(op::Residual { a: x, b: attproj, out: res2 }));
        let (ln2, ln2_mean, ln2_rstd) = self.block_layernorm(i, "ln_2", res2, (ParamKind::Ln2W(i), ParamKind::Ln2B(i)));
        let fch = self.act(n("mlp.c_fc.out"), &[b, t, 4 * c], a, li);
        let fc_w = (ParamKind::FcW(i), ParamKind::FcB(i));
        let h_fc = self.projection((i, LoraTarget::Fc), ln2, fc_w, fch, (c, 4 * c));
        let fch_gelu = self.act(n("mlp.gelu.out"), &[b, t, 4 * c], a, li);
        self.push(Phase::Forward, n("mlp.gelu"), Op::Gelu(op::Gelu { inp: fch, out: fch_gelu }));
        let fcproj = self.act(n("mlp.c_proj.out"), &[b, t, c], tmp, li);
        let fcproj_w = (ParamKind::FcProjW(i), ParamKind::FcProjB(i));
        let h_fcproj = self.projection((i, LoraTarget::FcProj), fch_gelu, fcproj_w, fcproj, (4 * c, c));
        let res3 = self.act(n("residual_2"), &[b, t, c], out_cat, li);
        self.push(Phase::Forward, n("residual_2"), Op::Residual(op::Residual { a: res2, b: fcproj, out: res3 }));
        let s = Saved {
            x,
            ln1,
            ln1_mean,
            ln1_rstd,
            qkv,
            att,
            atty,
            res2,
            ln2,
            ln2_mean,
            ln2_rstd,
            fch,
            fch_gelu,
            lora_h: [h_qkv, h_proj, h_fc, h_fcproj],
        };
        (s, res3)
    }

    /// The backward ops of block `i`. On entry `dres_a` holds d(block output); on exit,
    /// d(block input).
    pub(super) fn block_backward(&mut self, i: usize, s: &Saved, sc: &Scratch) {
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, nh) = (self.model.d_model as u64, self.model.n_heads as u64);
        let n = |x: &str| format!("h.{i}.{x}");
        let li = Some(i);
        let [h_qkv, h_proj, h_fc, h_fcproj] = s.lora_h;
        self.push(
            Phase::Backward,
            n("residual_2"),
            Op::ResidualBackward(op::ResidualBackward { dout: sc.dres_a, da: sc.dres_b }),
        );
        let fcproj_w = (ParamKind::FcProjW(i), ParamKind::FcProjB(i));
        self.projection_backward(
            (i, LoraTarget::FcProj),
            (s.fch_gelu, h_fcproj),
            fcproj_w,
            (sc.dres_a, sc.dfch_gelu),
            (4 * c, c),
            sc.dlora,
        );
        self.push(
            Phase::Backward,
            n("mlp.gelu"),
            Op::GeluBackward(op::GeluBackward { inp: s.fch, dout: sc.dfch_gelu, dinp: sc.dfch }),
        );
        let fc_w = (ParamKind::FcW(i), ParamKind::FcB(i));
        self.projection_backward((i, LoraTarget::Fc), (s.ln2, h_fc), fc_w, (sc.dfch, sc.dln), (c, 4 * c), sc.dlora);
        let saved = (s.res2, s.ln2_mean, s.ln2_rstd);
        self.block_layernorm_backward(i, "ln_2", saved, (ParamKind::Ln2W(i), ParamKind::Ln2B(i)), (sc.dln, sc.dres_b));
        // dres_b holds d(residual_1).
        self.push(
            Phase::Backward,
            n("residual_1"),
            Op::ResidualBackward(op::ResidualBackward { dout: sc.dres_b, da: sc.dres_a }),
        );
        let proj_w = (ParamKind::AttnProjW(i), ParamKind::AttnProjB(i));
        self.projection_backward(
            (i, LoraTarget::AttnProj),
            (s.atty, h_proj),
            proj_w,
            (sc.dres_b, sc.datty),
            (c, c),
            sc.dlora,
        );
        let op = match (self.techniques.attention, self.techniques.checkpoint) {
            (AttentionKind::Fused, _) => Op::FlashAttentionBackward(op::FlashAttentionBackward {
                qkv: s.qkv,
                out: s.atty,
                lse: s.att,
                dout: sc.datty,
                delta: sc.datt,
                dqkv: sc.dqkv,
                packing: self.packing,
            }),
            (AttentionKind::Standard, Checkpoint::Selective) => {
                // Recompute the attention core (scores, softmax, P·V) from the saved q, k, v.
                self.mode = Mode::Recompute;
                let att = self.act(n("attn.probs"), &[b, nh, t, t], Category::Activations, li);
                let out = self.act(n("attn.out"), &[b, t, c], Category::Temporaries, li);
                self.push(
                    Phase::Backward,
                    n("attn"),
                    Op::Attention(op::Attention { qkv: s.qkv, att, out, packing: self.packing }),
                );
                self.mode = Mode::Saved;
                Op::AttentionBackward(op::AttentionBackward {
                    qkv: s.qkv,
                    att,
                    dout: sc.datty,
                    datt: sc.datt,
                    dqkv: sc.dqkv,
                })
            }
            (AttentionKind::Standard, _) => Op::AttentionBackward(op::AttentionBackward {
                qkv: s.qkv,
                att: s.att,
                dout: sc.datty,
                datt: sc.datt,
                dqkv: sc.dqkv,
            }),
        };
        self.push(Phase::Backward, n("attn"), op);
        let qkv_w = (ParamKind::QkvW(i), ParamKind::QkvB(i));
        self.projection_backward((i, LoraTarget::Qkv), (s.ln1, h_qkv), qkv_w, (sc.dqkv, sc.dln), (c, 3 * c), sc.dlora);
        let saved = (s.x, s.ln1_mean, s.ln1_rstd);
        self.block_layernorm_backward(i, "ln_1", saved, (ParamKind::Ln1W(i), ParamKind::Ln1B(i)), (sc.dln, sc.dres_a));
    }
}

impl Builder {
    /// "Saved for backward" means read by the backward pass: what the forward pass keeps but no
    /// backward op reads (a frozen projection's input under LoRA) is a temporary.
    pub(super) fn unread_activations_are_temporaries(&mut self) {
        let mut read_by_backward = vec![false; self.tensors.len()];
        for node in self.ops.iter().filter(|n| n.phase == Phase::Backward && !n.recompute) {
            for v in node.op.reads_writes().0 {
                read_by_backward[v.tensor.0] = true;
            }
        }
        for (t, read) in self.tensors.iter_mut().zip(read_by_backward) {
            if t.category == Category::Activations && !read {
                t.category = Category::Temporaries;
            }
        }
    }

    /// Packed rows: the micro-batch's document starts (B,T) and the positions' index (T+1 offsets,
    /// B·T rows), inputs like the tokens'.
    pub(super) fn packing_inputs(&mut self) {
        self.packing = None;
        if !self.techniques.batching.is_packed() {
            return;
        }
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let mut input = |name: &str, shape: &[u64]| {
            let name = self.name(format!("input.{name}"));
            self.tensor(name, shape, crate::plan::DType::U32, Category::Input, None)
        };
        let doc_starts = input("doc_starts", &[b, t]);
        let position_offsets = input("position_offsets", &[t + 1]);
        let position_rows = input("position_rows", &[b * t]);
        self.packing = Some(op::Packing { doc_starts, position_offsets, position_rows });
    }
}
