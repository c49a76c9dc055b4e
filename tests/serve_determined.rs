//! The class server against one determined address (issue 56), on loopback, with bounded loops:
//! what got past issue 40's defences, each a test that fails on the server before it and
//! passes now (OOMLAB_SERVE_BIN runs them against another build, e.g. an older one).
//!
//! Several people on one machine: Linux routes all of 127.0.0.0/8 here, so requests speak from
//! 127.0.0.2 (an attacker), 127.0.0.3… (students), and 127.0.0.1 (the teacher's machine).
#![cfg(target_os = "linux")]

#[path = "support/raw_http.rs"]
mod raw_http;
#[path = "support/spawn.rs"]
mod spawn;

use oomlab::class::Created;
use raw_http::{Client, loopback};
use serde_json::json;
use spawn::spawn;

fn create(c: &Client) -> Created {
    let r = c.post("/api/classes", &json!({}), None);
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

/// Wrong teacher keys and class tokens are held back per address, as unknown codes are: 20 at
/// once, then about one a second. The right token from another address still works, and so
/// does the teacher's own.
#[test]
fn wrong_keys_and_tokens_are_rate_limited_per_address() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let teacher = Client::new(server.addr, loopback(0, 1));
    let class = create(&teacher);
    let guesser = Client::new(server.addr, loopback(0, 2));
    let chapter = format!("/api/classes/{}/chapter", class.code);
    let statuses: Vec<u16> =
        (0..60).map(|i| guesser.post(&chapter, &json!({"chapter": 1}), Some(&format!("{i:064x}"))).status).collect();
    let wrong = statuses.iter().filter(|s| **s == 403).count();
    assert!((20..=26).contains(&wrong), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 403 || *s == 429), "{statuses:?}");
    // Held back now even with the right token: the address has spent its allowance.
    let held = guesser.post(&chapter, &json!({"chapter": 1}), Some(&class.teacher_token));
    assert_eq!((held.status, held.header("retry-after")), (429, Some("5")), "{}", held.text());
    // The teacher key for new classes too; a request with no key guesses nothing and is only
    // refused.
    let other = Client::new(server.addr, loopback(0, 4));
    let keys: Vec<u16> =
        (0..30).map(|i| other.post("/api/classes", &json!({}), Some(&format!("{i:032x}"))).status).collect();
    assert!(keys.iter().filter(|s| **s == 429).count() >= 4, "{keys:?}");
    let keyless = Client::new(server.addr, loopback(0, 5));
    assert!((0..30).all(|_| keyless.post("/api/classes", &json!({}), None).status == 403));
    // Others are untouched.
    let set = json!({"chapter": 1, "question": {"kind": "number"}});
    assert_eq!(teacher.post(&chapter, &set, Some(&class.teacher_token)).status, 200);
    let student = Client::new(server.addr, loopback(0, 3));
    assert_eq!(student.get(&format!("/api/classes/{}", class.code), None).status, 200);
}

/// `Origin` must match the page's scheme, host and port: `evil://127.0.0.1:PORT` is another
/// site, not this one.
#[test]
fn an_origin_of_another_scheme_is_another_site() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let port = server.addr.port();
    let host = format!("127.0.0.1:{port}");
    let ask = |origin: &str| {
        let headers = [("Host", host.as_str()), ("Origin", origin), ("Content-Type", "application/json")];
        raw_http::request(server.addr, loopback(0, 1), "POST", "/api/classes", &headers, b"{}")
            .expect("an answer")
            .status
    };
    for other in [
        format!("evil://127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        format!("http://127.0.0.1:{port}/x"),
        "null".to_string(),
    ] {
        assert_eq!(ask(&other), 403, "{other}");
    }
    assert_eq!(ask(&format!("http://127.0.0.1:{port}")), 201);
}

/// The names that got through issue 40's rules are refused over HTTP (422): format
/// characters, line and paragraph separators, private use, blank marks, five stacked accents.
#[test]
fn names_that_draw_nothing_or_break_lines_are_refused() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let class = create(&Client::new(server.addr, loopback(0, 1)));
    let join = format!("/api/classes/{}/join", class.code);
    for (i, name) in [
        "Ada\u{FFF9}x\u{FFFA}y\u{FFFB}",
        "Ada\u{13430}",
        "Ada\u{16FE4}",
        "Ada\u{1BC9D}",
        "\u{0600}Ada",
        "Ada\u{2028}Bob",
        "Ada\u{2029}Bob",
        "Ada\u{E000}",
        "Ada\u{F0000}",
        "a\u{301}\u{302}\u{303}\u{304}\u{305}da",
    ]
    .into_iter()
    .enumerate()
    {
        let student = Client::new(server.addr, loopback(1, 10 + i as u8));
        let r = student.post(&join, &json!({ "name": name }), None);
        assert_eq!(r.status, 422, "{name:?}: {}", r.text());
    }
    let student = Client::new(server.addr, loopback(1, 99));
    assert_eq!(student.post(&join, &json!({ "name": "Nguyễn Thị Minh Khai" }), None).status, 201);
}

