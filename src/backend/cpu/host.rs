//! Host memory: what the CPU backend checks before it holds a step, and how its buffers grow.

use crate::backend::BackendError;
use crate::memory::Budget;
use crate::plan::Plan;

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
        return Err(BackendError::HostMemory(format!(
            "the CPU backend holds the step in host memory: it needs {} ({} of device memory reserved, \
             {per_byte} host byte(s) per byte, and the batch) but the host has {} available. \
             Use a smaller batch, or the GPU backend.",
            crate::units::format_bytes(needed),
            crate::units::format_bytes(reserved),
            crate::units::format_bytes(available),
        )));
    }
    Ok(())
}
