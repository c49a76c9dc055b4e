//! A [`Dump`] as bytes and back: how the browser's worker, which reads a large snapshot off the
//! page's thread, hands it to the page (one transferable buffer, not millions of JS objects or a
//! JSON text). The large parts (events, frames, stacks) are copied as they lie in memory
//! (`bytemuck`); everything is length-checked on the way back, so a short or altered buffer is
//! an error, never a panic.

use bytemuck::{Pod, Zeroable};

use super::dump::{Dump, DumpBlock, DumpSegment, Event, FrameRec, Metadata, Stacks, Unknowns};
use super::{AllocatorSettings, Annotation, SnapshotError};

const MAGIC: &[u8; 8] = b"OOMDUMP2";

/// An optional number: a flag byte, then its 8 bytes.
fn put_opt(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_u64(out, v);
        }
    }
}

/// The small parts that are not tables — the settings, annotations, metadata, what was unknown —
/// written field by field (a JSON text would bring serde's decoders for these types into the
/// web module for no gain).
fn put_extras(out: &mut Vec<u8>, d: &Dump) {
    match &d.allocator_settings {
        None => out.push(0),
        Some(a) => {
            out.push(1);
            put_str(out, &a.alloc_conf);
            put_opt(out, a.max_split_size.map(|v| v as u64));
            put_opt(out, a.garbage_collection_threshold.map(f64::to_bits));
            out.push(u8::from(a.expandable_segments));
            put_opt(out, a.pinned_num_register_threads.map(|v| v as u64));
            for b in
                [a.release_lock_on_cudamalloc, a.pinned_use_cuda_host_register, a.graph_capture_record_stream_reuse]
            {
                put_opt(out, b.map(u64::from));
            }
            match &a.roundup_power2_divisions {
                None => out.push(0),
                Some(divisions) => {
                    out.push(1);
                    put_u64(out, divisions.0.len() as u64);
                    for (k, v) in &divisions.0 {
                        put_str(out, k);
                        put_u64(out, *v as u64);
                    }
                }
            }
            put_u64(out, a.other.len() as u64);
            for (k, v) in &a.other {
                put_str(out, k);
                put_str(out, v);
            }
        }
    }
    put_u64(out, d.annotations.len() as u64);
    for a in &d.annotations {
        put_u64(out, a.device as u64);
        put_str(out, &a.stage);
        put_str(out, &a.name);
        put_u64(out, a.time_us as u64);
    }
    put_u64(out, d.metadata.len() as u64);
    for m in &d.metadata {
        put_u64(out, u64::from(m.device) << 32 | u64::from(m.index));
        put_str(out, &m.text);
    }
    for counts in [&d.unknown.actions, &d.unknown.keys] {
        put_u64(out, counts.len() as u64);
        for (k, n) in counts {
            put_str(out, k);
            put_u64(out, *n);
        }
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_pods<T: Pod>(out: &mut Vec<u8>, items: &[T]) {
    put_u64(out, items.len() as u64);
    out.extend_from_slice(bytemuck::cast_slice(items));
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A block as it travels (a `bool` is not `Pod`).
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Block {
    address: i64,
    size: i64,
    requested: i64,
    stack: u32,
    allocated: u32,
}

/// The dump as one buffer.
pub fn to_bytes(d: &Dump) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    put_u64(&mut out, d.stacks.strings.len() as u64);
    for s in &d.stacks.strings {
        put_str(&mut out, s);
    }
    put_pods(&mut out, &d.stacks.frames);
    put_pods(&mut out, &d.stacks.flat);
    put_pods(&mut out, &d.stacks.starts);
    put_u64(&mut out, d.segments.len() as u64);
    for g in &d.segments {
        let flags = i64::from(g.expandable) | (i64::from(g.small.map_or(0u8, |s| if s { 1 } else { 2 })) << 1);
        put_pods(&mut out, &[g.device, g.address, g.total_size, g.stream, g.pool[0], g.pool[1], flags]);
        let blocks: Vec<Block> = g
            .blocks
            .iter()
            .map(|b| Block {
                address: b.address,
                size: b.size,
                requested: b.requested,
                stack: b.stack,
                allocated: u32::from(b.allocated),
            })
            .collect();
        put_pods(&mut out, &blocks);
    }
    put_u64(&mut out, d.traces.len() as u64);
    for t in &d.traces {
        put_pods(&mut out, t);
    }
    put_extras(&mut out, d);
    out
}

struct Cursor<'a> {
    b: &'a [u8],
}

fn short() -> SnapshotError {
    SnapshotError::Corrupt("the worker's buffer is cut short".into())
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        if n > self.b.len() {
            return Err(short());
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn len(&mut self, each: usize) -> Result<usize, SnapshotError> {
        let n = usize::try_from(self.u64()?).map_err(|_| short())?;
        // Never more than the bytes left could hold.
        if n.checked_mul(each.max(1)).is_none_or(|total| total > self.b.len()) {
            return Err(short());
        }
        Ok(n)
    }
    fn pods<T: Pod>(&mut self) -> Result<Vec<T>, SnapshotError> {
        let n = self.len(size_of::<T>())?;
        Ok(bytemuck::pod_collect_to_vec(self.take(n * size_of::<T>())?))
    }
    fn string(&mut self) -> Result<String, SnapshotError> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| short())
    }
    fn byte(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }
    fn opt(&mut self) -> Result<Option<u64>, SnapshotError> {
        match self.byte()? {
            0 => Ok(None),
            _ => self.u64().map(Some),
        }
    }

    fn settings(&mut self) -> Result<Option<AllocatorSettings>, SnapshotError> {
        if self.byte()? == 0 {
            return Ok(None);
        }
        let alloc_conf = self.string()?;
        let max_split_size = self.opt()?.map(|v| v as i64);
        let garbage_collection_threshold = self.opt()?.map(f64::from_bits);
        let expandable_segments = self.byte()? != 0;
        let pinned_num_register_threads = self.opt()?.map(|v| v as i64);
        let mut flags = [None; 3];
        for f in &mut flags {
            *f = self.opt()?.map(|v| v != 0);
        }
        let roundup_power2_divisions = match self.byte()? {
            0 => None,
            _ => {
                let n = self.len(16)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((self.string()?, self.u64()? as i64));
                }
                Some(super::Divisions(pairs))
            }
        };
        let n = self.len(16)?;
        let mut other = Vec::with_capacity(n);
        for _ in 0..n {
            other.push((self.string()?, self.string()?));
        }
        Ok(Some(AllocatorSettings {
            alloc_conf,
            max_split_size,
            garbage_collection_threshold,
            expandable_segments,
            pinned_num_register_threads,
            release_lock_on_cudamalloc: flags[0],
            pinned_use_cuda_host_register: flags[1],
            graph_capture_record_stream_reuse: flags[2],
            roundup_power2_divisions,
            other,
        }))
    }

    fn annotations(&mut self) -> Result<Vec<Annotation>, SnapshotError> {
        let n = self.len(32)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let device = self.u64()? as i64;
            let (stage, name) = (self.string()?, self.string()?);
            out.push(Annotation { device, stage, name, time_us: self.u64()? as i64 });
        }
        Ok(out)
    }

    fn metadata(&mut self) -> Result<Vec<Metadata>, SnapshotError> {
        let n = self.len(16)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.u64()?;
            out.push(Metadata { device: (at >> 32) as u32, index: at as u32, text: self.string()? });
        }
        Ok(out)
    }

    fn counts(&mut self) -> Result<std::collections::BTreeMap<String, u64>, SnapshotError> {
        let n = self.len(16)?;
        let mut out = std::collections::BTreeMap::new();
        for _ in 0..n {
            let k = self.string()?;
            out.insert(k, self.u64()?);
        }
        Ok(out)
    }
}

