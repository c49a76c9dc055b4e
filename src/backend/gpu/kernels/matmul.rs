//! `shaders/matmul.wgsl`: the tiled GEMM, and matmul + bias forward and backward on top of it.
//! CPU twins: `cpu::ops::matmul_forward` / `matmul_backward`.

use super::{Binding, KernelEntry, Recorder, build_entries, u};
use crate::backend::gpu::GpuError;
use crate::backend::ix;
use crate::plan::View;
use crate::plan::op;

/// Mirrors `Params` in matmul.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemmParams {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub heads: u32,
    pub a_off: u32,
    pub a_outer: u32,
    pub a_head: u32,
    pub lda: u32,
    pub b_off: u32,
    pub b_outer: u32,
    pub b_head: u32,
    pub ldb: u32,
    pub c_off: u32,
    pub c_outer: u32,
    pub c_head: u32,
    pub ldc: u32,
    pub trans_a: u32,
    pub trans_b: u32,
    pub has_bias: u32,
    pub accumulate: u32,
    pub b_from_a: u32,
    pub alpha: f32,
    pub _pad: [u32; 2],
}

/// One operand of a GEMM: where it starts in its binding and how to step through it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Operand {
    pub offset: usize,
    /// Stride between batch "outer" indices (e.g. B).
    pub outer: usize,
    /// Stride between heads.
    pub head: usize,
    /// Row stride (leading dimension) of the stored matrix.
    pub ld: usize,
    pub transposed: bool,
}

impl Operand {
    pub fn rows(ld: usize) -> Self {
        Self { ld, ..Self::default() }
    }
    pub fn transposed(mut self) -> Self {
        self.transposed = true;
        self
    }
}

/// Which GEMM kernel runs the products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmKind {
    /// `matmul.wgsl`'s `gemm`: 64×64 workgroup tiles staged in workgroup memory. Runs anywhere.
    Tiled,
    /// `matmul_sg8.wgsl`: operands shared by subgroup broadcasts instead of workgroup memory,
    /// for devices whose subgroups are exactly 8 lanes (lavapipe on AVX2), ~2.8× the tiled
    /// kernel's speed there.
    Subgroup8,
}

impl GemmKind {
    pub fn name(self) -> &'static str {
        match self {
            GemmKind::Tiled => "tiled",
            GemmKind::Subgroup8 => "subgroup-8",
        }
    }
}

/// The GEMM entry points, shared by [`Matmul`] and attention.
#[derive(Clone, Debug)]
pub struct Gemm {
    gemm: KernelEntry,
    /// `matmul_sg8.wgsl`'s entry, with [`GemmKind::Subgroup8`].
    sg8: Option<KernelEntry>,
    bias_backward: KernelEntry,
}

/// A batched GEMM call: C = alpha·op(A)·op(B) (+bias) (+C).
#[derive(Clone, Copy, Debug)]
pub struct GemmCall {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub outer: usize,
    pub heads: usize,
    pub a: (View, Operand),
    /// `None`: B is read from A's binding (they are the same tensor).
    pub b: (Option<View>, Operand),
    pub c: (View, Operand),
    pub bias: Option<View>,
    pub alpha: f32,
    pub accumulate: bool,
}

impl GemmCall {
    /// C (m×n) = op(A) (m×k) · op(B) (k×n), one matrix, no bias, overwriting C.
    pub fn new(
        m: usize,
        n: usize,
        k: usize,
        a: (View, Operand),
        b: (Option<View>, Operand),
        c: (View, Operand),
    ) -> Self {
        Self { m, n, k, outer: 1, heads: 1, a, b, c, bias: None, alpha: 1.0, accumulate: false }
    }
    /// One product per (outer, head) pair; operand offsets step by their `outer`/`head` strides.
    pub fn batched(mut self, outer: usize, heads: usize) -> Self {
        self.outer = outer;
        self.heads = heads;
        self
    }
    pub fn bias(mut self, bias: Option<View>) -> Self {
        self.bias = bias;
        self
    }
    pub fn alpha(mut self, alpha: f32) -> Self {
        self.alpha = alpha;
        self
    }
    /// C += … instead of C = ….
    pub fn accumulate(mut self) -> Self {
        self.accumulate = true;
        self
    }
}

