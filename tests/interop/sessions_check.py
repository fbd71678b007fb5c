#!/usr/bin/env python3
"""ETW sessions of the forge's fixture dumps: volatility3 plugin vs forge vs `etwdump sessions`.

usage: sessions_check.py MANIFEST.json [--symbols DIR | --work DIR] [--fixtures DIR]
                         [--require-etwdump-sessions] [--skip-etwdump] [--skip-plugin] [--jobs N]

Run with the venv's python (volatility3 2.28.2 installed; tests/interop/vol.sh does the setup);
run.sh calls it after vol.sh. Everything runs offline.

For every dump of the manifest with ETW logger state ("etw": written by `forge OUTDIR` as
fixture-<name>-etw.dmp and fixture-x64-19041-etw-max80.dmp), the forge's expectations are the
manifest's "etw"."slots" (kind "session" must be listed; "free" and "invalid" must not):

1. plugin (x64 dumps): `vol --offline -q -s SYMBOLS -p <repo>/tests/interop/independent -f DUMP -r json
   etwdump_sessions.EtwSessions` with the fixture ISFs that vol.sh converted (--symbols
   WORK/symbols; with --work DIR, or when --symbols has none, they are converted here with
   volatility's pdbconv). Checks: the logger ids, and per session LoggerName, Address,
   LogFileName, LoggerMode and BufferSize against the forge (ids, names and addresses again
   three-way with etwdump in part 2). The
   x86 dump is skipped (volatility3 cannot open the forge's x86 dumps, see vol_check.py).
2. etwdump (every ETW dump, x86 too): `$ETWDUMP sessions DUMP --pdb <fixture PDB> --format json`
   (default <repo>/target/debug/etwdump): the logger ids, and per session every field against
   the forge: name, log_file, instance_guid, address, logger_mode, logger_mode_flags (the
   documented EVENT_TRACE_* names of the set bits), clock_type, clock_type_name (contains
   raw / QPC or perf / system / cycle), buffer_size, minimum/maximum/number_of_buffers,
   buffers_written, events_lost, log_buffers_lost, real_time_buffers_lost, start_time
   (ISO-8601 UTC, 7 fractional digits, from the FILETIME), pool_type, plus maximum_event_size
   and start_time_raw when etwdump reports them; layout_source is printed as a note. Without a
   `sessions` command this part prints "SKIPPED: etwdump sessions not available" and does not
   fail, unless --require-etwdump-sessions is given.

Prints one line per check ("ok  ", "FAIL", "note", "skip"); exits 1 on any failure.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_BIN = os.path.dirname(sys.executable)
PLUGIN_DIR = os.path.join(ROOT, "tests", "interop", "independent")
PLUGIN = "etwdump_sessions.EtwSessions"
sys.path.insert(0, HERE)
import vol_check  # noqa: E402  (Checker, fixture loading, pdbconv)

# learn.microsoft.com "Logging Mode Constants" (evntrace.h).
MODE_NAMES = {
    0x00000001: "EVENT_TRACE_FILE_MODE_SEQUENTIAL",
    0x00000002: "EVENT_TRACE_FILE_MODE_CIRCULAR",
    0x00000004: "EVENT_TRACE_FILE_MODE_APPEND",
    0x00000008: "EVENT_TRACE_FILE_MODE_NEWFILE",
    0x00000020: "EVENT_TRACE_FILE_MODE_PREALLOCATE",
    0x00000040: "EVENT_TRACE_NONSTOPPABLE_MODE",
    0x00000080: "EVENT_TRACE_SECURE_MODE",
    0x00000100: "EVENT_TRACE_REAL_TIME_MODE",
    0x00000200: "EVENT_TRACE_DELAY_OPEN_FILE_MODE",
    0x00000400: "EVENT_TRACE_BUFFERING_MODE",
    0x00000800: "EVENT_TRACE_PRIVATE_LOGGER_MODE",
    0x00001000: "EVENT_TRACE_ADD_HEADER_MODE",
    0x00002000: "EVENT_TRACE_USE_KBYTES_FOR_SIZE",
    0x00004000: "EVENT_TRACE_USE_GLOBAL_SEQUENCE",
    0x00008000: "EVENT_TRACE_USE_LOCAL_SEQUENCE",
    0x00010000: "EVENT_TRACE_RELOG_MODE",
    0x00020000: "EVENT_TRACE_PRIVATE_IN_PROC",
    0x00400000: "EVENT_TRACE_STOP_ON_HYBRID_SHUTDOWN",
    0x00800000: "EVENT_TRACE_PERSIST_ON_HYBRID_SHUTDOWN",
    0x01000000: "EVENT_TRACE_USE_PAGED_MEMORY",
    0x02000000: "EVENT_TRACE_SYSTEM_LOGGER_MODE",
    0x04000000: "EVENT_TRACE_COMPRESSED_MODE",
    0x08000000: "EVENT_TRACE_INDEPENDENT_SESSION_MODE",
    0x10000000: "EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING",
    0x20000000: "EVENT_TRACE_BLOCKING_MODE",
    0x80000000: "EVENT_TRACE_ADDTO_TRIAGE_DUMP",
}
# etw-internals.md §7: 0 raw, 1 QPC, 2 system time, 3 CPU cycle counter. etwdump's names are
# its own; each must contain one of these (case-insensitive).
CLOCK_WORDS = {0: ("raw",), 1: ("qpc", "perf"), 2: ("system",), 3: ("cycle",)}

H = vol_check.H


def filetime_iso(ft):
    """FILETIME -> "2026-03-01T10:00:00.1234567Z"."""
    secs, frac = divmod(ft, 10_000_000)
    dt = datetime.datetime(1601, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=secs)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%07dZ" % frac


def expected_sessions(entry):
    return {s["logger_id"]: s for s in entry["etw"]["slots"] if s["kind"] == "session"}


def ids_str(ids):
    return ",".join(str(i) for i in sorted(ids))


# ------------------------------------------------------------------------------------ runs
def run_plugin(dump, symdir, cache):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    cmd = [os.path.join(VENV_BIN, "vol"), "--offline", "-q", "-s", symdir, "-p", PLUGIN_DIR,
           "-f", dump, "-r", "json", PLUGIN]
    t = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    rows = None
    if r.returncode == 0:
        try:
            rows = json.loads(r.stdout)
        except ValueError:
            rows = None
    err = (r.stderr.strip().splitlines() or [""])[-1]
    return rows, "exit %d: %s" % (r.returncode, err), time.time() - t


def run_etwdump(etwdump, dump, pdb):
    t = time.time()
    r = subprocess.run([etwdump, "sessions", dump, "--pdb", pdb, "--format", "json"],
                       capture_output=True, text=True)
    out = None
    if r.returncode == 0:
        try:
            env = json.loads(r.stdout)
            # The output contract (docs/output-contract.md): {"format_version": 3, "command", "records", "warnings"}.
            if env.get("format_version") == 3 and env.get("command") == "sessions":
                out = env["records"]
        except (ValueError, AttributeError, KeyError):
            out = None
    err = (r.stderr.strip().splitlines() or [""])[-1]
    return out, "exit %d: %s" % (r.returncode, err or "no JSON envelope on stdout"), time.time() - t


def etwdump_has_sessions(etwdump):
    if not (os.path.isfile(etwdump) and os.access(etwdump, os.X_OK)):
        return False, "%s not found" % etwdump
    r = subprocess.run([etwdump, "sessions", "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "--pdb" not in r.stdout or "--format" not in r.stdout:
        return False, "%s has no `sessions --pdb --format` command" % etwdump
    return True, ""


# ---------------------------------------------------------------------------------- checks
def check_plugin(c, name, exp, rows):
    got = {}
    for row in rows:
        got.setdefault(row.get("LoggerId"), []).append(row)
    dup = [i for i, v in got.items() if len(v) > 1]
    c.check(not dup, "%s plugin lists each logger once" % name, "duplicates: %s" % dup if dup else "")
    got = {i: v[0] for i, v in got.items()}
    c.check(set(got) == set(exp), "%s plugin logger ids = forge" % name,
            "plugin %s, forge %s" % (ids_str(got), ids_str(exp)))
    for lid, s in sorted(exp.items()):
        row = got.get(lid)
        if row is None:
            continue
        problems = []
        if row.get("LoggerName") != s["name"]:
            problems.append("LoggerName %r vs %r" % (row.get("LoggerName"), s["name"]))
        if row.get("Address") != H(s["context_va"]):
            problems.append("Address %s vs %s" % (row.get("Address"), s["context_va"]))
        want_lf = s["log_file"]
        if row.get("LogFileName") != want_lf:
            problems.append("LogFileName %r vs %r" % (row.get("LogFileName"), want_lf))
        if row.get("LoggerMode") != s["logger_mode"]:
            problems.append("LoggerMode %s vs %#x" % (row.get("LoggerMode"), s["logger_mode"]))
        if row.get("BufferSize") != s["buffer_size"]:
            problems.append("BufferSize %s vs %#x" % (row.get("BufferSize"), s["buffer_size"]))
        c.check(not problems, "%s plugin logger %d LoggerName/Address/LogFileName/LoggerMode/BufferSize = forge"
                % (name, lid), "; ".join(problems) if problems else "%r %s %r %#x %#x" % (
                    s["name"], s["context_va"], want_lf, s["logger_mode"], s["buffer_size"]))
    return got


def etwdump_field_problems(s, e):
    """Every field of etwdump's session `e` against the forge's session `s`."""
    p = []

    def cmp(key, want, got=None, same=None):
        got = e.get(key) if got is None else got
        ok = same(got, want) if same else got == want
        if not ok:
            p.append("%s: etwdump %r, forge %r" % (key, got, want))

    cmp("log_file", s["log_file"])
    guid = str(e.get("instance_guid", "")).strip("{}").upper()
    cmp("instance_guid", s["instance_guid"].upper(), got=guid)
    cmp("logger_mode", s["logger_mode"])
    mode = s["logger_mode"]
    want_flags = sorted(n for bit, n in MODE_NAMES.items() if mode & bit)
    unknown = mode & ~sum(MODE_NAMES)
    got_flags = e.get("logger_mode_flags")
    if unknown:
        cmp("logger_mode_flags", want_flags, got=sorted(f for f in (got_flags or []) if f in MODE_NAMES.values()))
    else:
        cmp("logger_mode_flags", want_flags, got=sorted(got_flags) if isinstance(got_flags, list) else got_flags)
    cmp("clock_type", s["clock_type"])
    if s["clock_type"] is not None:
        words = CLOCK_WORDS.get(s["clock_type"], ())
        cname = e.get("clock_type_name")
        if not (isinstance(cname, str) and any(w in cname.lower() for w in words)):
            p.append("clock_type_name: etwdump %r, forge clock %d (%s)" % (cname, s["clock_type"], "/".join(words)))
    for key in ("buffer_size", "minimum_buffers", "maximum_buffers", "number_of_buffers",
                "buffers_written", "events_lost", "log_buffers_lost", "real_time_buffers_lost"):
        cmp(key, s[key])
    cmp("start_time", filetime_iso(s["start_time"]))
    pool = e.get("pool_type")
    if isinstance(pool, str) and not pool.strip().lstrip("-").isdigit():
        names = {0: "NonPagedPool", 1: "PagedPool", 0x200: "NonPagedPoolNx"}
        if pool != names.get(s["pool_type"]):
            p.append("pool_type: etwdump %r, forge %d" % (pool, s["pool_type"]))
    else:
        cmp("pool_type", s["pool_type"], got=int(pool) if pool is not None else None)
    if "maximum_event_size" in e:
        cmp("maximum_event_size", s["maximum_event_size"])
    if "start_time_raw" in e:
        cmp("start_time_raw", s["start_time"])
    return p


def check_rejected(c, name, entry, out):
    """Every forge "invalid" slot is a rejected_slot record with the slot's pointer."""
    want = {s["slot"]: H(s["va"]) for s in entry["etw"]["slots"] if s["kind"] == "invalid"}
    got = {}
    for e in out:
        if e.get("kind") == "rejected_slot":
            try:
                got[e.get("slot")] = H(e.get("value"))
            except (TypeError, ValueError):
                got[e.get("slot")] = None
    c.check(got == want, "%s etwdump rejected_slot records = forge invalid slots" % name,
            "forge %s, etwdump %s" % (sorted(want.items()), sorted(got.items())) if got != want else
            "%d slots" % len(want))


