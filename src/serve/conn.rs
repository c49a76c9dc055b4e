//! Connections: the accept loop, each connection's HTTP/1.1 (hyper) with its timeouts, TLS when
//! configured, and the register that keeps the server answering when sockets run short.
//!
//! What a room of laptops and phones can do to a server is mostly a matter of sockets:
//! - **Timeouts.** A connection has [`Limits::header_timeout`] to send each request's headers,
//!   which is also how long it may sit idle (hyper's header timer runs whenever the connection
//!   waits for a request). The body's own timeout is the HTTP layer's ([`super::guard`]).
//! - **Descriptors.** At start the soft limit on open files is raised to the hard one
//!   ([`raise_descriptor_limit`]); the server then takes at most that many connections, less a
//!   reserve for the database and the runtime (and no more than [`MOST_CONNECTIONS`]).
//! - **A share per address.** One address (an IPv6 address by its /64) holds at most
//!   [`share_of`] the budget: 16 connections of the usual thousands, a quarter of a small one. A
//!   browser opens at most 6 connections to a server and a live stream holds one more, so a
//!   phone needs a handful and the teacher's machine (the app, a browser tab or two) a dozen;
//!   16 leaves room for both and no address can hold the table.
//! - **Eviction.** A connection that is not doing anything useful — idle, still sending its
//!   headers, or a request that has had [`STALLED`] to send its body and be answered and has
//!   not — can be closed to make room. A newcomer from an address already at its share makes
//!   room among its own address's; when the whole register is full, among the address that
//!   holds the most. The one closed is the one unproductive longest. So slow bodies and idle
//!   sockets from one machine cost each other their places, not the class's. When nothing can
//!   be closed, the newcomer gets a 503 and is closed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tower::Service;

use super::Limits;

/// The most connections the server takes, whatever its descriptor limit: a classroom of 1000
/// students with a live stream each and a request in flight fits with room to spare.
pub const MOST_CONNECTIONS: usize = 4096;
/// Descriptors kept for the database, its journal, the runtime and the standard streams.
const RESERVED_DESCRIPTORS: u64 = 64;

/// Who is on the other end of a request, and on which of this machine's addresses it arrived
/// (what the host check compares with). A request extension.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub remote: SocketAddr,
    pub local: SocketAddr,
}

/// Raises the soft limit on open files to the hard limit, and returns the limit now in force
/// (`None` where there is none to read).
#[cfg(unix)]
pub fn raise_descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed to them.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        // macOS refuses a soft limit above OPEN_MAX (10240) however high the hard one is.
        for wanted in [limit.rlim_max, limit.rlim_max.min(10240)] {
            let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit.rlim_cur = wanted;
                break;
            }
        }
    }
    // rlim_t is u64 on 64-bit Linux and macOS, but not on every Unix.
    #[allow(clippy::useless_conversion)]
    u64::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
pub fn raise_descriptor_limit() -> Option<u64> {
    None
}

/// Descriptors this process has open now (Linux; elsewhere none are counted).
fn descriptors_open() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// How many connections the server takes: the configured number, or what the descriptor limit
/// leaves after the reserve and what is open already; at least 16, at most [`MOST_CONNECTIONS`].
pub fn connection_budget(limits: &Limits, descriptor_limit: Option<u64>) -> usize {
    let from_limit = descriptor_limit
        .map_or(MOST_CONNECTIONS as u64, |n| n.saturating_sub(RESERVED_DESCRIPTORS).saturating_sub(descriptors_open()));
    let budget = usize::try_from(from_limit).unwrap_or(MOST_CONNECTIONS).clamp(16, MOST_CONNECTIONS);
    limits.max_connections.map_or(budget, |n| n.clamp(1, MOST_CONNECTIONS))
}

/// How long a request may take from its headers to its answer before its connection counts as
/// unproductive (a body that does not come): a real request's body and answer take
/// milliseconds.
pub const STALLED: Duration = Duration::from_secs(1);

/// The most connections one address holds, of a register of `most`: 16, or a quarter of a
/// small register (at least 2). See the module's notes for why 16.
pub fn share_of(most: usize) -> usize {
    (most / 4).clamp(2, 16).min(most.max(1))
}

/// Whose a connection counts as: its address, or an IPv6 address's /64 (one machine is given a
/// whole /64 and picks addresses in it at will).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

struct Entry {
    ip: IpAddr,
    /// Requests in progress (a response still being sent counts, a live stream included).
    busy: usize,
    idle_since: Instant,
    /// When the request in progress began, until the router answered it (its body read).
    asked_since: Option<Instant>,
    close: Option<oneshot::Sender<()>>,
}

