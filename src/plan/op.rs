//! The ops of a step: what each reads and writes, its name, its floating-point operations.

use serde::{Deserialize, Serialize};

use super::View;
use crate::model::{ModelConfig, StepShape};

/// Which part of the step an op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Forward,
    Backward,
    Optimizer,
}

mod kv;
pub use kv::{CachedAttention, KvWrite};

/// One op of the step. Shapes use B (batch), T (sequence), C (d_model), NH (heads), V (vocab).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Zero(Zero),
    Embedding(Embedding),
    EmbeddingBackward(EmbeddingBackward),
    LayerNorm(LayerNorm),
    LayerNormBackward(LayerNormBackward),
    Matmul(Matmul),
    MatmulBackward(MatmulBackward),
    MatmulAdd(MatmulAdd),
    MatmulAddBackward(MatmulAddBackward),
    Attention(Attention),
    AttentionBackward(AttentionBackward),
    FlashAttention(FlashAttention),
    FlashAttentionBackward(FlashAttentionBackward),
    Gelu(Gelu),
    GeluBackward(GeluBackward),
    Residual(Residual),
    ResidualBackward(ResidualBackward),
    CrossEntropy(CrossEntropy),
    CrossEntropyBackward(CrossEntropyBackward),
    CheckFinite(CheckFinite),
    AdamW(AdamW),
    Sgd(Sgd),
    AllReduce(AllReduce),
    ReduceScatter(ReduceScatter),
    AllGather(AllGather),
    CopyToHost(CopyToHost),
    CopyToDevice(CopyToDevice),
    KvWrite(KvWrite),
    CachedAttention(CachedAttention),
}

/// Zero a tensor (gradients are accumulated with `+=`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Zero {
    pub dst: View,
}

/// Packed rows (`Batching::Packed`): each position's document start in its row (B,T) — where
/// attention stops looking back and positions restart — and the positions' index for the
/// position embedding's gradient (rows grouped by position, as the tokens' index groups them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packing {
    pub doc_starts: View,
    pub position_offsets: View,
    pub position_rows: View,
}

impl Packing {
    fn views(p: Option<Packing>) -> Vec<View> {
        p.map_or(Vec::new(), |p| vec![p.doc_starts, p.position_offsets, p.position_rows])
    }
}

/// out (B,T,C) = wte[tokens] + wpe[t] (t counted from the document's start when packed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Embedding {
    pub tokens: View,
    pub wte: View,
    pub wpe: View,
    pub out: View,
    pub packing: Option<Packing>,
    /// Each row's position, given (rows u32): a serving step's new tokens sit after the ones
    /// already cached. None: the row's place in its sequence (from its document's start when
    /// packed). Inference only: the backward counts positions from the rows.
    pub positions: Option<View>,
}

/// dwte[v] += Σ_{positions p with token v} dout[p]; dwpe[t] += Σ_b dout[b,t].
/// `token_offsets` (V+1) and `token_positions` (B·T) index the positions of each token
/// (built with the batch), so the GPU's scatter-add is a deterministic gather even when
/// tokens repeat; the CPU twin reads `tokens` directly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmbeddingBackward {
    pub tokens: View,
    pub token_offsets: View,
    pub token_positions: View,
    pub dout: View,
    pub dwte: View,
    pub dwpe: View,
    pub packing: Option<Packing>,
}

/// out (rows,C) = (inp − mean)·rstd·weight + bias; saves mean, rstd (rows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNorm {
    pub inp: View,
    pub weight: View,
    pub bias: View,
    pub out: View,
    pub mean: View,
    pub rstd: View,
}

/// dinp (+)= …, dweight += …, dbias += …; `accumulate` says whether dinp is added to.
/// Frozen parameters (LoRA) have no gradients: `dweight` and `dbias` are both None.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormBackward {
    pub inp: View,
    pub weight: View,
    pub mean: View,
    pub rstd: View,
    pub dout: View,
    pub dinp: View,
    pub dweight: Option<View>,
    pub dbias: Option<View>,
    pub accumulate: bool,
}

/// out (rows,n) = inp (rows,k) · W + bias, with W (k,n) (Conv1D layout) or, when
/// `weight_transposed`, W (n,k) (the tied lm_head).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Matmul {
    pub inp: View,
    pub weight: View,
    pub bias: Option<View>,
    pub out: View,
    pub rows: u64,
    pub k: u64,
    pub n: u64,
    pub weight_transposed: bool,
}

