//! The flags every subcommand shares, resolved into a configuration; failures and their exit codes; the backends.

use super::*;

/// Flags every subcommand shares.
#[derive(Args, Debug, Clone)]
pub(super) struct ConfigArgs {
    /// Sequence length T of a step.
    #[arg(long, default_value_t = 64, value_parser = count, allow_hyphen_values = true)]
    seq_len: usize,
    /// The model's maximum sequence length (position embeddings); defaults to --seq-len.
    #[arg(long, value_parser = count, allow_hyphen_values = true)]
    max_seq_len: Option<usize>,
    #[arg(long, default_value_t = 64, value_parser = count, allow_hyphen_values = true)]
    d_model: usize,
    #[arg(long, default_value_t = 2, value_parser = count, allow_hyphen_values = true)]
    layers: usize,
    #[arg(long, default_value_t = 4, value_parser = count, allow_hyphen_values = true)]
    heads: usize,
    /// Batch size B (sequences per optimizer step; 16 by default); `sweep` also takes a range,
    /// `1..512` (every batch), `1..512:8` (every 8th) or a list, `1,2,4,8`. With --accum K each
    /// batch is split into K micro-batches of B/K.
    #[arg(long)]
    #[arg(allow_hyphen_values = true)]
    batch: Option<String>,
    /// Micro-batch size M (sequences per forward pass) for gradient accumulation: the step runs
    /// --accum K micro-batches, an effective batch of M·K. Takes ranges like --batch in `sweep`.
    #[arg(long)]
    #[arg(allow_hyphen_values = true)]
    micro_batch: Option<String>,
    /// Gradient accumulation: micro-batches per optimizer step.
    #[arg(long, default_value_t = 1, value_parser = count, allow_hyphen_values = true)]
    accum: usize,
    /// Activation checkpointing: off, blocks (every block), every:K (a checkpoint every K
    /// blocks; `every` alone takes √L) or selective (recompute only the attention core).
    #[arg(long, value_parser = checkpoint_flag, default_value = "off")]
    checkpoint: CheckpointFlag,
    /// Attention: standard (saves the T×T probabilities) or fused (FlashAttention-style).
    #[arg(long, value_enum, ignore_case = true, default_value_t = AttentionArg::Standard)]
    attention: AttentionArg,
    /// Numeric precision: fp32, fp16 (mixed, with dynamic loss scaling) or bf16 (mixed).
    #[arg(long, value_enum, ignore_case = true, default_value_t = PrecisionArg::Fp32)]
    precision: PrecisionArg,
    /// LoRA rank R: freeze the base weights and train rank-R adapters on --lora-targets.
    #[arg(long, value_parser = count, allow_hyphen_values = true)]
    lora: Option<usize>,
    /// LoRA's alpha (the adapters are scaled by alpha/R); defaults to R.
    #[arg(long, allow_hyphen_values = true)]
    lora_alpha: Option<f32>,
    /// Projections LoRA adapts: a list of qkv, proj (attention output), mlp (c_fc and c_proj),
    /// or all.
    #[arg(long, value_enum, ignore_case = true, value_delimiter = ',', default_value = "qkv")]
    lora_targets: Vec<LoraTargetArg>,
    /// The virtual GPU's memory: a preset (32MiB, 64MiB, 256MiB, 1GiB) or any size.
    #[arg(long, value_parser = oomlab::units::parse_bytes, default_value = "1GiB")]
    budget: u64,
    /// The caching allocator's options, written as PyTorch's PYTORCH_CUDA_ALLOC_CONF:
    /// expandable_segments:True, max_split_size_mb:N (N > 20), garbage_collection_threshold:T
    /// (0 < T < 1, a share of --budget), comma-separated.
    #[arg(long, value_parser = oomlab::plan::AllocatorConfig::parse, default_value = "", hide_default_value = true)]
    alloc_conf: oomlab::plan::AllocatorConfig,
    /// Data parallelism over N simulated GPUs (1 to 8): each rank has its own --budget, its own
    /// allocator and --batch sequences of its own (the global batch is N times --batch); the
    /// gradients are reduced through real buffers. Simulated, unlike a real cluster: the ranks
    /// take turns on this one device (or the CPU), and no network exists.
    #[arg(long, default_value_t = 1, value_parser = count, allow_hyphen_values = true)]
    gpus: usize,
    /// ZeRO stage over --gpus: 0 (plain data parallelism, DDP), 1 (shards the optimizer state
    /// and master weights), 2 (and the gradients), 3 (and the parameters).
    #[arg(long, default_value_t = 0)]
    zero: u8,
    /// The communication bucket the gradient reductions pass through, in elements (a multiple
    /// of 128; PyTorch DDP's 25 MB and DeepSpeed's 5e8 elements, scaled to the toy).
    #[arg(long, default_value_t = oomlab::plan::parallel::DEFAULT_BUCKET_ELEMS)]
    bucket: u64,
    /// Offload to host memory (ZeRO-Offload): none, optimizer (the optimizer's states live in
    /// host memory and the optimizer step runs on the CPU; the gradients go down and the updated
    /// parameters come up every step) or optimizer+gradients (each layer's gradients go down as
    /// soon as the backward pass made them). Simulated: host and device share this machine.
    #[arg(long, value_parser = oomlab::plan::Offload::parse, default_value = "none")]
    offload: oomlab::plan::Offload,
    /// How the batch is made from the corpus: windows (random windows of --seq-len tokens, every
    /// position a real token), or its speeches as documents: padded (each row one document,
    /// padded to the batch's longest), bucketed (documents of similar lengths together) or packed
    /// (documents one after another in full rows, attention masked at each document's start).
    #[arg(long, value_parser = oomlab::plan::Batching::parse, default_value = "windows")]
    batching: oomlab::plan::Batching,
    /// Vocabulary size; defaults to the built-in corpus's character count.
    #[arg(long, value_parser = count, allow_hyphen_values = true)]
    vocab: Option<usize>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where steps run.
    #[arg(long, value_enum, ignore_case = true, default_value_t = BackendArg::Gpu)]
    backend: BackendArg,
    /// The optimizer.
    #[arg(long, value_enum, ignore_case = true, default_value_t = OptimizerArg::Adamw)]
    optimizer: OptimizerArg,
    /// Learning rate (default: 3e-3 for AdamW, 0.1 for SGD).
    #[arg(long, allow_hyphen_values = true)]
    lr: Option<f32>,
    /// Machine-readable output on stdout.
    #[arg(long)]
    json: bool,
}

