//! The estimator's report: the JSON document of `oomlab estimate --json` and the app's "copy
//! JSON", and the other runtime profile's figures beside the chosen one's.

use super::{
    Adapters, Architecture, Estimate, Offload, Parallel, Runtime, Setup, activations, estimate, max_micro_batch,
};

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
    /// The framework profile whose dtypes the model states count.
    pub framework: &'static str,
    pub parallel: Parallel,
    pub offload: Offload,
    pub checkpoint: String,
    pub attention: &'static str,
    pub lora: Option<Adapters>,
    pub parameters: u64,
    pub trainable_parameters: u64,
    /// The parameters one token passes through (a mixture of experts': its k experts, not all).
    pub active_parameters: u64,
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
    /// The runtime profile counted, and whether the user chose it.
    pub runtime: &'static str,
    pub runtime_chosen: bool,
    /// Activations + logits + inputs at the loss (what `scripts/check_saved.py` compares).
    pub saved_for_backward_bytes: u64,
    /// One layer's saved tensors, by name, with their sources (a mixture's: one of its layers
    /// with the experts); and those outside the layers.
    pub saved_per_layer: Vec<super::Saved>,
    /// When the layers are not all alike (a mixture's dense layers, layers without RoPE):
    /// each kind, how many layers are of it, and one's saved tensors; left out otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layer_kinds: Vec<super::KindSaved>,
    /// Under pipeline parallelism, every stage: its layers, what it holds, its micro-batches in
    /// flight, its peak (`per_gpu_bytes` is the most loaded stage's); left out otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<super::pipeline::Stage>,
    pub saved_outside: Vec<super::Saved>,
    /// Without a chosen profile: the other profile's figures, beside this one's.
    pub other_runtime: Option<OtherRuntime>,
}

/// The other runtime profile's figures, when the user chose none.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OtherRuntime {
    pub runtime: &'static str,
    pub peak_bytes: u64,
    pub fits: bool,
    pub max_micro_batch: u64,
    pub saved_for_backward_bytes: u64,
}

impl OtherRuntime {
    /// HF eager's figures for a setup with no chosen profile (None once one is chosen, or
    /// for the toy).
    pub fn of(s: &Setup) -> Option<Self> {
        if s.runtime.is_some() {
            return None;
        }
        let mut other = s.clone();
        other.runtime = Some(Runtime::HfEager);
        let e = estimate(&other).ok()?;
        Some(Self {
            runtime: Runtime::HfEager.name(),
            peak_bytes: e.peak_bytes,
            fits: e.fits(),
            max_micro_batch: max_micro_batch(&other).unwrap_or(0),
            saved_for_backward_bytes: e.saved_for_backward_bytes,
        })
    }
}

impl EstimateReport {
    pub fn new(s: &Setup, e: &Estimate, max_micro_batch: u64, sweep: &[(u64, Estimate)]) -> Self {
        let mut per_gpu = std::collections::BTreeMap::<String, u64>::new();
        let mut sources = std::collections::BTreeMap::<String, String>::new();
        for l in &e.lines {
            let bytes = per_gpu.entry(l.category.to_string()).or_insert(0);
            *bytes = bytes.saturating_add(l.bytes);
            // A category of several lines (communication's buffers, pipelining's activations in
            // flight) cites each.
            let source = l.source.english();
            match sources.get_mut(l.category) {
                Some(all) if !all.split("; ").any(|s: &str| s == source) => *all = format!("{all}; {source}"),
                Some(_) => {}
                None => {
                    sources.insert(l.category.to_string(), source);
                }
            }
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
            framework: s.framework.name(),
            parallel: s.parallel,
            offload: s.offload,
            checkpoint: s.checkpoint.label(),
            attention: s.attention.name(),
            lora: s.lora,
            parameters: e.parameters,
            trainable_parameters: e.trainable_parameters,
            active_parameters: s.arch.active_parameters(),
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
            runtime: s.runtime().name(),
            runtime_chosen: s.runtime.is_some(),
            saved_for_backward_bytes: e.saved_for_backward_bytes,
            saved_per_layer: activations::saved_per_layer(s),
            layer_kinds: super::layer_kinds(s),
            stages: e.stages.clone(),
            saved_outside: activations::saved_outside(s),
            other_runtime: OtherRuntime::of(s),
        }
    }

    /// The report as a JSON value (keys sorted, as every oomlab document has them).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
