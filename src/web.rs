//! The browser entry point: finds the canvas and starts the app with eframe's web runner.

use wasm_bindgen::JsCast;

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
            .start(canvas, eframe::WebOptions::default(), Box::new(|cc| Ok(Box::new(crate::app::OomlabApp::new(cc)))))
            .await;
        if let Some(loading) = document.get_element_by_id("loading_text") {
            match result {
                Ok(()) => loading.remove(),
                Err(e) => loading.set_inner_html(&format!("<p>oomlab could not start: {e:?}</p>")),
            }
        }
    });
}
