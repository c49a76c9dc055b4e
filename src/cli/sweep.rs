//! `sweep`: memory per batch size, predicted or from real steps.

use super::*;

pub(super) fn sweep(execute: bool, csv: Option<&std::path::Path>, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve(&dataset)?;
    let gpu = if execute { open_gpu(&r)? } else { None };
    let start = Instant::now();
    // A point that does not fit says why as the CLI words it (the GPU's allocator, or, with
    // --execute on the CPU, the host).
    let mut series: SweepSeries<Failure> =
        SweepSeries { name: r.techniques().describe(), points: Vec::with_capacity(r.batches.len()) };
    // Each micro-batch size is its own request, validated once; a batch of documents at its first
    // batch's length.
    let batching = r.techniques().batching;
    let at = |micro: usize| -> Result<Resolved, ConfigError> {
        let one = r.at_micro(micro)?;
        if !batching.varies_in_length() {
            return Ok(one);
        }
        let first = one.batch(&dataset, 0)?;
        one.at_seq(first.shape.seq)
    };
    // What a batch of documents holds: its positions and its useful tokens (batch 0 of each size).
    let share = |batches: &Batches| -> Option<oomlab::documents::PaddingShare> {
        let one = at(batches.micro_batch()).ok()?;
        (batching != oomlab::plan::Batching::Windows)
            .then(|| one.batch(&dataset, 0).ok().map(|b| oomlab::documents::PaddingShare::of(&b)))
            .flatten()
    };
    if execute {
        for batches in &r.batches {
            let one = at(batches.micro_batch())?;
            let memory = match real_step(&one, one.plan(), &dataset, gpu.as_ref()).map(|s| s.memory) {
                Ok(m) => Ok(m),
                Err(f) if f.code == EXIT_OOM => Err(f),
                Err(f) => return Err(f),
            };
            series.points.push((one.batch_shape().batch, memory));
        }
    } else {
        // Plans are built only where `predict` needs them; a batch whose plan does not build
        // is left out there, and is an error here.
        let micros: Vec<usize> = r.batches.iter().map(|b| b.micro_batch()).collect();
        let predicted = oomlab::memory::sweep::predict(&micros, r.budget(), |b| at(b).ok().map(|one| one.plan()));
        if predicted.len() != micros.len() {
            for &b in &micros {
                at(b)?;
            }
        }
        series.points = r
            .batches
            .iter()
            .zip(predicted)
            .map(|(b, (_, m))| (b.per_gpu_batch(), m.map_err(|oom| Failure::from(BackendError::OutOfMemory(oom)))))
            .collect();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (largest, first_oom) = (series.largest_fitting(), series.first_oom());
    // The closed-form activations of the micro-batch behind an effective batch.
    let formula = |batches: &Batches| {
        let shape = StepShape { batch: batches.micro_batch(), seq: r.shape().seq };
        activation_peak_bytes(r.model(), shape, r.techniques())
    };
    // The batches behind a point of the series (its batch per GPU).
    let per_gpu = |batch: usize| r.batches.iter().find(|b| b.per_gpu_batch() == batch);
    if let Some(path) = csv {
        let text = oomlab::memory::sweep::csv(
            std::slice::from_ref(&series),
            &oomlab::memory::sweep::CsvColumns {
                config: false,
                formula: Some(&|batch| per_gpu(batch).map_or(0, formula)),
            },
        );
        std::fs::write(path, text).map_err(|e| Failure { code: EXIT_FAILURE, message: cannot_write(path, &e) })?;
    }
    let report = SweepReport {
        budget_bytes: r.budget_bytes,
        techniques: *r.techniques(),
        source: if execute { "allocator" } else { "predicted" },
        rows: series
            .points
            .iter()
            .zip(&r.batches)
            .map(|((batch, memory), batches)| SweepRowReport {
                batch: *batch,
                fits: memory.is_ok(),
                peak_allocated_bytes: memory.as_ref().ok().map(StepMemory::peak_allocated_bytes),
                peak_reserved_bytes: memory.as_ref().ok().map(StepMemory::peak_reserved_bytes),
                at_peak: memory.as_ref().ok().map(|m| m.peak_allocated.clone()),
                oom: memory.as_ref().err().map(|f| f.message.clone()),
                activation_formula_bytes: formula(batches),
                seq: batching
                    .varies_in_length()
                    .then(|| at(batches.micro_batch()).ok().map(|o| o.shape().seq))
                    .flatten(),
                useful_tokens: share(batches).map(|s| s.useful),
                padding_share: share(batches).map(|s| s.share()),
                bytes_per_useful_token: share(batches).and_then(|s| {
                    let peak = memory.as_ref().ok()?.peak_allocated_bytes();
                    (s.useful > 0).then(|| peak as f64 / s.useful as f64)
                }),
            })
            .collect(),
        largest_fitting_batch: largest,
        first_oom_batch: first_oom,
        elapsed_secs: elapsed,
        seq: r.shape().seq,
    };
    print_report(&report, r.json, SweepReport::text)
}

/// One batch size of a sweep: its peaks and the bytes per category at the peak, or the OOM.
#[derive(serde::Serialize)]
pub(super) struct SweepRowReport {
    batch: usize,
    fits: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_allocated_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_reserved_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    at_peak: Option<oomlab::memory::CategoryBytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oom: Option<String>,
    activation_formula_bytes: u64,
    /// Padded and bucketed batches: this batch size's length (its first batch's longest document).
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<usize>,
    /// Batches of documents: the positions holding a token to predict, and the rest's share.
    #[serde(skip_serializing_if = "Option::is_none")]
    useful_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    padding_share: Option<f64>,
    /// The peak over the useful tokens: what padding costs per token that teaches anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_per_useful_token: Option<f64>,
}

/// What `sweep` reports (the JSON document, by field).
#[derive(serde::Serialize)]
pub(super) struct SweepReport {
    budget_bytes: u64,
    techniques: Techniques,
    source: &'static str,
    rows: Vec<SweepRowReport>,
    largest_fitting_batch: Option<usize>,
    first_oom_batch: Option<usize>,
    elapsed_secs: f64,
    #[serde(skip)]
    seq: usize,
}

impl SweepReport {
    /// The report as the CLI prints it without --json.
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "memory per batch ({}, budget {}, seq {}, {}):",
            if self.source == "allocator" { "allocator (live), from real steps" } else { "predicted by the plan" },
            format_bytes(self.budget_bytes),
            self.seq,
            self.techniques.describe()
        );
        let _ = writeln!(
            out,
            "{:>6} {:>14} {:>14} {:>14} {:>14}",
            "batch", "peak alloc", "peak reserved", "activations", "model state"
        );
        for row in &self.rows {
            match (&row.at_peak, row.peak_allocated_bytes, row.peak_reserved_bytes) {
                (Some(at), Some(alloc), Some(reserved)) => {
                    let state = at.get(Category::Parameters)
                        + at.get(Category::Gradients)
                        + at.get(Category::OptimizerState)
                        + at.get(Category::MasterWeights);
                    let _ = write!(
                        out,
                        "{:>6} {:>14} {:>14} {:>14} {:>14}",
                        row.batch,
                        format_bytes(alloc),
                        format_bytes(reserved),
                        format_bytes(at.get(Category::Activations)),
                        format_bytes(state)
                    );
                    if let (Some(share), Some(per)) = (row.padding_share, row.bytes_per_useful_token) {
                        let seq = row.seq.map_or(String::new(), |t| format!(", length {t}"));
                        let _ = write!(out, "  padding {:.0}%, {per:.0} bytes per useful token{seq}", 100.0 * share);
                    }
                    out.push('\n');
                }
                _ => {
                    let _ = writeln!(out, "{:>6} {:>14}", row.batch, "OOM");
                }
            }
        }
        match self.largest_fitting_batch {
            Some(b) => {
                let _ = writeln!(out, "largest batch that fits: {b}");
            }
            None => out.push_str("no batch size fits the budget\n"),
        }
        if let Some(b) = self.first_oom_batch {
            let _ = writeln!(out, "out of memory from batch {b}");
        }
        let _ = writeln!(out, "({} batch sizes in {:.1} ms)", self.rows.len(), self.elapsed_secs * 1e3);
        out
    }
}
