//! The class API over HTTP (axum), the live stream (Server-Sent Events) and the web app's files.
//! Every handler asks the keeper and turns its answer into JSON; nothing here holds state of its
//! own but the counts that shield the keeper: requests for unknown classes per address, and
//! live streams. The guards every request passes first are in [`super::guard`].

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request as HttpRequest, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tokio::sync::{oneshot, watch};

use super::api_error::ApiError;
use super::conn::Peer;
use super::guard::{self, Hosts};
use super::keeper::{Body, Refusal, Request, TeacherAction};
use super::limiter::PerAddress;
use super::{assets, student};
use crate::class::{self, AnswerBody, ClassState, Create, Join, Lock, Me, Pick, Reveal, SetChapter};

/// The handlers' state.
#[derive(Clone)]
pub struct Api {
    pub keeper: Sender<Request>,
    /// The address students open (`http://host:port`), for each class's join link.
    pub public: Arc<str>,
    /// The key that lets a teacher on another machine start a class.
    pub teacher_key: Arc<str>,
    /// Requests for unknown classes, per address.
    pub misses: Arc<Mutex<PerAddress>>,
    /// Live streams open, and the most at once (of all classes).
    pub streams: Arc<Mutex<Streams>>,
    pub most_streams: usize,
}

/// The most live streams one address (an IPv6 /64) holds: a phone needs one, the teacher's
/// machine the projector's and a tab or two. Past it a stream is refused (503) and the
/// students' page asks every few seconds instead.
pub const STREAMS_PER_ADDRESS: usize = 4;

/// Live streams open: all of them, and per address.
#[derive(Debug, Default)]
pub struct Streams {
    total: usize,
    per_address: std::collections::HashMap<IpAddr, usize>,
}

/// A body that did not read, as the refusal the keeper reports once the token is checked.
fn body_refusal(status: StatusCode, text: String) -> Refusal {
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("the body is larger than {} bytes", class::MAX_BODY_BYTES)
    } else {
        text
    };
    Refusal::Body { status: status.as_u16(), message }
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Body<T> {
    b.map(|Json(b)| b).map_err(|r| body_refusal(r.status(), r.body_text()))
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        ApiError::from(body_refusal(r.status(), r.body_text()))
    }
}

/// Asks the keeper and waits for its answer.
async fn ask<T>(api: &Api, make: impl FnOnce(oneshot::Sender<Result<T, Refusal>>) -> Request) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    api.keeper.send(make(tx)).map_err(|_| ApiError::from(Refusal::Stopping))?;
    Ok(rx.await.map_err(|_| ApiError::from(Refusal::Stopping))??)
}

/// A code of the wrong shape is simply an unknown class.
fn code(code: String) -> Result<String, ApiError> {
    if class::is_code(&code) { Ok(code) } else { Err(Refusal::NoClass.into()) }
}

/// The bearer token, if the request has one.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_string())
}

/// The router: the API under `/api`, the students' page under `/join`, the web app everywhere
/// else; every request passes the host check and gets the security headers.
pub fn router(api: Api, hosts: Arc<Hosts>, body_timeout: Duration) -> Router {
    let classes = Router::new()
        .route("/api/classes", post(create))
        .route("/api/classes/{code}", get(state))
        .route("/api/classes/{code}/events", get(events))
        .route("/api/classes/{code}/join", post(join))
        .route("/api/classes/{code}/me", post(me))
        .route("/api/classes/{code}/answers", post(answer))
        .route("/api/classes/{code}/chapter", post(set_chapter))
        .route("/api/classes/{code}/reveal", post(reveal))
        .route("/api/classes/{code}/round", post(second_round))
        .route("/api/classes/{code}/close", post(close))
        .route("/api/classes/{code}/lock", post(lock))
        .route("/api/classes/{code}/admit", post(admit))
        .route("/api/classes/{code}/remove", post(remove))
        .route("/api/classes/{code}/results", get(results))
        .route("/api/classes/{code}/answers.csv", get(answers_csv))
        .route("/api/classes/{code}/students", get(roster))
        .route("/api/strings", get(student::strings))
        .fallback(|| async { ApiError::new(404, "no such API route") })
        .layer(middleware::from_fn_with_state(body_timeout, guard::bounded_body))
        .layer(middleware::from_fn_with_state(api.clone(), misses_limited))
        .layer(middleware::from_fn_with_state(hosts.clone(), guard::same_origin_only))
        .layer(DefaultBodyLimit::max(class::MAX_BODY_BYTES))
        .with_state(api);
    Router::new()
        .merge(classes)
        .route("/join", get(student::page))
        .route("/join/{code}", get(student::page))
        .route("/join.js", get(student::script))
        .fallback(assets::serve)
        .layer(middleware::from_fn_with_state(hosts, guard::own_hosts_only))
        .layer(middleware::from_fn(guard::security_headers))
}

