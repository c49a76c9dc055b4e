//! A caching allocator with the rules of PyTorch's CUDA caching allocator
//! (`c10/cuda/CUDACachingAllocator.cpp`), for one stream:
//!
//! - requests round up to multiples of 512 B (`kMinBlockSize`);
//! - requests ≤ 1 MiB (`kSmallSize`) use the small pool, whose segments are 2 MiB
//!   (`kSmallBuffer`); larger ones use the large pool, with 20 MiB segments (`kLargeBuffer`) for
//!   requests under 10 MiB (`kMinLargeAlloc`) and otherwise the request rounded up to 2 MiB
//!   (`kRoundLarge`);
//! - a request takes the best-fitting free block of its pool (smallest size, then lowest address);
//! - a block is split when the remainder is ≥ 512 B (small pool) or > 1 MiB (large pool);
//! - freed blocks merge with free neighbours and stay cached: reserved, not returned;
//! - when a new segment would exceed the capacity, every cached segment with no allocated block is
//!   released and the segment is tried again; if it still does not fit, the request fails with
//!   an out-of-memory error worded like PyTorch's;
//! - each stream has its own free blocks (PyTorch keys its pools by stream and size: a block
//!   made on one stream is never handed to a request on another), and a segment belongs to the
//!   stream that made it; [`CachingAllocator::malloc`] asks on the default stream,
//!   [`CachingAllocator::malloc_on`] on any (a private pool, as a CUDA graph's, is a stream of
//!   its own here: its blocks serve only its requests too);
//! - its options ([`AllocatorConfig`], PyTorch's `PYTORCH_CUDA_ALLOC_CONF`) follow PyTorch's
//!   code: `max_split_size_mb` (oversize blocks are never split, small requests never take
//!   them, and they are released one by one before everything cached is),
//!   `garbage_collection_threshold` (past that share of the budget, whole cached large
//!   segments are released oldest first before a new one is reserved) and
//!   `expandable_segments` (one segment per pool, grown in pages of 2 MiB or 20 MiB at its end;
//!   `expand.rs`). [`CachingAllocator::empty_cache`] is `torch.cuda.empty_cache()`.
//!
//! The allocator only does the bookkeeping; it reports the segments it creates and releases so
//! a backend can back each one with real memory (a wgpu buffer, or a host vector).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

mod check;
mod expand;
mod oom;
mod options;
mod restore;
pub use crate::plan::allocator::{AllocatorConfig, AllocatorConfigError};
pub use check::Violation;
pub use oom::OutOfMemory;

pub const MIN_BLOCK_SIZE: u64 = 512;
pub const SMALL_SIZE: u64 = 1 << 20;
pub const SMALL_BUFFER: u64 = 2 << 20;
pub const LARGE_BUFFER: u64 = 20 << 20;
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
pub const ROUND_LARGE: u64 = 2 << 20;

