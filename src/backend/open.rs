//! The one way into a step: [`open`] makes the executor of a plan on the backend asked for. The
//! app, the CLI and the browser's CPU worker all go through it, so a GPU asked for where there
//! is none is the same clear error everywhere, never a silent fall back to the CPU.

use std::sync::Arc;

use super::cpu::CpuExecutor;
use super::gpu::{GpuContext, GpuExecutor, Kernels};
use super::{BackendError, BackendKind};
use crate::memory::Budget;
use crate::plan::Plan;

/// A GPU steps can run on: its device and its compute pipelines, built once per device.
#[derive(Clone)]
pub struct Gpu {
    pub ctx: GpuContext,
    pub kernels: Arc<Kernels>,
}

impl Gpu {
    /// Builds the pipelines on `ctx`'s device (inside error scopes), with its fastest GEMM.
    pub async fn new(ctx: GpuContext) -> Result<Self, BackendError> {
        let kernels = super::gpu::executor::build_kernels(&ctx).await?;
        Ok(Self { ctx, kernels })
    }

    /// A headless device and its pipelines (the CLI, tests), blocking until both are ready.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_headless() -> Result<Self, BackendError> {
        let ctx = GpuContext::new_headless_blocking()?;
        pollster::block_on(Self::new(ctx))
    }
}

/// An executor of either backend, as [`open`] made it.
pub enum Executor {
    Cpu(Box<CpuExecutor<f32>>),
    Gpu(Box<GpuExecutor>),
    /// Data parallelism: the ranks of a distributed plan, on the CPU.
    CpuCluster(Box<super::cluster::CpuCluster<f32>>),
    /// Data parallelism on the GPU: the ranks' executors on the one device.
    GpuCluster(Box<super::gpu::cluster::GpuCluster>),
}

impl Executor {
    /// Which backend it is.
    pub fn kind(&self) -> BackendKind {
        match self {
            Executor::Cpu(_) | Executor::CpuCluster(_) => BackendKind::Cpu,
            Executor::Gpu(_) | Executor::GpuCluster(_) => BackendKind::Gpu,
        }
    }

    /// The sequence length of the plan it runs (rank 0's).
    pub fn seq(&self) -> usize {
        match self {
            Executor::Cpu(e) => e.plan().shape.seq,
            Executor::Gpu(e) => e.plan().shape.seq,
            Executor::CpuCluster(e) => e.plan().map_or(0, |p| p.shape.seq),
            Executor::GpuCluster(e) => e.plan().map_or(0, |p| p.shape.seq),
        }
    }

    /// Goes on at the batch shape of `plan` (see `CpuExecutor::reshape`): one GPU only.
    pub fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        match self {
            Executor::Cpu(e) => e.reshape(plan),
            Executor::Gpu(e) => e.reshape(plan),
            _ => Err(BackendError::NotOnGpu(super::CpuOnly::UnevenBatchesOverGpus)),
        }
    }

    /// Goes on at `batch`'s length when it is not the length it runs (padded and bucketed batches
    /// bring their own): `plan`'s request at the batch's length.
    pub fn follow(&mut self, plan: &Plan, batch: &crate::data::Batch) -> Result<(), BackendError> {
        if batch.shape.seq == self.seq() {
            return Ok(());
        }
        let mut request = plan.request();
        request.micro.seq = batch.shape.seq;
        self.reshape(request.validate()?.plan())
    }
}

