//! The app's words in English and Simplified Chinese: Fluent catalogs (`i18n/en.ftl`,
//! `i18n/zh.ftl`) compiled into the binary, and the language a user reads.
//!
//! Fluent (`fluent-bundle`, Mozilla's) rather than a hand-made map: it carries arguments,
//! plural rules per language and a file format translators know. A message missing from a
//! catalog falls back to English, then to its key — a label is never blank — and
//! `tests/i18n.rs` fails on any such gap, so the fallback is never what a user sees.
//!
//! A leaf module like `units`: any layer may use it.

use fluent_bundle::{FluentArgs, FluentBundle, FluentResource, FluentValue};

/// English, compiled in (without its comment lines: `build.rs`). The web build's leaves out the
/// messages only native code says ([`NATIVE_ONLY`]).
#[cfg(not(target_arch = "wasm32"))]
pub const EN_FTL: &str = include_str!(concat!(env!("OUT_DIR"), "/i18n/en.ftl"));
#[cfg(target_arch = "wasm32")]
pub const EN_FTL: &str = include_str!(concat!(env!("OUT_DIR"), "/i18n/en-web.ftl"));

/// The message prefixes only native code words (the class server's student page, the toy CLI's
/// refusals, the serving estimate's until the app shows serving): the web module's English leaves
/// them out (`build.rs` keeps the same list).
pub const NATIVE_ONLY: &[&str] = &["student-", "cli-", "serve-", "serving-"];
/// Simplified Chinese, compiled in on the desktop. The web build fetches it with the Chinese
/// font, the first time Chinese is wanted ([`set_zh_catalog`]): 23 kB of its gzipped module.
#[cfg(not(target_arch = "wasm32"))]
pub const ZH_FTL: &str = include_str!(concat!(env!("OUT_DIR"), "/i18n/zh.ftl"));

/// The fetched Chinese catalog (web).
#[cfg(target_arch = "wasm32")]
static ZH_FETCHED: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Hands the web build the Chinese catalog it fetched (kept for the page's life).
#[cfg(target_arch = "wasm32")]
pub fn set_zh_catalog(text: String) {
    let _ = ZH_FETCHED.set(Box::leak(text.into_boxed_str()));
}

/// The Chinese catalog's text: compiled in, or (web) fetched; English until it has arrived.
pub fn zh_source() -> &'static str {
    #[cfg(not(target_arch = "wasm32"))]
    return ZH_FTL;
    #[cfg(target_arch = "wasm32")]
    return ZH_FETCHED.get().copied().unwrap_or(EN_FTL);
}

/// A language the app speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Zh];

    /// The code in a shared link (`lang=zh`) and a BCP 47 tag's primary subtag.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }

    /// The language's own name, as the switch shows it.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "简体中文",
        }
    }

    /// The language of a locale as browsers (`navigator.language`: "zh-CN") and POSIX
    /// (`LANG`: "zh_CN.UTF-8") write it; `None` for one the app does not speak.
    pub fn from_locale(locale: &str) -> Option<Lang> {
        let primary = locale.trim().split(['-', '_', '.', '@']).next().unwrap_or("").to_ascii_lowercase();
        match primary.as_str() {
            "en" => Some(Lang::En),
            "zh" => Some(Lang::Zh),
            _ => None,
        }
    }

    /// The system's language as POSIX sets it (`LC_ALL`, then `LC_MESSAGES`, then `LANG`: the
    /// first that is set decides); `None` for a language the app does not speak.
    pub fn from_env() -> Option<Lang> {
        ["LC_ALL", "LC_MESSAGES", "LANG"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.is_empty())
            .and_then(|v| Lang::from_locale(&v))
    }

    /// The `lang=` field of a URL hash (`#s=…&lang=zh`); `None` when there is none or it names a
    /// language the app does not speak (a tampered link is ignored, not obeyed).
    pub fn from_url_hash(hash: &str) -> Option<Lang> {
        let hash = hash.trim().trim_start_matches('#');
        let value = hash.split('&').find_map(|kv| kv.strip_prefix("lang="))?;
        // Only the codes the link itself writes, so "lang=zh_evil" is not read as Chinese.
        Lang::ALL.into_iter().find(|l| l.code() == value)
    }

    fn source(self) -> &'static str {
        match self {
            Lang::En => EN_FTL,
            Lang::Zh => zh_source(),
        }
    }
}

/// One language's messages, with English behind it for any message it lacks.
pub struct Catalog {
    lang: Lang,
    bundle: FluentBundle<FluentResource>,
    english: Option<Box<Catalog>>,
}

impl Catalog {
    pub fn new(lang: Lang) -> Self {
        // The catalogs are compiled in and parsed by the tests; should one still hold a syntax
        // error, Fluent keeps every message it could read (the rest fall back).
        let resource = FluentResource::try_new(lang.source().to_string()).unwrap_or_else(|(partial, _)| partial);
        // A constant, well-formed tag: the default ("und") is never used.
        let tag: unic_langid::LanguageIdentifier = lang.code().parse().unwrap_or_default();
        let mut bundle = FluentBundle::new(vec![tag]);
        // No Unicode isolation marks around arguments: egui would draw them as boxes.
        bundle.set_use_isolating(false);
        // Both catalogs hold distinct ids (tested), so adding cannot clash.
        let _ = bundle.add_resource(resource);
        let english = (lang != Lang::En).then(|| Box::new(Catalog::new(Lang::En)));
        Self { lang, bundle, english }
    }

    pub fn lang(&self) -> Lang {
        self.lang
    }

    /// Whether this language's own catalog has `key` (no fallback).
    pub fn has(&self, key: &str) -> bool {
        self.bundle.has_message(key)
    }

    /// The message `key` with arguments given as text (numbers already written out).
    pub fn format_text(&self, key: &str, args: &[(&'static str, String)]) -> String {
        let args: Vec<_> = args.iter().map(|(k, v)| (*k, v.as_str().into())).collect();
        self.format(key, &args)
    }

    /// The message `key` without arguments.
    pub fn text(&self, key: &str) -> String {
        self.format(key, &[])
    }

    /// The message `key` with its arguments: `("op", "h.0.attn".into())`, `("count", 3.into())`.
    pub fn format(&self, key: &str, args: &[(&str, FluentValue<'_>)]) -> String {
        let Some(pattern) = self.bundle.get_message(key).and_then(|m| m.value()) else {
            return match &self.english {
                Some(en) => en.format(key, args),
                None => {
                    // A test build fails here (every view is rendered by the tests); a release
                    // shows the key, never a blank label.
                    debug_assert!(false, "no message {key:?} in the English catalog");
                    key.to_string()
                }
            };
        };
        let mut fluent_args = FluentArgs::new();
        for (name, value) in args {
            fluent_args.set(*name, value.clone());
        }
        let mut errors = Vec::new();
        let text = self.bundle.format_pattern(pattern, Some(&fluent_args), &mut errors).into_owned();
        // An argument the message uses but the caller did not supply: Fluent writes `{$name}`
        // in its place. The tests render every view, so a test build fails on it instead.
        debug_assert!(errors.is_empty(), "message {key:?} ({}): {errors:?}", self.lang.code());
        text
    }
}

thread_local! {
    /// English, parsed once per thread.
    static ENGLISH: Catalog = Catalog::new(Lang::En);
}

/// `f` with the English catalog: the words of the CLI, the JSON and errors' `Display`.
pub fn with_english<R>(f: impl FnOnce(&Catalog) -> R) -> R {
    ENGLISH.with(f)
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("lang", &self.lang).finish_non_exhaustive()
    }
}
