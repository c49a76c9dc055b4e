//! A segment restored as it already was (a replay of a run whose recording began mid-run).

use std::collections::BTreeMap;

use super::{Block, CachingAllocator, Placement, Pool, Segment, SegmentId, Stream};

impl<T: Clone> CachingAllocator<T> {
    /// A segment as it already was when the allocator's story begins (a replay of a run whose
    /// recording started mid-run): `size` bytes on `stream`'s `pool`, holding `blocks`
    /// (offset, size, requested, tag) in address order, the rest of it free. A block that
    /// overlaps the one before it, or runs past the segment, is cut to fit (`None` if nothing
    /// is left of it). Counted as reserved and allocated, not as a segment allocation, and no
    /// event is recorded.
    pub fn restore(
        &mut self,
        stream: Stream,
        pool: Pool,
        size: u64,
        expandable: bool,
        blocks: Vec<(u64, u64, u64, T)>,
    ) -> (SegmentId, Vec<Option<Placement>>) {
        let id = SegmentId(self.next_segment);
        self.next_segment += 1;
        let mut seg = Segment { id, pool, stream, size, expandable, blocks: BTreeMap::new() };
        let mut placed = Vec::with_capacity(blocks.len());
        let mut end = 0u64;
        let set = self.free.entry((pool, stream)).or_default();
        for (offset, bytes, requested, tag) in blocks {
            let start = offset.max(end);
            let stop = offset.saturating_add(bytes).min(size);
            if start >= stop || start != offset {
                placed.push(None);
                continue;
            }
            if start > end {
                seg.blocks.insert(end, Block { offset: end, size: start - end, requested: 0, tag: None });
                set.insert((start - end, id, end));
            }
            let taken = stop - start;
            seg.blocks
                .insert(start, Block { offset: start, size: taken, requested: requested.min(taken), tag: Some(tag) });
            self.stats.allocated_bytes += taken;
            self.stats.requested_bytes += requested.min(taken);
            self.stats.active_blocks += 1;
            placed.push(Some(Placement { segment: id, offset: start, size: taken }));
            end = stop;
        }
        if end < size {
            seg.blocks.insert(end, Block { offset: end, size: size - end, requested: 0, tag: None });
            set.insert((size - end, id, end));
        }
        if expandable {
            self.expandable.entry((pool, stream)).or_insert(id);
        }
        if self.gc_on() && seg.is_free() {
            self.free_since.insert(id, self.gc_calls);
        }
        self.segments.insert(id, seg);
        self.stats.reserved_bytes += size;
        self.stats.segments += 1;
        self.stats.peak_reserved_bytes = self.stats.peak_reserved_bytes.max(self.stats.reserved_bytes);
        self.stats.peak_allocated_bytes = self.stats.peak_allocated_bytes.max(self.stats.allocated_bytes);
        (id, placed)
    }
}
