//! Offload in the app: the control, a real step on this thread's CPU and in the CPU worker, the
//! host's table beside the breakdown (what the plan keeps in host memory, what the GPU keeps
//! less, the bytes over the bus, the measured time beside the step without offload), the copies
//! marked on the timeline where they ran.

#[path = "support/xdg.rs"]
mod support_xdg;

#[path = "support/one_step.rs"]
mod support_step;
use support_step::one_step as step;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::settings::{DeviceSettings, Settings};
use oomlab::app::views::{self, drawn::Drawn};
use oomlab::app::{OomlabApp, Tab};
use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Dataset;
use oomlab::i18n::{Catalog, Lang};
use oomlab::plan::Offload;
use oomlab::plan::offload::{bus_bytes, offloaded_bytes};

fn settings(offload: Offload) -> Settings {
    Settings {
        batch: 4,
        seq: 32,
        device: DeviceSettings { offload, ..DeviceSettings::default() },
        ..Settings::default()
    }
}

/// The app's account of its last step is the executor's, run directly on the same batch; the
/// host's table is the plan's, and its time is measured.
fn check(harness: &mut Harness<'_, OomlabApp>, what: &str, without_measured: bool) {
    let s = harness.state().settings().clone();
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    let plan = s.plan(vocab).expect("plan");
    let mut direct = CpuExecutor::<f32>::with_budget(plan.clone(), s.seed, s.device.budget_bytes).expect("direct");
    let steps = harness.state().steps_done();
    for i in 0..steps as u64 {
        let batch = Dataset::builtin().batch(plan.batch_shape(), s.seed, i).expect("batch");
        direct.upload_batch(&batch).expect("batch");
        direct
            .run_phases(&[oomlab::plan::Phase::Forward, oomlab::plan::Phase::Backward, oomlab::plan::Phase::Optimizer])
            .expect("step");
    }
    let measured = harness.state().run.measured.clone().expect("an account");
    assert_eq!(measured.timeline, direct.memory().expect("direct").timeline, "{what}: the step's account");
    harness.state_mut().shown.tab = Tab::Breakdown;
    harness.run_steps(3);
    let Some(Drawn::Breakdown(b)) = views::drawn(&harness.ctx, "breakdown") else { panic!("{what}: breakdown") };
    assert!(b.rows.iter().all(|r| r.0 != "optimizer_state"), "{what}: no optimizer state on the GPU: {:?}", b.rows);
    let Some(Drawn::Host(h)) = views::drawn(&harness.ctx, "host-memory") else { panic!("{what}: the host's table") };
    let rows: Vec<(String, u64)> = plan.host_bytes().iter().map(|&(c, b)| (c.name().to_string(), b)).collect();
    assert_eq!(h.rows, rows, "{what}: the plan's host tensors");
    assert!(rows.iter().any(|r| r.0 == "optimizer_state" && r.1 > 0));
    assert_eq!(h.saved_bytes, offloaded_bytes(&plan), "{what}");
    assert_eq!((h.down_bytes, h.up_bytes), bus_bytes(&plan), "{what}");
    assert!(h.with_secs.is_some_and(|s| s > 0.0), "{what}: the step's time, measured");
    assert_eq!(h.without_secs.is_some(), without_measured, "{what}: the step without offload, when it ran");
    // The copies, each marked where it ran.
    harness.state_mut().shown.tab = Tab::Timeline;
    harness.run_steps(3);
    let Some(Drawn::Timeline(tl)) = views::drawn(&harness.ctx, "timeline") else { panic!("{what}: timeline") };
    let ran: Vec<usize> = measured
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, p)| p.op.is_some_and(|i| plan.ops[i].op.is_transfer()))
        .map(|(i, _)| i)
        .collect();
    assert!(ran.len() >= 2 && tl.transfers == ran, "{what}: {:?} against {ran:?}", tl.transfers);
}

#[test]
fn an_offloaded_step_runs_in_the_app_on_the_cpu() {
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings(Offload::None)));
    harness.run();
    let en = Catalog::new(Lang::En);
    // The step without offload first, whose time the host's table sets beside offload's.
    step(&mut harness);
    harness.get_by_label(&en.text("controls-offload")).click();
    harness.run_steps(3);
    harness.get_by_label(&en.text("offload-optimizer")).click();
    harness.run_steps(3);
    assert_eq!(harness.state().settings().device.offload, Offload::Optimizer, "chosen in the control");
    step(&mut harness);
    check(&mut harness, "this thread's CPU", true);
    harness.state_mut().shown.tab = Tab::Breakdown;
    harness.run_steps(3);
    harness.get_by_label_contains(&en.text("host-heading"));
    support_xdg::xdg();
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options("offload_app_en", &options);
    harness.state_mut().set_lang(Lang::Zh);
    harness.run_steps(3);
    harness.get_by_label_contains(&Catalog::new(Lang::Zh).text("host-heading"));
    harness.snapshot_options("offload_app_zh", &options);
}

#[test]
fn an_offloaded_step_runs_in_the_cpu_worker() {
    let transport = oomlab::app::cpu_worker::ThreadTransport::spawn();
    let app = OomlabApp::headless_worker(settings(Offload::OptimizerGradients), Box::new(transport));
    let mut harness =
        Harness::builder().with_size([1280.0, 900.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    step(&mut harness);
    check(&mut harness, "the CPU worker", false);
}
