//! Executes a plan on the GPU. Tensors are placed by the caching allocator, driven live op by
//! op as each step is recorded — the same driver the CPU backend runs, so the allocator's
//! figures are an account of what this step did, not a copy of the prediction. Each segment the
//! allocator reserves is a real wgpu buffer (labelled `seg.<id>`), created when the segment is
//! reserved and destroyed when the allocator releases it, before the next one is created: the
//! budget bounds real device memory. Each tensor is bound at its offset inside its segment.
//! After each step the driver layer's own report (where the backend gives one) is matched
//! against the segments: the device figures.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use super::kernels::adamw::AdamWParams;
use super::kernels::attention::AttnShape;
use super::kernels::crossentropy::CrossEntropyParams;
use super::kernels::{Binding, Command, Kernels, Recorder};
use super::kernels::{SgdParams, SgdViews};
use super::{GpuContext, GpuError};
use crate::backend::cpu::ops::AdamWStep;
use crate::backend::{BackendError, ix};
use crate::data::Batch;
use crate::memory::allocator::Event;
use crate::memory::device::{
    DeviceAllocation, DeviceBlock, DeviceCounters, DeviceFigures, DeviceMemory, DriverReport, NOT_REPORTED_BACKEND,
    NOT_REPORTED_BROWSER, segment_label,
};
use crate::memory::step::{StepAllocator, StepMemory, Trace};
use crate::memory::{Placement, SegmentId};
use crate::model::init::{init_params, lora_seed};
use crate::plan::{DType, LossScaler, Op, Phase, Plan, TensorId, View};

/// A capacity that never limits: the real device's memory does.
pub const UNLIMITED: u64 = u64::MAX / 4;

enum Cmd {
    Dispatch {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: [u32; 3],
    },
    Clear {
        buffer: wgpu::Buffer,
        offset: u64,
        size: u64,
    },
    /// A command whose views have no memory (never the case for a plan's own ops).
    Skip,
}

struct Recorded {
    /// Its op's phase, for profiles (native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    phase: Phase,
    /// The plan op's label and the kernel entry point, for profiles (native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    label: String,
    cmd: Cmd,
}

/// Where a binding points: (segment, byte offset, bytes); None for the placeholder.
type BindingKey = Option<(SegmentId, u64, u64)>;

/// A recorded command bound to buffers, and the placements it was bound for.
struct Bound {
    key: Vec<BindingKey>,
    rec: Recorded,
}

/// A plan bound to GPU memory, ready to run steps.
pub struct GpuExecutor {
    ctx: GpuContext,
    /// This executor's number in the process: its buffers' labels carry it.
    instance: u64,
    kernels: Arc<Kernels>,
    plan: Plan,
    /// The caching allocator, driven op by op as each step is recorded.
    allocator: StepAllocator,
    capacity_bytes: u64,
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
    steps_taken: u32,
    /// fp16's loss scaling.
    scaler: Option<LossScaler>,
    /// The loss scale of the last backward pass (what the stored gradients are multiplied by).
    backward_scale: f32,
    /// The readback of a step submitted by [`GpuExecutor::submit_step`], not yet complete.
    pending: Option<futures_channel::oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>>,
}

fn bytes(elems: usize) -> u64 {
    (elems * 4) as u64
}

/// Uniforms that change between steps, by byte offset.
#[derive(Default)]
struct DynamicUniforms {
    /// Cross-entropy backward: the uniform with the plan's scale, to multiply by the loss scale.
    cross_entropy: Vec<(u64, CrossEntropyParams)>,
    /// AdamW: offset, elements, whether the 16-bit copy and the overflow flag are bound.
    adamw: Option<(u64, usize, bool, bool)>,
    sgd: Option<(u64, SgdViews)>,
}

/// Records every op of `plan`, 16-bit tensors through their storage variants.
/// Returns the uniforms to rewrite each step and, for each op, the range of its commands.
fn record_plan(
    k: &Kernels,
    plan: &Plan,
    rec: &mut Recorder,
    native_f16: bool,
) -> Result<(DynamicUniforms, Vec<Range<usize>>), GpuError> {
    rec.set_dtypes(plan.tensors.iter().map(|t| t.dtype).collect(), native_f16);
    let mut dynamic = DynamicUniforms::default();
    let mut ranges = Vec::with_capacity(plan.ops.len());
    let m = plan.model;
    let (b, t) = (plan.shape.batch, plan.shape.seq);
    let (c, v) = (m.d_model, m.vocab);
    let attn = AttnShape { b, t, c, nh: m.n_heads };
    for node in &plan.ops {
        let first = rec.commands.len();
        record_op(k, plan, rec, node, &mut dynamic, attn, (t, c, v))?;
        ranges.push(first..rec.commands.len());
    }
    Ok((dynamic, ranges))
}

