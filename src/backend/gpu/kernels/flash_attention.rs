//! `shaders/flash_attention.wgsl`: fused (FlashAttention-style) causal self-attention, forward
//! and backward, without the T×T matrix. CPU twins: `cpu::attention::flash_attention_forward` /
//! `flash_attention_backward`.

use super::attention::AttnShape;
use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::op;

/// Query (or key) rows per workgroup: `QT` in the shader.
const ROWS_PER_GROUP: usize = 64;

/// Mirrors `Params` in flash_attention.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FlashParams {
    pub b: u32,
    pub t: u32,
    pub c: u32,
    pub nh: u32,
    pub hs: u32,
    pub scale: f32,
    /// Packed rows: a query's keys start at its document's start.
    pub packed: u32,
    pub _pad: u32,
}

#[derive(Clone, Debug)]
pub struct FlashAttention {
    forward: KernelEntry,
    backward_dq: KernelEntry,
    backward_dkv: KernelEntry,
}

impl FlashAttention {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, backward_dq, backward_dkv] = build_entries(
            device,
            "flash_attention.wgsl",
            [
                ("forward", &[1, 2, 3, 7]),
                ("backward_dq", &[1, 2, 3, 4, 5, 6, 7]),
                ("backward_dkv", &[1, 3, 4, 5, 6, 7]),
            ],
        );
        Self { forward, backward_dq, backward_dkv }
    }

    fn params(s: &AttnShape, packed: bool) -> FlashParams {
        let hs = s.c / s.nh;
        FlashParams {
            b: u(s.b),
            t: u(s.t),
            c: u(s.c),
            nh: u(s.nh),
            hs: u(hs),
            scale: 1.0 / (hs as f32).sqrt(),
            packed: u32::from(packed),
            _pad: 0,
        }
    }

    fn grid(s: &AttnShape) -> [u32; 3] {
        [u(s.t.div_ceil(ROWS_PER_GROUP)), u(s.b * s.nh), 1]
    }

    /// out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C).
    pub fn forward(&self, rec: &mut Recorder, o: &op::FlashAttention, s: AttnShape) -> Result<(), GpuError> {
        let op::FlashAttention { qkv, out, lse, packing } = *o;
        let v = Binding::View;
        let starts = packing.map_or(Binding::Dummy, |k| v(k.doc_starts));
        let p = Self::params(&s, packing.is_some());
        rec.dispatch(&self.forward, &p, &[v(qkv), v(out), v(lse), starts], Self::grid(&s))
    }

    /// dqkv (B,T,3C) given dout; `delta` (B,NH,T) is scratch written by the first dispatch.
    pub fn backward(&self, rec: &mut Recorder, o: &op::FlashAttentionBackward, s: AttnShape) -> Result<(), GpuError> {
        let op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv, packing } = *o;
        let v = Binding::View;
        let starts = || packing.map_or(Binding::Dummy, |k| v(k.doc_starts));
        let p = Self::params(&s, packing.is_some());
        let dq = [v(qkv), v(out), v(lse), v(dout), v(delta), v(dqkv), starts()];
        rec.dispatch(&self.backward_dq, &p, &dq, Self::grid(&s))?;
        rec.dispatch(&self.backward_dkv, &p, &[v(qkv), v(lse), v(dout), v(delta), v(dqkv), starts()], Self::grid(&s))
    }
}
