//! Reading a snapshot: a pickle (protocols 2–5, as `_dump_snapshot` writes on any Python) or the
//! JSON the newest web viewer also takes, into a compact [`Dump`]. Unknown keys are ignored (a
//! newer PyTorch's fields), unknown actions kept and skipped; the legacy shapes are read (a
//! top-level list of segments, no `device_traces`, blocks with `history`, no `requested_size`).
//! Anything else is a [`SnapshotError`] that says what the file is not.
//!
//! A pickle is streamed ([`pickle::parse`]) into the dump's tables: each frame dict becomes a
//! frame id as soon as it is placed in its stack, each stack a stack id, each trace entry a
//! 48-byte [`Event`]. What is left as Python values (the root, segments, blocks) is small.

use std::io::Read;

use super::dump::{Action, Dump, DumpBlock, DumpSegment, Event, FrameRec, Metadata, Strings, Unknowns};
use super::pickle::{self, Input, Sink, V};
use super::stacker::Stacker;
use super::{AllocatorSettings, Annotation, SnapshotError};

/// The first bytes of a pickle with a protocol header (`PROTO n`).
const PICKLE: u8 = 0x80;

/// Reads a snapshot from a file's bytes.
pub fn from_bytes(bytes: &[u8]) -> Result<Dump, SnapshotError> {
    from_reader(bytes, Some(bytes.len() as u64), &mut |_| {})
}

/// Where a pickle's stacks are interned while it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interning {
    /// On the reading thread.
    InLine,
    /// On a second thread (in line where none can be started, as in a browser).
    Thread,
}

/// Files smaller than this intern in line (a thread is not worth starting).
const THREAD_FROM: u64 = 1 << 20;

/// Reads a snapshot from a stream (a file, a browser's file in chunks) of `size` bytes if known;
/// `progress` hears the bytes read so far, about every megabyte.
pub fn from_reader(src: impl Read, size: Option<u64>, progress: &mut dyn FnMut(u64)) -> Result<Dump, SnapshotError> {
    let interning = if size.is_some_and(|s| s < THREAD_FROM) { Interning::InLine } else { Interning::Thread };
    from_reader_with(src, size, progress, interning)
}