/// dinp (+)= dout·Wᵀ; dweight += inpᵀ·dout; dbias += Σ_rows dout. A frozen weight (LoRA)
/// has no `dweight`, and then `inp` is not read; `accumulate` adds to dinp (the LoRA
/// branch's input gradient is already there).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatmulBackward {
    pub inp: View,
    pub weight: View,
    pub dout: View,
    pub dinp: View,
    pub dweight: Option<View>,
    pub dbias: Option<View>,
    pub rows: u64,
    pub k: u64,
    pub n: u64,
    pub weight_transposed: bool,
    pub accumulate: bool,
}

/// out (rows,n) += alpha · inp (rows,k) · W (k,n): LoRA's up-projection (alpha = α/r).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatmulAdd {
    pub inp: View,
    pub weight: View,
    pub out: View,
    pub rows: u64,
    pub k: u64,
    pub n: u64,
    pub alpha: f64,
}

/// dinp = alpha·dout·Wᵀ; dweight += alpha·inpᵀ·dout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatmulAddBackward {
    pub inp: View,
    pub weight: View,
    pub dout: View,
    pub dinp: View,
    pub dweight: View,
    pub rows: u64,
    pub k: u64,
    pub n: u64,
    pub alpha: f64,
}

/// Causal self-attention on qkv (B,T,3C): att (B,NH,T,T) = softmax(QKᵀ/√hs) saved for
/// backward; out (B,T,C) = att·V.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    pub qkv: View,
    pub att: View,
    pub out: View,
    /// Packed rows: a query sees only its document's keys.
    pub packing: Option<Packing>,
}

/// dqkv = ∂/∂qkv given dout; `datt` (B,NH,T,T) is scratch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionBackward {
    pub qkv: View,
    pub att: View,
    pub dout: View,
    pub datt: View,
    pub dqkv: View,
}

/// Fused (FlashAttention-style) causal self-attention: out (B,T,C) by tiles of K and V with
/// an online softmax; saves only lse (B,NH,T), the logsumexp of each row of scores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashAttention {
    pub qkv: View,
    pub out: View,
    pub lse: View,
    pub packing: Option<Packing>,
}

/// dqkv given dout, recomputing the scores from q, k and lse; `delta` (B,NH,T) is scratch
/// for rowsum(dout∘out).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashAttentionBackward {
    pub qkv: View,
    pub out: View,
    pub lse: View,
    pub dout: View,
    pub delta: View,
    pub dqkv: View,
    pub packing: Option<Packing>,
}

/// out = GELU_tanh(inp).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gelu {
    pub inp: View,
    pub out: View,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeluBackward {
    pub inp: View,
    pub dout: View,
    pub dinp: View,
}

/// out = a + b.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Residual {
    pub a: View,
    pub b: View,
    pub out: View,
}

/// da = dout. (The other input's gradient is `dout` itself: no copy is made.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResidualBackward {
    pub dout: View,
    pub da: View,
}

/// probs (rows,V) = softmax(logits); losses (rows) = −log probs[target]; loss (1) = mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropy {
    pub logits: View,
    pub targets: View,
    pub probs: View,
    pub losses: View,
    pub loss: View,
}

/// dlogits = (probs − onehot(target)) · scale; scale is 1/rows of the effective batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropyBackward {
    pub probs: View,
    pub targets: View,
    pub dlogits: View,
    pub scale: f64,
}

/// found_inf[0] = 1 if any gradient is inf or NaN (left unchanged otherwise): fp16's
/// overflow check before the optimizer (`GradScaler.unscale_`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckFinite {
    pub grads: View,
    pub found_inf: View,
}

/// AdamW over the flat parameters. With mixed precision `params` are the fp32 master
/// weights, the gradients are unscaled by the loss scale, the step is skipped when
/// `found_inf` is set, and the updated weights are also written, rounded, to `copy` (the
/// 16-bit working copy the forward pass reads).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamW {
    pub params: View,
    pub grads: View,
    pub m: View,
    pub v: View,
    pub copy: Option<View>,
    pub found_inf: Option<View>,
}

/// SGD, with momentum when `momentum` is present; mixed precision as for AdamW.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgd {
    pub params: View,
    pub grads: View,
    pub momentum: Option<View>,
    pub copy: Option<View>,
    pub found_inf: Option<View>,
}

