//! A Hugging Face `config.json` as an [`Architecture`]: the families whose every byte the
//! estimator models exactly (see [`FAMILIES`]). A `model_type` it does not know, or a field that
//! changes memory in a way it does not model (biases on some linear layers and not others, an
//! activation other than the family's, dense layers among a mixture's sparse ones, dropout where
//! the estimator keeps none), is an error that names it: never a silent guess. Every key is
//! classified ([`super::hf_keys`]): read, changing no byte of a training step (the RoPE base,
//! norm epsilons, token ids, Gemma's `query_pre_attn_scalar`), or refused unless at its default;
//! a key in no class is refused.
//!
//! Sliding windows (Mistral, Qwen2, Gemma 2/3, Phi-3) limit which keys a query attends to, but
//! eager attention still builds and keeps the whole s × s score matrix (masked), and fused
//! kernels keep none: what is saved is the same as without a window, so the field changes
//! nothing here.
//!
//! DeepSeek-V3's multi-head latent attention is modelled as its training step runs it: the
//! compressed key/value cache is an inference saving, while the step keeps the latents' norms
//! and every head's expanded key and value ([`super::block::Mla`]). Its multi-token-prediction
//! module is not part of transformers' model and is not counted.

use serde_json::Value;

use super::error::{ConfigJsonError, ConfigJsonError as C, Unmodelled};

use super::block::Mla;
use super::{Architecture, Block, EstimateError, Mlp, Moe, Norm, Router};

/// The largest config.json read (real ones are a few kB).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// The families read, by `model_type`.
pub const FAMILIES: [&str; 20] = [
    "gpt2",
    "gpt_neox",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo2",
    "smollm3",
    "granite",
    "glm4_moe",
    "deepseek_v3",
    "gpt_oss",
    "llama4_text",
];

/// A config read: the architecture, and the context it was trained for (`n_positions`,
/// `max_position_embeddings`).
#[derive(Clone, Debug, PartialEq)]
pub struct HfModel {
    pub arch: Architecture,
    pub context: u64,
    /// The multi-token-prediction depth the config describes (DeepSeek-V3's and GLM-4.5's
    /// `num_nextn_predict_layers`): not part of transformers' model, so not in `arch`; the
    /// estimator counts it only when asked (`Block::mtp`, `oomlab estimate --mtp`).
    pub mtp: u64,
}

fn invalid(e: ConfigJsonError) -> EstimateError {
    EstimateError::Config(e)
}

/// Reads a config.json's text; `name` names the model (the folder's or file's name).
pub fn from_config(text: &str, name: &str) -> Result<HfModel, EstimateError> {
    read(text, |_| name.to_string())
}

/// Reads a config.json's text, named by the name it carries (`_name_or_path`, as transformers
/// saves it, or the catalog's `_name`), else `fallback`.
pub fn from_config_named(text: &str, fallback: &str) -> Result<HfModel, EstimateError> {
    read(text, |fields| {
        let carried = |key: &str| fields.get(key).and_then(Value::as_str).filter(|n| !n.trim().is_empty());
        carried("_name_or_path").or_else(|| carried("_name")).unwrap_or(fallback).to_string()
    })
}

fn read(text: &str, name: impl Fn(&serde_json::Map<String, Value>) -> String) -> Result<HfModel, EstimateError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(invalid(C::TooLong { bytes: text.len() as u64, max: MAX_CONFIG_BYTES as u64 }));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| invalid(C::NotJson { detail: e.to_string() }))?;
    let Some(fields) = v.as_object() else {
        return Err(invalid(C::NotObject));
    };
    let name = &name(fields);
    let model_type = fields.get("model_type").and_then(Value::as_str).unwrap_or("");
    let c = Config { fields, model_type };
    let model = match model_type {
        "gpt2" => gpt2(&c, name)?,
        "gpt_neox" => gpt_neox(&c, name)?,
        "llama" | "mistral" | "mixtral" | "qwen2" | "qwen2_moe" | "qwen3" | "qwen3_moe" | "phi3" | "gemma"
        | "gemma2" | "gemma3_text" | "olmo2" | "smollm3" | "granite" | "glm4_moe" | "deepseek_v3" | "gpt_oss"
        | "llama4_text" => llama(&c, name)?,
        "" => return Err(invalid(C::NoModelType)),
        other => {
            return Err(invalid(C::UnknownFamily { model_type: other.into(), known: FAMILIES.join(", ") }));
        }
    };
    c.check_keys()?;
    model.arch.validate()?;
    Ok(model)
}

