//! The estimator's refusals are typed (`oomlab::estimate::error`) and worded by the catalogs:
//! every kind renders in English word for word as before it was typed, and in Chinese; every
//! refusal message is reached; the real code paths give the kinds with their data; the CLI
//! follows the system's language with exit 2, and the app shows a refusal in the reader's.

#[path = "support/cli.rs"]
mod support_cli;
#[path = "support/real_models.rs"]
mod support_real_models;

use std::collections::BTreeSet;

use oomlab::estimate::{Amount, ConfigJsonError, EstimateError, Framework, Size, Unmodelled};
use oomlab::i18n::{Catalog, Lang};

/// One of every kind of refusal, with the English it renders as: the words the estimator used
/// before its errors were typed, kept word for word.
fn examples() -> Vec<(EstimateError, &'static str)> {
    use ConfigJsonError as C;
    use EstimateError as E;
    let fam = || "glm4_moe".to_string();
    let json = |key: &str, value: &str, why| {
        E::Config(C::NotModelled { family: fam(), key: key.into(), value: value.into(), why })
    };
    vec![
        (
            E::OutOfRange { what: Size::MicroBatch, value: 0, max: 1 << 20 },
            "micro-batch must be between 1 and 1048576 (got 0)",
        ),
        (E::AtMost { what: Size::HeadDim, value: 20000, max: 1 << 14 }, "head_dim must be at most 16384 (got 20000)"),
        (
            E::UnknownPrecision { got: "fp8".into() },
            "unknown precision \"fp8\": expected fp32, fp16, bf16 (mixed) or pure-bf16",
        ),
        (E::UnknownOptimizer { got: "lion".into() }, "unknown optimizer \"lion\": expected sgd, momentum or adam"),
        (
            E::SequenceBeyondPositions { seq: 2048, model: "GPT-2".into(), positions: 1024 },
            "sequence length 2048 is longer than GPT-2's position table (1024)",
        ),
        (
            E::TensorParallelDivide { tensor: 3, heads: 32, kv_heads: 8, ffn: 11008 },
            "tensor parallelism 3 must divide the heads (32), the key/value heads (8) and the MLP width (11008)",
        ),
        (E::ExpertParallelNeedsMixture { expert: 2 }, "expert parallelism 2 needs a mixture of experts"),
        (
            E::ExpertParallelDivide { expert: 3, experts: 8, data: 8 },
            "expert parallelism 3 must divide the experts (8) and the data-parallel GPUs (8): its GPUs are \
             data-parallel ones",
        ),
        (E::LoraOnExperts, "LoRA on a mixture's experts is not modelled: adapt the attention (qkv, proj)"),
        (
            E::SequenceParallelDivide { seq: 1000, tensor: 3 },
            "sequence parallelism splits the sequence (1000) over 3 GPUs: it must divide",
        ),
        (
            E::MeasuredContext { bytes: 1 << 41 },
            "a measured CUDA context of 2199023255552 bytes is more than any GPU holds",
        ),
        (
            E::MeasuredFragmentation { percent: 1500.5 },
            "measured fragmentation must be between 0 and 1000 % (got 1500.5)",
        ),
        (E::ZeroStage { stage: 4 }, "ZeRO has stages 0 to 3 (got 4)"),
        (
            E::GradientOffloadAlone,
            "gradient offload needs optimizer offload (the optimizer step must run where the gradients are)",
        ),
        (E::ParameterOffloadNeedsZero3, "parameter offload needs ZeRO stage 3 (it offloads the parameter shards)"),
        (E::CheckpointEvery { k: 40, layers: 32 }, "checkpoint every:40 needs 1 <= K <= the number of layers (32)"),
        (
            E::ProfileFullTraining { framework: Framework::Megatron },
            "the megatron profile models full training without offload (LoRA and offload: zero or deepspeed)",
        ),
        (E::AmpPrecision, "pytorch-amp is mixed precision: choose bf16 or fp16"),
        (E::AmpZero, "pytorch-amp is plain data parallelism: ZeRO stages are deepspeed's or fsdp2's"),
        (
            E::MegatronZero,
            "Megatron's distributed optimizer shards the optimizer state and master weights (--zero 1); for \
             ZeRO-2 or 3 choose deepspeed or fsdp2",
        ),
        (E::Fsdp2Zero, "fsdp2 shards parameters, gradients and optimizer state: ZeRO stage 3"),
        (E::LoraRank { rank: 4096 }, "LoRA rank must be between 1 and hidden - 1 (got 4096)"),
        (E::LoraNoTarget, "LoRA needs at least one target projection"),
        (E::Dropout { value: 1.5 }, "dropout is a probability from 0 up to (not including) 1 (got 1.5)"),
        (E::HeadsDivide { hidden: 100, heads: 3 }, "hidden (100) must be divisible by heads (3)"),
        (
            E::KvHeadsDivide { heads: 32, kv_heads: 5 },
            "heads (32) must be a multiple of kv_heads (5) for grouped-query attention",
        ),
        (
            E::TooManyParameters { model: "huge".into() },
            "huge has more than 2^56 parameters: beyond what oomlab counts",
        ),
        (E::TopK { top_k: 9, experts: 8 }, "top_k (9) cannot be more than the experts (8)"),
        (E::ExpertsNotGated, "the estimator's experts are gated MLPs (SwiGLU or GeGLU)"),
        (E::NoMixtureLayer { model: "m".into() }, "no layer of m has the mixture of experts"),
        (E::DenseWidthMissing, "the dense layers among the mixture's need their MLP width"),
        (
            E::PipelineStages { stages: 40, layers: 32 },
            "pipeline stages must be between 1 and the layers (32) (got 40)",
        ),
        (
            E::InterleavedChunks { chunks: 1 },
            "the interleaved schedule's chunks per stage must be between 2 and 64 (got 1)",
        ),
        (
            E::InterleavedDivide { stages: 4, chunks: 2, layers: 61 },
            "the interleaved schedule needs more than one stage and the layers (61) to divide into stages × \
             chunks (4 × 2)",
        ),
        (
            E::ContextDivide { seq: 1000, context: 3 },
            "context parallelism splits the sequence (1000) over 3 GPUs: it must divide",
        ),
        (
            E::ContextNeedsFused,
            "context parallelism runs fused attention (ring attention and Ulysses are built on it): choose \
             --attention fused",
        ),
        (
            E::UlyssesHeads { heads: 32, kv_heads: 8, context: 16, tensor: 1 },
            "Ulysses splits the heads (32) and key/value heads (8) over the context-parallel GPUs (16, with tensor \
             parallelism 1): they must divide",
        ),
        (E::NoModelPreset { name: "gpt-9".into() }, "no model preset gpt-9"),
        (E::NoGpuPreset { name: "tpu".into() }, "no GPU preset tpu"),
        (
            E::Config(C::TooLong { bytes: 2_000_000, max: 1_048_576 }),
            "config.json is 2000000 bytes, more than the 1048576 read",
        ),
        (
            E::Config(C::NotJson { detail: "EOF while parsing an object at line 1 column 1".into() }),
            "config.json is not JSON: EOF while parsing an object at line 1 column 1",
        ),
        (E::Config(C::NotObject), "config.json is not a JSON object"),
        (E::Config(C::NoModelType), "config.json has no model_type"),
        (
            E::Config(C::UnknownFamily { model_type: "bert".into(), known: "gpt2, llama".into() }),
            "model_type \"bert\" is not modelled yet: oomlab reads gpt2, llama configs",
        ),
        (
            E::Config(C::UnknownKey { family: fam(), key: "new_key".into() }),
            "glm4_moe: new_key is a key oomlab does not know in this family, so it is not read past (it might \
             change memory); remove it if it changes nothing",
        ),
        (
            E::Config(C::Missing { family: fam(), key: "hidden_size".into() }),
            "glm4_moe: config.json has no hidden_size",
        ),
        (
            E::Config(C::NotPositive { family: fam(), key: "hidden_size".into(), got: "-1".into() }),
            "glm4_moe: hidden_size must be a positive whole number (got -1)",
        ),
        (
            E::Config(C::NotWhole { family: fam(), key: "head_dim".into(), got: "1.5".into() }),
            "glm4_moe: head_dim must be a whole number (got 1.5)",
        ),
        (
            E::Config(C::NotBool { family: fam(), key: "attention_bias".into() }),
            "glm4_moe: attention_bias must be true or false",
        ),
        (
            E::Config(C::NotProbability { family: fam(), key: "attention_dropout".into(), got: "1.0".into() }),
            "glm4_moe: attention_dropout must be a probability below 1 (got 1.0)",
        ),
        (
            E::Config(C::RotaryFactor { family: fam(), got: "0".into() }),
            "glm4_moe: partial_rotary_factor must be above 0 and at most 1 (got 0)",
        ),
        (
            json("pretraining_tp", "2", Unmodelled::DefaultOnly("1".into())),
            "glm4_moe: pretraining_tp = 2 is not modelled: only its default, 1, is",
        ),
        (
            json("activation_function", "\"relu\"", Unmodelled::Gpt2Activation),
            "glm4_moe: activation_function = \"relu\" is not modelled: the estimator's GPT-2 MLP is GELU",
        ),
        (
            json("tie_word_embeddings", "false", Unmodelled::Gpt2Untied),
            "glm4_moe: tie_word_embeddings = false is not modelled: GPT2LMHeadModel ties its lm_head whatever \
             this says",
        ),
        (
            json("attn_pdrop", "0.2", Unmodelled::Gpt2Dropouts),
            "glm4_moe: attn_pdrop = 0.2 is not modelled: dropouts that differ from resid_pdrop",
        ),
        (
            json("hidden_act", "\"relu\"", Unmodelled::NeoxActivation),
            "glm4_moe: hidden_act = \"relu\" is not modelled: the estimator's GPT-NeoX MLP is GELU",
        ),
        (
            json("attention_bias", "false", Unmodelled::NeoxAttentionBias),
            "glm4_moe: attention_bias = false is not modelled: biases on the MLP and not on the attention",
        ),
        (
            json("hidden_dropout", "0.1", Unmodelled::NeoxDropouts),
            "glm4_moe: hidden_dropout = 0.1 is not modelled: GPT-NeoX's dropouts (the estimator's GPT-NeoX keeps \
             none)",
        ),
        (
            json("hidden_act", "\"relu\"", Unmodelled::GatedActivation),
            "glm4_moe: hidden_act = \"relu\" is not modelled: the estimator's gated MLPs are SwiGLU (silu) and \
             Gemma's GeGLU",
        ),
        (
            json("mlp_bias", "true", Unmodelled::SomeBiases),
            "glm4_moe: mlp_bias = true is not modelled: biases on some linear layers and not others",
        ),
        (
            json("attention_dropout", "0.1", Unmodelled::Dropout),
            "glm4_moe: attention_dropout = 0.1 is not modelled: dropout in this family (the estimator's keeps \
             none)",
        ),
        (
            json("attn_logit_softcapping", "50.0", Unmodelled::ScoresSoftcapAlone),
            "glm4_moe: attn_logit_softcapping = 50.0 is not modelled: soft-capping the scores alone",
        ),
        (
            json("final_logit_softcapping", "30.0", Unmodelled::LogitsSoftcapAlone),
            "glm4_moe: final_logit_softcapping = 30.0 is not modelled: soft-capping the logits alone",
        ),
        (
            json("num_key_value_heads", "8", Unmodelled::LatentKeyValueHeads),
            "glm4_moe: num_key_value_heads = 8 is not modelled: latent attention expands keys and values to \
             every head",
        ),
        (
            json("moe_layers", "[1,3]", Unmodelled::MoeLayerList),
            "glm4_moe: moe_layers = [1,3] is not modelled: a list other than every interleave_moe_layer_step-th \
             layer",
        ),
        (
            json("no_rope_layers", "[1,0]", Unmodelled::NoRopePattern),
            "glm4_moe: no_rope_layers = [1,0] is not modelled: a pattern other than every \
             no_rope_layer_interval-th layer",
        ),
        (
            json("no_rope_layer_interval", "1", Unmodelled::NoRotaryLayer),
            "glm4_moe: no_rope_layer_interval = 1 is not modelled: a model with no rotary layer at all",
        ),
        (
            json("no_rope_layers", "3", Unmodelled::NoRopeList),
            "glm4_moe: no_rope_layers = 3 is not modelled: a list of 0 and 1 is read",
        ),
        (
            json("no_rope_layers", "[0,0]", Unmodelled::NoRotaryTables),
            "glm4_moe: no_rope_layers = [0,0] is not modelled: a model with no rotary layer at all (no cos/sin \
             tables)",
        ),
        (
            json("output_router_logits", "true", Unmodelled::RouterLogits),
            "glm4_moe: output_router_logits = true is not modelled: the load-balancing loss's saved router logits",
        ),
        (
            json("experts_per_token", "2", Unmodelled::ExpertsPerToken),
            "glm4_moe: experts_per_token = 2 is not modelled: a value other than num_experts_per_tok, which is \
             read",
        ),
        (
            json("router_jitter_noise", "0.1", Unmodelled::RouterJitter),
            "glm4_moe: router_jitter_noise = 0.1 is not modelled: jitter on the router's input",
        ),
        (
            json("n_group", "3", Unmodelled::GroupsDivide),
            "glm4_moe: n_group = 3 is not modelled: groups that do not divide the experts",
        ),
        (
            json("decoder_sparse_step", "2", Unmodelled::DenseAmongMixture),
            "glm4_moe: decoder_sparse_step = 2 is not modelled: dense MLP layers among the mixture's",
        ),
        (
            E::TooLarge { what: Amount::Logits, amount: 1 << 70, limit: 1 << 62 },
            "the logits would be 1180591620717411303424 bytes per GPU: more than oomlab counts \
             (4611686018427387904 bytes at most)",
        ),
    ]
}

