#!/usr/bin/env bash
# Runs every test oomlab has, on any Debian/Ubuntu machine, GPU or not.
# Installs what is missing first: Mesa's lavapipe (a CPU Vulkan driver, so the GPU tests run
# without a GPU) and the wasm32 target (the library must also build for the browser).
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1 || need_pkgs+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || need_pkgs+=(libvulkan1)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "installing ${need_pkgs[*]} (a Vulkan driver for the GPU tests)"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

# wgpu wants a private runtime directory; a missing adapter must fail the tests, not skip them.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -w "${XDG_RUNTIME_DIR}" ]; then
    export XDG_RUNTIME_DIR
    XDG_RUNTIME_DIR="$(mktemp -d)"
    chmod 700 "$XDG_RUNTIME_DIR"
fi

echo "== cargo test"
cargo test --all-targets
echo "== cargo check --target wasm32-unknown-unknown"
cargo check --target wasm32-unknown-unknown
