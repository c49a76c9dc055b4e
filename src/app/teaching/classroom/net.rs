//! The teacher's client of the class server: requests on ehttp (the browser's `fetch`, or ureq on
//! a thread on the desktop) and the class's live state as Server-Sent Events (the browser's
//! `EventSource`; on the desktop ehttp's streaming fetch on a thread). Every answer arrives in
//! the classroom's inbox as a [`Msg`], and asks egui for a frame.

use std::sync::mpsc::Sender;

use crate::class::{ClassState, Create, Created, ErrorBody, Results, Roster};

/// What a request or the stream brought back.
#[derive(Debug)]
pub enum Msg {
    Created(Result<Created, Failure>),
    /// The answer to a chapter, reveal or close: the class's state as the server has it.
    Acted(Result<ClassState, Failure>),
    Results(Result<Results, Failure>),
    Csv(Result<Vec<u8>, Failure>),
    /// The class's students, with their names (the teacher's list).
    Roster(Result<Roster, Failure>),
    /// The live stream's newest state.
    State(ClassState),
    /// The live stream ended (the server went away, or the class closed).
    StreamEnded,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// No answer at all: the address is wrong, or no server runs there.
    Unreachable,
    /// The server answered with an error status (and its reason, in English, for the log).
    Refused(u16, String),
    /// The server answered 2xx with a body this client cannot read.
    Unreadable,
}

/// Where answers go: the classroom's inbox and the frame to wake.
#[derive(Clone)]
pub struct Reply {
    pub tx: Sender<Msg>,
    pub ctx: Option<egui::Context>,
}

impl Reply {
    fn send(&self, msg: Msg) {
        let _ = self.tx.send(msg);
        if let Some(ctx) = &self.ctx {
            ctx.request_repaint();
        }
    }
}

fn checked(result: ehttp::Result<ehttp::Response>) -> Result<ehttp::Response, Failure> {
    let response = result.map_err(|_| Failure::Unreachable)?;
    if response.ok {
        Ok(response)
    } else {
        let reason = response.json::<ErrorBody>().map(|e| e.error).unwrap_or_else(|_| response.status_text.clone());
        Err(Failure::Refused(response.status, reason))
    }
}

fn json<T: serde::de::DeserializeOwned>(result: ehttp::Result<ehttp::Response>) -> Result<T, Failure> {
    checked(result)?.json().map_err(|_| Failure::Unreadable)
}

fn with_token(mut request: ehttp::Request, token: Option<&str>) -> ehttp::Request {
    if let Some(t) = token {
        request.headers.insert("Authorization", format!("Bearer {t}"));
    }
    request
}

fn post(url: String, body: &impl serde::Serialize, token: Option<&str>) -> ehttp::Request {
    // Serialising the contract's own types cannot fail; an empty body would be refused anyway.
    let request =
        ehttp::Request::post_json(url.clone(), body).unwrap_or_else(|_| ehttp::Request::post(url, Vec::new()));
    with_token(request, token)
}

/// `POST /api/classes`, with the server's teacher key when there is one (a server on another
/// computer asks for it).
pub fn create(server: &str, key: Option<&str>, create: &Create, reply: Reply) {
    let request = post(format!("{server}/api/classes"), create, key);
    ehttp::fetch(request, move |r| reply.send(Msg::Created(json(r))));
}

/// A teacher's action (`chapter`, `reveal`, `close`, `lock`, `admit`, `remove`) with its body.
pub fn act(server: &str, class: &Created, action: &str, body: &impl serde::Serialize, reply: Reply) {
    let url = format!("{server}/api/classes/{}/{action}", class.code);
    let request = post(url, body, Some(&class.teacher_token));
    ehttp::fetch(request, move |r| reply.send(Msg::Acted(json(r))));
}

/// `GET …/results?chapter=N`.
pub fn results(server: &str, class: &Created, chapter: u32, reply: Reply) {
    let url = format!("{server}/api/classes/{}/results?chapter={chapter}", class.code);
    let request = with_token(ehttp::Request::get(url), Some(&class.teacher_token));
    ehttp::fetch(request, move |r| reply.send(Msg::Results(json(r))));
}

/// `GET …/students`.
pub fn roster(server: &str, class: &Created, reply: Reply) {
    let url = format!("{server}/api/classes/{}/students", class.code);
    let request = with_token(ehttp::Request::get(url), Some(&class.teacher_token));
    ehttp::fetch(request, move |r| reply.send(Msg::Roster(json(r))));
}

