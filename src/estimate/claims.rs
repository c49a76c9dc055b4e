//! The claims lesson: common statements about training memory, checked against the estimator.
//! Some hold (the published vectors), some break (the seed's figures): each finding is computed
//! here, not written down.

use serde::Serialize;

use super::{Checkpoint, EstimateError, Offload, Parallel, Setup, StatePrecision, estimate, max_micro_batch, presets};
use crate::i18n::Catalog;
use crate::units::{format_bytes, group_digits};

/// One claim and what the estimator says about it. Its words come from the catalogs
/// (`claim-<id>`, `-source`, `-test`, `-finding` in `i18n/`), its numbers from the estimator:
/// the English fields are what the CLI prints and its JSON carries; [`Claim::text`] says the
/// same in another language from the same arguments.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Claim {
    /// The catalogs' name for it.
    #[serde(skip)]
    pub id: &'static str,
    /// The finding's and the verdict's arguments, formatted as they are shown.
    #[serde(skip)]
    pub args: Vec<(&'static str, String)>,
    pub claim: String,
    pub source: String,
    /// Whether the claim holds under the estimator, with the tolerance `test` states.
    pub holds: bool,
    /// How the verdict is reached: the quantity compared and its tolerance.
    pub test: String,
    /// What the estimator computes, in words; every number in it is one of `numbers`.
    pub finding: String,
    /// The computed values the finding and the verdict use, by name (GB = 10⁹ bytes, seconds,
    /// ratios, batch sizes).
    pub numbers: Vec<(&'static str, f64)>,
}

/// A part of a claim's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Claim,
    Source,
    Test,
    Finding,
}

impl Claim {
    fn new(
        en: &Catalog,
        id: &'static str,
        holds: bool,
        args: Vec<(&'static str, String)>,
        numbers: Vec<(&'static str, f64)>,
    ) -> Self {
        let mut c = Claim { id, args, holds, numbers, ..Claim::default() };
        (c.claim, c.source, c.test, c.finding) =
            (c.text(en, Part::Claim), c.text(en, Part::Source), c.text(en, Part::Test), c.text(en, Part::Finding));
        c
    }

    /// The claim's words in `t`'s language.
    pub fn text(&self, t: &Catalog, part: Part) -> String {
        let suffix = match part {
            Part::Claim => "",
            Part::Source => "-source",
            Part::Test => "-test",
            Part::Finding => "-finding",
        };
        let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
            self.args.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
        t.format(&format!("claim-{}{suffix}", self.id), &args)
    }

    /// A computed value by name.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.numbers.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }
}

const GB: f64 = 1e9;

/// The A100's dense bf16 throughput (NVIDIA A100 datasheet: 312 TFLOP/s), the fastest the GPU
/// can compute a step: the ZeRO-Offload check compares the PCIe transfer with it.
pub const A100_BF16_FLOPS: f64 = 312e12;

/// Model FLOPs of one training step without recomputation, 72·B·s·L·h²·(1 + s/(6h) + V/(12hL))
/// (Narayanan et al. 2021, eq. 3 with 3 passes instead of 4): forward and backward of every
/// GEMM, attention's two batched products and the logits.
pub fn step_flops(setup: &Setup) -> f64 {
    let (b, s) = (setup.micro_batch as f64, setup.seq as f64);
    let (l, h, v) = (setup.arch.layers as f64, setup.arch.hidden as f64, setup.arch.vocab as f64);
    72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * l))
}

fn preset(model: &str, gpu: &str, batch: u64, seq: u64) -> Result<Setup, EstimateError> {
    let arch = presets::model(model).ok_or_else(|| EstimateError::NoModelPreset { name: model.into() })?;
    let gpu = presets::gpu(gpu).ok_or_else(|| EstimateError::NoGpuPreset { name: gpu.into() })?;
    Ok(Setup::new(arch, gpu, batch, seq))
}

fn peak(setup: &Setup, batch: u64) -> Result<u64, EstimateError> {
    let mut s = setup.clone();
    s.micro_batch = batch;
    Ok(estimate(&s)?.peak_bytes)
}

/// Parameters, gradients, optimizer state and master weights of an estimate.
fn model_states(e: &super::Estimate) -> u64 {
    ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum()
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / GB
}

fn list(values: &[f64], decimals: usize) -> String {
    values.iter().map(|v| format!("{v:.decimals$}")).collect::<Vec<_>>().join(", ")
}

/// Whether `got` is within `tolerance` (a fraction) of `claimed`.
fn near(got: f64, claimed: f64, tolerance: f64) -> bool {
    (got - claimed).abs() <= tolerance * claimed
}

/// The tolerance for "about" and for the seed's figures: ±10 %.
pub const TOLERANCE: f64 = 0.10;

