//! The model, run one serving step at a time on either backend: each step's plan (its shape,
//! the caches' and tables' sizes), its inputs uploaded, the forward pass, the next tokens read
//! off the logits greedily.

use crate::backend::{BackendError, BackendKind};
use crate::backend::{Executor, Gpu};
use crate::memory::{Budget, StepMemory};
use crate::model::ModelConfig;
use crate::plan::serving::{ServeHandles, ServeStep};
use crate::plan::{Phase, Plan, Precision, View};

use super::cache::SpaceShape;

/// One step's inputs, request by request (B requests of T new tokens each).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepInputs {
    pub requests: usize,
    pub new_tokens: usize,
    /// B·T: the new tokens, request after request.
    pub tokens: Vec<u32>,
    /// B·T: each new token's position.
    pub positions: Vec<u32>,
    /// B·T: each new token's slot in the caches.
    pub slots: Vec<u32>,
    /// B·W: each request's block table.
    pub tables: Vec<u32>,
    /// B: each request's tokens in the cache once this step's are written.
    pub lens: Vec<u32>,
}

/// An executor of serving steps.
pub struct Runner {
    exec: Executor,
    model: ModelConfig,
    precision: Precision,
    space: SpaceShape,
    /// The plan's handles (the ids are the same in every step's plan).
    handles: ServeHandles,
}

impl Runner {
    /// Opens an executor on `kind` (on `gpu` for the GPU) with the parameters from `seed` and
    /// caches of `space`'s size, under `budget`.
    pub async fn open(
        kind: BackendKind,
        gpu: Option<&Gpu>,
        model: &ModelConfig,
        precision: Precision,
        space: SpaceShape,
        seed: u64,
        budget: Budget,
    ) -> Result<Self, BackendError> {
        let plan = plan(model, precision, space, 1, 1)?;
        let handles =
            plan.serve_handles().cloned().ok_or_else(|| BackendError::Internal("not a serving plan".into()))?;
        let exec = crate::backend::open(kind, gpu, plan, seed, budget).await?;
        Ok(Self { exec, model: *model, precision, space, handles })
    }

    /// Replaces the parameters (all of them, flat).
    pub fn write_params(&mut self, flat: &[f32]) {
        match &mut self.exec {
            Executor::Cpu(e) => e.set_params_f32(flat),
            Executor::Gpu(e) => e.write_params(flat),
            _ => {}
        }
    }

    /// The allocator's account of the last step.
    pub fn memory(&self) -> Option<&StepMemory> {
        match &self.exec {
            Executor::Cpu(e) => e.memory(),
            Executor::Gpu(e) => e.memory(),
            _ => None,
        }
    }

    /// Runs one step and returns the logits of each request's last new token (B × V).
    pub async fn step(&mut self, inputs: &StepInputs) -> Result<Vec<f32>, BackendError> {
        let (b, t) = (inputs.requests, inputs.new_tokens);
        // A step of the shape the executor runs reuses its plan; another shape builds one.
        if (b, t) != self.exec_shape() {
            self.exec.reshape(plan(&self.model, self.precision, self.space, b, t)?)?;
        }
        let h = &self.handles;
        let uploads = [
            (h.tokens, &inputs.tokens),
            (h.positions, &inputs.positions),
            (h.slots, &inputs.slots),
            (h.blocks, &inputs.tables),
            (h.lens, &inputs.lens),
        ];
        let v = self.model.vocab as u64;
        match &mut self.exec {
            Executor::Cpu(e) => {
                for (id, values) in uploads {
                    e.write_tensor_u32(id, values);
                }
                e.run_phases(&[Phase::Forward])?;
                let logits = e.tensor(h.logits);
                Ok(last_rows(logits, b, t, v as usize))
            }
            Executor::Gpu(e) => {
                for (id, values) in uploads {
                    e.write_tensor(id, bytemuck::cast_slice(values));
                }
                e.run_phases(&[Phase::Forward]).await?;
                let mut out = Vec::with_capacity(b * v as usize);
                if t == 1 {
                    let view = View { tensor: h.logits, offset: 0, len: b as u64 * v };
                    out = e.read_view_async(view).await?;
                } else {
                    for r in 0..b as u64 {
                        let row = (r * t as u64 + t as u64 - 1) * v;
                        out.extend(e.read_view_async(View { tensor: h.logits, offset: row, len: v }).await?);
                    }
                }
                Ok(out)
            }
            _ => Err(BackendError::Internal("serving runs on one GPU".into())),
        }
    }

    fn exec_shape(&self) -> (usize, usize) {
        let p = match &self.exec {
            Executor::Cpu(e) => e.plan(),
            Executor::Gpu(e) => e.plan(),
            _ => return (0, 0),
        };
        (p.shape.batch, p.shape.seq)
    }

    /// The model's vocabulary: the width of a row of logits.
    pub fn vocab(&self) -> usize {
        self.model.vocab
    }

    /// The backend it runs on.
    pub fn backend(&self) -> BackendKind {
        self.exec.kind()
    }
}

/// A serving step's plan: B requests of T new tokens over caches of `space`'s size.
pub fn plan(
    model: &ModelConfig,
    precision: Precision,
    space: SpaceShape,
    b: usize,
    t: usize,
) -> Result<Plan, BackendError> {
    let step = ServeStep {
        requests: b,
        new_tokens: t,
        pool_slots: space.slots(),
        table_width: space.table_width,
        block_size: space.block_size,
    };
    Ok(Plan::serving(model, precision, &step)?)
}

/// The logits of each request's last token, out of all B·T rows.
fn last_rows(logits: &[f32], b: usize, t: usize, v: usize) -> Vec<f32> {
    (0..b).flat_map(|r| logits.get((r * t + t - 1) * v..(r * t + t) * v).unwrap_or(&[]).iter().copied()).collect()
}

/// The greedy choice of each row of `logits` (rows of `v`): the first largest, as
/// `torch.argmax` picks it (a NaN is never chosen).
pub fn greedy(logits: &[f32], v: usize) -> Vec<u32> {
    logits
        .chunks(v.max(1))
        .map(|row| {
            let mut best = (0usize, f32::NEG_INFINITY);
            for (i, &x) in row.iter().enumerate() {
                if x > best.1 {
                    best = (i, x);
                }
            }
            best.0 as u32
        })
        .collect()
}