def check_etwdump(c, name, exp, out, plugin_rows):
    got = {}
    kinds = sorted({str(e.get("kind")) for e in out})
    c.check(set(kinds) <= {"session", "rejected_slot"}, "%s etwdump record kinds" % name, ", ".join(kinds))
    out = [e for e in out if e.get("kind") == "session"]
    for e in out:
        got.setdefault(e.get("logger_id"), []).append(e)
    dup = [i for i, v in got.items() if len(v) > 1]
    c.check(not dup, "%s etwdump lists each logger once" % name, "duplicates: %s" % dup if dup else "")
    got = {i: v[0] for i, v in got.items()}
    three = plugin_rows is not None
    ok = set(got) == set(exp) and (not three or set(plugin_rows) == set(exp))
    c.check(ok, "%s logger ids: %s = forge" % (name, "plugin = etwdump" if three else "etwdump"),
            "forge %s, etwdump %s%s" % (ids_str(exp), ids_str(got),
                                        ", plugin %s" % ids_str(plugin_rows) if three else ""))
    for lid, s in sorted(exp.items()):
        e = got.get(lid)
        if e is None:
            continue
        try:
            addr = H(e.get("address"))
        except (TypeError, ValueError):
            addr = None
        want_addr = H(s["context_va"])
        names = [("forge", s["name"], want_addr), ("etwdump", e.get("name"), addr)]
        if three and lid in plugin_rows:
            row = plugin_rows[lid]
            names.append(("plugin", row.get("LoggerName"), row.get("Address")))
        agree = all(n == s["name"] and a == want_addr for _, n, a in names)
        c.check(agree, "%s logger %d name/address: %s agree" % (name, lid, " = ".join(t for t, _, _ in names)),
                "%r %#x" % (s["name"], want_addr) if agree else
                "; ".join("%s %r %s" % (t, n, hex(a) if isinstance(a, int) else a) for t, n, a in names))
        problems = etwdump_field_problems(s, e)
        c.check(not problems, "%s logger %d etwdump fields = forge" % (name, lid),
                "log_file, instance_guid, logger_mode(+flags), clock_type(+name), buffer counts, "
                "lost counters, start_time, pool_type agree" if not problems else "; ".join(problems))
    sources = sorted({str(e.get("layout_source")) for e in out})
    c.note("%s etwdump layout_source: %s" % (name, ", ".join(sources)))


