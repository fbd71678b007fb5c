#!/usr/bin/env python3
"""Generate etwdump's ETW provider name table (src/etw/provider_names.rs).

Reads two public, permissively licensed sources from local copies (this script downloads
nothing) and writes a Rust file with

* PROVIDER_NAMES: (GUID, provider name) pairs sorted by the GUID's 16 bytes in their in-memory
  order (Data1, Data2, Data3 little-endian, then Data4 as is: the layout of
  _ETW_GUID_ENTRY.Guid), for binary search;
* provider_name(): the binary search;
* KERNEL_REG_HANDLES: the kernel's global provider registration handles (EtwThreatIntProvRegHandle,
  EtwpPsProvRegHandle, ...) with the GUID of the provider each one registers, for the handles
  whose provider is established by public sources (see HANDLES below);
* unit tests.

Sources, in priority order (for a GUID listed twice with different names the first one wins and
the conflict is counted and printed):

1. airbus-cert/etl-parser 1.0.1 (Apache-2.0): the docstring of every etl/parsers/etw/*.py names
   one manifest-based provider and its GUID (794 providers of Windows 10). Pass the root of a
   checkout of tag v1.0.1 (commit 76b7c046866ce0469cd129ee3f7bb3799b34e271) or of the unpacked
   PyPI sdist etl-parser-1.0.1.tar.gz (same files) as --etl-parser.
2. nasbench/EVTX-ETW-Resources (MIT), two files, paths relative to --nasbench:
   NASBENCH_LOGMAN (the output of `logman query providers` on Windows 10 1909: manifest, MOF
   and WPP providers, among them "Windows Kernel Trace" = SystemTraceControlGuid and
   Microsoft-Windows-Kernel-General) and NASBENCH_MANIFESTS (the manifest of
   Microsoft-Windows-Kernel-CPU-Starvation from Windows 11 21H2, which neither other file has).
   A clone of the repository, or a directory holding just these two files at these relative
   paths, will do.

Normalisation: GUIDs are parsed case-insensitively (braces optional) and written upper-case in
comments; names are trimmed; an entry whose name is empty or has a control character, or whose
GUID does not parse, is dropped (and counted). The output depends only on the input files.

    python3 tools/provider_names/generate.py --etl-parser ETL_PARSER_DIR --nasbench NASBENCH_DIR [-o OUTPUT]

Python 3 standard library only.
"""

import argparse
import glob
import hashlib
import os
import re
import sys
import unicodedata
import uuid
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUTPUT = os.path.join(REPO, "src", "etw", "provider_names.rs")
GENERATOR = "tools/provider_names/generate.py"
COMMAND = "python3 tools/provider_names/generate.py --etl-parser ETL_PARSER_DIR --nasbench NASBENCH_DIR"

ETL_PARSER_URL = "https://github.com/airbus-cert/etl-parser"
ETL_PARSER_VERSION = "1.0.1"
ETL_PARSER_COMMIT = "76b7c046866ce0469cd129ee3f7bb3799b34e271"  # tag v1.0.1
NASBENCH_URL = "https://github.com/nasbench/EVTX-ETW-Resources"
NASBENCH_LOGMAN = ("ETW Providers Manifests/W10_1909/W10_1909_LogmanQueryProviders.txt",
                   "286be51feed45d97c99c0526f2b4e7586b250acb")
NASBENCH_MANIFESTS = [
    ("ETW Providers Manifests/21H2/WEPExplorer/Microsoft-Windows-Kernel-CPU-Starvation.xml",
     "8ce5312e1e7166e15789cb09f78dafeddcadde55"),
]

