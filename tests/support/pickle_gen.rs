//! Large synthetic PyTorch memory snapshots, written as Python's pickler writes protocol 4
//! (EMPTY_DICT MEMOIZE MARK … SETITEMS, batches of 1,000, every string and container memoized,
//! a shared object written once and then fetched with BINGET), with their own account of what
//! they hold: the peak, what was alive there by category and by place, counted as the events
//! are made — independently of oomlab's reader.
#![allow(dead_code)] // each test binary that includes this uses part of it

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// A value to pickle.
pub enum P {
    Int(i64),
    Str(String),
    List(Vec<P>),
    Dict(Vec<(String, P)>),
    /// One object referenced from many places (pickled once, then fetched from the memo).
    Shared(Rc<P>),
}

fn s(v: &str) -> P {
    P::Str(v.to_string())
}

/// Python's pickler, protocol 4, for these values.
pub struct Writer {
    pub out: Vec<u8>,
    strings: HashMap<String, u32>,
    shared: HashMap<*const P, u32>,
    next: u32,
}

impl Writer {
    pub fn new() -> Writer {
        Writer { out: vec![0x80, 4], strings: HashMap::new(), shared: HashMap::new(), next: 0 }
    }
    fn memoize(&mut self) -> u32 {
        self.out.push(0x94);
        self.next += 1;
        self.next - 1
    }
    fn get(&mut self, id: u32) {
        match u8::try_from(id) {
            Ok(b) => self.out.extend([b'h', b]),
            Err(_) => {
                self.out.push(b'j');
                self.out.extend(id.to_le_bytes());
            }
        }
    }
    fn int(&mut self, v: i64) {
        if (0..256).contains(&v) {
            self.out.extend([b'K', v as u8]);
        } else if (0..65536).contains(&v) {
            self.out.push(b'M');
            self.out.extend((v as u16).to_le_bytes());
        } else if i32::try_from(v).is_ok() {
            self.out.push(b'J');
            self.out.extend((v as i32).to_le_bytes());
        } else {
            // LONG1: the shortest two's complement.
            let bytes = v.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let (last, prev) = (bytes[n - 1], bytes[n - 2]);
                if (last == 0 && prev & 0x80 == 0) || (last == 0xff && prev & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.extend([0x8a, n as u8]);
            self.out.extend(&bytes[..n]);
        }
    }
    fn str(&mut self, v: &str) {
        if let Some(&id) = self.strings.get(v) {
            return self.get(id);
        }
        if v.len() < 256 {
            self.out.extend([0x8c, v.len() as u8]);
        } else {
            self.out.push(b'X');
            self.out.extend((v.len() as u32).to_le_bytes());
        }
        self.out.extend(v.as_bytes());
        let id = self.memoize();
        self.strings.insert(v.to_string(), id);
    }
    fn batches<T>(&mut self, items: &[T], one: u8, many: u8, mut put: impl FnMut(&mut Writer, &T)) {
        for chunk in items.chunks(1000) {
            if chunk.len() == 1 {
                put(self, &chunk[0]);
                self.out.push(one);
            } else {
                self.out.push(b'(');
                for x in chunk {
                    put(self, x);
                }
                self.out.push(many);
            }
        }
    }
    /// Writes a value; a container's memo id.
    pub fn value(&mut self, v: &P) -> Option<u32> {
        match v {
            P::Int(i) => self.int(*i),
            P::Str(t) => self.str(t),
            P::List(items) => {
                self.out.push(b']');
                let id = self.memoize();
                self.batches(items, b'a', b'e', |w, x| {
                    w.value(x);
                });
                return Some(id);
            }
            P::Dict(items) => {
                self.out.push(b'}');
                let id = self.memoize();
                self.batches(items, b's', b'u', |w, (k, x)| {
                    w.str(k);
                    w.value(x);
                });
                return Some(id);
            }
            P::Shared(rc) => {
                let key = Rc::as_ptr(rc);
                if let Some(&id) = self.shared.get(&key) {
                    self.get(id);
                    return Some(id);
                }
                let id = self.value(rc);
                if let Some(id) = id {
                    self.shared.insert(key, id);
                }
                return id;
            }
        }
        None
    }
    pub fn finish(mut self, root: &P) -> Vec<u8> {
        self.value(root);
        self.out.push(b'.');
        self.out
    }
}

/// The categories the generator's stacks stand for (and oomlab must guess from them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Parameters,
    Optimizer,
    Gradients,
    Activations,
    Other,
}

