//! The allocator's options (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`) change the real step, not only
//! the prediction: each backend places the step's tensors as the plan predicts with each option,
//! the arithmetic is unchanged (the same losses), and a step whose out-of-memory is
//! fragmentation fits with expandable segments.

mod common;
#[path = "support/xdg.rs"]
mod support_xdg;

use common::gpu;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::Dataset;
use oomlab::memory::allocator::Event;
use oomlab::memory::{StepMemory, simulate};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{AllocatorConfig, OptimizerConfig, Plan, Techniques};

fn plan(batch: usize, seq: usize, conf: &str) -> Plan {
    let ds = Dataset::builtin();
    let t = Techniques { allocator: AllocatorConfig::parse(conf).expect("valid"), ..Techniques::default() };
    Plan::build_with(
        &ModelConfig::toy(ds.tokenizer.vocab_size()),
        StepShape { batch, seq },
        &OptimizerConfig::default(),
        &t,
    )
    .expect("plan")
}

fn same(what: &str, predicted: &StepMemory, measured: &StepMemory) {
    assert_eq!(predicted.timeline, measured.timeline, "{what}: every op, allocated and reserved");
    assert_eq!(predicted.stats, measured.stats, "{what}: the allocator's counters");
}

#[test]
fn each_option_runs_for_real_on_both_backends() {
    let budget = 40u64 << 20;
    let ds = Dataset::builtin();
    let g = gpu();
    let mut baseline: Option<(Vec<f32>, Vec<f32>)> = None;
    for conf in ["", "expandable_segments:True", "max_split_size_mb:21", "garbage_collection_threshold:0.3"] {
        let plan = plan(24, 64, conf);
        let predicted = simulate(&plan, budget).expect("fits 40 MiB");
        let mut cpu = CpuExecutor::<f32>::with_budget(plan.clone(), 3, budget).expect("cpu");
        let mut gpu_exec =
            pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, 3, budget)).expect("gpu");
        let (mut cpu_losses, mut gpu_losses) = (Vec::new(), Vec::new());
        for step in 0..3 {
            let batch = ds.batch(StepShape { batch: 24, seq: 64 }, 3, step).expect("batch");
            cpu_losses.push(cpu.train_step(&batch).expect("cpu step"));
            gpu_losses.push(gpu_exec.train_step(&batch).expect("gpu step"));
            if step == 0 {
                same(&format!("cpu {conf:?}"), &predicted, cpu.memory().expect("a step ran"));
                same(&format!("gpu {conf:?}"), &predicted, gpu_exec.memory().expect("a step ran"));
                // With expandable segments the first step grows them while tensors live in
                // them: the GPU copies each into a larger buffer, and the losses below show
                // nothing was lost on the way.
                let grew = predicted.events.iter().any(|e| matches!(e, Event::SegmentMap { .. }));
                assert_eq!(grew, conf.starts_with("expandable"), "{conf:?}: segments grew");
            }
            // The GPU's buffers are the allocator's segments, whatever grew or shrank.
            let reserved = gpu_exec.memory().expect("a step ran").stats.reserved_bytes;
            assert_eq!(gpu_exec.reserved_buffer_bytes(), reserved, "{conf:?} step {step}: real GPU memory");
        }
        if conf.starts_with("expandable") {
            let m = cpu.memory().expect("a step ran");
            assert!(m.stats.segments <= 2, "{conf}: one segment per pool, not {}", m.stats.segments);
        }
        // Where the tensors lie changes nothing of the arithmetic: the losses are the default
        // allocator's (the CPU's to the bit; the GPU's within its reduction order).
        match &baseline {
            None => baseline = Some((cpu_losses, gpu_losses)),
            Some((c, gl)) => {
                assert_eq!(&cpu_losses, c, "{conf}: cpu losses");
                for (a, b) in gpu_losses.iter().zip(gl) {
                    assert!((a - b).abs() <= 1e-5 * b.abs(), "{conf}: gpu loss {a} against {b}");
                }
            }
        }
    }
}

