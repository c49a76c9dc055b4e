//! Reading a snapshot: a pickle (protocols 2–5, as `_dump_snapshot` writes on any Python) or the
//! JSON the newest web viewer also takes. Unknown keys are ignored; the legacy shapes are read
//! (a top-level list of segments, no `device_traces`, blocks with `history`, no
//! `requested_size`). Anything else is a [`SnapshotError`] that says what the file is not.
//! Pickles are read by [`pickle::parse`], which keeps Python's shared values shared.

use std::collections::HashMap;

use super::pickle::{self, Py};
use super::{AllocatorSettings, Block, Frame, Frames, History, Segment, Snapshot, SnapshotError, TraceEntry};

/// The first bytes of a pickle with a protocol header (`PROTO n`).
const PICKLE: u8 = 0x80;

/// At most this many frames are kept per block and event (the innermost: the allocation site
/// and its callers); a deep Python stack repeated on every entry would otherwise dominate memory.
pub const MAX_FRAMES: usize = 16;

/// Reads a snapshot from a file's bytes.
pub fn from_bytes(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    let snapshot = match first {
        None => return Err(SnapshotError::Foreign("the file is empty".into())),
        Some(PICKLE) => Convert::default().snapshot(&pickle::parse(bytes)?)?,
        Some(b'{') => serde_json::from_slice(bytes).map_err(|e| SnapshotError::Corrupt(e.to_string()))?,
        Some(b'[') => Snapshot {
            segments: serde_json::from_slice(bytes).map_err(|e| SnapshotError::Corrupt(e.to_string()))?,
            ..Snapshot::default()
        },
        Some(_) => {
            return Err(SnapshotError::Foreign(
                "neither a pickle nor JSON (a snapshot is what torch.cuda.memory._dump_snapshot() writes)".into(),
            ));
        }
    };
    if snapshot.segments.is_empty() && snapshot.device_traces.iter().all(Vec::is_empty) {
        return Err(SnapshotError::Foreign("it has no segments and no device trace".into()));
    }
    Ok(snapshot)
}

/// Python values to the snapshot's types, leniently: a missing key is its default, an unknown
/// key is ignored; a shared frame list is converted once.
#[derive(Default)]
struct Convert {
    frames: HashMap<usize, Frames>,
}

fn num(p: &Py, key: &str) -> Result<i64, SnapshotError> {
    match p.get(key) {
        None | Some(Py::None) => Ok(0),
        Some(Py::Huge) => Err(SnapshotError::Corrupt(format!("{key} is an integer beyond 64 bits"))),
        Some(v) => v.int().ok_or_else(|| SnapshotError::Foreign(format!("{key} is not a number"))),
    }
}

fn opt_num(p: &Py, key: &str) -> Result<Option<i64>, SnapshotError> {
    match p.get(key) {
        None | Some(Py::None) => Ok(None),
        Some(_) => num(p, key).map(Some),
    }
}

fn text(p: &Py, key: &str) -> String {
    p.get(key).and_then(|v| v.str()).map(|s| s.to_string()).unwrap_or_default()
}

fn list(p: &Py, key: &str) -> Result<Vec<Py>, SnapshotError> {
    match p.get(key) {
        None | Some(Py::None) => Ok(Vec::new()),
        Some(v) => v.items().ok_or_else(|| SnapshotError::Foreign(format!("{key} is not a list"))),
    }
}

