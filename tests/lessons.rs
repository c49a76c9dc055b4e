//! The lessons (issue 14): every chapter from first to last, in both languages — its widget is
//! highlighted where it is drawn, the revealed answer is what the plan gives (computed here
//! independently), a right and a wrong prediction are judged so, and revealing runs a real step
//! whose allocator figures equal the prediction.

#[path = "support/focus.rs"]
mod support_focus;
#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::app::teaching::{Guess, Question, Verdict, chapters};
use oomlab::app::views;
use oomlab::i18n::Lang;
use oomlab::memory::simulate;
use oomlab::plan::{AttentionKind, Category, Checkpoint, Phase, Precision};

#[path = "support/padding.rs"]
mod support_padding;
use support_padding::padded_and_packed;
#[path = "support/lengths.rs"]
mod support_lengths;

const VOCAB: usize = 58;

fn peak(s: &Settings) -> oomlab::memory::StepMemory {
    simulate(&s.plan(VOCAB).expect("a plan"), oomlab::memory::Budget::Unlimited).expect("fits without a budget")
}

/// The chapter's answer, computed here from the plan without the lessons' code.
fn expected(id: &str, s: &Settings) -> Result<f64, usize> {
    let m = peak(s);
    match id {
        "fill" => {
            let at = |c: &[Category]| c.iter().map(|&c| m.peak_allocated.get(c)).sum::<u64>() as f64;
            let states =
                at(&[Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights]);
            Ok(at(&[Category::Activations, Category::Temporaries]) / states)
        }
        "batch" => {
            let doubled = peak(&Settings { batch: s.batch * 2, ..s.clone() });
            Ok(doubled.peak_allocated_bytes() as f64 / m.peak_allocated_bytes() as f64)
        }
        "sequence" => {
            let doubled = peak(&Settings { seq: s.seq * 2, ..s.clone() });
            Ok(doubled.activation_peak_bytes as f64 / m.activation_peak_bytes as f64)
        }
        "peak" => {
            let plan = s.plan(VOCAB).expect("a plan");
            let op = m.timeline[m.peak_index].op.expect("an op");
            Err(match plan.ops[op].phase {
                Phase::Forward => 0,
                Phase::Backward => 1,
                Phase::Optimizer => 2,
            })
        }
        "allocator" => Ok(m.peak_reserved_bytes() as f64 / m.peak_allocated_bytes() as f64),
        "fixes" => {
            let variants = [
                Settings { checkpoint: Checkpoint::BLOCKS, ..s.clone() },
                Settings { attention: AttentionKind::Fused, ..s.clone() },
                Settings { precision: Precision::Bf16, ..s.clone() },
                Settings { accum: s.accum * 2, ..s.clone() },
            ];
            Err((0..4).min_by_key(|&i| peak(&variants[i]).peak_allocated_bytes()).expect("variants"))
        }
        "real" => {
            let states = |zero: u8| {
                let mut setup = s.estimate.0.clone();
                setup.parallel.zero = zero;
                setup.parallel.data = 8;
                let e = oomlab::estimate::estimate(&setup).expect("an estimate");
                ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum::<u64>()
            };
            Ok(states(0) as f64 / states(3) as f64)
        }
        "moe" => {
            // Mixtral's model states against the same model with only the k experts a token
            // uses (k of k).
            let states = |routed: bool| {
                let mut setup = s.estimate.0.clone();
                let m = setup.arch.block.moe.as_mut().expect("a mixture");
                assert_eq!((m.experts, m.top_k), (8, 2), "Mixtral 8x7B");
                if routed {
                    m.experts = m.top_k;
                }
                let e = oomlab::estimate::estimate(&setup).expect("an estimate");
                ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum::<u64>()
            };
            let ratio = states(false) as f64 / states(true) as f64;
            // About 46.7 B against 12.9 B parameters.
            assert!((3.5..3.7).contains(&ratio), "{ratio}");
            Ok(ratio)
        }
        "diagnose" => {
            let oom = simulate(&s.plan(VOCAB).expect("a plan"), s.device.budget_bytes).expect_err("out of memory");
            let options = [
                Category::Parameters,
                Category::Gradients,
                Category::OptimizerState,
                Category::Activations,
                Category::Temporaries,
            ];
            Err(options.iter().position(|&c| c == oom.category).expect("a listed category"))
        }
        "fragment" => {
            // Out of memory with more than the request free in cached segments: option 1.
            let oom = simulate(&s.plan(VOCAB).expect("a plan"), s.device.budget_bytes).expect_err("out of memory");
            assert!(oom.error.cached_free_bytes >= oom.error.requested_bytes, "{}", oom.message);
            Err(1)
        }
        "buckets" => {
            // Each DDP GPU's peak against one GPU's alone on the same batch: its buckets, a copy
            // of the gradients, on top.
            let peak = |s: &Settings| {
                oomlab::memory::simulate(&s.plan(VOCAB).expect("a plan"), oomlab::memory::Budget::Unlimited)
                    .expect("fits")
                    .peak_allocated_bytes()
            };
            let mut alone = s.clone();
            alone.device.parallel.gpus = 1;
            let ratio = peak(s) as f64 / peak(&alone) as f64;
            assert!((1.1..1.4).contains(&ratio), "{ratio}");
            Ok(ratio)
        }
        "zero2" => {
            // DDP's model states on each GPU against ZeRO-2's on 4 GPUs: the parameters stay whole.
            let kept = |zero: u8| {
                let mut s = s.clone();
                s.device.parallel.zero = zero;
                let plan = s.plan(VOCAB).expect("a plan");
                plan.tensors
                    .iter()
                    .filter(|t| t.persistent && t.category != Category::Communication)
                    .map(|t| t.size_bytes())
                    .sum::<u64>()
            };
            let ratio = kept(0) as f64 / kept(2) as f64;
            assert!((2.0..2.5).contains(&ratio), "4 / (1 + 3/4) ≈ 2.29: {ratio}");
            Ok(ratio)
        }
        "zero3" => {
            // The bytes ZeRO-3's gathers bring each GPU in a step, against the whole model's
            // parameters: every unit for the forward and the backward pass, the shared
            // embeddings once more.
            let plan = s.plan(VOCAB).expect("a plan");
            let gathered: u64 = plan
                .ops
                .iter()
                .filter_map(|n| match &n.op {
                    oomlab::plan::Op::AllGather(g) => Some(g.full.len * 4),
                    _ => None,
                })
                .sum();
            let ratio = gathered as f64 / (plan.layout.flat_len * 4) as f64;
            assert!((2.0..2.2).contains(&ratio), "{ratio}");
            Ok(ratio)
        }
        "padding" => {
            // A batch of long and short speeches padded to the longest, against the same
            // speeches packed into full rows: the padding's share of the activations.
            let (padded, packed) = padded_and_packed(s, VOCAB);
            let ratio = padded as f64 / packed as f64;
            assert!((1.2..4.0).contains(&ratio), "{ratio}");
            Ok(ratio)
        }
        "lengths" => {
            // Batch 2 after batch 1 through one executor: out of memory with more than the
            // request free in cached segments (option 1), although alone it fits.
            let (ran, oom) = support_lengths::run_batches(s, VOCAB, 1);
            let oom = oom.expect("out of memory");
            assert_eq!(ran.len(), 1, "at batch 2");
            assert!(oom.error.cached_free_bytes >= oom.error.requested_bytes, "{}", oom.message);
            simulate(&s.plan_at(VOCAB, 1).expect("a plan"), s.device.budget_bytes).expect("alone it fits");
            Err(1)
        }
        "context" => {
            // The fewest GPUs splitting the sequence (ring attention) that make the step fit.
            let fits = |c: u64| {
                let mut setup = s.estimate.0.clone();
                setup.parallel.context = c;
                oomlab::estimate::estimate(&setup).expect("an estimate").fits()
            };
            assert_eq!(s.estimate.0.seq, 131072, "Llama 3.1 8B's whole context");
            assert!(!fits(1), "one GPU's share does not fit");
            Err([1, 2, 4, 8].iter().position(|&c| fits(c)).expect("a split that fits"))
        }
        other => panic!("no expectation for chapter {other}: add one"),
    }
}

