//! `measure`: one real step next to the plan's prediction and the device's report.

use super::*;

pub(super) fn measure(config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let plan = r.plan();
    let formula = activation_peak_bytes(r.model(), r.shape(), r.techniques());
    let (flops, recomputed_flops) = plan.flops();
    // Each optimizer state on its own: AdamW's m and v are two more copies of the weights.
    let optimizer_states: std::collections::BTreeMap<String, u64> = plan
        .tensors
        .iter()
        .filter(|t| t.category == Category::OptimizerState)
        .map(|t| (t.name.trim_start_matches("optimizer.").to_string(), t.size_bytes()))
        .collect();
    // Every rank's prediction (one on one GPU); the first rank that runs out is the step's OOM.
    let rank_plans = r.request.rank_plans();
    let rank_predictions: Result<Vec<StepMemory>, _> = rank_plans.iter().map(|p| simulate(p, r.budget_bytes)).collect();
    let hosts: Vec<HostReport> = rank_plans.iter().map(HostReport::of).collect();
    let predicted = rank_predictions.clone().map(|mut all| all.swap_remove(0));
    let gpu = open_gpu(&r)?;
    let real = match real_step(&r, plan, &dataset, gpu.as_ref()) {
        Ok(m) => Ok(m),
        Err(f) if f.code == EXIT_OOM => Err(f),
        Err(f) => return Err(f),
    };
    match (real, predicted) {
        (Ok(real), Ok(p)) => {
            let ranks = rank_reports(&real.ranks, &rank_predictions.unwrap_or_default(), &hosts);
            let mut report = MeasureReport::new(&r, real, p, formula, (flops, recomputed_flops), optimizer_states);
            report.host = HostReport::of(&rank_plans[0]);
            report.ranks = ranks;
            print_report(&report, r.json, MeasureReport::text)
        }
        (Err(f), predicted) => {
            if r.json {
                let oom = predicted.err().map(|e| oom_json(&e));
                println!(
                    "{}",
                    serde_json::json!({"oom": oom.unwrap_or_else(|| serde_json::json!({"message": f.message})), "budget_bytes": r.budget_bytes, "activation_formula_bytes": formula})
                );
            }
            Err(f)
        }
        (Ok(_), Err(p)) => Err(Failure {
            code: EXIT_FAILURE,
            message: format!("the step ran but the plan predicted an OOM: {}", p.message),
        }),
    }
}

/// One simulated GPU's figures in `measure`'s JSON.
#[derive(serde::Serialize)]
pub(super) struct RankReport {
    rank: usize,
    /// The allocator's peak of allocated bytes on this rank (live).
    peak_bytes: u64,
    peak_reserved_bytes: u64,
    predicted_peak_bytes: u64,
    allocator: oomlab::memory::CategoryBytes,
    predicted: oomlab::memory::CategoryBytes,
    allocator_tensor_bytes: oomlab::memory::CategoryBytes,
    predicted_tensor_bytes: oomlab::memory::CategoryBytes,
    /// What this GPU keeps in host memory (offload).
    host: HostReport,
}

/// Offload's host memory, from the plan: never GPU memory, so in none of the figures above.
#[derive(serde::Serialize, Default)]
pub(super) struct HostReport {
    /// Bytes in host memory per category (all zero without offload).
    bytes: oomlab::memory::CategoryBytes,
    total_bytes: u64,
    /// What the GPU keeps less because of it.
    offloaded_bytes: u64,
    /// Bytes each step copies to the host and back to the GPU.
    to_host_bytes: u64,
    to_device_bytes: u64,
}

impl HostReport {
    fn of(plan: &oomlab::plan::Plan) -> Self {
        let mut bytes = oomlab::memory::CategoryBytes::zero();
        for (c, b) in plan.host_bytes() {
            bytes.add(c, b);
        }
        let (to_host_bytes, to_device_bytes) = oomlab::plan::offload::bus_bytes(plan);
        Self {
            total_bytes: bytes.total(),
            bytes,
            offloaded_bytes: oomlab::plan::offload::offloaded_bytes(plan),
            to_host_bytes,
            to_device_bytes,
        }
    }
}

