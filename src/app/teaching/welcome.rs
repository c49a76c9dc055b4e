//! The first screen of a newcomer who opens oomlab without a link: three ways in. A shared or
//! teacher link opens where it points instead, and the choice is remembered.

use egui::RichText;

use crate::i18n::Catalog;

/// The way in a newcomer chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Lessons,
    Explore,
    Teach,
}

/// Whether a page's address points somewhere (settings, a chapter, a challenge, a tab, a class,
/// steps to train): then it opens there, without the welcome.
pub fn link_points_somewhere(hash: &str) -> bool {
    let hash = hash.trim().trim_start_matches('#');
    hash.split('&').any(|kv| {
        let key = kv.split('=').next().unwrap_or("");
        matches!(key, "s" | "lesson" | "challenge" | "tab" | "teach" | "train" | "lock" | "hide")
    })
}

/// Draws the welcome over the app; the way chosen, if one was (Escape or a click outside
/// explores).
pub fn welcome_ui(ctx: &egui::Context, t: &Catalog) -> Option<Way> {
    let mut chosen = None;
    let modal = egui::Modal::new(egui::Id::unique("welcome")).show(ctx, |ui| {
        // At most 520 points, and never wider than a phone's screen (less the modal's margins).
        ui.set_max_width((ctx.content_rect().width() - 48.0).clamp(160.0, 520.0));
        ui.heading(RichText::new(t.text("welcome-title")).size(26.0));
        ui.label(RichText::new(t.text("welcome-intro")).size(16.0));
        ui.add_space(8.0);
        for (way, key, note) in [
            (Way::Lessons, "welcome-lessons", "welcome-lessons-note"),
            (Way::Explore, "welcome-explore", "welcome-explore-note"),
            (Way::Teach, "welcome-teach", "welcome-teach-note"),
        ] {
            let button = egui::Button::new(RichText::new(t.text(key)).size(20.0).strong());
            let response = ui.add_sized([ui.available_width(), 44.0], button);
            if way == Way::Lessons && ui.memory(|m| m.focused().is_none()) {
                response.request_focus();
            }
            if response.clicked() {
                chosen = Some(way);
            }
            // The lessons' note counts the chapters the app has.
            let chapters = super::chapters().len().to_string();
            ui.label(t.format(note, &[("chapters", chapters.into())]));
            ui.add_space(6.0);
        }
    });
    if chosen.is_none() && modal.should_close() {
        chosen = Some(Way::Explore);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_welcome_counts_the_chapters_the_app_has() {
        let n = super::super::chapters().len().to_string();
        for lang in [crate::i18n::Lang::En, crate::i18n::Lang::Zh] {
            let text = Catalog::new(lang).format("welcome-lessons-note", &[("chapters", n.clone().into())]);
            assert!(text.starts_with(&n), "{text}");
        }
    }

    #[test]
    fn only_a_link_that_points_somewhere_skips_the_welcome() {
        for hash in ["", "#", "#lang=zh", "  "] {
            assert!(!link_points_somewhere(hash), "{hash:?}");
        }
        for hash in ["#s=abc", "#lesson=2", "#lang=zh&challenge=fit", "#tab=sweep", "#teach", "#train=2", "#lock=batch"]
        {
            assert!(link_points_somewhere(hash), "{hash:?}");
        }
    }
}
