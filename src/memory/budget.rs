//! How much memory the (virtual) GPU offers: a budget in bytes, or none at all.

use serde::{Deserialize, Serialize};

use crate::plan::MAX_BUDGET_BYTES;

/// The memory the caching allocator may reserve. A type rather than a sentinel number, so that
/// "no budget" is never mistaken for a very large one (or the other way round).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// No virtual limit: only the real device's (or the host's) memory limits the step.
    Unlimited,
    /// A virtual GPU of this many bytes.
    Bytes(u64),
}

impl Budget {
    /// The allocator's capacity: the budget, at most [`MAX_BUDGET_BYTES`] (4 EiB), which is
    /// also what no budget means to the allocator (no sum of reserved bytes can then pass u64).
    pub fn capacity_bytes(self) -> u64 {
        match self {
            Budget::Unlimited => MAX_BUDGET_BYTES,
            Budget::Bytes(b) => b.min(MAX_BUDGET_BYTES),
        }
    }

    /// The limit in bytes, if there is one.
    pub fn limit_bytes(self) -> Option<u64> {
        match self {
            Budget::Unlimited => None,
            Budget::Bytes(b) => Some(b),
        }
    }
}

impl From<u64> for Budget {
    /// A budget of this many bytes.
    fn from(bytes: u64) -> Self {
        Budget::Bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_budget_is_not_a_number() {
        assert_eq!(Budget::Unlimited.limit_bytes(), None);
        assert_eq!(Budget::from(64 << 20).limit_bytes(), Some(64 << 20));
        assert_eq!(Budget::Unlimited.capacity_bytes(), MAX_BUDGET_BYTES);
        // An absurd budget is capped where the allocator's sums stay inside u64.
        assert_eq!(Budget::Bytes(u64::MAX).capacity_bytes(), MAX_BUDGET_BYTES);
        assert_ne!(Budget::Bytes(MAX_BUDGET_BYTES), Budget::Unlimited);
    }
}
