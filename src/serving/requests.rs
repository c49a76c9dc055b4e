//! A stream of requests: prompts cut from the corpus, and lengths mixed as chat traces mix them.
//!
//! vLLM's paper (Kwon et al., SOSP 2023, §6.1) serves ShareGPT's conversations: prompts of
//! 161.31 tokens on average, outputs of 337.99, both long-tailed, for OPT's 2,048-token
//! context. The toy's context is shorter, so the mix is scaled by `context / 2048`. Each length
//! is drawn from a log-normal of that mean, clamped to the context. The output length is what
//! the request generates before it stops, as a benchmark's `ignore_eos` requests do; the server
//! learns it only when the request ends.

use crate::data::Dataset;
use crate::model::init::Rng;

/// ShareGPT's mean prompt and output lengths in tokens (the PagedAttention paper, Fig. 11a).
pub const SHAREGPT_MEAN_PROMPT: f64 = 161.31;
pub const SHAREGPT_MEAN_OUTPUT: f64 = 337.99;
/// The context those lengths were drawn for (OPT's).
pub const SHAREGPT_CONTEXT: f64 = 2048.0;
/// The log-normal's spread: about half the requests within ×0.6 and ×1.7 of the median.
const SIGMA: f64 = 0.8;

/// One request: its prompt and how many tokens it will generate.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Request {
    pub id: u64,
    pub prompt: Vec<u32>,
    pub output_len: usize,
}

/// `n` requests for a model of `context` tokens, drawn from `seed`: the same seed always gives
/// the same requests. Every request fits the context (prompt + output ≤ context) and has at
/// least one prompt token and one output token.
pub fn draw(data: &Dataset, n: usize, context: usize, seed: u64) -> Vec<Request> {
    let mut rng = Rng::new(seed ^ 0x5e2f_1a7e);
    let scale = context as f64 / SHAREGPT_CONTEXT;
    let corpus = data.tokens.len();
    (0..n as u64)
        .map(|id| {
            // Half the context at most, and never past the corpus (a context far longer than
            // the text still gets whole prompts).
            let max_prompt = (context / 2).min(corpus.saturating_sub(1)).max(1);
            let prompt_len = lognormal(&mut rng, SHAREGPT_MEAN_PROMPT * scale).clamp(1, max_prompt);
            let room = context.saturating_sub(prompt_len).max(1);
            let output_len = lognormal(&mut rng, SHAREGPT_MEAN_OUTPUT * scale).clamp(1, room);
            let start = rng.below(corpus.saturating_sub(prompt_len).max(1));
            let prompt = data.tokens.get(start..start + prompt_len).map(<[u32]>::to_vec).unwrap_or_default();
            Request { id, prompt, output_len }
        })
        .collect()
}

/// A whole number drawn from a log-normal of mean `mean`.
fn lognormal(rng: &mut Rng, mean: f64) -> usize {
    let mu = mean.max(1.0).ln() - SIGMA * SIGMA / 2.0;
    (mu + SIGMA * rng.normal()).exp().round() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_seeded_fits_the_context_and_keeps_the_traces_means() {
        let data = Dataset::builtin();
        let a = draw(&data, 2000, 1024, 7);
        assert_eq!(a, draw(&data, 2000, 1024, 7), "the same seed, the same requests");
        assert_ne!(a, draw(&data, 2000, 1024, 8));
        for r in &a {
            assert!(!r.prompt.is_empty() && r.output_len >= 1 && r.prompt.len() + r.output_len <= 1024, "{r:?}");
        }
        let mean = |f: &dyn Fn(&Request) -> usize| a.iter().map(f).sum::<usize>() as f64 / a.len() as f64;
        // Scaled by 1024 / 2048; the clamps trim the tails a little.
        let (p, o) = (mean(&|r| r.prompt.len()), mean(&|r| r.output_len));
        assert!((p - 80.7).abs() < 8.0, "prompts {p}");
        assert!((o - 169.0).abs() < 17.0, "outputs {o}");
        // A context longer than the corpus: prompts are cut from it whole, never empty.
        for r in draw(&data, 50, 1 << 20, 3) {
            assert!(!r.prompt.is_empty() && r.prompt.len() < data.tokens.len(), "{}", r.prompt.len());
        }
    }
}
