//! The replay of a real run through oomlab's caching allocator, from the Snapshot tab: with the
//! run's own settings (proof that oomlab's allocator follows PyTorch's rules: the run's segments
//! come back) or with others — "with expandable_segments:True this run would have reserved X
//! instead of Y". The replay's reserved bytes are drawn beside the run's on the timeline.

use egui::{Grid, RichText, Ui};

use super::timeline::Envelope;
use super::{bytes, size};
use crate::i18n::Catalog;
use crate::memory::snapshot::dump::Dump;
use crate::memory::snapshot::replay::Replay;
use crate::memory::snapshot::simulate::{self, SimulateError, Simulation};
use crate::plan::allocator::AllocatorConfig;

/// The replay's inputs and its result.
#[derive(Default)]
pub struct Rerun {
    /// PYTORCH_CUDA_ALLOC_CONF to try (empty: the run's own settings).
    pub conf: String,
    /// The GPU's memory, for `garbage_collection_threshold` (empty: what an OOM says, else none).
    pub memory: String,
    /// The device the result is for, the result, and its reserved line.
    pub result: Option<(i64, Result<Simulation, RerunError>)>,
    pub line: Option<Envelope>,
}

/// Why the replay did not run: kept typed, worded in the reader's language where it is shown
/// (a language switch words it again).
#[derive(Clone, Debug, PartialEq)]
pub enum RerunError {
    /// The allocator settings typed in did not read.
    Conf(crate::plan::allocator::AllocatorConfigError),
    /// The GPU's memory typed in is not a size.
    Memory(String),
    Simulate(SimulateError),
}

impl RerunError {
    pub fn text(&self, t: &Catalog) -> String {
        match self {
            RerunError::Conf(e) => e.text(t),
            RerunError::Memory(value) => t.format("snap-replay-bad-memory", &[("value", value.as_str().into())]),
            RerunError::Simulate(SimulateError::NeedsCapacity) => t.text("snap-replay-needs-memory"),
            RerunError::Simulate(SimulateError::NoTrace(_)) => t.text("snap-no-trace"),
        }
    }
}

impl Rerun {
    /// Replays `r`'s device with the fields' settings.
    pub fn run(&mut self, d: &Dump, r: &Replay) {
        let outcome = self.simulate(d, r);
        self.line = outcome.as_ref().ok().map(|s| Envelope::new(s.reserved.iter().copied()));
        self.result = Some((r.device, outcome));
    }

    fn simulate(&self, d: &Dump, r: &Replay) -> Result<Simulation, RerunError> {
        let config = match self.conf.trim() {
            "" => None,
            text => Some(AllocatorConfig::parse(text).map_err(RerunError::Conf)?),
        };
        let memory = match self.memory.trim() {
            "" => None,
            text => Some(crate::units::parse_bytes(text).map_err(|_| RerunError::Memory(text.to_string()))?),
        };
        simulate::simulate(d, r, config, memory).map_err(RerunError::Simulate)
    }

    /// The replay's reserved line for device `device`, if it ran for it.
    pub fn line_for(&self, device: i64) -> Option<&Envelope> {
        match &self.result {
            Some((d, Ok(_))) if *d == device => self.line.as_ref(),
            _ => None,
        }
    }
}