/// The address a request came from.
fn address(request: &HttpRequest) -> Option<IpAddr> {
    request.extensions().get::<Peer>().map(|p| p.remote.ip())
}

/// Unknown class codes and API routes, wrong teacher keys and tokens, per address: past the
/// allowance a request is refused before it reaches the keeper, so that guessing codes at
/// thousands a second costs the class nothing and finds nothing.
async fn misses_limited(State(api): State<Api>, request: HttpRequest, next: Next) -> Response {
    let Some(ip) = address(&request) else { return next.run(request).await };
    let allowed = api.misses.lock().map(|mut m| m.allows(ip, Instant::now())).unwrap_or(true);
    if !allowed {
        return ApiError::from(Refusal::TooManyMisses).into_response();
    }
    let guessed = request.headers().contains_key(header::AUTHORIZATION);
    let response = next.run(request).await;
    // A miss: an unknown class code (404), or a teacher key or token given and refused (403).
    // The keys are long, so guessing is hopeless anyway; this is defence in depth, and it stops
    // a script from trying thousands a second. (A request with no key at all guesses nothing.)
    let status = response.status();
    let missed = status == StatusCode::NOT_FOUND || (guessed && status == StatusCode::FORBIDDEN);
    if missed && let Ok(mut m) = api.misses.lock() {
        m.take(ip, Instant::now());
    }
    response
}

/// Whether the request comes from the machine the server runs on (127.0.0.1 or ::1 exactly:
/// other loopback addresses are other programs' as much as anyone's) or carries the key.
fn from_the_teacher(api: &Api, peer: &Peer, headers: &HeaderMap) -> bool {
    let ip = peer.remote.ip().to_canonical();
    let here = ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from(std::net::Ipv6Addr::LOCALHOST);
    let keyed = bearer(headers).is_some_and(|k| bool::from(k.as_bytes().ct_eq(api.teacher_key.as_bytes())));
    here || keyed
}

async fn create(
    State(api): State<Api>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<class::Created>), ApiError> {
    if !from_the_teacher(&api, &peer, &headers) {
        return Err(Refusal::NotTeacher.into());
    }
    // An empty body (older clients) is a class without an expected size.
    let create: Create = if body.iter().all(u8::is_ascii_whitespace) {
        Create::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::new(422, format!("the body: {e}")))?
    };
    let mut created = ask(&api, |tx| Request::Create(create, tx)).await?;
    created.join_url = format!("{}/join/{}", api.public, created.code);
    created.qr = super::qr_rows(&created.join_url);
    Ok((StatusCode::CREATED, Json(created)))
}

async fn state(State(api): State<Api>, Path(c): Path<String>) -> Result<Json<ClassState>, ApiError> {
    let c = code(c)?;
    Ok(Json(ask(&api, |tx| Request::State(c, tx)).await?))
}

/// The least time between two events of one stream: a burst of answers reaches each follower as
/// a few states rather than hundreds, and the last state always arrives.
const EVENT_SPACING: Duration = Duration::from_millis(200);

/// A live stream's place among [`Api::most_streams`] and its address's
/// [`STREAMS_PER_ADDRESS`]; given back when the stream ends.
struct StreamSlot(Arc<Mutex<Streams>>, IpAddr);

impl StreamSlot {
    fn take(api: &Api, ip: IpAddr) -> Option<StreamSlot> {
        let key = super::conn::address_key(ip);
        let mut streams = api.streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = streams.per_address.get(&key).copied().unwrap_or(0);
        if streams.total >= api.most_streams || mine >= STREAMS_PER_ADDRESS {
            return None;
        }
        streams.total += 1;
        streams.per_address.insert(key, mine + 1);
        Some(StreamSlot(api.streams.clone(), key))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut streams = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        streams.total = streams.total.saturating_sub(1);
        if let Some(n) = streams.per_address.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                streams.per_address.remove(&self.1);
            }
        }
    }
}

