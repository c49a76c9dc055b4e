//! PyTorch memory snapshots in and out (issue 16): the export replays exactly into oomlab's own
//! allocator at every event; it keeps the web viewer's consistency rules; PyTorch's own reader
//! (`python -m torch.cuda._memory_viz stats|trace`, its output committed beside the file) reports
//! the same totals; foreign producers' shapes are read; bad files are clear errors.

use oomlab::backend::Trainer;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Dataset;
use oomlab::memory::allocator::Event;
use oomlab::memory::snapshot::dump::Dump;
use oomlab::memory::snapshot::{Snapshot, SnapshotError, export, read, replay};
use oomlab::memory::step::{StepAllocator, TensorTag};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Checkpoint, OptimizerConfig, Plan, Precision, Techniques};

const BUDGET: u64 = 1 << 30;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot").join(name);
    std::fs::read(path).expect("fixture")
}

fn toy_plan(batch: usize, techniques: Techniques) -> Plan {
    let v = Dataset::builtin().tokenizer.vocab_size();
    let shape = StepShape { batch, seq: 64 };
    Plan::build_with(&ModelConfig::toy(v), shape, &OptimizerConfig::default(), &techniques).expect("plan")
}

/// oomlab's own running totals after each allocator event: (allocated requests, reserved).
fn own_timeline(events: &[Event<TensorTag>], plan: &Plan) -> Vec<(i64, i64)> {
    let (mut a, mut r) = (0i64, 0i64);
    let mut out = Vec::new();
    for e in events {
        match e {
            Event::SegmentAlloc { size, .. } => r += *size as i64,
            Event::SegmentFree { size, .. } | Event::SegmentUnmap { size, .. } => r -= *size as i64,
            Event::SegmentMap { size, .. } => r += *size as i64,
            Event::Alloc { requested, .. } => a += *requested as i64,
            Event::Free { tag, .. } => a -= plan.tensor(tag.tensor).size_bytes() as i64,
            Event::Oom { .. } => {}
        }
        out.push((a, r));
    }
    out
}

fn round_trip(plan: &Plan, capacity: u64) -> (Snapshot, Vec<Event<TensorTag>>) {
    let (events, _) = export::record_step(plan, capacity);
    let snap = export::snapshot(plan, &events, capacity);
    let bytes = export::to_pickle(&snap).expect("pickle");
    let back = read::from_bytes(&bytes).expect("reads back");
    assert_eq!(back.to_wire(), dump(&snap).to_wire(), "export → pickle → import is the identity");
    assert_eq!(back.events(), snap.device_traces.iter().map(Vec::len).sum::<usize>());
    (snap, events)
}

fn dump(s: &Snapshot) -> Dump {
    Dump::from_wire(s)
}

