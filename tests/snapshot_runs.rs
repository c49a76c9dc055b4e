//! A real run's snapshot, read right, on fixtures that run everywhere: gpu_step.pickle and
//! gpu_step_rank1.pickle, one training step of a two-layer MLP written as PyTorch writes on a GPU
//! with `stacks="all"` (C++ frames above the Python ones, the backward on the autograd engine's
//! thread, `Optimizer.step` annotated, the allocator's settings, an `empty_cache()` after the
//! recording began), placed by PyTorch's rules (tests/fixtures/snapshot/gpu_step.py, which also
//! writes what it knows in gpu_step.json). The same checks run on real snapshots in
//! tests/snapshot_real.rs, where they are at hand.

use oomlab::memory::snapshot::compare;
use oomlab::memory::snapshot::explain::{self, Evidence, Guess};
use oomlab::memory::snapshot::phase::{PhaseKind, PhaseSource};
use oomlab::memory::snapshot::place::{Whose, viz_keeps};
use oomlab::memory::snapshot::{dump::Dump, read, replay, simulate, transfer};
use serde_json::Value;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot")
}

fn open(name: &str) -> Dump {
    read::from_bytes(&std::fs::read(dir().join(name)).expect("fixture")).expect(name)
}

fn facts(name: &str) -> Value {
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("gpu_step.json")).expect("sidecar")).expect("JSON");
    all[name].clone()
}

fn bytes_of(h: &explain::Holding, k: Guess) -> i64 {
    h.by_guess.iter().find(|(g, _)| *g == k).map_or(0, |x| x.1)
}

/// What today's PyTorch writes besides the trace: every allocator setting in its order, the
/// annotations, user metadata; an action and a key no PyTorch writes are counted, not a crash.
#[test]
fn the_whole_format_is_read() {
    let d = open("gpu_step.pickle");
    let a = d.allocator_settings.as_ref().expect("allocator_settings");
    assert_eq!(a.alloc_conf, "");
    assert_eq!((a.max_split_size, a.garbage_collection_threshold), (Some(-1), Some(0.0)));
    assert_eq!(a.graph_capture_record_stream_reuse, Some(false));
    let divisions = a.roundup_power2_divisions.as_ref().expect("divisions");
    let keys: Vec<&str> = divisions.0.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.first().copied(), Some("1"));
    assert_eq!(keys.last().copied(), Some("32768"));
    assert_eq!(keys.len(), 16);
    assert!(!a.rounds_power2());
    assert_eq!(d.annotations.len(), 4);
    assert_eq!(d.annotations[2].name, "Optimizer.step#AdamW.step");
    assert!(d.annotations[2].is_start());
    assert_eq!(d.metadata.len(), 1);
    assert_eq!(d.metadata[0].text, "rank 0, step 3");
    assert_eq!(d.unknown.actions.get("future_action"), Some(&1));
    assert_eq!(d.unknown.keys.get("trace.future_key"), Some(&1));
    assert!(d.segments.iter().all(|g| g.pool == [0, 0] && !g.expandable && g.small.is_some()));

    // The browser's worker hands all of it to the page.
    let back = transfer::from_bytes(&transfer::to_bytes(&d)).expect("the worker's buffer");
    assert_eq!(back, d);
    // And the JSON form (the newest viewer's other input) reads back to the same.
    let json = serde_json::to_vec(&d.to_wire()).expect("JSON");
    let j = read::from_bytes(&json).expect("reads");
    assert_eq!(j.annotations, d.annotations);
    assert_eq!(j.allocator_settings, d.allocator_settings);
}

