//! The eframe app: controls on the left; the views of the plan's prediction and of the steps the
//! engine runs on the right. It draws what the plan and the allocator say and computes no memory
//! itself.
//!
//! Its state is five parts, each owning its own and tested on its own, and the settings, which
//! change only through one door ([`settings::door`]):
//! - [`run::Run`]: the executor, the step in flight and what steps left behind;
//! - [`shown::Shown`]: what the views show, derived from the settings, and the tab (with the
//!   Serving tab's runs);
//! - [`teaching::Teaching`]: lessons, challenges and teacher links;
//! - [`chrome::Chrome`]: language and fonts, notices, the drawer, present mode;
//! - [`snapshot_view::SnapshotState`]: the PyTorch snapshot the Snapshot tab shows;
//! - [`Classroom`]: a class taught with `oomlab serve` (the welcome's third way in).
//!
//! [`OomlabApp`] holds them and runs the frame: it hands each part what it needs of the others
//! and carries out what they ask ([`teaching::Asks`], [`keys::Keys`], [`export::ExportAsk`]).

pub mod a11y;
pub mod chrome;
mod controls;
pub mod cpu_worker;
mod derived;
mod dropped;
pub mod estimate_runtime;
pub mod estimate_view;
pub mod export;
pub mod fonts;
mod keys;
pub mod lang;
mod notice;
mod opening;
pub mod run;
pub mod serving_view;
pub mod settings;
pub mod shown;
mod slot;
pub mod snapshot_view;
pub mod store;
mod tab;
pub mod teaching;
pub mod timing;
mod toy;
pub mod views;

#[cfg(not(target_arch = "wasm32"))]
pub use chrome::wgpu_configuration;
pub use chrome::{NARROW_WIDTH, TOUCH_SIZE};
pub use controls::suggestions;
pub use derived::{Derived, EstimateDerived, SWEEP_BATCHES, sweep_batches};
pub use notice::Notice;
pub use settings::{DeviceSettings, Settings};

use egui::Color32;

use crate::backend::gpu::GpuContext;
use crate::i18n::Lang;
use crate::memory::Budget;
use chrome::Chrome;
use export::ExportAsk;
use keys::Keys;
use opening::Opening;
use run::Run;
use settings::door::{self, Change, Door};
use shown::Shown;
use snapshot_view::SnapshotState;
pub use tab::Tab;
use teaching::{Asks, Classroom, Control, Guess, Teaching, Way};
use views::Suggestion;

/// How often the page looks for the CPU worker's replies while a step runs there.
const WORKER_FRAME_MS: u64 = 50;

pub struct OomlabApp {
    /// Everything the user can set: persisted, and carried by a shared link. Changed only
    /// through `door` ([`OomlabApp::change`], [`OomlabApp::edit_settings`]).
    settings: Settings,
    door: Door,
    pub run: Run,
    pub shown: Shown,
    pub teaching: Teaching,
    pub chrome: Chrome,
    pub snapshot: SnapshotState,
    pub classroom: Classroom,
}

impl OomlabApp {
    /// The app as it opens: `system` is what the platform says the user asked of every program
    /// (the browser's reduced motion and more contrast), merged into the remembered or linked
    /// settings' preferences.
    pub fn new(cc: &eframe::CreationContext<'_>, system: settings::Prefs) -> Self {
        let mut notices = Vec::new();
        let run = Run::for_render_state(cc.wgpu_render_state.as_ref(), &mut notices);
        let vocab = run.vocab();
        let mut remembered: Settings = store::get(cc, "settings").unwrap_or_default();
        if remembered.clone().clamped() != remembered || remembered.plan(vocab).is_err() {
            remembered = Settings::default();
        }
        let opening = Opening::here();
        let settings = opening.settings(remembered, system, vocab, &mut notices);
        let mut app = Self::with(settings, run, notices);
        app.set_lang(Chrome::initial_lang(cc));
        // A newcomer without a link gets the welcome; a link opens where it points.
        let (done, welcomed) = (store::get(cc, "challenges_done"), store::get(cc, "welcomed"));
        app.teaching.remembered(done.unwrap_or_default(), welcomed.unwrap_or(false), opening.linked);
        if opening.teaches() {
            app.classroom.take_key_from_link(&opening.hash);
            app.choose_way(Way::Teach);
            app.classroom.start(Some(&cc.egui_ctx));
        }
        // A shared challenge link opens the challenge; a teacher link its chapter and the
        // controls it locks or hides.
        if let Some(i) = teaching::challenge_from_url_hash(&opening.hash) {
            app.start_challenge(i);
            app.teaching.open_challenges();
        }
        if !opening.hash.is_empty() {
            app.apply_teacher_link(&opening.hash);
        }
        // A link's own tab wins over its chapter's.
        if let Some(tab) = opening.tab {
            app.shown.tab = tab;
        }
        app.run.train_for(opening.steps);
        app
    }

