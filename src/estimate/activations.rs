//! Saved activations tensor by tensor (Korthikanti et al. generalised), the logits and the
//! backward pass's working sets.

use super::mlp::{mlp_saved, moe_saved};
use super::saved::{HF_LINEAR, KORTHIKANTI, Part, Saved, Sizes};
use super::states::words;
use super::{Norm, Router, Runtime, Setup, Target};
use crate::plan::AttentionKind;

/// Sources of the fused (Megatron-style) profile's tensors.
const FLASH: &str = "Dao 2022 (FlashAttention): the row logsumexp";
/// Sources of the HF-eager profile's tensors: the transformers functions that save them.
const HF_LAYER_NORM: &str = "nn.LayerNorm → torch.native_layer_norm (input, mean, rstd)";
const HF_RMS_NORM: &str = "LlamaRMSNorm.forward: hidden_states.to(torch.float32), pow, rsqrt, weight * x";
const HF_ATTENTION: &str = "eager_attention_forward: torch.matmul keeps its operands";
const HF_ROPE: &str = "apply_rotary_pos_emb → repeat_kv → eager_attention_forward's torch.matmul";
const HF_SOFTMAX: &str = "eager_attention_forward: nn.functional.softmax";
const HF_DROPOUT: &str = "nn.functional.dropout → torch.native_dropout (CUDA: a bool mask)";
const HF_FP32_RMS_NORM: &str = "Olmo2RMSNorm.forward: (self.weight * hidden_states).to(input_dtype), in fp32";
const HF_SINKS: &str = "GptOssAttention's eager_attention_forward: cat(scores, sinks), minus the row max, softmax";
const HF_TEMPERATURE: &str = "Llama4TextAttention: query_states * attn_scales (attn_temperature_tuning)";
const HF_GEMMA_NORM: &str = "GemmaRMSNorm.forward: x.float(), rsqrt, output * (1.0 + self.weight.float())";
const HF_QK_NORM: &str = "Qwen3Attention / Gemma3Attention: q_norm and k_norm over each head";
const HF_SOFTCAP: &str = "Gemma2's eager_attention_forward: tanh(scores / softcap) * softcap";
pub(super) const HF_MOE: &str =
    "MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock: router softmax and top-k, grouped_mm experts";
const HF_MLA: &str = "DeepseekV3Attention: q_a_layernorm and kv_a_layernorm (DeepseekV3RMSNorm), q_b_proj and \
                      kv_b_proj keep their inputs";
const HF_MOE_SIGMOID: &str = "DeepseekV3TopkRouter / Glm4MoeTopkRouter: F.linear in fp32, sigmoid, grouped top-k; \
                              grouped_mm experts";
pub(super) const MEGATRON_MOE: &str =
    "Megatron-Core MoE: router, token permutation, grouped-GEMM experts, unpermutation";

