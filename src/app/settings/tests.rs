//! The settings' tests: kept buildable, links read back, suggestions applied.

use super::*;

const V: usize = 58;

#[test]
fn normalize_and_suggestions_keep_the_settings_buildable() {
    let mut s = Settings { batch: 12, accum: 8, seq: 999, ..Settings::default() };
    door::rules(&mut s);
    assert_eq!((s.accum, s.seq), (6, s.dims.max_seq), "the largest divisor of 12 not above 8");
    assert!(s.plan(V).is_ok());
    // A suggestion, then the rules (as the door applies them).
    let suggest = |s: &mut Settings, suggestion| {
        s.apply(suggestion);
        door::rules(s);
    };
    suggest(&mut s, Suggestion::SmallerBatch);
    assert_eq!((s.batch, s.accum), (6, 6));
    suggest(&mut s, Suggestion::SmallerBatch);
    assert_eq!((s.batch, s.accum), (3, 3));
    suggest(&mut s, Suggestion::SmallerBatch);
    suggest(&mut s, Suggestion::SmallerBatch);
    assert_eq!((s.batch, s.accum), (1, 1), "never below one sequence");
    s.checkpoint = Checkpoint::Selective;
    suggest(&mut s, Suggestion::FusedAttention);
    assert_eq!((s.attention, s.checkpoint), (AttentionKind::Fused, Checkpoint::Off));
    assert!(s.plan(V).is_ok(), "fused attention with selective recomputation would be refused");
    suggest(&mut s, Suggestion::MixedPrecision);
    assert_eq!(s.precision, Precision::Bf16);
    assert_eq!(s.batches().map(|b| (b.micro_batch(), b.per_gpu_batch())), Ok((1, 1)));
    let split = Settings { batch: 48, accum: 4, ..s.clone() };
    let split = Settings {
        device: DeviceSettings { parallel: crate::plan::Parallel { gpus: 2, ..Default::default() }, ..split.device },
        ..split
    };
    let b = split.batches().expect("48 splits in 4");
    assert_eq!((b.micro_batch(), b.per_gpu_batch(), b.global_batch()), (12, 48, 96), "the slider's batch is per GPU");
}

fn en() -> crate::i18n::Catalog {
    crate::i18n::Catalog::new(crate::i18n::Lang::En)
}

#[test]
fn url_hash_round_trips() {
    let s = Settings {
        batch: 48,
        accum: 4,
        checkpoint: Checkpoint::Every(2),
        precision: Precision::Bf16,
        attention: AttentionKind::Fused,
        lora_rank: 4,
        prefs: Prefs { projector: true, reduced_motion: true, high_contrast: true, text_percent: 175 },
        ..Settings::default()
    };
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
    assert_eq!(back, s);
    assert_eq!(notice, None);
    assert_eq!(Settings::from_url_hash("", V), (Settings::default(), None));
    assert_eq!(Settings::from_url_hash("#train=2", V), (Settings::default(), None));
    assert_eq!(Settings::from_url_hash("#lang=zh&train=2", V), (Settings::default(), None));
    assert!(!Settings::url_hash_carries_settings("#lang=zh&train=2"));
    assert_eq!(Settings::from_url_hash("#teach&lesson=2", V), (Settings::default(), None), "a class");
    let keyed = "#teach&key=0123456789abcdef0123456789abcdef";
    assert_eq!(Settings::from_url_hash(keyed, V), (Settings::default(), None), "the server's key is no setting");
    assert!(Settings::url_hash_carries_settings(&format!("{}&lang=zh", s.to_url_hash())));
    let (back, notice) = Settings::from_url_hash(&format!("{}&lang=zh", s.to_url_hash()), V);
    assert_eq!((back, notice), (s.clone(), None));
}

