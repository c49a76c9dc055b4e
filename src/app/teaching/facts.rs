//! What the chapters compute from: a chapter's settings and the plan's prediction for them, or
//! the allocator's record of the step its reveal ran.

use std::sync::Arc;

use crate::app::run::StepRecord;
use crate::app::settings::Settings;
use crate::app::views::size;
use crate::i18n::Catalog;
use crate::memory::run::{RunMemory, simulate_run};
use crate::memory::{Budget, StepMemory, simulate};
use crate::plan::{Category, Plan};

/// What the chapters compute from: the settings and the plan's prediction for them, or (after
/// the reveal's step) the allocator's record of the step that ran.
pub struct Facts {
    pub settings: Settings,
    pub vocab: usize,
    pub plan: Arc<Plan>,
    /// The step's memory: the plan's prediction, or the allocator's live record of a real step.
    pub memory: StepMemory,
    /// The real step ran out of memory: its error (the diagnosing chapter's answer reads it).
    pub step_oom: Option<crate::memory::StepOom>,
    /// These facts are a real step's (`memory` or `step_oom` is what it left).
    pub ran: bool,
}

impl Facts {
    pub fn new(settings: &Settings, vocab: usize) -> Option<Facts> {
        let plan = Arc::new(settings.plan(vocab).ok()?);
        // No budget: the answers are about memory needed, not about fitting.
        let memory = simulate(&plan, Budget::Unlimited).ok()?;
        Some(Facts { settings: settings.clone(), vocab, plan, memory, step_oom: None, ran: false })
    }

    /// The facts a real step of `settings` gives: the allocator's record in place of the plan's
    /// prediction (a chapter's other settings, a doubled batch for one, are still predicted: that
    /// step did not run), or the step's own out-of-memory error.
    pub fn from_step(settings: &Settings, vocab: usize, record: StepRecord<'_>) -> Option<Facts> {
        let mut facts = Facts::new(settings, vocab)?;
        facts.ran = true;
        match record {
            StepRecord::Ran(m) => facts.memory = m.clone(),
            StepRecord::OutOfMemory(oom) => facts.step_oom = Some(oom.clone()),
        }
        Some(facts)
    }

    /// The prediction for the settings changed by `change`.
    pub(super) fn with(&self, change: impl FnOnce(&mut Settings)) -> Option<Facts> {
        let mut s = self.settings.clone();
        change(&mut s);
        Facts::new(&s, self.vocab)
    }

    pub(super) fn at_peak(&self, c: Category) -> u64 {
        self.memory.peak_allocated.get(c)
    }

    pub(super) fn states(&self) -> u64 {
        [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights]
            .iter()
            .map(|&c| self.at_peak(c))
            .sum()
    }

    pub(super) fn activations(&self) -> u64 {
        self.at_peak(Category::Activations) + self.at_peak(Category::Temporaries)
    }

    /// Bytes of attention probabilities the step saves (the T² tensors).
    pub(super) fn attention_probs(&self) -> u64 {
        self.plan
            .tensors
            .iter()
            .filter(|t| t.category == Category::Activations && t.name.ends_with("probs"))
            .map(|t| t.size_bytes())
            .sum()
    }

    /// The model states a rank keeps across steps (parameters, gradients, optimizer state,
    /// master weights) at ZeRO stage `zero`, from its plan: what ZeRO shards.
    pub(super) fn kept_states(&self, zero: u8) -> Option<u64> {
        let mut s = self.settings.clone();
        s.device.parallel.zero = zero;
        let plan = s.plan(self.vocab).ok()?;
        let states = [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights];
        Some(
            plan.tensors
                .iter()
                .filter(|t| t.persistent && !t.host && states.contains(&t.category))
                .map(|t| t.size_bytes())
                .sum(),
        )
    }

    /// The peak of the same step on one GPU alone (the same batch), predicted.
    pub(super) fn alone_peak(&self) -> Option<u64> {
        let mut alone = self.settings.clone();
        alone.device.parallel.gpus = 1;
        let plan = alone.plan(self.vocab).ok()?;
        simulate(&plan, Budget::Unlimited).ok().map(|m| m.peak_allocated_bytes())
    }

    /// The whole model's parameters in bytes, as one GPU alone holds them.
    pub(super) fn full_parameters(&self) -> u64 {
        let dtype = self.plan.tensor(self.plan.handles.params).dtype;
        dtype.bytes_for(self.plan.layout.flat_len)
    }

    /// ZeRO-3's gathers in one step of this rank's plan: how many, and the bytes they bring in.
    pub(super) fn gathered(&self) -> (usize, u64) {
        let gathers: Vec<u64> = self
            .plan
            .ops
            .iter()
            .filter_map(|n| match &n.op {
                crate::plan::Op::AllGather(g) => Some(self.plan.tensor(g.full.tensor).dtype.bytes_for(g.full.len)),
                _ => None,
            })
            .collect();
        (gathers.len(), gathers.iter().sum())
    }

