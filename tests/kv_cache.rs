//! The KV cache's ops (serving): writing new tokens' keys and values into their slots, and
//! attention over the cache through block tables — the WGSL kernels against their CPU twins,
//! and the twins against the standard causal attention and a plain softmax written out here.

mod common;

use common::{Case, compare};
use oomlab::model::{ModelConfig, StepShape};
use oomlab::plan::{Op, OptimizerConfig, op};

const TOL: f64 = 1e-4;

fn model(seq_len: usize, d_model: usize, n_heads: usize) -> ModelConfig {
    ModelConfig { vocab: 11, seq_len, d_model, n_layers: 1, n_heads }
}

/// Each request's table: `width` distinct blocks of a pool of `pool`, shuffled (paged).
fn tables(b: usize, width: usize, pool: usize, seed: u64) -> Vec<u32> {
    let mut free: Vec<u32> = (0..pool as u32).collect();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut out = Vec::new();
    for _ in 0..b * width {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let i = (state >> 33) as usize % free.len();
        out.push(free.swap_remove(i));
    }
    out
}

fn slot(table: &[u32], width: usize, bs: usize, bi: usize, pos: usize) -> u32 {
    table[bi * width + pos / bs] * bs as u32 + (pos % bs) as u32
}

#[test]
fn a_prompt_through_the_cache_attends_as_causal_attention_does() {
    // A prompt's forward (prefill): every token written to its slot in shuffled blocks, then
    // attention over the cache — the function the standard causal attention computes. T 13 and
    // 70: a last block part full, several 16-key tiles; head size 64: the largest.
    for &(b, t, c, nh, bs) in &[(2usize, 13usize, 12usize, 3usize, 4usize), (1, 70, 128, 2, 16), (3, 5, 8, 8, 1)] {
        let width = t.div_ceil(bs);
        let pool = b * width + 3;
        let mut case = Case::new(model(t, c, nh), StepShape { batch: b, seq: t }, (t * c) as u64);
        let qkv = case.input("qkv", &[b, t, 3 * c], 1.0);
        let table = tables(b, width, pool, t as u64);
        let slots: Vec<u32> =
            (0..b).flat_map(|bi| (0..t).map(move |p| (bi, p))).map(|(bi, p)| slot(&table, width, bs, bi, p)).collect();
        let slots = case.input_u32("slots", slots);
        let blocks = case.input_u32("blocks", table);
        let lens = case.input_u32("lens", vec![t as u32; b]);
        let cache = case.input("cache", &[pool * bs, 2 * c], 1.0);
        let att = case.output("att", &[b, nh, t, t]);
        let out_std = case.output("out_std", &[b, t, c]);
        let out = case.output("out", &[b, t, c]);
        case.op(Op::Attention(op::Attention { qkv, att, out: out_std, packing: None }));
        case.op(Op::KvWrite(op::KvWrite { qkv, slots, cache }));
        case.op(Op::CachedAttention(op::CachedAttention { qkv, cache, blocks, lens, out, block_size: bs }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("cached attention B{b} T{t} C{c} NH{nh} block {bs}");
        compare(&format!("{tag} cache"), &cpu, &gpu, cache, TOL);
        compare(&format!("{tag} output"), &cpu, &gpu, out, TOL);
        let (cached, standard) = (cpu.tensor(out.tensor), cpu.tensor(out_std.tensor));
        let err = common::rel_err(cached, standard);
        assert!(err < 1e-5, "{tag}: the cache's attention differs from causal attention by {err:.2e}");
    }
}

#[test]
fn a_decode_step_attends_over_each_requests_own_cached_tokens() {
    // One new token per request (T 1), requests of different lengths over one pool; the
    // cache's other slots hold noise the tables never point at.
    for &(c, nh, bs, lens) in &[(12, 3, 4, &[9u32, 5, 1][..]), (128, 2, 16, &[70, 33, 16])] {
        let b = lens.len();
        let width = 5;
        let pool = b * width + 2;
        let mut case = Case::new(model(80, c, nh), StepShape { batch: b, seq: 1 }, c as u64);
        let qkv = case.input("qkv", &[b, 1, 3 * c], 1.0);
        let table = tables(b, width, pool, c as u64);
        let slots: Vec<u32> = (0..b).map(|bi| slot(&table, width, bs, bi, lens[bi] as usize - 1)).collect();
        let slots = case.input_u32("slots", slots);
        let blocks = case.input_u32("blocks", table.clone());
        let lens_v = case.input_u32("lens", lens.to_vec());
        let cache = case.input("cache", &[pool * bs, 2 * c], 1.0);
        let out = case.output("out", &[b, 1, c]);
        case.op(Op::KvWrite(op::KvWrite { qkv, slots, cache }));
        case.op(Op::CachedAttention(op::CachedAttention { qkv, cache, blocks, lens: lens_v, out, block_size: bs }));
        let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
        let tag = format!("decode C{c} NH{nh} block {bs}");
        compare(&format!("{tag} output"), &cpu, &gpu, out, TOL);
        // The twin against a plain softmax over the request's positions.
        let (x, kv, o) = (cpu.tensor(qkv.tensor), cpu.tensor(cache.tensor), cpu.tensor(out.tensor));
        let hs = c / nh;
        for bi in 0..b {
            for h in 0..nh {
                let q = &x[bi * 3 * c + h * hs..][..hs];
                let positions = 0..lens[bi] as usize;
                let rows: Vec<usize> = positions.map(|p| slot(&table, width, bs, bi, p) as usize * 2 * c).collect();
                let scores: Vec<f64> = rows
                    .iter()
                    .map(|&r| {
                        q.iter().zip(&kv[r + h * hs..][..hs]).map(|(a, k)| (a * k) as f64).sum::<f64>()
                            / (hs as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for i in 0..hs {
                    let want: f64 =
                        rows.iter().zip(&weights).map(|(&r, w)| w * kv[r + c + h * hs + i] as f64).sum::<f64>() / total;
                    let got = o[bi * c + h * hs + i] as f64;
                    assert!(
                        (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                        "{tag} request {bi} head {h}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_decode_steps_tokens_take_the_positions_given() {
    // Three requests' new tokens at positions 9, 4 and 0 (their caches' lengths), and one past
    // the position table, which reads a zero row as a token past the vocabulary does.
    let (b, c, rows) = (4, 8, 12);
    let mut case = Case::new(model(rows, c, 2), StepShape { batch: b, seq: 1 }, 5);
    let tokens = case.input_u32("tokens", vec![3, 10, 0, 7]);
    let wte = case.input("wte", &[11, c], 1.0);
    let wpe = case.input("wpe", &[rows, c], 1.0);
    let positions = case.input_u32("positions", vec![9, 4, 0, rows as u32 + 5]);
    let out = case.output("out", &[b, 1, c]);
    case.op(Op::Embedding(op::Embedding { tokens, wte, wpe, out, packing: None, positions: Some(positions) }));
    let (cpu, gpu) = case.run(OptimizerConfig::default(), 1);
    compare("embedding at given positions", &cpu, &gpu, out, 0.0);
    let (e, p, o) = (cpu.tensor(wte.tensor), cpu.tensor(wpe.tensor), cpu.tensor(out.tensor));
    for (r, (tok, pos)) in [(3usize, Some(9usize)), (10, Some(4)), (0, Some(0)), (7, None)].into_iter().enumerate() {
        for i in 0..c {
            let want = e[tok * c + i] + pos.map_or(0.0, |pos| p[pos * c + i]);
            assert_eq!(o[r * c + i], want, "row {r}");
        }
    }
}
