//! A text report in the spirit of `torch.cuda.memory_summary()`.

use super::allocator::Stats;
use super::step::StepMemory;
use crate::plan::Category;
use crate::units::format_bytes;

/// The allocator's counters and the step's peak by category, as a fixed-width table; `source`
/// says where the numbers come from ("allocator (live)" or "predicted (plan)").
pub fn memory_summary(memory: &StepMemory, source: &str) -> String {
    let s: &Stats = &memory.stats;
    let line = format!("|{}|\n", "=".repeat(75));
    let thin = format!("|{}|\n", "-".repeat(75));
    let mut out = String::new();
    out.push_str(&line);
    out.push_str(&format!(
        "| {:<73} |\n",
        format!("oomlab memory summary, {source} — capacity {}", format_bytes(memory.capacity_bytes))
    ));
    out.push_str(&thin);
    out.push_str(&format!("| {:<33} | {:>17} | {:>17} |\n", "Metric", "Cur usage", "Peak usage"));
    out.push_str(&thin);
    let row = |name: &str, cur: String, peak: String| format!("| {name:<33} | {cur:>17} | {peak:>17} |\n");
    out.push_str(&row("Allocated memory", format_bytes(s.allocated_bytes), format_bytes(s.peak_allocated_bytes)));
    out.push_str(&row("Reserved memory", format_bytes(s.reserved_bytes), format_bytes(s.peak_reserved_bytes)));
    out.push_str(&row("Reserved but unallocated", format_bytes(s.reserved_unallocated_bytes()), String::new()));
    out.push_str(&row("Requested memory", format_bytes(s.requested_bytes), String::new()));
    out.push_str(&row("Active allocations", s.active_blocks.to_string(), String::new()));
    out.push_str(&row("Segments", s.segments.to_string(), String::new()));
    out.push_str(&row("Largest free block", format_bytes(memory.largest_free_block), String::new()));
    out.push_str(&row(
        "Allocs / frees / segment allocs",
        format!("{} / {} / {}", s.alloc_count, s.free_count, s.segment_allocs),
        String::new(),
    ));
    out.push_str(&row("Out-of-memory errors", s.oom_count.to_string(), String::new()));
    out.push_str(&thin);
    out.push_str(&format!("| {:<33} | {:>17} | {:>17} |\n", "At the peak, by category", "allocated", "tensor bytes"));
    out.push_str(&thin);
    for c in Category::ALL {
        let (a, r) = (memory.peak_allocated.get(c), memory.peak_requested.get(c));
        if a > 0 || r > 0 {
            out.push_str(&row(c.name(), format_bytes(a), format_bytes(r)));
        }
    }
    out.push_str(&line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::simulate;
    use crate::model::{ModelConfig, StepShape};
    use crate::plan::{OptimizerConfig, Plan};

    #[test]
    fn summary_names_every_metric_and_category_present() {
        let plan = Plan::build(&ModelConfig::toy(58), StepShape { batch: 4, seq: 64 }, &OptimizerConfig::default())
            .expect("plan");
        let m = simulate(&plan, 64 << 20).expect("fits");
        let text = memory_summary(&m, "predicted (plan)");
        assert!(text.contains("predicted (plan)"), "{text}");
        for needle in
            ["capacity 64.00 MiB", "Allocated memory", "Reserved memory", "Segments", "activations", "optimizer_state"]
        {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        assert!(text.contains(&format_bytes(m.stats.peak_allocated_bytes)));
        assert!(!text.contains("master_weights"), "absent categories are left out");
    }
}
