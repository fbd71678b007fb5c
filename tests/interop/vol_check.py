#!/usr/bin/env python3
"""volatility3 interop of the forge's fixture dumps and of etwdump's PDB reading.

usage: vol_check.py MANIFEST.json --work DIR [--fixtures DIR] [--require-etwdump | --skip-etwdump]
                    [--jobs N]

Run with the venv's python (volatility3 2.28.2 installed); tests/interop/vol.sh does the setup.
Everything runs offline: volatility3 with --offline, an ISF directory made here, and its own
identifier cache (XDG_CACHE_HOME below --work).

1. ISF: for each fixture directory of --fixtures (tests/fixtures/<name>/), volatility's pdbconv
   converts the PDB (`-f X.pdb -p X.pdb`) to
   WORK/symbols/windows/<pdb name>/<GUID, no dashes, uppercase>-<age>.json.xz; the ISF metadata
   must carry the GUID/age/name of the fixture's symbols.json.
2. windows.info: for every x64 fixture dump of the manifest ("fixture" key; those with ETW
   logger state, "etw", are left to sessions_check.py), `vol --offline -q
   -s WORK/symbols -f DUMP -r json windows.info` must succeed and report what the forge put
   there: Kernel Base (volatility prints it without sign extension: compared masked to 48
   bits), DTB, the ISF it matched (the fixture's PDB GUID/age), memory layer, KdDebuggerDataBlock,
   NTBuildLab (volatility reads at most 32 characters), KdVersionBlock and Major/Minor
   (15.<build>), MachineType, KeNumberProcessors = cpus, SystemTime, NtSystemRoot,
   NtMajorVersion 10 / NtMinorVersion 0 (KUSER_SHARED_DATA), PE Machine and TimeDateStamp.
   The x86 fixture dump is skipped: volatility3 cannot stack an x86 layer on it (its PAE DTB
   heuristic wants the PDPT page followed by the four page directories in the next four pages;
   the forge puts the PDPT at 0x1851A0, not page aligned, and the PDs at scattered PFNs) and
   the x86 fixture PDB lacks the types volatility requires (_EPROCESS, _ETHREAD, _TOKEN, ...).
3. Layout agreement: for each fixture, `$ETWDUMP symbols --pdb X.pdb --types T,... --format json`
   against volatility's ISF of the same PDB: PDB name/GUID/age, pointer size, for each type
   present in either its presence in both, size, union-ness, the same field names, and per
   field the offset and type (kind; base size and signedness - except volatility's `wchar`,
   which volatility declares signed; pointer target; array count and element; struct/union/enum
   name; enum size; bitfield position/length/base), and the RVA of every global of symbols.json
   (data symbols must be in etwdump's list; functions may be absent). If $ETWDUMP has no
   `symbols` command this part prints "SKIPPED: etwdump symbols not available" (a failure with
   --require-etwdump).

Prints one line per check ("ok  ", "FAIL", "note", "skip"); exits 1 on any failure.
"""
import argparse
import concurrent.futures
import datetime
import json
import lzma
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_BIN = os.path.dirname(sys.executable)

# Types compared in part 3 (those present in the PDB).
LAYOUT_TYPES = [
    "_WMI_LOGGER_CONTEXT", "_WMI_BUFFER_HEADER", "_ETW_SILODRIVERSTATE", "_ESERVERSILO_GLOBALS",
    "_KPRCB", "_KUSER_SHARED_DATA", "_KLDR_DATA_TABLE_ENTRY", "_DBGKD_GET_VERSION64",
    "_LIST_ENTRY", "_UNICODE_STRING", "_EX_FAST_REF",
]
IMAGE_SCN_CNT_CODE = 0x20
ADDR48 = (1 << 48) - 1


class Checker:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def check(self, ok, what, detail=""):
        self.count += 1
        if not ok:
            self.failures += 1
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail else ""), flush=True)
        return ok

    def note(self, what):
        print("note %s" % what, flush=True)

    def skip(self, what):
        print("skip %s" % what, flush=True)


def H(s):
    return int(s, 16) if isinstance(s, str) else int(s)


def load_fixture(d):
    with open(os.path.join(d, "symbols.json")) as f:
        j = json.load(f)
    j["dir"] = d
    j["name"] = os.path.basename(d)
    j["pdb_path"] = os.path.join(d, j["pdb"]["name"])
    return j


