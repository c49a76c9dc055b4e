//! The class server against what anyone on a school network can do in seconds (issue 40), on
//! loopback, with bounded loops. Most tests run the real `oomlab serve` binary, as an attacker
//! would meet it (OOMLAB_SERVE_BIN runs them against another build, e.g. an older one); those
//! that need a limit the command line does not set run the server in this process.
//!
//! Several people on one machine: Linux routes all of 127.0.0.0/8 here, so requests speak from
//! 127.0.0.2 (an attacker), 127.0.0.3… (students), and 127.0.0.1 (the server's own machine, the
//! only loopback address that counts as the teacher's).
#![cfg(target_os = "linux")]

#[path = "support/raw_http.rs"]
mod raw_http;
#[path = "support/spawn.rs"]
mod spawn;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use oomlab::class::{ClassState, Created, Joined, Membership, Results, Roster};
use oomlab::serve::{self, Config, Limits};
use raw_http::{Client, loopback};
use serde_json::json;
use spawn::{spawn, spawn_with};

fn start(db: &Path, limits: Limits) -> serve::Server {
    serve::start(&Config { limits, ..Config::loopback(db.to_path_buf()) }).expect("the server starts")
}

fn teacher(addr: SocketAddr) -> Client {
    Client::new(addr, loopback(0, 1))
}

