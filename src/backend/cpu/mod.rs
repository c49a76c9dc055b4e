//! The CPU reference backend: executes a [`Plan`] op by op with the twins in [`ops`].
//!
//! Memory follows the caching allocator: every segment it reserves is a host buffer, created
//! and dropped with the segment, and each tensor lives at its placement inside one, placed just
//! before the op that first touches it and freed right after its last use. The allocator's
//! state is recorded while the ops run — what this backend measures. In debug builds freed
//! memory is filled with NaN, so a read after free shows up in the results.

pub mod attention;
mod execute;
mod gemm;
mod host;
pub mod ops;
mod real;
mod reshape;

pub use host::host_available_bytes;

/// The CPU backend's name, as the app, the CLI and the logs show it.
pub const CPU_NAME: &str = "cpu (reference)";
use host::{cast, check_host_memory, grow, host_bytes_per_device_byte, host_segment, store_rounded};

use super::{BackendError, StepState, Trainer};
use crate::data::Batch;
use std::collections::BTreeMap;

use super::micro_uploads;
use crate::memory::allocator::Event;
use crate::memory::step::{StepAllocator, StepMemory, Trace};
use crate::memory::{Budget, Placement, SegmentId};
use crate::model::init::{init_params, lora_seed};
use crate::plan::{DType, LossScaler, Op, Phase, Plan, TensorId, View};

/// Executes a plan on the host, in `F` precision (f32 for training, f64 for gradient checks).
pub struct CpuExecutor<F> {
    plan: Plan,
    /// One host buffer per allocator segment, in slots of `slot_bytes`: float tensors use
    /// `floats`, u32 tensors `ints` (allocated only for segments that hold one). Element i of a
    /// tensor at byte offset o is slot o/slot_bytes + i, so each tensor's slots lie within its
    /// own bytes: slots are 2 bytes when the plan has 16-bit tensors, else 4.
    segments: BTreeMap<SegmentId, HostSegment<F>>,
    slot_bytes: u64,
    /// Allocator events already applied to `segments`.
    events_seen: usize,
    allocator: StepAllocator,
    /// The allocator's live account of the last step run.
    memory: Option<StepMemory>,
    /// Steps taken, fp16's loss scaler, the last backward pass's scale.
    state: StepState,
    /// A run in progress (see [`CpuExecutor::start_phases`]).
    running: Option<Running>,
    /// Buffers for ops' outputs, reused from op to op (see `with_output_list`).
    scratch: Vec<Vec<F>>,
}

/// How far [`CpuExecutor::advance`] got.
pub(crate) enum Advance<F> {
    /// The op budget ran out; ops remain.
    Paused,
    /// Stopped at collective op `i`, placed but not run.
    Collective(usize),
    /// The run ended: its loss, or why it stopped.
    Finished(Result<F, BackendError>),
}

/// Where a run of some phases has got to.
struct Running {
    phases: Vec<Phase>,
    /// The next op to look at.
    next: usize,
    trace: Trace,
}

struct HostSegment<F> {
    floats: Vec<F>,
    ints: Vec<u32>,
}

impl<F: ops::Real> CpuExecutor<F> {
    /// [`Self::with_budget`] without a virtual budget.
    pub fn new(plan: Plan, seed: u64) -> Result<Self, BackendError> {
        Self::with_budget(plan, seed, Budget::Unlimited)
    }

