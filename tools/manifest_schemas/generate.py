#!/usr/bin/env python3
"""Generate etwdump's manifest-based event schema table (src/decode/manifest_schemas.*).

Reads airbus-cert/etl-parser 1.0.1 (Apache-2.0) from a local copy (this script downloads
nothing): every etl/parsers/etw/*.py module holds one manifest-based provider (its docstring
names it, `GUID : ...`) and one class per (provider GUID, event id, version), declared with
`@declare(guid=guid("..."), event_id=N, version=V)`, whose `pattern = Struct("Name" / Type,
...)` is the event's user data, field by field. The modules are read with Python's `ast`
(nothing is imported or executed; construct is not needed).

Writes two files:

* src/decode/manifest_schemas.bin: the table, one block of text per provider (format below),
  each compressed on its own as a .lzma (LZMA_Alone: 13-byte header, end marker) stream, the
  blocks one after the other: etwdump decompresses only the blocks of the providers a dump has
  events of;
* src/decode/manifest_schemas.rs: the Rust module that embeds it (include_bytes!) and indexes
  it (provider GUID -> block), with the sources, the licence, the counts and the SHA-256 of
  the text in its header.

What etl-parser's types say is kept as it is; where one of its types stands for two wire
formats, the table says so with an ambiguous type and the decoder takes the reading the
payload fits (established against real events: tools/manifest_schemas/README.md):

* `Int8ul` is both win:UInt8 (1 byte) and win:Boolean (a 4-byte BOOL on the wire): `u8|bool`;
  an `Int8ul` that a later field's length names is an integer, a win:UInt8 (a Boolean is no
  length): `u8`;
* `Bytes(lambda this: this.F)` is both a byte count (win:Binary, win:AnsiString, win:SID with
  `length=`) and a count of UTF-16 characters (win:UnicodeString with `length=`, 2 bytes each):
  `bytes|wchars(F)`, except when F is `__binLength`, the length field of the template the
  Event Log gives classic event sources (`paramN` strings, `__binLength`, binary data), whose
  data is always win:Binary: `bytes(F)`;
* `Int64ul` is also win:Pointer, 4 bytes in a 32-bit event: kept (8 bytes in a 64-bit event),
  and etwdump does not decode an event with a `u64` field from a 32-bit record (the decoder's
  rule, not the generator's);
* any other type expression, a length that names no earlier integer field, two fields with one
  name: left out.

Every left-out event is counted by reason, every kept event with an ambiguous type by the
first such type, and both are printed per provider with -v.

A provider's block (UTF-8 text, `\n` line ends, fields separated by one space):

    F <name>:<type> <name>:<type> ...     a field list; numbered from 0 in the block
    E <event id> <version> <field list number>    an event

Types: i8 u8 u16 i16 u32 i32 u64 i64 (little-endian integers), f32 f64, wstr (NUL-terminated
UTF-16LE), cstr (NUL-terminated 8-bit), guid, systime (SYSTEMTIME, 16 bytes), sid (binary SID),
bytes(N) (N bytes), bytes(F) / bytes(2*F) (as many bytes as the earlier integer field F says,
or twice as many); ambiguous: u8|bool (1 byte, or a 4-byte Boolean), bytes|wchars(F) (F bytes,
or F UTF-16 characters: 2*F bytes). Blocks are in the order of the provider GUIDs' bytes in memory (the index
is binary-searched), events by id then version (strictly increasing); a field list is written
before its first event and once per block. `--text FILE` writes all blocks as one readable
file, each after a `P <guid> <provider name>` line.

    python3 tools/manifest_schemas/generate.py --etl-parser ETL_PARSER_DIR [-o DIR] [--text FILE] [-v]

Python 3 standard library only.
"""

import argparse
import ast
import collections
import glob
import hashlib
import lzma
import os
import re
import sys
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUTPUT = os.path.join(REPO, "src", "decode")
GENERATOR = "tools/manifest_schemas/generate.py"
COMMAND = "python3 tools/manifest_schemas/generate.py --etl-parser ETL_PARSER_DIR"
BLOB_NAME = "manifest_schemas.bin"
# The LZMA dictionary (the decoder allocates the size the header declares); the largest block
# is below it.
DICT_SIZE = 1 << 16
RUST_NAME = "manifest_schemas.rs"

