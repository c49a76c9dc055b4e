//! The allocator's invariants, checked by the tests after every kind of sequence.

use std::collections::BTreeSet;

use super::{CachingAllocator, expand};

impl<T: Clone> CachingAllocator<T> {
    /// Checks every invariant; returns the first violation. Used by tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut allocated = 0;
        let mut reserved = 0;
        let mut active = 0;
        for seg in self.segments.values() {
            reserved += seg.size;
            let mut end = 0;
            let mut prev_free = false;
            for (&off, b) in &seg.blocks {
                if off != end {
                    return Err(format!("segment {:?}: gap or overlap at {off} (expected {end})", seg.id));
                }
                if b.size == 0 || off != b.offset {
                    return Err(format!("segment {:?}: bad block at {off}", seg.id));
                }
                let free = b.tag.is_none();
                if free && prev_free {
                    return Err(format!("segment {:?}: two adjacent free blocks at {off}", seg.id));
                }
                let in_free_set =
                    self.free.get(&(seg.pool, seg.stream)).is_some_and(|s| s.contains(&(b.size, seg.id, off)));
                if free != in_free_set {
                    return Err(format!("segment {:?}: free-set mismatch at {off}", seg.id));
                }
                if !free {
                    allocated += b.size;
                    active += 1;
                }
                prev_free = free;
                end = off + b.size;
            }
            if end != seg.size {
                return Err(format!("segment {:?}: blocks cover {end} of {}", seg.id, seg.size));
            }
        }
        let free_entries: usize = self.free.values().map(BTreeSet::len).sum();
        let free_blocks = self.segments.values().flat_map(|s| s.blocks.values()).filter(|b| b.tag.is_none()).count();
        if free_entries != free_blocks {
            return Err(format!("{free_entries} free-set entries for {free_blocks} free blocks"));
        }
        let s = self.stats;
        if s.allocated_bytes != allocated || s.reserved_bytes != reserved || s.active_blocks != active {
            return Err(format!(
                "stats {s:?} disagree with blocks (allocated {allocated}, reserved {reserved}, active {active})"
            ));
        }
        if !(s.requested_bytes <= s.allocated_bytes
            && s.allocated_bytes <= s.reserved_bytes
            && s.reserved_bytes <= self.capacity)
        {
            return Err(format!("requested ≤ allocated ≤ reserved ≤ capacity violated: {s:?}"));
        }
        if s.segments != self.segments.len() as u64 {
            return Err("segment count".into());
        }
        expand::check_expandable(&self.segments)?;
        Ok(())
    }
}
