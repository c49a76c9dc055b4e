//! Exports: the sweep as CSV, the step timeline and the allocator's state as JSON, the window as
//! PNG. Saved as files on the desktop, downloaded in the browser.

use serde_json::json;

use super::Notice;
use super::views::{Source, SweepSeries, op_label};
use crate::i18n::Catalog;
use crate::memory::StepMemory;
use crate::plan::Plan;

/// One row per configuration and batch size: whether it fits, the peaks, bytes per category at
/// the peak, or the OOM message (the CSV `oomlab sweep --csv` writes, with a configuration column).
pub fn sweep_csv(series: &[SweepSeries]) -> String {
    crate::memory::sweep::csv(series, &crate::memory::sweep::CsvColumns { config: true, formula: None })
}

/// The step's timeline (bytes per category at every op) and the allocator's segments and
/// blocks at op `op`, as JSON — in English whatever the app shows, like the CLI's JSON.
pub fn step_json(plan: &Plan, memory: &StepMemory, source: Source, op: Option<usize>) -> String {
    let en = crate::i18n::Catalog::new(crate::i18n::Lang::En);
    let timeline: Vec<serde_json::Value> = memory
        .timeline
        .iter()
        .map(|p| {
            json!({
                "op": p.op,
                "label": op_label(&en, plan, p.op),
                "allocated": p.allocated,
                "allocated_bytes": p.allocated_bytes,
                "reserved_bytes": p.reserved_bytes,
            })
        })
        .collect();
    let segments: Vec<serde_json::Value> = memory
        .segments_at(op)
        .iter()
        .map(|s| {
            let blocks: Vec<serde_json::Value> = s
                .blocks
                .iter()
                .map(|b| {
                    let t = b.tensor.map(|t| plan.tensor(t));
                    json!({
                        "offset": b.offset,
                        "size": b.size,
                        "tensor": t.map(|t| t.name.clone()),
                        "category": t.map(|t| t.category.name()),
                    })
                })
                .collect();
            json!({"segment": s.segment.0, "size": s.size, "blocks": blocks})
        })
        .collect();
    let doc = json!({
        "source": source.word(&en),
        "peak_index": memory.peak_index,
        "peak_allocated_bytes": memory.peak_allocated_bytes(),
        "peak_reserved_bytes": memory.peak_reserved_bytes(),
        "timeline": timeline,
        "allocator": {"at_op": op, "label": op_label(&en, plan, op), "segments": segments},
        "stats": memory.stats,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// An RGBA image as PNG bytes (the encoder's error, in its own words, when it refuses).
pub fn png(image: &egui::ColorImage) -> Result<Vec<u8>, png::EncodingError> {
    let [w, h] = image.size;
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, w as u32, h as u32);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        let data: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
        writer.write_image_data(&data)?;
    }
    Ok(bytes)
}

/// Saves `bytes` as `name`: into `dir`, else `$OOMLAB_EXPORT_DIR`, else the current directory on
/// the desktop; as a download in the browser. Returns where it went, for the status line.
pub fn save(dir: Option<&std::path::Path>, name: &str, bytes: &[u8], mime: &str) -> Result<Notice, Notice> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = mime;
        let dir = dir.map(std::path::Path::to_path_buf).unwrap_or_else(|| {
            std::env::var_os("OOMLAB_EXPORT_DIR").map_or_else(|| std::path::PathBuf::from("."), Into::into)
        });
        let path = dir.join(name);
        let shown = || Notice::Text(path.display().to_string());
        std::fs::write(&path, bytes)
            .map_err(|e| Notice::msg("export-cannot-write", &[("path", shown()), ("error", e.to_string().into())]))?;
        Ok(Notice::msg("export-saved", &[("path", shown())]))
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = dir;
        use wasm_bindgen::JsCast;
        let fail =
            |e: wasm_bindgen::JsValue| Notice::msg("export-download-failed", &[("error", format!("{e:?}").into())]);
        let array = js_sys::Uint8Array::from(bytes);
        let parts = js_sys::Array::of1(&array);
        let options = web_sys::BlobPropertyBag::new();
        options.set_type(mime);
        let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options).map_err(fail)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(fail)?;
        let document =
            web_sys::window().and_then(|w| w.document()).ok_or_else(|| Notice::from("no document".to_string()))?;
        let a: web_sys::HtmlAnchorElement = document
            .create_element("a")
            .map_err(fail)?
            .dyn_into()
            .map_err(|_| Notice::from("not an anchor".to_string()))?;
        a.set_href(&url);
        a.set_download(name);
        a.click();
        let _ = web_sys::Url::revoke_object_url(&url);
        Ok(Notice::msg("export-downloaded", &[("name", name.to_string().into())]))
    }
}

