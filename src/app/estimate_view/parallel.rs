//! The Real models view's pipeline and context parallelism: the controls (stages and their
//! schedule; the context-parallel GPUs and how they attend across the split), and each stage's
//! peak under the breakdown, the most loaded named; and the box that counts a model's
//! multi-token-prediction modules.

use egui::{RichText, Ui};

use crate::estimate::pipeline::Schedule;
use crate::estimate::{ContextKind, Estimate, Setup};
use crate::i18n::Catalog;
use crate::units::format_bytes;

/// The controls: pipeline stages (up to the layers) and schedule, context-parallel GPUs and kind.
pub fn controls(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    let prefix = |key: &str| format!("{} ", t.text(key));
    ui.horizontal_wrapped(|ui| {
        let stages = egui::DragValue::new(&mut s.parallel.pipeline).range(1..=s.arch.layers.clamp(1, 1024));
        ui.add(stages.prefix(prefix("real-pipeline")));
        let name = |sch: Schedule| match sch {
            Schedule::OneFOneB => t.text("real-schedule-1f1b"),
            Schedule::Interleaved(_) => t.text("real-schedule-interleaved"),
        };
        let current = s.parallel.schedule;
        ui.add_enabled_ui(s.parallel.pipeline > 1, |ui| {
            egui::ComboBox::new("real_schedule", t.text("real-schedule")).selected_text(name(current)).show_ui(
                ui,
                |ui| {
                    for sch in [Schedule::OneFOneB, Schedule::Interleaved(2)] {
                        let chosen = std::mem::discriminant(&current) == std::mem::discriminant(&sch);
                        if ui.selectable_label(chosen, name(sch)).clicked() && !chosen {
                            s.parallel.schedule = sch;
                        }
                    }
                },
            );
            if let Schedule::Interleaved(v) = &mut s.parallel.schedule {
                ui.add(egui::DragValue::new(v).range(2..=64).prefix(prefix("real-chunks")));
            }
        });
        ui.add(egui::DragValue::new(&mut s.parallel.context).range(1..=1024).prefix(prefix("real-context-parallel")));
        ui.add_enabled_ui(s.parallel.context > 1, |ui| {
            for (kind, key) in
                [(ContextKind::Ring, "real-context-ring"), (ContextKind::Ulysses, "real-context-ulysses")]
            {
                ui.radio_value(&mut s.parallel.context_kind, kind, t.text(key));
            }
        });
    });
}

/// DeepSeek-V3's (GLM-4.5's) multi-token-prediction modules, which its config describes but
/// transformers' model leaves out: a box to count them, shown for a model that has them.
pub fn multi_token_prediction(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    let catalog = crate::estimate::catalog::entries().iter().find(|e| e.model.arch.name == s.arch.name);
    let available = catalog.map_or(s.arch.block.mtp, |e| e.model.mtp);
    if available == 0 {
        return;
    }
    let mut on = s.arch.block.mtp > 0;
    if ui.checkbox(&mut on, t.text("real-mtp")).changed() {
        s.arch.block.mtp = if on { available } else { 0 };
    }
}

/// Each pipeline stage's peak, the most loaded (whose breakdown the table shows) named first.
pub fn stages(ui: &mut Ui, t: &Catalog, s: &Setup, e: &Estimate) {
    let Some(worst) = e.stages.iter().max_by_key(|st| st.peak_bytes) else { return };
    ui.label(t.format(
        "real-stages",
        &[
            ("count", (e.stages.len() as u64).into()),
            ("schedule", s.parallel.schedule.name().into()),
            ("worst", worst.stage.into()),
        ],
    ));
    for st in &e.stages {
        let holds = st.holds();
        let text = t.format(
            "real-stage",
            &[
                ("stage", st.stage.into()),
                ("layers", st.layers.into()),
                ("holds", holds.into()),
                ("flight", format!("{:.2}", st.micro_batches_in_flight).into()),
                ("peak", format_bytes(st.peak_bytes).into()),
            ],
        );
        let text = RichText::new(text);
        ui.label(if st.stage == worst.stage {
            text.strong()
        } else if st.fits {
            text
        } else {
            text.weak()
        });
    }
}
