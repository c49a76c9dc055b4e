//! The step plan: the single source of truth for what one training step does.
//!
//! A plan lists every tensor of the step (shape, dtype, category) and the ordered ops that read
//! and write them. The CPU and GPU backends execute it op by op; memory accounting, the CLI and
//! the views read it. It is pure Rust and needs no GPU.

pub mod optimizer;
pub mod techniques;

use serde::{Deserialize, Serialize};

pub use optimizer::{AdamWStep, OptimizerConfig, OptimizerKind};
pub use techniques::{AttentionKind, Checkpoint, LossScaler, Precision, Techniques};

use crate::model::params::{LoraTarget, ParamKind, ParamLayout};
use crate::model::{ConfigError, ModelConfig, StepShape, check_dim};

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

/// Which part of the step an op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Forward,
    Backward,
    Optimizer,
}

/// One op of the step. Shapes use B (batch), T (sequence), C (d_model), NH (heads), V (vocab).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Zero a tensor (gradients are accumulated with `+=`).
    Zero {
        dst: View,
    },
    /// out (B,T,C) = wte[tokens] + wpe[t].
    Embedding {
        tokens: View,
        wte: View,
        wpe: View,
        out: View,
    },
    /// dwte[v] += Σ_{positions p with token v} dout[p]; dwpe[t] += Σ_b dout[b,t].
    /// `token_offsets` (V+1) and `token_positions` (B·T) index the positions of each token
    /// (built with the batch), so the GPU's scatter-add is a deterministic gather even when
    /// tokens repeat; the CPU twin reads `tokens` directly.
    EmbeddingBackward {
        tokens: View,
        token_offsets: View,
        token_positions: View,
        dout: View,
        dwte: View,
        dwpe: View,
    },
    /// out (rows,C) = (inp − mean)·rstd·weight + bias; saves mean, rstd (rows).
    LayerNorm {
        inp: View,
        weight: View,
        bias: View,
        out: View,
        mean: View,
        rstd: View,
    },
    /// dinp (+)= …, dweight += …, dbias += …; `accumulate` says whether dinp is added to.
    /// Frozen parameters (LoRA) have no gradients: `dweight` and `dbias` are both None.
    LayerNormBackward {
        inp: View,
        weight: View,
        mean: View,
        rstd: View,
        dout: View,
        dinp: View,
        dweight: Option<View>,
        dbias: Option<View>,
        accumulate: bool,
    },
    /// out (rows,n) = inp (rows,k) · W + bias, with W (k,n) (Conv1D layout) or, when
    /// `weight_transposed`, W (n,k) (the tied lm_head).
    Matmul {
        inp: View,
        weight: View,
        bias: Option<View>,
        out: View,
        rows: u64,
        k: u64,
        n: u64,
        weight_transposed: bool,
    },
    /// dinp (+)= dout·Wᵀ; dweight += inpᵀ·dout; dbias += Σ_rows dout. A frozen weight (LoRA)
    /// has no `dweight`, and then `inp` is not read; `accumulate` adds to dinp (the LoRA
    /// branch's input gradient is already there).
    MatmulBackward {
        inp: View,
        weight: View,
        dout: View,
        dinp: View,
        dweight: Option<View>,
        dbias: Option<View>,
        rows: u64,
        k: u64,
        n: u64,
        weight_transposed: bool,
        accumulate: bool,
    },
    /// out (rows,n) += alpha · inp (rows,k) · W (k,n): LoRA's up-projection (alpha = α/r).
    MatmulAdd {
        inp: View,
        weight: View,
        out: View,
        rows: u64,
        k: u64,
        n: u64,
        alpha: f64,
    },
    /// dinp = alpha·dout·Wᵀ; dweight += alpha·inpᵀ·dout.
    MatmulAddBackward {
        inp: View,
        weight: View,
        dout: View,
        dinp: View,
        dweight: View,
        rows: u64,
        k: u64,
        n: u64,
        alpha: f64,
    },
    /// Causal self-attention on qkv (B,T,3C): att (B,NH,T,T) = softmax(QKᵀ/√hs) saved for
    /// backward; out (B,T,C) = att·V.
    Attention {
        qkv: View,
        att: View,
        out: View,
    },
    /// dqkv = ∂/∂qkv given dout; `datt` (B,NH,T,T) is scratch.
    AttentionBackward {
        qkv: View,
        att: View,
        dout: View,
        datt: View,
        dqkv: View,
    },
    /// Fused (FlashAttention-style) causal self-attention: out (B,T,C) by tiles of K and V with
    /// an online softmax; saves only lse (B,NH,T), the logsumexp of each row of scores.
    FlashAttention {
        qkv: View,
        out: View,
        lse: View,
    },
    /// dqkv given dout, recomputing the scores from q, k and lse; `delta` (B,NH,T) is scratch
    /// for rowsum(dout∘out).
    FlashAttentionBackward {
        qkv: View,
        out: View,
        lse: View,
        dout: View,
        delta: View,
        dqkv: View,
    },
    /// out = GELU_tanh(inp).
    Gelu {
        inp: View,
        out: View,
    },
    GeluBackward {
        inp: View,
        dout: View,
        dinp: View,
    },
    /// out = a + b.
    Residual {
        a: View,
        b: View,
        out: View,
    },
    /// da = dout. (The other input's gradient is `dout` itself: no copy is made.)
    ResidualBackward {
        dout: View,
        da: View,
    },
    /// probs (rows,V) = softmax(logits); losses (rows) = −log probs[target]; loss (1) = mean.
    CrossEntropy {
        logits: View,
        targets: View,
        probs: View,
        losses: View,
        loss: View,
    },
    /// dlogits = (probs − onehot(target)) · scale; scale is 1/rows of the effective batch.
    CrossEntropyBackward {
        probs: View,
        targets: View,
        dlogits: View,
        scale: f64,
    },
    /// found_inf[0] = 1 if any gradient is inf or NaN (left unchanged otherwise): fp16's
    /// overflow check before the optimizer (`GradScaler.unscale_`).
    CheckFinite {
        grads: View,
        found_inf: View,
    },
    /// AdamW over the flat parameters. With mixed precision `params` are the fp32 master
    /// weights, the gradients are unscaled by the loss scale, the step is skipped when
    /// `found_inf` is set, and the updated weights are also written, rounded, to `copy` (the
    /// 16-bit working copy the forward pass reads).
    AdamW {
        params: View,
        grads: View,
        m: View,
        v: View,
        copy: Option<View>,
        found_inf: Option<View>,
    },
    /// SGD, with momentum when `momentum` is present; mixed precision as for AdamW.
    Sgd {
        params: View,
        grads: View,
        momentum: Option<View>,
        copy: Option<View>,
        found_inf: Option<View>,
    },
}

