//! The ways the page reaches its worker: a thread (native; the app's tests) and a Web Worker
//! (the browser).

#[cfg(not(target_arch = "wasm32"))]
use super::{Handler, Reply, Request, Transport};
#[cfg(not(target_arch = "wasm32"))]
use crate::backend::WorkerLost;

/// A worker on a thread of this process, over channels, with the messages as JSON: the browser
/// path's behaviour (asynchronous replies, progress while the page draws) where there is no
/// browser — the app's tests use it.
#[cfg(not(target_arch = "wasm32"))]
pub struct ThreadTransport {
    requests: std::sync::mpsc::Sender<String>,
    replies: std::sync::mpsc::Receiver<String>,
}

#[cfg(not(target_arch = "wasm32"))]
impl ThreadTransport {
    pub fn spawn() -> Self {
        let (request_tx, request_rx) = std::sync::mpsc::channel::<String>();
        let (reply_tx, reply_rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            let send = |r: Reply| {
                let _ = reply_tx.send(serde_json::to_string(&r).unwrap_or_default());
            };
            send(Reply::Alive);
            let start = std::time::Instant::now();
            let clock = || start.elapsed().as_secs_f64();
            let mut handler = Handler::default();
            for json in request_rx {
                if let Ok(request) = serde_json::from_str::<Request>(&json) {
                    handler.handle(request, &clock, &mut |r| send(r));
                }
            }
        });
        Self { requests: request_tx, replies: reply_rx }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Transport for ThreadTransport {
    fn send(&mut self, request: &Request) -> Result<(), WorkerLost> {
        let json = serde_json::to_string(request)?;
        self.requests.send(json).map_err(|_| WorkerLost::Stopped)
    }
    fn try_recv(&mut self) -> Result<Option<Reply>, WorkerLost> {
        match self.replies.try_recv() {
            Ok(json) => Ok(Some(serde_json::from_str(&json)?)),
            Err(std::sync::mpsc::TryRecvError::Empty) => Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(WorkerLost::Stopped),
        }
    }
}

/// The browser's transport: a module Web Worker running `worker.js` (which loads the SIMD
/// build of this crate from `worker/`), messages as JSON strings.
#[cfg(target_arch = "wasm32")]
pub mod web_transport {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::Closure;

    use super::super::{Reply, Request, Transport};
    use crate::backend::WorkerLost;

    pub struct WebTransport {
        worker: web_sys::Worker,
        /// Replies (JSON) or the worker's error, in arrival order.
        inbox: Rc<RefCell<VecDeque<Result<String, WorkerLost>>>>,
        _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
        _on_error: Closure<dyn FnMut(web_sys::Event)>,
    }

    impl WebTransport {
        pub fn spawn(url: &str) -> Result<Self, WorkerLost> {
            let options = web_sys::WorkerOptions::new();
            options.set_type(web_sys::WorkerType::Module);
            let worker = web_sys::Worker::new_with_options(url, &options).map_err(browser)?;
            let inbox: Rc<RefCell<VecDeque<Result<String, WorkerLost>>>> = Rc::default();
            let to_inbox = Rc::clone(&inbox);
            let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                if let Some(json) = e.data().as_string() {
                    to_inbox.borrow_mut().push_back(Ok(json));
                }
            });
            let to_inbox = Rc::clone(&inbox);
            // A script that does not load fires a plain Event; an exception in it an ErrorEvent.
            let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
                let why = e.dyn_ref::<web_sys::ErrorEvent>().map_or("its script did not load".into(), |e| e.message());
                to_inbox.borrow_mut().push_back(Err(WorkerLost::Browser(why)));
            });
            worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
            worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
            Ok(Self { worker, inbox, _on_message: on_message, _on_error: on_error })
        }
    }

    impl Transport for WebTransport {
        fn send(&mut self, request: &Request) -> Result<(), WorkerLost> {
            let json = serde_json::to_string(request)?;
            self.worker.post_message(&json.into()).map_err(browser)
        }
        fn try_recv(&mut self) -> Result<Option<Reply>, WorkerLost> {
            match self.inbox.borrow_mut().pop_front() {
                Some(Ok(json)) => Ok(Some(serde_json::from_str(&json)?)),
                Some(Err(e)) => Err(e),
                None => Ok(None),
            }
        }
    }

    /// The browser's refusal, in its own words.
    fn browser(e: wasm_bindgen::JsValue) -> WorkerLost {
        WorkerLost::Browser(format!("{e:?}"))
    }

    impl Drop for WebTransport {
        fn drop(&mut self) {
            self.worker.terminate();
        }
    }
}
