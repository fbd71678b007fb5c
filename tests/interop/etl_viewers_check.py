#!/usr/bin/env python3
"""The .etl files `etwdump extract` writes, read by two independent readers from PyPI.

usage: etl_viewers_check.py SETDIR --pdb PDB

SETDIR: `forge --plugin-set` (sample-etw and hostile-etw: x64-19041 memory with ETW sessions,
buffers, pending batches, processes and modules; manifest.json with the forge's processes and
modules). For each dump, `$ETWDUMP extract DUMP --pdb PDB -o DIR`, then for every .etl file:
1. etl-parser 1.0.1 (`build_from_stream` + `parse` with an observer) and dissect.etl 3.14
   (`ETL(...)` iterated, each record's event decoded) read the whole file; every record of the
   header buffer and of the rundown buffers is decoded by both without an error, and each
   reader sees the record count etwdump's manifest gives for those buffers.
2. The header buffer holds the header event (0x0000) and the host partition's 0x0050 record
   (dissect: PartitionInfoExtension, all zero), as the real files of shared/data do.
3. A kernel session's file (the NT Kernel Logger, the Circular Kernel Context Logger): the
   rundown names each process of the forge: a Process DCStart per PID with its image name and
   parent PID in both readers, a Thread DCStart per thread with its process, and an Image
   DCStart per kernel module with its base, size and file name (dissect). Other sessions have
   no rundown.
4. Each processor's data buffers are in the time order of their first records.
Prints ok/FAIL lines; exits 1 on a failure.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vol_check import Checker  # noqa: E402

KERNEL = ("NT Kernel Logger", "Circular Kernel Context Logger")


def buffers_of(data):
    size = struct.unpack_from("<I", data, 0)[0]
    return size, [data[i:i + size] for i in range(0, len(data), size)]


def first_time(buf):
    """The first record's timestamp (SYSTEM/COMPACT/EVENT_HEADER at +0x10, PERFINFO at +8)."""
    saved = struct.unpack_from("<I", buf, 4)[0]
    if saved < 0x48 + 0x18:
        return None
    kind = buf[0x48 + 2]
    if kind in (0x10, 0x11):
        return struct.unpack_from("<Q", buf, 0x48 + 8)[0]
    return struct.unpack_from("<Q", buf, 0x48 + 0x10)[0]