/// Opens an executor for `plan` on `kind`, its parameters initialised from `seed`, under
/// `budget`. The GPU backend runs on `gpu`; asked for without one, it is
/// [`BackendError::NoGpu`]. The CPU backend needs nothing and is ready at once (its future
/// completes on the first poll: see [`super::ready_now`]).
pub async fn open(
    kind: BackendKind,
    gpu: Option<&Gpu>,
    plan: Plan,
    seed: u64,
    budget: Budget,
) -> Result<Executor, BackendError> {
    if plan.techniques.parallel.is_distributed() {
        // Every rank's plan, from the request this one was built from.
        let request = plan.request().validate()?;
        return match kind {
            BackendKind::Cpu => {
                Ok(Executor::CpuCluster(Box::new(super::cluster::CpuCluster::new(&request, seed, budget)?)))
            }
            BackendKind::Gpu => match gpu {
                Some(g) => Ok(Executor::GpuCluster(Box::new(
                    super::gpu::cluster::GpuCluster::new(&g.ctx, &g.kernels, &request, seed, budget).await?,
                ))),
                None => Err(BackendError::NoGpu),
            },
        };
    }
    match (kind, gpu) {
        (BackendKind::Cpu, _) => Ok(Executor::Cpu(Box::new(CpuExecutor::with_budget(plan, seed, budget)?))),
        (BackendKind::Gpu, Some(g)) => {
            Ok(Executor::Gpu(Box::new(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, seed, budget).await?)))
        }
        (BackendKind::Gpu, None) => Err(BackendError::NoGpu),
    }
}

/// Blocking wrappers for the CLI and tests: each call goes to the executor inside.
#[cfg(not(target_arch = "wasm32"))]
impl super::Trainer for Executor {
    fn backend_name(&self) -> String {
        self.as_trainer().backend_name()
    }
    fn plan(&self) -> &Plan {
        self.as_trainer().plan()
    }
    fn train_step(&mut self, batch: &crate::data::Batch) -> Result<f32, BackendError> {
        self.as_trainer_mut().train_step(batch)
    }
    fn compute_grads(&mut self, batch: &crate::data::Batch) -> Result<f32, BackendError> {
        self.as_trainer_mut().compute_grads(batch)
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        self.as_trainer_mut().read_params()
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        self.as_trainer_mut().read_grads()
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        self.as_trainer_mut().write_params(flat)
    }
    fn memory(&self) -> Option<&crate::memory::StepMemory> {
        self.as_trainer().memory()
    }
    fn rank_memories(&self) -> Vec<&crate::memory::StepMemory> {
        self.as_trainer().rank_memories()
    }
    fn device_figures(&self) -> crate::memory::device::DeviceFigures {
        self.as_trainer().device_figures()
    }
    fn loss_scaler(&self) -> Option<&crate::plan::LossScaler> {
        self.as_trainer().loss_scaler()
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut crate::plan::LossScaler> {
        self.as_trainer_mut().loss_scaler_mut()
    }
    fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        self.as_trainer_mut().reshape(plan)
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Executor {
    fn as_trainer(&self) -> &dyn super::Trainer {
        match self {
            Executor::Cpu(e) => e.as_ref(),
            Executor::Gpu(e) => e.as_ref(),
            Executor::CpuCluster(e) => e.as_ref(),
            Executor::GpuCluster(e) => e.as_ref(),
        }
    }
    fn as_trainer_mut(&mut self) -> &mut dyn super::Trainer {
        match self {
            Executor::Cpu(e) => e.as_mut(),
            Executor::Gpu(e) => e.as_mut(),
            Executor::CpuCluster(e) => e.as_mut(),
            Executor::GpuCluster(e) => e.as_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ready_now;
    use crate::model::{ModelConfig, StepShape};
    use crate::plan::OptimizerConfig;

    fn plan() -> Plan {
        Plan::build(&ModelConfig::toy(58), StepShape { batch: 2, seq: 8 }, &OptimizerConfig::default()).expect("plan")
    }

    #[test]
    fn the_cpu_opens_at_once_and_a_gpu_without_one_is_an_error() {
        let cpu = ready_now(open(BackendKind::Cpu, None, plan(), 0, Budget::Unlimited));
        let cpu = cpu.expect("ready on the first poll").expect("opens");
        assert_eq!(cpu.kind(), BackendKind::Cpu);
        let gpu = ready_now(open(BackendKind::Gpu, None, plan(), 0, Budget::Unlimited)).expect("ready");
        match gpu {
            Err(e @ BackendError::NoGpu) => assert!(e.to_string().contains("no GPU is open"), "{e}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a GPU executor without a GPU"),
        }
    }
}