struct Config<'a> {
    fields: &'a serde_json::Map<String, Value>,
    model_type: &'a str,
}

impl Config<'_> {
    /// The key's value, under either spelling transformers reads (its `attribute_map`:
    /// Mixtral's num_experts is saved as num_local_experts).
    fn get(&self, key: &str) -> Option<&Value> {
        let at = |k: &str| self.fields.get(k).filter(|v| !v.is_null());
        at(key).or_else(|| at(super::hf_keys::other_spelling(self.model_type, key)?))
    }

    /// Every key of the config is one the family's table knows: read, changing nothing, or at
    /// the only value modelled (`hf_keys`). None is read past.
    fn check_keys(&self) -> Result<(), EstimateError> {
        use super::hf_keys::{Use, classify};
        for (key, value) in self.fields.iter().filter(|(_, v)| !v.is_null()) {
            match classify(self.model_type, key) {
                Some(Use::Read | Use::NoEffect(_)) => {}
                Some(Use::DefaultOnly(default)) => {
                    if serde_json::from_str::<Value>(default).ok().as_ref() != Some(value) {
                        return Err(self.not_modelled(key, Unmodelled::DefaultOnly(default.into())));
                    }
                }
                None => {
                    return Err(invalid(C::UnknownKey { family: self.family(), key: key.clone() }));
                }
            }
        }
        Ok(())
    }

    /// A positive whole number the family needs.
    fn count(&self, key: &str) -> Result<u64, EstimateError> {
        match self.get(key) {
            Some(v) => v
                .as_u64()
                .filter(|&n| n > 0)
                .ok_or_else(|| invalid(C::NotPositive { family: self.family(), key: key.into(), got: v.to_string() })),
            None => Err(invalid(C::Missing { family: self.family(), key: key.into() })),
        }
    }

    /// A whole number (0 allowed), `default` when absent.
    fn whole(&self, key: &str, default: u64) -> Result<u64, EstimateError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| invalid(C::NotWhole { family: self.family(), key: key.into(), got: v.to_string() })),
        }
    }

    fn count_or(&self, key: &str, default: u64) -> Result<u64, EstimateError> {
        if self.get(key).is_some() { self.count(key) } else { Ok(default) }
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, EstimateError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| invalid(C::NotBool { family: self.family(), key: key.into() })),
        }
    }

    fn probability(&self, key: &str) -> Result<f64, EstimateError> {
        match self.get(key) {
            None => Ok(0.0),
            Some(v) => v.as_f64().filter(|p| (0.0..1.0).contains(p)).ok_or_else(|| {
                invalid(C::NotProbability { family: self.family(), key: key.into(), got: v.to_string() })
            }),
        }
    }

    /// The rotated dimensions of a head of `head_dim`: `partial_rotary_factor` (at the top
    /// level or in `rope_parameters`/`rope_scaling`) or GPT-NeoX's `rotary_pct`; 0 when all.
    fn rotary_dims(&self, head_dim: u64, default: f64) -> Result<u64, EstimateError> {
        let nested =
            |outer: &str| self.get(outer).and_then(|v| v.get("partial_rotary_factor")).filter(|v| !v.is_null());
        let value = self
            .get("partial_rotary_factor")
            .or_else(|| self.get("rotary_pct"))
            .or_else(|| nested("rope_parameters"))
            .or_else(|| nested("rope_scaling"));
        let factor = match value {
            None => default,
            Some(v) => v
                .as_f64()
                .filter(|f| *f > 0.0 && *f <= 1.0)
                .ok_or_else(|| invalid(C::RotaryFactor { family: self.family(), got: v.to_string() }))?,
        };
        let dims = (head_dim as f64 * factor) as u64;
        Ok(if dims >= head_dim { 0 } else { dims })
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A field whose value would change memory in a way the estimator does not model.
    fn not_modelled(&self, key: &str, why: Unmodelled) -> EstimateError {
        let value = self.get(key).map_or_else(String::new, Value::to_string);
        invalid(C::NotModelled { family: self.family(), key: key.into(), value, why })
    }

    fn family(&self) -> String {
        self.model_type.to_string()
    }
}

