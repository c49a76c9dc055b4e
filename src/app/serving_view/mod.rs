//! The Serving tab: the toy serves a stream of requests over a real KV cache, in the layout the
//! student picks, an iteration or two per frame, and shows what the cache reserved, held and
//! wasted — from the run, never drawn from a formula.
//!
//! Desktop only for now: the serving engine and this tab took the web module 31 kB (gzipped) past
//! its 2.5 MB ceiling, so the browser's tab says where to serve instead (`oomlab serving`, the
//! desktop app) until the module makes room.

#[cfg(not(target_arch = "wasm32"))]
mod charts;
#[cfg(not(target_arch = "wasm32"))]
mod tab;

#[cfg(not(target_arch = "wasm32"))]
pub use charts::layout_name;
#[cfg(not(target_arch = "wasm32"))]
pub use tab::ServingTab;

/// The browser's Serving tab: where to serve instead.
#[cfg(target_arch = "wasm32")]
#[derive(Default)]
pub struct ServingTab;

#[cfg(target_arch = "wasm32")]
impl ServingTab {
    pub fn ui(
        &mut self,
        ui: &mut egui::Ui,
        t: &crate::i18n::Catalog,
        _vocab: usize,
        _gpu: Option<&crate::backend::Gpu>,
    ) {
        ui.label(t.text("tab-serving-later"));
    }
}
