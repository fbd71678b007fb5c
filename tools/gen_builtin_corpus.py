#!/usr/bin/env python3
"""Generate etwdump's built-in corpus table (src/symbols/builtin/corpus.json.xz).

Reads two inputs:

1. the ntkrnlmp layout corpus (../shared/layouts/ntkrnlmp-layouts.json.xz: the ETW and kernel
   layouts, enums and global RVAs of 208 real x64 ntkrnlmp.pdb builds 7601 ... 22000, derived
   from the Volatility ISF files of JPCERTCC/Windows-Symbol-Tables, BSD-3-Clause); each build
   has its PDB GUID and age (exact matches) and RVAs;
2. the public layouts (tools/public_layouts/public-layouts.json, committed, made by
   tools/public_layouts/convert.py): the layouts of later builds from structure definitions
   others generated from the real PDBs and published, in the same format, but with no PDB
   identity and no RVAs ("guid"/"age" null, "symbols" empty):
     10.0.22621.382  Windows 11 22H2   novafacing/vergilius-rs 58f8e9aa (Apache-2.0), Vergilius
     10.0.22631.2428 Windows 11 23H2   the same
     10.0.26100.0    Windows 11 24H2   Rickebo/ntoskrnlib 0a72996e (no licence file; facts only),
                     line, revision    C# layouts from DbgHelp; field types partly from 22631;
                     unknown           _ETW_REG_ENTRY from nohuto/type-layouts 00e21f59 (25H2)
     10.0.26100.0    variant type-layouts-11-24H2: nohuto/type-layouts 00e21f59 11-24H2 (PDBRipper;
                     the provider structures with 16 sessions per provider); never chosen by
                     build number (corpus::nearest_earlier), named by corpus::variants
   tools/public_layouts/SOURCES.md names path, commit and licence per build and what was
   verified (the Vergilius conversion reproduces the corpus on 19041.1288 and 22000.194; its
   _KPRCB is cut short and left out). Such a build is never an exact match; etwdump uses it as
   the nearest earlier layout, and takes a structure it lacks from the newest earlier build
   that has it (corpus::borrowed).

and writes a compact, deterministic table of what etwdump reads:

* the layouts of the structures in ROOT_TYPES (= symbols::WANTED_TYPES) and of every structure
  or union they embed by value, deduplicated across builds. ETW types (FULL_PREFIXES) and the
  small helper types in FULL_TYPES keep every field; the big kernel types keep the fields listed
  in KEPT_FIELDS; any other embedded type keeps only its size (enough to size the field);
* per build: PDB GUID and age (null for a public layout, whose "source" names where its
  layouts come from and "release" the source's name for it), version, major build, the layout
  variant of each type (indexes
  into "types"), the RVAs of KEPT_SYMBOLS (in that order, null where the build lacks one), and
  its variant of each enum in KEPT_ENUMS (indexes into "enums");
* the enums KEPT_ENUMS, deduplicated.

The output depends only on the two inputs' bytes: JSON with sorted keys and fixed separators,
compressed with xz preset 9 (CRC64). Regenerate with

    python3 tools/gen_builtin_corpus.py [CORPUS] [--public PUBLIC_LAYOUTS] [-o OUTPUT]

Python 3 standard library only.
"""

import hashlib
import json
import lzma
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(REPO, "..", "shared", "layouts", "ntkrnlmp-layouts.json.xz")
DEFAULT_PUBLIC = os.path.join(REPO, "tools", "public_layouts", "public-layouts.json")
DEFAULT_OUTPUT = os.path.join(REPO, "src", "symbols", "builtin", "corpus.json.xz")
GENERATOR = "tools/gen_builtin_corpus.py"
FORMAT = "etwdump-builtin-corpus/2"
PUBLIC_FORMAT = "etwdump-public-layouts/1"

