//! oomlab on a phone and on a projector (issue 14): at 390×844 the controls are a drawer that
//! opens and closes, the selected view takes the full width, the tabs and buttons are
//! touch-sized; in present mode at 1920×1080 and 1280×720 every tab fits. Nothing is cut off:
//! every widget the accessibility tree holds lies inside the screen.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::settings::Settings;
use oomlab::app::{OomlabApp, TOUCH_SIZE};

const PHONE: [f32; 2] = [390.0, 844.0];

/// The widgets whose right edge passes the screen's: (label or value, right edge).
fn cut_off<S>(harness: &Harness<'_, S>) -> Vec<(String, f64)> {
    cut_off_at(harness, PHONE[0])
}

/// The widgets whose right edge passes `width`.
fn cut_off_at<S>(harness: &Harness<'_, S>, width: f32) -> Vec<(String, f64)> {
    // Accessibility bounds are in pixels; present mode zooms (1.5 pixels per point).
    let ppp = harness.ctx.pixels_per_point() as f64;
    harness
        .root()
        .children_recursive()
        .filter_map(|n| {
            let node = n.accesskit_node();
            let bounds = node.bounding_box()?;
            let text = node.label().or(node.value()).unwrap_or_else(|| format!("{:?}", node.role()));
            (bounds.x1 / ppp > width as f64 + 1.0 && bounds.width() > 0.0).then_some((text, bounds.x1 / ppp))
        })
        .collect()
}

#[test]
fn on_a_phone_the_controls_are_a_drawer_and_nothing_is_cut_off() {
    xdg();
    let mut harness = Harness::builder()
        .with_size(PHONE)
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    // The views, full width; the controls are not drawn until the drawer opens.
    assert!(harness.query_by_label("Setup").is_none(), "the controls are in the drawer");
    for tab in ["Breakdown", "Step timeline", "Memory vs batch", "Allocator map", "Training", "Real models"] {
        let node = harness.get_by_label(tab);
        let bounds = node.accesskit_node().bounding_box().expect("a tab has bounds");
        assert!(bounds.height() >= TOUCH_SIZE as f64 - 0.5, "{tab} is {} high, not touch-sized", bounds.height());
    }
    let cut = cut_off(&harness);
    assert!(cut.is_empty(), "cut off at the right edge: {cut:?}");
    for tab in ["Step timeline", "Memory vs batch", "Allocator map", "Training", "Real models", "Snapshot", "Breakdown"]
    {
        harness.get_by_label(tab).click();
        harness.run();
        let cut = cut_off(&harness);
        assert!(cut.is_empty(), "{tab}: cut off at the right edge: {cut:?}");
    }
    harness
        .snapshot_options("phone_views", &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000));

    // The drawer opens over the views, holds the controls, and closes.
    harness.get_by_label("Settings »").click();
    harness.run();
    harness.get_by_label("Setup");
    assert!(harness.query_by_label("Step timeline").is_none(), "the drawer covers the views");
    let cut = cut_off(&harness);
    assert!(cut.is_empty(), "the drawer is cut off: {cut:?}");
    harness
        .snapshot_options("phone_drawer", &egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000));
    harness.get_by_label("« Back to the views").click();
    harness.run();
    harness.get_by_label("Step timeline");
    assert!(harness.query_by_label("Setup").is_none());

    // The lessons sit under the views on a phone, and fit too.
    harness.get_by_label("Lessons").click();
    harness.run();
    harness.get_by_label("What fills memory in a training step");
    let cut = cut_off(&harness);
    assert!(cut.is_empty(), "the lessons are cut off: {cut:?}");
    // And so do the challenges, with one under way (its goal and its share link).
    harness.get_by_label("Challenges").click();
    harness.run();
    harness.state_mut().start_challenge(1);
    harness.run();
    let cut = cut_off(&harness);
    assert!(cut.is_empty(), "the challenges are cut off: {cut:?}");
}

/// On a phone a chapter about a control (the batch slider) is one tap from it: its button opens
/// the drawer, where the highlighted slider lies on the screen. A chapter about a view has no
/// such button (the view is already there).
#[test]
fn on_a_phone_a_chapter_opens_the_drawer_at_its_control() {
    xdg();
    let mut harness = Harness::builder()
        .with_size(PHONE)
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    harness.run();
    let chapters = oomlab::app::teaching::chapters();
    let timeline = chapters.iter().position(|c| c.target == "timeline-chart").expect("a timeline chapter");
    harness.state_mut().open_chapter(timeline);
    harness.run();
    assert!(harness.query_by_label("Show it in the settings").is_none(), "a view's chapter needs no drawer");
    let batch = chapters.iter().position(|c| c.target == "batch").expect("a batch chapter");
    harness.state_mut().open_chapter(batch);
    harness.run();
    assert!(oomlab::app::views::marked(&harness.ctx, "batch").is_none(), "the slider is in the closed drawer");
    harness.get_by_label("Show it in the settings").click();
    harness.run();
    harness.run();
    harness.get_by_label("Setup");
    let rect = oomlab::app::views::marked(&harness.ctx, "batch").expect("the batch slider is drawn");
    let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(PHONE[0], PHONE[1]));
    assert!(screen.contains_rect(rect), "the highlighted slider {rect:?} is on the screen");
}

