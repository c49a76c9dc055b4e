//! The large-model estimator: the same memory categories as the toy's plan, in closed form, for
//! real architectures on real GPUs — GPT-2, LLaMA-2, Mistral or a custom one — with data, tensor
//! and sequence parallelism, ZeRO, offload and LoRA/QLoRA.
//!
//! Every term is a count of tensors the training step keeps, written out tensor by tensor, with
//! its source next to it. On the toy's own architecture and dtypes (`Runtime::Oomlab`: no
//! dropout, fp32 LayerNorm statistics, the toy's parameter padding, no fixed costs) the estimate
//! equals the toy's plan to the byte — every category and the peak, over every combination of
//! techniques (`tests/estimate.rs`): the toy and the real-model view tell one story.
//!
//! Units: bytes. Notation (Korthikanti et al. 2022): s sequence length, b micro-batch, h hidden
//! size, a heads, L layers, V vocabulary, f the MLP's inner width, t tensor-parallel size.

pub mod activations;
pub mod arch;
pub mod block;
pub mod catalog;
pub mod claims;
pub mod error;
mod formula;
pub mod framework;
pub mod hf;
pub mod hf_keys;
mod layers;
mod mlp;
mod moments;
mod parallel;
pub mod pipeline;
pub mod presets;
mod report;
mod saved;
// Serving is estimated by the CLI only, so far: its messages (`serve-…`) are native-only
// (`i18n::NATIVE_ONLY`), and the web build leaves it out (tests/i18n.rs checks both).
#[cfg(not(target_arch = "wasm32"))]
pub mod serve;
pub mod setup;
pub mod states;

use serde::Serialize;

pub use activations::{saved_outside, saved_per_layer};
pub use arch::{Architecture, LayerKind, Role, Target};
pub use block::{Block, Mlp, Moe, Norm, Router};
pub use error::{Amount, ConfigJsonError, EstimateError, Size, Unmodelled};
pub use framework::Framework;
pub use moments::{KindSaved, layer_kinds};
pub use parallel::{ContextKind, Parallel};
pub use presets::Gpu;
pub use report::{EstimateReport, OtherRuntime, SweepPoint};
pub use saved::{Part, Saved};
pub use setup::{
    Adapters, MAX_BATCH, MAX_ESTIMATE_BYTES, Measured, Offload, Optimizer, Runtime, Setup, StatePrecision,
};
pub use states::{
    CUDA_CONTEXT_BYTES, FRAGMENTATION_PERCENT, ZERO_BUCKET_ELEMS, cublas_workspace_bytes, zero_model_states,
};

use crate::plan::Checkpoint;
use moments::{activations, logits, working_sets};
use states::{model_states, words};

/// One line of the estimate: a category's bytes on each GPU, and where its formula comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    pub category: &'static str,
    pub bytes: u64,
    /// Grows with the micro-batch.
    pub per_batch: bool,
    /// The formula's source, and what the number means at this moment.
    pub source: Cite,
}

/// The estimate for one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Parameters of the whole model (exact count, no padding).
    pub parameters: u64,
    /// Under pipeline parallelism, every stage (the estimate's lines are the most loaded one's).
    pub stages: Vec<pipeline::Stage>,
    /// Trained parameters (the adapters under LoRA).
    pub trainable_parameters: u64,
    /// Per GPU, by category, in the order shown.
    pub lines: Vec<Line>,
    /// The sum of the lines: what must fit on the GPU.
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    /// Saved activations at the end of the forward pass (when the logits are alive)…
    pub activations_end_of_forward: u64,
    /// …and at their own peak (later, with checkpointing: a recomputed segment).
    pub activations_peak: u64,
    /// The logits, their softmax and the losses; and the logits' gradient.
    pub logits_bytes: u64,
    pub logits_grad_bytes: u64,
    /// One layer's backward working set.
    pub backward_working_set_bytes: u64,
    /// Host memory per GPU for offloaded state.
    pub host_bytes: u64,
    /// Bytes over PCIe per optimizer step per GPU for offload.
    pub pcie_bytes_per_step: u64,
    /// Tokens per optimizer step over all data-parallel GPUs: b · s · accum · N_d.
    pub tokens_per_step: u64,
    /// The runtime profile counted.
    pub runtime: Runtime,
    /// What the forward pass leaves for the backward pass at the loss: the saved activations,
    /// the logits with the loss's saved softmax, and the inputs — what PyTorch's
    /// `saved_tensors_hooks` count (each storage once, parameters excluded) plus the logits.
    pub saved_for_backward_bytes: u64,
}

