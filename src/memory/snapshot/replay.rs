//! Replaying a snapshot's trace, as PyTorch's viewer does: backwards from the final segments to
//! the state before the first event, then forwards. Allocated bytes are the requests' (the
//! trace's sizes), reserved bytes the segments'.

use std::collections::BTreeMap;
use std::sync::Arc;

use hashbrown::HashMap;

use serde::Serialize;

use super::dump::{Action, Dump, Event};
use super::kind::{Evidence, Guess};
pub use super::lifetime::Lifetime;
use super::phase::{self, Phase};
use super::place::{Place, Sites};

/// Allocated and reserved bytes after one event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Point {
    pub allocated: i64,
    pub reserved: i64,
}

/// An allocation alive at some moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Live {
    pub address: i64,
    pub size: i64,
    /// Where it was made, in English (`model.py:41 forward (aten::addmm)`).
    pub frame: String,
    pub place: Place,
    pub kind: Guess,
    pub evidence: Evidence,
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OomEvent {
    /// Its index in the device's trace.
    pub index: usize,
    /// The request's bytes.
    pub size: i64,
    /// What the driver reported free.
    pub device_free: i64,
    /// Where the request was made, in English.
    pub frame: String,
    pub place: Place,
}

/// One device's trace replayed, and its final state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replay {
    pub device: i64,
    /// The trace's events (of this device).
    pub events: usize,
    /// Before the first event: non-zero when recording began mid-run or the ring buffer
    /// dropped the oldest events.
    pub initial: Point,
    /// After each event, oldest first.
    pub timeline: Vec<Point>,
    pub peak_allocated: i64,
    /// The event after which the allocated bytes peaked (None: before the first).
    pub peak_index: Option<usize>,
    pub peak_reserved: i64,
    /// At dump time (the final segments).
    pub final_state: Point,
    /// Free bytes inside the final segments, and the largest free block.
    pub free_in_segments: i64,
    pub largest_free_block: i64,
    pub ooms: Vec<OomEvent>,
    /// The largest allocations alive at the peak, largest first.
    pub live_at_peak: Vec<Live>,
    /// The run's phases over the trace (its annotations, else its stacks).
    pub phases: Vec<Phase>,
    /// Every allocation's life over the trace (what is alive at any event).
    #[serde(skip)]
    pub lifetimes: Vec<Lifetime>,
    /// Every stack's place and signals.
    #[serde(skip)]
    pub sites: Arc<Sites>,
}

impl Replay {
    /// Whether the trace does not start from an empty allocator.
    pub fn truncated(&self) -> bool {
        self.initial != Point::default()
    }
    /// The share of the free bytes that the largest free block does not hold (0 when the free
    /// space is one block): how fragmented the cached memory is.
    pub fn fragmentation_percent(&self) -> f64 {
        fragmentation_percent(self.largest_free_block, self.free_in_segments)
    }
}

/// The share of `free` bytes that the largest free block (`largest`) does not hold, in percent.
pub fn fragmentation_percent(largest: i64, free: i64) -> f64 {
    if free <= 0 { 0.0 } else { 100.0 * (1.0 - largest as f64 / free as f64) }
}

fn grows(e: &Event) -> (i64, i64) {
    match e.action() {
        Action::Alloc => (e.size, 0),
        Action::FreeCompleted => (-e.size, 0),
        Action::SegmentAlloc | Action::SegmentMap => (0, e.size),
        Action::SegmentFree | Action::SegmentUnmap => (0, -e.size),
        _ => (0, 0),
    }
}

