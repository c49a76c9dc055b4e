//! The view audit: every view shows what its record says — before a step, after the first
//! (cold) step and after a warm one, on each engine the app has (the CPU backend on the app's
//! thread, the CPU backend in a worker as the browser runs it, and the GPU on lavapipe).
//!
//! Each view records the figures it draws as it draws them (`views::drawn`); the summary lines
//! it records are also looked up in the app's accessibility tree, so the record is what is on
//! screen. The figures are then checked against what they come from, computed here on their own:
//! the plan's prediction (`simulate`), the allocator's account of the real step (its timeline,
//! whose totals come from the allocator's counters and not from the event log the map replays),
//! the plan's tensor lifetimes (which tensors the map must hold at an op), the estimator and the
//! snapshot replay.

#[path = "support/one_step.rs"]
mod support_step;
#[path = "support/xdg.rs"]
mod support_xdg;
use support_step::one_step as step;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::cpu_worker::ThreadTransport;
use oomlab::app::settings::Settings;
use oomlab::app::views::drawn::{Drawn, MapDrawn};
use oomlab::app::views::{self, Source, live_tensors};
use oomlab::app::{OomlabApp, Tab};
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::{Trainer, gpu::GpuContext};
use oomlab::data::Dataset;
use oomlab::i18n::{Catalog, Lang};
use oomlab::memory::snapshot::{read, replay};
use oomlab::memory::{StepMemory, simulate, simulate_peak};
use oomlab::plan::Plan;

/// Where the app's steps run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Engine {
    Cpu,
    Worker,
    Gpu,
}

/// Before any step, after the first, after a second.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Before,
    Cold,
    Warm,
}

impl Phase {
    fn steps(self) -> usize {
        match self {
            Phase::Before => 0,
            Phase::Cold => 1,
            Phase::Warm => 2,
        }
    }
}

fn app(engine: Engine) -> OomlabApp {
    let settings = Settings::default();
    match engine {
        Engine::Cpu => OomlabApp::headless(settings),
        Engine::Worker => OomlabApp::headless_worker(settings, Box::new(ThreadTransport::spawn())),
        Engine::Gpu => {
            let ctx = GpuContext::new_headless_blocking().expect("a GPU adapter (lavapipe)");
            OomlabApp::headless_gpu(settings, ctx)
        }
    }
}

/// What the views' figures come from, computed here without the app.
struct Truth {
    plan: Plan,
    predicted: StepMemory,
    en: Catalog,
    /// The losses of the same steps on the CPU backend, run here.
    cpu_losses: Vec<f32>,
}

impl Truth {
    fn new() -> Self {
        let settings = Settings::default();
        let dataset = Dataset::builtin();
        let plan = settings.plan(dataset.tokenizer.vocab_size()).expect("the default plan");
        let predicted = simulate(&plan, settings.device.budget_bytes).expect("the default setup fits");
        let mut cpu =
            CpuExecutor::<f32>::with_budget(plan.clone(), settings.seed, settings.device.budget_bytes).expect("cpu");
        let cpu_losses = (0..2)
            .map(|i| {
                let batch = dataset.batch(plan.batch_shape(), settings.seed, i).expect("batch");
                cpu.train_step(&batch).expect("step")
            })
            .collect();
        Self { plan, predicted, en: Catalog::new(Lang::En), cpu_losses }
    }

    fn op_label(&self, op: Option<usize>) -> String {
        views::op_label(&self.en, &self.plan, op)
    }
}

/// Shows `tab` and returns what its view drew.
fn view(harness: &mut Harness<'_, OomlabApp>, tab: Tab, name: &str) -> Drawn {
    harness.state_mut().shown.tab = tab;
    harness.run_steps(3);
    views::drawn(&harness.ctx, name).unwrap_or_else(|| panic!("the {name} view recorded nothing"))
}

