//! The projector's view of a class, full screen, made for the back of the room: the question in
//! large type, the class's answers over at least half the screen (rounds side by side), how many
//! joined and answered, and the code and QR code — large while the room joins, in a corner once
//! it has. Numbers are binned the way people guess ratios (log-spaced when the guesses span more
//! than ×4, an overflow bin on each side), with the median and the middle half marked and, after
//! the reveal, the true value with how many landed within the chapter's tolerance.
//!
//! What it drew is recorded (`views::drawn::ProjectorDrawn`, `views::drawn("projector")`) so that tests read
//! its bins, marks and type sizes.

use egui::{Align2, Color32, FontId, Pos2, Rect, RichText, Stroke, Ui};
use serde::Serialize;

use super::Classroom;
use super::projector::{choice_counts, quantile, split};
use crate::app::views::{
    self,
    drawn::{Drawn, ProjectorDrawn, RoundDrawn},
};
use crate::class::{Answer, ClassState, Question};
use crate::i18n::Catalog;

/// The question's type size, in points (at 1920×1080 and zoom 1, pixels): at least 36.
pub const QUESTION_PX: f32 = 40.0;
/// The distributions' labels: at least 24.
pub const LABEL_PX: f32 = 26.0;
const BAR: Color32 = Color32::from_rgb(70, 130, 200);
const FIRST_ROUND: Color32 = Color32::from_rgb(120, 140, 165);
const ANSWER: Color32 = Color32::from_rgb(230, 130, 0);

/// What the full view asks of the app.
#[derive(Debug, Default, PartialEq)]
pub struct FullAsks {
    /// Reveal the lesson's answer (its real step runs; the class gets the answer after it).
    pub reveal: bool,
}

/// A number question's bins: `edges` (k + 1 of them) bound k bins; `below` and `above` count
/// the guesses outside them (the overflow bins, always drawn).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bins {
    pub edges: Vec<f64>,
    pub counts: Vec<u32>,
    pub below: u32,
    pub above: u32,
    /// Log-spaced (the guesses span more than ×4).
    pub log: bool,
}

/// Bins for number guesses (and the true value, once known): the core range is the guesses'
/// 5th to 95th percentile once 10 or more answered (their whole range before), widened to hold
/// the true value; log-spaced when it spans more than ×4; √n bins, at least 6 once 10 or more
/// answered (4 before), at most 12.
pub fn bins(values: &[f64], truth: Option<f64>) -> Bins {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    let (mut lo, mut hi) = if n >= 10 {
        (quantile(&v, 0.05), quantile(&v, 0.95))
    } else {
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    };
    if let Some(t) = truth.filter(|t| t.is_finite()) {
        (lo, hi) = (lo.min(t), hi.max(t));
    }
    if !lo.is_finite() || !hi.is_finite() {
        return Bins { edges: Vec::new(), counts: Vec::new(), below: 0, above: 0, log: false };
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        // One value (or all the same): a range around it.
        let pad = if lo > 0.0 { lo * 0.25 } else { lo.abs().max(1.0) * 0.25 };
        (lo, hi) = (lo - pad, hi + pad);
    }
    let log = lo > 0.0 && hi / lo > 4.0;
    let k = ((n as f64).sqrt().ceil() as usize).clamp(if n >= 10 { 6 } else { 4 }, 12);
    let edges: Vec<f64> = (0..=k)
        .map(|i| {
            let f = i as f64 / k as f64;
            if log { lo * (hi / lo).powf(f) } else { lo + (hi - lo) * f }
        })
        .collect();
    let mut counts = vec![0u32; k];
    let (mut below, mut above) = (0, 0);
    for &x in &v {
        if x < edges[0] {
            below += 1;
        } else if x > edges[k] {
            above += 1;
        } else {
            let i = edges.iter().rposition(|e| x >= *e).unwrap_or(0).min(k - 1);
            counts[i] += 1;
        }
    }
    Bins { edges, counts, below, above, log }
}

impl Bins {
    /// Where `x` falls along the drawn slots (below, the bins, above: k + 2 slots of width 1),
    /// as a slot coordinate (0 to k + 2).
    pub fn position(&self, x: f64) -> f64 {
        let k = self.counts.len();
        let (Some(first), Some(last)) = (self.edges.first(), self.edges.last()) else { return 0.5 };
        if x < *first {
            return 0.5;
        }
        if x > *last {
            return k as f64 + 1.5;
        }
        let i = self.edges.iter().rposition(|e| x >= *e).unwrap_or(0).min(k - 1);
        let (a, b) = (self.edges[i], self.edges[i + 1]);
        let f = if self.log { (x / a).ln() / (b / a).ln() } else { (x - a) / (b - a) };
        1.0 + i as f64 + f.clamp(0.0, 1.0)
    }
}

