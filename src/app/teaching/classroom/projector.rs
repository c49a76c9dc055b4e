//! The class panel, made to be projected: how students join (the address, a QR code and the
//! class code, large), how many joined and answered, the question, and the class's guesses as a
//! histogram (numbers) or bars (choices) — never a name — with the true answer drawn once
//! revealed.

use egui::{Color32, RichText};
use egui_plot::{Bar, BarChart, Plot, VLine};

use super::{Classroom, Phase};
use crate::app::views;
use crate::class::{Answer, ClassState, FLOOD_JOINS, JOIN_WINDOW_SECS, Pick, Question};
use crate::i18n::Catalog;

/// What the panel asks of the app.
#[derive(Debug, Default, PartialEq)]
pub struct PanelAsks {
    /// Open the lessons (the class follows their chapters).
    pub open_lessons: bool,
}

/// A histogram of numbers: (bin centre, bin width, count), over the guesses and the answer. The
/// bins are about √n (4 to 12) of a round width (1, 2, 2.5 or 5 × 10ⁿ) starting on a multiple of
/// it, so that a projected axis reads "1.5, 2.0, 2.5" rather than "1.37, 1.94".
pub fn histogram(values: &[f64], answer: Option<f64>) -> Vec<(f64, f64, u32)> {
    let all: Vec<f64> = values.iter().copied().chain(answer).filter(|x| x.is_finite()).collect();
    let (Some(lo), Some(hi)) = (all.iter().copied().reduce(f64::min), all.iter().copied().reduce(f64::max)) else {
        return Vec::new();
    };
    let count = values.iter().filter(|x| x.is_finite()).count() as u32;
    let target = ((values.len() as f64).sqrt().ceil() as usize).clamp(4, 12);
    // One guess (or all the same) still gets a visible bar, in the middle of a few empty ones.
    let (from, to) = if hi > lo { (lo, hi) } else { (lo - lo.abs().max(1.0) * 0.1, lo + lo.abs().max(1.0) * 0.1) };
    let width = round_width((to - from) / target as f64);
    if !width.is_finite() || width <= 0.0 {
        // Guesses at both ends of f64's range: one bar, every guess counted.
        return vec![(0.0, 1.0, count)];
    }
    // Which bin a value falls in; a value on an edge belongs to the bin above it, whatever the
    // rounding of its division (2.0 is in [2.0, 2.2), not in [1.8, 2.0)).
    let bin = |x: f64, start: f64| ((x - start) / width + 1e-9).floor().max(0.0);
    let start = (from / width + 1e-9).floor() * width;
    let bins = (bin(to, start) as usize + 1).clamp(1, 2 * target);
    let mut counts = vec![0u32; bins];
    for x in values.iter().filter(|x| x.is_finite()) {
        let i = (bin(*x, start) as usize).min(bins - 1);
        counts[i] += 1;
    }
    counts.into_iter().enumerate().map(|(i, c)| (start + (i as f64 + 0.5) * width, width, c)).collect()
}

/// The smallest of 1, 2, 2.5, 5 × 10ⁿ at least `raw`.
fn round_width(raw: f64) -> f64 {
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * decade).find(|w| *w >= raw * (1.0 - 1e-9)).unwrap_or(10.0 * decade)
}

/// Each option's count, in the question's order.
pub fn choice_counts(options: &[String], answers: &[Answer]) -> Vec<u32> {
    options.iter().map(|o| answers.iter().filter(|a| matches!(a, Answer::Choice(c) if c == o)).count() as u32).collect()
}

/// The line the log gets for the guesses drawn: the current round's, and in the second round
/// the first's too ("chapter Some(2) round 2: 3 answers [a=1 b=2], round 1: 3 answers [a=3 b=0],
/// revealed none").
pub fn guesses_line(state: &ClassState, answers: &[(u32, Answer)]) -> String {
    let counts = |round: u32| {
        let these: Vec<Answer> = answers.iter().filter(|(r, _)| *r == round).map(|(_, a)| a.clone()).collect();
        let counts = match &state.question {
            Some(Question::Choice { options }) => choice_counts(options, &these)
                .iter()
                .zip(options)
                .map(|(c, o)| format!("{o}={c}"))
                .collect::<Vec<_>>()
                .join(" "),
            _ => histogram(&numbers(&these), None).iter().map(|(_, _, c)| c.to_string()).collect::<Vec<_>>().join(" "),
        };
        format!("{} answers [{counts}]", these.len())
    };
    let round = state.round.max(1);
    let mut line = format!("chapter {:?} round {round}: {}", state.chapter, counts(round));
    if round > 1 {
        line.push_str(&format!(", round 1: {}", counts(1)));
    }
    let revealed = state.revealed.as_ref().map_or("none".to_string(), Answer::text);
    format!("{line}, revealed {revealed}")
}