/// Every size and amount, each in a refusal (their words are arguments of the refusals').
fn names() -> Vec<EstimateError> {
    use Amount as A;
    use Size as S;
    let sizes = [
        S::MicroBatch,
        S::Sequence,
        S::Accumulation,
        S::DataParallel,
        S::TensorParallel,
        S::PipelineStages,
        S::ContextParallel,
        S::Vocab,
        S::Hidden,
        S::Layers,
        S::Heads,
        S::KvHeads,
        S::Ffn,
        S::Experts,
        S::TopK,
        S::Positions,
        S::HeadDim,
        S::RotaryDims,
        S::SharedExpertWidth,
        S::DenseWidth,
        S::DenseFirst,
        S::MixtureStep,
    ];
    let amounts = [
        A::Peak,
        A::Logits,
        A::LogitsGrad,
        A::Parameters,
        A::Gradients,
        A::OptimizerState,
        A::MasterWeights,
        A::Activations,
        A::Temporaries,
        A::Input,
        A::InFlight,
        A::AutocastCopies,
        A::Communication,
        A::Fragmentation,
        A::WorkingSet,
        A::HostMemory,
        A::PcieTraffic,
        A::Tokens,
        A::SavedForBackward,
    ];
    let sizes = sizes.into_iter().map(|what| EstimateError::OutOfRange { what, value: 0, max: 1 });
    sizes.chain(amounts.into_iter().map(|what| EstimateError::TooLarge { what, amount: 2, limit: 1 })).collect()
}

