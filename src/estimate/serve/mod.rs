//! Serving: what a batch of requests holds on one GPU at inference — the weights and the KV
//! cache each request keeps so that its next token does not recompute the keys and values of
//! every token before it — laid out as three runtimes lay it out:
//! - **vllm**: one pool of fixed blocks sized from what is left of the GPU ([`vllm`]);
//! - **transformers**: `DynamicCache`, grown by concatenation each step, sliding and chunked
//!   layers cut to their window;
//! - **static**: transformers' `StaticCache`, each request's slots reserved up front for the
//!   whole context (a sliding layer's for its window).
//!
//! What a token costs in each layer follows the architecture: key and value heads after
//! grouped-query attention, and DeepSeek-V3's latent cache (`kv_lora_rank + qk_rope_head_dim`
//! a token and layer, one "head", in vLLM and in transformers 5 alike; tensor parallelism does
//! not split it). Which tokens a layer keeps is read from the config ([`layers`]).
//!
//! transformers' caches were measured (transformers 5.25, `scripts/check_kv.py`, fixtures in
//! `tests/fixtures/hf_kv.json`): after a decode step a full layer holds every token it was fed,
//! a sliding (or chunked) layer of window W the storage of min(N, W) tokens (it keeps W − 1 in
//! view, a slice of the W the concatenation made); after a prompt's forward every layer still
//! holds the whole prompt (the sliding layers' view is a slice of it) until the next step.

pub mod layers;
pub mod vllm;

pub use layers::{LayerAttention, LayersError, attention_layers};

use super::Architecture;
use super::arch::Role;
use crate::i18n::{Catalog, with_english};

/// How the runtime lays out its cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServeRuntime {
    Vllm,
    Transformers,
    Static,
}

/// The cache's element type: the model's (bf16, 2 bytes) or fp8 (1 byte; vLLM's
/// `--kv-cache-dtype fp8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KvDtype {
    Auto,
    Fp8,
}

/// How the weights are stored. The linear layers' weights (the experts' too) take the format;
/// embeddings, norms and biases stay bf16 (as vLLM's fp8, int8 and GPTQ/AWQ int4 leave them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    Bf16,
    Fp8,
    Int8,
    /// 4 bits a weight, with an fp16 scale and a 4-bit zero point per `group` weights
    /// (GPTQ's and AWQ's layout; group 128 by default).
    Int4 {
        group: u64,
    },
}

/// One serving question: a model, a runtime, requests of `context` tokens, `concurrency` of
/// them at once, on one GPU of `gpu_bytes` (one of `tensor_parallel`).
#[derive(Clone, Debug, PartialEq)]
pub struct ServeSetup {
    pub arch: Architecture,
    /// Each layer's attention ([`attention_layers`]); as many as the architecture's layers.
    pub layers: Vec<LayerAttention>,
    /// The longest context the model takes (its config's `max_position_embeddings`).
    pub model_context: u64,
    pub runtime: ServeRuntime,
    pub context: u64,
    pub concurrency: u64,
    pub kv_dtype: KvDtype,
    pub weights: WeightFormat,
    pub tensor_parallel: u64,
    pub gpu_bytes: u64,
    pub vllm: vllm::Options,
}

/// What the setup holds and how far it goes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Serve {
    pub runtime: ServeRuntime,
    /// Cache bytes one token of one request costs over every layer (on one GPU), before any
    /// window caps it.
    pub kv_bytes_per_token: u64,
    /// The cache `concurrency` requests of `context` tokens hold: vLLM's blocks for them,
    /// transformers' tensors after a decode step, the static cache's reservation.
    pub kv_cache_bytes: u64,
    /// transformers only: the cache right after a prompt of `context` tokens, every layer
    /// still holding the whole prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_prefill_bytes: Option<u64>,
    pub weights_bytes: u64,
    /// The room left for the cache: vLLM's `available_kv_cache_memory`, or for transformers the
    /// GPU less the weights and the memory outside PyTorch.
    pub available_kv_bytes: u64,
    /// vLLM's profile run's activation peak (predicted, at `max_num_batched_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation_peak_bytes: Option<u64>,
    /// vLLM's `num_gpu_blocks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_gpu_blocks: Option<u64>,
    /// vLLM's "GPU KV cache size: N tokens".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_kv_cache_tokens: Option<u64>,
    /// vLLM's pool in full: its page, groups and padding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm: Option<vllm::Pool>,
    /// How many requests of `context` tokens fit at once (vLLM's figure, unrounded).
    pub max_concurrency: f64,
    /// The longest context `concurrency` requests can each hold (0: not one token).
    pub longest_context: u64,
    /// Whether `concurrency` requests of `context` tokens fit.
    pub fits: bool,
}

