//! Teacher links: a link locks and hides controls, opens a chapter, and survives a
//! round trip through "Share this setup"; locked values stay pinned whatever tries to change
//! them; an unknown control name is ignored with a notice.

#[path = "support/focus.rs"]
mod support_focus;
#[path = "support/xdg.rs"]
mod support_xdg;
use support_focus::tab_to;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::app::teaching::{Control, Restrictions};

#[test]
fn a_teacher_link_locks_hides_and_opens_a_chapter() {
    xdg();
    let mut harness = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    harness.state_mut().apply_teacher_link("#lock=batch,budget&hide=checkpointing,precision,nonsense&lesson=2");
    harness.run();
    // The chapter it names is open (counted from 1).
    assert_eq!(harness.state().teaching.lesson().map(|l| l.chapter), Some(1));
    // Hidden: not drawn. Locked: drawn, disabled.
    assert!(harness.query_by_label("checkpointing").is_none() && harness.query_by_label("precision").is_none());
    harness.get_by_label("attention");
    let disabled = |label: &str| harness.query_all_by_label_contains(label).any(|n| n.accesskit_node().is_disabled());
    assert!(disabled("batch") && disabled("32 MiB"), "the batch and budget controls are disabled");
    assert!(!disabled("sequence"), "an unlocked control stays enabled");
    // The unknown name: a notice, nothing else.
    harness.get_by_label_contains("The link names controls oomlab does not know (nonsense)");
    // Pinned: neither a key nor the OOM panel changes a locked value.
    let batch = harness.state().settings().batch;
    harness.key_press(egui::Key::B);
    harness.run();
    assert_eq!(harness.state().settings().batch, batch, "B does not change a locked batch");
    harness.state_mut().edit_settings(|s| s.batch = 64);
    harness.run();
    assert_eq!(harness.state().settings().batch, batch, "the batch is pinned");
}

#[test]
fn share_this_setup_round_trips() {
    xdg();
    let mut harness = Harness::builder().with_size([1400.0, 900.0]).build_ui_state(
        |ui, app: &mut OomlabApp| app.show(ui),
        OomlabApp::headless(Settings { batch: 48, ..Settings::default() }),
    );
    harness.run();
    harness.state_mut().open_chapter(3);
    harness.run();
    harness.get_by_label("Share this setup").click();
    harness.run();
    harness.get_by_label("Tick what students may not change (lock) or should not see (hide), then copy the link. It also carries the settings, the language and the open lesson chapter or challenge.");
    let link = harness.state().teacher_link(&[Control::Batch, Control::Model], &[Control::Compare]);
    assert!(
        link.contains("&lesson=4") && link.contains("&lock=batch,model") && link.contains("&hide=compare"),
        "{link}"
    );
    let (settings, notice) = Settings::from_url_hash(&link, 58);
    assert_eq!((settings, notice), (harness.state().settings().clone(), None));
    let (r, notice) = Restrictions::from_url_hash(&link);
    assert_eq!((r.locked, r.hidden, notice), (vec![Control::Batch, Control::Model], vec![Control::Compare], None));
    // A fresh app opened with the link shows the same.
    let mut student = OomlabApp::headless(settings_from(&link));
    student.apply_teacher_link(&link);
    assert_eq!(student.teaching.restrictions().locked, vec![Control::Batch, Control::Model]);
    assert_eq!(student.teaching.lesson().map(|l| l.chapter), Some(3));
}

fn settings_from(link: &str) -> Settings {
    Settings::from_url_hash(link, 58).0
}

/// The page's own address follows the settings and keeps what the teacher's link locks and
/// hides (and the open chapter): a student who reloads gets the same restrictions back.
#[test]
fn the_pages_link_keeps_a_teachers_locks() {
    let mut app = OomlabApp::headless(Settings::default());
    app.apply_teacher_link("#lock=batch&hide=precision&lesson=3");
    app.edit_settings(|s| s.seq = 32);
    let link = app.page_link();
    assert!(link.contains("&lock=batch") && link.contains("&hide=precision"), "{link}");
    assert!(link.contains("&lesson=3") && link.contains("&lang=en"), "{link}");
    let (r, notice) = Restrictions::from_url_hash(&link);
    assert_eq!((r.locked, r.hidden, notice), (vec![Control::Batch], vec![Control::Precision], None));
    assert_eq!(Settings::from_url_hash(&link, 58).0.seq, 32, "the settings as they are now");
    // Without a teacher's link, the address holds the settings and the language only.
    let plain = OomlabApp::headless(Settings::default()).page_link();
    assert!(!plain.contains("lock=") && !plain.contains("lesson="), "{plain}");
}

