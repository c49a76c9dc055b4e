//! A GPU executor that goes on at another batch shape (documents' batches change their length
//! from step to step): the model states stay in their segment buffers, the allocator keeps its
//! segments and cache, and the plan's dispatches are recorded afresh for the new shape.

use super::super::kernels::Recorder;
use super::bind::uniform_buffer;
use super::record::record_plan;
use super::{GpuError, GpuExecutor};
use crate::backend::BackendError;
use crate::plan::Plan;

impl GpuExecutor {
    /// Continues with `plan`, the same model and techniques at another batch shape (see
    /// `CpuExecutor::reshape`). A batch that no longer fits is an out-of-memory error.
    pub fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        let same = (plan.model, plan.techniques, plan.optimizer, plan.rank)
            == (self.plan.model, self.plan.techniques, self.plan.optimizer, self.plan.rank);
        if self.recording.is_some() || self.pending.is_some() || self.host_wait.is_some() || !same {
            return Err(BackendError::Internal("a plan of other model states, or while a step runs".into()));
        }
        let limits = self.ctx.limits();
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        if let Some(t) = plan.tensors.iter().find(|t| t.size_bytes() > max_binding) {
            let what = format!("tensor {} ({:?})", t.name, t.shape);
            return Err(GpuError::ExceedsLimit { what, needed: t.size_bytes(), limit: max_binding, bytes: true }.into());
        }
        let mut rec = Recorder::new(limits.max_compute_workgroups_per_dimension);
        let (dynamic, op_commands) = record_plan(&self.kernels, &plan, &mut rec, self.ctx.native_f16())?;
        let setup = self.allocator.reshape(&self.plan, &plan).map_err(|e| BackendError::Internal(e.to_string()))?;
        self.uniform_buffer = uniform_buffer(&self.ctx, "step uniforms", &rec.uniforms);
        self.bound = (0..rec.commands.len()).map(|_| None).collect();
        self.rec = rec;
        self.op_commands = op_commands;
        self.dynamic = dynamic;
        self.plan = plan;
        // The new batch's segments, if the cache could not hold it.
        self.sync_buffers(&mut Vec::new())?;
        setup.map_err(BackendError::OutOfMemory)
    }
}
