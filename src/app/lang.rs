//! The language the app shows: choosing it (a shared link's `lang=`, the remembered choice, the
//! system's or browser's language), the switch in the top bar, and the Chinese font behind it —
//! embedded on the desktop, fetched by the web build the first time Chinese is wanted, so that
//! English readers never download it. Until the font has arrived the app stays in the language
//! it was showing (Chinese without its font would be boxes); a failed fetch says so and stays.

use std::sync::{Arc, Mutex};

use crate::i18n::Lang;

use super::fonts;

/// Why a font or catalog fetched on demand did not arrive; the browser's own words quoted where
/// it gave some.
#[derive(Clone, Debug, thiserror::Error)]
pub enum FetchError {
    /// The server answered with an error status.
    #[error("HTTP {0}")]
    Status(u16),
    /// The browser refused or failed the request, in its own words.
    #[error("{0}")]
    Browser(String),
    /// The Chinese catalog arrived, but not as UTF-8 text.
    #[error("the catalog is not UTF-8 text")]
    NotText,
    /// The desktop embeds its fonts: nothing is fetched.
    #[error("this build has no font to fetch ({0})")]
    NotInThisBuild(&'static str),
}

/// Where a fetch leaves the font's bytes, or why it failed.
type FetchSlot = Arc<Mutex<Option<Result<Vec<u8>, FetchError>>>>;

/// Where a font fetched on demand stands: the Chinese one, or the names one.
pub(super) enum FetchedFont {
    /// In memory: the desktop's embedded copy, or the web's fetched one.
    Ready(Arc<egui::FontData>),
    /// Not fetched yet (web).
    NotLoaded,
    /// A fetch in flight; its result lands in the slot.
    Fetching(FetchSlot),
    /// The fetch failed; the app stays in the language it had (or draws names as it can).
    Failed,
}

impl FetchedFont {
    fn from(embedded: Option<Arc<egui::FontData>>) -> Self {
        embedded.map_or(FetchedFont::NotLoaded, FetchedFont::Ready)
    }

    pub(super) fn ready(&self) -> Option<Arc<egui::FontData>> {
        match self {
            FetchedFont::Ready(f) => Some(Arc::clone(f)),
            _ => None,
        }
    }

