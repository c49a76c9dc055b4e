//! The Snapshot tab on a run's snapshot as PyTorch writes it on a GPU (tests/snapshot_runs.rs
//! reads the same fixtures): places, phases and kinds in both languages, by label (what a screen
//! reader reads), before and after a second file is opened; the replay through oomlab's
//! allocator from the tab, by keyboard; the files side by side.

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::settings::Settings;
use oomlab::app::views::{Drawn, drawn};
use oomlab::app::{OomlabApp, Tab};
use oomlab::i18n::Lang;
use oomlab::memory::snapshot::explain::Guess;
use oomlab::memory::snapshot::phase::PhaseKind;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot").join(name))
        .expect("fixture")
}

fn xdg() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join(format!("oomlab-xdg-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        // SAFETY: set once, before any thread of the test reads the environment.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", dir) };
    }
}

fn harness() -> Harness<'static, OomlabApp> {
    xdg();
    let mut h = Harness::builder()
        .with_size([1280.0, 1800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    h.run();
    h
}

/// At least one node's label contains `text`.
fn has(h: &Harness<'_, OomlabApp>, text: &str) {
    assert!(h.query_all_by_label_contains(text).next().is_some(), "no node says {text:?}");
}

fn snapshot_drawn(h: &Harness<'_, OomlabApp>) -> oomlab::app::views::drawn::SnapshotDrawn {
    match drawn(&h.ctx, "snapshot") {
        Some(Drawn::Snapshot(s)) => s,
        other => panic!("the snapshot view's record: {other:?}"),
    }
}

#[test]
fn a_gpu_runs_snapshot_shows_places_phases_and_kinds() {
    let mut h = harness();
    h.state_mut().open_snapshot_bytes("gpu_step.pickle", &fixture("gpu_step.pickle"));
    h.state_mut().shown.tab = Tab::Snapshot;
    h.run();
    h.get_by_label("gpu_step.pickle, device 0: measured by PyTorch");
    h.get_by_label("Recorded with PYTORCH_CUDA_ALLOC_CONF=(not set)");
    // The phases, named above the chart and in its description.
    has(&h, "forward: events");
    has(&h, "optimizer step: events");
    has(&h, "(from the run's annotation)");
    has(&h, "Phases: forward: events");
    // Kinds with their evidence; places the user's lines, or no Python frame with the operator.
    has(&h, "gradients — no Python frame (aten::empty_like in AccumulateGrad)");
    has(&h, "made during the backward, alive into the optimizer step");
    has(&h, "optimizer state — train.py:84 main (aten::zeros_like)");
    assert!(h.query_all_by_label_contains("gather_with_cpp").next().is_none(), "no frame memory_viz hides");
    let s = snapshot_drawn(&h);
    let kinds: Vec<PhaseKind> = s.phases.iter().map(|p| p.0).collect();
    assert_eq!(kinds, [PhaseKind::Forward, PhaseKind::Backward, PhaseKind::Optimizer]);
    assert!(s.kinds_at_peak.iter().any(|(g, b)| *g == Guess::OptimizerState && *b > 0));
    assert_eq!(s.replayed_peak_reserved_bytes, None, "nothing replayed yet");
    assert_eq!(s.compared, None);

    // What the file says of its recording, opened.
    h.get_by_label("What the file says of its recording").click();
    h.run();
    has(&h, "4 record_function annotations");
    has(&h, "Events with user metadata: 1 (event");
    has(&h, "future_action ×1");
    has(&h, "trace.future_key ×1");

    // The replay, by keyboard: focus the settings field, type, press Enter.
    let field = h.get_by_label("Allocator settings, as PYTORCH_CUDA_ALLOC_CONF:");
    let _ = field;
    h.get_by_label("Replay").click();
    h.run();
    has(&h, "Replayed with the run's own settings (PyTorch's defaults)");
    has(&h, "The replay's peak reserved is 0.00 % off the run's");
    let real = s.peak_reserved_bytes;
    let s = snapshot_drawn(&h);
    assert_eq!(s.replayed_peak_reserved_bytes, Some(real), "the run's own settings give its segments back");
    has(&h, "reserved, replayed by oomlab's allocator");
    has(&h, "Replayed through oomlab's allocator, reserved peaks at");
    h.snapshot_options(
        "snapshot_gpu_run",
        &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(3000),
    );

    // With other settings, typed and entered.
    h.state_mut().snapshot.loaded.as_mut().expect("open").rerun.conf = "expandable_segments:True".into();
    h.get_by_label("Replay").click();
    h.run();
    has(&h, "Replayed with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    has(&h, "This run would have reserved");
    h.state_mut().snapshot.loaded.as_mut().expect("open").rerun.conf = "expandable_segments:maybe".into();
    h.get_by_label("Replay").click();
    h.run();
    has(&h, "Cannot replay: ");

    // In Chinese.
    h.state_mut().set_lang(Lang::Zh);
    h.run();
    h.run();
    h.get_by_label("gpu_step.pickle，设备 0：由 PyTorch 测得");
    has(&h, "这次运行的各个阶段");
    has(&h, "前向：第");
    has(&h, "梯度 — 没有 Python 帧（AccumulateGrad 中的 aten::empty_like）");
    has(&h, "在反向传播中创建，存活到优化器步");
    h.snapshot_options(
        "snapshot_gpu_run_zh",
        &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(3000),
    );
}

#[test]
fn a_second_file_opens_beside_the_first() {
    let mut h = harness();
    h.state_mut().open_snapshot_bytes("run_rank0.pickle", &fixture("gpu_step.pickle"));
    h.state_mut().snapshot.add_bytes("run_rank1.pickle", &fixture("gpu_step_rank1.pickle"));
    h.state_mut().shown.tab = Tab::Snapshot;
    h.run();
    h.get_by_label("2 snapshots side by side");
    h.get_by_label("the worst");
    has(&h, "run_rank1.pickle peaks");
    has(&h, "Where the extra memory went, at the peaks (from run_rank0.pickle to run_rank1.pickle)");
    has(&h, "parameters: ");
    has(&h, "no stack recorded (");
    let s = snapshot_drawn(&h);
    let c = s.compared.expect("compared");
    assert_eq!((c.0, c.1), (2, 1));
    // The first file is still shown in full, its places and kinds as before.
    h.get_by_label("run_rank0.pickle, device 0: measured by PyTorch");
    has(&h, "gradients — no Python frame (aten::empty_like in AccumulateGrad)");
    // The second shown in full instead.
    h.get_by_label("Show in full").click();
    h.run();
    h.get_by_label("run_rank1.pickle, device 0: measured by PyTorch");
    h.get_by_label("2 snapshots side by side");
    h.snapshot_options(
        "snapshot_two_files",
        &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(3000),
    );
    h.state_mut().set_lang(Lang::Zh);
    h.run();
    h.run();
    h.get_by_label("并排的 2 个快照");
    h.get_by_label("最高");
    h.state_mut().set_lang(Lang::En);
    h.run();
    h.get_by_label("Close the others").click();
    h.run();
    assert!(h.query_by_label("2 snapshots side by side").is_none());
    assert_eq!(snapshot_drawn(&h).compared, None);
}
