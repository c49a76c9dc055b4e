//! What the app remembers between runs: the settings, the language, the challenges done and
//! whether the welcome was seen. On the desktop: eframe's storage (its RON file). In the browser:
//! the page's `localStorage`, as JSON under `oomlab.<key>`. The web module already reads and
//! writes JSON for links; eframe's RON storage, with the serde support it switches on in egui,
//! cost it 151 kB gzipped (2.51 against 2.36 MB, measured), of a module that must stay under
//! 2.5 MB.

#[cfg(target_arch = "wasm32")]
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The value remembered under `key`, if there is one and it still reads.
pub fn get<T: DeserializeOwned>(cc: &eframe::CreationContext<'_>, key: &str) -> Option<T> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        eframe::get_value(cc.storage?, key)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = cc;
        let text = local()?.get_item(&format!("oomlab.{key}")).ok()??;
        serde_json::from_str(&text).ok()
    }
}

/// eframe's save, on the desktop.
#[cfg(not(target_arch = "wasm32"))]
pub fn save(storage: &mut dyn eframe::Storage, app: &super::OomlabApp) {
    eframe::set_value(storage, "settings", &app.settings);
    eframe::set_value(storage, "lang", &app.lang());
    eframe::set_value(storage, "challenges_done", &app.teaching.challenges_done());
    eframe::set_value(storage, "welcomed", &app.teaching.welcomed());
}

/// The language a desktop storage remembers ([`save`] writes it under "lang").
#[cfg(not(target_arch = "wasm32"))]
pub fn stored_lang(storage: &dyn eframe::Storage) -> Option<crate::i18n::Lang> {
    eframe::get_value(storage, "lang")
}

/// In the browser, after each frame: writes what changed to `localStorage` (eframe's web
/// runner saves nothing without its RON storage). Nothing on the desktop, where eframe calls
/// [`save`].
pub fn autosave(app: &super::OomlabApp) {
    #[cfg(target_arch = "wasm32")]
    {
        use std::sync::Mutex;
        static LAST: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn json<T: Serialize>(value: &T) -> String {
            serde_json::to_string(value).unwrap_or_default()
        }
        let now = [
            ("settings", json(&app.settings)),
            ("lang", json(&app.lang())),
            ("challenges_done", json(&app.teaching.challenges_done())),
            ("welcomed", json(&app.teaching.welcomed())),
        ];
        let Ok(mut last) = LAST.lock() else { return };
        if last.len() == now.len() && last.iter().zip(&now).all(|(a, (_, b))| a == b) {
            return;
        }
        if let Some(storage) = local() {
            for (key, json) in &now {
                let _ = storage.set_item(&format!("oomlab.{key}"), json);
            }
        }
        *last = now.into_iter().map(|(_, json)| json).collect();
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = app;
}

#[cfg(target_arch = "wasm32")]
fn local() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}
