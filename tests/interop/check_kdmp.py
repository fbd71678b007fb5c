#!/usr/bin/env python3
"""Cross-check the forge's dumps with kdmp-parser 0.7.4 (x64 only) and with etwdump.

usage: check_kdmp.py MANIFEST.json [--require-etwdump] [--skip-etwdump]

kdmp-parser part (every x64 dump of the manifest):
  * opens the dump, checks the DumpType it reports and its DirectoryTableBase (header value with
    bits 11:0 cleared),
  * reads through VIRTUAL addresses with the dump's DTB: the kernel MZ header (64 bytes at
    kernel_base), the KDBG (0x20 bytes at kdbg_va, 'KDBG' tag when decoded) and every probe:
    readable probes must equal the expected bytes; unreadable probes must fail exactly at the
    expected page, with the bytes before it equal to the expected prefix,
  * checks kdmp's VA->PA translation against the forge's intended physical address.
  Known kdmp-parser limitation: it does not follow transition PTEs (it requires Present at
  every level). For those probes the script checks that kdmp finds no translation AND that
  kdmp's physical page at the manifest's "pa" holds the expected bytes.

etwdump part (every dump, x86 included): runs
  $ETWDUMP read DUMP ADDRESS LENGTH --format json
which prints {"address": "0x..", "length": N, "hex": ".."} and exits 0, or prints one error line
on stderr and exits 2 when a byte is unreadable. Readable probes must match; unreadable probes
must exit 2, a read of the readable prefix must succeed with the expected bytes, and a 1-byte
read at the first unreadable address must exit 2.
ETWDUMP defaults to <repo>/target/debug/etwdump. If it is missing or has no `read` command,
the script says so and skips that part (failing only with --require-etwdump).

Prints one line per check; exits 1 on any disagreement.
"""
import contextlib
import json
import os
import subprocess
import sys

PAGE = 0x1000
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Probes that kdmp-parser 0.7.4 cannot read by design (VirtTranslate requires Present at
# every level, including the last: no transition PTEs).
KDMP_NO_TRANSITION = {"transition_pte"}


class Checker:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def check(self, ok, what, detail=""):
        self.count += 1
        if not ok:
            self.failures += 1
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail else ""), flush=True)

    def note(self, what):
        print("note %s" % what, flush=True)


