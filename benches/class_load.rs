//! The class server under a whole class (a benchmark, not a test): 400 students join, then all
//! answer within about a second, each over its own connection from an address of its own
//! (127.0.1.1, 127.0.1.2, …), as phones on a school network would. Prints the answer latency
//! (p50, p99, max) and requires every answer counted and a p99 under 500 ms.
//!   cargo bench --bench class_load            # 400 students, release build
//! Under `cargo test --all-targets` it runs a class of 20 as a smoke test (CI's load test with
//! 100 students is in tests/serve.rs).

use std::time::{Duration, Instant};

use oomlab::class::{AnswerBody, Created, Joined, Question, Results, SetChapter};
use oomlab::serve::{self, Config};

#[path = "../tests/support/raw_http.rs"]
mod raw_http;

fn post<T: serde::Serialize>(url: String, body: &T, token: Option<&str>) -> ehttp::Response {
    let mut r = ehttp::Request::post_json(url, body).expect("serialisable");
    if let Some(t) = token {
        r.headers.insert("Authorization", format!("Bearer {t}"));
    }
    ehttp::fetch_blocking(&r).expect("the server answers")
}

fn main() {
    let students: u32 = if std::env::args().any(|a| a == "--bench") { 400 } else { 20 };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = Config::loopback(dir.path().join("class.sqlite"));
    // The whole class joins back to back, faster than a real one could: the class's own join
    // allowance (200 at once, then 4 a second) would make the last 200 wait, and the joins are
    // not what this measures.
    config.limits.class_joins = oomlab::serve::limiter::Rate { burst: students, ..config.limits.class_joins };
    let server = serve::start(&config).expect("the server starts");
    let base = format!("http://{}", server.addr);
    let class: Created = post(format!("{base}/api/classes"), &serde_json::json!({}), None).json().expect("created");
    let token = Some(class.teacher_token.as_str());
    let set = SetChapter { chapter: 1, question: Question::Number, prompt: None };
    assert_eq!(post(format!("{base}/api/classes/{}/chapter", class.code), &set, token).status, 200);
    let phones: Vec<raw_http::Client> =
        (0..students as usize).map(|i| raw_http::Client::new(server.addr, raw_http::phone(i))).collect();
    let ids: Vec<String> = phones
        .iter()
        .map(|phone| {
            let r = phone.post(&format!("/api/classes/{}/join", class.code), &serde_json::json!({}), None);
            r.json::<Joined>().student
        })
        .collect();
    // Everyone answers at once: each thread waits for the same instant, then spreads over a second.
    let go = Instant::now() + Duration::from_millis(300);
    let threads: Vec<_> = ids
        .into_iter()
        .zip(phones)
        .enumerate()
        .map(|(i, (student, phone))| {
            let path = format!("/api/classes/{}/answers", class.code);
            std::thread::spawn(move || {
                let at = go + Duration::from_micros(1_000_000 * i as u64 / u64::from(students));
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                let t = Instant::now();
                let body =
                    AnswerBody { student, chapter: 1, answer: oomlab::class::Answer::Number(i as f64), round: 1 };
                let body = serde_json::to_value(&body).expect("serialisable");
                let status = phone.post(&path, &body, None).status;
                (status, t.elapsed())
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in threads {
        let (status, took) = t.join().expect("a student's thread");
        assert_eq!(status, 200, "an answer was refused");
        latencies.push(took);
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1];
    let results: Results = ehttp::fetch_blocking(&{
        let mut r = ehttp::Request::get(format!("{base}/api/classes/{}/results?chapter=1", class.code));
        r.headers.insert("Authorization", format!("Bearer {}", class.teacher_token));
        r
    })
    .expect("results")
    .json()
    .expect("results JSON");
    println!(
        "{students} students answering within a second: {} counted; latency p50 {:?}, p99 {:?}, max {:?}",
        results.count,
        at(0.5),
        at(0.99),
        at(1.0)
    );
    assert_eq!(results.count, students, "every answer counted");
    assert!(at(0.99) < Duration::from_millis(500), "p99 {:?} over 500 ms", at(0.99));
    server.stop();
}