impl Gemm {
    pub fn kind(&self) -> GemmKind {
        if self.sg8.is_some() { GemmKind::Subgroup8 } else { GemmKind::Tiled }
    }

    pub fn record(&self, rec: &mut Recorder, call: &GemmCall) -> Result<(), GpuError> {
        let (a, oa) = call.a;
        let (b, ob) = call.b;
        let (c, oc) = call.c;
        let params = GemmParams {
            m: u(call.m),
            n: u(call.n),
            k: u(call.k),
            heads: u(call.heads.max(1)),
            a_off: u(oa.offset),
            a_outer: u(oa.outer),
            a_head: u(oa.head),
            lda: u(oa.ld),
            b_off: u(ob.offset),
            b_outer: u(ob.outer),
            b_head: u(ob.head),
            ldb: u(ob.ld),
            c_off: u(oc.offset),
            c_outer: u(oc.outer),
            c_head: u(oc.head),
            ldc: u(oc.ld),
            trans_a: oa.transposed as u32,
            trans_b: ob.transposed as u32,
            has_bias: call.bias.is_some() as u32,
            accumulate: call.accumulate as u32,
            b_from_a: b.is_none() as u32,
            alpha: call.alpha,
            _pad: [0; 2],
        };
        let bind = |v: Option<View>| v.map_or(Binding::Dummy, Binding::View);
        let groups = [u(call.n.div_ceil(64)), u(call.m.div_ceil(64)), u(call.outer * call.heads.max(1))];
        // The subgroup kernel reads B from its own binding only: when B is A's tensor (QKᵀ) the
        // view is bound twice. Native only (`GemmKind::Subgroup8`), where two storage bindings
        // may share a range; WebGPU forbids writable bindings that alias, hence the tiled
        // kernel's `b_from_a`.
        let (entry, b) = match &self.sg8 {
            Some(sg8) => (sg8, Binding::View(b.unwrap_or(a))),
            None => (&self.gemm, bind(b)),
        };
        rec.dispatch(entry, &params, &[Binding::View(a), b, Binding::View(c), bind(call.bias)], groups)
    }

    /// dbias (n) += Σ over m rows of dout (m, n).
    pub fn record_bias_backward(
        &self,
        rec: &mut Recorder,
        dout: View,
        dbias: View,
        m: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        let params =
            GemmParams { m: u(m), n: u(n), lda: u(n), heads: 1, accumulate: 1, alpha: 1.0, ..Default::default() };
        let groups = [u(n.div_ceil(64)), 1, 1];
        rec.dispatch(
            &self.bias_backward,
            &params,
            &[Binding::View(dout), Binding::Dummy, Binding::View(dbias), Binding::Dummy],
            groups,
        )
    }
}

/// Matmul + bias (Conv1D layout, or the tied lm_head's transposed weight).
#[derive(Clone, Debug)]
pub struct Matmul {
    pub gemm: Gemm,
}

impl Matmul {
    /// `kind` [`GemmKind::Subgroup8`] needs a device with `SUBGROUP` and 8-lane subgroups
    /// (`GpuContext::gemm_kind` decides).
    pub fn new(device: &wgpu::Device, kind: GemmKind) -> Self {
        let [gemm, bias_backward] =
            build_entries(device, "matmul.wgsl", [("gemm", &[1, 2, 3, 4]), ("bias_backward", &[1, 2, 3, 4])]);
        let sg8 = (kind == GemmKind::Subgroup8).then(|| {
            let [e] = build_entries(device, "matmul_sg8.wgsl", [("gemm_sg8", &[1, 2, 3, 4])]);
            e
        });
        Self { gemm: Gemm { gemm, sg8, bias_backward } }
    }

