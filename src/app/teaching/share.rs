//! The teacher's side of a link: the toy's controls drawn under what a link locks or hides, and
//! "Share this setup", where the teacher chooses what to lock or hide and copies the link.

use super::Teaching;
use super::links::Control;
use crate::app::settings::Settings;
use crate::i18n::Catalog;

impl Teaching {
    /// The toy's controls, gated by a teacher link.
    pub fn controls(&mut self, ui: &mut egui::Ui, t: &Catalog, settings: &mut Settings, vocab: usize) {
        crate::app::controls::controls_ui(ui, t, settings, vocab, &self.restrictions, &mut self.drawn_controls);
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
            let (link, key) = match crate::app::lang::page_address() {
                Some(address) => (format!("{address}{fragment}"), "share-link"),
                None => (fragment, "share-link-fragment"),
            };
            let label = ui.label(t.text(key));
            ui.add(egui::TextEdit::multiline(&mut link.as_str()).desired_rows(3).desired_width(f32::INFINITY))
                .labelled_by(label.id);
        });
        crate::app::a11y::name_title_bar(ctx, id, &title);
        self.share = open.then_some((lock, hide));
    }
}
