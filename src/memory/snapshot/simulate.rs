//! A real run's allocations and frees, fed in order through oomlab's own
//! [`CachingAllocator`]: proof that it follows PyTorch's rules on runs it never saw, and the
//! answer to "what would this run have reserved with other allocator settings?"
//! (`expandable_segments:True`, `max_split_size_mb`, `garbage_collection_threshold`) — the
//! question PyTorch's documentation leaves every user to try on a GPU.
//!
//! - It starts from the segments and blocks alive when the trace began: the final `segments`,
//!   with the trace undone backwards (an `alloc` removes its block, a `free_completed` puts it
//!   back, a `segment_alloc` removes its segment, a `segment_free` puts it back).
//! - Each `alloc` is a request on its stream (a private pool, as a CUDA graph's, is a stream of
//!   its own: its blocks serve only its requests); each `free_completed` frees what that
//!   address got.
//! - What the run did to its cache itself is done again as it happened: a run of
//!   `segment_free` (or `segment_unmap`) events that no request of the replay explains is the
//!   run's `torch.cuda.empty_cache()`, or PyTorch releasing every cached segment before it
//!   retries a failed `cudaMalloc` (an `oom` follows when the retry fails too): the replay
//!   releases its cached segments there.
//! - By default it follows the run's own `allocator_settings`.
//!
//! Then the real run and the replay side by side: the peak reserved, the segments reserved
//! during the trace, the largest free block at the peak of allocated memory.
//!
//! Where it cannot be exact: a block freed during the trace but allocated before it has only
//! its requested size (its block is taken as the request rounded to 512 B, which a large block
//! left unsplit exceeds by up to 1 MiB), ties between free blocks of one size go to the oldest
//! segment rather than the lowest device address, and `roundup_power2_divisions` is not
//! modelled (said, when the run set it).

use std::collections::BTreeMap;

use hashbrown::HashMap;
use serde::Serialize;

use super::dump::{Action, Dump};
use super::replay::{self, Replay};
use crate::memory::allocator::{CachingAllocator, MIN_BLOCK_SIZE, Placement, Pool, SMALL_BUFFER, round_size};
use crate::memory::step::TensorTag;
use crate::plan::allocator::AllocatorConfig;

/// The tag every replayed allocation carries.
const TAG: TensorTag = TensorTag { tensor: crate::plan::TensorId(0), op: None };

/// One side of the comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Side {
    pub peak_reserved_bytes: i64,
    /// Segments reserved (`cudaMalloc`) during the trace.
    pub segment_allocs: u64,
    /// Segments released during the trace.
    pub segment_frees: u64,
    /// The largest free block inside the segments at the peak of allocated memory.
    pub largest_free_at_peak_bytes: i64,
    /// Reserved at the peak of allocated memory.
    pub reserved_at_peak_bytes: i64,
}

/// The replay of one device's trace through oomlab's allocator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Simulation {
    pub device: i64,
    /// The options the replay followed, in PyTorch's syntax.
    pub alloc_conf: String,
    /// Whether they are the run's own (`allocator_settings`), not asked for.
    pub run_settings: bool,
    /// The run's own, as it wrote them (empty if the snapshot does not say).
    pub run_alloc_conf: String,
    pub real: Side,
    pub replayed: Side,
    /// Reserved bytes after each event: the replay's (the run's is [`Replay::timeline`]).
    #[serde(skip)]
    pub reserved: Vec<i64>,
    /// Times the run released its cache and the replay did the same.
    pub releases: u64,
    /// The run's `oom` events.
    pub real_ooms: u64,
    /// Requests the replay could not serve within `capacity_bytes` (with a capacity only).
    pub replayed_ooms: u64,
    /// The device memory the replay had (None: unlimited, the run's own OOMs aside).
    pub capacity_bytes: Option<u64>,
    /// Frees of an address the replay never allocated (a block it could not restore).
    pub unmatched_frees: u64,
    /// The run rounded requests by `roundup_power2_divisions`, which oomlab does not model.
    pub power2_rounding: bool,
}

