#!/usr/bin/env bash
# Starts the class server with the web app inside it: builds the web app (web/build.sh, into
# dist/, which the release binary embeds), then runs `oomlab serve` (port 8080 on every interface, ./oomlab-classes.sqlite;
# extra arguments go to it, e.g. `scripts/serve.sh --port 9000 --bind 0.0.0.0`). Without the web
# app a server still runs the class API and the students' page; the teacher then uses the desktop
# app (scripts/app.sh) and its Teach a class button.
set -euo pipefail
cd "$(dirname "$0")/.."
# The students never run a step; the teacher's browser does, so the CPU worker is built too.
web/build.sh
exec cargo run --release -- serve "$@"
