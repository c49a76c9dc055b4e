//! Plain-Rust twins of every GPU kernel, generic over f32 and f64 (f64 for finite-difference
//! checks). Each function's name matches its shader file and GPU struct: `matmul_forward` ↔
//! `shaders/matmul.wgsl` ↔ `gpu::kernels::Matmul`. Shapes: B batch, T sequence, C channels,
//! NH heads, hs = C/NH, V vocabulary; `rows` = B·T.

use num_traits::Float;

/// The CPU twins' number type: f32 (the backend) or f64 (the finite-difference checks), shared
/// between threads on native (the GEMMs split their rows over rayon's pool).
pub trait Real: Float + Send + Sync + 'static {}
impl<T: Float + Send + Sync + 'static> Real for T {}

use crate::backend::ix;
pub use crate::plan::AdamWStep;
use crate::plan::op;

/// The attention twins' shape: batch, sequence, width and heads.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub b: usize,
    pub t: usize,
    pub c: usize,
    pub nh: usize,
}

impl Heads {
    /// The head size C/NH and the attention scale 1/√(C/NH).
    fn head_size_and_scale<F: Real>(&self) -> (usize, F) {
        let hs = self.c / self.nh.max(1);
        (hs, F::one() / f::<F>(hs as f64).sqrt())
    }
}

fn f<F: Real>(x: f64) -> F {
    F::from(x).unwrap_or_else(F::nan)
}

/// out (rows,C) = wte[tokens[r]] + wpe[r mod T].
pub fn embedding_forward<F: Real>(out: &mut [F], tokens: &[u32], wte: &[F], wpe: &[F], t: usize, c: usize) {
    for (r, &tok) in tokens.iter().enumerate() {
        let (tok, pos) = (tok as usize, r % t);
        for i in 0..c {
            out[r * c + i] = wte[tok * c + i] + wpe[pos * c + i];
        }
    }
}

/// dwte[tokens[r]] += dout[r]; dwpe[r mod T] += dout[r]. Repeated tokens accumulate.
pub fn embedding_backward<F: Real>(dwte: &mut [F], dwpe: &mut [F], dout: &[F], tokens: &[u32], t: usize, c: usize) {
    for (r, &tok) in tokens.iter().enumerate() {
        let (tok, pos) = (tok as usize, r % t);
        for i in 0..c {
            dwte[tok * c + i] = dwte[tok * c + i] + dout[r * c + i];
            dwpe[pos * c + i] = dwpe[pos * c + i] + dout[r * c + i];
        }
    }
}

pub const LN_EPS: f64 = 1e-5;

/// out (rows,C) = (x − mean)·rstd·w + b, saving mean and rstd (rows).
pub fn layernorm_forward<F: Real>(
    out: &mut [F],
    mean: &mut [F],
    rstd: &mut [F],
    inp: &[F],
    w: &[F],
    b: &[F],
    c: usize,
) {
    let n = f::<F>(c as f64);
    for r in 0..mean.len() {
        let x = &inp[r * c..(r + 1) * c];
        let m = x.iter().fold(F::zero(), |a, &v| a + v) / n;
        let var = x.iter().fold(F::zero(), |a, &v| a + (v - m) * (v - m)) / n;
        let s = F::one() / (var + f(LN_EPS)).sqrt();
        for i in 0..c {
            out[r * c + i] = (x[i] - m) * s * w[i] + b[i];
        }
        mean[r] = m;
        rstd[r] = s;
    }
}

