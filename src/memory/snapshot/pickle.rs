//! A streaming reader for the pickles snapshots are: protocols 2–5 holding only builtins (dict,
//! list, tuple, str, int, float, bool, None). It reads from any `Read` in chunks (the whole file
//! is never in memory), and never builds a tree of owned values: each value placed into a
//! container goes through a [`Sink`], which may replace it by a compact record (a frame dict by a
//! frame id, a list of frames by a stack id, a trace entry by an event). Strings are interned as
//! they are read.
//!
//! Python memoizes every container and PyTorch's dumps share one frame list between many entries:
//! containers are reference counted while they are built, and when the sink replaces one, the
//! memo's entry is replaced too, so a later reference gets the compact record and the container
//! is freed. A pickler fills each container right after creating it; a container changed after
//! it was placed somewhere (no pickler of plain data does that) keeps its earlier record there.
//! Python objects (GLOBAL, REDUCE, …) are refused, as `torch.load`'s weights-only mode does: a
//! snapshot has none.
//!
//! Nothing here recurses: the reader is a stack machine, a value's containers are dropped one
//! by one ([`V`]'s `Drop`), and nesting deeper than [`MAX_DEPTH`] is refused (a real snapshot
//! nests six levels; a hostile one of 200,000 nested lists would otherwise overflow the stack
//! when its value is dropped). Nothing is allocated beyond what the file's bytes hold: a length
//! is read as data arrives, a memo id is at most the bytes read so far.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::rc::Rc;

use super::SnapshotError;

/// The fast path for a snapshot's commonest value, a frame dict.
mod flat;
/// The memo, 8 bytes an entry.
mod memo;

use memo::Memo;

/// A Python value, or a compact record that replaced one.
#[derive(Clone, Debug)]
pub enum V {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond i64 (kept as "too large").
    Huge,
    Float(f64),
    /// An interned string.
    Str(u32),
    Bytes,
    /// Records a [`Sink`] made of a container: a frame (its line, file and function), and a
    /// frame of an unusual shape (an id of the sink's).
    RawFrame(u32, u32, u32),
    Frame(u32),
    Stack(u32),
    Event(u32),
    List(Rc<Node<V>>),
    Tuple(Rc<Tuple>),
    Dict(Rc<Node<(V, V)>>),
}

/// A list or dict being built.
#[derive(Debug, Default)]
pub struct Node<T> {
    /// The memo id it was first stored under (`u32::MAX`: none).
    memo: Cell<u32>,
    /// How deep it nests (an empty container is 1).
    depth: Cell<u32>,
    pub items: RefCell<Vec<T>>,
}

#[derive(Debug, Default)]
pub struct Tuple {
    depth: u32,
    pub items: Vec<V>,
}

const NO_MEMO: u32 = u32::MAX;

fn node<T>() -> Rc<Node<T>> {
    Rc::new(Node { memo: Cell::new(NO_MEMO), depth: Cell::new(1), items: RefCell::new(Vec::new()) })
}

impl V {
    fn depth(&self) -> u32 {
        match self {
            V::List(l) => l.depth.get(),
            V::Dict(d) => d.depth.get(),
            V::Tuple(t) => t.depth,
            V::Frame(_) | V::RawFrame(..) => 1,
            V::Stack(_) => 2,
            V::Event(_) => 3,
            _ => 0,
        }
    }
    /// The container's identity and memo id.
    fn handle(&self) -> Option<(*const (), u32)> {
        match self {
            V::List(l) => Some((Rc::as_ptr(l).cast(), l.memo.get())),
            V::Dict(d) => Some((Rc::as_ptr(d).cast(), d.memo.get())),
            _ => None,
        }
    }
    fn is_container(&self) -> bool {
        matches!(self, V::List(_) | V::Tuple(_) | V::Dict(_))
    }
    pub fn int(&self) -> Option<i64> {
        match self {
            V::Int(i) => Some(*i),
            V::Bool(b) => Some(i64::from(*b)),
            V::Float(f) if f.is_finite() => Some(*f as i64),
            _ => None,
        }
    }
    pub fn bool(&self) -> Option<bool> {
        match self {
            V::Bool(b) => Some(*b),
            V::Int(i) => Some(*i != 0),
            _ => None,
        }
    }
    /// The value under the key whose interned string is `key`, in a dict.
    pub fn get(&self, key: u32) -> Option<V> {
        match self {
            V::Dict(d) => {
                d.items.borrow().iter().find(|(k, _)| matches!(k, V::Str(s) if *s == key)).map(|(_, v)| v.clone())
            }
            _ => None,
        }
    }
    /// The items of a list or tuple (a copy of the handles, not of the values).
    pub fn items(&self) -> Option<Vec<V>> {
        match self {
            V::List(l) => Some(l.items.borrow().clone()),
            V::Tuple(t) => Some(t.items.clone()),
            _ => None,
        }
    }
}

