//! Real runs, read right: snapshots PyTorch wrote on real GPUs in other people's runs (a course's
//! H100 runs of a 3.4-billion-parameter transformer at three context lengths, fp32, autocast and
//! compiled, forward and full steps; another student's runs of a 423-million one, recorded
//! mid-run; a fine-tuning notebook's 8-bit TinyLlama with LoRA), listed with their sources in
//! tests/fixtures/real_snapshots.json.
//!
//! The files are those repositories' data, not this one's: they are read from
//! `$OOMLAB_REAL_SNAPSHOTS`, else `../shared/snapshots`, and each is checked by its SHA-256
//! first. A file not at hand is skipped, and the test says which (CI has them where the shared
//! folder holds them). For each file at hand:
//! - the peaks and the peak's event equal an independent walk of the trace
//!   (scripts/real_snapshots.py: Python's pickle and a plain loop, not oomlab);
//! - places name Python lines (the user's own, or a package's called from the user's), or say
//!   there is no Python frame and name the operator; never a frame PyTorch's memory_viz hides;
//! - the kinds hold what the run's model holds: gradients and AdamW's state equal 4 and 8 bytes
//!   per parameter of the model's own configuration, the parameters alive before the recording;
//! - the phases: a full step's forward and backward found from the stacks, its optimizer step
//!   from PyTorch's own annotation;
//! - replayed through oomlab's allocator with the run's own settings, the peak reserved is
//!   within 1 % of the run's and the count of segments reserved during the trace within 2 %.

use std::path::PathBuf;

use oomlab::memory::snapshot::explain::Guess;
use oomlab::memory::snapshot::phase::{PhaseKind, PhaseSource};
use oomlab::memory::snapshot::place::{Whose, is_python, viz_keeps};
use oomlab::memory::snapshot::{read, replay, simulate};
use serde_json::Value;
use sha2::Digest;

fn manifest() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_snapshots.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the manifest")).expect("JSON")
}

/// Where the real files are, if anywhere.
fn folder() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("OOMLAB_REAL_SNAPSHOTS") {
        return Some(PathBuf::from(d));
    }
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/snapshots");
    shared.is_dir().then_some(shared)
}

/// A kind by its JSON name (`optimizer_state`).
fn kind_of(name: &str) -> Guess {
    Guess::ALL
        .into_iter()
        .find(|g| serde_json::to_value(g).ok().and_then(|v| v.as_str().map(str::to_owned)).as_deref() == Some(name))
        .expect(name)
}

