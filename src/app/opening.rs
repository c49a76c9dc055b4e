//! Where the app was opened from, read once at its start: the browser's link (its settings, a
//! chapter, a challenge, a class to teach, a tab, steps to train) or, on the desktop, the
//! environment of a scripted run (`OOMLAB_TRAIN_STEPS`, `OOMLAB_TAB`).

use super::Tab;
use super::notice::Notice;
use super::settings::{Prefs, Settings};

/// What the page's address (or a scripted run's environment) asks of the app as it opens.
pub struct Opening {
    /// The browser's URL hash (empty on the desktop).
    pub hash: String,
    /// Whether it points somewhere (a newcomer without a link gets the welcome).
    pub linked: bool,
    /// Steps to train on start.
    pub steps: usize,
    /// The tab to open on.
    pub tab: Option<Tab>,
}

impl Opening {
    /// Where this app was opened from.
    pub fn here() -> Opening {
        #[cfg(target_arch = "wasm32")]
        {
            let hash = web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default();
            let steps = hash.split(['#', '&']).find_map(|kv| kv.strip_prefix("train=")?.parse::<usize>().ok());
            Opening {
                linked: super::teaching::link_points_somewhere(&hash),
                steps: steps.unwrap_or(0),
                tab: Tab::from_url_hash(&hash),
                hash,
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let var = |v: &str| std::env::var(v).ok();
            Opening {
                hash: String::new(),
                linked: var("OOMLAB_TRAIN_STEPS").is_some() || var("OOMLAB_TAB").is_some(),
                steps: var("OOMLAB_TRAIN_STEPS").and_then(|v| v.parse().ok()).unwrap_or(0),
                tab: var("OOMLAB_TAB").and_then(|t| Tab::from_url_hash(&format!("tab={t}"))),
            }
        }
    }

    /// The settings to open with: a link's, when it carries any (with a notice when it could
    /// not be used as it was), else the remembered ones, with `system`'s preferences merged in.
    pub fn settings(&self, remembered: Settings, system: Prefs, vocab: usize, notices: &mut Vec<Notice>) -> Settings {
        let link = Settings::url_hash_carries_settings(&self.hash).then(|| {
            let (s, notice) = Settings::from_url_hash(&self.hash, vocab);
            notices.extend(notice);
            s
        });
        Settings::opened(remembered, link, system)
    }

    /// The teacher's address `oomlab serve` prints (`/#teach`): a class starts at once.
    pub fn teaches(&self) -> bool {
        self.hash.split(['#', '&']).any(|kv| kv == "teach")
    }
}
