//! The app's views rendered with egui_kittest from fixed data (the plan's prediction of a fixed
//! config), checked by their content; and the whole app, headless on the CPU backend.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

#[path = "support/csv.rs"]
mod csv;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::settings::Settings;
use oomlab::app::views::{self, Source, Suggestion, SweepSeries};
use oomlab::app::{OomlabApp, SWEEP_BATCHES};
use oomlab::i18n::{Catalog, Lang};
use oomlab::memory::device::{DeviceAllocation, DeviceBlock, DeviceFigures, DeviceMemory, DriverReport, segment_label};
use oomlab::memory::{StepMemory, simulate, simulate_peak};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Category, Checkpoint, OptimizerConfig, Plan};
use oomlab::units::format_bytes;

/// Compares with tests/snapshots/NAME.png (`UPDATE_SNAPSHOTS=1` rewrites them), tolerating the
/// few anti-aliased pixels a different CPU's lavapipe may shade differently.
fn snapshot<S>(harness: &mut Harness<'_, S>, name: &str) {
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options(name, &options);
}

fn toy_plan(batch: usize) -> Plan {
    Plan::build(&ModelConfig::toy(58), StepShape { batch, seq: 64 }, &OptimizerConfig::default()).expect("plan")
}

/// A driver report for `memory`'s segments, as lavapipe gives one: each buffer 48 bytes over
/// its request, all in one 64 MiB block, next to one buffer of wgpu's own.
fn device_for(memory: &StepMemory) -> DeviceMemory {
    // The segments at the end of the step: what the driver holds after it.
    let last = memory.timeline.last().and_then(|p| p.op);
    let segments = memory.segments_at(last);
    let mut offset = 0;
    let mut allocations = vec![DeviceAllocation { name: "unused binding".into(), size_bytes: 4096, offset_bytes: 0 }];
    offset += 4096;
    for s in &segments {
        allocations.push(DeviceAllocation {
            name: segment_label(s.segment, 0),
            size_bytes: s.size + 48,
            offset_bytes: offset,
        });
        offset += s.size + 64;
    }
    let report = DriverReport {
        blocks: vec![DeviceBlock { size_bytes: 64 << 20, allocations }],
        total_allocated_bytes: offset,
        total_reserved_bytes: 64 << 20,
        counters: None,
    };
    let live: Vec<_> = segments.iter().map(|s| (s.segment, s.size)).collect();
    DeviceMemory::match_segments(report, &live, 0)
}

#[test]
fn breakdown_shows_every_category_from_every_source() {
    let en = Catalog::new(Lang::En);
    let plan = toy_plan(16);
    let predicted = simulate(&plan, 1 << 30).expect("fits");
    let allocator = predicted.clone();
    let device = device_for(&allocator);
    let figures = DeviceFigures::Reported(device.clone());
    xdg();
    let mut harness = Harness::new_ui(|ui| views::breakdown(ui, &en, Some(&allocator), &predicted, &figures));
    harness.get_by_label("activations");
    harness.get_by_label("optimizer state");
    harness.get_by_label("predicted (plan)");
    harness.get_by_label("allocator (live)");
    harness.get_by_label("device (driver report)");
    // The device column: the segment buffers' bytes as the driver holds them, rounding shown.
    // (16.00 MiB in each source's column: the driver's 48 bytes per buffer are below the
    // column's precision, so the line under the table says them in bytes.)
    let reserved = format_bytes(device.peak_segment_bytes);
    assert_eq!(reserved, format_bytes(predicted.peak_reserved_bytes()));
    assert_eq!(harness.get_all_by_label(&reserved).count(), 3, "reserved {reserved} from every source");
    harness.get_by_label_contains(&format!("plus {} bytes of the driver's own rounding", device.rounding_bytes()));
    assert_eq!(device.rounding_bytes(), 48 * device.segments.len() as i128);
    let total = format_bytes(predicted.peak_allocated_bytes());
    assert_eq!(harness.get_all_by_label(&total).count(), 2, "total {total}, allocator and predicted");
    let act = format_bytes(predicted.peak_allocated.get(oomlab::plan::Category::Activations));
    assert!(harness.query_all_by_label(&act).count() >= 2);
    harness.get_by_label_contains("gradients + optimizer state + master weights");
    harness.fit_contents();
    snapshot(&mut harness, "breakdown");
    // In the browser there is no report, and the view says why instead of a number.
    let browser = DeviceFigures::NotReported { reason: oomlab::memory::device::NOT_REPORTED_BROWSER.into() };
    let harness = Harness::new_ui(|ui| views::breakdown(ui, &en, Some(&allocator), &predicted, &browser));
    harness.get_by_label_contains("Device: the browser reports none: WebGPU exposes no memory figures");
    assert!(harness.query_by_label_contains("driver's own rounding").is_none());
    // A native backend without an allocator report says so too.
    let none = DeviceFigures::NotReported { reason: oomlab::memory::device::NOT_REPORTED_BACKEND.into() };
    let harness = Harness::new_ui(|ui| views::breakdown(ui, &en, Some(&allocator), &predicted, &none));
    harness.get_by_label_contains("Device: not reported by this backend");
}