/// Why a serving question cannot be answered.
#[derive(Clone, Debug, PartialEq)]
pub enum ServeError {
    Layers(LayersError),
    /// An option out of its range (named as its flag).
    Option {
        flag: &'static str,
        value: String,
    },
    /// The weights, the activations and the memory outside PyTorch leave nothing for the cache.
    NoRoom {
        room: u64,
        needed: u64,
    },
    /// A context past the model's (vLLM: "User-specified max_model_len … is greater than the
    /// derived max_model_len").
    ContextBeyondModel {
        context: u64,
        model: u64,
    },
    /// Tensor parallelism is modelled for vLLM only.
    TensorParallelOnlyVllm,
    /// transformers' fp8 cache keeps its recent tokens unquantized (`QuantizedCache`'s
    /// residual): not modelled.
    Fp8CacheOnlyVllm,
}

impl From<LayersError> for ServeError {
    fn from(e: LayersError) -> Self {
        ServeError::Layers(e)
    }
}

impl ServeError {
    fn message(&self) -> (&'static str, Vec<(&'static str, String)>) {
        let size = |b: &u64| crate::units::format_bytes(*b);
        match self {
            ServeError::Layers(LayersError::UnknownKind { kind }) => {
                ("serve-err-layer-kind", vec![("kind", kind.clone())])
            }
            ServeError::Layers(LayersError::Count { listed, layers }) => {
                ("serve-err-layer-count", vec![("listed", listed.to_string()), ("layers", layers.to_string())])
            }
            ServeError::Layers(LayersError::NoWidth { key }) => {
                ("serve-err-layer-width", vec![("key", key.to_string())])
            }
            ServeError::Option { flag, value } => {
                ("serve-err-option", vec![("flag", flag.to_string()), ("value", value.clone())])
            }
            ServeError::NoRoom { room, needed } => {
                ("serve-err-no-room", vec![("room", size(room)), ("needed", size(needed))])
            }
            ServeError::ContextBeyondModel { context, model } => {
                ("serve-err-context", vec![("context", context.to_string()), ("model", model.to_string())])
            }
            ServeError::TensorParallelOnlyVllm => ("serve-err-tp-vllm", vec![]),
            ServeError::Fp8CacheOnlyVllm => ("serve-err-fp8-vllm", vec![]),
        }
    }

    /// The message in the catalog's language.
    pub fn text(&self, t: &Catalog) -> String {
        let (key, args) = self.message();
        t.format_text(key, &args)
    }

    /// The catalog message it renders.
    pub fn key(&self) -> &'static str {
        self.message().0
    }
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&with_english(|en| self.text(en)))
    }
}

impl std::error::Error for ServeError {}

/// Bytes of one cache element.
fn element_bytes(kv: KvDtype) -> u64 {
    match kv {
        KvDtype::Auto => 2,
        KvDtype::Fp8 => 1,
    }
}

/// Cache bytes of one token in one layer on one GPU: keys and values of the GPU's key/value
/// heads (vLLM: `max(1, total_num_kv_heads // tensor_parallel_size)`), or the latent and its
/// rotary part (MLA: one head, on every GPU).
pub fn bytes_per_token_layer(arch: &Architecture, kv: KvDtype, tensor_parallel: u64) -> u64 {
    let s = element_bytes(kv);
    match arch.block.mla {
        Some(m) => m.kv_rank.saturating_add(m.rope_dim).saturating_mul(s),
        None => (arch.kv_heads / tensor_parallel.max(1)).max(1).saturating_mul(2 * s).saturating_mul(arch.head_dim()),
    }
}

