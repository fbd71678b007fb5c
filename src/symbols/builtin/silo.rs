//! `_ETW_SILODRIVERSTATE`: ETW's per-silo state, which holds the logger array from 1511 on.
//!
//! Sources: Geoff Chappell, "ETW_SILODRIVERSTATE" (…/inc/ntos/etwp/etw_silodriverstate.htm,
//! last modified 17 October 2022; chappell/inc_ntos_etwp_etw_silodriverstate.txt), sizes and
//! offsets from the public symbols for 10.0 to 2004; etw-internals.md §1.1 restates the key
//! offsets for 1511 to 2004. 20348 and 22000 (x64): crash-dump-format.md §2.3 (size,
//! MaxLoggers, EtwpLoggerContext, ProcessorBlocks only).
//!
//! 1507 has the structure too, but without the logger array; it is not built in.
//!
//! Reading note: Chappell's page renders the rundown member as
//! "EX_RUNDOWN_REF_CACHE_AWARE EtwpLoggerRundown [0x10]" for "1511 and higher", which does not
//! fit its own offsets. etw-internals.md §1.1 calls it an array of 64 in 1511–1607 and a
//! pointer in 1709; the offsets agree (x64 1511: 0x190 to the logger array at 0x390 = 64
//! pointers; 1709: 0x1A0 to 0x1A8 = one pointer). The type is therefore taken as
//! `EX_RUNDOWN_REF_CACHE_AWARE *[64]` (1511–1703) and `EX_RUNDOWN_REF_CACHE_AWARE **` (1709+),
//! like the logger array's own change from `WMI_LOGGER_CONTEXT *[64]` to
//! `WMI_LOGGER_CONTEXT **`; the offsets are as given.

use super::Era::{self, *};
use super::Ty::*;
use super::{add_rows, lookup, Row, Span, TableFamily};
use crate::symbols::layout::{LayoutSource, StructLayout};

const NAME: &str = "_ETW_SILODRIVERSTATE";

const SIZE_X86: &[Span] = &[
    (V1511, V1607, 0xA80),
    (V1703, V1703, 0xAC0),
    (V1709, V1709, 0xA48),
    (V1803, V1809, 0xA70),
    (V1903, V1903, 0xA90),
    (V2004, V2004, 0xAA8),
];
const SIZE_X64: &[Span] = &[
    (V1511, V1607, 0x13A8),
    (V1703, V1703, 0x13F8),
    (V1709, V1709, 0x1190),
    (V1803, V1809, 0x11C0),
    (V1903, V1903, 0x11F8),
    (V2004, V2004, 0x1220),
    (B20348, B20348, 0x1228),
    (B22000, B22000, 0x1238),
];

