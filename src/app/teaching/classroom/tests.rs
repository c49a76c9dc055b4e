use super::super::lessons::{Guess, Verdict, judge};
use super::projector::{self, choice_counts, histogram, quantile, split};
use super::*;

fn facts_for(index: usize) -> Facts {
    let mut settings = Settings::default();
    (chapters()[index].setup)(&mut settings);
    Facts::new(&settings, 58).expect("a chapter's setup has a plan")
}

/// Every chapter asks the class its own question, in both languages, with labels for its
/// options; the text a student reads before the reveal does not hold the answer; and the answer
/// sent at the reveal is the one the lesson judges by.
#[test]
fn each_chapter_asks_the_class_without_giving_the_answer_away() {
    let en = Catalog::new(Lang::En);
    for (index, chapter) in chapters().iter().enumerate() {
        let facts = facts_for(index);
        let set = chapter_question(index, &facts).expect("a question");
        assert_eq!(set.chapter as usize, index + 1);
        let prompt = set.prompt.as_ref().expect("words for the students");
        assert_eq!(prompt.check(&set.question), Ok(()), "chapter {}", chapter.id);
        assert!(prompt.question.keys().eq(["en", "zh"].iter()), "both languages");
        let answer = chapter_answer(index, &facts).expect("an answer");
        assert_eq!(set.question.check_answer(&answer), Ok(()), "chapter {}", chapter.id);
        let question_en = &prompt.question["en"];
        match (&answer, judge(chapter, &facts, &Guess::Ratio(1.0)).or(judge(chapter, &facts, &Guess::Choice(None)))) {
            (Answer::Number(x), Some(Verdict::Ratio { answer, .. })) => {
                assert_eq!(*x, answer);
                for shown in [format!("{x:.2}"), format!("{x:.1}×")] {
                    assert!(!question_en.contains(&shown), "chapter {}: {question_en:?} holds {shown}", chapter.id);
                }
            }
            (Answer::Choice(key), Some(Verdict::Choice { answer, .. })) => {
                let Question::Choice { options, .. } = &chapter.question else { panic!("a choice chapter") };
                assert_eq!(key, options[answer]);
                let label = en.text(key);
                assert!(!question_en.contains(&label), "chapter {}: {question_en:?} names {label}", chapter.id);
            }
            other => panic!("chapter {}: {other:?}", chapter.id),
        }
    }
}

#[test]
fn histograms_count_every_guess_and_span_the_answer() {
    let guesses = [1.5, 1.8, 2.0, 2.0, 2.1, 3.5, 0.9];
    let bins = histogram(&guesses, Some(4.0));
    assert_eq!(bins.iter().map(|b| b.2).sum::<u32>(), guesses.len() as u32);
    let (first, last) = (bins[0], bins[bins.len() - 1]);
    assert!(first.0 - first.1 / 2.0 <= 0.9 + 1e-9 && last.0 + last.1 / 2.0 >= 4.0 - 1e-9, "{bins:?}");
    // Round bins: a width of 1, 2, 2.5 or 5 × 10ⁿ, edges on its multiples.
    let width = first.1;
    let mantissa = width / 10f64.powf(width.log10().floor());
    assert!([1.0, 2.0, 2.5, 5.0].iter().any(|m| (m - mantissa).abs() < 1e-9), "{bins:?}");
    let edge = (first.0 - width / 2.0) / width;
    assert!((edge - edge.round()).abs() < 1e-9, "{bins:?}");
    assert!(bins.iter().all(|b| (b.1 - width).abs() < 1e-12));
    assert_eq!(histogram(&[1.0, 1.5], None).iter().map(|b| b.1).next(), Some(0.2), "0.5 / 4 → 0.2");
    // A guess on an edge is in the bin it starts, whatever the rounding: 2.0 in [2.0, 2.2).
    let edges = histogram(&[1.5, 2.0, 2.0], Some(1.88));
    let two = edges.iter().find(|b| b.2 == 2).expect("the bin of the two 2.0s");
    assert!((two.0 - two.1 / 2.0 - 2.0).abs() < 1e-9, "{edges:?}");
    // Absurd guesses are counted too, and draw nothing absurd.
    let wild = histogram(&[-f64::MAX, f64::MAX, 2.0], None);
    assert_eq!(wild.iter().map(|b| b.2).sum::<u32>(), 3);
    assert!(wild.iter().all(|b| b.0.is_finite() && b.1.is_finite() && b.1 > 0.0), "{wild:?}");
    // One guess, or all the same: one visible bar among the bins.
    let same = histogram(&[2.0, 2.0], None);
    assert_eq!(same.iter().map(|b| b.2).sum::<u32>(), 2);
    assert!(same.iter().all(|b| b.1 > 0.0));
    assert!(histogram(&[], None).is_empty());
    assert_eq!(histogram(&[f64::NAN], Some(1.0)).iter().map(|b| b.2).sum::<u32>(), 0);
    let options = vec!["a".to_string(), "b".to_string()];
    let answers = [Answer::Choice("b".into()), Answer::Choice("b".into()), Answer::Number(1.0)];
    assert_eq!(choice_counts(&options, &answers), vec![0, 2]);
}

