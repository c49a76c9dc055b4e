#!/usr/bin/env bash
# Serves dist/ (built by web/build.sh) at http://127.0.0.1:${PORT:-8080}/ .
set -euo pipefail
cd "$(dirname "$0")/../dist"
exec python3 -m http.server "${PORT:-8080}" --bind 127.0.0.1