/// The layout for `era`, or `None` before 1511.
pub(super) fn layout(era: Era, family: TableFamily) -> Option<StructLayout> {
    let size = lookup(family.pick(SIZE_X86, SIZE_X64), era)?;
    Some(add_rows(
        StructLayout::new(NAME, size, LayoutSource::Builtin),
        ROWS,
        era,
        family,
    ))
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // EJOB *Silo; (1803 and higher)
    Row { name: "Silo", ty: Ptr("_EJOB"), x86: &[(V1803, V2004, 0x00)], x64: &[(V1803, V2004, 0x00)] },
    // ESERVERSILO_GLOBALS *SiloGlobals; (1703 and higher)
    Row { name: "SiloGlobals", ty: Ptr("_ESERVERSILO_GLOBALS"), x86: &[(V1703, V1709, 0x00), (V1803, V2004, 0x04)], x64: &[(V1703, V1709, 0x00), (V1803, V2004, 0x08)] },
    // ULONG MaxLoggers; (1709 and higher; §2.3 for 20348 and 22000)
    Row { name: "MaxLoggers", ty: U32, x86: &[(V1709, V1709, 0x04), (V1803, V2004, 0x08)], x64: &[(V1709, V1709, 0x08), (V1803, V2004, 0x10), (B20348, B22000, 0x10)] },
    // EtwpLoggerRundown (1511 and higher; type: see the module notes)
    Row { name: "EtwpLoggerRundown", ty: PtrArray("_EX_RUNDOWN_REF_CACHE_AWARE", 64), x86: &[(V1511, V1607, 0x168), (V1703, V1703, 0x170)], x64: &[(V1511, V1607, 0x190), (V1703, V1703, 0x198)] },
    Row { name: "EtwpLoggerRundown", ty: PtrPtr("_EX_RUNDOWN_REF_CACHE_AWARE"), x86: &[(V1709, V1709, 0x170), (V1803, V1903, 0x178), (V2004, V2004, 0x188)], x64: &[(V1709, V1709, 0x1A0), (V1803, V1903, 0x1A8), (V2004, V2004, 0x1C0)] },
    // WMI_LOGGER_CONTEXT *WmipLoggerContext [0x40]; (1511 to 1703)
    Row { name: "WmipLoggerContext", ty: PtrArray("_WMI_LOGGER_CONTEXT", 64), x86: &[(V1511, V1607, 0x268), (V1703, V1703, 0x270)], x64: &[(V1511, V1607, 0x390), (V1703, V1703, 0x398)] },
    // WMI_LOGGER_CONTEXT **EtwpLoggerContext; (1709 and higher; §2.3 for 20348 and 22000)
    Row { name: "EtwpLoggerContext", ty: PtrPtr("_WMI_LOGGER_CONTEXT"), x86: &[(V1709, V1709, 0x174), (V1803, V1903, 0x17C), (V2004, V2004, 0x18C)], x64: &[(V1709, V1709, 0x1A8), (V1803, V1903, 0x1B0), (V2004, V2004, 0x1C8), (B20348, B22000, 0x1C8)] },
    // ETW_HASH_BUCKET EtwpGuidHashTable [0x40]; (1511 and higher)
    Row { name: "EtwpGuidHashTable", ty: StructArray("_ETW_HASH_BUCKET", 64), x86: &[(V1511, V1607, 0x368), (V1703, V1703, 0x370), (V1709, V1709, 0x178), (V1803, V1903, 0x180), (V2004, V2004, 0x190)], x64: &[(V1511, V1607, 0x590), (V1703, V1703, 0x598), (V1709, V1709, 0x1B0), (V1803, V1903, 0x1B8), (V2004, V2004, 0x1D0)] },
    // ETW_SILO_TRACING_BLOCK *ProcessorBlocks; (1703 and higher; §2.3 for 20348 and 22000)
    Row { name: "ProcessorBlocks", ty: Ptr("_ETW_SILO_TRACING_BLOCK"), x86: &[(V1703, V1703, 0xAB8), (V1709, V1709, 0x8C0), (V1803, V1903, 0x8C8), (V2004, V2004, 0x8D8)], x64: &[(V1703, V1703, 0x13F0), (V1709, V1709, 0x1008), (V1803, V1903, 0x1010), (V2004, V2004, 0x1028), (B20348, B22000, 0x1030)] },
    // ETW_SYSTEM_LOGGER_SETTINGS SystemLoggerSettings; (1709 and higher)
    Row { name: "SystemLoggerSettings", ty: Struct("_ETW_SYSTEM_LOGGER_SETTINGS"), x86: &[(V1709, V1709, 0x8F4), (V1803, V1903, 0x8FC), (V2004, V2004, 0x914)], x64: &[(V1709, V1709, 0x103C), (V1803, V1903, 0x104C), (V2004, V2004, 0x1070)] },
];

#[cfg(test)]
mod tests {
    use super::super::layouts;
    use super::super::tests::{get, off};
    use super::super::TableFamily::{self, X64, X86};

    fn at(build: u32, family: TableFamily, field: &str) -> Option<u64> {
        off(
            &layouts(build, family).unwrap(),
            "_ETW_SILODRIVERSTATE",
            field,
        )
    }

    /// (field, builds, x86 offset, x64 offset)
    type Expect = (&'static str, &'static [u32], Option<u64>, Option<u64>);