impl Op {
    /// The views this op reads (accumulated outputs count as read) and the views it writes.
    pub fn reads_writes(&self) -> (Vec<View>, Vec<View>) {
        match *self {
            Op::Zero { dst } => (vec![], vec![dst]),
            Op::Embedding { tokens, wte, wpe, out } => (vec![tokens, wte, wpe], vec![out]),
            Op::EmbeddingBackward { tokens, token_offsets, token_positions, dout, dwte, dwpe } => {
                (vec![tokens, token_offsets, token_positions, dout, dwte, dwpe], vec![dwte, dwpe])
            }
            Op::LayerNorm { inp, weight, bias, out, mean, rstd } => (vec![inp, weight, bias], vec![out, mean, rstd]),
            Op::LayerNormBackward { inp, weight, mean, rstd, dout, dinp, dweight, dbias, accumulate } => {
                let grads: Vec<View> = dweight.into_iter().chain(dbias).collect();
                let mut reads = vec![inp, weight, mean, rstd, dout];
                reads.extend(&grads);
                if accumulate {
                    reads.push(dinp);
                }
                (reads, std::iter::once(dinp).chain(grads).collect())
            }
            Op::Matmul { inp, weight, bias, out, .. } => {
                (std::iter::once(inp).chain([weight]).chain(bias).collect(), vec![out])
            }
            Op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, accumulate, .. } => {
                let grads: Vec<View> = dweight.into_iter().chain(dbias).collect();
                let mut reads = vec![weight, dout];
                if dweight.is_some() {
                    reads.push(inp);
                }
                reads.extend(&grads);
                if accumulate {
                    reads.push(dinp);
                }
                (reads, std::iter::once(dinp).chain(grads).collect())
            }
            Op::MatmulAdd { inp, weight, out, .. } => (vec![inp, weight, out], vec![out]),
            Op::MatmulAddBackward { inp, weight, dout, dinp, dweight, .. } => {
                (vec![inp, weight, dout, dweight], vec![dinp, dweight])
            }
            Op::Attention { qkv, att, out } => (vec![qkv], vec![att, out]),
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => (vec![qkv, att, dout], vec![datt, dqkv]),
            Op::FlashAttention { qkv, out, lse } => (vec![qkv], vec![out, lse]),
            Op::FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv } => {
                (vec![qkv, out, lse, dout], vec![delta, dqkv])
            }
            Op::Gelu { inp, out } => (vec![inp], vec![out]),
            Op::GeluBackward { inp, dout, dinp } => (vec![inp, dout], vec![dinp]),
            Op::Residual { a, b, out } => (vec![a, b], vec![out]),
            Op::ResidualBackward { dout, da } => (vec![dout], vec![da]),
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                (vec![logits, targets], vec![probs, losses, loss])
            }
            Op::CrossEntropyBackward { probs, targets, dlogits, .. } => (vec![probs, targets], vec![dlogits]),
            Op::CheckFinite { grads, found_inf } => (vec![grads, found_inf], vec![found_inf]),
            Op::AdamW { params, grads, m, v, copy, found_inf } => (
                [params, grads, m, v].into_iter().chain(found_inf).collect(),
                [params, m, v].into_iter().chain(copy).collect(),
            ),
            Op::Sgd { params, grads, momentum, copy, found_inf } => (
                [params, grads].into_iter().chain(momentum).chain(found_inf).collect(),
                std::iter::once(params).chain(momentum).chain(copy).collect(),
            ),
        }
    }

    /// A short name for timelines and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Zero { .. } => "zero",
            Op::Embedding { .. } => "embedding",
            Op::EmbeddingBackward { .. } => "embedding_backward",
            Op::LayerNorm { .. } => "layernorm",
            Op::LayerNormBackward { .. } => "layernorm_backward",
            Op::Matmul { .. } => "matmul",
            Op::MatmulBackward { .. } => "matmul_backward",
            Op::MatmulAdd { .. } => "matmul_add",
            Op::MatmulAddBackward { .. } => "matmul_add_backward",
            Op::Attention { .. } => "attention",
            Op::AttentionBackward { .. } => "attention_backward",
            Op::FlashAttention { .. } => "flash_attention",
            Op::FlashAttentionBackward { .. } => "flash_attention_backward",
            Op::Gelu { .. } => "gelu",
            Op::GeluBackward { .. } => "gelu_backward",
            Op::Residual { .. } => "residual",
            Op::ResidualBackward { .. } => "residual_backward",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::CrossEntropyBackward { .. } => "cross_entropy_backward",
            Op::CheckFinite { .. } => "check_finite",
            Op::AdamW { .. } => "adamw",
            Op::Sgd { .. } => "sgd",
        }
    }

    /// Floating-point operations, multiply-adds counted as 2. Attention products are counted
    /// dense (T² per head, as the standard path's GEMMs compute them); elementwise ops by a
    /// small per-element constant. Estimates for reporting, not measurements.
    pub fn flops(&self, model: &ModelConfig, shape: StepShape) -> u64 {
        // Saturating: a count beyond u64 (absurd configs) shows as u64::MAX, never wraps.
        let mul = |xs: &[u64]| xs.iter().fold(1u64, |a, &x| a.saturating_mul(x));
        let (b, t) = (shape.batch as u64, shape.seq as u64);
        let (nh, hs) = (model.n_heads as u64, model.head_size() as u64);
        let scores = mul(&[b, nh, t, t]);
        let len = |v: &View| v.len;
        // A GEMM's 2·r·k·n, plus r·n for a bias or an accumulated output.
        let gemm = |products: u64, r: u64, k: u64, n: u64, extra: bool| {
            mul(&[2, products, r, k, n]).saturating_add(if extra { mul(&[r, n]) } else { 0 })
        };
        match self {
            Op::Zero { .. } => 0,
            Op::Embedding { out, .. } => len(out),
            Op::EmbeddingBackward { dout, .. } => len(dout),
            Op::LayerNorm { out, .. } => mul(&[8, len(out)]),
            Op::LayerNormBackward { dout, .. } => mul(&[14, len(dout)]),
            Op::Matmul { rows, k, n, bias, .. } => gemm(1, *rows, *k, *n, bias.is_some()),
            Op::MatmulBackward { rows, k, n, dbias, dweight, .. } => {
                gemm(if dweight.is_some() { 2 } else { 1 }, *rows, *k, *n, dbias.is_some())
            }
            Op::MatmulAdd { rows, k, n, .. } => gemm(1, *rows, *k, *n, true),
            Op::MatmulAddBackward { rows, k, n, .. } => gemm(2, *rows, *k, *n, true),
            // QKᵀ and P·V (2·hs each per score) and the softmax (~5 per score).
            Op::Attention { .. } => mul(&[scores, 4 * hs + 5]),
            // dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q and the softmax backward.
            Op::AttentionBackward { .. } => mul(&[scores, 8 * hs + 4]),
            Op::FlashAttention { .. } => mul(&[scores, 4 * hs + 5]),
            // The scores recomputed (2·hs) on top of the standard backward.
            Op::FlashAttentionBackward { .. } => mul(&[scores, 10 * hs + 9]),
            Op::Gelu { out, .. } => mul(&[10, len(out)]),
            Op::GeluBackward { dinp, .. } => mul(&[14, len(dinp)]),
            Op::Residual { out, .. } => len(out),
            Op::ResidualBackward { .. } => 0,
            Op::CrossEntropy { logits, .. } => mul(&[4, len(logits)]),
            Op::CrossEntropyBackward { dlogits, .. } => mul(&[2, len(dlogits)]),
            Op::CheckFinite { grads, .. } => len(grads),
            Op::AdamW { params, .. } => mul(&[12, len(params)]),
            Op::Sgd { params, .. } => mul(&[4, len(params)]),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpNode {
    pub op: Op,
    pub phase: Phase,
    /// Human-readable label, e.g. "h.0.attn.c_attn".
    pub label: String,
    /// A forward op run again during the backward pass (activation checkpointing).
    pub recompute: bool,
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
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::Parameters,
        Category::Gradients,
        Category::OptimizerState,
        Category::MasterWeights,
        Category::Activations,
        Category::Temporaries,
        Category::Input,
        Category::Logits,
        Category::Workspace,
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
        }
    }

    /// Whether tensors of this category outlive a step.
    pub fn is_persistent(self) -> bool {
        matches!(self, Category::Parameters | Category::Gradients | Category::OptimizerState | Category::MasterWeights)
    }
}

