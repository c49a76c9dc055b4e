//! Executes a plan on the GPU. Tensors are placed by the caching allocator, driven live op by
//! op as each step is recorded — the same driver the CPU backend runs, so the allocator's
//! figures are an account of what this step did, not a copy of the prediction. Each segment the
//! allocator reserves is a real wgpu buffer (labelled `seg.<id>@<executor>`), created when the segment is
//! reserved and destroyed when the allocator releases it, before the next one is created: the
//! budget bounds real device memory. Each tensor is bound at its offset inside its segment.
//! After each step the driver layer's own report (where the backend gives one) is matched
//! against the segments: the device figures.
//!
//! Its jobs live in child modules: `record` (the plan's dispatches, recorded once), `segments`
//! (the allocator driven live and the buffers behind its segments), `bind` (bind groups over
//! the placements, encoding), `device` (the driver's report) and `readback`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use super::kernels::adamw::AdamWParams;
use super::kernels::cross_entropy::CrossEntropyParams;
use super::kernels::{GemmKind, Kernels, Recorder, SgdParams};
use super::{GpuContext, GpuError};
use crate::backend::{BackendError, StepState, ix};
use crate::data::Batch;
use crate::memory::device::{DeviceFigures, segment_label};
use crate::memory::step::{StepAllocator, StepMemory};
use crate::memory::{Budget, Placement, SegmentId};
use crate::model::init::{init_params, lora_seed};
use crate::plan::{LossScaler, Phase, Plan, TensorId, View};

pub(in crate::backend::gpu) mod bind;
mod device;
mod host;
mod readback;
mod record;
mod reshape;
mod segments;

use bind::{Bound, placeholder_buffer, uniform_buffer};
use readback::{decode, encode, read_buffer};
use record::{DynamicUniforms, record_plan};
pub(in crate::backend::gpu) use segments::RecordStop;
use segments::new_segments;
pub(in crate::backend::gpu) use segments::storage_buffer;

#[cfg(not(target_arch = "wasm32"))]
pub use segments::device_oom;

/// A plan bound to GPU memory, ready to run steps.
pub struct GpuExecutor {
    ctx: GpuContext,
    /// This executor's number in the process: its buffers' labels carry it.
    instance: u64,
    kernels: Arc<Kernels>,
    plan: Plan,
    /// The caching allocator, driven op by op as each step is recorded.
    allocator: StepAllocator,
    /// Allocator events already applied to `buffers`.
    events_seen: usize,
    /// One wgpu buffer per live segment.
    buffers: BTreeMap<SegmentId, wgpu::Buffer>,
    /// Every op's dispatches, recorded once against tensor views; `op_commands[i]` are the
    /// indices of op i's commands in `rec.commands`.
    rec: Recorder,
    op_commands: Vec<Range<usize>>,
    /// Each command bound to the buffers and offsets of the last step that ran it.
    bound: Vec<Option<Bound>>,
    /// The allocator's account of the last step (None before a forward pass).
    memory: Option<StepMemory>,
    /// What the driver layer reported after the last step.
    device: DeviceFigures,
    /// The most segment bytes a report showed during the current step.
    device_peak: u64,
    uniform_buffer: wgpu::Buffer,
    /// Disjoint slices for unused bindings.
    placeholder: wgpu::Buffer,
    /// Uniforms rewritten each step (AdamW's t, fp16's loss scale).
    dynamic: DynamicUniforms,
    /// The micro-batches' losses, then fp16's overflow flag.
    loss_staging: wgpu::Buffer,
    /// Steps taken, fp16's loss scaler, the last backward pass's scale.
    state: StepState,
    /// The readback of a step submitted by [`GpuExecutor::submit_step`], not yet complete.
    pending: Option<futures_channel::oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>>,
    /// A run being recorded op by op (the cluster's runs pause at each collective, offload's at
    /// each host op).
    recording: Option<segments::Recording>,
    /// Offload: the host tensors' values (empty for the device's tensors).
    host: std::sync::Mutex<Vec<Vec<f32>>>,
    /// Offload, the app's path: a copy down waiting for its readback.
    host_wait: Option<host::HostWait>,
}

