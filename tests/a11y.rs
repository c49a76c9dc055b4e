//! What a screen reader finds (issue 29): every interactive node of every view, of the lesson
//! and challenge panels, of the class panel, the windows and the welcome has a name, in English
//! and in Chinese; every chart is an image whose description holds its computed peak.
//!
//! The tree walked is egui's AccessKit tree, the one the desktop's AccessKit adapter hands the
//! platform's screen reader and the browser's mirror (src/web_a11y.rs) turns into DOM.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui::accesskit::{Action, Role};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::settings::Settings;
use oomlab::app::{OomlabApp, Tab};
use oomlab::i18n::Lang;

/// Roles a user operates, whatever actions a node lists.
const INTERACTIVE: [Role; 12] = [
    Role::Button,
    Role::CheckBox,
    Role::RadioButton,
    Role::Slider,
    Role::SpinButton,
    Role::ComboBox,
    Role::TextInput,
    Role::MultilineTextInput,
    Role::Link,
    Role::Tab,
    Role::MenuItem,
    Role::ListBoxOption,
];

/// The interactive nodes without a name: "role at (x, y)", for the failure message.
fn unnamed<S>(harness: &Harness<'_, S>, place: &str) -> Vec<String> {
    harness
        .root()
        .children_recursive()
        .filter_map(|n| {
            let node = n.accesskit_node();
            let data = node.data();
            // Text is read, not operated (a selectable label takes clicks to select its text);
            // egui's scroll bars are dragged with a pointer, and a reader scrolls the content.
            let operable = !matches!(node.role(), Role::Label | Role::ScrollBar)
                && (INTERACTIVE.contains(&node.role())
                    || data.supports_action(Action::Click)
                    || data.supports_action(Action::Focus));
            // A label's name is its text.
            let text = if node.role() == Role::Label { node.value() } else { node.label() };
            // A text field's hint is what a reader falls back to (as egui_kittest's own check).
            let hint = data.placeholder().filter(|h| !h.trim().is_empty());
            let named = text.is_some_and(|l| !l.trim().is_empty()) || hint.is_some();
            (operable && !named && !node.is_hidden()).then(|| {
                let at = node
                    .bounding_box()
                    .map(|b| format!("({:.0}, {:.0}) {:.0}×{:.0}", b.x0, b.y0, b.width(), b.height()))
                    .unwrap_or_default();
                let parent = node.parent().map(|p| format!("{:?} {:?}", p.role(), p.label())).unwrap_or_default();
                format!("{place}: a {:?} at {at} in {parent} has no name (value {:?})", node.role(), node.value())
            })
        })
        .collect()
}

/// The descriptions of the charts on screen (image nodes).
fn charts<S>(harness: &Harness<'_, S>) -> Vec<String> {
    harness
        .root()
        .children_recursive()
        .filter(|n| n.accesskit_node().role() == Role::Image)
        .filter_map(|n| n.accesskit_node().label())
        .collect()
}

/// A small PyTorch snapshot, for the Snapshot tab.
fn snapshot_fixture() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshot/minimal_p5.pickle");
    std::fs::read(path).expect("fixture")
}

fn app(settings: Settings, lang: Lang) -> Harness<'static, OomlabApp> {
    let mut harness =
        Harness::builder().with_size([1400.0, 1000.0]).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), {
            let mut app = OomlabApp::headless(settings);
            app.set_lang(lang);
            app
        });
    harness.run_steps(2);
    harness
}

/// One step, as the One step button runs it.
fn step(harness: &mut Harness<'_, OomlabApp>) {
    let before = harness.state().steps_done();
    harness.state_mut().run.train_for(1);
    for _ in 0..400 {
        harness.step();
        if harness.state().is_idle() && harness.state().steps_done() > before {
            break;
        }
    }
    assert_eq!(harness.state().steps_done(), before + 1, "the step ran");
    harness.run_steps(2);
}

