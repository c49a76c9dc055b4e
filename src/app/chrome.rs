//! The chrome around the views: the language and its fonts, the notices and the status line,
//! the phone's drawer, the projector's present mode, the shortcuts window and the window
//! screenshot an export waits for.

use std::sync::{Arc, Mutex};

use egui::Color32;

use super::Notice;
use super::lang::{FetchedFont, OnDemandFonts, choose_lang};
use super::settings::Prefs;
use crate::i18n::{Catalog, Lang};

/// Below this width (points) the app lays out for a phone: controls in a drawer.
pub const NARROW_WIDTH: f32 = 700.0;
/// The height of a touch target on a phone (Apple and Google ask for about 44 points).
pub const TOUCH_SIZE: f32 = 44.0;

/// A window screenshot the integration delivers, waiting to be saved as PNG.
pub(super) type ScreenshotSlot = Arc<Mutex<Option<Arc<egui::ColorImage>>>>;

pub struct Chrome {
    /// The words of the language the user reads (`i18n/`).
    pub catalog: Catalog,
    /// The Chinese font and the names font: embedded (desktop) or fetched on demand (web).
    pub(super) fonts: OnDemandFonts,
    /// A language chosen while its font is still on its way.
    pub(super) pending_lang: Option<Lang>,
    /// The fonts must be (re)installed: the first frame, and when the Chinese font arrives.
    pub(super) fonts_stale: bool,
    /// The lines above the views: why there is no GPU, what a link could not use, …
    pub notices: Vec<Notice>,
    /// The last export's outcome, for the status line.
    pub status: Option<Notice>,
    /// On a narrow screen: whether the controls' drawer covers the views.
    pub drawer_open: bool,
    /// The layout last drawn (narrow or not), to log a change once.
    narrow: Option<bool>,
    /// The live line a screen reader announces: a finished step, an error, a revealed answer.
    pub announcer: super::a11y::Announcer,
    /// Whether the "?" list of keyboard shortcuts is open.
    pub show_shortcuts: bool,
    /// The look before present mode or high contrast, to restore when it ends.
    visuals_before_present: Option<egui::Visuals>,
    /// Whether the styles are set for reduced motion (None: not yet set).
    reduced_motion: Option<bool>,
    drew_first_frame: bool,
    pub(super) screenshot: ScreenshotSlot,
    /// Where exports go on the desktop (None: `$OOMLAB_EXPORT_DIR` or the current directory).
    pub export_dir: Option<std::path::PathBuf>,
}

impl Chrome {
    pub fn new(notices: Vec<Notice>) -> Self {
        Self {
            catalog: Catalog::new(Lang::En),
            fonts: OnDemandFonts::initial(),
            pending_lang: None,
            fonts_stale: true,
            notices,
            status: None,
            drawer_open: false,
            narrow: None,
            show_shortcuts: false,
            announcer: Default::default(),
            visuals_before_present: None,
            reduced_motion: None,
            drew_first_frame: false,
            screenshot: Arc::default(),
            export_dir: None,
        }
    }

