//! A snapshot as oomlab keeps it once read: compact records, every string, frame and stack
//! stored once. A real dump has hundreds of thousands of events, each with its own Python stack
//! of a dozen or more frames, but only a few thousand distinct frames: an event here is 48 bytes
//! and a stack id, not a tree of owned strings (which took 19 times the file's size).
//!
//! The tables ([`Strings`], [`FrameTables`]) intern as the reader goes ([`super::pickle`] streams
//! a pickle straight into them); [`Dump::from_wire`] converts the serde types (JSON, oomlab's own exports).

use super::{AllocatorSettings, Annotation, Frame, Snapshot, TraceEntry};
use bytemuck::{Pod, Zeroable};

mod tables;
pub use tables::{FrameRef, FrameTables, Stacks, Strings};

/// At most this many frames of a stack are kept (the innermost): a deeper stack is cut. Real
/// stacks with C++ frames run to 200 (a Hugging Face model under accelerate and peft): the user's
/// own frame is the outermost Python one, so this keeps well past it.
pub const MAX_STACK: usize = 1024;

/// An event's action. Unknown actions (a newer PyTorch's) are kept as [`Action::Other`] and
/// change nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    /// A `record_function` annotation in the trace (newest PyTorch); it changes no memory.
    Annotate,
    Other,
}

impl Action {
    pub const ALL: [Action; 11] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Snapshot,
        Action::Oom,
        Action::Annotate,
        Action::Other,
    ];
    pub fn parse(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "snapshot" => Action::Snapshot,
            "oom" => Action::Oom,
            "annotate" => Action::Annotate,
            _ => Action::Other,
        }
    }
    /// The action as the format spells it (`other` for one oomlab does not know).
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Annotate => "annotate",
            Action::Other => "other",
        }
    }
    fn from_u8(b: u8) -> Action {
        Action::ALL.get(usize::from(b)).copied().unwrap_or(Action::Other)
    }
}

/// One trace event: 48 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Event {
    pub addr: i64,
    /// The requested bytes (alloc and free), the segment's (segment_*), the request (oom).
    pub size: i64,
    pub time_us: i64,
    pub stream: i64,
    /// `oom` only: the bytes the driver reported free.
    pub device_free: i64,
    pub stack: u32,
    action: u8,
    /// Bit 0: the event has an address.
    flags: u8,
    _pad: [u8; 2],
}

impl Event {
    pub fn new(action: Action, addr: Option<i64>, size: i64, stack: u32) -> Event {
        Event {
            addr: addr.unwrap_or(0),
            size,
            stack,
            action: action as u8,
            flags: u8::from(addr.is_some()),
            ..Event::default()
        }
    }
    pub fn action(&self) -> Action {
        Action::from_u8(self.action)
    }
    pub fn addr(&self) -> Option<i64> {
        (self.flags & 1 != 0).then_some(self.addr)
    }
}

/// A frame: its file and function (string ids) and line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
#[repr(C)]
pub struct FrameRec {
    pub line: i64,
    pub filename: u32,
    pub name: u32,
}

/// A segment at dump time, its blocks in address order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DumpSegment {
    pub device: i64,
    pub address: i64,
    pub total_size: i64,
    pub stream: i64,
    pub blocks: Vec<DumpBlock>,
    /// `segment_pool_id`: (0, 0) is the default pool; anything else a private pool (a CUDA
    /// graph's, a `MemPool`).
    pub pool: [i64; 2],
    /// `is_expandable`: an expandable segment, grown and shrunk by `segment_map`/`segment_unmap`.
    pub expandable: bool,
    /// `segment_type`: `Some(true)` small, `Some(false)` large, `None` when not written.
    pub small: Option<bool>,
}

impl DumpSegment {
    /// In a private pool (a CUDA graph's or a `MemPool`), not the default one.
    pub fn is_private(&self) -> bool {
        self.pool != [0, 0]
    }
}

/// Text the run attached to one event (`user_metadata`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Metadata {
    pub device: u32,
    /// The event's index in its device's trace.
    pub index: u32,
    pub text: String,
}

/// What a reader met and does not know: actions and keys by name, with their counts (a newer
/// PyTorch's additions; shown, never a crash).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unknowns {
    pub actions: std::collections::BTreeMap<String, u64>,
    /// `where.key`: `trace.pool_id`, `segment.x`, `block.y`, `snapshot.z`.
    pub keys: std::collections::BTreeMap<String, u64>,
}

impl Unknowns {
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.keys.is_empty()
    }
    pub fn action(&mut self, name: &str) {
        *self.actions.entry(name.to_string()).or_default() += 1;
    }
    pub fn key(&mut self, at: &str, key: &str) {
        *self.keys.entry(format!("{at}.{key}")).or_default() += 1;
    }
}

/// A block of a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DumpBlock {
    pub address: i64,
    pub size: i64,
    /// The unrounded request (the size when the snapshot does not say).
    pub requested: i64,
    /// `active_allocated` or `active_pending_free` (a live tensor), not cached free space.
    pub allocated: bool,
    pub stack: u32,
}

/// The tables while reading, with their lookups (dropped once the snapshot is read).
#[derive(Default)]
pub struct Tables {
    pub strings: Strings,
    pub frames: FrameTables,
}

impl Tables {
    fn wire_stack(&mut self, frames: &[Frame]) -> u32 {
        let recs: Vec<FrameRec> = frames
            .iter()
            .take(MAX_STACK)
            .map(|f| FrameRec {
                line: f.line,
                filename: self.strings.intern(&f.filename),
                name: self.strings.intern(&f.name),
            })
            .collect();
        self.frames.stack_of(&recs)
    }
}

