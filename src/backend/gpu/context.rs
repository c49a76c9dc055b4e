//! The wgpu device the kernels run on: either eframe's (shared with the UI) or a headless one.

use std::sync::{Arc, Mutex};

use super::GpuError;
use super::kernels::GemmKind;

/// `SUBGROUP` where the adapter has it, natively: what [`GemmKind::Subgroup8`] needs. Not on
/// the web: browsers compile WGSL themselves and require `enable subgroups;`, which naga (that
/// validates it first) does not parse yet.
pub fn subgroup_feature(adapter: &wgpu::Adapter) -> wgpu::Features {
    if cfg!(target_arch = "wasm32") { wgpu::Features::empty() } else { adapter.features() & wgpu::Features::SUBGROUP }
}

/// Workgroup resources the kernels need (see the shaders' `@workgroup_size` and
/// `var<workgroup>` declarations): the 16×16 GEMM tile and 256-wide elementwise kernels.
const NEEDED_INVOCATIONS: u32 = 256;
const NEEDED_WORKGROUP_STORAGE: u32 = 8 * 1024;

/// A device and queue plus what we know about the adapter.
#[derive(Clone, Debug)]
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter_info: wgpu::AdapterInfo,
    /// Errors that escaped every error scope (they would otherwise panic), newest last.
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// Why the device was lost, once it has been.
    lost: Arc<Mutex<Option<String>>>,
}

impl GpuContext {
    /// Wraps an existing device (e.g. eframe's `wgpu_render_state`). Checks the workgroup
    /// limits the kernels need and routes uncaptured errors to a log instead of a panic.
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter_info: wgpu::AdapterInfo,
    ) -> Result<Self, GpuError> {
        let limits = device.limits();
        check_workgroup_limits(&limits)?;
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            log::error!("uncaptured wgpu error: {e}");
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            log::error!("the GPU device was lost ({reason:?}): {message}");
            if let Ok(mut l) = lost_sink.lock() {
                *l = Some(if message.is_empty() { format!("{reason:?}") } else { format!("{reason:?}: {message}") });
            }
        });
        Ok(Self { device, queue, adapter_info, uncaptured, lost })
    }

    /// An error if the device has been lost (driver reset, GPU removed, device destroyed); work
    /// submitted to a lost device would never complete.
    pub fn check_alive(&self) -> Result<(), GpuError> {
        match self.lost.lock().ok().and_then(|l| l.clone()) {
            Some(reason) => Err(GpuError::DeviceLost(format!(
                "{reason}. Restart oomlab, or use --backend cpu; nothing was lost but this step"
            ))),
            None => Ok(()),
        }
    }

    /// Creates a headless device on the best adapter (honours `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME`). Requests the adapter's own limits so large configs fit, and
    /// `SHADER_F16` where the adapter has it (fp16 tensors are then stored as `f16`).
    pub async fn new_headless() -> Result<Self, GpuError> {
        Self::new_headless_with(true).await
    }

    /// [`Self::new_headless`], requesting `SHADER_F16` only if `f16` (and the adapter has it):
    /// without it fp16 tensors are packed two per `u32`, as on adapters that lack the feature.
    pub async fn new_headless_with(f16: bool) -> Result<Self, GpuError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let limits = adapter.limits();
        check_workgroup_limits(&limits)?;
        let features = if f16 { adapter.features() & wgpu::Features::SHADER_F16 } else { wgpu::Features::empty() };
        let features = features | subgroup_feature(&adapter);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("oomlab headless"),
                required_features: features,
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;
        Self::from_device(device, queue, adapter.get_info())
    }

    /// Blocking [`Self::new_headless`], for the CLI and tests.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_headless_blocking() -> Result<Self, GpuError> {
        pollster::block_on(Self::new_headless())
    }

    pub fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// The GEMM kernel for this device: [`GemmKind::Subgroup8`] natively where the device has
    /// subgroups of exactly 8 lanes (lavapipe on AVX2 hosts), else [`GemmKind::Tiled`].
    /// `OOMLAB_GEMM=tiled` forces the tiled kernel (to compare the two).
    pub fn gemm_kind(&self) -> GemmKind {
        let forced_tiled = std::env::var("OOMLAB_GEMM").is_ok_and(|v| v.eq_ignore_ascii_case("tiled"));
        let info = &self.adapter_info;
        let eight = info.subgroup_min_size == 8 && info.subgroup_max_size == 8;
        if !forced_tiled
            && eight
            && self.device.features().contains(wgpu::Features::SUBGROUP)
            && !cfg!(target_arch = "wasm32")
        {
            GemmKind::Subgroup8
        } else {
            GemmKind::Tiled
        }
    }

    /// Whether shaders may store `f16` (the device has `SHADER_F16`).
    pub fn native_f16(&self) -> bool {
        self.device.features().contains(wgpu::Features::SHADER_F16)
    }

    /// "llvmpipe (LLVM 15.0.6, 256 bits) on Vulkan".
    pub fn describe(&self) -> String {
        // Browsers do not name their adapter.
        let name = if self.adapter_info.name.is_empty() { "WebGPU adapter" } else { &self.adapter_info.name };
        format!("{name} on {:?}", self.adapter_info.backend)
    }

    /// Takes the errors that escaped every error scope since the last call.
    pub fn take_uncaptured_errors(&self) -> Vec<String> {
        self.uncaptured.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }

    /// Runs `f` inside out-of-memory and validation error scopes and reports what they caught.
    pub async fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T, GpuError> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        let validation = validation.pop();
        let oom = oom.pop();
        // Scopes must be popped in reverse order of pushing; the futures resolve once the
        // device has processed the work (immediately on native).
        if let Some(e) = validation.await {
            return Err(GpuError::Validation(format!("{what}: {e}")));
        }
        if let Some(e) = oom.await {
            return Err(GpuError::OutOfMemory(format!("{what}: {e}")));
        }
        Ok(value)
    }
}

fn check_workgroup_limits(limits: &wgpu::Limits) -> Result<(), GpuError> {
    let checks = [
        ("max_compute_invocations_per_workgroup", NEEDED_INVOCATIONS, limits.max_compute_invocations_per_workgroup),
        ("max_compute_workgroup_size_x", NEEDED_INVOCATIONS, limits.max_compute_workgroup_size_x),
        ("max_compute_workgroup_size_y", 16, limits.max_compute_workgroup_size_y),
        ("max_compute_workgroup_storage_size", NEEDED_WORKGROUP_STORAGE, limits.max_compute_workgroup_storage_size),
        ("max_storage_buffers_per_shader_stage", 8, limits.max_storage_buffers_per_shader_stage),
    ];
    for (what, needed, limit) in checks {
        if limit < needed {
            return Err(GpuError::ExceedsLimit {
                what: what.to_string(),
                needed: needed as u64,
                limit: limit as u64,
                bytes: what.contains("storage_size"),
            });
        }
    }
    Ok(())
}
