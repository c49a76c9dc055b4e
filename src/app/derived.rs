//! What the views show, derived from the settings: the plan, its prediction and the sweep.

use std::sync::Arc;

use super::settings::real_model::EstimateSettings;
use super::settings::{MAX_BATCH, Settings};
use crate::estimate::{self, Estimate, EstimateError, KindSaved, OtherRuntime, Saved, Setup};
use crate::memory::run::RunPredictor;
use crate::memory::sweep::{SweepSeries, predict};
use crate::memory::{Budget, StepMemory, StepOom, simulate};
use crate::plan::{ConfigError, Plan};

/// The batch sizes with a stacked bar in the memory-vs-batch chart: every power of two and
/// three times one, up to the batch slider's end ([`MAX_BATCH`], a power of two), from that one
/// constant. Its lines have every batch size the controls allow ([`sweep_batches`]).
pub const SWEEP_BATCHES: [usize; 2 * MAX_BATCH.ilog2() as usize] = bars();

const fn bars() -> [usize; 2 * MAX_BATCH.ilog2() as usize] {
    assert!(MAX_BATCH.is_power_of_two() && MAX_BATCH >= 2);
    let mut out = [0; 2 * MAX_BATCH.ilog2() as usize];
    // 1, 2, then 1.5p and 2p for p = 2, 4, …: 3, 4, 6, 8, 12, 16, …, up to MAX_BATCH.
    (out[0], out[1]) = (1, 2);
    let (mut i, mut p) = (2, 2);
    while p < MAX_BATCH {
        (out[i], out[i + 1]) = (p + p / 2, 2 * p);
        i += 2;
        p *= 2;
    }
    out
}

/// Every batch size the batch slider allows that splits into `accum` micro-batches: the sweep
/// predicts each one (a few milliseconds for all of them), so the chart's lines, its
/// largest fitting batch and its first out-of-memory batch are exact wherever the slider is.
pub fn sweep_batches(accum: usize) -> Vec<usize> {
    (1..=MAX_BATCH).filter(|b| b.is_multiple_of(accum.max(1))).collect()
}

/// What the views show, derived from the settings whenever they change.
pub struct Derived {
    /// Shared, so a frame can hold it while it draws without copying the plan.
    pub plan: Result<Arc<Plan>, ConfigError>,
    /// The plan replayed through the allocator under the budget; None when there is no plan
    /// (`plan` says why).
    pub predicted: Option<Result<StepMemory, Box<StepOom>>>,
    pub sweep: Vec<SweepSeries>,
    /// Memory per GPU against the number of simulated GPUs, by ZeRO stage, at the current
    /// batch per GPU (see [`per_gpu`]).
    pub per_gpu: Vec<GpuSeries>,
    /// The three ways to batch the speeches at the current batch (see [`ways`]).
    pub ways: Vec<WayRow>,
    /// Batches of their own length: the run predicted step by step through one allocator, as
    /// the executor runs it (a step's prediction depends on what the steps before left cached).
    run: Option<RunPredictor>,
}

/// One way to batch the speeches at a batch size: its first batch's padding share, the peak over
/// its useful tokens, and the largest batch that fits the budget (None: none does).
#[derive(Clone, Debug, PartialEq)]
pub struct WayRow {
    pub way: crate::plan::Batching,
    pub padding_share: f64,
    pub bytes_per_token: Option<u64>,
    pub largest: Option<usize>,
}

