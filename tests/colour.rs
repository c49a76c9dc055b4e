//! Colour for every student (issue 29, items 4 and 5): the memory categories stay apart under
//! each colour-vision deficiency, and present mode meets WCAG's contrast for text and chart marks.
//!
//! The colour science is here, not in the app, which only needs its palettes:
//! - Machado, Oliveira & Fernandes (2009) simulate protanopia, deuteranopia and tritanopia at
//!   severity 1.0, as 3×3 matrices on linear sRGB.
//! - CIEDE2000 measures how far apart two colours look (Sharma, Wu & Dalal 2005), from CIELAB
//!   under D65.
//! - WCAG 2.1 defines relative luminance and the contrast ratio.

use egui::Color32;
use oomlab::app::chrome::high_contrast_visuals;
use oomlab::app::views::{category_color, use_safe_colours};
use oomlab::plan::Category;

/// The Machado et al. (2009) matrices at severity 1.0, on linear RGB.
const DEFICIENCIES: [(&str, [[f64; 3]; 3]); 3] = [
    ("protanopia", [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]),
    (
        "deuteranopia",
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    ),
    ("tritanopia", [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]),
];

const NORMAL: [[f64; 3]; 3] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

/// The least CIEDE2000 difference between two categories a chart draws side by side. 10 is the
/// issue's figure: well past "just noticeable" (about 2.3), so that colours stay apart when
/// projected, and not a threshold nine colours under tritanopia could never meet.
const MIN_DELTA_E: f64 = 10.0;

fn linear(c: u8) -> f64 {
    let c = f64::from(c) / 255.0;
    if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
}

/// Linear RGB of a colour as someone with `deficiency` sees it (clamped to the gamut).
fn seen(c: Color32, deficiency: &[[f64; 3]; 3]) -> [f64; 3] {
    let rgb = [linear(c.r()), linear(c.g()), linear(c.b())];
    deficiency.map(|row| (row[0] * rgb[0] + row[1] * rgb[1] + row[2] * rgb[2]).clamp(0.0, 1.0))
}