# The kernel's global provider registration handles, in the order the table lists them:
# (handle symbol, provider name as the sources spell it, GUID the public evidence gives).
# A handle is mapped only where public material establishes which provider it registers; the
# generator looks the provider's GUID up BY NAME in the table built from the sources above and
# fails if that GUID differs from the one the evidence gives.
#
# Evidence used below:
#  [A] redplait/armpatched, ldr/krnl_etw.cpp (ntoskrnl_hack::init_etw), a public analyser of
#      ARM64 ntoskrnl builds: a table of the GUIDs the kernel's EtwpInitialize passes to
#      EtwRegister, each with the handle it registers and the kernel's name for the GUID variable
#      (EventTracingProvGuid, KernelProvGuid, PsProvGuid, NetProvGuid, DiskProvGuid,
#      FileProvGuid, MemoryProvGuid, MS_Windows_Kernel_AppCompat_Provider,
#      KernelAuditApiCallsGuid, CVEAuditProviderGuid, ThreatIntProviderGuid,
#      MS_Windows_Security_LPAC_Provider, MS_Windows_Security_Adminless_Provider,
#      SecurityMitigationsProviderGuid).
#  [B] "Full spectrum Event Tracing for Windows detection in the kernel against rootkits",
#      https://fluxsec.red/full-spectrum-event-tracing-for-windows-detection-in-the-kernel-against-rootkits
#      (Sanctum EDR): the handle -> GUID table of Windows 11 24H2 read with WinDbg, including
#      EtwCpuStarvationProvRegHandle.
#  [C] tklengyel/drakvuf, src/plugins/etwmon/etwmon.cpp: lists of the kernel's global handle
#      symbols, separately for Windows 10 and for Windows 7 (EtwKernelProvRegHandle,
#      EtwPsProvRegHandle, EtwNetProvRegHandle, EtwDiskProvRegHandle, EtwFileProvRegHandle,
#      EtwMemoryProvRegHandle: Windows 7 has no "Etwp" prefix). Only the symbol names are used.
# Provider names: the handle's stem names the provider (Ps = process manager ->
# Kernel-Process, Net -> Kernel-Network, ...), and [A]/[B] give the same GUID the sources give
# that provider.
HANDLES = [
    # ThreatInt = the Threat-Intelligence provider; [A] ThreatIntProviderGuid, [B].
    ("EtwThreatIntProvRegHandle", "Microsoft-Windows-Threat-Intelligence",
     "F4E1897C-BB5D-5668-F1D8-040F4D8DD344"),
    # Ps (process manager) -> Kernel-Process; [A] PsProvGuid, [B].
    ("EtwpPsProvRegHandle", "Microsoft-Windows-Kernel-Process",
     "22FB2CD6-0E7B-422B-A0C7-2FAD1FD0E716"),
    # File -> Kernel-File; [A] FileProvGuid, [B].
    ("EtwpFileProvRegHandle", "Microsoft-Windows-Kernel-File",
     "EDD08927-9CC4-4E65-B970-C2560FB5C289"),
    # Disk -> Kernel-Disk; [A] DiskProvGuid, [B].
    ("EtwpDiskProvRegHandle", "Microsoft-Windows-Kernel-Disk",
     "C7BDE69A-E1E0-4177-B6EF-283AD1525271"),
    # Net -> Kernel-Network; [A] NetProvGuid, [B].
    ("EtwpNetProvRegHandle", "Microsoft-Windows-Kernel-Network",
     "7DD42A49-5329-4832-8DFD-43D979153A88"),
    # Memory -> Kernel-Memory; [A] MemoryProvGuid, [B].
    ("EtwpMemoryProvRegHandle", "Microsoft-Windows-Kernel-Memory",
     "D1D93EF7-E1F2-4F45-9943-03D245FE6C00"),
    # EventTracing -> Kernel-EventTracing; [A] EventTracingProvGuid, [B].
    ("EtwpEventTracingProvRegHandle", "Microsoft-Windows-Kernel-EventTracing",
     "B675EC37-BDB6-4648-BC92-F3FDC74D3CA2"),
    # Registry -> Kernel-Registry: [A] lists RegistryProvGuid with this handle (its table notes
    # "in build 20xxx?"); public decompilations of EtwpInitialize (e.g. nohuto/decompiled-
    # pseudocode, 11-21H2) show EtwRegister(&RegistryProvGuid, EtwpRegTraceEnableCallback, 0,
    # &EtwpRegTraceHandle), and the Cmp* registry tracing routines write through it. The name
    # does not end in "RegHandle": etwdump lists it in symbols::OTHER_REG_HANDLES.
    ("EtwpRegTraceHandle", "Microsoft-Windows-Kernel-Registry",
     "70EB4F03-C1DE-4F73-A051-33D13D5413BD"),
    # The name alone says only "Kernel": [A] (KernelProvGuid) and [B] give the GUID
    # A68CA8B7-004F-D7B6-A698-07E2DE0F1F5D, which the nasbench logman listing names
    # Microsoft-Windows-Kernel-General (the provider of the kernel's system time change,
    # time zone and system stop events, the events written through this handle).
    ("EtwKernelProvRegHandle", "Microsoft-Windows-Kernel-General",
     "A68CA8B7-004F-D7B6-A698-07E2DE0F1F5D"),
    # ApiCalls -> Kernel-Audit-API-Calls; [A] KernelAuditApiCallsGuid, [B].
    ("EtwApiCallsProvRegHandle", "Microsoft-Windows-Kernel-Audit-API-Calls",
     "E02A841C-75A3-4FA7-AFC8-AE09CF9B7F23"),
    # AppCompat -> Kernel-AppCompat; [A] MS_Windows_Kernel_AppCompat_Provider, [B].
    ("EtwAppCompatProvRegHandle", "Microsoft-Windows-Kernel-AppCompat",
     "16A1ADC1-9B7F-4CD9-94B3-D8296AB1B130"),
    # CVEAudit -> Audit-CVE; [A] CVEAuditProviderGuid, [B].
    ("EtwCVEAuditProvRegHandle", "Microsoft-Windows-Audit-CVE",
     "85A62A0D-7E17-485F-9D4F-749A287193A6"),
    # SecurityMitigations -> Security-Mitigations; [A] SecurityMitigationsProviderGuid, [B].
    ("EtwSecurityMitigationsRegHandle", "Microsoft-Windows-Security-Mitigations",
     "FAE10392-F0AF-4AC0-B8FF-9F4D920C3CDF"),
    # Lpac = Less Privileged AppContainer; [A] MS_Windows_Security_LPAC_Provider, [B].
    ("EtwLpacProvRegHandle", "Microsoft-Windows-Security-LessPrivilegedAppContainer",
     "45EEC9E5-4A1B-5446-7AD8-A4AB1313C437"),
    # Adminless -> Security-Adminless; [A] MS_Windows_Security_Adminless_Provider.
    ("EtwAdminlessProvRegHandle", "Microsoft-Windows-Security-Adminless",
     "EA216962-877B-5B73-F7C5-8AEF5375959E"),
    # CpuStarvation -> Kernel-CPU-Starvation (Windows 11 21H2 and later); [B].
    ("EtwCpuStarvationProvRegHandle", "Microsoft-Windows-Kernel-CPU-Starvation",
     "7F54CA8A-6C72-5CBC-B96F-D0EF905B8BCE"),
    # Windows 7 spellings ([C] lists the first five): the same stems without the "p" of the
    # later private names, so the same providers as the Etwp* handles above. The evidence is
    # the name; the GUIDs are those [A]/[B] give for the Windows 10+ handles.
    ("EtwPsProvRegHandle", "Microsoft-Windows-Kernel-Process",
     "22FB2CD6-0E7B-422B-A0C7-2FAD1FD0E716"),
    ("EtwFileProvRegHandle", "Microsoft-Windows-Kernel-File",
     "EDD08927-9CC4-4E65-B970-C2560FB5C289"),
    ("EtwDiskProvRegHandle", "Microsoft-Windows-Kernel-Disk",
     "C7BDE69A-E1E0-4177-B6EF-283AD1525271"),
    ("EtwNetProvRegHandle", "Microsoft-Windows-Kernel-Network",
     "7DD42A49-5329-4832-8DFD-43D979153A88"),
    ("EtwMemoryProvRegHandle", "Microsoft-Windows-Kernel-Memory",
     "D1D93EF7-E1F2-4F45-9943-03D245FE6C00"),
    # Not in [C]'s Windows 7 list; mapped by its name only, like the Etwp spelling above.
    ("EtwEventTracingProvRegHandle", "Microsoft-Windows-Kernel-EventTracing",
     "B675EC37-BDB6-4648-BC92-F3FDC74D3CA2"),
]