    /// Starts fetching the font from `url` if it is not here yet (web; the desktop embeds it).
    /// The service worker caches the response, so a classroom's second visit works offline too.
    pub(super) fn fetch(&mut self, url: &'static str) {
        if !matches!(self, FetchedFont::NotLoaded) {
            return;
        }
        let slot: FetchSlot = Arc::new(Mutex::new(None));
        #[cfg(target_arch = "wasm32")]
        {
            let out = Arc::clone(&slot);
            wasm_bindgen_futures::spawn_local(async move {
                // The Chinese catalog comes with the Chinese font: the language needs both.
                let catalog = if url == fonts::CJK_URL { Some(fetch_bytes(fonts::ZH_CATALOG_URL).await) } else { None };
                let result = match catalog {
                    Some(Ok(text)) => match String::from_utf8(text) {
                        Ok(text) => {
                            crate::i18n::set_zh_catalog(text);
                            fetch_bytes(url).await
                        }
                        Err(_) => Err(FetchError::NotText),
                    },
                    Some(Err(e)) => Err(e),
                    None => fetch_bytes(url).await,
                };
                if let Ok(mut s) = out.lock() {
                    *s = Some(result);
                }
            });
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Ok(mut s) = slot.lock() {
            *s = Some(Err(FetchError::NotInThisBuild(url)));
        }
        *self = FetchedFont::Fetching(slot);
    }

    /// Takes a finished fetch: `Some(Ok)` when the font arrived, `Some(Err)` when it failed,
    /// `None` while there is nothing new.
    pub(super) fn arrived(&mut self, what: &str) -> Option<Result<(), FetchError>> {
        let FetchedFont::Fetching(slot) = self else { return None };
        let done = slot.lock().ok().and_then(|mut s| s.take())?;
        Some(match done {
            Ok(bytes) => {
                log::info!("oomlab: {what} font fetched ({} bytes)", bytes.len());
                *self = FetchedFont::Ready(Arc::new(egui::FontData::from_owned(bytes)));
                Ok(())
            }
            Err(e) => {
                log::warn!("oomlab: {what} font not fetched: {e}");
                *self = FetchedFont::Failed;
                Err(e)
            }
        })
    }
}

/// The fonts the app fetches on demand.
pub(super) struct OnDemandFonts {
    /// The Chinese catalog's font: for the language.
    pub(super) cjk: FetchedFont,
    /// The names font: for the teacher's list of students.
    pub(super) names: FetchedFont,
}

impl OnDemandFonts {
    pub(super) fn initial() -> Self {
        OnDemandFonts {
            cjk: FetchedFont::from(fonts::embedded_cjk()),
            names: FetchedFont::from(fonts::embedded_names()),
        }
    }
}

/// Puts `link` (a `#…` fragment) in the page's address without reloading, so that a copied
/// link or a reload opens what the page shows (web; nothing on the desktop).
pub(super) fn set_page_link(link: &str) {
    #[cfg(target_arch = "wasm32")]
    if let Some(w) = web_sys::window() {
        let _ = w.history().and_then(|h| h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(link)));
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = link;
}
/// The address of the page the web app runs in, without its fragment (`https://host/path/`):
/// what a shared link starts with. `None` on the desktop, which has no address of its own.
pub(super) fn page_address() -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    {
        let location = web_sys::window()?.location();
        let (origin, path) = (location.origin().ok()?, location.pathname().ok()?);
        origin.starts_with("http").then(|| format!("{origin}{path}"))
    }
    #[cfg(not(target_arch = "wasm32"))]
    None
}

/// The first language: a link's over the remembered one over the system's, else English.
pub fn choose_lang(linked: Option<Lang>, stored: Option<Lang>, system: Option<Lang>) -> Lang {
    linked.or(stored).or(system).unwrap_or_default()
}

/// The service worker's cache (`web/sw.js`'s `CACHE`: keep the two equal).
#[cfg(target_arch = "wasm32")]
const SW_CACHE: &str = "oomlab-v1";

/// GETs `url` relative to the page, and keeps the response in the service worker's cache.
#[cfg(target_arch = "wasm32")]
async fn fetch_bytes(url: &str) -> Result<Vec<u8>, FetchError> {
    use wasm_bindgen::JsCast;
    let browser = |e: wasm_bindgen::JsValue| FetchError::Browser(format!("{e:?}"));
    let window = web_sys::window().ok_or_else(|| FetchError::Browser("no window".into()))?;
    let response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(url)).await.map_err(browser)?;
    let response: web_sys::Response = response.dyn_into().map_err(browser)?;
    if !response.ok() {
        return Err(FetchError::Status(response.status()));
    }
    // Into the service worker's cache ourselves: on a first visit the worker may not control
    // the page yet, and then it never sees this request. Best effort: a page without the Cache
    // API still shows the font, it just will not have it offline.
    if let (Ok(copy), Ok(caches)) = (response.clone(), window.caches()) {
        let put = async {
            let cache = wasm_bindgen_futures::JsFuture::from(caches.open(SW_CACHE)).await?;
            let cache: web_sys::Cache = cache.dyn_into()?;
            wasm_bindgen_futures::JsFuture::from(cache.put_with_str(url, &copy)).await
        };
        if let Err(e) = put.await {
            log::warn!("oomlab: the Chinese font is not cached for offline use: {e:?}");
        }
    }
    let buffer = response.array_buffer().map_err(browser)?;
    let buffer = wasm_bindgen_futures::JsFuture::from(buffer).await.map_err(browser)?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}
