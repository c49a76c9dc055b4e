//! The server's error answer: a status and a message, as `{"error": …}`, with the headers a
//! client needs to act on it (where to authenticate, when to retry). Both the guards and the
//! handlers answer with it.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::keeper::Refusal;
use crate::class::ErrorBody;

/// An error answer: a status and a message, as `{"error": …}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), message: message.into() }
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        ApiError::new(r.status(), r.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ErrorBody { error: self.message })).into_response();
        let h = response.headers_mut();
        match self.status {
            StatusCode::UNAUTHORIZED => {
                h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            _ => {}
        }
        response
    }
}