/// The dump back from [`to_bytes`]'s buffer.
pub fn from_bytes(b: &[u8]) -> Result<Dump, SnapshotError> {
    let mut c = Cursor { b };
    if c.take(MAGIC.len())? != MAGIC {
        return Err(SnapshotError::Corrupt("not a buffer from oomlab's worker".into()));
    }
    let n = c.len(8)?;
    let mut strings = Vec::with_capacity(n);
    for _ in 0..n {
        strings.push(c.string()?.into_boxed_str());
    }
    let frames: Vec<FrameRec> = c.pods()?;
    let flat: Vec<u32> = c.pods()?;
    let starts: Vec<u32> = c.pods()?;
    let n = c.len(16)?;
    let mut segments = Vec::with_capacity(n);
    for _ in 0..n {
        let head: Vec<i64> = c.pods()?;
        let [device, address, total_size, stream, pool0, pool1, flags] = head[..] else { return Err(short()) };
        let blocks: Vec<Block> = c.pods()?;
        let blocks = blocks
            .into_iter()
            .map(|b| DumpBlock {
                address: b.address,
                size: b.size,
                requested: b.requested,
                allocated: b.allocated != 0,
                stack: b.stack,
            })
            .collect();
        let small = match (flags >> 1) & 3 {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        };
        segments.push(DumpSegment {
            device,
            address,
            total_size,
            stream,
            blocks,
            pool: [pool0, pool1],
            expandable: flags & 1 != 0,
            small,
        });
    }
    let n = c.len(8)?;
    let mut traces = Vec::with_capacity(n);
    for _ in 0..n {
        traces.push(c.pods::<Event>()?);
    }
    let allocator_settings = c.settings()?;
    let annotations = c.annotations()?;
    let metadata = c.metadata()?;
    let unknown = Unknowns { actions: c.counts()?, keys: c.counts()? };
    Ok(Dump {
        segments,
        traces,
        allocator_settings,
        stacks: Stacks { strings, frames, flat, starts },
        annotations,
        metadata,
        unknown,
    })
}