fn snapshot<S>(harness: &mut Harness<'_, S>, name: &str) {
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options(name, &options);
}

/// A snapshot of the class panel with a fixed class code and address (and so QR code): the
/// server draws a random code and the test's port is free, so neither repeats from run to run.
/// The real class comes back after the frame.
fn snapshot_class(harness: &mut Harness<'_, OomlabApp>, name: &str) {
    use oomlab::app::teaching::Phase;
    let real = harness.state().classroom.class().cloned().expect("a live class");
    let url = "http://192.0.2.10:8080/join/ABC234";
    let shown = oomlab::class::Created {
        code: "ABC234".into(),
        join_url: url.into(),
        qr: oomlab::serve::qr_rows(url),
        ..real.clone()
    };
    harness.state_mut().classroom.phase = Phase::Live(Box::new(shown));
    harness.run_steps(2);
    snapshot(harness, name);
    harness.state_mut().classroom.phase = Phase::Live(Box::new(real));
    harness.run_steps(2);
}

/// A newcomer without a link gets three ways in, in both languages; each does what it says, and
/// Escape explores.
#[test]
fn the_welcome_offers_three_ways_in() {
    use oomlab::app::teaching::Way;
    use oomlab::i18n::{Catalog, Lang};
    xdg();
    // One harness per language: their snapshots' results are gathered and checked together.
    let mut results = egui_kittest::SnapshotResults::new();
    for lang in Lang::ALL {
        let mut app = OomlabApp::headless(Settings::default());
        app.set_lang(lang);
        app.teaching.show_welcome();
        let mut harness =
            Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
        harness.run();
        let t = Catalog::new(lang);
        for key in ["welcome-title", "welcome-lessons", "welcome-explore", "welcome-teach", "welcome-teach-note"] {
            harness.get_by_label(&t.text(key));
        }
        snapshot(&mut harness, &format!("welcome_{}", lang.code()));
        results.extend_harness(&mut harness);
    }
    results.unwrap();
    let t = Catalog::new(Lang::En);
    for (way, key) in
        [(Way::Lessons, "welcome-lessons"), (Way::Explore, "welcome-explore"), (Way::Teach, "welcome-teach")]
    {
        let mut app = OomlabApp::headless(Settings::default());
        app.teaching.show_welcome();
        let mut harness =
            Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
        harness.run();
        harness.get_by_label(&t.text(key)).click();
        harness.run();
        let app = harness.state();
        assert!(!app.teaching.welcome_showing() && app.teaching.welcomed(), "{way:?}: chosen and remembered");
        assert_eq!(app.teaching.lesson().is_some(), way != Way::Explore, "{way:?}: the lessons");
        assert_eq!(app.classroom.open, way == Way::Teach, "{way:?}: the class panel");
        assert!(harness.query_by_label(&t.text("welcome-title")).is_none(), "{way:?}: the welcome is gone");
    }
    let mut app = OomlabApp::headless(Settings::default());
    app.teaching.show_welcome();
    let mut harness =
        Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    harness.key_press(egui::Key::Escape);
    harness.run();
    assert!(
        !harness.state().teaching.welcome_showing() && harness.state().teaching.lesson().is_none(),
        "Escape explores"
    );
}

