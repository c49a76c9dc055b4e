//! Where steps run and how they are driven without blocking a frame: the executors (built
//! asynchronously), the step in flight, and what a finished step leaves behind.

use std::sync::Arc;

use super::cpu_worker::{CpuWorker, Polled};
use super::{Derived, OomlabApp, real};
use crate::backend::BackendError;
use crate::backend::cpu::CpuExecutor;
use crate::backend::gpu::{GpuContext, GpuExecutor, Kernels};
use crate::memory::device::DeviceFigures;
use crate::plan::{Phase, Plan};

/// eframe's wgpu configuration, with `SUBGROUP` requested where the adapter has it, so that the
/// app's device can run the subgroup GEMM (`GemmKind::Subgroup8`) like the CLI's.
#[cfg(not(target_arch = "wasm32"))]
pub fn wgpu_configuration() -> eframe::egui_wgpu::WgpuConfiguration {
    let mut config = eframe::egui_wgpu::WgpuConfiguration::default();
    if let eframe::egui_wgpu::WgpuSetup::CreateNew(create) = &mut config.wgpu_setup {
        let base = create.device_descriptor.clone();
        create.device_descriptor = Arc::new(move |adapter| {
            let mut desc = base(adapter);
            desc.required_features |= crate::backend::gpu::context::subgroup_feature(adapter);
            desc
        });
    }
    config
}

/// Something built asynchronously (pipelines, an executor): in the browser nothing may block a
/// frame, so it is spawned and looked at again each frame.
pub(super) enum Slot<T> {
    Empty,
    Building(futures_channel::oneshot::Receiver<Result<T, BackendError>>),
    Ready(T),
}

impl<T: 'static> Slot<T> {
    /// Starts building: spawned on the browser's event loop on the web; on native, run here
    /// (the device is local and the futures complete without waiting on a frame).
    pub(super) fn spawn(fut: impl std::future::Future<Output = Result<T, BackendError>> + 'static) -> Self {
        let (tx, rx) = futures_channel::oneshot::channel();
        #[cfg(target_arch = "wasm32")]
        wasm_bindgen_futures::spawn_local(async move {
            let _ = tx.send(fut.await);
        });
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = tx.send(pollster::block_on(fut));
        }
        Slot::Building(rx)
    }

    /// The value once built (None while building or empty); an error if building failed.
    pub(super) fn poll(&mut self) -> Result<Option<&mut T>, BackendError> {
        if let Slot::Building(rx) = self {
            match rx.try_recv() {
                Ok(Some(Ok(v))) => *self = Slot::Ready(v),
                Ok(Some(Err(e))) => {
                    *self = Slot::Empty;
                    return Err(e);
                }
                Ok(None) => return Ok(None),
                Err(_) => {
                    *self = Slot::Empty;
                    return Err(crate::model::ConfigError::Other("building was cancelled".into()).into());
                }
            }
        }
        Ok(match self {
            Slot::Ready(v) => Some(v),
            _ => None,
        })
    }
}

/// Where steps run.
pub(super) enum Compute {
    Gpu {
        ctx: Box<GpuContext>,
        kernels: Slot<Arc<Kernels>>,
        exec: Slot<Box<GpuExecutor>>,
    },
    /// The CPU backend on this thread, a few ops per frame.
    Cpu {
        exec: Option<Box<CpuExecutor<f32>>>,
    },
    /// The CPU backend in a worker (the browser's Web Worker, or a thread in tests).
    Worker {
        worker: Box<CpuWorker>,
    },
}

/// The CPU backend's name when it runs in a Web Worker (the log and the engine line say so).
pub const CPU_WORKER_NAME: &str = "cpu (reference, web worker)";

impl Compute {
    /// The CPU backend where it runs best: in the browser, in a Web Worker with its own wasm
    /// (built with SIMD), so the page keeps drawing — or, when no worker starts, on the page's
    /// thread; on native, on this thread in slices of each frame.
    pub(super) fn cpu() -> (Compute, String) {
        #[cfg(target_arch = "wasm32")]
        match super::cpu_worker::web_transport::WebTransport::spawn("./worker.js") {
            Ok(t) => {
                return (Compute::Worker { worker: Box::new(CpuWorker::new(Box::new(t))) }, CPU_WORKER_NAME.into());
            }
            Err(e) => log::warn!("oomlab: no CPU worker ({e}): steps run on the page's thread"),
        }
        (Compute::Cpu { exec: None }, crate::backend::cpu::CPU_NAME.into())
    }
}

