//! The "Real models" view: the large-model estimator (`memory::estimate`) for GPT-2, LLaMA-2,
//! Mistral or a custom architecture on a real GPU — the same categories and the same
//! memory-vs-batch chart as the toy, predicted in closed form.

use egui::{Color32, RichText, Ui};
use serde::{Deserialize, Serialize};

use super::views::{BatchChart, batch_chart, category_color, swatch};
use crate::memory::estimate::{
    self, Adapters, Estimate, Mlp, Norm, Optimizer, Parallel, Setup, StatePrecision, claims::Claim, presets,
};
use crate::plan::{AttentionKind, Category, Checkpoint};
use crate::units::{format_bytes, group_digits};

/// The real-model view's settings: the estimator's own [`Setup`] (part of
/// [`super::settings::Settings`], so it persists and travels in a shared link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RealSettings(pub Setup);

impl std::ops::Deref for RealSettings {
    type Target = Setup;
    fn deref(&self) -> &Setup {
        &self.0
    }
}

impl std::ops::DerefMut for RealSettings {
    fn deref_mut(&mut self) -> &mut Setup {
        &mut self.0
    }
}

impl Default for RealSettings {
    /// LLaMA-2 7B on A100 80 GB GPUs, bf16 mixed precision with Adam, ZeRO-3 over 8 GPUs,
    /// micro-batch 1 of 2048 tokens with 8 accumulation steps: it fits (full training on one GPU
    /// does not — switch ZeRO off to see why).
    fn default() -> Self {
        let mut s = Setup::new(presets::default_model(), presets::default_gpu(), 1, 2048);
        s.accum = 8;
        s.parallel = Parallel { data: 8, tensor: 1, sequence: false, zero: 3 };
        Self(s)
    }
}

impl RealSettings {
    /// The estimator's setup, or why it cannot be estimated.
    pub fn setup(&self) -> Result<Setup, String> {
        self.0.validate().map_err(|e| e.to_string())?;
        Ok(self.0.clone())
    }

    /// Bounds what the controls bound, so that a link cannot ask for absurd work.
    pub fn clamped(mut self) -> Self {
        let s = &mut self.0;
        s.micro_batch = s.micro_batch.clamp(1, estimate::MAX_BATCH);
        s.seq = s.seq.clamp(1, 1 << 20);
        s.accum = s.accum.clamp(1, 1 << 16);
        s.parallel.data = s.parallel.data.clamp(1, 1 << 16);
        s.parallel.tensor = s.parallel.tensor.clamp(1, 64);
        s.parallel.zero = s.parallel.zero.min(3);
        s.gpu.memory_bytes = s.gpu.memory_bytes.clamp(1 << 30, 1 << 50);
        self
    }
}

/// What the view shows, recomputed when its settings change (milliseconds).
pub struct RealDerived {
    pub setup: Result<Setup, String>,
    pub estimate: Option<Estimate>,
    pub max_micro_batch: u64,
    /// (micro-batch, estimate) for 1, 2, 4, … up to twice the largest that fits.
    pub sweep: Vec<(u64, Estimate)>,
}

impl RealDerived {
    pub fn new(settings: &RealSettings) -> Self {
        let setup = settings.setup();
        let (estimate, max_micro_batch, sweep) = match &setup {
            Ok(s) => {
                let e = estimate::estimate(s).ok();
                let max = estimate::max_micro_batch(s).unwrap_or(0);
                (e, max, estimate::sweep(s, &estimate::sweep_batches(max)).unwrap_or_default())
            }
            Err(_) => (None, 0, Vec::new()),
        };
        Self { setup, estimate, max_micro_batch, sweep }
    }
}

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

