//! Serving a batch: the toy generates, with a real KV cache, on either backend. A stream of
//! requests is scheduled as servers schedule it (continuous batching, admission while the
//! cache fits, preemption when it runs out), over a cache in one of three layouts
//! ([`Layout`]). Every layout generates the same tokens: the layout changes memory, never the
//! math.
//!
//! The budget is a virtual GPU, as in training. Like vLLM's profile run, the engine first
//! predicts what the weights and the largest step's activations take (the plan through the
//! caching allocator), and gives the cache the rest.

#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod cache;
pub mod error;
pub mod requests;
pub mod runner;
pub mod scheduler;

pub use cache::{KvBytes, KvSpace, Layout, SpaceShape};
pub use error::ServingError;
pub use requests::Request;
pub use runner::Runner;
pub use scheduler::{Iteration, Served};

use crate::backend::BackendKind;
use crate::backend::Gpu;
use crate::data::Dataset;
use crate::memory::{Budget, step};
use crate::model::ModelConfig;
use crate::plan::{Category, Plan, Precision};

/// The serving toy's context: half of OPT's 2,048, so that the chat traces' lengths, scaled to
/// it, stay many blocks long.
pub const CONTEXT: usize = 1024;
/// vLLM's default block size.
pub const BLOCK_SIZE: usize = 16;
/// The default number of requests.
pub const REQUESTS: usize = 256;
/// The default budget: 32 MiB, where the contiguous layout holds a few dozen requests and the
/// paged one runs out before the last requests finish.
pub const BUDGET: u64 = 32 << 20;
/// The most requests a run takes, and the largest budget (the cache's slots stay in u32).
pub const MAX_REQUESTS: u64 = 4096;
pub const MAX_BUDGET: u64 = 4 << 30;
/// vLLM's default `max_num_seqs` (v0; v1 raised it on large GPUs).
pub const MAX_NUM_SEQS: usize = 256;

/// A serving run as asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServingConfig {
    pub model: ModelConfig,
    pub precision: Precision,
    pub layout: Layout,
    pub block_size: usize,
    pub requests: usize,
    /// The virtual GPU's bytes.
    pub budget: u64,
    /// Draws the requests and initialises the weights.
    pub seed: u64,
    pub max_num_seqs: usize,
    /// The cache's bytes, every layer (vLLM's `kv_cache_memory_bytes`), at most what the budget
    /// leaves; None: all it leaves.
    pub kv_cache_bytes: Option<u64>,
}

impl ServingConfig {
    /// The defaults for a vocabulary of `vocab` tokens: the toy at [`CONTEXT`], paged.
    pub fn new(vocab: usize) -> Self {
        Self {
            model: ModelConfig { seq_len: CONTEXT, ..ModelConfig::toy(vocab) },
            precision: Precision::Fp32,
            layout: Layout::Paged,
            block_size: BLOCK_SIZE,
            requests: REQUESTS,
            budget: BUDGET,
            seed: 0,
            max_num_seqs: MAX_NUM_SEQS,
            kv_cache_bytes: None,
        }
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<(), ServingError> {
        let context = self.model.seq_len as u64;
        let check = |flag: &'static str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ServingError::Option { flag, value: value.to_string(), min, max })
            }
        };
        self.model.validate().map_err(crate::plan::ConfigError::from)?;
        check("--context", context, 2, crate::model::MAX_DIM as u64)?;
        check("--block-size", self.block_size as u64, 1, context)?;
        check("--requests", self.requests as u64, 1, MAX_REQUESTS)?;
        check("--budget", self.budget, 1, MAX_BUDGET)?;
        check("--max-num-seqs", self.max_num_seqs as u64, 1, MAX_REQUESTS)?;
        if let Some(k) = self.kv_cache_bytes {
            check("--kv-cache-memory", k, 1, MAX_BUDGET)?;
        }
        Ok(())
    }

    /// Bytes of one token's keys and values over every layer.
    pub fn token_bytes(&self) -> u64 {
        let m = &self.model;
        2 * m.n_layers as u64 * m.d_model as u64 * self.precision.dtype().size_bytes()
    }
}

/// Where the budget goes before the first request: the prediction the cache is sized from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Setup {
    pub budget_bytes: u64,
    pub weights_bytes: u64,
    /// The largest step's activations (predicted: a prefill of the whole context, or a decode
    /// step of `max_num_seqs` requests), with the allocator's rounding.
    pub activation_peak_bytes: u64,
    /// What is left for the cache.
    pub kv_room_bytes: u64,
    /// The executor's caches, every layer: the pool (paged), the rows (contiguous), the
    /// slots the growing tensors' values are kept in (growing).
    pub kv_pool_bytes: u64,
    /// Tokens the cache holds at most.
    pub capacity_tokens: u64,
}

