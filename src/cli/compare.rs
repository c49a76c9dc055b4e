//! `compare`: each technique against the baseline, in real steps.

use super::*;

/// One technique of `compare`, measured.
#[derive(serde::Serialize)]
pub(super) struct CompareRow {
    pub(super) technique: String,
    pub(super) micro_batch: usize,
    pub(super) accum: usize,
    /// Out of memory under the budget (the other fields are then absent).
    pub(super) oom: Option<String>,
    pub(super) peak_allocated_bytes: Option<u64>,
    pub(super) peak_reserved_bytes: Option<u64>,
    pub(super) activation_bytes: Option<u64>,
    pub(super) step_ms: Option<f64>,
    /// Training throughput: tokens of the effective batch per second.
    pub(super) tokens_per_sec: Option<f64>,
    pub(super) recomputed_flops: u64,
    pub(super) flops: u64,
    pub(super) loss: Option<f32>,
    /// Normwise relative difference of the gradients from the baseline's on the same batch and
    /// the same initial weights: max |g − g₀| / max |g₀|.
    pub(super) grad_rel_diff: Option<f64>,
}

/// The rows of `compare`: the baseline, then each technique alone on the same effective batch,
/// then all of them together (each validated when it runs).
pub(super) fn compare_variants(r: &Resolved) -> Result<Vec<(String, StepRequest)>, ConfigError> {
    let batch = r.batch_shape();
    let model = *r.model();
    let optimizer = *r.optimizer();
    // Every row keeps the allocator's options (`--alloc-conf`): they are the device's, not a
    // technique compared here.
    let allocator = r.techniques().allocator;
    let with = |t: Techniques| StepRequest::with_batch(model, batch, optimizer, Techniques { allocator, ..t });
    let base = with(Techniques::default())?;
    let mut out = vec![("baseline".to_string(), base)];
    let l = model.n_layers;
    let mut checkpoints = vec![Checkpoint::BLOCKS];
    let k = Checkpoint::default_every(l);
    if k > 1 {
        checkpoints.push(Checkpoint::Every(k));
    }
    checkpoints.push(Checkpoint::Selective);
    for c in checkpoints {
        out.push((format!("checkpoint {}", c.label()), with(Techniques { checkpoint: c, ..Techniques::default() })?));
    }
    for precision in [Precision::Fp16, Precision::Bf16] {
        let t = Techniques { precision, ..Techniques::default() };
        out.push((format!("{} mixed precision", precision.name()), with(t)?));
    }
    let fused = Techniques { attention: AttentionKind::Fused, ..Techniques::default() };
    if fused.validate(&model).is_ok() {
        out.push(("fused attention".into(), with(fused)?));
    }
    // Accumulation: the largest of 4 and 2 that splits the batch.
    let accum = [4, 2].into_iter().find(|k| micro_batch(batch.batch, *k).is_ok() && batch.batch > *k - 1);
    if let Some(k) = accum {
        out.push((
            format!("accumulation {}×{}", batch.batch / k, k),
            with(Techniques { accum: k, ..Techniques::default() })?,
        ));
    }
    // LoRA rank 4 (or less on a very narrow model) on every projection.
    let rank = 4.min(model.d_model.saturating_sub(1)).max(1);
    if let Ok(lora) = LoraConfig::new(rank).with_targets("all") {
        let t = Techniques { lora: Some(lora), ..Techniques::default() };
        if t.validate(&model).is_ok() {
            out.push((format!("LoRA r={rank} (all projections)"), with(t)?));
        }
    }
    for kind in [OptimizerKind::Momentum, OptimizerKind::Sgd] {
        let optimizer = OptimizerConfig { kind, ..base.optimizer };
        if base.optimizer.kind != kind {
            out.push((format!("optimizer {}", kind.name()), StepRequest { optimizer, ..base }));
        }
    }
    let all = Techniques {
        checkpoint: Checkpoint::BLOCKS,
        attention: if fused.validate(&model).is_ok() { AttentionKind::Fused } else { AttentionKind::Standard },
        accum: accum.unwrap_or(1),
        lora: None,
        precision: Precision::Fp32,
        allocator: base.techniques.allocator,
        parallel: base.techniques.parallel,
        offload: base.techniques.offload,
        batching: base.techniques.batching,
    };
    let mut parts = vec!["blocks".to_string()];
    if all.attention == AttentionKind::Fused {
        parts.push("fused".into());
    }
    if all.accum > 1 {
        parts.push(format!("accum ×{}", all.accum));
    }
    out.push((format!("combined: {}", parts.join(" + ")), with(all)?));
    Ok(out)
}