/// `--backend`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum BackendArg {
    Gpu,
    Cpu,
}

impl BackendArg {
    pub(super) fn kind(self) -> BackendKind {
        match self {
            BackendArg::Gpu => BackendKind::Gpu,
            BackendArg::Cpu => BackendKind::Cpu,
        }
    }
}

/// `--precision`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum PrecisionArg {
    #[value(alias = "f32", alias = "float32")]
    Fp32,
    #[value(alias = "f16", alias = "float16", alias = "half")]
    Fp16,
    #[value(alias = "bfloat16")]
    Bf16,
}

/// `--attention`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum AttentionArg {
    #[value(alias = "eager")]
    Standard,
    #[value(alias = "flash")]
    Fused,
}

/// `--optimizer`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum OptimizerArg {
    #[value(alias = "adam")]
    Adamw,
    Momentum,
    Sgd,
}

/// One of `--lora-targets`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LoraTargetArg {
    #[value(alias = "c_attn")]
    Qkv,
    #[value(alias = "output", alias = "o", alias = "c_proj")]
    Proj,
    #[value(alias = "ffn")]
    Mlp,
    All,
}

/// Why a count flag was refused (exit 2).
#[derive(Debug, thiserror::Error)]
pub(super) enum CountError {
    #[error("{0:?} is not a whole number")]
    NotANumber(String),
    #[error("must be at least 1 (got {0})")]
    BelowOne(i64),
    #[error("{0} is absurdly large (the limit is {max})", max = oomlab::model::MAX_DIM)]
    TooLarge(i64),
}

