//! Your own model in the Real models view: a Hugging Face `config.json` pasted, opened (a path
//! on the desktop, the file picker in the browser) or dropped on the window, read by
//! [`crate::estimate::hf`]. The architecture it gives replaces the model in the estimator's
//! settings, so a shared link carries the architecture itself, never the file's path. What the
//! field holds and the last message live in egui's temporary memory: nothing of it is a setting.
//! And the model list (the presets, then the catalog under each family's name).

use egui::{Id, RichText, Ui};

use crate::estimate::Setup;
use crate::i18n::Catalog;

/// The field's text, the desktop's path, and the last read's outcome.
#[derive(Clone, Default)]
struct Input {
    text: String,
    /// The desktop's path field.
    #[cfg(not(target_arch = "wasm32"))]
    path: String,
    message: Option<Result<Read, Unread>>,
}

/// A config read: its model's name and parameters.
#[derive(Clone, Debug, PartialEq)]
struct Read {
    name: String,
    parameters: u64,
}

/// Why a config was not read, kept typed and worded where it is shown (in the language shown
/// then).
#[derive(Clone, Debug, PartialEq)]
enum Unread {
    NotText {
        name: String,
    },
    /// The estimator's refusal.
    Cannot(crate::estimate::EstimateError),
    /// A file larger than any config.json (the desktop's path field).
    #[cfg(not(target_arch = "wasm32"))]
    TooLarge {
        path: String,
        bytes: u64,
        max: u64,
    },
    /// The file could not be read: the system's own words, quoted.
    #[cfg(not(target_arch = "wasm32"))]
    File {
        path: String,
        error: String,
    },
}

impl Read {
    fn text(&self, t: &Catalog) -> String {
        let parameters = crate::units::group_digits(self.parameters);
        t.format("real-own-read", &[("name", self.name.as_str().into()), ("parameters", parameters.into())])
    }
}

impl Unread {
    fn text(&self, t: &Catalog) -> String {
        let error = match self {
            Unread::NotText { name } => return t.format("real-own-not-text", &[("name", name.as_str().into())]),
            Unread::Cannot(e) => e.text(t),
            #[cfg(not(target_arch = "wasm32"))]
            Unread::TooLarge { path, bytes, max } => {
                let args = [("path", path.as_str().into()), ("bytes", (*bytes).into()), ("max", (*max).into())];
                t.format("real-own-too-large", &args)
            }
            #[cfg(not(target_arch = "wasm32"))]
            Unread::File { path, error } => format!("{path}: {error}"),
        };
        t.format("real-own-cannot", &[("error", error.into())])
    }
}

fn input_id() -> Id {
    Id::unique("oomlab-model-config")
}

/// A file the browser read (picked or dropped), waiting for the next frame.
#[cfg(target_arch = "wasm32")]
fn picked_id() -> Id {
    Id::unique("oomlab-model-config-picked")
}

/// Whether a dropped file is a model's config rather than a memory snapshot.
pub fn is_config(file: &egui::DroppedFileHandle) -> bool {
    let name = file.path().display().to_string();
    let name = name.rsplit(['/', '\\']).next().unwrap_or(&name).to_ascii_lowercase();
    name.ends_with(".json") && name.contains("config")
}

/// Reads a config file's bytes into the settings: the architecture (named after the name the
/// config carries, else `name`), the sequence clamped to a learned position table. A config the
/// estimator cannot model honestly leaves the settings as they were; the message says why.
fn read(name: &str, bytes: &[u8], s: &mut Setup) -> Result<Read, Unread> {
    let text = std::str::from_utf8(bytes).map_err(|_| Unread::NotText { name: name.to_string() })?;
    let model = crate::estimate::hf::from_config_named(text, name).map_err(Unread::Cannot)?;
    let read = Read { name: model.arch.name.clone(), parameters: model.arch.parameters() };
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
    log::info!("oomlab: config {name}: {} parameters", read.parameters);
    Ok(read)
}

/// A config dropped on the window: the desktop reads it now; the browser reads it
/// asynchronously and it is applied when the Real models view next draws.
pub fn dropped(ctx: &egui::Context, file: &egui::DroppedFileHandle, s: &mut Setup) {
    let name = file.path().display().to_string();
    #[cfg(not(target_arch = "wasm32"))]
    {
        let message = read_path(file.path()).and_then(|b| read(&name, &b, s));
        ctx.data_mut(|d| d.get_temp_mut_or_default::<Input>(input_id()).message = Some(message));
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = s;
        let (file, ctx) = (file.clone(), ctx.clone());
        wasm_bindgen_futures::spawn_local(async move {
            if let Ok(bytes) = file.bytes_async().await {
                ctx.data_mut(|d| d.insert_temp(picked_id(), Some((name, bytes))));
                ctx.request_repaint();
            }
        });
    }
}

/// A config file's bytes (a folder's config.json), refused if larger than any config.json.
#[cfg(not(target_arch = "wasm32"))]
fn read_path(path: &std::path::Path) -> Result<Vec<u8>, Unread> {
    let path = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
    let file = |e: std::io::Error| Unread::File { path: path.display().to_string(), error: e.to_string() };
    let max = crate::estimate::hf::MAX_CONFIG_BYTES as u64;
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > max => Err(Unread::TooLarge { path: path.display().to_string(), bytes: m.len(), max }),
        Ok(_) => std::fs::read(&path).map_err(file),
        Err(e) => Err(file(e)),
    }
}

