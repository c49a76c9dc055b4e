//! The tabs of the toy's views, and their names in a link.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tab {
    /// The breakdown at the peak, by category and source, and the model state.
    Breakdown,
    Timeline,
    Sweep,
    Allocator,
    Training,
    /// The toy serving a stream of requests over a real KV cache.
    Serving,
    /// The large-model estimator.
    RealModels,
    /// A PyTorch memory snapshot from a real run.
    Snapshot,
}

impl Tab {
    /// Every tab, in the order the tab bar shows them, with its label's catalog message.
    pub const ALL: [(Tab, &'static str); 8] = [
        (Tab::Breakdown, "tab-breakdown"),
        (Tab::Timeline, "tab-timeline"),
        (Tab::Sweep, "tab-sweep"),
        (Tab::Allocator, "tab-allocator"),
        (Tab::Training, "tab-training"),
        (Tab::Serving, "tab-serving"),
        (Tab::RealModels, "tab-real-models"),
        (Tab::Snapshot, "tab-snapshot"),
    ];

    /// Its name in a link (`tab=allocator`): its catalog message without `tab-`.
    pub fn id(self) -> &'static str {
        Tab::ALL.iter().find(|(t, _)| *t == self).map_or("breakdown", |(_, key)| &key[4..])
    }

    /// The tab a link opens (`tab=allocator`), if it names one.
    pub fn from_url_hash(hash: &str) -> Option<Tab> {
        let id = hash.trim_start_matches('#').split('&').find_map(|kv| kv.strip_prefix("tab="))?;
        Tab::ALL.iter().map(|(t, _)| *t).find(|t| t.id() == id)
    }
}

/// The tab bar: every tab by its name in the reader's language; the one clicked is `shown`.
pub fn tabs_ui(ui: &mut egui::Ui, t: &crate::i18n::Catalog, shown: &mut Tab) {
    ui.horizontal_wrapped(|ui| {
        for (tab, key) in Tab::ALL {
            ui.selectable_value(shown, tab, t.text(key));
        }
    });
    ui.separator();
}
