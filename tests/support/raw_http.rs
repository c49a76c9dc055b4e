//! A raw HTTP/1.1 client for the class server's tests: each request on a connection of its own,
//! from a chosen loopback address (Linux routes all of 127.0.0.0/8 to this machine, so a test
//! can play several people: 127.0.0.2 an attacker, 127.0.0.3 students; only 127.0.0.1 and ::1
//! are the server's own machine), with any header, however hostile.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// An answer: status, headers (names in lower case) and body.
#[derive(Debug, Default)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {} {}", self.status, self.text()))
    }
}

/// A loopback address: `127.0.a.b`.
pub fn loopback(a: u8, b: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, a, b))
}

/// The `i`-th of many loopback addresses, each a phone of its own: 127.0.1.1, 127.0.1.2, …
pub fn phone(i: usize) -> IpAddr {
    loopback((1 + i / 250) as u8, (1 + i % 250) as u8)
}

/// A connection to `server` from `from` (any local port).
pub fn connect(server: SocketAddr, from: IpAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(server), socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect_timeout(&server.into(), timeout)?;
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

/// Reads a whole answer from a connection the server closes after it (`Connection: close`).
pub fn read_reply(stream: &mut TcpStream) -> std::io::Result<Reply> {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {:?}", String::from_utf8_lossy(&raw))))
}

/// Parses an answer (a chunked body is put together).
pub fn parse(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            let start = line_end + 2;
            out.extend_from_slice(rest.get(start..start + size)?);
            rest = rest.get(start + size + 2..)?;
        }
        body = out;
    }
    Some(Reply { status, headers, body })
}

/// One request from `from` with these extra headers (a `Host` among them replaces the usual
/// one), on a connection of its own.
pub fn request(
    server: SocketAddr,
    from: IpAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = connect(server, from, Duration::from_secs(10))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {server}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    read_reply(&mut stream)
}

/// A client speaking from one address.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub server: SocketAddr,
    pub ip: IpAddr,
}

impl Client {
    pub fn new(server: SocketAddr, ip: IpAddr) -> Client {
        Client { server, ip }
    }

    pub fn get(&self, path: &str, token: Option<&str>) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        request(self.server, self.ip, "GET", path, &headers, b"").unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    pub fn post(&self, path: &str, body: &serde_json::Value, token: Option<&str>) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        let body = serde_json::to_vec(body).unwrap_or_default();
        request(self.server, self.ip, "POST", path, &headers, &body).unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }
}
