# Sourced by test.sh and test-wasm.sh. With OOMLAB_LINT=1 (CI sets it), clippy lints oomlab's own
# crate, warnings as errors, inside the builds the tests need anyway: clippy-driver becomes the
# workspace's rustc wrapper, which is how `cargo clippy` itself runs it, except that the build goes
# on to generate code. A separate `cargo clippy` (scripts/check.sh, for developers) would compile
# the whole dependency tree twice more, native and wasm32: about 13 of a fresh CI run's minutes.
# Only oomlab's crate is wrapped (dependencies and `cargo install`ed tools are not).
#   "${oomlab_lint[@]}" cargo test ...
oomlab_lint=()
if [ "${OOMLAB_LINT:-0}" = 1 ]; then
    oomlab_clippy="$(rustc --print sysroot)/bin/clippy-driver"
    [ -x "$oomlab_clippy" ] || rustup component add clippy
    oomlab_lint=(env "RUSTC_WORKSPACE_WRAPPER=$oomlab_clippy" "CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")
    echo "== lints: clippy -D warnings on oomlab's crate during the builds (OOMLAB_LINT=1)"
fi
