//! The browser's CPU worker: this crate, built a second time with SIMD (`web/build.sh`
//! puts it in `dist/worker/`), started by `worker.js` in a module Web Worker. It answers the
//! page's requests with [`crate::app::cpu_worker::Handler`]: the CPU backend's steps run here,
//! off the page's thread. Sent a file (a `Blob`) instead, it reads it as a PyTorch memory
//! snapshot, a megabyte at a time (`FileReaderSync`: the file is never in its memory whole),
//! says how far it got, and hands the page the result as one transferred buffer.

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
        let scope_for_files = scope.clone();
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
            if let Some(blob) = e.data().dyn_ref::<web_sys::Blob>() {
                return read_snapshot(blob, &scope_for_files, &post);
            }
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

/// A `Blob` read a chunk at a time (`FileReaderSync` exists in workers only).
struct BlobReader {
    blob: web_sys::Blob,
    reader: web_sys::FileReaderSync,
    at: f64,
}

impl std::io::Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let end = (self.at + buf.len() as f64).min(self.blob.size());
        if end <= self.at {
            return Ok(0);
        }
        let chunk =
            self.blob.slice_with_f64_and_f64(self.at, end).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let bytes = self.reader.read_as_array_buffer(&chunk).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let bytes = js_sys::Uint8Array::new(&bytes);
        let n = (bytes.length() as usize).min(buf.len());
        bytes.subarray(0, n as u32).copy_to(&mut buf[..n]);
        self.at += n as f64;
        Ok(n)
    }
}

/// Reads a snapshot from `blob`, posting progress about every 4 MB, then the dump as bytes
/// (transferred, not copied) or why it failed.
fn read_snapshot(blob: &web_sys::Blob, scope: &web_sys::DedicatedWorkerGlobalScope, post: &impl Fn(Reply)) {
    use crate::memory::snapshot::{SnapshotError, read, transfer};
    let total = blob.size() as u64;
    let reader = match web_sys::FileReaderSync::new() {
        Ok(r) => r,
        Err(e) => return post(Reply::SnapshotFailed { error: SnapshotError::Unreadable(format!("{e:?}")).worded() }),
    };
    let mut src = BlobReader { blob: blob.clone(), reader, at: 0.0 };
    let mut told = 0u64;
    let mut progress = |done: u64| {
        if done >= told + (4 << 20) || done == total {
            told = done;
            post(Reply::SnapshotProgress { done, total });
        }
    };
    let dump = match read::from_reader(&mut src, Some(total), &mut progress) {
        Ok(d) => d,
        Err(e) => return post(Reply::SnapshotFailed { error: e.worded() }),
    };
    let bytes = transfer::to_bytes(&dump);
    drop(dump);
    let array = js_sys::Uint8Array::from(&bytes[..]);
    drop(bytes);
    let transfer = js_sys::Array::of1(&array.buffer());
    if let Err(e) = scope.post_message_with_transfer(&array, &transfer) {
        post(Reply::SnapshotFailed { error: SnapshotError::Unreadable(format!("{e:?}")).worded() });
    }
}
