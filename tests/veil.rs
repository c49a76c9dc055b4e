//! Guess first (issue 41): while a chapter's question is open, no view's drawn record and no
//! accessible text holds its answer or a figure the answer is computed from — on every tab,
//! before and after a real step, in both languages. After the reveal they do.
//!
//! The figures are computed here from the plan and the estimator, without the lessons' code; the
//! accessible text is everything egui's AccessKit tree says (labels, values, descriptions: what
//! a screen reader reads on the desktop and the browser's mirror turns into DOM).

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::NodeT;
use oomlab::app::settings::Settings;
use oomlab::app::teaching::{Guess, Question, chapters};
use oomlab::app::{OomlabApp, Tab, views};
use oomlab::i18n::{Catalog, Lang};
use oomlab::memory::{Budget, StepMemory, simulate};
use oomlab::plan::Category;
use oomlab::units::format_bytes;

#[path = "support/padding.rs"]
mod support_padding;
use support_padding::padded_and_packed;
#[path = "support/lengths.rs"]
mod support_lengths;

const VOCAB: usize = 58;
const VIEWS: [&str; 7] = ["breakdown", "timeline", "sweep", "allocator-map", "training", "real-models", "snapshot"];

fn memory(s: &Settings) -> StepMemory {
    simulate(&s.plan(VOCAB).expect("a plan"), Budget::Unlimited).expect("fits without a budget")
}

/// What must not show before the reveal: the answer (a ratio, to two decimals) and the figures
/// it is computed from (bytes, as a view writes them and as a record holds them), or, for the
/// peak chapter, the op at the peak.
#[derive(Default)]
struct Secrets {
    numbers: Vec<String>,
    words: Vec<String>,
}

impl Secrets {
    fn bytes(&mut self, b: u64) {
        // 0 and tiny figures would be found in unrelated text ("0 bytes", "2").
        if b >= 10_000 {
            self.numbers.push(b.to_string());
            self.words.push(format_bytes(b));
        }
    }

    fn ratio(&mut self, r: f64) {
        self.numbers.push(format!("{r:.2}"));
    }

    /// Whether a step fits: no out-of-memory panel, message or figure of it.
    fn oom(&mut self, oom: &oomlab::memory::StepOom) {
        self.words.push("GPU out of memory".into());
        self.words.push(Catalog::new(Lang::En).text("oom-title"));
        // (The Chinese title alone is in the app's own title, which asks why memory runs out.)
        self.words.push(Catalog::new(Lang::Zh).text("main-oom-predicted"));
        self.words.push(Catalog::new(Lang::En).text("main-oom-predicted"));
        self.words.push(oom.op_label.clone());
        self.bytes(oom.error.cached_free_bytes);
        self.bytes(oom.error.largest_free_block);
    }
}

/// The model states per GPU of the estimate `change` makes of the chapter's setup.
fn real_states(s: &Settings, change: impl FnOnce(&mut oomlab::estimate::Setup)) -> u64 {
    let mut setup = s.estimate.0.clone();
    change(&mut setup);
    let e = oomlab::estimate::estimate(&setup).expect("an estimate");
    ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum()
}

