//! The CPU twins of attention: the standard path (scores and probabilities materialised) and
//! the fused one (an online softmax over tiles of keys). With packed rows a query sees only its
//! own document's keys (`starts`, each position's document start; empty: no packing).

use super::gemm::{Mat, gemm};
use super::ops::{Heads, Real, per_batch};

/// The first key query `t1` of batch row `bi` sees: its document's start in packed rows, else 0.
fn first_key(starts: &[u32], bi: usize, t: usize, t1: usize) -> usize {
    starts.get(bi * t + t1).map_or(0, |&s| (s as usize).min(t1))
}

/// Causal self-attention. qkv (B,T,3C) holds Q, K, V side by side; att (B,NH,T,T) receives the
/// softmax probabilities (zero above the diagonal); out (B,T,C). Per batch and head: S = QKᵀ·scale
/// and O = PV as products over strided views of the QKV rows (the masked half of S is computed
/// and overwritten: a product is cheaper than skipping it), batches in parallel.
/// With packed rows (`starts` not empty) a query sees only the keys of its own document.
pub fn attention_forward<F: Real>(out: &mut [F], att: &mut [F], qkv: &[F], h: Heads, starts: &[u32]) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    per_batch(b, (out, t * c), (att, nh * t * t), |bi, out, att| {
        let qkv = &qkv[bi * t * 3 * c..][..t * 3 * c];
        let part = |p: usize, h: usize| Mat::strided(p * c + h * hs, t, hs, 3 * c);
        for h in 0..nh {
            let p = Mat { offset: h * t * t, ..Mat::dense(t, t) };
            gemm(scale, (qkv, part(0, h)), (qkv, part(1, h).t()), F::zero(), (&mut *att, p));
            for t1 in 0..t {
                let row = &mut att[h * t * t + t1 * t..][..t];
                let lo = first_key(starts, bi, t, t1);
                let (before, row) = row.split_at_mut(lo);
                before.fill(F::zero());
                let (live, masked) = row.split_at_mut(t1 + 1 - lo);
                let max = live.iter().fold(F::neg_infinity(), |m, &x| m.max(x));
                let mut sum = F::zero();
                for x in live.iter_mut() {
                    *x = (*x - max).exp();
                    sum = sum + *x;
                }
                live.iter_mut().for_each(|x| *x = *x / sum);
                masked.fill(F::zero());
            }
            gemm(F::one(), (&*att, p), (qkv, part(2, h)), F::zero(), (&mut *out, Mat::strided(h * hs, t, hs, c)));
        }
    });
}

/// dqkv (B,T,3C) given dout (B,T,C); `datt` (B,NH,T,T) is scratch. Per batch and head, as
/// products: dP = dO·Vᵀ, dV = Pᵀ·dO, dS = P ⊙ (dP − rowsum(P ⊙ dP)), dQ = dS·K·scale,
/// dK = dSᵀ·Q·scale; batches in parallel.
pub fn attention_backward<F: Real>(dqkv: &mut [F], datt: &mut [F], dout: &[F], qkv: &[F], att: &[F], h: Heads) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    dqkv.iter_mut().for_each(|x| *x = F::zero());
    per_batch(b, (dqkv, t * 3 * c), (datt, nh * t * t), |bi, dqkv, datt| {
        let qkv = &qkv[bi * t * 3 * c..][..t * 3 * c];
        let att = &att[bi * nh * t * t..][..nh * t * t];
        let dout = &dout[bi * t * c..][..t * c];
        let part = |p: usize, h: usize| Mat::strided(p * c + h * hs, t, hs, 3 * c);
        for h in 0..nh {
            let p = Mat { offset: h * t * t, ..Mat::dense(t, t) };
            let d_o = Mat::strided(h * hs, t, hs, c);
            gemm(F::one(), (dout, d_o), (qkv, part(2, h).t()), F::zero(), (&mut *datt, p));
            gemm(F::one(), (att, p.t()), (dout, d_o), F::zero(), (&mut *dqkv, part(2, h)));
            for t1 in 0..t {
                let prow = &att[h * t * t + t1 * t..][..t];
                let drow = &mut datt[h * t * t + t1 * t..][..t];
                let dot = prow.iter().zip(drow.iter()).fold(F::zero(), |acc, (&a, &d)| acc + a * d);
                for (d, &a) in drow.iter_mut().zip(prow) {
                    *d = a * (*d - dot);
                }
            }
            gemm(scale, (&*datt, p), (qkv, part(1, h)), F::zero(), (&mut *dqkv, part(0, h)));
            gemm(scale, (&*datt, p.t()), (qkv, part(0, h)), F::zero(), (&mut *dqkv, part(1, h)));
        }
    });
}

