//! One struct per op, each owning the pipelines of one `.wgsl` file, built once per device.
//! A struct's methods *record* dispatches (uniforms + bindings + grid) into a [`Recorder`];
//! the executor turns the records into bind groups once and replays them every step.

pub mod adamw;
pub mod attention;
mod check_finite;
pub mod cross_entropy;
mod embedding;
mod flash_attention;
mod gelu;
mod kv_cache;
mod layernorm;
pub mod matmul;
mod reduce;
mod residual;
pub mod sgd;
pub mod storage;
pub mod wgsl_text;

pub use adamw::AdamW;
pub use attention::Attention;
pub use check_finite::CheckFinite;
pub use cross_entropy::CrossEntropy;
pub use embedding::Embedding;
pub use flash_attention::FlashAttention;
pub use gelu::Gelu;
pub use kv_cache::KvCache;
pub use layernorm::LayerNorm;
pub use matmul::{Gemm, GemmKind, Matmul};
pub use reduce::{Encoding, Reduce, ReduceTarget};
pub use residual::Residual;
pub use sgd::{Sgd, SgdParams, SgdViews};
pub use storage::Storage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::plan::{DType, Phase, View};

use super::GpuError;

/// The preamble every shader is loaded with, without its comments, as every shader below
/// ([`wgsl_text`]: the build script writes them so).
pub const COMMON: &str = include_str!(concat!(env!("OUT_DIR"), "/shaders/common.wgsl"));

/// A shader as the crate embeds it: the preamble, (the file it is loaded after,) the file, each
/// without its comments.
macro_rules! shader {
    ($file:literal) => {
        (
            $file,
            concat!(
                include_str!(concat!(env!("OUT_DIR"), "/shaders/common.wgsl")),
                include_str!(concat!(env!("OUT_DIR"), "/shaders/", $file))
            ),
        )
    };
    ($file:literal after $base:literal) => {
        (
            $file,
            concat!(
                include_str!(concat!(env!("OUT_DIR"), "/shaders/common.wgsl")),
                include_str!(concat!(env!("OUT_DIR"), "/shaders/", $base)),
                include_str!(concat!(env!("OUT_DIR"), "/shaders/", $file))
            ),
        )
    };
}

/// Every shader, by file name, for validation and for building: `shaders/common.wgsl` (what they
/// share) followed by the shader's own file.
pub const SHADERS: &[(&str, &str)] = &[
    shader!("adamw.wgsl"),
    shader!("attention.wgsl"),
    shader!("check_finite.wgsl"),
    shader!("cross_entropy.wgsl"),
    shader!("embedding.wgsl"),
    shader!("flash_attention.wgsl"),
    shader!("gelu.wgsl"),
    shader!("kv_cache.wgsl"),
    shader!("layernorm.wgsl"),
    shader!("matmul.wgsl"),
    // An entry point of its own file (it needs subgroups) that shares matmul.wgsl's declarations.
    shader!("matmul_sg8.wgsl" after "matmul.wgsl"),
    shader!("reduce.wgsl"),
    shader!("residual.wgsl"),
    shader!("sgd.wgsl"),
];

fn shader_source(file: &str) -> &'static str {
    SHADERS.iter().find(|(name, _)| *name == file).map_or("", |(_, src)| src)
}

/// One entry point: its pipeline and the layout of its bind group (binding 0 is the uniform,
/// the listed bindings are read_write storage). The pipeline is the all-fp32 one; 16-bit
/// variants are built on demand by [`Kernels::pipeline`] with the same layout.
#[derive(Clone, Debug)]
pub struct KernelEntry {
    pub name: &'static str,
    pub file: &'static str,
    /// Its storage binding numbers, declared once in [`build_entries`]: a dispatch lists its
    /// buffers in this order.
    pub slots: &'static [u32],
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    pub pipeline_layout: wgpu::PipelineLayout,
}

/// 16-bit variants of the entries, built the first time a dispatch needs one.
type VariantKey = (&'static str, &'static str, Vec<(u32, Storage)>);

#[derive(Clone, Debug, Default)]
pub struct Variants(Arc<Mutex<HashMap<VariantKey, wgpu::ComputePipeline>>>);

/// Builds the entries of one shader file. `entries` lists (entry point, storage bindings).
fn build_entries<const N: usize>(
    device: &wgpu::Device,
    file: &'static str,
    entries: [(&'static str, &'static [u32]); N],
) -> [KernelEntry; N] {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(file),
        source: wgpu::ShaderSource::Wgsl(shader_source(file).into()),
    });
    entries.map(|(name, storage)| {
        let mut layout_entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }];
        layout_entries.extend(storage.iter().map(|&binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }));
        let layout = device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &layout_entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(name),
            compilation_options: Default::default(),
            cache: None,
        });
        KernelEntry { name, file, slots: storage, pipeline, layout, pipeline_layout }
    })
}

