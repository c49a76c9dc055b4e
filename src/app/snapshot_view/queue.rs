//! Where the Snapshot tab's files come from: a path or a folder (desktop), read on a thread,
//! and the browser's files, read in a worker, one after another, with the browser's pickers.

use super::SnapshotState;
#[cfg(target_arch = "wasm32")]
use super::{fits_in_browser, import};
#[cfg(not(target_arch = "wasm32"))]
use super::{from_dump, read};

impl SnapshotState {
    /// Opens a snapshot file (or every snapshot in a folder) in place of the open ones.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_path(&mut self, path: std::path::PathBuf, ctx: &egui::Context) {
        self.queue_path(path, false, ctx);
    }

    /// Opens a snapshot file (or a folder's) beside the open ones.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn add_path(&mut self, path: std::path::PathBuf, ctx: &egui::Context) {
        self.queue_path(path, true, ctx);
    }

    /// Queues a file, or a folder's snapshots (`.pickle`, `.pkl`, `.json`, in name order: the
    /// first as asked, the rest beside it), and starts reading if nothing is being read.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn queue_path(&mut self, path: std::path::PathBuf, beside: bool, ctx: &egui::Context) {
        let files = if path.is_dir() {
            let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(&path)
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            found.retain(|p| {
                p.is_file()
                    && p.extension().and_then(|x| x.to_str()).is_some_and(|x| matches!(x, "pickle" | "pkl" | "json"))
            });
            found.sort();
            if found.is_empty() {
                self.error = Some((path.display().to_string(), crate::memory::snapshot::SnapshotError::EmptyFolder));
            }
            found
        } else {
            vec![path]
        };
        for (i, f) in files.into_iter().enumerate() {
            self.queue.push_back((f, beside || i > 0));
        }
        self.next(ctx);
    }

    /// Starts reading the next queued file, if none is being read.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn next(&mut self, ctx: &egui::Context) {
        if self.rx.is_some() {
            return;
        }
        if let Some((path, beside)) = self.queue.pop_front() {
            self.beside = beside;
            self.read_path(path, ctx);
        }
    }

    /// Reads a snapshot file: streamed on a thread (a large file never freezes a frame, and is
    /// never in memory whole), with its progress.
    #[cfg(not(target_arch = "wasm32"))]
    fn read_path(&mut self, path: std::path::PathBuf, ctx: &egui::Context) {
        use std::sync::atomic::Ordering;
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let (tx, rx) = std::sync::mpsc::channel();
        let ctx = ctx.clone();
        let label = name.clone();
        let total = std::fs::metadata(&path).map(|m| m.len()).ok();
        let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        self.read = read.clone();
        std::thread::spawn(move || {
            let unreadable = |e: std::io::Error| crate::memory::snapshot::SnapshotError::Unreadable(e.to_string());
            let result = std::fs::File::open(&path).map_err(unreadable).and_then(|f| {
                let mut progress = |n| {
                    read.store(n, Ordering::Relaxed);
                    ctx.request_repaint();
                };
                read::from_reader(f, total, &mut progress).map(|d| from_dump(&label, d))
            });
            let _ = tx.send((label, result));
            ctx.request_repaint();
        });
        self.loading = Some(name);
        self.progress = total.map(|t| (0, t));
        self.rx = Some(rx);
    }

    /// Queues a browser file (beside the open ones, or in their place) and starts reading if
    /// nothing is being read.
    #[cfg(target_arch = "wasm32")]
    pub fn queue_file(&mut self, file: web_sys::File, beside: bool, ctx: &egui::Context) {
        self.queue.push_back((file, beside));
        self.next(ctx);
    }

    /// Starts reading the next queued file, if none is being read.
    #[cfg(target_arch = "wasm32")]
    pub(super) fn next(&mut self, ctx: &egui::Context) {
        while self.import.is_none() {
            let Some((file, beside)) = self.queue.pop_front() else { return };
            self.beside = beside;
            self.open_file(file, ctx);
        }
    }

    /// Opens a browser file: read in a worker of its own, if it is not too large.
    #[cfg(target_arch = "wasm32")]
    fn open_file(&mut self, file: web_sys::File, ctx: &egui::Context) {
        let (name, size) = (file.name(), file.size() as u64);
        if !fits_in_browser(size) {
            log::warn!("oomlab: snapshot {name} is {size} bytes, over the browser's limit");
            self.too_large = Some((name, size));
            return;
        }
        match import::Import::start(file, ctx) {
            Ok(i) => {
                self.import = Some(i);
                (self.loading, self.progress, self.error, self.too_large) = (Some(name), Some((0, size)), None, None);
            }
            Err(e) => self.error = Some((name, e)),
        }
    }
}

/// The browser's file picker: an `<input type=file>` accepting `accept`, whose file's name and
/// bytes go to `land` (and the next frame is drawn).
#[cfg(target_arch = "wasm32")]
pub fn pick_file(accept: &str, ctx: &egui::Context, land: impl FnOnce(String, Vec<u8>) + 'static) {
    let repaint = ctx.clone();
    pick_file_handle(accept, ctx, move |file| {
        let name = file.name();
        wasm_bindgen_futures::spawn_local(async move {
            if let Ok(buffer) = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await {
                land(name, js_sys::Uint8Array::new(&buffer).to_vec());
                repaint.request_repaint();
            }
        });
    });
}

/// The browser's file picker: the chosen file itself goes to `land` (a large one is read where
/// and as it is needed, never copied into the page's memory whole).
#[cfg(target_arch = "wasm32")]
pub fn pick_file_handle(accept: &str, ctx: &egui::Context, land: impl FnOnce(web_sys::File) + 'static) {
    pick_files_handle(accept, false, ctx, move |files| {
        if let Some(f) = files.into_iter().next() {
            land(f);
        }
    });
}

/// The browser's file picker, for one file or (`multiple`) several: the chosen files go to
/// `land`.
#[cfg(target_arch = "wasm32")]
pub fn pick_files_handle(
    accept: &str,
    multiple: bool,
    ctx: &egui::Context,
    land: impl FnOnce(Vec<web_sys::File>) + 'static,
) {
    use wasm_bindgen::JsCast;
    let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
    let Ok(input) = document.create_element("input") else { return };
    let Ok(input) = input.dyn_into::<web_sys::HtmlInputElement>() else { return };
    input.set_type("file");
    input.set_accept(accept);
    input.set_multiple(multiple);
    let (ctx, target) = (ctx.clone(), input.clone());
    let on_change = wasm_bindgen::closure::Closure::once_into_js(move || {
        target.remove();
        let Some(list) = target.files() else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        if files.is_empty() {
            return;
        }
        land(files);
        ctx.request_repaint();
    });
    input.set_onchange(Some(on_change.unchecked_ref()));
    // Attached (hidden) while it is open: some browsers ignore a detached input's click.
    let _ = input.set_attribute("style", "display:none");
    if let Some(body) = document.body() {
        let _ = body.append_child(&input);
    }
    log::info!("oomlab: opening the file picker");
    input.click();
}
