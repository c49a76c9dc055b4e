//! A step's allocator log as it crosses the CPU worker: flat numbers, not JSON objects. The
//! derived deserialiser of `Event<TensorTag>` from JSON objects was 18 kB of the web module;
//! a list of numbers reads with what the page already has. Each event is its kind then its
//! fields: a tag as its tensor and its op + 1 (0: none), a placement as segment, offset, size.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::TensorTag;
use crate::memory::allocator::{Event, Placement, Pool, SegmentId};
use crate::plan::TensorId;

/// The events of one step, crossing as numbers ([`EventLog::encode`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventLog(pub Vec<Event<TensorTag>>);

fn tag(t: &TensorTag, out: &mut Vec<u64>) {
    out.push(t.tensor.0 as u64);
    out.push(t.op.map_or(0, |op| op as u64 + 1));
}

fn placement(p: &Placement, out: &mut Vec<u64>) {
    out.extend([p.segment.0, p.offset, p.size]);
}

impl EventLog {
    /// The events as numbers.
    pub fn encode(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.0.len() * 7);
        for e in &self.0 {
            match e {
                Event::SegmentAlloc { segment, pool, size, expandable } => {
                    out.extend([0, segment.0, u64::from(*pool == Pool::Large), *size, u64::from(*expandable)])
                }
                Event::SegmentFree { segment, size } => out.extend([1, segment.0, *size]),
                Event::SegmentMap { segment, offset, size } => out.extend([2, segment.0, *offset, *size]),
                Event::SegmentUnmap { segment, offset, size } => out.extend([3, segment.0, *offset, *size]),
                Event::Alloc { tag: t, placement: p, requested } => {
                    out.push(4);
                    tag(t, &mut out);
                    placement(p, &mut out);
                    out.push(*requested);
                }
                Event::Free { tag: t, placement: p } => {
                    out.push(5);
                    tag(t, &mut out);
                    placement(p, &mut out);
                }
                Event::Oom { tag: t, requested } => {
                    out.push(6);
                    tag(t, &mut out);
                    out.push(*requested);
                }
            }
        }
        out
    }

    /// The events back from their numbers; None for numbers no [`Self::encode`] wrote.
    pub fn decode(numbers: &[u64]) -> Option<Self> {
        let mut it = numbers.iter().copied();
        let mut events = Vec::new();
        let index = |n: u64| usize::try_from(n).ok();
        while let Some(kind) = it.next() {
            let mut next = || it.next();
            let tag = |next: &mut dyn FnMut() -> Option<u64>| -> Option<TensorTag> {
                let tensor = TensorId(index(next()?)?);
                let op = match next()? {
                    0 => None,
                    n => Some(index(n - 1)?),
                };
                Some(TensorTag { tensor, op })
            };
            let placement = |next: &mut dyn FnMut() -> Option<u64>| -> Option<Placement> {
                Some(Placement { segment: SegmentId(next()?), offset: next()?, size: next()? })
            };
            events.push(match kind {
                0 => Event::SegmentAlloc {
                    segment: SegmentId(next()?),
                    pool: if next()? == 1 { Pool::Large } else { Pool::Small },
                    size: next()?,
                    expandable: next()? == 1,
                },
                1 => Event::SegmentFree { segment: SegmentId(next()?), size: next()? },
                2 => Event::SegmentMap { segment: SegmentId(next()?), offset: next()?, size: next()? },
                3 => Event::SegmentUnmap { segment: SegmentId(next()?), offset: next()?, size: next()? },
                4 => Event::Alloc { tag: tag(&mut next)?, placement: placement(&mut next)?, requested: next()? },
                5 => Event::Free { tag: tag(&mut next)?, placement: placement(&mut next)? },
                6 => Event::Oom { tag: tag(&mut next)?, requested: next()? },
                _ => return None,
            });
        }
        Some(EventLog(events))
    }
}

impl Serialize for EventLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.encode().serialize(s)
    }
}

impl<'de> Deserialize<'de> for EventLog {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let numbers = Vec::<u64>::deserialize(d)?;
        EventLog::decode(&numbers).ok_or_else(|| serde::de::Error::custom("not an allocator log"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_event_crosses_and_comes_back() {
        let t = |tensor, op| TensorTag { tensor: TensorId(tensor), op };
        let p = Placement { segment: SegmentId(3), offset: 512, size: 1024 };
        let log = EventLog(vec![
            Event::SegmentAlloc { segment: SegmentId(3), pool: Pool::Large, size: 2 << 20, expandable: true },
            Event::SegmentAlloc { segment: SegmentId(4), pool: Pool::Small, size: 1 << 20, expandable: false },
            Event::SegmentMap { segment: SegmentId(3), offset: 2 << 20, size: 2 << 20 },
            Event::Alloc { tag: t(7, Some(0)), placement: p, requested: 1000 },
            Event::Free { tag: t(7, None), placement: p },
            Event::Oom { tag: t(9, Some(41)), requested: u64::MAX },
            Event::SegmentUnmap { segment: SegmentId(3), offset: 2 << 20, size: 2 << 20 },
            Event::SegmentFree { segment: SegmentId(4), size: 1 << 20 },
        ]);
        let json = serde_json::to_string(&log).expect("serialises");
        assert!(json.starts_with("[0,3,1,"), "numbers, not objects: {json}");
        assert_eq!(serde_json::from_str::<EventLog>(&json).expect("reads"), log);
        assert_eq!(EventLog::decode(&[]), Some(EventLog::default()));
        for garbled in [&[7u64][..], &[4, 1], &[0, 3, 1], &[5, 1, 0, 3]] {
            assert_eq!(EventLog::decode(garbled), None, "{garbled:?}");
        }
        assert!(serde_json::from_str::<EventLog>("[{\"kind\":\"alloc\"}]").is_err());
    }
}
