#!/usr/bin/env python3
"""The Volatility 3 plugin suite (plugins/volatility3/windows/etw.py) under the real volatility3.

usage: vol_plugins_check.py SETDIR --symbols DIR

SETDIR is written by `forge --plugin-set SETDIR`: `sample-etw` (the memory of the shipped
sample: sessions, buffers, pending CCSWAP batches, processes) and `hostile-etw` (a session
named `=HYPERLINK("http://x")` ESC `[31m` BEL DEL U+009B, log file `@SUM(A1)` CR LF `x`), each
as a crash dump, a raw image, a .vmem + .vmss pair and an ELF core. --symbols: volatility
ISFs (vol.sh's conversion of the fixture PDBs; the x64-19041 one is used).

On every file F volatility3 opens (dump, raw, .vmem, ELF):
1. `vol -r json windows.etw.Sessions`, `windows.etw.Buffers`, `windows.etw.CSwitch`,
   `windows.etw.Events` (also with filters), `windows.etw.Providers`, `windows.etw.Check` run, and
   every row equals, column by column, the row this script derives from `etwdump sessions |
   buffers | cswitch F --isf ISF --format json` run directly on F (etwdump's own reading of
   the file: its own discovery of the page-table root, no layout). Text is compared escaped
   (each control character as \\u{hex}), times as the microsecond-truncated UTC instants of
   etwdump's RFC 3339 strings, addresses and sizes as integers, absent values as null.
2. The sessions' logger ids, names and start times equal the forge's expectations.
On the hostile dump: no raw control character reaches vol's text output, the escaped name
does. Sessions --dump writes, through volatility's -o directory, .etl files byte-identical
to `etwdump extract` on the same file, and manifest.json. --handoff copy (the memory copied to
a raw file, for layers that are not linear) gives the rows --handoff layout gives. Timeliner
(`--plugin-filter windows.etw.X --create-bodyfile`): the body file has one line per timed row
of X with its description and whole-second time (volatility 2.28.2's Timeliner grid repeats
the previous row's times and, with several plugins, earlier plugins' rows: README).
Prints ok/FAIL lines; exits 1 on a failure.
"""
import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLUGINS = os.path.join(ROOT, "plugins", "volatility3")
VOL = os.path.join(HERE, ".venv", "bin", "vol")
ISF_NAME = "windows/ntkrnlmp.pdb/E7D0F1C7006400010000000000019041-1.json.xz"
sys.path.insert(0, HERE)
from vol_check import Checker  # noqa: E402




def esc(t):
    if t is None:
        return None
    return "".join("\\u{%x}" % ord(c) if unicodedata.category(c) == "Cc" else c for c in t)


def utc(text):
    """etwdump's RFC 3339 time ('...T01:38:20.6548374Z') as volatility's JSON renders the
    datetime the plugin gives (microseconds truncated, isoformat with +00:00)."""
    if text is None:
        return None
    day, clock = text.rstrip("Z").split("T")
    whole, _, frac = clock.partition(".")
    d = datetime.datetime.fromisoformat("%sT%s" % (day, whole)).replace(tzinfo=datetime.timezone.utc)
    d += datetime.timedelta(microseconds=int((frac + "000000")[:6]))
    return d.isoformat()


def addr(v):
    return None if v is None else int(v, 16) if isinstance(v, str) else v


def joined(v, sep):
    return sep.join(map(str, v or []))


