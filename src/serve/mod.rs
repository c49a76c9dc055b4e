//! The class server (`oomlab serve`): the web app and the class API ([`crate::class`]) on one
//! port, classes and answers in SQLite. Native only. Its parts:
//! - [`store`]: the store's interface and SQLite;
//! - [`keeper`]: the thread that owns the store and the live classes;
//! - [`rules`]: the limits and refusals; [`limiter`]: rate limits per address;
//! - [`names`]: what a student's name may hold;
//! - [`conn`]: connections, their timeouts, TLS and the descriptor budget;
//! - [`guard`]: host names, other sites, bodies and the security headers;
//! - [`http`]: the routes and the live stream;
//! - [`student`]: the students' page and its words;
//! - [`assets`]: the embedded web app.

pub mod api_error;
pub mod assets;
pub mod conn;
pub mod guard;
pub mod http;
pub mod keeper;
pub mod limiter;
pub mod names;
pub mod rules;
pub mod store;
pub mod student;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

pub use keeper::{Limits, Refusal};
use store::{SqliteStore, StoreError};

/// A certificate chain and its private key, PEM files, for HTTPS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How to run the server.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: SocketAddr,
    pub db: PathBuf,
    pub limits: Limits,
    /// The address students' phones open (`http://host:port`), for the join link and its QR
    /// code. `None`: this machine's network address when listening on all of them, else the
    /// address listened on. Its host is one of the names the server answers to.
    pub public: Option<String>,
    /// The key a teacher on another machine starts a class with; `None`: a new random one.
    pub teacher_key: Option<String>,
    /// Other names the server answers to (a school's DNS name for the laptop).
    pub allowed_hosts: Vec<String>,
    /// HTTPS instead of HTTP.
    pub tls: Option<TlsFiles>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080),
            db: PathBuf::from("oomlab-classes.sqlite"),
            limits: Limits::default(),
            public: None,
            teacher_key: None,
            allowed_hosts: Vec::new(),
            tls: None,
        }
    }
}

impl Config {
    /// A server on a free port of the loopback address, keeping its classes in `db`: what the
    /// tests and the load benchmark start.
    pub fn loopback(db: PathBuf) -> Config {
        Config { bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0), db, ..Config::default() }
    }
}

/// Why the server did not start.
#[derive(thiserror::Error, Debug)]
pub enum ServeError {
    #[error("cannot open the class database {path}: {source}")]
    Database { path: PathBuf, source: StoreError },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot start the server's threads: {0}")]
    Runtime(std::io::Error),
    #[error("cannot use the certificate {cert} and key {key} for HTTPS: {why}")]
    Tls { cert: PathBuf, key: PathBuf, why: String },
    #[error("no random numbers for the teacher key: {0}")]
    Random(Refusal),
}

/// A running server. [`Server::stop`] (or dropping it) stops it and closes the database.
pub struct Server {
    /// Where it listens (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    /// The address students open (no trailing slash).
    pub public: String,
    /// The key that lets a teacher on another machine start a class.
    pub teacher_key: String,
    /// Whether it speaks HTTPS.
    pub https: bool,
    /// The most connections it takes at once, and the descriptor limit that came from.
    pub max_connections: usize,
    pub descriptor_limit: Option<u64>,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<oneshot::Sender<()>>,
    keeper: Option<JoinHandle<()>>,
}

/// Reads a PEM certificate chain and private key into a TLS acceptor (HTTP/1.1 only).
fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let failed = |why: String| ServeError::Tls { cert: files.cert.clone(), key: files.key.clone(), why };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| failed(format!("the certificate: {e}")))?;
    if certs.is_empty() {
        return Err(failed("the certificate file holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| failed(format!("the key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| failed(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The host of a URL (`https://oomlab.school.example:8443/x` → `oomlab.school.example:8443`).
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_string())
}

/// Opens the database, binds the port and starts serving on background threads.
pub fn start(config: &Config) -> Result<Server, ServeError> {
    let descriptor_limit = conn::raise_descriptor_limit();
    let tls = config.tls.as_ref().map(tls_acceptor).transpose()?;
    let teacher_key = match &config.teacher_key {
        Some(k) => k.clone(),
        None => rules::random_hex(16).map_err(ServeError::Random)?,
    };
    let store = SqliteStore::open(&config.db)
        .and_then(|s| keeper::Keeper::open(s, config.limits.clone()))
        .map_err(|source| ServeError::Database { path: config.db.clone(), source })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("oomlab-serve")
        .build()
        .map_err(ServeError::Runtime)?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(config.bind))
        .map_err(|source| ServeError::Bind { addr: config.bind, source })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.bind, source })?;
    let public = config.public.clone().unwrap_or_else(|| public_address(addr, tls.is_some()));
    let public = public.trim_end_matches('/').to_string();
    let hosts = guard::Hosts::new(
        config.allowed_hosts.iter().cloned().chain(url_host(&public)),
        [Some(addr.ip()), lan_address()].into_iter().flatten(),
    )
    .with_schemes(tls.is_some(), &public);
    let (requests, inbox) = mpsc::channel();
    let keeper = std::thread::Builder::new()
        .name("oomlab-class-keeper".into())
        .spawn(move || store.run(inbox))
        .map_err(ServeError::Runtime)?;
    let max_connections = conn::connection_budget(&config.limits, descriptor_limit);
    let api = http::Api {
        keeper: requests,
        public: public.as_str().into(),
        teacher_key: teacher_key.as_str().into(),
        misses: Arc::new(Mutex::new(limiter::PerAddress::new(config.limits.misses))),
        streams: Arc::default(),
        // A quarter of the connections stays for requests, whatever the streams hold.
        most_streams: (max_connections * 3 / 4).max(1),
    };
    let router = http::router(api, Arc::new(hosts), config.limits.body_timeout);
    let register = conn::Register::new(max_connections);
    let serving = conn::Serving { router, register, tls: tls.clone(), header_timeout: config.limits.header_timeout };
    let (shutdown, stopped) = oneshot::channel::<()>();
    runtime.spawn(conn::accept_loop(listener, serving, stopped));
    Ok(Server {
        addr,
        public,
        teacher_key,
        https: tls.is_some(),
        max_connections,
        descriptor_limit,
        runtime: Some(runtime),
        shutdown: Some(shutdown),
        keeper: Some(keeper),
    })
}