/// [`from_reader`], interning stacks as asked (the result is the same either way).
pub fn from_reader_with(
    mut src: impl Read,
    size: Option<u64>,
    progress: &mut dyn FnMut(u64),
    interning: Interning,
) -> Result<Dump, SnapshotError> {
    let io = |e: std::io::Error| SnapshotError::Corrupt(format!("reading failed: {e}"));
    // The first byte that is not white space says what the file is.
    let mut first = [0u8; 1];
    let first = loop {
        match src.read(&mut first) {
            Ok(0) => return Err(SnapshotError::Foreign("the file is empty".into())),
            Ok(_) if first[0].is_ascii_whitespace() => {}
            Ok(_) => break first[0],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    };
    let head = [first];
    let mut src = std::io::Read::chain(&head[..], src);
    let dump = match first {
        PICKLE => {
            let mut sink = Collect::new(interning == Interning::Thread);
            let mut input = Input::new(&mut src, progress);
            let root = pickle::parse(&mut input, &mut sink, size)?;
            sink.dump(&root)?
        }
        b'{' | b'[' => {
            let mut text = Vec::new();
            src.read_to_end(&mut text).map_err(io)?;
            let text = std::str::from_utf8(&text).map_err(|e| SnapshotError::Corrupt(e.to_string()))?;
            let value: serde_json::Value =
                serde_json::from_str(text).map_err(|e| SnapshotError::Corrupt(e.to_string()))?;
            Dump::from_wire(&json::snapshot(&value)?)
        }
        _ => {
            return Err(SnapshotError::Foreign(
                "neither a pickle nor JSON (a snapshot is what torch.cuda.memory._dump_snapshot() writes)".into(),
            ));
        }
    };
    if dump.segments.is_empty() && dump.traces.iter().all(Vec::is_empty) {
        return Err(SnapshotError::Foreign("it has no segments and no device trace".into()));
    }
    Ok(dump)
}

mod collect;
mod json;

/// The keys of a snapshot's top level that oomlab knows (reads, or knows it need not).
const ROOT_KEYS: &[&str] = &[
    "segments",
    "device_traces",
    "allocator_settings",
    "external_annotations",
    "trace_alloc_max_entries",
    "trace_alloc_overflowed",
    "host_segments",
    "host_traces",
    "categories",
];
const SEGMENT_KEYS: &[&str] = &[
    "device",
    "address",
    "total_size",
    "stream",
    "allocated_size",
    "active_size",
    "requested_size",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
];
const BLOCK_KEYS: &[&str] = &["address", "size", "requested_size", "state", "frames", "history"];

/// The keys a snapshot's dicts use, interned once.
struct Keys {
    filename: u32,
    line: u32,
    name: u32,
    action: u32,
    addr: u32,
    size: u32,
    stream: u32,
    time_us: u32,
    device_free: u32,
    frames: u32,
    user_metadata: u32,
    /// Keys a trace entry may have that change nothing here.
    ignored: [u32; 6],
}

/// The sink: interns strings and stacks, and keeps trace entries as events.
struct Collect {
    strings: Strings,
    stacks: Stacker,
    /// Frames read from dicts of an unusual shape (a [`V::Frame`] is an index here), until they
    /// are placed in a stack.
    loose: Vec<FrameRec>,
    k: Keys,
    events: Vec<Event>,
    /// Scratch for a stack's frames.
    raw: Vec<FrameRec>,
    /// Events' user metadata, by event id (the device is known once the traces are read).
    metadata: Vec<(u32, String)>,
    /// Each device trace's event ids, kept only when some event has metadata.
    trace_ids: Vec<Vec<u32>>,
    unknown: Unknowns,
}

fn num_of(v: Option<&V>, key: &str) -> Result<i64, SnapshotError> {
    match v {
        None | Some(V::None) => Ok(0),
        Some(V::Huge) => Err(SnapshotError::Corrupt(format!("{key} is an integer beyond 64 bits"))),
        Some(v) => v.int().ok_or_else(|| SnapshotError::Foreign(format!("{key} is not a number"))),
    }
}

impl Collect {
    fn new(threaded: bool) -> Collect {
        let mut t = Strings::default();
        let mut k = |s| t.intern(s);
        let k = Keys {
            filename: k("filename"),
            line: k("line"),
            name: k("name"),
            action: k("action"),
            addr: k("addr"),
            size: k("size"),
            stream: k("stream"),
            time_us: k("time_us"),
            device_free: k("device_free"),
            frames: k("frames"),
            user_metadata: k("user_metadata"),
            ignored: [k("compile_context"), k("forward_frames"), k("pool_id"), k("category"), k("device"), k("action")],
        };
        Collect {
            strings: t,
            stacks: Stacker::new(threaded),
            loose: Vec::new(),
            k,
            events: Vec::new(),
            raw: Vec::new(),
            metadata: Vec::new(),
            trace_ids: Vec::new(),
            unknown: Unknowns::default(),
        }
    }

    /// A value as text (user metadata: a string, or a dict of `key: value`).
    fn text_of(&self, v: &V) -> String {
        match v {
            V::Str(s) => self.strings.get(*s).to_string(),
            V::Int(i) => i.to_string(),
            V::Float(f) => f.to_string(),
            V::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            V::Dict(d) => d
                .items
                .borrow()
                .iter()
                .map(|(k, v)| format!("{}: {}", self.text_of(k), self.text_of(v)))
                .collect::<Vec<_>>()
                .join(", "),
            V::List(_) | V::Tuple(_) => {
                let items: Vec<String> = v.items().unwrap_or_default().iter().map(|x| self.text_of(x)).collect();
                format!("[{}]", items.join(", "))
            }
            _ => String::new(),
        }
    }

    /// A frame kept until it is placed in a stack.
    fn loose(&mut self, f: FrameRec) -> V {
        self.loose.push(f);
        V::Frame(u32::try_from(self.loose.len() - 1).unwrap_or(u32::MAX))
    }

    /// A frame from a dict that is not the usual shape (a line that is not a number is an error).
    fn loose_frame(&mut self, d: &V) -> Result<FrameRec, SnapshotError> {
        let text = |v: Option<V>| match v {
            Some(V::Str(s)) => s,
            _ => 0,
        };
        let filename = text(d.get(self.k.filename));
        let name = text(d.get(self.k.name));
        let line = match d.get(self.k.line) {
            Some(V::Huge) => -1,
            l => num_of(l.as_ref(), "line")?,
        };
        Ok(FrameRec { line, filename, name })
    }

    /// A list of frames as its stack record (`None`: it is not one).
    fn stack(&mut self, items: &[V]) -> Option<V> {
        if items.is_empty() || !items.iter().all(|f| matches!(f, V::Frame(_) | V::RawFrame(..))) {
            return None;
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        raw.extend(items.iter().filter_map(|f| self.frame_rec(f)));
        let id = self.stacks.stack(&raw);
        self.raw = raw;
        Some(V::Stack(id))
    }

    /// A frame record as it will be placed in a stack.
    fn frame_rec(&self, f: &V) -> Option<FrameRec> {
        match *f {
            V::RawFrame(line, filename, name) => Some(FrameRec { line: i64::from(line), filename, name }),
            V::Frame(i) => self.loose.get(i as usize).copied(),
            _ => None,
        }
    }

    /// A stack from a value under `frames`.
    fn stack_of(&mut self, v: Option<&V>) -> Result<u32, SnapshotError> {
        match v {
            None | Some(V::None) => Ok(0),
            Some(V::Stack(id)) => Ok(*id),
            Some(v @ (V::List(_) | V::Tuple(_))) => {
                let mut recs = Vec::new();
                for f in v.items().unwrap_or_default() {
                    recs.push(match self.frame_rec(&f) {
                        Some(r) => r,
                        None if matches!(f, V::Dict(_)) => self.loose_frame(&f)?,
                        None => return Err(SnapshotError::Foreign("a frame is not a dict".into())),
                    });
                }
                Ok(self.stacks.stack(&recs))
            }
            Some(_) => Err(SnapshotError::Foreign("frames is not a list".into())),
        }
    }

    fn event(&mut self, items: &[(V, V)], action: u32) -> Result<V, SnapshotError> {
        let k = &self.k;
        let (mut addr, mut size, mut stream, mut time_us, mut free, mut frames) = (None, None, None, None, None, None);
        let mut metadata = None;
        for (key, x) in items {
            let V::Str(key) = key else { continue };
            let slot = match *key {
                s if s == k.addr => &mut addr,
                s if s == k.size => &mut size,
                s if s == k.stream => &mut stream,
                s if s == k.time_us => &mut time_us,
                s if s == k.device_free => &mut free,
                s if s == k.frames => &mut frames,
                s if s == k.user_metadata => &mut metadata,
                s if k.ignored.contains(&s) => continue,
                s => {
                    self.unknown.key("trace", self.strings.get(s));
                    continue;
                }
            };
            *slot = Some(x);
        }
        let addr = match addr {
            None | Some(V::None) => None,
            a => Some(num_of(a, "addr")?),
        };
        let name = self.strings.get(action);
        let action = Action::parse(name);
        if action == Action::Other {
            let name = if name.is_empty() { "(none)" } else { name };
            self.unknown.action(name);
        }
        let text = metadata.map(|m| self.text_of(m)).filter(|t| !t.is_empty());
        let mut e = Event::new(action, addr, num_of(size, "size")?, self.stack_of(frames)?);
        e.stream = num_of(stream, "stream")?;
        e.time_us = num_of(time_us, "time_us")?;
        e.device_free = num_of(free, "device_free")?;
        let id = u32::try_from(self.events.len()).map_err(|_| SnapshotError::Corrupt("too many events".into()))?;
        self.events.push(e);
        if let Some(text) = text {
            self.metadata.push((id, text));
        }
        Ok(V::Event(id))
    }
}

impl Sink for Collect {
    fn string(&mut self, s: &str) -> u32 {
        self.strings.intern(s)
    }

    fn frame_keys(&self) -> Option<[u32; 3]> {
        Some([self.k.filename, self.k.line, self.k.name])
    }

    fn flat_dict(&mut self, items: &[V]) -> Option<V> {
        let k = &self.k;
        let (mut filename, mut line, mut name) = (None, None, 0);
        for pair in items.chunks_exact(2) {
            match (&pair[0], &pair[1]) {
                (V::Str(key), V::Str(s)) if *key == k.filename => filename = Some(*s),
                (V::Str(key), V::Int(l)) if *key == k.line => line = Some(*l),
                // An unknown line written as an unsigned -1 (2⁶⁴ − 1, seen in real dumps).
                (V::Str(key), V::Huge) if *key == k.line => line = Some(-1),
                (V::Str(key), V::Str(s)) if *key == k.name => name = *s,
                // A trace entry is never flat (its frames are a list).
                (V::Str(key), _) if *key == k.action => return None,
                _ => {}
            }
        }
        let (line, filename) = (line?, filename?);
        Some(match u32::try_from(line) {
            Ok(l) => V::RawFrame(l, filename, name),
            Err(_) => self.loose(FrameRec { line, filename, name }),
        })
    }

    fn settle(&mut self, v: V) -> Result<V, SnapshotError> {
        match &v {
            V::Dict(d) => {
                let items = d.items.borrow();
                let k = &self.k;
                let (mut filename, mut line, mut name, mut action) = (None, None, 0, None);
                for (key, x) in items.iter() {
                    match (key, x) {
                        (V::Str(key), V::Str(s)) if *key == k.filename => filename = Some(*s),
                        (V::Str(key), V::Int(l)) if *key == k.line => line = Some(*l),
                        (V::Str(key), V::Huge) if *key == k.line => line = Some(-1),
                        (V::Str(key), V::Str(s)) if *key == k.name => name = *s,
                        (V::Str(key), V::Str(s)) if *key == k.action => action = Some(*s),
                        _ => {}
                    }
                }
                if let Some(action) = action {
                    return self.event(&items, action);
                }
                if let (Some(filename), Some(line)) = (filename, line) {
                    return Ok(self.loose(FrameRec { line, filename, name }));
                }
            }
            V::List(l) => {
                let items = l.items.borrow();
                if let Some(stack) = self.stack(&items) {
                    return Ok(stack);
                }
            }
            _ => {}
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sink without the frame fast path: every frame dict goes the general way.
    struct General(Collect);

    impl Sink for General {
        fn string(&mut self, s: &str) -> u32 {
            self.0.string(s)
        }
        fn settle(&mut self, v: V) -> Result<V, SnapshotError> {
            self.0.settle(v)
        }
        fn flat_dict(&mut self, items: &[V]) -> Option<V> {
            self.0.flat_dict(items)
        }
    }

    /// The fast path for frames reads every fixture to the same dump as the general path:
    /// frames in every form (keys in any order, lines of every size, a missing name, an extra
    /// key, new strings inside a frame, four-byte memo references), from Python's own pickler.
    #[test]
    fn the_frame_fast_path_reads_what_the_general_path_reads() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot");
        for name in ["frames_varied.pickle", "minimal_p5.pickle", "legacy_segments.pickle", "toy_oom.pickle"] {
            let bytes = std::fs::read(dir.join(name)).expect("a fixture");
            let fast = from_bytes(&bytes).expect(name);
            let mut sink = General(Collect::new(false));
            let root = pickle::parse(&mut Input::new(&bytes[..], &mut |_| {}), &mut sink, None).expect(name);
            let general = sink.0.dump(&root).expect(name);
            assert_eq!(fast, general, "{name}");
            assert!(fast.stacks.frames.len() > 1 || name != "frames_varied.pickle");
        }
        // The varied frames are all there, lines beyond 65,535 and negative ones included.
        let d = from_bytes(&std::fs::read(dir.join("frames_varied.pickle")).expect("fixture")).expect("reads");
        let lines: std::collections::BTreeSet<i64> = d.stacks.frames.iter().map(|f| f.line).collect();
        assert_eq!(lines.into_iter().collect::<Vec<_>>(), [-2, 7, 300, 70_000, (1 << 31) + 5]);
        assert_eq!(d.events(), 120);
    }
}
