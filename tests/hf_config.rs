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

fn catalog_text(key: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models").join(format!("{key}.json"));
    std::fs::read_to_string(path).expect("a catalog file")
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
        let text = match name.strip_prefix("catalog/") {
            Some(key) => catalog_text(key),
            None => config(name),
        };
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
    assert!(m.arch.block.qkv_bias && !m.arch.biases && m.arch.tied_embeddings);
    let m = from_config(&config("gpt2"), "gpt2").expect("reads");
    assert_eq!((m.arch.positions, m.arch.ffn, m.arch.dropout), (1024, 3072, 0.1));
    assert!(m.arch.fused_qkv && m.arch.biases);
}

#[test]
fn what_it_cannot_model_it_names() {
    let cases = [
        (config("qwen2.5-0.5b").replace("\"qwen2\"", "\"falcon\""), "model_type \"falcon\" is not modelled yet"),
        (
            catalog_text("deepseek-v3").replace("\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\""),
            "scoring_func",
        ),
        (catalog_text("deepseek-v3").replace("\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2"), "moe_layer_freq"),
        (
            catalog_text("deepseek-v3").replace("\"num_key_value_heads\": 128", "\"num_key_value_heads\": 64"),
            "latent attention expands keys and values to every head",
        ),
        (catalog_text("glm-4.5-air").replace("\"n_group\": 1", "\"n_group\": 3"), "n_group"),
        (
            catalog_text("gpt-oss-20b").replace("\"experts_per_token\": 4", "\"experts_per_token\": 2"),
            "experts_per_token",
        ),
        (
            config("tiny-llama4-text").replace(
                "\"interleave_moe_layer_step\": 2",
                "\"interleave_moe_layer_step\": 2, \"moe_layers\": [0, 1]",
            ),
            "moe_layers",
        ),
        (
            config("tiny-llama4-text").replace("\"no_rope_layer_interval\": 2", "\"no_rope_layers\": [1, 0, 0, 1]"),
            "no_rope_layers",
        ),
        (
            config("tiny-smollm3").replace("\"no_rope_layer_interval\": 2", "\"no_rope_layer_interval\": 1"),
            "no rotary layer",
        ),
        (
            catalog_text("qwen3-30b-a3b").replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0]"),
            "mlp_only_layers",
        ),
        (
            catalog_text("qwen3-30b-a3b").replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"),
            "decoder_sparse_step",
        ),
        (
            catalog_text("mixtral-8x7b").replace("\"output_router_logits\": false", "\"output_router_logits\": true"),
            "output_router_logits",
        ),
        (catalog_text("mixtral-8x7b").replace("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"), "top_k"),
        (
            catalog_text("gemma-2-9b")
                .replace("\"final_logit_softcapping\": 30.0", "\"final_logit_softcapping\": null"),
            "attn_logit_softcapping",
        ),
        (
            catalog_text("gemma-2-9b")
                .replace("\"hidden_activation\": \"gelu_pytorch_tanh\"", "\"hidden_activation\": \"relu\""),
            "hidden_activation",
        ),
        (catalog_text("pythia-160m").replace("\"rotary_pct\": 0.25", "\"rotary_pct\": 1.5"), "partial_rotary_factor"),
        (catalog_text("pythia-160m").replace("\"hidden_dropout\": 0.0", "\"hidden_dropout\": 0.1"), "hidden_dropout"),
        (catalog_text("phi-3-mini-4k").replace("\"resid_pdrop\": 0.0", "\"resid_pdrop\": 0.1"), "resid_pdrop"),
        (r#"{"hidden_size": 8}"#.to_string(), "no model_type"),
        ("[1, 2]".to_string(), "not a JSON object"),
        ("{".to_string(), "not JSON"),
        (config("llama-3.1-8b").replace("\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias"),
        (config("llama-3.1-8b").replace("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""), "hidden_act"),
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
fn the_2026_families_are_built_as_transformers_builds_them() {
    use oomlab::estimate::{Router, catalog::find};
    // DeepSeek-V3: latent attention (q through a 1536 latent, k/v through 512 plus a shared
    // 64-wide rotary key), 3 dense layers then 58 with 256 routed experts and one shared, 37.5 B
    // parameters active of 671 B (DeepSeek-AI's 37 B and 671 B).
    let a = &find("deepseek-v3").expect("in the catalog").model.arch;
    let mla = a.block.mla.expect("latent attention");
    assert_eq!((mla.q_rank, mla.kv_rank, mla.nope_dim, mla.rope_dim, mla.v_dim), (1536, 512, 128, 64, 128));
    assert_eq!((a.head_dim(), a.block.rotary_dims, a.attention_output()), (192, 64, 128 * 128));
    let m = a.block.moe.expect("experts");
    assert_eq!((m.experts, m.top_k, m.shared_ffn, m.router), (256, 8, 2048, Router::Sigmoid));
    assert_eq!((a.moe_layers(), a.dense_layer().expect("dense layers").ffn), (58, 18432));
    assert_eq!(a.active_parameters() / 100_000_000, 375);
    // GLM-4.5-Air: biases on q, k and v only, half of each 128-wide head rotated, 1 dense layer.
    let a = &find("glm-4.5-air").expect("in the catalog").model.arch;
    assert!(a.block.qkv_bias && !a.biases && !a.block.qk_norm);
    assert_eq!((a.head_dim(), a.block.rotary_dims, a.moe_layers()), (128, 64, 45));
    // gpt-oss: attention sinks, biases on the attention and the experts, a softmax over the top
    // 4 of 32 experts; its published count (20.9 B) is transformers'.
    let a = &find("gpt-oss-20b").expect("in the catalog").model.arch;
    assert!(a.block.sinks && a.biases);
    let m = a.block.moe.expect("experts");
    assert_eq!((m.experts, m.top_k, m.router, m.biases), (32, 4, Router::TopKSoftmax, true));
    // Llama 4 Scout: 16 experts in every layer, each token's one plus a shared expert; every
    // fourth layer without RoPE (12 of 48), weightless q/k norms in the others.
    let a = &find("llama-4-scout").expect("in the catalog").model.arch;
    let m = a.block.moe.expect("experts");
    assert_eq!((m.experts, m.top_k, m.shared_ffn, m.router), (16, 1, 8192, Router::AllExperts));
    let kinds = a.kinds();
    assert_eq!(kinds.len(), 2);
    assert_eq!(
        kinds.iter().map(|(k, n)| (k.experts, k.rope, *n)).collect::<Vec<_>>(),
        [(true, true, 36), (true, false, 12)]
    );
    assert!(a.block.qk_norm && a.block.qk_norm_weightless && a.block.nope_temperature);
    assert!(!a.of_kind(kinds[1].0).block.qk_norm, "no q/k norm where there is no RoPE");
    assert_eq!(a.active_parameters() / 100_000_000, 171, "Meta's 17 B active");
    // OLMo 2: norms after the attention and the MLP only; q/k norms over the whole width.
    let a = &find("olmo-2-7b").expect("in the catalog").model.arch;
    assert!(a.block.post_norms && a.block.qk_norm && a.block.qk_norm_whole && !a.block.sandwich_norms);
    // Granite's multipliers and SmolLM3's layers without RoPE change no parameter: each is the
    // LLaMA of its sizes.
    for (key, family) in [("granite-3.3-8b", "granite"), ("smollm3-3b", "smollm3")] {
        let e = find(key).expect("in the catalog");
        let mut text = catalog_text(key).replace(&format!("\"{family}\""), "\"llama\"");
        for k in ["embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"] {
            text = text.lines().filter(|l| !l.contains(k)).collect::<Vec<_>>().join("\n");
        }
        text = text.replace("\"no_rope_layer_interval\": 4,", "");
        let start = text.find("\"no_rope_layers\"");
        if let Some(start) = start {
            let end = start + text[start..].find(']').expect("the list's end") + 2;
            text.replace_range(start..end, "");
        }
        let llama = from_config(&text, key).expect("reads as LLaMA");
        assert_eq!(llama.arch.parameters(), e.model.arch.parameters(), "{key}");
        assert_eq!(llama.arch.block, e.model.arch.block, "{key}");
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
    let unknown = config("qwen2.5-0.5b").replace("\"qwen2\"", "\"falcon\"");
    std::fs::write(dir.path().join("config.json"), unknown).expect("written");
    let out = support_cli::oomlab(&["estimate", "--model", &dir.path().to_string_lossy()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("falcon"), "the refusal names the family");
}

#[test]
fn every_catalog_file_reads_and_is_listed() {
    use oomlab::estimate::catalog;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("data/models")
        .filter_map(|e| e.ok()?.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    files.sort();
    let mut keys: Vec<String> = catalog::CONFIGS.iter().map(|(k, _)| k.to_string()).collect();
    keys.sort();
    assert_eq!(files, keys, "every file in data/models is in the catalog, and only those");
    assert_eq!(catalog::entries().len(), catalog::CONFIGS.len(), "every catalog config reads");
    assert!(catalog::CONFIGS.len() >= 25);
    // GPT-2's four sizes are presets (the same published configs), not catalog files.
    for family in oomlab::estimate::hf::FAMILIES.into_iter().filter(|f| *f != "gpt2") {
        let has = catalog::CONFIGS.iter().any(|(_, text)| text.contains(&format!("\"model_type\": \"{family}\"")));
        assert!(has, "the catalog has a {family} model");
    }
    // Picked by key or by name, as the app lists them.
    // Each family's models are listed together (the views head them by family).
    let families: Vec<&str> = catalog::entries().iter().map(|e| e.family.as_str()).collect();
    let mut seen: Vec<&str> = families.clone();
    seen.dedup();
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(seen.len(), unique.len(), "a family's models together: {families:?}");
    assert!(families.contains(&"deepseek_v3") && families.contains(&"glm4_moe"));
    let e = catalog::find("Mixtral 8x7B").expect("by name");
    assert_eq!(e.key, "mixtral-8x7b");
    assert!(oomlab::estimate::presets::models().iter().any(|(k, _)| *k == "qwen3-30b-a3b"));
}

#[test]
fn the_families_features_are_read() {
    use oomlab::estimate::catalog::find;
    let arch = |key: &str| find(key).expect(key).model.arch.clone();
    let m = arch("mixtral-8x7b");
    let moe = m.block.moe.expect("a mixture");
    assert_eq!((moe.experts, moe.top_k, moe.shared_ffn, m.ffn), (8, 2, 0, 14336));
    // 47 B parameters, 13 B of them per token (Jiang et al. 2024: 46.7 B and 12.9 B).
    assert_eq!((m.parameters() / 100_000_000, m.active_parameters() / 100_000_000), (467, 128));
    let q = arch("qwen1.5-moe-a2.7b");
    assert_eq!(q.block.moe.map(|m| (m.shared_ffn, m.renormalise)), Some((5632, false)));
    assert!(q.block.qkv_bias);
    let q3 = arch("qwen3-8b");
    assert!(q3.block.qk_norm && !q3.block.sandwich_norms && q3.head_dim() == 128);
    let g = arch("gemma-7b");
    assert_eq!((g.head_dim(), g.q_hidden(), g.hidden), (256, 4096, 3072), "Gemma 7B's heads are wider than h / a");
    assert!(g.tied_embeddings && g.mlp == oomlab::estimate::Mlp::GeGlu);
    let g2 = arch("gemma-2-9b");
    assert!(g2.block.sandwich_norms && g2.block.softcap && !g2.block.qk_norm);
    let g3 = arch("gemma-3-1b");
    assert!(g3.block.sandwich_norms && g3.block.qk_norm && !g3.block.softcap);
    let p = arch("pythia-160m");
    assert!(p.block.parallel_residual && p.biases && p.fused_qkv && !p.tied_embeddings);
    assert_eq!(p.block.rotary_dims, 16, "a quarter of a 64-wide head");
    assert!(arch("phi-3-mini-4k").fused_qkv);
}

#[test]
fn the_cli_names_a_catalog_model() {
    let out = support_cli::oomlab(&["estimate", "--model", "qwen3-30b-a3b", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["parameters"], transformers_counts()["catalog/qwen3-30b-a3b"]);
    assert_eq!(v["seq_len"], 4096, "its context (40960), at most 4096 by default");
    let out = support_cli::oomlab(&["estimate", "--list-models", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mixtral = list.as_array().and_then(|l| l.iter().find(|m| m["key"] == "mixtral-8x7b")).expect("listed");
    assert_eq!(mixtral["parameters"], 46_702_792_704u64);
    assert_eq!(mixtral["active_parameters"], 12_879_925_248u64);
}

/// The parameters line cites its own family's formula, and the formula is the count: each one
/// here is evaluated by hand for its model.
#[test]
fn each_family_cites_its_own_formula() {
    use oomlab::estimate::catalog::find;
    use oomlab::estimate::presets::model;
    let gpt2 = model("gpt2").expect("gpt2");
    assert_eq!(gpt2.formula(), "12Lh² + 13Lh + Vh + Th + 2h");
    let (l, h, v, t) = (12u64, 768u64, 50257u64, 1024u64);
    assert_eq!(12 * l * h * h + 13 * l * h + v * h + t * h + 2 * h, gpt2.parameters());
    let llama = model("llama2-7b").expect("llama2-7b");
    assert_eq!(llama.formula(), "L(4h² + 3hf + 2h) + 2Vh + h");
    let (l, h, f, v) = (32u64, 4096u64, 11008u64, 32000u64);
    assert_eq!(l * (4 * h * h + 3 * h * f + 2 * h) + 2 * v * h + h, llama.parameters());
    let mixtral = find("mixtral-8x7b").expect("mixtral").model.arch.clone();
    assert_eq!(mixtral.formula(), "L(h(q + 2kv) + qh + E·3hf + Eh + 2h) + 2Vh + h");
    let (l, h, q, kv, e, f, v) = (32u64, 4096u64, 4096u64, 1024u64, 8u64, 14336u64, 32000u64);
    assert_eq!(l * (h * (q + 2 * kv) + q * h + e * 3 * h * f + e * h + 2 * h) + 2 * v * h + h, mixtral.parameters());
    let gemma2 = find("gemma-2-9b").expect("gemma").model.arch.clone();
    assert_eq!(gemma2.formula(), "L(h(q + 2kv) + qh + 3hf + 4h) + Vh + h");
    let (l, h, q, kv, f, v) = (42u64, 3584u64, 4096u64, 2048u64, 14336u64, 256000u64);
    assert_eq!(l * (h * (q + 2 * kv) + q * h + 3 * h * f + 4 * h) + v * h + h, gemma2.parameters());
    let qwen = find("qwen1.5-moe-a2.7b").expect("qwen").model.arch.clone();
    assert_eq!(qwen.formula(), "L(4h² + 3h + E·3hf + Eh + 3hf_s + h + 2h) + 2Vh + h");
    let (l, h, e, f, fs, v) = (24u64, 2048u64, 60u64, 1408u64, 5632u64, 151936u64);
    assert_eq!(
        l * (4 * h * h + 3 * h + e * 3 * h * f + e * h + 3 * h * fs + h + 2 * h) + 2 * v * h + h,
        qwen.parameters()
    );
    // DeepSeek-V3: latent attention, 3 dense layers and 58 with the mixture (sigmoid routing:
    // no shared expert gate), the router's E·h.
    let ds = find("deepseek-v3").expect("deepseek").model.arch.clone();
    assert_eq!(
        ds.formula(),
        "L(hr_q + r_q + r_q·q + h(r + d_r) + r + r·a(d_n + d_v) + a·d_v·h + 2h) + 2Vh + h + L_e(E·3hf + Eh + 3hf_s) + L_d·3hf_d"
    );
    let (l, h, v, a) = (61u64, 7168u64, 129280u64, 128u64);
    let (rq, r, dn, dr, dv) = (1536u64, 512u64, 128u64, 64u64, 128u64);
    let (le, ld, e, f, fs, fd) = (58u64, 3u64, 256u64, 2048u64, 2048u64, 18432u64);
    let attention = h * rq + rq + rq * a * (dn + dr) + h * (r + dr) + r + r * a * (dn + dv) + a * dv * h;
    let moe = e * 3 * h * f + e * h + 3 * h * fs;
    assert_eq!(l * (attention + 2 * h) + 2 * v * h + h + le * moe + ld * 3 * h * fd, ds.parameters());
    let pythia = find("pythia-160m").expect("pythia").model.arch.clone();
    assert_eq!(pythia.formula(), "L(4h² + 4h + 2hf + f + h + 4h) + 2Vh + 2h");
}

/// DeepSeek-V3's multi-token-prediction module is not part of transformers' model: read from the
/// config, counted only when asked (`--mtp`): two norms, a 2h → h projection, a block like the
/// last layer, a final norm per module, and logits of its own.
#[test]
fn the_multi_token_prediction_module_is_counted_only_when_asked() {
    use oomlab::estimate::catalog::find;
    let e = find("deepseek-v3").expect("in the catalog");
    assert_eq!(
        (e.model.mtp, find("glm-4.5-air").expect("GLM").model.mtp, find("llama-3.1-8b").expect("Llama").model.mtp),
        (1, 1, 0)
    );
    let base = e.model.arch.clone();
    assert_eq!(base.parameters(), transformers_counts()["catalog/deepseek-v3"], "without --mtp: transformers' count");
    let mut with = base.clone();
    with.block.mtp = 1;
    let h = base.hidden;
    // The last layer (one with the experts): the model less the model without it.
    let mut shorter = base.clone();
    shorter.layers -= 1;
    let layer = base.parameters() - shorter.parameters();
    assert_eq!(with.parameters() - base.parameters(), 2 * h + 2 * h * h + layer + h);
    // With the checkpoint's own copies of the embedding and the head: 684.5 B, DeepSeek's "685 B".
    assert_eq!((with.parameters() + 2 * base.vocab * h) / 100_000_000, 6844);
    // Its activations and logits: one more block's worth and one more set of logits.
    let gpu = oomlab::estimate::presets::gpu("h200").expect("h200");
    let (mut s0, mut s1) =
        (oomlab::estimate::Setup::new(base, gpu.clone(), 1, 1024), oomlab::estimate::Setup::new(with, gpu, 1, 1024));
    s0.attention = oomlab::plan::AttentionKind::Fused;
    s1.attention = oomlab::plan::AttentionKind::Fused;
    let (e0, e1) =
        (oomlab::estimate::estimate(&s0).expect("estimate"), oomlab::estimate::estimate(&s1).expect("estimate"));
    assert_eq!(e1.logits_bytes, 2 * e0.logits_bytes);
    assert!(oomlab::estimate::saved_outside(&s1).iter().any(|t| t.key == "saved-multi-token-prediction"));
    assert!(e1.activations_end_of_forward > e0.activations_end_of_forward);
    // The CLI's option; refused for a model without the module.
    let out = support_cli::oomlab(&["estimate", "--model", "deepseek-v3", "--mtp", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["parameters"], s1.arch.parameters());
    assert_eq!(v["architecture"]["block"]["mtp"], 1);
    let out = support_cli::oomlab(&["estimate", "--model", "llama-3.1-8b", "--mtp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no multi-token-prediction module"));
}