impl Estimate {
    /// "6,738,415,616 parameters", with ", N trained" when fewer train (LoRA).
    pub fn parameters_text(&self) -> String {
        let all = crate::units::group_digits(self.parameters);
        if self.trainable_parameters == self.parameters {
            format!("{all} parameters")
        } else {
            format!("{all} parameters, {} trained", crate::units::group_digits(self.trainable_parameters))
        }
    }
    pub fn fits(&self) -> bool {
        self.peak_bytes <= self.capacity_bytes
    }
    pub fn get(&self, category: &str) -> u64 {
        self.lines.iter().filter(|l| l.category == category).map(|l| l.bytes).sum()
    }
}

/// Where a line's formula comes from: a catalog message (`src-…`, in `i18n/`) and its
/// arguments, so that the app shows it in the reader's language and the CLI and the JSON in
/// English (it serializes as the English text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cite {
    pub key: &'static str,
    pub args: Vec<(&'static str, String)>,
}

impl Cite {
    pub fn new(key: &'static str) -> Self {
        Self { key, args: Vec::new() }
    }
    pub fn with(key: &'static str, args: &[(&'static str, String)]) -> Self {
        Self { key, args: args.to_vec() }
    }
    /// The source in the catalog's language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        t.format_text(self.key, &self.args)
    }
    /// The source in English (the CLI's and the JSON's words).
    pub fn english(&self) -> String {
        crate::i18n::with_english(|en| self.text(en))
    }
}

impl Serialize for Cite {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.english())
    }
}

/// The sources' catalog messages, cited next to the numbers they give.
pub mod source {
    pub const PARAMS: &str = "src-params";
    pub const ZERO: &str = "src-zero";
    pub const ZERO_CONTEXT: &str = "src-zero-context";
    pub const ACTIVATIONS: &str = "src-activations";
    pub const ACTIVATIONS_HF: &str = "src-activations-hf";
    pub const LOGITS: &str = "src-logits";
    pub const LOGITS_GRAD: &str = "src-logits-grad";
    pub const FREED: &str = "src-freed";
    pub const INPUT: &str = "src-input";
    pub const MLP_WORKING_SET: &str = "src-mlp-working-set";
    pub const WORKING_SET: &str = "src-working-set";
    pub const CONTEXT: &str = "src-context";
    pub const CONTEXT_MEASURED: &str = "src-context-measured";
    pub const WORKSPACE: &str = "src-workspace";
    pub const DDP: &str = "src-ddp";
    pub const ZERO_BUCKETS: &str = "src-zero-buckets";
    pub const SP: &str = "src-sp";
    pub const FRAGMENTATION: &str = "src-fragmentation";
    pub const FRAGMENTATION_MEASURED: &str = "src-fragmentation-measured";
    pub const FOUND_INF: &str = "src-found-inf";
    pub const OFFLOAD: &str = "src-offload";
    pub const ALL_TO_ALL: &str = "src-all-to-all";
    pub const PIPELINE: &str = "src-pipeline";
    pub const PIPELINE_P2P: &str = "src-pipeline-p2p";
    pub const CONTEXT_RING: &str = "src-context-ring";
    pub const CONTEXT_ULYSSES: &str = "src-context-ulysses";
    pub const AUTOCAST: &str = "src-autocast";
}

