//! The headless CLI. Exit codes: 0 success, 2 bad usage or bad input, 1 other failures
//! (3 is reserved for a reported out-of-memory).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

mod estimate;

use clap::{Args, Parser, Subcommand};
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::executor::{bench_matmul, build_kernels};
use oomlab::backend::gpu::{GpuContext, GpuExecutor, Kernels};
use oomlab::backend::{BackendError, BackendKind, Trainer};
use oomlab::data::Dataset;
use oomlab::dump::StepDump;
use oomlab::memory::device::{DeviceFigures, SOURCE_ALLOCATOR, SOURCE_DEVICE, SOURCE_PREDICTED};
use oomlab::memory::formula::activation_peak_bytes;
use oomlab::memory::{StepMemory, memory_summary, simulate, simulate_peak};
use oomlab::model::params::LoraConfig;
use oomlab::model::{ConfigError, ModelConfig, StepShape, check_dim};
use oomlab::plan::{
    AttentionKind, Category, Checkpoint, OptimizerConfig, OptimizerKind, Phase, Plan, Precision, Techniques,
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
    about = "Why does a large batch size run out of GPU memory? Run with no arguments for the app.",
    allow_negative_numbers = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train the toy GPT and print the loss per step.
    #[command(allow_negative_numbers = true)]
    Train {
        #[arg(long, default_value_t = 200)]
        steps: i64,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Run one training step and write config, weights, batch, gradients and loss for
    /// Hugging Face transformers.
    #[command(allow_negative_numbers = true)]
    DumpStep {
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Run one real step under a memory budget: the allocator's live bytes, the plan's prediction and the device's report per category, the
    /// peaks, the allocator's stats. Exit code 3 on out-of-memory.
    #[command(allow_negative_numbers = true)]
    Measure {
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Memory per batch size, from the plan (milliseconds) or by real steps (--execute): the
    /// largest batch that fits the budget and where out-of-memory starts.
    #[command(allow_negative_numbers = true)]
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
    #[command(allow_negative_numbers = true)]
    Compare {
        /// Timed steps per technique (after the gradient check).
        #[arg(long, default_value_t = 3)]
        steps: i64,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Predict memory per GPU for real models (GPT-2, LLaMA-2, Mistral, custom) on real GPUs:
    /// model states by precision, optimizer, ZeRO and offload; activations (Korthikanti et al.)
    /// with TP/SP, recomputation and fused attention; logits; fixed costs. No GPU needed.
    #[command(allow_negative_numbers = true)]
    Estimate {
        #[command(flatten)]
        args: estimate::EstimateArgs,
    },
    /// Time forward, backward and optimizer on the default and a larger config, and the
    /// matmul kernel's GFLOP/s.
    #[command(allow_negative_numbers = true)]
    Bench {
        /// Timed steps per config (after one warm-up step).
        #[arg(long, default_value_t = 10)]
        steps: i64,
        /// Also time every GPU kernel of the default config on its own.
        #[arg(long)]
        profile: bool,
        /// Only the GEMM kernel's GFLOP/s (m = n = k = this size).
        #[arg(long)]
        matmul_only: Option<i64>,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

/// Flags every subcommand shares.
#[derive(Args, Debug, Clone)]
struct ConfigArgs {
    /// Sequence length T of a step.
    #[arg(long, default_value_t = 64)]
    seq_len: i64,
    /// The model's maximum sequence length (position embeddings); defaults to --seq-len.
    #[arg(long)]
    max_seq_len: Option<i64>,
    #[arg(long, default_value_t = 64)]
    d_model: i64,
    #[arg(long, default_value_t = 2)]
    layers: i64,
    #[arg(long, default_value_t = 4)]
    heads: i64,
    /// Batch size B (sequences per optimizer step; 16 by default); `sweep` also takes a range,
    /// `1..512` (every batch), `1..512:8` (every 8th) or a list, `1,2,4,8`. With --accum K each
    /// batch is split into K micro-batches of B/K.
    #[arg(long)]
    batch: Option<String>,
    /// Micro-batch size M (sequences per forward pass) for gradient accumulation: the step runs
    /// --accum K micro-batches, an effective batch of M·K. Takes ranges like --batch in `sweep`.
    #[arg(long)]
    micro_batch: Option<String>,
    /// Gradient accumulation: micro-batches per optimizer step.
    #[arg(long, default_value_t = 1)]
    accum: i64,
    /// Activation checkpointing: off, blocks (every block), every:K (a checkpoint every K
    /// blocks; `every` alone takes √L) or selective (recompute only the attention core).
    #[arg(long, default_value = "off")]
    checkpoint: String,
    /// Attention: standard (saves the T×T probabilities) or fused (FlashAttention-style).
    #[arg(long, default_value = "standard")]
    attention: String,
    /// Numeric precision: fp32, fp16 (mixed, with dynamic loss scaling) or bf16 (mixed).
    #[arg(long, default_value = "fp32")]
    precision: String,
    /// LoRA rank R: freeze the base weights and train rank-R adapters on --lora-targets.
    #[arg(long)]
    lora: Option<i64>,
    /// LoRA's alpha (the adapters are scaled by alpha/R); defaults to R.
    #[arg(long)]
    lora_alpha: Option<f32>,
    /// Projections LoRA adapts: a list of qkv, proj (attention output), mlp (c_fc and c_proj),
    /// or all.
    #[arg(long, default_value = "qkv")]
    lora_targets: String,
    /// The virtual GPU's memory: a preset (32MiB, 64MiB, 256MiB, 1GiB) or any size.
    #[arg(long, default_value = "1GiB")]
    budget: String,
    /// Vocabulary size; defaults to the built-in corpus's character count.
    #[arg(long)]
    vocab: Option<i64>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// gpu or cpu.
    #[arg(long, default_value = "gpu")]
    backend: String,
    /// adamw, momentum or sgd.
    #[arg(long, default_value = "adamw")]
    optimizer: String,
    /// Learning rate (default: 3e-3 for AdamW, 0.1 for SGD).
    #[arg(long)]
    lr: Option<f32>,
    /// Machine-readable output on stdout.
    #[arg(long)]
    json: bool,
}

/// A failure with the exit code it maps to.
struct Failure {
    code: i32,
    message: String,
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Self { code: EXIT_USAGE, message: e.to_string() }
    }
}

impl From<BackendError> for Failure {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::Config(c) => c.into(),
            BackendError::OutOfMemory(oom) => Self { code: EXIT_OOM, message: oom.message },
            // The host's memory ran out (or would have): an out-of-memory too, of the CPU.
            BackendError::HostMemory(message) => Self { code: EXIT_OOM, message },
            other => Self { code: EXIT_FAILURE, message: other.to_string() },
        }
    }
}

impl From<oomlab::backend::gpu::GpuError> for Failure {
    fn from(e: oomlab::backend::gpu::GpuError) -> Self {
        BackendError::from(e).into()
    }
}

#[derive(Clone)]
struct Resolved {
    model: ModelConfig,
    /// The shape of one forward pass (the micro-batch with accumulation).
    shape: StepShape,
    optimizer: OptimizerConfig,
    techniques: Techniques,
    backend: BackendKind,
    seed: u64,
    json: bool,
    budget_bytes: u64,
    /// Every micro-batch size the flags name (one, except for sweeps).
    batches: Vec<usize>,
}

impl Resolved {
    /// The batch one step consumes (micro-batch × accumulation).
    fn batch_shape(&self) -> StepShape {
        StepShape { batch: self.shape.batch * self.techniques.accum, seq: self.shape.seq }
    }

    fn plan(&self) -> Result<Plan, ConfigError> {
        Plan::build_with(&self.model, self.shape, &self.optimizer, &self.techniques)
    }
}

impl ConfigArgs {
    fn resolve(&self, dataset: &Dataset) -> Result<Resolved, Failure> {
        let seq = check_dim("sequence length", self.seq_len)?;
        let max_seq = match self.max_seq_len {
            Some(v) => check_dim("max sequence length", v)?,
            None => seq,
        };
        let vocab = match self.vocab {
            Some(v) => check_dim("vocab", v)?,
            None => dataset.tokenizer.vocab_size(),
        };
        let model = ModelConfig {
            vocab,
            seq_len: max_seq,
            d_model: check_dim("d_model", self.d_model)?,
            n_layers: check_dim("layers", self.layers)?,
            n_heads: check_dim("heads", self.heads)?,
        };
        model.validate()?;
        let accum = check_dim("--accum", self.accum)?;
        let techniques = Techniques {
            checkpoint: Checkpoint::parse(&self.checkpoint, model.n_layers)?,
            attention: AttentionKind::parse(&self.attention)?,
            accum,
            precision: Precision::parse(&self.precision)?,
            lora: match self.lora {
                Some(r) => {
                    let rank = check_dim("--lora rank", r)?;
                    let mut l = LoraConfig::new(rank).with_targets(&self.lora_targets)?;
                    l.alpha = self.lora_alpha.unwrap_or(rank as f32);
                    Some(l)
                }
                None => None,
            },
        };
        techniques.validate(&model)?;
        let batches = micro_batches(self.batch.as_deref(), self.micro_batch.as_deref(), accum)?;
        let shape = StepShape { batch: batches[0], seq };
        shape.validate(&model)?;
        let kind = match self.optimizer.to_ascii_lowercase().as_str() {
            "adamw" | "adam" => OptimizerKind::AdamW,
            "momentum" => OptimizerKind::Momentum,
            "sgd" => OptimizerKind::Sgd,
            other => {
                return Err(ConfigError::Other(format!(
                    "unknown optimizer {other:?}: expected adamw, momentum or sgd"
                ))
                .into());
            }
        };
        let mut optimizer = match kind {
            OptimizerKind::AdamW => OptimizerConfig::default(),
            _ => OptimizerConfig { kind, ..OptimizerConfig::sgd_momentum(0.1, 0.9) },
        };
        if let Some(lr) = self.lr {
            optimizer.lr = lr;
        }
        optimizer.validate()?;
        let budget_bytes = oomlab::units::parse_bytes(&self.budget).map_err(ConfigError::Other)?;
        Ok(Resolved {
            model,
            shape,
            optimizer,
            techniques,
            backend: self.backend.parse()?,
            seed: self.seed,
            json: self.json,
            budget_bytes,
            batches,
        })
    }

    /// Like [`Self::resolve`], for commands that take one batch size.
    fn resolve_one(&self, dataset: &Dataset) -> Result<Resolved, Failure> {
        let r = self.resolve(dataset)?;
        if r.batches.len() != 1 {
            return Err(ConfigError::Other(
                "--batch / --micro-batch name several sizes; only `sweep` takes a range".to_string(),
            )
            .into());
        }
        Ok(r)
    }
}

/// The micro-batch sizes `--batch`, `--micro-batch` and `--accum` name: `--micro-batch` as
/// given, or each `--batch` divided by `--accum` (which must divide it); both together must agree.
fn micro_batches(batch: Option<&str>, micro: Option<&str>, accum: usize) -> Result<Vec<usize>, ConfigError> {
    match (batch, micro) {
        (_, Some(m)) => {
            let micro = parse_batches(m)?;
            if let Some(b) = batch {
                let batches = parse_batches(b)?;
                let implied: Vec<usize> = micro.iter().map(|m| m * accum).collect();
                if batches != implied {
                    return Err(ConfigError::Other(format!(
                        "--batch {b} disagrees with --micro-batch {m} × --accum {accum}: give one of --batch and --micro-batch"
                    )));
                }
            }
            Ok(micro)
        }
        (b, None) => {
            let text = b.unwrap_or("16");
            parse_batches(text)?
                .into_iter()
                .map(|b| {
                    if b.is_multiple_of(accum) {
                        Ok(b / accum)
                    } else {
                        Err(ConfigError::Other(format!(
                            "batch {b} cannot be split into --accum {accum} equal micro-batches; give --micro-batch M for an effective batch of M·{accum}"
                        )))
                    }
                })
                .collect()
        }
    }
}

/// "16", "1..512", "1..512:8" or "1,2,4,8" → batch sizes, each validated.
fn parse_batches(text: &str) -> Result<Vec<usize>, ConfigError> {
    let bad = || ConfigError::Other(format!("cannot read --batch {text:?}: use 16, 1..512, 1..512:8 or 1,2,4"));
    let num = |s: &str| -> Result<usize, ConfigError> {
        let v: i64 = s.trim().parse().map_err(|_| bad())?;
        check_dim("batch", v)
    };
    let out: Vec<usize> = if let Some((a, rest)) = text.split_once("..") {
        let (b, step) = match rest.split_once(':') {
            Some((b, step)) => (b, num(step)?),
            None => (rest, 1),
        };
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(ConfigError::Other(format!("--batch {text}: the range is empty")));
        }
        (a..=b).step_by(step).collect()
    } else {
        text.split(',').map(num).collect::<Result<_, _>>()?
    };
    if out.is_empty() {
        return Err(bad());
    }
    if out.len() > 100_000 {
        return Err(ConfigError::Other(format!("--batch {text} names {} batch sizes; at most 100000", out.len())));
    }
    Ok(out)
}

struct Gpu {
    ctx: GpuContext,
    kernels: std::sync::Arc<Kernels>,
}

fn open_gpu() -> Result<Gpu, Failure> {
    let ctx = GpuContext::new_headless_blocking()?;
    let kernels = pollster::block_on(build_kernels(&ctx))?;
    Ok(Gpu { ctx, kernels })
}

fn make_trainer(r: &Resolved, plan: Plan, gpu: Option<&Gpu>) -> Result<Box<dyn Trainer>, Failure> {
    Ok(match (r.backend, gpu) {
        (BackendKind::Gpu, Some(g)) => {
            Box::new(pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, r.seed, r.budget_bytes))?)
        }
        (BackendKind::Gpu, None) => {
            let g = open_gpu()?;
            Box::new(pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, r.seed, r.budget_bytes))?)
        }
        (BackendKind::Cpu, _) => Box::new(CpuExecutor::<f32>::with_budget(plan, r.seed, r.budget_bytes)?),
    })
}