ETL_PARSER_URL = "https://github.com/airbus-cert/etl-parser"
ETL_PARSER_VERSION = "1.0.1"
ETL_PARSER_COMMIT = "76b7c046866ce0469cd129ee3f7bb3799b34e271"  # tag v1.0.1

# Where each type name must be imported from (the modules' own import lines are checked, so a
# module that imported e.g. another `Guid` would be noticed).
SCALARS = {
    ("construct", "Int8sl"): "i8",
    ("construct", "Int16ul"): "u16",
    ("construct", "Int16sl"): "i16",
    ("construct", "Int32ul"): "u32",
    ("construct", "Int32sl"): "i32",
    ("construct", "Int64ul"): "u64",
    ("construct", "Int64sl"): "i64",
    ("construct", "Float32l"): "f32",
    ("construct", "Double"): "f64",
    ("etl.utils", "WString"): "wstr",
    ("etl.utils", "CString"): "cstr",
    ("etl.utils", "Guid"): "guid",
    ("etl.utils", "SystemTime"): "systime",
    ("etl.dtyp", "Sid"): "sid",
}
INTEGERS = {"i8", "u8", "u16", "i16", "u32", "i32", "u64", "i64"}
# etl-parser's ambiguous types, as the table writes them.
U8_OR_BOOL = "u8|bool"
BYTES_OR_WCHARS = "bytes|wchars(%s)"
# The length field of the Event Log's template for classic event sources.
BIN_LENGTH = "__binLength"

# Providers issue 29 names; the generator prints what the table holds for each.
NAMED = [
    "Microsoft-Windows-Kernel-Process",
    "Microsoft-Windows-Kernel-File",
    "Microsoft-Windows-Kernel-Network",
    "Microsoft-Windows-Kernel-Registry",
    "Microsoft-Windows-Threat-Intelligence",
    "Microsoft-Windows-Security-Auditing",
    "Microsoft-Windows-PowerShell",
    "Microsoft-Windows-Windows Defender",
    "Microsoft-Windows-DNS-Client",
    "Microsoft-Windows-WMI-Activity",
    "Microsoft-Windows-TaskScheduler",
    "Service Control Manager",
    "Microsoft-Windows-Eventlog",
    "Microsoft-Antimalware-Scan-Interface",
    "Microsoft-Windows-Sysmon",
]

NAME_RE = re.compile(r"\A[A-Za-z0-9_]+\Z")
PROVIDER_NAME_RE = re.compile(r"\A[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?\Z")

# Why an event is left out.
R_REF = "a length naming no earlier integer field"
R_TYPE = "a type expression the generator does not know"
R_DUPNAME = "two fields with one name"
REASONS = [R_REF, R_TYPE, R_DUPNAME]
# Kept with an ambiguous type (counted under the first one).
A_INT8UL = "Int8ul (u8|bool: win:UInt8, 1 byte, or win:Boolean, 4 bytes)"
A_LENGTH = "Bytes(lambda this: this.F) (bytes|wchars(F): a byte count, or UTF-16 characters)"
AMBIGUITIES = [A_INT8UL, A_LENGTH]


def fail(msg):
    sys.stderr.write("generate.py: error: %s\n" % msg)
    sys.exit(1)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8-sig").replace("\r\n", "\n")


