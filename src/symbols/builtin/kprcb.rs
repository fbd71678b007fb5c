//! `_KPRCB`: only its size and `EtwSupport` (a pointer, new in 6.0, to the per-CPU ETW block).
//!
//! Sources: Geoff Chappell, "KPRCB (amd64)" and "KPRCB (i386)"
//! (…/inc/ntos/amd64_x/kprcb/index.htm, …/i386_x/kprcb/index.htm;
//! chappell/inc_ntos_amd64_x_kprcb_index.txt, inc_ntos_i386_x_kprcb_index.txt): the size
//! tables and the EtwSupport rows. 20348 and 22000 (x64): crash-dump-format.md §2.3.
//!
//! The x86 size table distinguishes early 5.2 (before SP1, 0x0DD0) from late 5.2 (0x0EC0);
//! both are build 3790, so 5.2 x86 has no KPRCB here.

use super::Era::{self, *};
use super::Ty::*;
use super::{add_rows, lookup, Row, Span, TableFamily};
use crate::symbols::layout::{LayoutSource, StructLayout};

const NAME: &str = "_KPRCB";

const SIZE_X86: &[Span] = &[
    (V50, V50, 0x9F0),
    (V51, V51, 0xC50),
    (V60Early, V60Early, 0x1F98),
    (V60Late, V60Late, 0x2008),
    (V61, V61, 0x3628),
    (V62, V62, 0x4160),
    (V63, V63, 0x4508),
    (V1507, V1703, 0x4900),
    (V1709, V1709, 0x4940),
    (V1803, V2004, 0x5F00),
];
const SIZE_X64: &[Span] = &[
    (V52, V52, 0x2480),
    (V60Early, V60Early, 0x3A20),
    (V60Late, V60Late, 0x3B20),
    (V61, V61, 0x4D00),
    (V62, V62, 0x5B80),
    (V63, V63, 0x5BC0),
    (V1507, V1607, 0x6900),
    (V1703, V1703, 0x6A40),
    (V1709, V1709, 0x6980),
    (V1803, V1809, 0x7EC0),
    (V1903, V1903, 0x8F00),
    (V2004, V2004, 0xAF00),
    (B20348, B22000, 0xBF00),
];

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // PVOID EtwSupport; (6.0 and higher)
    Row { name: "EtwSupport", ty: VoidPtr,
        x86: &[(V60Early, V60Early, 0x1F1C), (V60Late, V60Late, 0x1F84), (V61, V61, 0x34B4), (V62, V62, 0x3F08), (V63, V63, 0x3F50), (V1507, V1703, 0x3FD4), (V1709, V1903, 0x4014), (V2004, V2004, 0x4054)],
        x64: &[(V60Early, V60Early, 0x39B0), (V60Late, V60Late, 0x3A90), (V61, V61, 0x49F0), (V62, V62, 0x5710), (V63, V63, 0x5718), (V1507, V1607, 0x5FD8), (V1703, V1703, 0x60D0), (V1709, V1903, 0x6028), (V2004, V2004, 0x8328), (B20348, B20348, 0x8668), (B22000, B22000, 0x86A8)] },
];

/// The layout for `era`, or `None` where the size is not known.
pub(super) fn layout(era: Era, family: TableFamily) -> Option<StructLayout> {
    let size = lookup(family.pick(SIZE_X86, SIZE_X64), era)?;
    Some(add_rows(
        StructLayout::new(NAME, size, LayoutSource::Builtin),
        ROWS,
        era,
        family,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::layouts;
    use super::super::tests::{get, off};
    use super::super::TableFamily::{self, X64, X86};

    fn kprcb(build: u32, family: TableFamily) -> Option<(u64, Option<u64>)> {
        let l = layouts(build, family)?;
        let t = get(&l, "_KPRCB")?;
        Some((t.size, off(&l, "_KPRCB", "EtwSupport")))
    }

    #[test]
    fn etw_support_and_sizes() {
        // crash-dump-format.md §2.3 (x64) where it agrees with Chappell, and §3.3 of
        // etw-internals.md (10.0-1607 0x5FD8, 1703 0x60D0).
        assert_eq!(kprcb(19041, X64), Some((0xAF00, Some(0x8328))));
        assert_eq!(kprcb(18362, X64), Some((0x8F00, Some(0x6028))));
        assert_eq!(kprcb(17763, X64), Some((0x7EC0, Some(0x6028))));
        assert_eq!(kprcb(10240, X64), Some((0x6900, Some(0x5FD8))));
        assert_eq!(kprcb(14393, X64).unwrap().1, Some(0x5FD8));
        assert_eq!(kprcb(15063, X64), Some((0x6A40, Some(0x60D0))));
        assert_eq!(kprcb(20348, X64), Some((0xBF00, Some(0x8668))));
        assert_eq!(kprcb(22000, X64), Some((0xBF00, Some(0x86A8))));
        assert_eq!(kprcb(7601, X64), Some((0x4D00, Some(0x49F0))));
        assert_eq!(kprcb(6000, X64), Some((0x3A20, Some(0x39B0))));
        assert_eq!(kprcb(3790, X64), Some((0x2480, None)));
        // x86
        assert_eq!(kprcb(2195, X86), Some((0x9F0, None)));
        assert_eq!(kprcb(2600, X86), Some((0xC50, None)));
        assert_eq!(kprcb(3790, X86), None);
        assert_eq!(kprcb(6001, X86), Some((0x2008, Some(0x1F84))));
        assert_eq!(kprcb(7601, X86), Some((0x3628, Some(0x34B4))));
        assert_eq!(kprcb(9200, X86), Some((0x4160, Some(0x3F08))));
        assert_eq!(kprcb(9600, X86), Some((0x4508, Some(0x3F50))));
        assert_eq!(kprcb(15063, X86), Some((0x4900, Some(0x3FD4))));
        assert_eq!(kprcb(16299, X86), Some((0x4940, Some(0x4014))));
        assert_eq!(kprcb(18362, X86), Some((0x5F00, Some(0x4014))));
        assert_eq!(kprcb(19041, X86), Some((0x5F00, Some(0x4054))));
    }
}