/// Padded, bucketed and packed batches of the current settings (predicted; a binary search over
/// the batch sizes the slider allows for each way's largest: a few dozen predictions, unless
/// `known` has them from settings that differ only in the batch).
pub fn ways(
    settings: &Settings,
    vocab: usize,
    known: Option<&[(crate::plan::Batching, Option<usize>)]>,
) -> Vec<WayRow> {
    use crate::plan::Batching;
    let budget = crate::memory::Budget::Bytes(settings.device.budget_bytes);
    [Batching::Padded, Batching::Bucketed, Batching::Packed]
        .into_iter()
        .filter_map(|way| {
            let mut s = settings.clone();
            s.device.batching = way;
            let t = s.techniques();
            let plan_at = |b: usize| s.plan_with(vocab, b, &t).ok();
            let plan = plan_at(s.batch)?;
            let cap = if way.varies_in_length() { s.dims.max_seq } else { plan.shape.seq };
            let shape = crate::model::StepShape { batch: plan.global_batch_shape().batch, seq: cap };
            let batch = crate::documents::Documents::shared().batch(way, shape, s.seed, 0).ok()?;
            let share = crate::documents::PaddingShare::of(&batch);
            let peak = crate::memory::simulate_peak(&plan, crate::memory::Budget::Unlimited).ok()?;
            let fits =
                |k: usize| plan_at(k * t.accum).is_some_and(|p| crate::memory::simulate_peak(&p, budget).is_ok());
            // The largest k (batch k·accum) that fits, if 1 does.
            let largest = match known.and_then(|k| k.iter().find(|(w, _)| *w == way)) {
                Some(&(_, largest)) => largest,
                None => {
                    let (mut lo, mut hi) = (0usize, MAX_BATCH / t.accum.max(1));
                    while lo < hi {
                        let mid = (lo + hi).div_ceil(2);
                        if fits(mid) { lo = mid } else { hi = mid - 1 }
                    }
                    (lo > 0).then_some(lo * t.accum)
                }
            };
            Some(WayRow {
                way,
                padding_share: share.share(),
                bytes_per_token: (share.useful > 0).then(|| peak.peak_allocated_bytes() / share.useful),
                largest,
            })
        })
        .collect()
}

/// One ZeRO stage's peak per GPU (allocated, predicted without a budget) for 1 to 8 simulated
/// GPUs; None where the plan is refused.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSeries {
    pub stage: u8,
    pub points: Vec<(usize, Option<u64>)>,
}

/// The memory-per-GPU chart's series: every stage over 1 to [`crate::plan::MAX_GPUS`] GPUs,
/// the other settings as they are (32 predictions of the toy: a few milliseconds).
pub fn per_gpu(settings: &Settings, vocab: usize) -> Vec<GpuSeries> {
    (0..=3u8)
        .map(|stage| GpuSeries {
            stage,
            points: (1..=crate::plan::MAX_GPUS)
                .map(|gpus| {
                    let mut t = settings.techniques();
                    t.parallel = crate::plan::Parallel { gpus, zero: stage, ..t.parallel };
                    let peak = settings
                        .plan_with(vocab, settings.batch, &t)
                        .ok()
                        .and_then(|p| crate::memory::simulate_peak(&p, crate::memory::Budget::Unlimited).ok())
                        .map(|m| m.peak_allocated_bytes());
                    (gpus, peak)
                })
                .collect(),
        })
        .collect()
}

impl Derived {
    pub fn new(settings: &Settings, vocab: usize) -> Self {
        Self::reusing(settings, vocab, None)
    }

    /// [`Self::new`], taking `previous`'s sweep when only the batch changed (`previous`: the
    /// settings it was derived from, and it): dragging the batch slider moves the chart's
    /// marker without predicting ~1000 steps again.
    pub fn reusing(settings: &Settings, vocab: usize, previous: Option<(&Settings, &mut Derived)>) -> Self {
        let plan = settings.plan(vocab).map(Arc::new);
        let predicted = plan.as_ref().ok().map(|p| simulate(p, settings.device.budget_bytes));
        // Only the batch changed: the sweep and each way's largest fitting batch stay.
        let (sweep, largest) = match previous {
            Some((before, d)) if Settings { batch: settings.batch, ..before.clone() } == *settings => {
                (std::mem::take(&mut d.sweep), Some(d.ways.iter().map(|w| (w.way, w.largest)).collect::<Vec<_>>()))
            }
            _ => (Self::sweep(settings, vocab), None),
        };
        let per_gpu = if plan.is_ok() { per_gpu(settings, vocab) } else { Vec::new() };
        let ways = if plan.is_ok() { ways(settings, vocab, largest.as_deref()) } else { Vec::new() };
        Self { plan, predicted, sweep, per_gpu, ways, run: None }
    }

