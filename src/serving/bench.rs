//! Decode speed: tokens per second of the toy's decode steps over its KV cache, at a batch —
//! what `oomlab bench --decode` sets beside PyTorch's eager decode with transformers' cache.

use std::time::Instant;

use super::runner::{Runner, StepInputs, greedy};
use super::{ServingError, SpaceShape};
use crate::backend::{BackendKind, Gpu};
use crate::memory::Budget;
use crate::model::ModelConfig;
use crate::plan::Precision;

/// One batch's decode rate.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DecodeRate {
    pub batch: usize,
    pub decode_tokens_per_sec: f64,
    pub ms_per_step: f64,
}

/// `batch` requests of `prompt` random-free tokens (token ids 0, 1, …), each prefilled, then
/// `steps` decode steps of one token per request, timed: the best of `repeats`. The cache is
/// each request's consecutive blocks of 16 (the layout never changes the math or the work).
pub async fn decode_rate(
    kind: BackendKind,
    gpu: Option<&Gpu>,
    model: &ModelConfig,
    (batch, prompt, steps, repeats): (usize, usize, usize, usize),
) -> Result<DecodeRate, ServingError> {
    let bs = 16;
    let per = (prompt + steps).div_ceil(bs);
    let space = SpaceShape { block_size: bs, blocks: batch * per, table_width: model.seq_len.div_ceil(bs) };
    let mut runner = Runner::open(kind, gpu, model, Precision::Fp32, space, 0, Budget::Unlimited).await?;
    let table = |r: usize| -> Vec<u32> {
        let mut t: Vec<u32> = (r * per..(r + 1) * per).map(|b| b as u32).collect();
        t.resize(space.table_width, 0);
        t
    };
    let slot = |r: usize, p: usize| ((r * per + p / bs) * bs + p % bs) as u32;
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let mut next = Vec::with_capacity(batch);
        for r in 0..batch {
            let tokens: Vec<u32> = (0..prompt).map(|i| ((i + r) % model.vocab) as u32).collect();
            let inputs = StepInputs {
                requests: 1,
                new_tokens: prompt,
                positions: (0..prompt as u32).collect(),
                slots: (0..prompt).map(|p| slot(r, p)).collect(),
                tables: table(r),
                lens: vec![prompt as u32],
                tokens,
            };
            next.extend(greedy(&runner.step(&inputs).await?, model.vocab));
        }
        let start = Instant::now();
        for s in 0..steps {
            let pos = prompt + s;
            let inputs = StepInputs {
                requests: batch,
                new_tokens: 1,
                tokens: next.clone(),
                positions: vec![pos as u32; batch],
                slots: (0..batch).map(|r| slot(r, pos)).collect(),
                tables: (0..batch).flat_map(table).collect(),
                lens: vec![pos as u32 + 1; batch],
            };
            next = greedy(&runner.step(&inputs).await?, model.vocab);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let best = best.max(1e-9);
    Ok(DecodeRate {
        batch,
        decode_tokens_per_sec: (batch * steps) as f64 / best,
        ms_per_step: 1e3 * best / steps.max(1) as f64,
    })
}
