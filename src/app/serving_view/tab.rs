//! The Serving tab on the desktop: its settings, the run an iteration or two per frame, and the
//! finished runs' figures.

use egui::{RichText, Ui};

use super::charts::{self, layout_name};

use crate::backend::{BackendKind, Gpu, ready_now};
use crate::i18n::Catalog;
use crate::serving::{Layout, Report, ServingConfig, Session};
use crate::units::format_bytes;

/// Iterations carried out per frame: a decode step and its prefills each, a few milliseconds on
/// the CPU, so the page stays responsive while the run goes on.
const ITERATIONS_PER_FRAME: usize = 2;

/// The tab's settings, the run in progress and the finished runs.
pub struct ServingTab {
    pub layout: Layout,
    pub requests: usize,
    pub budget_mib: u64,
    pub block_size: usize,
    session: Option<Session>,
    /// Layouts still to serve ("all three").
    queue: Vec<Layout>,
    /// The last finished run of each layout.
    pub reports: Vec<Report>,
    error: Option<String>,
}

impl Default for ServingTab {
    fn default() -> Self {
        Self {
            layout: Layout::Paged,
            requests: crate::serving::REQUESTS,
            budget_mib: crate::serving::BUDGET >> 20,
            block_size: crate::serving::BLOCK_SIZE,
            session: None,
            queue: Vec::new(),
            reports: Vec::new(),
            error: None,
        }
    }
}

impl ServingTab {
    /// Whether a run is in progress.
    pub fn running(&self) -> bool {
        self.session.is_some()
    }

    /// The run's settings for `layout`.
    fn config(&self, vocab: usize, layout: Layout) -> ServingConfig {
        ServingConfig {
            layout,
            requests: self.requests,
            budget: self.budget_mib << 20,
            block_size: self.block_size,
            ..ServingConfig::new(vocab)
        }
    }

    /// Starts serving with `layouts`, one after the other.
    pub fn start(&mut self, layouts: &[Layout], vocab: usize, gpu: Option<&Gpu>) {
        self.queue = layouts.iter().rev().copied().collect();
        self.error = None;
        self.next(vocab, gpu);
    }

    /// Opens the next queued layout's session (on the GPU where one is ready and the run can
    /// wait for it: natively; the browser's page serves on the CPU, a few iterations a frame).
    fn next(&mut self, vocab: usize, gpu: Option<&Gpu>) {
        let Some(layout) = self.queue.pop() else { return };
        let cfg = self.config(vocab, layout);
        let opened = match gpu.filter(|_| cfg!(not(target_arch = "wasm32"))) {
            #[cfg(not(target_arch = "wasm32"))]
            Some(g) => pollster::block_on(Session::drawn(&cfg, BackendKind::Gpu, Some(g))),
            _ => ready_now(Session::drawn(&cfg, BackendKind::Cpu, None))
                .unwrap_or_else(|| Err(crate::backend::BackendError::Cancelled.into())),
        };
        match opened {
            Ok(s) => self.session = Some(s),
            Err(e) => {
                self.error = Some(e.to_string());
                self.queue.clear();
            }
        }
    }

    /// Carries the run on: a few iterations, then the next layout once one finishes.
    pub fn pump(&mut self, vocab: usize, gpu: Option<&Gpu>) {
        for _ in 0..ITERATIONS_PER_FRAME {
            let Some(session) = self.session.as_mut() else { return };
            if session.done() {
                break;
            }
            #[cfg(not(target_arch = "wasm32"))]
            pollster::block_on(session.advance());
            #[cfg(target_arch = "wasm32")]
            let _ = ready_now(session.advance());
        }
        if self.session.as_ref().is_some_and(Session::done)
            && let Some(session) = self.session.take()
        {
            let report = session.report();
            self.reports.retain(|r| r.layout != report.layout);
            self.layout = report.layout;
            self.reports.push(report);
            self.next(vocab, gpu);
        }
    }

