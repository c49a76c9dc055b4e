//! The one door to the settings: from any valid settings, every change the app can send — a
//! control's edit, a key, a lesson's or a challenge's setup, an OOM panel's suggestion, a
//! dropped config.json — leaves settings the rules have seen, whose plan builds (or whose
//! refusal is one the controls allow and the app shows). Driven by seeded random sequences, and
//! on a phone, where the shortcut once went round the rules.

#[path = "support/xdg.rs"]
mod support_xdg;

use egui::{Key, Modifiers};
use egui_kittest::Harness;
use oomlab::app::settings::door::{self, Change, Door};
use oomlab::app::settings::real_model::EstimateSettings;
use oomlab::app::settings::{Preset, Suggestion};
use oomlab::app::teaching::{challenges, chapters};
use oomlab::app::{OomlabApp, Settings};
use oomlab::i18n::{Catalog, Lang};
use oomlab::model::ShapeError;
use oomlab::plan::{AttentionKind, Checkpoint, Precision};
use oomlab::plan::{ConfigError, TechniqueError};

const VOCAB: usize = 58;

/// A small deterministic generator (xorshift64*), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SUGGESTIONS: [Suggestion; 6] = [
    Suggestion::Checkpointing,
    Suggestion::FusedAttention,
    Suggestion::Accumulation,
    Suggestion::MixedPrecision,
    Suggestion::SmallerBatch,
    Suggestion::ExpandableSegments,
];

/// One change the app can send, as its source would make it from `s`.
fn any_change(rng: &mut Rng, s: &Settings) -> Change {
    let edit = |f: &dyn Fn(&mut Settings)| {
        let mut e = s.clone();
        f(&mut e);
        Change::Edited(Box::new(e))
    };
    match rng.below(12) {
        0 => Change::DoubleBatch,
        1 => Change::HalveBatch,
        2 => Change::Projector,
        3 => Change::Suggest(SUGGESTIONS[rng.below(SUGGESTIONS.len())]),
        // A lesson chapter's setup, as opening it writes it (the preferences kept).
        4 => {
            let all = chapters();
            let setup = all[rng.below(all.len())].setup;
            edit(&|e| e.keeping_prefs(setup))
        }
        // A challenge's start.
        5 => {
            let all = challenges();
            let start = all[rng.below(all.len())].start;
            edit(&|e| e.keeping_prefs(start))
        }
        // The controls: the batch slider (1 to 1,024), the accumulation field, the sequence.
        6 => {
            let batch = 1 + rng.below(1024);
            edit(&|e| e.batch = batch)
        }
        7 => {
            let accum = 1 + rng.below(64);
            edit(&|e| e.accum = accum)
        }
        8 => {
            let seq = 1 + rng.below(s.dims.max_seq.max(1) * 2);
            edit(&|e| e.seq = seq)
        }
        9 => {
            let (p, c, a) = (rng.below(3), rng.below(3), rng.below(2));
            edit(&|e| {
                e.precision = [Precision::Fp32, Precision::Fp16, Precision::Bf16][p];
                e.checkpoint = [Checkpoint::Off, Checkpoint::BLOCKS, Checkpoint::Selective][c];
                e.attention = [AttentionKind::Standard, AttentionKind::Fused][a];
            })
        }
        10 => {
            let presets = [Preset::Tiny, Preset::Small, Preset::Medium];
            let preset = presets[rng.below(presets.len())];
            edit(&|e| e.dims = preset.dims())
        }
        // A config.json dropped on the Snapshot tab: a micro-batch of its own.
        _ => {
            let mut setup = EstimateSettings::default().0;
            setup.micro_batch = 1 + rng.below(64) as u64;
            Change::RealModel(Box::new(EstimateSettings(setup)))
        }
    }
}