fn create(c: &Client, body: serde_json::Value) -> Created {
    let r = c.post("/api/classes", &body, None);
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

fn join(c: &Client, code: &str, body: serde_json::Value) -> raw_http::Reply {
    c.post(&format!("/api/classes/{code}/join"), &body, None)
}

fn state(c: &Client, code: &str) -> ClassState {
    let r = c.get(&format!("/api/classes/{code}"), None);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn results(c: &Client, class: &Created, chapter: u32) -> Results {
    let r = c.get(&format!("/api/classes/{}/results?chapter={chapter}", class.code), Some(&class.teacher_token));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn act(c: &Client, class: &Created, action: &str, body: serde_json::Value) -> raw_http::Reply {
    c.post(&format!("/api/classes/{}/{action}", class.code), &body, Some(&class.teacher_token))
}

/// Raises this test process's own open-file limit (it holds a thousand sockets).
fn more_files_here() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: reads and writes this process's limit through a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// One machine joins a class 150 times in a second: it gets its allowance (60 a minute) and no
/// more, the projector sees joins faster than a class types, real students from other addresses
/// still join, and the teacher locks the class and removes the flood, whose answers leave the
/// results.
#[test]
fn a_join_flood_is_held_to_its_allowance_and_the_teacher_locks_and_removes_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let attacker = Client::new(server.addr, loopback(0, 2));
    let mut flood = Vec::new();
    let mut statuses = Vec::new();
    for i in 0..150 {
        let r = join(&attacker, &class.code, json!({ "name": format!("bot{i}") }));
        statuses.push(r.status);
        if r.status == 201 {
            flood.push(r.json::<Joined>().student);
        }
    }
    // 60 at once, then one a second while the flood lasts.
    assert!((58..=70).contains(&flood.len()), "one address joined {} times: {statuses:?}", flood.len());
    assert!(statuses.iter().all(|s| *s == 201 || *s == 429), "{statuses:?}");
    let seen = state(&t, &class.code);
    assert!(seen.join_flood && seen.joins_recent >= 20, "the projector is told: {seen:?}");

    // Students, each on an address of their own, are not held back.
    let students: Vec<Client> = (3..8).map(|b| Client::new(server.addr, loopback(0, b))).collect();
    let ids: Vec<String> = students
        .iter()
        .map(|s| {
            let r = join(s, &class.code, json!({ "name": "Ada" }));
            assert_eq!(r.status, 201, "{}", r.text());
            r.json::<Joined>().student
        })
        .collect();

    // The flood votes; so does the class.
    let choice = json!({ "chapter": 1, "question": { "kind": "choice", "options": ["a", "b"] } });
    assert_eq!(act(&t, &class, "chapter", choice).status, 200);
    let answers = format!("/api/classes/{}/answers", class.code);
    for id in &flood {
        assert_eq!(attacker.post(&answers, &json!({ "student": id, "chapter": 1, "answer": "a" }), None).status, 200);
    }
    for (s, id) in students.iter().zip(&ids) {
        assert_eq!(s.post(&answers, &json!({ "student": id, "chapter": 1, "answer": "b" }), None).status, 200);
    }
    assert_eq!(results(&t, &class, 1).count as usize, flood.len() + 5);

    // The teacher's list shows everyone, in the order they joined.
    let roster: Roster = t.get(&format!("/api/classes/{}/students", class.code), Some(&class.teacher_token)).json();
    assert_eq!(roster.students.len(), flood.len() + 5);
    assert_eq!(roster.students[0].student, flood[0]);
    assert_eq!(roster.students[0].answered, 1);

    // Lock: no one else joins.
    let locked: ClassState = act(&t, &class, "lock", json!({ "locked": true })).json();
    assert!(locked.locked);
    let late = Client::new(server.addr, loopback(0, 9));
    assert_eq!(join(&late, &class.code, json!({})).status, 423);

    // Remove the flood: its answers leave the results, its ids are refused.
    let after: ClassState = act(&t, &class, "remove", json!({ "students": flood })).json();
    assert_eq!(after.students, 5);
    let r = results(&t, &class, 1);
    assert_eq!(r.count, 5);
    assert!(r.answers.iter().all(|a| a.answer.text() == "b"), "{:?}", r.answers);
    let refused = attacker.post(&answers, &json!({ "student": flood[0], "chapter": 1, "answer": "a" }), None);
    assert_eq!(refused.status, 403);

    // Unlocked, the late student joins.
    act(&t, &class, "lock", json!({ "locked": false }));
    assert_eq!(join(&late, &class.code, json!({})).status, 201);
}

/// A class started as "expected size 3": the fourth student waits, cannot answer, and is let
/// in (or removed) by the teacher — a second step a script cannot take.
#[test]
fn past_its_expected_size_a_class_makes_students_wait_for_the_teacher() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({ "expected": 3 }));
    assert_eq!(state(&t, &class.code).expected, Some(3));
    let joined: Vec<Joined> =
        (3..8).map(|b| join(&Client::new(server.addr, loopback(0, b)), &class.code, json!({})).json()).collect();
    assert_eq!(joined.iter().map(|j| j.waiting).collect::<Vec<_>>(), [false, false, false, true, true]);
    let s = state(&t, &class.code);
    assert_eq!((s.students, s.waiting), (3, 2));
    assert_eq!(act(&t, &class, "chapter", json!({ "chapter": 1, "question": { "kind": "number" } })).status, 200);
    let me = |id: &str| t.post(&format!("/api/classes/{}/me", class.code), &json!({ "student": id }), None);
    assert!(me(&joined[3].student).json::<Membership>().waiting);
    let answer = |id: &str| {
        let body = json!({ "student": id, "chapter": 1, "answer": 2.0 });
        t.post(&format!("/api/classes/{}/answers", class.code), &body, None).status
    };
    assert_eq!(answer(&joined[3].student), 409, "a waiting student cannot answer");
    // Let one in, remove the other.
    let s: ClassState = act(&t, &class, "admit", json!({ "students": [joined[3].student] })).json();
    assert_eq!((s.students, s.waiting), (4, 1));
    assert!(!me(&joined[3].student).json::<Membership>().waiting);
    assert_eq!(answer(&joined[3].student), 200);
    let s: ClassState = act(&t, &class, "remove", json!({ "all_waiting": true })).json();
    assert_eq!((s.students, s.waiting), (4, 0));
    assert_eq!(me(&joined[4].student).status, 403, "removed");
    assert_eq!(act(&t, &class, "admit", json!({ "students": "not a list" })).status, 422);
}

