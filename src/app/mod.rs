//! The eframe app: controls on the left; the views of the plan's prediction and of the steps the
//! engine runs on the right. It draws what the plan and the allocator say and computes no memory
//! itself. Steps run on eframe's own wgpu device without blocking a frame (submit, then poll
//! each frame until the readback arrives); without a usable GPU the CPU backend runs the same
//! plan, and the app says so.

pub mod export;
pub mod real;
pub mod settings;
pub mod views;

use std::sync::Arc;

use egui::{Color32, RichText};

use crate::backend::BackendError;
use crate::backend::cpu::CpuExecutor;
use crate::backend::gpu::{GpuContext, GpuExecutor, Kernels};
use crate::data::Dataset;
use crate::memory::device::DeviceFigures;
use crate::memory::{StepMemory, StepOom, simulate, simulate_peak};
use crate::plan::{AttentionKind, Checkpoint, OptimizerKind, Phase, Plan, Precision, Techniques};
use crate::units::format_bytes;
use settings::{BUDGET_PRESETS, MAX_BATCH, Preset, Settings};
use views::{Source, Suggestion, SweepSeries};

/// The batch sizes of the memory-vs-batch chart.
pub const SWEEP_BATCHES: [usize; 20] =
    [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];

/// What the views show, derived from the settings whenever they change.
pub struct Derived {
    /// Shared, so a frame can hold it while it draws without copying the plan.
    pub plan: Result<Arc<Plan>, String>,
    /// The plan replayed through the allocator under the budget.
    pub predicted: Result<StepMemory, Box<StepOom>>,
    pub sweep: Vec<SweepSeries>,
}

impl Derived {
    pub fn new(settings: &Settings, vocab: usize) -> Self {
        let plan = settings.plan(vocab).map(Arc::new).map_err(|e| e.to_string());
        let predicted = match &plan {
            Ok(p) => simulate(p, settings.budget_bytes),
            Err(e) => Err(Box::new(StepOom {
                tensor: crate::plan::TensorId(0),
                tensor_name: String::new(),
                category: crate::plan::Category::Workspace,
                op: None,
                op_label: String::new(),
                error: crate::memory::OutOfMemory {
                    requested_bytes: 0,
                    tried_bytes: 0,
                    capacity_bytes: 0,
                    free_bytes: 0,
                    allocated_bytes: 0,
                    reserved_bytes: 0,
                    cached_free_bytes: 0,
                    largest_free_block: 0,
                },
                message: e.clone(),
            })),
        };
        let mut configs = vec![("this setup".to_string(), settings.techniques())];
        configs.extend(settings.overlays.iter().map(|t| (t.describe(), *t)));
        let sweep = configs
            .into_iter()
            .map(|(name, t)| SweepSeries {
                name,
                points: SWEEP_BATCHES
                    .iter()
                    .filter(|b| b.is_multiple_of(t.accum.max(1)))
                    .filter_map(|&b| {
                        let plan = settings.plan_with(vocab, b, &t).ok()?;
                        Some((b, simulate_peak(&plan, settings.budget_bytes).map_err(|e| e.message)))
                    })
                    .collect(),
            })
            .collect();
        Self { plan, predicted, sweep }
    }
}

/// Something built asynchronously (pipelines, an executor): in the browser nothing may block a
/// frame, so it is spawned and looked at again each frame.
enum Slot<T> {
    Empty,
    Building(futures_channel::oneshot::Receiver<Result<T, BackendError>>),
    Ready(T),
}