/// A serving run's report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub layout: Layout,
    pub block_size: usize,
    pub backend: &'static str,
    pub setup: Setup,
    pub kv_bytes_per_token: u64,
    pub requests: Vec<Served>,
    pub peak_concurrent: usize,
    /// The most the cache reserved for running requests at once, and what held tokens then.
    pub kv_reserved_peak_bytes: u64,
    pub kv_used_at_peak_bytes: u64,
    /// Of all the bytes reserved over the run's iterations, the share that held no token: the
    /// paper's measure, averaged over the run (1 − used / reserved, each summed).
    pub waste_fraction: f64,
    /// The reserved bytes at the peak, split as the PagedAttention paper names them.
    pub waste_at_peak: KvBytes,
    pub preemptions: u64,
    /// The run's out-of-memory, in PyTorch's words: a step's activations that did not fit, or
    /// a request no cache of this budget could ever hold (it is refused, the others served).
    pub oom: Option<String>,
    pub forward_passes: u64,
    /// The largest step's peak in oomlab's allocator, every category (allocator).
    pub step_peak_allocated_bytes: u64,
    pub iterations: Vec<Iteration>,
    /// The caches' blocks at the peak: each block's request (id + 1), or 0 when free; none for a
    /// growing cache (its memory is the caching allocator's segments).
    pub map_at_peak: Option<Vec<u32>>,
}

/// Sizes the cache for `cfg` (as vLLM's profile run does): the budget less the weights and the
/// largest step's activations, predicted through the caching allocator, and checked by
/// predicting the largest steps again with the cache in place.
pub fn setup(cfg: &ServingConfig) -> Result<(Setup, KvSpace), ServingError> {
    cfg.validate()?;
    let (model, context) = (cfg.model, cfg.model.seq_len);
    let tb = cfg.token_bytes();
    let space_for = |room: u64| KvSpace::new(cfg.layout, room, tb, model.n_layers, context, cfg.block_size);
    let peak = |room: u64| -> Result<(u64, u64), ServingError> {
        let shape = space_for(room).shape();
        let mut worst = 0u64;
        let mut weights = 0u64;
        for (b, t) in [(1, context), (cfg.max_num_seqs.min(cfg.requests).max(1), 1)] {
            let plan = runner::plan(&model, cfg.precision, shape, b, t)?;
            weights = category_bytes(&plan, Category::Parameters);
            match step::simulate_peak(&plan, Budget::Bytes(cfg.budget)) {
                Ok(m) => worst = worst.max(m.peak_reserved_bytes()),
                Err(_) => worst = u64::MAX,
            }
        }
        Ok((worst, weights))
    };
    // The activations alone: the plans with a cache of one block.
    let (alone, weights_bytes) = peak(0)?;
    let tiny = space_for(0).shape().slots() * tb;
    if alone == u64::MAX || alone >= cfg.budget {
        return Err(ServingError::BudgetTooSmall { budget: cfg.budget, needed: alone.min(u64::MAX / 2) + tb });
    }
    let activation_peak_bytes = alone.saturating_sub(weights_bytes + tiny);
    // The caches are tensors of their own, which the allocator rounds to its segments (20 MiB
    // for one of 1 to 10 MiB): the largest room whose caches fit beside the largest steps,
    // searched by halves (what fits is the same or more with a smaller room).
    let (mut fits, mut over) = (0u64, cfg.budget - alone + 1);
    while over - fits > (tb * cfg.block_size as u64).max(1) {
        let mid = fits + (over - fits) / 2;
        if peak(mid)?.0 <= cfg.budget { fits = mid } else { over = mid }
    }
    let room = cfg.kv_cache_bytes.map_or(fits, |k| k.min(fits));
    let space = space_for(room);
    let shape = space.shape();
    if !space.could_hold(1) {
        let needed = match cfg.layout {
            Layout::Growing => crate::memory::allocator::segment_size_for(1),
            Layout::Contiguous => tb * context as u64,
            Layout::Paged => tb * cfg.block_size as u64,
        };
        if cfg.kv_cache_bytes.is_some_and(|k| k < fits) {
            return Err(ServingError::CacheTooSmall { cache: room, needed });
        }
        return Err(ServingError::BudgetTooSmall { budget: cfg.budget, needed: alone.saturating_add(needed) });
    }
    let setup = Setup {
        budget_bytes: cfg.budget,
        weights_bytes,
        activation_peak_bytes,
        kv_room_bytes: room,
        kv_pool_bytes: shape.slots() * tb,
        capacity_tokens: space.capacity_tokens(),
    };
    Ok((setup, space))
}

/// 1 − Σ used / Σ reserved over the iterations (0 when nothing was reserved).
fn waste_over(iterations: &[Iteration]) -> f64 {
    let (used, reserved) =
        iterations.iter().fold((0u128, 0u128), |(u, r), i| (u + u128::from(i.kv.used), r + u128::from(i.kv.reserved)));
    if reserved == 0 { 0.0 } else { 1.0 - used as f64 / reserved as f64 }
}

fn category_bytes(plan: &Plan, c: Category) -> u64 {
    plan.tensors.iter().filter(|t| t.category == c).map(crate::plan::TensorInfo::size_bytes).sum()
}