# The structures etwdump asks symbol files for: a copy of symbols::WANTED_TYPES (a test checks
# that the table's list equals it). Types the corpus lacks (_LDR_DATA_TABLE_ENTRY,
# _KDDEBUGGER_DATA64, _PERFINFO_CCSWAP_BUFFER) are simply absent from the table.
ROOT_TYPES = [
    "_WMI_LOGGER_CONTEXT",
    "_WMI_BUFFER_HEADER",
    "_ETW_SILODRIVERSTATE",
    "_ESERVERSILO_GLOBALS",
    "_ETW_SILO_TRACING_BLOCK",
    "_ETW_BUFFER_QUEUE",
    "_ETW_REALTIME_CONSUMER",
    "_KPRCB",
    "_KUSER_SHARED_DATA",
    "_KLDR_DATA_TABLE_ENTRY",
    "_LDR_DATA_TABLE_ENTRY",
    "_DBGKD_GET_VERSION64",
    "_KDDEBUGGER_DATA64",
    "_EPROCESS",
    "_KPROCESS",
    "_ETHREAD",
    "_KTHREAD",
    "_EX_FAST_REF",
    "_LIST_ENTRY",
    "_UNICODE_STRING",
    "_KSYSTEM_TIME",
    "_PERFINFO_CCSWAP_BUFFER",
    "_ETW_GUID_ENTRY",
    "_ETW_REG_ENTRY",
    "_ETW_HASH_BUCKET",
    "_TRACE_ENABLE_INFO",
    # Not in WANTED_TYPES, but read by etwdump (kernel::processes reads _CLIENT_ID.UniqueThread).
    "_CLIENT_ID",
]

# Types whose every field is kept: the ETW types ...
FULL_PREFIXES = ("_WMI_", "_ETW_", "_PERFINFO_")
# ... and the small types etwdump reads members of (or that an ETW type embeds and a reader
# may walk): lists, strings, fast references, times, GUIDs, the silo globals, the debugger
# version block.
FULL_TYPES = {
    "_LIST_ENTRY",
    "_SINGLE_LIST_ENTRY",
    "_SLIST_HEADER",
    "_SLIST_ENTRY",
    "_UNICODE_STRING",
    "_EX_FAST_REF",
    "_KSYSTEM_TIME",
    "_CLIENT_ID",
    "_LARGE_INTEGER",
    "_ULARGE_INTEGER",
    "_GUID",
    "_ESERVERSILO_GLOBALS",
    "_DBGKD_GET_VERSION64",
}

# The big kernel types: only the fields etwdump reads (grep src/ for the names given to
# View::ptr/uint/field/field_va/bytes and StructLayout::field), plus the embedded headers that
# lead to them (EPROCESS.Pcb, ETHREAD.Tcb).
KEPT_FIELDS = {
    # etw::buffers, etw::ccswap (EtwSupport); kernel::processes (CurrentThread);
    # etw::triage's crashing-CPU KPRCB copy (Number, MHz, StartCycles, CurrentThread).
    "_KPRCB": ["CurrentThread", "EtwSupport", "MHz", "Number", "StartCycles"],
    # kernel::processes
    "_EPROCESS": ["Pcb", "UniqueProcessId", "ActiveProcessLinks", "ImageFileName", "ThreadListHead", "Peb"],
    "_KPROCESS": ["DirectoryTableBase", "ThreadListHead"],
    "_ETHREAD": ["Tcb", "Cid", "ThreadListEntry"],
    "_KTHREAD": ["Process", "State", "WaitReason", "ThreadListEntry"],
    # kernel::kuser (fixed offsets there, checked against these)
    "_KUSER_SHARED_DATA": [
        "SystemTime",
        "NtBuildNumber",
        "NtProductType",
        "ProductTypeIsValid",
        "NtMajorVersion",
        "NtMinorVersion",
        "QpcFrequency",
    ],
    # kernel::modules (fixed offsets there, checked against these)
    "_KLDR_DATA_TABLE_ENTRY": ["InLoadOrderLinks", "DllBase", "SizeOfImage", "FullDllName", "BaseDllName"],
}

