#!/usr/bin/env python3
"""Manifest-based event payloads (`class` "manifest", issue 29 item 1), field by field against
etl-parser 1.0.1 decoding the same bytes.

usage: manifest_check.py [--real DUMP]... [--triage FORGE_TRIAGE_DIR]

--real: the real triage dumps (../shared/data/dumps/triage_x64.dmp, triage_arm64.dmp; skipped,
said so, when absent). --triage: `forge --triage DIR` output (one directory per scenario with
the .dmp and its ISF): EVENT_HEADER records with real provider GUIDs, ids and versions and
random payloads.

For every dump: `$ETWDUMP extract DUMP -o DIR` (with the scenario's ISF for a forge dump), then
for every .etl it writes `$ETWDUMP etl FILE --events --format json`, and etl-parser reads the
file (`EtlLogFile`, `ChunkParser`, then its factory `build_etw(guid, id, version, user_data)`,
what `Event.parse_etw()` calls: parse_etw itself fails on every record, see below): the record
at the same index of the same buffer, whose provider GUID, event id, version and timestamp
must be the row's.

1. Every payload etwdump decodes as "manifest": etl-parser must have a class for the event, and
   every field both decode must be equal (integers, strings without their NUL, GUID, SID and
   SYSTEMTIME as text, bytes as hex digits, floats bit for bit). A payload etwdump flags with a
   problem may be refused by etl-parser too (counted); where etl-parser decodes it, the fields
   etwdump did decode must still agree. etl-parser ignores bytes after its last field, so a
   payload etwdump reports "N bytes after the last field" is compared field for field.
   etl-parser reads `Int8ul` as 1 byte and `Bytes(this.F)` as F bytes. Where etwdump's payload
   says (its `how`) that the one reading of the payload's size is the other one (a
   4-byte win:Boolean, F UTF-16 characters), etl-parser misreads by construction: its own
   decoding is counted as "etl-parser's known misreading" (the fields from the first such one
   on; the fields before it are compared), and every field is compared against etl-parser's
   class parsed by construct with only those fields' types put right (`Int32ul` for a
   Boolean, `Bytes(2 * this.F)` for characters): the same names, order and other types.
2. Every EVENT_HEADER record etl-parser decodes that etwdump does not must be one etwdump gives
   raw because the schema does not fit its payload exactly (short, or bytes after the last
   field, which etl-parser ignores; or, with ambiguous types, in no reading, in several, or
   with values not of the one reading's types; or more ambiguous fields than are tried), or a
   64-bit field in a 32-bit event (a win:Pointer is 4 bytes there). Counted by reason.

etl-parser 1.0.1's bugs met here: `Event.parse_etw()` reads `provider_id.data1` where its
EventHeader keeps the GUID's parts under `provider_id.inner` (AttributeError on every record;
worked around as said above). Its failures are counted by kind, not failed: its classes that size data by
`this.__binLength` raise AttributeError on every record (Python mangles the name inside the
class body to `_<Class>__binLength`; etl-parser's bug), and it raises on payloads too short for
its fields (etwdump says why in `problem`). Prints ok/FAIL lines with counts; exits 1 on a
disagreement.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vol_check import Checker  # noqa: E402
from events_check import etl_parser_buffers  # noqa: E402


def guid_text(g):
    d4 = bytes(g.data4)
    return "%08x-%04x-%04x-%s-%s" % (g.data1, g.data2, g.data3, d4[:2].hex(), d4[2:].hex())


def ep_value(v):
    """An etl-parser (construct) value as etwdump writes it in JSON."""
    t = getattr(v, "type", None)
    if t in ("WString", "CString"):
        raw = bytes(v.string)
        if t == "WString":
            return raw.decode("utf-16-le", "replace").split("\0", 1)[0]
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    if t == "Guid":
        return guid_text(v.inner)
    if hasattr(v, "SubAuthority") and hasattr(v, "IdentifierAuthority"):
        a = int.from_bytes(bytes(v.IdentifierAuthority), "big")
        return "S-%d-%d%s" % (v.Revision, a, "".join("-%d" % s for s in v.SubAuthority))
    if hasattr(v, "day_of_week") and hasattr(v, "milliseconds"):
        w = [v.year, v.month, v.day, v.hour, v.minute, v.second, v.milliseconds]
        # etwdump reads the words unsigned (Int16sl in etl-parser).
        w = [x & 0xFFFF for x in w]
        return "%04d-%02d-%02dT%02d:%02d:%02d.%03d" % tuple(w)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return v


def same(ours, theirs, single):
    """One field: etwdump's JSON value against etl-parser's (converted)."""
    if isinstance(theirs, float):
        if isinstance(ours, str):  # NaN and the infinities are text in etwdump's JSON
            return math.isnan(theirs) if ours == "NaN" else str(theirs) == ours
        if single:
            return struct.pack("<f", ours) == struct.pack("<f", theirs)
        return struct.pack("<d", ours) == struct.pack("<d", theirs)
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return False
    return ours == theirs


def left_out_reason(cls, wide):
    """Why etwdump does not decode etl-parser's class (None: it should)."""
    import construct
    for sc in cls.pattern.subcons:
        if sc.subcon is construct.Int64ul and not wide:
            return "u64 in a 32-bit event"
    return None


