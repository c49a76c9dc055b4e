//! Optimizer choice and hyper-parameters.

use serde::{Deserialize, Serialize};

use crate::plan::{ConfigError, TechniqueError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerKind {
    /// Plain SGD: no state.
    Sgd,
    /// SGD with momentum: one state tensor.
    Momentum,
    /// AdamW: two state tensors (m, v).
    AdamW,
}

impl OptimizerKind {
    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::Sgd => "sgd",
            OptimizerKind::Momentum => "momentum",
            OptimizerKind::AdamW => "adamw",
        }
    }
}

/// Hyper-parameters. AdamW follows Loshchilov & Hutter (decoupled weight decay) with PyTorch's
/// bias correction; SGD follows `torch.optim.SGD` (`buf = μ·buf + g`, coupled weight decay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerConfig {
    pub kind: OptimizerKind,
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub momentum: f32,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        Self {
            kind: OptimizerKind::AdamW,
            lr: 3e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            momentum: 0.9,
        }
    }
}

impl OptimizerConfig {
    pub fn sgd_momentum(lr: f32, momentum: f32) -> Self {
        Self { kind: OptimizerKind::Momentum, lr, momentum, weight_decay: 0.0, ..Self::default() }
    }

    /// Names of the state tensors, each as big as the parameters.
    pub fn state_names(&self) -> &'static [&'static str] {
        match self.kind {
            OptimizerKind::Sgd => &[],
            OptimizerKind::Momentum => &["momentum"],
            OptimizerKind::AdamW => &["adam_m", "adam_v"],
        }
    }

    /// Checks each setting; the first one out of its range is the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let unit = |v: f32| (0.0..1.0).contains(&v);
        use crate::plan::Range;
        let checks: [(&'static str, f32, bool, Range); 6] = [
            ("lr", self.lr, self.lr.is_finite() && self.lr > 0.0, Range::PositiveNumber),
            ("beta1", self.beta1, unit(self.beta1), Range::Unit),
            ("beta2", self.beta2, unit(self.beta2), Range::Unit),
            ("eps", self.eps, self.eps > 0.0, Range::Positive),
            ("weight_decay", self.weight_decay, self.weight_decay >= 0.0, Range::NonNegative),
            ("momentum", self.momentum, unit(self.momentum), Range::Unit),
        ];
        match checks.into_iter().find(|(_, _, ok, _)| !ok) {
            Some((name, value, _, range)) => {
                Err(ConfigError::Technique(TechniqueError::Optimizer { name, value, range }))
            }
            None => Ok(()),
        }
    }
}

/// Per-step scalars of AdamW; `step` counts from 1.
#[derive(Clone, Copy, Debug)]
pub struct AdamWStep {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub step: u32,
    /// Weight decay applies to elements `[0, decay_end)`.
    pub decay_end: u64,
}

impl AdamWStep {
    /// 1 − β₁ᵗ and 1 − β₂ᵗ.
    pub fn bias_corrections(&self) -> (f32, f32) {
        let t = self.step.max(1) as i32;
        (1.0 - self.beta1.powi(t), 1.0 - self.beta2.powi(t))
    }
}