/// Data parallelism's all-reduce of a bucket of gradients (PyTorch DDP): each rank copies
/// `data` into its `bucket`, the buckets are summed over the ranks and divided by their number
/// (the mean of the ranks' gradients), and each rank copies the result back into `data`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllReduce {
    pub data: View,
    pub bucket: View,
}

/// ZeRO's reduce-scatter of a bucket of gradients, the flat elements `[start, start + data.len)`:
/// each rank copies `data` into its `bucket`; the mean over the ranks lands in the shards, rank
/// k's part (flat `[k·S, (k+1)·S)`, S the shard length) in its `shard` — added to what the shard
/// holds when `accumulate` (ZeRO-2 and 3 reduce every micro-batch), written over it otherwise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReduceScatter {
    pub data: View,
    pub start: u64,
    pub bucket: View,
    /// The rank's shard, rank k's flat element k·S at its start.
    pub shard: View,
    pub accumulate: bool,
}

/// ZeRO's all-gather: every rank's `full` receives the flat elements `[start, start +
/// full.len)` from the ranks whose shards hold them (rank k's `shard` starts at flat k·S).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllGather {
    pub shard: View,
    pub full: View,
    pub start: u64,
}

/// Offload's copy from device memory into host memory (PCIe, device to host): `dst` (a host
/// tensor, fp32) ← `src`, or += `src` when `accumulate` (gradients added up on the host).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyToHost {
    pub src: View,
    pub dst: View,
    pub accumulate: bool,
}

/// Offload's copy from host memory into device memory (host to device): `dst` ← `src`, rounded
/// to `dst`'s type (the updated fp32 master weights into the 16-bit working copy).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyToDevice {
    pub src: View,
    pub dst: View,
}

impl Op {
    /// Whether the op copies between the device and host memory (offload).
    pub fn is_transfer(&self) -> bool {
        matches!(self, Op::CopyToHost(_) | Op::CopyToDevice(_))
    }

    /// Whether the op is a collective: it needs every rank (see `backend::cluster`).
    pub fn is_collective(&self) -> bool {
        matches!(self, Op::AllReduce(_) | Op::ReduceScatter(_) | Op::AllGather(_))
    }