/// The tensors every backend uploads or reads by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Handles {
    /// The model's flat parameters.
    pub params: TensorId,
    /// What the optimizer updates: `params`, or the LoRA adapters' flat tensor.
    pub trainable: TensorId,
    /// The gradients of `trainable`.
    pub grads: TensorId,
    /// Mixed precision: the fp32 master copy of `trainable`, which the optimizer updates.
    pub master: Option<TensorId>,
    /// fp16: set by the overflow check when a gradient is inf or NaN (the step is skipped).
    pub found_inf: Option<TensorId>,
    /// One entry per micro-batch (one without gradient accumulation).
    pub micro: Vec<MicroHandles>,
}

/// One micro-batch's inputs and its loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MicroHandles {
    pub tokens: TensorId,
    pub targets: TensorId,
    pub token_offsets: TensorId,
    pub token_positions: TensorId,
    pub loss: TensorId,
}

/// One training step of one model at one batch shape.
#[derive(Clone, Debug)]
pub struct Plan {
    pub model: ModelConfig,
    pub shape: StepShape,
    pub optimizer: OptimizerConfig,
    pub techniques: Techniques,
    pub layout: ParamLayout,
    /// The LoRA adapters' layout, with LoRA.
    pub lora: Option<ParamLayout>,
    pub tensors: Vec<TensorInfo>,
    pub ops: Vec<OpNode>,
    pub handles: Handles,
}

impl Plan {
    pub fn tensor(&self, id: TensorId) -> &TensorInfo {
        &self.tensors[id.0]
    }

    /// The whole of a tensor as a view.
    pub fn whole(&self, id: TensorId) -> View {
        View { tensor: id, offset: 0, len: self.tensors[id.0].numel() }
    }

    /// Every tensor's lifetime, indexed by tensor id.
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let mut span: Vec<Option<(usize, usize)>> = vec![None; self.tensors.len()];
        for (i, node) in self.ops.iter().enumerate() {
            let (reads, writes) = node.op.reads_writes();
            for v in reads.iter().chain(&writes) {
                let s = &mut span[v.tensor.0];
                *s = Some(s.map_or((i, i), |(first, _)| (first, i)));
            }
        }
        // The losses and the overflow flag (a set, so this stays linear with accumulation).
        let mut held = vec![false; self.tensors.len()];
        for id in self.handles.micro.iter().map(|m| m.loss).chain(self.handles.found_inf) {
            if let Some(h) = held.get_mut(id.0) {
                *h = true;
            }
        }
        self.tensors
            .iter()
            .zip(span)
            .enumerate()
            .map(|(i, (t, span))| {
                let span = if held[i] { None } else { span };
                if t.category.is_persistent() {
                    Lifetime::Persistent
                } else {
                    // The batch, and the loss (and overflow flag) the training loop reads after
                    // the step, are held for the whole step; so is anything no op touches.
                    match span {
                        Some((first, last)) if t.category != Category::Input => Lifetime::Ops { first, last },
                        _ => Lifetime::Step,
                    }
                }
            })
            .collect()
    }

    /// Builds the plan of one training step without memory-saving techniques.
    pub fn build(model: &ModelConfig, shape: StepShape, optimizer: &OptimizerConfig) -> Result<Plan, ConfigError> {
        Self::build_with(model, shape, optimizer, &Techniques::default())
    }

    /// Builds the plan of one training step with `techniques`. `shape.batch` is the micro-batch
    /// each forward pass runs; with accumulation the step sees `shape.batch · accum` sequences.
    pub fn build_with(
        model: &ModelConfig,
        shape: StepShape,
        optimizer: &OptimizerConfig,
        techniques: &Techniques,
    ) -> Result<Plan, ConfigError> {
        model.validate()?;
        shape.validate(model)?;
        optimizer.validate()?;
        techniques.validate(model)?;
        check_dim("effective batch", (shape.batch as i64).saturating_mul(techniques.accum as i64))?;
        check_sizes(model, shape, techniques)?;
        Ok(Builder::new(model, shape, optimizer, techniques).build())
    }

    /// AdamW's scalars for optimizer step `step` (from 1): what both backends hand their AdamW.
    pub fn adamw_step(&self, step: u32) -> AdamWStep {
        let o = self.optimizer;
        AdamWStep {
            lr: o.lr,
            beta1: o.beta1,
            beta2: o.beta2,
            eps: o.eps,
            weight_decay: o.weight_decay,
            step,
            decay_end: self.trainable_layout().decay_end,
        }
    }

    /// The layout of what the optimizer updates (and of the gradients).
    pub fn trainable_layout(&self) -> &ParamLayout {
        self.lora.as_ref().unwrap_or(&self.layout)
    }

    /// The shape of the batch one step consumes: the micro-batch times the accumulation steps.
    pub fn batch_shape(&self) -> StepShape {
        // Both ≤ MAX_DIM and their product checked by `build_with`: no overflow.
        StepShape { batch: self.shape.batch.saturating_mul(self.techniques.accum), seq: self.shape.seq }
    }

    /// Floating-point operations of the whole step (multiply-adds count 2), and of the ops that
    /// recompute activations (checkpointing's extra compute).
    pub fn flops(&self) -> (u64, u64) {
        let mut total = 0;
        let mut recomputed = 0;
        for node in &self.ops {
            let f = node.op.flops(&self.model, self.shape);
            total = f.saturating_add(total);
            if node.recompute {
                recomputed = f.saturating_add(recomputed);
            }
        }
        (total, recomputed)
    }
}