fn rank_reports(real: &[StepMemory], predicted: &[StepMemory], hosts: &[HostReport]) -> Vec<RankReport> {
    real.iter()
        .zip(predicted)
        .zip(hosts)
        .enumerate()
        .map(|(rank, ((m, p), h))| RankReport {
            rank,
            peak_bytes: m.peak_allocated_bytes(),
            peak_reserved_bytes: m.peak_reserved_bytes(),
            predicted_peak_bytes: p.peak_allocated_bytes(),
            allocator: m.peak_allocated.clone(),
            predicted: p.peak_allocated.clone(),
            allocator_tensor_bytes: m.peak_requested.clone(),
            predicted_tensor_bytes: p.peak_requested.clone(),
            host: HostReport { bytes: h.bytes.clone(), ..*h },
        })
        .collect()
}

/// What `measure` reports: the JSON document (its fields, by name) and, for the text, the step's
/// memory and the device's figures.
#[derive(serde::Serialize)]
pub(super) struct MeasureReport {
    sources: serde_json::Value,
    /// The model that ran: `vocab`, `seq_len` (the positions it has), `d_model`, `n_layers`,
    /// `n_heads` (scripts/check_saved.py builds PyTorch's twin from it).
    model: oomlab::model::ModelConfig,
    backend: String,
    batch: usize,
    micro_batch: usize,
    accum: usize,
    /// Simulated GPUs, and the batch of all of them together.
    gpus: usize,
    global_batch: usize,
    /// Each simulated GPU (one on one GPU); the figures above are rank 0's.
    ranks: Vec<RankReport>,
    /// Offload: what rank 0 keeps in host memory instead (counted in no GPU figure).
    host: HostReport,
    seq_len: usize,
    techniques: Techniques,
    flops: u64,
    recomputed_flops: u64,
    budget_bytes: u64,
    loss: f32,
    allocator: oomlab::memory::CategoryBytes,
    predicted: oomlab::memory::CategoryBytes,
    allocator_tensor_bytes: oomlab::memory::CategoryBytes,
    predicted_tensor_bytes: oomlab::memory::CategoryBytes,
    allocator_peak_allocated_bytes: u64,
    allocator_peak_reserved_bytes: u64,
    predicted_peak_allocated_bytes: u64,
    predicted_peak_reserved_bytes: u64,
    allocator_activation_bytes: u64,
    predicted_activation_formula_bytes: u64,
    optimizer_states: std::collections::BTreeMap<String, u64>,
    allocator_stats: oomlab::memory::Stats,
    device: serde_json::Value,
    device_not_reported: Option<String>,
    #[serde(skip)]
    optimizer: &'static str,
    #[serde(skip)]
    memory: StepMemory,
    #[serde(skip)]
    device_figures: DeviceFigures,
}

impl MeasureReport {
    fn new(
        r: &Resolved,
        real: RealStep,
        p: StepMemory,
        formula: u64,
        (flops, recomputed_flops): (u64, u64),
        optimizer_states: std::collections::BTreeMap<String, u64>,
    ) -> Self {
        let RealStep { memory: m, loss, backend, device, .. } = real;
        Self {
            sources: sources_json(&backend),
            model: *r.model(),
            batch: r.batch_shape().batch,
            micro_batch: r.shape().batch,
            accum: r.techniques().accum,
            gpus: r.techniques().parallel.gpus,
            global_batch: r.global_batch_shape().batch,
            ranks: Vec::new(),
            host: HostReport::default(),
            seq_len: r.shape().seq,
            techniques: *r.techniques(),
            flops,
            recomputed_flops,
            budget_bytes: r.budget_bytes,
            loss,
            allocator: m.peak_allocated.clone(),
            predicted: p.peak_allocated.clone(),
            allocator_tensor_bytes: m.peak_requested.clone(),
            predicted_tensor_bytes: p.peak_requested.clone(),
            allocator_peak_allocated_bytes: m.peak_allocated_bytes(),
            allocator_peak_reserved_bytes: m.peak_reserved_bytes(),
            predicted_peak_allocated_bytes: p.peak_allocated_bytes(),
            predicted_peak_reserved_bytes: p.peak_reserved_bytes(),
            allocator_activation_bytes: m.activation_peak_bytes,
            predicted_activation_formula_bytes: formula,
            optimizer_states,
            allocator_stats: m.stats,
            device: device_json(&device),
            device_not_reported: match &device {
                DeviceFigures::NotReported { reason } => Some(reason.clone()),
                DeviceFigures::Reported(_) => None,
            },
            backend,
            optimizer: r.optimizer().kind.name(),
            memory: m,
            device_figures: device,
        }
    }

