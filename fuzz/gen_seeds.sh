#!/usr/bin/env bash
# Write seed inputs for every fuzz target into fuzz/work/seeds/<target>/ (git-ignored): forge
# dumps and small triage dumps, the triage ISF, ETW buffers, 0x0524/0x0525 payloads, pending
# CCSWAP blocks, ETL buffers, translate chains, pipeline stage/filter selectors (fuzz/seedgen).
# pdb_load's seeds are the tiny PDBs committed in fuzz/corpus/pdb_load (built by
# fuzz/seedgen/tiny_pdb/build.sh); FULL_PDB_SEEDS=1 also copies the 118-197 KB fixture PDBs
# (10-20 ms a run under ASan, against ~0.3-3 ms: see fuzz/README.md, "Speed").
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-work/seeds}
CARGO_TARGET_DIR=target/seedgen cargo run --release -q --manifest-path seedgen/Cargo.toml -- "$out"
mkdir -p "$out/pdb_load"
if [ "${FULL_PDB_SEEDS:-0}" = 1 ]; then
    for d in ../tests/fixtures/*/; do
        for f in "$d"*.pdb; do
            [ -e "$f" ] && cp "$f" "$out/pdb_load/$(basename "$d").pdb"
        done
    done
fi
find "$out" -type f | sed 's|/[^/]*$||' | sort | uniq -c
