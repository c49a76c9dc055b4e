//! `bench`'s peers, timed on the same configs in the same run: PyTorch CPU eager (Hugging Face's
//! GPT-2, forward + backward + AdamW, 2 threads) and Burn on wgpu. Timings on the development
//! machines drift by ±25 % between runs, so only ratios measured together mean anything.
//!
//! The PyTorch script is `scripts/peers/torch_bench.py`, an unchanged copy of the shared peer,
//! built into the binary and fed to Python on stdin; with `--torch-device cuda` the peer is
//! `scripts/peers/torch_cuda_bench.py` instead (the same model on a CUDA GPU, for the real-GPU run). Burn's bench is a separate Cargo
//! project outside oomlab (about 11 minutes to build); `--burn-bench` names its binary.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The PyTorch peer's script (see the module docs).
const TORCH_BENCH: &str = include_str!("../../scripts/peers/torch_bench.py");
/// The PyTorch decode peer (`bench --decode`): eager decode with transformers' KV cache.
const TORCH_DECODE_BENCH: &str = include_str!("../../scripts/peers/torch_decode_bench.py");
/// The same model on a CUDA device (`--torch-device cuda`).
const TORCH_CUDA_BENCH: &str = include_str!("../../scripts/peers/torch_cuda_bench.py");

/// Where the PyTorch peer runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum TorchDevice {
    /// PyTorch CPU eager, 2 threads (the shared peer).
    #[default]
    Cpu,
    /// PyTorch CUDA eager, fp32 (a machine with an NVIDIA GPU).
    Cuda,
}
#[derive(clap::Args, Debug, Clone, Default)]
pub(super) struct PeerArgs {
    /// A Python with torch and transformers, to time PyTorch CPU eager on the same configs in
    /// the same run. Default: $OOMLAB_TORCH_PYTHON, else `python3` when it has both; `none`
    /// skips it.
    #[arg(long, value_name = "PYTHON")]
    torch_python: Option<String>,
    /// Where the PyTorch peer runs: `cpu` (eager, 2 threads) or `cuda` (eager, fp32, on the
    /// machine's NVIDIA GPU: the peer of a real-GPU run).
    #[arg(long, value_enum, default_value = "cpu")]
    torch_device: TorchDevice,
    /// A build of the Burn peer benchmark (a separate Cargo project), to time Burn on wgpu on the same
    /// configs in the same run. Default: $OOMLAB_BURN_BENCH; unset skips it.
    #[arg(long, value_name = "PATH")]
    burn_bench: Option<PathBuf>,
}

/// One config, as the peers take it.
#[derive(Clone, Copy, Debug)]
pub(super) struct PeerConfig<'a> {
    pub(super) name: &'a str,
    pub(super) d: usize,
    pub(super) layers: usize,
    pub(super) heads: usize,
    pub(super) seq: usize,
    pub(super) batch: usize,
    pub(super) vocab: usize,
}

impl PeerConfig<'_> {
    fn args(&self, steps: usize) -> Vec<String> {
        let pairs = [
            ("--d", self.d),
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--seq", self.seq),
            ("--batch", self.batch),
            ("--vocab", self.vocab),
            ("--steps", steps),
        ];
        pairs.iter().flat_map(|(k, v)| [k.to_string(), v.to_string()]).collect()
    }
}

/// A peer's timing of one config.
#[derive(serde::Serialize, Debug, Clone)]
pub(super) struct PeerRow {
    /// "pytorch-cpu-eager", "pytorch-cuda-eager" or "burn-wgpu".
    pub(super) peer: &'static str,
    /// Which config ("default", "larger").
    pub(super) name: String,
    /// The peer's median step.
    pub(super) step_ms: f64,
    /// The peer's first step (Burn's includes its autotuning); PyTorch's CPU script does not say.
    pub(super) first_step_secs: Option<f64>,
    /// The peer's version and where it ran (torch version; Burn's adapter).
    pub(super) detail: String,
}

