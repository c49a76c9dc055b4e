#!/usr/bin/env bash
# Sourced by app.sh and test.sh: installs what oomlab needs and a fresh Debian/Ubuntu machine
# lacks — a Vulkan driver (Mesa's lavapipe runs on the CPU when there is no GPU) and the
# Vulkan loader — and gives wgpu a private XDG_RUNTIME_DIR when there is none.
oomlab_install() {
    [ $# -gt 0 ] || return 0
    echo "installing $* ..."
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

oomlab_need=()
ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1 || oomlab_need+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || oomlab_need+=(libvulkan1)
oomlab_install "${oomlab_need[@]}"

if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -w "${XDG_RUNTIME_DIR}" ]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
    chmod 700 "$XDG_RUNTIME_DIR"
    export XDG_RUNTIME_DIR
fi
