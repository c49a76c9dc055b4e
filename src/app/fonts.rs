//! The app's fonts, the same on every platform: subsets of egui's two default fonts (Latin,
//! Greek, punctuation, arrows, math), for Chinese a subset of Noto Sans SC, and for students'
//! names a larger one — all four made by `scripts/subset-font.sh` from `i18n/`. The web build
//! carries only the two Latin subsets (egui's full fonts cost 320 kB of its gzipped budget); it
//! fetches the Chinese one when Chinese is chosen, the names one when the teacher opens the list
//! of students. The desktop embeds all four.

use std::sync::Arc;

use egui::{FontData, FontDefinitions, FontFamily};

/// Ubuntu Light (Ubuntu Font Licence), cut down and renamed as the licence asks.
#[cfg(not(target_arch = "wasm32"))]
pub const SANS: &[u8] = include_bytes!("../../i18n/fonts/UbuntuLight-derivative-oomlab.ttf");
/// Hack (MIT + Bitstream Vera licence), cut down and renamed.
#[cfg(not(target_arch = "wasm32"))]
pub const MONO: &[u8] = include_bytes!("../../i18n/fonts/Hack-oomlab.ttf");
/// The web build's: the same glyphs without the fonts' hinting programs (43 kB less of the
/// gzipped module); egui's font reader grid-fits them with its auto-hinter instead.
#[cfg(target_arch = "wasm32")]
pub const SANS: &[u8] = include_bytes!("../../i18n/fonts/UbuntuLight-derivative-oomlab-web.ttf");
#[cfg(target_arch = "wasm32")]
pub const MONO: &[u8] = include_bytes!("../../i18n/fonts/Hack-oomlab-web.ttf");
/// Noto Sans SC (SIL OFL 1.1), cut down to the Chinese catalog's characters.
#[cfg(not(target_arch = "wasm32"))]
pub const CJK: &[u8] = include_bytes!("../../i18n/fonts/NotoSansSC-oomlab.otf");
/// Where the web build fetches the Chinese font from (next to `index.html`; `web/build.sh`
/// copies it there and the service worker caches it).
pub const CJK_URL: &str = "NotoSansSC-oomlab.otf";
/// Where the web build fetches the Chinese catalog from, with the font (`web/build.sh` copies
/// `i18n/zh.ftl` there).
pub const ZH_CATALOG_URL: &str = "zh.ftl";

/// Noto Sans SC cut to what students' names are written in (GB2312's hanzi, Latin with its
/// extensions, Greek, Cyrillic, kana): a name is any text a student types, and the catalog's
/// subset would draw most Chinese names as boxes. Only the teacher's list of students needs it.
#[cfg(not(target_arch = "wasm32"))]
pub const NAMES: &[u8] = include_bytes!("../../i18n/fonts/NotoSansSC-names-oomlab.otf");
/// Where the web build fetches the names font from (beside the Chinese one).
pub const NAMES_URL: &str = "NotoSansSC-names-oomlab.otf";

/// The font definitions: the Latin subsets first, then the CJK font and the names font when
/// there are, so Latin text keeps egui's familiar glyphs, Chinese falls through to Noto, and a
/// name's rarer characters to the larger cut.
pub fn definitions(cjk: Option<Arc<FontData>>, names: Option<Arc<FontData>>) -> FontDefinitions {
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
    if let Some(names) = names {
        fonts.font_data.insert("noto-sans-sc-names".into(), names);
        proportional.push("noto-sans-sc-names".into());
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

/// The names font this build has without fetching anything: the desktop's embedded one.
pub fn embedded_names() -> Option<Arc<FontData>> {
    #[cfg(not(target_arch = "wasm32"))]
    return Some(Arc::new(FontData::from_static(NAMES)));
    #[cfg(target_arch = "wasm32")]
    None
}

/// Both fonts this build has without fetching anything, as [`definitions`] takes them.
pub fn embedded() -> FontDefinitions {
    definitions(embedded_cjk(), embedded_names())
}