async fn events(
    State(api): State<Api>,
    Extension(peer): Extension<Peer>,
    Path(c): Path<String>,
) -> Result<Response, ApiError> {
    let c = code(c)?;
    let slot = StreamSlot::take(&api, peer.remote.ip()).ok_or(ApiError::from(Refusal::TooManyFollowers))?;
    let rx: watch::Receiver<ClassState> = ask(&api, |tx| Request::Follow(c, tx)).await?;
    let stream = futures_util::stream::unfold((rx, true, false, slot), |(mut rx, first, done, slot)| async move {
        if done {
            return None;
        }
        if !first {
            tokio::time::sleep(EVENT_SPACING).await;
            rx.changed().await.ok()?;
        }
        let state = rx.borrow_and_update().clone();
        // `retry`: how long a browser's EventSource waits before it reconnects.
        let event = Event::default().event("state").retry(Duration::from_secs(3)).json_data(&state).ok()?;
        Some((Ok::<_, Infallible>(event), (rx, false, state.closed, slot)))
    });
    let mut response = Sse::new(stream).keep_alive(KeepAlive::default()).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn join(
    State(api): State<Api>,
    Extension(peer): Extension<Peer>,
    Path(c): Path<String>,
    body: Result<Json<Join>, JsonRejection>,
) -> Result<(StatusCode, Json<class::Joined>), ApiError> {
    let c = code(c)?;
    let Json(body) = body?;
    let joined = ask(&api, |tx| Request::Join(c, body, peer.remote.ip(), tx)).await?;
    Ok((StatusCode::CREATED, Json(joined)))
}

async fn me(
    State(api): State<Api>,
    Path(c): Path<String>,
    body: Result<Json<Me>, JsonRejection>,
) -> Result<Json<class::Membership>, ApiError> {
    let c = code(c)?;
    let Json(body) = body?;
    Ok(Json(ask(&api, |tx| Request::Me(c, body, tx)).await?))
}

async fn answer(
    State(api): State<Api>,
    Path(c): Path<String>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> Result<Json<class::Accepted>, ApiError> {
    let c = code(c)?;
    let Json(body) = body?;
    Ok(Json(ask(&api, |tx| Request::Answer(c, body, tx)).await?))
}

/// A teacher's action: the keeper checks the class, then the token, then the body.
async fn teacher<T>(
    api: &Api,
    c: String,
    headers: &HeaderMap,
    action: impl FnOnce(oneshot::Sender<Result<T, Refusal>>) -> TeacherAction,
) -> Result<T, ApiError> {
    let c = code(c)?;
    let token = bearer(headers);
    ask(api, |tx| Request::Teacher(c, token, action(tx))).await
}

/// A teacher's action with a JSON body, answered with the class's state: the body goes to the
/// keeper as it was read, to be judged after the token.
macro_rules! teacher_with_body {
    ($($(#[$doc:meta])* $name:ident: $body:ty => $action:path;)*) => {$(
        $(#[$doc])*
        async fn $name(
            State(api): State<Api>,
            Path(c): Path<String>,
            headers: HeaderMap,
            b: Result<Json<$body>, JsonRejection>,
        ) -> Result<Json<ClassState>, ApiError> {
            Ok(Json(teacher(&api, c, &headers, |tx| $action(body(b), tx)).await?))
        }
    )*};
}

teacher_with_body! {
    /// `POST …/chapter`: the class moves to a chapter and its question.
    set_chapter: SetChapter => TeacherAction::SetChapter;
    /// `POST …/reveal`: the true answer; answers close.
    reveal: Reveal => TeacherAction::Reveal;
    /// `POST …/round`: the chapter's second vote opens.
    second_round: class::SecondRound => TeacherAction::SecondRound;
    /// `POST …/lock`: no one else joins (or they may again).
    lock: Lock => TeacherAction::Lock;
    /// `POST …/admit`: waiting students are let in.
    admit: Pick => TeacherAction::Admit;
    /// `POST …/remove`: students leave with their answers.
    remove: Pick => TeacherAction::Remove;
}

async fn close(
    State(api): State<Api>,
    Path(c): Path<String>,
    headers: HeaderMap,
) -> Result<Json<ClassState>, ApiError> {
    Ok(Json(teacher(&api, c, &headers, TeacherAction::Close).await?))
}

#[derive(Deserialize)]
struct ChapterQuery {
    chapter: u32,
}

async fn results(
    State(api): State<Api>,
    Path(c): Path<String>,
    headers: HeaderMap,
    query: Result<Query<ChapterQuery>, QueryRejection>,
) -> Result<Json<class::Results>, ApiError> {
    let chapter = query.map(|Query(q)| q.chapter).map_err(|r| body_refusal(r.status(), r.body_text()));
    Ok(Json(teacher(&api, c, &headers, |tx| TeacherAction::Results(chapter, tx)).await?))
}

async fn roster(
    State(api): State<Api>,
    Path(c): Path<String>,
    headers: HeaderMap,
) -> Result<Json<class::Roster>, ApiError> {
    Ok(Json(teacher(&api, c, &headers, TeacherAction::Roster).await?))
}

async fn answers_csv(State(api): State<Api>, Path(c): Path<String>, headers: HeaderMap) -> Result<Response, ApiError> {
    let file = format!("attachment; filename=\"oomlab-class-{}.csv\"", class::normalize_code(&c));
    let answers = teacher(&api, c, &headers, TeacherAction::Answers).await?;
    let disposition = HeaderValue::from_str(&file).unwrap_or(HeaderValue::from_static("attachment"));
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        class::csv(&answers),
    )
        .into_response())
}
