#!/usr/bin/env bash
# volatility3 interop: the forge's fixture dumps under `vol windows.info`, and volatility's
# reading of the fixture PDBs against etwdump's (`etwdump symbols --pdb ... --format json`).
#
#   tests/interop/vol.sh [--manifest DIR/manifest.json] [--work DIR] [--require-etwdump]
#                        [--skip-etwdump]
#
# 1. makes sure tests/interop/.venv (gitignored; shared with run.sh's kdmp-parser) has
#    volatility3==2.28.2 and pefile==2024.8.26 from PyPI (the only network use),
# 2. without --manifest: builds the forge (target dir $FORGE_TARGET_DIR, default
#    <repo>/target-forge) and writes the standard set (with one dump per fixture kernel) into a
#    temporary directory; run.sh passes the set it already wrote,
# 3. vol_check.py (fully offline): pdbconv of every fixture PDB into a temporary ISF directory,
#    `vol --offline windows.info` on every x64 fixture dump, and the layout comparison with
#    $ETWDUMP (default <repo>/target/debug/etwdump). Without `etwdump symbols` that part prints
#    "SKIPPED: etwdump symbols not available" (a failure with --require-etwdump).
# --work DIR: keep the scratch directory (ISF files in DIR/symbols, volatility's cache in
# DIR/cache) instead of a temporary one; run.sh passes one so that sessions_check.py reuses
# the converted ISFs.
# Exits non-zero on any disagreement.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$here/.venv"
VOL_VERSION=2.28.2
PEFILE_VERSION=2024.8.26

manifest=""
keep_work=""
check_flags=()
while [ $# -gt 0 ]; do
    case "$1" in
        --manifest) manifest="${2:?--manifest needs a path}"; shift ;;
        --work) keep_work="${2:?--work needs a directory}"; shift ;;
        --require-etwdump | --skip-etwdump) check_flags+=("$1") ;;
        *) echo "usage: $0 [--manifest PATH] [--work DIR] [--require-etwdump] [--skip-etwdump]" >&2; exit 2 ;;
    esac
    shift
done

start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - "$VOL_VERSION" "$PEFILE_VERSION" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
sys.exit(m.version("volatility3") != sys.argv[1] or m.version("pefile") != sys.argv[2])
EOF
then
    echo "== installing volatility3==$VOL_VERSION pefile==$PEFILE_VERSION into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "volatility3==$VOL_VERSION" "pefile==$PEFILE_VERSION"
fi

if [ -n "$keep_work" ]; then
    mkdir -p "$keep_work"
    work=$(cd "$keep_work" && pwd)
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/forge-vol.XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi
if [ -z "$manifest" ]; then
    target="${FORGE_TARGET_DIR:-$root/target-forge}"
    echo "== building the forge (target dir $target)"
    (cd "$root" && CARGO_TARGET_DIR="$target" cargo build --quiet -p etwdump-forge)
    mkdir -p "$work/dumps"
    "$target/debug/forge" "$work/dumps" 2>/dev/null
    manifest="$work/dumps/manifest.json"
fi

echo "== vol_check.py (volatility3 $VOL_VERSION, offline)"
export ETWDUMP="${ETWDUMP:-$root/target/debug/etwdump}"
status=0
"$venv/bin/python" "$here/vol_check.py" "$manifest" --fixtures "$root/tests/fixtures" \
    --work "$work" ${check_flags[@]+"${check_flags[@]}"} || status=1
echo "== vol.sh: $([ "$status" -eq 0 ] && echo "all checks passed" || echo FAILED) in $(($(date +%s) - start)) s"
exit "$status"