/// GPT-2 (`GPT2LMHeadModel`): learned positions, LayerNorm, a GELU MLP, biases everywhere, q/k/v
/// in one matrix, the lm_head tied to the token embedding.
fn gpt2(c: &Config<'_>, name: &str) -> Result<HfModel, EstimateError> {
    let hidden = c.count("n_embd")?;
    let positions = c.count("n_positions")?;
    // gelu_new is a chain of element-wise ops (each keeps its input); PyTorch's own GELU one op.
    let mlp = match c.text("activation_function").unwrap_or("gelu_new") {
        "gelu_new" | "gelu_fast" => Mlp::Gelu,
        "gelu" | "gelu_pytorch_tanh" => Mlp::TorchGelu,
        _ => return Err(c.not_modelled("activation_function", Unmodelled::Gpt2Activation)),
    };
    if !c.flag("tie_word_embeddings", true)? {
        return Err(c.not_modelled("tie_word_embeddings", Unmodelled::Gpt2Untied));
    }
    // One dropout probability: the estimator keeps a mask after the embeddings, attention and
    // each residual branch alike.
    let p = c.probability("resid_pdrop")?;
    for key in ["embd_pdrop", "attn_pdrop"] {
        if c.probability(key)? != p {
            return Err(c.not_modelled(key, Unmodelled::Gpt2Dropouts));
        }
    }
    let heads = c.count("n_head")?;
    let arch = Architecture {
        vocab: c.count("vocab_size")?,
        ffn: c.count_or("n_inner", 4 * hidden)?,
        positions,
        dropout: p,
        mlp,
        ..super::arch::gpt2(name, hidden, c.count("n_layer")?, heads)
    };
    Ok(HfModel { arch, context: positions, mtp: 0 })
}

/// GPT-NeoX and Pythia (`GPTNeoXForCausalLM`): rotary positions on part of each head,
/// LayerNorm, a GELU MLP, biases everywhere, q/k/v in one matrix, a parallel residual, an untied
/// lm_head (`embed_out`).
fn gpt_neox(c: &Config<'_>, name: &str) -> Result<HfModel, EstimateError> {
    let hidden = c.count("hidden_size")?;
    let heads = c.count("num_attention_heads")?;
    let mlp = match c.text("hidden_act").unwrap_or("gelu") {
        "gelu" | "gelu_pytorch_tanh" | "gelu_fast" => Mlp::TorchGelu,
        "gelu_new" => Mlp::Gelu,
        _ => return Err(c.not_modelled("hidden_act", Unmodelled::NeoxActivation)),
    };
    if !c.flag("attention_bias", true)? {
        return Err(c.not_modelled("attention_bias", Unmodelled::NeoxAttentionBias));
    }
    for key in ["hidden_dropout", "attention_dropout"] {
        if c.probability(key)? > 0.0 {
            return Err(c.not_modelled(key, Unmodelled::NeoxDropouts));
        }
    }
    let context = c.count_or("max_position_embeddings", 2048)?;
    let head_dim = hidden / heads;
    let arch = Architecture {
        name: name.to_string(),
        vocab: c.count("vocab_size")?,
        hidden,
        layers: c.count("num_hidden_layers")?,
        heads,
        kv_heads: heads,
        ffn: c.count("intermediate_size")?,
        positions: 0,
        norm: Norm::LayerNorm,
        mlp,
        tied_embeddings: c.flag("tie_word_embeddings", false)?,
        biases: true,
        fused_qkv: true,
        dropout: 0.0,
        block: Block {
            parallel_residual: c.flag("use_parallel_residual", true)?,
            rotary_dims: c.rotary_dims(head_dim, 0.25)?,
            ..Block::default()
        },
        stage: None,
    };
    Ok(HfModel { arch, context, mtp: 0 })
}