/// Runs `cfg` on `kind` (on `gpu` for the GPU): the requests drawn from the corpus, served to
/// the end (or until a step runs out of memory).
pub async fn run(cfg: &ServingConfig, kind: BackendKind, gpu: Option<&Gpu>) -> Result<Report, ServingError> {
    Ok(Session::drawn(cfg, kind, gpu).await?.to_end().await)
}

/// Serves `requests` under `cfg`, with the weights `params` where given (else from the seed).
pub async fn run_requests(
    cfg: &ServingConfig,
    kind: BackendKind,
    gpu: Option<&Gpu>,
    requests: Vec<Request>,
    params: Option<&[f32]>,
) -> Result<Report, ServingError> {
    Ok(Session::open(cfg, kind, gpu, requests, params).await?.to_end().await)
}

/// A serving run in progress: its executor, its cache and its scheduler, carried out an
/// iteration at a time ([`Session::advance`]; the app does some each frame).
pub struct Session {
    cfg: ServingConfig,
    kind: BackendKind,
    setup: Setup,
    space: KvSpace,
    runner: Runner,
    server: scheduler::Server,
}

impl Session {
    /// Sizes the cache, opens the executor (with the weights `params` where given) and queues
    /// `requests`.
    pub async fn open(
        cfg: &ServingConfig,
        kind: BackendKind,
        gpu: Option<&Gpu>,
        requests: Vec<Request>,
        params: Option<&[f32]>,
    ) -> Result<Self, ServingError> {
        let (setup, space) = setup(cfg)?;
        let budget = Budget::Bytes(cfg.budget);
        let mut runner = Runner::open(kind, gpu, &cfg.model, cfg.precision, space.shape(), cfg.seed, budget).await?;
        if let Some(p) = params {
            runner.write_params(p);
        }
        let server = scheduler::Server::new(requests, cfg.max_num_seqs);
        Ok(Self { cfg: *cfg, kind, setup, space, runner, server })
    }

    /// Opens a session on the corpus's requests for `cfg` (see [`run`]).
    pub async fn drawn(cfg: &ServingConfig, kind: BackendKind, gpu: Option<&Gpu>) -> Result<Self, ServingError> {
        let data = Dataset::builtin();
        if cfg.model.vocab != data.tokenizer.vocab_size() {
            return Err(ServingError::Vocabulary { model: cfg.model.vocab, corpus: data.tokenizer.vocab_size() });
        }
        let requests = requests::draw(&data, cfg.requests, cfg.model.seq_len, cfg.seed);
        Self::open(cfg, kind, gpu, requests, None).await
    }

    /// Serves every request, and reports.
    pub async fn to_end(mut self) -> Report {
        while !self.done() {
            self.advance().await;
        }
        self.report()
    }

    /// One iteration of the scheduler.
    pub async fn advance(&mut self) {
        self.server.iteration(&mut self.runner, &mut self.space).await;
    }

    pub fn done(&self) -> bool {
        self.server.done()
    }

    /// The iterations so far, and the requests served.
    pub fn progress(&self) -> (&[Iteration], usize) {
        (self.server.iterations(), self.server.served())
    }

    /// The caches' blocks at the peak so far.
    pub fn map_at_peak(&self) -> Option<&[u32]> {
        self.server.map_at_peak()
    }

    /// The sizing of the cache.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    pub fn config(&self) -> &ServingConfig {
        &self.cfg
    }

    /// The run's report (a run not done reports what it had).
    pub fn report(self) -> Report {
        let Session { cfg, kind, setup, space, server, .. } = self;
        let outcome = server.finish();
        // The first iteration at the most reserved (a growing cache's allocator keeps its
        // segments after the requests finish: a later tie would be a nearly empty cache).
        let peak = outcome
            .iterations
            .iter()
            .fold(KvBytes::default(), |p, i| if i.kv.reserved > p.reserved { i.kv } else { p });
        let refused = outcome.served.iter().any(|s| s.refused);
        let oom = match (&outcome.stopped, refused) {
            (Some(e), _) => Some(e.to_string()),
            (None, true) => Some(space.last_oom().map_or_else(
                || format!("a request longer than the cache ({} tokens) was refused", space.capacity_tokens()),
                |o| o.message("the KV cache"),
            )),
            (None, false) => None,
        };
        Report {
            layout: cfg.layout,
            block_size: space.shape().block_size,
            backend: match kind {
                BackendKind::Cpu => "cpu",
                BackendKind::Gpu => "gpu",
            },
            setup,
            kv_bytes_per_token: cfg.token_bytes(),
            peak_concurrent: outcome.iterations.iter().map(|i| i.running).max().unwrap_or(0),
            kv_reserved_peak_bytes: peak.reserved,
            kv_used_at_peak_bytes: peak.used,
            waste_fraction: waste_over(&outcome.iterations),
            waste_at_peak: peak,
            requests: outcome.served,
            preemptions: outcome.preemptions,
            oom,
            forward_passes: outcome.forward_passes,
            step_peak_allocated_bytes: outcome.step_peak_allocated,
            iterations: outcome.iterations,
            map_at_peak: outcome.map_at_peak,
        }
    }
}
