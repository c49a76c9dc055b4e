//! Pipeline parallelism (GPipe, Huang et al. 2019; 1F1B and the interleaved schedule, Narayanan
//! et al. 2021, as Megatron-LM runs them): the layers split over p stages, one GPU each; the
//! first stage holds the embedding, the last the final norm, the lm_head and the logits. Under
//! 1F1B stage r keeps the activations of min(p − r, m) micro-batches (m per step, `--accum`);
//! under the interleaved schedule each stage holds v chunks of its layers and stage r keeps
//! min(2(p − r − 1) + (v − 1)p + 1, m·v) chunks' activations (Megatron-LM's warm-up count,
//! `get_pipeline_model_parallel_forward_backward_func`'s interleaved schedule, plus the one in
//! its backward): on the first stage (1 + (p − 1)/(p·v)) times 1F1B's, Megatron's own
//! "interleaved schedule memory penalty" (`theoretical_memory_usage.py`). Each stage is estimated
//! as a model of its own ([`Slice`]); the estimate shown is the most loaded stage's.

use serde::Serialize;

use super::arch::Slice;
pub use super::parallel::Schedule;
use super::{Estimate, EstimateError, Setup};

/// One stage of the pipeline, as the estimate lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stage {
    pub stage: u64,
    pub first_layer: u64,
    pub layers: u64,
    pub embedding: bool,
    pub head: bool,
    /// Micro-batches whose activations the stage holds at once (chunks over v when
    /// interleaved).
    pub micro_batches_in_flight: f64,
    /// The stage's parameters.
    pub parameters: u64,
    pub peak_bytes: u64,
    pub fits: bool,
}

impl Stage {
    /// What the stage holds besides its layers: "embedding", "head", "both" or "none" (the
    /// catalogs' selector for it).
    pub fn holds(&self) -> &'static str {
        match (self.embedding, self.head) {
            (true, true) => "both",
            (true, false) => "embedding",
            (false, true) => "head",
            (false, false) => "none",
        }
    }
}

/// Stage r's layers (from, count): L/p each, the remainder to the last stages (the first holds
/// the embedding, so it is never the one given more).
pub fn layers_of(layers: u64, p: u64, r: u64) -> (u64, u64) {
    let (base, extra) = (layers / p, layers % p);
    let count = |r: u64| base + u64::from(r >= p - extra);
    ((0..r).map(count).sum(), count(r))
}

/// Stage r's activations in flight, in chunks, and the chunks one micro-batch makes (v).
pub fn in_flight(p: u64, r: u64, schedule: Schedule, micro_batches: u64) -> (u64, u64) {
    let v = schedule.chunks();
    let chunks = match schedule {
        Schedule::OneFOneB => (p - r).min(micro_batches),
        Schedule::Interleaved(_) => (2 * (p - r - 1) + (v - 1) * p + 1).min(micro_batches.saturating_mul(v)),
    };
    (chunks.max(1), v)
}

/// Each stage's setup (its slice of the model) and its activations in flight.
pub(super) fn stages(s: &Setup) -> Vec<(Setup, u64, (u64, u64))> {
    let p = s.parallel.pipeline;
    (0..p)
        .map(|r| {
            let (embedding, head) = (r == 0, r == p - 1);
            let (first_layer, layers) = layers_of(s.arch.layers, p, r);
            let slice = match s.parallel.schedule {
                Schedule::OneFOneB => Slice { first_layer, embedding, head, ..Slice::default() },
                // Megatron-LM's interleaved assignment: model chunk j·p + r is the stage's j-th,
                // each of L/(p·v) layers (`validate` asks that they divide).
                Schedule::Interleaved(v) => {
                    let chunk = s.arch.layers / (p * v);
                    Slice { first_layer: r * chunk, embedding, head, chunk, stride: p * chunk }
                }
            };
            let mut stage = s.clone();
            stage.arch.layers = layers;
            stage.arch.stage = Some(slice);
            (stage, r, in_flight(p, r, s.parallel.schedule, s.accum))
        })
        .collect()
}

/// The estimate of every stage, the most loaded first (ties: the earlier stage), and the list.
pub(super) fn estimate(
    s: &Setup,
    one: impl Fn(&Setup, (u64, u64)) -> Result<Estimate, EstimateError>,
) -> Result<Estimate, EstimateError> {
    let mut list = Vec::new();
    let mut worst: Option<Estimate> = None;
    for (stage, r, flight) in stages(s) {
        let e = one(&stage, flight)?;
        let slice = stage.arch.stage.unwrap_or_default();
        list.push(Stage {
            stage: r,
            first_layer: slice.first_layer,
            layers: stage.arch.layers,
            embedding: slice.embedding,
            head: slice.head,
            micro_batches_in_flight: flight.0 as f64 / flight.1 as f64,
            parameters: stage.arch.parameters(),
            peak_bytes: e.peak_bytes,
            fits: e.fits(),
        });
        if worst.as_ref().is_none_or(|w| e.peak_bytes > w.peak_bytes) {
            worst = Some(e);
        }
    }
    // No stage only when there are 0 of them (which `validate` refuses first).
    let (stages, layers) = (s.parallel.pipeline, s.arch.layers);
    let mut e = worst.ok_or(EstimateError::PipelineStages { stages, layers })?;
    e.parameters = s.arch.parameters();
    e.stages = list;
    Ok(e)
}