/// Records one op's commands.
fn record_op(
    k: &Kernels,
    plan: &Plan,
    rec: &mut Recorder,
    node: &crate::plan::OpNode,
    dynamic: &mut DynamicUniforms,
    attn: AttnShape,
    (t, c, v): (usize, usize, usize),
) -> Result<(), GpuError> {
    {
        rec.set_context(node.phase, &node.label);
        match node.op {
            Op::Zero { dst } => rec.clear(dst),
            Op::Embedding { tokens, wte, wpe, out } => k.embedding.forward(rec, tokens, wte, wpe, out, t, c, v)?,
            Op::EmbeddingBackward { token_offsets, token_positions, dout, dwte, dwpe, .. } => {
                k.embedding.backward(rec, token_offsets, token_positions, dout, dwte, dwpe, t, c, v)?
            }
            Op::LayerNorm { inp, weight, bias, out, mean, rstd } => {
                k.layernorm.forward(rec, inp, weight, bias, out, mean, rstd, c)?
            }
            Op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } => {
                k.layernorm.backward(rec, inp, weight, mean, rstd, dout, dinp, dweight, dbias, c, accumulate)?
            }
            Op::Matmul { inp, weight, bias, out, rows, k: kk, n, weight_transposed } => {
                k.matmul.forward(rec, inp, weight, bias, out, ix(rows), ix(kk), ix(n), weight_transposed)?
            }
            Op::MatmulBackward {
                inp,
                weight,
                dout,
                dinp,
                dweight,
                dbias,
                rows,
                k: kk,
                n,
                weight_transposed,
                accumulate,
            } => k.matmul.backward(
                rec,
                inp,
                weight,
                dout,
                dinp,
                dweight,
                dbias,
                ix(rows),
                ix(kk),
                ix(n),
                weight_transposed,
                accumulate,
            )?,
            Op::MatmulAdd { inp, weight, out, rows, k: kk, n, alpha } => {
                k.matmul.add_forward(rec, inp, weight, out, ix(rows), ix(kk), ix(n), alpha)?
            }
            Op::MatmulAddBackward { inp, weight, dout, dinp, dweight, rows, k: kk, n, alpha } => {
                k.matmul.add_backward(rec, inp, weight, dout, dinp, dweight, ix(rows), ix(kk), ix(n), alpha)?
            }
            Op::Attention { qkv, att, out } => k.attention.forward(rec, qkv, att, out, attn)?,
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => {
                k.attention.backward(rec, qkv, att, dout, datt, dqkv, attn)?
            }
            Op::FlashAttention { qkv, out, lse } => k.flash_attention.forward(rec, qkv, out, lse, attn)?,
            Op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv } => {
                k.flash_attention.backward(rec, qkv, out, lse, dout, delta, dqkv, attn)?
            }
            Op::Gelu { inp, out } => k.gelu.forward(rec, inp, out)?,
            Op::GeluBackward { inp, dout, dinp } => k.gelu.backward(rec, inp, dout, dinp)?,
            Op::Residual { a, b, out } => k.residual.forward(rec, a, b, out)?,
            Op::ResidualBackward { dout, da } => k.residual.backward(rec, dout, da)?,
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                k.crossentropy.forward(rec, logits, targets, probs, losses, loss, v)?
            }
            Op::CrossEntropyBackward { probs, targets, dlogits, scale } => {
                k.crossentropy.backward(rec, probs, targets, dlogits, v, scale)?;
                if let Some(offset) = rec.last_uniform() {
                    dynamic.cross_entropy.push((offset, CrossEntropyParams::new(ix(targets.len), v, scale)));
                }
            }
            Op::CheckFinite { grads, found_inf } => k.check_finite.record(rec, grads, found_inf)?,
            Op::AdamW { params, grads, m: mm, v: vv, copy, found_inf } => {
                let s = adamw_step(plan, 1);
                let offset = k.adamw.step(rec, params, grads, mm, vv, copy, found_inf, &s)?;
                dynamic.adamw = Some((offset, ix(params.len), copy.is_some(), found_inf.is_some()));
            }
            Op::Sgd { params, grads, momentum, copy, found_inf } => {
                let o = plan.optimizer;
                let views = SgdViews { params, grads, momentum_buf: momentum, copy, found_inf };
                let p = SgdParams::new(&views, o.lr, o.momentum, o.weight_decay, 1.0);
                dynamic.sgd = Some((k.sgd.step(rec, &views, &p)?, views));
            }
        }
    }
    Ok(())
}