/// The saved tensors of one layer on one GPU, by name, for the setup's runtime profile: what the
/// activations count per layer (LoRA's adapters aside), and what the app lists.
pub fn saved_per_layer(s: &Setup) -> Vec<Saved> {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, q, heads, kv, o, f, p, sb, .. } = z;
    let (tp, rep) = (|n, bytes| z.tp(n, bytes), |n, bytes| z.rep(n, bytes));
    let lora = s.lora;
    let trained = |target: Target| lora.is_none_or(|l| l.targets(target));
    let fused = s.attention == AttentionKind::Fused;
    let drop = a.dropout > 0.0;
    let hf = s.runtime() == Runtime::HfEager;
    let mut out = Vec::new();
    let mut add = |name, source, bytes: u128, part| {
        if bytes > 0 {
            out.push(Saved { key: name, source, bytes, part });
        }
    };
    let probs = heads * sq * sb;
    let kv_heads = kv / (q / heads).max(1);
    if hf {
        // A norm whose output a linear consumes (if `consumer`), as transformers' modules save
        // it; `input`: its input is not the block's input already saved (a parallel residual's
        // second norm reads the block's input).
        let norm =
            |add: &mut dyn FnMut(&'static str, &'static str, u128, Part), first: bool, input: bool, consumer: bool| {
                let rest = if first { Part::BeforeCore } else { Part::AfterCore };
                match a.norm {
                    Norm::LayerNorm => {
                        if input {
                            add(
                                "saved-layernorm-input",
                                HF_LAYER_NORM,
                                rep(sb * h, p),
                                if first { Part::BlockInput } else { Part::AfterCore },
                            );
                        }
                        add("saved-layernorm-mean-and-rstd-fp32-on-cuda", HF_LAYER_NORM, 2 * rep(sb, 4), rest);
                    }
                    Norm::RmsNorm | Norm::GemmaRmsNorm | Norm::Fp32RmsNorm => {
                        let gemma = a.norm == Norm::GemmaRmsNorm;
                        let source = match a.norm {
                            Norm::GemmaRmsNorm => HF_GEMMA_NORM,
                            Norm::Fp32RmsNorm => HF_FP32_RMS_NORM,
                            _ => HF_RMS_NORM,
                        };
                        // In fp32 the up-cast is the input itself.
                        let part = if first && p == 4 { Part::BlockInput } else { rest };
                        add("saved-rmsnorms-fp32-copy-of-its-input", source, rep(sb * h, 4), part);
                        add("saved-rmsnorms-rsqrt-fp32", source, rep(sb, 4), rest);
                        if gemma {
                            add("saved-gemma-rmsnorms-normalised-input-fp32", source, rep(sb * h, 4), rest);
                            add("saved-gemma-rmsnorms-scale-one-plus-weight-fp32", source, words(h, 4), rest);
                        } else if a.norm == Norm::Fp32RmsNorm {
                            add("saved-rmsnorms-normalised-input-fp32", source, rep(sb * h, 4), rest);
                        } else {
                            add(
                                "saved-rmsnorms-normalised-input-cast-back-for-the-weights-gradient",
                                source,
                                rep(sb * h, p),
                                rest,
                            );
                        }
                    }
                }
                if consumer {
                    add("saved-norm-output-the-next-linears-input", HF_LINEAR, rep(sb * h, p), rest);
                }
            };
        if a.block.post_norms {
            // No norm before the attention: the q/k/v projections keep the block's input.
            let bytes = if trained(Target::Qkv) { rep(sb * h, p) } else { 0 };
            add("saved-block-input-the-q-k-v-projections-input", HF_LINEAR, bytes, Part::BlockInput);
        } else {
            norm(&mut add, true, true, trained(Target::Qkv));
        }
        let rotary = a.positions == 0;
        if let Some(m) = a.block.mla {
            add("saved-latent-norms", HF_MLA, latent_norms(&z, m, true, trained(Target::Qkv)), Part::BeforeCore);
        }
        if a.block.qk_norm {
            // Each head's query and key through the architecture's norm (in fp32), or (OLMo 2)
            // the whole query and key: one statistic per row each.
            let rows = (q + kv) * sb;
            let (fp32, back) = match a.norm {
                // Llama 4's weightless norm: x.float() · rsqrt, nothing to cast back for a weight.
                _ if a.block.qk_norm_weightless => (tp(rows, 4), 0),
                Norm::GemmaRmsNorm => (2 * tp(rows, 4) + words(2 * (q / heads), 4), 0),
                Norm::Fp32RmsNorm => (tp(rows, 4), tp(rows, 4)),
                _ => (tp(rows, 4), tp(rows, p)),
            };
            let stats = if a.block.qk_norm_whole { tp(2 * sb, 4) } else { tp((heads + kv_heads) * sb, 4) };
            add("saved-query-and-key-norms-fp32", HF_QK_NORM, fp32 + stats, Part::BeforeCore);
            add("saved-query-and-key-norms-normalised", HF_QK_NORM, back, Part::BeforeCore);
        }
        if a.block.nope_temperature && a.block.nope_every == 1 {
            // Llama 4's layers without RoPE: the queries times a per-position temperature (fp32,
            // one per position, expanded over the batch), kept for the backward.
            add("saved-query-temperature-scales", HF_TEMPERATURE, words(sq, 4), Part::BeforeCore);
        }
        let qkv_source = if rotary { HF_ROPE } else { HF_ATTENTION };
        if fused {
            add("saved-query-key-value-full-heads", qkv_source, tp(sb * (2 * q + o), p), Part::BeforeCore);
            add("saved-row-logsumexp-fp32", FLASH, tp(heads * sb, 4), Part::Core);
        } else {
            // The matmuls keep contiguous copies; repeat_kv copies the key/value heads up to
            // the query heads under grouped-query attention.
            // GPT-2 at micro-batch 1: the query reaches the score matmul as a view of c_attn's
            // whole output (no copy needed), which that view keeps alive.
            if a.fused_qkv && !rotary && s.micro_batch == 1 {
                let name = "saved-query-a-view-keeping-c-attns-whole-output-micro-batch-1";
                add(name, qkv_source, tp(sb * (q + 2 * kv), p), Part::BeforeCore);
            } else {
                add("saved-query-as-the-score-matmul-keeps-it", qkv_source, tp(sb * q, p), Part::BeforeCore);
            }
            add(
                "saved-key-repeated-to-every-head-as-the-score-matmul-keeps-it",
                qkv_source,
                tp(sb * q, p),
                Part::BeforeCore,
            );
            add(
                "saved-value-repeated-to-every-head-as-the-output-matmul-keeps-it",
                qkv_source,
                tp(sb * o, p),
                Part::BeforeCore,
            );
            if a.block.softcap {
                add("saved-attention-scores-tanh-softcap", HF_SOFTCAP, tp(probs, p), Part::Core);
            }
            // LLaMA/Mistral take the softmax in fp32 and cast it back for the next matmul (Llama 4
            // in the activations' dtype).
            let soft = if rotary && !a.block.low_precision_softmax { 4 } else { p };
            if a.block.sinks {
                // gpt-oss: each row's max is subtracted (its indices kept), then a softmax over
                // the s scores and the head's sink, in the activations' dtype; the output matmul
                // reads a view of it without the sink column.
                let with_sink = tp(heads * (sq + 1) * sb, p);
                add("saved-row-max-indices-int64", HF_SINKS, tp(heads * sb, 8), Part::Core);
                add("saved-attention-probabilities-with-the-sink", HF_SINKS, with_sink, Part::Core);
            } else {
                add("saved-attention-probabilities-softmax-output", HF_SOFTMAX, tp(probs, soft), Part::Core);
            }
            if drop {
                add("saved-attention-dropout-mask", HF_DROPOUT, tp(probs, 1), Part::Core);
                add("saved-dropped-probabilities-the-output-matmuls-input", HF_DROPOUT, tp(probs, p), Part::Core);
            } else if soft != p && !a.block.sinks {
                add("saved-probabilities-cast-back-the-output-matmuls-input", HF_SOFTMAX, tp(probs, p), Part::Core);
            }
        }
        add(
            "saved-attention-output-the-output-projections-input",
            HF_LINEAR,
            if trained(Target::Proj) || fused { tp(sb * o, p) } else { 0 },
            Part::AfterCore,
        );
        if drop {
            add("saved-residual-dropout-mask", HF_DROPOUT, rep(sb * h, 1), Part::AfterCore);
        }
        // Gemma 2/3's norms on the attention's and the MLP's outputs: their input copies, rsqrt,
        // normalised input and scale, two per block; OLMo 2's (RMSNorm): input copies, rsqrt,
        // normalised input cast back. No linear reads them.
        let sandwich = match a.norm {
            Norm::GemmaRmsNorm => 2 * (2 * rep(sb * h, 4) + rep(sb, 4) + words(h, 4)),
            Norm::Fp32RmsNorm => 2 * (2 * rep(sb * h, 4) + rep(sb, 4)),
            _ => 2 * (rep(sb * h, 4) + rep(sb, 4) + rep(sb * h, p)),
        };
        if a.block.sandwich_norms || a.block.post_norms {
            let source = match a.norm {
                Norm::GemmaRmsNorm => HF_GEMMA_NORM,
                Norm::Fp32RmsNorm => HF_FP32_RMS_NORM,
                _ => HF_RMS_NORM,
            };
            add("saved-sandwich-norms", source, sandwich, Part::AfterCore);
        }
        if a.block.post_norms {
            // The MLP reads the residual sum itself.
            let bytes = if trained(Target::Mlp) { rep(sb * h, p) } else { 0 };
            add("saved-residual-sum-the-mlps-input", HF_LINEAR, bytes, Part::AfterCore);
        } else {
            norm(&mut add, false, !a.block.parallel_residual, trained(Target::Mlp));
        }
        if let Some(m) = a.block.moe {
            moe_saved(s, m, &mut add, if m.router == Router::Sigmoid { HF_MOE_SIGMOID } else { HF_MOE });
        } else {
            mlp_saved(s, f, true, &mut add);
        }
        if drop {
            add("saved-mlp-dropout-mask", HF_DROPOUT, rep(sb * h, 1), Part::AfterCore);
        }
        return out;
    }
    let stats = if a.norm == Norm::LayerNorm { 2 } else { 1 };
    let if_ = |c: bool, v: u128| if c { v } else { 0 };
    let post = a.block.post_norms;
    if post {
        add("saved-block-input-the-q-k-v-projections-input", KORTHIKANTI, rep(sb * h, p), Part::BlockInput);
    } else {
        add("saved-norm-input-the-blocks-input", KORTHIKANTI, rep(sb * h, p), Part::BlockInput);
        add("saved-norm-statistics-fp32", KORTHIKANTI, stats * rep(sb, 4), Part::BeforeCore);
        add(
            "saved-norm-output-the-q-k-v-projections-input",
            KORTHIKANTI,
            if_(trained(Target::Qkv), rep(sb * h, p)),
            Part::BeforeCore,
        );
    }
    if let Some(m) = a.block.mla {
        add("saved-latent-norms", KORTHIKANTI, latent_norms(&z, m, false, trained(Target::Qkv)), Part::BeforeCore);
    }
    if a.block.qk_norm {
        // Each head's (or the whole query's and key's) norm keeps its input and its statistics.
        let rows = if a.block.qk_norm_whole { 2 } else { heads + kv_heads };
        let fp32 = tp(rows * sb, 4) * stats;
        add("saved-query-and-key-norms-fp32", KORTHIKANTI, fp32, Part::BeforeCore);
        add("saved-query-and-key-norms-normalised", KORTHIKANTI, tp(sb * (q + kv), p), Part::BeforeCore);
    }
    let qkv = if a.fused_qkv { tp(sb * (q + 2 * kv), p) } else { tp(sb * q, p) + tp(sb * kv, p) + tp(sb * z.v, p) };
    add("saved-query-key-value", KORTHIKANTI, qkv, Part::BeforeCore);
    if fused {
        add("saved-row-logsumexp-fp32", FLASH, tp(heads * sb, 4), Part::Core);
    } else {
        add("saved-attention-scores-tanh-softcap", KORTHIKANTI, if_(a.block.softcap, tp(probs, p)), Part::Core);
        add("saved-attention-probabilities-softmax-output", KORTHIKANTI, tp(probs, p), Part::Core);
        add("saved-attention-dropout-mask", KORTHIKANTI, if_(drop, tp(probs, 1)), Part::Core);
        add("saved-dropped-probabilities", KORTHIKANTI, if_(drop, tp(probs, p)), Part::Core);
    }
    add(
        "saved-attention-output-the-output-projections-input",
        KORTHIKANTI,
        if_(trained(Target::Proj) || fused, tp(sb * o, p)),
        Part::AfterCore,
    );
    add("saved-residual-dropout-mask", KORTHIKANTI, if_(drop, rep(sb * h, 1)), Part::AfterCore);
    let sandwich = 2 * (rep(sb * h, p) + stats * rep(sb, 4));
    add("saved-sandwich-norms", KORTHIKANTI, if_(a.block.sandwich_norms || post, sandwich), Part::AfterCore);
    if post {
        let bytes = if_(trained(Target::Mlp), rep(sb * h, p));
        add("saved-residual-sum-the-mlps-input", KORTHIKANTI, bytes, Part::AfterCore);
    } else {
        add(
            "saved-second-norms-input-the-residual-sum",
            KORTHIKANTI,
            if_(!a.block.parallel_residual, rep(sb * h, p)),
            Part::AfterCore,
        );
        add("saved-norm-statistics-fp32", KORTHIKANTI, stats * rep(sb, 4), Part::AfterCore);
        let bytes = if_(trained(Target::Mlp), rep(sb * h, p));
        add("saved-norm-output-the-mlps-input", KORTHIKANTI, bytes, Part::AfterCore);
    }
    if let Some(m) = a.block.moe {
        moe_saved(s, m, &mut add, MEGATRON_MOE);
    } else {
        mlp_saved(s, f, false, &mut add);
    }
    add("saved-mlp-dropout-mask", KORTHIKANTI, if_(drop, rep(sb * h, 1)), Part::AfterCore);
    out
}

