//! The browser's import of a snapshot: the file goes to a Web Worker of its own (the same
//! `worker.js` as the CPU worker), which reads it a megabyte at a time, reports how far it got,
//! and sends back the compact dump as one transferred buffer. The page keeps drawing; only the
//! replay of the dump runs here, once it arrives.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::Closure;

use crate::app::cpu_worker::Reply;
use crate::memory::snapshot::SnapshotError;
use crate::memory::snapshot::dump::Dump;
use crate::memory::snapshot::transfer;

/// Where an import is.
#[derive(Default)]
struct Inbox {
    /// The file, until the worker says it is listening.
    file: Option<web_sys::File>,
    done: u64,
    result: Option<Result<Dump, SnapshotError>>,
}

pub struct Import {
    worker: web_sys::Worker,
    /// The last tenth of the file logged.
    logged: std::cell::Cell<u64>,
    inbox: Rc<RefCell<Inbox>>,
    pub total: u64,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

impl Import {
    /// Starts a worker for `file`.
    pub fn start(file: web_sys::File, ctx: &egui::Context) -> Result<Import, SnapshotError> {
        let options = web_sys::WorkerOptions::new();
        options.set_type(web_sys::WorkerType::Module);
        let worker = web_sys::Worker::new_with_options("./worker.js", &options).map_err(unreadable)?;
        let total = file.size() as u64;
        let inbox = Rc::new(RefCell::new(Inbox { file: Some(file), ..Inbox::default() }));
        let (to_inbox, to_worker, repaint) = (inbox.clone(), worker.clone(), ctx.clone());
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
            let data = e.data();
            let mut inbox = to_inbox.borrow_mut();
            if let Some(json) = data.as_string() {
                match serde_json::from_str::<Reply>(&json) {
                    Ok(Reply::Alive) => {
                        if let Some(file) = inbox.file.take()
                            && let Err(e) = to_worker.post_message(&file)
                        {
                            inbox.result = Some(Err(unreadable(e)));
                        }
                    }
                    Ok(Reply::SnapshotProgress { done, .. }) => inbox.done = done,
                    Ok(Reply::SnapshotFailed { error }) => inbox.result = Some(Err(SnapshotError::Reported(error))),
                    _ => {}
                }
            } else if let Some(buffer) = data.dyn_ref::<js_sys::Uint8Array>() {
                let bytes = buffer.to_vec();
                inbox.result = Some(transfer::from_bytes(&bytes));
            }
            repaint.request_repaint();
        });
        let to_inbox = inbox.clone();
        let repaint = ctx.clone();
        let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
            // A worker that runs out of memory or fails to load ends here: a message, not a
            // crashed tab.
            let why = e.dyn_ref::<web_sys::ErrorEvent>().map_or("the worker stopped".into(), |e| e.message());
            to_inbox.borrow_mut().result = Some(Err(SnapshotError::Unreadable(why)));
            repaint.request_repaint();
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(Import { worker, logged: 0.into(), inbox, total, _on_message: on_message, _on_error: on_error })
    }

    /// Bytes read so far.
    pub fn done(&self) -> u64 {
        self.inbox.borrow().done
    }

    /// The percentage read, when it passes another tenth of the file (for the log).
    pub fn tenth(&self) -> Option<u64> {
        let pct = 100 * self.done() / self.total.max(1);
        (pct / 10 > self.logged.get()).then(|| {
            self.logged.set(pct / 10);
            pct
        })
    }

    /// The dump or why not, once the worker is done.
    pub fn take(&self) -> Option<Result<Dump, SnapshotError>> {
        self.inbox.borrow_mut().result.take()
    }
}

/// The browser's refusal, in its own words.
fn unreadable(e: wasm_bindgen::JsValue) -> SnapshotError {
    SnapshotError::Unreadable(format!("{e:?}"))
}

impl Drop for Import {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}
