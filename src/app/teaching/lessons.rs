//! Lessons (story mode): short chapters that set the app to a state, highlight the control or
//! view they talk about, explain with figures computed from that state, and ask the learner to
//! predict before revealing. Every figure and every answer comes from the plan's prediction for
//! the chapter's settings (`memory::simulate`, the same numbers the views show); revealing also
//! runs a real step, so the allocator's column fills in beside the prediction. The words are
//! catalog messages (`lesson-<id>-title`, `-body`, `-question`, `-answer`, in both languages).

use super::links::Control;
use crate::app::Tab;
use crate::app::settings::{DeviceSettings, Settings, Suggestion};
use crate::app::views::{self, Veil, size};
use crate::i18n::Catalog;
use crate::plan::{Category, Phase};

/// The real-model chapters veil the estimate's figures.
const REAL: Veil = Veil { real: true, ..Veil::NONE };

pub use super::chapter::{Chapter, Question};
use super::chapter::{STEP, arg};
pub use super::facts::Facts;
use super::facts::{moe_figure, moe_setup};

/// The techniques the "fixes" chapter compares, as the OOM panel's suggestions apply them.
const FIXES: [Suggestion; 4] =
    [Suggestion::Checkpointing, Suggestion::FusedAttention, Suggestion::MixedPrecision, Suggestion::Accumulation];

/// The peak with one technique applied.
fn fixed_peak(f: &Facts, fix: Suggestion) -> Option<u64> {
    Some(f.with(|s| s.apply(fix))?.memory.peak_allocated_bytes())
}

/// The extra FLOPs (%) of a step with one technique applied, by the plan's count.
fn extra_flops(f: &Facts, fix: Suggestion) -> String {
    let base = f.plan.flops().0.max(1) as f64;
    let fixed = f.with(|s| s.apply(fix)).map_or(0, |d| d.plan.flops().0) as f64;
    format!("{:.0}", 100.0 * (fixed - base) / base)
}

/// The technique that lowers the peak the most.
fn best_fix(f: &Facts) -> Option<usize> {
    (0..FIXES.len()).min_by_key(|&i| fixed_peak(f, FIXES[i]).unwrap_or(u64::MAX))
}

/// Model states per GPU for the real-model settings, with ZeRO `zero` over `gpus` GPUs.
fn real_states(f: &Facts, zero: u8, gpus: u64) -> Option<u64> {
    let mut setup = f.settings.estimate.0.clone();
    setup.parallel.zero = zero;
    setup.parallel.data = gpus;
    let e = crate::estimate::estimate(&setup).ok()?;
    Some(
        ["parameters", "gradients", "optimizer_state", "master_weights"]
            .iter()
            .fold(0u64, |a, c| a.saturating_add(e.get(c))),
    )
}

/// The setup of the real-model chapter: LLaMA-2 7B on A100s, no ZeRO to start with.
fn real_setup(s: &mut Settings) {
    *s = Settings::default();
    s.estimate.0.parallel.zero = 0;
    s.estimate.0.parallel.data = 1;
}

/// The "diagnose" chapter's options' words.
static CATEGORY_KEYS: [&str; 5] = [
    "category-parameters",
    "category-gradients",
    "category-optimizer-state",
    "category-activations",
    "category-temporaries",
];

const DIAGNOSE_OPTIONS: [Category; 5] =
    [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::Activations, Category::Temporaries];

/// A setup that does not fit its budget.
fn out_of_memory(s: &mut Settings) {
    *s = Settings { batch: 64, device: DeviceSettings::with_budget(8 << 20), ..Settings::default() };
}

const FILL_OPTIONS: [Category; 4] =
    [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::Activations];

/// The step's figures the first chapters quote before the reveal: batch, sequence, the doubled
/// batch and the peak. Not the model states or the activations: from those a student could work
/// out the answer instead of guessing it (the answers quote them).
fn step_args(f: &Facts, t: &Catalog) -> Vec<(&'static str, String)> {
    vec![
        arg("batch", f.settings.batch),
        arg("seq", f.settings.seq),
        arg("double", f.settings.batch * 2),
        arg("peak", size(t, f.memory.peak_allocated_bytes())),
    ]
}

