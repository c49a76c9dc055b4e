//! Memory per batch size: one configuration's peak at each batch — predicted (the plan replayed
//! through the allocator) or from real steps — shared by the app's chart and export,
//! `oomlab sweep` and its CSV.

use std::sync::Arc;

use super::step::{Schedule, StepAllocator, simulate_on};
use super::{Budget, StepMemory, StepOom, simulate_peak};
use crate::plan::{Category, Plan, TensorId, TensorInfo};

/// One configuration's memory at each batch size of a sweep: a prediction's points fail with the
/// allocator's out-of-memory error; `oomlab sweep --execute`'s may fail with the host's too.
#[derive(Clone, Debug)]
pub struct SweepSeries<E = Box<StepOom>> {
    pub name: String,
    /// (effective batch, peak memory or why it did not fit).
    pub points: Vec<(usize, Result<StepMemory, E>)>,
}

impl<E> SweepSeries<E> {
    pub fn largest_fitting(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_ok()).map(|(b, _)| *b).max()
    }
    pub fn first_oom(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_err()).map(|(b, _)| *b).min()
    }
}

/// The predicted peak at each batch of `batches` whose plan `plan_at` builds (the others are
/// left out), under `budget`.
///
/// A plan's ops and tensors do not depend on the batch size, only the tensors' shapes do, and
/// each dimension is affine in it (B·T rows of something). So the plan is built at four batch
/// sizes — the two smallest, the middle one and the largest — and when those agree on every
/// op, label, tensor name, dtype and lifetime, and their dimensions and element counts lie on
/// one line, every other batch size runs the same schedule with sizes read off that line,
/// without building its plan (building was ~60 % of a sweep). An out-of-memory message names
/// the tensor's shape at its own batch size, read off the same line. Validity is monotone in
/// the batch (positive, sizes under the limits), so the largest building means all the others
/// do. Anything else builds every plan. `plan_at` must not round its argument (the app's
/// settings pass multiples of the accumulation steps only).
pub fn predict(
    batches: &[usize],
    budget: impl Into<Budget>,
    plan_at: impl Fn(usize) -> Option<Plan> + Sync,
) -> Vec<(usize, Result<StepMemory, Box<StepOom>>)> {
    let budget = budget.into();
    let exact = |b: usize| Some((b, simulate_peak(&plan_at(b)?, budget)));
    let Some(line) = SizeLine::new(batches, &plan_at) else {
        return batches.iter().filter_map(|&b| exact(b)).collect();
    };
    let one = |b: usize| {
        let Some(sizes) = line.sizes(b) else { return exact(b) };
        let sa = StepAllocator::with_schedule(Arc::clone(&line.schedule), sizes, budget, false);
        match simulate_on(&line.plan, sa, false) {
            Ok(m) => Some((b, Ok(m))),
            Err(oom) => match line.info_at(oom.tensor, b) {
                Some(info) => {
                    Some((b, Err(Box::new(StepOom::new(oom.tensor, &info, oom.op, oom.op_label, oom.error, "")))))
                }
                None => exact(b),
            },
        }
    };
    // Batch sizes are independent: over rayon's pool on native (in order either way).
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        batches.par_iter().filter_map(|&b| one(b)).collect()
    }
    #[cfg(target_arch = "wasm32")]
    batches.iter().filter_map(|&b| one(b)).collect()
}

/// A value at batch b as b0's value plus a slope per extra sequence.
#[derive(Clone, Copy)]
struct Affine {
    at_b0: u64,
    slope: u64,
}

impl Affine {
    /// The line through (b0, v0) and (b1, v1), if it passes exactly through every (b, v) of
    /// `checks`.
    fn fit((b0, v0): (usize, u64), (b1, v1): (usize, u64), checks: &[(usize, u64)]) -> Option<Self> {
        let (rise, run) = (v1.checked_sub(v0)?, (b1 - b0) as u64);
        let line = Affine { at_b0: v0, slope: (rise % run == 0).then_some(rise / run)? };
        checks.iter().all(|&(b, v)| line.at(b - b0) == Some(v)).then_some(line)
    }

    fn at(&self, extra: usize) -> Option<u64> {
        self.slope.checked_mul(extra as u64)?.checked_add(self.at_b0)
    }
}

/// Each tensor's dimensions and element count as lines in the batch size, read off plans built
/// at four batch sizes, with the schedule they share.
struct SizeLine {
    /// The plan at the smallest batch: its names and labels are every batch's.
    plan: Plan,
    schedule: Arc<Schedule>,
    /// Per tensor: elements, and each dimension.
    tensors: Vec<(Affine, Vec<Affine>)>,
    b0: usize,
    b_max: usize,
}