/// Why a replay cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimulateError {
    /// `garbage_collection_threshold` is a share of the GPU's memory, which the snapshot does
    /// not say (no OOM event) and was not given.
    #[error(
        "garbage_collection_threshold is a share of the GPU's memory, and this snapshot does not say how much the GPU has: give it (--device-memory 80GiB)"
    )]
    NeedsCapacity,
    #[error("device {0} has no trace to replay")]
    NoTrace(i64),
}

/// A real segment: its size, stream, pool, and whether expandable or small.
#[derive(Clone, Copy, Debug)]
struct RealSegment {
    size: i64,
    stream: i64,
    pool: [i64; 2],
    expandable: bool,
    small: bool,
}

/// The segments and allocated blocks (address → block size, request) when the trace began.
fn initial_state(s: &Dump, device: i64) -> (BTreeMap<i64, RealSegment>, BTreeMap<i64, (i64, i64)>) {
    let mut segments = BTreeMap::new();
    let mut blocks = BTreeMap::new();
    for g in s.segments.iter().filter(|g| g.device == device) {
        let small = g.small.unwrap_or(!g.expandable && g.total_size == SMALL_BUFFER as i64);
        let seg = RealSegment { size: g.total_size, stream: g.stream, pool: g.pool, expandable: g.expandable, small };
        segments.insert(g.address, seg);
        let mut at = g.address;
        let end = g.address.saturating_add(g.total_size);
        for b in &g.blocks {
            if b.allocated {
                let addr = if (g.address..end).contains(&b.address) { b.address } else { at };
                blocks.insert(addr, (b.size, b.requested));
            }
            at = at.saturating_add(b.size);
        }
    }
    for e in replay::trace(s, device).iter().rev() {
        let Some(addr) = e.addr() else { continue };
        match e.action() {
            Action::Alloc => {
                blocks.remove(&addr);
            }
            Action::FreeCompleted => {
                let size = i64::try_from(round_size(u64::try_from(e.size).unwrap_or(0))).unwrap_or(i64::MAX);
                blocks.insert(addr, (size, e.size));
            }
            Action::SegmentAlloc => {
                segments.remove(&addr);
            }
            Action::SegmentFree => {
                let small = e.size == SMALL_BUFFER as i64;
                segments.insert(
                    addr,
                    RealSegment { size: e.size, stream: e.stream, pool: [0, 0], expandable: false, small },
                );
            }
            // Pages mapped at a segment's end; undone, the segment is that much shorter (gone
            // when nothing is left of it).
            Action::SegmentMap => {
                if let Some((&start, seg)) = segments.range_mut(..=addr).next_back()
                    && start.saturating_add(seg.size) >= addr.saturating_add(e.size)
                {
                    seg.size = addr - start;
                    if seg.size <= 0 {
                        segments.remove(&start);
                    }
                }
            }
            Action::SegmentUnmap => match segments.range_mut(..addr).next_back() {
                Some((&start, seg)) if seg.expandable && start.saturating_add(seg.size) == addr => {
                    seg.size = seg.size.saturating_add(e.size);
                }
                _ => {
                    let seg =
                        RealSegment { size: e.size, stream: e.stream, pool: [0, 0], expandable: true, small: false };
                    segments.insert(addr, seg);
                }
            },
            _ => {}
        }
    }
    (segments, blocks)
}

