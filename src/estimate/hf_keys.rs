//! Every key a family's `config.json` may hold, classified: read (it changes the count), no
//! effect on a training step's memory (with the reason), or refused unless at its default (what
//! another value builds is not modelled). A key in no class is refused too: a config is never
//! read past a key nobody looked at. `tests/hf_keys.rs` checks the classes against every key of
//! each family's transformers config class (`tests/fixtures/hf/config_keys.json`, listed by
//! `scripts/config_keys.py`), so that a new transformers version's new key is noticed.

/// What the estimator does with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Read by the family's reader: it changes parameters or saved activations.
    Read,
    /// Changes no byte of a training step: why.
    NoEffect(&'static str),
    /// Refused unless at this default (JSON): another value builds something not modelled.
    DefaultOnly(&'static str),
}

use Use::{DefaultOnly, NoEffect, Read};

const NAMES: &str = "the checkpoint's names, labels and outputs, not the step's";
const DTYPE: &str = "the checkpoint's dtype: the estimate's precision is a setting of its own";
const TOKENS: &str = "token ids";
const INIT: &str = "initialisation only";
const CACHE: &str = "the key/value cache serves generation, not a training step";
const EPS: &str = "a norm's epsilon";
const ROPE_BASE: &str = "the rotary base frequency changes values, not bytes";
/// The training step's reading; serving reads these keys for the cache (`serve::layers`).
const SLIDING: &str = "in training a sliding window masks keys, but eager attention keeps the whole masked score \
     matrix and fused kernels none (serving keeps only the window: estimate --serve)";
const SCALE: &str = "a scale on the attention scores";
const CATALOG: &str = "oomlab's catalog: the model's name and where its config comes from";

/// Keys with one meaning in every family read (a family's own entries come first).
const SHARED: &[(&str, Use)] = &[
    ("model_type", Read),
    ("vocab_size", Read),
    ("tie_word_embeddings", Read),
    ("_name", NoEffect(CATALOG)),
    ("_source", NoEffect(CATALOG)),
    ("_name_or_path", NoEffect(NAMES)),
    ("architectures", NoEffect(NAMES)),
    ("transformers_version", NoEffect(NAMES)),
    ("id2label", NoEffect(NAMES)),
    ("label2id", NoEffect(NAMES)),
    ("problem_type", NoEffect("a classification head's loss, not the causal LM's")),
    ("return_dict", NoEffect(NAMES)),
    ("dtype", NoEffect(DTYPE)),
    ("torch_dtype", NoEffect(DTYPE)),
    ("bos_token_id", NoEffect(TOKENS)),
    ("eos_token_id", NoEffect(TOKENS)),
    ("pad_token_id", NoEffect(TOKENS)),
    ("initializer_range", NoEffect(INIT)),
    ("use_cache", NoEffect(CACHE)),
    ("rms_norm_eps", NoEffect(EPS)),
    ("layer_norm_eps", NoEffect(EPS)),
    ("layer_norm_epsilon", NoEffect(EPS)),
    ("rope_theta", NoEffect(ROPE_BASE)),
    ("rotary_emb_base", NoEffect(ROPE_BASE)),
    ("rope_local_base_freq", NoEffect(ROPE_BASE)),
    ("sliding_window", NoEffect(SLIDING)),
    ("use_sliding_window", NoEffect(SLIDING)),
    ("max_window_layers", NoEffect(SLIDING)),
    ("layer_types", NoEffect(SLIDING)),
    ("sliding_window_pattern", NoEffect(SLIDING)),
    ("_sliding_window_pattern", NoEffect(SLIDING)),
    ("use_bidirectional_attention", NoEffect("a mask's pattern: the same score matrix")),
    ("pretraining_tp", NoEffect("Llama's tensor-parallel split in pretraining: the same weights")),
    ("query_pre_attn_scalar", NoEffect(SCALE)),
    ("router_aux_loss_coef", NoEffect("the load-balancing loss's weight")),
    ("classifier_dropout", NoEffect("a classification head's dropout, not the causal LM's")),
    ("original_max_position_embeddings", NoEffect("LongRoPE's switch between its scalings: values, not bytes")),
    // The step's outputs and its feed-forward in chunks: other values keep or split tensors.
    ("chunk_size_feed_forward", DefaultOnly("0")),
    ("is_encoder_decoder", DefaultOnly("false")),
    ("output_attentions", DefaultOnly("false")),
    ("output_hidden_states", DefaultOnly("false")),
];

const SUMMARY: &str = "GPT2DoubleHeadsModel's sequence summary, not in the causal LM";

/// GPT-2's own keys (its names for the LLaMA lineage's are aliases: [`aliases`]).
const GPT2: &[(&str, Use)] = &[
    ("n_embd", Read),
    ("n_positions", Read),
    ("n_head", Read),
    ("n_layer", Read),
    ("n_inner", Read),
    ("activation_function", Read),
    ("resid_pdrop", Read),
    ("embd_pdrop", Read),
    ("attn_pdrop", Read),
    ("n_ctx", NoEffect("GPT-2's old name for its context; n_positions sets the positions")),
    ("scale_attn_weights", NoEffect(SCALE)),
    ("scale_attn_by_inverse_layer_idx", NoEffect(SCALE)),
    ("summary_activation", NoEffect(SUMMARY)),
    ("summary_first_dropout", NoEffect(SUMMARY)),
    ("summary_proj_to_labels", NoEffect(SUMMARY)),
    ("summary_type", NoEffect(SUMMARY)),
    ("summary_use_proj", NoEffect(SUMMARY)),
    // A cross-attention block in every layer (an encoder-decoder's), and attention upcast to fp32.
    ("add_cross_attention", DefaultOnly("false")),
    ("reorder_and_upcast_attn", DefaultOnly("false")),
];

/// What rotary positions read: the rotated share of a head (`rotary_dims`).
const ROTARY: &[(&str, Use)] =
    &[("rope_parameters", Read), ("rope_scaling", Read), ("partial_rotary_factor", Read), ("rotary_pct", Read)];

const GPT_NEOX: &[(&str, Use)] = &[
    ("hidden_size", Read),
    ("num_hidden_layers", Read),
    ("num_attention_heads", Read),
    ("intermediate_size", Read),
    ("max_position_embeddings", Read),
    ("hidden_act", Read),
    ("attention_bias", Read),
    ("attention_dropout", Read),
    ("hidden_dropout", Read),
    ("use_parallel_residual", Read),
    ("is_decoder", NoEffect("the causal LM decodes whatever this says")),
];

/// What every family of the LLaMA lineage reads (`llama` in hf.rs).
const LLAMA: &[(&str, Use)] = &[
    ("hidden_size", Read),
    ("num_hidden_layers", Read),
    ("num_attention_heads", Read),
    ("num_key_value_heads", Read),
    ("intermediate_size", Read),
    ("head_dim", Read),
    ("max_position_embeddings", Read),
    ("hidden_act", Read),
    ("attention_bias", Read),
    ("mlp_bias", Read),
    ("attention_dropout", Read),
    ("resid_pdrop", Read),
    ("embd_pdrop", Read),
    ("attn_logit_softcapping", Read),
    ("final_logit_softcapping", Read),
];

const GEMMA: &[(&str, Use)] = &[("hidden_activation", Read)];

/// What a mixture of experts reads (`moe` in hf.rs), by family.
const MIXTRAL: &[(&str, Use)] = &[
    ("num_local_experts", Read),
    ("num_experts_per_tok", Read),
    ("output_router_logits", Read),
    ("router_jitter_noise", Read),
];
const QWEN_MOE: &[(&str, Use)] = &[
    ("num_experts", Read),
    ("num_experts_per_tok", Read),
    ("output_router_logits", Read),
    ("moe_intermediate_size", Read),
    ("norm_topk_prob", Read),
    ("decoder_sparse_step", Read),
    ("mlp_only_layers", Read),
];
const QWEN2_MOE: &[(&str, Use)] = &[("shared_expert_intermediate_size", Read), ("qkv_bias", Read)];

const MULTIPLIER: &str = "a multiplication by a number: PyTorch keeps no tensor for it";
const GRANITE: &[(&str, Use)] = &[
    ("embedding_multiplier", NoEffect(MULTIPLIER)),
    ("residual_multiplier", NoEffect(MULTIPLIER)),
    ("attention_multiplier", NoEffect(SCALE)),
    ("logits_scaling", NoEffect(MULTIPLIER)),
];
const SMOLLM3: &[(&str, Use)] = &[("no_rope_layers", Read), ("no_rope_layer_interval", Read)];

const GROUPS: &str = "grouped routing's choice of groups: the tensors it makes are freed during the forward";
/// DeepSeek-V3's routing, shared with GLM-4.5 (`moe` in hf.rs).
const SIGMOID_MOE: &[(&str, Use)] = &[
    ("n_routed_experts", Read),
    ("num_experts_per_tok", Read),
    ("n_shared_experts", Read),
    ("moe_intermediate_size", Read),
    ("first_k_dense_replace", Read),
    ("norm_topk_prob", Read),
    ("output_router_logits", Read),
    ("n_group", Read),
    ("topk_group", NoEffect(GROUPS)),
    ("routed_scaling_factor", NoEffect(MULTIPLIER)),
    // The multi-token-prediction module is not part of transformers' model: read, and counted
    // only when asked (`--mtp`).
    ("num_nextn_predict_layers", Read),
];
const GLM4_MOE: &[(&str, Use)] = &[("use_qk_norm", Read)];
const QUANTIZED: &str = "how the published checkpoint's weights are stored: the estimate's precision (and QLoRA) \
                         are settings of their own";
/// DeepSeek-V3's latent attention, and the original code's keys transformers does not read.
const DEEPSEEK_V3: &[(&str, Use)] = &[
    ("q_lora_rank", Read),
    ("kv_lora_rank", Read),
    ("qk_rope_head_dim", Read),
    ("qk_nope_head_dim", Read),
    ("v_head_dim", Read),
    ("head_dim", NoEffect("transformers sets it to qk_rope_head_dim, which is read")),
    ("qk_head_dim", NoEffect("transformers sets it to qk_nope_head_dim + qk_rope_head_dim, which are read")),
    ("rope_interleave", NoEffect("the rotary pairs' layout: the same cos/sin tables, sliced")),
    ("quantization_config", NoEffect(QUANTIZED)),
    ("auto_map", NoEffect(NAMES)),
    ("ep_size", NoEffect("the original code's expert parallelism: the estimate's is a setting of its own")),
    // The original code's: transformers builds a sigmoid-scored, bias-corrected mixture in
    // every layer after the dense ones, whatever these say.
    ("moe_layer_freq", DefaultOnly("1")),
    ("scoring_func", DefaultOnly("\"sigmoid\"")),
    ("topk_method", DefaultOnly("\"noaux_tc\"")),
];

const SWIGLU: &str = "a constant inside the clamped SwiGLU: values, not bytes";
/// gpt-oss: its experts and their router (`moe` in hf.rs), its published weights' format.
const GPT_OSS: &[(&str, Use)] = &[
    ("num_local_experts", Read),
    ("num_experts_per_tok", Read),
    ("output_router_logits", Read),
    ("swiglu_alpha", NoEffect(SWIGLU)),
    ("swiglu_limit", NoEffect(SWIGLU)),
    ("quantization_config", NoEffect(QUANTIZED)),
    // The original code's names, in the published files.
    ("experts_per_token", Read),
    ("initial_context_length", NoEffect("the original code's context before YaRN: values, not bytes")),
];

/// Llama 4's text model: its interleaved experts, layers without RoPE, weightless q/k norms,
/// temperature on the layers without RoPE (`llama4_moe`, `llama4_nope_every` in hf.rs).
const LLAMA4: &[(&str, Use)] = &[
    ("num_local_experts", Read),
    ("num_experts_per_tok", Read),
    ("output_router_logits", Read),
    ("intermediate_size_mlp", Read),
    ("interleave_moe_layer_step", Read),
    ("moe_layers", Read),
    ("no_rope_layers", Read),
    ("no_rope_layer_interval", Read),
    ("use_qk_norm", Read),
    ("attn_temperature_tuning", Read),
    ("attn_scale", NoEffect("the temperature's slope: values, not bytes")),
    ("floor_scale", NoEffect("the temperature's step: values, not bytes")),
    (
        "attention_chunk_size",
        NoEffect("chunked attention masks keys, but eager attention keeps the whole masked score matrix"),
    ),
    ("router_jitter_noise", NoEffect("transformers' Llama 4 router adds no jitter")),
    ("for_llm_compressor", NoEffect("a flag for a quantization tool, not the model")),
];

/// The family's own tables, in the order they are looked in.
fn own(family: &str) -> &'static [&'static [(&'static str, Use)]] {
    match family {
        "gpt2" => &[GPT2],
        "gpt_neox" => &[GPT_NEOX, ROTARY],
        "gemma" | "gemma2" | "gemma3_text" => &[GEMMA, LLAMA, ROTARY],
        "mixtral" => &[MIXTRAL, LLAMA, ROTARY],
        "qwen2_moe" => &[QWEN2_MOE, QWEN_MOE, LLAMA, ROTARY],
        "qwen3_moe" => &[QWEN_MOE, LLAMA, ROTARY],
        "granite" => &[GRANITE, LLAMA, ROTARY],
        "smollm3" => &[SMOLLM3, LLAMA, ROTARY],
        "glm4_moe" => &[GLM4_MOE, SIGMOID_MOE, LLAMA, ROTARY],
        "deepseek_v3" => &[DEEPSEEK_V3, SIGMOID_MOE, LLAMA, ROTARY],
        "gpt_oss" => &[GPT_OSS, LLAMA, ROTARY],
        "llama4_text" => &[LLAMA4, LLAMA, ROTARY],
        _ => &[LLAMA, ROTARY],
    }
}

/// The other spellings transformers reads for a family's keys (its config class's
/// `attribute_map`: the name asked for, the name saved).
pub fn aliases(family: &str) -> &'static [(&'static str, &'static str)] {
    match family {
        "gpt2" => &[
            ("hidden_size", "n_embd"),
            ("max_position_embeddings", "n_positions"),
            ("num_attention_heads", "n_head"),
            ("num_hidden_layers", "n_layer"),
        ],
        "mixtral" | "qwen3_moe" | "gpt_oss" => &[("num_experts", "num_local_experts")],
        "glm4_moe" | "deepseek_v3" => {
            &[("num_local_experts", "n_routed_experts"), ("num_mtp_layers", "num_nextn_predict_layers")]
        }
        _ => &[],
    }
}

/// What the estimator does with `key` in a config of `family` (or with its other spelling);
/// None: a key it does not know.
pub fn classify(family: &str, key: &str) -> Option<Use> {
    let find = |key: &str| {
        own(family).iter().chain([&SHARED]).find_map(|t| t.iter().find(|(k, _)| *k == key).map(|&(_, u)| u))
    };
    find(key).or_else(|| find(other_spelling(family, key)?))
}

/// The other spelling of `key` in `family`, if transformers reads one.
pub fn other_spelling(family: &str, key: &str) -> Option<&'static str> {
    aliases(family).iter().find_map(|&(asked, saved)| match key {
        k if k == asked => Some(saved),
        k if k == saved => Some(asked),
        _ => None,
    })
}
