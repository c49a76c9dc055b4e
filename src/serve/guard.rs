//! What every request passes before a handler sees it, and what every response carries:
//! - **Host names** ([`Hosts`]): the server answers only to its own names, so that a page on
//!   the internet whose name an attacker points at the school's laptop (DNS rebinding) is
//!   refused. Its names: the address the connection arrived on, the addresses it listens on,
//!   `localhost`, the host of `--public-url` and each `--allow-host`.
//! - **Other sites**: a browser's request from a page of another origin (its `Origin` names
//!   another scheme, host or port) is refused, including the simple POSTs that CORS never
//!   preflights.
//! - **Bodies**: a `Content-Length` over [`MAX_BODY_BYTES`] is refused at once (413), and a body
//!   must arrive whole within [`super::Limits::body_timeout`] (408).
//! - **Headers**: `nosniff`, `no-referrer`, a Content-Security-Policy with no inline script
//!   (the app's, the students' page's, or none at all for the API), no framing, and
//!   `Cache-Control: no-store` on the API, whose answers hold names and ids.

use std::net::IpAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::api_error::ApiError;
use super::conn::Peer;
use crate::class::MAX_BODY_BYTES;

/// The names this server answers to.
#[derive(Clone, Debug, Default)]
pub struct Hosts {
    names: Vec<String>,
    addresses: Vec<IpAddr>,
    /// The schemes a page of this server has (`http` or `https`; both where `--public-url`
    /// names the other, as behind a proxy that ends TLS).
    schemes: Vec<&'static str>,
}

/// A Host header's name: lower case, without its port or a trailing dot; an IPv6 literal
/// without its brackets.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Hosts {
    /// `names` (host names or addresses, as `--allow-host` and `--public-url` give them) and the
    /// addresses the server listens on.
    pub fn new(names: impl IntoIterator<Item = String>, addresses: impl IntoIterator<Item = IpAddr>) -> Hosts {
        let mut hosts = Hosts { names: vec!["localhost".into()], addresses: Vec::new(), schemes: vec!["http"] };
        for n in names {
            let n = host_name(&n);
            match n.parse::<IpAddr>() {
                Ok(ip) => hosts.addresses.push(ip.to_canonical()),
                Err(_) if !n.is_empty() => hosts.names.push(n),
                Err(_) => {}
            }
        }
        hosts.addresses.extend(addresses.into_iter().filter(|ip| !ip.is_unspecified()).map(|ip| ip.to_canonical()));
        hosts
    }

    /// The schemes of this server's pages: its own (`https` with TLS) and that of its public
    /// URL.
    pub fn with_schemes(mut self, tls: bool, public: &str) -> Hosts {
        let own = if tls { "https" } else { "http" };
        self.schemes = vec![own];
        let public = public.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
        for scheme in ["http", "https"] {
            if public.as_deref() == Some(scheme) && scheme != own {
                self.schemes.push(scheme);
            }
        }
        self
    }

    /// Whether an `Origin` header names a page of this server, arriving with this Host header:
    /// the same scheme, host and port (`evil://127.0.0.1:8080` is not `http://127.0.0.1:8080`).
    pub fn same_origin(&self, origin: &str, host: &str) -> bool {
        let Some((scheme, rest)) = origin.split_once("://") else { return false };
        !host.is_empty()
            && self.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
            && rest.eq_ignore_ascii_case(host)
    }

    /// Whether a request with this Host header, arriving on `local`, is for this server.
    pub fn allows(&self, host: &str, local: IpAddr) -> bool {
        let name = host_name(host);
        match name.parse::<IpAddr>() {
            Ok(ip) => {
                let ip = ip.to_canonical();
                ip == local.to_canonical() || self.addresses.contains(&ip)
            }
            Err(_) => self.names.contains(&name),
        }
    }
}

/// Refuses a request for a name that is not this server's.
pub async fn own_hosts_only(State(hosts): State<std::sync::Arc<Hosts>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let local = request.extensions().get::<Peer>().map(|p| p.local.ip());
    let allowed = !host.is_empty() && local.is_some_and(|ip| hosts.allows(host, ip));
    if !allowed {
        let shown: String = host.chars().take(80).collect();
        return ApiError::new(403, format!("this server does not answer to the name '{shown}'")).into_response();
    }
    next.run(request).await
}