/// Export, import, compare: the timeline equals oomlab's own at every event (a free is two
/// trace entries, requested then completed), and the final segments are the allocator's own —
/// same segments in address order, same blocks, same tensors.
#[test]
fn the_export_replays_into_oomlabs_own_allocator() {
    let cases = [
        (16, Techniques::default()),
        (8, Techniques { checkpoint: Checkpoint::BLOCKS, ..Techniques::default() }),
        (16, Techniques { accum: 4, precision: Precision::Fp16, ..Techniques::default() }),
        // Expandable segments: the export's segments grow with segment_map entries, and
        // PyTorch's format marks them is_expandable.
        (
            48,
            Techniques {
                allocator: oomlab::plan::AllocatorConfig::parse("expandable_segments:True").expect("valid"),
                ..Techniques::default()
            },
        ),
    ];
    for (batch, techniques) in cases {
        let plan = toy_plan(batch, techniques);
        let (snap, events) = round_trip(&plan, BUDGET);
        let r = replay::replay(&dump(&snap), 0, 5);
        assert!(!r.truncated(), "an export starts from an empty allocator");
        let maps = snap.device_traces[0].iter().filter(|e| e.action == "segment_map").count();
        assert_eq!(maps > 0, techniques.allocator.expandable_segments, "{techniques:?}: {maps} segment_map entries");
        let ours = own_timeline(&events, &plan);
        let theirs: Vec<(i64, i64)> = snap.device_traces[0]
            .iter()
            .zip(&r.timeline)
            .filter(|(e, _)| e.action != "free_requested")
            .map(|(_, p)| (p.allocated, p.reserved))
            .collect();
        assert_eq!(theirs, ours, "batch {batch}, {techniques:?}: the timeline at every event");
        // The allocator's own final state.
        let mut sa = StepAllocator::new(&plan, BUDGET, true);
        sa.setup(&plan).expect("setup");
        for i in 0..plan.ops.len() {
            sa.before_op(&plan, i).expect("fits");
            sa.after_op(i);
        }
        let segments: Vec<_> = sa.allocator.segments().collect();
        assert_eq!(snap.segments.len(), segments.len());
        let mut previous = 0;
        for (s, g) in snap.segments.iter().zip(segments) {
            assert!(s.address > previous, "segments in address order");
            previous = s.address;
            assert_eq!(s.total_size as u64, g.size);
            assert_eq!(s.is_expandable, g.expandable);
            let blocks: Vec<(u64, u64, bool)> =
                g.blocks.values().map(|b| (b.offset, b.size, b.tag.is_some())).collect();
            let exported: Vec<(u64, u64, bool)> =
                s.blocks.iter().map(|b| ((b.address - s.address) as u64, b.size as u64, b.is_allocated())).collect();
            assert_eq!(exported, blocks, "segment {:#x}: the allocator's blocks", s.address);
            for (b, ours) in s.blocks.iter().zip(g.blocks.values()) {
                if let Some(tag) = &ours.tag {
                    assert!(b.frames[0].name.starts_with(&plan.tensor(tag.tensor).name), "{:?}", b.frames);
                    assert_eq!(b.frames[0].filename, format!("oomlab/{}", plan.tensor(tag.tensor).category.name()));
                }
            }
        }
        assert_eq!(r.final_state.reserved as u64, sa.allocator.stats().reserved_bytes);
        assert_eq!(r.largest_free_block as u64, sa.allocator.largest_free_block());
        replay::check_consistency(&dump(&snap)).expect("the viewer's rules hold");
    }
}

/// A step executed by the CPU backend logs exactly what the export's driver logs: the snapshot
/// of an executed step is that step's.
#[test]
fn an_executed_step_is_what_the_export_records() {
    let plan = toy_plan(16, Techniques::default());
    let ds = Dataset::builtin();
    let mut cpu = CpuExecutor::<f32>::with_budget(plan.clone(), 0, BUDGET).expect("cpu");
    cpu.train_step(&ds.batch(plan.shape, 0, 0).expect("batch")).expect("step");
    let mut executed = export::setup_events(&plan, BUDGET).expect("setup");
    executed.extend(cpu.memory().expect("a step ran").events.iter().cloned());
    let (recorded, oom) = export::record_step(&plan, BUDGET);
    assert!(oom.is_none());
    assert_eq!(executed, recorded);
}

/// Out of memory: the trace ends with the `oom` event (the request, what the device had free);
/// the final segments are the state at that moment, and the rules still hold.
#[test]
fn an_oom_ends_the_trace() {
    let plan = toy_plan(16, Techniques::default());
    let (snap, _) = round_trip(&plan, 8 << 20);
    let last = snap.device_traces[0].last().expect("events");
    assert_eq!(last.action, "oom");
    assert_eq!(last.addr, None);
    assert!(last.size > 0 && last.device_free.is_some());
    replay::check_consistency(&dump(&snap)).expect("consistent up to the OOM");
    let r = replay::replay(&dump(&snap), 0, 3);
    assert_eq!(r.ooms.len(), 1);
    assert!(r.ooms[0].frame.contains("oomlab/"), "the OOM names the tensor: {}", r.ooms[0].frame);
}

/// The checker itself: a free_requested without its free_completed, blocks that do not tile
/// their segment, and an alloc missing from the trace are each caught.
#[test]
fn the_consistency_check_catches_broken_snapshots() {
    let plan = toy_plan(4, Techniques::default());
    let (snap, _) = round_trip(&plan, BUDGET);
    let mut a = snap.clone();
    let i = a.device_traces[0].iter().position(|e| e.action == "free_completed").expect("a free");
    a.device_traces[0].remove(i);
    let broken = replay::check_consistency(&dump(&a));
    assert!(matches!(broken, Err(replay::Inconsistency::UnfinishedFree { device: 0, .. })), "{broken:?}");
    let mut b = snap.clone();
    b.segments[0].blocks[0].size += 512;
    let broken = replay::check_consistency(&dump(&b));
    assert!(matches!(broken, Err(replay::Inconsistency::BlockSum { .. })), "{broken:?}");
    let mut c = snap.clone();
    let i = c.device_traces[0].iter().position(|e| e.action == "alloc").expect("an alloc");
    c.device_traces[0].remove(i);
    let broken = replay::check_consistency(&dump(&c));
    assert!(matches!(broken, Err(replay::Inconsistency::BlockBeforeSegment { device: 0, .. })), "{broken:?}");
}