# Providers the generated tests look up, by name. Their GUIDs are read from the
# sources at generation time and written into the tests as text, which the tests parse with
# their own GUID parser (so the tests also check the byte order of the table).
TEST_PROVIDERS = [
    "Microsoft-Windows-Kernel-Process",
    "Microsoft-Windows-Threat-Intelligence",
    "Microsoft-Windows-Kernel-File",
    "Microsoft-Windows-Kernel-Network",
    "Microsoft-Windows-Kernel-Registry",
    "Microsoft-Windows-Kernel-Audit-API-Calls",
    "Microsoft-Windows-Security-Mitigations",
    "Microsoft-Windows-DotNETRuntime",
    "Microsoft-Windows-PowerShell",
    "Microsoft-Windows-Sysmon",
    "Microsoft-Antimalware-Scan-Interface",
    "Microsoft-Windows-Kernel-General",
    "Microsoft-Windows-Kernel-CPU-Starvation",
    "Windows Kernel Trace",
]

GUID_RE = re.compile(r"^\{?([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\}?$")
ETL_DOC_RE = re.compile(r'\A(?:#[^\n]*\n)*\s*"""[ \t]*\n(?P<name>[^\n]*)\nGUID : (?P<guid>[^\n]*)\n"""')
ETL_DECLARE_RE = re.compile(r'guid\("([^"]*)"\)')
LOGMAN_RE = re.compile(r"^(?P<name>.*?)\s+\{(?P<guid>[0-9A-Fa-f-]{36})\}\s*$")


