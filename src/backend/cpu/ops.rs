//! Plain-Rust twins of every GPU kernel, generic over f32 and f64 (f64 for finite-difference
//! checks). Each function's name matches its shader file and GPU struct: `matmul_forward` ↔
//! `shaders/matmul.wgsl` ↔ `gpu::kernels::Matmul`. Shapes: B batch, T sequence, C channels,
//! NH heads, hs = C/NH, V vocabulary; `rows` = B·T.

use super::gemm::{Mat, gemm};
pub use super::real::Real;

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
    pub(super) fn head_size_and_scale<F: Real>(&self) -> (usize, F) {
        let hs = self.c / self.nh.max(1);
        (hs, F::one() / f::<F>(hs as f64).sqrt())
    }
}

fn f<F: Real>(x: f64) -> F {
    F::from(x).unwrap_or_else(F::nan)
}

/// The position of row `r` of a (B,T) batch: r mod T, counted from its document's start in
/// packed rows (`starts` empty: every row one sequence).
fn position(r: usize, t: usize, starts: &[u32]) -> usize {
    (r % t).saturating_sub(starts.get(r).map_or(0, |&s| s as usize))
}

/// out (rows,C) = wte[tokens[r]] + wpe[position(r)], or wpe[positions[r]] where the positions
/// are given (a serving step's). A token or a position past its table reads a zero row, as the
/// kernel does.
pub fn embedding_forward<F: Real>(
    out: &mut [F],
    tokens: &[u32],
    (wte, wpe): (&[F], &[F]),
    (t, c): (usize, usize),
    (starts, positions): (&[u32], &[u32]),
) {
    let row = |table: &[F], i: usize, e: usize| table.get(i * c + e).copied().unwrap_or(F::zero());
    for (r, &tok) in tokens.iter().enumerate() {
        let pos = positions.get(r).map_or_else(|| position(r, t, starts), |&p| p as usize);
        for i in 0..c {
            out[r * c + i] = row(wte, tok as usize, i) + row(wpe, pos, i);
        }
    }
}

/// dwte[tokens[r]] += dout[r]; dwpe[position(r)] += dout[r]. Repeated tokens accumulate.
pub fn embedding_backward<F: Real>(
    (dwte, dwpe): (&mut [F], &mut [F]),
    dout: &[F],
    tokens: &[u32],
    (t, c): (usize, usize),
    starts: &[u32],
) {
    for (r, &tok) in tokens.iter().enumerate() {
        let (tok, pos) = (tok as usize, position(r, t, starts));
        for i in 0..c {
            dwte[tok * c + i] = dwte[tok * c + i] + dout[r * c + i];
            dwpe[pos * c + i] = dwpe[pos * c + i] + dout[r * c + i];
        }
    }
}

pub const LN_EPS: f64 = 1e-5;

/// Rows per task of the LayerNorm twins: fixed, so that the weight gradients' partial sums (and
/// so the results) do not depend on the number of threads.
const LN_ROWS: usize = 64;

/// One block of [`layernorm_forward`]: its index, and its rows of out, mean and rstd.
type LnBlock<'a, F> = (usize, ((&'a mut [F], &'a mut [F]), &'a mut [F]));

/// out (rows,C) = (x − mean)·rstd·w + b, saving mean and rstd (rows). Blocks of rows in
/// parallel on native.
pub fn layernorm_forward<F: Real>(
    out: &mut [F],
    mean: &mut [F],
    rstd: &mut [F],
    inp: &[F],
    w: &[F],
    b: &[F],
    c: usize,
) {
    let rows = mean.len().min(rstd.len());
    if c == 0 || rows == 0 {
        return;
    }
    let n = f::<F>(c as f64);
    let block = |(i, ((out, mean), rstd)): LnBlock<F>| {
        for (r, (m_out, s_out)) in mean.iter_mut().zip(rstd.iter_mut()).enumerate() {
            let x = &inp[(i * LN_ROWS + r) * c..][..c];
            let m = x.iter().fold(F::zero(), |a, &v| a + v) / n;
            let var = x.iter().fold(F::zero(), |a, &v| a + (v - m) * (v - m)) / n;
            let s = F::one() / (var + f(LN_EPS)).sqrt();
            for (((o, &xi), &wi), &bi) in out[r * c..(r + 1) * c].iter_mut().zip(x).zip(w).zip(b) {
                *o = (xi - m) * s * wi + bi;
            }
            *m_out = m;
            *s_out = s;
        }
    };
    let (out, mean, rstd) = (&mut out[..rows * c], &mut mean[..rows], &mut rstd[..rows]);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(LN_ROWS * c)
            .zip(mean.par_chunks_mut(LN_ROWS))
            .zip(rstd.par_chunks_mut(LN_ROWS))
            .enumerate()
            .for_each(block);
    }
    #[cfg(target_arch = "wasm32")]
    out.chunks_mut(LN_ROWS * c).zip(mean.chunks_mut(LN_ROWS)).zip(rstd.chunks_mut(LN_ROWS)).enumerate().for_each(block);
}