/// Only the server's own machine, or a teacher with the key it printed, starts a class.
#[test]
fn only_the_teacher_starts_classes() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let attacker = Client::new(server.addr, loopback(0, 2));
    let statuses: Vec<u16> = (0..195).map(|_| attacker.post("/api/classes", &json!({}), None).status).collect();
    assert!(statuses.iter().all(|s| *s == 403), "{statuses:?}");
    assert_eq!(server.key.len(), 32, "the key is printed: {}", server.printed);
    assert!(attacker.post("/api/classes", &json!({}), None).text().contains("key"), "it says what is needed");
    let wrong = format!("{}0", &server.key[..31]);
    let wrong = if wrong == server.key { format!("{}1", &server.key[..31]) } else { wrong };
    assert_eq!(attacker.post("/api/classes", &json!({}), Some(&wrong)).status, 403);
    // The teacher on another computer, with the key; the teacher on this one, without.
    assert_eq!(attacker.post("/api/classes", &json!({}), Some(&server.key)).status, 201);
    assert_eq!(teacher(server.addr).post("/api/classes", &json!({}), None).status, 201);
    assert_eq!(teacher(server.addr).post("/api/classes", &json!({ "expected": 0 }), None).status, 422);
    // A body is judged only once the asker may start a class: to anyone else, 403 whatever it is.
    let raw = |from: IpAddr, body: &[u8]| {
        raw_http::request(server.addr, from, "POST", "/api/classes", &[], body).expect("an answer").status
    };
    assert_eq!(raw(loopback(0, 2), b"{"), 403);
    assert_eq!(raw(loopback(0, 1), b"{"), 422);
    assert_eq!(raw(loopback(0, 1), b"{\"expected\": \"thirty\"}"), 422);
    assert_eq!(raw(loopback(0, 1), format!("{{\"x\": \"{}\"}}", "x".repeat(20_000)).as_bytes()), 413);
}

/// A closed class frees its place at once; closed classes are kept for their CSV, but no more
/// of them than the limit (the oldest goes first), also across a restart.
#[test]
fn closing_a_class_frees_its_place_and_what_is_kept_is_bounded() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    let limits = Limits { max_classes: 2, max_closed: 1, ..Limits::default() };
    let server = start(&db, limits.clone());
    let t = teacher(server.addr);
    let a = create(&t, json!({}));
    let b = create(&t, json!({}));
    assert_eq!(t.post("/api/classes", &json!({}), None).status, 503, "two open classes are the most");
    assert_eq!(act(&t, &a, "close", json!({})).status, 200);
    let c = create(&t, json!({}));
    // The closed class is still there for its CSV.
    assert_eq!(t.get(&format!("/api/classes/{}/answers.csv", a.code), Some(&a.teacher_token)).status, 200);
    assert_eq!(act(&t, &b, "close", json!({})).status, 200);
    let d = create(&t, json!({}));
    // Two closed classes are more than the one kept: the older one went.
    assert_eq!(t.get(&format!("/api/classes/{}", a.code), None).status, 404);
    assert!(state(&t, &b.code).closed);
    server.stop();
    let server = start(&db, limits);
    let t = teacher(server.addr);
    assert_eq!(t.post("/api/classes", &json!({}), None).status, 503, "c and d are open");
    assert_eq!(act(&t, &c, "close", json!({})).status, 200);
    assert_eq!(t.post("/api/classes", &json!({}), None).status, 201);
    assert!(!state(&t, &d.code).closed);
    server.stop();
}

/// What one class stores is bounded: students (those waiting included) and chapters; a chapter
/// already opened may be opened again.
#[test]
fn what_a_class_stores_is_bounded() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = start(&dir.path().join("c.sqlite"), Limits { max_students: 3, ..Limits::default() });
    let t = teacher(server.addr);
    let class = create(&t, json!({ "expected": 1 }));
    let joins: Vec<u16> =
        (3..7).map(|b| join(&Client::new(server.addr, loopback(0, b)), &class.code, json!({})).status).collect();
    assert_eq!(joins, [201, 201, 201, 409], "three students, two of them waiting, are the most");
    let set =
        |chapter: u32| act(&t, &class, "chapter", json!({ "chapter": chapter, "question": { "kind": "number" } }));
    for chapter in 1..=oomlab::class::MAX_CHAPTERS_PER_CLASS as u32 {
        assert_eq!(set(chapter).status, 200, "chapter {chapter}");
    }
    let past = set(oomlab::class::MAX_CHAPTERS_PER_CLASS as u32 + 1);
    assert_eq!(past.status, 409, "{}", past.text());
    assert_eq!(set(1).status, 200, "back to an opened chapter");
    server.stop();
}

/// A restart keeps what the teacher decided: the lock, the expected size, who waits.
#[test]
fn a_restart_keeps_the_lock_and_who_waits() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    let server = start(&db, Limits::default());
    let t = teacher(server.addr);
    let class = create(&t, json!({ "expected": 1 }));
    let ids: Vec<Joined> =
        (3..5).map(|b| join(&Client::new(server.addr, loopback(0, b)), &class.code, json!({})).json()).collect();
    assert!(ids[1].waiting);
    assert!(act(&t, &class, "lock", json!({ "locked": true })).json::<ClassState>().locked);
    server.stop();
    let server = start(&db, Limits::default());
    let t = teacher(server.addr);
    let s = state(&t, &class.code);
    assert_eq!((s.locked, s.expected, s.students, s.waiting), (true, Some(1), 1, 1));
    let me = t.post(&format!("/api/classes/{}/me", class.code), &json!({ "student": ids[1].student }), None);
    assert!(me.json::<Membership>().waiting);
    assert_eq!(join(&Client::new(server.addr, loopback(0, 5)), &class.code, json!({})).status, 423);
    server.stop();
}

