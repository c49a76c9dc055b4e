//! Challenges: goals checked against a real executed step, never against a stored answer. A
//! challenge starts from a setup; the learner changes the settings and runs a step; the check
//! reads that step — its settings, the allocator's account of it, its time — and says pass or
//! fail with the numbers. The best result (lowest peak) per challenge is kept, the passed ones
//! are remembered, and a challenge travels in a link (`challenge=<id>`). The words are catalog
//! messages (`challenge-<id>-title`, `-goal`, `-pass`, `-fail`).

use crate::app::settings::{DeviceSettings, ModelDims, Preset, Settings};
use crate::app::views::size;
use crate::i18n::Catalog;
use crate::memory::{Budget, StepMemory, simulate};
use crate::plan::{AttentionKind, Checkpoint, Precision};

/// What a check reads: the executed step and what it was started from.
pub struct ChallengeRun<'a> {
    /// The settings the step ran with.
    pub settings: &'a Settings,
    /// The allocator's live account of the step.
    pub memory: &'a StepMemory,
    /// The settings the challenge started from.
    pub start: &'a Settings,
    pub vocab: usize,
}

impl ChallengeRun<'_> {
    /// The step's floating-point operations, from its plan.
    fn flops(&self, s: &Settings) -> u64 {
        s.plan(self.vocab).map_or(u64::MAX, |p| p.flops().0)
    }
}

