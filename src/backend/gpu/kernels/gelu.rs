//! `shaders/gelu.wgsl`. CPU twins: `cpu::ops::gelu_forward` / `gelu_backward`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::View;

/// Mirrors `Params` in gelu.wgsl and residual.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CountParams {
    pub n: u32,
    pub _pad: [u32; 3],
}

#[derive(Clone, Debug)]
pub struct Gelu {
    pub(super) forward: KernelEntry,
    backward: KernelEntry,
}

impl Gelu {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, backward] = build_entries(device, "gelu.wgsl", [("forward", &[1, 2]), ("backward", &[1, 3, 4])]);
        Self { forward, backward }
    }

    pub fn forward(&self, rec: &mut Recorder, inp: View, out: View) -> Result<(), GpuError> {
        let p = CountParams { n: u(inp.len), _pad: [0; 3] };
        rec.dispatch(&self.forward, &p, &[Binding::View(inp), Binding::View(out)], rec.grid_1d(inp.len, 256))
    }

    pub fn backward(&self, rec: &mut Recorder, inp: View, dout: View, dinp: View) -> Result<(), GpuError> {
        let p = CountParams { n: u(inp.len), _pad: [0; 3] };
        rec.dispatch(
            &self.backward,
            &p,
            &[Binding::View(inp), Binding::View(dout), Binding::View(dinp)],
            rec.grid_1d(inp.len, 256),
        )
    }
}
