//! Runs one real step in the app, as the One step button does, and waits for it.

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::OomlabApp;
use oomlab::i18n::{Catalog, Lang};

pub fn one_step(harness: &mut Harness<'_, OomlabApp>) {
    let before = harness.state().steps_done();
    harness.get_by_label("One step").click();
    for _ in 0..200_000 {
        harness.step();
        if harness.state().is_idle() && harness.state().steps_done() > before {
            break;
        }
    }
    let state = harness.state();
    let error = state.run.error.as_ref().map(|e| e.text(&Catalog::new(Lang::En)));
    assert_eq!(state.steps_done(), before + 1, "the step finished ({error:?})");
}