def expect_session(r, files):
    return {
        "LoggerId": r["logger_id"], "Name": esc(r["name"]), "LogFile": esc(r["log_file"]),
        "Address": addr(r["address"]), "LoggerMode": r["logger_mode"],
        "ModeFlags": joined(r["logger_mode_flags"], ", "), "ClockType": r["clock_type"],
        "Clock": r["clock_type_name"], "BufferSize": r["buffer_size"],
        "MinimumBuffers": r["minimum_buffers"], "MaximumBuffers": r["maximum_buffers"],
        "NumberOfBuffers": r["number_of_buffers"], "BuffersWritten": r["buffers_written"],
        "EventsLost": r["events_lost"], "LogBuffersLost": r["log_buffers_lost"],
        "RealTimeBuffersLost": r["real_time_buffers_lost"], "StartTime": utc(r["start_time"]),
        "StartTimeRaw": r["start_time_raw"], "InstanceGuid": r["instance_guid"],
        "PoolType": r["pool_type"], "MaximumEventSize": r["maximum_event_size"],
        "LayoutSource": r["layout_source"], "Identity": joined(r["identity"], ", "),
        "Anomalies": esc(joined(r["anomalies"], "; ")), "Warnings": esc(joined(r["warnings"], "; ")),
        "Consumers": esc("; ".join("PID %s %s (consumer %s, EPROCESS %s)" % (
            "?" if c["pid"] is None else c["pid"], "(unreadable)" if c["process"] is None else c["process"],
            c["address"], "?" if c["eprocess"] is None else c["eprocess"]) for c in r["consumers"])),
        "File output": files.get(r["logger_id"]),
    }


def expect_buffer(r):
    hooks = r.get("records_by_hook") or {}
    return {
        "LoggerId": r["session_id"], "Session": esc(r["session_name"]), "Source": r["source"],
        "Address": addr(r["address"]), "FileOffset": r["file_offset"],
        "Lists": joined(r["lists"], ", "), "State": r["state"], "StateName": r["state_name"],
        "BufferType": r["buffer_type"], "BufferFlag": r["buffer_flag"], "Processor": r["processor"],
        "SequenceNumber": r["sequence_number"], "BufferSize": r["buffer_size"],
        "ValidBytes": r["valid_bytes"], "SavedBytes": r["saved_bytes"],
        "PartialBytes": r["partial_bytes"], "TrimmedBytes": r["trimmed_bytes"],
        "Records": r["record_count"],
        "RecordsByHook": ", ".join("%s: %s" % kv for kv in sorted(hooks.items())),
        "Compressed": bool(r["compressed"]), "DuplicateOf": addr(r["duplicate_of"]),
        "ConsumerPid": r["consumer_pid"], "ConsumerProcess": esc(r["consumer_process"]),
        "FoundVia": esc(r["found_via"]),
        "Warnings": esc(joined(r["warnings"], "; ")),
    }


def expect_switch(r):
    f = r.get("found_by")
    return {
        "Cpu": r["cpu"], "Time": utc(r["time"]), "RawTimestamp": r["raw_timestamp"],
        "TimeFlag": r["time_flag"], "OldTid": r["old_tid"], "OldProcess": esc(r["old_process"]),
        "OldPid": r["old_pid"], "NewTid": r["new_tid"], "NewProcess": esc(r["new_process"]),
        "NewPid": r["new_pid"],
        "OldPriority": r["old_priority"], "NewPriority": r["new_priority"],
        "OldState": r["old_state"], "OldWaitReason": r["old_wait_reason"],
        "OldWaitMode": r["old_wait_mode"], "NewThreadWaitTime": r["new_thread_wait_time"],
        "Source": r["source"], "LoggerId": r["logger_id"], "ClockSlot": r["clock"],
        "FoundBy": None if f is None else "%s at EtwSupport+%#x" % (f["method"], f["offset"]),
        "Sources": "; ".join(source_text(x) for x in r["sources"]) or None,
    }


def expect_event(r):
    return {
        "LoggerId": r["logger_id"], "Source": r["source"], "Buffer": addr(r["buffer"]),
        "Offset": r["offset"], "HeaderType": r["header_type"], "Hook": r["hook"],
        "HookName": r["hook_name"], "Provider": r["provider"], "ProviderName": r["provider_name"],
        "EventId": r["event_id"],
        "Version": r["version"], "Time": utc(r["time"]), "RawTimestamp": r["raw_timestamp"],
        "TimeFlag": r["time_flag"], "Cpu": r["cpu"], "Pid": r["pid"], "Tid": r["tid"],
        "Size": r["size"], "Routine": r["routine_symbol"] or r["routine"],
    }