/// CIELAB (D65) of linear RGB.
fn lab([r, g, b]: [f64; 3]) -> [f64; 3] {
    let x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047;
    let y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
    let z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883;
    let f = |t: f64| if t > 216.0 / 24389.0 { t.cbrt() } else { (24389.0 / 27.0 * t + 16.0) / 116.0 };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// CIEDE2000 colour difference (kL = kC = kH = 1).
fn delta_e_2000([l1, a1, b1]: [f64; 3], [l2, a2, b2]: [f64; 3]) -> f64 {
    let c_bar = (a1.hypot(b1) + a2.hypot(b2)) / 2.0;
    let g = 0.5 * (1.0 - (c_bar.powi(7) / (c_bar.powi(7) + 25f64.powi(7))).sqrt());
    let (a1p, a2p) = ((1.0 + g) * a1, (1.0 + g) * a2);
    let (c1p, c2p) = (a1p.hypot(b1), a2p.hypot(b2));
    let hue = |b: f64, a: f64| if b == 0.0 && a == 0.0 { 0.0 } else { b.atan2(a).to_degrees().rem_euclid(360.0) };
    let (h1p, h2p) = (hue(b1, a1p), hue(b2, a2p));
    let dl = l2 - l1;
    let dc = c2p - c1p;
    let dh = if c1p * c2p == 0.0 {
        0.0
    } else if (h2p - h1p).abs() <= 180.0 {
        h2p - h1p
    } else if h2p <= h1p {
        h2p - h1p + 360.0
    } else {
        h2p - h1p - 360.0
    };
    let dhh = 2.0 * (c1p * c2p).sqrt() * (dh / 2.0).to_radians().sin();
    let l_bar = (l1 + l2) / 2.0;
    let cp_bar = (c1p + c2p) / 2.0;
    let hp_bar = if c1p * c2p == 0.0 {
        h1p + h2p
    } else if (h1p - h2p).abs() <= 180.0 {
        (h1p + h2p) / 2.0
    } else if h1p + h2p < 360.0 {
        (h1p + h2p + 360.0) / 2.0
    } else {
        (h1p + h2p - 360.0) / 2.0
    };
    let t = 1.0 - 0.17 * (hp_bar - 30.0).to_radians().cos()
        + 0.24 * (2.0 * hp_bar).to_radians().cos()
        + 0.32 * (3.0 * hp_bar + 6.0).to_radians().cos()
        - 0.20 * (4.0 * hp_bar - 63.0).to_radians().cos();
    let d_theta = 30.0 * (-((hp_bar - 275.0) / 25.0).powi(2)).exp();
    let rc = 2.0 * (cp_bar.powi(7) / (cp_bar.powi(7) + 25f64.powi(7))).sqrt();
    let sl = 1.0 + 0.015 * (l_bar - 50.0).powi(2) / (20.0 + (l_bar - 50.0).powi(2)).sqrt();
    let sc = 1.0 + 0.045 * cp_bar;
    let sh = 1.0 + 0.015 * cp_bar * t;
    let rt = -(2.0 * d_theta).to_radians().sin() * rc;
    ((dl / sl).powi(2) + (dc / sc).powi(2) + (dhh / sh).powi(2) + rt * (dc / sc) * (dhh / sh)).sqrt()
}

/// WCAG 2.1's contrast ratio of two colours.
fn contrast(a: Color32, b: Color32) -> f64 {
    let lum = |c: Color32| 0.2126 * linear(c.r()) + 0.7152 * linear(c.g()) + 0.0722 * linear(c.b());
    let (hi, lo) = if lum(a) >= lum(b) { (lum(a), lum(b)) } else { (lum(b), lum(a)) };
    (hi + 0.05) / (lo + 0.05)
}

/// The categories a stacked bar or the breakdown can draw next to each other: neighbours in
/// [`Category::ALL`]'s order (the order every chart stacks in), and the neighbours a category
/// that can be absent leaves behind — the optimizer state (plain SGD keeps none), the master
/// weights (fp32 has none) and the workspace.
fn side_by_side() -> Vec<(Category, Category)> {
    let can_be_absent = [Category::OptimizerState, Category::MasterWeights, Category::Workspace];
    let all = Category::ALL;
    let mut pairs = Vec::new();
    for (i, &a) in all.iter().enumerate() {
        for &b in &all[i + 1..] {
            pairs.push((a, b));
            if !can_be_absent.contains(&b) {
                break;
            }
        }
    }
    pairs
}

/// The closest side-by-side pair as seen through `deficiency`, with its ΔE00.
fn closest(colour: &dyn Fn(Category) -> Color32, deficiency: &[[f64; 3]; 3]) -> (f64, Category, Category) {
    side_by_side()
        .into_iter()
        .map(|(a, b)| (delta_e_2000(lab(seen(colour(a), deficiency)), lab(seen(colour(b), deficiency))), a, b))
        .min_by(|x, y| x.0.total_cmp(&y.0))
        .expect("pairs")
}

/// The implementation against Sharma, Wu & Dalal's published CIEDE2000 test pairs, and WCAG's
/// extremes.
#[test]
fn the_colour_science_matches_its_references() {
    for (a, b, want) in [
        ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
        ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
        ([60.2574, -34.0099, 36.2677], [60.4626, -34.1751, 39.4387], 1.2644),
        ([22.7233, 20.0904, -46.694], [23.0331, 14.973, -42.5619], 2.0373),
        ([2.0776, 0.0795, -1.135], [0.9033, -0.0636, -0.5514], 0.9082),
    ] {
        let got = delta_e_2000(a, b);
        assert!((got - want).abs() < 5e-4, "ΔE00 {a:?} {b:?}: {got} ≠ {want}");
        assert!((delta_e_2000(b, a) - want).abs() < 5e-4, "symmetric");
    }
    // White is L* 100, black 0; WCAG's extremes are 21:1 and 1:1.
    assert!((lab([1.0; 3])[0] - 100.0).abs() < 1e-3 && lab([0.0; 3])[0].abs() < 1e-9);
    assert!((contrast(Color32::WHITE, Color32::BLACK) - 21.0).abs() < 1e-9);
    assert!((contrast(Color32::from_gray(119), Color32::WHITE) - 4.48).abs() < 0.01, "#777 on white");
    // Each simulation keeps greys grey (its rows sum to 1) and merges what it should: red and
    // green, which are far apart to normal vision, come close under protanopia and deuteranopia.
    let (red, green) = (Color32::from_rgb(200, 60, 60), Color32::from_rgb(110, 130, 30));
    let normal = delta_e_2000(lab(seen(red, &NORMAL)), lab(seen(green, &NORMAL)));
    for (name, m) in &DEFICIENCIES {
        assert!(m.iter().all(|row| (row.iter().sum::<f64>() - 1.0).abs() < 1e-3), "{name}");
        let grey = seen(Color32::from_gray(128), m);
        assert!((grey[0] - grey[1]).abs() < 1e-3 && (grey[1] - grey[2]).abs() < 1e-3, "{name}");
        if *name != "tritanopia" {
            let d = delta_e_2000(lab(seen(red, m)), lab(seen(green, m)));
            assert!(d < normal / 2.0, "{name}: red and green {d} apart (normal vision {normal})");
        }
    }
}

/// Both palettes — the usual one and present mode's (Okabe–Ito) — keep every pair of categories
/// a chart draws side by side at least [`MIN_DELTA_E`] apart, to normal vision and under
/// protanopia, deuteranopia and tritanopia. The check has teeth: seaborn's green for the
/// optimizer state, which the usual palette had, fails it.
#[test]
fn the_categories_stay_apart_for_every_colour_vision() {
    let pairs = side_by_side();
    assert!(pairs.contains(&(Category::Gradients, Category::Activations)), "around absent ones");
    assert!(!pairs.contains(&(Category::Parameters, Category::Activations)));
    for safe in [false, true] {
        use_safe_colours(safe);
        for (name, m) in std::iter::once(("normal vision", &NORMAL)).chain(DEFICIENCIES.iter().map(|(n, m)| (*n, m))) {
            let (d, a, b) = closest(&category_color, m);
            assert!(d >= MIN_DELTA_E, "safe palette {safe}, {name}: {a:?} and {b:?} only {d:.1} ΔE00 apart");
        }
    }
    use_safe_colours(false);
    let seaborn = |c: Category| match c {
        Category::OptimizerState => Color32::from_rgb(85, 168, 104),
        other => category_color(other),
    };
    let (d, a, b) = closest(&seaborn, &DEFICIENCIES[0].1);
    assert!(d < MIN_DELTA_E && (a, b) == (Category::Gradients, Category::OptimizerState), "{d} {a:?} {b:?}");
}

/// The high-contrast theme (also present mode's, for the back of the room) meets WCAG 2.1 AA:
/// text at least 4.5:1 on every surface it is drawn on — panels, windows, the plot, stripes,
/// every state of a control, a selection — and at least 3:1 for what is not text (WCAG 1.4.11):
/// each control's outline on the panel, the focus outline, and every category's chart marks on
/// the plot's background.
#[test]
fn the_high_contrast_theme_meets_wcag_contrast() {
    let v = high_contrast_visuals();
    let text = v.override_text_color.expect("the theme sets the text colour");
    let w = &v.widgets;
    let surfaces = [
        ("panel", v.panel_fill),
        ("window", v.window_fill),
        ("plot", v.extreme_bg_color),
        ("faint", v.faint_bg_color),
        ("selection", v.selection.bg_fill),
        ("a control", w.inactive.weak_bg_fill),
        ("a check box", w.inactive.bg_fill),
        ("a hovered control", w.hovered.weak_bg_fill),
        ("a pressed or focused control", w.active.weak_bg_fill),
        ("an open menu", w.open.weak_bg_fill),
    ];
    for (surface, bg) in surfaces {
        for (what, colour) in
            [("text", text), ("weak text", v.weak_text_color.unwrap_or(text)), ("link", v.hyperlink_color)]
        {
            let ratio = contrast(colour, bg);
            assert!(ratio >= 4.5, "{what} on {surface}: {ratio:.2}:1");
        }
    }
    for (what, stroke) in [
        ("a control's outline", w.inactive.bg_stroke),
        ("a hovered control's outline", w.hovered.bg_stroke),
        ("the focus outline", w.active.bg_stroke),
        ("a separator", w.noninteractive.bg_stroke),
        ("a window's frame", v.window_stroke),
    ] {
        let ratio = contrast(stroke.color, v.panel_fill);
        assert!(ratio >= 3.0 && stroke.width >= 1.0, "{what}: {ratio:.2}:1, {} wide", stroke.width);
    }
    use_safe_colours(true);
    for c in Category::ALL {
        let ratio = contrast(category_color(c), v.extreme_bg_color);
        assert!(ratio >= 3.0, "{c:?} on the plot background: {ratio:.2}:1");
    }
    use_safe_colours(false);
    // The check has teeth: egui's own dark theme fails it (its outlines are 1.8:1).
    let dark = egui::Visuals::dark();
    assert!(contrast(dark.widgets.noninteractive.bg_stroke.color, dark.panel_fill) < 3.0);
}

/// Warnings drawn in the theme's warning colour (a class's join flood on the projector) read as
/// text, at least 4.5:1, on the usual dark panel and on high contrast's.
#[test]
fn warnings_read_on_every_theme() {
    for (theme, v) in [("dark", egui::Visuals::dark()), ("high contrast", high_contrast_visuals())] {
        let ratio = contrast(v.warn_fg_color, v.panel_fill);
        assert!(ratio >= 4.5, "{theme}: the warning colour on the panel is {ratio:.2}:1");
    }
}
