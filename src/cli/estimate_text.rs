//! `oomlab estimate`'s text: one line per category with its source, the pipeline's stages, the
//! peak against the GPU, the sweep; and the saved tensors by name (`--saved`).

use oomlab::estimate::{self, Estimate, Setup};
use oomlab::units::{format_bytes, group_digits};

/// One layer's saved tensors by name, and those outside the layers, for the setup's profile.
pub fn saved_text(s: &Setup) -> String {
    let mut out = format!("\nsaved for backward, one layer ({} profile), per GPU:\n", s.runtime().name());
    let rows = |list: Vec<estimate::Saved>, out: &mut String| {
        for t in list {
            let bytes = format_bytes(u64::try_from(t.bytes).unwrap_or(u64::MAX));
            out.push_str(&format!("  {bytes:>12}  {}  ({})\n", t.english(), t.source));
        }
    };
    let kinds = estimate::layer_kinds(s);
    if kinds.is_empty() {
        rows(estimate::saved_per_layer(s), &mut out);
    }
    for k in kinds {
        let what = if k.kind.experts { "layers with the mixture of experts" } else { "dense layers" };
        let rope = if k.kind.rope { "" } else { ", without RoPE" };
        out.push_str(&format!("each of the {} {what}{rope}:\n", k.layers));
        rows(k.saved, &mut out);
    }
    out.push_str("outside the layers:\n");
    rows(estimate::saved_outside(s), &mut out);
    out
}

/// The estimate as text: one line per category with its source, the peak against the GPU, and
/// the sweep when one was made.
pub fn text(s: &Setup, e: &Estimate, max: u64, sweep: &[(u64, Estimate)]) -> String {
    let mut out = String::new();
    let p = &s.parallel;
    out.push_str(&format!(
        "{} ({}) on {} — predicted by the estimator, per GPU\n",
        s.arch.name,
        e.parameters_text(),
        s.gpu.name
    ));
    if let Some(m) = s.arch.block.moe {
        out.push_str(&format!(
            "a mixture of experts: {} experts, {} per token ({} parameters active per token), expert parallelism {}\n",
            m.experts,
            m.top_k,
            group_digits(s.arch.active_parameters()),
            p.expert
        ));
    }
    if !s.framework.is_default() {
        out.push_str(&format!("framework profile: {}\n", s.framework.name()));
    }
    out.push_str(&format!(
        "micro-batch {} × seq {} × accum {} × {} GPU(s); {} {}, ZeRO {}, TP {}{}, checkpoint {}, {} attention; runtime {}{}\n\n",
        s.micro_batch,
        s.seq,
        s.accum,
        p.data,
        s.precision.name(),
        s.optimizer.name(),
        p.zero,
        p.tensor,
        if p.sequence { " + SP" } else { "" },
        s.checkpoint.label(),
        s.attention.name(),
        s.runtime().name(),
        if s.runtime.is_some() { "" } else { " (the default)" }
    ));
    for l in &e.lines {
        out.push_str(&format!("  {:<16} {:>12}   {}\n", l.category, format_bytes(l.bytes), l.source.english()));
    }
    out.push_str(&format!(
        "  {:<16} {:>12}   of {} ({:.0}%) — {}\n",
        "peak",
        format_bytes(e.peak_bytes),
        format_bytes(e.capacity_bytes),
        100.0 * e.peak_bytes as f64 / e.capacity_bytes.max(1) as f64,
        if e.fits() { "fits" } else { "OUT OF MEMORY" }
    ));
    if let Some(o) = estimate::OtherRuntime::of(s) {
        let verdict = match (e.fits(), o.fits) {
            (true, false) => "fits with fused kernels, not with HF eager",
            (false, true) => "fits with HF eager, not with fused kernels",
            (true, true) => "fits with either",
            (false, false) => "fits with neither",
        };
        out.push_str(&format!(
            "  {:<16} {:>12}   peak with Hugging Face eager code (largest micro-batch {}) — {verdict}; choose one with --runtime\n",
            "hf-eager peak",
            format_bytes(o.peak_bytes),
            o.max_micro_batch
        ));
    }
    if e.host_bytes > 0 {
        out.push_str(&format!(
            "  offload: {} of host memory per GPU, {} over PCIe per step\n",
            format_bytes(e.host_bytes),
            format_bytes(e.pcie_bytes_per_step)
        ));
    }
    if !e.stages.is_empty() {
        // Each pipeline stage; the lines above are the most loaded one's.
        let worst = e.stages.iter().max_by_key(|st| st.peak_bytes).map_or(0, |st| st.stage);
        out.push_str(&format!(
            "pipeline: {} stages, {}; the lines above are stage {worst}'s\n",
            p.pipeline,
            p.schedule.name()
        ));
        for st in &e.stages {
            let holds = match st.holds() {
                "none" => String::new(),
                "both" => " + embedding + head".into(),
                one => format!(" + {one}"),
            };
            // Interleaved, a stage's layers are v chunks spread over the model.
            let layers = match p.schedule.chunks() {
                1 => format!("layers {}–{}", st.first_layer, st.first_layer + st.layers - 1),
                v => format!("{} layers in {v} chunks", st.layers),
            };
            out.push_str(&format!(
                "  stage {:>3}: {layers}{holds}, {:.2} micro-batches in flight, peak {}{}\n",
                st.stage,
                st.micro_batches_in_flight,
                format_bytes(st.peak_bytes),
                if st.fits { "" } else { " — does not fit" }
            ));
        }
    }
    out.push_str(&format!(
        "largest micro-batch that fits: {max}; tokens per optimizer step: {}\n",
        group_digits(e.tokens_per_step)
    ));
    if !sweep.is_empty() {
        out.push_str("\nmemory vs micro-batch (predicted):\n");
        out.push_str(&format!("{:>10} {:>14}  fits {}\n", "batch", "peak/GPU", s.gpu.name));
        for (b, x) in sweep {
            let fits = if x.fits() { "yes" } else { "no (OOM)" };
            out.push_str(&format!("{b:>10} {:>14}  {fits}\n", format_bytes(x.peak_bytes)));
        }
    }
    out
}
