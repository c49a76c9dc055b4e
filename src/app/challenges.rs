//! Challenges: goals checked against a real executed step, never against a stored answer. A
//! challenge starts from a setup; the learner changes the settings and runs a step; the check
//! reads that step — its settings, the allocator's account of it, its time — and says pass or
//! fail with the numbers. The best result (lowest peak) per challenge is kept, the passed ones
//! are remembered, and a challenge travels in a link (`challenge=<id>`). The words are catalog
//! messages (`challenge-<id>-title`, `-goal`, `-pass`, `-fail`).

use super::settings::{ModelDims, Preset, Settings};
use super::teaching::Teaching;
use super::views::size;
use crate::i18n::Catalog;
use crate::memory::{Budget, StepMemory, simulate};
use crate::plan::{AttentionKind, Checkpoint, Precision};

/// What a check reads: the executed step and what it was started from.
pub struct Run<'a> {
    /// The settings the step ran with.
    pub settings: &'a Settings,
    /// The allocator's live account of the step.
    pub memory: &'a StepMemory,
    /// The settings the challenge started from.
    pub start: &'a Settings,
    pub vocab: usize,
}

impl Run<'_> {
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
    pub check: fn(&Run<'_>, &Catalog) -> Check,
}

fn arg(name: &'static str, value: impl ToString) -> (&'static str, String) {
    (name, value.to_string())
}

fn gflop(flops: u64) -> String {
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
    s.plan(vocab).is_ok_and(|p| simulate(&p, s.budget_bytes).is_ok())
}

pub fn challenges() -> Vec<Challenge> {
    vec![
        Challenge {
            id: "accum128",
            start: |s| *s = Settings { batch: 128, budget_bytes: 32 << 20, ..Settings::default() },
            goal_args: |_, _, _| Vec::new(),
            check: |r, t| {
                let s = r.settings;
                // The same model and the same sequences: 128 short ones are less work, not a fix.
                let same = s.dims == tiny() && s.lora_rank == 0 && s.seq == r.start.seq;
                let passed = s.batch == 128 && s.budget_bytes <= 32 << 20 && same;
                Check { passed, args: vec![arg("batch", s.batch), arg("budget", size(t, s.budget_bytes))] }
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
            start: |s| *s = Settings { precision: Precision::Fp16, budget_bytes: 64 << 20, ..Settings::default() },
            goal_args: |_, _, _| Vec::new(),
            check: |r, _| {
                let s = r.settings;
                // Shorter sequences or a lighter optimizer would fit more: the start's are kept.
                let plain = s.precision == Precision::Fp16
                    && s.budget_bytes == 64 << 20
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
    /// The best executed step so far: (peak bytes, tokens/s, FLOPs).
    pub best: Option<(u64, f64, u64)>,
    /// The goal in words, for the language it was written in: it needs a plan and a
    /// simulation, so it is made once, not every frame.
    pub goal: Option<(crate::i18n::Lang, String)>,
}

impl Teaching {
    /// Starts challenge `index` from its setup (written into `settings`).
    pub fn start_challenge(&mut self, index: usize, settings: &mut Settings) {
        let all = challenges();
        let Some(c) = all.get(index) else { return };
        settings.keeping_prefs(c.start);
        self.lesson = None;
        self.challenge = Some(ChallengeState { index, start: settings.clone(), last: None, best: None, goal: None });
    }

    /// Checks the active challenge against the step that just executed with `settings`: the
    /// allocator's account of it (`memory`) and its time.
    pub fn check_challenge(&mut self, settings: &Settings, memory: &StepMemory, secs: f64, t: &Catalog, vocab: usize) {
        let Some(state) = &mut self.challenge else { return };
        let all = challenges();
        let c = &all[state.index];
        let run = Run { settings, memory, start: &state.start, vocab };
        let check = (c.check)(&run, t);
        let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
            check.args.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
        let key = format!("challenge-{}-{}", c.id, if check.passed { "pass" } else { "fail" });
        state.last = Some((check.passed, t.format(&key, &args)));
        let tokens = (settings.batch * settings.seq) as f64 / secs.max(1e-9);
        let flops = run.flops(settings);
        let peak = memory.peak_allocated_bytes();
        if check.passed && state.best.is_none_or(|(p, _, _)| peak < p) {
            state.best = Some((peak, tokens, flops));
        }
        if check.passed && !self.challenges_done.iter().any(|d| d == c.id) {
            self.challenges_done.push(c.id.to_string());
        }
    }

    /// The challenges panel: the list, and the active one's goal, check and best result.
    pub fn challenges_panel(&mut self, ui: &mut egui::Ui, t: &Catalog, settings: &mut Settings, vocab: usize) {
        let all = challenges();
        let mut start = None;
        if ui.button(t.text("challenges-close")).clicked() {
            self.show_challenges = false;
            self.challenge = None;
            return;
        }
        for (i, c) in all.iter().enumerate() {
            ui.horizontal_wrapped(|ui| {
                if ui.button(t.text("challenge-start")).clicked() {
                    start = Some(i);
                }
                ui.label(t.text(&format!("challenge-{}-title", c.id)));
                if self.challenges_done.iter().any(|d| d == c.id) {
                    ui.colored_label(egui::Color32::from_rgb(90, 200, 90), t.text("challenge-done"));
                }
            });
        }
        if let Some(state) = &mut self.challenge {
            let c = &all[state.index];
            ui.separator();
            let title = t.text(&format!("challenge-{}-title", c.id));
            ui.heading(t.format("challenge-active", &[("title", title.into())]));
            if state.goal.as_ref().is_none_or(|(lang, _)| *lang != t.lang()) {
                let goal = (c.goal_args)(&state.start, vocab, t);
                let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
                    goal.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
                state.goal = Some((t.lang(), t.format(&format!("challenge-{}-goal", c.id), &args)));
            }
            if let Some((_, goal)) = &state.goal {
                ui.label(goal.as_str());
            }
            ui.label(egui::RichText::new(t.text("challenge-run")).small());
            if let Some((passed, why)) = &state.last {
                let key = if *passed { "challenge-passed" } else { "challenge-failed" };
                let color =
                    if *passed { egui::Color32::from_rgb(90, 200, 90) } else { egui::Color32::from_rgb(240, 80, 80) };
                ui.colored_label(color, t.format(key, &[("why", why.as_str().into())]));
            }
            if let Some((peak, rate, flops)) = state.best {
                ui.label(t.format(
                    "challenge-best",
                    &[
                        ("peak", size(t, peak).into()),
                        ("source", super::views::Source::Allocator.word(t).into()),
                        ("rate", format!("{rate:.0}").into()),
                        ("flops", gflop(flops).into()),
                    ],
                ));
            }
            ui.label(egui::RichText::new(t.text("challenge-share")).small());
            let link = format!("{}&challenge={}&lang={}", state.start.to_url_hash(), c.id, t.lang().code());
            // Read-only and wrapped, so a phone shows all of it.
            ui.add(egui::TextEdit::multiline(&mut link.as_str()).desired_rows(2).desired_width(f32::INFINITY));
        }
        if let Some(i) = start {
            self.start_challenge(i, settings);
        }
    }
}

/// The challenge a link names (`challenge=<id>`), if it is one.
pub fn from_url_hash(hash: &str) -> Option<usize> {
    let id = hash.trim_start_matches('#').split('&').find_map(|kv| kv.strip_prefix("challenge="))?;
    challenges().iter().position(|c| c.id == id)
}
