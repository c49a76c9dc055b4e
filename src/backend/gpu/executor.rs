//! Executes a plan on the GPU. Tensors are placed by the caching allocator: each segment it
//! reserves is a real wgpu buffer, and each tensor is bound at its offset inside one, so the
//! reserved bytes are real GPU memory. Dispatches are recorded once and replayed every step.

use std::sync::Arc;

use super::kernels::adamw::AdamWParams;
use super::kernels::attention::AttnShape;
use super::kernels::crossentropy::CrossEntropyParams;
use super::kernels::{Binding, Command, Kernels, Recorder};
use super::kernels::{SgdParams, SgdViews};
use super::{GpuContext, GpuError};
use crate::backend::BackendError;
use crate::backend::cpu::ops::AdamWStep;
use crate::data::Batch;
use crate::memory::step::{StepAllocator, StepMemory, Trace};
use crate::memory::{Placement, SegmentId};
use crate::model::init::{init_params, lora_seed};
use crate::plan::{DType, LossScaler, Op, Phase, Plan, TensorId, View};

/// A capacity that never limits: the real device's memory does.
pub const UNLIMITED: u64 = u64::MAX / 4;

enum Cmd {
    Dispatch { pipeline: wgpu::ComputePipeline, bind_group: wgpu::BindGroup, groups: [u32; 3] },
    Clear { buffer: usize, offset: u64, size: u64 },
}

struct Recorded {
    phase: Phase,
    /// The plan op's label and the kernel entry point, for profiles (native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    label: String,
    cmd: Cmd,
}

/// Where tensors live: buffers, and for each tensor a buffer index and a byte offset.
struct Locations {
    buffers: Vec<wgpu::Buffer>,
    at: Vec<Option<(usize, u64)>>,
    /// Every tensor's dtype (element size, and bytes of a view).
    dtypes: Vec<DType>,
}

impl Locations {
    /// Byte range of a view: (buffer index, offset).
    fn of(&self, v: View) -> Option<(usize, u64)> {
        let elem = self.dtype(v.tensor).size_bytes() as u64;
        self.at.get(v.tensor.0).copied().flatten().map(|(b, off)| (b, off + elem * v.offset as u64))
    }
    fn dtype(&self, id: TensorId) -> DType {
        self.dtypes.get(id.0).copied().unwrap_or(DType::F32)
    }
    /// Bytes a view binds (whole 4-byte words).
    fn size(&self, v: View) -> u64 {
        self.dtype(v.tensor).bytes_for(v.len) as u64
    }
    fn tensor(&self, id: TensorId) -> Option<(&wgpu::Buffer, u64)> {
        self.at.get(id.0).copied().flatten().map(|(b, off)| (&self.buffers[b], off))
    }
}

