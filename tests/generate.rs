//! Serving (issue 58 §1–§3): the toy generates with a real KV cache, on both backends, in three
//! layouts, the same tokens as transformers' `generate`; and a stream of requests, scheduled as
//! servers schedule it, has the shape the PagedAttention paper measured.

mod common;
#[path = "support/cli.rs"]
mod support_cli;

use std::path::Path;

use oomlab::backend::{BackendKind, ready_now};
use oomlab::dump::{join_flat, read_f32, read_generations};
use oomlab::model::{ModelConfig, ParamLayout};
use oomlab::serving::{Layout, Report, Request, ServingConfig, run, run_requests};

const FIXTURE: &str = "tests/fixtures/hf_generate";

/// The fixture's model (config.json), weights and requests (prompts, transformers' tokens).
fn fixture() -> (ModelConfig, Vec<f32>, Vec<Request>, Vec<Vec<u32>>) {
    let dir = Path::new(FIXTURE);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).expect("config")).expect("json");
    let n = |k: &str| config[k].as_u64().expect(k) as usize;
    let model = ModelConfig {
        vocab: n("vocab_size"),
        seq_len: n("n_positions"),
        d_model: n("n_embd"),
        n_layers: n("n_layer"),
        n_heads: n("n_head"),
    };
    let weights = read_f32(&dir.join("model.safetensors")).expect("weights");
    let flat = join_flat(&ParamLayout::new(&model), &weights).expect("every parameter");
    let gens = read_generations(&dir.join("generations.json")).expect("generations");
    let requests = gens
        .iter()
        .enumerate()
        .map(|(i, g)| Request { id: i as u64, prompt: g.prompt.clone(), output_len: g.tokens.len() })
        .collect();
    (model, flat, requests, gens.into_iter().map(|g| g.tokens).collect())
}

fn serve(cfg: &ServingConfig, kind: BackendKind, requests: Vec<Request>, params: Option<&[f32]>) -> Report {
    let gpu = (kind == BackendKind::Gpu).then(|| {
        let g = common::gpu();
        oomlab::backend::Gpu { ctx: g.ctx.clone(), kernels: g.kernels.clone() }
    });
    let run = run_requests(cfg, kind, gpu.as_ref(), requests, params);
    let report = if kind == BackendKind::Cpu { ready_now(run).expect("ready") } else { pollster::block_on(run) };
    let report = report.expect("serves");
    assert_eq!(report.oom, None, "{:?}", report.layout);
    report
}

fn tokens(r: &Report) -> Vec<Vec<u32>> {
    r.requests.iter().map(|s| s.tokens.clone()).collect()
}

#[test]
fn every_layout_generates_what_transformers_generates() {
    let (model, flat, requests, theirs) = fixture();
    for layout in Layout::ALL {
        for (max_num_seqs, kv) in [(1, None), (8, None), (8, Some(64 << 10))] {
            // A growing cache of 64 KiB holds nothing (see the next test).
            if kv.is_some() && layout == Layout::Growing {
                continue;
            }
            let cfg = ServingConfig {
                model,
                layout,
                budget: 48 << 20,
                block_size: 4,
                max_num_seqs,
                kv_cache_bytes: kv,
                ..ServingConfig::new(model.vocab)
            };
            let r = serve(&cfg, BackendKind::Cpu, requests.clone(), Some(&flat));
            assert_eq!(tokens(&r), theirs, "{layout:?}, {max_num_seqs} at once, a cache of {kv:?}");
            if kv.is_some() && layout == Layout::Paged {
                // A small cache: requests are preempted and recomputed, the tokens unchanged.
                assert!(r.preemptions > 0, "{} preemptions", r.preemptions);
            }
        }
    }
}

#[test]
fn the_gpu_generates_what_transformers_generates() {
    let (model, flat, requests, theirs) = fixture();
    for layout in Layout::ALL {
        let cfg = ServingConfig {
            model,
            layout,
            budget: 48 << 20,
            block_size: 4,
            kv_cache_bytes: (layout != Layout::Growing).then_some(64 << 10),
            ..ServingConfig::new(model.vocab)
        };
        let r = serve(&cfg, BackendKind::Gpu, requests.clone(), Some(&flat));
        assert_eq!(tokens(&r), theirs, "{layout:?} on the GPU");
    }
}

