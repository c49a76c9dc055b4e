//! `bench`: step timings, per-op profiles and the GEMM on its own.

use super::peers::{self, PeerArgs, PeerConfig, PeerRow};
use super::*;
use oomlab::backend::BackendError;

/// Timings of one config.
#[derive(serde::Serialize)]
pub(super) struct BenchRow {
    /// "default" or "larger".
    pub(super) name: String,
    /// The config in words ("d 64 L 2 T 64 B 16").
    pub(super) config: String,
    pub(super) backend: String,
    /// Simulated GPUs (data-parallel ranks) and the ZeRO stage.
    pub(super) gpus: usize,
    pub(super) zero: u8,
    /// What lives in host memory (`none`, `optimizer`, `optimizer+gradients`).
    pub(super) offload: &'static str,
    /// The first step, including pipeline creation on a GPU.
    pub(super) first_step_secs: f64,
    /// Each phase submitted and waited for on its own, per step.
    pub(super) fwd_ms: f64,
    pub(super) bwd_ms: f64,
    pub(super) opt_ms: f64,
    /// A whole step: one submission on a GPU; on the CPU the sum of the phases.
    pub(super) step_ms: f64,
    pub(super) steps_per_sec: f64,
}

/// Which of `bench`'s configs to run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BenchConfigs {
    Both,
    Default,
    Larger,
}

pub(super) fn bench(
    steps: usize,
    profile: bool,
    only: BenchConfigs,
    peer_args: &PeerArgs,
    config: &ConfigArgs,
) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    r.one_length()?;
    let larger = r.with(StepRequest {
        model: ModelConfig { vocab: r.model().vocab, seq_len: 128, d_model: 256, n_layers: 4, n_heads: 4 },
        micro: StepShape { batch: 16, seq: 128 },
        ..*r.request.request()
    })?;
    let mut rows = Vec::new();
    let mut gflops = None;
    let gpu_start = Instant::now();
    let gpu = open_gpu(&r)?;
    let gemm_kernel = gpu.as_ref().map(|g| g.kernels.matmul.gemm.kind().name());
    let pipelines_secs = gpu_start.elapsed().as_secs_f64();
    let chosen: Vec<(&str, &Resolved)> = [("default", &r), ("larger", &larger)]
        .into_iter()
        .filter(|(name, _)| match only {
            BenchConfigs::Both => true,
            BenchConfigs::Default => *name == "default",
            BenchConfigs::Larger => *name == "larger",
        })
        .collect();
    for &(name, cfg) in &chosen {
        let plan = cfg.plan();
        let t0 = Instant::now();
        let first_extra = if name == "default" { pipelines_secs } else { 0.0 };
        // Timing only: no virtual budget.
        let exec =
            pollster::block_on(oomlab::backend::open(cfg.backend, gpu.as_ref(), plan, cfg.seed, Budget::Unlimited))?;
        let row = match exec {
            Executor::Gpu(mut exec) => {
                let batch = cfg.batch(&dataset, 0)?;
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
                    let batch = cfg.batch(&dataset, i as u64)?;
                    pollster::block_on(exec.train_step_async(&batch))?;
                }
                let step = t.elapsed().as_secs_f64() / steps as f64;
                if profile {
                    print_profile(name, &exec.profile_ops(steps)?);
                }
                row(name, cfg, exec.backend_name(), first, phase_secs, steps, step)
            }
            mut exec @ (Executor::Cpu(_) | Executor::CpuCluster(_)) => {
                // One GPU's executor or the simulated GPUs' cluster, the same way: a run of phases
                // carried out to its end.
                let backend = oomlab::backend::Trainer::backend_name(&exec);
                let cpu = exec.sliced().ok_or_else(|| BackendError::Internal("not a CPU executor".into()))?;
                let batch = cfg.batch(&dataset, 0)?;
                cpu.upload(&batch)?;
                let mut run = |phases: &[Phase]| -> Result<f32, BackendError> {
                    cpu.start(phases);
                    cpu.resume(usize::MAX).unwrap_or_else(|| Err(BackendError::Internal("no run".into())))
                };
                run(&[Phase::Forward, Phase::Backward, Phase::Optimizer])?;
                let first = t0.elapsed().as_secs_f64();
                let mut phase_secs = [0.0f64; 3];
                for _ in 0..steps {
                    for (i, phase) in [Phase::Forward, Phase::Backward, Phase::Optimizer].into_iter().enumerate() {
                        let t = Instant::now();
                        run(&[phase])?;
                        phase_secs[i] += t.elapsed().as_secs_f64();
                    }
                }
                let total: f64 = phase_secs.iter().sum::<f64>() / steps as f64;
                row(name, cfg, backend, first, phase_secs, steps, total)
            }
            Executor::GpuCluster(mut exec) => {
                let batch = cfg.batch(&dataset, 0)?;
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
                    let batch = cfg.batch(&dataset, i as u64)?;
                    pollster::block_on(exec.train_step(&batch))?;
                }
                let step = t.elapsed().as_secs_f64() / steps as f64;
                row(name, cfg, oomlab::backend::Trainer::backend_name(exec.as_ref()), first, phase_secs, steps, step)
            }
        };
        rows.push(row);
    }
    if let Some(g) = &gpu {
        gflops = Some(bench_matmul(&g.ctx, &g.kernels, 1024, 1024, 1024, 10)?);
    }
    let peer_configs: Vec<PeerConfig> = chosen
        .iter()
        .map(|(name, c)| PeerConfig {
            name,
            d: c.model().d_model,
            layers: c.model().n_layers,
            heads: c.model().n_heads,
            seq: c.shape().seq,
            batch: c.shape().batch,
            vocab: c.model().vocab,
        })
        .collect();
    let peers = peers::run(peer_args, &peer_configs, steps);
    let report = BenchReport {
        configs: rows,
        matmul_gflops: gflops,
        matmul_shape: [1024, 1024, 1024],
        gemm_kernel,
        peers: peers.rows,
        peers_not_run: peers.notes,
    };
    print_report(&report, r.json, BenchReport::text)
}

