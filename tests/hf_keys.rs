//! No key read silently: every key of each family's transformers config class
//! (`tests/fixtures/hf/config_keys.json`, listed by `scripts/config_keys.py`) is classified by
//! the estimator — read, changing nothing, or refused unless at its default — and each class is
//! what the reader does with it: a key said to change nothing changes nothing when its value
//! changes, a key refused unless at its default is refused at another value, a key said to be
//! read is one the reader names, a key nobody knows is refused. Every spelling transformers reads
//! (its `attribute_map`) is read.

use oomlab::estimate::hf::{FAMILIES, from_config};
use oomlab::estimate::hf_keys::{Use, aliases, classify};
use serde_json::Value;

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

fn listed() -> Value {
    let text = std::fs::read_to_string(fixtures().join("config_keys.json")).expect("config_keys.json");
    serde_json::from_str(&text).expect("JSON")
}

/// The tiny fixture of each family (a config transformers builds a model from).
fn tiny(family: &str) -> serde_json::Map<String, Value> {
    let dir = match family {
        "gpt2" => "gpt2".to_string(),
        "llama" => "tinyllama-1.1b".to_string(),
        "gemma3_text" => "tiny-gemma3-text".to_string(),
        other => format!("tiny-{}", other.replace('_', "-")),
    };
    let text = std::fs::read_to_string(fixtures().join(dir).join("config.json")).expect("a tiny fixture");
    serde_json::from_str(&text).expect("JSON")
}

fn read(fields: &serde_json::Map<String, Value>) -> Result<oomlab::estimate::hf::HfModel, String> {
    from_config(&Value::Object(fields.clone()).to_string(), "test").map_err(|e| e.to_string())
}

#[test]
fn every_key_of_every_family_is_classified() {
    let listed = listed();
    let common: Vec<&str> = listed["_common"].as_array().expect("_common").iter().filter_map(Value::as_str).collect();
    let families = listed["families"].as_object().expect("families");
    assert_eq!(families.len(), FAMILIES.len(), "one entry per family read (run scripts/config_keys.py)");
    let mut unclassified = Vec::new();
    for family in FAMILIES {
        let entry = &families[family];
        let keys = entry["keys"].as_object().expect("keys");
        for key in keys.keys().map(String::as_str).chain(common.iter().copied()) {
            if classify(family, key).is_none() {
                unclassified.push(format!("{family}: {key}"));
            }
        }
        // The other spellings are transformers' own.
        let map = entry["attribute_map"].as_object().expect("attribute_map");
        let mut want: Vec<(String, String)> =
            map.iter().map(|(k, v)| (k.clone(), v.as_str().expect("a name").to_string())).collect();
        want.sort();
        let mut got: Vec<(String, String)> =
            aliases(family).iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        got.sort();
        assert_eq!(got, want, "{family}: the attribute_map");
    }
    assert!(unclassified.is_empty(), "keys no class holds:\n{}", unclassified.join("\n"));
}

/// Another value of the same kind, for a key said to change nothing.
fn other(value: &Value) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) if n.is_u64() => Value::from(n.as_u64().unwrap_or(0) + 3),
        Value::Number(n) => Value::from(n.as_f64().unwrap_or(0.0) * 0.5 + 0.25),
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Null => Value::from(7),
        Value::Array(_) => Value::Array(vec![Value::from(1)]),
        Value::Object(_) => serde_json::json!({"x": 1}),
    }
}

