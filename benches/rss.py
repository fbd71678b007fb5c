#!/usr/bin/env python3
"""Peak resident memory of etwdump's commands, anonymous and file pages apart (issue 30 item 3).

usage: benches/rss.py ETWDUMP DUMP PDB [--states cold,cat,written] [--commands a,b,...]

For each command and each page-cache state of DUMP, runs `ETWDUMP <command> DUMP --pdb PDB ...`
(stdout to /dev/null through a pipe that is drained, stderr discarded) and samples
/proc/PID/status every millisecond: the peaks of RssAnon (heap, stacks), RssFile (pages of the
dump file and the binary mapped into the process) and the kernel's own VmHWM (the true peak of
their sum, which sampling cannot miss). Cache states:
  cold     the file's pages evicted from the page cache first (posix_fadvise DONTNEED; no root
           needed; pages another process maps stay),
  cat      the whole file read by another process just before (`cat DUMP > /dev/null`),
  written  as the forge left it (give it first, on a file just written).
Prints one table row per (command, state), in MiB.
"""
import os
import subprocess
import sys
import threading
import time

COMMANDS = {
    "info": ["info", "{d}", "--pdb", "{p}"],
    "sessions": ["sessions", "{d}", "--pdb", "{p}"],
    "buffers": ["buffers", "{d}", "--pdb", "{p}"],
    "providers": ["providers", "{d}", "--pdb", "{p}"],
    "check": ["check", "{d}", "--pdb", "{p}"],
    "overview": ["overview", "{d}", "--pdb", "{p}"],
    "scan": ["scan", "{d}", "--pdb", "{p}"],
    "cswitch": ["cswitch", "{d}", "--pdb", "{p}", "--format", "jsonl"],
    "events": ["events", "{d}", "--pdb", "{p}", "--format", "jsonl"],
    "extract": ["extract", "{d}", "--pdb", "{p}", "-o", "{o}", "--overwrite"],
}


def status_kib(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("RssAnon", "RssFile", "VmHWM"):
                    out[k] = int(v.split()[0])
    except OSError:
        return None
    return out


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(exe, argv):
    p = subprocess.Popen([exe] + argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    drained = [0]

    def drain():
        while True:
            b = p.stdout.read(1 << 20)
            if not b:
                break
            drained[0] += len(b)

    t = threading.Thread(target=drain)
    t.start()
    peak = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
    start = time.time()
    while p.poll() is None:
        s = status_kib(p.pid)
        if s:
            for k in peak:
                peak[k] = max(peak[k], s.get(k, 0))
        time.sleep(0.001)
    t.join()
    return p.returncode, time.time() - start, peak, drained[0]


def main():
    a = sys.argv[1:]
    if len(a) < 3:
        print(__doc__)
        return 2
    exe, dump, pdb = a[:3]
    states = ["cold", "cat"]
    commands = list(COMMANDS)
    i = 3
    while i < len(a):
        if a[i] == "--states":
            states = a[i + 1].split(",")
            i += 2
        elif a[i] == "--commands":
            commands = a[i + 1].split(",")
            i += 2
        else:
            print("unknown argument %s" % a[i])
            return 2
    out_dir = "/tmp/etwdump-rss-extract"
    size = os.path.getsize(dump)
    print("dump %s: %.0f MiB" % (dump, size / 2**20))
    print("%-10s %-8s %8s %10s %10s %10s %12s" % ("command", "cache", "wall s", "RssAnon", "RssFile", "VmHWM", "stdout MB"))
    worst = 0
    for c in commands:
        for st in states:
            if st == "cold":
                evict(dump)
            elif st == "cat":
                subprocess.run(["cat", dump], stdout=subprocess.DEVNULL, check=True)
            argv = [x.format(d=dump, p=pdb, o=out_dir) for x in COMMANDS[c]]
            rc, wall, peak, n = run(exe, argv)
            worst = max(worst, peak["VmHWM"])
            print("%-10s %-8s %8.2f %8.1f MiB %6.1f MiB %6.1f MiB %12.1f%s" % (
                c, st, wall, peak["RssAnon"] / 1024, peak["RssFile"] / 1024, peak["VmHWM"] / 1024,
                n / 1e6, "" if rc == 0 else "  (exit %d)" % rc))
            sys.stdout.flush()
    print("worst VmHWM: %.1f MiB" % (worst / 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