fn adamw_step(plan: &Plan, step: u32) -> AdamWStep {
    let o = plan.optimizer;
    AdamWStep {
        lr: o.lr,
        beta1: o.beta1,
        beta2: o.beta2,
        eps: o.eps,
        weight_decay: o.weight_decay,
        step,
        decay_end: ix(plan.trainable_layout().decay_end),
    }
}

impl GpuExecutor {
    /// [`Self::with_budget`] without a virtual budget: only the device's memory limits.
    pub async fn new(ctx: &GpuContext, kernels: &Kernels, plan: Plan, seed: u64) -> Result<Self, BackendError> {
        Self::with_budget(ctx, kernels, plan, seed, UNLIMITED).await
    }

    /// Records the plan's dispatches, places the persistent tensors and the batch with the
    /// caching allocator under a virtual GPU of `budget_bytes` (each segment a wgpu buffer) and
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
        budget_bytes: u64,
    ) -> Result<Self, BackendError> {
        ctx.check_alive()?;
        let plan_scaler = plan.techniques.precision.scales_loss().then(LossScaler::default);
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
        let mut allocator = StepAllocator::new(&plan, budget_bytes, true);
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
            capacity_bytes: budget_bytes,
            events_seen: 0,
            buffers: BTreeMap::new(),
            rec,
            op_commands,
            bound: (0..commands).map(|_| None).collect(),
            memory: None,
            device: DeviceFigures::NotReported { reason: "no step has run yet".into() },
            device_peak: 0,
            uniform_buffer,
            placeholder,
            dynamic,
            loss_staging,
            steps_taken: 0,
            scaler: plan_scaler,
            backward_scale: 1.0,
            pending: None,
        };
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
            exec.write_values(master, &trainable);
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

    /// Overwrites the flat parameter tensor (rounded to its precision).
    pub fn write_params(&self, flat: &[f32]) {
        self.write_values(self.plan.handles.params, flat);
    }

    /// Overwrites the start of a float tensor with `values`, encoded in its dtype (16-bit
    /// values round to nearest even).
    pub fn write_values(&self, id: TensorId, values: &[f32]) {
        let bytes = encode(self.plan.tensor(id).dtype, values);
        self.write_tensor(id, &bytes);
    }

    /// fp16's loss scaler (None in other precisions).
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
    }

    pub fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.scaler.as_mut()
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
    pub fn upload_batch(&self, batch: &Batch) -> Result<(), BackendError> {
        for m in crate::backend::micro_uploads(&self.plan, batch)? {
            let h = m.handles;
            self.write_tensor(h.tokens, bytemuck::cast_slice(m.tokens));
            self.write_tensor(h.targets, bytemuck::cast_slice(m.targets));
            self.write_tensor(h.token_offsets, bytemuck::cast_slice(&m.token_offsets));
            self.write_tensor(h.token_positions, bytemuck::cast_slice(&m.token_positions));
        }
        Ok(())
    }

    fn check_segment_limit(&self, size: u64) -> Result<(), GpuError> {
        let limit = self.ctx.limits().max_buffer_size;
        if size > limit {
            return Err(GpuError::ExceedsLimit {
                what: "an allocator segment".into(),
                needed: size,
                limit,
                bytes: true,
            });
        }
        Ok(())
    }

    /// A real out-of-memory from the device while reserving `segment` (`size` bytes), in the
    /// allocator's words, naming the tensor whose allocation asked for the segment.
    fn device_oom(&self, segment: SegmentId, size: u64, reserved_before: u64, detail: &str) -> crate::memory::StepOom {
        let asked = self.allocator.allocator.events().iter().find_map(|e| match e {
            Event::Alloc { tag, placement, .. } if placement.segment == segment => Some(*tag),
            _ => None,
        });
        let (tensor, op) = asked.map_or((TensorId(0), None), |t| (t.tensor, t.op));
        device_oom(&self.plan, tensor, op, size, reserved_before, self.capacity_bytes, detail)
    }

    /// Creates and destroys segment buffers as the allocator reserved and released them since
    /// the last call. Before a buffer is destroyed, the commands recorded so far (`chunk`, which
    /// may use it) are submitted, and on native the queue is drained: the released memory is
    /// gone before the next segment is created, so real memory never exceeds the budget.
    fn sync_buffers(&mut self, chunk: &mut Vec<usize>) -> Result<(), BackendError> {
        let events: Vec<Event<crate::memory::step::TensorTag>> =
            self.allocator.allocator.events()[self.events_seen.min(self.allocator.allocator.events().len())..].to_vec();
        self.events_seen = self.allocator.allocator.events().len();
        for e in events {
            match e {
                Event::SegmentFree { segment, .. } => {
                    if !chunk.is_empty() {
                        let cmd = self.encode_chunk(chunk, false);
                        self.ctx.queue.submit([cmd]);
                        chunk.clear();
                    }
                    if let Some(b) = self.buffers.remove(&segment) {
                        b.destroy();
                    }
                    // Bind groups of the released segment can never be used again.
                    for slot in &mut self.bound {
                        if slot.as_ref().is_some_and(|b| b.key.iter().flatten().any(|k| k.0 == segment)) {
                            *slot = None;
                        }
                    }
                    #[cfg(not(target_arch = "wasm32"))]
                    self.ctx
                        .device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
                }
                Event::SegmentAlloc { segment, size, .. } => {
                    self.check_segment_limit(size)?;
                    let reserved_before = self.reserved_buffer_bytes();
                    match self.create_segment(segment, size) {
                        Ok(b) => {
                            self.buffers.insert(segment, b);
                            self.observe_device();
                        }
                        Err(detail) => {
                            let oom = self.device_oom(segment, size, reserved_before, &detail);
                            // The allocator holds a segment the device refused: give the step's
                            // memory back and release every unused segment, the refused one too.
                            self.allocator.release_step();
                            self.allocator.allocator.release_cached_segments();
                            self.sync_buffers(&mut Vec::new())?;
                            return Err(BackendError::OutOfMemory(Box::new(oom)));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A segment's buffer, checked for a real out-of-memory. Native wgpu reports the error at
    /// once; in the browser it arrives later, as a validation error of the step that uses the
    /// buffer.
    fn create_segment(&self, segment: SegmentId, size: u64) -> Result<wgpu::Buffer, String> {
        let scope = self.ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = storage_buffer(&self.ctx.device, &segment_label(segment, self.instance), size);
        match poll_now(scope.pop()) {
            Some(Some(e)) => {
                buffer.destroy();
                Err(e.to_string())
            }
            _ => Ok(buffer),
        }
    }

    /// Takes the driver layer's report and keeps the most segment bytes seen this step.
    fn observe_device(&mut self) {
        if let DeviceFigures::Reported(d) = self.device_report() {
            self.device_peak = self.device_peak.max(d.segment_bytes());
        }
    }

    /// The driver layer's report now, matched against the allocator's live segments.
    fn device_report(&self) -> DeviceFigures {
        if cfg!(target_arch = "wasm32") {
            return DeviceFigures::NotReported { reason: NOT_REPORTED_BROWSER.into() };
        }
        let Some(report) = self.ctx.device.generate_allocator_report() else {
            return DeviceFigures::NotReported { reason: NOT_REPORTED_BACKEND.into() };
        };
        let counters = self.ctx.device.get_internal_counters().hal;
        let counters = (counters.buffers.read() > 0).then(|| DeviceCounters {
            buffers: counters.buffers.read() as u64,
            buffer_memory_bytes: counters.buffer_memory.read() as u64,
            memory_allocations: counters.memory_allocations.read() as u64,
        });
        let blocks = report
            .blocks
            .iter()
            .map(|b| DeviceBlock {
                size_bytes: b.size,
                allocations: report
                    .allocations
                    .get(b.allocations.clone())
                    .unwrap_or(&[])
                    .iter()
                    .map(|a| DeviceAllocation { name: a.name.clone(), size_bytes: a.size, offset_bytes: a.offset })
                    .collect(),
            })
            .collect();
        let raw = DriverReport {
            blocks,
            total_allocated_bytes: report.total_allocated_bytes,
            total_reserved_bytes: report.total_reserved_bytes,
            counters,
        };
        let live: Vec<(SegmentId, u64)> = self.allocator.allocator.segments().map(|s| (s.id, s.size)).collect();
        DeviceFigures::Reported(DeviceMemory::match_segments(raw, &live, self.instance))
    }

    /// The command at `index` bound to the buffers its views live in now (reused when the
    /// placements are those it was last bound for, as in every step after the first).
    fn bind(&mut self, index: usize) {
        let Some((phase, label, command)) = self.rec.commands.get(index) else { return };
        let views: Vec<(u32, Option<View>)> = match command {
            Command::Clear(v) => vec![(0, Some(*v))],
            Command::Dispatch(spec) => spec
                .bindings
                .iter()
                .map(|(slot, b)| {
                    (
                        *slot,
                        match b {
                            Binding::View(v) => Some(*v),
                            Binding::Dummy => None,
                        },
                    )
                })
                .collect(),
        };
        let key: Vec<BindingKey> = views
            .iter()
            .map(|(_, v)| {
                let v = (*v)?;
                let p = self.allocator.placement(v.tensor)?;
                let elem = self.plan.tensor(v.tensor).dtype.size_bytes();
                Some((p.segment, p.offset + elem * v.offset, self.view_bytes(v)))
            })
            .collect();
        if self.bound[index].as_ref().is_some_and(|b| b.key == key) {
            return;
        }
        let device = &self.ctx.device;
        let buffer = |k: &BindingKey| k.and_then(|(seg, off, size)| Some((self.buffers.get(&seg)?, off, size)));
        let cmd = match command {
            Command::Clear(_) => match buffer(&key[0]) {
                Some((b, offset, size)) => Cmd::Clear { buffer: b.clone(), offset, size },
                None => Cmd::Skip,
            },
            Command::Dispatch(spec) => {
                let bindings = views.iter().zip(&key).map(|((slot, _), k)| match buffer(k) {
                    Some((b, offset, size)) => {
                        wgpu::BufferBinding { buffer: b, offset, size: wgpu::BufferSize::new(size) }
                    }
                    None => placeholder_binding(&self.placeholder, *slot),
                });
                let bind_group = dispatch_bind_group(device, label, spec, &self.uniform_buffer, bindings);
                Cmd::Dispatch { pipeline: self.kernels.pipeline(device, spec), bind_group, groups: spec.groups }
            }
        };
        let entry = match command {
            Command::Clear(_) => "clear",
            Command::Dispatch(spec) => spec.entry.name,
        };
        let rec = Recorded { phase: *phase, label: format!("{label} [{entry}]"), cmd };
        self.bound[index] = Some(Bound { key, rec });
    }

    /// One command buffer with the bound commands `chunk`, then (at the end of a step) a copy
    /// of the losses and the overflow flag to the staging buffer.
    fn encode_chunk(&self, chunk: &[usize], losses: bool) -> wgpu::CommandBuffer {
        let mut enc =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("oomlab step") });
        let commands: Vec<&Recorded> =
            chunk.iter().filter_map(|&i| self.bound.get(i).and_then(Option::as_ref)).map(|b| &b.rec).collect();
        encode_commands(&mut enc, &commands);
        if losses {
            // Each micro-batch's loss, side by side, then the overflow flag.
            let n = self.plan.handles.micro.len();
            let handles = self.plan.handles.micro.iter().map(|m| m.loss).chain(self.plan.handles.found_inf);
            for (j, id) in handles.enumerate().take(n + 1) {
                if let Some((buffer, offset)) = self.locate(self.plan.whole(id)) {
                    enc.copy_buffer_to_buffer(buffer, offset, &self.loss_staging, bytes(j), 4);
                }
            }
        }
        enc.finish()
    }

    /// Drives the allocator through the ops of `phases` as an eager framework allocates and
    /// frees them, binding each op's commands to where its tensors are placed at that moment,
    /// and returns the command buffers to submit (more than one when a segment was released
    /// mid-step). A run that includes the forward pass starts a new step. An allocation beyond
    /// the budget is [`BackendError::OutOfMemory`]; the step's memory is released.
    fn record_step(&mut self, phases: &[Phase]) -> Result<Vec<wgpu::CommandBuffer>, BackendError> {
        self.ctx.check_alive()?;
        if self.pending.is_some() {
            return Err(GpuError::Readback("a step is still running".into()).into());
        }
        let mut chunk = Vec::new();
        if phases.contains(&Phase::Forward) {
            self.allocator.release_step();
            self.sync_buffers(&mut chunk)?;
            self.allocator.allocator.clear_events();
            self.events_seen = 0;
            self.device_peak = 0;
        }
        self.allocator.clear_log();
        let mut trace = Trace::detailed();
        trace.record(&self.allocator, None);
        for i in 0..self.plan.ops.len() {
            if !phases.contains(&self.plan.ops[i].phase) {
                continue;
            }
            if let Err(oom) = self.allocator.before_op(&self.plan, i) {
                self.allocator.release_step();
                self.sync_buffers(&mut chunk)?;
                return Err(BackendError::OutOfMemory(oom));
            }
            self.sync_buffers(&mut chunk)?;
            trace.record(&self.allocator, Some(i));
            let commands = self.op_commands.get(i).cloned().unwrap_or(0..0);
            for c in commands {
                self.bind(c);
                chunk.push(c);
            }
            self.allocator.after_op(i);
            self.sync_buffers(&mut chunk)?;
        }
        self.memory = Some(trace.finish(&self.allocator, self.capacity_bytes));
        Ok(vec![self.encode_chunk(&chunk, true)])
    }

    /// Uniforms, the step's commands (recorded live), and what a run of `phases` changes.
    fn prepare(&mut self, phases: &[Phase]) -> Result<Vec<wgpu::CommandBuffer>, BackendError> {
        if phases.contains(&Phase::Optimizer) {
            self.steps_taken += 1;
        }
        self.write_dynamic_uniforms();
        if phases.contains(&Phase::Backward) {
            self.backward_scale = self.scaler.map_or(1.0, |s| s.scale);
        }
        let recorded = self.record_step(phases);
        if recorded.is_err() && phases.contains(&Phase::Optimizer) {
            self.steps_taken -= 1;
        }
        recorded
    }

    /// Submits the ops of `phases` (the batch must be uploaded) and returns the loss.
    pub async fn run_phases(&mut self, phases: &[Phase]) -> Result<f32, BackendError> {
        let cmds = self.prepare(phases)?;
        self.ctx.scoped("running the step", || self.ctx.queue.submit(cmds)).await?;
        let n = self.plan.handles.micro.len();
        let data = read_buffer(&self.ctx, &self.loss_staging, bytes(n + 1)).await?;
        self.after_step();
        Ok(self.finish(&data, phases.contains(&Phase::Optimizer)))
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
        let cmds = self.prepare(&[Phase::Forward, Phase::Backward, Phase::Optimizer])?;
        self.ctx.queue.submit(cmds);
        let (tx, rx) = futures_channel::oneshot::channel();
        let n = self.plan.handles.micro.len();
        self.loss_staging.slice(..bytes(n + 1)).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.pending = Some(rx);
        Ok(())
    }

    /// Whether a submitted step is still running.
    pub fn step_in_flight(&self) -> bool {
        self.pending.is_some()
    }

    /// The loss of the step [`Self::submit_step`] started, once the GPU has finished it (None
    /// while it runs). Never blocks: on native it polls the device once, on the web the browser
    /// completes the readback.
    pub fn poll_step(&mut self) -> Option<Result<f32, BackendError>> {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
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
            if let Some(scaler) = self.scaler.as_mut()
                && !scaler.update(found_inf)
            {
                // A skipped step does not count (AdamW's bias correction).
                self.steps_taken -= 1;
            }
        }
        words[..n.min(words.len())].iter().sum::<f32>() / n.max(1) as f32
    }

    /// Writes the uniforms that change between steps: the loss scale (fp16) into the
    /// cross-entropy backward and the optimizer, and AdamW's step count.
    fn write_dynamic_uniforms(&self) {
        let scale = self.scaler.map_or(1.0, |s| s.scale);
        let queue = &self.ctx.queue;
        for (offset, p) in &self.dynamic.cross_entropy {
            let p = CrossEntropyParams { scale: p.scale * scale, ..*p };
            queue.write_buffer(&self.uniform_buffer, *offset, bytemuck::bytes_of(&p));
        }
        if let Some((offset, n, copy, flag)) = self.dynamic.adamw {
            let s = adamw_step(&self.plan, self.steps_taken.max(1));
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

    /// Times every command of the last step on its own (`iters` repetitions in one
    /// submission, after a warm-up), dispatch overhead included. Returns (phase, "op label
    /// [entry]", secs per run), in step order. Needs a step to have run (its bindings are reused;
    /// the values they read are whatever the buffers hold).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile_ops(&self, iters: usize) -> Result<Vec<(Phase, String, f64)>, GpuError> {
        let device = &self.ctx.device;
        let recorded: Vec<&Recorded> = self.bound.iter().flatten().map(|b| &b.rec).collect();
        let mut out = Vec::with_capacity(recorded.len());
        for rec in recorded {
            let run = |count: usize| -> Result<f64, GpuError> {
                let start = std::time::Instant::now();
                let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("profile") });
                for _ in 0..count {
                    encode_commands(&mut enc, &[rec]);
                }
                self.ctx.queue.submit([enc.finish()]);
                device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
                Ok(start.elapsed().as_secs_f64())
            };
            run(1)?;
            let secs = run(iters.max(1))? / iters.max(1) as f64;
            out.push((rec.phase, rec.label.clone(), secs));
        }
        Ok(out)
    }

    /// One view of a placed tensor, read back (e.g. one parameter's gradient): only its bytes
    /// travel.
    pub async fn read_view_async(&self, view: View) -> Result<Vec<f32>, GpuError> {
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

/// `values` as the bytes of a `dtype` tensor.
fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect(),
        DType::F32 | DType::U32 => bytemuck::cast_slice(values).to_vec(),
    }
}

/// The first `n` values of a `dtype` tensor's bytes, as f32.
fn decode(dtype: DType, data: &[u8], n: usize) -> Vec<f32> {
    let pairs = data.chunks_exact(2).map(|c| [c[0], c[1]]);
    match dtype {
        DType::F16 => pairs.map(|b| half::f16::from_le_bytes(b).to_f32()).take(n).collect(),
        DType::BF16 => pairs.map(|b| half::bf16::from_le_bytes(b).to_f32()).take(n).collect(),
        DType::F32 | DType::U32 => {
            let mut v: Vec<f32> = bytemuck::pod_collect_to_vec(data);
            v.truncate(n);
            v
        }
    }
}

/// Maps `staging`, copies out `size` bytes and unmaps. On native the device is polled until the
/// map completes; on the web the browser completes it and this future awaits it.
async fn read_buffer(ctx: &GpuContext, staging: &wgpu::Buffer, size: u64) -> Result<Vec<u8>, GpuError> {
    let (tx, rx) = futures_channel::oneshot::channel();
    staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    #[cfg(not(target_arch = "wasm32"))]
    ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
    ctx.check_alive()?;
    let mapped = rx.await.map_err(|_| GpuError::Readback("the map callback was dropped".into()))?;
    mapped.map_err(|e| GpuError::Readback(e.to_string()))?;
    let out = {
        let view = staging.slice(..size).get_mapped_range().map_err(|e| GpuError::Readback(e.to_string()))?;
        view.to_vec()
    };
    staging.unmap();
    if let Some(e) = ctx.take_uncaptured_errors().pop() {
        return Err(GpuError::Validation(e));
    }
    Ok(out)
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
        let inv = 1.0 / self.backward_scale;
        Ok(grads.into_iter().map(|g| g * inv).collect())
    }
    fn write_params(&mut self, flat: &[f32]) -> Result<(), BackendError> {
        GpuExecutor::write_params(self, flat);
        Ok(())
    }
    fn memory(&self) -> Option<&crate::memory::StepMemory> {
        self.memory.as_ref()
    }
    fn device_figures(&self) -> DeviceFigures {
        self.device.clone()
    }
    fn loss_scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
    }
    fn loss_scaler_mut(&mut self) -> Option<&mut LossScaler> {
        self.scaler.as_mut()
    }
}