def source_text(x):
    """A record of a switch as the plugin's Sources column writes it."""
    parts = [x["source"]]
    if x["logger_id"] is not None:
        parts.append("logger %d" % x["logger_id"])
    if x["block"] is not None:
        parts.append("block %s" % x["block"])
    if x["buffer"] is not None:
        parts.append("%s+%#x" % (x["buffer"], x["offset"]) if x["offset"] is not None else x["buffer"])
    if x["index"] is not None:
        parts.append("#%d" % x["index"])
    parts.append("raw %d" % x["raw_timestamp"])
    if x["clock"] is not None:
        parts.append("clock %d" % x["clock"])
    return " ".join(parts)


def expect_provider(r):
    """A windows.etw.Providers row from etwdump's providers record (plugin columns)."""
    enabled = "; ".join(
        "%s %s L%s any %s all %s" % (e["logger_id"], esc(e["session"]) if e["session"] is not None else "(no such session)",
                                     e["level"], e["match_any_keyword"], e["match_all_keyword"])
        for e in r["enabled_by"])
    user = r["kind"] == "user"
    return {"GUID": r["guid"], "Name": r["name"], "GuidEntry": addr(r["guid_entry"]), "GuidType": r["guid_type"],
            "Registration": addr(r["registration"]), "Kind": r["kind"], "PID": r["pid"] if user else None,
            "Process": esc(r["process"]), "EPROCESS": addr(r["eprocess"]), "Callback": addr(r["callback"]),
            "EnableMask": addr(r["enable_mask"]), "EnabledBy": enabled, "Warnings": esc(joined(r["warnings"], "; "))}


def expect_finding(r):
    return {"Check": r["check"], "Severity": r["severity"], "Subject": esc(r["subject"]), "Address": addr(r["address"]),
            "Field": r["field"], "LoggerId": r["logger_id"], "Evidence": esc(r["evidence"]), "Expected": esc(r["expected"])}


def etwdump(cmd, path, isf, extra=()):
    r = subprocess.run([os.environ["ETWDUMP"], cmd, path, "--isf", isf, "--format", "json"] + list(extra),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:]
    return json.loads(r.stdout)["records"], None


def vol(plugin, path, symdir, cache, extra=(), outdir=None, renderer="json", verbose=False):
    cmd = [VOL, "--offline", "-q", "-s", symdir, "--cache-path", cache, "-p", PLUGINS, "-r", renderer,
           "-f", path] + (["-vv"] if verbose else [])
    if outdir:
        cmd += ["-o", outdir]
    cmd += [plugin] + list(extra)
    r = subprocess.run(cmd, capture_output=True)
    return r


def vol_rows(c, what, r):
    if not c.check(r.returncode == 0, "%s: vol exit 0" % what,
                   "" if r.returncode == 0 else
                   "exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace").strip()[-400:])):
        return None
    rows = json.loads(r.stdout)
    for row in rows:
        row.pop("__children", None)
    return rows