pub(in crate::backend::gpu) fn bytes(elems: usize) -> u64 {
    (elems * 4) as u64
}

impl GpuExecutor {
    /// [`Self::with_budget`] without a virtual budget: only the device's memory limits.
    pub async fn new(ctx: &GpuContext, kernels: &Kernels, plan: Plan, seed: u64) -> Result<Self, BackendError> {
        Self::with_budget(ctx, kernels, plan, seed, Budget::Unlimited).await
    }

    /// Records the plan's dispatches, places the persistent tensors and the batch with the
    /// caching allocator under a virtual GPU of `budget` (each segment a wgpu buffer) and
    /// uploads the initial parameters (from `seed`). The step's own tensors are placed live, op
    /// by op, when a step runs: a step beyond the budget is an out-of-memory error from
    /// [`Self::train_step_async`] (PyTorch's message), as on the CPU backend. Limits are checked
    /// first, so a config too large for the adapter gets [`GpuError::ExceedsLimit`] rather than
    /// a validation error; a real wgpu out-of-memory is reported like the allocator's.
    pub async fn with_budget(
        ctx: &GpuContext,
        kernels: &Kernels,
        plan: Plan,
        seed: u64,
        budget: impl Into<Budget>,
    ) -> Result<Self, BackendError> {
        let budget = budget.into();
        ctx.check_alive()?;
        let state = StepState::new(&plan);
        let limits = ctx.limits();
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        for t in &plan.tensors {
            if t.size_bytes() > max_binding {
                return Err(GpuError::ExceedsLimit {
                    what: format!("tensor {} ({:?})", t.name, t.shape),
                    needed: t.size_bytes(),
                    limit: max_binding,
                    bytes: true,
                }
                .into());
            }
        }
        let mut rec = Recorder::new(limits.max_compute_workgroups_per_dimension);
        let (dynamic, op_commands) = record_plan(kernels, &plan, &mut rec, ctx.native_f16())?;
        if rec.uniforms.len() as u64 > limits.max_buffer_size {
            return Err(GpuError::ExceedsLimit {
                what: "uniform buffer".into(),
                needed: rec.uniforms.len() as u64,
                limit: limits.max_buffer_size,
                bytes: true,
            }
            .into());
        }
        let mut allocator = StepAllocator::new(&plan, budget, true);
        allocator.setup(&plan).map_err(BackendError::OutOfMemory)?;
        let device = &ctx.device;
        let (uniform_buffer, placeholder, loss_staging) = ctx
            .scoped("creating the step's uniform and readback buffers", || {
                let uniform_buffer = uniform_buffer(ctx, "step uniforms", &rec.uniforms);
                let loss_staging = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("loss readback"),
                    size: bytes(plan.handles.micro.len() + 1),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                (uniform_buffer, placeholder_buffer(device), loss_staging)
            })
            .await?;
        let commands = rec.commands.len();
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut exec = Self {
            ctx: ctx.clone(),
            instance: INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            kernels: Arc::new(kernels.clone()),
            plan,
            allocator,
            events_seen: 0,
            buffers: BTreeMap::new(),
            rec,
            op_commands,
            bound: (0..commands).map(|_| None).collect(),
            memory: None,
            device: DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_YET.into() },
            device_peak: 0,
            uniform_buffer,
            placeholder,
            dynamic,
            loss_staging,
            state,
            pending: None,
            recording: None,
            host: std::sync::Mutex::new(Vec::new()),
            host_wait: None,
        };
        *exec.host.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = Self::new_host_tensors(&exec.plan);
        // The persistent tensors' segments, each in its own error scope (awaited: this is the
        // one place a real device out-of-memory can be caught on the web too).
        let segments: Vec<(SegmentId, u64)> = new_segments(exec.allocator.allocator.events()).collect();
        exec.events_seen = exec.allocator.allocator.events().len();
        for (k, &(id, size)) in segments.iter().enumerate() {
            exec.check_segment_limit(size)?;
            let label = segment_label(id, exec.instance);
            let made = ctx.scoped("reserving a segment", || storage_buffer(device, &label, size)).await;
            match made {
                Ok(b) => {
                    exec.buffers.insert(id, b);
                }
                Err(GpuError::OutOfMemory(detail)) => {
                    let reserved_before: u64 = segments[..k].iter().map(|&(_, s)| s).sum();
                    let oom = exec.device_oom(id, size, reserved_before, &detail);
                    return Err(BackendError::OutOfMemory(Box::new(oom)));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let init = init_params(&exec.plan.layout, seed);
        exec.write_params(&init);
        let trainable = match &exec.plan.lora {
            Some(lora) => {
                let values = init_params(lora, lora_seed(seed));
                exec.write_values(exec.plan.handles.trainable, &values);
                values
            }
            None => init,
        };
        // Mixed precision: the master weights hold the unrounded fp32 values.
        if let Some(master) = exec.plan.handles.master {
            exec.write_flat(master, &trainable);
        }
        Ok(exec)
    }

    /// The allocator's account of the last step, recorded live as its ops were placed (None
    /// before a step has run).
    pub fn memory(&self) -> Option<&StepMemory> {
        self.memory.as_ref()
    }

    /// What the driver layer reported after the last step (matched against the segments).
    pub fn device_figures(&self) -> &DeviceFigures {
        &self.device
    }

    /// Bytes of the wgpu buffers behind the allocator's live segments (their requested sizes).
    pub fn reserved_buffer_bytes(&self) -> u64 {
        self.buffers.values().map(wgpu::Buffer::size).sum()
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// This executor's number in the process, which its segment buffers' labels carry
    /// (`seg.<id>@<instance>`).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Overwrites the flat parameter tensor (rounded to its precision); under ZeRO-3 the rank's
    /// shard of `flat`.
    pub fn write_params(&self, flat: &[f32]) {
        self.write_flat(self.plan.handles.params, flat);
    }

    /// Writes the flat values `flat` (the whole layout) into tensor `id`: all of them, or under
    /// ZeRO the rank's shard of them.
    pub fn write_flat(&self, id: TensorId, flat: &[f32]) {
        let start = usize::try_from(self.plan.flat_start(id)).unwrap_or(usize::MAX);
        self.write_values(id, flat.get(start..).unwrap_or(&[]));
    }

    /// Overwrites the start of a float tensor with `values`, encoded in its dtype (16-bit
    /// values round to nearest even).
    pub fn write_values(&self, id: TensorId, values: &[f32]) {
        if self.store_host(self.plan.whole(id), values, false) {
            return;
        }
        let bytes = encode(self.plan.tensor(id).dtype, values);
        self.write_tensor(id, &bytes);
    }

    /// fp16's loss scaler (None in other precisions).
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.state.scaler.as_ref()
    }

    pub fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.state.scaler.as_mut()
    }

    /// Buffer and byte offset of a view, while its tensor is placed.
    fn locate(&self, v: View) -> Option<(&wgpu::Buffer, u64)> {
        let p: Placement = self.allocator.placement(v.tensor)?;
        let elem = self.plan.tensor(v.tensor).dtype.size_bytes();
        Some((self.buffers.get(&p.segment)?, p.offset + elem * v.offset))
    }

    /// Bytes a view binds (whole 4-byte words).
    fn view_bytes(&self, v: View) -> u64 {
        self.plan.tensor(v.tensor).dtype.bytes_for(v.len)
    }

    /// Overwrites the start of a placed tensor with `data` (f32 or u32 bytes); extra bytes are
    /// ignored.
    pub fn write_tensor(&self, id: TensorId, data: &[u8]) {
        let size = self.plan.tensor(id).size_bytes();
        let n = data.len().min(ix(size)) / 4 * 4;
        if let (true, Some((buffer, offset))) = (n > 0, self.locate(self.plan.whole(id))) {
            self.ctx.queue.write_buffer(buffer, offset, &data[..n]);
        }
    }

    /// Validates and uploads a batch: tokens, targets and the per-token position index.
    pub fn upload_batch(&mut self, batch: &Batch) -> Result<(), BackendError> {
        let uploads = crate::backend::micro_uploads(&self.plan, batch)?;
        self.state.count_targets(batch);
        for m in uploads {
            let h = m.handles;
            self.write_tensor(h.tokens, bytemuck::cast_slice(m.tokens));
            self.write_tensor(h.targets, bytemuck::cast_slice(m.targets));
            self.write_tensor(h.token_offsets, bytemuck::cast_slice(&m.token_offsets));
            self.write_tensor(h.token_positions, bytemuck::cast_slice(&m.token_positions));
            if let (Some(p), Some((starts, offsets, rows))) = (h.packing, &m.packing) {
                self.write_tensor(p.doc_starts.tensor, bytemuck::cast_slice(starts));
                self.write_tensor(p.position_offsets.tensor, bytemuck::cast_slice(offsets));
                self.write_tensor(p.position_rows.tensor, bytemuck::cast_slice(rows));
            }
        }
        Ok(())
    }

    /// Uniforms, and what a run of `phases` changes; then recording starts (each op's commands
    /// bound live). A failure undoes what the run changed.
    fn prepare(&mut self, phases: &[Phase]) -> Result<(), BackendError> {
        self.state.begin(phases);
        self.write_dynamic_uniforms();
        self.start_recording(phases).inspect_err(|_| self.state.cancel(phases))
    }

    /// Submits the ops of `phases` (the batch must be uploaded) and returns the loss.
    pub async fn run_phases(&mut self, phases: &[Phase]) -> Result<f32, BackendError> {
        self.prepare(phases)?;
        let cmds = match self.record_through_host().await {
            Ok(cmd) => vec![cmd],
            Err(e) => {
                // A failure before the end: the run's optimizer step never happened.
                self.state.cancel(phases);
                return Err(e);
            }
        };
        self.ctx.scoped("running the step", || self.ctx.queue.submit(cmds)).await?;
        let n = self.plan.handles.micro.len();
        let data = read_buffer(&self.ctx, &self.loss_staging, bytes(n + 1)).await?;
        self.after_step();
        Ok(self.finish(&data, phases.contains(&Phase::Optimizer)))
    }

    /// Starts a run of `phases` whose collectives the cluster carries out: the step's uniforms,
    /// then recording (see `segments::record_to_collective`).
    pub(in crate::backend::gpu) fn begin_cluster_run(&mut self, phases: &[Phase]) -> Result<(), BackendError> {
        self.prepare(phases)
    }

    /// The loss of a run the cluster submitted to its end (`optimizer`: the run had the
    /// optimizer phase).
    pub(in crate::backend::gpu) async fn collect_run(&mut self, optimizer: bool) -> Result<f32, BackendError> {
        let n = self.plan.handles.micro.len();
        let data = read_buffer(&self.ctx, &self.loss_staging, bytes(n + 1)).await?;
        self.after_step();
        Ok(self.finish(&data, optimizer))
    }

    /// A view's buffer, byte offset and bytes, while its tensor is placed.
    pub(in crate::backend::gpu) fn locate_view(&self, v: View) -> Option<(&wgpu::Buffer, u64, u64)> {
        let (buffer, offset) = self.locate(v)?;
        Some((buffer, offset, self.view_bytes(v)))
    }

    /// The device figures once a step has run.
    fn after_step(&mut self) {
        self.device = self.device_report();
        if let DeviceFigures::Reported(d) = &mut self.device {
            self.device_peak = self.device_peak.max(d.segment_bytes());
            d.peak_segment_bytes = self.device_peak;
        }
    }

    /// Starts a whole training step on `batch` without waiting for it: the UI's path, which
    /// never blocks a frame (except to drain the queue when a tight budget makes the allocator
    /// release a segment mid-step). [`Self::poll_step`] says when it is done.
    pub fn submit_step(&mut self, batch: &Batch) -> Result<(), BackendError> {
        self.upload_batch(batch)?;
        let phases = [Phase::Forward, Phase::Backward, Phase::Optimizer];
        self.prepare(&phases)?;
        // Records to the end (arming the losses' readback), or to a copy down that waits.
        self.pump().inspect_err(|_| self.state.cancel(&phases))
    }

    /// Maps the losses' staging buffer once the submitted work is done ([`Self::poll_step`]
    /// collects them).
    pub(in crate::backend::gpu) fn arm_readback(&mut self) {
        let (tx, rx) = futures_channel::oneshot::channel();
        let n = self.plan.handles.micro.len();
        self.loss_staging.slice(..bytes(n + 1)).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.pending = Some(rx);
    }

    /// Whether a submitted step is still running.
    pub fn step_in_flight(&self) -> bool {
        self.pending.is_some() || self.host_wait.is_some()
    }

    /// The loss of the step [`Self::submit_step`] started, once the GPU has finished it (None
    /// while it runs). Never blocks: on native it polls the device once, on the web the browser
    /// completes the readback.
    pub fn poll_step(&mut self) -> Option<Result<f32, BackendError>> {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
        // Offload: a copy down came back; the step records on (its losses later).
        if let Some(done) = self.poll_host() {
            if let Err(e) = done {
                self.state.cancel(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
                return Some(Err(e));
            }
            return None;
        }
        if self.host_wait.is_some() {
            return None;
        }
        let rx = self.pending.as_mut()?;
        let mapped = match rx.try_recv() {
            Ok(None) => {
                return match self.ctx.check_alive() {
                    Ok(()) => None,
                    Err(e) => {
                        self.pending = None;
                        Some(Err(e.into()))
                    }
                };
            }
            Ok(Some(r)) => r.map_err(|e| GpuError::Readback(e.to_string())),
            Err(_) => Err(GpuError::Readback("the map callback was dropped".into())),
        };
        self.pending = None;
        let result = mapped.and_then(|()| {
            let n = self.plan.handles.micro.len();
            let data = {
                let view = self
                    .loss_staging
                    .slice(..bytes(n + 1))
                    .get_mapped_range()
                    .map_err(|e| GpuError::Readback(e.to_string()))?;
                view.to_vec()
            };
            self.loss_staging.unmap();
            if let Some(e) = self.ctx.take_uncaptured_errors().pop() {
                return Err(GpuError::Validation(e));
            }
            self.after_step();
            Ok(self.finish(&data, true))
        });
        Some(result.map_err(BackendError::from))
    }

    /// The loss from the staging words, and fp16's loss-scale update after an optimizer step.
    fn finish(&mut self, data: &[u8], optimizer: bool) -> f32 {
        let n = self.plan.handles.micro.len();
        let words: Vec<f32> = bytemuck::pod_collect_to_vec(data);
        if optimizer {
            let found_inf = words.get(n).is_some_and(|w| w.to_bits() != 0);
            self.state.finish_optimizer(found_inf);
        }
        words[..n.min(words.len())].iter().sum::<f32>() / n.max(1) as f32
    }

    /// Writes the uniforms that change between steps: the loss scale (fp16) into the
    /// cross-entropy backward and the optimizer, and AdamW's step count.
    fn write_dynamic_uniforms(&self) {
        let scale = self.state.loss_scale();
        let queue = &self.ctx.queue;
        for (offset, p) in &self.dynamic.cross_entropy {
            let base = self.state.counted_scale.map_or(p.scale, |s| s as f32);
            let p = CrossEntropyParams { scale: base * scale, ..*p };
            queue.write_buffer(&self.uniform_buffer, *offset, bytemuck::bytes_of(&p));
        }
        if let Some((offset, n, copy, flag)) = self.dynamic.adamw {
            let s = self.plan.adamw_step(self.state.steps_taken.max(1));
            let p = AdamWParams::new(n, &s, 1.0 / scale, copy, flag);
            queue.write_buffer(&self.uniform_buffer, offset, bytemuck::bytes_of(&p));
        }
        if let Some((offset, views)) = &self.dynamic.sgd {
            let o = self.plan.optimizer;
            let p = SgdParams::new(views, o.lr, o.momentum, o.weight_decay, 1.0 / scale);
            queue.write_buffer(&self.uniform_buffer, *offset, bytemuck::bytes_of(&p));
        }
    }

    /// Uploads `batch` and runs forward, backward and the optimizer.
    pub async fn train_step_async(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).await
    }

    /// Reads a whole float tensor back (16-bit values widened to f32).
    pub async fn read_tensor_async(&self, id: TensorId) -> Result<Vec<f32>, GpuError> {
        self.read_view_async(self.plan.whole(id)).await
    }

    /// One view of a placed tensor, read back (e.g. one parameter's gradient): only its bytes
    /// travel.
    pub async fn read_view_async(&self, view: View) -> Result<Vec<f32>, GpuError> {
        if self.plan.tensor(view.tensor).host {
            return Ok(self.host_values(view));
        }
        let size = self.view_bytes(view);
        let (buffer, offset) = self.locate(view).ok_or_else(|| {
            GpuError::Readback(format!("tensor {} has no memory", self.plan.tensor(view.tensor).name))
        })?;
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("readback") });
        enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
        self.ctx.queue.submit([enc.finish()]);
        let data = read_buffer(&self.ctx, &staging, size).await?;
        Ok(decode(self.plan.tensor(view.tensor).dtype, &data, ix(view.len)))
    }
}