/// Builds kernels once per device inside error scopes.
pub async fn build_kernels(ctx: &GpuContext) -> Result<Arc<Kernels>, GpuError> {
    let kernels = ctx.scoped("building the compute pipelines", || Kernels::new(&ctx.device)).await?;
    Ok(Arc::new(kernels))
}

fn storage_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(4),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// A real out-of-memory from the wgpu device while reserving a segment of `size` bytes for
/// `tensor` (asked for by `op`), in the allocator's words.
pub fn device_oom(
    plan: &Plan,
    tensor: TensorId,
    op: Option<usize>,
    size: u64,
    reserved_before: u64,
    budget_bytes: u64,
    detail: &str,
) -> crate::memory::StepOom {
    let info = plan.tensor(tensor);
    let op_label = op
        .and_then(|i| plan.ops.get(i))
        .map_or_else(|| "before the step".to_string(), |n| format!("{} ({})", n.label, n.op.name()));
    let error = crate::memory::OutOfMemory {
        requested_bytes: info.size_bytes(),
        tried_bytes: size,
        // Without a budget, the device's own memory was the limit: what it had given so far.
        capacity_bytes: if budget_bytes >= UNLIMITED { reserved_before } else { budget_bytes },
        free_bytes: 0,
        allocated_bytes: reserved_before,
        reserved_bytes: reserved_before,
        cached_free_bytes: 0,
        largest_free_block: 0,
    };
    let note = format!(
        "The wgpu device itself refused the segment ({detail}): the budget is larger than this GPU's free memory."
    );
    crate::memory::StepOom::new(tensor, info, op, op_label, error, &note)
}