#[test]
fn the_default_mix_at_the_default_budget_has_the_papers_shape() {
    let vocab = oomlab::data::Dataset::builtin().tokenizer.vocab_size();
    let runs: Vec<Report> = Layout::ALL
        .into_iter()
        .map(|layout| {
            let cfg = ServingConfig { layout, ..ServingConfig::new(vocab) };
            ready_now(run(&cfg, BackendKind::Cpu, None)).expect("ready").expect("serves")
        })
        .collect();
    let [contiguous, growing, paged] = [&runs[0], &runs[1], &runs[2]];
    for r in &runs {
        assert_eq!(r.oom, None);
        assert_eq!(r.requests.len(), oomlab::serving::REQUESTS);
        assert!(r.requests.iter().all(|s| s.tokens.len() == s.output_len && !s.refused));
    }
    // The layout changes memory, never the math.
    assert_eq!(tokens(contiguous), tokens(paged));
    assert_eq!(tokens(growing), tokens(paged));
    // Paged holds at least twice as many at once; it wastes at most 10 % of what it reserved,
    // contiguous at least half.
    assert!(
        paged.peak_concurrent >= 2 * contiguous.peak_concurrent,
        "{} {}",
        paged.peak_concurrent,
        contiguous.peak_concurrent
    );
    assert!(paged.waste_fraction <= 0.10, "paged wastes {}", paged.waste_fraction);
    assert!(contiguous.waste_fraction >= 0.50, "contiguous wastes {}", contiguous.waste_fraction);
    // Paged runs out before the last requests finish and preempts, never an OOM; contiguous
    // reserved the whole context for each and never needs to.
    assert!(paged.preemptions > 0 && contiguous.preemptions == 0);
    assert!(paged.kv_reserved_peak_bytes <= paged.setup.kv_pool_bytes);
    assert_eq!(contiguous.waste_at_peak.external_fragmentation, 0);
    assert!(growing.waste_at_peak.external_fragmentation > 0, "the allocator's cached blocks");
}

#[test]
fn a_cache_too_small_for_its_layout_is_a_clear_refusal() {
    let (model, flat, requests, _) = fixture();
    let refused = |layout, kv: u64| {
        let cfg = ServingConfig {
            model,
            layout,
            budget: 48 << 20,
            kv_cache_bytes: Some(kv),
            ..ServingConfig::new(model.vocab)
        };
        match ready_now(run_requests(&cfg, BackendKind::Cpu, None, requests.clone(), Some(&flat))).expect("ready") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{layout:?} with a cache of {kv} bytes"),
        }
    };
    // Growing: the caching allocator's smallest segment is 2 MiB; contiguous: a row of the
    // whole context (96 tokens of 512 bytes).
    let growing = refused(Layout::Growing, 64 << 10);
    assert!(growing.contains("64.00 KiB") && growing.contains("2.00 MiB"), "{growing}");
    let contiguous = refused(Layout::Contiguous, 40 << 10);
    assert!(contiguous.contains("48.00 KiB"), "{contiguous}");
    // A budget the weights and the largest step already fill.
    let cfg = ServingConfig { model, budget: 1 << 20, ..ServingConfig::new(model.vocab) };
    let small = ready_now(run_requests(&cfg, BackendKind::Cpu, None, requests, Some(&flat))).expect("ready");
    let text = small.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.starts_with("a budget of 1.00 MiB leaves no room for the KV cache"), "{text}");
}

