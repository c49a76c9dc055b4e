#!/usr/bin/env bash
# Opens the oomlab app (the default toy config), installing a Vulkan driver first if the
# machine has none. Extra arguments go to oomlab (e.g. `scripts/app.sh train --steps 50`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
exec cargo run --release -- "$@"
