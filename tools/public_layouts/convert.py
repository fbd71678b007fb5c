#!/usr/bin/env python3
"""Convert public, PDB-derived kernel type definitions into etwdump's public-layouts file.

The layout corpus in ../shared/layouts (208 ntkrnlmp.pdb builds, 7601 ... 22000) has no build
after Windows 11 21H2. This script takes the structure definitions other people generated from
the real ntkrnlmp.pdb of later builds and published, and writes only the derived facts etwdump
needs (names, sizes, field offsets and types of the structures in gen_builtin_corpus.ROOT_TYPES
and what they embed by value, and the enums of KEPT_ENUMS) to

    tools/public_layouts/public-layouts.json

in the corpus format (one entry per build; ISF-style "user_types" / "enums" entries, stored
once). gen_builtin_corpus.py reads it as its second input. No third-party file is committed:
the sources are read from snapshots of their repositories (git directories), at the commits
pinned in SOURCES below; SOURCES.md beside this script names them for people.

Sources (see SOURCES.md for licences and what was verified):

* "vergilius": novafacing/vergilius-rs, headers/bindings-<version>-x64.h: C headers of the
  structures of vergiliusproject.com (which publishes the types of the public ntkrnlmp.pdb of
  each release), one per build, with the absolute offset of every member and the size of
  every type. Gives full types (pointers, arrays, bit fields, enums) but no PDB GUID/age and
  no global RVAs. Used for 10.0.22621.382 (Windows 11 22H2) and 10.0.22631.2428 (23H2).
* "ntoskrnlib": Rickebo/ntoskrnlib, ntoskrnlib.Types/Generated/*.g.cs at the commit that
  added them: C# explicit-layout structs that its generator emitted from the ntkrnlmp.pdb of
  the author's own Windows 11 kernel through DbgHelp/DIA (field offsets and struct sizes are
  DbgHelp's). The build is not written down there; it is a 24H2-line kernel (10.0.26100.x;
  see SOURCES.md for the evidence), recorded as version 10.0.26100.0 (revision unknown).
  C# loses some type detail: every pointer and enum is an IntPtr, bit fields are dropped,
  unions are not marked. A field's type is therefore taken from the same field of the same
  structure in the newest earlier public layout (the 22631 Vergilius one) when that field
  exists there and its type fits the C# member (same size, or an IntPtr for a pointer or
  enum); otherwise from the C# type (an IntPtr followed by fewer than 8 bytes becomes an
  unsigned integer of that size). Offsets and sizes are always the source's.

* "type-layouts": nohuto/type-layouts, 11-<release>/ntoskrnl/<type>.cpp: PDBRipper dumps of
  each release's PDB types (absolute offsets, bit positions). Only the files listed in
  SOURCES["type-layouts"]["files"] are read (from a directory laid out as the repository):
  the structures another source lacks (_ETW_REG_ENTRY of 25H2, the same kernel line as the
  C# one). It also checks the other sources (tests/builtin_corpus.rs).

Usage (the snapshot paths are git directories, e.g. from the search tool's fetch):

    python3 tools/public_layouts/convert.py --vergilius DIR --ntoskrnlib DIR \
        --type-layouts DIR [-o OUT]

Python 3 standard library only; the output depends only on the source bytes.
"""

import hashlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import gen_builtin_corpus as gen  # noqa: E402  (ROOT_TYPES, KEPT_FIELDS, KEPT_ENUMS, ...)

FORMAT = "etwdump-public-layouts/1"
DEFAULT_OUTPUT = os.path.join(HERE, "public-layouts.json")

