//! The Snapshot tab: a PyTorch memory snapshot from a real training run (or oomlab's own
//! export), shown in oomlab's views — its timeline with the run's phases, its allocator map
//! (reserved vs allocated, fragmentation), its OOM events in plain words, what was alive at the
//! peak by place and by kind — labelled as measured by PyTorch, beside the toy's current step;
//! the run replayed through oomlab's allocator; and, with several files open (a second run, or
//! one file per rank), the files side by side. Files come by drag and drop (desktop and
//! browser), a path or a folder (desktop) or a file picker (browser); the desktop reads them on
//! a thread and the browser in a worker, one after another, so a large dump never freezes a
//! frame.

use std::collections::VecDeque;

use egui::{Color32, RichText, Ui};

pub mod holding;
#[cfg(target_arch = "wasm32")]
mod import;
mod overview;
mod queue;
mod recording;
pub mod rerun;
pub mod several;
mod timeline;

#[cfg(target_arch = "wasm32")]
pub use queue::{pick_file, pick_file_handle, pick_files_handle};
pub use timeline::Envelope;

use super::views::drawn::{Drawn, SnapshotDrawn, record};
use super::views::{Source, size};
use crate::i18n::Catalog;
use crate::memory::snapshot::dump::Dump;
use crate::memory::snapshot::explain;
use crate::memory::snapshot::{SnapshotError, read, replay};

/// The largest segments drawn in the map.
const MAP_SEGMENTS: usize = 64;

/// A read snapshot and what the views draw from it.
pub struct Loaded {
    pub name: String,
    pub snapshot: Dump,
    pub replays: Vec<replay::Replay>,
    /// Each replay's chart lines, allocated and reserved, as min/max pyramids (drawn per pixel).
    pub lines: Vec<(Envelope, Envelope)>,
    /// The event scrubbed to (the chart's click, the slider).
    pub selected: Option<usize>,
    /// What is alive at the moments shown.
    pub holdings: holding::Holdings,
    /// Each replay's diagnostic workflow (at its first OOM, else its peak).
    pub advice: Vec<Vec<explain::Advice>>,
    /// Whether oomlab wrote it (found once: it scans every block and event).
    pub from_oomlab: bool,
    /// The device shown (index into `replays`).
    pub device: usize,
    /// The replay through oomlab's allocator.
    pub rerun: rerun::Rerun,
}

/// Where the browser puts picked files for the next frame, and whether they land beside.
#[cfg(target_arch = "wasm32")]
type Picked = std::rc::Rc<std::cell::RefCell<Vec<(web_sys::File, bool)>>>;

/// The largest snapshot the browser opens. The worker and the page each have a wasm32 memory
/// of at most 4 GiB: the worker needs about the file's size while it reads (0.85× for a dump of
/// 444,000 events), the page the transferred dump and the dump made of it (about the file's
/// size together). 2 GiB leaves each half its room; a 1.2 GB file (1.5 million events) opens in 36 s in
/// headless Chromium (`web/snapshot-test.mjs`, OOMLAB_SNAPSHOT_EVENTS=1500000). A larger file
/// gets a message, not a crashed tab.
pub const BROWSER_LIMIT: u64 = 2 << 30;

/// Whether the browser opens a file of `size` bytes.
pub fn fits_in_browser(size: u64) -> bool {
    size <= BROWSER_LIMIT
}