# Globals: symbols::WANTED_SYMBOLS, then the other globals src/ reads or names (EtwCPUSpeedInMHz,
# KeMaximumIncrement: extract/clock; the triage blob's header fields; the error-log window).
KEPT_SYMBOLS = [
    "EtwpHostSiloState",
    "PspHostSiloGlobals",
    "WmipLoggerContext",
    "EtwpDebuggerData",
    "KiProcessorBlock",
    "KeNumberProcessors",
    "PsActiveProcessHead",
    "PsLoadedModuleList",
    "KdDebuggerDataBlock",
    "KdVersionBlock",
    "MmPfnDatabase",
    "NtBuildLabEx",
    "KiCurrentEtwBufferBase",
    "KiCurrentEtwBufferOffset",
    "EtwpActiveSystemLoggers",
    "EtwpGroupMasks",
    "EtwpSystemLogger",
    "EtwCPUSpeedInMHz",
    "EtwpPerfFreq",
    "EtwPerfFreq",
    "EtwpBootTime",
    "EtwSecondaryDumpDataGuid",
    "KeMaximumIncrement",
    "NtBuildNumber",
    "NtBuildLab",
    "KiCurrentErrLogBufferBase",
    "KiCurrentErrLogBufferOffset",
    "IopErrorLogSession",
    # Providers and the tamper checks (issue 17): the GUID table of 6.1-6.3, the kernel's
    # global provider registration handles and the clock routines GetCpuClock may point at.
    "EtwpGuidHashTable",
    "EtwThreatIntProvRegHandle",
    "EtwKernelProvRegHandle",
    "EtwpPsProvRegHandle",
    "EtwpFileProvRegHandle",
    "EtwpDiskProvRegHandle",
    "EtwpNetProvRegHandle",
    "EtwpMemoryProvRegHandle",
    "EtwpEventTracingProvRegHandle",
    "EtwApiCallsProvRegHandle",
    "EtwAppCompatProvRegHandle",
    "EtwCVEAuditProvRegHandle",
    "EtwSecurityMitigationsRegHandle",
    "EtwLpacProvRegHandle",
    "EtwAdminlessProvRegHandle",
    "EtwCpuStarvationProvRegHandle",
    "EtwPsProvRegHandle",
    "EtwFileProvRegHandle",
    "EtwDiskProvRegHandle",
    "EtwNetProvRegHandle",
    "EtwMemoryProvRegHandle",
    "EtwEventTracingProvRegHandle",
    "EtwpGetPerfCounter",
    "EtwpGetHostPerfCounter",
    "EtwpGetSystemTime",
    "EtwpGetCycleCount",
    "KeQueryPerformanceCounter",
]

# symbols::WANTED_ENUMS
KEPT_ENUMS = ["_KWAIT_REASON", "_KTHREAD_STATE", "_ETW_BUFFER_STATE"]

# The x64 base types of volatility3's pdbconv ISFs (name: [size, signed]); the corpus refers to
# them by name only.
BASE_TYPES = {
    "char": [1, True],
    "double": [8, True],
    "float": [4, True],
    "int": [4, True],
    "long": [4, True],
    "long long": [8, True],
    "short": [2, True],
    "unsigned char": [1, False],
    "unsigned int": [4, False],
    "unsigned long": [4, False],
    "unsigned long long": [8, False],
    "unsigned short": [2, False],
    "void": [0, True],
    "wchar": [2, True],
}


