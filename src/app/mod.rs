//! The eframe app: controls on the left; the views of the plan's prediction and of the steps the
//! engine runs on the right. It draws what the plan and the allocator say and computes no memory
//! itself. Steps run on eframe's own wgpu device without blocking a frame (submit, then poll
//! each frame until the readback arrives); without a usable GPU the CPU backend runs the same
//! plan, and the app says so.

pub mod challenges;
mod controls;
pub mod cpu_worker;
mod derived;
pub mod export;
pub mod fonts;
mod keys;
pub mod lang;
pub mod lesson_panel;
pub mod lessons;
mod notice;
pub mod teacher;
pub use notice::Notice;
pub mod real;
pub mod real_runtime;
mod session;
pub mod settings;
pub mod snapshot_view;
pub mod views;

use std::sync::Arc;

use egui::{Color32, RichText};

use crate::backend::gpu::GpuContext;
use crate::data::Dataset;
use crate::memory::device::DeviceFigures;
use crate::memory::{StepMemory, StepOom};
use settings::Settings;
use views::Source;

use derived::shown_memory;
pub use derived::{Derived, SWEEP_BATCHES, sweep_batches};
use session::Compute;
#[cfg(not(target_arch = "wasm32"))]
pub use session::wgpu_configuration;

/// Below this width (points) the app lays out for a phone: controls in a drawer.
pub const NARROW_WIDTH: f32 = 700.0;
/// The height of a touch target on a phone (Apple and Google ask for about 44 points).
pub const TOUCH_SIZE: f32 = 44.0;
/// How often the page looks for the CPU worker's replies while a step runs there.
const WORKER_FRAME_MS: u64 = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tab {
    /// The breakdown at the peak, by category and source, and the model state.
    Breakdown,
    Timeline,
    Sweep,
    Allocator,
    Training,
    /// The large-model estimator.
    RealModels,
    /// A PyTorch memory snapshot from a real run.
    Snapshot,
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
    notices: Vec<Notice>,
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
    error: Option<Notice>,
    pub tab: Tab,
    scrub: usize,
    /// The real-model view's estimate, for `applied.real`.
    pub real: real::RealDerived,
    /// Where exports go on the desktop (None: `$OOMLAB_EXPORT_DIR` or the current directory).
    pub export_dir: Option<std::path::PathBuf>,
    /// The claims lesson, computed when first shown.
    claims: Option<Result<Vec<crate::memory::estimate::claims::Claim>, String>>,
    /// The last export's outcome, for the status line.
    status: Option<Notice>,
    drew_first_frame: bool,
    /// The words of the language the user reads (`i18n/`).
    catalog: crate::i18n::Catalog,
    /// The Chinese font: embedded (desktop) or fetched on demand (web).
    cjk: lang::CjkFont,
    /// A language chosen while its font is still on its way.
    pending_lang: Option<crate::i18n::Lang>,
    /// The fonts must be (re)installed: the first frame, and when the Chinese font arrives.
    fonts_stale: bool,
    /// On a narrow screen: whether the controls' drawer covers the views.
    drawer_open: bool,
    /// The layout last drawn (narrow or not), to log a change once.
    narrow: Option<bool>,
    /// Whether the "?" list of keyboard shortcuts is open.
    pub show_shortcuts: bool,
    /// The look before present mode, to restore when it ends.
    visuals_before_present: Option<egui::Visuals>,
    /// The open lesson, if any.
    pub lesson: Option<lesson_panel::LessonState>,
    /// A lesson's reveal asked for a real step.
    lesson_step: bool,
    /// The open chapter's computed words (`lesson_panel::ChapterTexts`).
    lesson_texts: Option<lesson_panel::ChapterTexts>,
    /// A chapter just opened: scroll its widget into view.
    scroll_to_target: bool,
    /// The challenge under way, if any.
    pub challenge: Option<challenges::ChallengeState>,
    /// The challenges passed (remembered on the desktop and in the browser).
    pub challenges_done: Vec<String>,
    /// Whether the challenges panel is open.
    show_challenges: bool,
    /// What a teacher link locks or hides.
    pub restrictions: teacher::Restrictions,
    /// The Snapshot tab's file and what was read from it.
    pub snapshot: snapshot_view::SnapshotState,
    /// The gated controls the last drawn controls panel held, and whether each was enabled.
    drawn_controls: Vec<(teacher::Control, bool)>,
    /// Whether the teacher link's drawn controls were logged (once per link).
    drawn_logged: bool,
    /// The "Share this setup" window's choices (what to lock, what to hide), when it is open.
    share: Option<(Vec<teacher::Control>, Vec<teacher::Control>)>,
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
            if Settings::url_hash_carries_settings(&hash) {
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
                    Notice::msg("notice-webgl", &[])
                } else {
                    Notice::msg("notice-no-gpu", &[("error", e.to_string().into())])
                });
                Compute::cpu()
            }
            None => {
                notices.push(Notice::msg("notice-webgl", &[]));
                Compute::cpu()
            }
        };
        let mut app = Self::with(settings, dataset, compute, backend, notices);
        app.set_lang(Self::initial_lang(cc));
        app.challenges_done = cc.storage.and_then(|s| eframe::get_value(s, "challenges_done")).unwrap_or_default();
        // A shared challenge link opens the challenge; a teacher link its chapter and the
        // controls it locks or hides.
        #[cfg(target_arch = "wasm32")]
        if let Some(hash) = web_sys::window().and_then(|w| w.location().hash().ok()) {
            if let Some(i) = challenges::from_url_hash(&hash) {
                app.start_challenge(i);
                app.show_challenges = true;
            }
            app.apply_teacher_link(&hash);
        }
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

    fn with(settings: Settings, dataset: Dataset, compute: Compute, backend: String, notices: Vec<Notice>) -> Self {
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
            device: DeviceFigures::NotReported { reason: crate::memory::device::NOT_REPORTED_YET.into() },
            oom: None,
            error: None,
            tab: Tab::Breakdown,
            scrub: 0,
            status: None,
            drew_first_frame: false,
            cjk: lang::CjkFont::initial(),
            pending_lang: None,
            fonts_stale: true,
            drawer_open: false,
            narrow: None,
            show_shortcuts: false,
            visuals_before_present: None,
            lesson: None,
            lesson_step: false,
            lesson_texts: None,
            scroll_to_target: false,
            challenge: None,
            challenges_done: Vec::new(),
            show_challenges: false,
            restrictions: teacher::Restrictions::default(),
            snapshot: snapshot_view::SnapshotState::default(),
            drawn_controls: Vec::new(),
            drawn_logged: false,
            share: None,
            catalog: crate::i18n::Catalog::new(crate::i18n::Lang::En),
            screenshot: Arc::default(),
        }
        .at_peak()
    }

    fn at_peak(mut self) -> Self {
        self.scrub = self.derived.predicted.as_ref().and_then(|p| p.as_ref().ok()).map_or(0, |m| m.peak_index);
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
        Self::with(
            settings,
            Dataset::builtin(),
            Compute::Cpu { exec: None },
            crate::backend::cpu::CPU_NAME.into(),
            Vec::new(),
        )
    }

    /// An app without a window whose CPU steps run in a worker reached through `transport` (for
    /// tests: the browser's Web Worker path, over a thread).
    pub fn headless_worker(settings: Settings, transport: Box<dyn cpu_worker::Transport>) -> Self {
        let compute = Compute::Worker { worker: Box::new(cpu_worker::CpuWorker::new(transport)) };
        Self::with(settings, Dataset::builtin(), compute, session::CPU_WORKER_NAME.into(), Vec::new())
    }

    /// An app without a window computing on `ctx` (for tests: the asynchronous GPU path).
    pub fn headless_gpu(settings: Settings, ctx: GpuContext) -> Self {
        let (compute, backend) = Self::gpu_on(ctx);
        Self::with(settings, Dataset::builtin(), compute, backend, Vec::new())
    }

    /// The whole window's content (also what the tests render).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        self.poll_fonts(ui.ctx());
        if !self.drew_first_frame {
            self.drew_first_frame = true;
            log::info!("oomlab: first frame ({})", self.backend);
        }
        let key_step = self.shortcuts(ui.ctx());
        let projector = self.settings.projector;
        ui.ctx().set_zoom_factor(if projector { 1.5 } else { 1.0 });
        // Present mode's high contrast; leaving it restores the look the app had.
        match (projector, self.visuals_before_present.is_some()) {
            (true, false) => {
                self.visuals_before_present = Some(ui.ctx().global_style().visuals.clone());
                let mut v = egui::Visuals::dark();
                v.override_text_color = Some(Color32::WHITE);
                v.panel_fill = Color32::BLACK;
                ui.ctx().set_visuals(v);
            }
            (false, true) => {
                if let Some(v) = self.visuals_before_present.take() {
                    ui.ctx().set_visuals(v);
                }
            }
            _ => {}
        }
        views::use_safe_colours(projector);
        // A phone: the controls become a drawer over the views, and everything is touch-sized.
        let narrow = ui.available_width() < NARROW_WIDTH;
        if self.narrow != Some(narrow) {
            self.narrow = Some(narrow);
            let how = if narrow {
                "a phone's: the controls in a drawer"
            } else {
                "a wide screen's: the controls beside the views"
            };
            log::info!("oomlab: layout for {how} ({:.0} points wide)", ui.available_width());
        }
        if narrow {
            let spacing = &mut ui.style_mut().spacing;
            spacing.interact_size.y = TOUCH_SIZE;
            spacing.button_padding = egui::vec2(10.0, 10.0);
        }
        if narrow && self.drawer_open {
            egui::CentralPanel::default().show(ui, |ui| {
                if ui.button(self.tr("drawer-close")).clicked() {
                    self.drawer_open = false;
                }
                egui::ScrollArea::vertical().show(ui, |ui| self.controls(ui));
            });
            self.apply_settings();
            // A step in flight goes on while the drawer is open.
            self.drive(ui.input(|i| i.time), key_step);
        } else {
            if !narrow {
                egui::Panel::left("controls").resizable(true).default_size(300.0).show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| self.controls(ui));
                });
            }
            if self.lesson.is_some() || self.show_challenges {
                // Beside the views on a wide screen, under them on a phone.
                let panel = if narrow { egui::Panel::bottom("lessons") } else { egui::Panel::right("lessons") };
                panel.resizable(true).default_size(if narrow { 320.0 } else { 340.0 }).show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| {
                        if self.show_challenges {
                            self.challenges_panel(ui);
                        } else {
                            self.lessons_panel(ui);
                        }
                    });
                });
            }
            self.apply_settings();
            self.main_area(ui, narrow, key_step);
        }
        self.poll_snapshot(ui.ctx());
        self.shortcuts_window(ui.ctx());
        self.share_window(ui.ctx());
        self.highlight(ui.ctx());
        self.log_drawn_controls();
        if self.training || self.step_started.is_some() || self.queued_step {
            // A step in the worker needs a frame only when its progress or result may have come
            // (about every 50 ms): a page redrawn continuously would take the CPU the worker
            // computes on (in headless Chromium a software-rendered frame costs ~100 ms).
            if self.step_started.is_some() && matches!(self.compute, Compute::Worker { .. }) {
                ui.ctx().request_repaint_after(std::time::Duration::from_millis(WORKER_FRAME_MS));
            } else {
                ui.ctx().request_repaint();
            }
        }
    }

    /// The views' side: the top bar, notices, run buttons, exports and the selected view.
    fn main_area(&mut self, ui: &mut egui::Ui, narrow: bool, key_step: bool) {
        let now = ui.input(|i| i.time);
        egui::CentralPanel::default().show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                if narrow && ui.button(self.tr("drawer-open")).clicked() {
                    self.drawer_open = true;
                }
                ui.heading(self.tr("app-title"));
                self.language_switch(ui);
                if ui.selectable_label(self.lesson.is_some(), self.tr("lessons")).clicked() {
                    if self.lesson.is_some() {
                        self.lesson = None;
                    } else {
                        self.show_challenges = false;
                        self.open_chapter(0);
                    }
                }
                if ui.selectable_label(self.show_challenges, self.tr("challenges")).clicked() {
                    self.show_challenges = !self.show_challenges;
                    self.lesson = None;
                }
                if ui.button("?").on_hover_text(self.tr("keys-title")).clicked() {
                    self.show_shortcuts = !self.show_shortcuts;
                }
            });
            for n in &self.notices {
                ui.colored_label(Color32::from_rgb(230, 160, 0), n.text(&self.catalog));
            }
            let step = self.run_buttons(ui) || key_step || std::mem::take(&mut self.lesson_step);
            self.drive(now, step);
            if let Some(e) = &self.error {
                ui.colored_label(Color32::RED, e.text(&self.catalog));
            }
            self.exports(ui);
            // The selected view gets the room: its chart takes what the window has left below
            // the tabs and the lines around the chart.
            self.tabs(ui);
            views::set_chart_height(ui.ctx(), ui.available_height() - 150.0);
            // Each tab keeps its own scroll position.
            egui::ScrollArea::vertical().id_salt(("views", self.tab)).show(ui, |ui| self.views(ui));
        });
    }

    /// The memory a view shows: the last real step's (allocator), else the plan's (predicted).
    fn shown_memory(&self) -> Option<(&StepMemory, Source)> {
        shown_memory(&self.measured, &self.derived.predicted)
    }

    /// The tabs, above the scrolling view so that they stay in reach.
    fn tabs(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            for (tab, key) in [
                (Tab::Breakdown, "tab-breakdown"),
                (Tab::Timeline, "tab-timeline"),
                (Tab::Sweep, "tab-sweep"),
                (Tab::Allocator, "tab-allocator"),
                (Tab::Training, "tab-training"),
                (Tab::RealModels, "tab-real-models"),
                (Tab::Snapshot, "tab-snapshot"),
            ] {
                let label = self.tr(key);
                ui.selectable_value(&mut self.tab, tab, label);
            }
        });
        ui.separator();
    }

    fn views(&mut self, ui: &mut egui::Ui) {
        // Touch-sized controls (a phone) stop at the tabs: a view's rows keep their height.
        ui.spacing_mut().interact_size.y = ui.ctx().global_style().spacing.interact_size.y;
        if self.tab == Tab::RealModels {
            self.real_models(ui);
        } else if self.tab == Tab::Snapshot {
            self.snapshot_tab(ui);
        } else {
            self.toy_views(ui);
        }
    }

    /// The large-model estimator's page: its own setup (the controls on the left are the toy's).
    fn real_models(&mut self, ui: &mut egui::Ui) {
        let t = &self.catalog;
        ui.heading(t.text("main-real-heading"));
        real::controls(ui, t, &mut self.settings.real);
        ui.separator();
        let drawn = ui.scope(|ui| real::view(ui, t, &self.settings.real, &self.real));
        views::mark(ui, "real-models", drawn.response.rect);
        views::explain(ui, t, "explain-real");
        egui::CollapsingHeader::new(t.text("main-claims")).id_salt("claims").default_open(true).show(ui, |ui| {
            let claims =
                self.claims.get_or_insert_with(|| crate::memory::estimate::claims::claims().map_err(|e| e.to_string()));
            real::claims_view(ui, t, claims);
        });
    }

    fn toy_views(&mut self, ui: &mut egui::Ui) {
        let plan = match &self.derived.plan {
            Ok(p) => Arc::clone(p),
            Err(e) => {
                ui.colored_label(
                    Color32::RED,
                    self.catalog.format("main-cannot-build", &[("error", e.as_str().into())]),
                );
                return;
            }
        };
        let t = &self.catalog;
        ui.label(t.format(
            "main-baseline",
            &[
                ("name", views::describe(t, &self.settings.techniques()).into()),
                ("batch", self.settings.batch.to_string().into()),
                ("micro", plan.shape.batch.to_string().into()),
                ("accum", self.settings.accum.to_string().into()),
                ("seq", self.settings.seq.to_string().into()),
                ("budget", views::size(t, self.settings.budget_bytes).into()),
            ],
        ));
        let oom = self.oom.clone().or_else(|| self.derived.predicted.as_ref().and_then(|p| p.as_ref().err()).cloned());
        if let Some(oom) = oom {
            let panel = ui.group(|ui| {
                if let Some(s) = views::oom_panel(ui, &self.catalog, &oom, &self.suggestions()) {
                    self.apply_suggestion(s);
                }
                if self.oom.is_none() {
                    ui.label(RichText::new(self.tr("main-oom-predicted")).small());
                }
            });
            views::mark(ui, "oom-panel", panel.response.rect);
        }
        let t = &self.catalog;
        // Borrowed field by field (the scrubber is mutated while the memory is drawn).
        let shown = shown_memory(&self.measured, &self.derived.predicted);
        let (memory, source) = match shown {
            Some((m, s)) => (Some(m), s),
            None => (None, Source::Predicted),
        };
        // The chart tabs fold the breakdown into one line, so the chart gets the room.
        if let (Some(m), false) = (memory, self.tab == Tab::Breakdown) {
            ui.label(t.format(
                "main-peak-line",
                &[
                    ("allocated", views::size(t, m.peak_allocated_bytes()).into()),
                    ("reserved", views::size(t, m.peak_reserved_bytes()).into()),
                    ("source", source.word(t).into()),
                    ("budget", views::size(t, self.settings.budget_bytes).into()),
                ],
            ));
        }
        match self.tab {
            Tab::Breakdown => {
                ui.heading(t.text("main-at-peak"));
                if let Some(Ok(predicted)) = &self.derived.predicted {
                    let drawn = ui.scope(|ui| views::breakdown(ui, t, self.measured.as_ref(), predicted, &self.device));
                    views::mark(ui, "breakdown", drawn.response.rect);
                }
                egui::CollapsingHeader::new(t.text("main-model-state")).id_salt("model_state").show(ui, |ui| {
                    views::model_state(ui, t, &plan);
                });
                views::explain(ui, t, "explain-breakdown");
            }
            Tab::Timeline => {
                if let Some(m) = memory {
                    let drawn = ui.scope(|ui| views::timeline(ui, t, &plan, m, source, &mut self.scrub));
                    views::mark(ui, "timeline-chart", drawn.response.rect);
                }
                views::explain(ui, t, "explain-timeline");
            }
            Tab::Sweep => {
                let names: Vec<String> = std::iter::once(t.text("tech-this-setup"))
                    .chain(self.settings.overlays.iter().map(|o| views::describe(t, o)))
                    .collect();
                let (budget, batch) = (self.settings.budget_bytes, self.settings.batch);
                views::sweep_chart(ui, t, &self.derived.sweep, &names, budget, batch);
                views::explain(ui, t, "explain-sweep");
            }
            Tab::Allocator => {
                if let Some(m) = memory {
                    let op = m.timeline.get(self.scrub.min(m.timeline.len().saturating_sub(1))).and_then(|p| p.op);
                    // The driver's blocks describe the end of the last real step.
                    let device = (source == Source::Allocator).then(|| self.device.reported()).flatten();
                    let drawn = ui.scope(|ui| views::allocator_map(ui, t, &plan, m, op, device));
                    views::mark(ui, "allocator-map", drawn.response.rect);
                }
                views::explain(ui, t, "explain-allocator");
            }
            Tab::Training => views::training(ui, t, &self.losses, &self.step_secs),
            Tab::RealModels | Tab::Snapshot => {}
        }
    }
}

impl eframe::App for OomlabApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, "settings", &self.settings);
        eframe::set_value(storage, "lang", &self.lang());
        eframe::set_value(storage, "challenges_done", &self.challenges_done);
    }
}
