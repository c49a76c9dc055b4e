//! What `max_split_size_mb` and `garbage_collection_threshold` add to the allocator: releasing
//! cached oversize segments one by one before everything cached, and the garbage collector.

use super::{CachingAllocator, Pool, SegmentId};

impl<T: Clone> CachingAllocator<T> {
    /// A cached whole segment that is neither expandable nor holds an allocation.
    fn whole_free(&self, id: SegmentId) -> Option<u64> {
        self.segments.get(&id).filter(|s| !s.expandable && s.is_free()).map(|s| s.size)
    }

    /// `release_available_cached_blocks`, with `max_split_size_mb` set: releases the smallest
    /// cached oversize segment that holds the request (at least `max_split_size_mb`); with none,
    /// the largest oversize ones, down, until as many bytes are released. Whether enough was.
    pub(super) fn release_available_cached_blocks(&mut self, pool: super::Key, size: u64) -> bool {
        let limit = self.config.split_limit();
        if limit == u64::MAX {
            return false;
        }
        let key = size.max(limit);
        let Some(set) = self.free.get(&pool) else { return false };
        let at_least =
            set.range((key, SegmentId(0), 0)..).map(|&(_, seg, _)| seg).find(|&s| self.whole_free(s).is_some());
        if let Some(seg) = at_least {
            self.release_segment(seg);
            return true;
        }
        let below: Vec<(u64, SegmentId)> = set
            .range(..(key, SegmentId(0), 0))
            .rev()
            .take_while(|b| b.0 >= limit)
            .map(|&(b, seg, _)| (b, seg))
            .collect();
        let mut released = 0u64;
        for (bytes, seg) in below {
            if released >= key {
                break;
            }
            if self.whole_free(seg).is_some() {
                self.release_segment(seg);
                released = released.saturating_add(bytes);
            }
        }
        released >= key
    }

    /// Whether the garbage collector runs: a threshold is set and the capacity is a budget.
    pub(super) fn gc_on(&self) -> bool {
        self.limited && self.config.garbage_collection_threshold.is_some()
    }

    /// `garbage_collect_cached_blocks`: once reserved memory passes the threshold's share of the
    /// budget, releases whole cached large segments at least as old as their average age (in
    /// searches since each became free), again with the rest, until the excess is released.
    pub(super) fn garbage_collect(&mut self) {
        let Some(t) = self.config.garbage_collection_threshold.filter(|_| self.gc_on()) else { return };
        let threshold = (t * self.capacity as f64) as u64;
        if self.stats.reserved_bytes <= threshold {
            return;
        }
        let target = self.stats.reserved_bytes - threshold;
        let mut candidates: Vec<(u64, SegmentId, u64)> = self
            .free
            .iter()
            .filter(|((pool, _), _)| *pool == Pool::Large)
            .flat_map(|(_, set)| set.iter())
            .filter(|&&(_, seg, _)| self.whole_free(seg).is_some())
            .map(|&(bytes, seg, _)| {
                (bytes, seg, self.gc_calls - self.free_since.get(&seg).copied().unwrap_or(self.gc_calls))
            })
            .collect();
        let mut reclaimed = 0u64;
        while reclaimed < target && !candidates.is_empty() {
            let age = candidates.iter().map(|c| c.2 as f64).sum::<f64>() / candidates.len() as f64;
            let (old, young): (Vec<_>, Vec<_>) = candidates.into_iter().partition(|c| c.2 as f64 >= age);
            if old.is_empty() {
                break;
            }
            for (bytes, seg, _) in old {
                reclaimed = reclaimed.saturating_add(bytes);
                self.release_segment(seg);
            }
            candidates = young;
        }
    }
}