/// dinp (+)= LayerNorm input gradient; dw += Σ dout·x̂; db += Σ dout.
pub fn layernorm_backward<F: Real>(
    dinp: &mut [F],
    mut dparams: Option<(&mut [F], &mut [F])>,
    dout: &[F],
    (inp, w, mean, rstd): (&[F], &[F], &[F], &[F]),
    c: usize,
    accumulate: bool,
) {
    let n = f::<F>(c as f64);
    for r in 0..mean.len() {
        let (m, s) = (mean[r], rstd[r]);
        let mut dnorm_mean = F::zero();
        let mut dnorm_norm_mean = F::zero();
        for i in 0..c {
            let xhat = (inp[r * c + i] - m) * s;
            let dnorm = w[i] * dout[r * c + i];
            dnorm_mean = dnorm_mean + dnorm;
            dnorm_norm_mean = dnorm_norm_mean + dnorm * xhat;
        }
        dnorm_mean = dnorm_mean / n;
        dnorm_norm_mean = dnorm_norm_mean / n;
        for i in 0..c {
            let xhat = (inp[r * c + i] - m) * s;
            let d = dout[r * c + i];
            if let Some((dw, db)) = dparams.as_mut() {
                db[i] = db[i] + d;
                dw[i] = dw[i] + xhat * d;
            }
            let dx = (w[i] * d - dnorm_mean - xhat * dnorm_norm_mean) * s;
            let k = r * c + i;
            dinp[k] = if accumulate { dinp[k] + dx } else { dx };
        }
    }
}

/// out (rows,n) = inp (rows,k) · W + bias; W is (k,n), or (n,k) when `transposed`.
/// Loops run along contiguous memory in both layouts.
pub fn matmul_forward<F: Real>(out: &mut [F], inp: &[F], w: &[F], bias: Option<&[F]>, o: &op::Matmul) {
    gemm_forward(out, inp, w, bias, Gemm { rows: ix(o.rows), k: ix(o.k), n: ix(o.n), transposed: o.weight_transposed });
}

/// A product's sizes: inp (rows,k) · W (k,n), or W (n,k) when `transposed`.
#[derive(Clone, Copy)]
struct Gemm {
    rows: usize,
    k: usize,
    n: usize,
    transposed: bool,
}

/// Runs `f` on each (row index, row of `out`, row of `inp`) pair: over rayon's pool on native, in
/// order on wasm32 (no threads there). Each row is computed exactly as in sequence, so the
/// results are bit for bit the same either way.
fn rows<F: Real>(out: &mut [F], n: usize, inp: &[F], k: usize, f: impl Fn(usize, &mut [F], &[F]) + Sync + Send) {
    if n == 0 {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        if k == 0 {
            out.par_chunks_mut(n).enumerate().for_each(|(r, o)| f(r, o, &[]));
        } else {
            out.par_chunks_mut(n).zip(inp.par_chunks(k)).enumerate().for_each(|(r, (o, x))| f(r, o, x));
        }
    }
    #[cfg(target_arch = "wasm32")]
    {
        for (r, o) in out.chunks_mut(n).enumerate() {
            let x = if k == 0 { &[][..] } else { &inp[r * k..(r + 1) * k] };
            f(r, o, x);
        }
    }
}

fn gemm_forward<F: Real>(out: &mut [F], inp: &[F], w: &[F], bias: Option<&[F]>, g: Gemm) {
    let Gemm { rows: m, k, n, transposed } = g;
    let out = &mut out[..m * n];
    let inp = &inp[..m * k];
    rows(out, n, inp, k, |_, o, x| {
        match bias {
            Some(b) => o.copy_from_slice(&b[..n]),
            None => o.fill(F::zero()),
        }
        if transposed {
            // W (n,k): out[j] = Σ_i x[i]·W[j][i]
            for (j, oj) in o.iter_mut().enumerate() {
                let wj = &w[j * k..(j + 1) * k];
                *oj = x.iter().zip(wj).fold(*oj, |acc, (&a, &b)| acc + a * b);
            }
        } else {
            // W (k,n): out += x[i]·W[i][..]
            for (i, &xi) in x.iter().enumerate() {
                for (oj, &wij) in o.iter_mut().zip(&w[i * n..(i + 1) * n]) {
                    *oj = *oj + xi * wij;
                }
            }
        }
    });
}

