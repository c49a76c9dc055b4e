//! The allocator, driven live op by op as each step is recorded, and the wgpu buffers behind
//! its segments: created when a segment is reserved, destroyed (after the work that used it is
//! submitted) when it is released.

use super::super::GpuError;
use super::GpuExecutor;
use crate::backend::BackendError;
use crate::memory::Budget;
use crate::memory::SegmentId;
use crate::memory::allocator::Event;
use crate::memory::device::segment_label;
use crate::memory::step::Trace;
use crate::plan::{Phase, Plan, TensorId};

impl GpuExecutor {
    pub(super) fn check_segment_limit(&self, size: u64) -> Result<(), GpuError> {
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
    pub(super) fn device_oom(
        &self,
        segment: SegmentId,
        size: u64,
        reserved_before: u64,
        detail: &str,
    ) -> crate::memory::StepOom {
        let asked = self.allocator.allocator.events().iter().find_map(|e| match e {
            Event::Alloc { tag, placement, .. } if placement.segment == segment => Some(*tag),
            _ => None,
        });
        let (tensor, op) = asked.map_or((TensorId(0), None), |t| (t.tensor, t.op));
        device_oom(&self.plan, tensor, op, size, reserved_before, self.allocator.budget(), detail)
    }

    /// Creates and destroys segment buffers as the allocator reserved and released them since
    /// the last call. Before a buffer is destroyed, the commands recorded so far (`chunk`, which
    /// may use it) are submitted, and on native the queue is drained: the released memory is
    /// gone before the next segment is created, so real memory never exceeds the budget.
    pub(super) fn sync_buffers(&mut self, chunk: &mut Vec<usize>) -> Result<(), BackendError> {
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
                    self.unbind(segment);
                    #[cfg(not(target_arch = "wasm32"))]
                    self.ctx
                        .device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
                }
                Event::SegmentMap { segment, offset, size } => self.resize_segment(segment, offset + size, chunk)?,
                Event::SegmentUnmap { segment, offset, .. } => self.resize_segment(segment, offset, chunk)?,
                Event::SegmentAlloc { segment, size, .. } => {
                    let reserved_before = self.reserved_buffer_bytes();
                    match self.segment_buffer(segment, size, reserved_before) {
                        Ok(b) => {
                            self.buffers.insert(segment, b);
                            self.observe_device();
                        }
                        Err(e) => return Err(self.give_back(e)),
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Bind groups of a released or replaced segment buffer can never be used again.
    fn unbind(&mut self, segment: SegmentId) {
        for slot in &mut self.bound {
            if slot.as_ref().is_some_and(|b| b.key.iter().flatten().any(|k| k.0 == segment)) {
                *slot = None;
            }
        }
    }

    /// An expandable segment grew or shrank: wgpu cannot map pages into a buffer, so a buffer of
    /// the new size takes the old one's place, its contents copied over after the commands
    /// recorded so far (which use the old one) are submitted. While the copy runs both buffers
    /// exist; the allocator's figures are the segment's.
    fn resize_segment(&mut self, segment: SegmentId, size: u64, chunk: &mut Vec<usize>) -> Result<(), BackendError> {
        let Some(old) = self.buffers.remove(&segment) else { return Ok(()) };
        if !chunk.is_empty() {
            let cmd = self.encode_chunk(chunk, false);
            self.ctx.queue.submit([cmd]);
            chunk.clear();
        }
        let reserved_before = self.reserved_buffer_bytes() + old.size();
        let new = match self.segment_buffer(segment, size, reserved_before) {
            Ok(b) => b,
            Err(e) => {
                self.buffers.insert(segment, old);
                return Err(self.give_back(e));
            }
        };
        let mut encoder =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("segment resize") });
        encoder.copy_buffer_to_buffer(&old, 0, &new, 0, old.size().min(new.size()));
        self.ctx.queue.submit([encoder.finish()]);
        old.destroy();
        self.unbind(segment);
        self.buffers.insert(segment, new);
        self.observe_device();
        Ok(())
    }

    /// A buffer of `size` bytes for `segment`, within the adapter's limit; a real out-of-memory
    /// from the device in the allocator's words.
    fn segment_buffer(
        &self,
        segment: SegmentId,
        size: u64,
        reserved_before: u64,
    ) -> Result<wgpu::Buffer, BackendError> {
        self.check_segment_limit(size)?;
        self.create_segment(segment, size).map_err(|driver| {
            let detail = driver.to_string();
            BackendError::OutOfMemory(Box::new(self.device_oom(segment, size, reserved_before, &detail)))
        })
    }

    /// The allocator holds a segment without the buffer it needs: give the step's memory back
    /// and release every unused segment, that one too, so the allocator and the device agree
    /// again. Returns `e` (or the error that releasing ran into).
    fn give_back(&mut self, e: BackendError) -> BackendError {
        self.allocator.release_step();
        self.allocator.allocator.release_cached_segments();
        self.sync_buffers(&mut Vec::new()).err().unwrap_or(e)
    }

    /// A segment's buffer, checked for a real out-of-memory. Native wgpu reports the error at
    /// once; in the browser it arrives later, as a validation error of the step that uses the
    /// buffer.
    fn create_segment(&self, segment: SegmentId, size: u64) -> Result<wgpu::Buffer, wgpu::Error> {
        let scope = self.ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = storage_buffer(&self.ctx.device, &segment_label(segment, self.instance), size);
        match crate::backend::ready_now(scope.pop()) {
            Some(Some(e)) => {
                buffer.destroy();
                Err(e)
            }
            _ => Ok(buffer),
        }
    }

    /// Starts recording a run of `phases` (see [`Self::record_to_collective`]).
    pub(in crate::backend::gpu) fn start_recording(&mut self, phases: &[Phase]) -> Result<(), BackendError> {
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
        self.recording = Some(Recording { phases: phases.to_vec(), next: 0, trace, chunk });
        Ok(())
    }

    /// Records the started run up to its next collective, whose tensors it places, submitting
    /// the commands recorded before it (the queue keeps their order); or to its end, returning
    /// the last commands with the losses' readback, unsubmitted.
    pub(in crate::backend::gpu) fn record_to_collective(&mut self) -> Result<RecordStop, BackendError> {
        let Some(mut run) = self.recording.take() else {
            return Err(BackendError::Internal("no step is being recorded".into()));
        };
        while run.next < self.plan.ops.len() {
            let i = run.next;
            run.next += 1;
            if !run.phases.contains(&self.plan.ops[i].phase) {
                continue;
            }
            if let Err(oom) = self.allocator.before_op(&self.plan, i) {
                self.allocator.release_step();
                self.sync_buffers(&mut run.chunk)?;
                return Err(BackendError::OutOfMemory(oom));
            }
            self.sync_buffers(&mut run.chunk)?;
            run.trace.record(&self.allocator, Some(i));
            let collective = self.plan.ops[i].op.is_collective();
            if collective || self.plan.runs_on_host(&self.plan.ops[i].op) {
                if !run.chunk.is_empty() {
                    let cmd = self.encode_chunk(&run.chunk, false);
                    self.ctx.queue.submit([cmd]);
                    run.chunk.clear();
                }
                self.recording = Some(run);
                return Ok(if collective { RecordStop::Collective(i) } else { RecordStop::Host(i) });
            }
            let commands = self.op_commands.get(i).cloned().unwrap_or(0..0);
            for c in commands {
                self.bind(c);
                run.chunk.push(c);
            }
            self.allocator.after_op(i);
            self.sync_buffers(&mut run.chunk)?;
        }
        self.memory = Some(run.trace.finish(&self.allocator));
        Ok(RecordStop::Done(self.encode_chunk(&run.chunk, true)))
    }

    /// After the cluster encoded collective `i`, or host op `i` ran: frees what it was the last to
    /// use.
    pub(in crate::backend::gpu) fn finish_collective(&mut self, i: usize) -> Result<(), BackendError> {
        self.allocator.after_op(i);
        let mut chunk = Vec::new();
        self.sync_buffers(&mut chunk)
    }

    /// Drops the run being recorded (another rank failed) and frees the step's memory.
    pub(in crate::backend::gpu) fn abandon_recording(&mut self) {
        if let Some(run) = self.recording.take() {
            self.state.cancel(&run.phases);
        }
        self.allocator.release_step();
        let _ = self.sync_buffers(&mut Vec::new());
    }
}

/// A run being recorded: its phases, the next op, the allocator's trace and the commands bound
/// since the last submission.
pub(in crate::backend::gpu) struct Recording {
    phases: Vec<Phase>,
    next: usize,
    trace: Trace,
    chunk: Vec<usize>,
}

/// Where [`GpuExecutor::record_to_collective`] stopped.
pub(in crate::backend::gpu) enum RecordStop {
    /// At collective op `i`, placed but not run.
    Collective(usize),
    /// At op `i`, which runs on the host (offload), placed but not run.
    Host(usize),
    /// At the end: the last commands, with the losses' readback.
    Done(wgpu::CommandBuffer),
}

pub(in crate::backend::gpu) fn storage_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
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
    budget: impl Into<Budget>,
    detail: &str,
) -> crate::memory::StepOom {
    let info = plan.tensor(tensor);
    let op_label = op.and_then(|i| plan.op_label(i)).unwrap_or_else(|| "before the step".to_string());
    let error = crate::memory::OutOfMemory {
        requested_bytes: info.size_bytes(),
        tried_bytes: size,
        // Without a budget, the device's own memory was the limit: what it had given so far.
        capacity_bytes: budget.into().limit_bytes().unwrap_or(reserved_before),
        free_bytes: 0,
        allocated_bytes: reserved_before,
        reserved_bytes: reserved_before,
        cached_free_bytes: 0,
        largest_free_block: 0,
        expandable_segments: false,
        device: plan.rank,
    };
    let note = format!(
        "The wgpu device itself refused the segment ({detail}): the budget is larger than this GPU's free memory."
    );
    crate::memory::StepOom::new(tensor, info, op, op_label, error, &note)
}

/// The segments reserved by `events`, with their sizes.
pub(super) fn new_segments<T>(events: &[Event<T>]) -> impl Iterator<Item = (SegmentId, u64)> + '_ {
    events.iter().filter_map(|e| match e {
        Event::SegmentAlloc { segment, size, .. } => Some((*segment, *size)),
        _ => None,
    })
}