/// The `q`-quantile of the finite `values` (linear between the two nearest), NaN for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let at = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

/// Whether the class is split enough that discussing is worth a second round (Crouch and
/// Mazur's rule of thumb): for a choice, the commonest answer holds 30 to 70 % (two answers or
/// more); for a number, the middle half of the guesses spans more than a factor of 2 (four
/// guesses or more; a middle half that reaches zero or below spans every factor).
pub fn split(question: &Question, answers: &[Answer]) -> bool {
    match question {
        Question::Choice { options } => {
            let counts = choice_counts(options, answers);
            let n: u32 = counts.iter().sum();
            let top = counts.iter().copied().max().unwrap_or(0);
            n >= 2 && (0.3..=0.7).contains(&(f64::from(top) / f64::from(n)))
        }
        Question::Number => {
            let values: Vec<f64> = numbers(answers).into_iter().filter(|x| x.is_finite()).collect();
            let (q1, q3) = (quantile(&values, 0.25), quantile(&values, 0.75));
            values.len() >= 4 && (q1 <= 0.0 || q3 / q1 > 2.0)
        }
    }
}

/// The middle guess (the mean of the two middle ones for an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

fn numbers(answers: &[Answer]) -> Vec<f64> {
    answers
        .iter()
        .filter_map(|a| match a {
            Answer::Number(x) => Some(*x),
            Answer::Choice(_) => None,
        })
        .collect()
}

/// Whether a join address names this machine to itself (localhost, 127.x, [::1], 0.0.0.0).
pub fn loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let host = rest.split('/').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

/// Draws a QR code (rows of `1` dark / `0` light) as a square of `side` points.
pub(super) fn qr(ui: &mut egui::Ui, rows: &[String], side: f32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(side, side), egui::Sense::hover());
    let n = rows.len().max(1) as f32;
    let module = side / n;
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, Color32::WHITE);
    for (y, row) in rows.iter().enumerate() {
        for (x, _) in row.char_indices().filter(|(_, c)| *c == '1') {
            let min = rect.min + egui::vec2(x as f32 * module, y as f32 * module);
            painter.rect_filled(egui::Rect::from_min_size(min, egui::vec2(module, module)), 0.0, Color32::BLACK);
        }
    }
}

