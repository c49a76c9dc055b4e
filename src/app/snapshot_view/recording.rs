//! What a snapshot says of its own recording: the run's allocator settings
//! (`PYTORCH_CUDA_ALLOC_CONF` and what PyTorch made of it), its `record_function` annotations,
//! the metadata it attached to events, private pools (CUDA graphs, `MemPool`s) and expandable
//! segments, and what oomlab read past (a newer PyTorch's actions and keys, counted, never a
//! crash). One line always; the rest under a heading that opens.

use egui::{RichText, Ui};

use super::{bytes, size};
use crate::i18n::Catalog;
use crate::memory::snapshot::dump::{Action, Dump};
use crate::memory::snapshot::replay;

/// The settings line, and the details beneath it.
pub fn panel(ui: &mut Ui, t: &Catalog, d: &Dump, device: i64) {
    match &d.allocator_settings {
        Some(a) => {
            let conf = if a.alloc_conf.is_empty() { t.text("snap-conf-unset") } else { a.alloc_conf.clone() };
            ui.label(t.format("snap-recorded-with", &[("conf", conf.into())]));
        }
        None => {
            ui.label(RichText::new(t.text("snap-no-settings")).weak());
        }
    }
    let trace = replay::trace(d, device);
    let count = |a: Action| trace.iter().filter(|e| e.action() == a).count();
    let segments: Vec<_> = d.segments.iter().filter(|g| g.device == device).collect();
    let private: Vec<_> = segments.iter().filter(|g| g.is_private()).collect();
    let expandable = segments.iter().filter(|g| g.expandable).count();
    let (maps, unmaps) = (count(Action::SegmentMap), count(Action::SegmentUnmap));
    egui::CollapsingHeader::new(t.text("snap-recording-heading")).id_salt("snap_recording").default_open(false).show(
        ui,
        |ui| {
            if let Some(a) = &d.allocator_settings {
                let split = match a.max_split_size {
                    Some(m) if m >= 0 => size(t, bytes(m)),
                    _ => t.text("snap-unlimited"),
                };
                ui.label(t.format(
                    "snap-settings",
                    &[
                        // As PyTorch (Python) writes a bool.
                        ("expandable", if a.expandable_segments { "True" } else { "False" }.into()),
                        ("split", split.into()),
                        ("gc", a.garbage_collection_threshold.unwrap_or(0.0).to_string().into()),
                    ],
                ));
                if a.rounds_power2() {
                    ui.label(t.text("snap-settings-power2"));
                }
                for (k, v) in &a.other {
                    ui.label(RichText::new(format!("{k}: {v}")).monospace().small());
                }
            }
            // The distinct names, in the order met (a few dozen: a list will do).
            let mut names: Vec<&str> = Vec::new();
            for a in &d.annotations {
                if !names.contains(&a.name.as_str()) {
                    names.push(&a.name);
                }
            }
            if !d.annotations.is_empty() {
                ui.label(t.format(
                    "snap-annotations",
                    &[
                        ("count", d.annotations.len().to_string().into()),
                        ("names", names.len().to_string().into()),
                        ("first", names.iter().take(3).copied().collect::<Vec<_>>().join(", ").into()),
                    ],
                ));
            }
            let mine: Vec<_> = d.metadata.iter().filter(|m| i64::from(m.device) == device).collect();
            if let Some(m) = mine.first() {
                ui.label(t.format(
                    "snap-metadata",
                    &[
                        ("count", mine.len().to_string().into()),
                        ("index", m.index.to_string().into()),
                        ("text", m.text.as_str().into()),
                    ],
                ));
            }
            if !private.is_empty() {
                let mut pools: Vec<[i64; 2]> = Vec::new();
                for g in &private {
                    if !pools.contains(&g.pool) {
                        pools.push(g.pool);
                    }
                }
                let reserved: i64 = private.iter().map(|g| g.total_size).sum();
                ui.label(t.format(
                    "snap-private-pools",
                    &[
                        ("segments", private.len().to_string().into()),
                        ("pools", pools.len().to_string().into()),
                        ("reserved", size(t, bytes(reserved)).into()),
                    ],
                ));
            }
            if expandable > 0 || maps > 0 || unmaps > 0 {
                ui.label(t.format(
                    "snap-expandable",
                    &[
                        ("segments", expandable.to_string().into()),
                        ("maps", maps.to_string().into()),
                        ("unmaps", unmaps.to_string().into()),
                    ],
                ));
            }
            if d.unknown.is_empty() {
                ui.label(RichText::new(t.text("snap-unknown-none")).weak());
            } else {
                let list = |m: &std::collections::BTreeMap<String, u64>| {
                    m.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ")
                };
                if !d.unknown.actions.is_empty() {
                    ui.label(t.format("snap-unknown-actions", &[("list", list(&d.unknown.actions).into())]));
                }
                if !d.unknown.keys.is_empty() {
                    ui.label(t.format("snap-unknown-keys", &[("list", list(&d.unknown.keys).into())]));
                }
            }
        },
    );
}