    /// Sets up a frame: the first frame's log line, the text size (and present mode's zoom),
    /// the high-contrast theme and the colour-blind-safe palette (present mode or the
    /// preference), reduced motion, and the phone's touch-sized layout. Returns whether the
    /// layout is a phone's.
    pub fn begin_frame(&mut self, ui: &mut egui::Ui, prefs: Prefs, engine: &str) -> bool {
        let projector = prefs.projector;
        if !self.drew_first_frame {
            self.drew_first_frame = true;
            log::info!("oomlab: first frame ({engine})");
        }
        // Text at 200 % zooms the whole layout, as a browser's zoom does (WCAG 1.4.4): nothing
        // is clipped, because a narrower window in points lays out for a phone.
        ui.ctx().set_zoom_factor(prefs.text_scale() * if projector { 1.5 } else { 1.0 });
        // High contrast; leaving it restores the look the app had.
        let contrast = projector || prefs.high_contrast;
        match (contrast, self.visuals_before_present.is_some()) {
            (true, false) => {
                self.visuals_before_present = Some(ui.ctx().global_style().visuals.clone());
                ui.ctx().set_visuals(high_contrast_visuals());
            }
            (false, true) => {
                if let Some(v) = self.visuals_before_present.take() {
                    ui.ctx().set_visuals(v);
                }
            }
            _ => {}
        }
        super::views::use_safe_colours(contrast);
        if self.reduced_motion != Some(prefs.reduced_motion) {
            self.reduced_motion = Some(prefs.reduced_motion);
            let usual = egui::Style::default();
            ui.ctx().all_styles_mut(|s| {
                (s.animation_time, s.scroll_animation) = if prefs.reduced_motion {
                    (0.0, egui::style::ScrollAnimation::none())
                } else {
                    (usual.animation_time, usual.scroll_animation)
                };
            });
        }
        // A phone: the controls become a drawer over the views, and everything is touch-sized.
        let narrow = ui.available_width() < NARROW_WIDTH;
        if self.narrow != Some(narrow) {
            self.narrow = Some(narrow);
            let how = if narrow {
                "a phone's: the controls in a drawer"
            } else {
                "a wide screen's: the controls beside the views"
            };
            log::info!("oomlab: layout for {how} ({:.0} points wide)", ui.available_width());
        }
        if narrow {
            let spacing = &mut ui.style_mut().spacing;
            spacing.interact_size.y = TOUCH_SIZE;
            spacing.button_padding = egui::vec2(10.0, 10.0);
        }
        narrow
    }

    /// Whether the last frame was laid out for a phone.
    pub fn is_narrow(&self) -> bool {
        self.narrow == Some(true)
    }

    /// The notices, in the reader's language.
    pub fn notices_ui(&self, ui: &mut egui::Ui) {
        for n in &self.notices {
            ui.colored_label(Color32::from_rgb(230, 160, 0), n.text(&self.catalog));
        }
    }

    /// The "?" list of shortcuts.
    pub fn shortcuts_window(&mut self, ctx: &egui::Context) {
        if !self.show_shortcuts {
            return;
        }
        let mut open = true;
        let id = egui::Id::unique("oomlab_keys_window");
        let title = self.tr("keys-title");
        egui::Window::new(&title).id(id).collapsible(false).resizable(false).open(&mut open).show(ctx, |ui| {
            for key in super::keys::SHORTCUTS {
                ui.label(self.tr(key));
            }
        });
        super::a11y::name_title_bar(ctx, id, &title);
        self.show_shortcuts = open;
    }
}

/// The language shown, and the fonts behind it (chosen and fetched as [`super::lang`] says).
impl Chrome {
    /// The language to start in: a shared link's `lang=` (web), else the one chosen last time,
    /// else the system's (`LANG` on the desktop, `navigator.language` in a browser), else English.
    pub(super) fn initial_lang(cc: &eframe::CreationContext<'_>) -> Lang {
        let stored = super::store::get::<Lang>(cc, "lang");
        #[cfg(not(target_arch = "wasm32"))]
        let (linked, system) = (None, Lang::from_env());
        #[cfg(target_arch = "wasm32")]
        let (linked, system) = {
            let window = web_sys::window();
            (
                window.as_ref().and_then(|w| w.location().hash().ok()).and_then(|h| Lang::from_url_hash(&h)),
                window.and_then(|w| w.navigator().language()).and_then(|l| Lang::from_locale(&l)),
            )
        };
        choose_lang(linked, stored, system)
    }