/// The teacher's client against a real class server: the class starts, follows the lesson's
/// chapter, receives the students' guesses live (Server-Sent Events, then the results), sends
/// the true answer once the lesson is revealed and its step done, and downloads the CSV.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn the_teacher_follows_a_real_class() {
    use crate::serve::{self, Config};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = serve::start(&Config::loopback(dir.path().join("c.sqlite"))).expect("the server starts");
    let mut room = Classroom { server: format!("http://{}", server.addr), ..Classroom::default() };
    let wait = |room: &mut Classroom, what: &str, done: &dyn Fn(&Classroom) -> bool| {
        let start = std::time::Instant::now();
        while !done(room) {
            assert!(start.elapsed().as_secs() < 20, "waited too long for {what}: {:?}", room.failure);
            std::thread::sleep(std::time::Duration::from_millis(20));
            room.poll(None);
        }
    };
    room.start(None);
    wait(&mut room, "the class", &|r| r.class().is_some() && r.state.is_some());
    let class = room.class().cloned().expect("live");
    assert!(class.join_url.ends_with(&format!("/join/{}", class.code)) && !class.qr.is_empty());

    // The lesson opens chapter 2 (a number): its question reaches the server.
    let index = 1;
    let mut settings = Settings::default();
    (chapters()[index].setup)(&mut settings);
    let mut lesson =
        LessonState { chapter: index, guess: Guess::Ratio(1.0), verdict: None, planned: None, from_step: false };
    room.follow_lesson(Some(&lesson), &settings, 58, true, None);
    wait(&mut room, "the chapter", &|r| r.state.as_ref().is_some_and(|s| s.chapter == Some(2)));
    // The setting in words goes with the question; no explanation before the reveal.
    let setting = room.state.as_ref().and_then(|s| s.prompt.as_ref()).map(|p| p.setting.clone()).unwrap_or_default();
    assert!(setting["en"].contains("batch 16") && setting["en"].contains("sequence 64"), "{setting:?}");
    assert!(setting["zh"].contains("batch 16"), "{setting:?}");
    assert!(room.state.as_ref().is_some_and(|s| s.explanation.is_empty()));

    // Two students guess, as a client from before rounds does (no round: the first); the teacher
    // sees both guesses, and no names.
    let base = format!("{}/api/classes/{}", room.server, class.code);
    let post = |path: &str, body: &serde_json::Value| {
        let request = ehttp::Request::post_json(format!("{base}/{path}"), body);
        ehttp::fetch_blocking(&request.expect("json")).expect("an answer")
    };
    let mut students = Vec::new();
    for (name, guess) in [("Ada", 1.5), ("Grace", 2.0)] {
        let joined: crate::class::Joined = post("join", &serde_json::json!({ "name": name })).json().expect("joined");
        let body = serde_json::json!({ "student": joined.student, "chapter": 2, "answer": guess });
        assert_eq!(post("answers", &body).status, 200);
        students.push(joined.student);
    }
    wait(&mut room, "the guesses", &|r| r.answers.len() == 2);
    let mut guesses: Vec<String> = room.round_answers(1).iter().map(Answer::text).collect();
    guesses.sort();
    assert_eq!(guesses, ["1.5", "2"]);

    // The second round: the first round's answers stay and close; each student votes again.
    room.second_round(None);
    wait(&mut room, "round 2", &|r| r.state.as_ref().is_some_and(|s| s.round == 2 && s.answered == 0));
    let late = serde_json::json!({ "student": students[0], "chapter": 2, "answer": 9.0 });
    assert_eq!(post("answers", &late).status, 409, "the first round is over");
    for (student, guess) in students.iter().zip([3.0, 3.5]) {
        let body =
            crate::class::AnswerBody { student: student.clone(), chapter: 2, answer: Answer::Number(guess), round: 2 };
        assert_eq!(post("answers", &serde_json::to_value(&body).expect("json")).status, 200);
    }
    wait(&mut room, "both rounds", &|r| r.answers.len() == 4);
    let texts = |round| {
        let mut v: Vec<String> = room.round_answers(round).iter().map(Answer::text).collect();
        v.sort();
        v
    };
    assert_eq!((texts(1), texts(2)), (vec!["1.5".to_string(), "2".into()], vec!["3".to_string(), "3.5".into()]));
    let line = projector::guesses_line(room.state.as_ref().expect("state"), &room.answers);
    assert!(line.starts_with("chapter Some(2) round 2: 2 answers") && line.contains("round 1: 2 answers"), "{line}");

    // Revealed, but the step still running: nothing sent yet. Once it ran: the true answer.
    let facts = Facts::new(&settings, 58).expect("facts");
    lesson.verdict = judge(&chapters()[index], &facts, &lesson.guess);
    room.follow_lesson(Some(&lesson), &settings, 58, false, None);
    room.poll(None);
    assert_eq!(room.state.as_ref().and_then(|s| s.revealed.clone()), None);
    room.follow_lesson(Some(&lesson), &settings, 58, true, None);
    wait(&mut room, "the reveal", &|r| r.state.as_ref().is_some_and(|s| s.revealed.is_some()));
    assert_eq!(room.state.as_ref().and_then(|s| s.revealed.clone()), chapter_answer(index, &facts));
    // With the answer, the chapter's explanation in both languages.
    let why = room.state.as_ref().map(|s| s.explanation.clone()).unwrap_or_default();
    assert!(why["en"].starts_with("The peak goes from") && why.contains_key("zh"), "{why:?}");

    room.download_csv(None);
    wait(&mut room, "the CSV", &|r| r.csv.is_some());
    let csv = String::from_utf8(room.csv.take().unwrap_or_default()).unwrap_or_default();
    assert!(csv.starts_with("\u{feff}chapter,round,student,name,answer,at_ms\r\n"), "{csv}");
    assert!(csv.contains("\"2\",\"1\",") && csv.contains("\"Ada\",\"1.5\""), "{csv}");
    assert!(csv.contains("\"2\",\"2\",") && csv.contains("\"Ada\",\"3\""), "{csv}");

    room.close(None);
    wait(&mut room, "the end", &|r| r.state.as_ref().is_some_and(|s| s.closed));
    server.stop();
}

