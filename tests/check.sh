#!/usr/bin/env bash
# The project's test command (README "Run the tests"): formatting, lints, unit and
# integration tests, then the third-party interop checks.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== interop (kdmp-parser from PyPI, independent x86 walker)"
cargo build --quiet
FORGE_TARGET_DIR="$PWD/target" ETWDUMP="$PWD/target/debug/etwdump" bash tests/interop/run.sh --require-etwdump --require-etwdump-symbols --require-etwdump-sessions --require-etwdump-buffers
echo "== all checks passed"