/// Sends `bytes` on a fresh connection from `from` and leaves it open.
fn open(server: SocketAddr, from: IpAddr, bytes: &[u8]) -> TcpStream {
    let mut s = raw_http::connect(server, from, Duration::from_secs(5)).expect("a connection");
    s.write_all(bytes).expect("sent");
    s
}

/// Whether the server closed the connection (reading the rest of what it sent).
fn closed(s: &mut TcpStream) -> (bool, Vec<u8>) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (true, got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (true, got),
            Err(_) => return (false, got),
        }
    }
}

/// An idle socket, a half-sent request line, a body that stops after 1 of 100 bytes and an idle
/// keep-alive connection are closed after the timeouts (10 s for headers and idling, 10 s for a
/// body); a declared 10 GB body is refused at once; a live stream stays open.
#[test]
fn slow_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let host = format!("Host: {}\r\n", server.addr);
    let from = loopback(0, 2);
    let mut idle = open(server.addr, from, b"");
    let mut half = open(server.addr, from, b"GET /api/strings HT");
    let body = format!(
        "POST /api/classes/{}/join HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        class.code
    );
    let mut slow_body = open(server.addr, from, body.as_bytes());
    let mut kept = open(server.addr, from, format!("GET /api/strings HTTP/1.1\r\n{host}\r\n").as_bytes());
    let events = format!("GET /api/classes/{}/events HTTP/1.1\r\n{host}Accept: text/event-stream\r\n\r\n", class.code);
    let mut follower = open(server.addr, from, events.as_bytes());
    let huge = format!(
        "POST /api/classes/{}/join HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n{{",
        class.code
    );
    let asked = Instant::now();
    let mut big = open(server.addr, from, huge.as_bytes());
    let mut first = [0u8; 12];
    big.set_read_timeout(Some(Duration::from_secs(5))).expect("a timeout");
    big.read_exact(&mut first).expect("an answer at once");
    assert_eq!(&first, b"HTTP/1.1 413", "a 10 GB body is refused before it is sent");
    assert!(asked.elapsed() < Duration::from_secs(3), "{:?}", asked.elapsed());

    std::thread::sleep(Duration::from_secs(12));
    assert!(closed(&mut idle).0, "an idle socket is closed");
    assert!(closed(&mut half).0, "a half-sent request line is closed");
    let (gone, said) = closed(&mut slow_body);
    assert!(gone && said.starts_with(b"HTTP/1.1 408"), "{}", String::from_utf8_lossy(&said));
    let (gone, said) = closed(&mut kept);
    assert!(gone && said.starts_with(b"HTTP/1.1 200"), "answered, then closed when idle");
    let (gone, said) = closed(&mut follower);
    assert!(!gone && said.starts_with(b"HTTP/1.1 200"), "a live stream stays: {}", String::from_utf8_lossy(&said));
}

/// `Max open files` of a process: (soft, hard).
fn open_file_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("its limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("the open-file line").to_string();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_string(), fields[4].to_string())
}

/// A student who joined before a thousand idle sockets arrived from one machine still answers,
/// with a server held to 256 descriptors (a laptop's usual limit, here also its hard one).
#[test]
fn a_thousand_idle_sockets_under_a_low_descriptor_limit_leave_room_for_an_answer() {
    more_files_here();
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), Some((256, 256)));
    assert_eq!(open_file_limit(server.child.id()), ("256".into(), "256".into()));
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    assert_eq!(act(&t, &class, "chapter", json!({ "chapter": 1, "question": { "kind": "number" } })).status, 200);
    let student = Client::new(server.addr, loopback(0, 3));
    let id = join(&student, &class.code, json!({})).json::<Joined>().student;
    let attacker = loopback(0, 2);
    // Bounded in time too: a server that accepts nothing fills the kernel's queue, and each
    // connection then waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    let sockets: Vec<TcpStream> = (0..1000)
        .take_while(|_| Instant::now() < deadline)
        .filter_map(|_| raw_http::connect(server.addr, attacker, Duration::from_secs(2)).ok())
        .collect();
    assert!(sockets.len() >= 900, "{} of the thousand connected", sockets.len());
    let asked = Instant::now();
    let body = json!({ "student": id, "chapter": 1, "answer": 1.5 });
    let r = raw_http::request(
        server.addr,
        loopback(0, 3),
        "POST",
        &format!("/api/classes/{}/answers", class.code),
        &[],
        &serde_json::to_vec(&body).unwrap_or_default(),
    )
    .expect("the answer lands");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(asked.elapsed() < Duration::from_secs(10), "{:?}", asked.elapsed());
    let late = Client::new(server.addr, loopback(0, 4));
    assert_eq!(join(&late, &class.code, json!({})).status, 201, "and a new student joins");
    drop(sockets);
}

