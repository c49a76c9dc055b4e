//! Padding: a target of `data::IGNORE` takes no part in the loss. A batch of sequences padded
//! at the end with ignored targets trains exactly as the same sequences unpadded — the same
//! loss and the same gradients, on both backends (causal attention: no real token sees the
//! padding after it) — while the padding's activations are really allocated.

mod common;

use common::gpu;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::GpuExecutor;
use oomlab::backend::{BackendError, Trainer};
use oomlab::data::{Batch, Dataset, IGNORE};
use oomlab::memory::simulate;
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{OptimizerConfig, Plan};

const BUDGET: u64 = 1 << 30;

/// `batch` with every sequence padded from `seq` to `to` positions: input token 0, target
/// ignored.
fn padded(batch: &Batch, to: usize) -> Batch {
    let seq = batch.shape.seq;
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for b in 0..batch.shape.batch {
        inputs.extend_from_slice(&batch.inputs[b * seq..(b + 1) * seq]);
        targets.extend_from_slice(&batch.targets[b * seq..(b + 1) * seq]);
        inputs.extend(std::iter::repeat_n(0, to - seq));
        targets.extend(std::iter::repeat_n(IGNORE, to - seq));
    }
    Batch { shape: StepShape { batch: batch.shape.batch, seq: to }, inputs, targets, doc_starts: Vec::new() }
}

fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())) as f64;
    a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs() as f64)) / scale.max(f64::MIN_POSITIVE)
}

/// Forward and backward of `batch` on `exec`: the loss and the gradients.
fn grads(exec: &mut dyn Trainer, batch: &Batch) -> Result<(f32, Vec<f32>), BackendError> {
    let loss = exec.compute_grads(batch)?;
    Ok((loss, exec.read_grads()?))
}

#[test]
fn a_padded_batch_trains_as_the_unpadded_one_on_both_backends() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    // With accumulation too: the gradient's scale counts the real targets of every micro-batch.
    for (accum, seq, to) in [(1, 24, 32), (2, 40, 64)] {
        let batch = ds.batch(StepShape { batch: 4, seq }, 7, 0).expect("batch");
        let pad = padded(&batch, to);
        assert_eq!(pad.counted_targets(), batch.targets.len());
        let plan = |s: usize| {
            let t = oomlab::plan::Techniques { accum, ..Default::default() };
            let shape = StepShape { batch: 4 / accum, seq: s };
            Plan::build_with(&model, shape, &OptimizerConfig::default(), &t).expect("plan")
        };
        let (short, long) = (plan(seq), plan(to));
        // The padding is really spent: the padded step's activations are larger.
        let (a, b) = (simulate(&short, BUDGET).expect("fits"), simulate(&long, BUDGET).expect("fits"));
        assert!(b.activation_peak_bytes > a.activation_peak_bytes * (to as u64) / (seq as u64) * 9 / 10);

        let mut c1 = CpuExecutor::<f32>::with_budget(short.clone(), 3, BUDGET).expect("cpu");
        let mut c2 = CpuExecutor::<f32>::with_budget(long.clone(), 3, BUDGET).expect("cpu");
        let (l1, g1) = grads(&mut c1, &batch).expect("cpu step");
        let (l2, g2) = grads(&mut c2, &pad).expect("cpu padded step");
        let what = format!("accum {accum}, {seq} → {to}");
        assert!((l1 - l2).abs() <= 1e-6 * l1.abs(), "{what}: cpu loss {l1} against padded {l2}");
        let e = max_rel(&g2, &g1);
        assert!(e <= 1e-5, "{what}: cpu gradients differ by {e:.2e}");

        let g = gpu();
        let mut x1 = pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, short, 3, BUDGET)).expect("gpu");
        let mut x2 = pollster::block_on(GpuExecutor::with_budget(&g.ctx, &g.kernels, long, 3, BUDGET)).expect("gpu");
        let (m1, h1) = grads(&mut x1, &batch).expect("gpu step");
        let (m2, h2) = grads(&mut x2, &pad).expect("gpu padded step");
        assert!((m1 - m2).abs() <= 1e-5 * m1.abs(), "{what}: gpu loss {m1} against padded {m2}");
        let e = max_rel(&h2, &h1);
        assert!(e <= 1e-4, "{what}: gpu gradients differ by {e:.2e}");
        let e = max_rel(&h2, &g1);
        assert!(e <= 1e-4, "{what}: gpu padded against cpu unpadded: {e:.2e}");
    }
}

#[test]
fn an_ignored_target_is_not_out_of_the_vocabulary() {
    let ds = Dataset::builtin();
    let model = ModelConfig::toy(ds.tokenizer.vocab_size());
    let mut b = ds.batch(StepShape { batch: 1, seq: 8 }, 0, 0).expect("batch");
    b.targets[3] = IGNORE;
    assert!(b.validate(&model).is_ok());
    assert_eq!(b.counted_targets(), 7);
    // An input of IGNORE is still a token out of range.
    b.inputs[0] = IGNORE;
    assert!(b.validate(&model).is_err());
}
