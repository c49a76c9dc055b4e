//! The estimator's runtime profiles against what PyTorch really keeps (issue 15).
//!
//! `tests/fixtures/hf_saved.json` holds PyTorch's own counts, made by `scripts/check_saved.py` in
//! a throwaway venv with torch + transformers (CI has no torch; the fixture names the versions):
//! for GPT-2 (gelu_new) at three sizes and LLaMA-style models (MHA and GQA), and a tiny random
//! instance of every other family read from a config.json (within ±1 %), fp32 and pure bf16, every storage autograd saves in
//! one training forward with the loss, once, parameters excluded, plus the logits. Here
//! `oomlab estimate --runtime hf-eager` must land within 0.5 % of each (the issue asks ±3 %), and
//! the fused profile must count less (it is the idealised set).

use std::process::Command;

use oomlab::estimate::{self, Part, Runtime, Setup, presets, saved_outside, saved_per_layer};
use serde_json::Value;

fn fixture() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf_saved.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture")).expect("JSON")
}

fn oomlab(args: &[String]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_oomlab")).args(args).arg("--json").output().expect("oomlab runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn hf_eager_matches_what_pytorch_saves() {
    let f = fixture();
    let cases = f["cases"].as_array().expect("cases");
    assert!(cases.len() >= 8, "GPT-2 at three sizes, LLaMA MHA and GQA, fp32 and bf16");
    for kind in ["GPT-2", "LLaMA-style MHA", "LLaMA-style GQA"] {
        for dtype in ["fp32", "bf16"] {
            assert!(
                cases.iter().any(|c| c["name"].as_str().is_some_and(|n| n.starts_with(kind)) && c["dtype"] == dtype),
                "no {kind} {dtype} case"
            );
        }
    }
    // A tiny instance of every family read from a config.json (scripts/check_saved.py).
    for family in oomlab::estimate::hf::FAMILIES.into_iter().filter(|f| !matches!(*f, "gpt2" | "llama")) {
        for dtype in ["fp32", "bf16"] {
            let name = format!("family {family}");
            assert!(cases.iter().any(|c| c["name"] == name.as_str() && c["dtype"] == dtype), "no {name} {dtype} case");
        }
    }
    for c in cases {
        let family = c["name"].as_str().is_some_and(|n| n.starts_with("family "));
        let args: Vec<String> =
            c["args"].as_array().expect("args").iter().map(|a| a.as_str().expect("arg").to_string()).collect();
        let pytorch = c["pytorch_bytes"].as_u64().expect("PyTorch's count") as f64;
        let report = oomlab(&args);
        assert_eq!(report["runtime"], "hf-eager");
        let ours = report["saved_for_backward_bytes"].as_u64().expect("saved_for_backward_bytes") as f64;
        let off = 100.0 * (ours - pytorch) / pytorch;
        // The bounds: ±3 % for GPT-2 and LLaMA (held to 0.5 %), ±1 % for each family.
        let bound = if family { 1.0 } else { 0.5 };
        assert!(off.abs() < bound, "{} {}: hf-eager {ours} vs PyTorch {pytorch} ({off:+.2} %)", c["name"], c["dtype"]);
        let fused_args: Vec<String> =
            args.iter().map(|a| if a == "hf-eager" { "fused".into() } else { a.clone() }).collect();
        let fused = oomlab(&fused_args)["saved_for_backward_bytes"].as_u64().expect("fused") as f64;
        // A mixture's experts keep the same tensors in both profiles; the rest is idealised.
        if family {
            assert!(fused < ours, "{} {}: fused {fused} should count less than hf-eager {ours}", c["name"], c["dtype"]);
            continue;
        }
        assert!(
            fused < 0.97 * pytorch,
            "{} {}: fused {fused} should be the idealised, smaller set",
            c["name"],
            c["dtype"]
        );
    }
}

/// The toy's plan against PyTorch's saved activations for the same architecture: the ratio the
/// README reports (0.64: the toy's fused GELU and attention kernels keep less than HF eager).
#[test]
fn the_toy_plan_against_pytorch() {
    let f = fixture();
    let toy = &f["toy"];
    let pytorch = toy["pytorch_activation_bytes"].as_u64().expect("PyTorch's count") as f64;
    let report = oomlab(&["measure".into(), "--backend".into(), "cpu".into()]);
    let plan = report["predicted_activation_formula_bytes"].as_u64().expect("the plan's activations") as f64;
    let ratio = plan / pytorch;
    assert!((ratio - 0.64).abs() < 0.01, "the toy's plan keeps {ratio:.3}× PyTorch's activations (README: 0.64×)");
}

fn gpt2(batch: u64, seq: u64, runtime: Runtime) -> Setup {
    let mut s = Setup::new(presets::model("gpt2").expect("gpt2"), presets::gpu("a100-80").expect("gpu"), batch, seq);
    s.runtime = Some(runtime);
    s
}

/// Dropout above 0 adds, on CUDA, a 1-byte mask per value and the dropped probabilities: per layer
/// a·s²·b·(1 + p) + 2·s·b·h, and the embedding's s·b·h — in both profiles.
#[test]
fn dropout_adds_its_masks() {
    for runtime in Runtime::REAL {
        let mut with = gpt2(2, 256, runtime);
        with.precision = estimate::StatePrecision::PureBf16;
        let mut without = with.clone();
        without.arch.dropout = 0.0;
        assert_eq!(with.arch.dropout, 0.1, "GPT-2 presets train with dropout 0.1");
        let (s, b, h, a, l) = (256u64, 2u64, 768u64, 12u64, 12u64);
        let masks = l * (a * s * s * b * (1 + 2) + 2 * s * b * h) + s * b * h;
        let e = |x: &Setup| estimate::estimate(x).expect("estimate").activations_end_of_forward;
        assert_eq!(e(&with) - e(&without), masks, "{runtime:?}");
    }
    let mut bad = gpt2(1, 16, Runtime::Fused);
    for p in [-0.1, 1.0, f64::NAN, f64::INFINITY] {
        bad.arch.dropout = p;
        assert!(estimate::estimate(&bad).is_err(), "dropout {p} is refused");
    }
}

/// The named list is the count: one layer's saved tensors times the layers, plus those outside,
/// are the activations at the loss (no checkpointing), for both profiles and both families.
#[test]
fn the_named_saved_tensors_sum_to_the_activations() {
    // With dense layers among a mixture's (DeepSeek-V3, GLM-4.5-Air), the two kinds of layer
    // each count as many times as the model has them.
    for model in
        ["gpt2", "llama2-7b", "mistral-7b", "deepseek-v3", "glm-4.5-air", "olmo-2-7b", "llama-4-scout", "gpt-oss-20b"]
    {
        for runtime in Runtime::REAL {
            let arch = presets::model(model)
                .or_else(|| oomlab::estimate::catalog::find(model).map(|e| e.model.arch.clone()))
                .expect("model");
            let mut s = Setup::new(arch, presets::gpu("a100-80").expect("gpu"), 2, 512);
            s.runtime = Some(runtime);
            let sum = |list: &[estimate::Saved]| list.iter().map(|t| t.bytes).sum::<u128>();
            let kinds = estimate::layer_kinds(&s);
            let layers: u128 = match kinds.is_empty() {
                true => s.arch.layers as u128 * sum(&saved_per_layer(&s)),
                false => kinds.iter().map(|k| k.layers as u128 * sum(&k.saved)).sum(),
            };
            let outside: u128 = sum(&saved_outside(&s));
            let e = estimate::estimate(&s).expect("estimate");
            let mixed = matches!(model, "deepseek-v3" | "glm-4.5-air" | "llama-4-scout");
            assert_eq!(kinds.len(), if mixed { 2 } else { 0 }, "{model}");
            assert!(kinds.is_empty() || kinds.iter().map(|k| k.layers).sum::<u64>() == s.arch.layers);
            assert_eq!(e.activations_end_of_forward as u128, layers + outside, "{model} {runtime:?}");
            assert!(saved_per_layer(&s).iter().all(|t| !t.english().starts_with("saved-") && !t.source.is_empty()));
            assert!(saved_per_layer(&s).iter().any(|t| t.part == Part::Core), "an attention core");
        }
    }
}

/// LLaMA under HF eager: RMSNorm's fp32 up-cast, the fp32 softmax and its cast, repeat_kv's
/// full-head copies — each named, each of the size the code makes.
#[test]
fn hf_eager_names_llamas_extras() {
    let mut s =
        Setup::new(presets::model("mistral-7b").expect("mistral"), presets::gpu("a100-80").expect("gpu"), 1, 1024);
    s.runtime = Some(Runtime::HfEager);
    let list = saved_per_layer(&s);
    let get = |name: &str| list.iter().find(|t| t.english().contains(name)).map(|t| t.bytes);
    let (sb, h, a) = (1024u128, 4096u128, 32u128);
    assert_eq!(get("fp32 copy"), Some(sb * h * 4), "RMSNorm's up-cast");
    assert_eq!(get("softmax output"), Some(a * 1024 * sb * 4), "the fp32 softmax");
    assert_eq!(get("probabilities cast back"), Some(a * 1024 * sb * 2));
    assert_eq!(get("key, repeated"), Some(sb * h * 2), "GQA's keys repeated to all 32 heads");
    assert!(list.iter().all(|t| t.source.contains("Llama") || t.source.contains("eager") || t.source.contains("nn.")));
}

/// A measured context or fragmentation replaces the assumption, says so, and travels in a link.
#[test]
fn a_measurement_replaces_the_assumption() {
    let mut s = gpt2(4, 1024, Runtime::Fused);
    let before = estimate::estimate(&s).expect("estimate");
    let line = |e: &estimate::Estimate, c: &str| e.lines.iter().find(|l| l.category == c).cloned().expect("line");
    assert!(line(&before, "cuda_context").source.english().contains("assumed"));
    assert!(line(&before, "fragmentation").source.english().contains("assumed"));
    s.measured.context_bytes = Some(300 << 20);
    s.measured.fragmentation_percent = Some(12.5);
    let after = estimate::estimate(&s).expect("estimate");
    assert_eq!(line(&after, "cuda_context").bytes, 300 << 20);
    assert!(line(&after, "cuda_context").source.english().contains("measured on your GPU"));
    let allocated: u64 = after
        .lines
        .iter()
        .filter(|l| !["workspace", "cuda_context", "fragmentation"].contains(&l.category))
        .map(|l| l.bytes)
        .sum();
    assert_eq!(line(&after, "fragmentation").bytes, (allocated as f64 * 0.125) as u64);
    assert!(line(&after, "fragmentation").source.english().contains("measured on your GPU (12.5 %"));
    // In a shared link: the app's settings carry the real-model setup.
    let mut settings = oomlab::app::settings::Settings::default();
    settings.estimate.0 = s.clone();
    let (back, notice) = oomlab::app::settings::Settings::from_url_hash(&settings.to_url_hash(), 65);
    assert!(notice.is_none(), "the link reads back without a notice");
    assert_eq!(back.estimate.measured, s.measured);
    assert_eq!(back.estimate.runtime, s.runtime);
    s.measured.fragmentation_percent = Some(f64::NAN);
    assert!(estimate::estimate(&s).is_err());
}

/// Links made before the profiles: `dropout: true` is GPT-2's 0.1, `runtime: "py_torch"` the
/// fused profile, and a link without a runtime has none chosen.
#[test]
fn older_links_still_read() {
    let s = gpt2(1, 128, Runtime::Fused);
    let mut v = serde_json::to_value(&s).expect("JSON");
    v["arch"]["dropout"] = Value::Bool(true);
    v["runtime"] = Value::String("py_torch".into());
    let back: Setup = serde_json::from_value(v.clone()).expect("an old link");
    assert_eq!(back.arch.dropout, 0.1);
    assert_eq!(back.runtime, Some(Runtime::Fused));
    v.as_object_mut().expect("object").remove("runtime");
    v.as_object_mut().expect("object").remove("measured");
    let back: Setup = serde_json::from_value(v).expect("a link without a runtime");
    assert_eq!(back.runtime, None);
    assert_eq!(back.runtime(), Runtime::Fused);
}

/// Without a chosen profile the report carries HF eager's figures beside the fused ones, and says
/// where the choice decides whether it fits.
#[test]
fn unchosen_shows_both() {
    let args: Vec<String> =
        ["estimate", "--model", "gpt2", "--gpu", "t4", "--precision", "fp32", "--seq-len", "512", "--batch", "11"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let r = oomlab(&args);
    assert_eq!(r["runtime_chosen"], false);
    let other = &r["other_runtime"];
    assert_eq!(other["runtime"], "hf-eager");
    assert!(other["peak_bytes"].as_u64() > r["peak_bytes"].as_u64());
    assert_eq!((r["fits"].as_bool(), other["fits"].as_bool()), (Some(true), Some(false)));
    let mut chosen = args.clone();
    chosen.extend(["--runtime".into(), "hf-eager".into()]);
    let r2 = oomlab(&chosen);
    assert_eq!(r2["runtime_chosen"], true);
    assert!(r2["other_runtime"].is_null());
    assert_eq!(r2["peak_bytes"], other["peak_bytes"]);
    assert!(
        r2["saved_per_layer"]
            .as_array()
            .is_some_and(|l| l.iter().any(|t| t["name"].as_str().is_some_and(|n| n.contains("gelu_new"))))
    );
}

/// The Real models view: with no profile chosen, both verdicts and where they part; with HF
/// eager chosen, one layer's saved tensors by name, in English and in Chinese.
#[test]
fn the_view_shows_both_profiles_and_the_saved_tensors() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::EstimateDerived;
    use oomlab::app::estimate_view::view;
    use oomlab::app::settings::real_model::EstimateSettings;
    use oomlab::i18n::{Catalog, Lang};
    // GPT-2 small, fp32, micro-batch 11 of 512 on a T4: fits with fused kernels, not HF eager.
    let mut s = gpt2(11, 512, Runtime::Fused);
    s.runtime = None;
    s.gpu = presets::gpu("t4").expect("t4");
    s.precision = estimate::StatePrecision::Fp32;
    let real = EstimateSettings(s.clone());
    let derived = EstimateDerived::new(&real);
    let e = derived.estimate.clone().expect("estimate");
    let other = derived.runtime.as_ref().and_then(|r| r.other.clone()).expect("HF eager beside it");
    assert!(e.fits() && !other.fits, "the case parts the profiles");
    let en = Catalog::new(Lang::En);
    // The app's own fonts (its Latin subset has the sources' arrows and math; the CJK one).
    let fonts = || oomlab::app::fonts::embedded();
    // Fonts take effect from the next frame: the first frame only installs them.
    let shown = |t: &Catalog, real: &EstimateSettings, d: &EstimateDerived, ui: &mut egui::Ui| {
        if ui.ctx().cumulative_frame_nr() == 0 {
            ui.ctx().set_fonts(fonts());
        } else {
            view(ui, t, real, d);
        }
    };
    let mut h = Harness::builder().with_size([1100.0, 900.0]).build_ui(|ui| shown(&en, &real, &derived, ui));
    h.run();
    h.get_by_label(&en.text("real-range-split"));
    assert!(h.query_all_by_label_contains("With Hugging Face eager code").count() == 1);

    let mut chosen = s.clone();
    chosen.runtime = Some(Runtime::HfEager);
    let real = EstimateSettings(chosen);
    let derived = EstimateDerived::new(&real);
    assert!(derived.runtime.as_ref().is_some_and(|r| r.other.is_none()), "a chosen profile shows alone");
    for lang in [Lang::En, Lang::Zh] {
        let t = Catalog::new(lang);
        let mut h = Harness::builder().with_size([1100.0, 1400.0]).build_ui(|ui| shown(&t, &real, &derived, ui));
        h.run();
        h.get_by_label(&t.text("real-saved-heading")).click();
        h.run();
        h.get_by_label(&t.format("real-saved-profile", &[("runtime", t.text("real-runtime-hf").into())]));
        for key in ["saved-gelu-news-tanh", "saved-query-as-the-score-matmul-keeps-it"] {
            h.get_by_label(&t.text(key));
        }
        assert_eq!(h.query_all_by_label(&t.text("real-range-split")).count(), 0);
    }
}

/// Layers not all alike (DeepSeek-V3's dense first three, Llama 4's layers without RoPE) under
/// checkpointing: selective recomputation drops each kind's attention core, layer by layer; every
/// layer checkpointed keeps one block input per layer.
#[test]
fn checkpointing_counts_each_kind_of_layer() {
    use oomlab::plan::Checkpoint;
    for model in ["deepseek-v3", "llama-4-scout"] {
        let arch = oomlab::estimate::catalog::find(model).expect("in the catalog").model.arch.clone();
        let mut s = Setup::new(arch, presets::gpu("h200").expect("gpu"), 1, 1024);
        s.runtime = Some(Runtime::HfEager);
        s.precision = estimate::StatePrecision::PureBf16;
        let outside: u128 = saved_outside(&s).iter().map(|t| t.bytes).sum();
        let kinds = estimate::layer_kinds(&s);
        assert_eq!(kinds.len(), 2, "{model}");
        s.checkpoint = Checkpoint::Selective;
        let no_core: u128 = kinds
            .iter()
            .map(|k| k.layers as u128 * k.saved.iter().filter(|t| t.part != Part::Core).map(|t| t.bytes).sum::<u128>())
            .sum();
        let e = estimate::estimate(&s).expect("estimate");
        assert_eq!(e.activations_end_of_forward as u128, no_core + outside, "{model} selective");
        s.checkpoint = Checkpoint::Every(1);
        let e = estimate::estimate(&s).expect("estimate");
        let input = 1024 * s.arch.hidden as u128 * 2;
        assert_eq!(e.activations_end_of_forward as u128, s.arch.layers as u128 * input + outside, "{model} every:1");
    }
}