# Types volatility3's windows plugins require that a fixture built from the layout corpus
# lacks (the corpus keeps only what an ETW reader walks; tests/fixtures/README.md).
VOL_REQUIRED = ("_ERESOURCE", "_TOKEN", "_OBJECT_HEADER")


def vol_unusable(fx):
    """Why volatility3 cannot analyse dumps of this fixture kernel, or None."""
    missing = [t for t in (fx.get("types") or {}).get("missing_roots") or [] if t in VOL_REQUIRED]
    if missing:
        return ("its PDB was built from the layout corpus (%s), which lacks %s that volatility3 "
                "requires" % (fx["types"].get("source"), ", ".join(missing)))
    return None


def isf_path(symdir, fx):
    guid = fx["pdb"]["guid"].replace("-", "").upper()
    return os.path.join(symdir, "windows", fx["pdb"]["name"], "%s-%d.json.xz" % (guid, fx["pdb"]["age"]))


# ------------------------------------------------------------------------------- 1. pdbconv
def pdbconv(fx, symdir):
    out = isf_path(symdir, fx)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t = time.time()
    # -p: the PDB name recorded in the ISF metadata (else "unknown.pdb", which never matches).
    # pdbconv prints progress on stdout.
    r = subprocess.run(
        [sys.executable, "-m", "volatility3.framework.symbols.windows.pdbconv",
         "-f", fx["pdb_path"], "-p", fx["pdb"]["name"], "-o", out],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return fx, out, r.returncode, r.stderr.strip().splitlines()[-1:] or [""], time.time() - t


def convert_all(c, fixtures, symdir, jobs):
    isfs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for fx, out, rc, err, secs in pool.map(lambda f: pdbconv(f, symdir), fixtures):
            name = fx["name"]
            if not c.check(rc == 0 and os.path.exists(out), "%s pdbconv %s" % (name, fx["pdb"]["name"]),
                           "%.1f s" % secs if rc == 0 else "exit %d: %s" % (rc, err[0])):
                continue
            with lzma.open(out) as f:
                isf = json.load(f)
            meta = isf["metadata"]["windows"]["pdb"]
            want = (fx["pdb"]["name"], fx["pdb"]["guid"].replace("-", "").upper(), fx["pdb"]["age"])
            got = (meta.get("database"), meta.get("GUID", "").upper(), meta.get("age"))
            if c.check(got == want, "%s ISF metadata = symbols.json PDB" % name, "%s %s-%s" % got):
                isfs[name] = isf
    return isfs


# --------------------------------------------------------------------------- 2. windows.info
def filetime_to_str(ft):
    """str(datetime) of a FILETIME as volatility prints KUSER SystemTime (whole seconds, UTC)."""
    unix = ft // 10_000_000 - 11644473600
    return str(datetime.datetime.fromtimestamp(unix, datetime.timezone.utc))


def vol_info(dump, symdir, cache):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    cmd = [os.path.join(VENV_BIN, "vol"), "--offline", "-q", "-s", symdir, "-f", dump, "-r", "json", "windows.info"]
    t = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return r, time.time() - t


def check_info(c, entry, dump, fx, symdir, cache):
    name = entry["file"]
    r, secs = vol_info(dump, symdir, cache)
    rows = None
    if r.returncode == 0:
        try:
            rows = {row["Variable"]: row["Value"] for row in json.loads(r.stdout)}
        except (ValueError, KeyError, TypeError):
            rows = None
    last_err = (r.stderr.strip().splitlines() or [""])[-1]
    if not c.check(rows is not None, "%s vol windows.info runs" % name,
                   "%.1f s" % secs if rows is not None else "exit %d: %s" % (r.returncode, last_err)):
        return
    sym = entry["symbols"]

    def row(var, want, what=None, transform=str):
        got = rows.get(var)
        ok = got is not None and transform(got) == want
        shown = hex(want) if isinstance(want, int) else repr(want)
        c.check(ok, "%s vol %s" % (name, what or var), "%s" % got if ok else "got %r, want %s" % (got, shown))

    row("Kernel Base", H(entry["kernel_base"]) & ADDR48, "Kernel Base = forge kernel base (48-bit)", H)
    row("DTB", H(entry["dtb"]) & ~0xFFF, "DTB = header DirectoryTableBase", H)
    want_isf = isf_path(symdir, fx)
    got_isf = rows.get("Symbols", "")
    c.check(got_isf.startswith("file://") and os.path.realpath(got_isf[len("file://"):]) == os.path.realpath(want_isf),
            "%s vol matched the fixture's ISF (PDB %s %s age %s)" % (name, fx["pdb"]["name"], fx["pdb"]["guid"], fx["pdb"]["age"]),
            got_isf.rsplit("/", 1)[-1])
    row("Is64Bit", "True")
    row("memory_layer", "1 WindowsCrashDump64Layer")
    row("KdDebuggerDataBlock", H(entry["kdbg_va"]) & ADDR48, transform=H)
    lab = entry["nt_build_lab"]
    row("NTBuildLab", lab[:32], "NTBuildLab = NtBuildLabEx (volatility reads 32 chars)")
    row("KdVersionBlock", H(sym["KdVersionBlock"]) & ADDR48, transform=H)
    row("Major/Minor", "15.%d" % entry["build"])
    row("MachineType", "34404")
    row("KeNumberProcessors", str(entry["cpus"]), "KeNumberProcessors = cpus")
    if "system_time" in entry:
        row("SystemTime", filetime_to_str(entry["system_time"]), "SystemTime (KUSER)")
    row("NtSystemRoot", "C:\\Windows")
    row("NtProductType", "NtProductWinNt")
    row("NtMajorVersion", "10", "NtMajorVersion (KUSER)")
    row("NtMinorVersion", "0", "NtMinorVersion (KUSER)")
    row("PE Machine", "34404")
    row("PE TimeDateStamp", time.asctime(time.gmtime(H(fx["timestamp"]))), "PE TimeDateStamp = fixture timestamp")


# ------------------------------------------------------------------------ 3. layout agreement
ANON = re.compile(r"^(__(unnamed|anonymous)(_[0-9A-Fa-f]+)?|<(unnamed|anonymous)[^>]*>)$")


def same_type(v, e, renamed):
    """Canonical types equal? Names of unnamed aggregates are each tool's own convention (the
    PDB says `<unnamed-tag>` or, in these fixtures, `__unnamed_11dc` as their layout source had
    it; volatility keeps `__unnamed_<hex>`, etwdump may report `<unnamed-0x...>`): two such
    names count as equal, and the pair is recorded in `renamed`."""
    if isinstance(v, tuple) and isinstance(e, tuple):
        return len(v) == len(e) and all(same_type(a, b, renamed) for a, b in zip(v, e))
    if isinstance(v, str) and isinstance(e, str) and v != e and ANON.match(v) and ANON.match(e):
        renamed.add((v, e))
        return True
    return v == e


def canon_vol(t, isf):
    k = t["kind"]
    if k == "base":
        if t["name"] == "void":
            return ("void",)
        bt = isf["base_types"][t["name"]]
        # volatility declares its "wchar" (T_WCHAR) signed; the PDB type is unsigned wchar_t.
        return ("base", bt["size"], None if t["name"] == "wchar" else bool(bt["signed"]))
    if k == "pointer":
        return ("pointer", isf["base_types"]["pointer"]["size"], canon_vol(t["subtype"], isf))
    if k == "array":
        return ("array", t["count"], canon_vol(t["subtype"], isf))
    if k in ("struct", "union"):
        return (k, t["name"])
    if k == "enum":
        return ("enum", t["name"], isf["enums"].get(t["name"], {}).get("size"))
    if k == "bitfield":
        return ("bitfield", t["bit_position"], t["bit_length"], canon_vol(t["type"], isf))
    if k == "function":
        return ("function",)
    return ("?vol", json.dumps(t, sort_keys=True))


def canon_etw(t, ptr_size):
    k = t.get("kind")
    if k == "base":
        return ("base", t.get("size"), None if t.get("name") in ("wchar", "wchar_t", "__wchar_t", "WCHAR") else t.get("signed"))
    if k == "void":
        return ("void",)
    if k == "pointer":
        return ("pointer", ptr_size, canon_etw(t.get("target", {}), ptr_size))
    if k == "array":
        return ("array", t.get("count"), canon_etw(t.get("element", {}), ptr_size))
    if k in ("struct", "union"):
        return (k, t.get("name"))
    if k == "enum":
        return ("enum", t.get("name"), t.get("size"))
    if k == "bitfield":
        return ("bitfield", t.get("position"), t.get("length"), canon_etw(t.get("base", {}), ptr_size))
    if k == "function":
        return ("function",)
    return ("?etwdump", json.dumps(t, sort_keys=True))


def etwdump_has_symbols(etwdump):
    if not (os.path.isfile(etwdump) and os.access(etwdump, os.X_OK)):
        return False, "%s not found" % etwdump
    r = subprocess.run([etwdump, "symbols", "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "--pdb" not in r.stdout or "--types" not in r.stdout:
        return False, "%s has no `symbols --pdb --types` command" % etwdump
    return True, ""


def check_layout(c, fx, isf, etwdump):
    name = fx["name"]
    cmd = [etwdump, "symbols", "--pdb", fx["pdb_path"], "--types", ",".join(LAYOUT_TYPES), "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    out = None
    if r.returncode == 0:
        try:
            out = json.loads(r.stdout)
        except ValueError:
            out = None
    err = (r.stderr.strip().splitlines() or [""])[-1]
    if not c.check(out is not None, "%s etwdump symbols --pdb runs" % name,
                   "" if out is not None else "exit %d: %s" % (r.returncode, err or "no JSON on stdout")):
        return
    meta = isf["metadata"]["windows"]["pdb"]
    pdb = out.get("pdb", {})
    got = (pdb.get("name"), str(pdb.get("guid", "")).upper(), pdb.get("age"))
    want = (fx["pdb"]["name"], fx["pdb"]["guid"].upper(), fx["pdb"]["age"])
    c.check(got == want and meta.get("GUID", "").upper() == want[1].replace("-", ""),
            "%s etwdump PDB name/GUID/age = ISF = symbols.json" % name, "%s %s %s" % got)
    c.check(out.get("symbol_source", {}).get("kind") == "pdb", "%s etwdump symbol_source.kind = pdb" % name,
            str(out.get("symbol_source")))
    ptr = out.get("pointer_size")
    vptr = isf["base_types"]["pointer"]["size"]
    c.check(ptr == vptr, "%s pointer size" % name, "etwdump %s, volatility %s" % (ptr, vptr))

    etypes = out.get("types", {})
    for tname in LAYOUT_TYPES:
        vt = isf["user_types"].get(tname)
        et = etypes.get(tname)
        what = "%s layout %s" % (name, tname)
        if vt is None and et is None:
            c.note("%s: in neither (not in this build's PDB)" % what)
            continue
        if vt is None or et is None:
            c.check(False, what, "only in %s" % ("etwdump" if vt is None else "volatility's ISF"))
            continue
        problems = []
        if vt["size"] != et.get("size"):
            problems.append("size %s vs %s" % (vt["size"], et.get("size")))
        if (vt["kind"] == "union") != bool(et.get("is_union")):
            problems.append("kind %s vs is_union %s" % (vt["kind"], et.get("is_union")))
        vf = vt["fields"]
        ef = et.get("fields", {})
        renamed = set()
        for fname in sorted(set(vf) | set(ef)):
            if fname not in ef:
                problems.append("%s: missing in etwdump" % fname)
                continue
            if fname not in vf:
                problems.append("%s: missing in volatility's ISF" % fname)
                continue
            vo, eo = vf[fname]["offset"], ef[fname].get("offset")
            vty, ety = canon_vol(vf[fname]["type"], isf), canon_etw(ef[fname].get("type", {}), ptr)
            if vo != eo:
                problems.append("%s: offset %#x vs %s" % (fname, vo, eo))
            if not same_type(vty, ety, renamed):
                problems.append("%s: type %s vs %s" % (fname, vty, ety))
        if renamed:
            c.note("%s: unnamed types named differently (volatility vs etwdump), compared as anonymous: %s"
                   % (what, ", ".join("%s vs %s" % p for p in sorted(renamed))))
        detail = "size %#x, %d fields agree" % (vt["size"], len(vf)) if not problems else \
            "%d disagreements (volatility vs etwdump): %s" % (len(problems), "; ".join(problems[:12]) +
                                                              (" ..." if len(problems) > 12 else ""))
        c.check(not problems, what, detail)

    # Globals: symbols.json RVAs = volatility's ISF symbols = etwdump's.
    code = [s for s in fx["sections"] if H(s["characteristics"]) & IMAGE_SCN_CNT_CODE]
    esyms = out.get("symbols", {})
    compared = []
    for sname, srva in sorted(fx["symbols"].items()):
        rva = H(srva)
        vs = isf["symbols"].get(sname)
        vrva = vs.get("address") if vs else None
        is_code = any(H(s["rva"]) <= rva < H(s["rva"]) + H(s["virtual_size"]) for s in code)
        if sname not in esyms:
            if is_code:
                c.check(vrva == rva, "%s symbol %s (function; not listed by etwdump)" % (name, sname),
                        "symbols.json %#x, ISF %s" % (rva, hex(vrva) if vrva is not None else None))
                continue
            c.check(False, "%s symbol %s" % (name, sname), "not listed by etwdump (ISF %s, symbols.json %#x)"
                    % (hex(vrva) if vrva is not None else None, rva))
            continue
        try:
            erva = H(esyms[sname])
        except (TypeError, ValueError):
            erva = None
        compared.append(sname)
        c.check(vrva == rva and erva == rva, "%s symbol %s" % (name, sname),
                "%#x" % rva if vrva == rva == erva else
                "symbols.json %#x, ISF %s, etwdump %s" % (rva, hex(vrva) if vrva is not None else None, esyms[sname]))


# ---------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures"))
    ap.add_argument("--work", required=True, help="scratch directory (ISF files, volatility cache)")
    ap.add_argument("--require-etwdump", action="store_true")
    ap.add_argument("--skip-etwdump", action="store_true")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    a = ap.parse_args()

    t0 = time.time()
    c = Checker()
    symdir = os.path.join(a.work, "symbols")
    cache = os.path.join(a.work, "cache")
    os.makedirs(cache, exist_ok=True)
    fixture_dirs = sorted(os.path.join(a.fixtures, d) for d in os.listdir(a.fixtures)
                          if os.path.isfile(os.path.join(a.fixtures, d, "symbols.json")))
    fixtures = [load_fixture(d) for d in fixture_dirs]
    by_name = {f["name"]: f for f in fixtures}
    c.check(len(fixtures) > 0, "fixtures found in %s" % a.fixtures, ", ".join(by_name))

    print("-- 1. pdbconv (volatility3 ISF of every fixture PDB)", flush=True)
    isfs = convert_all(c, fixtures, symdir, a.jobs)

    print("-- 2. vol windows.info on the forge's fixture dumps", flush=True)
    base = os.path.dirname(os.path.abspath(a.manifest))
    with open(a.manifest) as f:
        # The fixture dumps with ETW logger state ("etw") are sessions_check.py's.
        entries = [e for e in json.load(f) if e.get("fixture") and not e.get("etw")]
    c.check(sorted(e["fixture"] for e in entries) == sorted(by_name),
            "manifest has one dump per fixture", ", ".join(e["file"] for e in entries))
    for e in entries:
        fx = by_name.get(e["fixture"])
        if fx is None or fx["name"] not in isfs:
            c.check(False, "%s: fixture %s converted" % (e["file"], e["fixture"]))
            continue
        if e["arch"] != "x64":
            c.skip("%s: volatility3 cannot analyse the x86 fixture dump (no x86 layer: its PAE DTB test "
                   "wants the PDPT page followed by the 4 PDs, the forge's PDPT is at 0x1851A0 with scattered "
                   "PDs; and the x86 PDB lacks _EPROCESS, _ETHREAD, _TOKEN, ... that volatility requires)" % e["file"])
            continue
        why = vol_unusable(fx)
        if why:
            c.skip("%s: volatility3 windows.info not run: %s" % (e["file"], why))
            continue
        check_info(c, e, os.path.join(base, e["file"]), fx, symdir, cache)

    print("-- 3. layouts: volatility's ISF vs etwdump symbols --pdb", flush=True)
    etwdump = os.environ.get("ETWDUMP", os.path.join(ROOT, "target", "debug", "etwdump"))
    ok, why = (False, "--skip-etwdump") if a.skip_etwdump else etwdump_has_symbols(etwdump)
    if not ok:
        print("SKIPPED: etwdump symbols not available (%s)" % why, flush=True)
        if a.require_etwdump and not a.skip_etwdump:
            c.check(False, "etwdump symbols available (--require-etwdump)", why)
    else:
        for fx in fixtures:
            if fx["name"] in isfs:
                check_layout(c, fx, isfs[fx["name"]], etwdump)

    print("vol_check: %d checks, %d failures (%.1f s)" % (c.count, c.failures, time.time() - t0), flush=True)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
