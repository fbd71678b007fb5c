#!/usr/bin/env bash
# Run one fuzz target for SECONDS on one core, keeping going after crashes.
# usage: fuzz/campaign.sh TARGET [SECONDS]   (needs cargo-fuzz; run fuzz/gen_seeds.sh first)
# Working corpus: fuzz/work/corpus/TARGET (written); seeds: fuzz/work/seeds/TARGET and the
# committed fuzz/corpus/TARGET (read). Crashes land in fuzz/artifacts/TARGET/, the log in
# fuzz/work/logs/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")"
t=${1:?target}
secs=${2:-300}
mkdir -p "work/corpus/$t" "work/seeds/$t" "corpus/$t" "artifacts/$t" work/logs
case $t in
  pdb_load) dict=dict/pdb.dict; extra=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20) ;;
  isf_load) dict=dict/isf.dict; extra=(-timeout=20) ;;
  dump_open) dict=dict/dump.dict; extra=(-timeout=20) ;;
  translate) dict=dict/pte.dict; extra=(-timeout=20) ;;
  pipeline) dict=dict/pipeline.dict; extra=(-timeout=30 -max_len=1024) ;;
  *) dict=dict/etw.dict; extra=(-timeout=20) ;;
esac
export RUSTC_BOOTSTRAP=1
export ETWDUMP_FUZZ_SCRATCH=$PWD/work/scratch/$t
trap 'rm -rf "$ETWDUMP_FUZZ_SCRATCH"' EXIT
# One process, one core: -fork=1 runs a single worker and, with -ignore_crashes, restarts it
# after a crash so one campaign can find several bugs. FORK=0: in-process (stops at the first
# crash, but pays the target's one-time set-up once: use it for pipeline).
if [ "${FORK:-1}" = 1 ]; then
  mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
else
  mode=()
fi
cargo fuzz run "$t" "work/corpus/$t" "work/seeds/$t" "corpus/$t" -- "${mode[@]}" \
  -max_total_time="$secs" -dict="$dict" -print_final_stats=1 \
  -artifact_prefix="artifacts/$t/" "${extra[@]}" 2>&1 | tee "work/logs/$t.log" | grep -E "^#|INFO: fuzzed|crash|CRASH|panicked|ERROR|stat::" | tail -40
