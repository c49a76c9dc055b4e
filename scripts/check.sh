#!/usr/bin/env bash
# Lints, as CI runs them: formatting, and clippy with warnings as errors on native and wasm32.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo clippy --lib --bins --target wasm32-unknown-unknown -- -D warnings
