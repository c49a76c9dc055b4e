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

pub mod compare;
pub mod dump;
pub mod explain;
pub mod export;
pub mod kind;
pub mod lifetime;
pub mod phase;
pub mod pickle;
pub mod place;
pub mod read;
pub mod replay;
pub mod simulate;
pub mod stacker;
pub mod transfer;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{Arg, Worded};

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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_annotations: Vec<Annotation>,
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

/// `allocator_settings`, as `THCPModule_memorySnapshot` writes it: the run's
/// `PYTORCH_CUDA_ALLOC_CONF` and what PyTorch made of it. A reader keeps every key (an unknown
/// one in `other`); a writer writes PyTorch's keys in PyTorch's order ([`AllocatorSettings::of`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocatorSettings {
    #[serde(rename = "PYTORCH_CUDA_ALLOC_CONF", default)]
    pub alloc_conf: String,
    /// Bytes; -1 when not set (PyTorch's `max_split_size` with no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_split_size: Option<i64>,
    /// 0.0 when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collection_threshold: Option<f64>,
    #[serde(default)]
    pub expandable_segments: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_num_register_threads: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_lock_on_cudamalloc: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_use_cuda_host_register: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_capture_record_stream_reuse: Option<bool>,
    /// Interval → divisions (`"1"`, `"2"`, … `"32768"`), 0 where none are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roundup_power2_divisions: Option<Divisions>,
    /// Keys a newer PyTorch writes that oomlab does not know, as text (never written back).
    #[serde(skip)]
    pub other: Vec<(String, String)>,
}

impl AllocatorSettings {
    /// What PyTorch writes for a run whose `PYTORCH_CUDA_ALLOC_CONF` sets these options
    /// (torch 2.7's `allocator_settings`, as real snapshots from H100 runs have it: the raw
    /// string, `max_split_size` -1 or bytes, `garbage_collection_threshold` 0.0 or the share,
    /// `expandable_segments`, the pinned-memory defaults, `roundup_power2_divisions` for the 16
    /// power-of-two intervals from 1 MiB, each 0 when unset).
    pub fn of(config: &crate::plan::allocator::AllocatorConfig) -> AllocatorSettings {
        let divisions = Divisions((0..16).map(|k| ((1u64 << k).to_string(), 0)).collect());
        AllocatorSettings {
            alloc_conf: config.to_conf_string(),
            max_split_size: Some(config.max_split_size.map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX))),
            garbage_collection_threshold: Some(config.garbage_collection_threshold.unwrap_or(0.0)),
            expandable_segments: config.expandable_segments,
            pinned_num_register_threads: Some(1),
            release_lock_on_cudamalloc: Some(false),
            pinned_use_cuda_host_register: Some(false),
            graph_capture_record_stream_reuse: Some(false),
            roundup_power2_divisions: Some(divisions),
            other: Vec::new(),
        }
    }

    /// The options oomlab's allocator follows, as the run had them: `max_split_size`,
    /// `garbage_collection_threshold` and `expandable_segments` (what the raw string says where
    /// the parsed keys are absent, as in older snapshots). `roundup_power2_divisions` is not
    /// modelled and is reported, not followed.
    pub fn config(&self) -> crate::plan::allocator::AllocatorConfig {
        let parsed = crate::plan::allocator::AllocatorConfig::parse(&self.alloc_conf).unwrap_or_default();
        crate::plan::allocator::AllocatorConfig {
            max_split_size: match self.max_split_size {
                Some(b) if b > 0 => u64::try_from(b).ok(),
                Some(_) => None,
                None => parsed.max_split_size,
            },
            garbage_collection_threshold: match self.garbage_collection_threshold {
                Some(t) if t > 0.0 && t < 1.0 => Some(t),
                Some(_) => None,
                None => parsed.garbage_collection_threshold,
            },
            expandable_segments: self.expandable_segments || parsed.expandable_segments,
        }
    }

    /// Whether any power-of-two rounding is set (oomlab's allocator does not round so).
    pub fn rounds_power2(&self) -> bool {
        self.roundup_power2_divisions.as_ref().is_some_and(|m| m.0.iter().any(|&(_, v)| v > 0))
            || self.alloc_conf.contains("roundup_power2_divisions")
    }
}

/// `roundup_power2_divisions`: a dict kept in the order written (PyTorch writes the intervals
/// in increasing order: "1", "2", "4", … "32768").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Divisions(pub Vec<(String, i64)>);

impl Serialize for Divisions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Divisions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Divisions;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a dict of intervals to divisions")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Divisions, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, i64>()? {
                    out.push((k, v));
                }
                Ok(Divisions(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// One `external_annotations` entry: a `record_function` range's start or end
/// (`Optimizer.step#AdamW.step`, a user's own `record_function("forward")`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Annotation {
    pub device: i64,
    /// `START` or `END`.
    pub stage: String,
    pub name: String,
    pub time_us: i64,
}

impl Annotation {
    pub fn is_start(&self) -> bool {
        self.stage.eq_ignore_ascii_case("start")
    }
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
    /// What the run attached to the event (`_record_memory_history`'s user metadata): a string
    /// or a dict, read as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_metadata: Option<serde_json::Value>,
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

/// What went wrong reading or writing a snapshot, worded by the catalogs (`snap-error-…`) in
/// the reader's language where the app shows it, in English through `Display` (the CLI's). The
/// payloads are the details the reader found in the file (or the system's own words), quoted as
/// they are. It crosses the browser's worker as its catalog message ([`Worded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    Foreign(String),
    Corrupt(String),
    Write(String),
    /// The file could not be read at all (the system's or the browser's words).
    Unreadable(String),
    /// A folder was opened that holds no snapshot.
    EmptyFolder,
    /// An error the browser's worker reported, as its catalog message.
    Reported(Worded),
}

impl SnapshotError {
    /// Its catalog message: the key and the detail.
    pub fn worded(&self) -> Worded {
        let (key, detail) = match self {
            SnapshotError::Foreign(d) => ("snap-error-foreign", d.as_str()),
            SnapshotError::Corrupt(d) => ("snap-error-corrupt", d.as_str()),
            SnapshotError::Write(d) => ("snap-error-write", d.as_str()),
            SnapshotError::Unreadable(d) => ("snap-error-unreadable", d.as_str()),
            SnapshotError::EmptyFolder => ("snap-error-empty-folder", ""),
            SnapshotError::Reported(w) => return w.clone(),
        };
        Worded { key: key.into(), args: vec![("detail".into(), Arg::Text(detail.into()))] }
    }

    /// The error in `t`'s language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        self.worded().text(t)
    }
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::i18n::with_english(|en| self.text(en)))
    }
}

impl std::error::Error for SnapshotError {}
