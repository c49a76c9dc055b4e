//! The CPU reference backend: executes a [`Plan`] op by op with the twins in [`ops`].

pub mod ops;

use num_traits::Float;

use super::{BackendError, Trainer};
use crate::data::Batch;
use crate::model::init::init_params;
use crate::plan::{DType, Op, Phase, Plan, View, token_index};
use ops::AdamWStep;

/// Executes a plan on the host, in `F` precision (f32 for training, f64 for gradient checks).
pub struct CpuExecutor<F> {
    plan: Plan,
    floats: Vec<Vec<F>>,
    ints: Vec<Vec<u32>>,
    /// Optimizer steps taken (AdamW's t).
    steps_taken: u32,
}

fn cast<F: Float>(x: f32) -> F {
    F::from(x).unwrap_or_else(F::nan)
}

/// Two mutable views of one tensor that do not overlap.
fn two_mut<'a, F>(buf: &'a mut [F], a: View, b: View) -> (&'a mut [F], &'a mut [F]) {
    if a.offset <= b.offset {
        let (lo, hi) = buf.split_at_mut(b.offset);
        (&mut lo[a.offset..a.offset + a.len], &mut hi[..b.len])
    } else {
        let (y, x) = two_mut(buf, b, a);
        (x, y)
    }
}

