//! The step plan: the single source of truth for what one training step does.
//!
//! A plan lists every tensor of the step (shape, dtype, category) and the ordered ops that read
//! and write them. The CPU and GPU backends execute it op by op; memory accounting, the CLI and
//! the views read it. It is pure Rust and needs no GPU.

pub mod optimizer;

use serde::{Deserialize, Serialize};

pub use optimizer::{OptimizerConfig, OptimizerKind};

use crate::model::params::{ParamKind, ParamLayout};
use crate::model::{ConfigError, ModelConfig, StepShape};

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DType {
    F32,
    U32,
}

impl DType {
    pub fn size_bytes(self) -> usize {
        4
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TensorId(pub usize);

#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub category: Category,
    /// The block it belongs to, for per-layer views.
    pub layer: Option<usize>,
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn size_bytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }
}

/// A contiguous range of a tensor's elements: a whole tensor, or one parameter of the flat
/// parameter tensor. Offsets of views that ops bind are multiples of 64 elements (256 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub tensor: TensorId,
    pub offset: usize,
    pub len: usize,
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
    LayerNormBackward {
        inp: View,
        weight: View,
        mean: View,
        rstd: View,
        dout: View,
        dinp: View,
        dweight: View,
        dbias: View,
        accumulate: bool,
    },
    /// out (rows,n) = inp (rows,k) · W + bias, with W (k,n) (Conv1D layout) or, when
    /// `weight_transposed`, W (n,k) (the tied lm_head).
    Matmul {
        inp: View,
        weight: View,
        bias: Option<View>,
        out: View,
        rows: usize,
        k: usize,
        n: usize,
        weight_transposed: bool,
    },
    /// dinp = dout·Wᵀ; dweight += inpᵀ·dout; dbias += Σ_rows dout.
    MatmulBackward {
        inp: View,
        weight: View,
        dout: View,
        dinp: View,
        dweight: View,
        dbias: Option<View>,
        rows: usize,
        k: usize,
        n: usize,
        weight_transposed: bool,
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
    /// dlogits = (probs − onehot(target)) / rows.
    CrossEntropyBackward {
        probs: View,
        targets: View,
        dlogits: View,
    },
    /// AdamW over the flat parameters.
    AdamW {
        params: View,
        grads: View,
        m: View,
        v: View,
    },
    /// SGD, with momentum when `momentum` is present.
    Sgd {
        params: View,
        grads: View,
        momentum: Option<View>,
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
                let mut reads = vec![inp, weight, mean, rstd, dout, dweight, dbias];
                if accumulate {
                    reads.push(dinp);
                }
                (reads, vec![dinp, dweight, dbias])
            }
            Op::Matmul { inp, weight, bias, out, .. } => {
                (std::iter::once(inp).chain([weight]).chain(bias).collect(), vec![out])
            }
            Op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, .. } => {
                let reads = [inp, weight, dout, dweight].into_iter().chain(dbias).collect();
                (reads, [dinp, dweight].into_iter().chain(dbias).collect())
            }
            Op::Attention { qkv, att, out } => (vec![qkv], vec![att, out]),
            Op::AttentionBackward { qkv, att, dout, datt, dqkv } => (vec![qkv, att, dout], vec![datt, dqkv]),
            Op::Gelu { inp, out } => (vec![inp], vec![out]),
            Op::GeluBackward { inp, dout, dinp } => (vec![inp, dout], vec![dinp]),
            Op::Residual { a, b, out } => (vec![a, b], vec![out]),
            Op::ResidualBackward { dout, da } => (vec![dout], vec![da]),
            Op::CrossEntropy { logits, targets, probs, losses, loss } => {
                (vec![logits, targets], vec![probs, losses, loss])
            }
            Op::CrossEntropyBackward { probs, targets, dlogits } => (vec![probs, targets], vec![dlogits]),
            Op::AdamW { params, grads, m, v } => (vec![params, grads, m, v], vec![params, m, v]),
            Op::Sgd { params, grads, momentum } => (
                [params, grads].into_iter().chain(momentum).collect(),
                std::iter::once(params).chain(momentum).collect(),
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
            Op::Attention { .. } => "attention",
            Op::AttentionBackward { .. } => "attention_backward",
            Op::Gelu { .. } => "gelu",
            Op::GeluBackward { .. } => "gelu_backward",
            Op::Residual { .. } => "residual",
            Op::ResidualBackward { .. } => "residual_backward",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::CrossEntropyBackward { .. } => "cross_entropy_backward",
            Op::AdamW { .. } => "adamw",
            Op::Sgd { .. } => "sgd",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpNode {
    pub op: Op,
    pub phase: Phase,
    /// Human-readable label, e.g. "h.0.attn.c_attn".
    pub label: String,
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Handles {
    pub params: TensorId,
    pub grads: TensorId,
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
    pub layout: ParamLayout,
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
        let loss = self.handles.loss;
        self.tensors
            .iter()
            .zip(span)
            .enumerate()
            .map(|(i, (t, span))| {
                let span = if TensorId(i) == loss { None } else { span };
                if t.category.is_persistent() {
                    Lifetime::Persistent
                } else {
                    // The batch, and the loss the training loop reads after the step, are held
                    // for the whole step; so is anything no op touches (a caller's handle).
                    match span {
                        Some((first, last)) if t.category != Category::Input => Lifetime::Ops { first, last },
                        _ => Lifetime::Step,
                    }
                }
            })
            .collect()
    }

    /// Builds the plan of one training step.
    pub fn build(model: &ModelConfig, shape: StepShape, optimizer: &OptimizerConfig) -> Result<Plan, ConfigError> {
        model.validate()?;
        shape.validate(model)?;
        optimizer.validate()?;
        Ok(Builder::new(model, shape, optimizer).build())
    }
}

struct Builder {
    model: ModelConfig,
    shape: StepShape,
    optimizer: OptimizerConfig,
    layout: ParamLayout,
    tensors: Vec<TensorInfo>,
    ops: Vec<OpNode>,
}

impl Builder {
    fn new(model: &ModelConfig, shape: StepShape, optimizer: &OptimizerConfig) -> Self {
        Self {
            model: *model,
            shape,
            optimizer: *optimizer,
            layout: ParamLayout::new(model),
            tensors: Vec::new(),
            ops: Vec::new(),
        }
    }

    fn tensor(
        &mut self,
        name: impl Into<String>,
        shape: &[usize],
        dtype: DType,
        category: Category,
        layer: Option<usize>,
    ) -> View {
        let id = TensorId(self.tensors.len());
        self.tensors.push(TensorInfo { name: name.into(), shape: shape.to_vec(), dtype, category, layer });
        View { tensor: id, offset: 0, len: shape.iter().product() }
    }

    fn act(&mut self, name: impl Into<String>, shape: &[usize], category: Category, layer: Option<usize>) -> View {
        self.tensor(name, shape, DType::F32, category, layer)
    }

    fn push(&mut self, phase: Phase, label: impl Into<String>, op: Op) {
        self.ops.push(OpNode { op, phase, label: label.into() });
    }

    fn build(mut self) -> Plan {
        let (b, t) = (self.shape.batch, self.shape.seq);
        let (c, v, nh, l) = (self.model.d_model, self.model.vocab, self.model.n_heads, self.model.n_layers);
        let rows = b * t;
        let flat = self.layout.flat_len;
        let layout = self.layout.clone();
        let params = self.act("parameters", &[flat], Category::Parameters, None);
        let grads = self.act("gradients", &[flat], Category::Gradients, None);
        let p = |kind: ParamKind| {
            let r = layout.range(kind);
            View { tensor: params.tensor, offset: r.start, len: r.len() }
        };
        let g = |kind: ParamKind| {
            let r = layout.range(kind);
            View { tensor: grads.tensor, offset: r.start, len: r.len() }
        };
        let opt_state: Vec<View> = self
            .optimizer
            .state_names()
            .iter()
            .map(|name| self.act(format!("optimizer.{name}"), &[flat], Category::OptimizerState, None))
            .collect();
        let tokens = self.tensor("input.tokens", &[b, t], DType::U32, Category::Input, None);
        let targets = self.tensor("input.targets", &[b, t], DType::U32, Category::Input, None);
        let token_offsets = self.tensor("input.token_offsets", &[v + 1], DType::U32, Category::Input, None);
        let token_positions = self.tensor("input.token_positions", &[rows], DType::U32, Category::Input, None);

        // ---- forward ----
        use Category::{Activations as A, Temporaries as Tmp};
        let encoded = self.act("embed.out", &[b, t, c], A, None);
        self.push(
            Phase::Forward,
            "embed",
            Op::Embedding { tokens, wte: p(ParamKind::Wte), wpe: p(ParamKind::Wpe), out: encoded },
        );
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
        }
        let mut saved = Vec::with_capacity(l);
        let mut x = encoded;
        for i in 0..l {
            let li = Some(i);
            let n = |s: &str| format!("h.{i}.{s}");
            let ln1 = self.act(n("ln_1.out"), &[b, t, c], A, li);
            let ln1_mean = self.act(n("ln_1.mean"), &[b, t], A, li);
            let ln1_rstd = self.act(n("ln_1.rstd"), &[b, t], A, li);
            self.push(
                Phase::Forward,
                n("ln_1"),
                Op::LayerNorm {
                    inp: x,
                    weight: p(ParamKind::Ln1W(i)),
                    bias: p(ParamKind::Ln1B(i)),
                    out: ln1,
                    mean: ln1_mean,
                    rstd: ln1_rstd,
                },
            );
            let qkv = self.act(n("attn.qkv"), &[b, t, 3 * c], A, li);
            self.push(
                Phase::Forward,
                n("attn.c_attn"),
                Op::Matmul {
                    inp: ln1,
                    weight: p(ParamKind::QkvW(i)),
                    bias: Some(p(ParamKind::QkvB(i))),
                    out: qkv,
                    rows,
                    k: c,
                    n: 3 * c,
                    weight_transposed: false,
                },
            );
            let att = self.act(n("attn.probs"), &[b, nh, t, t], A, li);
            let atty = self.act(n("attn.out"), &[b, t, c], A, li);
            self.push(Phase::Forward, n("attn"), Op::Attention { qkv, att, out: atty });
            let attproj = self.act(n("attn.c_proj.out"), &[b, t, c], Tmp, li);
            self.push(
                Phase::Forward,
                n("attn.c_proj"),
                Op::Matmul {
                    inp: atty,
                    weight: p(ParamKind::AttnProjW(i)),
                    bias: Some(p(ParamKind::AttnProjB(i))),
                    out: attproj,
                    rows,
                    k: c,
                    n: c,
                    weight_transposed: false,
                },
            );
            let res2 = self.act(n("residual_1"), &[b, t, c], A, li);
            self.push(Phase::Forward, n("residual_1"), Op::Residual { a: x, b: attproj, out: res2 });
            let ln2 = self.act(n("ln_2.out"), &[b, t, c], A, li);
            let ln2_mean = self.act(n("ln_2.mean"), &[b, t], A, li);
            let ln2_rstd = self.act(n("ln_2.rstd"), &[b, t], A, li);
            self.push(
                Phase::Forward,
                n("ln_2"),
                Op::LayerNorm {
                    inp: res2,
                    weight: p(ParamKind::Ln2W(i)),
                    bias: p(ParamKind::Ln2B(i)),
                    out: ln2,
                    mean: ln2_mean,
                    rstd: ln2_rstd,
                },
            );
            let fch = self.act(n("mlp.c_fc.out"), &[b, t, 4 * c], A, li);
            self.push(
                Phase::Forward,
                n("mlp.c_fc"),
                Op::Matmul {
                    inp: ln2,
                    weight: p(ParamKind::FcW(i)),
                    bias: Some(p(ParamKind::FcB(i))),
                    out: fch,
                    rows,
                    k: c,
                    n: 4 * c,
                    weight_transposed: false,
                },
            );
            let fch_gelu = self.act(n("mlp.gelu.out"), &[b, t, 4 * c], A, li);
            self.push(Phase::Forward, n("mlp.gelu"), Op::Gelu { inp: fch, out: fch_gelu });
            let fcproj = self.act(n("mlp.c_proj.out"), &[b, t, c], Tmp, li);
            self.push(
                Phase::Forward,
                n("mlp.c_proj"),
                Op::Matmul {
                    inp: fch_gelu,
                    weight: p(ParamKind::FcProjW(i)),
                    bias: Some(p(ParamKind::FcProjB(i))),
                    out: fcproj,
                    rows,
                    k: 4 * c,
                    n: c,
                    weight_transposed: false,
                },
            );
            let res3 = self.act(n("residual_2"), &[b, t, c], A, li);
            self.push(Phase::Forward, n("residual_2"), Op::Residual { a: res2, b: fcproj, out: res3 });
            saved.push(Saved {
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
            });
            x = res3;
        }
        let lnf = self.act("ln_f.out", &[b, t, c], A, None);
        let lnf_mean = self.act("ln_f.mean", &[b, t], A, None);
        let lnf_rstd = self.act("ln_f.rstd", &[b, t], A, None);
        self.push(
            Phase::Forward,
            "ln_f",
            Op::LayerNorm {
                inp: x,
                weight: p(ParamKind::LnFW),
                bias: p(ParamKind::LnFB),
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
                weight: p(ParamKind::Wte),
                bias: None,
                out: logits,
                rows,
                k: c,
                n: v,
                weight_transposed: true,
            },
        );
        let probs = self.act("probs", &[b, t, v], Category::Logits, None);
        let losses = self.act("losses", &[b, t], Category::Logits, None);
        let loss = self.act("loss", &[1], Category::Logits, None);
        self.push(Phase::Forward, "cross_entropy", Op::CrossEntropy { logits, targets, probs, losses, loss });

        // ---- backward ----
        self.push(Phase::Backward, "zero_grad", Op::Zero { dst: grads });
        let dlogits = self.act("grad.logits", &[b, t, v], Tmp, None);
        self.push(Phase::Backward, "cross_entropy", Op::CrossEntropyBackward { probs, targets, dlogits });
        let dln = self.act("grad.ln_out", &[b, t, c], Tmp, None);
        self.push(
            Phase::Backward,
            "lm_head",
            Op::MatmulBackward {
                inp: lnf,
                weight: p(ParamKind::Wte),
                dout: dlogits,
                dinp: dln,
                dweight: g(ParamKind::Wte),
                dbias: None,
                rows,
                k: c,
                n: v,
                weight_transposed: true,
            },
        );
        let dres_a = self.act("grad.residual_a", &[b, t, c], Tmp, None);
        let dres_b = self.act("grad.residual_b", &[b, t, c], Tmp, None);
        self.push(
            Phase::Backward,
            "ln_f",
            Op::LayerNormBackward {
                inp: x,
                weight: p(ParamKind::LnFW),
                mean: lnf_mean,
                rstd: lnf_rstd,
                dout: dln,
                dinp: dres_a,
                dweight: g(ParamKind::LnFW),
                dbias: g(ParamKind::LnFB),
                accumulate: false,
            },
        );
        let dfch_gelu = self.act("grad.mlp.gelu.out", &[b, t, 4 * c], Tmp, None);
        let dfch = self.act("grad.mlp.c_fc.out", &[b, t, 4 * c], Tmp, None);
        let datty = self.act("grad.attn.out", &[b, t, c], Tmp, None);
        let datt = self.act("grad.attn.probs", &[b, nh, t, t], Tmp, None);
        let dqkv = self.act("grad.attn.qkv", &[b, t, 3 * c], Tmp, None);
        for (i, s) in saved.iter().enumerate().rev() {
            let n = |x: &str| format!("h.{i}.{x}");
            // dres_a holds d(block output).
            self.push(Phase::Backward, n("residual_2"), Op::ResidualBackward { dout: dres_a, da: dres_b });
            self.push(
                Phase::Backward,
                n("mlp.c_proj"),
                Op::MatmulBackward {
                    inp: s.fch_gelu,
                    weight: p(ParamKind::FcProjW(i)),
                    dout: dres_a,
                    dinp: dfch_gelu,
                    dweight: g(ParamKind::FcProjW(i)),
                    dbias: Some(g(ParamKind::FcProjB(i))),
                    rows,
                    k: 4 * c,
                    n: c,
                    weight_transposed: false,
                },
            );
            self.push(Phase::Backward, n("mlp.gelu"), Op::GeluBackward { inp: s.fch, dout: dfch_gelu, dinp: dfch });
            self.push(
                Phase::Backward,
                n("mlp.c_fc"),
                Op::MatmulBackward {
                    inp: s.ln2,
                    weight: p(ParamKind::FcW(i)),
                    dout: dfch,
                    dinp: dln,
                    dweight: g(ParamKind::FcW(i)),
                    dbias: Some(g(ParamKind::FcB(i))),
                    rows,
                    k: c,
                    n: 4 * c,
                    weight_transposed: false,
                },
            );
            self.push(
                Phase::Backward,
                n("ln_2"),
                Op::LayerNormBackward {
                    inp: s.res2,
                    weight: p(ParamKind::Ln2W(i)),
                    mean: s.ln2_mean,
                    rstd: s.ln2_rstd,
                    dout: dln,
                    dinp: dres_b,
                    dweight: g(ParamKind::Ln2W(i)),
                    dbias: g(ParamKind::Ln2B(i)),
                    accumulate: true,
                },
            );
            // dres_b holds d(residual_1).
            self.push(Phase::Backward, n("residual_1"), Op::ResidualBackward { dout: dres_b, da: dres_a });
            self.push(
                Phase::Backward,
                n("attn.c_proj"),
                Op::MatmulBackward {
                    inp: s.atty,
                    weight: p(ParamKind::AttnProjW(i)),
                    dout: dres_b,
                    dinp: datty,
                    dweight: g(ParamKind::AttnProjW(i)),
                    dbias: Some(g(ParamKind::AttnProjB(i))),
                    rows,
                    k: c,
                    n: c,
                    weight_transposed: false,
                },
            );
            self.push(
                Phase::Backward,
                n("attn"),
                Op::AttentionBackward { qkv: s.qkv, att: s.att, dout: datty, datt, dqkv },
            );
            self.push(
                Phase::Backward,
                n("attn.c_attn"),
                Op::MatmulBackward {
                    inp: s.ln1,
                    weight: p(ParamKind::QkvW(i)),
                    dout: dqkv,
                    dinp: dln,
                    dweight: g(ParamKind::QkvW(i)),
                    dbias: Some(g(ParamKind::QkvB(i))),
                    rows,
                    k: c,
                    n: 3 * c,
                    weight_transposed: false,
                },
            );
            self.push(
                Phase::Backward,
                n("ln_1"),
                Op::LayerNormBackward {
                    inp: s.x,
                    weight: p(ParamKind::Ln1W(i)),
                    mean: s.ln1_mean,
                    rstd: s.ln1_rstd,
                    dout: dln,
                    dinp: dres_a,
                    dweight: g(ParamKind::Ln1W(i)),
                    dbias: g(ParamKind::Ln1B(i)),
                    accumulate: true,
                },
            );
        }
        self.push(
            Phase::Backward,
            "embed",
            Op::EmbeddingBackward {
                tokens,
                token_offsets,
                token_positions,
                dout: dres_a,
                dwte: g(ParamKind::Wte),
                dwpe: g(ParamKind::Wpe),
            },
        );

        // ---- optimizer ----
        let op = match self.optimizer.kind {
            OptimizerKind::AdamW => Op::AdamW { params, grads, m: opt_state[0], v: opt_state[1] },
            OptimizerKind::Momentum => Op::Sgd { params, grads, momentum: Some(opt_state[0]) },
            OptimizerKind::Sgd => Op::Sgd { params, grads, momentum: None },
        };
        self.push(Phase::Optimizer, self.optimizer.kind.name(), op);

        let handles = Handles {
            params: params.tensor,
            grads: grads.tensor,
            tokens: tokens.tensor,
            targets: targets.tensor,
            token_offsets: token_offsets.tensor,
            token_positions: token_positions.tensor,
            loss: loss.tensor,
        };
        Plan {
            model: self.model,
            shape: self.shape,
            optimizer: self.optimizer,
            layout: self.layout,
            tensors: self.tensors,
            ops: self.ops,
            handles,
        }
    }
}

/// The positions of each token in `tokens`, grouped by token: `offsets[v]..offsets[v+1]` index
/// `positions`. A counting sort, so positions of one token stay in increasing order.
pub fn token_index(tokens: &[u32], vocab: usize) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; vocab + 1];
    for &tok in tokens {
        if let Some(slot) = offsets.get_mut(tok as usize + 1) {
            *slot += 1;
        }
    }
    for i in 0..vocab {
        offsets[i + 1] += offsets[i];
    }
    let mut cursor = offsets.clone();
    let mut positions = vec![0u32; tokens.len()];
    for (pos, &tok) in tokens.iter().enumerate() {
        if let Some(slot) = cursor.get_mut(tok as usize) {
            positions[*slot as usize] = pos as u32;
            *slot += 1;
        }
    }
    (offsets, positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_index_groups_repeated_tokens() {
        let (off, pos) = token_index(&[2, 0, 2, 2, 1], 4);
        assert_eq!(off, vec![0, 1, 2, 5, 5]);
        assert_eq!(pos, vec![1, 4, 0, 2, 3]);
    }

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