fn has_cjk(text: &str) -> bool {
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// Runs of digits, and identifiers (words joined by `_`, or naming a `.json` file): what a
/// translation must carry over unchanged.
fn carried(english: &str) -> Vec<&str> {
    let digits = english.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty());
    let words = english.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'));
    let identifiers = words.map(|w| w.trim_end_matches('.')).filter(|w| w.contains('_') || w.ends_with(".json"));
    digits.chain(identifiers).collect()
}

#[test]
fn every_refusal_reads_in_english_as_it_did_before_it_was_typed() {
    let en = Catalog::new(Lang::En);
    for (e, english) in examples() {
        assert_eq!(e.to_string(), english, "{e:?}");
        assert_eq!(e.text(&en), english, "{e:?}");
    }
}

#[test]
fn every_refusal_is_worded_in_chinese_with_its_numbers_and_names() {
    let zh = Catalog::new(Lang::Zh);
    let all = examples().into_iter().map(|(e, _)| e).chain(names());
    for e in all {
        let (english, chinese) = (e.to_string(), e.text(&zh));
        assert!(has_cjk(&chinese), "{e:?} is not in Chinese: {chinese}");
        assert!(!chinese.contains("{"), "{e:?}: a placeholder left in {chinese}");
        for piece in carried(&english) {
            assert!(chinese.contains(piece), "{e:?}: {piece:?} of {english:?} is missing from {chinese:?}");
        }
    }
    // A size or a reason named inside a refusal is worded in the same language.
    let e = EstimateError::OutOfRange { what: Size::Sequence, value: 0, max: 4 };
    assert!(e.text(&zh).starts_with("序列长度"), "{}", e.text(&zh));
}