/// dinp = dout·Wᵀ (overwritten); dw += inpᵀ·dout (in W's layout); dbias += Σ_rows dout.
pub fn matmul_backward<F: Real>(
    dinp: &mut [F],
    (dw, dbias): (Option<&mut [F]>, Option<&mut [F]>),
    dout: &[F],
    inp: &[F],
    w: &[F],
    o: &op::MatmulBackward,
) {
    let g = Gemm { rows: ix(o.rows), k: ix(o.k), n: ix(o.n), transposed: o.weight_transposed };
    gemm_backward(dinp, (dw, dbias), dout, inp, w, g);
}

fn gemm_backward<F: Real>(
    dinp: &mut [F],
    (mut dw, dbias): (Option<&mut [F]>, Option<&mut [F]>),
    dout: &[F],
    inp: &[F],
    w: &[F],
    g: Gemm,
) {
    let Gemm { rows: m, k, n, transposed } = g;
    let dout = &dout[..m * n];
    // dinp, row by row (in parallel: each row its own).
    rows(&mut dinp[..m * k], k, dout, n, |_, di, d| {
        if transposed {
            // W (n,k): dinp[i] = Σ_j d[j]·W[j][i]
            di.fill(F::zero());
            for (j, &dj) in d.iter().enumerate() {
                for (dii, &wji) in di.iter_mut().zip(&w[j * k..(j + 1) * k]) {
                    *dii = *dii + dj * wji;
                }
            }
        } else {
            // W (k,n): dinp[i] = Σ_j d[j]·W[i][j]
            for (i, dii) in di.iter_mut().enumerate() {
                *dii = d.iter().zip(&w[i * n..(i + 1) * n]).fold(F::zero(), |acc, (&a, &b)| acc + a * b);
            }
        }
    });
    // dW, one of W's rows at a time (in parallel), summing over the input rows in order: each
    // element adds the same terms in the same order as a row-by-row loop would.
    // (A frozen weight has no gradient, and its input is not read.)
    if let Some(dw) = dw.as_mut() {
        let inp = &inp[..m * k];
        if transposed {
            // W (n,k): dW[j][i] += Σ_r d[r][j]·x[r][i]
            rows(&mut dw[..n * k], k, &[], 0, |j, g, _| {
                for r in 0..m {
                    let dj = dout[r * n + j];
                    for (gi, &xi) in g.iter_mut().zip(&inp[r * k..(r + 1) * k]) {
                        *gi = *gi + dj * xi;
                    }
                }
            });
        } else {
            // W (k,n): dW[i][j] += Σ_r x[r][i]·d[r][j]
            rows(&mut dw[..k * n], n, &[], 0, |i, g, _| {
                for r in 0..m {
                    let xi = inp[r * k + i];
                    for (gj, &dj) in g.iter_mut().zip(&dout[r * n..(r + 1) * n]) {
                        *gj = *gj + xi * dj;
                    }
                }
            });
        }
    }
    if let Some(db) = dbias {
        for r in 0..m {
            for (g, &dj) in db.iter_mut().zip(&dout[r * n..(r + 1) * n]) {
                *g = *g + dj;
            }
        }
    }
}

/// out (rows,n) += alpha · inp (rows,k) · W (k,n): LoRA's up-projection added to the frozen
/// projection's output.
pub fn matmul_add_forward<F: Real>(out: &mut [F], inp: &[F], w: &[F], o: &op::MatmulAdd) {
    let (rows, k, n, alpha) = (ix(o.rows), ix(o.k), ix(o.n), o.alpha);
    let mut tmp = vec![F::zero(); rows * n];
    gemm_forward(&mut tmp, inp, w, None, Gemm { rows, k, n, transposed: false });
    let a = f::<F>(alpha);
    for (o, t) in out.iter_mut().zip(tmp) {
        *o = *o + a * t;
    }
}

/// The backward of [`matmul_add_forward`]: dinp = alpha·dout·Wᵀ; dW += alpha·inpᵀ·dout.
pub fn matmul_add_backward<F: Real>(
    dinp: &mut [F],
    dw: &mut [F],
    dout: &[F],
    inp: &[F],
    w: &[F],
    o: &op::MatmulAddBackward,
) {
    let (rows, k, n, alpha) = (ix(o.rows), ix(o.k), ix(o.n), o.alpha);
    let a = f::<F>(alpha);
    let scaled: Vec<F> = dout.iter().map(|&d| d * a).collect();
    gemm_backward(dinp, (Some(dw), None), &scaled, inp, w, Gemm { rows, k, n, transposed: false });
}

