//! Teacher links: a link locks and hides controls, opens a chapter, and survives a
//! round trip through "Share this setup"; locked values stay pinned whatever tries to change
//! them; an unknown control name is ignored with a notice.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::app::teacher::{Control, Restrictions};

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
    assert_eq!(harness.state().teaching.lesson.as_ref().map(|l| l.chapter), Some(1));
    // Hidden: not drawn. Locked: drawn, disabled.
    assert!(harness.query_by_label("checkpointing").is_none() && harness.query_by_label("precision").is_none());
    harness.get_by_label("attention");
    let disabled = |label: &str| harness.query_all_by_label_contains(label).any(|n| n.accesskit_node().is_disabled());
    assert!(disabled("batch") && disabled("32 MiB"), "the batch and budget controls are disabled");
    assert!(!disabled("sequence"), "an unlocked control stays enabled");
    // The unknown name: a notice, nothing else.
    harness.get_by_label_contains("The link names controls oomlab does not know (nonsense)");
    // Pinned: neither a key nor the OOM panel changes a locked value.
    let batch = harness.state().settings.batch;
    harness.key_press(egui::Key::B);
    harness.run();
    assert_eq!(harness.state().settings.batch, batch, "B does not change a locked batch");
    harness.state_mut().settings.batch = 64;
    harness.run();
    assert_eq!(harness.state().settings.batch, batch, "the batch is pinned");
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
    assert_eq!((settings, notice), (harness.state().settings.clone(), None));
    let (r, notice) = Restrictions::from_url_hash(&link);
    assert_eq!((r.locked, r.hidden, notice), (vec![Control::Batch, Control::Model], vec![Control::Compare], None));
    // A fresh app opened with the link shows the same.
    let mut student = OomlabApp::headless(settings_from(&link));
    student.apply_teacher_link(&link);
    assert_eq!(student.teaching.restrictions.locked, vec![Control::Batch, Control::Model]);
    assert_eq!(student.teaching.lesson.as_ref().map(|l| l.chapter), Some(3));
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
    app.settings.seq = 32;
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
