//! oomlab: why does a large batch size make large-model training run out of GPU memory?
//!
//! Layers, each depending only on those above it: [`model`] → [`plan`] → [`memory`] (and the
//! large-model estimator, [`estimate`], beside it) → [`backend`] → app ([`app`], and the CLI in
//! the binary). Nothing below the app knows egui; nothing below `backend` knows wgpu. Beside
//! them: the classroom's contract ([`class`], plain data) and its server ([`serve`], native
//! only), which knows nothing of the app.

pub mod app;
pub mod backend;
pub mod class;
pub mod data;
pub mod documents;
pub mod dump;
pub mod estimate;
pub mod i18n;
pub mod memory;
pub mod model;
pub mod plan;
#[cfg(not(target_arch = "wasm32"))]
pub mod serve;
pub mod serving;
pub mod units;
#[cfg(target_arch = "wasm32")]
pub mod web;
#[cfg(target_arch = "wasm32")]
pub mod web_worker;