/// Python's `_format_size`, as PyTorch's CLI prints sizes.
fn py_size(mut num: f64) -> String {
    for unit in ["", "Ki", "Mi", "Gi", "Ti"] {
        if num.abs() < 1024.0 {
            return format!("{num:.1}{unit}B");
        }
        num /= 1024.0;
    }
    format!("{num:.1}PiB")
}

/// PyTorch's own reader on our export (`tests/fixtures/snapshot/pytorch_*.txt`, made with
/// torch 2.15 in a throwaway venv; see the README): it reads the file without error and reports
/// our totals — segments, reserved, allocated, free (and its internal share), every trace entry
/// by kind, the OOM with its request and the device's free bytes. The committed pickle is
/// today's export of the same setup, byte for byte.
#[test]
fn pytorchs_reader_reports_the_same_totals() {
    for (name, budget, stats, trace) in [
        ("toy_default.pickle", BUDGET, "pytorch_stats.txt", "pytorch_trace.txt"),
        ("toy_oom.pickle", 8 << 20, "pytorch_stats_oom.txt", "pytorch_trace_oom.txt"),
    ] {
        let plan = toy_plan(16, Techniques::default());
        // What the CLI writes: setup + the executed step's log, or up to the OOM (equal to the
        // driver's log: an_executed_step_is_what_the_export_records).
        let (events, _) = export::record_step(&plan, budget);
        let snap = export::snapshot(&plan, &events, budget);
        let bytes = export::to_pickle(&snap).expect("pickle");
        assert!(bytes == fixture(name), "{name} is today's export (rerun the README's commands if the plan changed)");

        let stats = String::from_utf8(fixture(stats)).expect("text");
        let reserved: i64 = snap.segments.iter().map(|s| s.total_size).sum();
        let allocated: i64 =
            snap.segments.iter().flat_map(|s| &s.blocks).filter(|b| b.is_allocated()).map(|b| b.requested()).sum();
        let internal: i64 = snap
            .segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.is_allocated())
            .map(|b| b.size - b.requested())
            .sum();
        let free = reserved - allocated;
        for line in [
            format!("segments: {}", snap.segments.len()),
            format!("total_reserved: {}", py_size(reserved as f64)),
            format!("total_allocated: {}", py_size(allocated as f64)),
            format!("total_free: {} ({:.1}% internal)", py_size(free as f64), 100.0 * internal as f64 / free as f64),
        ] {
            assert!(stats.lines().any(|l| l == line), "{name}: PyTorch's stats say {line:?}:\n{stats}");
        }

        let trace = String::from_utf8(fixture(trace)).expect("text");
        let entries = &snap.device_traces[0];
        let count = |action: &str| entries.iter().filter(|e| e.action == action).count();
        assert!(trace.contains(&format!("{} entries", entries.len())));
        assert_eq!(trace.matches("cudaMalloc(").count(), count("segment_alloc"));
        assert_eq!(trace.lines().filter(|l| l.starts_with("del ")).count(), count("free_requested"));
        assert_eq!(trace.matches("# free completed for").count(), count("free_completed"));
        assert_eq!(trace.lines().filter(|l| l.contains(" = ") && l.contains('[')).count(), count("alloc"));
        for e in entries.iter().filter(|e| e.action == "oom") {
            let line = format!(
                "raise OutOfMemoryError # {} requested, {} free in CUDA",
                py_size(e.size as f64),
                py_size(e.device_free.unwrap_or(0) as f64)
            );
            assert!(trace.contains(&line), "{name}: {line}");
        }
    }
}

