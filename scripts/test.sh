#!/usr/bin/env bash
# Runs every test oomlab has, on any Debian/Ubuntu machine, GPU or not, and builds the book.
# Installs what is missing first: Mesa's lavapipe (a CPU Vulkan driver, so the GPU tests run
# without a GPU), Xvfb and ImageMagick (the desktop app test), the wasm32 target (the library
# must also build for the browser) and mdBook. A missing GPU adapter fails the GPU tests; it
# never skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/lint-env.sh
# The desktop test opens the app in a virtual X server and screenshots it.
oomlab_x=()
command -v xvfb-run >/dev/null 2>&1 || oomlab_x+=(xvfb xauth)
command -v import >/dev/null 2>&1 || oomlab_x+=(imagemagick)
# The X libraries winit opens at run time.
for p in libxkbcommon-x11-0 libxcursor1 libxrandr2 libxi6 libx11-xcb1; do
    dpkg -s "$p" >/dev/null 2>&1 || oomlab_x+=("$p")
done
oomlab_install "${oomlab_x[@]}"
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

# The book first: it is quick once mdBook is installed, and a broken one fails early.
echo "== the book (scripts/book.sh)"
scripts/book.sh
echo "== cargo test"
"${oomlab_lint[@]}" cargo test --all-targets
# The plan, memory and estimator tests again on wasm32 (32-bit usize), under Node.
echo "== wasm32 tests (scripts/test-wasm.sh)"
scripts/test-wasm.sh
# The browser tests build the app for wasm32 (so the library is checked for the browser too) and
# run it in headless Chromium with WebGPU and WebGL-only (web/test.sh).
echo "== browser tests (web/test.sh)"
web/test.sh
