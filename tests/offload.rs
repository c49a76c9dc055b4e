//! Offload to host memory (ZeRO-Offload): the offloaded step gives the baseline's gradients and,
//! after the optimizer ran on the host, its parameters, on both backends; device memory drops by
//! exactly the offloaded bytes, which the host holds instead; the copies are ops with their
//! bytes; the estimator's offload is the plan's.

mod common;

use oomlab::backend::Trainer;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Dataset;
use oomlab::memory::simulate;
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{
    Category, Lifetime, Offload, Op, OptimizerConfig, OptimizerKind, Phase, Plan, Precision, StepRequest, Techniques,
};

const SEQ: usize = 16;

fn model() -> ModelConfig {
    ModelConfig { seq_len: SEQ, ..ModelConfig::toy(Dataset::builtin().tokenizer.vocab_size()) }
}

fn plan_of(batch: usize, kind: OptimizerKind, techniques: Techniques) -> Plan {
    let optimizer = match kind {
        OptimizerKind::AdamW => OptimizerConfig::default(),
        k => OptimizerConfig { kind: k, ..OptimizerConfig::sgd_momentum(0.1, 0.9) },
    };
    StepRequest::with_batch(model(), StepShape { batch, seq: SEQ }, optimizer, techniques)
        .expect("splits")
        .validate()
        .expect("valid")
        .plan()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-6);
    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
    assert!(worst <= tol * scale, "{what}: max |Δ| {worst:e} against max |x| {scale:e}");
}

/// Bytes of a plan's tensors on the device (`host` false) or in host memory, kept for the run.
fn kept(plan: &Plan, c: Category, host: bool) -> u64 {
    kept_by(plan, c, host, |b| b)
}

/// The same, each tensor's bytes through `size` (the allocator's blocks: whole 512 bytes).
fn kept_by(plan: &Plan, c: Category, host: bool, size: impl Fn(u64) -> u64) -> u64 {
    plan.tensors
        .iter()
        .filter(|t| t.category == c && t.persistent && t.host == host)
        .map(|t| size(t.size_bytes()))
        .sum()
}

