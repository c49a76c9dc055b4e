//! What the driver layer itself reports about the memory a step holds: the third source of
//! numbers, next to the plan's prediction and the allocator's live accounting.
//!
//! On native backends wgpu hands out its memory allocator's report (`gpu-allocator` on Vulkan
//! and DX12): every live allocation, named by the buffer's label, and the driver memory blocks
//! they sit in. oomlab labels each segment buffer `seg.<id>@<executor>`, so the report can be
//! matched against the allocator segment by segment, and told apart from the buffers of another
//! executor on the same device (an earlier one, or a test running beside it). Nothing here knows
//! wgpu: the GPU backend converts its report into these plain types.

use serde::Serialize;

use super::SegmentId;

/// The label of a segment's buffer, for the executor numbered `executor`.
pub fn segment_label(segment: SegmentId, executor: u64) -> String {
    format!("seg.{}@{executor}", segment.0)
}

/// The segment and executor a buffer label names, if it is one of oomlab's segments.
pub fn parse_segment_label(label: &str) -> Option<(SegmentId, u64)> {
    let (segment, executor) = label.strip_prefix("seg.")?.split_once('@')?;
    Some((SegmentId(segment.parse().ok()?), executor.parse().ok()?))
}

/// One allocation of the driver's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceAllocation {
    /// The buffer's label ("" when the driver has none).
    pub name: String,
    pub size_bytes: u64,
    /// Offset inside its memory block.
    pub offset_bytes: u64,
}

/// One driver memory block and the allocations inside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceBlock {
    pub size_bytes: u64,
    pub allocations: Vec<DeviceAllocation>,
}

/// A raw report, as the driver layer gave it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DriverReport {
    pub blocks: Vec<DeviceBlock>,
    /// The driver's own totals: bytes of live allocations, and of its memory blocks.
    pub total_allocated_bytes: u64,
    pub total_reserved_bytes: u64,
    /// wgpu's internal counters where it keeps them: live buffers, and bytes of buffer memory.
    pub counters: Option<DeviceCounters>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceCounters {
    pub buffers: u64,
    pub buffer_memory_bytes: u64,
    pub memory_allocations: u64,
}

/// One of oomlab's segments as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceSegment {
    pub segment: SegmentId,
    /// What the allocator reserved (the buffer's requested size).
    pub requested_bytes: u64,
    /// What the driver holds for it: the requested size plus the driver's own rounding.
    pub reported_bytes: u64,
    /// The driver memory block it sits in (an index into [`DeviceMemory::blocks`]).
    pub block: usize,
}

impl DeviceSegment {
    /// The driver's rounding of this buffer (reported − requested).
    pub fn rounding_bytes(&self) -> i128 {
        self.reported_bytes as i128 - self.requested_bytes as i128
    }
}

/// The device's figures for a step, matched against the allocator's segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceMemory {
    /// oomlab's segment buffers found in the report, by segment.
    pub segments: Vec<DeviceSegment>,
    /// Segments the allocator holds that the report does not list (none, when all is well).
    pub missing: Vec<SegmentId>,
    /// Buffers labelled as this executor's segments that the allocator no longer holds (left
    /// over: none, when all is well).
    pub leftover: Vec<String>,
    /// Segment buffers of other executors on the same device, and their bytes.
    pub other_executor_buffers: Vec<String>,
    pub other_executor_bytes: u64,
    /// Everything else in the report: wgpu's internal buffers, oomlab's uniform and readback
    /// buffers, the UI's textures where the device is shared with it.
    pub other_allocations: u64,
    pub other_bytes: u64,
    /// The driver's memory blocks, and the allocations in each.
    pub blocks: Vec<DeviceBlock>,
    pub total_allocated_bytes: u64,
    pub total_reserved_bytes: u64,
    /// The most bytes of segment buffers the report showed at any point of the step (a report is
    /// taken after each segment the step creates, and at its end).
    pub peak_segment_bytes: u64,
    pub counters: Option<DeviceCounters>,
}

impl DeviceMemory {
    /// Matches a driver report against the live segments `(id, size)` of the allocator of
    /// executor `executor`.
    pub fn match_segments(report: DriverReport, live: &[(SegmentId, u64)], executor: u64) -> Self {
        let mut segments: Vec<DeviceSegment> = Vec::new();
        let mut leftover = Vec::new();
        let mut other_executor_buffers = Vec::new();
        let (mut other_allocations, mut other_bytes, mut other_executor_bytes) = (0, 0, 0);
        for (b, block) in report.blocks.iter().enumerate() {
            for a in &block.allocations {
                match parse_segment_label(&a.name) {
                    Some((id, owner)) if owner == executor => {
                        let seen = segments.iter().any(|d| d.segment == id);
                        match live.iter().find(|(s, _)| *s == id).filter(|_| !seen) {
                            Some(&(segment, requested_bytes)) => segments.push(DeviceSegment {
                                segment,
                                requested_bytes,
                                reported_bytes: a.size_bytes,
                                block: b,
                            }),
                            None => leftover.push(a.name.clone()),
                        }
                    }
                    Some(_) => {
                        other_executor_buffers.push(a.name.clone());
                        other_executor_bytes += a.size_bytes;
                    }
                    None => {
                        other_allocations += 1;
                        other_bytes += a.size_bytes;
                    }
                }
            }
        }
        segments.sort_by_key(|s| s.segment);
        let missing = live.iter().map(|&(s, _)| s).filter(|s| !segments.iter().any(|d| d.segment == *s)).collect();
        let segment_bytes = segments.iter().map(|s| s.reported_bytes).sum();
        Self {
            segments,
            missing,
            leftover,
            other_executor_buffers,
            other_executor_bytes,
            other_allocations,
            other_bytes,
            blocks: report.blocks,
            total_allocated_bytes: report.total_allocated_bytes,
            total_reserved_bytes: report.total_reserved_bytes,
            peak_segment_bytes: segment_bytes,
            counters: report.counters,
        }
    }

