#!/usr/bin/env bash
# Byte-identity check for refactors, on forge memory images and dumps (the companion of
# tests/cli_snapshot.sh, which covers the shipped samples). Run it with the binary before and
# after a change and diff the two directories.
# usage: tests/image_snapshot.sh BIN OUTDIR [FORGEDIR]
# FORGEDIR (default /tmp/snapforge) is made once with:
#   cargo run --release -p etwdump-forge --bin forge -- /tmp/snapforge --images --fixtures tests/fixtures
set -u
BIN=$1; OUT=$2; FORGE=${3:-/tmp/snapforge}
rm -rf "$OUT"; mkdir -p "$OUT"; n=0
run() { local tag=$1; shift; timeout 120 "$BIN" "$@" > "$OUT/$tag.out" 2> "$OUT/$tag.err" < /dev/null; echo $? > "$OUT/$tag.rc"; n=$((n+1)); }
for f in $(ls "$FORGE"/* | grep -E "(x86-14393-etw|x64-19041-etw-ccswap|x64-26100-etw-ccswap|x64-7601-etw|x64-22000-etw)\.(raw|vmem|vmsn|elf|dmp)$"); do
  b=$(basename "$f")
  run "$b.infojson" info "$f" --format json
  run "$b.info" info "$f"
  run "$b.sessions" sessions "$f" --format json
  run "$b.buffers" buffers "$f" --format csv
  run "$b.cswitch" cswitch "$f" --format csv
  run "$b.check" check "$f"
  run "$b.providers" providers "$f" --format csv
  run "$b.scan" scan "$f" --threads 1 --format csv
  run "$b.read" read "$f" 0xfffff78000000000 64
done
echo "$n runs"
