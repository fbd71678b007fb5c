#!/usr/bin/env python3
"""Independent readers of the forge's hibernation files (`forge --hiberfil OUTDIR`).

    hiber_check.py OUTDIR/manifest.json [--vol-hib PATH/hib.py] [--skip-leechcore]

Every file of the manifest is read by
  (a) volatility3's HibernationLayer (`layers/hib.py` of volatility3 pull request 1036, by
      forensicxlab; decoding through the `xpress_lz77` package from PyPI), with
      `plugins.Dump.version` in the config so that it reads the kernel set too. The layer is in
      no volatility3 release (2.28.2, the newest on PyPI, has no hibernation layer), so it is
      loaded from the file --vol-hib names (or $HIBER_VOL_HIB), on top of the installed
      volatility3 framework; without one this reader is SKIPPED and says so. The PR's file is
      not part of this repository: take it from the PR's head (e.g. commit 0d6c1ea9, 2024-08-05)
      yourself.
  (b) LeechCore's hibr device (PyPI `leechcorepyc`, `LeechCore('hibr://file=PATH')`; it ships
      libMSCompression.so for the Xpress codecs).
Truth: the manifest (the forge's HiberTruth of each file: the stored PFNs, the compression
sets) and the raw image of the same machine (`<machine>.raw`, page contents at their physical
addresses). Checked: every page a reader yields equals the raw image, every PFN the truth
stores is readable, a wiped file is refused; PFNs a reader yields that the file does not store
must read as zeros (LeechCore reads every PFN it has no set for as a zero page, by design).

Known reader quirks (from their sources) are not hidden: each failure they explain is counted
under its own name and printed; anything else is a mismatch and the exit status is 1.
  vol-win8-boot-offset   volatility3 reads FirstBootRestorePage at 0x68 for every version; on
                         Windows 8 (LengthSelf 0x360) that is FirstKernelRestorePage (the PDB
                         type has FirstBootRestorePage at 0x60), so the boot set's pages are
                         never found (the kernel set is read twice).
  vol-huffman-64k        volatility3 decodes every LZ77+Huffman set into 65536 bytes
                         (`lz77_huffman_decompress_py(data, 65536)`); a set of fewer than 16
                         pages then fails in the codec.
  vol-no-26100-table     volatility3's version table has no 26100 entry (LengthSelf 0x4D8:
                         KernelPagesProcessed at 0x238); read with version 0 (0x230), the
                         kernel set's page count is another field.
  vol-wake-refused       volatility3's stacker accepts only `HIBR` (LeechCore and the reference
                         read `WAKE` files too).
  lc-method1-huffman     LeechCore treats any non-zero method bits as LZ77+Huffman, so Plain
                         LZ77 sets with method 1 (XpressMax) fail to decode.
  lc-highest-pfn         LeechCore maps a descriptor only if PFN + pages < HighestPhysicalPage
                         + 1, so the run that ends at the highest PFN is not mapped (its pages
                         read as zero pages).
"""

import argparse
import json
import os
import sys
from collections import Counter, defaultdict

PAGE = 4096

# volatility3's hibernation version numbers (layers/hib.py, plugins/windows/hibernation.py).
VOL_VERSION = {
    "win8": 1,
    "win10-1507": 2,
    "win10-1607": 3,
    "win10-1703": 0,
    "win10-1809": 0,
    "win11-22000": 0,
    "win11-26100": 0,  # no table: vol-no-26100-table
}


class Truth:
    def __init__(self, entry):
        self.e = entry
        self.pfns = set()
        for first, count in entry["pfn_runs"]:
            self.pfns.update(range(first, first + count))
        assert len(self.pfns) == entry["pfn_count"]
        # pfn -> its compression set
        self.set_of = {}
        for s in entry["sets"]:
            for first, count in s["descriptors"]:
                for p in range(first, first + count):
                    assert p not in self.set_of, f"PFN {p:#x} in two sets"
                    self.set_of[p] = s
        assert set(self.set_of) == self.pfns
        self.highest = entry["highest_physical_page"]

    def descriptor_end(self, pfn):
        for first, count in self.set_of[pfn]["descriptors"]:
            if first <= pfn < first + count:
                return first + count
        raise KeyError(pfn)


class Raw:
    def __init__(self, path):
        self.f = open(path, "rb")
        self.size = os.path.getsize(path)

    def page(self, pfn):
        if pfn * PAGE >= self.size:
            return bytes(PAGE)
        self.f.seek(pfn * PAGE)
        b = self.f.read(PAGE)
        return b + bytes(PAGE - len(b))