impl<T: 'static> Slot<T> {
    /// Starts building: spawned on the browser's event loop on the web; on native, run here
    /// (the device is local and the futures complete without waiting on a frame).
    fn spawn(fut: impl std::future::Future<Output = Result<T, BackendError>> + 'static) -> Self {
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
    fn poll(&mut self) -> Result<Option<&mut T>, BackendError> {
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
enum Compute {
    Gpu { ctx: Box<GpuContext>, kernels: Slot<Arc<Kernels>>, exec: Slot<Box<GpuExecutor>> },
    Cpu { exec: Option<Box<CpuExecutor<f32>>> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Timeline,
    Sweep,
    Allocator,
    Training,
    /// The large-model estimator.
    RealModels,
}

pub struct OomlabApp {
    pub settings: Settings,
    /// The settings `derived` and the executor were made for.
    applied: Option<Settings>,
    dataset: Dataset,
    pub derived: Derived,
    compute: Compute,
    /// "gpu (…)" or "cpu (reference)".
    backend: String,
    notices: Vec<String>,
    training: bool,
    /// A step was asked for and waits for the executor.
    queued_step: bool,
    /// Stop training after this many more steps (scripted runs).
    train_steps_left: Option<usize>,
    losses: Vec<f32>,
    step_secs: Vec<f64>,
    /// When the step in flight started (egui time, seconds).
    step_started: Option<f64>,
    /// The allocator's live account of the last step run (the "allocator" figures).
    measured: Option<StepMemory>,
    /// What the driver layer reported after the last step (the "device" figures).
    device: DeviceFigures,
    /// The engine's out-of-memory, when a real step did not fit.
    oom: Option<Box<StepOom>>,
    error: Option<String>,
    pub tab: Tab,
    scrub: usize,
    /// The real-model view's estimate, for `applied.real`.
    pub real: real::RealDerived,
    /// Where exports go on the desktop (None: `$OOMLAB_EXPORT_DIR` or the current directory).
    pub export_dir: Option<std::path::PathBuf>,
    /// The claims lesson, computed when first shown.
    claims: Option<Result<Vec<crate::memory::estimate::claims::Claim>, String>>,
    /// The last export's outcome, for the status line.
    status: Option<String>,
    drew_first_frame: bool,
    /// A window screenshot the integration delivered, waiting to be saved as PNG.
    screenshot: Arc<std::sync::Mutex<Option<Arc<egui::ColorImage>>>>,
}

impl OomlabApp {
    pub fn new(cc: &eframe::CreationContext<'_>) -> Self {
        let dataset = Dataset::builtin();
        let vocab = dataset.tokenizer.vocab_size();
        let mut notices = Vec::new();
        let mut settings: Settings = cc.storage.and_then(|s| eframe::get_value(s, "settings")).unwrap_or_default();
        if settings.clone().clamped() != settings || settings.plan(vocab).is_err() {
            settings = Settings::default();
        }
        #[cfg(target_arch = "wasm32")]
        if let Some(hash) = web_sys::window().and_then(|w| w.location().hash().ok()) {
            let (s, notice) = Settings::from_url_hash(&hash, vocab);
            if !hash.trim_start_matches('#').is_empty() {
                settings = s;
            }
            notices.extend(notice);
        }
        let (compute, backend) = match cc.wgpu_render_state.as_ref().map(Self::gpu) {
            Some(Ok(g)) => g,
            Some(Err(e)) => {
                let webgl =
                    cc.wgpu_render_state.as_ref().is_some_and(|rs| rs.adapter.get_info().backend == wgpu::Backend::Gl);
                notices.push(if webgl {
                    "This browser offers no WebGPU (WebGL only): steps run on the CPU backend, same plan, same numbers."
                        .to_string()
                } else {
                    format!("GPU compute is unavailable ({e}); steps run on the CPU backend instead.")
                });
                (Compute::Cpu { exec: None }, "cpu (reference)".to_string())
            }
            None => {
                notices.push(
                    "This browser offers no WebGPU (WebGL only): steps run on the CPU backend, same plan, same numbers."
                        .into(),
                );
                (Compute::Cpu { exec: None }, "cpu (reference)".to_string())
            }
        };
        let mut app = Self::with(settings, dataset, compute, backend, notices);
        // Scripted runs (the desktop and browser tests, demos): train this many steps on start.
        #[cfg(not(target_arch = "wasm32"))]
        let steps = std::env::var("OOMLAB_TRAIN_STEPS").ok().and_then(|v| v.parse::<usize>().ok());
        #[cfg(target_arch = "wasm32")]
        let steps = web_sys::window()
            .and_then(|w| w.location().hash().ok())
            .and_then(|h| h.split(['#', '&']).find_map(|kv| kv.strip_prefix("train=")?.parse::<usize>().ok()));
        if let Some(n) = steps.filter(|n| *n > 0) {
            app.train_steps_left = Some(n);
            app.training = true;
        }
        app
    }

    fn with(settings: Settings, dataset: Dataset, compute: Compute, backend: String, notices: Vec<String>) -> Self {
        let derived = Derived::new(&settings, dataset.tokenizer.vocab_size());
        Self {
            real: real::RealDerived::new(&settings.real),
            claims: None,
            export_dir: None,
            applied: Some(settings.clone()),
            settings,
            dataset,
            derived,
            compute,
            backend,
            notices,
            training: false,
            queued_step: false,
            train_steps_left: None,
            losses: Vec::new(),
            step_secs: Vec::new(),
            step_started: None,
            measured: None,
            device: DeviceFigures::NotReported { reason: "no step has run yet".into() },
            oom: None,
            error: None,
            tab: Tab::Timeline,
            scrub: 0,
            status: None,
            drew_first_frame: false,
            screenshot: Arc::default(),
        }
        .at_peak()
    }

    fn at_peak(mut self) -> Self {
        self.scrub = self.derived.predicted.as_ref().map_or(0, |m| m.peak_index);
        self
    }

    /// Starts training, as the Train button does.
    pub fn start_training(&mut self) {
        self.training = true;
    }

    /// Training steps completed since the settings last changed.
    pub fn steps_done(&self) -> usize {
        self.losses.len()
    }

    /// Whether no step is running or waiting to run.
    pub fn is_idle(&self) -> bool {
        self.step_started.is_none() && !self.queued_step && !self.training
    }

    /// An app without a window or device, on the CPU backend (for tests).
    pub fn headless(settings: Settings) -> Self {
        Self::with(settings, Dataset::builtin(), Compute::Cpu { exec: None }, "cpu (reference)".into(), Vec::new())
    }

    /// An app without a window computing on `ctx` (for tests: the asynchronous GPU path).
    pub fn headless_gpu(settings: Settings, ctx: GpuContext) -> Self {
        let (compute, backend) = Self::gpu_on(ctx);
        Self::with(settings, Dataset::builtin(), compute, backend, Vec::new())
    }

    /// Compute on eframe's own wgpu device; the pipelines build in the background.
    fn gpu(rs: &eframe::egui_wgpu::RenderState) -> Result<(Compute, String), BackendError> {
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

    fn gpu_on(ctx: GpuContext) -> (Compute, String) {
        let name = format!("gpu ({})", ctx.describe());
        let for_kernels = ctx.clone();
        let kernels = Slot::spawn(async move { Ok(crate::backend::gpu::executor::build_kernels(&for_kernels).await?) });
        (Compute::Gpu { ctx: Box::new(ctx), kernels, exec: Slot::Empty }, name)
    }

    /// Re-derives the views and drops the executor when the settings changed.
    fn apply_settings(&mut self) {
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
        self.derived = Derived::new(&self.settings, self.dataset.tokenizer.vocab_size());
        self.applied = Some(self.settings.clone());
        // The scrubber starts at the peak.
        self.scrub = self.derived.predicted.as_ref().map_or(0, |m| m.peak_index);
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
        }
        self.losses.clear();
        self.step_secs.clear();
        self.measured = None;
        self.device = DeviceFigures::NotReported { reason: "no step has run yet".into() };
        self.oom = None;
        self.error = None;
        #[cfg(target_arch = "wasm32")]
        if let Some(w) = web_sys::window() {
            let _ = w.history().and_then(|h| {
                h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&self.settings.to_url_hash()))
            });
        }
    }

    /// Makes the executor for the current plan if there is none; whether it is ready.
    fn ensure_executor(&mut self) -> Result<bool, BackendError> {
        let plan = match &self.derived.plan {
            Ok(p) => Plan::clone(p),
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
                        self.notices
                            .push(format!("GPU compute is unavailable ({e}); steps run on the CPU backend instead."));
                        self.compute = Compute::Cpu { exec: None };
                        self.backend = "cpu (reference)".into();
                        return self.ensure_executor();
                    }
                };
                if matches!(exec, Slot::Empty) {
                    let (ctx, kernels) = ((**ctx).clone(), kernels.clone());
                    *exec = Slot::spawn(async move {
                        Ok(Box::new(GpuExecutor::with_budget(&ctx, &kernels, plan, seed, budget).await?))
                    });
                }
                Ok(exec.poll()?.is_some())
            }
            Compute::Cpu { exec } => {
                if exec.is_none() {
                    *exec = Some(Box::new(CpuExecutor::with_budget(plan, seed, budget)?));
                }
                Ok(true)
            }
        }
    }

    fn fail(&mut self, e: BackendError) {
        self.training = false;
        match e {
            BackendError::OutOfMemory(oom) => self.oom = Some(oom),
            other => self.error = Some(other.to_string()),
        }
    }

    /// Starts a step if none is running; advances or collects a running one. Never blocks: the
    /// GPU is polled, and a CPU step runs a few ops per frame (about [`CPU_SLICE_SECS`] of them).
    fn drive(&mut self, now: f64, want_step: bool) {
        let finished = match &mut self.compute {
            Compute::Gpu { exec: Slot::Ready(exec), .. } => {
                exec.poll_step().map(|r| (r, exec.memory().cloned(), exec.device_figures().clone()))
            }
            Compute::Cpu { exec: Some(exec) } if exec.running() => {
                let start = clock_secs();
                let mut out = None;
                while out.is_none() && clock_secs() - start < CPU_SLICE_SECS {
                    out = exec.resume(1);
                }
                out.map(|r| (r, exec.memory().cloned(), CpuExecutor::device_figures(exec)))
            }
            _ => None,
        };
        if let Some((result, memory, device)) = finished {
            match result {
                Ok(loss) => {
                    self.losses.push(loss);
                    self.step_secs.push(now - self.step_started.unwrap_or(now));
                    self.measured = memory;
                    self.device = device;
                    log::info!("oomlab: step {} on {}: loss {loss:.4}", self.losses.len(), self.backend);
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
            Compute::Cpu { exec: None } => {}
        }
    }

    fn suggestions(&self) -> Vec<Suggestion> {
        let s = &self.settings;
        let mut out = Vec::new();
        if s.checkpoint == Checkpoint::Off {
            out.push(Suggestion::Checkpointing);
        }
        let fused = Techniques { attention: AttentionKind::Fused, checkpoint: Checkpoint::Off, ..s.techniques() };
        if s.attention == AttentionKind::Standard
            && fused.validate(&s.model(self.dataset.tokenizer.vocab_size())).is_ok()
        {
            out.push(Suggestion::FusedAttention);
        }
        if s.micro_batch() >= 2 && s.micro_batch().is_multiple_of(2) {
            out.push(Suggestion::Accumulation);
        }
        if s.precision == Precision::Fp32 {
            out.push(Suggestion::MixedPrecision);
        }
        if s.batch > 1 {
            out.push(Suggestion::SmallerBatch);
        }
        out
    }

    /// Applies a suggestion from the OOM panel.
    pub fn apply_suggestion(&mut self, s: Suggestion) {
        let st = &mut self.settings;
        match s {
            Suggestion::Checkpointing => st.checkpoint = Checkpoint::BLOCKS,
            Suggestion::FusedAttention => {
                st.attention = AttentionKind::Fused;
                if st.checkpoint == Checkpoint::Selective {
                    st.checkpoint = Checkpoint::Off;
                }
            }
            Suggestion::Accumulation => st.accum *= 2,
            Suggestion::MixedPrecision => st.precision = Precision::Bf16,
            Suggestion::SmallerBatch => {
                st.batch = (st.batch / 2).max(1);
                st.accum = st.accum.min(st.batch);
                while !st.batch.is_multiple_of(st.accum) {
                    st.accum -= 1;
                }
            }
        }
    }

    fn controls(&mut self, ui: &mut egui::Ui) {
        let s = &mut self.settings;
        ui.heading("Setup");
        ui.horizontal(|ui| {
            ui.label("Model");
            for p in Preset::ALL {
                if ui.selectable_label(s.preset == p && s.dims == p.dims(), p.name()).clicked() {
                    s.preset = p;
                    s.dims = p.dims();
                    s.seq = s.seq.min(s.dims.max_seq).max(1);
                    if s.seq < s.dims.max_seq {
                        s.seq = s.dims.max_seq;
                    }
                }
            }
        });
        ui.horizontal(|ui| {
            ui.add(egui::DragValue::new(&mut s.dims.d_model).range(8..=1024).prefix("d "));
            ui.add(egui::DragValue::new(&mut s.dims.n_layers).range(1..=24).prefix("L "));
            ui.add(egui::DragValue::new(&mut s.dims.n_heads).range(1..=32).prefix("heads "));
        });
        let vocab = self.dataset.tokenizer.vocab_size();
        let params = s.model(vocab).num_parameters();
        ui.label(format!("{params} parameters"));
        ui.add(egui::Slider::new(&mut s.batch, 1..=MAX_BATCH).logarithmic(true).text("batch"));
        let max_seq = s.dims.max_seq;
        ui.add(egui::Slider::new(&mut s.seq, 1..=max_seq).text("sequence"));
        ui.horizontal_wrapped(|ui| {
            ui.label("Budget");
            for (name, bytes) in BUDGET_PRESETS {
                ui.selectable_value(&mut s.budget_bytes, bytes, name);
            }
        });
        let mut mib = (s.budget_bytes >> 20) as usize;
        if ui.add(egui::Slider::new(&mut mib, 1..=4096).logarithmic(true).text("MiB")).changed() {
            s.budget_bytes = (mib as u64) << 20;
        }
        ui.separator();
        ui.heading("Techniques");
        egui::ComboBox::from_label("checkpointing").selected_text(s.checkpoint.label()).show_ui(ui, |ui| {
            let l = s.dims.n_layers;
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Off, "off");
            ui.selectable_value(&mut s.checkpoint, Checkpoint::BLOCKS, "every block");
            let k = Checkpoint::default_every(l);
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Every(k), format!("every {k} blocks (√L)"));
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Selective, "selective (attention)");
        });
        egui::ComboBox::from_label("precision").selected_text(s.precision.name()).show_ui(ui, |ui| {
            for p in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
                ui.selectable_value(&mut s.precision, p, p.name());
            }
        });
        egui::ComboBox::from_label("attention").selected_text(s.attention.name()).show_ui(ui, |ui| {
            ui.selectable_value(&mut s.attention, AttentionKind::Standard, "standard");
            ui.selectable_value(&mut s.attention, AttentionKind::Fused, "fused (flash)");
        });
        egui::ComboBox::from_label("optimizer").selected_text(s.optimizer.name()).show_ui(ui, |ui| {
            for k in [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd] {
                ui.selectable_value(&mut s.optimizer, k, k.name());
            }
        });
        ui.add(egui::Slider::new(&mut s.accum, 1..=64).logarithmic(true).text("accumulation steps"));
        ui.add(egui::Slider::new(&mut s.lora_rank, 0..=64).text("LoRA rank (0 = off)"));
        ui.separator();
        ui.heading("Compare with");
        let options: [(&str, Techniques); 4] = [
            ("checkpoint every block", Techniques { checkpoint: Checkpoint::BLOCKS, ..Techniques::default() }),
            ("fp16", Techniques { precision: Precision::Fp16, ..Techniques::default() }),
            ("fused attention", Techniques { attention: AttentionKind::Fused, ..Techniques::default() }),
            ("accumulation ×4", Techniques { accum: 4, ..Techniques::default() }),
        ];
        ui.horizontal_wrapped(|ui| {
            for (name, t) in options {
                let mut on = s.overlays.contains(&t);
                if ui.checkbox(&mut on, name).changed() {
                    if on && s.overlays.len() < 2 {
                        s.overlays.push(t);
                    } else {
                        s.overlays.retain(|o| *o != t);
                    }
                }
            }
        });
        ui.separator();
        ui.horizontal(|ui| {
            ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "));
            ui.checkbox(&mut s.projector, "projector mode");
        });
        // Keep the settings buildable: a sequence within the model, accumulation that divides.
        s.seq = s.seq.clamp(1, s.dims.max_seq);
        s.accum = s.accum.clamp(1, s.batch);
        while !s.batch.is_multiple_of(s.accum) {
            s.accum -= 1;
        }
    }

    fn run_buttons(&mut self, ui: &mut egui::Ui) -> bool {
        let mut step = false;
        ui.horizontal(|ui| {
            step = ui.button("One step").clicked();
            let label = if self.training { "Stop" } else { "Train" };
            if ui.button(label).clicked() {
                self.training = !self.training;
            }
            ui.label(RichText::new(format!("engine: {}", self.backend)).small());
        });
        step
    }

    /// The whole window's content (also what the tests render).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        if !self.drew_first_frame {
            self.drew_first_frame = true;
            log::info!("oomlab: first frame ({})", self.backend);
        }
        let projector = self.settings.projector;
        ui.ctx().set_zoom_factor(if projector { 1.5 } else { 1.0 });
        if projector {
            let mut v = egui::Visuals::dark();
            v.override_text_color = Some(Color32::WHITE);
            v.panel_fill = Color32::BLACK;
            ui.ctx().set_visuals(v);
        }
        egui::Panel::left("controls").resizable(true).default_size(300.0).show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| self.controls(ui));
        });
        self.apply_settings();
        let now = ui.input(|i| i.time);
        egui::CentralPanel::default().show(ui, |ui| {
            ui.heading("oomlab — why does a large batch run out of GPU memory?");
            for n in &self.notices {
                ui.colored_label(Color32::from_rgb(230, 160, 0), n);
            }
            let step = self.run_buttons(ui);
            self.drive(now, step);
            if let Some(e) = &self.error {
                ui.colored_label(Color32::RED, e);
            }
            self.exports(ui);
            egui::ScrollArea::vertical().show(ui, |ui| self.views(ui));
        });
        if self.training || self.step_started.is_some() || self.queued_step {
            ui.ctx().request_repaint();
        }
    }

    /// The memory a view shows: the last real step's (allocator), else the plan's (predicted).
    fn shown_memory(&self) -> Option<(&StepMemory, Source)> {
        shown_memory(&self.measured, &self.derived.predicted)
    }

    fn exports(&mut self, ui: &mut egui::Ui) {
        let taken = self.screenshot.lock().ok().and_then(|mut s| s.take());
        if let Some(image) = taken {
            self.status = Some(
                export::png(&image)
                    .and_then(|b| export::save(self.export_dir.as_deref(), "oomlab.png", &b, "image/png"))
                    .unwrap_or_else(|e| e),
            );
        }
        ui.horizontal(|ui| {
            ui.label("Export:");
            if ui.button("sweep CSV").clicked() {
                let csv = export::sweep_csv(&self.derived.sweep);
                self.status = Some(
                    export::save(self.export_dir.as_deref(), "oomlab-sweep.csv", csv.as_bytes(), "text/csv")
                        .unwrap_or_else(|e| e),
                );
            }
            if ui.button("timeline + allocator JSON").clicked()
                && let (Ok(plan), Some((m, source))) = (&self.derived.plan, self.shown_memory())
            {
                let op = m.timeline.get(self.scrub).and_then(|p| p.op);
                let json = export::step_json(plan, m, source, op);
                self.status = Some(
                    export::save(self.export_dir.as_deref(), "oomlab-step.json", json.as_bytes(), "application/json")
                        .unwrap_or_else(|e| e),
                );
            }
            if self.tab == Tab::RealModels
                && ui.button("estimate JSON").clicked()
                && let (Ok(setup), Some(e)) = (&self.real.setup, &self.real.estimate)
            {
                let json =
                    crate::memory::estimate::to_json(setup, e, self.real.max_micro_batch, &self.real.sweep).to_string();
                self.status = Some(
                    export::save(
                        self.export_dir.as_deref(),
                        "oomlab-estimate.json",
                        json.as_bytes(),
                        "application/json",
                    )
                    .unwrap_or_else(|e| e),
                );
            }
            if ui.button("window PNG").clicked() {
                let slot = self.screenshot.clone();
                let ctx = ui.ctx().clone();
                ui.ctx().request_screenshot(move |image| {
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(image);
                    }
                    ctx.request_repaint();
                });
            }
            if let Some(s) = &self.status {
                ui.label(RichText::new(s).small());
            }
        });
    }

    fn views(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.tab, Tab::Timeline, "Step timeline");
            ui.selectable_value(&mut self.tab, Tab::Sweep, "Memory vs batch");
            ui.selectable_value(&mut self.tab, Tab::Allocator, "Allocator map");
            ui.selectable_value(&mut self.tab, Tab::Training, "Training");
            ui.selectable_value(&mut self.tab, Tab::RealModels, "Real models");
        });
        ui.separator();
        if self.tab == Tab::RealModels {
            self.real_models(ui);
        } else {
            self.toy_views(ui);
        }
    }

    /// The large-model estimator's page: its own setup (the controls on the left are the toy's).
    fn real_models(&mut self, ui: &mut egui::Ui) {
        ui.heading("Real models on real GPUs");
        real::controls(ui, &mut self.settings.real);
        ui.separator();
        real::view(ui, &self.settings.real, &self.real);
        views::explain(ui, "why_real", real::EXPLAIN_REAL);
        egui::CollapsingHeader::new("Claims, checked against the estimator").id_salt("claims").default_open(true).show(
            ui,
            |ui| {
                let claims = self
                    .claims
                    .get_or_insert_with(|| crate::memory::estimate::claims::claims().map_err(|e| e.to_string()));
                real::claims_view(ui, claims);
            },
        );
    }

    fn toy_views(&mut self, ui: &mut egui::Ui) {
        let plan = match &self.derived.plan {
            Ok(p) => Arc::clone(p),
            Err(e) => {
                ui.colored_label(Color32::RED, format!("This setup cannot be built: {e}"));
                return;
            }
        };
        ui.label(format!(
            "{} · batch {} ({} × {} micro-batches) × sequence {} · budget {}",
            self.settings.techniques().describe(),
            self.settings.batch,
            plan.shape.batch,
            self.settings.accum,
            self.settings.seq,
            format_bytes(self.settings.budget_bytes)
        ));
        let oom = self.oom.clone().or_else(|| self.derived.predicted.as_ref().err().cloned());
        if let Some(oom) = oom {
            ui.group(|ui| {
                if let Some(s) = views::oom_panel(ui, &oom, &self.suggestions()) {
                    self.apply_suggestion(s);
                }
                if self.oom.is_none() {
                    ui.label(RichText::new("(predicted by the plan; a real step would fail the same way)").small());
                }
            });
        }
        ui.heading("At the peak");
        if let Ok(predicted) = &self.derived.predicted {
            views::breakdown(ui, self.measured.as_ref(), predicted, &self.device);
        }
        egui::CollapsingHeader::new("Model state, tensor by tensor").id_salt("model_state").show(ui, |ui| {
            views::model_state(ui, &plan);
        });
        views::explain(ui, "why_breakdown", EXPLAIN_BREAKDOWN);
        ui.separator();
        // Borrowed field by field (the scrubber is mutated while the memory is drawn).
        let shown = shown_memory(&self.measured, &self.derived.predicted);
        let (memory, source) = match shown {
            Some((m, s)) => (Some(m), s),
            None => (None, Source::Predicted),
        };
        match self.tab {
            Tab::Timeline => {
                if let Some(m) = memory {
                    views::timeline(ui, &plan, m, source, &mut self.scrub);
                }
                views::explain(ui, "why_timeline", EXPLAIN_TIMELINE);
            }
            Tab::Sweep => {
                views::sweep_chart(ui, &self.derived.sweep, self.settings.budget_bytes, self.settings.batch);
                views::explain(ui, "why_sweep", EXPLAIN_SWEEP);
            }
            Tab::Allocator => {
                if let Some(m) = memory {
                    let op = m.timeline.get(self.scrub.min(m.timeline.len().saturating_sub(1))).and_then(|p| p.op);
                    // The driver's blocks describe the end of the last real step.
                    let device = (source == Source::Allocator).then(|| self.device.reported()).flatten();
                    views::allocator_map(ui, &plan, m, op, device);
                }
                views::explain(ui, "why_allocator", EXPLAIN_ALLOCATOR);
            }
            Tab::Training => views::training(ui, &self.losses, &self.step_secs),
            Tab::RealModels => {}
        }
    }
}

