//! Where an allocation was made, as a person reads it: the user's own line (`model.py:41
//! forward`), not the first frame of the stack.
//!
//! `_record_memory_history()` records C++ frames by default (`stacks="all"`): a real stack starts
//! with the unwinder's and the allocator's own frames (`torch::unwind::unwind()`,
//! `CapturedTraceback::gather`, `memory_snapshot.cpp … gather_with_cpp()`,
//! `CUDACachingAllocator.cpp … malloc`), then ATen's dispatch, then the Python frames with the
//! interpreter's C frames between them, and ends with `Py_RunMain` and `__libc_start_main`. The
//! user's line is often 25 frames down. So:
//!
//! - every stack is read through memory_viz's own filter ([`viz_keeps`]: PyTorch's
//!   `torch/cuda/_memory_viz.py` `_frame_filter`, the same lists as `frameFilter` in
//!   `torch/utils/viz/process_alloc_data.js`), and no place is ever a frame it hides;
//! - the **place** is the first Python frame outside torch and the Python standard library
//!   (`modeling_llama.py:88 forward` in transformers, or the user's own `model.py:41 forward`);
//!   when that frame is an installed package's, the user's own innermost frame is kept beside it
//!   (`…, called from train.py:80 main`: in a notebook every allocation's own frame is the one
//!   cell line that called `trainer.train()`, and the package's line is what tells them apart;
//!   in a script calling `einops`, the user's line is); with neither, torch's own first frame;
//! - a stack with no Python frame at all (the autograd engine's thread runs the backward in C++)
//!   says so, with what its C++ frames tell: the **operator** that asked (`at::_ops::mm::call`
//!   → `aten::mm`) and the **autograd node** running it (`MmBackward0`, `AccumulateGrad`);
//! - a stack of another producer's frames (oomlab's own export) is named by its first frame
//!   memory_viz keeps; an empty stack is "no stack recorded".
//!
//! The stack also carries signals of the phase it ran in (the backward engine's frames, the
//! optimizer's, a module's forward call), which [`super::phase`] reads.

use std::collections::HashMap;

use serde::Serialize;

use super::dump::{FrameRef, Stacks};
use super::kind::Guess;

/// memory_viz's `omit_functions`: frames whose function contains one of these are hidden.
pub const OMIT_FUNCTIONS: [&str; 8] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
];

/// memory_viz's `omit_filenames`: frames whose file contains one of these are hidden.
pub const OMIT_FILENAMES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

/// Whether PyTorch's memory viewer shows a frame (`_frame_filter(name, filename)`).
pub fn viz_keeps(name: &str, filename: &str) -> bool {
    !OMIT_FUNCTIONS.iter().any(|o| name.contains(o)) && !OMIT_FILENAMES.iter().any(|o| filename.contains(o))
}

/// Whether a frame is Python code: a `.py` file, or code Python compiled from a string
/// (`<ipython-input-3-…>`, `<string>`, `<frozen runpy>`). C++ frames have `??`, an empty name,
/// or a `.cpp`/`.c`/`.h`/`.o` file.
pub fn is_python(filename: &str) -> bool {
    filename.ends_with(".py") || filename.ends_with(".pyx") || (filename.starts_with('<') && filename.ends_with('>'))
}

fn slashes(filename: &str) -> String {
    filename.replace('\\', "/")
}

/// An installed package's file (site-packages, dist-packages).
pub fn is_package(filename: &str) -> bool {
    let f = slashes(filename);
    f.contains("/site-packages/") || f.contains("/dist-packages/")
}

/// PyTorch's own Python: the `torch` package (and what it generated: inductor's output code,
/// FX's `<eval_with_key>` graphs).
pub fn is_torch(filename: &str) -> bool {
    let f = slashes(filename);
    f.contains("/torch/")
        || f.starts_with("torch/")
        || f.contains("/torchinductor_")
        || f.contains("/functorch/")
        || f.starts_with("<eval_with_key>")
}