SOURCES = {
    "vergilius": {
        "repository": "novafacing/vergilius-rs",
        "commit": "58f8e9aaa3f79a1950d29c3985e9d50ca397c20b",
        "licence": "Apache-2.0 (Cargo.toml; the structures are those vergiliusproject.com publishes)",
        "builds": [
            {
                "path": "headers/bindings-10.0.22621.382-x64.h",
                "version": "10.0.22621.382",
                "release": "Windows 11 22H2",
            },
            {
                "path": "headers/bindings-10.0.22631.2428-x64.h",
                "version": "10.0.22631.2428",
                "release": "Windows 11 23H2",
            },
        ],
    },
    "type-layouts": {
        "repository": "nohuto/type-layouts",
        "commit": "00e21f5904ebb02bcd11fbd64dda0dfc7641d11a",
        "licence": "none stated (no licence file); only facts (names, offsets, sizes) are taken",
        # Per build, the files read (a checkout has too many files to take whole): the
        # structures the build's main source lacks.
        "files": {
            "10.0.26100.0": ["11-25H2/ntoskrnl/_ETW_REG_ENTRY.cpp"],
        },
        # Builds of which the table holds a second layout ("variant"), made from these files
        # only (what they lack is taken from the build's first layout): type-layouts' 11-24H2
        # provider structures are not those of its 25H2 dump and of the C# (16 sessions per
        # provider instead of 8; its 26H1 dump has the same), see SOURCES.md.
        "variants": [
            {
                "version": "10.0.26100.0",
                "variant": "type-layouts-11-24H2",
                "release": "Windows 11 24H2 as labelled by nohuto/type-layouts; 16 sessions per provider",
                "files": [
                    "11-24H2/ntoskrnl/_ETW_GUID_ENTRY.cpp",
                    "11-24H2/ntoskrnl/_ETW_REALTIME_CONSUMER.cpp",
                    "11-24H2/ntoskrnl/_ETW_REG_ENTRY.cpp",
                    "11-24H2/ntoskrnl/_ETW_SILODRIVERSTATE.cpp",
                    "11-24H2/ntoskrnl/_WMI_BUFFER_HEADER.cpp",
                ],
            }
        ],
    },
    "ntoskrnlib": {
        "repository": "Rickebo/ntoskrnlib",
        "commit": "0a72996e520c310683bee32527053dadc9c0ceeb",
        "licence": "none stated (no licence file); only facts (names, offsets, sizes) are taken",
        "builds": [
            {
                "path": "ntoskrnlib.Types/Generated",
                "version": "10.0.26100.0",
                "release": "Windows 11 24H2 line, revision unknown",
                "type_reference": "10.0.22631.2428",
            }
        ],
    },
}


# Types a source gets wrong, found by converting its builds that the corpus also has (see
# SOURCES.md): vergilius-rs's _KPRCB is 0x700 bytes in every build it has (19041.1288 and
# 22000.194 included, whose real _KPRCB is 0xaf00 / 0xbf00): its scrape cut the structure.
# They are left out; etwdump takes them from the nearest earlier build that has them.
EXCLUDED = {"vergilius": {"_KPRCB"}, "ntoskrnlib": set(), "type-layouts": set()}


class ConvertError(Exception):
    pass


def git_show(gitdir, commit, path):
    return subprocess.run(
        ["git", "--git-dir", gitdir, "show", "%s:%s" % (commit, path)],
        check=True,
        capture_output=True,
    ).stdout