/// A plan bound to GPU memory, ready to run steps.
pub struct GpuExecutor {
    ctx: GpuContext,
    plan: Plan,
    locations: Locations,
    /// What the allocator saw while this executor placed the step's tensors (measured).
    memory: StepMemory,
    /// Bytes of the wgpu buffers backing the allocator's segments.
    real_reserved_bytes: u64,
    uniform_buffer: wgpu::Buffer,
    commands: Vec<Recorded>,
    /// Uniforms rewritten each step (AdamW's t, fp16's loss scale).
    dynamic: DynamicUniforms,
    /// The micro-batches' losses, then fp16's overflow flag.
    loss_staging: wgpu::Buffer,
    steps_taken: u32,
    /// fp16's loss scaling.
    scaler: Option<LossScaler>,
    /// The loss scale of the last backward pass (what the stored gradients are multiplied by).
    backward_scale: f32,
    /// Whether a forward pass has run (the measured memory describes a step that happened).
    ran_forward: bool,
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
fn record_plan(k: &Kernels, plan: &Plan, rec: &mut Recorder, native_f16: bool) -> Result<DynamicUniforms, GpuError> {
    rec.set_dtypes(plan.tensors.iter().map(|t| t.dtype).collect(), native_f16);
    let mut dynamic = DynamicUniforms::default();
    let m = plan.model;
    let (b, t) = (plan.shape.batch, plan.shape.seq);
    let (c, v) = (m.d_model, m.vocab);
    let attn = AttnShape { b, t, c, nh: m.n_heads };
    for node in &plan.ops {
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
                k.matmul.forward(rec, inp, weight, bias, out, rows, kk, n, weight_transposed)?
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
                rows,
                kk,
                n,
                weight_transposed,
                accumulate,
            )?,
            Op::MatmulAdd { inp, weight, out, rows, k: kk, n, alpha } => {
                k.matmul.add_forward(rec, inp, weight, out, rows, kk, n, alpha)?
            }
            Op::MatmulAddBackward { inp, weight, dout, dinp, dweight, rows, k: kk, n, alpha } => {
                k.matmul.add_backward(rec, inp, weight, dout, dinp, dweight, rows, kk, n, alpha)?
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
                    dynamic.cross_entropy.push((offset, CrossEntropyParams::new(targets.len, v, scale)));
                }
            }
            Op::CheckFinite { grads, found_inf } => k.check_finite.record(rec, grads, found_inf)?,
            Op::AdamW { params, grads, m: mm, v: vv, copy, found_inf } => {
                let s = adamw_step(plan, 1);
                let offset = k.adamw.step(rec, params, grads, mm, vv, copy, found_inf, &s)?;
                dynamic.adamw = Some((offset, params.len, copy.is_some(), found_inf.is_some()));
            }
            Op::Sgd { params, grads, momentum, copy, found_inf } => {
                let o = plan.optimizer;
                let views = SgdViews { params, grads, momentum_buf: momentum, copy, found_inf };
                let p = SgdParams::new(&views, o.lr, o.momentum, o.weight_decay, 1.0);
                dynamic.sgd = Some((k.sgd.step(rec, &views, &p)?, views));
            }
        }
    }
    Ok(dynamic)
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
        decay_end: plan.trainable_layout().decay_end,
    }
}

impl GpuExecutor {
    /// [`Self::with_budget`] without a virtual budget: only the device's memory limits.
    pub async fn new(ctx: &GpuContext, kernels: &Kernels, plan: Plan, seed: u64) -> Result<Self, BackendError> {
        Self::with_budget(ctx, kernels, plan, seed, UNLIMITED).await
    }