/// `round_size`: at least 512 B, a multiple of 512 B.
pub fn round_size(size: u64) -> u64 {
    size.max(1).div_ceil(MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE
}

/// `get_allocation_size`: the segment size a (rounded) request of `size` would create.
pub fn segment_size_for(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    Small,
    Large,
}

impl Pool {
    pub fn for_size(rounded: u64) -> Self {
        if rounded <= SMALL_SIZE { Pool::Small } else { Pool::Large }
    }

    /// `should_split`: whether a free block of `block` bytes serving `size` is split.
    pub fn should_split(self, block: u64, size: u64) -> bool {
        let remaining = block - size;
        match self {
            Pool::Small => remaining >= MIN_BLOCK_SIZE,
            Pool::Large => remaining > SMALL_SIZE,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct SegmentId(pub u64);

/// A stream (0: the default stream).
pub type Stream = u64;

/// Free blocks are kept per pool and stream.
pub(crate) type Key = (Pool, Stream);

/// Where an allocation lives: a segment and a byte offset inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Placement {
    pub segment: SegmentId,
    pub offset: u64,
    /// Bytes of the block (the rounded request, or more when the block was not split).
    pub size: u64,
}

/// One block of a segment.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Block<T> {
    pub offset: u64,
    pub size: u64,
    /// The caller's request in bytes; 0 when free.
    pub requested: u64,
    /// The caller's tag while allocated.
    pub tag: Option<T>,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Segment<T> {
    pub id: SegmentId,
    pub pool: Pool,
    /// The stream whose request made it (its blocks serve that stream's requests only).
    #[serde(default)]
    pub stream: Stream,
    /// Its bytes (for an expandable segment: the pages mapped so far).
    pub size: u64,
    /// An expandable segment: it grows and shrinks in pages at its end.
    #[serde(default)]
    pub expandable: bool,
    /// Blocks by offset; they tile the segment exactly.
    pub blocks: BTreeMap<u64, Block<T>>,
}

impl<T> Segment<T> {
    pub fn allocated_bytes(&self) -> u64 {
        self.blocks.values().filter(|b| b.tag.is_some()).map(|b| b.size).sum()
    }
    pub fn is_free(&self) -> bool {
        self.blocks.values().all(|b| b.tag.is_none())
    }
}

/// Counters in the spirit of `torch.cuda.memory_stats()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Stats {
    /// Bytes of allocated blocks (rounded sizes).
    pub allocated_bytes: u64,
    /// Bytes the callers asked for.
    pub requested_bytes: u64,
    /// Bytes of all segments.
    pub reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub segments: u64,
    pub active_blocks: u64,
    pub alloc_count: u64,
    pub free_count: u64,
    pub segment_allocs: u64,
    pub segment_releases: u64,
    pub oom_count: u64,
}

impl Stats {
    /// Free bytes inside reserved segments: what fragmentation and caching hold back.
    pub fn reserved_unallocated_bytes(&self) -> u64 {
        self.reserved_bytes - self.allocated_bytes
    }
}

/// What happened, in order; a timeline view replays these.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event<T> {
    SegmentAlloc {
        segment: SegmentId,
        pool: Pool,
        size: u64,
        /// An expandable segment (it may grow and shrink after).
        #[serde(default)]
        expandable: bool,
    },
    SegmentFree {
        segment: SegmentId,
        size: u64,
    },
    /// An expandable segment grew: pages mapped at `offset`, its old end.
    SegmentMap {
        segment: SegmentId,
        offset: u64,
        size: u64,
    },
    /// An expandable segment shrank: its pages from `offset` to its end unmapped.
    SegmentUnmap {
        segment: SegmentId,
        offset: u64,
        size: u64,
    },
    Alloc {
        tag: T,
        placement: Placement,
        requested: u64,
    },
    Free {
        tag: T,
        placement: Placement,
    },
    Oom {
        tag: T,
        requested: u64,
    },
}

/// The allocator. `T` tags each allocation (e.g. which tensor, category and op).
#[derive(Clone, Debug)]
pub struct CachingAllocator<T> {
    capacity: u64,
    segments: BTreeMap<SegmentId, Segment<T>>,
    /// Free blocks per pool and stream, ordered for best fit: (size, segment, offset).
    free: BTreeMap<Key, BTreeSet<(u64, SegmentId, u64)>>,
    next_segment: u64,
    stats: Stats,
    events: Vec<Event<T>>,
    record_events: bool,
    /// The segments, with their blocks, when `events` began (empty for a new allocator): the
    /// log alone cannot say what was reserved before it, so whoever replays it starts here.
    events_base: Vec<Segment<T>>,
    config: AllocatorConfig,
    /// Whether the capacity is a budget (the garbage collector's threshold is a share of it).
    limited: bool,
    /// Searches of the large pool for a free block, while the garbage collector is on: a
    /// cached block's age is how many there were since it became free (PyTorch's `gc_count`).
    gc_calls: u64,
    /// Each whole free segment, and the search count when it became free.
    free_since: BTreeMap<SegmentId, u64>,
    /// The expandable segment of each pool and stream, once it exists.
    expandable: BTreeMap<Key, SegmentId>,
}

impl<T: Clone> CachingAllocator<T> {
    /// An empty allocator over `capacity` bytes of (virtual) device memory, at most
    /// [`crate::plan::MAX_BUDGET_BYTES`] (4 EiB): with tensors of at most 2⁶⁰ bytes, no sum of
    /// reserved bytes can then pass u64.
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity: capacity.min(crate::plan::MAX_BUDGET_BYTES),
            segments: BTreeMap::new(),
            free: BTreeMap::from([((Pool::Small, 0), BTreeSet::new()), ((Pool::Large, 0), BTreeSet::new())]),
            next_segment: 0,
            stats: Stats::default(),
            events: Vec::new(),
            record_events: true,
            events_base: Vec::new(),
            config: AllocatorConfig::default(),
            limited: capacity < crate::plan::MAX_BUDGET_BYTES,
            gc_calls: 0,
            free_since: BTreeMap::new(),
            expandable: BTreeMap::new(),
        }
    }

    /// The same allocator with these options (set before its first request, as PyTorch reads
    /// them once).
    pub fn with_config(mut self, config: AllocatorConfig) -> Self {
        self.config = config;
        self
    }

    pub fn config(&self) -> AllocatorConfig {
        self.config
    }

    /// Stops recording events (sweeps need only the stats).
    pub fn without_events(mut self) -> Self {
        self.record_events = false;
        self
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// Starts the peaks afresh from what is allocated and reserved now (PyTorch's
    /// `torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peak_stats(&mut self) {
        self.stats.peak_allocated_bytes = self.stats.allocated_bytes;
        self.stats.peak_reserved_bytes = self.stats.reserved_bytes;
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }
    pub fn events(&self) -> &[Event<T>] {
        &self.events
    }
    /// Forgets the recorded events (a new step's timeline starts); the segments as they are now
    /// become [`Self::events_base`].
    pub fn clear_events(&mut self) {
        self.events.clear();
        if self.record_events {
            self.events_base = self.segments.values().cloned().collect();
        }
    }
    /// The segments and their blocks when [`Self::events`] began: replaying the events from
    /// these gives the allocator's state at any point of the log.
    pub fn events_base(&self) -> &[Segment<T>] {
        &self.events_base
    }
    pub fn segments(&self) -> impl Iterator<Item = &Segment<T>> {
        self.segments.values()
    }

    /// The largest free block in any segment.
    pub fn largest_free_block(&self) -> u64 {
        self.free.values().filter_map(|set| set.last().map(|&(size, _, _)| size)).max().unwrap_or(0)
    }

    fn push(&mut self, e: Event<T>) {
        if self.record_events {
            self.events.push(e);
        }
    }

    /// Allocates `bytes` for `tag`: PyTorch's `malloc`. A cached free block first; else, after
    /// the garbage collector (when on), a new segment (or an expandable segment's new pages);
    /// else, oversize cached blocks released (with `max_split_size_mb`) and again; else every
    /// cached segment released and again; else out of memory.
    pub fn malloc(&mut self, bytes: u64, tag: T) -> Result<Placement, OutOfMemory> {
        self.malloc_on(0, bytes, tag)
    }

    /// [`Self::malloc`] on `stream`: only that stream's cached blocks serve it.
    pub fn malloc_on(&mut self, stream: Stream, bytes: u64, tag: T) -> Result<Placement, OutOfMemory> {
        let size = round_size(bytes);
        let key = (Pool::for_size(size), stream);
        let found = self.get_free_block(key, size).or_else(|| {
            self.garbage_collect();
            self.alloc_block(key, size)
                .or_else(|| {
                    if self.release_available_cached_blocks(key, size) { self.alloc_block(key, size) } else { None }
                })
                .or_else(|| if self.release_cached_segments() > 0 { self.alloc_block(key, size) } else { None })
        });
        let Some((segment, offset)) = found else {
            let oom = self.oom(bytes, size);
            self.stats.oom_count += 1;
            self.push(Event::Oom { tag, requested: bytes });
            return Err(oom);
        };
        let placement = self.take_block(key, segment, offset, size, bytes, tag.clone());
        self.push(Event::Alloc { tag, placement, requested: bytes });
        Ok(placement)
    }

    fn oom(&self, requested: u64, size: u64) -> OutOfMemory {
        let cached_free = self.stats.reserved_bytes - self.stats.allocated_bytes;
        OutOfMemory {
            requested_bytes: requested,
            tried_bytes: segment_size_for(size),
            capacity_bytes: self.capacity,
            free_bytes: self.capacity.saturating_sub(self.stats.reserved_bytes),
            allocated_bytes: self.stats.allocated_bytes,
            reserved_bytes: self.stats.reserved_bytes,
            cached_free_bytes: cached_free,
            largest_free_block: self.largest_free_block(),
            expandable_segments: self.config.expandable_segments,
            device: 0,
        }
    }

    /// `get_free_block`: the best-fitting free block (smallest, then lowest address), which a
    /// request under `max_split_size_mb` may not take when it is that large, nor a request over
    /// it when it is 20 MiB or more larger than the request. With expandable segments, the free
    /// end of the pool's segment gives way to the next fitting block (PyTorch keeps that end
    /// for growth).
    fn get_free_block(&mut self, key: Key, size: u64) -> Option<(SegmentId, u64)> {
        if key.0 == Pool::Large && self.gc_on() {
            self.gc_calls += 1;
        }
        let mut fits = self.free.get(&key)?.range((size, SegmentId(0), 0)..);
        let mut best = *fits.next()?;
        if self.config.expandable_segments
            && self.is_expandable_end(best)
            && let Some(&next) = fits.next()
        {
            best = next;
        }
        let (block, segment, offset) = best;
        let limit = self.config.split_limit();
        if (size < limit && block >= limit) || (size >= limit && block >= size.saturating_add(LARGE_BUFFER)) {
            return None;
        }
        Some((segment, offset))
    }

    /// `should_split`: whether a free block of `block` bytes serving `size` is split — always
    /// where the remainder is at least 512 B in the small pool or with expandable segments;
    /// in the large pool where the remainder is over 1 MiB and the request is under
    /// `max_split_size_mb`.
    fn should_split(&self, pool: Pool, block: u64, size: u64) -> bool {
        if pool == Pool::Small || self.config.expandable_segments {
            block - size >= MIN_BLOCK_SIZE
        } else {
            size < self.config.split_limit() && pool.should_split(block, size)
        }
    }

    /// `alloc_block`: a new segment for the request (or, with expandable segments, the pool's
    /// segment grown to hold it); its block's place.
    fn alloc_block(&mut self, key: Key, size: u64) -> Option<(SegmentId, u64)> {
        if self.config.expandable_segments {
            return self.expand(key, size);
        }
        self.new_segment(key, segment_size_for(size)).map(|id| (id, 0))
    }

    /// Reserves a new segment if it fits the capacity; returns its id.
    fn new_segment(&mut self, (pool, stream): Key, size: u64) -> Option<SegmentId> {
        if self.stats.reserved_bytes.checked_add(size).is_none_or(|r| r > self.capacity) {
            return None;
        }
        let id = SegmentId(self.next_segment);
        self.next_segment += 1;
        let block = Block { offset: 0, size, requested: 0, tag: None };
        let expandable = self.config.expandable_segments;
        self.segments.insert(id, Segment { id, pool, stream, size, expandable, blocks: BTreeMap::from([(0, block)]) });
        self.free.entry((pool, stream)).or_default().insert((size, id, 0));
        if self.gc_on() {
            self.free_since.insert(id, self.gc_calls);
        }
        self.stats.reserved_bytes += size;
        self.stats.peak_reserved_bytes = self.stats.peak_reserved_bytes.max(self.stats.reserved_bytes);
        self.stats.segments += 1;
        self.stats.segment_allocs += 1;
        self.push(Event::SegmentAlloc { segment: id, pool, size, expandable });
        Some(id)
    }

    /// Releases one segment, which holds no allocated block.
    fn release_segment(&mut self, id: SegmentId) {
        let Some(seg) = self.segments.remove(&id) else { return };
        if let Some(set) = self.free.get_mut(&(seg.pool, seg.stream)) {
            for b in seg.blocks.values() {
                set.remove(&(b.size, id, b.offset));
            }
        }
        self.free_since.remove(&id);
        if self.expandable.get(&(seg.pool, seg.stream)) == Some(&id) {
            self.expandable.remove(&(seg.pool, seg.stream));
        }
        self.stats.reserved_bytes -= seg.size;
        self.stats.segments -= 1;
        self.stats.segment_releases += 1;
        self.push(Event::SegmentFree { segment: id, size: seg.size });
    }

    /// `release_cached_blocks`: frees every segment with no allocated block, and unmaps the
    /// free pages at the end of each expandable segment. Returns how many segments were
    /// released or shrunk.
    pub fn release_cached_segments(&mut self) -> usize {
        let free: Vec<SegmentId> =
            self.segments.values().filter(|s| s.is_free() && !s.expandable).map(|s| s.id).collect();
        for &id in &free {
            self.release_segment(id);
        }
        free.len() + self.unmap_free_ends()
    }

    /// `torch.cuda.empty_cache()`: gives back what [`Self::release_cached_segments`] can.
    /// Returns the bytes no longer reserved.
    pub fn empty_cache(&mut self) -> u64 {
        let before = self.stats.reserved_bytes;
        self.release_cached_segments();
        before - self.stats.reserved_bytes
    }

    fn take_block(
        &mut self,
        key: Key,
        segment: SegmentId,
        offset: u64,
        size: u64,
        requested: u64,
        tag: T,
    ) -> Placement {
        let block_size = self.segments.get(&segment).and_then(|s| s.blocks.get(&offset)).map_or(size, |b| b.size);
        let split = self.should_split(key.0, block_size, size);
        self.free_since.remove(&segment);
        let seg = self.segments.get_mut(&segment);
        let Some(seg) = seg else { return Placement { segment, offset, size } };
        let set = self.free.entry(key).or_default();
        set.remove(&(block_size, segment, offset));
        let mut taken = block_size;
        if split {
            let rest = Block { offset: offset + size, size: block_size - size, requested: 0, tag: None };
            set.insert((rest.size, segment, rest.offset));
            seg.blocks.insert(rest.offset, rest);
            taken = size;
        }
        seg.blocks.insert(offset, Block { offset, size: taken, requested, tag: Some(tag) });
        self.stats.allocated_bytes += taken;
        self.stats.requested_bytes += requested;
        self.stats.peak_allocated_bytes = self.stats.peak_allocated_bytes.max(self.stats.allocated_bytes);
        self.stats.active_blocks += 1;
        self.stats.alloc_count += 1;
        Placement { segment, offset, size: taken }
    }

    /// Frees an allocation; it merges with free neighbours and stays cached. Unknown or
    /// already-free placements are ignored (returns false).
    pub fn free(&mut self, placement: Placement) -> bool {
        self.free_as(placement, None)
    }

    /// [`Self::free`], recording the free under `tag` (e.g. the op that caused it) instead of
    /// the allocation's tag.
    pub fn free_as(&mut self, placement: Placement, tag: Option<T>) -> bool {
        let by = tag;
        // Only the garbage collector reads when a segment became free.
        let gc = self.gc_on();
        let Some(seg) = self.segments.get_mut(&placement.segment) else { return false };
        let key = (seg.pool, seg.stream);
        let Some(block) = seg.blocks.get_mut(&placement.offset) else { return false };
        let Some(tag) = block.tag.take() else { return false };
        let (mut offset, mut size) = (block.offset, block.size);
        let requested = std::mem::take(&mut block.requested);
        self.stats.allocated_bytes -= size;
        self.stats.requested_bytes -= requested;
        self.stats.active_blocks -= 1;
        self.stats.free_count += 1;
        let set = self.free.entry(key).or_default();
        // merge with the next block
        if let Some(next) = seg.blocks.get(&(offset + size)).filter(|b| b.tag.is_none()).map(|b| b.size) {
            set.remove(&(next, placement.segment, offset + size));
            seg.blocks.remove(&(offset + size));
            size += next;
        }
        // merge with the previous block
        if let Some((&prev_off, prev)) = seg.blocks.range(..offset).next_back()
            && prev.tag.is_none()
            && prev_off + prev.size == offset
        {
            let prev_size = prev.size;
            set.remove(&(prev_size, placement.segment, prev_off));
            seg.blocks.remove(&offset);
            offset = prev_off;
            size += prev_size;
        }
        seg.blocks.insert(offset, Block { offset, size, requested: 0, tag: None });
        set.insert((size, placement.segment, offset));
        if gc && offset == 0 && size == seg.size {
            self.free_since.insert(placement.segment, self.gc_calls);
        }
        self.push(Event::Free { tag: by.unwrap_or(tag), placement });
        true
    }
}
