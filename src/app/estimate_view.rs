//! The estimator's view, the "Real models" tab: the large-model estimator ([`crate::estimate`]) for GPT-2, LLaMA-2,
//! Mistral or a custom architecture on a real GPU — the same categories and the same
//! memory-vs-batch chart as the toy, predicted in closed form.

pub mod model_config;
pub mod parallel;

use egui::{Color32, RichText, Ui};

use super::derived::EstimateDerived;
use super::settings::real_model::EstimateSettings;
use super::views::drawn::{Drawn, RealDrawn, record};
use super::views::{BatchChart, batch_chart, category_color, category_name, size, swatch};
use crate::estimate::{
    self, Adapters, EstimateError, Framework, Mlp, Norm, Optimizer, Setup, StatePrecision,
    claims::{Claim, Part},
    presets,
};
use crate::i18n::Catalog;
use crate::plan::{AttentionKind, Category, Checkpoint};
use crate::units::group_digits;

/// A colour per estimator category: the toy's where the category is the toy's.
pub fn estimate_color(name: &str) -> Color32 {
    match Category::ALL.iter().find(|c| c.name() == name) {
        Some(&c) => category_color(c),
        None => match name {
            "communication" => Color32::from_rgb(100, 181, 205),
            "cuda_context" => Color32::from_rgb(90, 90, 90),
            _ => Color32::from_rgb(180, 180, 180), // fragmentation
        },
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Narrower than this (points), the view lays out for a phone.
const NARROW: f32 = 560.0;

/// The controls. Returns nothing: the caller notices the settings changed.
pub fn controls(ui: &mut Ui, t: &Catalog, s: &mut EstimateSettings) {
    let s = &mut s.0;
    // A DragValue's prefix: the label and a space.
    let prefix = |key: &str| format!("{} ", t.text(key));
    ui.horizontal_wrapped(|ui| {
        model_config::model_list(ui, t, s);
        let presets = presets::gpus();
        let custom = !presets.iter().any(|(_, g)| *g == s.gpu);
        egui::ComboBox::new("real_gpu", t.text("real-gpu")).selected_text(gpu_name(t, &s.gpu.name)).show_ui(ui, |ui| {
            for (_, gpu) in presets {
                let name = gpu.name.clone();
                ui.selectable_value(&mut s.gpu, gpu, name);
            }
            if ui.selectable_label(custom, t.text("real-custom-size")).clicked() && !custom {
                s.gpu = presets::custom_gpu(s.gpu.memory_bytes);
            }
        });
        if custom {
            let mut gib = s.gpu.memory_bytes as f64 / GIB;
            if ui.add(egui::DragValue::new(&mut gib).range(1.0..=4096.0).suffix(" GiB")).changed() {
                s.gpu = presets::custom_gpu((gib * GIB) as u64);
            }
        }
    });
    model_config::ui(ui, t, s);
    let a = &s.arch;
    let heading = t.format(
        "real-architecture",
        &[
            ("h", a.hidden.to_string().into()),
            ("l", a.layers.to_string().into()),
            ("heads", a.heads.to_string().into()),
            ("kv", a.kv_heads.to_string().into()),
            ("f", a.ffn.to_string().into()),
            ("v", a.vocab.to_string().into()),
        ],
    );
    // On a phone a header does not wrap: the figures go in a label that does.
    let heading = if ui.available_width() < NARROW {
        ui.label(heading);
        t.text("real-architecture-short")
    } else {
        heading
    };
    egui::CollapsingHeader::new(heading).id_salt("real_arch").show(ui, |ui| {
        let before = s.arch.clone();
        ui.horizontal_wrapped(|ui| {
            ui.add(egui::DragValue::new(&mut s.arch.hidden).range(1..=65536).prefix(prefix("real-hidden")));
            ui.add(egui::DragValue::new(&mut s.arch.layers).range(1..=512).prefix(prefix("real-layers")));
            ui.add(egui::DragValue::new(&mut s.arch.heads).range(1..=1024).prefix(prefix("real-heads")));
            ui.add(egui::DragValue::new(&mut s.arch.kv_heads).range(1..=1024).prefix(prefix("real-kv-heads")));
            ui.add(egui::DragValue::new(&mut s.arch.ffn).range(1..=262144).prefix(prefix("real-mlp-width")));
            ui.add(egui::DragValue::new(&mut s.arch.vocab).range(1..=1_000_000).prefix(prefix("real-vocab")));
        });
        ui.horizontal_wrapped(|ui| {
            ui.selectable_value(&mut s.arch.mlp, Mlp::Gelu, t.text("real-gelu"));
            ui.selectable_value(&mut s.arch.mlp, Mlp::SwiGlu, t.text("real-swiglu"));
            ui.selectable_value(&mut s.arch.norm, Norm::LayerNorm, t.text("real-layernorm"));
            ui.selectable_value(&mut s.arch.norm, Norm::RmsNorm, t.text("real-rmsnorm"));
            ui.add(
                egui::DragValue::new(&mut s.arch.dropout)
                    .range(0.0..=0.9)
                    .speed(0.01)
                    .fixed_decimals(2)
                    .prefix(prefix("real-dropout")),
            );
            ui.checkbox(&mut s.arch.tied_embeddings, t.text("real-tied"));
        });
        if s.arch != before && !s.arch.name.starts_with("custom") {
            s.arch.name = format!("custom ({})", s.arch.name);
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.add(
            egui::DragValue::new(&mut s.micro_batch).range(1..=estimate::MAX_BATCH).prefix(prefix("real-micro-batch")),
        );
        let max_seq = if s.arch.positions > 0 { s.arch.positions } else { 1 << 20 };
        ui.add(egui::DragValue::new(&mut s.seq).range(1..=max_seq).prefix(prefix("real-sequence")));
        ui.add(egui::DragValue::new(&mut s.accum).range(1..=4096).prefix(prefix("real-accumulation")));
    });
    ui.horizontal_wrapped(|ui| {
        egui::ComboBox::new("real_precision", t.text("real-precision")).selected_text(s.precision.name()).show_ui(
            ui,
            |ui| {
                for p in [
                    StatePrecision::Fp32,
                    StatePrecision::MixedFp16,
                    StatePrecision::MixedBf16,
                    StatePrecision::PureBf16,
                ] {
                    ui.selectable_value(&mut s.precision, p, p.name());
                }
            },
        );
        egui::ComboBox::new("real_framework", t.text("real-framework")).selected_text(s.framework.name()).show_ui(
            ui,
            |ui| {
                for f in Framework::ALL {
                    ui.selectable_value(&mut s.framework, f, f.name());
                }
            },
        );
        egui::ComboBox::new("real_optimizer", t.text("real-optimizer")).selected_text(s.optimizer.name()).show_ui(
            ui,
            |ui| {
                for o in [Optimizer::Adam, Optimizer::Momentum, Optimizer::Sgd] {
                    ui.selectable_value(&mut s.optimizer, o, o.name());
                }
            },
        );
        let modes = [
            (Checkpoint::Off, "real-ckpt-off"),
            (Checkpoint::Selective, "real-ckpt-selective"),
            (Checkpoint::BLOCKS, "real-ckpt-full"),
        ];
        // Another every-k mode (a link can carry one) shows as the estimator names it.
        let current = modes.iter().find(|(c, _)| *c == s.checkpoint).map_or(s.checkpoint.label(), |(_, k)| t.text(k));
        egui::ComboBox::new("real_checkpoint", t.text("real-recomputation")).selected_text(current).show_ui(ui, |ui| {
            for (mode, key) in modes {
                ui.selectable_value(&mut s.checkpoint, mode, t.text(key));
            }
        });
        let mut fused = s.attention == AttentionKind::Fused;
        if ui.checkbox(&mut fused, t.text("real-fused")).changed() {
            s.attention = if fused { AttentionKind::Fused } else { AttentionKind::Standard };
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.add(egui::DragValue::new(&mut s.parallel.data).range(1..=65536).prefix(prefix("real-data-parallel")));
        ui.add(egui::Slider::new(&mut s.parallel.zero, 0..=3).text(t.text("real-zero")));
        ui.add(egui::DragValue::new(&mut s.parallel.tensor).range(1..=64).prefix(prefix("real-tensor-parallel")));
        ui.checkbox(&mut s.parallel.sequence, t.text("real-sequence-parallel"));
        if let Some(m) = s.arch.block.moe {
            let ep = egui::DragValue::new(&mut s.parallel.expert)
                .range(1..=m.experts)
                .prefix(prefix("real-expert-parallel"));
            ui.add(ep);
        } else {
            s.parallel.expert = 1;
        }
    });
    parallel::controls(ui, t, s);
    parallel::multi_token_prediction(ui, t, s);
    ui.horizontal_wrapped(|ui| {
        ui.checkbox(&mut s.offload.optimizer, t.text("real-offload-optimizer"));
        let gradients = egui::Checkbox::new(&mut s.offload.gradients, t.text("real-offload-gradients"));
        ui.add_enabled(s.offload.optimizer, gradients);
        if !s.offload.optimizer {
            s.offload.gradients = false;
        }
        ui.checkbox(&mut s.offload.parameters, t.text("real-offload-parameters"));
        // Adapters on every projection; rank 0 trains the whole model.
        let mut rank = s.lora.map_or(0, |l| l.rank);
        let mut quantized = s.lora.is_some_and(|l| l.quantized);
        ui.add(egui::DragValue::new(&mut rank).range(0..=1024).prefix(prefix("real-lora")));
        ui.add_enabled(rank > 0, egui::Checkbox::new(&mut quantized, t.text("real-qlora")));
        // A mixture's experts take no adapters (not modelled): the attention's do.
        let mlp = s.arch.block.moe.is_none();
        s.lora = (rank > 0).then_some(Adapters { rank, qkv: true, proj: true, mlp, quantized });
        ui.checkbox(&mut s.fixed_costs, t.text("real-fixed-costs"));
    });
    super::estimate_runtime::controls(ui, t, s);
}

/// The estimate: headline, breakdown with sources, memory vs micro-batch.
pub fn view(ui: &mut Ui, t: &Catalog, s: &EstimateSettings, d: &EstimateDerived) {
    let format_bytes = |b| size(t, b);
    let setup = match &d.setup {
        Ok(setup) => setup,
        Err(e) => {
            ui.colored_label(Color32::RED, t.format("real-cannot", &[("error", e.text(t).into())]));
            return;
        }
    };
    let Some(e) = &d.estimate else {
        return;
    };
    ui.label(RichText::new(t.text("real-predicted-note")).italics());
    // A chapter's open question veils the estimate's figures; the setup (model, GPU, batch,
    // parallelism) stays.
    let veiled = super::views::veil(ui.ctx()).real;
    if veiled {
        veiled_view(ui, t, s, setup, e);
        return;
    }
    let verdict = if e.fits() {
        let percent = format!("{:.0}", 100.0 * e.peak_bytes as f64 / e.capacity_bytes.max(1) as f64);
        let text = t.format(
            "real-fits",
            &[
                ("peak", format_bytes(e.peak_bytes).into()),
                ("capacity", format_bytes(e.capacity_bytes).into()),
                ("percent", percent.into()),
            ],
        );
        RichText::new(text).color(Color32::from_rgb(90, 200, 90))
    } else {
        let text = t.format(
            "real-oom",
            &[
                ("peak", format_bytes(e.peak_bytes).into()),
                ("gpu", gpu_name(t, &setup.gpu.name).into()),
                ("capacity", format_bytes(e.capacity_bytes).into()),
            ],
        );
        RichText::new(text).color(Color32::from_rgb(240, 80, 80))
    };
    record(
        ui,
        Drawn::RealModels(RealDrawn {
            peak_bytes: e.peak_bytes,
            capacity_bytes: e.capacity_bytes,
            fits: e.fits(),
            lines: e.lines.iter().map(|l| (l.category.to_string(), l.bytes)).collect(),
            max_micro_batch: d.max_micro_batch,
            verdict: verdict.text().to_string(),
            veiled: false,
            stages: e.stages.iter().map(|st| (st.stage, st.peak_bytes)).collect(),
        }),
    );
    ui.heading(verdict);
    parallel::stages(ui, t, setup, e);
    if let Some(r) = &d.runtime {
        super::estimate_runtime::range(ui, t, e, r);
    }
    let all = group_digits(e.parameters);
    let params = if e.trainable_parameters == e.parameters {
        t.format("real-params", &[("all", all.into())])
    } else {
        t.format(
            "real-params-trained",
            &[("all", all.into()), ("trained", group_digits(e.trainable_parameters).into())],
        )
    };
    if let Some(m) = s.arch.block.moe {
        // Why a mixture needs the memory of all its parameters for its states, but the
        // activations of the ones a token passes through.
        let args = [
            ("experts", m.experts.to_string().into()),
            ("k", m.top_k.to_string().into()),
            ("all", group_digits(e.parameters).into()),
            ("active", group_digits(s.arch.active_parameters()).into()),
        ];
        ui.label(t.format("real-moe", &args));
    }
    ui.label(t.format(
        "real-summary",
        &[
            ("model", model_name(t, &s.arch.name).into()),
            ("params", params.into()),
            ("max", d.max_micro_batch.to_string().into()),
            ("tokens", group_digits(e.tokens_per_step).into()),
            ("micro", setup.micro_batch.to_string().into()),
            ("seq", setup.seq.to_string().into()),
            ("accum", setup.accum.to_string().into()),
            ("gpus", setup.parallel.data.to_string().into()),
        ],
    ));
    if e.host_bytes > 0 {
        ui.label(t.format(
            "real-offload",
            &[("host", format_bytes(e.host_bytes).into()), ("pcie", format_bytes(e.pcie_bytes_per_step).into())],
        ));
    }
    let total = e.peak_bytes.max(1);
    // On a phone the sources, long sentences, leave the table for a list under it.
    let sources_column = ui.available_width() >= NARROW;
    // The sources wrap inside their column, so that the table never runs past the view's width
    // (a wide window, or a narrow one at 200 % text).
    let source_width = (ui.available_width() - 330.0).max(160.0);
    let grid = egui::Grid::new("real_breakdown").striped(true).max_col_width(source_width);
    grid.num_columns(if sources_column { 4 } else { 3 }).show(ui, |ui| {
        ui.strong(t.text("real-per-gpu"));
        ui.strong(t.text("real-predicted"));
        ui.strong("%");
        if sources_column {
            ui.strong(t.text("real-source"));
        }
        ui.end_row();
        for l in &e.lines {
            ui.horizontal(|ui| {
                swatch(ui, estimate_color(l.category));
                ui.label(line_name(t, l.category));
            });
            ui.label(format_bytes(l.bytes));
            ui.label(format!("{:.1}", 100.0 * l.bytes as f64 / total as f64));
            if sources_column {
                ui.add(egui::Label::new(RichText::new(l.source.text(t)).small()).wrap());
            }
            ui.end_row();
        }
        ui.strong(t.text("real-peak"));
        ui.strong(format_bytes(e.peak_bytes));
        ui.label("100");
        if sources_column {
            ui.label(RichText::new(t.text("real-sum")).small());
        }
        ui.end_row();
    });
    if !sources_column {
        egui::CollapsingHeader::new(t.text("real-sources")).id_salt("real_sources").show(ui, |ui| {
            for l in &e.lines {
                let line = t.format(
                    "real-source-line",
                    &[("category", line_name(t, l.category).into()), ("source", l.source.text(t).into())],
                );
                ui.label(RichText::new(line).small());
            }
        });
    }
    if let Some(r) = &d.runtime {
        super::estimate_runtime::saved_list(ui, t, setup, r);
    }
    ui.separator();
    ui.strong(t.text("real-mem-vs-micro"));
    let stacks = e
        .lines
        .iter()
        .map(|l| {
            (
                line_name(t, l.category),
                estimate_color(l.category),
                d.sweep.iter().map(|(b, x)| (*b as usize, x.get(l.category))).collect(),
            )
        })
        .collect();
    let fitting: Vec<(usize, u64)> =
        d.sweep.iter().filter(|(_, x)| x.fits()).map(|(b, x)| (*b as usize, x.peak_bytes)).collect();
    let first_oom = d.sweep.iter().find(|(_, x)| !x.fits()).map(|(b, _)| *b as usize);
    batch_chart(
        ui,
        t,
        BatchChart {
            id: "real_sweep",
            unit: (GIB, "GiB"),
            stacks,
            lines: vec![(model_name(t, &s.arch.name), fitting, first_oom)],
            capacity: (t.text("real-capacity"), e.capacity_bytes),
            current_batch: setup.micro_batch as usize,
            veiled: false,
        },
    );
    ui.label(t.format(
        "real-max",
        &[("max", d.max_micro_batch.to_string().into()), ("oom", (d.max_micro_batch + 1).to_string().into())],
    ));
}

/// The estimate while a chapter's question veils it: the rows named, their figures "?", the
/// chart's place without bars.
fn veiled_view(ui: &mut Ui, t: &Catalog, s: &EstimateSettings, setup: &Setup, e: &crate::estimate::Estimate) {
    use super::views::veil::{hidden_cell, hidden_chart, note};
    let args = [("model", model_name(t, &s.arch.name).into()), ("gpu", gpu_name(t, &setup.gpu.name).into())];
    let verdict = t.format("real-veiled", &args);
    record(
        ui,
        Drawn::RealModels(RealDrawn {
            peak_bytes: 0,
            capacity_bytes: e.capacity_bytes,
            fits: false,
            lines: e.lines.iter().map(|l| (l.category.to_string(), 0)).collect(),
            max_micro_batch: 0,
            verdict: verdict.clone(),
            veiled: true,
            stages: e.stages.iter().map(|st| (st.stage, 0)).collect(),
        }),
    );
    ui.heading(verdict);
    note(ui, t);
    egui::Grid::new("real_breakdown").striped(true).num_columns(3).show(ui, |ui| {
        ui.strong(t.text("real-per-gpu"));
        ui.strong(t.text("real-predicted"));
        ui.strong("%");
        ui.end_row();
        for l in &e.lines {
            ui.horizontal(|ui| {
                swatch(ui, estimate_color(l.category));
                ui.label(line_name(t, l.category));
            });
            hidden_cell(ui, t);
            hidden_cell(ui, t);
            ui.end_row();
        }
    });
    ui.separator();
    ui.strong(t.text("real-mem-vs-micro"));
    hidden_chart(ui, t, super::views::chart_height(ui));
}

/// A model's name: a preset's as it is; an edited one ("custom (llama2-7b)", as the settings
/// store it) in the reader's language.
fn model_name(t: &Catalog, name: &str) -> String {
    match name.strip_prefix("custom (").and_then(|n| n.strip_suffix(')')) {
        Some(base) => t.format("real-custom", &[("name", base.into())]),
        None => name.to_string(),
    }
}

/// A GPU's name: a preset's as it is; a custom size ("custom 80.00 GiB") in the reader's language.
fn gpu_name(t: &Catalog, name: &str) -> String {
    match name.strip_prefix("custom ") {
        Some(size) => t.format("real-custom-gpu", &[("size", size.into())]),
        None => name.to_string(),
    }
}

/// An estimate line's category in the reader's language: the toy's categories by their names,
/// the estimator's own three by theirs.
pub fn line_name(t: &Catalog, category: &str) -> String {
    if let Some(&c) = Category::ALL.iter().find(|c| c.name() == category) {
        return category_name(t, c);
    }
    match category {
        "communication" => t.text("est-communication"),
        "cuda_context" => t.text("est-cuda-context"),
        "fragmentation" => t.text("est-fragmentation"),
        other => other.to_string(),
    }
}

/// The claims lesson: each claim, whether it holds, and what the estimator computes.
pub fn claims_view(ui: &mut Ui, t: &Catalog, claims: &Result<Vec<Claim>, EstimateError>) {
    match claims {
        Err(e) => {
            ui.colored_label(Color32::RED, e.text(t));
        }
        Ok(list) => {
            for c in list {
                ui.horizontal_wrapped(|ui| {
                    let (mark, color) = if c.holds {
                        (t.text("claim-holds"), Color32::from_rgb(90, 200, 90))
                    } else {
                        (t.text("claim-breaks"), Color32::from_rgb(240, 80, 80))
                    };
                    ui.label(RichText::new(mark).color(color).strong());
                    ui.label(RichText::new(c.text(t, Part::Claim)).strong());
                    ui.label(RichText::new(format!("({})", c.text(t, Part::Source))).small());
                });
                ui.label(c.text(t, Part::Finding));
                let verdict = t.format("claim-verdict", &[("test", c.text(t, Part::Test).into())]);
                ui.label(RichText::new(verdict).small().weak());
                ui.add_space(6.0);
            }
        }
    }
}

/// The large-model estimator's page: its own setup (the controls on the left are the toy's),
/// the estimate, and the published claims checked against it.
pub fn page(ui: &mut Ui, t: &Catalog, settings: &mut EstimateSettings, shown: &mut super::shown::Shown) {
    ui.heading(t.text("main-real-heading"));
    controls(ui, t, settings);
    ui.separator();
    let drawn = ui.scope(|ui| view(ui, t, settings, &shown.estimate));
    super::views::mark(ui, "real-models", drawn.response.rect);
    super::views::explain(ui, t, "explain-real");
    // The published claims are figures of the same estimates: after the reveal.
    if super::views::veil(ui.ctx()).real {
        return;
    }
    egui::CollapsingHeader::new(t.text("main-claims")).id_salt("claims").default_open(true).show(ui, |ui| {
        claims_view(ui, t, shown.claims());
    });
}
