#!/usr/bin/env python3
"""Carving (issue 15): `etwdump scan` on the forge's scan scenarios, and etl-parser on the
carved .etl files.

usage: scan_check.py MANIFEST.json [--fixtures DIR]

run.sh writes the scenarios with `forge OUTDIR --scan` (stopped sessions left in freed pool,
lost / overwritten / unmapped buffers, stale copies, orphaned CCsw blocks and contexts,
decoys; manifest key "scan": objects, groups, lost, decoys). For each scan-*.dmp:
1. `$ETWDUMP scan DUMP --pdb PDB --format json -o DIR`: every planted buffer that holds a
   record is listed at its physical address with the forge's class and sequence number; no
   decoy and no unplanted buffer is listed; the orphans of each stopped session (forge group)
   carry one group.
2. etl-parser 1.0.1 (PyPI) reads every carved .etl of DIR: the buffers the manifest lists,
   with its record count per buffer and its hook keys (triage_check.check_files).
Prints ok/FAIL lines; exits 1 on a failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import etl_check  # noqa: E402
import triage_check  # noqa: E402

H = lambda v: int(v, 16) if isinstance(v, str) else int(v)  # noqa: E731


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
    a = ap.parse_args()
    etwdump = os.environ.get("ETWDUMP")
    c = etl_check.Checker()
    check = lambda ok, what, detail="": c.check(ok, what + (": " + detail if detail else ""))  # noqa: E731
    base = os.path.dirname(os.path.abspath(a.manifest))
    with open(a.manifest) as f:
        entries = [e for e in json.load(f) if e.get("scan")]
    check(len(entries) > 0, "manifest has scan scenarios", "%d" % len(entries))
    for e in entries:
        name = e["file"]
        pdb = etl_check.pdb_of(e, a.fixtures)
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([etwdump, "scan", os.path.join(base, name), "--pdb", pdb, "--format", "json",
                                "-o", out], capture_output=True, text=True, timeout=600)
            if not check(r.returncode == 0, "%s: etwdump scan" % name,
                         "" if r.returncode == 0 else r.stderr.strip()[-200:]):
                continue
            rows = json.loads(r.stdout)["records"]
            got = {H(x["physical_address"]): x for x in rows if x["kind"] == "buffer"}
            want = {}
            for o in e["scan"]["objects"]:
                b = o.get("buffer")
                if o["kind"] != "buffer" or not b or b.get("header_only") or b.get("compressed") \
                        or not b.get("recoverable_records"):
                    continue
                want[H(o["pa"])] = o
            missing = [hex(p) for p in want if p not in got]
            extra = [hex(p) for p in got if p not in want]
            check(not missing and not extra, "%s: %d planted buffers found, none else" % (name, len(want)),
                    "missing %s, unplanted %s" % (missing[:4], extra[:4]) if missing or extra else "")
            bad = [hex(p) for p, o in want.items() if p in got and (
                got[p]["class"] != o["class"] or got[p]["sequence_number"] != o["buffer"]["sequence_number"])]
            check(not bad, "%s: classes and sequence numbers as planted" % name, ", ".join(bad[:4]))
            decoys = [d for d in e["scan"]["decoys"] if H(d["pa"]) in got]
            check(not decoys, "%s: %d decoys, none listed" % (name, len(e["scan"]["decoys"])),
                  str(decoys[:2]) if decoys else "")
            split = []
            for g in e["scan"]["groups"]:
                pas = [H(o["pa"]) for o in e["scan"]["objects"]
                       if o["kind"] == "buffer" and o.get("group") == g["group"]]
                ours = {got[p]["group"] for p in pas if p in got and got[p]["class"] == "orphaned"}
                if len(ours) > 1 or None in ours:
                    split.append((g["group"], sorted(map(str, ours))))
            check(not split, "%s: each stopped session's orphans in one group" % name,
                  str(split) if split else "")
            mpath = os.path.join(out, "manifest.json")
            if check(os.path.isfile(mpath), "%s: carved manifest" % name):
                man = json.load(open(mpath))
                check(len(man["sessions"]) > 0, "%s: %d carved .etl files" % (name, len(man["sessions"])))
                triage_check.check_files(c, name, out, man)
    print("scan_check: %d checks, %d failures" % (c.oks + c.failures, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