#[test]
fn a_fragmented_step_fits_with_expandable_segments() {
    // The toy at batch 48 × 64 in 54 MiB: more than 20 MiB lie cached in large segments when a
    // small tensor needs a new 2 MiB small segment — an out-of-memory with enough free in total.
    let budget = 54u64 << 20;
    let ds = Dataset::builtin();
    let shape = StepShape { batch: 48, seq: 64 };
    let batch = ds.batch(shape, 0, 0).expect("batch");
    let fragmented = plan(48, 64, "");
    let oom = simulate(&fragmented, budget).expect_err("fragmented");
    assert!(oom.error.cached_free_bytes >= oom.error.requested_bytes, "{}", oom.message);
    assert!(oom.message.contains("fragmented") && oom.message.contains("expandable_segments:True"), "{}", oom.message);
    let mut cpu = CpuExecutor::<f32>::with_budget(fragmented, 0, budget).expect("model state fits");
    match cpu.train_step(&batch) {
        Err(BackendError::OutOfMemory(real)) => assert_eq!(real.message, oom.message, "the real step's OOM"),
        other => panic!("expected an OOM, got {:?}", other.map(|_| ())),
    }

    let expandable = plan(48, 64, "expandable_segments:True");
    let predicted = simulate(&expandable, budget).expect("fits with expandable segments");
    assert!(predicted.peak_reserved_bytes() <= budget);
    let mut cpu = CpuExecutor::<f32>::with_budget(expandable.clone(), 0, budget).expect("cpu");
    assert!(cpu.train_step(&batch).expect("the real step fits").is_finite());
    same("cpu expandable", &predicted, cpu.memory().expect("a step ran"));
    let g = gpu();
    let mut gpu_exec =
        pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, expandable, 0, budget)).expect("gpu");
    assert!(gpu_exec.train_step(&batch).expect("the real step fits").is_finite());
    same("gpu expandable", &predicted, gpu_exec.memory().expect("a step ran"));
}