def git_ls(gitdir, commit, path):
    out = subprocess.run(
        ["git", "--git-dir", gitdir, "ls-tree", "--name-only", commit, path + "/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(line for line in out.splitlines() if line)


# ---- ISF-style type dicts ----


def base(name):
    return {"kind": "base", "name": name}


def size_of(t, types, enums):
    """Size in bytes of an ISF type dict (None when it names a type not at hand)."""
    k = t["kind"]
    if k == "base":
        return gen.BASE_TYPES[t["name"]][0]
    if k == "pointer":
        return 8
    if k == "array":
        s = size_of(t["subtype"], types, enums)
        return None if s is None else s * t["count"]
    if k in ("struct", "union", "class"):
        u = types.get(t["name"])
        return None if u is None else u["size"]
    if k == "enum":
        e = enums.get(t["name"])
        return e["size"] if e else 4
    if k == "bitfield":
        return size_of(t["type"], types, enums)
    if k == "function":
        return None
    raise ConvertError("kind %r" % k)


# ---- Vergilius C headers (novafacing/vergilius-rs) ----

C_INTS = {
    "uint8_t": "unsigned char",
    "int8_t": "char",
    "uint16_t": "unsigned short",
    "int16_t": "short",
    "uint32_t": "unsigned long",
    "int32_t": "long",
    "uint64_t": "unsigned long long",
    "int64_t": "long long",
    "void": "void",
    "float": "float",
    "double": "double",
}
HEAD = re.compile(r"^// 0x[0-9a-f]+ \((\d+)\) bytes$")
OPEN = re.compile(r"^(struct|union|enum) ([A-Za-z_][A-Za-z0-9_<>:,]*)\s*\{(\};)?$")
OFFSET = re.compile(r"//\s*offset: 0x[0-9a-f]+ \((\d+)\)")


def parse_vergilius(text):
    """(types, enums) of a vergilius-rs header: ISF-style entries by name."""
    lines = text.splitlines()
    typedefs = {}
    for line in lines:
        m = re.match(r"^typedef (\w+) (\w+);$", line)
        if m and m.group(1) in C_INTS:
            typedefs[m.group(2)] = "wchar" if m.group(2) == "WCHAR" else C_INTS[m.group(1)]
    types, enums = {}, {}
    i = 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        if not m:
            i += 1
            continue
        size = int(m.group(1))
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        head = lines[j].strip() if j < len(lines) else ""
        # "struct _X\n\n{};" (an opaque type) is split over lines.
        if re.match(r"^(struct|union|enum) \S+$", head):
            k = j + 1
            while k < len(lines) and not lines[k].strip():
                k += 1
            if k < len(lines) and lines[k].strip() == "{};":
                head, j = head + " {};", k
        o = OPEN.match(head)
        if not o:
            i = j
            continue
        kind, name, empty = o.group(1), o.group(2), o.group(3)
        body = []
        j += 1
        if not empty:
            depth = 1
            while j < len(lines):
                s = lines[j].strip()
                depth += s.count("{") - s.count("}")
                if depth == 0:
                    break
                body.append(lines[j])
                j += 1
        i = j + 1
        if kind == "enum":
            consts = {}
            for b in body:
                e = re.match(r"^\s*(\w+) = (-?\d+),?$", b)
                if e:
                    consts[e.group(1)] = int(e.group(2))
            enums[name] = {"base": "long", "constants": consts, "size": size}
            continue
        if size == 0:
            continue
        try:
            types[name] = {"kind": kind, "size": size, "fields": parse_members(body, kind, typedefs, name)}
        except (ConvertError, KeyError) as e:
            # Kept only to be reported if a needed type (closure) reaches it.
            types[name] = {"kind": kind, "size": size, "error": str(e)}
    return types, enums


def c_type(spec, typedefs, where):
    """ISF type dict of a declaration's type part ("struct _X", "volatile ULONG", ...)."""
    words = [w for w in spec.split() if w not in ("volatile", "const")]
    if len(words) == 2 and words[0] in ("struct", "union", "enum"):
        return {"kind": words[0], "name": words[1]}
    if len(words) == 1 and words[0] in typedefs:
        return base(typedefs[words[0]])
    if len(words) == 1 and words[0] in C_INTS:
        return base(C_INTS[words[0]])
    raise ConvertError("%s: type %r" % (where, spec))


def parse_members(body, kind, typedefs, name):
    # Join wrapped declarations: a member ends with ";" (then its offset comment).
    decls = []
    buf = ""
    for line in body:
        s = line.strip()
        if not s:
            continue
        if s in ("union {", "struct {"):
            decls.append(("open", s.split()[0]))
            continue
        if s.startswith("}"):
            decls.append(("close", s.rstrip(";").lstrip("}").strip()))
            continue
        if s.startswith("//") and not buf and decls and decls[-1][0] == "member":
            # A wrapped offset comment ("// offset:" / "// 0x970" / "// (2416)").
            decls[-1] = ("member", decls[-1][1] + " " + s[2:].strip())
            continue
        buf = (buf + " " + s).strip()
        if ";" in buf:
            decls.append(("member", buf))
            buf = ""
    if buf:
        raise ConvertError("%s: unterminated member %r" % (name, buf))
    fields = {}
    # Nesting: (kind, bit-field state); bit fields fill their storage unit in order within a
    # struct; every member of a union starts at bit 0.
    stack = [[kind, None]]
    pending = []  # members of the current nested aggregate, kept until its "}" says its name
    for what, d in decls:
        if what == "open":
            stack.append([d, None])
            pending.append([])
            continue
        if what == "close":
            stack.pop()
            inner = pending.pop()
            if d:
                # "struct {...} u;": a member of an unnamed type; its fields are not the
                # parent's (and the member itself, of a type without a name, is left out).
                inner = []
            if pending:
                pending[-1].extend(inner)
            else:
                for fname, f in inner:
                    fields.setdefault(fname, f)
            continue
        m = OFFSET.search(d)
        if not m:
            raise ConvertError("%s: no offset in %r" % (name, d))
        offset = int(m.group(1))
        decl = d[: d.index(";")].strip()
        top = stack[-1]
        if top[0] == "union":
            top[1] = None
        if "(*" in decl:
            fm = re.search(r"\(\s*\*+\s*(\w+)\s*\)", decl)
            if not fm:
                raise ConvertError("%s: function pointer %r" % (name, decl))
            fname = fm.group(1)
            t = {"kind": "pointer", "subtype": {"kind": "function"}}
            top[1] = None
        elif re.search(r":\s*\d+$", decl):
            left, bits = decl.rsplit(":", 1)
            bits = int(bits)
            spec, fname = left.strip().rsplit(None, 1)
            bt = c_type(spec, typedefs, name)
            unit = gen.BASE_TYPES[bt["name"]][0] * 8
            st = top[1]
            if st and st[0] == offset and st[1] == unit and st[2] + bits <= unit:
                pos = st[2]
            else:
                pos = 0
            top[1] = (offset, unit, pos + bits)
            t = {"kind": "bitfield", "bit_position": pos, "bit_length": bits, "type": bt}
        else:
            top[1] = None
            decl = re.sub(r"\*\s*(?:volatile|const)\b\s*", "*", decl)
            dm = re.match(r"^(.*?)(\**)\s*(\w+)((?:\[\d+\])*)$", decl)
            if not dm:
                raise ConvertError("%s: member %r" % (name, decl))
            spec, stars, fname, dims = dm.groups()
            if not spec.strip():
                raise ConvertError("%s: member %r" % (name, decl))
            t = c_type(spec.strip(), typedefs, name)
            if t["kind"] == "base" and t["name"] == "void" and not stars:
                raise ConvertError("%s: void member %r" % (name, decl))
            for _ in stars:
                t = {"kind": "pointer", "subtype": t}
            for n in reversed([int(x) for x in re.findall(r"\[(\d+)\]", dims)]):
                t = {"kind": "array", "count": n, "subtype": t}
        f = {"offset": offset, "type": t}
        if pending:
            pending[-1].append((fname, f))
        else:
            fields.setdefault(fname, f)
    return fields


# ---- PDBRipper dumps (nohuto/type-layouts) ----

PR_BASE = {
    "unsigned char": "unsigned char",
    "char": "char",
    "unsigned short": "unsigned short",
    "short": "short",
    "wchar_t": "wchar",
    "unsigned long": "unsigned long",
    "long": "long",
    "unsigned int": "unsigned int",
    "int": "int",
    "unsigned long long": "unsigned long long",
    "long long": "long long",
    "float": "float",
    "double": "double",
    "void": "void",
}
PR_HEAD = re.compile(r"^(struct|union) (\w+)// Size=0x([0-9a-f]+) \(Id=\d+\)$")
PR_MEMBER = re.compile(
    r"^(?P<decl>.*);// Offset=0x(?P<off>[0-9a-f]+) Size=0x[0-9a-f]+"
    r"(?: BitOffset=0x(?P<bpos>[0-9a-f]+) BitSize=0x(?P<blen>[0-9a-f]+))?$"
)


def pr_type(spec, where):
    spec = " ".join(spec.split())
    m = re.match(r"^(struct|union|enum) (\w+)$", spec)
    if m:
        return {"kind": m.group(1), "name": m.group(2)}
    if spec in PR_BASE:
        return base(PR_BASE[spec])
    raise ConvertError("%s: type %r" % (where, spec))


def parse_pdbripper(text):
    """(types, enums): ISF-style entries of the structures, unions and enums of a PDBRipper dump
    (every member with its absolute offset and, for a bit field, its bit position; anonymous
    unions and structures flattened; a member of an unnamed type (`struct _unnamed_9 u`) left
    out; enums 4 bytes)."""
    lines = text.splitlines()
    types, enums = {}, {}
    i = 0
    while i < len(lines):
        em = re.match(r"^enum (\w+)$", lines[i])
        if em and i + 1 < len(lines) and lines[i + 1] == "{":
            consts, j = {}, i + 2
            while j < len(lines) and not lines[j].startswith("}"):
                c = re.match(r"^\s*(\w+)=(-?\d+),?$", lines[j])
                if not c:
                    raise ConvertError("%s: constant %r" % (em.group(1), lines[j]))
                consts[c.group(1)] = int(c.group(2))
                j += 1
            enums[em.group(1)] = {"base": "long", "constants": consts, "size": 4}
            i = j + 1
            continue
        m = PR_HEAD.match(lines[i])
        if not m or i + 1 >= len(lines) or lines[i + 1] != "{":
            i += 1
            continue
        kind, name, size = m.group(1), m.group(2), int(m.group(3), 16)
        fields = {}
        depth, j = 1, i + 2
        while j < len(lines) and depth:
            s = lines[j].strip()
            j += 1
            if s == "{":
                depth += 1
                continue
            if s.startswith("}"):
                depth -= 1
                continue
            if re.match(r"^(union|struct) // Size=", s):
                continue  # an anonymous member: its members follow, flattened
            mm = PR_MEMBER.match(s)
            if not mm:
                raise ConvertError("%s: member %r" % (name, s))
            decl, off = mm.group("decl").strip(), int(mm.group("off"), 16)
            if "(" in decl:
                fname = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl).group(1)
                t = {"kind": "pointer", "subtype": {"kind": "function"}}
            elif mm.group("bpos") is not None:
                spec, fname = decl.split(":")[0].rsplit(None, 1)
                t = {
                    "kind": "bitfield",
                    "bit_position": int(mm.group("bpos"), 16),
                    "bit_length": int(mm.group("blen"), 16),
                    "type": pr_type(spec, name),
                }
            else:
                dm = re.match(r"^(.*?)\s*((?:\*\s*)*)(\w+)((?:\[\d+\])*)$", decl)
                if not dm:
                    raise ConvertError("%s: member %r" % (name, decl))
                spec, stars, fname, dims = dm.groups()
                t = pr_type(spec, name)
                if t.get("name", "").startswith("_unnamed"):
                    continue
                for _ in stars.replace(" ", ""):
                    t = {"kind": "pointer", "subtype": t}
                for n in reversed([int(x) for x in re.findall(r"\[(\d+)\]", dims)]):
                    t = {"kind": "array", "count": n, "subtype": t}
            fields.setdefault(fname, {"offset": off, "type": t})
        types[name] = {"kind": kind, "size": size, "fields": fields}
        i = j
    return types, enums


# ---- C# explicit layouts (Rickebo/ntoskrnlib) ----

CS_INTS = {
    "uint": "unsigned long",
    "int": "long",
    "ushort": "unsigned short",
    "short": "short",
    "byte": "unsigned char",
    "sbyte": "char",
    "ulong": "unsigned long long",
    "long": "long long",
    "char": "wchar",
    "float": "float",
    "double": "double",
}
UINT_OF_SIZE = {1: "unsigned char", 2: "unsigned short", 4: "unsigned long", 8: "unsigned long long"}


def parse_csharp_file(text, where):
    m = re.search(r"LayoutKind\.Explicit, Size=(\d+)\)\]\s*public struct (\w+)", text)
    if not m:
        raise ConvertError("%s: no explicit-layout struct" % where)
    size, name = int(m.group(1)), m.group(2)
    members = []
    for fm in re.finditer(
        r"\[FieldOffset\((\d+)\)\]\s*(?:\[MarshalAs\([^\]]*SizeConst=(\d+)\)\]\s*)?public (\w+)(\[\])? (\w+);",
        text,
    ):
        off, count, ty, arr, fname = fm.groups()
        members.append((fname, int(off), ty, int(count) if count else None, bool(arr)))
    return name, size, members


def fits(ref, cs, cs_size, types, enums):
    """Whether the reference field type can stand for a C# member of size cs_size."""
    if ref["kind"] == "bitfield":
        return False
    if cs == "IntPtr" and ref["kind"] in ("pointer", "enum"):
        return True
    s = size_of(ref, types, enums)
    return s is not None and s == cs_size


def convert_csharp(files, ref_types, ref_enums):
    """(types, notes): ISF-style entries from the C# structs; field types as described above."""
    parsed = {}
    for where, text in files:
        name, size, members = parse_csharp_file(text, where)
        if name.startswith("_unnamed"):
            continue  # every anonymous type is emitted under one name: not usable
        parsed[name] = (size, members)
    types = {}
    notes = {"unchanged_from_reference": [], "typed_from_reference": 0, "typed_from_csharp": 0,
             "intptr_as_integer": [], "dropped": []}
    sizes = {n: {"size": s} for n, (s, _) in parsed.items()}
    known = dict(ref_types, **sizes)
    for name in sorted(parsed):
        size, members = parsed[name]
        ref = ref_types.get(name, {})
        kind = ref.get("kind", "struct")
        offsets = sorted({m[1] for m in members} | {size})
        fields = {}
        for fname, off, ty, count, arr in members:
            gap = next((o for o in offsets if o > off), size) - off
            rf = ref.get("fields", {}).get(fname)
            # The C# member's own type.
            if ty in CS_INTS:
                elem = base(CS_INTS[ty])
                elem_size = gen.BASE_TYPES[CS_INTS[ty]][0]
            elif ty == "IntPtr":
                elem = {"kind": "pointer", "subtype": base("void")}
                elem_size = 8
            elif ty in parsed:
                elem = {"kind": ref_types.get(ty, {}).get("kind", "struct"), "name": ty}
                elem_size = parsed[ty][0]
            else:
                # An anonymous nested type (_unnamed_tag_): not a field a reader names.
                notes["dropped"].append("%s.%s (anonymous type)" % (name, fname))
                continue
            if arr:
                if count is None:
                    raise ConvertError("%s.%s: array without a size" % (name, fname))
                # The C# generator writes an array of structures as byte[element count]:
                # only the reference knows the element type then.
                if rf is not None and rf["type"]["kind"] == "array" and rf["type"]["count"] == count:
                    t = rf["type"]
                    notes["typed_from_reference"] += 1
                elif elem_size * count <= gap:
                    t = {"kind": "array", "count": count, "subtype": elem}
                    notes["typed_from_csharp"] += 1
                else:
                    notes["dropped"].append("%s.%s (array size unknown)" % (name, fname))
                    continue
            elif rf is not None and fits(rf["type"], ty, elem_size, known, ref_enums):
                t = rf["type"]
                notes["typed_from_reference"] += 1
            else:
                t = elem
                if ty == "IntPtr" and gap < 8 and gap in UINT_OF_SIZE:
                    t = base(UINT_OF_SIZE[gap])
                    notes["intptr_as_integer"].append("%s.%s" % (name, fname))
                notes["typed_from_csharp"] += 1
            fields[fname] = {"offset": off, "type": t}
        # A structure whose every (non-bit-field) member is where the reference has it, with
        # the reference's size, is the reference's layout: keep that whole (its bit fields,
        # which the C# source drops, included).
        if ref and "fields" in ref and ref["size"] == size:
            plain = {n: f for n, f in ref["fields"].items() if f["type"]["kind"] != "bitfield"}
            same = set(plain) == set(fields) and all(
                plain[n]["offset"] == fields[n]["offset"] for n in plain
            )
            if same:
                types[name] = ref
                notes["unchanged_from_reference"].append(name)
                continue
        types[name] = {"kind": kind, "size": size, "fields": fields}
    return types, notes


# ---- keep what the generator keeps ----


def closure(types, enums):
    """The types reachable by value from ROOT_TYPES, trimmed as the generator trims them
    (KEPT_FIELDS for the big kernel types, every field of the ETW and small types, the size
    of any other), and the enums of KEPT_ENUMS."""
    out = {}
    queue = [t for t in gen.ROOT_TYPES if t in types]
    while queue:
        name = queue.pop(0)
        if name in out or name not in types:
            continue
        ut = types[name]
        if "error" in ut:
            raise ConvertError(ut["error"])
        keep = gen.kept_fields(name, ut)
        fields = {}
        for fname in keep or []:
            f = ut["fields"][fname]
            fields[fname] = f
            queue.extend(gen.embedded(f["type"]))
        out[name] = {"kind": ut["kind"], "size": ut["size"], "fields": fields}
    kept_enums = {n: enums[n] for n in gen.KEPT_ENUMS if n in enums}
    return out, kept_enums


def key(entry):
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]