/// What `bench` reports: each config's timings, on a GPU the 1024³ GEMM's throughput, and the
/// peers' timings of the same configs from the same run.
#[derive(serde::Serialize)]
pub(super) struct BenchReport {
    configs: Vec<BenchRow>,
    matmul_gflops: Option<f64>,
    matmul_shape: [usize; 3],
    /// The GEMM kernel the GPU steps ran: "tiled" or "subgroup-8" (`GemmKind`).
    gemm_kernel: Option<&'static str>,
    peers: Vec<PeerRow>,
    /// A line for each peer that did not run, and why.
    peers_not_run: Vec<String>,
}

impl BenchReport {
    /// The report as the CLI prints it without --json.
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<8} {:<25} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            "name", "config", "first (s)", "fwd (ms)", "bwd (ms)", "opt (ms)", "step (ms)", "steps/s"
        );
        for r in &self.configs {
            let _ = writeln!(
                out,
                "{:<8} {:<25} {:>9.3} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8.2}",
                r.name, r.config, r.first_step_secs, r.fwd_ms, r.bwd_ms, r.opt_ms, r.step_ms, r.steps_per_sec
            );
        }
        if let Some(first) = self.configs.first() {
            let _ = writeln!(out, "backend: {}", first.backend);
        }
        if let Some(g) = self.matmul_gflops {
            let [m, n, k] = self.matmul_shape;
            let kernel = self.gemm_kernel.unwrap_or("?");
            let _ = writeln!(out, "matmul {m}×{n}×{k}: {g:.1} GFLOP/s ({kernel} GEMM kernel)");
        }
        if !self.peers.is_empty() {
            let _ = writeln!(out, "peers, same run (oomlab ÷ peer: below 1 is faster than the peer):");
            for p in &self.peers {
                let ours = self.configs.iter().find(|c| c.name == p.name).map(|c| c.step_ms);
                let ratio = ours.map_or("—".into(), |o| format!("{:.2}×", o / p.step_ms));
                let first = p.first_step_secs.map_or("".into(), |f| format!(", first step {f:.2} s"));
                let _ = writeln!(
                    out,
                    "  {:<18} {:<8} {:>9.1} ms  oomlab ÷ peer {ratio:>6}  ({}{first})",
                    p.peer, p.name, p.step_ms, p.detail
                );
            }
        }
        for note in &self.peers_not_run {
            let _ = writeln!(out, "{note}");
        }
        out
    }
}

