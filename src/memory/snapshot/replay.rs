//! Replaying a snapshot's trace, as PyTorch's viewer does: backwards from the final segments to
//! the state before the first event, then forwards. Allocated bytes are the requests' (the
//! trace's sizes), reserved bytes the segments'.

use std::collections::BTreeMap;

use hashbrown::HashMap;

use serde::Serialize;

use super::dump::{Action, Dump, Event};

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
    /// Its innermost frame as the viewer prints it (`filename:line:name`), or "" without one.
    pub frame: String,
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
    pub frame: String,
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
    /// Every allocation's life over the trace (what is alive at any event).
    #[serde(skip)]
    pub lifetimes: Vec<Lifetime>,
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

/// One allocation's life over the trace: alive after event `i` (0-based) when
/// `from <= i + 1 < to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    pub addr: i64,
    pub size: i64,
    /// The alloc's index + 1 (0: alive before the first event).
    pub from: u32,
    /// The free's index + 1 (`u32::MAX`: alive at the dump).
    pub to: u32,
    pub stack: u32,
}

impl Lifetime {
    /// Whether it is alive after event `i` (`None`: before the first event).
    pub fn alive_after(&self, i: Option<usize>) -> bool {
        let at = i.map_or(0, |i| u32::try_from(i).unwrap_or(u32::MAX - 1).saturating_add(1));
        self.from <= at && at < self.to
    }
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
pub fn alive(s: &Dump, lifetimes: &[Lifetime], at: Option<usize>, top: usize) -> Vec<Live> {
    let mut out: Vec<&Lifetime> = lifetimes.iter().filter(|l| l.alive_after(at)).collect();
    out.sort_by(|a, b| b.size.cmp(&a.size).then(a.addr.cmp(&b.addr)));
    out.truncate(top);
    out.into_iter().map(|l| Live { address: l.addr, size: l.size, frame: s.stacks.first_text(l.stack) }).collect()
}

/// Replays device `device`'s trace from its final segments. `top` bounds the live list.
pub fn replay(s: &Dump, device: i64, top: usize) -> Replay {
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
        live.iter().map(|(&addr, &(size, stack))| Lifetime { addr, size, from: 0, to: u32::MAX, stack }).collect();
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
                lifetimes.push(Lifetime { addr, size: e.size, from: at, to: u32::MAX, stack: e.stack });
            }
            (Action::FreeCompleted, Some(addr)) => {
                if let Some(l) = open.remove(&addr) {
                    lifetimes[l].to = at;
                }
            }
            (Action::Oom, _) => ooms.push(OomEvent {
                index: i,
                size: e.size,
                device_free: e.device_free,
                frame: s.stacks.first_text(e.stack),
            }),
            _ => {}
        }
        if now.allocated > peak_allocated {
            peak_allocated = now.allocated;
            peak_index = Some(i);
        }
        peak_reserved = peak_reserved.max(now.reserved);
        timeline.push(now);
    }
    let live_at_peak = alive(s, &lifetimes, peak_index, top);
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
        lifetimes,
    }
}

/// The web viewer's rules, checked: blocks tile their segment in address order; every
/// `free_requested` is followed at once by its `free_completed`; undoing the trace from the final
/// segments never meets an unknown block or segment, never leaves a block outside every segment,
/// and ends with nothing allocated and nothing reserved.
pub fn check_consistency(s: &Dump) -> Result<(), String> {
    for g in &s.segments {
        let sum: i64 = g.blocks.iter().map(|b| b.size).sum();
        if sum != g.total_size {
            return Err(format!("segment {:#x}: blocks sum to {sum}, not {}", g.address, g.total_size));
        }
        let mut at = g.address;
        for b in &g.blocks {
            if b.address != at {
                return Err(format!("segment {:#x}: block at {:#x}, expected {at:#x}", g.address, b.address));
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
                    return Err(format!("device {d}, event {i}: free_requested without its free_completed"));
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
                    return Err(format!("device {d}, event {i}: undoing an alloc of an unknown block {addr:#x}"));
                }
                Action::FreeCompleted if blocks.insert(addr, e.size).is_some() => {
                    return Err(format!("device {d}, event {i}: a free of a block still allocated {addr:#x}"));
                }
                Action::SegmentAlloc => {
                    if segments.remove(&addr).is_none() {
                        return Err(format!("device {d}, event {i}: undoing an unknown segment {addr:#x}"));
                    }
                    if blocks.range(addr..addr.saturating_add(e.size)).next().is_some() {
                        return Err(format!(
                            "device {d}, event {i}: a block left in segment {addr:#x} before it existed"
                        ));
                    }
                }
                Action::SegmentFree => {
                    segments.insert(addr, e.size);
                }
                _ => {}
            }
        }
        if !blocks.is_empty() || !segments.is_empty() {
            return Err(format!(
                "device {d}: undoing the trace leaves {} blocks and {} segments (it must reach an empty allocator)",
                blocks.len(),
                segments.len()
            ));
        }
    }
    Ok(())
}