/// The LLaMA lineage: LLaMA 1–3.x, Mistral, Qwen2/3, Phi-3 and Gemma 1–3, and the mixtures of
/// experts built on it (Mixtral, Qwen2-MoE, Qwen3-MoE). Rotary positions, RMSNorm, a gated MLP,
/// grouped-query attention. What each family adds:
/// - Qwen2 (and Qwen2-MoE): biases on q, k and v;
/// - Qwen3 and Gemma 3: a norm over each head's query and key; Qwen3, Gemma and Mistral-Nemo a
///   head size other than hidden / heads (`head_dim`);
/// - Phi-3: q/k/v in one matrix and gate/up in one (the same parameters; the same saved bytes
///   as three matrices here: the split halves are views of one output), partial rotary;
/// - Gemma: a GeGLU MLP, RMSNorm scaling by (1 + weight), the lm_head tied; Gemma 2/3: norms
///   on the attention's and the MLP's outputs; Gemma 2 soft-caps the scores and the logits;
/// - Mixtral, Qwen2-MoE, Qwen3-MoE: a router and experts in place of the MLP (Qwen2-MoE: a
///   shared expert with a sigmoid gate).
fn llama(c: &Config<'_>, name: &str) -> Result<HfModel, EstimateError> {
    let t = c.model_type;
    let gemma = t.starts_with("gemma");
    let hidden = c.count("hidden_size")?;
    let heads = c.count("num_attention_heads")?;
    let default_head = if gemma { 256 } else { hidden / heads };
    let head_dim = c.count_or("head_dim", default_head)?;
    let act_key = if gemma && c.get("hidden_activation").is_some() { "hidden_activation" } else { "hidden_act" };
    let mlp = match (gemma, c.text(act_key).unwrap_or(if gemma { "gelu_pytorch_tanh" } else { "silu" })) {
        (false, "silu" | "swish") if t == "gpt_oss" => Mlp::ClampedSwiGlu,
        (false, "silu" | "swish") => Mlp::SwiGlu,
        (true, "gelu_pytorch_tanh" | "gelu") => Mlp::GeGlu,
        _ => return Err(c.not_modelled(act_key, Unmodelled::GatedActivation)),
    };
    // GLM-4.5's attention_bias puts biases on q, k and v only (its output projection has none).
    let glm_bias = t == "glm4_moe" && c.flag("attention_bias", false)?;
    // gpt-oss's puts biases on q, k, v and the output projection (its experts have their own).
    let oss_bias = t == "gpt_oss" && c.flag("attention_bias", true)?;
    let own_bias = |k: &str| matches!(t, "glm4_moe" | "gpt_oss") && k == "attention_bias";
    for key in ["attention_bias", "mlp_bias"].into_iter().filter(|k| !own_bias(k)) {
        if c.flag(key, false)? {
            return Err(c.not_modelled(key, Unmodelled::SomeBiases));
        }
    }
    for key in ["attention_dropout", "resid_pdrop", "embd_pdrop"] {
        if c.probability(key)? > 0.0 {
            return Err(c.not_modelled(key, Unmodelled::Dropout));
        }
    }
    if t == "smollm3" {
        rotary_layers(c)?;
    }
    let nope_every = if t == "llama4_text" { llama4_nope_every(c)? } else { 0 };
    let moe = moe(c)?;
    let softcap = match (c.get("attn_logit_softcapping"), c.get("final_logit_softcapping")) {
        (None, None) => false,
        (Some(_), Some(_)) => true,
        (Some(_), None) => return Err(c.not_modelled("attn_logit_softcapping", Unmodelled::ScoresSoftcapAlone)),
        (None, Some(_)) => return Err(c.not_modelled("final_logit_softcapping", Unmodelled::LogitsSoftcapAlone)),
    };
    let context = c.count_or("max_position_embeddings", 4096)?;
    let (vocab, layers) = (c.count("vocab_size")?, c.count("num_hidden_layers")?);
    let ffn = match moe {
        Some(_) if matches!(t, "mixtral" | "gpt_oss" | "llama4_text") => c.count("intermediate_size")?,
        Some(_) => c.count("moe_intermediate_size")?,
        None => c.count("intermediate_size")?,
    };
    let qk_norm = match t {
        "qwen3" | "qwen3_moe" | "gemma3_text" | "olmo2" => true,
        "glm4_moe" => c.flag("use_qk_norm", false)?,
        "llama4_text" => c.flag("use_qk_norm", true)?,
        _ => false,
    };
    let kv_heads = c.count_or("num_key_value_heads", heads)?;
    let mla = if t == "deepseek_v3" { Some(latent_attention(c, heads, kv_heads)?) } else { None };
    let block = Block {
        // Qwen2's q/k/v always have biases; Qwen2-MoE's as its qkv_bias says.
        qkv_bias: t == "qwen2" || (t == "qwen2_moe" && c.flag("qkv_bias", true)?) || glm_bias,
        head_dim: if mla.is_some() || (head_dim == hidden / heads && hidden.is_multiple_of(heads)) {
            0
        } else {
            head_dim
        },
        qk_norm,
        qk_norm_whole: t == "olmo2",
        sandwich_norms: matches!(t, "gemma2" | "gemma3_text"),
        post_norms: t == "olmo2",
        fp32_rope: matches!(t, "olmo2" | "llama4_text"),
        sinks: t == "gpt_oss",
        low_precision_softmax: t == "llama4_text",
        nope_every,
        qk_norm_weightless: t == "llama4_text",
        nope_temperature: t == "llama4_text" && c.flag("attn_temperature_tuning", true)?,
        parallel_residual: false,
        rotary_dims: match mla {
            Some(m) => m.rope_dim,
            // gpt-oss's tables hold one angle per rotated pair: rows of half a head (Llama 4's
            // are complex numbers, one per pair, in fp32).
            None if matches!(t, "gpt_oss" | "llama4_text") => head_dim / 2,
            None => c.rotary_dims(head_dim, 1.0)?,
        },
        softcap,
        moe,
        mla,
        mtp: 0,
    };
    let arch = Architecture {
        tied_embeddings: c.flag("tie_word_embeddings", gemma)?,
        norm: match t {
            _ if gemma => Norm::GemmaRmsNorm,
            "olmo2" | "gpt_oss" => Norm::Fp32RmsNorm,
            _ => Norm::RmsNorm,
        },
        mlp,
        fused_qkv: t == "phi3",
        biases: oss_bias,
        block,
        ..super::arch::llama(name, vocab, hidden, layers, heads, kv_heads, ffn)
    };
    let mtp = if matches!(t, "deepseek_v3" | "glm4_moe") { c.whole("num_nextn_predict_layers", 0)? } else { 0 };
    Ok(HfModel { arch, context, mtp })
}

