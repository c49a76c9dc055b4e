//! Tensors: what their bytes are for, their dtype, their shape, and when they are alive.

use serde::{Deserialize, Serialize};

/// What a tensor's bytes are for; memory is reported by these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameters,
    Gradients,
    OptimizerState,
    MasterWeights,
    /// Saved by the forward pass for the backward pass.
    Activations,
    /// Intermediates that die within the step (backward scratch, residual branch outputs).
    Temporaries,
    Input,
    Logits,
    Workspace,
    /// Buffers the collectives of data parallelism pass through: DDP's gradient buckets,
    /// ZeRO's reduce buckets and the parameters ZeRO-3 gathers for one layer.
    Communication,
    /// Serving: the keys and values of the tokens a request has seen, kept from one step to
    /// the next so that each new token attends to them without recomputing them.
    KvCache,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    F32,
    U32,
    /// IEEE binary16 (fp16): 5 exponent bits, 10 mantissa bits; largest finite 65504.
    F16,
    /// bfloat16: fp32's 8 exponent bits, 7 mantissa bits.
    BF16,
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F32 | DType::U32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// A 16-bit float type.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// Bytes of `n` elements as stored: rounded up to whole 4-byte words (GPU bindings are
    /// sized in words; 16-bit values are packed two per word where the adapter has no f16).
    /// Saturates instead of wrapping; a built plan's tensors are far below the limit (see
    /// [`MAX_TENSOR_ELEMS`]).
    pub fn bytes_for(self, n: u64) -> u64 {
        n.saturating_mul(self.size_bytes()).div_ceil(4).saturating_mul(4)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TensorId(pub usize);

#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, in u64: a dimension can be a product (rows = B·T), and products of sizes
    /// pass 2³² where `usize` is 32 bits (wasm32).
    pub shape: Vec<u64>,
    pub dtype: DType,
    pub category: Category,
    /// The block it belongs to, for per-layer views.
    pub layer: Option<usize>,
    /// Kept across steps (see [`Lifetime::Persistent`]): the model states and the
    /// communication buffers, but not what ZeRO gathers or produces for one layer at a time.
    pub persistent: bool,
    /// In host memory (offload): never placed by the device's allocator, never counted as GPU
    /// memory (see [`Lifetime::Host`]).
    pub host: bool,
}

impl TensorInfo {
    /// Elements (saturating; [`Plan::build_with`] refuses any tensor near the limit).
    pub fn numel(&self) -> u64 {
        self.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }
    pub fn size_bytes(&self) -> u64 {
        self.dtype.bytes_for(self.numel())
    }
}

/// A contiguous range of a tensor's elements: a whole tensor, or one parameter of the flat
/// parameter tensor. Offsets of views that ops bind are multiples of 64 elements (256 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub tensor: TensorId,
    pub offset: u64,
    pub len: u64,
}

/// When a tensor is alive, as an eager framework (PyTorch) has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lifetime {
    /// Parameters, gradients, optimizer state and master weights: allocated before the first
    /// step and kept across steps. (PyTorch allocates gradients during the first backward; from
    /// the second step on they are always there, which is the state shown.)
    Persistent,
    /// The input batch, and the loss: held by the training loop throughout the step.
    Step,
    /// Allocated just before op `first` (the first op that touches it) and freed right after op
    /// `last` (the last op that reads it).
    Ops { first: usize, last: usize },
    /// In host memory for the whole run (offload): the device's allocator never sees it.
    Host,
}

impl Category {
    pub const ALL: [Category; 11] = [
        Category::Parameters,
        Category::Gradients,
        Category::OptimizerState,
        Category::MasterWeights,
        Category::Activations,
        Category::Temporaries,
        Category::Input,
        Category::Logits,
        Category::Workspace,
        Category::Communication,
        Category::KvCache,
    ];

    /// Position in [`Category::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// snake_case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer_state",
            Category::MasterWeights => "master_weights",
            Category::Activations => "activations",
            Category::Temporaries => "temporaries",
            Category::Input => "input",
            Category::Logits => "logits",
            Category::Workspace => "workspace",
            Category::Communication => "communication",
            Category::KvCache => "kv_cache",
        }
    }

    /// Whether tensors of this category outlive a step, unless the plan says otherwise (ZeRO's
    /// gathered parameters and one layer's gradients are made and freed within the step).
    pub fn is_persistent(self) -> bool {
        matches!(
            self,
            Category::Parameters
                | Category::Gradients
                | Category::OptimizerState
                | Category::MasterWeights
                | Category::Communication
                | Category::KvCache
        )
    }
}
