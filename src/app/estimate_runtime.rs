//! The Real models view's runtime profiles (fused kernels or Hugging Face eager): the
//! choice, both verdicts side by side while none is chosen, one layer's saved tensors by name
//! with the function that saves each, and the measurements that replace the assumptions.

use egui::{RichText, Ui};

use super::derived::RuntimeDerived;
use super::views::size;
use crate::estimate::{Estimate, Runtime, Saved, Setup};
use crate::i18n::Catalog;

fn profile_name(t: &Catalog, r: Option<Runtime>) -> String {
    t.text(match r {
        None => "real-runtime-either",
        Some(Runtime::HfEager) => "real-runtime-hf",
        Some(Runtime::Fused | Runtime::Oomlab) => "real-runtime-fused",
    })
}

/// The profile's choice and the measurements a user may type in.
pub fn controls(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    ui.horizontal_wrapped(|ui| {
        egui::ComboBox::new("estimate_runtime", t.text("real-runtime"))
            .selected_text(profile_name(t, s.runtime))
            .show_ui(ui, |ui| {
                for r in [None, Some(Runtime::Fused), Some(Runtime::HfEager)] {
                    ui.selectable_value(&mut s.runtime, r, profile_name(t, r));
                }
            });
    });
    ui.add_enabled_ui(s.fixed_costs, |ui| {
        ui.horizontal_wrapped(|ui| {
            let mut on = s.measured.context_bytes.is_some();
            let label = ui.checkbox(&mut on, t.text("real-measured-context")).id;
            let mut mib = s.measured.context_bytes.map_or(500.0, |b| b as f64 / (1u64 << 20) as f64);
            ui.add_enabled(on, egui::DragValue::new(&mut mib).range(0.0..=65536.0).speed(1.0).fixed_decimals(0))
                .labelled_by(label);
            s.measured.context_bytes = on.then_some((mib * (1u64 << 20) as f64) as u64);
        });
        ui.horizontal_wrapped(|ui| {
            let mut on = s.measured.fragmentation_percent.is_some();
            let label = ui.checkbox(&mut on, t.text("real-measured-fragmentation")).id;
            let mut percent = s.measured.fragmentation_percent.unwrap_or(5.0);
            ui.add_enabled(on, egui::DragValue::new(&mut percent).range(0.0..=100.0).speed(0.1).fixed_decimals(1))
                .labelled_by(label);
            s.measured.fragmentation_percent = on.then_some(percent);
        });
    });
}

/// Both profiles' verdicts while none is chosen (the estimate above is the fused one's).
pub fn range(ui: &mut Ui, t: &Catalog, e: &Estimate, d: &RuntimeDerived) {
    let Some(o) = &d.other else { return };
    let verdict = |fits: bool| t.text(if fits { "real-range-fits" } else { "real-range-oom" });
    ui.label(t.format(
        "real-range",
        &[
            ("fused", size(t, e.peak_bytes).into()),
            ("fused-verdict", verdict(e.fits()).into()),
            ("hf", size(t, o.peak_bytes).into()),
            ("hf-verdict", verdict(o.fits).into()),
        ],
    ));
    if e.fits() && !o.fits {
        ui.colored_label(egui::Color32::from_rgb(240, 160, 60), t.text("real-range-split"));
    }
}

/// One layer's saved tensors for the profile counted, by name, with their sources.
pub fn saved_list(ui: &mut Ui, t: &Catalog, s: &Setup, d: &RuntimeDerived) {
    let runtime = profile_name(t, Some(s.runtime()));
    egui::CollapsingHeader::new(t.text("real-saved-heading")).id_salt("real_saved").show(ui, |ui| {
        ui.label(t.format("real-saved-profile", &[("runtime", runtime.into())]));
        let rows = |ui: &mut Ui, list: &[Saved]| {
            for x in list {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(size(t, u64::try_from(x.bytes).unwrap_or(u64::MAX))).monospace());
                    ui.label(x.name(t));
                    ui.label(RichText::new(x.source).small().weak());
                });
            }
        };
        if d.kinds.is_empty() {
            rows(ui, &d.layer);
        }
        for k in &d.kinds {
            let key = match (k.kind.experts, k.kind.rope) {
                (true, true) => "real-saved-kind-experts",
                (true, false) => "real-saved-kind-experts-nope",
                (false, true) => "real-saved-kind-dense",
                (false, false) => "real-saved-kind-dense-nope",
            };
            ui.strong(t.format(key, &[("count", k.layers.into())]));
            rows(ui, &k.saved);
        }
        ui.strong(t.text("real-saved-outside"));
        rows(ui, &d.outside);
    });
}
