//! The CLI's machine-readable output, byte for byte, against recorded files (`tests/golden/`),
//! timings aside: a refactor must not change what scripts read. The CPU backend, so sizes and
//! plan figures are the same on any machine; values computed by executing a step (`NOISY`)
//! may differ in their last bits where the CPU's matrix kernel differs (matrixmultiply picks
//! AVX-512, AVX2+FMA or SSE at run time), so those compare within 1e-5. `UPDATE_GOLDEN=1 cargo
//! test --test golden` rewrites the files (for a change that means to alter the output; say so
//! in its commit).

use std::process::Command;

/// Keys whose values are wall-clock measurements: replaced by 0 before comparing.
const TIMINGS: [&str; 3] = ["elapsed_secs", "step_ms", "tokens_per_sec"];

fn oomlab(args: &str) -> String {
    let xdg = std::env::temp_dir().join("oomlab-golden-xdg");
    let _ = std::fs::create_dir_all(&xdg);
    let out = Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(args.split_whitespace())
        .env("XDG_RUNTIME_DIR", xdg)
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .output()
        .expect("run oomlab");
    assert!(out.status.success(), "{args}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The text with every timing value replaced by 0 (`"step_ms":14.74` → `"step_ms":0`).
fn without_timings(text: &str) -> String {
    let mut out = text.to_string();
    for key in TIMINGS {
        let pattern = format!("\"{key}\":");
        let mut from = 0;
        while let Some(at) = out[from..].find(&pattern) {
            let start = from + at + pattern.len();
            let end = out[start..]
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+')))
                .map_or(out.len(), |n| start + n);
            out.replace_range(start..end, "0");
            from = start;
        }
    }
    out
}

/// Keys whose values come from executing a step in f32: compared within [`NOISE`].
const NOISY: [&str; 2] = ["loss", "grad_rel_diff"];
const NOISE: f64 = 1e-5;

/// Whether two outputs agree: the same JSON (line by line), NOISY numbers within NOISE.
fn same(got: &str, want: &str) -> bool {
    fn eq(a: &serde_json::Value, b: &serde_json::Value, noisy: bool) -> bool {
        use serde_json::Value::*;
        match (a, b) {
            (Number(x), Number(y)) if noisy => match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= NOISE * x.abs().max(y.abs()).max(1.0),
                _ => x == y,
            },
            (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| eq(a, b, noisy)),
            (Object(x), Object(y)) => {
                x.len() == y.len()
                    && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| eq(v, w, NOISY.contains(&k.as_str()))))
            }
            _ => a == b,
        }
    }
    got.lines().count() == want.lines().count()
        && got.lines().zip(want.lines()).all(|(g, w)| {
            match (serde_json::from_str::<serde_json::Value>(g), serde_json::from_str::<serde_json::Value>(w)) {
                (Ok(a), Ok(b)) => eq(&a, &b, false),
                _ => g == w,
            }
        })
}

#[test]
fn only_step_values_may_differ_and_only_by_noise() {
    let want = r#"{"loss":4.085768699645996,"flops":100,"rows":[{"grad_rel_diff":2.5e-7,"peak":3.5}]}"#;
    assert!(same(r#"{"loss":4.08577,"flops":100,"rows":[{"grad_rel_diff":3.5e-7,"peak":3.5}]}"#, want));
    assert!(!same(r#"{"loss":4.0859,"flops":100,"rows":[{"grad_rel_diff":2.5e-7,"peak":3.5}]}"#, want));
    assert!(!same(r#"{"loss":4.085768699645996,"flops":101,"rows":[{"grad_rel_diff":2.5e-7,"peak":3.5}]}"#, want));
    assert!(!same(
        r#"{"loss":4.085768699645996,"flops":100,"rows":[{"grad_rel_diff":2.5e-7,"peak":3.5000001}]}"#,
        want
    ));
    assert!(!same(r#"{"loss":4.085768699645996,"flops":100,"rows":[]}"#, want));
}

fn check(name: &str, args: &str) {
    let got = without_timings(&oomlab(args));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if !same(&got, &want) {
        let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "`oomlab {args}` differs from {} (first at line {}):\n got: {}\nwant: {}",
            path.display(),
            line + 1,
            got.lines().nth(line).unwrap_or(""),
            want.lines().nth(line).unwrap_or("")
        );
    }
}

#[test]
fn timings_are_the_only_thing_removed() {
    let text = r#"{"elapsed_secs":0.0011,"loss":4.08,"rows":[{"step_ms":14.7,"tokens_per_sec":4.3e3}]}"#;
    assert_eq!(without_timings(text), r#"{"elapsed_secs":0,"loss":4.08,"rows":[{"step_ms":0,"tokens_per_sec":0}]}"#);
}

#[test]
fn train_json() {
    check("train.jsonl", "train --steps 3 --batch 2 --seq-len 16 --backend cpu --json");
}

#[test]
fn measure_json() {
    check("measure.json", "measure --batch 4 --seq-len 32 --budget 64MiB --backend cpu --json");
}

#[test]
fn sweep_json() {
    check("sweep.json", "sweep --batch 1..64:8 --budget 64MiB --json");
}

#[test]
fn compare_json() {
    check("compare.json", "compare --layers 2 --batch 4 --seq-len 16 --steps 1 --backend cpu --json");
}

#[test]
fn estimate_json() {
    check("estimate.json", "estimate --model llama2-7b --gpu a100-80 --batch 8 --seq-len 4096 --sweep --json");
}

#[test]
fn claims_json() {
    check("claims.json", "claims --json");
}