/// A figure to two significant digits, as an axis on a projector reads it ("1.5", "12", "0.25").
pub fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (1 - x.abs().log10().floor() as i32).max(0) as usize;
    let rounded = format!("{:.*}", digits, x);
    if rounded.contains('.') { rounded.trim_end_matches('0').trim_end_matches('.').to_string() } else { rounded }
}

impl Classroom {
    /// The full-screen projector view. `tolerance`: the open chapter's, for a number.
    pub fn full_view(&mut self, ui: &mut Ui, t: &Catalog, tolerance: Option<f64>) -> FullAsks {
        let mut asks = FullAsks::default();
        let ctx = ui.ctx().clone();
        self.poll(Some(&ctx));
        let screen = ui.ctx().content_rect();
        let Some(class) = self.class().cloned() else { return asks };
        let state = self.state.clone().unwrap_or_default();
        let round = state.round.max(1);
        let revealed = state.revealed.is_some();
        let big = |text: String, px: f32| RichText::new(text).size(px);
        if ui.input(|i| i.key_pressed(egui::Key::Escape)) {
            self.projection.full = false;
        }
        ui.horizontal_wrapped(|ui| {
            let button = |ui: &mut Ui, key: &str| ui.button(RichText::new(t.text(key)).size(22.0)).clicked();
            if button(ui, "class-projector-back") {
                self.projection.full = false;
            }
            let open = !state.closed && !revealed && state.chapter.is_some();
            if open && round == 1 && state.answered > 0 && button(ui, "class-second-round") {
                self.second_round(Some(&ctx));
            }
            if open && button(ui, "lesson-reveal") {
                asks.reveal = true;
            }
        });
        let joined = state.students > 0;
        let question = state
            .prompt
            .as_ref()
            .and_then(|p| p.question.get(t.lang().code()).cloned())
            .unwrap_or_else(|| t.text("class-no-question"));
        ui.horizontal(|ui| {
            let corner = if joined { 190.0 } else { 0.0 };
            ui.vertical(|ui| {
                ui.set_width((ui.available_width() - corner).max(200.0));
                ui.add(egui::Label::new(big(question.clone(), QUESTION_PX).strong()).wrap());
                let counts =
                    [("students", f64::from(state.students).into()), ("answered", f64::from(state.answered).into())];
                ui.label(big(t.format("class-joined", &counts), 28.0));
                if !revealed && round > 1 {
                    ui.label(big(t.text("class-round-two"), 28.0).strong());
                } else if !revealed && state.question.as_ref().is_some_and(|q| split(q, &self.round_answers(1))) {
                    ui.label(big(t.text("class-split"), 28.0).color(ui.visuals().warn_fg_color));
                }
            });
            if joined {
                ui.vertical(|ui| {
                    ui.label(big(class.code.clone(), 36.0).strong());
                    super::projector::qr(ui, &class.qr, 150.0);
                });
            }
        });
        if !joined {
            // The room is joining: the code, the address and the QR code, large.
            ui.vertical_centered(|ui| {
                ui.label(big(t.format("class-code", &[("code", class.code.as_str().into())]), 64.0).strong());
                ui.label(big(t.format("class-join-at", &[("url", class.join_url.as_str().into())]), 32.0));
                super::projector::qr(ui, &class.qr, (ui.available_height() - 20.0).clamp(160.0, 420.0));
            });
        }
        let mut rounds = Vec::new();
        let height = (ui.available_height() - 8.0).max(screen.height() * 0.5);
        if let Some(q) = &state.question {
            let shown: Vec<u32> = if round > 1 { vec![1, round] } else { vec![1] };
            let width = ui.available_width() / shown.len() as f32;
            ui.horizontal(|ui| {
                for r in shown {
                    let (rect, response) =
                        ui.allocate_exact_size(egui::vec2(width - 8.0, height), egui::Sense::hover());
                    let answers = self.round_answers(r);
                    let colour = if r < round && !revealed { FIRST_ROUND } else { BAR };
                    let heading = (round > 1).then(|| t.format("class-round", &[("round", f64::from(r).into())]));
                    let chart = RoundChart {
                        question: q,
                        state: &state,
                        tolerance,
                        round: r,
                        answers: &answers,
                        heading,
                        colour,
                    };
                    let drawn = distribution(ui, t, rect, chart);
                    views::describe_chart(&response, &describe(t, &drawn));
                    rounds.push(drawn);
                }
            });
        }
        let drawn = ProjectorDrawn {
            question,
            question_px: QUESTION_PX,
            // The smallest the labels were drawn at (they shrink only where a narrow screen
            // has no room for them at full size).
            label_px: rounds.iter().map(|r| r.label_px).fold(LABEL_PX, f32::min),
            chart_share: if rounds.is_empty() { 0.0 } else { height / screen.height().max(1.0) },
            rounds,
            join_in_corner: joined,
        };
        views::drawn::record(ui, Drawn::Projector(Box::new(drawn)));
        asks
    }
}