/// Keys per tile of the fused attention's online softmax (`KT` in flash_attention.wgsl).
const FLASH_KEY_TILE: usize = 16;

/// Fused causal attention: out (B,T,C) and lse (B,NH,T), the logsumexp of each row of scaled
/// scores, by an online softmax over tiles of keys (running max, running sum, rescaled
/// accumulator), as the kernel computes it. No T×T matrix is formed.
/// With packed rows a query's keys start at its document's start.
pub fn flash_attention_forward<F: Real>(out: &mut [F], lse: &mut [F], qkv: &[F], h: Heads, starts: &[u32]) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    per_batch(b, (out, t * c), (lse, nh * t), |bi, out, lse| {
        let mut acc = vec![F::zero(); hs];
        for h in 0..nh {
            let at = |row: usize, part: usize| (bi * t + row) * 3 * c + part * c + h * hs;
            for t1 in 0..t {
                let q = &qkv[at(t1, 0)..][..hs];
                acc.iter_mut().for_each(|a| *a = F::zero());
                let (mut m, mut l) = (F::neg_infinity(), F::zero());
                // Tiles at multiples of the tile size, as the kernel's; a document's first tile
                // skips the keys before its start.
                let lo = first_key(starts, bi, t, t1);
                for tile in (lo - lo % FLASH_KEY_TILE..=t1).step_by(FLASH_KEY_TILE) {
                    let (start, end) = (tile.max(lo), (tile + FLASH_KEY_TILE).min(t1 + 1));
                    let s: Vec<F> = (start..end)
                        .map(|t2| {
                            q.iter().zip(&qkv[at(t2, 1)..][..hs]).fold(F::zero(), |a, (&x, &y)| a + x * y) * scale
                        })
                        .collect();
                    let mt = s.iter().fold(m, |a, &x| a.max(x));
                    let corr = if m == F::neg_infinity() { F::zero() } else { (m - mt).exp() };
                    l = l * corr;
                    acc.iter_mut().for_each(|a| *a = *a * corr);
                    for (j, &sj) in s.iter().enumerate() {
                        let e = (sj - mt).exp();
                        l = l + e;
                        let v = &qkv[at(start + j, 2)..][..hs];
                        for (a, &vi) in acc.iter_mut().zip(v) {
                            *a = *a + e * vi;
                        }
                    }
                    m = mt;
                }
                for (i, a) in acc.iter().enumerate() {
                    out[t1 * c + h * hs + i] = *a / l;
                }
                lse[h * t + t1] = m + l.ln();
            }
        }
    });
}