/// The peers' rows, and a line for each peer that did not run (and why).
pub(super) struct Peers {
    pub(super) rows: Vec<PeerRow>,
    pub(super) notes: Vec<String>,
}

/// Runs every available peer on each config, `steps` timed steps each.
pub(super) fn run(args: &PeerArgs, configs: &[PeerConfig], steps: usize) -> Peers {
    let mut peers = Peers { rows: Vec::new(), notes: Vec::new() };
    let torch = if args.torch_device == TorchDevice::Cuda { "PyTorch CUDA eager" } else { "PyTorch CPU eager" };
    match torch_python(args) {
        Ok(python) => {
            for c in configs {
                match run_torch(&python, args.torch_device, c, steps) {
                    Ok(row) => peers.rows.push(row),
                    Err(e) => peers.notes.push(format!("{torch}, {}: failed ({e})", c.name)),
                }
            }
        }
        Err(why) => peers.notes.push(format!("{torch}: not run ({why})")),
    }
    match args.burn_bench.clone().or_else(|| std::env::var_os("OOMLAB_BURN_BENCH").map(PathBuf::from)) {
        Some(bin) => {
            for c in configs {
                match run_burn(&bin, c, steps) {
                    Ok(row) => peers.rows.push(row),
                    Err(e) => peers.notes.push(format!("Burn wgpu, {}: failed ({e})", c.name)),
                }
            }
        }
        None => peers.notes.push("Burn wgpu: not run (no --burn-bench or $OOMLAB_BURN_BENCH)".into()),
    }
    peers
}

/// Why a peer did not run, or failed (the bench's notes say it; the processes' own words are
/// quoted).
#[derive(Debug, thiserror::Error)]
pub(super) enum PeerError {
    #[error("--torch-python none")]
    Declined,
    #[error("python3 has no torch and transformers; pass --torch-python")]
    NoTorch,
    #[error("cannot start {program}: {error}")]
    Start { program: String, error: std::io::Error },
    #[error("writing the script: {0}")]
    Script(std::io::Error),
    #[error("scratch directory: {0}")]
    Scratch(std::io::Error),
    #[error("{0}")]
    Wait(std::io::Error),
    /// It exited without a report: its status and the last line it wrote to stderr.
    #[error("{status}: {last}")]
    NoReport { status: std::process::ExitStatus, last: String },
    #[error("no median_step_secs in its report")]
    NoMedian,
}

