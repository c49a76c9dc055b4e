//! Hugging Face config.json files read by the estimator: for every family it reads, the
//! parameter count is exactly what transformers builds from the same config (counted on the
//! meta device by scripts/check_params.py into tests/fixtures/hf/params.json); the CLI takes a
//! config.json or its folder for `--model`; a family or a field it does not model is refused by
//! name.

#[path = "support/cli.rs"]
mod support_cli;

use oomlab::estimate::hf::from_config;

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

fn config(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name).join("config.json")).expect("a fixture")
}

fn transformers_counts() -> serde_json::Map<String, serde_json::Value> {
    let text = std::fs::read_to_string(fixtures().join("params.json")).expect("params.json");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn parameter_counts_equal_transformers() {
    let counts = transformers_counts();
    let mut checked = 0;
    for (name, want) in &counts {
        let Some(want) = want.as_u64() else { continue };
        let text = config(name);
        match from_config(&text, name) {
            Ok(m) => {
                assert_eq!(m.arch.parameters(), want, "{name}: oomlab's count against transformers'");
                checked += 1;
            }
            // A family not read yet must say so, by name.
            Err(e) => assert!(e.to_string().contains("is not modelled yet"), "{name}: {e}"),
        }
    }
    assert_eq!(checked, counts.len() - 1, "every config counted (all but the note on who counted)");
}

#[test]
fn the_families_are_mapped_as_their_models_are_built() {
    let m = from_config(&config("llama-3.1-8b"), "llama-3.1-8b").expect("reads");
    assert_eq!((m.arch.kv_heads, m.arch.tied_embeddings, m.context), (8, false, 131072));
    let m = from_config(&config("llama-3.2-1b"), "llama-3.2-1b").expect("reads");
    assert!(m.arch.tied_embeddings, "Llama-3.2-1B ties its lm_head");
    // Qwen2: biases on q, k and v alone (transformers' count, 494,032,768, needs exactly those),
    // the lm_head tied.
    let m = from_config(&config("qwen2.5-0.5b"), "qwen2.5-0.5b").expect("reads");
    assert!(m.arch.qkv_bias && !m.arch.biases && m.arch.tied_embeddings);
    let m = from_config(&config("gpt2"), "gpt2").expect("reads");
    assert_eq!((m.arch.positions, m.arch.ffn, m.arch.dropout), (1024, 3072, 0.1));
    assert!(m.arch.fused_qkv && m.arch.biases);
}

#[test]
fn what_it_cannot_model_it_names() {
    let cases = [
        (config("qwen2.5-0.5b").replace("\"qwen2\"", "\"qwen2_moe\""), "model_type \"qwen2_moe\" is not modelled yet"),
        (r#"{"hidden_size": 8}"#.to_string(), "no model_type"),
        ("[1, 2]".to_string(), "not a JSON object"),
        ("{".to_string(), "not JSON"),
        (config("llama-3.1-8b").replace("\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias"),
        (config("llama-3.1-8b").replace("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""), "hidden_act"),
        (config("llama-3.2-1b").replace("\"head_dim\": 64", "\"head_dim\": 128"), "head_dim"),
        (config("gpt2").replace("\"attn_pdrop\": 0.1", "\"attn_pdrop\": 0.0"), "attn_pdrop"),
        (config("gpt2").replace("\"n_embd\": 768", "\"n_embd\": -1"), "n_embd must be a positive whole number"),
        (config("mistral-7b-v0.1").replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"), "kv_heads"),
        ("x".repeat(oomlab::estimate::hf::MAX_CONFIG_BYTES + 1), "more than"),
    ];
    for (text, want) in cases {
        let e = from_config(&text, "test").expect_err(want);
        assert!(e.to_string().contains(want), "{want:?} not in {e}");
    }
}

#[test]
fn the_cli_reads_a_config_or_its_folder() {
    let counts = transformers_counts();
    let folder = fixtures().join("mistral-7b-v0.1");
    for model in [folder.clone(), folder.join("config.json")] {
        let out = support_cli::oomlab(&["estimate", "--model", &model.to_string_lossy(), "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["parameters"], counts["mistral-7b-v0.1"], "{v}");
        assert_eq!(v["seq_len"], 4096, "the context, at most 4096 by default");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let moe = config("qwen2.5-0.5b").replace("\"qwen2\"", "\"qwen2_moe\"");
    std::fs::write(dir.path().join("config.json"), moe).expect("written");
    let out = support_cli::oomlab(&["estimate", "--model", &dir.path().to_string_lossy()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("qwen2_moe"), "the refusal names the family");
}
