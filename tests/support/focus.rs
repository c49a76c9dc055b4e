//! Keyboard-only tests' helper: Tab until a widget with this accessible name has the focus, as
//! a screen reader would report it.

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::OomlabApp;

/// Presses Tab until a node labelled `label` is focused (at most 300 times).
pub fn tab_to(harness: &mut Harness<'_, OomlabApp>, label: &str) {
    for _ in 0..300 {
        if harness.query_all_by_label(label).any(|n| n.accesskit_node().is_focused()) {
            return;
        }
        harness.key_press(egui::Key::Tab);
        harness.run();
    }
    panic!("Tab never reached {label:?}");
}