/// Latent attention's RMSNorms over the query's latent (if it has one) and the key/value latent:
/// as transformers' `DeepseekV3RMSNorm` saves them (`hf`: the fp32 copy of its input, which in
/// fp32 is a view of the whole down projection's output, the key/value one with the rotary key;
/// rsqrt; the normalised input cast back), or as Korthikanti et al. count a norm (input,
/// statistics); with the output the up projection reads (if it trains). Not split over tensor
/// parallelism: the latents are each GPU's whole.
fn latent_norms(z: &Sizes, m: super::block::Mla, hf: bool, trained: bool) -> u128 {
    let (sb, p) = (z.sb, z.p);
    let norm = |width: u128, whole: u128| {
        let input = if !hf {
            words(sb * width, p)
        } else if p == 4 {
            words(sb * whole, 4)
        } else {
            words(sb * width, 4)
        };
        let normalised = if hf { words(sb * width, p) } else { 0 };
        let output = if trained { words(sb * width, p) } else { 0 };
        input + words(sb, 4) + normalised + output
    };
    let q = if m.q_rank > 0 { norm(m.q_rank as u128, m.q_rank as u128) } else { 0 };
    q + norm(m.kv_rank as u128, (m.kv_rank + m.rope_dim) as u128)
}

/// What the model keeps outside its layers: the embedding dropout mask, the final norm's saved
/// tensors (on the last block's output), the lm_head's input, and (HF eager, rotary) the cos/sin
/// tables the layers share.
/// A pipeline stage keeps only its own: the first the embedding's, the last the final norm's and
/// the lm_head's; each its rotary tables.
pub fn saved_outside(s: &Setup) -> Vec<Saved> {
    let mut out = without_mtp(s);
    let a = &s.arch;
    if a.block.mtp > 0 && a.stage.is_none_or(|st| st.head) {
        // Each module: its two input norms (as RMSNorm keeps them), the concatenation eh_proj
        // reads, a block like the last layer's, its final norm and the head's input.
        let z = Sizes::new(s);
        let (sb, h, p) = (z.sb, z.h, z.p);
        let norm = z.rep(sb * h, 4) + z.rep(sb, 4) + z.rep(sb * h, p);
        let last = Setup { arch: a.of_kind(a.layer_kind(a.layers.saturating_sub(1))), ..s.clone() };
        let block: u128 = saved_per_layer(&last).iter().map(|t| t.bytes).sum();
        let module = 3 * norm + z.rep(sb * 2 * h, p) + block + z.rep(sb * h, p);
        let source = "DeepSeek-V3's multi-token-prediction module (Liu et al. 2024, §2.2), not in transformers";
        out.push(Saved {
            key: "saved-multi-token-prediction",
            source,
            bytes: a.block.mtp as u128 * module,
            part: Part::AfterCore,
        });
    }
    out
}

