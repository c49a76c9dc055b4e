//! The CLI's contract: JSON lines, exit codes, clear messages for bad input.

use std::process::Command;

#[path = "support/csv.rs"]
mod csv;
#[path = "support/cli.rs"]
mod support_cli;
use support_cli::oomlab;

/// Each command exits 2 with a message containing its needle, and never panics.
fn assert_usage_errors(cases: &[(&[&str], &str)]) {
    for (args, needle) in cases {
        let out = oomlab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: expected {needle:?} in {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    }
}

#[test]
fn train_json_lines_on_both_backends() {
    for backend in ["cpu", "gpu"] {
        let out = oomlab(&["train", "--steps", "3", "--batch", "2", "--seq-len", "16", "--backend", backend, "--json"]);
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        assert_eq!(lines.len(), 3);
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["step"], i as u64 + 1);
            assert!(l["loss"].as_f64().expect("loss") > 0.0);
            assert!(l["elapsed_secs"].as_f64().expect("elapsed") >= 0.0);
        }
    }
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["train", "--batch", "0"], "batch must be at least 1"),
        (&["train", "--batch", "-4"], "batch must be at least 1"),
        (&["train", "--d-model", "65", "--heads", "4"], "divisible by n_heads"),
        (&["train", "--seq-len", "128", "--max-seq-len", "64"], "longer than the model's maximum"),
        (&["train", "--vocab", "5", "--backend", "cpu"], "out of range"),
        (&["train", "--backend", "tpu"], "possible values: gpu, cpu"),
        (&["train", "--layers", "99999999999"], "absurdly large"),
        (&["train", "--steps", "0"], "'--steps <STEPS>': must be at least 1 (got 0)"),
        (&["frobnicate"], "unrecognized subcommand"),
        (&["measure", "--checkpoint", "selective", "--attention", "fused"], "use one or the other"),
        (&["measure", "--checkpoint", "every:9", "--layers", "2"], "every:9"),
        (&["measure", "--checkpoint", "sometimes"], "unknown checkpointing mode"),
        (&["measure", "--attention", "sparse"], "possible values: standard, fused"),
        (&["measure", "--batch", "10", "--accum", "3"], "cannot be split"),
        (&["measure", "--batch", "10", "--micro-batch", "4", "--accum", "2"], "disagrees"),
        // Every batch a sweep names is checked as a whole step's (per GPU, over the GPUs).
        (&["sweep", "--micro-batch", "1,524288", "--accum", "4"], "effective batch = 2097152 is absurdly large"),
        (&["sweep", "--batch", "1,524288", "--gpus", "4"], "global batch (every GPU's) = 2097152 is absurdly large"),
        (&["sweep", "--accum", "0"], "'--accum <ACCUM>': must be at least 1 (got 0)"),
        (&["compare", "--d-model", "256", "--heads", "2", "--attention", "fused"], "head sizes"),
        (&["measure", "--lora", "64"], "not low"),
        (&["measure", "--precision", "fp8"], "possible values: fp32, fp16, bf16"),
        (&["dump-step", "--out", "/tmp/x", "--lora", "2"], "with --lora there are none"),
        (&["measure", "--lora", "4", "--lora-targets", "embeddings"], "possible values: qkv, proj, mlp, all"),
        (&["measure", "--lora", "4", "--lora-alpha", "-1"], "alpha must be positive"),
        (&["measure", "--optimizer", "lion"], "possible values: adamw, momentum, sgd"),
        // Negative counts reach their check (no `allow_negative_numbers`): a clear message, exit 2.
        (&["train", "--layers", "-3"], "'--layers <LAYERS>': must be at least 1 (got -3)"),
        (&["train", "--steps", "-1"], "must be at least 1 (got -1)"),
        (&["measure", "--heads", "four"], "\"four\" is not a whole number"),
        (&["measure", "--budget", "lots"], "cannot read \"lots\" as a size"),
    ];
    assert_usage_errors(cases);
}