fn walk(lang: Lang) {
    xdg();
    let size = [1400.0, 900.0];
    let mut harness = Harness::builder()
        .with_size(size)
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.state_mut().set_lang(lang);
    harness.run();
    let lessons = if lang == Lang::Zh { "课程" } else { "Lessons" };
    harness.get_by_label(lessons).click();
    harness.run();
    let all = chapters();
    assert!(all.len() >= 4);
    for (i, chapter) in all.iter().enumerate() {
        if i > 0 {
            // The next chapter, as a learner gets there.
            harness.get_by_label(if lang == Lang::Zh { "下一章 ›" } else { "Next ›" }).click();
            harness.run();
        }
        assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(i));
        assert_eq!(harness.state().shown.tab, chapter.tab, "{}", chapter.id);
        // The highlighted widget exists and is on screen.
        let rect = views::marked(&harness.ctx, chapter.target)
            .unwrap_or_else(|| panic!("{}: no {}", chapter.id, chapter.target));
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(size[0], size[1]));
        // Visible: it starts on screen (a tall view continues below, in its scroll area).
        let visible = screen.contains(rect.left_top()) && rect.right() <= screen.right();
        assert!(rect.width() > 10.0 && rect.height() > 5.0 && visible, "{}: {rect:?}", chapter.id);
        let settings = harness.state().settings().clone();
        let want = expected(chapter.id, &settings);
        // A wrong prediction, then a right one.
        let (wrong, right) = match (&chapter.question, want) {
            (Question::Ratio { .. }, Ok(answer)) => (Guess::Ratio(answer * 2.0), Guess::Ratio(answer)),
            (Question::Choice { options, .. }, Err(answer)) => {
                (Guess::Choice(Some((answer + 1) % options.len())), Guess::Choice(Some(answer)))
            }
            _ => panic!("{}: the question's kind and its expectation differ", chapter.id),
        };
        harness.state_mut().guess(wrong);
        harness.get_by_label(if lang == Lang::Zh { "揭晓答案" } else { "Reveal" }).click();
        // The reveal runs a real step over frames.
        harness.run_steps(300);
        let verdict = harness.state().teaching.lesson().and_then(|l| l.verdict.clone()).expect("revealed");
        match (verdict, want) {
            (Verdict::Ratio { answer, close, .. }, Ok(w)) => {
                assert!((answer - w).abs() < 1e-12, "{}: {answer} vs {w}", chapter.id);
                assert!(!close, "{}: twice the answer is not close", chapter.id);
            }
            (Verdict::Choice { answer, right }, Err(w)) => assert!(answer == w && !right, "{}", chapter.id),
            (v, w) => panic!("{}: {v:?} vs {w:?}", chapter.id),
        }
        harness.state_mut().guess(right);
        harness.state_mut().reveal();
        harness.run_steps(300);
        let verdict = harness.state().teaching.lesson().and_then(|l| l.verdict.clone()).expect("revealed");
        assert!(
            matches!(verdict, Verdict::Ratio { close: true, .. } | Verdict::Choice { right: true, .. }),
            "{}",
            chapter.id
        );
        if chapter.id == "fixes" && lang == Lang::En {
            // The fix's cost in compute, from the plan's FLOP count.
            let flops = |s: &Settings| s.plan(VOCAB).expect("a plan").flops().0 as f64;
            let ckpt = Settings { checkpoint: Checkpoint::BLOCKS, ..settings.clone() };
            let extra = format!("{:.0} %)", 100.0 * (flops(&ckpt) - flops(&settings)) / flops(&settings));
            harness.get_by_label_contains(&format!("checkpointing every block would cost {extra}"));
        }
        // The reveal ran a real step: the allocator's account equals the plan's, or the step ran
        // out of memory as the plan said it would.
        assert!(harness.state().is_idle(), "{}: the step did not finish", chapter.id);
        let predicted = match harness.state().shown.derived.predicted.clone().expect("a plan") {
            Ok(p) => p,
            Err(_) => {
                // The batches before the question's ran; its own did not.
                let before = chapter.step as usize;
                assert_eq!(harness.state().steps_done(), before, "{}: a step that does not fit ran", chapter.id);
                harness.get_by_label(if lang == Lang::Zh { "显存溢出" } else { "Out of memory" });
                continue;
            }
        };
        assert!(harness.state().steps_done() >= 1, "{}: no real step", chapter.id);
        harness.get_by_label(if lang == Lang::Zh { "显存分解" } else { "Breakdown" }).click();
        harness.run();
        let total = views::size(&oomlab::i18n::Catalog::new(lang), predicted.peak_allocated_bytes());
        assert_eq!(harness.query_all_by_label(&total).count(), 2, "{}: allocator (live) = predicted", chapter.id);
        if ["buckets", "zero2", "zero3", "padding"].contains(&chapter.id) {
            // The data-parallel chapters after their reveal: the answer, GPU 0's breakdown with
            // its communication row, in each language; the padding chapter's padded step.
            let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
            let name = format!("lesson_{}_{}", chapter.id, if lang == Lang::Zh { "zh" } else { "en" });
            harness.snapshot_options(&name, &options);
        }
        if chapter.id == "batch" && lang == Lang::Zh {
            // A chapter as a student sees it: the question answered, the sweep's tab, the
            // batch slider highlighted.
            harness.get_by_label("显存与 batch 大小").click();
            harness.run();
            let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
            harness.snapshot_options("lesson_zh", &options);
        }
    }
    // The last chapter has no next; the lessons close.
    assert!(harness.query_by_label(if lang == Lang::Zh { "关闭课程" } else { "Close the lessons" }).is_some());
    harness.get_by_label(if lang == Lang::Zh { "关闭课程" } else { "Close the lessons" }).click();
    harness.run();
    assert!(harness.state().teaching.lesson().is_none());
}

