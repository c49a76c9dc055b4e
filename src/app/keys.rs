//! Keyboard control, for a teacher at a projector: Space runs one step, B / Shift+B double and
//! halve the batch, F fits the charts, P toggles present mode, ← → change the lesson chapter, R
//! reveals its answer (a presenter's clicker sends such keys), ? lists them all. Keys are ignored
//! while a text field has the keyboard; Space and the arrows belong to a focused widget.

/// The shortcuts' catalog messages, in the order the "?" list shows them.
pub const SHORTCUTS: [&str; 11] = [
    "keys-help",
    "keys-focus",
    "keys-chapters",
    "keys-reveal",
    "keys-step",
    "keys-batch-up",
    "keys-batch-down",
    "keys-fit",
    "keys-present",
    "keys-display",
    "keys-reader",
];

/// The shortcuts pressed this frame (none while a text field has the keyboard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    /// Space: one step.
    pub step: bool,
    /// B: double the batch; Shift+B: halve it.
    pub batch_up: bool,
    pub batch_down: bool,
    /// F: the charts fit their data.
    pub fit: bool,
    /// P: present mode on or off.
    pub present: bool,
    /// ?: the list of shortcuts.
    pub help: bool,
    /// ← and →: the previous and the next chapter.
    pub previous_chapter: bool,
    pub next_chapter: bool,
    /// R: reveal the chapter's answer.
    pub reveal: bool,
}

impl Keys {
    pub fn read(ctx: &egui::Context) -> Keys {
        // Typing into a field takes every key. A focused button, slider or option — reached
        // with Tab — keeps Space and the arrows for itself (Space presses it, arrows move it),
        // but the letter shortcuts still work, so a keyboard user who tabbed somewhere keeps them.
        if ctx.text_edit_focused() {
            return Keys::default();
        }
        let focused = ctx.memory(|m| m.focused().is_some());
        ctx.input(|i| {
            let b = i.key_pressed(egui::Key::B);
            Keys {
                step: !focused && i.key_pressed(egui::Key::Space),
                batch_up: b && !i.modifiers.shift,
                batch_down: b && i.modifiers.shift,
                fit: i.key_pressed(egui::Key::F),
                present: i.key_pressed(egui::Key::P),
                help: i.events.iter().any(|e| matches!(e, egui::Event::Text(t) if t == "?")),
                previous_chapter: !focused && i.key_pressed(egui::Key::ArrowLeft),
                next_chapter: !focused && i.key_pressed(egui::Key::ArrowRight),
                reveal: i.key_pressed(egui::Key::R),
            }
        })
    }
}