/// Places name the user's own lines and the operator, never a frame memory_viz hides; the
/// backward, with no Python frame, says so and names the operator and the autograd node.
#[test]
fn places_are_the_users_lines() {
    let d = open("gpu_step.pickle");
    let r = replay::replay(&d, 0, 50);
    let all = explain::holding(&r, Some(r.events - 1), usize::MAX);
    for l in &r.lifetimes {
        let p = r.sites.place(l.stack);
        assert!(viz_keeps(&p.function, &p.file), "{p:?}");
        let text = p.text();
        assert!(!text.contains("gather_with_cpp") && !text.contains("CUDACachingAllocator"), "{text}");
    }
    // The forward's activations: model.py's lines with the operator, under torch's _call_impl.
    let placed: Vec<String> = r.lifetimes.iter().map(|l| r.sites.place(l.stack).text()).collect();
    assert!(placed.iter().any(|t| t == "model.py:14 forward (aten::addmm)"), "{placed:?}");
    assert!(placed.iter().any(|t| t == "model.py:15 forward (aten::relu)"), "{placed:?}");
    // The loss: torch's functional.py is not the place; the user's train.py line is.
    assert!(placed.iter().any(|t| t == "train.py:80 main (aten::_log_softmax)"), "{placed:?}");
    // The backward on the engine's thread: no Python frame, its operator and node.
    assert!(placed.iter().any(|t| t == "no Python frame (aten::mm in AddmmBackward0)"), "{placed:?}");
    assert!(placed.iter().any(|t| t == "no Python frame (aten::empty_like in AccumulateGrad)"), "{placed:?}");
    // The optimizer's state: torch's own adamw.py is not the place; the user's call is.
    assert!(placed.iter().any(|t| t == "train.py:84 main (aten::zeros_like)"), "{placed:?}");
    // Alive before the recording, with no stack.
    assert!(all.groups.iter().any(|g| g.place.whose == Whose::None && g.site == "no stack recorded"));
    // The same in the CLI's summary.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "show"])
        .arg(dir().join("gpu_step.pickle"))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("gather_with_cpp") && !text.contains("memory_snapshot.cpp"), "{text}");
    assert!(text.contains("no Python frame (aten::empty_like in AccumulateGrad)"), "{text}");
    assert!(text.contains("read past what oomlab does not know") && text.contains("future_action ×1"), "{text}");
    assert!(text.contains("events with user metadata: 1"), "{text}");
}

/// The phases: zero_grad and the optimizer step from PyTorch's annotations, the forward and
/// the backward from the stacks; each allocation knows where it was made and freed.
#[test]
fn phases_come_from_the_annotations_and_the_stacks() {
    let d = open("gpu_step.pickle");
    let r = replay::replay(&d, 0, 5);
    let kinds: Vec<(PhaseKind, PhaseSource)> = r.phases.iter().map(|p| (p.kind, p.source)).collect();
    assert_eq!(
        kinds,
        [
            (PhaseKind::Forward, PhaseSource::Stacks),
            (PhaseKind::Backward, PhaseSource::Stacks),
            (PhaseKind::Optimizer, PhaseSource::Annotation),
        ],
        "{:?}",
        r.phases
    );
    let step = &r.phases[2];
    assert_eq!(step.name, "Optimizer.step#AdamW.step");
    assert_eq!(step.label(), "optimizer step (Optimizer.step#AdamW.step)");
    // The empty_cache() before the forward is in no phase.
    let trace = replay::trace(&d, 0);
    assert_eq!(trace[0].action(), oomlab::memory::snapshot::dump::Action::SegmentFree);
    assert!(r.phases[0].first > 0);
    // Activations: made in the forward, freed in the backward.
    let act: Vec<_> = r.lifetimes.iter().filter(|l| l.evidence == Evidence::ForwardToBackward).collect();
    assert!(!act.is_empty());
    for l in act {
        assert_eq!(r.phases[l.made as usize].kind, PhaseKind::Forward);
        assert_eq!(r.phases[l.freed as usize].kind, PhaseKind::Backward);
    }
}