impl Classroom {
    /// The class panel.
    pub fn panel(&mut self, ui: &mut egui::Ui, t: &Catalog) -> PanelAsks {
        let mut asks = PanelAsks::default();
        let ctx = ui.ctx().clone();
        self.poll(Some(&ctx));
        ui.horizontal(|ui| {
            ui.heading(t.text("class-title"));
            if ui.button(t.text("class-hide")).clicked() {
                self.open = false;
            }
        });
        if let Some(text) = self.failure_text(t) {
            ui.colored_label(Color32::from_rgb(200, 40, 40), text);
        }
        let live = match &self.phase {
            Phase::Live(c) => Some(c.clone()),
            _ => None,
        };
        let Some(class) = live else {
            ui.label(t.text("class-intro"));
            ui.horizontal(|ui| {
                let label = ui.label(t.text("class-server"));
                ui.text_edit_singleline(&mut self.server).labelled_by(label.id);
            });
            ui.horizontal(|ui| {
                let label = ui.label(t.text("class-key"));
                let field = egui::TextEdit::singleline(&mut self.start.key).password(true);
                ui.add(field).labelled_by(label.id).on_hover_text(t.text("class-key-note"));
            });
            ui.horizontal(|ui| {
                let label = ui.label(t.text("class-expected"));
                let size = egui::DragValue::new(&mut self.start.expected).range(0..=1000);
                ui.add(size).labelled_by(label.id).on_hover_text(t.text("class-expected-note"));
            });
            let creating = matches!(self.phase, Phase::Creating);
            if ui.add_enabled(!creating, egui::Button::new(t.text("class-start"))).clicked() {
                self.start(Some(&ctx));
                asks.open_lessons = true;
            }
            if creating {
                ui.label(t.text("class-starting"));
            }
            return asks;
        };
        if ui.button(t.text("class-projector")).on_hover_text(t.text("class-projector-note")).clicked() {
            self.projection.full = true;
        }
        if loopback(&class.join_url) {
            // A phone given this machine's loopback address reaches itself, not the class.
            ui.colored_label(ui.visuals().warn_fg_color, t.text("class-loopback"));
        }
        ui.label(RichText::new(t.format("class-code", &[("code", class.code.as_str().into())])).size(28.0).strong());
        ui.label(RichText::new(t.format("class-join-at", &[("url", class.join_url.as_str().into())])).size(18.0));
        if !class.qr.is_empty() {
            qr(ui, &class.qr, 220.0);
        }
        let Some(state) = self.state.clone() else {
            ui.label(t.text("class-starting"));
            return asks;
        };
        // Numbers, not strings: English picks "1 student" by its plural rule.
        let counts = [("students", f64::from(state.students).into()), ("answered", f64::from(state.answered).into())];
        ui.label(RichText::new(t.format("class-joined", &counts)).size(18.0));
        if state.closed {
            ui.label(t.text("class-ended"));
        } else {
            self.admission(ui, t, &state, &ctx);
        }
        match (&state.chapter, &state.question) {
            (Some(chapter), Some(question)) => {
                let text = state.prompt.as_ref().and_then(|p| p.question.get(t.lang().code())).cloned();
                let heading = t.format(
                    "class-question",
                    &[("chapter", chapter.to_string().into()), ("text", text.unwrap_or_default().into())],
                );
                ui.strong(heading);
                self.guesses(ui, t, &state, question);
            }
            _ => {
                ui.label(t.text("class-no-question"));
            }
        }
        ui.horizontal_wrapped(|ui| {
            if ui.button(t.text("class-csv")).clicked() {
                self.download_csv(Some(&ctx));
            }
            if !state.closed && ui.button(t.text("class-end")).clicked() {
                self.close(Some(&ctx));
            }
        });
        asks
    }

