//! The plan's memory prediction: per category, over time, at the peak; against the closed-form
//! activation formula; and out-of-memory at a budget.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use oomlab::memory::formula::activation_bytes;
use oomlab::memory::{simulate, simulate_peak};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Category, Lifetime, OptimizerConfig, OptimizerKind, Plan};

const GIB: u64 = 1 << 30;

fn plan(model: &ModelConfig, batch: usize, seq: usize, opt: OptimizerConfig) -> Plan {
    Plan::build(model, StepShape { batch, seq }, &opt).expect("plan")
}

fn toy() -> ModelConfig {
    ModelConfig::toy(58)
}

#[test]
fn activation_peak_equals_the_formula() {
    let models = [
        toy(),
        ModelConfig { vocab: 65, seq_len: 128, d_model: 128, n_layers: 4, n_heads: 8 },
        ModelConfig { vocab: 11, seq_len: 37, d_model: 12, n_layers: 3, n_heads: 3 },
    ];
    for model in models {
        for batch in [1, 3, 16, 64] {
            for seq in [model.seq_len, model.seq_len / 2 + 1] {
                let p = plan(&model, batch, seq, OptimizerConfig::default());
                let m = simulate(&p, 64 * GIB).expect("fits");
                let formula = activation_bytes(&model, StepShape { batch, seq });
                assert_eq!(m.activation_peak_bytes, formula, "{model:?} B{batch} T{seq}");
            }
        }
    }
}

#[test]
fn persistent_categories_and_optimizer_state() {
    let model = toy();
    let flat_bytes = oomlab::model::ParamLayout::new(&model).flat_len * 4;
    let rounded = flat_bytes.div_ceil(512) * 512;
    for (kind, states) in [(OptimizerKind::AdamW, 2), (OptimizerKind::Momentum, 1), (OptimizerKind::Sgd, 0)] {
        let opt = OptimizerConfig { kind, ..OptimizerConfig::default() };
        let m = simulate(&plan(&model, 4, 64, opt), GIB).expect("fits");
        let setup = &m.timeline[0];
        assert_eq!(setup.op, None);
        assert_eq!(setup.allocated.get(Category::Parameters), rounded);
        assert_eq!(setup.allocated.get(Category::Gradients), rounded);
        assert_eq!(setup.allocated.get(Category::OptimizerState), states * rounded, "{kind:?}");
        assert_eq!(setup.allocated.get(Category::Activations), 0);
        // persistent bytes are the same at every point of the step
        for point in &m.timeline {
            assert_eq!(point.allocated.get(Category::OptimizerState), states * rounded);
        }
    }
}

#[test]
fn activations_grow_with_batch_and_model_state_does_not() {
    let model = toy();
    let mut last = None;
    for batch in [1, 2, 4, 8, 16, 32] {
        let m = simulate_peak(&plan(&model, batch, 64, OptimizerConfig::default()), 64 * GIB).expect("fits");
        let acts = m.peak_requested.get(Category::Activations);
        let params = m.peak_allocated.get(Category::Parameters);
        if let Some((a, p)) = last {
            assert!(acts > a, "activations must grow with the batch");
            assert_eq!(params, p, "parameters do not depend on the batch");
        }
        last = Some((acts, params));
    }
}

#[test]
fn lifetimes_follow_an_eager_framework() {
    let p = plan(&toy(), 2, 16, OptimizerConfig::default());
    let lifetimes = p.lifetimes();
    for (t, l) in p.tensors.iter().zip(&lifetimes) {
        match t.category {
            _ if t.persistent => assert_eq!(*l, Lifetime::Persistent, "{}", t.name),
            Category::Input => assert_eq!(*l, Lifetime::Step, "{}", t.name),
            _ if t.name == "loss" => assert_eq!(*l, Lifetime::Step, "the loop reads the loss after the step"),
            _ => assert!(matches!(l, Lifetime::Ops { first, last } if first <= last), "{}: {l:?}", t.name),
        }
    }
    // saved activations live from the forward pass into the backward pass
    let probs = p.tensors.iter().position(|t| t.name == "h.0.attn.probs").expect("probs");
    let Lifetime::Ops { first, last } = lifetimes[probs] else { panic!("probs lifetime") };
    assert_eq!(p.ops[first].phase, oomlab::plan::Phase::Forward);
    assert_eq!(p.ops[last].phase, oomlab::plan::Phase::Backward);
    // a residual branch output dies at the add that consumes it
    let proj = p.tensors.iter().position(|t| t.name == "h.0.attn.c_proj.out").expect("proj");
    let Lifetime::Ops { first, last } = lifetimes[proj] else { panic!("proj lifetime") };
    assert_eq!(last, first + 1);
}

#[test]
fn oom_is_deterministic_names_the_op_and_leaves_nothing_behind() {
    let model = toy();
    let big = plan(&model, 512, 64, OptimizerConfig::default());
    let budget = 64 << 20;
    let a = simulate(&big, budget).expect_err("does not fit in 64 MiB");
    let b = simulate(&big, budget).expect_err("does not fit in 64 MiB");
    assert_eq!(a.message, b.message, "deterministic");
    assert_eq!(a.tensor, b.tensor);
    println!("{}", a.message);
    assert!(a.message.starts_with("GPU out of memory. Tried to allocate"), "{}", a.message);
    assert!(a.message.contains("GPU 0 has a total capacity of 64.00 MiB"), "{}", a.message);
    assert!(a.message.contains(a.category.name()), "names the category");
    assert!(a.message.contains(&a.tensor_name), "names the tensor");
    assert!(a.op.is_some() && a.message.contains(&a.op_label), "names the op");
    // and a smaller config then runs at the same budget
    let small = plan(&model, 8, 64, OptimizerConfig::default());
    let m = simulate(&small, budget).expect("batch 8 fits");
    assert!(m.peak_reserved_bytes() <= budget);
}