class CorpusError(Exception):
    pass


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def typeref(t, enums):
    """An ISF type as the table's compact string: b:NAME, *T, [N]T, s:NAME, u:NAME, eSIZE:NAME,
    bfPOS:LEN:T, f, v."""
    k = t.get("kind")
    if k == "base":
        name = t["name"]
        if name not in BASE_TYPES:
            raise CorpusError("unknown base type %r" % name)
        return "v" if name == "void" else "b:" + name
    if k == "pointer":
        return "*" + typeref(t["subtype"], enums)
    if k == "array":
        return "[%d]" % t["count"] + typeref(t["subtype"], enums)
    if k in ("struct", "class"):
        return "s:" + t["name"]
    if k == "union":
        return "u:" + t["name"]
    if k == "enum":
        e = enums.get(t["name"])
        return "e%d:%s" % (e["size"] if e else 4, t["name"])
    if k == "bitfield":
        return "bf%d:%d:" % (t["bit_position"], t["bit_length"]) + typeref(t["type"], enums)
    if k == "function":
        return "f"
    raise CorpusError("unknown type kind %r" % k)


def embedded(t):
    """Names of the structures/unions a field type holds by value (through arrays)."""
    k = t.get("kind")
    if k in ("struct", "class", "union"):
        return [t["name"]]
    if k == "array":
        return embedded(t["subtype"])
    return []


def kept_fields(name, ut):
    if name in KEPT_FIELDS:
        return [f for f in KEPT_FIELDS[name] if f in ut.get("fields", {})]
    if name.startswith(FULL_PREFIXES) or name in FULL_TYPES:
        return sorted(ut.get("fields", {}))
    return None  # size only


