//! The builder: the tensors and ops of one training step, as an eager framework runs it.

mod block;
mod offload;
mod serve;
mod shard;

use super::{
    AttentionKind, Batches, Category, Checkpoint, DType, Handles, MicroHandles, Op, OpNode, OptimizerConfig,
    OptimizerKind, Phase, Plan, Techniques, TensorId, TensorInfo, View,
};
use crate::model::params::{ParamKind, ParamLayout};
use crate::model::{ModelConfig, StepShape};
use crate::plan::op;

impl super::ValidRequest {
    /// The step's plan.
    pub fn plan(&self) -> Plan {
        build(self, 0)
    }

    /// Every data-parallel rank's plan (one on one GPU): the same ops in the same order, each
    /// rank's own shards.
    pub fn rank_plans(&self) -> Vec<Plan> {
        (0..self.techniques().parallel.gpus.max(1)).map(|rank| build(self, rank)).collect()
    }
}

/// The plan of a validated request (its sizes checked too) for one rank (0 on one GPU).
fn build(request: &super::ValidRequest, rank: usize) -> Plan {
    Builder::new(request, rank).build()
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
    /// The step's batch in its three senses (the request's).
    batches: Batches,
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
    rank: usize,
    /// This rank's share of data parallelism (None on one GPU).
    dp: Option<shard::Dp>,
    /// The host's side of offload (None without it).
    host: Option<offload::HostSide>,
    /// Packed rows: the current micro-batch's document starts and positions' index.
    packing: Option<op::Packing>,
    /// Serving (see `serve.rs`): the step's slots, tables and lengths; each layer's cache.
    serve: Option<serve::ServeIo>,
    serve_caches: Vec<View>,
}

impl Builder {
    fn new(request: &super::ValidRequest, rank: usize) -> Self {
        let (model, techniques) = (request.model(), request.techniques());
        let layout = ParamLayout::new(model);
        let flat = layout.flat_len;
        let lora = techniques.lora.map(|l| ParamLayout::lora(model, &l));
        let none = View { tensor: TensorId(0), offset: 0, len: 0 };
        let mut b = Self {
            model: *model,
            shape: request.micro_shape(),
            batches: request.batches(),
            optimizer: *request.optimizer(),
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
            rank,
            dp: None,
            host: None,
            packing: None,
            serve: None,
            serve_caches: Vec::new(),
        };
        b.dp = shard::Dp::new(&b, rank);
        let dt = b.dt;
        // With ZeRO a rank holds shards of some states (`shard::state_lens`).
        let (params_len, grads_len, state_len) = b.state_lens(flat);
        let shard_name = |name: &str, len: u64| if len < flat { format!("{name}.shard") } else { name.to_string() };
        b.params = b.tensor(shard_name("parameters", params_len), &[params_len], dt, Category::Parameters, None);
        match b.lora.as_ref().map(|l| l.flat_len) {
            // LoRA: the base parameters are frozen, with neither gradients nor optimizer state.
            Some(n) => {
                b.trainable = b.tensor("lora.parameters", &[n], dt, Category::Parameters, None);
                b.grads = b.tensor("lora.gradients", &[n], dt, Category::Gradients, None);
            }
            None => {
                b.trainable = b.params;
                // Offloaded gradients live on the host (`host_side`).
                if !techniques.offload.gradients() {
                    let name = shard_name("gradients", grads_len);
                    b.grads = b.tensor(name, &[grads_len], dt, Category::Gradients, None);
                }
            }
        }
        b.host_side();
        // Offloaded, the master weights are the host's fp32 copy.
        if dt.is_half() && !techniques.offload.is_on() {
            let n = if b.lora.is_some() { b.trainable.len } else { state_len };
            let name = if b.lora.is_some() { "lora.master_weights".into() } else { shard_name("master_weights", n) };
            b.master = Some(b.tensor(name, &[n], DType::F32, Category::MasterWeights, None));
        }
        b.communication_buffers();
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
        let persistent = category.is_persistent();
        let host = false;
        self.tensors.push(TensorInfo {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            category,
            layer,
            persistent,
            host,
        });
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
        self.param_view(kind)
    }