    /// The step under its own budget: the OOM the "diagnose" chapter reads — the real step's,
    /// once it ran.
    pub(super) fn oom(&self) -> Option<crate::memory::StepOom> {
        self.step_oom.clone().or_else(|| simulate(&self.plan, self.settings.device.budget_bytes).err().map(|o| *o))
    }

    /// Whether the step fits its budget: 0 it fits; 1 out of memory although the cached free memory
    /// would hold the request (fragmentation); 2 out of memory, really full.
    pub(super) fn fit_outcome(&self) -> usize {
        outcome(self.oom().as_ref())
    }

    /// The fragmentation chapter's answer in words, for its outcome: the allocator's figures when
    /// the step failed, and what expandable segments make of it.
    pub(super) fn fit_words(&self, t: &Catalog) -> String {
        let Some(o) = self.oom() else {
            return t.format(
                "lesson-fragment-outcome-fits",
                &[("peak", size(t, self.memory.peak_reserved_bytes()).into())],
            );
        };
        let mut expandable = self.settings.clone();
        expandable.device.allocator.expandable_segments = true;
        let with = expandable.plan(self.vocab).ok().and_then(|p| simulate(&p, expandable.device.budget_bytes).ok());
        let after = match with {
            Some(m) => {
                t.format("lesson-fragment-expandable-fits", &[("reserved", size(t, m.peak_reserved_bytes()).into())])
            }
            None => t.text("lesson-fragment-expandable-oom"),
        };
        let e = &o.error;
        let key = if e.is_fragmented() { "lesson-fragment-outcome-fragmented" } else { "lesson-fragment-outcome-full" };
        t.format(
            key,
            &[
                ("requested", size(t, e.requested_bytes).into()),
                ("cached", size(t, e.cached_free_bytes).into()),
                ("largest", size(t, e.largest_free_block).into()),
                ("reserved", size(t, e.reserved_bytes).into()),
                ("expandable", after.into()),
            ],
        )
    }

    /// The padding chapter: the run's first batch of speeches padded to its longest, its useful
    /// tokens, and the same speeches packed into full rows of that length — (useful tokens,
    /// padded activations from the step's record, packed activations predicted, packed rows).
    pub fn padded_and_packed(&self) -> Option<(u64, u64, u64, usize)> {
        let docs = crate::documents::Documents::shared();
        let b = self.settings.device.batching;
        let shape = crate::model::StepShape { batch: self.settings.batch, seq: self.settings.dims.max_seq };
        let ids = docs.sample(b, shape, self.settings.seed, 0);
        let t = self.plan.shape.seq;
        let useful = docs.padded(&ids, t).counted_targets() as u64;
        let rows = docs.rows_to_pack(&ids, t);
        let mut packed = self.settings.clone();
        (packed.device.batching, packed.batch, packed.seq, packed.accum) = (crate::plan::Batching::Packed, rows, t, 1);
        let m = crate::memory::simulate(&packed.plan(self.vocab).ok()?, crate::memory::Budget::Unlimited).ok()?;
        Some((useful, self.memory.activation_peak_bytes, m.activation_peak_bytes, rows))
    }
}

/// The lengths chapter: a run of batches of their own lengths through one allocator.
impl Facts {
    /// The run's batches 0 to `upto` predicted through one allocator under the budget, the
    /// settings changed by `change`, the cache emptied after every batch when `empty_cache`.
    pub(super) fn run_until(
        &self,
        upto: u64,
        change: impl FnOnce(&mut Settings),
        empty_cache: bool,
    ) -> Option<RunMemory> {
        let mut s = self.settings.clone();
        change(&mut s);
        let plans = (0..=upto).map(|k| s.plan_at(self.vocab, k).ok()).collect::<Option<Vec<_>>>()?;
        simulate_run(&plans, Budget::Bytes(s.device.budget_bytes), empty_cache).ok()
    }

    /// Batch `upto`'s length, and its peak reserved bytes on an empty GPU (predicted).
    pub(super) fn batch_alone(&self, upto: u64) -> Option<(usize, u64)> {
        let plan = self.settings.plan_at(self.vocab, upto).ok()?;
        let m = crate::memory::simulate_peak(&plan, Budget::Unlimited).ok()?;
        Some((plan.shape.seq, m.peak_reserved_bytes()))
    }

    /// Whether batch `upto` fits after the batches before it: 0 it fits; 1 out of memory with
    /// enough free in the cached segments (fragmentation); 2 out of memory, really full. The real
    /// run's, once it ran; the prediction's before.
    pub(super) fn run_outcome(&self, upto: u64) -> Option<usize> {
        let predicted = if self.ran { None } else { Some(self.run_until(upto, |_| {}, false)?) };
        Some(outcome(self.run_oom(predicted.as_ref()).as_ref()))
    }

