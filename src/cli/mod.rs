//! The headless CLI. Exit codes: 0 success, 2 bad usage or bad input, 1 other failures
//! (3 is reserved for a reported out-of-memory).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

mod bench;
mod compare;
mod config;
mod estimate;
mod estimate_serve;
mod estimate_text;
mod measure;
mod peers;
mod report;
mod serve;
mod serving;
mod snapshot;
mod sweep;
mod train;

use clap::{Args, Parser, Subcommand};
use oomlab::backend::gpu::bench::bench_matmul;
use oomlab::backend::{BackendError, BackendKind, Executor, Gpu, Trainer};
use oomlab::data::Dataset;
use oomlab::dump::StepDump;
use oomlab::memory::device::{DeviceFigures, SOURCE_ALLOCATOR, SOURCE_DEVICE, SOURCE_PREDICTED};
use oomlab::memory::formula::activation_peak_bytes;
use oomlab::memory::sweep::SweepSeries;
use oomlab::memory::{Budget, StepMemory, memory_summary, simulate};
use oomlab::model::params::LoraConfig;
use oomlab::model::{ModelConfig, StepShape, check_dim};
use oomlab::plan::ConfigError;
use oomlab::plan::{
    AttentionKind, Batches, Category, Checkpoint, OptimizerConfig, OptimizerKind, Phase, Plan, Precision, StepRequest,
    Techniques, ValidRequest, micro_batch,
};
use oomlab::units::format_bytes;

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_OOM: i32 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "oomlab",
    version,
    about = "Why does a large batch size run out of GPU memory? Run with no arguments for the app."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train the toy GPT and print the loss per step.
    Train {
        #[arg(long, default_value_t = 200, value_parser = count, allow_hyphen_values = true)]
        steps: usize,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Run one training step and write config, weights, batch, gradients and loss for
    /// Hugging Face transformers.
    DumpStep {
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Run one real step under a memory budget: the allocator's live bytes, the plan's prediction and the device's report per category, the
    /// peaks, the allocator's stats. Exit code 3 on out-of-memory.
    Measure {
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Memory per batch size, from the plan (milliseconds) or by real steps (--execute): the
    /// largest batch that fits the budget and where out-of-memory starts.
    Sweep {
        /// Run a real step for every batch size instead of predicting from the plan.
        #[arg(long)]
        execute: bool,
        /// Also write the table as CSV.
        #[arg(long)]
        csv: Option<PathBuf>,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// One row per memory-saving technique against the baseline of the same config: peak
    /// memory, saved activations, step time and gradient agreement, each from real steps.
    Compare {
        /// Timed steps per technique (after the gradient check).
        #[arg(long, default_value_t = 3, value_parser = count, allow_hyphen_values = true)]
        steps: usize,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Predict memory per GPU for real models (GPT-2, LLaMA-2, Mistral, custom) on real GPUs:
    /// model states by precision, optimizer, ZeRO and offload; activations (Korthikanti et al.)
    /// with TP/SP, recomputation and fused attention; logits; fixed costs. No GPU needed.
    Estimate {
        #[command(flatten)]
        args: estimate::EstimateArgs,
    },
    /// Time forward, backward and optimizer on the default and a larger config, and the
    /// matmul kernel's GFLOP/s.
    Bench {
        /// Timed steps per config (after one warm-up step).
        #[arg(long, default_value_t = 10, value_parser = count, allow_hyphen_values = true)]
        steps: usize,
        /// Also time every GPU kernel of each config timed, on its own.
        #[arg(long)]
        profile: bool,
        /// Time serving's decode instead: the toy's decode tokens per second over its KV cache at
        /// batch 1 and 16, beside PyTorch CPU eager with transformers' cache.
        #[arg(long)]
        decode: bool,
        /// Which configs to time: the default (flags below) and the larger one (d 256, 4
        /// layers, seq 128, batch 16).
        #[arg(long, value_enum, default_value = "both")]
        only: bench::BenchConfigs,
        #[command(flatten)]
        peers: peers::PeerArgs,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// The GEMM kernel alone (the subgroup one where the GPU has 8-lane subgroups, else the
    /// tiled one): GFLOP/s of an N×N×N product on the GPU.
    Gemm {
        /// m = n = k.
        #[arg(long, default_value_t = 1024, value_parser = count, allow_hyphen_values = true)]
        size: usize,
    },
    /// The claims lesson: common statements about training memory, each checked against the
    /// estimator with its tolerance — every number computed.
    Claims {
        /// Machine-readable output on stdout.
        #[arg(long)]
        json: bool,
    },
    /// PyTorch memory snapshots (pytorch.org/memory_viz): export one executed step of the toy, or
    /// summarise a snapshot from a real training run
    Snapshot {
        #[command(subcommand)]
        action: snapshot::SnapshotCommand,
    },
    /// Serve a stream of requests with the toy: a real KV cache (contiguous, growing or paged),
    /// continuous batching, admission and preemption under a memory budget. Exit code 3 when a
    /// step or a request ran out of memory.
    Serving {
        #[command(flatten)]
        args: serving::ServingArgs,
    },
    /// The class server: serves the web app and the class API (live predictions from a whole
    /// class), keeping classes and answers in a SQLite file. Prints the join address and a QR code.
    Serve {
        #[command(flatten)]
        args: serve::ServeArgs,
    },
}

use bench::{bench, bench_gemm};
use compare::compare;
use config::*;
use measure::measure;
use report::*;
use sweep::sweep;
use train::{dump_step, train};

pub fn main() -> i32 {
    // Like other Unix tools, stop quietly when the reader goes away (`oomlab … | head`) rather
    // than panic on a failed print: restore SIGPIPE's default, which Rust's runtime ignores.
    #[cfg(unix)]
    // SAFETY: at the start of main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,wgpu_hal::gles=off")).init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        None => run_app(),
        Some(Command::Train { steps, config }) => train(steps, &config),
        Some(Command::DumpStep { out, config }) => dump_step(&out, &config),
        Some(Command::Measure { config }) => measure(&config),
        Some(Command::Sweep { execute, csv, config }) => sweep(execute, csv.as_deref(), &config),
        Some(Command::Compare { steps, config }) => compare(steps, &config),
        Some(Command::Estimate { args }) if args.serve.serve => estimate_serve::run(&args),
        Some(Command::Estimate { args }) => estimate::run(&args),
        Some(Command::Bench { decode: true, peers, config, .. }) => bench::decode(&peers, &config),
        Some(Command::Bench { steps, profile, only, peers, config, .. }) => {
            bench(steps, profile, only, &peers, &config)
        }
        Some(Command::Gemm { size }) => bench_gemm(size),
        Some(Command::Claims { json }) => estimate::claims_command(json),
        Some(Command::Snapshot { action }) => snapshot::run(&action),
        Some(Command::Serve { args }) => serve::run(&args),
        Some(Command::Serving { args }) => serving::run(&args),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(f) => {
            eprintln!("error: {}", f.message);
            f.code
        }
    }
}

fn run_app() -> Result<(), Failure> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size([1280.0, 800.0]).with_title("oomlab"),
        renderer: eframe::Renderer::Wgpu,
        wgpu_options: oomlab::app::wgpu_configuration(),
        ..Default::default()
    };
    eframe::run_native(
        "oomlab",
        options,
        Box::new(|cc| Ok(Box::new(oomlab::app::OomlabApp::new(cc, Default::default())))),
    )
    .map_err(|e| Failure { code: EXIT_FAILURE, message: format!("the app could not start: {e}") })
}
