#!/usr/bin/env bash
# The plan, memory and estimator tests on wasm32, where usize is 32 bits: wasm-bindgen-test's
# runner executes them under Node. The same assertions as natively, so native and wasm32 give
# identical numbers (tests/sizes.rs has products past 2³² and 2⁶⁴).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/lint-env.sh
source scripts/ensure-wasm-bindgen.sh
command -v node >/dev/null 2>&1 || oomlab_install nodejs
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
"${oomlab_lint[@]}" cargo test --profile wasm-test --target wasm32-unknown-unknown --test sizes --test allocator --test memory_plan --test estimate
