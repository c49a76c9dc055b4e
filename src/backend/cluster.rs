//! Data parallelism over simulated GPUs: N ranks, each an executor of its own plan with its own
//! caching allocator, budget and segments, run in lockstep in one process. Each rank runs its
//! ops up to the next collective; once every rank stands there, the collective moves the data
//! between their buffers, and the ranks go on.
//!
//! What differs from a real cluster: the ranks take turns on one device (here the host), so a
//! step takes about as long as all ranks' work added up, and no network exists — a collective
//! is copies and sums between the ranks' own buffers (through each rank's bucket buffer, as
//! NCCL's copy engines would).

use crate::data::Batch;
use crate::memory::{Budget, StepMemory};
use crate::plan::{Op, Phase, Plan, ValidRequest, View, op};

use super::BackendError;
use super::cpu::{Advance, CpuExecutor, ops::Real};
use crate::model::ShapeError;
use crate::plan::{ConfigError, TechniqueError};

/// The sequences of a global batch that rank `rank` of `ranks` trains on: the `rank`-th of
/// equal contiguous shares (PyTorch's `DistributedSampler` without shuffling).
pub fn rank_batch(batch: &Batch, rank: usize, ranks: usize) -> Result<Batch, BackendError> {
    let ranks = ranks.max(1);
    let per = batch.shape.batch / ranks;
    if per == 0 || per * ranks != batch.shape.batch {
        return Err(BackendError::Config(ConfigError::Technique(TechniqueError::AccumDoesNotDivide {
            batch: batch.shape.batch,
            accum: ranks,
        })));
    }
    let rows = per.saturating_mul(batch.shape.seq);
    let range = rank.saturating_mul(rows)..(rank + 1).saturating_mul(rows);
    let slice = |v: &[u32]| v.get(range.clone()).map(<[u32]>::to_vec);
    match (slice(&batch.inputs), slice(&batch.targets)) {
        (Some(inputs), Some(targets)) => {
            let doc_starts = slice(&batch.doc_starts).unwrap_or_default();
            Ok(Batch {
                shape: crate::model::StepShape { batch: per, seq: batch.shape.seq },
                inputs,
                targets,
                doc_starts,
            })
        }
        _ => Err(BackendError::Config(ConfigError::Shape(ShapeError::BatchLength {
            inputs: batch.inputs.len(),
            targets: batch.targets.len(),
            expected: (batch.shape.batch as u64).saturating_mul(batch.shape.seq as u64),
        }))),
    }
}

/// The (alpha, beta) of each rank's `scale_add` into the first rank's buffer, in rank order:
/// rank 0's is not added (its buffer is the sum), every other adds with (1, 1), the last with
/// (1/N, 1/N), which makes the sum the mean. Both backends add in this order.
pub fn mean_order(ranks: usize) -> Vec<(f64, f64)> {
    let inv = 1.0 / ranks.max(1) as f64;
    (0..ranks).map(|r| if r + 1 == ranks && r > 0 { (inv, inv) } else { (1.0, 1.0) }).collect()
}

/// N CPU executors in lockstep.
pub struct CpuCluster<F> {
    ranks: Vec<CpuExecutor<F>>,
    /// Where each rank of the current run stands: going (None), at a collective, or done.
    stops: Vec<Option<RankStop<F>>>,
    running: bool,
}

/// Where a rank of a cluster's run has stopped.
#[derive(Clone, Copy, Debug)]
enum RankStop<F> {
    At(usize),
    Done(F),
}

