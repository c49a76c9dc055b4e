//! The training frameworks oomlab's estimate can speak for (*framework profiles*): which dtypes
//! each keeps its model states in, and where that comes from. How many bytes that makes per
//! parameter is [`super::states`]' to say.

use serde::{Deserialize, Serialize};

/// The training framework, by the dtypes it really keeps its model states in (a *framework
/// profile*). Each one's bytes per parameter with Adam and bf16, and where that comes from:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// The ZeRO paper's convention (Rajbhandari et al. 2020, §3.1): 16-bit weights and
    /// gradients, fp32 master weights and Adam state, 2 + 2 + 12 = 16 bytes.
    #[default]
    Zero,
    /// PyTorch's automatic mixed precision (`torch.autocast` + `GradScaler`): the model stays
    /// fp32 (weights 4, gradients 4, Adam 8: 16 bytes, no master copy); autocast casts each
    /// linear's weight to 16 bits per forward, caches the copy (`cache_enabled=True`) and the
    /// matmul saves it for the backward pass: 2 bytes more per linear weight while the step runs.
    PytorchAmp,
    /// DeepSpeed's ZeRO optimizer (`deepspeed/runtime/zero/stage_1_and_2.py`, `stage3.py`):
    /// 16-bit weights and gradients, an fp32 partition of the weights and the Adam state on
    /// it: the ZeRO paper's 16 bytes, partitioned by stage.
    Deepspeed,
    /// Megatron-LM in bf16: fp32 main gradients (`accumulate_allreduce_grads_in_fp32`, which
    /// bf16 forces) beside bf16 weights, fp32 main weights and Adam state: 2 + 4 + 12 = 18 bytes
    /// (`megatron/training/theoretical_memory_usage.py`); its distributed optimizer (`--zero 1`
    /// here) shards the 12 over the data-parallel GPUs: 6 + 12/DP.
    Megatron,
    /// PyTorch FSDP2 (`fully_shard` with `MixedPrecisionPolicy(param_dtype=bf16,
    /// reduce_dtype=fp32)`): the sharded parameters stay fp32 and are what Adam updates (no
    /// separate master copy), gradients are reduced to fp32 shards, and each layer's bf16
    /// parameters are gathered for its compute: 4 + 4 + 8 = 16 bytes, all sharded (ZeRO-3).
    Fsdp2,
}

impl Framework {
    pub fn is_default(&self) -> bool {
        *self == Framework::Zero
    }

    pub const ALL: [Framework; 5] =
        [Framework::Zero, Framework::PytorchAmp, Framework::Deepspeed, Framework::Megatron, Framework::Fsdp2];

    /// The catalog key of the source its gradients, master weights and optimizer state cite.
    pub fn source(self) -> &'static str {
        match self {
            Framework::Zero => super::source::ZERO,
            Framework::PytorchAmp => "src-pytorch-amp",
            Framework::Deepspeed => "src-deepspeed",
            Framework::Megatron => "src-megatron",
            Framework::Fsdp2 => "src-fsdp2",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Framework::Zero => "zero",
            Framework::PytorchAmp => "pytorch-amp",
            Framework::Deepspeed => "deepspeed",
            Framework::Megatron => "megatron",
            Framework::Fsdp2 => "fsdp2",
        }
    }
}
