//! The phases of a recorded run — forward, backward, optimizer step, or any `record_function`
//! range — as spans of a device's trace.
//!
//! Two sources, and each span says which:
//! - **the run's own annotations**: `external_annotations`, the START/END of every
//!   `record_function` range with its time (`Optimizer.step#AdamW.step`,
//!   `Optimizer.zero_grad#AdamW.zero_grad`, a user's `record_function("forward")`), placed on the
//!   trace by the events' `time_us`;
//! - **the stacks**, where no annotation covers an event: the autograd engine's frames mean the
//!   backward, `torch/optim/` the optimizer, a module's `_call_impl` the forward
//!   ([`super::place::signal`]). Real runs annotate the optimizer (PyTorch does it by itself)
//!   but rarely the forward and backward; their stacks say it.
//!
//! Between two events of the same phase, events with no signal (a `free` from Python, the loss)
//! belong to it; between a forward and the backward that follows, to the forward (the loss is
//! the forward's end). Where an annotation names a phase oomlab knows (`forward`, `backward`,
//! `Optimizer.step`, `zero_grad`) it wins over other names, the innermost such range over the
//! outer; among other names, the outermost range (a `record_function("train_step")` is the
//! band, not each of the thousand ranges a compiler opens inside it).

use serde::Serialize;

use super::dump::{Dump, Event};
use super::place::{Sites, signal};

/// What a phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    Forward,
    Backward,
    /// An optimizer's step.
    Optimizer,
    ZeroGrad,
    /// Any other `record_function` range.
    Named,
}

impl PhaseKind {
    /// Its words in English (the CLI's; the app's come from the catalogs: `phase-<key>`).
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Forward => "forward",
            PhaseKind::Backward => "backward",
            PhaseKind::Optimizer => "optimizer step",
            PhaseKind::ZeroGrad => "zero_grad",
            PhaseKind::Named => "annotated",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            PhaseKind::Forward => "forward",
            PhaseKind::Backward => "backward",
            PhaseKind::Optimizer => "optimizer",
            PhaseKind::ZeroGrad => "zero-grad",
            PhaseKind::Named => "named",
        }
    }
    /// The kind an annotation's name says (`Optimizer.step#AdamW.step` → optimizer).
    pub fn of_annotation(name: &str) -> PhaseKind {
        let lower = name.to_ascii_lowercase();
        if lower.contains("zero_grad") {
            PhaseKind::ZeroGrad
        } else if lower.starts_with("optimizer.step") || lower.contains("optimizer_step") {
            PhaseKind::Optimizer
        } else if lower.contains("backward") {
            PhaseKind::Backward
        } else if lower.contains("forward") {
            PhaseKind::Forward
        } else {
            PhaseKind::Named
        }
    }
}

/// Where a phase's span comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseSource {
    /// The run's `record_function` annotation.
    Annotation,
    /// The events' stacks.
    Stacks,
}

/// One span of the trace in one phase: events `first..=last`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Phase {
    pub kind: PhaseKind,
    /// The annotation's name (empty for a span found from the stacks).
    pub name: String,
    pub source: PhaseSource,
    pub first: usize,
    pub last: usize,
}

impl Phase {
    /// How it reads in English: `optimizer step (Optimizer.step#AdamW.step)`.
    pub fn label(&self) -> String {
        match (self.kind, self.name.is_empty()) {
            (PhaseKind::Named, _) => self.name.clone(),
            (_, true) => self.kind.name().to_string(),
            (k, false) => format!("{} ({})", k.name(), self.name),
        }
    }
}

/// No phase.
pub const NONE: u32 = u32::MAX;

/// A device's phases: the spans, and each event's span (or [`NONE`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Phases {
    pub spans: Vec<Phase>,
    pub of_event: Vec<u32>,
}

impl Phases {
    /// The span of event `i` (None: no phase, or before the first event).
    pub fn at(&self, i: usize) -> Option<&Phase> {
        self.of_event.get(i).and_then(|&p| self.spans.get(p as usize))
    }
    /// The span index of event `i`, if any.
    pub fn index(&self, i: usize) -> Option<u32> {
        self.of_event.get(i).copied().filter(|&p| p != NONE)
    }
}

/// A label before spans are cut: kind, annotation name (an id into `names`), source.
type Label = Option<(PhaseKind, u32, PhaseSource)>;

/// A range of an annotation over events `a..=b`.
struct Range {
    kind: PhaseKind,
    name: u32,
    a: usize,
    b: usize,
}

