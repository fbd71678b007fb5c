#!/usr/bin/env python3
"""Measure etl-parser's schemas (and the generated table) against instrumentation manifests.

Reads etl-parser the way generate.py does (its functions are imported from next to this file)
and a directory of manifest XML files (`<instrumentationManifest>`, one or more providers
each; e.g. dissect.etl 3.14's `dissect/etl/manifests/xml/`, AGPL-3.0, installed from PyPI into
tests/interop/.venv by tests/interop/run.sh). Prints counts only: nothing of the manifests
goes into the table, which generate.py builds from etl-parser alone.

For every (provider GUID, event id, version) both hold, field by field in order:

* what the manifests say of etl-parser's ambiguous types (`Int8ul`, `Bytes(this.F)`,
  `Int64ul`), which is what generate.py's rules rest on;
* for the events the table keeps: the same field names in the same order with no `count=`
  array (the layout the decoder reads), an array read as one value, fields left out at the end,
  or names that differ before the end (a field left out or renamed in between).

With `--events FILE...` (the output of `etwdump events DUMP --format json`), also: for every
`manifest` payload decoded by the one reading of its ambiguous types that fits it (its `how`
field says which), whether each ambiguous field's reading is the manifest's inType
(win:Boolean / win:UInt8 for `Int8ul`; win:UnicodeString / win:Binary, win:AnsiString,
win:SID for `Bytes(this.F)`), and whether the manifest's field names are etl-parser's (a field
etl-parser lacks shifts the fields after it, whatever the reading); and, for the payloads given
raw because no reading or several fit, what the manifest says.

    python3 tools/manifest_schemas/audit.py --etl-parser ETL_PARSER_DIR --manifests XML_DIR \
        [--events EVENTS_JSON ...]
"""

import argparse
import ast
import collections
import glob
import json
import os
import re
import sys
import uuid
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402

NS = "{http://schemas.microsoft.com/win/2004/08/events}"


def read_manifests(d):
    """{(guid, id, version): [data attributes]} of every event with a template; bad files."""
    out, bad = {}, []
    for path in sorted(glob.glob(os.path.join(d, "*.xml"))):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            bad.append("%s: %s" % (os.path.basename(path), e))
            continue
        for prov in root.iter(NS + "provider"):
            g = uuid.UUID(prov.attrib["guid"].strip("{}"))
            templates = {t.attrib["tid"]: [dict(x.attrib, tag=x.tag.replace(NS, "")) for x in t]
                         for t in prov.iter(NS + "template")}
            for ev in prov.iter(NS + "event"):
                tid = ev.attrib.get("template")
                if tid in templates:
                    key = (g, int(ev.attrib["value"], 0), int(ev.attrib.get("version", "0"), 0))
                    out[key] = templates[tid]
    return out, bad