def fail(msg):
    sys.stderr.write("generate.py: error: %s\n" % msg)
    sys.exit(1)


def read_text(path):
    """A text file, line endings normalised to \\n."""
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8-sig")
    return text.replace("\r\r\n", "\n").replace("\r\n", "\n"), hashlib.sha256(data).hexdigest()


class Stats:
    def __init__(self):
        self.read = {}          # source label -> entries read
        self.added = {}         # source label -> entries that made it into the table
        self.dropped = []       # (source label, guid text, name, reason)
        self.duplicates = 0     # same GUID, same name
        self.conflicts = []     # (guid text, kept name, kept source, other name, other source)


def parse_guid(text):
    m = GUID_RE.match(text.strip())
    if not m:
        return None
    return uuid.UUID(m.group(1))


def clean_name(name):
    name = name.strip()
    if not name:
        return None, "empty name"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return None, "control character in name"
    return name, None


def read_etl_parser(root, stats):
    """(guid text, name, label) from etl-parser's per-provider modules, in file name order."""
    label = "etl-parser"
    version = None
    setup = os.path.join(root, "setup.py")
    if os.path.exists(setup):
        m = re.search(r'version\s*=\s*"([^"]+)"', read_text(setup)[0])
        version = m.group(1) if m else None
    if version != ETL_PARSER_VERSION:
        sys.stderr.write("generate.py: warning: etl-parser version %r, expected %r\n"
                         % (version, ETL_PARSER_VERSION))
    files = sorted(glob.glob(os.path.join(root, "etl", "parsers", "etw", "*.py")))
    if not files:
        fail("no etl/parsers/etw/*.py under %s (give the root of etl-parser)" % root)
    out = []
    for path in files:
        base = os.path.basename(path)
        if base in ("__init__.py", "core.py"):
            continue
        text, _ = read_text(path)
        m = ETL_DOC_RE.match(text)
        if not m:
            stats.dropped.append((label, "", base, "no provider docstring"))
            continue
        guid_text, name = m.group("guid").strip(), m.group("name")
        declared = {d.lower() for d in ETL_DECLARE_RE.findall(text)}
        if declared and declared != {guid_text.lower()}:
            # The docstring disagrees with the module's own @declare(guid=...): trust neither.
            stats.dropped.append((label, guid_text, name, "docstring GUID differs from @declare"))
            continue
        out.append((guid_text, name, label))
    return out, version


