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
pub mod claims;
pub mod presets;
pub mod setup;
pub mod states;

use serde::Serialize;

pub use arch::{Architecture, Mlp, Norm, Role, Target};
pub use presets::Gpu;
pub use setup::{
    Adapters, EstimateError, MAX_BATCH, MAX_ESTIMATE_BYTES, Offload, Optimizer, Parallel, Runtime, Setup,
    StatePrecision,
};
pub use states::{
    CUDA_CONTEXT_BYTES, FRAGMENTATION_PERCENT, ZERO_BUCKET_ELEMS, cublas_workspace_bytes, zero_model_states,
};

use crate::plan::Checkpoint;
use activations::{activations, logits, working_sets};
use states::{model_states, words};

/// One line of the estimate: a category's bytes on each GPU, and where its formula comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    pub category: &'static str,
    pub bytes: u64,
    /// Grows with the micro-batch.
    pub per_batch: bool,
    /// The formula's source, and what the number means at this moment.
    pub source: String,
}

/// The estimate for one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Parameters of the whole model (exact count, no padding).
    pub parameters: u64,
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

/// Sources, cited next to the numbers they give.
pub mod source {
    pub const PARAMS: &str = "exact count from the architecture (GPT-2: 12Lh² + 13Lh + Vh + Th + 2h)";
    pub const ZERO: &str = "Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + KΨ, partitioned over N_d by stage";
    pub const ACTIVATIONS: &str =
        "Korthikanti et al. 2022, §4: sbh(34 + 5as/h) per layer, tensor by tensor (GQA, SwiGLU, RMSNorm derived)";
    pub const LOGITS: &str =
        "the lm_head output, the softmax kept for backward (fp32: Korthikanti's 4sbv) and the losses";
    pub const LOGITS_GRAD: &str = "the gradient of the logits, alive with the softmax at the start of backward";
    pub const INPUT: &str = "the micro-batch's token ids and labels (int64 in PyTorch)";
    pub const MLP_WORKING_SET: &str =
        "the gradients alive in the last layer's MLP backward: the residual stream's and the MLP's";
    pub const WORKING_SET: &str =
        "one layer's backward working set: the gradients of its residual stream, attention and MLP";
    pub const CONTEXT: &str =
        "CUDA context and loaded kernels: ~500 MiB per process (an assumed typical value; measure it with nvidia-smi)";
    pub const WORKSPACE: &str = "cuBLAS workspace, PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:2:16:8 (8.125 MiB), 32 MiB on Hopper (aten/src/ATen/cuda/CublasHandlePool.cpp)";
    pub const DDP: &str = "PyTorch DDP gradient buckets: a copy of the gradients unless gradient_as_bucket_view=True (torch.nn.parallel.DistributedDataParallel docs)";
    pub const ZERO_BUCKETS: &str = "DeepSpeed ZeRO reduce_bucket_size and allgather_bucket_size, 5e8 elements each by default; stage 3 gathers a layer's parameters (and prefetches the next)";
    pub const SP: &str = "sequence parallelism all-gathers a layer's input to the full sequence before the column-parallel linear (Korthikanti et al. 2022, §4.2.2)";
    pub const FRAGMENTATION: &str = "allocator fragmentation margin: an assumed 5 % of the allocated bytes (reserved minus allocated; the toy's allocator map measures it)";
    pub const FOUND_INF: &str = "the loss scaler's overflow flag (found_inf), one u32";
    pub const OFFLOAD: &str = "Ren et al. 2021 (ZeRO-Offload): fp32 state and gradients on the host, 16-bit weights and gradients cross PCIe each step";
}

