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
