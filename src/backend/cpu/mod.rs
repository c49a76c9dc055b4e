//! The CPU reference backend: executes a [`Plan`] op by op with the twins in [`ops`].

pub mod ops;

use num_traits::Float;

use super::{BackendError, Trainer};
use crate::data::Batch;
use crate::model::init::init_params;
use crate::plan::{DType, Op, Phase, Plan, TensorId, View, token_index};
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
        let mut exec = Self { plan, floats, ints, steps_taken: 0 };
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

    /// Overwrites a float tensor (extra values are ignored).
    pub fn write_tensor(&mut self, id: TensorId, values: &[F]) {
        let dst = &mut self.floats[id.0];
        let n = dst.len().min(values.len());
        dst[..n].copy_from_slice(&values[..n]);
    }

    /// Overwrites an integer tensor (extra values are ignored).
    pub fn write_tensor_u32(&mut self, id: TensorId, values: &[u32]) {
        let dst = &mut self.ints[id.0];
        let n = dst.len().min(values.len());
        dst[..n].copy_from_slice(&values[..n]);
    }

    /// A float tensor's values.
    pub fn tensor(&self, id: TensorId) -> &[F] {
        &self.floats[id.0]
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
            return Err(BackendError::ShapeMismatch { plan: self.plan.shape, batch: batch.shape });
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

    /// Runs `f` with copies of the output views and writes them back afterwards, so outputs
    /// never alias inputs (or each other) whatever tensors they live in. Accumulating outputs
    /// start from their current values.
    fn with_outputs<const N: usize>(&mut self, views: [View; N], f: impl FnOnce(&Self, &mut [Vec<F>; N])) {
        let mut bufs = views.map(|v| self.floats[v.tensor.0][v.offset..v.offset + v.len].to_vec());
        f(self, &mut bufs);
        for (v, b) in views.iter().zip(bufs) {
            self.floats[v.tensor.0][v.offset..v.offset + v.len].copy_from_slice(&b);
        }
    }

    fn execute(&mut self, op: &Op) {
        let m = self.plan.model;
        let (b, t) = (self.plan.shape.batch, self.plan.shape.seq);
        let (c, nh, vocab) = (m.d_model, m.n_heads, m.vocab);
        match *op {
            Op::Zero { dst } => {
                self.floats[dst.tensor.0][dst.offset..dst.offset + dst.len].fill(F::zero());
            }
            Op::Embedding { tokens, wte, wpe, out } => self.with_outputs([out], |s, [o]| {
                ops::embedding_forward(o, s.u(tokens), s.f(wte), s.f(wpe), t, c);
            }),
            Op::EmbeddingBackward { tokens, dout, dwte, dwpe, .. } => self.with_outputs([dwte, dwpe], |s, [gw, gp]| {
                ops::embedding_backward(gw, gp, s.f(dout), s.u(tokens), t, c);
            }),
            Op::LayerNorm { inp, weight, bias, out, mean, rstd } => {
                self.with_outputs([out, mean, rstd], |s, [o, mu, rs]| {
                    ops::layernorm_forward(o, mu, rs, s.f(inp), s.f(weight), s.f(bias), c);
                })
            }
            Op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } => self
                .with_outputs([dinp, dweight, dbias], |s, [di, gw, gb]| {
                    let (x, w, mu, rs) = (s.f(inp), s.f(weight), s.f(mean), s.f(rstd));
                    ops::layernorm_backward(di, gw, gb, s.f(dout), x, w, mu, rs, c, accumulate);
                }),
            Op::Matmul { inp, weight, bias, out, rows, k, n, weight_transposed } => {
                self.with_outputs([out], |s, [o]| {
                    let bias = bias.map(|v| s.f(v));
                    ops::matmul_forward(o, s.f(inp), s.f(weight), bias, rows, k, n, weight_transposed);
                })
            }
            Op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, rows, k, n, weight_transposed } => {
                match dbias {
                    Some(db) => self.with_outputs([dinp, dweight, db], |s, [di, gw, gb]| {
                        let (d, x, w) = (s.f(dout), s.f(inp), s.f(weight));
                        ops::matmul_backward(di, gw, Some(gb), d, x, w, rows, k, n, weight_transposed);
                    }),
                    None => self.with_outputs([dinp, dweight], |s, [di, gw]| {
                        let (d, x, w) = (s.f(dout), s.f(inp), s.f(weight));
                        ops::matmul_backward(di, gw, None, d, x, w, rows, k, n, weight_transposed);
                    }),
                }
            }
            Op::Attention { qkv, att, out } => self.with_outputs([out, att], |s, [o, a]| {
                ops::attention_forward(o, a, s.f(qkv), b, t, c, nh);
            }),
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => self.with_outputs([dqkv, datt], |s, [dq, da]| {
                ops::attention_backward(dq, da, s.f(dout), s.f(qkv), s.f(att), b, t, c, nh);
            }),
            Op::Gelu { inp, out } => self.with_outputs([out], |s, [o]| ops::gelu_forward(o, s.f(inp))),
            Op::GeluBackward { inp, dout, dinp } => {
                self.with_outputs([dinp], |s, [o]| ops::gelu_backward(o, s.f(inp), s.f(dout)))
            }
            Op::Residual { a, b: bb, out } => {
                self.with_outputs([out], |s, [o]| ops::residual_forward(o, s.f(a), s.f(bb)))
            }
            Op::ResidualBackward { dout, da } => self.with_outputs([da], |s, [o]| ops::residual_backward(o, s.f(dout))),
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                self.with_outputs([probs, losses, loss], |s, [p, l, mean]| {
                    mean[0] = ops::crossentropy_forward(p, l, s.f(logits), s.u(targets), vocab);
                })
            }
            Op::CrossEntropyBackward { probs, targets, dlogits } => self.with_outputs([dlogits], |s, [d]| {
                ops::crossentropy_backward(d, s.f(probs), s.u(targets), vocab);
            }),
            Op::AdamW { params, grads, m: mm, v } => {
                let o = self.plan.optimizer;
                let step = AdamWStep {
                    lr: o.lr,
                    beta1: o.beta1,
                    beta2: o.beta2,
                    eps: o.eps,
                    weight_decay: o.weight_decay,
                    step: self.steps_taken,
                    decay_end: self.plan.layout.decay_end,
                };
                self.with_outputs([params, mm, v], |s, [p, m1, m2]| ops::adamw_step(p, m1, m2, s.f(grads), &step));
            }
            Op::Sgd { params, grads, momentum } => {
                let o = self.plan.optimizer;
                match momentum {
                    Some(buf) => self.with_outputs([params, buf], |s, [p, mb]| {
                        ops::sgd_step(p, Some(mb), s.f(grads), o.lr, o.momentum, o.weight_decay);
                    }),
                    None => self.with_outputs([params], |s, [p]| {
                        ops::sgd_step(p, None, s.f(grads), o.lr, o.momentum, o.weight_decay);
                    }),
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
