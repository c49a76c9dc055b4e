//! The lengths chapter in the app (issue 42 §4): its reveal runs batch 1, then batch 2, through
//! one allocator — on this thread's CPU and in the CPU worker, as the browser runs it — and
//! batch 2 runs out of memory as the run's prediction says, with the figures the CPU executor
//! gives on its own. The views follow the batch that failed; the answer names each remedy's
//! outcome. Snapshots of the revealed chapter in both languages.

#[path = "support/lengths.rs"]
mod support_lengths;
#[path = "support/xdg.rs"]
mod support_xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::settings::Settings;
use oomlab::app::teaching::{Guess, Verdict, chapters};
use oomlab::app::{OomlabApp, Tab};
use oomlab::i18n::Lang;

const VOCAB: usize = 58;

fn reveal_lengths(harness: &mut Harness<'_, OomlabApp>, lang: Lang, what: &str) {
    let index = chapters().iter().position(|c| c.id == "lengths").expect("the chapter");
    harness.state_mut().set_lang(lang);
    harness.state_mut().open_chapter(index);
    harness.run_steps(3);
    let settings = harness.state().settings().clone();
    let (ran, cpu) = support_lengths::run_batches(&settings, VOCAB, 1);
    let cpu = cpu.expect("batch 2 runs out after batch 1");
    assert_eq!(ran.len(), 1);
    // A student who thinks it fits, as it would alone.
    harness.state_mut().guess(Guess::Choice(Some(0)));
    harness.state_mut().reveal();
    for _ in 0..20_000 {
        harness.step();
        let lesson = harness.state().teaching.lesson().cloned();
        if harness.state().is_idle() && lesson.is_some_and(|l| l.from_step) {
            break;
        }
    }
    let state = harness.state();
    assert!(state.is_idle(), "{what}: the run finished");
    assert_eq!(state.steps_done(), 1, "{what}: batch 1 ran, batch 2 did not");
    let oom = state.run.oom.as_ref().expect("the real run ran out of memory");
    assert_eq!(oom.error, cpu.error, "{what}: the app's run is the executor's");
    let lesson = state.teaching.lesson().expect("open");
    assert!(lesson.from_step, "{what}: the verdict is read from the real run");
    assert_eq!(lesson.verdict, Some(Verdict::Choice { answer: 1, right: false }), "{what}");
    // The views show batch 2, and its prediction is the run's: the same error.
    let plan = state.shown.derived.plan.as_ref().expect("a plan");
    assert_eq!(plan.shape.seq, 256, "{what}: the views follow the batch that failed");
    match state.shown.derived.predicted.as_ref().expect("a prediction") {
        Err(predicted) => assert_eq!(predicted.error, oom.error, "{what}: predicted = allocator"),
        Ok(_) => panic!("{what}: the prediction fits where the run did not"),
    }
}

fn on_this_thread(lang: Lang) {
    support_xdg::xdg();
    {
        let mut harness = Harness::builder()
            .with_size([1400.0, 900.0])
            .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
        harness.run();
        reveal_lengths(&mut harness, lang, &format!("{lang:?}"));
        harness.state_mut().shown.tab = Tab::Allocator;
        harness.run_steps(3);
        // The answer: the remedies, each run the same way.
        let remedy = if lang == Lang::Zh {
            "使用 expandable_segments:True，同样的两个 batch 放得下"
        } else {
            "With expandable_segments:True, the same two batches fit"
        };
        harness.get_by_label_contains(remedy);
        harness.get_by_label_contains("torch.cuda.empty_cache()");
        let still = if lang == Lang::Zh {
            "使用 max_split_size_mb:21，第 2 个 batch 仍然显存溢出"
        } else {
            "With max_split_size_mb:21, batch 2 still runs out of memory"
        };
        harness.get_by_label_contains(still);
        let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
        let name = format!("lesson_lengths_{}", if lang == Lang::Zh { "zh" } else { "en" });
        harness.snapshot_options(&name, &options);
    }
}

#[test]
fn the_lengths_chapter_runs_both_batches_on_this_thread_in_english() {
    on_this_thread(Lang::En);
}

#[test]
fn the_lengths_chapter_runs_both_batches_on_this_thread_in_chinese() {
    on_this_thread(Lang::Zh);
}

#[test]
fn the_lengths_chapter_runs_both_batches_in_the_cpu_worker() {
    let transport = oomlab::app::cpu_worker::ThreadTransport::spawn();
    let app = OomlabApp::headless_worker(Settings::default(), Box::new(transport));
    let mut harness =
        Harness::builder().with_size([1400.0, 900.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    reveal_lengths(&mut harness, Lang::En, "the CPU worker");
}

/// The Training tab's memory after each step, over a run of bucketed batches with room to spare:
/// the allocated peaks go up and down with the lengths, while reserved only climbs — the cache
/// keeps what each length cut, so reserved grows faster than allocated.
#[test]
fn the_training_tab_shows_reserved_climbing_over_varying_lengths() {
    support_xdg::xdg();
    let mut settings = Settings::default();
    let chapter = chapters().into_iter().find(|c| c.id == "lengths").expect("the chapter");
    (chapter.setup)(&mut settings);
    settings.device.budget_bytes = 1 << 30;
    let mut harness = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    harness.state_mut().run.train_for(6);
    for _ in 0..50_000 {
        harness.step();
        if harness.state().is_idle() {
            break;
        }
    }
    assert_eq!(harness.state().steps_done(), 6, "six steps");
    harness.state_mut().shown.tab = Tab::Training;
    harness.run_steps(3);
    let Some(oomlab::app::views::drawn::Drawn::Training(t)) = oomlab::app::views::drawn(&harness.ctx, "training")
    else {
        panic!("the training view")
    };
    let marks = &t.memory;
    assert_eq!(marks.len(), 6);
    assert!(marks.windows(2).all(|w| w[1].reserved_bytes >= w[0].reserved_bytes), "reserved only climbs: {marks:?}");
    assert!(marks.windows(2).any(|w| w[1].peak_allocated_bytes < w[0].peak_allocated_bytes), "peaks go down too");
    let (first, last) = (marks[0], marks[5]);
    let grew = |f: fn(&oomlab::app::timing::StepMark) -> u64| f(&last) as f64 / f(&first) as f64;
    assert!(grew(|m| m.reserved_bytes) > grew(|m| m.peak_allocated_bytes), "reserved grows faster: {marks:?}");
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options("training_memory_by_step", &options);
}
