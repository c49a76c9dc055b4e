#!/usr/bin/env bash
# Issue 17's real-GPU run, prepared for a session that is lent the NVIDIA H200 (the `device`
# tool; see ../.library/device/README.md). Never needed by the build or the tests.
#
# Here, once per session:  cargo build --release, and the Vulkan loaders into .gl/ (the device
#                          README's apt-get download line)
# The device call:         run(command="scripts/device-bench.sh",
#                              carry=["target/release/oomlab", ".gl"], timeout_s=540)
# What comes back ($OUT):  gpu.txt (nvidia-smi, the adapter, a 4096³ GEMM); gpt2-small.json
#                          (`oomlab bench` at d 768, L 12, H 12, T 1024, B 8 against PyTorch CUDA
#                          eager fp32, same run); toy.txt (the default and larger configs).
# (.gl/ is in .gitignore.)
# A dry run here: OOMLAB_BIG_CONFIG="--d-model 64 --layers 1 --heads 4 --seq-len 64 --batch 2" \
#                 OOMLAB_TORCH_DEVICE=cpu OOMLAB_TORCH_PYTHON=/tmp/torchvenv/bin/python \
#                 OOMLAB_GEMM_SIZE=512 scripts/device-bench.sh   (writes target/device-bench/)
#                 (name the venv's own python: a symlink to it placed elsewhere on PATH is not
#                 inside the venv, so Python would not see the venv's torch)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-target/device-bench}
mkdir -p "$OUT"
if ls .gl/*.deb >/dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
XDG_RUNTIME_DIR=$(mktemp -d)
export XDG_RUNTIME_DIR
export PYTHONUNBUFFERED=1
bin=target/release/oomlab
device=${OOMLAB_TORCH_DEVICE:-cuda}
python=${OOMLAB_TORCH_PYTHON:-python3}
read -r -a big <<< "${OOMLAB_BIG_CONFIG:---d-model 768 --layers 12 --heads 12 --seq-len 1024 --max-seq-len 1024 --batch 8}"
{
    date -u
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    timeout 120 "$bin" gemm --size "${OOMLAB_GEMM_SIZE:-4096}"
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# The GPT-2-small-sized config (~10.8 GiB reserved by the plan; bench runs without a virtual
# budget, so only the device's memory limits it).
timeout 300 "$bin" bench --backend gpu --only default --steps 5 "${big[@]}" \
    --torch-python "$python" --torch-device "$device" --json > "$OUT/gpt2-small.json" 2> "$OUT/gpt2-small.err"
echo "gpt2-small: exit $?"
# The default toy and the larger config, PyTorch on the same device.
timeout 120 "$bin" bench --backend gpu --steps 10 --torch-python "$python" --torch-device "$device" > "$OUT/toy.txt" 2>&1
echo "toy: exit $?"
cat "$OUT/gpt2-small.json" "$OUT/gpt2-small.err" "$OUT/toy.txt"
