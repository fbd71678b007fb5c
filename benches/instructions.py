#!/usr/bin/env python3
"""Instructions each JSON Lines listing executes, counted by valgrind (docs/performance.md).

This VM's speed moves by a third from one minute to the next, so a change of a few per cent
in the rendering cannot be seen in times alone. Instruction counts do not move with it: this
script forges a small benchmark dump (`forge --bench-dump DUMP 64`: the benchmarks' machine
with 64 x 64 KiB buffers; deterministic) and counts, with `valgrind --tool=cachegrind
--cache-sim=no`, the instructions of `etwdump events` and `etwdump cswitch` writing JSON
Lines to /dev/null, for each binary given, side by side. Repeated runs of one binary differ by
up to about half a per cent (its threads wait for each other differently), so only larger
differences say something. An instruction is not a cycle (a
vector compare does the work of many, a cache miss costs hundreds): time a change too
(benches/limits.py) before calling it quicker.

usage: python3 benches/instructions.py [--work DIR] [--forge BIN] [ETWDUMP ...]
  ETWDUMP: binaries to compare (default target/release/etwdump); built with
  `cargo build --release` when the default is missing. Needs valgrind (Debian: valgrind);
  says so and exits 0 without it.
"""

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [["events", "--format", "jsonl"], ["cswitch", "--format", "jsonl"]]


def instructions(binary, dump, command):
    """The `I refs` cachegrind counts for `binary command dump`."""
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         str(binary), command[0], str(dump), *command[1:]],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if not m:
        raise SystemExit(f"no instruction count from valgrind for {binary} {command[0]}")
    return int(m.group(1).replace(",", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/etwdump-instructions")
    ap.add_argument("--forge", default=str(ROOT / "target/release/forge"))
    ap.add_argument("etwdump", nargs="*")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("SKIPPED: valgrind is not installed (Debian: apt install valgrind)")
        return 0
    binaries = [Path(b) for b in a.etwdump] or [ROOT / "target/release/etwdump"]
    if (not a.etwdump and not binaries[0].exists()) or not Path(a.forge).exists():
        for what in (["--bin", "etwdump"], ["-p", "etwdump-forge", "--bin", "forge"]):
            subprocess.run(["cargo", "build", "--release", *what], cwd=ROOT, check=True)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    dump = work / "bench-64.dmp"
    if not dump.exists():
        subprocess.run([a.forge, "--bench-dump", str(dump), "64"], check=True)
    print(f"# instructions (valgrind cachegrind), dump {dump.name}: 64 x 64 KiB buffers")
    print("| binary | " + " | ".join(f"`{c[0]}`" for c in COMMANDS) + " |")
    print("|---|" + "---|" * len(COMMANDS))
    for b in binaries:
        counts = [instructions(b, dump, c) for c in COMMANDS]
        print(f"| {b} | " + " | ".join(f"{n:,}" for n in counts) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
