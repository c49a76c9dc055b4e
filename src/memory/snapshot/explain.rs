//! "What filled my GPU?": the allocations alive at a moment of a trace (the peak, an OOM, any
//! event), grouped by where they were made — the innermost frame of the user's own code, and the
//! Python module of the innermost frame (`torch.nn.modules.linear`: which layer's code asked) —
//! and each group's category *guessed* from its stack: the optimizer's frames mean optimizer
//! state, autograd's backward means gradients (and backward temporaries), a module's
//! construction or `.to()` means parameters, a forward call means activations. A stack says where
//! memory was asked for, not what it holds: these are guesses and are said to be; only oomlab's
//! own exports name the category (their frames are `oomlab/<category>`).
//!
//! Then the seed's diagnostic workflow, applied to what grew: measure the peak, see which
//! category grew, and the fixes that act on it.

use hashbrown::HashMap;

use serde::Serialize;

use super::dump::{Dump, FrameRef};
use super::replay::{Lifetime, Replay};

/// A category, as a stack suggests it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guess {
    Parameters,
    OptimizerState,
    Gradients,
    Activations,
    /// Neither: inputs, buffers, a user's own tensors, or no stack at all.
    Other,
}

impl Guess {
    pub const ALL: [Guess; 5] =
        [Guess::Parameters, Guess::OptimizerState, Guess::Gradients, Guess::Activations, Guess::Other];
    /// Its words in English (the CLI's; the app's come from the catalogs: `guess-<key>`).
    pub fn name(self) -> &'static str {
        match self {
            Guess::Parameters => "parameters",
            Guess::OptimizerState => "optimizer state",
            Guess::Gradients => "gradients",
            Guess::Activations => "activations",
            Guess::Other => "other",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            Guess::Parameters => "parameters",
            Guess::OptimizerState => "optimizer",
            Guess::Gradients => "gradients",
            Guess::Activations => "activations",
            Guess::Other => "other",
        }
    }
}

/// Allocations made at one place.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The innermost frame of user code (`file:line:function`), or of any code without one.
    pub site: String,
    /// The Python module of the innermost frame (`torch.nn.modules.linear`), if it has a file.
    pub module: String,
    pub guess: Guess,
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

/// Whether a frame is library code (PyTorch, an installed package, Python itself), not the
/// user's.
pub fn is_library(filename: &str) -> bool {
    filename.is_empty()
        || filename.starts_with('<')
        || filename == "??"
        || ["/site-packages/", "/dist-packages/", "/lib/python", "/torch/", "\\site-packages\\", "\\Lib\\"]
            .iter()
            .any(|p| filename.contains(p))
}

/// The dotted module of a Python file: after `site-packages/` for a package, the file's stem for
/// a script (`/home/me/train.py` → `train`).
pub fn module_of(filename: &str) -> String {
    let path = filename.replace('\\', "/");
    let rel = ["/site-packages/", "/dist-packages/"]
        .iter()
        .find_map(|p| path.split_once(p).map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| path.rsplit('/').next().unwrap_or_default().to_string());
    let rel = rel.strip_suffix(".py").unwrap_or(&rel);
    let rel = rel.strip_suffix("/__init__").unwrap_or(rel);
    rel.replace('/', ".")
}