# ------------------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--symbols", help="ISF directory from vol.sh (WORK/symbols)")
    ap.add_argument("--work", help="scratch directory: ISFs converted here if --symbols has none")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures"))
    ap.add_argument("--require-etwdump-sessions", action="store_true")
    ap.add_argument("--skip-etwdump", action="store_true")
    ap.add_argument("--skip-plugin", action="store_true")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    a = ap.parse_args()

    t0 = time.time()
    c = vol_check.Checker()
    base = os.path.dirname(os.path.abspath(a.manifest))
    with open(a.manifest) as f:
        entries = [e for e in json.load(f) if e.get("etw")]
    c.check(len(entries) > 0, "manifest has dumps with ETW logger state",
            ", ".join(e["file"] for e in entries))
    fixtures = {os.path.basename(d): vol_check.load_fixture(os.path.join(a.fixtures, d))
                for d in sorted(os.listdir(a.fixtures))
                if os.path.isfile(os.path.join(a.fixtures, d, "symbols.json"))}

    # ---- 1. the volatility3 plugin
    plugin = {}
    if a.skip_plugin:
        c.skip("volatility3 plugin (--skip-plugin)")
    else:
        print("-- 1. volatility3 plugin %s (%s)" % (PLUGIN, PLUGIN_DIR), flush=True)
        work = a.work or (os.path.dirname(a.symbols) if a.symbols else None)
        symdir = a.symbols or (os.path.join(a.work, "symbols") if a.work else None)
        if symdir is None:
            print("sessions_check: give --symbols DIR or --work DIR", file=sys.stderr)
            return 2
        x64 = [e for e in entries if e["arch"] == "x64"]
        need = sorted({e["fixture"] for e in x64})
        missing = [fixtures[n] for n in need
                   if not os.path.exists(vol_check.isf_path(symdir, fixtures[n]))]
        if missing:
            print("-- converting %d fixture PDB(s) with pdbconv" % len(missing), flush=True)
            vol_check.convert_all(c, missing, symdir, a.jobs)
        else:
            c.note("reusing the ISFs in %s (%s)" % (symdir, ", ".join(need)))
        # volatility's identifier cache (vol.sh's, when reused). Runs are sequential: they
        # share that sqlite cache, and each takes a second or two.
        cache = os.path.join(work or symdir, "cache")
        os.makedirs(cache, exist_ok=True)
        for e in x64:
            why = vol_check.vol_unusable(fixtures[e["fixture"]])
            if why:
                c.skip("%s: plugin not run: %s" % (e["file"], why))
                continue
            rows, err, secs = run_plugin(os.path.join(base, e["file"]), symdir, cache)
            name = e["file"]
            if not c.check(rows is not None, "%s plugin runs" % name,
                           "%.1f s" % secs if rows is not None else err):
                continue
            plugin[name] = check_plugin(c, name, expected_sessions(e), rows)
        for e in entries:
            if e["arch"] != "x64":
                c.skip("%s: plugin not run (volatility3 cannot open the forge's x86 dumps; see vol_check.py)"
                       % e["file"])

    # ---- 2. etwdump sessions
    print("-- 2. etwdump sessions vs forge (and plugin)", flush=True)
    etwdump = os.environ.get("ETWDUMP", os.path.join(ROOT, "target", "debug", "etwdump"))
    ok, why = (False, "--skip-etwdump") if a.skip_etwdump else etwdump_has_sessions(etwdump)
    if not ok:
        print("SKIPPED: etwdump sessions not available (%s)" % why, flush=True)
        if a.require_etwdump_sessions and not a.skip_etwdump:
            c.check(False, "etwdump sessions available (--require-etwdump-sessions)", why)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            runs = [(e, pool.submit(run_etwdump, etwdump, os.path.join(base, e["file"]),
                                    fixtures[e["fixture"]]["pdb_path"])) for e in entries]
            for e, fut in runs:
                out, err, secs = fut.result()
                name = e["file"]
                if not c.check(isinstance(out, list), "%s etwdump sessions --format json runs" % name,
                               "%.1f s, %d sessions" % (secs, len(out)) if isinstance(out, list) else err):
                    continue
                check_etwdump(c, name, expected_sessions(e), out, plugin.get(name))
                check_rejected(c, name, e, out)

    print("sessions_check: %d checks, %d failures (%.1f s)" % (c.count, c.failures, time.time() - t0), flush=True)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