/// The kinds hold what the model holds: parameters (and the batch) alive before the recording,
/// gradients the parameters' bytes, AdamW's state twice that.
#[test]
fn kinds_hold_what_the_model_holds() {
    let f = facts("gpu_step.pickle");
    let params = f["parameter_bytes"].as_i64().expect("bytes");
    let input = f["input_bytes"].as_i64().expect("bytes");
    let d = open("gpu_step.pickle");
    let r = replay::replay(&d, 0, 5);
    let end = explain::holding(&r, Some(r.events - 1), usize::MAX);
    assert_eq!(bytes_of(&end, Guess::Parameters), params + input, "{:?}", end.by_guess);
    assert_eq!(bytes_of(&end, Guess::Gradients), f["gradient_bytes"].as_i64().expect("bytes"));
    assert_eq!(bytes_of(&end, Guess::OptimizerState), f["optimizer_state_bytes"].as_i64().expect("bytes"));
    assert_eq!(end.bytes, r.final_state.allocated);
    for g in &end.groups {
        let want = match g.guess {
            Guess::Parameters => Evidence::BeforeRecording,
            Guess::Gradients => Evidence::BackwardIntoStep,
            Guess::OptimizerState => Evidence::StepAndAfter,
            other => panic!("nothing else is alive at the end: {other:?} {g:?}"),
        };
        assert_eq!(g.evidence, want, "{g:?}");
        assert!(!g.known, "a PyTorch snapshot's kinds are oomlab's reading, not named in the file");
    }
    // At the peak (inside the step): the step's temporaries too, each said to be one.
    let peak = explain::holding(&r, r.peak_index, usize::MAX);
    assert_eq!(peak.bytes, r.peak_allocated);
    assert!(peak.groups.iter().any(|g| g.guess == Guess::Temporaries && g.evidence == Evidence::WithinPhase));
    // The forward's activations at the moment the backward starts.
    let backward = r.phases.iter().find(|p| p.kind == PhaseKind::Backward).expect("backward");
    let then = explain::holding(&r, Some(backward.first), usize::MAX);
    let batch = f["batch"].as_i64().expect("batch");
    // h1, r1, y (fc1's, relu's and fc2's outputs) and log-probabilities: (4096 + 4096 + 1024 + 1024) · b · 4.
    assert_eq!(bytes_of(&then, Guess::Activations), (4096 + 4096 + 1024 + 1024) * batch * 4 + 4, "{:?}", then.by_guess);

    // The workflow names the place that grew most (by the end: AdamW's state, at the step call).
    let advice = explain::diagnose(&r, &explain::holding(&r, Some(r.events - 1), 10));
    let place = advice.iter().find_map(|a| match a {
        explain::Advice::Where { guess: Guess::OptimizerState, place, bytes } => Some((place.text(), *bytes)),
        _ => None,
    });
    assert_eq!(
        place,
        Some(("train.py:84 main (aten::zeros_like)".to_string(), f["optimizer_state_bytes"].as_i64().expect("bytes"))),
        "{advice:?}"
    );

    // A later step (recorded after warm-up, AdamW updating its state in place): the step made no
    // state, so what was alive before the recording holds it too, and is said to.
    let w = open("gpu_step_warm.pickle");
    let rw = replay::replay(&w, 0, 5);
    let end = explain::holding(&rw, Some(rw.events - 1), usize::MAX);
    assert_eq!(bytes_of(&end, Guess::Parameters), 0, "{:?}", end.by_guess);
    assert_eq!(bytes_of(&end, Guess::ParametersAndState), 3 * params + input, "{:?}", end.by_guess);
    assert!(end.groups.iter().any(|g| g.evidence == Evidence::BeforeRecordingWithState));
    assert_eq!(bytes_of(&end, Guess::Gradients), params);
}

/// Replayed through oomlab's allocator with the run's own settings, the run's segments come
/// back: its peak reserved and its segments, the `empty_cache()` replayed where it happened.
/// With expandable segments it would have reserved less.
#[test]
fn the_run_replays_through_oomlabs_allocator() {
    let d = open("gpu_step.pickle");
    let r = replay::replay(&d, 0, 0);
    let s = simulate::simulate(&d, &r, None, None).expect("replays");
    assert!(s.run_settings);
    assert_eq!(s.real, s.replayed, "{s:?}");
    assert_eq!(s.releases, 1, "the empty_cache() after the recording began");
    assert_eq!(s.real.segment_frees, 1);
    assert_eq!(s.unmatched_frees, 0);
    assert_eq!(s.reserved.len(), r.events);
    assert_eq!(s.reserved.iter().max().copied(), Some(r.peak_reserved));

    // With expandable segments: one segment per pool, grown in whole pages (here, more than the
    // run's own segments: each large growth is a 20 MiB page, and nothing is unmapped mid-step).
    let expandable = oomlab::plan::AllocatorConfig::parse("expandable_segments:True").expect("valid");
    let e = simulate::simulate(&d, &r, Some(expandable), None).expect("replays");
    assert!(!e.run_settings);
    assert_ne!(e.replayed.peak_reserved_bytes, s.real.peak_reserved_bytes, "{e:?}");
    assert_eq!(e.replayed.segment_allocs, 2, "one segment per pool: {e:?}");
    assert_eq!(e.replayed.peak_reserved_bytes % (2 << 20), 0);
    // garbage_collection_threshold needs the GPU's memory, which this file does not say.
    let gc = oomlab::plan::AllocatorConfig::parse("garbage_collection_threshold:0.5").expect("valid");
    assert_eq!(simulate::simulate(&d, &r, Some(gc), None), Err(simulate::SimulateError::NeedsCapacity));
    assert!(simulate::simulate(&d, &r, Some(gc), Some(1 << 30)).is_ok());

    // A CUDA graph's private pool (after the warm step): its own segments, its own requests; the
    // replay keeps them apart from the default pool's and gives the run's segments back.
    let w = open("gpu_step_warm.pickle");
    let private: Vec<_> = w.segments.iter().filter(|g| g.is_private()).collect();
    assert_eq!(private.len(), 2);
    assert!(private.iter().all(|g| g.pool == [1, 2]));
    let rw = replay::replay(&w, 0, 0);
    let sw = simulate::simulate(&w, &rw, None, None).expect("replays");
    assert_eq!(sw.real, sw.replayed, "{sw:?}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "show"])
        .arg(dir().join("gpu_step_warm.pickle"))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("private pools (CUDA graphs, MemPools): 2 segments"), "{text}");

    // The CLI, and its JSON.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "replay", "--alloc-conf", "expandable_segments:True", "--json"])
        .arg(dir().join("gpu_step.pickle"))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let dev = &doc["devices"][0];
    assert_eq!(dev["real"]["peak_reserved_bytes"], r.peak_reserved);
    assert_eq!(dev["real"]["segment_allocs"], s.real.segment_allocs);
    assert_eq!(dev["replayed"]["peak_reserved_bytes"], e.replayed.peak_reserved_bytes);
    assert_eq!(dev["replayed"]["segment_allocs"], e.replayed.segment_allocs);
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "replay", "--alloc-conf", "expandable_segments:True"])
        .arg(dir().join("gpu_step.pickle"))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("this run would have reserved"), "{text}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "replay", "--alloc-conf", "garbage_collection_threshold:0.5"])
        .arg(dir().join("gpu_step.pickle"))
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--device-memory"));
}

