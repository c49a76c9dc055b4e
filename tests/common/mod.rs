//! Shared test helpers: the headless GPU (a missing adapter fails the test: CI must have
//! lavapipe), random data, error metrics, and a harness that runs single ops on both backends.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use oomlab::backend::cpu::CpuExecutor;
use oomlab::backend::gpu::executor::{build_kernels, build_kernels_with};
use oomlab::backend::gpu::kernels::GemmKind;
use oomlab::backend::gpu::{GpuContext, GpuExecutor, Kernels};
use oomlab::model::init::Rng;
use oomlab::model::{ModelConfig, ParamLayout, StepShape};
use oomlab::plan::{
    Category, DType, Handles, MicroHandles, Op, OpNode, OptimizerConfig, Phase, Plan, Techniques, TensorId, TensorInfo,
    View,
};

pub struct Gpu {
    pub ctx: GpuContext,
    pub kernels: Arc<Kernels>,
}

/// The test GPU, opened once per test binary. Panics (fails the test) when there is none.
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            let dir = std::env::temp_dir().join(format!("oomlab-xdg-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&dir);
            // SAFETY: set once, before any other thread of this process reads the environment.
            unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
        }
        let ctx =
            GpuContext::new_headless_blocking().expect("a GPU adapter (install mesa-vulkan-drivers for lavapipe)");
        let kernels = pollster::block_on(build_kernels(&ctx)).expect("kernels build");
        Gpu { ctx, kernels }
    })
}

/// The test GPU's device with the tiled GEMM forced (its default kernels use the subgroup GEMM
/// where the device has 8-lane subgroups, as lavapipe does), built once.
pub fn gpu_tiled() -> &'static Gpu {
    static TILED: OnceLock<Gpu> = OnceLock::new();
    TILED.get_or_init(|| {
        let ctx = gpu().ctx.clone();
        let kernels = pollster::block_on(build_kernels_with(&ctx, GemmKind::Tiled)).expect("kernels build");
        Gpu { ctx, kernels }
    })
}

/// Every GEMM kernel the test device runs: its default, and the tiled one when that is not it.
pub fn gemm_gpus() -> Vec<&'static Gpu> {
    let g = gpu();
    if g.kernels.matmul.gemm.kind() == GemmKind::Tiled { vec![g] } else { vec![g, gpu_tiled()] }
}

pub fn random(rng: &mut Rng, n: usize, scale: f64) -> Vec<f32> {
    (0..n).map(|_| (rng.normal() * scale) as f32).collect()
}

/// max|a − b| / max|b| (normwise relative error; robust to elements near zero).
pub fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let diff = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
    let scale = b.iter().map(|y| (*y as f64).abs()).fold(0.0, f64::max);
    if scale == 0.0 { diff } else { diff / scale }
}

/// A hand-built plan of a few tensors and ops, run on both backends.
pub struct Case {
    pub model: ModelConfig,
    pub shape: StepShape,
    tensors: Vec<TensorInfo>,
    ops: Vec<OpNode>,
    f32_inputs: Vec<(TensorId, Vec<f32>)>,
    u32_inputs: Vec<(TensorId, Vec<u32>)>,
    pub rng: Rng,
}

impl Case {
    pub fn new(model: ModelConfig, shape: StepShape, seed: u64) -> Self {
        let mut case = Self {
            model,
            shape,
            tensors: Vec::new(),
            ops: Vec::new(),
            f32_inputs: Vec::new(),
            u32_inputs: Vec::new(),
            rng: Rng::new(seed),
        };
        // handles of the plan that single-op cases do not use
        case.tensor("unused.f32", &[1], DType::F32);
        case.tensor("unused.u32", &[1], DType::U32);
        case
    }

    fn tensor(&mut self, name: &str, shape: &[usize], dtype: DType) -> View {
        let id = TensorId(self.tensors.len());
        self.tensors.push(TensorInfo {
            name: name.into(),
            shape: shape.iter().map(|&d| d as u64).collect(),
            dtype,
            // Input: held for the whole step, as a test holds its inputs and reads its outputs
            // afterwards (a temporary would be freed, and its memory reused, after its last use).
            category: Category::Input,
            layer: None,
            persistent: false,
            host: false,
        });
        View { tensor: id, offset: 0, len: shape.iter().product::<usize>() as u64 }
    }

    /// An f32 tensor filled with N(0, scale²) values.
    pub fn input(&mut self, name: &str, shape: &[usize], scale: f64) -> View {
        let v = self.tensor(name, shape, DType::F32);
        let data = random(&mut self.rng, v.len as usize, scale);
        self.f32_inputs.push((v.tensor, data));
        v
    }

    pub fn input_values(&mut self, name: &str, values: Vec<f32>) -> View {
        let v = self.tensor(name, &[values.len()], DType::F32);
        self.f32_inputs.push((v.tensor, values));
        v
    }