pub fn main() -> i32 {
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
        Some(Command::Estimate { args }) => estimate::run(&args),
        Some(Command::Bench { steps, profile, matmul_only: Some(size), .. }) => {
            let _ = steps;
            let _ = profile;
            bench_gemm(size)
        }
        Some(Command::Bench { steps, profile, matmul_only: None, config }) => bench(steps, profile, &config),
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
        ..Default::default()
    };
    eframe::run_native("oomlab", options, Box::new(|cc| Ok(Box::new(oomlab::app::OomlabApp::new(cc)))))
        .map_err(|e| Failure { code: EXIT_FAILURE, message: format!("the app could not start: {e}") })
}

fn train(steps: i64, config: &ConfigArgs) -> Result<(), Failure> {
    let steps = check_dim("steps", steps)?;
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let plan = r.plan()?;
    let mut trainer = make_trainer(&r, plan, None)?;
    let bar = if r.json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(steps as u64) };
    // A hidden bar (JSON, or stderr not a terminal) swallows println: print plainly then.
    let say = |bar: &indicatif::ProgressBar, line: String| {
        if bar.is_hidden() { println!("{line}") } else { bar.println(line) }
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !r.json {
        say(
            &bar,
            format!(
                "training on {} — {} parameters, batch {}×{} ({})",
                trainer.backend_name(),
                r.model.num_parameters(),
                r.batch_shape().batch,
                r.shape.seq,
                r.techniques.describe()
            ),
        );
    }
    let start = Instant::now();
    let mut stdout = std::io::stdout().lock();
    for step in 0..steps {
        let batch = dataset.batch(r.batch_shape(), r.seed, step as u64)?;
        let loss = trainer.train_step(&batch)?;
        let elapsed = start.elapsed().as_secs_f64();
        if r.json {
            let line = serde_json::json!({"step": step + 1, "loss": loss, "elapsed_secs": elapsed});
            let _ = writeln!(stdout, "{line}");
        } else {
            say(&bar, format!("step {:>5}  loss {loss:.4}  ({elapsed:.2} s)", step + 1));
            bar.set_message(format!("loss {loss:.4}"));
            bar.inc(1);
        }
        if !loss.is_finite() {
            return Err(Failure {
                code: EXIT_FAILURE,
                message: format!("the loss became {loss} at step {}; try a smaller --lr", step + 1),
            });
        }
    }
    bar.finish_and_clear();
    Ok(())
}