/// The estimate for `setup` on each of its GPUs. A valid setup whose bytes pass
/// [`MAX_ESTIMATE_BYTES`] is [`EstimateError::TooLarge`].
pub fn estimate(setup: &Setup) -> Result<Estimate, EstimateError> {
    setup.validate()?;
    // Every u128 quantity passes through `sat`, which remembers the first one too large to
    // report; the estimate is then refused rather than shown saturated.
    let too_large: std::cell::Cell<Option<(&'static str, u128)>> = std::cell::Cell::new(None);
    let checked = |what: &'static str, v: u128| -> u64 {
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
    let micro_batches = if setup.runtime == Runtime::Oomlab { setup.accum as u128 } else { 1 };
    let input_bytes = micro_batches * setup.runtime.input_bytes(rows, setup.arch.vocab as u128);
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
        format!(
            "freed by the peak, a layer's backward pass (at the loss they take {}); {}",
            crate::units::format_bytes(checked("the logits", logit_bytes + dlogits)),
            source::LOGITS
        )
    };
    let (acts, logit_line, grad_line, logit_source, grad_source) = if at_loss >= at_layer.max(at_mlp) {
        (act_eof, logit_bytes + earlier_losses, dlogits, source::LOGITS.to_string(), source::LOGITS_GRAD)
    } else if at_mlp > at_layer {
        (acts_at.at_mlp_backward, 4 + earlier_losses, mlp_working, freed(), source::MLP_WORKING_SET)
    } else {
        // The loss itself (one fp32 value) stays until the step ends.
        (layer_acts, 4 + earlier_losses, working, freed(), source::WORKING_SET)
    };
    let mut lines = vec![
        Line {
            category: "parameters",
            bytes: checked("parameters", st.parameters),
            per_batch: false,
            source: source::PARAMS.into(),
        },
        Line {
            category: "gradients",
            bytes: checked("gradients", st.gradients),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "optimizer_state",
            bytes: checked("optimizer state", st.optimizer),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "master_weights",
            bytes: checked("master weights", st.master),
            per_batch: false,
            source: source::ZERO.into(),
        },
        Line {
            category: "activations",
            bytes: checked("activations", acts),
            per_batch: true,
            source: source::ACTIVATIONS.into(),
        },
        Line { category: "logits", bytes: checked("logits", logit_line), per_batch: true, source: logit_source },
        Line {
            category: "temporaries",
            bytes: checked("temporaries", grad_line),
            per_batch: true,
            source: grad_source.into(),
        },
        Line { category: "input", bytes: checked("input", input_bytes), per_batch: true, source: source::INPUT.into() },
    ];
    if setup.runtime == Runtime::Oomlab && setup.precision == StatePrecision::MixedFp16 {
        lines.push(Line { category: "workspace", bytes: 4, per_batch: false, source: source::FOUND_INF.into() });
    }
    if setup.fixed_costs {
        let p = setup.precision.value_bytes() as u128;
        let n_d = setup.parallel.data;
        let mut comm: u128 = 0;
        let mut comm_source = source::DDP;
        if n_d > 1 {
            match setup.parallel.zero {
                0 => comm += words(st.trainable, p),
                1 | 2 => {
                    comm += 2 * words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p);
                    comm_source = source::ZERO_BUCKETS;
                }
                _ => {
                    // The reduce bucket, and three layers' worth of gathered tensors: the current
                    // layer's parameters, the next layer's (prefetched) and the layer's gradients
                    // before they are reduce-scattered.
                    comm += words(st.trainable.min(ZERO_BUCKET_ELEMS as u128), p) + 3 * words(st.layer_params, p);
                    comm_source = source::ZERO_BUCKETS;
                }
            }
        }
        if setup.parallel.sequence && setup.parallel.tensor > 1 {
            comm += words(setup.seq as u128 * setup.micro_batch as u128 * setup.arch.hidden as u128, p);
            if n_d == 1 {
                comm_source = source::SP;
            }
        }
        let allocated: u64 = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
        let allocated = allocated.saturating_add(checked("communication", comm));
        lines.extend([
            Line {
                category: "communication",
                bytes: checked("communication", comm),
                per_batch: setup.parallel.sequence,
                source: comm_source.into(),
            },
            Line {
                category: "workspace",
                bytes: cublas_workspace_bytes(setup.gpu.compute_major),
                per_batch: false,
                source: source::WORKSPACE.into(),
            },
            Line {
                category: "cuda_context",
                bytes: CUDA_CONTEXT_BYTES,
                per_batch: false,
                source: source::CONTEXT.into(),
            },
            Line {
                category: "fragmentation",
                bytes: allocated / 100 * FRAGMENTATION_PERCENT,
                per_batch: true,
                source: source::FRAGMENTATION.into(),
            },
        ]);
    }
    let peak_bytes = lines.iter().map(|l| l.bytes).fold(0, u64::saturating_add);
    let peak_bytes = checked("the peak", peak_bytes as u128);
    if let Some((what, amount)) = too_large.get() {
        return Err(EstimateError::TooLarge { what: what.to_string(), amount, limit: MAX_ESTIMATE_BYTES });
    }
    let tokens = setup.micro_batch as u128 * setup.seq as u128 * setup.accum as u128 * setup.parallel.data as u128;
    Ok(Estimate {
        parameters: setup.arch.parameters(),
        trainable_parameters: match setup.lora {
            None => setup.arch.parameters(),
            Some(l) => (0..setup.arch.layers)
                .flat_map(|_| setup.arch.block_linears())
                .filter(|&(target, _, _)| l.targets(target))
                .map(|(_, k, n)| l.rank * (k + n))
                .sum(),
        },
        lines,
        peak_bytes,
        capacity_bytes: setup.gpu.memory_bytes,
        activations_end_of_forward: checked("activations", act_eof),
        activations_peak: checked("activations", act_peak),
        logits_bytes: checked("the logits", logit_bytes),
        logits_grad_bytes: checked("the logits' gradient", dlogits),
        backward_working_set_bytes: checked("the backward working set", working),
        host_bytes: checked("host memory", st.host),
        pcie_bytes_per_step: checked("PCIe traffic", st.pcie),
        tokens_per_step: checked("tokens per step", tokens),
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

/// One point of a memory-vs-micro-batch sweep, as the JSON document lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepPoint {
    pub micro_batch: u64,
    pub peak_bytes: u64,
    pub fits: bool,
}

/// What the estimator reports for one setup: the JSON document of `oomlab estimate --json` and
/// the app's "copy JSON" (its fields, by name; every number is the closed form's, *predicted*).
#[derive(Clone, Debug, serde::Serialize)]
pub struct EstimateReport {
    /// Every number here is the closed-form estimate's; `sources` names each category's formula.
    pub source: &'static str,
    pub model: String,
    pub architecture: Architecture,
    pub gpu: String,
    pub micro_batch: u64,
    pub seq_len: u64,
    pub accum: u64,
    pub precision: &'static str,
    pub optimizer: &'static str,
    pub parallel: Parallel,
    pub offload: Offload,
    pub checkpoint: String,
    pub attention: &'static str,
    pub lora: Option<Adapters>,
    pub parameters: u64,
    pub trainable_parameters: u64,
    /// Bytes per GPU by category (lines of one category summed).
    pub per_gpu_bytes: std::collections::BTreeMap<String, u64>,
    /// The formula behind each category.
    pub sources: std::collections::BTreeMap<String, String>,
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    pub fits: bool,
    pub max_micro_batch: u64,
    pub tokens_per_step: u64,
    pub host_bytes: u64,
    pub pcie_bytes_per_step: u64,
    pub sweep: Vec<SweepPoint>,
}

impl EstimateReport {
    pub fn new(s: &Setup, e: &Estimate, max_micro_batch: u64, sweep: &[(u64, Estimate)]) -> Self {
        let mut per_gpu = std::collections::BTreeMap::<String, u64>::new();
        let mut sources = std::collections::BTreeMap::new();
        for l in &e.lines {
            let bytes = per_gpu.entry(l.category.to_string()).or_insert(0);
            *bytes = bytes.saturating_add(l.bytes);
            sources.insert(l.category.to_string(), l.source.clone());
        }
        Self {
            source: "predicted",
            model: s.arch.name.clone(),
            architecture: s.arch.clone(),
            gpu: s.gpu.name.clone(),
            micro_batch: s.micro_batch,
            seq_len: s.seq,
            accum: s.accum,
            precision: s.precision.name(),
            optimizer: s.optimizer.name(),
            parallel: s.parallel,
            offload: s.offload,
            checkpoint: s.checkpoint.label(),
            attention: s.attention.name(),
            lora: s.lora,
            parameters: e.parameters,
            trainable_parameters: e.trainable_parameters,
            per_gpu_bytes: per_gpu,
            sources,
            peak_bytes: e.peak_bytes,
            capacity_bytes: e.capacity_bytes,
            fits: e.fits(),
            max_micro_batch,
            tokens_per_step: e.tokens_per_step,
            host_bytes: e.host_bytes,
            pcie_bytes_per_step: e.pcie_bytes_per_step,
            sweep: sweep
                .iter()
                .map(|(b, x)| SweepPoint { micro_batch: *b, peak_bytes: x.peak_bytes, fits: x.fits() })
                .collect(),
        }
    }

    /// The report as a JSON value (keys sorted, as every oomlab document has them).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
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