/// The toy's commands word their refusals in the system's language, as `estimate` and `claims`
/// do (issue 57): the configuration's, the flags', exit 2 as in English.
#[test]
fn the_toy_commands_refuse_in_the_system_language() {
    let cases: &[(&[&str], &str)] = &[
        (&["train", "--d-model", "65", "--heads", "4"], "d_model（65）必须能被注意力头数 n_heads（4）整除"),
        (
            &["measure", "--batch", "10", "--micro-batch", "4", "--accum", "2"],
            "--batch 10 与 --micro-batch 4 × --accum 2 不一致",
        ),
        (&["sweep", "--batch", "9..3"], "--batch 9..3：这个范围是空的"),
        (&["dump-step", "--out", "/tmp/x", "--lora", "2"], "用 --lora 时没有这些梯度"),
        (&["compare", "--batching", "padded"], "--batching padded：它的批次逐步从文档取得长度"),
    ];
    for (args, needle) in cases {
        let out = support_cli::oomlab_in("zh_CN.UTF-8", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: expected {needle:?} in {stderr}");
        let english = String::from_utf8_lossy(&oomlab(args).stderr).into_owned();
        assert!(!english.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "{args:?}: {english}");
    }
}

#[test]
fn dump_step_writes_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out =
        oomlab(&["dump-step", "--out", dir.path().to_str().unwrap_or("."), "--batch", "2", "--seq-len", "8", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["config.json", "model.safetensors", "batch.safetensors", "grads.safetensors", "loss.json"] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
}

#[test]
fn measure_json_has_every_source_and_the_formula() {
    for backend in ["cpu", "gpu"] {
        let out = oomlab(&[
            "measure",
            "--batch",
            "4",
            "--seq-len",
            "32",
            "--budget",
            "64MiB",
            "--backend",
            backend,
            "--json",
        ]);
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        for key in [
            "parameters",
            "gradients",
            "optimizer_state",
            "master_weights",
            "activations",
            "temporaries",
            "input",
            "logits",
            "workspace",
        ] {
            assert!(doc["allocator"][key].is_u64(), "{backend}: allocator.{key}");
            assert_eq!(doc["allocator"][key], doc["predicted"][key], "{backend}: {key} allocator = predicted");
        }
        let peak = doc["allocator_peak_allocated_bytes"].as_u64().expect("peak");
        assert!(peak > 0);
        let reserved = doc["allocator_peak_reserved_bytes"].as_u64().expect("peak");
        assert!(reserved >= peak);
        assert_eq!(doc["allocator_activation_bytes"], doc["predicted_activation_formula_bytes"]);
        // Every number's source is named.
        for source in ["predicted", "allocator", "device"] {
            assert!(doc["sources"][source].as_str().is_some_and(|s| s.starts_with(source)), "{backend}: {source}");
        }
        match backend {
            // lavapipe's Vulkan backend reports its allocations: the segment buffers hold the
            // allocator's reserved bytes, plus the driver's rounding.
            "gpu" => {
                let d = &doc["device"];
                assert_eq!(d["requested_bytes"], doc["allocator_stats"]["reserved_bytes"], "{d}");
                let rounding = d["driver_rounding_bytes"].as_i64().expect("rounding");
                assert!(rounding >= 0, "{d}");
                assert_eq!(d["segment_bytes"].as_i64(), d["requested_bytes"].as_i64().map(|r| r + rounding));
                assert!(d["memory_blocks"].as_u64().expect("blocks") >= 1);
                assert!(doc["device_not_reported"].is_null());
            }
            _ => {
                assert!(doc["device"].is_null());
                assert!(doc["device_not_reported"].as_str().expect("why").contains("CPU backend"));
            }
        }
    }
}

#[test]
fn measure_reports_oom_with_exit_code_3() {
    for backend in ["cpu", "gpu"] {
        let out = oomlab(&["measure", "--batch", "512", "--budget", "32MiB", "--backend", backend, "--json"]);
        assert_eq!(out.status.code(), Some(3), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        let msg = doc["oom"]["message"].as_str().expect("oom.message");
        assert!(msg.starts_with("GPU out of memory. Tried to allocate"), "{msg}");
        assert!(doc["oom"]["category"].is_string() && doc["oom"]["op"].is_string());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("GPU out of memory"), "{stderr}");
    }
}

#[test]
fn sweep_finds_the_largest_batch_and_writes_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("sweep.csv");
    let out = oomlab(&[
        "sweep",
        "--batch",
        "1..200",
        "--budget",
        "64MiB",
        "--json",
        "--csv",
        csv.to_str().unwrap_or("s.csv"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let largest = doc["largest_fitting_batch"].as_u64().expect("some batch fits");
    let first_oom = doc["first_oom_batch"].as_u64().expect("some batch does not fit");
    assert_eq!(first_oom, largest + 1, "memory grows monotonically with the batch");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 200);
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(text.lines().count(), 201);
    assert!(text.starts_with("batch,fits,peak_allocated_bytes,peak_reserved_bytes,parameters"));
    // Fitting and OOM rows alike have the header's columns, the message in the last one.
    let fields = csv::fields;
    let header = text.lines().next().unwrap_or("");
    assert!(header.ends_with(",activation_formula_bytes,oom"), "{header}");
    for line in text.lines() {
        assert_eq!(fields(line), fields(header), "{line}");
    }
    assert!(text.lines().last().is_some_and(|l| l.contains(",false,") && l.ends_with('"')));
    // the executed sweep agrees with the plan where it was run
    let out = oomlab(&[
        "sweep",
        "--batch",
        &format!("{},{}", largest, largest + 1),
        "--budget",
        "64MiB",
        "--execute",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exec: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(exec["largest_fitting_batch"].as_u64(), Some(largest));
    assert_eq!(exec["source"], "allocator");
    let bad = oomlab(&["sweep", "--batch", "9..3"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = oomlab(&["train", "--batch", "1..4"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = oomlab(&["measure", "--budget", "lots"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn train_beyond_the_budget_exits_3_on_both_backends() {
    for backend in ["cpu", "gpu"] {
        let out = oomlab(&["train", "--steps", "1", "--batch", "512", "--budget", "32MiB", "--backend", backend]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{backend}: {stderr}");
        assert!(stderr.contains("GPU out of memory. Tried to allocate"), "{backend}: {stderr}");
    }
}

/// Every toggle reaches `measure` and `sweep`, changes the measured memory as it should, and
/// `measure` reports the recomputation.
#[test]
fn measure_and_sweep_take_every_toggle() {
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args =
            vec!["measure", "--backend", "cpu", "--batch", "8", "--seq-len", "32", "--layers", "3", "--json"];
        args.extend_from_slice(extra);
        let out = oomlab(&args);
        assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let base = run(&[]);
    let act = |v: &serde_json::Value| v["allocator_activation_bytes"].as_u64().expect("activation bytes");
    // Each optimizer state is its own entry: AdamW's m and v, each as big as the weights.
    let states = &base["optimizer_states"];
    assert!(states["adam_m"].as_u64().is_some_and(|b| b > 0) && states["adam_m"] == states["adam_v"], "{states}");
    assert_eq!(base["recomputed_flops"], 0);
    for extra in [
        &["--checkpoint", "blocks"][..],
        &["--checkpoint", "every:2"],
        &["--checkpoint", "selective"],
        &["--attention", "fused"],
        &["--micro-batch", "2", "--accum", "4"],
        &["--checkpoint", "blocks", "--attention", "fused", "--accum", "2"],
        &["--lora", "4", "--lora-targets", "qkv,mlp", "--checkpoint", "every:2"],
        &["--precision", "fp16"],
        &["--precision", "bf16", "--attention", "fused", "--checkpoint", "blocks"],
    ] {
        let v = run(extra);
        assert!(act(&v) < act(&base), "{extra:?}: {} ≥ {}", act(&v), act(&base));
        assert_eq!(v["allocator_activation_bytes"], v["predicted_activation_formula_bytes"], "{extra:?}");
        assert_eq!(v["batch"], 8, "{extra:?}: the effective batch");
        let recomputes = extra.contains(&"--checkpoint");
        assert_eq!(v["recomputed_flops"].as_u64().expect("flops") > 0, recomputes, "{extra:?}");
    }
    let v = run(&["--optimizer", "sgd"]);
    assert_eq!(v["allocator"]["optimizer_state"], 0);
    // LoRA: gradients and optimizer state for the adapters only.
    let v = run(&["--lora", "2"]);
    for c in ["gradients", "optimizer_state"] {
        let (lora, full) = (v["allocator"][c].as_u64().expect(c), base["allocator"][c].as_u64().expect(c));
        assert!(lora * 10 < full, "{c}: {lora} vs {full}");
    }

    let out = oomlab(&[
        "sweep",
        "--batch",
        "4,8",
        "--accum",
        "2",
        "--checkpoint",
        "blocks",
        "--attention",
        "fused",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["batch"], 8);
    assert_eq!(v["techniques"]["accum"], 2);
    assert_eq!(v["techniques"]["attention"], "fused");
}

/// `compare`: one row per technique, measured, with gradients that agree with the baseline.
#[test]
fn compare_lists_every_technique_against_the_baseline() {
    let out = oomlab(&[
        "compare",
        "--backend",
        "cpu",
        "--batch",
        "4",
        "--seq-len",
        "32",
        "--layers",
        "4",
        "--steps",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["technique"].as_str()).collect();
    for needle in
        ["baseline", "checkpoint blocks", "every:2", "selective", "fused attention", "accumulation 1×4", "sgd"]
    {
        assert!(names.iter().any(|n| n.contains(needle)), "no row for {needle}: {names:?}");
    }
    let base = &rows[0];
    let base_act = base["activation_bytes"].as_u64().expect("baseline activations");
    for row in &rows[1..] {
        let name = row["technique"].as_str().unwrap_or("?");
        assert!(row["step_ms"].as_f64().expect("time") > 0.0);
        // Throughput, so accumulation's cost is visible.
        assert!(row["tokens_per_sec"].as_f64().expect("throughput") > 0.0, "{name}");
        if name.starts_with("LoRA") {
            assert!(row["grad_rel_diff"].is_null(), "LoRA has no baseline gradients to match");
            continue;
        }
        let diff = row["grad_rel_diff"].as_f64().expect("gradient agreement");
        // 16-bit storage rounds every activation: fp16 keeps 11 significant bits, bf16 8.
        let tol = if name.contains("fp16") {
            5e-3
        } else if name.contains("bf16") {
            5e-2
        } else {
            1e-5
        };
        println!("{name}: gradients within {diff:.1e} of the baseline");
        assert!(diff < tol, "{name}: gradients differ by {diff}");
        assert!(row["step_ms"].as_f64().expect("time") > 0.0);
        if !name.starts_with("optimizer") {
            assert!(row["activation_bytes"].as_u64().expect("activations") < base_act, "{name}");
        }
    }
}

#[test]
fn estimate_json_has_the_issue_keys_and_agrees_with_the_library() {
    let out = oomlab(&[
        "estimate",
        "--model",
        "llama2-7b",
        "--gpu",
        "a100-80",
        "--batch",
        "8",
        "--seq-len",
        "4096",
        "--precision",
        "bf16",
        "--zero",
        "3",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--sp",
        "--checkpoint",
        "selective",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["parameters"], 6_738_415_616u64);
    let per_gpu = j["per_gpu_bytes"].as_object().expect("per_gpu_bytes");
    for k in ["parameters", "gradients", "optimizer_state", "master_weights", "activations", "logits", "temporaries"] {
        assert!(per_gpu.contains_key(k), "{k}");
    }
    let sum: u64 = per_gpu.values().map(|v| v.as_u64().expect("bytes")).sum();
    assert_eq!(j["peak_bytes"].as_u64(), Some(sum), "the categories add up to the peak");
    let max = j["max_micro_batch"].as_u64().expect("max_micro_batch");
    assert!(max >= 8 && j["fits"] == true, "{j}");
    assert_eq!(j["tokens_per_step"], 8 * 4096 * 8);
    // The same from the library.
    let arch = oomlab::estimate::presets::model("llama2-7b").expect("preset");
    let gpu = oomlab::estimate::presets::gpu("a100-80").expect("gpu");
    let mut s = oomlab::estimate::Setup::new(arch, gpu, 8, 4096);
    s.parallel =
        oomlab::estimate::Parallel { data: 8, tensor: 8, sequence: true, zero: 3, expert: 1, ..Default::default() };
    s.checkpoint = oomlab::plan::Checkpoint::Selective;
    let e = oomlab::estimate::estimate(&s).expect("estimate");
    assert_eq!(j["peak_bytes"].as_u64(), Some(e.peak_bytes));
    assert_eq!(oomlab::estimate::max_micro_batch(&s).expect("max"), max);
}

#[test]
fn estimate_text_sweep_claims_and_bad_input() {
    let out = oomlab(&["estimate", "--model", "gpt2", "--gpu", "t4", "--batch", "4", "--sweep"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["GPT-2 small (124,439,808 parameters)", "activations", "Korthikanti", "largest micro-batch", "OOM"] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let out = oomlab(&["claims"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1.8–2.5×") && text.contains("breaks") && text.contains("holds"), "{text}");
    // In Chinese when the system is: the same claims and numbers, the catalogs' words.
    let zh = support_cli::oomlab_in("zh_CN.UTF-8", &["claims"]);
    let zh = String::from_utf8_lossy(&zh.stdout);
    assert!(
        zh.contains("batch size 翻倍，显存增加 1.8–2.5 倍") && zh.contains("不成立") && zh.contains("判定方法"),
        "{zh}"
    );
    let ratios = text.split("multiplies the peak by ").nth(1).and_then(|r| r.split(" —").next()).expect("the ratios");
    assert!(zh.contains(&format!("峰值分别乘以 {ratios}")), "the same numbers: {ratios} in {zh}");
    let out = oomlab(&["estimate", "--model", "custom", "--hidden", "1024", "--layers", "4", "--heads", "8", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let (h, l, v, t) = (1024u64, 4u64, 50257u64, 1024u64);
    assert_eq!(j["parameters"], 12 * l * h * h + 13 * l * h + v * h + t * h + 2 * h);
    // GPT-3's shape at its own context: the position table is set with --positions (2048 rows;
    // without it, sequence 2048 is longer than the 1024-row table).
    let gpt3 = ["estimate", "--model", "custom", "--hidden", "12288", "--layers", "96", "--heads", "96", "--json"];
    let out = oomlab(&[&gpt3[..], &["--positions", "2048", "--seq-len", "2048"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let (h, l, t) = (12288u64, 96u64, 2048u64);
    assert_eq!(j["parameters"], 12 * l * h * h + 13 * l * h + v * h + t * h + 2 * h, "a 2048-row table");
    assert_eq!(j["seq_len"], 2048);
    let out = oomlab(&[&gpt3[..], &["--seq-len", "2048"]].concat());
    assert!(String::from_utf8_lossy(&out.stderr).contains("position table (1024)"));
    let cases: &[(&[&str], &str)] = &[
        (&["estimate", "--model", "custom", "--positions", "-1"], "--positions must be 0 or more"),
        (&["estimate", "--model", "gpt5"], "unknown model"),
        (&["estimate", "--gpu", "abacus"], "unknown GPU"),
        (&["estimate", "--batch", "0"], "--batch must be at least 1"),
        (&["estimate", "--batch", "99999999999"], "micro-batch must be between"),
        (&["estimate", "--zero", "4"], "ZeRO has stages 0 to 3"),
        (&["estimate", "--zero", "-1"], "--zero takes"),
        (&["estimate", "--tp", "3"], "tensor parallelism 3"),
        (&["estimate", "--offload", "params"], "ZeRO stage 3"),
        (&["estimate", "--offload", "disk"], "unknown offload"),
        (&["estimate", "--offload", "gradients"], "needs optimizer offload"),
        (&["estimate", "--qlora"], "--qlora needs --lora"),
        (&["estimate", "--precision", "fp8"], "[possible values: fp32, fp16, bf16, pure-bf16]"),
        (&["estimate", "--optimizer", "lion"], "[possible values: sgd, momentum, adam]"),
        (&["estimate", "--model", "custom", "--norm", "batchnorm"], "[possible values: layernorm, rmsnorm]"),
        (&["estimate", "--model", "gpt2", "--seq-len", "2048"], "position table"),
        (&["estimate", "--model", "custom", "--heads", "7"], "divisible by heads"),
    ];
    assert_usage_errors(cases);
}

/// Absurd sizes: a batch the host could never hold is an out-of-memory report (exit 3) or a
/// clear refusal, never an abort; a plan too large to count is a usage error (exit 2); a deep
/// model sweeps quickly (plans are linear in the layers).
#[test]
fn absurd_sizes_are_reports_not_aborts() {
    let out = oomlab(&["train", "--backend", "cpu", "--batch", "1000000", "--budget", "1TiB", "--steps", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("host memory") || stderr.contains("out of memory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let cases: &[(&[&str], &str)] = &[
        (
            &["measure", "--d-model", "1024", "--heads", "1024", "--seq-len", "1048576", "--batch", "1048576"],
            "more than oomlab plans",
        ),
        (&["sweep", "--layers", "1000000", "--batch", "1..4"], "ops"),
    ];
    assert_usage_errors(cases);
    let out = oomlab(&[
        "sweep",
        "--d-model",
        "7",
        "--heads",
        "7",
        "--layers",
        "4096",
        "--seq-len",
        "2",
        "--batch",
        "1..512:128",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("largest batch that fits"), "{text}");
}

/// The text says where each number comes from: the plan's prediction, the allocator's live
/// account and the driver's report (with its rounding in bytes) on the GPU; on the CPU, why there
/// is no device report.
#[test]
fn measure_text_names_every_source() {
    let out = oomlab(&["measure", "--batch", "4", "--seq-len", "32", "--budget", "64MiB", "--backend", "gpu"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for needle in [
        "allocator (live)",
        "predicted (plan)",
        "device (driver report)",
        "bytes of the driver's",
        "memory summary, allocator (live)",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert!(!text.contains("measured"), "nothing oomlab predicts or accounts itself is called measured:\n{text}");
    let out = oomlab(&["measure", "--batch", "4", "--seq-len", "32", "--budget", "64MiB", "--backend", "cpu"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("device: the CPU backend has no device"), "{text}");
}

/// The enumerations take their aliases and any case (`--precision BF16`, `--attention flash`,
/// `--optimizer adam`, `--lora-targets c_attn,ffn`) and reach the step.
#[test]
fn enumerations_take_aliases_and_any_case() {
    let out = oomlab(&[
        "measure",
        "--backend",
        "CPU",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--precision",
        "BF16",
        "--attention",
        "flash",
        "--optimizer",
        "adam",
        "--lora",
        "2",
        "--lora-targets",
        "c_attn,ffn",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let t = &doc["techniques"];
    assert_eq!((t["precision"].as_str(), t["attention"].as_str()), (Some("bf16"), Some("fused")));
    assert_eq!(
        (t["lora"]["qkv"].as_bool(), t["lora"]["proj"].as_bool(), t["lora"]["mlp"].as_bool()),
        (Some(true), Some(false), Some(true))
    );
    assert_eq!(doc["backend"], "cpu (reference)");
    assert!(doc["optimizer_states"]["adam_m"].is_u64(), "AdamW's states");
}

/// Each mode is its own subcommand: the GEMM alone (`gemm`) and the claims lesson (`claims`).
#[test]
fn gemm_and_claims_are_subcommands() {
    let out = oomlab(&["gemm", "--size", "64"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("matmul 64×64×64:") && text.contains("GFLOP/s"), "{text}");
    let out = oomlab(&["claims", "--json"]);
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list.as_array().map(Vec::len), Some(7));
    assert_usage_errors(&[
        (&["estimate", "--claims"], "unexpected argument '--claims'"),
        (&["gemm", "--size", "0"], "must be at least 1"),
    ]);
}

/// A reader that goes away (`oomlab … | head -1`) ends the command quietly, without a panic.
#[cfg(unix)]
#[test]
fn a_closed_pipe_is_not_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_oomlab"))
        // One document larger than a pipe's buffer: its print fails once the reader has left.
        .args(["sweep", "--batch", "1..512", "--json", "--budget", "64MiB"])
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run oomlab");
    let mut first = [0u8; 16];
    child.stdout.take().expect("stdout").read_exact(&mut first).expect("some output");
    // The pipe is closed here (dropped); the rest of the output has nowhere to go.
    let out = child.wait_with_output().expect("exit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `snapshot show` on bad files: exit 2 with what the file is not.
#[test]
fn snapshot_show_refuses_bad_files() {
    let dir = std::env::temp_dir().join("oomlab-cli-snapshot");
    let _ = std::fs::create_dir_all(&dir);
    let text = dir.join("notes.txt");
    std::fs::write(&text, "hello").expect("write");
    let missing = dir.join("missing.pickle");
    let (text, missing) = (text.display().to_string(), missing.display().to_string());
    assert_usage_errors(&[
        (&["snapshot", "show", &text], "not a PyTorch memory snapshot"),
        (&["snapshot", "show", &missing], "the file cannot be read"),
    ]);
    // In the system's language, the file named.
    let zh = support_cli::oomlab_in("zh_CN.UTF-8", &["snapshot", "show", &text]);
    let stderr = String::from_utf8_lossy(&zh.stderr);
    assert_eq!(zh.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{text}: 这不是 PyTorch 显存快照（")), "{stderr}");
}

#[test]
fn the_allocator_options_reach_the_real_step() {
    // The toy at 48 × 64 in 54 MiB runs out of memory although more than enough is cached
    // (tests/allocator_options.rs); with expandable segments it fits, on both backends.
    let args = |backend: &'static str, conf: &'static str| {
        vec![
            "measure",
            "--batch",
            "48",
            "--seq-len",
            "64",
            "--budget",
            "54MiB",
            "--backend",
            backend,
            "--json",
            "--alloc-conf",
            conf,
        ]
    };
    for backend in ["cpu", "gpu"] {
        let out = oomlab(&args(backend, ""));
        assert_eq!(out.status.code(), Some(3), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        let msg = doc["oom"]["message"].as_str().expect("oom.message");
        assert!(msg.contains("fragmented"), "{msg}");
        let out = oomlab(&args(backend, "expandable_segments:True"));
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(doc["techniques"]["allocator"]["expandable_segments"], true, "{doc}");
        assert!(doc["allocator_stats"]["segments"].as_u64().expect("segments") <= 2, "one segment per pool");
        assert!(doc["allocator_peak_reserved_bytes"].as_u64().expect("peak") <= 54 << 20);
    }
    let out = oomlab(&[
        "measure",
        "--batch",
        "4",
        "--seq-len",
        "16",
        "--backend",
        "cpu",
        "--alloc-conf",
        "max_split_size_mb:64",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("allocator max_split_size_mb:64"),
        "the text report names it"
    );
    assert_usage_errors(&[
        (&["measure", "--alloc-conf", "max_split_size_mb:8"], "greater than 20"),
        (&["sweep", "--alloc-conf", "garbage_collection_threshold:1.5"], "between 0 and 1"),
        (&["measure", "--alloc-conf", "roundup_power2_divisions:4"], "unknown allocator option"),
        (&["compare", "--alloc-conf", "expandable_segments:maybe"], "True or False"),
    ]);
}

#[test]
fn the_simulated_gpus_reach_every_command() {
    let measure = |backend: &str, zero: &str, budget: &str| {
        oomlab(&[
            "measure",
            "--batch",
            "2",
            "--seq-len",
            "16",
            "--gpus",
            "4",
            "--zero",
            zero,
            "--bucket",
            "4096",
            "--budget",
            budget,
            "--backend",
            backend,
            "--json",
        ])
    };
    for backend in ["cpu", "gpu"] {
        let mut params = Vec::new();
        for zero in ["0", "1", "2", "3"] {
            let out = measure(backend, zero, "1GiB");
            assert!(out.status.success(), "{backend} ZeRO-{zero}: {}", String::from_utf8_lossy(&out.stderr));
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
            assert_eq!((doc["gpus"].as_u64(), doc["global_batch"].as_u64()), (Some(4), Some(8)), "{doc}");
            assert_eq!(doc["techniques"]["parallel"]["zero"], zero.parse::<u64>().expect("stage"));
            let ranks = doc["ranks"].as_array().expect("ranks");
            assert_eq!(ranks.len(), 4);
            for (k, r) in ranks.iter().enumerate() {
                assert_eq!(r["rank"], k as u64);
                assert_eq!(r["peak_bytes"], r["predicted_peak_bytes"], "{backend} ZeRO-{zero} GPU {k}: live = plan");
                assert!(r["allocator"]["communication"].as_u64().expect("communication") > 0, "its buckets");
            }
            params.push(ranks[0]["allocator"]["parameters"].as_u64().expect("parameters"));
        }
        assert!(params[3] * 3 < params[0], "{backend}: ZeRO-3 shards the parameters: {params:?}");
        // Between ZeRO-3's peak and plain data parallelism's, only ZeRO-3 fits; the OOM names
        // the simulated GPU that ran out.
        let out = measure(backend, "0", "2MiB");
        assert_eq!(out.status.code(), Some(3), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("GPU 0 has a total capacity"));
    }
    let out = oomlab(&[
        "bench",
        "--backend",
        "cpu",
        "--only",
        "default",
        "--steps",
        "1",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--gpus",
        "2",
        "--zero",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!((doc["configs"][0]["gpus"].as_u64(), doc["configs"][0]["zero"].as_u64()), (Some(2), Some(3)), "{doc}");
    // The gradients dump-step writes are gathered to full size: one GPU's file's size.
    let dir = std::env::temp_dir().join(format!("oomlab-zero-dump-{}", std::process::id()));
    let size = |extra: &[&str]| {
        let out_dir = dir.join(extra.len().to_string());
        let mut args = vec!["dump-step", "--out", out_dir.to_str().expect("utf-8"), "--batch", "2", "--seq-len", "16"];
        args.extend(["--backend", "cpu"]);
        args.extend(extra);
        let out = oomlab(&args);
        assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::metadata(out_dir.join("grads.safetensors")).expect("grads written").len()
    };
    assert_eq!(size(&["--gpus", "2", "--zero", "3"]), size(&[]));
    let _ = std::fs::remove_dir_all(&dir);
    assert_usage_errors(&[
        (&["measure", "--gpus", "9"], "1 to 8 GPUs"),
        (&["measure", "--gpus", "0"], "at least 1"),
        (&["measure", "--gpus", "2", "--zero", "4"], "stages 0 to 3"),
        (&["sweep", "--gpus", "2", "--bucket", "100"], "multiple of 128"),
        (&["sweep", "--gpus", "2", "--bucket", "200"], "multiple of 128"),
        (&["measure", "--gpus", "2", "--lora", "4"], "LoRA is not simulated over several GPUs"),
        (&["compare", "--gpus", "2", "--precision", "fp16"], "fp16's loss scaling"),
    ]);
}

/// Offload reaches the commands: `measure --json` gains the host object (host bytes, what the GPU
/// keeps less, the bytes copied each way), and the GPU's figures drop by exactly the offloaded
/// bytes on both backends; `bench` names it; what it does not run is a usage error.
#[test]
fn offload_reaches_every_command() {
    let measure = |backend: &str, offload: &str| {
        let out = oomlab(&[
            "measure",
            "--batch",
            "2",
            "--seq-len",
            "16",
            "--offload",
            offload,
            "--backend",
            backend,
            "--json",
        ]);
        assert!(out.status.success(), "{backend} {offload}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("one JSON document")
    };
    let n = |v: &serde_json::Value| v.as_u64().expect("a number");
    for backend in ["cpu", "gpu"] {
        let none = measure(backend, "none");
        assert_eq!(n(&none["host"]["total_bytes"]), 0, "{none}");
        for offload in ["optimizer", "optimizer+gradients"] {
            let doc = measure(backend, offload);
            let host = &doc["host"];
            assert!(n(&host["total_bytes"]) > 0 && n(&host["bytes"]["optimizer_state"]) > 0, "{doc}");
            assert_eq!(n(&doc["allocator"]["optimizer_state"]), 0, "{backend} {offload}: none on the GPU");
            assert_eq!(host["bytes"]["optimizer_state"], none["allocator"]["optimizer_state"], "moved, not made");
            // Before the step (the states alone): exactly what left the GPU.
            let kept = |d: &serde_json::Value| {
                ["optimizer_state", "gradients", "master_weights"].iter().map(|c| n(&d["allocator"][c])).sum::<u64>()
            };
            if offload == "optimizer" {
                assert_eq!(kept(&none) - kept(&doc), n(&host["offloaded_bytes"]), "{backend} {offload}");
            }
            assert_eq!(n(&host["to_host_bytes"]), n(&host["to_device_bytes"]), "the gradients down, the weights up");
            assert_eq!(doc["ranks"][0]["host"], *host);
            assert_eq!(doc["techniques"]["offload"], offload.replace('+', "_"));
        }
    }
    let out = oomlab(&[
        "bench",
        "--backend",
        "cpu",
        "--only",
        "default",
        "--steps",
        "1",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--offload",
        "optimizer",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["configs"][0]["offload"], "optimizer", "{doc}");
    assert_usage_errors(&[
        (&["measure", "--offload", "everything"], "none, optimizer or optimizer+gradients"),
        (&["measure", "--offload", "optimizer", "--precision", "fp16"], "fp16"),
        (&["measure", "--offload", "optimizer", "--gpus", "2"], "several GPUs"),
        (&["sweep", "--offload", "optimizer", "--lora", "4"], "LoRA"),
    ]);
}

/// `--batching packed` runs on both backends: the speeches packed into full rows (the plan has
/// their starts as inputs); padded and bucketed batches change length step by step: `train` goes
/// on at each length, `bench` and `compare` (which time one shape) refuse them.
#[test]
fn packed_batches_reach_the_commands() {
    let out =
        oomlab(&["measure", "--batch", "2", "--seq-len", "128", "--batching", "packed", "--backend", "cpu", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["techniques"]["batching"], "packed", "{doc}");
    let windows = oomlab(&["measure", "--batch", "2", "--seq-len", "128", "--backend", "cpu", "--json"]);
    let w: serde_json::Value = serde_json::from_slice(&windows.stdout).expect("one JSON document");
    assert!(doc["predicted_tensor_bytes"]["input"].as_u64() > w["predicted_tensor_bytes"]["input"].as_u64());
    let out = oomlab(&[
        "train",
        "--steps",
        "2",
        "--batch",
        "2",
        "--seq-len",
        "128",
        "--batching",
        "packed",
        "--backend",
        "cpu",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gpu =
        oomlab(&["measure", "--batch", "2", "--seq-len", "128", "--batching", "packed", "--backend", "gpu", "--json"]);
    assert!(gpu.status.success(), "{}", String::from_utf8_lossy(&gpu.stderr));
    let g: serde_json::Value = serde_json::from_slice(&gpu.stdout).expect("one JSON document");
    assert_eq!(g["allocator_peak_allocated_bytes"], doc["allocator_peak_allocated_bytes"], "the same step's memory");
    // Padded and bucketed batches take their documents' length: measure's step is as long as its
    // batch's longest document; train goes on at each batch's length, on both backends.
    for batching in ["padded", "bucketed"] {
        let out = oomlab(&[
            "measure",
            "--batch",
            "4",
            "--seq-len",
            "128",
            "--batching",
            batching,
            "--backend",
            "cpu",
            "--json",
        ]);
        assert!(out.status.success(), "{batching}: {}", String::from_utf8_lossy(&out.stderr));
        let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        let seq = m["seq_len"].as_u64().expect("seq_len");
        assert!(seq <= 128, "{batching}: {seq}");
        for backend in ["cpu", "gpu"] {
            let args = [
                "train",
                "--steps",
                "4",
                "--batch",
                "4",
                "--seq-len",
                "128",
                "--batching",
                batching,
                "--backend",
                backend,
                "--json",
            ];
            let out = oomlab(&args);
            assert!(out.status.success(), "{batching} {backend}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4, "{batching} {backend}: a line a step");
        }
    }
    assert_usage_errors(&[
        (&["bench", "--batching", "padded"], "--batching padded"),
        (&["compare", "--batching", "bucketed"], "--batching bucketed"),
        (&["measure", "--batching", "padded", "--gpus", "2"], "padded and bucketed batches"),
        (&["measure", "--batching", "sorted"], "windows, padded, bucketed or packed"),
    ]);
}

/// `sweep` with documents' batches: each row says its padding share and its memory per useful
/// token; packing wastes less than padding, bucketing no more than padding on average.
#[test]
fn sweep_shows_what_padding_costs() {
    let rows = |batching: &str| -> Vec<serde_json::Value> {
        let out = oomlab(&["sweep", "--batch", "4,8,16", "--seq-len", "128", "--batching", batching, "--json"]);
        assert!(out.status.success(), "{batching}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        doc["rows"].as_array().expect("rows").clone()
    };
    let share =
        |rows: &[serde_json::Value]| rows.iter().map(|r| r["padding_share"].as_f64().expect("share")).sum::<f64>();
    let (padded, bucketed, packed) = (rows("padded"), rows("bucketed"), rows("packed"));
    for r in padded.iter().chain(&bucketed).chain(&packed) {
        let s = r["padding_share"].as_f64().expect("a padding share");
        assert!((0.0..1.0).contains(&s), "{r}");
        assert!(r["bytes_per_useful_token"].as_f64().expect("bytes per useful token") > 0.0);
    }
    assert!(padded.iter().all(|r| r["seq"].as_u64().is_some_and(|t| t <= 128)), "its own length");
    assert!(share(&packed) < share(&padded), "packing pads less");
    assert!(share(&bucketed) <= share(&padded), "bucketing pads no more");
    assert!(rows("windows").iter().all(|r| r.get("padding_share").is_none()), "windows have no padding");
}
