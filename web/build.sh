#!/usr/bin/env bash
# Builds the web app into dist/ with tools from the registries only: cargo (wasm32, the `web`
# profile: opt-level "z", fat LTO) and wasm-bindgen-cli (installed with cargo at Cargo.lock's
# wasm-bindgen version). Nothing downloads a binary. Prints the gzipped size of the wasm (target:
# ≤ 2.5 MB, enforced at the end). No wasm-opt: measured on this app, binaryen's `-Oz` made the gzipped module larger
# (2.43 vs 2.40 MB) and took ~8 minutes on 2 cores.
#   web/build.sh            # then: web/serve.sh  (or `trunk serve`, see Trunk.toml)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-wasm-bindgen.sh
profile=${OOMLAB_WEB_PROFILE:-web}
echo "== cargo build --target wasm32-unknown-unknown --profile $profile"
cargo build --target wasm32-unknown-unknown --profile "$profile" --bin oomlab
dir=$profile
[ "$profile" = dev ] && dir=debug
rm -rf dist
mkdir -p dist
wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir dist --out-name oomlab "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/$dir/oomlab.wasm"
# The CPU worker (issue 17): the same crate with wasm SIMD, in its own target directory (other
# RUSTFLAGS would rebuild the main one each time), loaded by worker.js in a Web Worker where the
# browser has no WebGPU. OOMLAB_WEB_WORKER=0 skips it (the app then runs CPU steps on the page's
# thread, as it does when the worker does not load).
if [ "${OOMLAB_WEB_WORKER:-1}" != 0 ]; then
    if [ "${OOMLAB_WORKER_FROM_APP:-0}" = 1 ]; then
        # CI's shortcut: the worker is the app's own module. The code is the same (simd128 only
        # lets the compiler use wasm SIMD; no code path depends on it), so the browser tests
        # check the same protocol and steps, without a second full release build of the crate
        # and its dependencies (about 8 of CI's minutes). The worker benchmark's timings then
        # are not the shipped worker's.
        echo "== the worker: the app's module (OOMLAB_WORKER_FROM_APP=1)"
        mkdir -p dist/worker
        cp dist/oomlab.js dist/oomlab_bg.wasm dist/worker/
    else
        worker_profile=${OOMLAB_WORKER_PROFILE:-web-worker}
        worker_target="${CARGO_TARGET_DIR:-target}/web-worker"
        echo "== cargo build (worker, simd128) --profile $worker_profile"
        RUSTFLAGS="-C target-feature=+simd128" CARGO_TARGET_DIR="$worker_target" \
            cargo build --target wasm32-unknown-unknown --profile "$worker_profile" --bin oomlab
        wdir=$worker_profile
        [ "$worker_profile" = dev ] && wdir=debug
        wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir dist/worker --out-name oomlab "$worker_target/wasm32-unknown-unknown/$wdir/oomlab.wasm"
    fi
    cat > dist/worker.js <<'JS'
// oomlab's CPU worker (issue 17): loads the SIMD build of oomlab in this Web Worker; its start
// function sees a worker's scope and answers the page's requests (src/web_worker.rs).
import init from "./worker/oomlab.js";
init();
JS
    wraw=$(stat -c %s dist/worker/oomlab_bg.wasm)
    wgz=$(gzip -9 -c dist/worker/oomlab_bg.wasm | wc -c)
    echo "worker wasm (loaded only without WebGPU): $wraw bytes, $wgz bytes gzipped"
fi
# index.html without trunk's directives, loading the module wasm-bindgen wrote through start.js
# (a file, not an inline script: `oomlab serve`'s Content-Security-Policy allows no inline one).
sed -e '/data-trunk/d' \
    -e 's#</body>#    <script type="module" src="./start.js"></script>\n</body>#' \
    index.html > dist/index.html
cat > dist/start.js <<'JS'
// Starts oomlab's web app (the module wasm-bindgen wrote) and hands the accessibility mirror
// (web/a11y.js) the way back into it.
import init, { oomlabA11yAction } from "./oomlab.js";
window.oomlabA11yAction = oomlabA11yAction;
init();
JS
mkdir -p dist/web
cp web/manifest.json web/icon-192.png web/icon-512.png web/a11y.js web/boot.js dist/web/
# The service worker sits at the top so that its scope covers index.html.
cp web/sw.js dist/sw.js
# The Chinese font, fetched by the app only when Chinese is chosen or detected (issue 13), and
# the names font, fetched only when a teacher opens the list of students (issue 40).
cp i18n/fonts/NotoSansSC-oomlab.otf i18n/fonts/NotoSansSC-names-oomlab.otf i18n/fonts/OFL.txt dist/
# The Chinese catalog, fetched with the Chinese font (src/i18n.rs): not in the module.
cp i18n/zh.ftl dist/
raw=$(stat -c %s dist/oomlab_bg.wasm)
gz=$(gzip -9 -c dist/oomlab_bg.wasm | wc -c)
echo "wasm: $raw bytes, $gz bytes gzipped ($(awk "BEGIN{printf \"%.2f\", $gz/1e6}") MB; target ≤ 2.5 MB)"
# The ceiling is a requirement (issue 13: the CJK font and catalogs must not push the web app
# over it), so a larger module fails the build and the browser tests.
limit=${OOMLAB_WASM_GZ_LIMIT:-2500000}
if [ "$gz" -gt "$limit" ]; then
    echo "the wasm is $gz bytes gzipped, over the $limit-byte ceiling" >&2
    exit 1
fi