    /// Places the persistent tensors and the batch under a virtual GPU of `budget` and
    /// initialises the parameters from `seed`. Fails with [`BackendError::OutOfMemory`] when
    /// even those do not fit, and with [`BackendError::HostMemory`] — before allocating
    /// anything — when the host could not hold what the step reserves (the smaller of the budget
    /// and the plan's predicted peak).
    pub fn with_budget(plan: Plan, seed: u64, budget: impl Into<Budget>) -> Result<Self, BackendError> {
        let budget = budget.into();
        let slot_bytes = if plan.tensors.iter().any(|t| t.dtype.is_half()) { 2 } else { 4 };
        check_host_memory(&plan, budget, host_bytes_per_device_byte::<F>(slot_bytes))?;
        let n = plan.tensors.len();
        let allocator = StepAllocator::new(&plan, budget, true);
        let state = StepState::new(&plan);
        let mut exec = Self {
            plan,
            segments: BTreeMap::new(),
            slot_bytes,
            state,
            events_seen: 0,
            allocator,
            memory: None,
            running: None,
            scratch: Vec::new(),
        };
        exec.allocator.setup(&exec.plan).map_err(BackendError::OutOfMemory)?;
        for i in 0..n {
            if exec.plan.tensors[i].host {
                // Offload: host memory, outside the device's allocator; a segment of its own.
                exec.segments.insert(host_segment(TensorId(i)), HostSegment { floats: Vec::new(), ints: Vec::new() });
                exec.materialize(TensorId(i))?;
            } else if exec.allocator.is_allocated(TensorId(i)) {
                exec.materialize(TensorId(i))?;
            }
        }
        let init = init_params(&exec.plan.layout, seed);
        exec.set_params_f32(&init);
        let trainable = match &exec.plan.lora {
            Some(lora) => {
                let values: Vec<F> = init_params(lora, lora_seed(seed)).iter().map(|&x| cast(x)).collect();
                exec.write_tensor(exec.plan.handles.trainable, &values);
                values
            }
            None => init.iter().map(|&x| cast(x)).collect(),
        };
        // Mixed precision: the master weights hold the unrounded fp32 values.
        if let Some(master) = exec.plan.handles.master {
            exec.write_flat(master, &trainable);
        }
        Ok(exec)
    }

    /// Writes the flat values `flat` (the whole layout) into tensor `id`: all of them, or under
    /// ZeRO the rank's shard of them.
    pub fn write_flat(&mut self, id: TensorId, flat: &[F]) {
        let start = usize::try_from(self.plan.flat_start(id)).unwrap_or(usize::MAX);
        self.write_tensor(id, flat.get(start..).unwrap_or(&[]));
    }

    /// Creates and drops host segments as the allocator reserved and released them. A new
    /// segment holds no host memory yet: it grows as tensors are placed in it.
    fn sync_segments(&mut self) {
        let events = self.allocator.allocator.events();
        for e in &events[self.events_seen.min(events.len())..] {
            match *e {
                Event::SegmentAlloc { segment, .. } => {
                    self.segments.insert(segment, HostSegment { floats: Vec::new(), ints: Vec::new() });
                }
                Event::SegmentFree { segment, .. } => {
                    self.segments.remove(&segment);
                }
                // An expandable segment's end unmapped: its host memory there goes too (a
                // segment that grows needs nothing: its host buffer grows as tensors land).
                Event::SegmentUnmap { segment, offset, .. } => {
                    let keep = usize::try_from(offset / self.slot_bytes).unwrap_or(usize::MAX);
                    if let Some(s) = self.segments.get_mut(&segment) {
                        s.floats.truncate(keep);
                        s.ints.truncate(keep);
                    }
                }
                _ => {}
            }
        }
        self.events_seen = events.len();
    }

    /// Starts a new step's event log (the segments persist).
    fn clear_events(&mut self) {
        self.sync_segments();
        self.allocator.allocator.clear_events();
        self.events_seen = 0;
    }

    /// Slot range of a view inside its segment, while its tensor is placed (None where it does
    /// not fit host indices).
    fn slots(&self, v: View) -> Option<(SegmentId, usize, usize)> {
        let (segment, offset) = match self.plan.tensors.get(v.tensor.0) {
            Some(t) if t.host => (host_segment(v.tensor), 0),
            _ => {
                let p: Placement = self.allocator.placement(v.tensor)?;
                (p.segment, p.offset)
            }
        };
        let start = (offset / self.slot_bytes).checked_add(v.offset)?;
        let end = start.checked_add(v.len)?;
        Some((segment, usize::try_from(start).ok()?, usize::try_from(end).ok()?))
    }

    /// A newly placed tensor starts zeroed (its slots may hold an earlier tensor's values). Its
    /// segment's host buffer grows to cover it; a host that cannot is
    /// [`BackendError::HostMemory`], never an abort.
    fn materialize(&mut self, id: TensorId) -> Result<(), BackendError> {
        self.sync_segments();
        let v = self.plan.whole(id);
        let dtype = self.plan.tensors[id.0].dtype;
        let tensor_bytes = self.plan.tensors[id.0].size_bytes();
        let host = |indices: bool| {
            let tensor = self.plan.tensors[id.0].name.clone();
            BackendError::HostMemory(crate::backend::HostShortfall::Tensor { tensor, bytes: tensor_bytes, indices })
        };
        let Some((seg, a, b)) = self.slots(v) else { return Err(host(true)) };
        if let Some(s) = self.segments.get_mut(&seg) {
            match dtype {
                DType::F32 | DType::F16 | DType::BF16 => {
                    grow(&mut s.floats, b, F::zero()).map_err(|_| host(false))?;
                    s.floats[a..b].fill(F::zero());
                }
                DType::U32 => {
                    grow(&mut s.ints, b, 0).map_err(|_| host(false))?;
                    s.ints[a..b].fill(0);
                }
            }
        }
        Ok(())
    }