/// The most elements one tensor of a plan may have: 2⁵⁸ (1 EiB of fp32). Far beyond any GPU, it
/// keeps every byte count of a plan — a tensor's bytes, a segment, the sum of the tensors alive
/// at once under any budget up to [`MAX_BUDGET_BYTES`] — inside u64, on every platform.
pub const MAX_TENSOR_ELEMS: u64 = 1 << 58;

/// The largest memory budget (virtual GPU) anything in oomlab accepts: 2⁶² bytes (4 EiB).
pub const MAX_BUDGET_BYTES: u64 = 1 << 62;

/// The most ops one step's plan may have: a plan holds every op and tensor in host memory (about
/// 0.5 KiB each), so a longer one would take hundreds of MiB — in a browser tab too. 4,096 layers
/// without accumulation fit.
pub const MAX_PLAN_OPS: u64 = 1 << 18;

/// Refuses, before anything is built, a step whose tensors would pass [`MAX_TENSOR_ELEMS`] or
/// whose plan would pass [`MAX_PLAN_OPS`]. Products are taken in u128, where dimensions of at
/// most [`crate::model::MAX_DIM`] (2²⁰) cannot overflow (four of them make 2⁸⁰).
fn check_sizes(model: &ModelConfig, shape: StepShape, techniques: &Techniques) -> Result<(), ConfigError> {
    let (b, t, c, v, nh, l) = (
        shape.batch as u128,
        shape.seq as u128,
        model.d_model as u128,
        model.vocab as u128,
        model.n_heads as u128,
        model.n_layers as u128,
    );
    let pad = crate::model::params::PARAM_ALIGN_ELEMS as u128;
    let accum = techniques.accum as u128;
    let rank = techniques.lora.map_or(0, |r| r.rank as u128);
    // Every parameter tensor padded to the alignment: 4 matrices and 8 vectors per layer.
    let params = v * c + model.seq_len as u128 * c + l * (12 * c * c + 13 * c) + 2 * c + (12 * l + 4) * pad;
    let largest = [
        ("the parameters", params),
        ("the attention probabilities (batch × heads × sequence²)", b * nh * t * t),
        ("the logits (batch × sequence × vocabulary)", b * t * v),
        ("the MLP activations (batch × sequence × 4·d)", b * t * 4 * c),
        ("the LoRA adapters", l * 4 * rank * 8 * c),
    ];
    for (what, elems) in largest {
        if elems > MAX_TENSOR_ELEMS as u128 {
            let what = format!("one tensor of {what}");
            return Err(ConfigError::SizeLimit { what, amount: elems, limit: MAX_TENSOR_ELEMS, unit: "elements" });
        }
    }
    // An upper bound on the ops: per layer 9 forward and 9 backward ops, 8 + 8 more for LoRA's
    // branches, one for selective recomputation and 17 for a recomputed forward pass; 9 outside
    // the layers; the optimizer's 3.
    let ops = accum * (60 * l + 16) + 3;
    if ops > MAX_PLAN_OPS as u128 {
        let what = format!("a step of {} layers × {} micro-batches", model.n_layers, techniques.accum);
        return Err(ConfigError::SizeLimit { what, amount: ops, limit: MAX_PLAN_OPS, unit: "ops" });
    }
    Ok(())
}

/// How a block's forward pass keeps its intermediates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Saved for the backward pass (no checkpointing).
    Saved,
    /// Run without keeping anything (a checkpointed segment's forward pass): every
    /// intermediate dies inside the forward pass.
    Discard,
    /// Recomputed during the backward pass, saved until the block's backward ran.
    Recompute,
}

/// What a block's backward pass reads. `att` holds the probabilities (standard attention) or
/// the row logsumexp (fused attention).
struct Saved {
    x: View,
    ln1: View,
    ln1_mean: View,
    ln1_rstd: View,
    qkv: View,
    att: View,
    atty: View,
    res2: View,
    ln2: View,
    ln2_mean: View,
    ln2_rstd: View,
    fch: View,
    fch_gelu: View,
    /// LoRA's `inp·A` of qkv, attn.c_proj, mlp.c_fc and mlp.c_proj, where adapted.
    lora_h: [Option<View>; 4],
}

/// Gradient scratch shared by the blocks of one backward pass.
struct Scratch {
    dres_a: View,
    dres_b: View,
    dln: View,
    dfch_gelu: View,
    dfch: View,
    datty: View,
    /// d(probs) (B,NH,T,T) for standard attention, rowsum(dO∘O) (B,NH,T) for fused.
    datt: View,
    dqkv: View,
    /// d(inp·A) of a LoRA branch (rows × r), with LoRA.
    dlora: Option<View>,
}

struct Builder {
    model: ModelConfig,
    shape: StepShape,
    optimizer: OptimizerConfig,
    techniques: Techniques,
    layout: ParamLayout,
    tensors: Vec<TensorInfo>,
    ops: Vec<OpNode>,
    params: View,
    /// What the optimizer updates: `params`, or the LoRA adapters.
    trainable: View,
    grads: View,
    master: Option<View>,
    /// Storage type of activations, working weights and gradients.
    dt: DType,
    lora: Option<ParamLayout>,
    /// The micro-batch being built (names get a prefix when there are several).
    micro: usize,
    mode: Mode,
}

impl Builder {
    fn new(model: &ModelConfig, shape: StepShape, optimizer: &OptimizerConfig, techniques: &Techniques) -> Self {
        let layout = ParamLayout::new(model);
        let flat = layout.flat_len;
        let lora = techniques.lora.map(|l| ParamLayout::lora(model, &l));
        let none = View { tensor: TensorId(0), offset: 0, len: 0 };
        let mut b = Self {
            model: *model,
            shape,
            optimizer: *optimizer,
            techniques: *techniques,
            layout,
            tensors: Vec::new(),
            ops: Vec::new(),
            params: none,
            trainable: none,
            grads: none,
            master: None,
            dt: techniques.precision.dtype(),
            lora,
            micro: 0,
            mode: Mode::Saved,
        };
        let dt = b.dt;
        b.params = b.tensor("parameters", &[flat], dt, Category::Parameters, None);
        match b.lora.as_ref().map(|l| l.flat_len) {
            // LoRA: the base parameters are frozen, with neither gradients nor optimizer state.
            Some(n) => {
                b.trainable = b.tensor("lora.parameters", &[n], dt, Category::Parameters, None);
                b.grads = b.tensor("lora.gradients", &[n], dt, Category::Gradients, None);
            }
            None => {
                b.trainable = b.params;
                b.grads = b.tensor("gradients", &[flat], dt, Category::Gradients, None);
            }
        }
        if dt.is_half() {
            let n = b.trainable.len;
            let name = if b.lora.is_some() { "lora.master_weights" } else { "master_weights" };
            b.master = Some(b.tensor(name, &[n], DType::F32, Category::MasterWeights, None));
        }
        b
    }

