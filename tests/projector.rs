//! The projector's full-screen class view (issue 41): made for the back of the room — the
//! question and the labels large enough at 1920×1080, the answers over at least half the
//! screen, numbers binned as people guess ratios (log-spaced past ×4, overflow bins, the median
//! and the middle half marked, the true value with how many were within tolerance), rounds side
//! by side — checked from its drawn record, and as snapshots at 1920×1080 and 1280×720 in both
//! languages during a round, between rounds and after the reveal.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use std::collections::BTreeMap;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::teaching::{Classroom, Phase};
use oomlab::app::teaching::{LABEL_PX, QUESTION_PX, bins, short};
use oomlab::app::views::{self, drawn::Drawn, drawn::ProjectorDrawn};
use oomlab::class::{Answer, ClassState, Created, Prompt, Question};
use oomlab::i18n::{Catalog, Lang};

#[test]
fn number_bins_suit_ratio_guesses() {
    // Spread over more than ×4: log-spaced, at least 6 bins once 10 answered, every guess
    // counted, the outliers in the overflow bins.
    let guesses = [0.9, 1.2, 1.5, 1.8, 2.0, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 100.0];
    let b = bins(&guesses, Some(1.88));
    assert!(b.log, "{b:?}");
    assert!(b.counts.len() >= 6, "{b:?}");
    assert_eq!(b.counts.iter().sum::<u32>() + b.below + b.above, guesses.len() as u32, "{b:?}");
    assert!(b.above >= 1 && *b.edges.last().expect("edges") < 100.0, "100 is an outlier: {b:?}");
    let ratios: Vec<f64> = b.edges.windows(2).map(|w| w[1] / w[0]).collect();
    assert!(ratios.iter().all(|r| (r - ratios[0]).abs() < 1e-9), "equal ratios: {ratios:?}");
    // The true value is inside the bins; positions grow along the axis.
    assert!(b.edges[0] <= 1.88 && 1.88 <= *b.edges.last().expect("edges"));
    let at: Vec<f64> = [0.5, 1.0, 1.88, 3.0, 7.0, 50.0, 1000.0].iter().map(|x| b.position(*x)).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    // Within ×4: linear. Few guesses: 4 bins at least.
    let b = bins(&[1.5, 1.8, 2.0, 2.2], None);
    assert!(!b.log && b.counts.len() >= 4 && b.counts.iter().sum::<u32>() == 4, "{b:?}");
    // One guess, or none.
    assert_eq!(bins(&[2.0], None).counts.iter().sum::<u32>(), 1);
    assert!(bins(&[], None).counts.is_empty());
    assert!(bins(&[f64::NAN, f64::INFINITY], None).counts.is_empty());
    assert_eq!(
        (short(1.875), short(12.3), short(0.254), short(100.0)),
        ("1.9".into(), "12".into(), "0.25".into(), "100".into())
    );
}

fn words(en: &str, zh: &str) -> BTreeMap<String, String> {
    [("en".to_string(), en.to_string()), ("zh".to_string(), zh.to_string())].into()
}

/// A class of 24 on chapter 2, in `stage`: 0 during the first round, 1 between the rounds (the
/// second under way), 2 after the reveal.
fn room(stage: u8) -> Classroom {
    let mut room = Classroom::default();
    let qr: Vec<String> =
        (0..25).map(|y| (0..25).map(|x| if (x * 7 + y * 3) % 5 < 2 { '1' } else { '0' }).collect()).collect();
    room.phase = Phase::Live(Box::new(Created {
        code: "K7QX2M".into(),
        teacher_token: "t".into(),
        expires_at: 0,
        join_url: "http://192.168.1.20:8080/join/K7QX2M".into(),
        qr,
    }));
    let first = [1.2, 1.5, 1.5, 1.8, 2.0, 2.0, 2.0, 2.2, 2.5, 2.5, 3.0, 3.0, 4.0, 4.0, 5.0, 6.0, 8.0, 10.0, 16.0, 32.0];
    let second = [1.6, 1.8, 1.8, 1.9, 2.0, 2.0, 2.0, 2.1, 2.2, 2.5, 2.5, 3.0, 4.0, 6.0];
    room.answers = first.iter().map(|x| (1, Answer::Number(*x))).collect();
    if stage > 0 {
        room.answers.extend(second.iter().map(|x| (2, Answer::Number(*x))));
    }
    room.state = Some(ClassState {
        code: "K7QX2M".into(),
        chapter: Some(2),
        question: Some(Question::Number),
        prompt: Some(Prompt {
            question: words(
                "From batch 16 to 32: how many times more memory does the peak need?",
                "batch 从 16 到 32：峰值需要的显存是原来的多少倍？",
            ),
            options: Vec::new(),
            unit: Some("×".into()),
            ..Prompt::default()
        }),
        revealed: (stage == 2).then_some(Answer::Number(1.8785)),
        students: 24,
        answered: if stage == 0 { first.len() as u32 } else { second.len() as u32 },
        round: if stage == 0 { 1 } else { 2 },
        ..ClassState::default()
    });
    room
}

