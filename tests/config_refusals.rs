//! The toy's configuration refusals are typed (`oomlab::plan::ConfigError`: the model's shape,
//! a setting's name, the techniques, the allocator's options, each its layer's own) and worded by the
//! catalogs: every kind reads in English as it did before (the CLI's and the library's words),
//! and in Chinese with the same numbers and names; every message is reached by a kind; the app
//! shows the toy's refusal in the reader's language.

#[path = "support/xdg.rs"]
mod support_xdg;

use std::collections::BTreeSet;

use oomlab::i18n::{Catalog, Lang};
use oomlab::model::{Dim, DocStartsWhy, Planned, Setting, ShapeError as S, UnknownName};
use oomlab::plan::allocator::AllocatorConfigError as A;
use oomlab::plan::{ConfigError as C, Range, Technique, TechniqueError as T};

/// One of every kind, with the English it reads as.
fn examples() -> Vec<(C, &'static str)> {
    vec![
        (
            C::Reported(C::Shape(S::HeadsDontDivide { d_model: 64, n_heads: 3 }).worded()),
            "d_model (64) must be divisible by n_heads (3)",
        ),
        (C::Shape(S::Zero { name: Dim::Batch, value: 0 }), "batch must be at least 1 (got 0)"),
        // A serving step's (plan/serving.rs makes each of them).
        (C::Shape(S::Zero { name: Dim::BlockSize, value: 0 }), "block size (tokens) must be at least 1 (got 0)"),
        (C::Shape(S::Zero { name: Dim::CacheSlots, value: 0 }), "KV cache slots must be at least 1 (got 0)"),
        (C::Shape(S::Zero { name: Dim::TableWidth, value: 0 }), "blocks in a block table must be at least 1 (got 0)"),
        (
            C::Shape(S::SizeLimit { what: Planned::KvCache, amount: 1 << 60, limit: 1 << 58 }),
            "one tensor of the KV cache (slots × 2 × d) or its block tables would be 1152921504606846976 elements: \
             more than oomlab plans (288230376151711744 elements at most)",
        ),
        (
            C::Shape(S::TooLarge { name: Dim::DModel, value: 1 << 21 }),
            "d_model = 2097152 is absurdly large (the limit is 1048576)",
        ),
        (C::Shape(S::HeadsDontDivide { d_model: 64, n_heads: 3 }), "d_model (64) must be divisible by n_heads (3)"),
        (
            C::Shape(S::SequenceTooLong { got: 65, max: 64 }),
            "sequence length 65 is longer than the model's maximum seq_len 64",
        ),
        (
            C::Shape(S::TokenOutOfRange { id: 70, position: 3, vocab: 65 }),
            "token id 70 at position 3 is out of range for a vocabulary of 65",
        ),
        (
            C::Shape(S::SizeLimit { what: Planned::AttentionProbabilities, amount: 1 << 60, limit: 1 << 58 }),
            "one tensor of the attention probabilities (batch × heads × sequence²) would be 1152921504606846976 \
             elements: more than oomlab plans (288230376151711744 elements at most)",
        ),
        (
            C::Shape(S::SizeLimit {
                what: Planned::Step { layers: 4096, micro_batches: 8 },
                amount: 2_000_000,
                limit: 1_000_000,
            }),
            "a step of 4096 layers × 8 micro-batches would be 2000000 ops: more than oomlab plans (1000000 ops at \
             most)",
        ),
        (
            C::Name(UnknownName { what: Setting::Checkpointing, got: "sometimes".into() }),
            "unknown checkpointing mode \"sometimes\": expected off, blocks, every:K (K blocks per segment) or \
             selective",
        ),
        (
            C::Name(UnknownName { what: Setting::LoraTarget, got: "ffn".into() }),
            "unknown LoRA target \"ffn\": expected qkv, proj, mlp or all",
        ),
        (
            C::Name(UnknownName { what: Setting::Backend, got: "tpu".into() }),
            "unknown backend \"tpu\": expected \"gpu\" or \"cpu\"",
        ),
        (
            C::Name(UnknownName { what: Setting::Offload, got: "disk".into() }),
            "unknown offload \"disk\": expected none, optimizer or optimizer+gradients",
        ),
        (
            C::Name(UnknownName { what: Setting::Batching, got: "random".into() }),
            "unknown batching \"random\": expected windows, padded, bucketed or packed",
        ),
        (
            C::Name(UnknownName { what: Setting::Attention, got: "sparse".into() }),
            "unknown attention \"sparse\": expected standard or fused",
        ),
        (
            C::Name(UnknownName { what: Setting::Precision, got: "fp8".into() }),
            "unknown precision \"fp8\": expected fp32, fp16 or bf16",
        ),
        (
            C::Technique(T::AccumDoesNotDivide { batch: 16, accum: 3 }),
            "batch 16 cannot be split into 3 equal micro-batches: the batch must be a multiple of the accumulation \
             steps",
        ),
        (
            C::Technique(T::CheckpointEvery { k: 3, layers: 2 }),
            "checkpoint every:3 needs 1 <= K <= the number of layers (2)",
        ),
        (
            C::Technique(T::LoraRankNotLow { rank: 64, d_model: 64 }),
            "LoRA rank 64 is not low: it must be below d_model (64)",
        ),
        (C::Technique(T::LoraAlpha { alpha: -1.5 }), "LoRA alpha must be positive (got -1.5)"),
        (C::AllocatorOption(A::NotKeyValue("x".into())), "allocator option \"x\": expected key:value"),
        (
            C::AllocatorOption(A::Unknown("roundup_power2_divisions".into())),
            "unknown allocator option \"roundup_power2_divisions\" (oomlab simulates max_split_size_mb, \
             garbage_collection_threshold and expandable_segments)",
        ),
        (
            C::AllocatorOption(A::MaxSplit("10".into())),
            "max_split_size_mb:10: must be a whole number of MiB greater than 20 (PyTorch's rule: a split block is \
             at least kLargeBuffer, 20 MiB)",
        ),
        (
            C::AllocatorOption(A::Threshold("1.5".into())),
            "garbage_collection_threshold:1.5: must be a number between 0 and 1, exclusive",
        ),
        (C::AllocatorOption(A::Expandable("yes".into())), "expandable_segments:yes: must be True or False"),
        (C::Technique(T::Gpus { gpus: 99, max: 8 }), "data parallelism simulates 1 to 8 GPUs (got 99)"),
        (C::Technique(T::ZeroStage { stage: 4 }), "ZeRO has stages 0 to 3 (got 4)"),
        (
            C::Technique(T::Bucket { elems: 3, min: 64, max: 1 << 30 }),
            "the communication bucket must be a multiple of 64 elements, between 64 and 1073741824 (got 3)",
        ),
        (
            C::Technique(T::NotWithSeveralGpus { what: Technique::PaddedBatches }),
            "padded and bucketed batches is not simulated over several GPUs: use one GPU for it",
        ),
        (
            C::Technique(T::NotWithSeveralGpus { what: Technique::Lora }),
            "LoRA is not simulated over several GPUs: use one GPU for it",
        ),
        (
            C::Technique(T::NotWithSeveralGpus { what: Technique::Offload }),
            "offload to host memory is not simulated over several GPUs: use one GPU for it",
        ),
        (
            C::Technique(T::NotWithSeveralGpus { what: Technique::Fp16LossScaling }),
            "fp16's loss scaling is not simulated over several GPUs: use one GPU for it",
        ),
        (
            C::Shape(S::DocStarts(DocStartsWhy::NotAStart)),
            "a document start that is none: a packed batch (--batching packed) has each position's document start, \
             and only it has them",
        ),
        (
            C::Shape(S::DocStarts(DocStartsWhy::NoStarts)),
            "the batch has no document starts: a packed batch (--batching packed) has each position's document \
             start, and only it has them",
        ),
        (
            C::Shape(S::DocStarts(DocStartsWhy::NotPacked)),
            "the plan's rows are not packed: a packed batch (--batching packed) has each position's document start, \
             and only it has them",
        ),
        (
            C::Technique(T::OffloadWith { what: Technique::Lora }),
            "offload to host memory does not run with LoRA in oomlab: turn one of them off",
        ),
        (
            C::Technique(T::OffloadWith { what: Technique::Fp16LossScaling }),
            "offload to host memory does not run with fp16's loss scaling (use bf16) in oomlab: turn one of them off",
        ),
        (C::Technique(T::LoraNoTargets), "LoRA needs at least one target projection"),
        (
            C::Technique(T::FusedWithSelective),
            "selective checkpointing recomputes the attention probabilities, but fused attention never stores them \
             (it already recomputes the scores in its backward pass): use one or the other",
        ),
        (
            C::Technique(T::FusedHeadTooLarge { max: 128, head_size: 256, d_model: 512, n_heads: 2 }),
            "fused attention holds a head in registers and supports head sizes up to 128; this model's is 256 \
             (d_model 512 / 2 heads)",
        ),
        (
            C::Technique(T::Optimizer { name: "lr", value: -0.5, range: Range::PositiveNumber }),
            "invalid optimizer setting: lr = -0.5 (it must be a positive number)",
        ),
        (
            C::Technique(T::Optimizer { name: "beta1", value: 1.0, range: Range::Unit }),
            "invalid optimizer setting: beta1 = 1 (it must be in [0, 1))",
        ),
        (
            C::Technique(T::Optimizer { name: "eps", value: 0.0, range: Range::Positive }),
            "invalid optimizer setting: eps = 0 (it must be positive)",
        ),
        (
            C::Technique(T::Optimizer { name: "weight_decay", value: -1.0, range: Range::NonNegative }),
            "invalid optimizer setting: weight_decay = -1 (it must be zero or positive)",
        ),
        (C::Shape(S::NotInVocabulary('€')), "character '€' is not in the vocabulary"),
        (C::Shape(S::CorpusTooShort { tokens: 10, seq: 64 }), "the corpus has 10 tokens, too few for sequences of 64"),
        (
            C::Shape(S::BatchTooLargeForHost { rows: 1 << 40 }),
            "a batch of 1099511627776 tokens does not fit in this machine's host memory",
        ),
        (
            C::Shape(S::BatchLength { inputs: 3, targets: 4, expected: 5 }),
            "batch holds 3 inputs and 4 targets, expected 5",
        ),
    ]
}