class Tally:
    def __init__(self, name):
        self.name = name
        self.files = 0
        self.refused = 0
        self.pages = 0
        self.hole_zero = 0
        self.quirks = Counter()
        self.mismatches = []

    def bad(self, msg):
        self.mismatches.append(msg)
        if len(self.mismatches) <= 20:
            print(f"  MISMATCH {self.name}: {msg}")

    def report(self):
        q = ", ".join(f"{k} {v}" for k, v in sorted(self.quirks.items())) or "none"
        print(
            f"{self.name}: {self.files} files read, {self.refused} refused as expected, "
            f"{self.pages} pages compared equal, {self.hole_zero} unstored PFNs read as zeros, "
            f"known quirks: {q}; unexplained mismatches: {len(self.mismatches)}"
        )


def classify_vol(truth, pfn):
    """The known volatility3 quirk that explains `pfn` being unreadable, or None."""
    e = truth.e
    s = truth.set_of[pfn]
    if e["version"] == "win8" and s["restore_set"] == "boot":
        return "vol-win8-boot-offset"
    if e["version"] == "win11-26100":
        return "vol-no-26100-table"
    if s["method"] in (2, 3) and not s["uncompressed"] and s["pages"] < 16:
        return "vol-huffman-64k"
    return None


def load_vol_layer(path):
    """The HibernationLayer class of the PR's hib.py at `path` (absolute imports of the
    installed volatility3 framework)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("volatility3.framework.layers.hib", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if not getattr(mod, "HAS_XPRESS", False):
        raise RuntimeError("hib.py loaded but xpress_lz77 is not importable")
    return mod.HibernationLayer


class QuietLayer:
    """The layer with stderr (fd 2) sent to /dev/null while it reads: xpress_lz77 prints a
    Rust panic message for every set it fails on (the failures are counted instead)."""

    def __init__(self, layer):
        self.layer = layer
        self._segments = layer._segments

    def read(self, offset, length):
        saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        try:
            return self.layer.read(offset, length)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(null)


def check_vol(entry, path, truth, raw, tally, HibernationLayer):
    from volatility3.framework import contexts, exceptions
    from volatility3.framework.layers import physical

    ctx = contexts.Context()
    ctx.config["FileLayer.location"] = "file://" + os.path.abspath(path)
    base = physical.FileLayer(ctx, "FileLayer", "FileLayer")
    ctx.add_layer(base)
    try:
        # What HibernationFileStacker does before it builds the layer.
        HibernationLayer._check_header(base)
    except exceptions.LayerException:
        if entry["signature"] == "wiped":
            tally.refused += 1
        elif entry["signature"] == "wake":
            tally.quirks["vol-wake-refused"] += 1
        else:
            tally.bad(f"{entry['file']}: header refused")
        return
    if entry["signature"] == "wiped":
        tally.bad(f"{entry['file']}: a wiped file was accepted")
        return
    ctx.config["plugins.Dump.version"] = VOL_VERSION[entry["version"]]
    ctx.config["HibernationLayer.base_layer"] = "FileLayer"
    try:
        layer = QuietLayer(HibernationLayer(ctx, "HibernationLayer", "HibernationLayer"))
        ctx.add_layer(layer.layer)
        segments = list(layer._segments)
    except Exception as ex:  # noqa: BLE001 - any failure to open is counted
        if entry["version"] == "win11-26100":
            tally.quirks["vol-no-26100-table(open)"] += 1
        else:
            tally.bad(f"{entry['file']}: layer failed: {ex!r}")
        return
    tally.files += 1
    yielded = set()
    for start, _mapped, length, _mlen in segments:
        yielded.update(range(start // PAGE, (start + length) // PAGE))
    for pfn in sorted(yielded | truth.pfns):
        try:
            data = layer.read(pfn * PAGE, PAGE)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - xpress_lz77 panics (pyo3 PanicException)
            data = None
        if data is None:
            if pfn not in truth.pfns:
                continue
            why = classify_vol(truth, pfn)
            if why:
                tally.quirks[why] += 1
            else:
                tally.bad(f"{entry['file']}: PFN {pfn:#x} unreadable")
            continue
        want = raw.page(pfn)
        if data == want:
            if pfn in truth.pfns:
                tally.pages += 1
            else:
                tally.bad(f"{entry['file']}: PFN {pfn:#x} yielded but not stored")
        elif pfn not in truth.pfns:
            tally.bad(f"{entry['file']}: PFN {pfn:#x} yielded, not stored, and not the raw bytes")
        else:
            why = classify_vol(truth, pfn)
            if why == "vol-no-26100-table":
                tally.quirks[why] += 1
            else:
                tally.bad(f"{entry['file']}: PFN {pfn:#x} differs from the raw image")
    # PFNs the truth stores that vol never mapped are among the unreadable ones above.


def classify_lc(truth, pfn):
    s = truth.set_of[pfn]
    if truth.descriptor_end(pfn) >= truth.highest + 1:
        return "lc-highest-pfn"
    if s["method"] == 1 and not s["uncompressed"]:
        return "lc-method1-huffman"
    return None


def check_lc(entry, path, truth, raw, tally, lc_mod):
    try:
        lc = lc_mod.LeechCore("hibr://file=" + os.path.abspath(path))
    except Exception as ex:  # noqa: BLE001
        if entry["signature"] == "wiped":
            tally.refused += 1
        else:
            tally.bad(f"{entry['file']}: LeechCore refused it: {ex!r}")
        return
    try:
        if entry["signature"] == "wiped":
            tally.bad(f"{entry['file']}: a wiped file was accepted")
            return
        tally.files += 1
        top = min(entry["highest_physical_page"] + 1, lc.get_option(lc_mod.LC_OPT_CORE_ADDR_MAX) // PAGE)
        pfns = list(range(top))
        got = {}
        for i in range(0, len(pfns), 256):
            for r in lc.read_scatter([p * PAGE for p in pfns[i : i + 256]]):
                got[r["addr"] // PAGE] = r["data"]
        for pfn in pfns:
            data = got.get(pfn)
            want = raw.page(pfn)
            if pfn not in truth.pfns:
                if data is None or data == bytes(PAGE):
                    tally.hole_zero += 1
                else:
                    tally.bad(f"{entry['file']}: unstored PFN {pfn:#x} read as non-zero bytes")
                continue
            if data == want:
                tally.pages += 1
                continue
            why = classify_lc(truth, pfn)
            if why:
                tally.quirks[why] += 1
            else:
                state = "unreadable" if data is None else "differs from the raw image"
                tally.bad(f"{entry['file']}: PFN {pfn:#x} {state}")
    finally:
        lc.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--skip-leechcore", action="store_true")
    ap.add_argument("--vol-hib", default=os.environ.get("HIBER_VOL_HIB"),
                    help="volatility3 PR 1036's layers/hib.py")
    args = ap.parse_args()
    outdir = os.path.dirname(os.path.abspath(args.manifest))
    with open(args.manifest) as f:
        manifest = json.load(f)
    entries = manifest["hiberfiles"]

    lc_mod = None
    lc_note = None
    if not args.skip_leechcore:
        try:
            import leechcorepyc as lc_mod  # noqa: F401
        except Exception as ex:  # noqa: BLE001
            lc_note = f"leechcorepyc not importable: {ex!r}"

    vol_layer = None
    vol_note = ("volatility3 HibernationLayer: no volatility3 release has one (PR 1036 is "
                "unmerged); pass --vol-hib PATH/hib.py")
    if args.vol_hib:
        try:
            vol_layer = load_vol_layer(args.vol_hib)
        except Exception as ex:  # noqa: BLE001
            vol_note = f"volatility3 HibernationLayer from {args.vol_hib}: {ex!r}"

    vol = Tally("volatility3 HibernationLayer (PR 1036)")
    lc = Tally("LeechCore hibr")
    raws = {}
    kinds = Counter()
    for entry in entries:
        path = os.path.join(outdir, entry["file"])
        truth = Truth(entry)
        raw = raws.setdefault(entry["raw"], Raw(os.path.join(outdir, entry["raw"])))
        kinds[(entry["version"], entry["codec"], entry["variant"], entry["signature"])] += 1
        if vol_layer is not None:
            check_vol(entry, path, truth, raw, vol, vol_layer)
        if lc_mod is not None:
            check_lc(entry, path, truth, raw, lc, lc_mod)
    print(f"{len(entries)} hibernation files: {len({k[0] for k in kinds})} versions, "
          f"{sum(e['pfn_count'] for e in entries)} stored pages in total")
    if vol_layer is not None:
        vol.report()
    else:
        print(f"SKIPPED: {vol_note}")
    if lc_mod is not None:
        lc.report()
    else:
        print(f"SKIPPED: LeechCore ({lc_note or '--skip-leechcore'})")
    bad = len(vol.mismatches) + len(lc.mismatches)
    if bad:
        print(f"hiber_check: FAILED ({bad} unexplained mismatches)")
        return 1
    print("hiber_check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
