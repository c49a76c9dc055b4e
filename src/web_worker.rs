//! The browser's CPU worker: this crate, built a second time with SIMD (`web/build.sh`
//! puts it in `dist/worker/`), started by `worker.js` in a module Web Worker. It answers the
//! page's requests with [`crate::app::cpu_worker::Handler`]: the CPU backend's steps run here,
//! off the page's thread.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::Closure;

use crate::app::cpu_worker::{Handler, Reply, Request};

/// Listens for requests on the worker's scope, then says it is alive.
pub fn run(scope: web_sys::DedicatedWorkerGlobalScope) {
    let post = {
        let scope = scope.clone();
        move |r: Reply| {
            if let Ok(json) = serde_json::to_string(&r) {
                let _ = scope.post_message(&json.into());
            }
        }
    };
    let handler = Rc::new(RefCell::new(Handler::default()));
    let clock = || js_sys::Date::now() / 1e3;
    let on_message = {
        let post = post.clone();
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
            let Some(json) = e.data().as_string() else { return };
            match serde_json::from_str::<Request>(&json) {
                Ok(request) => handler.borrow_mut().handle(request, &clock, &mut |r| post(r)),
                Err(err) => log::warn!("oomlab worker: not a request ({err})"),
            }
        })
    };
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The scope holds the handler for the worker's life.
    on_message.forget();
    log::info!("oomlab worker: ready (simd128: {})", cfg!(target_feature = "simd128"));
    post(Reply::Alive);
}