/// The weights' bytes on one GPU: the linear layers' (and experts') in `format`, split over the
/// tensor-parallel GPUs with the embeddings; norms and biases whole on each.
pub fn weights_bytes(arch: &Architecture, format: WeightFormat, tensor_parallel: u64) -> u64 {
    let t = tensor_parallel.max(1);
    let linear = |n: u64| match format {
        WeightFormat::Bf16 => n.saturating_mul(2),
        WeightFormat::Fp8 | WeightFormat::Int8 => n,
        // Half a byte a weight, an fp16 scale and a 4-bit zero per group.
        WeightFormat::Int4 { group } => {
            let groups = n.div_ceil(group.max(1));
            n.div_ceil(2).saturating_add(groups.saturating_mul(2)).saturating_add(groups.div_ceil(2))
        }
    };
    arch.parameter_tensors()
        .into_iter()
        .map(|(role, n)| match role {
            Role::Linear(..) | Role::Experts => linear(n).div_ceil(t),
            Role::Embedding => n.saturating_mul(2).div_ceil(t),
            Role::Norm | Role::Bias => n.saturating_mul(2),
        })
        .fold(0, u64::saturating_add)
}

/// transformers' cache of one request of `tokens` tokens, bytes: after a decode step (each
/// windowed layer's storage at most its window) or, with `prefill`, right after a prompt of
/// that many tokens.
pub fn transformers_request_bytes(layers: &[LayerAttention], per_token: u64, tokens: u64, prefill: bool) -> u64 {
    layers
        .iter()
        .map(|l| match l.window() {
            Some(w) if !prefill => tokens.min(w),
            _ => tokens,
        })
        .fold(0u64, |sum, n| sum.saturating_add(n.saturating_mul(per_token)))
}

/// transformers' `StaticCache` of one request, `max_cache_len` slots in each full layer and
/// min(window, max_cache_len) in each windowed one (measured: `StaticSlidingWindowLayer`).
pub fn static_request_bytes(layers: &[LayerAttention], per_token: u64, max_cache_len: u64) -> u64 {
    layers
        .iter()
        .map(|l| l.window().map_or(max_cache_len, |w| w.min(max_cache_len)))
        .fold(0u64, |sum, n| sum.saturating_add(n.saturating_mul(per_token)))
}

/// vLLM's profile run's activation peak (`_dummy_run(max_num_batched_tokens)` then the
/// sampler's): predicted as the widest moment of one layer's forward over that many tokens —
/// the residual stream and its norm, beside the attention's q, k, v and output or the MLP's
/// gate, up and activated halves (a mixture's for its top-k experts) — or the sampler's fp32
/// logits and probabilities for `max_num_seqs` requests, whichever is larger. bf16 activations.
pub fn activation_peak(arch: &Architecture, o: &vllm::Options) -> u64 {
    let tokens = o.max_num_batched_tokens;
    let per = |width: u64| tokens.saturating_mul(width).saturating_mul(2);
    let mlp_width = match &arch.block.moe {
        Some(m) => arch.ffn.saturating_mul(m.top_k).saturating_add(m.shared_ffn),
        None => arch.ffn,
    };
    let attention =
        arch.q_hidden().saturating_add(arch.kv_hidden().saturating_mul(2)).saturating_add(arch.attention_output());
    let mlp = mlp_width.saturating_mul(3);
    let layer = per(2 * arch.hidden).saturating_add(per(attention.max(mlp)));
    let sampler = o.max_num_seqs.min(tokens).saturating_mul(arch.vocab).saturating_mul(4 * 2);
    layer.max(sampler)
}