/// The "Your own model" section: paste, open or drop a config.json; what was read, or why not.
pub fn ui(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    let ctx = ui.ctx().clone();
    // Taken out of egui's memory for the frame and put back after it (never copied per frame).
    let mut input = ctx.data_mut(|d| d.remove_temp::<Input>(input_id())).unwrap_or_default();
    #[cfg(target_arch = "wasm32")]
    if let Some(Some((name, bytes))) = ctx.data_mut(|d| d.remove_temp::<Option<(String, Vec<u8>)>>(picked_id())) {
        input.message = Some(read(&name, &bytes, s));
    }
    let open = input.message.is_some();
    egui::CollapsingHeader::new(t.text("real-own-model")).id_salt("real_own_model").default_open(open).show(ui, |ui| {
        let how = ui.label(RichText::new(t.text("real-own-how")).weak());
        let field = egui::TextEdit::multiline(&mut input.text)
            .hint_text(t.text("real-own-paste"))
            .desired_rows(3)
            .code_editor()
            .desired_width(f32::INFINITY);
        // A screen reader names the field by the sentence above it.
        ui.add(field).labelled_by(how.id);
        ui.horizontal_wrapped(|ui| {
            let paste = egui::Button::new(t.text("real-own-read-button"));
            if ui.add_enabled(!input.text.trim().is_empty(), paste).clicked() {
                input.message = Some(read("config.json", input.text.as_bytes(), s));
            }
            #[cfg(not(target_arch = "wasm32"))]
            {
                let path = ui.add(egui::TextEdit::singleline(&mut input.path).hint_text(t.text("real-own-path")));
                let go = ui.button(t.text("snap-open")).clicked()
                    || (path.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
                if go && !input.path.trim().is_empty() {
                    let path = std::path::PathBuf::from(input.path.trim());
                    let name = path.display().to_string();
                    input.message = Some(read_path(&path).and_then(|b| read(&name, &b, s)));
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
        match &input.message {
            Some(Ok(read)) => {
                ui.label(read.text(t));
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, e.text(t));
            }
            None => {}
        }
    });
    ctx.data_mut(|d| d.insert_temp(input_id(), input));
}

/// The model list: the papers' presets, then the catalog of published configs under each
/// family's name (its model_type, as transformers names it).
pub fn model_list(ui: &mut Ui, t: &Catalog, s: &mut Setup) {
    let combo =
        egui::ComboBox::new("real_model", t.text("real-model")).selected_text(super::model_name(t, &s.arch.name));
    combo.show_ui(ui, |ui| {
        let mut family: Option<&str> = None;
        for (key, arch) in crate::estimate::presets::models() {
            if let Some(e) = crate::estimate::catalog::entries().iter().find(|e| e.key == key)
                && family != Some(e.family.as_str())
            {
                ui.separator();
                if family.is_none() {
                    ui.label(RichText::new(t.text("real-catalog")).weak());
                }
                ui.label(RichText::new(&e.family).weak().small());
                family = Some(e.family.as_str());
            }
            if ui.selectable_label(s.arch == arch, arch.name.clone()).clicked() {
                if arch.positions > 0 {
                    s.seq = s.seq.min(arch.positions);
                }
                s.arch = arch;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::i18n::Lang;

    /// What was read, or why not, is kept typed and worded in the language shown: the same
    /// outcome reads in English and in Chinese, with its numbers and names.
    #[test]
    fn an_outcome_is_worded_in_the_language_shown() {
        let (en, zh) = (Catalog::new(Lang::En), Catalog::new(Lang::Zh));
        let mut s = crate::app::settings::real_model::EstimateSettings::default().0;
        let before = s.clone();
        let not_text = read("x.json", &[0xff, 0xfe], &mut s).expect_err("not UTF-8");
        assert_eq!(not_text, Unread::NotText { name: "x.json".into() });
        let cannot = read("config.json", b"[1, 2]", &mut s).expect_err("not an object");
        assert!(matches!(cannot, Unread::Cannot(_)));
        assert_eq!(s, before, "a config not read leaves the settings as they were");
        let large = Unread::TooLarge { path: "big/config.json".into(), bytes: 9_000_000, max: 1_048_576 };
        let file = Unread::File { path: "gone/config.json".into(), error: "No such file or directory".into() };
        for unread in [&not_text, &cannot, &large, &file] {
            let (e, z) = (unread.text(&en), unread.text(&zh));
            assert_ne!(e, z, "{unread:?}");
            assert!(z.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "{z}");
        }
        assert!(large.text(&zh).contains("9000000") && large.text(&zh).contains("1048576"), "{}", large.text(&zh));
        assert!(file.text(&zh).contains("No such file or directory"), "the system's own words are quoted");
        let config = r#"{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
            "n_positions": 32}"#;
        let read = read("tiny", config.as_bytes(), &mut s).expect("a GPT-2 config");
        assert_eq!(read.parameters, s.arch.parameters());
        assert!(read.text(&zh).contains("个参数") && read.text(&en).contains("parameters"));
    }
}
