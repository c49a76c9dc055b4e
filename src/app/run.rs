//! The run: where steps execute and what they leave behind. It owns the executor — on eframe's
//! GPU, on this thread's CPU, or in the browser's CPU worker, each opened through
//! [`crate::backend::open`] — the step in flight, the losses and step times, and the last
//! step's allocator and device figures, out-of-memory or error. Steps are driven without
//! blocking a frame: a GPU step is submitted and polled, a CPU step runs a few ops per frame.

use std::sync::Arc;

use super::Notice;
use super::cpu_worker::{CpuWorker, Polled};
use super::slot::Slot;
use crate::backend::{BackendError, BackendKind, Executor, Gpu};
use crate::data::Dataset;
use crate::i18n::Catalog;
use crate::memory::device::DeviceFigures;
use crate::memory::{Budget, StepMemory, StepOom};
use crate::plan::{ConfigError, Phase, Plan};

/// Where steps run.
pub(super) enum Compute {
    /// In this process: on eframe's GPU (`gpu`: its pipelines, built in the background) or,
    /// without one, on the CPU backend a few ops per frame.
    Here { gpu: Option<Box<Slot<Gpu>>>, exec: Slot<Executor> },
    /// The CPU backend in a worker (the browser's Web Worker, or a thread in tests).
    Worker { worker: Box<CpuWorker> },
}

impl Compute {
    /// The CPU backend where it runs best: in the browser, in a Web Worker with its own wasm
    /// (built with SIMD), so the page keeps drawing — or, when no worker starts, on the page's
    /// thread; on native, on this thread in slices of each frame.
    fn cpu() -> (Compute, Engine) {
        #[cfg(target_arch = "wasm32")]
        match super::cpu_worker::web_transport::WebTransport::spawn("./worker.js") {
            Ok(t) => return (Compute::Worker { worker: Box::new(CpuWorker::new(Box::new(t))) }, Engine::CpuWorker),
            Err(e) => log::warn!("oomlab: no CPU worker ({e}): steps run on the page's thread"),
        }
        (Compute::Here { gpu: None, exec: Slot::Empty }, Engine::Cpu)
    }
}

/// Which engine runs the steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A GPU, by its adapter's own description.
    Gpu { adapter: String },
    /// The CPU backend on the app's thread.
    Cpu,
    /// The CPU backend in the browser's Web Worker.
    CpuWorker,
}

impl Engine {
    /// As the log and the CLI write it: "gpu (Vulkan, llvmpipe …)", "cpu (reference)".
    pub fn log_name(&self) -> String {
        match self {
            Engine::Gpu { adapter } => format!("gpu ({adapter})"),
            Engine::Cpu => crate::backend::cpu::CPU_NAME.into(),
            Engine::CpuWorker => "cpu (reference, web worker)".into(),
        }
    }

    /// In the reader's language (a GPU by its adapter's own name).
    pub fn label(&self, t: &Catalog) -> String {
        match self {
            Engine::Gpu { .. } => self.log_name(),
            Engine::Cpu => t.text("backend-cpu"),
            Engine::CpuWorker => t.text("backend-cpu-worker"),
        }
    }
}

/// The executor, the step in flight and what the steps left behind.
pub struct Run {
    compute: Compute,
    pub engine: Engine,
    /// The built-in corpus the batches come from.
    dataset: Dataset,
    /// Steps follow each other until stopped.
    pub training: bool,
    /// A step was asked for and waits for the executor.
    queued_step: bool,
    /// Stop training after this many more steps (scripted runs).
    train_steps_left: Option<usize>,
    /// The losses of the steps since the settings last changed, and how long each took (with
    /// every setup's recent times: offload's cost is its time beside the time without it).
    pub losses: Vec<f32>,
    pub times: super::timing::StepTimes,
    /// When the step in flight started (egui time, seconds).
    step_started: Option<f64>,
    /// The settings changed while a GPU step was in flight: its result belongs to the old ones.
    stale: bool,
    /// The allocator's live account of the last step run (the "allocator" figures); with
    /// several simulated GPUs, GPU 0's.
    pub measured: Option<StepMemory>,
    /// The other simulated GPUs' accounts of the last step (GPU 1, 2, …; empty on one GPU).
    pub other_ranks: Vec<StepMemory>,
    /// What the driver layer reported after the last step (the "device" figures).
    pub device: DeviceFigures,
    /// The engine's out-of-memory, when a real step did not fit; any other failure.
    pub oom: Option<Box<StepOom>>,
    pub error: Option<Notice>,
}

