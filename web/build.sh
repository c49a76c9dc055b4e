#!/usr/bin/env bash
# Builds the web app into dist/ with tools from the registries only: cargo (wasm32, release),
# wasm-bindgen-cli (installed with cargo at Cargo.lock's wasm-bindgen version), and wasm-opt from
# npm's binaryen when it is there (Debian's binaryen 108 breaks the module in Chromium). Nothing
# downloads a binary. Prints the gzipped size of the wasm (target: ≤ 2.5 MB).
#   web/build.sh            # then: web/serve.sh  (or `trunk serve`, see Trunk.toml)
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
want=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
    echo "== cargo install wasm-bindgen-cli $want"
    cargo install wasm-bindgen-cli --version "$want"
fi
profile=${OOMLAB_WEB_PROFILE:-web}
echo "== cargo build --target wasm32-unknown-unknown --profile $profile"
cargo build --target wasm32-unknown-unknown --profile "$profile" --bin oomlab
dir=$profile
[ "$profile" = dev ] && dir=debug
rm -rf dist
mkdir -p dist
wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir dist --out-name oomlab "target/wasm32-unknown-unknown/$dir/oomlab.wasm"
opt=""
if [ -x web/node_modules/.bin/wasm-opt ]; then
    opt=web/node_modules/.bin/wasm-opt
elif command -v npm >/dev/null 2>&1 && [ "${OOMLAB_WASM_OPT:-1}" = 1 ]; then
    (cd web && npm install --no-save --silent binaryen@132 >/dev/null 2>&1) && opt=web/node_modules/.bin/wasm-opt || true
fi
if [ -n "$opt" ]; then
    echo "== wasm-opt -Oz"
    "$opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-mutable-globals --enable-reference-types --enable-multivalue \
        dist/oomlab_bg.wasm -o dist/oomlab_bg.wasm
fi
# index.html without trunk's directives, loading the module wasm-bindgen wrote.
sed -e '/data-trunk/d' \
    -e 's#</body>#    <script type="module">import init from "./oomlab.js"; init();</script>\n</body>#' \
    index.html > dist/index.html
mkdir -p dist/web
cp web/manifest.json web/icon-192.png web/icon-512.png dist/web/
raw=$(stat -c %s dist/oomlab_bg.wasm)
gz=$(gzip -9 -c dist/oomlab_bg.wasm | wc -c)
echo "wasm: $raw bytes, $gz bytes gzipped ($(awk "BEGIN{printf \"%.2f\", $gz/1e6}") MB; target ≤ 2.5 MB)"