def compare(c, what, got, want):
    if not c.check(got is not None and len(got) == len(want), "%s: %d rows" % (what, len(want)),
                   "got %s" % (None if got is None else len(got))):
        return
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            diff = {k: (g.get(k), w.get(k)) for k in set(g) | set(w) if g.get(k) != w.get(k)}
            c.check(False, "%s: row %d equals etwdump's" % (what, i), json.dumps(diff)[:600])
            return
    c.check(True, "%s: every row equals etwdump's, every column (%d columns)" % (what, len(want[0]) if want else 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("setdir")
    ap.add_argument("--symbols", required=True)
    a = ap.parse_args()
    c = Checker()
    isf = os.path.join(a.symbols, ISF_NAME)
    if not os.path.exists(isf):
        print("FAIL no ISF %s (vol.sh converts the fixture PDBs)" % isf)
        return 1
    with open(os.path.join(a.setdir, "manifest.json")) as f:
        manifest = json.load(f)
    cache = tempfile.mkdtemp(prefix="vol-cache-")
    for entry in manifest:
        stem = entry["file"][: -len(".dmp")]
        files = [("dump", entry["file"])]
        for img in entry["images"]:
            if img["format"] in ("raw", "elf"):
                files.append((img["format"], img["files"][0]))
            elif img["format"] == "vmware":
                files.append(("vmem", img["memory_file"]))
        expected_slots = {s["slot"]: s for s in entry["etw"]["slots"] if s["kind"] == "session"}
        for kind, name in files:
            path = os.path.join(a.setdir, name)
            what = "%s %s" % (stem, kind)
            # 0. The hand-off chosen: a crash dump as it is, any other file through the
            # layout of volatility's layers over it.
            want_src = {"dump": "(a crash dump, read by etwdump itself)", "raw": ": FileLayer (",
                        "elf": ": Elf64Layer over FileLayer (", "vmem": ": VmwareLayer over FileLayer ("}[kind]
            r = vol("windows.etw.Sessions", path, a.symbols, cache, verbose=True)
            line = [ln for ln in r.stderr.decode(errors="replace").splitlines() if "etwdump reads" in ln]
            c.check(len(line) == 1 and want_src in line[0], "%s: hand-off %r" % (what, want_src),
                    "" if line and want_src in line[0] else str(line))
            # 1. Every row of the three plugins against etwdump on the same file.
            for plugin, cmd, make, extra in (("windows.etw.Sessions", "sessions", None, []),
                                             ("windows.etw.Buffers", "buffers", expect_buffer, []),
                                             ("windows.etw.CSwitch", "cswitch", expect_switch, []),
                                             ("windows.etw.CSwitch", "cswitch", expect_switch,
                                              ["--tid", "0", "--since", "2021-02-21T01:38:22.72879Z"]),
                                             ("windows.etw.Events", "events", expect_event, []),
                                             # Filters pass through: etwdump applies them.
                                             ("windows.etw.Events", "events", expect_event,
                                              ["--hook", "CONTEXTSWAP", "--since", "2021-02-21T01:38:22.72879Z"]),
                                             ("windows.etw.Providers", "providers", expect_provider, ["--all"]),
                                             ("windows.etw.Check", "check", expect_finding, [])):
                recs, err = etwdump(cmd, path, isf, extra)
                if not c.check(recs is not None, "%s: etwdump %s" % (what, cmd), "" if err is None else str(err)):
                    continue
                if cmd == "sessions":
                    recs = [r for r in recs if r["kind"] == "session"]
                    want = [expect_session(r, {}) for r in recs]
                else:
                    want = [make(r) for r in recs]
                got = vol_rows(c, "%s %s" % (what, plugin), vol(plugin, path, a.symbols, cache, extra))
                compare(c, "%s %s" % (what, plugin), got, want)
                if cmd == "check" and got is not None:
                    # The forge's tampering: exactly its findings (the check and the object).
                    want_f = sorted((x["check"], addr(x["address"])) for x in entry["etw"].get("findings", []))
                    got_f = sorted((r["Check"], r["Address"]) for r in got)
                    # clock-hook names the GetCpuClock field, the forge its logger context.
                    got_f = sorted((ch, at) if ch != "clock-hook" else
                                   (ch, next((addr(w) for k, w in want_f if k == ch and 0 <= at - addr(w) < 0x100), at))
                                   for ch, at in got_f)
                    c.check(got_f == want_f, "%s: windows.etw.Check gives the forge's %d findings" % (what, len(want_f)),
                            "got %s, want %s" % (got_f, want_f))
                if cmd == "providers" and got is not None:
                    # The forge's providers: every GUID entry it placed is listed.
                    placed = {(p["guid"], addr(p["guid_entry"])) for p in entry["etw"].get("providers", [])}
                    listed = {(r["GUID"], r["GuidEntry"]) for r in got}
                    c.check(placed and placed == listed, "%s: the %d GUID entries the forge placed" % (what, len(placed)),
                            "missing %s, extra %s" % (sorted(placed - listed)[:3], sorted(listed - placed)[:3]))
                if cmd == "sessions" and got:
                    # 2. The forge's sessions: ids, names (unreadable where the forge made
                    # them so; a raw image reads its absent pages as zeros) and start times.
                    ids = sorted(r["LoggerId"] for r in got)
                    c.check(ids == sorted(expected_slots), "%s: logger ids %s" % (what, ids))
                    for r in got:
                        s = expected_slots.get(r["LoggerId"])
                        if s is None:
                            continue
                        if s.get("name") is not None and not s.get("name_unreadable"):
                            c.check(r["Name"] == esc(s["name"]), "%s: logger %d name %r" % (what, r["LoggerId"], r["Name"]),
                                    "" if r["Name"] == esc(s["name"]) else "forge: %r" % esc(s["name"]))
                        ft = int(s["start_time"], 16) if isinstance(s.get("start_time"), str) else s.get("start_time")
                        if ft:
                            when = (datetime.datetime(1601, 1, 1, tzinfo=datetime.timezone.utc)
                                    + datetime.timedelta(microseconds=ft // 10)).isoformat()
                            c.check(r["StartTime"] == when, "%s: logger %d start time %s" % (what, r["LoggerId"], when),
                                    "" if r["StartTime"] == when else str(r["StartTime"]))
        dump = os.path.join(a.setdir, entry["file"])
        raw = os.path.join(a.setdir, stem + ".raw")
        # Volatility's own pslist confirms every process etwdump names for a user-mode
        # provider registration or a real-time consumer: same PID, image and EPROCESS.
        ps = vol_rows(c, "%s windows.pslist" % stem, vol("windows.pslist", dump, a.symbols, cache))
        if ps is not None:
            # Volatility gives canonical x64 addresses without their sign extension.
            va48 = lambda v: None if v is None else v & ((1 << 48) - 1)  # noqa: E731
            procs = {va48(r["Offset(V)"]): (r["PID"], r["ImageFileName"]) for r in ps}
            named = []
            provs, _ = etwdump("providers", dump, isf, ["--all"])
            named += [(addr(r["eprocess"]), r["pid"], r["process"], "registration %s" % r["registration"])
                      for r in provs or [] if r["kind"] == "user"]
            sess, _ = etwdump("sessions", dump, isf)
            named += [(addr(x["eprocess"]), x["pid"], x["process"], "consumer %s" % x["address"])
                      for r in sess or [] if r["kind"] == "session" for x in r["consumers"]]
            bad = [n for n in named if procs.get(va48(n[0])) != (n[1], n[2])]
            c.check(named and not bad,
                    "%s: pslist confirms the %d processes named by registrations and consumers" % (stem, len(named)),
                    "%d of %d disagree, e.g. %s; pslist: %s" % (len(bad), len(named), bad[:2],
                                                                sorted((hex(k), v) for k, v in procs.items())[:8]))
        # Hostile text: escaped in the text renderer's output, never raw.
        r = vol("windows.etw.Sessions", dump, a.symbols, cache, renderer="quick")
        text = r.stdout.decode("utf-8", errors="replace")
        raw_controls = [ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\n\t"]
        c.check(r.returncode == 0 and not raw_controls,
                "%s: no raw control character in the text output" % stem,
                "" if not raw_controls else repr(raw_controls[:5]))
        if stem == "hostile-etw":
            c.check("=HYPERLINK(\"http://x\")\\u{1b}[31m\\u{7}\\u{7f}\\u{9b}" in text,
                    "%s: the hostile name is shown escaped" % stem)
        # --dump: the .etl files etwdump extract writes, through volatility's output directory.
        for kind, path in (("dump", dump), ("raw", raw)):
            with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as ref:
                rows = vol_rows(c, "%s %s Sessions --dump" % (stem, kind),
                                vol("windows.etw.Sessions", path, a.symbols, cache, ["--dump"], outdir=out))
                x = subprocess.run([os.environ["ETWDUMP"], "extract", path, "--isf", isf, "-o", ref],
                                   capture_output=True)
                with open(os.path.join(ref, "manifest.json")) as f:
                    man = json.load(f)
                names = {s["logger_id"]: s["file"] for s in man["sessions"]}
                if rows is not None:
                    c.check({r["LoggerId"]: r["File output"] for r in rows if r["File output"]} == names,
                            "%s %s --dump: a file per session (%d), named as etwdump names them"
                            % (stem, kind, len(names)))
                same = all(
                    os.path.exists(os.path.join(out, n))
                    and hashlib.sha256(open(os.path.join(out, n), "rb").read()).hexdigest()
                    == hashlib.sha256(open(os.path.join(ref, n), "rb").read()).hexdigest()
                    for n in list(names.values()) + ["manifest.json"])
                c.check(x.returncode == 0 and same,
                        "%s %s --dump: %d .etl files and manifest.json byte-identical to etwdump extract's"
                        % (stem, kind, len(names)))
        # The copy hand-off gives what the layout hand-off gives.
        elf = os.path.join(a.setdir, stem + ".elf")
        for plugin in ("windows.etw.Sessions", "windows.etw.CSwitch"):
            rl = vol(plugin, elf, a.symbols, cache, ["--handoff", "layout"])
            rc = vol(plugin, elf, a.symbols, cache, ["--handoff", "copy"])
            c.check(rl.returncode == 0 and rl.stdout == rc.stdout and len(rl.stdout) > 200,
                    "%s elf %s: --handoff copy gives the rows --handoff layout gives (%d bytes)"
                    % (stem, plugin, len(rl.stdout)))
        # Timeliner's body file: one line per timed row, each with its description and time.
        for plugin, cmd in (("windows.etw.Sessions", "sessions"), ("windows.etw.CSwitch", "cswitch")):
            recs, _ = etwdump(cmd, dump, isf)
            recs = [r for r in recs or [] if r.get("kind", "session") == "session" or cmd == "cswitch"]
            if cmd == "sessions":
                want = {("ETW session started: logger %d %s" % (r["logger_id"], esc(r["name"]) if r["name"] is not None else "(unreadable)"),
                         r["start_time"]) for r in recs if r["start_time"]}
            else:
                tid = lambda t: "?" if t is None else t  # noqa: E731
                want = {("ETW context switch, CPU %d, raw %d: %s (TID %s) -> %s (TID %s) [%s]"
                         % (r["cpu"], r["raw_timestamp"], esc(r["old_process"]) or "?", tid(r["old_tid"]),
                            esc(r["new_process"]) or "?", tid(r["new_tid"]), r["source"]), r["time"])
                        for r in recs if r["time"]}
            with tempfile.TemporaryDirectory() as out:
                r = vol("timeliner.Timeliner", dump, a.symbols, cache,
                        ["--plugin-filter", plugin, "--create-bodyfile"], outdir=out, renderer="none")
                body = open(os.path.join(out, "volatility.body")).read().splitlines() if r.returncode == 0 else []
            short = plugin.split(".")[-1]
            got = set()
            for line in body:
                f = line.split("|")
                name = f[1]
                if not name.startswith(short + " - "):
                    continue
                got.add((name[len(short) + 3:], int(f[9 if cmd == "cswitch" else 10])))
            def secs(t):
                d = datetime.datetime.fromisoformat(utc(t))
                return int(d.timestamp())
            want_s = {(d, secs(t)) for d, t in want}
            c.check(len(want) > 0 and got == want_s,
                    "%s Timeliner %s: body file has the %d timed rows, times to the second"
                    % (stem, short, len(want)),
                    "" if got == want_s else
                    "missing %s, extra %s" % (sorted(want_s - got)[:2], sorted(got - want_s)[:2]))
    print("== vol_plugins_check: %d checks, %d failed" % (c.count, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
