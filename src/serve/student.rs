//! The students' page (`/join/{code}`, and `/join` to type a code) and its words
//! (`/api/strings?lang=…`).
//!
//! The page is plain HTML with a little JavaScript (`web/join.html` and `web/join.js`, embedded
//! here; the script is a file of its own, since the page's Content-Security-Policy allows no
//! inline script), not the app: a phone on a school network over plain HTTP loads a few kilobytes instead of the app's
//! 2.5 MB module and its fonts, needs no WebGPU and no service worker, and its buttons and text
//! are real DOM that a screen reader reads. Students never run a step; the teacher's machine
//! does. Its words come from the app's catalogs, rendered here: an argument becomes `{name}`,
//! which the page fills in.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use fluent_bundle::FluentValue;
use serde::Deserialize;

use crate::i18n::{Catalog, Lang};

/// The page itself, and its script.
pub const PAGE: &str = include_str!("../../web/join.html");
pub const SCRIPT: &str = include_str!("../../web/join.js");

/// Every message the page shows or a screen reader speaks there, with its arguments' names.
pub const KEYS: &[(&str, &[&str])] = &[
    ("student-title", &[]),
    ("student-intro", &[]),
    ("student-code", &[]),
    ("student-name", &[]),
    ("student-join", &[]),
    ("student-joined", &[]),
    ("student-waiting", &[]),
    ("student-question", &["chapter"]),
    ("student-number", &[]),
    ("student-send", &[]),
    ("student-sent", &["answer"]),
    ("student-not-sent", &[]),
    ("student-answer", &["answer"]),
    ("student-yours", &["answer"]),
    ("student-off-by", &["percent"]),
    ("student-right", &[]),
    ("student-wrong", &[]),
    ("student-none", &[]),
    ("student-closed", &[]),
    ("student-no-class", &[]),
    ("student-bad-code", &[]),
    ("student-too-fast", &[]),
    ("student-revealed-already", &[]),
    ("student-offline", &[]),
    ("student-refused", &["status"]),
    ("student-locked", &[]),
    ("student-join-busy", &[]),
    ("student-name-invalid", &[]),
    ("student-let-in", &[]),
    ("student-removed", &[]),
    ("student-round-two", &[]),
    ("student-vote", &["round", "answer"]),
    ("student-history", &[]),
    ("student-history-number", &["chapter", "yours", "answer", "percent"]),
    ("student-history-choice", &["chapter", "yours", "answer", "verdict"]),
];

/// `GET /join`, `GET /join/{code}`: the page (the code is read from the address by the page).
pub async fn page() -> Response {
    let mut response =
        ([(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))], PAGE).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /join.js`: the page's script.
pub async fn script() -> Response {
    let mut response =
        ([(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"))], SCRIPT).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[derive(Deserialize)]
pub struct LangQuery {
    lang: Option<String>,
}

/// The page's words in one language: each of [`KEYS`], arguments as `{name}`.
pub fn words(lang: Lang) -> BTreeMap<&'static str, String> {
    let t = Catalog::new(lang);
    KEYS.iter()
        .map(|(key, args)| {
            let marks: Vec<String> = args.iter().map(|a| format!("{{{a}}}")).collect();
            let values: Vec<(&str, FluentValue<'_>)> =
                args.iter().zip(&marks).map(|(a, m)| (*a, FluentValue::from(m.as_str()))).collect();
            (*key, t.format(key, &values))
        })
        .collect()
}

/// `GET /api/strings?lang=zh`: the page's words in that language (English for any other), each
/// language rendered once, and the other language's code and name for the switch.
pub async fn strings(query: Result<Query<LangQuery>, QueryRejection>) -> Response {
    static RENDERED: OnceLock<[BTreeMap<&'static str, String>; 2]> = OnceLock::new();
    let lang = query.ok().and_then(|Query(q)| q.lang).and_then(|l| Lang::from_locale(&l)).unwrap_or_default();
    let all = RENDERED.get_or_init(|| [words(Lang::En), words(Lang::Zh)]);
    let chosen = if lang == Lang::Zh { &all[1] } else { &all[0] };
    // The switch names the other language in itself ("English", "简体中文"), as language
    // switches do; the page marks it with that language for screen readers.
    let other = if lang == Lang::Zh { Lang::En } else { Lang::Zh };
    let body = serde_json::json!({
        "lang": lang.code(),
        "words": chosen,
        "other": { "lang": other.code(), "name": other.native_name() },
    });
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_of_the_page_is_in_both_catalogs_with_its_arguments() {
        for lang in Lang::ALL {
            let t = Catalog::new(lang);
            let w = words(lang);
            for (key, args) in KEYS {
                assert!(t.has(key), "{key} is missing from the {lang:?} catalog");
                let text = &w[key];
                assert!(!text.contains("{$") && !text.contains(key), "{key} ({lang:?}) rendered as {text:?}");
                for a in *args {
                    assert!(text.contains(&format!("{{{a}}}")), "{key} ({lang:?}) lacks {{{a}}}: {text:?}");
                }
            }
        }
        // The page's script asks for exactly these keys, and no other.
        // Calls of the page's `t`, not of `split(` or `createElement(`.
        let called = |i: usize| {
            SCRIPT[..i].chars().next_back().is_none_or(|c| !(c.is_ascii_alphanumeric() || "._$".contains(c)))
        };
        let asked: std::collections::BTreeSet<&str> = SCRIPT
            .match_indices("t(\"")
            .filter(|(i, _)| called(*i))
            .filter_map(|(i, _)| SCRIPT[i + 3..].split('"').next())
            .collect();
        let known: std::collections::BTreeSet<&str> = KEYS.iter().map(|(k, _)| *k).collect();
        assert_eq!(asked, known, "web/join.js's t(\"…\") calls and KEYS differ");
        // No inline script: the policy would block it.
        assert!(PAGE.contains("<script src=\"/join.js\"></script>"));
        assert_eq!(PAGE.matches("<script").count(), 1, "one script element, the file");
    }
}