/// `GET …/answers.csv`.
pub fn csv(server: &str, class: &Created, reply: Reply) {
    let url = format!("{server}/api/classes/{}/answers.csv", class.code);
    let request = with_token(ehttp::Request::get(url), Some(&class.teacher_token));
    ehttp::fetch(request, move |r| reply.send(Msg::Csv(checked(r).map(|r| r.bytes))));
}

/// Reads Server-Sent Events from bytes as they arrive: the `data:` of each `state` event. The
/// desktop's stream reads them itself; the browser's `EventSource` parses its own.
#[cfg(any(not(target_arch = "wasm32"), test))]
#[derive(Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: String,
    data: String,
}

#[cfg(any(not(target_arch = "wasm32"), test))]
impl SseParser {
    /// Feeds bytes; returns the data of each complete `state` event among them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let line = String::from_utf8_lossy(&self.line).trim_end_matches('\r').to_string();
            self.line.clear();
            if line.is_empty() {
                if self.event == "state" && !self.data.is_empty() {
                    out.push(std::mem::take(&mut self.data));
                }
                self.event.clear();
                self.data.clear();
            } else if let Some(v) = line.strip_prefix("event:") {
                self.event = v.trim_start().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        out
    }
}

/// The class's live stream; dropping it stops it.
pub struct Stream {
    #[cfg(not(target_arch = "wasm32"))]
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    #[cfg(target_arch = "wasm32")]
    source: Option<web_sys::EventSource>,
    #[cfg(target_arch = "wasm32")]
    _listeners: Vec<wasm_bindgen::closure::Closure<dyn FnMut(web_sys::MessageEvent)>>,
}

impl Stream {
    /// Follows `GET /api/classes/{code}/events`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn follow(server: &str, code: &str, reply: Reply) -> Stream {
        use std::ops::ControlFlow;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let stop = Arc::new(AtomicBool::new(false));
        let parser = Mutex::new(SseParser::default());
        let (stopped, ended) = (stop.clone(), Mutex::new(false));
        let request = ehttp::Request::get(format!("{server}/api/classes/{code}/events"));
        ehttp::streaming::fetch(request, move |part| {
            let finish = |reply: &Reply| {
                // Sent once, whether the stream ended, failed or was refused.
                if let Ok(mut e) = ended.lock()
                    && !std::mem::replace(&mut *e, true)
                {
                    reply.send(Msg::StreamEnded);
                }
                ControlFlow::Break(())
            };
            if stopped.load(Ordering::Relaxed) {
                return ControlFlow::Break(());
            }
            match part {
                Ok(ehttp::streaming::Part::Response(r)) if r.ok => ControlFlow::Continue(()),
                Ok(ehttp::streaming::Part::Chunk(bytes)) if !bytes.is_empty() => {
                    let events = parser.lock().map(|mut p| p.feed(&bytes)).unwrap_or_default();
                    for data in events {
                        if let Ok(state) = serde_json::from_str::<ClassState>(&data) {
                            reply.send(Msg::State(state));
                        }
                    }
                    ControlFlow::Continue(())
                }
                _ => finish(&reply),
            }
        });
        Stream { stop }
    }

    /// Follows `GET /api/classes/{code}/events` with the browser's `EventSource`, which also
    /// reconnects by itself after a network error.
    #[cfg(target_arch = "wasm32")]
    pub fn follow(server: &str, code: &str, reply: Reply) -> Stream {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        let url = format!("{server}/api/classes/{code}/events");
        let Ok(source) = web_sys::EventSource::new(&url) else {
            reply.send(Msg::StreamEnded);
            return Stream { source: None, _listeners: Vec::new() };
        };
        let on_state = {
            let reply = reply.clone();
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                if let Some(state) = e.data().as_string().and_then(|d| serde_json::from_str::<ClassState>(&d).ok()) {
                    reply.send(Msg::State(state));
                }
            })
        };
        let _ = source.add_event_listener_with_callback("state", on_state.as_ref().unchecked_ref());
        Stream { source: Some(source), _listeners: vec![on_state] }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        #[cfg(not(target_arch = "wasm32"))]
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        #[cfg(target_arch = "wasm32")]
        if let Some(s) = &self.source {
            s.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_sent_events_are_read_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.feed(b"event: state\ndata: {\"a\"").is_empty(), "not complete yet");
        assert_eq!(p.feed(b":1}\r\n\r\n: keep-alive\n\nevent: other\ndata: x\n\n"), vec!["{\"a\":1}".to_string()]);
        assert_eq!(p.feed(b"event:state\ndata:1\ndata:2\n\n"), vec!["1\n2".to_string()]);
    }
}