    /// Places the plan's tensors with the caching allocator under a virtual GPU of
    /// `budget_bytes`, backs every segment with a wgpu buffer, records the dispatches and
    /// uploads the initial parameters (from `seed`). A step that does not fit the budget is
    /// [`BackendError::OutOfMemory`] (PyTorch's message); a real wgpu out-of-memory while
    /// creating the segments is reported the same way. Limits are checked first, so a config too
    /// large for the adapter gets [`GpuError::ExceedsLimit`] rather than a validation error.
    pub async fn with_budget(
        ctx: &GpuContext,
        kernels: &Kernels,
        plan: Plan,
        seed: u64,
        budget_bytes: u64,
    ) -> Result<Self, BackendError> {
        ctx.check_alive()?;
        // Place every tensor as an eager framework would allocate and free it during the step
        // (first, so a step beyond the budget is an out-of-memory before any adapter limit).
        let Placed { memory, placements, segments } = place(&plan, budget_bytes)?;
        let plan_scaler = plan.techniques.precision.scales_loss().then(LossScaler::default);
        let limits = ctx.limits();
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        for t in &plan.tensors {
            if t.size_bytes() as u64 > max_binding {
                return Err(GpuError::ExceedsLimit {
                    what: format!("tensor {} ({:?})", t.name, t.shape),
                    needed: t.size_bytes() as u64,
                    limit: max_binding,
                    bytes: true,
                }
                .into());
            }
        }
        for &(_, size) in &segments {
            if size > limits.max_buffer_size {
                return Err(GpuError::ExceedsLimit {
                    what: "an allocator segment".into(),
                    needed: size,
                    limit: limits.max_buffer_size,
                    bytes: true,
                }
                .into());
            }
        }
        let mut rec = Recorder::new(limits.max_compute_workgroups_per_dimension);
        let dynamic = record_plan(kernels, &plan, &mut rec, ctx.native_f16())?;
        if rec.uniforms.len() as u64 > limits.max_buffer_size {
            return Err(GpuError::ExceedsLimit {
                what: "uniform buffer".into(),
                needed: rec.uniforms.len() as u64,
                limit: limits.max_buffer_size,
                bytes: true,
            }
            .into());
        }
        let device = &ctx.device;
        let real_reserved_bytes: u64 = segments.iter().map(|&(_, size)| size).sum();
        // Each segment in its own error scope, so a real out-of-memory names the segment.
        let mut buffers = Vec::with_capacity(segments.len());
        for (k, &(id, size)) in segments.iter().enumerate() {
            let made =
                ctx.scoped("reserving a segment", || storage_buffer(device, &format!("segment {}", id.0), size)).await;
            match made {
                Ok(b) => buffers.push(b),
                Err(GpuError::OutOfMemory(detail)) => {
                    let reserved_before: u64 = segments[..k].iter().map(|&(_, s)| s).sum();
                    return Err(BackendError::OutOfMemory(Box::new(device_oom(
                        &plan,
                        &placements,
                        id,
                        size,
                        reserved_before,
                        budget_bytes,
                        &detail,
                    ))));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let built = ctx
            .scoped("binding the step's tensors", || {
                let index: std::collections::BTreeMap<SegmentId, usize> =
                    segments.iter().enumerate().map(|(i, &(id, _))| (id, i)).collect();
                let at = placements
                    .iter()
                    .map(|p| p.and_then(|p: Placement| index.get(&p.segment).map(|&b| (b, p.offset))))
                    .collect();
                let dtypes = plan.tensors.iter().map(|t| t.dtype).collect();
                let locations = Locations { buffers, at, dtypes };
                let loss_staging = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("loss readback"),
                    size: bytes(plan.handles.micro.len() + 1),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let (uniform_buffer, commands) = materialize(ctx, kernels, &rec, &locations);
                (locations, uniform_buffer, loss_staging, commands)
            })
            .await?;
        let (locations, uniform_buffer, loss_staging, commands) = built;
        let exec = Self {
            ctx: ctx.clone(),
            plan,
            locations,
            memory,
            real_reserved_bytes,
            uniform_buffer,
            commands,
            dynamic,
            loss_staging,
            steps_taken: 0,
            scaler: plan_scaler,
            backward_scale: 1.0,
            ran_forward: false,
            pending: None,
        };
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

    /// The allocator's view of the step as this executor placed it (measured).
    pub fn memory(&self) -> &StepMemory {
        &self.memory
    }

    /// Bytes of real wgpu buffers behind the allocator's segments.
    pub fn real_reserved_bytes(&self) -> u64 {
        self.real_reserved_bytes
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn context(&self) -> &GpuContext {
        &self.ctx
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

    /// Overwrites the start of a tensor with `data` (f32 or u32 bytes); extra bytes are ignored.
    pub fn write_tensor(&self, id: TensorId, data: &[u8]) {
        let size = self.plan.tensor(id).size_bytes();
        let n = data.len().min(size) / 4 * 4;
        if let (true, Some((buffer, offset))) = (n > 0, self.locations.tensor(id)) {
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

    /// One command buffer with the ops of `phases`, then a copy of the loss to the staging
    /// buffer.
    fn encode(&self, phases: &[Phase]) -> wgpu::CommandBuffer {
        let mut enc =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("oomlab step") });
        encode_commands(&mut enc, &self.commands, &self.locations.buffers, phases);
        // Each micro-batch's loss, side by side, then the overflow flag.
        let n = self.plan.handles.micro.len();
        let handles = self.plan.handles.micro.iter().map(|m| m.loss).chain(self.plan.handles.found_inf);
        for (j, id) in handles.enumerate().take(n + 1) {
            if let Some((buffer, offset)) = self.locations.tensor(id) {
                enc.copy_buffer_to_buffer(buffer, offset, &self.loss_staging, bytes(j), 4);
            }
        }
        enc.finish()
    }

    /// Submits the ops of `phases` (the batch must be uploaded) and returns the loss.
    pub async fn run_phases(&mut self, phases: &[Phase]) -> Result<f32, GpuError> {
        let cmd = self.prepare(phases)?;
        self.ctx.scoped("running the step", || self.ctx.queue.submit([cmd])).await?;
        let n = self.plan.handles.micro.len();
        let data = read_buffer(&self.ctx, &self.loss_staging, bytes(n + 1)).await?;
        Ok(self.finish(&data, phases.contains(&Phase::Optimizer)))
    }

    /// Uniforms and the command buffer of a run of `phases`.
    fn prepare(&mut self, phases: &[Phase]) -> Result<wgpu::CommandBuffer, GpuError> {
        self.ctx.check_alive()?;
        if self.pending.is_some() {
            return Err(GpuError::Readback("a step is still running".into()));
        }
        if phases.contains(&Phase::Optimizer) {
            self.steps_taken += 1;
        }
        self.write_dynamic_uniforms();
        if phases.contains(&Phase::Backward) {
            self.backward_scale = self.scaler.map_or(1.0, |s| s.scale);
        }
        self.ran_forward |= phases.contains(&Phase::Forward);
        Ok(self.encode(phases))
    }

    /// Starts a whole training step on `batch` without waiting for it: the UI's path, which
    /// never blocks a frame. [`Self::poll_step`] says when it is done.
    pub fn submit_step(&mut self, batch: &Batch) -> Result<(), BackendError> {
        self.upload_batch(batch)?;
        let cmd = self.prepare(&[Phase::Forward, Phase::Backward, Phase::Optimizer])?;
        self.ctx.queue.submit([cmd]);
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
        Ok(self.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).await?)
    }

    /// Reads a whole float tensor back (16-bit values widened to f32).
    pub async fn read_tensor_async(&self, id: TensorId) -> Result<Vec<f32>, GpuError> {
        self.read_view_async(self.plan.whole(id)).await
    }

    /// Times every command of the step on its own (`iters` repetitions in one submission,
    /// after a warm-up), dispatch overhead included. Returns (phase, "op label [entry]", secs
    /// per run), in step order. Needs an uploaded batch.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile_ops(&self, iters: usize) -> Result<Vec<(Phase, String, f64)>, GpuError> {
        let device = &self.ctx.device;
        let mut out = Vec::with_capacity(self.commands.len());
        for (i, rec) in self.commands.iter().enumerate() {
            let run = |count: usize| -> Result<f64, GpuError> {
                let start = std::time::Instant::now();
                let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("profile") });
                for _ in 0..count {
                    encode_commands(&mut enc, &self.commands[i..=i], &self.locations.buffers, &[rec.phase]);
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

    /// One view of a tensor, read back (e.g. one parameter's gradient): only its bytes travel.
    pub async fn read_view_async(&self, view: View) -> Result<Vec<f32>, GpuError> {
        let size = self.locations.size(view);
        let (buffer, offset) =
            self.locations.of(view).map(|(b, offset)| (&self.locations.buffers[b], offset)).ok_or_else(|| {
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
        Ok(decode(self.locations.dtype(view.tensor), &data, view.len))
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
        Ok(pollster::block_on(self.run_phases(&[Phase::Forward, Phase::Backward]))?)
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
        self.ran_forward.then_some(&self.memory)
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

/// Places a plan's tensors through the caching allocator, op by op, as an eager framework
/// allocates and frees them. Returns the allocator's trace of the step (what this backend
/// measures), every tensor's placement and the segments to back with memory.
///
/// The placements of this first (cold) step are replayed by every later step, because bind
/// groups are recorded once. PyTorch's later steps allocate from the blocks the first step left
/// cached and may pick different offsets; the bytes per category, the peaks and the segments are
/// the same, only where a tensor sits inside its segment could differ.
/// A real out-of-memory from the device while reserving segment `segment` (`size` bytes), in
/// the allocator's words: the first tensor placed in that segment is the one that asked.
pub fn device_oom(
    plan: &Plan,
    placements: &[Option<Placement>],
    segment: SegmentId,
    size: u64,
    reserved_before: u64,
    budget_bytes: u64,
    detail: &str,
) -> crate::memory::StepOom {
    let lifetimes = plan.lifetimes();
    let first = placements
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_some_and(|p| p.segment == segment))
        .min_by_key(|(i, _)| match lifetimes[*i] {
            crate::plan::Lifetime::Ops { first, .. } => first + 1,
            _ => 0,
        })
        .map_or(TensorId(0), |(i, _)| TensorId(i));
    let info = plan.tensor(first);
    let op = match lifetimes[first.0] {
        crate::plan::Lifetime::Ops { first, .. } => Some(first),
        _ => None,
    };
    let op_label = op.map_or_else(
        || "before the step".to_string(),
        |i| format!("{} ({})", plan.ops[i].label, plan.ops[i].op.name()),
    );
    let error = crate::memory::OutOfMemory {
        requested_bytes: info.size_bytes() as u64,
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
    crate::memory::StepOom::new(first, info, op, op_label, error, &note)
}

/// A step's tensors placed in the allocator's segments.
pub struct Placed {
    pub memory: StepMemory,
    pub placements: Vec<Option<Placement>>,
    /// Every segment the step used, with its size.
    pub segments: Vec<(SegmentId, u64)>,
}

pub fn place(plan: &Plan, budget_bytes: u64) -> Result<Placed, BackendError> {
    let mut sa = StepAllocator::new(plan, budget_bytes, true);
    let mut trace = Trace::detailed();
    let oom = BackendError::OutOfMemory;
    sa.setup(plan).map_err(oom)?;
    trace.record(&sa, None);
    for i in 0..plan.ops.len() {
        sa.before_op(plan, i).map_err(oom)?;
        trace.record(&sa, Some(i));
        sa.after_op(i);
    }
    let memory = trace.finish(&sa, budget_bytes);
    // Every segment that held a tensor needs memory, including any released mid-step.
    let mut segments: Vec<(SegmentId, u64)> = memory
        .events
        .iter()
        .filter_map(|e| match e {
            crate::memory::allocator::Event::SegmentAlloc { segment, size, .. } => Some((*segment, *size)),
            _ => None,
        })
        .collect();
    segments.sort();
    Ok(Placed { memory, placements: sa.placements.clone(), segments })
}

/// Turns recorded commands into a uniform buffer and bind groups over the tensors' locations,
/// with each dispatch's pipeline (its 16-bit variant where it binds 16-bit tensors). Call inside
/// an error scope.
fn materialize(ctx: &GpuContext, kernels: &Kernels, rec: &Recorder, loc: &Locations) -> (wgpu::Buffer, Vec<Recorded>) {
    let device = &ctx.device;
    // Unused bindings get disjoint 256-byte slices of one placeholder buffer: WebGPU (Dawn)
    // rejects two writable bindings of overlapping ranges in one dispatch.
    const SLOTS: u64 = 16;
    let dummy = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("unused binding"),
        size: 256 * SLOTS,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let uniform_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("step uniforms"),
        size: (rec.uniforms.len() as u64).max(256),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue.write_buffer(&uniform_buffer, 0, &rec.uniforms);
    // A view without memory (never the case for a plan's own ops) binds the placeholder.
    let placeholder = |slot: u32| wgpu::BufferBinding {
        buffer: &dummy,
        offset: 256 * (slot as u64 % SLOTS),
        size: wgpu::BufferSize::new(256),
    };
    let resolve = |slot: u32, binding: &Binding| match *binding {
        Binding::View(v) => match loc.of(v) {
            Some((b, offset)) => {
                wgpu::BufferBinding { buffer: &loc.buffers[b], offset, size: wgpu::BufferSize::new(loc.size(v)) }
            }
            None => placeholder(slot),
        },
        Binding::Dummy => placeholder(slot),
    };
    let commands = rec
        .commands
        .iter()
        .map(|(phase, label, command)| {
            let cmd = match command {
                Command::Clear(v) => match loc.of(*v) {
                    Some((buffer, offset)) => (Cmd::Clear { buffer, offset, size: loc.size(*v) }, "clear"),
                    None => (Cmd::Clear { buffer: usize::MAX, offset: 0, size: 0 }, "clear"),
                },
                Command::Dispatch(spec) => {
                    let mut entries = vec![wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &uniform_buffer,
                            offset: spec.uniform.0,
                            size: wgpu::BufferSize::new(spec.uniform.1),
                        }),
                    }];
                    entries.extend(spec.bindings.iter().map(|(binding, b)| wgpu::BindGroupEntry {
                        binding: *binding,
                        resource: wgpu::BindingResource::Buffer(resolve(*binding, b)),
                    }));
                    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(label),
                        layout: &spec.entry.layout,
                        entries: &entries,
                    });
                    (
                        Cmd::Dispatch { pipeline: kernels.pipeline(device, spec), bind_group, groups: spec.groups },
                        spec.entry.name,
                    )
                }
            };
            Recorded { phase: *phase, label: format!("{label} [{}]", cmd.1), cmd: cmd.0 }
        })
        .collect();
    (uniform_buffer, commands)
}

/// Encodes the commands of `phases`: clears at encoder level, runs of dispatches in one pass.
fn encode_commands(enc: &mut wgpu::CommandEncoder, commands: &[Recorded], buffers: &[wgpu::Buffer], phases: &[Phase]) {
    let selected: Vec<&Recorded> = commands.iter().filter(|r| phases.contains(&r.phase)).collect();
    let mut i = 0;
    while i < selected.len() {
        match &selected[i].cmd {
            Cmd::Clear { buffer, offset, size } => {
                if let Some(b) = buffers.get(*buffer) {
                    enc.clear_buffer(b, *offset, Some(*size));
                }
                i += 1;
            }
            Cmd::Dispatch { .. } => {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("oomlab ops"),
                    timestamp_writes: None,
                });
                while let Some(Recorded { cmd: Cmd::Dispatch { pipeline, bind_group, groups }, .. }) = selected.get(i) {
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
    let view = |id: usize, len: usize| View { tensor: TensorId(id), offset: 0, len };
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
    let (buffers, commands) = pollster::block_on(ctx.scoped("matmul benchmark", || {
        let buffers: Vec<wgpu::Buffer> =
            [a, b, c].iter().map(|v| storage_buffer(device, "bench", bytes(v.len))).collect();
        let at = vec![Some((0, 0)), Some((1, 0)), Some((2, 0))];
        let locations = Locations { buffers, at, dtypes: vec![DType::F32; 3] };
        let (_uniforms, commands) = materialize(ctx, kernels, &rec, &locations);
        (locations.buffers, commands)
    }))?;
    let run = |count: usize| -> Result<f64, GpuError> {
        let start = std::time::Instant::now();
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bench") });
        for _ in 0..count {
            encode_commands(&mut enc, &commands, &buffers, &[Phase::Forward]);
        }
        ctx.queue.submit([enc.finish()]);
        device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        Ok(start.elapsed().as_secs_f64())
    };
    run(1)?; // warm-up
    let secs = run(iters.max(1))?;
    Ok(2.0 * (m * n * k) as f64 * iters.max(1) as f64 / secs / 1e9)
}
