#!/usr/bin/env python3
"""triage_check.py: etl-parser (PyPI, pinned by run.sh) on the ETL files `etwdump extract`
writes from triage dumps, against etwdump's manifest and the forge's expectations.

Usage: triage_check.py FORGE_TRIAGE_DIR [--real DUMP --real-isf ISF]

FORGE_TRIAGE_DIR is `forge --triage DIR` output (one directory per scenario with the .dmp, its
ISF and expected.json). For each scenario: `etwdump extract` with the scenario's ISF; every
.etl parsed by etl-parser; per buffer, etl-parser's record count and per-hook keys must equal
the manifest's; per logger, the records written must equal the forge's count of records of
that logger that are not duplicates of secondary-data records. The real triage dump (when
given) must give 107 EventLog-System and 92 logger-2 records (triage-etw.md §4.2).

Times: every file's TRACE_LOGFILE_HEADER must carry the clock anchors etwdump converts with
(StartTime and the header event's TimeStamp on the line time = StartTime + (ts − TimeStamp) ×
scale, the scale from ClockType and PerfFreq / CpuSpeedInMHz), so that readers date every
record as `etwdump events` does: dissect.etl's own conversion (float arithmetic: within the
resolution of a double at the value converted) and the exact conversion of etl-parser's raw
timestamps with the header's anchors (within one 100 ns tick) must both give `events`' time of
every record `events` dates. etl-parser reads TRACE_MESSAGE records with a fixed layout (its
"thread_id" is the timestamp of a GUID|TIMESTAMP|SYSTEMINFO message), so its message records are
left out of the etl-parser comparison."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import etl_check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def extract(c, etwdump, tag, dump, isf, out, extra=()):
    r = subprocess.run([etwdump, "extract", dump, "-o", out, "--isf", isf, *extra],
                       capture_output=True, text=True)
    mpath = os.path.join(out, "manifest.json")
    if not c.check(r.returncode == 0 and os.path.isfile(mpath), "%s: etwdump extract%s" % (
            tag, "" if r.returncode == 0 else ": " + r.stderr.strip()[-200:])):
        return None
    return json.load(open(mpath))


def check_files(c, tag, out, man):
    per_logger = {}
    for s in man.get("sessions", []):
        path = os.path.join(out, s["file"])
        he, chunks, fe = etl_check.parse_etl(path)
        blist = s.get("buffer_list") or []
        c.check(he is None and fe is None and len(chunks) == len(blist),
                "%s: logger %s: etl-parser reads %d buffers (%s %s)" % (
                    tag, s["logger_id"], len(chunks), he, fe))
        probs = []
        # etl-parser 1.0.1 reads TRACE_MESSAGE records with one fixed layout (GUID, then
        # thread, process, timestamp): a buffer holding messages with other option flags is
        # one it cannot parse. Such buffers are noted, not failed; every other buffer must
        # give the manifest's count.
        has_messages = "message" in (s.get("records_by_hook") or {})
        skipped = []
        for i, (ch, b) in enumerate(zip(chunks, blist)):
            if ch["error"] and has_messages:
                skipped.append(i)
            elif ch["error"] or ch["records"] != b.get("records"):
                probs.append("buffer %d: etl-parser %r records (%s), manifest %r" % (
                    i, ch["records"], ch["error"], b.get("records")))
        keys = {}
        for ch in chunks[1:]:
            for k, n in ch["keys"].items():
                keys[k] = keys.get(k, 0) + n
        want = {("event_header" if k.startswith("event_header") else k): n
                for k, n in (s.get("records_by_hook") or {}).items()}
        if skipped:
            c.note("%s: logger %s: etl-parser cannot parse buffers %s (TRACE_MESSAGE records with option flags outside its fixed layout); the other %d buffers agree" % (
                tag, s["logger_id"], skipped, len(chunks) - len(skipped)))
            c.check(not probs, "%s: logger %s: etl-parser per buffer == manifest%s" % (
                tag, s["logger_id"], (": " + "; ".join(probs[:4])) if probs else ""))
        else:
            c.check(not probs and keys == want, "%s: logger %s: etl-parser per buffer and keys %s == manifest %s%s" % (
                tag, s["logger_id"], keys, want, (": " + "; ".join(probs[:4])) if probs else ""))
        per_logger[s["logger_id"]] = s.get("records", 0)
    return per_logger


EPOCH_OFFSET_S = 11644473600  # 1601-01-01 to 1970-01-01


def filetime_of(iso):
    """FILETIME of an ISO-8601 UTC time with up to 7 fractional digits."""
    import calendar
    import time as _t
    base = calendar.timegm(_t.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = iso[20:-1] if len(iso) > 20 else ""
    return (base + EPOCH_OFFSET_S) * 10**7 + int(frac.ljust(7, "0") or 0)


def etl_parser_raw_times(path):
    """Raw timestamps of every non-header record etl-parser reads (messages left out)."""
    EtlLogFile, ChunkParser, _ = etl_check.load_etl_parser()
    out = []
    failed = 0
    for ch in EtlLogFile.parse(open(path, "rb").read()):
        try:
            evs = ChunkParser.parse(ch.payload) if len(ch.payload) else []
        except Exception:  # noqa: BLE001  (a buffer etl-parser cannot parse is counted)
            failed += 1
            continue
        for ev in evs:
            t, v = ev.type, ev.value
            if t == "PerfInfoTraceRecord":
                out.append(int(v.timestamp))
            elif t == "SystemTraceRecord":
                if int(v.system_header.header.group) == 0:
                    continue  # the header event and the header group's records
                out.append(int(v.system_header.system_time))
            elif t == "EventRecord":
                out.append(int(v.event_header.timestamp))
    return out, failed


def record_size(data, off):
    """A record's unpadded size from its marker (SYSTEM/COMPACT/PERFINFO: USHORT at +4)."""
    if off + 8 > len(data):
        return None
    b3, b2 = data[off + 3], data[off + 2]
    at = 4 if (b3 == 0xC0 and b2 in (1, 2, 3, 4, 0x10, 0x11)) else 0
    return int.from_bytes(bytes(data[off + at:off + at + 2]), "little") or None


