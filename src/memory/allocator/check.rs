//! The allocator's invariants, checked by the tests after every kind of sequence.

use std::collections::{BTreeMap, BTreeSet};

use super::{CachingAllocator, Pool, Segment, SegmentId, Stats, expand};

/// An invariant the allocator's state breaks: a bug in the allocator, named for its tests.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("segment {segment:?}: gap or overlap at {offset} (expected {expected})")]
    GapOrOverlap { segment: SegmentId, offset: u64, expected: u64 },
    #[error("segment {segment:?}: bad block at {offset}")]
    BadBlock { segment: SegmentId, offset: u64 },
    #[error("segment {segment:?}: two adjacent free blocks at {offset}")]
    AdjacentFree { segment: SegmentId, offset: u64 },
    #[error("segment {segment:?}: free-set mismatch at {offset}")]
    FreeSetMismatch { segment: SegmentId, offset: u64 },
    #[error("segment {segment:?}: blocks cover {covered} of {size}")]
    Uncovered { segment: SegmentId, covered: u64, size: u64 },
    #[error("{entries} free-set entries for {blocks} free blocks")]
    FreeSetCount { entries: usize, blocks: usize },
    #[error("stats {stats:?} disagree with blocks (allocated {allocated}, reserved {reserved}, active {active})")]
    Stats { stats: Stats, allocated: u64, reserved: u64, active: u64 },
    #[error("requested ≤ allocated ≤ reserved ≤ capacity violated: {0:?}")]
    Order(Stats),
    #[error("{counted} segments counted for {held} held")]
    SegmentCount { counted: u64, held: usize },
    #[error("{count} expandable segments in the {pool:?} pool of stream {stream}")]
    ExpandableCount { count: usize, pool: Pool, stream: u64 },
    #[error("expandable segment {segment:?} of {size} B is not whole pages")]
    ExpandablePages { segment: SegmentId, size: u64 },
}

impl<T: Clone> CachingAllocator<T> {
    /// Checks every invariant; returns the first violation. Used by tests.
    pub fn check_invariants(&self) -> Result<(), Violation> {
        let mut allocated = 0;
        let mut reserved = 0;
        let mut active = 0;
        for seg in self.segments.values() {
            reserved += seg.size;
            let mut end = 0;
            let mut prev_free = false;
            let segment = seg.id;
            for (&offset, b) in &seg.blocks {
                if offset != end {
                    return Err(Violation::GapOrOverlap { segment, offset, expected: end });
                }
                if b.size == 0 || offset != b.offset {
                    return Err(Violation::BadBlock { segment, offset });
                }
                let free = b.tag.is_none();
                if free && prev_free {
                    return Err(Violation::AdjacentFree { segment, offset });
                }
                let in_free_set =
                    self.free.get(&(seg.pool, seg.stream)).is_some_and(|s| s.contains(&(b.size, seg.id, offset)));
                if free != in_free_set {
                    return Err(Violation::FreeSetMismatch { segment, offset });
                }
                if !free {
                    allocated += b.size;
                    active += 1;
                }
                prev_free = free;
                end = offset + b.size;
            }
            if end != seg.size {
                return Err(Violation::Uncovered { segment, covered: end, size: seg.size });
            }
        }
        let entries: usize = self.free.values().map(BTreeSet::len).sum();
        let blocks = self.segments.values().flat_map(|s| s.blocks.values()).filter(|b| b.tag.is_none()).count();
        if entries != blocks {
            return Err(Violation::FreeSetCount { entries, blocks });
        }
        let s = self.stats;
        if s.allocated_bytes != allocated || s.reserved_bytes != reserved || s.active_blocks != active {
            return Err(Violation::Stats { stats: s, allocated, reserved, active });
        }
        if !(s.requested_bytes <= s.allocated_bytes
            && s.allocated_bytes <= s.reserved_bytes
            && s.reserved_bytes <= self.capacity)
        {
            return Err(Violation::Order(s));
        }
        if s.segments != self.segments.len() as u64 {
            return Err(Violation::SegmentCount { counted: s.segments, held: self.segments.len() });
        }
        check_expandable(&self.segments)
    }
}

/// An expandable segment's own invariants: a whole number of pages, one per pool and stream.
fn check_expandable<T>(segments: &BTreeMap<SegmentId, Segment<T>>) -> Result<(), Violation> {
    let streams: BTreeSet<u64> = segments.values().map(|s| s.stream).collect();
    for (pool, stream) in [Pool::Small, Pool::Large].into_iter().flat_map(|p| streams.iter().map(move |&s| (p, s))) {
        let mine: Vec<&Segment<T>> =
            segments.values().filter(|s| s.expandable && s.pool == pool && s.stream == stream).collect();
        if mine.len() > 1 {
            return Err(Violation::ExpandableCount { count: mine.len(), pool, stream });
        }
        if let Some(s) = mine.iter().find(|s| !s.size.is_multiple_of(expand::page_size(pool))) {
            return Err(Violation::ExpandablePages { segment: s.id, size: s.size });
        }
    }
    Ok(())
}