#[test]
fn every_interactive_node_has_a_name_in_both_languages() {
    xdg();
    let snapshot = snapshot_fixture();
    for lang in [Lang::En, Lang::Zh] {
        let mut missing = Vec::new();
        let mut walked = 0;
        // An out-of-memory setup: the OOM panel's suggestion buttons.
        let oom =
            Settings { device: oomlab::app::DeviceSettings::with_budget(8 << 20), batch: 64, ..Settings::default() };
        let mut harness = app(oom, lang);
        missing.extend(unnamed(&harness, "OOM"));
        harness.state_mut().edit_settings(|s| *s = Settings::default());
        harness.run_steps(2);
        harness.state_mut().open_snapshot_bytes("minimal_p5.pickle", &snapshot);
        for after_step in [false, true] {
            if after_step {
                step(&mut harness);
            }
            for (tab, _) in Tab::ALL {
                harness.state_mut().shown.tab = tab;
                harness.run_steps(2);
                let place = format!("{lang:?} {tab:?}{}", if after_step { " after a step" } else { "" });
                missing.extend(unnamed(&harness, &place));
                walked += 1;
            }
        }
        // Every combo box's list, open.
        harness.state_mut().shown.tab = Tab::Breakdown;
        harness.run_steps(2);
        let combos = harness.query_all(egui_kittest::kittest::by().role(Role::ComboBox)).count();
        assert!(combos >= 4, "{lang:?}: the controls' combo boxes ({combos})");
        for i in 0..combos {
            if let Some(node) = harness.query_all(egui_kittest::kittest::by().role(Role::ComboBox)).nth(i) {
                node.click();
            }
            harness.run_steps(2);
            missing.extend(unnamed(&harness, &format!("{lang:?} combo box {i}, open")));
            harness.key_press(egui::Key::Escape);
            harness.run_steps(2);
        }
        // Every lesson chapter, before and after its reveal.
        for i in 0..oomlab::app::teaching::chapters().len() {
            harness.state_mut().open_chapter(i);
            harness.run_steps(2);
            missing.extend(unnamed(&harness, &format!("{lang:?} lesson {i}")));
            harness.state_mut().reveal();
            harness.run_steps(300);
            missing.extend(unnamed(&harness, &format!("{lang:?} lesson {i}, revealed")));
        }
        harness.state_mut().teaching.close_lesson();
        // The challenges.
        for i in 0..oomlab::app::teaching::challenges().len() {
            harness.state_mut().start_challenge(i);
            harness.run_steps(2);
            missing.extend(unnamed(&harness, &format!("{lang:?} challenge {i}")));
        }
        if harness.state().teaching.challenges_open() {
            harness.state_mut().teaching.toggle_challenges();
        }
        // The class panel, the share window, the keys window and the welcome.
        harness.state_mut().classroom.open = true;
        harness.run_steps(2);
        missing.extend(unnamed(&harness, &format!("{lang:?} class panel")));
        harness.state_mut().classroom.open = false;
        harness.state_mut().teaching.open_share();
        harness.state_mut().chrome.show_shortcuts = true;
        harness.run_steps(2);
        missing.extend(unnamed(&harness, &format!("{lang:?} share and keys windows")));
        harness.state_mut().chrome.show_shortcuts = false;
        harness.state_mut().teaching.show_welcome();
        harness.run_steps(2);
        missing.extend(unnamed(&harness, &format!("{lang:?} welcome")));
        assert!(walked == 2 * Tab::ALL.len(), "{lang:?}: walked every view");
        assert!(missing.is_empty(), "interactive nodes without a name:\n{}", missing.join("\n"));
    }
}

/// The walk has teeth: a button drawn as a bare image, with no text, is found.
#[test]
fn an_unnamed_control_is_found() {
    let harness = Harness::builder().with_size([200.0, 100.0]).with_accessibility_check(false).build_ui(|ui| {
        let _ = ui.add(egui::Button::new(""));
        let _ = ui.button("Named");
    });
    let found = unnamed(&harness, "test");
    assert_eq!(found.len(), 1, "{found:?}");
}