/// The segments reserved by `events`, with their sizes.
fn new_segments<T>(events: &[Event<T>]) -> impl Iterator<Item = (SegmentId, u64)> + '_ {
    events.iter().filter_map(|e| match e {
        Event::SegmentAlloc { segment, size, .. } => Some((*segment, *size)),
        _ => None,
    })
}

/// The uniform buffer of a recording, with its bytes written.
fn uniform_buffer(ctx: &GpuContext, label: &str, bytes: &[u8]) -> wgpu::Buffer {
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (bytes.len() as u64).max(256),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue.write_buffer(&buffer, 0, bytes);
    buffer
}

/// A dispatch's bind group: its uniform slice at binding 0, then `bindings` in the order of the
/// spec's storage bindings.
fn dispatch_bind_group<'a>(
    device: &wgpu::Device,
    label: &str,
    spec: &super::kernels::DispatchSpec,
    uniforms: &'a wgpu::Buffer,
    bindings: impl Iterator<Item = wgpu::BufferBinding<'a>>,
) -> wgpu::BindGroup {
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: uniforms,
            offset: spec.uniform.0,
            size: wgpu::BufferSize::new(spec.uniform.1),
        }),
    }];
    entries.extend(
        spec.bindings
            .iter()
            .zip(bindings)
            .map(|((slot, _), b)| wgpu::BindGroupEntry { binding: *slot, resource: wgpu::BindingResource::Buffer(b) }),
    );
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(label),
        layout: &spec.entry.layout,
        entries: &entries,
    })
}