/// The tab's state.
#[derive(Default)]
pub struct SnapshotState {
    /// The desktop's path field.
    pub path: String,
    /// The snapshot shown in full.
    pub loaded: Option<Loaded>,
    /// More snapshots open beside it (a second run, one file per rank), in the order opened.
    pub others: Vec<Loaded>,
    /// All the open files compared, once there are two or more.
    pub comparison: Option<several::Comparison>,
    /// Why the last file did not open: its name, and the error.
    pub error: Option<(String, SnapshotError)>,
    /// The file being read (the desktop reads on a thread, the browser in a worker).
    pub loading: Option<String>,
    /// Bytes read of the file's size, while it is read.
    pub progress: Option<(u64, u64)>,
    /// A file too large for the browser: its name and size.
    pub too_large: Option<(String, u64)>,
    /// Whether the file being read lands beside the open ones (else it replaces them).
    beside: bool,
    /// Files waiting to be read, and whether each lands beside.
    #[cfg(not(target_arch = "wasm32"))]
    queue: VecDeque<(std::path::PathBuf, bool)>,
    #[cfg(target_arch = "wasm32")]
    queue: VecDeque<(web_sys::File, bool)>,
    #[cfg(not(target_arch = "wasm32"))]
    rx: Option<std::sync::mpsc::Receiver<(String, Result<Loaded, SnapshotError>)>>,
    #[cfg(not(target_arch = "wasm32"))]
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    #[cfg(target_arch = "wasm32")]
    picked: Picked,
    #[cfg(target_arch = "wasm32")]
    import: Option<import::Import>,
}

/// Reads and replays a snapshot (milliseconds for the toy's, seconds for a 200 MB dump).
pub fn load(name: &str, bytes: &[u8]) -> Result<Loaded, SnapshotError> {
    read::from_bytes(bytes).map(|d| from_dump(name, d))
}

/// Replays a snapshot already read (each device), and prepares its views.
pub fn from_dump(name: &str, snapshot: Dump) -> Loaded {
    let replays: Vec<replay::Replay> = replay::replay_all(&snapshot, 20);
    let lines = replays
        .iter()
        .map(|r| {
            (
                Envelope::new(r.timeline.iter().map(|p| p.allocated)),
                Envelope::new(r.timeline.iter().map(|p| p.reserved)),
            )
        })
        .collect();
    // The moment the advice reads is one the panels show: computed once, kept for them.
    let mut holdings = holding::Holdings::default();
    let advice = replays
        .iter()
        .map(|r| {
            let at = r.ooms.first().map_or(r.peak_index, |o| o.index.checked_sub(1));
            explain::diagnose(r, holdings.at(r, at))
        })
        .collect();
    let from_oomlab = snapshot.from_oomlab();
    Loaded {
        name: name.to_string(),
        snapshot,
        replays,
        lines,
        selected: None,
        holdings,
        advice,
        from_oomlab,
        device: 0,
        rerun: rerun::Rerun::default(),
    }
}

