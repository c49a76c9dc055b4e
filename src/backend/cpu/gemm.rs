//! The CPU twins' matrix products: a safe, strided view over `matrixmultiply`'s blocked,
//! packed and vectorised kernels (the ones ndarray uses), with big products split by rows over
//! rayon's pool on native.
//!
//! Chosen by measurement on a 2-core development machine: matrixmultiply reached
//! 155–172 GFLOP/s on the step's shapes split over two rayon tasks, within ~10 % of the `gemm`
//! crate and against ~10 GFLOP/s for the row loops it replaced; it is small (the browser build
//! carries it) and handles any strides, so transposes and attention's per-head slices of the
//! QKV buffer need no copies.

use super::real::{Real, View};

/// A matrix inside a slice: `rows` × `cols`, element (i, j) at `offset + i·rs + j·cs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mat {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl Mat {
    /// A dense row-major matrix at the start of its slice.
    pub fn dense(rows: usize, cols: usize) -> Self {
        Mat { offset: 0, rows, cols, rs: cols, cs: 1 }
    }

    /// Rows of `cols` elements `rs` apart, starting at `offset` (a head's slice of a wider row).
    pub fn strided(offset: usize, rows: usize, cols: usize, rs: usize) -> Self {
        Mat { offset, rows, cols, rs, cs: 1 }
    }

    /// The same elements read as the transpose.
    pub fn t(self) -> Self {
        Mat { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    /// One past the last element reached (the offset when empty), or None on overflow.
    fn end(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(self.offset);
        }
        let last_row = (self.rows - 1).checked_mul(self.rs)?;
        let last_col = (self.cols - 1).checked_mul(self.cs)?;
        self.offset.checked_add(last_row)?.checked_add(last_col)?.checked_add(1)
    }

    fn fits(&self, len: usize) -> bool {
        self.end().is_some_and(|e| e <= len) && isize::try_from(self.rs.max(self.cs)).is_ok()
    }

    /// The view's strides around `ptr`, which must already point at its offset.
    fn view<P>(&self, ptr: P) -> View<P> {
        View { ptr, rs: self.rs as isize, cs: self.cs as isize }
    }
}

/// Products smaller than this many multiply-adds run on one thread (splitting a 128×64×128
/// product over two threads was slower than one, measured).
#[cfg(not(target_arch = "wasm32"))]
const SPLIT_MACS: usize = 1 << 21;

/// c ← alpha·a·b + beta·c, with c's rows contiguous (`cs` = 1, rows `rs` ≥ cols apart).
///
/// # Panics
/// When the shapes disagree or a view reaches past its slice: these are programming errors
/// (every caller derives its views from a validated plan), and a panic here is what keeps the
/// unsafe call below sound.
pub fn gemm<F: Real>(alpha: F, (a, ma): (&[F], Mat), (b, mb): (&[F], Mat), beta: F, (c, mc): (&mut [F], Mat)) {
    assert!(ma.rows == mc.rows && mb.cols == mc.cols && ma.cols == mb.rows, "gemm shapes disagree");
    assert!(ma.fits(a.len()) && mb.fits(b.len()) && mc.fits(c.len()), "gemm view out of bounds");
    assert!(mc.cs == 1 && (mc.rows <= 1 || mc.rs >= mc.cols), "gemm output rows overlap");
    let (m, n) = (mc.rows, mc.cols);
    if m == 0 || n == 0 {
        return;
    }
    // Exactly the span c's rows reach, not the rest of the slice: split by rows below, every
    // chunk then starts at one of c's rows (a head's columns of a wider output are followed by
    // the other heads' elements, which are no rows of this product).
    let c_end = mc.end().unwrap_or(c.len()).min(c.len());
    let c = &mut c[mc.offset..c_end];
    #[cfg(not(target_arch = "wasm32"))]
    {
        let threads = rayon::current_num_threads();
        if threads > 1 && m >= 2 * threads && m.saturating_mul(n).saturating_mul(ma.cols) >= SPLIT_MACS {
            use rayon::prelude::*;
            let per = m.div_ceil(threads);
            c.par_chunks_mut(per * mc.rs).take(m.div_ceil(per)).enumerate().for_each(|(i, part)| {
                let r0 = i * per;
                let rows = per.min(m - r0);
                let sub_a = Mat { offset: ma.offset + r0 * ma.rs, rows, ..ma };
                product(alpha, (a, sub_a), (b, mb), beta, part, Mat { offset: 0, rows, ..mc });
            });
            return;
        }
    }
    product(alpha, (a, ma), (b, mb), beta, c, Mat { offset: 0, ..mc });
}

