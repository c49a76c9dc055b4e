//! The allocator's segments and blocks at a point of a step, rebuilt from its own event log:
//! what the allocator map draws (allocated blocks, the free gaps between them, fragmentation).

use serde::Serialize;

use super::allocator::{Event, SegmentId};
use super::step::TensorTag;
use crate::plan::TensorId;

/// One block of a segment: a tensor's, or free (cached, or never used).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockState {
    pub offset: u64,
    pub size: u64,
    pub tensor: Option<TensorId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentState {
    pub segment: SegmentId,
    pub size: u64,
    /// Allocated and free blocks, in address order, covering the segment.
    pub blocks: Vec<BlockState>,
}

impl SegmentState {
    pub fn allocated_bytes(&self) -> u64 {
        self.blocks.iter().filter(|b| b.tensor.is_some()).map(|b| b.size).sum()
    }
    pub fn largest_free_block(&self) -> u64 {
        self.blocks.iter().filter(|b| b.tensor.is_none()).map(|b| b.size).max().unwrap_or(0)
    }
}

/// The segments while op `op` runs (after its outputs were allocated, before anything was freed
/// after it); `None`: before the first op.
pub fn segments_at(events: &[Event<TensorTag>], op: Option<usize>) -> Vec<SegmentState> {
    // (segment, size, allocated blocks as (offset, size, tensor))
    type Blocks = Vec<(u64, u64, TensorId)>;
    let mut segments: Vec<(SegmentId, u64, Blocks)> = Vec::new();
    let after = |tag_op: Option<usize>| match (tag_op, op) {
        (Some(t), Some(o)) => t > o,
        (Some(_), None) => true,
        (None, _) => false,
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
            Event::SegmentAlloc { segment, size, .. } => {
                // A segment reserved for a later op's allocation is past the point too.
                let next_alloc = events[k..].iter().find_map(|e| match e {
                    Event::Alloc { tag, .. } => Some(tag.op),
                    _ => None,
                });
                if next_alloc.is_some_and(after) {
                    break;
                }
                segments.push((*segment, *size, Vec::new()));
            }
            Event::SegmentFree { segment, .. } => segments.retain(|s| s.0 != *segment),
            Event::Oom { .. } => {}
        }
    }
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
mod tests {
    use super::*;
    use crate::memory::simulate;
    use crate::model::{ModelConfig, StepShape};
    use crate::plan::{OptimizerConfig, Plan};

    #[test]
    fn the_map_at_the_peak_agrees_with_the_timeline() {
        let plan = Plan::build(&ModelConfig::toy(65), StepShape { batch: 8, seq: 64 }, &OptimizerConfig::default())
            .expect("plan");
        let m = simulate(&plan, 1 << 30).expect("fits");
        let point = &m.timeline[m.peak_index];
        let segs = segments_at(&m.events, point.op);
        let allocated: u64 = segs.iter().map(SegmentState::allocated_bytes).sum();
        let reserved: u64 = segs.iter().map(|s| s.size).sum();
        assert_eq!(allocated, point.allocated_bytes);
        assert_eq!(reserved, point.reserved_bytes);
        for s in &segs {
            assert_eq!(s.blocks.iter().map(|b| b.size).sum::<u64>(), s.size, "blocks cover the segment");
        }
        // Before the first op: the persistent tensors and the batch.
        let before = segments_at(&m.events, None);
        assert_eq!(before.iter().map(SegmentState::allocated_bytes).sum::<u64>(), m.timeline[0].allocated_bytes);
        // Every op of the timeline.
        for p in &m.timeline {
            let segs = segments_at(&m.events, p.op);
            assert_eq!(segs.iter().map(SegmentState::allocated_bytes).sum::<u64>(), p.allocated_bytes, "{:?}", p.op);
        }
    }
}
