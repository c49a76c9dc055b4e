//! The dump's tables: every string, frame and stack stored once, interned as the reader goes.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

use super::{FrameRec, MAX_STACK};

/// Strings, frames and stacks, each stored once.
#[derive(Clone, Debug, PartialEq)]
pub struct Stacks {
    pub strings: Vec<Box<str>>,
    pub frames: Vec<FrameRec>,
    /// The frames of every stack, one after another; stack `i` is `flat[starts[i]..starts[i+1]]`.
    pub flat: Vec<u32>,
    pub starts: Vec<u32>,
}

impl Default for Stacks {
    fn default() -> Self {
        // Stack 0 is the empty stack; string 0 the empty string.
        Stacks { strings: vec!["".into()], frames: Vec::new(), flat: Vec::new(), starts: vec![0, 0] }
    }
}

/// A frame, borrowed from the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef<'a> {
    pub filename: &'a str,
    pub line: i64,
    pub name: &'a str,
}

impl FrameRef<'_> {
    /// `filename:line:name`, as PyTorch's viewer prints a frame.
    pub fn text(&self) -> String {
        format!("{}:{}:{}", self.filename, self.line, self.name)
    }
}

impl Stacks {
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }
    pub fn frame(&self, id: u32) -> FrameRef<'_> {
        let f = self.frames.get(id as usize).copied().unwrap_or_default();
        FrameRef { filename: self.string(f.filename), line: f.line, name: self.string(f.name) }
    }
    /// A stack's frame ids, innermost first.
    pub fn stack(&self, id: u32) -> &[u32] {
        let i = id as usize;
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&a), Some(&b)) if a <= b => self.flat.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
    /// A stack's frames, innermost first.
    pub fn frames(&self, id: u32) -> impl Iterator<Item = FrameRef<'_>> + Clone {
        self.stack(id).iter().map(|&f| self.frame(f))
    }
    /// The innermost frame as the viewer prints it, or "" without one.
    pub fn first_text(&self, id: u32) -> String {
        self.frames(id).next().map(|f| f.text()).unwrap_or_default()
    }
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A multiply–fold mix (the 128-bit product's halves, xored): cheap and well spread.
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

const SEED: [u64; 2] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344];

fn frame_hash(f: &FrameRec) -> u64 {
    let h = fold(f.line as u64 ^ SEED[0], (u64::from(f.filename) << 32 | u64::from(f.name)) ^ SEED[1]);
    // Again, so that the low bits (the slot) depend on every input bit.
    fold(h ^ SEED[1], SEED[0])
}

fn stack_hash(frames: &[u32]) -> u64 {
    let mut h = SEED[0] ^ frames.len() as u64;
    for pair in frames.chunks(2) {
        let v = u64::from(pair[0]) << 32 | pair.get(1).map_or(0, |&x| u64::from(x));
        h = fold(h ^ v, SEED[1]);
    }
    fold(h ^ SEED[1], SEED[0])
}

/// Frames to their ids: open addressing with the frame in the slot, so a lookup (millions of
/// them, one per frame dict of a large dump) touches one cache line, not three.
#[derive(Default)]
struct FrameTable {
    slots: Vec<(FrameRec, u32)>,
    len: usize,
}

const EMPTY: u32 = u32::MAX;

impl FrameTable {
    fn get_or_insert(&mut self, f: FrameRec, new: impl FnOnce() -> u32) -> u32 {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = frame_hash(&f) as usize & mask;
        loop {
            let (g, id) = self.slots[i];
            if id == EMPTY {
                let id = new();
                self.slots[i] = (f, id);
                self.len += 1;
                return id;
            }
            if g == f {
                return id;
            }
            i = (i + 1) & mask;
        }
    }
    /// Reads the slot a frame hashes to (a prefetch: the value is nothing).
    fn peek(&self, f: &FrameRec) -> u32 {
        match self.slots.len() {
            0 => 0,
            n => self.slots[frame_hash(f) as usize & (n - 1)].1,
        }
    }
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![(FrameRec::default(), EMPTY); size]);
        for (f, id) in old.into_iter().filter(|&(_, id)| id != EMPTY) {
            let mut i = frame_hash(&f) as usize & (size - 1);
            while self.slots[i].1 != EMPTY {
                i = (i + 1) & (size - 1);
            }
            self.slots[i] = (f, id);
        }
    }
}

