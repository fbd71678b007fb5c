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
# -max_len: pdb_load's seeds are 18-33 KB PDBs and dump_open's 24-200 KB dumps (fuzz/README.md,
# "Speed"); larger inputs of older corpora are cut to it when read. MAX_LEN=N overrides it.
case $t in
  pdb_load) dict=dict/pdb.dict; extra=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 -max_len=65536) ;;
  isf_load) dict=dict/isf.dict; extra=(-timeout=20) ;;
  dump_open) dict=dict/dump.dict; extra=(-timeout=20 -max_len=262144) ;;
  translate) dict=dict/pte.dict; extra=(-timeout=20) ;;
  pipeline) dict=dict/pipeline.dict; extra=(-timeout=30 -max_len=1024) ;;
  images) dict=dict/images.dict; extra=(-timeout=20 -max_len=65536) ;;
  # symsrv: no leak detection (finding 11, fuzz/README.md): ureq resolves a redirect's host name
  # in a detached thread that can outlive its request; when it exits during a later input,
  # LeakSanitizer counts glibc's 32-byte thread-exit record (__cxa_thread_atexit_impl) as a leak.
  symsrv) dict=dict/symsrv.dict; extra=(-timeout=30 -max_len=16384 -detect_leaks=0) ;;
  scan_mem|walks) dict=dict/etw.dict; extra=(-timeout=30 -max_len=1024) ;;
  # hiberfil: seeds are 8-83 KB cut hibernation files (fuzz/seedgen); no dictionary helps the
  # set headers more than the mutations of the seeds.
  hiberfil) dict=dict/etw.dict; extra=(-timeout=20 -max_len=131072) ;;
  *) dict=dict/etw.dict; extra=(-timeout=20) ;;
esac
export RUSTC_BOOTSTRAP=1
# Scratch files (extract's output) on tmpfs when there is one, one directory per campaign so
# that two campaigns of a target in one checkout (one per core) do not remove each other's.
if [ -d /dev/shm ]; then
  export ETWDUMP_FUZZ_SCRATCH=/dev/shm/etwdump-campaign-$t-$$
else
  export ETWDUMP_FUZZ_SCRATCH=$PWD/work/scratch/$t-$$
fi
trap 'rm -rf "$ETWDUMP_FUZZ_SCRATCH"' EXIT
# One process, one core: -fork=1 runs a single worker and, with -ignore_crashes, restarts it
# after a crash so one campaign can find several bugs. FORK=0: in-process (stops at the first
# crash, but pays the target's one-time set-up once: use it for pipeline).
if [ "${FORK:-1}" = 1 ]; then
  mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
else
  mode=()
fi
# SAN=none: no sanitizer (2-3x the executions of the default ASan build on these targets;
# the library's only unsafe code is the mmap in src/dump/mod.rs, which the targets do not
# reach). Built into target-nosan so the ASan binaries stay; the malloc limit is then kept by
# the harness's allocation guard (src/lib.rs), as -malloc_limit_mb needs a sanitizer's hooks.
san=${SAN:-address}
sanargs=()
tdir=target
if [ "$san" = none ]; then
  sanargs=(-s none)
  tdir=target-nosan
  [ "$t" = pdb_load ] && export ETWDUMP_FUZZ_MALLOC_LIMIT_MB=1024
fi
# TIMEOUT=N overrides the per-input timeout (wall clock): a niced campaign on a machine whose
# other builds take both cores can be starved past 30 s (two such "timeouts" on 3e0f17d ran in
# 60 and 94 ms when re-run).
# CMP=0: built without the trace-compares instrumentation (`--no-trace-compares`): on scan_mem
# and walks the comparison hooks take 55-60 % of the time (perf), so this triples the
# executions; the mutations these targets make (page patches) do not need comparison operands.
if [ "${CMP:-1}" = 0 ]; then
  sanargs+=(--no-trace-compares)
  tdir=$tdir-nocmp
fi
[ "$tdir" = target ] || sanargs+=(--target-dir "$tdir")
log="work/logs/$t-$(date -u +%Y%m%dT%H%M%S)-$$.log"
# The code fuzzed is the tree at the start (cargo fuzz builds it then): record that commit.
rev="$(git -C .. rev-parse --short HEAD)$(git -C .. diff --quiet HEAD -- src fuzz/src fuzz/fuzz_targets || echo +dirty)"
before=$(find "artifacts/$t" -type f | wc -l)
cargo fuzz run "${sanargs[@]}" "$t" "work/corpus/$t" "work/seeds/$t" "corpus/$t" -- "${mode[@]}" \
  -max_total_time="$secs" -dict="$dict" -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
  "${extra[@]}" ${MAX_LEN:+-max_len=$MAX_LEN} ${TIMEOUT:+-timeout=$TIMEOUT} >"$log" 2>&1 || true
grep -E "^#|INFO: fuzzed|crash|CRASH|panicked|ERROR|stat::" "$log" | tail -20
# The ledger: one line per run (target, UTC end, seconds asked, executions, files this run added
# to artifacts/TARGET, the commit at the start (+dirty), sanitizer). Executions: the last "#N"
# status line (fork mode prints no final stats).
execs=$(grep -oE "^#[0-9]+" "$log" | tail -1 | tr -d '#')
crashes=$(( $(find "artifacts/$t" -type f | wc -l) - before ))
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$(date -u +%FT%TZ)" "$secs" "${execs:-0}" "$crashes" \
  "$rev" "$san$([ "${CMP:-1}" = 0 ] && echo ,nocmp)" >>work/ledger.tsv