    /// The report as the CLI prints it without --json.
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let row = |out: &mut String, name: &str, a: String, b: String| {
            let _ = writeln!(out, "{name:<16} {a:>16} {b:>16}");
        };
        let _ = writeln!(
            out,
            "one step on {}, batch {}×{}, budget {} — loss {:.4}",
            self.backend,
            self.batch,
            self.seq_len,
            format_bytes(self.budget_bytes),
            self.loss
        );
        let _ = writeln!(out, "techniques: {}", self.techniques.describe());
        if self.ranks.len() > 1 {
            let _ = writeln!(
                out,
                "{} simulated GPUs, a global batch of {} (figures below: GPU 0). Each GPU's peak, allocated: {}",
                self.ranks.len(),
                self.global_batch,
                self.ranks
                    .iter()
                    .map(|k| format!("GPU {} {}", k.rank, format_bytes(k.peak_bytes)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if self.host.total_bytes > 0 {
            let _ = writeln!(
                out,
                "offload: {} in host memory (not GPU memory), {} less on the GPU; each step copies {} to the host and {} back",
                format_bytes(self.host.total_bytes),
                format_bytes(self.host.offloaded_bytes),
                format_bytes(self.host.to_host_bytes),
                format_bytes(self.host.to_device_bytes)
            );
        }
        row(&mut out, "at the peak", "allocator (live)".into(), "predicted (plan)".into());
        for c in Category::ALL {
            let (a, b) = (self.allocator.get(c), self.predicted.get(c));
            if a > 0 || b > 0 {
                row(&mut out, c.name(), format_bytes(a), format_bytes(b));
            }
        }
        let (a, p) = (self.allocator_peak_allocated_bytes, self.predicted_peak_allocated_bytes);
        row(&mut out, "total", format_bytes(a), format_bytes(p));
        let (a, p) = (self.allocator_peak_reserved_bytes, self.predicted_peak_reserved_bytes);
        row(&mut out, "peak reserved", format_bytes(a), format_bytes(p));
        let _ = writeln!(
            out,
            "activations saved for backward, at their peak: {} by the allocator (live), {} by the closed form (predicted)",
            format_bytes(self.allocator_activation_bytes),
            format_bytes(self.predicted_activation_formula_bytes)
        );
        out.push_str(&device_text(&self.device_figures, self.allocator_stats.reserved_bytes));
        if self.recomputed_flops > 0 {
            let _ = writeln!(
                out,
                "recomputation: {:.1} MFLOP of {:.1} MFLOP per step ({:.0}% extra compute)",
                self.recomputed_flops as f64 / 1e6,
                self.flops as f64 / 1e6,
                100.0 * self.recomputed_flops as f64 / (self.flops - self.recomputed_flops).max(1) as f64
            );
        }
        if !self.optimizer_states.is_empty() {
            let list: Vec<String> =
                self.optimizer_states.iter().map(|(name, b)| format!("{name} {}", format_bytes(*b))).collect();
            let _ = writeln!(out, "optimizer state, one tensor per state ({}): {}", self.optimizer, list.join(", "));
        }
        out.push_str(&memory_summary(&self.memory, "allocator (live)"));
        out
    }
}
