//! Files dropped on the window, routed by the app: a model's config.json to the Real models
//! view's setup, anything else to the Snapshot tab (no view routes files for another).

use super::Tab;
use super::estimate_view::model_config;
use super::settings::real_model::EstimateSettings;
use super::snapshot_view::SnapshotState;

/// Takes this frame's dropped files: configs read into a copy of `model` (returned for the app
/// to send through the door; copied only when a config came), snapshots to `snapshot`, whose
/// reads also go on. The tab to show, if a file came.
pub fn route(
    ctx: &egui::Context,
    model: &EstimateSettings,
    snapshot: &mut SnapshotState,
) -> (Option<Tab>, Option<EstimateSettings>) {
    let (configs, dropped): (Vec<_>, Vec<_>) =
        ctx.input(|i| i.raw.dropped_files.clone()).into_iter().partition(model_config::is_config);
    let read = (!configs.is_empty()).then(|| {
        let mut model = model.clone();
        for f in &configs {
            model_config::dropped(ctx, f, &mut model);
        }
        model
    });
    let tab = if snapshot.poll(ctx, dropped) { Some(Tab::Snapshot) } else { read.as_ref().map(|_| Tab::RealModels) };
    (tab, read)
}
