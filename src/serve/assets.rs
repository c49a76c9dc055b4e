//! The web app's files (`dist/`, built by `web/build.sh`), embedded in the binary so that one
//! command serves everything. A debug build reads them from `dist/` at run time instead. Large
//! files are gzipped once, on first request, and kept: 400 phones loading the 7 MB app would
//! otherwise move 3 GB over a school's Wi-Fi.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::Embed;

#[derive(Embed)]
#[folder = "dist/"]
#[allow_missing = true]
struct Web;

/// Whether the web app is in this binary (or, in a debug build, in `dist/`).
pub fn has_web_app() -> bool {
    Web::get("index.html").is_some()
}

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>oomlab</title>\
<p>This oomlab server was built without the web app, so it serves the class API only. \
Run <code>web/build.sh</code>, then build oomlab again (or use <code>scripts/serve.sh</code>).</p>";

fn gzipped(path: &str, data: &[u8]) -> Option<Bytes> {
    static CACHE: OnceLock<Mutex<HashMap<String, Bytes>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok()?.get(path) {
        return Some(hit.clone());
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(data).ok()?;
    let packed = Bytes::from(gz.finish().ok()?);
    cache.lock().ok()?.insert(path.to_string(), packed.clone());
    Some(packed)
}

/// Serves a file of the web app; `/` is `index.html`.
pub async fn serve(uri: Uri, headers: HeaderMap) -> Response {
    let path = match uri.path().trim_start_matches('/') {
        "" => "index.html",
        p => p,
    };
    let Some(file) = Web::get(path) else {
        if path == "index.html" {
            return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], NOT_BUILT).into_response();
        }
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let mime = file.metadata.mimetype().to_string();
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&mime) {
        h.insert(header::CONTENT_TYPE, v);
    }
    // The page and the service worker are checked on every load; the rest is revalidated too,
    // since its names carry no hash.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    let accepts_gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    let compressible = !mime.starts_with("image/png") && file.data.len() > 1024;
    if accepts_gzip
        && compressible
        && let Some(packed) = tokio::task::spawn_blocking({
            let path = path.to_string();
            let data = file.data.clone();
            move || gzipped(&path, &data)
        })
        .await
        .ok()
        .flatten()
    {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return (h, packed).into_response();
    }
    (h, file.data.into_owned()).into_response()
}
