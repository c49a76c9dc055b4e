//! Serving estimates against what really holds the cache: transformers' own caches measured
//! (tests/fixtures/hf_kv.json, written by scripts/check_kv.py), vLLM's figures from real logs,
//! and the CLI's `estimate --serve` end to end.

use oomlab::estimate::hf::from_config;
use oomlab::estimate::serve::{
    self, KvDtype, LayerAttention, ServeError, ServeRuntime, WeightFormat, attention_layers, bytes_per_token_layer,
    static_request_bytes, transformers_request_bytes,
};

#[path = "support/cli.rs"]
mod support_cli;
use support_cli::{oomlab, oomlab_in};

fn fixtures() -> serde_json::Value {
    serde_json::from_str(include_str!("fixtures/hf_kv.json")).expect("hf_kv.json")
}

/// A config's architecture and its layers' attention.
fn model(folder: &str) -> (oomlab::estimate::Architecture, Vec<LayerAttention>) {
    let path = format!("{}/tests/fixtures/hf/{folder}/config.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("config");
    let arch = from_config(&text, folder).expect("reads").arch;
    let layers = attention_layers(&serde_json::from_str(&text).expect("json"), arch.layers).expect("layers");
    (arch, layers)
}

/// `oomlab estimate --serve … --json`'s `serve`.
fn serve_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["estimate", "--serve", "--json"];
    all.extend_from_slice(args);
    let out = oomlab(&all);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["serve"].clone()
}

#[test]
fn transformers_caches_hold_what_transformers_holds_for_every_family() {
    let f = fixtures();
    let batch = f["batch"].as_u64().expect("batch");
    let cases = f["cases"].as_object().expect("cases");
    assert_eq!(cases.len(), 18, "every family the estimator reads, measured");
    let mut windowed = 0;
    for (folder, measured) in cases {
        let (arch, layers) = model(folder);
        windowed += usize::from(layers.iter().any(|l| l.window().is_some()));
        let per = bytes_per_token_layer(&arch, KvDtype::Auto, 1);
        for n in [40u64, 200] {
            let at = |key: String| measured[&key].as_u64().unwrap_or_else(|| panic!("{folder}: {key}"));
            let prefill = transformers_request_bytes(&layers, per, n, true) * batch;
            let decode = transformers_request_bytes(&layers, per, n, false) * batch;
            let fixed = static_request_bytes(&layers, per, 256) * batch;
            assert_eq!(prefill, at(format!("prefill_{n}")), "{folder}: after a prompt of {n}");
            assert_eq!(decode, at(format!("decode_{n}")), "{folder}: {n} tokens, the last decoded");
            assert_eq!(fixed, at(format!("static_256_{n}")), "{folder}: StaticCache(max_cache_len=256)");
        }
    }
    assert_eq!(windowed, 5, "gemma2, gemma3, gpt-oss, llama4 (chunked) and mistral keep windows");
}

#[test]
fn the_cli_answers_for_transformers_as_it_measured() {
    let f = fixtures();
    for (folder, runtime, context, key) in [
        ("tiny-gemma2", "transformers", "200", "decode_200"),
        ("tiny-llama4-text", "transformers", "200", "decode_200"),
        ("tiny-gpt-oss", "static", "256", "static_256_200"),
        ("tiny-deepseek-v3", "transformers", "40", "decode_40"),
    ] {
        let model = format!("{}/tests/fixtures/hf/{folder}", env!("CARGO_MANIFEST_DIR"));
        let s = serve_json(&["--model", &model, "--runtime", runtime, "--context", context, "--concurrency", "2"]);
        assert_eq!(s["kv_cache_bytes"], f["cases"][folder][key], "{folder} {runtime} {context}");
        if runtime == "transformers" {
            let prefill = format!("prefill_{context}");
            assert_eq!(s["kv_cache_prefill_bytes"], f["cases"][folder][&prefill], "{folder}: after the prompt");
        }
        assert_eq!(s["runtime"], runtime);
    }
}

