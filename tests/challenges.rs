//! The challenges: each is passed by a scripted setting and failed by another, judged
//! on a step the app really executed — on the CPU backend, and on the GPU (lavapipe here).

#[path = "support/focus.rs"]
mod support_focus;
#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::app::teaching::{challenge_from_url_hash as from_url_hash, challenges};
use oomlab::memory::simulate;
use oomlab::plan::Checkpoint;

const VOCAB: usize = 58;

/// Applies `change` to the challenge's settings, runs one real step and returns the check.
fn attempt(harness: &mut Harness<'_, OomlabApp>, change: impl FnOnce(&mut Settings)) -> (bool, String) {
    harness.state_mut().edit_settings(change);
    harness.run_steps(3);
    let before = harness.state().steps_done();
    let checks = harness.state().teaching.challenge().map_or(0, |c| c.checks);
    harness.key_press(egui::Key::Space);
    for _ in 0..20_000 {
        harness.step();
        if harness.state().is_idle() && harness.state().steps_done() > before {
            break;
        }
    }
    assert!(harness.state().steps_done() > before, "the step did not run");
    let state = harness.state().teaching.challenge().expect("a challenge");
    assert!(state.checks > checks, "the step was not checked");
    state.last.clone().expect("checked")
}

/// A change a learner makes to the settings.
type Script = Box<dyn FnOnce(&mut Settings)>;

/// The largest batch that fits 64 MiB in fp16, found here from the plan.
fn largest_fp16_batch(start: &Settings) -> usize {
    (1..=1024)
        .take_while(|&b| {
            let s = Settings { batch: b, ..start.clone() };
            s.plan(VOCAB).is_ok_and(|p| simulate(&p, s.device.budget_bytes).is_ok())
        })
        .last()
        .expect("batch 1 fits")
}

fn play(mut harness: Harness<'_, OomlabApp>) {
    harness.run();
    let ids: Vec<&str> = challenges().iter().map(|c| c.id).collect();
    assert_eq!(ids, ["accum128", "halve", "largest"]);
    for (i, id) in ids.iter().enumerate() {
        harness.state_mut().start_challenge(i);
        let start = harness.state().settings().clone();
        let (fail, pass): (Script, Script) = match *id {
            // 128 at once does not fit 32 MiB; batch 32 fits but is not 128; 8 micro-batches of 16 do it.
            "accum128" => (Box::new(|s| s.batch = 32), Box::new(|s| (s.batch, s.accum) = (128, 8))),
            // Checkpointing recomputes (more than 25 % extra FLOPs here) and does not halve; four
            // micro-batches do, for no extra FLOPs.
            "halve" => (
                Box::new(|s| s.checkpoint = Checkpoint::BLOCKS),
                Box::new(|s| (s.checkpoint, s.accum) = (Checkpoint::Off, 4)),
            ),
            "largest" => {
                let b = largest_fp16_batch(&start);
                (Box::new(move |s| s.batch = b - 1), Box::new(move |s| s.batch = b))
            }
            other => panic!("no script for challenge {other}"),
        };
        let (passed, why) = attempt(&mut harness, fail);
        assert!(!passed, "{id}: the failing attempt passed: {why}");
        harness.state_mut().edit_settings(|s| *s = start.clone());
        let (passed, why) = attempt(&mut harness, pass);
        assert!(passed, "{id}: the solution failed: {why}");
        let state = harness.state().teaching.challenge().cloned().expect("a challenge");
        assert!(state.best.is_some_and(|(peak, _, flops)| peak > 0 && flops > 0), "{id}: no best result");
        assert!(harness.state().teaching.challenges_done().iter().any(|d| d == id), "{id}: not remembered as done");
    }
}

#[test]
fn every_challenge_is_passed_and_failed_on_the_cpu() {
    xdg();
    let harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    play(harness);
}

/// The browser's CPU fallback runs its steps in a Web Worker; here the same protocol over a
/// thread: the same challenges, judged on the steps the worker ran.
#[test]
fn every_challenge_is_passed_and_failed_in_the_cpu_worker() {
    xdg();
    let transport = Box::new(oomlab::app::cpu_worker::ThreadTransport::spawn());
    let harness = Harness::builder().with_size([1280.0, 900.0]).build_ui_state(
        |ui, app: &mut OomlabApp| app.show(ui),
        OomlabApp::headless_worker(Settings::default(), transport),
    );
    play(harness);
}

#[test]
fn every_challenge_is_passed_and_failed_on_the_gpu() {
    xdg();
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter");
    let harness = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless_gpu(Settings::default(), ctx));
    play(harness);
}

