//! The allocator's segments and blocks at a point of a step, rebuilt from the segments it held
//! when its event log began and the log itself: what the allocator map draws (allocated blocks,
//! the free gaps between them, fragmentation).

use serde::{Deserialize, Serialize};

use super::allocator::{Event, Segment, SegmentId};
use crate::plan::TensorId;

pub mod wire;

/// What an allocator event is for: a tensor, and the op that caused it — the op that first
/// touches the tensor for an allocation, the op that last reads it for a free (None: before the
/// step, or released outside its ops).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorTag {
    pub tensor: TensorId,
    pub op: Option<usize>,
}

/// One block of a segment: a tensor's, or free (cached, or never used).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockState {
    pub offset: u64,
    pub size: u64,
    pub tensor: Option<TensorId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentState {
    pub segment: SegmentId,
    pub size: u64,
    /// Allocated and free blocks, in address order, covering the segment.
    pub blocks: Vec<BlockState>,
}

impl SegmentState {
    /// A segment of the allocator as it is (its blocks, allocated ones with their tensors).
    pub fn of(segment: &Segment<TensorTag>) -> Self {
        let blocks = segment
            .blocks
            .values()
            .map(|b| BlockState { offset: b.offset, size: b.size, tensor: b.tag.map(|t| t.tensor) })
            .collect();
        Self { segment: segment.id, size: segment.size, blocks }
    }
    pub fn allocated_bytes(&self) -> u64 {
        self.blocks.iter().filter(|b| b.tensor.is_some()).map(|b| b.size).sum()
    }
    pub fn largest_free_block(&self) -> u64 {
        self.blocks.iter().filter(|b| b.tensor.is_none()).map(|b| b.size).max().unwrap_or(0)
    }
}

/// The segments while op `op` runs (after its outputs were allocated, before anything was freed
/// after it); `None`: before the first op. `before` is what the allocator held when `events`
/// began: a real step's log starts after the model state and the batch were placed, and a warm
/// step's after the first step left its segments cached, so the log alone would miss them.
pub fn segments_at(before: &[SegmentState], events: &[Event<TensorTag>], op: Option<usize>) -> Vec<SegmentState> {
    // (segment, size, allocated blocks as (offset, size, tensor))
    type Blocks = Vec<(u64, u64, TensorId)>;
    let mut segments: Vec<(SegmentId, u64, Blocks)> = before
        .iter()
        .map(|s| {
            let used = s.blocks.iter().filter_map(|b| Some((b.offset, b.size, b.tensor?))).collect();
            (s.segment, s.size, used)
        })
        .collect();
    let after = |tag_op: Option<usize>| match (tag_op, op) {
        (Some(t), Some(o)) => t > o,
        (Some(_), None) => true,
        (None, _) => false,
    };
    // Whether the allocation (or out-of-memory) these events lead up to is past the point.
    let for_alloc_after = |rest: &[Event<TensorTag>]| {
        let asked_by = rest.iter().find_map(|e| match e {
            Event::Alloc { tag, .. } | Event::Oom { tag, .. } => Some(tag.op),
            _ => None,
        });
        asked_by.is_some_and(after)
    };
    for (k, e) in events.iter().enumerate() {
        match e {
            Event::Alloc { tag, placement, .. } => {
                if after(tag.op) {
                    break;
                }
                if let Some(s) = segments.iter_mut().find(|s| s.0 == placement.segment) {
                    s.2.push((placement.offset, placement.size, tag.tensor));
                }
            }
            Event::Free { tag, placement } => {
                // Frees after op `op` (tagged with it or a later op) are past the point.
                if tag.op.is_some() && (op.is_none() || tag.op >= op) {
                    break;
                }
                if let Some(s) = segments.iter_mut().find(|s| s.0 == placement.segment) {
                    s.2.retain(|b| b.0 != placement.offset);
                }
            }
            // A segment reserved, or a cached one released, for a later op's allocation is past
            // the point too.
            Event::SegmentAlloc { .. }
            | Event::SegmentFree { .. }
            | Event::SegmentMap { .. }
            | Event::SegmentUnmap { .. }
                if for_alloc_after(&events[k..]) =>
            {
                break;
            }
            Event::SegmentAlloc { segment, size, .. } => segments.push((*segment, *size, Vec::new())),
            Event::SegmentFree { segment, .. } => segments.retain(|s| s.0 != *segment),
            Event::SegmentMap { segment, offset, size } => {
                if let Some(s) = segments.iter_mut().find(|s| s.0 == *segment) {
                    s.1 = offset + size;
                }
            }
            Event::SegmentUnmap { segment, offset, .. } => {
                if let Some(s) = segments.iter_mut().find(|s| s.0 == *segment) {
                    s.1 = *offset;
                }
            }
            Event::Oom { .. } => {}
        }
    }
    segments.sort_by_key(|s| s.0);
    segments
        .into_iter()
        .map(|(segment, size, mut used)| {
            used.sort_by_key(|b| b.0);
            let mut blocks = Vec::with_capacity(used.len() * 2 + 1);
            let mut at = 0;
            for (offset, len, tensor) in used {
                if offset > at {
                    blocks.push(BlockState { offset: at, size: offset - at, tensor: None });
                }
                blocks.push(BlockState { offset, size: len, tensor: Some(tensor) });
                at = offset + len;
            }
            if at < size {
                blocks.push(BlockState { offset: at, size: size - at, tensor: None });
            }
            SegmentState { segment, size, blocks }
        })
        .collect()
}

#[cfg(test)]
mod tests;