/// Every refusal's message, every reason, size and amount in en.ftl is reached by a kind of
/// refusal: a message no error renders, or a kind rendering a message the catalog lacks, fails.
#[test]
fn every_refusal_message_is_reached_by_a_kind() {
    let prefixes = ["est-err-", "est-why-", "est-size-", "est-amount-"];
    let catalog: BTreeSet<&str> = include_str!("../i18n/en.ftl")
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(id, _)| id))
        .filter(|id| prefixes.iter().any(|p| id.starts_with(p)))
        .collect();
    let all: Vec<EstimateError> = examples().into_iter().map(|(e, _)| e).chain(names()).collect();
    let reached: BTreeSet<&str> = all.iter().flat_map(EstimateError::keys).collect();
    assert_eq!(reached, catalog);
    assert!(catalog.len() > 100, "the scan lost its way: {}", catalog.len());
}

/// The estimator's own code gives the kinds, with the numbers that say why.
#[test]
fn the_estimator_refuses_with_typed_kinds_and_their_data() {
    use oomlab::estimate::pipeline::Schedule;
    use oomlab::estimate::{Setup, estimate, hf, presets};
    let base = Setup::new(presets::default_model(), presets::default_gpu(), 1, 2048);
    let mut s = base.clone();
    s.parallel.pipeline = 3;
    s.parallel.schedule = Schedule::Interleaved(2);
    assert_eq!(estimate(&s).err(), Some(EstimateError::InterleavedDivide { stages: 3, chunks: 2, layers: 32 }));
    let mut s = base.clone();
    s.parallel.tensor = 3;
    assert_eq!(
        estimate(&s).err(),
        Some(EstimateError::TensorParallelDivide { tensor: 3, heads: 32, kv_heads: 32, ffn: 11008 })
    );
    let mut s = base.clone();
    s.parallel.context = 2;
    assert_eq!(estimate(&s).err(), Some(EstimateError::ContextNeedsFused));
    let mut s = base.clone();
    s.micro_batch = 0;
    assert_eq!(estimate(&s).err(), Some(EstimateError::OutOfRange { what: Size::MicroBatch, value: 0, max: 1 << 20 }));
    // Too large to count: the quantity that passed the limit is named.
    let mut s = base.clone();
    (s.micro_batch, s.seq, s.arch.vocab, s.arch.positions) = (1 << 20, 1 << 20, 1 << 24, 0);
    match estimate(&s) {
        Err(EstimateError::TooLarge { what, amount, limit }) => {
            assert_eq!(what, Amount::Activations, "the activations pass first");
            assert!(amount > limit as u128);
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|e| e.peak_bytes)),
    }
    assert_eq!(
        oomlab::estimate::StatePrecision::parse(" FP8 ").err(),
        Some(EstimateError::UnknownPrecision { got: "fp8".into() })
    );
    // A config.json: an unknown key, a value not modelled, a missing count.
    let config = |extra: &str| {
        format!(
            r#"{{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 100{extra}}}"#
        )
    };
    assert!(hf::from_config(&config(""), "tiny").is_ok());
    let family = || "gpt2".to_string();
    assert_eq!(
        hf::from_config(&config(r#", "bogus_key": 1"#), "tiny").err(),
        Some(EstimateError::Config(ConfigJsonError::UnknownKey { family: family(), key: "bogus_key".into() }))
    );
    assert_eq!(
        hf::from_config(&config(r#", "activation_function": "relu""#), "tiny").err(),
        Some(EstimateError::Config(ConfigJsonError::NotModelled {
            family: family(),
            key: "activation_function".into(),
            value: "\"relu\"".into(),
            why: Unmodelled::Gpt2Activation,
        }))
    );
    let no_width = r#"{"model_type": "gpt2", "n_layer": 2}"#;
    assert_eq!(
        hf::from_config(no_width, "tiny").err(),
        Some(EstimateError::Config(ConfigJsonError::Missing { family: family(), key: "n_embd".into() }))
    );
    assert!(matches!(hf::from_config("[1, 2]", "tiny"), Err(EstimateError::Config(ConfigJsonError::NotObject))));
}

/// The CLI words a refusal in the system's language, exits 2, and keeps the English word for
/// word under any other locale.
#[test]
fn the_cli_refuses_in_the_system_language_with_exit_2() {
    let args = ["estimate", "--pp", "3", "--pp-schedule", "interleaved:2"];
    let out = support_cli::oomlab(&args);
    assert_eq!(out.status.code(), Some(2));
    let english = EstimateError::InterleavedDivide { stages: 3, chunks: 2, layers: 32 }.to_string();
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), format!("error: {english}"));
    let zh = support_cli::oomlab_in("zh_CN.UTF-8", &args);
    assert_eq!(zh.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&zh.stderr);
    assert!(
        stderr.contains("交错式调度需要不止一个阶段") && stderr.contains("（32）") && stderr.contains("3 × 2"),
        "{stderr}"
    );
    // A config.json's refusal: the file named, the reason in the system's language.
    let dir = std::env::temp_dir().join(format!("oomlab-refusal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("config.json");
    std::fs::write(&file, r#"{"model_type": "bert"}"#).expect("config");
    let out = support_cli::oomlab(&["estimate", "--model", file.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("config.json: model_type \"bert\" is not modelled yet: oomlab reads gpt2, gpt_neox"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The app's Real models view shows a refusal in the reader's language: one the setup's checks
/// give, and one the estimate itself gives (a size beyond what oomlab counts, which the view
/// used to leave blank).
#[test]
fn the_app_shows_a_refusal_in_the_readers_language() {
    use egui_kittest::kittest::Queryable;
    let mut h = support_real_models::harness();
    h.state_mut().set_lang(Lang::Zh);
    h.state_mut().edit_settings(|s| s.estimate.0.parallel.tensor = 3);
    h.run_steps(4);
    h.get_by_label_contains("无法估算这一配置：张量并行数 3 必须整除注意力头数（32）");
    h.snapshot("real_models_refusal_zh");
    h.state_mut().edit_settings(|settings| {
        let s = &mut settings.estimate.0;
        s.parallel.tensor = 1;
        (s.micro_batch, s.seq, s.arch.vocab, s.arch.positions) = (1 << 20, 1 << 20, 1 << 24, 0);
    });
    h.run_steps(4);
    h.get_by_label_contains("无法估算这一配置：激活值：每块 GPU 上将达");
    h.state_mut().set_lang(Lang::En);
    h.run_steps(4);
    h.get_by_label_contains("This configuration cannot be estimated: activations would be");
}