# etwdump's reasons for giving a payload of a known event raw (decode::manifest).
RAW_REASONS = [
    ("does not fit the payload in any of the", "no reading of its ambiguous types fits (given raw)"),
    ("readings of its ambiguous fields (", "several readings of its ambiguous types fit, or the one does not hold values of its types (given raw)"),
    ("its readings are not tried", "more ambiguous fields than are tried (given raw)"),
    ("does not fit the payload", "the schema does not fit the payload (given raw)"),
]

# The groups of a payload's `how` text that read a field the other way than etl-parser.
HOW_BOOLEAN = "Int8ul read as win:Boolean (4 bytes)"
HOW_CHARS = "Bytes(this.F) read as UTF-16 characters (2 bytes each)"


def how_groups(how):
    """{group: [field names]} of a `how` text."""
    out = {}
    for part in how.split("; "):
        what, sep, names = part.partition(": ")
        if sep and not what.startswith("the only one"):
            out[what] = names.split(", ")
    return out


def reread(cls, user_data, booleans, chars):
    """etl-parser's class parsed with only the fields etwdump reads the other way put right: a
    Boolean as `Int32ul`, characters as `Bytes(2 * this.F)`; every other type its own."""
    import construct
    subcons = []
    for sc in cls.pattern.subcons:
        t = sc.subcon
        if sc.name in booleans:
            t = construct.Int32ul
        elif sc.name in chars:
            n = t.length
            t = construct.Bytes(lambda this, n=n: 2 * n(this))
        subcons.append(sc.name / t)
    return construct.Struct(*subcons).parse(bytes(user_data))


class Tally:
    def __init__(self):
        self.events = 0
        self.fields = 0
        self.with_problem = 0
        self.both_refuse = 0
        self.ep_errors = {}
        self.left_out = {}
        self.diffs = []
        self.misread_events = 0
        self.misread_fields = {}
        self.reread_fields = 0

    def add(self, d, k):
        d[k] = d.get(k, 0) + 1


def etl_parser_records(path):
    """Per buffer: [(header, etl-parser class or None, parsed container or exception)] of its
    records (None for records that are not EventRecord), or the exception text."""
    from etl.parsers.etw.core import __etw_factory__, build_etw, Guid as EGuid
    out = []
    for evs in etl_parser_buffers(path):
        if isinstance(evs, str):
            out.append(evs)
            continue
        recs = []
        for ev in evs:
            if ev.type != "EventRecord":
                recs.append(None)
                continue
            h = ev.value.event_header
            g = h.provider_id.inner
            eg = EGuid(g.data1, g.data2, g.data3, list(g.data4))
            cls = __etw_factory__.get(eg, {}).get(h.event_descriptor.Id, {}).get(h.event_descriptor.Version)
            # Event(...).parse_etw() reads `provider_id.data1`, but etl-parser's EventHeader nests
            # the GUID's parts under `inner`: AttributeError on every record (etl-parser's bug).
            # Its own factory is called as parse_etw would, with the GUID read from `inner`.
            try:
                got = build_etw(eg, h.event_descriptor.Id, h.event_descriptor.Version,
                                ev.value.user_data).source if cls else None
            except Exception as e:  # noqa: BLE001
                got = e
            recs.append((h, cls, got, ev.value.user_data))
        out.append(recs)
    return out


