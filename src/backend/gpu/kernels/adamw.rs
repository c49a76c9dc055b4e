//! `shaders/adamw.wgsl`. CPU twin: `cpu::ops::adamw_step`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::backend::ix;
use crate::plan::AdamWStep;
use crate::plan::View;
use crate::plan::op;

/// Mirrors `Params` in adamw.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AdamWParams {
    pub n: u32,
    pub decay_end: u32,
    pub _pad0: [u32; 2],
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub bias_correction1: f32,
    pub bias_correction2: f32,
    /// 1 / loss scale (fp16), else 1.
    pub inv_scale: f32,
    pub has_copy: u32,
    pub has_flag: u32,
    pub _pad1: [u32; 2],
}

impl AdamWParams {
    /// `inv_scale` divides the gradients; `has_copy`/`has_flag` say whether the 16-bit copy and
    /// the overflow flag are bound (mixed precision).
    pub fn new(n: usize, s: &AdamWStep, inv_scale: f32, has_copy: bool, has_flag: bool) -> Self {
        let (bc1, bc2) = s.bias_corrections();
        Self {
            n: u(n),
            decay_end: u(s.decay_end),
            _pad0: [0; 2],
            lr: s.lr,
            beta1: s.beta1,
            beta2: s.beta2,
            eps: s.eps,
            weight_decay: s.weight_decay,
            bias_correction1: bc1,
            bias_correction2: bc2,
            inv_scale,
            has_copy: has_copy as u32,
            has_flag: has_flag as u32,
            _pad1: [0; 2],
        }
    }
}

#[derive(Clone, Debug)]
pub struct AdamW {
    step: KernelEntry,
}

impl AdamW {
    pub fn new(device: &wgpu::Device) -> Self {
        let [step] = build_entries(device, "adamw.wgsl", [("step", &[1, 2, 3, 4, 5, 6])]);
        Self { step }
    }

    /// Records the update; returns the byte offset of its uniform, which the executor rewrites
    /// every step (t changes the bias corrections, fp16 the loss scale).
    pub fn step(&self, rec: &mut Recorder, o: &op::AdamW, s: &AdamWStep) -> Result<u64, GpuError> {
        let op::AdamW { params, grads, m, v, copy, found_inf } = *o;
        let p = AdamWParams::new(ix(params.len), s, 1.0, copy.is_some(), found_inf.is_some());
        let b = Binding::View;
        let opt = |v: Option<View>| v.map_or(Binding::Dummy, Binding::View);
        rec.dispatch(
            &self.step,
            &p,
            &[b(params), b(grads), b(m), b(v), opt(copy), opt(found_inf)],
            rec.grid_1d(params.len, 256),
        )?;
        Ok(rec.last_uniform().unwrap_or(0))
    }
}
