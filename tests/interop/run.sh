#!/usr/bin/env bash
# Interop check of the forge's synthetic dumps.
#
#   tests/interop/run.sh [--with-16g] [--require-etwdump] [--skip-etwdump]
#
# 1. creates tests/interop/.venv (gitignored) with kdmp-parser==0.7.4 from PyPI,
# 2. builds the forge (target dir: $FORGE_TARGET_DIR, default <repo>/target-forge) and writes the
#    standard set of dumps + manifest.json into a temporary directory,
# 3. walk_dump.py: an independent Python reading of every dump (x64, x86 PAE, x86 non-PAE),
# 4. check_kdmp.py: kdmp-parser on every x64 dump, and etwdump (`$ETWDUMP read ... --format json`,
#    default <repo>/target/debug/etwdump) on every dump.
# --with-16g adds two 16 GiB dumps (sparse; full and bitmap) to the set.
# Exits non-zero on any disagreement.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$here/.venv"

forge_flags=()
check_flags=()
for arg in "$@"; do
    case "$arg" in
        --with-16g) forge_flags+=(--with-16g) ;;
        --require-etwdump | --skip-etwdump) check_flags+=("$arg") ;;
        *) echo "usage: $0 [--with-16g] [--require-etwdump] [--skip-etwdump]" >&2; exit 2 ;;
    esac
done

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("kdmp-parser") != "0.7.4")' 2>/dev/null; then
    echo "== creating $venv with kdmp-parser==0.7.4"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kdmp-parser==0.7.4"
fi

target="${FORGE_TARGET_DIR:-$root/target-forge}"
echo "== building the forge (target dir $target)"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo build --quiet -p etwdump-forge)

out=$(mktemp -d "${TMPDIR:-/tmp}/forge-interop.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$target/debug/forge" "$out" ${forge_flags[@]+"${forge_flags[@]}"}

status=0
echo "== walk_dump.py (independent Python reader)"
"$venv/bin/python" "$here/walk_dump.py" "$out/manifest.json" || status=1

echo "== check_kdmp.py (kdmp-parser 0.7.4 on x64 dumps; etwdump on all dumps)"
export ETWDUMP="${ETWDUMP:-$root/target/debug/etwdump}"
"$venv/bin/python" "$here/check_kdmp.py" "$out/manifest.json" ${check_flags[@]+"${check_flags[@]}"} || status=1

if [ "$status" -ne 0 ]; then
    echo "== interop: FAILED"
else
    echo "== interop: all checks passed"
fi
exit "$status"