/// dqkv (B,T,3C) of fused attention given dout, recomputing each probability as
/// exp(score − lse); `delta` (B,NH,T) receives rowsum(dout∘out). Every element of dqkv is set.
pub fn flash_attention_backward<F: Real>(
    dqkv: &mut [F],
    delta: &mut [F],
    dout: &[F],
    (qkv, out, lse): (&[F], &[F], &[F]),
    h: Heads,
    starts: &[u32],
) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    dqkv.iter_mut().for_each(|x| *x = F::zero());
    per_batch(b, (dqkv, t * 3 * c), (delta, nh * t), |bi, dqkv, delta| {
        for h in 0..nh {
            // `at` indexes this batch's dqkv, `at + qkv0` the whole qkv.
            let qkv0 = bi * t * 3 * c;
            let at = |row: usize, part: usize| row * 3 * c + part * c + h * hs;
            let o = |row: usize| (bi * t + row) * c + h * hs;
            for t1 in 0..t {
                let row = (bi * nh + h) * t + t1;
                let d = (0..hs).fold(F::zero(), |a, i| a + dout[o(t1) + i] * out[o(t1) + i]);
                delta[h * t + t1] = d;
                for t2 in first_key(starts, bi, t, t1)..=t1 {
                    let (mut s, mut dp) = (F::zero(), F::zero());
                    for i in 0..hs {
                        s = s + qkv[qkv0 + at(t1, 0) + i] * qkv[qkv0 + at(t2, 1) + i];
                        dp = dp + dout[o(t1) + i] * qkv[qkv0 + at(t2, 2) + i];
                    }
                    let p = (s * scale - lse[row]).exp();
                    let ds = p * (dp - d) * scale;
                    for i in 0..hs {
                        dqkv[at(t1, 0) + i] = dqkv[at(t1, 0) + i] + ds * qkv[qkv0 + at(t2, 1) + i];
                        dqkv[at(t2, 1) + i] = dqkv[at(t2, 1) + i] + ds * qkv[qkv0 + at(t1, 0) + i];
                        dqkv[at(t2, 2) + i] = dqkv[at(t2, 2) + i] + p * dout[o(t1) + i];
                    }
                }
            }
        }
    });
}

/// [`crate::plan::op::KvWrite`]'s twin: each new token's K and V (qkv (B·T rows of 3C)) into its
/// slot of the cache (slots of 2C: K, then V).
pub fn kv_write<F: Real>(cache: &mut [F], qkv: &[F], slots: &[u32], c: usize) {
    for (row, &slot) in qkv.chunks_exact(3 * c).zip(slots) {
        let at = (slot as usize).checked_mul(2 * c);
        if let Some(dst) = at.and_then(|at| cache.get_mut(at..)).and_then(|d| d.get_mut(..2 * c)) {
            dst.copy_from_slice(&row[c..3 * c]);
        }
    }
}

/// [`crate::plan::op::CachedAttention`]'s twin: each new token's query over its request's cached
/// keys and values up to its own position, read through the block table; an online softmax (no
/// scores kept). out (B,T,C).
pub fn cached_attention<F: Real>(
    out: &mut [F],
    qkv: &[F],
    cache: &[F],
    (blocks, lens): (&[u32], &[u32]),
    h: Heads,
    block_size: usize,
) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    let width = blocks.len() / b.max(1);
    let bs = block_size.max(1);
    let zero = F::zero();
    for bi in 0..b {
        let table = &blocks[bi * width..][..width];
        let len = lens.get(bi).map_or(0, |&l| l as usize);
        for t1 in 0..t {
            // Its position: the cache's last T tokens are this step's (none: a padded row).
            let Some(pos) = (len + t1).checked_sub(t) else {
                out[(bi * t + t1) * c..][..c].fill(zero);
                continue;
            };
            let q = &qkv[(bi * t + t1) * 3 * c..][..c];
            for hh in 0..nh {
                let q = &q[hh * hs..][..hs];
                let (mut max, mut sum) = (F::neg_infinity(), zero);
                let mut acc = vec![zero; hs];
                for p in 0..=pos {
                    let Some(&block) = table.get(p / bs) else { break };
                    // A slot past the cache (or past usize) ends the row, as the kernel's bound does.
                    let at = (block as usize).checked_mul(bs).and_then(|s| s.checked_add(p % bs)?.checked_mul(2 * c));
                    let Some(kv) = at.and_then(|at| cache.get(at..)).and_then(|s| s.get(..2 * c)) else { break };
                    let (k, v) = (&kv[hh * hs..][..hs], &kv[c + hh * hs..][..hs]);
                    let s = q.iter().zip(k).fold(zero, |a, (&x, &y)| a + x * y) * scale;
                    let m = max.max(s);
                    let (old, new) = ((max - m).exp(), (s - m).exp());
                    sum = sum * old + new;
                    for (a, &y) in acc.iter_mut().zip(v) {
                        *a = *a * old + new * y;
                    }
                    max = m;
                }
                let o = &mut out[(bi * t + t1) * c + hh * hs..][..hs];
                for (o, a) in o.iter_mut().zip(acc) {
                    *o = if sum > zero { a / sum } else { zero };
                }
            }
        }
    }
}