#[test]
fn every_chapter_teaches_in_english() {
    walk(Lang::En);
}

#[test]
fn every_chapter_teaches_in_chinese() {
    walk(Lang::Zh);
}

/// Before the reveal a chapter's words hold none of the figures its answer quotes (issue 28: a
/// class's guesses only teach if the question is open). The body and the question may quote the
/// setting — the step's peak, the budget — but not the model states, the activations or anything
/// else the answer is worked out from, and not the answer itself.
#[test]
fn no_chapter_tells_its_answer_before_the_reveal() {
    use oomlab::app::teaching::Facts;
    use oomlab::i18n::Catalog;
    fn fluent<'a>(args: &'a [(&'static str, String)]) -> Vec<(&'static str, fluent_bundle::FluentValue<'a>)> {
        args.iter().map(|(k, v)| (*k, v.as_str().into())).collect()
    }
    for lang in Lang::ALL {
        let t = Catalog::new(lang);
        for chapter in chapters() {
            let mut settings = Settings::default();
            (chapter.setup)(&mut settings);
            let facts = Facts::new(&settings, VOCAB).expect("a plan");
            let args = (chapter.args)(&facts, &t);
            let before = format!(
                "{} {}",
                t.format(&format!("lesson-{}-body", chapter.id), &fluent(&args)),
                t.format(&format!("lesson-{}-question", chapter.id), &fluent(&args))
            );
            // The setting: the peak, the budget, the GPUs, the real model's states before ZeRO (the
            // question is what ZeRO-3 makes of them), and one GPU's peak alone, which DDP's
            // GPUs are measured against.
            let is_setting = |name: &str| {
                ["peak", "budget", "gpus"].contains(&name)
                    || (chapter.id, name) == ("real", "states")
                    || (chapter.id, name) == ("buckets", "alone")
                    || (chapter.id, name) == ("zero2", "ddp")
                    || (chapter.id, name) == ("zero3", "parameters")
                    || (chapter.id == "padding" && ["batch", "longest", "useful"].contains(&name))
                    || (chapter.id == "lengths" && ["batch", "first", "next", "alone"].contains(&name))
            };
            let setting: Vec<&String> = args.iter().filter(|(name, _)| is_setting(name)).map(|(_, v)| v).collect();
            let answer_args = (chapter.answer_args)(&facts, &t);
            let answer = t.format(&format!("lesson-{}-answer", chapter.id), &fluent(&answer_args));
            let mut figures = 0;
            for (name, value) in &answer_args {
                if setting.contains(&value) || !value.chars().any(|c| c.is_ascii_digit()) {
                    continue;
                }
                figures += 1;
                assert!(answer.contains(value.as_str()), "{lang:?} {}: the answer quotes {name}", chapter.id);
                assert!(!holds_figure(&before, value), "{lang:?} {}: {name} = {value} in {before:?}", chapter.id);
            }
            assert!(figures > 0 || chapter.id == "diagnose", "{lang:?} {}: the reveal shows figures", chapter.id);
            if let Question::Ratio { answer, .. } = &chapter.question {
                let x = answer(&facts).expect("an answer");
                for shown in [format!("{x:.1}"), format!("{x:.2}")] {
                    assert!(!holds_figure(&before, &shown), "{lang:?} {}: {shown} in {before:?}", chapter.id);
                }
            }
        }
    }
}

/// Whether `text` holds `figure` as a figure of its own: "0" is not in "50.80 MiB".
fn holds_figure(text: &str, figure: &str) -> bool {
    let number = |c: char| c.is_ascii_digit() || c == '.' || c == ',';
    text.match_indices(figure).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + figure.len()..].chars().next();
        !before.is_some_and(number) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// A lesson from the keyboard alone: Tab reaches the Lessons button and Enter opens it; Tab
/// reaches the guess, whose value the arrow keys change; Tab reaches Reveal and Enter reveals,
/// with its real step. Focus is read from the accessibility tree, as a screen reader reads it.
#[test]
fn a_lesson_works_from_the_keyboard_alone() {
    use egui::Key;
    use support_focus::tab_to;
    xdg();
    let mut harness = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    tab_to(&mut harness, "Lessons");
    harness.key_press(Key::Enter);
    harness.run();
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(0), "Enter opened the lessons");
    tab_to(&mut harness, "Your guess");
    let before = harness.state().teaching.lesson().map(|l| l.guess.clone());
    harness.key_press(Key::ArrowUp);
    harness.run();
    let after = harness.state().teaching.lesson().map(|l| l.guess.clone());
    assert_ne!(before, after, "the arrow key changed the guess");
    tab_to(&mut harness, "Reveal");
    harness.key_press(Key::Enter);
    harness.run_steps(200);
    let lesson = harness.state().teaching.lesson().expect("the lesson");
    assert!(lesson.verdict.is_some(), "Enter revealed");
    assert!(harness.state().steps_done() >= 1, "the reveal ran a real step");
    // The letter shortcuts still work with a button focused: R reveals again. Space and the
    // arrows belong to the focused button, so the chapters change through "Next ›".
    harness.state_mut().open_chapter(0);
    harness.key_press(Key::R);
    harness.run_steps(50);
    assert!(harness.state().teaching.lesson().is_some_and(|l| l.verdict.is_some()), "R with focus");
    harness.key_press(Key::ArrowRight);
    harness.run();
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(0), "→ stayed with the button");
    // A choice: "Next ›" to chapter 4, Tab to an option, Space picks it, Enter on Reveal judges it.
    for _ in 0..3 {
        tab_to(&mut harness, "Next ›");
        harness.key_press(Key::Enter);
        harness.run();
    }
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(3));
    tab_to(&mut harness, "during the backward pass");
    harness.key_press(Key::Space);
    harness.run();
    let guess = harness.state().teaching.lesson().map(|l| l.guess.clone());
    assert_eq!(guess, Some(Guess::Choice(Some(1))), "Space picked the option");
    tab_to(&mut harness, "Reveal");
    harness.key_press(Key::Enter);
    harness.run_steps(200);
    let verdict = harness.state().teaching.lesson().and_then(|l| l.verdict.clone());
    assert!(matches!(verdict, Some(Verdict::Choice { .. })), "{verdict:?}");
    // The controls too: an arrow key on the focused batch slider moves it; Enter on One step
    // runs a step.
    let batch = harness.state().settings().batch;
    tab_to(&mut harness, "batch");
    harness.key_press(Key::ArrowRight);
    harness.run();
    assert_ne!(harness.state().settings().batch, batch, "the arrow moved the batch slider");
    let steps = harness.state().steps_done();
    tab_to(&mut harness, "One step");
    harness.key_press(Key::Enter);
    harness.run_steps(200);
    assert_eq!(harness.state().steps_done(), steps + 1, "Enter on One step ran a step");
}