/// A generated snapshot and its own account.
pub struct Generated {
    pub bytes: Vec<u8>,
    pub events: usize,
    pub peak: i64,
    /// The event after which the peak was reached.
    pub peak_index: usize,
    /// Bytes alive at the peak by category.
    pub at_peak: BTreeMap<Kind, i64>,
    /// Bytes alive at the peak by user site (`model.py:12 step`).
    pub sites: BTreeMap<String, i64>,
    pub ooms: usize,
}

/// Frame objects shared between stacks, by (file, line, function).
type Shared = HashMap<(String, i64, String), Rc<P>>;

/// A stack for a category: a user frame (`train.py` or `model.py`), library frames around it;
/// `fresh`: new frame dicts (as a producer that shares nothing writes), else shared ones (as
/// PyTorch's `_snapshot()` shares a frame between stacks).
fn stack(kind: Kind, site: usize, frames: &mut Shared, fresh: bool) -> (P, String) {
    let torch = "/usr/lib/python3/dist-packages/torch";
    let lib: Vec<(String, i64, &str)> = match kind {
        Kind::Parameters => vec![(format!("{torch}/nn/modules/module.py"), 1340, "_apply")],
        Kind::Optimizer => vec![(format!("{torch}/optim/adam.py"), 163, "_init_group")],
        Kind::Gradients => vec![(format!("{torch}/autograd/graph.py"), 825, "_engine_run_backward")],
        Kind::Activations => vec![
            (format!("{torch}/nn/modules/linear.py"), 125, "forward"),
            (format!("{torch}/nn/modules/module.py"), 1762, "_call_impl"),
        ],
        Kind::Other => vec![],
    };
    let user =
        (format!("/home/me/{}.py", if site.is_multiple_of(2) { "model" } else { "train" }), 10 + site as i64, "step");
    // As oomlab names a place: the file's name, the line, the function.
    let site_text = format!("{}:{} {}", user.0.rsplit('/').next().unwrap_or_default(), user.1, user.2);
    let mut list = Vec::new();
    for (file, line, name) in lib.into_iter().chain([user]) {
        let frame = || {
            P::Dict(vec![
                ("filename".into(), P::Str(file.clone())),
                ("line".into(), P::Int(line)),
                ("name".into(), s(name)),
            ])
        };
        if fresh {
            list.push(frame());
        } else {
            let rc = frames.entry((file.clone(), line, name.to_string())).or_insert_with(|| Rc::new(frame()));
            list.push(P::Shared(rc.clone()));
        }
    }
    (P::List(list), site_text)
}

