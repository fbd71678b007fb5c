#!/usr/bin/env python3
"""Second, independent reading of the forge's dumps (x86 PAE, x86 non-PAE and x64).

Written from shared/reference/crash-dump-format.md only (§1.1 header offsets, §1.2/§1.2a file
layouts, §1.4 KDBG / module list / PE debug directory, §1.5 paging), without looking at the
forge's Rust code paths: it parses the file, walks the page tables from the header's
DirectoryTableBase and checks every probe of the manifest plus the kernel objects.

usage: walk_dump.py MANIFEST.json [--only x86|x64|all]   (default: all)
Prints one line per check; exits 1 on any failure.
"""
import json
import os
import struct
import sys

PAGE = 0x1000


class Unreadable(Exception):
    def __init__(self, va):
        super().__init__(hex(va))
        self.va = va


class Dump:
    def __init__(self, path):
        self.path = path
        self.f = open(path, "rb")
        self.size = os.fstat(self.f.fileno()).st_size
        head = self.raw(0, 8)
        if head == b"PAGEDU64":
            self.x64 = True
            self.header_size = 0x2000
        elif head == b"PAGEDUMP":
            self.x64 = False
            self.header_size = 0x1000
        else:
            raise ValueError("not a kernel dump: %r" % head)
        h = self.raw(0, self.header_size)
        self.h = h
        u32 = lambda o: struct.unpack_from("<I", h, o)[0]
        u64 = lambda o: struct.unpack_from("<Q", h, o)[0]
        self.major, self.minor = u32(8), u32(0xC)
        if self.x64:
            self.dtb = u64(0x10)
            self.pfn_database = u64(0x18)
            self.ps_loaded_module_list = u64(0x20)
            self.ps_active_process_head = u64(0x28)
            self.machine = u32(0x30)
            self.cpus = u32(0x34)
            self.bugcheck = u32(0x38)
            self.kdbg = u64(0x80)
            self.dump_type = u32(0xF98)
            self.required = u64(0xFA0)
            self.system_time = u64(0xFA8)
            self.mode = "x64"
            pmb = 0x88
            nruns = u32(pmb)
            self.npages = u64(pmb + 8)
            self.runs = [(u64(pmb + 0x10 + 16 * i), u64(pmb + 0x18 + 16 * i)) for i in range(nruns)]
            self.mxcsr = (u32(0x348 + 0x34), u32(0x348 + 0x118))
        else:
            self.dtb = u32(0x10)
            self.pfn_database = u32(0x14)
            self.ps_loaded_module_list = u32(0x18)
            self.ps_active_process_head = u32(0x1C)
            self.machine = u32(0x20)
            self.cpus = u32(0x24)
            self.bugcheck = u32(0x28)
            self.pae = h[0x5C]
            self.kdbg = u32(0x60)
            self.dump_type = u32(0xF88)
            self.required = u64(0xFA0)
            self.system_time = u64(0xFC0)
            self.mode = "pae" if self.pae else "nonpae"
            pmb = 0x64
            nruns = u32(pmb)
            self.npages = u32(pmb + 4)
            self.runs = [(u32(pmb + 8 + 8 * i), u32(pmb + 12 + 8 * i)) for i in range(nruns)]
        # Physical page -> file offset.
        self.page_index = {}
        if self.dump_type == 1:
            off = self.header_size
            self.first_page = off
            self.runs_file = []
            for base, count in self.runs:
                self.runs_file.append((base, count, off))
                off += count * PAGE
            self.stored = sum(c for _, c in self.runs)
            self.expected_size = off
        elif self.dump_type in (5, 6):
            s = self.raw(self.header_size, 0x38)
            self.bitmap_sig = s[0:4]
            self.bitmap_valid = s[4:8]
            self.first_page, self.present, self.bits = struct.unpack_from("<QQQ", s, 0x20)
            bitmap = self.raw(self.header_size + 0x38, (self.bits + 7) // 8)
            idx = 0
            for byte_i, byte in enumerate(bitmap):
                if not byte:
                    continue
                for bit in range(8):
                    if byte >> bit & 1:
                        pfn = byte_i * 8 + bit
                        if pfn < self.bits:
                            self.page_index[pfn] = idx
                            idx += 1
            self.stored = idx
            self.expected_size = self.first_page + idx * PAGE
        else:
            raise ValueError("unsupported DumpType %d" % self.dump_type)

    def raw(self, off, n):
        self.f.seek(off)
        return self.f.read(n)

    def page_offset(self, pfn):
        if self.dump_type == 1:
            for base, count, off in self.runs_file:
                if base <= pfn < base + count:
                    return off + (pfn - base) * PAGE
            return None
        i = self.page_index.get(pfn)
        return None if i is None else self.first_page + i * PAGE

    def phys(self, pa, n):
        """n bytes at physical address pa (must stay in one page); None if not stored."""
        assert (pa & 0xFFF) + n <= PAGE
        off = self.page_offset(pa >> 12)
        if off is None:
            return None
        return self.raw(off + (pa & 0xFFF), n)

    def entry(self, table_pa, index, size):
        b = self.phys(table_pa + index * size, size)
        if b is None:
            return None
        return struct.unpack("<Q" if size == 8 else "<I", b)[0]

    def translate(self, va):
        """Physical address of va, or None (§1.5)."""
        if self.mode == "x64":
            mask = 0x000FFFFFFFFFF000
            table = self.dtb & ~0xFFF  # clear PCID bits 11:0
            levels = [(39, 8), (30, 8), (21, 8), (12, 8)]
        elif self.mode == "pae":
            mask = 0x000FFFFFFFFFF000
            table = self.dtb  # 32-byte aligned, NOT page aligned
            levels = [(30, 8), (21, 8), (12, 8)]
        else:
            mask = 0xFFFFF000
            table = self.dtb & ~0xFFF
            levels = [(22, 4), (12, 4)]
        for depth, (shift, size) in enumerate(levels):
            nbits = 2 if (self.mode == "pae" and depth == 0) else (10 if size == 4 else 9)
            index = (va >> shift) & ((1 << nbits) - 1)
            e = self.entry(table, index, size)
            if e is None:
                return None
            last = depth == len(levels) - 1
            if not e & 1:
                # Transition (bit 11 set, prototype bit 10 clear) counts at the last level only.
                if last and e & (1 << 11) and not e & (1 << 10):
                    return (e & mask) | (va & 0xFFF)
                return None
            if not last and e & 0x80 and not (self.mode == "pae" and depth == 0):
                if self.mode == "x64" and shift == 30:
                    return (e & 0x000FFFFFC0000000) | (va & 0x3FFFFFFF)
                if self.mode == "nonpae":
                    return (e & 0xFFC00000) | (va & 0x3FFFFF)
                if shift == 21:
                    return (e & 0x000FFFFFFFE00000) | (va & 0x1FFFFF)
                raise ValueError("PS bit at unexpected level")
            if last:
                return (e & mask) | (va & 0xFFF)
            table = e & mask
        return None

    def read(self, va, n):
        out = b""
        cur = va
        end = va + n
        while cur < end:
            k = min(PAGE - (cur & 0xFFF), end - cur)
            pa = self.translate(cur)
            b = None if pa is None else self.phys(pa, k)
            if b is None:
                raise Unreadable(cur)
            out += b
            cur += k
        return out

    def ptr(self, va):
        if self.x64:
            return struct.unpack("<Q", self.read(va, 8))[0]
        return struct.unpack("<I", self.read(va, 4))[0]


class Checker:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def check(self, ok, what, detail=""):
        self.count += 1
        if not ok:
            self.failures += 1
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail else ""))