    /// The views this op reads (accumulated outputs count as read) and the views it writes.
    pub fn reads_writes(&self) -> (Vec<View>, Vec<View>) {
        match *self {
            Op::Zero(Zero { dst }) => (vec![], vec![dst]),
            Op::Embedding(Embedding { tokens, wte, wpe, out, packing, positions }) => {
                ([tokens, wte, wpe].into_iter().chain(Packing::views(packing)).chain(positions).collect(), vec![out])
            }
            Op::EmbeddingBackward(EmbeddingBackward {
                tokens,
                token_offsets,
                token_positions,
                dout,
                dwte,
                dwpe,
                packing,
            }) => (
                [tokens, token_offsets, token_positions, dout, dwte, dwpe]
                    .into_iter()
                    .chain(Packing::views(packing))
                    .collect(),
                vec![dwte, dwpe],
            ),
            Op::LayerNorm(LayerNorm { inp, weight, bias, out, mean, rstd }) => {
                (vec![inp, weight, bias], vec![out, mean, rstd])
            }
            Op::LayerNormBackward(l) => {
                let grads: Vec<View> = l.dweight.into_iter().chain(l.dbias).collect();
                let mut reads = vec![l.inp, l.weight, l.mean, l.rstd, l.dout];
                reads.extend(&grads);
                if l.accumulate {
                    reads.push(l.dinp);
                }
                (reads, std::iter::once(l.dinp).chain(grads).collect())
            }
            Op::Matmul(Matmul { inp, weight, bias, out, .. }) => {
                (std::iter::once(inp).chain([weight]).chain(bias).collect(), vec![out])
            }
            Op::MatmulBackward(MatmulBackward { inp, weight, dout, dinp, dweight, dbias, accumulate, .. }) => {
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
            Op::MatmulAdd(MatmulAdd { inp, weight, out, .. }) => (vec![inp, weight, out], vec![out]),
            Op::MatmulAddBackward(MatmulAddBackward { inp, weight, dout, dinp, dweight, .. }) => {
                (vec![inp, weight, dout, dweight], vec![dinp, dweight])
            }
            Op::Attention(Attention { qkv, att, out, packing }) => {
                (std::iter::once(qkv).chain(Packing::views(packing)).collect(), vec![att, out])
            }
            Op::AttentionBackward(AttentionBackward { qkv, att, dout, datt, dqkv }) => {
                (vec![qkv, att, dout], vec![datt, dqkv])
            }
            Op::FlashAttention(FlashAttention { qkv, out, lse, packing }) => {
                (std::iter::once(qkv).chain(Packing::views(packing)).collect(), vec![out, lse])
            }
            Op::FlashAttentionBackward(FlashAttentionBackward { qkv, out, lse, dout, delta, dqkv, packing }) => {
                ([qkv, out, lse, dout].into_iter().chain(Packing::views(packing)).collect(), vec![delta, dqkv])
            }
            Op::Gelu(Gelu { inp, out }) => (vec![inp], vec![out]),
            Op::GeluBackward(GeluBackward { inp, dout, dinp }) => (vec![inp, dout], vec![dinp]),
            Op::Residual(Residual { a, b, out }) => (vec![a, b], vec![out]),
            Op::ResidualBackward(ResidualBackward { dout, da }) => (vec![dout], vec![da]),
            Op::CrossEntropy(CrossEntropy { logits, targets, probs, losses, loss }) => {
                (vec![logits, targets], vec![probs, losses, loss])
            }
            Op::CrossEntropyBackward(CrossEntropyBackward { probs, targets, dlogits, .. }) => {
                (vec![probs, targets], vec![dlogits])
            }
            Op::CheckFinite(CheckFinite { grads, found_inf }) => (vec![grads, found_inf], vec![found_inf]),
            Op::AdamW(AdamW { params, grads, m, v, copy, found_inf }) => (
                [params, grads, m, v].into_iter().chain(found_inf).collect(),
                [params, m, v].into_iter().chain(copy).collect(),
            ),
            Op::Sgd(Sgd { params, grads, momentum, copy, found_inf }) => (
                [params, grads].into_iter().chain(momentum).chain(found_inf).collect(),
                std::iter::once(params).chain(momentum).chain(copy).collect(),
            ),
            Op::AllReduce(AllReduce { data, bucket }) => (vec![data, bucket], vec![data, bucket]),
            Op::ReduceScatter(ReduceScatter { data, bucket, shard, accumulate, .. }) => {
                let mut reads = vec![data, bucket];
                if accumulate {
                    reads.push(shard);
                }
                (reads, vec![bucket, shard])
            }
            Op::AllGather(AllGather { shard, full, .. }) => (vec![shard], vec![full]),
            Op::CopyToHost(CopyToHost { src, dst, accumulate }) => {
                (if accumulate { vec![src, dst] } else { vec![src] }, vec![dst])
            }
            Op::CopyToDevice(CopyToDevice { src, dst }) => (vec![src], vec![dst]),
            Op::KvWrite(KvWrite { qkv, slots, cache }) => (vec![qkv, slots], vec![cache]),
            Op::CachedAttention(CachedAttention { qkv, cache, blocks, lens, out, .. }) => {
                (vec![qkv, cache, blocks, lens], vec![out])
            }
        }
    }

    /// A short name for timelines and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Zero(Zero { .. }) => "zero",
            Op::Embedding(Embedding { .. }) => "embedding",
            Op::EmbeddingBackward(EmbeddingBackward { .. }) => "embedding_backward",
            Op::LayerNorm(LayerNorm { .. }) => "layernorm",
            Op::LayerNormBackward(LayerNormBackward { .. }) => "layernorm_backward",
            Op::Matmul(Matmul { .. }) => "matmul",
            Op::MatmulBackward(MatmulBackward { .. }) => "matmul_backward",
            Op::MatmulAdd(MatmulAdd { .. }) => "matmul_add",
            Op::MatmulAddBackward(MatmulAddBackward { .. }) => "matmul_add_backward",
            Op::Attention(Attention { .. }) => "attention",
            Op::AttentionBackward(AttentionBackward { .. }) => "attention_backward",
            Op::FlashAttention(FlashAttention { .. }) => "flash_attention",
            Op::FlashAttentionBackward(FlashAttentionBackward { .. }) => "flash_attention_backward",
            Op::Gelu(Gelu { .. }) => "gelu",
            Op::GeluBackward(GeluBackward { .. }) => "gelu_backward",
            Op::Residual(Residual { .. }) => "residual",
            Op::ResidualBackward(ResidualBackward { .. }) => "residual_backward",
            Op::CrossEntropy(CrossEntropy { .. }) => "cross_entropy",
            Op::CrossEntropyBackward(CrossEntropyBackward { .. }) => "cross_entropy_backward",
            Op::CheckFinite(CheckFinite { .. }) => "check_finite",
            Op::AdamW(AdamW { .. }) => "adamw",
            Op::Sgd(Sgd { .. }) => "sgd",
            Op::AllReduce(AllReduce { .. }) => "all_reduce",
            Op::ReduceScatter(ReduceScatter { .. }) => "reduce_scatter",
            Op::AllGather(AllGather { .. }) => "all_gather",
            Op::CopyToHost(CopyToHost { .. }) => "copy_to_host",
            Op::CopyToDevice(CopyToDevice { .. }) => "copy_to_device",
            Op::KvWrite(KvWrite { .. }) => "kv_write",
            Op::CachedAttention(CachedAttention { .. }) => "cached_attention",
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
            Op::Zero(Zero { .. }) => 0,
            Op::Embedding(Embedding { out, .. }) => len(out),
            Op::EmbeddingBackward(EmbeddingBackward { dout, .. }) => len(dout),
            Op::LayerNorm(LayerNorm { out, .. }) => mul(&[8, len(out)]),
            Op::LayerNormBackward(LayerNormBackward { dout, .. }) => mul(&[14, len(dout)]),
            Op::Matmul(Matmul { rows, k, n, bias, .. }) => gemm(1, *rows, *k, *n, bias.is_some()),
            Op::MatmulBackward(MatmulBackward { rows, k, n, dbias, dweight, .. }) => {
                gemm(if dweight.is_some() { 2 } else { 1 }, *rows, *k, *n, dbias.is_some())
            }
            Op::MatmulAdd(MatmulAdd { rows, k, n, .. }) => gemm(1, *rows, *k, *n, true),
            Op::MatmulAddBackward(MatmulAddBackward { rows, k, n, .. }) => gemm(2, *rows, *k, *n, true),
            // QKᵀ and P·V (2·hs each per score) and the softmax (~5 per score).
            Op::Attention(Attention { .. }) => mul(&[scores, 4 * hs + 5]),
            // dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q and the softmax backward.
            Op::AttentionBackward(AttentionBackward { .. }) => mul(&[scores, 8 * hs + 4]),
            Op::FlashAttention(FlashAttention { .. }) => mul(&[scores, 4 * hs + 5]),
            // The scores recomputed (2·hs) on top of the standard backward.
            Op::FlashAttentionBackward(FlashAttentionBackward { .. }) => mul(&[scores, 10 * hs + 9]),
            Op::Gelu(Gelu { out, .. }) => mul(&[10, len(out)]),
            Op::GeluBackward(GeluBackward { dinp, .. }) => mul(&[14, len(dinp)]),
            Op::Residual(Residual { out, .. }) => len(out),
            Op::ResidualBackward(ResidualBackward { .. }) => 0,
            Op::CrossEntropy(CrossEntropy { logits, .. }) => mul(&[4, len(logits)]),
            Op::CrossEntropyBackward(CrossEntropyBackward { dlogits, .. }) => mul(&[2, len(dlogits)]),
            Op::CheckFinite(CheckFinite { grads, .. }) => len(grads),
            Op::AdamW(AdamW { params, .. }) => mul(&[12, len(params)]),
            Op::Sgd(Sgd { params, .. }) => mul(&[4, len(params)]),
            // The sum over the ranks: one add per element and rank (counted once, per rank).
            Op::AllReduce(AllReduce { data, .. }) => len(data),
            Op::ReduceScatter(ReduceScatter { data, .. }) => len(data),
            Op::AllGather(AllGather { .. }) => 0,
            Op::CopyToHost(CopyToHost { src, accumulate, .. }) => {
                if *accumulate {
                    len(src)
                } else {
                    0
                }
            }
            Op::CopyToDevice(CopyToDevice { .. }) => 0,
            Op::KvWrite(KvWrite { .. }) => 0,
            // Each new token against the whole of its request's table (an upper bound).
            Op::CachedAttention(CachedAttention { blocks, block_size, .. }) => {
                let keys = mul(&[blocks.len / b.max(1), *block_size as u64]);
                mul(&[b, nh, t, keys, 4 * hs + 5])
            }
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
