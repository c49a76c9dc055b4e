//! Keyboard control, for a teacher at a projector: Space runs one step, B / Shift+B double and
//! halve the batch, F fits the charts, P toggles present mode, ? lists them all. Keys are ignored
//! while a text field has the keyboard.

use super::OomlabApp;
use super::settings::MAX_BATCH;

/// The shortcuts' catalog messages, in the order the "?" list shows them.
pub const SHORTCUTS: [&str; 7] =
    ["keys-help", "keys-chapters", "keys-step", "keys-batch-up", "keys-batch-down", "keys-fit", "keys-present"];

impl OomlabApp {
    /// Applies this frame's shortcuts; whether Space asked for a step.
    pub(super) fn shortcuts(&mut self, ctx: &egui::Context) -> bool {
        if ctx.egui_wants_keyboard_input() {
            return false;
        }
        let (space, b, shift, f, p, help) = ctx.input(|i| {
            (
                i.key_pressed(egui::Key::Space),
                i.key_pressed(egui::Key::B),
                i.modifiers.shift,
                i.key_pressed(egui::Key::F),
                i.key_pressed(egui::Key::P),
                i.events.iter().any(|e| matches!(e, egui::Event::Text(t) if t == "?")),
            )
        });
        if b {
            let batch = if shift { self.settings.batch / 2 } else { self.settings.batch.saturating_mul(2) };
            self.settings.batch = batch.clamp(1, MAX_BATCH);
        }
        if f {
            super::views::request_fit(ctx);
        }
        if p {
            self.settings.projector = !self.settings.projector;
        }
        if help {
            self.show_shortcuts = !self.show_shortcuts;
        }
        let (left, right) = ctx.input(|i| (i.key_pressed(egui::Key::ArrowLeft), i.key_pressed(egui::Key::ArrowRight)));
        if let Some(l) = &self.lesson {
            let chapter = l.chapter;
            if left && chapter > 0 {
                self.open_chapter(chapter - 1);
            } else if right {
                self.open_chapter(chapter + 1);
            }
        }
        space
    }

    /// The "?" list of shortcuts.
    pub(super) fn shortcuts_window(&mut self, ctx: &egui::Context) {
        if !self.show_shortcuts {
            return;
        }
        let mut open = true;
        egui::Window::new(self.tr("keys-title")).collapsible(false).resizable(false).open(&mut open).show(ctx, |ui| {
            for key in SHORTCUTS {
                ui.label(self.tr(key));
            }
        });
        self.show_shortcuts = open;
    }
}