/// A step that finished and was recorded.
pub struct Finished {
    pub secs: f64,
}

fn not_reported_yet() -> DeviceFigures {
    DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_YET.into() }
}

impl Run {
    fn with(compute: Compute, engine: Engine) -> Self {
        Self {
            compute,
            engine,
            dataset: Dataset::builtin(),
            training: false,
            queued_step: false,
            train_steps_left: None,
            losses: Vec::new(),
            times: Default::default(),
            step_started: None,
            stale: false,
            measured: None,
            other_ranks: Vec::new(),
            device: not_reported_yet(),
            oom: None,
            error: None,
        }
    }

    /// Steps on eframe's own wgpu device when it can compute (its pipelines build in the
    /// background); else on the CPU backend, with a notice saying why.
    pub fn for_render_state(rs: Option<&eframe::egui_wgpu::RenderState>, notices: &mut Vec<Notice>) -> Self {
        let Some(rs) = rs else {
            notices.push(Notice::msg("notice-webgl", &[]));
            return Self::cpu();
        };
        // A WebGL adapter draws but has no compute shaders.
        if rs.adapter.get_info().backend == wgpu::Backend::Gl {
            notices.push(Notice::msg("notice-webgl", &[]));
            return Self::cpu();
        }
        if !rs.adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            let error = crate::backend::gpu::GpuError::NoCompute(format!("{:?}", rs.adapter.get_info().backend));
            notices.push(Notice::msg("notice-no-gpu", &[("error", BackendError::from(error).into())]));
            return Self::cpu();
        }
        match crate::backend::gpu::GpuContext::from_device(rs.device.clone(), rs.queue.clone(), rs.adapter.get_info()) {
            Ok(ctx) => Self::gpu(ctx),
            Err(e) => {
                notices.push(Notice::msg("notice-no-gpu", &[("error", BackendError::from(e).into())]));
                Self::cpu()
            }
        }
    }

    /// Steps on `ctx`'s device; its pipelines build in the background.
    pub fn gpu(ctx: crate::backend::gpu::GpuContext) -> Self {
        let engine = Engine::Gpu { adapter: ctx.describe() };
        let gpu = Box::new(Slot::spawn(Gpu::new(ctx)));
        Self::with(Compute::Here { gpu: Some(gpu), exec: Slot::Empty }, engine)
    }

    /// Steps on the CPU backend where it runs best (the browser's worker, else this thread).
    pub fn cpu() -> Self {
        let (compute, engine) = Compute::cpu();
        Self::with(compute, engine)
    }

    /// Steps on the CPU backend on this thread (tests, and the desktop without a GPU).
    pub fn cpu_here() -> Self {
        Self::with(Compute::Here { gpu: None, exec: Slot::Empty }, Engine::Cpu)
    }

    /// Steps in a CPU worker reached through `transport` (tests: the browser's Web Worker
    /// path, over a thread).
    pub fn worker(transport: Box<dyn super::cpu_worker::Transport>) -> Self {
        Self::with(Compute::Worker { worker: Box::new(CpuWorker::new(transport)) }, Engine::CpuWorker)
    }

    /// The vocabulary of the corpus the batches come from.
    pub fn vocab(&self) -> usize {
        self.dataset.tokenizer.vocab_size()
    }

    /// Training steps completed since the settings last changed.
    pub fn steps_done(&self) -> usize {
        self.losses.len()
    }

    /// What the last real step left: its out-of-memory error, else the allocator's record.
    pub fn record(&self) -> Option<StepRecord<'_>> {
        self.oom.as_deref().map(StepRecord::OutOfMemory).or(self.measured.as_ref().map(StepRecord::Ran))
    }

    /// Whether no step is running or waiting to run.
    pub fn is_idle(&self) -> bool {
        self.step_started.is_none() && !self.queued_step && !self.training
    }

    /// Whether a step is running or waiting to run (the app then asks for frames).
    pub fn busy(&self) -> bool {
        self.training || self.step_started.is_some() || self.queued_step
    }

    /// Whether a step runs in the worker (frames then come about every 50 ms, not continuously).
    pub fn stepping_in_worker(&self) -> bool {
        self.step_started.is_some() && matches!(self.compute, Compute::Worker { .. })
    }

    /// Trains `steps` steps, then stops (scripted runs: the desktop and browser tests, demos).
    pub fn train_for(&mut self, steps: usize) {
        if steps > 0 {
            self.train_steps_left = Some(steps);
            self.training = true;
        }
    }

    /// The worker's running step: (ops looked at, ops in the plan).
    pub fn worker_progress(&self) -> Option<(usize, usize)> {
        match &self.compute {
            Compute::Worker { worker } => worker.progress(),
            _ => None,
        }
    }

    /// The settings changed: the executor and every result of the old settings go. A GPU step
    /// in flight finishes first (its result is then dropped); a CPU step is abandoned.
    pub fn settings_changed(&mut self) {
        match &mut self.compute {
            Compute::Here { exec, .. } => match exec {
                Slot::Ready(Executor::Gpu(e)) if e.step_in_flight() => self.stale = true,
                Slot::Ready(Executor::GpuCluster(e)) if e.step_in_flight() => self.stale = true,
                _ => {
                    *exec = Slot::Empty;
                    self.step_started = None;
                }
            },
            Compute::Worker { worker } => {
                // Its result, when it comes, is dropped.
                worker.reset();
                self.step_started = None;
            }
        }
        self.losses.clear();
        (self.times.step_secs, self.times.memory) = (Vec::new(), Vec::new());
        self.measured = None;
        self.device = not_reported_yet();
        self.oom = None;
        self.error = None;
    }

    /// Makes the executor for `plan` if there is none; whether it is ready.
    fn ensure_executor(
        &mut self,
        plan: &Arc<Plan>,
        seed: u64,
        budget: Budget,
        notices: &mut Vec<Notice>,
    ) -> Result<bool, BackendError> {
        match &mut self.compute {
            Compute::Here { gpu, exec } => {
                let (kind, on) = match gpu {
                    None => (BackendKind::Cpu, None),
                    Some(slot) => match slot.poll() {
                        Ok(Some(g)) => (BackendKind::Gpu, Some(g.clone())),
                        Ok(None) => return Ok(false),
                        Err(e) => {
                            // The pipelines do not build on this device: the CPU backend runs the plan.
                            notices.push(Notice::msg("notice-no-gpu", &[("error", e.to_string().into())]));
                            (self.compute, self.engine) = Compute::cpu();
                            return self.ensure_executor(plan, seed, budget, notices);
                        }
                    },
                };
                if matches!(exec, Slot::Empty) {
                    // Only making an executor needs its own copy of the plan.
                    let plan = Plan::clone(plan);
                    *exec =
                        Slot::spawn(async move { crate::backend::open(kind, on.as_ref(), plan, seed, budget).await });
                }
                Ok(exec.poll()?.is_some())
            }
            Compute::Worker { worker } => match worker.ensure(&plan.request(), seed, budget, clock_secs()) {
                Err(BackendError::WorkerLost(why)) => {
                    self.lose_worker(&why);
                    self.ensure_executor(plan, seed, budget, notices)
                }
                other => other,
            },
        }
    }

    /// The worker died (its wasm did not load, or it crashed): steps run on this thread from now.
    fn lose_worker(&mut self, why: &dyn std::fmt::Display) {
        log::warn!("oomlab: the CPU worker stopped ({why}); steps run on the page's thread");
        self.compute = Compute::Here { gpu: None, exec: Slot::Empty };
        self.engine = Engine::Cpu;
        self.step_started = None;
    }

    /// Records a step that failed: training stops, and the error is what the main area shows
    /// (an out-of-memory error as the OOM panel; any other in the reader's language).
    pub fn fail(&mut self, e: BackendError) {
        (self.training, self.train_steps_left) = (false, None);
        match e {
            // The failed step's record is its error: an earlier step's account no longer shows.
            BackendError::OutOfMemory(oom) => (self.oom, self.measured) = (Some(oom), None),
            // A bug: its message goes in the translated frame, not the library's English one.
            BackendError::Internal(message) => {
                self.error = Some(Notice::msg("error-internal", &[("error", message.into())]));
            }
            BackendError::Config(e) => self.error = Some(Notice::msg("error-config", &[("error", Notice::Config(e))])),
            BackendError::HostMemory(h) => self.error = Some(Notice::msg("error-host", &[("error", Notice::Host(h))])),
            other => {
                let gpu = matches!(other, BackendError::Gpu(_) | BackendError::NoGpu);
                self.error =
                    Some(Notice::msg(if gpu { "error-gpu" } else { "error-step" }, &[("error", other.into())]));
            }
        }
    }

    /// Starts a step if none is running (`want_step`, or training); advances or collects a
    /// running one. Never blocks: the GPU is polled, and a CPU step runs a few ops per frame
    /// (about [`CPU_SLICE_SECS`] of them). Returns the step that finished this frame, if any.
    pub fn drive(
        &mut self,
        now: f64,
        want_step: bool,
        plan: &Result<Arc<Plan>, ConfigError>,
        seed: u64,
        budget: Budget,
        notices: &mut Vec<Notice>,
    ) -> Option<Finished> {
        let finished = self.collect(now);
        // A click queues a step; training asks for the next one only once the last one finished
        // (and its count was checked).
        self.queued_step |= want_step || (self.training && self.step_started.is_none());
        if self.queued_step && self.step_started.is_none() {
            self.start_step(now, plan, seed, budget, notices);
        }
        finished
    }

    /// Advances the step in flight; records it once it has finished.
    fn collect(&mut self, now: f64) -> Option<Finished> {
        let cpu_figures = || DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_CPU.into() };
        let result = match &mut self.compute {
            Compute::Here { exec: Slot::Ready(Executor::Gpu(exec)), .. } => {
                exec.poll_step().map(|r| (r, exec.memory().cloned(), exec.device_figures().clone(), Vec::new()))
            }
            Compute::Here { exec: Slot::Ready(Executor::GpuCluster(exec)), .. } => exec.poll_step().map(|r| {
                let (first, ranks) = first_and_others(exec.memories());
                let device = exec.ranks().first().map_or_else(cpu_figures, |e| e.device_figures().clone());
                (r, first, device, ranks)
            }),
            Compute::Here { exec: slot @ Slot::Ready(Executor::Cpu(_) | Executor::CpuCluster(_)), .. } => {
                let Slot::Ready(ready) = slot else { return None };
                let exec = ready.sliced()?;
                if !exec.running() {
                    return None;
                }
                let start = clock_secs();
                // A panic in the CPU backend (a bug) is reported like a failed step and the
                // executor is dropped (it may be half-updated); the app keeps running.
                let sliced = crate::backend::catch_panic(|| {
                    let mut out = None;
                    while out.is_none() && clock_secs() - start < CPU_SLICE_SECS {
                        out = exec.resume(1);
                    }
                    out.map(|r| {
                        let (first, ranks) = first_and_others(exec.rank_memories());
                        (r, first, cpu_figures(), ranks)
                    })
                });
                sliced.unwrap_or_else(|e| {
                    *slot = Slot::Empty;
                    Some((Err(e), None, cpu_figures(), Vec::new()))
                })
            }
            Compute::Worker { worker } if worker.step_in_flight() => match worker.poll() {
                Ok(Polled::Nothing) => None,
                Ok(Polled::Finished(Ok((loss, memory, ranks)))) => {
                    Some((Ok(loss), memory.map(|m| *m), cpu_figures(), ranks))
                }
                Ok(Polled::Finished(Err(e))) => Some((Err(e), None, cpu_figures(), Vec::new())),
                Err(e) => {
                    self.lose_worker(&e.to_string());
                    None
                }
            },
            _ => None,
        };
        let (result, memory, device, ranks) = result?;
        let started = self.step_started.take();
        if std::mem::take(&mut self.stale) {
            // A step of settings that have changed since: its executor and result go.
            if let Compute::Here { exec, .. } = &mut self.compute {
                *exec = Slot::Empty;
            }
            return None;
        }
        let loss = match result {
            Ok(loss) => loss,
            Err(e) => {
                self.fail(e);
                return None;
            }
        };
        let secs = now - started.unwrap_or(now);
        self.losses.push(loss);
        self.times.record(secs);
        self.measured = memory;
        self.other_ranks = ranks;
        self.device = device;
        let inside = match &self.compute {
            Compute::Worker { worker } => {
                worker.last_compute_secs().map_or(String::new(), |w| format!("; {:.0} ms in the worker", w * 1e3))
            }
            _ => String::new(),
        };
        let n = self.other_ranks.len() + 1;
        let ranks = if n > 1 { format!(", {n} simulated GPUs") } else { String::new() };
        log::info!(
            "oomlab: step {} on {}{ranks}: loss {loss:.4} ({:.0} ms{inside})",
            self.losses.len(),
            self.engine.log_name(),
            secs * 1e3
        );
        if let Some(left) = self.train_steps_left.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.training = false;
                self.train_steps_left = None;
            }
        }
        Some(Finished { secs })
    }

    /// Starts the queued step once the executor is ready (it may take frames to build).
    fn start_step(
        &mut self,
        now: f64,
        plan: &Result<Arc<Plan>, ConfigError>,
        seed: u64,
        budget: Budget,
        notices: &mut Vec<Notice>,
    ) {
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                self.queued_step = false;
                return self.fail(e.clone().into());
            }
        };
        match self.ensure_executor(plan, seed, budget, notices) {
            Ok(true) => self.queued_step = false,
            // Pipelines or the executor are still being built: try again next frame.
            Ok(false) => return,
            Err(e) => {
                self.queued_step = false;
                return self.fail(e);
            }
        }
        self.times.begin(plan, &self.engine.log_name());
        let index = self.losses.len() as u64;
        // The worker makes the batch itself from the same corpus, seed and index.
        if let Compute::Worker { worker } = &mut self.compute {
            match worker.step(seed, index) {
                Ok(()) => self.step_started = Some(now),
                Err(e) => self.lose_worker(&e.to_string()),
            }
            return;
        }
        let (b, shape, cap) = (plan.techniques.batching, plan.global_batch_shape(), plan.model.seq_len);
        let batch = crate::documents::batch_for(&self.dataset, b, shape, cap, seed, index).map_err(BackendError::from);
        // Padded and bucketed batches bring their own length: the executor goes on at it.
        let batch = match (batch, &mut self.compute) {
            (Ok(b), Compute::Here { exec: Slot::Ready(ready), .. }) => ready.follow(plan, &b).map(|()| b),
            (other, _) => other,
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => return self.fail(e),
        };
        let started = match &mut self.compute {
            Compute::Here { exec: Slot::Ready(Executor::Gpu(exec)), .. } => exec.submit_step(&batch),
            Compute::Here { exec: Slot::Ready(Executor::GpuCluster(exec)), .. } => exec.submit_step(&batch),
            Compute::Here { exec: Slot::Ready(ready @ (Executor::Cpu(_) | Executor::CpuCluster(_))), .. } => {
                match ready.sliced() {
                    Some(exec) => exec.upload(&batch).map(|()| {
                        exec.start(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
                    }),
                    None => return,
                }
            }
            _ => return,
        };
        match started {
            Ok(()) => self.step_started = Some(now),
            Err(e) => self.fail(e),
        }
    }
}

