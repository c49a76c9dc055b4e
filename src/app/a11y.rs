//! What assistive technology gets beyond egui's own widgets.
//!
//! - **The live line.** A finished step, an out-of-memory error and a revealed answer are said
//!   once, in the reader's language: [`Announcer`] keeps the line, and the app draws it as an
//!   AccessKit live region, which a desktop screen reader announces and the browser's mirror
//!   turns into an `aria-live` element.
//! - **The browser's mirror.** eframe's web runner drops egui's AccessKit tree, so a page
//!   reader would find an empty canvas. [`Mirror`], an egui plugin, turns each frame's tree into
//!   a flat list of [`Entry`]s in reading order (roles, names, values, states, where each is
//!   drawn), and hands it, when it changed, to a sink: on the web `web/a11y.js`, which keeps
//!   hidden DOM elements over the canvas with ARIA roles, names and values. What assistive
//!   technology does with those elements (focus, click, increment, decrement, set a value) comes
//!   back through [`queue_action`] as AccessKit action requests, which egui's widgets carry
//!   out as if the reader had acted on the canvas.
//!
//! The tree walk and the actions are plain Rust, so the native tests check them on the app's
//! own tree (tests/a11y.rs); the browser test checks the DOM Chromium exposes.

use std::sync::Mutex;

use egui::accesskit::{self, Action, ActionData, ActionRequest, NodeId, Role, Toggled, TreeUpdate};
use serde::Serialize;

/// One element of the mirror: a node a reader reads or operates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// The AccessKit node id, as a decimal string (JavaScript numbers hold only 53 bits).
    pub id: String,
    /// Its ARIA role: `button`, `checkbox`, `radio`, `slider`, `spinbutton`, `combobox`,
    /// `textbox`, `link`, `tab`, `img`, `progressbar`, `separator` or `text`.
    pub role: &'static str,
    /// The accessible name (`aria-label`); for `text`, the text itself.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The value as text (`aria-valuetext`, a text box's contents).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// A slider's or number's value and range (`aria-valuenow`, `-valuemin`, `-valuemax`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Checked (a check box, an option) or pressed (a toggle button, a tab).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<bool>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// `polite` or `assertive`: a live region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<&'static str>,
    /// Whether the reader's focus is on it in egui.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub focused: bool,
    /// Where it is drawn, in CSS pixels: left, top, width, height.
    pub rect: [f32; 4],
}

/// The ARIA role of an AccessKit role the mirror keeps (None: a container, or nothing to say).
fn aria_role(role: Role) -> Option<&'static str> {
    Some(match role {
        Role::Button | Role::DefaultButton | Role::DisclosureTriangle | Role::MenuItem => "button",
        Role::CheckBox | Role::Switch => "checkbox",
        Role::RadioButton | Role::ListBoxOption => "radio",
        Role::Slider => "slider",
        Role::SpinButton => "spinbutton",
        Role::ComboBox => "combobox",
        Role::TextInput | Role::MultilineTextInput | Role::SearchInput => "textbox",
        Role::Link => "link",
        Role::Tab => "tab",
        Role::Image => "img",
        Role::ProgressIndicator => "progressbar",
        Role::Splitter => "separator",
        Role::Label => "text",
        _ => return None,
    })
}

/// A node's accessible name: its label, else the labels (or texts) of the nodes that label it.
fn name_of(node: &accesskit::Node, nodes: &std::collections::HashMap<NodeId, &accesskit::Node>) -> String {
    if let Some(label) = node.label() {
        return label.to_string();
    }
    let parts: Vec<&str> =
        node.labelled_by().iter().filter_map(|id| nodes.get(id)).filter_map(|n| n.label().or(n.value())).collect();
    parts.join(" ")
}