/// Other producers' snapshots: protocol 5 with shared frames, unknown keys, an OOM and dict
/// metadata (Python 3.14's default); a legacy top-level list of segments whose blocks have
/// `history` instead of frames and no requested size.
#[test]
fn foreign_shapes_are_read() {
    let s = read::from_bytes(&fixture("minimal_p5.pickle")).expect("protocol 5");
    assert!(!s.from_oomlab(), "a foreign snapshot is PyTorch's");
    assert!(read::from_bytes(&fixture("toy_default.pickle")).expect("ours").from_oomlab());
    replay::check_consistency(&s).expect("consistent");
    let r = replay::replay(&s, 0, 5);
    assert_eq!(r.final_state, replay::Point { allocated: 524288, reserved: 2097152 });
    assert_eq!(r.peak_allocated, 1_524_288);
    assert_eq!(r.ooms.len(), 1);
    assert_eq!((r.ooms[0].size, r.ooms[0].device_free), (4194304, 1048576));
    assert_eq!(r.ooms[0].frame, "train.py:42 forward");
    assert_eq!(r.live_at_peak.len(), 2);
    assert!(!r.truncated());

    let legacy = read::from_bytes(&fixture("legacy_segments.pickle")).expect("legacy list");
    assert!(legacy.traces.is_empty());
    let r = replay::replay(&legacy, 0, 5);
    assert_eq!(r.final_state.allocated, 1_000_000, "history's real_size is the request");
    assert_eq!(r.live_at_peak[0].frame, "train.py:42 forward");
    assert_eq!(r.largest_free_block, 1048576);

    // The same snapshot as JSON (the newest viewer's other input).
    let json = serde_json::to_vec(&s.to_wire()).expect("json");
    assert_eq!(read::from_bytes(&json).expect("JSON").to_wire(), s.to_wire());
}

/// A ring buffer that dropped the oldest events: the trace is replayed from the state it implies,
/// which is said to be truncated.
#[test]
fn a_truncated_trace_is_read_and_said_so() {
    let plan = toy_plan(16, Techniques::default());
    let (mut snap, _) = round_trip(&plan, BUDGET);
    let full = replay::replay(&dump(&snap), 0, 0);
    snap.device_traces[0].drain(..40);
    let r = replay::replay(&dump(&snap), 0, 0);
    assert!(r.truncated());
    assert!(r.initial.allocated > 0 && r.initial.reserved > 0);
    assert_eq!(r.final_state, full.final_state);
    assert_eq!(r.peak_allocated, full.peak_allocated, "the peak comes after the dropped events");
}

/// Damaged, empty, foreign or hostile files are errors with a message, never a panic.
#[test]
fn bad_files_are_clear_errors() {
    let good = fixture("toy_default.pickle");
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("text".into(), b"hello, world".to_vec()),
        ("a PNG".into(), b"\x89PNG\r\n\x1a\n....".to_vec()),
        ("protocol 9".into(), vec![0x80, 9, b'K', 1, b'.']),
        ("a pickled int".into(), vec![0x80, 2, b'K', 7, b'.']),
        ("an empty dict".into(), vec![0x80, 2, b'}', b'.']),
        ("bad JSON".into(), b"{\"segments\": [".to_vec()),
        ("JSON of something else".into(), b"{\"hello\": 1}".to_vec()),
    ];
    for cut in [1, 2, 10, good.len() / 2, good.len() - 1] {
        cases.push((format!("cut at {cut}"), good[..cut].to_vec()));
    }
    for flip in [3, 100, good.len() / 3] {
        let mut b = good.clone();
        b[flip] ^= 0xff;
        cases.push((format!("byte {flip} flipped"), b));
    }
    for (what, bytes) in cases {
        match read::from_bytes(&bytes) {
            Err(e @ (SnapshotError::Foreign(_) | SnapshotError::Corrupt(_))) => {
                assert!(!e.to_string().is_empty(), "{what}");
            }
            Err(e) => panic!("{what}: unexpected {e}"),
            // A flipped byte inside a string or number can still be a valid snapshot.
            Ok(s) => assert!(what.contains("flipped"), "{what} read as a snapshot: {} segments", s.segments.len()),
        }
    }
}