def read_nasbench(root, stats):
    out = []
    path = os.path.join(root, *NASBENCH_LOGMAN[0].split("/"))
    if not os.path.exists(path):
        fail("%s not found (give the root of a copy of nasbench/EVTX-ETW-Resources)" % path)
    text, sha_logman = read_text(path)
    label = "nasbench logman"
    for line in text.split("\n"):
        m = LOGMAN_RE.match(line)
        if m:
            out.append((m.group("guid"), m.group("name"), label))
    hashes = [(NASBENCH_LOGMAN[0], sha_logman)]
    label = "nasbench manifest"
    for rel, _commit in NASBENCH_MANIFESTS:
        path = os.path.join(root, *rel.split("/"))
        if not os.path.exists(path):
            fail("%s not found" % path)
        text, sha = read_text(path)
        hashes.append((rel, sha))
        for prov in ET.fromstring(text).iter("Provider"):
            name = prov.findtext("Name") or ""
            guid_text = prov.findtext("Metadata/Guid") or ""
            out.append((guid_text, name, label))
    return out, hashes


def build_table(entries, stats):
    table = {}  # bytes_le -> (name, label, uuid)
    for guid_text, raw_name, label in entries:
        stats.read[label] = stats.read.get(label, 0) + 1
        u = parse_guid(guid_text)
        if u is None:
            stats.dropped.append((label, guid_text, raw_name, "GUID does not parse"))
            continue
        name, why = clean_name(raw_name)
        if name is None:
            stats.dropped.append((label, str(u).upper(), raw_name, why))
            continue
        key = u.bytes_le
        if key in table:
            kept_name, kept_label, _ = table[key]
            if kept_name == name:
                stats.duplicates += 1
            else:
                stats.conflicts.append((str(u).upper(), kept_name, kept_label, name, label))
            continue
        table[key] = (name, label, u)
        stats.added[label] = stats.added.get(label, 0) + 1
    return table


def rust_str(s):
    out = []
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif 0x20 <= ord(c) < 0x7F:
            out.append(c)
        else:
            out.append("\\u{%x}" % ord(c))
    return '"' + "".join(out) + '"'


def rust_bytes(b):
    return "[" + ", ".join("0x%02x" % x for x in b) + "]"


def resolve_handles(table):
    by_name = {}
    for key, (name, _label, _u) in table.items():
        by_name.setdefault(name, []).append(key)
    rows = []
    for symbol, provider, evidence in HANDLES:
        keys = by_name.get(provider, [])
        if len(keys) != 1:
            fail("handle %s: provider %r is in the table %d times (want exactly once)"
                 % (symbol, provider, len(keys)))
        u = table[keys[0]][2]
        if str(u).upper() != evidence.upper():
            fail("handle %s: the sources give %s the GUID %s, the public evidence %s"
                 % (symbol, provider, str(u).upper(), evidence))
        rows.append((symbol, provider, keys[0], u))
    return rows


