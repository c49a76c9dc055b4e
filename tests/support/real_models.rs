//! The app on its Real models tab, for the tests of that view: a headless harness and the
//! view's record.

use egui_kittest::Harness;
use oomlab::app::settings::Settings;
use oomlab::app::{OomlabApp, Tab};

#[path = "xdg.rs"]
mod support_xdg;

/// The app at 1280 × 1000 on its Real models tab.
pub fn harness() -> Harness<'static, OomlabApp> {
    support_xdg::xdg();
    let mut h = Harness::builder()
        .with_size([1280.0, 1000.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    h.state_mut().shown.tab = Tab::RealModels;
    h.run_steps(3);
    h
}