/// The app: a fragmented out-of-memory offers expandable segments first; one click switches them
/// on, the step fits, and a real step runs with one segment per pool. The options sit under the
/// budget, in both languages, and show the variable PyTorch would read.
#[test]
fn the_app_offers_expandable_segments_for_a_fragmented_oom() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::OomlabApp;
    use oomlab::app::settings::{DeviceSettings, Settings, Suggestion};
    use oomlab::i18n::{Catalog, Lang};

    let en = Catalog::new(Lang::En);
    let settings =
        Settings { batch: 48, seq: 64, device: DeviceSettings::with_budget(54 << 20), ..Settings::default() };
    let mut harness = Harness::builder()
        .with_size([1280.0, 1000.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    harness.get_by_label(&en.text("oom-title"));
    harness.get_by_label_contains("its largest free block is");
    // The allocator map of the moment it failed: the cached free memory the message names, in
    // segments that could not take the tensor.
    harness.state_mut().shown.tab = oomlab::app::Tab::Allocator;
    harness.run();
    let oom = simulate(&harness.state().settings().plan(58).expect("plan"), 54 << 20).expect_err("fragmented");
    let Some(oomlab::app::views::Drawn::AllocatorMap(map)) = oomlab::app::views::drawn(&harness.ctx, "allocator-map")
    else {
        panic!("no allocator map for the failed step")
    };
    assert_eq!(map.reserved_bytes, oom.error.reserved_bytes, "the segments reserved when it failed");
    assert_eq!(map.reserved_bytes - map.allocated_bytes, oom.error.cached_free_bytes, "{}", map.summary);
    harness.get_by_label_contains(&format!("did not fit ({})", oom.op_label));
    harness.get_by_label(&Suggestion::ExpandableSegments.label(&en)).click();
    harness.run();
    assert!(harness.state().settings().device.allocator.expandable_segments);
    assert!(harness.query_by_label(&en.text("oom-title")).is_none(), "the step fits now");
    harness.get_by_label("One step").click();
    harness.run_steps(400);
    assert!(harness.state().is_idle(), "the step finished");
    let measured = harness.state().run.measured.clone().expect("a real step ran");
    assert!(measured.stats.segments <= 2, "one segment per pool");

    // The options, opened under the budget: each a control with its catalog's words.
    harness.get_by_label(&en.text("controls-allocator")).click();
    harness.run();
    harness.get_by_label_contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    harness.get_by_label(&en.text("controls-alloc-max-split")).click();
    harness.run();
    assert_eq!(harness.state().settings().device.allocator.max_split_size, Some(64 << 20));
    harness.get_by_label_contains("max_split_size_mb:64");
    assert_eq!(harness.state().settings().techniques().allocator, harness.state().settings().device.allocator);

    let zh = Catalog::new(Lang::Zh);
    harness.state_mut().set_lang(Lang::Zh);
    harness.run();
    harness.get_by_label(&zh.text("controls-alloc-expandable"));
    harness.get_by_label(&zh.text("controls-alloc-gc"));
    support_xdg::xdg();
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options("allocator_options_zh", &options);
}

#[test]
fn a_plain_oom_is_not_offered_the_allocators_remedy() {
    use oomlab::app::settings::{DeviceSettings, Settings, Suggestion};
    use oomlab::app::teaching::Restrictions;
    // A plain out-of-memory (too big, not fragmented) is not offered the allocator's remedy.
    let s = Settings { batch: 256, device: DeviceSettings::with_budget(32 << 20), ..Settings::default() };
    let oom = simulate(&s.plan(58).expect("plan"), s.device.budget_bytes).expect_err("too big");
    assert!(oom.error.cached_free_bytes < oom.error.requested_bytes, "{}", oom.message);
    let offered = oomlab::app::suggestions(&s, 58, &Restrictions::default(), &oom);
    assert!(!offered.contains(&Suggestion::ExpandableSegments), "{offered:?}");
    let frag = Settings { batch: 48, seq: 64, device: DeviceSettings::with_budget(54 << 20), ..Settings::default() };
    let oom = simulate(&frag.plan(58).expect("plan"), 54 << 20).expect_err("fragmented");
    assert_eq!(
        oomlab::app::suggestions(&frag, 58, &Restrictions::default(), &oom).first(),
        Some(&Suggestion::ExpandableSegments)
    );
}

/// Opening the options draws them without changing them: values from a link or the CLI outside
/// the sliders' ranges stay as they are, at 1280×800 and at a phone's width.
#[test]
fn drawing_the_options_changes_none_of_them_at_1280_by_800() {
    drawn_unchanged([1280.0, 800.0], "allocator_options_en");
}

#[test]
fn drawing_the_options_changes_none_of_them_at_a_phones_width() {
    drawn_unchanged([390.0, 844.0], "allocator_options_phone");
}

fn drawn_unchanged(size: [f32; 2], name: &str) {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::OomlabApp;
    use oomlab::app::settings::{DeviceSettings, Settings};
    use oomlab::i18n::{Catalog, Lang};

    let allocator = AllocatorConfig::parse("max_split_size_mb:8192,garbage_collection_threshold:0.99").expect("valid");
    let device = DeviceSettings { allocator, ..DeviceSettings::default() };
    {
        let settings = Settings { device, ..Settings::default() };
        let mut harness = Harness::builder()
            .with_size(size)
            .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
        harness.run();
        let en = Catalog::new(Lang::En);
        if harness.query_by_label(&en.text("controls-allocator")).is_none() {
            // A phone: the controls are in the drawer.
            harness.state_mut().chrome.drawer_open = true;
            harness.run();
        }
        harness.get_by_label(&en.text("controls-allocator")).click();
        harness.run_steps(3);
        harness.get_by_label_contains("max_split_size_mb:8192,garbage_collection_threshold:0.99");
        assert_eq!(harness.state().settings().device.allocator, allocator, "{name}: drawn, not changed");
        support_xdg::xdg();
        let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
        harness.snapshot_options(name, &options);
    }
}
