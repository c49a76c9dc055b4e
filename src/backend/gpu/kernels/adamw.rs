//! `shaders/adamw.wgsl`. CPU twin: `cpu::ops::adamw_step`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::cpu::ops::AdamWStep;
use crate::backend::gpu::GpuError;
use crate::plan::View;

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
    pub _pad1: f32,
}

impl AdamWParams {
    pub fn new(n: usize, s: &AdamWStep) -> Self {
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
            _pad1: 0.0,
        }
    }
}

#[derive(Clone, Debug)]
pub struct AdamW {
    step: KernelEntry,
}

impl AdamW {
    pub fn new(device: &wgpu::Device) -> Self {
        let [step] = build_entries(device, "adamw.wgsl", [("step", &[1, 2, 3, 4])]);
        Self { step }
    }

    /// Records the update; returns the byte offset of its uniform, which the executor rewrites
    /// every step (t changes the bias corrections).
    pub fn step(
        &self,
        rec: &mut Recorder,
        params: View,
        grads: View,
        m: View,
        v: View,
        s: &AdamWStep,
    ) -> Result<u64, GpuError> {
        let p = AdamWParams::new(params.len, s);
        let b = Binding::View;
        rec.dispatch(
            &self.step,
            &p,
            &[(1, b(params)), (2, b(grads)), (3, b(m)), (4, b(v))],
            rec.grid_1d(params.len, 256),
        )?;
        let offset = rec.uniforms.len() - std::mem::size_of::<AdamWParams>();
        Ok(offset as u64)
    }
}
