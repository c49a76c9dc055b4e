//! The app's Serving tab: a real run served a few iterations a frame, its figures shown as the
//! run's report has them, in both languages, on a laptop's screen and a phone's.

#[path = "support/xdg.rs"]
mod support_xdg;
use support_xdg::xdg;

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use oomlab::app::OomlabApp;
use oomlab::app::settings::Settings;
use oomlab::i18n::Lang;
use oomlab::serving::Layout;
use oomlab::units::format_bytes;

/// Runs frames until the tab's runs are done.
fn serve_all(harness: &mut Harness<'_, OomlabApp>, label: &str) {
    harness.get_by_label(label).click();
    for _ in 0..5000 {
        harness.step();
        if !harness.state().shown.serving.running() {
            break;
        }
    }
    harness.run();
    assert!(!harness.state().shown.serving.running(), "the runs finish");
}

/// Saves what the harness draws where `OOMLAB_SHOTS` names a folder (for a person to look at).
fn shot(harness: &mut Harness<'_, OomlabApp>, name: &str) {
    if let Some(dir) = std::env::var_os("OOMLAB_SHOTS") {
        let image = harness.render().expect("a render");
        image.save(std::path::Path::new(&dir).join(format!("{name}.png"))).expect("saved");
    }
}

fn app(size: [f32; 2], lang: Lang) -> Harness<'static, OomlabApp> {
    xdg();
    let mut app = OomlabApp::headless(Settings::default());
    app.set_lang(lang);
    app.shown.serving.requests = 48;
    let mut harness = Harness::builder().with_size(size).build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), app);
    harness.run();
    harness
}

#[test]
fn the_serving_tab_shows_each_layouts_run_as_its_report_has_it() {
    let mut harness = app([1280.0, 800.0], Lang::En);
    harness.get_by_label("Serving").click();
    harness.run();
    harness.get_by_label("Nothing served yet: choose a layout and press Serve.");
    shot(&mut harness, "serving_before");
    serve_all(&mut harness, "Serve with all three layouts");
    let reports = harness.state().shown.serving.reports.clone();
    assert_eq!(reports.iter().map(|r| r.layout).collect::<Vec<_>>(), Layout::ALL.to_vec());
    // The last layout served is shown: its summary and figures, word for word from its report.
    let paged = &reports[2];
    let served = paged.requests.iter().filter(|s| !s.refused).count();
    let summary = format!(
        "paged: {served} requests served on the cpu, at most {} at once; {} preempted and recomputed.",
        paged.peak_concurrent, paged.preemptions
    );
    harness.get_by_label(&summary);
    let peak = format!(
        "At its peak the cache reserved {}, and {} of it held tokens (allocator).",
        format_bytes(paged.kv_reserved_peak_bytes),
        format_bytes(paged.kv_used_at_peak_bytes)
    );
    harness.get_by_label(&peak);
    harness.get_by_label(&format!(
        "Of everything the cache reserved over the run, {:.1} % held no token.",
        100.0 * paged.waste_fraction
    ));
    // The block map's description counts the blocks the report's map holds.
    let map = paged.map_at_peak.as_ref().expect("a paged cache has blocks");
    let held = map.iter().filter(|&&o| o != 0).count();
    assert!(harness.query_all_by_label_contains(&format!("{} blocks: {held} held by", map.len())).count() >= 1);
    // The table: each layout's row.
    for r in &reports {
        harness.get_by_label(&format_bytes(r.kv_reserved_peak_bytes));
    }
    shot(&mut harness, "serving_after");
    // Contiguous: its own figures, and no block is shared between requests' rows.
    harness.get_by_label_contains("contiguous: each request reserves").click();
    harness.run();
    let contiguous = &reports[0];
    harness.get_by_label_contains(&format!("at most {} at once", contiguous.peak_concurrent));
    assert!(contiguous.peak_concurrent < paged.peak_concurrent);
    shot(&mut harness, "serving_contiguous");
}

#[test]
fn the_serving_tab_reads_in_chinese_and_fits_a_phone() {
    let mut harness = app([390.0, 844.0], Lang::Zh);
    harness.get_by_label("推理服务").click();
    harness.run();
    harness.get_by_label("还没有服务过：选一种布局，然后点“开始服务”。");
    shot(&mut harness, "serving_phone_before");
    serve_all(&mut harness, "开始服务");
    let paged = harness.state().shown.serving.reports[0].clone();
    harness.get_by_label_contains(&format!("同时最多 {} 个", paged.peak_concurrent));
    shot(&mut harness, "serving_phone_after");
    // Nothing passes the screen's right edge (the block map wraps to the width).
    let ppp = harness.ctx.pixels_per_point() as f64;
    let cut: Vec<String> = harness
        .root()
        .children_recursive()
        .filter_map(|n| {
            let node = n.accesskit_node();
            let b = node.bounding_box()?;
            (b.x1 / ppp > 391.0 && b.width() > 0.0)
                .then(|| format!("{:?} {:?} {:.0}", node.role(), node.label().unwrap_or_default(), b.x1 / ppp))
        })
        .collect();
    assert!(cut.is_empty(), "cut off: {cut:?}");
}