    fn with(mut settings: Settings, run: Run, notices: Vec<Notice>) -> Self {
        door::rules(&mut settings);
        let shown = Shown::new(&settings, run.vocab());
        Self {
            settings,
            door: Door::default(),
            run,
            shown,
            teaching: Teaching::default(),
            chrome: Chrome::new(notices),
            snapshot: SnapshotState::default(),
            classroom: Classroom::default(),
        }
    }

    /// An app without a window or device, on the CPU backend (for tests).
    pub fn headless(settings: Settings) -> Self {
        Self::with(settings, Run::cpu_here(), Vec::new())
    }

    /// An app without a window whose CPU steps run in a worker reached through `transport` (for
    /// tests: the browser's Web Worker path, over a thread).
    pub fn headless_worker(settings: Settings, transport: Box<dyn cpu_worker::Transport>) -> Self {
        Self::with(settings, Run::worker(transport), Vec::new())
    }

    /// An app without a window computing on `ctx` (for tests: the asynchronous GPU path).
    pub fn headless_gpu(settings: Settings, ctx: GpuContext) -> Self {
        Self::with(settings, Run::gpu(ctx), Vec::new())
    }

    /// The settings as they are now.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Sends a change through the door and applies it (with the rules) at once.
    pub fn change(&mut self, change: Change) {
        self.door.send(change);
        self.apply_settings();
    }

    /// Edits a copy of the settings as a control would, and sends the edit through the door.
    pub fn edit_settings(&mut self, edit: impl FnOnce(&mut Settings)) {
        let mut draft = self.settings.clone();
        edit(&mut draft);
        self.edited(draft);
    }

    /// Sends what the widgets (or a panel) left in `draft`, if anything, and applies it.
    fn edited(&mut self, draft: Settings) {
        if draft != self.settings {
            self.change(Change::Edited(Box::new(draft)));
        }
    }

    /// Starts training, as the Train button does.
    pub fn start_training(&mut self) {
        self.run.training = true;
    }

    /// Training steps completed since the settings last changed.
    pub fn steps_done(&self) -> usize {
        self.run.steps_done()
    }

    /// Whether no step is running or waiting to run.
    pub fn is_idle(&self) -> bool {
        self.run.is_idle()
    }

    /// The language shown now (a language waiting for its font is not shown yet).
    pub fn lang(&self) -> Lang {
        self.chrome.lang()
    }

    /// Switches the language shown, nothing else; Chinese waits for its font (web: fetched now).
    pub fn set_lang(&mut self, lang: Lang) {
        if self.chrome.set_lang(lang) {
            self.update_link();
        }
    }

    /// Takes a way in from the welcome: the lessons, the app as it is, or a class (with the
    /// lessons beside it, whose chapters the class follows).
    pub fn choose_way(&mut self, way: Way) {
        self.teaching.chose_way();
        if way == Way::Teach {
            self.classroom.open = true;
        }
        if way != Way::Explore && self.teaching.lesson().is_none() {
            self.open_chapter(0);
        }
    }

    /// Opens lesson chapter `index` (clamped): its settings, its tab, a fresh question.
    pub fn open_chapter(&mut self, index: usize) {
        let mut draft = self.settings.clone();
        let asks = self.teaching.open_chapter(index, &mut draft);
        self.edited(draft);
        self.carry_out(asks);
    }

