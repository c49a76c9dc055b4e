//! oomlab: why does a large batch size make large-model training run out of GPU memory?
//!
//! Layers, each depending only on those above it: [`model`] → [`plan`] → [`memory`] (and the
//! large-model estimator, [`estimate`], beside it) → [`backend`] → app ([`app`], and the CLI in
//! the binary). Nothing below the app knows egui; nothing below `backend` knows wgpu.

pub mod app;
pub mod backend;
pub mod data;
pub mod dump;
pub mod estimate;
pub mod i18n;
pub mod memory;
pub mod model;
pub mod plan;
pub mod units;
#[cfg(target_arch = "wasm32")]
pub mod web;
#[cfg(target_arch = "wasm32")]
pub mod web_worker;
