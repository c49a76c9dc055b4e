//! The browser's CPU fallback off the page's thread (issue 17): the app drives the CPU backend
//! through the worker protocol (here over a thread, as `cpu_worker::ThreadTransport`; in the
//! browser over a Web Worker, checked by `web/browser-test.mjs webgl`). The page keeps drawing
//! while a step runs, shows how far the step has got, and ends with the step's result.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT as _, Queryable as _};
use oomlab::app::OomlabApp;
use oomlab::app::cpu_worker::ThreadTransport;
use oomlab::app::settings::{ModelDims, Settings};

#[test]
fn a_worker_step_shows_progress_while_the_page_keeps_drawing() {
    xdg();
    // A step long enough (hundreds of ms) for the worker to report progress several times.
    let settings = Settings {
        dims: ModelDims { d_model: 256, n_layers: 4, n_heads: 4, max_seq: 128 },
        seq: 128,
        batch: 16,
        device: oomlab::app::DeviceSettings::with_budget(1 << 30),
        ..Settings::default()
    };
    let app = OomlabApp::headless_worker(settings, Box::new(ThreadTransport::spawn()));
    let mut harness =
        Harness::builder().with_size([1280.0, 900.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run_steps(2);
    harness.get_by_label("engine: cpu (reference), in a background worker");
    harness.key_press(egui::Key::Space);
    let (mut frames_while_running, mut progress_seen) = (0, Vec::new());
    for _ in 0..200_000 {
        harness.step();
        if harness.state().steps_done() > 0 {
            break;
        }
        if !harness.state().is_idle() {
            frames_while_running += 1;
        }
        if let Some(text) = progress_line(&harness)
            && progress_seen.last() != Some(&text)
        {
            progress_seen.push(text);
        }
    }
    assert_eq!(harness.state().steps_done(), 1, "the worker's step came back");
    assert!(frames_while_running > 10, "the page drew only {frames_while_running} frames during the step");
    assert!(!progress_seen.is_empty(), "no progress shown");
    let ops: Vec<(usize, usize)> = progress_seen
        .iter()
        .filter_map(|t| {
            let rest = t.strip_prefix("step running: op ")?;
            let (done, total) = rest.split_once(" of ")?;
            Some((done.parse().ok()?, total.parse().ok()?))
        })
        .collect();
    assert_eq!(ops.len(), progress_seen.len(), "{progress_seen:?}");
    assert!(ops.windows(2).all(|w| w[0].0 < w[1].0) && ops.iter().all(|&(d, t)| d <= t), "{ops:?}");
    // Finished: no progress line, and the memory views read the worker's allocator record.
    harness.run_steps(2);
    assert!(progress_line(&harness).is_none());
}

/// The progress line, if the page shows one.
fn progress_line(harness: &Harness<'_, OomlabApp>) -> Option<String> {
    harness
        .root()
        .children_recursive()
        .filter_map(|n| {
            let node = n.accesskit_node();
            node.label().or(node.value())
        })
        .find(|t| t.starts_with("step running: op "))
}

/// The allocator's options cross the worker boundary with the step's techniques: the fragmented
/// toy (48 × 64 in 54 MiB) fits with expandable segments in the worker too, and the worker's
/// allocator record is the prediction's.
#[test]
fn the_allocators_options_reach_the_worker() {
    xdg();
    let mut device = oomlab::app::DeviceSettings::with_budget(54 << 20);
    device.allocator.expandable_segments = true;
    let settings = Settings { batch: 48, seq: 64, device, ..Settings::default() };
    let app = OomlabApp::headless_worker(settings, Box::new(ThreadTransport::spawn()));
    let mut harness =
        Harness::builder().with_size([1280.0, 900.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run_steps(2);
    harness.key_press(egui::Key::Space);
    for _ in 0..200_000 {
        harness.step();
        if harness.state().steps_done() > 0 || harness.state().run.oom.is_some() {
            break;
        }
    }
    assert!(harness.state().run.oom.is_none(), "the worker ran out of memory: its allocator lacked the option");
    assert_eq!(harness.state().steps_done(), 1, "the worker's step came back");
    let measured = harness.state().run.measured.clone().expect("the worker's record");
    let predicted = harness.state().shown.derived.predicted.clone().expect("a plan").expect("fits");
    assert_eq!(measured.timeline, predicted.timeline, "the worker's allocator is the prediction's");
    assert!(measured.stats.segments <= 2, "one segment per pool");
}