    /// Switches the language shown; whether it changed now. Chinese waits for its font (web:
    /// fetched now if it is not here yet).
    pub fn set_lang(&mut self, lang: Lang) -> bool {
        if lang == Lang::Zh && !matches!(self.fonts.cjk, FetchedFont::Ready(_)) {
            self.pending_lang = Some(lang);
            self.fonts.cjk.fetch(super::fonts::CJK_URL);
            return false;
        }
        self.pending_lang = None;
        if self.catalog.lang() == lang {
            return false;
        }
        self.catalog = Catalog::new(lang);
        true
    }

    /// The language shown now (a language waiting for its font is not shown yet).
    pub fn lang(&self) -> Lang {
        self.catalog.lang()
    }

    /// A message of the current language's catalog.
    pub(super) fn tr(&self, key: &str) -> String {
        self.catalog.text(key)
    }

    /// Asks for the font students' names are drawn with when `wanted` (the teacher's list of
    /// students is open; web: fetched now if it is not here yet, and installed when it arrives).
    pub fn want_names_font(&mut self, wanted: bool) {
        if wanted {
            self.fonts.names.fetch(super::fonts::NAMES_URL);
        }
    }

    /// Installs the fonts on the first frame and again once a fetched font has arrived;
    /// applies a language that was waiting for it (whether the language changed).
    pub(super) fn poll_fonts(&mut self, ctx: &egui::Context) -> bool {
        let mut waiting = false;
        match self.fonts.cjk.arrived("Chinese") {
            Some(Ok(())) => self.fonts_stale = true,
            Some(Err(e)) => {
                self.notices.push(super::Notice::msg("notice-font-failed", &[("error", e.to_string().into())]));
                self.pending_lang = None;
            }
            None => waiting |= matches!(self.fonts.cjk, FetchedFont::Fetching(_)),
        }
        match self.fonts.names.arrived("names") {
            Some(Ok(())) => self.fonts_stale = true,
            // Names are then drawn with the fonts there are; the list still works.
            Some(Err(_)) => {}
            None => waiting |= matches!(self.fonts.names, FetchedFont::Fetching(_)),
        }
        if waiting {
            ctx.request_repaint_after(std::time::Duration::from_millis(100));
        }
        if self.fonts_stale {
            self.fonts_stale = false;
            ctx.set_fonts(super::fonts::definitions(self.fonts.cjk.ready(), self.fonts.names.ready()));
            // The new fonts take effect from the next frame: show the waiting language then.
            if self.pending_lang.is_some() {
                ctx.request_repaint();
            }
        } else if let Some(lang) = self.pending_lang.filter(|_| matches!(self.fonts.cjk, FetchedFont::Ready(_))) {
            let changed = self.set_lang(lang);
            self.report_coverage(ctx);
            return changed;
        }
        false
    }

    /// Logs how many of the catalog's characters the installed fonts lack (the browser test
    /// reads this line: it must say 0).
    fn report_coverage(&self, ctx: &egui::Context) {
        // Not what only native code says (the students' page, HTML with the phone's fonts; the
        // CLI, in a terminal's): scripts/subset-font.sh leaves them out of the app's font.
        let native = |l: &str| crate::i18n::NATIVE_ONLY.iter().any(|p| l.starts_with(p));
        let text = crate::i18n::zh_source().lines().filter(|l| !native(l));
        let font = egui::FontId::proportional(14.0);
        let missing = ctx.fonts_mut(|f| {
            let mut missing: Vec<char> =
                text.flat_map(str::chars).filter(|c| !c.is_control() && !f.has_glyph(&font, *c)).collect();
            missing.sort_unstable();
            missing.dedup();
            missing
        });
        log::info!(
            "oomlab: showing {}; characters of its catalog missing from the fonts: {} {:?}",
            self.lang().native_name(),
            missing.len(),
            missing.iter().take(20).collect::<String>()
        );
    }

