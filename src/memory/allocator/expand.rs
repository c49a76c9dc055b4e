//! Expandable segments (`expandable_segments:True`): each pool has one segment that grows at
//! its end in pages — 2 MiB in the small pool (`kSmallBuffer`), 20 MiB in the large one
//! (`kLargeBuffer`) — mapped as a request needs them, so that memory freed anywhere below the
//! end stays usable by requests of any size rather than being stranded in a segment that fits
//! nothing. PyTorch reserves the segment's address range up front and maps pages into it;
//! here the segment's size is the pages mapped.
//!
//! One simplification: PyTorch's `empty_cache` unmaps every whole free page, also between
//! allocated blocks; here only the free pages at the segment's end are unmapped, so reserved
//! memory after `empty_cache` can be higher than PyTorch's when free pages lie in the middle.

use super::{Block, CachingAllocator, Event, LARGE_BUFFER, Pool, SMALL_BUFFER, SegmentId};

/// The page an expandable segment of `pool` grows by.
pub fn page_size(pool: Pool) -> u64 {
    match pool {
        Pool::Small => SMALL_BUFFER,
        Pool::Large => LARGE_BUFFER,
    }
}

impl<T: Clone> CachingAllocator<T> {
    /// Whether a free block `(size, segment, offset)` is the free end of an expandable segment.
    pub(super) fn is_expandable_end(&self, (size, segment, offset): (u64, SegmentId, u64)) -> bool {
        self.segments.get(&segment).is_some_and(|s| s.expandable && offset + size == s.size)
    }

    /// Grows the pool's expandable segment (made on first use) by the pages that a free end of
    /// `size` bytes needs; the place of that free end. None when the pages do not fit the
    /// capacity.
    pub(super) fn expand(&mut self, key: super::Key, size: u64) -> Option<(SegmentId, u64)> {
        let page = page_size(key.0);
        let Some(&id) = self.expandable.get(&key) else {
            let id = self.new_segment(key, size.div_ceil(page).checked_mul(page)?)?;
            self.expandable.insert(key, id);
            return Some((id, 0));
        };
        let seg = self.segments.get(&id)?;
        let old_end = seg.size;
        let (end_offset, end_free) = match seg.blocks.last_key_value() {
            Some((&off, b)) if b.tag.is_none() => (off, b.size),
            _ => (old_end, 0),
        };
        let grow = size.saturating_sub(end_free).div_ceil(page).checked_mul(page)?;
        // The free end already holds it (a block `max_split_size_mb` kept the request from).
        if grow == 0 {
            return Some((id, end_offset));
        }
        if self.stats.reserved_bytes.checked_add(grow).is_none_or(|r| r > self.capacity) {
            return None;
        }
        let seg = self.segments.get_mut(&id)?;
        let set = self.free.entry(key).or_default();
        set.remove(&(end_free, id, end_offset));
        let block = Block { offset: end_offset, size: end_free + grow, requested: 0, tag: None };
        set.insert((block.size, id, end_offset));
        seg.blocks.insert(end_offset, block);
        seg.size += grow;
        if end_offset == 0 && self.gc_on() {
            self.free_since.insert(id, self.gc_calls);
        }
        self.stats.reserved_bytes += grow;
        self.stats.peak_reserved_bytes = self.stats.peak_reserved_bytes.max(self.stats.reserved_bytes);
        self.push(Event::SegmentMap { segment: id, offset: old_end, size: grow });
        Some((id, end_offset))
    }

    /// Unmaps the whole free pages at the end of every expandable segment (the segment goes
    /// when nothing is left mapped). Returns how many segments shrank or went.
    pub(super) fn unmap_free_ends(&mut self) -> usize {
        // (segment, its pool and stream, free end's offset and size, the bytes kept mapped)
        let ends: Vec<(SegmentId, super::Key, u64, u64, u64)> = self
            .segments
            .values()
            .filter(|s| s.expandable)
            .filter_map(|s| {
                let (&off, b) = s.blocks.last_key_value()?;
                let keep = off.div_ceil(page_size(s.pool)) * page_size(s.pool);
                (b.tag.is_none() && keep < s.size).then_some((s.id, (s.pool, s.stream), off, b.size, keep))
            })
            .collect();
        for &(id, key, off, block, keep) in &ends {
            if keep == 0 {
                self.release_segment(id);
                continue;
            }
            let Some(seg) = self.segments.get_mut(&id) else { continue };
            let set = self.free.entry(key).or_default();
            set.remove(&(block, id, off));
            seg.blocks.remove(&off);
            if keep > off {
                set.insert((keep - off, id, off));
                seg.blocks.insert(off, Block { offset: off, size: keep - off, requested: 0, tag: None });
            }
            let gone = seg.size - keep;
            seg.size = keep;
            self.stats.reserved_bytes -= gone;
            self.push(Event::SegmentUnmap { segment: id, offset: keep, size: gone });
        }
        ends.len()
    }
}