#[test]
fn failures_read_as_the_catalogs_words() {
    let t = Catalog::new(Lang::En);
    let mut room = Classroom { server: "http://10.0.0.9:8080".into(), ..Classroom::default() };
    room.failure = Some(Failure::Unreachable);
    assert!(room.failure_text(&t).is_some_and(|s| s.contains("http://10.0.0.9:8080") && s.contains("oomlab serve")));
    // Without a class, a 404 means no class server there (a static copy of the web app).
    room.failure = Some(Failure::Refused(404, "no such API route".into()));
    assert_eq!(
        room.failure_text(&t),
        room.failure.clone().map(|_| t.format("class-unreachable", &[("server", "http://10.0.0.9:8080".into())]))
    );
    for (status, key) in [
        // No class yet: the server refused to start one for this computer.
        (403, "class-key-needed"),
        (409, "class-moved-on"),
        (422, "class-invalid"),
        (429, "class-busy"),
        (503, "class-busy"),
    ] {
        room.failure = Some(Failure::Refused(status, "English reason".into()));
        let text = room.failure_text(&Catalog::new(Lang::Zh)).unwrap_or_default();
        assert_eq!(text, Catalog::new(Lang::Zh).text(key), "{status}");
        assert!(!text.contains("English reason"), "the server's English never reaches the screen");
    }
    // The server's database gone: not "try again", but what to do.
    let gone =
        format!("the class database x was removed or replaced (x is gone): {}; restart", crate::class::NOT_SAVED);
    room.failure = Some(Failure::Refused(503, gone));
    assert_eq!(room.failure_text(&Catalog::new(Lang::Zh)), Some(Catalog::new(Lang::Zh).text("class-not-saved")));
    // With a class, a 403 is the class's token refused.
    room.phase = Phase::Live(Box::new(Created {
        code: "ABCDEF".into(),
        teacher_token: "t".into(),
        expires_at: 0,
        join_url: String::new(),
        qr: Vec::new(),
    }));
    room.failure = Some(Failure::Refused(403, "English reason".into()));
    assert_eq!(room.failure_text(&t), Some(t.text("class-not-yours")));
}

