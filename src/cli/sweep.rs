//! `sweep`: memory per batch size, predicted or from real steps.

use super::*;

/// One row of a sweep.
pub(super) struct SweepRow {
    /// The effective batch (micro-batch × accumulation).
    pub(super) batch: usize,
    pub(super) memory: Result<StepMemory, String>,
    pub(super) formula: u64,
}

pub(super) fn sweep(execute: bool, csv: Option<&std::path::Path>, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve(&dataset)?;
    let gpu = if execute && r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let start = Instant::now();
    let mut rows = Vec::with_capacity(r.batches.len());
    for &batch in &r.batches {
        let shape = StepShape { batch, seq: r.shape.seq };
        let plan = Plan::build_with(&r.model, shape, &r.optimizer, &r.techniques)?;
        let formula = activation_peak_bytes(&r.model, shape, &r.techniques);
        let memory = if execute {
            let one = Resolved { shape, batches: vec![batch], ..r.clone() };
            match real_step(&one, plan, &dataset, gpu.as_ref()).map(|s| s.memory) {
                Ok(m) => Ok(m),
                Err(f) if f.code == EXIT_OOM => Err(f.message),
                Err(f) => return Err(f),
            }
        } else {
            simulate_peak(&plan, r.budget_bytes).map_err(|e| e.message)
        };
        rows.push(SweepRow { batch: batch * r.techniques.accum, memory, formula });
    }
    let elapsed = start.elapsed().as_secs_f64();
    let largest = rows.iter().filter(|row| row.memory.is_ok()).map(|row| row.batch).max();
    let first_oom = rows.iter().filter(|row| row.memory.is_err()).map(|row| row.batch).min();
    if let Some(path) = csv {
        let mut text = String::from("batch,fits,peak_allocated_bytes,peak_reserved_bytes");
        for c in Category::ALL {
            text.push_str(&format!(",{}", c.name()));
        }
        text.push_str(",activation_formula_bytes,oom\n");
        for row in &rows {
            match &row.memory {
                Ok(m) => {
                    text.push_str(&format!(
                        "{},true,{},{}",
                        row.batch,
                        m.peak_allocated_bytes(),
                        m.peak_reserved_bytes()
                    ));
                    for c in Category::ALL {
                        text.push_str(&format!(",{}", m.peak_allocated.get(c)));
                    }
                    text.push_str(&format!(",{},\n", row.formula));
                }
                Err(msg) => {
                    text.push_str(&format!("{},false,,", row.batch));
                    for _ in Category::ALL {
                        text.push(',');
                    }
                    text.push_str(&format!("{},\"{}\"\n", row.formula, msg.replace('"', "'")));
                }
            }
        }
        std::fs::write(path, text)
            .map_err(|e| Failure { code: EXIT_FAILURE, message: format!("cannot write {}: {e}", path.display()) })?;
    }
    if r.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| match &row.memory {
                Ok(m) => serde_json::json!({"batch": row.batch, "fits": true, "peak_allocated_bytes": m.peak_allocated_bytes(), "peak_reserved_bytes": m.peak_reserved_bytes(), "at_peak": m.peak_allocated, "activation_formula_bytes": row.formula}),
                Err(msg) => serde_json::json!({"batch": row.batch, "fits": false, "oom": msg, "activation_formula_bytes": row.formula}),
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"budget_bytes": r.budget_bytes, "techniques": r.techniques, "source": if execute { "allocator" } else { "predicted" }, "rows": list, "largest_fitting_batch": largest, "first_oom_batch": first_oom, "elapsed_secs": elapsed})
        );
    } else {
        println!(
            "memory per batch ({}, budget {}, seq {}, {}):",
            if execute { "allocator (live), from real steps" } else { "predicted by the plan" },
            format_bytes(r.budget_bytes),
            r.shape.seq,
            r.techniques.describe()
        );
        println!(
            "{:>6} {:>14} {:>14} {:>14} {:>14}",
            "batch", "peak alloc", "peak reserved", "activations", "model state"
        );
        for row in &rows {
            match &row.memory {
                Ok(m) => {
                    let state = m.peak_allocated.get(Category::Parameters)
                        + m.peak_allocated.get(Category::Gradients)
                        + m.peak_allocated.get(Category::OptimizerState)
                        + m.peak_allocated.get(Category::MasterWeights);
                    println!(
                        "{:>6} {:>14} {:>14} {:>14} {:>14}",
                        row.batch,
                        format_bytes(m.peak_allocated_bytes()),
                        format_bytes(m.peak_reserved_bytes()),
                        format_bytes(m.peak_allocated.get(Category::Activations)),
                        format_bytes(state)
                    );
                }
                Err(_) => println!("{:>6} {:>14}", row.batch, "OOM"),
            }
        }
        match largest {
            Some(b) => println!("largest batch that fits: {b}"),
            None => println!("no batch size fits the budget"),
        }
        if let Some(b) = first_oom {
            println!("out of memory from batch {b}");
        }
        println!("({} batch sizes in {:.1} ms)", rows.len(), elapsed * 1e3);
    }
    Ok(())
}
