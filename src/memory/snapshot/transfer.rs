//! A [`Dump`] as bytes and back: how the browser's worker, which reads a large snapshot off the
//! page's thread, hands it to the page (one transferable buffer, not millions of JS objects or a
//! JSON text). The large parts (events, frames, stacks) are copied as they lie in memory
//! (`bytemuck`); everything is length-checked on the way back, so a short or altered buffer is
//! an error, never a panic.

use bytemuck::{Pod, Zeroable};

use super::dump::{Dump, DumpBlock, DumpSegment, Event, FrameRec, Metadata, Stacks, Unknowns};
use super::{AllocatorSettings, Annotation, SnapshotError};

const MAGIC: &[u8; 8] = b"OOMDUMP2";

/// The small parts that are not tables (settings, annotations, metadata, what was unknown), as
/// one JSON text.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Extras {
    settings: Option<AllocatorSettings>,
    /// `allocator_settings`' unknown keys (not part of its serde form).
    settings_other: Vec<(String, String)>,
    annotations: Vec<Annotation>,
    metadata: Vec<Metadata>,
    unknown: Unknowns,
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
    let extras = Extras {
        settings: d.allocator_settings.clone(),
        settings_other: d.allocator_settings.as_ref().map(|a| a.other.clone()).unwrap_or_default(),
        annotations: d.annotations.clone(),
        metadata: d.metadata.clone(),
        unknown: d.unknown.clone(),
    };
    put_str(&mut out, &serde_json::to_string(&extras).unwrap_or_default());
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
    let extras: Extras = serde_json::from_str(&c.string()?).map_err(|_| short())?;
    let allocator_settings = extras.settings.map(|s| AllocatorSettings { other: extras.settings_other, ..s });
    Ok(Dump {
        segments,
        traces,
        allocator_settings,
        stacks: Stacks { strings, frames, flat, starts },
        annotations: extras.annotations,
        metadata: extras.metadata,
        unknown: extras.unknown,
    })
}
