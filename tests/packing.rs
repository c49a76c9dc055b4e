//! Batches of documents (issue 42 §3): the corpus's speeches padded, bucketed or packed. A packed
//! step — documents one after another in full rows, attention masked at each document's start,
//! positions restarting there — gives the loss and gradients of the same documents one to a row
//! (padded), which give those of each document run alone: packing leaks no attention across
//! documents. Padding is spent on the device; packing spends less per useful token.

use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::Batch;
use oomlab::documents::{Documents, PaddingShare};
use oomlab::memory::simulate;
use oomlab::model::{ModelConfig, ShapeError, StepShape};
use oomlab::plan::ConfigError;
use oomlab::plan::{AttentionKind, Batching, OptimizerConfig, Phase, Plan, StepRequest, Techniques};

const T: usize = 128;

fn model() -> ModelConfig {
    ModelConfig { seq_len: T, ..ModelConfig::toy(oomlab::data::CharTokenizer::builtin().vocab_size()) }
}

fn plan(shape: StepShape, attention: AttentionKind, batching: Batching) -> Plan {
    let t = Techniques { attention, batching, ..Techniques::default() };
    StepRequest::with_batch(model(), shape, OptimizerConfig::default(), t)
        .expect("splits")
        .validate()
        .expect("valid")
        .plan()
}

/// Loss and gradients of `batch` in f64, from the same initial weights.
fn grads(plan: Plan, batch: &Batch) -> (f64, Vec<f64>) {
    let mut exec = CpuExecutor::<f64>::new(plan, 3).expect("executor");
    let loss = exec.forward_backward(batch).expect("step");
    let flat = exec.plan().layout.flat_len as usize;
    (loss, exec.grads()[..flat].to_vec())
}

fn close(what: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs()));
    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
    assert!(worst <= 1e-10 * scale, "{what}: max |Δ| {worst:e} against {scale:e}");
}

#[test]
fn a_packed_step_is_its_documents_one_by_one() {
    let docs = Documents::builtin();
    // Short and long speeches in one order: rows hold several documents, some one.
    let order: Vec<usize> = (0..docs.docs.len()).filter(|&i| i % 3 == 0 || docs.len_pairs(i, T) < 40).collect();
    let (packed, used) = docs.packed(&order, 3, T);
    assert!(used.len() > 3, "several documents to a row: {used:?}");
    let padded = docs.padded(&used, T);
    assert_eq!(packed.counted_targets(), padded.counted_targets(), "the same targets");
    for attention in [AttentionKind::Standard, AttentionKind::Fused] {
        let (lp, gp) = grads(plan(packed.shape, attention, Batching::Packed), &packed);
        let (ld, gd) = grads(plan(padded.shape, attention, Batching::Padded), &padded);
        let what = format!("{attention:?}");
        assert!((lp - ld).abs() <= 1e-12 * ld.abs(), "{what}: loss {lp} against {ld}");
        close(&format!("{what}: packed against one document a row"), &gp, &gd);
        // One document a row is each document alone, weighted by its targets.
        let total = padded.counted_targets() as f64;
        let mut sum = vec![0.0; gd.len()];
        let mut loss = 0.0;
        for &i in &used {
            let alone = docs.padded(&[i], T);
            let n = alone.counted_targets() as f64;
            let (l, g) = grads(plan(alone.shape, attention, Batching::Padded), &alone);
            loss += l * n / total;
            sum.iter_mut().zip(&g).for_each(|(s, x)| *s += x * n / total);
        }
        assert!((loss - ld).abs() <= 1e-12 * ld.abs(), "{what}: loss of each alone {loss} against {ld}");
        close(&format!("{what}: one document a row against each alone"), &gd, &sum);
    }
}

/// Without the mask, a packed row's later documents would see the earlier ones: the gradients
/// would differ. (The check above is not vacuous.)
#[test]
fn without_the_mask_packing_leaks() {
    let docs = Documents::builtin();
    let order: Vec<usize> = (0..docs.docs.len()).filter(|&i| docs.len_pairs(i, T) < 40).collect();
    let (packed, used) = docs.packed(&order, 3, T);
    let padded = docs.padded(&used, T);
    let unmasked = Batch { doc_starts: Vec::new(), ..packed.clone() };
    let (_, g_leak) = grads(plan(unmasked.shape, AttentionKind::Standard, Batching::Windows), &unmasked);
    let (_, g_doc) = grads(plan(padded.shape, AttentionKind::Standard, Batching::Padded), &padded);
    let worst = g_leak.iter().zip(&g_doc).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
    assert!(worst > 1e-6, "the unmasked row must differ: {worst:e}");
}