/// DeepSeek-V3's multi-head latent attention: the ranks of its query and key/value latents
/// (`q_lora_rank` null: one query projection), each head's parts without and with RoPE, its
/// values. Every head has its own key and value (the latent expands to all of them), so
/// `num_key_value_heads` must equal the heads.
fn latent_attention(c: &Config<'_>, heads: u64, kv_heads: u64) -> Result<Mla, EstimateError> {
    if kv_heads != heads {
        return Err(c.not_modelled("num_key_value_heads", Unmodelled::LatentKeyValueHeads));
    }
    Ok(Mla {
        q_rank: c.whole("q_lora_rank", 0)?,
        kv_rank: c.count("kv_lora_rank")?,
        nope_dim: c.count("qk_nope_head_dim")?,
        rope_dim: c.count("qk_rope_head_dim")?,
        v_dim: c.count("v_head_dim")?,
    })
}

/// Llama 4's mixture: every `interleave_moe_layer_step`-th layer (its `moe_layers`, which must
/// be that list), each with a shared expert of the experts' width; the others dense, of
/// `intermediate_size_mlp`.
fn llama4_moe(c: &Config<'_>) -> Result<Moe, EstimateError> {
    let (layers, every) = (c.count("num_hidden_layers")?, c.count_or("interleave_moe_layer_step", 1)?);
    if let Some(list) = c.get("moe_layers").and_then(Value::as_array).filter(|l| !l.is_empty()) {
        let derived: Vec<u64> = (0..layers).filter(|i| (i + 1).is_multiple_of(every)).collect();
        if list.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>() != Some(derived) {
            return Err(c.not_modelled("moe_layers", Unmodelled::MoeLayerList));
        }
    }
    let width = c.count("intermediate_size")?;
    Ok(Moe {
        experts: c.count("num_local_experts")?,
        top_k: c.count("num_experts_per_tok")?,
        shared_ffn: width,
        router: Router::AllExperts,
        every,
        dense_ffn: if every > 1 { c.count("intermediate_size_mlp")? } else { 0 },
        ..Moe::default()
    })
}

/// Llama 4's layers without RoPE: every `no_rope_layer_interval`-th (`no_rope_layers`, 1 where a
/// layer rotates, must be that pattern when given); a model with no rotary layer is refused.
fn llama4_nope_every(c: &Config<'_>) -> Result<u64, EstimateError> {
    let (layers, every) = (c.count("num_hidden_layers")?, c.count_or("no_rope_layer_interval", 4)?);
    if let Some(list) = c.get("no_rope_layers").and_then(Value::as_array).filter(|l| !l.is_empty()) {
        let derived: Vec<u64> = (0..layers).map(|i| u64::from(!(i + 1).is_multiple_of(every))).collect();
        if list.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>() != Some(derived) {
            return Err(c.not_modelled("no_rope_layers", Unmodelled::NoRopePattern));
        }
    }
    if every == 1 {
        return Err(c.not_modelled("no_rope_layer_interval", Unmodelled::NoRotaryLayer));
    }
    Ok(every)
}