/// The Python standard library: `…/lib/python3.X/…` outside site-packages, `<frozen …>`.
pub fn is_stdlib(filename: &str) -> bool {
    let f = slashes(filename);
    if is_package(&f) {
        return false;
    }
    f.starts_with("<frozen") || f.contains("/lib/python") || f.contains("/Lib/") || f == "<string>"
}

/// Whose code a place is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Whose {
    /// The user's own Python (not torch, not the standard library, not an installed package).
    User,
    /// An installed package's Python (transformers, peft, accelerate…).
    Package,
    /// Only torch's (or the standard library's) Python frames.
    Torch,
    /// No Python frame: C++ only (the backward's engine thread, a C++ extension).
    NoPython,
    /// Neither Python nor PyTorch's C++: another producer's frames (oomlab's export).
    Frame,
    /// An empty stack (alive before the recording, or recorded without stacks).
    #[default]
    None,
}

/// Where memory was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Place {
    pub whose: Whose,
    /// The frame's file (the whole path), line and function; empty without one.
    pub file: String,
    pub line: i64,
    pub function: String,
    /// The ATen operator that asked, from the C++ frames (`aten::mm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// The autograd node that ran it, from the C++ frames (`MmBackward0`, `AccumulateGrad`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// When the frame is an installed package's: the user's own innermost frame that called it
    /// (`train.py:80 main`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// A file's last component.
pub fn basename(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

impl Place {
    /// The frame alone, as the reader writes it: `model.py:41 forward` (empty without a
    /// frame).
    pub fn frame_text(&self) -> String {
        if self.file.is_empty() && self.function.is_empty() {
            return String::new();
        }
        match self.whose {
            Whose::Frame => format!("{}:{}:{}", self.file, self.line, self.function),
            _ => format!("{}:{} {}", basename(&self.file), self.line, self.function),
        }
    }

    /// What the C++ frames add: `aten::mm in MmBackward0`.
    pub fn cpp_text(&self) -> String {
        match (&self.op, &self.node) {
            (Some(op), Some(node)) => format!("{op} in {node}"),
            (Some(op), None) => op.clone(),
            (None, Some(node)) => node.clone(),
            (None, None) => String::new(),
        }
    }

    /// The place in English (the CLI's and the JSON's; the app words it from the catalogs).
    pub fn text(&self) -> String {
        let cpp = self.cpp_text();
        let text = match self.whose {
            Whose::None => "no stack recorded".into(),
            Whose::NoPython if cpp.is_empty() => "no Python frame".into(),
            Whose::NoPython => format!("no Python frame ({cpp})"),
            _ if cpp.is_empty() => self.frame_text(),
            _ => format!("{} ({cpp})", self.frame_text()),
        };
        match &self.caller {
            Some(c) => format!("{text}, called from {c}"),
            None => text,
        }
    }
}

/// What a stack says of the phase it ran in.
pub mod signal {
    /// The autograd engine ran it (C++ `torch::autograd::Engine` frames, or Python's
    /// `backward`/`_engine_run_backward`).
    pub const BACKWARD: u8 = 1;
    /// An optimizer's step (`torch/optim/` frames other than `zero_grad`).
    pub const OPTIMIZER: u8 = 2;
    /// `zero_grad`.
    pub const ZERO_GRAD: u8 = 4;
    /// A module's forward call (`torch/nn/modules/module.py` `_call_impl`).
    pub const FORWARD: u8 = 8;
    /// `AccumulateGrad`: a parameter's `.grad` being made or summed into.
    pub const ACCUMULATE_GRAD: u8 = 16;
}

/// What one stack tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackFacts {
    /// Index into [`Sites::places`].
    pub place: u32,
    /// [`signal`] bits.
    pub signals: u8,
    /// The category its frames suggest, and whether oomlab's export names it (not a guess).
    pub guess: Guess,
    pub known: bool,
}