#[test]
fn real_snapshots_read_right() {
    let m = manifest();
    let files = m["files"].as_array().expect("files");
    let Some(dir) = folder() else {
        eprintln!(
            "skipped: no folder of real snapshots (set OOMLAB_REAL_SNAPSHOTS, or put them in ../shared/snapshots)"
        );
        return;
    };
    let mut checked = Vec::new();
    for f in files {
        let name = f["name"].as_str().expect("name");
        let path = dir.join(name);
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipped: {name} is not in {}", dir.display());
            continue;
        };
        let sha: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(sha, f["sha256"].as_str().expect("sha256"), "{name}: not the file the manifest names");
        let d = read::from_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = replay::replay_all(&d, 10).into_iter().find(|r| r.device == 0).expect("device 0");
        let expect = &f["expect"];

        // Peaks: an independent walk of the trace.
        assert_eq!(r.events as u64, expect["events"].as_u64().expect("events"), "{name}");
        assert_eq!(r.peak_allocated, expect["peak_allocated_bytes"].as_i64().expect("peak"), "{name}");
        assert_eq!(r.peak_reserved, expect["peak_reserved_bytes"].as_i64().expect("reserved"), "{name}");
        assert_eq!(r.peak_index.map(|i| i as u64), expect["peak_event"].as_u64(), "{name}");

        // Places: Python lines, or no Python frame with the operator; never a hidden frame.
        let at_peak = oomlab::memory::snapshot::explain::holding(&r, r.peak_index, usize::MAX);
        let (mut python, mut traced) = (0i64, 0i64);
        for g in &at_peak.groups {
            let p = &g.place;
            assert!(viz_keeps(&p.function, &p.file), "{name}: {} is a frame memory_viz hides", g.site);
            for hidden in ["gather_with_cpp", "unwind::unwind", "CapturedTraceback", "CUDACachingAllocator"] {
                assert!(!g.site.contains(hidden), "{name}: {}", g.site);
            }
            match p.whose {
                Whose::User | Whose::Package | Whose::Torch => {
                    assert!(is_python(&p.file) && p.line > 0, "{name}: {} is not a Python line", g.site);
                    python += g.bytes;
                }
                Whose::NoPython => assert!(p.op.is_some() || p.node.is_some(), "{name}: {}", g.site),
                Whose::None | Whose::Frame => {}
            }
            if p.whose != Whose::None {
                traced += g.bytes;
            }
        }
        // In a model's run, what the trace made (not what was there before it) is mostly placed
        // at a Python line (a recording of a backward alone has none).
        if f["model"].is_object() {
            assert!(python * 2 >= traced, "{name}: {python} of {traced} bytes at Python lines");
        }
        for l in &r.live_at_peak {
            assert!(!l.frame.contains("gather_with_cpp"), "{name}: {}", l.frame);
        }

        // Kinds: what the run's model holds.
        if let Some(model) = f["model"].as_object() {
            let p = model["parameters"].as_i64().expect("parameters") as f64;
            for k in f["kinds"].as_array().expect("kinds") {
                let kind = kind_of(k["kind"].as_str().expect("kind"));
                let want = p * k["times_parameters"].as_f64().expect("times");
                let tolerance = k["tolerance"].as_f64().expect("tolerance");
                let got = at_peak.by_guess.iter().find(|(g, _)| *g == kind).map_or(0, |x| x.1) as f64;
                assert!(
                    (got - want).abs() <= tolerance * want,
                    "{name}: {kind:?} at the peak {got} bytes, the model's {want} (±{:.1} %)",
                    100.0 * tolerance
                );
            }
        } else {
            assert!(f["no_kind_check"].as_str().is_some_and(|w| !w.is_empty()), "{name}: say why no kind is checked");
        }

        // Phases: a full step's optimizer step from PyTorch's annotation, forward and backward
        // from the stacks.
        if name.contains("fullstep") || name.contains("train") {
            let has = |k: PhaseKind, s: PhaseSource| r.phases.iter().any(|p| p.kind == k && p.source == s);
            assert!(has(PhaseKind::Forward, PhaseSource::Stacks), "{name}: {:?}", r.phases);
            assert!(has(PhaseKind::Backward, PhaseSource::Stacks), "{name}");
            assert!(
                r.phases.iter().any(|p| p.kind == PhaseKind::Optimizer
                    && p.source == PhaseSource::Annotation
                    && p.name.starts_with("Optimizer.step#")),
                "{name}"
            );
            let forward = r.phases.iter().position(|p| p.kind == PhaseKind::Forward);
            let step = r.phases.iter().position(|p| p.kind == PhaseKind::Optimizer);
            assert!(forward < step, "{name}: the forward comes before the step");
        }

        // The replay through oomlab's allocator, with the run's own settings.
        let s = simulate::simulate(&d, &r, None, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(s.run_settings);
        assert_eq!(s.real.segment_allocs, expect["segment_allocs"].as_u64().expect("segment_allocs"), "{name}");
        let off = (s.replayed.peak_reserved_bytes - s.real.peak_reserved_bytes).abs() as f64;
        assert!(off <= 0.01 * s.real.peak_reserved_bytes as f64, "{name}: peak reserved {s:?}");
        let segs = s.replayed.segment_allocs.abs_diff(s.real.segment_allocs) as f64;
        assert!(segs <= (0.02 * s.real.segment_allocs as f64).max(1.0), "{name}: segments {s:?}");
        checked.push(name);
    }
    eprintln!("checked {} real snapshots: {checked:?}", checked.len());
}