impl OomlabApp {
    /// Compute on eframe's own wgpu device; the pipelines build in the background.
    pub(super) fn gpu(rs: &eframe::egui_wgpu::RenderState) -> Result<(Compute, String), BackendError> {
        // A WebGL adapter draws but has no compute shaders.
        if !rs.adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            let backend = rs.adapter.get_info().backend;
            return Err(
                crate::model::ConfigError::Other(format!("the {backend:?} adapter has no compute shaders")).into()
            );
        }
        let ctx = GpuContext::from_device(rs.device.clone(), rs.queue.clone(), rs.adapter.get_info())?;
        Ok(Self::gpu_on(ctx))
    }

    pub(super) fn gpu_on(ctx: GpuContext) -> (Compute, String) {
        let name = format!("gpu ({})", ctx.describe());
        let for_kernels = ctx.clone();
        let kernels = Slot::spawn(async move { Ok(crate::backend::gpu::executor::build_kernels(&for_kernels).await?) });
        (Compute::Gpu { ctx: Box::new(ctx), kernels, exec: Slot::Empty }, name)
    }

    /// Re-derives the views and drops the executor when the settings changed.
    pub(super) fn apply_settings(&mut self) {
        // A teacher link's locked and hidden controls keep their values, whatever changed them.
        self.restrictions.enforce(&mut self.settings);
        // The real-model view's part changes only its own estimate, never the toy's plan or
        // executor: it is brought up to date in `applied` on its own (no clone per frame).
        if let Some(applied) = &mut self.applied
            && applied.real != self.settings.real
        {
            self.real = real::RealDerived::new(&self.settings.real);
            applied.real = self.settings.real.clone();
        }
        if self.applied.as_ref() == Some(&self.settings) {
            return;
        }
        let vocab = self.dataset.tokenizer.vocab_size();
        let previous = std::mem::replace(&mut self.derived, Derived::empty());
        self.derived = Derived::reusing(&self.settings, vocab, self.applied.as_ref().map(|a| (a, previous)));
        self.applied = Some(self.settings.clone());
        // The scrubber starts at the peak.
        self.scrub = self.derived.predicted.as_ref().and_then(|p| p.as_ref().ok()).map_or(0, |m| m.peak_index);
        match &mut self.compute {
            Compute::Gpu { exec, .. } => {
                if !matches!(exec, Slot::Ready(e) if e.step_in_flight()) {
                    *exec = Slot::Empty;
                }
            }
            Compute::Cpu { exec } => {
                // A CPU step in progress is abandoned with its executor.
                *exec = None;
                self.step_started = None;
            }
            Compute::Worker { worker } => {
                // Its result, when it comes, is dropped.
                worker.reset();
                self.step_started = None;
            }
        }
        self.losses.clear();
        self.step_secs.clear();
        self.measured = None;
        self.device = DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_YET.into() };
        self.oom = None;
        self.error = None;
        self.update_link();
    }

    /// Makes the executor for the current plan if there is none; whether it is ready.
    pub(super) fn ensure_executor(&mut self) -> Result<bool, BackendError> {
        // Shared: this runs every frame while an executor is being made, and only making one
        // needs its own copy of the plan.
        let plan = match &self.derived.plan {
            Ok(p) => Arc::clone(p),
            Err(e) => return Err(crate::model::ConfigError::Other(e.clone()).into()),
        };
        let (seed, budget) = (self.settings.seed, self.settings.budget_bytes);
        match &mut self.compute {
            Compute::Gpu { ctx, kernels, exec } => {
                let kernels = match kernels.poll() {
                    Ok(Some(k)) => k,
                    Ok(None) => return Ok(false),
                    Err(e) => {
                        // The pipelines do not build on this device: the CPU backend runs the plan.
                        self.notices.push(super::Notice::msg("notice-no-gpu", &[("error", e.to_string().into())]));
                        (self.compute, self.backend) = Compute::cpu();
                        return self.ensure_executor();
                    }
                };
                if matches!(exec, Slot::Empty) {
                    let (ctx, kernels, plan) = ((**ctx).clone(), kernels.clone(), Plan::clone(&plan));
                    *exec = Slot::spawn(async move {
                        Ok(Box::new(GpuExecutor::with_budget(&ctx, &kernels, plan, seed, budget).await?))
                    });
                }
                Ok(exec.poll()?.is_some())
            }
            Compute::Cpu { exec } => {
                if exec.is_none() {
                    *exec = Some(Box::new(CpuExecutor::with_budget(Plan::clone(&plan), seed, budget)?));
                }
                Ok(true)
            }
            Compute::Worker { worker } => match worker.ensure(&plan, seed, budget, clock_secs()) {
                Err(BackendError::Config(e)) if e.to_string().starts_with(super::cpu_worker::WORKER_LOST) => {
                    self.lose_worker(&e.to_string());
                    self.ensure_executor()
                }
                other => other,
            },
        }
    }

    /// The worker died (its wasm did not load, or it crashed): steps run on this thread from now.
    fn lose_worker(&mut self, why: &str) {
        log::warn!("oomlab: {why}; steps run on the page's thread");
        self.compute = Compute::Cpu { exec: None };
        self.backend = crate::backend::cpu::CPU_NAME.into();
        self.step_started = None;
    }

    /// The worker's running step: (ops looked at, ops in the plan).
    pub(super) fn worker_progress(&self) -> Option<(usize, usize)> {
        match &self.compute {
            Compute::Worker { worker } => worker.progress(),
            _ => None,
        }
    }

    pub(super) fn fail(&mut self, e: BackendError) {
        self.training = false;
        match e {
            BackendError::OutOfMemory(oom) => self.oom = Some(oom),
            // A bug: its message goes in the translated frame, not the library's English one.
            BackendError::Internal(message) => {
                self.error = Some(super::Notice::msg("error-internal", &[("error", message.into())]));
            }
            other => {
                let key = match &other {
                    BackendError::Config(_) => "error-config",
                    BackendError::Gpu(_) => "error-gpu",
                    BackendError::HostMemory(_) => "error-host",
                    _ => "error-step",
                };
                self.error = Some(super::Notice::msg(key, &[("error", other.to_string().into())]));
            }
        }
    }

    /// Starts a step if none is running; advances or collects a running one. Never blocks: the
    /// GPU is polled, and a CPU step runs a few ops per frame (about [`CPU_SLICE_SECS`] of them).
    pub(super) fn drive(&mut self, now: f64, want_step: bool) {
        let cpu_figures = || DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_CPU.into() };
        let finished = match &mut self.compute {
            Compute::Gpu { exec: Slot::Ready(exec), .. } => {
                exec.poll_step().map(|r| (r, exec.memory().cloned(), exec.device_figures().clone()))
            }
            Compute::Cpu { exec: slot } if slot.as_ref().is_some_and(|e| e.running()) => {
                let start = clock_secs();
                // A panic in the CPU backend (a bug) is reported like a failed step and the
                // executor is dropped (it may be half-updated); the app keeps running.
                let slice = crate::backend::catch_panic(|| {
                    let exec = slot.as_mut()?;
                    let mut out = None;
                    while out.is_none() && clock_secs() - start < CPU_SLICE_SECS {
                        out = exec.resume(1);
                    }
                    out.map(|r| (r, exec.memory().cloned(), CpuExecutor::device_figures(exec)))
                });
                slice.unwrap_or_else(|e| {
                    *slot = None;
                    Some((Err(e), None, cpu_figures()))
                })
            }
            Compute::Worker { worker } if worker.step_in_flight() => match worker.poll() {
                Ok(Polled::Nothing) => None,
                Ok(Polled::Finished(Ok((loss, memory)))) => Some((Ok(loss), memory.map(|m| *m), cpu_figures())),
                Ok(Polled::Finished(Err(e))) => Some((Err(e), None, cpu_figures())),
                Err(e) => {
                    self.lose_worker(&e.to_string());
                    None
                }
            },
            _ => None,
        };
        if let Some((result, memory, device)) = finished {
            match result {
                Ok(loss) => {
                    self.losses.push(loss);
                    let secs = now - self.step_started.unwrap_or(now);
                    self.step_secs.push(secs);
                    self.measured = memory;
                    self.device = device;
                    self.check_challenge(secs);
                    let inside = match &self.compute {
                        Compute::Worker { worker } => worker
                            .last_compute_secs()
                            .map_or(String::new(), |w| format!("; {:.0} ms in the worker", w * 1e3)),
                        _ => String::new(),
                    };
                    log::info!(
                        "oomlab: step {} on {}: loss {loss:.4} ({:.0} ms{inside})",
                        self.losses.len(),
                        self.backend,
                        secs * 1e3
                    );
                    if let Some(left) = self.train_steps_left.as_mut() {
                        *left = left.saturating_sub(1);
                        if *left == 0 {
                            self.training = false;
                            self.train_steps_left = None;
                        }
                    }
                }
                Err(e) => self.fail(e),
            }
            self.step_started = None;
            // The settings changed while it ran: its executor is stale.
            if self.applied.as_ref() != Some(&self.settings) {
                self.apply_settings();
            }
        }
        // A click queues a step; training asks for the next one only once the last one finished
        // (and its count was checked).
        self.queued_step |= want_step || (self.training && self.step_started.is_none());
        if !self.queued_step || self.step_started.is_some() {
            return;
        }
        match self.ensure_executor() {
            Ok(true) => self.queued_step = false,
            // Pipelines or the executor are still being built: try again next frame.
            Ok(false) => return,
            Err(e) => {
                self.queued_step = false;
                return self.fail(e);
            }
        }
        let index = self.losses.len() as u64;
        // The worker makes the batch itself from the same corpus, seed and index.
        if let Compute::Worker { worker } = &mut self.compute {
            match worker.step(self.settings.seed, index) {
                Ok(()) => self.step_started = Some(now),
                Err(e) => self.lose_worker(&e.to_string()),
            }
            return;
        }
        let batch = match &self.derived.plan {
            Ok(p) => self.dataset.batch(p.batch_shape(), self.settings.seed, index),
            Err(e) => Err(crate::model::ConfigError::Other(e.clone())),
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => return self.fail(e.into()),
        };
        match &mut self.compute {
            Compute::Gpu { exec: Slot::Ready(exec), .. } => match exec.submit_step(&batch) {
                Ok(()) => self.step_started = Some(now),
                Err(e) => self.fail(e),
            },
            Compute::Gpu { .. } => {}
            Compute::Cpu { exec: Some(exec) } => match exec.upload_batch(&batch) {
                Ok(()) => {
                    exec.start_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
                    self.step_started = Some(now);
                }
                Err(e) => self.fail(e),
            },
            Compute::Cpu { exec: None } | Compute::Worker { .. } => {}
        }
    }
}

