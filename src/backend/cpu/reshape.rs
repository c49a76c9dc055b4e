//! A CPU executor that goes on at another batch shape: documents' batches change their length
//! from step to step, and an eager framework keeps its model states and its allocator's cache.

use super::{CpuExecutor, ops};
use crate::backend::BackendError;
use crate::plan::{Plan, TensorId};

impl<F: ops::Real> CpuExecutor<F> {
    /// Continues with `plan`, the same model and techniques at another batch shape (the next
    /// batch of documents is longer or shorter): the model states keep their values and places,
    /// the allocator its segments and cache, as the next step of an eager framework does; the new
    /// batch's tensors are allocated. A batch that no longer fits is an out-of-memory error.
    pub fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        let same = (plan.model, plan.techniques, plan.optimizer, plan.rank)
            == (self.plan.model, self.plan.techniques, self.plan.optimizer, self.plan.rank);
        if self.running.is_some() || !same {
            return Err(BackendError::Internal("a plan of other model states, or while a step runs".into()));
        }
        let setup = self.allocator.reshape(&self.plan, &plan).map_err(|e| BackendError::Internal(e.to_string()))?;
        self.plan = plan;
        self.sync_segments();
        setup.map_err(BackendError::OutOfMemory)?;
        let lifetimes = self.plan.lifetimes();
        for (i, l) in lifetimes.iter().enumerate() {
            if *l == crate::plan::Lifetime::Step && self.allocator.is_allocated(TensorId(i)) {
                self.materialize(TensorId(i))?;
            }
        }
        Ok(())
    }
}
