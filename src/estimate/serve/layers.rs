//! Which tokens each layer's cache keeps, read from a Hugging Face `config.json` as transformers
//! 5 reads it: its `layer_types` when the config lists them, else the family's own default
//! (each family's `configuration_*.py`):
//! - Gemma 2 and gpt-oss: every other layer slides, from the first (`(i + 1) % 2`);
//! - Gemma 3: five sliding layers to one full (`sliding_window_pattern`, 6);
//! - Llama 4: the layers with RoPE attend within chunks (`attention_chunk_size`), those without
//!   (`no_rope_layers`, or every `no_rope_layer_interval`-th) attend to everything;
//! - Qwen 2 and 3: with `use_sliding_window`, the layers from `max_window_layers` on slide;
//! - Qwen2-MoE: with `use_sliding_window`, every other layer below `max_window_layers`, from the
//!   first;
//! - SmolLM3: with `use_sliding_window`, the layers without RoPE;
//! - the rest list no layer types, and transformers' cache reads its `sliding_window`
//!   (`get_layer_types_and_kwargs`): every layer of Mistral, Mixtral, Phi-3 or Qwen3-MoE (with
//!   `use_sliding_window`) slides when it is set; every layer of the others attends to all.

use serde_json::Value;

/// A layer's attention as far as its cache is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "tokens")]
pub enum LayerAttention {
    /// Every token before it.
    Full,
    /// The last `window` tokens (transformers keeps `window − 1` of them between steps).
    Sliding(u64),
    /// The tokens of its own chunk of `chunk` positions (Llama 4's local attention).
    Chunked(u64),
}

impl LayerAttention {
    /// The most tokens transformers' caches keep for this layer: its window (or chunk), or
    /// None for a full layer. transformers keeps a chunked layer as a sliding one of the chunk's
    /// width (measured: `DynamicSlidingWindowLayer`, `StaticSlidingWindowLayer`).
    pub fn window(self) -> Option<u64> {
        match self {
            LayerAttention::Full => None,
            LayerAttention::Sliding(w) | LayerAttention::Chunked(w) => Some(w),
        }
    }
}

/// Why a config's layers could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayersError {
    /// `layer_types` names a kind of attention the estimator does not model.
    UnknownKind { kind: String },
    /// `layer_types` lists another number of layers than `num_hidden_layers`.
    Count { listed: u64, layers: u64 },
    /// A sliding or chunked layer without its width (`sliding_window`, `attention_chunk_size`).
    NoWidth { key: &'static str },
}

/// Each of the model's `layers` layers' attention, from the config's fields.
pub fn attention_layers(config: &Value, layers: u64) -> Result<Vec<LayerAttention>, LayersError> {
    let num = |key: &str| config.get(key).and_then(Value::as_u64).filter(|&n| n > 0);
    let flag = |key: &str| config.get(key).and_then(Value::as_bool).unwrap_or(false);
    let family = config.get("model_type").and_then(Value::as_str).unwrap_or("");
    let width = |key: &'static str, default: Option<u64>| num(key).or(default).ok_or(LayersError::NoWidth { key });
    let sliding = || width("sliding_window", None).map(LayerAttention::Sliding);
    let count = usize::try_from(layers).unwrap_or(usize::MAX).min(1 << 20);
    if let Some(listed) = config.get("layer_types").and_then(Value::as_array) {
        if listed.len() as u64 != layers {
            return Err(LayersError::Count { listed: listed.len() as u64, layers });
        }
        return listed
            .iter()
            .map(|kind| match kind.as_str().unwrap_or("") {
                "full_attention" => Ok(LayerAttention::Full),
                "sliding_attention" => sliding(),
                "chunked_attention" => width("attention_chunk_size", None).map(LayerAttention::Chunked),
                other => Err(LayersError::UnknownKind { kind: other.chars().take(64).collect() }),
            })
            .collect();
    }
    let each = |slides: &dyn Fn(usize) -> bool, kind: LayerAttention| -> Vec<LayerAttention> {
        (0..count).map(|i| if slides(i) { kind } else { LayerAttention::Full }).collect()
    };
    Ok(match family {
        // Gemma 2's default window is 4096 (`Gemma2Config`).
        "gemma2" => {
            each(&|i| !(i + 1).is_multiple_of(2), LayerAttention::Sliding(width("sliding_window", Some(4096))?))
        }
        "gpt_oss" => {
            each(&|i| !(i + 1).is_multiple_of(2), LayerAttention::Sliding(width("sliding_window", Some(128))?))
        }
        "gemma3_text" => {
            let pattern = num("sliding_window_pattern").or(num("_sliding_window_pattern")).unwrap_or(6) as usize;
            each(&|i| !(i + 1).is_multiple_of(pattern), LayerAttention::Sliding(width("sliding_window", Some(4096))?))
        }
        "llama4_text" => {
            let chunk = LayerAttention::Chunked(width("attention_chunk_size", Some(8192))?);
            // An empty list reads as none (`no_rope_layers if no_rope_layers else [...]`).
            match config.get("no_rope_layers").and_then(Value::as_array).filter(|l| !l.is_empty()) {
                // 1: the layer rotates (and attends within its chunk); 0: it does not.
                Some(rope) => (0..count)
                    .map(|i| if rope.get(i).and_then(Value::as_u64) == Some(0) { LayerAttention::Full } else { chunk })
                    .collect(),
                None => {
                    let every = num("no_rope_layer_interval").unwrap_or(4) as usize;
                    each(&|i| !(i + 1).is_multiple_of(every), chunk)
                }
            }
        }
        "qwen2" | "qwen3" | "qwen2_moe" | "qwen3_moe" | "smollm3" if !flag("use_sliding_window") => {
            vec![LayerAttention::Full; count]
        }
        // Their configs' default window: 4096 (`Qwen2Config`, …); SmolLM3's none.
        "qwen2" | "qwen3" => {
            let from = num("max_window_layers").unwrap_or(28) as usize;
            each(&|i| i >= from, LayerAttention::Sliding(width("sliding_window", Some(4096))?))
        }
        "qwen2_moe" => {
            let below = num("max_window_layers").unwrap_or(28) as usize;
            each(
                &|i| !(i + 1).is_multiple_of(2) && i < below,
                LayerAttention::Sliding(width("sliding_window", Some(4096))?),
            )
        }
        "qwen3_moe" => vec![LayerAttention::Sliding(width("sliding_window", Some(4096))?); count],
        "smollm3" => match num("sliding_window") {
            Some(w) => {
                let rope = config.get("no_rope_layers").and_then(Value::as_array).filter(|l| !l.is_empty());
                let every = num("no_rope_layer_interval").unwrap_or(4) as usize;
                let has_rope = |i: usize| match rope {
                    Some(list) => list.get(i).and_then(Value::as_u64) != Some(0),
                    None => !(i + 1).is_multiple_of(every),
                };
                each(&|i| !has_rope(i), LayerAttention::Sliding(w))
            }
            None => vec![LayerAttention::Full; count],
        },
        "mistral" | "mixtral" | "phi3" => match num("sliding_window") {
            Some(w) => vec![LayerAttention::Sliding(w); count],
            None => vec![LayerAttention::Full; count],
        },
        _ => vec![LayerAttention::Full; count],
    })
}

