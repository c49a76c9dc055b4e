//! The toy's views: the line saying what runs, the OOM panel with its fixes, and the selected
//! view of the step's memory — the allocator's account of the last real step, else the plan's
//! prediction.

use std::sync::Arc;

use egui::{Color32, RichText};

use super::run::Run;
use super::settings::Settings;
use super::shown::{self, Shown};
use super::teaching::Teaching;
use super::views::{self, Source};
use super::{Tab, controls};
use crate::i18n::Catalog;

/// The selected view of the toy (every tab but Real models and Snapshot). A fix picked in the
/// OOM panel is applied to `settings`.
pub(super) fn toy_views(
    ui: &mut egui::Ui,
    t: &Catalog,
    settings: &mut Settings,
    run: &Run,
    shown: &mut Shown,
    teaching: &Teaching,
) {
    let plan = match &shown.derived.plan {
        Ok(p) => Arc::clone(p),
        Err(e) => {
            ui.colored_label(Color32::RED, t.format("main-cannot-build", &[("error", e.text(t).into())]));
            return;
        }
    };
    let s = &settings;
    ui.label(t.format(
        "main-baseline",
        &[
            ("name", views::describe(t, &s.techniques()).into()),
            ("batch", s.batch.to_string().into()),
            ("micro", plan.shape.batch.to_string().into()),
            ("accum", s.accum.to_string().into()),
            // The batch's own length (batches of documents: the step's, not the slider's).
            ("seq", plan.shape.seq.to_string().into()),
            ("budget", views::size(t, s.device.budget_bytes).into()),
        ],
    ));
    let predicted_oom = shown.derived.predicted.as_ref().and_then(|p| p.as_ref().err());
    // A chapter that asks whether the step fits veils the answer, OOM or not, the same way.
    let fits_veiled = views::veil(ui.ctx()).fits;
    if fits_veiled {
        ui.label(RichText::new(t.text("veil-fits")).italics());
    }
    if let Some(oom) = run.oom.clone().or_else(|| predicted_oom.cloned()).filter(|_| !fits_veiled) {
        let suggestions = controls::suggestions(settings, run.vocab(), teaching.restrictions(), &oom);
        let real = run.oom.is_some();
        let panel = ui.group(|ui| {
            let picked = views::oom_panel(ui, t, &oom, &suggestions);
            if !real {
                ui.label(RichText::new(t.text("main-oom-predicted")).small());
            }
            picked
        });
        views::mark(ui, "oom-panel", panel.response.rect);
        if let Some(s) = panel.inner {
            settings.apply(s);
        }
    }
    shown.follow_veil(views::veil(ui.ctx()).step);
    // Borrowed field by field: the scrubber is moved while the memory is drawn.
    let Shown { derived, tab, scrub, rank, .. } = shown;
    let gpus = settings.device.parallel.gpus;
    if matches!(*tab, Tab::Timeline | Tab::Allocator) && settings.device.parallel.is_distributed() {
        rank_picker(ui, t, rank, gpus, run.other_ranks.is_empty());
    }
    *rank = (*rank).min(gpus.saturating_sub(1));
    // Another GPU's record once a real step ran; before, every GPU's prediction is GPU 0's (their
    // plans differ only in which shard each holds).
    let (memory, source) = match (*rank, run.other_ranks.get(rank.saturating_sub(1))) {
        (1.., Some(m)) if matches!(*tab, Tab::Timeline | Tab::Allocator) => (Some(m), Source::Allocator),
        _ => match shown::memory(&run.measured, derived) {
            Some((m, s)) => (Some(m), s),
            None => (None, Source::Predicted),
        },
    };
    // The chart tabs fold the breakdown into one line, so the chart gets the room.
    if let (Some(m), false) = (memory, *tab == Tab::Breakdown) {
        let veiled = views::veil(ui.ctx()).step;
        let hide = |bytes| views::veil::or_hidden(t, veiled, || views::size(t, bytes));
        ui.label(t.format(
            "main-peak-line",
            &[
                ("allocated", hide(m.peak_allocated_bytes()).into()),
                ("reserved", hide(m.peak_reserved_bytes()).into()),
                ("source", source.word(t).into()),
                ("budget", views::size(t, settings.device.budget_bytes).into()),
            ],
        ));
    }
    match *tab {
        Tab::Breakdown => {
            ui.heading(t.text("main-at-peak"));
            if let Some(Ok(predicted)) = &derived.predicted {
                let measured = run.measured.as_ref();
                let drawn = ui.scope(|ui| views::breakdown(ui, t, measured, predicted, &run.device));
                views::mark(ui, "breakdown", drawn.response.rect);
            }
            if plan.techniques.offload.is_on() {
                let engine = run.engine.log_name();
                let without = crate::plan::Techniques { offload: crate::plan::Offload::None, ..plan.techniques };
                let times = views::OffloadTimes {
                    with: run.times.median(&plan, &plan.techniques, &engine),
                    without: run.times.median(&plan, &without, &engine),
                    engine: run.engine.label(t),
                };
                let drawn = ui.scope(|ui| views::host_memory(ui, t, &plan, &times));
                views::mark(ui, "host-memory", drawn.response.rect);
            }
            egui::CollapsingHeader::new(t.text("main-model-state")).id_salt("model_state").show(ui, |ui| {
                views::model_state(ui, t, &plan);
            });
            views::explain(ui, t, "explain-breakdown");
        }
        Tab::Timeline => {
            if let Some(m) = memory {
                let drawn = ui.scope(|ui| views::timeline(ui, t, &plan, m, source, scrub));
                views::mark(ui, "timeline-chart", drawn.response.rect);
            }
            views::explain(ui, t, "explain-timeline");
        }
        Tab::Sweep => {
            let names: Vec<String> = std::iter::once(t.text("tech-this-setup"))
                .chain(settings.overlays.iter().map(|o| views::describe(t, o)))
                .collect();
            let (budget, batch) = (settings.device.budget_bytes, settings.batch);
            views::sweep_chart(ui, t, &derived.sweep, &names, budget, batch);
            views::explain(ui, t, "explain-sweep");
            ui.separator();
            let gpus = settings.device.parallel.gpus;
            let drawn = ui.scope(|ui| views::per_gpu_chart(ui, t, &derived.per_gpu, budget, batch, gpus));
            views::mark(ui, "per-gpu", drawn.response.rect);
            ui.separator();
            let drawn = ui.scope(|ui| views::ways_table(ui, t, &derived.ways, batch));
            views::mark(ui, "ways", drawn.response.rect);
        }
        Tab::Allocator => {
            if let Some(m) = memory {
                let op = m.timeline.get((*scrub).min(m.timeline.len().saturating_sub(1))).and_then(|p| p.op);
                // The driver's blocks describe the end of the last real step.
                let device = (source == Source::Allocator).then(|| run.device.reported()).flatten();
                let drawn = ui.scope(|ui| views::allocator_map(ui, t, &plan, m, source, op, device));
                views::mark(ui, "allocator-map", drawn.response.rect);
            } else if let Some((oom, m)) = derived
                .predicted
                .as_ref()
                .and_then(|p| p.as_ref().err())
                .and_then(|o| o.at_failure.as_deref().map(|m| (o, m)))
            {
                // A step that does not fit: the segments as they stood when it failed — where
                // the free memory was, and why none of it would do.
                // While a question asks whether it fits, the map stands at the scrubber like any
                // step's: the failing op would say that it failed.
                let op = if views::veil(ui.ctx()).fits {
                    m.timeline.get((*scrub).min(m.timeline.len().saturating_sub(1))).and_then(|p| p.op)
                } else {
                    let args = [("tensor", oom.tensor_name.clone().into()), ("op", oom.op_label.clone().into())];
                    ui.label(t.format("alloc-at-oom", &args));
                    oom.op
                };
                let drawn = ui.scope(|ui| views::allocator_map(ui, t, &plan, m, Source::Predicted, op, None));
                views::mark(ui, "allocator-map", drawn.response.rect);
            }
            views::explain(ui, t, "explain-allocator");
        }
        Tab::Training => views::training(ui, t, &run.losses, &run.times.step_secs, &run.times.memory),
        Tab::RealModels | Tab::Snapshot | Tab::Serving => {}
    }
}

/// Which simulated GPU the timeline and the allocator map show.
fn rank_picker(ui: &mut egui::Ui, t: &Catalog, rank: &mut usize, gpus: usize, predicted: bool) {
    ui.horizontal_wrapped(|ui| {
        ui.label(t.text("rank-picker"));
        for k in 0..gpus {
            ui.selectable_value(rank, k, t.format("rank-gpu", &[("k", k.to_string().into())]));
        }
    });
    if predicted {
        ui.label(RichText::new(t.text("rank-same")).small());
    }
}
