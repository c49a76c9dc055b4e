//! The GPU backend: executes a [`Plan`] with the WGSL kernels of `shaders/` through wgpu.
//!
//! Pipelines are built once per device ([`Kernels`]); an executor records the plan's dispatches
//! once (uniforms, bind groups, grids) and replays them every step in one command buffer, with
//! no readback inside it. Only the loss comes back each step.

#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod cluster;
pub mod context;
mod error;
pub mod executor;
pub mod kernels;

pub use context::GpuContext;
pub use error::GpuError;
pub use executor::GpuExecutor;
pub use kernels::Kernels;