/// One call of the kernel on checked views.
fn product<F: Real>(alpha: F, (a, ma): (&[F], Mat), (b, mb): (&[F], Mat), beta: F, c: &mut [F], mc: Mat) {
    assert!(ma.fits(a.len()) && mb.fits(b.len()) && mc.fits(c.len()), "gemm view out of bounds");
    let k = ma.cols;
    if k == 0 {
        // An empty sum: c ← beta·c.
        for i in 0..mc.rows {
            for x in &mut c[i * mc.rs..][..mc.cols] {
                *x = if beta == F::zero() { F::zero() } else { beta * *x };
            }
        }
        return;
    }
    let av = ma.view(a[ma.offset..].as_ptr());
    let bv = mb.view(b[mb.offset..].as_ptr());
    let cv = mc.view(c[mc.offset..].as_mut_ptr());
    // SAFETY: every view was checked to lie inside its slice (`fits`), c's rows do not overlap
    // (checked in `gemm`), and `c` is a unique borrow, so it overlaps neither `a` nor `b`.
    unsafe { F::gemm_raw((mc.rows, k, mc.cols), alpha, av, bv, beta, cv) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f64], ma: Mat, b: &[f64], mb: Mat) -> Vec<f64> {
        let mut out = vec![0.0; ma.rows * mb.cols];
        for i in 0..ma.rows {
            for j in 0..mb.cols {
                out[i * mb.cols + j] = (0..ma.cols)
                    .map(|p| a[ma.offset + i * ma.rs + p * ma.cs] * b[mb.offset + p * mb.rs + j * mb.cs])
                    .sum();
            }
        }
        out
    }

    // Native only: the split uses rayon, which the wasm32 build does not have.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn strided_and_transposed_products_match_a_naive_loop_split_or_not() {
        // On a pool of two threads, so the split path runs on any machine. The first shape is
        // over SPLIT_MACS (split by rows), the others under it.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a thread pool");
        for (m, k, n) in [(301, 80, 90), (5, 3, 4), (64, 1, 33)] {
            assert_eq!(m * k * n >= SPLIT_MACS, m == 301, "{m}×{k}×{n}");
            let a: Vec<f64> = (0..m * k * 2 + 7).map(|i| ((i * 37 % 101) as f64) / 50.0 - 1.0).collect();
            let b: Vec<f64> = (0..k * n + 3).map(|i| ((i * 53 % 97) as f64) / 40.0 - 1.2).collect();
            // a: every other column of a wider matrix, offset 7; b read transposed from (n,k).
            let ma = Mat { offset: 7, rows: m, cols: k, rs: 2 * k, cs: 2 };
            let mb = Mat::dense(n, k).t();
            let want = naive(&a, ma, &b, mb);
            // c: columns 5..5+n of rows 3n wide (one head's columns of a wider output), in a
            // slice that goes on for twice c's length past its last row (as head 0's scores
            // before the other heads'); everything outside c stays as it was.
            let (c_offset, c_rs) = (5, 3 * n);
            let mc = Mat::strided(c_offset, m, n, c_rs);
            let inside = |i: usize| i >= c_offset && (i - c_offset) % c_rs < n && (i - c_offset) / c_rs < m;
            let check = |c: &[f64], times: f64| {
                for (idx, x) in c.iter().enumerate() {
                    if inside(idx) {
                        let (i, j) = ((idx - c_offset) / c_rs, (idx - c_offset) % c_rs);
                        let y = times * want[i * n + j];
                        assert!((x - y).abs() < 1e-9, "{m}×{k}×{n} ({i}, {j}): {x} vs {y}");
                    } else {
                        assert_eq!(*x, 1.0, "{m}×{k}×{n}: element {idx} outside the view changed");
                    }
                }
            };
            let mut c = vec![1.0; 3 * m * c_rs + 9];
            pool.install(|| gemm(1.0, (&a, ma), (&b, mb), 0.0, (&mut c, mc)));
            check(&c, 1.0);
            // beta = 1 accumulates; alpha scales.
            pool.install(|| gemm(0.5, (&a, ma), (&b, mb), 1.0, (&mut c, mc)));
            check(&c, 1.5);
        }
    }

    #[test]
    fn an_empty_sum_scales_the_output_and_bad_views_panic() {
        let mut c = vec![f32::NAN; 6];
        gemm(1.0, (&[], Mat::dense(2, 0)), (&[], Mat::dense(0, 3)), 0.0, (&mut c, Mat::dense(2, 3)));
        assert_eq!(c, vec![0.0; 6]);
        let r = std::panic::catch_unwind(|| {
            let mut c = vec![0f32; 4];
            gemm(1.0, (&[1.0; 3], Mat::dense(2, 2)), (&[1.0; 4], Mat::dense(2, 2)), 0.0, (&mut c, Mat::dense(2, 2)));
        });
        assert!(r.is_err(), "a view past its slice must not reach the kernel");
    }
}