/// Refuses a request from a page of another origin. Browsers send `Origin` with cross-origin
/// requests, including the "simple" POSTs that CORS never preflights, so this refuses what a
/// CORS policy would only hide; the preflight itself is refused too. A client that is not a
/// browser (the desktop app, the tests) sends no `Origin`. The Host it is compared with has
/// passed [`own_hosts_only`].
pub async fn same_origin_only(State(hosts): State<std::sync::Arc<Hosts>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        let origin = origin.to_str().unwrap_or("");
        if !hosts.same_origin(origin, host) {
            let shown: String = origin.chars().take(80).collect();
            return ApiError::new(403, format!("requests from another site ({shown}) are refused")).into_response();
        }
    }
    next.run(request).await
}

/// Reads a request's body before the handler does: refuses a declared length over the limit at
/// once, and a body that does not arrive whole within `timeout`.
pub async fn bounded_body(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    let too_large = || {
        let mut r = ApiError::new(413, format!("the body is larger than {MAX_BODY_BYTES} bytes")).into_response();
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(_)) => return ApiError::new(400, "the body did not arrive whole").into_response(),
        Err(_) => {
            let message = format!("the body did not arrive within {} s", timeout.as_secs());
            let mut r = ApiError::new(408, message).into_response();
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return r;
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The app's policy: its own scripts and WebAssembly (`wasm-unsafe-eval` lets a page compile a
/// module, not evaluate strings), its workers, styles it sets itself, no framing.
pub const APP_CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; \
manifest-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/// The students' page: its one script file, nothing compiled.
pub const STUDENT_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'";
/// The API's answers are data, never a document.
pub const API_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// Adds the security headers to every response.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    let api = path.starts_with("/api/");
    let csp = if api {
        API_CSP
    } else if path == "/join" || path.starts_with("/join/") || path == "/join.js" {
        STUDENT_CSP
    } else {
        APP_CSP
    };
    let h: &mut HeaderMap = response.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
    // The student page's words are the same for everyone and may be cached; the rest of the
    // API holds names, ids and answers.
    if api && path != "/api/strings" {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn the_server_answers_to_its_own_names_only() {
        let lan = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 5));
        let hosts = Hosts::new(
            ["oomlab.school.example:8443".to_string(), "Class.Local.".into()],
            [IpAddr::V4(Ipv4Addr::UNSPECIFIED), lan],
        );
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "localhost:8080",
            "LOCALHOST",
            "localhost.",
            "192.168.1.5:8080",
            "oomlab.school.example",
            "oomlab.school.example:8443",
            "class.local",
        ] {
            assert!(hosts.allows(ok, local), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.2:8080",
            "10.0.0.1",
            "",
            "[::1]:8080",
            "oomlab.school.example.evil",
        ] {
            assert!(!hosts.allows(refused, local), "{refused}");
        }
        // Over IPv6 loopback, its literal is the connection's own address.
        assert!(hosts.allows("[::1]:8080", "::1".parse().unwrap_or(local)));
        // An IPv4 connection seen through an IPv6 socket is the same address.
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        assert!(hosts.allows("127.0.0.1:8080", mapped));
    }

    #[test]
    fn an_origin_is_the_same_scheme_host_and_port() {
        let plain = Hosts::new([], []).with_schemes(false, "http://192.168.1.5:8080");
        assert!(plain.same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(plain.same_origin("HTTP://LOCALHOST:8080", "localhost:8080"));
        for refused in [
            "evil://127.0.0.1:8080",
            "https://127.0.0.1:8080",
            "http://127.0.0.1:8081",
            "http://127.0.0.1",
            "http://127.0.0.1:8080/",
            "http://evil.example",
            "127.0.0.1:8080",
            "null",
            "",
        ] {
            assert!(!plain.same_origin(refused, "127.0.0.1:8080"), "{refused}");
        }
        assert!(!plain.same_origin("http://127.0.0.1:8080", ""), "no Host, no page of ours");
        // With TLS, only https; behind a proxy that ends TLS (`--public-url https://…`), both.
        let tls = Hosts::new([], []).with_schemes(true, "https://oomlab.school.example");
        assert!(tls.same_origin("https://oomlab.school.example", "oomlab.school.example"));
        assert!(!tls.same_origin("http://oomlab.school.example", "oomlab.school.example"));
        let proxied = Hosts::new([], []).with_schemes(false, "https://oomlab.school.example");
        assert!(proxied.same_origin("https://oomlab.school.example", "oomlab.school.example"));
        assert!(proxied.same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(!proxied.same_origin("ftp://oomlab.school.example", "oomlab.school.example"));
    }

    #[test]
    fn host_names_lose_their_port_and_case() {
        assert_eq!(host_name("Example.COM:80"), "example.com");
        assert_eq!(host_name("[2001:DB8::1]:8080"), "2001:db8::1");
        assert_eq!(host_name("example.com."), "example.com");
    }
}
