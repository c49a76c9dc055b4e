//! What an MLP keeps for the backward pass: a dense one by its activation, and a mixture of
//! experts (router, token copies, experts, shared expert).

use super::saved::{HF_LINEAR, KORTHIKANTI, Part, Sizes};
use super::states::words;
use super::{Mlp, Moe, Router, Setup, Target};

const HF_GELU_NEW: &str = "NewGELUActivation.forward: 0.5 * x * (1 + tanh(√(2/π)(x + 0.044715 x³)))";
const HF_SWIGLU: &str = "LlamaMLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x))";
const HF_GELU: &str = "nn.GELU / GELUActivation: one op, keeps its input";
const HF_GEGLU: &str = "GemmaMLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x))";

/// A dense MLP of width `f` (over `rows` rows): what its activation keeps and the down
/// projection's input (if that projection trains), as transformers' modules save them (`hf`)
/// or as Korthikanti et al. count them.
pub(super) fn mlp_saved(s: &Setup, f: u128, hf: bool, add: &mut dyn FnMut(&'static str, &'static str, u128, Part)) {
    let z = Sizes::new(s);
    let trained = s.lora.is_none_or(|l| l.targets(Target::Mlp));
    let down = |bytes: u128| if trained { bytes } else { 0 };
    let n = z.sb * f;
    let (inner, source, down_key): (&[&'static str], _, _) = match (s.arch.mlp, hf) {
        (Mlp::Gelu, true) => (
            &[
                "saved-gelu-news-x-the-first-linears-output",
                "saved-gelu-news-tanh",
                "saved-gelu-news-0-5-x",
                "saved-gelu-news-1-tanh",
            ],
            HF_GELU_NEW,
            "saved-gelu-output-the-second-linears-input",
        ),
        (Mlp::Gelu | Mlp::TorchGelu, _) => (
            &["saved-gelu-input"],
            if hf { HF_GELU } else { KORTHIKANTI },
            "saved-gelu-output-the-second-linears-input",
        ),
        (Mlp::SwiGlu | Mlp::ClampedSwiGlu, _) => (
            &["saved-gate-projection-output-silus-input", "saved-silu-gate", "saved-up-projection-output"],
            if hf { HF_SWIGLU } else { KORTHIKANTI },
            "saved-silu-gate-up-the-down-projections-input",
        ),
        (Mlp::GeGlu, _) => (
            &["saved-gate-projection-output-gelus-input", "saved-gelu-gate", "saved-up-projection-output"],
            if hf { HF_GEGLU } else { KORTHIKANTI },
            "saved-gelu-gate-up-the-down-projections-input",
        ),
    };
    if !hf && s.arch.mlp.gated() {
        // Korthikanti's list: the gate's and up's outputs and the activation, as one entry.
        let key = if s.arch.mlp == Mlp::GeGlu {
            "saved-gate-and-up-outputs-gelu-gate"
        } else {
            "saved-gate-and-up-outputs-silu-gate"
        };
        add(key, source, 3 * z.tp(n, z.p), Part::AfterCore);
    } else {
        for &key in inner {
            add(key, source, z.tp(n, z.p), Part::AfterCore);
        }
    }
    let down_source = if hf { HF_LINEAR } else { KORTHIKANTI };
    add(down_key, down_source, down(z.tp(n, z.p)), Part::DownInput);
}

/// A mixture of experts in place of the MLP, over T = s·b tokens (dropless routing: every token
/// reaches its k experts; with expert parallelism, balanced, so each GPU's experts see T·k
/// token copies on average). The router's fp32 probabilities and top-k choice; the tokens
/// sorted and copied to their experts; each copy through a gated MLP of width f (gate and up
/// outputs, the activation, the down projection's input); the routing weights and the experts'
/// outputs for the weighted sum; a shared expert's MLP, its sigmoid gate and its output
/// (DeepSeek-V3's sigmoid router: the fp32 copies it scores in; its shared experts ungated).
pub(super) fn moe_saved(
    s: &Setup,
    m: Moe,
    add: &mut dyn FnMut(&'static str, &'static str, u128, Part),
    source: &'static str,
) {
    let z = Sizes::new(s);
    let (sb, h, p, f) = (z.sb, z.h, z.p, z.f);
    let (e, k) = (m.experts as u128, m.top_k as u128);
    let picked = sb * k;
    // Llama 4 in transformers' eager code runs every expert on every token.
    let all = m.router == Router::AllExperts;
    let copies = if all { sb * e } else { picked };
    if m.router == Router::Sigmoid && p != 4 {
        // DeepSeek-V3's router: F.linear(x.float(), weight.float()) keeps both fp32 copies (the
        // input's only if the router trains).
        let trained = s.lora.is_none_or(|l| l.targets(Target::Mlp));
        let input = if trained { words(sb * h, 4) } else { 0 };
        add("saved-router-input-and-weight-in-fp32", source, input + words(e * h, 4), Part::AfterCore);
    }
    match m.router {
        // gpt-oss: a softmax over the k picked logits, in the activations' dtype.
        Router::TopKSoftmax => add("saved-router-top-k-softmax", source, words(picked, p), Part::AfterCore),
        Router::Sigmoid | Router::AllExperts => {
            add("saved-router-scores-sigmoid-fp32", source, words(sb * e, 4), Part::AfterCore)
        }
        Router::Softmax => add("saved-router-probabilities-fp32", source, words(sb * e, 4), Part::AfterCore),
    }
    add("saved-router-top-k-indices-int64", source, words(picked, 8), Part::AfterCore);
    if m.renormalise {
        add("saved-router-top-k-weights-fp32", source, words(sb, 4) + words(picked, 4), Part::AfterCore);
    }
    if all {
        // Each token repeated once per expert and its score as a column (the product of the
        // two is the experts' input).
        let bytes = 2 * words(copies * h, p) + words(copies, p);
        add("saved-tokens-weighted-for-every-expert", source, bytes, Part::AfterCore);
    } else {
        // The experts' biases are gathered per token copy too: one more index list.
        let sorts = if m.biases { 4 } else { 3 };
        add("saved-expert-sort-indices", source, sorts * words(copies, 8) + words(e, 4), Part::AfterCore);
        add("saved-tokens-gathered-for-their-experts", source, words(copies * h, p), Part::AfterCore);
    }
    add("saved-expert-gate-and-up-outputs", source, 2 * z.tp(copies * f, p), Part::AfterCore);
    if s.arch.mlp == Mlp::ClampedSwiGlu {
        // The clamped gate and up, σ(α·gate), gate·σ, up + 1.
        add("saved-expert-clamped-swiglu", source, 4 * z.tp(copies * f, p), Part::AfterCore);
    } else {
        add("saved-expert-activation-gate", source, z.tp(copies * f, p), Part::AfterCore);
    }
    add("saved-expert-gate-up-the-down-projections-input", source, z.tp(copies * f, p), Part::DownInput);
    match m.router {
        Router::TopKSoftmax => {
            add("saved-routing-weights-in-the-activations-dtype", source, words(copies, p), Part::AfterCore)
        }
        Router::AllExperts => {}
        _ => add("saved-routing-weights", source, words(copies, 4), Part::AfterCore),
    }
    if !all {
        add("saved-expert-outputs-for-the-weighted-sum", source, words(copies * h, p), Part::AfterCore);
    }
    if m.shared_ffn > 0 {
        add("saved-shared-expert-mlp", source, 4 * z.tp(sb * m.shared_ffn as u128, p), Part::AfterCore);
        if m.router == Router::Softmax {
            add("saved-shared-expert-gate-and-output", source, words(sb, p) + words(sb * h, p), Part::AfterCore);
        }
    }
}