/// The server raises its soft descriptor limit to the hard one; held to 256 anyway, 300 live
/// followers of one class get what there is room for, the rest are told to retry, and an answer
/// still lands.
#[test]
fn the_descriptor_limit_is_raised_and_live_streams_leave_room_for_answers() {
    more_files_here();
    let dir = tempfile::tempdir().expect("a directory");
    let mut hard = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: reads this process's limit into a struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) };
    let hard = hard.rlim_max.min(1 << 16);
    let raised = spawn(&dir.path().join("a.sqlite"), Some((256, hard)));
    assert_eq!(open_file_limit(raised.child.id()), (hard.to_string(), hard.to_string()));
    assert!(raised.printed.contains("Connections: at most"), "{}", raised.printed);
    drop(raised);

    let server = spawn(&dir.path().join("b.sqlite"), Some((256, 256)));
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    assert_eq!(act(&t, &class, "chapter", json!({ "chapter": 1, "question": { "kind": "number" } })).status, 200);
    let student = Client::new(server.addr, loopback(0, 3));
    let id = join(&student, &class.code, json!({})).json::<Joined>().student;
    let host = format!("Host: {}\r\n", server.addr);
    let events = format!("GET /api/classes/{}/events HTTP/1.1\r\n{host}Accept: text/event-stream\r\n\r\n", class.code);
    let mut followers = Vec::new();
    let (mut streaming, mut refused) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Each stream from an address of its own, as phones' would be (one address holds only a few:
    // tests/serve_determined.rs).
    for i in (0..300).take_while(|_| Instant::now() < deadline) {
        let Ok(mut s) = raw_http::connect(server.addr, raw_http::phone(i), Duration::from_secs(2)) else { continue };
        if s.write_all(events.as_bytes()).is_err() {
            continue;
        }
        let mut status = [0u8; 12];
        match s.read_exact(&mut status) {
            Ok(()) if &status == b"HTTP/1.1 200" => streaming += 1,
            Ok(()) if &status == b"HTTP/1.1 503" => refused += 1,
            _ => {}
        }
        followers.push(s);
    }
    assert!(
        streaming > 50 && refused > 0 && streaming + refused == 300,
        "{streaming} streams, {refused} told to retry"
    );
    let body = json!({ "student": id, "chapter": 1, "answer": 1.5 });
    let r = student.post(&format!("/api/classes/{}/answers", class.code), &body, None);
    assert_eq!(r.status, 200, "{}", r.text());
    drop(followers);
}

