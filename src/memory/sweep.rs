//! Memory per batch size: one configuration's peak at each batch — predicted (the plan replayed
//! through the allocator) or from real steps — shared by the app's chart and export,
//! `oomlab sweep` and its CSV.

use super::{StepMemory, simulate_peak};
use crate::plan::{Category, Plan};

/// One configuration's memory at each batch size of a sweep.
#[derive(Clone, Debug)]
pub struct SweepSeries {
    pub name: String,
    /// (effective batch, peak memory or the OOM message).
    pub points: Vec<(usize, Result<StepMemory, String>)>,
}

impl SweepSeries {
    pub fn largest_fitting(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_ok()).map(|(b, _)| *b).max()
    }
    pub fn first_oom(&self) -> Option<usize> {
        self.points.iter().filter(|(_, m)| m.is_err()).map(|(b, _)| *b).min()
    }
}

/// The predicted peak at each effective batch of `batches` whose plan `plan_at` builds (the
/// others are left out), under `budget_bytes`.
pub fn predict(
    batches: &[usize],
    budget_bytes: u64,
    plan_at: impl Fn(usize) -> Option<Plan>,
) -> Vec<(usize, Result<StepMemory, String>)> {
    batches
        .iter()
        .filter_map(|&b| Some((b, simulate_peak(&plan_at(b)?, budget_bytes).map_err(|e| e.message))))
        .collect()
}

/// The columns a sweep's CSV has besides the peaks.
pub struct CsvColumns<'a> {
    /// A first column naming the series (several configurations in one file).
    pub config: bool,
    /// A column with the closed-form activations at each batch.
    pub formula: Option<&'a dyn Fn(usize) -> u64>,
}

/// One row per series and batch size: whether it fits, the peaks, bytes per category at the
/// peak, or the OOM message (quoted).
pub fn csv(series: &[SweepSeries], columns: &CsvColumns<'_>) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "'"));
    let mut out = String::new();
    if columns.config {
        out.push_str("config,");
    }
    out.push_str("batch,fits,peak_allocated_bytes,peak_reserved_bytes");
    for c in Category::ALL {
        out.push(',');
        out.push_str(c.name());
    }
    if columns.formula.is_some() {
        out.push_str(",activation_formula_bytes");
    }
    out.push_str(",oom\n");
    for s in series {
        for (batch, m) in &s.points {
            if columns.config {
                out.push_str(&quote(&s.name));
                out.push(',');
            }
            match m {
                Ok(m) => {
                    out.push_str(&format!("{batch},true,{},{}", m.peak_allocated_bytes(), m.peak_reserved_bytes()));
                    for c in Category::ALL {
                        out.push_str(&format!(",{}", m.peak_allocated.get(c)));
                    }
                }
                Err(_) => {
                    out.push_str(&format!("{batch},false,,"));
                    for _ in Category::ALL {
                        out.push(',');
                    }
                }
            }
            if let Some(f) = columns.formula {
                out.push_str(&format!(",{}", f(*batch)));
            }
            out.push(',');
            if let Err(msg) = m {
                out.push_str(&quote(msg));
            }
            out.push('\n');
        }
    }
    out
}