def check_file(c, etwdump, path, tag, t):
    r = subprocess.run([etwdump, "etl", path, "--events", "--format", "json"], capture_output=True, text=True)
    if not c.check(r.returncode == 0, "%s: etwdump etl --events" % tag, r.stderr[-300:] if r.returncode else ""):
        return
    rows = json.loads(r.stdout)["records"]
    ep = etl_parser_records(path)
    size = int.from_bytes(open(path, "rb").read(4), "little")
    per_buffer, index = {}, []
    for x in rows:
        b = int(x["buffer"], 16) // size
        index.append((b, per_buffer.get(b, 0)))
        per_buffer[b] = per_buffer.get(b, 0) + 1
    # etl-parser 1.0.1 reads TRACE_MESSAGE records with one fixed layout, so it cannot parse a
    # buffer holding messages with other option flags (as triage_check.py notes): such buffers
    # are noted and left out; every other buffer must give etwdump's records.
    unread = [b for b in per_buffer if b < len(ep) and isinstance(ep[b], str)]
    if unread:
        c.note("%s: etl-parser cannot parse buffers %s (%s): left out" % (tag, unread, ep[unread[0]]))
    bad = [b for b, n in per_buffer.items() if b >= len(ep) or (b not in unread and len(ep[b]) != n)]
    c.check(not bad, "%s: etl-parser reads the %d records of the %d buffers as etwdump does"
            % (tag, sum(per_buffer[b] for b in per_buffer if b not in unread), len(per_buffer) - len(unread)),
            "buffers %s" % bad[:5] if bad else "")
    bad += unread
    mine = 0
    for x, (b, i) in zip(rows, index):
        if not x["header_type"].startswith("event_header") or b in bad:
            continue
        rec = ep[b][i]
        p = x["payload"]
        ours = p is not None and p["class"] == "manifest"
        if rec is None:
            if ours:
                t.diffs.append("%s %s +%d: etl-parser has no EventRecord here" % (tag, x["buffer"], x["offset"]))
            continue
        h, cls, got, user_data = rec
        where = "%s %s +%d %s %s v%s" % (tag, x["buffer"], x["offset"], x.get("provider_name") or x["provider"],
                                          x["event_id"], x["version"])
        if (guid_text(h.provider_id.inner), h.event_descriptor.Id, h.event_descriptor.Version,
                h.timestamp) != (x["provider"], x["event_id"], x["version"], x["raw_timestamp"]):
            t.diffs.append("%s: etl-parser's record is %s %s v%s" % (
                where, guid_text(h.provider_id.inner), h.event_descriptor.Id, h.event_descriptor.Version))
            continue
        if not ours:
            if cls is None or (p is not None and p["class"] == "TraceLogging"):
                continue
            if isinstance(got, Exception):
                t.add(t.ep_errors, "%s (an event etwdump does not decode)" % type(got).__name__)
                continue
            # A payload the schema does not fit exactly (short, or bytes after its last field:
            # etl-parser ignores those) etwdump gives raw, with why: none of its values can be
            # trusted when the schema lacks a field.
            problem = (p or {}).get("problem") or ""
            if p is not None and p["class"] == "raw" and problem.startswith(
                    "not decoded: the provider's schema (etl-parser's)"):
                t.add(t.left_out, next(r for k, r in RAW_REASONS if k in problem))
                continue
            why = left_out_reason(cls, x["header_type"] == "event_header64" and not h.flags.EVENT_HEADER_FLAG_32_BIT_HEADER)
            if why is None:
                t.diffs.append("%s: etl-parser decodes it, etwdump does not" % where)
            else:
                t.add(t.left_out, why)
            continue
        mine += 1
        if cls is None:
            t.diffs.append("%s: decoded by etwdump, etl-parser has no class" % where)
            continue
        if p["problem"]:
            t.with_problem += 1
        singles = {sc.name for sc in cls.pattern.subcons if sc.subcon.__class__.__name__ == "FormatField"
                   and getattr(sc.subcon, "fmtstr", "") == "<f"}
        fields = dict(p["fields"])
        groups = how_groups(p.get("how") or "")
        booleans, chars = set(groups.get(HOW_BOOLEAN, [])), set(groups.get(HOW_CHARS, []))
        if booleans or chars:
            # etl-parser reads these fields (and so every field after the first) otherwise: its
            # decoding is its known misreading from there; the fields before are compared with
            # it, and all of them with its class parsed with those types put right.
            names = [sc.name for sc in cls.pattern.subcons]
            first = min(names.index(n) for n in booleans | chars)
            t.misread_events += 1
            for n in names[first:]:
                why = ("Int8ul as 1 byte, a 4-byte win:Boolean" if n in booleans else
                       "Bytes(this.F) as bytes, UTF-16 characters" if n in chars else
                       "a field after them, shifted")
                t.add(t.misread_fields, why)
            try:
                right = reread(cls, user_data, booleans, chars)
            except Exception as e:  # noqa: BLE001
                t.diffs.append("%s: etl-parser's class with the reading put right fails: %s" % (where, e))
                continue
            t.events += 1
            for k, v in fields.items():
                theirs = ep_value(right[k]) if k in right else None
                if k in booleans:
                    ok = isinstance(v, bool) and theirs in (0, 1) and v == bool(theirs)
                elif k in chars:
                    text = bytes.fromhex(theirs or "").decode("utf-16-le", "replace")
                    ok = k in right and v == (text[:-1] if text.endswith("\0") else text)
                else:
                    ok = k in right and same(v, theirs, k in singles)
                t.fields += 1
                t.reread_fields += 1
                # The fields before the first one read otherwise: etl-parser's own decoding too.
                if names.index(k) < first and not isinstance(got, Exception) and k in got:
                    ok = ok and same(v, ep_value(got[k]), k in singles)
                if not ok:
                    t.diffs.append("%s %s: etwdump %r, etl-parser (reading put right) %r" % (where, k, v, theirs))
            continue
        if isinstance(got, Exception):
            kind = type(got).__name__
            if "__binLength" in str(got):
                kind += " (this.__binLength mangled)"
            t.add(t.ep_errors, kind)
            if p["problem"] and "__binLength" not in str(got):
                t.both_refuse += 1
            elif "__binLength" not in str(got):
                t.diffs.append("%s: etl-parser fails (%s: %s), etwdump decodes it with no problem"
                               % (where, kind, str(got).splitlines()[0] if str(got) else ""))
            continue
        t.events += 1
        for k, v in fields.items():
            if k not in got:
                t.diffs.append("%s %s: not in etl-parser's container" % (where, k))
                continue
            theirs = ep_value(got[k])
            t.fields += 1
            if not same(v, theirs, k in singles):
                t.diffs.append("%s %s: etwdump %r, etl-parser %r" % (where, k, v, theirs))
    c.note("%s: %d manifest payloads" % (tag, mine))


