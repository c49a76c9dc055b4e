//! The memo, packed. A large dump memoizes an entry per frame dict (millions of them): an entry
//! here is 8 bytes, not a 16-byte [`V`] — a tag in the low 4 bits, the value above it. A frame
//! ([`V::RawFrame`]) packs its line (below 2¹⁶) and its file's and function's string ids (below
//! 2²², a dump has a few thousand distinct strings); containers, floats and whatever does not fit
//! are kept beside the entries, in `side`.

use super::V;

const EMPTY: u64 = 0;
const NONE: u64 = 1;
const FALSE: u64 = 2;
const TRUE: u64 = 3;
const STR: u64 = 4;
/// A signed integer of 60 bits.
const INT: u64 = 5;
/// `line << 48 | name << 26 | filename << 4`.
const FRAME: u64 = 6;
const LOOSE: u64 = 7;
const STACK: u64 = 8;
const EVENT: u64 = 9;
const HUGE: u64 = 10;
const BYTES: u64 = 11;
/// An index into `side`.
const SIDE: u64 = 12;
/// A packed frame's string ids.
const MASK: u64 = (1 << 22) - 1;

/// Memo ids to values (picklers number them 0, 1, 2, …: a vector indexed by id).
#[derive(Debug, Default)]
pub struct Memo {
    packed: Vec<u64>,
    side: Vec<V>,
}

impl Memo {
    /// Room reserved for `n` entries (not touched, so not yet memory in use on a native heap).
    pub fn with_capacity(n: usize) -> Memo {
        Memo { packed: Vec::with_capacity(n), side: Vec::new() }
    }
    pub fn len(&self) -> usize {
        self.packed.len()
    }
    /// Makes room for entry `id` (usually the next one).
    #[inline]
    pub fn slot(&mut self, id: usize) {
        if id == self.packed.len() {
            self.packed.push(EMPTY);
        } else if id > self.packed.len() {
            self.packed.resize(id + 1, EMPTY);
        }
    }
    /// Entry `id`, if it was set.
    #[inline]
    pub fn get(&self, id: usize) -> Option<V> {
        let p = *self.packed.get(id)?;
        let x = p >> 4;
        Some(match p & 15 {
            NONE => V::None,
            FALSE => V::Bool(false),
            TRUE => V::Bool(true),
            STR => V::Str(x as u32),
            INT => V::Int((p as i64) >> 4),
            FRAME => V::RawFrame((p >> 48) as u32, (x & MASK) as u32, ((p >> 26) & MASK) as u32),
            LOOSE => V::Frame(x as u32),
            STACK => V::Stack(x as u32),
            EVENT => V::Event(x as u32),
            HUGE => V::Huge,
            BYTES => V::Bytes,
            SIDE => self.side.get(usize::try_from(x).ok()?)?.clone(),
            _ => return None,
        })
    }
    /// Sets entry `id` (making room for it); a container it held is let go.
    #[inline]
    pub fn set(&mut self, id: usize, v: V) {
        self.slot(id);
        let p = match v {
            V::None => NONE,
            V::Bool(false) => FALSE,
            V::Bool(true) => TRUE,
            V::Str(s) => STR | u64::from(s) << 4,
            V::Int(i) if (-(1i64 << 59)..1i64 << 59).contains(&i) => INT | (i as u64) << 4,
            V::RawFrame(line, filename, name) if line < 1 << 16 && u64::from(filename.max(name)) <= MASK => {
                FRAME | u64::from(line) << 48 | u64::from(name) << 26 | u64::from(filename) << 4
            }
            V::Frame(i) => LOOSE | u64::from(i) << 4,
            V::Stack(i) => STACK | u64::from(i) << 4,
            V::Event(i) => EVENT | u64::from(i) << 4,
            V::Huge => HUGE,
            V::Bytes => BYTES,
            other => {
                self.side.push(other);
                SIDE | ((self.side.len() - 1) as u64) << 4
            }
        };
        let old = std::mem::replace(&mut self.packed[id], p);
        if old & 15 == SIDE
            && let Some(s) = self.side.get_mut((old >> 4) as usize)
        {
            *s = V::None;
        }
    }
    /// Whether entry `id` is the container at `ptr`.
    pub fn holds(&self, id: usize, ptr: *const ()) -> bool {
        match self.packed.get(id) {
            Some(&p) if p & 15 == SIDE => {
                self.side.get((p >> 4) as usize).and_then(V::handle).is_some_and(|(q, _)| q == ptr)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::node;
    use super::*;

    fn same(a: &V, b: &V) -> bool {
        match (a, b) {
            (V::List(x), V::List(y)) => std::rc::Rc::ptr_eq(x, y),
            _ => format!("{a:?}") == format!("{b:?}"),
        }
    }

    /// Every value comes back as it went in, packed or beside; the edges of each packing too.
    #[test]
    fn values_come_back_as_they_went_in() {
        let list = V::List(node());
        let values = [
            V::None,
            V::Bool(false),
            V::Bool(true),
            V::Int(0),
            V::Int(-1),
            V::Int((1 << 59) - 1),
            V::Int(-(1 << 59)),
            V::Int(1 << 59),
            V::Int(i64::MIN),
            V::Huge,
            V::Float(-2.5),
            V::Str(u32::MAX),
            V::Bytes,
            V::RawFrame(65_535, (1 << 22) - 1, 7),
            V::RawFrame(65_536, 1, 2),
            V::RawFrame(3, 1 << 22, 2),
            V::RawFrame(3, 2, u32::MAX),
            V::Frame(u32::MAX),
            V::Stack(u32::MAX),
            V::Event(123),
            list.clone(),
        ];
        let mut m = Memo::default();
        for (i, v) in values.iter().enumerate() {
            m.set(i * 2, v.clone());
        }
        for (i, v) in values.iter().enumerate() {
            let back = m.get(i * 2).expect("set");
            assert!(same(&back, v), "{v:?} came back as {back:?}");
            assert!(m.get(i * 2 + 1).is_none(), "an id never set is empty");
        }
        // The container is found by its identity, and let go when replaced by its record.
        let id = (values.len() - 1) * 2;
        let (ptr, _) = list.handle().expect("a container");
        assert!(m.holds(id, ptr));
        assert!(!m.holds(id - 2, ptr) && !m.holds(id + 1, ptr));
        drop(values);
        let V::List(rc) = &list else { unreachable!() };
        assert_eq!(std::rc::Rc::strong_count(rc), 2, "the memo holds the list");
        m.set(id, V::Stack(4));
        assert!(!m.holds(id, ptr));
        assert_eq!(std::rc::Rc::strong_count(rc), 1, "the memo let the list go");
    }
}