#[test]
fn offloaded_steps_give_the_baselines_gradients_and_parameters_on_the_cpu() {
    let ds = Dataset::builtin();
    let mut checked = 0;
    for mode in [Offload::Optimizer, Offload::OptimizerGradients] {
        for precision in [Precision::Fp32, Precision::Bf16] {
            for kind in [OptimizerKind::AdamW, OptimizerKind::Momentum] {
                for accum in [1, 2] {
                    let base = Techniques { precision, accum, ..Techniques::default() };
                    let batch = ds.batch(StepShape { batch: 4, seq: SEQ }, 5, 0).expect("batch");
                    let next = ds.batch(StepShape { batch: 4, seq: SEQ }, 5, 1).expect("batch");
                    let mut one = CpuExecutor::<f64>::new(plan_of(4, kind, base), 7).expect("baseline");
                    let off = plan_of(4, kind, Techniques { offload: mode, ..base });
                    let mut two = CpuExecutor::<f64>::new(off, 7).expect("offloaded");
                    let what = format!("{mode:?} {precision:?} {kind:?} accum {accum}");
                    let l1 = one.forward_backward(&batch).expect("baseline");
                    let l2 = two.forward_backward(&batch).expect("offloaded");
                    assert_eq!(l1, l2, "{what}: loss");
                    let flat = one.plan().layout.flat_len as usize;
                    // 16-bit gradients added up over micro-batches round at each addition on the
                    // device; the host adds them in fp32.
                    let tol = if precision == Precision::Bf16 && accum > 1 { 2e-2 } else { 1e-12 };
                    close(&format!("{what}: gradients"), &two.grads()[..flat], &one.grads()[..flat], tol);
                    for b in [&batch, &next] {
                        for e in [&mut one, &mut two] {
                            e.upload_batch(b).expect("batch");
                            e.run_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]).expect("step");
                        }
                    }
                    let tol = if precision == Precision::Bf16 { 2e-2 } else { 1e-12 };
                    close(&format!("{what}: parameters"), &two.params()[..flat], &one.params()[..flat], tol);
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 16);
}

/// What leaves the device is what the host gains, byte for byte: the optimizer's states (and the
/// master weights, and the gradients when they go too); the host also holds the fp32 copy the
/// CPU updates and the fp32 gradients it reads. The plan's peak drops by at least the states.
#[test]
fn device_memory_drops_by_exactly_the_offloaded_bytes() {
    for precision in [Precision::Fp32, Precision::Bf16] {
        for kind in [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd] {
            let base = Techniques { precision, ..Techniques::default() };
            let before = plan_of(4, kind, base);
            let flat = before.layout.flat_len;
            for mode in [Offload::Optimizer, Offload::OptimizerGradients] {
                let after = plan_of(4, kind, Techniques { offload: mode, ..base });
                let what = format!("{mode:?} {precision:?} {kind:?}");
                let mut moved =
                    kept(&before, Category::OptimizerState, false) + kept(&before, Category::MasterWeights, false);
                if mode.gradients() {
                    moved += kept(&before, Category::Gradients, false);
                }
                let device = |p: &Plan| Category::ALL.iter().map(|&c| kept(p, c, false)).sum::<u64>();
                assert!(moved > 0 || kind == OptimizerKind::Sgd, "{what}");
                assert_eq!(
                    device(&before) - device(&after),
                    moved,
                    "{what}: the device keeps less by the offloaded bytes"
                );
                assert_eq!(oomlab::plan::offload::offloaded_bytes(&after), moved, "{what}: as the view says");
                let (down, up) = oomlab::plan::offload::bus_bytes(&after);
                let dt = precision.dtype().bytes_for(flat);
                assert_eq!((down, up), (dt, dt), "{what}: the gradients down, the parameters up");
                assert_eq!(
                    kept(&after, Category::OptimizerState, true),
                    kept(&before, Category::OptimizerState, false)
                );
                assert_eq!(
                    kept(&after, Category::MasterWeights, true),
                    4 * flat,
                    "{what}: the fp32 copy the CPU updates"
                );
                assert_eq!(kept(&after, Category::Gradients, true), 4 * flat, "{what}: the fp32 gradients it reads");
                let host: u64 = after.host_bytes().iter().map(|&(_, b)| b).sum();
                assert_eq!(host, kept(&before, Category::OptimizerState, false) + 8 * flat, "{what}: host");
                // The device's allocator never sees the host's tensors.
                let lifetimes = after.lifetimes();
                for (t, l) in after.tensors.iter().zip(&lifetimes) {
                    assert_eq!(t.host, *l == Lifetime::Host, "{}", t.name);
                }
                let (b, a) = (simulate(&before, 1 << 30).expect("fits"), simulate(&after, 1 << 30).expect("fits"));
                let block = |b: u64| b.div_ceil(512) * 512;
                let mut moved_blocks = kept_by(&before, Category::OptimizerState, false, block)
                    + kept_by(&before, Category::MasterWeights, false, block);
                if mode.gradients() {
                    moved_blocks += kept_by(&before, Category::Gradients, false, block);
                }
                assert_eq!(
                    b.timeline[0].allocated_bytes - a.timeline[0].allocated_bytes,
                    moved_blocks,
                    "{what}: the allocator's account before the first op (in its 512-byte blocks)"
                );
                assert!(
                    a.peak_allocated_bytes() < b.peak_allocated_bytes() || kind == OptimizerKind::Sgd,
                    "{what}: peak"
                );
            }
        }
    }
}

/// The copies are ops of the plan: gradients down, parameters up, each with its bytes; with the
/// gradients offloaded every unit's gradients go down during the backward pass and live on the
/// device only until then.
#[test]
fn the_copies_are_ops_with_their_bytes() {
    let flat = plan_of(4, OptimizerKind::AdamW, Techniques::default()).layout.flat_len;
    let transfers = |p: &Plan| -> Vec<(Phase, &'static str, u64)> {
        p.ops
            .iter()
            .filter(|n| n.op.is_transfer())
            .map(|n| {
                let (name, v) = match n.op {
                    Op::CopyToHost(c) => ("down", c.src),
                    Op::CopyToDevice(c) => ("up", c.dst),
                    _ => unreachable!(),
                };
                (n.phase, name, p.tensor(v.tensor).dtype.bytes_for(v.len))
            })
            .collect()
    };
    let opt = plan_of(4, OptimizerKind::AdamW, Techniques { offload: Offload::Optimizer, ..Techniques::default() });
    assert_eq!(transfers(&opt), vec![(Phase::Optimizer, "down", 4 * flat), (Phase::Optimizer, "up", 4 * flat)]);
    let bf16 = Techniques { precision: Precision::Bf16, offload: Offload::Optimizer, ..Techniques::default() };
    let half = plan_of(4, OptimizerKind::AdamW, bf16);
    assert_eq!(transfers(&half), vec![(Phase::Optimizer, "down", 2 * flat), (Phase::Optimizer, "up", 2 * flat)]);
    let grads = Techniques { offload: Offload::OptimizerGradients, accum: 2, ..Techniques::default() };
    let g = plan_of(4, OptimizerKind::AdamW, grads);
    let t = transfers(&g);
    let units = 2 * g.model.n_layers + 2;
    let down: Vec<&(Phase, &str, u64)> = t.iter().filter(|x| x.1 == "down").collect();
    assert_eq!(down.len(), 2 * units, "every unit, every micro-batch");
    assert!(down.iter().all(|x| x.0 == Phase::Backward));
    assert_eq!(down.iter().map(|x| x.2).sum::<u64>(), 2 * 4 * flat, "the whole gradients, twice");
    assert_eq!(t.last(), Some(&(Phase::Optimizer, "up", 4 * flat)));
    // No device tensor holds all the gradients.
    let device_grads: Vec<&str> =
        g.tensors.iter().filter(|t| t.category == Category::Gradients && !t.host).map(|t| t.name.as_str()).collect();
    assert!(
        device_grads
            .iter()
            .all(|n| n.contains("gradients.h.") || n.contains("gradients.embeddings") || n.contains("gradients.ln_f"))
    );
    assert!(g.tensors.iter().filter(|t| t.category == Category::Gradients && !t.host).all(|t| !t.persistent));
    // The optimizer's op reads and writes the host only.
    let update = g.ops.iter().find(|n| matches!(n.op, Op::AdamW(_))).expect("adamw");
    assert!(g.runs_on_host(&update.op));
}

/// The estimator's offload on the toy's own architecture is the plan's, category by category, on
/// the device and on the host.
#[test]
fn the_estimators_offload_is_the_plans() {
    use oomlab::estimate::{Setup, estimate};
    for precision in [Precision::Fp32, Precision::Bf16] {
        for kind in [OptimizerKind::AdamW, OptimizerKind::Momentum, OptimizerKind::Sgd] {
            for mode in [Offload::Optimizer, Offload::OptimizerGradients] {
                let t = Techniques { precision, offload: mode, ..Techniques::default() };
                let p = plan_of(2, kind, t);
                let e = estimate(&Setup::toy(&model(), p.shape, kind, &t, 1 << 30)).expect("estimate");
                let what = format!("{mode:?} {precision:?} {kind:?}");
                for (c, name) in [
                    (Category::Parameters, "parameters"),
                    (Category::Gradients, "gradients"),
                    (Category::OptimizerState, "optimizer_state"),
                    (Category::MasterWeights, "master_weights"),
                ] {
                    assert_eq!(e.get(name), kept(&p, c, false), "{name} on the device: {what}");
                }
                let host: u64 = p.host_bytes().iter().map(|&(_, b)| b).sum();
                assert_eq!(e.host_bytes, host, "host: {what}");
            }
        }
    }
}

#[test]
fn refuses_what_it_does_not_simulate() {
    let m = model();
    let t = |f: fn(&mut Techniques)| {
        let mut t = Techniques { offload: Offload::Optimizer, ..Techniques::default() };
        f(&mut t);
        t.validate(&m).map_err(|e| e.to_string())
    };
    assert!(t(|_| {}).is_ok());
    assert!(t(|t| t.precision = Precision::Fp16).expect_err("fp16").contains("fp16"));
    assert!(t(|t| t.parallel.gpus = 2).expect_err("gpus").contains("several GPUs"));
    assert_eq!(Offload::parse("optimizer+gradients").expect("parses"), Offload::OptimizerGradients);
    assert!(Offload::parse("everything").is_err());
    for o in Offload::ALL {
        assert_eq!(Offload::parse(o.name()).expect("its own name"), o);
    }
}

/// The GPU backend: the host's tensors in this process, the copies over the bus and the CPU's
/// optimizer between submissions give the baseline's gradients and parameters (fp32, momentum
/// SGD, whose update is linear in the gradients), through the blocking path and the app's
/// polled one alike; the host holds exactly the plan's host bytes.
#[test]
fn the_gpu_backend_offloads_like_the_baseline() {
    use oomlab::backend::gpu::GpuExecutor;
    let g = common::gpu();
    let ds = Dataset::builtin();
    let batches = [0, 1].map(|i| ds.batch(StepShape { batch: 4, seq: SEQ }, 5, i).expect("batch"));
    let widen = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
    let kind = OptimizerKind::Momentum;
    let new = |t: Techniques| pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, plan_of(4, kind, t), 7));
    let mut one = new(Techniques::default()).expect("baseline");
    let flat = one.plan().layout.flat_len as usize;
    one.compute_grads(&batches[0]).expect("grads");
    let g1 = widen(one.read_grads().expect("grads")[..flat].to_vec());
    for b in &batches {
        one.train_step(b).expect("step");
    }
    let p1 = widen(one.read_params().expect("params")[..flat].to_vec());
    for mode in [Offload::Optimizer, Offload::OptimizerGradients] {
        let t = Techniques { offload: mode, ..Techniques::default() };
        let mut off = new(t).expect("offloaded");
        let host: u64 = off.plan().host_bytes().iter().map(|&(_, b)| b).sum();
        assert_eq!(off.host_bytes(), host, "{mode:?}: the host holds the plan's host tensors");
        off.compute_grads(&batches[0]).expect("grads");
        close(&format!("{mode:?}: gradients"), &widen(off.read_grads().expect("grads")[..flat].to_vec()), &g1, 1e-5);
        off.train_step(&batches[0]).expect("step");
        // The app's path: submitted, then polled until the losses are back.
        off.submit_step(&batches[1]).expect("submitted");
        let mut polls = 0;
        let loss = loop {
            if let Some(r) = off.poll_step() {
                break r.expect("step");
            }
            polls += 1;
            assert!(polls < 1_000_000, "the polled step never finished");
            std::thread::sleep(std::time::Duration::from_micros(200));
        };
        assert!(loss.is_finite());
        close(&format!("{mode:?}: parameters"), &widen(off.read_params().expect("params")[..flat].to_vec()), &p1, 1e-5);
        let m = off.memory().expect("a step ran");
        assert_eq!(off.reserved_buffer_bytes(), m.stats.reserved_bytes, "{mode:?}: buffers are the segments");
    }
}
