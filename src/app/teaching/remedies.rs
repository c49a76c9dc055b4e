//! The chapters on the remedies the question names beyond the toy's techniques: data
//! parallelism's communication buckets, ZeRO-2 and ZeRO-3 over simulated GPUs, padding
//! against packing, the fragmentation that batches of varying lengths leave behind, and the
//! context parallelism that lets a long sequence fit.

use super::chapter::{Chapter, Question, STEP, arg, tensor_bytes};
use crate::app::Tab;
use crate::app::settings::{DeviceSettings, Settings};
use crate::app::views::{Veil, size};
use crate::memory::{Budget, simulate};
use crate::plan::Category;

/// The chapters, in order.
pub fn chapters() -> Vec<Chapter> {
    vec![
        Chapter {
            id: "buckets",
            tab: Tab::Breakdown,
            target: "breakdown",
            setup: |s| {
                let parallel = crate::plan::Parallel { gpus: 2, zero: 0, ..crate::plan::Parallel::default() };
                let device = DeviceSettings { parallel, ..DeviceSettings::default() };
                *s = Settings { batch: 4, seq: 32, device, ..Settings::default() };
            },
            // One GPU's peak alone, which the answer is a multiple of; not the buffers'.
            args: |f, t| {
                vec![
                    arg("gpus", f.settings.device.parallel.gpus),
                    arg("batch", f.settings.batch),
                    arg("alone", size(t, f.alone_peak().unwrap_or(0))),
                ]
            },
            question: Question::Ratio {
                answer: |f| Some(f.memory.peak_allocated_bytes() as f64 / f.alone_peak()?.max(1) as f64),
                // A guess of "the same" (1×) is wrong: the buffers add about 14 %.
                tolerance: 0.08,
            },
            answer_args: |f, t| {
                let mut zero = f.settings.clone();
                zero.device.parallel.zero = 2;
                let with = zero.plan(f.vocab).ok().and_then(|p| simulate(&p, Budget::Unlimited).ok());
                let zero_bytes = with.map_or(0, |m| m.peak_requested.get(Category::Communication));
                vec![
                    arg("peak", size(t, f.memory.peak_allocated_bytes())),
                    arg("communication", size(t, tensor_bytes(f, Category::Communication))),
                    arg("gradients", size(t, tensor_bytes(f, Category::Gradients))),
                    arg("bucket", f.settings.device.parallel.bucket_elems),
                    arg("zero", size(t, zero_bytes)),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "zero2",
            tab: Tab::Breakdown,
            target: "breakdown",
            setup: |s| {
                let parallel = crate::plan::Parallel { gpus: 4, zero: 2, ..crate::plan::Parallel::default() };
                let device = DeviceSettings { parallel, ..DeviceSettings::default() };
                *s = Settings { batch: 4, seq: 32, device, ..Settings::default() };
            },
            // DDP's states on each GPU, which the answer divides; not ZeRO-2's.
            args: |f, t| {
                vec![arg("gpus", f.settings.device.parallel.gpus), arg("ddp", size(t, f.kept_states(0).unwrap_or(0)))]
            },
            question: Question::Ratio {
                answer: |f| Some(f.kept_states(0)? as f64 / f.kept_states(2)?.max(1) as f64),
                tolerance: 0.1,
            },
            answer_args: |f, t| {
                let parameters = f.plan.tensor(f.plan.handles.params).size_bytes();
                vec![
                    arg("gpus", f.settings.device.parallel.gpus),
                    arg("zero2", size(t, f.kept_states(2).unwrap_or(0))),
                    arg("parameters", size(t, parameters)),
                    arg("zero3", size(t, f.kept_states(3).unwrap_or(0))),
                ]
            },
            veils: STEP,
            reads_step: false,
            step: 0,
        },
        Chapter {
            id: "zero3",
            tab: Tab::Breakdown,
            target: "breakdown",
            setup: |s| {
                let parallel = crate::plan::Parallel { gpus: 4, zero: 3, ..crate::plan::Parallel::default() };
                let device = DeviceSettings { parallel, ..DeviceSettings::default() };
                *s = Settings { batch: 4, seq: 32, device, ..Settings::default() };
            },
            // The whole model's parameters, which the answer is a multiple of.
            args: |f, t| {
                vec![arg("gpus", f.settings.device.parallel.gpus), arg("parameters", size(t, f.full_parameters()))]
            },
            question: Question::Ratio {
                answer: |f| Some(f.gathered().1 as f64 / f.full_parameters().max(1) as f64),
                tolerance: 0.1,
            },
            answer_args: |f, t| {
                let (gathers, bytes) = f.gathered();
                vec![
                    arg("gpus", f.settings.device.parallel.gpus),
                    arg("gathers", gathers),
                    arg("gathered", size(t, bytes)),
                    arg("parameters", size(t, f.full_parameters())),
                ]
            },
            veils: STEP,
            reads_step: false,
            step: 0,
        },
        Chapter {
            id: "padding",
            tab: Tab::Breakdown,
            target: "breakdown",
            setup: |s| {
                let dims = crate::app::settings::ModelDims { max_seq: 256, ..Settings::default().dims };
                let device = DeviceSettings { batching: crate::plan::Batching::Padded, ..DeviceSettings::default() };
                *s = Settings { batch: 8, dims, device, ..Settings::default() };
            },
            // The batch, its longest speech and its useful tokens: what packing would need follows.
            args: |f, _| {
                let useful = f.padded_and_packed().map_or(0, |p| p.0);
                vec![arg("batch", f.settings.batch), arg("longest", f.plan.shape.seq), arg("useful", useful)]
            },
            question: Question::Ratio {
                answer: |f| {
                    let (_, padded, packed, _) = f.padded_and_packed()?;
                    Some(padded as f64 / packed.max(1) as f64)
                },
                tolerance: 0.1,
            },
            answer_args: |f, t| {
                let (useful, padded, packed, rows) = f.padded_and_packed().unwrap_or_default();
                let positions = (f.settings.batch * f.plan.shape.seq) as u64;
                let share = 100.0 * (1.0 - useful as f64 / positions.max(1) as f64);
                vec![
                    arg("padded", size(t, padded)),
                    arg("packed", size(t, packed)),
                    arg("rows", rows),
                    arg("share", format!("{share:.0}")),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "lengths",
            // The allocator map: after the reveal, the segments as batch 2 found them.
            tab: Tab::Allocator,
            target: "allocator-map",
            setup: |s| {
                // Bucketed speeches of the toy with positions for the longest: a batch of 221
                // characters, then one of 256 (found by a search over seeds and budgets: the
                // second fits an empty GPU with 8 MiB to spare, but not after the first).
                let dims = crate::app::settings::ModelDims { max_seq: 256, ..Settings::default().dims };
                let batching = crate::plan::Batching::Bucketed;
                let device = DeviceSettings { batching, ..DeviceSettings::with_budget(100 << 20) };
                *s = Settings { batch: 16, seed: 5, dims, device, ..Settings::default() };
            },
            // Both batches' lengths and the second's need alone, under the budget: not what the
            // first leaves cached.
            args: |f, t| {
                let (first, _) = f.batch_alone(0).unwrap_or_default();
                let (next, alone) = f.batch_alone(LENGTHS_STEP).unwrap_or_default();
                vec![
                    arg("batch", f.settings.batch),
                    arg("first", first),
                    arg("next", next),
                    arg("alone", size(t, alone)),
                    arg("budget", size(t, f.settings.device.budget_bytes)),
                ]
            },
            question: Question::Choice {
                options: &["lesson-lengths-fits", "lesson-lengths-fragmented", "lesson-lengths-full"],
                answer: |f| f.run_outcome(LENGTHS_STEP),
            },
            answer_args: |f, t| vec![arg("outcome", f.run_words(t, LENGTHS_STEP))],
            veils: Veil { fits: true, ..STEP },
            reads_step: true,
            step: LENGTHS_STEP,
        },
        Chapter {
            id: "context",
            tab: Tab::RealModels,
            target: "real-models",
            setup: context_setup,
            // The model, the sequence and the data-parallel GPUs: not any GPU count's estimate.
            args: |f, _| {
                let s = &f.settings.estimate.0;
                vec![
                    arg("model", s.arch.name.clone()),
                    arg("seq", crate::units::group_digits(s.seq)),
                    arg("gpus", s.parallel.data),
                ]
            },
            question: Question::Choice {
                options: &[
                    "lesson-context-one",
                    "lesson-context-two",
                    "lesson-context-four",
                    "lesson-context-eight",
                    "lesson-context-more",
                ],
                answer: |f| {
                    let fits = |c| context_estimate(f, c).is_some_and(|e| e.fits());
                    Some(CONTEXT_SPLITS.iter().position(|&c| fits(c)).unwrap_or(CONTEXT_SPLITS.len()))
                },
            },
            answer_args: |f, t| {
                let peak = |c| size(t, context_estimate(f, c).map_or(0, |e| e.peak_bytes));
                let fitting =
                    CONTEXT_SPLITS.iter().copied().find(|&c| context_estimate(f, c).is_some_and(|e| e.fits()));
                let ring = fitting.and_then(|c| context_estimate(f, c)).map_or(0, |e| e.get("communication"));
                vec![
                    arg("one", peak(1)),
                    arg("two", peak(2)),
                    arg("four", peak(4)),
                    arg("eight", peak(8)),
                    arg("fits", fitting.unwrap_or(0)),
                    arg("gpus", f.settings.estimate.0.parallel.data),
                    arg("communication", size(t, ring)),
                ]
            },
            veils: Veil { real: true, ..Veil::NONE },
            reads_step: false,
            step: 0,
        },
    ]
}

/// The context chapter's choices: how many GPUs split the sequence.
const CONTEXT_SPLITS: [u64; 4] = [1, 2, 4, 8];

/// Llama 3.1 8B at its full 131,072-token context on H100s: fused attention, every block
/// checkpointed, ZeRO-3 over 8 data-parallel GPUs; one GPU's share of the sequence does not fit.
fn context_setup(s: &mut Settings) {
    *s = Settings::default();
    let e = &mut s.estimate.0;
    if let Some(m) = crate::estimate::catalog::find("llama-3.1-8b") {
        e.arch = m.model.arch.clone();
    }
    if let Some(gpu) = crate::estimate::presets::gpu("h100-80") {
        e.gpu = gpu;
    }
    e.seq = 131072;
    e.micro_batch = 1;
    e.accum = 1;
    e.attention = crate::plan::AttentionKind::Fused;
    e.checkpoint = crate::plan::Checkpoint::Every(1);
    e.parallel = crate::estimate::Parallel { data: 8, zero: 3, ..crate::estimate::Parallel::default() };
}

/// The chapter's setup with the sequence split over `c` GPUs (ring attention).
fn context_estimate(f: &super::facts::Facts, c: u64) -> Option<crate::estimate::Estimate> {
    let mut s = f.settings.estimate.0.clone();
    s.parallel.context = c;
    crate::estimate::estimate(&s).ok()
}

/// The lengths chapter asks about the run's second batch.
const LENGTHS_STEP: u64 = 1;