    /// Who may join: the warning when joins come faster than a class types, the lock, the
    /// students who wait, and the list of students with their names (closed by default: names
    /// are not for the projector).
    fn admission(&mut self, ui: &mut egui::Ui, t: &Catalog, state: &ClassState, ctx: &egui::Context) {
        if state.join_flood {
            // Fast joins, or joins past the expected size however slowly they came.
            let warning = if state.joins_recent >= FLOOD_JOINS {
                let args =
                    [("joins", f64::from(state.joins_recent).into()), ("seconds", (JOIN_WINDOW_SECS as f64).into())];
                t.format("class-flood", &args)
            } else {
                let args = [
                    ("waiting", f64::from(state.waiting).into()),
                    ("expected", f64::from(state.expected.unwrap_or(0)).into()),
                ];
                t.format("class-flood-expected", &args)
            };
            let warning = RichText::new(warning).size(18.0).strong();
            // The theme's warning colour: 7.5:1 on the dark panel, and on high contrast's black.
            let colour = ui.visuals().warn_fg_color;
            ui.label(warning.color(colour));
        }
        let mut locked = state.locked;
        if ui.checkbox(&mut locked, t.text("class-lock")).changed() {
            self.lock(locked, Some(ctx));
        }
        if state.waiting > 0 {
            ui.label(
                RichText::new(t.format("class-waiting", &[("waiting", f64::from(state.waiting).into())])).size(18.0),
            );
            ui.horizontal_wrapped(|ui| {
                if ui.button(t.text("class-admit-all")).clicked() {
                    self.admit(Pick { students: Vec::new(), all_waiting: true, lock: false }, Some(ctx));
                }
                if ui.button(t.text("class-remove-waiting")).clicked() {
                    self.remove(Pick { students: Vec::new(), all_waiting: true, lock: false }, Some(ctx));
                }
                // Removed and locked out in one step: a script cannot refill the room between
                // two clicks.
                if !state.locked && ui.button(t.text("class-remove-waiting-lock")).clicked() {
                    self.remove(Pick { students: Vec::new(), all_waiting: true, lock: true }, Some(ctx));
                }
            });
        }
        let list = egui::CollapsingHeader::new(t.text("class-students")).id_salt("class_students").show(ui, |ui| {
            let Some(roster) = self.students.roster.clone() else { return };
            if roster.students.is_empty() {
                ui.label(t.text("class-no-students"));
            }
            for (i, s) in roster.students.iter().enumerate() {
                let name = s.name.clone().unwrap_or_else(|| t.text("class-no-name"));
                let who = t.format("class-student", &[("number", (i + 1).to_string().into()), ("name", name.into())]);
                // A button's short word on screen; its whole name, with the student's, for a screen
                // reader, which reads a row's buttons apart from the row.
                let button = |ui: &mut egui::Ui, key: &str, spoken: &str| {
                    let b = ui.button(t.text(key));
                    let spoken = t.format(spoken, &[("student", who.as_str().into())]);
                    b.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &spoken));
                    b.clicked()
                };
                // The buttons first, so that they line up down the list on a narrow panel.
                ui.horizontal_wrapped(|ui| {
                    let pick = Pick { students: vec![s.student.clone()], all_waiting: false, lock: false };
                    if button(ui, "class-remove", "class-remove-student") {
                        self.remove(pick.clone(), Some(ctx));
                    }
                    if s.waiting && button(ui, "class-admit", "class-admit-student") {
                        self.admit(pick, Some(ctx));
                    }
                    ui.label(&who);
                    if s.waiting {
                        ui.weak(t.text("class-student-waiting"));
                    } else {
                        ui.weak(t.format("class-student-answers", &[("answers", f64::from(s.answered).into())]));
                    }
                });
            }
        });
        let open = list.body_returned.is_some();
        if open != self.students.open {
            self.students.open = open;
            self.students.fetched_for = None;
            if !open {
                self.students.roster = None;
            }
        }
        self.refresh_roster(Some(ctx));
    }

    /// The class's guesses for the current question: the round's, and in the second round the
    /// first round's beside them (both against the true answer once revealed). In the first
    /// round, the second is offered, and suggested when the class is split.
    fn guesses(&mut self, ui: &mut egui::Ui, t: &Catalog, state: &ClassState, question: &Question) {
        let line = guesses_line(state, &self.answers);
        if line != self.projection.logged {
            log::info!("oomlab: class guesses: {line}");
            self.projection.logged = line;
        }
        let ctx = ui.ctx().clone();
        let round = state.round.max(1);
        let current = self.round_answers(round);
        if !state.closed && state.revealed.is_none() {
            if round == 1 {
                if split(question, &current) {
                    let colour = ui.visuals().warn_fg_color;
                    ui.label(RichText::new(t.text("class-split")).size(18.0).strong().color(colour));
                }
                let button = egui::Button::new(t.text("class-second-round"));
                let asked =
                    ui.add_enabled(!current.is_empty(), button).on_hover_text(t.text("class-second-round-note"));
                if asked.clicked() {
                    self.second_round(Some(&ctx));
                }
            } else {
                ui.label(RichText::new(t.text("class-round-two")).size(18.0).strong());
            }
        }
        ui.label(t.text("class-guesses"));
        if round > 1 {
            for (r, answers) in [(1, self.round_answers(1)), (round, current)] {
                let heading = t.format("class-round", &[("round", f64::from(r).into())]);
                ui.strong(heading);
                distribution(ui, t, state, question, &answers, r);
            }
        } else {
            distribution(ui, t, state, question, &current, 1);
        }
        let unit = state.prompt.as_ref().and_then(|p| p.unit.clone()).unwrap_or_default();
        match &state.revealed {
            Some(Answer::Number(x)) => {
                ui.strong(t.format("class-revealed", &[("answer", format!("{x:.2}{unit}").into())]));
            }
            Some(Answer::Choice(key)) => {
                ui.strong(t.format("class-revealed", &[("answer", option_label(t, state, question, key).into())]));
            }
            None => {}
        }
        // The answer is the real step's; the plan's prediction beside it, and a disagreement
        // said rather than hidden.
        if state.revealed.is_some()
            && let Some(planned) = &self.sync.planned
        {
            let said = match planned {
                Answer::Number(x) => format!("{x:.2}{unit}"),
                Answer::Choice(key) => option_label(t, state, question, key),
            };
            ui.label(t.format("class-planned", &[("answer", said.into())]));
            if self.sync.differs {
                ui.colored_label(ui.visuals().warn_fg_color, t.text("lesson-step-differs"));
            }
        }
    }
}

