//! `shaders/attention.wgsl` (causal softmax) + the GEMMs of `matmul.wgsl`: causal multi-head
//! self-attention forward and backward. CPU twins: `cpu::attention::attention_forward` /
//! `attention_backward`.
//!
//! Layouts: qkv (B,T,3C) with Q, K, V side by side; head h of Q at column h·hs. att (B,NH,T,T).

use super::matmul::{Gemm, GemmCall, Operand};
use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::op;

/// Mirrors `Params` in attention.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SoftmaxParams {
    pub rows: u32,
    pub t: u32,
    pub nh: u32,
    /// Packed rows: a query's keys start at its document's start.
    pub packed: u32,
}

#[derive(Clone, Debug)]
pub struct Attention {
    gemm: Gemm,
    softmax_forward: KernelEntry,
    softmax_backward: KernelEntry,
}

/// Shape of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub b: usize,
    pub t: usize,
    pub c: usize,
    pub nh: usize,
}

impl AttnShape {
    fn hs(&self) -> usize {
        self.c / self.nh
    }
    fn scale(&self) -> f32 {
        1.0 / (self.hs() as f32).sqrt()
    }
    /// Q, K or V (part 0, 1, 2) of qkv, per (batch, head).
    fn qkv_part(&self, part: usize) -> Operand {
        Operand {
            offset: part * self.c,
            outer: self.t * 3 * self.c,
            head: self.hs(),
            ld: 3 * self.c,
            transposed: false,
        }
    }
    /// A (B,T,C) tensor per (batch, head).
    fn btc(&self) -> Operand {
        Operand { offset: 0, outer: self.t * self.c, head: self.hs(), ld: self.c, transposed: false }
    }
    /// att or datt (B,NH,T,T) per (batch, head).
    fn bhtt(&self) -> Operand {
        Operand { offset: 0, outer: self.nh * self.t * self.t, head: self.t * self.t, ld: self.t, transposed: false }
    }
}

impl Attention {
    pub fn new(device: &wgpu::Device, gemm: Gemm) -> Self {
        let [softmax_forward, softmax_backward] =
            build_entries(device, "attention.wgsl", [("softmax_forward", &[1, 3]), ("softmax_backward", &[1, 2])]);
        Self { gemm, softmax_forward, softmax_backward }
    }

    /// `call` (per (batch, head) pair: C = alpha · op(A) · op(B)) for every pair.
    fn per_head(&self, rec: &mut Recorder, s: &AttnShape, call: GemmCall) -> Result<(), GpuError> {
        self.gemm.record(rec, &call.batched(s.b, s.nh))
    }

    fn softmax_params(s: &AttnShape, packed: bool) -> SoftmaxParams {
        SoftmaxParams { rows: u(s.b * s.nh * s.t), t: u(s.t), nh: u(s.nh), packed: u32::from(packed) }
    }

    /// att = softmax(QKᵀ/√hs) (causal; in packed rows within each document), out = att·V.
    pub fn forward(&self, rec: &mut Recorder, o: &op::Attention, s: AttnShape) -> Result<(), GpuError> {
        let op::Attention { qkv, att, out, packing } = *o;
        let (t, hs) = (s.t, s.hs());
        // S = scale · Q Kᵀ, written into att (B is K, read from the same qkv binding)
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, t, hs, (qkv, s.qkv_part(0)), (None, s.qkv_part(1).transposed()), (att, s.bhtt()))
                .alpha(s.scale()),
        )?;
        let p = Self::softmax_params(&s, packing.is_some());
        let groups = rec.grid_1d(s.b * s.nh * t, 64);
        let starts = packing.map_or(Binding::Dummy, |k| Binding::View(k.doc_starts));
        rec.dispatch(&self.softmax_forward, &p, &[Binding::View(att), starts], groups)?;
        // O = P V
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, hs, t, (att, s.bhtt()), (Some(qkv), s.qkv_part(2)), (out, s.btc())).alpha(1.0),
        )
    }

    /// dqkv from dout; datt is scratch.
    pub fn backward(&self, rec: &mut Recorder, o: &op::AttentionBackward, s: AttnShape) -> Result<(), GpuError> {
        let op::AttentionBackward { qkv, att, dout, datt, dqkv } = *o;
        let (t, hs) = (s.t, s.hs());
        let dpart = |part: usize| (dqkv, s.qkv_part(part));
        // dP = dO Vᵀ
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, t, hs, (dout, s.btc()), (Some(qkv), s.qkv_part(2).transposed()), (datt, s.bhtt()))
                .alpha(1.0),
        )?;
        // dV = Pᵀ dO
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, hs, t, (att, s.bhtt().transposed()), (Some(dout), s.btc()), dpart(2)).alpha(1.0),
        )?;
        // dS = P ⊙ (dP − Σ P dP)
        let p = Self::softmax_params(&s, false);
        let groups = rec.grid_1d(s.b * s.nh * t, 64);
        rec.dispatch(&self.softmax_backward, &p, &[Binding::View(att), Binding::View(datt)], groups)?;
        // dQ = scale · dS K ; dK = scale · dSᵀ Q
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, hs, t, (datt, s.bhtt()), (Some(qkv), s.qkv_part(1)), dpart(0)).alpha(s.scale()),
        )?;
        self.per_head(
            rec,
            &s,
            GemmCall::new(t, hs, t, (datt, s.bhtt().transposed()), (Some(qkv), s.qkv_part(0)), dpart(1))
                .alpha(s.scale()),
        )
    }
}