def sx32(v):
    return v | 0xFFFFFFFF00000000 if v & 0x80000000 else v


def check_dump(c, d, entry):
    name = entry["file"]
    H = lambda s: int(s, 16)
    arch = {"x64": "x64", "pae": "x86pae", "nonpae": "x86"}[d.mode]
    c.check(arch == entry["arch"], "%s header arch" % name, "%s vs %s" % (arch, entry["arch"]))
    c.check(d.dump_type == entry["dump_type"], "%s header DumpType" % name, str(d.dump_type))
    c.check(d.dtb == H(entry["dtb"]), "%s header DirectoryTableBase" % name, hex(d.dtb))
    c.check(d.kdbg == H(entry["kdbg_va"]), "%s header KdDebuggerDataBlock" % name, hex(d.kdbg))
    c.check(d.ps_loaded_module_list == H(entry["ps_loaded_module_list"]),
            "%s header PsLoadedModuleList" % name)
    c.check(d.major == 0xF and d.minor == entry["build"], "%s header Major/MinorVersion" % name)
    c.check(d.machine == (0x8664 if d.x64 else 0x14C), "%s header MachineImageType" % name)
    c.check(d.cpus == entry["cpus"], "%s header NumberProcessors" % name)
    c.check(d.required == d.size == entry["file_len"] == d.expected_size,
            "%s RequiredDumpSpace = file size = layout size" % name,
            "%d %d %d %d" % (d.required, d.size, entry["file_len"], d.expected_size))
    c.check(d.stored == entry["stored_pages"], "%s stored pages" % name, str(d.stored))
    runs = [(H(a), H(b)) for a, b in entry["runs"]]
    c.check(d.runs == runs and d.npages == sum(b for _, b in runs),
            "%s PhysicalMemoryBlock runs" % name)
    if d.x64:
        c.check(d.mxcsr == (0x1F80, 0x1F80), "%s CONTEXT MxCsr == FltSave.MxCsr" % name)
    if d.dump_type in (5, 6):
        c.check(d.bitmap_sig in (b"SDMP", b"FDMP") and d.bitmap_valid == b"DUMP",
                "%s bitmap signature" % name, repr(d.bitmap_sig))
        c.check(d.present == d.stored and d.first_page % PAGE == 0,
                "%s bitmap TotalPresentPages/FirstPage" % name)
        c.check(d.bits * PAGE == entry["physical_memory_bytes"], "%s bitmap Pages" % name)
    # Every run lies below physical memory size and runs have holes between them.
    c.check(all(b + n <= entry["physical_memory_bytes"] // PAGE for b, n in runs)
            and all(runs[i][0] + runs[i][1] < runs[i + 1][0] for i in range(len(runs) - 1)),
            "%s runs below memory size with holes" % name)

    # Probes.
    for p in entry["probes"]:
        va, n, exp = H(p["va"]), p["len"], p["expect"]
        what = "%s probe %s" % (name, p["name"])
        try:
            got = d.read(va, n)
            if isinstance(exp, str):
                c.check(got.hex() == exp, what, "" if got.hex() == exp else "bytes differ")
            else:
                c.check(False, what, "read succeeded, expected unreadable at " + exp["unreadable_at"])
        except Unreadable as u:
            if isinstance(exp, str):
                c.check(False, what, "unreadable at %#x, expected bytes" % u.va)
            else:
                ok = u.va == H(exp["unreadable_at"])
                prefix = d.read(va, u.va - va) if u.va > va else b""
                ok = ok and prefix.hex() == exp.get("prefix", "")
                c.check(ok, what, "" if ok else "unreadable at %#x" % u.va)

    # Kernel objects.
    kb = H(entry["kernel_base"])
    try:
        if entry["kdbg_decoded"]:
            k = d.read(d.kdbg, 0x340)
            tag, size = struct.unpack_from("<4sI", k, 0x10)
            kern, loaded, active = struct.unpack_from("<QQQ", k, 0x18)[0], *struct.unpack_from("<QQ", k, 0x48)
            want = kb if d.x64 else sx32(kb)
            c.check(tag == b"KDBG" and size in (0x340, 0x380), "%s KDBG tag/size" % name, "%r %#x" % (tag, size))
            c.check(kern == want, "%s KDBG KernBase" % name, hex(kern))
            hdr_list = d.ps_loaded_module_list if d.x64 else sx32(d.ps_loaded_module_list)
            c.check(loaded == hdr_list, "%s KDBG PsLoadedModuleList = header" % name, hex(loaded))
            lab_ptr = struct.unpack_from("<Q", k, 0x208)[0]
            lab = d.read(lab_ptr & 0xFFFFFFFF if not d.x64 else lab_ptr, 0x80).split(b"\0")[0].decode()
            c.check(lab == entry["nt_build_lab"], "%s KDBG NtBuildLab -> string" % name, lab)
            pfn_var = struct.unpack_from("<Q", k, 0xC0)[0]
            hdr_pfn = d.pfn_database if d.x64 else sx32(d.pfn_database)
            c.check(pfn_var == hdr_pfn, "%s KDBG MmPfnDatabase = header PfnDataBase" % name)
        else:
            k = d.read(d.kdbg, 0x20)
            c.check(k[0x10:0x14] != b"KDBG", "%s encoded KDBG has no tag" % name)
        # PE header -> debug directory -> CodeView -> RSDS (by RVA).
        mz = d.read(kb, 0x40)
        c.check(mz[:2] == b"MZ", "%s kernel MZ" % name)
        lfanew = struct.unpack_from("<I", mz, 0x3C)[0]
        pe = d.read(kb + lfanew, 0x18 + 0xF0)
        c.check(pe[:4] == b"PE\0\0", "%s kernel PE signature" % name)
        machine = struct.unpack_from("<H", pe, 4)[0]
        magic = struct.unpack_from("<H", pe, 0x18)[0]
        c.check((machine, magic) == ((0x8664, 0x20B) if d.x64 else (0x14C, 0x10B)),
                "%s kernel COFF machine/optional magic" % name)
        image_base = struct.unpack_from("<Q" if d.x64 else "<I", pe, 0x18 + (24 if d.x64 else 28))[0]
        c.check(image_base == kb, "%s kernel ImageBase" % name, hex(image_base))
        dd = 0x18 + (112 if d.x64 else 96) + 6 * 8
        dbg_rva, dbg_size = struct.unpack_from("<II", pe, dd)
        try:
            dirs = d.read(kb + dbg_rva, dbg_size)
            cv = [dirs[i:i + 28] for i in range(0, dbg_size, 28)]
            cv = [e for e in cv if struct.unpack_from("<I", e, 12)[0] == 2]
            c.check(len(cv) == 1, "%s one CodeView debug entry" % name)
            size, rva, fileptr = struct.unpack_from("<III", cv[0], 16)
            rsds = d.read(kb + rva, size)
            guid, age = rsds[4:20], struct.unpack_from("<I", rsds, 20)[0]
            pdb = rsds[24:].split(b"\0")[0].decode()
            d1, d2, d3 = struct.unpack_from("<IHH", guid)
            key = "%08X%04X%04X%s%X" % (d1, d2, d3, guid[8:].hex().upper(), age)
            c.check(rsds[:4] == b"RSDS" and pdb == entry["pdb"]["name"] and key == entry["pdb"]["key"],
                    "%s RSDS via AddressOfRawData" % name, "%s %s" % (pdb, key))
            c.check(fileptr != rva, "%s PointerToRawData differs from RVA" % name)
        except Unreadable as u:
            c.check(False, "%s debug directory readable" % name, "unreadable at %#x" % u.va)
        # KUSER_SHARED_DATA at both addresses.
        ku = d.read(H(entry["kuser_va"]), 0x400)
        ku_user = d.read(0x7FFE0000, 0x400)
        nt_build, _, _, _, _, major = struct.unpack_from("<IIBBHI", ku, 0x260)
        lo, hi1, hi2 = struct.unpack_from("<IiI", ku, 0x14)
        c.check(ku == ku_user and nt_build == entry["build"] and major == 10
                and (hi1 << 32 | lo) == d.system_time and hi1 & 0xFFFFFFFF == hi2,
                "%s KUSER_SHARED_DATA (both VAs, build, version, SystemTime)" % name)
        # Loaded module list.
        head = d.ps_loaded_module_list
        cur = d.ptr(head)
        mods = []
        prev = head
        while cur != head and len(mods) < 64:
            if d.x64:
                e = d.read(cur, 0x68)
                blink = struct.unpack_from("<Q", e, 8)[0]
                base, _, size = struct.unpack_from("<QQI", e, 0x30)
                fl, _, fbuf = struct.unpack_from("<HHxxxxQ", e, 0x48)
                bl, _, bbuf = struct.unpack_from("<HHxxxxQ", e, 0x58)
            else:
                e = d.read(cur, 0x34)
                blink = struct.unpack_from("<I", e, 4)[0]
                base, _, size = struct.unpack_from("<III", e, 0x18)
                fl, _, fbuf = struct.unpack_from("<HHI", e, 0x24)
                bl, _, bbuf = struct.unpack_from("<HHI", e, 0x2C)
            c.check(blink == prev, "%s module list Blink of %#x" % (name, cur))
            mods.append({"base_name": d.read(bbuf, bl).decode("utf-16-le"),
                         "full_name": d.read(fbuf, fl).decode("utf-16-le"),
                         "base": "%#x" % base, "size": "%#x" % size})
            prev = cur
            cur = d.ptr(cur)
        c.check(d.ptr(head + (8 if d.x64 else 4)) == prev, "%s module list head Blink = last" % name)
        c.check(mods == entry["modules"], "%s module list = manifest" % name,
                ", ".join(m["base_name"] for m in mods))
    except Unreadable as u:
        c.check(False, "%s kernel objects readable" % name, "unreadable at %#x" % u.va)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    only = "all"
    if "--only" in args:
        only = args[args.index("--only") + 1]
    manifest_path = args[0]
    base = os.path.dirname(os.path.abspath(manifest_path))
    c = Checker()
    for entry in json.load(open(manifest_path)):
        if only == "x86" and entry["arch"] == "x64" or only == "x64" and entry["arch"] != "x64":
            continue
        d = Dump(os.path.join(base, entry["file"]))
        check_dump(c, d, entry)
    print("walk_dump: %d checks, %d failures" % (c.count, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
