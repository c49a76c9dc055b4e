//! `shaders/residual.wgsl`. CPU twins: `cpu::ops::residual_forward` / `residual_backward`.

use super::gelu::CountParams;
use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::View;

#[derive(Clone, Debug)]
pub struct Residual {
    forward: KernelEntry,
    backward: KernelEntry,
}

impl Residual {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, backward] =
            build_entries(device, "residual.wgsl", [("forward", &[1, 2, 3]), ("backward", &[4, 5])]);
        Self { forward, backward }
    }

    pub fn forward(&self, rec: &mut Recorder, a: View, b: View, out: View) -> Result<(), GpuError> {
        let p = CountParams { n: u(out.len), _pad: [0; 3] };
        rec.dispatch(
            &self.forward,
            &p,
            &[Binding::View(a), Binding::View(b), Binding::View(out)],
            rec.grid_1d(out.len, 256),
        )
    }

    pub fn backward(&self, rec: &mut Recorder, dout: View, da: View) -> Result<(), GpuError> {
        let p = CountParams { n: u(da.len), _pad: [0; 3] };
        rec.dispatch(&self.backward, &p, &[Binding::View(dout), Binding::View(da)], rec.grid_1d(da.len, 256))
    }
}