impl Drop for GpuExecutor {
    /// Destroys the segment buffers at once, so the device's report no longer lists them (a
    /// failed or replaced executor leaves nothing behind).
    fn drop(&mut self) {
        for b in self.buffers.values() {
            b.destroy();
        }
    }
}

/// Blocking wrappers for the CLI and tests.
#[cfg(not(target_arch = "wasm32"))]
impl crate::backend::Trainer for GpuExecutor {
    fn backend_name(&self) -> String {
        format!("gpu ({})", self.ctx.describe())
    }
    fn plan(&self) -> &Plan {
        &self.plan
    }
    fn train_step(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        pollster::block_on(self.train_step_async(batch))
    }
    fn compute_grads(&mut self, batch: &Batch) -> Result<f32, BackendError> {
        self.upload_batch(batch)?;
        pollster::block_on(self.run_phases(&[Phase::Forward, Phase::Backward]))
    }
    fn read_params(&mut self) -> Result<Vec<f32>, BackendError> {
        Ok(pollster::block_on(self.read_tensor_async(self.plan.handles.params))?)
    }
    fn read_grads(&mut self) -> Result<Vec<f32>, BackendError> {
        // fp16 stores scaled gradients: report the true ones.
        let grads = pollster::block_on(self.read_tensor_async(self.plan.handles.grads))?;
        let inv = 1.0 / self.state.backward_scale;
        Ok(grads.into_iter().map(|g| g * inv).collect())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        GpuExecutor::write_params(self, flat);
        // The fp32 copy the optimizer updates (mixed precision, offload) is the same weights.
        if let (Some(master), None) = (self.plan.handles.master, &self.plan.lora) {
            self.write_flat(master, flat);
        }
        Ok(())
    }
    fn memory(&self) -> Option<&crate::memory::StepMemory> {
        self.memory.as_ref()
    }
    fn device_figures(&self) -> DeviceFigures {
        self.device.clone()
    }
    fn loss_scaler(&self) -> Option<&LossScaler> {
        self.state.scaler.as_ref()
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.state.scaler.as_mut()
    }
    fn reshape(&mut self, plan: Plan) -> Result<(), BackendError> {
        GpuExecutor::reshape(self, plan)
    }
}

/// Builds kernels once per device inside error scopes, with the device's fastest GEMM.
pub async fn build_kernels(ctx: &GpuContext) -> Result<Arc<Kernels>, GpuError> {
    build_kernels_with(ctx, ctx.gemm_kind()).await
}

/// [`build_kernels`] with a chosen GEMM kernel (tests run both where the device has both).
pub async fn build_kernels_with(ctx: &GpuContext, gemm: GemmKind) -> Result<Arc<Kernels>, GpuError> {
    let kernels = ctx.scoped("building the compute pipelines", || Kernels::new(&ctx.device, gemm)).await?;
    Ok(Arc::new(kernels))
}