/// dinp (+)= LayerNorm input gradient; dw += Σ dout·x̂; db += Σ dout. Blocks of rows in
/// parallel on native, each with its own partial dw and db, added in block order.
pub fn layernorm_backward<F: Real>(
    dinp: &mut [F],
    dparams: Option<(&mut [F], &mut [F])>,
    dout: &[F],
    (inp, w, mean, rstd): (&[F], &[F], &[F], &[F]),
    c: usize,
    accumulate: bool,
) {
    let rows = mean.len().min(rstd.len());
    if c == 0 || rows == 0 {
        return;
    }
    let n = f::<F>(c as f64);
    let want_params = dparams.is_some();
    let block = |(i, dinp): (usize, &mut [F])| -> Option<(Vec<F>, Vec<F>)> {
        let mut partial = want_params.then(|| (vec![F::zero(); c], vec![F::zero(); c]));
        for (local, di) in dinp.chunks_exact_mut(c).enumerate() {
            let r = i * LN_ROWS + local;
            let (m, s) = (mean[r], rstd[r]);
            let (x, d) = (&inp[r * c..][..c], &dout[r * c..][..c]);
            let mut dnorm_mean = F::zero();
            let mut dnorm_norm_mean = F::zero();
            for k in 0..c {
                let xhat = (x[k] - m) * s;
                let dnorm = w[k] * d[k];
                dnorm_mean = dnorm_mean + dnorm;
                dnorm_norm_mean = dnorm_norm_mean + dnorm * xhat;
            }
            dnorm_mean = dnorm_mean / n;
            dnorm_norm_mean = dnorm_norm_mean / n;
            for k in 0..c {
                let xhat = (x[k] - m) * s;
                if let Some((dw, db)) = partial.as_mut() {
                    db[k] = db[k] + d[k];
                    dw[k] = dw[k] + xhat * d[k];
                }
                let dx = (w[k] * d[k] - dnorm_mean - xhat * dnorm_norm_mean) * s;
                di[k] = if accumulate { di[k] + dx } else { dx };
            }
        }
        partial
    };
    let dinp = &mut dinp[..rows * c];
    #[cfg(not(target_arch = "wasm32"))]
    let partials: Vec<Option<(Vec<F>, Vec<F>)>> = {
        use rayon::prelude::*;
        dinp.par_chunks_mut(LN_ROWS * c).enumerate().map(block).collect()
    };
    #[cfg(target_arch = "wasm32")]
    let partials: Vec<Option<(Vec<F>, Vec<F>)>> = dinp.chunks_mut(LN_ROWS * c).enumerate().map(block).collect();
    if let Some((dw, db)) = dparams {
        for (pw, pb) in partials.into_iter().flatten() {
            dw.iter_mut().zip(pw).for_each(|(g, p)| *g = *g + p);
            db.iter_mut().zip(pb).for_each(|(g, p)| *g = *g + p);
        }
    }
}

/// out (rows,n) = inp (rows,k) · W + bias; W is (k,n), or (n,k) when `transposed` (read
/// through strides, not copied).
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

impl Gemm {
    /// W as the (k,n) matrix the product reads, whichever way it is stored.
    fn weight(&self) -> Mat {
        if self.transposed { Mat::dense(self.n, self.k).t() } else { Mat::dense(self.k, self.n) }
    }
}

