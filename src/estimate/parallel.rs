//! Data, tensor, sequence, expert, pipeline and context parallelism and ZeRO: how a setup's
//! GPUs share the model and the step.

use serde::{Deserialize, Serialize};

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
    pub schedule: Schedule,
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

fn is_1f1b(s: &Schedule) -> bool {
    *s == Schedule::OneFOneB
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

/// The pipeline schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// One forward, one backward (PipeDream-Flush, Narayanan et al. 2021).
    #[default]
    OneFOneB,
    /// Interleaved 1F1B: each stage holds this many chunks of its layers (v, Megatron-LM's
    /// `--num-layers-per-virtual-pipeline-stage` gives L/(p·v)).
    Interleaved(u64),
}

impl Schedule {
    /// v, the model chunks per stage (1 under 1F1B).
    pub fn chunks(self) -> u64 {
        match self {
            Schedule::OneFOneB => 1,
            Schedule::Interleaved(v) => v,
        }
    }

    /// As `--pp-schedule` writes it: `1f1b`, `interleaved:V`.
    pub fn name(self) -> String {
        match self {
            Schedule::OneFOneB => "1f1b".into(),
            Schedule::Interleaved(v) => format!("interleaved:{v}"),
        }
    }

    /// Reads `1f1b` or `interleaved:V` (V ≥ 2).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "1f1b" => Some(Schedule::OneFOneB),
            t => t.strip_prefix("interleaved:")?.parse().ok().filter(|v| *v >= 2).map(Schedule::Interleaved),
        }
    }
}
