//! `oomlab estimate`: the large-model estimator from the command line.

use clap::Args;
use oomlab::estimate::{
    self, Adapters, Architecture, ContextKind, EstimateError, Framework, Mlp, Norm, Offload, Optimizer, Parallel,
    Runtime, Setup, StatePrecision, claims, presets,
};
use oomlab::plan::{AttentionKind, Checkpoint};
use oomlab::units::group_digits;

use super::config::AttentionArg;
use super::config::system_catalog;
use super::estimate_text::{saved_text, text};
use super::{EXIT_USAGE, Failure};

/// Flags of `oomlab estimate`.
#[derive(Args, Debug, Clone)]
pub struct EstimateArgs {
    /// Model preset: gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama2-7b, llama2-13b, llama2-70b,
    /// mistral-7b; a catalog model (llama-3.1-8b, mixtral-8x7b, qwen3-30b-a3b, gemma-2-9b, …:
    /// `oomlab estimate --list-models`); or custom (GPT-2 small's shape, changed with --hidden,
    /// --layers, …); or a Hugging Face config.json, or a folder holding one.
    #[arg(long, default_value = "llama2-7b")]
    pub(super) model: String,
    /// GPU preset (t4, rtx4090, a100-40, a100-80, h100-80, h200) or a size such as 48GiB.
    #[arg(long, default_value = "a100-80")]
    pub(super) gpu: String,
    /// Micro-batch: sequences per forward pass on one GPU.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    batch: i64,
    /// Sequence length; defaults to the model's context (GPT-2 1024, LLaMA-2 4096).
    #[arg(long, allow_hyphen_values = true)]
    seq_len: Option<i64>,
    /// Gradient accumulation: micro-batches per optimizer step.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    accum: i64,
    /// fp32, fp16 or bf16 (mixed, fp32 master weights) or pure-bf16.
    #[arg(long, value_enum, ignore_case = true, default_value_t = StatePrecisionArg::Bf16)]
    precision: StatePrecisionArg,
    /// sgd, momentum or adam.
    #[arg(long, value_enum, ignore_case = true, default_value_t = EstimateOptimizerArg::Adam)]
    optimizer: EstimateOptimizerArg,
    /// ZeRO stage 0–3 over the --gpus data-parallel GPUs.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    zero: i64,
    /// Data-parallel GPUs N_d.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    gpus: i64,
    /// Tensor-parallel GPUs t.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub(super) tp: i64,
    /// Sequence parallelism (with --tp).
    #[arg(long)]
    sp: bool,
    /// The framework whose dtypes the model states are kept in: zero (the ZeRO paper's 16 bytes
    /// per parameter with Adam), pytorch-amp (fp32 model, autocast's 16-bit weight copies),
    /// deepspeed, megatron (fp32 main gradients: 18 bytes; --zero 1 its distributed optimizer)
    /// or fsdp2 (fp32 shards, ZeRO-3).
    #[arg(long, value_enum, ignore_case = true, default_value_t = FrameworkArg::Zero)]
    framework: FrameworkArg,
    /// Expert parallelism: a mixture of experts' experts divided over this many of the --gpus
    /// data-parallel GPUs, which exchange tokens all-to-all.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    ep: i64,
    /// Pipeline parallelism: the layers split over this many stages, one GPU each (the first
    /// holds the embedding, the last the head); the micro-batches in flight follow --accum.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pp: i64,
    /// The pipeline's schedule: 1f1b, or interleaved:V (V chunks of layers per stage).
    #[arg(long, default_value = "1f1b")]
    pp_schedule: String,
    /// Context parallelism: the sequence split over this many GPUs, each holding s/c of the
    /// activations (needs --attention fused).
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    cp: i64,
    /// Count DeepSeek-V3's (GLM-4.5's) multi-token-prediction modules, which its config
    /// describes (num_nextn_predict_layers) but transformers' model leaves out.
    #[arg(long)]
    mtp: bool,
    /// How the context-parallel GPUs attend across the split: ring (RingAttention: key/value
    /// blocks passed around) or ulysses (all-to-all over the heads).
    #[arg(long, value_enum, ignore_case = true, default_value_t = ContextArg::Ring)]
    cp_kind: ContextArg,
    /// off, selective, blocks (full recomputation) or every:K.
    #[arg(long, default_value = "off")]
    checkpoint: String,
    /// standard or fused (FlashAttention).
    #[arg(long, value_enum, ignore_case = true, default_value_t = AttentionArg::Standard)]
    attention: AttentionArg,
    /// Offload to the CPU, a list: optimizer, gradients (with optimizer), params (needs --zero 3),
    /// or all.
    #[arg(long)]
    offload: Option<String>,
    /// LoRA rank R: freeze the base, train rank-R adapters.
    #[arg(long, allow_hyphen_values = true)]
    lora: Option<i64>,
    /// Projections the adapters target: qkv, proj, mlp (a list) or all.
    #[arg(long, default_value = "qkv")]
    lora_targets: String,
    /// QLoRA: store the frozen base's linear weights in 4 bits (with --lora).
    #[arg(long)]
    qlora: bool,
    /// Leave out the CUDA context, cuBLAS workspace, communication buffers and fragmentation.
    #[arg(long)]
    no_fixed_costs: bool,
    /// The runtime profile whose saved tensors are counted: fused (Megatron-style kernels, the
    /// published numbers' convention) or hf-eager (Hugging Face transformers' eager code for
    /// each family it reads, on CUDA). Without it: fused, with hf-eager shown beside it.
    #[arg(long, value_enum, ignore_case = true)]
    pub(super) runtime: Option<RuntimeArg>,
    /// Dropout probability in training (GPT-2 presets 0.1, LLaMA/Mistral 0; 0 also models eval
    /// mode, where dropout keeps nothing).
    #[arg(long, allow_hyphen_values = true)]
    dropout: Option<f64>,
    /// The CUDA context you measured on your GPU, in MiB (replaces the assumed 500 MiB).
    #[arg(long, allow_hyphen_values = true)]
    pub(super) context_mib: Option<f64>,
    /// The fragmentation you measured, reserved minus allocated in % of allocated (replaces the
    /// assumed 5 %).
    #[arg(long, allow_hyphen_values = true)]
    fragmentation_percent: Option<f64>,
    /// Custom architecture: hidden size h.
    #[arg(long, allow_hyphen_values = true)]
    hidden: Option<i64>,
    /// Custom architecture: layers L.
    #[arg(long, allow_hyphen_values = true)]
    layers: Option<i64>,
    /// Custom architecture: attention heads a.
    #[arg(long, allow_hyphen_values = true)]
    heads: Option<i64>,
    /// Custom architecture: key/value heads (grouped-query attention).
    #[arg(long, allow_hyphen_values = true)]
    kv_heads: Option<i64>,
    /// Custom architecture: MLP width f.
    #[arg(long, allow_hyphen_values = true)]
    ffn: Option<i64>,
    /// Custom architecture: vocabulary V.
    #[arg(long, allow_hyphen_values = true)]
    vocab: Option<i64>,
    /// Custom architecture: the learned position table's rows, the longest sequence it takes
    /// (GPT-2 1024; GPT-3 2048); 0 for rotary positions, which have no table.
    #[arg(long, allow_hyphen_values = true)]
    positions: Option<i64>,
    /// Custom architecture: gelu or swiglu.
    #[arg(long, value_enum, ignore_case = true)]
    mlp: Option<MlpArg>,
    /// Custom architecture: layernorm or rmsnorm.
    #[arg(long, value_enum, ignore_case = true)]
    norm: Option<NormArg>,
    /// Also print the peak for micro-batches 1, 2, 4, … up to the largest that fits and beyond.
    #[arg(long)]
    sweep: bool,
    /// Also list one layer's saved tensors by name, with the function that saves each.
    #[arg(long)]
    saved: bool,
    /// List the model presets and the catalog (key, name, parameters, those a token uses) and
    /// stop.
    #[arg(long)]
    list_models: bool,
    /// Machine-readable output on stdout.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) serve: ServeArgs,
}

