//! Recorded commands bound to the buffers and offsets their views live at, reused while the
//! placements stay; encoding them into command buffers.

use super::super::GpuContext;
#[cfg(not(target_arch = "wasm32"))]
use super::super::GpuError;
use super::super::kernels::{Binding, Command, DispatchSpec};
use super::{GpuExecutor, bytes};
use crate::memory::SegmentId;
use crate::plan::{Phase, View};

/// A command ready to encode.
pub(crate) enum Cmd {
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

/// A bound command with its op's phase and label.
pub(crate) struct Recorded {
    /// Its op's phase, for profiles (native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) phase: Phase,
    /// The plan op's label and the kernel entry point, for profiles (native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) label: String,
    pub(crate) cmd: Cmd,
}

/// Where a binding points: (segment, byte offset, bytes); None for the placeholder.
pub(super) type BindingKey = Option<(SegmentId, u64, u64)>;

/// A recorded command bound to buffers, and the placements it was bound for.
pub(super) struct Bound {
    pub(super) key: Vec<BindingKey>,
    pub(super) rec: Recorded,
}

impl GpuExecutor {
    /// The command at `index` bound to the buffers its views live in now (reused when the
    /// placements are those it was last bound for, as in every step after the first).
    pub(super) fn bind(&mut self, index: usize) {
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
    pub(super) fn encode_chunk(&self, chunk: &[usize], losses: bool) -> wgpu::CommandBuffer {
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
}

/// The uniform buffer of a recording, with its bytes written.
pub(crate) fn uniform_buffer(ctx: &GpuContext, label: &str, bytes: &[u8]) -> wgpu::Buffer {
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
pub(crate) fn dispatch_bind_group<'a>(
    device: &wgpu::Device,
    label: &str,
    spec: &DispatchSpec,
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

pub(crate) fn placeholder_buffer(device: &wgpu::Device) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("unused binding"),
        size: 256 * PLACEHOLDER_SLOTS,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    })
}

pub(crate) fn placeholder_binding(buffer: &wgpu::Buffer, slot: u32) -> wgpu::BufferBinding<'_> {
    wgpu::BufferBinding { buffer, offset: 256 * (slot as u64 % PLACEHOLDER_SLOTS), size: wgpu::BufferSize::new(256) }
}

/// Encodes commands in order: clears at encoder level, runs of dispatches in one pass.
pub(crate) fn encode_commands(enc: &mut wgpu::CommandEncoder, commands: &[&Recorded]) {
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