#[test]
fn every_view_shows_its_record_before_and_after_real_steps() {
    xdg();
    let truth = Truth::new();
    for engine in [Engine::Cpu, Engine::Worker, Engine::Gpu] {
        let mut harness = Harness::builder()
            .with_size([1280.0, 1000.0])
            .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app(engine));
        harness.run_steps(2);
        let snapshot_bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot/toy_default.pickle"),
        )
        .expect("fixture");
        harness.state_mut().open_snapshot_bytes("toy_default.pickle", &snapshot_bytes);
        for phase in [Phase::Before, Phase::Cold, Phase::Warm] {
            if phase != Phase::Before {
                step(&mut harness);
            }
            let what = format!("{engine:?}, {phase:?}");
            let measured = harness.state().run.measured.clone();
            assert_eq!(measured.is_some(), phase != Phase::Before, "{what}: a real step's record");
            // The record the memory views come from: the last real step's, else the plan's.
            let (memory, source) = match &measured {
                Some(m) => (m.clone(), Source::Allocator),
                None => (truth.predicted.clone(), Source::Predicted),
            };
            if let Some(m) = &measured {
                // Allocator (live) = predicted: the same bytes allocated at every op. The first
                // step reserves segments as the prediction does; a warm step finds them all
                // cached, so it holds the first step's peak throughout.
                let allocated = |m: &StepMemory| m.timeline.iter().map(|p| p.allocated.clone()).collect::<Vec<_>>();
                assert_eq!(allocated(m), allocated(&truth.predicted), "{what}: the step's bytes are the plan's");
                if phase == Phase::Cold {
                    assert_eq!(m.timeline, truth.predicted.timeline, "{what}: the first step's timeline is the plan's");
                } else {
                    let peak = truth.predicted.peak_reserved_bytes();
                    assert!(m.timeline.iter().all(|p| p.reserved_bytes == peak), "{what}: every segment cached");
                }
            }
            breakdown(&mut harness, &truth, measured.as_ref(), engine, &what);
            timeline(&mut harness, &truth, &memory, source, &what);
            sweep(&mut harness, &truth, &what);
            allocator_map(&mut harness, &truth, &memory, source, &what);
            training(&mut harness, &truth, phase, engine, &what);
            real_models(&mut harness, &what);
            snapshot(&mut harness, &snapshot_bytes, &memory, source, &what);
        }
    }
}

fn breakdown(
    harness: &mut Harness<'_, OomlabApp>,
    truth: &Truth,
    measured: Option<&StepMemory>,
    engine: Engine,
    what: &str,
) {
    let Drawn::Breakdown(b) = view(harness, Tab::Breakdown, "breakdown") else { panic!("{what}: breakdown") };
    let p = &truth.predicted;
    let want: Vec<(String, u64, Option<u64>)> = oomlab::plan::Category::ALL
        .iter()
        .filter(|&&c| p.peak_allocated.get(c) > 0 || measured.is_some_and(|m| m.peak_allocated.get(c) > 0))
        .map(|&c| (c.name().to_string(), p.peak_allocated.get(c), measured.map(|m| m.peak_allocated.get(c))))
        .collect();
    assert_eq!(b.rows, want, "{what}: the breakdown's rows");
    assert_eq!(b.predicted_total_bytes, p.peak_allocated_bytes(), "{what}");
    assert_eq!(b.predicted_reserved_bytes, p.peak_reserved_bytes(), "{what}");
    assert_eq!(b.allocator_total_bytes, measured.map(StepMemory::peak_allocated_bytes), "{what}");
    assert_eq!(b.allocator_reserved_bytes, measured.map(StepMemory::peak_reserved_bytes), "{what}");
    // The driver reports on the GPU after a real step: its segment buffers hold at least what
    // the allocator reserved (plus the driver's rounding).
    match (engine, measured) {
        (Engine::Gpu, Some(m)) => {
            let device = b.device_reserved_bytes.expect("the driver's figures after a GPU step");
            assert!(device >= m.peak_reserved_bytes() && device < m.peak_reserved_bytes() + (1 << 20), "{what}");
        }
        _ => assert_eq!(b.device_reserved_bytes, None, "{what}: no driver figures"),
    }
}