/// Replays device `device`'s trace through oomlab's allocator with `config` (None: the run's
/// own settings), on a device of `capacity` bytes (None: what an OOM event says, else
/// unlimited). `real` is the trace's replay ([`replay::replay`]).
pub fn simulate(
    s: &Dump,
    real: &Replay,
    config: Option<AllocatorConfig>,
    capacity: Option<u64>,
) -> Result<Simulation, SimulateError> {
    let device = real.device;
    let trace = replay::trace(s, device);
    if trace.is_empty() {
        return Err(SimulateError::NoTrace(device));
    }
    let run = s.allocator_settings.clone().unwrap_or_default();
    let run_settings = config.is_none();
    let config = config.unwrap_or_else(|| run.config());
    // The GPU's memory: given, or what the first OOM says (reserved before it + free then).
    let from_oom = real.ooms.first().map(|o| {
        let reserved =
            o.index.checked_sub(1).and_then(|i| real.timeline.get(i)).map_or(real.initial.reserved, |p| p.reserved);
        u64::try_from(reserved.saturating_add(o.device_free)).unwrap_or(0)
    });
    let capacity = capacity.or(from_oom);
    if config.garbage_collection_threshold.is_some() && capacity.is_none() {
        return Err(SimulateError::NeedsCapacity);
    }
    let (segments, blocks) = initial_state(s, device);
    let initial_reserved: u64 = segments.values().map(|g| u64::try_from(g.size).unwrap_or(0)).sum();
    let limit = capacity.map_or(crate::plan::MAX_BUDGET_BYTES, |c| c.max(initial_reserved));
    // Tagged as a step's tensors are (a tag it never reads): the web app then carries one
    // allocator's code, not a second copy of it for another tag type.
    let mut ours: CachingAllocator<TensorTag> = CachingAllocator::new(limit).with_config(config).without_events();
    // Streams and private pools as the replay's streams (0: the default stream and pool).
    // (A run has a few streams and pools: a list will do.)
    let mut keys: Vec<(i64, [i64; 2])> = Vec::new();
    let mut key = |stream: i64, pool: [i64; 2]| -> u64 {
        if stream == 0 && pool == [0, 0] {
            return 0;
        }
        let i = keys.iter().position(|&k| k == (stream, pool)).unwrap_or_else(|| {
            keys.push((stream, pool));
            keys.len() - 1
        });
        i as u64 + 1
    };
    // The private pools' address ranges, to send a request to its pool.
    let private: Vec<(i64, i64, [i64; 2])> = s
        .segments
        .iter()
        .filter(|g| g.device == device && g.is_private())
        .map(|g| (g.address, g.address.saturating_add(g.total_size), g.pool))
        .collect();
    let pool_of = |addr: i64| -> [i64; 2] {
        private.iter().find(|&&(a, b, _)| (a..b).contains(&addr)).map_or([0, 0], |&(_, _, pool)| pool)
    };
    let mut placed: HashMap<i64, Placement> = HashMap::new();
    let mut inside = blocks.into_iter().peekable();
    for (&address, g) in &segments {
        let end = address.saturating_add(g.size);
        let mut mine = Vec::new();
        let mut addrs = Vec::new();
        while let Some(&(a, (size, requested))) = inside.peek() {
            if a >= end {
                break;
            }
            inside.next();
            if a < address {
                continue;
            }
            let bytes = u64::try_from(size.max(MIN_BLOCK_SIZE as i64)).unwrap_or(0);
            mine.push((u64::try_from(a - address).unwrap_or(0), bytes, u64::try_from(requested).unwrap_or(0), TAG));
            addrs.push(a);
        }
        let pool = if g.small { Pool::Small } else { Pool::Large };
        let size = u64::try_from(g.size).unwrap_or(0);
        let (_, placements) = ours.restore(key(g.stream, g.pool), pool, size, g.expandable, mine);
        for (a, p) in addrs.into_iter().zip(placements) {
            if let Some(p) = p {
                placed.insert(a, p);
            }
        }
    }
    let start = ours.stats();
    let (mut releases, mut replayed_ooms, mut unmatched, mut real_ooms) = (0u64, 0u64, 0u64, 0u64);
    let mut reserved = Vec::with_capacity(trace.len());
    let peak_at = real.peak_index;
    let mut replayed_at_peak = (0i64, 0i64);
    let mut releasing = false;
    for (i, e) in trace.iter().enumerate() {
        let action = e.action();
        let release = matches!(action, Action::SegmentFree | Action::SegmentUnmap);
        if release && !releasing {
            ours.release_cached_segments();
            releases += 1;
        }
        releasing = release;
        match (action, e.addr()) {
            (Action::Alloc, Some(addr)) => {
                let k = key(e.stream, pool_of(addr));
                match ours.malloc_on(k, u64::try_from(e.size).unwrap_or(0), TAG) {
                    Ok(p) => {
                        if let Some(old) = placed.insert(addr, p) {
                            ours.free(old);
                        }
                    }
                    Err(_) => replayed_ooms += 1,
                }
            }
            (Action::FreeCompleted, Some(addr)) => match placed.remove(&addr) {
                Some(p) => {
                    ours.free(p);
                }
                None => unmatched += 1,
            },
            (Action::Oom, _) => real_ooms += 1,
            _ => {}
        }
        let st = ours.stats();
        reserved.push(i64::try_from(st.reserved_bytes).unwrap_or(i64::MAX));
        if Some(i) == peak_at {
            replayed_at_peak =
                (i64::try_from(ours.largest_free_block()).unwrap_or(0), i64::try_from(st.reserved_bytes).unwrap_or(0));
        }
    }
    if peak_at.is_none() {
        replayed_at_peak = (0, i64::try_from(start.reserved_bytes).unwrap_or(0));
    }
    let end = ours.stats();
    let count = |a: Action| trace.iter().filter(|e| e.action() == a).count() as u64;
    let (real_largest, real_reserved_at_peak) = real_free_at_peak(s, real);
    Ok(Simulation {
        device,
        alloc_conf: config.to_conf_string(),
        run_settings,
        run_alloc_conf: run.alloc_conf.clone(),
        real: Side {
            peak_reserved_bytes: real.peak_reserved,
            segment_allocs: count(Action::SegmentAlloc),
            segment_frees: count(Action::SegmentFree),
            largest_free_at_peak_bytes: real_largest,
            reserved_at_peak_bytes: real_reserved_at_peak,
        },
        replayed: Side {
            peak_reserved_bytes: i64::try_from(end.peak_reserved_bytes).unwrap_or(i64::MAX),
            segment_allocs: end.segment_allocs - start.segment_allocs,
            segment_frees: end.segment_releases - start.segment_releases,
            largest_free_at_peak_bytes: replayed_at_peak.0,
            reserved_at_peak_bytes: replayed_at_peak.1,
        },
        reserved,
        releases,
        real_ooms,
        replayed_ooms,
        capacity_bytes: capacity,
        unmatched_frees: unmatched,
        power2_rounding: run.rounds_power2(),
    })
}