    /// out (rows,n) = inp (rows,k) · W + bias.
    pub fn forward(&self, rec: &mut Recorder, o: &op::Matmul) -> Result<(), GpuError> {
        let op::Matmul { inp, weight, bias, out, rows, k, n, weight_transposed } = *o;
        let (rows, k, n) = (ix(rows), ix(k), ix(n));
        // W is (k,n), or (n,k) when transposed: op(B) = Wᵀ.
        let wb = if weight_transposed { Operand::rows(k).transposed() } else { Operand::rows(n) };
        let call = GemmCall::new(rows, n, k, (inp, Operand::rows(k)), (Some(weight), wb), (out, Operand::rows(n)));
        self.gemm.record(rec, &call.bias(bias))
    }

    /// out (rows,n) += alpha · inp (rows,k) · W (k,n) (LoRA's up-projection).
    pub fn add_forward(&self, rec: &mut Recorder, o: &op::MatmulAdd) -> Result<(), GpuError> {
        let op::MatmulAdd { inp, weight, out, rows, k, n, alpha } = *o;
        let (rows, k, n) = (ix(rows), ix(k), ix(n));
        let call = GemmCall::new(
            rows,
            n,
            k,
            (inp, Operand::rows(k)),
            (Some(weight), Operand::rows(n)),
            (out, Operand::rows(n)),
        );
        self.gemm.record(rec, &GemmCall { alpha: alpha as f32, ..call.accumulate() })
    }

    /// dinp = alpha·dout·Wᵀ; dweight += alpha·inpᵀ·dout.
    pub fn add_backward(&self, rec: &mut Recorder, o: &op::MatmulAddBackward) -> Result<(), GpuError> {
        let op::MatmulAddBackward { inp, weight, dout, dinp, dweight, rows, k, n, alpha } = *o;
        let (rows, k, n) = (ix(rows), ix(k), ix(n));
        let alpha = alpha as f32;
        let dinp_call = GemmCall::new(
            rows,
            k,
            n,
            (dout, Operand::rows(n)),
            (Some(weight), Operand::rows(n).transposed()),
            (dinp, Operand::rows(k)),
        );
        self.gemm.record(rec, &GemmCall { alpha, ..dinp_call })?;
        let dw_call = GemmCall::new(
            k,
            n,
            rows,
            (inp, Operand::rows(k).transposed()),
            (Some(dout), Operand::rows(n)),
            (dweight, Operand::rows(n)),
        );
        self.gemm.record(rec, &GemmCall { alpha, ..dw_call.accumulate() })
    }

    /// dinp (+)= dout·Wᵀ; dweight += inpᵀ·dout (or doutᵀ·inp for the transposed weight);
    /// dbias += Σ_rows dout. A frozen weight (no `dweight`) reads no `inp`.
    pub fn backward(&self, rec: &mut Recorder, o: &op::MatmulBackward) -> Result<(), GpuError> {
        let op::MatmulBackward { inp, weight, dout, dinp, dweight, dbias, rows, k, n, weight_transposed, accumulate } =
            *o;
        let (rows, k, n) = (ix(rows), ix(k), ix(n));
        // dinp (rows,k) = dout (rows,n) · op(W) with op(W) (n,k).
        let wb = if weight_transposed { Operand::rows(k) } else { Operand::rows(n).transposed() };
        let dinp_call =
            GemmCall::new(rows, k, n, (dout, Operand::rows(n)), (Some(weight), wb), (dinp, Operand::rows(k)));
        self.gemm.record(rec, &if accumulate { dinp_call.accumulate() } else { dinp_call })?;
        if let Some(db) = dbias {
            self.gemm.record_bias_backward(rec, dout, db, rows, n)?;
        }
        let Some(dweight) = dweight else { return Ok(()) };
        let call = if weight_transposed {
            // dW (n,k) += doutᵀ (n,rows) · inp (rows,k)
            GemmCall::new(
                n,
                k,
                rows,
                (dout, Operand::rows(n).transposed()),
                (Some(inp), Operand::rows(k)),
                (dweight, Operand::rows(k)),
            )
        } else {
            // dW (k,n) += inpᵀ (k,rows) · dout (rows,n)
            GemmCall::new(
                k,
                n,
                rows,
                (inp, Operand::rows(k).transposed()),
                (Some(dout), Operand::rows(n)),
                (dweight, Operand::rows(n)),
            )
        };
        self.gemm.record(rec, &call.accumulate())
    }
}
