//! Host memory: what the CPU backend checks before it holds a step, and how its buffers grow.

use super::ops;
use crate::backend::BackendError;
use crate::memory::Budget;
use crate::memory::SegmentId;
use crate::plan::{DType, Plan, TensorId};

/// Grows `v` to at least `len` elements, filled with `fill`; a host that cannot is an error, not
/// an abort.
pub(super) fn grow<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) -> Result<(), std::collections::TryReserveError> {
    if v.len() < len {
        v.try_reserve_exact(len - v.len())?;
        v.resize(len, fill);
    }
    Ok(())
}

/// Host bytes this backend holds per byte of device memory the allocator reserves: a slot of
/// `slot_bytes` holds one `F`.
pub(super) fn host_bytes_per_device_byte<F>(slot_bytes: u64) -> u64 {
    (std::mem::size_of::<F>() as u64).div_ceil(slot_bytes).max(1)
}

/// Memory the host can give now: Linux's `MemAvailable`; a wasm32 page's 4 GiB address space,
/// half of it for the step; None where unknown (then only the allocations' own failures stop a
/// step).
pub fn host_available_bytes() -> Option<u64> {
    if cfg!(target_arch = "wasm32") {
        return Some(2 << 30);
    }
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses a step whose host memory would pass what the host has: the device bytes the step
/// reserves — its predicted peak, at most the budget — times `per_byte`, plus the batch's tokens.
pub(super) fn check_host_memory(plan: &Plan, budget: Budget, per_byte: u64) -> Result<(), BackendError> {
    let Some(available) = host_available_bytes() else { return Ok(()) };
    let reserved = match crate::memory::simulate_peak(plan, Budget::Unlimited) {
        Ok(m) => m.peak_reserved_bytes().min(budget.capacity_bytes()),
        Err(_) => budget.capacity_bytes(),
    };
    // Tokens and targets of the whole batch (u32 each), held by the caller.
    let batch = plan.batch_shape().rows().saturating_mul(8);
    let needed = reserved.saturating_mul(per_byte).saturating_add(batch);
    if needed > available {
        return Err(BackendError::HostMemory(super::super::HostShortfall::Step {
            needed,
            reserved,
            per_byte,
            available,
        }));
    }
    Ok(())
}

/// The pretend segment holding host tensor `id` (offload): numbers the allocator never hands out.
pub(super) fn host_segment(id: TensorId) -> SegmentId {
    SegmentId((1 << 62) + id.0 as u64)
}

pub(super) fn cast<F: ops::Real>(x: f32) -> F {
    F::from(x).unwrap_or_else(F::nan)
}

/// `x` rounded to the nearest value of `dtype` (identity for fp32): 16-bit tensors hold only
/// what 16 bits can, overflow included (to ±inf).
fn round_to<F: ops::Real>(dtype: DType, x: F) -> F {
    let v = x.to_f64().unwrap_or(f64::NAN);
    match dtype {
        DType::F16 => F::from(half::f16::from_f64(v).to_f64()).unwrap_or_else(F::nan),
        DType::BF16 => F::from(half::bf16::from_f64(v).to_f64()).unwrap_or_else(F::nan),
        DType::F32 | DType::U32 => x,
    }
}

/// `dst` ← `src` rounded to `dtype` (a plain copy for fp32, the common case).
pub(super) fn store_rounded<F: ops::Real>(dtype: DType, dst: &mut [F], src: &[F]) {
    let n = dst.len().min(src.len());
    match dtype {
        DType::F32 | DType::U32 => dst[..n].copy_from_slice(&src[..n]),
        DType::F16 | DType::BF16 => dst.iter_mut().zip(src).for_each(|(d, &x)| *d = round_to(dtype, x)),
    }
}
