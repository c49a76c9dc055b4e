//! One allocation's life over a trace, and its kind read from that life against the run's
//! phases (else from its stack), with the evidence.

use super::kind::{Evidence, Guess};
use super::phase::{self, PhaseKind, Phases};
use super::place::Sites;

/// One allocation's life over the trace: alive after event `i` (0-based) when
/// `from <= i + 1 < to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    pub addr: i64,
    pub size: i64,
    /// The alloc's index + 1 (0: alive before the first event).
    pub from: u32,
    /// The free's index + 1 (`u32::MAX`: alive at the dump).
    pub to: u32,
    pub stack: u32,
    /// The phase (index into [`Replay::phases`]) it was made in and freed in
    /// ([`phase::NONE`]: none, or before or after the trace).
    pub made: u32,
    pub freed: u32,
    /// What it holds, guessed from its life and phases (else from its stack), and why.
    pub kind: Guess,
    pub evidence: Evidence,
}

impl Lifetime {
    pub(super) fn new(addr: i64, size: i64, from: u32, stack: u32) -> Lifetime {
        Lifetime {
            addr,
            size,
            from,
            to: u32::MAX,
            stack,
            made: phase::NONE,
            freed: phase::NONE,
            kind: Guess::Other,
            evidence: Evidence::Stack,
        }
    }
}

impl Lifetime {
    /// Whether it is alive after event `i` (`None`: before the first event).
    pub fn alive_after(&self, i: Option<usize>) -> bool {
        let at = i.map_or(0, |i| u32::try_from(i).unwrap_or(u32::MAX - 1).saturating_add(1));
        self.from <= at && at < self.to
    }
}

/// Gives every allocation its kind, from its life read against the phases (else its stack).
pub fn classify(lifetimes: &mut [Lifetime], phases: &Phases, sites: &Sites) {
    classify_each(lifetimes, phases, sites);
    let spans = &phases.spans;
    // An optimizer step recorded that made no state of its own: its state was made before the
    // recording, and is among what was alive then.
    let stepped = spans.iter().any(|p| p.kind == PhaseKind::Optimizer);
    if stepped && !lifetimes.iter().any(|l| l.evidence == Evidence::StepAndAfter) {
        for l in lifetimes.iter_mut().filter(|l| l.evidence == Evidence::BeforeRecording) {
            (l.kind, l.evidence) = (Guess::ParametersAndState, Evidence::BeforeRecordingWithState);
        }
    }
}

fn classify_each(lifetimes: &mut [Lifetime], phases: &Phases, sites: &Sites) {
    let spans = &phases.spans;
    // The first event of the first optimizer span that starts at or after each event: an
    // allocation is alive "into the step" when it lives past that span's first event.
    let mut next_step = vec![usize::MAX; phases.of_event.len() + 1];
    let mut next_backward = vec![usize::MAX; phases.of_event.len() + 1];
    for i in (0..phases.of_event.len()).rev() {
        next_step[i] = next_step[i + 1];
        next_backward[i] = next_backward[i + 1];
        match phases.at(i).map(|p| p.kind) {
            Some(PhaseKind::Optimizer) => next_step[i] = i,
            Some(PhaseKind::Backward) => next_backward[i] = i,
            _ => {}
        }
    }
    let event_phase = |at: u32| -> u32 {
        // `from`/`to` are an event's index + 1.
        at.checked_sub(1).and_then(|i| phases.index(i as usize)).unwrap_or(phase::NONE)
    };
    for l in lifetimes {
        let facts = sites.of(l.stack);
        l.made = if l.from == 0 { phase::NONE } else { event_phase(l.from) };
        l.freed = if l.to == u32::MAX { phase::NONE } else { event_phase(l.to) };
        let (kind, evidence) = if facts.known {
            (facts.guess, Evidence::Oomlab)
        } else if l.from == 0 && l.to == u32::MAX {
            (Guess::Parameters, Evidence::BeforeRecording)
        } else {
            let made = spans.get(l.made as usize);
            let freed = spans.get(l.freed as usize);
            // The event index the allocation was made at (0-based).
            let at = l.from.saturating_sub(1) as usize;
            let alive_to = if l.to == u32::MAX { usize::MAX } else { l.to as usize - 1 };
            match made.map(|p| p.kind) {
                _ if l.from == 0 => (facts.guess, Evidence::Stack),
                Some(k) if freed.is_some() && within(spans, l.made, l.freed, k) => {
                    (Guess::Temporaries, Evidence::WithinPhase)
                }
                Some(PhaseKind::Backward) => {
                    let step = next_step.get(at).copied().unwrap_or(usize::MAX);
                    if step != usize::MAX && alive_to > step {
                        (Guess::Gradients, Evidence::BackwardIntoStep)
                    } else if l.to == u32::MAX && step == usize::MAX {
                        (Guess::Gradients, Evidence::BackwardToEnd)
                    } else {
                        (facts.guess, Evidence::Stack)
                    }
                }
                Some(PhaseKind::Optimizer) => match made {
                    Some(p) if alive_to > p.last => (Guess::OptimizerState, Evidence::StepAndAfter),
                    _ => (facts.guess, Evidence::Stack),
                },
                Some(PhaseKind::Forward) => match freed.map(|p| p.kind) {
                    Some(PhaseKind::Backward) => (Guess::Activations, Evidence::ForwardToBackward),
                    None if l.to == u32::MAX && next_backward.get(at).copied().unwrap_or(usize::MAX) == usize::MAX => {
                        (Guess::Activations, Evidence::ForwardToEnd)
                    }
                    _ => (facts.guess, Evidence::Stack),
                },
                _ => (facts.guess, Evidence::Stack),
            }
        };
        l.kind = kind;
        l.evidence = evidence;
    }
}

/// Whether spans `a..=b` are all of kind `k` (one phase, perhaps cut by events of none).
fn within(spans: &[phase::Phase], a: u32, b: u32, k: PhaseKind) -> bool {
    a <= b && spans.get(a as usize..=b as usize).is_some_and(|s| s.iter().all(|p| p.kind == k))
}
