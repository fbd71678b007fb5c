#!/usr/bin/env python3
"""A real QEMU `dump-guest-memory` ELF core, opened by etwdump (issue 14).

usage: qemu_check.py ETWDUMP [--mem MIB]

Starts Debian's qemu-system-x86_64 paused (-S, no OS, TCG), asks its monitor for
`dump-guest-memory`, then parses the core's program headers here (struct, by the ELF spec) and
checks that `etwdump info CORE --format json` reports the container as `elf_core` with exactly
the PT_LOAD layout: every segment's physical address, size and file offset (QEMU writes file
offsets that are not page aligned: 0x480 on 7.2). The guest holds no Windows, so info must
also say that no page tables were found, and `sessions` must fail with one line.
Prints "ok  "/"FAIL" lines; exit 1 on a failure. Without qemu-system-x86_64 it prints
"SKIPPED: ..." and exits 0.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def pt_loads(path):
    with open(path, "rb") as f:
        head = f.read(64)
        assert head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1, "ELF64 LE expected"
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    out = []
    for i in range(phnum):
        p_type, _flags, off, _va, pa, filesz, _memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", table, i * phentsize)
        if p_type == 1 and filesz:
            out.append((pa, filesz, off))
    return sorted(out)


def main():
    etwdump = sys.argv[1]
    mem = int(sys.argv[sys.argv.index("--mem") + 1]) if "--mem" in sys.argv else 32
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        print("SKIPPED: qemu-system-x86_64 is not installed (Debian package qemu-system-x86)")
        return 0
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        failures += 0 if ok else 1

    with tempfile.TemporaryDirectory() as d:
        core = os.path.join(d, "guest.elf")
        cmds = f"dump-guest-memory {core}\nquit\n"
        r = subprocess.run([qemu, "-m", str(mem), "-display", "none", "-S", "-nodefaults",
                            "-monitor", "stdio", "-accel", "tcg"],
                           input=cmds, capture_output=True, text=True, timeout=120)
        if not os.path.exists(core):
            check(False, f"qemu wrote no core (exit {r.returncode}): {r.stderr.strip()[:200]}")
            return 1
        want = pt_loads(core)
        check(len(want) >= 2, f"QEMU {mem} MiB guest: {len(want)} PT_LOAD segments "
              + ", ".join(f"{pa:#x}+{n:#x}@{off:#x}" for pa, n, off in want))
        r = subprocess.run([etwdump, "info", core, "--format", "json"],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"etwdump info exits {r.returncode} {r.stderr.strip()[:200]}")
        if r.returncode != 0:
            return 1
        info = json.loads(r.stdout)
        m = info["memory"]
        check(m["format"] == "elf_core", f"format {m['format']}")
        got = sorted((int(x["physical_address"], 16), int(x["size"], 16),
                      int(x["file_offset"], 16)) for x in m["ranges"])
        # etwdump keeps whole pages: a segment's size rounded down to 4 KiB.
        want_pages = [(pa, n - n % 4096, off) for pa, n, off in want if n >= 4096]
        check(got == want_pages, f"ranges {[(hex(a), hex(b), hex(c)) for a, b, c in got]} "
              f"== PT_LOADs {[(hex(a), hex(b), hex(c)) for a, b, c in want_pages]}")
        check(m["physical_pages_stored"] == sum(n // 4096 for _, n, _ in want_pages),
              f"pages stored {m['physical_pages_stored']}")
        dtb_how = info.get("found_by", {}).get("dtb", "")
        check(dtb_how.startswith("not found"), f"no Windows in the guest: dtb {dtb_how[:120]}")
        # A byte of guest memory read through etwdump's physical read equals the file's.
        pa, n, off = want[-1]
        r = subprocess.run([etwdump, "read", core, hex(pa + 0x10), "16", "--physical",
                            "--format", "raw"], capture_output=True, timeout=60)
        with open(core, "rb") as f:
            f.seek(off + 0x10)
            exp = f.read(16)
        check(r.returncode == 0 and r.stdout == exp,
              f"read --physical {pa + 0x10:#x}: {r.stdout.hex()} == {exp.hex()} "
              f"{r.stderr.decode(errors='replace').strip()[:120]}")
        r = subprocess.run([etwdump, "sessions", core], capture_output=True, text=True,
                           timeout=300)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(r.returncode == 2 and len(lines) == 1 and "page tables" in lines[0],
              f"sessions fails in one line: {lines[:2]}")
    print(f"qemu_check: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
