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

    python3 tools/manifest_schemas/audit.py --etl-parser ETL_PARSER_DIR --manifests XML_DIR
"""

import argparse
import ast
import collections
import glob
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


if __name__ == "__main__":
    main()
