//! Every export of the app's Export row, clicked as a user clicks it, read back from the file it
//! wrote and checked against the record it came from: the sweep's CSV against the app's sweep,
//! the step's JSON against the allocator's account of the real step that ran, the PyTorch
//! snapshot against the step's allocator settings and its prediction. (The estimate's JSON:
//! tests/views.rs; the PNG's encoding: tests/views.rs; the CLI's JSON: tests/cli.rs.)

#[path = "support/xdg.rs"]
mod support_xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::{OomlabApp, Settings};
use oomlab::memory::snapshot::{read, replay};
use oomlab::plan::AllocatorConfig;

fn app() -> (Harness<'static, OomlabApp>, tempfile::TempDir) {
    support_xdg::xdg();
    let mut settings = Settings::default();
    settings.device.allocator = AllocatorConfig::parse("expandable_segments:True").expect("valid");
    let mut harness = Harness::builder()
        .with_size([1280.0, 800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    let dir = tempfile::tempdir().expect("tempdir");
    harness.state_mut().chrome.export_dir = Some(dir.path().to_path_buf());
    (harness, dir)
}

#[test]
fn the_sweeps_csv_is_the_apps_sweep() {
    let (mut harness, dir) = app();
    harness.get_by_label("sweep CSV").click();
    harness.run();
    let text = std::fs::read_to_string(dir.path().join("oomlab-sweep.csv")).expect("exported");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"));
    let (batch, fits, peak) = (col("batch"), col("fits"), col("peak_allocated_bytes"));
    let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_string).collect()).collect();
    let sweep = &harness.state().shown.derived.sweep;
    let points: Vec<_> = sweep.iter().flat_map(|s| s.points.iter()).collect();
    assert_eq!(rows.len(), points.len(), "a row per point of the app's sweep");
    assert!(points.len() > 100, "every batch the slider allows: {}", points.len());
    for (row, (b, m)) in rows.iter().zip(&points) {
        assert_eq!(row[batch], b.to_string());
        assert_eq!(row[fits], m.is_ok().to_string(), "batch {b}");
        let want = m.as_ref().map(|m| m.peak_allocated_bytes().to_string()).unwrap_or_default();
        assert_eq!(row[peak], want, "batch {b}");
    }
    assert!(points.iter().any(|(_, m)| m.is_err()), "the sweep reaches an out-of-memory at 64 MiB");
}

#[test]
fn the_steps_json_is_the_allocators_account_of_the_step_that_ran() {
    let (mut harness, dir) = app();
    harness.state_mut().start_training();
    for _ in 0..400 {
        harness.step();
        if harness.state().steps_done() >= 1 {
            break;
        }
    }
    harness.state_mut().run.training = false;
    harness.run_steps(10);
    let measured = harness.state().run.measured.clone().expect("a real step's account");
    harness.get_by_label("timeline + allocator JSON").click();
    harness.run_steps(4);
    let text = std::fs::read_to_string(dir.path().join("oomlab-step.json")).expect("exported");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["source"], "allocator (live)");
    assert_eq!(doc["peak_allocated_bytes"], measured.peak_allocated_bytes());
    assert_eq!(doc["peak_reserved_bytes"], measured.peak_reserved_bytes());
    let timeline = doc["timeline"].as_array().expect("a timeline");
    assert_eq!(timeline.len(), measured.timeline.len());
    for (p, m) in timeline.iter().zip(&measured.timeline) {
        assert_eq!(p["allocated_bytes"], m.allocated_bytes);
        assert_eq!(p["reserved_bytes"], m.reserved_bytes);
    }
    // The allocator's segments at the scrubber's op (the peak) hold what the timeline says.
    let at = &measured.timeline[measured.peak_index];
    let segments = doc["allocator"]["segments"].as_array().expect("segments");
    let reserved: u64 = segments.iter().map(|s| s["size"].as_u64().unwrap_or(0)).sum();
    assert_eq!(reserved, at.reserved_bytes);
}

#[test]
fn the_pytorch_snapshot_says_the_steps_allocator_settings() {
    let (mut harness, dir) = app();
    harness.get_by_label("PyTorch snapshot").click();
    harness.run();
    let bytes = std::fs::read(dir.path().join("oomlab-step.pickle")).expect("exported");
    let s = read::from_bytes(&bytes).expect("a snapshot");
    let a = s.allocator_settings.as_ref().expect("allocator settings");
    assert_eq!(a.alloc_conf, "expandable_segments:True");
    assert!(a.expandable_segments);
    assert_eq!(a.config(), harness.state().settings().device.allocator);
    replay::check_consistency(&s).expect("consistent");
    let predicted = harness.state().shown.derived.predicted.clone().expect("a prediction").expect("fits");
    assert_eq!(replay::replay(&s, 0, 0).peak_reserved as u64, predicted.peak_reserved_bytes());
}
