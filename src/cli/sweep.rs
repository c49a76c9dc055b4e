//! `sweep`: memory per batch size, predicted or from real steps.

use super::*;

pub(super) fn sweep(execute: bool, csv: Option<&std::path::Path>, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve(&dataset)?;
    let gpu = if execute && r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let start = Instant::now();
    let mut series = SweepSeries { name: r.techniques.describe(), points: Vec::with_capacity(r.batches.len()) };
    for &batch in &r.batches {
        let shape = StepShape { batch, seq: r.shape.seq };
        let plan = Plan::build_with(&r.model, shape, &r.optimizer, &r.techniques)?;
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
        series.points.push((batch * r.techniques.accum, memory));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (largest, first_oom) = (series.largest_fitting(), series.first_oom());
    // The closed-form activations of the micro-batch behind an effective batch.
    let formula = |batch: usize| {
        let shape = StepShape { batch: batch / r.techniques.accum.max(1), seq: r.shape.seq };
        activation_peak_bytes(&r.model, shape, &r.techniques)
    };
    if let Some(path) = csv {
        let text = oomlab::memory::sweep::csv(
            std::slice::from_ref(&series),
            &oomlab::memory::sweep::CsvColumns { config: false, formula: Some(&formula) },
        );
        std::fs::write(path, text)
            .map_err(|e| Failure { code: EXIT_FAILURE, message: format!("cannot write {}: {e}", path.display()) })?;
    }
    if r.json {
        let list: Vec<serde_json::Value> = series
            .points
            .iter()
            .map(|(batch, memory)| match memory {
                Ok(m) => serde_json::json!({"batch": batch, "fits": true, "peak_allocated_bytes": m.peak_allocated_bytes(), "peak_reserved_bytes": m.peak_reserved_bytes(), "at_peak": m.peak_allocated, "activation_formula_bytes": formula(*batch)}),
                Err(msg) => serde_json::json!({"batch": batch, "fits": false, "oom": msg, "activation_formula_bytes": formula(*batch)}),
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
        for (batch, memory) in &series.points {
            match memory {
                Ok(m) => {
                    let state = m.peak_allocated.get(Category::Parameters)
                        + m.peak_allocated.get(Category::Gradients)
                        + m.peak_allocated.get(Category::OptimizerState)
                        + m.peak_allocated.get(Category::MasterWeights);
                    println!(
                        "{:>6} {:>14} {:>14} {:>14} {:>14}",
                        batch,
                        format_bytes(m.peak_allocated_bytes()),
                        format_bytes(m.peak_reserved_bytes()),
                        format_bytes(m.peak_allocated.get(Category::Activations)),
                        format_bytes(state)
                    );
                }
                Err(_) => println!("{:>6} {:>14}", batch, "OOM"),
            }
        }
        match largest {
            Some(b) => println!("largest batch that fits: {b}"),
            None => println!("no batch size fits the budget"),
        }
        if let Some(b) = first_oom {
            println!("out of memory from batch {b}");
        }
        println!("({} batch sizes in {:.1} ms)", series.points.len(), elapsed * 1e3);
    }
    Ok(())
}
