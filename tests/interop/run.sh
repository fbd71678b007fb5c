#!/usr/bin/env bash
# Interop check of the forge's synthetic dumps.
#
#   tests/interop/run.sh [--with-16g] [--require-etwdump] [--skip-etwdump]
#                        [--require-etwdump-symbols] [--require-etwdump-sessions] [--skip-vol]
#                        [--require-etwdump-buffers] [--with-large]
#
# 1. creates tests/interop/.venv (gitignored; vol.sh adds volatility3 to it) with kdmp-parser==0.7.4
#    from PyPI,
# 2. builds the forge (target dir: $FORGE_TARGET_DIR, default <repo>/target-forge) and writes the
#    standard set of dumps + manifest.json into a temporary directory,
# 3. walk_dump.py: an independent Python reading of every dump (x64, x86 PAE, x86 non-PAE),
# 4. check_kdmp.py: kdmp-parser on every x64 dump, and etwdump (`$ETWDUMP read ... --format json`,
#    default <repo>/target/debug/etwdump) on every dump.
# 5. vol.sh: volatility3 2.28.2 (installed into the same venv) on the set's fixture dumps
#    (`vol windows.info`) and volatility's ISF of each fixture PDB against
#    `$ETWDUMP symbols --pdb`; --require-etwdump-symbols makes a missing `symbols` command a
#    failure (vol.sh --require-etwdump), --skip-etwdump skips that part too, --skip-vol skips vol.sh.
# 6. sessions_check.py: the ETW dumps of the set (fixture-<name>-etw.dmp, ...): the volatility3
#    plugin tests/interop/independent/etwdump_sessions.py (an independent Python reading) (offline, with the ISFs vol.sh converted)
#    and `$ETWDUMP sessions --format json` against the forge's expected sessions;
#    --require-etwdump-sessions makes a missing `sessions` command a failure; with --skip-vol
#    only etwdump is compared (no plugin run).
# 7b. triage_check.py: `forge --triage` scenarios and the real triage dump (when present):
#    `$ETWDUMP extract` on each, etl-parser on every .etl vs the manifest and the forge's counts.
# 7. etl_check.py: the ETW dumps with buffers (fixture-<name>-etw-buffers.dmp): `$ETWDUMP buffers`
#    and `$ETWDUMP extract` against the forge's per-buffer expectations, etl-parser==1.0.1 (PyPI,
#    installed into the venv) on every extracted .etl, and etl-parser vs `$ETWDUMP etl` on the
#    real ETL files of /work/shared/data/etl; --require-etwdump-buffers makes missing
#    `buffers`/`extract`/`etl` commands a failure.
# 7c. etl_viewers_check.py: `$ETWDUMP extract` on the plugin set (`forge --plugin-set`: the
#    sample's memory with processes and modules): etl-parser and dissect.etl==3.14 (PyPI) decode
#    every record of the header and rundown buffers, the header buffer holds the header event
#    and the 0x0050 partition record, a kernel session's rundown names each forged process
#    (name, parent), thread and module, and each processor's buffers are in time order.
# 6b. wheel_check.sh: the Python package (pyproject.toml, maturin) built, installed with pip
#    into a fresh venv beside volatility3: etwdump on PATH, the plugins found without -p, their
#    Sessions rows equal etwdump's, and uninstalled again.
# 7d. events_check.py: `$ETWDUMP etl FILE --events` on the real ShutdownPerfDiagLogger.etl, on
#    the .etl files `extract` writes from the real triage dumps (when present) and from the
#    plugin set: every decoded classic kernel field (process, thread, image, header extension,
#    DPC, ISR, ...) against etl-parser's and dissect.etl's, record by record; records a reader
#    has no class for, and its known bugs, counted and named.
# 7e. events_check.py --payload-set: `forge --payloads` (the NT Kernel Logger's buffers of an x64
#    dump and a session of an x86 dump with realistic payloads of every decoded kernel class,
#    written from wmicore.mof and the Learn class pages): every payload of those sessions decodes
#    with no problem and every field etl-parser / dissect.etl decode agrees (their 32-bit limits
#    and known bugs counted and named).
# 8. triage_check.py: `$ETWDUMP extract` on the forge triage scenarios and the real triage dump.
# 8b. manifest_check.py: `$ETWDUMP extract` on the real triage dumps (when present) and the forge
#    triage scenarios, then `$ETWDUMP etl --events` on every .etl: each payload decoded from the
#    manifest schema table (class "manifest") field by field against etl-parser 1.0.1's decoding
#    of the same record; every event etl-parser decodes that etwdump does not is one the table
#    leaves out on purpose.
# 9. qemu_check.py: a real QEMU (Debian qemu-system-x86) `dump-guest-memory` ELF core of a paused
#    32 MiB guest: `$ETWDUMP info` reports exactly its PT_LOAD layout, physical reads equal the
#    file's bytes, and `sessions` fails in one line (no Windows in it). Skipped, said so,
#    without qemu-system-x86_64.
# 9b. vol_plugins_check.py (with volatility): `forge --plugin-set` (the sample's memory and a
#    hostile-names variant, each as crash dump, raw, .vmem + .vmss and ELF core); the plugin
#    suite plugins/volatility3/windows/etw.py (Sessions, Buffers, CSwitch, --dump, --handoff,
#    Timeliner) on each file, every row against etwdump's JSON on the same file.
# 10. image_check.py: every dump is also written as memory images (`forge --images`: raw, .vmem +
#    .vmss, .vmsn, ELF core); `$ETWDUMP info` finds the forge's ranges, page-table root, kernel
#    base and build on each, `sessions` on the ETW dumps' images equals the dump's, and
#    volatility3 windows.info on the x64 fixture images (raw, .vmem, ELF) reports the same
#    Kernel Base, DTB and build.
# 11. scan_check.py: `forge --scan` scenarios (stopped sessions in freed pool, lost, overwritten
#    and unmapped buffers, stale copies, orphaned CCsw blocks and contexts, decoys): `$ETWDUMP
#    scan -o DIR` lists every planted buffer with its class and sequence number and nothing
#    else, one group per stopped session, and etl-parser reads every carved .etl with the
#    manifest's records per buffer and hook keys.
# 12. timesketch_check.py: `$ETWDUMP cswitch` / `events --format jsonl` on the x64 buffer dumps,
#    read by timesketch-import-client's own line handling (ImportStreamer.add_file): every line
#    accepted with our datetime, `timestamp` in microseconds since 1970 of the same instant, the
#    raw clock under `raw_timestamp`; untimed rows left out by default, counted, and given back
#    by --keep-untimed.
# 13. xpress_check.py: `forge --xpress` (the forge's Plain LZ77 and LZ77+Huffman compressors,
#    [MS-XCA], on empty, tiny, spec-example, zero, random, text and forged-dump texts, on and off
#    64 KiB): dissect.util==3.24 (PyPI, a black box) decodes every encoding to its plain text.
# 13b. hiber_check.py: `forge --hiberfil` (Windows 8+ x64 hibernation files of the x64 fixture
#    machines: every format version x codec x full/Fast Startup, one WAKE and one wiped file)
#    read by LeechCore's hibr device (leechcorepyc==2.23.3, PyPI) and, when $HIBER_VOL_HIB names
#    volatility3 pull request 1036's layers/hib.py (in no volatility3 release; decoding through
#    xpress_lz77==1.0.1, PyPI), by volatility3's HibernationLayer: every page a reader yields
#    equals the raw image, every stored PFN is readable, the wiped file is refused; the readers'
#    known quirks are counted by name, anything else fails.
# --with-16g adds two 16 GiB dumps (sparse; full and bitmap) to the set; --with-large adds
# fixture-x64-19041-etw-large.dmp (256 MiB of ETW buffers; extract throughput is printed).
# Exits non-zero on any disagreement.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$here/.venv"

