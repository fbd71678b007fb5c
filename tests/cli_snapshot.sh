#!/usr/bin/env bash
# CLI snapshot (issue 28 step 3): runs every command in every format on the shipped samples,
# a few forge dumps and the error cases, and records each run's stdout, stderr and exit code
# (plus the files a command writes) in OUTDIR, one file per run. Two snapshots of the same
# inputs taken with two binaries must be byte-identical:
#
#   bash tests/cli_snapshot.sh BEFORE_BIN /tmp/snap-before [FORGE_DIR]
#   bash tests/cli_snapshot.sh AFTER_BIN  /tmp/snap-after  [FORGE_DIR]
#   diff -r /tmp/snap-before /tmp/snap-after && echo identical
#
# FORGE_DIR (optional) holds forge dumps: every *.dmp in it and in its subdirectories is run
# too, with the ISF next to it when the forge wrote one (a triage scenario's
# <GUID>-<age>.json), else with the 19041 fixture PDB when its name says 19041. For example:
#   forge /tmp/f --tampered --scan --fixtures DIR_WITH_x64-19041; forge --triage /tmp/t;
#   forge --sample-realtime /tmp/f/realtime-19041.dmp
# Run from the repository root.
set -u
BIN=$(realpath "$1")
OUT=$2
FORGE=${3:-}
rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
N=0

# run NAME ARGS...: stdout, stderr, exit code of `etwdump ARGS...` (paths under $WORK shown as
# WORK, the one thing that differs between two runs).
run() {
    local name=$1
    shift
    "$BIN" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" </dev/null
    echo $? >"$OUT/$name.rc"
    sed -i "s#$WORK#WORK#g" "$OUT/$name.out" "$OUT/$name.err" 2>/dev/null || true
    N=$((N + 1))
}