/// The database, its write-ahead log and shared memory deleted while the server runs: what was
/// saved before is kept, and every write after is refused with 503 and its reason, never
/// acknowledged as saved (it would have been lost at the next restart).
#[test]
fn a_vanished_database_acknowledges_nothing() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    let server = spawn(&db, None);
    let class = create(&Client::new(server.addr, loopback(0, 1)));
    let join = format!("/api/classes/{}/join", class.code);
    assert_eq!(Client::new(server.addr, loopback(1, 1)).post(&join, &json!({}), None).status, 201);
    for suffix in ["", "-wal", "-shm"] {
        let mut file = db.as_os_str().to_owned();
        file.push(suffix);
        std::fs::remove_file(&file).expect("the file is there to delete");
    }
    let refused = Client::new(server.addr, loopback(1, 2)).post(&join, &json!({}), None);
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.text().contains("removed or replaced"), "{}", refused.text());
    let again = Client::new(server.addr, loopback(0, 1)).post("/api/classes", &json!({}), None);
    assert_eq!(again.status, 503, "{}", again.text());
}

/// A database that cannot be written (here: a process that may not grow any file, as on a full
/// disk) refuses to start, with the path and the reason, instead of starting and failing every
/// write with 503. (This held before issue 56 too: SQLite cannot size its shared-memory file.
/// The read-only file below is what got through.)
#[test]
fn a_database_that_cannot_be_written_refuses_to_start() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    // A database closed cleanly: no write-ahead log left to recover, so only a write at start
    // finds that nothing can be written.
    drop(oomlab::serve::store::SqliteStore::open(&db).expect("a database"));
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    assert!(!std::path::Path::new(&wal).exists(), "closed cleanly");
    let mut command = std::process::Command::new(spawn::binary());
    command.args(["serve", "--bind", "127.0.0.1", "--port", "0", "--db"]).arg(&db);
    // SAFETY: setrlimit and signal are async-signal-safe and touch only the child.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 0, rlim_max: libc::RLIM_INFINITY };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command.output().expect("oomlab serve runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {}", String::from_utf8_lossy(&out.stdout));
    assert!(said.contains(&format!("cannot open the class database {}", db.display())), "{said}");
}

/// A database file the server may open but not write (read-only to it: mode 0400 for a user,
/// the immutable attribute for root, whom modes do not stop) refuses to start, with its path
/// and reason. (SQLite opens such a file read-only without a word; before, the server started
/// and answered every write with 503.) Where neither can be set (root on a filesystem without
/// attributes), this says so and checks nothing more.
#[test]
fn a_read_only_database_refuses_to_start() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("c.sqlite");
    drop(oomlab::serve::store::SqliteStore::open(&db).expect("a database"));
    let root = unsafe { libc::geteuid() } == 0;
    let locked = if root {
        std::process::Command::new("chattr").arg("+i").arg(&db).status().is_ok_and(|s| s.success())
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o400)).is_ok()
    };
    if !locked || std::fs::OpenOptions::new().write(true).open(&db).is_ok() {
        eprintln!("skipped: this machine cannot make {} read-only to this user", db.display());
        return;
    }
    let mut child = std::process::Command::new(spawn::binary())
        .args(["serve", "--bind", "127.0.0.1", "--port", "0", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("oomlab serve runs");
    // A server that starts runs until stopped: given 5 s, it is killed and the test fails.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let started = child.try_wait().ok().flatten().is_none();
    if started {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("its output");
    if root {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&db).status();
    }
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!started && !out.status.success(), "it started: {}", String::from_utf8_lossy(&out.stdout));
    assert!(said.contains(&format!("cannot open the class database {}", db.display())), "{said}");
    assert!(said.contains("cannot be written"), "{said}");
}

/// The status line a server sends first on `s`, or `None` when it closes or says nothing
/// within 2 s.
fn status_of(s: &mut std::net::TcpStream) -> Option<u16> {
    use std::io::Read;
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).split(' ').nth(1)?.parse().ok()
}

/// One address holds no more than its share of the connections, however it holds them: slow
/// bodies on the join and create routes (1 byte of a 100-byte body each, reopened as fast as
/// they close) under a small descriptor limit. Real students from other addresses all get in
/// meanwhile. Before, the slow bodies took the whole table and the students got 503.
#[test]
fn slow_bodies_from_one_address_leave_room_for_the_class() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), Some((256, 256)));
    let class = create(&Client::new(server.addr, loopback(0, 1)));
    let addr = server.addr;
    let join = format!("/api/classes/{}/join", class.code);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacking = stop.clone();
    let path = join.clone();
    let attacker = std::thread::spawn(move || {
        let mut held = Vec::new();
        let mut opened = 0usize;
        while !attacking.load(std::sync::atomic::Ordering::Relaxed) && opened < 3000 {
            let Ok(mut s) = raw_http::connect(addr, loopback(0, 2), Duration::from_millis(500)) else { continue };
            let route = if opened.is_multiple_of(2) { path.as_str() } else { "/api/classes" };
            let head = format!(
                "POST {route} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            );
            if s.write_all(head.as_bytes()).is_ok() {
                held.push(s);
            }
            opened += 1;
            // Those the server closed make room for the next (as the attack reopens them).
            if held.len() > 400 {
                held.drain(..200);
            }
        }
        opened
    });
    std::thread::sleep(Duration::from_millis(1500));
    let began = Instant::now();
    let statuses: Vec<u16> =
        (0..20).map(|i| Client::new(server.addr, loopback(3, 1 + i)).post(&join, &json!({}), None).status).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = attacker.join().expect("the attacker's thread");
    assert!(opened > 300, "the attack opened only {opened} connections");
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?} while {opened} slow bodies came from one address");
    assert!(began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
}

