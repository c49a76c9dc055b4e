//! One step of oomlab's caching allocator as a PyTorch memory snapshot.
//!
//! The allocator's event log maps onto PyTorch's trace one to one: a new segment →
//! `segment_alloc`; a tensor's allocation → `alloc` with its requested bytes; a free →
//! `free_requested` immediately followed by `free_completed`; a released segment →
//! `segment_free`; a failed request → `oom` with the bytes the device had free. Segments get
//! synthetic device addresses (from 0x7f00_0000_0000, 2 MiB-aligned, never reused), far below
//! 2⁵³ so that JavaScript reads them exactly. The final `segments` are the state the log leaves,
//! so replaying the trace backwards from them reaches an empty allocator
//! ([`super::replay::check_consistency`]).

use std::collections::BTreeMap;

use super::{AllocatorSettings, Block, Frame, Frames, Segment, Snapshot, SnapshotError, TraceEntry};
use crate::memory::allocator::{Event, Pool, SegmentId};
use crate::memory::step::{StepAllocator, StepOom, TensorTag};
use crate::plan::Plan;

/// Where the first segment goes (a typical CUDA device address).
pub const BASE_ADDRESS: i64 = 0x7f00_0000_0000;
/// A fixed start time (µs since the epoch, 2023-11-14), one µs per event: exports are
/// reproducible byte for byte.
const START_US: i64 = 1_700_000_000_000_000;
const SEGMENT_ALIGN: i64 = 2 << 20;

/// Strings the web viewer drops frames for (its filters for interpreter internals).
const VIEWER_FILTERS: [&str; 5] = ["_start", "PyEval_", "PyObject_", "PyFunction_", "unwind::unwind"];

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The frame naming a tensor: `oomlab/<category>:<op + 1>:<tensor> — <op label>`.
fn frame(plan: &Plan, tag: &TensorTag) -> Frame {
    let info = plan.tensor(tag.tensor);
    let op = tag.op.and_then(|i| plan.op_label(i)).unwrap_or_else(|| "before the step".into());
    let mut name = format!("{} — {op}", info.name);
    for f in VIEWER_FILTERS {
        name = name.replace(f, &f.replace('_', "-"));
    }
    Frame { filename: format!("oomlab/{}", info.category.name()), line: tag.op.map_or(0, |i| int(i as u64) + 1), name }
}

/// The snapshot of `events` (one step of `plan`'s allocator on a device of `capacity` bytes).
pub fn snapshot(plan: &Plan, events: &[Event<TensorTag>], capacity: u64) -> Snapshot {
    let mut next = BASE_ADDRESS;
    // Live segments: id → (address, size, pool); live blocks: address → (size, requested, tag).
    let mut segments: BTreeMap<SegmentId, (i64, i64, Pool, bool)> = BTreeMap::new();
    let mut blocks: BTreeMap<i64, (i64, i64, TensorTag)> = BTreeMap::new();
    let mut reserved: i64 = 0;
    let mut trace = Vec::with_capacity(events.len() + events.len() / 2);
    let mut time = START_US;
    let mut push = |trace: &mut Vec<TraceEntry>, mut e: TraceEntry| {
        e.time_us = time;
        time += 1;
        trace.push(e);
    };
    for e in events {
        match e {
            Event::SegmentAlloc { segment, pool, size, expandable } => {
                let size = int(*size);
                segments.insert(*segment, (next, size, *pool, *expandable));
                let entry = TraceEntry { action: "segment_alloc".into(), addr: Some(next), size, ..unknown() };
                push(&mut trace, entry);
                // An expandable segment's address range is reserved for all it may grow to, as
                // PyTorch reserves 1⅛ of the device's memory for it.
                let span = if *expandable { size.max(int(capacity).saturating_add(int(capacity) / 8)) } else { size };
                next = next.saturating_add((span.max(1) + SEGMENT_ALIGN - 1) / SEGMENT_ALIGN * SEGMENT_ALIGN);
                reserved += size;
            }
            Event::SegmentMap { segment, offset, size } | Event::SegmentUnmap { segment, offset, size } => {
                let map = matches!(e, Event::SegmentMap { .. });
                let Some(s) = segments.get_mut(segment) else { continue };
                s.1 = if map { int(*offset) + int(*size) } else { int(*offset) };
                let action = if map { "segment_map" } else { "segment_unmap" };
                let entry =
                    TraceEntry { action: action.into(), addr: Some(s.0 + int(*offset)), size: int(*size), ..unknown() };
                push(&mut trace, entry);
                reserved += if map { int(*size) } else { -int(*size) };
            }
            Event::SegmentFree { segment, size } => {
                let addr = segments.remove(segment).map_or(0, |s| s.0);
                let entry =
                    TraceEntry { action: "segment_free".into(), addr: Some(addr), size: int(*size), ..unknown() };
                push(&mut trace, entry);
                reserved -= int(*size);
            }
            Event::Alloc { tag, placement, requested } => {
                let addr = segments.get(&placement.segment).map_or(0, |s| s.0) + int(placement.offset);
                blocks.insert(addr, (int(placement.size), int(*requested), *tag));
                push(&mut trace, tensor_entry(plan, "alloc", addr, int(*requested), tag));
            }
            Event::Free { tag, placement } => {
                let addr = segments.get(&placement.segment).map_or(0, |s| s.0) + int(placement.offset);
                let requested = blocks.remove(&addr).map_or(int(placement.size), |b| b.1);
                push(&mut trace, tensor_entry(plan, "free_requested", addr, requested, tag));
                push(&mut trace, tensor_entry(plan, "free_completed", addr, requested, tag));
            }
            Event::Oom { tag, requested } => {
                let entry = TraceEntry {
                    action: "oom".into(),
                    addr: None,
                    device_free: Some(int(capacity).saturating_sub(reserved)),
                    size: int(*requested),
                    frames: Frames::from([frame(plan, tag)]),
                    category: Some(plan.tensor(tag.tensor).category.name().into()),
                    ..TraceEntry::default()
                };
                push(&mut trace, entry);
            }
        }
    }
    let segments = segments
        .values()
        .map(|&(address, size, pool, expandable)| {
            let mut out = Vec::new();
            let mut at = address;
            let (mut allocated, mut requested) = (0, 0);
            for (&addr, &(bsize, breq, tag)) in blocks.range(address..address + size) {
                if addr > at {
                    out.push(free_block(at, addr - at));
                }
                out.push(Block {
                    address: addr,
                    size: bsize,
                    requested_size: Some(breq),
                    state: "active_allocated".into(),
                    frames: Frames::from([frame(plan, &tag)]),
                    history: Vec::new(),
                });
                allocated += bsize;
                requested += breq;
                at = addr + bsize;
            }
            if at < address + size {
                out.push(free_block(at, address + size - at));
            }
            Segment {
                device: 0,
                address,
                total_size: size,
                stream: 0,
                allocated_size: allocated,
                active_size: allocated,
                requested_size: requested,
                segment_type: match pool {
                    Pool::Small => "small",
                    Pool::Large => "large",
                }
                .into(),
                segment_pool_id: vec![0, 0],
                is_expandable: expandable,
                frames: Frames::from([]),
                blocks: out,
            }
        })
        .collect();
    Snapshot {
        segments,
        device_traces: vec![trace],
        // The step's own allocator options, written as PyTorch writes them for that
        // PYTORCH_CUDA_ALLOC_CONF.
        allocator_settings: Some(AllocatorSettings::of(&plan.techniques.allocator)),
        external_annotations: Vec::new(),
    }
}

