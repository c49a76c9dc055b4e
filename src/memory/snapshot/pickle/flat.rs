//! The fast path for a snapshot's commonest value: a frame dict (three keys, strings and a
//! number), read straight from the input buffer without building a dict.

use std::io::Read;

use super::{Input, MAX_DEPTH, Machine, NO_MEMO, Sink, V, corrupt, node};
use crate::memory::snapshot::SnapshotError;

/// The most keys and values the fast path reads into a dict.
const FLAT: usize = 32;

/// Where the fast path stopped.
enum Flat {
    /// The dict was read whole, up to its SETITEMS.
    Whole,
    /// At an operation it leaves to the machine; `mark`: whether MARK was read.
    Partial { mark: bool },
}

impl<S: Sink> Machine<'_, S> {
    /// After EMPTY_DICT: the common dict of a snapshot (a frame: three keys, strings and a
    /// number) read without building a dict. Picklers write `} MEMOIZE ( k v k v … SETITEMS`;
    /// this reads those operations from the buffer while they are leaves, with the machine's own
    /// effects (the memo, interned strings). At anything else (a nested value, the buffer's end,
    /// a second SETITEMS) it hands the machine exactly the state it would have had: the dict,
    /// memoized, the mark and the items read so far, and the operation not yet read.
    pub(super) fn flat_dict<R: Read>(&mut self, input: &mut Input<'_, R>) -> Result<(), SnapshotError> {
        let at = input.position();
        let b = &input.buf[input.pos..input.end];
        let mut flat = std::mem::take(&mut self.flat);
        flat.clear();
        let (mut c, mut done) = (0usize, 0usize);
        let mut dict_memo: Option<usize> = None;
        let u32_at = |c: usize| b.get(c..c + 4).map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize);
        // Its memo entry, then MARK.
        let id = match b.first() {
            Some(0x94) => Some((self.memo.len(), 1)),
            Some(b'q') => b.get(1).map(|&n| (usize::from(n), 2)),
            Some(b'r') => u32_at(1).map(|n| (n, 5)),
            _ => None,
        };
        if let Some((id, len)) = id {
            if id as u64 > at + len as u64 {
                return Err(corrupt(format!("a memo id ({id}) beyond the bytes read")));
            }
            self.memo.slot(id);
            dict_memo = Some(id);
            c = len;
            done = c;
        }
        let mut end = Flat::Partial { mark: false };
        if b.get(c) == Some(&b'(') && self.marks.len() < MAX_DEPTH as usize {
            c += 1;
            done = c;
            end = Flat::Partial { mark: true };
            // The commonest frame, read with no value built.
            if let Some(keys) = self.sink.frame_keys()
                && let Some((record, len)) = self.frame(&b[c..], keys, dict_memo)
            {
                input.pos += c + len;
                if let Some(id) = dict_memo {
                    self.memo.set(id, record.clone());
                }
                self.stack.push(record);
                self.flat = flat;
                return Ok(());
            }
            while flat.len() <= FLAT {
                let Some(&op) = b.get(c) else { break };
                let (v, len) = match op {
                    0x8c => {
                        let Some(&n) = b.get(c + 1) else { break };
                        let Some(text) = b.get(c + 2..c + 2 + usize::from(n)) else { break };
                        let Ok(text) = std::str::from_utf8(text) else { break };
                        (Some(V::Str(self.sink.string(text))), 2 + usize::from(n))
                    }
                    b'K' => match b.get(c + 1) {
                        Some(&n) => (Some(V::Int(i64::from(n))), 2),
                        None => break,
                    },
                    b'M' => match b.get(c + 1..c + 3) {
                        Some(x) => (Some(V::Int(i64::from(u16::from_le_bytes([x[0], x[1]])))), 3),
                        None => break,
                    },
                    b'J' => match u32_at(c + 1) {
                        Some(n) => (Some(V::Int(i64::from(n as u32 as i32))), 5),
                        None => break,
                    },
                    b'N' => (Some(V::None), 1),
                    b'h' | b'j' => {
                        let Some((id, len)) = memo_ref(b, c) else { break };
                        match self.memo.get(id) {
                            Some(v) if !v.is_container() && dict_memo != Some(id) => (Some(v), len),
                            _ => break,
                        }
                    }
                    0x94 | b'q' | b'r' => {
                        let (id, len) = match op {
                            0x94 => (self.memo.len(), 1),
                            b'q' => match b.get(c + 1) {
                                Some(&n) => (usize::from(n), 2),
                                None => break,
                            },
                            _ => match u32_at(c + 1) {
                                Some(n) => (n, 5),
                                None => break,
                            },
                        };
                        let Some(top) = flat.last() else { break };
                        if id as u64 > at + (c + len) as u64 || dict_memo == Some(id) {
                            break;
                        }
                        self.memo.set(id, top.clone());
                        (None, len)
                    }
                    b'u' => {
                        // A second batch of items (a dict of over 1,000) is the machine's.
                        if flat.len().is_multiple_of(2) && b.get(c + 1) != Some(&b'(') {
                            c += 1;
                            done = c;
                            end = Flat::Whole;
                        }
                        break;
                    }
                    _ => break,
                };
                c += len;
                done = c;
                if let Some(v) = v {
                    flat.push(v);
                }
            }
        }
        input.pos += done;
        let record = match end {
            Flat::Whole => self.sink.flat_dict(&flat),
            Flat::Partial { .. } => None,
        };
        let value = match record {
            Some(r) => r,
            None => {
                let d = node();
                if let Some(id) = dict_memo {
                    d.memo.set(u32::try_from(id).unwrap_or(NO_MEMO));
                }
                if let Flat::Whole = end {
                    d.depth.set(flat.iter().map(|v| v.depth() + 1).max().unwrap_or(1));
                    let mut it = flat.drain(..);
                    let mut items = d.items.borrow_mut();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        items.push((k, v));
                    }
                }
                V::Dict(d)
            }
        };
        if let Some(id) = dict_memo {
            self.memo.set(id, value.clone());
        }
        self.stack.push(value);
        if let Flat::Partial { mark: true } = end {
            self.marks.push(self.stack.len());
            self.stack.append(&mut flat);
        }
        self.flat = flat;
        Ok(())
    }

    /// After `} MEMOIZE (`: the commonest frame, `k v k v k v SETITEMS` with the sink's three
    /// keys (file, line, function; fetched from the memo, in any order), a string, a small number
    /// and a string, read with no value built: the record [`Sink::flat_dict`] would make and the
    /// bytes it took. `None` at anything else, with nothing changed but strings interned (the
    /// strings it memoizes are memoized only once the frame is read whole).
    fn frame(&mut self, b: &[u8], keys: [u32; 3], dict_memo: Option<usize>) -> Option<(V, usize)> {
        let (mut got, mut pending, mut new, mut c) = ([None::<u32>; 3], [0u32; 3], 0usize, 0usize);
        for _ in 0..3 {
            let (key, len) = memo_ref(b, c)?;
            c += len;
            let Some(V::Str(key)) = self.memo.get(key) else { return None };
            let which = keys.iter().position(|&k| k == key)?;
            if got[which].is_some() {
                return None;
            }
            let value = match (which, *b.get(c)?) {
                (1, b'K') => {
                    c += 2;
                    u32::from(*b.get(c - 1)?)
                }
                (1, b'M') => {
                    let x = b.get(c + 1..c + 3)?;
                    c += 3;
                    u32::from(u16::from_le_bytes([x[0], x[1]]))
                }
                (0 | 2, b'h' | b'j') => {
                    let (id, len) = memo_ref(b, c)?;
                    let Some(V::Str(s)) = self.memo.get(id).filter(|_| dict_memo != Some(id)) else { return None };
                    c += len;
                    s
                }
                // A string met for the first time, memoized.
                (0 | 2, 0x8c) => {
                    let n = usize::from(*b.get(c + 1)?);
                    let text = std::str::from_utf8(b.get(c + 2..c + 2 + n)?).ok()?;
                    if b.get(c + 2 + n) != Some(&0x94) {
                        return None;
                    }
                    let s = self.sink.string(text);
                    pending[new] = s;
                    new += 1;
                    c += 3 + n;
                    s
                }
                _ => return None,
            };
            got[which] = Some(value);
        }
        // SETITEMS, and no second batch after it.
        if b.get(c) != Some(&b'u') || b.get(c + 1) == Some(&b'(') {
            return None;
        }
        for &s in &pending[..new] {
            self.memo.set(self.memo.len(), V::Str(s));
        }
        Some((V::RawFrame(got[1]?, got[0]?, got[2]?), c + 1))
    }
}

/// BINGET or LONG_BINGET at `c`: the memo id it fetches and the bytes it takes (`None`: neither,
/// or the buffer ends within it).
fn memo_ref(b: &[u8], c: usize) -> Option<(usize, usize)> {
    match *b.get(c)? {
        b'h' => Some((usize::from(*b.get(c + 1)?), 2)),
        b'j' => {
            let x = b.get(c + 1..c + 5)?;
            Some((u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize, 5))
        }
        _ => None,
    }
}