impl Convert {
    fn snapshot(&mut self, root: &Py) -> Result<Snapshot, SnapshotError> {
        match root {
            Py::Dict(_) => {
                let segments = list(root, "segments")?.iter().map(|g| self.segment(g)).collect::<Result<_, _>>()?;
                let mut device_traces = Vec::new();
                for trace in list(root, "device_traces")? {
                    let entries =
                        trace.items().ok_or_else(|| SnapshotError::Foreign("a device trace is not a list".into()))?;
                    device_traces.push(entries.iter().map(|e| self.entry(e)).collect::<Result<_, _>>()?);
                }
                let allocator_settings =
                    root.get("allocator_settings").filter(|s| matches!(s, Py::Dict(_))).map(|s| AllocatorSettings {
                        alloc_conf: text(&s, "PYTORCH_CUDA_ALLOC_CONF"),
                        expandable_segments: s.get("expandable_segments").and_then(|v| v.bool()).unwrap_or(false),
                    });
                Ok(Snapshot { segments, device_traces, allocator_settings })
            }
            // Old torch: the segments alone.
            Py::List(_) | Py::Tuple(_) => {
                let items = root.items().unwrap_or_default();
                let segments = items.iter().map(|g| self.segment(g)).collect::<Result<_, _>>()?;
                Ok(Snapshot { segments, ..Snapshot::default() })
            }
            _ => Err(SnapshotError::Foreign(
                "a pickle of something else (a snapshot is a dict of segments and traces)".into(),
            )),
        }
    }

    fn frames(&mut self, p: &Py, key: &str) -> Result<Frames, SnapshotError> {
        let Some(v) = p.get(key) else { return Ok(Frames::from([])) };
        let id = v.identity();
        if let Some(f) = id.and_then(|id| self.frames.get(&id)) {
            return Ok(f.clone());
        }
        let items = match &v {
            Py::None => Vec::new(),
            other => other.items().ok_or_else(|| SnapshotError::Foreign(format!("{key} is not a list")))?,
        };
        let out: Frames = items
            .iter()
            .take(MAX_FRAMES)
            .map(|f| Ok(Frame { filename: text(f, "filename"), line: num(f, "line")?, name: text(f, "name") }))
            .collect::<Result<Vec<Frame>, SnapshotError>>()?
            .into();
        if let Some(id) = id {
            self.frames.insert(id, out.clone());
        }
        Ok(out)
    }

    fn segment(&mut self, g: &Py) -> Result<Segment, SnapshotError> {
        if !matches!(g, Py::Dict(_)) {
            return Err(SnapshotError::Foreign("a segment is not a dict".into()));
        }
        let blocks = list(g, "blocks")?.iter().map(|b| self.block(b)).collect::<Result<_, _>>()?;
        Ok(Segment {
            device: num(g, "device")?,
            address: num(g, "address")?,
            total_size: num(g, "total_size")?,
            stream: num(g, "stream")?,
            allocated_size: num(g, "allocated_size")?,
            active_size: num(g, "active_size")?,
            requested_size: num(g, "requested_size")?,
            segment_type: text(g, "segment_type"),
            segment_pool_id: list(g, "segment_pool_id")?.iter().filter_map(Py::int).collect(),
            is_expandable: g.get("is_expandable").and_then(|v| v.bool()).unwrap_or(false),
            frames: self.frames(g, "frames")?,
            blocks,
        })
    }

    fn block(&mut self, b: &Py) -> Result<Block, SnapshotError> {
        let mut history = Vec::new();
        for h in list(b, "history")? {
            history.push(History {
                addr: num(&h, "addr")?,
                real_size: num(&h, "real_size")?,
                frames: self.frames(&h, "frames")?,
            });
        }
        Ok(Block {
            address: num(b, "address")?,
            size: num(b, "size")?,
            requested_size: opt_num(b, "requested_size")?,
            state: text(b, "state"),
            frames: self.frames(b, "frames")?,
            history,
        })
    }

    fn entry(&mut self, e: &Py) -> Result<TraceEntry, SnapshotError> {
        if !matches!(e, Py::Dict(_)) {
            return Err(SnapshotError::Foreign("a trace entry is not a dict".into()));
        }
        Ok(TraceEntry {
            action: text(e, "action"),
            addr: opt_num(e, "addr")?,
            device_free: opt_num(e, "device_free")?,
            size: num(e, "size")?,
            stream: num(e, "stream")?,
            time_us: num(e, "time_us")?,
            frames: self.frames(e, "frames")?,
            category: e.get("category").and_then(|c| c.str()).map(|s| s.to_string()),
        })
    }
}