def main(argv):
    args = list(argv)
    out = DEFAULT_OUTPUT
    if "-o" in args:
        i = args.index("-o")
        out = args[i + 1]
        del args[i : i + 2]
    public = DEFAULT_PUBLIC
    if "--public" in args:
        i = args.index("--public")
        public = args[i + 1]
        del args[i : i + 2]
    corpus = args[0] if args else DEFAULT_CORPUS
    raw = open(corpus, "rb").read()
    sha = hashlib.sha256(raw).hexdigest()
    d = json.loads(lzma.decompress(raw))
    praw = open(public, "rb").read()
    psha = hashlib.sha256(praw).hexdigest()
    p = json.loads(praw)
    if p.get("format") != PUBLIC_FORMAT:
        raise CorpusError("%s: format %r, expected %r" % (public, p.get("format"), PUBLIC_FORMAT))
    pdb_versions = {b["version"] for b in d["builds"]}

    types = {}  # canonical key -> entry
    enum_entries = {}
    builds = []
    missing = set()
    # The corpus builds (PDB identity, RVAs), then the public layouts (no identity, no RVAs):
    # each input's builds with its own "types" and "enums" tables.
    inputs = [(b, d, None) for b in d["builds"]]
    for b in p["builds"]:
        if b["version"] in pdb_versions:
            raise CorpusError("public layout %s is also a corpus build" % b["version"])
        if b.get("guid") is not None or b.get("symbols"):
            raise CorpusError("public layout %s: no PDB identity or RVAs expected" % b["version"])
        inputs.append((b, p, b["source"]))
    for b, src, public_source in inputs:
        ver = b["version"]
        parts = version_key(ver)
        if len(parts) != 4:
            raise CorpusError("bad version %r" % ver)
        benums = {n: src["enums"][h] for n, h in b["enums"].items()}
        btypes = {}
        queue = [t for t in ROOT_TYPES if t in b["types"]]
        seen = set()
        while queue:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.add(name)
            h = b["types"].get(name)
            if h is None:
                missing.add(name)
                continue
            ut = src["types"][h]
            kind = ut["kind"]
            if kind not in ("struct", "union", "class"):
                raise CorpusError("%s: kind %r" % (name, kind))
            keep = kept_fields(name, ut)
            fields = None
            if keep is not None:
                fields = []
                for fname in keep:
                    f = ut["fields"][fname]
                    fields.append([fname, f["offset"], typeref(f["type"], benums)])
                    queue.extend(embedded(f["type"]))
                fields.sort(key=lambda x: (x[1], x[0]))
            entry = [name, "u" if kind == "union" else "s", ut["size"], fields]
            key = json.dumps(entry, sort_keys=True)
            types[key] = entry
            btypes[name] = key
        bens = {}
        for en in KEPT_ENUMS:
            e = benums.get(en)
            if e is None:
                continue
            consts = sorted(([c, v] for c, v in e["constants"].items()), key=lambda x: (x[1], x[0]))
            entry = [en, e["size"], consts]
            key = json.dumps(entry, sort_keys=True)
            enum_entries[key] = entry
            bens[en] = key
        # One entry per KEPT_SYMBOLS name, null where the build lacks the global.
        syms = []
        for s in KEPT_SYMBOLS:
            v = b["symbols"].get(s)
            syms.append(None if v is None else int(v, 16) if isinstance(v, str) else int(v))
        if public_source is None:
            guid = b["guid"].upper()
            if len(guid) != 32 or any(c not in "0123456789ABCDEF" for c in guid):
                raise CorpusError("bad GUID %r" % b["guid"])
            age = int(b["age"])
        else:
            guid, age = None, None
        builds.append(
            {
                "guid": guid,
                "age": age,
                "version": ver,
                "major": parts[2],
                # None: a corpus build (ntkrnlmp.pdb ISF); else the public source's name.
                "source": public_source,
                # The public source's name for the release (None for a corpus build).
                "release": b.get("release") if public_source else None,
                # None: the build's (first) layout; else the label of a second layout of the
                # same build from another source (never chosen by build number alone).
                "variant": b.get("variant") if public_source else None,
                "types": btypes,
                "enums": bens,
                "symbols": syms,
            }
        )

    type_keys = sorted(types, key=lambda k: (types[k][0], k))
    type_index = {k: i for i, k in enumerate(type_keys)}
    enum_keys = sorted(enum_entries, key=lambda k: (enum_entries[k][0], k))
    enum_index = {k: i for i, k in enumerate(enum_keys)}
    builds.sort(key=lambda b: (version_key(b["version"]), b["guid"] or "", b["age"] or 0, b["variant"] or ""))
    for b in builds:
        b["types"] = sorted(type_index[k] for k in b["types"].values())
        b["enums"] = sorted(enum_index[k] for k in b["enums"].values())

    table = {
        "format": FORMAT,
        "generator": GENERATOR,
        "corpus": {
            "file": os.path.basename(corpus),
            "sha256": sha,
            "source": d.get("source", ""),
        },
        "public": {
            "file": os.path.relpath(os.path.abspath(public), REPO),
            "sha256": psha,
            "source": p.get("source", ""),
            "sources": p.get("sources", []),
        },
        "build_count": len(builds),
        "majors": sorted({b["major"] for b in builds}),
        "pointer_size": 8,
        "root_types": ROOT_TYPES,
        "kept_fields": KEPT_FIELDS,
        "full_prefixes": list(FULL_PREFIXES),
        "full_types": sorted(FULL_TYPES),
        "kept_symbols": KEPT_SYMBOLS,
        "kept_enums": KEPT_ENUMS,
        "base_types": BASE_TYPES,
        "types": [types[k] for k in type_keys],
        "enums": [enum_entries[k] for k in enum_keys],
        "builds": builds,
    }
    text = json.dumps(table, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    if out.endswith(".xz"):
        data = lzma.compress(text, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME)
    else:
        data = text
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    print(
        "%s: %d bytes (%d bytes of JSON), %d builds (%d public layouts), %d layouts, %d enums; "
        "corpus sha256 %s, public layouts sha256 %s"
        % (out, len(data), len(text), len(builds), len(p["builds"]), len(type_keys), len(enum_keys), sha, psha),
        file=sys.stderr,
    )
    if missing:
        print("embedded types the corpus lacks (kept as names only): %s" % ", ".join(sorted(missing)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (CorpusError, KeyError, ValueError, OSError, lzma.LZMAError) as e:
        print("gen_builtin_corpus: %s" % e, file=sys.stderr)
        sys.exit(1)