#[test]
fn the_device_travels_in_a_link_and_older_links_keep_their_budget() {
    let allocator = AllocatorConfig::parse("expandable_segments:True,garbage_collection_threshold:0.6").expect("valid");
    let device = DeviceSettings { budget_bytes: 48 << 20, allocator, ..DeviceSettings::default() };
    let s = Settings { device, ..Settings::default() };
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
    assert_eq!((back.device, notice), (s.device, None));
    assert_eq!(back.techniques().allocator, allocator, "the step's techniques carry the options");
    // The budget stays at the JSON's top level, where links made before the options put it.
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["budget_bytes"], 48 << 20);
    let old = serde_json::json!({ "batch": 32, "budget_bytes": 32u64 << 20 });
    let hash = format!("#s={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(old.to_string()));
    let (back, notice) = Settings::from_url_hash(&hash, V);
    assert_eq!((back.batch, back.device, notice), (32, DeviceSettings::with_budget(32 << 20), None));
    // An option out of range in a tampered link: the defaults, and a notice saying why.
    let bad = serde_json::json!({ "allocator": { "garbage_collection_threshold": 4.0 } });
    let hash = format!("#s={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bad.to_string()));
    let (back, notice) = Settings::from_url_hash(&hash, V);
    assert_eq!(back, Settings::default());
    assert!(notice.is_some_and(|n| n.text(&en()).contains("garbage_collection_threshold:4")));
}

#[test]
fn tampered_hashes_fall_back_with_a_notice() {
    let good = Settings::default().to_url_hash();
    let mut cases = vec![
        "#s=!!!".to_string(),
        "#s=".to_string(),
        "#nothing".to_string(),
        format!("{}xyz", &good[..good.len() - 3]),
        "#s=eyJiYXRjaCI6LTF9".to_string(), // {"batch":-1}
    ];
    // Settings that decode but cannot be built: heads that do not divide d_model.
    let bad = Settings { dims: ModelDims { d_model: 65, ..Preset::Tiny.dims() }, ..Settings::default() };
    cases.push(bad.to_url_hash());
    for hash in cases {
        let (s, notice) = Settings::from_url_hash(&hash, V);
        assert_eq!(s, Settings::default(), "{hash}");
        let notice = notice.expect("a notice");
        assert!(notice.text(&en()).contains("defaults"), "{hash}");
        // The same notice in Chinese: the frame translated, a library's detail as it came.
        let zh = notice.text(&crate::i18n::Catalog::new(crate::i18n::Lang::Zh));
        assert!(zh.contains("默认设置") && !zh.contains("defaults"), "{zh}");
    }
    // Out of range: clamped, with a notice.
    let huge = Settings { batch: 1 << 40, ..Settings::default() };
    let (s, notice) = Settings::from_url_hash(&huge.to_url_hash(), V);
    assert_eq!(s.batch, MAX_BATCH);
    assert!(notice.is_some());
}

#[test]
fn a_link_switches_preferences_on_never_off() {
    let mine = Prefs { projector: false, reduced_motion: true, high_contrast: false, text_percent: 200 };
    let link = Prefs { projector: true, reduced_motion: false, high_contrast: true, text_percent: 150 };
    let both = Prefs { projector: true, reduced_motion: true, high_contrast: true, text_percent: 200 };
    assert_eq!(link.merged(mine), both);
    assert_eq!(Prefs::default().merged(Prefs::default()), Prefs::default());
    // A page opened from a teacher's link: the link's setup, the student's needs kept, the
    // browser's reduced motion added.
    let remembered = Settings { batch: 4, prefs: mine, ..Settings::default() };
    let teacher = Settings { batch: 32, prefs: link, ..Settings::default() };
    let system = Prefs { reduced_motion: true, ..Prefs::default() };
    let opened = Settings::opened(remembered.clone(), Some(teacher), system);
    assert_eq!((opened.batch, opened.prefs), (32, both));
    let opened = Settings::opened(remembered, None, Prefs::default());
    assert_eq!((opened.batch, opened.prefs), (4, mine));
    // A tampered text size: within 100–200 %, on the control's steps, with a notice.
    for (asked, kept) in [(0, 100), (60_000, 200), (130, 125)] {
        let s = Settings { prefs: Prefs { text_percent: asked, ..Prefs::default() }, ..Settings::default() };
        let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
        assert_eq!((back.prefs.text_percent, notice.is_some()), (kept, true), "{asked}");
        assert_eq!(back.prefs.text_scale(), f32::from(kept) / 100.0);
    }
}

#[test]
fn a_bad_real_model_part_falls_back_alone() {
    let mut s = Settings { batch: 32, ..Settings::default() };
    s.estimate.parallel.tensor = 3; // divides neither LLaMA-2 7B's 32 heads nor its MLP width
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
    assert_eq!(back.batch, 32, "the toy's part is kept");
    assert_eq!(back.estimate, super::real_model::EstimateSettings::default());
    let notice = notice.expect("a notice");
    assert!(notice.text(&en()).contains("real-model settings"));
    // The reason in the reader's language, re-worded when the language changes.
    let zh = crate::i18n::Catalog::new(crate::i18n::Lang::Zh);
    assert!(notice.text(&zh).contains("张量并行数 3 必须整除"), "{}", notice.text(&zh));
    assert!(notice.text(&en()).contains("tensor parallelism 3 must divide"));
    // A good real-model part round-trips.
    let mut s = Settings::default();
    s.estimate.micro_batch = 4;
    s.estimate.parallel.zero = 2;
    s.estimate.lora = Some(crate::estimate::Adapters { rank: 16, qkv: true, proj: true, mlp: true, quantized: true });
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
    assert_eq!((back, notice), (s, None));
    // Out of range: clamped.
    let mut s = Settings::default();
    s.estimate.micro_batch = u64::MAX;
    let (back, notice) = Settings::from_url_hash(&s.to_url_hash(), V);
    assert_eq!(back.estimate.micro_batch, crate::estimate::MAX_BATCH);
    assert!(notice.is_some());
}

/// Links written before the estimator's setup was called `estimate` name it `real`.
#[test]
fn an_older_link_still_opens_its_estimator_setup() {
    let mut s = Settings::default();
    s.estimate.micro_batch = 3;
    let json = serde_json::to_string(&s).expect("JSON").replace("\"estimate\":", "\"real\":");
    assert!(json.contains("\"real\":"));
    let hash = format!("#s={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json));
    assert_eq!(Settings::from_url_hash(&hash, V), (s, None));
}

#[test]
fn random_hashes_never_panic() {
    let mut rng = crate::model::init::Rng::new(3);
    let alphabet: Vec<char> =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=#&%{}\"".chars().collect();
    let good = Settings::default().to_url_hash();
    for i in 0..2000 {
        let hash: String = if i % 2 == 0 {
            (0..rng.below(80)).map(|_| alphabet[rng.below(alphabet.len())]).collect()
        } else {
            // Flip characters of a valid hash.
            let mut chars: Vec<char> = good.chars().collect();
            for _ in 0..=rng.below(4) {
                let k = 3 + rng.below(chars.len() - 3);
                chars[k] = alphabet[rng.below(alphabet.len())];
            }
            chars.into_iter().collect()
        };
        let (s, _) = Settings::from_url_hash(&format!("#s={hash}"), V);
        assert!(s.plan(V).is_ok(), "{hash}");
        assert!(s.estimate.setup().is_ok(), "{hash}");
    }
}