/// A snapshot of `events` trace events (allocs and frees, a few of unknown kinds and fields a
/// newer PyTorch writes, an OOM at the end), every other stack made of shared frame objects.
pub fn generate(events: usize, seed: u64) -> Generated {
    let mut rng = seed.max(1);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let kinds = [Kind::Parameters, Kind::Optimizer, Kind::Gradients, Kind::Activations, Kind::Other];
    let mut shared = Shared::new();
    let mut trace = Vec::new();
    let base = 0x7f00_0000_0000i64;
    let (mut addr, mut allocated, mut peak, mut peak_index) = (base, 0i64, 0i64, 0usize);
    let mut live: BTreeMap<i64, (i64, Kind, String)> = BTreeMap::new();
    let mut at_peak = BTreeMap::new();
    let mut sites = BTreeMap::new();
    let entry = |action: &str, a: Option<i64>, size: i64, frames: P, extra: Vec<(String, P)>| {
        let mut d = vec![("action".to_string(), s(action))];
        if let Some(a) = a {
            d.push(("addr".into(), P::Int(a)));
        }
        d.extend([("size".into(), P::Int(size)), ("stream".into(), P::Int(0)), ("time_us".into(), P::Int(0))]);
        d.push(("frames".into(), frames));
        d.extend(extra);
        P::Dict(d)
    };
    while trace.len() < events {
        let r = next();
        let fresh = r & 1 == 0;
        if !live.is_empty() && r % 100 < 45 {
            // Free a random live block: free_requested then free_completed (two events).
            let k = (next() % live.len() as u64) as usize;
            let (&a, (size, kind, _)) =
                live.iter().nth(k).map(|(a, v)| (a, v.clone())).unwrap_or((&0, (0, Kind::Other, String::new())));
            let (frames, _) = stack(kind, 0, &mut shared, fresh);
            trace.push(entry("free_requested", Some(a), size, P::List(vec![]), vec![]));
            trace.push(entry("free_completed", Some(a), size, frames, vec![]));
            live.remove(&a);
            allocated -= size;
        } else if r % 100 < 47 {
            // Events a newer PyTorch may write: an unknown action, unknown fields.
            let (frames, _) = stack(Kind::Other, 1, &mut shared, fresh);
            trace.push(entry(
                "user_defined",
                None,
                0,
                frames,
                vec![("user_metadata".into(), s("epoch 3")), ("compile_context".into(), s("N/A"))],
            ));
        } else {
            let kind = kinds[(next() % 5) as usize];
            let site = (next() % 40) as usize;
            let size = 512 * (1 + (next() % 4096) as i64);
            let (frames, site_text) = stack(kind, site, &mut shared, fresh);
            trace.push(entry("alloc", Some(addr), size, frames, vec![]));
            live.insert(addr, (size, kind, site_text));
            addr += size;
            allocated += size;
            if allocated > peak {
                (peak, peak_index) = (allocated, trace.len() - 1);
                at_peak.clear();
                sites.clear();
                for (size, kind, site) in live.values() {
                    *at_peak.entry(*kind).or_insert(0) += size;
                    *sites.entry(site.clone()).or_insert(0) += size;
                }
            }
        }
    }
    // Segments at the dump: one, tiled by the live blocks and the free space between them.
    let mut blocks = Vec::new();
    let mut at = base;
    for (&a, (size, kind, _)) in &live {
        if a > at {
            blocks.push(P::Dict(vec![
                ("address".into(), P::Int(at)),
                ("size".into(), P::Int(a - at)),
                ("state".into(), s("inactive")),
            ]));
        }
        let (frames, _) = stack(*kind, 0, &mut shared, true);
        blocks.push(P::Dict(vec![
            ("address".into(), P::Int(a)),
            ("size".into(), P::Int(*size)),
            ("requested_size".into(), P::Int(*size)),
            ("state".into(), s("active_allocated")),
            ("frames".into(), frames),
        ]));
        at = a + size;
    }
    let total = (addr - base).max(512);
    // The segment was made before the first allocation (the trace starts from nothing).
    trace.insert(0, entry("segment_alloc", Some(base), total, P::List(vec![]), vec![]));
    peak_index += 1;
    if base + total > at {
        blocks.push(P::Dict(vec![
            ("address".into(), P::Int(at)),
            ("size".into(), P::Int(base + total - at)),
            ("state".into(), s("inactive")),
        ]));
    }
    // An OOM at the end (the driver had 1 MiB free), as PyTorch records one.
    let (frames, _) = stack(Kind::Activations, 2, &mut shared, false);
    trace.push(entry("oom", None, 1 << 30, frames, vec![("device_free".into(), P::Int(1 << 20))]));
    let segment = P::Dict(vec![
        ("device".into(), P::Int(0)),
        ("address".into(), P::Int(base)),
        ("total_size".into(), P::Int(total)),
        ("stream".into(), P::Int(0)),
        ("segment_type".into(), s("large")),
        ("segment_pool_id".into(), P::List(vec![P::Int(0), P::Int(0)])),
        ("is_expandable".into(), P::Int(0)),
        ("blocks".into(), P::List(blocks)),
    ]);
    let n = trace.len();
    let root = P::Dict(vec![
        ("segments".into(), P::List(vec![segment])),
        ("device_traces".into(), P::List(vec![P::List(trace)])),
        (
            "allocator_settings".into(),
            P::Dict(vec![("PYTORCH_CUDA_ALLOC_CONF".into(), s("")), ("a_new_setting".into(), P::Int(1))]),
        ),
    ]);
    Generated { bytes: Writer::new().finish(&root), events: n, peak, peak_index, at_peak, sites, ooms: 1 }
}