#[test]
fn timeline_marks_the_peak_and_lists_live_tensors() {
    let en = Catalog::new(Lang::En);
    let plan = toy_plan(8);
    let memory = simulate(&plan, 1 << 30).expect("fits");
    let mut scrub = memory.peak_index;
    xdg();
    let mut harness = Harness::builder()
        .with_size([900.0, 560.0])
        .build_ui(|ui| views::timeline(ui, &en, &plan, &memory, Source::Predicted, &mut scrub));
    let peak_text = format!("Peak {}", format_bytes(memory.peak_allocated_bytes()));
    assert_eq!(harness.query_all_by_label_contains(&peak_text).count(), 2, "the summary, and the chart's description");
    assert_eq!(harness.query_all_by_label_contains("over one step, predicted (plan)").count(), 2);
    // The chart's description for a screen reader: the summary and the scrubber's figures.
    let described = chart_descriptions(&harness);
    let at = format!(
        "At {}: {} allocated",
        views::op_label(&en, &plan, point_op(&memory)),
        format_bytes(memory.peak_allocated_bytes())
    );
    assert!(described.len() == 1 && described[0].contains(&peak_text) && described[0].contains(&at), "{described:?}");
    let live = views::live_tensors(&plan, memory.timeline[memory.peak_index].op);
    assert_eq!(live.len(), memory.live_at_peak.len(), "the plan's live tensors are the allocator's at the peak");
    harness.get_by_label(&format!("{} tensors alive here", live.len()));
    snapshot(&mut harness, "timeline");
}

#[test]
fn sweep_names_the_largest_batch_that_fits_and_the_first_oom() {
    let en = Catalog::new(Lang::En);
    let budget = 32 << 20;
    let points = SWEEP_BATCHES.iter().take(12).map(|&b| (b, simulate_peak(&toy_plan(b), budget))).collect();
    let series = vec![SweepSeries { name: "this setup".into(), points }];
    let largest = series[0].largest_fitting().expect("some batch fits");
    let first_oom = series[0].first_oom().expect("some batch does not");
    assert!(largest < first_oom);
    xdg();
    let mut harness = Harness::builder()
        .with_size([900.0, 400.0])
        .build_ui(|ui| views::sweep_chart(ui, &en, &series, &[], budget, 16));
    harness.get_by_label_contains(&format!("largest batch that fits {largest}; out of memory from batch {first_oom}"));
    snapshot(&mut harness, "sweep");
    // The chart's description, in both languages: the peak at the current batch (the plan's,
    // computed here), the largest category's share of it, and the batch where the budget runs out.
    let at16 = simulate_peak(&toy_plan(16), budget).expect("batch 16 fits");
    let acts = 100.0 * at16.peak_allocated.get(Category::Activations) as f64 / at16.peak_allocated_bytes() as f64;
    for lang in Lang::ALL {
        let t = Catalog::new(lang);
        // The app's fonts (the CJK one too), which take effect from the next frame.
        let mut harness = Harness::builder().with_size([900.0, 400.0]).build_ui(|ui| {
            if ui.ctx().cumulative_frame_nr() == 0 {
                ui.ctx().set_fonts(oomlab::app::fonts::embedded());
            } else {
                views::sweep_chart(ui, &t, &series, &[], budget, 16);
            }
        });
        harness.run();
        let described = chart_descriptions(&harness);
        let want = [
            views::size(&t, at16.peak_allocated_bytes()),
            format!("{acts:.0} %"),
            views::category_name(&t, Category::Activations),
            format!("{first_oom}"),
        ];
        assert!(
            described.len() == 1 && want.iter().all(|w| described[0].contains(w.as_str())),
            "{described:?} {want:?}"
        );
    }
}

