//! Data parallelism on the GPU backend: N executors, one per simulated GPU, each with its own
//! allocator and segment buffers on the one real device, recorded in lockstep. Each rank's ops
//! up to a collective are submitted; the collective is then encoded over the ranks' buffers
//! (`shaders/reduce.wgsl`), in the same order of additions as the CPU backend's cluster
//! (`backend::cluster::mean_order`). The queue runs everything in submission order.
//!
//! The ranks share one device's time: a step takes about as long as all ranks' work together.
//! Mixed precision over several simulated GPUs runs on the CPU backend only, so far (its
//! buckets would need 16-bit collectives).

use std::sync::Arc;

use super::executor::RecordStop;
use super::kernels::{Encoding, Kernels, ReduceTarget};
use super::{GpuContext, GpuExecutor};
use crate::backend::BackendError;
use crate::backend::cluster::{mean_order, rank_batch};
use crate::data::Batch;
use crate::memory::{Budget, StepMemory};
use crate::plan::{Op, Phase, Plan, TensorId, ValidRequest, View};

/// N GPU executors in lockstep on one device.
pub struct GpuCluster {
    ctx: GpuContext,
    kernels: Arc<Kernels>,
    ranks: Vec<GpuExecutor>,
    /// The losses of a submitted step that are back, rank by rank.
    polled: Vec<Option<f32>>,
}

impl GpuCluster {
    /// Every rank's executor under its own `budget`, from the same initial parameters.
    pub async fn new(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        request: &ValidRequest,
        seed: u64,
        budget: impl Into<Budget>,
    ) -> Result<Self, BackendError> {
        let budget = budget.into();
        if request.techniques().precision.dtype().is_half() {
            return Err(BackendError::NotOnGpu(crate::backend::CpuOnly::MixedPrecisionOverGpus));
        }
        let mut ranks = Vec::new();
        for plan in request.rank_plans() {
            ranks.push(GpuExecutor::with_budget(ctx, kernels, plan, seed, budget).await?);
        }
        Ok(Self { ctx: ctx.clone(), kernels: kernels.clone(), ranks, polled: Vec::new() })
    }

    pub fn ranks(&self) -> &[GpuExecutor] {
        &self.ranks
    }

    /// Rank 0's plan (every rank's has the same ops).
    pub fn plan(&self) -> Option<&Plan> {
        self.ranks.first().map(GpuExecutor::plan)
    }

    /// Each rank's record of its last step.
    pub fn memories(&self) -> Vec<&StepMemory> {
        self.ranks.iter().filter_map(GpuExecutor::memory).collect()
    }

    /// Uploads each rank's share of the global batch.
    pub fn upload_batch(&mut self, batch: &Batch) -> Result<(), BackendError> {
        let n = self.ranks.len();
        for (r, exec) in self.ranks.iter_mut().enumerate() {
            exec.upload_batch(&rank_batch(batch, r, n)?)?;
        }
        Ok(())
    }

