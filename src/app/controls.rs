//! The toy's controls on the left, the run buttons, and the OOM panel's suggestions.

use egui::RichText;

use super::run::Engine;
use super::settings::{BUDGET_PRESETS, MAX_BATCH, Prefs, Preset, Settings};
use super::teaching::{Control, Restrictions};
use super::views::Suggestion;
use crate::i18n::Catalog;
use crate::memory::StepOom;
use crate::plan::{AttentionKind, Checkpoint, OptimizerKind, Precision, Techniques, micro_batch};

/// The fixes the OOM panel offers for `s`: those that apply, and that a teacher link allows.
pub fn suggestions(s: &Settings, vocab: usize, restrictions: &Restrictions, oom: &StepOom) -> Vec<Suggestion> {
    let mut out = Vec::new();
    // Fragmentation: the memory cached free would hold the request, were it one block. The
    // remedy PyTorch's message names comes first.
    if !s.device.allocator.expandable_segments && oom.error.is_fragmented() {
        out.push(Suggestion::ExpandableSegments);
    }
    if s.checkpoint == Checkpoint::Off {
        out.push(Suggestion::Checkpointing);
    }
    let fused = Techniques { attention: AttentionKind::Fused, checkpoint: Checkpoint::Off, ..s.techniques() };
    if s.attention == AttentionKind::Standard && fused.validate(&s.model(vocab)).is_ok() {
        out.push(Suggestion::FusedAttention);
    }
    // Accumulation doubles: the micro-batch must split in two.
    if s.batches().is_ok_and(|b| micro_batch(b.micro_batch(), 2).is_ok()) {
        out.push(Suggestion::Accumulation);
    }
    if s.precision == Precision::Fp32 {
        out.push(Suggestion::MixedPrecision);
    }
    if s.batch > 1 {
        out.push(Suggestion::SmallerBatch);
    }
    // A teacher link's locked or hidden controls are not offered as fixes.
    out.retain(|s| {
        restrictions.allows(match s {
            Suggestion::Checkpointing => Control::Checkpointing,
            Suggestion::FusedAttention => Control::Attention,
            Suggestion::Accumulation => Control::Accumulation,
            Suggestion::MixedPrecision => Control::Precision,
            Suggestion::SmallerBatch => Control::Batch,
            Suggestion::ExpandableSegments => Control::Allocator,
        })
    });
    out
}