fn dump_step(out: &std::path::Path, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    if r.techniques.lora.is_some() {
        return Err(ConfigError::Other(
            "dump-step writes the whole model's gradients for Hugging Face; with --lora there are none (the base is frozen)"
                .into(),
        )
        .into());
    }
    let plan = r.plan()?;
    let layout = plan.layout.clone();
    let mut trainer = make_trainer(&r, plan, None)?;
    let initial = trainer.read_params()?;
    let batch = dataset.batch(r.batch_shape(), r.seed, 0)?;
    let loss = trainer.compute_grads(&batch)?;
    let grads = trainer.read_grads()?;
    let dump = StepDump {
        model: &r.model,
        layout: &layout,
        initial_params: &initial,
        grads: &grads,
        batch: &batch,
        loss,
        backend: trainer.backend_name(),
    };
    dump.write(out).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
    if r.json {
        println!("{}", serde_json::json!({"out": out.display().to_string(), "loss": loss}));
    } else {
        println!("wrote {} (loss {loss:.6})", out.display());
    }
    Ok(())
}

/// Timings of one config.
#[derive(serde::Serialize)]
struct BenchRow {
    config: String,
    backend: String,
    first_step_secs: f64,
    forward_ms: f64,
    backward_ms: f64,
    optimizer_ms: f64,
    step_ms: f64,
    steps_per_sec: f64,
}