/// Causal self-attention. qkv (B,T,3C) holds Q, K, V side by side; att (B,NH,T,T) receives the
/// softmax probabilities (zero above the diagonal); out (B,T,C).
pub fn attention_forward<F: Real>(out: &mut [F], att: &mut [F], qkv: &[F], h: Heads) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    for bi in 0..b {
        for h in 0..nh {
            for t1 in 0..t {
                let q = &qkv[(bi * t + t1) * 3 * c + h * hs..][..hs];
                let row = &mut att[((bi * nh + h) * t + t1) * t..][..t];
                let mut max = F::neg_infinity();
                for (t2, slot) in row.iter_mut().enumerate().take(t1 + 1) {
                    let kv = &qkv[(bi * t + t2) * 3 * c + c + h * hs..][..hs];
                    let s = q.iter().zip(kv).fold(F::zero(), |a, (&x, &y)| a + x * y) * scale;
                    *slot = s;
                    max = max.max(s);
                }
                let mut sum = F::zero();
                for slot in row.iter_mut().take(t1 + 1) {
                    *slot = (*slot - max).exp();
                    sum = sum + *slot;
                }
                for (t2, slot) in row.iter_mut().enumerate() {
                    *slot = if t2 <= t1 { *slot / sum } else { F::zero() };
                }
                for i in 0..hs {
                    let mut acc = F::zero();
                    for t2 in 0..=t1 {
                        acc = acc + row[t2] * qkv[(bi * t + t2) * 3 * c + 2 * c + h * hs + i];
                    }
                    out[(bi * t + t1) * c + h * hs + i] = acc;
                }
            }
        }
    }
}

/// dqkv (B,T,3C) given dout (B,T,C); `datt` (B,NH,T,T) is scratch.
pub fn attention_backward<F: Real>(dqkv: &mut [F], datt: &mut [F], dout: &[F], qkv: &[F], att: &[F], h: Heads) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    dqkv.iter_mut().for_each(|x| *x = F::zero());
    for bi in 0..b {
        for h in 0..nh {
            let a = |t1: usize, t2: usize| att[((bi * nh + h) * t + t1) * t + t2];
            let base = |tt: usize| (bi * t + tt) * 3 * c + h * hs;
            for t1 in 0..t {
                let drow = ((bi * nh + h) * t + t1) * t;
                // dP = dO·Vᵀ and dV += Pᵀ·dO
                for t2 in 0..t {
                    let mut acc = F::zero();
                    for i in 0..hs {
                        let dout_i = dout[(bi * t + t1) * c + h * hs + i];
                        acc = acc + dout_i * qkv[base(t2) + 2 * c + i];
                        dqkv[base(t2) + 2 * c + i] = dqkv[base(t2) + 2 * c + i] + a(t1, t2) * dout_i;
                    }
                    datt[drow + t2] = acc;
                }
                // dS = P ⊙ (dP − Σ P·dP), scaled
                let dot = (0..t).fold(F::zero(), |acc, t2| acc + a(t1, t2) * datt[drow + t2]);
                for t2 in 0..t {
                    datt[drow + t2] = a(t1, t2) * (datt[drow + t2] - dot);
                }
                // dQ = dS·K·scale, dK += dSᵀ·Q·scale
                for t2 in 0..=t1 {
                    let ds = datt[drow + t2] * scale;
                    for i in 0..hs {
                        dqkv[base(t1) + i] = dqkv[base(t1) + i] + ds * qkv[base(t2) + c + i];
                        dqkv[base(t2) + c + i] = dqkv[base(t2) + c + i] + ds * qkv[base(t1) + i];
                    }
                }
            }
        }
    }
}

const GELU_K: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)

/// Keys per tile of the fused attention's online softmax (`KT` in flash_attention.wgsl).
const FLASH_KEY_TILE: usize = 16;

