//! The class server (`oomlab serve`): the web app and the class API ([`crate::class`]) on one
//! port, classes and answers in SQLite. Native only. Its parts:
//! - [`store`]: the store's interface and SQLite;
//! - [`keeper`]: the thread that owns the store and the live classes;
//! - [`rules`]: the limits and refusals;
//! - [`http`]: the routes, the live stream and the guards;
//! - [`student`]: the students' page and its words;
//! - [`assets`]: the embedded web app.

pub mod assets;
pub mod http;
pub mod keeper;
pub mod rules;
pub mod store;
pub mod student;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

pub use keeper::{Limits, Refusal};
use store::{SqliteStore, StoreError};

/// How to run the server.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: SocketAddr,
    pub db: PathBuf,
    pub limits: Limits,
    /// The address students' phones open (`http://host:port`), for the join link and its QR
    /// code. `None`: this machine's network address when listening on all of them, else the
    /// address listened on.
    pub public: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080),
            db: PathBuf::from("oomlab-classes.sqlite"),
            limits: Limits::default(),
            public: None,
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
}

/// A running server. [`Server::stop`] (or dropping it) stops it and closes the database.
pub struct Server {
    /// Where it listens (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    /// The address students open (no trailing slash).
    pub public: String,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<oneshot::Sender<()>>,
    keeper: Option<JoinHandle<()>>,
}

/// Opens the database, binds the port and starts serving on background threads.
pub fn start(config: &Config) -> Result<Server, ServeError> {
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
    let public = config.public.clone().unwrap_or_else(|| public_address(addr));
    let (requests, inbox) = mpsc::channel();
    let keeper = std::thread::Builder::new()
        .name("oomlab-class-keeper".into())
        .spawn(move || store.run(inbox))
        .map_err(ServeError::Runtime)?;
    let router = http::router(http::Api { keeper: requests, public: public.as_str().into() });
    let (shutdown, stopped) = oneshot::channel::<()>();
    runtime.spawn(async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(e) = served.await {
            log::error!("class server: {e}");
        }
    });
    Ok(Server { addr, public, runtime: Some(runtime), shutdown: Some(shutdown), keeper: Some(keeper) })
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
            // Live streams never finish on their own: give requests a moment, then drop them.
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
/// address when it listens on all of them (localhost when offline), else `addr` itself.
pub fn public_address(addr: SocketAddr) -> String {
    let ip =
        if addr.ip().is_unspecified() { lan_address().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)) } else { addr.ip() };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
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
        assert_eq!(public_address(addr), "http://127.0.0.1:8123");
        let all = SocketAddr::from(([0, 0, 0, 0], 8080));
        let public = public_address(all);
        assert!(public.starts_with("http://") && public.ends_with(":8080") && !public.contains("0.0.0.0"), "{public}");
    }
}