/// Two snapshots side by side, and the ranks of one run: the peaks, and what grew where; each
/// side's column adds up to its peak.
#[test]
fn snapshots_compare_by_place_and_kind() {
    let (a, b) = (open("gpu_step.pickle"), open("gpu_step_rank1.pickle"));
    let (ra, rb) = (replay::replay(&a, 0, 0), replay::replay(&b, 0, 0));
    let d = compare::diff("gpu_step.pickle", &ra, "gpu_step_rank1.pickle", &rb);
    assert_eq!(d.by_place.iter().map(|p| p.a_bytes).sum::<i64>(), ra.peak_allocated);
    assert_eq!(d.by_place.iter().map(|p| p.b_bytes).sum::<i64>(), rb.peak_allocated);
    assert_eq!(d.by_kind.iter().map(|k| k.a_bytes).sum::<i64>(), ra.peak_allocated);
    assert_eq!(d.by_kind.iter().map(|k| k.b_bytes).sum::<i64>(), rb.peak_allocated);
    assert_eq!(d.grew(), rb.peak_allocated - ra.peak_allocated);
    // The larger batch's input is what grew at the peak (the step's peak: parameters, gradients,
    // state and the batch).
    let batch = |n: &str| facts(n)["input_bytes"].as_i64().expect("bytes");
    assert!(
        d.by_place
            .iter()
            .any(|p| p.place == "no stack recorded"
                && p.grew() == batch("gpu_step_rank1.pickle") - batch("gpu_step.pickle")),
        "{:?}",
        d.by_place
    );

    let ranks = compare::ranks(&[("snap_rank0.pickle".into(), &ra), ("snap_rank1.pickle".into(), &rb)]).expect("ranks");
    assert_eq!((ranks.worst, ranks.best), (1, 0));
    assert_eq!(ranks.spread_bytes, rb.peak_allocated - ra.peak_allocated);
    assert_eq!(ranks.extra.b.peak_allocated_bytes, rb.peak_allocated);
    assert!(ranks.worst_over_mean_percent > 0.0);

    // The CLI: diff's JSON, and a folder of ranks.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "diff", "--json"])
        .arg(dir().join("gpu_step.pickle"))
        .arg(dir().join("gpu_step_rank1.pickle"))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["a"]["peak_allocated_bytes"], ra.peak_allocated);
    assert_eq!(doc["b"]["peak_allocated_bytes"], rb.peak_allocated);
    let rows = doc["by_place"].as_array().expect("by_place");
    assert_eq!(rows.iter().map(|r| r["a_bytes"].as_i64().expect("a")).sum::<i64>(), ra.peak_allocated);
    assert_eq!(rows.iter().map(|r| r["b_bytes"].as_i64().expect("b")).sum::<i64>(), rb.peak_allocated);
    assert!(rows.iter().all(|r| r["place"].is_string()));

    let folder = tempfile::tempdir().expect("temp");
    for (from, to) in [("gpu_step.pickle", "run_rank0.pickle"), ("gpu_step_rank1.pickle", "run_rank1.pickle")] {
        std::fs::copy(dir().join(from), folder.path().join(to)).expect("copied");
    }
    std::fs::write(folder.path().join("notes.txt"), "not a snapshot").expect("written");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(["snapshot", "show", "--json"])
        .arg(folder.path())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["ranks"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["worst"], 1);
    assert_eq!(doc["spread_bytes"], rb.peak_allocated - ra.peak_allocated);
    assert!(doc["extra"]["by_place"].is_array());
}