fn timeline(harness: &mut Harness<'_, OomlabApp>, truth: &Truth, memory: &StepMemory, source: Source, what: &str) {
    let Drawn::Timeline(t) = view(harness, Tab::Timeline, "timeline") else { panic!("{what}: timeline") };
    assert_eq!(t.source, source, "{what}: the timeline says where its figures come from");
    assert_eq!(t.points, truth.plan.ops.len() + 1, "{what}: a bar per op and the start");
    assert_eq!(t.peak_allocated_bytes, memory.peak_allocated_bytes(), "{what}");
    let peak = &memory.timeline[memory.peak_index];
    assert_eq!(t.peak_op, truth.op_label(peak.op), "{what}: the peak's op");
    // The scrubber starts at the peak.
    assert_eq!((t.scrub_op.as_str(), t.scrub_allocated_bytes), (t.peak_op.as_str(), peak.allocated_bytes), "{what}");
    assert_eq!(t.scrub_reserved_bytes, peak.reserved_bytes, "{what}");
    harness.get_by_label(&t.summary);
}

fn sweep(harness: &mut Harness<'_, OomlabApp>, truth: &Truth, what: &str) {
    let Drawn::Sweep(s) = view(harness, Tab::Sweep, "sweep") else { panic!("{what}: sweep") };
    let settings = Settings::default();
    assert_eq!((s.budget_bytes, s.current_batch), (settings.device.budget_bytes, settings.batch), "{what}");
    assert_eq!(s.series.len(), 1, "{what}: no overlays");
    let series = &s.series[0];
    // The current batch's point is the step's prediction; others are their own plans'.
    let at = |b: usize| series.points.iter().find(|(x, _)| *x == b).map(|(_, bytes)| *bytes);
    assert_eq!(at(settings.batch), Some(truth.predicted.peak_allocated_bytes()), "{what}: this batch's peak");
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    for b in [1, 7, 24] {
        let plan = settings.plan_with(vocab, b, &settings.techniques()).expect("builds");
        let want = simulate_peak(&plan, settings.device.budget_bytes).ok().map(|m| m.peak_allocated_bytes());
        assert_eq!(at(b), want, "{what}: batch {b}");
    }
    let (fits, oom) = (series.largest_fitting.expect("some fit"), series.first_oom.expect("some do not"));
    assert_eq!(fits + 1, oom, "{what}: the largest batch that fits is just below the first that does not");
    let plan_at = |b| settings.plan_with(vocab, b, &settings.techniques()).expect("builds");
    assert!(simulate_peak(&plan_at(fits), settings.device.budget_bytes).is_ok(), "{what}");
    assert!(simulate_peak(&plan_at(oom), settings.device.budget_bytes).is_err(), "{what}");
}

fn allocator_map(harness: &mut Harness<'_, OomlabApp>, truth: &Truth, memory: &StepMemory, source: Source, what: &str) {
    // At the peak (where the scrubber starts), then at the last op.
    let Drawn::AllocatorMap(at_peak) = view(harness, Tab::Allocator, "allocator-map") else { panic!("{what}") };
    assert_eq!(at_peak.source, source, "{what}: the map says where its segments come from");
    check_map(harness, truth, memory, memory.peak_index, &at_peak, what);
    let last = memory.timeline.len() - 1;
    harness.state_mut().shown.scrub = last;
    let Drawn::AllocatorMap(at_last) = view(harness, Tab::Allocator, "allocator-map") else { panic!("{what}") };
    check_map(harness, truth, memory, last, &at_last, what);
    // Back to the peak for the other views.
    harness.state_mut().shown.scrub = memory.peak_index;
}