#[test]
fn vllm_figures_equal_real_vllm_logs() {
    // LMCache issue #1739, Qwen3-14B: "Available KV cache memory: 6.51 GiB", "GPU KV cache
    // size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x".
    let qwen = format!("{}/tests/fixtures/hf/qwen3-14b", env!("CARGO_MANIFEST_DIR"));
    let s = serve_json(&["--model", &qwen, "--kv-cache-memory", "6.51GiB", "--context", "32768"]);
    assert_eq!(s["num_gpu_blocks"], 2666);
    assert_eq!(s["gpu_kv_cache_tokens"], 42_656);
    assert_eq!(format!("{:.2}", s["max_concurrency"].as_f64().expect("concurrency")), "1.30");
    assert_eq!(s["kv_bytes_per_token"], 160 * 1024, "40 layers × 8 heads × 128 × 2 × 2 bytes");
    assert_eq!(s["vllm"]["page_bytes"], 65_536);
    // The answers: one request holds the model's whole context (40,960 < 42,656); two hold
    // 1,333 blocks each.
    assert_eq!(s["longest_context"], 40_960);
    let two =
        serve_json(&["--model", &qwen, "--kv-cache-memory", "6.51GiB", "--concurrency", "2", "--context", "32768"]);
    assert_eq!((two["longest_context"].as_u64(), two["fits"].as_bool()), (Some(1333 * 16), Some(false)));
    // The text says it as vLLM's log does.
    let out = oomlab(&["estimate", "--serve", "--model", &qwen, "--kv-cache-memory", "6.51GiB", "--context", "32768"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("GPU KV cache size: 42,656 tokens"), "{text}");
    assert!(text.contains("Maximum concurrency for 32,768 tokens per request: 1.30x"), "{text}");
    // vllm#10517, Llama-3.1-8B on an RTX 3090: 1,952 blocks ("3.81 GiB"), 31,232 tokens, 1.56x
    // at 20,000 tokens.
    let llama = serve_json(&["--model", "llama-3.1-8b", "--kv-cache-memory", "3.8125GiB", "--context", "20000"]);
    assert_eq!((llama["num_gpu_blocks"].as_u64(), llama["gpu_kv_cache_tokens"].as_u64()), (Some(1952), Some(31_232)));
    assert_eq!(format!("{:.2}", llama["max_concurrency"].as_f64().expect("concurrency")), "1.56");
    // DeepSeek-V3's latent cache: (512 + 64) × 2 bytes × 61 layers, on every tensor-parallel GPU.
    for tp in ["1", "8"] {
        let v3 = serve_json(&["--model", "deepseek-v3", "--tp", tp, "--kv-cache-memory", "10GiB"]);
        assert_eq!(v3["kv_bytes_per_token"], 70_272, "--tp {tp}");
    }
}

#[test]
fn vllm_groups_a_hybrid_model_and_frees_what_leaves_the_window() {
    // gpt-oss-20b: 12 sliding layers (128 tokens) and 12 full, two groups of 12 sharing the
    // pool; at 131,072 tokens a request holds 8,192 blocks in the full group and
    // cdiv(127 + 8,192, 16) + 1 = 521 in the sliding one.
    let s = serve_json(&["--model", "gpt-oss-20b", "--kv-cache-memory", "24GiB", "--context", "131072"]);
    let page = 16 * 8 * 128 * 2;
    assert_eq!(s["vllm"]["page_bytes"], page);
    assert_eq!(s["vllm"]["groups"].as_array().map(Vec::len), Some(2));
    let blocks = (24u64 << 30) / page / 12;
    assert_eq!(s["num_gpu_blocks"], blocks);
    assert_eq!(s["gpu_kv_cache_tokens"], blocks / 2 * 16);
    assert_eq!(s["vllm"]["blocks_per_request"], 8192 + 521);
    let per_token_full = 24 * 8 * 128 * 2;
    assert_eq!(s["kv_bytes_per_token"], per_token_full, "every layer's rate, before the windows");
}

#[test]
fn weights_take_their_format_on_the_linear_layers_only() {
    let (arch, _) = model("qwen3-14b");
    let bf16 = serve::weights_bytes(&arch, WeightFormat::Bf16, 1);
    assert_eq!(bf16, 2 * arch.parameters());
    let fp8 = serve::weights_bytes(&arch, WeightFormat::Fp8, 1);
    let int4 = serve::weights_bytes(&arch, WeightFormat::Int4 { group: 128 }, 1);
    // Counted by hand: the embedding and the untied head (151,936 × 5,120 each) and the norms
    // (two of 5,120 and q/k norms of 128 in each of 40 layers, and the final one) stay bf16.
    let embeddings = 2 * 151_936 * 5_120;
    let norms = 40 * (2 * 5_120 + 2 * 128) + 5_120;
    let linear = arch.parameters() - embeddings - norms;
    assert_eq!(fp8, linear + 2 * (embeddings + norms), "one byte a linear weight");
    // int4: half a byte a weight, and an fp16 scale and a 4-bit zero per 128.
    let groups = linear.div_ceil(128);
    assert_eq!(int4, linear.div_ceil(2) + groups * 2 + groups.div_ceil(2) + 2 * (embeddings + norms));
    assert_eq!(serve::weights_bytes(&arch, WeightFormat::Int8, 1), fp8);
    let split = serve::weights_bytes(&arch, WeightFormat::Bf16, 8);
    assert!(split < bf16 / 7 && split > bf16 / 9, "tensor parallelism splits the weights: {split}");
}

#[test]
fn serving_refusals_are_worded_in_both_languages() {
    let refused = |lang: &str, args: &[&str]| {
        let out = oomlab_in(lang, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        err
    };
    let tp = ["estimate", "--serve", "--model", "llama-3.1-8b", "--runtime", "transformers", "--tp", "2"];
    assert!(refused("C.UTF-8", &tp).contains("tensor parallelism is estimated for vLLM only"));
    assert!(refused("zh_CN.UTF-8", &tp).contains("张量并行只对 vLLM 估算"));
    let room = ["estimate", "--serve", "--model", "deepseek-v3", "--gpu", "a100-80"];
    assert!(refused("C.UTF-8", &room).contains("leave nothing"), "671 B parameters on one A100");
    assert!(refused("zh_CN.UTF-8", &room).contains("没有留给 KV 缓存的空间"));
    let fp8 = ["estimate", "--serve", "--model", "llama-3.1-8b", "--runtime", "static", "--kv-dtype", "fp8"];
    assert!(refused("C.UTF-8", &fp8).contains("fp8 cache is estimated for vLLM only"));
    for (args, needle) in [
        (&["estimate", "--runtime", "vllm"][..], "add --serve"),
        (&["estimate", "--serve", "--runtime", "fused"][..], "training profile"),
        (&["estimate", "--serve", "--weights", "int3"][..], "--weights takes"),
        (&["estimate", "--serve", "--context", "0"][..], "--context must be at least 1"),
        (&["estimate", "--serve", "--gpu-memory-utilization", "1.5"][..], "--gpu-memory-utilization cannot be 1.5"),
        (&["estimate", "--serve", "--concurrency", "99999999999"][..], "--concurrency cannot be"),
        (&["estimate", "--serve", "--max-num-seqs", "0"][..], "--max-num-seqs must be at least 1"),
        (
            &["estimate", "--serve", "--model", "llama-3.1-8b", "--context", "200000"][..],
            "longer than the model's (131072)",
        ),
    ] {
        assert!(refused("C.UTF-8", args).contains(needle), "{args:?}");
    }
    // Every error's message is in both catalogs.
    let all = [
        ServeError::Layers(serve::LayersError::UnknownKind { kind: "x".into() }),
        ServeError::Layers(serve::LayersError::Count { listed: 1, layers: 2 }),
        ServeError::Layers(serve::LayersError::NoWidth { key: "sliding_window" }),
        ServeError::Option { flag: "--context", value: "0".into() },
        ServeError::NoRoom { room: 1, needed: 2 },
        ServeError::ContextBeyondModel { context: 2, model: 1 },
        ServeError::TensorParallelOnlyVllm,
        ServeError::Fp8CacheOnlyVllm,
    ];
    for lang in [oomlab::i18n::Lang::En, oomlab::i18n::Lang::Zh] {
        let t = oomlab::i18n::Catalog::new(lang);
        for e in &all {
            let text = e.text(&t);
            assert!(!text.is_empty() && !text.contains(e.key()), "{lang:?} {e:?}: {text}");
        }
    }
}

#[test]
fn the_transformers_answer_counts_the_room_a_gpu_leaves() {
    let (arch, layers) = model("qwen3-14b");
    let setup = serve::ServeSetup {
        arch,
        layers,
        model_context: 40_960,
        runtime: ServeRuntime::Transformers,
        context: 8192,
        concurrency: 4,
        kv_dtype: KvDtype::Auto,
        weights: WeightFormat::Bf16,
        tensor_parallel: 1,
        gpu_bytes: 80 << 30,
        vllm: serve::vllm::Options::default(),
    };
    let a = serve::serve(&setup).expect("answers");
    let room = (80u64 << 30) - a.weights_bytes - (500 << 20);
    assert_eq!(a.available_kv_bytes, room);
    assert_eq!(a.kv_cache_bytes, 4 * 8192 * 160 * 1024);
    assert!((a.max_concurrency - room as f64 / (8192.0 * 160.0 * 1024.0)).abs() < 1e-9);
    assert_eq!(a.longest_context, 40_960, "four requests hold the model's whole context");
    assert!(a.fits);
    let many = serve::serve(&serve::ServeSetup { concurrency: 64, ..setup }).expect("answers");
    assert_eq!(many.longest_context, room / 64 / (160 * 1024), "every layer full: the room over 64 requests");
    assert!(!many.fits, "64 × 8,192 tokens × 160 KiB = 80 GiB, more than the room");
}