/// A check's outcome: passed or not, and why, as catalog arguments.
pub struct Check {
    pub passed: bool,
    pub args: Vec<(&'static str, String)>,
}

pub struct Challenge {
    pub id: &'static str,
    pub start: fn(&mut Settings),
    /// The goal's arguments, from the starting settings.
    pub goal_args: fn(&Settings, usize, &Catalog) -> Vec<(&'static str, String)>,
    pub check: fn(&ChallengeRun<'_>, &Catalog) -> Check,
}

fn arg(name: &'static str, value: impl ToString) -> (&'static str, String) {
    (name, value.to_string())
}

pub(super) fn gflop(flops: u64) -> String {
    format!("{:.2}", flops as f64 / 1e9)
}

/// The starting model of every challenge.
fn tiny() -> ModelDims {
    Preset::Tiny.dims()
}

/// The peak of `s` as the plan predicts it with no budget.
fn predicted_peak(s: &Settings, vocab: usize) -> Option<u64> {
    let plan = s.plan(vocab).ok()?;
    Some(simulate(&plan, Budget::Unlimited).ok()?.peak_allocated_bytes())
}

/// Whether `s` fits its budget, by the plan.
fn fits(s: &Settings, vocab: usize) -> bool {
    s.plan(vocab).is_ok_and(|p| simulate(&p, s.device.budget_bytes).is_ok())
}

pub fn challenges() -> Vec<Challenge> {
    vec![
        Challenge {
            id: "accum128",
            start: |s| {
                *s = Settings { batch: 128, device: DeviceSettings::with_budget(32 << 20), ..Settings::default() }
            },
            goal_args: |_, _, _| Vec::new(),
            check: |r, t| {
                let s = r.settings;
                // The same model and the same sequences: 128 short ones are less work, not a fix.
                let same = s.dims == tiny() && s.lora_rank == 0 && s.seq == r.start.seq;
                let passed = s.batch == 128 && s.device.budget_bytes <= 32 << 20 && same;
                Check { passed, args: vec![arg("batch", s.batch), arg("budget", size(t, s.device.budget_bytes))] }
            },
        },
        Challenge {
            id: "halve",
            start: |s| *s = Settings::default(),
            goal_args: |s, vocab, t| {
                let peak = predicted_peak(s, vocab).unwrap_or(0);
                let flops = s.plan(vocab).map_or(0, |p| p.flops().0);
                vec![arg("batch", s.batch), arg("seq", s.seq), arg("peak", size(t, peak)), arg("flops", gflop(flops))]
            },
            check: |r, t| {
                let (s, start) = (r.settings, r.start);
                let target = predicted_peak(start, r.vocab).unwrap_or(0) / 2;
                let max_flops = r.flops(start).saturating_add(r.flops(start) / 4);
                let (peak, flops) = (r.memory.peak_allocated_bytes(), r.flops(s));
                let same = s.batch == start.batch && s.seq == start.seq && s.dims == start.dims;
                Check {
                    passed: same && peak <= target && flops < max_flops,
                    args: vec![
                        arg("peak", size(t, peak)),
                        arg("target", size(t, target)),
                        arg("flops", gflop(flops)),
                        arg("max_flops", gflop(max_flops)),
                        arg("batch", s.batch),
                        arg("seq", s.seq),
                    ],
                }
            },
        },
        Challenge {
            id: "largest",
            start: |s| {
                *s = Settings {
                    precision: Precision::Fp16,
                    device: DeviceSettings::with_budget(64 << 20),
                    ..Settings::default()
                }
            },
            goal_args: |_, _, _| Vec::new(),
            check: |r, _| {
                let s = r.settings;
                // Shorter sequences or a lighter optimizer would fit more: the start's are kept.
                let plain = s.precision == Precision::Fp16
                    && s.device.budget_bytes == 64 << 20
                    && s.seq == r.start.seq
                    && s.optimizer == r.start.optimizer
                    && s.checkpoint == Checkpoint::Off
                    && s.attention == AttentionKind::Standard
                    && s.accum == 1
                    && s.lora_rank == 0
                    && s.dims == tiny();
                let next = Settings { batch: s.batch + 1, ..s.clone() };
                let largest = plain && !fits(&next, r.vocab);
                Check {
                    passed: largest,
                    args: vec![
                        arg("batch", s.batch),
                        arg("next", s.batch + 1),
                        arg("ran", if plain { "yes" } else { "no" }),
                    ],
                }
            },
        },
    ]
}

/// A challenge under way.
#[derive(Clone, Debug, PartialEq)]
pub struct ChallengeState {
    pub index: usize,
    /// The settings it started from.
    pub start: Settings,
    /// The last check: passed, and its words.
    pub last: Option<(bool, String)>,
    /// How many executed steps were checked.
    pub checks: u32,
    /// The best executed step so far: (peak bytes, tokens/s, FLOPs).
    pub best: Option<(u64, f64, u64)>,
    /// The goal in words, for the language it was written in: it needs a plan and a
    /// simulation, so it is made once, not every frame.
    pub goal: Option<(crate::i18n::Lang, String)>,
}

impl ChallengeState {
    /// Challenge `index` started from its setup (written into `settings`); none past the list.
    pub fn start(index: usize, settings: &mut Settings) -> Option<ChallengeState> {
        let all = challenges();
        settings.keeping_prefs(all.get(index)?.start);
        Some(ChallengeState { index, start: settings.clone(), last: None, checks: 0, best: None, goal: None })
    }

    /// Checks the step that just executed with `settings` — the allocator's account of it
    /// (`memory`) and its time — keeping the words and the best result; the challenge's id when
    /// it passed.
    pub fn check(
        &mut self,
        settings: &Settings,
        memory: &StepMemory,
        secs: f64,
        t: &Catalog,
        vocab: usize,
    ) -> Option<&'static str> {
        let all = challenges();
        let c = all.get(self.index)?;
        let run = ChallengeRun { settings, memory, start: &self.start, vocab };
        let check = (c.check)(&run, t);
        let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
            check.args.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
        let key = format!("challenge-{}-{}", c.id, if check.passed { "pass" } else { "fail" });
        self.last = Some((check.passed, t.format(&key, &args)));
        self.checks = self.checks.saturating_add(1);
        let tokens = (settings.batch * settings.seq) as f64 / secs.max(1e-9);
        let flops = run.flops(settings);
        let peak = memory.peak_allocated_bytes();
        if check.passed && self.best.is_none_or(|(p, _, _)| peak < p) {
            self.best = Some((peak, tokens, flops));
        }
        check.passed.then_some(c.id)
    }
}

/// The challenge a link names (`challenge=<id>`), if it is one.
pub fn challenge_from_url_hash(hash: &str) -> Option<usize> {
    let id = hash.trim_start_matches('#').split('&').find_map(|kv| kv.strip_prefix("challenge="))?;
    challenges().iter().position(|c| c.id == id)
}
