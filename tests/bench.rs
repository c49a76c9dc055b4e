//! `oomlab bench`: its JSON fields, and the peers it runs in the same run (faked here by small
//! scripts that print what the real peers print, so CI needs neither torch nor Burn).

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

#[path = "support/cli.rs"]
mod support_cli;
use support_cli::oomlab;

/// `oomlab bench` on the CPU, the default config only, one small step, then `peers`' flags.
fn bench(peers: &[&str]) -> std::process::Output {
    let mut args =
        vec!["bench", "--backend", "cpu", "--only", "default", "--steps", "1", "--seq-len", "16", "--batch", "2"];
    args.extend_from_slice(peers);
    oomlab(&args)
}

/// An executable shell script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[test]
fn bench_json_has_every_field_and_the_peers_of_the_same_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The PyTorch peer reads its script on stdin and prints one JSON line; it must get the
    // config's sizes as arguments (checked: it fails unless --d 64 and --seq 16 are there).
    let torch = script(
        dir.path(),
        "python",
        r#"cat > /dev/null
case "$*" in *"--d 64 "*"--seq 16 "*) ;; *) echo "bad args: $*" >&2; exit 1;; esac
echo 'some log line'
echo '{"config": {"threads": 2}, "median_step_secs": 0.0125, "torch": "9.9-fake"}'"#,
    );
    let burn = script(
        dir.path(),
        "burn-bench",
        r#"echo '{"config":{"burn":"0.22.1"},"median_step_secs":0.25,"adapter":"fake adapter","warmup_step_secs":[61.5,0.3]}'"#,
    );
    let (torch, burn) = (torch.to_string_lossy().into_owned(), burn.to_string_lossy().into_owned());
    let out = bench(&["--torch-python", &torch, "--burn-bench", &burn, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let configs = v["configs"].as_array().expect("configs");
    assert_eq!(configs.len(), 1, "--only default");
    let c = &configs[0];
    assert_eq!(c["name"], "default");
    assert_eq!(c["backend"], "cpu (reference)");
    for key in ["first_step_secs", "fwd_ms", "bwd_ms", "opt_ms", "step_ms"] {
        let x = c[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {c}"));
        assert!(x.is_finite() && x > 0.0, "{key} = {x}");
    }
    let peers = v["peers"].as_array().expect("peers");
    assert_eq!(peers.len(), 2, "{v}");
    let torch_row = peers.iter().find(|p| p["peer"] == "pytorch-cpu-eager").expect("torch row");
    assert_eq!(torch_row["name"], "default");
    assert!((torch_row["step_ms"].as_f64().unwrap_or(0.0) - 12.5).abs() < 1e-9);
    assert!(torch_row["detail"].as_str().unwrap_or("").contains("torch 9.9-fake, 2 threads"));
    let burn_row = peers.iter().find(|p| p["peer"] == "burn-wgpu").expect("burn row");
    assert!((burn_row["step_ms"].as_f64().unwrap_or(0.0) - 250.0).abs() < 1e-9);
    assert_eq!(burn_row["first_step_secs"].as_f64(), Some(61.5));
    assert_eq!(v["peers_not_run"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_missing_or_failing_peer_is_a_line_not_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = script(dir.path(), "python", "cat > /dev/null; echo 'ModuleNotFoundError: torch' >&2; exit 1");
    let failing = failing.to_string_lossy().into_owned();
    let out = bench(&["--torch-python", &failing, "--burn-bench", "/nonexistent/burn-bench"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PyTorch CPU eager, default: failed") && text.contains("ModuleNotFoundError"), "{text}");
    assert!(text.contains("Burn wgpu, default: failed (cannot start /nonexistent/burn-bench"), "{text}");
    assert!(text.contains("default ") && text.contains("d 64 L 2 T 16 B 2"), "{text}");
    let none = bench(&["--torch-python", "none"]);
    let text = String::from_utf8_lossy(&none.stdout);
    assert!(text.contains("PyTorch CPU eager: not run (--torch-python none)"), "{text}");
    assert!(text.contains("Burn wgpu: not run"), "{text}");
}

/// `--torch-device cuda` feeds Python the CUDA peer (`scripts/peers/torch_cuda_bench.py`, which
/// synchronises the GPU around each step) instead of the CPU one, and reports its row as
/// "pytorch-cuda-eager" with the device and its first step.
#[test]
fn the_cuda_peer_gets_the_cuda_script() {
    let dir = tempfile::tempdir().expect("tempdir");
    let torch = script(
        dir.path(),
        "python",
        r#"grep -q 'torch.cuda.synchronize()' || { echo 'not the CUDA script' >&2; exit 1; }
echo '{"config": {"threads": 0}, "median_step_secs": 0.002, "first_step_secs": 1.5, "device": "Fake H200", "torch": "9.9-fake"}'"#,
    );
    let torch = torch.to_string_lossy().into_owned();
    let out = bench(&["--torch-python", &torch, "--torch-device", "cuda", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let row = v["peers"].as_array().and_then(|p| p.first()).expect("a peer row");
    assert_eq!(row["peer"], "pytorch-cuda-eager", "{v}");
    assert!((row["step_ms"].as_f64().unwrap_or(0.0) - 2.0).abs() < 1e-9);
    assert_eq!(row["first_step_secs"].as_f64(), Some(1.5));
    assert!(row["detail"].as_str().unwrap_or("").contains("Fake H200, fp32"), "{row}");
    // The CPU peer (the default device) is not fed the CUDA script.
    let out = bench(&["--torch-python", &torch]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PyTorch CPU eager, default: failed") && text.contains("not the CUDA script"), "{text}");
}