/// Past a class's most live followers, the next is told to retry (503, `Retry-After`); when one
/// leaves, there is room again; another class is not affected.
#[test]
fn a_class_caps_its_live_followers() {
    let dir = tempfile::tempdir().expect("a directory");
    let limits = Limits { followers_per_class: 3, ..Limits::default() };
    let server = start(&dir.path().join("c.sqlite"), limits);
    let t = teacher(server.addr);
    let (class, other) = (create(&t, json!({})), create(&t, json!({})));
    let follow = |code: &str| {
        let request = format!("GET /api/classes/{code}/events HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr);
        let mut s = open(server.addr, loopback(0, 3), request.as_bytes());
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("a timeout");
        let mut head = vec![0u8; 512];
        let n = s.read(&mut head).unwrap_or(0);
        (s, String::from_utf8_lossy(&head[..n]).into_owned())
    };
    let mut followers: Vec<TcpStream> = (0..3)
        .map(|_| {
            let (s, head) = follow(&class.code);
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        })
        .collect();
    let (_, refused) = follow(&class.code);
    assert!(
        refused.starts_with("HTTP/1.1 503") && refused.to_ascii_lowercase().contains("retry-after: 5"),
        "{refused}"
    );
    assert!(follow(&other.code).1.starts_with("HTTP/1.1 200"), "another class has its own room");
    drop(followers.pop());
    std::thread::sleep(Duration::from_millis(300));
    assert!(follow(&class.code).1.starts_with("HTTP/1.1 200"), "room again once one left");
    server.stop();
}

/// A page on the internet that points its own name at the server (DNS rebinding) is refused
/// whatever it asks; the server's own names work.
#[test]
fn a_rebinding_host_name_is_refused() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let port = server.addr.port();
    let evil_host = format!("evil.example:{port}");
    let evil_origin = format!("http://evil.example:{port}");
    let from = loopback(0, 1);
    let ask = |method: &str, path: &str, host: &str, origin: Option<&str>| {
        let mut headers = vec![("Host", host)];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let body: &[u8] = if method == "POST" { b"{}" } else { b"" };
        raw_http::request(server.addr, from, method, path, &headers, body).expect("an answer").status
    };
    assert_eq!(ask("POST", "/api/classes", &evil_host, Some(&evil_origin)), 403);
    for path in ["/", "/join", "/join/ABCDEF", "/join.js", "/api/strings"] {
        assert_eq!(ask("GET", path, &evil_host, None), 403, "{path}");
    }
    assert_eq!(ask("GET", "/api/strings", "", None), 403, "no name at all");
    for own in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), "localhost".to_string()] {
        assert_eq!(ask("GET", "/api/strings", &own, None), 200, "{own}");
    }
    let own = format!("localhost:{port}");
    assert_eq!(ask("POST", "/api/classes", &own, Some(&format!("http://{own}"))), 201);
    drop(server);

    // A school's names for the server: --allow-host and --public-url's host, and no other.
    let named = spawn_with(
        &dir.path().join("d.sqlite"),
        None,
        &["--allow-host", "class.local", "--public-url", "http://oomlab.school.example:9999/"],
    );
    assert!(named.printed.contains("Students: open http://oomlab.school.example:9999/join "), "{}", named.printed);
    let status = |host: &str| {
        let headers = [("Host", host)];
        raw_http::request(named.addr, from, "GET", "/api/strings", &headers, b"").expect("an answer").status
    };
    assert_eq!(status("class.local"), 200);
    assert_eq!(status("CLASS.LOCAL:8080"), 200);
    assert_eq!(status("oomlab.school.example:9999"), 200);
    assert_eq!(status("evil.class.local"), 403);
    assert_eq!(status("school.example"), 403);
}

/// Every answer carries `nosniff` and `no-referrer`; pages carry a Content-Security-Policy with
/// no inline script and no framing; answers that hold names or ids are `no-store`.
#[test]
fn every_answer_carries_the_security_headers() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let joined = join(&Client::new(server.addr, loopback(0, 3)), &class.code, json!({ "name": "Ada" }));
    let token = Some(class.teacher_token.as_str());
    let code = &class.code;
    let replies = [
        ("/", t.get("/", None)),
        ("/join", t.get(&format!("/join/{code}"), None)),
        ("/join.js", t.get("/join.js", None)),
        ("state", t.get(&format!("/api/classes/{code}"), None)),
        ("results", t.get(&format!("/api/classes/{code}/results?chapter=1"), token)),
        ("csv", t.get(&format!("/api/classes/{code}/answers.csv"), token)),
        ("students", t.get(&format!("/api/classes/{code}/students"), token)),
        ("unknown", t.get("/api/classes/ZZZZZZ", None)),
        ("join", joined),
    ];
    for (what, r) in &replies {
        assert!(r.status < 500, "{what}: {}", r.status);
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{what}");
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
        let csp = r.header("content-security-policy").unwrap_or_else(|| panic!("{what}: no policy"));
        assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
        let scripts = csp.split(';').find(|d| d.trim().starts_with("script-src")).unwrap_or("");
        assert!(!scripts.contains("'unsafe-inline'") && !csp.contains("'unsafe-eval'"), "{what}: {csp}");
    }
    let header = |what: &str, name: &str| {
        replies.iter().find(|(w, _)| *w == what).and_then(|(_, r)| r.header(name).map(str::to_string))
    };
    for private in ["results", "csv", "students", "join", "state"] {
        assert_eq!(header(private, "cache-control").as_deref(), Some("no-store"), "{private}");
    }
    let page = &replies[1].1;
    assert!(page.text().contains("<script src=\"/join.js\"></script>") && !page.text().contains("<script>"));
    assert!(header("/join", "content-security-policy").is_some_and(|c| c.contains("script-src 'self';")));
    assert!(header("/", "content-security-policy").is_some_and(|c| c.contains("'wasm-unsafe-eval'")));
    assert!(header("state", "content-security-policy").is_some_and(|c| c.starts_with("default-src 'none'")));
}

