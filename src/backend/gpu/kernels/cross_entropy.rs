//! `shaders/cross_entropy.wgsl`. CPU twins: `cpu::ops::cross_entropy_forward` /
//! `cross_entropy_backward`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::backend::ix;
use crate::plan::View;
use crate::plan::op;

/// Mirrors `Params` in cross_entropy.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CrossEntropyParams {
    pub rows: u32,
    pub v: u32,
    pub scale: f32,
    pub _pad: u32,
}

impl CrossEntropyParams {
    /// The backward pass's uniform: `scale` multiplies (probs − onehot).
    pub fn new(rows: usize, vocab: usize, scale: f64) -> Self {
        Self { rows: u(rows), v: u(vocab), scale: scale as f32, _pad: 0 }
    }
}

#[derive(Clone, Debug)]
pub struct CrossEntropy {
    forward: KernelEntry,
    loss_mean: KernelEntry,
    backward: KernelEntry,
}

impl CrossEntropy {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, loss_mean, backward] = build_entries(
            device,
            "cross_entropy.wgsl",
            [("forward", &[1, 2, 3, 4]), ("loss_mean", &[2, 4, 5]), ("backward", &[2, 3, 6])],
        );
        Self { forward, loss_mean, backward }
    }

    pub fn forward(&self, rec: &mut Recorder, o: &op::CrossEntropy, vocab: usize) -> Result<(), GpuError> {
        let op::CrossEntropy { logits, targets, probs, losses, loss } = *o;
        let rows = targets.len;
        let p = CrossEntropyParams { rows: u(rows), v: u(vocab), scale: 0.0, _pad: 0 };
        let v = Binding::View;
        rec.dispatch(&self.forward, &p, &[v(logits), v(targets), v(probs), v(losses)], rec.grid_1d(rows, 64))?;
        rec.dispatch(&self.loss_mean, &p, &[v(targets), v(losses), v(loss)], [1, 1, 1])
    }

    pub fn backward(
        &self,
        rec: &mut Recorder,
        probs: View,
        targets: View,
        dlogits: View,
        vocab: usize,
        scale: f64,
    ) -> Result<(), GpuError> {
        let rows = targets.len;
        let p = CrossEntropyParams::new(ix(rows), vocab, scale);
        let v = Binding::View;
        rec.dispatch(&self.backward, &p, &[v(targets), v(probs), v(dlogits)], rec.grid_1d(ix(rows) * vocab, 256))
    }
}