@contextlib.contextmanager
def quiet_stdout():
    """kdmp-parser prints translation failures with printf on fd 1: silence them."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def H(s):
    return int(s, 16)


# ---------------------------------------------------------------------------- kdmp-parser
def kdmp_read(p, dtb, va, n):
    """(bytes, None) or (partial bytes, first unreadable va)."""
    out = b""
    cur = va
    end = va + n
    while cur < end:
        k = min(PAGE - (cur & 0xFFF), end - cur)
        with quiet_stdout():
            page = p.read_virtual_page(cur & ~0xFFF, dtb)
        if page is None:
            return out, cur
        out += bytes(page[cur & 0xFFF:(cur & 0xFFF) + k])
        cur += k
    return out, None


def kdmp_part(c, base, entry):
    import kdmp_parser

    name = entry["file"]
    path = os.path.join(base, name)
    with quiet_stdout():
        p = kdmp_parser.KernelDumpParser(path)
    c.check(int(p.type) == entry["dump_type"], "kdmp %s DumpType" % name, "%s" % p.type)
    dtb = H(entry["dtb"])
    c.check(p.directory_table_base == dtb & ~0xFFF, "kdmp %s DirectoryTableBase" % name,
            hex(p.directory_table_base))
    page_dtb = dtb & ~0xFFF

    kb = H(entry["kernel_base"])
    mz, bad = kdmp_read(p, page_dtb, kb, 64)
    probes = {q["name"]: q for q in entry["probes"]}
    c.check(bad is None and mz[:2] == b"MZ" and mz.hex() == probes["kernel_mz_header"]["expect"],
            "kdmp %s kernel MZ header at %#x" % (name, kb))
    kdbg, bad = kdmp_read(p, page_dtb, H(entry["kdbg_va"]), 0x20)
    tag_ok = (kdbg[0x10:0x14] == b"KDBG") == entry["kdbg_decoded"]
    c.check(bad is None and tag_ok and kdbg.hex() == probes["kdbg"]["expect"],
            "kdmp %s KDBG at %s" % (name, entry["kdbg_va"]))

    for q in entry["probes"]:
        va, n, exp = H(q["va"]), q["len"], q["expect"]
        what = "kdmp %s probe %s" % (name, q["name"])
        got, bad = kdmp_read(p, page_dtb, va, n)
        if isinstance(exp, str):
            if bad is None:
                c.check(got.hex() == exp, what, "" if got.hex() == exp else "bytes differ")
            elif q["name"] in KDMP_NO_TRANSITION and q["pa"] is not None:
                # Known limitation: verify the page behind the transition PTE physically.
                pa = H(q["pa"])
                phys = p.read_physical_page(pa & ~0xFFF)
                data = bytes(phys[pa & 0xFFF:(pa & 0xFFF) + n]) if phys is not None else None
                ok = bad == va and data is not None and data.hex() == exp
                c.check(ok, what + " (kdmp-parser has no transition support: "
                        "checked no translation + physical page)")
            else:
                c.check(False, what, "kdmp cannot read %#x" % bad)
        else:
            first = H(exp["unreadable_at"])
            ok = bad == first and got.hex() == exp["prefix"]
            c.check(ok, what, "" if ok else "kdmp stops at %s" % (hex(bad) if bad else "nothing"))
        # VA -> PA agrees with the forge's intended translation (when kdmp can translate).
        if q["pa"] is not None and q["name"] not in KDMP_NO_TRANSITION:
            with quiet_stdout():
                pa = p.translate_virtual(va, page_dtb)
            c.check(pa == H(q["pa"]), what + " translation",
                    "%s vs %s" % (hex(pa) if pa is not None else None, q["pa"]))


# ---------------------------------------------------------------------------- etwdump
def etwdump_path():
    return os.environ.get("ETWDUMP") or os.path.join(ROOT, "target", "debug", "etwdump")


def run_etwdump(exe, dump, va, n):
    r = subprocess.run([exe, "read", dump, "%#x" % va, str(n), "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def etwdump_available(exe, c):
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        c.note("etwdump: SKIPPED, binary not found at %s (set ETWDUMP or build etwdump)" % exe)
        return False
    r = subprocess.run([exe, "read", "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        first = (r.stderr or r.stdout).strip().splitlines()[:1]
        c.note("etwdump: SKIPPED, %s has no `read` command yet (exit %d: %s)"
               % (exe, r.returncode, first[0] if first else ""))
        return False
    return True


def etwdump_part(c, exe, base, entry):
    name = entry["file"]
    dump = os.path.join(base, name)
    for q in entry["probes"]:
        va, n, exp = H(q["va"]), q["len"], q["expect"]
        what = "etwdump %s probe %s" % (name, q["name"])
        code, out, err = run_etwdump(exe, dump, va, n)
        if isinstance(exp, str):
            if code != 0:
                c.check(False, what, "exit %d: %s" % (code, err.strip()[:200]))
                continue
            try:
                j = json.loads(out)
                ok = (j.get("hex", "").lower() == exp and j.get("length") == n
                      and H(j.get("address", "0x0")) == va)
                c.check(ok, what, "" if ok else "output differs: %s" % out.strip()[:200])
            except ValueError:
                c.check(False, what, "not JSON: %s" % out.strip()[:200])
        else:
            first = H(exp["unreadable_at"])
            lines = [x for x in err.strip().splitlines() if x.strip()]
            ok = code == 2 and len(lines) == 1
            c.check(ok, what, "" if ok else "exit %d, stderr %r" % (code, err.strip()[:200]))
            if ok and ("%x" % first) not in lines[0].lower():
                c.note("%s: error line does not mention %#x: %s" % (what, first, lines[0]))
            if first > va:
                code2, out2, err2 = run_etwdump(exe, dump, va, first - va)
                ok2 = False
                if code2 == 0:
                    try:
                        ok2 = json.loads(out2).get("hex", "").lower() == exp["prefix"]
                    except ValueError:
                        pass
                c.check(ok2, what + " readable prefix", "" if ok2 else "exit %d" % code2)
            code3, _, _ = run_etwdump(exe, dump, first, 1)
            c.check(code3 == 2, what + " first unreadable byte", "" if code3 == 2 else "exit %d" % code3)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        return 2
    manifest_path = args[0]
    require = "--require-etwdump" in args
    skip = "--skip-etwdump" in args
    base = os.path.dirname(os.path.abspath(manifest_path))
    manifest = json.load(open(manifest_path))
    c = Checker()

    for entry in manifest:
        if entry["arch"] == "x64":
            kdmp_part(c, base, entry)
        else:
            c.note("kdmp %s: skipped (kdmp-parser is x64 only)" % entry["file"])

    etwdump_ok = True
    if skip:
        c.note("etwdump: skipped (--skip-etwdump)")
    else:
        exe = etwdump_path()
        if etwdump_available(exe, c):
            for entry in manifest:
                etwdump_part(c, exe, base, entry)
        else:
            etwdump_ok = False
            if require:
                c.check(False, "etwdump available", exe)

    print("check_kdmp: %d checks, %d failures%s" % (
        c.count, c.failures, "" if etwdump_ok or skip else " (etwdump part NOT run)"))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
