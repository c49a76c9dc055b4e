//! One real step and what it reports: the allocator's account, the device's figures, the sources.

use super::*;

/// One real step: the allocator's live account of it, the loss, the backend, and the device's
/// figures.
pub(super) struct RealStep {
    pub(super) memory: StepMemory,
    /// Every simulated GPU's record (rank 0's is `memory`).
    pub(super) ranks: Vec<StepMemory>,
    pub(super) loss: f32,
    pub(super) backend: String,
    pub(super) device: DeviceFigures,
}

/// Runs one real step on the configured backend (the GPU one on `gpu`).
pub(super) fn real_step(r: &Resolved, plan: Plan, dataset: &Dataset, gpu: Option<&Gpu>) -> Result<RealStep, Failure> {
    let mut trainer = make_trainer(r, plan, gpu)?;
    let batch = r.batch(dataset, 0)?;
    let loss = trainer.train_step(&batch)?;
    let memory =
        trainer.memory().cloned().ok_or_else(|| Failure { code: EXIT_FAILURE, message: "no step ran".into() })?;
    let ranks = trainer.rank_memories().into_iter().cloned().collect();
    Ok(RealStep { memory, ranks, loss, backend: trainer.backend_name(), device: trainer.device_figures() })
}

/// Prints a subcommand's report: its JSON document (keys sorted, through a JSON value) with
/// --json, else its text.
pub(super) fn print_report<R: serde::Serialize>(report: &R, json: bool, text: fn(&R) -> String) -> Result<(), Failure> {
    if json {
        let doc = serde_json::to_value(report).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
        println!("{doc}");
    } else {
        print!("{}", text(report));
    }
    Ok(())
}

/// What each source of a number means, for JSON documents and the CLI's text.
pub(super) fn sources_json(backend: &str) -> serde_json::Value {
    serde_json::json!({
        "predicted": SOURCE_PREDICTED,
        "allocator": format!("{SOURCE_ALLOCATOR} on {backend}"),
        "device": SOURCE_DEVICE,
    })
}

/// The device object of a JSON document: the driver's figures, or why there are none.
pub(super) fn device_json(device: &DeviceFigures) -> serde_json::Value {
    match device {
        DeviceFigures::Reported(d) => {
            let (blocks, block_bytes) = d.segment_blocks();
            serde_json::json!({
                "segment_buffers": d.segments.len(),
                "segment_bytes": d.segment_bytes(),
                "requested_bytes": d.requested_bytes(),
                "driver_rounding_bytes": d.rounding_bytes() as i64,
                "peak_segment_bytes": d.peak_segment_bytes,
                "memory_blocks": blocks,
                "memory_block_bytes": block_bytes,
                "other_allocations": d.other_allocations,
                "other_bytes": d.other_bytes,
                "total_allocated_bytes": d.total_allocated_bytes,
                "total_reserved_bytes": d.total_reserved_bytes,
                "missing_segments": d.missing,
                "leftover_buffers": d.leftover,
                "counters": d.counters,
                "segments": d.segments,
            })
        }
        DeviceFigures::NotReported { .. } => serde_json::Value::Null,
    }
}

/// The device's figures as the CLI prints them, next to the allocator's reserved bytes.
pub(super) fn device_text(device: &DeviceFigures, allocator_reserved: u64) -> String {
    match device {
        DeviceFigures::Reported(d) => {
            let (blocks, block_bytes) = d.segment_blocks();
            format!(
                "device (driver report): {} segment buffer(s) hold {} — the allocator's {} reserved + {} bytes of the driver's \
                 rounding — in {blocks} driver memory block(s) of {} in all; {} other allocations ({}) outside oomlab's allocator\n",
                d.segments.len(),
                format_bytes(d.segment_bytes()),
                format_bytes(allocator_reserved),
                d.rounding_bytes(),
                format_bytes(block_bytes),
                d.other_allocations,
                format_bytes(d.other_bytes),
            )
        }
        DeviceFigures::NotReported { reason } => format!("device: {reason}\n"),
    }
}

pub(super) fn oom_json(oom: &oomlab::memory::StepOom) -> serde_json::Value {
    serde_json::json!({
        "message": oom.message,
        "tensor": oom.tensor_name,
        "category": oom.category.name(),
        "op": oom.op_label,
        "requested_bytes": oom.error.requested_bytes,
        "tried_bytes": oom.error.tried_bytes,
        "capacity_bytes": oom.error.capacity_bytes,
        "free_bytes": oom.error.free_bytes,
        "allocated_bytes": oom.error.allocated_bytes,
        "reserved_bytes": oom.error.reserved_bytes,
    })
}