/// The charts' descriptions a screen reader gets: the labels of the image nodes.
fn chart_descriptions<S>(harness: &Harness<'_, S>) -> Vec<String> {
    use egui_kittest::kittest::NodeT;
    harness.query_all_by_role(egui::Role::Image).filter_map(|n| n.accesskit_node().label()).collect()
}

/// The op at the peak.
fn point_op(memory: &StepMemory) -> Option<usize> {
    memory.timeline[memory.peak_index].op
}

#[test]
fn allocator_map_summarises_segments_at_the_peak() {
    let en = Catalog::new(Lang::En);
    let plan = toy_plan(16);
    let memory = simulate(&plan, 1 << 30).expect("fits");
    let point = memory.timeline[memory.peak_index].clone();
    xdg();
    let mut harness = Harness::builder()
        .with_size([900.0, 200.0])
        .build_ui(|ui| views::allocator_map(ui, &en, &plan, &memory, Source::Predicted, point.op, None));
    harness.get_by_label_contains(&format!("{} reserved", format_bytes(point.reserved_bytes)));
    harness.get_by_label_contains(&format!("{} allocated", format_bytes(point.allocated_bytes)));
    harness.get_by_label_contains("largest free block");
    snapshot(&mut harness, "allocator_map");
}

/// With a driver report after a real step, its memory blocks are drawn under the segments.
#[test]
fn allocator_map_draws_the_drivers_blocks() {
    let en = Catalog::new(Lang::En);
    let plan = toy_plan(16);
    let memory = simulate(&plan, 1 << 30).expect("fits");
    xdg();
    let device = device_for(&memory);
    let mut harness = Harness::builder()
        .with_size([900.0, 300.0])
        .build_ui(|ui| views::allocator_map(ui, &en, &plan, &memory, Source::Allocator, None, Some(&device)));
    harness.get_by_label_contains("device (driver report): 1 memory block(s) of 64.00 MiB");
    snapshot(&mut harness, "allocator_map_device");
}

#[test]
fn oom_panel_explains_and_offers_suggestions() {
    let en = Catalog::new(Lang::En);
    let plan = toy_plan(64);
    let oom = simulate(&plan, 8 << 20).expect_err("does not fit 8 MiB");
    let mut clicked = None;
    let mut harness = Harness::new_ui(|ui| {
        if let Some(s) = views::oom_panel(ui, &en, &oom, &[Suggestion::Checkpointing, Suggestion::SmallerBatch]) {
            clicked = Some(s);
        }
    });
    harness.get_by_label("Out of memory");
    harness.get_by_label_contains("GPU out of memory. Tried to allocate");
    harness.get_by_label_contains(&format!("asked for by {}", oom.op_label));
    xdg();
    harness.fit_contents();
    snapshot(&mut harness, "oom_panel");
    harness.get_by_label(&Suggestion::Checkpointing.label(&Catalog::new(Lang::En))).click();
    harness.run();
    drop(harness);
    assert_eq!(clicked, Some(Suggestion::Checkpointing));
}