/// The tree of one frame as the mirror's entries, in reading order (the tree's own order).
/// `zoom` is egui's zoom factor: bounds are in points, the page's pixels are points × zoom.
pub fn entries(update: &TreeUpdate, zoom: f32) -> Vec<Entry> {
    let nodes: std::collections::HashMap<NodeId, &accesskit::Node> =
        update.nodes.iter().map(|(i, n)| (*i, n)).collect();
    let Some(root) = update.tree.as_ref().map(|t| t.root) else { return Vec::new() };
    let mut out = Vec::new();
    // Depth first, children in order; a hidden node hides its subtree.
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let Some(node) = nodes.get(&id) else { continue };
        if node.is_hidden() {
            continue;
        }
        stack.extend(node.children().iter().rev());
        let Some(role) = aria_role(node.role()) else { continue };
        let name = name_of(node, &nodes);
        let value = node.value().unwrap_or_default().to_string();
        // Text with nothing to say, and an unnamed image (a swatch, an icon), stay out.
        if (role == "text" && value.trim().is_empty() && name.trim().is_empty()) || (role == "img" && name.is_empty()) {
            continue;
        }
        let (name, value) = if role == "text" && name.is_empty() { (value, String::new()) } else { (name, value) };
        let checked = node.toggled().map(|t| t == Toggled::True);
        let rect = node.bounds().map_or([0.0; 4], |b| {
            let z = f64::from(zoom);
            [(b.x0 * z) as f32, (b.y0 * z) as f32, (b.width() * z) as f32, (b.height() * z) as f32]
        });
        out.push(Entry {
            id: id.0.to_string(),
            role,
            name,
            value,
            now: node.numeric_value(),
            min: node.min_numeric_value(),
            max: node.max_numeric_value(),
            checked,
            disabled: node.is_disabled(),
            live: node.live().map(|l| match l {
                accesskit::Live::Assertive => "assertive",
                _ => "polite",
            }),
            focused: update.focus == id,
            rect,
        });
    }
    out
}

/// The actions a mirrored element passes on, by the names `web/a11y.js` uses.
fn action_named(name: &str) -> Option<Action> {
    Some(match name {
        "click" => Action::Click,
        "focus" => Action::Focus,
        "increment" => Action::Increment,
        "decrement" => Action::Decrement,
        "set" => Action::SetValue,
        _ => return None,
    })
}

/// The actions the page asked for since the last frame.
static ACTIONS: Mutex<Vec<ActionRequest>> = Mutex::new(Vec::new());

/// The egui event for an action the page asks of node `id` (a decimal AccessKit id):
/// `click`, `focus`, `increment`, `decrement`, or `set` with a value (a number for a slider,
/// text for a text box). None for an id or action the app cannot have made.
pub fn action_request(id: &str, action: &str, value: Option<&str>) -> Option<egui::Event> {
    let target_node = NodeId(id.parse().ok()?);
    let action = action_named(action)?;
    let data = match (action, value) {
        (Action::SetValue, Some(v)) => {
            Some(v.trim().parse::<f64>().map_or_else(|_| ActionData::Value(v.into()), ActionData::NumericValue))
        }
        (Action::SetValue, None) => return None,
        _ => None,
    };
    Some(egui::Event::AccessKitActionRequest(ActionRequest {
        action,
        target_tree: accesskit::TreeId::ROOT,
        target_node,
        data,
    }))
}

/// Queues an action the page asked for; the next frame carries it out. Whether it was
/// understood.
pub fn queue_action(id: &str, action: &str, value: Option<&str>) -> bool {
    let Some(egui::Event::AccessKitActionRequest(request)) = action_request(id, action, value) else { return false };
    if let Ok(mut queue) = ACTIONS.lock() {
        // A page that floods the queue loses the oldest requests, never the app's memory.
        if queue.len() >= 256 {
            queue.remove(0);
        }
        queue.push(request);
    }
    true
}

/// Where the mirror's entries go when they change (on the web: `web/a11y.js`).
pub type Sink = Box<dyn Fn(&str) + Send + Sync>;

/// The browser's mirror, as an egui plugin: turns on egui's AccessKit tree, sends each changed
/// frame's entries (as JSON) to its sink, and feeds the queued actions to egui.
pub struct Mirror {
    sink: Sink,
    last: String,
}

impl Mirror {
    pub fn new(sink: Sink) -> Self {
        Self { sink, last: String::new() }
    }
}

impl egui::Plugin for Mirror {
    fn debug_name(&self) -> &'static str {
        "oomlab accessible mirror"
    }

    fn setup(&mut self, ctx: &egui::Context) {
        ctx.enable_accesskit();
    }

    fn input_hook(&mut self, _ctx: &egui::Context, input: &mut egui::RawInput) {
        if let Ok(mut queue) = ACTIONS.lock() {
            input.events.extend(queue.drain(..).map(egui::Event::AccessKitActionRequest));
        }
    }

    fn output_hook(&mut self, ctx: &egui::Context, output: &mut egui::FullOutput) {
        // Keep the tree for the platform (None on the web: eframe drops it there anyway).
        let Some(update) = &output.platform_output.accesskit_update else { return };
        let json = serde_json::to_string(&entries(update, ctx.zoom_factor())).unwrap_or_default();
        if json != self.last {
            (self.sink)(&json);
            self.last = json;
        }
    }
}

