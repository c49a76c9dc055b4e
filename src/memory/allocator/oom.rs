//! An out-of-memory error, worded as PyTorch's.

use serde::Serialize;

use crate::units::format_bytes;

/// A failed request, with everything PyTorch's message has.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct OutOfMemory {
    /// The caller's request.
    pub requested_bytes: u64,
    /// The segment the allocator tried to reserve (what PyTorch's "Tried to allocate" reports).
    pub tried_bytes: u64,
    pub capacity_bytes: u64,
    /// Capacity minus reserved.
    pub free_bytes: u64,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    /// Total free bytes inside segments when the request failed.
    pub cached_free_bytes: u64,
    pub largest_free_block: u64,
    /// The allocator already had expandable segments (its advice is then not to set them).
    #[serde(default)]
    pub expandable_segments: bool,
    /// The (simulated) GPU that ran out: the data-parallel rank, as PyTorch's "GPU k".
    #[serde(default)]
    pub device: usize,
}

impl OutOfMemory {
    /// Whether the memory cached free would have held the request, had it been one block:
    /// fragmentation rather than a full device.
    pub fn is_fragmented(&self) -> bool {
        self.cached_free_bytes >= self.requested_bytes
    }

    /// PyTorch's wording ("CUDA out of memory. Tried to allocate …"), with oomlab in place of
    /// PyTorch. `what` names the tensor, its category and the op that asked.
    pub fn message(&self, what: &str) -> String {
        let mut msg = format!(
            "GPU out of memory. Tried to allocate {} ({what}, {} requested). GPU {} has a total capacity of {} of which {} is free. Of the allocated memory {} is allocated by oomlab, and {} is reserved by oomlab but unallocated.",
            format_bytes(self.tried_bytes),
            format_bytes(self.requested_bytes),
            self.device,
            format_bytes(self.capacity_bytes),
            format_bytes(self.free_bytes),
            format_bytes(self.allocated_bytes),
            format_bytes(self.reserved_bytes - self.allocated_bytes),
        );
        if self.is_fragmented() && !self.expandable_segments {
            msg.push_str(&format!(
                " The cached free memory ({}) would hold the request, but its largest free block is {}: the memory is fragmented. (PyTorch's remedy: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.)",
                format_bytes(self.cached_free_bytes),
                format_bytes(self.largest_free_block)
            ));
        }
        msg
    }
}