/// What a storage binding points at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Binding {
    View(View),
    /// A small placeholder buffer for a binding the dispatch does not read.
    Dummy,
}

/// One recorded dispatch.
#[derive(Clone, Debug)]
pub struct DispatchSpec {
    pub entry: KernelEntry,
    /// The 16-bit bindings (empty: the fp32 pipeline).
    pub storages: Vec<(u32, Storage)>,
    /// Byte offset and size of its uniform in the step's uniform buffer.
    pub uniform: (u64, u64),
    pub bindings: Vec<(u32, Binding)>,
    pub groups: [u32; 3],
}

/// A recorded command of the step.
#[derive(Clone, Debug)]
pub enum Command {
    Dispatch(DispatchSpec),
    /// Zero a view (encoder-level `clear_buffer`).
    Clear(View),
}

/// Collects the commands of a plan and the bytes of their uniforms.
pub struct Recorder {
    pub uniforms: Vec<u8>,
    pub commands: Vec<(Phase, String, Command)>,
    /// Largest workgroup count per dimension (from the device limits).
    pub max_groups: u32,
    phase: Phase,
    label: String,
    /// Every tensor's dtype (by tensor id), and whether the device stores f16 natively: what
    /// picks a dispatch's 16-bit variant.
    dtypes: Vec<DType>,
    native_f16: bool,
    /// The uniform offset of the last dispatch recorded.
    last_uniform: Option<u64>,
}

/// Uniform slots are 256-byte aligned: wgpu's largest `min_uniform_buffer_offset_alignment`.
pub const UNIFORM_ALIGN: usize = 256;

impl Recorder {
    pub fn new(max_groups: u32) -> Self {
        Self {
            uniforms: Vec::new(),
            commands: Vec::new(),
            max_groups,
            phase: Phase::Forward,
            label: String::new(),
            dtypes: Vec::new(),
            native_f16: false,
            last_uniform: None,
        }
    }

    /// The tensors' dtypes, so that dispatches binding 16-bit tensors use 16-bit variants.
    pub fn set_dtypes(&mut self, dtypes: Vec<DType>, native_f16: bool) {
        self.dtypes = dtypes;
        self.native_f16 = native_f16;
    }

    /// Byte offset of the last recorded dispatch's uniform (to rewrite it every step).
    pub fn last_uniform(&self) -> Option<u64> {
        self.last_uniform
    }

    pub fn set_context(&mut self, phase: Phase, label: &str) {
        self.phase = phase;
        self.label = label.to_string();
    }

    /// Appends a uniform and returns its (offset, size).
    pub fn uniform<T: bytemuck::Pod>(&mut self, value: &T) -> (u64, u64) {
        let offset = self.uniforms.len().div_ceil(UNIFORM_ALIGN) * UNIFORM_ALIGN;
        self.uniforms.resize(offset, 0);
        self.uniforms.extend_from_slice(bytemuck::bytes_of(value));
        (offset as u64, std::mem::size_of::<T>() as u64)
    }

    /// Records one dispatch of `entry`: `bindings` are its buffers in the order of its slots.
    pub fn dispatch<T: bytemuck::Pod>(
        &mut self,
        entry: &KernelEntry,
        params: &T,
        bindings: &[Binding],
        groups: [u32; 3],
    ) -> Result<(), GpuError> {
        if bindings.len() != entry.slots.len() {
            return Err(GpuError::Validation(format!(
                "{} in {} takes {} buffers, {} given ({})",
                entry.name,
                entry.file,
                entry.slots.len(),
                bindings.len(),
                self.label
            )));
        }
        let bindings: Vec<(u32, Binding)> = entry.slots.iter().copied().zip(bindings.iter().copied()).collect();
        if groups.iter().any(|&g| g > self.max_groups) {
            return Err(GpuError::ExceedsLimit {
                what: format!("workgroups per dimension for {} ({})", entry.name, self.label),
                needed: groups.iter().copied().max().unwrap_or(0) as u64,
                limit: self.max_groups as u64,
                bytes: false,
            });
        }
        if groups.contains(&0) {
            return Ok(());
        }
        let uniform = self.uniform(params);
        self.last_uniform = Some(uniform.0);
        let storages: Vec<(u32, Storage)> = bindings
            .iter()
            .filter_map(|(b, binding)| match binding {
                Binding::View(v) => {
                    let dtype = self.dtypes.get(v.tensor.0).copied().unwrap_or(DType::F32);
                    let s = Storage::of(dtype, self.native_f16);
                    (s != Storage::F32).then_some((*b, s))
                }
                Binding::Dummy => None,
            })
            .collect();
        let spec = DispatchSpec { entry: entry.clone(), storages, uniform, bindings, groups };
        self.commands.push((self.phase, self.label.clone(), Command::Dispatch(spec)));
        Ok(())
    }

