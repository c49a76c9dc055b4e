//! Offload to host memory (ZeRO-Offload, Ren et al. 2021): the optimizer's states — and
//! optionally the gradients — live in the host's memory, and the optimizer step runs on the CPU.
//!
//! What the plan does, on one GPU:
//!
//! | mode | on the device | in host memory | copies each step |
//! |------|---------------|----------------|------------------|
//! | `optimizer` | parameters, gradients | fp32 master weights, optimizer state, fp32 gradients | the gradients down after the backward pass; the updated parameters up |
//! | `optimizer+gradients` | parameters; each unit's gradients only until they are copied down | the same | each unit's gradients down as soon as they are final (added on the host); the updated parameters up |
//!
//! The host always holds an fp32 master copy of the parameters, as DeepSpeed's CPU optimizer
//! does (its `single_partition_of_fp32_groups`), since the CPU cannot update memory on the
//! device; under mixed precision this copy is the master weights that left the device. The
//! copies are ops of the plan ([`super::Op::CopyToHost`], [`super::Op::CopyToDevice`]); host
//! tensors are never placed by the device's allocator ([`super::Lifetime::Host`]).

use serde::{Deserialize, Serialize};

use crate::model::UnknownName;
use crate::plan::ConfigError;

/// What lives in host memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Offload {
    /// Everything on the device.
    #[default]
    None,
    /// The optimizer's states (and an fp32 copy of the parameters and the gradients) on the host.
    Optimizer,
    /// The optimizer's states and the gradients on the host.
    OptimizerGradients,
}

impl Offload {
    pub const ALL: [Offload; 3] = [Offload::None, Offload::Optimizer, Offload::OptimizerGradients];

    /// Parses `none`, `optimizer` or `optimizer+gradients`.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Offload::None),
            "optimizer" => Ok(Offload::Optimizer),
            "optimizer+gradients" | "optimizer_gradients" | "optimizer,gradients" => Ok(Offload::OptimizerGradients),
            other => {
                Err(ConfigError::Name(UnknownName { what: crate::model::Setting::Offload, got: other.to_string() }))
            }
        }
    }

    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Offload::None => "none",
            Offload::Optimizer => "optimizer",
            Offload::OptimizerGradients => "optimizer+gradients",
        }
    }

    /// Whether anything lives in host memory.
    pub fn is_on(self) -> bool {
        self != Offload::None
    }

    /// Whether the gradients live in host memory.
    pub fn gradients(self) -> bool {
        self == Offload::OptimizerGradients
    }
}

/// A PCIe 4.0 ×16 link's bandwidth in one direction, bytes per second: the figure the views
/// time offload's copies at (a prediction, labelled as one).
pub const PCIE_BYTES_PER_SEC: f64 = 32e9;

/// Bytes a step of `plan` copies (to the host, to the device), summed over its copy ops.
pub fn bus_bytes(plan: &super::Plan) -> (u64, u64) {
    let bytes = |v: super::View| plan.tensor(v.tensor).dtype.bytes_for(v.len);
    plan.ops.iter().fold((0u64, 0u64), |(down, up), n| match n.op {
        super::Op::CopyToHost(c) => (down.saturating_add(bytes(c.src)), up),
        super::Op::CopyToDevice(c) => (down, up.saturating_add(bytes(c.dst))),
        _ => (down, up),
    })
}

/// Device bytes `plan` keeps in host memory instead, kept for the run: the optimizer's states,
/// the master weights of mixed precision, and the gradients when they go too. (The host's fp32
/// copy of the weights in fp32 training, and its fp32 gradients, are the host's own additions.)
pub fn offloaded_bytes(plan: &super::Plan) -> u64 {
    use super::Category;
    let host = |c: Category| -> u64 {
        plan.tensors.iter().filter(|t| t.host && t.category == c).map(super::TensorInfo::size_bytes).sum()
    };
    let mode = plan.techniques.offload;
    if !mode.is_on() {
        return 0;
    }
    let flat = plan.layout.flat_len;
    let dt = plan.techniques.precision.dtype();
    let master = if dt.is_half() { host(Category::MasterWeights) } else { 0 };
    let grads = if mode.gradients() { dt.bytes_for(flat) } else { 0 };
    host(Category::OptimizerState) + master + grads
}
