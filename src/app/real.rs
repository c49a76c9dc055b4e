//! The "Real models" view: the large-model estimator (`memory::estimate`) for GPT-2, LLaMA-2,
//! Mistral or a custom architecture on a real GPU — the same categories and the same
//! memory-vs-batch chart as the toy, predicted in closed form.

use egui::{Color32, RichText, Ui};
use serde::{Deserialize, Serialize};

use super::views::{BatchChart, batch_chart, category_color, swatch};
use crate::memory::estimate::{
    self, Adapters, Architecture, Estimate, Mlp, Norm, Offload, Optimizer, Parallel, Precision, Setup, claims::Claim,
    presets,
};
use crate::plan::{AttentionKind, Category, Checkpoint};
use crate::units::{format_bytes, group_digits};

/// The real-model view's settings (part of [`super::settings::Settings`], so they persist and
/// travel in a shared link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RealSettings {
    /// The preset the architecture came from ("custom" once edited).
    pub model: String,
    pub arch: Architecture,
    /// A GPU preset key, or "custom" with `custom_gpu_bytes`.
    pub gpu: String,
    pub custom_gpu_bytes: u64,
    pub micro_batch: u64,
    pub seq: u64,
    pub accum: u64,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub checkpoint: Checkpoint,
    pub attention: AttentionKind,
    pub parallel: Parallel,
    pub offload: Offload,
    /// LoRA rank; 0 = full training.
    pub lora_rank: u64,
    pub qlora: bool,
    pub fixed_costs: bool,
}

impl Default for RealSettings {
    /// LLaMA-2 7B on A100 80 GB GPUs, bf16 mixed precision with Adam, ZeRO-3 over 8 GPUs,
    /// micro-batch 1 of 2048 tokens: it fits (full training on one GPU does not — switch ZeRO
    /// off to see why).
    fn default() -> Self {
        let arch =
            presets::model("llama2-7b").unwrap_or_else(|| Architecture::from_toy(&crate::model::ModelConfig::toy(58)));
        Self {
            model: "llama2-7b".into(),
            arch,
            gpu: "a100-80".into(),
            custom_gpu_bytes: 48 << 30,
            micro_batch: 1,
            seq: 2048,
            accum: 8,
            precision: Precision::MixedBf16,
            optimizer: Optimizer::Adam,
            checkpoint: Checkpoint::Off,
            attention: AttentionKind::Standard,
            parallel: Parallel { data: 8, tensor: 1, sequence: false, zero: 3 },
            offload: Offload::default(),
            lora_rank: 0,
            qlora: false,
            fixed_costs: true,
        }
    }
}

impl RealSettings {
    pub fn gpu(&self) -> Result<estimate::Gpu, String> {
        if self.gpu == "custom" {
            return Ok(estimate::Gpu {
                name: format!("custom {}", format_bytes(self.custom_gpu_bytes)),
                memory_bytes: self.custom_gpu_bytes,
                compute_major: 8,
            });
        }
        presets::gpu(&self.gpu).ok_or_else(|| format!("unknown GPU {:?}", self.gpu))
    }

    /// The estimator's setup, or why these settings cannot be estimated.
    pub fn setup(&self) -> Result<Setup, String> {
        let mut s = Setup::new(self.arch.clone(), self.gpu()?, self.micro_batch, self.seq);
        s.accum = self.accum;
        s.precision = self.precision;
        s.optimizer = self.optimizer;
        s.checkpoint = self.checkpoint;
        s.attention = self.attention;
        s.parallel = self.parallel;
        s.offload = self.offload;
        s.lora = (self.lora_rank > 0).then_some(Adapters {
            rank: self.lora_rank,
            qkv: true,
            proj: true,
            mlp: true,
            quantized: self.qlora,
        });
        s.fixed_costs = self.fixed_costs;
        s.validate().map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// Bounds what the controls bound, so that a link cannot ask for absurd work.
    pub fn clamped(mut self) -> Self {
        self.micro_batch = self.micro_batch.clamp(1, estimate::MAX_BATCH);
        self.seq = self.seq.clamp(1, 1 << 20);
        self.accum = self.accum.clamp(1, 1 << 16);
        self.parallel.data = self.parallel.data.clamp(1, 1 << 16);
        self.parallel.tensor = self.parallel.tensor.clamp(1, 64);
        self.parallel.zero = self.parallel.zero.min(3);
        self.custom_gpu_bytes = self.custom_gpu_bytes.clamp(1 << 30, 1 << 50);
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
                let top = (2 * max).clamp(16, estimate::MAX_BATCH);
                let batches: Vec<u64> =
                    std::iter::successors(Some(1u64), |b| (b * 2 <= top).then_some(b * 2)).collect();
                (e, max, estimate::sweep(s, &batches).unwrap_or_default())
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
    ui.horizontal_wrapped(|ui| {
        egui::ComboBox::new("real_model", "model").selected_text(s.arch.name.clone()).show_ui(ui, |ui| {
            for (key, arch) in presets::models() {
                if ui.selectable_label(s.model == key, arch.name.clone()).clicked() {
                    s.model = key.to_string();
                    if arch.positions > 0 {
                        s.seq = s.seq.min(arch.positions);
                    }
                    s.arch = arch;
                }
            }
        });
        let gpu_name = s.gpu().map(|g| g.name).unwrap_or_else(|e| e);
        egui::ComboBox::new("real_gpu", "GPU").selected_text(gpu_name).show_ui(ui, |ui| {
            for (key, gpu) in presets::gpus() {
                ui.selectable_value(&mut s.gpu, key.to_string(), gpu.name);
            }
            ui.selectable_value(&mut s.gpu, "custom".to_string(), "custom size");
        });
        if s.gpu == "custom" {
            let mut gib = s.custom_gpu_bytes as f64 / GIB;
            if ui.add(egui::DragValue::new(&mut gib).range(1.0..=4096.0).suffix(" GiB")).changed() {
                s.custom_gpu_bytes = (gib * GIB) as u64;
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
        if s.arch != before {
            s.model = "custom".into();
            if !s.arch.name.starts_with("custom") {
                s.arch.name = format!("custom ({})", s.arch.name);
            }
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
            for p in [Precision::Fp32, Precision::MixedFp16, Precision::MixedBf16, Precision::PureBf16] {
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
        ui.add(egui::DragValue::new(&mut s.lora_rank).range(0..=1024).prefix("LoRA rank (0 = off) "));
        ui.add_enabled(s.lora_rank > 0, egui::Checkbox::new(&mut s.qlora, "QLoRA (4-bit base)"));
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