def imports(tree):
    """name -> module for the module's `from X import a, b` lines."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                out[a.asname or a.name] = node.module
    return out


def lambda_length(node):
    """`lambda this: this.F` -> ("F", 1); `lambda this: 2 * this.F` -> ("F", 2); else None."""
    if not (isinstance(node, ast.Lambda) and len(node.args.args) == 1
            and not node.args.defaults and not node.args.vararg and not node.args.kwarg):
        return None
    this = node.args.args[0].arg
    body = node.body

    def attr(n):
        if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == this):
            return n.attr
        return None

    if attr(body):
        return attr(body), 1
    if (isinstance(body, ast.BinOp) and isinstance(body.op, ast.Mult)
            and isinstance(body.left, ast.Constant) and type(body.left.value) is int
            and body.left.value == 2 and attr(body.right)):
        return attr(body.right), 2
    return None


def field_type(node, names, earlier):
    """(type text, None) or (None, reason) for one construct type expression."""
    if isinstance(node, ast.Name):
        if node.id == "Int8ul" and names.get("Int8ul") == "construct":
            return U8_OR_BOOL, None
        t = SCALARS.get((names.get(node.id), node.id))
        return (t, None) if t else (None, R_TYPE)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Bytes"
            and names.get("Bytes") == "construct" and len(node.args) == 1 and not node.keywords):
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value < 1 << 16:
            return "bytes(%d)" % arg.value, None
        ref = lambda_length(arg)
        if ref is None:
            return None, R_TYPE
        name, factor = ref
        # An `Int8ul` named as a length is an integer (the caller makes it `u8`).
        if earlier.get(name) not in INTEGERS | {U8_OR_BOOL}:
            return None, R_REF
        if factor == 1 and name != BIN_LENGTH:
            return BYTES_OR_WCHARS % name, None
        return ("bytes(%s)" % name) if factor == 1 else ("bytes(2*%s)" % name), None
    return None, R_TYPE


def declared_key(cls):
    """(guid text, event id, version) of a class's @declare decorator, or None."""
    for dec in cls.decorator_list:
        if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name)
                and dec.func.id == "declare"):
            continue
        kw = {k.arg: k.value for k in dec.keywords}
        g, e, v = kw.get("guid"), kw.get("event_id"), kw.get("version")
        if not (isinstance(g, ast.Call) and isinstance(g.func, ast.Name) and g.func.id == "guid"
                and len(g.args) == 1 and isinstance(g.args[0], ast.Constant)):
            fail("%s: @declare guid is not guid(\"...\")" % cls.name)
        for x in (e, v):
            if not (isinstance(x, ast.Constant) and type(x.value) is int):
                fail("%s: @declare event_id/version are not integers" % cls.name)
        return g.args[0].value, e.value, v.value
    return None


def pattern_fields(cls):
    """The `"Name" / Type` pairs of `pattern = Struct(...)`, or None if there is none."""
    for st in cls.body:
        if (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and st.targets[0].id == "pattern"):
            call = st.value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id == "Struct" and not call.keywords):
                fail("%s: pattern is not Struct(...)" % cls.name)
            out = []
            for a in call.args:
                if not (isinstance(a, ast.BinOp) and isinstance(a.op, ast.Div)
                        and isinstance(a.left, ast.Constant) and isinstance(a.left.value, str)):
                    fail("%s: a Struct member is not \"Name\" / Type" % cls.name)
                out.append((a.left.value, a.right))
            return out
    return None


class Stats:
    def __init__(self):
        self.modules = 0
        self.declared = 0
        self.kept = 0
        self.left_out = collections.Counter()       # reason -> events
        self.ambiguous = collections.Counter()      # first ambiguous type -> kept events
        self.ambiguous_fields = collections.Counter()  # ambiguous fields per kept event -> events
        self.u8_lengths = 0                         # Int8ul fields named as a length: u8
        self.by_provider_ambiguous = collections.defaultdict(collections.Counter)
        self.by_provider = collections.defaultdict(lambda: [0, collections.Counter()])
        self.types = collections.Counter()          # type text (kept events) -> fields