/// Every chart is an image with a description in the reader's language, on every tab that draws
/// one (the figures in each are checked against the views' records in tests/audit.rs, the class
/// chart's in the classroom's tests).
#[test]
fn every_chart_is_described() {
    xdg();
    let snapshot = snapshot_fixture();
    for lang in [Lang::En, Lang::Zh] {
        let mut harness = app(Settings::default(), lang);
        harness.state_mut().open_snapshot_bytes("minimal_p5.pickle", &snapshot);
        step(&mut harness);
        for tab in [Tab::Timeline, Tab::Sweep, Tab::Training, Tab::RealModels, Tab::Snapshot] {
            harness.state_mut().shown.tab = tab;
            harness.run_steps(3);
            let found = charts(&harness);
            // The sweep's tab has two: memory against the batch, and per GPU against the GPUs; the
            // training tab two: the loss, and the memory after each step.
            let want = if matches!(tab, Tab::Sweep | Tab::Training) { 2 } else { 1 };
            assert_eq!(found.len(), want, "{lang:?} {tab:?}: its described charts: {found:?}");
            for chart in &found {
                let figures = chart.chars().filter(char::is_ascii_digit).count();
                assert!(figures >= 2, "{lang:?} {tab:?}: the description gives figures: {chart}");
            }
        }
    }
}

/// The browser's mirror, checked on the app's own tree: what `web/a11y.js` gets holds the
/// lesson's question and choices, the batch slider with its value, the breakdown's figures and a
/// chart's description with its peak; the actions it sends back move the slider, reveal the
/// answer (with its real step), and the live line says so.
#[test]
fn the_mirror_holds_the_lesson_controls_and_charts_and_its_actions_work() {
    use oomlab::app::a11y::{Mirror, queue_action};
    use std::sync::{Arc, Mutex};
    xdg();
    let got: Arc<Mutex<String>> = Arc::default();
    let mut harness = app(Settings::default(), Lang::En);
    let sink = got.clone();
    harness.ctx.add_plugin(Mirror::new(Box::new(move |json| {
        if let Ok(mut g) = sink.lock() {
            *g = json.to_string();
        }
    })));
    // Chapter 4 asks when memory peaks, with choices; the timeline tab shows a chart.
    harness.state_mut().open_chapter(3);
    harness.state_mut().shown.tab = Tab::Timeline;
    harness.run_steps(3);
    let entries = |got: &Arc<Mutex<String>>| -> Vec<serde_json::Value> {
        serde_json::from_str(&got.lock().map(|g| g.clone()).unwrap_or_default()).expect("the mirror's JSON")
    };
    let find = |list: &[serde_json::Value], role: &str, name: &str| {
        list.iter()
            .find(|e| e["role"] == role && e["name"].as_str().is_some_and(|n| n.contains(name)))
            .cloned()
            .unwrap_or_else(|| panic!("no {role} named {name:?} in the mirror"))
    };
    let list = entries(&got);
    let en = oomlab::i18n::Catalog::new(Lang::En);
    let chapter = &oomlab::app::teaching::chapters()[3];
    find(&list, "text", &en.text(&format!("lesson-{}-question", chapter.id)));
    let oomlab::app::teaching::Question::Choice { options, .. } = &chapter.question else { panic!("a choice") };
    for key in options.iter() {
        let option = find(&list, "radio", &en.text(key));
        assert_eq!(option["checked"], false, "{key}: not picked yet");
    }
    let batch = find(&list, "slider", "batch");
    assert_eq!(batch["now"].as_f64(), Some(harness.state().settings().batch as f64));
    let peak = oomlab::app::views::size(
        &en,
        harness.state().shown.derived.predicted.clone().and_then(|p| p.ok()).expect("fits").peak_allocated_bytes(),
    );
    // Before the reveal the chart is veiled (guess first): it says so, and not its peak.
    find(&list, "img", &en.text("veil-chart"));
    assert!(!list.iter().any(|e| e["name"].as_str().is_some_and(|n| n.contains(&peak))), "{peak} before the reveal");
    find(&list, "button", "Reveal");
    find(&list, "button", "One step");
    // Every entry is somewhere on the screen, in CSS pixels.
    for e in &list {
        let r: Vec<f64> = e["rect"].as_array().expect("a rect").iter().filter_map(|v| v.as_f64()).collect();
        assert!(r.len() == 4 && r[0] >= -1.0 && r[1] >= -1.0 && r[0] <= 1400.0 && r[2] >= 0.0, "{e}");
    }

    // An arrow key on the mirrored slider: egui's own increment.
    let before = harness.state().settings().batch;
    let id = batch["id"].as_str().expect("an id").to_string();
    assert!(queue_action(&id, "increment", None));
    harness.run_steps(3);
    assert!(harness.state().settings().batch > before, "the increment moved the batch slider");
    assert_eq!(find(&entries(&got), "slider", "batch")["now"].as_f64(), Some(harness.state().settings().batch as f64));
    // Picking an option, then the mirrored Reveal: the verdict, its real step, the live line.
    let option = find(&entries(&got), "radio", &en.text(options[1]));
    assert!(queue_action(option["id"].as_str().expect("id"), "click", None));
    harness.run_steps(2);
    assert_eq!(find(&entries(&got), "radio", &en.text(options[1]))["checked"], true);
    let reveal = find(&entries(&got), "button", "Reveal");
    assert!(queue_action(reveal["id"].as_str().expect("id"), "click", None));
    harness.run_steps(300);
    let lesson = harness.state().teaching.lesson().expect("the lesson");
    let verdict = lesson.verdict.clone().expect("revealed");
    assert!(harness.state().steps_done() >= 1, "the reveal ran a real step");
    let said = oomlab::app::teaching::verdict_text(&en, &verdict, &chapter.question);
    let live: Vec<serde_json::Value> = entries(&got).into_iter().filter(|e| e["live"] == "polite").collect();
    assert_eq!(live.len(), 1, "one live line: {live:?}");
    let line = live[0]["name"].as_str().unwrap_or_default();
    assert!(line.starts_with(&said) && line.contains("Step 1 finished"), "{line:?}: the answer and its step");
    // Revealed, the chart is described with its peak (the batch moved: the real step's).
    let stepped = harness.state().run.measured.as_ref().expect("a step").peak_allocated_bytes();
    find(&entries(&got), "img", &oomlab::app::views::size(&en, stepped));
    // The breakdown table's figures, and an out-of-memory message, are in the mirror as text.
    harness.state_mut().shown.tab = Tab::Breakdown;
    harness.run_steps(3);
    let total =
        oomlab::app::views::size(&en, harness.state().run.measured.as_ref().expect("a step").peak_allocated_bytes());
    find(&entries(&got), "text", &total);
    harness.state_mut().edit_settings(|s| s.device.budget_bytes = 8 << 20);
    harness.state_mut().edit_settings(|s| s.batch = 64);
    harness.run_steps(3);
    let oom = harness.state().shown.derived.predicted.clone().and_then(|p| p.err()).expect("out of memory");
    find(&entries(&got), "text", oom.message.lines().next().unwrap_or_default());
    // Nonsense from the page is refused, never a crash.
    assert!(!queue_action("not a number", "click", None));
    assert!(!queue_action(&id, "explode", None));
    assert!(!queue_action(&id, "set", None));
}

