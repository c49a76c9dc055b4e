//! A Hugging Face `config.json` as an [`Architecture`]: the families whose every byte the
//! estimator models exactly — `gpt2`, `llama`, `mistral` and `qwen2` so far. A `model_type` it does not
//! know, or a field that changes memory in a way it does not model (biases on the attention
//! alone, a head size other than hidden / heads, an activation other than the family's), is an
//! error that names it: never a silent guess. Fields that change no byte of a training step
//! (the RoPE base and scaling, norm epsilons, token ids) are read past.
//!
//! Mistral's `sliding_window` limits which keys a query attends to, but eager attention still
//! builds and keeps the whole s × s score matrix (masked), and fused kernels keep none: what is
//! saved is the same as without a window, so the field changes nothing here.

use serde_json::Value;

use super::{Architecture, EstimateError, presets};

/// The largest config.json read (real ones are a few kB).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// The families read, by `model_type`.
pub const FAMILIES: [&str; 4] = ["gpt2", "llama", "mistral", "qwen2"];

/// A config read: the architecture, and the context it was trained for (`n_positions`,
/// `max_position_embeddings`).
#[derive(Clone, Debug, PartialEq)]
pub struct HfModel {
    pub arch: Architecture,
    pub context: u64,
}

fn invalid(message: String) -> EstimateError {
    EstimateError::Invalid(message)
}

/// Reads a config.json's text; `name` names the model (the folder's or file's name).
pub fn from_config(text: &str, name: &str) -> Result<HfModel, EstimateError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(invalid(format!("config.json is {} bytes, more than the {MAX_CONFIG_BYTES} read", text.len())));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| invalid(format!("config.json is not JSON: {e}")))?;
    let Some(fields) = v.as_object() else {
        return Err(invalid("config.json is not a JSON object".into()));
    };
    let model_type = fields.get("model_type").and_then(Value::as_str).unwrap_or("");
    let c = Config { fields, model_type };
    let model = match model_type {
        "gpt2" => gpt2(&c, name)?,
        "llama" | "mistral" | "qwen2" => llama(&c, name)?,
        "" => return Err(invalid("config.json has no model_type".into())),
        other => {
            return Err(invalid(format!(
                "model_type {other:?} is not modelled yet: oomlab reads {} configs",
                FAMILIES.join(", ")
            )));
        }
    };
    model.arch.validate()?;
    Ok(model)
}

struct Config<'a> {
    fields: &'a serde_json::Map<String, Value>,
    model_type: &'a str,
}

impl Config<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key).filter(|v| !v.is_null())
    }

    /// A positive whole number the family needs.
    fn count(&self, key: &str) -> Result<u64, EstimateError> {
        match self.get(key) {
            Some(v) => v.as_u64().filter(|&n| n > 0).ok_or_else(|| {
                invalid(format!("{}: {key} must be a positive whole number (got {v})", self.model_type))
            }),
            None => Err(invalid(format!("{}: config.json has no {key}", self.model_type))),
        }
    }

    fn count_or(&self, key: &str, default: u64) -> Result<u64, EstimateError> {
        if self.get(key).is_some() { self.count(key) } else { Ok(default) }
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, EstimateError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| invalid(format!("{}: {key} must be true or false", self.model_type))),
        }
    }

    fn probability(&self, key: &str) -> Result<f64, EstimateError> {
        match self.get(key) {
            None => Ok(0.0),
            Some(v) => v
                .as_f64()
                .filter(|p| (0.0..1.0).contains(p))
                .ok_or_else(|| invalid(format!("{}: {key} must be a probability below 1 (got {v})", self.model_type))),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A field whose value would change memory in a way the estimator does not model.
    fn not_modelled(&self, key: &str, why: &str) -> EstimateError {
        let value = self.get(key).map_or_else(String::new, Value::to_string);
        invalid(format!("{}: {key} = {value} is not modelled: {why}", self.model_type))
    }
}

/// GPT-2 (`GPT2LMHeadModel`): learned positions, LayerNorm, a GELU MLP, biases everywhere, q/k/v
/// in one matrix, the lm_head tied to the token embedding.
fn gpt2(c: &Config<'_>, name: &str) -> Result<HfModel, EstimateError> {
    let hidden = c.count("n_embd")?;
    let positions = c.count("n_positions")?;
    match c.text("activation_function").unwrap_or("gelu_new") {
        "gelu_new" | "gelu" | "gelu_pytorch_tanh" | "gelu_fast" => {}
        _ => return Err(c.not_modelled("activation_function", "the estimator's GPT-2 MLP is GELU")),
    }
    if !c.flag("tie_word_embeddings", true)? {
        return Err(c.not_modelled("tie_word_embeddings", "GPT2LMHeadModel ties its lm_head whatever this says"));
    }
    // One dropout probability: the estimator keeps a mask after the embeddings, attention and
    // each residual branch alike.
    let p = c.probability("resid_pdrop")?;
    for key in ["embd_pdrop", "attn_pdrop"] {
        if c.probability(key)? != p {
            return Err(c.not_modelled(key, "dropouts that differ from resid_pdrop"));
        }
    }
    let heads = c.count("n_head")?;
    let arch = Architecture {
        vocab: c.count("vocab_size")?,
        ffn: c.count_or("n_inner", 4 * hidden)?,
        positions,
        dropout: p,
        ..presets::gpt2(name, hidden, c.count("n_layer")?, heads)
    };
    Ok(HfModel { arch, context: positions })
}

/// LLaMA 1–3.x, Mistral and Qwen2 (`LlamaForCausalLM`, `MistralForCausalLM`,
/// `Qwen2ForCausalLM`): rotary positions, RMSNorm, a SwiGLU MLP, q/k/v as three matrices with
/// grouped-query attention; no biases, but for Qwen2's on q, k and v.
fn llama(c: &Config<'_>, name: &str) -> Result<HfModel, EstimateError> {
    let hidden = c.count("hidden_size")?;
    let heads = c.count("num_attention_heads")?;
    if let Some(d) = c.get("head_dim")
        && d.as_u64() != Some(hidden / heads)
    {
        return Err(c.not_modelled("head_dim", "a head size other than hidden_size / num_attention_heads"));
    }
    if c.text("hidden_act").unwrap_or("silu") != "silu" {
        return Err(c.not_modelled("hidden_act", "the estimator's gated MLP is SwiGLU (silu)"));
    }
    for key in ["attention_bias", "mlp_bias"] {
        if c.flag(key, false)? {
            return Err(c.not_modelled(key, "biases on some linear layers and not others"));
        }
    }
    // Qwen2's q, k and v projections have biases whatever the config says.
    let qkv_bias = c.model_type == "qwen2";
    if c.probability("attention_dropout")? > 0.0 {
        return Err(c.not_modelled("attention_dropout", "dropout on the attention probabilities alone"));
    }
    let context = c.count_or("max_position_embeddings", 4096)?;
    let (vocab, layers, ffn) = (c.count("vocab_size")?, c.count("num_hidden_layers")?, c.count("intermediate_size")?);
    let kv_heads = c.count_or("num_key_value_heads", heads)?;
    let arch = Architecture {
        tied_embeddings: c.flag("tie_word_embeddings", false)?,
        qkv_bias,
        ..presets::llama(name, vocab, hidden, layers, heads, kv_heads, ffn)
    };
    Ok(HfModel { arch, context })
}