/// The replay's controls and, once it ran, the run beside the replay.
pub fn panel(ui: &mut Ui, t: &Catalog, d: &Dump, r: &Replay, state: &mut Rerun) {
    ui.strong(t.text("snap-replay-heading"));
    ui.label(RichText::new(t.text("snap-replay-how")).weak());
    let own = d.allocator_settings.as_ref().map(|a| a.alloc_conf.clone()).unwrap_or_default();
    let own = if own.is_empty() { t.text("snap-replay-own-hint") } else { own };
    let mut go = false;
    ui.horizontal_wrapped(|ui| {
        ui.label(t.text("snap-replay-conf"));
        let field = ui.add(egui::TextEdit::singleline(&mut state.conf).hint_text(own).desired_width(260.0));
        go |= field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
    });
    ui.horizontal_wrapped(|ui| {
        ui.label(t.text("snap-replay-memory"));
        let field = ui.add(egui::TextEdit::singleline(&mut state.memory).hint_text("80GiB").desired_width(100.0));
        go |= field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        go |= ui.button(t.text("snap-replay-run")).clicked();
    });
    if go {
        state.run(d, r);
    }
    let Some((device, result)) = &state.result else { return };
    if *device != r.device {
        return;
    }
    let s = match result {
        Ok(s) => s,
        Err(e) => {
            ui.colored_label(egui::Color32::RED, t.format("snap-replay-error", &[("error", e.text(t).into())]));
            return;
        }
    };
    let settings = if s.run_settings {
        let conf = if s.alloc_conf.is_empty() { t.text("snap-replay-defaults") } else { s.alloc_conf.clone() };
        t.format("snap-replay-with-own", &[("conf", conf.into())])
    } else {
        let conf = if s.alloc_conf.is_empty() { t.text("snap-replay-defaults") } else { s.alloc_conf.clone() };
        t.format("snap-replay-with", &[("conf", conf.into())])
    };
    ui.label(RichText::new(settings).strong());
    // On a narrow screen (a phone) the columns share the width and their words wrap.
    let width = ui.available_width();
    let narrow = width < 600.0;
    let mut grid = Grid::new("snap_replay").striped(true).num_columns(3);
    if narrow {
        grid = grid.max_col_width(((width - 2.0 * ui.spacing().item_spacing.x) / 3.0 - 1.0).max(40.0));
    }
    let cell = |ui: &mut Ui, text: egui::WidgetText| {
        let label = egui::Label::new(text);
        _ = ui.add(if narrow { label.wrap() } else { label.extend() })
    };
    grid.show(ui, |ui| {
        ui.label("");
        cell(ui, RichText::new(t.text("snap-replay-real")).strong().into());
        cell(ui, RichText::new(t.text("snap-replay-replayed")).strong().into());
        ui.end_row();
        let rows: [(&str, String, String); 4] = [
            (
                "snap-peak-reserved",
                size(t, bytes(s.real.peak_reserved_bytes)),
                size(t, bytes(s.replayed.peak_reserved_bytes)),
            ),
            ("snap-replay-segments", s.real.segment_allocs.to_string(), s.replayed.segment_allocs.to_string()),
            ("snap-replay-released", s.real.segment_frees.to_string(), s.replayed.segment_frees.to_string()),
            (
                "snap-replay-largest",
                size(t, bytes(s.real.largest_free_at_peak_bytes)),
                size(t, bytes(s.replayed.largest_free_at_peak_bytes)),
            ),
        ];
        for (key, real, replayed) in rows {
            cell(ui, t.text(key).into());
            cell(ui, real.into());
            cell(ui, replayed.into());
            ui.end_row();
        }
    });
    let (real, replayed) = (s.real.peak_reserved_bytes, s.replayed.peak_reserved_bytes);
    if s.run_settings {
        let off = 100.0 * (replayed - real).abs() as f64 / real.max(1) as f64;
        ui.label(t.format("snap-replay-agrees", &[("percent", format!("{off:.2}").into())]));
    } else {
        ui.label(t.format(
            "snap-replay-would",
            &[("replayed", size(t, bytes(replayed)).into()), ("real", size(t, bytes(real)).into())],
        ));
    }
    if s.releases > 0 {
        ui.label(RichText::new(t.format("snap-replay-releases", &[("count", s.releases.to_string().into())])).weak());
    }
    if s.real_ooms > 0 || s.replayed_ooms > 0 {
        ui.label(t.format(
            "snap-replay-ooms",
            &[("real", s.real_ooms.to_string().into()), ("replayed", s.replayed_ooms.to_string().into())],
        ));
    }
    if s.power2_rounding {
        ui.label(RichText::new(t.text("snap-replay-power2")).weak());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::i18n::Lang;

    /// Why a replay did not run is kept typed and worded in the language shown.
    #[test]
    fn a_refused_replay_is_worded_in_the_language_shown() {
        let (en, zh) = (Catalog::new(Lang::En), Catalog::new(Lang::Zh));
        let conf = AllocatorConfig::parse("max_split_size_mb:banana").expect_err("not a size");
        let all = [
            RerunError::Conf(conf.clone()),
            RerunError::Memory("lots".into()),
            RerunError::Simulate(SimulateError::NeedsCapacity),
            RerunError::Simulate(SimulateError::NoTrace(3)),
        ];
        for e in &all {
            assert_ne!(e.text(&en), e.text(&zh), "{e:?}");
        }
        assert_eq!(all[0].text(&zh), conf.text(&zh));
        assert!(all[1].text(&zh).contains("lots"));
    }
}