/// What the rules guarantee, whatever came through the door.
fn check(s: &Settings, seed: u64, k: usize, what: &Change, refused: &mut usize) {
    let mut again = s.clone();
    door::rules(&mut again);
    assert_eq!(&again, s, "seed {seed}, change {k} ({what:?}): settings the rules had not seen");
    match s.plan(VOCAB) {
        Ok(_) => {}
        // What the rules keep — an accumulation that divides the batch, a sequence within the
        // model, the controls' bounds — is never refused.
        Err(
            e @ (ConfigError::Technique(TechniqueError::AccumDoesNotDivide { .. })
            | ConfigError::Shape(ShapeError::SequenceTooLong { .. })),
        ) => {
            panic!("seed {seed}, change {k} ({what:?}): refused for what the rules keep: {e}")
        }
        // The controls let a student combine what cannot run together (fused attention with
        // selective recomputation): the app shows that refusal, in the reader's language.
        Err(e) => {
            let (en, zh) = (e.text(&Catalog::new(Lang::En)), e.text(&Catalog::new(Lang::Zh)));
            assert!(!en.is_empty() && zh != en, "seed {seed}, change {k}: a refusal without words: {e:?}");
            *refused += 1;
        }
    }
    assert!(s.estimate.setup().is_ok(), "seed {seed}, change {k}: the Real models view's setup is refused");
}

#[test]
fn every_change_through_the_door_leaves_settings_the_rules_have_seen() {
    let starts: Vec<Settings> = std::iter::once(Settings::default())
        .chain(chapters().iter().map(|c| {
            let mut s = Settings::default();
            s.keeping_prefs(c.setup);
            s
        }))
        .collect();
    let (mut applied, mut refused) = (0, 0);
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut s = starts[rng.below(starts.len())].clone();
        door::rules(&mut s);
        let mut door = Door::default();
        for k in 0..60 {
            let change = any_change(&mut rng, &s);
            door.send(change.clone());
            door.apply(&mut s, |_| {});
            check(&s, seed, k, &change, &mut refused);
            applied += 1;
        }
    }
    assert_eq!(applied, 2400);
    // Most of the sequences' settings build; some are refusals the controls allow.
    assert!(refused < applied / 2, "{refused} of {applied} refused");
}

/// The case that went round the rules: batch 16 in 16 micro-batches, halved by Shift+B.
#[test]
fn halving_the_batch_keeps_its_micro_batches_whole() {
    let mut s = Settings { batch: 16, accum: 16, ..Settings::default() };
    door::rules(&mut s);
    let mut door = Door::default();
    door.send(Change::HalveBatch);
    let changed = door.apply(&mut s, |_| {});
    assert!(changed.toy && !changed.real_model);
    assert_eq!((s.batch, s.accum), (8, 8), "the accumulation follows the batch down");
    assert!(s.plan(VOCAB).is_ok());
    // Doubling stops at the slider's end, halving at 1: changing nothing, the steps go on.
    let mut top = Settings { batch: 1024, ..Settings::default() };
    door.send(Change::DoubleBatch);
    assert!(!door.apply(&mut top, |_| {}).any());
    assert_eq!(top.batch, 1024);
    let mut one = Settings { batch: 1, accum: 1, ..Settings::default() };
    door.send(Change::HalveBatch);
    assert!(!door.apply(&mut one, |_| {}).any());
    assert_eq!(one.batch, 1);
    // A suggestion already in force changes nothing either.
    let mut on = Settings { checkpoint: oomlab::plan::Checkpoint::BLOCKS, ..Settings::default() };
    door.send(Change::Suggest(Suggestion::Checkpointing));
    assert!(!door.apply(&mut on, |_| {}).any());
    // What changed is the change's own: the preferences alone touch nothing derived.
    door.send(Change::Projector);
    let changed = door.apply(&mut s, |_| {});
    assert!(changed.prefs && !changed.toy && !changed.real_model);
    // A teacher's pins are applied before the rules, whatever was sent.
    door.send(Change::DoubleBatch);
    door.apply(&mut s, |p| p.batch = 8);
    assert_eq!(s.batch, 8);
}

/// On a phone with the controls' drawer closed, Shift+B halves the batch and the step still
/// builds: no refusal the controls would have prevented.
#[test]
fn on_a_phone_the_shortcut_passes_through_the_rules() {
    support_xdg::xdg();
    let start = Settings { batch: 16, accum: 16, ..Settings::default() };
    let mut harness = Harness::builder()
        .with_size([390.0, 800.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(start));
    harness.run();
    assert!(!harness.state().chrome.drawer_open, "the drawer starts closed");
    harness.key_press_modifiers(Modifiers::SHIFT, Key::B);
    harness.run();
    let s = harness.state().settings();
    assert_eq!((s.batch, s.accum), (8, 8));
    assert!(harness.state().shown.derived.plan.is_ok(), "{:?}", harness.state().shown.derived.plan.as_ref().err());
}
