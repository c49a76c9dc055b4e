//! A reader for the pickles snapshots are: protocols 2–5 holding only builtins (dict, list,
//! tuple, str, int, float, bool, None). Python memoizes every container and PyTorch's dumps share
//! one frame list between many entries; this reader keeps shared values shared (reference
//! counted), so a large dump is not copied once per reference — serde-pickle clones each
//! reference and fails on values shared inside shared values ("recursive structure found").
//! Python objects (GLOBAL, REDUCE, …) are refused: a snapshot has none.
//!
//! Nothing here recurses: the reader is a stack machine, a value's containers are dropped one
//! by one ([`Py`]'s `Drop`), and nesting deeper than [`MAX_DEPTH`] is refused (a real snapshot
//! nests six levels; a hostile one of 200,000 nested lists would otherwise overflow the stack
//! when its value is dropped).

use std::cell::RefCell;
use std::rc::Rc;

use super::SnapshotError;

/// A Python value.
#[derive(Clone, Debug)]
pub enum Py {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond i64 (kept as "too large").
    Huge,
    Float(f64),
    Str(Rc<str>),
    Bytes,
    List(Rc<RefCell<Vec<Py>>>),
    Tuple(Rc<Vec<Py>>),
    Dict(Rc<RefCell<Vec<(Py, Py)>>>),
}