/// out = bias (broadcast, or 0) + inp·W.
fn gemm_forward<F: Real>(out: &mut [F], inp: &[F], w: &[F], bias: Option<&[F]>, g: Gemm) {
    let Gemm { rows: m, k, n, .. } = g;
    let beta = match bias {
        Some(b) if n > 0 => {
            out[..m * n].chunks_exact_mut(n).for_each(|o| o.copy_from_slice(&b[..n]));
            F::one()
        }
        _ => F::zero(),
    };
    gemm(F::one(), (inp, Mat::dense(m, k)), (w, g.weight()), beta, (out, Mat::dense(m, n)));
}

/// dinp = dout·Wᵀ (overwritten); dw += inpᵀ·dout (in W's layout); dbias += Σ_rows dout.
pub fn matmul_backward<F: Real>(
    dinp: &mut [F],
    grads: (Option<&mut [F]>, Option<&mut [F]>),
    dout: &[F],
    inp: &[F],
    w: &[F],
    o: &op::MatmulBackward,
) {
    let g = Gemm { rows: ix(o.rows), k: ix(o.k), n: ix(o.n), transposed: o.weight_transposed };
    gemm_backward(F::one(), dinp, grads, dout, inp, w, g);
}

/// dinp = alpha·dout·Wᵀ; dW += alpha·inpᵀ·dout; dbias += Σ_rows dout. A frozen weight has no
/// gradient, and its input is not read.
fn gemm_backward<F: Real>(
    alpha: F,
    dinp: &mut [F],
    (dw, dbias): (Option<&mut [F]>, Option<&mut [F]>),
    dout: &[F],
    inp: &[F],
    w: &[F],
    g: Gemm,
) {
    let Gemm { rows: m, k, n, transposed } = g;
    let (d, x) = (Mat::dense(m, n), Mat::dense(m, k));
    gemm(alpha, (dout, d), (w, g.weight().t()), F::zero(), (dinp, x));
    if let Some(dw) = dw {
        if transposed {
            // W (n,k): dW += doutᵀ·inp
            gemm(alpha, (dout, d.t()), (inp, x), F::one(), (dw, Mat::dense(n, k)));
        } else {
            // W (k,n): dW += inpᵀ·dout
            gemm(alpha, (inp, x.t()), (dout, d), F::one(), (dw, Mat::dense(k, n)));
        }
    }
    if let Some(db) = dbias {
        for row in dout[..m * n].chunks_exact(n.max(1)) {
            for (g, &dj) in db.iter_mut().zip(row) {
                *g = *g + dj;
            }
        }
    }
}

/// out (rows,n) += alpha · inp (rows,k) · W (k,n): LoRA's up-projection added to the frozen
/// projection's output.
pub fn matmul_add_forward<F: Real>(out: &mut [F], inp: &[F], w: &[F], o: &op::MatmulAdd) {
    let (rows, k, n) = (ix(o.rows), ix(o.k), ix(o.n));
    gemm(f::<F>(o.alpha), (inp, Mat::dense(rows, k)), (w, Mat::dense(k, n)), F::one(), (out, Mat::dense(rows, n)));
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
    let g = Gemm { rows: ix(o.rows), k: ix(o.k), n: ix(o.n), transposed: false };
    gemm_backward(f::<F>(o.alpha), dinp, (Some(dw), None), dout, inp, w, g);
}

/// Runs `f(batch, x, y)` on each batch's disjoint chunks of two outputs (`xl` and `yl`
/// elements per batch): over rayon's pool on native, in order on wasm32 (no threads there).
/// Each batch is computed the same way either way.
pub(super) fn per_batch<F: Real>(
    b: usize,
    (x, xl): (&mut [F], usize),
    (y, yl): (&mut [F], usize),
    f: impl Fn(usize, &mut [F], &mut [F]) + Sync + Send,
) {
    if b == 0 || xl == 0 || yl == 0 {
        return;
    }
    let (x, y) = (&mut x[..b * xl], &mut y[..b * yl]);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        x.par_chunks_mut(xl).zip(y.par_chunks_mut(yl)).enumerate().for_each(|(i, (x, y))| f(i, x, y));
    }
    #[cfg(target_arch = "wasm32")]
    x.chunks_mut(xl).zip(y.chunks_mut(yl)).enumerate().for_each(|(i, (x, y))| f(i, x, y));
}

const GELU_K: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)