    /// Uploads `batch` and runs a whole step; the mean of the ranks' losses.
    pub async fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).await
    }

    /// Starts a whole step on `batch` without waiting for it (the app's path, which never blocks
    /// a frame on the GPU): every rank's work and the collectives are submitted;
    /// [`Self::poll_step`] says when the losses are back.
    pub fn submit_step(&mut self, batch: &Batch) -> Result<(), BackendError> {
        self.upload_batch(batch)?;
        let done = self.record(&[Phase::Forward, Phase::Backward, Phase::Optimizer])?;
        self.ctx.queue.submit(done);
        for exec in &mut self.ranks {
            exec.arm_readback();
        }
        self.polled = vec![None; self.ranks.len()];
        Ok(())
    }

    /// Whether a submitted step is still running.
    pub fn step_in_flight(&self) -> bool {
        self.ranks.iter().any(GpuExecutor::step_in_flight)
    }

    /// The mean loss of the step [`Self::submit_step`] started, once every rank's is back.
    pub fn poll_step(&mut self) -> Option<Result<f32, BackendError>> {
        for (exec, slot) in self.ranks.iter_mut().zip(self.polled.iter_mut()) {
            if slot.is_none() && exec.step_in_flight() {
                match exec.poll_step() {
                    Some(Ok(loss)) => *slot = Some(loss),
                    Some(Err(e)) => {
                        self.polled.clear();
                        return Some(Err(e));
                    }
                    None => {}
                }
            }
        }
        if self.polled.is_empty() || self.polled.iter().any(Option::is_none) {
            return None;
        }
        let losses: Vec<f32> = self.polled.drain(..).flatten().collect();
        Some(Ok(losses.iter().sum::<f32>() / losses.len().max(1) as f32))
    }

    /// Runs `phases` on every rank in lockstep, encoding each collective once every rank
    /// reached it. The first rank that fails stops the step on every rank.
    pub async fn run_phases(&mut self, phases: &[Phase]) -> Result<f32, BackendError> {
        let done = self.record(phases)?;
        self.ctx.scoped("running the step", || self.ctx.queue.submit(done)).await?;
        let optimizer = phases.contains(&Phase::Optimizer);
        let mut sum = 0.0;
        for exec in &mut self.ranks {
            sum += exec.collect_run(optimizer).await?;
        }
        Ok(sum / self.ranks.len().max(1) as f32)
    }

    /// Records `phases` on every rank in lockstep, submitting each rank's ops up to a collective
    /// and then the collective; returns every rank's last commands (with its losses' readback),
    /// unsubmitted.
    fn record(&mut self, phases: &[Phase]) -> Result<Vec<wgpu::CommandBuffer>, BackendError> {
        for r in 0..self.ranks.len() {
            if let Err(e) = self.ranks[r].begin_cluster_run(phases) {
                return Err(self.abandon(e));
            }
        }
        loop {
            let mut at = None;
            let mut done = Vec::new();
            for r in 0..self.ranks.len() {
                match self.ranks[r].record_to_collective() {
                    Ok(RecordStop::Collective(i)) => at = Some(i),
                    Ok(RecordStop::Done(cmd)) => done.push(cmd),
                    // Offload is refused over several GPUs (`Offload::validate`).
                    Ok(RecordStop::Host(_)) => {
                        let e = BackendError::Internal("offload does not run over several GPUs".into());
                        return Err(self.abandon(e));
                    }
                    Err(e) => return Err(self.abandon(e)),
                }
            }
            match at {
                Some(i) if done.is_empty() => {
                    self.collective(i);
                    for r in 0..self.ranks.len() {
                        if let Err(e) = self.ranks[r].finish_collective(i) {
                            return Err(self.abandon(e));
                        }
                    }
                }
                Some(_) => {
                    return Err(self.abandon(BackendError::Internal("the ranks' plans went out of step".into())));
                }
                None => return Ok(done),
            }
        }
    }

    fn abandon(&mut self, e: BackendError) -> BackendError {
        for exec in &mut self.ranks {
            exec.abandon_recording();
        }
        e
    }

    fn shard_len(&self) -> u64 {
        self.plan().map_or(0, |p| p.techniques.parallel.shard_len(p.trainable_layout().flat_len))
    }

    /// Encodes and submits collective op `i` over every rank's buffers.
    fn collective(&self, i: usize) {
        let ops: Vec<&Op> = self.ranks.iter().map(|e| &e.plan().ops[i].op).collect();
        let mut enc =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("collective") });
        let mut e = Encoding {
            device: &self.ctx.device,
            enc: &mut enc,
            max_groups: self.ctx.limits().max_compute_workgroups_per_dimension,
        };
        let s = self.shard_len();
        let k = &self.kernels.reduce;
        let at = |r: usize, v: View| self.ranks.get(r).and_then(|x| x.locate_view(v));
        let n32 = |len: u64| u32::try_from(len).unwrap_or(u32::MAX);
        // Copies each rank's `data` into its bucket, and sums the buckets into rank 0's, the
        // last addition making it the mean.
        let sum_into_first = |e: &mut Encoding<'_>, pairs: &[(View, View)]| {
            for (r, &(data, bucket)) in pairs.iter().enumerate() {
                if let (Some(d), Some(b)) = (at(r, data), at(r, bucket)) {
                    k.copy(e, b, d, n32(data.len));
                }
            }
            let order = mean_order(pairs.len());
            for (r, &(_, bucket)) in pairs.iter().enumerate().skip(1) {
                if let (Some(first), Some(b)) = (at(0, pairs[0].1), at(r, bucket)) {
                    let (alpha, beta) = order[r];
                    k.scale_add(e, first, b, n32(bucket.len), (alpha as f32, beta as f32));
                }
            }
        };
        let sub = |t: ReduceTarget<'_>, elems: u64, len: u64| -> (wgpu::Buffer, u64, u64) {
            (t.0.clone(), t.1 + 4 * elems, 4 * len)
        };
        match ops.first() {
            Some(Op::AllReduce(_)) => {
                let pairs: Vec<(View, View)> = ops
                    .iter()
                    .filter_map(|o| if let Op::AllReduce(a) = o { Some((a.data, a.bucket)) } else { None })
                    .collect();
                sum_into_first(&mut e, &pairs);
                for (r, &(data, bucket)) in pairs.iter().enumerate() {
                    if r > 0
                        && let (Some(first), Some(b)) = (at(0, pairs[0].1), at(r, bucket))
                    {
                        k.copy(&mut e, b, first, n32(bucket.len));
                    }
                    if let (Some(d), Some(b)) = (at(r, data), at(r, bucket)) {
                        k.copy(&mut e, d, b, n32(data.len));
                    }
                }
            }
            Some(Op::ReduceScatter(_)) => {
                let list: Vec<crate::plan::op::ReduceScatter> =
                    ops.iter().filter_map(|o| if let Op::ReduceScatter(a) = o { Some(*a) } else { None }).collect();
                let pairs: Vec<(View, View)> = list.iter().map(|a| (a.data, a.bucket)).collect();
                sum_into_first(&mut e, &pairs);
                for (r, a) in list.iter().enumerate() {
                    let own = (r as u64 * s)..((r as u64 + 1) * s);
                    let (lo, hi) = (own.start.max(a.start), own.end.min(a.start + a.data.len));
                    let (Some(first), true) = (at(0, list[0].bucket), lo < hi) else { continue };
                    let dst = View { tensor: a.shard.tensor, offset: a.shard.offset + (lo - own.start), len: hi - lo };
                    let Some(d) = at(r, dst) else { continue };
                    let src = sub(first, lo - a.start, hi - lo);
                    let src = (&src.0, src.1, src.2);
                    if a.accumulate {
                        k.scale_add(&mut e, d, src, n32(hi - lo), (1.0, 1.0));
                    } else {
                        k.copy(&mut e, d, src, n32(hi - lo));
                    }
                }
            }
            Some(Op::AllGather(_)) => {
                let list: Vec<crate::plan::op::AllGather> =
                    ops.iter().filter_map(|o| if let Op::AllGather(a) = o { Some(*a) } else { None }).collect();
                let Some(first) = list.first() else { return };
                let (start, len) = (first.start, first.full.len);
                for (owner, a) in list.iter().enumerate() {
                    let own = (owner as u64 * s)..((owner as u64 + 1) * s);
                    let (lo, hi) = (own.start.max(start), own.end.min(start + len));
                    if lo >= hi {
                        continue;
                    }
                    let src = View { tensor: a.shard.tensor, offset: a.shard.offset + (lo - own.start), len: hi - lo };
                    for (r, b) in list.iter().enumerate() {
                        let dst = View { tensor: b.full.tensor, offset: b.full.offset + (lo - start), len: hi - lo };
                        if r == owner && dst == src {
                            continue; // in place: the owner's own part is already there
                        }
                        if let (Some(d), Some(x)) = (at(r, dst), at(owner, src)) {
                            k.copy(&mut e, d, x, n32(hi - lo));
                        }
                    }
                }
            }
            _ => {}
        }
        self.ctx.queue.submit([enc.finish()]);
    }

    /// A state put together from the ranks, as `backend::cluster::CpuCluster` does.
    async fn gathered(&self, id: impl Fn(&Plan) -> TensorId) -> Result<Vec<f32>, BackendError> {
        let Some(plan) = self.plan() else { return Ok(Vec::new()) };
        let flat = crate::units::ix(plan.trainable_layout().flat_len);
        let stage = plan.techniques.parallel.stage();
        let mut out = Vec::with_capacity(flat);
        for exec in &self.ranks {
            let p = exec.plan();
            match p.shard_range() {
                Some(r) if stage >= 1 => {
                    let t = id(p);
                    let start = p.flat_start(t);
                    let view = View { tensor: t, offset: r.start - start, len: r.end - r.start };
                    out.extend(exec.read_view_async(view).await?);
                }
                _ => {
                    out.extend(exec.read_tensor_async(id(p)).await?);
                    break;
                }
            }
        }
        out.truncate(flat);
        Ok(out)
    }

    /// The step's gradients, whole.
    pub async fn grads(&self) -> Result<Vec<f32>, BackendError> {
        self.gathered(|p| p.handles.grads).await
    }

    /// The parameters, whole.
    pub async fn params(&self) -> Result<Vec<f32>, BackendError> {
        self.gathered(|p| p.handles.params).await
    }
}

