//! `shaders/reduce.wgsl`: the arithmetic of the collectives between simulated GPUs. CPU twins:
//! `cpu::ops::scale_add`, and a slice copy for `copy`.
//!
//! Unlike the plan's kernels, which bind one executor's views, a collective binds buffers of
//! two ranks (two executors), so it is encoded directly on the buffers and offsets it is given.

use super::{KernelEntry, build_entries};

/// `dst = alpha·dst + beta·src` over `n` f32s.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScaleAddParams {
    pub n: u32,
    pub alpha: f32,
    pub beta: f32,
    pub _pad: u32,
}

fn bind<'a>(binding: u32, (buffer, offset, size): ReduceTarget<'a>) -> wgpu::BindGroupEntry<'a> {
    wgpu::BindGroupEntry {
        binding,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset,
            size: std::num::NonZeroU64::new(size.max(4)),
        }),
    }
}

/// A range of a buffer: (buffer, byte offset, bytes).
pub type ReduceTarget<'a> = (&'a wgpu::Buffer, u64, u64);

#[derive(Clone, Debug)]
pub struct Reduce {
    scale_add: KernelEntry,
    copy: KernelEntry,
}

/// Where a collective's dispatches go: the device, the encoder and the device's workgroups per
/// dimension.
pub struct Encoding<'a> {
    pub device: &'a wgpu::Device,
    pub enc: &'a mut wgpu::CommandEncoder,
    pub max_groups: u32,
}

impl Reduce {
    pub fn new(device: &wgpu::Device) -> Self {
        let [scale_add, copy] = build_entries(device, "reduce.wgsl", [("scale_add", &[1, 2]), ("copy", &[1, 2])]);
        Self { scale_add, copy }
    }

    /// Encodes `dst = src` over `n` f32s.
    pub fn copy(&self, e: &mut Encoding<'_>, dst: ReduceTarget<'_>, src: ReduceTarget<'_>, n: u32) {
        dispatch(&self.copy, e, dst, src, ScaleAddParams { n, alpha: 0.0, beta: 1.0, _pad: 0 });
    }

    /// Encodes `dst = alpha·dst + beta·src` over `n` f32s.
    pub fn scale_add(
        &self,
        e: &mut Encoding<'_>,
        dst: ReduceTarget<'_>,
        src: ReduceTarget<'_>,
        n: u32,
        (alpha, beta): (f32, f32),
    ) {
        dispatch(&self.scale_add, e, dst, src, ScaleAddParams { n, alpha, beta, _pad: 0 });
    }
}

fn dispatch(
    entry: &KernelEntry,
    e: &mut Encoding<'_>,
    dst: ReduceTarget<'_>,
    src: ReduceTarget<'_>,
    params: ScaleAddParams,
) {
    use wgpu::util::DeviceExt as _;
    let device = e.device;
    let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("collective uniforms"),
        contents: bytemuck::bytes_of(&params),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("collective"),
        layout: &entry.layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: uniform.as_entire_binding() },
            bind(1, dst),
            bind(2, src),
        ],
    });
    let groups = u64::from(params.n).div_ceil(256);
    let max = u64::from(e.max_groups.max(1));
    let grid = if groups <= max { [groups as u32, 1, 1] } else { [max as u32, groups.div_ceil(max) as u32, 1] };
    let mut pass =
        e.enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("collective"), timestamp_writes: None });
    pass.set_pipeline(&entry.pipeline);
    pass.set_bind_group(0, &bind_group, &[]);
    pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
}