/// The serving flags of `oomlab estimate` (`--serve`: `estimate_serve.rs`).
#[derive(Args, Debug, Clone)]
pub(super) struct ServeArgs {
    /// Estimate serving instead of training: the weights and the KV cache of --concurrency
    /// requests of --context tokens, laid out as --runtime (vllm, transformers or static) lays
    /// it out.
    #[arg(long)]
    pub(super) serve: bool,
    /// Serving: the tokens one request holds (vLLM's max_model_len); defaults to the model's
    /// context.
    #[arg(long, allow_hyphen_values = true)]
    pub(super) context: Option<i64>,
    /// Serving: requests at once.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub(super) concurrency: i64,
    /// Serving: the cache's element type: auto (the model's, bf16) or fp8 (1 byte).
    #[arg(long, value_enum, ignore_case = true, default_value_t = KvDtypeArg::Auto)]
    pub(super) kv_dtype: KvDtypeArg,
    /// Serving: the weights' format: bf16, fp8, int8, or int4 (int4:G for G weights per scale;
    /// 128 by default).
    #[arg(long, default_value = "bf16")]
    pub(super) weights: String,
    /// vLLM: tokens per block.
    #[arg(long, default_value_t = 16, allow_hyphen_values = true)]
    pub(super) block_size: i64,
    /// vLLM: the share of the GPU's memory it may take.
    #[arg(long, default_value_t = 0.9, allow_hyphen_values = true)]
    pub(super) gpu_memory_utilization: f64,
    /// vLLM: tokens one step may take (its profile run's size).
    #[arg(long, default_value_t = 8192, allow_hyphen_values = true)]
    pub(super) max_num_batched_tokens: i64,
    /// vLLM: the most requests one step may take (its sampler's profile run).
    #[arg(long, default_value_t = 256, allow_hyphen_values = true)]
    pub(super) max_num_seqs: i64,
    /// vLLM: the pool's size, given (e.g. 6.51GiB); vLLM then skips its profiling.
    #[arg(long)]
    pub(super) kv_cache_memory: Option<String>,
}