    /// etw-internals.md §1.1, "ETW_SILODRIVERSTATE key offsets (x86/x64)".
    #[test]
    fn etw_internals_1_1_table() {
        #[rustfmt::skip]
        let table: &[Expect] = &[
            ("Silo", &[10586, 14393, 15063, 16299], None, None),
            ("Silo", &[17134, 17763, 18362, 19041], Some(0), Some(0)),
            ("SiloGlobals", &[10586, 14393], None, None),
            ("SiloGlobals", &[15063, 16299], Some(0), Some(0)),
            ("SiloGlobals", &[17134, 17763, 18362, 19041], Some(4), Some(8)),
            ("MaxLoggers", &[10586, 14393, 15063], None, None),
            ("MaxLoggers", &[16299], Some(4), Some(8)),
            ("MaxLoggers", &[17134, 17763, 18362, 19041], Some(8), Some(0x10)),
            ("EtwpLoggerRundown", &[10586, 14393], Some(0x168), Some(0x190)),
            ("EtwpLoggerRundown", &[15063], Some(0x170), Some(0x198)),
            ("EtwpLoggerRundown", &[16299], Some(0x170), Some(0x1A0)),
            ("EtwpLoggerRundown", &[17134, 17763, 18362], Some(0x178), Some(0x1A8)),
            ("EtwpLoggerRundown", &[19041], Some(0x188), Some(0x1C0)),
            ("WmipLoggerContext", &[10586, 14393], Some(0x268), Some(0x390)),
            ("WmipLoggerContext", &[15063], Some(0x270), Some(0x398)),
            ("WmipLoggerContext", &[16299, 19041], None, None),
            ("EtwpLoggerContext", &[10586, 14393, 15063], None, None),
            ("EtwpLoggerContext", &[16299], Some(0x174), Some(0x1A8)),
            ("EtwpLoggerContext", &[17134, 17763, 18362], Some(0x17C), Some(0x1B0)),
            ("EtwpLoggerContext", &[19041], Some(0x18C), Some(0x1C8)),
            ("EtwpGuidHashTable", &[10586, 14393], Some(0x368), Some(0x590)),
            ("EtwpGuidHashTable", &[15063], Some(0x370), Some(0x598)),
            ("EtwpGuidHashTable", &[16299], Some(0x178), Some(0x1B0)),
            ("EtwpGuidHashTable", &[17134, 17763, 18362], Some(0x180), Some(0x1B8)),
            ("EtwpGuidHashTable", &[19041], Some(0x190), Some(0x1D0)),
            ("ProcessorBlocks", &[10586, 14393], None, None),
        ];
        for &(field, builds, x86, x64) in table {
            for &b in builds {
                assert_eq!(at(b, X86, field), x86, "x86 {b} {field}");
                assert_eq!(at(b, X64, field), x64, "x64 {b} {field}");
            }
        }
        // "last field: x64 0x13F0 (1703)"
        assert_eq!(at(15063, X64, "ProcessorBlocks"), Some(0x13F0));
    }

    /// crash-dump-format.md §2.3: (size; MaxLoggers; EtwpLoggerContext; ProcessorBlocks),
    /// x64, for the builds whose first layout is the table's.
    #[test]
    fn crash_dump_format_2_3() {
        for (b, size, max, ctx, blocks) in [
            (17763, 0x11C0, 0x10, 0x1B0, 0x1010),
            (18362, 0x11F8, 0x10, 0x1B0, 0x1010),
            (19041, 0x1220, 0x10, 0x1C8, 0x1028),
            (20348, 0x1228, 0x10, 0x1C8, 0x1030),
            (22000, 0x1238, 0x10, 0x1C8, 0x1030),
        ] {
            let l = layouts(b, X64).unwrap();
            assert_eq!(get(&l, "_ETW_SILODRIVERSTATE").unwrap().size, size, "{b}");
            assert_eq!(at(b, X64, "MaxLoggers"), Some(max), "{b}");
            assert_eq!(at(b, X64, "EtwpLoggerContext"), Some(ctx), "{b}");
            assert_eq!(at(b, X64, "ProcessorBlocks"), Some(blocks), "{b}");
        }
        let l = layouts(14393, X64).unwrap();
        assert_eq!(get(&l, "_ETW_SILODRIVERSTATE").unwrap().size, 0x13A8);
        assert_eq!(at(14393, X64, "WmipLoggerContext"), Some(0x390));
        assert_eq!(at(14393, X64, "EtwpGuidHashTable"), Some(0x590));
        // 20348 and 22000 carry only what §2.3 gives.
        assert_eq!(at(22000, X64, "EtwpGuidHashTable"), None);
        assert_eq!(at(22000, X64, "SystemLoggerSettings"), None);
    }

    #[test]
    fn sizes() {
        for (b, x86, x64) in [
            (10586, 0xA80, 0x13A8),
            (14393, 0xA80, 0x13A8),
            (15063, 0xAC0, 0x13F8),
            (16299, 0xA48, 0x1190),
            (17134, 0xA70, 0x11C0),
            (17763, 0xA70, 0x11C0),
            (18362, 0xA90, 0x11F8),
            (19041, 0xAA8, 0x1220),
        ] {
            for (family, size) in [(X86, x86), (X64, x64)] {
                let l = layouts(b, family).unwrap();
                assert_eq!(get(&l, "_ETW_SILODRIVERSTATE").unwrap().size, size, "{b}");
            }
        }
        assert!(get(&layouts(10240, X64).unwrap(), "_ETW_SILODRIVERSTATE").is_none());
        assert_eq!(at(19041, X64, "SystemLoggerSettings"), Some(0x1070));
        assert_eq!(at(16299, X86, "SystemLoggerSettings"), Some(0x8F4));
    }
}