    pub fn clear(&mut self, view: View) {
        self.commands.push((self.phase, self.label.clone(), Command::Clear(view)));
    }

    /// Grid for `n` threads in 1-D workgroups of `size`, folded into y past the per-dimension
    /// limit (kernels compute `(wg.y·nwg.x + wg.x)·size + lid.x`).
    pub fn grid_1d<N: TryInto<u64>>(&self, n: N, size: u32) -> [u32; 3] {
        let groups = n.try_into().unwrap_or(u64::MAX).div_ceil(size.max(1) as u64);
        let max = self.max_groups.max(1) as u64;
        if groups <= max {
            [groups as u32, 1, 1]
        } else {
            [max as u32, groups.div_ceil(max).min(u32::MAX as u64) as u32, 1]
        }
    }
}

/// All kernels, built once per device.
#[derive(Clone, Debug)]
pub struct Kernels {
    pub embedding: Embedding,
    pub layernorm: LayerNorm,
    pub matmul: Matmul,
    pub attention: Attention,
    pub flash_attention: FlashAttention,
    pub gelu: Gelu,
    pub kv_cache: KvCache,
    pub residual: Residual,
    pub cross_entropy: CrossEntropy,
    pub adamw: AdamW,
    pub sgd: Sgd,
    pub check_finite: CheckFinite,
    pub reduce: Reduce,
    variants: Variants,
}

impl Kernels {
    /// Every pipeline, with the GEMM of `gemm` (`GpuContext::gemm_kind`: the fastest the device
    /// runs).
    pub fn new(device: &wgpu::Device, gemm: GemmKind) -> Self {
        let matmul = Matmul::new(device, gemm);
        Self {
            embedding: Embedding::new(device),
            layernorm: LayerNorm::new(device),
            attention: Attention::new(device, matmul.gemm.clone()),
            flash_attention: FlashAttention::new(device),
            matmul,
            gelu: Gelu::new(device),
            kv_cache: KvCache::new(device),
            residual: Residual::new(device),
            cross_entropy: CrossEntropy::new(device),
            adamw: AdamW::new(device),
            sgd: Sgd::new(device),
            check_finite: CheckFinite::new(device),
            reduce: Reduce::new(device),
            variants: Variants::default(),
        }
    }

    /// The pipeline of a dispatch: the entry's own, or its 16-bit variant (built once per
    /// device and kept). Call inside an error scope.
    pub fn pipeline(&self, device: &wgpu::Device, spec: &DispatchSpec) -> wgpu::ComputePipeline {
        if spec.storages.is_empty() {
            return spec.entry.pipeline.clone();
        }
        let key = (spec.entry.file, spec.entry.name, spec.storages.clone());
        if let Some(p) = self.variants.0.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return p;
        }
        let source = storage::specialize(shader_source(spec.entry.file), &spec.storages);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(spec.entry.file),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(spec.entry.name),
            layout: Some(&spec.entry.pipeline_layout),
            module: &module,
            entry_point: Some(spec.entry.name),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Ok(mut m) = self.variants.0.lock() {
            m.insert(key, pipeline.clone());
        }
        pipeline
    }
}

/// A size as a shader's u32 (saturating; the executor checks every binding against the
/// adapter's limits first, so real sizes fit).
pub(crate) fn u<T: TryInto<u32>>(x: T) -> u32 {
    x.try_into().unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::GpuContext;
    use crate::plan::TensorId;

    /// A dispatch lists its buffers in the order of the entry's slots (declared once, in
    /// `build_entries`); a list of the wrong length is refused instead of binding the wrong slots.
    #[test]
    fn dispatch_binds_buffers_to_the_declared_slots() {
        let ctx = GpuContext::new_headless_blocking().expect("a GPU adapter");
        let gelu = Gelu::new(&ctx.device);
        assert_eq!(gelu.forward.slots, &[1, 2]);
        let view = |i| Binding::View(View { tensor: TensorId(i), offset: 0, len: 8 });
        let mut rec = Recorder::new(65_535);
        rec.dispatch(&gelu.forward, &[0u32; 4], &[view(0), view(1)], [1, 1, 1]).expect("two buffers for two slots");
        match &rec.commands[0].2 {
            Command::Dispatch(spec) => assert_eq!(spec.bindings, vec![(1, view(0)), (2, view(1))]),
            other => panic!("expected a dispatch, got {other:?}"),
        }
        let err = rec.dispatch(&gelu.forward, &[0u32; 4], &[view(0)], [1, 1, 1]).expect_err("one buffer for two slots");
        assert!(err.to_string().contains("takes 2 buffers, 1 given"), "{err}");
        assert_eq!(rec.commands.len(), 1);
    }
}