/// Live streams are capped per address: one address's many streams take 4, and a student's
/// from another address still gets one. Before, one address took every slot of the class.
#[test]
fn one_address_takes_a_few_live_streams_not_all() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let class = create(&Client::new(server.addr, loopback(0, 1)));
    let follow = |from| {
        let mut s = raw_http::connect(server.addr, from, std::time::Duration::from_secs(2)).expect("a connection");
        let ask = format!("GET /api/classes/{}/events HTTP/1.1\r\nHost: {}\r\n\r\n", class.code, server.addr);
        s.write_all(ask.as_bytes()).expect("sent");
        let status = status_of(&mut s);
        (status, s)
    };
    let mut held = Vec::new();
    let mut streams = 0;
    for _ in 0..30 {
        let (status, s) = follow(loopback(0, 2));
        streams += usize::from(status == Some(200));
        held.push(s);
    }
    assert_eq!(streams, oomlab::serve::http::STREAMS_PER_ADDRESS, "streams one address got of 30");
    let (status, _student) = follow(loopback(0, 3));
    assert_eq!(status, Some(200), "a student's stream from another address");
}

/// A class strangers cannot fill: 17 addresses × 60 joins (each address within its own
/// allowance) get no more than the class's own allowance in, and a real student a moment later
/// still joins. Before, they filled a class of 1,000 in a fraction of a second and the next
/// real student got 409.
#[test]
fn many_addresses_cannot_fill_a_class_at_once() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let class = create(&Client::new(server.addr, loopback(0, 1)));
    let join = format!("/api/classes/{}/join", class.code);
    let threads: Vec<_> = (0..17u8)
        .map(|a| {
            let (addr, path) = (server.addr, join.clone());
            std::thread::spawn(move || {
                let c = Client::new(addr, loopback(2, 1 + a));
                (0..60).filter(|_| c.post(&path, &json!({}), None).status == 201).count()
            })
        })
        .collect();
    let joined: usize = threads.into_iter().map(|t| t.join().expect("a thread")).sum();
    assert!(joined <= 260, "{joined} of 1,020 strangers' joins got in");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let student = Client::new(server.addr, loopback(3, 1));
    let r = student.post(&join, &json!({}), None);
    assert_eq!(r.status, 201, "a real student after the flood: {}", r.text());
}

/// With an expected size, the waiting room is bounded (twice the size, at least 10), joins past
/// the size raise the flood warning however slowly they come, and "remove everyone waiting"
/// locks the class in the same step.
#[test]
fn a_waiting_room_is_bounded_flagged_and_emptied_with_a_lock() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = spawn(&dir.path().join("c.sqlite"), None);
    let teacher = Client::new(server.addr, loopback(0, 1));
    let r = teacher.post("/api/classes", &json!({ "expected": 2 }), None);
    assert_eq!(r.status, 201, "{}", r.text());
    let class: Created = r.json();
    let join = format!("/api/classes/{}/join", class.code);
    let state = || teacher.get(&format!("/api/classes/{}", class.code), None).json::<oomlab::class::ClassState>();
    // Two expected, then one more, slowly: past the size, the warning is up.
    for b in 1..=3 {
        assert_eq!(Client::new(server.addr, loopback(2, b)).post(&join, &json!({}), None).status, 201);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let s = state();
    assert_eq!((s.students, s.waiting), (2, 1));
    assert!(s.joins_recent < oomlab::class::FLOOD_JOINS && s.join_flood, "{s:?}");
    // The room holds 10 (twice 2 is less): 9 more wait, the next is refused.
    let more: Vec<u16> =
        (4..=14).map(|b| Client::new(server.addr, loopback(2, b)).post(&join, &json!({}), None).status).collect();
    assert_eq!(more.iter().filter(|s| **s == 201).count(), 9, "{more:?}");
    assert_eq!(more.last(), Some(&409), "{more:?}");
    // Removed and locked in one step.
    let pick = json!({ "all_waiting": true, "lock": true });
    let r = teacher.post(&format!("/api/classes/{}/remove", class.code), &pick, Some(&class.teacher_token));
    assert_eq!(r.status, 200, "{}", r.text());
    let s = state();
    assert!(s.locked && s.waiting == 0 && s.students == 2 && !s.join_flood, "{s:?}");
    assert_eq!(Client::new(server.addr, loopback(2, 20)).post(&join, &json!({}), None).status, 423);
}
