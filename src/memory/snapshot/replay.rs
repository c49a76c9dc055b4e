//! Replaying a snapshot's trace, as PyTorch's viewer does: backwards from the final segments to
//! the state before the first event, then forwards. Allocated bytes are the requests' (the
//! trace's sizes), reserved bytes the segments'.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Frame, Frames, Snapshot, TraceEntry};

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

fn first_frame(frames: &[Frame]) -> String {
    frames.first().map(Frame::text).unwrap_or_default()
}

fn grows(e: &TraceEntry) -> (i64, i64) {
    match e.action.as_str() {
        "alloc" => (e.size, 0),
        "free_completed" => (-e.size, 0),
        "segment_alloc" | "segment_map" => (0, e.size),
        "segment_free" | "segment_unmap" => (0, -e.size),
        _ => (0, 0),
    }
}

/// The devices a snapshot has events or segments for, in order.
pub fn devices(s: &Snapshot) -> Vec<i64> {
    let mut out: Vec<i64> = (0..s.device_traces.len())
        .filter(|&d| !s.device_traces[d].is_empty())
        .map(|d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect();
    out.extend(s.segments.iter().map(|g| g.device));
    out.sort_unstable();
    out.dedup();
    out
}

/// Replays device `device`'s trace from its final segments. `top` bounds the live list.
pub fn replay(s: &Snapshot, device: i64, top: usize) -> Replay {
    let trace: &[TraceEntry] =
        usize::try_from(device).ok().and_then(|d| s.device_traces.get(d)).map_or(&[], |t| t.as_slice());
    let segments = s.segments.iter().filter(|g| g.device == device);
    let mut final_state = Point::default();
    let (mut free, mut largest) = (0i64, 0i64);
    // The allocations alive at the end, by address: (request, frame).
    let mut live: BTreeMap<i64, (i64, Frames)> = BTreeMap::new();
    for g in segments {
        final_state.reserved = final_state.reserved.saturating_add(g.total_size);
        // The viewer recomputes block addresses from the segment's start.
        let mut at = g.address;
        for b in &g.blocks {
            if b.is_allocated() {
                final_state.allocated = final_state.allocated.saturating_add(b.requested());
                live.insert(at, (b.requested(), b.frames().into()));
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
        match (e.action.as_str(), e.addr) {
            ("alloc", Some(addr)) => {
                live.remove(&addr);
            }
            ("free_completed", Some(addr)) => {
                live.insert(addr, (e.size, e.frames.clone()));
            }
            _ => {}
        }
    }
    // Forwards: the totals after each event, the peaks and the OOMs…
    let mut now = initial;
    let mut timeline = Vec::with_capacity(trace.len());
    let (mut peak_allocated, mut peak_index, mut peak_reserved) = (initial.allocated, None, initial.reserved);
    let mut ooms = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        let (a, r) = grows(e);
        now.allocated = now.allocated.saturating_add(a);
        now.reserved = now.reserved.saturating_add(r);
        if e.action == "oom" {
            ooms.push(OomEvent {
                index: i,
                size: e.size,
                device_free: e.device_free.unwrap_or(0),
                frame: first_frame(&e.frames),
            });
        }
        if now.allocated > peak_allocated {
            peak_allocated = now.allocated;
            peak_index = Some(i);
        }
        peak_reserved = peak_reserved.max(now.reserved);
        timeline.push(now);
    }
    // …then the allocations alive at the peak, by replaying up to it once (copying the live set
    // at every new peak made a growing trace quadratic).
    for e in trace.iter().take(peak_index.map_or(0, |i| i + 1)) {
        match (e.action.as_str(), e.addr) {
            ("alloc", Some(addr)) => {
                live.insert(addr, (e.size, e.frames.clone()));
            }
            ("free_completed", Some(addr)) => {
                live.remove(&addr);
            }
            _ => {}
        }
    }
    let mut live_at_peak: Vec<Live> =
        live.into_iter().map(|(address, (size, frames))| Live { address, size, frame: first_frame(&frames) }).collect();
    live_at_peak.sort_by(|a, b| b.size.cmp(&a.size).then(a.address.cmp(&b.address)));
    live_at_peak.truncate(top);
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
    }
}

/// The web viewer's rules, checked: blocks tile their segment in address order; every
/// `free_requested` is followed at once by its `free_completed`; undoing the trace from the final
/// segments never meets an unknown block or segment, never leaves a block outside every segment,
/// and ends with nothing allocated and nothing reserved.
pub fn check_consistency(s: &Snapshot) -> Result<(), String> {
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
    for (d, trace) in s.device_traces.iter().enumerate() {
        let device = i64::try_from(d).unwrap_or(i64::MAX);
        for (i, e) in trace.iter().enumerate() {
            if e.action == "free_requested" {
                let next = trace.get(i + 1);
                if !next.is_some_and(|n| n.action == "free_completed" && n.addr == e.addr) {
                    return Err(format!("device {d}, event {i}: free_requested without its free_completed"));
                }
            }
        }
        let mut segments: BTreeMap<i64, i64> =
            s.segments.iter().filter(|g| g.device == device).map(|g| (g.address, g.total_size)).collect();
        let mut blocks: BTreeMap<i64, i64> = BTreeMap::new();
        for g in s.segments.iter().filter(|g| g.device == device) {
            for b in g.blocks.iter().filter(|b| b.is_allocated()) {
                blocks.insert(b.address, b.size);
            }
        }
        for (i, e) in trace.iter().enumerate().rev() {
            let addr = e.addr.unwrap_or(0);
            match e.action.as_str() {
                "alloc" if blocks.remove(&addr).is_none() => {
                    return Err(format!("device {d}, event {i}: undoing an alloc of an unknown block {addr:#x}"));
                }
                "free_completed" if blocks.insert(addr, e.size).is_some() => {
                    return Err(format!("device {d}, event {i}: a free of a block still allocated {addr:#x}"));
                }
                "segment_alloc" => {
                    if segments.remove(&addr).is_none() {
                        return Err(format!("device {d}, event {i}: undoing an unknown segment {addr:#x}"));
                    }
                    if blocks.range(addr..addr.saturating_add(e.size)).next().is_some() {
                        return Err(format!(
                            "device {d}, event {i}: a block left in segment {addr:#x} before it existed"
                        ));
                    }
                }
                "segment_free" => {
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