pub(super) fn row(
    name: &str,
    cfg: &Resolved,
    backend: String,
    first: f64,
    phase_secs: [f64; 3],
    steps: usize,
    step_secs: f64,
) -> BenchRow {
    let per = |s: f64| s / steps as f64 * 1e3;
    let (m, shape) = (cfg.model(), cfg.shape());
    let parallel = cfg.techniques().parallel;
    let ranks = if parallel.is_distributed() {
        format!(" × {} GPUs ZeRO-{}", parallel.gpus, parallel.stage())
    } else {
        String::new()
    };
    let offload = cfg.techniques().offload;
    let ranks = if offload.is_on() { format!("{ranks} offload {}", offload.name()) } else { ranks };
    BenchRow {
        name: name.into(),
        config: format!("d {} L {} T {} B {}{ranks}", m.d_model, m.n_layers, shape.seq, shape.batch),
        backend,
        gpus: parallel.gpus,
        zero: parallel.stage(),
        offload: offload.name(),
        first_step_secs: first,
        fwd_ms: per(phase_secs[0]),
        bwd_ms: per(phase_secs[1]),
        opt_ms: per(phase_secs[2]),
        step_ms: step_secs * 1e3,
        steps_per_sec: 1.0 / step_secs,
    }
}

pub(super) fn print_profile(name: &str, ops: &[(Phase, String, f64)]) {
    let total: f64 = ops.iter().map(|o| o.2).sum();
    println!("per-kernel profile of the {name} config (each command run alone; total {:.2} ms):", total * 1e3);
    let mut sorted: Vec<&(Phase, String, f64)> = ops.iter().collect();
    sorted.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (phase, label, secs) in sorted.iter() {
        println!("  {:>8.3} ms {:>5.1}%  {:<9} {label}", secs * 1e3, secs / total * 100.0, format!("{phase:?}"));
    }
}

pub(super) fn bench_gemm(n: usize) -> Result<(), Failure> {
    let g = Gpu::open_headless()?;
    let gflops = bench_matmul(&g.ctx, &g.kernels, n, n, n, 5)?;
    let kernel = g.kernels.matmul.gemm.kind().name();
    println!("matmul {n}×{n}×{n}: {gflops:.2} GFLOP/s on {}, {kernel} GEMM kernel", g.ctx.describe());
    Ok(())
}

/// `bench --decode`: the toy's decode tokens per second on its KV cache, at batch 1 and 16, on
/// the chosen backend, beside PyTorch CPU eager with transformers' cache on the same model shape
/// in the same run.
pub(super) fn decode(peer_args: &PeerArgs, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let model = ModelConfig { seq_len: oomlab::serving::CONTEXT, ..*r.model() };
    let gpu = open_gpu(&r)?;
    let (prompt, steps) = (64, 64);
    let batches = [1usize, 16];
    let mut ours = Vec::new();
    for &b in &batches {
        let run = oomlab::serving::bench::decode_rate(r.backend, gpu.as_ref(), &model, (b, prompt, steps, 3));
        ours.push(pollster::block_on(run).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?);
    }
    let torch = peers::torch_decode(peer_args, &model, &batches, (prompt, steps));
    let name = match r.backend {
        BackendKind::Cpu => "oomlab cpu".to_string(),
        BackendKind::Gpu => "oomlab gpu".to_string(),
    };
    if r.json {
        let peer = match &torch {
            Ok((rates, versions)) => serde_json::json!({"rates": rates, "versions": versions}),
            Err(why) => serde_json::json!({"not_run": why.to_string()}),
        };
        println!(
            "{}",
            serde_json::json!({"model": model, "prompt": prompt, "steps": steps, "oomlab": ours, "backend": name, "pytorch_cpu_eager": peer})
        );
        return Ok(());
    }
    println!(
        "decode, d {} L {} heads {}, prompts of {prompt} tokens then {steps} decode steps (tokens per second)",
        model.d_model, model.n_layers, model.n_heads
    );
    for rate in &ours {
        let peer = match &torch {
            Ok((rates, _)) => {
                rates.iter().find(|(b, _)| *b == rate.batch).map_or("?".to_string(), |(_, t)| format!("{t:.0}"))
            }
            Err(_) => "not run".into(),
        };
        println!("  batch {:>3}: {name} {:>8.0}   PyTorch CPU eager {peer:>8}", rate.batch, rate.decode_tokens_per_sec);
    }
    match torch {
        Ok((_, versions)) => println!("  PyTorch: {versions}, 2 threads"),
        Err(why) => println!("  PyTorch CPU eager: not run ({why})"),
    }
    Ok(())
}
