//! The app's fonts, the same on every platform: subsets of egui's two default fonts (Latin,
//! Greek, punctuation, arrows, math) and, for Chinese, a subset of Noto Sans SC — all three made
//! by `scripts/subset-font.sh` from `i18n/`. The web build carries only the two Latin subsets
//! (egui's full fonts cost 320 kB of its gzipped budget); it fetches the Chinese one when Chinese
//! is chosen. The desktop embeds all three.

use std::sync::Arc;

use egui::{FontData, FontDefinitions, FontFamily};

/// Ubuntu Light (Ubuntu Font Licence), cut down and renamed as the licence asks.
pub const SANS: &[u8] = include_bytes!("../../i18n/fonts/UbuntuLight-derivative-oomlab.ttf");
/// Hack (MIT + Bitstream Vera licence), cut down and renamed.
pub const MONO: &[u8] = include_bytes!("../../i18n/fonts/Hack-oomlab.ttf");
/// Noto Sans SC (SIL OFL 1.1), cut down to the Chinese catalog's characters.
#[cfg(not(target_arch = "wasm32"))]
pub const CJK: &[u8] = include_bytes!("../../i18n/fonts/NotoSansSC-oomlab.otf");
/// Where the web build fetches the Chinese font from (next to `index.html`; `web/build.sh`
/// copies it there and the service worker caches it).
pub const CJK_URL: &str = "NotoSansSC-oomlab.otf";

/// The font definitions: the Latin subsets first, then the CJK font when there is one, so Latin
/// text keeps egui's familiar glyphs and Chinese falls through to Noto.
pub fn definitions(cjk: Option<Arc<FontData>>) -> FontDefinitions {
    let mut fonts = FontDefinitions::empty();
    fonts.font_data.insert("oomlab-sans".into(), Arc::new(FontData::from_static(SANS)));
    fonts.font_data.insert("oomlab-mono".into(), Arc::new(FontData::from_static(MONO)));
    let mut proportional = vec!["oomlab-sans".to_string()];
    // Monospace falls back to the sans font for the symbols Hack lacks, as egui's defaults do.
    let mut monospace = vec!["oomlab-mono".to_string(), "oomlab-sans".to_string()];
    if let Some(cjk) = cjk {
        fonts.font_data.insert("noto-sans-sc".into(), cjk);
        proportional.push("noto-sans-sc".into());
        monospace.push("noto-sans-sc".into());
    }
    fonts.families.insert(FontFamily::Proportional, proportional);
    fonts.families.insert(FontFamily::Monospace, monospace);
    fonts
}

/// The CJK font this build has without fetching anything: the desktop's embedded one.
pub fn embedded_cjk() -> Option<Arc<FontData>> {
    #[cfg(not(target_arch = "wasm32"))]
    return Some(Arc::new(FontData::from_static(CJK)));
    #[cfg(target_arch = "wasm32")]
    None
}