/// Every dimension and planned tensor, each in a refusal (their words are its arguments).
fn names() -> Vec<C> {
    let dims = [
        Dim::Vocab,
        Dim::SeqLen,
        Dim::DModel,
        Dim::NLayers,
        Dim::NHeads,
        Dim::Batch,
        Dim::Sequence,
        Dim::CheckpointEvery,
        Dim::Accumulation,
        Dim::LoraRank,
        Dim::EffectiveBatch,
        Dim::GlobalBatch,
    ];
    let planned = [
        Planned::Parameters,
        Planned::AttentionProbabilities,
        Planned::Logits,
        Planned::MlpActivations,
        Planned::LoraAdapters,
    ];
    let dims = dims.into_iter().map(|name| C::Shape(S::Zero { name, value: 0 }));
    dims.chain(planned.into_iter().map(|what| C::Shape(S::SizeLimit { what, amount: 2, limit: 1 }))).collect()
}

#[test]
fn every_config_refusal_reads_in_english_as_before() {
    let en = Catalog::new(Lang::En);
    for (e, english) in examples() {
        assert_eq!(e.to_string(), english, "{e:?}");
        assert_eq!(e.text(&en), english, "{e:?}");
    }
    // The allocator's own errors read as their message inside the configuration's.
    assert_eq!(A::Expandable("yes".into()).to_string(), "expandable_segments:yes: must be True or False");
}