/// Fused causal attention: out (B,T,C) and lse (B,NH,T), the logsumexp of each row of scaled
/// scores, by an online softmax over tiles of keys (running max, running sum, rescaled
/// accumulator), as the kernel computes it. No T×T matrix is formed.
pub fn flash_attention_forward<F: Real>(out: &mut [F], lse: &mut [F], qkv: &[F], h: Heads) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    let mut acc = vec![F::zero(); hs];
    for bi in 0..b {
        for h in 0..nh {
            let at = |row: usize, part: usize| (bi * t + row) * 3 * c + part * c + h * hs;
            for t1 in 0..t {
                let q = &qkv[at(t1, 0)..][..hs];
                acc.iter_mut().for_each(|a| *a = F::zero());
                let (mut m, mut l) = (F::neg_infinity(), F::zero());
                for start in (0..=t1).step_by(FLASH_KEY_TILE) {
                    let end = (start + FLASH_KEY_TILE).min(t1 + 1);
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
                    out[(bi * t + t1) * c + h * hs + i] = *a / l;
                }
                lse[(bi * nh + h) * t + t1] = m + l.ln();
            }
        }
    }
}

/// dqkv (B,T,3C) of fused attention given dout, recomputing each probability as
/// exp(score − lse); `delta` (B,NH,T) receives rowsum(dout∘out). Every element of dqkv is set.
pub fn flash_attention_backward<F: Real>(
    dqkv: &mut [F],
    delta: &mut [F],
    dout: &[F],
    (qkv, out, lse): (&[F], &[F], &[F]),
    h: Heads,
) {
    let Heads { b, t, c, nh } = h;
    let (hs, scale) = h.head_size_and_scale::<F>();
    dqkv.iter_mut().for_each(|x| *x = F::zero());
    for bi in 0..b {
        for h in 0..nh {
            let at = |row: usize, part: usize| (bi * t + row) * 3 * c + part * c + h * hs;
            let o = |row: usize| (bi * t + row) * c + h * hs;
            for t1 in 0..t {
                let row = (bi * nh + h) * t + t1;
                let d = (0..hs).fold(F::zero(), |a, i| a + dout[o(t1) + i] * out[o(t1) + i]);
                delta[row] = d;
                for t2 in 0..=t1 {
                    let (mut s, mut dp) = (F::zero(), F::zero());
                    for i in 0..hs {
                        s = s + qkv[at(t1, 0) + i] * qkv[at(t2, 1) + i];
                        dp = dp + dout[o(t1) + i] * qkv[at(t2, 2) + i];
                    }
                    let p = (s * scale - lse[row]).exp();
                    let ds = p * (dp - d) * scale;
                    for i in 0..hs {
                        dqkv[at(t1, 0) + i] = dqkv[at(t1, 0) + i] + ds * qkv[at(t2, 1) + i];
                        dqkv[at(t2, 1) + i] = dqkv[at(t2, 1) + i] + ds * qkv[at(t1, 0) + i];
                        dqkv[at(t2, 2) + i] = dqkv[at(t2, 2) + i] + p * dout[o(t1) + i];
                    }
                }
            }
        }
    }
}

/// GELU with the tanh approximation (GPT-2's `gelu_new`).
pub fn gelu_forward<F: Real>(out: &mut [F], inp: &[F]) {
    let (k, a, half) = (f::<F>(GELU_K), f::<F>(0.044715), f::<F>(0.5));
    for (o, &x) in out.iter_mut().zip(inp) {
        *o = half * x * (F::one() + (k * (x + a * x * x * x)).tanh());
    }
}

pub fn gelu_backward<F: Real>(dinp: &mut [F], inp: &[F], dout: &[F]) {
    let (k, a, half) = (f::<F>(GELU_K), f::<F>(0.044715), f::<F>(0.5));
    let three = f::<F>(3.0);
    for ((d, &x), &g) in dinp.iter_mut().zip(inp).zip(dout) {
        let th = (k * (x + a * x * x * x)).tanh();
        let sech2 = F::one() - th * th;
        let local = half * (F::one() + th) + half * x * sech2 * k * (F::one() + three * a * x * x);
        *d = local * g;
    }
}

