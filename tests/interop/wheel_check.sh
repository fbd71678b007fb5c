#!/usr/bin/env bash
# The Python package (issue 31 item 1), installed as a user would: `pip install '.[volatility]'`
# from the checkout into a fresh venv beside volatility3 (pyproject.toml: pip runs maturin; here
# with the dev profile and the test build's target/, so nothing is compiled twice), then, from
# that venv only:
#   1. `etwdump` is on PATH and is the wheel's (`command -v` in the venv's bin), and its
#      `sessions --format json` on the shipped sample gives the sample's six sessions;
#   2. Volatility finds `windows.etw.*` without `-p` (the plugin file was installed into
#      site-packages/volatility3/plugins/windows/, one of Volatility's default plugin
#      directories) and `windows.etw.Sessions` (offline, with the ISF directory given) lists
#      the same logger ids and names as etwdump;
#   3. `pip uninstall` removes both again (Volatility no longer lists the plugin).
# usage: tests/interop/wheel_check.sh SYMDIR   (SYMDIR: volatility ISFs, e.g. vol.sh's WORK/symbols)
# Prints ok/FAIL lines; exits 1 on a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
symdir=${1:?SYMDIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; status=1; }
VOL_VERSION=2.28.2

# The README's route: `pip install '.[volatility]'` from the checkout (PEP 517: pip runs
# maturin), with maturin told to use the dev profile and the test build's target/.
python3 -m venv "$work/user"
"$work/user/bin/pip" install --quiet --disable-pip-version-check "volatility3==$VOL_VERSION"
(cd "$root" && MATURIN_PEP517_ARGS="--profile dev" CARGO_TARGET_DIR="$root/target" \
    "$work/user/bin/pip" install --disable-pip-version-check ".[volatility]" >"$work/build.log" 2>&1) \
    || { tail -30 "$work/build.log"; fail "pip install '.[volatility]'"; exit 1; }
ok "pip install '.[volatility]' from the checkout into a fresh venv (volatility3 $("$work/user/bin/python" -c 'import volatility3.framework as f; print(f.constants.PACKAGE_VERSION)'))"

export PATH="$work/user/bin:$PATH"
unset ETWDUMP
where=$(command -v etwdump || true)
[ "$where" = "$work/user/bin/etwdump" ] && ok "etwdump on PATH is the wheel's ($where)" \
    || fail "etwdump on PATH: '$where', not the venv's"
sample="$root/tests/data/sample-x64-etw.dmp"
pdb="$root/tests/fixtures/x64-19041/ntkrnlmp.pdb"
etw_sessions=$(etwdump sessions "$sample" --pdb "$pdb" --format json 2>/dev/null \
    | "$work/user/bin/python" -c 'import json,sys; print(" ".join("%s=%s" % (s["logger_id"], s["name"]) for s in json.load(sys.stdin)["records"] if s["kind"] == "session"))')
[ -n "$etw_sessions" ] && ok "etwdump sessions on the sample: $etw_sessions" || fail "etwdump sessions gave nothing"

mkdir -p "$work/cache"
vol() { (cd "$work" && "$work/user/bin/vol" --offline -q -s "$symdir" --cache-path "$work/cache" "$@"); }
if vol --help 2>/dev/null | grep -q "windows.etw.Sessions"; then
    ok "vol lists windows.etw.Sessions without -p"
else
    fail "vol does not list windows.etw.Sessions without -p"
fi
vol_sessions=$(vol -r json -f "$sample" windows.etw.Sessions 2>/dev/null \
    | "$work/user/bin/python" -c 'import json,sys; print(" ".join("%s=%s" % (r["LoggerId"], r["Name"]) for r in json.load(sys.stdin)))' || true)
[ "$vol_sessions" = "$etw_sessions" ] && ok "windows.etw.Sessions (no -p, etwdump from PATH) = etwdump sessions" \
    || fail "windows.etw.Sessions: '$vol_sessions' against etwdump's '$etw_sessions'"

"$work/user/bin/pip" uninstall --quiet --yes etwdump
if vol --help 2>/dev/null | grep -q "windows.etw.Sessions"; then
    fail "pip uninstall left the plugin"
else
    ok "pip uninstall etwdump removes the plugin and the binary ($( [ -e "$work/user/bin/etwdump" ] && echo "binary left!" || echo "binary gone"))"
fi
[ -e "$work/user/bin/etwdump" ] && fail "pip uninstall left bin/etwdump"
echo "== wheel_check: $( [ $status -eq 0 ] && echo "all passed" || echo "FAILED")"
exit $status