pub(super) fn bytes(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl SnapshotState {
    /// Opens a snapshot from its bytes (tests, small files), in place of the open ones.
    pub fn open_bytes(&mut self, name: &str, bytes: &[u8]) {
        self.read_bytes(name, bytes, false);
    }

    /// Opens a snapshot from its bytes beside the open ones.
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8]) {
        self.read_bytes(name, bytes, true);
    }

    fn read_bytes(&mut self, name: &str, bytes: &[u8], beside: bool) {
        match load(name, bytes) {
            Ok(l) => self.land(l, beside),
            Err(e) => self.error = Some((name.to_owned(), e)),
        }
        self.loading = None;
    }

    /// Shows a snapshot read and replayed: in place of the open ones, or beside them.
    fn land(&mut self, l: Loaded, beside: bool) {
        log::info!("oomlab: snapshot {}: {} devices, {} segments", l.name, l.replays.len(), l.snapshot.segments.len());
        (self.error, self.too_large) = (None, None);
        match &self.loaded {
            Some(_) if beside => self.others.push(l),
            _ => {
                self.loaded = Some(l);
                self.others.clear();
            }
        }
        self.compare();
    }

    /// Compares the open files again.
    fn compare(&mut self) {
        let files: Vec<&Loaded> = self.loaded.iter().chain(self.others.iter()).collect();
        self.comparison = several::compute(&files);
    }

    /// Shows file `i` of the open ones (0: the one shown) in full.
    pub fn show_file(&mut self, i: usize) {
        if i == 0 || i > self.others.len() {
            return;
        }
        let Some(current) = self.loaded.take() else { return };
        let chosen = self.others.remove(i - 1);
        self.others.insert(i - 1, current);
        self.loaded = Some(chosen);
        self.compare();
    }

    /// Closes every file but the one shown.
    pub fn close_others(&mut self) {
        self.others.clear();
        self.comparison = None;
    }

    /// The open files' names, the one shown first.
    pub fn names(&self) -> Vec<String> {
        self.loaded.iter().chain(self.others.iter()).map(|l| l.name.clone()).collect()
    }

    /// Takes the snapshots dropped on the window (the app routes a model's config.json to the
    /// Real models view) and finished reads, each frame; whether a file was dropped here.
    pub fn poll(&mut self, ctx: &egui::Context, dropped: Vec<egui::DroppedFileHandle>) -> bool {
        let any_dropped = !dropped.is_empty();
        // Dropped files land beside the open ones (a second run, the ranks of one); with none
        // open, the first is shown and the rest beside it.
        for (i, f) in dropped.into_iter().enumerate() {
            let beside = self.loaded.is_some() || i > 0;
            #[cfg(not(target_arch = "wasm32"))]
            self.queue_path(f.path().to_path_buf(), beside, ctx);
            #[cfg(target_arch = "wasm32")]
            if let Some(file) = f.web_file() {
                self.queue_file(file.clone(), beside, ctx);
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            if let Some((_, total)) = &mut self.progress {
                let done = self.read.load(std::sync::atomic::Ordering::Relaxed);
                self.progress = Some((done, *total));
            }
            if let Some(rx) = &self.rx
                && let Ok((name, result)) = rx.try_recv()
            {
                (self.rx, self.loading, self.progress) = (None, None, None);
                match result {
                    Ok(l) => self.land(l, self.beside),
                    Err(e) => self.error = Some((name, e)),
                }
                self.next(ctx);
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let picked: Vec<(web_sys::File, bool)> = self.picked.borrow_mut().drain(..).collect();
            for (file, beside) in picked {
                self.queue_file(file, beside, ctx);
            }
            if let Some(i) = &self.import {
                self.progress = Some((i.done(), i.total));
                if let Some(pct) = i.tenth() {
                    log::info!("oomlab: reading {}: {pct} %", self.loading.as_deref().unwrap_or_default());
                }
                if let Some(result) = i.take() {
                    let name = self.loading.take().unwrap_or_default();
                    (self.import, self.progress) = (None, None);
                    match result {
                        Ok(d) => self.land(from_dump(&name, d), self.beside),
                        Err(e) => self.error = Some((name, e)),
                    }
                    self.next(ctx);
                }
            }
        }
        any_dropped
    }

    /// The Snapshot tab, beside the toy's current step (`toy`: its memory and where that comes
    /// from).
    pub fn tab_ui(&mut self, ui: &mut Ui, t: &Catalog, toy: Option<(&crate::memory::StepMemory, Source)>) {
        ui.heading(t.text("snap-heading"));
        ui.label(t.text("snap-how"));
        #[cfg(not(target_arch = "wasm32"))]
        let mut open_path = None;
        ui.horizontal_wrapped(|ui| {
            #[cfg(not(target_arch = "wasm32"))]
            {
                let field = ui.add(egui::TextEdit::singleline(&mut self.path).hint_text(t.text("snap-path")));
                let open = ui.button(t.text("snap-open")).clicked()
                    || (field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
                let add = self.loaded.is_some() && ui.button(t.text("snap-add")).clicked();
                if (open || add) && !self.path.trim().is_empty() {
                    open_path = Some((std::path::PathBuf::from(self.path.trim()), add));
                }
            }
            #[cfg(target_arch = "wasm32")]
            {
                if ui.button(t.text("snap-choose")).clicked() {
                    let picked = self.picked.clone();
                    pick_files_handle(".pickle,.pkl,.json", true, ui.ctx(), move |files| {
                        let mut p = picked.borrow_mut();
                        for (i, f) in files.into_iter().enumerate() {
                            p.push((f, i > 0));
                        }
                    });
                }
                if self.loaded.is_some() && ui.button(t.text("snap-add-file")).clicked() {
                    let picked = self.picked.clone();
                    pick_files_handle(".pickle,.pkl,.json", true, ui.ctx(), move |files| {
                        picked.borrow_mut().extend(files.into_iter().map(|f| (f, true)));
                    });
                }
            }
            ui.label(RichText::new(t.text("snap-drop")).weak());
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some((path, add)) = open_path {
            if add {
                self.add_path(path, ui.ctx());
            } else {
                self.open_path(path, ui.ctx());
            }
        }
        if let Some(name) = &self.loading {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(t.format("snap-reading", &[("name", name.as_str().into())]));
            });
            if let Some((done, total)) = self.progress {
                let text = t.format(
                    "snap-progress",
                    &[("name", name.as_str().into()), ("done", size(t, done).into()), ("total", size(t, total).into())],
                );
                ui.add(egui::ProgressBar::new(done as f32 / total.max(1) as f32).text(text));
            }
        }
        if let Some((name, bytes)) = &self.too_large {
            ui.colored_label(
                Color32::RED,
                t.format(
                    "snap-too-large",
                    &[
                        ("name", name.as_str().into()),
                        ("size", size(t, *bytes).into()),
                        ("limit", size(t, BROWSER_LIMIT).into()),
                    ],
                ),
            );
        }
        if let Some((name, e)) = &self.error {
            let text = t.format("snap-error", &[("name", name.as_str().into()), ("error", e.text(t).into())]);
            ui.colored_label(Color32::RED, text);
        }
        // Several files: side by side first, then the one shown in full.
        if let Some(c) = &self.comparison {
            let names = self.names();
            let mut close = false;
            let show = ui
                .group(|ui| {
                    let show = several::panel(ui, t, c, &names);
                    close = ui.button(t.text("snap-several-close")).clicked();
                    show
                })
                .inner;
            if let Some(i) = show {
                self.show_file(i);
            }
            if close {
                self.close_others();
            }
            ui.separator();
        }
        let compared = self.comparison.as_ref().map(|c| (c.ranks.ranks.len(), c.ranks.worst, c.ranks.spread_bytes));
        let Some(l) = &mut self.loaded else { return };
        if l.replays.len() > 1 {
            ui.horizontal(|ui| {
                for (i, r) in l.replays.iter().enumerate() {
                    ui.selectable_value(
                        &mut l.device,
                        i,
                        t.format("snap-device", &[("n", r.device.to_string().into())]),
                    );
                }
            });
        }
        let Loaded { name, snapshot, replays, lines, selected, holdings, advice, from_oomlab, device, rerun } = l;
        let dev = *device;
        let Some(r) = replays.get(dev) else { return };
        // oomlab's own export is its allocator's account, not a PyTorch measurement.
        let source = if *from_oomlab { t.text("source-oomlab-export") } else { Source::PyTorch.word(t) };
        ui.label(
            RichText::new(t.format(
                "snap-source",
                &[("name", name.as_str().into()), ("device", r.device.to_string().into()), ("source", source.into())],
            ))
            .strong(),
        );
        recording::panel(ui, t, snapshot, r.device);
        if r.truncated() {
            ui.colored_label(
                Color32::from_rgb(240, 160, 60),
                t.format(
                    "snap-truncated",
                    &[
                        ("allocated", size(t, bytes(r.initial.allocated)).into()),
                        ("reserved", size(t, bytes(r.initial.reserved)).into()),
                    ],
                ),
            );
        }
        overview::summary(ui, t, r, toy);
        let segments = snapshot.segments.iter().filter(|g| g.device == r.device).count();
        let at_peak = holdings.at(r, r.peak_index);
        record(
            ui,
            Drawn::Snapshot(SnapshotDrawn {
                name: name.clone(),
                peak_allocated_bytes: bytes(r.peak_allocated),
                peak_reserved_bytes: bytes(r.peak_reserved),
                events: r.events,
                segments,
                toy: toy.map(|(m, s)| (s, m.peak_allocated_bytes(), m.peak_reserved_bytes())),
                phases: r.phases.iter().map(|p| (p.kind, p.first, p.last)).collect(),
                kinds_at_peak: at_peak.by_guess.iter().filter(|(_, b)| *b > 0).map(|&(g, b)| (g, bytes(b))).collect(),
                replayed_peak_reserved_bytes: match &rerun.result {
                    Some((d, Ok(s))) if *d == r.device => Some(bytes(s.replayed.peak_reserved_bytes)),
                    _ => None,
                },
                compared,
            }),
        );
        for o in &r.ooms {
            ui.group(|ui| {
                ui.label(RichText::new(t.text("snap-oom-heading")).color(Color32::from_rgb(240, 80, 80)).strong());
                ui.label(t.format(
                    "snap-oom",
                    &[
                        ("index", o.index.to_string().into()),
                        ("size", size(t, bytes(o.size)).into()),
                        ("free", size(t, bytes(o.device_free)).into()),
                        ("frame", holding::place_words(t, &o.place).into()),
                    ],
                ));
                let cached = r.free_in_segments;
                let key = if cached >= o.size && r.largest_free_block < o.size {
                    "snap-oom-fragmented"
                } else {
                    "snap-oom-full"
                };
                ui.label(t.format(
                    key,
                    &[
                        ("cached", size(t, bytes(cached)).into()),
                        ("largest", size(t, bytes(r.largest_free_block)).into()),
                    ],
                ));
            });
        }
        if let Some(lines) = lines.get(dev) {
            timeline::chart(ui, t, r, lines, rerun.line_for(r.device), selected);
        }
        if let Some(at) = *selected {
            let h = holdings.at(r, Some(at));
            let heading = t.format("snap-holding-at", &[("index", at.to_string().into())]);
            ui.group(|ui| holding::panel(ui, t, heading, h));
        }
        if let Some(o) = r.ooms.first() {
            let h = holdings.at(r, o.index.checked_sub(1));
            let heading = t.format("snap-holding-oom", &[("index", o.index.to_string().into())]);
            ui.group(|ui| holding::panel(ui, t, heading, h));
        }
        // The peak, unless it is the moment the OOM struck (shown above).
        if r.ooms.first().is_none_or(|o| o.index.checked_sub(1) != r.peak_index) {
            let h = holdings.at(r, r.peak_index);
            let heading = t.format("snap-holding-peak", &[("index", r.peak_index.unwrap_or(0).to_string().into())]);
            ui.group(|ui| holding::panel(ui, t, heading, h));
        }
        if let Some(a) = advice.get(dev) {
            holding::advice(ui, t, a);
        }
        #[cfg(not(target_arch = "wasm32"))]
        if r.events > 0 {
            ui.group(|ui| rerun::panel(ui, t, snapshot, r, rerun));
        }
        overview::map(ui, t, snapshot, r.device);
        egui::CollapsingHeader::new(t.format("snap-live", &[("count", r.live_at_peak.len().to_string().into())]))
            .id_salt("snap_live")
            .default_open(true)
            .show(ui, |ui| {
                for x in &r.live_at_peak {
                    ui.horizontal_wrapped(|ui| {
                        ui.label(RichText::new(size(t, bytes(x.size))).monospace());
                        ui.label(RichText::new(format!("{:#x}", x.address)).monospace().weak());
                        ui.label(holding::guess_word(t, x.kind, x.evidence.is_guess()));
                        ui.add(egui::Label::new(holding::place_words(t, &x.place)).wrap());
                    });
                }
            });
    }
}