/// A count flag (`--layers 4`): at least 1 and at most [`oomlab::model::MAX_DIM`]; a negative,
/// zero or absurd number is a clear error (exit 2), never a wrap.
pub(super) fn count(text: &str) -> Result<usize, CountError> {
    let v: i64 = text.trim().parse().map_err(|_| CountError::NotANumber(text.to_string()))?;
    if v < 1 {
        return Err(CountError::BelowOne(v));
    }
    if v > oomlab::model::MAX_DIM as i64 {
        return Err(CountError::TooLarge(v));
    }
    Ok(v as usize)
}

/// `--checkpoint`: a mode, or `every` alone, whose segment length (√L) needs the model's layers.
#[derive(Clone, Copy, Debug)]
pub(super) enum CheckpointFlag {
    Mode(Checkpoint),
    EveryDefault,
}

/// Parses `--checkpoint` (off, blocks, every, every:K, selective) when the flags are read.
pub(super) fn checkpoint_flag(text: &str) -> Result<CheckpointFlag, ConfigError> {
    if text.trim().eq_ignore_ascii_case("every") {
        return Ok(CheckpointFlag::EveryDefault);
    }
    // The layers matter only for `every` alone, handled above.
    Checkpoint::parse(text, 1).map(CheckpointFlag::Mode)
}

/// A failure with the exit code it maps to.
pub(super) struct Failure {
    pub(super) code: i32,
    pub(super) message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The catalog of the system's language (`LANG`, `LC_ALL`, `LC_MESSAGES`): the CLI words its
/// errors and its claims in it; its reports and JSON stay English (a script reads them).
pub(super) fn system_catalog() -> oomlab::i18n::Catalog {
    use oomlab::i18n::{Catalog, Lang};
    Catalog::new(Lang::from_env().unwrap_or_default())
}

/// "cannot write PATH: why", in the system's language (the system's words for why).
pub(super) fn cannot_write(path: &std::path::Path, e: &std::io::Error) -> String {
    system_catalog()
        .format_text("export-cannot-write", &[("path", path.display().to_string()), ("error", e.to_string())])
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Self { code: EXIT_USAGE, message: e.text(&system_catalog()) }
    }
}

impl From<BackendError> for Failure {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::Config(c) => c.into(),
            // PyTorch's words, as PyTorch prints them whatever the locale.
            BackendError::OutOfMemory(oom) => Self { code: EXIT_OOM, message: oom.message },
            // The host's memory ran out (or would have): an out-of-memory too, of the CPU.
            BackendError::HostMemory(h) => Self { code: EXIT_OOM, message: h.text(&system_catalog()) },
            other => Self { code: EXIT_FAILURE, message: other.text(&system_catalog()) },
        }
    }
}

impl From<oomlab::backend::gpu::GpuError> for Failure {
    fn from(e: oomlab::backend::gpu::GpuError) -> Self {
        BackendError::from(e).into()
    }
}

/// What the flags ask for: the step, validated once, and how to run it.
#[derive(Clone)]
pub(super) struct Resolved {
    /// The step (for `sweep`, at the first batch size the flags name).
    pub(super) request: ValidRequest,
    pub(super) backend: BackendKind,
    pub(super) seed: u64,
    pub(super) json: bool,
    /// The virtual GPU's memory (`--budget`): the CLI always has one.
    pub(super) budget_bytes: u64,
    /// Every batch the flags name (one, except for sweeps), in its three senses.
    pub(super) batches: Vec<Batches>,
    /// `--seq-len`: the longest a batch of documents may be.
    pub(super) seq_cap: usize,
}