/// `--kv-dtype`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum KvDtypeArg {
    Auto,
    Fp8,
}

/// `estimate --precision`: the states' precision of a large-model run.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum StatePrecisionArg {
    #[value(alias = "f32")]
    Fp32,
    /// Mixed fp16 (fp32 master weights).
    #[value(alias = "mixed-fp16")]
    Fp16,
    /// Mixed bf16 (fp32 master weights).
    #[value(alias = "mixed-bf16")]
    Bf16,
    #[value(alias = "bf16-pure")]
    PureBf16,
}

/// `estimate --optimizer`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum EstimateOptimizerArg {
    Sgd,
    Momentum,
    #[value(alias = "adamw")]
    Adam,
}

/// `estimate --runtime`: a training profile (fused, hf-eager) or, with `--serve`, how the
/// serving runtime lays out its cache (vllm, transformers, static).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum RuntimeArg {
    Fused,
    #[value(alias = "hf")]
    HfEager,
    Vllm,
    Transformers,
    Static,
}

/// `estimate --framework`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum FrameworkArg {
    Zero,
    #[value(alias = "amp")]
    PytorchAmp,
    Deepspeed,
    Megatron,
    Fsdp2,
}

/// `estimate --mlp`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum MlpArg {
    Gelu,
    Swiglu,
}

/// `estimate --norm`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum NormArg {
    Layernorm,
    Rmsnorm,
}

pub(super) fn usage(message: impl Into<String>) -> Failure {
    Failure { code: EXIT_USAGE, message: message.into() }
}

/// The estimator's refusal, in the system's language (`LANG`, as the claims' text), exit 2.
fn refused(e: &EstimateError) -> Failure {
    usage(e.text(&system_catalog()))
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ContextArg {
    Ring,
    Ulysses,
}

/// `--pp-schedule`: 1f1b or interleaved:V.
fn oomlab_schedule(text: &str) -> Result<oomlab::estimate::pipeline::Schedule, Failure> {
    oomlab::estimate::pipeline::Schedule::parse(text)
        .ok_or_else(|| usage(format!("--pp-schedule takes 1f1b or interleaved:V with V ≥ 2 (got {text:?})")))
}

pub(super) fn positive(name: &str, v: i64) -> Result<u64, Failure> {
    u64::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| usage(format!("{name} must be at least 1 (got {v})")))
}