/// The map at timeline point `at` against the timeline's totals (the allocator's counters) and
/// the plan's lifetimes: every segment reserved is drawn, and its blocks hold exactly the
/// tensors the plan has alive at that op.
fn check_map(
    harness: &Harness<'_, OomlabApp>,
    truth: &Truth,
    memory: &StepMemory,
    at: usize,
    map: &MapDrawn,
    what: &str,
) {
    let point = &memory.timeline[at];
    let what = format!("{what}, allocator map at {}", truth.op_label(point.op));
    assert_eq!(map.op, truth.op_label(point.op), "{what}: the op");
    assert!(!map.segments.is_empty(), "{what}: no segment drawn");
    let reserved: u64 = map.segments.iter().map(|s| s.size_bytes).sum();
    let allocated: u64 = map.segments.iter().map(|s| s.allocated_bytes).sum();
    assert_eq!((map.reserved_bytes, map.allocated_bytes), (reserved, allocated), "{what}: the totals add up");
    assert_eq!(reserved, point.reserved_bytes, "{what}: every reserved segment is drawn");
    assert_eq!(allocated, point.allocated_bytes, "{what}: every allocated block is drawn");
    let mut drawn: Vec<String> = map.segments.iter().flat_map(|s| s.tensors.iter().cloned()).collect();
    let mut alive: Vec<String> = live_tensors(&truth.plan, point.op).into_iter().map(|(name, _, _)| name).collect();
    drawn.sort();
    alive.sort();
    assert_eq!(drawn, alive, "{what}: the tensors in the blocks are those alive at the op");
    // Not by colour alone: blocks are named by their category where the name fits — each name
    // one of its segment's tensors' categories, and the widest blocks named.
    let en = Catalog::new(Lang::En);
    for s in &map.segments {
        let categories: Vec<String> = s
            .tensors
            .iter()
            .map(|n| truth.plan.tensors.iter().find(|t| &t.name == n).expect("a tensor"))
            .map(|t| views::category_name(&en, t.category))
            .collect();
        assert!(s.labels.iter().all(|l| categories.contains(l)), "{what}: {:?} in {categories:?}", s.labels);
    }
    assert!(map.segments.iter().any(|s| !s.labels.is_empty()), "{what}: no block named");
    harness.get_by_label(&map.summary);
}

fn training(harness: &mut Harness<'_, OomlabApp>, truth: &Truth, phase: Phase, engine: Engine, what: &str) {
    let Drawn::Training(t) = view(harness, Tab::Training, "training") else { panic!("{what}: training") };
    assert_eq!(t.steps, phase.steps(), "{what}: steps");
    assert_eq!(t.losses, harness.state().run.losses, "{what}: the losses the run recorded");
    let want = &truth.cpu_losses[..phase.steps()];
    match engine {
        // The CPU backend, here or in the worker: the same losses bit for bit.
        Engine::Cpu | Engine::Worker => assert_eq!(t.losses, want, "{what}"),
        Engine::Gpu => {
            for (gpu, cpu) in t.losses.iter().zip(want) {
                assert!((gpu - cpu).abs() < 1e-3 * cpu.abs(), "{what}: GPU loss {gpu} vs CPU {cpu}");
            }
        }
    }
    harness.get_by_label(&t.status);
    // The loss curve's description for a screen reader: its first and last loss, as drawn.
    let en = Catalog::new(Lang::En);
    let want = match (t.losses.first(), t.losses.last()) {
        (Some(first), Some(last)) => {
            let steps = if t.steps == 1 { "1 step:".to_string() } else { format!("{} steps:", t.steps) };
            vec![format!("{first:.4}"), format!("{last:.4}"), steps]
        }
        _ => vec![en.text("chart-loss-none")],
    };
    let described = chart_descriptions(harness);
    assert!(described.len() == 2 && want.iter().all(|w| described[0].contains(w.as_str())), "{what}: {described:?}");
    // The memory after each step: the run's record of every step, the last one the allocator's
    // account of the last step; its description quotes the first and last reserved.
    assert_eq!(t.memory, harness.state().run.times.memory, "{what}: the steps' memory the run recorded");
    assert_eq!(t.memory.len(), phase.steps(), "{what}: one mark per step");
    if let (Some(last), Some(m)) = (t.memory.last(), &harness.state().run.measured) {
        assert_eq!(
            (last.peak_allocated_bytes, last.reserved_bytes),
            (m.peak_allocated_bytes(), m.stats.reserved_bytes)
        );
    }
    let want = match (t.memory.first(), t.memory.last()) {
        (Some(first), Some(last)) => vec![
            oomlab::app::views::size(&en, first.reserved_bytes),
            oomlab::app::views::size(&en, last.reserved_bytes),
        ],
        _ => vec![en.text("chart-step-memory-none")],
    };
    assert!(want.iter().all(|w| described[1].contains(w.as_str())), "{what}: {described:?}");
}