impl Resolved {
    pub(super) fn model(&self) -> &ModelConfig {
        self.request.model()
    }
    /// The shape of one forward pass (the micro-batch with accumulation).
    pub(super) fn shape(&self) -> StepShape {
        self.request.micro_shape()
    }
    /// The batch one step consumes (micro-batch × accumulation).
    pub(super) fn batch_shape(&self) -> StepShape {
        self.request.batch_shape()
    }
    /// The batch of data one step reads: every simulated GPU's share.
    pub(super) fn global_batch_shape(&self) -> StepShape {
        self.request.global_batch_shape()
    }
    pub(super) fn techniques(&self) -> &Techniques {
        self.request.techniques()
    }
    pub(super) fn optimizer(&self) -> &OptimizerConfig {
        self.request.optimizer()
    }
    pub(super) fn budget(&self) -> Budget {
        Budget::Bytes(self.budget_bytes)
    }
    pub(super) fn plan(&self) -> Plan {
        self.request.plan()
    }
    /// The same run with another step (`compare`'s variants, `bench`'s larger config, one batch
    /// of a sweep), validated.
    pub(super) fn with(&self, request: StepRequest) -> Result<Resolved, ConfigError> {
        let request = request.validate()?;
        Ok(Resolved { batches: vec![request.batches()], request, ..self.clone() })
    }
    /// Batch `index` of the run's stream (its documents' own length when they vary).
    pub(super) fn batch(&self, dataset: &Dataset, index: u64) -> Result<oomlab::data::Batch, ConfigError> {
        let batching = self.techniques().batching;
        oomlab::documents::batch_for(dataset, batching, self.global_batch_shape(), self.seq_cap, self.seed, index)
    }
    /// The same run at another sequence length (a batch of documents of another length).
    pub(super) fn at_seq(&self, seq: usize) -> Result<Resolved, ConfigError> {
        let r = *self.request.request();
        self.with(StepRequest { micro: StepShape { batch: r.micro.batch, seq }, ..r })
    }
    /// Refuses a run whose batches vary in length, for commands that time one shape.
    pub(super) fn one_length(&self) -> Result<(), FlagError> {
        let b = self.techniques().batching;
        if b.varies_in_length() { Err(FlagError::VariableLength(b.name())) } else { Ok(()) }
    }
    /// The step at micro-batch `micro`, the rest as it is.
    pub(super) fn at_micro(&self, micro: usize) -> Result<Resolved, ConfigError> {
        let r = *self.request.request();
        self.with(StepRequest { micro: StepShape { batch: micro, seq: r.micro.seq }, ..r })
    }
}

/// A flag the CLI cannot read (the model, techniques and shape are [`ConfigError`]s), worded
/// by the catalogs (`cli-err-…`) in the system's language.
#[derive(Debug)]
pub(super) enum FlagError {
    BatchSyntax(String),
    EmptyRange(String),
    TooManyBatches { text: String, count: usize },
    BatchDisagrees { batch: String, micro: String, accum: usize },
    SeveralBatches,
    DumpWithLora,
    VariableLength(&'static str),
    Config(ConfigError),
}

impl From<ConfigError> for FlagError {
    fn from(e: ConfigError) -> Self {
        FlagError::Config(e)
    }
}

impl FlagError {
    /// The error in `t`'s language.
    pub(super) fn text(&self, t: &oomlab::i18n::Catalog) -> String {
        let (key, args): (&str, Vec<(&'static str, String)>) = match self {
            FlagError::BatchSyntax(text) => ("cli-err-batch-syntax", vec![("text", format!("{text:?}"))]),
            FlagError::EmptyRange(text) => ("cli-err-empty-range", vec![("text", text.clone())]),
            FlagError::TooManyBatches { text, count } => {
                ("cli-err-too-many-batches", vec![("text", text.clone()), ("count", count.to_string())])
            }
            FlagError::BatchDisagrees { batch, micro, accum } => (
                "cli-err-batch-disagrees",
                vec![("batch", batch.clone()), ("micro", micro.clone()), ("accum", accum.to_string())],
            ),
            FlagError::SeveralBatches => ("cli-err-several-batches", vec![]),
            FlagError::DumpWithLora => ("cli-err-dump-lora", vec![]),
            FlagError::VariableLength(batching) => {
                ("cli-err-variable-length", vec![("batching", batching.to_string())])
            }
            FlagError::Config(e) => return e.text(t),
        };
        t.format_text(key, &args)
    }
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&oomlab::i18n::with_english(|en| self.text(en)))
    }
}