    /// Sets the learner's guess.
    pub fn guess(&mut self, guess: Guess) {
        self.teaching.guess(guess);
    }

    /// Reveals the answer: judges the guess against the prediction and runs a real step.
    pub fn reveal(&mut self) {
        self.teaching.reveal(&self.settings, self.run.vocab());
    }

    /// Starts challenge `index` from its setup.
    pub fn start_challenge(&mut self, index: usize) {
        let mut draft = self.settings.clone();
        self.teaching.start_challenge(index, &mut draft);
        self.edited(draft);
    }

    /// Applies a link's teaching parts: its lesson chapter, and the controls it locks or hides.
    pub fn apply_teacher_link(&mut self, hash: &str) {
        let mut draft = self.settings.clone();
        let asks = self.teaching.apply_teacher_link(hash, &mut draft, &mut self.chrome.notices);
        self.edited(draft);
        self.carry_out(asks);
    }

    /// The link for the current setup, language, chapter or challenge, locking and hiding these.
    pub fn teacher_link(&self, lock: &[Control], hide: &[Control]) -> String {
        self.teaching.teacher_link(&self.settings, self.lang(), lock, hide)
    }

    /// The page's own link: the settings, the language, the open chapter or challenge, what a
    /// teacher's link locks or hides; a reload keeps the locks, a copied link the same view.
    pub fn page_link(&self) -> String {
        let r = self.teaching.restrictions();
        self.teacher_link(&r.locked, &r.hidden)
    }

    /// Puts [`Self::page_link`] in the page's address (web).
    fn update_link(&self) {
        lang::set_page_link(&self.page_link());
    }

    /// Applies a suggestion from the OOM panel.
    pub fn apply_suggestion(&mut self, s: Suggestion) {
        self.change(Change::Suggest(s));
    }

    /// Opens a snapshot from its bytes and shows it.
    pub fn open_snapshot_bytes(&mut self, name: &str, bytes: &[u8]) {
        self.snapshot.open_bytes(name, bytes);
    }