/// A class server on loopback, and the app on its Teach panel (`setup` first) with a class
/// being started: the server, the harness and the server's address.
fn teaching(
    dir: &tempfile::TempDir,
    size: [f32; 2],
    setup: impl FnOnce(&mut OomlabApp),
) -> (oomlab::serve::Server, Harness<'static, OomlabApp>, String) {
    use oomlab::serve::{self, Config};
    xdg();
    let server = serve::start(&Config::loopback(dir.path().join("c.sqlite"))).expect("the server starts");
    let base = format!("http://{}", server.addr);
    let mut app = OomlabApp::headless(Settings::default());
    app.classroom.server = base.clone();
    app.choose_way(oomlab::app::teaching::Way::Teach);
    setup(&mut app);
    let mut harness = Harness::builder().with_size(size).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    let start = oomlab::i18n::Catalog::new(oomlab::i18n::Lang::En).text("class-start");
    harness.get_by_label(&start).click();
    (server, harness, base)
}

/// Runs frames until `done` (at most 30 s), then a few more.
fn settle(harness: &mut Harness<'_, OomlabApp>, what: &str, done: &dyn Fn(&OomlabApp) -> bool) {
    let start = std::time::Instant::now();
    while !done(harness.state()) {
        assert!(start.elapsed().as_secs() < 30, "waited too long for {what}: {:?}", harness.state().classroom.failure);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Frames, not "until settled": the panel repaints while it waits on the server.
        harness.run_steps(2);
    }
    harness.run_steps(6);
}

/// The projector with a live class on a real server: the code, the join address and QR code,
/// the counts, the question, the guesses (never a name) and, after the lesson's reveal and its
/// real step, the true answer; in both languages.
#[test]
fn the_projector_shows_a_live_class() {
    use oomlab::class::{AnswerBody, Joined};
    use oomlab::i18n::{Catalog, Lang};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (server, mut harness, base) = teaching(&dir, [1500.0, 1000.0], |_| {});
    let en = Catalog::new(Lang::En);
    settle(&mut harness, "the class", &|a| a.classroom.state.as_ref().is_some_and(|s| s.chapter.is_some()));
    let class = harness.state().classroom.class().cloned().expect("a class");
    harness.get_by_label(&format!("Class code: {}", class.code));
    harness.get_by_label_contains(&class.join_url);
    // The welcome's way opened chapter 1: the class is on its question.
    let question = en.format("lesson-fill-question", &[]);
    harness.get_by_label(&format!("Question 1: {question}"));
    harness.state_mut().open_chapter(1);
    settle(&mut harness, "question 2", &|a| a.classroom.state.as_ref().is_some_and(|s| s.chapter == Some(2)));
    let post = |path: &str, body: serde_json::Value| {
        let url = format!("{base}/api/classes/{}/{path}", class.code);
        let request = ehttp::Request::post_json(url, &body).expect("a JSON request");
        ehttp::fetch_blocking(&request).expect("the server answers")
    };
    for (name, guess) in [("Ada Lovelace", 1.5), ("Grace Hopper", 2.0), ("Alan Turing", 2.0)] {
        let reply = post("join", serde_json::json!({ "name": name }));
        let joined: Joined = reply.json().unwrap_or_else(|e| panic!("{e}: {:?}", reply.text()));
        let body =
            AnswerBody { student: joined.student, chapter: 2, answer: oomlab::class::Answer::Number(guess), round: 1 };
        assert_eq!(post("answers", serde_json::to_value(&body).expect("json")).status, 200);
    }
    settle(&mut harness, "the guesses", &|a| a.classroom.answers.len() == 3);
    harness.get_by_label("3 students joined · 3 answered this question");
    for name in ["Ada", "Grace", "Alan"] {
        assert!(harness.query_by_label_contains(name).is_none(), "no name on the projector: {name}");
    }
    harness.state_mut().reveal();
    settle(&mut harness, "the reveal", &|a| a.classroom.state.as_ref().is_some_and(|s| s.revealed.is_some()));
    let answer = match harness.state().classroom.state.as_ref().and_then(|s| s.revealed.clone()) {
        Some(oomlab::class::Answer::Number(x)) => x,
        other => panic!("a number: {other:?}"),
    };
    harness.get_by_label(&format!("The answer, from the real step: {answer:.2}×"));
    // The histogram's description, for a screen reader: the guesses it counts.
    harness.get_by_label("The class's guesses: 3 of them, from 1.50× to 2.00×, the middle one 2.00×.");
    snapshot_class(&mut harness, "class_projector");
    harness.state_mut().set_lang(Lang::Zh);
    harness.run();
    let zh = Catalog::new(Lang::Zh);
    harness.get_by_label(&zh.format("class-code", &[("code", class.code.as_str().into())]));
    harness.get_by_label(&format!("真实的一步给出的答案：{answer:.2}×"));
    harness.get_by_label_contains("第 2 题：");
    snapshot_class(&mut harness, "class_projector_zh");
    server.stop();
}

