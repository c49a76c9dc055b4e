//! A serving step's plan: the forward pass of some requests' new tokens over their KV cache.
//!
//! Serving runs the same model as training, forward only. Each request's keys and values stay
//! in the layers' caches from one step to the next (category [`Category::KvCache`], kept across
//! steps like the parameters), so a step computes only its new tokens: a request's whole prompt
//! at its prefill, one token per request at each decode step. Where in the cache each token
//! goes, and where each request's earlier tokens are, is the step's input (the slots and the
//! block tables): the cache's layout — contiguous, growing or paged — is what the serving
//! engine puts there, and never changes the math.

use super::{Category, ConfigError, Plan, TensorId};
use crate::model::{ModelConfig, ShapeError, StepShape};

/// One serving step's shape: `requests` requests with `new_tokens` new tokens each (a prefill
/// of one request's prompt is (1, P); a decode step (B, 1)), over caches of `pool_slots` token
/// slots per layer, read through tables of `table_width` blocks of `block_size` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeStep {
    pub requests: usize,
    pub new_tokens: usize,
    pub pool_slots: u64,
    pub table_width: usize,
    pub block_size: usize,
}

/// The tensors a serving engine writes and reads by name.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeHandles {
    /// (B, T) u32: the new tokens.
    pub tokens: TensorId,
    /// B·T u32: each new token's position in its request.
    pub positions: TensorId,
    /// B·T u32: each new token's slot in the caches (vLLM's `slot_mapping`).
    pub slots: TensorId,
    /// (B, W) u32: each request's block table.
    pub blocks: TensorId,
    /// B u32: each request's tokens in the cache once this step's are written.
    pub lens: TensorId,
    /// (B, T, V): every new token's logits.
    pub logits: TensorId,
    /// One cache per layer, (slots, 2, C): slot s holds K at `s·2C` and V at `s·2C + C`.
    pub caches: Vec<TensorId>,
}

impl ServeStep {
    /// The shape the plan's activations have.
    pub fn shape(&self) -> StepShape {
        StepShape { batch: self.requests, seq: self.new_tokens }
    }

    /// Checks the step against the model: the shape as a training step's, a block size, a table
    /// and a pool of at least one, and caches no larger than a plan's largest tensor.
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ConfigError> {
        use crate::model::{Dim, Planned, check_dim};
        model.validate()?;
        self.shape().validate(model)?;
        super::limits::check_sizes(model, self.shape(), &super::Techniques::default())?;
        check_dim(Dim::BlockSize, self.block_size as i64)?;
        check_dim(Dim::TableWidth, self.table_width as i64)?;
        if self.pool_slots == 0 {
            return Err(ShapeError::Zero { name: Dim::CacheSlots, value: 0 }.into());
        }
        let limit = super::MAX_TENSOR_ELEMS;
        let cache = self.pool_slots.saturating_mul(2).saturating_mul(model.d_model as u64);
        let table = (self.requests as u64).saturating_mul(self.table_width as u64);
        for elems in [cache, table] {
            if elems > limit {
                return Err(ShapeError::SizeLimit { what: Planned::KvCache, amount: u128::from(elems), limit }.into());
            }
        }
        Ok(())
    }
}

impl Plan {
    /// The serving handles, for a serving plan.
    pub fn serve_handles(&self) -> Option<&ServeHandles> {
        self.handles.serving.as_ref()
    }

    /// Whether this plan is a serving step's (forward only, over a KV cache).
    pub fn is_serving(&self) -> bool {
        self.handles.serving.is_some()
    }

    /// Bytes of the KV caches (every layer).
    pub fn kv_cache_bytes(&self) -> u64 {
        self.tensors.iter().filter(|t| t.category == Category::KvCache).map(super::TensorInfo::size_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Dim, Planned};
    use crate::plan::Precision;

    #[test]
    fn a_serving_step_is_refused_in_the_catalogs_words() {
        let model = ModelConfig::toy(65);
        let ok = ServeStep { requests: 2, new_tokens: 1, pool_slots: 64, table_width: 4, block_size: 16 };
        let plan = Plan::serving(&model, Precision::Fp32, &ok).expect("a step");
        assert!(plan.is_serving() && plan.kv_cache_bytes() == 2 * 64 * 2 * 64 * 4);
        let refused = |step: ServeStep| Plan::serving(&model, Precision::Fp32, &step).err();
        let zero = |name| Some(ConfigError::Shape(ShapeError::Zero { name, value: 0 }));
        assert_eq!(refused(ServeStep { block_size: 0, ..ok }), zero(Dim::BlockSize));
        assert_eq!(refused(ServeStep { pool_slots: 0, ..ok }), zero(Dim::CacheSlots));
        assert_eq!(refused(ServeStep { table_width: 0, ..ok }), zero(Dim::TableWidth));
        let huge = refused(ServeStep { pool_slots: 1 << 60, ..ok });
        assert!(matches!(huge, Some(ConfigError::Shape(ShapeError::SizeLimit { what: Planned::KvCache, .. }))));
        assert!(refused(ServeStep { new_tokens: 65, ..ok }).is_some(), "past the model's context");
    }
}