/// The estimate for `setup` on each of its GPUs. A valid setup whose bytes pass
/// [`MAX_ESTIMATE_BYTES`] is [`EstimateError::TooLarge`].
pub fn estimate(setup: &Setup) -> Result<Estimate, EstimateError> {
    setup.validate()?;
    if setup.parallel.pipeline > 1 {
        let mut e = pipeline::estimate(setup, |stage, flight| one(stage, Some(flight)))?;
        e.trainable_parameters = trainable(setup);
        return Ok(e);
    }
    one(setup, None)
}

/// The parameters trained: all, or under LoRA its adapters'.
fn trainable(setup: &Setup) -> u64 {
    match setup.lora {
        None => setup.arch.parameters(),
        Some(l) => setup
            .arch
            .all_block_linears()
            .into_iter()
            .filter(|&(target, _, _)| l.targets(target))
            .map(|(_, k, n)| l.rank * (k + n))
            .sum(),
    }
}

/// The estimate of the whole model, or of one pipeline stage with its activations in flight
/// (chunks, chunks per micro-batch).
fn one(whole: &Setup, flight: Option<(u64, u64)>) -> Result<Estimate, EstimateError> {
    // Context parallelism: each GPU holds s/c of the sequence, so everything per token is
    // counted for s/c (the attention kernel's own saved tensors too); the model states are the
    // whole model's.
    let c = whole.parallel.context;
    let local;
    let setup = if c > 1 {
        local = Setup { seq: whole.seq / c, ..whole.clone() };
        &local
    } else {
        whole
    };
    // Every u128 quantity passes through `sat`, which remembers the first one too large to
    // report; the estimate is then refused rather than shown saturated.
    let too_large: std::cell::Cell<Option<(Amount, u128)>> = std::cell::Cell::new(None);
    let checked = |what: Amount, v: u128| -> u64 {
        if v > MAX_ESTIMATE_BYTES as u128 {
            if too_large.get().is_none() {
                too_large.set(Some((what, v)));
            }
            MAX_ESTIMATE_BYTES
        } else {
            v as u64
        }
    };
    let st = model_states(setup);
    let acts_at = activations(setup);
    let (act_peak, act_eof) = (acts_at.peak, acts_at.end_of_forward);
    let (logit_bytes, dlogits) = logits(setup);
    // The step's transient peak, the largest of its moments: the start of the backward pass, with
    // every saved activation, the logits, their softmax and the logits' gradient alive; the last
    // layer's MLP backward; a layer's attention backward with one layer's gradient working set;
    // with checkpointing, the end of an earlier segment's recomputation with every gradient
    // buffer. The logits are gone after the first. On the toy this is the plan's peak, byte for
    // byte (tests/estimate.rs).
    let rows = setup.micro_batch as u128 * setup.seq as u128;
    // The toy's plan keeps every micro-batch's inputs for the whole step; PyTorch loads one
    // micro-batch at a time.
    let micro_batches = if setup.runtime() == Runtime::Oomlab { setup.accum as u128 } else { 1 };
    // A middle pipeline stage has neither the token ids nor the labels.
    let ends = setup.arch.stage.is_none_or(|st| st.embedding || st.head);
    let input_bytes =
        if ends { micro_batches * setup.runtime().input_bytes(rows, setup.arch.vocab as u128) } else { 0 };
    // Each micro-batch's loss (one fp32 value) stays until the step ends: the toy's plan keeps
    // one per micro-batch.
    let earlier_losses = 4 * (micro_batches - 1);
    let at_loss = act_eof + logit_bytes + earlier_losses + dlogits;
    let (mlp_working, layer_working, all_working) = working_sets(setup);
    let (layer_acts, working) =
        if acts_at.earlier_recompute + all_working > acts_at.at_attention_backward + layer_working {
            (acts_at.earlier_recompute, all_working)
        } else {
            (acts_at.at_attention_backward, layer_working)
        };
    let at_layer = layer_acts + working + 4 + earlier_losses;
    let at_mlp = acts_at.at_mlp_backward + mlp_working + 4 + earlier_losses;
    let freed = || {
        let bytes = crate::units::format_bytes(checked(Amount::Logits, logit_bytes + dlogits));
        Cite::with(source::FREED, &[("bytes", bytes)])
    };
    let (acts, logit_line, grad_line, logit_source, grad_source) = if at_loss >= at_layer.max(at_mlp) {
        (act_eof, logit_bytes + earlier_losses, dlogits, Cite::new(source::LOGITS), source::LOGITS_GRAD)
    } else if at_mlp > at_layer {
        (acts_at.at_mlp_backward, 4 + earlier_losses, mlp_working, freed(), source::MLP_WORKING_SET)
    } else {
        // The loss itself (one fp32 value) stays until the step ends.
        (layer_acts, 4 + earlier_losses, working, freed(), source::WORKING_SET)
    };
    // ZeRO's partition is over the data- and context-parallel GPUs together (`Parallel::replicas`).
    let states_source = match setup.framework {
        Framework::Zero if setup.parallel.context > 1 => source::ZERO_CONTEXT,
        f => f.source(),
    };
    // A pipeline stage keeps the activations of its other micro-batches in flight (whole ones,
    // as at the end of their forward pass) besides the one whose step this is.
    let (chunks, v) = flight.unwrap_or((1, 1));
    let more_in_flight = chunks.saturating_sub(v) as f64 / v as f64;
    let in_flight_bytes = act_eof * chunks.saturating_sub(v) as u128 / v as u128;
    let mut lines = vec![
        Line {
            category: "parameters",
            bytes: checked(Amount::Parameters, st.parameters),
            per_batch: false,
            source: Cite::with(source::PARAMS, &[("formula", setup.arch.formula())]),
        },
        Line {
            category: "gradients",
            bytes: checked(Amount::Gradients, st.gradients),
            per_batch: false,
            source: Cite::new(states_source),
        },
        Line {
            category: "optimizer_state",
            bytes: checked(Amount::OptimizerState, st.optimizer),
            per_batch: false,
            source: Cite::new(states_source),
        },
        Line {
            category: "master_weights",
            bytes: checked(Amount::MasterWeights, st.master),
            per_batch: false,
            source: Cite::new(states_source),
        },
        Line {
            category: "activations",
            bytes: checked(Amount::Activations, acts),
            per_batch: true,
            source: Cite::new(match setup.runtime() {
                Runtime::HfEager => source::ACTIVATIONS_HF,
                Runtime::Fused | Runtime::Oomlab => source::ACTIVATIONS,
            }),
        },
        Line { category: "logits", bytes: checked(Amount::Logits, logit_line), per_batch: true, source: logit_source },
        Line {
            category: "temporaries",
            bytes: checked(Amount::Temporaries, grad_line),
            per_batch: true,
            source: Cite::new(grad_source),
        },
        Line {
            category: "input",
            bytes: checked(Amount::Input, input_bytes),
            per_batch: true,
            source: Cite::new(source::INPUT),
        },
    ];
    if flight.is_some() {
        // Before the step's own activations (whose source the JSON's `sources` keeps).
        let at = lines.iter().position(|l| l.category == "activations").unwrap_or(lines.len());
        let source = Cite::with(
            source::PIPELINE,
            &[("schedule", setup.parallel.schedule.name()), ("count", format!("{more_in_flight:.2}"))],
        );
        let bytes = checked(Amount::InFlight, in_flight_bytes);
        lines.insert(at, Line { category: "activations", bytes, per_batch: true, source });
    }
    if st.autocast > 0 {
        lines.insert(
            1,
            Line {
                category: "parameters",
                bytes: checked(Amount::AutocastCopies, st.autocast),
                per_batch: false,
                source: Cite::new(source::AUTOCAST),
            },
        );
    }
    if setup.runtime() == Runtime::Oomlab && setup.precision == StatePrecision::MixedFp16 {
        lines.push(Line { category: "workspace", bytes: 4, per_batch: false, source: Cite::new(source::FOUND_INF) });
    }
    if setup.runtime() == Runtime::Oomlab && !setup.fixed_costs && setup.parallel.replicas() > 1 {
        // The toy's own buckets (with fixed costs the framework's are counted below instead).
        let (bytes, cite) =
            (checked(Amount::Communication, states::oomlab_communication(setup, st.trainable)), source::DDP);
        let source = Cite::new(if setup.parallel.zero == 0 { cite } else { source::ZERO_BUCKETS });
        lines.push(Line { category: "communication", bytes, per_batch: false, source });
    }
    if setup.fixed_costs {
        let p = setup.precision.value_bytes() as u128;
        // Gradients are reduced over the data- and context-parallel GPUs together.
        let n_d = setup.parallel.replicas();
        // Each buffer a line of its own, with its own source: (source, bytes, grows with the batch).
        let mut comm: Vec<(&'static str, u128, bool)> = Vec::new();
        if n_d > 1 {
            comm.push(match setup.parallel.zero {
                0 => (source::DDP, words(st.trainable, p), false),
                1 | 2 => (source::ZERO_BUCKETS, 2 * words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p), false),
                // The reduce bucket, and three layers' worth of gathered tensors: the current
                // layer's parameters, the next layer's (prefetched) and the layer's gradients
                // before they are reduce-scattered.
                _ => {
                    let gathered = 3 * words(st.layer_params, p);
                    (source::ZERO_BUCKETS, words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p) + gathered, false)
                }
            });
        }
        if setup.parallel.sequence && setup.parallel.tensor > 1 {
            let gathered = words(setup.seq as u128 * setup.micro_batch as u128 * setup.arch.hidden as u128, p);
            comm.push((source::SP, gathered, true));
        }
        if c > 1 {
            let a = &setup.arch;
            let (kv, q) = (a.kv_hidden() as u128, a.q_hidden() as u128);
            let t = setup.parallel.tensor as u128;
            comm.push(match setup.parallel.context_kind {
                // The key and value blocks in flight around the ring: this GPU's being sent,
                // the next one being received (s/c rows each).
                ContextKind::Ring => (source::CONTEXT_RING, 4 * words((rows * kv).div_ceil(t), p), true),
                // The all-to-all's send and receive buffers of q, k and v (s/c rows of every
                // head out, s rows of heads / c back: the same bytes).
                ContextKind::Ulysses => {
                    (source::CONTEXT_ULYSSES, 2 * words((rows * (q + 2 * kv)).div_ceil(t), p), true)
                }
            });
        }
        if setup.parallel.pipeline > 1 {
            // The stage boundary's activations sent on and received (and their gradients back):
            // one micro-batch's s·b·h each way.
            comm.push((source::PIPELINE_P2P, 2 * words(rows * setup.arch.hidden as u128, p), true));
        }
        if let Some(m) = setup.arch.block.moe
            && setup.parallel.expert > 1
        {
            // Expert parallelism's all-to-all: the send and receive buffers of each GPU's s·b·k
            // token copies (dispatch, and the combine the same size on the way back).
            comm.push((source::ALL_TO_ALL, 2 * words(rows * m.top_k as u128 * setup.arch.hidden as u128, p), true));
        }
        if comm.is_empty() {
            comm.push((source::DDP, 0, false));
        }
        for (source, bytes, per_batch) in comm {
            let bytes = checked(Amount::Communication, bytes);
            lines.push(Line { category: "communication", bytes, per_batch, source: Cite::new(source) });
        }
        let allocated: u64 = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
        lines.extend([
            Line {
                category: "workspace",
                bytes: cublas_workspace_bytes(setup.gpu.compute_major),
                per_batch: false,
                source: Cite::new(source::WORKSPACE),
            },
            match setup.measured.context_bytes {
                Some(bytes) => Line {
                    category: "cuda_context",
                    bytes,
                    per_batch: false,
                    source: Cite::with(source::CONTEXT_MEASURED, &[("bytes", crate::units::format_bytes(bytes))]),
                },
                None => Line {
                    category: "cuda_context",
                    bytes: CUDA_CONTEXT_BYTES,
                    per_batch: false,
                    source: Cite::new(source::CONTEXT),
                },
            },
            match setup.measured.fragmentation_percent {
                // Validated: finite, 0 to 1000 %.
                Some(percent) => Line {
                    category: "fragmentation",
                    bytes: checked(Amount::Fragmentation, (allocated as f64 * percent / 100.0) as u128),
                    per_batch: true,
                    source: Cite::with(source::FRAGMENTATION_MEASURED, &[("percent", format!("{percent}"))]),
                },
                None => Line {
                    category: "fragmentation",
                    bytes: allocated / 100 * FRAGMENTATION_PERCENT,
                    per_batch: true,
                    source: Cite::new(source::FRAGMENTATION),
                },
            },
        ]);
    }
    let peak_bytes = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
    let peak_bytes = checked(Amount::Peak, peak_bytes as u128);
    if let Some((what, amount)) = too_large.get() {
        return Err(EstimateError::TooLarge { what, amount, limit: MAX_ESTIMATE_BYTES });
    }
    let tokens = setup.micro_batch as u128 * whole.seq as u128 * setup.accum as u128 * setup.parallel.data as u128;
    Ok(Estimate {
        parameters: setup.arch.parameters(),
        trainable_parameters: trainable(setup),
        stages: Vec::new(),
        lines,
        peak_bytes,
        capacity_bytes: setup.gpu.memory_bytes,
        activations_end_of_forward: checked(Amount::Activations, act_eof),
        activations_peak: checked(Amount::Activations, act_peak),
        logits_bytes: checked(Amount::Logits, logit_bytes),
        logits_grad_bytes: checked(Amount::LogitsGrad, dlogits),
        backward_working_set_bytes: checked(Amount::WorkingSet, working),
        host_bytes: checked(Amount::HostMemory, st.host),
        pcie_bytes_per_step: checked(Amount::PcieTraffic, st.pcie),
        tokens_per_step: checked(Amount::Tokens, tokens),
        runtime: setup.runtime(),
        saved_for_backward_bytes: checked(Amount::SavedForBackward, act_eof + logit_bytes + input_bytes),
    })
}

