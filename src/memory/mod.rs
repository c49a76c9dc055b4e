//! Memory: the caching allocator (PyTorch's rules); one step replayed through it (the plan's
//! prediction of every byte, per category and over time); the closed-form formulas.

pub mod allocator;
pub mod budget;
pub mod device;
pub mod formula;
pub mod map;
pub mod run;
pub mod snapshot;
pub mod step;
pub mod summary;
pub mod sweep;

pub use allocator::{CachingAllocator, OutOfMemory, Placement, Pool, SegmentId, Stats};
pub use budget::Budget;
pub use step::{CategoryBytes, StepMemory, StepOom, simulate, simulate_peak};
pub use summary::memory_summary;