impl<F: Float> CpuExecutor<F> {
    /// Allocates every tensor of `plan` and initialises the parameters from `seed`.
    pub fn new(plan: Plan, seed: u64) -> Self {
        let mut floats = Vec::with_capacity(plan.tensors.len());
        let mut ints = Vec::with_capacity(plan.tensors.len());
        for t in &plan.tensors {
            match t.dtype {
                DType::F32 => {
                    floats.push(vec![F::zero(); t.numel()]);
                    ints.push(Vec::new());
                }
                DType::U32 => {
                    floats.push(Vec::new());
                    ints.push(vec![0; t.numel()]);
                }
            }
        }
        let mut exec = Self {
            plan,
            floats,
            ints,
            steps_taken: 0,
        };
        let init = init_params(&exec.plan.layout, seed);
        exec.set_params_f32(&init);
        exec
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn set_params_f32(&mut self, flat: &[f32]) {
        let dst = &mut self.floats[self.plan.handles.params.0];
        for (d, &s) in dst.iter_mut().zip(flat) {
            *d = cast(s);
        }
    }

    /// Sets the parameters in the executor's own precision.
    pub fn set_params(&mut self, flat: &[F]) {
        self.floats[self.plan.handles.params.0].copy_from_slice(flat);
    }

    pub fn params(&self) -> &[F] {
        &self.floats[self.plan.handles.params.0]
    }

    pub fn grads(&self) -> &[F] {
        &self.floats[self.plan.handles.grads.0]
    }

    /// Any tensor by name (for tests and dumps).
    pub fn tensor_by_name(&self, name: &str) -> Option<&[F]> {
        let id = self.plan.tensors.iter().position(|t| t.name == name)?;
        Some(&self.floats[id])
    }

    fn f(&self, v: View) -> &[F] {
        &self.floats[v.tensor.0][v.offset..v.offset + v.len]
    }

    fn u(&self, v: View) -> &[u32] {
        &self.ints[v.tensor.0][v.offset..v.offset + v.len]
    }

    /// Uploads the batch (tokens, targets and the token index).
    pub fn upload_batch(&mut self, batch: &Batch) -> Result<(), BackendError> {
        batch.validate(&self.plan.model)?;
        if batch.shape != self.plan.shape {
            return Err(BackendError::ShapeMismatch {
                plan: self.plan.shape,
                batch: batch.shape,
            });
        }
        let h = self.plan.handles;
        let (offsets, positions) = token_index(&batch.inputs, self.plan.model.vocab);
        self.ints[h.tokens.0].copy_from_slice(&batch.inputs);
        self.ints[h.targets.0].copy_from_slice(&batch.targets);
        self.ints[h.token_offsets.0].copy_from_slice(&offsets);
        self.ints[h.token_positions.0].copy_from_slice(&positions);
        Ok(())
    }

    /// Runs the ops of the given phases, in plan order. Returns the loss.
    pub fn run_phases(&mut self, phases: &[Phase]) -> F {
        if phases.contains(&Phase::Optimizer) {
            self.steps_taken += 1;
        }
        for i in 0..self.plan.ops.len() {
            if phases.contains(&self.plan.ops[i].phase) {
                let op = self.plan.ops[i].op.clone();
                self.execute(&op);
            }
        }
        self.floats[self.plan.handles.loss.0][0]
    }

    /// Forward and backward: loss and gradients, parameters unchanged.
    pub fn forward_backward(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        Ok(self.run_phases(&[Phase::Forward, Phase::Backward]))
    }

    /// Forward only: the loss.
    pub fn forward(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        Ok(self.run_phases(&[Phase::Forward]))
    }

    fn execute(&mut self, op: &Op) {
        let m = self.plan.model;
        let (b, t) = (self.plan.shape.batch, self.plan.shape.seq);
        let (c, nh, vocab) = (m.d_model, m.n_heads, m.vocab);
        // Each arm takes its output tensor(s) out of `self`, computes from borrowed inputs and
        // puts them back, so inputs and outputs never alias.
        match *op {
            Op::Zero { dst } => {
                self.floats[dst.tensor.0][dst.offset..dst.offset + dst.len].fill(F::zero());
            }
            Op::Embedding {
                tokens,
                wte,
                wpe,
                out,
            } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                ops::embedding_forward(&mut o, self.u(tokens), self.f(wte), self.f(wpe), t, c);
                self.floats[out.tensor.0] = o;
            }
            Op::EmbeddingBackward {
                dout, dwte, dwpe, ..
            } => {
                let tokens = self.ints[self.plan.handles.tokens.0].clone();
                let mut g = std::mem::take(&mut self.floats[dwte.tensor.0]);
                let (gw, gp) = two_mut(&mut g, dwte, dwpe);
                ops::embedding_backward(gw, gp, self.f(dout), &tokens, t, c);
                self.floats[dwte.tensor.0] = g;
            }
            Op::LayerNorm {
                inp,
                weight,
                bias,
                out,
                mean,
                rstd,
            } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                let mut mu = std::mem::take(&mut self.floats[mean.tensor.0]);
                let mut rs = std::mem::take(&mut self.floats[rstd.tensor.0]);
                ops::layernorm_forward(
                    &mut o,
                    &mut mu,
                    &mut rs,
                    self.f(inp),
                    self.f(weight),
                    self.f(bias),
                    c,
                );
                self.floats[out.tensor.0] = o;
                self.floats[mean.tensor.0] = mu;
                self.floats[rstd.tensor.0] = rs;
            }
            Op::LayerNormBackward {
                inp,
                weight,
                mean,
                rstd,
                dout,
                dinp,
                dweight,
                dbias,
                accumulate,
            } => {
                let mut di = std::mem::take(&mut self.floats[dinp.tensor.0]);
                let mut g = std::mem::take(&mut self.floats[dweight.tensor.0]);
                let (gw, gb) = two_mut(&mut g, dweight, dbias);
                ops::layernorm_backward(
                    &mut di,
                    gw,
                    gb,
                    self.f(dout),
                    self.f(inp),
                    self.f(weight),
                    self.f(mean),
                    self.f(rstd),
                    c,
                    accumulate,
                );
                self.floats[dinp.tensor.0] = di;
                self.floats[dweight.tensor.0] = g;
            }
            Op::Matmul {
                inp,
                weight,
                bias,
                out,
                rows,
                k,
                n,
                weight_transposed,
            } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                ops::matmul_forward(
                    &mut o,
                    self.f(inp),
                    self.f(weight),
                    bias.map(|v| self.f(v)),
                    rows,
                    k,
                    n,
                    weight_transposed,
                );
                self.floats[out.tensor.0] = o;
            }
            Op::MatmulBackward {
                inp,
                weight,
                dout,
                dinp,
                dweight,
                dbias,
                rows,
                k,
                n,
                weight_transposed,
            } => {
                let mut di = std::mem::take(&mut self.floats[dinp.tensor.0]);
                let mut g = std::mem::take(&mut self.floats[dweight.tensor.0]);
                match dbias {
                    Some(db) => {
                        let (gw, gb) = two_mut(&mut g, dweight, db);
                        ops::matmul_backward(
                            &mut di,
                            gw,
                            Some(gb),
                            self.f(dout),
                            self.f(inp),
                            self.f(weight),
                            rows,
                            k,
                            n,
                            weight_transposed,
                        );
                    }
                    None => {
                        let gw = &mut g[dweight.offset..dweight.offset + dweight.len];
                        ops::matmul_backward(
                            &mut di,
                            gw,
                            None,
                            self.f(dout),
                            self.f(inp),
                            self.f(weight),
                            rows,
                            k,
                            n,
                            weight_transposed,
                        );
                    }
                }
                self.floats[dinp.tensor.0] = di;
                self.floats[dweight.tensor.0] = g;
            }
            Op::Attention { qkv, att, out } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                let mut a = std::mem::take(&mut self.floats[att.tensor.0]);
                ops::attention_forward(&mut o, &mut a, self.f(qkv), b, t, c, nh);
                self.floats[out.tensor.0] = o;
                self.floats[att.tensor.0] = a;
            }
            Op::AttentionBackward {
                qkv,
                att,
                dout,
                datt,
                dqkv,
            } => {
                let mut dq = std::mem::take(&mut self.floats[dqkv.tensor.0]);
                let mut da = std::mem::take(&mut self.floats[datt.tensor.0]);
                ops::attention_backward(
                    &mut dq,
                    &mut da,
                    self.f(dout),
                    self.f(qkv),
                    self.f(att),
                    b,
                    t,
                    c,
                    nh,
                );
                self.floats[dqkv.tensor.0] = dq;
                self.floats[datt.tensor.0] = da;
            }
            Op::Gelu { inp, out } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                ops::gelu_forward(&mut o, self.f(inp));
                self.floats[out.tensor.0] = o;
            }
            Op::GeluBackward { inp, dout, dinp } => {
                let mut o = std::mem::take(&mut self.floats[dinp.tensor.0]);
                ops::gelu_backward(&mut o, self.f(inp), self.f(dout));
                self.floats[dinp.tensor.0] = o;
            }
            Op::Residual { a, b: bb, out } => {
                let mut o = std::mem::take(&mut self.floats[out.tensor.0]);
                ops::residual_forward(&mut o, self.f(a), self.f(bb));
                self.floats[out.tensor.0] = o;
            }
            Op::ResidualBackward { dout, da } => {
                let mut o = std::mem::take(&mut self.floats[da.tensor.0]);
                ops::residual_backward(&mut o, self.f(dout));
                self.floats[da.tensor.0] = o;
            }
            Op::CrossEntropy {
                logits,
                targets,
                probs,
                losses,
                loss,
            } => {
                let mut p = std::mem::take(&mut self.floats[probs.tensor.0]);
                let mut l = std::mem::take(&mut self.floats[losses.tensor.0]);
                let mean = ops::crossentropy_forward(
                    &mut p,
                    &mut l,
                    self.f(logits),
                    self.u(targets),
                    vocab,
                );
                self.floats[probs.tensor.0] = p;
                self.floats[losses.tensor.0] = l;
                self.floats[loss.tensor.0][0] = mean;
            }
            Op::CrossEntropyBackward {
                probs,
                targets,
                dlogits,
            } => {
                let mut d = std::mem::take(&mut self.floats[dlogits.tensor.0]);
                ops::crossentropy_backward(&mut d, self.f(probs), self.u(targets), vocab);
                self.floats[dlogits.tensor.0] = d;
            }
            Op::AdamW {
                params,
                grads,
                m: mm,
                v,
            } => {
                let o = self.plan.optimizer;
                let s = AdamWStep {
                    lr: o.lr,
                    beta1: o.beta1,
                    beta2: o.beta2,
                    eps: o.eps,
                    weight_decay: o.weight_decay,
                    step: self.steps_taken,
                    decay_end: self.plan.layout.decay_end,
                };
                let mut p = std::mem::take(&mut self.floats[params.tensor.0]);
                let mut m1 = std::mem::take(&mut self.floats[mm.tensor.0]);
                let mut m2 = std::mem::take(&mut self.floats[v.tensor.0]);
                ops::adamw_step(&mut p, &mut m1, &mut m2, self.f(grads), &s);
                self.floats[params.tensor.0] = p;
                self.floats[mm.tensor.0] = m1;
                self.floats[v.tensor.0] = m2;
            }
            Op::Sgd {
                params,
                grads,
                momentum,
            } => {
                let o = self.plan.optimizer;
                let mut p = std::mem::take(&mut self.floats[params.tensor.0]);
                let mut buf = momentum.map(|mv| std::mem::take(&mut self.floats[mv.tensor.0]));
                ops::sgd_step(
                    &mut p,
                    buf.as_deref_mut(),
                    self.f(grads),
                    o.lr,
                    o.momentum,
                    o.weight_decay,
                );
                self.floats[params.tensor.0] = p;
                if let (Some(mv), Some(buf)) = (momentum, buf) {
                    self.floats[mv.tensor.0] = buf;
                }
            }
        }
    }
}

impl Trainer for CpuExecutor<f32> {
    fn backend_name(&self) -> String {
        "cpu (reference)".to_string()
    }
    fn plan(&self) -> &Plan {
        &self.plan
    }
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        Ok(self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]))
    }
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.forward_backward(batch)
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(self.params().to_vec())
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(self.grads().to_vec())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        self.set_params(flat);
        Ok(())
    }
}