    /// Bytes the driver holds for oomlab's segments.
    pub fn segment_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.reported_bytes).sum()
    }

    /// Bytes the allocator reserved for the segments the report lists.
    pub fn requested_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.requested_bytes).sum()
    }

    /// The driver's rounding over all segments (reported − requested).
    pub fn rounding_bytes(&self) -> i128 {
        self.segments.iter().map(DeviceSegment::rounding_bytes).sum()
    }

    /// Memory blocks holding at least one of oomlab's segments, and their bytes.
    pub fn segment_blocks(&self) -> (usize, u64) {
        let mut used: Vec<usize> = self.segments.iter().map(|s| s.block).collect();
        used.sort_unstable();
        used.dedup();
        (used.len(), used.iter().filter_map(|&b| self.blocks.get(b)).map(|b| b.size_bytes).sum())
    }
}

/// Where the device figures of a step stand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DeviceFigures {
    /// The driver layer reported its allocations.
    Reported(DeviceMemory),
    /// No report: why (a browser's WebGPU exposes no memory figures; some native backends
    /// keep none; the CPU backend has no device).
    NotReported { reason: String },
}

impl DeviceFigures {
    pub fn reported(&self) -> Option<&DeviceMemory> {
        match self {
            DeviceFigures::Reported(d) => Some(d),
            DeviceFigures::NotReported { .. } => None,
        }
    }
}

/// What each source of a number means (the app, the CLI's text and its JSON say these).
pub const SOURCE_PREDICTED: &str = "predicted: the plan replayed through oomlab's caching allocator, nothing executed";
pub const SOURCE_ALLOCATOR: &str =
    "allocator (live): oomlab's caching allocator, driven op by op as the step executed, every segment a real buffer";
pub const SOURCE_DEVICE: &str = "device: the driver layer's own allocation report (wgpu's allocator report), matched \
to the allocator's segments by buffer label; it includes the driver's rounding of each buffer";

/// Why a backend has no device report.
pub const NOT_REPORTED_YET: &str = "no step has run yet";
pub const NOT_REPORTED_BROWSER: &str = "the browser reports none: WebGPU exposes no memory figures, so every byte \
here is accounted by oomlab's allocator as the step executes";
pub const NOT_REPORTED_BACKEND: &str = "not reported by this backend (its driver layer keeps no allocator report)";
pub const NOT_REPORTED_CPU: &str = "the CPU backend has no device: its segments are host buffers, as the allocator \
accounts them";

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(name: &str, size: u64) -> DeviceAllocation {
        DeviceAllocation { name: name.into(), size_bytes: size, offset_bytes: 0 }
    }

    #[test]
    fn segments_are_matched_by_label() {
        assert_eq!(parse_segment_label(&segment_label(SegmentId(7), 2)), Some((SegmentId(7), 2)));
        assert_eq!(parse_segment_label("step uniforms"), None);
        assert_eq!(parse_segment_label("seg.x@1"), None);
        let report = DriverReport {
            blocks: vec![
                DeviceBlock {
                    size_bytes: 64 << 20,
                    allocations: vec![
                        alloc("seg.0@5", (20 << 20) + 48),
                        alloc("loss readback", 64),
                        alloc("seg.0@4", 2 << 20),
                    ],
                },
                DeviceBlock { size_bytes: 32 << 20, allocations: vec![alloc("seg.3@5", 2 << 20)] },
            ],
            total_allocated_bytes: 0,
            total_reserved_bytes: 96 << 20,
            counters: None,
        };
        let d = DeviceMemory::match_segments(report, &[(SegmentId(0), 20 << 20), (SegmentId(1), 2 << 20)], 5);
        assert_eq!(d.segments.len(), 1);
        assert_eq!(d.segments[0].rounding_bytes(), 48);
        assert_eq!(d.missing, vec![SegmentId(1)]);
        assert_eq!(d.leftover, vec!["seg.3@5".to_string()]);
        assert_eq!((d.other_executor_buffers.len(), d.other_executor_bytes), (1, 2 << 20));
        assert_eq!((d.other_allocations, d.other_bytes), (1, 64));
        assert_eq!(d.segment_blocks(), (1, 64 << 20));
        assert_eq!(d.segment_bytes(), (20 << 20) + 48);
    }
}