/// The toy's controls. A teacher link's restrictions `r`: hidden controls are not drawn, locked
/// ones are disabled. What was drawn, and whether enabled, goes into `drawn` for the teacher
/// link's log line (the browser test reads it: the canvas has no widgets a page script could
/// inspect).
pub fn controls_ui(
    ui: &mut egui::Ui,
    catalog: &Catalog,
    s: &mut Settings,
    vocab: usize,
    r: &Restrictions,
    drawn: &mut Vec<(Control, bool)>,
) {
    let tr = |key: &str| catalog.text(key);
    drawn.clear();
    let mut gate = |ui: &mut egui::Ui, c: Control, add: &mut dyn FnMut(&mut egui::Ui)| {
        if r.shows(c) {
            ui.add_enabled_ui(r.allows(c), |ui| {
                drawn.push((c, ui.is_enabled()));
                add(ui)
            });
        }
    };
    ui.heading(tr("controls-setup"));
    gate(ui, Control::Model, &mut |ui| {
        ui.horizontal(|ui| {
            ui.label(tr("controls-model"));
            for p in Preset::ALL {
                let name = tr(&format!("preset-{}", p.name()));
                if ui.selectable_label(s.preset == p && s.dims == p.dims(), name).clicked() {
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
            ui.add(
                egui::DragValue::new(&mut s.dims.n_heads).range(1..=32).prefix(format!("{} ", tr("controls-heads"))),
            );
        });
    });
    let params = s.model(vocab).num_parameters();
    ui.label(catalog.format("controls-parameters", &[("count", (params as f64).into())]));
    // The logarithmic integer sliders step by 1 from the keyboard: without `step_by`, an arrow
    // key moves the handle one point along the rail and the rounding snaps an integer back (the
    // accumulation steps stuck at 2).
    gate(ui, Control::Batch, &mut |ui| {
        let batch = ui.add(
            egui::Slider::new(&mut s.batch, 1..=MAX_BATCH).logarithmic(true).step_by(1.0).text(tr("controls-batch")),
        );
        super::views::mark(ui, "batch", batch.rect);
    });
    let max_seq = s.dims.max_seq;
    // Padded and bucketed batches take their length from their documents.
    let own_length = s.device.batching.varies_in_length();
    gate(ui, Control::Sequence, &mut |ui| {
        let slider = egui::Slider::new(&mut s.seq, 1..=max_seq).text(tr("controls-sequence"));
        let seq = ui.add_enabled(!own_length, slider);
        let seq = if own_length { seq.on_disabled_hover_text(tr("controls-sequence-documents")) } else { seq };
        super::views::mark(ui, "sequence", seq.rect);
    });
    gate(ui, Control::Batching, &mut |ui| {
        use crate::plan::Batching;
        let name = |b: Batching| match b {
            Batching::Windows => tr("batching-windows"),
            Batching::Padded => tr("batching-padded"),
            Batching::Bucketed => tr("batching-bucketed"),
            Batching::Packed => tr("batching-packed"),
        };
        let combo = egui::ComboBox::from_label(tr("controls-batching")).selected_text(name(s.device.batching));
        combo
            .show_ui(ui, |ui| {
                for b in Batching::ALL {
                    ui.selectable_value(&mut s.device.batching, b, name(b));
                }
            })
            .response
            .on_hover_text(tr("controls-batching-hint"));
    });
    gate(ui, Control::Budget, &mut |ui| {
        ui.horizontal_wrapped(|ui| {
            ui.label(tr("controls-budget"));
            for (name, bytes) in BUDGET_PRESETS {
                ui.selectable_value(&mut s.device.budget_bytes, bytes, name);
            }
        });
        let mut mib = (s.device.budget_bytes >> 20) as usize;
        if ui.add(egui::Slider::new(&mut mib, 1..=4096).logarithmic(true).step_by(1.0).text("MiB")).changed() {
            s.device.budget_bytes = (mib as u64) << 20;
        }
    });
    gate(ui, Control::Allocator, &mut |ui| allocator_ui(ui, &mut s.device.allocator, &tr));
    gate(ui, Control::Gpus, &mut |ui| gpus_ui(ui, &mut s.device.parallel, &tr));
    ui.separator();
    let techniques_top = ui.heading(tr("controls-techniques")).rect.min;
    let checkpoint = match s.checkpoint {
        Checkpoint::Off => tr("checkpoint-off"),
        Checkpoint::Every(1) => tr("checkpoint-every-block"),
        Checkpoint::Every(k) => catalog.format("checkpoint-every-k", &[("k", (k as f64).into())]),
        Checkpoint::Selective => tr("checkpoint-selective"),
    };
    gate(ui, Control::Checkpointing, &mut |ui| {
        egui::ComboBox::from_label(tr("controls-checkpointing")).selected_text(checkpoint.clone()).show_ui(ui, |ui| {
            let l = s.dims.n_layers;
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Off, tr("checkpoint-off"));
            ui.selectable_value(&mut s.checkpoint, Checkpoint::BLOCKS, tr("checkpoint-every-block"));
            let k = Checkpoint::default_every(l);
            ui.selectable_value(
                &mut s.checkpoint,
                Checkpoint::Every(k),
                catalog.format("checkpoint-every-k", &[("k", (k as f64).into())]),
            );
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Selective, tr("checkpoint-selective"));
        });
    });
    gate(ui, Control::Precision, &mut |ui| {
        egui::ComboBox::from_label(tr("controls-precision")).selected_text(s.precision.name()).show_ui(ui, |ui| {
            for p in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
                ui.selectable_value(&mut s.precision, p, p.name());
            }
        });
    });
    let attention = match s.attention {
        AttentionKind::Standard => tr("attention-standard"),
        AttentionKind::Fused => tr("attention-fused"),
    };
    gate(ui, Control::Attention, &mut |ui| {
        egui::ComboBox::from_label(tr("controls-attention")).selected_text(attention.clone()).show_ui(ui, |ui| {
            ui.selectable_value(&mut s.attention, AttentionKind::Standard, tr("attention-standard"));
            ui.selectable_value(&mut s.attention, AttentionKind::Fused, tr("attention-fused"));
        });
    });
    gate(ui, Control::Optimizer, &mut |ui| {
        egui::ComboBox::from_label(tr("controls-optimizer")).selected_text(s.optimizer.name()).show_ui(ui, |ui| {
            for k in [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd] {
                ui.selectable_value(&mut s.optimizer, k, k.name());
            }
        });
    });
    gate(ui, Control::Accumulation, &mut |ui| {
        let before = s.accum;
        let slider =
            egui::Slider::new(&mut s.accum, 1..=64).logarithmic(true).step_by(1.0).text(tr("controls-accumulation"));
        // A count that does not divide the batch is taken down to one that does; stepping up
        // goes on to the next that does instead, or an arrow key from 2 to 3 would end at 2.
        if ui.add(slider).changed() && s.accum > before {
            s.accum = (s.accum..=s.batch.max(1)).find(|&a| micro_batch(s.batch, a).is_ok()).unwrap_or(before);
        }
    });
    gate(ui, Control::Lora, &mut |ui| {
        ui.add(egui::Slider::new(&mut s.lora_rank, 0..=64).text(tr("controls-lora-rank")));
    });
    gate(ui, Control::Offload, &mut |ui| {
        use crate::plan::Offload;
        let name = |o: Offload| match o {
            Offload::None => tr("offload-none"),
            Offload::Optimizer => tr("offload-optimizer"),
            Offload::OptimizerGradients => tr("offload-optimizer-gradients"),
        };
        let combo = egui::ComboBox::from_label(tr("controls-offload")).selected_text(name(s.device.offload));
        combo
            .show_ui(ui, |ui| {
                for o in Offload::ALL {
                    ui.selectable_value(&mut s.device.offload, o, name(o));
                }
            })
            .response
            .on_hover_text(tr("controls-offload-hint"));
    });
    // The techniques' block, for a lesson to highlight.
    let bottom = ui.min_rect().bottom();
    super::views::mark(
        ui,
        "techniques",
        egui::Rect::from_min_max(techniques_top, egui::pos2(ui.min_rect().right(), bottom)),
    );
    ui.separator();
    gate(ui, Control::Compare, &mut |ui| {
        ui.heading(tr("controls-compare"));
        let options: [(String, Techniques); 4] = [
            (tr("compare-checkpoint"), Techniques { checkpoint: Checkpoint::BLOCKS, ..Techniques::default() }),
            ("fp16".to_string(), Techniques { precision: Precision::Fp16, ..Techniques::default() }),
            (tr("compare-fused"), Techniques { attention: AttentionKind::Fused, ..Techniques::default() }),
            (tr("compare-accumulation"), Techniques { accum: 4, ..Techniques::default() }),
        ];
        ui.horizontal_wrapped(|ui| {
            for (name, t) in options {
                let mut on = s.overlays.contains(&t);
                if ui.checkbox(&mut on, name.as_str()).changed() {
                    if on && s.overlays.len() < 2 {
                        s.overlays.push(t);
                    } else {
                        s.overlays.retain(|o| *o != t);
                    }
                }
            }
        });
    });
    ui.separator();
    ui.horizontal(|ui| {
        gate(ui, Control::Seed, &mut |ui| {
            ui.add(egui::DragValue::new(&mut s.seed).prefix(format!("{} ", tr("controls-seed"))));
        });
        gate(ui, Control::Projector, &mut |ui| {
            ui.checkbox(&mut s.prefs.projector, tr("controls-projector"));
        });
    });
    // The student's own needs: never locked or hidden by a teacher's link.
    ui.horizontal_wrapped(|ui| {
        ui.label(tr("controls-display"));
        ui.checkbox(&mut s.prefs.high_contrast, tr("controls-high-contrast"));
        ui.checkbox(&mut s.prefs.reduced_motion, tr("controls-reduced-motion"));
    });
    let range = Prefs::TEXT_PERCENT;
    ui.add(
        egui::Slider::new(&mut s.prefs.text_percent, range).step_by(25.0).suffix(" %").text(tr("controls-text-size")),
    );
}