/// Present mode (large type, high contrast) on the two common projector sizes: every tab fits the
/// width. A snapshot of the breakdown at each size.
fn present_mode_fits(w: f32, h: f32) {
    xdg();
    // Present mode zooms 1.5×: a w×h-pixel projector shows w/1.5 × h/1.5 points (kittest keeps
    // the size in points and renders more pixels).
    let (w, h) = (w / 1.5, h / 1.5);
    let settings = Settings {
        prefs: oomlab::app::settings::Prefs { projector: true, ..Default::default() },
        ..Settings::default()
    };
    let mut harness = Harness::builder()
        .with_size([w, h])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(settings));
    harness.run();
    harness.run();
    for tab in ["Step timeline", "Memory vs batch", "Allocator map", "Training", "Real models", "Breakdown"] {
        harness.get_by_label(tab).click();
        harness.run();
        let cut = cut_off_at(&harness, w);
        assert!(cut.is_empty(), "{w}×{h}, {tab}: cut off at the right edge: {cut:?}");
    }
    let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
    harness.snapshot_options(format!("present_{:.0}x{:.0}", w * 1.5, h * 1.5), &options);
}

#[test]
fn present_mode_fits_1920_by_1080() {
    present_mode_fits(1920.0, 1080.0);
}

#[test]
fn present_mode_fits_1280_by_720() {
    present_mode_fits(1280.0, 720.0);
}

/// The welcome on a phone fits the screen: its words wrap inside it, and its three ways in are
/// all there.
#[test]
fn on_a_phone_the_welcome_fits() {
    xdg();
    let mut app = OomlabApp::headless(Settings::default());
    app.teaching.show_welcome();
    let mut harness = Harness::builder().with_size(PHONE).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    for way in ["Start the lessons", "Explore freely", "Teach a class"] {
        let right = harness.get_by_label(way).rect().right();
        assert!(right <= PHONE[0], "{way} reaches {right}");
    }
    assert_eq!(cut_off(&harness), Vec::<(String, f64)>::new());
}

/// Text at 200 % (WCAG 1.4.4) in a 1280×800 window, in both languages: the whole layout zooms,
/// as a browser's zoom does, so the window is 640×400 points and lays out as a phone's, and
/// nothing is cut off at the right edge on any tab, in the drawer or in the lessons.
#[test]
fn at_200_percent_text_nothing_is_cut_off() {
    use oomlab::app::Tab;
    use oomlab::app::settings::Prefs;
    use oomlab::i18n::Lang;
    xdg();
    let (w, h) = (1280.0 / 2.0, 800.0 / 2.0);
    for lang in [Lang::En, Lang::Zh] {
        let settings = Settings { prefs: Prefs { text_percent: 200, ..Prefs::default() }, ..Settings::default() };
        let mut app = OomlabApp::headless(settings);
        app.set_lang(lang);
        let mut harness =
            Harness::builder().with_size([w, h]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
        harness.run();
        assert_eq!(harness.ctx.zoom_factor(), 2.0, "200 % text");
        assert!(harness.state().chrome.is_narrow(), "{lang:?}: a phone's layout at 640 points");
        for (tab, _) in Tab::ALL {
            harness.state_mut().shown.tab = tab;
            harness.run();
            let cut = cut_off_at(&harness, w);
            assert!(cut.is_empty(), "{lang:?} {tab:?}: cut off at the right edge: {cut:?}");
        }
        harness.state_mut().chrome.drawer_open = true;
        harness.run();
        let cut = cut_off_at(&harness, w);
        assert!(cut.is_empty(), "{lang:?}: the drawer is cut off: {cut:?}");
        harness.state_mut().chrome.drawer_open = false;
        harness.state_mut().open_chapter(1);
        harness.run();
        if lang == Lang::En {
            let options = egui_kittest::SnapshotOptions::new().threshold(2.0).max_failed_pixels(2000);
            harness.snapshot_options("text_200_percent", &options);
        }
        let cut = cut_off_at(&harness, w);
        assert!(cut.is_empty(), "{lang:?}: the lessons are cut off: {cut:?}");
    }
}

/// The Snapshot tab with a snapshot open (an OOM, a scrubbed event, its panels and advice) fits
/// a phone, in English and in Chinese: the summary's columns wrap, the long frames wrap.
#[test]
fn on_a_phone_an_open_snapshot_is_not_cut_off() {
    use oomlab::app::Tab;
    use oomlab::i18n::Lang;
    xdg();
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/snapshot/toy_oom.pickle"))
        .expect("the fixture");
    for lang in [Lang::En, Lang::Zh] {
        let mut app = OomlabApp::headless(Settings::default());
        app.set_lang(lang);
        app.open_snapshot_bytes("toy_oom.pickle", &bytes);
        app.shown.tab = Tab::Snapshot;
        let mut harness = Harness::builder()
            .with_size([PHONE[0], 3000.0])
            .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
        harness.run();
        harness.state_mut().snapshot.loaded.as_mut().expect("open").selected = Some(20);
        harness.run();
        // The panels are there: the scrubbed moment's, the OOM's, the advice.
        assert!(harness.query_all_by_label_contains("oomlab/activations").count() >= 4, "{lang:?}: the groups");
        let cut = cut_off(&harness);
        assert!(cut.is_empty(), "{lang:?}: cut off at the right edge: {cut:?}");
        // A real run's snapshot with a second rank beside it: the comparison, the phases, the
        // places and the replay fit too.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/snapshot/");
        let a = std::fs::read(format!("{dir}gpu_step.pickle")).expect("the fixture");
        let b = std::fs::read(format!("{dir}gpu_step_rank1.pickle")).expect("the fixture");
        harness.state_mut().open_snapshot_bytes("run_rank0.pickle", &a);
        harness.state_mut().snapshot.add_bytes("run_rank1.pickle", &b);
        harness.run();
        harness.get_by_label(if lang == Lang::En { "Replay" } else { "重放" }).click();
        harness.run();
        assert!(harness.query_all_by_label_contains("run_rank1.pickle").count() >= 2, "{lang:?}: the files");
        let cut = cut_off(&harness);
        assert!(cut.is_empty(), "{lang:?}: a real run, two ranks, cut off at the right edge: {cut:?}");
    }
}