fn bench(steps: i64, profile: bool, config: &ConfigArgs) -> Result<(), Failure> {
    let steps = check_dim("steps", steps)?;
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let larger = Resolved {
        model: ModelConfig { vocab: r.model.vocab, seq_len: 128, d_model: 256, n_layers: 4, n_heads: 4 },
        shape: StepShape { batch: 16, seq: 128 },
        optimizer: r.optimizer,
        techniques: r.techniques,
        backend: r.backend,
        seed: r.seed,
        json: r.json,
        budget_bytes: r.budget_bytes,
        batches: vec![16],
    };
    let mut rows = Vec::new();
    let mut gflops = None;
    let gpu_start = Instant::now();
    let gpu = if r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let pipelines_secs = gpu_start.elapsed().as_secs_f64();
    for (name, cfg) in [("default", &r), ("larger", &larger)] {
        let plan = cfg.plan()?;
        let t0 = Instant::now();
        let first_extra = if name == "default" { pipelines_secs } else { 0.0 };
        let row = match (&gpu, cfg.backend) {
            (Some(g), BackendKind::Gpu) => {
                let mut exec = pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, plan, cfg.seed))?;
                let batch = dataset.batch(cfg.batch_shape(), cfg.seed, 0)?;
                exec.upload_batch(&batch)?;
                pollster::block_on(exec.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]))?;
                let first = t0.elapsed().as_secs_f64() + first_extra;
                let mut phase_secs = [0.0f64; 3];
                for _ in 0..steps {
                    for (i, phase) in [Phase::Forward, Phase::Backward, Phase::Optimizer].into_iter().enumerate() {
                        let t = Instant::now();
                        pollster::block_on(exec.run_phases(&[phase]))?;
                        phase_secs[i] += t.elapsed().as_secs_f64();
                    }
                }
                let t = Instant::now();
                for i in 0..steps {
                    let batch = dataset.batch(cfg.batch_shape(), cfg.seed, i as u64)?;
                    pollster::block_on(exec.train_step_async(&batch))?;
                }
                let step = t.elapsed().as_secs_f64() / steps as f64;
                if profile && name == "default" {
                    print_profile(&exec.profile_ops(steps)?);
                }
                row(name, cfg, exec.backend_name(), first, phase_secs, steps, step)
            }
            _ => {
                let mut exec = CpuExecutor::<f32>::new(plan, cfg.seed)?;
                let batch = dataset.batch(cfg.batch_shape(), cfg.seed, 0)?;
                exec.upload_batch(&batch)?;
                exec.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer])?;
                let first = t0.elapsed().as_secs_f64();
                let mut phase_secs = [0.0f64; 3];
                for _ in 0..steps {
                    for (i, phase) in [Phase::Forward, Phase::Backward, Phase::Optimizer].into_iter().enumerate() {
                        let t = Instant::now();
                        exec.run_phases(&[phase])?;
                        phase_secs[i] += t.elapsed().as_secs_f64();
                    }
                }
                let total: f64 = phase_secs.iter().sum::<f64>() / steps as f64;
                row(name, cfg, "cpu (reference)".into(), first, phase_secs, steps, total)
            }
        };
        rows.push(row);
    }
    if let Some(g) = &gpu {
        gflops = Some(bench_matmul(&g.ctx, &g.kernels, 1024, 1024, 1024, 10)?);
    }
    if r.json {
        println!(
            "{}",
            serde_json::json!({"configs": rows, "matmul_gflops": gflops, "matmul_shape": [1024, 1024, 1024]})
        );
    } else {
        println!(
            "{:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            "config", "first (s)", "fwd (ms)", "bwd (ms)", "opt (ms)", "step (ms)", "steps/s"
        );
        for r in &rows {
            println!(
                "{:<34} {:>9.3} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8.2}",
                r.config, r.first_step_secs, r.forward_ms, r.backward_ms, r.optimizer_ms, r.step_ms, r.steps_per_sec
            );
        }
        if let Some(first) = rows.first() {
            println!("backend: {}", first.backend);
        }
        if let Some(g) = gflops {
            println!("matmul 1024×1024×1024: {g:.1} GFLOP/s");
        }
    }
    Ok(())
}

fn row(
    name: &str,
    cfg: &Resolved,
    backend: String,
    first: f64,
    phase_secs: [f64; 3],
    steps: usize,
    step_secs: f64,
) -> BenchRow {
    let per = |s: f64| s / steps as f64 * 1e3;
    let m = cfg.model;
    BenchRow {
        config: format!("{name}: d {} L {} T {} B {}", m.d_model, m.n_layers, cfg.shape.seq, cfg.shape.batch),
        backend,
        first_step_secs: first,
        forward_ms: per(phase_secs[0]),
        backward_ms: per(phase_secs[1]),
        optimizer_ms: per(phase_secs[2]),
        step_ms: step_secs * 1e3,
        steps_per_sec: 1.0 / step_secs,
    }
}

fn print_profile(ops: &[(Phase, String, f64)]) {
    let total: f64 = ops.iter().map(|o| o.2).sum();
    println!("per-kernel profile of the default config (each command run alone; total {:.2} ms):", total * 1e3);
    let mut sorted: Vec<&(Phase, String, f64)> = ops.iter().collect();
    sorted.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (phase, label, secs) in sorted.iter() {
        println!("  {:>8.3} ms {:>5.1}%  {:<9} {label}", secs * 1e3, secs / total * 100.0, format!("{phase:?}"));
    }
}

