//! `oomlab estimate --serve`: the memory of serving a real model — its weights and the KV cache
//! of its requests — as vLLM, transformers' `DynamicCache` or its `StaticCache` lay it out
//! ([`oomlab::estimate::serve`]).

use oomlab::estimate::serve::{self, KvDtype, ServeRuntime, ServeSetup, WeightFormat, vllm};
use oomlab::units::{format_bytes, group_digits, parse_bytes};

use super::Failure;
use super::config::system_catalog;
use super::estimate::{EstimateArgs, KvDtypeArg, RuntimeArg, positive as count, usage};

/// `--weights`: bf16, fp8, int8, int4 or int4:G.
fn weight_format(text: &str) -> Result<WeightFormat, Failure> {
    let bad = || usage(format!("--weights takes bf16, fp8, int8, int4 or int4:G (got {text:?})"));
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "bf16" | "fp16" | "auto" => WeightFormat::Bf16,
        "fp8" => WeightFormat::Fp8,
        "int8" => WeightFormat::Int8,
        "int4" => WeightFormat::Int4 { group: 128 },
        other => {
            let group = other.strip_prefix("int4:").and_then(|g| g.parse::<u64>().ok()).ok_or_else(bad)?;
            WeightFormat::Int4 { group }
        }
    })
}

/// The model's config.json, where `--model` names one (a file, a folder, or a catalog model):
/// what each layer's attention is read from. A preset has none (every layer attends to all).
fn config_json(model: &str) -> Option<serde_json::Value> {
    let path = std::path::Path::new(model);
    let text = if path.exists() {
        let file = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
        std::fs::read_to_string(file).ok()?
    } else {
        oomlab::estimate::catalog::find(model)?.config().to_string()
    };
    serde_json::from_str(&text).ok()
}

/// The setup the flags describe.
fn setup(a: &EstimateArgs) -> Result<ServeSetup, Failure> {
    let (arch, trained) = super::estimate::architecture(a)?;
    let gpu = oomlab::estimate::presets::gpu(&a.gpu).ok_or_else(|| usage(format!("unknown GPU {:?}", a.gpu)))?;
    let refused = |e: serve::ServeError| usage(e.text(&system_catalog()));
    let layers = match config_json(&a.model) {
        Some(config) => serve::attention_layers(&config, arch.layers).map_err(|e| refused(e.into()))?,
        None => vec![serve::LayerAttention::Full; arch.layers.min(1 << 20) as usize],
    };
    let model_context = trained.unwrap_or(if arch.positions > 0 { arch.positions } else { 4096 });
    let s = &a.serve;
    let runtime = match a.runtime {
        None | Some(RuntimeArg::Vllm) => ServeRuntime::Vllm,
        Some(RuntimeArg::Transformers) => ServeRuntime::Transformers,
        Some(RuntimeArg::Static) => ServeRuntime::Static,
        Some(other) => {
            return Err(usage(format!(
                "--runtime {other:?} is a training profile; serving takes vllm, transformers or static"
            )));
        }
    };
    let kv_cache_memory = match &s.kv_cache_memory {
        Some(text) => Some(parse_bytes(text).map_err(|e| usage(format!("--kv-cache-memory: {e}")))?),
        None => None,
    };
    let defaults = vllm::Options::default();
    let non_torch_bytes = match a.context_mib {
        Some(mib) if (0.0..=(1u64 << 20) as f64).contains(&mib) => (mib * (1u64 << 20) as f64) as u64,
        Some(mib) => return Err(usage(format!("--context-mib must be between 0 and {} (got {mib})", 1u64 << 20))),
        None => defaults.non_torch_bytes,
    };
    Ok(ServeSetup {
        arch,
        layers,
        model_context,
        runtime,
        context: match s.context {
            Some(c) => count("--context", c)?,
            None => model_context,
        },
        concurrency: count("--concurrency", s.concurrency)?,
        kv_dtype: match s.kv_dtype {
            KvDtypeArg::Auto => KvDtype::Auto,
            KvDtypeArg::Fp8 => KvDtype::Fp8,
        },
        weights: weight_format(&s.weights)?,
        tensor_parallel: count("--tp", a.tp)?,
        gpu_bytes: gpu.memory_bytes,
        vllm: vllm::Options {
            block_size: count("--block-size", s.block_size)?,
            gpu_memory_utilization: s.gpu_memory_utilization,
            max_num_batched_tokens: count("--max-num-batched-tokens", s.max_num_batched_tokens)?,
            max_num_seqs: count("--max-num-seqs", s.max_num_seqs)?,
            kv_cache_memory,
            non_torch_bytes,
            ..defaults
        },
    })
}

