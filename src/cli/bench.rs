//! `bench`: step timings, per-op profiles and the GEMM on its own.

use super::*;

/// Timings of one config.
#[derive(serde::Serialize)]
pub(super) struct BenchRow {
    pub(super) config: String,
    pub(super) backend: String,
    pub(super) first_step_secs: f64,
    pub(super) forward_ms: f64,
    pub(super) backward_ms: f64,
    pub(super) optimizer_ms: f64,
    pub(super) step_ms: f64,
    pub(super) steps_per_sec: f64,
}

pub(super) fn bench(steps: usize, profile: bool, config: &ConfigArgs) -> Result<(), Failure> {
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
                row(name, cfg, oomlab::backend::cpu::CPU_NAME.into(), first, phase_secs, steps, total)
            }
        };
        rows.push(row);
    }
    if let Some(g) = &gpu {
        gflops = Some(bench_matmul(&g.ctx, &g.kernels, 1024, 1024, 1024, 10)?);
    }
    let report = BenchReport { configs: rows, matmul_gflops: gflops, matmul_shape: [1024, 1024, 1024] };
    print_report(&report, r.json, BenchReport::text)
}

/// What `bench` reports: each config's timings and, on a GPU, the 1024³ GEMM's throughput.
#[derive(serde::Serialize)]
pub(super) struct BenchReport {
    configs: Vec<BenchRow>,
    matmul_gflops: Option<f64>,
    matmul_shape: [usize; 3],
}

impl BenchReport {
    /// The report as the CLI prints it without --json.
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            "config", "first (s)", "fwd (ms)", "bwd (ms)", "opt (ms)", "step (ms)", "steps/s"
        );
        for r in &self.configs {
            let _ = writeln!(
                out,
                "{:<34} {:>9.3} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8.2}",
                r.config, r.first_step_secs, r.forward_ms, r.backward_ms, r.optimizer_ms, r.step_ms, r.steps_per_sec
            );
        }
        if let Some(first) = self.configs.first() {
            let _ = writeln!(out, "backend: {}", first.backend);
        }
        if let Some(g) = self.matmul_gflops {
            let [m, n, k] = self.matmul_shape;
            let _ = writeln!(out, "matmul {m}×{n}×{k}: {g:.1} GFLOP/s");
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

pub(super) fn print_profile(ops: &[(Phase, String, f64)]) {
    let total: f64 = ops.iter().map(|o| o.2).sum();
    println!("per-kernel profile of the default config (each command run alone; total {:.2} ms):", total * 1e3);
    let mut sorted: Vec<&(Phase, String, f64)> = ops.iter().collect();
    sorted.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (phase, label, secs) in sorted.iter() {
        println!("  {:>8.3} ms {:>5.1}%  {:<9} {label}", secs * 1e3, secs / total * 100.0, format!("{phase:?}"));
    }
}

pub(super) fn bench_gemm(n: usize) -> Result<(), Failure> {
    let g = open_gpu()?;
    let gflops = bench_matmul(&g.ctx, &g.kernels, n, n, n, 5)?;
    println!("matmul {n}×{n}×{n}: {gflops:.2} GFLOP/s on {}", g.ctx.describe());
    Ok(())
}
