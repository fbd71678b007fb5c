#!/usr/bin/env python3
"""ETW buffers: forge expectations vs `etwdump buffers` / `etwdump extract`, and etl-parser 1.0.1
(airbus-cert) vs the .etl files etwdump writes and `etwdump etl` on real ETL files.

usage: etl_check.py MANIFEST.json [--fixtures DIR] [--etl-dir DIR] [--require-etwdump-buffers]
                    [--skip-etwdump] [--keep DIR]

Run with the venv's python (etl-parser==1.0.1; run.sh installs it). For every dump of the
manifest whose sessions carry forge "buffer_details" (fixture-<name>-etw-buffers.dmp, and
fixture-x64-19041-etw-large.dmp with `forge --with-large`):

1. `$ETWDUMP buffers DUMP --pdb PDB --format json`: the set of (session, address) equals the
   forge's, and per buffer lists (as a set), state, buffer_type, buffer_flag, processor,
   sequence_number, buffer_size, valid_bytes, trimmed_bytes, record_count, records_by_hook
   (= forge records_by_key) and compressed.
2. `$ETWDUMP extract DUMP -o OUT --pdb PDB`: per session of OUT/manifest.json the set of data
   buffers written = the forge's extractable buffers (not compressed, >= 1 complete record),
   ordered by SequenceNumber; per buffer records, valid_bytes (= the forge's valid, or valid -
   trimmed when etwdump trims in the file); compressed buffers in "skipped"; buffers, records,
   records_by_hook, bytes and sha256 of the file.
3. etl-parser on every written .etl: the header (build_from_stream: a SystemTrace header record),
   then each chunk (buffer) parsed on its own: the number of records per buffer (in file order,
   header buffer first) = manifest buffer_list[i].records, the per-session total, and the
   per-buffer hook keys. A buffer holding EVENT_INSTANCE records (forge key "instance") cannot
   be parsed by etl-parser (no such record type): a note, not a failure.
4. Real ETL files in --etl-dir (default /work/shared/data/etl; skipped if absent): per buffer
   record counts (and keys) from etl-parser = `$ETWDUMP etl FILE --format json`. If etl-parser
   fails on a file, the exception is a note and what it parsed is compared.

Without the `buffers`/`extract`/`etl` commands this prints "SKIPPED: etwdump <cmd> not available"
and exits 0, unless --require-etwdump-buffers is given. Prints "ok  ", "FAIL", "note", "skip"
lines; exits 1 on any failure.
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUFFER_FIELDS = ["state", "buffer_type", "buffer_flag", "processor", "sequence_number",
                 "buffer_size", "valid_bytes", "trimmed_bytes", "record_count", "compressed"]


class Checker:
    def __init__(self):
        self.failures = 0
        self.oks = 0

    def ok(self, msg):
        self.oks += 1
        print("ok   " + msg)

    def fail(self, msg):
        self.failures += 1
        print("FAIL " + msg)

    def note(self, msg):
        print("note " + msg)

    def check(self, cond, msg):
        (self.ok if cond else self.fail)(msg)
        return cond


# ------------------------------------------------------------------------------ etl-parser

def load_etl_parser():
    from etl.etl import EtlLogFile, ChunkParser, build_from_stream  # noqa: F401
    return EtlLogFile, ChunkParser, build_from_stream


def _int(v):
    return int(getattr(v, "intvalue", v))


def record_key(ev):
    """The record key of an etl-parser record (etwdump's records_by_hook keys)."""
    t, v = ev.type, ev.value
    if t == "PerfInfoTraceRecord":
        h = v.header
    elif t == "SystemTraceRecord":
        h = v.system_header.header
    elif t == "EventRecord":
        return "event_header"
    elif t == "TraceRecord":
        return "full_header"
    elif t == "WinTraceRecord":
        return "message"
    else:
        return t
    return "0x%04x" % ((_int(h.group) << 8) | _int(h.type))


# etl-parser parses ~1 MB/s: beyond this many bytes only the first buffers of a file are parsed.
ETL_PARSER_MAX_BYTES = 32 << 20


def parse_etl(path, limit=None):
    """etl-parser's view of a file: (header_error, [chunk dicts], file_error).
    Each chunk: {"offset", "buffer_size", "saved_offset", "records" (None on error), "keys",
    "error"}. With `limit`, only the first whole buffers within `limit` bytes are parsed."""
    EtlLogFile, ChunkParser, build_from_stream = load_etl_parser()
    data = open(path, "rb").read()
    if limit is not None and len(data) > limit and len(data) >= 4:
        bs = int.from_bytes(data[:4], "little") or 1
        data = data[:max(bs, limit - limit % bs)]
    header_error = None
    try:
        build_from_stream(data)
    except Exception as e:  # noqa: BLE001  (any etl-parser exception is a result)
        header_error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    chunks = []
    file_error = None
    try:
        parsed = EtlLogFile.parse(data)
    except Exception as e:  # noqa: BLE001
        parsed = []
        file_error = "%s: %s" % (type(e).__name__, e)
    off = 0
    for ch in parsed:
        w = ch.header.wnode
        c = {"offset": off, "buffer_size": w.buffer_size, "saved_offset": w.saved_offset,
             "records": None, "keys": {}, "error": None}
        try:
            evs = ChunkParser.parse(ch.payload) if len(ch.payload) else []
            c["records"] = len(evs)
            for ev in evs:
                k = record_key(ev)
                c["keys"][k] = c["keys"].get(k, 0) + 1
        except Exception as e:  # noqa: BLE001
            c["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        chunks.append(c)
        off += w.buffer_size
    if off != len(data) and file_error is None:
        file_error = "etl-parser stopped at offset %#x of %#x" % (off, len(data))
    return header_error, chunks, file_error


# ------------------------------------------------------------------------------ etwdump

def etwdump_has(etwdump, cmd, needles):
    if not (os.path.isfile(etwdump) and os.access(etwdump, os.X_OK)):
        return False
    r = subprocess.run([etwdump, cmd, "--help"], capture_output=True, text=True)
    return r.returncode == 0 and all(n in r.stdout for n in needles)


def run_json(argv):
    t = time.time()
    r = subprocess.run(argv, capture_output=True, text=True)
    out = None
    if r.returncode == 0:
        try:
            out = json.loads(r.stdout)
        except ValueError:
            pass
    err = (r.stderr.strip().splitlines() or [""])[-1]
    return out, "exit %d: %s" % (r.returncode, err or "no JSON on stdout"), time.time() - t


def expected_buffers(entry):
    """{logger_id: (session, [buffer dicts])} of sessions with forge buffer_details."""
    out = {}
    for s in entry.get("etw", {}).get("slots", []):
        if s.get("kind") == "session" and s.get("buffer_details"):
            out[s["logger_id"]] = (s, s["buffer_details"])
    return out


def pdb_of(entry, fixtures):
    return os.path.join(fixtures, entry["fixture"], entry["pdb"]["name"])


def addr(v):
    return None if v is None else int(v, 16) if isinstance(v, str) else int(v)


def check_buffers_cmd(c, etwdump, name, dump, pdb, exp):
    out, err, dt = run_json([etwdump, "buffers", dump, "--pdb", pdb, "--format", "json"])
    # The output contract (docs/output-contract.md): {"format_version": 3, "command", "records", "warnings"}.
    if isinstance(out, dict) and out.get("format_version") == 3 and out.get("command") == "buffers":
        out = out["records"]
    if not c.check(isinstance(out, list), "%s: etwdump buffers (%.1f s) %s" % (
            name, dt, "" if isinstance(out, list) else err)):
        return
    want = {(sid, addr(b["address"])): b for sid, (_, bl) in exp.items() for b in bl}
    got = {}
    for b in out:
        got[(b.get("session_id"), addr(b.get("address")))] = b
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    c.check(not extra and not missing, "%s: buffers: %d expected, %d listed%s%s" % (
        name, len(want), len(got),
        ("; missing " + ", ".join("%d:%#x" % k for k in missing[:8])) if missing else "",
        ("; unexpected " + ", ".join("%d:%#x" % k for k in extra[:8])) if extra else ""))
    bad = 0
    for k in sorted(set(want) & set(got)):
        w, g = want[k], got[k]
        probs = []
        for f in BUFFER_FIELDS:
            if g.get(f) != w[f]:
                probs.append("%s %r != %r" % (f, g.get(f), w[f]))
        if sorted(set(g.get("lists") or [])) != sorted(set(w["lists"])):
            probs.append("lists %s != %s" % (sorted(set(g.get("lists") or [])), w["lists"]))
        if (g.get("records_by_hook") or {}) != w["records_by_key"]:
            probs.append("records_by_hook %s != %s" % (g.get("records_by_hook"),
                                                        w["records_by_key"]))
        if probs:
            bad += 1
            if bad <= 25:
                c.fail("%s: buffer %d:%#x: %s" % (name, k[0], k[1], "; ".join(probs)))
        if g.get("warnings"):
            c.note("%s: buffer %d:%#x warnings: %s" % (name, k[0], k[1], g["warnings"][:3]))
    if bad > 25:
        c.fail("%s: ... %d buffers disagree in all" % (name, bad))
    c.check(bad == 0, "%s: per-buffer fields of %d buffers" % (name, len(set(want) & set(got))))


def is_kernel_session(sess):
    """etw-internals.md §4.1: pending CCSWAP batches go to the kernel loggers (NT Kernel
    Logger, or SYSTEM_LOGGER_MODE 0x02000000 sessions) of the batch's clock type."""
    return (sess.get("logger_id") == 0 or sess.get("name") == "NT Kernel Logger"
            or (sess.get("logger_mode") or 0) & 0x02000000 != 0)


def expected_pending(sess, pending):
    """Forge pending blocks a session's ETL must carry (one synthetic CTX_SWAP buffer each):
    open batches (>= 1 switch) of the session's clock, whether found at a documented offset or
    by the search (etwdump infers the clock; in these dumps the evidence decides it: the kernel
    sessions use clocks 1 and 3 and the CPU speed is known, so only the true clock fits)."""
    if not is_kernel_session(sess):
        return []
    return [p for p in pending if p.get("switches")
            and p.get("true_clock", p.get("clock")) == sess.get("clock_type")]


def expected_rundown(entry):
    """What a kernel session's rundown holds for the forge's dump (etl/rundown.rs): a Process
    DCStart per process, a Thread DCStart per thread, an Image DCStart per kernel module."""
    procs = entry.get("processes") or []
    keys = {"0x0303": len(procs), "0x0503": sum(len(p["threads"]) for p in procs),
            "0x1403": len(entry.get("modules") or [])}
    return {k: n for k, n in keys.items() if n}


def check_extract(c, etwdump, name, dump, pdb, exp, workdir, pending=(), rundown_keys=None):
    outdir = os.path.join(workdir, name + ".etl.d")
    shutil.rmtree(outdir, ignore_errors=True)
    t = time.time()
    r = subprocess.run([etwdump, "extract", dump, "-o", outdir, "--pdb", pdb],
                       capture_output=True, text=True)
    dt = time.time() - t
    mpath = os.path.join(outdir, "manifest.json")
    if not c.check(r.returncode == 0 and os.path.isfile(mpath), "%s: etwdump extract (%.1f s)%s" % (
            name, dt, "" if r.returncode == 0 else " exit %d: %s" % (
                r.returncode, (r.stderr.strip().splitlines() or [""])[-1]))):
        return
    size = sum(os.path.getsize(os.path.join(outdir, f)) for f in os.listdir(outdir))
    c.note("%s: extract wrote %d bytes in %.2f s (%.0f MB/s)" % (
        name, size, dt, size / max(dt, 1e-6) / 1e6))
    man = json.load(open(mpath))
    sessions = {s.get("logger_id"): s for s in man.get("sessions", [])}
    for sid, (sess, bl) in sorted(exp.items()):
        tag = "%s: session %d (%s)" % (name, sid, sess.get("name"))
        extractable = [b for b in bl if b["extractable"]]
        ms = sessions.get(sid)
        if not extractable:
            c.check(ms is None or ms.get("buffers", 0) == 0,
                    "%s: nothing to extract, none written" % tag)
            continue
        if not c.check(ms is not None, "%s: in extract manifest" % tag):
            continue
        blist = ms.get("buffer_list") or []
        data = [b for b in blist
                if b.get("address") is not None and b.get("source", "memory") == "memory"]
        # Pending CCSWAP batches: one synthetic CTX_SWAP buffer each, after the data buffers,
        # holding one 0x0525 event (checked by etl-parser below like every buffer).
        pend_want = expected_pending(sess, pending)
        pend_got = [b for b in blist if b.get("source") == "pending_ccswap"]
        c.check(sorted((addr(p["block_va"]), p["cpu"]) for p in pend_want)
                == sorted((addr(b["address"]), b.get("cpu")) for b in pend_got)
                and all(b.get("records") == 1 for b in pend_got)
                and blist[len(blist) - len(pend_got):] == pend_got,
                "%s: %d pending CCSWAP batches written as 0x0525 events in CTX_SWAP buffers" % (
                    tag, len(pend_want)))
        want = {addr(b["address"]): b for b in extractable}
        got = {addr(b["address"]): b for b in data}
        c.check(set(want) == set(got), "%s: buffers written %s == forge %s" % (
            tag, sorted(map(hex, got)), sorted(map(hex, want))))
        c.check(blist and blist[0].get("address") is None, "%s: header buffer first" % tag)
        # A kernel session's rundown right after the header buffer (the data buffers' time
        # order is etl_viewers_check.py's).
        rundown = [b for b in blist if b.get("source") == "rundown"]
        want_rundown = (rundown_keys or {}) if is_kernel_session(sess) else {}
        c.check(blist[1:1 + len(rundown)] == rundown and bool(rundown) == bool(want_rundown)
                and sum(b.get("records", 0) for b in rundown) == sum(want_rundown.values()),
                "%s: rundown after the header: %d buffers, %s" % (tag, len(rundown), want_rundown))
        probs = []
        for a in sorted(set(want) & set(got)):
            w, g = want[a], got[a]
            if g.get("records") != w["record_count"]:
                probs.append("%#x records %r != %r" % (a, g.get("records"), w["record_count"]))
            v = g.get("valid_bytes")
            if v not in (w["valid_bytes"], w["valid_bytes"] - w["trimmed_bytes"]):
                probs.append("%#x valid_bytes %r not in (%d, %d - trimmed %d)" % (
                    a, v, w["valid_bytes"], w["valid_bytes"], w["trimmed_bytes"]))
            if g.get("sequence_number") != w["sequence_number"]:
                probs.append("%#x sequence_number %r != %r" % (a, g.get("sequence_number"),
                                                               w["sequence_number"]))
        c.check(not probs, "%s: per-buffer records/valid_bytes/sequence%s" % (
            tag, (": " + "; ".join(probs[:8])) if probs else ""))
        tot_keys = {}
        for b in extractable:
            for k, n in b["records_by_key"].items():
                tot_keys[k] = tot_keys.get(k, 0) + n
        if pend_want:
            tot_keys["0x0525"] = tot_keys.get("0x0525", 0) + len(pend_want)
        for k, n in want_rundown.items():
            tot_keys[k] = tot_keys.get(k, 0) + n
        want_records = (sum(b["record_count"] for b in extractable) + len(pend_want)
                        + sum(want_rundown.values()))
        c.check(ms.get("records") == want_records,
                "%s: records %r == %d" % (tag, ms.get("records"), want_records))
        c.check((ms.get("records_by_hook") or {}) == tot_keys,
                "%s: records_by_hook %s == %s" % (tag, ms.get("records_by_hook"), tot_keys))
        c.check(ms.get("buffers") == len(extractable) + len(pend_want) + len(rundown),
                "%s: buffers %r == %d" % (tag, ms.get("buffers"),
                                         len(extractable) + len(pend_want) + len(rundown)))
        skipped = {addr(s.get("address")) for s in ms.get("skipped") or []}
        comp = {addr(b["address"]) for b in bl if b["compressed"]}
        c.check(comp <= skipped, "%s: compressed buffers %s in skipped %s" % (
            tag, sorted(map(hex, comp)), sorted(map(hex, skipped))))
        path = os.path.join(outdir, ms.get("file") or "")
        if not c.check(os.path.isfile(path), "%s: file %s" % (tag, ms.get("file"))):
            continue
        raw = open(path, "rb").read()
        c.check(ms.get("bytes") == len(raw), "%s: bytes %r == file size %d" % (
            tag, ms.get("bytes"), len(raw)))
        c.check(ms.get("sha256") == hashlib.sha256(raw).hexdigest(), "%s: sha256" % tag)
        offs = [b.get("file_offset") for b in blist]
        bs = sess["buffer_size"]
        c.check(offs == [i * bs for i in range(len(blist))] and len(raw) == bs * len(blist),
                "%s: file = %d buffers of %#x bytes" % (tag, len(blist), bs))
        check_etl_against(c, tag, path, blist, want)


def check_etl_against(c, tag, path, blist, want):
    """etl-parser on an etwdump-written file vs its manifest buffer_list."""
    t = time.time()
    header_error, chunks, file_error = parse_etl(path, ETL_PARSER_MAX_BYTES)
    dt = time.time() - t
    c.check(header_error is None, "%s: etl-parser header (%.1f s)%s" % (
        tag, dt, "" if header_error is None else ": " + header_error))
    if os.path.getsize(path) > ETL_PARSER_MAX_BYTES:
        c.note("%s: file of %d bytes: etl-parser parses its first %d buffers only" % (
            tag, os.path.getsize(path), len(chunks)))
        blist = blist[:len(chunks)]
    c.check(file_error is None and len(chunks) == len(blist), "%s: etl-parser chunks %d == %d%s" % (
        tag, len(chunks), len(blist), "" if file_error is None else " (" + file_error + ")"))
    total_p = total_m = 0
    probs = []
    for i, (ch, b) in enumerate(zip(chunks, blist)):
        a = addr(b.get("address"))
        w = want.get(a)
        if ch["error"] is not None:
            if w is not None and w["records_by_key"].get("instance"):
                c.note("%s: buffer %d (%#x): etl-parser cannot parse EVENT_INSTANCE records (%s)" % (
                    tag, i, a, ch["error"][:80]))
            else:
                probs.append("buffer %d (%s): etl-parser: %s" % (
                    i, "header" if a is None else hex(a), ch["error"][:120]))
            continue
        total_p += ch["records"]
        total_m += b.get("records", 0)
        if ch["records"] != b.get("records"):
            probs.append("buffer %d: etl-parser %d records, manifest %r" % (
                i, ch["records"], b.get("records")))
        if w is not None and ch["keys"] != w["records_by_key"]:
            probs.append("buffer %d: etl-parser keys %s != forge %s" % (i, ch["keys"],
                                                                        w["records_by_key"]))
        if ch["saved_offset"] != b.get("valid_bytes"):
            probs.append("buffer %d: SavedOffset %#x != manifest valid_bytes %r" % (
                i, ch["saved_offset"], b.get("valid_bytes")))
    c.check(not probs, "%s: etl-parser per buffer (%d buffers)%s" % (
        tag, len(chunks), (": " + "; ".join(probs[:6])) if probs else ""))
    c.check(total_p == total_m, "%s: etl-parser total %d == manifest %d (parsed buffers)" % (
        tag, total_p, total_m))


def check_real_etl(c, etwdump, path):
    name = os.path.basename(path)
    out, err, dt = run_json([etwdump, "etl", path, "--format", "json"])
    if not c.check(isinstance(out, dict) and isinstance(out.get("buffers"), list),
                   "%s: etwdump etl (%.1f s) %s" % (name, dt, "" if out else err)):
        return
    t = time.time()
    header_error, chunks, file_error = parse_etl(path)
    c.note("%s: etl-parser %.1f s, %d chunks" % (name, time.time() - t, len(chunks)))
    if header_error:
        c.note("%s: etl-parser header: %s" % (name, header_error))
    if file_error:
        c.note("%s: etl-parser: %s (comparing what it parsed)" % (name, file_error))
    eb = out["buffers"]
    if not file_error:
        c.check(len(eb) == len(chunks), "%s: buffers etwdump %d == etl-parser %d" % (
            name, len(eb), len(chunks)))
    probs = []
    tot_p = tot_e = 0
    by_off = {b.get("offset"): b for b in eb}
    for i, ch in enumerate(chunks):
        b = by_off.get(ch["offset"])
        if b is None:
            probs.append("buffer at %#x missing in etwdump" % ch["offset"])
            continue
        if ch["error"] is not None:
            c.note("%s: buffer %d: etl-parser: %s" % (name, i, ch["error"][:100]))
            continue
        tot_p += ch["records"]
        tot_e += b.get("records", 0)
        if ch["records"] != b.get("records"):
            probs.append("buffer %d: etl-parser %d != etwdump %r" % (i, ch["records"], b.get("records")))
        if ch["keys"] != (b.get("records_by_hook") or {}):
            probs.append("buffer %d: keys %s != %s" % (i, ch["keys"], b.get("records_by_hook")))
        for f, v in (("buffer_size", ch["buffer_size"]), ("saved_offset", ch["saved_offset"])):
            if b.get(f) != v:
                probs.append("buffer %d: %s %r != %r" % (i, f, b.get(f), v))
    c.check(not probs, "%s: per buffer records/keys (%d buffers)%s" % (
        name, len(chunks), (": " + "; ".join(probs[:6])) if probs else ""))
    c.check(tot_p == tot_e, "%s: total records etl-parser %d == etwdump %d" % (name, tot_p, tot_e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures"))
    ap.add_argument("--etl-dir", default="/work/shared/data/etl")
    ap.add_argument("--require-etwdump-buffers", action="store_true")
    ap.add_argument("--skip-etwdump", action="store_true")
    ap.add_argument("--keep", help="write extract output here (default: a temporary directory)")
    a = ap.parse_args()
    c = Checker()
    try:
        load_etl_parser()
    except ImportError as e:
        print("FAIL etl-parser not importable: %s" % e)
        return 1
    if a.skip_etwdump:
        print("skip etwdump (--skip-etwdump)")
        return 0
    etwdump = os.environ.get("ETWDUMP", os.path.join(ROOT, "target", "debug", "etwdump"))
    have = {
        "buffers": etwdump_has(etwdump, "buffers", ["--format"]),
        "extract": etwdump_has(etwdump, "extract", ["-o"]),
        "etl": etwdump_has(etwdump, "etl", ["--format"]),
    }
    missing = [k for k, v in have.items() if not v]
    for k in missing:
        print("SKIPPED: etwdump %s not available" % k)
    if missing and a.require_etwdump_buffers:
        print("FAIL --require-etwdump-buffers: missing %s" % ", ".join(missing))
        return 1
    manifest = json.load(open(a.manifest))
    mdir = os.path.dirname(os.path.abspath(a.manifest))
    work = a.keep or tempfile.mkdtemp(prefix="etl-check.")
    os.makedirs(work, exist_ok=True)
    try:
        n = 0
        for entry in manifest:
            exp = expected_buffers(entry)
            if not exp:
                continue
            n += 1
            name = entry["file"].rsplit(".", 1)[0]
            dump = os.path.join(mdir, entry["file"])
            pdb = pdb_of(entry, a.fixtures)
            nb = sum(len(bl) for _, bl in exp.values())
            print("== %s: %d sessions with %d buffers" % (name, len(exp), nb))
            if have["buffers"]:
                check_buffers_cmd(c, etwdump, name, dump, pdb, exp)
            if have["extract"]:
                pending = entry.get("etw", {}).get("pending") or []
                check_extract(c, etwdump, name, dump, pdb, exp, work, pending,
                              expected_rundown(entry))
        if n == 0:
            c.fail("no dump with buffer expectations in %s" % a.manifest)
        if have["etl"]:
            files = sorted(f for f in os.listdir(a.etl_dir) if f.endswith(".etl")) \
                if os.path.isdir(a.etl_dir) else []
            if not files:
                print("skip real ETL files: none in %s" % a.etl_dir)
            for f in files:
                print("== %s" % f)
                check_real_etl(c, etwdump, os.path.join(a.etl_dir, f))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("== etl_check: %d ok, %d failures" % (c.oks, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