    /// The gradient of a base parameter; None when it is frozen (LoRA).
    fn g(&self, kind: ParamKind) -> Option<View> {
        if self.lora.is_some() {
            return None;
        }
        Some(self.grad_view(kind))
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
        let flat = match self.lora {
            Some(_) => self.trainable.len,
            None => self.state_lens(self.layout.flat_len).2,
        };
        let opt_state = self.optimizer_states(flat);
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
        // Mixed precision: the update writes the 16-bit copy; fp16 checks for overflow first.
        let (params, grads, copy) = self.optimizer_views();
        self.host_before_update();
        let found_inf = self.techniques.precision.scales_loss().then(|| {
            let flag = self.tensor("found_inf", &[1], DType::U32, Category::Workspace, None);
            self.push(Phase::Optimizer, "unscale", Op::Zero(op::Zero { dst: flag }));
            self.push(Phase::Optimizer, "unscale", Op::CheckFinite(op::CheckFinite { grads, found_inf: flag }));
            flag
        });
        let op = match self.optimizer.kind {
            OptimizerKind::AdamW => {
                Op::AdamW(op::AdamW { params, grads, m: opt_state[0], v: opt_state[1], copy, found_inf })
            }
            OptimizerKind::Momentum => {
                Op::Sgd(op::Sgd { params, grads, momentum: Some(opt_state[0]), copy, found_inf })
            }
            OptimizerKind::Sgd => Op::Sgd(op::Sgd { params, grads, momentum: None, copy, found_inf }),
        };
        self.push(Phase::Optimizer, self.optimizer.kind.name(), op);
        self.host_after_update();
        self.gather_updated();
        self.techniques.accum = accum;

        self.unread_activations_are_temporaries();
        let handles = Handles {
            params: self.params.tensor,
            trainable: self.trainable.tensor,
            grads: self.grads.tensor,
            master: self.master.or(self.host.as_ref().map(|h| h.master)).map(|m| m.tensor),
            found_inf: found_inf.map(|f| f.tensor),
            micro,
            serving: None,
        };
        Plan {
            model: self.model,
            shape: self.shape,
            batches: self.batches,
            optimizer: self.optimizer,
            techniques: self.techniques,
            layout: self.layout,
            lora: self.lora,
            tensors: self.tensors,
            ops: self.ops,
            handles,
            rank: self.rank,
        }
    }