    fn tensor(
        &mut self,
        name: impl Into<String>,
        shape: &[u64],
        dtype: DType,
        category: Category,
        layer: Option<usize>,
    ) -> View {
        let id = TensorId(self.tensors.len());
        self.tensors.push(TensorInfo { name: name.into(), shape: shape.to_vec(), dtype, category, layer });
        View { tensor: id, offset: 0, len: shape.iter().fold(1u64, |n, &d| n.saturating_mul(d)) }
    }

    /// A tensor of the current micro-batch, in the step's precision: its name gets the
    /// micro-batch's prefix (with accumulation) and marks recomputed copies.
    fn act(&mut self, name: impl Into<String>, shape: &[u64], category: Category, layer: Option<usize>) -> View {
        let name = self.name(name.into());
        self.tensor(name, shape, self.dt, category, layer)
    }

    /// Like [`Self::act`], always fp32: statistics that stay in fp32 under mixed precision, as
    /// autocast keeps them (LayerNorm's mean and 1/std, attention's logsumexp, the losses).
    fn act32(&mut self, name: impl Into<String>, shape: &[u64], category: Category, layer: Option<usize>) -> View {
        let name = self.name(name.into());
        self.tensor(name, shape, DType::F32, category, layer)
    }

    fn name(&self, name: String) -> String {
        let name = if self.techniques.accum > 1 { format!("micro{}.{name}", self.micro) } else { name };
        if self.mode == Mode::Recompute { format!("{name} (recomputed)") } else { name }
    }

    /// Category of a tensor the backward pass reads, in the current mode.
    fn saved(&self) -> Category {
        if self.mode == Mode::Discard { Category::Temporaries } else { Category::Activations }
    }

    fn push(&mut self, phase: Phase, label: impl Into<String>, op: Op) {
        let recompute = self.mode == Mode::Recompute;
        let phase = if recompute { Phase::Backward } else { phase };
        let label = self.name(label.into());
        self.ops.push(OpNode { op, phase, label, recompute });
    }

    fn p(&self, kind: ParamKind) -> View {
        let r = self.layout.range(kind);
        View { tensor: self.params.tensor, offset: r.start, len: r.end - r.start }
    }

    /// The gradient of a base parameter; None when it is frozen (LoRA).
    fn g(&self, kind: ParamKind) -> Option<View> {
        if self.lora.is_some() {
            return None;
        }
        let r = self.layout.range(kind);
        Some(View { tensor: self.grads.tensor, offset: r.start, len: r.end - r.start })
    }

    /// A LoRA adapter matrix, and its gradient.
    fn lp(&self, kind: ParamKind) -> View {
        let r = self.lora.as_ref().map_or(0..0, |l| l.range(kind));
        View { tensor: self.trainable.tensor, offset: r.start, len: r.end - r.start }
    }

    fn lg(&self, kind: ParamKind) -> View {
        let r = self.lora.as_ref().map_or(0..0, |l| l.range(kind));
        View { tensor: self.grads.tensor, offset: r.start, len: r.end - r.start }
    }

    fn build(mut self) -> Plan {
        let flat = self.trainable.len;
        let opt_state: Vec<View> = self
            .optimizer
            .state_names()
            .iter()
            .map(|name| self.tensor(format!("optimizer.{name}"), &[flat], DType::F32, Category::OptimizerState, None))
            .collect();
        let micro: Vec<MicroHandles> = (0..self.techniques.accum)
            .map(|j| {
                self.micro = j;
                self.micro_step()
            })
            .collect();

        self.micro = 0;
        self.mode = Mode::Saved;
        let accum = self.techniques.accum;
        self.techniques.accum = 1; // the optimizer's labels carry no micro-batch prefix
        // Mixed precision: the optimizer updates the fp32 master weights and writes the 16-bit
        // working copy; fp16 first checks the (scaled) gradients for overflow.
        let (params, grads) = (self.master.unwrap_or(self.trainable), self.grads);
        let copy = self.master.map(|_| self.trainable);
        let found_inf = self.techniques.precision.scales_loss().then(|| {
            let flag = self.tensor("found_inf", &[1], DType::U32, Category::Workspace, None);
            self.push(Phase::Optimizer, "unscale", Op::Zero { dst: flag });
            self.push(Phase::Optimizer, "unscale", Op::CheckFinite { grads, found_inf: flag });
            flag
        });
        let op = match self.optimizer.kind {
            OptimizerKind::AdamW => Op::AdamW { params, grads, m: opt_state[0], v: opt_state[1], copy, found_inf },
            OptimizerKind::Momentum => Op::Sgd { params, grads, momentum: Some(opt_state[0]), copy, found_inf },
            OptimizerKind::Sgd => Op::Sgd { params, grads, momentum: None, copy, found_inf },
        };
        self.push(Phase::Optimizer, self.optimizer.kind.name(), op);
        self.techniques.accum = accum;

        // "Saved for backward" means read by the backward pass: what the forward pass keeps but no
        // backward op reads (a frozen projection's input under LoRA) is a temporary.
        let mut read_by_backward = vec![false; self.tensors.len()];
        for node in self.ops.iter().filter(|n| n.phase == Phase::Backward && !n.recompute) {
            for v in node.op.reads_writes().0 {
                read_by_backward[v.tensor.0] = true;
            }
        }
        for (t, read) in self.tensors.iter_mut().zip(read_by_backward) {
            if t.category == Category::Activations && !read {
                t.category = Category::Temporaries;
            }
        }
        let handles = Handles {
            params: self.params.tensor,
            trainable: self.trainable.tensor,
            grads: grads.tensor,
            master: self.master.map(|m| m.tensor),
            found_inf: found_inf.map(|f| f.tensor),
            micro,
        };
        Plan {
            model: self.model,
            shape: self.shape,
            optimizer: self.optimizer,
            techniques: self.techniques,
            layout: self.layout,
            lora: self.lora,
            tensors: self.tensors,
            ops: self.ops,
            handles,
        }
    }

