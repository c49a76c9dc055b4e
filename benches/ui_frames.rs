//! Frame times of the whole app while it trains (a benchmark, not a test): the app is rendered
//! headless by egui_kittest — layout and tessellation of every frame, as on screen, without the
//! final rasterisation — on the CPU backend (a slice of the step's ops per frame) and on the GPU
//! backend (submit, then poll each frame). Reports p50/p95/max frame time and the frame rate
//! that allows; the target is 60 fps (16.7 ms) while a step runs.
//!
//! Then the Snapshot tab with a generated PyTorch snapshot of 450,000 trace events: frames while
//! the timeline is zoomed, panned and scrubbed (each scrub a new moment for "what held the
//! memory"), against the same 60 fps.
//!
//!   cargo bench --bench ui_frames            # (needs XDG_RUNTIME_DIR for the GPU part)
//! `cargo test` runs it as a short smoke run.

use std::time::Instant;

use egui_kittest::Harness;
use oomlab::app::settings::Settings;
use oomlab::app::{OomlabApp, Tab, views};
use oomlab::backend::gpu::GpuContext;

#[path = "../tests/support/pickle_gen.rs"]
mod pickle_gen;

/// Renders frames while the app trains: for `seconds`, or `frames` frames when `seconds` is 0.
fn measure(name: &str, app: OomlabApp, seconds: f64, frames: usize) {
    let mut harness =
        Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    harness.state_mut().start_training();
    let mut times = Vec::new();
    let start = Instant::now();
    while if seconds > 0.0 { start.elapsed().as_secs_f64() < seconds } else { times.len() < frames } {
        let t = Instant::now();
        harness.step();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let steps = harness.state().steps_done();
    report(&format!("{name}: {{}} frames while training ({steps} steps done)"), times);
}

/// p50, p95 and the longest of `times` (ms), after `what` (its `{}`: the number of frames).
fn report(what: &str, mut times: Vec<f64>) {
    let frames = times.len();
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "{}: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms → {:.0} fps at p95",
        what.replace("{}", &frames.to_string()),
        pick(0.5),
        pick(0.95),
        pick(1.0),
        1e3 / pick(0.95)
    );
}

/// Frames of the Snapshot tab over a snapshot of `events` events: each frame zooms in or out
/// over the timeline, drags it sideways, or scrubs to another event.
fn snapshot_tab(events: usize, seconds: f64, frames: usize) {
    let g = pickle_gen::generate(events, 1);
    let mut app = OomlabApp::headless(Settings::default());
    app.open_snapshot_bytes("large.pickle", &g.bytes);
    app.shown.tab = Tab::Snapshot;
    let mut harness =
        Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    let Some(rect) = views::marked(&harness.ctx, "snapshot-timeline") else {
        println!("snapshot tab: no timeline drawn ({:?})", harness.state().snapshot.error);
        return;
    };
    let centre = rect.center();
    let mut times = Vec::new();
    let start = Instant::now();
    let mut i = 0usize;
    while if seconds > 0.0 { start.elapsed().as_secs_f64() < seconds } else { times.len() < frames } {
        match i % 4 {
            // Zoom in and out about the middle (ten frames in, ten out).
            0 => {
                harness.hover_at(centre);
                let factor = if (i / 40).is_multiple_of(2) { 1.25 } else { 0.8 };
                harness.event(egui::Event::Zoom(factor));
            }
            // Drag sideways (pans the zoomed chart).
            1 => harness.drag_at(centre),
            2 => {
                harness.hover_at(centre + egui::vec2(if (i / 8).is_multiple_of(2) { 40.0 } else { -40.0 }, 0.0));
                harness.drop_at(centre);
            }
            // Scrub to another event: a new moment to group.
            _ => {
                if let Some(l) = harness.state_mut().snapshot.loaded.as_mut() {
                    l.selected = Some((i * 7919) % g.events);
                }
            }
        }
        let t = Instant::now();
        harness.step();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        i += 1;
    }
    report(&format!("snapshot tab, {} events: {{}} frames zoomed, panned and scrubbed", g.events), times);
}

fn main() {
    let seconds = if std::env::args().any(|a| a == "--bench") { 15.0 } else { 0.0 };
    measure("cpu backend", OomlabApp::headless(Settings::default()), seconds, 5);
    match pollster::block_on(GpuContext::new_headless()) {
        Ok(ctx) => measure("gpu backend", OomlabApp::headless_gpu(Settings::default(), ctx), seconds, 5),
        Err(e) => println!("gpu backend: no adapter ({e}); skipped"),
    }
    // The smoke run: a smaller snapshot, a few frames.
    if seconds > 0.0 {
        snapshot_tab(450_000, seconds, 0);
    } else {
        snapshot_tab(5_000, 0.0, 8);
    }
}