impl From<FlagError> for Failure {
    fn from(e: FlagError) -> Self {
        Self { code: EXIT_USAGE, message: e.text(&system_catalog()) }
    }
}

impl ConfigArgs {
    pub(super) fn resolve(&self, dataset: &Dataset) -> Result<Resolved, Failure> {
        let seq = self.seq_len;
        let max_seq = self.max_seq_len.unwrap_or(seq);
        let vocab = self.vocab.unwrap_or_else(|| dataset.tokenizer.vocab_size());
        let model =
            ModelConfig { vocab, seq_len: max_seq, d_model: self.d_model, n_layers: self.layers, n_heads: self.heads };
        let accum = self.accum;
        let techniques = Techniques {
            checkpoint: match self.checkpoint {
                CheckpointFlag::Mode(c) => c,
                CheckpointFlag::EveryDefault => Checkpoint::Every(Checkpoint::default_every(model.n_layers)),
            },
            attention: match self.attention {
                AttentionArg::Standard => AttentionKind::Standard,
                AttentionArg::Fused => AttentionKind::Fused,
            },
            accum,
            allocator: self.alloc_conf,
            parallel: oomlab::plan::Parallel { gpus: self.gpus, zero: self.zero, bucket_elems: self.bucket },
            offload: self.offload,
            batching: self.batching,
            precision: match self.precision {
                PrecisionArg::Fp32 => Precision::Fp32,
                PrecisionArg::Fp16 => Precision::Fp16,
                PrecisionArg::Bf16 => Precision::Bf16,
            },
            lora: self.lora.map(|rank| {
                let mut l = LoraConfig::new(rank);
                let all = self.lora_targets.contains(&LoraTargetArg::All);
                let has = |t: LoraTargetArg| all || self.lora_targets.contains(&t);
                (l.qkv, l.proj, l.mlp) = (has(LoraTargetArg::Qkv), has(LoraTargetArg::Proj), has(LoraTargetArg::Mlp));
                l.alpha = self.lora_alpha.unwrap_or(rank as f32);
                l
            }),
        };
        let kind = match self.optimizer {
            OptimizerArg::Adamw => OptimizerKind::AdamW,
            OptimizerArg::Momentum => OptimizerKind::Momentum,
            OptimizerArg::Sgd => OptimizerKind::Sgd,
        };
        let mut optimizer = match kind {
            OptimizerKind::AdamW => OptimizerConfig::default(),
            _ => OptimizerConfig { kind, ..OptimizerConfig::sgd_momentum(0.1, 0.9) },
        };
        if let Some(lr) = self.lr {
            optimizer.lr = lr;
        }
        let batches =
            flag_batches(self.batch.as_deref(), self.micro_batch.as_deref(), accum, techniques.parallel.gpus)?;
        // The one validation: the model, the techniques, the shape and the optimizer together.
        let micro = StepShape { batch: batches[0].micro_batch(), seq };
        let mut request = StepRequest { model, micro, optimizer, techniques }.validate()?;
        if techniques.batching.varies_in_length() {
            // The run starts at its first batch's length (each later batch brings its own).
            let first =
                oomlab::documents::batch_for(dataset, techniques.batching, request.batch_shape(), seq, self.seed, 0)?;
            let micro = StepShape { batch: batches[0].micro_batch(), seq: first.shape.seq };
            request = StepRequest { model, micro, optimizer, techniques }.validate()?;
        }
        Ok(Resolved {
            request,
            backend: self.backend.kind(),
            seed: self.seed,
            json: self.json,
            budget_bytes: self.budget,
            batches,
            seq_cap: seq,
        })
    }

