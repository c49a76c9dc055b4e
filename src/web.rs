//! The browser entry point: finds the canvas and starts the app with eframe's web runner.

use std::cell::RefCell;

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::wasm_bindgen;

thread_local! {
    /// The app's context, to wake it when the page asks for an action.
    static CTX: RefCell<Option<egui::Context>> = const { RefCell::new(None) };
}

#[wasm_bindgen]
extern "C" {
    /// `web/a11y.js`: keeps the hidden DOM elements in step with the entries (JSON).
    #[wasm_bindgen(catch, js_namespace = window, js_name = oomlabMirror)]
    fn oomlab_mirror(json: &str) -> Result<(), wasm_bindgen::JsValue>;
}

/// Hands the mirror's entries to the page (a page without `web/a11y.js` gets nothing).
fn mirror_to_page(json: &str) {
    let _ = oomlab_mirror(json);
}

/// What assistive technology did to a mirrored element (`web/a11y.js`): `click`, `focus`,
/// `increment`, `decrement`, or `set` with a value, on the AccessKit node `id`. Returns whether
/// the app understood it; the next frame carries it out.
#[wasm_bindgen(js_name = oomlabA11yAction)]
pub fn a11y_action(id: &str, action: &str, value: Option<String>) -> bool {
    let queued = crate::app::a11y::queue_action(id, action, value.as_deref());
    if queued {
        CTX.with(|c| c.borrow().as_ref().map(egui::Context::request_repaint));
    }
    queued
}

/// Id of the canvas in `index.html`.
pub const CANVAS_ID: &str = "oomlab_canvas";

/// Starts the app on the page's canvas. Errors are logged to the console and shown in the
/// page's loading text; nothing panics.
pub fn start() {
    // The app's progress ("oomlab: step 1 on …") goes to the browser console.
    let _ = eframe::WebLogger::init(log::LevelFilter::Info);
    // Started by `worker.js` in a Web Worker: the CPU backend's end, not the app.
    if let Ok(scope) = js_sys::global().dyn_into::<web_sys::DedicatedWorkerGlobalScope>() {
        crate::web_worker::run(scope);
        return;
    }
    wasm_bindgen_futures::spawn_local(async {
        let document = web_sys::window().and_then(|w| w.document());
        let Some(document) = document else {
            log::error!("oomlab: no document");
            return;
        };
        let canvas =
            document.get_element_by_id(CANVAS_ID).and_then(|e| e.dyn_into::<web_sys::HtmlCanvasElement>().ok());
        let Some(canvas) = canvas else {
            log::error!("oomlab: no <canvas id=\"{CANVAS_ID}\"> in the page");
            return;
        };
        let runner = eframe::WebRunner::new();
        let result = runner
            .start(
                canvas,
                eframe::WebOptions::default(),
                Box::new(|cc| {
                    // The accessible mirror: egui's AccessKit tree as DOM, through
                    // web/a11y.js; the page's actions come back through `a11y_action`.
                    cc.egui_ctx.add_plugin(crate::app::a11y::Mirror::new(Box::new(mirror_to_page)));
                    CTX.with(|c| *c.borrow_mut() = Some(cc.egui_ctx.clone()));
                    Ok(Box::new(crate::app::OomlabApp::new(cc, system_prefs())))
                }),
            )
            .await;
        if let Some(loading) = document.get_element_by_id("loading_text") {
            match result {
                Ok(()) => loading.remove(),
                Err(e) => loading.set_inner_html(&format!("<p>oomlab could not start: {e:?}</p>")),
            }
        }
    });
}

/// What the browser says the user asked of every page (`prefers-reduced-motion: reduce`,
/// `prefers-contrast: more`): the app starts with those preferences on.
pub fn system_prefs() -> crate::app::settings::Prefs {
    let matches =
        |query: &str| web_sys::window().and_then(|w| w.match_media(query).ok().flatten()).is_some_and(|m| m.matches());
    crate::app::settings::Prefs {
        reduced_motion: matches("(prefers-reduced-motion: reduce)"),
        high_contrast: matches("(prefers-contrast: more)"),
        ..Default::default()
    }
}
