//! The CPU twins' number type and the two things it does per type: the matrix product kernel
//! (`matrixmultiply`'s sgemm or dgemm) and GELU's tanh (a vectorisable one for f32, the exact
//! one for f64, which the finite-difference checks use).

use num_traits::Float;

/// The CPU twins' number type: f32 (the backend) or f64 (the finite-difference checks), shared
/// between threads on native.
pub trait Real: Float + Send + Sync + 'static {
    /// c ← alpha·a·b + beta·c for raw strided pointers (c is not read when beta is 0).
    ///
    /// # Safety
    /// Every element the strides reach must lie inside its allocation, and `c` must not
    /// overlap `a`, `b` or itself. Only `gemm::gemm` calls this, after checking both.
    #[doc(hidden)]
    unsafe fn gemm_raw(
        dims: (usize, usize, usize),
        alpha: Self,
        a: View<*const Self>,
        b: View<*const Self>,
        beta: Self,
        c: View<*mut Self>,
    );

    /// tanh for GELU, where it is added to 1: within 2e-7 of tanh for f32 (absolute), exact
    /// for f64.
    fn gelu_tanh(self) -> Self;
}

/// A raw pointer with its row and column strides.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct View<P> {
    pub(super) ptr: P,
    pub(super) rs: isize,
    pub(super) cs: isize,
}

impl Real for f32 {
    unsafe fn gemm_raw(
        (m, k, n): (usize, usize, usize),
        alpha: f32,
        a: View<*const f32>,
        b: View<*const f32>,
        beta: f32,
        c: View<*mut f32>,
    ) {
        // SAFETY: the caller's contract (bounds and no overlap) is matrixmultiply's.
        unsafe { matrixmultiply::sgemm(m, k, n, alpha, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, beta, c.ptr, c.rs, c.cs) }
    }

    #[inline]
    fn gelu_tanh(self) -> f32 {
        tanh_f32(self)
    }
}

impl Real for f64 {
    unsafe fn gemm_raw(
        (m, k, n): (usize, usize, usize),
        alpha: f64,
        a: View<*const f64>,
        b: View<*const f64>,
        beta: f64,
        c: View<*mut f64>,
    ) {
        // SAFETY: as for f32.
        unsafe { matrixmultiply::dgemm(m, k, n, alpha, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, beta, c.ptr, c.rs, c.cs) }
    }

    #[inline]
    fn gelu_tanh(self) -> f64 {
        self.tanh()
    }
}

/// tanh(x) = 1 − 2/(e^{2x} + 1), with e^{2x} from [`exp_f32`]: straight-line arithmetic, so a
/// loop of it vectorises (the C library's tanhf was a fifth of the CPU step, measured). Its
/// error is absolute (≤ 2e-7), not relative: right for GELU's 1 + tanh, not for tanh near 0.
/// Past |x| = 10, f32's tanh is ±1; NaN stays NaN.
#[inline]
fn tanh_f32(x: f32) -> f32 {
    let e = exp_f32(2.0 * x.clamp(-10.0, 10.0));
    1.0 - 2.0 / (e + 1.0)
}

/// e^x for |x| ≤ 20 (Cephes' expf): x = n·ln 2 + r with |r| ≤ ln2/2, e^r by a degree-6
/// polynomial, 2^n put into the exponent bits. Rounding to n uses the 1.5·2²³ trick, which
/// leaves n in the low bits, so there is no float-to-int conversion to stop vectorisation.
#[inline]
fn exp_f32(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5·2²³
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // n as an integer is t's bits minus MAGIC's (both in [2²³, 2²⁴), one binade).
    let k = t.to_bits().wrapping_sub(MAGIC.to_bits());
    y * f32::from_bits(k.wrapping_add(127) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_f32_tanh_is_within_2e7_of_tanh_everywhere_and_keeps_nan() {
        let mut worst = 0.0f64;
        for i in -400_000..=400_000 {
            let x = i as f32 * 3e-5; // -12 … 12, dense around 0
            let err = (f64::from(tanh_f32(x)) - f64::from(x).tanh()).abs();
            worst = worst.max(err);
        }
        assert!(worst <= 2e-7, "worst absolute error {worst:e}");
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        for x in [-20.0f32, -3.5, -0.25, 0.0, 0.5, 7.0, 20.0] {
            let rel = (f64::from(exp_f32(x)) / f64::from(x).exp() - 1.0).abs();
            assert!(rel < 4e-7, "exp({x}) off by {rel:e}");
        }
    }
}