#[test]
fn every_config_refusal_is_worded_in_chinese_with_its_numbers_and_names() {
    let zh = Catalog::new(Lang::Zh);
    let all = examples().into_iter().skip(1).map(|(e, _)| e).chain(names());
    for e in all {
        let (english, chinese) = (e.to_string(), e.text(&zh));
        assert!(chinese.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "{e:?}: {chinese}");
        let digits = english.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty());
        let words = english.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        for piece in digits.chain(words.filter(|w| w.contains('_'))) {
            assert!(chinese.contains(piece), "{e:?}: {piece:?} of {english:?} is missing from {chinese:?}");
        }
    }
    // What the worker reports crosses as its catalog message (JSON, as the worker sends it), and
    // reads in the page's language as the error itself does, names inside it included.
    for e in examples().into_iter().map(|(e, _)| e).chain(names()) {
        let json = serde_json::to_string(&e.worded()).expect("a worded message serialises");
        let crossed = C::Reported(serde_json::from_str(&json).expect("and reads back"));
        assert_eq!(crossed.text(&zh), e.text(&zh), "{json}");
        assert_eq!(crossed.to_string(), e.to_string(), "{json}");
        assert!(!json.contains(&e.to_string()), "keys and values cross, not the English: {json}");
    }
}

#[test]
fn every_config_refusal_message_is_reached_by_a_kind() {
    let prefixes = ["cfg-err-", "cfg-dim-", "cfg-planned-", "cfg-tech-", "cfg-starts-", "cfg-range-"];
    let catalog: BTreeSet<&str> = include_str!("../i18n/en.ftl")
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(id, _)| id))
        .filter(|id| prefixes.iter().any(|p| id.starts_with(p)))
        .collect();
    let all: Vec<C> = examples().into_iter().map(|(e, _)| e).chain(names()).collect();
    let reached: BTreeSet<String> = all.iter().flat_map(C::keys).filter(|k| k.starts_with("cfg-")).collect();
    let catalog: BTreeSet<String> = catalog.into_iter().map(str::to_owned).collect();
    assert_eq!(reached, catalog);
    // Two kinds say what the estimator says, in its words.
    let shared: BTreeSet<String> = all.iter().flat_map(C::keys).filter(|k| !k.starts_with("cfg-")).collect();
    let words = ["est-err-checkpoint-every", "est-err-lora-no-target", "est-err-zero-stage"];
    assert_eq!(shared, words.into_iter().map(str::to_owned).collect());
}