    /// The error that stopped the run: the real run's once it ran, else `predicted`'s.
    fn run_oom(&self, predicted: Option<&RunMemory>) -> Option<crate::memory::StepOom> {
        if self.ran { self.step_oom.clone() } else { predicted?.oom.as_ref().map(|o| (*o.error).clone()) }
    }

    /// The lengths chapter's answer in words: what batch `upto` met (the real run's error, or its
    /// reserved memory), what the batches before left reserved, and each of PyTorch's remedies
    /// run the same way.
    pub(super) fn run_words(&self, t: &Catalog, upto: u64) -> String {
        let predicted = self.run_until(upto, |_| {}, false);
        let oom = self.run_oom(predicted.as_ref());
        let before = predicted.as_ref().and_then(|r| r.steps.first()).map(|s| s.stats).unwrap_or_default();
        let alone = self.batch_alone(upto).map_or(0, |a| a.1);
        let outcome = match &oom {
            None => {
                let reserved = if self.ran {
                    self.memory.peak_reserved_bytes()
                } else {
                    predicted.as_ref().and_then(|r| r.steps.last()).map_or(0, |s| s.stats.peak_reserved_bytes)
                };
                t.format("lesson-lengths-outcome-fits", &[("reserved", size(t, reserved).into())])
            }
            Some(o) => {
                let e = &o.error;
                let key =
                    if e.is_fragmented() { "lesson-lengths-outcome-fragmented" } else { "lesson-lengths-outcome-full" };
                t.format(
                    key,
                    &[
                        ("requested", size(t, e.requested_bytes).into()),
                        ("free", size(t, e.capacity_bytes.saturating_sub(e.allocated_bytes)).into()),
                        ("cached", size(t, e.cached_free_bytes).into()),
                        ("largest", size(t, e.largest_free_block).into()),
                        ("alone", size(t, alone).into()),
                    ],
                )
            }
        };
        let left = t.format(
            "lesson-lengths-left",
            &[
                ("reserved", size(t, before.reserved_bytes).into()),
                ("allocated", size(t, before.peak_allocated_bytes).into()),
            ],
        );
        let remedies: Vec<String> = REMEDIES
            .iter()
            .map(|&(option, empty_cache)| {
                let name = match option {
                    Some(conf) => conf.to_string(),
                    None => t.text("lesson-lengths-empty-cache"),
                };
                let config = option.and_then(|c| crate::plan::AllocatorConfig::parse(c).ok()).unwrap_or_default();
                let run = self.run_until(upto, |s| s.device.allocator = config, empty_cache);
                match run {
                    Some(r) if r.oom.is_none() => {
                        let reserved = r.steps.last().map_or(0, |s| s.stats.peak_reserved_bytes);
                        t.format(
                            "lesson-lengths-remedy-fits",
                            &[("remedy", name.into()), ("reserved", size(t, reserved).into())],
                        )
                    }
                    _ => t.format("lesson-lengths-remedy-oom", &[("remedy", name.into())]),
                }
            })
            .collect();
        // Sentences follow each other as the language writes them (Chinese: no space).
        let gap = if t.lang() == crate::i18n::Lang::Zh { "" } else { " " };
        [outcome, left].into_iter().chain(remedies).collect::<Vec<_>>().join(gap)
    }
}

/// Whether a step fits: 0 it fits; 1 out of memory although the cached free memory would hold
/// the request (fragmentation); 2 out of memory, really full.
fn outcome(oom: Option<&crate::memory::StepOom>) -> usize {
    match oom {
        None => 0,
        Some(o) if o.error.is_fragmented() => 1,
        Some(_) => 2,
    }
}

/// PyTorch's remedies the lengths chapter runs: each allocator option (as
/// `PYTORCH_CUDA_ALLOC_CONF` writes it), and `torch.cuda.empty_cache()` after every batch.
const REMEDIES: [(Option<&str>, bool); 4] = [
    (Some("expandable_segments:True"), false),
    (Some("garbage_collection_threshold:0.6"), false),
    (Some("max_split_size_mb:21"), false),
    (None, true),
];

/// The mixture-of-experts chapter: Mixtral 8x7B in the Real models view.
pub(super) fn moe_setup(s: &mut Settings) {
    *s = Settings::default();
    if let Some(e) = crate::estimate::catalog::find("mixtral-8x7b") {
        s.estimate.0.arch = e.model.arch.clone();
    }
}

/// The estimate's bytes in `categories` for the chapter's mixture, or (`routed`) for the same
/// model with only the experts a token is routed to (k of k): what its states would be if the
/// idle experts cost nothing.
pub(super) fn moe_figure(f: &Facts, routed: bool, categories: &[&str]) -> Option<u64> {
    let mut setup = f.settings.estimate.0.clone();
    if routed && let Some(m) = &mut setup.arch.block.moe {
        m.experts = m.top_k;
        setup.parallel.expert = 1;
    }
    let e = crate::estimate::estimate(&setup).ok()?;
    Some(categories.iter().fold(0u64, |a, c| a.saturating_add(e.get(c))))
}
