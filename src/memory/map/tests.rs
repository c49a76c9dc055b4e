//! The map checked against the step's own timeline at every point, cold and warm, with a log
//! that starts mid-run.

use super::*;
use crate::memory::simulate;
use crate::model::{ModelConfig, StepShape};
use crate::plan::{OptimizerConfig, Plan};

/// Checks the map at every point of `m`'s timeline against the timeline's own totals.
fn agrees_everywhere(m: &crate::memory::StepMemory, what: &str) {
    for p in &m.timeline {
        let segs = m.segments_at(p.op);
        let allocated: u64 = segs.iter().map(SegmentState::allocated_bytes).sum();
        let reserved: u64 = segs.iter().map(|s| s.size).sum();
        assert_eq!((allocated, reserved), (p.allocated_bytes, p.reserved_bytes), "{what}, op {:?}", p.op);
        for s in &segs {
            assert_eq!(s.blocks.iter().map(|b| b.size).sum::<u64>(), s.size, "{what}: blocks cover the segment");
        }
    }
}

/// A backend's log starts after the model state and the batch were placed (and a warm
/// step's after the first step's segments were cached): the map still holds every segment.
#[test]
fn a_log_that_starts_mid_run_still_shows_every_segment() {
    use crate::memory::step::{StepAllocator, Trace};
    let model = ModelConfig { d_model: 256, ..ModelConfig::toy(58) };
    let plan = Plan::build(&model, StepShape { batch: 64, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let roomy = simulate(&plan, 1 << 30).expect("fits");
    // A budget tight enough that the step releases cached segments to make room.
    let tight = (1..128u64)
        .filter_map(|k| roomy.peak_reserved_bytes().checked_sub(k * (512 << 10)))
        .find(|&b| simulate(&plan, b).is_ok_and(|m| m.stats.segment_releases > 0))
        .expect("a budget that forces a release");
    for budget in [1 << 30, tight] {
        let mut sa = StepAllocator::new(&plan, budget, true);
        sa.setup(&plan).expect("the model state fits");
        for step in ["cold", "warm"] {
            sa.allocator.clear_events();
            sa.clear_log();
            let mut trace = Trace::detailed();
            trace.record(&sa, None);
            for i in 0..plan.ops.len() {
                sa.before_op(&plan, i).expect("fits");
                trace.record(&sa, Some(i));
                sa.after_op(i);
            }
            let m = trace.finish(&sa);
            assert!(!m.segments_before.is_empty(), "the log began with segments reserved");
            agrees_everywhere(&m, &format!("{step} step at {budget} B"));
            sa.release_step();
        }
    }
    agrees_everywhere(&simulate(&plan, tight).expect("fits"), "a prediction at the tight budget");
}

#[test]
fn the_map_at_the_peak_agrees_with_the_timeline() {
    let plan =
        Plan::build(&ModelConfig::toy(65), StepShape { batch: 8, seq: 64 }, &OptimizerConfig::default()).expect("plan");
    let m = simulate(&plan, 1 << 30).expect("fits");
    let point = &m.timeline[m.peak_index];
    let segs = m.segments_at(point.op);
    let allocated: u64 = segs.iter().map(SegmentState::allocated_bytes).sum();
    let reserved: u64 = segs.iter().map(|s| s.size).sum();
    assert_eq!(allocated, point.allocated_bytes);
    assert_eq!(reserved, point.reserved_bytes);
    for s in &segs {
        assert_eq!(s.blocks.iter().map(|b| b.size).sum::<u64>(), s.size, "blocks cover the segment");
    }
    // Before the first op: the persistent tensors and the batch.
    let before = m.segments_at(None);
    assert_eq!(before.iter().map(SegmentState::allocated_bytes).sum::<u64>(), m.timeline[0].allocated_bytes);
    // Every op of the timeline.
    for p in &m.timeline {
        let segs = m.segments_at(p.op);
        assert_eq!(segs.iter().map(SegmentState::allocated_bytes).sum::<u64>(), p.allocated_bytes, "{:?}", p.op);
    }
}
