//! The GPU backend: executes a [`Plan`] with the WGSL kernels of `shaders/` through wgpu.
//!
//! Pipelines are built once per device ([`Kernels`]); an executor records the plan's dispatches
//! once (uniforms, bind groups, grids) and replays them every step in one command buffer, with
//! no readback inside it. Only the loss comes back each step.

#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod cluster;
pub mod context;
pub mod executor;
pub mod kernels;

use thiserror::Error;

pub use context::GpuContext;
pub use executor::GpuExecutor;
pub use kernels::Kernels;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum GpuError {
    #[error(
        "no GPU adapter was found ({0}); use --backend cpu, or install a Vulkan driver (e.g. Mesa's lavapipe: apt install mesa-vulkan-drivers)"
    )]
    NoAdapter(String),
    #[error("could not open the GPU device: {0}")]
    RequestDevice(String),
    /// An adapter that draws but cannot compute (a browser's WebGL, by its backend's name).
    #[error("the {0} adapter has no compute shaders")]
    NoCompute(String),
    #[error("{what} needs {}, but this GPU adapter allows at most {}; choose a smaller configuration", fmt_limit(*needed, *bytes), fmt_limit(*limit, *bytes))]
    ExceedsLimit { what: String, needed: u64, limit: u64, bytes: bool },
    #[error("the GPU ran out of memory: {0}")]
    OutOfMemory(String),
    #[error("the GPU rejected the work (validation error): {0}")]
    Validation(String),
    #[error("reading results back from the GPU failed: {0}")]
    Readback(String),
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
}

/// Byte quantities in PyTorch's units, counts as plain numbers.
fn fmt_limit(value: u64, bytes: bool) -> String {
    if bytes { crate::units::format_bytes(value) } else { value.to_string() }
}
