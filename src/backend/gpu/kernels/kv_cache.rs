//! `shaders/kv_cache.wgsl`: the KV cache of serving — new tokens' keys and values written into
//! a layer's cache, and attention of new tokens over it through the block tables. CPU twins:
//! `cpu::attention::kv_write` / `cached_attention`.

use super::attention::AttnShape;
use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::plan::op;

/// Mirrors `Params` in kv_cache.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct KvParams {
    pub b: u32,
    pub t: u32,
    pub c: u32,
    pub nh: u32,
    pub hs: u32,
    pub scale: f32,
    pub block_size: u32,
    /// Blocks in each request's table.
    pub width: u32,
    /// Elements of the cache (a slot past it is never written or read).
    pub cache_len: u32,
    pub _pad: [u32; 3],
}

#[derive(Clone, Debug)]
pub struct KvCache {
    write: KernelEntry,
    attend: KernelEntry,
}

impl KvCache {
    pub fn new(device: &wgpu::Device) -> Self {
        let [write, attend] =
            build_entries(device, "kv_cache.wgsl", [("write", &[1, 2, 3]), ("attend", &[1, 2, 4, 5, 6])]);
        Self { write, attend }
    }

    fn params(s: &AttnShape, cache_len: u64, block_size: usize, width: usize) -> KvParams {
        let hs = s.c / s.nh.max(1);
        KvParams {
            b: u(s.b),
            t: u(s.t),
            c: u(s.c),
            nh: u(s.nh),
            hs: u(hs),
            scale: 1.0 / (hs as f32).sqrt(),
            block_size: u(block_size.max(1)),
            width: u(width),
            cache_len: u(cache_len),
            _pad: [0; 3],
        }
    }

    /// K and V of the new tokens into their slots.
    pub fn write(&self, rec: &mut Recorder, o: &op::KvWrite, s: AttnShape) -> Result<(), GpuError> {
        let op::KvWrite { qkv, slots, cache } = *o;
        let p = Self::params(&s, cache.len, 1, 0);
        let n = (s.b * s.t) as u64 * 2 * s.c as u64;
        let views = [Binding::View(qkv), Binding::View(cache), Binding::View(slots)];
        rec.dispatch(&self.write, &p, &views, rec.grid_1d(n, 256))
    }

    /// out = each new token's attention over its request's cache.
    pub fn attend(&self, rec: &mut Recorder, o: &op::CachedAttention, s: AttnShape) -> Result<(), GpuError> {
        let op::CachedAttention { qkv, cache, blocks, lens, out, block_size } = *o;
        let width = (blocks.len / (s.b.max(1) as u64)) as usize;
        let p = Self::params(&s, cache.len, block_size, width);
        let views =
            [Binding::View(qkv), Binding::View(cache), Binding::View(blocks), Binding::View(lens), Binding::View(out)];
        rec.dispatch(&self.attend, &p, &views, rec.grid_1d((s.b * s.t * s.nh) as u64 * 64, 64))
    }
}
