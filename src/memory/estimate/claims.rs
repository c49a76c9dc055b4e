//! The claims lesson: common statements about training memory, checked against the estimator.
//! Some hold (the published vectors), some break (the seed's figures): each finding is computed
//! here, not written down.

use serde::Serialize;

use super::{Checkpoint, EstimateError, Offload, Parallel, Precision, Setup, estimate, max_micro_batch, presets};
use crate::units::{format_bytes, group_digits};

/// One claim and what the estimator says about it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    pub claim: &'static str,
    pub source: &'static str,
    /// Whether the claim holds under the estimator.
    pub holds: bool,
    /// What the estimator computes, in words.
    pub finding: String,
}

const GB: f64 = 1e9;

fn preset(model: &str, gpu: &str, batch: u64, seq: u64) -> Result<Setup, EstimateError> {
    let arch = presets::model(model).ok_or_else(|| EstimateError::Invalid(format!("no model preset {model}")))?;
    let gpu = presets::gpu(gpu).ok_or_else(|| EstimateError::Invalid(format!("no GPU preset {gpu}")))?;
    Ok(Setup::new(arch, gpu, batch, seq))
}

fn peak(setup: &Setup, batch: u64) -> Result<u64, EstimateError> {
    let mut s = setup.clone();
    s.micro_batch = batch;
    Ok(estimate(&s)?.peak_bytes)
}

