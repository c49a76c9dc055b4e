//! Batches of documents in the app: the control, real steps of padded batches (each its own
//! length) on this thread's CPU and in the CPU worker, and the views showing the step that ran.

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
use oomlab::plan::{Batching, Phase};

fn settings(batching: Batching) -> Settings {
    // Room for most speeches: their lengths then differ from batch to batch.
    let dims = oomlab::app::settings::ModelDims { max_seq: 256, ..Settings::default().dims };
    Settings { batch: 4, dims, device: DeviceSettings { batching, ..DeviceSettings::default() }, ..Settings::default() }
}

/// Three steps: each the app's account equals one executor going on at each batch's length, run
/// directly; the plan the views show is the batch's that ran, and the breakdown's prediction is
/// the allocator's.
fn three_steps(harness: &mut Harness<'_, OomlabApp>, what: &str) {
    let s = harness.state().settings().clone();
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    let dataset = Dataset::builtin();
    let first = s.plan(vocab).expect("plan");
    let mut direct = CpuExecutor::<f32>::with_budget(first.clone(), s.seed, s.device.budget_bytes).expect("direct");
    let mut lengths = Vec::new();
    for k in 0..3u64 {
        step(harness);
        let (b, shape, cap) = (first.techniques.batching, first.global_batch_shape(), first.model.seq_len);
        let batch = oomlab::documents::batch_for(&dataset, b, shape, cap, s.seed, k).expect("batch");
        let mut request = first.request();
        request.micro.seq = batch.shape.seq;
        if batch.shape.seq != direct.plan().shape.seq {
            direct.reshape(request.validate().expect("valid").plan()).expect("reshaped");
        }
        direct.upload_batch(&batch).expect("upload");
        direct.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).expect("step");
        let measured = harness.state().run.measured.clone().expect("an account");
        assert_eq!(measured.timeline, direct.memory().expect("direct").timeline, "{what}: step {k}");
        let shown = harness.state().shown.derived.plan.as_ref().map(|p| p.shape.seq).expect("a plan");
        assert_eq!(shown, batch.shape.seq, "{what}: the views show step {k}'s batch");
        harness.state_mut().shown.tab = Tab::Breakdown;
        harness.run_steps(2);
        let Some(Drawn::Breakdown(d)) = views::drawn(&harness.ctx, "breakdown") else { panic!("{what}: breakdown") };
        assert_eq!(Some(d.predicted_total_bytes), d.allocator_total_bytes, "{what}: step {k}: predicted = allocator");
        lengths.push(batch.shape.seq);
    }
    assert!(lengths.windows(2).any(|w| w[0] != w[1]), "{what}: lengths vary: {lengths:?}");
}

#[test]
fn padded_batches_run_in_the_app_each_at_its_length() {
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings(Batching::Windows)));
    harness.run();
    let en = Catalog::new(Lang::En);
    harness.get_by_label(&en.text("controls-batching")).click();
    harness.run_steps(3);
    harness.get_by_label(&en.text("batching-padded")).click();
    harness.run_steps(3);
    assert_eq!(harness.state().settings().device.batching, Batching::Padded, "chosen in the control");
    three_steps(&mut harness, "this thread's CPU");
}

#[test]
fn padded_batches_run_in_the_cpu_worker() {
    let transport = oomlab::app::cpu_worker::ThreadTransport::spawn();
    let app = OomlabApp::headless_worker(settings(Batching::Bucketed), Box::new(transport));
    let mut harness =
        Harness::builder().with_size([1280.0, 900.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    three_steps(&mut harness, "the CPU worker");
}

#[test]
fn packed_batches_run_in_the_app() {
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings(Batching::Packed)));
    harness.run();
    step(&mut harness);
    let plan = harness.state().shown.derived.plan.clone().expect("plan");
    assert!(plan.handles.micro[0].packing.is_some(), "the documents' starts are inputs");
    assert!(harness.state().run.losses[0].is_finite());
}

/// The memory-vs-batch tab sets the three ways side by side at the current batch: each row's
/// padding share and memory per useful character are its first batch's, its largest batch is one
/// that fits while the next does not; packing pads least and lets the largest batch fit.
#[test]
fn the_sweep_tab_compares_the_ways_to_batch_the_speeches() {
    use oomlab::memory::{Budget, simulate_peak};
    let start = settings(Batching::Windows);
    let mut harness = Harness::builder()
        .with_size([1280.0, 1400.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(start.clone()));
    harness.state_mut().shown.tab = Tab::Sweep;
    harness.run_steps(3);
    let Some(Drawn::Ways(w)) = views::drawn(&harness.ctx, "ways") else { panic!("the ways' table") };
    assert_eq!((w.batch, w.rows.len()), (start.batch, 3));
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    let docs = oomlab::documents::Documents::builtin();
    for (name, share, per, largest) in &w.rows {
        let way = Batching::parse(name).expect("a way");
        let s = Settings { device: DeviceSettings { batching: way, ..start.device }, ..start.clone() };
        let plan = s.plan(vocab).expect("plan");
        let cap = if way.varies_in_length() { s.dims.max_seq } else { s.seq };
        let batch = docs.batch(way, oomlab::model::StepShape { batch: s.batch, seq: cap }, s.seed, 0).expect("batch");
        let useful = batch.counted_targets() as u64;
        assert!((share - oomlab::documents::PaddingShare::of(&batch).share()).abs() < 1e-12, "{name}");
        let peak = simulate_peak(&plan, Budget::Unlimited).expect("peak").peak_allocated_bytes();
        assert_eq!(*per, Some(peak / useful), "{name}: memory per useful character");
        let fits = |b: usize| {
            s.plan_with(vocab, b, &s.techniques())
                .is_ok_and(|p| simulate_peak(&p, Budget::Bytes(s.device.budget_bytes)).is_ok())
        };
        let largest = largest.expect("some batch fits");
        assert!(fits(largest) && !fits(largest + 1), "{name}: {largest} fits, {} does not", largest + 1);
    }
    let row = |n: &str| w.rows.iter().find(|r| r.0 == n).cloned().expect("a row");
    assert!(row("packed").1 < row("padded").1, "packing pads least");
    assert!(row("packed").2 < row("padded").2, "packing spends less per useful character");
}