impl SizeLine {
    fn new(batches: &[usize], plan_at: &impl Fn(usize) -> Option<Plan>) -> Option<Self> {
        let mut sorted: Vec<usize> = batches.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() < 5 {
            return None; // no plans to save
        }
        let at = [sorted[0], sorted[1], sorted[sorted.len() / 2], sorted[sorted.len() - 1]];
        let plans = at.iter().map(|&b| plan_at(b)).collect::<Option<Vec<Plan>>>()?;
        let p0 = &plans[0];
        let schedule = Schedule::new(p0);
        let same = |p: &Plan| {
            p.tensors.len() == p0.tensors.len()
                && p.tensors.iter().zip(&p0.tensors).all(|(a, b)| {
                    a.dtype == b.dtype && a.name == b.name && a.category == b.category && a.shape.len() == b.shape.len()
                })
                && p.ops.len() == p0.ops.len()
                && p.ops.iter().zip(&p0.ops).all(|(a, b)| a.label == b.label && a.op.name() == b.op.name())
                && Schedule::new(p) == schedule
        };
        if !plans[1..].iter().all(same) {
            return None;
        }
        let fit = |value: &dyn Fn(&Plan) -> u64| {
            let checks: Vec<(usize, u64)> = at[2..].iter().zip(&plans[2..]).map(|(&b, p)| (b, value(p))).collect();
            Affine::fit((at[0], value(&plans[0])), (at[1], value(&plans[1])), &checks)
        };
        let tensors = (0..p0.tensors.len())
            .map(|i| {
                let numel = fit(&|p: &Plan| p.tensors[i].numel())?;
                let dims = (0..p0.tensors[i].shape.len())
                    .map(|d| fit(&|p: &Plan| p.tensors[i].shape[d]))
                    .collect::<Option<Vec<Affine>>>()?;
                Some((numel, dims))
            })
            .collect::<Option<Vec<_>>>()?;
        let plan = plans.into_iter().next()?;
        Some(Self { plan, schedule: Arc::new(schedule), tensors, b0: at[0], b_max: at[3] })
    }

    /// Every tensor's bytes at batch `b` (None outside the line's range).
    fn sizes(&self, b: usize) -> Option<Vec<u64>> {
        if b < self.b0 || b > self.b_max {
            return None;
        }
        let extra = b - self.b0;
        let dtypes = self.plan.tensors.iter().map(|t| t.dtype);
        self.tensors.iter().zip(dtypes).map(|((numel, _), dtype)| Some(dtype.bytes_for(numel.at(extra)?))).collect()
    }

    /// Tensor `t` as the plan at batch `b` describes it.
    fn info_at(&self, t: TensorId, b: usize) -> Option<TensorInfo> {
        let (_, dims) = self.tensors.get(t.0)?;
        let extra = b.checked_sub(self.b0)?;
        let shape = dims.iter().map(|d| d.at(extra)).collect::<Option<Vec<u64>>>()?;
        Some(TensorInfo { shape, ..self.plan.tensors.get(t.0)?.clone() })
    }
}

/// The columns a sweep's CSV has besides the peaks.
pub struct CsvColumns<'a> {
    /// A first column naming the series (several configurations in one file).
    pub config: bool,
    /// A column with the closed-form activations at each batch.
    pub formula: Option<&'a dyn Fn(usize) -> u64>,
}