    /// The tab.
    pub fn ui(&mut self, ui: &mut Ui, t: &Catalog, vocab: usize, gpu: Option<&Gpu>) {
        ui.heading(t.text("serving-heading"));
        ui.label(t.text("serving-intro"));
        ui.add_space(4.0);
        let idle = self.session.is_none();
        ui.add_enabled_ui(idle, |ui| self.controls(ui, t));
        ui.horizontal_wrapped(|ui| {
            let serve = ui.add_enabled(idle, egui::Button::new(t.text("serving-run"))).clicked();
            let all = ui.add_enabled(idle, egui::Button::new(t.text("serving-run-all"))).clicked();
            if serve {
                self.start(&[self.layout], vocab, gpu);
            } else if all {
                self.start(&Layout::ALL, vocab, gpu);
            }
        });
        if let Some(e) = &self.error {
            ui.colored_label(ui.visuals().error_fg_color, e);
        }
        if let Some(session) = &self.session {
            let (iterations, served) = session.progress();
            let cfg = session.config();
            ui.label(t.format_text(
                "serving-running",
                &[
                    ("layout", layout_name(t, cfg.layout)),
                    ("iteration", iterations.len().to_string()),
                    ("served", served.to_string()),
                    ("requests", cfg.requests.to_string()),
                    ("running", iterations.last().map_or(0, |i| i.running).to_string()),
                ],
            ));
            charts::over_iterations(ui, t, iterations);
            ui.ctx().request_repaint();
        } else if let Some(r) = self.reports.iter().find(|r| r.layout == self.layout) {
            result(ui, t, r);
        } else {
            ui.label(t.text("serving-none"));
        }
        if self.reports.len() > 1 {
            ui.separator();
            charts::compare(ui, t, &self.reports);
        }
        self.pump(vocab, gpu);
    }

    fn controls(&mut self, ui: &mut Ui, t: &Catalog) {
        ui.label(RichText::new(t.text("serving-layout")).strong());
        for layout in Layout::ALL {
            let hint = t.format_text(
                match layout {
                    Layout::Contiguous => "serving-layout-contiguous-hint",
                    Layout::Growing => "serving-layout-growing-hint",
                    Layout::Paged => "serving-layout-paged-hint",
                },
                &[("block", self.block_size.to_string())],
            );
            ui.radio_value(&mut self.layout, layout, format!("{}: {hint}", layout_name(t, layout)));
        }
        // One slider a line: a phone's width holds one with its name.
        ui.add(egui::Slider::new(&mut self.requests, 8..=512).text(t.text("serving-requests")));
        ui.add(egui::Slider::new(&mut self.budget_mib, 26..=128).text(t.text("serving-budget")));
        ui.horizontal_wrapped(|ui| {
            ui.label(t.text("serving-block-size"));
            for bs in [1usize, 4, 8, 16, 32] {
                ui.selectable_value(&mut self.block_size, bs, bs.to_string());
            }
        });
    }
}

/// A finished run: the setup, what the cache held at its peak and over the run, and how.
fn result(ui: &mut Ui, t: &Catalog, r: &Report) {
    let s = &r.setup;
    let served = r.requests.iter().filter(|s| !s.refused).count();
    ui.label(
        RichText::new(t.format_text(
            "serving-summary",
            &[
                ("layout", layout_name(t, r.layout)),
                ("served", served.to_string()),
                ("backend", r.backend.to_string()),
                ("peak", r.peak_concurrent.to_string()),
                ("preemptions", r.preemptions.to_string()),
            ],
        ))
        .strong(),
    );
    ui.label(t.format_text(
        "serving-setup",
        &[
            ("budget", format_bytes(s.budget_bytes)),
            ("weights", format_bytes(s.weights_bytes)),
            ("activations", format_bytes(s.activation_peak_bytes)),
            ("cache", format_bytes(s.kv_pool_bytes)),
            ("tokens", s.capacity_tokens.to_string()),
            ("token_bytes", r.kv_bytes_per_token.to_string()),
        ],
    ));
    ui.label(t.format_text(
        "serving-peak",
        &[("reserved", format_bytes(r.kv_reserved_peak_bytes)), ("used", format_bytes(r.kv_used_at_peak_bytes))],
    ));
    ui.label(t.format_text("serving-waste", &[("percent", format!("{:.1}", 100.0 * r.waste_fraction))]));
    if let Some(oom) = &r.oom {
        ui.colored_label(ui.visuals().error_fg_color, t.format_text("serving-oom", &[("message", oom.clone())]));
    }
    charts::waste_parts(ui, t, r);
    charts::over_iterations(ui, t, &r.iterations);
    charts::block_map(ui, t, r);
}
