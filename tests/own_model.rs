//! Your own model in the app: a Hugging Face config.json pasted into the Real models view, or
//! dropped on the window, becomes the estimator's architecture; the view then shows that model's
//! estimate (its record equals the estimator's for the same setup); a config the estimator
//! cannot model leaves the model as it was and says why; a shared link carries the
//! architecture.

#[path = "support/real_models.rs"]
mod support_real_models;
use support_real_models::harness;

use std::path::Path;
use std::sync::Arc;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use oomlab::app::settings::Settings;
use oomlab::app::views::{self, drawn::Drawn};
use oomlab::app::{OomlabApp, Tab};

fn mixtral() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models/mixtral-8x7b.json");
    std::fs::read_to_string(path).expect("the catalog's Mixtral")
}

/// The Real models view's record agrees with the estimator on the app's own setup.
fn shows_its_estimate(h: &mut Harness<'_, OomlabApp>) {
    h.run_steps(3);
    let setup = h.state().settings().estimate.setup().expect("a setup");
    let Some(Drawn::RealModels(r)) = views::drawn(&h.ctx, "real-models") else { panic!("no record") };
    let e = oomlab::estimate::estimate(&setup).expect("an estimate");
    assert_eq!((r.peak_bytes, r.fits), (e.peak_bytes, e.fits()));
}

#[test]
fn a_pasted_config_becomes_the_model() {
    let mut h = harness();
    h.get_by_label("Your own model (a Hugging Face config.json)").click();
    h.run_steps(2);
    // A screen reader names the field by the sentence above it.
    let named = {
        use egui_kittest::kittest::NodeT;
        h.get_by_role(egui::Role::MultilineTextInput).accesskit_node().label().unwrap_or_default()
    };
    assert!(named.starts_with("Paste a model's config.json"), "{named:?}");
    paste_replacing(&mut h, &mixtral());
    h.get_by_label("Use this config").click();
    h.run_steps(3);
    let arch = h.state().settings().estimate.arch.clone();
    assert_eq!(arch.parameters(), 46_702_792_704, "Mixtral 8x7B's count, as transformers builds it");
    assert_eq!(arch.name, "Mixtral 8x7B", "named after the config");
    h.get_by_label("Read Mixtral 8x7B: 46,702,792,704 parameters.");
    // Why a mixture's states and activations differ, in the view's words.
    assert!(h.query_by_label_contains("8 experts, 2 per token").is_some());
    shows_its_estimate(&mut h);
    // The link carries the architecture itself (no file path), and opens to the same model.
    let link = h.state().settings().to_url_hash();
    let (opened, notice) = Settings::from_url_hash(&link, 58);
    assert!(notice.is_none(), "the link opens cleanly");
    assert_eq!(opened.estimate.arch, arch);

    // A family the estimator cannot model honestly: refused by name, the model unchanged.
    paste_replacing(&mut h, &mixtral().replace("\"mixtral\"", "\"falcon\""));
    h.get_by_label("Use this config").click();
    h.run_steps(3);
    assert!(h.query_by_label_contains("model_type \"falcon\" is not modelled yet").is_some(), "the refusal is shown");
    assert_eq!(h.state().settings().estimate.arch, arch, "the model is unchanged");
}

/// Replaces the paste field's text (select all, then type).
fn paste_replacing(h: &mut Harness<'_, OomlabApp>, text: &str) {
    let field = h.get_by_role(egui::Role::MultilineTextInput);
    field.focus();
    h.run_steps(1);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run_steps(1);
    h.get_by_role(egui::Role::MultilineTextInput).type_text(text);
    h.run_steps(2);
}

/// A file dropped on the window, as the desktop integration hands it over.
#[derive(Debug)]
struct Dropped(std::path::PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn a_dropped_config_opens_in_real_models() {
    let mut h = harness();
    h.state_mut().shown.tab = Tab::Breakdown;
    h.run_steps(2);
    let dir = tempfile::tempdir().expect("a folder");
    let path = dir.path().join("config.json");
    std::fs::write(&path, mixtral().replace("Mixtral 8x7B", "")).expect("written");
    h.input_mut().dropped_files.push(Arc::new(Dropped(path)));
    h.run_steps(3);
    assert_eq!(h.state().shown.tab, Tab::RealModels, "a config goes to Real models, not to the snapshot view");
    assert_eq!(h.state().settings().estimate.arch.parameters(), 46_702_792_704);
    shows_its_estimate(&mut h);
    // A binary file named like a config: a message, the model unchanged.
    let binary = dir.path().join("model_config.json");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x81]).expect("written");
    h.input_mut().dropped_files.push(Arc::new(Dropped(binary)));
    h.run_steps(3);
    h.get_by_label("Your own model (a Hugging Face config.json)").click();
    h.run_steps(2);
    assert!(h.query_by_label_contains("is not a text file").is_some(), "the message is shown");
    assert_eq!(h.state().settings().estimate.arch.parameters(), 46_702_792_704);
}

#[test]
fn the_catalog_is_in_the_apps_model_list() {
    let mut h = harness();
    let combo = h.query_all_by_role(egui::Role::ComboBox).find(|n| {
        use egui_kittest::kittest::NodeT;
        n.accesskit_node().label().as_deref() == Some("model")
    });
    combo.expect("the model list").click();
    h.run_steps(2);
    // The list scrolls; the catalog follows the eight presets, under its own heading.
    h.get_by_label("Published configs (Hugging Face)");
    // Under each family's heading (its model_type), every family once, in the catalog's order.
    use egui_kittest::kittest::NodeT;
    let labels: Vec<String> =
        h.query_all_by_role(egui::Role::Label).filter_map(|n| n.accesskit_node().value()).collect();
    let families: Vec<String> = oomlab::estimate::catalog::entries().iter().map(|e| e.family.clone()).collect();
    let mut heads = families.clone();
    heads.dedup();
    let shown: Vec<&String> = labels.iter().filter(|l| heads.contains(l)).collect();
    assert_eq!(shown, heads.iter().collect::<Vec<_>>(), "a heading per family, in order");
    // Each model sits below its family's heading and above the next family's.
    let top = |h: &egui_kittest::Harness<'_, OomlabApp>, text: &str| {
        h.get_by(|n| n.value().as_deref() == Some(text) || n.label().as_deref() == Some(text))
            .accesskit_node()
            .bounding_box()
            .expect("laid out")
            .y0
    };
    for e in oomlab::estimate::catalog::entries() {
        let at = heads.iter().position(|f| *f == e.family).expect("a heading");
        let y = top(&h, &e.model.arch.name);
        assert!(top(&h, &e.family) < y, "{} below {}", e.key, e.family);
        if let Some(next) = heads.get(at + 1) {
            assert!(y < top(&h, next), "{} above {next}", e.key);
        }
    }
    h.get_by_label("Llama 3.1 70B").scroll_to_me();
    h.run_steps(3);
    h.get_by_label("Llama 3.1 70B").click();
    h.run_steps(3);
    let arch = h.state().settings().estimate.arch.clone();
    assert_eq!(arch.parameters(), 70_553_706_496, "transformers' count for Llama-3.1-70B");
    h.get_by_label_contains("Llama 3.1 70B: 70,553,706,496 parameters");
    shows_its_estimate(&mut h);
}