    /// Like [`Self::resolve`], for commands that take one batch size.
    pub(super) fn resolve_one(&self, dataset: &Dataset) -> Result<Resolved, Failure> {
        let r = self.resolve(dataset)?;
        if r.batches.len() != 1 {
            return Err(FlagError::SeveralBatches.into());
        }
        Ok(r)
    }
}

/// The batches `--batch`, `--micro-batch`, `--accum` and `--gpus` name, each made and checked
/// as [`Batches`]: `--micro-batch` as given, or each `--batch` (per GPU) split into `--accum`
/// micro-batches; both together must agree.
pub(super) fn flag_batches(
    batch: Option<&str>,
    micro: Option<&str>,
    accum: usize,
    gpus: usize,
) -> Result<Vec<Batches>, FlagError> {
    match (batch, micro) {
        (_, Some(m)) => {
            let micro: Vec<Batches> =
                parse_batches(m)?.into_iter().map(|n| Batches::micro(n, accum, gpus)).collect::<Result<_, _>>()?;
            if let Some(b) = batch {
                let per_gpu: Vec<usize> = micro.iter().map(|m| m.per_gpu_batch()).collect();
                if parse_batches(b)? != per_gpu {
                    return Err(FlagError::BatchDisagrees { batch: b.to_string(), micro: m.to_string(), accum });
                }
            }
            Ok(micro)
        }
        (b, None) => {
            let text = b.unwrap_or("16");
            Ok(parse_batches(text)?.into_iter().map(|b| Batches::per_gpu(b, accum, gpus)).collect::<Result<_, _>>()?)
        }
    }
}

/// "16", "1..512", "1..512:8" or "1,2,4,8" → batch sizes, each validated.
pub(super) fn parse_batches(text: &str) -> Result<Vec<usize>, FlagError> {
    let bad = || FlagError::BatchSyntax(text.to_string());
    let num = |s: &str| -> Result<usize, FlagError> {
        let v: i64 = s.trim().parse().map_err(|_| bad())?;
        Ok(check_dim(oomlab::model::Dim::Batch, v).map_err(ConfigError::from)?)
    };
    let out: Vec<usize> = if let Some((a, rest)) = text.split_once("..") {
        let (b, step) = match rest.split_once(':') {
            Some((b, step)) => (b, num(step)?),
            None => (rest, 1),
        };
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(FlagError::EmptyRange(text.to_string()));
        }
        (a..=b).step_by(step).collect()
    } else {
        text.split(',').map(num).collect::<Result<_, _>>()?
    };
    if out.is_empty() {
        return Err(bad());
    }
    if out.len() > 100_000 {
        return Err(FlagError::TooManyBatches { text: text.to_string(), count: out.len() });
    }
    Ok(out)
}

/// The GPU `--backend gpu` asks for (None for the CPU backend), opened once per command: a
/// clear error where there is none.
pub(super) fn open_gpu(r: &Resolved) -> Result<Option<Gpu>, Failure> {
    Ok(match r.backend {
        BackendKind::Gpu => Some(Gpu::open_headless()?),
        BackendKind::Cpu => None,
    })
}

/// The executor of `plan` on the backend `r` asks for, through [`oomlab::backend::open`] (the
/// GPU backend on `gpu`, from [`open_gpu`]).
pub(super) fn make_trainer(r: &Resolved, plan: Plan, gpu: Option<&Gpu>) -> Result<Executor, Failure> {
    Ok(pollster::block_on(oomlab::backend::open(r.backend, gpu, plan, r.seed, r.budget()))?)
}