fn bench_gemm(size: i64) -> Result<(), Failure> {
    let n = check_dim("matmul size", size)?;
    let g = open_gpu()?;
    let gflops = bench_matmul(&g.ctx, &g.kernels, n, n, n, 5)?;
    println!("matmul {n}×{n}×{n}: {gflops:.2} GFLOP/s on {}", g.ctx.describe());
    Ok(())
}

/// One real step: the allocator's live account of it, the loss, the backend, and the device's
/// figures.
struct RealStep {
    memory: StepMemory,
    loss: f32,
    backend: String,
    device: DeviceFigures,
}

/// Runs one real step on the configured backend.
fn real_step(r: &Resolved, plan: Plan, dataset: &Dataset, gpu: Option<&Gpu>) -> Result<RealStep, Failure> {
    let mut trainer: Box<dyn Trainer> = match (r.backend, gpu) {
        (BackendKind::Gpu, Some(g)) => {
            Box::new(pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, plan, r.seed, r.budget_bytes))?)
        }
        _ => Box::new(CpuExecutor::<f32>::with_budget(plan, r.seed, r.budget_bytes)?),
    };
    let batch = dataset.batch(r.batch_shape(), r.seed, 0)?;
    let loss = trainer.train_step(&batch)?;
    let memory =
        trainer.memory().cloned().ok_or_else(|| Failure { code: EXIT_FAILURE, message: "no step ran".into() })?;
    Ok(RealStep { memory, loss, backend: trainer.backend_name(), device: trainer.device_figures() })
}

/// What each source of a number means, for JSON documents and the CLI's text.
fn sources_json(backend: &str) -> serde_json::Value {
    serde_json::json!({
        "predicted": SOURCE_PREDICTED,
        "allocator": format!("{SOURCE_ALLOCATOR} on {backend}"),
        "device": SOURCE_DEVICE,
    })
}

/// The device object of a JSON document: the driver's figures, or why there are none.
fn device_json(device: &DeviceFigures) -> serde_json::Value {
    match device {
        DeviceFigures::Reported(d) => {
            let (blocks, block_bytes) = d.segment_blocks();
            serde_json::json!({
                "segment_buffers": d.segments.len(),
                "segment_bytes": d.segment_bytes(),
                "requested_bytes": d.requested_bytes(),
                "driver_rounding_bytes": d.rounding_bytes() as i64,
                "peak_segment_bytes": d.peak_segment_bytes,
                "memory_blocks": blocks,
                "memory_block_bytes": block_bytes,
                "other_allocations": d.other_allocations,
                "other_bytes": d.other_bytes,
                "total_allocated_bytes": d.total_allocated_bytes,
                "total_reserved_bytes": d.total_reserved_bytes,
                "missing_segments": d.missing,
                "leftover_buffers": d.leftover,
                "counters": d.counters,
                "segments": d.segments,
            })
        }
        DeviceFigures::NotReported { .. } => serde_json::Value::Null,
    }
}

/// The device's figures as the CLI prints them, next to the allocator's reserved bytes.
fn device_text(device: &DeviceFigures, allocator_reserved: u64) -> String {
    match device {
        DeviceFigures::Reported(d) => {
            let (blocks, block_bytes) = d.segment_blocks();
            format!(
                "device (driver report): {} segment buffer(s) hold {} — the allocator's {} reserved + {} bytes of the driver's \
                 rounding — in {blocks} driver memory block(s) of {} in all; {} other allocations ({}) outside oomlab's allocator\n",
                d.segments.len(),
                format_bytes(d.segment_bytes()),
                format_bytes(allocator_reserved),
                d.rounding_bytes(),
                format_bytes(block_bytes),
                d.other_allocations,
                format_bytes(d.other_bytes),
            )
        }
        DeviceFigures::NotReported { reason } => format!("device: {reason}\n"),
    }
}

fn oom_json(oom: &oomlab::memory::StepOom) -> serde_json::Value {
    serde_json::json!({
        "message": oom.message,
        "tensor": oom.tensor_name,
        "category": oom.category.name(),
        "op": oom.op_label,
        "requested_bytes": oom.error.requested_bytes,
        "tried_bytes": oom.error.tried_bytes,
        "capacity_bytes": oom.error.capacity_bytes,
        "free_bytes": oom.error.free_bytes,
        "allocated_bytes": oom.error.allocated_bytes,
        "reserved_bytes": oom.error.reserved_bytes,
    })
}

