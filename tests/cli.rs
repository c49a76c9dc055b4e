//! The CLI's contract: JSON lines, exit codes, clear messages for bad input.

use std::process::Command;

fn oomlab(args: &[&str]) -> std::process::Output {
    let xdg = std::env::temp_dir().join("oomlab-cli-xdg");
    let _ = std::fs::create_dir_all(&xdg);
    Command::new(env!("CARGO_BIN_EXE_oomlab")).args(args).env("XDG_RUNTIME_DIR", xdg).output().expect("run oomlab")
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
        (&["train", "--backend", "tpu"], "unknown backend"),
        (&["train", "--layers", "99999999999"], "absurdly large"),
        (&["train", "--steps", "0"], "steps must be at least 1"),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, needle) in cases {
        let out = oomlab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: expected {needle:?} in {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
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
fn measure_json_has_measured_predicted_and_the_formula() {
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
            assert!(doc["measured"][key].is_u64(), "{backend}: measured.{key}");
            assert_eq!(doc["measured"][key], doc["predicted"][key], "{backend}: {key} measured = predicted");
        }
        assert!(doc["peak_allocated_bytes"].as_u64().expect("peak") > 0);
        assert!(
            doc["peak_reserved_bytes"].as_u64().expect("peak") >= doc["peak_allocated_bytes"].as_u64().expect("peak")
        );
        assert_eq!(doc["activation_bytes"], doc["activation_formula_bytes"]);
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
    assert_eq!(exec["source"], "measured");
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