/// The devices a snapshot has events or segments for, in order.
pub fn devices(s: &Dump) -> Vec<i64> {
    let mut out: Vec<i64> = (0..s.traces.len())
        .filter(|&d| !s.traces[d].is_empty())
        .map(|d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect();
    out.extend(s.segments.iter().map(|g| g.device));
    out.sort_unstable();
    out.dedup();
    out
}

/// A device's trace.
pub fn trace(s: &Dump, device: i64) -> &[Event] {
    usize::try_from(device).ok().and_then(|d| s.traces.get(d)).map_or(&[], |t| t.as_slice())
}

/// The allocations alive after event `at` (`None`: before the first), largest first, at most
/// `top` of them (all with `usize::MAX`).
pub fn alive(sites: &Sites, lifetimes: &[Lifetime], at: Option<usize>, top: usize) -> Vec<Live> {
    let mut out: Vec<&Lifetime> = lifetimes.iter().filter(|l| l.alive_after(at)).collect();
    out.sort_by(|a, b| b.size.cmp(&a.size).then(a.addr.cmp(&b.addr)));
    out.truncate(top);
    out.into_iter()
        .map(|l| {
            let place = sites.place(l.stack).clone();
            Live { address: l.addr, size: l.size, frame: place.text(), place, kind: l.kind, evidence: l.evidence }
        })
        .collect()
}

/// Replays device `device`'s trace from its final segments. `top` bounds the live list.
pub fn replay(s: &Dump, device: i64, top: usize) -> Replay {
    replay_with(s, Arc::new(Sites::new(&s.stacks)), device, top)
}

/// Every device's replay (the stacks read once for all of them).
pub fn replay_all(s: &Dump, top: usize) -> Vec<Replay> {
    let sites = Arc::new(Sites::new(&s.stacks));
    devices(s).into_iter().map(|d| replay_with(s, sites.clone(), d, top)).collect()
}

/// [`replay`] with the stacks' sites already read.
pub fn replay_with(s: &Dump, sites: Arc<Sites>, device: i64, top: usize) -> Replay {
    let trace = trace(s, device);
    let mut final_state = Point::default();
    let (mut free, mut largest) = (0i64, 0i64);
    // The allocations alive at the end, by address: (request, stack).
    let mut live: BTreeMap<i64, (i64, u32)> = BTreeMap::new();
    for g in s.segments.iter().filter(|g| g.device == device) {
        final_state.reserved = final_state.reserved.saturating_add(g.total_size);
        // The viewer recomputes block addresses from the segment's start.
        let mut at = g.address;
        let end = g.address.saturating_add(g.total_size);
        for b in &g.blocks {
            if b.allocated {
                final_state.allocated = final_state.allocated.saturating_add(b.requested);
                // A block's own address when it lies in its segment (blocks that do not tile
                // their segment, as some producers write, would otherwise be misplaced).
                let addr = if (g.address..end).contains(&b.address) { b.address } else { at };
                live.insert(addr, (b.requested, b.stack));
            } else {
                free = free.saturating_add(b.size);
                largest = largest.max(b.size);
            }
            at = at.saturating_add(b.size);
        }
    }
    // Backwards to the state before the first event.
    let mut initial = final_state;
    for e in trace.iter().rev() {
        let (a, r) = grows(e);
        initial.allocated = initial.allocated.saturating_sub(a);
        initial.reserved = initial.reserved.saturating_sub(r);
        match (e.action(), e.addr()) {
            (Action::Alloc, Some(addr)) => {
                live.remove(&addr);
            }
            (Action::FreeCompleted, Some(addr)) => {
                live.insert(addr, (e.size, e.stack));
            }
            _ => {}
        }
    }
    // Forwards: the totals after each event, the peaks, the OOMs and each allocation's life.
    let mut lifetimes: Vec<Lifetime> =
        live.iter().map(|(&addr, &(size, stack))| Lifetime::new(addr, size, 0, stack)).collect();
    let mut open: HashMap<i64, usize> = live.keys().enumerate().map(|(i, &a)| (a, i)).collect();
    drop(live);
    let mut now = initial;
    let mut timeline = Vec::with_capacity(trace.len());
    let (mut peak_allocated, mut peak_index, mut peak_reserved) = (initial.allocated, None, initial.reserved);
    let mut ooms = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        let (a, r) = grows(e);
        now.allocated = now.allocated.saturating_add(a);
        now.reserved = now.reserved.saturating_add(r);
        let at = u32::try_from(i + 1).unwrap_or(u32::MAX - 1);
        match (e.action(), e.addr()) {
            (Action::Alloc, Some(addr)) => {
                if let Some(old) = open.insert(addr, lifetimes.len()) {
                    lifetimes[old].to = lifetimes[old].to.min(at);
                }
                lifetimes.push(Lifetime::new(addr, e.size, at, e.stack));
            }
            (Action::FreeCompleted, Some(addr)) => {
                if let Some(l) = open.remove(&addr) {
                    lifetimes[l].to = at;
                }
            }
            (Action::Oom, _) => {
                let place = sites.place(e.stack).clone();
                ooms.push(OomEvent { index: i, size: e.size, device_free: e.device_free, frame: place.text(), place })
            }
            _ => {}
        }
        if now.allocated > peak_allocated {
            peak_allocated = now.allocated;
            peak_index = Some(i);
        }
        peak_reserved = peak_reserved.max(now.reserved);
        timeline.push(now);
    }
    let phases = phase::phases(s, &sites, device, trace);
    super::lifetime::classify(&mut lifetimes, &phases, &sites);
    let live_at_peak = alive(&sites, &lifetimes, peak_index, top);
    Replay {
        device,
        events: trace.len(),
        initial,
        timeline,
        peak_allocated,
        peak_index,
        peak_reserved,
        final_state,
        free_in_segments: free,
        largest_free_block: largest,
        ooms,
        live_at_peak,
        phases: phases.spans,
        lifetimes,
        sites,
    }
}