pub(super) fn compare(steps: usize, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    r.one_length()?;
    let gpu = open_gpu(&r)?;
    let mut rows: Vec<CompareRow> = Vec::new();
    let mut baseline_grads: Option<Vec<f32>> = None;
    let mut backend_name = String::new();
    for (name, request) in compare_variants(&r)? {
        let v = r.with(request)?;
        let plan = v.plan();
        let (flops, recomputed_flops) = plan.flops();
        let mut row = CompareRow {
            technique: name,
            micro_batch: v.shape().batch,
            accum: v.techniques().accum,
            oom: None,
            peak_allocated_bytes: None,
            peak_reserved_bytes: None,
            activation_bytes: None,
            step_ms: None,
            tokens_per_sec: None,
            recomputed_flops,
            flops,
            loss: None,
            grad_rel_diff: None,
        };
        let outcome = (|| -> Result<(), Failure> {
            let mut trainer = make_trainer(&v, plan, gpu.as_ref())?;
            backend_name = trainer.backend_name();
            let batch = v.batch(&dataset, 0)?;
            row.loss = Some(trainer.compute_grads(&batch)?);
            let grads = trainer.read_grads()?;
            match &baseline_grads {
                None => baseline_grads = Some(grads),
                // LoRA trains other parameters: there is nothing to compare.
                Some(_) if v.techniques().lora.is_some() => {}
                Some(base) => row.grad_rel_diff = Some(rel_diff(&grads, base)),
            }
            let start = Instant::now();
            for i in 0..steps {
                trainer.train_step(&v.batch(&dataset, i as u64)?)?;
            }
            let secs = start.elapsed().as_secs_f64() / steps as f64;
            row.step_ms = Some(secs * 1e3);
            row.tokens_per_sec = Some(v.global_batch_shape().rows() as f64 / secs.max(1e-9));
            if let Some(m) = trainer.memory() {
                row.peak_allocated_bytes = Some(m.peak_allocated_bytes());
                row.peak_reserved_bytes = Some(m.peak_reserved_bytes());
                row.activation_bytes = Some(m.activation_peak_bytes);
            }
            Ok(())
        })();
        match outcome {
            Ok(()) => {}
            Err(f) if f.code == EXIT_OOM => row.oom = Some(f.message),
            Err(f) => return Err(f),
        }
        rows.push(row);
    }
    let report = CompareReport {
        source: "allocator",
        sources: sources_json(&backend_name),
        batch: r.batch_shape().batch,
        seq_len: r.shape().seq,
        budget_bytes: r.budget_bytes,
        rows,
        backend: backend_name,
        model: (r.model().d_model, r.model().n_layers, r.model().n_heads),
    };
    print_report(&report, r.json, CompareReport::text)
}

/// What `compare` reports: the JSON document (its fields, by name) and, for the text, the model.
#[derive(serde::Serialize)]
pub(super) struct CompareReport {
    source: &'static str,
    sources: serde_json::Value,
    backend: String,
    batch: usize,
    seq_len: usize,
    budget_bytes: u64,
    rows: Vec<CompareRow>,
    /// d_model, layers, heads: for the text's heading.
    #[serde(skip)]
    model: (usize, usize, usize),
}

impl CompareReport {
    /// The report as the CLI prints it without --json.
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let (d, l, h) = self.model;
        let _ = writeln!(
            out,
            "techniques on {}: d {d} L {l} heads {h}, batch {}×{}, budget {} (allocator (live), from real steps)",
            self.backend,
            self.batch,
            self.seq_len,
            format_bytes(self.budget_bytes)
        );
        let _ = writeln!(
            out,
            "{:<40} {:>11} {:>11} {:>9} {:>9} {:>9} {:>12}",
            "technique", "peak alloc", "activations", "step (ms)", "tokens/s", "recompute", "grad vs base"
        );
        let or_dash = |x: Option<String>| x.unwrap_or_else(|| "—".into());
        for row in &self.rows {
            if let Some(msg) = &row.oom {
                let _ = writeln!(out, "{:<40} {:>11}  {}", row.technique, "OOM", msg.lines().next().unwrap_or(""));
                continue;
            }
            let recompute = if row.recomputed_flops > 0 {
                format!(
                    "+{:.0}%",
                    100.0 * row.recomputed_flops as f64 / row.flops.saturating_sub(row.recomputed_flops).max(1) as f64
                )
            } else {
                "—".into()
            };
            let _ = writeln!(
                out,
                "{:<40} {:>11} {:>11} {:>9} {:>9} {:>9} {:>12}",
                row.technique,
                or_dash(row.peak_allocated_bytes.map(format_bytes)),
                or_dash(row.activation_bytes.map(format_bytes)),
                or_dash(row.step_ms.map(|ms| format!("{ms:.1}"))),
                or_dash(row.tokens_per_sec.map(|t| format!("{t:.0}"))),
                recompute,
                or_dash(row.grad_rel_diff.map(|d| format!("{d:.1e}"))),
            );
        }
        out.push_str("(grad vs base: max |g − g_base| / max |g_base| on the same batch and initial weights;\n");
        out.push_str(" LoRA trains adapters instead of the weights, so its gradients have nothing to match)\n");
        out
    }
}

/// max |a − b| / max |b|.
pub(super) fn rel_diff(a: &[f32], b: &[f32]) -> f64 {
    let diff = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
    let scale = b.iter().map(|y| (*y as f64).abs()).fold(0.0, f64::max);
    if a.len() != b.len() {
        f64::INFINITY
    } else if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}
