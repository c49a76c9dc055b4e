//! `oomlab serving`: the toy serves a stream of requests with a real KV cache, in one of three
//! layouts, and reports what the cache held and wasted.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use oomlab::backend::{BackendKind, Gpu};
use oomlab::data::Dataset;
use oomlab::dump::{Generation, GenerationDump};
use oomlab::model::ParamLayout;
use oomlab::model::init::init_params;
use oomlab::serving::{Layout, Report, ServingConfig, requests, run_requests};
use oomlab::units::{format_bytes, group_digits};

use super::config::{BackendArg, count, system_catalog};
use super::{EXIT_OOM, Failure};

/// Flags of `oomlab serving`.
#[derive(Args, Debug, Clone)]
pub struct ServingArgs {
    /// How the KV cache is laid out: contiguous (each request reserves the whole context when
    /// it is admitted), growing (a tensor one token longer at every step, through the caching
    /// allocator, as transformers' DynamicCache) or paged (vLLM's pool of fixed blocks).
    #[arg(long, value_enum, ignore_case = true, default_value_t = LayoutArg::Paged)]
    layout: LayoutArg,
    /// Tokens per block (paged; contiguous rows are whole blocks too).
    #[arg(long, default_value_t = oomlab::serving::BLOCK_SIZE, value_parser = count, allow_hyphen_values = true)]
    block_size: usize,
    /// Requests in the stream, all arriving at once.
    #[arg(long, default_value_t = oomlab::serving::REQUESTS, value_parser = count, allow_hyphen_values = true)]
    requests: usize,
    /// The virtual GPU's memory (weights, activations and the cache together).
    #[arg(long, value_parser = oomlab::units::parse_bytes, default_value = "32MiB")]
    budget: u64,
    /// The cache's bytes, at most what the budget leaves (vLLM's kv_cache_memory_bytes).
    #[arg(long, value_parser = oomlab::units::parse_bytes)]
    kv_cache_memory: Option<u64>,
    /// The toy's context: the longest request, prompt and output.
    #[arg(long, default_value_t = oomlab::serving::CONTEXT, value_parser = count, allow_hyphen_values = true)]
    context: usize,
    /// The most requests running at once (vLLM's max_num_seqs).
    #[arg(long, default_value_t = oomlab::serving::MAX_NUM_SEQS, value_parser = count, allow_hyphen_values = true)]
    max_num_seqs: usize,
    #[arg(long, value_enum, ignore_case = true, default_value_t = BackendArg::Cpu)]
    backend: BackendArg,
    /// Seeds the requests' draw and the weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also write the weights as dump-step does, and generations.json (each request's prompt
    /// and tokens), for scripts/check_generate.py.
    #[arg(long)]
    dump: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LayoutArg {
    Contiguous,
    Growing,
    Paged,
}

/// Runs `oomlab serving`.
pub(super) fn run(args: &ServingArgs) -> Result<(), Failure> {
    let data = Dataset::builtin();
    let vocab = data.tokenizer.vocab_size();
    let mut cfg = ServingConfig::new(vocab);
    cfg.model.seq_len = args.context;
    cfg.layout = match args.layout {
        LayoutArg::Contiguous => Layout::Contiguous,
        LayoutArg::Growing => Layout::Growing,
        LayoutArg::Paged => Layout::Paged,
    };
    (cfg.block_size, cfg.requests, cfg.budget, cfg.seed) = (args.block_size, args.requests, args.budget, args.seed);
    (cfg.max_num_seqs, cfg.kv_cache_bytes) = (args.max_num_seqs, args.kv_cache_memory);
    let kind = args.backend.kind();
    cfg.validate().map_err(refusal)?;
    let gpu = match kind {
        BackendKind::Gpu => Some(Gpu::open_headless()?),
        BackendKind::Cpu => None,
    };
    let reqs = requests::draw(&data, cfg.requests, cfg.model.seq_len, cfg.seed);
    let params = init_params(&ParamLayout::new(&cfg.model), cfg.seed);
    let report =
        pollster::block_on(run_requests(&cfg, kind, gpu.as_ref(), reqs.clone(), Some(&params))).map_err(refusal)?;
    if let Some(dir) = &args.dump {
        let generations: Vec<Generation> = reqs
            .iter()
            .zip(&report.requests)
            .map(|(r, s)| Generation { prompt: r.prompt.clone(), tokens: s.tokens.clone() })
            .collect();
        let layout = ParamLayout::new(&cfg.model);
        let dump = GenerationDump { model: &cfg.model, layout: &layout, params: &params, generations: &generations };
        dump.write(dir).map_err(|e| Failure { code: super::EXIT_FAILURE, message: e.to_string() })?;
    }
    if args.json {
        let mut doc = serde_json::to_value(&report).map_err(|e| Failure { code: 1, message: e.to_string() })?;
        // The setup is the plan's prediction; the cache's figures are what its allocator held as
        // the run went (the caching allocator's segments for a growing cache, the rows or the
        // block pool otherwise); the step's peak is the executor's caching allocator's.
        doc["sources"] = serde_json::json!({
            "setup": "predicted",
            "kv": "allocator",
            "step_peak_allocated_bytes": "allocator",
        });
        println!("{doc}");
    } else {
        print!("{}", text(&report, &cfg));
    }
    match &report.oom {
        Some(oom) => Err(Failure { code: EXIT_OOM, message: oom.clone() }),
        None => Ok(()),
    }
}

/// A refusal or a backend's failure, in the system's language, exit 2 (a backend's own: 1).
fn refusal(e: oomlab::serving::ServingError) -> Failure {
    match e {
        oomlab::serving::ServingError::Backend(b) => b.into(),
        e => Failure { code: super::EXIT_USAGE, message: e.text(&system_catalog()) },
    }
}

/// The report as text.
fn text(r: &Report, cfg: &ServingConfig) -> String {
    let s = &r.setup;
    let b = format_bytes;
    let n = |x: u64| group_digits(x);
    let k = &r.waste_at_peak;
    let served = r.requests.iter().filter(|s| !s.refused).count();
    let tokens: usize = r.requests.iter().map(|s| s.tokens.len()).sum();
    let layout = match r.layout {
        Layout::Paged => format!("paged (blocks of {} tokens)", r.block_size),
        Layout::Contiguous => format!("contiguous (a row of {} tokens each)", cfg.model.seq_len),
        Layout::Growing => "growing (torch.cat through the caching allocator)".to_string(),
    };
    let mut out = format!(
        "oomlab serving: {} requests, the toy (d {}, {} layers, context {}), {layout} cache, on the {}\n",
        cfg.requests, cfg.model.d_model, cfg.model.n_layers, cfg.model.seq_len, r.backend
    );
    out += &format!(
        "budget {}: weights {}, the largest step's activations {} (predicted), KV cache {} = {} tokens of {} bytes\n",
        b(s.budget_bytes),
        b(s.weights_bytes),
        b(s.activation_peak_bytes),
        b(s.kv_pool_bytes),
        n(s.capacity_tokens),
        n(r.kv_bytes_per_token)
    );
    out += &format!(
        "served {served} requests, {} tokens (greedy) in {} forward passes; at most {} at once; {} preemptions (recomputed)\n",
        n(tokens as u64),
        n(r.forward_passes),
        r.peak_concurrent,
        n(r.preemptions)
    );
    out += &format!(
        "KV cache at its peak: {} reserved, {} holding tokens; reservation {}, internal fragmentation {}, external fragmentation {}\n",
        b(r.kv_reserved_peak_bytes),
        b(r.kv_used_at_peak_bytes),
        b(k.reservation),
        b(k.internal_fragmentation),
        b(k.external_fragmentation)
    );
    out += &format!(
        "over the run, {:.1} % of what the cache reserved held no token; the largest step peaked at {} (allocator)\n",
        100.0 * r.waste_fraction,
        b(r.step_peak_allocated_bytes)
    );
    if let Some(oom) = &r.oom {
        out += &format!("out of memory: {oom}\n");
    }
    out
}