/// The projector counts in words a class reads aloud: "1 student", "30 students".
#[test]
fn the_counts_agree_with_their_numbers() {
    let t = Catalog::new(Lang::En);
    let joined = |students: u32| {
        t.format("class-joined", &[("students", f64::from(students).into()), ("answered", f64::from(0u32).into())])
    };
    assert_eq!(joined(1), "1 student joined · 0 answered this question");
    assert_eq!(joined(30), "30 students joined · 0 answered this question");
}

/// The key in a teacher's link starts the class and leaves the address.
#[test]
fn the_links_key_is_taken_and_leaves_the_address() {
    let mut room = Classroom::default();
    assert_eq!(room.take_key_from_link("#teach&lesson=2"), None);
    assert_eq!(room.start.key, "");
    let rest = room.take_key_from_link("#teach&key=0123abcd&lesson=2");
    assert_eq!(rest.as_deref(), Some("#teach&lesson=2"));
    assert_eq!(room.start.key, "0123abcd");
}

/// A class is split (worth a second round) when the commonest choice holds 30–70 %, or when the
/// middle half of the number guesses spans more than a factor of 2.
#[test]
fn a_split_class_is_told_apart_from_one_that_agrees() {
    let options: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let choice = Asked::Choice { options };
    let picks = |s: &str| s.chars().map(|c| Answer::Choice(c.to_string())).collect::<Vec<_>>();
    assert!(split(&choice, &picks("aabb")), "50 %");
    assert!(split(&choice, &picks("aaabbbbccc")), "40 %");
    assert!(!split(&choice, &picks("aaaaaaaabc")), "80 % agree");
    assert!(split(&choice, &picks("abc")), "a third each");
    assert!(!split(&choice, &picks("a")), "one answer");
    let numbers = |v: &[f64]| v.iter().map(|x| Answer::Number(*x)).collect::<Vec<_>>();
    assert!(!split(&Asked::Number, &numbers(&[2.0, 2.2, 2.5, 3.0, 3.5])), "within × 2");
    assert!(split(&Asked::Number, &numbers(&[1.0, 1.5, 4.0, 8.0, 10.0])), "× 5");
    assert!(!split(&Asked::Number, &numbers(&[1.0, 10.0, 100.0])), "three guesses");
    assert!(split(&Asked::Number, &numbers(&[-1.0, 0.0, 2.0, 3.0])), "reaching zero");
    assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), 2.0);
    assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
    assert!(quantile(&[], 0.5).is_nan());
}

/// A join address that names the teacher's machine to itself is said to be unreachable.
#[test]
fn a_loopback_join_address_is_told_apart() {
    use super::projector::loopback;
    for url in [
        "http://localhost:8080/join/ABCDEF",
        "http://127.0.0.1:8080/join",
        "http://[::1]:8080/join",
        "http://0.0.0.0/join",
    ] {
        assert!(loopback(url), "{url}");
    }
    for url in
        ["http://192.168.1.20:8080/join/ABCDEF", "https://class.school.example/join", "http://[fe80::1]:8080/join"]
    {
        assert!(!loopback(url), "{url}");
    }
}
