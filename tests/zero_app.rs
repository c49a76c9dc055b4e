//! The simulated GPUs in the app: the controls, a real step on each engine (this thread's CPU,
//! the CPU worker, the GPU), GPU 0's account in the views and every other GPU's kept beside it.

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
use oomlab::backend::cluster::CpuCluster;
use oomlab::data::Dataset;
use oomlab::i18n::{Catalog, Lang};
use oomlab::memory::simulate;
use oomlab::plan::{Category, Parallel};

fn settings() -> Settings {
    let parallel = Parallel { gpus: 2, zero: 3, bucket_elems: 4096 };
    Settings {
        batch: 4,
        seq: 32,
        device: DeviceSettings { parallel, ..DeviceSettings::default() },
        ..Settings::default()
    }
}

/// GPU 0's account is the cluster's, run directly; the other GPU's is kept; the breakdown shows
/// GPU 0's communication buckets next to the prediction.
fn check(harness: &mut Harness<'_, OomlabApp>, what: &str) {
    let s = settings();
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    let plan = s.plan(vocab).expect("plan");
    let valid = plan.request().validate().expect("valid");
    let mut direct = CpuCluster::<f32>::new(&valid, s.seed, s.device.budget_bytes).expect("cluster");
    let batch = Dataset::builtin().batch(plan.global_batch_shape(), s.seed, 0).expect("batch");
    direct.train_step(&batch).expect("direct");
    let memories = direct.memories();
    let run = &harness.state().run;
    let measured = run.measured.as_ref().expect("GPU 0's account");
    assert_eq!(measured.timeline, memories[0].expect("GPU 0").timeline, "{what}: GPU 0");
    assert_eq!(run.other_ranks.len(), 1, "{what}: GPU 1's account is kept");
    assert_eq!(run.other_ranks[0].timeline, memories[1].expect("GPU 1").timeline, "{what}: GPU 1");
    let comm = measured.peak_allocated.get(Category::Communication);
    assert!(comm > 0, "{what}: the reduce buckets and a gathered unit");
    harness.state_mut().shown.tab = Tab::Breakdown;
    harness.run_steps(3);
    let Some(Drawn::Breakdown(b)) = views::drawn(&harness.ctx, "breakdown") else { panic!("{what}: breakdown") };
    let predicted = simulate(&plan, s.device.budget_bytes).expect("fits");
    let row = b.rows.iter().find(|r| r.0 == "communication").expect("a communication row");
    assert_eq!((row.1, row.2), (predicted.peak_allocated.get(Category::Communication), Some(comm)), "{what}");
}

#[test]
fn a_zero_step_runs_in_the_app_on_the_cpu() {
    let mut harness = Harness::builder()
        .with_size([1280.0, 800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings()));
    harness.run();
    let en = Catalog::new(Lang::En);
    harness.get_by_label(&en.text("controls-gpus")).click();
    harness.run_steps(3);
    harness.get_by_label_contains(&en.text("controls-gpus-simulated"));
    step(&mut harness);
    check(&mut harness, "this thread's CPU");
    // The timeline of GPU 1, picked: its own record, every collective marked.
    harness.state_mut().shown.tab = Tab::Timeline;
    harness.run_steps(3);
    harness.get_by_label("GPU 1").click();
    harness.run_steps(3);
    let Some(Drawn::Timeline(tl)) = views::drawn(&harness.ctx, "timeline") else { panic!("timeline") };
    let gpu1 = harness.state().run.other_ranks[0].clone();
    assert_eq!(tl.source, views::Source::Allocator);
    assert_eq!(tl.peak_allocated_bytes, gpu1.peak_allocated_bytes(), "GPU 1's peak");
    let plan = settings().plan(Dataset::builtin().tokenizer.vocab_size()).expect("plan");
    let ran: Vec<usize> = gpu1
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, p)| p.op.is_some_and(|i| plan.ops[i].op.is_collective()))
        .map(|(i, _)| i)
        .collect();
    assert!(!ran.is_empty() && tl.collectives == ran, "each collective marked where it ran");
    // Memory per GPU against the number of GPUs, by stage: each point is that plan's peak.
    harness.state_mut().shown.tab = Tab::Sweep;
    harness.run_steps(3);
    let Some(Drawn::PerGpu(pg)) = views::drawn(&harness.ctx, "per-gpu") else { panic!("per-gpu") };
    assert_eq!(pg.series.len(), 4, "DDP and ZeRO-1, 2, 3");
    for (stage, points) in &pg.series {
        for &(gpus, bytes) in points {
            let mut t = settings().techniques();
            t.parallel = Parallel { gpus, zero: *stage, ..t.parallel };
            let p = settings().plan_with(Dataset::builtin().tokenizer.vocab_size(), 4, &t).expect("plan");
            let want = oomlab::memory::simulate_peak(&p, oomlab::memory::Budget::Unlimited).expect("peak");
            assert_eq!(bytes, want.peak_allocated_bytes(), "ZeRO-{stage} on {gpus} GPUs");
        }
    }
    let at = |stage: u8, gpus: usize| pg.series[stage as usize].1.iter().find(|p| p.0 == gpus).map(|p| p.1);
    assert!(at(3, 8) < at(0, 8), "ZeRO-3 holds less per GPU than DDP on 8 GPUs");
    assert_eq!(at(0, 1), at(3, 1), "one GPU shards nothing");
    // A teacher's link keeps the GPUs: a locked control's values stay.
    assert_eq!(harness.state().settings().device.parallel, settings().device.parallel, "drawn, not changed");
    support_xdg::xdg();
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options("zero_app_en", &options);
    harness.state_mut().set_lang(Lang::Zh);
    harness.run_steps(3);
    harness.get_by_label(&Catalog::new(Lang::Zh).text("controls-gpus"));
    harness.snapshot_options("zero_app_zh", &options);
}

#[test]
fn a_zero_step_runs_in_the_cpu_worker() {
    let transport = oomlab::app::cpu_worker::ThreadTransport::spawn();
    let app = OomlabApp::headless_worker(settings(), Box::new(transport));
    let mut harness =
        Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    step(&mut harness);
    check(&mut harness, "the CPU worker");
}