/// The teacher keeps the class its own: started with an expected size, the students past it
/// wait and are let in with a click; the list with names stays folded away until opened, and
/// removes a student (their answer leaves the histogram); the lock turns newcomers away; joins
/// faster than a class types, or past the expected size, are announced on the projector; and
/// everyone waiting is removed with the class locked in one click.
#[test]
fn the_teacher_lets_in_removes_and_locks() {
    use oomlab::class::{AnswerBody, Joined};
    use oomlab::i18n::{Catalog, Lang};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (server, mut harness, base) = teaching(&dir, [1500.0, 1400.0], |app| app.classroom.start.expected = 2);
    let en = Catalog::new(Lang::En);
    let state = |a: &OomlabApp| a.classroom.state.clone();
    settle(&mut harness, "the class", &|a| state(a).is_some_and(|s| s.chapter.is_some()));
    let class = harness.state().classroom.class().cloned().expect("a class");
    let post = |path: &str, body: serde_json::Value| {
        let url = format!("{base}/api/classes/{}/{path}", class.code);
        ehttp::fetch_blocking(&ehttp::Request::post_json(url, &body).expect("JSON")).expect("the server answers")
    };
    let chapter = state(harness.state()).and_then(|s| s.chapter).expect("a chapter");
    let mut ids = Vec::new();
    for name in ["Ada Lovelace", "Grace Hopper", "韩梅梅"] {
        let joined: Joined = post("join", serde_json::json!({ "name": name })).json().expect("joined");
        ids.push(joined);
    }
    assert!(ids[2].waiting && !ids[1].waiting, "past the expected 2, the third waits");
    settle(&mut harness, "the waiting student", &|a| state(a).is_some_and(|s| s.waiting == 1));
    harness.get_by_label("1 student waits to be let in.");
    // Past the expected size the warning is up, however slowly the joins came.
    assert!(state(harness.state()).is_some_and(|s| s.join_flood && s.joins_recent < oomlab::class::FLOOD_JOINS));
    harness.get_by_label_contains("1 more than the 2 students you expected are waiting");
    for name in ["Ada Lovelace", "Grace Hopper", "韩梅梅"] {
        assert!(harness.query_by_label_contains(name).is_none(), "no name until the list is opened: {name}");
    }
    harness.get_by_label(&en.text("class-admit-all")).click();
    settle(&mut harness, "everyone in", &|a| state(a).is_some_and(|s| s.waiting == 0 && s.students == 3));

    // Everyone answers chapter 1 (a choice): three guesses on the projector.
    let question = state(harness.state()).and_then(|s| s.question).expect("a question");
    let option = match question {
        oomlab::class::Question::Choice { options } => oomlab::class::Answer::Choice(options[0].clone()),
        oomlab::class::Question::Number => oomlab::class::Answer::Number(2.0),
    };
    for j in &ids {
        let body = AnswerBody { student: j.student.clone(), chapter, answer: option.clone(), round: 1 };
        assert_eq!(post("answers", serde_json::to_value(&body).expect("JSON")).status, 200);
    }
    settle(&mut harness, "the guesses", &|a| a.classroom.answers.len() == 3);

    // The list, opened: names (in any script: a Chinese name is drawn with the names font, not
    // as boxes), and a Remove for each.
    harness.get_by_label(&en.text("class-students")).click();
    settle(&mut harness, "the list", &|a| a.classroom.students.roster.as_ref().is_some_and(|r| r.students.len() == 3));
    harness.get_by_label("1. Ada Lovelace");
    harness.get_by_label("3. 韩梅梅");
    // Each row's button says whose it is to a screen reader.
    let remove = en.format("class-remove-student", &[("student", "1. Ada Lovelace".into())]);
    assert_eq!(remove, "Remove 1. Ada Lovelace");
    assert_eq!(harness.query_all_by_label_contains("Remove 2. ").count(), 1);
    harness.get_by_label(&remove).click();
    // The server's count, its answers and the list the view draws (fetched after the removal).
    settle(&mut harness, "the removal", &|a| {
        state(a).is_some_and(|s| s.students == 2)
            && a.classroom.answers.len() == 2
            && a.classroom.students.roster.as_ref().is_some_and(|r| r.students.len() == 2)
    });
    assert!(harness.query_by_label("1. Ada Lovelace").is_none());
    harness.get_by_label("1. Grace Hopper");

    // Locked: a newcomer is turned away.
    harness.get_by_label(&en.text("class-lock")).click();
    settle(&mut harness, "the lock", &|a| state(a).is_some_and(|s| s.locked));
    assert_eq!(post("join", serde_json::json!({})).status, 423);
    // A burst of joins (refused or not) is announced.
    for _ in 0..25 {
        post("join", serde_json::json!({}));
    }
    settle(&mut harness, "the warning", &|a| state(a).is_some_and(|s| s.join_flood));
    harness.get_by_label_contains("Joins are arriving faster than a class can type");
    harness.state_mut().set_lang(Lang::Zh);
    harness.run();
    harness.get_by_label_contains("加入的速度比一个班级打字还快");
    harness.get_by_label(&Catalog::new(Lang::Zh).text("class-lock"));
    harness.state_mut().set_lang(Lang::En);
    harness.run();

    // Unlocked, a newcomer past the expected size waits; "remove everyone waiting and lock"
    // does both in one click, and the lock box shows it.
    harness.get_by_label(&en.text("class-lock")).click();
    settle(&mut harness, "the unlock", &|a| state(a).is_some_and(|s| !s.locked));
    assert!(post("join", serde_json::json!({})).json::<Joined>().expect("joined").waiting);
    settle(&mut harness, "a stranger waiting", &|a| state(a).is_some_and(|s| s.waiting == 1));
    harness.get_by_label(&en.text("class-remove-waiting-lock")).click();
    settle(&mut harness, "removed and locked", &|a| state(a).is_some_and(|s| s.waiting == 0 && s.locked));
    assert!(harness.query_by_label(&en.text("class-remove-waiting-lock")).is_none(), "nothing waits now");
    assert_eq!(post("join", serde_json::json!({})).status, 423);
    server.stop();
}

