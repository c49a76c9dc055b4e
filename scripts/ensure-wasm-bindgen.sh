# Sourced by web/build.sh and scripts/test-wasm.sh: installs the wasm32 target and
# wasm-bindgen-cli (with its test runner) at Cargo.lock's wasm-bindgen version, from crates.io.
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
oomlab_wbg_want=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
oomlab_wbg_have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$oomlab_wbg_have" != "$oomlab_wbg_want" ] || ! command -v wasm-bindgen-test-runner >/dev/null 2>&1; then
    echo "== cargo install wasm-bindgen-cli $oomlab_wbg_want"
    # A debug build of the tool: it installs in ~1.5 min instead of ~5 on 2 cores, and still
    # processes oomlab's wasm in ~10 s.
    cargo install --debug wasm-bindgen-cli --version "$oomlab_wbg_want"
fi
