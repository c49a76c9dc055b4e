//! "What filled my GPU?": the allocations alive at a moment of a trace (the peak, an OOM, any
//! event), grouped by where they were made ([`super::place`]: the user's own line, the operator
//! that asked), each group with what it holds and why oomlab thinks so.
//!
//! What a tensor holds follows the categories of PyTorch's memory profiler (`torch.profiler`'s
//! memory timeline: parameter, gradient, optimizer state, activation, temporary): a stack cannot
//! say what a tensor holds, but its life can ([`classify`]), read against the run's phases
//! ([`super::phase`]):
//! - alive before the recording began and never freed: the model's parameters (or inputs);
//! - made during the backward and alive into the optimizer step: gradients;
//! - made during the optimizer step and alive after it: optimizer state;
//! - made during the forward and freed during the backward: activations;
//! - made and freed within one phase: temporaries.
//!
//! Where its life says none of these, its stack's frames are read as before ([`guess`]: the
//! optimizer's frames, autograd's, a module's construction, a forward call) — a guess, and said
//! to be one. Only oomlab's own exports name the category (their frames are
//! `oomlab/<category>`).
//!
//! Then the seed's diagnostic workflow, applied to what grew: measure the peak, see which
//! category grew, and the fixes that act on it.

use hashbrown::HashMap;

use serde::Serialize;

use super::dump::FrameRef;
pub use super::kind::{Evidence, Guess};
use super::lifetime::Lifetime;
use super::place::{Place, Sites};
use super::replay::Replay;

/// Allocations made at one place, of one kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// Where they were made, in English (`model.py:41 forward (aten::addmm)`).
    pub site: String,
    pub place: Place,
    pub guess: Guess,
    /// Why the kind was given.
    pub evidence: Evidence,
    /// Whether the category is known (oomlab's own export), not guessed.
    pub known: bool,
    pub bytes: i64,
    pub count: usize,
}

/// What is alive at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Holding {
    /// After this event (`None`: before the first).
    pub at: Option<usize>,
    pub bytes: i64,
    pub count: usize,
    /// Largest first.
    pub groups: Vec<Group>,
    /// Bytes per category, in [`Guess::ALL`]'s order.
    pub by_guess: Vec<(Guess, i64)>,
}

/// The category a stack suggests (with its [`signal`]s), and whether it is known rather than
/// guessed (see [`super::place::guess_from`]).
pub fn guess<'a>(frames: impl Iterator<Item = FrameRef<'a>> + Clone, signals: u8) -> (Guess, bool) {
    let bits = frames.clone().fold(0, |b, f| b | super::place::FrameFacts::of(f).bits);
    super::place::guess_from(frames.clone().next(), bits, signals)
}

/// What is alive after event `at` of `r`, grouped by place and kind; `top` groups at most.
pub fn holding(r: &Replay, at: Option<usize>, top: usize) -> Holding {
    holding_of(&r.sites, &r.lifetimes, at, top)
}

/// [`holding`] over any lifetimes.
pub fn holding_of(sites: &Sites, lifetimes: &[Lifetime], at: Option<usize>, top: usize) -> Holding {
    // By place and kind (the place an index: a group is found once).
    let mut groups: HashMap<(u32, Guess, Evidence, bool), (i64, usize)> = HashMap::new();
    let (mut bytes, mut count) = (0i64, 0usize);
    for l in lifetimes.iter().filter(|l| l.alive_after(at)) {
        let facts = sites.of(l.stack);
        let e = groups.entry((facts.place, l.kind, l.evidence, facts.known)).or_default();
        e.0 = e.0.saturating_add(l.size);
        e.1 += 1;
        bytes = bytes.saturating_add(l.size);
        count += 1;
    }
    let mut by_guess: Vec<(Guess, i64)> = Guess::ALL.iter().map(|&g| (g, 0)).collect();
    let mut groups: Vec<Group> = groups
        .into_iter()
        .map(|((place, guess, evidence, known), (bytes, count))| {
            let place = sites.places.get(place as usize).cloned().unwrap_or_default();
            Group { site: place.text(), place, guess, evidence, known, bytes, count }
        })
        .collect();
    for g in &groups {
        if let Some(slot) = by_guess.iter_mut().find(|(k, _)| *k == g.guess) {
            slot.1 = slot.1.saturating_add(g.bytes);
        }
    }
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)).then(a.guess.cmp(&b.guess)));
    groups.truncate(top);
    Holding { at, bytes, count, groups, by_guess }
}

/// A step of the diagnostic workflow, with what it rests on.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "advice", rename_all = "snake_case")]
pub enum Advice {
    /// The peak against the device, when an OOM says how large the device is (reserved + what
    /// the driver had free): above 90 % is where the workflow starts.
    Capacity { peak: i64, capacity: i64 },
    /// The category that grew most from the trace's start to the moment, and by how much.
    Grew { guess: Guess, bytes: i64 },
    /// Where most of that growth was made: the place whose bytes of that kind grew most.
    Where { guess: Guess, place: Place, bytes: i64 },
    /// The fixes that act on that category (the seed's remedies).
    Fix { guess: Guess },
    /// Free bytes inside segments that could not serve the request: fragmentation, not size.
    Fragmented { free_in_segments: i64, request: i64 },
}

/// The workflow on a replay: what grew from the start to `moment`, the fixes for it.
pub fn diagnose(r: &Replay, moment: &Holding) -> Vec<Advice> {
    let mut out = Vec::new();
    if let Some(o) = r.ooms.first() {
        let reserved =
            o.index.checked_sub(1).and_then(|i| r.timeline.get(i)).map_or(r.initial.reserved, |p| p.reserved);
        out.push(Advice::Capacity { peak: r.peak_allocated, capacity: reserved.saturating_add(o.device_free) });
        let allocated = o.index.checked_sub(1).and_then(|i| r.timeline.get(i)).map_or(0, |p| p.allocated);
        let free_in_segments = reserved.saturating_sub(allocated);
        if free_in_segments >= o.size {
            out.push(Advice::Fragmented { free_in_segments, request: o.size });
        }
    }
    let start = holding(r, None, 0);
    let grew = moment
        .by_guess
        .iter()
        .map(|&(g, b)| (g, b.saturating_sub(start.by_guess.iter().find(|(k, _)| *k == g).map_or(0, |x| x.1))))
        .filter(|&(_, b)| b > 0)
        .max_by_key(|&(_, b)| b);
    if let Some((guess, bytes)) = grew {
        out.push(Advice::Grew { guess, bytes });
        if let Some((place, bytes)) = grew_most_at(r, moment.at, guess) {
            out.push(Advice::Where { guess, place, bytes });
        }
        out.push(Advice::Fix { guess });
    }
    out
}

/// The place whose bytes of kind `guess` grew most from the trace's start to after event `at`.
fn grew_most_at(r: &Replay, at: Option<usize>, guess: Guess) -> Option<(Place, i64)> {
    let mut by_place: HashMap<u32, i64> = HashMap::new();
    for l in r.lifetimes.iter().filter(|l| l.kind == guess) {
        let place = r.sites.of(l.stack).place;
        let change = i64::from(l.alive_after(at)) - i64::from(l.alive_after(None));
        if change != 0 {
            let e = by_place.entry(place).or_default();
            *e = e.saturating_add(change.saturating_mul(l.size));
        }
    }
    let (&place, &bytes) =
        by_place.iter().filter(|(_, b)| **b > 0).max_by_key(|&(p, b)| (*b, std::cmp::Reverse(*p)))?;
    Some((r.sites.places.get(place as usize).cloned().unwrap_or_default(), bytes))
}