/// Keyboard only, as a screen reader names them: the key and the expected size, starting the
/// class, the lock and the list of students.
#[test]
fn the_class_controls_are_reached_by_keyboard() {
    use oomlab::i18n::{Catalog, Lang};
    use oomlab::serve::{self, Config};
    xdg();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = serve::start(&Config::loopback(dir.path().join("c.sqlite"))).expect("the server starts");
    let mut app = OomlabApp::headless(Settings::default());
    app.classroom.server = format!("http://{}", server.addr);
    app.choose_way(oomlab::app::teaching::Way::Teach);
    let mut harness =
        Harness::builder().with_size([1280.0, 800.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    let en = Catalog::new(Lang::En);
    tab_to(&mut harness, &en.text("class-key"));
    harness.get_by_label(&en.text("class-key")).type_text("0123abcd");
    harness.run();
    tab_to(&mut harness, &en.text("class-expected"));
    harness.get_by_label(&en.text("class-expected")).type_text("2");
    harness.run();
    let start = &harness.state().classroom.start;
    assert_eq!((start.key.as_str(), start.expected), ("0123abcd", 2), "typed into the focused fields");
    tab_to(&mut harness, &en.text("class-start"));
    harness.key_press(egui::Key::Enter);
    settle(&mut harness, "the class", &|a| a.classroom.state.is_some());
    tab_to(&mut harness, &en.text("class-lock"));
    harness.key_press(egui::Key::Space);
    settle(&mut harness, "the lock", &|a| a.classroom.state.as_ref().is_some_and(|s| s.locked));
    tab_to(&mut harness, &en.text("class-students"));
    harness.key_press(egui::Key::Enter);
    settle(&mut harness, "the list", &|a| a.classroom.students.roster.is_some());
    harness.get_by_label(&en.text("class-no-students"));
    server.stop();
}