/// `oomlab serving`'s JSON: every figure the issue names, each request's tokens, the sources.
#[test]
fn the_serving_command_reports_as_json_and_dumps_for_transformers() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out_dir = dir.path().join("gen");
    let json = |layout: &str, extra: &[&str]| {
        let mut args = vec!["serving", "--requests", "12", "--context", "256", "--layout", layout, "--json"];
        args.extend_from_slice(extra);
        let out = support_cli::oomlab(&args);
        assert!(out.status.success(), "{layout}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("one JSON document")
    };
    let paged = json("paged", &["--dump", out_dir.to_str().expect("utf-8")]);
    let contiguous = json("contiguous", &[]);
    for doc in [&paged, &contiguous] {
        for key in
            ["peak_concurrent", "kv_reserved_peak_bytes", "kv_used_at_peak_bytes", "waste_fraction", "preemptions"]
        {
            assert!(doc[key].is_number(), "{key} in {doc}");
        }
        assert!(doc["oom"].is_null());
        assert_eq!(doc["requests"].as_array().map(Vec::len), Some(12));
        assert_eq!(doc["sources"]["setup"], "predicted");
        assert_eq!(doc["sources"]["kv"], "allocator");
        for r in doc["requests"].as_array().into_iter().flatten() {
            assert_eq!(r["tokens"].as_array().map(Vec::len), r["output_len"].as_u64().map(|n| n as usize));
        }
    }
    assert_eq!(paged["requests"], contiguous["requests"], "the layout never changes the tokens");
    assert!(paged["kv_reserved_peak_bytes"].as_u64() < contiguous["kv_reserved_peak_bytes"].as_u64());
    // The dump: the weights under Hugging Face's names, and the same tokens.
    let gens = read_generations(&out_dir.join("generations.json")).expect("generations.json");
    let tokens: Vec<serde_json::Value> = gens.iter().map(|g| serde_json::json!(g.tokens)).collect();
    let reported: Vec<serde_json::Value> =
        paged["requests"].as_array().into_iter().flatten().map(|r| r["tokens"].clone()).collect();
    assert_eq!(tokens, reported);
    assert!(
        read_f32(&out_dir.join("model.safetensors"))
            .expect("weights")
            .iter()
            .any(|t| t.name == "transformer.wte.weight")
    );
    assert!(out_dir.join("config.json").exists());
}

#[test]
fn the_serving_command_refuses_bad_input_in_the_system_language() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["serving", "--block-size", "0"], "--block-size", "--block-size"),
        (
            &["serving", "--block-size", "4096"],
            "--block-size must be between 1 and 1024 (got 4096)",
            "--block-size 必须介于 1 与 1024 之间",
        ),
        (
            &["serving", "--budget", "1MiB"],
            "a budget of 1.00 MiB leaves no room for the KV cache",
            "1.00 MiB 的预算给 KV 缓存留不下空间",
        ),
        (&["serving", "--budget", "99GiB"], "--budget must be between", "--budget 必须介于"),
        (
            &["serving", "--layout", "growing", "--kv-cache-memory", "64KiB"],
            "a KV cache of 64.00 KiB holds no request",
            "64.00 KiB 的 KV 缓存装不下任何请求",
        ),
        (&["serving", "--layout", "sideways"], "sideways", "sideways"),
        (&["serving", "--requests", "-3"], "--requests", "--requests"),
    ];
    for (args, english, chinese) in cases {
        for (lang, needle) in [("C", english), ("zh_CN.UTF-8", chinese)] {
            let out = support_cli::oomlab_in(lang, args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {lang}: {stderr}");
            assert!(stderr.contains(needle), "{args:?} {lang}: expected {needle:?} in {stderr}");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        }
    }
}

/// `bench --decode`: the toy's decode rate at batch 1 and 16, beside PyTorch's where it runs
/// (here it is declined: CI has no torch).
#[test]
fn the_decode_benchmark_reports_a_rate_per_batch() {
    let out = support_cli::oomlab(&["bench", "--decode", "--backend", "cpu", "--torch-python", "none", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rates = doc["oomlab"].as_array().expect("rates");
    assert_eq!(rates.iter().map(|r| r["batch"].as_u64()).collect::<Vec<_>>(), vec![Some(1), Some(16)]);
    for r in rates {
        let tps = r["decode_tokens_per_sec"].as_f64().expect("a rate");
        let ms = r["ms_per_step"].as_f64().expect("a step time");
        assert!(tps > 0.0 && ms > 0.0, "{r}");
        // Tokens per second is the batch over the step time.
        let b = r["batch"].as_f64().unwrap_or(0.0);
        assert!((tps - b * 1e3 / ms).abs() <= 1e-6 * tps, "{r}");
    }
    assert_eq!(doc["pytorch_cpu_eager"]["not_run"], "--torch-python none");
}
