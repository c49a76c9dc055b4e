//! PyTorch memory snapshots, the format of `torch.cuda.memory._dump_snapshot()` and of
//! <https://pytorch.org/memory_viz>, in and out (PyTorch's `torch/cuda/_memory_viz.py` reads the
//! same dictionaries: `segments`, `device_traces`).
//!
//! - [`export`]: one step of oomlab's caching allocator as a snapshot: the final segments and
//!   blocks in address order, and a device trace that replays exactly into them.
//! - [`read`]: a snapshot from a file (pickle protocol 2–5 or JSON; legacy shapes accepted;
//!   unknown keys ignored) into a compact [`dump::Dump`], streamed ([`pickle`]); a corrupt or
//!   foreign file is an error with a message, never a panic. [`stacker`] interns its stacks on a
//!   second thread.
//! - The types below are the format's own (serde): what oomlab writes, and JSON read in.
//! - [`explain`]: what holds the memory at the peak or an OOM, by place and guessed category,
//!   and the diagnostic workflow on it.
//! - [`replay`]: what the views and `oomlab snapshot show` need: allocated and reserved bytes over
//!   the trace, the peaks, the final fragmentation, the OOM events, what was alive at the peak.
//!
//! Every integer is an `i64`, as the format wants (serde-pickle writes a `u64` ≥ 2³¹ as a 9-byte
//! long, which the web viewer cannot read).

pub mod dump;
pub mod explain;
pub mod export;
pub mod pickle;
pub mod read;
pub mod replay;
pub mod stacker;
pub mod transfer;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A stack, innermost frame first; shared, since a real dump repeats one stack on many entries.
pub type Frames = Arc<[Frame]>;

/// A snapshot: the allocator's segments at dump time, and each device's trace, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(default)]
    pub segments: Vec<Segment>,
    #[serde(default)]
    pub device_traces: Vec<Vec<TraceEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_settings: Option<AllocatorSettings>,
}

impl Snapshot {
    /// Whether oomlab wrote it (its frames are `oomlab/<category>`): then its numbers are oomlab's
    /// allocator's account of a step, not a PyTorch measurement.
    pub fn from_oomlab(&self) -> bool {
        let ours = |f: &[Frame]| f.first().is_some_and(|f| f.filename.starts_with("oomlab/"));
        self.segments.iter().flat_map(|g| &g.blocks).any(|b| ours(b.frames()))
            || self.device_traces.iter().flatten().any(|e| ours(&e.frames))
    }
}

/// `allocator_settings` as oomlab writes it (a reader keeps only these keys).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocatorSettings {
    #[serde(rename = "PYTORCH_CUDA_ALLOC_CONF", default)]
    pub alloc_conf: String,
    #[serde(default)]
    pub expandable_segments: bool,
}

/// One segment (a cudaMalloc): its blocks tile it exactly, in address order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Segment {
    pub device: i64,
    pub address: i64,
    pub total_size: i64,
    pub stream: i64,
    pub allocated_size: i64,
    pub active_size: i64,
    pub requested_size: i64,
    pub segment_type: String,
    pub segment_pool_id: Vec<i64>,
    pub is_expandable: bool,
    pub frames: Frames,
    pub blocks: Vec<Block>,
}

/// A block of a segment: `active_allocated` (a live tensor), `active_pending_free`, or
/// `inactive` (cached free space).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Block {
    pub address: i64,
    pub size: i64,
    /// The unrounded request; older snapshots lack it (then it is `size`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_size: Option<i64>,
    pub state: String,
    pub frames: Frames,
    /// Old PyTorch: the allocation's history instead of `frames` (the first entry counts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<History>,
}

impl Block {
    pub fn is_allocated(&self) -> bool {
        self.state.starts_with("active")
    }
    /// The request's bytes (the rounded size when the snapshot does not say).
    pub fn requested(&self) -> i64 {
        self.requested_size.or_else(|| self.history.first().map(|h| h.real_size)).unwrap_or(self.size)
    }
    /// The frames that name it (the legacy history's first, if that is what it has).
    pub fn frames(&self) -> &[Frame] {
        if self.frames.is_empty() { self.history.first().map_or(&[], |h| &*h.frames) } else { &self.frames }
    }
}

/// A legacy block history entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct History {
    pub addr: i64,
    pub real_size: i64,
    pub frames: Frames,
}

/// One event of a device trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceEntry {
    /// alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
    /// segment_unmap, snapshot or oom (others are ignored).
    pub action: String,
    /// Absent on `oom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<i64>,
    /// `oom` only: the bytes the driver reported free.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free: Option<i64>,
    /// The requested bytes (alloc and free), the segment's (segment_*), the request (oom).
    pub size: i64,
    pub stream: i64,
    pub time_us: i64,
    pub frames: Frames,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// A stack frame; oomlab writes the tensor, the op and the category into one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Frame {
    pub filename: String,
    pub line: i64,
    pub name: String,
}

impl Frame {
    /// `filename:line:name`, as PyTorch's viewer prints a frame.
    pub fn text(&self) -> String {
        format!("{}:{}:{}", self.filename, self.line, self.name)
    }
}

/// What went wrong reading or writing a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a PyTorch memory snapshot: {0}")]
    Foreign(String),
    #[error("a damaged snapshot: {0}")]
    Corrupt(String),
    #[error("could not write the snapshot: {0}")]
    Write(String),
}