/// The Snapshot tab: a foreign snapshot (protocol 5, with an OOM) is shown as measured by
/// PyTorch, with its peak beside the toy's step, the OOM in plain words and what was alive at the
/// peak — in English and in Chinese; a file read from a path arrives from its thread; a bad file
/// is a message.
#[test]
fn the_app_shows_a_snapshot() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::settings::Settings;
    use oomlab::app::{OomlabApp, Tab};
    use oomlab::i18n::Lang;
    let mut harness = Harness::builder()
        .with_size([1280.0, 1400.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    harness.state_mut().open_snapshot_bytes("minimal_p5.pickle", &fixture("minimal_p5.pickle"));
    harness.state_mut().shown.tab = Tab::Snapshot;
    harness.run();
    harness.get_by_label("minimal_p5.pickle, device 0: measured by PyTorch");
    harness.get_by_label("Out of memory");
    harness.get_by_label_contains(
        "At event 5 PyTorch asked for 4.00 MiB with 1.00 MiB free on the device (train.py:42 forward).",
    );
    assert!(harness.query_all_by_label("1.45 MiB").count() >= 1, "the peak allocated");
    harness.get_by_label_contains("the toy's step");
    harness.get_by_label("The 2 largest allocations alive at the peak");
    assert_eq!(harness.query_all_by_label("train.py:42 forward").count(), 2, "both allocations alive at the peak");
    // Scrubbed: the chart's description says where the marked line is, as the panel does.
    let allocated = harness.state().snapshot.loaded.as_ref().expect("loaded").replays[0].timeline[2].allocated;
    harness.state_mut().snapshot.loaded.as_mut().expect("loaded").selected = Some(2);
    harness.run();
    let said = format!("Marked: after event 2, {} allocated.", oomlab::units::format_bytes(allocated as u64));
    harness.get_by_label_contains(&said);
    harness.get_by_label_contains("What is alive after event 2");
    harness.state_mut().snapshot.loaded.as_mut().expect("loaded").selected = None;

    harness.state_mut().set_lang(Lang::Zh);
    harness.run();
    harness.run();
    harness.get_by_label("minimal_p5.pickle，设备 0：由 PyTorch 测得");
    assert!(harness.query_all_by_label("显存溢出").count() >= 1, "the OOM heading in Chinese");
    harness.state_mut().set_lang(Lang::En);
    harness.run();

    // The Export row's button writes the toy's step; the tab reads it back.
    let dir = tempfile::tempdir().expect("tempdir");
    harness.state_mut().chrome.export_dir = Some(dir.path().to_path_buf());
    harness.get_by_label("PyTorch snapshot").click();
    harness.run();
    let written = std::fs::read(dir.path().join("oomlab-step.pickle")).expect("exported");
    let s = read::from_bytes(&written).expect("a snapshot");
    replay::check_consistency(&s).expect("consistent");
    let predicted = harness.state().shown.derived.predicted.clone().expect("a prediction").expect("fits");
    assert_eq!(replay::replay(&s, 0, 0).peak_reserved as u64, predicted.peak_reserved_bytes());

    // From a path, on its thread.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot/toy_oom.pickle");
    let ctx = harness.ctx.clone();
    harness.state_mut().open_snapshot_path(path, &ctx);
    for _ in 0..200 {
        // A spinner repaints while the thread reads: step frames rather than settle.
        harness.step();
        if harness.state().snapshot.loading.is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    harness.run();
    // oomlab's own export says so: its allocator's account, not a PyTorch measurement.
    harness
        .get_by_label("toy_oom.pickle, device 0: written by oomlab's allocator (an export, not a PyTorch measurement)");
    harness.get_by_label_contains("oomlab/activations:14:h.1.attn.out");
    harness
        .snapshot_options("snapshot_tab", &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000));

    // A file too large for the browser: its size and the limit, in words.
    harness.state_mut().snapshot.too_large = Some(("big.pickle".into(), 3 << 30));
    harness.run();
    harness.get_by_label_contains("big.pickle is 3.00 GiB: more than the 2.00 GiB a browser tab can read.");
    harness.state_mut().snapshot.too_large = None;

    harness.state_mut().open_snapshot_bytes("notes.txt", b"not a snapshot");
    harness.run();
    harness.get_by_label_contains("Could not open notes.txt: it is not a PyTorch memory snapshot (");
}

/// A long trace is drawn per pixel column (its smallest and largest value), whatever the zoom:
/// a 1,000-column chart of 90,000 events has at most 2,000 points a line, no spike is lost, and
/// zoomed in to a few events it shows each one.
#[test]
fn long_traces_are_decimated_without_losing_the_peak() {
    use oomlab::memory::snapshot::TraceEntry;
    let mut trace = Vec::new();
    for i in 0..30_000i64 {
        // Up and down, with one spike in the middle.
        let size = if i == 17_321 { 64 << 20 } else { 4096 };
        trace.push(TraceEntry { action: "alloc".into(), addr: Some(i * 8192), size, ..TraceEntry::default() });
        trace.push(TraceEntry { action: "free_requested".into(), addr: Some(i * 8192), size, ..TraceEntry::default() });
        trace.push(TraceEntry { action: "free_completed".into(), addr: Some(i * 8192), size, ..TraceEntry::default() });
    }
    let snap = Snapshot { device_traces: vec![trace], ..Snapshot::default() };
    let bytes = export::to_pickle(&snap).expect("pickle");
    let l = oomlab::app::snapshot_view::load("long.pickle", &bytes).expect("load");
    let (allocated, _) = &l.lines[0];
    assert_eq!(allocated.len(), 90_000);
    let points = allocated.columns(0.0, 90_000.0, 1000);
    assert!(points.len() <= 2002, "{} points", points.len());
    let top = points.iter().map(|p| p[1]).fold(0.0, f64::max);
    assert_eq!(top, 64.0, "the spike (64 MiB) survives");
    // Every column's band holds exactly its events' extremes, at several widths.
    let values: Vec<f64> = l.replays[0].timeline.iter().map(|p| p.allocated as f64 / (1u64 << 20) as f64).collect();
    for (x0, x1, cols) in [(0.0, 90_000.0, 7), (51_900.0, 52_000.0, 40), (51_960.0, 51_970.0, 300)] {
        let points = allocated.columns(x0, x1, cols);
        let hi = points.iter().map(|p| p[1]).fold(f64::MIN, f64::max);
        let want = values[x0 as usize..=(x1 as usize).min(89_999)].iter().copied().fold(f64::MIN, f64::max);
        assert!(hi >= want, "{x0}..{x1} in {cols}: {hi} < {want}");
    }
    // Zoomed in to ten events: every event is its own column.
    assert!(allocated.columns(100.0, 110.0, 300).len() >= 10);
    assert_eq!(l.replays[0].peak_allocated, 64 << 20);
}

/// Hostile pickles: 200,000 nested lists (about 400 KB, which used to overflow the stack when
/// the value was dropped), built both ways a pickle nests (APPEND into a list, and MARK … LIST),
/// are refused for their depth; a pickle that calls `os.system` is refused as Python objects,
/// never run; nesting a real snapshot's depth still reads.
#[test]
fn hostile_pickles_are_refused_without_a_crash() {
    let n = 200_000;
    let mut appended = vec![0x80, 2];
    appended.extend(std::iter::repeat_n(b']', n));
    appended.extend(std::iter::repeat_n(b'a', n - 1));
    appended.push(b'.');
    let mut marked = vec![0x80, 2];
    marked.extend(std::iter::repeat_n(b'(', n));
    marked.extend(std::iter::repeat_n(b'l', n));
    marked.push(b'.');
    for (what, bytes) in [("appended", appended), ("marked", marked)] {
        assert!(bytes.len() >= 400_000);
        let e = read::from_bytes(&bytes).expect_err(what);
        assert!(e.to_string().contains("nested more than"), "{what}: {e}");
    }
    // pickle.dumps of an object whose __reduce__ is (os.system, ("echo hacked",)).
    let mut system = vec![0x80, 2, b'c'];
    system.extend_from_slice(b"posix\nsystem\n");
    system.extend_from_slice(&[b'q', 0, 0x8c, 11]);
    system.extend_from_slice(b"echo hacked");
    system.extend_from_slice(&[0x85, b'R', b'.']);
    let e = read::from_bytes(&system).expect_err("os.system");
    assert!(matches!(e, SnapshotError::Foreign(_)) && e.to_string().contains("Python objects"), "{e}");
    // A memo id of 4 billion (LONG_BINPUT) is no pickler's: refused, never allocated.
    let e = read::from_bytes(&[0x80, 2, b']', b'r', 0xff, 0xff, 0xff, 0xff, b'.']).expect_err("memo id");
    assert!(e.to_string().contains("memo id"), "{e}");
    // 100 levels (a snapshot nests about 6) read as values; the file is then simply not a
    // snapshot.
    let mut deep = vec![0x80, 2];
    deep.extend(std::iter::repeat_n(b']', 100));
    deep.extend(std::iter::repeat_n(b'a', 99));
    deep.push(b'.');
    let e = read::from_bytes(&deep).expect_err("a list is not a snapshot");
    assert!(!e.to_string().contains("nested"), "{e}");
}

/// The export writes the step's own allocator settings as PyTorch writes them for that
/// PYTORCH_CUDA_ALLOC_CONF (the keys, their order and values of a real H100 run's snapshot), and
/// the step that ran with expandable segments reads back as one, through oomlab's own replay
/// too.
#[test]
fn the_export_writes_the_steps_allocator_settings() {
    let config = oomlab::plan::AllocatorConfig::parse("expandable_segments:True,max_split_size_mb:128").expect("valid");
    let plan = toy_plan(16, Techniques { allocator: config, ..Techniques::default() });
    let (events, _) = export::record_step(&plan, BUDGET);
    let snap = export::snapshot(&plan, &events, BUDGET);
    let a = snap.allocator_settings.clone().expect("settings");
    assert_eq!(a.alloc_conf, "expandable_segments:True,max_split_size_mb:128");
    assert!(a.expandable_segments);
    assert_eq!(a.max_split_size, Some(128 << 20));
    assert_eq!(a.garbage_collection_threshold, Some(0.0));
    assert_eq!(a.config(), config, "the settings say what the step ran with");
    assert!(snap.segments.iter().all(|g| g.is_expandable), "the step's segments are expandable");
    // As PyTorch writes it: its keys in its order (a real torch 2.7 snapshot's), every division 0.
    let bytes = export::to_pickle(&snap).expect("pickle");
    let wire: serde_json::Value = serde_json::to_value(&a).expect("json");
    let keys: Vec<&str> = wire.as_object().expect("object").keys().map(String::as_str).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let mut pytorch = vec![
        "PYTORCH_CUDA_ALLOC_CONF",
        "max_split_size",
        "garbage_collection_threshold",
        "expandable_segments",
        "pinned_num_register_threads",
        "release_lock_on_cudamalloc",
        "pinned_use_cuda_host_register",
        "graph_capture_record_stream_reuse",
        "roundup_power2_divisions",
    ];
    pytorch.sort_unstable();
    assert_eq!(sorted, pytorch);
    let back = read::from_bytes(&bytes).expect("reads");
    assert_eq!(back.allocator_settings.as_ref(), Some(&a));
    let order: Vec<String> =
        a.roundup_power2_divisions.as_ref().expect("divisions").0.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(order, (0..16).map(|k| (1u64 << k).to_string()).collect::<Vec<_>>());
    // The default step writes PyTorch's defaults (max_split_size -1, no option set).
    let plain = export::snapshot(&toy_plan(16, Techniques::default()), &[], BUDGET);
    let p = plain.allocator_settings.expect("settings");
    assert_eq!((p.alloc_conf.as_str(), p.expandable_segments, p.max_split_size), ("", false, Some(-1)));
}

/// oomlab's own exports, replayed through its allocator with the settings they say, give their
/// segments back — with expandable segments too (mapped and unmapped pages), where the replay
/// starts from a state the trace must be undone to reach.
#[test]
fn oomlabs_own_exports_replay_into_the_same_segments() {
    use oomlab::memory::snapshot::simulate;
    for conf in ["", "expandable_segments:True", "max_split_size_mb:21", "garbage_collection_threshold:0.5"] {
        let config = oomlab::plan::AllocatorConfig::parse(conf).expect("valid");
        let plan = toy_plan(16, Techniques { allocator: config, ..Techniques::default() });
        let budget = 64 << 20;
        let (events, _) = export::record_step(&plan, budget);
        let snap = export::snapshot(&plan, &events, budget);
        let d = dump(&snap);
        let r = replay::replay(&d, 0, 0);
        let s = simulate::simulate(&d, &r, None, Some(budget)).expect("replays");
        assert_eq!(s.alloc_conf, config.to_conf_string(), "{conf}: the run's own settings");
        assert_eq!(s.real.peak_reserved_bytes, s.replayed.peak_reserved_bytes, "{conf}: {s:?}");
        assert_eq!(s.real.segment_allocs, s.replayed.segment_allocs, "{conf}: {s:?}");
        assert_eq!(s.unmatched_frees, 0, "{conf}");
        if config.expandable_segments {
            let maps = replay::trace(&d, 0)
                .iter()
                .filter(|e| e.action() == oomlab::memory::snapshot::dump::Action::SegmentMap)
                .count();
            assert!(maps > 0, "the expandable segment grew by mapping pages");
            assert!(d.segments.iter().any(|g| g.expandable));
        }
    }
}