/// The toy's step as a PyTorch memory snapshot (`oomlab-step.pickle`), as the CLI's
/// `snapshot export` writes it: the allocator's log from an empty device through the step (the
/// log the first executed step makes), or up to its OOM; saved into `dir` as [`save`] does.
pub fn snapshot_export(plan: &Plan, budget_bytes: u64, dir: Option<&std::path::Path>) -> Result<Notice, Notice> {
    use crate::memory::snapshot::export;
    let (events, _) = export::record_step(plan, budget_bytes);
    let bytes =
        export::to_pickle(&export::snapshot(plan, &events, budget_bytes)).map_err(|e| Notice::from(e.to_string()))?;
    save(dir, "oomlab-step.pickle", &bytes, "application/octet-stream")
}

/// What an export button asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportAsk {
    SweepCsv,
    StepJson,
    Snapshot,
    EstimateJson,
    Png,
    Share,
}

/// The export buttons (the estimate's only on the real-model tab) and the last export's
/// status; the button clicked, if any.
pub fn buttons_ui(ui: &mut egui::Ui, t: &Catalog, real_models: bool, status: Option<&Notice>) -> Option<ExportAsk> {
    let mut asked = None;
    ui.horizontal_wrapped(|ui| {
        ui.label(t.text("main-export"));
        let buttons = [
            (ExportAsk::SweepCsv, "export-sweep-csv"),
            (ExportAsk::StepJson, "export-step-json"),
            (ExportAsk::Snapshot, "export-snapshot"),
            (ExportAsk::EstimateJson, "export-estimate-json"),
            (ExportAsk::Png, "export-png"),
            (ExportAsk::Share, "share-button"),
        ];
        for (ask, key) in buttons {
            if ask == ExportAsk::EstimateJson && !real_models {
                continue;
            }
            // A file of the step's figures would hold what a chapter's open question veils:
            // the exports wait for its reveal (sharing the setup does not).
            let veiled = ask != ExportAsk::Share && super::views::veil(ui.ctx()).any();
            let button = ui.add_enabled(!veiled, egui::Button::new(t.text(key)));
            if button.on_disabled_hover_text(t.text("veil-after-guess")).clicked() {
                asked = Some(ask);
            }
        }
        if let Some(s) = status {
            ui.label(egui::RichText::new(s.text(t)).small());
        }
    });
    asked
}

/// Saves a window screenshot the integration delivered as PNG, and says so in the status line.
pub(super) fn save_screenshot(chrome: &mut super::chrome::Chrome) {
    let taken = chrome.screenshot.lock().ok().and_then(|mut s| s.take());
    if let Some(image) = taken {
        let dir = chrome.export_dir.as_deref();
        let saved = png(&image)
            .map_err(|e| Notice::msg("export-png-failed", &[("error", e.to_string().into())]))
            .and_then(|b| save(dir, "oomlab.png", &b, "image/png"));
        chrome.status = Some(saved.unwrap_or_else(|e| e));
    }
}

/// Carries out an export button (Share is the teaching's: it opens its window): the file saved
/// and what the status line says, or `None` when nothing was saved now (a screenshot arrives
/// later, through the chrome's slot).
pub(super) fn carry_out(
    ask: ExportAsk,
    chrome: &super::chrome::Chrome,
    shown: &super::shown::Shown,
    measured: &Option<StepMemory>,
    budget_bytes: u64,
    ctx: &egui::Context,
) -> Option<Result<Notice, Notice>> {
    let dir = chrome.export_dir.clone();
    let save = |name: &str, bytes: &[u8], mime: &str| save(dir.as_deref(), name, bytes, mime);
    match ask {
        ExportAsk::SweepCsv => Some(save("oomlab-sweep.csv", sweep_csv(&shown.derived.sweep).as_bytes(), "text/csv")),
        ExportAsk::StepJson => match (&shown.derived.plan, shown.memory(measured)) {
            (Ok(plan), Some((m, source))) => {
                let op = m.timeline.get(shown.scrub).and_then(|p| p.op);
                let json = step_json(plan, m, source, op);
                Some(save("oomlab-step.json", json.as_bytes(), "application/json"))
            }
            _ => None,
        },
        ExportAsk::Snapshot => match &shown.derived.plan {
            Ok(plan) => Some(snapshot_export(plan, budget_bytes, dir.as_deref())),
            Err(_) => None,
        },
        ExportAsk::EstimateJson => match (&shown.estimate.setup, &shown.estimate.estimate) {
            (Ok(setup), Some(e)) => {
                let r = &shown.estimate;
                let json =
                    crate::estimate::EstimateReport::new(setup, e, r.max_micro_batch, &r.sweep).to_json().to_string();
                Some(save("oomlab-estimate.json", json.as_bytes(), "application/json"))
            }
            _ => None,
        },
        ExportAsk::Png => {
            let (slot, repaint) = (chrome.screenshot.clone(), ctx.clone());
            ctx.request_screenshot(move |image| {
                if let Ok(mut s) = slot.lock() {
                    *s = Some(image);
                }
                repaint.request_repaint();
            });
            None
        }
        ExportAsk::Share => None,
    }
}