/// Every stack's place and signals, each distinct place stored once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sites {
    pub places: Vec<Place>,
    /// By stack id.
    pub stacks: Vec<StackFacts>,
}

impl Sites {
    /// Reads every stack of `stacks`: each distinct frame once, then each stack from its
    /// frames' facts (a real dump's few thousand stacks in milliseconds; a generated one with
    /// hundreds of thousands of distinct stacks in well under a second).
    pub fn new(stacks: &Stacks) -> Sites {
        let mut facts: Vec<FrameFacts> = (0..stacks.frames.len())
            .map(|i| FrameFacts::of(stacks.frame(u32::try_from(i).unwrap_or(u32::MAX))))
            .collect();
        // The distinct operators' and nodes' names, each an id (a few hundred: a list will do).
        let (mut ops, mut nodes): (Vec<Box<str>>, Vec<Box<str>>) = (Vec::new(), Vec::new());
        let id = |list: &mut Vec<Box<str>>, name: &str| -> u32 {
            let i = list.iter().position(|n| &**n == name).unwrap_or_else(|| {
                list.push(name.into());
                list.len() - 1
            });
            u32::try_from(i + 1).unwrap_or(u32::MAX)
        };
        for f in &mut facts {
            if let Some(o) = f.op.as_deref() {
                f.op_id = id(&mut ops, o);
            }
            if let Some(n) = f.node.as_deref() {
                f.node_id = id(&mut nodes, n);
            }
        }
        let none = FrameFacts::default();
        let fact_of = |f: u32| facts.get(f as usize).unwrap_or(&none);
        let mut places: Vec<Place> = Vec::new();
        let mut ids: HashMap<PlaceKey, u32> = HashMap::new();
        let stacks_facts = (0..stacks.len())
            .map(|id| {
                let id = u32::try_from(id).unwrap_or(u32::MAX);
                let (key, signals, bits) = summarize(stacks.stack(id).iter().map(|&f| (f, fact_of(f))));
                let (guess, known) = guess_from(stacks.frames(id).next(), bits, signals);
                // The key by names: which frame gave the operator does not matter.
                let named = PlaceKey { op: key.op.map(|(o, _)| (o, 0)), node: key.node.map(|(n, _)| (n, 0)), ..key };
                let n = *ids.entry(named).or_insert_with(|| {
                    places.push(build(key, |f| stacks.frame(f), fact_of));
                    u32::try_from(places.len() - 1).unwrap_or(u32::MAX)
                });
                StackFacts { place: n, signals, guess, known }
            })
            .collect();
        Sites { places, stacks: stacks_facts }
    }

    /// A stack's facts (an unknown id is the empty stack's).
    pub fn of(&self, stack: u32) -> StackFacts {
        self.stacks.get(stack as usize).copied().unwrap_or_default()
    }

    pub fn place(&self, stack: u32) -> &Place {
        static NONE: Place = Place {
            whose: Whose::None,
            file: String::new(),
            line: 0,
            function: String::new(),
            op: None,
            node: None,
            caller: None,
        };
        self.places.get(self.of(stack).place as usize).unwrap_or(&NONE)
    }
}

/// `at::_ops::addmm::call` → `aten::addmm`; `at::_ops::div_Tensor::call` → `aten::div`: the
/// struct's name less a trailing overload (`_Tensor`, `_Scalar`, `_IntList`: a part that starts
/// with a capital letter, or `_out`).
pub fn aten_op(name: &str) -> Option<String> {
    let rest = name.split("at::_ops::").nth(1)?;
    let (op, tail) = rest.split_once("::")?;
    if !(tail.starts_with("call") || tail.starts_with("redispatch")) || op.is_empty() {
        return None;
    }
    let mut op = op;
    while let Some((head, last)) = op.rsplit_once('_') {
        let overload = last.chars().next().is_some_and(|c| c.is_ascii_uppercase()) || last == "out";
        if !overload || head.is_empty() {
            break;
        }
        op = head;
    }
    Some(format!("aten::{op}"))
}

