#!/usr/bin/env bash
# Build the tiny PDB seeds of the pdb_load fuzz target into fuzz/corpus/pdb_load/tiny-*.pdb
# (committed: rerun only to change them).
#
# The fixture PDBs (tests/fixtures/*/ntkrnlmp.pdb) are 118-197 KB and take 10-20 ms each to
# load under ASan (every wanted structure and everything it embeds, a few hundred types);
# fuzzing them runs at a few hundred executions per second. These seeds carry the same kinds
# of records (the real layouts of a few root types and what they embed, anonymous unions,
# bitfields, arrays, pointers, forward references, publics, x64 and x86) in 9-28 KB:
#   * types.h from tests/fixtures/gen_c.py for a handful of roots per seed, from the
#     fixtures' layout sources ($ISF_DIR x64 ISFs, default <repo>/../shared/isf; the x86
#     layout.json committed in tests/fixtures/x86-14393);
#   * tests/fixtures/globals.c without debug info (the kernel globals as S_PUB32 publics);
#   * extra.c with debug info (the wanted enumerations, two S_GDATA32 globals);
#   * lld-link, then msf_repack.py: 512-byte MSF blocks instead of lld's 4096.
# Needs clang, lld-link and python3 (tests/fixtures/README.md); deterministic for one
# clang/lld version.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
FX="$REPO/tests/fixtures"
ISF_DIR="${ISF_DIR:-$REPO/../shared/isf}"
OUT="${OUT:-$REPO/fuzz/corpus/pdb_load}"
PY="${PYTHON:-python3}"
CFLAGS="-fms-extensions -Wno-microsoft-anon-tag -O0 -ffreestanding -fno-stack-protector -fno-builtin -ffile-compilation-dir=. -Werror"

# name | arch | layout source | fixture (its types.h compiles globals.c) | build | roots |
# globals.c defines. Few roots per seed: the load time grows with the fields converted.
I19041="$ISF_DIR/5278AFF86C341677D7D7835C85B7B844-1.json.xz"
I7601="$ISF_DIR/339E74133576439CBCDF7E0229DA3773-1.json.xz"
SEEDS=(
  "x64-19041-buffer|x64|$I19041|x64-19041|19041|_WMI_BUFFER_HEADER,_KSYSTEM_TIME,_EX_FAST_REF|-DFIX_HAS_SILO -DFIX_HAS_SERVERSILO"
  "x64-19041-silo|x64|$I19041|x64-19041|19041|_ESERVERSILO_GLOBALS,_PERFINFO_CCSWAP_BUFFER|-DFIX_HAS_SILO -DFIX_HAS_SERVERSILO"
  "x64-19041-module|x64|$I19041|x64-19041|19041|_KLDR_DATA_TABLE_ENTRY,_DBGKD_GET_VERSION64|"
  "x64-19041-logger|x64|$I19041|x64-19041|19041|_WMI_LOGGER_CONTEXT|-DFIX_HAS_SILO"
  "x64-19041-silostate|x64|$I19041|x64-19041|19041|_ETW_SILODRIVERSTATE|-DFIX_HAS_SILO"
  "x64-19041-thread|x64|$I19041|x64-19041|19041|_KTHREAD|"
  "x64-7601-buffer|x64|$I7601|x64-7601|7601|_WMI_BUFFER_HEADER,_LIST_ENTRY|-DFIX_WMIP_LOGGER_CONTEXT"
  "x86-14393-buffer|x86|$FX/x86-14393/layout.json|x86-14393|14393|_WMI_BUFFER_HEADER,_UNICODE_STRING|-DFIX_X86 -DFIX_HAS_SILO"
)

for t in clang lld-link "$PY"; do
  command -v "$t" >/dev/null || { echo "build.sh: missing $t" >&2; exit 1; }
done
mkdir -p "$OUT"
for spec in "${SEEDS[@]}"; do
  IFS='|' read -r name arch src fixture build roots defs <<<"$spec"
  [ -f "$src" ] || { echo "build.sh: $name: missing layout source $src" >&2; exit 1; }
  if [ "$arch" = x64 ]; then
    target=x86_64-pc-windows-msvc machine=x64 base=0x140000000
  else
    target=i686-pc-windows-msvc machine=x86 base=0x400000
  fi
  work="$(mktemp -d)"
  cp "$FX/globals.c" "$HERE/extra.c" "$work/"
  cp "$FX/$fixture/types.h" "$work/full.h"
  sed -i 's/#include "types.h"/#include "full.h"/' "$work/globals.c"
  (
    cd "$work"
    "$PY" "$FX/gen_c.py" "$src" types.h --types "$roots" --anchor anchor.c >/dev/null
    clang --target=$target $CFLAGS -gcodeview -g -c anchor.c -o types.obj
    clang --target=$target $CFLAGS -gcodeview -g -c extra.c -o extra.obj
    # shellcheck disable=SC2086
    clang --target=$target $CFLAGS -DFIX_BUILD=$build '-DFIX_BUILDLAB="fuzz"' \
      -DFIX_MAX_PROCESSORS=4 $defs -c globals.c -o globals.obj
    lld-link /nologo /driver /subsystem:native /entry:KiSystemStartup /nodefaultlib \
      /machine:$machine /base:$base /opt:noref /debug /pdb:ntkrnlmp.pdb \
      /pdbaltpath:ntkrnlmp.pdb /pdbsourcepath:'C:\etwdump\fuzz' /timestamp:$((0x5F000000 + build)) \
      /out:ntoskrnl.exe types.obj extra.obj globals.obj
    "$PY" "$HERE/msf_repack.py" ntkrnlmp.pdb small.pdb 512
  )
  cp "$work/small.pdb" "$OUT/tiny-$name.pdb"
  rm -rf "$work"
  printf '%-22s %6d bytes\n' "tiny-$name.pdb" "$(stat -c %s "$OUT/tiny-$name.pdb")"
done
