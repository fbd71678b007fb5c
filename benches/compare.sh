#!/usr/bin/env bash
# Before/after comparison of two etwdump builds, same machine, same run (issue 28: "no
# measured slowdown"). usage: benches/compare.sh BEFORE_BIN AFTER_BIN [RUNS] [WORKDIR]
#
# The commands of docs/performance.md's benchmarks, each run RUNS times (default 7) per build, the two
# builds alternating run by run so that a change in the machine's load hits both alike. For
# each it prints the median CPU time per invocation (user + system, from /usr/bin/time: the figure least
# disturbed by other processes on a shared machine), the median wall time and the peak RSS,
# and after/before as a ratio of CPU time.
# WORKDIR (default /tmp/etwdump-compare) receives, once: the forge's x64 19041 scan image and
# 16 GiB full dump (sparse), and the stream benchmark's dump cut to BUFFERS 64 KiB buffers
# (default 2048: 128 MiB of buffers, 1.29 M context switches).
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1"); after=$(realpath "$2"); runs=${3:-7}; work=${4:-/tmp/etwdump-compare}
buffers=${BUFFERS:-2048}
mkdir -p "$work"
pdb=$PWD/tests/fixtures/x64-19041/ntkrnlmp.pdb
if [ ! -s "$work/stream.dmp" ]; then
  cargo bench --bench stream --no-run -q 2>/dev/null
  bin=$(ls -t target/release/deps/stream-* | grep -v '\.d$' | head -1)
  "$bin" --forge-to "$work/stream.dmp" "$buffers" >/dev/null
fi
if [ ! -d "$work/forge" ]; then
  cargo run --release -q -p etwdump-forge --bin forge -- "$work/forge" --images --scan \
    --fixtures tests/fixtures >/dev/null
fi
img=$(ls "$work"/forge/scan-x64-19041*.raw | head -1)
full=$(ls "$work"/forge/*x64-19041*etw-ccswap*.dmp 2>/dev/null | head -1)
s=$work/stream.dmp
# Each entry: how many back-to-back invocations make one timed run (the small dumps' commands
# take milliseconds, below /usr/bin/time's 10 ms resolution), then the command.
cmds=(
  "40|info $full --format json"
  "40|sessions $full --pdb $pdb --format json"
  "40|buffers $full --pdb $pdb --format csv"
  "40|providers $full --pdb $pdb --format csv"
  "40|check $full --pdb $pdb"
  "1|scan $img --threads 1 --format csv"
  "1|cswitch $s --pdb $pdb --format jsonl"
  "1|events $s --pdb $pdb --format jsonl"
  "1|extract $s --pdb $pdb -o $work/out"
)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# "cpu_seconds wall_seconds peak_kib" of one run (K invocations, output discarded), per
# invocation.
one() {
  local k=$1; shift
  rm -rf "$work/out"
  /usr/bin/time -q -f "%U %S %e %M" -o "$work/t.txt" bash -c \
    'k=$1; shift; for _ in $(seq "$k"); do rm -rf '"$work/out"'; "$@" >/dev/null 2>&1; done' _ "$k" "$@" || true
  awk -v k="$k" '{printf "%.4f %.4f %d\n", ($1 + $2) / k, $3 / k, $4}' "$work/t.txt"
}
printf "| command | runs x invocations | before CPU s | after CPU s | after/before | before wall s | after wall s | before peak RSS MiB | after peak RSS MiB |\n"
printf "|---|---|---|---|---|---|---|---|---|\n"
for entry in "${cmds[@]}"; do
  k=${entry%%|*}; c=${entry#*|}
  : >"$work/b.txt"; : >"$work/a.txt"
  for _ in $(seq "$runs"); do
    # shellcheck disable=SC2086
    one "$k" "$before" $c >>"$work/b.txt"
    # shellcheck disable=SC2086
    one "$k" "$after" $c >>"$work/a.txt"
  done
  bc_=$(cut -d' ' -f1 "$work/b.txt" | median); ac=$(cut -d' ' -f1 "$work/a.txt" | median)
  bw=$(cut -d' ' -f2 "$work/b.txt" | median); aw=$(cut -d' ' -f2 "$work/a.txt" | median)
  br=$(cut -d' ' -f3 "$work/b.txt" | median); ar=$(cut -d' ' -f3 "$work/a.txt" | median)
  ratio=$(awk -v a="$ac" -v b="$bc_" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
  name=$(echo "$c" | awk '{print $1}')
  opt=$(echo "$c" | grep -oE -- "--format [a-z]+| -o " | head -1 || true)
  file=$(basename "$(echo "$c" | awk '{print $2}')")
  printf "| \`%s%s\` (%s) | %s x %s | %s | %s | %s | %s | %s | %.1f | %.1f |\n" "$name" "${opt:+ ${opt# }}" "$file" \
    "$runs" "$k" "$bc_" "$ac" "$ratio" "$bw" "$aw" "$(echo "$br/1024" | bc -l)" "$(echo "$ar/1024" | bc -l)"
done
