//! Your own model in the Real models view: a Hugging Face `config.json` pasted, opened (a path
//! on the desktop, the file picker in the browser) or dropped on the window, read by
//! [`crate::estimate::hf`]. The architecture it gives replaces the model in the estimator's
//! settings, so a shared link carries the architecture itself, never the file's path. What the
//! field holds and the last message live in egui's temporary memory: nothing of it is a setting.

use egui::{Id, RichText, Ui};

use crate::estimate::Setup;
use crate::i18n::Catalog;

/// The field's text, the desktop's path, and the last read's message (Ok: what was read).
#[derive(Clone, Default)]
struct Input {
    text: String,
    /// The desktop's path field.
    #[cfg(not(target_arch = "wasm32"))]
    path: String,
    message: Option<Result<String, String>>,
}

fn input_id() -> Id {
    Id::unique("oomlab-model-config")
}

/// A file the browser read (picked or dropped), waiting for the next frame.
fn picked_id() -> Id {
    Id::unique("oomlab-model-config-picked")
}

/// Whether a dropped file is a model's config rather than a memory snapshot.
pub fn is_config(file: &egui::DroppedFileHandle) -> bool {
    let name = file.path().display().to_string();
    let name = name.rsplit(['/', '\\']).next().unwrap_or(&name).to_ascii_lowercase();
    name.ends_with(".json") && name.contains("config")
}

/// Reads a config's text into the settings: the architecture (named after the config's
/// `_name_or_path` or the catalog's `_name`, else `name`), the sequence clamped to a learned position table. A config
/// the estimator cannot model honestly leaves the settings as they were and says why.
pub fn apply(ctx: &egui::Context, t: &Catalog, name: &str, text: &str, s: &mut Setup) {
    let named = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            let name = |key: &str| v.get(key).and_then(|n| n.as_str()).map(str::to_string);
            name("_name_or_path").or_else(|| name("_name"))
        })
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| name.to_string());
    let message = match crate::estimate::hf::from_config(text, &named) {
        Ok(model) => {
            let parameters = crate::units::group_digits(model.arch.parameters());
            s.arch = model.arch;
            if s.arch.positions > 0 {
                s.seq = s.seq.min(s.arch.positions);
            }
            // LoRA on a mixture's experts is not modelled: the adapters keep to the attention.
            if s.arch.block.moe.is_some()
                && let Some(l) = &mut s.lora
            {
                l.mlp = false;
            }
            Ok(t.format("real-own-read", &[("name", named.into()), ("parameters", parameters.into())]))
        }
        Err(e) => Err(e.to_string()),
    };
    log::info!("oomlab: config {name}: {message:?}");
    ctx.data_mut(|d| d.get_temp_mut_or_default::<Input>(input_id()).message = Some(message));
}

/// Reads a file's bytes as a config (at most [`crate::estimate::hf::MAX_CONFIG_BYTES`]).
pub fn apply_bytes(ctx: &egui::Context, t: &Catalog, name: &str, bytes: &[u8], s: &mut Setup) {
    match std::str::from_utf8(bytes) {
        Ok(text) => apply(ctx, t, name, text, s),
        Err(_) => {
            let message = Err(format!("{name}: not a UTF-8 text file"));
            ctx.data_mut(|d| d.get_temp_mut_or_default::<Input>(input_id()).message = Some(message));
        }
    }
}

/// A config dropped on the window: the desktop reads it now; the browser reads it
/// asynchronously and it is applied when the Real models view next draws.
pub fn dropped(ctx: &egui::Context, t: &Catalog, file: &egui::DroppedFileHandle, s: &mut Setup) {
    let name = file.path().display().to_string();
    #[cfg(not(target_arch = "wasm32"))]
    {
        let max = crate::estimate::hf::MAX_CONFIG_BYTES as u64;
        let bytes = match std::fs::metadata(file.path()) {
            Ok(m) if m.len() > max => Err(format!("{name}: {} bytes, larger than a config.json", m.len())),
            _ => file.bytes(),
        };
        match bytes {
            Ok(b) => apply_bytes(ctx, t, &name, &b, s),
            Err(e) => ctx.data_mut(|d| d.get_temp_mut_or_default::<Input>(input_id()).message = Some(Err(e))),
        }
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = (t, s);
        let (file, ctx) = (file.clone(), ctx.clone());
        wasm_bindgen_futures::spawn_local(async move {
            if let Ok(bytes) = file.bytes_async().await {
                ctx.data_mut(|d| d.insert_temp(picked_id(), Some((name, bytes))));
                ctx.request_repaint();
            }
        });
    }
}

/// A config file's bytes, refused if larger than any config.json.
#[cfg(not(target_arch = "wasm32"))]
fn read_path(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let path = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
    let max = crate::estimate::hf::MAX_CONFIG_BYTES as u64;
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > max => Err(format!("{}: {} bytes, larger than a config.json", path.display(), m.len())),
        Ok(_) => std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The "Your own model" section: paste, open or drop a config.json; what was read, or why not.
pub fn ui(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    let ctx = ui.ctx().clone();
    if let Some(Some((name, bytes))) = ctx.data_mut(|d| d.remove_temp::<Option<(String, Vec<u8>)>>(picked_id())) {
        apply_bytes(&ctx, t, &name, &bytes, s);
    }
    let mut input = ctx.data_mut(|d| d.get_temp::<Input>(input_id())).unwrap_or_default();
    let open = input.message.is_some();
    egui::CollapsingHeader::new(t.text("real-own-model")).id_salt("real_own_model").default_open(open).show(ui, |ui| {
        ui.label(RichText::new(t.text("real-own-how")).weak());
        let field = egui::TextEdit::multiline(&mut input.text)
            .hint_text(t.text("real-own-paste"))
            .desired_rows(3)
            .code_editor()
            .desired_width(f32::INFINITY);
        ui.add(field);
        let mut read = None;
        ui.horizontal_wrapped(|ui| {
            if ui
                .add_enabled(!input.text.trim().is_empty(), egui::Button::new(t.text("real-own-read-button")))
                .clicked()
            {
                read = Some(("config.json".to_string(), input.text.clone().into_bytes()));
            }
            #[cfg(not(target_arch = "wasm32"))]
            {
                let path = ui.add(egui::TextEdit::singleline(&mut input.path).hint_text(t.text("real-own-path")));
                let go = ui.button(t.text("snap-open")).clicked()
                    || (path.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
                if go && !input.path.trim().is_empty() {
                    let path = std::path::PathBuf::from(input.path.trim());
                    match read_path(&path) {
                        Ok(bytes) => read = Some((path.display().to_string(), bytes)),
                        Err(e) => input.message = Some(Err(e)),
                    }
                }
            }
            #[cfg(target_arch = "wasm32")]
            if ui.button(t.text("snap-choose")).clicked() {
                let ctx = ctx.clone();
                crate::app::snapshot_view::pick_file(".json", ui.ctx(), move |name, bytes| {
                    ctx.data_mut(|d| d.insert_temp(picked_id(), Some((name, bytes))));
                });
            }
            ui.label(RichText::new(t.text("real-own-drop")).weak());
        });
        ctx.data_mut(|d| d.insert_temp(input_id(), input.clone()));
        if let Some((name, bytes)) = read {
            apply_bytes(&ctx, t, &name, &bytes, s);
        }
        match ctx.data_mut(|d| d.get_temp::<Input>(input_id())).and_then(|i| i.message) {
            Some(Ok(text)) => {
                ui.label(text);
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, e);
            }
            None => {}
        }
    });
}
