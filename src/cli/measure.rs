//! `measure`: one real step next to the plan's prediction and the device's report.

use super::*;

pub(super) fn measure(config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let plan = r.plan()?;
    let formula = activation_peak_bytes(&r.model, r.shape, &r.techniques);
    let (flops, recomputed_flops) = plan.flops();
    // Each optimizer state on its own: AdamW's m and v are two more copies of the weights.
    let optimizer_states: std::collections::BTreeMap<String, u64> = plan
        .tensors
        .iter()
        .filter(|t| t.category == Category::OptimizerState)
        .map(|t| (t.name.trim_start_matches("optimizer.").to_string(), t.size_bytes()))
        .collect();
    let predicted = simulate(&plan, r.budget_bytes);
    let gpu = if r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let real = match real_step(&r, plan, &dataset, gpu.as_ref()) {
        Ok(m) => Ok(m),
        Err(f) if f.code == EXIT_OOM => Err(f),
        Err(f) => return Err(f),
    };
    match (real, predicted) {
        (Ok(RealStep { memory: m, loss, backend, device }), Ok(p)) => {
            if r.json {
                let doc = serde_json::json!({
                    "sources": sources_json(&backend),
                    "backend": backend,
                    "batch": r.batch_shape().batch,
                    "micro_batch": r.shape.batch,
                    "accum": r.techniques.accum,
                    "seq_len": r.shape.seq,
                    "techniques": r.techniques,
                    "flops": flops,
                    "recomputed_flops": recomputed_flops,
                    "budget_bytes": r.budget_bytes,
                    "loss": loss,
                    "allocator": m.peak_allocated,
                    "predicted": p.peak_allocated,
                    "allocator_tensor_bytes": m.peak_requested,
                    "predicted_tensor_bytes": p.peak_requested,
                    "allocator_peak_allocated_bytes": m.peak_allocated_bytes(),
                    "allocator_peak_reserved_bytes": m.peak_reserved_bytes(),
                    "predicted_peak_allocated_bytes": p.peak_allocated_bytes(),
                    "predicted_peak_reserved_bytes": p.peak_reserved_bytes(),
                    "allocator_activation_bytes": m.activation_peak_bytes,
                    "predicted_activation_formula_bytes": formula,
                    "optimizer_states": optimizer_states,
                    "allocator_stats": m.stats,
                    "device": device_json(&device),
                    "device_not_reported": match &device {
                        DeviceFigures::NotReported { reason } => Some(reason.clone()),
                        DeviceFigures::Reported(_) => None,
                    },
                });
                println!("{doc}");
            } else {
                println!(
                    "one step on {backend}, batch {}×{}, budget {} — loss {loss:.4}",
                    r.batch_shape().batch,
                    r.shape.seq,
                    format_bytes(r.budget_bytes)
                );
                println!("techniques: {}", r.techniques.describe());
                println!("{:<16} {:>16} {:>16}", "at the peak", "allocator (live)", "predicted (plan)");
                for c in Category::ALL {
                    let (a, b) = (m.peak_allocated.get(c), p.peak_allocated.get(c));
                    if a > 0 || b > 0 {
                        println!("{:<16} {:>16} {:>16}", c.name(), format_bytes(a), format_bytes(b));
                    }
                }
                println!(
                    "{:<16} {:>16} {:>16}",
                    "total",
                    format_bytes(m.peak_allocated_bytes()),
                    format_bytes(p.peak_allocated_bytes())
                );
                println!(
                    "{:<16} {:>16} {:>16}",
                    "peak reserved",
                    format_bytes(m.peak_reserved_bytes()),
                    format_bytes(p.peak_reserved_bytes())
                );
                println!(
                    "activations saved for backward, at their peak: {} by the allocator (live), {} by the closed form (predicted)",
                    format_bytes(m.activation_peak_bytes),
                    format_bytes(formula)
                );
                print!("{}", device_text(&device, m.stats.reserved_bytes));
                if recomputed_flops > 0 {
                    println!(
                        "recomputation: {:.1} MFLOP of {:.1} MFLOP per step ({:.0}% extra compute)",
                        recomputed_flops as f64 / 1e6,
                        flops as f64 / 1e6,
                        100.0 * recomputed_flops as f64 / (flops - recomputed_flops).max(1) as f64
                    );
                }
                if !optimizer_states.is_empty() {
                    let list: Vec<String> =
                        optimizer_states.iter().map(|(name, b)| format!("{name} {}", format_bytes(*b))).collect();
                    println!(
                        "optimizer state, one tensor per state ({}): {}",
                        r.optimizer.kind.name(),
                        list.join(", ")
                    );
                }
                print!("{}", memory_summary(&m, "allocator (live)"));
            }
            Ok(())
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