/// The web viewer's rules, checked: blocks tile their segment in address order; every
/// `free_requested` is followed at once by its `free_completed`; undoing the trace from the final
/// segments never meets an unknown block or segment, never leaves a block outside every segment,
/// and ends with nothing allocated and nothing reserved.
/// A rule of the web viewer's that a snapshot breaks ([`check_consistency`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Inconsistency {
    #[error("segment {segment:#x}: blocks sum to {sum}, not {total}")]
    BlockSum { segment: i64, sum: i64, total: i64 },
    #[error("segment {segment:#x}: block at {at:#x}, expected {expected:#x}")]
    BlockOrder { segment: i64, at: i64, expected: i64 },
    #[error("device {device}, event {event}: free_requested without its free_completed")]
    UnfinishedFree { device: usize, event: usize },
    #[error("device {device}, event {event}: undoing an alloc of an unknown block {addr:#x}")]
    UnknownBlock { device: usize, event: usize, addr: i64 },
    #[error("device {device}, event {event}: a free of a block still allocated {addr:#x}")]
    FreedWhileAllocated { device: usize, event: usize, addr: i64 },
    #[error("device {device}, event {event}: undoing an unknown segment {addr:#x}")]
    UnknownSegment { device: usize, event: usize, addr: i64 },
    #[error("device {device}, event {event}: a block left in segment {addr:#x} before it existed")]
    BlockBeforeSegment { device: usize, event: usize, addr: i64 },
    #[error(
        "device {device}: undoing the trace leaves {blocks} blocks and {segments} segments (it must reach an empty allocator)"
    )]
    NotEmpty { device: usize, blocks: usize, segments: usize },
}

pub fn check_consistency(s: &Dump) -> Result<(), Inconsistency> {
    for g in &s.segments {
        let sum: i64 = g.blocks.iter().map(|b| b.size).sum();
        if sum != g.total_size {
            return Err(Inconsistency::BlockSum { segment: g.address, sum, total: g.total_size });
        }
        let mut at = g.address;
        for b in &g.blocks {
            if b.address != at {
                return Err(Inconsistency::BlockOrder { segment: g.address, at: b.address, expected: at });
            }
            at += b.size;
        }
    }
    for (d, trace) in s.traces.iter().enumerate() {
        let device = i64::try_from(d).unwrap_or(i64::MAX);
        for (i, e) in trace.iter().enumerate() {
            if e.action() == Action::FreeRequested {
                let next = trace.get(i + 1);
                if !next.is_some_and(|n| n.action() == Action::FreeCompleted && n.addr() == e.addr()) {
                    return Err(Inconsistency::UnfinishedFree { device: d, event: i });
                }
            }
        }
        let mut segments: BTreeMap<i64, i64> =
            s.segments.iter().filter(|g| g.device == device).map(|g| (g.address, g.total_size)).collect();
        let mut blocks: BTreeMap<i64, i64> = BTreeMap::new();
        for g in s.segments.iter().filter(|g| g.device == device) {
            for b in g.blocks.iter().filter(|b| b.allocated) {
                blocks.insert(b.address, b.size);
            }
        }
        for (i, e) in trace.iter().enumerate().rev() {
            let addr = e.addr().unwrap_or(0);
            match e.action() {
                Action::Alloc if blocks.remove(&addr).is_none() => {
                    return Err(Inconsistency::UnknownBlock { device: d, event: i, addr });
                }
                Action::FreeCompleted if blocks.insert(addr, e.size).is_some() => {
                    return Err(Inconsistency::FreedWhileAllocated { device: d, event: i, addr });
                }
                Action::SegmentAlloc => {
                    if segments.remove(&addr).is_none() {
                        return Err(Inconsistency::UnknownSegment { device: d, event: i, addr });
                    }
                    if blocks.range(addr..addr.saturating_add(e.size)).next().is_some() {
                        return Err(Inconsistency::BlockBeforeSegment { device: d, event: i, addr });
                    }
                }
                Action::SegmentFree => {
                    segments.insert(addr, e.size);
                }
                _ => {}
            }
        }
        if !blocks.is_empty() || !segments.is_empty() {
            return Err(Inconsistency::NotEmpty { device: d, blocks: blocks.len(), segments: segments.len() });
        }
    }
    Ok(())
}