/// A challenge travels in a link; an unknown one is ignored.
#[test]
fn a_link_names_a_challenge() {
    assert_eq!(from_url_hash("#s=abc&challenge=halve&lang=zh"), Some(1));
    assert_eq!(from_url_hash("#challenge=accum128"), Some(0));
    assert_eq!(from_url_hash("#challenge=nope"), None);
    assert_eq!(from_url_hash("#s=abc"), None);
    assert!(!Settings::url_hash_carries_settings("#challenge=halve&lang=zh"));
}

/// A shortcut that changes the task does not pass: 128 shorter sequences are less work, and a
/// lighter optimizer or shorter sequences fit a larger batch than the task's.
#[test]
fn shortcuts_that_change_the_task_do_not_pass() {
    use oomlab::app::teaching::ChallengeRun as Run;
    use oomlab::i18n::{Catalog, Lang};
    use oomlab::plan::OptimizerKind;
    let en = Catalog::new(Lang::En);
    let all = challenges();
    let check = |index: usize, settings: &Settings| {
        let mut start = Settings::default();
        (all[index].start)(&mut start);
        let plan = settings.plan(VOCAB).expect("a plan");
        let memory = simulate(&plan, settings.device.budget_bytes).expect("the step fits its budget");
        let run = Run { settings, memory: &memory, start: &start, vocab: VOCAB };
        (all[index].check)(&run, &en).passed
    };
    let mut accum128 = Settings::default();
    (all[0].start)(&mut accum128);
    // The honest fix passes; 128 sequences a quarter as long, all at once, fit 32 MiB but do not.
    assert!(check(0, &Settings { accum: 8, ..accum128.clone() }), "eight micro-batches of 16");
    let short = Settings { seq: accum128.seq / 4, ..accum128.clone() };
    assert!(simulate(&short.plan(VOCAB).expect("a plan"), short.device.budget_bytes).is_ok(), "the shortcut fits");
    assert!(!check(0, &short), "shorter sequences change the task");
    let mut largest = Settings::default();
    (all[2].start)(&mut largest);
    let b = largest_fp16_batch(&largest);
    assert!(check(2, &Settings { batch: b, ..largest.clone() }), "batch {b} is the largest");
    // SGD keeps no optimizer state: its own largest batch is larger, and is not the answer.
    let sgd = Settings { optimizer: OptimizerKind::Sgd, ..largest.clone() };
    let sgd_b = largest_fp16_batch(&sgd);
    assert!(sgd_b > b, "SGD fits more ({sgd_b} vs {b})");
    assert!(!check(2, &Settings { batch: sgd_b, ..sgd }), "another optimizer changes the task");
    let short = Settings { seq: largest.seq / 2, ..largest.clone() };
    assert!(!check(2, &Settings { batch: largest_fp16_batch(&short), ..short }), "shorter sequences too");
}

/// A challenge from the keyboard alone: Tab and Enter open the challenges and start the first;
/// B (a letter shortcut, which works whatever has the focus) doubles the batch to 128; the arrow
/// keys move the focused accumulation slider to 8; Enter on One step runs the step it is judged
/// on, and it passes.
#[test]
fn a_challenge_works_from_the_keyboard_alone() {
    use egui::Key;
    use support_focus::{press_until, tab_to};
    xdg();
    let mut harness = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    tab_to(&mut harness, "Challenges");
    harness.key_press(Key::Enter);
    harness.run();
    tab_to(&mut harness, "Start");
    harness.key_press(Key::Enter);
    harness.run();
    assert!(harness.state().teaching.challenge().is_some(), "Enter started a challenge");
    assert_eq!(challenges()[0].id, "accum128");
    press_until(&mut harness, Key::B, 8, |app| app.settings().batch >= 128);
    assert_eq!(harness.state().settings().batch, 128, "B doubled the batch");
    tab_to(&mut harness, "accumulation steps");
    press_until(&mut harness, Key::ArrowRight, 20, |app| app.settings().accum >= 8);
    assert_eq!(harness.state().settings().accum, 8, "the arrows moved the accumulation slider");
    tab_to(&mut harness, "One step");
    harness.key_press(Key::Enter);
    for _ in 0..20_000 {
        harness.step();
        if harness.state().is_idle() && harness.state().steps_done() > 0 {
            break;
        }
    }
    let last = harness.state().teaching.challenge().and_then(|c| c.last.clone());
    assert!(matches!(last, Some((true, _))), "{last:?}");
}
