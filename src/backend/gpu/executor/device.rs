//! The driver layer's own report after a step, matched against the allocator's segments.

use super::GpuExecutor;
use crate::memory::SegmentId;
use crate::memory::device::{
    DeviceAllocation, DeviceBlock, DeviceCounters, DeviceFigures, DeviceMemory, DriverReport, NOT_REPORTED_BACKEND,
    NOT_REPORTED_BROWSER,
};

impl GpuExecutor {
    /// Takes the driver layer's report and keeps the most segment bytes seen this step.
    pub(super) fn observe_device(&mut self) {
        if let DeviceFigures::Reported(d) = self.device_report() {
            self.device_peak = self.device_peak.max(d.segment_bytes());
        }
    }

    /// The driver layer's report now, matched against the allocator's live segments.
    pub(super) fn device_report(&self) -> DeviceFigures {
        if cfg!(target_arch = "wasm32") {
            return DeviceFigures::NotReported { reason: NOT_REPORTED_BROWSER.into() };
        }
        let Some(report) = self.ctx.device.generate_allocator_report() else {
            return DeviceFigures::NotReported { reason: NOT_REPORTED_BACKEND.into() };
        };
        let counters = self.ctx.device.get_internal_counters().hal;
        let counters = (counters.buffers.read() > 0).then(|| DeviceCounters {
            buffers: counters.buffers.read() as u64,
            buffer_memory_bytes: counters.buffer_memory.read() as u64,
            memory_allocations: counters.memory_allocations.read() as u64,
        });
        let blocks = report
            .blocks
            .iter()
            .map(|b| DeviceBlock {
                size_bytes: b.size,
                allocations: report
                    .allocations
                    .get(b.allocations.clone())
                    .unwrap_or(&[])
                    .iter()
                    .map(|a| DeviceAllocation { name: a.name.clone(), size_bytes: a.size, offset_bytes: a.offset })
                    .collect(),
            })
            .collect();
        let raw = DriverReport {
            blocks,
            total_allocated_bytes: report.total_allocated_bytes,
            total_reserved_bytes: report.total_reserved_bytes,
            counters,
        };
        let live: Vec<(SegmentId, u64)> = self.allocator.allocator.segments().map(|s| (s.id, s.size)).collect();
        DeviceFigures::Reported(DeviceMemory::match_segments(raw, &live, self.instance))
    }
}