    /// The language switch of the top bar; whether the language changed.
    pub(super) fn language_switch(&mut self, ui: &mut egui::Ui) -> bool {
        let mut lang = self.pending_lang.unwrap_or(self.lang());
        egui::ComboBox::from_id_salt("language")
            .selected_text(lang.native_name())
            .show_ui(ui, |ui| {
                for l in Lang::ALL {
                    ui.selectable_value(&mut lang, l, l.native_name());
                }
            })
            .response
            .on_hover_text(self.tr("language"));
        if self.pending_lang.is_some() {
            ui.label(self.tr("font-loading"));
        }
        lang != self.pending_lang.unwrap_or(self.lang()) && self.set_lang(lang)
    }
}

/// The high-contrast theme, also present mode's, for the back of the room: white text on black,
/// strong outlines round every control and a yellow one round the focused or hovered control.
/// Its contrast is checked in tests/colour.rs: 4.5:1 for text on every surface, 3:1 for
/// controls' outlines and the chart marks (WCAG 1.4.3 and 1.4.11).
pub fn high_contrast_visuals() -> egui::Visuals {
    use egui::Stroke;
    let mut v = egui::Visuals::dark();
    v.override_text_color = Some(Color32::WHITE);
    v.weak_text_color = Some(Color32::from_gray(210));
    v.panel_fill = Color32::BLACK;
    v.window_fill = Color32::BLACK;
    v.extreme_bg_color = Color32::BLACK;
    v.faint_bg_color = Color32::from_gray(28);
    v.window_stroke = Stroke::new(2.0, Color32::WHITE);
    v.hyperlink_color = Color32::from_rgb(130, 200, 255);
    v.selection.bg_fill = Color32::from_rgb(0, 70, 170);
    v.selection.stroke = Stroke::new(2.0, Color32::WHITE);
    let focus = Color32::from_rgb(255, 220, 0);
    let w = &mut v.widgets;
    w.noninteractive.bg_stroke = Stroke::new(1.0, Color32::from_gray(170));
    w.noninteractive.fg_stroke = Stroke::new(1.0, Color32::WHITE);
    for (state, fill, outline) in [
        (&mut w.inactive, Color32::from_gray(24), Stroke::new(1.5, Color32::from_gray(200))),
        (&mut w.hovered, Color32::from_gray(40), Stroke::new(2.0, focus)),
        (&mut w.active, Color32::from_gray(56), Stroke::new(2.5, focus)),
        (&mut w.open, Color32::from_gray(40), Stroke::new(2.0, Color32::WHITE)),
    ] {
        state.weak_bg_fill = fill;
        state.bg_fill = fill;
        state.bg_stroke = outline;
        state.fg_stroke = Stroke::new(outline.width.max(1.5), Color32::WHITE);
    }
    v
}

/// eframe's wgpu configuration, with `SUBGROUP` requested where the adapter has it, so that the
/// app's device can run the subgroup GEMM (`GemmKind::Subgroup8`) like the CLI's.
#[cfg(not(target_arch = "wasm32"))]
pub fn wgpu_configuration() -> eframe::egui_wgpu::WgpuConfiguration {
    let mut config = eframe::egui_wgpu::WgpuConfiguration::default();
    if let eframe::egui_wgpu::WgpuSetup::CreateNew(create) = &mut config.wgpu_setup {
        let base = create.device_descriptor.clone();
        create.device_descriptor = std::sync::Arc::new(move |adapter| {
            let mut desc = base(adapter);
            desc.required_features |= crate::backend::gpu::context::subgroup_feature(adapter);
            desc
        });
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_without_its_font_waits_and_english_needs_none() {
        let mut chrome = Chrome::new(Vec::new());
        assert_eq!(chrome.lang(), Lang::En);
        assert!(!chrome.set_lang(Lang::En), "already English");
        let had_font = matches!(chrome.fonts.cjk, FetchedFont::Ready(_));
        // The desktop embeds the Chinese font: it switches at once.
        assert_eq!(chrome.set_lang(Lang::Zh), had_font);
        assert_eq!(chrome.lang() == Lang::Zh, had_font);
        assert!(chrome.set_lang(Lang::En) == had_font);
    }
}