/// What a screen reader hears of one round's chart.
fn describe(t: &Catalog, d: &RoundDrawn) -> String {
    let slots: Vec<String> = d.slots.iter().map(|(l, c)| format!("{l}: {c}")).collect();
    let mut text = t.format(
        "chart-projector",
        &[
            ("round", f64::from(d.round).into()),
            ("answers", d.answers.to_string().into()),
            ("slots", slots.join("; ").into()),
        ],
    );
    if let Some(m) = d.median {
        text.push(' ');
        text.push_str(&t.format("projector-median", &[("median", short(m).into())]));
    }
    if let Some(truth) = &d.truth {
        text.push(' ');
        text.push_str(&t.format("projector-answer", &[("answer", truth.as_str().into())]));
    }
    text
}

/// One round's chart: the question it answers (with the class's state and the chapter's
/// tolerance), the round, its answers, its heading and its bars' colour.
struct RoundChart<'a> {
    question: &'a Question,
    state: &'a ClassState,
    tolerance: Option<f64>,
    round: u32,
    answers: &'a [Answer],
    heading: Option<String>,
    colour: Color32,
}

/// Draws one round's answers in `rect` and returns what it drew.
fn distribution(ui: &Ui, t: &Catalog, rect: Rect, chart: RoundChart<'_>) -> RoundDrawn {
    let RoundChart { question, state, tolerance, round, answers, heading, colour } = chart;
    let painter = ui.painter_at(rect);
    let ink = ui.visuals().strong_text_color();
    let font = FontId::proportional(LABEL_PX);
    let unit = state.prompt.as_ref().and_then(|p| p.unit.clone()).unwrap_or_default();
    let mut top = rect.top();
    if let Some(h) = &heading {
        painter.text(Pos2::new(rect.left() + 4.0, top), Align2::LEFT_TOP, h, FontId::proportional(30.0), ink);
        top += 40.0;
    }
    // Rows: counts above the bars, the bars, the marks' band, the labels under them.
    let label_rows = 2.0 * LABEL_PX + 16.0;
    let plot = Rect::from_min_max(
        Pos2::new(rect.left(), top + LABEL_PX + 8.0),
        Pos2::new(rect.right(), rect.bottom() - label_rows),
    );
    let mut drawn = RoundDrawn {
        round,
        answers: answers.len(),
        slots: Vec::new(),
        log: false,
        median: None,
        middle_half: None,
        truth: None,
        within: None,
        label_px: LABEL_PX,
    };
    let (counts, labels, marks): (Vec<u32>, Vec<String>, Option<Bins>) = match question {
        Question::Number => {
            let values: Vec<f64> = answers
                .iter()
                .filter_map(|a| match a {
                    Answer::Number(x) if x.is_finite() => Some(*x),
                    _ => None,
                })
                .collect();
            let truth = match &state.revealed {
                Some(Answer::Number(x)) => Some(*x),
                _ => None,
            };
            let b = bins(&values, truth);
            if !values.is_empty() {
                drawn.median = Some(quantile(&values, 0.5));
                drawn.middle_half = Some((quantile(&values, 0.25), quantile(&values, 0.75)));
            }
            if let (Some(x), Some(tol)) = (truth, tolerance) {
                let close = values.iter().filter(|v| (**v - x).abs() <= tol * x.abs()).count();
                drawn.within = Some(u32::try_from(close).unwrap_or(u32::MAX));
            }
            drawn.truth = truth.map(|x| format!("{}{unit}", short(x)));
            drawn.log = b.log;
            let mut counts = vec![b.below];
            counts.extend(&b.counts);
            counts.push(b.above);
            let first = b.edges.first().map_or(String::new(), |e| format!("< {}", short(*e)));
            let last = b.edges.last().map_or(String::new(), |e| format!("> {}", short(*e)));
            let mut labels = vec![first];
            labels.extend(b.edges.windows(2).map(|w| format!("{}–{}", short(w[0]), short(w[1]))));
            labels.push(last);
            (counts, labels, Some(b))
        }
        Question::Choice { options } => {
            let counts = choice_counts(options, answers);
            let labels =
                (0..options.len()).map(|i| super::projector::option_label(t, state, question, &options[i])).collect();
            if let Some(Answer::Choice(right)) = &state.revealed {
                let i = options.iter().position(|o| o == right);
                drawn.within = i.map(|i| counts[i]);
                drawn.truth = i.map(|i| super::projector::option_label(t, state, question, &options[i]));
            }
            (counts, labels, None)
        }
    };
    drawn.slots = labels.iter().cloned().zip(counts.iter().copied()).collect();
    let slots = counts.len().max(1);
    let slot = plot.width() / slots as f32;
    // One size for every label: the full size, or what fits the slots on a narrow screen.
    let widest =
        labels.iter().map(|l| painter.layout_no_wrap(l.clone(), font.clone(), ink).size().x).fold(1.0, f32::max);
    drawn.label_px = (LABEL_PX * ((slot - 8.0) / widest).min(1.0)).max(12.0);
    let label_font = FontId::proportional(drawn.label_px);
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let total: u32 = counts.iter().sum();
    let x_at = |s: f64| plot.left() + slot * s as f32;
    for (i, (&c, label)) in counts.iter().zip(&labels).enumerate() {
        let h = plot.height() * c as f32 / most as f32;
        let bar = Rect::from_min_max(
            Pos2::new(x_at(i as f64) + slot * 0.1, plot.bottom() - h),
            Pos2::new(x_at(i as f64 + 1.0) - slot * 0.1, plot.bottom()),
        );
        let right = matches!((&state.revealed, question), (Some(Answer::Choice(k)), Question::Choice { options }) if options.get(i) == Some(k));
        painter.rect_filled(bar, 3.0, if right { ANSWER } else { colour });
        if c > 0 {
            let share = if matches!(question, Question::Choice { .. }) && total > 0 {
                format!("{c} · {:.0} %", 100.0 * f64::from(c) / f64::from(total))
            } else {
                c.to_string()
            };
            painter.text(Pos2::new(bar.center().x, bar.top() - 4.0), Align2::CENTER_BOTTOM, share, font.clone(), ink);
        }
        // The label under its slot, on two lines where it is wider than the slot.
        let galley = painter.layout(label.clone(), label_font.clone(), ink, slot - 4.0);
        painter.galley(Pos2::new(x_at(i as f64 + 0.5) - galley.size().x / 2.0, plot.bottom() + 8.0), galley, ink);
    }
    painter.line_segment([plot.left_bottom(), plot.right_bottom()], Stroke::new(2.0, ink));
    if let Some(b) = &marks {
        // The middle half as a band under the axis, the median as a line across the bars.
        if let Some((q1, q3)) = drawn.middle_half {
            let band = Rect::from_min_max(
                Pos2::new(x_at(b.position(q1)), plot.bottom() - 10.0),
                Pos2::new(x_at(b.position(q3)).max(x_at(b.position(q1)) + 3.0), plot.bottom()),
            );
            painter.rect_filled(band, 2.0, Color32::from_rgb(250, 210, 80));
        }
        if let Some(m) = drawn.median {
            let x = x_at(b.position(m));
            painter.line_segment([Pos2::new(x, plot.top()), Pos2::new(x, plot.bottom())], Stroke::new(3.0, ink));
            let mut text = t.format("projector-median", &[("median", format!("{}{unit}", short(m)).into())]);
            if let Some((q1, q3)) = drawn.middle_half {
                let args = [("low", short(q1).into()), ("high", format!("{}{unit}", short(q3)).into())];
                text = format!("{text} · {}", t.format("projector-middle", &args));
            }
            backed(&painter, Pos2::new(x + 6.0, plot.top()), text, &font, ink);
        }
        if let (Some(Answer::Number(x)), Some(truth)) = (&state.revealed, &drawn.truth) {
            let at = x_at(b.position(*x));
            painter.line_segment([Pos2::new(at, plot.top()), Pos2::new(at, plot.bottom())], Stroke::new(6.0, ANSWER));
            let mut text = t.format("projector-answer", &[("answer", truth.as_str().into())]);
            if let (Some(n), Some(tol)) = (drawn.within, tolerance) {
                let args = [
                    ("within", f64::from(n).into()),
                    ("count", (answers.len() as f64).into()),
                    ("percent", format!("{:.0}", tol * 100.0).into()),
                ];
                text = format!("{text} · {}", t.format("projector-within", &args));
            }
            backed(&painter, Pos2::new(at + 8.0, plot.top() + LABEL_PX + 12.0), text, &font, ANSWER);
        }
    }
    drawn
}

/// A mark's words on a dark plate, so that they read over the bars they cross.
fn backed(painter: &egui::Painter, at: Pos2, text: String, font: &FontId, colour: Color32) {
    let galley = painter.layout_no_wrap(text, font.clone(), colour);
    let plate = Rect::from_min_size(at, galley.size()).expand(3.0);
    painter.rect_filled(plate, 4.0, Color32::from_black_alpha(200));
    painter.galley(at, galley, colour);
}
