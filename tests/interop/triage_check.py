#!/usr/bin/env python3
"""triage_check.py: etl-parser (PyPI, pinned by run.sh) on the ETL files `etwdump extract`
writes from triage dumps, against etwdump's manifest and the forge's expectations.

Usage: triage_check.py FORGE_TRIAGE_DIR [--real DUMP --real-isf ISF]

FORGE_TRIAGE_DIR is `forge --triage DIR` output (one directory per scenario with the .dmp, its
ISF and expected.json). For each scenario: `etwdump extract` with the scenario's ISF; every
.etl parsed by etl-parser; per buffer, etl-parser's record count and per-hook keys must equal
the manifest's; per logger, the records written must equal the forge's count of records of
that logger that are not duplicates of secondary-data records. The real triage dump (when
given) must give 107 EventLog-System and 92 logger-2 records (triage-etw.md §4.2)."""

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
        for i, (ch, b) in enumerate(zip(chunks, blist)):
            if ch["error"] or ch["records"] != b.get("records"):
                probs.append("buffer %d: etl-parser %r records (%s), manifest %r" % (
                    i, ch["records"], ch["error"], b.get("records")))
        keys = {}
        for ch in chunks[1:]:
            for k, n in ch["keys"].items():
                keys[k] = keys.get(k, 0) + n
        want = {("event_header" if k.startswith("event_header") else k): n
                for k, n in (s.get("records_by_hook") or {}).items()}
        c.check(not probs and keys == want, "%s: logger %s: etl-parser per buffer and keys %s == manifest %s%s" % (
            tag, s["logger_id"], keys, want, (": " + "; ".join(probs[:4])) if probs else ""))
        per_logger[s["logger_id"]] = s.get("records", 0)
    return per_logger


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
    else:
        print("SKIPPED: the real triage dump or its ISF is absent")
    print("== triage_check: %d ok, %d failures" % (c.oks, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
