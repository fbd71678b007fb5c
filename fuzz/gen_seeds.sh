#!/usr/bin/env bash
# Write seed inputs for every fuzz target into fuzz/work/seeds/<target>/ (git-ignored): forge
# dumps and triage dumps, the triage ISF, ETW buffers, 0x0524/0x0525 payloads, pending CCSWAP
# blocks, ETL buffers, translate chains (fuzz/seedgen), and every fixture PDB.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-work/seeds}
CARGO_TARGET_DIR=target/seedgen cargo run --release -q --manifest-path seedgen/Cargo.toml -- "$out"
mkdir -p "$out/pdb_load"
for d in ../tests/fixtures/*/; do
    for f in "$d"*.pdb; do
        [ -e "$f" ] && cp "$f" "$out/pdb_load/$(basename "$d").pdb"
    done
done
find "$out" -type f | sed 's|/[^/]*$||' | sort | uniq -c