    /// Forward and backward of one micro-batch; gradients accumulate into `gradients`.
    fn micro_step(&mut self) -> MicroHandles {
        // Sizes in u64 (`check_sizes` bounds every product); `l` counts layers.
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, v, nh) = (self.model.d_model as u64, self.model.vocab as u64, self.model.n_heads as u64);
        let l = self.model.n_layers;
        let rows = b * t;
        self.mode = Mode::Saved;
        let input = |s: &mut Self, name: &str, shape: &[u64]| {
            let name = s.name(format!("input.{name}"));
            s.tensor(name, shape, DType::U32, Category::Input, None)
        };
        let tokens = input(self, "tokens", &[b, t]);
        let targets = input(self, "targets", &[b, t]);
        let token_offsets = input(self, "token_offsets", &[v + 1]);
        let token_positions = input(self, "token_positions", &[rows]);

        // ---- forward ----
        use Category::{Activations as A, Temporaries as Tmp};
        let encoded = self.act("embed.out", &[b, t, c], A, None);
        self.push(
            Phase::Forward,
            "embed",
            Op::Embedding { tokens, wte: self.p(ParamKind::Wte), wpe: self.p(ParamKind::Wpe), out: encoded },
        );
        let segment = match self.techniques.checkpoint {
            Checkpoint::Every(k) => Some(k),
            _ => None,
        };
        let mut saved = Vec::with_capacity(l);
        let mut block_inputs = Vec::with_capacity(l);
        let mut x = encoded;
        for i in 0..l {
            // A checkpointed segment keeps only its input: the output of the segment's last
            // block (the next segment's input, or ln_f's) is the one saved tensor.
            let (mode, out_cat) = match segment {
                Some(k) => (Mode::Discard, if (i + 1) % k == 0 || i + 1 == l { A } else { Tmp }),
                None => (Mode::Saved, A),
            };
            block_inputs.push(x);
            self.mode = mode;
            let (s, out) = self.block_forward(i, x, out_cat);
            self.mode = Mode::Saved;
            saved.push(s);
            x = out;
        }
        let lnf = self.act("ln_f.out", &[b, t, c], A, None);
        let lnf_mean = self.act32("ln_f.mean", &[b, t], A, None);
        let lnf_rstd = self.act32("ln_f.rstd", &[b, t], A, None);
        self.push(
            Phase::Forward,
            "ln_f",
            Op::LayerNorm {
                inp: x,
                weight: self.p(ParamKind::LnFW),
                bias: self.p(ParamKind::LnFB),
                out: lnf,
                mean: lnf_mean,
                rstd: lnf_rstd,
            },
        );
        let logits = self.act("logits", &[b, t, v], Category::Logits, None);
        self.push(
            Phase::Forward,
            "lm_head",
            Op::Matmul {
                inp: lnf,
                weight: self.p(ParamKind::Wte),
                bias: None,
                out: logits,
                rows,
                k: c,
                n: v,
                weight_transposed: true,
            },
        );
        let probs = self.act("probs", &[b, t, v], Category::Logits, None);
        let losses = self.act32("losses", &[b, t], Category::Logits, None);
        let loss = self.act32("loss", &[1], Category::Logits, None);
        self.push(Phase::Forward, "cross_entropy", Op::CrossEntropy { logits, targets, probs, losses, loss });