    /// Opens a snapshot file (read on a thread on the desktop).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_snapshot_path(&mut self, path: std::path::PathBuf, ctx: &egui::Context) {
        self.snapshot.open_path(path, ctx);
    }

    /// Does what a teaching panel asked for.
    fn carry_out(&mut self, asks: Asks) {
        if let Some(tab) = asks.tab {
            self.shown.tab = tab;
        }
        if asks.open_drawer {
            self.chrome.drawer_open = true;
        }
    }

    /// Applies the changes sent through the door, then the rules (a teacher link's locked and
    /// hidden controls keep their values, whatever changed them), and brings what the views
    /// show up to date: when the toy's part changed, the run starts over; the page's link
    /// follows any change.
    fn apply_settings(&mut self) {
        let restrictions = self.teaching.restrictions();
        let changed = self.door.apply(&mut self.settings, |s| restrictions.enforce(s));
        if self.shown.update(&self.settings, self.run.vocab(), changed) {
            self.run.settings_changed();
        }
        if changed.any() {
            self.update_link();
        }
    }

    /// Applies this frame's shortcuts; whether Space asked for a step.
    fn apply_keys(&mut self, ctx: &egui::Context) -> bool {
        let keys = Keys::read(ctx);
        if keys.batch_up {
            self.change(Change::DoubleBatch);
        } else if keys.batch_down {
            self.change(Change::HalveBatch);
        }
        if keys.fit {
            views::request_fit(ctx);
        }
        if keys.present {
            self.change(Change::Projector);
        }
        if keys.help {
            self.chrome.show_shortcuts = !self.chrome.show_shortcuts;
        }
        if let Some(chapter) = self.teaching.lesson().map(|l| l.chapter) {
            if keys.previous_chapter && chapter > 0 {
                self.open_chapter(chapter - 1);
            } else if keys.next_chapter {
                self.open_chapter(chapter + 1);
            } else if keys.reveal {
                self.reveal();
            }
        }
        keys.step
    }

    /// A reveal's real step (batches of their own length start over: the question's batch, the
    /// batches before it run first when it is a later one).
    fn reveal_step(&mut self) -> bool {
        let Some(upto) = self.teaching.take_step_request() else { return false };
        if self.settings.device.batching.varies_in_length() && (self.run.steps_done() > 0 || upto > 0) {
            self.run.settings_changed();
            self.shown.follow_step(self.run.vocab(), 0);
            if upto > 0 {
                self.run.train_for(upto as usize + 1);
                return false;
            }
        }
        true
    }

    /// Advances the run one frame; a finished step is checked against the challenge.
    fn drive(&mut self, now: f64, want_step: bool) {
        let (seed, budget) = (self.settings.seed, Budget::Bytes(self.settings.device.budget_bytes));
        let fitted = self.run.oom.is_none();
        let finished = self.run.drive(now, want_step, &self.shown.derived.plan, seed, budget, &mut self.chrome.notices);
        // A batch of documents of its own length: the views show the step that ran (or failed).
        let ran = if finished.is_some() { self.run.steps_done().checked_sub(1) } else { None };
        if let Some(step) = ran.or_else(|| (fitted && self.run.oom.is_some()).then(|| self.run.steps_done())) {
            self.shown.follow_step(self.run.vocab(), step as u64);
        }
        if finished.is_some() {
            let seq = self.shown.derived.plan.as_ref().map_or(self.settings.seq, |p| p.shape.seq);
            self.run.times.mark(seq, self.run.measured.as_ref());
        }
        if let (Some(done), Some(memory)) = (finished, &self.run.measured) {
            let (t, vocab) = (&self.chrome.catalog, self.run.vocab());
            self.teaching.check_challenge(&self.settings, memory, done.secs, t, vocab);
        }
    }

    /// The whole window's content (also what the tests render).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        if self.chrome.poll_fonts(ui.ctx()) {
            self.update_link();
        }
        let key_step = self.apply_keys(ui.ctx());
        let narrow = self.chrome.begin_frame(ui, self.settings.prefs, &self.run.engine.log_name());
        let vocab = self.run.vocab();
        if narrow && self.chrome.drawer_open {
            egui::CentralPanel::default().show(ui, |ui| {
                if ui.button(self.chrome.tr("drawer-close")).clicked() {
                    self.chrome.drawer_open = false;
                }
                let mut draft = self.settings.clone();
                egui::ScrollArea::vertical()
                    .show(ui, |ui| self.teaching.controls(ui, &self.chrome.catalog, &mut draft, vocab));
                self.edited(draft);
            });
            // A step in flight goes on while the drawer is open.
            self.drive(ui.input(|i| i.time), key_step);
        } else if self.classroom.projection.full && self.classroom.class().is_some() {
            // The projector's view of the class, full screen: its buttons reveal and start rounds.
            let (t, tolerance) = (&self.chrome.catalog, self.teaching.tolerance());
            let asks = egui::CentralPanel::default().show(ui, |ui| self.classroom.full_view(ui, t, tolerance)).inner;
            if asks.reveal {
                self.reveal();
            }
            let step = key_step || self.reveal_step();
            self.drive(ui.input(|i| i.time), step);
        } else {
            if !narrow {
                egui::Panel::left("controls").resizable(true).default_size(300.0).show(ui, |ui| {
                    let mut draft = self.settings.clone();
                    egui::ScrollArea::vertical()
                        .show(ui, |ui| self.teaching.controls(ui, &self.chrome.catalog, &mut draft, vocab));
                    self.edited(draft);
                });
            }
            if self.teaching.panel_open() || self.classroom.open {
                // Beside the views on a wide screen, under them on a phone.
                let panel = if narrow { egui::Panel::bottom("lessons") } else { egui::Panel::right("lessons") };
                let mut asks = Asks::default();
                let mut open_lessons = false;
                // Under the views, at most about half the height (a short window at 200 % text).
                let size = if narrow { (ui.available_height() * 0.45).min(320.0) } else { 340.0 };
                let mut draft = self.settings.clone();
                panel.resizable(true).default_size(size).show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| {
                        let t = &self.chrome.catalog;
                        if self.classroom.open {
                            open_lessons = self.classroom.panel(ui, t).open_lessons;
                            ui.separator();
                        }
                        if self.teaching.challenges_open() {
                            self.teaching.challenges_panel(ui, t, &mut draft, vocab);
                        } else if self.teaching.lesson().is_some() {
                            asks = self.teaching.lessons_panel(ui, t, &mut draft, vocab, narrow);
                        }
                    });
                });
                self.edited(draft);
                self.carry_out(asks);
                if open_lessons && self.teaching.lesson().is_none() {
                    self.open_chapter(0);
                }
            }
            self.main_area(ui, narrow, key_step);
        }
        let (tab, model) = dropped::route(ui.ctx(), &self.settings.estimate, &mut self.snapshot);
        if let Some(tab) = tab {
            self.shown.tab = tab;
        }
        if let Some(model) = model.filter(|m| *m != self.settings.estimate) {
            self.change(Change::RealModel(Box::new(model)));
        }
        self.class_frame(ui.ctx());
        let revealed = self.teaching.revealed_text(&self.chrome.catalog);
        a11y::announce(&mut self.chrome.announcer, &self.chrome.catalog, &self.run, revealed, ui.ctx());
        store::autosave(self);
        self.chrome.shortcuts_window(ui.ctx());
        self.teaching.share_window(ui.ctx(), &self.chrome.catalog, &self.settings);
        self.teaching.highlight(ui.ctx());
        self.teaching.log_drawn_controls();
        if self.run.busy() {
            // A step in the worker needs a frame only when its progress or result may have come
            // (about every 50 ms): a page redrawn continuously would take the CPU the worker
            // computes on (in headless Chromium a software-rendered frame costs ~100 ms).
            if self.run.stepping_in_worker() {
                ui.ctx().request_repaint_after(std::time::Duration::from_millis(WORKER_FRAME_MS));
            } else {
                ui.ctx().request_repaint();
            }
        }
    }

    /// The class follows the lesson (its reveal once the real step ran), the list of students
    /// gets its font, an answers file asked for is saved, and a newcomer gets the welcome.
    fn class_frame(&mut self, ctx: &egui::Context) {
        let done = self.run.is_idle() && !self.teaching.step_pending();
        // A revealed chapter's answer is read again from the step its reveal ran.
        let record = self.run.record().filter(|_| done && self.shown.is_for(&self.settings));
        if done {
            self.teaching.settle(&self.settings, self.run.vocab(), record);
        }
        let (lesson, vocab) = (self.teaching.lesson(), self.run.vocab());
        self.classroom.follow_lesson(lesson, &self.settings, vocab, done, Some(ctx));
        self.chrome.want_names_font(self.classroom.students.open);
        if let (Some(bytes), Some(class)) = (self.classroom.csv.take(), self.classroom.class()) {
            let name = format!("oomlab-class-{}.csv", class.code);
            let saved = export::save(self.chrome.export_dir.as_deref(), &name, &bytes, "text/csv");
            self.chrome.status = Some(saved.unwrap_or_else(|e| e));
        }
        if self.teaching.welcome_showing()
            && let Some(way) = teaching::welcome_ui(ctx, &self.chrome.catalog)
        {
            self.choose_way(way);
        }
    }

    /// The views' side: the top bar, notices, run buttons, exports and the selected view.
    fn main_area(&mut self, ui: &mut egui::Ui, narrow: bool, key_step: bool) {
        // On a phone, or a short window at 200 % text, the buttons and the view scroll together,
        // so that the view stays in reach below them.
        egui::CentralPanel::default().show(ui, |ui| match narrow {
            true => _ = egui::ScrollArea::vertical().id_salt("phone").show(ui, |ui| self.main(ui, narrow, key_step)),
            false => self.main(ui, narrow, key_step),
        });
    }

    fn main(&mut self, ui: &mut egui::Ui, narrow: bool, key_step: bool) {
        let now = ui.input(|i| i.time);
        {
            ui.horizontal_wrapped(|ui| {
                if narrow && ui.button(self.chrome.tr("drawer-open")).clicked() {
                    self.chrome.drawer_open = true;
                }
                ui.heading(self.chrome.tr("app-title"));
                if self.chrome.language_switch(ui) {
                    self.update_link();
                }
                if ui.selectable_label(self.teaching.lesson().is_some(), self.chrome.tr("lessons")).clicked() {
                    let mut draft = self.settings.clone();
                    let asks = self.teaching.toggle_lessons(&mut draft);
                    self.edited(draft);
                    self.carry_out(asks);
                }
                if ui.selectable_label(self.teaching.challenges_open(), self.chrome.tr("challenges")).clicked() {
                    self.teaching.toggle_challenges();
                }
                if ui.selectable_label(self.classroom.open, self.chrome.tr("class-toggle")).clicked() {
                    self.classroom.open = !self.classroom.open;
                }
                if ui.button("?").on_hover_text(self.chrome.tr("keys-title")).clicked() {
                    self.chrome.show_shortcuts = !self.chrome.show_shortcuts;
                }
            });
            self.chrome.notices_ui(ui);
            let progress = self.run.worker_progress();
            let t = &self.chrome.catalog;
            let clicked = controls::run_buttons_ui(ui, t, &mut self.run.training, &self.run.engine, progress);
            let step = clicked || key_step || self.reveal_step();
            self.drive(now, step);
            if let Some(e) = &self.run.error {
                ui.colored_label(Color32::RED, e.text(&self.chrome.catalog));
            }
            self.chrome.announcer.ui(ui);
            let real_models = self.shown.tab == Tab::RealModels;
            if let Some(ask) = export::buttons_ui(ui, &self.chrome.catalog, real_models, self.chrome.status.as_ref()) {
                self.export(ask, ui.ctx());
            }
            export::save_screenshot(&mut self.chrome);
            // The selected view gets the room: its chart takes what the window has left below
            // the tabs and the lines around the chart.
            tab::tabs_ui(ui, &self.chrome.catalog, &mut self.shown.tab);
            views::set_chart_height(ui.ctx(), ui.available_height() - 150.0);
            // Each tab keeps its own scroll position.
            match narrow {
                true => self.views(ui),
                false => {
                    _ = egui::ScrollArea::vertical().id_salt(("views", self.shown.tab)).show(ui, |ui| self.views(ui))
                }
            }
        }
    }

    /// Carries out an export button.
    fn export(&mut self, ask: ExportAsk, ctx: &egui::Context) {
        if ask == ExportAsk::Share {
            self.teaching.open_share();
        }
        let (shown, measured) = (&self.shown, &self.run.measured);
        let status = export::carry_out(ask, &self.chrome, shown, measured, self.settings.device.budget_bytes, ctx);
        self.chrome.status = status.map(|s| s.unwrap_or_else(|e| e)).or(self.chrome.status.take());
    }

    /// The tabs, above the scrolling view so that they stay in reach.
    fn views(&mut self, ui: &mut egui::Ui) {
        // Touch-sized controls (a phone) stop at the tabs: a view's rows keep their height.
        ui.spacing_mut().interact_size.y = ui.ctx().global_style().spacing.interact_size.y;
        views::set_veil(ui.ctx(), self.teaching.veil());
        let mut draft = self.settings.clone();
        match self.shown.tab {
            Tab::RealModels => estimate_view::page(ui, &self.chrome.catalog, &mut draft.estimate, &mut self.shown),
            Tab::Serving => self.shown.serving.ui(ui, &self.chrome.catalog, self.run.vocab(), None),
            Tab::Snapshot => {
                let toy = self.shown.memory(&self.run.measured).filter(|_| !views::veil(ui.ctx()).step);
                self.snapshot.tab_ui(ui, &self.chrome.catalog, toy);
            }
            _ => toy::toy_views(ui, &self.chrome.catalog, &mut draft, &self.run, &mut self.shown, &self.teaching),
        }
        self.edited(draft);
    }
}

impl eframe::App for OomlabApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        store::save(storage, self);
    }
}
