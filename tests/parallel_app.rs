//! Pipeline and context parallelism in the app's Real models view: the controls change the
//! estimate, each stage's peak is listed with the most loaded named, and a shared link carries
//! the split.

#[path = "support/real_models.rs"]
mod support_real_models;
use support_real_models::harness;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::app::views::{self, drawn::Drawn};
use oomlab::estimate::pipeline::Schedule;
use oomlab::estimate::{ContextKind, catalog};
use oomlab::plan::{AttentionKind, Checkpoint};

fn record(h: &Harness<'_, OomlabApp>) -> oomlab::app::views::drawn::RealDrawn {
    match views::drawn(&h.ctx, "real-models") {
        Some(Drawn::RealModels(r)) => r,
        other => panic!("no record: {other:?}"),
    }
}

#[test]
fn pipeline_stages_are_listed_and_the_most_loaded_is_named() {
    let mut h = harness();
    assert!(record(&h).stages.is_empty(), "one GPU's model: no stages");
    h.state_mut().edit_settings(|settings| {
        let s = &mut settings.estimate.0;
        s.arch = catalog::find("llama-3.1-70b").expect("70b").model.arch.clone();
        s.seq = 4096;
        s.accum = 8;
        s.parallel.tensor = 8;
        s.parallel.sequence = true;
        s.parallel.pipeline = 4;
        s.parallel.schedule = Schedule::Interleaved(5);
        s.checkpoint = Checkpoint::Selective;
    });
    h.run_steps(4);
    let setup = h.state().settings().estimate.setup().expect("a setup");
    let e = oomlab::estimate::estimate(&setup).expect("an estimate");
    let r = record(&h);
    assert_eq!(r.stages, e.stages.iter().map(|st| (st.stage, st.peak_bytes)).collect::<Vec<_>>());
    assert_eq!(r.peak_bytes, e.peak_bytes, "the breakdown is the most loaded stage's");
    h.get_by_label_contains("Pipeline of 4 stages (interleaved:5): the breakdown above is stage 0's");
    h.get_by_label_contains("Stage 0: 20 layers and the embedding, 4.60 micro-batches in flight");
    h.get_by_label_contains("Stage 3: 20 layers and the head");
    // The link carries the split and opens to the same estimate.
    let link = h.state().settings().to_url_hash();
    let (opened, notice) = Settings::from_url_hash(&link, 58);
    assert!(notice.is_none(), "the link opens cleanly");
    assert_eq!(opened.estimate.0.parallel, setup.parallel);
    // The controls: the stages' field and the schedule's.
    h.get_by_label_contains("pipeline stages");
    h.get_by_label_contains("chunks per stage");
    h.snapshot("real_models_pipeline");
}

#[test]
fn context_parallelism_lets_the_long_sequence_fit_in_the_view() {
    let mut h = harness();
    h.state_mut().edit_settings(|settings| {
        let s = &mut settings.estimate.0;
        s.arch = catalog::find("llama-3.1-8b").expect("8b").model.arch.clone();
        s.seq = 131072;
        s.attention = AttentionKind::Fused;
        s.checkpoint = Checkpoint::Every(1);
        s.parallel.data = 8;
        s.parallel.zero = 3;
    });
    h.run_steps(4);
    assert!(!record(&h).fits, "128k tokens on one GPU's share do not fit");
    h.state_mut().edit_settings(|settings| {
        let s = &mut settings.estimate.0;
        s.parallel.context = 4;
        s.parallel.context_kind = ContextKind::Ulysses;
    });
    h.run_steps(4);
    let r = record(&h);
    assert!(r.fits, "split over 4 GPUs it fits");
    let setup = h.state().settings().estimate.setup().expect("a setup");
    assert_eq!(r.peak_bytes, oomlab::estimate::estimate(&setup).expect("an estimate").peak_bytes);
    // The control, and the model states' source saying over which GPUs ZeRO partitions them
    // (the gradients', optimizer state's and master weights' lines).
    let cited = "partitioned by stage over N_d × C, the data- and context-parallel GPUs";
    let labels: Vec<String> = h
        .root()
        .children_recursive()
        .flat_map(|n| [n.accesskit_node().label(), n.accesskit_node().value()])
        .flatten()
        .filter(|l| l.contains("context-parallel") || l.contains("N_d × C"))
        .collect();
    assert!(labels.iter().any(|l| !l.contains(cited)), "the control: {labels:?}");
    assert!(labels.iter().any(|l| l.contains(cited)), "the states' source: {labels:#?}");
    h.get_by_label("Ulysses");
    let link = h.state().settings().to_url_hash();
    let (opened, _) = Settings::from_url_hash(&link, 58);
    assert_eq!(
        (opened.estimate.0.parallel.context, opened.estimate.0.parallel.context_kind),
        (4, ContextKind::Ulysses)
    );
}