/// The ranges of `device`'s annotations over `trace`, by the events' times (none if the trace
/// has no times).
fn ranges(s: &Dump, device: i64, trace: &[Event], names: &mut Vec<String>) -> Vec<Range> {
    if trace.iter().all(|e| e.time_us == 0) {
        return Vec::new();
    }
    // The events' times, made non-decreasing (a stray earlier time would break the search).
    let mut times = Vec::with_capacity(trace.len());
    let mut last = i64::MIN;
    for e in trace {
        last = last.max(e.time_us);
        times.push(last);
    }
    let first_at = |t: i64| times.partition_point(|&x| x < t);
    let last_at = |t: i64| times.partition_point(|&x| x <= t);
    let mut open: Vec<(String, i64)> = Vec::new();
    let mut out = Vec::new();
    let mut push = |name: &str, t0: i64, t1: i64, out: &mut Vec<Range>| {
        let (a, b) = (first_at(t0), last_at(t1));
        if a >= b {
            return;
        }
        let id = match names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                names.push(name.to_string());
                names.len() - 1
            }
        };
        let name = u32::try_from(id).unwrap_or(u32::MAX);
        out.push(Range { kind: PhaseKind::of_annotation(names[id].as_str()), name, a, b: b - 1 });
    };
    for a in s.annotations.iter().filter(|a| a.device == device) {
        if a.is_start() {
            open.push((a.name.clone(), a.time_us));
        } else if let Some(i) = open.iter().rposition(|(n, _)| *n == a.name) {
            let (name, t0) = open.remove(i);
            push(&name, t0, a.time_us, &mut out);
        } else {
            // An end whose start the recording missed: from the trace's start.
            push(&a.name, i64::MIN, a.time_us, &mut out);
        }
    }
    // A start never ended: to the trace's end.
    for (name, t0) in open {
        push(&name, t0, i64::MAX, &mut out);
    }
    out
}

/// The phases of device `device`'s trace.
pub fn phases(s: &Dump, sites: &Sites, device: i64, trace: &[Event]) -> Phases {
    let mut names: Vec<String> = Vec::new();
    let mut labels: Vec<Label> = vec![None; trace.len()];
    // Which range labels an event: a known kind over any other name; among known kinds the
    // innermost (shortest) range, among other names the outermost (longest). Each event keeps
    // the best range met so far (no sort: one pass over the ranges' events).
    let mut best: Vec<Option<(bool, usize)>> = vec![None; trace.len()];
    for r in ranges(s, device, trace, &mut names) {
        let known = r.kind != PhaseKind::Named;
        let len = r.b - r.a;
        let end = r.b.min(trace.len().saturating_sub(1));
        for i in r.a..=end {
            let better = match best[i] {
                None => true,
                Some((k, _)) if known != k => known,
                Some((_, l)) if known => len < l,
                Some((_, l)) => len > l,
            };
            if better {
                best[i] = Some((known, len));
                labels[i] = Some((r.kind, r.name, PhaseSource::Annotation));
            }
        }
    }
    // The stacks, where no annotation says.
    for (l, e) in labels.iter_mut().zip(trace) {
        if l.is_some() {
            continue;
        }
        let bits = sites.of(e.stack).signals;
        let kind = if bits & signal::BACKWARD != 0 {
            Some(PhaseKind::Backward)
        } else if bits & signal::OPTIMIZER != 0 {
            Some(PhaseKind::Optimizer)
        } else if bits & signal::ZERO_GRAD != 0 {
            Some(PhaseKind::ZeroGrad)
        } else if bits & signal::FORWARD != 0 {
            Some(PhaseKind::Forward)
        } else {
            None
        };
        *l = kind.map(|k| (k, u32::MAX, PhaseSource::Stacks));
    }
    fill_gaps(&mut labels);
    // Spans: maximal runs of one label.
    let mut spans: Vec<Phase> = Vec::new();
    let mut of_event = vec![NONE; trace.len()];
    let mut current: Label = None;
    for (i, l) in labels.iter().enumerate() {
        let Some((kind, name, source)) = *l else {
            current = None;
            continue;
        };
        if current != *l || spans.is_empty() {
            let name = names.get(name as usize).cloned().unwrap_or_default();
            spans.push(Phase { kind, name, source, first: i, last: i });
            current = *l;
        }
        if let Some(p) = spans.last_mut() {
            p.last = i;
        }
        of_event[i] = u32::try_from(spans.len() - 1).unwrap_or(NONE);
    }
    Phases { spans, of_event }
}

/// Events with no label between two of the same phase take it; between a forward and a
/// backward, the forward's.
fn fill_gaps(labels: &mut [Label]) {
    let mut prev: Option<usize> = None;
    let mut i = 0;
    while i < labels.len() {
        if labels[i].is_some() {
            prev = Some(i);
            i += 1;
            continue;
        }
        let start = i;
        while i < labels.len() && labels[i].is_none() {
            i += 1;
        }
        let (Some(p), Some(next)) = (prev.and_then(|p| labels[p]), labels.get(i).copied().flatten()) else {
            continue;
        };
        // The same phase on both sides, or the forward's end (the loss) before the backward.
        let same = (p.0, p.1) == (next.0, next.1);
        if same || (p.0 == PhaseKind::Forward && next.0 == PhaseKind::Backward) {
            for l in &mut labels[start..i] {
                *l = Some(p);
            }
        }
    }
}