/// A class answers 404 from the second it expires, not at the next sweep, and its followers see
/// it end then.
#[test]
fn a_class_is_gone_the_second_it_expires() {
    let dir = tempfile::tempdir().expect("a directory");
    let limits =
        Limits { class_lifetime: Duration::from_secs(2), sweep_every: Duration::from_secs(60), ..Limits::default() };
    let server = start(&dir.path().join("c.sqlite"), limits);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let expires_ms = class.expires_at * 1000;
    let now_ms =
        || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let host = format!("Host: {}\r\n", server.addr);
    let events = format!("GET /api/classes/{}/events HTTP/1.1\r\n{host}\r\n", class.code);
    let mut follower = open(server.addr, loopback(0, 3), events.as_bytes());
    let mut gone_at = None;
    while now_ms() < expires_ms + 3000 {
        let before = now_ms();
        let status = t.get(&format!("/api/classes/{}", class.code), None).status;
        if before < expires_ms - 100 {
            assert_eq!(status, 200, "alive before its time");
        }
        if status == 404 {
            gone_at = Some(before);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone_at = gone_at.expect("the class expired");
    // Polled every 50 ms (plus a busy machine's latency), against a sweep every 60 s.
    assert!(gone_at - expires_ms < 1000, "404 came {} ms after the second it expired", gone_at - expires_ms);
    // The follower saw it closed, and its stream ended.
    follower.set_read_timeout(Some(Duration::from_secs(2))).expect("a timeout");
    let mut seen = String::new();
    let _ = follower.read_to_string(&mut seen);
    assert!(seen.contains("\"closed\":true"), "{seen}");
    server.stop();
}

/// Names that hide or disguise themselves are refused; a name is stored in NFC; the CSV opens
/// in a spreadsheet with its Chinese intact (a UTF-8 byte-order mark).
#[test]
fn hostile_names_are_refused_and_the_csv_keeps_chinese_names() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let student = Client::new(server.addr, loopback(0, 3));
    for hostile in [
        "gpj\u{202E}exe",
        "\u{200B}\u{200B}\u{200B}",
        "Ada\u{200B}",
        &format!("Z{}", "\u{0301}".repeat(40)),
        &"名".repeat(41),
        "\u{2066}Ada\u{2069}",
    ] {
        let r = join(&student, &class.code, json!({ "name": hostile }));
        assert_eq!(r.status, 422, "{hostile:?}: {}", r.text());
    }
    assert_eq!(join(&student, &class.code, json!({ "name": "Jose\u{301}" })).status, 201);
    assert_eq!(join(&student, &class.code, json!({ "name": "李雷" })).status, 201);
    let roster: Roster = t.get(&format!("/api/classes/{}/students", class.code), Some(&class.teacher_token)).json();
    let names: Vec<String> = roster.students.iter().filter_map(|s| s.name.clone()).collect();
    assert_eq!(names, ["José", "李雷"]);
    let csv = t.get(&format!("/api/classes/{}/answers.csv", class.code), Some(&class.teacher_token));
    assert!(csv.body.starts_with("\u{feff}chapter,".as_bytes()), "{}", csv.text());
}

/// A teacher's request is judged by its token before its body: without a token it is 401
/// whatever the body, with a wrong one 403, and only then is the body read.
#[test]
fn the_token_is_checked_before_the_body() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let path = format!("/api/classes/{}/chapter", class.code);
    let send = |token: Option<&str>, body: &[u8]| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        raw_http::request(server.addr, loopback(0, 2), "POST", &path, &headers, body).expect("an answer").status
    };
    assert_eq!(send(None, b"{\"chapter\": \"x\"}"), 401);
    assert_eq!(send(None, b"{"), 401);
    assert_eq!(send(Some("wrong"), b"{"), 403);
    assert_eq!(send(Some(&class.teacher_token), b"{"), 400);
    assert_eq!(send(Some(&class.teacher_token), b"{\"chapter\": \"x\"}"), 422);
    let results = format!("/api/classes/{}/results?chapter=nope", class.code);
    assert_eq!(t.get(&results, None).status, 401);
    assert_eq!(t.get(&results, Some(&class.teacher_token)).status, 400);
}