def run_dump(c, etwdump, dump, tag, t, extra=()):
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([etwdump, "extract", dump, "-o", out, *extra], capture_output=True, text=True)
        if not c.check(r.returncode == 0, "%s: etwdump extract" % tag, r.stderr[-300:] if r.returncode else ""):
            return
        with open(os.path.join(out, "manifest.json")) as f:
            man = json.load(f)
        for s in man["sessions"]:
            check_file(c, etwdump, os.path.join(out, s["file"]), "%s %s" % (tag, s["file"]), t)


def report(c, tag, t, want_events):
    detail = []
    if t.with_problem:
        detail.append("%d with a problem" % t.with_problem)
    if t.both_refuse:
        detail.append("%d of them refused by etl-parser too" % t.both_refuse)
    if t.ep_errors:
        detail.append("etl-parser errors: %s" % ", ".join("%s %d" % kv for kv in sorted(t.ep_errors.items())))
    c.check(not t.diffs and (t.events > 0 or not want_events),
            "%s: etl-parser agrees on %d fields of %d manifest events%s"
            % (tag, t.fields, t.events, " (%s)" % "; ".join(detail) if detail else ""),
            "; ".join(t.diffs[:4]) + (" (+%d more)" % (len(t.diffs) - 4) if len(t.diffs) > 4 else ""))
    if t.misread_events:
        c.note("%s: etl-parser's known misreading (Int8ul always 1 byte, Bytes(this.F) always bytes) "
               "in %d of them, where the payload's size says otherwise: %s; %d fields compared "
               "with its class parsed with the reading put right"
               % (tag, t.misread_events, ", ".join("%s %d" % kv for kv in sorted(t.misread_fields.items())),
                  t.reread_fields))
    if t.left_out:
        c.note("%s: events etl-parser decodes that etwdump gives raw or leaves out on purpose: %s"
               % (tag, ", ".join("%s %d" % kv for kv in sorted(t.left_out.items()))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="append", default=[])
    ap.add_argument("--triage")
    a = ap.parse_args()
    c = Checker()
    etwdump = os.environ["ETWDUMP"]
    for p in a.real:
        if not os.path.isfile(p):
            c.skip("%s is not present (it lives outside the repository)" % p)
            continue
        t = Tally()
        run_dump(c, etwdump, p, os.path.basename(p), t)
        report(c, os.path.basename(p), t, True)
    if a.triage:
        t = Tally()
        n = 0
        for sc in sorted(os.listdir(a.triage)):
            d = os.path.join(a.triage, sc)
            dump = os.path.join(d, sc + ".dmp")
            if not os.path.isfile(dump):
                continue
            isf = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json") and f != "expected.json"]
            extra = ["--isf", isf[0]] if isf else []
            if sc == "bad_truncated":
                extra.append("--allow-truncated")
            run_dump(c, etwdump, dump, sc, t, extra)
            n += 1
        report(c, "forge triage scenarios (%d)" % n, t, False)
    print("== manifest_check: %d checks, %d failed" % (c.count, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