/// One step, Train or Stop, the engine and a worker step's progress; whether One step was
/// clicked. Train toggles `training`.
pub fn run_buttons_ui(
    ui: &mut egui::Ui,
    t: &Catalog,
    training: &mut bool,
    engine: &Engine,
    progress: Option<(usize, usize)>,
) -> bool {
    let mut step = false;
    ui.horizontal_wrapped(|ui| {
        step = ui.button(t.text("run-one-step")).clicked();
        let label = t.text(if *training { "run-stop" } else { "run-train" });
        if ui.button(label).clicked() {
            *training = !*training;
        }
        let engine = t.format("run-engine", &[("backend", engine.label(t).into())]);
        ui.label(RichText::new(engine).small());
        // A step in the worker: how far it has got (the page stays live meanwhile).
        if let Some((done, total)) = progress {
            let args = [("done", done.to_string().into()), ("total", total.to_string().into())];
            ui.label(RichText::new(t.format("run-progress", &args)).small());
        }
    });
    step
}

/// The caching allocator's options (PyTorch's `PYTORCH_CUDA_ALLOC_CONF`), folded under the
/// budget: each a checkbox, the two numbers a slider once on, and the variable as PyTorch
/// would read it.
fn allocator_ui(ui: &mut egui::Ui, a: &mut crate::plan::AllocatorConfig, tr: &dyn Fn(&str) -> String) {
    egui::CollapsingHeader::new(tr("controls-allocator")).id_salt("allocator-options").show(ui, |ui| {
        ui.checkbox(&mut a.expandable_segments, tr("controls-alloc-expandable"))
            .on_hover_text(tr("controls-alloc-expandable-hint"));
        // Drawing changes nothing: a value from a link or the CLI outside the sliders' ranges
        // stays as it is until the student moves the slider (only edits are clamped).
        // Each slider on its own line under its checkbox: a phone's drawer has no room for both.
        let mut split = a.max_split_size.is_some();
        let check = ui.checkbox(&mut split, tr("controls-alloc-max-split"));
        if check.on_hover_text(tr("controls-alloc-max-split-hint")).changed() {
            a.max_split_size = split.then_some(64 << 20);
        }
        if let Some(mut mib) = a.max_split_size.map(|b| b >> 20) {
            // PyTorch's floor: more than kLargeBuffer (20 MiB).
            let slider = egui::Slider::new(&mut mib, 21..=4096).logarithmic(true);
            let slider = slider.clamping(egui::SliderClamping::Edits).text(tr("controls-alloc-max-split-value"));
            if ui.add(slider).changed() {
                a.max_split_size = Some(mib << 20);
            }
        }
        let mut gc = a.garbage_collection_threshold.is_some();
        let check = ui.checkbox(&mut gc, tr("controls-alloc-gc"));
        if check.on_hover_text(tr("controls-alloc-gc-hint")).changed() {
            a.garbage_collection_threshold = gc.then_some(0.6);
        }
        if let Some(mut share) = a.garbage_collection_threshold {
            let slider = egui::Slider::new(&mut share, 0.05..=0.95).step_by(0.05);
            let slider = slider.clamping(egui::SliderClamping::Edits).text(tr("controls-alloc-gc-value"));
            if ui.add(slider).changed() {
                a.garbage_collection_threshold = Some(share);
            }
        }
        let conf = a.to_conf_string();
        if !conf.is_empty() {
            ui.label(RichText::new(format!("PYTORCH_CUDA_ALLOC_CONF={conf}")).small().monospace());
        }
    });
}

