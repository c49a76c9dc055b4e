#!/usr/bin/env bash
# Runs every test oomlab has, on any Debian/Ubuntu machine, GPU or not. Installs what is
# missing first: Mesa's lavapipe (a CPU Vulkan driver, so the GPU tests run without a GPU) and
# the wasm32 target (the library must also build for the browser). A missing GPU adapter fails
# the GPU tests; it never skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

echo "== cargo test"
cargo test --all-targets
echo "== cargo check --target wasm32-unknown-unknown"
cargo check --target wasm32-unknown-unknown