/// The controls. Returns nothing: the caller notices the settings changed.
pub fn controls(ui: &mut Ui, s: &mut RealSettings) {
    let s = &mut s.0;
    ui.horizontal_wrapped(|ui| {
        egui::ComboBox::new("real_model", "model").selected_text(s.arch.name.clone()).show_ui(ui, |ui| {
            for (_, arch) in presets::models() {
                if ui.selectable_label(s.arch == arch, arch.name.clone()).clicked() {
                    if arch.positions > 0 {
                        s.seq = s.seq.min(arch.positions);
                    }
                    s.arch = arch;
                }
            }
        });
        let presets = presets::gpus();
        let custom = !presets.iter().any(|(_, g)| *g == s.gpu);
        egui::ComboBox::new("real_gpu", "GPU").selected_text(s.gpu.name.clone()).show_ui(ui, |ui| {
            for (_, gpu) in presets {
                let name = gpu.name.clone();
                ui.selectable_value(&mut s.gpu, gpu, name);
            }
            if ui.selectable_label(custom, "custom size").clicked() && !custom {
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
    egui::CollapsingHeader::new(format!(
        "architecture: h {}, L {}, heads {} (kv {}), f {}, V {}",
        s.arch.hidden, s.arch.layers, s.arch.heads, s.arch.kv_heads, s.arch.ffn, s.arch.vocab
    ))
    .id_salt("real_arch")
    .show(ui, |ui| {
        let before = s.arch.clone();
        ui.horizontal_wrapped(|ui| {
            ui.add(egui::DragValue::new(&mut s.arch.hidden).range(1..=65536).prefix("hidden "));
            ui.add(egui::DragValue::new(&mut s.arch.layers).range(1..=512).prefix("layers "));
            ui.add(egui::DragValue::new(&mut s.arch.heads).range(1..=1024).prefix("heads "));
            ui.add(egui::DragValue::new(&mut s.arch.kv_heads).range(1..=1024).prefix("kv heads "));
            ui.add(egui::DragValue::new(&mut s.arch.ffn).range(1..=262144).prefix("MLP width "));
            ui.add(egui::DragValue::new(&mut s.arch.vocab).range(1..=1_000_000).prefix("vocab "));
        });
        ui.horizontal_wrapped(|ui| {
            ui.selectable_value(&mut s.arch.mlp, Mlp::Gelu, "GELU MLP");
            ui.selectable_value(&mut s.arch.mlp, Mlp::SwiGlu, "SwiGLU MLP");
            ui.selectable_value(&mut s.arch.norm, Norm::LayerNorm, "LayerNorm");
            ui.selectable_value(&mut s.arch.norm, Norm::RmsNorm, "RMSNorm");
            ui.checkbox(&mut s.arch.dropout, "dropout");
            ui.checkbox(&mut s.arch.tied_embeddings, "tied embeddings");
        });
        if s.arch != before && !s.arch.name.starts_with("custom") {
            s.arch.name = format!("custom ({})", s.arch.name);
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.add(egui::DragValue::new(&mut s.micro_batch).range(1..=estimate::MAX_BATCH).prefix("micro-batch "));
        let max_seq = if s.arch.positions > 0 { s.arch.positions } else { 1 << 20 };
        ui.add(egui::DragValue::new(&mut s.seq).range(1..=max_seq).prefix("sequence "));
        ui.add(egui::DragValue::new(&mut s.accum).range(1..=4096).prefix("accumulation "));
    });
    ui.horizontal_wrapped(|ui| {
        egui::ComboBox::new("real_precision", "precision").selected_text(s.precision.name()).show_ui(ui, |ui| {
            for p in
                [StatePrecision::Fp32, StatePrecision::MixedFp16, StatePrecision::MixedBf16, StatePrecision::PureBf16]
            {
                ui.selectable_value(&mut s.precision, p, p.name());
            }
        });
        egui::ComboBox::new("real_optimizer", "optimizer").selected_text(s.optimizer.name()).show_ui(ui, |ui| {
            for o in [Optimizer::Adam, Optimizer::Momentum, Optimizer::Sgd] {
                ui.selectable_value(&mut s.optimizer, o, o.name());
            }
        });
        egui::ComboBox::new("real_checkpoint", "recomputation").selected_text(s.checkpoint.label()).show_ui(ui, |ui| {
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Off, "off");
            ui.selectable_value(&mut s.checkpoint, Checkpoint::Selective, "selective");
            ui.selectable_value(&mut s.checkpoint, Checkpoint::BLOCKS, "every block (full)");
        });
        let mut fused = s.attention == AttentionKind::Fused;
        if ui.checkbox(&mut fused, "fused attention").changed() {
            s.attention = if fused { AttentionKind::Fused } else { AttentionKind::Standard };
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.add(egui::DragValue::new(&mut s.parallel.data).range(1..=65536).prefix("data-parallel GPUs "));
        ui.add(egui::Slider::new(&mut s.parallel.zero, 0..=3).text("ZeRO stage"));
        ui.add(egui::DragValue::new(&mut s.parallel.tensor).range(1..=64).prefix("tensor-parallel "));
        ui.checkbox(&mut s.parallel.sequence, "sequence parallel");
    });
    ui.horizontal_wrapped(|ui| {
        ui.checkbox(&mut s.offload.optimizer, "offload optimizer");
        ui.add_enabled(s.offload.optimizer, egui::Checkbox::new(&mut s.offload.gradients, "offload gradients"));
        if !s.offload.optimizer {
            s.offload.gradients = false;
        }
        ui.checkbox(&mut s.offload.parameters, "offload parameters");
        // Adapters on every projection; rank 0 trains the whole model.
        let mut rank = s.lora.map_or(0, |l| l.rank);
        let mut quantized = s.lora.is_some_and(|l| l.quantized);
        ui.add(egui::DragValue::new(&mut rank).range(0..=1024).prefix("LoRA rank (0 = off) "));
        ui.add_enabled(rank > 0, egui::Checkbox::new(&mut quantized, "QLoRA (4-bit base)"));
        s.lora = (rank > 0).then_some(Adapters { rank, qkv: true, proj: true, mlp: true, quantized });
        ui.checkbox(&mut s.fixed_costs, "fixed costs");
    });
}

/// The estimate: headline, breakdown with sources, memory vs micro-batch.
pub fn view(ui: &mut Ui, s: &RealSettings, d: &RealDerived) {
    let setup = match &d.setup {
        Ok(setup) => setup,
        Err(e) => {
            ui.colored_label(Color32::RED, format!("This configuration cannot be estimated: {e}"));
            return;
        }
    };
    let Some(e) = &d.estimate else {
        return;
    };
    ui.label(
        RichText::new("Predicted by the closed-form estimator (not measured): the toy's categories, for a real model.")
            .italics(),
    );
    let verdict = if e.fits() {
        RichText::new(format!(
            "fits: {} of {} per GPU ({:.0}%)",
            format_bytes(e.peak_bytes),
            format_bytes(e.capacity_bytes),
            100.0 * e.peak_bytes as f64 / e.capacity_bytes.max(1) as f64
        ))
        .color(Color32::from_rgb(90, 200, 90))
    } else {
        RichText::new(format!(
            "out of memory: needs {} per GPU, the {} has {}",
            format_bytes(e.peak_bytes),
            setup.gpu.name,
            format_bytes(e.capacity_bytes)
        ))
        .color(Color32::from_rgb(240, 80, 80))
    };
    ui.heading(verdict);
    ui.label(format!(
        "{}: {}; largest micro-batch that fits: {}; tokens per optimizer step: {} \
         (micro-batch {} × sequence {} × accumulation {} × {} GPUs)",
        s.arch.name,
        e.parameters_text(),
        d.max_micro_batch,
        group_digits(e.tokens_per_step),
        setup.micro_batch,
        setup.seq,
        setup.accum,
        setup.parallel.data
    ));
    if e.host_bytes > 0 {
        ui.label(format!(
            "offload: {} of host memory per GPU; {} over PCIe per step",
            format_bytes(e.host_bytes),
            format_bytes(e.pcie_bytes_per_step)
        ));
    }
    let total = e.peak_bytes.max(1);
    egui::Grid::new("real_breakdown").striped(true).num_columns(4).show(ui, |ui| {
        ui.strong("per GPU");
        ui.strong("predicted");
        ui.strong("%");
        ui.strong("source");
        ui.end_row();
        for l in &e.lines {
            ui.horizontal(|ui| {
                swatch(ui, estimate_color(l.category));
                ui.label(l.category);
            });
            ui.label(format_bytes(l.bytes));
            ui.label(format!("{:.1}", 100.0 * l.bytes as f64 / total as f64));
            ui.label(RichText::new(&l.source).small());
            ui.end_row();
        }
        ui.strong("peak");
        ui.strong(format_bytes(e.peak_bytes));
        ui.label("100");
        ui.label(RichText::new("the sum: what must fit on each GPU").small());
        ui.end_row();
    });
    ui.separator();
    ui.strong("Memory vs micro-batch");
    let stacks = e
        .lines
        .iter()
        .map(|l| {
            (
                l.category,
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
        BatchChart {
            id: "real_sweep",
            unit: (GIB, "GiB"),
            stacks,
            lines: vec![(s.arch.name.clone(), fitting, first_oom)],
            capacity: ("GPU capacity", e.capacity_bytes),
            current_batch: setup.micro_batch as usize,
        },
    );
    ui.label(format!(
        "largest micro-batch that fits: {}; out of memory from {}",
        d.max_micro_batch,
        if d.max_micro_batch == 0 {
            "micro-batch 1".to_string()
        } else {
            format!("micro-batch {}", d.max_micro_batch + 1)
        }
    ));
}

/// The claims lesson: each claim, whether it holds, and what the estimator computes.
pub fn claims_view(ui: &mut Ui, claims: &Result<Vec<Claim>, String>) {
    match claims {
        Err(e) => {
            ui.colored_label(Color32::RED, e);
        }
        Ok(list) => {
            for c in list {
                ui.horizontal_wrapped(|ui| {
                    let (mark, color) = if c.holds {
                        ("holds", Color32::from_rgb(90, 200, 90))
                    } else {
                        ("breaks", Color32::from_rgb(240, 80, 80))
                    };
                    ui.label(RichText::new(mark).color(color).strong());
                    ui.label(RichText::new(c.claim).strong());
                    ui.label(RichText::new(format!("({})", c.source)).small());
                });
                ui.label(&c.finding);
                ui.label(RichText::new(format!("Verdict: {}.", c.test)).small().weak());
                ui.add_space(6.0);
            }
        }
    }
}

pub const EXPLAIN_REAL: &str = "The same accounting as the toy, in closed form for a real model: parameters, \
gradients, optimizer state and master weights depend on the model and on how they are stored and sharded (ZeRO \
partitions them over the data-parallel GPUs); activations grow with micro-batch × sequence (Korthikanti et al.'s \
sbh(34 + 5as/h) per layer for GPT, derived tensor by tensor for LLaMA's SwiGLU, RMSNorm and grouped-query attention); \
the logits grow with the vocabulary. On the toy's own configuration the estimator gives the plan's bytes exactly, \
category by category.";