#[cfg(test)]
mod tests {
    use super::LayerAttention::{Chunked, Full, Sliding};
    use super::*;

    fn read(config: &str, layers: u64) -> Result<Vec<LayerAttention>, LayersError> {
        attention_layers(&serde_json::from_str(config).expect("json"), layers)
    }

    #[test]
    fn each_family_default_follows_transformers() {
        assert_eq!(read(r#"{"model_type":"gemma2","sliding_window":64}"#, 3), Ok(vec![Sliding(64), Full, Sliding(64)]));
        let gemma3 = read(r#"{"model_type":"gemma3_text","sliding_window":512}"#, 12).expect("reads");
        assert_eq!(gemma3.iter().filter(|l| **l == Full).count(), 2, "one full layer in six");
        assert_eq!((gemma3[5], gemma3[11], gemma3[0]), (Full, Full, Sliding(512)));
        let llama4 = read(r#"{"model_type":"llama4_text","attention_chunk_size":8192,"no_rope_layers":[]}"#, 8);
        let llama4 = llama4.expect("reads");
        assert_eq!(llama4[..4], [Chunked(8192), Chunked(8192), Chunked(8192), Full]);
        let listed = read(r#"{"model_type":"llama4_text","attention_chunk_size":128,"no_rope_layers":[1,0]}"#, 2);
        assert_eq!(listed, Ok(vec![Chunked(128), Full]));
        let qwen = r#"{"model_type":"qwen2","use_sliding_window":true,"sliding_window":4096,"max_window_layers":2}"#;
        assert_eq!(read(qwen, 3), Ok(vec![Full, Full, Sliding(4096)]));
        let moe = r#"{"model_type":"qwen2_moe","use_sliding_window":true,"sliding_window":64,"max_window_layers":3}"#;
        assert_eq!(read(moe, 4), Ok(vec![Sliding(64), Full, Sliding(64), Full]));
        let moe3 = r#"{"model_type":"qwen3_moe","use_sliding_window":true,"sliding_window":64}"#;
        assert_eq!(read(moe3, 2), Ok(vec![Sliding(64); 2]));
        let smol = r#"{"model_type":"smollm3","use_sliding_window":true,"sliding_window":64}"#;
        assert_eq!(read(smol, 4), Ok(vec![Full, Full, Full, Sliding(64)]), "the layers without RoPE");
        assert_eq!(read(r#"{"model_type":"gpt_oss"}"#, 2), Ok(vec![Sliding(128), Full]), "gpt-oss's default window");
        let qwen_off = r#"{"model_type":"qwen2","use_sliding_window":false,"sliding_window":131072}"#;
        assert_eq!(read(qwen_off, 2), Ok(vec![Full, Full]), "a window the config does not use");
        assert_eq!(read(r#"{"model_type":"mistral","sliding_window":4096}"#, 2), Ok(vec![Sliding(4096); 2]));
        assert_eq!(read(r#"{"model_type":"mistral","sliding_window":null}"#, 2), Ok(vec![Full; 2]));
        assert_eq!(read(r#"{"model_type":"llama"}"#, 2), Ok(vec![Full; 2]));
    }

    #[test]
    fn a_listed_layer_type_is_read_or_refused() {
        let gpt_oss =
            r#"{"model_type":"gpt_oss","sliding_window":128,"layer_types":["sliding_attention","full_attention"]}"#;
        assert_eq!(read(gpt_oss, 2), Ok(vec![Sliding(128), Full]));
        assert_eq!(read(gpt_oss, 3), Err(LayersError::Count { listed: 2, layers: 3 }));
        let linear = r#"{"model_type":"x","layer_types":["linear_attention"]}"#;
        assert_eq!(read(linear, 1), Err(LayersError::UnknownKind { kind: "linear_attention".into() }));
        let no_width = r#"{"model_type":"x","layer_types":["sliding_attention"]}"#;
        assert_eq!(read(no_width, 1), Err(LayersError::NoWidth { key: "sliding_window" }));
    }
}