impl Entry {
    /// Since when it has done nothing useful: idle (or sending headers), or asked and not yet
    /// answered for longer than [`STALLED`]. `None` while it is productive.
    fn unproductive_since(&self, now: Instant) -> Option<Instant> {
        // Already told to close: it no longer counts.
        self.close.as_ref()?;
        match self.asked_since {
            Some(at) if now.saturating_duration_since(at) >= STALLED => Some(at),
            Some(_) => None,
            None if self.busy == 0 => Some(self.idle_since),
            None => None,
        }
    }
}

/// The register of open connections.
pub struct Register {
    most: usize,
    share: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    open: HashMap<u64, Entry>,
}

impl Register {
    pub fn new(most: usize) -> Arc<Register> {
        Arc::new(Register { most, share: share_of(most), inner: Mutex::new(Inner::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes room for one more from `ip`: past its address's share, by closing one of that
    /// address's unproductive connections; in a full register, one of the address that holds
    /// the most. `false` when no room can be made.
    fn make_room(&self, ip: IpAddr) -> bool {
        let mut inner = self.lock();
        let key = address_key(ip);
        let held = inner.open.values().filter(|e| e.ip == key).count();
        if held >= self.share {
            return Self::evict(&mut inner, Some(key));
        }
        if inner.open.len() < self.most {
            return true;
        }
        Self::evict(&mut inner, None)
    }

    /// Closes the connection unproductive longest: of address `only`, or of the address that
    /// holds the most connections among those with one to close.
    fn evict(inner: &mut Inner, only: Option<IpAddr>) -> bool {
        let now = Instant::now();
        let mut per_address: HashMap<IpAddr, usize> = HashMap::new();
        for e in inner.open.values() {
            *per_address.entry(e.ip).or_default() += 1;
        }
        let victim = inner
            .open
            .iter()
            .filter(|(_, e)| only.is_none_or(|ip| e.ip == ip))
            .filter_map(|(id, e)| e.unproductive_since(now).map(|since| (id, e.ip, since)))
            .max_by_key(|(_, ip, since)| (per_address.get(ip).copied().unwrap_or(0), std::cmp::Reverse(*since)))
            .map(|(id, _, _)| *id);
        let Some(id) = victim else { return false };
        if let Some(close) = inner.open.get_mut(&id).and_then(|e| e.close.take()) {
            let _ = close.send(());
        }
        // Its task removes it once closed; until then it no longer counts.
        inner.open.remove(&id);
        true
    }

    /// Closes an idle connection when the process runs out of descriptors.
    fn shed(&self) -> bool {
        Self::evict(&mut self.lock(), None)
    }

    fn enter(&self, ip: IpAddr) -> (u64, oneshot::Receiver<()>) {
        let (close, closed) = oneshot::channel();
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        let entry =
            Entry { ip: address_key(ip), busy: 0, idle_since: Instant::now(), asked_since: None, close: Some(close) };
        inner.open.insert(id, entry);
        (id, closed)
    }

    /// The request in progress on connection `id` was answered: from here it is sending.
    fn answered(&self, id: u64) {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.asked_since = None;
        }
    }

    fn leave(&self, id: u64) {
        self.lock().open.remove(&id);
    }

    fn busy(self: &Arc<Self>, id: u64) -> Busy {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.busy += 1;
            e.asked_since = Some(Instant::now());
        }
        Busy { register: self.clone(), id }
    }
}

/// A request in progress on a connection: while one lives, the connection is not idle.
struct Busy {
    register: Arc<Register>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(e) = self.register.lock().open.get_mut(&self.id) {
            e.busy = e.busy.saturating_sub(1);
            e.asked_since = None;
            if e.busy == 0 {
                e.idle_since = Instant::now();
            }
        }
    }
}

/// A response body that keeps its connection busy until it is sent (or dropped).
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// What a connection needs.
#[derive(Clone)]
pub struct Serving {
    pub router: Router,
    pub register: Arc<Register>,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub header_timeout: Duration,
}

/// A 503 for a connection that found no room, written straight to its socket.
const NO_ROOM: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n\
Connection: close\r\nContent-Length: 66\r\n\r\n{\"error\":\"the class server has no room for another connection now\"}";

fn out_of_descriptors(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Accepts connections until `stop` fires.
pub async fn accept_loop(listener: TcpListener, serving: Serving, mut stop: oneshot::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stop => return,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) if out_of_descriptors(&e) => {
                // The process is out of descriptors: close an idle connection, and give the
                // kernel a moment before trying again.
                serving.register.shed();
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(_) => continue,
        };
        if !serving.register.make_room(remote.ip()) {
            if serving.tls.is_none() {
                tokio::spawn(async move {
                    let mut stream = stream;
                    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(NO_ROOM)).await;
                });
            }
            continue;
        }
        let local = stream.local_addr().unwrap_or(remote);
        let peer = Peer { remote, local };
        tokio::spawn(serve_connection(stream, peer, serving.clone()));
    }
}