/// The run's own largest free block at its peak of allocated memory, and its reserved bytes
/// then: the segments alive then, less the blocks alive (each its request rounded to 512 B).
fn real_free_at_peak(s: &Dump, real: &Replay) -> (i64, i64) {
    let device = real.device;
    let (mut segments, _) = initial_state(s, device);
    let trace = replay::trace(s, device);
    if let Some(peak) = real.peak_index {
        for e in trace.iter().take(peak + 1) {
            let Some(addr) = e.addr() else { continue };
            match e.action() {
                Action::SegmentAlloc => {
                    let seg =
                        RealSegment { size: e.size, stream: e.stream, pool: [0, 0], expandable: false, small: false };
                    segments.insert(addr, seg);
                }
                Action::SegmentFree => {
                    segments.remove(&addr);
                }
                Action::SegmentMap => match segments.range_mut(..addr).next_back() {
                    Some((&start, seg)) if start.saturating_add(seg.size) == addr => seg.size += e.size,
                    _ => {
                        let seg = RealSegment {
                            size: e.size,
                            stream: e.stream,
                            pool: [0, 0],
                            expandable: true,
                            small: false,
                        };
                        segments.insert(addr, seg);
                    }
                },
                Action::SegmentUnmap => {
                    if let Some((&start, seg)) = segments.range_mut(..=addr).next_back() {
                        seg.size = (addr - start).max(0);
                        if seg.size == 0 {
                            segments.remove(&start);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let alive: BTreeMap<i64, (i64, i64)> = real
        .lifetimes
        .iter()
        .filter(|l| l.alive_after(real.peak_index))
        .map(|l| (l.addr, (i64::try_from(round_size(u64::try_from(l.size).unwrap_or(0))).unwrap_or(i64::MAX), 0)))
        .collect();
    let (mut largest, mut reserved) = (0i64, 0i64);
    for (&start, g) in &segments {
        reserved = reserved.saturating_add(g.size);
        let end = start.saturating_add(g.size);
        let mut at = start;
        for (&a, &(size, _)) in alive.range(start..end) {
            largest = largest.max(a - at);
            at = at.max(a.saturating_add(size));
        }
        largest = largest.max(end - at);
    }
    (largest, reserved)
}
