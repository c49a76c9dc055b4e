//! Data parallelism and ZeRO over simulated GPUs: every stage on 2 and 4 ranks gives the
//! gradients (and, after the optimizer, the parameters) of one GPU stepping over the same global
//! batch; each stage holds what it shards as shards; an OOM names its GPU.

mod common;

use oomlab::backend::BackendError;
use oomlab::backend::cluster::CpuCluster;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Dataset;
use oomlab::memory::{Budget, simulate};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Category, Checkpoint, OptimizerConfig, Parallel, Phase, Plan, Precision, StepRequest, Techniques};

const SEQ: usize = 16;

fn model() -> ModelConfig {
    ModelConfig { seq_len: SEQ, ..ModelConfig::toy(Dataset::builtin().tokenizer.vocab_size()) }
}

fn request(per_gpu: usize, techniques: Techniques) -> oomlab::plan::ValidRequest {
    StepRequest::with_batch(model(), StepShape { batch: per_gpu, seq: SEQ }, OptimizerConfig::default(), techniques)
        .expect("splits")
        .validate()
        .expect("valid")
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-6);
    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
    assert!(worst <= tol * scale, "{what}: max |Δ| {worst:e} against max |x| {scale:e}");
}

/// One GPU over the global batch, and N ranks over their shares of it, with `base`'s techniques:
/// gradients after forward and backward, and parameters after two whole steps. In f64, so that
/// what is compared is the arithmetic (the order of the sums is all that differs), not fp32's
/// rounding, which AdamW's first steps magnify where a gradient is near zero.
fn agrees(gpus: usize, zero: u8, base: Techniques, tol: f64) {
    let ds = Dataset::builtin();
    let per_gpu = 2 * base.accum;
    let global = StepShape { batch: per_gpu * gpus, seq: SEQ };
    let batch = ds.batch(global, 5, 0).expect("batch");
    let next = ds.batch(global, 5, 1).expect("batch");
    let single = request(per_gpu * gpus, base);
    let mut one = CpuExecutor::<f64>::new(single.plan(), 7).expect("one GPU");
    let parallel = Parallel { gpus, zero, bucket_elems: 4096 };
    let mut cluster = CpuCluster::<f64>::new(&request(per_gpu, Techniques { parallel, ..base }), 7, Budget::Unlimited)
        .expect("cluster");
    let what = format!("{gpus} GPUs ZeRO-{zero} {}", base.describe());
    let l1 = one.forward_backward(&batch).expect("one");
    let ln = cluster.forward_backward(&batch).expect("cluster");
    assert!((l1 - ln).abs() < 1e-4 * l1.abs(), "{what}: loss {l1} against {ln}");
    let flat = one.plan().layout.flat_len as usize;
    let g1 = one.grads()[..flat].to_vec();
    close(&format!("{what}: gradients"), &cluster.grads(), &g1, tol);
    if zero == 0 {
        for (r, g) in cluster.rank_grads().iter().enumerate() {
            close(&format!("{what}: rank {r}'s all-reduced gradients"), &g[..flat], &g1, tol);
        }
    }
    // Two whole steps: the update of each shard, gathered, is the update of the whole.
    for b in [&batch, &next] {
        one.upload_batch(b).expect("batch");
        one.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).expect("one step");
        cluster.train_step(b).expect("cluster step");
    }
    close(&format!("{what}: parameters after two steps"), &cluster.params(), &one.params()[..flat], tol);
}

#[test]
fn every_stage_on_two_and_four_gpus_matches_one_gpu() {
    for gpus in [2, 4] {
        for zero in 0..=3 {
            agrees(gpus, zero, Techniques::default(), 1e-9);
        }
    }
}

#[test]
fn stages_agree_with_accumulation_checkpointing_and_bf16() {
    let accum = Techniques { accum: 2, ..Techniques::default() };
    let ckpt = Techniques { checkpoint: Checkpoint::Every(1), ..Techniques::default() };
    for zero in 0..=3 {
        agrees(2, zero, accum, 1e-9);
        agrees(2, zero, ckpt, 1e-9);
    }
    // bf16 rounds each rank's gradients before they are summed: agreement to bf16's precision.
    let bf16 = Techniques { precision: Precision::Bf16, ..Techniques::default() };
    for zero in [0, 3] {
        agrees(2, zero, bf16, 2e-2);
    }
}

fn bytes(plan: &Plan, c: Category, persistent: bool) -> u64 {
    plan.tensors.iter().filter(|t| t.category == c && t.persistent == persistent).map(|t| t.size_bytes()).sum()
}