/// A Hugging Face config.json that `--model` names (a file, or a folder holding one); None when
/// `--model` names no file or folder.
fn config_model(model: &str) -> Result<Option<oomlab::estimate::hf::HfModel>, Failure> {
    let path = std::path::Path::new(model);
    let file = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
    if !path.exists() {
        return Ok(None);
    }
    let too_big = |n: u64| n > oomlab::estimate::hf::MAX_CONFIG_BYTES as u64;
    if std::fs::metadata(&file).is_ok_and(|m| too_big(m.len())) {
        return Err(usage(format!("{}: larger than a config.json", file.display())));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| usage(format!("{}: {e}", file.display())))?;
    // The model's name: its folder's (a Hub snapshot's folder is the model's), else the file's.
    let named = if path.is_dir() { path } else { path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(path) };
    let name = named.file_name().map_or_else(|| model.to_string(), |n| n.to_string_lossy().into_owned());
    let read = oomlab::estimate::hf::from_config(&text, &name);
    read.map(Some).map_err(|e| usage(format!("{}: {}", file.display(), e.text(&system_catalog()))))
}

/// The architecture `--model` and the custom flags give, and the context a config.json says it
/// was trained for (None for a preset).
pub(super) fn architecture(a: &EstimateArgs) -> Result<(Architecture, Option<u64>), Failure> {
    // A catalog model is read like a config.json, its context with it (no catalog key or name
    // is a preset's).
    let config = match config_model(&a.model)? {
        None => oomlab::estimate::catalog::find(&a.model).map(|e| e.model.clone()),
        some => some,
    };
    let trained = config.as_ref().map(|m| m.context);
    let mtp = config.as_ref().map_or(0, |m| m.mtp);
    if a.mtp && mtp == 0 {
        return Err(usage(format!(
            "--mtp: {} has no multi-token-prediction module (its config has no num_nextn_predict_layers)",
            a.model
        )));
    }
    let mut arch = if let Some(mut m) = config {
        if a.mtp {
            m.arch.block.mtp = mtp;
        }
        m.arch
    } else if a.model.eq_ignore_ascii_case("custom") {
        let mut g = presets::model("gpt2").ok_or_else(|| usage("no gpt2 preset"))?;
        g.name = "custom".into();
        g
    } else {
        presets::model(&a.model).ok_or_else(|| {
            let keys: Vec<_> = presets::models().into_iter().map(|(k, _)| k).collect();
            usage(format!("unknown model {:?}: expected one of {} or custom", a.model, keys.join(", ")))
        })?
    };
    let customised = [a.hidden, a.layers, a.heads, a.kv_heads, a.ffn, a.vocab, a.positions].iter().any(Option::is_some)
        || a.mlp.is_some()
        || a.norm.is_some()
        || a.dropout.is_some_and(|p| p != arch.dropout);
    if let Some(p) = a.dropout {
        arch.dropout = p;
    }
    if let Some(h) = a.hidden {
        let old = arch.hidden;
        arch.hidden = positive("--hidden", h)?;
        if a.ffn.is_none() {
            arch.ffn = arch.ffn * arch.hidden / old;
        }
    }
    if let Some(v) = a.layers {
        arch.layers = positive("--layers", v)?;
    }
    if let Some(v) = a.heads {
        arch.heads = positive("--heads", v)?;
        if a.kv_heads.is_none() {
            arch.kv_heads = arch.heads;
        }
    }
    if let Some(v) = a.kv_heads {
        arch.kv_heads = positive("--kv-heads", v)?;
    }
    if let Some(v) = a.ffn {
        arch.ffn = positive("--ffn", v)?;
    }
    if let Some(v) = a.vocab {
        arch.vocab = positive("--vocab", v)?;
    }
    if let Some(v) = a.positions {
        arch.positions = u64::try_from(v).map_err(|_| usage(format!("--positions must be 0 or more (got {v})")))?;
    }
    if let Some(m) = a.mlp {
        arch.mlp = match m {
            MlpArg::Gelu => Mlp::Gelu,
            MlpArg::Swiglu => Mlp::SwiGlu,
        };
    }
    if let Some(n) = a.norm {
        arch.norm = match n {
            NormArg::Layernorm => Norm::LayerNorm,
            NormArg::Rmsnorm => Norm::RmsNorm,
        };
    }
    if customised && !arch.name.starts_with("custom") {
        arch.name = format!("{} (customised)", arch.name);
    }
    Ok((arch, trained))
}