    pub fn input_u32(&mut self, name: &str, values: Vec<u32>) -> View {
        let v = self.tensor(name, &[values.len()], DType::U32);
        self.u32_inputs.push((v.tensor, values));
        v
    }

    /// An output tensor (zero, or random when it is accumulated into).
    pub fn output(&mut self, name: &str, shape: &[usize]) -> View {
        self.tensor(name, shape, DType::F32)
    }

    pub fn op(&mut self, op: Op) {
        self.ops.push(OpNode { op, phase: Phase::Forward, label: "test".into(), recompute: false });
    }

    pub fn plan(&self, optimizer: OptimizerConfig) -> Plan {
        let (f, u) = (TensorId(0), TensorId(1));
        let micro =
            MicroHandles { tokens: u, targets: u, token_offsets: u, token_positions: u, loss: f, packing: None };
        let handles = Handles {
            params: f,
            trainable: f,
            grads: f,
            master: None,
            found_inf: None,
            micro: vec![micro],
            serving: None,
        };
        Plan {
            model: self.model,
            shape: self.shape,
            batches: oomlab::plan::Batches::micro(self.shape.batch, 1, 1).expect("a test's batch"),
            optimizer,
            techniques: Techniques::default(),
            layout: ParamLayout::new(&self.model),
            lora: None,
            tensors: self.tensors.clone(),
            ops: self.ops.clone(),
            handles,
            rank: 0,
        }
    }

    /// Runs the ops `runs` times on both backends; returns (cpu, gpu) executors.
    pub fn run(&self, optimizer: OptimizerConfig, runs: usize) -> (CpuExecutor<f32>, GpuExecutor) {
        self.run_on(gpu(), optimizer, runs)
    }

    /// [`Self::run`] on the given GPU kernels.
    pub fn run_on(&self, g: &Gpu, optimizer: OptimizerConfig, runs: usize) -> (CpuExecutor<f32>, GpuExecutor) {
        let plan = self.plan(optimizer);
        let mut cpu = CpuExecutor::<f32>::new(plan.clone(), 0).expect("cpu executor");
        let mut gpu_exec = pollster::block_on(GpuExecutor::new(&g.ctx, &g.kernels, plan, 0)).expect("gpu executor");
        for (id, data) in &self.f32_inputs {
            cpu.write_tensor(*id, data);
            gpu_exec.write_tensor(*id, bytemuck::cast_slice(data));
        }
        for (id, data) in &self.u32_inputs {
            cpu.write_tensor_u32(*id, data);
            gpu_exec.write_tensor(*id, bytemuck::cast_slice(data));
        }
        for _ in 0..runs {
            cpu.run_phases(&[Phase::Forward]).expect("cpu run");
            pollster::block_on(gpu_exec.run_phases(&[Phase::Forward])).expect("gpu run");
        }
        (cpu, gpu_exec)
    }
}

/// Compares one tensor across the backends; prints and returns the relative error.
pub fn compare(what: &str, cpu: &CpuExecutor<f32>, gpu: &GpuExecutor, v: View, tol: f64) -> f64 {
    let c = &cpu.tensor(v.tensor)[v.offset as usize..(v.offset + v.len) as usize];
    let g = pollster::block_on(gpu.read_view_async(v)).expect("readback");
    let err = rel_err(&g, c);
    println!("{what:<40} max relative error {err:.3e}");
    assert!(err <= tol, "{what}: GPU differs from the CPU twin by {err:.3e} (> {tol:.0e})");
    assert!(c.iter().any(|x| *x != 0.0), "{what}: reference is all zeros — the test would not catch a no-op kernel");
    err
}

/// A warm step (after the first) allocates exactly what the plan predicts, op by op, from the
/// segments earlier steps left cached (PyTorch's steady state): its reserved bytes are at least
/// the cold prediction's at every op.
#[allow(dead_code)]
pub fn assert_warm_step(what: &str, predicted: &oomlab::memory::StepMemory, warm: &oomlab::memory::StepMemory) {
    assert_eq!(warm.timeline.len(), predicted.timeline.len(), "{what}: ops");
    for (p, w) in predicted.timeline.iter().zip(&warm.timeline) {
        assert_eq!(p.op, w.op, "{what}");
        assert_eq!(p.allocated, w.allocated, "{what}: allocated at op {:?}", p.op);
        assert!(w.reserved_bytes >= p.reserved_bytes, "{what}: reserved at op {:?}", p.op);
    }
    assert_eq!(warm.peak_allocated, predicted.peak_allocated, "{what}: at the peak");
    assert_eq!(warm.activation_peak_bytes, predicted.activation_peak_bytes, "{what}: activations");
}