/// `torch::autograd::generated::MmBackward0::apply(…)` → `MmBackward0`;
/// `torch::autograd::AccumulateGrad::apply(…)` → `AccumulateGrad`.
pub fn autograd_node(name: &str) -> Option<String> {
    let head = name.split('(').next()?;
    let head = head.strip_suffix("::apply")?;
    let node = head.rsplit("::").next()?;
    (head.starts_with("torch::autograd::")
        && !node.is_empty()
        && node.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then(|| node.to_string())
}

/// What one frame tells, found once per distinct frame (a real dump has a few thousand frames
/// behind hundreds of thousands of stacks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameFacts {
    /// [`fact`] bits.
    pub bits: u32,
    /// Its operator's and node's ids among the distinct ones (equal names, equal ids; 0: none).
    pub op_id: u32,
    pub node_id: u32,
    /// The ATen operator it calls (`aten::mm`), if it is an `at::_ops` frame.
    pub op: Option<Box<str>>,
    /// The autograd node it runs (`MmBackward0`), if it is a node's `apply`.
    pub node: Option<Box<str>>,
}

/// A frame's [`FrameFacts::bits`].
pub mod fact {
    pub const PYTHON: u32 = 1;
    /// torch's Python or the standard library's.
    pub const TORCH: u32 = 1 << 1;
    /// An installed package's Python.
    pub const PACKAGE: u32 = 1 << 2;
    /// memory_viz shows it.
    pub const KEPT: u32 = 1 << 3;
    /// PyTorch's C++ (`at::`, `c10::`, `torch::`).
    pub const CPP: u32 = 1 << 4;
    /// The autograd engine (C++ or Python): the backward.
    pub const BACKWARD: u32 = 1 << 5;
    /// `torch/optim/`, not `zero_grad`.
    pub const OPTIMIZER: u32 = 1 << 6;
    pub const ZERO_GRAD: u32 = 1 << 7;
    /// A module's `_call_impl`.
    pub const FORWARD: u32 = 1 << 8;
    /// The stack guess's signs: torch's `zero_grad`, `torch/autograd/` or a `backward`, a
    /// module's construction or `.to()`, a forward call.
    pub const GUESS_OPTIM: u32 = 1 << 9;
    pub const GUESS_AUTOGRAD: u32 = 1 << 10;
    pub const GUESS_PARAMS: u32 = 1 << 11;
    pub const GUESS_FORWARD: u32 = 1 << 12;
}

impl FrameFacts {
    /// Reads one frame.
    pub fn of(f: FrameRef) -> FrameFacts {
        let path = slashes(f.filename);
        let mut bits = 0;
        let mut set = |on: bool, bit: u32| {
            if on {
                bits |= bit;
            }
        };
        let python = is_python(f.filename);
        set(python, fact::PYTHON);
        set(viz_keeps(f.name, f.filename), fact::KEPT);
        let (mut op, mut node) = (None, None);
        if python {
            set(is_torch(f.filename) || is_stdlib(f.filename), fact::TORCH);
            set(is_package(f.filename) && !is_torch(f.filename), fact::PACKAGE);
            set(
                f.name == "_engine_run_backward"
                    || ((path.contains("torch/autograd/") || path.contains("torch/_tensor.py"))
                        && f.name == "backward"),
                fact::BACKWARD,
            );
            let optim = path.contains("torch/optim/");
            set(optim && f.name != "zero_grad", fact::OPTIMIZER);
            set(f.name == "zero_grad", fact::ZERO_GRAD);
            set(path.contains("torch/nn/modules/module.py") && f.name.contains("call_impl"), fact::FORWARD);
        } else {
            set(f.name.contains("torch::autograd::Engine::"), fact::BACKWARD);
            set(f.name.starts_with("at::") || f.name.starts_with("c10::") || f.name.starts_with("torch::"), fact::CPP);
            op = aten_op(f.name).map(String::into_boxed_str);
            node = autograd_node(f.name).map(String::into_boxed_str);
            set(op.is_some(), fact::CPP);
        }
        set(f.name == "zero_grad" && path.contains("torch/"), fact::GUESS_OPTIM);
        set(
            path.contains("torch/autograd/") || f.name == "backward" || f.name == "_engine_run_backward",
            fact::GUESS_AUTOGRAD,
        );
        set(
            (path.contains("torch/nn/modules/module.py")
                && matches!(f.name, "_apply" | "to" | "cuda" | "load_state_dict"))
                || path.contains("torch/nn/init.py")
                || matches!(
                    f.name,
                    "__init__" | "reset_parameters" | "from_pretrained" | "_load_state_dict_into_model"
                ),
            fact::GUESS_PARAMS,
        );
        set(
            f.name == "forward" || f.name == "_call_impl" || path.contains("torch/nn/functional.py"),
            fact::GUESS_FORWARD,
        );
        FrameFacts { bits, op, node, op_id: 0, node_id: 0 }
    }
}