/// SmolLM3's layers without RoPE (`no_rope_layers`: 1 where a layer rotates, 0 where not;
/// by default every `no_rope_layer_interval`-th has none). A layer without RoPE saves what one
/// with it does (the rotation keeps only the cos/sin tables the layers share), so only a model
/// with no rotary layer at all would differ (no tables): that is refused.
fn rotary_layers(c: &Config<'_>) -> Result<(), EstimateError> {
    let all_off = match c.get("no_rope_layers") {
        Some(v) => {
            let list = v.as_array().ok_or_else(|| c.not_modelled("no_rope_layers", Unmodelled::NoRopeList))?;
            list.iter().all(|x| x.as_u64() == Some(0))
        }
        None => c.count_or("no_rope_layer_interval", 4)? == 1,
    };
    if all_off {
        return Err(c.not_modelled("no_rope_layers", Unmodelled::NoRotaryTables));
    }
    Ok(())
}

/// A mixture of experts' fields (Mixtral's `num_local_experts`, Qwen's `num_experts`,
/// DeepSeek-V3's and GLM-4.5's `n_routed_experts`), if the family has one.
fn moe(c: &Config<'_>) -> Result<Option<Moe>, EstimateError> {
    let t = c.model_type;
    if !matches!(t, "mixtral" | "qwen2_moe" | "qwen3_moe" | "glm4_moe" | "deepseek_v3" | "gpt_oss" | "llama4_text") {
        return Ok(None);
    }
    if c.flag("output_router_logits", false)? {
        return Err(c.not_modelled("output_router_logits", Unmodelled::RouterLogits));
    }
    if t == "llama4_text" {
        return llama4_moe(c).map(Some);
    }
    if t == "gpt_oss" {
        // Biased router and experts; a softmax over the top k logits. The published files
        // carry the original code's experts_per_token too: transformers reads
        // num_experts_per_tok, so the two must agree.
        let top_k = c.count("num_experts_per_tok")?;
        if c.get("experts_per_token").is_some_and(|v| v.as_u64() != Some(top_k)) {
            return Err(c.not_modelled("experts_per_token", Unmodelled::ExpertsPerToken));
        }
        return Ok(Some(Moe {
            experts: c.count("num_local_experts")?,
            top_k,
            router: Router::TopKSoftmax,
            biases: true,
            ..Moe::default()
        }));
    }
    if t == "mixtral" {
        if c.get("router_jitter_noise").and_then(Value::as_f64).is_some_and(|x| x > 0.0) {
            return Err(c.not_modelled("router_jitter_noise", Unmodelled::RouterJitter));
        }
        let m = Moe {
            experts: c.count("num_local_experts")?,
            top_k: c.count("num_experts_per_tok")?,
            renormalise: true,
            ..Moe::default()
        };
        return Ok(Some(m));
    }
    if matches!(t, "glm4_moe" | "deepseek_v3") {
        // Sigmoid routing over groups of experts; n_shared_experts ungated experts of the
        // experts' width in one MLP; the first first_k_dense_replace layers dense.
        let experts = c.count("n_routed_experts")?;
        if !experts.is_multiple_of(c.count_or("n_group", 1)?) {
            return Err(c.not_modelled("n_group", Unmodelled::GroupsDivide));
        }
        let shared = c.whole("n_shared_experts", 0)?;
        return Ok(Some(Moe {
            experts,
            top_k: c.count("num_experts_per_tok")?,
            shared_ffn: shared * c.count("moe_intermediate_size")?,
            renormalise: c.flag("norm_topk_prob", true)?,
            router: Router::Sigmoid,
            dense_first: c.whole("first_k_dense_replace", 0)?,
            dense_ffn: c.count("intermediate_size")?,
            ..Moe::default()
        }));
    }
    if c.count_or("decoder_sparse_step", 1)? != 1 {
        return Err(c.not_modelled("decoder_sparse_step", Unmodelled::DenseAmongMixture));
    }
    if c.get("mlp_only_layers").and_then(Value::as_array).is_some_and(|l| !l.is_empty()) {
        return Err(c.not_modelled("mlp_only_layers", Unmodelled::DenseAmongMixture));
    }
    let shared_ffn = if t == "qwen2_moe" { c.count("shared_expert_intermediate_size")? } else { 0 };
    Ok(Some(Moe {
        experts: c.count("num_experts")?,
        top_k: c.count("num_experts_per_tok")?,
        shared_ffn,
        renormalise: c.flag("norm_topk_prob", false)?,
        ..Moe::default()
    }))
}
