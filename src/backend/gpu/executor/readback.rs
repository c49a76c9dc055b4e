//! Values to and from a tensor's bytes, and buffer readback (native and web).

use super::super::{GpuContext, GpuError};
use crate::plan::DType;

/// `values` as the bytes of a `dtype` tensor.
pub(super) fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect(),
        DType::F32 | DType::U32 => bytemuck::cast_slice(values).to_vec(),
    }
}

/// The first `n` values of a `dtype` tensor's bytes, as f32.
pub(super) fn decode(dtype: DType, data: &[u8], n: usize) -> Vec<f32> {
    let pairs = data.chunks_exact(2).map(|c| [c[0], c[1]]);
    match dtype {
        DType::F16 => pairs.map(|b| half::f16::from_le_bytes(b).to_f32()).take(n).collect(),
        DType::BF16 => pairs.map(|b| half::bf16::from_le_bytes(b).to_f32()).take(n).collect(),
        DType::F32 | DType::U32 => {
            let mut v: Vec<f32> = bytemuck::pod_collect_to_vec(data);
            v.truncate(n);
            v
        }
    }
}

/// Maps `staging`, copies out `size` bytes and unmaps. On native the device is polled until the
/// map completes; on the web the browser completes it and this future awaits it.
pub(super) async fn read_buffer(ctx: &GpuContext, staging: &wgpu::Buffer, size: u64) -> Result<Vec<u8>, GpuError> {
    let (tx, rx) = futures_channel::oneshot::channel();
    staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    #[cfg(not(target_arch = "wasm32"))]
    ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
    ctx.check_alive()?;
    let mapped = rx.await.map_err(|_| GpuError::Readback("the map callback was dropped".into()))?;
    mapped.map_err(|e| GpuError::Readback(e.to_string()))?;
    let out = {
        let view = staging.slice(..size).get_mapped_range().map_err(|e| GpuError::Readback(e.to_string()))?;
        view.to_vec()
    };
    staging.unmap();
    if let Some(e) = ctx.take_uncaptured_errors().pop() {
        return Err(GpuError::Validation(e));
    }
    Ok(out)
}
