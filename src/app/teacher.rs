//! Teacher links: a link carries, beside the settings, which controls are **locked** (shown,
//! disabled, their values pinned) and which are **hidden** (not drawn, pinned too), and the
//! lesson chapter to open — TensorFlow Playground's idea, so that a teacher hands out a reduced,
//! reproducible scenario: `#s=…&lock=batch,budget&hide=precision&lesson=2&lang=zh`. The teacher
//! builds one in the app ("Share this setup"). An unknown control name is ignored with a notice.

use super::Notice;
use super::settings::Settings;
use super::teaching::{Asks, Teaching};
use crate::i18n::{Catalog, Lang};

/// A control a link can lock or hide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Control {
    Model,
    Batch,
    Sequence,
    Budget,
    Checkpointing,
    Precision,
    Attention,
    Optimizer,
    Accumulation,
    Lora,
    Compare,
    Seed,
    Projector,
}

impl Control {
    pub const ALL: [Control; 13] = [
        Control::Model,
        Control::Batch,
        Control::Sequence,
        Control::Budget,
        Control::Checkpointing,
        Control::Precision,
        Control::Attention,
        Control::Optimizer,
        Control::Accumulation,
        Control::Lora,
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
            Control::Budget => "budget",
            Control::Checkpointing => "checkpointing",
            Control::Precision => "precision",
            Control::Attention => "attention",
            Control::Optimizer => "optimizer",
            Control::Accumulation => "accumulation",
            Control::Lora => "lora",
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
            Control::Budget => "controls-budget",
            Control::Checkpointing => "controls-checkpointing",
            Control::Precision => "controls-precision",
            Control::Attention => "controls-attention",
            Control::Optimizer => "controls-optimizer",
            Control::Accumulation => "controls-accumulation",
            Control::Lora => "controls-lora-rank",
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
            Control::Budget => s.budget_bytes = pinned.budget_bytes,
            Control::Checkpointing => s.checkpoint = pinned.checkpoint,
            Control::Precision => s.precision = pinned.precision,
            Control::Attention => s.attention = pinned.attention,
            Control::Optimizer => s.optimizer = pinned.optimizer,
            Control::Accumulation => s.accum = pinned.accum,
            Control::Lora => s.lora_rank = pinned.lora_rank,
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

impl Teaching {
    /// Applies a link's teaching parts: the lesson chapter it opens (its settings written into
    /// `settings`), and the controls it locks or hides, pinned at `settings` as they are then
    /// (the link's own). A notice names anything it did not know.
    pub fn apply_teacher_link(&mut self, hash: &str, settings: &mut Settings, notices: &mut Vec<Notice>) -> Asks {
        let asks = match lesson_from_url_hash(hash) {
            Some(chapter) => self.open_chapter(chapter, settings),
            None => Asks::default(),
        };
        let (mut restrictions, notice) = Restrictions::from_url_hash(hash);
        restrictions.pinned = Some(settings.clone());
        if !restrictions.locked.is_empty() || !restrictions.hidden.is_empty() {
            let ids = |cs: &[Control]| cs.iter().map(|c| c.id()).collect::<Vec<_>>().join(", ");
            log::info!(
                "oomlab: teacher link: locked [{}]; hidden [{}]",
                ids(&restrictions.locked),
                ids(&restrictions.hidden)
            );
        }
        self.restrictions = restrictions;
        self.drawn_logged = false;
        if let Some(n) = notice {
            log::warn!("oomlab: {}", n.text(&Catalog::new(Lang::En)));
            notices.push(n);
        }
        asks
    }

    /// Once the controls panel has been drawn under a teacher link's restrictions, logs what it
    /// held: each control enabled, disabled or absent, as the widgets were drawn.
    pub fn log_drawn_controls(&mut self) {
        let r = &self.restrictions;
        if self.drawn_logged || self.drawn_controls.is_empty() || (r.locked.is_empty() && r.hidden.is_empty()) {
            return;
        }
        self.drawn_logged = true;
        let state = |c: Control| match self.drawn_controls.iter().find(|(d, _)| *d == c) {
            Some((_, true)) => "enabled",
            Some((_, false)) => "disabled",
            None => "absent",
        };
        let all: Vec<String> = Control::ALL.iter().map(|&c| format!("{} {}", c.id(), state(c))).collect();
        log::info!("oomlab: teacher link drawn: {}", all.join(", "));
    }

    /// The toy's controls, gated by a teacher link.
    pub fn controls(&mut self, ui: &mut egui::Ui, t: &Catalog, settings: &mut Settings, vocab: usize) {
        super::controls::controls_ui(ui, t, settings, vocab, &self.restrictions, &mut self.drawn_controls);
    }

    /// The link for `settings` in `lang`, with the open lesson chapter or challenge, and the
    /// controls the teacher chose to lock or hide.
    pub fn teacher_link(&self, settings: &Settings, lang: Lang, lock: &[Control], hide: &[Control]) -> String {
        let mut link = format!("{}&lang={}", settings.to_url_hash(), lang.code());
        if let Some(l) = &self.lesson {
            link.push_str(&format!("&lesson={}", l.chapter + 1));
        }
        if let Some(c) = &self.challenge {
            link.push_str(&format!("&challenge={}", super::challenges::challenges()[c.index].id));
        }
        let r = Restrictions { locked: lock.to_vec(), hidden: hide.to_vec(), pinned: None };
        link.push_str(&r.to_url_fields());
        link
    }

    /// "Share this setup": choose what to lock or hide, copy the link.
    pub fn share_window(&mut self, ctx: &egui::Context, t: &Catalog, settings: &Settings) {
        let Some((mut lock, mut hide)) = self.share.clone() else { return };
        let mut open = true;
        let (id, title) = (egui::Id::unique("oomlab_share_window"), t.text("share-title"));
        egui::Window::new(&title).id(id).open(&mut open).show(ctx, |ui| {
            ui.label(egui::RichText::new(t.text("share-help")).small());
            egui::Grid::new("share").num_columns(3).show(ui, |ui| {
                for c in Control::ALL {
                    ui.label(t.text(c.label_key()));
                    for (list, word) in [(&mut lock, "share-lock"), (&mut hide, "share-hide")] {
                        let mut on = list.contains(&c);
                        let response = ui.checkbox(&mut on, t.text(word));
                        // Read as "batch: lock", not a column of "lock"s.
                        let name = format!("{}: {}", t.text(c.label_key()), t.text(word));
                        ui.ctx().accesskit_node_builder(response.id, |node| node.set_label(name));
                        if response.changed() {
                            if on {
                                list.push(c);
                            } else {
                                list.retain(|x| *x != c);
                            }
                        }
                    }
                    ui.end_row();
                }
            });
            // In the browser the whole address, ready to send; the desktop has no address of its
            // own, so it gives the part that goes after the web app's.
            let fragment = self.teacher_link(settings, t.lang(), &lock, &hide);
            let (link, key) = match super::lang::page_address() {
                Some(address) => (format!("{address}{fragment}"), "share-link"),
                None => (fragment, "share-link-fragment"),
            };
            let label = ui.label(t.text(key));
            ui.add(egui::TextEdit::multiline(&mut link.as_str()).desired_rows(3).desired_width(f32::INFINITY))
                .labelled_by(label.id);
        });
        super::a11y::name_title_bar(ctx, id, &title);
        self.share = open.then_some((lock, hide));
    }
}