/// The deepest nesting read (a snapshot's is about 6: snapshot, segments, segment, blocks,
/// block, frames, frame).
pub const MAX_DEPTH: u32 = 256;

impl Drop for V {
    /// Drops a value's containers one at a time (a deep value would overflow the stack dropped
    /// recursively): a container this value owns alone whose children are containers too hands
    /// them over first; one that holds only numbers, strings and records drops as usual.
    #[inline]
    fn drop(&mut self) {
        if self.is_container() {
            drop_nested(self);
        }
    }
}

fn drop_nested(v: &mut V) {
    let mut pending = Vec::new();
    take_nested(v, &mut pending);
    while let Some(mut p) = pending.pop() {
        take_nested(&mut p, &mut pending);
    }
}

/// Moves the children of a container owned by `p` alone into `out`, if any of them is a
/// container.
fn take_nested(p: &mut V, out: &mut Vec<V>) {
    match p {
        V::List(l) if Rc::strong_count(l) == 1 => {
            let mut v = l.items.borrow_mut();
            if v.iter().any(V::is_container) {
                out.append(&mut v);
            }
        }
        V::Tuple(t) => {
            if let Some(t) = Rc::get_mut(t)
                && t.items.iter().any(V::is_container)
            {
                out.append(&mut t.items);
            }
        }
        V::Dict(d) if Rc::strong_count(d) == 1 => {
            let mut v = d.items.borrow_mut();
            if v.iter().any(|(k, x)| k.is_container() || x.is_container()) {
                for (k, x) in v.drain(..) {
                    out.push(k);
                    out.push(x);
                }
            }
        }
        _ => {}
    }
}

/// What the reader hands each value placed into a container, and its strings.
pub trait Sink {
    /// Interns a string.
    fn string(&mut self, s: &str) -> u32;
    /// A value being placed into a container: itself, or a compact record that replaces it
    /// (also in the memo).
    fn settle(&mut self, v: V) -> Result<V, SnapshotError>;
    /// A dict of numbers and strings (keys and values in turn), just read: its record, if it
    /// makes one (a frame), or `None` to keep it a dict.
    fn flat_dict(&mut self, items: &[V]) -> Option<V>;
    /// The keys (file, line, function) of the dicts [`Sink::flat_dict`] makes frames of, if it
    /// makes any: such a dict is then read by a faster path, to the same record.
    fn frame_keys(&self) -> Option<[u32; 3]> {
        None
    }
}

fn corrupt(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(what.into())
}

/// The bytes read at a time.
const CHUNK: usize = 1 << 20;

/// A buffered reader that hands out slices and counts what it read.
pub struct Input<'p, R> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Bytes read before `buf[0]`.
    before: u64,
    progress: &'p mut dyn FnMut(u64),
}

