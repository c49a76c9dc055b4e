//! The class API over HTTP (axum), the live stream (Server-Sent Events), the guards (body size,
//! same origin) and the web app's files. Every handler asks the keeper and turns its answer
//! into JSON; nothing here holds state of its own.

use std::convert::Infallible;
use std::sync::mpsc::Sender;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request as HttpRequest, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tokio::sync::{oneshot, watch};

use super::keeper::{Refusal, Request, TeacherAction};
use super::{assets, student};
use crate::class::{self, AnswerBody, ClassState, ErrorBody, Join, Reveal, SetChapter};

/// The handlers' state: the way to the keeper.
#[derive(Clone)]
pub struct Api {
    pub keeper: Sender<Request>,
    /// The address students open (`http://host:port`), for each class's join link.
    pub public: std::sync::Arc<str>,
}

/// An error answer: a status and a message, as `{"error": …}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), message: message.into() }
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        ApiError::new(r.status(), r.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        let status = r.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("the body is larger than {} bytes", class::MAX_BODY_BYTES)
        } else {
            r.body_text()
        };
        ApiError { status, message }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError { status: r.status(), message: r.body_text() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ErrorBody { error: self.message })).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
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

/// The router: the API under `/api`, the web app everywhere else.
pub fn router(api: Api) -> Router {
    let classes = Router::new()
        .route("/api/classes", post(create))
        .route("/api/classes/{code}", get(state))
        .route("/api/classes/{code}/events", get(events))
        .route("/api/classes/{code}/join", post(join))
        .route("/api/classes/{code}/answers", post(answer))
        .route("/api/classes/{code}/chapter", post(set_chapter))
        .route("/api/classes/{code}/reveal", post(reveal))
        .route("/api/classes/{code}/close", post(close))
        .route("/api/classes/{code}/results", get(results))
        .route("/api/classes/{code}/answers.csv", get(answers_csv))
        .route("/api/strings", get(student::strings))
        .fallback(|| async { ApiError::new(404, "no such API route") })
        .layer(middleware::from_fn(same_origin_only))
        .layer(DefaultBodyLimit::max(class::MAX_BODY_BYTES))
        .with_state(api);
    Router::new()
        .merge(classes)
        .route("/join", get(student::page))
        .route("/join/{code}", get(student::page))
        .fallback(assets::serve)
}

/// Refuses a request from a page of another origin. Browsers send `Origin` with cross-origin
/// requests, including the "simple" POSTs that CORS never preflights, so this refuses what a
/// CORS policy would only hide; the preflight itself is refused too. A client that is not a
/// browser (the desktop app, the tests) sends no `Origin`.
async fn same_origin_only(request: HttpRequest, next: Next) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        let origin = origin.to_str().unwrap_or("");
        let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
        if host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
            return ApiError::new(403, format!("requests from another site ({origin}) are refused")).into_response();
        }
    }
    next.run(request).await
}

async fn create(State(api): State<Api>) -> Result<(StatusCode, Json<class::Created>), ApiError> {
    let mut created = ask(&api, Request::Create).await?;
    created.join_url = format!("{}/join/{}", api.public, created.code);
    created.qr = super::qr_rows(&created.join_url);
    Ok((StatusCode::CREATED, Json(created)))
}

async fn subscribe(api: &Api, code: String) -> Result<watch::Receiver<ClassState>, ApiError> {
    ask(api, |tx| Request::Subscribe(code, tx)).await
}

async fn state(State(api): State<Api>, Path(c): Path<String>) -> Result<Json<ClassState>, ApiError> {
    let rx = subscribe(&api, code(c)?).await?;
    let state = rx.borrow().clone();
    Ok(Json(state))
}

/// The least time between two events of one stream: a burst of answers reaches each follower as
/// a few states rather than hundreds, and the last state always arrives.
const EVENT_SPACING: Duration = Duration::from_millis(200);

async fn events(State(api): State<Api>, Path(c): Path<String>) -> Result<Response, ApiError> {
    let rx = subscribe(&api, code(c)?).await?;
    let stream = futures_util::stream::unfold((rx, true, false), |(mut rx, first, done)| async move {
        if done {
            return None;
        }
        if !first {
            tokio::time::sleep(EVENT_SPACING).await;
            rx.changed().await.ok()?;
        }
        let state = rx.borrow_and_update().clone();
        let event = Event::default().event("state").json_data(&state).ok()?;
        Some((Ok::<_, Infallible>(event), (rx, false, state.closed)))
    });
    let mut response = Sse::new(stream).keep_alive(KeepAlive::default()).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn join(
    State(api): State<Api>,
    Path(c): Path<String>,
    body: Result<Json<Join>, JsonRejection>,
) -> Result<(StatusCode, Json<class::Joined>), ApiError> {
    let c = code(c)?;
    let Json(body) = body?;
    let joined = ask(&api, |tx| Request::Join(c, body, tx)).await?;
    Ok((StatusCode::CREATED, Json(joined)))
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

async fn set_chapter(
    State(api): State<Api>,
    Path(c): Path<String>,
    headers: HeaderMap,
    body: Result<Json<SetChapter>, JsonRejection>,
) -> Result<Json<ClassState>, ApiError> {
    let Json(body) = body?;
    Ok(Json(teacher(&api, c, &headers, |tx| TeacherAction::SetChapter(body, tx)).await?))
}

async fn reveal(
    State(api): State<Api>,
    Path(c): Path<String>,
    headers: HeaderMap,
    body: Result<Json<Reveal>, JsonRejection>,
) -> Result<Json<ClassState>, ApiError> {
    let Json(body) = body?;
    Ok(Json(teacher(&api, c, &headers, |tx| TeacherAction::Reveal(body, tx)).await?))
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
    let Query(q) = query?;
    Ok(Json(teacher(&api, c, &headers, |tx| TeacherAction::Results(q.chapter, tx)).await?))
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