#[test]
fn each_class_is_what_the_reader_does() {
    let listed = listed();
    let source = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/estimate/hf.rs"))
        .expect("hf.rs");
    let mut checked = (0, 0, 0);
    for family in FAMILIES {
        let base = tiny(family);
        let want = read(&base).unwrap_or_else(|e| panic!("{family}: {e}"));
        let mut keys = listed["families"][family]["keys"].as_object().expect("keys").clone();
        // The keys every config has, which the tiny fixtures leave out.
        for key in listed["_common"].as_array().expect("_common").iter().filter_map(Value::as_str) {
            keys.entry(key.to_string()).or_insert(Value::Null);
        }
        for (key, default) in keys.iter().chain(base.iter()) {
            match classify(family, key) {
                Some(Use::NoEffect(why)) => {
                    let mut changed = base.clone();
                    let now = base.get(key).unwrap_or(default);
                    changed.insert(key.clone(), other(now));
                    let got = read(&changed).unwrap_or_else(|e| panic!("{family}: {key} changed: {e}"));
                    assert_eq!(got, want, "{family}: {key} changes the count ({why})");
                    checked.0 += 1;
                }
                Some(Use::DefaultOnly(d)) => {
                    let mut changed = base.clone();
                    let at: Value = serde_json::from_str(d).expect("a JSON default");
                    changed.insert(key.clone(), at.clone());
                    assert_eq!(read(&changed), Ok(want.clone()), "{family}: {key} at its default");
                    changed.insert(key.clone(), other(&at));
                    let e = read(&changed).expect_err("another value is refused");
                    assert!(e.contains(key.as_str()), "{family}: {e}");
                    checked.1 += 1;
                }
                Some(Use::Read) => {
                    // The reader names it (or transformers' other spelling of it, which it reads).
                    let named = |k: &str| source.contains(&format!("\"{k}\""));
                    let spelled = aliases(family).iter().any(|(a, b)| (key == a && named(b)) || (key == b && named(a)));
                    assert!(named(key) || spelled, "{family}: {key} is said to be read, but hf.rs never names it");
                    checked.2 += 1;
                }
                None => panic!("{family}: {key} has no class"),
            }
        }
    }
    // (no effect, default only, read) over the 13 families: each class is exercised in each.
    assert!(checked.0 > 150 && checked.1 >= 4 * FAMILIES.len() && checked.2 > 150, "{checked:?}");
}

#[test]
fn a_key_nobody_knows_is_refused() {
    let mut c = tiny("llama");
    c.insert("quantization_config".into(), serde_json::json!({"load_in_4bit": true}));
    let e = read(&c).expect_err("refused");
    assert!(e.contains("quantization_config") && e.contains("does not know"), "{e}");
    // A mixture's key in a dense family is not read past either.
    let mut c = tiny("llama");
    c.insert("num_experts".into(), Value::from(8));
    assert!(read(&c).expect_err("refused").contains("num_experts"));
}

/// transformers 5 saves Qwen3-MoE's and Mixtral's expert count as `num_local_experts` (its
/// attribute_map reads `num_experts` as that): either spelling gives the same model.
#[test]
fn every_spelling_transformers_reads_is_read() {
    for (family, saved, asked) in
        [("qwen3_moe", "num_local_experts", "num_experts"), ("mixtral", "num_experts", "num_local_experts")]
    {
        let base = tiny(family);
        let want = read(&base).expect("reads");
        let mut other = base.clone();
        let value = other.remove(asked).unwrap_or_else(|| panic!("{family}: the fixture has {asked}"));
        other.insert(saved.into(), value);
        assert_eq!(read(&other), Ok(want), "{family}: {saved} in place of {asked}");
    }
    // GPT-2 read through the LLaMA lineage's names.
    let base = tiny("gpt2");
    let want = read(&base).expect("reads");
    let mut renamed = serde_json::Map::new();
    for (k, v) in &base {
        let k = aliases("gpt2").iter().find(|(_, saved)| saved == k).map_or(k.as_str(), |(asked, _)| asked);
        renamed.insert(k.to_string(), v.clone());
    }
    assert_eq!(read(&renamed), Ok(want));
}

/// Qwen2-MoE's q/k/v biases follow its `qkv_bias`; GPT-2's cross-attention is refused.
#[test]
fn fields_that_change_the_count_are_read() {
    let base = tiny("qwen2_moe");
    let with = read(&base).expect("reads");
    let mut without = base.clone();
    without.insert("qkv_bias".into(), Value::Bool(false));
    let without = read(&without).expect("reads");
    let (h, layers) = (with.arch.hidden, with.arch.layers);
    let kv = with.arch.kv_heads * (with.arch.hidden / with.arch.heads);
    let params = |m: &oomlab::estimate::hf::HfModel| m.arch.parameters();
    assert_eq!(params(&with) - params(&without), layers * (h + 2 * kv), "the q, k and v biases of every layer");
    let mut cross = tiny("gpt2");
    cross.insert("add_cross_attention".into(), Value::Bool(true));
    assert!(read(&cross).expect_err("refused").contains("add_cross_attention"));
}