/// Every claim, checked.
pub fn claims() -> Result<Vec<Claim>, EstimateError> {
    let mut out = Vec::new();

    // 1. "Doubling the batch raises memory 1.8–2.5×" (the seed). Peak = S + A·b with S (model
    // states, fixed costs) independent of b, so peak(2b)/peak(b) = (S + 2Ab)/(S + Ab) < 2.
    let base = preset("llama2-7b", "h200", 1, 4096)?;
    let ratios: Vec<f64> = [1u64, 2, 4, 8]
        .iter()
        .map(|&b| Ok(peak(&base, 2 * b)? as f64 / peak(&base, b)? as f64))
        .collect::<Result<_, EstimateError>>()?;
    out.push(Claim {
        claim: "Doubling the batch size raises memory 1.8–2.5×.",
        source: "the seed document (../shared/seed)",
        holds: ratios.iter().all(|r| (1.8..=2.5).contains(r)),
        finding: format!(
            "LLaMA-2 7B, bf16 mixed precision, Adam, seq 4096: doubling b from 1, 2, 4, 8 multiplies the peak by {} — \
             never 2× or more, because model states and fixed costs do not grow with the batch; the ratio nears 2 only \
             when activations dwarf everything else, and exceeds it only through fragmentation the formula cannot see.",
            ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ")
        ),
    });

    // 2. The seed's LLaMA-2-7B figures: batch 64 → 38.2 GB, batch 128 → 89.7 GB with BF16.
    let mut s = preset("llama2-7b", "a100-80", 64, 512)?;
    let mixed = estimate(&s)?;
    let states_mixed =
        ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| mixed.get(c)).sum::<u64>();
    s.precision = Precision::PureBf16;
    let pure = estimate(&s)?;
    let states_pure =
        ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| pure.get(c)).sum::<u64>();
    out.push(Claim {
        claim: "LLaMA-2-7B with BF16 uses 38.2 GB at batch 64 and 89.7 GB at batch 128 (2.35×).",
        source: "the seed document (../shared/seed)",
        // It could hold only if the model states alone fit in 38.2 GB.
        holds: (states_pure as f64) < 38.2 * GB,
        finding: format!(
            "Full training of its {} parameters with Adam needs {:.1} GB for model states alone in bf16 mixed precision \
             (16 bytes per parameter) and {:.1} GB even in pure bf16 — above 38.2 GB before a single activation. \
             At batch 64, seq 512 the estimate is {:.0} GB; and the ratio 2.35× is impossible for the reason above.",
            group_digits(mixed.parameters),
            states_mixed as f64 / GB,
            states_pure as f64 / GB,
            mixed.peak_bytes as f64 / GB
        ),
    });

    // 3. ZeRO's published vectors (Rajbhandari et al. 2020, Figure 1): 7.5 B parameters,
    // N_d = 64 → 120 / 31.4 / 16.6 / 1.9 GB of model states.
    let mut custom = preset("llama2-7b", "a100-80", 1, 512)?;
    let per_stage: Vec<f64> = (0..=3)
        .map(|zero| {
            custom.parallel = Parallel { data: 64, zero, ..Parallel::default() };
            custom.precision = Precision::MixedFp16;
            let e = estimate(&custom)?;
            let states: u64 =
                ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum();
            Ok(states as f64 / e.parameters as f64 * 7.5)
        })
        .collect::<Result<_, EstimateError>>()?;
    let published = [120.0, 31.4, 16.6, 1.9];
    out.push(Claim {
        claim: "ZeRO stages 0–3 cut model states of a 7.5 B model on 64 GPUs from 120 GB to 31.4, 16.6 and 1.9 GB.",
        source: "Rajbhandari et al. 2020 (ZeRO), Figure 1",
        holds: per_stage.iter().zip(published).all(|(got, want)| (got - want).abs() < 0.05),
        finding: format!(
            "Scaled to 7.5 B parameters: {} GB per GPU for stages 0–3 (2Ψ + 2Ψ + 12Ψ, partitioned).",
            per_stage.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>().join(" / ")
        ),
    });

    // 4. The seed: ZeRO-3 on 8×A100 raises a 7B model's per-GPU batch from 2 to 16.
    let mut z = preset("llama2-7b", "a100-80", 1, 2048)?;
    let without = max_micro_batch(&z)?;
    z.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
    let with = max_micro_batch(&z)?;
    z.checkpoint = Checkpoint::BLOCKS;
    let with_ckpt = max_micro_batch(&z)?;
    out.push(Claim {
        claim: "ZeRO-3 on 8×A100 raises a 7B model's per-GPU batch from 2 to 16.",
        source: "the seed document (../shared/seed)",
        holds: without == 2 && with == 16,
        finding: format!(
            "LLaMA-2 7B, bf16 mixed, Adam, seq 2048 on A100 80 GB: without ZeRO not even batch 1 fits ({} is the largest); \
             with ZeRO-3 over 8 GPUs the largest micro-batch is {with}, and {with_ckpt} with checkpointing every block. \
             The gain is real, but it comes from sharding the 108 GB of model states, and the batch it allows depends on \
             sequence length and checkpointing.",
            without
        ),
    });

    // 5. The seed: QLoRA fits a 7B model at batch 64 on an A100 80G in 12 GB.
    let mut q = preset("llama2-7b", "a100-80", 64, 512)?;
    q.lora = Some(super::Adapters { rank: 16, qkv: true, proj: true, mlp: true, quantized: true });
    let at64 = estimate(&q)?;
    q.micro_batch = 1;
    let at1 = estimate(&q)?;
    q.micro_batch = 64;
    q.checkpoint = Checkpoint::BLOCKS;
    let at64_ckpt = estimate(&q)?;
    out.push(Claim {
        claim: "LoRA/QLoRA lets a 7B model train at batch 64 on one A100 80G in about 12 GB.",
        source: "the seed document (../shared/seed)",
        holds: at64.peak_bytes as f64 <= 12.5 * GB,
        finding: format!(
            "QLoRA (4-bit base, rank-16 adapters on every projection), seq 512: {:.1} GB at batch 1, {:.1} GB at batch 64 \
             ({:.1} GB with checkpointing every block). The frozen 4-bit base is small (~{:.1} GB), but activations still \
             grow with the batch: 12 GB at batch 64 needs short sequences and checkpointing.",
            at1.peak_bytes as f64 / GB,
            at64.peak_bytes as f64 / GB,
            at64_ckpt.peak_bytes as f64 / GB,
            at64.get("parameters") as f64 / GB
        ),
    });

    // 6. Korthikanti et al.'s per-layer activations: sbh(34 + 5as/h) for GPT with dropout.
    let mut g = preset("gpt2-xl", "a100-80", 4, 1024)?;
    g.lora = None;
    let (s_, b_, h_, a_) = (1024u64, 4u64, g.arch.hidden, g.arch.heads);
    let per_layer_paper = s_ * b_ * h_ * 34 + 5 * a_ * s_ * s_ * b_;
    let stats = 2 * 2 * 4 * s_ * b_; // two LayerNorms' fp32 mean and 1/std, which the paper omits
    let one = {
        let mut one = g.clone();
        one.arch.layers = 1;
        let e1 = estimate(&one)?;
        one.arch.layers = 2;
        estimate(&one)?.activations_end_of_forward - e1.activations_end_of_forward
    };
    out.push(Claim {
        claim: "A GPT layer keeps sbh(34 + 5as/h) bytes of activations in 16-bit training.",
        source: "Korthikanti et al. 2022, §4.1",
        holds: one == per_layer_paper + stats,
        finding: format!(
            "GPT-2 XL, b 4, s 1024: the estimator's layer holds {} — the paper's {} plus {} of LayerNorm statistics the \
             paper leaves out. The 5as/h term ({} here) is the attention matrix: fused attention removes it.",
            format_bytes(one),
            format_bytes(per_layer_paper),
            format_bytes(stats),
            format_bytes(5 * a_ * s_ * s_ * b_)
        ),
    });

    // 7. Offloading the optimizer (ZeRO-Offload) trades GPU memory for PCIe traffic.
    let mut o = preset("llama2-7b", "a100-80", 1, 2048)?;
    let before = estimate(&o)?;
    o.parallel = Parallel { data: 1, zero: 1, ..Parallel::default() };
    o.offload = Offload { optimizer: true, gradients: true, parameters: false };
    let after = estimate(&o)?;
    out.push(Claim {
        claim: "ZeRO-Offload moves the optimizer to the CPU and needs a fast PCIe link (at least 32 GB/s).",
        source: "the seed document (../shared/seed); Ren et al. 2021",
        holds: after.peak_bytes < before.peak_bytes && after.pcie_bytes_per_step > 0,
        finding: format!(
            "LLaMA-2 7B on one A100 80 GB, seq 2048, batch 1: {:.1} GB before, {:.1} GB after on the GPU, {:.1} GB in host memory, \
             {:.1} GB over PCIe per step (about {:.2} s at 32 GB/s, per step).",
            before.peak_bytes as f64 / GB,
            after.peak_bytes as f64 / GB,
            after.host_bytes as f64 / GB,
            after.pcie_bytes_per_step as f64 / GB,
            after.pcie_bytes_per_step as f64 / 32e9
        ),
    });
    Ok(out)
}