/// The toy's own checks give the kinds with their data.
#[test]
fn the_toy_refuses_with_typed_kinds() {
    use oomlab::model::ModelConfig;
    let m = ModelConfig { n_heads: 3, ..ModelConfig::toy(65) };
    assert_eq!(m.validate(), Err(S::HeadsDontDivide { d_model: 64, n_heads: 3 }));
    let m = ModelConfig { vocab: 0, ..ModelConfig::toy(65) };
    assert_eq!(m.validate(), Err(S::Zero { name: Dim::Vocab, value: 0 }));
    assert_eq!(
        oomlab::plan::Checkpoint::parse("sometimes", 2),
        Err(C::Name(UnknownName { what: Setting::Checkpointing, got: "sometimes".into() }))
    );
    assert_eq!(
        oomlab::plan::AllocatorConfig::parse("expandable_segments:yes").err(),
        Some(A::Expandable("yes".into()))
    );
}

/// The app's main area refuses an impossible toy in the reader's language, and re-words it when
/// the language changes.
#[test]
fn the_app_refuses_an_impossible_toy_in_the_readers_language() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::OomlabApp;
    use oomlab::app::settings::Settings;
    support_xdg::xdg();
    let mut settings = Settings::default();
    settings.dims.n_heads = 3;
    let mut h = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    h.state_mut().set_lang(Lang::Zh);
    h.run_steps(3);
    h.get_by_label_contains("d_model（64）必须能被注意力头数 n_heads（3）整除");
    h.snapshot("toy_refusal_zh");
    h.state_mut().set_lang(Lang::En);
    h.run_steps(3);
    h.get_by_label_contains("d_model (64) must be divisible by n_heads (3)");
}

/// The CPU backend's host shortfall: its sizes worded in the reader's language, in the frame the
/// app shows a failed step in (`Notice::Host`); the CLI keeps its English (exit 3).
#[test]
fn the_hosts_shortfall_is_worded_in_both_languages() {
    use oomlab::backend::HostShortfall;
    let step = HostShortfall::Step { needed: 3 << 30, reserved: 2 << 30, per_byte: 1, available: 1 << 30 };
    assert_eq!(
        step.to_string(),
        "the CPU backend holds the step in host memory: it needs 3.00 GiB (2.00 GiB of device memory reserved, 1 \
         host byte(s) per byte, and the batch) but the host has 1.00 GiB available. Use a smaller batch, or the GPU \
         backend."
    );
    let tensor = |indices| HostShortfall::Tensor { tensor: "h.0.attn.qkv".into(), bytes: 1 << 20, indices };
    assert_eq!(tensor(false).to_string(), "the host could not allocate tensor 'h.0.attn.qkv' (1.00 MiB)");
    assert_eq!(tensor(true).to_string(), "the host could not allocate the indices of tensor 'h.0.attn.qkv' (1.00 MiB)");
    let zh = Catalog::new(Lang::Zh);
    let shown = zh.format_text("error-host", &[("error", step.text(&zh))]);
    assert_eq!(
        shown,
        "主机内存放不下这一步：CPU 后端把这一步放在主机内存中：它需要 3.00 GiB（预留的设备显存 2.00 GiB，每字节 1 \
         字节主机内存，再加上 batch），但主机只有 1.00 GiB 可用。请用更小的 batch，或用 GPU 后端。"
    );
    for indices in [false, true] {
        let text = tensor(indices).text(&zh);
        assert!(text.contains("主机无法") && text.contains("'h.0.attn.qkv'（1.00 MiB）"), "{text}");
    }
}