/// Lesson chapter 16: how many GPUs must split Llama 3.1 8B's 131,072 tokens for the step to fit.
/// Before the reveal the view is veiled; after it the answer gives every split's peak (the
/// estimator's own), and the verdict judges the guess.
#[test]
fn the_context_chapter_reveals_the_split_that_fits() {
    use oomlab::app::teaching::{Guess, Verdict, chapters};
    let mut h = harness();
    let index = chapters().iter().position(|c| c.id == "context").expect("the chapter");
    assert_eq!(index, chapters().len() - 1, "the last chapter");
    h.state_mut().open_chapter(index);
    h.run_steps(4);
    assert!(record(&h).veiled, "the estimate is veiled before the reveal");
    assert!(h.query_by_label_contains("How many GPUs must split the sequence").is_some());
    h.state_mut().guess(Guess::Choice(Some(1)));
    h.state_mut().reveal();
    h.run_steps(6);
    let lesson = h.state().teaching.lesson().cloned().expect("open");
    assert_eq!(lesson.verdict, Some(Verdict::Choice { answer: 2, right: false }), "4 GPUs, not 2");
    let peak = |c: u64| {
        let mut s = h.state().settings().estimate.0.clone();
        s.parallel.context = c;
        oomlab::units::format_bytes(oomlab::estimate::estimate(&s).expect("an estimate").peak_bytes)
    };
    let text = format!("4 GPUs. The peak per GPU is {} on one, {} split over 2, {} over 4", peak(1), peak(2), peak(4));
    h.get_by_label_contains(&text);
    assert!(!record(&h).veiled, "revealed");
    h.snapshot("lesson_context_en");
}

/// DeepSeek-V3's multi-token-prediction module: a box shown for a model that has one (not for
/// Llama), counted only when ticked; the estimate follows it and a link carries it.
#[test]
fn the_multi_token_prediction_box_counts_the_module() {
    let mut h = harness();
    assert!(h.query_by_label_contains("multi-token-prediction").is_none(), "LLaMA-2 has none");
    let base = catalog::find("deepseek-v3").expect("DeepSeek-V3").model.arch.clone();
    h.state_mut().edit_settings(|s| s.estimate.0.arch = base.clone());
    h.run_steps(3);
    let before = record(&h).peak_bytes;
    h.get_by_label_contains("multi-token-prediction").click();
    h.run_steps(4);
    let s = h.state().settings().estimate.setup().expect("a setup");
    assert_eq!(s.arch.block.mtp, 1);
    assert!(s.arch.parameters() > base.parameters());
    let r = record(&h);
    assert_eq!(r.peak_bytes, oomlab::estimate::estimate(&s).expect("an estimate").peak_bytes);
    assert!(r.peak_bytes > before, "the module's states, activations and logits");
    let (opened, _) = Settings::from_url_hash(&h.state().settings().to_url_hash(), 58);
    assert_eq!(opened.estimate.0.arch.block.mtp, 1, "the link carries it");
}

/// Every catalog model's estimate draws in the view, its formula's every glyph in the app's
/// fonts (the tests' missing-glyph policy panics): a subscript the fonts lack once slipped into
/// the mixtures' formulas.
#[test]
fn every_catalog_model_draws_in_the_view() {
    let mut h = harness();
    for e in catalog::entries() {
        h.state_mut().edit_settings(|s| s.estimate.0.arch = e.model.arch.clone());
        h.run_steps(2);
        let setup = h.state().settings().estimate.setup().expect("a setup");
        let formula = setup.arch.formula();
        assert!(h.query_by_label_contains(&formula).is_some(), "{}: its formula is shown", e.key);
        assert_eq!(record(&h).peak_bytes, oomlab::estimate::estimate(&setup).expect("an estimate").peak_bytes);
    }
}