impl Py {
    /// The value under string key `key` of a dict.
    pub fn get(&self, key: &str) -> Option<Py> {
        match self {
            Py::Dict(d) => {
                d.borrow().iter().find(|(k, _)| matches!(k, Py::Str(s) if &**s == key)).map(|(_, v)| v.clone())
            }
            _ => None,
        }
    }
    pub fn int(&self) -> Option<i64> {
        match self {
            Py::Int(i) => Some(*i),
            Py::Bool(b) => Some(i64::from(*b)),
            Py::Float(f) if f.is_finite() => Some(*f as i64),
            _ => None,
        }
    }
    pub fn str(&self) -> Option<Rc<str>> {
        match self {
            Py::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
    pub fn bool(&self) -> Option<bool> {
        match self {
            Py::Bool(b) => Some(*b),
            Py::Int(i) => Some(*i != 0),
            _ => None,
        }
    }
    /// The items of a list or tuple (a copy of the handles, not of the values).
    pub fn items(&self) -> Option<Vec<Py>> {
        match self {
            Py::List(l) => Some(l.borrow().clone()),
            Py::Tuple(t) => Some(t.to_vec()),
            _ => None,
        }
    }
    /// An identity for shared containers (to convert a shared value once).
    pub fn identity(&self) -> Option<usize> {
        match self {
            Py::List(l) => Some(Rc::as_ptr(l) as usize),
            Py::Tuple(t) => Some(Rc::as_ptr(t) as *const u8 as usize),
            Py::Dict(d) => Some(Rc::as_ptr(d) as usize),
            _ => None,
        }
    }
}

/// The deepest nesting read (a snapshot's is about 6: snapshot, segments, segment, blocks,
/// block, frames, frame).
pub const MAX_DEPTH: u32 = 256;

impl Drop for Py {
    /// Drops a value's containers one at a time (a deep value would overflow the stack dropped
    /// recursively): a container this value owns alone whose children are containers too hands
    /// them over first; one that holds only numbers and strings (a frame, the common case)
    /// drops as usual.
    fn drop(&mut self) {
        let mut pending = Vec::new();
        take_nested(self, &mut pending);
        while let Some(mut p) = pending.pop() {
            take_nested(&mut p, &mut pending);
        }
    }
}

fn is_container(p: &Py) -> bool {
    matches!(p, Py::List(_) | Py::Tuple(_) | Py::Dict(_))
}

/// Moves the children of a container owned by `p` alone into `out`, if any of them is a
/// container.
fn take_nested(p: &mut Py, out: &mut Vec<Py>) {
    match p {
        Py::List(l) if Rc::strong_count(l) == 1 => {
            if let Ok(mut v) = l.try_borrow_mut()
                && v.iter().any(is_container)
            {
                out.append(&mut v);
            }
        }
        Py::Tuple(t) => {
            if let Some(v) = Rc::get_mut(t)
                && v.iter().any(is_container)
            {
                out.append(v);
            }
        }
        Py::Dict(d) if Rc::strong_count(d) == 1 => {
            if let Ok(mut v) = d.try_borrow_mut()
                && v.iter().any(|(k, x)| is_container(k) || is_container(x))
            {
                for (k, x) in v.drain(..) {
                    out.push(k);
                    out.push(x);
                }
            }
        }
        _ => {}
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn corrupt(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(what.into())
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| corrupt("the file ends mid-value"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
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
        usize::try_from(n).ok().filter(|&n| n <= self.bytes.len()).ok_or_else(|| corrupt("a length beyond the file"))
    }
    fn string(&mut self, n: usize) -> Result<Py, SnapshotError> {
        let b = self.take(n)?;
        let s = std::str::from_utf8(b).map_err(|_| corrupt("a string that is not UTF-8"))?;
        Ok(Py::Str(Rc::from(s)))
    }
}

/// A little-endian two's-complement integer (LONG1/LONG4).
fn long(b: &[u8]) -> Py {
    if b.is_empty() {
        return Py::Int(0);
    }
    if b.len() > 8 {
        let negative = b[b.len() - 1] & 0x80 != 0;
        let fill = if negative { 0xff } else { 0 };
        // Fits if the extra bytes only extend the sign of byte 8.
        if b[8..].iter().all(|&x| x == fill) && ((b[7] & 0x80 != 0) == negative) {
            return long(&b[..8]);
        }
        return Py::Huge;
    }
    let negative = b[b.len() - 1] & 0x80 != 0;
    let mut a = [if negative { 0xff } else { 0 }; 8];
    a[..b.len()].copy_from_slice(b);
    Py::Int(i64::from_le_bytes(a))
}

/// A value on the reader's stack with how deep it nests (leaves 0, an empty container 1).
type Entry = (Py, u32);

fn too_deep() -> SnapshotError {
    corrupt(format!("values nested more than {MAX_DEPTH} levels deep (a snapshot nests about 6)"))
}

/// The depth of a container holding `items`.
fn over(items: &[Entry]) -> Result<u32, SnapshotError> {
    let depth = items.iter().map(|(_, d)| *d).max().unwrap_or(0) + 1;
    if depth > MAX_DEPTH { Err(too_deep()) } else { Ok(depth) }
}

/// Reads one pickle of builtins. Each value's nesting depth travels with it on the stack (and
/// into the memo), so deep nesting is refused without a lookup per value. A container changed
/// after it was memoized keeps the memo's older figure: the limit bounds what the reader
/// builds, and nothing walks a value recursively anyway.
pub fn parse(bytes: &[u8]) -> Result<Py, SnapshotError> {
    let mut r = Reader { bytes, pos: 0 };
    let mut stack: Vec<Entry> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    // The memo by id: picklers number it 0, 1, 2, … (MEMOIZE always, PUT in practice), so a
    // vector indexed by id, not a hash map (a quarter of the reading time went to hashing).
    let mut memo: Vec<Option<Entry>> = Vec::new();
    let pop = |stack: &mut Vec<Entry>| stack.pop().ok_or_else(|| corrupt("an operation on an empty stack"));
    let pop_mark = |stack: &mut Vec<Entry>, marks: &mut Vec<usize>| -> Result<Vec<Entry>, SnapshotError> {
        let m = marks.pop().ok_or_else(|| corrupt("a missing mark"))?;
        if m > stack.len() {
            return Err(corrupt("a mark beyond the stack"));
        }
        Ok(stack.split_off(m))
    };
    let values = |items: Vec<Entry>| items.into_iter().map(|(v, _)| v).collect::<Vec<Py>>();
    let leaf = |v: Py| (v, 0);
    loop {
        let op = r.u8()?;
        match op {
            0x80 => {
                let p = r.u8()?;
                if !(2..=5).contains(&p) {
                    return Err(SnapshotError::Foreign(format!("a pickle of protocol {p} (snapshots use 2 to 5)")));
                }
            }
            0x95 => {
                r.u64()?;
            }
            b'.' => return pop(&mut stack).map(|(v, _)| v),
            b'(' => {
                if marks.len() >= MAX_DEPTH as usize {
                    return Err(too_deep());
                }
                marks.push(stack.len());
            }
            b'0' => {
                pop(&mut stack)?;
            }
            b'1' => {
                pop_mark(&mut stack, &mut marks)?;
            }
            b'2' => {
                let top = stack.last().cloned().ok_or_else(|| corrupt("DUP on an empty stack"))?;
                stack.push(top);
            }
            b'}' => stack.push((Py::Dict(Rc::new(RefCell::new(Vec::new()))), 1)),
            b']' | 0x8f => stack.push((Py::List(Rc::new(RefCell::new(Vec::new()))), 1)),
            b')' => stack.push((Py::Tuple(Rc::new(Vec::new())), 1)),
            b'd' => {
                let items = pop_mark(&mut stack, &mut marks)?;
                let depth = over(&items)?;
                stack.push((Py::Dict(Rc::new(RefCell::new(pairs(values(items))?))), depth));
            }
            b'l' => {
                let items = pop_mark(&mut stack, &mut marks)?;
                let depth = over(&items)?;
                stack.push((Py::List(Rc::new(RefCell::new(values(items)))), depth));
            }
            b't' | 0x91 => {
                let items = pop_mark(&mut stack, &mut marks)?;
                let depth = over(&items)?;
                stack.push((Py::Tuple(Rc::new(values(items))), depth));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    return Err(corrupt("a tuple of missing items"));
                }
                let items = stack.split_off(stack.len() - n);
                let depth = over(&items)?;
                stack.push((Py::Tuple(Rc::new(values(items))), depth));
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = pop(&mut stack)?;
                    let k = pop(&mut stack)?;
                    vec![k, v]
                } else {
                    pop_mark(&mut stack, &mut marks)?
                };
                let depth = over(&items)?;
                match stack.last_mut() {
                    Some((Py::Dict(d), held)) => {
                        *held = (*held).max(depth);
                        d.borrow_mut().extend(pairs(values(items))?);
                    }
                    _ => return Err(corrupt("SETITEM(S) without a dict")),
                }
            }
            b'a' | b'e' | 0x90 => {
                let items = if op == b'a' { vec![pop(&mut stack)?] } else { pop_mark(&mut stack, &mut marks)? };
                let depth = over(&items)?;
                match stack.last_mut() {
                    Some((Py::List(l), held)) => {
                        *held = (*held).max(depth);
                        l.borrow_mut().extend(items.into_iter().map(|(v, _)| v));
                    }
                    _ => return Err(corrupt("APPEND(S) without a list")),
                }
            }
            b'N' => stack.push(leaf(Py::None)),
            0x88 => stack.push(leaf(Py::Bool(true))),
            0x89 => stack.push(leaf(Py::Bool(false))),
            b'J' => {
                let v = r.u32()? as i32;
                stack.push(leaf(Py::Int(i64::from(v))));
            }
            b'K' => {
                let v = r.u8()?;
                stack.push(leaf(Py::Int(i64::from(v))));
            }
            b'M' => {
                let b = r.take(2)?;
                stack.push(leaf(Py::Int(i64::from(u16::from_le_bytes([b[0], b[1]])))));
            }
            0x8a => {
                let n = usize::from(r.u8()?);
                let b = r.take(n)?;
                stack.push(leaf(long(b)));
            }
            0x8b => {
                let n = r.u32()?;
                let n = r.len(u64::from(n))?;
                let b = r.take(n)?;
                stack.push(leaf(long(b)));
            }
            b'G' => {
                let b = r.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                stack.push(leaf(Py::Float(f64::from_be_bytes(a))));
            }
            0x8c => {
                let n = usize::from(r.u8()?);
                stack.push(leaf(r.string(n)?));
            }
            b'X' => {
                let n = r.u32()?;
                let n = r.len(u64::from(n))?;
                stack.push(leaf(r.string(n)?));
            }
            0x8d => {
                let n = r.u64()?;
                let n = r.len(n)?;
                stack.push(leaf(r.string(n)?));
            }
            b'C' | b'B' | 0x8e => {
                let n = match op {
                    b'C' => u64::from(r.u8()?),
                    b'B' => u64::from(r.u32()?),
                    _ => r.u64()?,
                };
                let n = r.len(n)?;
                r.take(n)?;
                stack.push(leaf(Py::Bytes));
            }
            0x94 => {
                let top = stack.last().cloned().ok_or_else(|| corrupt("MEMOIZE on an empty stack"))?;
                memo.push(Some(top));
            }
            b'q' | b'r' => {
                let id = if op == b'q' { usize::from(r.u8()?) } else { r.u32()? as usize };
                let top = stack.last().cloned().ok_or_else(|| corrupt("PUT on an empty stack"))?;
                // Each memo entry takes at least one opcode byte: a larger id is no pickler's.
                if id > bytes.len() {
                    return Err(corrupt(format!("a memo id ({id}) beyond the file's size")));
                }
                if id >= memo.len() {
                    memo.resize_with(id + 1, || None);
                }
                memo[id] = Some(top);
            }
            b'h' | b'j' => {
                let id = if op == b'h' { usize::from(r.u8()?) } else { r.u32()? as usize };
                let found = memo.get(id).and_then(Option::as_ref).cloned();
                stack.push(found.ok_or_else(|| corrupt(format!("a reference to a missing memo {id}")))?);
            }
            b'c' | 0x93 | b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' => {
                return Err(SnapshotError::Foreign(
                    "a pickle of Python objects (a snapshot holds only dicts, lists, strings and numbers)".into(),
                ));
            }
            other => return Err(corrupt(format!("an unknown pickle opcode {other:#04x} at byte {}", r.pos - 1))),
        }
    }
}

fn pairs(items: Vec<Py>) -> Result<Vec<(Py, Py)>, SnapshotError> {
    if !items.len().is_multiple_of(2) {
        return Err(corrupt("a dict with a key and no value"));
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}