/// Padding is spent: the padded batch's activations are allocated for every position, and per
/// useful token the packed batch needs less memory; its padding share is smaller.
#[test]
fn padding_is_spent_and_packing_spends_less_per_useful_token() {
    let docs = Documents::builtin();
    let shape = StepShape { batch: 4, seq: T };
    let mut padded_per_token = Vec::new();
    let mut packed_per_token = Vec::new();
    for index in 0..4 {
        let padded = docs.batch(Batching::Padded, shape, 5, index).expect("padded");
        let bucketed = docs.batch(Batching::Bucketed, shape, 5, index).expect("bucketed");
        let packed = docs.batch(Batching::Packed, shape, 5, index).expect("packed");
        let share = |b: &Batch| PaddingShare::of(b).share();
        assert!(share(&packed) <= share(&padded), "batch {index}: packing pads less");
        for (batch, batching, out) in [
            (&padded, Batching::Padded, Some(&mut padded_per_token)),
            (&bucketed, Batching::Bucketed, None),
            (&packed, Batching::Packed, Some(&mut packed_per_token)),
        ] {
            let p = plan(batch.shape, AttentionKind::Standard, batching);
            let predicted = simulate(&p, 1 << 30).expect("fits");
            // The real step allocates what the plan says, padding included.
            let mut exec = CpuExecutor::<f32>::new(p, 1).expect("executor");
            exec.upload_batch(batch).expect("batch");
            exec.run_phases(&[Phase::Forward, Phase::Backward]).expect("step");
            let measured = exec.memory().expect("account");
            assert_eq!(measured.peak_allocated_bytes(), predicted.peak_allocated_bytes(), "{batching:?} {index}");
            if let Some(out) = out {
                out.push(measured.activation_peak_bytes as f64 / batch.counted_targets() as f64);
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        mean(&packed_per_token) < mean(&padded_per_token),
        "activation bytes per useful token: packed {packed_per_token:?}, padded {padded_per_token:?}"
    );
}

#[test]
fn document_starts_are_checked() {
    let docs = Documents::builtin();
    let (packed, _) = docs.packed(&[3, 9, 12, 40], 2, T);
    let p = plan(packed.shape, AttentionKind::Standard, Batching::Packed);
    let mut exec = CpuExecutor::<f32>::new(p.clone(), 1).expect("executor");
    let mut bad = packed.clone();
    bad.doc_starts[5] = 2; // position 5 of row 0: neither a start nor its neighbour's
    assert!(matches!(exec.upload_batch(&bad), Err(BackendError::Config(ConfigError::Shape(ShapeError::DocStarts(_))))));
    let none = Batch { doc_starts: Vec::new(), ..packed.clone() };
    assert!(matches!(
        exec.upload_batch(&none),
        Err(BackendError::Config(ConfigError::Shape(ShapeError::DocStarts(_))))
    ));
    exec.upload_batch(&packed).expect("a packed batch");
    let windows = plan(packed.shape, AttentionKind::Standard, Batching::Windows);
    let mut exec = CpuExecutor::<f32>::new(windows, 1).expect("executor");
    assert!(exec.upload_batch(&packed).is_err(), "packed rows into an unpacked plan");
    let _ = Trainer::plan(&exec);
}

/// The GPU backend masks too: a packed step's loss and gradients equal the same documents one to
/// a row on the GPU, and the CPU's, within fp32's rounding; for both attention paths.
#[test]
fn the_gpu_backend_packs_like_the_cpu() {
    use oomlab::backend::gpu::GpuExecutor;
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter (lavapipe)");
    let kernels = pollster::block_on(oomlab::backend::gpu::executor::build_kernels(&ctx)).expect("kernels");
    let docs = Documents::builtin();
    let order: Vec<usize> = (0..docs.docs.len()).filter(|&i| i % 3 == 0 || docs.len_pairs(i, T) < 40).collect();
    let (packed, used) = docs.packed(&order, 3, T);
    let padded = docs.padded(&used, T);
    let widen = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
    for attention in [AttentionKind::Standard, AttentionKind::Fused] {
        let run = |batch: &Batch, batching: Batching| {
            let p = plan(batch.shape, attention, batching);
            let mut exec = pollster::block_on(GpuExecutor::new(&ctx, &kernels, p, 3)).expect("executor");
            let loss = exec.compute_grads(batch).expect("step");
            let flat = exec.plan().layout.flat_len as usize;
            (loss as f64, widen(exec.read_grads().expect("grads")[..flat].to_vec()))
        };
        let (lp, gp) = run(&packed, Batching::Packed);
        let (ld, gd) = run(&padded, Batching::Padded);
        let (lc, gc) = grads(plan(packed.shape, attention, Batching::Packed), &packed);
        let what = format!("gpu {attention:?}");
        assert!((lp - ld).abs() < 1e-5 * ld.abs() && (lp - lc).abs() < 1e-5 * lc.abs(), "{what}: {lp} {ld} {lc}");
        for (name, a, b) in [("packed vs one a row", &gp, &gd), ("packed vs the CPU", &gp, &gc)] {
            let scale = b.iter().fold(0f64, |m, x| m.max(x.abs()));
            let worst = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
            assert!(worst <= 1e-5 * scale, "{what}: {name}: {worst:e} against {scale:e}");
        }
    }
}

/// Padded batches change their length from step to step: the executor goes on at each new shape
/// (`CpuExecutor::reshape`) with its model states and its allocator's segments, as an eager
/// framework's next step does. Three steps of three lengths give what three fresh executors give,
/// each handed the last one's weights and momentum; the cache persists across the shapes.
#[test]
fn an_executor_goes_on_at_each_batchs_length() {
    let docs = Documents::builtin();
    let sgd =
        OptimizerConfig { kind: oomlab::plan::OptimizerKind::Momentum, ..OptimizerConfig::sgd_momentum(0.1, 0.9) };
    let plan_at = |shape: StepShape| {
        let t = Techniques { batching: Batching::Padded, ..Techniques::default() };
        StepRequest::with_batch(model(), shape, sgd, t).expect("splits").validate().expect("valid").plan()
    };
    // Long, short, long: the short step runs in the long one's cached segments.
    let batches: Vec<Batch> =
        [vec![0, 5, 9], vec![1, 2, 3], vec![10, 20, 30]].iter().map(|ids| docs.padded(ids, T)).collect();
    let lengths: Vec<usize> = batches.iter().map(|b| b.shape.seq).collect();
    assert!(lengths.windows(2).all(|w| w[0] != w[1]), "three lengths: {lengths:?}");
    let steps = [Phase::Forward, Phase::Backward, Phase::Optimizer];
    let mut going = CpuExecutor::<f64>::new(plan_at(batches[0].shape), 2).expect("executor");
    let mut reserved = Vec::new();
    let mut reference: Option<CpuExecutor<f64>> = None;
    for (k, batch) in batches.iter().enumerate() {
        if k > 0 {
            going.reshape(plan_at(batch.shape)).expect("reshaped");
        }
        going.upload_batch(batch).expect("batch");
        going.run_phases(&steps).expect("step");
        reserved.push(going.memory().expect("account").stats.reserved_bytes);
        // A fresh executor at this shape, handed the previous one's weights and momentum.
        let mut fresh = CpuExecutor::<f64>::new(plan_at(batch.shape), 2).expect("fresh");
        if let Some(prev) = &reference {
            fresh.set_params(prev.params());
            let m = prev.tensor_by_name("optimizer.momentum").expect("momentum").to_vec();
            let id = fresh.plan().tensors.iter().position(|t| t.name == "optimizer.momentum").expect("momentum");
            fresh.write_tensor(oomlab::plan::TensorId(id), &m);
        }
        fresh.upload_batch(batch).expect("batch");
        fresh.run_phases(&steps).expect("step");
        reference = Some(fresh);
    }
    let flat = going.plan().layout.flat_len as usize;
    let want = reference.expect("ran").params()[..flat].to_vec();
    close("three lengths, one executor", &going.params()[..flat], &want);
    // The short step needed no new segment: the long step's were cached.
    assert!(reserved[1] >= reserved[0], "the cache stays: {reserved:?}");
    // The GPU goes on the same way: its dispatches recorded afresh at each length.
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter (lavapipe)");
    let kernels = pollster::block_on(oomlab::backend::gpu::executor::build_kernels(&ctx)).expect("kernels");
    let mut gpu =
        pollster::block_on(oomlab::backend::gpu::GpuExecutor::new(&ctx, &kernels, plan_at(batches[0].shape), 2))
            .expect("gpu");
    for (k, batch) in batches.iter().enumerate() {
        if k > 0 {
            gpu.reshape(plan_at(batch.shape)).expect("reshaped");
        }
        Trainer::train_step(&mut gpu, batch).expect("step");
        let m = gpu.memory().expect("account");
        assert_eq!(gpu.reserved_buffer_bytes(), m.stats.reserved_bytes, "step {k}: the buffers are the segments");
        assert_eq!(m.stats.reserved_bytes, reserved[k], "step {k}: the GPU's allocator did what the CPU's did");
    }
    let got: Vec<f64> = gpu.read_params().expect("params")[..flat].iter().map(|&x| f64::from(x)).collect();
    let scale = want.iter().fold(0f64, |m, x| m.max(x.abs()));
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
    assert!(worst <= 1e-5 * scale, "the GPU at three lengths: {worst:e}");
    let other = Techniques { attention: AttentionKind::Fused, batching: Batching::Padded, ..Techniques::default() };
    let other =
        StepRequest::with_batch(model(), batches[0].shape, sgd, other).expect("splits").validate().expect("valid");
    assert!(going.reshape(other.plan()).is_err(), "other techniques are another run");
}