fn setup(a: &EstimateArgs) -> Result<Setup, Failure> {
    let (arch, trained) = architecture(a)?;
    let gpu = presets::gpu(&a.gpu).ok_or_else(|| {
        let keys: Vec<_> = presets::gpus().into_iter().map(|(k, _)| k).collect();
        usage(format!("unknown GPU {:?}: expected one of {} or a size such as 48GiB", a.gpu, keys.join(", ")))
    })?;
    // A config's context (RoPE models train at up to 128k): the default sequence is at most 4096.
    let context = trained.map(|c| c.min(4096)).unwrap_or(if arch.positions > 0 { arch.positions } else { 4096 });
    let seq = match a.seq_len {
        Some(s) => positive("--seq-len", s)?,
        None => context,
    };
    let layers = arch.layers as usize;
    let mut s = Setup::new(arch, gpu, positive("--batch", a.batch)?, seq);
    s.accum = positive("--accum", a.accum)?;
    s.precision = match a.precision {
        StatePrecisionArg::Fp32 => StatePrecision::Fp32,
        StatePrecisionArg::Fp16 => StatePrecision::MixedFp16,
        StatePrecisionArg::Bf16 => StatePrecision::MixedBf16,
        StatePrecisionArg::PureBf16 => StatePrecision::PureBf16,
    };
    s.optimizer = match a.optimizer {
        EstimateOptimizerArg::Sgd => Optimizer::Sgd,
        EstimateOptimizerArg::Momentum => Optimizer::Momentum,
        EstimateOptimizerArg::Adam => Optimizer::Adam,
    };
    // Checkpointing's `every:K` is checked against the model's layers, known only here.
    s.checkpoint = Checkpoint::parse(&a.checkpoint, layers).map_err(|e| usage(e.to_string()))?;
    s.attention = match a.attention {
        AttentionArg::Standard => AttentionKind::Standard,
        AttentionArg::Fused => AttentionKind::Fused,
    };
    let zero = u8::try_from(a.zero).map_err(|_| usage(format!("--zero takes 0, 1, 2 or 3 (got {})", a.zero)))?;
    s.parallel = Parallel {
        data: positive("--gpus", a.gpus)?,
        tensor: positive("--tp", a.tp)?,
        sequence: a.sp,
        zero,
        expert: positive("--ep", a.ep)?,
        pipeline: positive("--pp", a.pp)?,
        schedule: oomlab_schedule(&a.pp_schedule)?,
        context: positive("--cp", a.cp)?,
        context_kind: match a.cp_kind {
            ContextArg::Ring => ContextKind::Ring,
            ContextArg::Ulysses => ContextKind::Ulysses,
        },
    };
    s.framework = match a.framework {
        FrameworkArg::Zero => Framework::Zero,
        FrameworkArg::PytorchAmp => Framework::PytorchAmp,
        FrameworkArg::Deepspeed => Framework::Deepspeed,
        FrameworkArg::Megatron => Framework::Megatron,
        FrameworkArg::Fsdp2 => Framework::Fsdp2,
    };
    // FSDP2 shards everything: it is ZeRO-3 (unless asked otherwise, refused by the setup).
    if s.framework == Framework::Fsdp2 && a.zero == 0 {
        s.parallel.zero = 3;
    }
    s.offload = Offload::default();
    for part in a.offload.as_deref().unwrap_or("none").split(',').map(|p| p.trim().to_ascii_lowercase()) {
        match part.as_str() {
            "none" => {}
            "optimizer" => s.offload.optimizer = true,
            "gradients" | "grads" => s.offload.gradients = true,
            "params" | "parameters" => s.offload.parameters = true,
            "all" => s.offload = Offload { optimizer: true, gradients: true, parameters: true },
            other => {
                return Err(usage(format!(
                    "unknown offload {other:?}: expected a list of optimizer, gradients, params, or all"
                )));
            }
        }
    }
    if let Some(r) = a.lora {
        let targets = oomlab::model::params::LoraConfig::new(1)
            .with_targets(&a.lora_targets)
            .map_err(|e| usage(e.to_string()))?;
        s.lora = Some(Adapters {
            rank: positive("--lora", r)?,
            qkv: targets.qkv,
            proj: targets.proj,
            mlp: targets.mlp,
            quantized: a.qlora,
        });
    } else if a.qlora {
        return Err(usage("--qlora needs --lora R (the adapters' rank)"));
    }
    s.fixed_costs = !a.no_fixed_costs;
    s.runtime = match a.runtime {
        None => None,
        Some(RuntimeArg::Fused) => Some(Runtime::Fused),
        Some(RuntimeArg::HfEager) => Some(Runtime::HfEager),
        Some(other) => {
            return Err(usage(format!(
                "--runtime {other:?} is a serving runtime: add --serve, or train with fused or hf-eager"
            )));
        }
    };
    if let Some(mib) = a.context_mib {
        if !(0.0..=(1u64 << 20) as f64).contains(&mib) {
            return Err(usage(format!("--context-mib must be between 0 and {} (got {mib})", 1u64 << 20)));
        }
        s.measured.context_bytes = Some((mib * (1u64 << 20) as f64) as u64);
    }
    s.measured.fragmentation_percent = a.fragmentation_percent;
    s.validate().map_err(|e| refused(&e))?;
    Ok(s)
}

