//! Frame times of the whole app while it trains (a benchmark, not a test): the app is rendered
//! headless by egui_kittest — layout and tessellation of every frame, as on screen, without the
//! final rasterisation — on the CPU backend (a slice of the step's ops per frame) and on the GPU
//! backend (submit, then poll each frame). Reports p50/p95/max frame time and the frame rate
//! that allows; the target is 60 fps (16.7 ms) while a step runs.
//!
//!   cargo bench --bench ui_frames            # (needs XDG_RUNTIME_DIR for the GPU part)
//! `cargo test` runs it as a short smoke run.

use std::time::Instant;

use egui_kittest::Harness;
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::backend::gpu::GpuContext;

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
    let frames = times.len();
    let steps = harness.state().steps_done();
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "{name}: {frames} frames while training ({steps} steps done): p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms → {:.0} fps at p95",
        pick(0.5),
        pick(0.95),
        pick(1.0),
        1e3 / pick(0.95)
    );
}

fn main() {
    let seconds = if std::env::args().any(|a| a == "--bench") { 15.0 } else { 0.0 };
    measure("cpu backend", OomlabApp::headless(Settings::default()), seconds, 5);
    match pollster::block_on(GpuContext::new_headless()) {
        Ok(ctx) => measure("gpu backend", OomlabApp::headless_gpu(Settings::default(), ctx), seconds, 5),
        Err(e) => println!("gpu backend: no adapter ({e}); skipped"),
    }
}
