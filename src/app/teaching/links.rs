//! Teacher links: a link carries, beside the settings, which controls are **locked** (shown,
//! disabled, their values pinned) and which are **hidden** (not drawn, pinned too), and the
//! lesson chapter to open — TensorFlow Playground's idea, so that a teacher hands out a reduced,
//! reproducible scenario: `#s=…&lock=batch,budget&hide=precision&lesson=2&lang=zh`. The teacher
//! builds one in the app ("Share this setup"). An unknown control name is ignored with a notice.

use crate::app::Notice;
use crate::app::settings::Settings;

/// A control a link can lock or hide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Control {
    Model,
    Batch,
    Sequence,
    Batching,
    Budget,
    Allocator,
    Gpus,
    Checkpointing,
    Precision,
    Attention,
    Optimizer,
    Accumulation,
    Lora,
    Offload,
    Compare,
    Seed,
    Projector,
}

impl Control {
    pub const ALL: [Control; 17] = [
        Control::Model,
        Control::Batch,
        Control::Sequence,
        Control::Batching,
        Control::Budget,
        Control::Allocator,
        Control::Gpus,
        Control::Checkpointing,
        Control::Precision,
        Control::Attention,
        Control::Optimizer,
        Control::Accumulation,
        Control::Lora,
        Control::Offload,
        Control::Compare,
        Control::Seed,
        Control::Projector,
    ];

    /// Its name in a link.
    pub fn id(self) -> &'static str {
        match self {
            Control::Model => "model",
            Control::Batch => "batch",
            Control::Sequence => "sequence",
            Control::Batching => "batching",
            Control::Budget => "budget",
            Control::Allocator => "allocator",
            Control::Gpus => "gpus",
            Control::Checkpointing => "checkpointing",
            Control::Precision => "precision",
            Control::Attention => "attention",
            Control::Optimizer => "optimizer",
            Control::Accumulation => "accumulation",
            Control::Lora => "lora",
            Control::Offload => "offload",
            Control::Compare => "compare",
            Control::Seed => "seed",
            Control::Projector => "projector",
        }
    }

    /// Its label's catalog message (the control's own).
    pub fn label_key(self) -> &'static str {
        match self {
            Control::Model => "controls-model",
            Control::Batch => "controls-batch",
            Control::Sequence => "controls-sequence",
            Control::Batching => "controls-batching",
            Control::Budget => "controls-budget",
            Control::Allocator => "controls-allocator",
            Control::Gpus => "controls-gpus",
            Control::Checkpointing => "controls-checkpointing",
            Control::Precision => "controls-precision",
            Control::Attention => "controls-attention",
            Control::Optimizer => "controls-optimizer",
            Control::Accumulation => "controls-accumulation",
            Control::Lora => "controls-lora-rank",
            Control::Offload => "controls-offload",
            Control::Compare => "controls-compare",
            Control::Seed => "controls-seed",
            Control::Projector => "controls-projector",
        }
    }

    /// Copies this control's part of the settings from `pinned` (what a lock keeps).
    fn pin(self, s: &mut Settings, pinned: &Settings) {
        match self {
            Control::Model => (s.preset, s.dims) = (pinned.preset, pinned.dims),
            Control::Batch => s.batch = pinned.batch,
            Control::Sequence => s.seq = pinned.seq,
            Control::Batching => s.device.batching = pinned.device.batching,
            Control::Budget => s.device.budget_bytes = pinned.device.budget_bytes,
            Control::Allocator => s.device.allocator = pinned.device.allocator,
            Control::Gpus => s.device.parallel = pinned.device.parallel,
            Control::Checkpointing => s.checkpoint = pinned.checkpoint,
            Control::Precision => s.precision = pinned.precision,
            Control::Attention => s.attention = pinned.attention,
            Control::Optimizer => s.optimizer = pinned.optimizer,
            Control::Accumulation => s.accum = pinned.accum,
            Control::Lora => s.lora_rank = pinned.lora_rank,
            Control::Offload => s.device.offload = pinned.device.offload,
            Control::Compare => s.overlays.clone_from(&pinned.overlays),
            Control::Seed => s.seed = pinned.seed,
            Control::Projector => s.prefs.projector = pinned.prefs.projector,
        }
    }
}

/// What a teacher link restricts, and the values it pins.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Restrictions {
    pub locked: Vec<Control>,
    pub hidden: Vec<Control>,
    /// The settings the link opened with: locked and hidden controls keep these values.
    pub pinned: Option<Settings>,
}

impl Restrictions {
    /// Whether the control is drawn.
    pub fn shows(&self, c: Control) -> bool {
        !self.hidden.contains(&c)
    }

    /// Whether the control can be changed.
    pub fn allows(&self, c: Control) -> bool {
        !self.locked.contains(&c) && !self.hidden.contains(&c)
    }

    /// Puts back what a locked or hidden control pins (a suggestion, a key or a lesson may have
    /// changed it).
    pub fn enforce(&self, s: &mut Settings) {
        let Some(pinned) = &self.pinned else { return };
        for c in Control::ALL.into_iter().filter(|&c| !self.allows(c)) {
            c.pin(s, pinned);
        }
    }

    /// The `lock=` and `hide=` fields of a link, and a notice naming what it did not know.
    pub fn from_url_hash(hash: &str) -> (Restrictions, Option<Notice>) {
        let mut unknown = Vec::new();
        let mut list = |field: &str| -> Vec<Control> {
            let Some(names) = hash.trim_start_matches('#').split('&').find_map(|kv| kv.strip_prefix(field)) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for name in names.split(',').filter(|n| !n.is_empty()) {
                match Control::ALL.into_iter().find(|c| c.id() == name) {
                    Some(c) if !out.contains(&c) => out.push(c),
                    Some(_) => {}
                    None => unknown.push(name.chars().take(40).collect::<String>()),
                }
            }
            out
        };
        let locked = list("lock=");
        let hidden = list("hide=");
        let notice = (!unknown.is_empty())
            .then(|| Notice::msg("link-unknown-controls", &[("names", Notice::Text(unknown.join(", ")))]));
        (Restrictions { locked, hidden, pinned: None }, notice)
    }

    /// The `&lock=…&hide=…` part of a link (empty when nothing is restricted).
    pub fn to_url_fields(&self) -> String {
        let join = |cs: &[Control]| cs.iter().map(|c| c.id()).collect::<Vec<_>>().join(",");
        let mut out = String::new();
        if !self.locked.is_empty() {
            out.push_str(&format!("&lock={}", join(&self.locked)));
        }
        if !self.hidden.is_empty() {
            out.push_str(&format!("&hide={}", join(&self.hidden)));
        }
        out
    }
}

/// The chapter a link opens (`lesson=N`, counted from 1 as the panel shows it).
pub fn lesson_from_url_hash(hash: &str) -> Option<usize> {
    let n: usize = hash.trim_start_matches('#').split('&').find_map(|kv| kv.strip_prefix("lesson="))?.parse().ok()?;
    n.checked_sub(1)
}