fn secrets(id: &str, s: &Settings) -> Secrets {
    let mut out = Secrets::default();
    match id {
        "fill" => {
            let m = memory(s);
            let states = [Category::Parameters, Category::Gradients, Category::OptimizerState, Category::MasterWeights];
            let acts = [Category::Activations, Category::Temporaries];
            let sum = |cs: &[Category]| cs.iter().map(|&c| m.peak_allocated.get(c)).sum::<u64>();
            for c in states.iter().chain(&acts) {
                out.bytes(m.peak_allocated.get(*c));
            }
            out.bytes(sum(&states));
            out.bytes(sum(&acts));
            out.ratio(sum(&acts) as f64 / sum(&states) as f64);
        }
        "batch" => {
            let (a, b) = (memory(s), memory(&Settings { batch: s.batch * 2, ..s.clone() }));
            out.bytes(a.peak_allocated_bytes());
            out.bytes(b.peak_allocated_bytes());
            out.ratio(b.peak_allocated_bytes() as f64 / a.peak_allocated_bytes() as f64);
        }
        "sequence" => {
            let (a, b) = (memory(s), memory(&Settings { seq: s.seq * 2, ..s.clone() }));
            out.bytes(a.activation_peak_bytes);
            out.bytes(b.activation_peak_bytes);
            out.ratio(b.activation_peak_bytes as f64 / a.activation_peak_bytes as f64);
        }
        "peak" => {
            let plan = s.plan(VOCAB).expect("a plan");
            let m = memory(s);
            let op = m.timeline[m.peak_index].op.expect("an op");
            out.words.push(plan.op_label(op).expect("a label"));
            out.bytes(m.peak_allocated_bytes());
        }
        "allocator" => {
            let m = memory(s);
            out.bytes(m.peak_allocated_bytes());
            out.bytes(m.peak_reserved_bytes());
            out.ratio(m.peak_reserved_bytes() as f64 / m.peak_allocated_bytes() as f64);
        }
        "fixes" => {
            use oomlab::plan::{AttentionKind, Checkpoint, Precision};
            for fixed in [
                Settings { checkpoint: Checkpoint::BLOCKS, ..s.clone() },
                Settings { attention: AttentionKind::Fused, ..s.clone() },
                Settings { precision: Precision::Bf16, ..s.clone() },
                Settings { accum: s.accum * 2, ..s.clone() },
            ] {
                out.bytes(memory(&fixed).peak_allocated_bytes());
            }
        }
        "real" => {
            let zero = |z: u8| {
                move |x: &mut oomlab::estimate::Setup| {
                    x.parallel.zero = z;
                    x.parallel.data = 8;
                }
            };
            let (before, after) = (real_states(s, zero(0)), real_states(s, zero(3)));
            out.bytes(before);
            out.bytes(after);
            out.ratio(before as f64 / after as f64);
        }
        "moe" => {
            // Only the k experts a token is routed to.
            let routed = real_states(s, |x| {
                if let Some(m) = &mut x.arch.block.moe {
                    m.experts = m.top_k;
                    x.parallel.expert = 1;
                }
            });
            let all = real_states(s, |_| {});
            out.bytes(all);
            out.bytes(routed);
            out.ratio(all as f64 / routed as f64);
        }
        // The diagnosing chapter's answer is a category: checked on the OOM panel's own words.
        "diagnose" => {}
        // Whether the step fits: no out-of-memory panel, message or figure of it, and not what
        // the allocator would reserve without a budget.
        "fragment" => {
            let oom = simulate(&s.plan(VOCAB).expect("a plan"), s.device.budget_bytes).expect_err("out of memory");
            out.oom(&oom);
            out.bytes(memory(s).peak_reserved_bytes());
        }
        // Each DDP GPU's peak and its buckets' size, and the ratio to one GPU's peak alone.
        "buckets" => {
            let m = memory(s);
            out.bytes(m.peak_allocated_bytes());
            out.bytes(m.peak_requested.get(oomlab::plan::Category::Communication));
            let mut alone = s.clone();
            alone.device.parallel.gpus = 1;
            out.ratio(m.peak_allocated_bytes() as f64 / memory(&alone).peak_allocated_bytes() as f64);
        }
        // ZeRO-2's model states on each GPU, ZeRO-3's, and the ratio to DDP's.
        "zero2" => {
            let kept = |zero: u8| {
                let mut s = s.clone();
                s.device.parallel.zero = zero;
                let plan = s.plan(VOCAB).expect("a plan");
                plan.tensors
                    .iter()
                    .filter(|t| t.persistent && t.category != oomlab::plan::Category::Communication)
                    .map(|t| t.size_bytes())
                    .sum::<u64>()
            };
            out.bytes(kept(2));
            out.bytes(kept(3));
            out.ratio(kept(0) as f64 / kept(2) as f64);
        }
        // The bytes ZeRO-3 gathers in a step, and their ratio to the parameters.
        "zero3" => {
            let plan = s.plan(VOCAB).expect("a plan");
            let gathered: u64 = plan
                .ops
                .iter()
                .filter_map(|n| match &n.op {
                    oomlab::plan::Op::AllGather(g) => Some(g.full.len * 4),
                    _ => None,
                })
                .sum();
            out.bytes(gathered);
            out.ratio(gathered as f64 / (plan.layout.flat_len * 4) as f64);
        }
        // The padded batch's activations, the packed speeches', and their ratio.
        "padding" => {
            let (padded, packed) = padded_and_packed(s, VOCAB);
            out.bytes(padded);
            out.bytes(packed);
            out.ratio(padded as f64 / packed as f64);
        }
        // Whether batch 2 fits after batch 1: no out-of-memory panel, message or figure of it,
        // and not what batch 1 leaves reserved.
        "lengths" => {
            let (ran, oom) = support_lengths::run_batches(s, VOCAB, 1);
            let oom = oom.expect("out of memory at batch 2");
            out.oom(&oom);
            out.bytes(oom.error.requested_bytes);
            out.bytes(ran[0].stats.reserved_bytes);
        }
        // How many GPUs must split the sequence: no peak of any split before the reveal.
        "context" => {
            for c in [1, 2, 4, 8] {
                let mut setup = s.estimate.0.clone();
                setup.parallel.context = c;
                out.bytes(oomlab::estimate::estimate(&setup).expect("an estimate").peak_bytes);
            }
        }
        other => panic!("no secrets for chapter {other}: add them"),
    }
    out
}