def dissect_times(path):
    """dissect.etl's FILETIME of every data record it can read (the header buffer left out),
    and the records it cannot read (skipped by their own Size)."""
    from dissect.etl.etl import ETL
    from dissect.etl.exceptions import NoMoreEventsError
    times, errors = [], []
    with open(path, "rb") as fh:
        e = ETL(fh)
        for bi, buf in enumerate(e.buffers()):
            if bi == 0:
                continue  # the header event and the partition record
            data, off = buf.data, 0
            while off < buf.filled_bytes:
                try:
                    rec = buf.read_record(off)
                    step = rec.aligned_size
                    td = rec.header.time_delta
                    if td is not None:
                        times.append(e.get_filetime_for_event(td))
                except (EOFError, NoMoreEventsError):
                    break  # the buffer's end, as dissect's own iterator takes it
                except Exception as x:  # noqa: BLE001
                    size = record_size(data, off)
                    errors.append("buffer %d +%#x: %s" % (bi, off, type(x).__name__))
                    if not size:
                        break
                    step = (size + 7) & ~7
                off += step
    return times, errors


def match(want, got, tol):
    """How many of `want` find a partner in `got` within `tol` (each used once)."""
    import bisect
    got = sorted(got)
    n = 0
    for t in sorted(want):
        j = bisect.bisect_left(got, t - tol)
        if j < len(got) and abs(got[j] - t) <= tol:
            n += 1
            got.pop(j)
    return n


