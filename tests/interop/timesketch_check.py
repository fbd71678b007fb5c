"""Timesketch (issue 16): `etwdump cswitch` and `events --format jsonl` fed to the line handling
of the real importer, `timesketch-import-client` from PyPI (`ImportStreamer.add_file` on a
`.jsonl` file: `add_json` -> `add_dict` -> `_fix_dict`, as `timesketch_importer` does before an
upload; no server: the streamer is given a stand-in sketch and never flushes).

usage: timesketch_check.py MANIFEST   ($ETWDUMP: the etwdump binary)

For every forge dump of the manifest with ETW buffers (x64 `-etw-buffers` / `-etw-ccswap`):
1. every line the importer reads is kept (no decode error), and the importer's `datetime` for it
   is our `datetime` (ISO-8601 UTC) — no line lacks a time (the default leaves untimed rows out,
   with a warning giving their count);
2. `timestamp` is microseconds since 1970 and names the same instant as `datetime` (to the
   microsecond), as Timesketch reads it; the raw clock value is under `raw_timestamp`;
3. `timestamp_desc` and `message` are set;
4. `--keep-untimed` gives the left-out rows back (with `datetime` null), exactly the count the
   warning gave.
"""

import datetime
import json
import logging
import os
import subprocess
import sys
import tempfile

from timesketch_import_client import importer

failures = 0
checks = 0


def check(ok, what):
    global failures, checks
    checks += 1
    if not ok:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)
    return ok


class Sketch:
    """Stands in for a sketch: the streamer only checks that one is set before buffering."""

    id = 1


def import_lines(path):
    """The entries the importer builds from a .jsonl file, and the errors it logged."""
    errors = []

    class Catch(logging.Handler):
        def emit(self, record):
            errors.append(record.getMessage())

    h = Catch(level=logging.ERROR)
    importer.logger.addHandler(h)
    try:
        s = importer.ImportStreamer()
        s._sketch = Sketch()
        s._threshold_entry = 10**12  # never flush (no server)
        s.add_file(path)
        return s._data_lines, errors
    finally:
        importer.logger.removeHandler(h)


def iso_to_dt(text):
    # etwdump writes 100 ns digits and a Z; Python's fromisoformat keeps microseconds.
    t = text.rstrip("Z")
    if "." in t:
        head, frac = t.split(".")
        t = head + "." + frac[:6].ljust(6, "0")
    return datetime.datetime.fromisoformat(t).replace(tzinfo=datetime.timezone.utc)


def main():
    manifest = json.load(open(sys.argv[1]))
    base = os.path.dirname(os.path.abspath(sys.argv[1]))
    etwdump = os.environ["ETWDUMP"]
    dumps = [d for d in manifest if d["file"].endswith(("-etw-buffers.dmp", "-etw-ccswap.dmp"))]
    dumps = [d for d in dumps if "x64-19041" in d["file"] or "x64-14393" in d["file"]]
    if not check(len(dumps) >= 2, "%d forge dumps with buffers" % len(dumps)):
        return
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    with tempfile.TemporaryDirectory() as tmp:
        for d in dumps:
            name = d["file"]
            fx = name[len("fixture-"):].split("-etw")[0]
            pdb = os.path.join(fixtures, fx, "ntkrnlmp.pdb")
            for cmd in ("cswitch", "events"):
                args = [etwdump, cmd, os.path.join(base, name), "--pdb", pdb, "--format", "jsonl"]
                r = subprocess.run(args, capture_output=True, text=True)
                if not check(r.returncode == 0, "%s %s: exit 0 (%s)" % (name, cmd, r.stderr[-200:])):
                    continue
                ours = [json.loads(l) for l in r.stdout.splitlines()]
                warnings = [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{")]
                left = 0
                for w in warnings:
                    if "left out of the JSON Lines" in w.get("message", ""):
                        left = int(w["message"].split()[0])
                path = os.path.join(tmp, "%s-%s.jsonl" % (name, cmd))
                with open(path, "w") as f:
                    f.write(r.stdout)
                entries, errors = import_lines(path)
                check(len(ours) > 0, "%s %s: %d lines" % (name, cmd, len(ours)))
                check(not errors, "%s %s: the importer read every line (%s)" % (name, cmd, errors[:2]))
                check(len(entries) == len(ours), "%s %s: %d entries for %d lines" % (name, cmd, len(entries), len(ours)))
                bad_dt = bad_ts = bad_fields = 0
                for o, e in zip(ours, entries):
                    if not o.get("datetime") or not e.get("datetime"):
                        bad_dt += 1
                        continue
                    ours_dt = iso_to_dt(o["datetime"])
                    theirs = datetime.datetime.fromisoformat(e["datetime"])
                    if theirs.tzinfo is None:
                        theirs = theirs.replace(tzinfo=datetime.timezone.utc)
                    if abs((theirs - ours_dt).total_seconds()) > 1e-6:
                        bad_dt += 1
                    ts = o.get("timestamp")
                    as_dt = datetime.datetime.fromtimestamp(ts / 1e6, tz=datetime.timezone.utc) if isinstance(ts, int) else None
                    if as_dt is None or abs((as_dt - ours_dt).total_seconds()) > 1e-6 or "raw_timestamp" not in o:
                        bad_ts += 1
                    if not e.get("timestamp_desc") or not e.get("message"):
                        bad_fields += 1
                check(bad_dt == 0, "%s %s: every line's datetime read as ours (%d not)" % (name, cmd, bad_dt))
                check(bad_ts == 0, "%s %s: timestamp = microseconds since 1970 of datetime, raw value under raw_timestamp (%d not)" % (name, cmd, bad_ts))
                check(bad_fields == 0, "%s %s: timestamp_desc and message set (%d not)" % (name, cmd, bad_fields))
                # --keep-untimed gives back exactly the rows the warning counted.
                r2 = subprocess.run(args + ["--keep-untimed"], capture_output=True, text=True)
                kept = [json.loads(l) for l in r2.stdout.splitlines()]
                untimed = sum(1 for o in kept if o.get("datetime") is None)
                check(len(kept) == len(ours) + left and untimed == left,
                      "%s %s: --keep-untimed: %d lines, %d untimed = the %d the warning counted" % (name, cmd, len(kept), untimed, left))
    print("timesketch_check: %d checks, %d failures" % (checks, failures))


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