forge_flags=()
check_flags=()
vol_flags=()
sessions_flags=()
etl_flags=()
run_vol=1
for arg in "$@"; do
    case "$arg" in
        --with-16g) forge_flags+=(--with-16g) ;;
        --with-large) forge_flags+=(--with-large) ;;
        --require-etwdump-buffers) etl_flags+=("$arg") ;;
        --require-etwdump) check_flags+=("$arg") ;;
        --skip-etwdump) check_flags+=("$arg"); vol_flags+=("$arg"); sessions_flags+=("$arg"); etl_flags+=("$arg") ;;
        --require-etwdump-symbols) vol_flags+=(--require-etwdump) ;;
        --require-etwdump-sessions) sessions_flags+=("$arg") ;;
        --skip-vol) run_vol=0; sessions_flags+=(--skip-plugin) ;;
        *) echo "usage: $0 [--with-16g] [--require-etwdump] [--skip-etwdump] [--require-etwdump-symbols] [--require-etwdump-sessions] [--require-etwdump-buffers] [--with-large] [--skip-vol]" >&2; exit 2 ;;
    esac
done
start=$(date +%s)

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("kdmp-parser") != "0.7.4")' 2>/dev/null; then
    echo "== creating $venv with kdmp-parser==0.7.4"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kdmp-parser==0.7.4"
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("etl-parser") != "1.0.1")' 2>/dev/null; then
    echo "== installing etl-parser==1.0.1 into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "etl-parser==1.0.1"