def etl_parser_read(path):
    """etl-parser, chunk by chunk (its `parse` stops at the first chunk it cannot read and
    skips the header chunk): per buffer, [(hook, mof or None, error or None)] of its records,
    or a string saying why the chunk could not be read."""
    from etl.etl import ChunkParser, EtlLogFile
    from etl.perf import PerfInfo
    from etl.system import System
    with open(path, "rb") as f:
        chunks = EtlLogFile.parse(f.read())
    out = []
    for ch in chunks:
        try:
            evs = ChunkParser.parse(ch.payload) if len(ch.payload) else []
        except Exception as e:  # noqa: BLE001
            out.append("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            continue
        recs = []
        for ev in evs:
            wrap = {"SystemTraceRecord": System, "PerfInfoTraceRecord": PerfInfo}.get(ev.type)
            if wrap is None:
                recs.append((ev.type, None, None))
                continue
            obj = wrap(ev.value)
            pkt = obj.source.system_header.header if ev.type == "SystemTraceRecord" else obj.source.header
            hook = (int(pkt.group) << 8) | int(pkt.type)
            try:
                recs.append((hook, obj.get_mof(), None))
            except Exception as e:  # noqa: BLE001
                recs.append((hook, None, "%s: %s" % (type(e).__name__, e)))
        out.append(recs)
    return out


def dissect_read(path):
    """dissect.etl: [(hook, event or None, error or None)] of every record."""
    from dissect.etl.etl import ETL
    out = []
    with open(path, "rb") as f:
        for rec in ETL(f):
            hook = getattr(rec.header, "hook_id", None)
            try:
                out.append((hook, rec.event, None))
            except Exception as e:  # noqa: BLE001
                out.append((hook, None, "%s: %s" % (type(e).__name__, e)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("setdir")
    ap.add_argument("--pdb", required=True)
    a = ap.parse_args()
    c = Checker()
    etwdump = os.environ["ETWDUMP"]
    with open(os.path.join(a.setdir, "manifest.json")) as f:
        entries = json.load(f)
    for e in entries:
        dump = os.path.join(a.setdir, e["file"])
        procs = e["processes"]
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([etwdump, "extract", dump, "--pdb", a.pdb, "-o", out], capture_output=True, text=True)
            if not c.check(r.returncode == 0, "%s: etwdump extract" % e["file"], r.stderr[-300:] if r.returncode else ""):
                continue
            with open(os.path.join(out, "manifest.json")) as f:
                man = json.load(f)
            for s in man["sessions"]:
                path = os.path.join(out, s["file"])
                tag = "%s %s" % (e["file"], s["file"])
                with open(path, "rb") as f:
                    data = f.read()
                size, bufs = buffers_of(data)
                kinds = [b["source"] for b in s["buffer_list"]]
                ours = [i for i, k in enumerate(kinds) if k in ("header", "rundown")]
                want_ours = sum(s["buffer_list"][i]["records"] for i in ours)
                # 1. Both readers, every record of the header and rundown buffers. etl-parser
                # has no class for the 0x0050 record (as for the real files of shared/data:
                # EventTypeNotFound); it reads it as a record all the same.
                ep = etl_parser_read(path)
                dis = dissect_read(path)
                for i in ours:
                    want_n = s["buffer_list"][i]["records"]
                    ch = ep[i] if i < len(ep) else "missing"
                    errs = ch if isinstance(ch, str) else [
                        (h, err) for h, _, err in ch if err and not (h == 0x0050 and "EventTypeNotFound" in err)]
                    got_n = None if isinstance(ch, str) else len(ch)
                    c.check(got_n == want_n and not errs,
                            "%s: etl-parser decodes the %d records of buffer %d (%s)" % (tag, want_n, i, kinds[i]),
                            "" if got_n == want_n and not errs else "%s read, errors %s" % (got_n, errs[:2]))
                head = dis[:want_ours]
                errs = [(h, err) for h, _, err in head if err]
                c.check(len(head) == want_ours and not errs,
                        "%s: dissect.etl decodes the %d records of the header and rundown buffers" % (tag, want_ours),
                        "" if not errs and len(head) == want_ours else "%d read, errors %s" % (len(head), errs[:2]))
                ep_ours = [r for i in ours if not isinstance(ep[i], str) for r in ep[i]]
                # 2. The header buffer: 0x0000, then the host partition's 0x0050 (all zero).
                hooks = [h for h, _, _ in dis[:2]]
                part = dis[1][1] if len(dis) > 1 else None
                zero = part is not None and all(
                    getattr(part, k) in (0, b"\0" * 16) for k in
                    ("EventVersion", "Reserved", "PartitionType", "QpcOffsetFromRoot", "PartitionId", "ParentId"))
                c.check(hooks == [0x0000, 0x0050] and zero,
                        "%s: header event, then the host partition record (dissect: %s)" % (tag, type(part).__name__ if part else None))
                # 3. The rundown of a kernel session names every process.
                rundown = [b for b in s["buffer_list"] if b["source"] == "rundown"]
                if s["name"] in KERNEL:
                    dis_procs = {}
                    for h, ev, _ in dis[:want_ours]:
                        if h == 0x0303:
                            dis_procs[ev.ProcessId] = (ev.ImageFileName.rstrip(b"\0").decode(), ev.ParentId)
                    ep_procs = {}
                    for h, mof, _ in ep_ours:
                        if h == 0x0303 and mof is not None:
                            ep_procs[mof.get_process_id()] = (mof.get_image_file_name(), mof.get_parent_id())
                    want = {p["pid"]: (p["name"], p["parent_pid"]) for p in procs}
                    c.check(dis_procs == want, "%s: dissect.etl: a Process DCStart per PID, names and parents %s"
                            % (tag, sorted((k, v[0]) for k, v in want.items())), "" if dis_procs == want else str(dis_procs))
                    c.check(ep_procs == want, "%s: etl-parser: a Process DCStart per PID, names and parents" % tag,
                            "" if ep_procs == want else str(ep_procs))
                    threads = sorted((ev.ProcessId, ev.TThreadId) for h, ev, _ in dis[:want_ours] if h == 0x0503)
                    want_t = sorted((p["pid"], t) for p in procs for t in p["threads"])
                    c.check(threads == want_t, "%s: dissect.etl: a Thread DCStart per thread (%d)" % (tag, len(want_t)),
                            "" if threads == want_t else str(threads[:5]))
                    images = [(ev.ImageBase, ev.ImageSize, ev.FileName) for h, ev, _ in dis[:want_ours] if h == 0x1403]
                    want_i = [(int(m["base"], 16), int(m["size"], 16), m["full_name"]) for m in e["modules"]]
                    c.check(images == want_i, "%s: dissect.etl: an Image DCStart per kernel module (%d)" % (tag, len(want_i)),
                            "" if images == want_i else str(images[:2]))
                else:
                    c.check(not rundown, "%s: no rundown in a session that is not a kernel session" % tag)
                # 4. Each processor's data buffers in time order.
                per_cpu = {}
                for b, entry in zip(bufs, s["buffer_list"]):
                    if entry["source"] in ("memory", "pending_ccswap"):
                        t = first_time(b)
                        if t is not None:
                            per_cpu.setdefault(b[0x28], []).append(t)
                ordered = all(v == sorted(v) for v in per_cpu.values())
                c.check(ordered, "%s: each processor's buffers in time order (%d CPUs)" % (tag, len(per_cpu)))
    print("== etl_viewers_check: %d checks, %d failed" % (c.count, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