/// The memory the views show: the last real step's (allocator), else the plan's (predicted).
fn shown_memory<'a>(
    measured: &'a Option<StepMemory>,
    predicted: &'a Result<StepMemory, Box<StepOom>>,
) -> Option<(&'a StepMemory, Source)> {
    match (measured, predicted) {
        (Some(m), _) => Some((m, Source::Allocator)),
        (None, Ok(p)) => Some((p, Source::Predicted)),
        (None, Err(_)) => None,
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

pub const EXPLAIN_BREAKDOWN: &str = "Parameters, gradients and optimizer state depend on the model only: AdamW keeps two more \
copies of every weight (m and v), and mixed precision adds fp32 master weights. Activations — the tensors the forward \
pass saves for the backward pass — grow with batch × sequence (and the attention probabilities with the square of the \
sequence), which is why a large batch runs out of memory while the model itself fits.";

pub const EXPLAIN_TIMELINE: &str = "Memory rises through the forward pass as each layer saves its activations, peaks \
around the start of the backward pass, and falls as the backward pass frees what it no longer needs. Model state is \
the flat floor underneath. Checkpointing lowers the ridge by recomputing activations during the backward pass.";

pub const EXPLAIN_SWEEP: &str = "Each bar is the peak of one step at that batch size. Model state is the same at every \
batch; activations grow linearly with it, so the bars cross the budget line at some batch: the first out-of-memory. \
Techniques move that point: checkpointing and fused attention shrink activations, accumulation keeps the micro-batch \
small, mixed precision halves activations but adds master weights.";

pub const EXPLAIN_ALLOCATOR: &str = "The caching allocator (PyTorch's rules) reserves segments from the device and \
carves blocks out of them. Freed blocks stay cached for reuse rather than returning to the device, so reserved memory \
exceeds allocated memory; free gaps that are too small for the next request are fragmentation.";

impl eframe::App for OomlabApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, "settings", &self.settings);
    }
}
