#!/usr/bin/env bash
# Builds the book (docs/, an mdBook) into target/book; a chapter listed in docs/src/SUMMARY.md
# but missing fails the build (book.toml: create-missing = false), and tests/docs.rs checks every
# link between the chapters. mdBook is built from crates.io like the project's other tools (no
# binary is downloaded), at the version the book was written with, without its default features
# (search, live reload, the local server), which a build does not need and which would add
# minutes to a fresh CI run.
#   scripts/book.sh          # then open target/book/index.html
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    echo "== cargo install mdbook $MDBOOK_VERSION"
    cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features
fi
mdbook build docs -d "$PWD/target/book"
echo "the book: target/book/index.html"
