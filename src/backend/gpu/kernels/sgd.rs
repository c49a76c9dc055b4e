//! `shaders/sgd.wgsl`. CPU twin: `cpu::ops::sgd_step`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::View;

/// Mirrors `Params` in sgd.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SgdParams {
    pub n: u32,
    pub has_momentum: u32,
    pub _pad0: [u32; 2],
    pub lr: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    pub _pad1: f32,
}

#[derive(Clone, Debug)]
pub struct Sgd {
    step: KernelEntry,
}

impl Sgd {
    pub fn new(device: &wgpu::Device) -> Self {
        let [step] = build_entries(device, "sgd.wgsl", [("step", &[1, 2, 3])]);
        Self { step }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &self,
        rec: &mut Recorder,
        params: View,
        grads: View,
        momentum_buf: Option<View>,
        lr: f32,
        momentum: f32,
        weight_decay: f32,
    ) -> Result<(), GpuError> {
        let p = SgdParams {
            n: u(params.len),
            has_momentum: momentum_buf.is_some() as u32,
            _pad0: [0; 2],
            lr,
            momentum,
            weight_decay,
            _pad1: 0.0,
        };
        let buf = momentum_buf.map_or(Binding::Dummy, Binding::View);
        rec.dispatch(
            &self.step,
            &p,
            &[(1, Binding::View(params)), (2, Binding::View(grads)), (3, buf)],
            rec.grid_1d(params.len, 256),
        )
    }
}