/// `oomlab estimate --serve` (its flags: [`super::estimate::ServeArgs`]).
pub(super) fn run(a: &EstimateArgs) -> Result<(), Failure> {
    let s = setup(a)?;
    let answer = serve::serve(&s).map_err(|e| usage(e.text(&system_catalog())))?;
    if a.json {
        let report = serde_json::json!({
            "model": s.arch.name,
            "parameters": s.arch.parameters(),
            "gpu_memory_bytes": s.gpu_bytes,
            "context": s.context,
            "concurrency": s.concurrency,
            "kv_dtype": s.kv_dtype,
            "weights": s.weights,
            "tensor_parallel": s.tensor_parallel,
            "layers": s.layers,
            "serve": answer,
        });
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| usage(e.to_string()))?);
    } else {
        print!("{}", text(&s, &answer));
    }
    Ok(())
}

/// The answer as text: the cache's cost, the runtime's layout, the budget, the two answers.
fn text(s: &ServeSetup, a: &serve::Serve) -> String {
    let runtime = match s.runtime {
        ServeRuntime::Vllm => "vLLM (paged blocks)",
        ServeRuntime::Transformers => "transformers DynamicCache",
        ServeRuntime::Static => "transformers StaticCache",
    };
    let requests = |n: u64| format!("{} request{}", group_digits(n), if n == 1 { "" } else { "s" });
    let mut out = format!(
        "{} serving on {} with {runtime}: {} of {} tokens\n",
        s.arch.name,
        format_bytes(s.gpu_bytes),
        requests(s.concurrency),
        group_digits(s.context)
    );
    let windowed = s.layers.iter().filter(|l| l.window().is_some()).count();
    out += &format!(
        "  KV cache per token: {} over {} layers{}\n",
        format_bytes(a.kv_bytes_per_token),
        s.layers.len(),
        if windowed > 0 { format!(" ({windowed} of them keep only a window)") } else { String::new() }
    );
    out += &format!("  weights: {}\n", format_bytes(a.weights_bytes));
    if let Some(peak) = a.activation_peak_bytes {
        out += &format!("  activations (vLLM's profile run, predicted): {}\n", format_bytes(peak));
    }
    out += &format!("  room for the KV cache: {}\n", format_bytes(a.available_kv_bytes));
    out += &format!("  KV cache of the {}: {}\n", requests(s.concurrency), format_bytes(a.kv_cache_bytes));
    if let Some(prefill) = a.kv_cache_prefill_bytes {
        out += &format!("  right after their prompts' forward: {}\n", format_bytes(prefill));
    }
    if let Some(p) = &a.vllm {
        out += &format!(
            "  vLLM: {} blocks of {} tokens ({} a block per layer), {} groups of {} layers{}\n",
            group_digits(p.num_blocks),
            s.vllm.block_size,
            format_bytes(p.page_bytes),
            p.groups.len(),
            p.layers_per_group,
            if p.padding_layers > 0 { format!(", {} padding layers", p.padding_layers) } else { String::new() }
        );
        out += &format!("  GPU KV cache size: {} tokens\n", group_digits(p.tokens));
        out += &format!(
            "  Maximum concurrency for {} tokens per request: {:.2}x\n",
            group_digits(s.context),
            p.max_concurrency
        );
    } else {
        out += &format!("  requests of {} tokens that fit: {:.2}\n", group_digits(s.context), a.max_concurrency);
    }
    let all = requests(s.concurrency);
    let fit = match (a.fits, s.concurrency == 1) {
        (true, true) => "fits",
        (true, false) => "fit",
        (false, true) => "does not fit",
        (false, false) => "do not fit",
    };
    out += &format!(
        "  {all} {fit}; the longest context {} can each hold: {} tokens\n",
        if s.concurrency == 1 { "one request".to_string() } else { all.clone() },
        group_digits(a.longest_context)
    );
    out
}