def etl_parser_types(root):
    """{(guid, id, version): [(field name, construct type text)]} of every class."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "etl", "parsers", "etw", "*.py"))):
        if os.path.basename(path) in ("__init__.py", "core.py"):
            continue
        tree = ast.parse(generate.read_text(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                key = generate.declared_key(node)
                if key:
                    fields = generate.pattern_fields(node) or []
                    out[(uuid.UUID(key[0]), key[1], key[2])] = [(n, ast.unparse(t)) for n, t in fields]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--etl-parser", required=True, metavar="DIR")
    ap.add_argument("--manifests", required=True, metavar="DIR")
    ap.add_argument("--events", nargs="*", metavar="JSON",
                    help="`etwdump events DUMP --format json` outputs whose accepted readings to check")
    a = ap.parse_args()
    man, bad = read_manifests(a.manifests)
    types = etl_parser_types(a.etl_parser)
    _providers, kept, _v = generate.read_etl_parser(a.etl_parser, generate.Stats())
    both = [k for k in types if k in man]
    print("manifest events with a template: %d (unreadable files: %d)" % (len(man), len(bad)))
    print("etl-parser classes: %d, also in the manifests: %d" % (len(types), len(both)))

    # What the manifests say of etl-parser's ambiguous types (same field name at the same place).
    amb = collections.defaultdict(collections.Counter)
    for k in both:
        for i, (name, t) in enumerate(types[k]):
            if i >= len(man[k]) or man[k][i].get("name") != name:
                break
            d = man[k][i]
            it = d.get("inType", "?") + (" count=" if "count" in d else "") + (" length=" if "length" in d else "")
            if t == "Int8ul":
                amb["Int8ul"][it] += 1
            elif t == "Int64ul":
                amb["Int64ul"][it] += 1
            elif re.fullmatch(r"Bytes\(lambda this: this\.__binLength\)", t):
                amb["Bytes(this.__binLength)"][it] += 1
            elif re.fullmatch(r"Bytes\(lambda this: this\.\w+\)", t):
                amb["Bytes(this.F), F other than __binLength"][it] += 1
            elif re.fullmatch(r"Bytes\(lambda this: 2 \* this\.\w+\)", t):
                amb["Bytes(2 * this.F)"][it] += 1
    for t in sorted(amb):
        print("etl-parser %s is, in the manifests: %s" % (t, ", ".join(
            "%s %d" % kv for kv in amb[t].most_common())))

    # The kept events' layouts.
    verdict = collections.Counter()
    for k, fields in kept.items():
        if k not in man:
            verdict["no manifest"] += 1
            continue
        ours = [n for n, _t in fields]
        theirs = [d.get("name") for d in man[k]]
        if ours == theirs:
            arrays = any("count" in d for d in man[k])
            verdict["an array read as one value" if arrays else "same layout"] += 1
        elif theirs[:len(ours)] == ours:
            verdict["fields left out at the end"] += 1
        else:
            verdict["names differ before the end"] += 1
    print("kept events: %d; %s" % (len(kept), ", ".join("%s %d" % kv for kv in verdict.most_common())))
    for path in a.events or []:
        audit_readings(path, man, types)


# The groups of a `how` text: "<what>: A, B; <what>: C; the only one of ...".
HOW_GROUPS = {
    "Int8ul read as win:Boolean (4 bytes)": "win:Boolean",
    "Int8ul read as win:UInt8 (1 byte)": "win:UInt8",
    "Bytes(this.F) read as UTF-16 characters (2 bytes each)": "chars",
    "Bytes(this.F) read as bytes": "bytes",
    "Bytes(this.F) empty (F is 0: bytes or characters alike)": "empty",
}


def manifest_reading(in_type):
    """What a manifest's inType says of an ambiguous field's reading."""
    return {"win:Boolean": "win:Boolean", "win:UInt8": "win:UInt8",
            "win:UnicodeString": "chars", "win:Binary": "bytes", "win:AnsiString": "bytes",
            "win:SID": "bytes"}.get(in_type, in_type)


def audit_readings(path, man, types):
    """The accepted readings of one `etwdump events --format json` output against `man`."""
    rows = json.load(open(path, encoding="utf-8"))["records"]
    c = collections.Counter()
    wrong, layouts, raws = [], collections.Counter(), collections.Counter()
    for r in rows:
        p = r.get("payload") or {}
        if not r.get("provider") or r.get("event_id") is None or r.get("version") is None:
            continue
        key = (uuid.UUID(r["provider"].strip("{}")), r["event_id"], r["version"])
        name = "%s %d v%d" % ((r.get("provider_name") or r["provider"]).replace("Microsoft-Windows-", ""),
                              key[1], key[2])
        if p.get("class") == "raw" and ("readings of its ambiguous" in (p.get("problem") or "")):
            if key in man:
                amb = [(n, d.get("inType")) for n, t in types.get(key, [])
                       for d in man[key] if d.get("name") == n
                       and (t == "Int8ul" or (t.startswith("Bytes(lambda this: this.") and "__binLength" not in t))]
                raws["%s: %s" % (name, ", ".join("%s %s" % x for x in amb))] += 1
            else:
                raws["%s: no manifest" % name] += 1
            continue
        if p.get("class") != "manifest" or not p.get("how"):
            continue
        c["events"] += 1
        if key not in man:
            c["events without a manifest"] += 1
            continue
        c["events with a manifest"] += 1
        theirs = {d.get("name"): d for d in man[key]}
        ours = [n for n, _t in types.get(key, [])]
        if ours != [d.get("name") for d in man[key]]:
            layouts[name] += 1
        for part in p["how"].split("; "):
            what, _, names = part.partition(": ")
            if what not in HOW_GROUPS:
                continue
            for f in names.split(", "):
                c["fields"] += 1
                got = HOW_GROUPS[what]
                d = theirs.get(f)
                if d is None:
                    c["fields the manifest lacks"] += 1
                    continue
                want = manifest_reading(d.get("inType"))
                if got == "empty" or got == want:
                    c["fields read as the manifest says"] += 1
                else:
                    c["fields read otherwise"] += 1
                    wrong.append("%s %s: read %s, manifest %s" % (name, f, got, d.get("inType")))
    print("%s: payloads decoded by the one reading that fits: %s" % (
        path, ", ".join("%s %d" % kv for kv in c.items())))
    for w in wrong:
        print("  READ OTHERWISE: %s" % w)
    for n, k in sorted(layouts.items()):
        print("  manifest field names differ from etl-parser's: %s (%d payloads)" % (n, k))
    for n, k in sorted(raws.items()):
        print("  given raw (no reading or several fit, or values not of the type): %s (%d)" % (n, k))


if __name__ == "__main__":
    main()