impl Server {
    /// Blocks until Ctrl-C.
    pub fn wait_for_ctrl_c(&self) {
        if let Some(rt) = &self.runtime {
            let _ = rt.block_on(tokio::signal::ctrl_c());
        }
    }

    /// Stops listening, ends the open streams, lets the keeper finish what it was given and
    /// closes the database.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(rt) = self.runtime.take() {
            // Requests in flight get a moment; live streams never finish on their own, so the
            // runtime's end drops them.
            rt.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
            rt.shutdown_timeout(Duration::from_millis(500));
        }
        // The router held the keeper's only sender; with the runtime gone, the keeper ends.
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// This machine's address on the local network, as phones in the room would reach it: the
/// address the system would send from towards a public one (no packet is sent). `None` offline.
pub fn lan_address() -> Option<IpAddr> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

/// The address phones in the room reach a server listening on `addr` by: this machine's network
/// address when it listens on all of them (127.0.0.1 when offline, which no phone reaches:
/// [`students_address_warning`] says so), else `addr` itself.
pub fn public_address(addr: SocketAddr, https: bool) -> String {
    let ip =
        if addr.ip().is_unspecified() { lan_address().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)) } else { addr.ip() };
    let scheme = if https { "https" } else { "http" };
    format!("{scheme}://{}", SocketAddr::new(ip, addr.port()))
}