/// `user_metadata` as text: a string as it is, a dict as `key: value` pairs.
pub fn metadata_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {s}"),
                v => format!("{k}: {v}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        v => v.to_string(),
    }
}

/// A snapshot as read: segments at dump time, each device's trace oldest first, and the tables
/// their stacks point into.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dump {
    pub segments: Vec<DumpSegment>,
    pub traces: Vec<Vec<Event>>,
    pub allocator_settings: Option<AllocatorSettings>,
    pub stacks: Stacks,
    /// `external_annotations`: `record_function` ranges, in the order written.
    pub annotations: Vec<Annotation>,
    /// Events' non-empty `user_metadata`, in trace order.
    pub metadata: Vec<Metadata>,
    pub unknown: Unknowns,
}

impl Dump {
    /// The serde types (a JSON file, oomlab's own export) as a dump.
    pub fn from_wire(s: &Snapshot) -> Dump {
        let mut t = Tables::default();
        let segments = s
            .segments
            .iter()
            .map(|g| DumpSegment {
                device: g.device,
                address: g.address,
                total_size: g.total_size,
                stream: g.stream,
                pool: [g.segment_pool_id.first().copied().unwrap_or(0), g.segment_pool_id.get(1).copied().unwrap_or(0)],
                expandable: g.is_expandable,
                small: match g.segment_type.as_str() {
                    "small" => Some(true),
                    "large" => Some(false),
                    _ => None,
                },
                blocks: g
                    .blocks
                    .iter()
                    .map(|b| DumpBlock {
                        address: b.address,
                        size: b.size,
                        requested: b.requested(),
                        allocated: b.is_allocated(),
                        stack: t.wire_stack(b.frames()),
                    })
                    .collect(),
            })
            .collect();
        let (mut metadata, mut unknown) = (Vec::new(), Unknowns::default());
        let mut traces = Vec::with_capacity(s.device_traces.len());
        for (d, tr) in s.device_traces.iter().enumerate() {
            let mut events = Vec::with_capacity(tr.len());
            for (i, e) in tr.iter().enumerate() {
                let action = Action::parse(&e.action);
                if action == Action::Other {
                    unknown.action(&e.action);
                }
                let mut ev = Event::new(action, e.addr, e.size, t.wire_stack(&e.frames));
                ev.time_us = e.time_us;
                ev.stream = e.stream;
                ev.device_free = e.device_free.unwrap_or(0);
                if let Some(text) = e.user_metadata.as_ref().map(metadata_text).filter(|m| !m.is_empty()) {
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    metadata.push(Metadata { device: u32::try_from(d).unwrap_or(u32::MAX), index, text });
                }
                events.push(ev);
            }
            traces.push(events);
        }
        let stacks = t.frames.into_stacks(t.strings);
        Dump {
            segments,
            traces,
            allocator_settings: s.allocator_settings.clone(),
            stacks,
            annotations: s.external_annotations.clone(),
            metadata,
            unknown,
        }
    }

    /// Back to the format's own types (what a dump keeps: a segment's type and pool, a block's
    /// history and an unknown action's name are not kept).
    pub fn to_wire(&self) -> Snapshot {
        let frames = |id: u32| -> super::Frames {
            self.stacks
                .frames(id)
                .map(|f| Frame { filename: f.filename.to_string(), line: f.line, name: f.name.to_string() })
                .collect::<Vec<_>>()
                .into()
        };
        let segments = self
            .segments
            .iter()
            .map(|g| super::Segment {
                device: g.device,
                address: g.address,
                total_size: g.total_size,
                stream: g.stream,
                segment_pool_id: g.pool.to_vec(),
                is_expandable: g.expandable,
                segment_type: match g.small {
                    Some(true) => "small",
                    Some(false) => "large",
                    None => "",
                }
                .into(),
                blocks: g
                    .blocks
                    .iter()
                    .map(|b| super::Block {
                        address: b.address,
                        size: b.size,
                        requested_size: Some(b.requested),
                        state: if b.allocated { "active_allocated" } else { "inactive" }.into(),
                        frames: frames(b.stack),
                        history: Vec::new(),
                    })
                    .collect(),
                ..super::Segment::default()
            })
            .collect();
        let device_traces = self
            .traces
            .iter()
            .map(|t| {
                t.iter()
                    .map(|e| TraceEntry {
                        action: e.action().name().into(),
                        addr: e.addr(),
                        device_free: (e.action() == Action::Oom).then_some(e.device_free),
                        size: e.size,
                        stream: e.stream,
                        time_us: e.time_us,
                        frames: frames(e.stack),
                        category: None,
                        user_metadata: None,
                    })
                    .collect()
            })
            .collect();
        Snapshot {
            segments,
            device_traces,
            allocator_settings: self.allocator_settings.clone(),
            external_annotations: self.annotations.clone(),
        }
    }

    /// Whether oomlab wrote it (its frames are `oomlab/<category>`): then its numbers are oomlab's
    /// allocator's account of a step, not a PyTorch measurement.
    pub fn from_oomlab(&self) -> bool {
        self.stacks.frames.iter().any(|f| self.stacks.string(f.filename).starts_with("oomlab/"))
    }

    /// The number of events over all devices.
    pub fn events(&self) -> usize {
        self.traces.iter().map(Vec::len).sum()
    }
}