# Every command and format on one dump (DUMP, then symbol options).
dump_commands() {
    local tag=$1 dump=$2
    shift 2
    local sym=("$@")
    for f in table json; do
        run "$tag.info.$f" info "$dump" "${sym[@]}" --format $f
        run "$tag.overview.$f" overview "$dump" "${sym[@]}" --format $f
        run "$tag.symbols.$f" symbols "$dump" "${sym[@]}" --format $f
    done
    run "$tag.overview.switches1" overview "$dump" "${sym[@]}" --switches 1
    for f in table json csv; do
        run "$tag.sessions.$f" sessions "$dump" "${sym[@]}" --format $f
    done
    for f in table json jsonl csv; do
        run "$tag.buffers.$f" buffers "$dump" "${sym[@]}" --format $f
        run "$tag.buffers-s2.$f" buffers "$dump" "${sym[@]}" --session 2 --format $f
        run "$tag.providers.$f" providers "$dump" "${sym[@]}" --format $f
        run "$tag.providers-all.$f" providers "$dump" "${sym[@]}" --all --format $f
        run "$tag.check.$f" check "$dump" "${sym[@]}" --format $f
        run "$tag.scan.$f" scan "$dump" "${sym[@]}" --threads 1 --format $f
        run "$tag.cswitch.$f" cswitch "$dump" "${sym[@]}" --format $f
        run "$tag.cswitch-cpu0.$f" cswitch "$dump" "${sym[@]}" --cpu 0 --last 5s --format $f
        run "$tag.cswitch-per-record.$f" cswitch "$dump" "${sym[@]}" --per-record --format $f
        run "$tag.cswitch-carved.$f" cswitch "$dump" "${sym[@]}" --carved --format $f
        run "$tag.events.$f" events "$dump" "${sym[@]}" --format $f
        run "$tag.events-s2.$f" events "$dump" "${sym[@]}" --session 2 --format $f
        run "$tag.events-carved.$f" events "$dump" "${sym[@]}" --carved --format $f
    done
    run "$tag.cswitch.jsonl-keep" cswitch "$dump" "${sym[@]}" --format jsonl --keep-untimed
    run "$tag.events.jsonl-keep" events "$dump" "${sym[@]}" --format jsonl --keep-untimed
    run "$tag.scan.default-threads" scan "$dump" "${sym[@]}" --format csv
    run "$tag.buffers.bad-session" buffers "$dump" "${sym[@]}" --session nosuch
    run "$tag.events.bad-session" events "$dump" "${sym[@]}" --session nosuch
    run "$tag.extract.bad-session" extract "$dump" "${sym[@]}" -o "$WORK/none" --session nosuch
    # Files the commands write.
    run "$tag.cswitch.svg" cswitch "$dump" "${sym[@]}" --svg "$WORK/$tag.svg"
    run "$tag.cswitch.svg-json" cswitch "$dump" "${sym[@]}" --cpu 1 --last 1ms --svg "$WORK/$tag-2.svg" --format json
    run "$tag.cswitch.svg-bad" cswitch "$dump" "${sym[@]}" --svg "$WORK/nodir/x.svg"
    run "$tag.extract" extract "$dump" "${sym[@]}" -o "$WORK/$tag-etl"
    run "$tag.extract.again" extract "$dump" "${sym[@]}" -o "$WORK/$tag-etl"
    run "$tag.extract.overwrite" extract "$dump" "${sym[@]}" -o "$WORK/$tag-etl" --overwrite --session 2
    run "$tag.scan.output" scan "$dump" "${sym[@]}" --threads 1 -o "$WORK/$tag-scan" --format json
    for e in "$WORK/$tag-etl"/*.etl; do
        [ -e "$e" ] || continue
        local b
        b=$(basename "$e")
        run "$tag.etl.$b.table" etl "$e"
        run "$tag.etl.$b.json" etl "$e" --format json
    done
    for f in hex json raw; do
        run "$tag.read-phys.$f" read "$dump" 0x1000 64 --physical --format $f
        run "$tag.read-virt.$f" read "$dump" 0xfffff80000000000 32 --format $f
    done
    run "$tag.read.unmapped" read "$dump" 0x10 16
    for f in "$WORK/$tag.svg" "$WORK/$tag-2.svg" "$WORK/$tag-etl"/* "$WORK/$tag-scan"/*; do
        [ -f "$f" ] && sed "s#$WORK#WORK#g" "$f" >"$OUT/$tag.file.$(basename "$f")"
    done
}

P=(--pdb tests/fixtures/x64-19041/ntkrnlmp.pdb)
dump_commands etw tests/data/sample-x64-etw.dmp "${P[@]}"
dump_commands etw-nopdb tests/data/sample-x64-etw.dmp
dump_commands small tests/data/sample-x64.dmp
dump_commands small-strict tests/data/sample-x64.dmp --strict
if [ -n "$FORGE" ]; then
    for d in "$FORGE"/*.dmp "$FORGE"/*/*.dmp; do
        [ -f "$d" ] || continue
        sym=()
        case $(basename "$d") in
        *19041*) sym=("${P[@]}") ;;
        esac
        for j in "$(dirname "$d")"/*-*.json; do
            case $(basename "$j") in
            [0-9A-F]*-[0-9]*.json) sym=(--isf "$j") ;;
            esac
        done
        dump_commands "forge-$(basename "$d" .dmp)" "$d" "${sym[@]}"
    done
fi

# Symbols without a dump.
for f in table json; do
    run "symbols.pdb.$f" symbols "${P[@]}" --format $f
    run "symbols.pdb-all.$f" symbols "${P[@]}" --all-symbols --types _WMI_LOGGER_CONTEXT,_KPRCB --format $f
    run "symbols.build.$f" symbols --build 19041 --format $f
    run "symbols.build-x86.$f" symbols --build 14393 --x86 --format $f
done
run symbols.none symbols

# Help, version, completions, manual page.
run help --help
run version --version
run noargs
for c in completions manpage overview info sessions buffers providers check extract scan cswitch events etl symbols read; do
    run "help.$c" "$c" --help
done
for s in bash zsh fish elvish powershell; do
    run "completions.$s" completions $s
done
run manpage manpage

# Error cases.
run err.missing info /nonexistent/x.dmp
run err.directory info tests
run err.directory-sessions sessions tests
run err.bad-format sessions tests/data/sample-x64.dmp --format jsonl
run err.bad-format2 info tests/data/sample-x64.dmp --format csv
run err.bad-format3 cswitch tests/data/sample-x64.dmp --format xml
run err.bad-command frobnicate
run err.bad-number read tests/data/sample-x64.dmp zz 16
run err.bad-duration cswitch tests/data/sample-x64.dmp --last 5parsecs
run err.not-a-dump info README.md
run err.not-an-etl etl README.md
run err.etl-missing etl /nonexistent.etl
run err.pdb-missing info tests/data/sample-x64.dmp --pdb /nonexistent.pdb
run err.pdb-isf-conflict info tests/data/sample-x64.dmp --pdb a --isf b
run err.layout-missing info tests/data/sample-x64.dmp --layout /nonexistent.json
run err.carved-session events tests/data/sample-x64.dmp --carved --session 2
mkdir -p "$WORK/existing"
echo '{}' >"$WORK/existing/manifest.json"
run err.extract-existing extract tests/data/sample-x64-etw.dmp "${P[@]}" -o "$WORK/existing"
mkdir -p "$WORK/empty-existing"
run err.extract-empty-existing extract tests/data/sample-x64-etw.dmp "${P[@]}" -o "$WORK/empty-existing"
echo x >"$WORK/a-file"
run err.extract-into-file extract tests/data/sample-x64-etw.dmp "${P[@]}" -o "$WORK/a-file"
run err.scan-existing scan tests/data/sample-x64-etw.dmp "${P[@]}" -o "$WORK/existing" --threads 1
head -c 100000 tests/data/sample-x64-etw.dmp >"$WORK/cut.dmp"
run err.truncated info "$WORK/cut.dmp"
run err.truncated-strict info "$WORK/cut.dmp" --strict
run err.truncated-sessions sessions "$WORK/cut.dmp" "${P[@]}"
echo "$N runs recorded in $OUT"
