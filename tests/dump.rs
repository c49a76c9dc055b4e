//! `dump-step` files round-trip: names, shapes and values; and the config is a GPT2Config.

use oomlab::backend::Trainer;
use oomlab::backend::cpu::CpuExecutor;
use oomlab::data::Dataset;
use oomlab::dump::{StepDump, read_batch, read_f32, split_flat};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{OptimizerConfig, Plan};

#[test]
fn dump_step_files_round_trip() {
    let ds = Dataset::builtin();
    let model = ModelConfig { vocab: ds.tokenizer.vocab_size(), seq_len: 16, d_model: 16, n_layers: 2, n_heads: 2 };
    let shape = StepShape { batch: 3, seq: 12 };
    let plan = Plan::build(&model, shape, &OptimizerConfig::default()).expect("plan");
    let layout = plan.layout.clone();
    let mut exec = CpuExecutor::<f32>::new(plan, 4).expect("executor");
    let initial = exec.read_params().expect("params");
    let batch = ds.batch(shape, 4, 0).expect("batch");
    let loss = exec.compute_grads(&batch).expect("step");
    let grads = exec.read_grads().expect("grads");
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = StepDump {
        model: &model,
        layout: &layout,
        initial_params: &initial,
        grads: &grads,
        batch: &batch,
        loss,
        backend: "cpu".into(),
    };
    dump.write(dir.path()).expect("write");

    let mut expected = split_flat(&layout, &initial);
    expected.sort_by(|a, b| a.name.cmp(&b.name));
    let weights = read_f32(&dir.path().join("model.safetensors")).expect("read weights");
    assert_eq!(weights, expected, "weights differ after the round trip");
    assert!(
        weights.iter().any(|t| t.name == "transformer.h.1.attn.c_attn.weight" && t.shape == vec![16, 48]),
        "Conv1D layout is in×out"
    );
    assert!(weights.iter().any(|t| t.name == "transformer.wpe.weight" && t.shape == vec![16, 16]));
    assert_eq!(weights.len(), 2 + 12 * 2 + 2, "wte, wpe, 12 per block, ln_f (lm_head is tied)");

    let mut expected_grads = split_flat(&layout, &grads);
    expected_grads.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(read_f32(&dir.path().join("grads.safetensors")).expect("read grads"), expected_grads);

    let file = read_batch(&dir.path().join("batch.safetensors")).expect("read batch");
    let (bshape, ids, labels) = (file.shape, file.input_ids, file.labels);
    assert_eq!(bshape, vec![3, 12]);
    assert_eq!(ids, batch.inputs.iter().map(|&x| x as i64).collect::<Vec<_>>());
    assert_eq!(labels, batch.targets.iter().map(|&x| x as i64).collect::<Vec<_>>());
    assert_eq!(ids[1..12], labels[..11], "labels are the next tokens");

    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).expect("config")).expect("json");
    assert_eq!(config["model_type"], "gpt2");
    assert_eq!(config["n_embd"], 16);
    assert_eq!(config["n_layer"], 2);
    assert_eq!(config["n_head"], 2);
    assert_eq!(config["n_positions"], 16);
    assert_eq!(config["vocab_size"], model.vocab);
    assert_eq!(config["activation_function"], "gelu_new");
    let loss_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("loss.json")).expect("loss")).expect("json");
    assert!((loss_json["loss"].as_f64().expect("number") - loss as f64).abs() < 1e-6);
}