/// A segment event: no frames, category "unknown" (the web viewer's legend needs one entry of
/// that category once any entry has a category).
fn unknown() -> TraceEntry {
    TraceEntry { category: Some("unknown".into()), ..TraceEntry::default() }
}

fn tensor_entry(plan: &Plan, action: &str, addr: i64, size: i64, tag: &TensorTag) -> TraceEntry {
    TraceEntry {
        action: action.into(),
        addr: Some(addr),
        size,
        frames: Frames::from([frame(plan, tag)]),
        category: Some(plan.tensor(tag.tensor).category.name().into()),
        ..TraceEntry::default()
    }
}

fn free_block(address: i64, size: i64) -> Block {
    Block { address, size, requested_size: Some(0), state: "inactive".into(), ..Block::default() }
}

/// Runs `plan`'s step through the allocator as the backends do (the same driver), keeping the
/// event log up to the end of the last op — or up to an out-of-memory, which ends the log with
/// its `oom` event and is returned beside it.
pub fn record_step(plan: &Plan, capacity: u64) -> (Vec<Event<TensorTag>>, Option<Box<StepOom>>) {
    let mut sa = StepAllocator::new(plan, capacity, true);
    if let Err(oom) = sa.setup(plan) {
        return (sa.allocator.events().to_vec(), Some(oom));
    }
    for i in 0..plan.ops.len() {
        if let Err(oom) = sa.before_op(plan, i) {
            return (sa.allocator.events().to_vec(), Some(oom));
        }
        sa.after_op(i);
    }
    (sa.allocator.events().to_vec(), None)
}

/// The allocator's log of allocating the persistent tensors and the batch, as a backend does when
/// it is created: a backend's step log (which starts after this) prefixed with it is the whole
/// story from an empty device.
pub fn setup_events(plan: &Plan, capacity: u64) -> Result<Vec<Event<TensorTag>>, Box<StepOom>> {
    let mut sa = StepAllocator::new(plan, capacity, true);
    sa.setup(plan)?;
    Ok(sa.allocator.events().to_vec())
}

/// The snapshot as a pickle (protocol 3, the opcodes PyTorch's web viewer reads).
pub fn to_pickle(s: &Snapshot) -> Result<Vec<u8>, SnapshotError> {
    serde_pickle::to_vec(s, serde_pickle::SerOptions::new()).map_err(|e| SnapshotError::Write(e.to_string()))
}