/// The charts' descriptions a screen reader gets: the labels of the image nodes.
fn chart_descriptions(harness: &Harness<'_, OomlabApp>) -> Vec<String> {
    use egui_kittest::kittest::NodeT;
    harness.query_all_by_role(egui::Role::Image).filter_map(|n| n.accesskit_node().label()).collect()
}

fn real_models(harness: &mut Harness<'_, OomlabApp>, what: &str) {
    let Drawn::RealModels(r) = view(harness, Tab::RealModels, "real-models") else { panic!("{what}") };
    let setup = Settings::default().estimate.setup().expect("the default real-model setup");
    let e = oomlab::estimate::estimate(&setup).expect("an estimate");
    assert_eq!((r.peak_bytes, r.capacity_bytes, r.fits), (e.peak_bytes, e.capacity_bytes, e.fits()), "{what}");
    assert_eq!(r.lines.iter().map(|(_, b)| b).sum::<u64>(), e.peak_bytes, "{what}: the rows add up to the peak");
    assert_eq!(r.max_micro_batch, oomlab::estimate::max_micro_batch(&setup).expect("a maximum"), "{what}");
    harness.get_by_label(&r.verdict);
    // The micro-batch chart's description: the estimate's peak at this micro-batch, or, when it
    // does not fit, the GPU's capacity it exceeds.
    let en = Catalog::new(Lang::En);
    let figure = views::size(&en, if r.fits { r.peak_bytes } else { r.capacity_bytes });
    let described = chart_descriptions(harness);
    assert!(described.iter().any(|d| d.contains(&figure) && d.contains("batch")), "{what}: {figure} in {described:?}");
}

fn snapshot(harness: &mut Harness<'_, OomlabApp>, bytes: &[u8], toy: &StepMemory, source: Source, what: &str) {
    let Drawn::Snapshot(s) = view(harness, Tab::Snapshot, "snapshot") else { panic!("{what}: snapshot") };
    let snap = read::from_bytes(bytes).expect("the fixture reads");
    let r = replay::replay(&snap, 0, 0);
    assert_eq!(s.name, "toy_default.pickle");
    assert_eq!((s.peak_allocated_bytes as i64, s.peak_reserved_bytes as i64), (r.peak_allocated, r.peak_reserved));
    assert_eq!((s.events, s.segments), (r.events, snap.segments.len()), "{what}");
    let want = (source, toy.peak_allocated_bytes(), toy.peak_reserved_bytes());
    assert_eq!(s.toy, Some(want), "{what}: the toy's column");
    // The trace chart's description names the replayed peak and its event.
    let en = Catalog::new(Lang::En);
    let (peak, at) = (views::size(&en, r.peak_allocated as u64), r.peak_index.map_or(0, |i| i + 1));
    let described = chart_descriptions(harness);
    assert!(
        described.len() == 1 && described[0].contains(&peak) && described[0].contains(&format!("at event {at}")),
        "{what}: {peak} at event {at} in {described:?}"
    );
}