impl<F: Real> CpuCluster<F> {
    /// Every rank's executor, each under its own `budget`, all from the same initial parameters
    /// (`seed`). A rank whose persistent tensors do not fit is an OOM naming that GPU.
    pub fn new(request: &ValidRequest, seed: u64, budget: impl Into<Budget>) -> Result<Self, BackendError> {
        let budget = budget.into();
        let ranks = request
            .rank_plans()
            .into_iter()
            .map(|plan| CpuExecutor::with_budget(plan, seed, budget))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { ranks, stops: Vec::new(), running: false })
    }

    pub fn ranks(&self) -> &[CpuExecutor<F>] {
        &self.ranks
    }

    /// Rank 0's plan (every rank's has the same ops).
    pub fn plan(&self) -> Option<&Plan> {
        self.ranks.first().map(CpuExecutor::plan)
    }

    /// Each rank's record of its last step.
    pub fn memories(&self) -> Vec<Option<&StepMemory>> {
        self.ranks.iter().map(CpuExecutor::memory).collect()
    }

    /// Uploads each rank's share of the global batch (N times a rank's batch).
    pub fn upload_batch(&mut self, batch: &Batch) -> Result<(), BackendError> {
        let n = self.ranks.len();
        for (r, exec) in self.ranks.iter_mut().enumerate() {
            exec.upload_batch(&rank_batch(batch, r, n)?)?;
        }
        Ok(())
    }

    /// Forward, backward and optimizer on every rank; returns the mean of the ranks' losses (what
    /// DDP logs after averaging).
    pub fn train_step(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer])
    }

    /// Forward and backward (the gradients reduced); the mean loss.
    pub fn forward_backward(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward])
    }

    /// Runs `phases` on every rank in lockstep, carrying out each collective when all ranks
    /// reached it. The first rank that fails stops the step on every rank.
    pub fn run_phases(&mut self, phases: &[Phase]) -> Result<F, BackendError> {
        self.start_phases(phases);
        // A run was just started, so `resume` without a limit finishes it.
        self.resume(usize::MAX).unwrap_or_else(|| Err(BackendError::Internal("a started run had no step".into())))
    }

    /// Starts a run of `phases` on every rank, which [`Self::resume`] carries out a few ops at
    /// a time (the app spreads a step over frames).
    pub fn start_phases(&mut self, phases: &[Phase]) {
        for exec in &mut self.ranks {
            exec.start_phases(phases);
        }
        self.stops = vec![None; self.ranks.len()];
        self.running = true;
    }

    /// Whether a run is unfinished.
    pub fn running(&self) -> bool {
        self.running
    }

    /// How far the run has got, over every rank: (ops looked at, ops in the plans).
    pub fn progress(&self) -> Option<(usize, usize)> {
        if !self.running {
            return None;
        }
        let all: Vec<(usize, usize)> = self
            .ranks
            .iter()
            .zip(&self.stops)
            .map(|(e, stop)| match stop {
                Some(RankStop::Done(_)) => (e.plan().ops.len(), e.plan().ops.len()),
                _ => e.progress().unwrap_or((0, e.plan().ops.len())),
            })
            .collect();
        Some(all.iter().fold((0, 0), |(a, b), (x, y)| (a + x, b + y)))
    }

    /// Runs up to `max_ops` more ops, rank by rank, and the collectives every rank has reached;
    /// the mean of the ranks' losses once the run is finished (None while ops remain, or when
    /// nothing runs).
    pub fn resume(&mut self, max_ops: usize) -> Option<Result<F, BackendError>> {
        if !self.running {
            return None;
        }
        let mut budget = max_ops;
        loop {
            // Each rank that is neither at a collective nor finished goes on.
            for r in 0..self.ranks.len() {
                if self.stops[r].is_some() {
                    continue;
                }
                if budget == 0 {
                    return None;
                }
                let before = self.ranks[r].progress().map_or(0, |p| p.0);
                match self.ranks[r].advance(budget) {
                    Advance::Paused => return None,
                    Advance::Collective(i) => self.stops[r] = Some(RankStop::At(i)),
                    Advance::Finished(Ok(loss)) => self.stops[r] = Some(RankStop::Done(loss)),
                    Advance::Finished(Err(e)) => return Some(Err(self.abandon(e))),
                }
                let after = self.ranks[r].progress().map_or(before, |p| p.0);
                budget = budget.saturating_sub(after.saturating_sub(before).max(1));
            }
            let at: Vec<Option<usize>> =
                self.stops.iter().map(|s| if let Some(RankStop::At(i)) = s { Some(*i) } else { None }).collect();
            if let Some(Some(i)) = at.first() {
                let i = *i;
                if at.iter().any(|x| *x != Some(i)) {
                    return Some(Err(self.abandon(BackendError::Internal("the ranks' plans went out of step".into()))));
                }
                self.collective(i);
                for exec in &mut self.ranks {
                    exec.finish_collective(i);
                }
                self.stops.iter_mut().for_each(|s| *s = None);
                continue;
            }
            let losses: Vec<F> = self
                .stops
                .iter()
                .filter_map(|s| if let Some(RankStop::Done(l)) = s { Some(*l) } else { None })
                .collect();
            if losses.len() != self.ranks.len() {
                let e = BackendError::Internal("the ranks' plans went out of step".into());
                return Some(Err(self.abandon(e)));
            }
            self.running = false;
            let n = F::from(losses.len().max(1)).unwrap_or_else(F::one);
            return Some(Ok(losses.into_iter().fold(F::zero(), |a, l| a + l) / n));
        }
    }

    /// Stops every rank's run and frees what it had allocated for it.
    fn abandon(&mut self, e: BackendError) -> BackendError {
        for exec in &mut self.ranks {
            exec.abandon();
        }
        self.running = false;
        e
    }

    /// Elements of one shard.
    fn shard_len(&self) -> u64 {
        self.plan().map_or(0, |p| p.techniques.parallel.shard_len(p.trainable_layout().flat_len))
    }

    /// Carries out collective op `i` over every rank's buffers.
    fn collective(&mut self, i: usize) {
        let ops: Vec<Op> = self.ranks.iter().map(|e| e.plan().ops[i].op.clone()).collect();
        let n = F::from(self.ranks.len().max(1)).unwrap_or_else(F::one);
        let s = self.shard_len();
        match ops.first() {
            Some(Op::AllReduce(_)) => {
                let views: Vec<op::AllReduce> =
                    ops.iter().filter_map(|o| if let Op::AllReduce(a) = o { Some(*a) } else { None }).collect();
                let buckets: Vec<View> = views.iter().map(|a| a.bucket).collect();
                for (exec, a) in self.ranks.iter_mut().zip(&views) {
                    exec.copy_view(a.data, a.bucket);
                }
                let mean = self.mean(&buckets, n);
                for (exec, a) in self.ranks.iter_mut().zip(&views) {
                    exec.store_view(a.bucket, &mean);
                    exec.copy_view(a.bucket, a.data);
                }
            }
            Some(Op::ReduceScatter(_)) => {
                let views: Vec<op::ReduceScatter> =
                    ops.iter().filter_map(|o| if let Op::ReduceScatter(a) = o { Some(*a) } else { None }).collect();
                let buckets: Vec<View> = views.iter().map(|a| a.bucket).collect();
                for (exec, a) in self.ranks.iter_mut().zip(&views) {
                    exec.copy_view(a.data, a.bucket);
                }
                let mean = self.mean(&buckets, n);
                for (k, (exec, a)) in self.ranks.iter_mut().zip(&views).enumerate() {
                    exec.store_view(a.bucket, &mean);
                    let own = (k as u64 * s)..((k as u64 + 1) * s);
                    let (lo, hi) = (own.start.max(a.start), own.end.min(a.start + a.data.len));
                    if lo >= hi {
                        continue;
                    }
                    let part = &mean[crate::units::ix(lo - a.start)..crate::units::ix(hi - a.start)];
                    let dst = View { tensor: a.shard.tensor, offset: a.shard.offset + (lo - own.start), len: hi - lo };
                    let values: Vec<F> = if a.accumulate {
                        exec.view(dst).iter().zip(part).map(|(&x, &y)| x + y).collect()
                    } else {
                        part.to_vec()
                    };
                    exec.store_view(dst, &values);
                }
            }
            Some(Op::AllGather(_)) => {
                let views: Vec<op::AllGather> =
                    ops.iter().filter_map(|o| if let Op::AllGather(a) = o { Some(*a) } else { None }).collect();
                let Some(first) = views.first() else { return };
                let (start, len) = (first.start, first.full.len);
                for k in 0..self.ranks.len() {
                    let own = (k as u64 * s)..((k as u64 + 1) * s);
                    let (lo, hi) = (own.start.max(start), own.end.min(start + len));
                    if lo >= hi {
                        continue;
                    }
                    let src = views[k].shard;
                    let src = View { tensor: src.tensor, offset: src.offset + (lo - own.start), len: hi - lo };
                    let values = self.ranks[k].view(src).to_vec();
                    for (exec, a) in self.ranks.iter_mut().zip(&views) {
                        let dst = View { tensor: a.full.tensor, offset: a.full.offset + (lo - start), len: hi - lo };
                        exec.store_view(dst, &values);
                    }
                }
            }
            _ => {}
        }
    }

    /// The mean over the ranks of each rank's `views[r]`: summed in rank order, the last
    /// addition divided by N ([`mean_order`], the GPU's order too).
    fn mean(&self, views: &[View], _n: F) -> Vec<F> {
        let mut sum: Vec<F> = Vec::new();
        for (exec, v, (alpha, beta)) in
            self.ranks.iter().zip(views).zip(mean_order(views.len())).map(|((e, v), ab)| (e, v, ab))
        {
            let x = exec.view(*v);
            if sum.is_empty() {
                sum = x.to_vec();
            } else {
                let (a, b) = (F::from(alpha).unwrap_or_else(F::one), F::from(beta).unwrap_or_else(F::one));
                super::cpu::ops::scale_add(&mut sum, x, a, b);
            }
        }
        sum
    }

    /// The full flat values of a state every rank holds all or a shard of: rank 0's whole tensor,
    /// or the shards put together (each rank's own, as ZeRO-1 reduces only its own part of the
    /// full gradients), cut to the layout's length.
    fn gathered(&self, id: impl Fn(&Plan) -> crate::plan::TensorId) -> Vec<F> {
        let Some(plan) = self.plan() else { return Vec::new() };
        let flat = crate::units::ix(plan.trainable_layout().flat_len);
        let stage = plan.techniques.parallel.stage();
        let mut out = Vec::with_capacity(flat);
        for exec in &self.ranks {
            let p = exec.plan();
            let whole = exec.tensor(id(p));
            match p.shard_range() {
                Some(r) if stage >= 1 => {
                    let start = crate::units::ix(p.flat_start(id(p)));
                    let (a, b) = (crate::units::ix(r.start), crate::units::ix(r.end));
                    out.extend_from_slice(whole.get(a - start..b - start).unwrap_or(&[]));
                }
                _ => {
                    out.extend_from_slice(whole);
                    break;
                }
            }
        }
        out.truncate(flat);
        out
    }

    /// The gradients of the step, whole (gathered from the shards under ZeRO-2 and 3).
    pub fn grads(&self) -> Vec<F> {
        self.gathered(|p| p.handles.grads)
    }

    /// The parameters, whole (gathered from the shards under ZeRO-3).
    pub fn params(&self) -> Vec<F> {
        self.gathered(|p| p.handles.params)
    }

    /// Every rank's gradients as that rank holds them (whole or its shard), for checks that each
    /// rank agrees.
    pub fn rank_grads(&self) -> Vec<Vec<F>> {
        self.ranks.iter().map(|e| e.grads().to_vec()).collect()
    }
}