/// Everything the AccessKit tree says.
fn spoken(harness: &Harness<'_, OomlabApp>) -> Vec<String> {
    harness
        .root()
        .children_recursive()
        .flat_map(|n| {
            let node = n.accesskit_node();
            [node.label(), node.value(), node.description()]
        })
        .flatten()
        .collect()
}

/// Every view's record drawn in this frame or the last, as JSON.
fn records(harness: &Harness<'_, OomlabApp>) -> Vec<String> {
    VIEWS
        .iter()
        .filter_map(|v| views::drawn(&harness.ctx, v))
        .map(|d| serde_json::to_string(&d).expect("a record serialises"))
        .collect()
}

/// Whether `needle` stands in `text` as a whole number or figure (not inside a longer one).
fn holds(text: &str, needle: &str) -> bool {
    let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit() || c == '.');
    text.match_indices(needle).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + needle.len()..].chars().next();
        !digit(before) && !digit(after)
    })
}

/// The secrets found in the app's records and accessible text now: "where: what".
fn leaks(harness: &Harness<'_, OomlabApp>, secrets: &Secrets) -> Vec<String> {
    let texts: Vec<(String, String)> = spoken(harness)
        .into_iter()
        .map(|s| ("accessible text".to_string(), s))
        .chain(records(harness).into_iter().map(|r| ("record".to_string(), r)))
        .collect();
    let mut found = Vec::new();
    for (place, text) in &texts {
        for n in secrets.numbers.iter().chain(&secrets.words) {
            if holds(text, n) {
                found.push(format!("{place} holds {n:?}: {text:.300}"));
            }
        }
    }
    found
}

/// The OOM panel's words about the tensor that did not fit name no category before the reveal
/// (the diagnosing chapter's question). Returns the texts that do.
fn oom_category_leaks(harness: &Harness<'_, OomlabApp>, lang: Lang, s: &Settings) -> Vec<String> {
    let oom = simulate(&s.plan(VOCAB).expect("a plan"), s.device.budget_bytes).expect_err("out of memory");
    let t = Catalog::new(lang);
    let names = [views::category_name(&t, oom.category), oom.category.name().to_string()];
    let quoted = format!("'{}'", oom.tensor_name);
    let about = spoken(harness).into_iter().filter(|x| x.contains(&quoted));
    about
        .into_iter()
        .filter(|x| names.iter().any(|n| x.contains(&format!("{n} {quoted}")) || x.contains(&format!("({n})"))))
        .collect()
}