/// The chapters' targets that the controls panel draws: on a phone they sit in the drawer, so a
/// chapter about one offers a button that opens it.
/// With the control a teacher link may hide (the techniques' heading is always drawn).
pub const CONTROL_TARGETS: [(&str, Option<Control>); 3] =
    [("batch", Some(Control::Batch)), ("sequence", Some(Control::Sequence)), ("techniques", None)];

/// The chapters, in order: the toy's and the real models', then the remedies'
/// ([`super::remedies`]).
pub fn chapters() -> Vec<Chapter> {
    let mut all = vec![
        Chapter {
            id: "fill",
            tab: Tab::Breakdown,
            target: "breakdown",
            setup: |s| *s = Settings { lora_rank: 0, ..Settings::default() },
            args: step_args,
            // A number, not "which category is largest": the class's guesses spread over a
            // histogram, and the reveal still names the largest category.
            question: Question::Ratio {
                answer: |f| Some(f.activations() as f64 / f.states().max(1) as f64),
                tolerance: 0.15,
            },
            answer_args: |f, t| {
                let largest =
                    FILL_OPTIONS.iter().copied().max_by_key(|&c| f.at_peak(c)).unwrap_or(Category::Activations);
                vec![
                    arg("largest", views::category_name(t, largest)),
                    arg("bytes", size(t, f.at_peak(largest))),
                    arg("peak", size(t, f.memory.peak_allocated_bytes())),
                    arg("states", size(t, f.states())),
                    arg("activations", size(t, f.activations())),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "batch",
            tab: Tab::Sweep,
            target: "batch",
            setup: |s| *s = Settings { batch: 16, ..Settings::default() },
            args: step_args,
            question: Question::Ratio {
                answer: |f| {
                    let doubled = f.with(|s| s.batch *= 2)?;
                    Some(doubled.memory.peak_allocated_bytes() as f64 / f.memory.peak_allocated_bytes().max(1) as f64)
                },
                tolerance: 0.10,
            },
            answer_args: |f, t| {
                let doubled = f.with(|s| s.batch *= 2);
                let after = doubled.as_ref().map_or(0, |d| d.memory.peak_allocated_bytes());
                vec![
                    arg("before", size(t, f.memory.peak_allocated_bytes())),
                    arg("after", size(t, after)),
                    arg("states", size(t, f.states())),
                    arg("activations", size(t, f.activations())),
                    arg("activations_after", size(t, doubled.as_ref().map_or(0, Facts::activations))),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "sequence",
            tab: Tab::Timeline,
            target: "sequence",
            setup: |s| *s = Settings { batch: 16, seq: 32, ..Settings::default() },
            args: |f, _| vec![arg("seq", f.settings.seq), arg("double", f.settings.seq * 2)],
            // The saved activations at their own peak, not at the step's: at sequence 64 the
            // step's peak moves into the backward pass, where some are already freed, and the
            // ratio there (1.6×) would hide the T² term the chapter is about.
            question: Question::Ratio {
                answer: |f| {
                    let doubled = f.with(|s| s.seq *= 2)?;
                    Some(doubled.memory.activation_peak_bytes as f64 / f.memory.activation_peak_bytes.max(1) as f64)
                },
                tolerance: 0.10,
            },
            answer_args: |f, t| {
                let d = f.with(|s| s.seq *= 2);
                vec![
                    arg("before", size(t, f.memory.activation_peak_bytes)),
                    arg("after", size(t, d.as_ref().map_or(0, |d| d.memory.activation_peak_bytes))),
                    arg("attention_before", size(t, f.attention_probs())),
                    arg("attention_after", size(t, d.as_ref().map_or(0, Facts::attention_probs))),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "peak",
            tab: Tab::Timeline,
            target: "timeline-chart",
            setup: |s| *s = Settings::default(),
            args: |f, _| vec![arg("ops", f.plan.ops.len())],
            question: Question::Choice {
                options: &["lesson-peak-forward", "lesson-peak-backward", "lesson-peak-optimizer"],
                answer: |f| {
                    let op = f.memory.timeline.get(f.memory.peak_index)?.op?;
                    Some(match f.plan.ops.get(op)?.phase {
                        Phase::Forward => 0,
                        Phase::Backward => 1,
                        Phase::Optimizer => 2,
                    })
                },
            },
            answer_args: |f, t| {
                let op = f.memory.timeline.get(f.memory.peak_index).and_then(|p| p.op);
                vec![arg("peak", size(t, f.memory.peak_allocated_bytes())), arg("op", views::op_label(t, &f.plan, op))]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "allocator",
            tab: Tab::Allocator,
            target: "allocator-map",
            setup: |s| *s = Settings::default(),
            args: |_, _| Vec::new(),
            question: Question::Ratio {
                answer: |f| Some(f.memory.peak_reserved_bytes() as f64 / f.memory.peak_allocated_bytes().max(1) as f64),
                tolerance: 0.10,
            },
            answer_args: |f, t| {
                let (allocated, reserved) = (f.memory.peak_allocated_bytes(), f.memory.peak_reserved_bytes());
                vec![
                    arg("allocated", size(t, allocated)),
                    arg("reserved", size(t, reserved)),
                    arg("cached", size(t, reserved.saturating_sub(allocated))),
                ]
            },
            veils: STEP,
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "fixes",
            tab: Tab::Sweep,
            target: "techniques",
            setup: out_of_memory,
            args: |f, t| {
                vec![
                    arg("peak", size(t, f.memory.peak_allocated_bytes())),
                    arg("budget", size(t, f.settings.device.budget_bytes)),
                ]
            },
            question: Question::Choice {
                options: &["suggest-checkpointing", "suggest-fused", "suggest-mixed", "suggest-accumulation"],
                answer: best_fix,
            },
            answer_args: |f, t| {
                let best = best_fix(f).map_or(FIXES[0], |i| FIXES[i]);
                vec![
                    arg("best", best.label(t)),
                    arg("before", size(t, f.memory.peak_allocated_bytes())),
                    arg("after", size(t, fixed_peak(f, best).unwrap_or(0))),
                    arg("flops", extra_flops(f, best)),
                    arg("checkpoint_flops", extra_flops(f, Suggestion::Checkpointing)),
                ]
            },
            veils: STEP,
            reads_step: false,
            step: 0,
        },
        Chapter {
            id: "real",
            tab: Tab::RealModels,
            target: "real-models",
            setup: real_setup,
            // Not the states per GPU without ZeRO: they are the answer's numerator.
            args: |f, _| {
                let parameters = crate::estimate::estimate(&f.settings.estimate.0).map_or(0, |e| e.parameters);
                vec![arg("parameters", crate::units::group_digits(parameters))]
            },
            question: Question::Ratio {
                answer: |f| Some(real_states(f, 0, 8)? as f64 / real_states(f, 3, 8)?.max(1) as f64),
                tolerance: 0.15,
            },
            answer_args: |f, t| {
                vec![
                    arg("before", size(t, real_states(f, 0, 8).unwrap_or(0))),
                    arg("after", size(t, real_states(f, 3, 8).unwrap_or(0))),
                ]
            },
            veils: REAL,
            reads_step: false,
            step: 0,
        },
        Chapter {
            id: "diagnose",
            tab: Tab::Breakdown,
            target: "oom-panel",
            setup: out_of_memory,
            args: |f, t| vec![arg("budget", size(t, f.settings.device.budget_bytes))],
            question: Question::Choice {
                options: &CATEGORY_KEYS,
                answer: |f| {
                    let category = f.oom()?.category;
                    DIAGNOSE_OPTIONS.iter().position(|&c| c == category)
                },
            },
            answer_args: |f, t| match f.oom() {
                Some(o) => vec![
                    arg("tensor", o.tensor_name),
                    arg("op", o.op_label),
                    arg("category", views::category_name(t, o.category)),
                ],
                None => vec![arg("tensor", "—"), arg("op", "—"), arg("category", "—")],
            },
            veils: Veil { oom_category: true, ..STEP },
            reads_step: true,
            step: 0,
        },
        Chapter {
            id: "moe",
            tab: Tab::RealModels,
            target: "real-models",
            setup: moe_setup,
            args: |f, _| {
                let a = &f.settings.estimate.0.arch;
                let moe = a.block.moe.unwrap_or(crate::estimate::Moe {
                    experts: 1,
                    top_k: 1,
                    ..crate::estimate::Moe::default()
                });
                vec![
                    arg("experts", moe.experts),
                    arg("k", moe.top_k),
                    arg("parameters", crate::units::group_digits(a.parameters())),
                    // Not the parameters a token touches: the states' ratio follows from them.
                ]
            },
            question: Question::Ratio {
                answer: |f| Some(moe_figure(f, false, STATES)? as f64 / moe_figure(f, true, STATES)?.max(1) as f64),
                tolerance: 0.15,
            },
            answer_args: |f, t| {
                let figure = |routed, of| size(t, moe_figure(f, routed, of).unwrap_or(0));
                vec![
                    arg("states", figure(false, STATES)),
                    arg("routed_states", figure(true, STATES)),
                    arg("activations", figure(false, &["activations"])),
                    arg("routed_activations", figure(true, &["activations"])),
                ]
            },
            veils: REAL,
            reads_step: false,
            step: 0,
        },
        Chapter {
            id: "fragment",
            // The allocator map: after the reveal, the segments as they stood when the step failed.
            tab: Tab::Allocator,
            target: "allocator-map",
            setup: |s| {
                *s = Settings {
                    batch: 48,
                    seq: 64,
                    device: DeviceSettings::with_budget(54 << 20),
                    ..Settings::default()
                }
            },
            // The peak it needs, which is under the budget; not what the allocator reserves.
            args: |f, t| {
                vec![
                    arg("batch", f.settings.batch),
                    arg("seq", f.settings.seq),
                    arg("peak", size(t, f.memory.peak_allocated_bytes())),
                    arg("budget", size(t, f.settings.device.budget_bytes)),
                ]
            },
            question: Question::Choice {
                options: &["lesson-fragment-fits", "lesson-fragment-fragmented", "lesson-fragment-full"],
                answer: |f| Some(f.fit_outcome()),
            },
            answer_args: |f, t| vec![arg("outcome", f.fit_words(t))],
            veils: Veil { fits: true, ..STEP },
            reads_step: true,
            step: 0,
        },
    ];
    all.extend(super::remedies::chapters());
    all
}

/// The model states' categories in an estimate.
const STATES: &[&str] = &["parameters", "gradients", "optimizer_state", "master_weights"];

/// The learner's answer before the reveal.
#[derive(Clone, Debug, PartialEq)]
pub enum Guess {
    Ratio(f64),
    Choice(Option<usize>),
}

/// How a revealed guess was judged.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The answer, the guess, how far off (%) and whether that is close enough.
    Ratio {
        answer: f64,
        guess: f64,
        off_percent: f64,
        close: bool,
    },
    Choice {
        answer: usize,
        right: bool,
    },
}

/// Judges `guess` against the chapter's answer for `facts`.
pub fn judge(chapter: &Chapter, facts: &Facts, guess: &Guess) -> Option<Verdict> {
    match (&chapter.question, guess) {
        (Question::Ratio { answer, tolerance }, Guess::Ratio(g)) => {
            let a = answer(facts)?;
            let off = (g - a).abs() / a.abs().max(f64::MIN_POSITIVE);
            Some(Verdict::Ratio { answer: a, guess: *g, off_percent: 100.0 * off, close: off <= *tolerance })
        }
        (Question::Choice { answer, .. }, Guess::Choice(g)) => {
            let a = answer(facts)?;
            Some(Verdict::Choice { answer: a, right: *g == Some(a) })
        }
        _ => None,
    }
}