fi

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("dissect.etl") != "3.14")' 2>/dev/null; then
    echo "== installing dissect.etl==3.14 into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "dissect.etl==3.14"
fi

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("dissect.util") != "3.24")' 2>/dev/null; then
    echo "== installing dissect.util==3.24 into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "dissect.util==3.24"
fi

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("timesketch-import-client") != "20261014")' 2>/dev/null; then
    # six: imported by the client's utils.py without being declared.
    echo "== installing timesketch-import-client==20261014 into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "timesketch-import-client==20261014" "six==1.17.0"
fi

target="${FORGE_TARGET_DIR:-$root/target-forge}"
echo "== building the forge (target dir $target)"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo build --quiet -p etwdump-forge)

out=$(mktemp -d "${TMPDIR:-/tmp}/forge-interop.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$target/debug/forge" "$out" --images ${forge_flags[@]+"${forge_flags[@]}"}

status=0
echo "== walk_dump.py (independent Python reader)"
"$venv/bin/python" "$here/walk_dump.py" "$out/manifest.json" || status=1

echo "== check_kdmp.py (kdmp-parser 0.7.4 on x64 dumps; etwdump on all dumps)"
export ETWDUMP="${ETWDUMP:-$root/target/debug/etwdump}"
"$venv/bin/python" "$here/check_kdmp.py" "$out/manifest.json" ${check_flags[@]+"${check_flags[@]}"} || status=1

if [ "$run_vol" -eq 1 ]; then
    echo "== vol.sh (volatility3 on the fixture dumps; its ISF vs etwdump symbols)"
    bash "$here/vol.sh" --manifest "$out/manifest.json" --work "$out/vol" \
        ${vol_flags[@]+"${vol_flags[@]}"} || status=1
fi

echo "== sessions_check.py (ETW sessions: volatility3 plugin, forge, etwdump sessions)"
"$venv/bin/python" "$here/sessions_check.py" "$out/manifest.json" --symbols "$out/vol/symbols" \
    ${sessions_flags[@]+"${sessions_flags[@]}"} || status=1

"$target/debug/forge" --plugin-set "$out/plugins" >/dev/null 2>&1
if [ "$run_vol" -eq 1 ]; then
    echo "== vol_plugins_check.py (the windows.etw plugin suite under volatility3: every row vs etwdump on dumps and images)"
    "$venv/bin/python" "$here/vol_plugins_check.py" "$out/plugins" --symbols "$out/vol/symbols" || status=1
    echo "== wheel_check.sh (the Python package: maturin wheel, pip install into a fresh venv, etwdump on PATH, windows.etw.* found by Volatility without -p, uninstall)"
    bash "$here/wheel_check.sh" "$out/vol/symbols" || status=1
fi

echo "== image_check.py (memory images of every dump: etwdump info/sessions; volatility3 windows.info on raw, .vmem, ELF)"
image_flags=()
[ "$run_vol" -eq 1 ] || image_flags+=(--skip-vol)
"$venv/bin/python" "$here/image_check.py" "$out/manifest.json" --symbols "$out/vol/symbols" \
    ${image_flags[@]+"${image_flags[@]}"} || status=1

echo "== etl_check.py (ETW buffers: forge vs etwdump buffers/extract; etl-parser 1.0.1 on the .etl files)"
"$venv/bin/python" "$here/etl_check.py" "$out/manifest.json" \
    ${etl_flags[@]+"${etl_flags[@]}"} || status=1

echo "== etl_viewers_check.py (extracted .etl files of the sample's memory through etl-parser 1.0.1 and dissect.etl 3.14: header records, rundown, time order)"
(cd "$out" && "$venv/bin/python" "$here/etl_viewers_check.py" "$out/plugins" \
    --pdb "$root/tests/fixtures/x64-19041/ntkrnlmp.pdb") || status=1

echo "== events_check.py (etl --events payloads, field by field, vs etl-parser 1.0.1 and dissect.etl 3.14: the real ShutdownPerfDiagLogger.etl, the real triage dumps' and the plugin set's extracted files)"
(cd "$out" && "$venv/bin/python" "$here/events_check.py" \
    --real "$root/../shared/data/etl/ShutdownPerfDiagLogger.etl" \
    --dump "$root/../shared/data/dumps/triage_x64.dmp" \
    --dump "$root/../shared/data/dumps/triage_arm64.dmp" \
    --set "$out/plugins" --pdb "$root/tests/fixtures/x64-19041/ntkrnlmp.pdb") || status=1

echo "== events_check.py --payload-set (forge --payloads: realistic payloads of every decoded kernel class, x64 and x86, vs etl-parser 1.0.1 and dissect.etl 3.14)"
"$target/debug/forge" --payloads "$out/payloads" >/dev/null 2>&1
(cd "$out" && "$venv/bin/python" "$here/events_check.py" --payload-set "$out/payloads") || status=1

echo "== triage_check.py (triage dumps: etwdump extract, etl-parser 1.0.1 on the .etl files, forge expectations)"
"$target/debug/forge" --triage "$out/triage" >/dev/null
"$venv/bin/python" "$here/triage_check.py" "$out/triage" \
    --real "$root/../shared/data/dumps/triage_x64.dmp" \
    --real-isf "$root/../shared/isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz" || status=1

echo "== manifest_check.py (manifest-based event payloads vs etl-parser 1.0.1, field by field: the real triage dumps and the forge's triage scenarios)"
"$venv/bin/python" "$here/manifest_check.py" \
    --real "$root/../shared/data/dumps/triage_x64.dmp" \
    --real "$root/../shared/data/dumps/triage_arm64.dmp" \
    --triage "$out/triage" || status=1

echo "== timesketch_check.py (cswitch/events JSON Lines through timesketch-import-client 20261014's line handling)"
"$venv/bin/python" "$here/timesketch_check.py" "$out/manifest.json" || status=1

echo "== scan_check.py (carving: etwdump scan on the forge's scan scenarios; etl-parser 1.0.1 on the carved .etl files)"
"$target/debug/forge" "$out/scan" --scan >/dev/null
"$venv/bin/python" "$here/scan_check.py" "$out/scan/manifest.json" || status=1

echo "== xpress_check.py (forge --xpress: the forge's Xpress encodings decoded by dissect.util 3.24)"
"$target/debug/forge" --xpress "$out/xpress" >/dev/null 2>&1
"$venv/bin/python" "$here/xpress_check.py" "$out/xpress" || status=1

for pkg in xpress_lz77==1.0.1 leechcorepyc==2.23.3; do
    if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; n, v = sys.argv[1].split("=="); sys.exit(m.version(n) != v)' "$pkg" 2>/dev/null; then
        echo "== installing $pkg into $venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$pkg"
    fi
done
echo "== hiber_check.py (forge --hiberfil: hibernation files read by LeechCore 2.23.3 and, with \$HIBER_VOL_HIB, volatility3 PR 1036's HibernationLayer)"
"$target/debug/forge" --hiberfil "$out/hiberfil" >/dev/null 2>&1
"$venv/bin/python" "$here/hiber_check.py" "$out/hiberfil/manifest.json" || status=1

echo "== qemu_check.py (a real QEMU dump-guest-memory ELF core: etwdump reads its PT_LOAD layout exactly)"
python3 "$here/qemu_check.py" "$ETWDUMP" || status=1

echo "== pdbutil_check.py (llvm-pdbutil vs etwdump symbols on the fixture PDBs)"
if command -v llvm-pdbutil >/dev/null 2>&1; then
    python3 "$here/pdbutil_check.py" "$ETWDUMP" "$root/tests/fixtures" || status=1
else
    echo "SKIPPED: llvm-pdbutil is not installed"
fi

if [ "$status" -ne 0 ]; then
    echo "== interop: FAILED ($(($(date +%s) - start)) s)"
else
    echo "== interop: all checks passed ($(($(date +%s) - start)) s)"
fi
exit "$status"
