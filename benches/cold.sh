#!/usr/bin/env bash
# Cold-cache throughput of `scan` and `extract` against a sequential read of the same file,
# measured in the same run (issue 15). usage: benches/cold.sh [WORKDIR [RUNS]]
#
# WORKDIR (default /tmp/etwdump-cold) receives, once (kept for later runs, ~5.6 GiB):
#   scan4g.raw   a 4 GiB non-sparse raw image: the forge's x64 19041 scan scenario (live and
#                stopped sessions, stale copies, decoys) followed by pseudo-random bytes;
#   buf1g.dmp    the stream benchmark's dump: 16,384 buffers x 64 KiB (1 GiB) in one session.
# Each of RUNS rounds (default 5) evicts the file from the page cache before every timed
# command (posix_fadvise DONTNEED: no root needed, unlike drop_caches) and times, in turn:
#   dd bs=8M iflag=direct (the disk's sequential speed, no cache), cat (buffered sequential
#   read with kernel read-ahead), then `etwdump scan` (resp. `etwdump extract`), with the peak
#   RSS from /usr/bin/time. It prints every run and the medians: scan's throughput as a share
#   of the better sequential read, and extract's time as a multiple of reading the whole dump
#   (1.5 GiB, more than the 1 GiB of buffers the issue names: the comparison is conservative).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/etwdump-cold}
runs=${2:-5}
mkdir -p "$work"

cargo build --release -q --bin etwdump
cargo build --release -q -p etwdump-forge --bin forge
etw=$PWD/target/release/etwdump
pdb=$PWD/tests/fixtures/x64-19041/ntkrnlmp.pdb

if [ ! -s "$work/scan4g.raw" ]; then
  echo "building $work/scan4g.raw ..." >&2
  rm -rf "$work/forge"
  target/release/forge "$work/forge" --images --scan >/dev/null
  base=$(ls "$work"/forge/scan-x64-19041*.raw | head -1)
  have=$(stat -c %s "$base")
  target/release/forge --random-image "$work/rand.raw" $(( (4096 * 1048576 - have) / 1048576 )) 7 >/dev/null
  cat "$base" "$work/rand.raw" >"$work/scan4g.raw"
  echo "$have" >"$work/scan4g.base"
  rm -rf "$work/rand.raw" "$work/forge"
fi
if [ ! -s "$work/buf1g.dmp" ]; then
  echo "building $work/buf1g.dmp ..." >&2
  cargo bench --bench stream --no-run -q 2>/dev/null
  bin=$(ls -t target/release/deps/stream-* | grep -v '\.d$' | head -1)
  "$bin" --forge-to "$work/buf1g.dmp" 16384
fi

evict() { python3 -c 'import os,sys
fd=os.open(sys.argv[1],os.O_RDONLY)
os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)' "$1"; }
# Seconds (3 decimals) of a command, its output discarded.
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo "scale=3; ($e-$s)/1000000000" | bc; }
# "seconds peak_kib" of a command under /usr/bin/time.
timed() { /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || {
  cat "$work/stderr.txt" >&2; return 1; }; cat "$work/time.txt"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

img=$work/scan4g.raw
dump=$work/buf1g.dmp
isize=$(stat -c %s "$img")
dsize=$(stat -c %s "$dump")
: >"$work/scan.tsv"
: >"$work/extract.tsv"
echo "run	dd-direct-s	cat-s	scan-s	scan-peak-KiB	(image $isize bytes)"
for r in $(seq "$runs"); do
  evict "$img"; d=$(secs dd if="$img" of=/dev/null bs=8M iflag=direct)
  evict "$img"; c=$(secs cat "$img")
  evict "$img"; read -r s m < <(timed "$etw" scan "$img" --format jsonl)
  echo "$r	$d	$c	$s	$m" | tee -a "$work/scan.tsv"
done
echo "run	cat-s	extract-s	extract-peak-KiB	(dump $dsize bytes)"
for r in $(seq "$runs"); do
  evict "$dump"; c=$(secs cat "$dump")
  rm -rf "$work/out"
  evict "$dump"; read -r x m < <(timed "$etw" extract "$dump" --pdb "$pdb" -o "$work/out")
  echo "$r	$c	$x	$m" | tee -a "$work/extract.tsv"
done
rm -rf "$work/out"

md=$(cut -f2 "$work/scan.tsv" | median); mc=$(cut -f3 "$work/scan.tsv" | median)
ms=$(cut -f4 "$work/scan.tsv" | median); mm=$(cut -f5 "$work/scan.tsv" | sort -n | tail -1)
best=$(echo "if ($md < $mc) $md else $mc" | bc)
echo
echo "scan: median ${ms} s ($(echo "scale=2; $isize/$ms/1073741824" | bc) GiB/s); sequential read: dd direct ${md} s, cat ${mc} s;"
echo "      scan throughput = $(echo "scale=0; 100*$best/$ms" | bc)% of the better sequential read (issue 15: >= 80%); peak RSS max $((mm / 1024)) MiB (< 200 MiB)"
# Precision on the same image: nothing may be found in the random part (after the scenario).
if [ -s "$work/scan4g.base" ]; then
  base=$(cat "$work/scan4g.base")
  "$etw" scan "$img" --format jsonl 2>/dev/null | python3 -c '
import json, sys
base = int(sys.argv[1]); n = {}; past = 0
for line in sys.stdin:
    r = json.loads(line); n[r["kind"]] = n.get(r["kind"], 0) + 1
    pa = r.get("physical_address")
    if r["kind"] != "orphan_group" and pa is not None and int(pa, 16) >= base:
        past += 1
print("      found %s; objects in the random data after the scenario (from byte %d): %d" % (n, base, past))
' "$base"
fi
xc=$(cut -f2 "$work/extract.tsv" | median); xx=$(cut -f3 "$work/extract.tsv" | median)
xm=$(cut -f4 "$work/extract.tsv" | sort -n | tail -1)
echo "extract: median ${xx} s against cat of the whole dump ${xc} s: $(echo "scale=2; $xx/$xc" | bc) x (issue 15: <= 2 x); peak RSS max $((xm / 1024)) MiB"