/// Where a tensor outside the layers lives under pipelining.
enum Place {
    Embedding,
    Head,
    Every,
}

fn without_mtp(s: &Setup) -> Vec<Saved> {
    let a = &s.arch;
    let z = Sizes::new(s);
    let Sizes { sq, h, p, sb, .. } = z;
    let rep = |n, bytes| z.rep(n, bytes);
    let rotary_dims = if a.block.rotary_dims > 0 { a.block.rotary_dims } else { a.head_dim() } as u128;
    let drop = a.dropout > 0.0;
    let lm_head = s.lora.is_none();
    let mut out = Vec::new();
    // What the stage holds: the embedding's tensors on the first, the head's on the last, the
    // rotary tables on each.
    let (first, last) = a.stage.map_or((true, true), |st| (st.embedding, st.head));
    let mut add = |place: Place, name, source, bytes: u128| {
        let here = match place {
            Place::Embedding => first,
            Place::Head => last,
            Place::Every => true,
        };
        if bytes > 0 && here {
            out.push(Saved { key: name, source, bytes, part: Part::AfterCore });
        }
    };
    if drop {
        let source = if s.runtime() == Runtime::HfEager { HF_DROPOUT } else { KORTHIKANTI };
        add(Place::Embedding, "saved-embedding-dropout-mask", source, rep(sb * h, 1));
    }
    if s.runtime() == Runtime::HfEager {
        match a.norm {
            Norm::LayerNorm => {
                add(Place::Head, "saved-final-layernorm-input", HF_LAYER_NORM, rep(sb * h, p));
                add(Place::Head, "saved-final-layernorm-mean-and-rstd", HF_LAYER_NORM, 2 * rep(sb, 4));
            }
            Norm::RmsNorm => {
                add(Place::Head, "saved-final-rmsnorms-fp32-copy-of-its-input", HF_RMS_NORM, rep(sb * h, 4));
                add(Place::Head, "saved-final-rmsnorms-rsqrt", HF_RMS_NORM, rep(sb, 4));
                add(Place::Head, "saved-final-rmsnorms-normalised-input-cast-back", HF_RMS_NORM, rep(sb * h, p));
            }
            Norm::GemmaRmsNorm => {
                let bytes = 2 * rep(sb * h, 4) + rep(sb, 4) + words(h, 4);
                add(Place::Head, "saved-final-norm-gemma", HF_GEMMA_NORM, bytes);
            }
            Norm::Fp32RmsNorm => {
                add(Place::Head, "saved-final-rmsnorms-fp32-copy-of-its-input", HF_FP32_RMS_NORM, rep(sb * h, 4));
                add(Place::Head, "saved-final-rmsnorms-rsqrt", HF_FP32_RMS_NORM, rep(sb, 4));
                add(Place::Head, "saved-final-rmsnorms-normalised-input-fp32", HF_FP32_RMS_NORM, rep(sb * h, 4));
            }
        }
        if lm_head {
            add(Place::Head, "saved-final-norm-output-lm-heads-input", HF_LINEAR, rep(sb * h, p));
        }
        if a.positions == 0 {
            // LlamaRotaryEmbedding's cos and sin, (1, s, head_dim) each, shared by the layers.
            let bytes = if a.block.fp32_rope { 4 } else { p };
            add(
                Place::Every,
                "saved-rotary-cos-and-sin-tables",
                "LlamaRotaryEmbedding.forward",
                2 * words(sq * rotary_dims, bytes),
            );
        } else {
            add(
                Place::Embedding,
                "saved-position-ids-the-position-embeddings-indices-int64",
                "nn.Embedding keeps its indices",
                words(sq, 8),
            );
        }
        return out;
    }
    let stats = if a.norm == Norm::LayerNorm { 2 } else { 1 };
    add(Place::Head, "saved-final-norm-input-the-last-blocks-output", KORTHIKANTI, rep(sb * h, p));
    add(Place::Head, "saved-final-norm-statistics-fp32", KORTHIKANTI, stats * rep(sb, 4));
    if lm_head {
        add(Place::Head, "saved-final-norm-output-lm-heads-input", KORTHIKANTI, rep(sb * h, p));
    }
    out
}