#[test]
fn the_app_runs_a_step_and_a_suggestion_applies() {
    // A budget the default batch does not fit: the OOM panel shows, and one click fixes it.
    let settings =
        Settings { device: oomlab::app::DeviceSettings::with_budget(8 << 20), batch: 64, ..Settings::default() };
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    harness.get_by_label("Out of memory");
    harness.get_by_label(&Suggestion::Checkpointing.label(&Catalog::new(Lang::En))).click();
    harness.run();
    assert_eq!(harness.state().settings().checkpoint, Checkpoint::BLOCKS);

    // A setup that fits: one real step on the CPU backend, measured next to predicted.
    harness.state_mut().edit_settings(|s| *s = Settings::default());
    harness.run();
    assert!(harness.query_by_label("Out of memory").is_none());
    harness.get_by_label("One step").click();
    // The CPU step runs a few ops per frame (the UI never freezes): give it the frames.
    harness.run_steps(200);
    assert!(harness.state().is_idle(), "the step finished");
    let predicted = harness.state().shown.derived.predicted.clone().expect("a plan").expect("fits");
    let total = format_bytes(predicted.peak_allocated_bytes());
    assert_eq!(harness.get_all_by_label(&total).count(), 2, "measured = predicted after a real step");
    harness.get_by_label("Training").click();
    harness.run();
    harness.get_by_label_contains("Step 1: loss");
}

#[test]
fn url_state_round_trips_through_the_app_settings() {
    let s = Settings { batch: 96, accum: 3, checkpoint: Checkpoint::Selective, ..Settings::default() };
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), 58);
    assert_eq!((back, notice), (s, None));
}

/// The app's GPU path: a step is submitted and collected over frames (no frame waits for it),
/// and what the allocator measured equals the prediction.
#[test]
fn the_app_trains_on_the_gpu_without_blocking_a_frame() {
    xdg();
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter");
    let settings = Settings { precision: oomlab::plan::Precision::Fp16, ..Settings::default() };
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless_gpu(settings, ctx));
    harness.run_steps(2);
    harness.get_by_label("One step").click();
    let mut frames = 0;
    harness.step();
    while !harness.state().is_idle() {
        assert!(frames < 20_000, "the step never finished");
        harness.step();
        frames += 1;
    }
    assert!(frames >= 1, "the step completed within the frame that started it");
    harness.get_by_label("Training").click();
    harness.run_steps(2);
    harness.get_by_label_contains("Step 1: loss");
    let predicted = harness.state().shown.derived.predicted.clone().expect("a plan").expect("fits");
    let total = format_bytes(predicted.peak_allocated_bytes());
    harness.get_by_label("Breakdown").click();
    harness.run_steps(2);
    assert_eq!(harness.get_all_by_label(&total).count(), 2, "measured = predicted");
}