fn measure(config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let plan = r.plan()?;
    let formula = activation_peak_bytes(&r.model, r.shape, &r.techniques);
    let (flops, recomputed_flops) = plan.flops();
    // Each optimizer state on its own: AdamW's m and v are two more copies of the weights.
    let optimizer_states: std::collections::BTreeMap<String, u64> = plan
        .tensors
        .iter()
        .filter(|t| t.category == Category::OptimizerState)
        .map(|t| (t.name.trim_start_matches("optimizer.").to_string(), t.size_bytes()))
        .collect();
    let predicted = simulate(&plan, r.budget_bytes);
    let gpu = if r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let real = match real_step(&r, plan, &dataset, gpu.as_ref()) {
        Ok(m) => Ok(m),
        Err(f) if f.code == EXIT_OOM => Err(f),
        Err(f) => return Err(f),
    };
    match (real, predicted) {
        (Ok(RealStep { memory: m, loss, backend, device }), Ok(p)) => {
            if r.json {
                let doc = serde_json::json!({
                    "sources": sources_json(&backend),
                    "backend": backend,
                    "batch": r.batch_shape().batch,
                    "micro_batch": r.shape.batch,
                    "accum": r.techniques.accum,
                    "seq_len": r.shape.seq,
                    "techniques": r.techniques,
                    "flops": flops,
                    "recomputed_flops": recomputed_flops,
                    "budget_bytes": r.budget_bytes,
                    "loss": loss,
                    "allocator": m.peak_allocated,
                    "predicted": p.peak_allocated,
                    "allocator_tensor_bytes": m.peak_requested,
                    "predicted_tensor_bytes": p.peak_requested,
                    "allocator_peak_allocated_bytes": m.peak_allocated_bytes(),
                    "allocator_peak_reserved_bytes": m.peak_reserved_bytes(),
                    "predicted_peak_allocated_bytes": p.peak_allocated_bytes(),
                    "predicted_peak_reserved_bytes": p.peak_reserved_bytes(),
                    "allocator_activation_bytes": m.activation_peak_bytes,
                    "predicted_activation_formula_bytes": formula,
                    "optimizer_states": optimizer_states,
                    "allocator_stats": m.stats,
                    "device": device_json(&device),
                    "device_not_reported": match &device {
                        DeviceFigures::NotReported { reason } => Some(reason.clone()),
                        DeviceFigures::Reported(_) => None,
                    },
                });
                println!("{doc}");
            } else {
                println!(
                    "one step on {backend}, batch {}×{}, budget {} — loss {loss:.4}",
                    r.batch_shape().batch,
                    r.shape.seq,
                    format_bytes(r.budget_bytes)
                );
                println!("techniques: {}", r.techniques.describe());
                println!("{:<16} {:>16} {:>16}", "at the peak", "allocator (live)", "predicted (plan)");
                for c in Category::ALL {
                    let (a, b) = (m.peak_allocated.get(c), p.peak_allocated.get(c));
                    if a > 0 || b > 0 {
                        println!("{:<16} {:>16} {:>16}", c.name(), format_bytes(a), format_bytes(b));
                    }
                }
                println!(
                    "{:<16} {:>16} {:>16}",
                    "total",
                    format_bytes(m.peak_allocated_bytes()),
                    format_bytes(p.peak_allocated_bytes())
                );
                println!(
                    "{:<16} {:>16} {:>16}",
                    "peak reserved",
                    format_bytes(m.peak_reserved_bytes()),
                    format_bytes(p.peak_reserved_bytes())
                );
                println!(
                    "activations saved for backward, at their peak: {} by the allocator (live), {} by the closed form (predicted)",
                    format_bytes(m.activation_peak_bytes),
                    format_bytes(formula)
                );
                print!("{}", device_text(&device, m.stats.reserved_bytes));
                if recomputed_flops > 0 {
                    println!(
                        "recomputation: {:.1} MFLOP of {:.1} MFLOP per step ({:.0}% extra compute)",
                        recomputed_flops as f64 / 1e6,
                        flops as f64 / 1e6,
                        100.0 * recomputed_flops as f64 / (flops - recomputed_flops).max(1) as f64
                    );
                }
                if !optimizer_states.is_empty() {
                    let list: Vec<String> =
                        optimizer_states.iter().map(|(name, b)| format!("{name} {}", format_bytes(*b))).collect();
                    println!(
                        "optimizer state, one tensor per state ({}): {}",
                        r.optimizer.kind.name(),
                        list.join(", ")
                    );
                }
                print!("{}", memory_summary(&m, "allocator (live)"));
            }
            Ok(())
        }
        (Err(f), predicted) => {
            if r.json {
                let oom = predicted.err().map(|e| oom_json(&e));
                println!(
                    "{}",
                    serde_json::json!({"oom": oom.unwrap_or_else(|| serde_json::json!({"message": f.message})), "budget_bytes": r.budget_bytes, "activation_formula_bytes": formula})
                );
            }
            Err(f)
        }
        (Ok(_), Err(p)) => Err(Failure {
            code: EXIT_FAILURE,
            message: format!("the step ran but the plan predicted an OOM: {}", p.message),
        }),
    }
}

/// One row of a sweep.
struct SweepRow {
    /// The effective batch (micro-batch × accumulation).
    batch: usize,
    memory: Result<StepMemory, String>,
    formula: u64,
}

