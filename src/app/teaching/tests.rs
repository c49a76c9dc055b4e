//! The teaching's state on its own: lessons and challenges taking turns, the reveal's step, and
//! the answer read from the real step.

use super::*;
use crate::app::Settings;

#[test]
fn lessons_and_challenges_take_turns_and_a_reveal_asks_for_one_step() {
    let mut t = Teaching::default();
    let mut s = Settings::default();
    assert!(!t.panel_open());
    let asks = t.toggle_lessons(&mut s);
    assert_eq!(asks.tab, Some(Tab::Breakdown), "the first chapter's tab");
    assert!(t.lesson.is_some() && t.panel_open());
    t.toggle_challenges();
    assert!(t.lesson.is_none() && t.show_challenges);
    t.toggle_lessons(&mut s);
    assert!(!t.show_challenges && t.lesson.is_some());
    t.reveal(&s, 58);
    assert!(t.take_step_request().is_some());
    assert!(t.take_step_request().is_none(), "once");
    let both = Asks { tab: Some(Tab::Sweep), open_drawer: false }.and(Asks { tab: None, open_drawer: true });
    assert_eq!(both, Asks { tab: Some(Tab::Sweep), open_drawer: true });
}

/// The revealed answer is read again from the real step: equal to the plan's when the step
/// did what the plan said; the step's, and said to differ, when its record says otherwise.
#[test]
fn the_answer_comes_from_the_real_step_and_a_disagreement_is_said() {
    use super::lesson_state::{agree, step_and_plan};
    use super::lessons::{Facts, Verdict, chapters};
    use crate::app::run::StepRecord;
    use crate::plan::Category;
    let t = crate::i18n::Catalog::new(crate::i18n::Lang::En);
    let mut teaching = Teaching::default();
    let mut s = Settings::default();
    teaching.toggle_lessons(&mut s);
    let facts = Facts::new(&s, 58).expect("facts");
    let ratio = |v: &Option<Verdict>| match v {
        Some(Verdict::Ratio { answer, .. }) => *answer,
        other => panic!("{other:?}"),
    };
    // The step left exactly the plan's record: the same answer, read from the step.
    teaching.reveal(&s, 58);
    assert!(teaching.take_step_request().is_some());
    teaching.settle(&s, 58, Some(StepRecord::Ran(&facts.memory)));
    let lesson = teaching.lesson.clone().expect("a lesson");
    assert!(lesson.from_step && agree(lesson.planned.as_ref().expect("plan"), lesson.verdict.as_ref().expect("v")));
    let question = &chapters()[0].question;
    let line = step_and_plan(&t, &lesson, question).expect("a line");
    assert!(line.starts_with("The real step: × ") && line.contains("allocator (live)"), "{line}");
    // A record with twice the activations: the step's answer, not the plan's, and said so.
    let mut odd = facts.memory.clone();
    let acts = odd.peak_allocated.get(Category::Activations);
    odd.peak_allocated.add(Category::Activations, acts);
    teaching.reveal(&s, 58);
    teaching.take_step_request();
    teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
    let lesson = teaching.lesson.clone().expect("a lesson");
    let (step, plan) = (ratio(&lesson.verdict), ratio(&lesson.planned));
    assert!(step > plan * 1.2, "the step's answer ({step}) is the step's, not the plan's ({plan})");
    assert!(!agree(lesson.planned.as_ref().expect("p"), lesson.verdict.as_ref().expect("v")));
    let line = step_and_plan(&t, &lesson, question).expect("a line");
    assert!(line.contains(&format!("× {step:.2}")) && line.contains(&format!("× {plan:.2}")), "{line}");
    // Not settled while the step is still asked for; a chapter that reads no step keeps the
    // plan's answer, with no step line.
    teaching.open_chapter(6, &mut s);
    teaching.reveal(&s, 58);
    teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
    assert!(teaching.lesson.as_ref().is_some_and(|l| !l.from_step && l.planned.is_some()), "step still asked");
    teaching.take_step_request();
    teaching.settle(&s, 58, Some(StepRecord::Ran(&odd)));
    let lesson = teaching.lesson.clone().expect("a lesson");
    assert!(!lesson.from_step && step_and_plan(&t, &lesson, &chapters()[6].question).is_none());
}
