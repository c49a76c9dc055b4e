//! `shaders/layernorm.wgsl`. CPU twins: `cpu::ops::layernorm_forward` / `layernorm_backward`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::op;

/// Mirrors `Params` in layernorm.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LayerNormParams {
    pub rows: u32,
    pub cols: u32,
    pub accumulate: u32,
    pub _pad: u32,
}

#[derive(Clone, Debug)]
pub struct LayerNorm {
    forward: KernelEntry,
    backward_input: KernelEntry,
    backward_params: KernelEntry,
}

impl LayerNorm {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, backward_input, backward_params] = build_entries(
            device,
            "layernorm.wgsl",
            [
                ("forward", &[1, 2, 3, 4, 5, 6]),
                ("backward_input", &[1, 2, 5, 6, 7, 8]),
                ("backward_params", &[1, 5, 6, 7, 9, 10]),
            ],
        );
        Self { forward, backward_input, backward_params }
    }

    pub fn forward(&self, rec: &mut Recorder, o: &op::LayerNorm, cols: usize) -> Result<(), GpuError> {
        let op::LayerNorm { inp, weight, bias, out, mean, rstd } = *o;
        let rows = mean.len;
        let p = LayerNormParams { rows: u(rows), cols: u(cols), accumulate: 0, _pad: 0 };
        let v = Binding::View;
        rec.dispatch(&self.forward, &p, &[v(inp), v(weight), v(bias), v(out), v(mean), v(rstd)], rec.grid_1d(rows, 64))
    }

    pub fn backward(&self, rec: &mut Recorder, o: &op::LayerNormBackward, cols: usize) -> Result<(), GpuError> {
        let op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } = *o;
        let rows = mean.len;
        let p = LayerNormParams { rows: u(rows), cols: u(cols), accumulate: accumulate as u32, _pad: 0 };
        let v = Binding::View;
        rec.dispatch(
            &self.backward_input,
            &p,
            &[v(inp), v(weight), v(mean), v(rstd), v(dout), v(dinp)],
            rec.grid_1d(rows, 64),
        )?;
        // Frozen parameters (LoRA) have no gradients.
        let (Some(dweight), Some(dbias)) = (dweight, dbias) else { return Ok(()) };
        rec.dispatch(
            &self.backward_params,
            &p,
            &[v(inp), v(mean), v(rstd), v(dout), v(dweight), v(dbias)],
            [u(cols.div_ceil(64)), 1, 1],
        )
    }
}