fn sweep(execute: bool, csv: Option<&std::path::Path>, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve(&dataset)?;
    let gpu = if execute && r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let start = Instant::now();
    let mut rows = Vec::with_capacity(r.batches.len());
    for &batch in &r.batches {
        let shape = StepShape { batch, seq: r.shape.seq };
        let plan = Plan::build_with(&r.model, shape, &r.optimizer, &r.techniques)?;
        let formula = activation_peak_bytes(&r.model, shape, &r.techniques);
        let memory = if execute {
            let one = Resolved { shape, batches: vec![batch], ..r.clone() };
            match real_step(&one, plan, &dataset, gpu.as_ref()).map(|s| s.memory) {
                Ok(m) => Ok(m),
                Err(f) if f.code == EXIT_OOM => Err(f.message),
                Err(f) => return Err(f),
            }
        } else {
            simulate_peak(&plan, r.budget_bytes).map_err(|e| e.message)
        };
        rows.push(SweepRow { batch: batch * r.techniques.accum, memory, formula });
    }
    let elapsed = start.elapsed().as_secs_f64();
    let largest = rows.iter().filter(|row| row.memory.is_ok()).map(|row| row.batch).max();
    let first_oom = rows.iter().filter(|row| row.memory.is_err()).map(|row| row.batch).min();
    if let Some(path) = csv {
        let mut text = String::from("batch,fits,peak_allocated_bytes,peak_reserved_bytes");
        for c in Category::ALL {
            text.push_str(&format!(",{}", c.name()));
        }
        text.push_str(",activation_formula_bytes,oom\n");
        for row in &rows {
            match &row.memory {
                Ok(m) => {
                    text.push_str(&format!(
                        "{},true,{},{}",
                        row.batch,
                        m.peak_allocated_bytes(),
                        m.peak_reserved_bytes()
                    ));
                    for c in Category::ALL {
                        text.push_str(&format!(",{}", m.peak_allocated.get(c)));
                    }
                    text.push_str(&format!(",{},\n", row.formula));
                }
                Err(msg) => {
                    text.push_str(&format!("{},false,,", row.batch));
                    for _ in Category::ALL {
                        text.push(',');
                    }
                    text.push_str(&format!("{},\"{}\"\n", row.formula, msg.replace('"', "'")));
                }
            }
        }
        std::fs::write(path, text)
            .map_err(|e| Failure { code: EXIT_FAILURE, message: format!("cannot write {}: {e}", path.display()) })?;
    }
    if r.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| match &row.memory {
                Ok(m) => serde_json::json!({"batch": row.batch, "fits": true, "peak_allocated_bytes": m.peak_allocated_bytes(), "peak_reserved_bytes": m.peak_reserved_bytes(), "at_peak": m.peak_allocated, "activation_formula_bytes": row.formula}),
                Err(msg) => serde_json::json!({"batch": row.batch, "fits": false, "oom": msg, "activation_formula_bytes": row.formula}),
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"budget_bytes": r.budget_bytes, "techniques": r.techniques, "source": if execute { "allocator" } else { "predicted" }, "rows": list, "largest_fitting_batch": largest, "first_oom_batch": first_oom, "elapsed_secs": elapsed})
        );
    } else {
        println!(
            "memory per batch ({}, budget {}, seq {}, {}):",
            if execute { "allocator (live), from real steps" } else { "predicted by the plan" },
            format_bytes(r.budget_bytes),
            r.shape.seq,
            r.techniques.describe()
        );
        println!(
            "{:>6} {:>14} {:>14} {:>14} {:>14}",
            "batch", "peak alloc", "peak reserved", "activations", "model state"
        );
        for row in &rows {
            match &row.memory {
                Ok(m) => {
                    let state = m.peak_allocated.get(Category::Parameters)
                        + m.peak_allocated.get(Category::Gradients)
                        + m.peak_allocated.get(Category::OptimizerState)
                        + m.peak_allocated.get(Category::MasterWeights);
                    println!(
                        "{:>6} {:>14} {:>14} {:>14} {:>14}",
                        row.batch,
                        format_bytes(m.peak_allocated_bytes()),
                        format_bytes(m.peak_reserved_bytes()),
                        format_bytes(m.peak_allocated.get(Category::Activations)),
                        format_bytes(state)
                    );
                }
                Err(_) => println!("{:>6} {:>14}", row.batch, "OOM"),
            }
        }
        match largest {
            Some(b) => println!("largest batch that fits: {b}"),
            None => println!("no batch size fits the budget"),
        }
        if let Some(b) = first_oom {
            println!("out of memory from batch {b}");
        }
        println!("({} batch sizes in {:.1} ms)", rows.len(), elapsed * 1e3);
    }
    Ok(())
}

/// One technique of `compare`, measured.
#[derive(serde::Serialize)]
struct CompareRow {
    technique: String,
    micro_batch: usize,
    accum: usize,
    /// Out of memory under the budget (the other fields are then absent).
    oom: Option<String>,
    peak_allocated_bytes: Option<u64>,
    peak_reserved_bytes: Option<u64>,
    activation_bytes: Option<u64>,
    step_ms: Option<f64>,
    /// Training throughput: tokens of the effective batch per second.
    tokens_per_sec: Option<f64>,
    recomputed_flops: u64,
    flops: u64,
    loss: Option<f32>,
    /// Normwise relative difference of the gradients from the baseline's on the same batch and
    /// the same initial weights: max |g − g₀| / max |g₀|.
    grad_rel_diff: Option<f64>,
}

/// The rows of `compare`: the baseline, then each technique alone on the same effective batch,
/// then all of them together.
fn compare_variants(r: &Resolved) -> Vec<(String, Resolved)> {
    let batch = r.batch_shape().batch;
    let base = Resolved {
        shape: StepShape { batch, seq: r.shape.seq },
        techniques: Techniques::default(),
        batches: vec![batch],
        ..r.clone()
    };
    let with = |t: Techniques| Resolved { techniques: t, ..base.clone() };
    let mut out = vec![("baseline".to_string(), base.clone())];
    let l = r.model.n_layers;
    let mut checkpoints = vec![Checkpoint::BLOCKS];
    let k = Checkpoint::default_every(l);
    if k > 1 {
        checkpoints.push(Checkpoint::Every(k));
    }
    checkpoints.push(Checkpoint::Selective);
    for c in checkpoints {
        out.push((format!("checkpoint {}", c.label()), with(Techniques { checkpoint: c, ..Techniques::default() })));
    }
    for precision in [Precision::Fp16, Precision::Bf16] {
        let t = Techniques { precision, ..Techniques::default() };
        out.push((format!("{} mixed precision", precision.name()), with(t)));
    }
    let fused = Techniques { attention: AttentionKind::Fused, ..Techniques::default() };
    if fused.validate(&r.model).is_ok() {
        out.push(("fused attention".into(), with(fused)));
    }
    // Accumulation: the largest of 4 and 2 that splits the batch.
    let accum = [4, 2].into_iter().find(|k| batch.is_multiple_of(*k) && batch > *k - 1);
    if let Some(k) = accum {
        let micro = Resolved {
            shape: StepShape { batch: batch / k, seq: r.shape.seq },
            techniques: Techniques { accum: k, ..Techniques::default() },
            batches: vec![batch / k],
            ..base.clone()
        };
        out.push((format!("accumulation {}×{}", batch / k, k), micro));
    }
    // LoRA rank 4 (or less on a very narrow model) on every projection.
    let rank = 4.min(r.model.d_model.saturating_sub(1)).max(1);
    if let Ok(lora) = LoraConfig::new(rank).with_targets("all") {
        let t = Techniques { lora: Some(lora), ..Techniques::default() };
        if t.validate(&r.model).is_ok() {
            out.push((format!("LoRA r={rank} (all projections)"), with(t)));
        }
    }
    for kind in [OptimizerKind::Momentum, OptimizerKind::Sgd] {
        let optimizer = OptimizerConfig { kind, ..base.optimizer };
        if base.optimizer.kind != kind {
            out.push((format!("optimizer {}", kind.name()), Resolved { optimizer, ..base.clone() }));
        }
    }
    let all = Techniques {
        checkpoint: Checkpoint::BLOCKS,
        attention: if fused.validate(&r.model).is_ok() { AttentionKind::Fused } else { AttentionKind::Standard },
        accum: accum.unwrap_or(1),
        lora: None,
        precision: Precision::Fp32,
    };
    let combined = Resolved {
        shape: StepShape { batch: batch / all.accum, seq: r.shape.seq },
        techniques: all,
        batches: vec![batch / all.accum],
        ..base.clone()
    };
    let mut parts = vec!["blocks".to_string()];
    if all.attention == AttentionKind::Fused {
        parts.push("fused".into());
    }
    if all.accum > 1 {
        parts.push(format!("accum ×{}", all.accum));
    }
    out.push((format!("combined: {}", parts.join(" + ")), combined));
    out
}

