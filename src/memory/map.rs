//! The allocator's segments and blocks at a point of a step, rebuilt from the segments it held
//! when its event log began and the log itself: what the allocator map draws (allocated blocks,
//! the free gaps between them, fragmentation).

use serde::{Deserialize, Serialize};

use super::allocator::{Event, Segment, SegmentId};
use super::step::TensorTag;
use crate::plan::TensorId;

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
mod tests {
    use super::*;
    use crate::memory::simulate;
    use crate::model::{ModelConfig, StepShape};
    use crate::plan::{OptimizerConfig, Plan};

    /// Checks the map at every point of `m`'s timeline against the timeline's own totals.
    fn agrees_everywhere(m: &crate::memory::StepMemory, what: &str) {
        for p in &m.timeline {
            let segs = m.segments_at(p.op);
            let allocated: u64 = segs.iter().map(SegmentState::allocated_bytes).sum();
            let reserved: u64 = segs.iter().map(|s| s.size).sum();
            assert_eq!((allocated, reserved), (p.allocated_bytes, p.reserved_bytes), "{what}, op {:?}", p.op);
            for s in &segs {
                assert_eq!(s.blocks.iter().map(|b| b.size).sum::<u64>(), s.size, "{what}: blocks cover the segment");
            }
        }
    }

    /// A backend's log starts after the model state and the batch were placed (and a warm
    /// step's after the first step's segments were cached): the map still holds every segment.
    #[test]
    fn a_log_that_starts_mid_run_still_shows_every_segment() {
        use crate::memory::step::{StepAllocator, Trace};
        let model = ModelConfig { d_model: 256, ..ModelConfig::toy(58) };
        let plan = Plan::build(&model, StepShape { batch: 64, seq: 64 }, &OptimizerConfig::default()).expect("plan");
        let roomy = simulate(&plan, 1 << 30).expect("fits");
        // A budget tight enough that the step releases cached segments to make room.
        let tight = (1..128u64)
            .filter_map(|k| roomy.peak_reserved_bytes().checked_sub(k * (512 << 10)))
            .find(|&b| simulate(&plan, b).is_ok_and(|m| m.stats.segment_releases > 0))
            .expect("a budget that forces a release");
        for budget in [1 << 30, tight] {
            let mut sa = StepAllocator::new(&plan, budget, true);
            sa.setup(&plan).expect("the model state fits");
            for step in ["cold", "warm"] {
                sa.allocator.clear_events();
                sa.clear_log();
                let mut trace = Trace::detailed();
                trace.record(&sa, None);
                for i in 0..plan.ops.len() {
                    sa.before_op(&plan, i).expect("fits");
                    trace.record(&sa, Some(i));
                    sa.after_op(i);
                }
                let m = trace.finish(&sa);
                assert!(!m.segments_before.is_empty(), "the log began with segments reserved");
                agrees_everywhere(&m, &format!("{step} step at {budget} B"));
                sa.release_step();
            }
        }
        agrees_everywhere(&simulate(&plan, tight).expect("fits"), "a prediction at the tight budget");
    }

    #[test]
    fn the_map_at_the_peak_agrees_with_the_timeline() {
        let plan = Plan::build(&ModelConfig::toy(65), StepShape { batch: 8, seq: 64 }, &OptimizerConfig::default())
            .expect("plan");
        let m = simulate(&plan, 1 << 30).expect("fits");
        let point = &m.timeline[m.peak_index];
        let segs = m.segments_at(point.op);
        let allocated: u64 = segs.iter().map(SegmentState::allocated_bytes).sum();
        let reserved: u64 = segs.iter().map(|s| s.size).sum();
        assert_eq!(allocated, point.allocated_bytes);
        assert_eq!(reserved, point.reserved_bytes);
        for s in &segs {
            assert_eq!(s.blocks.iter().map(|b| b.size).sum::<u64>(), s.size, "blocks cover the segment");
        }
        // Before the first op: the persistent tensors and the batch.
        let before = m.segments_at(None);
        assert_eq!(before.iter().map(SegmentState::allocated_bytes).sum::<u64>(), m.timeline[0].allocated_bytes);
        // Every op of the timeline.
        for p in &m.timeline {
            let segs = m.segments_at(p.op);
            assert_eq!(segs.iter().map(SegmentState::allocated_bytes).sum::<u64>(), p.allocated_bytes, "{:?}", p.op);
        }
    }
}