USAGE = "usage: convert.py --vergilius GITDIR --ntoskrnlib GITDIR --type-layouts DIR [-o OUT]"


def main(argv):
    args = list(argv)
    opts = {"--vergilius": None, "--ntoskrnlib": None, "--type-layouts": None, "-o": DEFAULT_OUTPUT}
    while args:
        a = args.pop(0)
        if a not in opts or not args:
            raise ConvertError(USAGE)
        opts[a] = args.pop(0)
    if not opts["--vergilius"] or not opts["--ntoskrnlib"] or not opts["--type-layouts"]:
        raise ConvertError(USAGE)

    all_types, all_enums, builds, sources = {}, {}, [], []
    full = {}  # version -> (types, enums) before trimming (type references)

    v = SOURCES["vergilius"]
    for b in v["builds"]:
        raw = git_show(opts["--vergilius"], v["commit"], b["path"])
        types, enums = parse_vergilius(raw.decode())
        full[b["version"]] = (types, enums)
        sources.append(dict(source="vergilius", repository=v["repository"], commit=v["commit"],
                            licence=v["licence"], path=b["path"], version=b["version"],
                            sha256=hashlib.sha256(raw).hexdigest()))
        builds.append((b, "vergilius", types, enums, None))

    n = SOURCES["ntoskrnlib"]
    for b in n["builds"]:
        names = [p for p in git_ls(opts["--ntoskrnlib"], n["commit"], b["path"]) if p.endswith(".g.cs")]
        files, h = [], hashlib.sha256()
        for p in names:
            raw = git_show(opts["--ntoskrnlib"], n["commit"], p)
            h.update(p.encode() + b"\0" + raw + b"\0")
            files.append((p, raw.decode()))
        ref_types, ref_enums = full[b["type_reference"]]
        types, notes = convert_csharp(files, ref_types, ref_enums)
        # What the C# source lacks, from the type-layouts files listed for this build.
        tl = SOURCES["type-layouts"]
        for p in tl["files"].get(b["version"], []):
            raw = open(os.path.join(opts["--type-layouts"], p), "rb").read()
            sources.append(dict(source="type-layouts", repository=tl["repository"], commit=tl["commit"],
                                licence=tl["licence"], path=p, version=b["version"],
                                sha256=hashlib.sha256(raw).hexdigest()))
            for name, ut in parse_pdbripper(raw.decode())[0].items():
                if name not in types:
                    types[name] = ut
                    notes.setdefault("from_type_layouts", []).append(name)
        sources.append(dict(source="ntoskrnlib", repository=n["repository"], commit=n["commit"],
                            licence=n["licence"], path=b["path"] + "/*.g.cs (%d files)" % len(names),
                            version=b["version"], sha256=h.hexdigest()))
        builds.append((b, "ntoskrnlib", types, {}, notes))

    tl = SOURCES["type-layouts"]
    for v in tl["variants"]:
        types, enums = {}, {}
        for p in v["files"]:
            raw = open(os.path.join(opts["--type-layouts"], p), "rb").read()
            sources.append(dict(source="type-layouts", repository=tl["repository"], commit=tl["commit"],
                                licence=tl["licence"], path=p, version=v["version"],
                                variant=v["variant"], sha256=hashlib.sha256(raw).hexdigest()))
            t, e = parse_pdbripper(raw.decode())
            for name, ut in t.items():
                if types.setdefault(name, ut) != ut:
                    raise ConvertError("%s: two layouts of %s" % (p, name))
            enums.update(e)
        builds.append((v, "type-layouts", types, enums, None))

    out_builds = []
    for b, src, types, enums, notes in builds:
        types = {k: v for k, v in types.items() if k not in EXCLUDED[src]}
        kept, kept_enums = closure(types, enums)
        missing_roots = [t for t in gen.ROOT_TYPES if t not in kept]
        entry = {
            "guid": None,
            "age": None,
            "version": b["version"],
            "release": b["release"],
            "source": src,
            "types": {},
            "enums": {},
            "symbols": {},
            "missing_root_types": missing_roots,
            "excluded_types": sorted(EXCLUDED[src]),
            "variant": b.get("variant"),
        }
        if b.get("type_reference"):
            entry["type_reference"] = b["type_reference"]
            # The typing notes of the kept structures only.
            mine = lambda x: x.split(".")[0].split(" ")[0] in kept  # noqa: E731
            entry["typing"] = {
                "unchanged_from_reference": [n for n in notes["unchanged_from_reference"] if n in kept],
                "intptr_as_integer": [n for n in notes["intptr_as_integer"] if mine(n)],
                "dropped": [n for n in notes["dropped"] if mine(n)],
                "from_type_layouts": [n for n in notes.get("from_type_layouts", []) if n in kept],
            }
        for name, ut in sorted(kept.items()):
            k = key(ut)
            all_types[k] = ut
            entry["types"][name] = k
        for name, e in sorted(kept_enums.items()):
            k = key(e)
            all_enums[k] = e
            entry["enums"][name] = k
        out_builds.append(entry)

    doc = {
        "format": FORMAT,
        "generator": "tools/public_layouts/convert.py",
        "source": "public PDB-derived structure definitions: "
        + "; ".join("%s (%s)" % (s["repository"], s["licence"]) for s in SOURCES.values()),
        "sources": sources,
        "builds": out_builds,
        "types": dict(sorted(all_types.items())),
        "enums": dict(sorted(all_enums.items())),
    }
    text = json.dumps(doc, sort_keys=True, indent=1) + "\n"
    tmp = opts["-o"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, opts["-o"])
    print("%s: %d builds, %d layouts, %d enums" % (opts["-o"], len(out_builds), len(all_types), len(all_enums)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ConvertError, subprocess.CalledProcessError, OSError, KeyError, ValueError) as e:
        print("convert.py: %s" % e, file=sys.stderr)
        sys.exit(1)