/// GPU 0's account of a step and the other simulated GPUs'.
fn first_and_others(all: Vec<&StepMemory>) -> (Option<StepMemory>, Vec<StepMemory>) {
    let mut all = all.into_iter().cloned();
    (all.next(), all.collect())
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

/// What a real step left: its allocator record, or its out-of-memory error (what a lesson's
/// reveal reads its answer from).
pub enum StepRecord<'a> {
    Ran(&'a crate::memory::StepMemory),
    OutOfMemory(&'a crate::memory::StepOom),
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::app::Settings;
    use crate::backend::cpu::CpuExecutor;
    use crate::model::ShapeError;
    use crate::plan::Op;

    fn error_text(run: &Run) -> Option<String> {
        run.error.as_ref().map(|n| n.text(&crate::i18n::Catalog::new(crate::i18n::Lang::En)))
    }

    /// Drives `run` as frames would until no step is running (at most `frames` frames).
    fn drive_until_idle(run: &mut Run, plan: &Result<Arc<Plan>, ConfigError>, frames: usize) {
        for i in 0..frames {
            run.drive(i as f64, false, plan, 0, Budget::Unlimited, &mut Vec::new());
            if run.step_started.is_none() && !run.queued_step {
                return;
            }
        }
    }

    #[test]
    fn a_panicking_cpu_step_is_reported_and_the_next_step_runs() {
        let mut run = Run::cpu_here();
        let plan = Settings::default().plan(run.vocab()).map(Arc::new);
        // An executor for a plan whose first matrix product claims a depth 4× its tensors': the
        // CPU backend's bounds check panics in that op (a stand-in for a bug).
        let mut broken = Plan::clone(plan.as_ref().expect("the default plan"));
        let product = broken.ops.iter_mut().find_map(|n| match &mut n.op {
            Op::Matmul(m) => Some(m),
            _ => None,
        });
        product.expect("a matmul").k *= 4;
        let exec = CpuExecutor::with_budget(broken, 0, Budget::Unlimited).expect("an executor");
        run.compute = Compute::Here { gpu: None, exec: Slot::Ready(Executor::Cpu(Box::new(exec))) };
        run.drive(0.0, true, &plan, 0, Budget::Unlimited, &mut Vec::new());
        assert!(run.step_started.is_some(), "the step started");
        drive_until_idle(&mut run, &plan, 10_000);
        let error = error_text(&run).expect("the failed step is reported");
        assert!(error.contains("internal error") && error.contains("gemm view out of bounds"), "{error}");
        assert!(matches!(run.compute, Compute::Here { exec: Slot::Empty, .. }), "the broken executor is dropped");
        assert_eq!(run.steps_done(), 0);
        // The next step gets a fresh executor for the real plan, and trains.
        run.drive(1.0, true, &plan, 0, Budget::Unlimited, &mut Vec::new());
        drive_until_idle(&mut run, &plan, 10_000);
        assert_eq!(run.steps_done(), 1, "{:?}", error_text(&run));
    }

    #[test]
    fn a_plan_that_cannot_be_built_is_a_typed_error() {
        let mut run = Run::cpu_here();
        let plan = Err(ConfigError::Shape(ShapeError::HeadsDontDivide { d_model: 65, n_heads: 4 }));
        run.drive(0.0, true, &plan, 0, Budget::Unlimited, &mut Vec::new());
        assert!(run.is_idle() && run.steps_done() == 0);
        let error = error_text(&run).expect("said");
        assert!(error.contains("must be divisible by n_heads"), "{error}");
    }
}