/// The live line: a step, then an out-of-memory error (urgent), each said once; training says
/// nothing per step; a revealed answer is said at once, and again with the step it runs.
#[test]
fn the_live_line_says_each_event_once() {
    use oomlab::app::a11y::Announcer;
    let mut a = Announcer::default();
    a.observe(0, false, || "step".into(), None, None);
    assert_eq!(a.line, "", "nothing happened yet");
    a.observe(1, false, || "step 1".into(), None, None);
    assert_eq!((a.line.as_str(), a.urgent), ("step 1", false));
    a.observe(2, true, || "step 2".into(), None, None);
    assert_eq!(a.line, "step 1", "training: no line per step");
    a.observe(2, false, || "step 2".into(), Some("CUDA out of memory".into()), None);
    assert_eq!((a.line.as_str(), a.urgent), ("CUDA out of memory", true));
    a.observe(2, false, || "step 2".into(), Some("CUDA out of memory".into()), Some("Right.".into()));
    assert_eq!((a.line.as_str(), a.urgent), ("Right.", false));
    a.observe(2, false, || "step 2".into(), Some("CUDA out of memory".into()), Some("Right.".into()));
    assert_eq!(a.line, "Right.", "the same state says nothing new");
    a.observe(3, false, || "step 3".into(), None, Some("Right.".into()));
    assert_eq!(a.line, "Right. step 3", "the reveal's step, with its answer");
    a.observe(4, false, || "step 4".into(), None, Some("Right.".into()));
    assert_eq!(a.line, "step 4", "a later step alone");
}