    /// The plan and its prediction moved to the run's batch number `step` (padded and bucketed
    /// batches: each its own length); the sweep and the chart per GPU stay (each batch size at
    /// its first batch's length).
    ///
    /// The prediction is the run's: every step from the first through one allocator (the
    /// steps already predicted are kept, so following a run costs one step's prediction each).
    pub fn at_step(&mut self, settings: &Settings, vocab: usize, step: u64) {
        self.plan = settings.plan_at(vocab, step).map(Arc::new);
        let budget = Budget::Bytes(settings.device.budget_bytes);
        if self.run.as_ref().is_none_or(|r| r.steps() as u64 > step) {
            self.run = Some(RunPredictor::new(budget, false));
        }
        let run = self.run.as_mut().map(|run| {
            while (run.steps() as u64) < step {
                let Ok(p) = settings.plan_at(vocab, run.steps() as u64) else { return Err(()) };
                run.step(Arc::new(p)).map_err(|_| ())?.ok();
            }
            Ok(run)
        });
        self.predicted = match (run, &self.plan) {
            (Some(Ok(run)), Ok(p)) => run.step(Arc::clone(p)).ok(),
            _ => None,
        };
        if self.predicted.is_none() {
            // Not one run (a step refused, or other model states): this step alone.
            self.run = None;
            self.predicted = self.plan.as_ref().ok().map(|p| simulate(p, budget));
        }
    }

    fn sweep(settings: &Settings, vocab: usize) -> Vec<SweepSeries> {
        let mut configs = vec![("this setup".to_string(), settings.techniques())];
        configs.extend(settings.overlays.iter().map(|t| (t.describe(), *t)));
        configs
            .into_iter()
            .map(|(name, t)| SweepSeries {
                name,
                points: predict(&sweep_batches(t.accum), settings.device.budget_bytes, |b| {
                    settings.plan_with(vocab, b, &t).ok()
                }),
            })
            .collect()
    }
}

/// What the view shows, recomputed when its settings change (milliseconds).
pub struct EstimateDerived {
    pub setup: Result<Setup, EstimateError>,
    pub estimate: Option<Estimate>,
    pub max_micro_batch: u64,
    /// (micro-batch, estimate) for 1, 2, 4, … up to twice the largest that fits.
    pub sweep: Vec<(u64, Estimate)>,
    /// The runtime profiles: both verdicts while none is chosen, one layer's saved tensors.
    pub runtime: Option<RuntimeDerived>,
}

impl EstimateDerived {
    pub fn new(settings: &EstimateSettings) -> Self {
        // A setup whose estimate is refused (a size beyond what oomlab counts) is shown as
        // refused, with the reason, like an impossible one.
        let setup = settings.setup().and_then(|s| estimate::estimate(&s).map(|e| (s, e)));
        let (setup, estimate, max_micro_batch, sweep, runtime) = match setup {
            Ok((s, e)) => {
                let max = estimate::max_micro_batch(&s).unwrap_or(0);
                let sweep = estimate::sweep(&s, &estimate::sweep_batches(max)).unwrap_or_default();
                let runtime = Some(RuntimeDerived::new(&s));
                (Ok(s), Some(e), max, sweep, runtime)
            }
            Err(e) => (Err(e), None, 0, Vec::new(), None),
        };
        Self { setup, estimate, max_micro_batch, sweep, runtime }
    }
}

/// What the view shows of the profiles, computed with the estimate (not every frame).
pub struct RuntimeDerived {
    /// HF eager's figures while no profile is chosen.
    pub other: Option<OtherRuntime>,
    pub layer: Vec<Saved>,
    /// When the layers are not all alike (a mixture's dense layers, layers without RoPE): each
    /// kind's, in place of `layer`.
    pub kinds: Vec<KindSaved>,
    pub outside: Vec<Saved>,
}

impl RuntimeDerived {
    pub fn new(s: &Setup) -> Self {
        Self {
            other: OtherRuntime::of(s),
            layer: estimate::saved_per_layer(s),
            kinds: estimate::layer_kinds(s),
            outside: estimate::saved_outside(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bars_are_the_ladder_up_to_the_sliders_end() {
        assert_eq!(SWEEP_BATCHES, [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]);
        assert_eq!(SWEEP_BATCHES.last(), Some(&MAX_BATCH));
        assert!(SWEEP_BATCHES.iter().all(|b| sweep_batches(1).contains(b)), "every bar is a batch the slider allows");
    }
}