/// Blocking wrappers for the CLI and tests.
#[cfg(not(target_arch = "wasm32"))]
impl crate::backend::Trainer for GpuCluster {
    fn backend_name(&self) -> String {
        let stage = self.plan().map_or(0, |p| p.techniques.parallel.stage());
        format!("gpu ({}), {} simulated GPUs, ZeRO-{stage}", self.ctx.describe(), self.ranks.len())
    }
    fn plan(&self) -> &Plan {
        // `new` builds one executor per GPU, at least one.
        self.ranks[0].plan()
    }
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        pollster::block_on(GpuCluster::train_step(self, batch))
    }
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        pollster::block_on(self.run_phases(&[Phase::Forward, Phase::Backward]))
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        pollster::block_on(self.params())
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        pollster::block_on(self.grads())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        for exec in &self.ranks {
            exec.write_flat(exec.plan().handles.params, flat);
        }
        Ok(())
    }
    fn memory(&self) -> Option<&StepMemory> {
        self.ranks.first().and_then(GpuExecutor::memory)
    }
    fn rank_memories(&self) -> Vec<&StepMemory> {
        self.memories()
    }
    fn device_figures(&self) -> crate::memory::device::DeviceFigures {
        self.ranks.first().map_or(
            crate::memory::device::DeviceFigures::NotReported {
                reason: crate::memory::device::NOT_REPORTED_YET.into(),
            },
            |e| e.device_figures().clone(),
        )
    }
    fn loss_scaler(&self) -> Option<&crate::plan::LossScaler> {
        None
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut crate::plan::LossScaler> {
        None
    }
}
