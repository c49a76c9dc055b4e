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
    /// 1 / loss scale (fp16), else 1.
    pub inv_scale: f32,
    pub has_copy: u32,
    pub has_flag: u32,
    pub _pad1: [u32; 2],
}

/// What one SGD step binds besides its hyper-parameters.
#[derive(Clone, Copy, Debug)]
pub struct SgdViews {
    pub params: View,
    pub grads: View,
    pub momentum_buf: Option<View>,
    /// The 16-bit working copy (mixed precision).
    pub copy: Option<View>,
    /// fp16's overflow flag.
    pub found_inf: Option<View>,
}

impl SgdParams {
    pub fn new(views: &SgdViews, lr: f32, momentum: f32, weight_decay: f32, inv_scale: f32) -> Self {
        Self {
            n: u(views.params.len),
            has_momentum: views.momentum_buf.is_some() as u32,
            _pad0: [0; 2],
            lr,
            momentum,
            weight_decay,
            inv_scale,
            has_copy: views.copy.is_some() as u32,
            has_flag: views.found_inf.is_some() as u32,
            _pad1: [0; 2],
        }
    }
}

#[derive(Clone, Debug)]
pub struct Sgd {
    step: KernelEntry,
}

impl Sgd {
    pub fn new(device: &wgpu::Device) -> Self {
        let [step] = build_entries(device, "sgd.wgsl", [("step", &[1, 2, 3, 5, 6])]);
        Self { step }
    }

    /// Records the update; returns the byte offset of its uniform (rewritten every step with
    /// fp16's loss scale).
    pub fn step(&self, rec: &mut Recorder, views: &SgdViews, p: &SgdParams) -> Result<u64, GpuError> {
        let opt = |v: Option<View>| v.map_or(Binding::Dummy, Binding::View);
        rec.dispatch(
            &self.step,
            p,
            &[
                Binding::View(views.params),
                Binding::View(views.grads),
                opt(views.momentum_buf),
                opt(views.copy),
                opt(views.found_inf),
            ],
            rec.grid_1d(views.params.len, 256),
        )?;
        Ok(rec.last_uniform().unwrap_or(0))
    }
}