/// A place by its frames' indices: cheap to compare and hash, built into a [`Place`] once per
/// distinct place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PlaceKey {
    whose: Whose,
    /// The frame named (none for no Python frame and an empty stack).
    frame: Option<u32>,
    /// The frames giving the operator and the node (by the name they give: the same operator
    /// from two ATen frames is one place), and the user's frame calling a package's.
    op: Option<(u32, u32)>,
    node: Option<(u32, u32)>,
    caller: Option<u32>,
}

/// What a stack tells, from its frames (index, frame, facts), innermost first: its place's key,
/// its phase signals, and the bits of all its frames.
fn summarize<'a>(frames: impl Iterator<Item = (u32, &'a FrameFacts)>) -> (PlaceKey, u8, u32) {
    let (mut signals, mut all) = (0u8, 0u32);
    // The first frame outside torch and the standard library (and whether it is the user's
    // own), the user's own first frame, torch's first, the first memory_viz keeps.
    let (mut outside, mut user, mut torch, mut kept) = (None, None, None, None);
    // The operator: the outermost `at::_ops` frame below the first Python frame (what the
    // Python code, or the autograd node, called); its node the innermost.
    let (mut op, mut node, mut seen_python) = (None, None, false);
    for (i, facts) in frames {
        let b = facts.bits;
        all |= b;
        if b & fact::BACKWARD != 0 {
            signals |= signal::BACKWARD;
        }
        if b & fact::OPTIMIZER != 0 {
            signals |= signal::OPTIMIZER;
        }
        if b & fact::ZERO_GRAD != 0 {
            signals |= signal::ZERO_GRAD;
        }
        if b & fact::FORWARD != 0 {
            signals |= signal::FORWARD;
        }
        if b & fact::PYTHON != 0 {
            if b & fact::TORCH != 0 {
                torch.get_or_insert(i);
            } else if b & fact::PACKAGE != 0 {
                outside.get_or_insert((i, false));
            } else {
                outside.get_or_insert((i, true));
                user.get_or_insert(i);
            }
            seen_python = true;
            continue;
        }
        if !seen_python {
            if facts.op.is_some() {
                op = Some((facts.op_id, i));
            }
            if node.is_none()
                && let Some(n) = &facts.node
            {
                if &**n == "AccumulateGrad" {
                    signals |= signal::ACCUMULATE_GRAD;
                }
                node = Some((facts.node_id, i));
            }
        }
        if kept.is_none() && b & fact::KEPT != 0 {
            kept = Some(i);
        }
    }
    let key = |whose: Whose, frame: Option<u32>, caller: Option<u32>| PlaceKey { whose, frame, op, node, caller };
    let place = if let Some((f, true)) = outside {
        key(Whose::User, Some(f), None)
    } else if let Some((f, false)) = outside {
        key(Whose::Package, Some(f), user)
    } else if let Some(f) = torch {
        key(Whose::Torch, Some(f), None)
    } else if all & fact::CPP != 0 {
        key(Whose::NoPython, None, None)
    } else if let Some(f) = kept {
        key(Whose::Frame, Some(f), None)
    } else {
        PlaceKey { whose: Whose::None, frame: None, op: None, node: None, caller: None }
    };
    (place, signals, all)
}

