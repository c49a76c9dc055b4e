//! Memory: the caching allocator (PyTorch's rules), and — built on the plan — the simulated
//! timeline of one step, per-category peaks and the out-of-memory error.

pub mod allocator;

pub use allocator::{CachingAllocator, OutOfMemory, Placement, Pool, SegmentId, Stats};
