//! The parameter count's formula for an architecture, in its family's symbols: what the
//! parameters line cites next to the count (which [`Architecture::parameters`] makes exactly).

use super::Architecture;
use super::block::{Block, Moe, Norm, Router};

impl Architecture {
    /// The parameter count's formula for this architecture's family, in its symbols (L layers,
    /// h hidden, f MLP width, V vocabulary, T positions, q = heads · head size, kv the key/value
    /// width, d the head size, E experts, f_s a shared expert's width): what the parameters line
    /// cites. GPT-2: 12Lh² + 13Lh + Vh + Th + 2h; LLaMA-2: L(4h² + 3hf + 2h) + 2Vh + h; with
    /// dense layers among a mixture's, L_e of the L with the mixture and L_d with an MLP of f_d.
    pub fn formula(&self) -> String {
        let b = &self.block;
        let ln = self.norm == Norm::LayerNorm;
        let mha = self.q_hidden() == self.hidden && self.kv_hidden() == self.hidden;
        let gpt2_shape = ln && mha && !self.mlp.gated() && self.ffn == 4 * self.hidden && self.biases;
        let (positions, vocab) =
            (if self.positions > 0 { " + Th" } else { "" }, if self.tied_embeddings { "Vh" } else { "2Vh" });
        let final_norm = if ln { "2h" } else { "h" };
        if gpt2_shape && b == &Block::default() {
            return format!("12Lh² + 13Lh + {vocab}{positions} + {final_norm}");
        }
        let attention = match b.mla {
            // Latent attention (r_q, r the query's and key/value latents' ranks, a the heads,
            // d_n, d_r, d_v a head's parts without and with RoPE and its value).
            Some(m) if m.q_rank > 0 => "hr_q + r_q + r_q·q + h(r + d_r) + r + r·a(d_n + d_v) + a·d_v·h".into(),
            Some(_) => "hq + h(r + d_r) + r + r·a(d_n + d_v) + a·d_v·h".into(),
            None if mha => "4h²".into(),
            None => "h(q + 2kv) + qh".into(),
        };
        let mut t: Vec<String> = vec![attention];
        if self.biases {
            t.push(if mha { "4h".into() } else { "q + 2kv + h".into() });
        } else if b.qkv_bias {
            t.push(if mha { "3h".into() } else { "q + 2kv".into() });
        }
        if b.sinks {
            t.push("a".into());
        }
        if b.qk_norm && b.qk_norm_whole {
            t.push(if ln { "2(q + kv)" } else { "q + kv" }.into());
        } else if b.qk_norm && !b.qk_norm_weightless {
            t.push(if ln { "4d" } else { "2d" }.into());
        }
        let (mats, mlp_bias) = if self.mlp.gated() { ("3hf", "2f + h") } else { ("2hf", "f + h") };
        match b.moe {
            None => {
                t.push(mats.into());
                if self.biases {
                    t.push(mlp_bias.into());
                }
            }
            Some(m) if self.dense_layer().is_none() => t.extend(Self::moe_terms(m, mats)),
            Some(_) => {}
        }
        let norms = (if b.sandwich_norms { 4 } else { 2 }) * if ln { 2 } else { 1 };
        // (OLMo 2's post norms are two, as a pre-norm block's.)
        t.push(format!("{norms}h"));
        let layers = format!("L({}) + {vocab}{positions} + {final_norm}", t.join(" + "));
        match b.moe {
            // Dense layers among the mixture's: L_e layers with it, L_d with a dense MLP of f_d.
            Some(m) if self.dense_layer().is_some() => {
                format!("{layers} + L_e({}) + L_d·3hf_d", Self::moe_terms(m, mats).join(" + "))
            }
            _ => layers,
        }
    }

    /// A mixture's terms of the formula: the experts and router, a shared expert (and its gate).
    fn moe_terms(m: Moe, mats: &str) -> Vec<String> {
        let mut t = vec![format!("E·{mats} + Eh")];
        if m.biases {
            // The experts' and the router's biases.
            t.push("E(2f + h) + E".into());
        }
        if m.shared_ffn > 0 {
            t.push(if m.router == Router::Softmax { "3hf_s + h" } else { "3hf_s" }.into());
        }
        t
    }
}
