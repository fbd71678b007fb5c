#!/usr/bin/env bash
# Fuzz smoke test: build the cargo-fuzz targets in fuzz/ and run each for FUZZ_SECONDS
# (default 30) on the committed corpus (fuzz/corpus/TARGET) plus the saved reproducers
# (fuzz/regressions/TARGET), failing on any crash, panic, timeout or memory blow-up.
#
#   bash tests/fuzz_smoke.sh                  # every target, 30 s each
#   FUZZ_SECONDS=5 bash tests/fuzz_smoke.sh records etl_read
#
# Needs cargo-fuzz (installed here with `cargo install cargo-fuzz --locked` when missing) and
# the sanitizer flags libFuzzer needs, which stable rustc accepts with RUSTC_BOOTSTRAP=1. When
# cargo-fuzz cannot be installed, or the toolchain cannot build sanitized code, the script
# prints a SKIP line and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
all=(dump_open translate pdb_load isf_load records ccswap cswitch etl_read pipeline images scan_mem walks symsrv xpress hiberfil)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

skip() {
    echo "SKIP: fuzz smoke test: $*"
    exit 0
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz_smoke: cargo-fuzz not found; installing it (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked >/tmp/fuzz_smoke_install.log 2>&1 ||
        skip "cargo-fuzz could not be installed (see /tmp/fuzz_smoke_install.log)"
    cargo fuzz --version >/dev/null 2>&1 || skip "cargo-fuzz is not runnable after install"
fi

export RUSTC_BOOTSTRAP=1
log=$(mktemp)
if ! (cd fuzz && cargo fuzz build >"$log" 2>&1); then
    if grep -qE "the option \`Z\` is only accepted on the nightly|unknown unstable option|sanitizer.*not supported|cannot find.*rt\.asan" "$log"; then
        skip "this toolchain cannot build sanitized code: $(grep -m1 -E 'error' "$log")"
    fi
    tail -40 "$log"
    echo "fuzz_smoke: FAILED to build the fuzz targets"
    exit 1
fi

dict_of() {
    case $1 in
        pdb_load) echo dict/pdb.dict ;; isf_load) echo dict/isf.dict ;;
        dump_open) echo dict/dump.dict ;; translate) echo dict/pte.dict ;;
        pipeline) echo dict/pipeline.dict ;; images) echo dict/images.dict ;;
        symsrv) echo dict/symsrv.dict ;; *) echo dict/etw.dict ;;
    esac
}

passed=0
failed=0
failures=()
for t in "${targets[@]}"; do
    work=$(mktemp -d)
    mkdir -p "$work/corpus" "$work/artifacts"
    # Copies: libFuzzer adds new inputs to its first corpus directory.
    cp fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
    cp fuzz/regressions/"$t"/* "$work/corpus/" 2>/dev/null || true
    # Larger seeds the repository already holds (not duplicated under fuzz/corpus).
    case $t in
        pdb_load) cp tests/fixtures/x64-7601/ntkrnlmp.pdb "$work/corpus/fixture-x64-7601.pdb" 2>/dev/null || true ;;
        dump_open) cp tests/data/sample-x64.dmp "$work/corpus/sample-x64.dmp" 2>/dev/null || true ;;
    esac
    extra=()
    [ "$t" = pdb_load ] && extra=(-rss_limit_mb=2048 -malloc_limit_mb=1024)
    # finding 11 (fuzz/README.md): a detached resolver thread of ureq, not a leak of etwdump.
    [ "$t" = symsrv ] && extra=(-detect_leaks=0)
    echo "fuzz_smoke: $t for ${secs}s on $(ls "$work/corpus" | wc -l) inputs"
    if (cd fuzz && ETWDUMP_FUZZ_SCRATCH="$work/scratch" cargo fuzz run "$t" "$work/corpus" -- \
        -max_total_time="$secs" -timeout=30 -dict="$(dict_of "$t")" \
        -artifact_prefix="$work/artifacts/" -print_final_stats=1 "${extra[@]}") \
        >"$work/log" 2>&1; then
        execs=$(grep -m1 -oE "stat::number_of_executed_units: *[0-9]+" "$work/log" | grep -oE "[0-9]+$")
        rate=$(grep -m1 -oE "stat::average_exec_per_sec: *[0-9]+" "$work/log" | grep -oE "[0-9]+$")
        echo "fuzz_smoke: $t ok (${execs:-?} executions, ${rate:-?} exec/s)"
        passed=$((passed + 1))
        rm -rf "$work"
    else
        grep -E "panicked|ERROR: |SUMMARY|Test unit written|^    #[0-9]+ " "$work/log" | head -20
        echo "fuzz_smoke: $t FAILED (log: $work/log, reproducer: $work/artifacts/)"
        failed=$((failed + 1))
        failures+=("$t")
        rm -rf "$work/scratch"
    fi
done
echo "fuzz_smoke: ${failures[*]:-no target} failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
