//! A training step as asked for: the one input of every plan. The app's settings, the CLI's
//! flags and the browser's CPU worker each describe the step they want as a [`StepRequest`];
//! [`StepRequest::validate`] checks it once, and only the [`ValidRequest`] it returns builds a
//! plan. The batch is split into micro-batches for gradient accumulation in one place,
//! [`micro_batch`].

use serde::{Deserialize, Serialize};

use super::build::check_sizes;
use super::{OptimizerConfig, Plan, Techniques};
use crate::model::{ConfigError, ModelConfig, StepShape, check_dim};

/// One training step: the model, the batch of one optimizer step, the optimizer and the
/// memory-saving techniques (gradient accumulation among them).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRequest {
    pub model: ModelConfig,
    /// Sequences per optimizer step (the effective batch, split into `techniques.accum`
    /// micro-batches) and their length.
    pub batch: StepShape,
    pub optimizer: OptimizerConfig,
    pub techniques: Techniques,
}

/// The micro-batch of `batch` sequences split into `accum` equal micro-batches, or why it cannot
/// be split: the one place the split is made.
pub fn micro_batch(batch: usize, accum: usize) -> Result<usize, ConfigError> {
    if accum == 0 || !batch.is_multiple_of(accum) {
        return Err(ConfigError::AccumDoesNotDivide { batch, accum });
    }
    Ok(batch / accum)
}

impl StepRequest {
    /// The request whose micro-batches are `micro` (the CLI's `--micro-batch`, and code that
    /// thinks in forward passes): the effective batch is `micro.batch × techniques.accum`.
    pub fn with_micro(
        model: ModelConfig,
        micro: StepShape,
        optimizer: OptimizerConfig,
        techniques: Techniques,
    ) -> Result<Self, ConfigError> {
        let accum = check_dim("accumulation steps", techniques.accum as i64)?;
        let batch = micro.batch.checked_mul(accum).ok_or(ConfigError::TooLarge {
            name: "effective batch".into(),
            value: (micro.batch as u64).saturating_mul(accum as u64),
        })?;
        Ok(Self { model, batch: StepShape { batch, seq: micro.seq }, optimizer, techniques })
    }

    /// Checks everything once: the model, the techniques against it, the split into
    /// micro-batches, the shape, the optimizer, and the sizes of the tensors and of the plan.
    pub fn validate(&self) -> Result<ValidRequest, ConfigError> {
        let model = &self.model;
        model.validate()?;
        self.techniques.validate(model)?;
        let micro = StepShape { batch: micro_batch(self.batch.batch, self.techniques.accum)?, seq: self.batch.seq };
        micro.validate(model)?;
        self.optimizer.validate()?;
        check_dim("effective batch", self.batch.batch as i64)?;
        check_sizes(model, micro, &self.techniques)?;
        Ok(ValidRequest { request: *self, micro })
    }
}

/// A [`StepRequest`] that passed [`StepRequest::validate`]: its plan can be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValidRequest {
    request: StepRequest,
    micro: StepShape,
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
        self.micro
    }
    /// The batch one optimizer step consumes.
    pub fn batch_shape(&self) -> StepShape {
        self.request.batch
    }
    pub fn optimizer(&self) -> &OptimizerConfig {
        &self.request.optimizer
    }
    pub fn techniques(&self) -> &Techniques {
        &self.request.techniques
    }
    /// The step's plan.
    pub fn plan(&self) -> Plan {
        super::build::build(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(batch: usize, accum: usize) -> StepRequest {
        StepRequest {
            model: ModelConfig::toy(58),
            batch: StepShape { batch, seq: 16 },
            optimizer: OptimizerConfig::default(),
            techniques: Techniques { accum, ..Techniques::default() },
        }
    }

    #[test]
    fn the_batch_splits_into_micro_batches_in_one_place() {
        assert_eq!(micro_batch(12, 4), Ok(3));
        assert_eq!(micro_batch(12, 5), Err(ConfigError::AccumDoesNotDivide { batch: 12, accum: 5 }));
        assert_eq!(micro_batch(12, 0), Err(ConfigError::AccumDoesNotDivide { batch: 12, accum: 0 }));
        let valid = request(12, 4).validate().expect("valid");
        assert_eq!((valid.micro_shape().batch, valid.batch_shape().batch), (3, 12));
        let plan = valid.plan();
        assert_eq!((plan.shape, plan.batch_shape()), (valid.micro_shape(), valid.batch_shape()));
        assert_eq!(plan.handles.micro.len(), 4);
        let e = request(10, 3).validate().expect_err("10 is not a multiple of 3");
        assert_eq!(e, ConfigError::AccumDoesNotDivide { batch: 10, accum: 3 });
        assert!(e.to_string().contains("cannot be split into 3 equal micro-batches"), "{e}");
    }

    #[test]
    fn micro_batches_make_the_same_request() {
        let m = StepRequest::with_micro(
            ModelConfig::toy(58),
            StepShape { batch: 3, seq: 16 },
            OptimizerConfig::default(),
            Techniques { accum: 4, ..Techniques::default() },
        );
        assert_eq!(m, Ok(request(12, 4)));
        // Accumulation steps are checked before they multiply anything.
        let zero = Techniques { accum: 0, ..Techniques::default() };
        let e = StepRequest::with_micro(
            ModelConfig::toy(58),
            StepShape { batch: 3, seq: 16 },
            OptimizerConfig::default(),
            zero,
        );
        assert!(matches!(e, Err(ConfigError::Zero { .. })), "{e:?}");
    }

    #[test]
    fn a_request_crosses_as_json() {
        let r = request(12, 4);
        let back: StepRequest = serde_json::from_str(&serde_json::to_string(&r).expect("JSON")).expect("back");
        assert_eq!(back, r);
    }
}
