//! The eframe app. For now a window with the engine's status and a button that trains the
//! default toy on the GPU it shares with the UI (or on the CPU backend where there is none).

use crate::backend::cpu::CpuExecutor;
use crate::backend::gpu::{GpuContext, GpuExecutor, executor::build_kernels};
use crate::backend::{BackendError, Trainer};
use crate::data::Dataset;
use crate::model::{ModelConfig, StepShape};
use crate::plan::{Category, OptimizerConfig, Plan};
use crate::units::format_bytes;

/// Default step shape of the app: the toy at batch 16.
pub const DEFAULT_BATCH: usize = 16;

enum Engine {
    #[cfg(not(target_arch = "wasm32"))]
    Gpu(Box<GpuExecutor>),
    Cpu(Box<CpuExecutor<f32>>),
}

pub struct OomlabApp {
    dataset: Dataset,
    engine: Option<Engine>,
    /// Where the steps run, in words.
    backend: String,
    /// Why the GPU is not used, when it is not.
    notice: Option<String>,
    losses: Vec<f32>,
    error: Option<String>,
    training: bool,
}

fn default_plan(dataset: &Dataset) -> Result<Plan, BackendError> {
    let model = ModelConfig::toy(dataset.tokenizer.vocab_size());
    let shape = StepShape { batch: DEFAULT_BATCH, seq: model.seq_len };
    Ok(Plan::build(&model, shape, &OptimizerConfig::default())?)
}

impl OomlabApp {
    pub fn new(cc: &eframe::CreationContext<'_>) -> Self {
        let dataset = Dataset::builtin();
        let mut app = Self {
            dataset,
            engine: None,
            backend: String::new(),
            notice: None,
            losses: Vec::new(),
            error: None,
            training: false,
        };
        let plan = match default_plan(&app.dataset) {
            Ok(p) => p,
            Err(e) => {
                app.error = Some(e.to_string());
                return app;
            }
        };
        match cc.wgpu_render_state.as_ref() {
            Some(rs) => match Self::gpu_engine(rs, plan.clone()) {
                Ok((engine, name)) => {
                    app.engine = Some(engine);
                    app.backend = name;
                }
                Err(e) => {
                    app.notice = Some(format!("GPU compute is unavailable ({e}); running on the CPU backend instead."));
                }
            },
            None => {
                app.notice = Some("No wgpu device (WebGL-only browser?); running on the CPU backend instead.".into())
            }
        }
        if app.engine.is_none() {
            match CpuExecutor::new(plan, 0) {
                Ok(exec) => {
                    app.engine = Some(Engine::Cpu(Box::new(exec)));
                    app.backend = "cpu (reference)".into();
                }
                Err(e) => app.error = Some(e.to_string()),
            }
        }
        app
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn gpu_engine(rs: &egui_wgpu_state::RenderState, plan: Plan) -> Result<(Engine, String), BackendError> {
        let ctx = GpuContext::from_device(rs.device.clone(), rs.queue.clone(), rs.adapter.get_info())?;
        let kernels = pollster::block_on(build_kernels(&ctx))?;
        let exec = pollster::block_on(GpuExecutor::new(&ctx, &kernels, plan, 0))?;
        Ok((Engine::Gpu(Box::new(exec)), format!("gpu ({})", ctx.describe())))
    }

    #[cfg(target_arch = "wasm32")]
    fn gpu_engine(_rs: &egui_wgpu_state::RenderState, _plan: Plan) -> Result<(Engine, String), BackendError> {
        // Asynchronous GPU steps in the browser come with the full app; until then the web
        // build trains on the CPU backend.
        let _ = (GpuContext::describe, GpuExecutor::plan, build_kernels);
        Err(crate::model::ConfigError::Other("GPU training in the browser is not wired up yet".into()).into())
    }

    fn trainer(&mut self) -> Option<&mut dyn Trainer> {
        match self.engine.as_mut()? {
            #[cfg(not(target_arch = "wasm32"))]
            Engine::Gpu(g) => Some(g.as_mut()),
            Engine::Cpu(c) => Some(c.as_mut()),
        }
    }

    fn step(&mut self) {
        let index = self.losses.len() as u64;
        let Some(trainer) = self.trainer() else {
            return;
        };
        let shape = trainer.plan().shape;
        let batch = match self.dataset.batch(shape, 0, index) {
            Ok(b) => b,
            Err(e) => {
                self.error = Some(e.to_string());
                return;
            }
        };
        let Some(trainer) = self.trainer() else {
            return;
        };
        match trainer.train_step(&batch) {
            Ok(loss) => self.losses.push(loss),
            Err(e) => {
                self.error = Some(e.to_string());
                self.training = false;
            }
        }
    }
}

/// eframe's re-export of egui-wgpu, under a name that says what it is used for.
use eframe::egui_wgpu as egui_wgpu_state;

impl eframe::App for OomlabApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        if self.training {
            self.step();
            ui.ctx().request_repaint();
        }
        egui::CentralPanel::default().show(ui, |ui| {
            ui.heading("oomlab — why does a large batch run out of GPU memory?");
            ui.separator();
            ui.label(format!("Engine: {}", self.backend));
            if let Some(n) = &self.notice {
                ui.colored_label(egui::Color32::from_rgb(200, 120, 0), n);
            }
            if let Some(trainer) = self.trainer() {
                let plan = trainer.plan();
                let m = plan.model;
                ui.label(format!(
                    "Model: GPT-2 toy, vocab {}, seq {}, d {}, {} layers, {} heads — {} parameters; batch {}",
                    m.vocab,
                    m.seq_len,
                    m.d_model,
                    m.n_layers,
                    m.n_heads,
                    m.num_parameters(),
                    plan.shape.batch
                ));
            }
            ui.horizontal(|ui| {
                if ui.button("One step").clicked() {
                    self.step();
                }
                let label = if self.training { "Stop" } else { "Train" };
                if ui.button(label).clicked() {
                    self.training = !self.training;
                }
            });
            match self.losses.last() {
                Some(loss) => ui.label(format!("Step {} — loss {:.4} (measured)", self.losses.len(), loss)),
                None => ui.label("No step run yet."),
            };
            if let Some(m) = self.trainer().and_then(|t| t.memory()) {
                ui.separator();
                ui.label(format!(
                    "Memory of one step (measured by the caching allocator): peak {} allocated, {} reserved in {} segments",
                    format_bytes(m.peak_allocated_bytes()),
                    format_bytes(m.peak_reserved_bytes()),
                    m.stats.segments
                ));
                egui::Grid::new("peak_by_category").striped(true).show(ui, |ui| {
                    ui.strong("at the peak");
                    ui.strong("bytes");
                    ui.end_row();
                    for c in Category::ALL {
                        let bytes = m.peak_allocated.get(c);
                        if bytes > 0 {
                            ui.label(c.name());
                            ui.label(format_bytes(bytes));
                            ui.end_row();
                        }
                    }
                });
            }
            if let Some(e) = &self.error {
                ui.colored_label(egui::Color32::RED, e);
            }
        });
    }
}