/// A lesson chapter and a challenge set up the model and techniques, never the student's
/// display preferences.
#[test]
fn lessons_and_challenges_keep_the_display_preferences() {
    use oomlab::app::settings::Prefs;
    let prefs = Prefs { projector: false, reduced_motion: true, high_contrast: true, text_percent: 175 };
    let mut app = OomlabApp::headless(Settings { prefs, ..Settings::default() });
    for i in 0..oomlab::app::teaching::chapters().len() {
        app.open_chapter(i);
        assert_eq!(app.settings().prefs, prefs, "chapter {i}");
    }
    for i in 0..oomlab::app::teaching::challenges().len() {
        app.start_challenge(i);
        assert_eq!(app.settings().prefs, prefs, "challenge {i}");
    }
}

/// The display preferences, set from the controls: reduced motion stops egui's animations and
/// smooth scrolling, high contrast switches the theme, text size zooms; each undone too.
#[test]
fn the_display_preferences_apply_and_undo() {
    xdg();
    let mut harness = app(Settings::default(), Lang::En);
    let usual = harness.ctx.global_style().animation_time;
    assert!(usual > 0.0);
    let panel = harness.ctx.global_style().visuals.panel_fill;
    harness.get_by_label("reduced motion").click();
    harness.get_by_label("high contrast").click();
    harness.run_steps(2);
    assert!(harness.state().settings().prefs.reduced_motion && harness.state().settings().prefs.high_contrast);
    let style = harness.ctx.global_style();
    assert_eq!(style.animation_time, 0.0);
    assert_eq!(style.scroll_animation, egui::style::ScrollAnimation::none());
    // An opening panel is open at once.
    let id = egui::Id::unique("a11y-probe");
    harness.ctx.animate_bool(id, false);
    assert_eq!(harness.ctx.animate_bool(id, true), 1.0, "no animation");
    assert_eq!(style.visuals.panel_fill, egui::Color32::BLACK);
    assert_eq!(style.visuals.override_text_color, Some(egui::Color32::WHITE));
    harness.state_mut().edit_settings(|s| s.prefs.text_percent = 150);
    harness.run_steps(2);
    assert_eq!(harness.ctx.zoom_factor(), 1.5);
    // Undone: the usual look and motion again.
    harness.state_mut().edit_settings(|s| s.prefs = Default::default());
    harness.run_steps(2);
    let style = harness.ctx.global_style();
    assert_eq!((style.animation_time, style.visuals.panel_fill), (usual, panel));
    assert_eq!(harness.ctx.zoom_factor(), 1.0);
}

/// Never by colour alone: a stacked chart's legend says "Stacked from the bottom:" and names its
/// categories in the order the bars stack them (the plan's category order), on the timeline and
/// on the memory-vs-batch chart. (The allocator map writes each block's category inside it where
/// it fits: checked in tests/audit.rs.)
#[test]
fn stacked_charts_name_their_categories_in_stack_order() {
    use oomlab::plan::Category;
    xdg();
    let en = oomlab::i18n::Catalog::new(Lang::En);
    let mut harness = app(Settings::default(), Lang::En);
    let memory = harness.state().shown.derived.predicted.clone().and_then(|p| p.ok()).expect("fits");
    for tab in [Tab::Timeline, Tab::Sweep] {
        harness.state_mut().shown.tab = tab;
        harness.run_steps(3);
        let texts: Vec<String> = harness
            .root()
            .children_recursive()
            .filter(|n| n.accesskit_node().role() == Role::Label)
            .filter_map(|n| n.accesskit_node().value())
            .collect();
        let at = texts.iter().position(|t| t == "Stacked from the bottom:").expect("the stacked legend");
        // The timeline stacks what the step holds at some point; the sweep, what it holds at
        // its peak.
        let held = |c: Category| match tab {
            Tab::Timeline => memory.timeline.iter().any(|p| p.allocated.get(c) > 0),
            _ => memory.peak_allocated.get(c) > 0,
        };
        let want: Vec<String> =
            Category::ALL.iter().filter(|&&c| held(c)).map(|&c| oomlab::app::views::category_name(&en, c)).collect();
        assert!(want.len() >= 4, "{want:?}");
        assert_eq!(texts[at + 1..at + 1 + want.len()], want[..], "{tab:?}: the legend in stack order");
    }
}