def render(table, handles, stats, etl_version):
    keys = sorted(table)
    by_name = {name: u for (name, _l, u) in table.values()}
    lines = []
    w = lines.append
    total_dropped = len(stats.dropped)
    w("// @generated by %s. DO NOT EDIT: change the generator and run it again:" % GENERATOR)
    w("//")
    w("//     %s" % COMMAND)
    w("//")
    w("// Sources (only their GUID/name pairs are used; the source files are not in this repository):")
    w("// 1. airbus-cert/etl-parser %s (%s, tag v%s = commit %s)," % (
        etl_version, ETL_PARSER_URL, ETL_PARSER_VERSION, ETL_PARSER_COMMIT))
    w("//    the docstrings of etl/parsers/etw/*.py. Licence: Apache-2.0 (file LICENSE of that")
    w("//    repository; a copy is tools/provider_names/LICENSE-etl-parser).")
    w("// 2. nasbench/EVTX-ETW-Resources (%s), files" % NASBENCH_URL)
    w("//    \"%s\" (as of commit %s)" % NASBENCH_LOGMAN)
    for rel, commit in NASBENCH_MANIFESTS:
        w("//    and \"%s\" (as of commit %s)." % (rel, commit))
    w("//    Licence: MIT (file LICENSE of that repository; a copy is")
    w("//    tools/provider_names/LICENSE-EVTX-ETW-Resources).")
    w("// Source 1 wins where both name one GUID differently. See tools/provider_names/README.md.")
    w("//")
    w("// Entries: %d (%s); same GUID and name in both sources: %d;" % (
        len(table), ", ".join("%s %d" % (k, v) for k, v in sorted(stats.added.items())),
        stats.duplicates))
    w("// conflicts (same GUID, another name; first kept): %d; dropped: %d." % (
        len(stats.conflicts), total_dropped))
    w("")
    w("//! ETW provider names by GUID, and the GUIDs the kernel's global registration handles register.")
    w("//!")
    w("//! Generated from public sources (see the header comment and `tools/provider_names`).")
    w("//! GUIDs are 16 bytes in their in-memory order: Data1, Data2 and Data3 little-endian, then")
    w("//! Data4 as is, i.e. as the kernel keeps them in `_ETW_GUID_ENTRY.Guid`.")
    w("")
    w("/// Known ETW providers: (GUID bytes in memory order, provider name), sorted by the bytes,")
    w("/// each GUID once. Look names up with [`provider_name`].")
    w("#[rustfmt::skip]")
    w("pub static PROVIDER_NAMES: &[([u8; 16], &str)] = &[")
    for key in keys:
        name, _label, u = table[key]
        w("    (%s, %s), // %s" % (rust_bytes(key), rust_str(name), str(u).upper()))
    w("];")
    w("")
    w("/// The name of the provider with this GUID (bytes in memory order), if the table knows it.")
    w("#[must_use]")
    w("pub fn provider_name(guid: &[u8; 16]) -> Option<&'static str> {")
    w("    PROVIDER_NAMES")
    w("        .binary_search_by(|(g, _)| g.cmp(guid))")
    w("        .ok()")
    w("        .map(|i| PROVIDER_NAMES[i].1)")
    w("}")
    w("")
    w("/// The kernel's global provider registration handles (ntoskrnl symbols) and the GUID (bytes in")
    w("/// memory order) of the provider each one registers. Only handles whose provider public")
    w("/// sources establish are listed; why each maps where it does is told in the generator.")
    w("#[rustfmt::skip]")
    w("pub static KERNEL_REG_HANDLES: &[(&str, [u8; 16])] = &[")
    for symbol, provider, key, u in handles:
        w("    (%s, %s), // %s {%s}" % (rust_str(symbol), rust_bytes(key), provider, str(u).upper()))
    w("];")
    w("")
    # Tests.
    w("#[cfg(test)]")
    w("mod tests {")
    w("    use super::*;")
    w("")
    w("    /// A GUID in text form (\"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\") as its bytes in memory order;")
    w("    /// parsed here, independently of the generator, so the tests check the table's byte order.")
    w("    fn guid(text: &str) -> [u8; 16] {")
    w("        let hex: Vec<u8> = text")
    w("            .chars()")
    w("            .filter(|c| *c != '-')")
    w("            .collect::<Vec<char>>()")
    w("            .chunks(2)")
    w("            .map(|p| u8::from_str_radix(&p.iter().collect::<String>(), 16).unwrap())")
    w("            .collect();")
    w("        assert_eq!(hex.len(), 16, \"{text}\");")
    w("        let mut b = [0u8; 16];")
    w("        b[..4].copy_from_slice(&[hex[3], hex[2], hex[1], hex[0]]);")
    w("        b[4..6].copy_from_slice(&[hex[5], hex[4]]);")
    w("        b[6..8].copy_from_slice(&[hex[7], hex[6]]);")
    w("        b[8..].copy_from_slice(&hex[8..]);")
    w("        b")
    w("    }")
    w("")
    w("    #[test]")
    w("    fn table_is_sorted_and_unique() {")
    w("        assert_eq!(PROVIDER_NAMES.len(), %d);" % len(keys))
    w("        for pair in PROVIDER_NAMES.windows(2) {")
    w("            assert!(pair[0].0 < pair[1].0, \"{:?} / {:?}\", pair[0], pair[1]);")
    w("        }")
    w("        for (_, name) in PROVIDER_NAMES {")
    w("            assert!(!name.is_empty() && name.trim() == *name && !name.chars().any(char::is_control));")
    w("        }")
    w("    }")
    w("")
    w("    #[test]")
    w("    fn well_known_providers_resolve() {")
    w("        // GUIDs as the sources spell them.")
    w("        let known = [")
    for name in TEST_PROVIDERS:
        u = by_name.get(name)
        if u is None:
            fail("test provider %r not in the table" % name)
        w("            (%s, %s)," % (rust_str(str(u).upper()), rust_str(name)))
    w("        ];")
    w("        for (g, name) in known {")
    w("            assert_eq!(provider_name(&guid(g)), Some(name), \"{g}\");")
    w("        }")
    w("    }")
    w("")
    w("    #[test]")
    w("    fn in_memory_byte_order() {")
    w("        // Microsoft-Windows-Threat-Intelligence {F4E1897C-BB5D-5668-F1D8-040F4D8DD344} as the")
    w("        // bytes of a GUID structure in memory.")
    w("        let ti = [0x7c, 0x89, 0xe1, 0xf4, 0x5d, 0xbb, 0x68, 0x56, 0xf1, 0xd8, 0x04, 0x0f, 0x4d, 0x8d, 0xd3, 0x44];")
    w("        assert_eq!(guid(\"F4E1897C-BB5D-5668-F1D8-040F4D8DD344\"), ti);")
    w("        assert_eq!(provider_name(&ti), Some(\"Microsoft-Windows-Threat-Intelligence\"));")
    w("    }")
    w("")
    w("    #[test]")
    w("    fn unknown_guids_give_none() {")
    w("        assert_eq!(provider_name(&[0u8; 16]), None);")
    w("        assert_eq!(provider_name(&[0xffu8; 16]), None);")
    w("        assert_eq!(provider_name(&guid(\"01234567-89AB-CDEF-0123-456789ABCDEF\")), None);")
    w("    }")
    w("")
    w("    #[test]")
    w("    fn kernel_handles_name_known_providers() {")
    w("        let expected = [")
    for symbol, provider, _key, u in handles:
        w("            (%s, %s, %s)," % (rust_str(symbol), rust_str(str(u).upper()), rust_str(provider)))
    w("        ];")
    w("        assert_eq!(KERNEL_REG_HANDLES.len(), expected.len());")
    w("        for ((symbol, bytes), (want_symbol, g, provider)) in KERNEL_REG_HANDLES.iter().zip(expected) {")
    w("            assert_eq!(*symbol, want_symbol);")
    w("            assert_eq!(*bytes, guid(g), \"{symbol}\");")
    w("            assert_eq!(provider_name(bytes), Some(provider), \"{symbol}\");")
    w("        }")
    w("        let mut symbols: Vec<&str> = KERNEL_REG_HANDLES.iter().map(|(s, _)| *s).collect();")
    w("        symbols.sort_unstable();")
    w("        symbols.dedup();")
    w("        assert_eq!(symbols.len(), KERNEL_REG_HANDLES.len());")
    w("    }")
    w("}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--etl-parser", required=True, metavar="DIR",
                    help="root of airbus-cert/etl-parser 1.0.1 (checkout or unpacked sdist)")
    ap.add_argument("--nasbench", required=True, metavar="DIR",
                    help="root of (a copy of) nasbench/EVTX-ETW-Resources")
    ap.add_argument("-o", "--output", default=DEFAULT_OUTPUT, help="default: %(default)s")
    args = ap.parse_args()

    stats = Stats()
    etl_entries, etl_version = read_etl_parser(args.etl_parser, stats)
    nb_entries, nb_hashes = read_nasbench(args.nasbench, stats)
    table = build_table(etl_entries + nb_entries, stats)
    handles = resolve_handles(table)
    text = render(table, handles, stats, etl_version or "unknown")
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)

    print("wrote %s: %d entries, %d kernel handles, %d bytes"
          % (os.path.relpath(args.output), len(table), len(handles), len(text.encode())))
    for label in sorted(stats.read):
        print("  %-18s read %5d, added %5d" % (label, stats.read[label], stats.added.get(label, 0)))
    print("  same GUID and name more than once: %d" % stats.duplicates)
    print("  conflicts (same GUID, another name; first kept): %d" % len(stats.conflicts))
    for g, kept, kept_label, other, other_label in stats.conflicts:
        print("    {%s} kept %r (%s), not %r (%s)" % (g, kept, kept_label, other, other_label))
    print("  dropped: %d" % len(stats.dropped))
    for label, g, name, why in stats.dropped:
        print("    %s: %r {%s}: %s" % (label, name, g, why))
    for rel, sha in nb_hashes:
        print("  sha256 %s  nasbench/%s" % (sha, rel))


if __name__ == "__main__":
    main()