def check_times(c, tag, etwdump, dump, args, out, man):
    """dissect.etl and etl-parser date the records of every file as `etwdump events` does."""
    from dissect.etl.etl import ETL
    r = subprocess.run([etwdump, "events", dump, "--format", "json", *args],
                       capture_output=True, text=True)
    if not c.check(r.returncode == 0, "%s: etwdump events" % tag):
        return
    rows = json.loads(r.stdout)["records"]
    for s in man.get("sessions", []):
        lid = s["logger_id"]
        timed = [(x["raw_timestamp"], filetime_of(x["time"])) for x in rows
                 if x["logger_id"] == lid and x["time"]]
        if not timed:
            continue
        path = os.path.join(out, s["file"])
        dis, dis_errors = dissect_times(path)
        with open(path, "rb") as fh:
            e = ETL(fh)
            lh = e.logfile_header
            start, hts = int(lh.start_time), int(lh.system_header.time_delta)
            clock, freq, mhz = int(lh.header.ReservedFlags), int(lh.perf_freq), int(lh.cpu_speed_in_MHz)
        # dissect.etl's float conversion: within a double's resolution at the largest operand.
        big = max([abs(t) for t, _ in timed] + [hts, start])
        tol = max(1, 2 ** max(0, big.bit_length() - 53) * 2)
        # dissect.etl 3.14 reads messages in the same field order as etwdump but raises on a
        # component id (NotImplementedError): those records are left out of its comparison.
        want = [filetime_of(x["time"]) for x in rows
                if x["logger_id"] == lid and x["time"]
                and not (x["header_type"] == "message" and int(x["message_flags"], 16) & 4)]
        n = match(want, dis, tol)
        c.check(n == len(want) == len(dis), "%s: logger %s: dissect.etl dates %d of the %d records `events` dates (%d read; ClockType %d, StartTime %d, header TimeStamp %d, tolerance %d ticks)%s" % (
            tag, lid, n, len(want), len(dis), clock, start, hts, tol,
            ("; records it cannot read: " + "; ".join(dis_errors[:3])) if dis_errors else ""))

        def exact(ts):
            if clock == 2:
                return start + (ts - hts)
            if clock == 1 and freq:
                return start + (ts - hts) * 10**7 // freq
            if clock == 3 and mhz:
                return start + (ts - hts) * 10 // mhz
            return None
        raw, failed = etl_parser_raw_times(path)
        conv = [exact(t) for t in raw]
        conv = [x for x in conv if x is not None]
        # Messages are left out of etl-parser's list: every other record `events` dates must be
        # there, converted to the same time (all of them unless etl-parser failed on a buffer).
        want_np = [filetime_of(x["time"]) for x in rows
                   if x["logger_id"] == lid and x["time"] and x["header_type"] != "message"]
        n2 = match(conv, want_np, 1)
        c.check(n2 == len(conv) and (failed or len(conv) == len(want_np)),
                "%s: logger %s: etl-parser's %d raw timestamps (messages left out), converted with the header's anchors, are `events`' times (%d of %d matched%s)" % (
                    tag, lid, len(conv), n2, len(want_np),
                    "; %d buffers etl-parser cannot parse" % failed if failed else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("triage_dir")
    ap.add_argument("--real")
    ap.add_argument("--real-isf")
    a = ap.parse_args()
    c = etl_check.Checker()
    etwdump = os.environ.get("ETWDUMP", os.path.join(ROOT, "target", "debug", "etwdump"))
    work = tempfile.mkdtemp(prefix="triage-check.")
    n = 0
    for sc in sorted(os.listdir(a.triage_dir)):
        d = os.path.join(a.triage_dir, sc)
        exp_path = os.path.join(d, "expected.json")
        if not os.path.isfile(exp_path):
            continue
        exp = json.load(open(exp_path))
        dump = os.path.join(d, sc + ".dmp")
        isf = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json") and f != "expected.json"][0]
        extra = ["--allow-truncated"] if sc == "bad_truncated" else []
        out = os.path.join(work, sc)
        man = extract(c, etwdump, sc, dump, isf, out, extra)
        if man is None:
            continue
        n += 1
        got = check_files(c, sc, out, man)
        check_times(c, sc, etwdump, dump, ["--isf", isf, *extra], out, man)
        want = {}
        for r in exp["records"]:
            if r.get("duplicate_of") is None and r.get("logger_id") is not None:
                want[r["logger_id"]] = want.get(r["logger_id"], 0) + 1
        c.check(got == want, "%s: records per logger in the ETL files %s == forge %s" % (sc, got, want))
    c.check(n >= 11, "%d forge triage scenarios extracted" % n)
    if a.real and os.path.isfile(a.real) and a.real_isf and os.path.isfile(a.real_isf):
        out = os.path.join(work, "real")
        man = extract(c, etwdump, "triage_x64.dmp", a.real, a.real_isf, out)
        if man is not None:
            got = check_files(c, "triage_x64.dmp", out, man)
            c.check(got == {10: 107, 2: 92}, "triage_x64.dmp: records per logger %s == {10: 107, 2: 92}" % got)
            check_times(c, "triage_x64.dmp", etwdump, a.real, ["--isf", a.real_isf], out, man)
    else:
        print("SKIPPED: the real triage dump or its ISF is absent")
    arm = os.path.join(os.path.dirname(a.real or ""), "triage_arm64.dmp") if a.real else None
    if arm and os.path.isfile(arm):
        out = os.path.join(work, "real-arm64")
        r = subprocess.run([etwdump, "extract", arm, "-o", out], capture_output=True, text=True)
        if c.check(r.returncode == 0, "triage_arm64.dmp: etwdump extract"):
            man = json.load(open(os.path.join(out, "manifest.json")))
            check_times(c, "triage_arm64.dmp", etwdump, arm, [], out, man)
    else:
        print("SKIPPED: the real ARM64 triage dump is absent")
    print("== triage_check: %d ok, %d failures" % (c.oks, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
