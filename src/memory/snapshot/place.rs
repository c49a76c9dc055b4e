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
use super::explain::{Guess, guess};

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
    /// Reads every stack of `stacks` (a few thousand in a real dump: milliseconds).
    pub fn new(stacks: &Stacks) -> Sites {
        let mut places: Vec<Place> = Vec::new();
        let mut ids: HashMap<Place, u32> = HashMap::new();
        let facts = (0..stacks.len())
            .map(|id| {
                let id = u32::try_from(id).unwrap_or(u32::MAX);
                let (place, signals) = place_of(stacks.frames(id));
                let (guess, known) = guess(stacks.frames(id), signals);
                let n = *ids.entry(place.clone()).or_insert_with(|| {
                    places.push(place);
                    u32::try_from(places.len() - 1).unwrap_or(u32::MAX)
                });
                StackFacts { place: n, signals, guess, known }
            })
            .collect();
        Sites { places, stacks: facts }
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

/// The place of a stack (innermost frame first), and its phase signals.
pub fn place_of<'a>(frames: impl Iterator<Item = FrameRef<'a>> + Clone) -> (Place, u8) {
    let mut signals = 0u8;
    // The first frame outside torch and the standard library (and whether it is the user's
    // own), the user's own first frame, torch's first.
    let (mut outside, mut user, mut torch, mut kept, mut cpp) = (None, None, None, None, false);
    // The operator: the outermost `at::_ops` frame below the first Python frame (what the
    // Python code, or the autograd node, called), its node the innermost.
    let (mut op, mut node, mut seen_python) = (None, None, false);
    for f in frames.clone() {
        let python = is_python(f.filename);
        if python {
            let path = slashes(f.filename);
            if f.name == "_engine_run_backward"
                || (path.contains("torch/autograd/") && f.name == "backward")
                || (path.contains("torch/_tensor.py") && f.name == "backward")
            {
                signals |= signal::BACKWARD;
            }
            if path.contains("torch/optim/") {
                signals |= if f.name == "zero_grad" { signal::ZERO_GRAD } else { signal::OPTIMIZER };
            } else if f.name == "zero_grad" {
                signals |= signal::ZERO_GRAD;
            }
            if path.contains("torch/nn/modules/module.py") && f.name.contains("call_impl") {
                signals |= signal::FORWARD;
            }
            if is_torch(f.filename) || is_stdlib(f.filename) {
                torch.get_or_insert(f);
            } else if is_package(f.filename) {
                outside.get_or_insert((f, false));
            } else {
                outside.get_or_insert((f, true));
                user.get_or_insert(f);
            }
            seen_python = true;
            continue;
        }
        if f.name.contains("torch::autograd::Engine::") {
            signals |= signal::BACKWARD;
        }
        if !seen_python {
            if let Some(o) = aten_op(f.name) {
                op = Some(o);
                cpp = true;
            }
            if node.is_none()
                && let Some(n) = autograd_node(f.name)
            {
                if n == "AccumulateGrad" {
                    signals |= signal::ACCUMULATE_GRAD;
                }
                node = Some(n);
            }
        }
        if f.name.starts_with("at::") || f.name.starts_with("c10::") || f.name.starts_with("torch::") {
            cpp = true;
        }
        if kept.is_none() && viz_keeps(f.name, f.filename) {
            kept = Some(f);
        }
    }
    let frame = |whose: Whose, f: FrameRef| Place {
        whose,
        file: f.filename.to_string(),
        line: f.line,
        function: f.name.to_string(),
        op: op.clone(),
        node: node.clone(),
        caller: None,
    };
    let place = if let Some((f, true)) = outside {
        frame(Whose::User, f)
    } else if let Some((f, false)) = outside {
        let caller = user.map(|u| format!("{}:{} {}", basename(u.filename), u.line, u.name));
        Place { caller, ..frame(Whose::Package, f) }
    } else if let Some(f) = torch {
        frame(Whose::Torch, f)
    } else if cpp {
        Place { whose: Whose::NoPython, op, node, ..Place::default() }
    } else if let Some(f) = kept {
        frame(Whose::Frame, f)
    } else {
        Place::default()
    };
    (place, signals)
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
mod tests {
    use super::*;

    #[test]
    fn operators_and_nodes_from_cpp_frames() {
        let op = |s| aten_op(s);
        assert_eq!(op("at::_ops::addmm::call(at::Tensor const&)"), Some("aten::addmm".into()));
        assert_eq!(op("at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)"), Some("aten::div".into()));
        assert_eq!(op("at::_ops::div_Scalar::redispatch(c10::DispatchKeySet)"), Some("aten::div".into()));
        assert_eq!(op("at::_ops::index_select::call(at::Tensor const&, long)"), Some("aten::index_select".into()));
        assert_eq!(op("at::_ops::resize_::call(at::Tensor const&)"), Some("aten::resize_".into()));
        assert_eq!(op("at::_ops::_log_softmax::call(at::Tensor const&)"), Some("aten::_log_softmax".into()));
        assert_eq!(op("at::_ops::mm_out::call(at::Tensor const&)"), Some("aten::mm".into()));
        assert_eq!(op("at::native::add(at::Tensor const&)"), None);
        let node = |s| autograd_node(s);
        assert_eq!(
            node("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"),
            Some("MmBackward0".into())
        );
        assert_eq!(
            node("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"),
            Some("AccumulateGrad".into())
        );
        assert_eq!(node("torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"), None);
    }

    #[test]
    fn memory_viz_hides_what_its_lists_name() {
        assert!(!viz_keeps("torch::unwind::unwind()", "??"));
        assert!(!viz_keeps("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"));
        assert!(!viz_keeps("_PyEval_EvalFrameDefault", "??"));
        assert!(!viz_keeps("__libc_start_main", "??"));
        assert!(!viz_keeps("wrap_kernel", "aten/src/ATen/core/boxing/KernelFunction.h"));
        assert!(!viz_keeps("x", "build/aten/src/ATen/RegisterCUDA.cpp"));
        assert!(!viz_keeps("do_call_core", "/usr/local/src/conda/python-3.10.14/Python/ceval.c"));
        assert!(viz_keeps(
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
            "CUDACachingAllocator.cpp"
        ));
        assert!(viz_keeps("forward", "/home/me/model.py"));
        // The file test is on the path as written: a bare `RegisterCUDA.cpp` has no slash.
        assert!(viz_keeps("x", "RegisterCUDA.cpp"));
    }

    #[test]
    fn whose_code_a_file_is() {
        assert!(is_torch("/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py"));
        assert!(is_stdlib("/usr/lib/python3.11/threading.py"));
        assert!(!is_stdlib("/usr/lib/python3.11/site-packages/transformers/trainer.py"));
        assert!(is_package("/root/env/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py"));
        assert!(!is_package("/home/me/assignment1/cs336_basics/transformer.py"));
        assert!(is_python("<ipython-input-3-1b2c>"));
        assert!(!is_python("??") && !is_python("CUDACachingAllocator.cpp") && !is_python(""));
        assert_eq!(module_of("/x/site-packages/torch/nn/modules/linear.py"), "torch.nn.modules.linear");
    }
}