pub fn residual_forward<F: Real>(out: &mut [F], a: &[F], b: &[F]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// da = dout (the other addend's gradient is dout itself).
pub fn residual_backward<F: Real>(da: &mut [F], dout: &[F]) {
    da.copy_from_slice(dout);
}

/// probs (rows,V) = softmax(logits); losses (rows) = logsumexp − logit[target]; returns the mean.
pub fn cross_entropy_forward<F: Real>(probs: &mut [F], losses: &mut [F], logits: &[F], targets: &[u32], v: usize) -> F {
    let mut total = F::zero();
    for (r, &tgt) in targets.iter().enumerate() {
        let row = &logits[r * v..(r + 1) * v];
        let max = row.iter().fold(F::neg_infinity(), |m, &x| m.max(x));
        let sum = row.iter().fold(F::zero(), |s, &x| s + (x - max).exp());
        for i in 0..v {
            probs[r * v + i] = (row[i] - max).exp() / sum;
        }
        losses[r] = max + sum.ln() - row[tgt as usize];
        total = total + losses[r];
    }
    total / f(targets.len() as f64)
}

/// dlogits = (probs − onehot(target)) · scale (1/rows of the effective batch).
pub fn cross_entropy_backward<F: Real>(dlogits: &mut [F], probs: &[F], targets: &[u32], v: usize, scale: f64) {
    let inv = f::<F>(scale);
    for (r, &tgt) in targets.iter().enumerate() {
        for i in 0..v {
            let onehot = if i == tgt as usize { F::one() } else { F::zero() };
            dlogits[r * v + i] = (probs[r * v + i] - onehot) * inv;
        }
    }
}

/// Whether every value is finite (fp16's overflow check).
pub fn all_finite<F: Real>(x: &[F]) -> bool {
    x.iter().all(|v| v.is_finite())
}

/// AdamW (decoupled weight decay, bias-corrected moments).
pub fn adamw_step<F: Real>(params: &mut [F], m: &mut [F], v: &mut [F], grads: &[F], s: &AdamWStep) {
    let (bc1, bc2) = s.bias_corrections();
    let (lr, b1, b2, eps, wd) = (
        f::<F>(s.lr as f64),
        f::<F>(s.beta1 as f64),
        f::<F>(s.beta2 as f64),
        f::<F>(s.eps as f64),
        f::<F>(s.weight_decay as f64),
    );
    let (bc1, bc2) = (f::<F>(bc1 as f64), f::<F>(bc2 as f64));
    for i in 0..params.len() {
        let g = grads[i];
        m[i] = b1 * m[i] + (F::one() - b1) * g;
        v[i] = b2 * v[i] + (F::one() - b2) * g * g;
        let mhat = m[i] / bc1;
        let vhat = v[i] / bc2;
        let decay = if (i as u64) < s.decay_end { wd * params[i] } else { F::zero() };
        params[i] = params[i] - lr * (mhat / (vhat.sqrt() + eps) + decay);
    }
}

/// SGD as `torch.optim.SGD`: g' = g + wd·p; buf = μ·buf + g' (if momentum); p −= lr·buf.
pub fn sgd_step<F: Real>(
    params: &mut [F],
    momentum_buf: Option<&mut [F]>,
    grads: &[F],
    lr: f32,
    momentum: f32,
    weight_decay: f32,
) {
    let (lr, mu, wd) = (f::<F>(lr as f64), f::<F>(momentum as f64), f::<F>(weight_decay as f64));
    match momentum_buf {
        Some(buf) => {
            for i in 0..params.len() {
                let g = grads[i] + wd * params[i];
                buf[i] = mu * buf[i] + g;
                params[i] = params[i] - lr * buf[i];
            }
        }
        None => {
            for i in 0..params.len() {
                let g = grads[i] + wd * params[i];
                params[i] = params[i] - lr * g;
            }
        }
    }
}