#[test]
fn exports_carry_the_same_numbers() {
    use oomlab::app::export;
    let plan = toy_plan(16);
    let memory = simulate(&plan, 1 << 30).expect("fits");
    // Timeline + allocator JSON.
    let op = memory.timeline[memory.peak_index].op;
    let doc: serde_json::Value =
        serde_json::from_str(&export::step_json(&plan, &memory, Source::Predicted, op)).expect("JSON");
    assert_eq!(doc["timeline"].as_array().map(Vec::len), Some(memory.timeline.len()));
    assert_eq!(doc["peak_allocated_bytes"], memory.peak_allocated_bytes());
    let allocated: u64 = doc["allocator"]["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .flat_map(|s| s["blocks"].as_array().cloned().unwrap_or_default())
        .filter(|b| !b["tensor"].is_null())
        .map(|b| b["size"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(allocated, memory.timeline[memory.peak_index].allocated_bytes);
    // Sweep CSV: a header and one row per batch size.
    let budget = 16 << 20;
    let points = [1, 8, 64].iter().map(|&b| (b, simulate_peak(&toy_plan(b), budget))).collect();
    let csv = export::sweep_csv(&[SweepSeries { name: "this setup".into(), points }]);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("config,batch,fits,peak_allocated_bytes"));
    assert_eq!(lines.len(), 4);
    assert!(lines[1].contains(",1,true,"));
    assert!(lines[3].contains(",64,false,") && lines[3].contains("out of memory"));
    // Every row has the header's columns (an OOM row once had one too few: its message sat in
    // the last category's column).
    let fields = csv::fields;
    for l in &lines {
        assert_eq!(fields(l), fields(lines[0]), "{l}");
    }
    assert!(lines[3].ends_with('"') && lines[0].ends_with(",oom"), "the message is in the oom column");
    // PNG.
    let image = egui::ColorImage::new([7, 3], vec![egui::Color32::RED; 21]);
    let bytes = export::png(&image).expect("png");
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let reader = decoder.read_info().expect("a PNG");
    assert_eq!((reader.info().width, reader.info().height), (7, 3));
}

/// Each optimizer state is its own row: AdamW's m and v (and fp32 master weights with mixed
/// precision) as multiples of the trainable weights.
#[test]
fn model_state_lists_each_optimizer_state() {
    let en = Catalog::new(Lang::En);
    let t = oomlab::plan::Techniques { precision: oomlab::plan::Precision::Bf16, ..Default::default() };
    let plan =
        Plan::build_with(&ModelConfig::toy(58), StepShape { batch: 4, seq: 64 }, &OptimizerConfig::default(), &t)
            .expect("plan");
    xdg();
    let mut harness = Harness::new_ui(|ui| views::model_state(ui, &en, &plan));
    harness.get_by_label("adam_m");
    harness.get_by_label("adam_v");
    harness.get_by_label("master_weights");
    // bf16 weights: m, v and master weights are 2× the 16-bit trainable weights each.
    assert_eq!(harness.get_all_by_label("2.00×").count(), 3);
    harness.get_by_label_contains("adamw keeps 2 optimizer state tensor(s) plus fp32 master weights: 6.0×");
    harness.fit_contents();
    snapshot(&mut harness, "model_state");
}

/// Projector mode: large type, white on black, the whole window.
#[test]
fn projector_mode_renders_the_whole_app() {
    xdg();
    let settings = Settings {
        prefs: oomlab::app::settings::Prefs { projector: true, ..Default::default() },
        ..Settings::default()
    };
    let mut harness = Harness::builder()
        .with_size([1280.0, 800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    harness.get_by_label("projector mode");
    assert!(harness.ctx.zoom_factor() > 1.0, "projector mode enlarges everything");
    snapshot(&mut harness, "app_projector");
}

/// The real-model view: the estimator's categories with sources, the verdict, the chart and the
/// claims; changing a control re-estimates without touching the toy.
#[test]
fn real_models_view_estimates_and_checks_claims() {
    xdg();
    let mut harness = Harness::builder()
        .with_size([1280.0, 1400.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    harness.get_by_label("Real models").click();
    harness.run();
    let e = harness.state().shown.estimate.estimate.clone().expect("the default estimates");
    assert!(e.fits());
    harness.get_by_label_contains(&format!("fits: {} of", format_bytes(e.peak_bytes)));
    harness.get_by_label_contains("LLaMA-2 7B: 6,738,415,616 parameters");
    let en = Catalog::new(Lang::En);
    for l in &e.lines {
        let name = oomlab::app::estimate_view::line_name(&en, l.category);
        assert!(harness.query_all_by_label(&name).count() >= 1, "{name}");
    }
    assert!(harness.query_all_by_label_contains("Korthikanti et al. 2022").count() >= 2, "the source and the claim");
    harness.get_by_label("Doubling the batch size raises memory 1.8–2.5×.");
    assert!(harness.get_all_by_label("breaks").count() >= 3);
    snapshot(&mut harness, "real_models");
    // The table alone: each category with its bytes.
    let real = oomlab::app::settings::real_model::EstimateSettings::default();
    let derived = oomlab::app::EstimateDerived::new(&real);
    let mut table = Harness::builder()
        .with_size([1100.0, 700.0])
        .build_ui(|ui| oomlab::app::estimate_view::view(ui, &en, &real, &derived));
    table.run();
    for l in &e.lines {
        let name = oomlab::app::estimate_view::line_name(&en, l.category);
        assert!(table.query_all_by_label(&name).count() >= 1, "{name}");
        assert!(table.query_all_by_label(&format_bytes(l.bytes)).count() >= 1, "{} bytes", l.category);
    }
    table.get_by_label(&format_bytes(e.peak_bytes));
    table.get_by_label(&format_bytes(e.get("activations")));
    // The estimate's export: the CLI's JSON document, with the same numbers.
    let dir = tempfile::tempdir().expect("tempdir");
    harness.state_mut().chrome.export_dir = Some(dir.path().to_path_buf());
    harness.get_by_label("estimate JSON").click();
    harness.run();
    let text = std::fs::read_to_string(dir.path().join("oomlab-estimate.json")).expect("exported");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["peak_bytes"], e.peak_bytes);
    assert_eq!(doc["per_gpu_bytes"]["activations"], e.get("activations"));
    assert_eq!(doc["max_micro_batch"], harness.state().shown.estimate.max_micro_batch);
    // ZeRO off: full Adam training of 7B does not fit on one A100 80 GB.
    let toy_plan_before = harness.state().shown.derived.plan.clone().expect("plan");
    harness.state_mut().edit_settings(|s| s.estimate.parallel.zero = 0);
    harness.state_mut().edit_settings(|s| s.estimate.parallel.data = 1);
    harness.run();
    harness.get_by_label_contains("out of memory: needs");
    assert_eq!(harness.state().shown.estimate.max_micro_batch, 0);
    let toy_plan_after = harness.state().shown.derived.plan.clone().expect("plan");
    assert!(std::sync::Arc::ptr_eq(&toy_plan_before, &toy_plan_after), "the toy is not rebuilt");
    // An impossible configuration says why.
    harness.state_mut().edit_settings(|s| s.estimate.parallel.tensor = 3);
    harness.run();
    harness.get_by_label_contains("cannot be estimated: tensor parallelism 3");
}

/// The language switch: the app in Chinese shows the catalog's words (the tabs, the title) with
/// the CJK font, keeps its settings, and switches back.
#[test]
fn the_app_switches_to_chinese_and_back() {
    xdg();
    let settings = Settings { batch: 3, ..Settings::default() };
    let mut harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings.clone()));
    harness.run();
    harness.get_by_label("Step timeline");
    harness.state_mut().set_lang(Lang::Zh);
    harness.run();
    for label in ["单步时间线", "显存与 batch 大小", "分配器视图", "真实模型", "设置", "优化技术", "对比", "单步"]
    {
        harness.get_by_label(label);
    }
    assert_eq!(harness.query_all_by_label("训练").count(), 2, "the Training tab and the Train button");
    harness.get_by_label_contains("计算引擎：CPU（参考实现）");
    for english in ["Setup", "Techniques", "Compare with", "One step", "Train"] {
        assert_eq!(harness.query_all_by_label(english).count(), 0, "{english} is left in English");
    }
    harness.get_by_label_contains("过大为何会导致显存溢出");
    assert_eq!(harness.query_all_by_label("Step timeline").count(), 0, "an English tab is left");
    assert_eq!(harness.state().settings(), &settings, "switching language keeps the settings");
    harness.get_by_label("真实模型").click();
    harness.run();
    harness.get_by_label_contains("LLaMA-2 7B：6,738,415,616 个参数");
    snapshot(&mut harness, "app_zh");
    harness.state_mut().set_lang(Lang::En);
    harness.run();
    harness.get_by_label("Real models");

    // Switching language mid-step keeps the step running; it finishes and counts as before.
    harness.get_by_label("Step timeline").click();
    harness.get_by_label("One step").click();
    harness.run_steps(2);
    assert!(!harness.state().is_idle(), "a CPU step runs over several frames");
    harness.state_mut().set_lang(Lang::Zh);
    harness.run_steps(200);
    assert!(harness.state().is_idle() && harness.state().steps_done() == 1, "the step finished after the switch");
    assert_eq!(harness.state().lang(), Lang::Zh);
}

/// The language is remembered: the app saves it beside the settings, and on the next start a
/// link's `lang=` wins over it, and it wins over the system's language.
#[test]
fn the_language_is_remembered_and_a_link_wins() {
    use eframe::App as _;
    use oomlab::app::lang::choose_lang;
    #[derive(Default)]
    struct Memory(std::collections::HashMap<String, String>);
    impl eframe::Storage for Memory {
        fn get_string(&self, key: &str) -> Option<String> {
            self.0.get(key).cloned()
        }
        fn set_string(&mut self, key: &str, value: String) {
            self.0.insert(key.into(), value);
        }
        fn remove_string(&mut self, key: &str) {
            self.0.remove(key);
        }
        fn flush(&mut self) {}
    }
    let mut app = OomlabApp::headless(Settings::default());
    let mut storage = Memory::default();
    app.save(&mut storage);
    assert_eq!(oomlab::app::store::stored_lang(&storage), Some(Lang::En));
    app.set_lang(Lang::Zh);
    app.save(&mut storage);
    assert_eq!(oomlab::app::store::stored_lang(&storage), Some(Lang::Zh));
    let stored = oomlab::app::store::stored_lang(&storage);
    assert_eq!(choose_lang(None, stored, Some(Lang::En)), Lang::Zh, "remembered over the system's");
    assert_eq!(choose_lang(Some(Lang::En), stored, None), Lang::En, "a link over the remembered");
    assert_eq!(choose_lang(None, None, Some(Lang::Zh)), Lang::Zh, "the system's (LANG, navigator.language)");
    assert_eq!(choose_lang(None, None, None), Lang::En);
    // The challenges passed are remembered beside it.
    app.teaching.remembered(vec!["halve".into()], true, true);
    app.save(&mut storage);
    let done: Option<Vec<String>> = eframe::get_value(&storage, "challenges_done");
    assert_eq!(done, Some(vec!["halve".to_string()]));
}

/// The keyboard, for a teacher at a projector: Space runs a step, B / Shift+B double and halve
/// the batch, P toggles present mode (colour-blind-safe colours), ? lists the shortcuts.
#[test]
fn keyboard_shortcuts_drive_the_app() {
    use egui::{Key, Modifiers};
    use oomlab::app::views::category_color;
    use oomlab::plan::Category;
    xdg();
    let mut harness = Harness::builder()
        .with_size([1280.0, 800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    let batch = harness.state().settings().batch;
    harness.key_press(Key::B);
    harness.run();
    assert_eq!(harness.state().settings().batch, batch * 2);
    harness.key_press_modifiers(Modifiers::SHIFT, Key::B);
    harness.key_press_modifiers(Modifiers::SHIFT, Key::B);
    harness.run();
    assert_eq!(harness.state().settings().batch, batch / 2);
    harness.key_press(Key::Space);
    harness.run_steps(200);
    assert_eq!(harness.state().steps_done(), 1, "Space ran one step");
    let usual = category_color(Category::Activations);
    harness.key_press(Key::P);
    harness.run();
    assert!(harness.state().settings().prefs.projector);
    assert_ne!(category_color(Category::Activations), usual, "present mode's colour-blind-safe palette");
    harness.key_press(Key::P);
    harness.run();
    assert_eq!(category_color(Category::Activations), usual);
    harness.key_press(Key::F);
    harness.run();
    harness.event(egui::Event::Text("?".into()));
    harness.run();
    // The window, and its title bar (named after it).
    assert!(harness.query_all_by_label("Keyboard shortcuts").count() >= 1);
    harness.get_by_label("Shift+B — halve the batch");
    harness.get_by_label_contains("Tab and Shift+Tab — move between the controls");
    // The same list from the "?" button, for a touch screen.
    harness.event(egui::Event::Text("?".into()));
    harness.run();
    assert!(harness.query_by_label("Keyboard shortcuts").is_none());
    harness.get_by_label("?").click();
    harness.run();
    assert!(harness.query_all_by_label("Keyboard shortcuts").count() >= 1, "the ? button opens the list");
    // A lesson: → opens the next chapter, R reveals it (with its real step), ← goes back.
    harness.get_by_label("Lessons").click();
    harness.run();
    harness.key_press(Key::ArrowRight);
    harness.run();
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(1));
    harness.key_press(Key::R);
    harness.run_steps(200);
    assert!(harness.state().teaching.lesson().is_some_and(|l| l.verdict.is_some()), "R revealed");
    harness.key_press(Key::ArrowLeft);
    harness.run();
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(0));
}