/// A choice's words in the reader's language (the key itself when the prompt has none).
pub(super) fn option_label(t: &Catalog, state: &ClassState, question: &Question, key: &str) -> String {
    let i = match question {
        Question::Choice { options } => options.iter().position(|o| o == key),
        Question::Number => None,
    };
    let words = i.and_then(|i| state.prompt.as_ref()?.options.get(i)?.get(t.lang().code()).cloned());
    words.unwrap_or_else(|| key.to_string())
}

/// One round's guesses: a histogram (numbers) or bars (choices), with the true answer once
/// revealed; described for a screen reader.
fn distribution(
    ui: &mut egui::Ui,
    t: &Catalog,
    state: &ClassState,
    question: &Question,
    answers: &[Answer],
    round: u32,
) {
    if answers.is_empty() {
        ui.label(t.text("class-no-guesses"));
    }
    let label = |key: &str| option_label(t, state, question, key);
    let answer = state.revealed.as_ref();
    let unit = state.prompt.as_ref().and_then(|p| p.unit.clone()).unwrap_or_default();
    let plot = Plot::new(("class_guesses", round))
        .height(if state.round > 1 { 140.0 } else { 180.0 })
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        .y_axis_label(t.text("class-axis-students"));
    match question {
        Question::Number => {
            let truth = match answer {
                Some(Answer::Number(x)) => Some(*x),
                _ => None,
            };
            let bins = histogram(&numbers(answers), truth);
            let plot = match (bins.first(), bins.last()) {
                (Some(first), Some(last)) => {
                    // Ticks on the bins' edges, read to the bins' precision.
                    let w = first.1;
                    let decimals = (-w.log10().floor()).clamp(0.0, 6.0) as usize;
                    plot.x_grid_spacer(egui_plot::uniform_grid_spacer(move |_| [w, 2.0 * w, 4.0 * w]))
                        .x_axis_formatter(move |mark, _| format!("{:.*}", decimals, mark.value))
                        .include_x(first.0 - w)
                        .include_x(last.0 + w)
                }
                _ => plot,
            };
            let bars: Vec<Bar> = bins.into_iter().map(|(x, w, c)| Bar::new(x, f64::from(c)).width(w * 0.95)).collect();
            let values: Vec<f64> = numbers(answers).into_iter().filter(|x| x.is_finite()).collect();
            let description = match (values.iter().copied().reduce(f64::min), values.iter().copied().reduce(f64::max)) {
                (Some(low), Some(high)) => t.format(
                    "chart-class-number",
                    &[
                        ("count", values.len().to_string().into()),
                        ("low", format!("{low:.2}{unit}").into()),
                        ("high", format!("{high:.2}{unit}").into()),
                        ("median", format!("{:.2}{unit}", median(&values)).into()),
                    ],
                ),
                _ => t.text("class-no-guesses"),
            };
            let shown = plot.x_axis_label(t.text("class-axis-guess")).show(ui, |p| {
                p.bar_chart(BarChart::new(t.text("class-guesses"), bars).color(Color32::from_rgb(70, 130, 200)));
                if let Some(x) = truth {
                    p.vline(
                        VLine::new(t.text("class-axis-answer"), x).color(Color32::from_rgb(220, 120, 0)).width(3.0),
                    );
                }
            });
            views::describe_chart(&shown.response, &description);
        }
        Question::Choice { options } => {
            let counts = choice_counts(options, answers);
            let bars: Vec<Bar> = counts
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let right = answer == Some(&Answer::Choice(options[i].clone()));
                    let fill = if right { Color32::from_rgb(220, 120, 0) } else { Color32::from_rgb(70, 130, 200) };
                    Bar::new(i as f64, f64::from(*c)).width(0.7).fill(fill).name(label(&options[i]))
                })
                .collect();
            let names: Vec<String> = options.iter().map(|o| label(o)).collect();
            let each = names.iter().zip(&counts).map(|(n, c)| format!("{n}: {c}")).collect::<Vec<_>>();
            let description = t.format("chart-class-choice", &[("counts", each.join("; ").into())]);
            let shown = plot
                .x_axis_formatter(move |mark, _| {
                    let i = mark.value.round();
                    if (mark.value - i).abs() < 1e-6 && i >= 0.0 {
                        names.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .show(ui, |p| p.bar_chart(BarChart::new(t.text("class-guesses"), bars)));
            views::describe_chart(&shown.response, &description);
        }
    }
}