/// Unused bindings get disjoint 256-byte slices of one placeholder buffer: WebGPU (Dawn) rejects
/// two writable bindings of overlapping ranges in one dispatch.
const PLACEHOLDER_SLOTS: u64 = 16;

fn placeholder_buffer(device: &wgpu::Device) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("unused binding"),
        size: 256 * PLACEHOLDER_SLOTS,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    })
}

fn placeholder_binding(buffer: &wgpu::Buffer, slot: u32) -> wgpu::BufferBinding<'_> {
    wgpu::BufferBinding { buffer, offset: 256 * (slot as u64 % PLACEHOLDER_SLOTS), size: wgpu::BufferSize::new(256) }
}

/// The output of a future that is already complete (native wgpu's error scopes), or None.
fn poll_now<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// Encodes commands in order: clears at encoder level, runs of dispatches in one pass.
fn encode_commands(enc: &mut wgpu::CommandEncoder, commands: &[&Recorded]) {
    let mut i = 0;
    while i < commands.len() {
        match &commands[i].cmd {
            Cmd::Clear { buffer, offset, size } => {
                enc.clear_buffer(buffer, *offset, Some(*size));
                i += 1;
            }
            Cmd::Skip => i += 1,
            Cmd::Dispatch { .. } => {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("oomlab ops"),
                    timestamp_writes: None,
                });
                while let Some(Recorded { cmd: Cmd::Dispatch { pipeline, bind_group, groups }, .. }) =
                    commands.get(i).copied()
                {
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, bind_group, &[]);
                    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                    i += 1;
                }
            }
        }
    }
}