impl CpuCluster<f32> {
    /// Writes the whole flat parameters into every rank (each its shard under ZeRO-3).
    pub fn write_params(&mut self, flat: &[f32]) {
        for exec in &mut self.ranks {
            exec.set_params(flat);
        }
    }
}

/// The CPU backend's name with the simulated GPUs.
fn cluster_name(backend: &str, ranks: usize, stage: u8) -> String {
    format!("{backend}, {ranks} simulated GPUs, ZeRO-{stage}")
}

impl super::Trainer for CpuCluster<f32> {
    fn backend_name(&self) -> String {
        let stage = self.plan().map_or(0, |p| p.techniques.parallel.stage());
        cluster_name(super::cpu::CPU_NAME, self.ranks.len(), stage)
    }
    fn plan(&self) -> &Plan {
        // A cluster always has at least one rank: `new` builds one per GPU (at least 1).
        self.ranks[0].plan()
    }
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        CpuCluster::train_step(self, batch)
    }
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.forward_backward(batch)
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(self.params())
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(self.grads())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        CpuCluster::write_params(self, flat);
        Ok(())
    }
    fn memory(&self) -> Option<&StepMemory> {
        self.ranks.first().and_then(CpuExecutor::memory)
    }
    fn rank_memories(&self) -> Vec<&StepMemory> {
        self.ranks.iter().filter_map(CpuExecutor::memory).collect()
    }
    fn device_figures(&self) -> crate::memory::device::DeviceFigures {
        crate::memory::device::DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_CPU.into() }
    }
    fn loss_scaler(&self) -> Option<&crate::plan::LossScaler> {
        None
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut crate::plan::LossScaler> {
        None
    }
}