/// Every claim, checked.
pub fn claims() -> Result<Vec<Claim>, EstimateError> {
    let en = Catalog::new(crate::i18n::Lang::En);
    let mut out = Vec::new();

    // 1. "Doubling the batch raises memory 1.8–2.5×" (the seed). Peak = S + A·b with S (model
    // states, fixed costs) independent of b, so peak(2b)/peak(b) = (S + 2Ab)/(S + Ab) < 2.
    let base = preset("llama2-7b", "h200", 1, 4096)?;
    let ratios: Vec<f64> = [1u64, 2, 4, 8]
        .iter()
        .map(|&b| Ok(peak(&base, 2 * b)? as f64 / peak(&base, b)? as f64))
        .collect::<Result<_, EstimateError>>()?;
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    let in_range = ratios.iter().filter(|r| (1.8..=2.5).contains(*r)).count();
    out.push(Claim::new(
        &en,
        "doubling",
        in_range == ratios.len(),
        vec![
            ("ratios", list(&ratios, 2)),
            ("below", if hi < 2.0 { "yes" } else { "no" }.into()),
            ("inside", in_range.to_string()),
            ("count", ratios.len().to_string()),
        ],
        vec![
            ("ratio_b1", ratios[0]),
            ("ratio_b2", ratios[1]),
            ("ratio_b4", ratios[2]),
            ("ratio_b8", ratios[3]),
            ("ratio_min", lo),
            ("ratio_max", hi),
        ],
    ));

    // 2. The seed's LLaMA-2-7B figures: batch 64 → 38.2 GB, batch 128 → 89.7 GB with BF16. The
    // whole peak at each batch, in the most favourable reading of "BF16" (bf16 mixed precision or
    // pure bf16, whichever is smaller), against the figure ±10 %.
    let mut s = preset("llama2-7b", "a100-80", 64, 512)?;
    let mixed = estimate(&s)?;
    let mixed128 = peak(&s, 128)?;
    s.precision = StatePrecision::PureBf16;
    let pure = estimate(&s)?;
    let pure128 = peak(&s, 128)?;
    let at64 = gb(mixed.peak_bytes.min(pure.peak_bytes));
    let at128 = gb(mixed128.min(pure128));
    let ratio = at128 / at64;
    out.push(Claim::new(
        &en,
        "seed-figures",
        near(at64, 38.2, TOLERANCE) && near(at128, 89.7, TOLERANCE) && near(ratio, 2.35, TOLERANCE),
        vec![
            ("tolerance", format!("{:.0}", TOLERANCE * 100.0)),
            ("parameters", group_digits(mixed.parameters)),
            ("at64", format!("{at64:.1}")),
            ("at128", format!("{at128:.1}")),
            ("ratio", format!("{ratio:.2}")),
            ("mixed", format!("{:.1}", gb(model_states(&mixed)))),
            ("pure", format!("{:.1}", gb(model_states(&pure)))),
        ],
        vec![
            ("peak_b64_gb", at64),
            ("peak_b128_gb", at128),
            ("ratio", ratio),
            ("states_mixed_gb", gb(model_states(&mixed))),
            ("states_pure_gb", gb(model_states(&pure))),
        ],
    ));

    // 3. ZeRO's published vectors (Rajbhandari et al. 2020, Figure 1): 7.5 B parameters,
    // N_d = 64 → 120 / 31.4 / 16.6 / 1.9 GB of model states.
    let mut custom = preset("llama2-7b", "a100-80", 1, 512)?;
    let per_stage: Vec<f64> = (0..=3)
        .map(|zero| {
            custom.parallel = Parallel { data: 64, zero, ..Parallel::default() };
            custom.precision = StatePrecision::MixedFp16;
            let e = estimate(&custom)?;
            Ok(model_states(&e) as f64 / e.parameters as f64 * 7.5)
        })
        .collect::<Result<_, EstimateError>>()?;
    let published = [120.0, 31.4, 16.6, 1.9];
    out.push(Claim::new(
        &en,
        "zero-stages",
        per_stage.iter().zip(published).all(|(got, want)| (got - want).abs() < 0.05),
        vec![("stages", per_stage.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>().join(" / "))],
        vec![
            ("stage0_gb", per_stage[0]),
            ("stage1_gb", per_stage[1]),
            ("stage2_gb", per_stage[2]),
            ("stage3_gb", per_stage[3]),
        ],
    ));

    // 4. The seed: ZeRO-3 on 8×A100 raises a 7B model's per-GPU batch from 2 to 16.
    let mut z = preset("llama2-7b", "a100-80", 1, 2048)?;
    let without = max_micro_batch(&z)?;
    let states = model_states(&estimate(&z)?);
    z.parallel = Parallel { data: 8, zero: 3, ..Parallel::default() };
    let with = max_micro_batch(&z)?;
    z.checkpoint = Checkpoint::BLOCKS;
    let with_ckpt = max_micro_batch(&z)?;
    out.push(Claim::new(
        &en,
        "zero3-batch",
        without == 2 && with == 16,
        vec![
            ("fits_without", if without == 0 { "no" } else { "yes" }.into()),
            ("without", without.to_string()),
            ("with", with.to_string()),
            ("with_checkpointing", with_ckpt.to_string()),
            ("states", format!("{:.1}", gb(states))),
        ],
        vec![
            ("max_batch_without", without as f64),
            ("max_batch_zero3", with as f64),
            ("max_batch_zero3_checkpointed", with_ckpt as f64),
            ("states_gb", gb(states)),
        ],
    ));

    // 5. The seed: QLoRA fits a 7B model at batch 64 on an A100 80G in about 12 GB ("about":
    // ±10 %), in the most favourable setting (with or without checkpointing, whichever is less).
    let mut q = preset("llama2-7b", "a100-80", 64, 512)?;
    q.lora = Some(super::Adapters { rank: 16, qkv: true, proj: true, mlp: true, quantized: true });
    let at64 = estimate(&q)?;
    let at1 = peak(&q, 1)?;
    q.checkpoint = Checkpoint::BLOCKS;
    let at64_ckpt = estimate(&q)?;
    let best = gb(at64.peak_bytes.min(at64_ckpt.peak_bytes));
    out.push(Claim::new(
        &en,
        "qlora",
        best <= 12.0 * (1.0 + TOLERANCE),
        vec![
            ("tolerance", format!("{:.0}", TOLERANCE * 100.0)),
            ("at1", format!("{:.1}", gb(at1))),
            ("at64", format!("{:.1}", gb(at64.peak_bytes))),
            ("at64_checkpointed", format!("{:.1}", gb(at64_ckpt.peak_bytes))),
            ("base", format!("{:.1}", gb(at64.get("parameters")))),
        ],
        vec![
            ("peak_b1_gb", gb(at1)),
            ("peak_b64_gb", gb(at64.peak_bytes)),
            ("peak_b64_checkpointed_gb", gb(at64_ckpt.peak_bytes)),
            ("base_gb", gb(at64.get("parameters"))),
        ],
    ));

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
    out.push(Claim::new(
        &en,
        "korthikanti",
        one == per_layer_paper + stats,
        vec![
            ("layer", format_bytes(one)),
            ("paper", format_bytes(per_layer_paper)),
            ("statistics", format_bytes(stats)),
            ("attention", format_bytes(5 * a_ * s_ * s_ * b_)),
        ],
        vec![("layer_bytes", one as f64), ("paper_bytes", per_layer_paper as f64), ("statistics_bytes", stats as f64)],
    ));

    // 7. Offloading the optimizer (ZeRO-Offload) trades GPU memory for PCIe traffic, and the
    // claim names the bandwidth: at 32 GB/s the traffic of a step must take no longer than the
    // step's compute at the GPU's peak (the most favourable case for the claim: any real step is
    // slower, which hides more traffic), or the link, not the GPU, sets the pace.
    use crate::plan::offload::PCIE_BYTES_PER_SEC;
    let mut o = preset("llama2-7b", "a100-80", 1, 2048)?;
    let before = estimate(&o)?;
    o.parallel = Parallel { data: 1, zero: 1, ..Parallel::default() };
    o.offload = Offload { optimizer: true, gradients: true, parameters: false };
    let after = estimate(&o)?;
    let pcie_secs = after.pcie_bytes_per_step as f64 / PCIE_BYTES_PER_SEC;
    let compute_secs = |b: u64| {
        let mut s = o.clone();
        s.micro_batch = b;
        step_flops(&s) / A100_BF16_FLOPS
    };
    // The smallest micro-batch whose compute hides the transfer: the traffic does not depend on
    // the batch (2Ψ of gradients down, 2Ψ of parameters up), the compute grows linearly with it.
    let hides_from = (pcie_secs / compute_secs(1)).ceil().max(1.0) as u64;
    let needed = after.pcie_bytes_per_step as f64 / compute_secs(1);
    out.push(Claim::new(
        &en,
        "offload",
        after.peak_bytes < before.peak_bytes && pcie_secs <= compute_secs(1),
        vec![
            ("before", format!("{:.1}", gb(before.peak_bytes))),
            ("after", format!("{:.1}", gb(after.peak_bytes))),
            ("host", format!("{:.1}", gb(after.host_bytes))),
            ("pcie", format!("{:.1}", gb(after.pcie_bytes_per_step))),
            ("pcie_secs", format!("{pcie_secs:.2}")),
            ("compute_secs", format!("{:.2}", compute_secs(1))),
            ("needed", format!("{:.0}", needed / GB)),
            ("hides_from", hides_from.to_string()),
        ],
        vec![
            ("gpu_before_gb", gb(before.peak_bytes)),
            ("gpu_after_gb", gb(after.peak_bytes)),
            ("host_gb", gb(after.host_bytes)),
            ("pcie_gb_per_step", gb(after.pcie_bytes_per_step)),
            ("pcie_secs_at_32", pcie_secs),
            ("compute_secs", compute_secs(1)),
            ("needed_gb_per_sec", needed / GB),
            ("hides_from_batch", hides_from as f64),
        ],
    ));
    Ok(out)
}