/// Times the tiled GEMM on an m×k · k×n product, `iters` dispatches in one submission.
/// Returns GFLOP/s (2·m·n·k per product).
#[cfg(not(target_arch = "wasm32"))]
pub fn bench_matmul(
    ctx: &GpuContext,
    kernels: &Kernels,
    m: usize,
    n: usize,
    k: usize,
    iters: usize,
) -> Result<f64, GpuError> {
    use super::kernels::matmul::{GemmCall, Operand};
    let device = &ctx.device;
    let view = |id: usize, len: usize| View { tensor: TensorId(id), offset: 0, len: len as u64 };
    let (a, b, c) = (view(0, m * k), view(1, k * n), view(2, m * n));
    let mut rec = Recorder::new(ctx.limits().max_compute_workgroups_per_dimension);
    rec.set_context(Phase::Forward, "bench");
    kernels.matmul.gemm.record(
        &mut rec,
        &GemmCall {
            m,
            n,
            k,
            outer: 1,
            heads: 1,
            a: (a, Operand::rows(k)),
            b: (Some(b), Operand::rows(n)),
            c: (c, Operand::rows(n)),
            bias: None,
            alpha: 1.0,
            accumulate: false,
        },
    )?;
    let commands = pollster::block_on(ctx.scoped("matmul benchmark", || {
        let buffers: Vec<wgpu::Buffer> =
            [a, b, c].iter().map(|v| storage_buffer(device, "bench", bytes(ix(v.len)))).collect();
        let uniforms = uniform_buffer(ctx, "bench uniforms", &rec.uniforms);
        let placeholder = placeholder_buffer(device);
        rec.commands
            .iter()
            .filter_map(|(phase, label, command)| match command {
                Command::Dispatch(spec) => {
                    let bindings = spec.bindings.iter().map(|(slot, binding)| match binding {
                        Binding::View(v) => buffers[v.tensor.0].as_entire_buffer_binding(),
                        Binding::Dummy => placeholder_binding(&placeholder, *slot),
                    });
                    let bind_group = dispatch_bind_group(device, label, spec, &uniforms, bindings);
                    let pipeline = kernels.pipeline(device, spec);
                    let cmd = Cmd::Dispatch { pipeline, bind_group, groups: spec.groups };
                    Some(Recorded { phase: *phase, label: label.clone(), cmd })
                }
                Command::Clear(_) => None,
            })
            .collect::<Vec<_>>()
    }))?;
    let commands: Vec<&Recorded> = commands.iter().collect();
    let run = |count: usize| -> Result<f64, GpuError> {
        let start = std::time::Instant::now();
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bench") });
        for _ in 0..count {
            encode_commands(&mut enc, &commands);
        }
        ctx.queue.submit([enc.finish()]);
        device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        Ok(start.elapsed().as_secs_f64())
    };
    run(1)?; // warm-up
    let secs = run(iters.max(1))?;
    Ok(2.0 * (m * n * k) as f64 * iters.max(1) as f64 / secs / 1e9)
}