/// Data parallelism over simulated GPUs, folded under the budget: how many, the ZeRO stage, the
/// communication bucket, and what the simulation is not.
fn gpus_ui(ui: &mut egui::Ui, p: &mut crate::plan::Parallel, tr: &dyn Fn(&str) -> String) {
    egui::CollapsingHeader::new(tr("controls-gpus")).id_salt("simulated-gpus").show(ui, |ui| {
        let gpus = egui::Slider::new(&mut p.gpus, 1..=crate::plan::MAX_GPUS).clamping(egui::SliderClamping::Edits);
        ui.add(gpus.text(tr("controls-gpus-count"))).on_hover_text(tr("controls-gpus-hint"));
        ui.horizontal_wrapped(|ui| {
            ui.label(tr("controls-zero")).on_hover_text(tr("controls-zero-hint"));
            ui.selectable_value(&mut p.zero, 0, tr("controls-zero-0"));
            for stage in 1..=3u8 {
                ui.selectable_value(&mut p.zero, stage, format!("ZeRO-{stage}"));
            }
        });
        // In units of the parameter alignment (128 elements), so that every value is one the
        // plan takes; a link's value outside the range stays until the slider moves.
        let unit = crate::model::params::PARAM_ALIGN_ELEMS;
        let mut units = p.bucket_elems / unit;
        let slider = egui::Slider::new(&mut units, 1..=8192).logarithmic(true).step_by(1.0);
        let slider =
            slider.clamping(egui::SliderClamping::Edits).custom_formatter(|v, _| format!("{}", v as u64 * unit));
        if ui.add(slider.text(tr("controls-bucket"))).changed() {
            p.bucket_elems = units.max(1) * unit;
        }
        if p.gpus > 1 {
            ui.label(RichText::new(tr("controls-gpus-simulated")).small());
        }
    });
}