def read_etl_parser(root, stats):
    """{guid uuid: name}, {(guid uuid, id, version): [(name, type)]} of the kept events."""
    version = None
    setup = os.path.join(root, "setup.py")
    if os.path.exists(setup):
        m = re.search(r'version\s*=\s*"([^"]+)"', read_text(setup))
        version = m.group(1) if m else None
    if version != ETL_PARSER_VERSION:
        sys.stderr.write("generate.py: warning: etl-parser version %r, expected %r\n"
                         % (version, ETL_PARSER_VERSION))
    files = sorted(glob.glob(os.path.join(root, "etl", "parsers", "etw", "*.py")))
    if not files:
        fail("no etl/parsers/etw/*.py under %s (give the root of etl-parser)" % root)
    providers = {}
    events = {}
    seen = set()
    for path in files:
        base = os.path.basename(path)
        if base in ("__init__.py", "core.py"):
            continue
        text = read_text(path)
        tree = ast.parse(text, filename=base)
        # The module docstring: the provider's name, then "GUID : <guid>".
        doc = (ast.get_docstring(tree) or "").split("\n")
        if len(doc) != 2 or not doc[1].startswith("GUID : "):
            fail("%s: the docstring is not <name>, GUID : <guid>" % base)
        pname = doc[0].strip()
        if not PROVIDER_NAME_RE.match(pname):
            fail("%s: provider name %r is not printable ASCII" % (base, pname))
        pguid = uuid.UUID(doc[1][len("GUID : "):].strip())
        if pguid in providers:
            fail("%s: provider GUID %s in two modules" % (base, pguid))
        providers[pguid] = pname
        stats.modules += 1
        names = imports(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            key = declared_key(node)
            if key is None:
                continue
            g, event_id, ver = uuid.UUID(key[0]), key[1], key[2]
            if g != pguid:
                fail("%s.%s: @declare GUID %s, the docstring %s" % (base, node.name, g, pguid))
            if not (0 <= event_id <= 0xFFFF and 0 <= ver <= 0xFF):
                fail("%s.%s: event id %d / version %d out of range" % (base, node.name, event_id, ver))
            k = (g, event_id, ver)
            if k in seen:
                fail("%s.%s: (%s, %d, %d) declared twice" % (base, node.name, g, event_id, ver))
            seen.add(k)
            stats.declared += 1
            members = pattern_fields(node)
            if members is None:
                fail("%s.%s: no pattern" % (base, node.name))
            fields, why = [], None
            earlier = {}
            for fname, expr in members:
                if not NAME_RE.match(fname):
                    fail("%s.%s: field name %r" % (base, node.name, fname))
                t, why = field_type(expr, names, earlier)
                if why is None and fname in earlier:
                    why = R_DUPNAME
                if why:
                    break
                m = re.fullmatch(r"bytes(?:\|wchars)?\((?:2\*)?(\w+)\)", t)
                if m and earlier.get(m.group(1)) == U8_OR_BOOL:
                    # A Boolean is no length: that Int8ul is a win:UInt8.
                    earlier[m.group(1)] = "u8"
                    fields = [(n, "u8" if n == m.group(1) else ft) for n, ft in fields]
                    stats.u8_lengths += 1
                earlier[fname] = t
                fields.append((fname, t))
            entry = stats.by_provider[pname]
            if why:
                stats.left_out[why] += 1
                entry[1][why] += 1
                continue
            stats.kept += 1
            entry[0] += 1
            amb = [t for _n, t in fields if t == U8_OR_BOOL or t.startswith("bytes|wchars(")]
            if amb:
                first = A_INT8UL if amb[0] == U8_OR_BOOL else A_LENGTH
                stats.ambiguous[first] += 1
                stats.ambiguous_fields[len(amb)] += 1
                stats.by_provider_ambiguous[pname][first] += 1
            for _n, t in fields:
                stats.types[re.sub(r"\(.*\)", "()", t)] += 1
            events[k] = fields
    return providers, events, version


def render_blocks(providers, events):
    """[(guid, provider name, block text)] in the order of the GUIDs' bytes in memory."""
    by_provider = collections.defaultdict(list)
    for k in events:
        by_provider[k[0]].append(k)
    out = []
    for g in sorted(by_provider, key=lambda g: g.bytes_le):
        lines, lists = [], {}
        for k in sorted(by_provider[g], key=lambda k: (k[1], k[2])):
            fl = tuple(events[k])
            if fl not in lists:
                lists[fl] = len(lists)
                lines.append(("F " + " ".join("%s:%s" % f for f in fl)).rstrip())
            lines.append("E %d %d %d" % (k[1], k[2], lists[fl]))
        out.append((g, providers[g], "\n".join(lines) + "\n", len(lists)))
    return out


FILTERS = [{"id": lzma.FILTER_LZMA1, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": DICT_SIZE}]


def compress(text):
    data = text.encode("utf-8")
    if len(data) > DICT_SIZE:
        # Not needed for correctness (the dictionary is a window), but the largest block is
        # well below: say so if that changes.
        sys.stderr.write("generate.py: note: a block of %d bytes, above the dictionary\n" % len(data))
    z = lzma.compress(data, format=lzma.FORMAT_ALONE, filters=FILTERS)
    if lzma.decompress(z, format=lzma.FORMAT_ALONE) != data:
        fail("LZMA round trip")
    return z


def rust_bytes(b):
    return "[" + ", ".join("0x%02x" % x for x in b) + "]"


def render_rust(stats, blocks, parts, etl_version):
    text = "".join(t for _g, _n, t, _l in blocks).encode("utf-8")
    sha = hashlib.sha256(text).hexdigest()
    blob_len = sum(len(z) for z in parts)
    n_lists = sum(l for _g, _n, _t, l in blocks)
    left = sum(stats.left_out.values())
    w = []
    w.append("// @generated by %s. DO NOT EDIT: change the generator and run it again:" % GENERATOR)
    w.append("//")
    w.append("//     %s" % COMMAND)
    w.append("//")
    w.append("// Source (the field lists of its event classes; the source files are not in this repository):")
    w.append("// airbus-cert/etl-parser %s (%s, tag v%s = commit %s)," % (
        etl_version, ETL_PARSER_URL, ETL_PARSER_VERSION, ETL_PARSER_COMMIT))
    w.append("// etl/parsers/etw/*.py, the same files as the PyPI sdist etl-parser==%s." % ETL_PARSER_VERSION)
    w.append("// Licence: Apache-2.0 (file LICENSE of that repository; a copy is")
    w.append("// tools/provider_names/LICENSE-etl-parser). See tools/manifest_schemas/README.md.")
    w.append("//")
    w.append("// Read: %d provider modules, %d event classes (provider GUID, event id, version)." % (
        stats.modules, stats.declared))
    w.append("// Kept: %d events of %d providers, %d field lists (distinct within each provider)." % (
        stats.kept, len(blocks), n_lists))
    amb = sum(stats.ambiguous.values())
    w.append("// Of them with an ambiguous type (decoded by the one reading the payload fits): %d," % amb)
    for a in AMBIGUITIES:
        w.append("//   %6d with %s first" % (stats.ambiguous.get(a, 0), a))
    w.append("// and %d `Int8ul` fields a later field's length names (`u8`)." % stats.u8_lengths)
    w.append("// Left out (not decoded: a schema the generator cannot transcribe): %d," % left)
    for r in REASONS:
        w.append("//   %6d with %s" % (stats.left_out.get(r, 0), r))
    w.append("// Table: %s, %d bytes of text (SHA-256 %s)," % (BLOB_NAME, len(text), sha))
    w.append("// %d bytes compressed (one .lzma stream per provider, dictionary %d KiB)." % (
        blob_len, DICT_SIZE >> 10))
    w.append("")
    w.append("//! The manifest-based event schema table: field lists by (provider GUID, event id, version),")
    w.append("//! generated from etl-parser (see the header comment and `tools/manifest_schemas`); read")
    w.append("//! by [`super::manifest`].")
    w.append("")
    w.append("/// The providers' blocks (format: `tools/manifest_schemas/generate.py`), each a .lzma")
    w.append("/// (LZMA_Alone) stream, one after the other.")
    w.append("pub(crate) static BLOB: &[u8] = include_bytes!(\"%s\");" % BLOB_NAME)
    w.append("/// The LZMA dictionary size the blocks were compressed with (their headers say so too).")
    w.append("pub(crate) const DICT_SIZE: u64 = %d;" % DICT_SIZE)
    w.append("/// Bytes of all blocks' text.")
    w.append("#[cfg(test)]")
    w.append("pub(crate) const TEXT_LEN: usize = %d;" % len(text))
    w.append("/// SHA-256 of all blocks' text, in index order.")
    w.append("#[cfg(test)]")
    w.append("pub(crate) const TEXT_SHA256: &str = \"%s\";" % sha)
    w.append("/// Events (`E` lines) in all blocks.")
    w.append("#[cfg(test)]")
    w.append("pub(crate) const EVENTS: usize = %d;" % stats.kept)
    w.append("/// Events with an ambiguous type (`u8|bool`, `bytes|wchars(F)`).")
    w.append("#[cfg(test)]")
    w.append("pub(crate) const AMBIGUOUS_EVENTS: usize = %d;" % amb)
    w.append("/// Field lists (`F` lines) in all blocks.")
    w.append("#[cfg(test)]")
    w.append("pub(crate) const FIELD_LISTS: usize = %d;" % n_lists)
    w.append("")
    w.append("/// Per provider, sorted by GUID: (GUID bytes in memory order, start and end of its block in")
    w.append("/// [`BLOB`], length of its text).")
    w.append("#[rustfmt::skip]")
    w.append("pub(crate) static PROVIDERS: &[([u8; 16], u32, u32, u32)] = &[")
    at = 0
    for (g, name, t, _l), z in zip(blocks, parts):
        w.append("    (%s, %d, %d, %d), // %s %s" % (rust_bytes(g.bytes_le), at, at + len(z),
                                                 len(t.encode("utf-8")), str(g).upper(), name))
        at += len(z)
    w.append("];")
    return "\n".join(w) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--etl-parser", required=True, metavar="DIR",
                    help="root of airbus-cert/etl-parser 1.0.1 (checkout or unpacked sdist)")
    ap.add_argument("-o", "--output", default=DEFAULT_OUTPUT, metavar="DIR",
                    help="directory of the two files (default: %(default)s)")
    ap.add_argument("--text", metavar="FILE", help="also write the uncompressed table text here")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print every provider's kept and left-out events")
    args = ap.parse_args()

    stats = Stats()
    providers, events, etl_version = read_etl_parser(args.etl_parser, stats)
    blocks = render_blocks(providers, events)
    parts = [compress(t) for _g, _n, t, _l in blocks]
    blob = b"".join(parts)
    rust = render_rust(stats, blocks, parts, etl_version or "unknown")
    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, BLOB_NAME), "wb") as f:
        f.write(blob)
    with open(os.path.join(args.output, RUST_NAME), "w", encoding="utf-8", newline="\n") as f:
        f.write(rust)
    text = "".join(t for _g, _n, t, _l in blocks)
    if args.text:
        with open(args.text, "w", encoding="utf-8", newline="\n") as f:
            for g, name, t, _l in blocks:
                f.write("P %s %s\n%s" % (g, name, t))
    n_lists = sum(l for _g, _n, _t, l in blocks)
    print("wrote %s: %d bytes (text %d bytes, sha256 %s), %s" % (
        os.path.relpath(os.path.join(args.output, BLOB_NAME)), len(blob), len(text.encode()),
        hashlib.sha256(text.encode()).hexdigest(), os.path.relpath(os.path.join(args.output, RUST_NAME))))
    print("  largest block: %d bytes of text" % max(len(t.encode()) for _g, _n, t, _l in blocks))
    print("  modules %d, event classes %d, kept %d (%d providers, %d field lists), left out %d" % (
        stats.modules, stats.declared, stats.kept, len(blocks), n_lists,
        sum(stats.left_out.values())))
    for r in REASONS:
        print("    left out, %s: %d" % (r, stats.left_out.get(r, 0)))
    print("  kept with an ambiguous type: %d" % sum(stats.ambiguous.values()))
    for a in AMBIGUITIES:
        print("    first ambiguous type %s: %d" % (a, stats.ambiguous.get(a, 0)))
    print("    ambiguous fields per event: %s" % ", ".join(
        "%d: %d" % kv for kv in sorted(stats.ambiguous_fields.items())))
    print("    Int8ul named as a length (u8): %d" % stats.u8_lengths)
    print("  field types of the kept events: %s" % ", ".join(
        "%s %d" % kv for kv in sorted(stats.types.items())))
    print("  providers named by issue 29 (kept, of them ambiguous / left out):")
    for name in NAMED:
        if name not in stats.by_provider:
            print("    %-40s not in etl-parser" % name)
            continue
        kept, left = stats.by_provider[name]
        amb = stats.by_provider_ambiguous[name]
        print("    %-40s %5d, %d%s / %d%s" % (
            name, kept, sum(amb.values()),
            "".join(" (%s %d)" % (a.split(" ")[0], n) for a, n in sorted(amb.items())),
            sum(left.values()), "".join(
                ", %s %d" % (r.split(" ")[0], n) for r, n in sorted(left.items()))))
    if args.verbose:
        for name in sorted(stats.by_provider):
            kept, left = stats.by_provider[name]
            amb = stats.by_provider_ambiguous[name]
            print("  %s: kept %d (ambiguous %d %s), left out %d %s" % (
                name, kept, sum(amb.values()), dict(amb), sum(left.values()), dict(left)))


if __name__ == "__main__":
    main()