/// `oomlab claims`: each claim, whether it holds, what the estimator computes, the verdict's test.
/// The text follows the system's language (`LANG=zh_CN.UTF-8`: Simplified Chinese, from the same
/// catalogs as the app); the JSON is always English, its keys never change.
pub fn claims_command(json: bool) -> Result<(), Failure> {
    use oomlab::estimate::claims::Part;
    let list = claims::claims().map_err(|e| refused(&e))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list).map_err(|e| usage(e.to_string()))?);
    } else {
        let t = system_catalog();
        for c in list {
            let verdict = t.text(if c.holds { "claim-holds" } else { "claim-breaks" });
            let (claim, source) = (c.text(&t, Part::Claim), c.text(&t, Part::Source));
            let test = t.format("claim-verdict", &[("test", c.text(&t, Part::Test).into())]);
            println!("• {claim} — {verdict}\n  ({source})\n  {}\n  {test}\n", c.text(&t, Part::Finding));
        }
    }
    Ok(())
}

pub fn run(a: &EstimateArgs) -> Result<(), Failure> {
    if a.list_models {
        print!("{}", model_list(a.json).map_err(|e| usage(e.to_string()))?);
        return Ok(());
    }
    let s = setup(a)?;
    let e = estimate::estimate(&s).map_err(|e| refused(&e))?;
    let max = estimate::max_micro_batch(&s).map_err(|e| refused(&e))?;
    let sweep =
        if a.sweep { estimate::sweep(&s, &estimate::sweep_batches(max)).map_err(|e| refused(&e))? } else { Vec::new() };
    if a.json {
        let report = estimate::EstimateReport::new(&s, &e, max, &sweep);
        println!("{}", serde_json::to_string_pretty(&report.to_json()).map_err(|e| usage(e.to_string()))?);
    } else {
        print!("{}", text(&s, &e, max, &sweep));
        if a.saved {
            print!("{}", saved_text(&s));
        }
    }
    Ok(())
}

/// The presets and the catalog: key, name, parameters and active parameters (a mixture's,
/// per token), as text or as a JSON list.
fn model_list(json: bool) -> Result<String, serde_json::Error> {
    let models = presets::models();
    if json {
        let list: Vec<_> = models
            .iter()
            .map(|(key, a)| {
                serde_json::json!({
                    "key": key,
                    "name": a.name,
                    "parameters": a.parameters(),
                    "active_parameters": a.active_parameters(),
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&list)? + "\n");
    }
    let mut out = String::new();
    for (key, a) in &models {
        let active = if a.active_parameters() == a.parameters() {
            String::new()
        } else {
            format!(" ({} active per token)", group_digits(a.active_parameters()))
        };
        out += &format!("{key:<20} {:<20} {:>17} parameters{active}\n", a.name, group_digits(a.parameters()));
    }
    Ok(out)
}
