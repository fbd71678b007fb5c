#!/usr/bin/env python3
"""Generate a large kernel-like PDB for the symbols benchmark.

  gen_big_pdb.py OUTDIR [NSTRUCTS]

Writes OUTDIR/big.c: the real layouts of tests/fixtures/x64-19041/types.h (so the ~20 types
etwdump resolves are present, with their real closure) plus NSTRUCTS synthetic structures
(default 26000) with members of every kind (integers, pointers to other structures, arrays,
bitfields, nested structures, unions), each used by a global variable, then compiles it with
clang and links OUTDIR/ntoskrnl.exe + OUTDIR/ntkrnlmp.pdb with lld-link. A real ntkrnlmp.pdb
has about 150k type records in about 20 MB; the default size gives the same order.
"""
import os
import random
import resource
import subprocess
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 26000
here = os.path.dirname(os.path.abspath(__file__))
types_h = os.path.join(here, "..", "tests", "fixtures", "x64-19041", "types.h")
os.makedirs(out, exist_ok=True)
rng = random.Random(19041)
kinds = ["unsigned long", "unsigned short", "unsigned char", "long long", "unsigned long long", "void *"]
with open(os.path.join(out, "big.c"), "w") as f:
    f.write('#include "%s"\n' % types_h)
    for i in range(n):
        f.write("union BigU%d { unsigned long long Q; unsigned long D[2]; struct BigS%d *P; };\n" % (i, rng.randint(0, n - 1)))
        f.write("struct BigS%d {\n" % i)
        for j in range(rng.randint(4, 9)):
            k = rng.randint(0, 6)
            if k == 0:
                f.write("  %s M%d;\n" % (rng.choice(kinds), j))
            elif k == 1:
                f.write("  struct BigS%d *Ptr%d;\n" % (rng.randint(0, n - 1), j))
            elif k == 2:
                f.write("  unsigned long Arr%d[%d];\n" % (j, rng.randint(2, 64)))
            elif k == 3:
                f.write("  unsigned long long Bf%da : 3; unsigned long long Bf%db : 61;\n" % (j, j))
            elif k == 4 and i >= 200:
                # Embed only leaf structures (the first 200 embed nothing), so sizes stay bounded.
                f.write("  struct BigS%d Nested%d;\n" % (rng.randint(0, 199), j))
            elif k == 5:
                f.write("  union BigU%d U%d;\n" % (i, j))
            else:
                f.write("  struct _LIST_ENTRY Links%d;\n" % j)
        f.write("};\n")
        f.write("struct BigS%d BigGlobal%d;\n" % (i, i))
    f.write("void EtwdumpFixtureTypeAnchor(void);\n")
    f.write("void KiSystemStartup(void) { EtwdumpFixtureTypeAnchor(); }\n")
# The fixture's anchor references every real root type.
anchor = os.path.join(out, "anchor.c")
with open(anchor, "w") as f:
    f.write('#include "%s"\n' % types_h)
    f.write("void EtwdumpFixtureTypeAnchor(void) {}\n")
    for t in ["_WMI_LOGGER_CONTEXT", "_WMI_BUFFER_HEADER", "_ETW_SILODRIVERSTATE", "_ESERVERSILO_GLOBALS",
              "_KPRCB", "_KUSER_SHARED_DATA", "_KLDR_DATA_TABLE_ENTRY", "_DBGKD_GET_VERSION64", "_EPROCESS",
              "_ETHREAD", "_KTHREAD", "_KPROCESS", "_EX_FAST_REF", "_LIST_ENTRY", "_UNICODE_STRING"]:
        f.write("struct %s Anchor%s;\n" % (t, t))
def big_stack():
    # clang recurses along chains of types; give it room.
    resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


cflags = ["--target=x86_64-pc-windows-msvc", "-fms-extensions", "-Wno-microsoft-anon-tag", "-gcodeview", "-g",
          "-O0", "-ffreestanding", "-fno-stack-protector", "-fno-builtin", "-c"]
subprocess.check_call(["clang"] + cflags + [os.path.join(out, "big.c"), "-o", os.path.join(out, "big.obj")],
                      preexec_fn=big_stack)
subprocess.check_call(["clang"] + cflags + [anchor, "-o", os.path.join(out, "anchor.obj")])
subprocess.check_call(["lld-link", "/nologo", "/driver", "/entry:KiSystemStartup", "/nodefaultlib",
                       "/subsystem:native", "/machine:x64", "/base:0x140000000", "/opt:noref", "/debug",
                       "/pdb:" + os.path.join(out, "ntkrnlmp.pdb"), "/pdbaltpath:ntkrnlmp.pdb",
                       "/out:" + os.path.join(out, "ntoskrnl.exe"),
                       os.path.join(out, "big.obj"), os.path.join(out, "anchor.obj")])
print(os.path.join(out, "ntkrnlmp.pdb"))