#[test]
fn the_peak_is_a_point_of_the_timeline() {
    let m = simulate(&plan(&toy(), 16, 64, OptimizerConfig::default()), GIB).expect("fits");
    let peak = &m.timeline[m.peak_index];
    assert_eq!(peak.allocated_bytes, m.peak_allocated_bytes());
    assert_eq!(peak.allocated.total(), m.peak_allocated_bytes());
    assert!(
        m.timeline
            .iter()
            .all(|p| p.allocated_bytes <= m.peak_allocated_bytes() && p.reserved_bytes <= m.peak_reserved_bytes())
    );
    assert!(!m.live_at_peak.is_empty());
    // after the step, model state, the batch and the loss (held by the training loop) stay
    let p = plan(&toy(), 16, 64, OptimizerConfig::default());
    let kept: u64 = p
        .tensors
        .iter()
        .zip(p.lifetimes())
        .filter(|(_, l)| matches!(l, Lifetime::Persistent | Lifetime::Step))
        .map(|(t, _)| t.size_bytes().div_ceil(512) * 512)
        .sum();
    assert_eq!(m.stats.allocated_bytes, kept);
}

#[test]
fn the_event_log_names_the_op_behind_every_alloc_and_free() {
    use oomlab::memory::allocator::Event;
    let p = plan(&toy(), 4, 32, OptimizerConfig::default());
    let lifetimes = p.lifetimes();
    let m = simulate(&p, GIB).expect("fits");
    let (mut allocs, mut frees) = (0, 0);
    for e in &m.events {
        match e {
            Event::Alloc { tag, .. } => {
                allocs += 1;
                match lifetimes[tag.tensor.0] {
                    Lifetime::Ops { first, .. } => assert_eq!(tag.op, Some(first), "allocated by its first op"),
                    _ => assert_eq!(tag.op, None, "model state and the batch exist before the step"),
                }
            }
            Event::Free { tag, .. } => {
                frees += 1;
                let Lifetime::Ops { last, .. } = lifetimes[tag.tensor.0] else { panic!("only step tensors are freed") };
                assert_eq!(tag.op, Some(last), "freed by its last op");
            }
            _ => {}
        }
    }
    let step_tensors = lifetimes.iter().filter(|l| matches!(l, Lifetime::Ops { .. })).count();
    assert_eq!(allocs, p.tensors.len());
    assert_eq!(frees, step_tensors, "every step tensor is freed once");
}

/// The app's memory-vs-batch chart predicts every batch size the slider allows (issue 17), and
/// dragging the batch slider moves its marker without predicting them again.
#[test]
fn the_apps_sweep_has_every_batch_size_and_survives_a_batch_drag() {
    use oomlab::app::settings::{MAX_BATCH, Settings};
    use oomlab::app::{Derived, sweep_batches};
    use oomlab::plan::Techniques;
    let vocab = 65;
    let overlay = Techniques { accum: 4, ..Techniques::default() };
    let s1 = Settings {
        device: oomlab::app::DeviceSettings::with_budget(64 << 20),
        overlays: vec![overlay],
        ..Settings::default()
    };
    let mut d1 = Derived::new(&s1, vocab);
    let batches: Vec<usize> = d1.sweep[0].points.iter().map(|(b, _)| *b).collect();
    assert_eq!(batches, (1..=MAX_BATCH).collect::<Vec<_>>(), "every batch size, in order");
    let overlay_batches: Vec<usize> = d1.sweep[1].points.iter().map(|(b, _)| *b).collect();
    assert_eq!(overlay_batches, sweep_batches(4));
    assert!(overlay_batches.iter().all(|b| b % 4 == 0) && overlay_batches.len() == MAX_BATCH / 4);
    // Exact: the largest fitting batch is one below the first out-of-memory batch.
    let (fits, oom) = (d1.sweep[0].largest_fitting().expect("some fit"), d1.sweep[0].first_oom().expect("some don't"));
    assert_eq!(fits + 1, oom, "a 64 MiB budget runs out between two neighbouring batch sizes");
    // Each point is what building that batch's plan and replaying it predicts.
    for &(b, ref m) in d1.sweep[0].points.iter().filter(|(b, _)| [1, 7, fits, oom, 1000].contains(b)) {
        let plan = s1.plan_with(vocab, b, &s1.techniques()).expect("builds");
        let want = oomlab::memory::simulate_peak(&plan, s1.device.budget_bytes).map_err(|e| e.message);
        match (m, want) {
            (Ok(m), Ok(w)) => assert_eq!(m.stats, w.stats, "batch {b}"),
            (Err(m), Err(w)) => assert_eq!(m.message, w, "batch {b}"),
            (m, w) => panic!("batch {b}: {m:?} vs {w:?}"),
        }
    }
    // Only the batch changes: the same sweep is kept (the same buffer, not a recomputed copy).
    let kept = d1.sweep.as_ptr();
    let s2 = Settings { batch: 40, ..s1.clone() };
    let mut d2 = Derived::reusing(&s2, vocab, Some((&s1, &mut d1)));
    assert_eq!(d2.sweep.as_ptr(), kept);
    // The budget changes: predicted again, and the out-of-memory batch moves.
    let s3 = Settings { device: oomlab::app::DeviceSettings::with_budget(256 << 20), ..s2.clone() };
    let d3 = Derived::reusing(&s3, vocab, Some((&s2, &mut d2)));
    assert!(d3.sweep[0].first_oom().is_none_or(|b| b > oom));
}