/// The category a stack suggests, and whether it is known rather than guessed.
pub fn guess<'a>(frames: impl Iterator<Item = FrameRef<'a>> + Clone) -> (Guess, bool) {
    let mut all = frames.clone();
    if let Some(f) = all.next()
        && let Some(category) = f.filename.strip_prefix("oomlab/")
    {
        let g = match category {
            "parameters" | "master_weights" => Guess::Parameters,
            "optimizer_state" => Guess::OptimizerState,
            "gradients" => Guess::Gradients,
            "activations" => Guess::Activations,
            _ => Guess::Other,
        };
        return (g, true);
    }
    let has = |pred: &dyn Fn(&FrameRef) -> bool| frames.clone().any(|f| pred(&f));
    let path = |f: &FrameRef, p: &str| f.filename.replace('\\', "/").contains(p);
    let g = if has(&|f| path(f, "torch/optim/") || f.name == "zero_grad" && path(f, "torch/")) {
        Guess::OptimizerState
    } else if has(&|f| path(f, "torch/autograd/") || f.name == "backward" || f.name == "_engine_run_backward") {
        Guess::Gradients
    } else if has(&|f| {
        (path(f, "torch/nn/modules/module.py") && matches!(f.name, "_apply" | "to" | "cuda" | "load_state_dict"))
            || path(f, "torch/nn/init.py")
            || matches!(f.name, "__init__" | "reset_parameters" | "from_pretrained" | "_load_state_dict_into_model")
    }) {
        Guess::Parameters
    } else if has(&|f| f.name == "forward" || f.name == "_call_impl" || path(f, "torch/nn/functional.py")) {
        Guess::Activations
    } else {
        Guess::Other
    };
    (g, false)
}

/// What is alive after event `at`, grouped by place; `top` groups at most.
pub fn holding(s: &Dump, lifetimes: &[Lifetime], at: Option<usize>, top: usize) -> Holding {
    // By stack first (a stack's group is found once), then by place.
    let mut by_stack: HashMap<u32, (i64, usize)> = HashMap::new();
    let (mut bytes, mut count) = (0i64, 0usize);
    for l in lifetimes.iter().filter(|l| l.alive_after(at)) {
        let e = by_stack.entry(l.stack).or_default();
        e.0 = e.0.saturating_add(l.size);
        e.1 += 1;
        bytes = bytes.saturating_add(l.size);
        count += 1;
    }
    let mut groups: HashMap<(String, String, Guess, bool), (i64, usize)> = HashMap::new();
    for (stack, (b, n)) in by_stack {
        let frames = s.stacks.frames(stack);
        let site = frames.clone().find(|f| !is_library(f.filename)).or_else(|| frames.clone().next());
        let module = frames.clone().next().map(|f| module_of(f.filename)).unwrap_or_default();
        let (g, known) = guess(frames);
        let site = site.map(|f| f.text()).unwrap_or_default();
        let e = groups.entry((site, module, g, known)).or_default();
        e.0 = e.0.saturating_add(b);
        e.1 += n;
    }
    let mut by_guess: Vec<(Guess, i64)> = Guess::ALL.iter().map(|&g| (g, 0)).collect();
    let mut groups: Vec<Group> = groups
        .into_iter()
        .map(|((site, module, guess, known), (bytes, count))| Group { site, module, guess, known, bytes, count })
        .collect();
    for g in &groups {
        if let Some(slot) = by_guess.iter_mut().find(|(k, _)| *k == g.guess) {
            slot.1 = slot.1.saturating_add(g.bytes);
        }
    }
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)).then(a.module.cmp(&b.module)));
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
    /// The fixes that act on that category (the seed's remedies).
    Fix { guess: Guess },
    /// Free bytes inside segments that could not serve the request: fragmentation, not size.
    Fragmented { free_in_segments: i64, request: i64 },
}

/// The workflow on a replay: what grew from the start to `moment`, the fixes for it.
pub fn diagnose(s: &Dump, r: &Replay, moment: &Holding) -> Vec<Advice> {
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
    let start = holding(s, &r.lifetimes, None, 0);
    let grew = moment
        .by_guess
        .iter()
        .map(|&(g, b)| (g, b.saturating_sub(start.by_guess.iter().find(|(k, _)| *k == g).map_or(0, |x| x.1))))
        .filter(|&(_, b)| b > 0)
        .max_by_key(|&(_, b)| b);
    if let Some((guess, bytes)) = grew {
        out.push(Advice::Grew { guess, bytes });
        out.push(Advice::Fix { guess });
    }
    out
}
