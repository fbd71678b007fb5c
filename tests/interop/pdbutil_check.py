#!/usr/bin/env python3
"""llvm-pdbutil against etwdump: for each fixture PDB, the size of every structure the tool
reads and the offset of each of its members, as `llvm-pdbutil dump -types` prints them, must
equal what `etwdump symbols --pdb` reports.

  pdbutil_check.py ETWDUMP FIXTURES_DIR
"""
import json
import os
import re
import subprocess
import sys

TYPES = ["_WMI_LOGGER_CONTEXT", "_WMI_BUFFER_HEADER", "_ETW_SILODRIVERSTATE", "_ESERVERSILO_GLOBALS",
         "_KPRCB", "_KUSER_SHARED_DATA", "_KLDR_DATA_TABLE_ENTRY", "_DBGKD_GET_VERSION64",
         "_LIST_ENTRY", "_UNICODE_STRING", "_EX_FAST_REF"]

REC = re.compile(r"^\s*0x([0-9A-F]+) \| (LF_\w+) \[size = \d+\](?: `(.*)`)?")
MEMBER = re.compile(r"- LF_MEMBER \[name = `(.*)`, Type = 0x[0-9A-F]+ \(.*\), offset = (\d+), attrs")
FIELDS = re.compile(r"field list: (0x[0-9A-F]+|<no type>)")
OPTS = re.compile(r"options: (.*), sizeof (\d+)")
INDEX = re.compile(r"- LF_INDEX \[continuation = (0x[0-9A-F]+)\]")


def pdbutil_types(pdb):
    out = subprocess.run(["llvm-pdbutil", "dump", "-types", pdb], capture_output=True, text=True, check=True).stdout
    fieldlists, structs = {}, {}
    cur = None
    for line in out.splitlines():
        m = REC.match(line)
        if m:
            cur = {"index": int(m.group(1), 16), "kind": m.group(2), "name": m.group(3),
                   "members": [], "fields": None, "opts": "", "size": None, "cont": None}
            if cur["kind"] == "LF_FIELDLIST":
                fieldlists[cur["index"]] = cur
            elif cur["kind"] in ("LF_STRUCTURE", "LF_UNION", "LF_CLASS"):
                structs.setdefault(cur["name"], []).append(cur)
            continue
        if cur is None:
            continue
        if (m := MEMBER.search(line)):
            cur["members"].append((m.group(1), int(m.group(2))))
        elif (m := INDEX.search(line)):
            cur["cont"] = int(m.group(1), 16)
        elif (m := FIELDS.search(line)):
            cur["fields"] = None if m.group(1) == "<no type>" else int(m.group(1), 16)
        if (m := OPTS.search(line)):
            cur["opts"], cur["size"] = m.group(1), int(m.group(2))
    result = {}
    for name, recs in structs.items():
        defs = [r for r in recs if "forward ref" not in r["opts"] and r["fields"] is not None]
        if not defs:
            continue
        d = defs[0]
        members, fl, seen = {}, d["fields"], set()
        while fl is not None and fl in fieldlists and fl not in seen:
            seen.add(fl)
            for n, o in fieldlists[fl]["members"]:
                members.setdefault(n, o)
            fl = fieldlists[fl]["cont"]
        result[name] = (d["size"], members)
    return result


def main():
    etwdump, fixtures = sys.argv[1], sys.argv[2]
    checks = failures = 0
    for name in sorted(os.listdir(fixtures)):
        meta_path = os.path.join(fixtures, name, "symbols.json")
        if not os.path.isfile(meta_path):
            continue
        with open(meta_path) as f:
            meta = json.load(f)
        pdb = os.path.join(fixtures, name, meta["pdb"]["name"])
        ref = pdbutil_types(pdb)
        want = [t for t in TYPES if t in ref]
        out = subprocess.run([etwdump, "symbols", "--pdb", pdb, "--types", ",".join(want), "--format", "json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"FAIL {name}: etwdump symbols: {out.stderr.strip()}")
            failures += 1
            continue
        mine = json.loads(out.stdout)["types"]
        for t in want:
            size, members = ref[t]
            checks += 1
            if t not in mine:
                print(f"FAIL {name}: {t}: llvm-pdbutil has it, etwdump does not")
                failures += 1
                continue
            if mine[t]["size"] != size:
                print(f"FAIL {name}: sizeof {t}: llvm-pdbutil {size:#x}, etwdump {mine[t]['size']:#x}")
                failures += 1
            for m, off in members.items():
                checks += 1
                got = mine[t]["fields"].get(m, {}).get("offset")
                if got != off:
                    print(f"FAIL {name}: {t}.{m}: llvm-pdbutil {off:#x}, etwdump {got}")
                    failures += 1
        print(f"ok   {name}: {len(want)} types, sizes and member offsets agree with llvm-pdbutil")
    print(f"pdbutil_check: {checks} checks, {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