    /// The final LayerNorm of `x` (its output, mean and 1/std in `cat`) and the LM head, tied to
    /// the embedding: (out, mean, rstd, logits). Under ZeRO-3 each gathers its unit first.
    fn norm_and_head(&mut self, x: View, cat: Category) -> (View, View, View, View) {
        let (b, t) = (self.shape.batch as u64, self.shape.seq as u64);
        let (c, v) = (self.model.d_model as u64, self.model.vocab as u64);
        let (embeddings, ln_f) = (0, 1 + 2 * self.model.n_layers);
        let out = self.act("ln_f.out", &[b, t, c], cat, None);
        let mean = self.act32("ln_f.mean", &[b, t], cat, None);
        let rstd = self.act32("ln_f.rstd", &[b, t], cat, None);
        self.gather(&[ln_f], Phase::Forward);
        let (weight, bias) = (self.p(ParamKind::LnFW), self.p(ParamKind::LnFB));
        self.push(Phase::Forward, "ln_f", Op::LayerNorm(op::LayerNorm { inp: x, weight, bias, out, mean, rstd }));
        let logits = self.act("logits", &[b, t, v], Category::Logits, None);
        self.gather(&[embeddings], Phase::Forward);
        let head = op::Matmul {
            inp: out,
            weight: self.p(ParamKind::Wte),
            bias: None,
            out: logits,
            rows: b * t,
            k: c,
            n: v,
            weight_transposed: true,
        };
        self.push(Phase::Forward, "lm_head", Op::Matmul(head));
        (out, mean, rstd, logits)
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
        self.packing_inputs();

        // ---- forward ----
        use Category::{Activations as A, Temporaries as Tmp};
        let encoded = self.act("embed.out", &[b, t, c], A, None);
        let (embeddings, ln_f) = (0, 1 + 2 * l);
        let block_units = |i: usize| [1 + 2 * i, 2 + 2 * i];
        self.gather(&[embeddings], Phase::Forward);
        self.push(
            Phase::Forward,
            "embed",
            Op::Embedding(op::Embedding {
                tokens,
                wte: self.p(ParamKind::Wte),
                wpe: self.p(ParamKind::Wpe),
                out: encoded,
                packing: self.packing,
                positions: None,
            }),
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
            self.gather(&block_units(i), Phase::Forward);
            self.mode = mode;
            let (s, out) = self.block_forward(i, x, out_cat);
            self.mode = Mode::Saved;
            saved.push(s);
            x = out;
        }
        let (lnf, lnf_mean, lnf_rstd, logits) = self.norm_and_head(x, A);
        let probs = self.act("probs", &[b, t, v], Category::Logits, None);
        let losses = self.act32("losses", &[b, t], Category::Logits, None);
        let loss = self.act32("loss", &[1], Category::Logits, None);
        self.push(
            Phase::Forward,
            "cross_entropy",
            Op::CrossEntropy(op::CrossEntropy { logits, targets, probs, losses, loss }),
        );

        // ---- backward ----
        if self.micro == 0 {
            self.push(Phase::Backward, "zero_grad", Op::Zero(op::Zero { dst: self.grads }));
        }
        let dlogits = self.act("grad.logits", &[b, t, v], Tmp, None);
        // The mean over the whole effective batch: each micro-batch's loss is a mean over its
        // rows, and contributes 1/accum of the step's gradient.
        let scale = 1.0 / (rows as f64 * self.techniques.accum as f64);
        self.push(
            Phase::Backward,
            "cross_entropy",
            Op::CrossEntropyBackward(op::CrossEntropyBackward { probs, targets, dlogits, scale }),
        );
        let dln = self.act("grad.ln_out", &[b, t, c], Tmp, None);
        self.gather(&[embeddings], Phase::Backward);
        self.unit_grads(&[embeddings]);
        self.push(
            Phase::Backward,
            "lm_head",
            Op::MatmulBackward(op::MatmulBackward {
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
            }),
        );
        let dres_a = self.act("grad.residual_a", &[b, t, c], Tmp, None);
        let dres_b = self.act("grad.residual_b", &[b, t, c], Tmp, None);
        self.gather(&[ln_f], Phase::Backward);
        self.unit_grads(&[ln_f]);
        self.push(
            Phase::Backward,
            "ln_f",
            Op::LayerNormBackward(op::LayerNormBackward {
                inp: x,
                weight: self.p(ParamKind::LnFW),
                mean: lnf_mean,
                rstd: lnf_rstd,
                dout: dln,
                dinp: dres_a,
                dweight: self.g(ParamKind::LnFW),
                dbias: self.g(ParamKind::LnFB),
                accumulate: false,
            }),
        );
        self.reduce(&[ln_f]);
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
                    self.gather(&block_units(i), Phase::Backward);
                    self.unit_grads(&block_units(i));
                    self.block_backward(i, s, &scratch);
                    self.reduce(&block_units(i));
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
                        self.gather(&block_units(i), Phase::Backward);
                        // Inside the segment a block's output is the next block's saved input;
                        // the last block's output is recomputed but not needed.
                        let (s, out) = self.block_forward(i, x, if i + 1 < s1 { A } else { Tmp });
                        recomputed.push(s);
                        x = out;
                    }
                    self.mode = Mode::Saved;
                    for (i, s) in (s0..s1).zip(&recomputed).rev() {
                        self.gather(&block_units(i), Phase::Backward);
                        self.unit_grads(&block_units(i));
                        self.block_backward(i, s, &scratch);
                        self.reduce(&block_units(i));
                    }
                }
            }
        }
        // Frozen embeddings (LoRA) need no backward pass at all.
        if let (Some(dwte), Some(dwpe)) = (self.g(ParamKind::Wte), self.g(ParamKind::Wpe)) {
            self.push(
                Phase::Backward,
                "embed",
                Op::EmbeddingBackward(op::EmbeddingBackward {
                    tokens,
                    token_offsets,
                    token_positions,
                    dout: dres_a,
                    dwte,
                    dwpe,
                    packing: self.packing,
                }),
            );
        }
        self.reduce(&[embeddings]);
        MicroHandles {
            tokens: tokens.tensor,
            targets: targets.tensor,
            token_offsets: token_offsets.tensor,
            token_positions: token_positions.tensor,
            loss: loss.tensor,
            packing: self.packing,
        }
    }
}