fn projector(size: [f32; 2], lang: Lang, stage: u8) -> (Harness<'static, (Classroom, Catalog)>, ProjectorDrawn) {
    xdg();
    let mut harness = Harness::builder().with_size(size).build_ui_state(
        |ui, (room, t): &mut (Classroom, Catalog)| {
            if ui.ctx().cumulative_frame_nr() == 0 {
                ui.ctx().set_fonts(oomlab::app::fonts::embedded());
            }
            room.full_view(ui, t, Some(0.10));
        },
        (room(stage), Catalog::new(lang)),
    );
    harness.run_steps(3);
    let Some(Drawn::Projector(drawn)) = views::drawn(&harness.ctx, "projector") else { panic!("no projector record") };
    (harness, *drawn)
}

#[test]
fn the_projector_view_reads_from_the_back_of_the_room() {
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(4000);
    // One harness per picture: their snapshots' results are gathered and checked together.
    let mut results = egui_kittest::SnapshotResults::new();
    for lang in Lang::ALL {
        for (size, name) in [([1920.0, 1080.0], "1080p"), ([1280.0, 720.0], "720p")] {
            for (stage, when) in [(0, "round1"), (1, "round2"), (2, "revealed")] {
                let (mut harness, d) = projector(size, lang, stage);
                let what = format!("{lang:?} {name} {when}");
                // Legible from the back at 1920×1080: a 36 px question, 24 px labels (a
                // narrower screen shrinks labels only where they would not fit their slot).
                assert!(d.question_px >= 36.0 && QUESTION_PX >= 36.0 && LABEL_PX >= 24.0, "{what}");
                if name == "1080p" {
                    assert!(d.label_px >= 24.0, "{what}: labels at {} px", d.label_px);
                }
                assert!(d.chart_share >= 0.5, "{what}: the answers take {:.0} % of the height", 100.0 * d.chart_share);
                assert!(d.join_in_corner, "{what}: 24 joined: the code goes to a corner");
                let rounds: Vec<u32> = d.rounds.iter().map(|r| r.round).collect();
                assert_eq!(rounds, if stage == 0 { vec![1] } else { vec![1, 2] }, "{what}");
                let r1 = &d.rounds[0];
                // Every guess is in a slot; the first round spans ×27: log bins, 6 or more.
                assert_eq!(r1.slots.iter().map(|s| s.1).sum::<u32>(), 20, "{what}");
                assert!(r1.log && r1.slots.len() >= 8, "{what}: {:?}", r1.slots);
                assert!(r1.slots[0].0.starts_with('<') && r1.slots.last().is_some_and(|s| s.0.starts_with('>')));
                assert_eq!(r1.median, Some(2.75), "{what}");
                assert!(r1.middle_half.is_some_and(|(a, b)| a < 2.75 && 2.75 < b), "{what}");
                // Before the reveal no true value anywhere; after it, with how many were close.
                if stage == 2 {
                    assert_eq!(d.rounds[1].truth.as_deref(), Some("1.9×"), "{what}");
                    // Within ±10 % of 1.8785 (1.69 to 2.07): in round 2, 1.8 × 2, 1.9 and 2.0 × 3
                    // (2.1 is 12 % off); in round 1, 1.8 and 2.0 × 3.
                    assert_eq!(d.rounds[1].within, Some(6), "{what}");
                    assert_eq!(r1.within, Some(4), "{what}");
                } else {
                    assert!(d.rounds.iter().all(|r| r.truth.is_none() && r.within.is_none()), "{what}");
                }
                harness.snapshot_options(format!("projector_{lang:?}_{name}_{when}").to_lowercase(), &options);
                results.extend_harness(&mut harness);
            }
        }
    }
    results.unwrap();
}

/// A choice question: a bar per option with its share of the class, the right one marked after
/// the reveal with how many chose it.
#[test]
fn a_choice_shows_each_options_share() {
    xdg();
    let mut room = room(0);
    let options: Vec<String> = ["fwd", "bwd", "opt"].iter().map(|s| s.to_string()).collect();
    let picks = ["bwd", "bwd", "fwd", "bwd", "opt", "fwd"];
    room.answers = picks.iter().map(|p| (1, Answer::Choice(p.to_string()))).collect();
    if let Some(s) = &mut room.state {
        s.question = Some(Question::Choice { options });
        s.prompt = Some(Prompt {
            question: words("Where is the peak?", "峰值在哪里？"),
            options: vec![words("forward", "前向传播"), words("backward", "反向传播"), words("optimizer", "优化器")],
            unit: None,
            ..Prompt::default()
        });
        s.revealed = Some(Answer::Choice("bwd".into()));
    }
    let mut harness = Harness::builder().with_size([1280.0, 720.0]).build_ui_state(
        |ui, (room, t): &mut (Classroom, Catalog)| _ = room.full_view(ui, t, None),
        (room, Catalog::new(Lang::En)),
    );
    harness.run_steps(2);
    let Some(Drawn::Projector(d)) = views::drawn(&harness.ctx, "projector") else { panic!("no record") };
    let r = &d.rounds[0];
    assert_eq!(r.slots, vec![("forward".into(), 2), ("backward".into(), 3), ("optimizer".into(), 1)]);
    assert_eq!((r.truth.as_deref(), r.within, r.median), (Some("backward"), Some(3), None));
    // The chart is described for a screen reader, with the same counts.
    harness.get_by_label_contains("forward: 2; backward: 3; optimizer: 1");
}
