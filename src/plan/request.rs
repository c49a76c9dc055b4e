//! A training step as asked for: the one input of every plan. The app's settings, the CLI's
//! flags and the browser's CPU worker each describe the step they want as a [`StepRequest`];
//! [`StepRequest::validate`] checks it once, and only the [`ValidRequest`] it returns builds a
//! plan. Its batch, in each of its senses, is [`Batches`].

use serde::{Deserialize, Serialize};

use super::batches::Batches;
use super::limits::check_sizes;
use super::{OptimizerConfig, Techniques};
use crate::model::{ModelConfig, StepShape};
use crate::plan::ConfigError;

/// One training step: the model, one forward pass's shape (the micro-batch: with gradient
/// accumulation the step runs `techniques.accum` of them), the optimizer and the memory-saving
/// techniques.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRequest {
    pub model: ModelConfig,
    /// Sequences per forward pass, and their length.
    pub micro: StepShape,
    pub optimizer: OptimizerConfig,
    pub techniques: Techniques,
}

impl StepRequest {
    /// The request for `batch` sequences per optimizer step (the app's batch slider), split
    /// into `techniques.accum` micro-batches.
    pub fn with_batch(
        model: ModelConfig,
        batch: StepShape,
        optimizer: OptimizerConfig,
        techniques: Techniques,
    ) -> Result<Self, ConfigError> {
        let micro = StepShape { batch: super::micro_batch(batch.batch, techniques.accum)?, seq: batch.seq };
        Ok(Self { model, micro, optimizer, techniques })
    }

    /// Checks everything once: the model, the shape against it, the optimizer, the techniques,
    /// the effective batch, and the sizes of the tensors and of the plan. Each check is made on
    /// numbers that cannot wrap, so a request gets the same answer where `usize` is 32 bits.
    pub fn validate(&self) -> Result<ValidRequest, ConfigError> {
        let model = &self.model;
        model.validate()?;
        self.micro.validate(model)?;
        self.optimizer.validate()?;
        self.techniques.validate(model)?;
        let batches = Batches::micro(self.micro.batch, self.techniques.accum, self.techniques.parallel.gpus)?;
        check_sizes(model, self.micro, &self.techniques)?;
        Ok(ValidRequest { request: *self, batches })
    }
}

/// A [`StepRequest`] that passed [`StepRequest::validate`]: its plan can be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValidRequest {
    request: StepRequest,
    batches: Batches,
}

impl ValidRequest {
    pub fn request(&self) -> &StepRequest {
        &self.request
    }
    pub fn model(&self) -> &ModelConfig {
        &self.request.model
    }
    /// The shape of one forward pass: the micro-batch.
    pub fn micro_shape(&self) -> StepShape {
        self.request.micro
    }
    /// The step's batch in its three senses.
    pub fn batches(&self) -> Batches {
        self.batches
    }
    /// The batch one optimizer step consumes on one GPU: the micro-batch times the accumulation
    /// steps.
    pub fn batch_shape(&self) -> StepShape {
        StepShape { batch: self.batches.per_gpu_batch(), seq: self.request.micro.seq }
    }
    /// The batch one optimizer step consumes over every data-parallel rank: N times a rank's.
    pub fn global_batch_shape(&self) -> StepShape {
        StepShape { batch: self.batches.global_batch(), seq: self.request.micro.seq }
    }
    pub fn optimizer(&self) -> &OptimizerConfig {
        &self.request.optimizer
    }
    pub fn techniques(&self) -> &Techniques {
        &self.request.techniques
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ShapeError;
    use crate::plan::{TechniqueError, micro_batch};

    fn request(batch: usize, accum: usize) -> Result<StepRequest, ConfigError> {
        StepRequest::with_batch(
            ModelConfig::toy(58),
            StepShape { batch, seq: 16 },
            OptimizerConfig::default(),
            Techniques { accum, ..Techniques::default() },
        )
    }

    #[test]
    fn the_batch_splits_into_micro_batches_in_one_place() {
        assert_eq!(micro_batch(12, 4), Ok(3));
        assert_eq!(
            micro_batch(12, 5),
            Err(ConfigError::Technique(TechniqueError::AccumDoesNotDivide { batch: 12, accum: 5 }))
        );
        assert_eq!(
            micro_batch(12, 0),
            Err(ConfigError::Technique(TechniqueError::AccumDoesNotDivide { batch: 12, accum: 0 }))
        );
        let valid = request(12, 4).expect("splits").validate().expect("valid");
        assert_eq!((valid.micro_shape().batch, valid.batch_shape().batch), (3, 12));
        assert_eq!(valid.batches(), Batches::per_gpu(12, 4, 1).expect("valid"), "the request's batches");
        let plan = valid.plan();
        assert_eq!((plan.shape, plan.batch_shape()), (valid.micro_shape(), valid.batch_shape()));
        assert_eq!(plan.handles.micro.len(), 4);
        assert_eq!(plan.request(), *valid.request(), "a plan knows the request it was built from");
        let e = request(10, 3).expect_err("10 is not a multiple of 3");
        assert_eq!(e, ConfigError::Technique(TechniqueError::AccumDoesNotDivide { batch: 10, accum: 3 }));
        assert!(e.to_string().contains("cannot be split into 3 equal micro-batches"), "{e}");
    }

    #[test]
    fn validation_names_the_first_problem_in_a_fixed_order() {
        let mut r = request(4, 1).expect("splits");
        r.model.n_heads = 3; // does not divide d_model
        r.micro.seq = 1000; // longer than the model's
        assert!(matches!(r.validate(), Err(ConfigError::Shape(ShapeError::HeadsDontDivide { .. }))), "the model first");
        r.model.n_heads = 4;
        assert!(matches!(r.validate(), Err(ConfigError::Shape(ShapeError::SequenceTooLong { .. }))), "then the shape");
        r.micro.seq = 16;
        r.techniques.accum = 1 << 20;
        r.micro.batch = 1 << 20;
        let e = r.validate().expect_err("2⁴⁰ sequences");
        assert!(e.to_string().starts_with("effective batch = 1099511627776"), "{e}");
    }

    #[test]
    fn a_request_crosses_as_json() {
        let r = request(12, 4).expect("splits");
        let back: StepRequest = serde_json::from_str(&serde_json::to_string(&r).expect("JSON")).expect("back");
        assert_eq!(back, r);
    }
}
