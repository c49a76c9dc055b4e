//! The CPU reference's gradients against central finite differences, in f64, on a tiny config:
//! every parameter of every kind, so every backward op (embedding, LayerNorm, matmul, attention,
//! GELU, residual, cross-entropy) is covered.

use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Batch;
use oomlab::model::init::init_params;
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{OptimizerConfig, Plan};

#[test]
fn reference_gradients_match_central_differences() {
    let model = ModelConfig { vocab: 7, seq_len: 6, d_model: 8, n_layers: 2, n_heads: 2 };
    let shape = StepShape { batch: 2, seq: 5 };
    let plan = Plan::build(&model, shape, &OptimizerConfig::default()).expect("plan");
    let layout = plan.layout.clone();
    let mut exec = CpuExecutor::<f64>::new(plan, 3).expect("executor");
    // Larger-than-GPT-2 weights so every path carries signal (std 0.02 makes LN/attention
    // gradients tiny); LayerNorm weights stay near 1.
    let mut params: Vec<f64> = init_params(&layout, 3).iter().map(|&x| x as f64 * 20.0).collect();
    for s in &layout.specs {
        if s.name.contains("ln_") {
            for (i, x) in params[s.host_range().expect("fits")].iter_mut().enumerate() {
                *x = 1.0 + 0.1 * ((i % 5) as f64 - 2.0);
            }
        }
    }
    exec.set_params(&params);
    // token 3 repeats, so the embedding scatter-add must accumulate
    let batch = Batch {
        shape,
        inputs: vec![3, 1, 3, 0, 6, 3, 3, 2, 5, 4],
        targets: vec![1, 3, 0, 6, 2, 3, 2, 5, 4, 3],
        doc_starts: Vec::new(),
    };
    exec.forward_backward(&batch).expect("step");
    let analytic = exec.grads().to_vec();

    let h = 1e-6;
    let mut worst = (0.0f64, String::new());
    for spec in &layout.specs {
        for i in spec.host_range().expect("fits") {
            let orig = params[i];
            params[i] = orig + h;
            exec.set_params(&params);
            let up = exec.forward(&batch).expect("forward");
            params[i] = orig - h;
            exec.set_params(&params);
            let down = exec.forward(&batch).expect("forward");
            params[i] = orig;
            let numeric = (up - down) / (2.0 * h);
            // relative error, with an absolute floor for gradients that are exactly zero (the key bias:
            // softmax ignores a per-row constant), where central differences only see rounding
            // noise of ~1e-10
            let err = (numeric - analytic[i]).abs() / (numeric.abs() + analytic[i].abs()).max(1e-4);
            if err > worst.0 {
                worst = (
                    err,
                    format!(
                        "{}[{}]: analytic {:e} numeric {numeric:e}",
                        spec.name,
                        i as u64 - spec.offset,
                        analytic[i]
                    ),
                );
            }
        }
        let g = &analytic[spec.host_range().expect("fits")];
        assert!(g.iter().any(|x| x.abs() > 1e-8), "{} has an all-zero gradient; the check would be vacuous", spec.name);
    }
    println!("worst relative error {:.3e} at {}", worst.0, worst.1);
    assert!(worst.0 < 1e-5, "finite differences disagree: {:.3e} at {}", worst.0, worst.1);
}

/// LoRA's adapters (every target, both matrices non-zero) against central differences: covers
/// the up-projection op (`matmul_add`) and the frozen projections' input-only backward.
#[test]
fn lora_gradients_match_central_differences() {
    use oomlab::model::params::LoraConfig;
    use oomlab::plan::Techniques;
    let model = ModelConfig { vocab: 7, seq_len: 6, d_model: 8, n_layers: 2, n_heads: 2 };
    let shape = StepShape { batch: 2, seq: 5 };
    let lora = LoraConfig { alpha: 3.0, ..LoraConfig::new(2) }.with_targets("all").expect("targets");
    let techniques = Techniques { lora: Some(lora), ..Techniques::default() };
    let plan = Plan::build_with(&model, shape, &OptimizerConfig::default(), &techniques).expect("plan");
    let lora_layout = plan.lora.clone().expect("a LoRA layout");
    let trainable = plan.handles.trainable;
    let mut exec = CpuExecutor::<f64>::new(plan, 4).expect("executor");
    let base: Vec<f64> = init_params(&exec.plan().layout, 4).iter().map(|&x| x as f64 * 20.0).collect();
    exec.set_params(&base);
    // B is zero at initialisation (A's gradient would be zero too): use random A and B.
    let mut rng = oomlab::model::init::Rng::new(9);
    let mut adapters: Vec<f64> = vec![0.0; lora_layout.flat_len as usize];
    for s in &lora_layout.specs {
        for x in &mut adapters[s.host_range().expect("fits")] {
            *x = rng.normal() * 0.5;
        }
    }
    exec.write_tensor(trainable, &adapters);
    let batch = Batch {
        shape,
        inputs: vec![3, 1, 3, 0, 6, 3, 3, 2, 5, 4],
        targets: vec![1, 3, 0, 6, 2, 3, 2, 5, 4, 3],
        doc_starts: Vec::new(),
    };
    exec.forward_backward(&batch).expect("step");
    let analytic = exec.grads().to_vec();
    assert_eq!(analytic.len() as u64, lora_layout.flat_len, "gradients exist for the adapters only");
    let h = 1e-6;
    let mut worst = 0.0f64;
    for spec in &lora_layout.specs {
        for i in spec.host_range().expect("fits") {
            let orig = adapters[i];
            adapters[i] = orig + h;
            exec.write_tensor(trainable, &adapters);
            let up = exec.forward(&batch).expect("forward");
            adapters[i] = orig - h;
            exec.write_tensor(trainable, &adapters);
            let down = exec.forward(&batch).expect("forward");
            adapters[i] = orig;
            let numeric = (up - down) / (2.0 * h);
            let err = (numeric - analytic[i]).abs() / (numeric.abs() + analytic[i].abs()).max(1e-4);
            assert!(
                err < 1e-5,
                "{}[{}]: analytic {:e} numeric {numeric:e}",
                spec.name,
                i as u64 - spec.offset,
                analytic[i]
            );
            worst = worst.max(err);
        }
        assert!(
            analytic[spec.host_range().expect("fits")].iter().any(|x| x.abs() > 1e-8),
            "{}: all-zero gradient",
            spec.name
        );
    }
    println!("LoRA: worst relative error {worst:.3e}");
}