impl<'p, R: Read> Input<'p, R> {
    /// `progress` hears the bytes read so far, about every megabyte.
    pub fn new(src: R, progress: &'p mut dyn FnMut(u64)) -> Self {
        Input { src, buf: Vec::new(), pos: 0, end: 0, before: 0, progress }
    }
    /// The bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.before + self.pos as u64
    }
    /// Makes `n` bytes available, growing the buffer only as data arrives (a claimed length
    /// beyond the file never allocates more than the file holds).
    #[cold]
    fn fill(&mut self, n: usize) -> Result<(), SnapshotError> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.before += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        while self.end < n {
            if self.end == self.buf.len() {
                let grow = self.buf.len().clamp(CHUNK, 64 * CHUNK);
                self.buf.resize(self.buf.len() + grow, 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(corrupt("the file ends mid-value (is it cut short?)")),
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(corrupt(format!("reading failed: {e}"))),
            }
        }
        (self.progress)(self.before + self.end as u64);
        Ok(())
    }
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], SnapshotError> {
        if self.end - self.pos < n {
            self.fill(n)?;
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    #[inline]
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        if self.pos < self.end {
            self.pos += 1;
            return Ok(self.buf[self.pos - 1]);
        }
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn len(&mut self, n: u64) -> Result<usize, SnapshotError> {
        usize::try_from(n).map_err(|_| corrupt("a length beyond what this machine addresses"))
    }
    fn string(&mut self, n: usize, sink: &mut impl Sink) -> Result<V, SnapshotError> {
        let b = self.take(n)?;
        let s = std::str::from_utf8(b).map_err(|_| corrupt("a string that is not UTF-8"))?;
        Ok(V::Str(sink.string(s)))
    }
}

/// A little-endian two's-complement integer (LONG1/LONG4).
fn long(b: &[u8]) -> V {
    if b.is_empty() {
        return V::Int(0);
    }
    if b.len() > 8 {
        let negative = b[b.len() - 1] & 0x80 != 0;
        let fill = if negative { 0xff } else { 0 };
        // Fits if the extra bytes only extend the sign of byte 8.
        if b[8..].iter().all(|&x| x == fill) && ((b[7] & 0x80 != 0) == negative) {
            return long(&b[..8]);
        }
        return V::Huge;
    }
    let negative = b[b.len() - 1] & 0x80 != 0;
    let mut a = [if negative { 0xff } else { 0 }; 8];
    a[..b.len()].copy_from_slice(b);
    V::Int(i64::from_le_bytes(a))
}

fn too_deep() -> SnapshotError {
    corrupt(format!("values nested more than {MAX_DEPTH} levels deep (a snapshot nests about 6)"))
}

/// The reader's state: its stack, marks and memo.
struct Machine<'s, S> {
    stack: Vec<V>,
    marks: Vec<usize>,
    /// The memo by id: picklers number it 0, 1, 2, … (MEMOIZE always, PUT in practice), so a
    /// vector indexed by id, not a hash map.
    memo: Memo,
    sink: &'s mut S,
    /// The fast path's items (kept to reuse its allocation).
    flat: Vec<V>,
}

impl<S: Sink> Machine<'_, S> {
    fn pop(&mut self) -> Result<V, SnapshotError> {
        self.stack.pop().ok_or_else(|| corrupt("an operation on an empty stack"))
    }
    fn mark(&mut self) -> Result<usize, SnapshotError> {
        let m = self.marks.pop().ok_or_else(|| corrupt("a missing mark"))?;
        if m > self.stack.len() {
            return Err(corrupt("a mark beyond the stack"));
        }
        Ok(m)
    }
    /// A value placed into a container: the sink's record for it, which replaces the container
    /// in the memo too.
    fn settle(&mut self, v: V) -> Result<V, SnapshotError> {
        let handle = v.handle();
        let out = self.sink.settle(v)?;
        if let Some((ptr, id)) = handle
            && out.handle().is_none()
            && self.memo.holds(id as usize, ptr)
        {
            self.memo.set(id as usize, out.clone());
        }
        Ok(out)
    }
    /// Settles the items from `from` to the top in place; the depth of a container holding them.
    fn settle_top(&mut self, from: usize) -> Result<u32, SnapshotError> {
        let mut depth = 1;
        for i in from..self.stack.len() {
            if matches!(self.stack[i], V::List(_) | V::Dict(_)) {
                let v = std::mem::replace(&mut self.stack[i], V::None);
                self.stack[i] = self.settle(v)?;
            }
            depth = depth.max(self.stack[i].depth() + 1);
        }
        if depth > MAX_DEPTH { Err(too_deep()) } else { Ok(depth) }
    }
    /// The items from `from` to the top, settled, and the depth of a container holding them.
    fn settled(&mut self, from: usize) -> Result<(Vec<V>, u32), SnapshotError> {
        let depth = self.settle_top(from)?;
        Ok((self.stack.drain(from..).collect(), depth))
    }
    /// The items from `from` to the top, settled, as key–value pairs.
    fn settled_pairs(&mut self, from: usize) -> Result<(Vec<(V, V)>, u32), SnapshotError> {
        if !(self.stack.len() - from).is_multiple_of(2) {
            return Err(corrupt("a dict with a key and no value"));
        }
        let depth = self.settle_top(from)?;
        let mut out = Vec::with_capacity((self.stack.len() - from) / 2);
        let mut it = self.stack.drain(from..);
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            out.push((k, v));
        }
        Ok((out, depth))
    }
    fn memoize(&mut self, id: usize, limit: u64) -> Result<(), SnapshotError> {
        let top = self.stack.last().cloned().ok_or_else(|| corrupt("PUT on an empty stack"))?;
        // Each memo entry takes at least one opcode byte: a larger id is no pickler's.
        if id as u64 > limit {
            return Err(corrupt(format!("a memo id ({id}) beyond the bytes read")));
        }
        if let V::List(l) = &top
            && l.memo.get() == NO_MEMO
        {
            l.memo.set(id as u32);
        }
        if let V::Dict(d) = &top
            && d.memo.get() == NO_MEMO
        {
            d.memo.set(id as u32);
        }
        self.memo.set(id, top);
        Ok(())
    }
}