/// The live line: the last thing that happened, said once.
#[derive(Default)]
pub struct Announcer {
    /// What the line says now.
    pub line: String,
    /// Whether the line is urgent (an error): announced at once rather than politely.
    pub urgent: bool,
    steps: usize,
    /// The step count when the shown answer was revealed (None: no answer shown).
    revealed_at: Option<usize>,
    error: Option<String>,
    /// Whether a chapter's question veiled the step when the line was last updated.
    veiled: bool,
}

impl Announcer {
    /// Updates the line from what the app shows: a new error; a new revealed answer, and then
    /// the real step it runs, said with the answer; a new step (not while training, when a step
    /// a second would drown everything else).
    pub fn observe(
        &mut self,
        steps: usize,
        training: bool,
        step_line: impl FnOnce() -> String,
        error: Option<String>,
        revealed: Option<String>,
    ) {
        let new_reveal = revealed.is_some() && self.revealed_at.is_none();
        if new_reveal {
            self.revealed_at = Some(self.steps);
        }
        if revealed.is_none() {
            self.revealed_at = None;
        }
        let answer = revealed.filter(|_| self.revealed_at == Some(self.steps));
        if error.is_some() && error != self.error {
            (self.line, self.urgent) = (error.clone().unwrap_or_default(), true);
        } else if steps > self.steps && !training {
            // The step a reveal ran is said with its answer.
            let line = step_line();
            self.line = answer.map_or(line.clone(), |a| format!("{a} {line}"));
            self.urgent = false;
        } else if new_reveal {
            (self.line, self.urgent) = (answer.unwrap_or_default(), false);
        }
        self.steps = steps;
        self.error = error;
    }

    /// Draws the line as a live region; its row is there before anything happened too, so that
    /// nothing below it moves when it first speaks.
    pub fn ui(&self, ui: &mut egui::Ui) {
        let line = if self.line.is_empty() { " " } else { self.line.as_str() };
        let response = ui.label(egui::RichText::new(line).small());
        let live = if self.urgent { accesskit::Live::Assertive } else { accesskit::Live::Polite };
        ui.ctx().accesskit_node_builder(response.id, |node| node.set_live(live));
    }
}

/// Names a window's title bar (egui leaves the area that moves the window unnamed) after the
/// window, for a screen reader.
pub fn name_title_bar(ctx: &egui::Context, window: egui::Id, title: &str) {
    ctx.accesskit_node_builder(window.with("__title_click"), |node| node.set_label(title));
}

/// The live line follows what happened: a step, an error, a revealed answer (`revealed`: the
/// open chapter's verdict in words, which the teaching hands over; the announcer reads no
/// lesson of its own).
pub(super) fn announce(
    announcer: &mut Announcer,
    t: &crate::i18n::Catalog,
    run: &super::run::Run,
    revealed: Option<String>,
    ctx: &egui::Context,
) {
    // A chapter's open question veils the step's figures here too.
    let veiled = super::views::veil(ctx).step;
    let step_line = || {
        let peak = run.measured.as_ref().map_or(0, crate::memory::StepMemory::peak_allocated_bytes);
        t.format(
            "live-step",
            &[
                ("n", run.steps_done().to_string().into()),
                ("peak", super::views::veil::or_hidden(t, veiled, || super::views::size(t, peak)).into()),
                ("source", super::views::Source::Allocator.word(t).into()),
            ],
        )
    };
    let error = run.error.as_ref().map(|e| e.text(t));
    // A question that opens veils what the line said before it (the last chapter's answer, a
    // step's peak).
    let veiled = super::views::veil(ctx).any();
    if veiled && !announcer.veiled {
        announcer.line.clear();
    }
    announcer.veiled = veiled;
    let before = announcer.line.clone();
    // Whether the step fits is the open question: a step the student runs is not said (a
    // failed one says nothing either) until the reveal says it with the answer.
    let steps = if super::views::veil(ctx).fits { announcer.steps } else { run.steps_done() };
    announcer.observe(steps, run.training, step_line, error, revealed);
    // The line is drawn before it is updated: a new one needs a frame of its own.
    if announcer.line != before {
        ctx.request_repaint();
    }
}
