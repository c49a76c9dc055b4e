//! `shaders/check_finite.wgsl`. CPU twin: `cpu::ops::all_finite`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::View;

/// Mirrors `Params` in check_finite.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CheckFiniteParams {
    pub n: u32,
    pub _pad: [u32; 3],
}

#[derive(Clone, Debug)]
pub struct CheckFinite {
    check: KernelEntry,
}

impl CheckFinite {
    pub fn new(device: &wgpu::Device) -> Self {
        let [check] = build_entries(device, "check_finite.wgsl", [("check", &[1, 2])]);
        Self { check }
    }

    /// found_inf[0] = 1 if any of `grads` is inf or NaN (the flag must be zeroed first).
    pub fn record(&self, rec: &mut Recorder, grads: View, found_inf: View) -> Result<(), GpuError> {
        let p = CheckFiniteParams { n: u(grads.len), _pad: [0; 3] };
        let b = Binding::View;
        rec.dispatch(&self.check, &p, &[b(grads), b(found_inf)], rec.grid_1d(grads.len, 256))
    }
}