/// The serving question answered.
pub fn serve(s: &ServeSetup) -> Result<Serve, ServeError> {
    let o = &s.vllm;
    let check =
        |flag: &'static str, ok: bool, value: String| if ok { Ok(()) } else { Err(ServeError::Option { flag, value }) };
    check("--context", (1..=1 << 24).contains(&s.context), s.context.to_string())?;
    check("--concurrency", (1..=1 << 20).contains(&s.concurrency), s.concurrency.to_string())?;
    check("--tp", (1..=1024).contains(&s.tensor_parallel), s.tensor_parallel.to_string())?;
    check("--block-size", (1..=1 << 16).contains(&o.block_size), o.block_size.to_string())?;
    let util = o.gpu_memory_utilization;
    check("--gpu-memory-utilization", util > 0.0 && util <= 1.0, util.to_string())?;
    check(
        "--max-num-batched-tokens",
        (1..=1 << 24).contains(&o.max_num_batched_tokens),
        o.max_num_batched_tokens.to_string(),
    )?;
    check("--max-num-seqs", (1..=1 << 20).contains(&o.max_num_seqs), o.max_num_seqs.to_string())?;
    if s.context > s.model_context {
        return Err(ServeError::ContextBeyondModel { context: s.context, model: s.model_context });
    }
    if let WeightFormat::Int4 { group } = s.weights {
        check("--weights", (1..=1 << 20).contains(&group), format!("int4:{group}"))?;
    }
    if s.runtime != ServeRuntime::Vllm {
        if s.tensor_parallel > 1 {
            return Err(ServeError::TensorParallelOnlyVllm);
        }
        if s.kv_dtype == KvDtype::Fp8 {
            return Err(ServeError::Fp8CacheOnlyVllm);
        }
    }
    let per_token = bytes_per_token_layer(&s.arch, s.kv_dtype, s.tensor_parallel);
    let kv_bytes_per_token = per_token.saturating_mul(s.layers.len() as u64);
    let weights = weights_bytes(&s.arch, s.weights, s.tensor_parallel);
    let concurrency = s.concurrency;
    if s.runtime == ServeRuntime::Vllm {
        let page = o.block_size.saturating_mul(per_token);
        let activations = activation_peak(&s.arch, o);
        let available = match o.kv_cache_memory {
            Some(bytes) => bytes,
            None => {
                // `requested_memory = total_memory * gpu_memory_utilization`;
                // `available_kv_cache_memory_bytes = requested_memory - non_kv_cache_memory`.
                let requested = (s.gpu_bytes as f64 * util) as u64;
                let needed = weights
                    .saturating_add(activations)
                    .saturating_add(o.non_torch_bytes)
                    .saturating_add(o.cuda_graph_bytes);
                if needed >= requested {
                    return Err(ServeError::NoRoom { room: requested, needed });
                }
                requested - needed
            }
        };
        let pool = vllm::pool(&s.layers, page, available, s.context, o);
        let kv_cache_bytes = pool
            .blocks_per_request
            .saturating_mul(concurrency)
            .saturating_mul(page)
            .saturating_mul(pool.layers_per_group);
        let longest = vllm::longest_context(&s.layers, page, available, concurrency, s.model_context.max(s.context), o);
        return Ok(Serve {
            runtime: s.runtime,
            kv_bytes_per_token,
            kv_cache_bytes,
            kv_cache_prefill_bytes: None,
            weights_bytes: weights,
            available_kv_bytes: available,
            activation_peak_bytes: o.kv_cache_memory.is_none().then_some(activations),
            max_concurrency: pool.max_concurrency,
            longest_context: longest,
            fits: pool.blocks_per_request.saturating_mul(concurrency) <= pool.num_blocks,
            num_gpu_blocks: Some(pool.num_blocks),
            gpu_kv_cache_tokens: Some(pool.tokens),
            vllm: Some(pool),
        });
    }
    let room = s.gpu_bytes.saturating_sub(weights).saturating_sub(o.non_torch_bytes);
    if room == 0 {
        return Err(ServeError::NoRoom { room: s.gpu_bytes, needed: weights.saturating_add(o.non_torch_bytes) });
    }
    let request = |tokens: u64| match s.runtime {
        ServeRuntime::Static => static_request_bytes(&s.layers, per_token, tokens),
        _ => transformers_request_bytes(&s.layers, per_token, tokens, false),
    };
    let one = request(s.context);
    let mut lo = 0;
    let mut hi = s.model_context.max(s.context);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if request(mid).saturating_mul(concurrency) <= room { lo = mid } else { hi = mid - 1 }
    }
    Ok(Serve {
        runtime: s.runtime,
        kv_bytes_per_token,
        kv_cache_bytes: one.saturating_mul(concurrency),
        kv_cache_prefill_bytes: (s.runtime == ServeRuntime::Transformers)
            .then(|| transformers_request_bytes(&s.layers, per_token, s.context, true).saturating_mul(concurrency)),
        weights_bytes: weights,
        available_kv_bytes: room,
        activation_peak_bytes: None,
        num_gpu_blocks: None,
        gpu_kv_cache_tokens: None,
        vllm: None,
        max_concurrency: room as f64 / one.max(1) as f64,
        longest_context: lo,
        fits: one.saturating_mul(concurrency) <= room,
    })
}
