#!/usr/bin/env bash
# The browser tests: builds dist/ (web/build.sh), installs what is missing (Debian's chromium,
# playwright-core from npm; no browser download), and runs the app in headless Chromium twice —
# with WebGPU (SwiftShader), WebGL-only (CPU fallback), in Chinese (`#lang=zh`:
# the CJK font fetched on demand) on a phone-sized touch screen (390×844), and
# from a teacher link (locked and hidden controls). Screenshots: target/browser-*.png. Then a
# short run of the CPU worker benchmark (web/worker-bench.mjs: the app's worker requests replayed
# on a blank page), so that it keeps working; its timings are for the README, not checked.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
oomlab_install "${need[@]}"
(cd web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund)
web/build.sh
node web/browser-test.mjs webgpu
node web/browser-test.mjs webgl
# A generated 55 MB PyTorch memory snapshot opened through the import worker (web/snapshot-test.mjs).
node web/snapshot-test.mjs
node web/browser-test.mjs zh
node web/browser-test.mjs phone
node web/browser-test.mjs teacher
# ZeRO-2 over 2 simulated GPUs in the CPU worker, from a shared setup.
node web/browser-test.mjs zero
# What a screen reader and the keyboard get: the accessible mirror, read from Chromium's own
# accessibility tree (web/a11y-test.mjs).
node web/a11y-test.mjs
# A class: `oomlab serve` (the debug binary, which reads dist/ from disk) and two pages, a
# teacher's and a student's.
[ -x "${CARGO_TARGET_DIR:-target}/debug/oomlab" ] || cargo build --bin oomlab
node web/class-test.mjs
node web/worker-bench.mjs 3