async fn serve_connection(stream: TcpStream, peer: Peer, serving: Serving) {
    let _ = stream.set_nodelay(true);
    let (id, closed) = serving.register.enter(peer.remote.ip());
    match serving.tls.clone() {
        Some(acceptor) => {
            let handshake = tokio::time::timeout(serving.header_timeout, acceptor.accept(stream));
            if let Ok(Ok(tls)) = handshake.await {
                http(tls, peer, id, closed, &serving).await;
            }
        }
        None => http(stream, peer, id, closed, &serving).await,
    }
    serving.register.leave(id);
}

async fn http<I>(io: I, peer: Peer, id: u64, closed: oneshot::Receiver<()>, serving: &Serving)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (router, register) = (serving.router.clone(), serving.register.clone());
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(peer);
        let busy = register.busy(id);
        let mut router = router.clone();
        async move {
            let response = router.call(request.map(Body::new)).await?;
            busy.register.answered(busy.id);
            Ok::<_, std::convert::Infallible>(response.map(|inner| Tracked { inner, _busy: busy }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(serving.header_timeout).keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = connection => {}
        _ = closed => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// Makes every request in progress on `r` older than [`STALLED`].
    fn age(r: &Register) {
        let mut inner = r.lock();
        for e in inner.open.values_mut() {
            e.asked_since = e.asked_since.and_then(|t| t.checked_sub(STALLED * 2));
        }
    }

    fn held(r: &Register, who: IpAddr) -> usize {
        r.lock().open.values().filter(|e| e.ip == address_key(who)).count()
    }

    #[test]
    fn the_share_and_the_address_a_connection_counts_as() {
        assert_eq!([share_of(4096), share_of(64), share_of(16), share_of(4), share_of(1)], [16, 16, 4, 2, 1]);
        let v6 = |s: &str| address_key(s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])));
        assert_eq!(v6("2001:db8::1"), v6("2001:db8::ffff:1"), "one /64, one machine");
        assert_ne!(v6("2001:db8::1"), v6("2001:db8:0:1::1"));
        assert_eq!(v6("::ffff:10.0.0.2"), ip(2), "IPv4 through an IPv6 socket");
    }

    /// Past its share, an address makes room among its own connections, and only with one doing
    /// nothing useful: a body that has not come for a while, not one being answered.
    #[test]
    fn an_address_past_its_share_closes_its_own_stalled_bodies() {
        let r = Register::new(64);
        let mut closed = Vec::new();
        let mut busy = Vec::new();
        for _ in 0..16 {
            assert!(r.make_room(ip(2)));
            let (id, rx) = r.enter(ip(2));
            busy.push(r.busy(id));
            closed.push(rx);
        }
        assert!(!r.make_room(ip(2)), "at its share, every body just begun");
        assert!(r.make_room(ip(3)), "another address has room");
        age(&r);
        assert!(r.make_room(ip(2)), "a stalled body is closed to make room");
        assert_eq!(held(&r, ip(2)), 15);
        assert_eq!(closed.iter_mut().map(|rx| rx.try_recv()).filter(Result::is_ok).count(), 1, "and told to close");
        // Answered (sending, a live stream): productive, never closed.
        for b in &busy {
            r.answered(b.id);
        }
        assert!(r.make_room(ip(2)), "15 held: room for one more");
        let (id, _rx) = r.enter(ip(2));
        let last = r.busy(id);
        r.answered(last.id);
        age(&r);
        assert!(!r.make_room(ip(2)), "16 answering: nothing to close, no room for a 17th");
    }

    /// In a full register the newcomer closes one of the address holding the most, idle
    /// longest; an address with nothing to close is passed over.
    #[test]
    fn a_full_register_closes_an_idle_one_of_the_largest_holder() {
        let r = Register::new(8);
        let mut keep = Vec::new();
        for who in [2, 2, 3, 3, 4, 5, 6, 7] {
            assert!(r.make_room(ip(who)), "{who}");
            keep.push(r.enter(ip(who)));
        }
        // Address 2's are answering: productive. Address 3's are idle.
        let answering: Vec<Busy> = keep[..2].iter().map(|(id, _)| r.busy(*id)).collect();
        for b in &answering {
            r.answered(b.id);
        }
        assert!(r.make_room(ip(9)));
        assert_eq!((held(&r, ip(2)), held(&r, ip(3))), (2, 1), "one of 3's idle two was closed");
    }
}