#[test]
fn each_stage_shards_what_it_names() {
    let base = request(2, Techniques::default()).plan();
    let full = |c| bytes(&base, c, true);
    for zero in 0..=3u8 {
        let parallel = Parallel { gpus: 4, zero, ..Parallel::default() };
        let plans = request(2, Techniques { parallel, ..Techniques::default() }).rank_plans();
        assert_eq!(plans.len(), 4);
        let flat = base.layout.flat_len;
        let (sharded, whole) = (parallel.shard_len(flat) * 4, parallel.padded_len(flat) * 4);
        for p in &plans {
            assert_eq!(p.ops.len(), plans[0].ops.len(), "the ranks run the same ops");
            let params = if zero >= 3 { sharded } else { whole };
            assert_eq!(bytes(p, Category::Parameters, true), params, "ZeRO-{zero}: parameters");
            let grads = if zero >= 2 { sharded } else { whole };
            assert_eq!(bytes(p, Category::Gradients, true), grads, "ZeRO-{zero}: gradients");
            let states = 2 * if zero >= 1 { sharded } else { whole };
            assert_eq!(bytes(p, Category::OptimizerState, true), states, "ZeRO-{zero}: AdamW's two states");
            assert!(full(Category::OptimizerState) * 4 / states >= if zero >= 1 { 3 } else { 1 });
            // The communication buffers: DDP's buckets hold a copy of every gradient; ZeRO's two
            // reduce buckets are one bucket each; ZeRO-3 gathers a unit at a time.
            let comm = bytes(p, Category::Communication, true);
            match zero {
                0 => assert_eq!(comm, flat * 4),
                _ => assert_eq!(comm, 2 * parallel.bucket_elems.min(flat) * 4),
            }
            let gathered = p.tensors.iter().any(|t| t.category == Category::Communication && !t.persistent);
            assert_eq!(gathered, zero == 3, "ZeRO-{zero}: gathered parameters");
        }
    }
}

#[test]
fn an_out_of_memory_names_its_gpu() {
    // ZeRO-3 saves states, so under a budget the plain data-parallel step overflows and the
    // sharded one fits.
    let t = |zero| Techniques { parallel: Parallel { gpus: 4, zero, ..Parallel::default() }, ..Techniques::default() };
    let ddp = request(2, t(0)).rank_plans();
    let z3 = request(2, t(3)).rank_plans();
    let peak = |p: &Plan| simulate(p, 1 << 40).expect("fits").stats.peak_reserved_bytes;
    let budget = (peak(&z3[0]) + peak(&ddp[0])) / 2;
    assert!(peak(&z3[0]) < budget && budget < peak(&ddp[0]), "a budget between the two");
    let mut cluster = CpuCluster::<f32>::new(&request(2, t(3)), 1, budget).expect("ZeRO-3 fits");
    let batch = Dataset::builtin().batch(StepShape { batch: 8, seq: SEQ }, 1, 0).expect("batch");
    cluster.train_step(&batch).expect("ZeRO-3 steps");
    let err = match CpuCluster::<f32>::new(&request(2, t(0)), 1, budget) {
        Err(e) => e,
        Ok(mut c) => c.train_step(&batch).expect_err("DDP overflows"),
    };
    let BackendError::OutOfMemory(oom) = err else { panic!("{err}") };
    assert!(oom.message.contains("GPU 0 has a total capacity"), "the first rank to overflow: {}", oom.message);
    // A rank other than 0: the same step where rank 0 has more room (the budget is per GPU, so
    // only a rank's own plan decides): simulate rank 2's plan alone.
    let e = simulate(&ddp[2], budget).expect_err("rank 2 overflows too");
    assert!(e.message.contains("GPU 2 has"), "{}", e.message);
}