/// Reads one pickle of builtins from `input`, its containers' values through `sink`. Returns the
/// top value (not settled: the caller reads it). `size`: the file's size if known (the memo's
/// room is reserved for it, not grown and copied step by step: a large dump memoizes millions
/// of values; reserved, not touched, it takes no memory until used).
pub fn parse<R: Read, S: Sink>(input: &mut Input<'_, R>, sink: &mut S, size: Option<u64>) -> Result<V, SnapshotError> {
    // A frame dict, the most common memoized value, takes 20 to 40 bytes of a pickle.
    // (At most 32 Mi entries up front: a wasm32 heap commits what it reserves.)
    let memo = Memo::with_capacity(size.and_then(|s| usize::try_from(s / 20).ok()).unwrap_or(0).min(1 << 25));
    let mut m = Machine { stack: Vec::new(), marks: Vec::new(), memo, sink, flat: Vec::new() };
    loop {
        let op = input.u8()?;
        match op {
            0x80 => {
                let p = input.u8()?;
                if !(2..=5).contains(&p) {
                    return Err(SnapshotError::Foreign(format!("a pickle of protocol {p} (snapshots use 2 to 5)")));
                }
            }
            0x95 => {
                input.u64()?;
            }
            b'.' => return m.pop(),
            b'(' => {
                if m.marks.len() >= MAX_DEPTH as usize {
                    return Err(too_deep());
                }
                m.marks.push(m.stack.len());
            }
            b'0' => {
                m.pop()?;
            }
            b'1' => {
                let at = m.mark()?;
                m.stack.truncate(at);
            }
            b'2' => {
                let top = m.stack.last().cloned().ok_or_else(|| corrupt("DUP on an empty stack"))?;
                m.stack.push(top);
            }
            b'}' => m.flat_dict(input)?,
            b']' | 0x8f => m.stack.push(V::List(node())),
            b')' => m.stack.push(V::Tuple(Rc::new(Tuple { depth: 1, items: Vec::new() }))),
            b'd' => {
                let at = m.mark()?;
                let (items, depth) = m.settled_pairs(at)?;
                let d = node();
                d.depth.set(depth);
                *d.items.borrow_mut() = items;
                m.stack.push(V::Dict(d));
            }
            b'l' => {
                let at = m.mark()?;
                let (items, depth) = m.settled(at)?;
                let l = node();
                l.depth.set(depth);
                *l.items.borrow_mut() = items;
                m.stack.push(V::List(l));
            }
            b't' | 0x91 | 0x85..=0x87 => {
                let at = match op {
                    0x85..=0x87 => {
                        let n = usize::from(op - 0x84);
                        m.stack.len().checked_sub(n).ok_or_else(|| corrupt("a tuple of missing items"))?
                    }
                    _ => m.mark()?,
                };
                let (items, depth) = m.settled(at)?;
                m.stack.push(V::Tuple(Rc::new(Tuple { depth, items })));
            }
            b's' | b'u' | b'a' | b'e' | 0x90 => {
                let at = match op {
                    b's' => m.stack.len().checked_sub(2).ok_or_else(|| corrupt("SETITEM on a short stack"))?,
                    b'a' => m.stack.len().checked_sub(1).ok_or_else(|| corrupt("APPEND on an empty stack"))?,
                    _ => m.mark()?,
                };
                if at == 0 {
                    return Err(corrupt("SETITEM(S) or APPEND(S) without a container"));
                }
                let depth = m.settle_top(at)?;
                let (below, top) = m.stack.split_at_mut(at);
                match &below[at - 1] {
                    V::Dict(d) if matches!(op, b's' | b'u') => {
                        if !top.len().is_multiple_of(2) {
                            return Err(corrupt("a dict with a key and no value"));
                        }
                        d.depth.set(d.depth.get().max(depth));
                        let mut items = d.items.borrow_mut();
                        let mut it = top.iter_mut().map(|v| std::mem::replace(v, V::None));
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            items.push((k, v));
                        }
                    }
                    V::List(l) if matches!(op, b'a' | b'e' | 0x90) => {
                        l.depth.set(l.depth.get().max(depth));
                        l.items.borrow_mut().extend(top.iter_mut().map(|v| std::mem::replace(v, V::None)));
                    }
                    _ => return Err(corrupt("SETITEM(S) without a dict, or APPEND(S) without a list")),
                }
                m.stack.truncate(at);
            }
            b'N' => m.stack.push(V::None),
            0x88 => m.stack.push(V::Bool(true)),
            0x89 => m.stack.push(V::Bool(false)),
            b'J' => {
                let v = input.u32()? as i32;
                m.stack.push(V::Int(i64::from(v)));
            }
            b'K' => {
                let v = input.u8()?;
                m.stack.push(V::Int(i64::from(v)));
            }
            b'M' => {
                let b = input.take(2)?;
                m.stack.push(V::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))));
            }
            0x8a => {
                let n = usize::from(input.u8()?);
                let v = long(input.take(n)?);
                m.stack.push(v);
            }
            0x8b => {
                let n = input.u32()?;
                let n = input.len(u64::from(n))?;
                let v = long(input.take(n)?);
                m.stack.push(v);
            }
            b'G' => {
                let b = input.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                m.stack.push(V::Float(f64::from_be_bytes(a)));
            }
            0x8c | b'X' | 0x8d => {
                let n = match op {
                    0x8c => u64::from(input.u8()?),
                    b'X' => u64::from(input.u32()?),
                    _ => input.u64()?,
                };
                let n = input.len(n)?;
                let v = input.string(n, m.sink)?;
                m.stack.push(v);
            }
            b'C' | b'B' | 0x8e => {
                let n = match op {
                    b'C' => u64::from(input.u8()?),
                    b'B' => u64::from(input.u32()?),
                    _ => input.u64()?,
                };
                let n = input.len(n)?;
                // Skipped a chunk at a time (bytes are nothing a snapshot needs).
                let mut left = n;
                while left > 0 {
                    let k = left.min(CHUNK);
                    input.take(k)?;
                    left -= k;
                }
                m.stack.push(V::Bytes);
            }
            0x94 => {
                let id = m.memo.len();
                m.memoize(id, input.position())?;
            }
            b'q' | b'r' => {
                let id = if op == b'q' { usize::from(input.u8()?) } else { input.u32()? as usize };
                m.memoize(id, input.position())?;
            }
            b'h' | b'j' => {
                let id = if op == b'h' { usize::from(input.u8()?) } else { input.u32()? as usize };
                let found = m.memo.get(id);
                m.stack.push(found.ok_or_else(|| corrupt(format!("a reference to a missing memo {id}")))?);
            }
            b'c' | 0x93 | b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' => {
                return Err(SnapshotError::Foreign(
                    "a pickle of Python objects (a snapshot holds only dicts, lists, strings and numbers)".into(),
                ));
            }
            other => {
                return Err(corrupt(format!(
                    "an unknown pickle opcode {other:#04x} at byte {}",
                    input.position().saturating_sub(1)
                )));
            }
        }
    }
}
