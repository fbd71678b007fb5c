#!/usr/bin/env python3
"""Memory images (issue 14): the forge's images of each dump, read by etwdump and volatility3.

usage: image_check.py MANIFEST.json --symbols DIR [--fixtures DIR] [--skip-vol]

run.sh calls it after vol.sh (whose ISF directory it reuses) on a set written with
`forge OUTDIR --images`: every dump has a raw image, a .vmem + .vmss pair, a .vmsn holding the
memory and an ELF core (manifest "images": format, files, memory_file, dtb, page_table_root,
self_map_index, kernel_base, build, ranges).

1. `$ETWDUMP info IMAGE --format json` on every image: the container format, the physical
   ranges the forge wrote (raw: one range from 0), the DTB = the forge's page-table root (found
   by discovery, `found_by.dtb` says so), the kernel base (by CodeView scan) and the build.
2. On the dumps with ETW logger state: `$ETWDUMP sessions --format json --pdb PDB` on the
   .vmem, the .vmsn and the ELF core gives the records the crash dump gives (the raw image: the
   same sessions at the same addresses; it cannot tell absent pages from zero ones).
3. volatility3 `windows.info` (offline, the fixture ISFs) on the raw image, the .vmem (with its
   .vmss) and the ELF core of every x64 fixture dump it can analyse: it must run and report the
   Kernel Base, DTB and build that etwdump's `info` reports for the same image. (volatility3
   cannot read memory inside a .vmsn, nor ELF32 cores, nor the forge's x86 layouts: skipped,
   said so.)
Prints ok/FAIL/skip lines; exits 1 on a failure.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vol_check  # noqa: E402

FORMATS = {"raw": "raw", "vmware": "vmware_vmem", "vmware-embedded": "vmware_snapshot", "elf": "elf_core"}
H = vol_check.H


def etwdump_json(etwdump, args):
    r = subprocess.run([etwdump] + args + ["--format", "json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or [""])[-1]
    return json.loads(r.stdout), None


def check_info(c, etwdump, base, e, img):
    name = "%s %s" % (e["file"], img["format"])
    path = os.path.join(base, img["memory_file"] if img["format"] == "vmware" else img["files"][0])
    info, err = etwdump_json(etwdump, ["info", path])
    if not c.check(info is not None, "%s: etwdump info" % name, err or ""):
        return None
    m = info["memory"]
    c.check(m["format"] == FORMATS[img["format"]], "%s: format %s" % (name, m["format"]))
    want = [(H(r["start"]), H(r["size"]), H(r["file_offset"])) for r in img["ranges"]]
    got = [(H(r["physical_address"]), H(r["size"]), H(r["file_offset"])) for r in m["ranges"]]
    if img["format"] == "raw":
        # One range from 0 to the end of the file (holes are zeros in a raw image).
        end = max(s + n for s, n, _ in want)
        c.check(got == [(0, end, 0)], "%s: raw range 0..%#x" % (name, end), str(got[:2]))
    else:
        c.check(got == want, "%s: %d ranges as the forge wrote them" % (name, len(want)),
                "" if got == want else "got %s" % got[:3])
    c.check(H(info["dtb"]) == H(img["page_table_root"]), "%s: DTB %s = forge root" % (name, info["dtb"]),
            info["found_by"]["dtb"][:100])
    kb = info["kernel_base"]
    c.check(kb["address"] is not None and H(kb["address"]) == H(img["kernel_base"]) and kb["source"] == "CodeView scan",
            "%s: kernel base %s by %s" % (name, kb["address"], kb["source"]))
    c.check(info["windows"]["build"] == img["build"], "%s: build %s" % (name, info["windows"]["build"]))
    return info


def check_sessions(c, etwdump, base, e, img, pdb):
    name = "%s %s" % (e["file"], img["format"])
    want, err = etwdump_json(etwdump, ["sessions", os.path.join(base, e["file"]), "--pdb", pdb])
    if not c.check(want is not None, "%s: sessions on the dump" % e["file"], err or ""):
        return
    path = os.path.join(base, img["memory_file"] if img["format"] == "vmware" else img["files"][0])
    got, err = etwdump_json(etwdump, ["sessions", path, "--pdb", pdb])
    if not c.check(got is not None, "%s: sessions" % name, err or ""):
        return
    if img["format"] == "raw":
        key = lambda r: (r.get("kind"), r.get("logger_id"), r.get("address"))  # noqa: E731
        c.check([key(r) for r in got["records"]] == [key(r) for r in want["records"]],
                "%s: the dump's %d sessions at the same addresses" % (name, len(want["records"])))
    else:
        c.check(got["records"] == want["records"],
                "%s: the dump's %d session records, equal" % (name, len(want["records"])))


def check_vol(c, base, e, img, info, fx, symdir, cache):
    name = "%s %s" % (e["file"], img["format"])
    path = os.path.join(base, img["memory_file"] if img["format"] == "vmware" else img["files"][0])
    r, secs = vol_check.vol_info(path, symdir, cache)
    rows = None
    if r.returncode == 0:
        try:
            rows = {row["Variable"]: row["Value"] for row in json.loads(r.stdout)}
        except (ValueError, KeyError, TypeError):
            rows = None
    last = (r.stderr.strip().splitlines() or [""])[-1]
    if not c.check(rows is not None, "%s: vol windows.info runs" % name,
                   "%.1f s, layer %s" % (secs, rows.get("memory_layer")) if rows else "exit %d: %s" % (r.returncode, last)):
        return
    c.check(H(rows.get("Kernel Base", "0")) == H(info["kernel_base"]["address"]) & vol_check.ADDR48,
            "%s: vol Kernel Base %s = etwdump's" % (name, rows.get("Kernel Base")))
    c.check(H(rows.get("DTB", "0")) & ~0xFFF == H(info["dtb"]) & ~0xFFF,
            "%s: vol DTB %s = etwdump's %s" % (name, rows.get("DTB"), info["dtb"]))
    c.check(rows.get("Major/Minor") == "15.%d" % info["windows"]["build"],
            "%s: vol Major/Minor %s = build %d" % (name, rows.get("Major/Minor"), info["windows"]["build"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--symbols", required=True)
    ap.add_argument("--fixtures", default=os.path.join(vol_check.ROOT, "tests", "fixtures"))
    ap.add_argument("--skip-vol", action="store_true")
    a = ap.parse_args()
    etwdump = os.environ.get("ETWDUMP", os.path.join(vol_check.ROOT, "target", "debug", "etwdump"))
    c = vol_check.Checker()
    base = os.path.dirname(os.path.abspath(a.manifest))
    with open(a.manifest) as f:
        entries = [e for e in json.load(f) if e.get("images")]
    c.check(len(entries) > 0, "manifest has dumps with images", "%d dumps" % len(entries))
    fixtures = {os.path.basename(d): vol_check.load_fixture(os.path.join(a.fixtures, d))
                for d in sorted(os.listdir(a.fixtures))
                if os.path.isfile(os.path.join(a.fixtures, d, "symbols.json"))}
    cache = os.path.join(os.path.dirname(a.symbols), "cache")
    os.makedirs(cache, exist_ok=True)
    for e in entries:
        for img in e["images"]:
            info = check_info(c, etwdump, base, e, img)
            fx = fixtures.get(e.get("fixture"))
            if e.get("etw") and fx:
                check_sessions(c, etwdump, base, e, img, fx["pdb_path"])
            if info is None or a.skip_vol:
                continue
            why = None
            if e["arch"] != "x64":
                why = "volatility3 cannot analyse the forge's x86 layouts (see vol_check.py)"
            elif img["format"] == "vmware-embedded":
                why = "volatility3 reads no memory inside a .vmsn (only a .vmem beside it)"
            elif not fx or not os.path.exists(vol_check.isf_path(a.symbols, fx)):
                why = "no fixture ISF (not a fixture dump)"
            elif vol_check.vol_unusable(fx):
                why = vol_check.vol_unusable(fx)
            elif e.get("etw"):
                why = "ETW dumps are sessions_check.py's (one vol run per fixture kernel is enough)"
            if why:
                c.skip("%s %s: vol windows.info not run: %s" % (e["file"], img["format"], why))
                continue
            check_vol(c, base, e, img, info, fx, a.symbols, cache)
    print("image_check: %d checks, %d failures" % (c.count, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