/// One real step, as the One step button runs it (a setup that does not fit runs out of memory).
fn step(harness: &mut Harness<'_, OomlabApp>) {
    harness.state_mut().run.train_for(1);
    for _ in 0..400 {
        harness.step();
        if harness.state().is_idle() {
            break;
        }
    }
    assert!(harness.state().is_idle(), "the step finished");
    harness.run_steps(2);
}

/// Shows every tab in turn and gathers what leaks.
fn every_tab(
    harness: &mut Harness<'_, OomlabApp>,
    check: &dyn Fn(&Harness<'_, OomlabApp>) -> Vec<String>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (tab, _) in Tab::ALL {
        harness.state_mut().shown.tab = tab;
        harness.run_steps(3);
        found.extend(check(harness).into_iter().map(|l| format!("{tab:?}: {l}")));
    }
    found
}

fn walk(lang: Lang) {
    xdg();
    let mut harness = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.state_mut().set_lang(lang);
    harness.run();
    for (i, chapter) in chapters().iter().enumerate() {
        harness.state_mut().open_chapter(i);
        harness.run_steps(3);
        let settings = harness.state().settings().clone();
        let secrets = secrets(chapter.id, &settings);
        let what = format!("{lang:?} chapter {} ({})", i + 1, chapter.id);
        let check = |h: &Harness<'_, OomlabApp>| {
            let mut found = leaks(h, &secrets);
            if chapter.id == "diagnose" {
                found.extend(oom_category_leaks(h, lang, &settings));
            }
            found
        };
        // Before the reveal: as the chapter opens, and after a step the student ran.
        let before = every_tab(&mut harness, &check);
        assert!(before.is_empty(), "{what}: before the reveal\n{}", before.join("\n"));
        step(&mut harness);
        let stepped = every_tab(&mut harness, &check);
        assert!(stepped.is_empty(), "{what}: before the reveal, after a step\n{}", stepped.join("\n"));
        if chapter.id == "diagnose" {
            // What the question asks about stays: the message names the tensor.
            harness.state_mut().shown.tab = chapter.tab;
            harness.run_steps(3);
            let oom = simulate(&settings.plan(VOCAB).expect("a plan"), settings.device.budget_bytes).expect_err("OOM");
            let quoted = format!("'{}'", oom.tensor_name);
            assert!(spoken(&harness).iter().any(|x| x.contains(&quoted)), "{what}: the message names {quoted}");
        }
        // The reveal: its real step runs, and the figures are there, on the chapter's own tab.
        let guess = match chapter.question {
            Question::Ratio { .. } => Guess::Ratio(1.0),
            Question::Choice { .. } => Guess::Choice(Some(0)),
        };
        harness.state_mut().guess(guess);
        harness.state_mut().reveal();
        harness.run_steps(2);
        for _ in 0..400 {
            harness.step();
            if harness.state().is_idle() {
                break;
            }
        }
        harness.state_mut().shown.tab = chapter.tab;
        harness.run_steps(3);
        let after = check(&harness);
        assert!(!after.is_empty(), "{what}: after the reveal the figures show");
        if chapter.id != "diagnose" {
            let view = views::drawn(&harness.ctx, chapter.target).or_else(|| {
                // The chapter's target is a control or a panel: its tab's view.
                VIEWS.iter().find_map(|v| views::drawn(&harness.ctx, v))
            });
            let json = serde_json::to_string(&view).expect("json");
            assert!(!json.contains("\"veiled\":true"), "{what}: still veiled after the reveal: {json}");
        }
    }
}

#[test]
fn no_chapter_shows_its_answer_before_the_reveal_in_english() {
    walk(Lang::En);
}

#[test]
fn no_chapter_shows_its_answer_before_the_reveal_in_chinese() {
    walk(Lang::Zh);
}