fn compare(steps: i64, config: &ConfigArgs) -> Result<(), Failure> {
    let steps = check_dim("steps", steps)?;
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let gpu = if r.backend == BackendKind::Gpu { Some(open_gpu()?) } else { None };
    let mut rows: Vec<CompareRow> = Vec::new();
    let mut baseline_grads: Option<Vec<f32>> = None;
    let mut backend_name = String::new();
    for (name, v) in compare_variants(&r) {
        let plan = v.plan()?;
        let (flops, recomputed_flops) = plan.flops();
        let mut row = CompareRow {
            technique: name,
            micro_batch: v.shape.batch,
            accum: v.techniques.accum,
            oom: None,
            peak_allocated_bytes: None,
            peak_reserved_bytes: None,
            activation_bytes: None,
            step_ms: None,
            tokens_per_sec: None,
            recomputed_flops,
            flops,
            loss: None,
            grad_rel_diff: None,
        };
        let outcome = (|| -> Result<(), Failure> {
            let mut trainer = make_trainer(&v, plan, gpu.as_ref())?;
            backend_name = trainer.backend_name();
            let batch = dataset.batch(v.batch_shape(), v.seed, 0)?;
            row.loss = Some(trainer.compute_grads(&batch)?);
            let grads = trainer.read_grads()?;
            match &baseline_grads {
                None => baseline_grads = Some(grads),
                // LoRA trains other parameters: there is nothing to compare.
                Some(_) if v.techniques.lora.is_some() => {}
                Some(base) => row.grad_rel_diff = Some(rel_diff(&grads, base)),
            }
            let start = Instant::now();
            for i in 0..steps {
                trainer.train_step(&dataset.batch(v.batch_shape(), v.seed, i as u64)?)?;
            }
            let secs = start.elapsed().as_secs_f64() / steps as f64;
            row.step_ms = Some(secs * 1e3);
            row.tokens_per_sec = Some(v.batch_shape().rows() as f64 / secs.max(1e-9));
            if let Some(m) = trainer.memory() {
                row.peak_allocated_bytes = Some(m.peak_allocated_bytes());
                row.peak_reserved_bytes = Some(m.peak_reserved_bytes());
                row.activation_bytes = Some(m.activation_peak_bytes);
            }
            Ok(())
        })();
        match outcome {
            Ok(()) => {}
            Err(f) if f.code == EXIT_OOM => row.oom = Some(f.message),
            Err(f) => return Err(f),
        }
        rows.push(row);
    }
    if r.json {
        println!(
            "{}",
            serde_json::json!({"source": "allocator", "sources": sources_json(&backend_name), "backend": backend_name, "batch": r.batch_shape().batch, "seq_len": r.shape.seq, "budget_bytes": r.budget_bytes, "rows": rows})
        );
        return Ok(());
    }
    println!(
        "techniques on {backend_name}: d {} L {} heads {}, batch {}×{}, budget {} (allocator (live), from real steps)",
        r.model.d_model,
        r.model.n_layers,
        r.model.n_heads,
        r.batch_shape().batch,
        r.shape.seq,
        format_bytes(r.budget_bytes)
    );
    println!(
        "{:<40} {:>11} {:>11} {:>9} {:>9} {:>9} {:>12}",
        "technique", "peak alloc", "activations", "step (ms)", "tokens/s", "recompute", "grad vs base"
    );
    let or_dash = |x: Option<String>| x.unwrap_or_else(|| "—".into());
    for row in &rows {
        if let Some(msg) = &row.oom {
            println!("{:<40} {:>11}  {}", row.technique, "OOM", msg.lines().next().unwrap_or(""));
            continue;
        }
        let recompute = if row.recomputed_flops > 0 {
            format!("+{:.0}%", 100.0 * row.recomputed_flops as f64 / (row.flops - row.recomputed_flops).max(1) as f64)
        } else {
            "—".into()
        };
        println!(
            "{:<40} {:>11} {:>11} {:>9} {:>9} {:>9} {:>12}",
            row.technique,
            or_dash(row.peak_allocated_bytes.map(format_bytes)),
            or_dash(row.activation_bytes.map(format_bytes)),
            or_dash(row.step_ms.map(|ms| format!("{ms:.1}"))),
            or_dash(row.tokens_per_sec.map(|t| format!("{t:.0}"))),
            recompute,
            or_dash(row.grad_rel_diff.map(|d| format!("{d:.1e}"))),
        );
    }
    println!("(grad vs base: max |g − g_base| / max |g_base| on the same batch and initial weights;");
    println!(" LoRA trains adapters instead of the weights, so its gradients have nothing to match)");
    Ok(())
}

/// max |a − b| / max |b|.
fn rel_diff(a: &[f32], b: &[f32]) -> f64 {
    let diff = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
    let scale = b.iter().map(|y| (*y as f64).abs()).fold(0.0, f64::max);
    if a.len() != b.len() {
        f64::INFINITY
    } else if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}