/// One row per series and batch size: whether it fits, the peaks, bytes per category at the
/// peak, or the OOM message (quoted).
pub fn csv<E: std::fmt::Display>(series: &[SweepSeries<E>], columns: &CsvColumns<'_>) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "'"));
    let mut out = String::new();
    if columns.config {
        out.push_str("config,");
    }
    out.push_str("batch,fits,peak_allocated_bytes,peak_reserved_bytes");
    for c in Category::ALL {
        out.push(',');
        out.push_str(c.name());
    }
    if columns.formula.is_some() {
        out.push_str(",activation_formula_bytes");
    }
    out.push_str(",oom\n");
    for s in series {
        for (batch, m) in &s.points {
            if columns.config {
                out.push_str(&quote(&s.name));
                out.push(',');
            }
            match m {
                Ok(m) => {
                    out.push_str(&format!("{batch},true,{},{}", m.peak_allocated_bytes(), m.peak_reserved_bytes()));
                    for c in Category::ALL {
                        out.push_str(&format!(",{}", m.peak_allocated.get(c)));
                    }
                }
                Err(_) => {
                    out.push_str(&format!("{batch},false,,"));
                    for _ in Category::ALL {
                        out.push(',');
                    }
                }
            }
            if let Some(f) = columns.formula {
                out.push_str(&format!(",{}", f(*batch)));
            }
            out.push(',');
            if let Err(why) = m {
                out.push_str(&quote(&why.to_string()));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::LoraConfig;
    use crate::model::{ModelConfig, StepShape};
    use crate::plan::{AttentionKind, Checkpoint, OptimizerConfig, OptimizerKind, Precision, Techniques};

    /// The shortcut gives exactly what building every plan gives: each peak, category, tensor
    /// alive at the peak, placement, and each out-of-memory message (shapes at its own batch).
    #[test]
    fn predicting_from_the_size_line_equals_building_every_plan() {
        let lora = LoraConfig { rank: 4, alpha: 8.0, qkv: true, proj: false, mlp: true };
        let cases = [
            (Techniques::default(), OptimizerKind::AdamW),
            (
                Techniques { checkpoint: Checkpoint::BLOCKS, attention: AttentionKind::Fused, ..Default::default() },
                OptimizerKind::AdamW,
            ),
            (
                Techniques { checkpoint: Checkpoint::Selective, precision: Precision::Fp16, ..Default::default() },
                OptimizerKind::Momentum,
            ),
            (
                Techniques {
                    checkpoint: Checkpoint::Every(2),
                    precision: Precision::Bf16,
                    accum: 3,
                    ..Default::default()
                },
                OptimizerKind::Sgd,
            ),
            (Techniques { lora: Some(lora), ..Default::default() }, OptimizerKind::AdamW),
        ];
        let model = ModelConfig { n_layers: 3, ..ModelConfig::toy(65) };
        for (techniques, kind) in cases {
            let optimizer = OptimizerConfig { kind, ..Default::default() };
            let plan_at =
                |b: usize| Plan::build_with(&model, StepShape { batch: b, seq: 33 }, &optimizer, &techniques).ok();
            // Odd batches and an odd sequence: 16-bit tensors of odd length round up to 4 bytes.
            let batches: Vec<usize> = (1..=96).collect();
            assert!(SizeLine::new(&batches, &plan_at).is_some(), "{techniques:?}: the shortcut applies");
            for budget in [6 << 20, 24 << 20, 1 << 30] {
                let fast = predict(&batches, budget, plan_at);
                let slow: Vec<_> =
                    batches.iter().map(|&b| (b, simulate_peak(&plan_at(b).expect("builds"), budget))).collect();
                assert_eq!(fast.len(), slow.len());
                let mut ooms = 0;
                for ((b, f), (_, s)) in fast.iter().zip(&slow) {
                    match (f, s) {
                        (Ok(f), Ok(s)) => {
                            assert_eq!(f.stats, s.stats, "{techniques:?} b {b}");
                            assert_eq!(f.peak_allocated, s.peak_allocated, "b {b}");
                            assert_eq!(f.peak_requested, s.peak_requested, "b {b}");
                            assert_eq!(f.live_at_peak, s.live_at_peak, "b {b}");
                            assert_eq!(f.placements, s.placements, "b {b}");
                            assert_eq!(f.activation_peak_bytes, s.activation_peak_bytes, "b {b}");
                        }
                        (Err(f), Err(s)) => {
                            assert_eq!((f.tensor, f.op, &f.message), (s.tensor, s.op, &s.message), "b {b}");
                            ooms += 1;
                        }
                        _ => panic!("{techniques:?} budget {budget} batch {b}: {f:?} vs {s:?}"),
                    }
                }
                if budget == 6 << 20 {
                    assert!(ooms > 0, "{techniques:?}: the small budget runs out somewhere");
                }
            }
        }
    }

    #[test]
    fn a_plan_that_is_not_affine_in_the_batch_falls_back_to_building_each() {
        let model = ModelConfig::toy(65);
        let optimizer = OptimizerConfig::default();
        // Rounding the batch up to a multiple of 4 is not a line: the shortcut must refuse it.
        let plan_at = |b: usize| {
            Plan::build_with(
                &model,
                StepShape { batch: b.div_ceil(4) * 4, seq: 16 },
                &optimizer,
                &Techniques::default(),
            )
            .ok()
        };
        let batches: Vec<usize> = (1..=40).collect();
        assert!(SizeLine::new(&batches, &plan_at).is_none());
        let fast = predict(&batches, 1 << 30, plan_at);
        for (b, m) in fast {
            let want = simulate_peak(&plan_at(b).expect("builds"), 1 << 30).expect("fits");
            assert_eq!(m.expect("fits").stats, want.stats, "b {b}");
        }
    }
}