/// The place a key stands for, its frames and facts looked up by index.
fn build<'a>(k: PlaceKey, frame: impl Fn(u32) -> FrameRef<'a>, facts: impl Fn(u32) -> &'a FrameFacts) -> Place {
    let op = k.op.and_then(|(_, i)| facts(i).op.as_deref().map(str::to_string));
    let node = k.node.and_then(|(_, i)| facts(i).node.as_deref().map(str::to_string));
    let caller = k.caller.map(|i| {
        let u = frame(i);
        format!("{}:{} {}", basename(u.filename), u.line, u.name)
    });
    match k.frame.map(&frame) {
        Some(f) => Place {
            whose: k.whose,
            file: f.filename.to_string(),
            line: f.line,
            function: f.name.to_string(),
            op,
            node,
            caller,
        },
        None if k.whose == Whose::NoPython => Place { whose: Whose::NoPython, op, node, ..Place::default() },
        None => Place::default(),
    }
}

/// The place of a stack (innermost frame first), and its phase signals.
pub fn place_of<'a>(frames: impl Iterator<Item = FrameRef<'a>> + Clone) -> (Place, u8) {
    let list: Vec<FrameRef<'a>> = frames.collect();
    let facts: Vec<FrameFacts> = list.iter().map(|f| FrameFacts::of(*f)).collect();
    let (key, signals, _) = summarize(facts.iter().enumerate().map(|(i, x)| (i as u32, x)));
    (build(key, |i| list[i as usize], |i| &facts[i as usize]), signals)
}

/// The category a stack's frames suggest (its [`fact`] bits, all frames or'ed, and its
/// [`signal`]s), and whether oomlab's export names it (its first frame `oomlab/<category>`).
pub fn guess_from(first: Option<FrameRef>, bits: u32, signals: u8) -> (Guess, bool) {
    if let Some(category) = first.and_then(|f| f.filename.strip_prefix("oomlab/")) {
        let g = match category {
            "parameters" | "master_weights" => Guess::Parameters,
            "optimizer_state" => Guess::OptimizerState,
            "gradients" => Guess::Gradients,
            "activations" => Guess::Activations,
            "temporaries" | "workspace" => Guess::Temporaries,
            _ => Guess::Other,
        };
        return (g, true);
    }
    let g = if signals & signal::OPTIMIZER != 0 || bits & fact::GUESS_OPTIM != 0 {
        Guess::OptimizerState
    } else if signals & (signal::BACKWARD | signal::ACCUMULATE_GRAD) != 0 || bits & fact::GUESS_AUTOGRAD != 0 {
        Guess::Gradients
    } else if bits & fact::GUESS_PARAMS != 0 {
        Guess::Parameters
    } else if signals & signal::FORWARD != 0 || bits & fact::GUESS_FORWARD != 0 {
        Guess::Activations
    } else {
        Guess::Other
    };
    (g, false)
}

/// The dotted module of a Python file: after `site-packages/` for a package, the file's stem for
/// a script (`/home/me/train.py` → `train`).
pub fn module_of(filename: &str) -> String {
    let path = slashes(filename);
    let rel = ["/site-packages/", "/dist-packages/"]
        .iter()
        .find_map(|p| path.split_once(p).map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| path.rsplit('/').next().unwrap_or_default().to_string());
    let rel = rel.strip_suffix(".py").unwrap_or(&rel);
    let rel = rel.strip_suffix("/__init__").unwrap_or(rel);
    rel.replace('/', ".")
}

#[cfg(test)]
mod tests;