/// Guessing class codes from one address is held back after a few misses; other addresses and
/// real classes are not.
#[test]
fn unknown_class_codes_are_rate_limited_per_address() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    let guesser = Client::new(server.addr, loopback(0, 2));
    let statuses: Vec<u16> = (0..60).map(|i| guesser.get(&format!("/api/classes/ZZZZ{i:02}"), None).status).collect();
    // 20 at once, then about one a second.
    let misses = statuses.iter().filter(|s| **s == 404).count();
    assert!((20..=26).contains(&misses), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 404 || *s == 429), "{statuses:?}");
    let refused = guesser.get("/api/classes/ZZZZZZ", None);
    assert_eq!((refused.status, refused.header("retry-after")), (429, Some("5")), "{}", refused.text());
    let student = Client::new(server.addr, loopback(0, 3));
    assert_eq!(student.get("/api/classes/ZZZZZZ", None).status, 404);
    assert_eq!(student.get(&format!("/api/classes/{}", class.code), None).status, 200);
}

/// The database is readable by its owner only and keeps the teacher token as a hash; a mangled
/// join address still gets the students' page.
#[test]
fn the_database_is_private_and_keeps_no_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    let server = spawn(&db, None);
    let t = teacher(server.addr);
    let class = create(&t, json!({}));
    assert_eq!(std::fs::metadata(&db).expect("the database").permissions().mode() & 0o777, 0o600);
    let mut stored = std::fs::read(&db).unwrap_or_default();
    stored.extend(std::fs::read(dir.path().join("c.sqlite-wal")).unwrap_or_default());
    let text = String::from_utf8_lossy(&stored);
    assert!(text.contains(&class.code), "the class is stored");
    assert!(!text.contains(&class.teacher_token), "the token is not");
    let page = t.get("/join/%E0%A4%A", None);
    assert_eq!(page.status, 200);
    assert!(page.text().contains("id=\"join\""), "the code form");
}

/// Over HTTPS, with a certificate and key in PEM files: the API answers through TLS, the join
/// address is https, and plain HTTP on the same port gets no answer.
#[test]
fn https_with_a_certificate() {
    use rustls::pki_types::pem::PemObject;
    let dir = tempfile::tempdir().expect("a directory");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let tls = serve::TlsFiles { cert: fixtures.join("cert.pem"), key: fixtures.join("key.pem") };
    let config = Config { tls: Some(tls.clone()), ..Config::loopback(dir.path().join("c.sqlite")) };
    let server = serve::start(&config).expect("the server starts");
    assert!(server.https && server.public.starts_with("https://127.0.0.1:"), "{}", server.public);

    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(fixtures.join("ca.pem")).expect("the authority") {
        roots.add(cert.expect("a certificate")).expect("a root");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let connection = rustls::ClientConnection::new(std::sync::Arc::new(client), name).expect("a TLS client");
    let socket = TcpStream::connect(server.addr).expect("a connection");
    socket.set_read_timeout(Some(Duration::from_secs(10))).expect("a timeout");
    let mut tls_stream = rustls::StreamOwned::new(connection, socket);
    let request = format!(
        "POST /api/classes HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
        server.addr.port()
    );
    tls_stream.write_all(request.as_bytes()).expect("sent");
    let mut raw = Vec::new();
    let _ = tls_stream.read_to_end(&mut raw);
    let reply = raw_http::parse(&raw).expect("an HTTP answer through TLS");
    assert_eq!(reply.status, 201, "{}", reply.text());
    let created: Created = reply.json();
    assert!(created.join_url.starts_with("https://"), "{}", created.join_url);

    let plain = raw_http::request(server.addr, loopback(0, 1), "GET", "/api/strings", &[], b"");
    assert!(plain.is_err() || plain.is_ok_and(|r| r.status != 200), "plain HTTP is not answered");
    server.stop();

    let missing = serve::TlsFiles { cert: dir.path().join("none.pem"), key: tls.key };
    let refused = serve::start(&Config { tls: Some(missing), ..Config::loopback(dir.path().join("d.sqlite")) });
    assert!(refused.is_err_and(|e| e.to_string().contains("none.pem")));
}