/// Whether a URL's host is this machine to whoever opens it: `localhost` (or a name under it),
/// a loopback address (127.0.0.0/8, `::1`, `::ffff:127.x.y.z`) or the unspecified address. On a
/// phone such an address is the phone itself, so students can never open it.
pub fn is_loopback_url(url: &str) -> bool {
    let Some(host) = url_host(url) else { return false };
    let name = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default().to_string()
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_string(),
            _ => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unspecified() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// The terminal's warning when the students' address `public` is one no phone can open (see
/// [`is_loopback_url`]), saying why and what to pass instead; `None` when phones can reach it.
/// `bind` is the address the server listens on; `given`: `public` came from `--public-url`.
pub fn students_address_warning(public: &str, bind: SocketAddr, https: bool, given: bool) -> Option<String> {
    if !is_loopback_url(public) {
        return None;
    }
    let host = url_host(public).unwrap_or_else(|| public.to_string());
    let scheme = if https { "https" } else { "http" };
    let port = bind.port();
    let pass = format!("--public-url {scheme}://<this laptop's address>:{port}");
    let why = if bind.ip().is_loopback() {
        format!(
            "The server listens on {} only, which no other device reaches: start it without --bind\n  \
             (it then listens on every address), or with --bind <this laptop's address>.",
            bind.ip()
        )
    } else if given {
        format!("--public-url names this laptop itself: pass {pass} instead.")
    } else {
        format!(
            "This laptop has no network address now (no Wi-Fi or cable, or no default route): join the\n  \
             class's network (or a phone's hotspot) and start again, or pass {pass}."
        )
    };
    Some(format!(
        "  WARNING: students cannot reach {host}: on a phone, that address is the phone itself, so the\n  \
         students' address, its QR code and the other-computer link above will not work for them.\n  \
         {why}\n  \
         This laptop's address: `ip -4 addr` (Linux), `ipconfig getifaddr en0` (macOS), `ipconfig` (Windows)."
    ))
}

/// A QR code of `text` as rows of modules, `1` dark and `0` light, with the four-module quiet
/// zone a camera needs; empty when `text` is too long for a QR code.
pub fn qr_rows(text: &str) -> Vec<String> {
    const QUIET: usize = 4;
    let Ok(code) = qrcode::QrCode::new(text.as_bytes()) else { return Vec::new() };
    let (width, colors) = (code.width(), code.to_colors());
    let side = width + 2 * QUIET;
    (0..side)
        .map(|y| {
            (0..side)
                .map(|x| {
                    let inside = (QUIET..QUIET + width).contains(&x) && (QUIET..QUIET + width).contains(&y);
                    let dark = inside && colors.get((y - QUIET) * width + (x - QUIET)) == Some(&qrcode::Color::Dark);
                    if dark { '1' } else { '0' }
                })
                .collect()
        })
        .collect()
}

/// A QR code of `text` in the terminal: two modules per character cell, dark on light, with the
/// quiet zone, readable by a phone's camera from the screen.
pub fn terminal_qr(text: &str) -> Option<String> {
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::unicode::Dense1x2>()
            .dark_color(qrcode::render::unicode::Dense1x2::Light)
            .light_color(qrcode::render::unicode::Dense1x2::Dark)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qr_rows_are_qrcodes_own_modules_with_the_quiet_zone() {
        let url = "http://192.168.1.5:8080/join/ABC234";
        let rows = qr_rows(url);
        // qrcode's own rendering, one character per module, quiet zone on.
        let expected = qrcode::QrCode::new(url.as_bytes())
            .map(|c| {
                c.render::<char>().quiet_zone(true).module_dimensions(1, 1).dark_color('1').light_color('0').build()
            })
            .unwrap_or_default();
        assert_eq!(rows.join("\n"), expected);
        let side = rows.len();
        assert!(side >= 21 + 8 && rows.iter().all(|r| r.len() == side), "square, version 1 or more, with its margin");
        assert!(rows[..4].iter().all(|r| !r.contains('1')), "four light rows on top");
        // The finder pattern's top-left corner sits just inside the quiet zone.
        assert_eq!(&rows[4][4..11], "1111111");
        assert!(qr_rows(&"x".repeat(8000)).is_empty(), "too long for any QR code");
    }

    #[test]
    fn the_public_address_is_the_listened_one_unless_it_is_all_of_them() {
        let addr: SocketAddr = "127.0.0.1:8123".parse().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8123)));
        assert_eq!(public_address(addr, false), "http://127.0.0.1:8123");
        assert_eq!(public_address(addr, true), "https://127.0.0.1:8123");
        let all = SocketAddr::from(([0, 0, 0, 0], 8080));
        let public = public_address(all, false);
        assert!(public.starts_with("http://") && public.ends_with(":8080") && !public.contains("0.0.0.0"), "{public}");
    }

    #[test]
    fn loopback_addresses_are_told_from_ones_a_phone_reaches() {
        for url in [
            "http://localhost:8080",
            "http://LOCALHOST.:8080/join",
            "http://class.localhost:8080",
            "http://127.0.0.1:8080",
            "https://127.8.9.10",
            "http://[::1]:8080",
            "http://[::ffff:127.0.0.1]:8080",
            "http://0.0.0.0:8080",
            "localhost",
        ] {
            assert!(is_loopback_url(url), "{url} is this machine");
        }
        for url in [
            "http://192.168.1.5:8080",
            "http://10.0.0.2",
            "https://oomlab.school.example",
            "http://[fe80::1]:8080",
            "http://localhost.school.example:8080",
            "http://",
        ] {
            assert!(!is_loopback_url(url), "{url} is not");
        }
    }

    #[test]
    fn a_loopback_students_address_comes_with_a_warning_and_what_to_pass() {
        let all = SocketAddr::from(([0, 0, 0, 0], 8080));
        let offline = students_address_warning("http://127.0.0.1:8080", all, false, false).unwrap_or_default();
        assert!(offline.contains("students cannot reach 127.0.0.1:8080"), "{offline}");
        assert!(offline.contains("--public-url http://<this laptop's address>:8080"), "{offline}");
        assert!(offline.contains("no network address"), "{offline}");
        let given =
            students_address_warning("https://localhost:9000", SocketAddr::from(([0, 0, 0, 0], 9000)), true, true)
                .unwrap_or_default();
        assert!(given.contains("--public-url https://<this laptop's address>:9000"), "{given}");
        let local = SocketAddr::from(([127, 0, 0, 1], 8080));
        let bound = students_address_warning("http://127.0.0.1:8080", local, false, false).unwrap_or_default();
        assert!(bound.contains("listens on 127.0.0.1 only") && bound.contains("--bind"), "{bound}");
        assert_eq!(students_address_warning("http://192.168.1.5:8080", all, false, false), None);
        assert_eq!(students_address_warning("https://oomlab.school.example", all, true, true), None);
    }

    #[test]
    fn a_public_urls_host_is_its_name_and_port() {
        assert_eq!(url_host("https://oomlab.school.example:8443/x?y").as_deref(), Some("oomlab.school.example:8443"));
        assert_eq!(url_host("http://[::1]:8080").as_deref(), Some("[::1]:8080"));
        assert_eq!(url_host("http://user@class.local/").as_deref(), Some("class.local"));
        assert_eq!(url_host("class.local:8080").as_deref(), Some("class.local:8080"));
        assert_eq!(url_host("http://"), None);
    }
}