    /// In debug builds, poisons a freed tensor's slots with NaN (called before the allocator
    /// frees it, while its placement is known).
    fn poison(&mut self, id: TensorId) {
        if cfg!(debug_assertions)
            && self.plan.tensors[id.0].dtype != DType::U32
            && let Some(x) = self.f_mut(self.plan.whole(id))
        {
            x.fill(F::nan());
        }
    }

    /// Every view op `i` touches must have memory: a run of the backward pass alone, without the
    /// forward pass of the same step, would read activations that were never produced.
    fn check_memory(&self, i: usize, op: &Op) -> Result<(), BackendError> {
        let (reads, writes) = op.reads_writes();
        for v in reads.iter().chain(&writes) {
            if self.slots(*v).is_none() {
                return Err(BackendError::NotProduced {
                    op: self.plan.ops[i].label.clone(),
                    tensor: self.plan.tensors[v.tensor.0].name.clone(),
                });
            }
        }
        Ok(())
    }

    /// The allocator's counters now.
    pub fn allocator_stats(&self) -> crate::memory::Stats {
        self.allocator.allocator.stats()
    }

    /// The CPU has no device: why there are no device figures.
    pub fn device_figures(&self) -> crate::memory::device::DeviceFigures {
        crate::memory::device::DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_CPU.into() }
    }

    /// The allocator's live account of the last step run, op by op.
    pub fn memory(&self) -> Option<&StepMemory> {
        self.memory.as_ref()
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn set_params_f32(&mut self, flat: &[f32]) {
        let values: Vec<F> = flat.iter().map(|&x| cast(x)).collect();
        self.write_flat(self.plan.handles.params, &values);
    }

    /// Sets the parameters in the executor's own precision (under ZeRO-3 the rank's shard of
    /// `flat`).
    pub fn set_params(&mut self, flat: &[F]) {
        self.write_flat(self.plan.handles.params, flat);
    }

    pub fn params(&self) -> &[F] {
        self.tensor(self.plan.handles.params)
    }

    pub fn grads(&self) -> &[F] {
        self.tensor(self.plan.handles.grads)
    }

    /// Any allocated float tensor by name (for tests and dumps).
    pub fn tensor_by_name(&self, name: &str) -> Option<&[F]> {
        let id = self.plan.tensors.iter().position(|t| t.name == name)?;
        self.f_opt(self.plan.whole(TensorId(id)))
    }

    /// Overwrites the start of an allocated float tensor (extra values are ignored).
    pub fn write_tensor(&mut self, id: TensorId, values: &[F]) {
        let dtype = self.plan.tensors[id.0].dtype;
        if let Some(dst) = self.f_mut(self.plan.whole(id)) {
            store_rounded(dtype, dst, values);
        }
    }

    /// fp16's loss scaler (None in other precisions).
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.state.scaler.as_ref()
    }

    pub fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.state.scaler.as_mut()
    }

    /// The loss scale of the next step (1 without fp16).
    fn loss_scale(&self) -> f64 {
        f64::from(self.state.loss_scale())
    }

    /// Overwrites the start of an allocated integer tensor (extra values are ignored).
    pub fn write_tensor_u32(&mut self, id: TensorId, values: &[u32]) {
        let v = self.plan.whole(id);
        let Some((seg, a, b)) = self.slots(v) else { return };
        if let Some(dst) = self.segments.get_mut(&seg).and_then(|s| s.ints.get_mut(a..b)) {
            let n = dst.len().min(values.len());
            dst[..n].copy_from_slice(&values[..n]);
        }
    }

    /// A float tensor's values while it is allocated; empty after it was freed.
    pub fn tensor(&self, id: TensorId) -> &[F] {
        self.f_opt(self.plan.whole(id)).unwrap_or(&[])
    }

    fn f_opt(&self, v: View) -> Option<&[F]> {
        let (seg, a, b) = self.slots(v)?;
        self.segments.get(&seg)?.floats.get(a..b)
    }

    fn f_mut(&mut self, v: View) -> Option<&mut [F]> {
        let (seg, a, b) = self.slots(v)?;
        self.segments.get_mut(&seg)?.floats.get_mut(a..b)
    }

    /// A view's values (ops only run once `check_memory` found every view placed).
    fn f(&self, v: View) -> &[F] {
        self.f_opt(v).unwrap_or(&[])
    }

    fn u(&self, v: View) -> &[u32] {
        self.slots(v).and_then(|(seg, a, b)| self.segments.get(&seg)?.ints.get(a..b)).unwrap_or(&[])
    }

    /// Uploads the batch (tokens, targets and the token index).
    pub fn upload_batch(&mut self, batch: &Batch) -> Result<(), BackendError> {
        let uploads = micro_uploads(&self.plan, batch)?;
        self.state.count_targets(batch);
        for m in uploads {
            let h = m.handles;
            self.write_tensor_u32(h.tokens, m.tokens);
            self.write_tensor_u32(h.targets, m.targets);
            self.write_tensor_u32(h.token_offsets, &m.token_offsets);
            self.write_tensor_u32(h.token_positions, &m.token_positions);
            if let (Some(p), Some((starts, offsets, rows))) = (h.packing, &m.packing) {
                self.write_tensor_u32(p.doc_starts.tensor, starts);
                self.write_tensor_u32(p.position_offsets.tensor, offsets);
                self.write_tensor_u32(p.position_rows.tensor, rows);
            }
        }
        Ok(())
    }

    /// The step's loss: the mean of the micro-batches' losses (NaN before a forward pass).
    fn step_loss(&self) -> F {
        let losses: Vec<F> = self
            .plan
            .handles
            .micro
            .iter()
            .map(|m| self.tensor(m.loss).first().copied().unwrap_or_else(F::nan))
            .collect();
        losses.iter().fold(F::zero(), |a, &l| a + l) / cast(losses.len().max(1) as f32)
    }

    /// Runs the ops of the given phases, in plan order, allocating and freeing each tensor's
    /// memory through the caching allocator as the op that first/last uses it runs. A run that
    /// includes the forward pass starts a new step. Returns the loss; an allocation beyond the
    /// budget stops the step with [`BackendError::OutOfMemory`] and releases its memory.
    pub fn run_phases(&mut self, phases: &[Phase]) -> Result<F, BackendError> {
        self.start_phases(phases);
        // A run was just started, so `resume` without a limit finishes it.
        self.resume(usize::MAX)
            .unwrap_or_else(|| Err(BackendError::Internal("a started run had no step to run".into())))
    }

    /// Starts a run of `phases` that [`Self::resume`] carries out a few ops at a time (the app
    /// spreads a CPU step over frames so the UI never freezes).
    pub fn start_phases(&mut self, phases: &[Phase]) {
        if phases.contains(&Phase::Forward) {
            self.release_leftovers();
            self.clear_events();
        }
        self.state.begin(phases);
        self.allocator.clear_log();
        let mut trace = Trace::detailed();
        trace.record(&self.allocator, None);
        self.running = Some(Running { phases: phases.to_vec(), next: 0, trace });
    }

    /// Whether a run started by [`Self::start_phases`] is unfinished.
    pub fn running(&self) -> bool {
        self.running.is_some()
    }

    /// How far the current run has got: (ops looked at, ops in the plan); None when nothing
    /// runs.
    pub fn progress(&self) -> Option<(usize, usize)> {
        self.running.as_ref().map(|r| (r.next, self.plan.ops.len()))
    }

    /// Runs up to `max_ops` more ops of the current run; the loss once it is finished (None
    /// while ops remain, or when nothing runs). A plan with collectives runs through
    /// [`crate::backend::cluster`], not here.
    pub fn resume(&mut self, max_ops: usize) -> Option<Result<F, BackendError>> {
        match self.advance(max_ops) {
            Advance::Paused => None,
            Advance::Finished(result) => Some(result),
            Advance::Collective(i) => {
                self.running = None;
                self.release_leftovers();
                let label = self.plan.op_label(i).unwrap_or_default();
                Some(Err(BackendError::Internal(format!("{label} needs every rank: run the step on the cluster"))))
            }
        }
    }

    /// After the cluster carried out collective `i`: frees what it was the last to use.
    pub(crate) fn finish_collective(&mut self, i: usize) {
        for t in self.allocator.ending_at(i) {
            self.poison(t);
        }
        self.allocator.after_op(i);
        self.sync_segments();
    }

    /// Runs up to `max_ops` more ops of the current run, stopping at a collective, which it
    /// places (its buffers allocated) and leaves for the cluster to carry out and then
    /// [`Self::finish_collective`].
    pub(crate) fn advance(&mut self, max_ops: usize) -> Advance<F> {
        let Some(mut run) = self.running.take() else {
            return Advance::Finished(Err(BackendError::Internal("no step is running".into())));
        };
        let mut done = 0;
        while run.next < self.plan.ops.len() {
            let i = run.next;
            if done == max_ops {
                self.running = Some(run);
                return Advance::Paused;
            }
            run.next += 1;
            if !run.phases.contains(&self.plan.ops[i].phase) {
                continue;
            }
            done += 1;
            match self.allocator.before_op(&self.plan, i) {
                Ok(placed) => {
                    for (t, _) in placed {
                        if let Err(e) = self.materialize(t) {
                            self.release_leftovers();
                            return Advance::Finished(Err(e));
                        }
                    }
                }
                Err(oom) => {
                    self.release_leftovers();
                    return Advance::Finished(Err(BackendError::OutOfMemory(oom)));
                }
            }
            run.trace.record(&self.allocator, Some(i));
            let op = self.plan.ops[i].op.clone();
            if let Err(e) = self.check_memory(i, &op) {
                return Advance::Finished(Err(e));
            }
            if op.is_collective() {
                self.running = Some(run);
                return Advance::Collective(i);
            }
            self.execute(&op);
            for t in self.allocator.ending_at(i) {
                self.poison(t);
            }
            self.allocator.after_op(i);
            self.sync_segments();
        }
        self.memory = Some(run.trace.finish(&self.allocator));
        if run.phases.contains(&Phase::Optimizer) {
            let found_inf = self.plan.handles.found_inf.is_some_and(|f| self.u(self.plan.whole(f)).first() == Some(&1));
            self.state.finish_optimizer(found_inf);
        }
        Advance::Finished(Ok(self.step_loss()))
    }

    /// A view's values (empty where its tensor is not allocated): what the cluster reads.
    pub(crate) fn view(&self, v: View) -> &[F] {
        self.f(v)
    }

    /// Writes `values` into a view, rounded to its tensor's precision: what the cluster writes.
    pub(crate) fn store_view(&mut self, v: View, values: &[F]) {
        let dtype = self.plan.tensors[v.tensor.0].dtype;
        if let Some(dst) = self.f_mut(v) {
            store_rounded(dtype, dst, values);
        }
    }

    /// Copies one view into another of this rank (a collective's copy into or out of its bucket).
    pub(crate) fn copy_view(&mut self, from: View, to: View) {
        let values = self.f(from).to_vec();
        self.store_view(to, &values);
    }

    /// Stops the current run (another rank failed) and frees what it had allocated.
    pub(crate) fn abandon(&mut self) {
        if let Some(run) = self.running.take() {
            self.state.cancel(&run.phases);
        }
        self.release_leftovers();
    }

    /// Frees the op-lifetime tensors a previous run left allocated.
    fn release_leftovers(&mut self) {
        for t in self.allocator.leftovers() {
            self.poison(t);
        }
        self.allocator.release_step();
        self.sync_segments();
    }

    /// Forward and backward: loss and gradients, parameters unchanged.
    pub fn forward_backward(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward])
    }

    /// Forward only: the loss.
    pub fn forward(&mut self, batch: &Batch) -> Result<F, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward])
    }
}

impl Trainer for CpuExecutor<f32> {
    fn backend_name(&self) -> String {
        CPU_NAME.to_string()
    }
    fn plan(&self) -> &Plan {
        &self.plan
    }
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer])
    }
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.forward_backward(batch)
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(self.params().to_vec())
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        // fp16 stores scaled gradients: report the true ones.
        let inv = 1.0 / self.state.backward_scale;
        Ok(self.grads().iter().map(|g| g * inv).collect())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        self.set_params(flat);
        // The fp32 copy the optimizer updates (mixed precision, offload) is the same weights.
        if let (Some(master), None) = (self.plan.handles.master, &self.plan.lora) {
            self.write_flat(master, flat);
        }
        Ok(())
    }
    fn memory(&self) -> Option<&crate::memory::StepMemory> {
        CpuExecutor::memory(self)
    }
    fn device_figures(&self) -> crate::memory::device::DeviceFigures {
        CpuExecutor::device_figures(self)
    }
    fn loss_scaler(&self) -> Option<&LossScaler> {
        self.state.scaler.as_ref()
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.state.scaler.as_mut()
    }
    fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        CpuExecutor::reshape(self, plan)
    }
}