/// The Python to run the PyTorch peer with, or why there is none.
fn torch_python(args: &PeerArgs) -> Result<String, PeerError> {
    let chosen = args.torch_python.clone().or_else(|| std::env::var("OOMLAB_TORCH_PYTHON").ok());
    if chosen.as_deref() == Some("none") {
        return Err(PeerError::Declined);
    }
    let python = chosen.clone().unwrap_or_else(|| "python3".into());
    if chosen.is_none() {
        // Only probe the default: a Python the user named is used as is (and its errors shown).
        let ok = Command::new(&python)
            .args(["-c", "import torch, transformers"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(PeerError::NoTorch);
        }
    }
    Ok(python)
}

fn run_torch(python: &str, device: TorchDevice, c: &PeerConfig, steps: usize) -> Result<PeerRow, PeerError> {
    let script = if device == TorchDevice::Cuda { TORCH_CUDA_BENCH } else { TORCH_BENCH };
    let mut child = Command::new(python)
        .arg("-")
        .args(c.args(steps.max(3)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| PeerError::Start { program: python.to_string(), error })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(PeerError::Script)?;
    }
    let out = child.wait_with_output().map_err(PeerError::Wait)?;
    let json = last_json(&out)?;
    let torch = text(&json, &["torch"]);
    Ok(match device {
        TorchDevice::Cpu => PeerRow {
            peer: "pytorch-cpu-eager",
            name: c.name.into(),
            step_ms: median_ms(&json)?,
            first_step_secs: None,
            detail: format!("torch {torch}, {} threads", text(&json, &["config", "threads"])),
        },
        TorchDevice::Cuda => PeerRow {
            peer: "pytorch-cuda-eager",
            name: c.name.into(),
            step_ms: median_ms(&json)?,
            first_step_secs: json.get("first_step_secs").and_then(serde_json::Value::as_f64),
            detail: format!("torch {torch}, {}, fp32", text(&json, &["device"])),
        },
    })
}

fn run_burn(bin: &std::path::Path, c: &PeerConfig, steps: usize) -> Result<PeerRow, PeerError> {
    // CubeCL writes its autotune cache next to the outermost Cargo.toml it finds, so run it in a
    // scratch directory with its own cache (kept between runs: a warm cache is Burn's usual state).
    let scratch = std::env::temp_dir().join("oomlab-burn-bench");
    std::fs::create_dir_all(scratch.join("cache")).map_err(PeerError::Scratch)?;
    let out = Command::new(bin)
        .args(c.args(steps.max(3)))
        .current_dir(&scratch)
        .env("XDG_CACHE_HOME", scratch.join("cache"))
        .output()
        .map_err(|error| PeerError::Start { program: bin.display().to_string(), error })?;
    let json = last_json(&out)?;
    let first = json.get("warmup_step_secs").and_then(|w| w.get(0)).and_then(serde_json::Value::as_f64);
    Ok(PeerRow {
        peer: "burn-wgpu",
        name: c.name.into(),
        step_ms: median_ms(&json)?,
        first_step_secs: first,
        detail: format!("burn {}, {}", text(&json, &["config", "burn"]), text(&json, &["adapter"])),
    })
}

/// The last line of a peer's stdout that parses as a JSON object (its report), or its error.
fn last_json(out: &std::process::Output) -> Result<serde_json::Value, PeerError> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let found = stdout.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok());
    match found {
        Some(v) if out.status.success() && v.is_object() => Ok(v),
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no report on stdout");
            Err(PeerError::NoReport { status: out.status, last: last.trim().to_string() })
        }
    }
}

fn median_ms(json: &serde_json::Value) -> Result<f64, PeerError> {
    match json.get("median_step_secs").and_then(serde_json::Value::as_f64) {
        Some(s) if s.is_finite() && s > 0.0 => Ok(s * 1e3),
        _ => Err(PeerError::NoMedian),
    }
}

/// A field of the report as text ("?" when absent).
fn text(json: &serde_json::Value, path: &[&str]) -> String {
    let v = path.iter().try_fold(json, |v, k| v.get(*k));
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "?".into(),
    }
}

/// PyTorch CPU eager's decode rates (tokens per second) at each batch of `batches`, for a GPT-2
/// of `model`'s shape, with prompts of `prompt` tokens and `steps` decode steps; or why it did
/// not run.
pub(super) fn torch_decode(
    args: &PeerArgs,
    model: &oomlab::model::ModelConfig,
    batches: &[usize],
    (prompt, steps): (usize, usize),
) -> Result<(Vec<(usize, f64)>, String), PeerError> {
    let python = torch_python(args)?;
    let list = batches.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let nums = [
        ("--d", model.d_model),
        ("--layers", model.n_layers),
        ("--heads", model.n_heads),
        ("--context", model.seq_len),
        ("--vocab", model.vocab),
        ("--prompt", prompt),
        ("--steps", steps),
    ];
    let mut cmd = Command::new(&python);
    cmd.arg("-").args(nums.iter().flat_map(|(k, v)| [k.to_string(), v.to_string()])).args(["--batches", &list]);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| PeerError::Start { program: python.clone(), error })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(TORCH_DECODE_BENCH.as_bytes()).map_err(PeerError::Script)?;
    }
    let out = child.wait_with_output().map_err(PeerError::Wait)?;
    let json = last_json(&out)?;
    let rates = json["rates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["batch"].as_u64()? as usize, r["decode_tokens_per_sec"].as_f64()?)))
        .collect();
    Ok((rates, format!("torch {}, transformers {}", text(&json, &["torch"]), text(&json, &["transformers"]))))
}