        // ---- backward ----
        if self.micro == 0 {
            self.push(Phase::Backward, "zero_grad", Op::Zero { dst: self.grads });
        }
        let dlogits = self.act("grad.logits", &[b, t, v], Tmp, None);
        // The mean over the whole effective batch: each micro-batch's loss is a mean over its
        // rows, and contributes 1/accum of the step's gradient.
        let scale = 1.0 / (rows as f64 * self.techniques.accum as f64);
        self.push(Phase::Backward, "cross_entropy", Op::CrossEntropyBackward { probs, targets, dlogits, scale });
        let dln = self.act("grad.ln_out", &[b, t, c], Tmp, None);
        self.push(
            Phase::Backward,
            "lm_head",
            Op::MatmulBackward {
                inp: lnf,
                weight: self.p(ParamKind::Wte),
                dout: dlogits,
                dinp: dln,
                dweight: self.g(ParamKind::Wte),
                dbias: None,
                rows,
                k: c,
                n: v,
                weight_transposed: true,
                accumulate: false,
            },
        );
        let dres_a = self.act("grad.residual_a", &[b, t, c], Tmp, None);
        let dres_b = self.act("grad.residual_b", &[b, t, c], Tmp, None);
        self.push(
            Phase::Backward,
            "ln_f",
            Op::LayerNormBackward {
                inp: x,
                weight: self.p(ParamKind::LnFW),
                mean: lnf_mean,
                rstd: lnf_rstd,
                dout: dln,
                dinp: dres_a,
                dweight: self.g(ParamKind::LnFW),
                dbias: self.g(ParamKind::LnFB),
                accumulate: false,
            },
        );
        let datt_shape: &[u64] = match self.techniques.attention {
            AttentionKind::Standard => &[b, nh, t, t],
            AttentionKind::Fused => &[b, nh, t],
        };
        let scratch = Scratch {
            dres_a,
            dres_b,
            dln,
            dfch_gelu: self.act("grad.mlp.gelu.out", &[b, t, 4 * c], Tmp, None),
            dfch: self.act("grad.mlp.c_fc.out", &[b, t, 4 * c], Tmp, None),
            datty: self.act("grad.attn.out", &[b, t, c], Tmp, None),
            datt: match self.techniques.attention {
                AttentionKind::Standard => self.act("grad.attn.probs", datt_shape, Tmp, None),
                AttentionKind::Fused => self.act32("grad.attn.delta", datt_shape, Tmp, None),
            },
            dqkv: self.act("grad.attn.qkv", &[b, t, 3 * c], Tmp, None),
            dlora: self.techniques.lora.map(|l| self.act("grad.lora_h", &[rows, l.rank as u64], Tmp, None)),
        };
        match segment {
            None => {
                for (i, s) in saved.iter().enumerate().rev() {
                    self.block_backward(i, s, &scratch);
                }
            }
            Some(k) => {
                // Segments last to first: recompute the segment's forward pass from its saved
                // input, then run its blocks' backward passes.
                let starts: Vec<usize> = (0..l).step_by(k).collect();
                for &s0 in starts.iter().rev() {
                    let s1 = (s0 + k).min(l);
                    self.mode = Mode::Recompute;
                    let mut x = block_inputs[s0];
                    let mut recomputed = Vec::with_capacity(s1 - s0);
                    for i in s0..s1 {
                        // Inside the segment a block's output is the next block's saved input;
                        // the last block's output is recomputed but not needed.
                        let (s, out) = self.block_forward(i, x, if i + 1 < s1 { A } else { Tmp });
                        recomputed.push(s);
                        x = out;
                    }
                    self.mode = Mode::Saved;
                    for (i, s) in (s0..s1).zip(&recomputed).rev() {
                        self.block_backward(i, s, &scratch);
                    }
                }
            }
        }
        // Frozen embeddings (LoRA) need no backward pass at all.
        if let (Some(dwte), Some(dwpe)) = (self.g(ParamKind::Wte), self.g(ParamKind::Wpe)) {
            self.push(
                Phase::Backward,
                "embed",
                Op::EmbeddingBackward { tokens, token_offsets, token_positions, dout: dres_a, dwte, dwpe },
            );
        }
        MicroHandles {
            tokens: tokens.tensor,
            targets: targets.tensor,
            token_offsets: token_offsets.tensor,
            token_positions: token_positions.tensor,
            loss: loss.tensor,
        }
    }

    /// A projection `out = inp·W + b` of block `i` (k → n), plus its LoRA branch
    /// `out += s·(inp·A)·B` when `target` is adapted. Returns the branch's `inp·A`, saved for
    /// the backward pass.
    #[allow(clippy::too_many_arguments)]
    fn projection(
        &mut self,
        i: usize,
        target: LoraTarget,
        inp: View,
        (w, b): (ParamKind, ParamKind),
        out: View,
        k: u64,
        n: u64,
    ) -> Option<View> {
        let rows = self.shape.rows();
        let label = format!("h.{i}.{}", target.module());
        self.push(
            Phase::Forward,
            label.clone(),
            Op::Matmul { inp, weight: self.p(w), bias: Some(self.p(b)), out, rows, k, n, weight_transposed: false },
        );
        let lora = self.techniques.lora.filter(|l| l.targets().contains(&target))?;
        let r = lora.rank as u64;
        let h = self.act(format!("{label}.lora_h"), &[rows, r], self.saved(), Some(i));
        let (a, bw) = (self.lp(ParamKind::LoraA(target, i)), self.lp(ParamKind::LoraB(target, i)));
        let lora_label = format!("{label}.lora");
        self.push(
            Phase::Forward,
            lora_label.clone(),
            Op::Matmul { inp, weight: a, bias: None, out: h, rows, k, n: r, weight_transposed: false },
        );
        self.push(
            Phase::Forward,
            lora_label,
            Op::MatmulAdd { inp: h, weight: bw, out, rows, k: r, n, alpha: lora.scale() as f64 },
        );
        Some(h)
    }

    /// The backward of [`Self::projection`]: dinp from dout; the LoRA branch's gradients, or the
    /// base weight's when it is trained.
    #[allow(clippy::too_many_arguments)]
    fn projection_backward(
        &mut self,
        i: usize,
        target: LoraTarget,
        inp: View,
        lora_h: Option<View>,
        (w, b): (ParamKind, ParamKind),
        dout: View,
        dinp: View,
        k: u64,
        n: u64,
        dlora: Option<View>,
    ) {
        let rows = self.shape.rows();
        let label = format!("h.{i}.{}", target.module());
        let lora = match (lora_h, dlora, self.techniques.lora) {
            (Some(h), Some(dh), Some(l)) => Some((h, dh, l)),
            _ => None,
        };
        if let Some((h, dh, l)) = lora {
            let r = l.rank as u64;
            let dh = View { len: rows * r, ..dh };
            let lora_label = format!("{label}.lora");
            self.push(
                Phase::Backward,
                lora_label.clone(),
                Op::MatmulAddBackward {
                    inp: h,
                    weight: self.lp(ParamKind::LoraB(target, i)),
                    dout,
                    dinp: dh,
                    dweight: self.lg(ParamKind::LoraB(target, i)),
                    rows,
                    k: r,
                    n,
                    alpha: l.scale() as f64,
                },
            );
            self.push(
                Phase::Backward,
                lora_label,
                Op::MatmulBackward {
                    inp,
                    weight: self.lp(ParamKind::LoraA(target, i)),
                    dout: dh,
                    dinp,
                    dweight: Some(self.lg(ParamKind::LoraA(target, i))),
                    dbias: None,
                    rows,
                    k,
                    n: r,
                    weight_transposed: false,
                    accumulate: false,
                },
            );
        }
        self.push(
            Phase::Backward,
            label,
            Op::MatmulBackward {
                inp,
                weight: self.p(w),
                dout,
                dinp,
                dweight: self.g(w),
                dbias: self.g(b),
                rows,
                k,
                n,
                weight_transposed: false,
                accumulate: lora.is_some(),
            },
        );
    }

    /// The forward ops of block `i` on input `x`, in the builder's mode; `out_cat` is the
    /// category of the block's output.
    fn block_forward(&mut self, i: usize, x: View, out_cat: Category) -> (Saved, View) {
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, nh) = (self.model.d_model as u64, self.model.n_heads as u64);
        let li = Some(i);
        let n = |s: &str| format!("h.{i}.{s}");
        let a = self.saved();
        let tmp = Category::Temporaries;
        let ln1 = self.act(n("ln_1.out"), &[b, t, c], a, li);
        let ln1_mean = self.act32(n("ln_1.mean"), &[b, t], a, li);
        let ln1_rstd = self.act32(n("ln_1.rstd"), &[b, t], a, li);
        self.push(
            Phase::Forward,
            n("ln_1"),
            Op::LayerNorm {
                inp: x,
                weight: self.p(ParamKind::Ln1W(i)),
                bias: self.p(ParamKind::Ln1B(i)),
                out: ln1,
                mean: ln1_mean,
                rstd: ln1_rstd,
            },
        );
        let qkv = self.act(n("attn.qkv"), &[b, t, 3 * c], a, li);
        let qkv_w = (ParamKind::QkvW(i), ParamKind::QkvB(i));
        let h_qkv = self.projection(i, LoraTarget::Qkv, ln1, qkv_w, qkv, c, 3 * c);
        let atty = self.act(n("attn.out"), &[b, t, c], a, li);
        let att = match self.techniques.attention {
            AttentionKind::Standard => {
                // Selective checkpointing drops the probabilities right after use.
                let cat = if self.techniques.checkpoint == Checkpoint::Selective { tmp } else { a };
                let att = self.act(n("attn.probs"), &[b, nh, t, t], cat, li);
                self.push(Phase::Forward, n("attn"), Op::Attention { qkv, att, out: atty });
                att
            }
            AttentionKind::Fused => {
                let lse = self.act32(n("attn.lse"), &[b, nh, t], a, li);
                self.push(Phase::Forward, n("attn"), Op::FlashAttention { qkv, out: atty, lse });
                lse
            }
        };
        let attproj = self.act(n("attn.c_proj.out"), &[b, t, c], tmp, li);
        let proj_w = (ParamKind::AttnProjW(i), ParamKind::AttnProjB(i));
        let h_proj = self.projection(i, LoraTarget::AttnProj, atty, proj_w, attproj, c, c);
        let res2 = self.act(n("residual_1"), &[b, t, c], a, li);
        self.push(Phase::Forward, n("residual_1"), Op::Residual { a: x, b: attproj, out: res2 });
        let ln2 = self.act(n("ln_2.out"), &[b, t, c], a, li);
        let ln2_mean = self.act32(n("ln_2.mean"), &[b, t], a, li);
        let ln2_rstd = self.act32(n("ln_2.rstd"), &[b, t], a, li);
        self.push(
            Phase::Forward,
            n("ln_2"),
            Op::LayerNorm {
                inp: res2,
                weight: self.p(ParamKind::Ln2W(i)),
                bias: self.p(ParamKind::Ln2B(i)),
                out: ln2,
                mean: ln2_mean,
                rstd: ln2_rstd,
            },
        );
        let fch = self.act(n("mlp.c_fc.out"), &[b, t, 4 * c], a, li);
        let fc_w = (ParamKind::FcW(i), ParamKind::FcB(i));
        let h_fc = self.projection(i, LoraTarget::Fc, ln2, fc_w, fch, c, 4 * c);
        let fch_gelu = self.act(n("mlp.gelu.out"), &[b, t, 4 * c], a, li);
        self.push(Phase::Forward, n("mlp.gelu"), Op::Gelu { inp: fch, out: fch_gelu });
        let fcproj = self.act(n("mlp.c_proj.out"), &[b, t, c], tmp, li);
        let fcproj_w = (ParamKind::FcProjW(i), ParamKind::FcProjB(i));
        let h_fcproj = self.projection(i, LoraTarget::FcProj, fch_gelu, fcproj_w, fcproj, 4 * c, c);
        let res3 = self.act(n("residual_2"), &[b, t, c], out_cat, li);
        self.push(Phase::Forward, n("residual_2"), Op::Residual { a: res2, b: fcproj, out: res3 });
        let s = Saved {
            x,
            ln1,
            ln1_mean,
            ln1_rstd,
            qkv,
            att,
            atty,
            res2,
            ln2,
            ln2_mean,
            ln2_rstd,
            fch,
            fch_gelu,
            lora_h: [h_qkv, h_proj, h_fc, h_fcproj],
        };
        (s, res3)
    }

    /// The backward ops of block `i`. On entry `dres_a` holds d(block output); on exit,
    /// d(block input).
    fn block_backward(&mut self, i: usize, s: &Saved, sc: &Scratch) {
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, nh) = (self.model.d_model as u64, self.model.n_heads as u64);
        let n = |x: &str| format!("h.{i}.{x}");
        let li = Some(i);
        let [h_qkv, h_proj, h_fc, h_fcproj] = s.lora_h;
        self.push(Phase::Backward, n("residual_2"), Op::ResidualBackward { dout: sc.dres_a, da: sc.dres_b });
        let fcproj_w = (ParamKind::FcProjW(i), ParamKind::FcProjB(i));
        self.projection_backward(
            i,
            LoraTarget::FcProj,
            s.fch_gelu,
            h_fcproj,
            fcproj_w,
            sc.dres_a,
            sc.dfch_gelu,
            4 * c,
            c,
            sc.dlora,
        );
        self.push(Phase::Backward, n("mlp.gelu"), Op::GeluBackward { inp: s.fch, dout: sc.dfch_gelu, dinp: sc.dfch });
        let fc_w = (ParamKind::FcW(i), ParamKind::FcB(i));
        self.projection_backward(i, LoraTarget::Fc, s.ln2, h_fc, fc_w, sc.dfch, sc.dln, c, 4 * c, sc.dlora);
        self.push(
            Phase::Backward,
            n("ln_2"),
            Op::LayerNormBackward {
                inp: s.res2,
                weight: self.p(ParamKind::Ln2W(i)),
                mean: s.ln2_mean,
                rstd: s.ln2_rstd,
                dout: sc.dln,
                dinp: sc.dres_b,
                dweight: self.g(ParamKind::Ln2W(i)),
                dbias: self.g(ParamKind::Ln2B(i)),
                accumulate: true,
            },
        );
        // dres_b holds d(residual_1).
        self.push(Phase::Backward, n("residual_1"), Op::ResidualBackward { dout: sc.dres_b, da: sc.dres_a });
        let proj_w = (ParamKind::AttnProjW(i), ParamKind::AttnProjB(i));
        self.projection_backward(i, LoraTarget::AttnProj, s.atty, h_proj, proj_w, sc.dres_b, sc.datty, c, c, sc.dlora);
        let op = match (self.techniques.attention, self.techniques.checkpoint) {
            (AttentionKind::Fused, _) => Op::FlashAttentionBackward {
                qkv: s.qkv,
                out: s.atty,
                lse: s.att,
                dout: sc.datty,
                delta: sc.datt,
                dqkv: sc.dqkv,
            },
            (AttentionKind::Standard, Checkpoint::Selective) => {
                // Recompute the attention core (scores, softmax, P·V) from the saved q, k, v.
                self.mode = Mode::Recompute;
                let att = self.act(n("attn.probs"), &[b, nh, t, t], Category::Activations, li);
                let out = self.act(n("attn.out"), &[b, t, c], Category::Temporaries, li);
                self.push(Phase::Backward, n("attn"), Op::Attention { qkv: s.qkv, att, out });
                self.mode = Mode::Saved;
                Op::AttentionBackward { qkv: s.qkv, att, dout: sc.datty, datt: sc.datt, dqkv: sc.dqkv }
            }
            (AttentionKind::Standard, _) => {
                Op::AttentionBackward { qkv: s.qkv, att: s.att, dout: sc.datty, datt: sc.datt, dqkv: sc.dqkv }
            }
        };
        self.push(Phase::Backward, n("attn"), op);
        let qkv_w = (ParamKind::QkvW(i), ParamKind::QkvB(i));
        self.projection_backward(i, LoraTarget::Qkv, s.ln1, h_qkv, qkv_w, sc.dqkv, sc.dln, c, 3 * c, sc.dlora);
        self.push(
            Phase::Backward,
            n("ln_1"),
            Op::LayerNormBackward {
                inp: s.x,
                weight: self.p(ParamKind::Ln1W(i)),
                mean: s.ln1_mean,
                rstd: s.ln1_rstd,
                dout: sc.dln,
                dinp: sc.dres_a,
                dweight: self.g(ParamKind::Ln1W(i)),
                dbias: self.g(ParamKind::Ln1B(i)),
                accumulate: true,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_has_every_phase_and_valid_views() {
        let model = ModelConfig::toy(65);
        let plan = Plan::build(&model, StepShape { batch: 2, seq: 8 }, &OptimizerConfig::default()).unwrap();
        assert!(plan.ops.iter().any(|o| o.phase == Phase::Optimizer));
        assert_eq!(plan.tensor(plan.handles.params).numel(), plan.layout.flat_len);
        let bad = StepShape { batch: 0, seq: 8 };
        assert!(Plan::build(&model, bad, &OptimizerConfig::default()).is_err());
    }
}
