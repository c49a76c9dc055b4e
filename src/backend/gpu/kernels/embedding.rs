//! `shaders/embedding.wgsl`. CPU twins: `cpu::ops::embedding_forward` / `embedding_backward`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::backend::ix;
use crate::plan::op;

/// Mirrors `Params` in embedding.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EmbeddingParams {
    pub rows: u32,
    pub t: u32,
    pub c: u32,
    pub vocab: u32,
    /// Packed rows: positions count from each document's start.
    pub packed: u32,
    /// Each row's position is given (`positions`).
    pub given: u32,
    /// Rows of the position table (a position past it reads a zero row).
    pub positions_max: u32,
    pub _pad: u32,
}

#[derive(Clone, Debug)]
pub struct Embedding {
    forward: KernelEntry,
    backward_wte: KernelEntry,
    backward_wpe: KernelEntry,
}

impl Embedding {
    pub fn new(device: &wgpu::Device) -> Self {
        let [forward, backward_wte, backward_wpe] = build_entries(
            device,
            "embedding.wgsl",
            [("forward", &[1, 2, 3, 4, 10, 11]), ("backward_wte", &[5, 6, 7, 8]), ("backward_wpe", &[7, 9])],
        );
        Self { forward, backward_wte, backward_wpe }
    }

    fn params(rows: usize, t: usize, c: usize, vocab: usize, packed: bool) -> EmbeddingParams {
        EmbeddingParams {
            rows: u(rows),
            t: u(t),
            c: u(c),
            vocab: u(vocab),
            packed: u32::from(packed),
            given: 0,
            positions_max: 0,
            _pad: 0,
        }
    }

    pub fn forward(
        &self,
        rec: &mut Recorder,
        o: &op::Embedding,
        t: usize,
        c: usize,
        vocab: usize,
    ) -> Result<(), GpuError> {
        let op::Embedding { tokens, wte, wpe, out, packing, positions } = *o;
        let p = EmbeddingParams {
            given: u32::from(positions.is_some()),
            positions_max: u(wpe.len / (c.max(1) as u64)),
            ..Self::params(ix(tokens.len), t, c, vocab, packing.is_some())
        };
        let v = Binding::View;
        let starts = packing.map_or(Binding::Dummy, |k| v(k.doc_starts));
        let at = positions.map_or(Binding::Dummy, v);
        let views = [v(tokens), v(wte), v(wpe), v(out), starts, at];
        rec.dispatch(&self.forward, &p, &views, rec.grid_1d(out.len, 256))
    }

    pub fn backward(
        &self,
        rec: &mut Recorder,
        o: &op::EmbeddingBackward,
        t: usize,
        c: usize,
        vocab: usize,
    ) -> Result<(), GpuError> {
        let op::EmbeddingBackward { token_offsets, token_positions, dout, dwte, dwpe, packing, .. } = *o;
        let p = Self::params(ix(token_positions.len), t, c, vocab, false);
        let v = Binding::View;
        rec.dispatch(
            &self.backward_wte,
            &p,
            &[v(token_offsets), v(token_positions), v(dout), v(dwte)],
            rec.grid_1d(vocab * c, 256),
        )?;
        match packing {
            // Positions grouped like tokens: the same gather, T "tokens" into dwpe.
            Some(k) => {
                let p = Self::params(ix(token_positions.len), t, c, t, false);
                let bindings = [v(k.position_offsets), v(k.position_rows), v(dout), v(dwpe)];
                rec.dispatch(&self.backward_wte, &p, &bindings, rec.grid_1d(t * c, 256))
            }
            None => rec.dispatch(&self.backward_wpe, &p, &[v(dout), v(dwpe)], rec.grid_1d(t * c, 256)),
        }
    }
}