/// Compute time a CPU step gets per frame. Drawing the whole app takes ~4 ms (release build), so
/// 6 ms of ops keeps a frame under 16.7 ms (60 fps) — measured by `benches/ui_frames.rs`; 10 ms
/// gave 20 ms at the 95th percentile.
const CPU_SLICE_SECS: f64 = 0.006;

/// A monotonic clock in seconds, for the CPU path's per-frame time budget (egui's clock only
/// advances between frames).
fn clock_secs() -> f64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
    }
    #[cfg(target_arch = "wasm32")]
    {
        web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now() / 1e3)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::plan::Op;

    fn error_text(app: &OomlabApp) -> Option<String> {
        app.error.as_ref().map(|n| n.text(&crate::i18n::Catalog::new(crate::i18n::Lang::En)))
    }

    /// Drives `app` as frames would until no step is running (at most `frames` frames).
    fn drive_until_idle(app: &mut OomlabApp, frames: usize) {
        for i in 0..frames {
            app.drive(i as f64, false);
            if app.step_started.is_none() && !app.queued_step {
                return;
            }
        }
    }

    #[test]
    fn a_panicking_cpu_step_is_reported_and_the_next_step_runs() {
        let mut app = OomlabApp::headless(crate::app::Settings::default());
        app.apply_settings();
        // An executor for a plan whose first matrix product claims a depth 4× its tensors': the
        // CPU backend's bounds check panics in that op (a stand-in for a bug).
        let mut broken = Plan::clone(app.derived.plan.as_ref().expect("the default plan"));
        let product = broken.ops.iter_mut().find_map(|n| match &mut n.op {
            Op::Matmul(m) => Some(m),
            _ => None,
        });
        product.expect("a matmul").k *= 4;
        let exec = CpuExecutor::with_budget(broken, 0, crate::backend::UNLIMITED).expect("an executor");
        app.compute = Compute::Cpu { exec: Some(Box::new(exec)) };
        app.drive(0.0, true);
        assert!(app.step_started.is_some(), "the step started");
        drive_until_idle(&mut app, 10_000);
        let error = error_text(&app).expect("the failed step is reported");
        assert!(error.contains("internal error") && error.contains("gemm view out of bounds"), "{error}");
        assert!(matches!(app.compute, Compute::Cpu { exec: None }), "the broken executor is dropped");
        assert_eq!(app.steps_done(), 0);
        // The next step gets a fresh executor for the real plan, and trains.
        app.drive(1.0, true);
        drive_until_idle(&mut app, 10_000);
        assert_eq!(app.steps_done(), 1, "{:?}", error_text(&app));
    }
}