/// The estimator's ZeRO formula on the toy's own architecture (`Setup::toy`, the oomlab runtime)
/// against each rank's plan, category by category: the sharded model states, the communication
/// buffers, the activations; and for stages 0 and 1, whose collectives allocate nothing during
/// the step, the peak itself.
#[test]
fn the_estimators_zero_formula_is_each_ranks_plan() {
    use oomlab::estimate::{Setup, estimate};
    use oomlab::plan::OptimizerKind;
    let mut checked = 0;
    for gpus in [2, 3, 4, 8] {
        for zero in 0..=3u8 {
            for precision in [Precision::Fp32, Precision::Bf16] {
                for kind in [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd] {
                    for bucket_elems in [1024, 16 * 1024, 1 << 20] {
                        let parallel = Parallel { gpus, zero, bucket_elems };
                        let t = Techniques { precision, parallel, ..Techniques::default() };
                        let opt = OptimizerConfig { kind, ..OptimizerConfig::default() };
                        let shape = StepShape { batch: 2, seq: SEQ };
                        let request = StepRequest { model: model(), micro: shape, optimizer: opt, techniques: t };
                        let plans = request.validate().expect("valid").rank_plans();
                        let e = estimate(&Setup::toy(&model(), shape, kind, &t, 1 << 30)).expect("estimate");
                        let what = format!("{gpus} GPUs ZeRO-{zero} {precision:?} {kind:?} bucket {bucket_elems}");
                        for p in &plans {
                            for (c, name) in [
                                (Category::Parameters, "parameters"),
                                (Category::Gradients, "gradients"),
                                (Category::OptimizerState, "optimizer_state"),
                                (Category::MasterWeights, "master_weights"),
                                (Category::Communication, "communication"),
                            ] {
                                assert_eq!(e.get(name), bytes(p, c, true), "{name}: {what}, rank {}", p.rank);
                            }
                            let m = simulate(p, 1 << 30).expect("fits");
                            assert_eq!(e.activations_peak, m.activation_peak_bytes, "activations: {what}");
                            if zero <= 1 {
                                assert_eq!(e.peak_bytes, m.peak_requested.total(), "peak: {what}");
                            }
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 4 * 2 * 3 * 3);
}

/// The GPU backend's ranks: each stage on 2 and 4 simulated GPUs gives one GPU's gradients, and
/// its parameters after two steps, within fp32's rounding (the sums run in another order). The
/// parameters are compared under SGD with momentum and weight decay, whose update is linear in
/// the gradients: AdamW's first steps turn fp32 noise in a near-zero gradient into a whole
/// step of ±lr (its shards' arithmetic is checked exactly in f64 on the CPU above).
#[test]
fn the_gpu_backend_runs_every_stage_like_one_gpu() {
    use oomlab::backend::Trainer;
    use oomlab::backend::gpu::GpuExecutor;
    use oomlab::backend::gpu::cluster::GpuCluster;
    let g = common::gpu();
    let ds = Dataset::builtin();
    let widen = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
    for gpus in [2, 4] {
        let global = StepShape { batch: 2 * gpus, seq: SEQ };
        let batches = [ds.batch(global, 5, 0).expect("batch"), ds.batch(global, 5, 1).expect("batch")];
        let sgd = OptimizerConfig { kind: oomlab::plan::OptimizerKind::Momentum, ..OptimizerConfig::default() };
        let with_sgd = |per_gpu: usize, t: Techniques| {
            StepRequest { model: model(), micro: StepShape { batch: per_gpu, seq: SEQ }, optimizer: sgd, techniques: t }
                .validate()
                .expect("valid")
        };
        let single = with_sgd(2 * gpus, Techniques::default()).plan();
        let mut one = pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, single, 7)).expect("one GPU");
        let flat = one.plan().layout.flat_len as usize;
        one.compute_grads(&batches[0]).expect("one");
        let g1 = widen(one.read_grads().expect("grads")[..flat].to_vec());
        for b in &batches {
            one.train_step(b).expect("step");
        }
        let p1 = widen(one.read_params().expect("params")[..flat].to_vec());
        for zero in 0..=3 {
            let parallel = Parallel { gpus, zero, bucket_elems: 4096 };
            let valid = with_sgd(2, Techniques { parallel, ..Techniques::default() });
            let mut cluster =
                pollster::block_on(GpuCluster::new(&g.ctx, &g.kernels, &valid, 7, Budget::Unlimited)).expect("cluster");
            let what = format!("gpu, {gpus} GPUs ZeRO-{zero}");
            cluster.compute_grads(&batches[0]).expect("cluster");
            close(&format!("{what}: gradients"), &widen(cluster.read_grads().expect("grads")), &g1, 1e-5);
            for b in &batches {
                Trainer::train_step(&mut cluster, b).expect("cluster step");
            }
            close(&format!("{what}: parameters"), &widen(cluster.read_params().expect("params")), &p1, 1e-5);
            // Each rank's buffers are its allocator's segments.
            for (r, exec) in cluster.ranks().iter().enumerate() {
                let reserved = exec.memory().expect("a step ran").stats.reserved_bytes;
                assert_eq!(exec.reserved_buffer_bytes(), reserved, "{what}: rank {r}'s buffers");
            }
        }
    }
}

/// The app spreads a step over frames: a few ops at a time, rank by rank, give the step run in
/// one go, and the progress counts every rank's ops.
#[test]
fn a_cluster_step_in_slices_is_the_step_in_one_go() {
    let parallel = Parallel { gpus: 2, zero: 2, bucket_elems: 4096 };
    let valid = request(2, Techniques { parallel, ..Techniques::default() });
    let batch = Dataset::builtin().batch(StepShape { batch: 4, seq: SEQ }, 3, 0).expect("batch");
    let mut whole = CpuCluster::<f32>::new(&valid, 1, Budget::Unlimited).expect("cluster");
    let loss = whole.train_step(&batch).expect("step");
    let mut sliced = CpuCluster::<f32>::new(&valid, 1, Budget::Unlimited).expect("cluster");
    sliced.upload_batch(&batch).expect("batch");
    sliced.start_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
    let (mut calls, mut last) = (0, 0);
    let got = loop {
        calls += 1;
        if let Some(r) = sliced.resume(3) {
            break r.expect("step");
        }
        let (done, total) = sliced.progress().expect("running");
        assert!(done >= last && done < total, "{done} of {total}");
        last = done;
    };
    assert!(calls > 10, "in slices ({calls} calls)");
    assert!(!sliced.running() && sliced.progress().is_none());
    assert_eq!(got, loss);
    assert_eq!(sliced.params(), whole.params());
}
