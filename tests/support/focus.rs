#![allow(dead_code)] // each test binary that includes this uses part of it
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

/// Presses `key` until `done` holds of the app, at most `times` times.
pub fn press_until(harness: &mut Harness<'_, OomlabApp>, key: egui::Key, times: usize, done: fn(&OomlabApp) -> bool) {
    for _ in 0..times {
        if done(harness.state()) {
            return;
        }
        harness.key_press(key);
        harness.run();
    }
}