/// The largest micro-batch whose estimate fits the GPU (0 if none does), by bisection: the
/// estimate never falls as the batch grows (tested).
pub fn max_micro_batch(setup: &Setup) -> Result<u64, EstimateError> {
    // A micro-batch too large to count fits no GPU.
    let at = |b: u64| {
        let mut s = setup.clone();
        s.micro_batch = b;
        match estimate(&s) {
            Ok(e) => Ok(e.fits()),
            Err(EstimateError::TooLarge { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    };
    if !at(1)? {
        return Ok(0);
    }
    let (mut lo, mut hi) = (1, MAX_BATCH);
    if at(hi)? {
        return Ok(hi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at(mid)? { lo = mid } else { hi = mid }
    }
    Ok(lo)
}

/// The micro-batches a memory-vs-batch chart shows: 1, 2, 4, … up to twice the largest that fits
/// (`max_fit`), at least up to 16.
pub fn sweep_batches(max_fit: u64) -> Vec<u64> {
    let top = max_fit.saturating_mul(2).clamp(16, MAX_BATCH);
    std::iter::successors(Some(1u64), |b| (b * 2 <= top).then_some(b * 2)).collect()
}

/// The estimate at each micro-batch of `batches`, up to the first too large to count (an
/// invalid setup is an error).
pub fn sweep(setup: &Setup, batches: &[u64]) -> Result<Vec<(u64, Estimate)>, EstimateError> {
    let mut out = Vec::with_capacity(batches.len());
    for &b in batches {
        let mut s = setup.clone();
        s.micro_batch = b;
        match estimate(&s) {
            Ok(e) => out.push((b, e)),
            Err(EstimateError::TooLarge { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
