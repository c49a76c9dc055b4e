//! Data, tensor, sequence, expert, pipeline and context parallelism and ZeRO: how a setup's
//! GPUs share the model and the step.

use serde::{Deserialize, Serialize};

use super::{EstimateError, Setup};
use crate::plan::AttentionKind;

/// Data, tensor and sequence parallelism and ZeRO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallel {
    /// N_d, data-parallel GPUs.
    pub data: u64,
    /// t, tensor-parallel GPUs (Megatron-LM, Shoeybi et al. 2019).
    pub tensor: u64,
    /// Sequence parallelism (Korthikanti et al. 2022): the LayerNorm/dropout regions are split
    /// along the sequence over the t GPUs too.
    pub sequence: bool,
    /// ZeRO stage 0–3 (Rajbhandari et al. 2020) over the N_d GPUs.
    pub zero: u8,
    /// Expert parallelism (GShard, Lepikhin et al. 2020): a mixture's experts are divided over
    /// this many of the N_d data-parallel GPUs, which exchange tokens all-to-all.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub expert: u64,
    /// p, pipeline stages, one GPU each ([`super::pipeline`]).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub pipeline: u64,
    /// The pipeline's schedule (1F1B, or interleaved over v chunks per stage).
    #[serde(default, skip_serializing_if = "is_1f1b")]
    pub schedule: super::pipeline::Schedule,
    /// c, context-parallel GPUs: the sequence split over them, each holding s/c of every
    /// activation (RingAttention, Liu et al. 2023; DeepSpeed-Ulysses, Jacobs et al. 2023).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub context: u64,
    /// How the context-parallel GPUs attend across the split.
    #[serde(default, skip_serializing_if = "is_ring")]
    pub context_kind: ContextKind,
}

/// Context parallelism's attention across the split sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextKind {
    /// RingAttention (Liu et al. 2023; Megatron-Core's `p2p`): each GPU keeps its queries and
    /// passes its key/value block around the ring, attending block by block.
    #[default]
    Ring,
    /// DeepSpeed-Ulysses (Jacobs et al. 2023): all-to-all before and after the attention, so
    /// that each GPU attends over the whole sequence for heads / c of the heads.
    Ulysses,
}

impl ContextKind {
    pub fn name(self) -> &'static str {
        match self {
            ContextKind::Ring => "ring",
            ContextKind::Ulysses => "ulysses",
        }
    }
}

fn is_ring(k: &ContextKind) -> bool {
    *k == ContextKind::Ring
}

fn is_1f1b(s: &super::pipeline::Schedule) -> bool {
    *s == super::pipeline::Schedule::OneFOneB
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

impl Default for Parallel {
    fn default() -> Self {
        Self {
            data: 1,
            tensor: 1,
            sequence: false,
            zero: 0,
            expert: 1,
            pipeline: 1,
            schedule: Default::default(),
            context: 1,
            context_kind: ContextKind::Ring,
        }
    }
}

impl Parallel {
    /// The GPUs that hold the same slice of the model and share its gradients, over which ZeRO
    /// partitions the model states: the data-parallel GPUs and, within each, the context-parallel
    /// ones (each computes the same weights' gradients for its part of the sequence). Megatron-LM's
    /// distributed optimizer shards over its data-and-context-parallel group, DeepSpeed-Ulysses'
    /// ZeRO over its sequence-data-parallel group, torchtitan's FSDP2 over `dp_shard × cp`.
    pub fn replicas(&self) -> u64 {
        self.data.saturating_mul(self.context)
    }
}

/// Context parallelism splits the sequence evenly and runs fused attention kernels (ring
/// attention and Ulysses are built on FlashAttention); Ulysses splits the heads too.
pub(super) fn validate_context(s: &Setup) -> Result<(), EstimateError> {
    let c = s.parallel.context;
    if c == 1 {
        return Ok(());
    }
    if !s.seq.is_multiple_of(c) {
        return Err(EstimateError::ContextDivide { seq: s.seq, context: c });
    }
    if s.attention != AttentionKind::Fused {
        return Err(EstimateError::ContextNeedsFused);
    }
    let (a, t) = (&s.arch, s.parallel.tensor);
    if s.parallel.context_kind == ContextKind::Ulysses
        && !(a.heads.is_multiple_of(c * t) && a.kv_heads.is_multiple_of(c * t))
    {
        return Err(EstimateError::UlyssesHeads { heads: a.heads, kv_heads: a.kv_heads, context: c, tensor: t });
    }
    Ok(())
}
