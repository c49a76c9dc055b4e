//! A CPU step spread over many calls — the app's frames, the browser's worker — whether it
//! runs one GPU's plan or several simulated GPUs'.

use super::cluster::CpuCluster;
use super::cpu::CpuExecutor;
use super::{BackendError, Executor};
use crate::data::Batch;
use crate::memory::StepMemory;
use crate::plan::{Phase, Plan};

/// What drives a CPU step a few ops at a time.
pub trait Sliced {
    /// Rank 0's plan (every rank's has the same ops).
    fn plan(&self) -> &Plan;
    /// Uploads the step's batch: every simulated GPU's share of it.
    fn upload(&mut self, batch: &Batch) -> Result<(), BackendError>;
    /// Starts a run of `phases`.
    fn start(&mut self, phases: &[Phase]);
    /// Up to `max_ops` more ops; the loss once the run is finished.
    fn resume(&mut self, max_ops: usize) -> Option<Result<f32, BackendError>>;
    /// (ops looked at, ops in the plans) while a run is unfinished.
    fn progress(&self) -> Option<(usize, usize)>;
    fn running(&self) -> bool;
    /// Each simulated GPU's record of the last step (one on one GPU).
    fn rank_memories(&self) -> Vec<&StepMemory>;
}

impl Sliced for CpuExecutor<f32> {
    fn plan(&self) -> &Plan {
        CpuExecutor::plan(self)
    }
    fn upload(&mut self, batch: &Batch) -> Result<(), BackendError> {
        self.upload_batch(batch)
    }
    fn start(&mut self, phases: &[Phase]) {
        self.start_phases(phases);
    }
    fn resume(&mut self, max_ops: usize) -> Option<Result<f32, BackendError>> {
        CpuExecutor::resume(self, max_ops)
    }
    fn progress(&self) -> Option<(usize, usize)> {
        CpuExecutor::progress(self)
    }
    fn running(&self) -> bool {
        CpuExecutor::running(self)
    }
    fn rank_memories(&self) -> Vec<&StepMemory> {
        self.memory().into_iter().collect()
    }
}

impl Sliced for CpuCluster<f32> {
    fn plan(&self) -> &Plan {
        super::Trainer::plan(self)
    }
    fn upload(&mut self, batch: &Batch) -> Result<(), BackendError> {
        self.upload_batch(batch)
    }
    fn start(&mut self, phases: &[Phase]) {
        self.start_phases(phases);
    }
    fn resume(&mut self, max_ops: usize) -> Option<Result<f32, BackendError>> {
        CpuCluster::resume(self, max_ops)
    }
    fn progress(&self) -> Option<(usize, usize)> {
        CpuCluster::progress(self)
    }
    fn running(&self) -> bool {
        CpuCluster::running(self)
    }
    fn rank_memories(&self) -> Vec<&StepMemory> {
        self.memories().into_iter().flatten().collect()
    }
}

impl Executor {
    /// The CPU backend's step driver (None on the GPU backend).
    pub fn sliced(&mut self) -> Option<&mut dyn Sliced> {
        match self {
            Executor::Cpu(e) => Some(e.as_mut()),
            Executor::CpuCluster(e) => Some(e.as_mut()),
            Executor::Gpu(_) | Executor::GpuCluster(_) => None,
        }
    }
}