/// Runs `f(out, a, b)` on matching chunks of an output and two inputs: over rayon's pool on
/// native, in order on wasm32. For element-wise ops, whose elements are independent.
fn elementwise<F: Real>(out: &mut [F], a: &[F], b: &[F], f: impl Fn(&mut [F], &[F], &[F]) + Sync + Send) {
    let n = out.len().min(a.len()).min(b.len());
    let (out, a, b) = (&mut out[..n], &a[..n], &b[..n]);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        // Elements per task.
        const ELEMENTWISE_CHUNK: usize = 1 << 14;
        let ch = ELEMENTWISE_CHUNK;
        out.par_chunks_mut(ch).zip(a.par_chunks(ch).zip(b.par_chunks(ch))).for_each(|(o, (a, b))| f(o, a, b));
    }
    #[cfg(target_arch = "wasm32")]
    f(out, a, b);
}

/// GELU with the tanh approximation (GPT-2's `gelu_new`).
pub fn gelu_forward<F: Real>(out: &mut [F], inp: &[F]) {
    let (k, a, half) = (f::<F>(GELU_K), f::<F>(0.044715), f::<F>(0.5));
    elementwise(out, inp, inp, |out, inp, _| {
        for (o, &x) in out.iter_mut().zip(inp) {
            *o = half * x * (F::one() + (k * (x + a * x * x * x)).gelu_tanh());
        }
    });
}

pub fn gelu_backward<F: Real>(dinp: &mut [F], inp: &[F], dout: &[F]) {
    let (k, a, half) = (f::<F>(GELU_K), f::<F>(0.044715), f::<F>(0.5));
    let three = f::<F>(3.0);
    elementwise(dinp, inp, dout, |dinp, inp, dout| {
        for ((d, &x), &g) in dinp.iter_mut().zip(inp).zip(dout) {
            let th = (k * (x + a * x * x * x)).gelu_tanh();
            let sech2 = F::one() - th * th;
            let local = half * (F::one() + th) + half * x * sech2 * k * (F::one() + three * a * x * x);
            *d = local * g;
        }
    });
}

pub fn residual_forward<F: Real>(out: &mut [F], a: &[F], b: &[F]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// dst = alpha·dst + beta·src: the collectives' arithmetic (`shaders/reduce.wgsl`).
pub fn scale_add<F: Real>(dst: &mut [F], src: &[F], alpha: F, beta: F) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = alpha * *d + beta * s;
    }
}

/// da = dout (the other addend's gradient is dout itself).
pub fn residual_backward<F: Real>(da: &mut [F], dout: &[F]) {
    da.copy_from_slice(dout);
}

/// probs (rows,V) = softmax(logits); losses (rows) = logsumexp − logit[target]; returns the mean
/// over the counted targets (an [`crate::data::IGNORE`] target's loss is 0 and not counted).
pub fn cross_entropy_forward<F: Real>(probs: &mut [F], losses: &mut [F], logits: &[F], targets: &[u32], v: usize) -> F {
    let mut total = F::zero();
    let mut counted = 0usize;
    for (r, &tgt) in targets.iter().enumerate() {
        let row = &logits[r * v..(r + 1) * v];
        let max = row.iter().fold(F::neg_infinity(), |m, &x| m.max(x));
        let sum = row.iter().fold(F::zero(), |s, &x| s + (x - max).exp());
        for i in 0..v {
            probs[r * v + i] = (row[i] - max).exp() / sum;
        }
        if tgt == crate::data::IGNORE {
            losses[r] = F::zero();
            continue;
        }
        losses[r] = max + sum.ln() - row[(tgt as usize).min(v - 1)];
        total = total + losses[r];
        counted += 1;
    }
    total / f(counted.max(1) as f64)
}

/// dlogits = (probs − onehot(target)) · scale (1/counted targets of the effective batch); 0 for
/// an ignored target's row.
pub fn cross_entropy_backward<F: Real>(dlogits: &mut [F], probs: &[F], targets: &[u32], v: usize, scale: f64) {
    let inv = f::<F>(scale);
    for (r, &tgt) in targets.iter().enumerate() {
        if tgt == crate::data::IGNORE {
            dlogits[r * v..(r + 1) * v].fill(F::zero());
            continue;
        }
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