/// Strings to their ids (string 0 is the empty string).
pub struct Strings {
    pub list: Vec<Box<str>>,
    hasher: DefaultHashBuilder,
    ids: HashTable<u32>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut t = Strings { list: vec!["".into()], hasher: DefaultHashBuilder::default(), ids: HashTable::new() };
        let hash = t.hasher.hash_one("");
        t.ids.insert_unique(hash, 0, |_| hash);
        t
    }
}

impl Strings {
    pub fn intern(&mut self, s: &str) -> u32 {
        let Strings { list, hasher, ids } = self;
        let hash = hasher.hash_one(s);
        if let Some(&id) = ids.find(hash, |&id| &*list[id as usize] == s) {
            return id;
        }
        let id = u32::try_from(list.len()).unwrap_or(u32::MAX);
        list.push(s.into());
        ids.insert_unique(hash, id, |&id| hasher.hash_one(&*list[id as usize]));
        id
    }
    pub fn get(&self, id: u32) -> &str {
        self.list.get(id as usize).map_or("", |s| s)
    }
}

/// Frames and stacks to their ids, into a [`Stacks`] without strings (a frame's strings are
/// ids: the thread that interns stacks needs none; [`FrameTables::into_stacks`] adds them).
#[derive(Default)]
pub struct FrameTables {
    stacks: Stacks,
    frame_ids: FrameTable,
    /// (hash, stack id): rehashing reads the stored hash, not the stack.
    stack_ids: HashTable<(u64, u32)>,
    /// Scratch for a stack's frame ids.
    ids: Vec<u32>,
}

impl FrameTables {
    pub fn frame(&mut self, f: FrameRec) -> u32 {
        let frames = &mut self.stacks.frames;
        self.frame_ids.get_or_insert(f, || {
            let id = u32::try_from(frames.len()).unwrap_or(u32::MAX - 1);
            frames.push(f);
            id
        })
    }
    /// A stack of frames (innermost first; cut at [`MAX_STACK`]); the empty stack is 0. The
    /// table's slots for all its frames are read first (the loads overlap), then each frame is
    /// looked up in a warm cache.
    pub fn stack_of(&mut self, frames: &[FrameRec]) -> u32 {
        let frames = &frames[..frames.len().min(MAX_STACK)];
        let mut touched = 0u32;
        for f in frames {
            touched ^= self.frame_ids.peek(f);
        }
        std::hint::black_box(touched);
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        ids.extend(frames.iter().map(|&f| self.frame(f)));
        let id = self.stack(&ids);
        self.ids = ids;
        id
    }
    /// A stack of frame ids (innermost first; cut at [`MAX_STACK`]); the empty stack is 0.
    pub fn stack(&mut self, frames: &[u32]) -> u32 {
        let frames = &frames[..frames.len().min(MAX_STACK)];
        if frames.is_empty() {
            return 0;
        }
        let FrameTables { stacks, stack_ids, .. } = self;
        let hash = stack_hash(frames);
        if let Some(&(_, id)) = stack_ids.find(hash, |&(h, id)| h == hash && stacks.stack(id) == frames) {
            return id;
        }
        let id = u32::try_from(stacks.len()).unwrap_or(u32::MAX);
        stacks.flat.extend_from_slice(frames);
        stacks.starts.push(u32::try_from(stacks.flat.len()).unwrap_or(u32::MAX));
        stack_ids.insert_unique(hash, (hash, id), |&(h, _)| h);
        id
    }
    /// The tables, with their strings.
    pub fn into_stacks(self, strings: Strings) -> Stacks {
        Stacks { strings: strings.list, ..self.stacks }
    }
}
