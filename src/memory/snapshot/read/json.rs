//! A JSON snapshot, read from a parsed value field by field, as leniently as the pickle: a
//! missing key is its default, an unknown key ignored, a value of the wrong kind an error that
//! names it. (Through `serde_json::Value`, which the web module already carries for a model's
//! config.json, rather than a derived decoder per type: the web module has a size ceiling.)

use serde_json::{Map, Value};

use super::super::{AllocatorSettings, Annotation, Block, Divisions, Frame, History, Segment, Snapshot, TraceEntry};
use super::SnapshotError;

type Obj = Map<String, Value>;

fn wrong(what: &str) -> SnapshotError {
    SnapshotError::Foreign(format!("{what} is not of the kind a snapshot has"))
}
fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Obj, SnapshotError> {
    v.as_object().ok_or_else(|| wrong(what))
}
fn list<'a>(o: &'a Obj, key: &str) -> Result<&'a [Value], SnapshotError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(wrong(key)),
    }
}
fn int(o: &Obj, key: &str) -> Result<i64, SnapshotError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_i64().ok_or_else(|| SnapshotError::Corrupt(format!("{key} is not a 64-bit integer"))),
    }
}
fn opt_int(o: &Obj, key: &str) -> Result<Option<i64>, SnapshotError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => int(o, key).map(Some),
    }
}
fn text(o: &Obj, key: &str) -> String {
    o.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}
fn frames(o: &Obj, key: &str) -> Result<super::super::Frames, SnapshotError> {
    let mut out = Vec::new();
    for f in list(o, key)? {
        let f = obj(f, "a frame")?;
        out.push(Frame { filename: text(f, "filename"), line: int(f, "line").unwrap_or(-1), name: text(f, "name") });
    }
    Ok(out.into())
}

fn block(v: &Value) -> Result<Block, SnapshotError> {
    let b = obj(v, "a block")?;
    let mut history = Vec::new();
    for h in list(b, "history")? {
        let h = obj(h, "a block's history")?;
        history.push(History { addr: int(h, "addr")?, real_size: int(h, "real_size")?, frames: frames(h, "frames")? });
    }
    Ok(Block {
        address: int(b, "address")?,
        size: int(b, "size")?,
        requested_size: opt_int(b, "requested_size")?,
        state: text(b, "state"),
        frames: frames(b, "frames")?,
        history,
    })
}

fn segment(v: &Value) -> Result<Segment, SnapshotError> {
    let g = obj(v, "a segment")?;
    let pool = list(g, "segment_pool_id")?.iter().map(|x| x.as_i64().unwrap_or(0)).collect();
    Ok(Segment {
        device: int(g, "device")?,
        address: int(g, "address")?,
        total_size: int(g, "total_size")?,
        stream: int(g, "stream")?,
        allocated_size: int(g, "allocated_size")?,
        active_size: int(g, "active_size")?,
        requested_size: int(g, "requested_size")?,
        segment_type: text(g, "segment_type"),
        segment_pool_id: pool,
        is_expandable: g.get("is_expandable").and_then(Value::as_bool).unwrap_or(false),
        frames: frames(g, "frames")?,
        blocks: list(g, "blocks")?.iter().map(block).collect::<Result<_, _>>()?,
    })
}

fn entry(v: &Value) -> Result<TraceEntry, SnapshotError> {
    let e = obj(v, "a trace entry")?;
    Ok(TraceEntry {
        action: text(e, "action"),
        addr: opt_int(e, "addr")?,
        device_free: opt_int(e, "device_free")?,
        size: int(e, "size")?,
        stream: int(e, "stream")?,
        time_us: int(e, "time_us")?,
        frames: frames(e, "frames")?,
        category: e.get("category").and_then(Value::as_str).map(str::to_string),
        user_metadata: e.get("user_metadata").filter(|m| !m.is_null()).cloned(),
    })
}

fn settings(v: &Value) -> Result<AllocatorSettings, SnapshotError> {
    let a = obj(v, "allocator_settings")?;
    let mut out = AllocatorSettings { alloc_conf: text(a, "PYTORCH_CUDA_ALLOC_CONF"), ..AllocatorSettings::default() };
    for (k, x) in a {
        match k.as_str() {
            "PYTORCH_CUDA_ALLOC_CONF" => {}
            "max_split_size" => out.max_split_size = x.as_i64(),
            "garbage_collection_threshold" => out.garbage_collection_threshold = x.as_f64(),
            "expandable_segments" => out.expandable_segments = x.as_bool().unwrap_or(false),
            "pinned_num_register_threads" => out.pinned_num_register_threads = x.as_i64(),
            "release_lock_on_cudamalloc" => out.release_lock_on_cudamalloc = x.as_bool(),
            "pinned_use_cuda_host_register" => out.pinned_use_cuda_host_register = x.as_bool(),
            "graph_capture_record_stream_reuse" => out.graph_capture_record_stream_reuse = x.as_bool(),
            "roundup_power2_divisions" => {
                let pairs: Option<Vec<(String, i64)>> =
                    x.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0))).collect());
                // A JSON object's keys come back in text order ("1", "1024", "128", …);
                // PyTorch's are the intervals in increasing order (16 of them: insertion).
                out.roundup_power2_divisions = pairs.map(|mut p| {
                    let n = |k: &str| k.parse::<u64>().unwrap_or(u64::MAX);
                    for i in 1..p.len() {
                        let mut j = i;
                        while j > 0 && n(&p[j - 1].0) > n(&p[j].0) {
                            p.swap(j - 1, j);
                            j -= 1;
                        }
                    }
                    Divisions(p)
                });
            }
            _ => out.other.push((k.clone(), x.to_string())),
        }
    }
    Ok(out)
}

/// A whole snapshot: a dict, or (old torch) a list of segments.
pub fn snapshot(v: &Value) -> Result<Snapshot, SnapshotError> {
    if let Some(segments) = v.as_array() {
        return Ok(Snapshot {
            segments: segments.iter().map(segment).collect::<Result<_, _>>()?,
            ..Snapshot::default()
        });
    }
    let o = obj(v, "the snapshot")?;
    let mut traces = Vec::new();
    for t in list(o, "device_traces")? {
        let t = t.as_array().ok_or_else(|| wrong("a device trace"))?;
        traces.push(t.iter().map(entry).collect::<Result<Vec<_>, _>>()?);
    }
    let mut annotations = Vec::new();
    for a in list(o, "external_annotations")? {
        let a = obj(a, "an annotation")?;
        annotations.push(Annotation {
            device: int(a, "device")?,
            stage: text(a, "stage"),
            name: text(a, "name"),
            time_us: int(a, "time_us")?,
        });
    }
    Ok(Snapshot {
        segments: list(o, "segments")?.iter().map(segment).collect::<Result<_, _>>()?,
        device_traces: traces,
        allocator_settings: o.get("allocator_settings").filter(|x| !x.is_null()).map(settings).transpose()?,
        external_annotations: annotations,
    })
}
