//! `_WMI_BUFFER_HEADER`: the 0x48-byte header of every trace buffer, x86 and x64 alike.
//!
//! Sources: Geoff Chappell, "WMI_BUFFER_HEADER" (…/inc/api/ntwmi/wmi_buffer_header/index.htm,
//! last modified 23 October 2022; chappell/inc_api_ntwmi_wmi_buffer_header_index.txt), for
//! 5.0 to 2004: "0x48 bytes in both 32-bit and 64-bit Windows in all versions … 5.0 and
//! higher", taken from the symbols from XP SP3 / 2003 SP2 on, inferred from the code before.
//! etw-internals.md §2.1/§2.2 restates it (6.1+ modern layout, older layouts) and
//! crash-dump-format.md §2.3 checks the main members against real PDBs up to 22000 ("the
//! same layout in every build"); so the 6.2 layout is used through 22000.
//!
//! Unions are flattened, so members overlap:
//! * 0x00 (5.0–6.0): `WNODE_HEADER Wnode` overlaid by unnamed structures; 5.0–5.2 "Lists"
//!   (Reserved1..3, Entry; 5.1–5.2 also Alignment and SlistEntry at 0x1C x86 / 0x20 x64).
//! * 0x20: early 6.0 Spare0/Spare1; late 6.0–6.1 Padding0[2] ∪ SlistEntry ∪ NextBuffer;
//!   6.2+ {ClockType:3, Frequency:61} ∪ SlistEntry ∪ NextBuffer.
//! * 0x38 (the tail): 5.x InstanceGuid ∪ {LoggerContext; GlobalEntry}; 6.0 Padding1[4] ∪
//!   StartTime ∪ Entry ∪ (early: SlistEntry, {NextBuffer; GlobalEntry}; late: {Padding2;
//!   GlobalEntry}); 6.1+ Padding1[4] ∪ ReferenceTime ∪ GlobalEntry (LIST_ENTRY); late 6.0+
//!   also {Pointer0; Pointer1}. Where the tail holds a pointer then a SINGLE_LIST_ENTRY, the
//!   latter is at 0x3C on x86 and 0x40 on x64.

use super::Era::{self, *};
use super::Ty::*;
use super::{add_rows, Row, Span, TableFamily};
use crate::symbols::layout::{LayoutSource, StructLayout};

const NAME: &str = "_WMI_BUFFER_HEADER";
/// The header's size, every version and architecture (`etl::header::BUFFER_HEADER_SIZE`).
pub(crate) const SIZE: u64 = 0x48;

pub(super) fn layout(era: Era, family: TableFamily) -> StructLayout {
    add_rows(
        StructLayout::new(NAME, SIZE, LayoutSource::Builtin),
        ROWS,
        era,
        family,
    )
}

/// The newest era: "6.1 and higher" / "6.2 and higher" run to the end of the tables.
const END: Era = B22000;

/// The offset of `field` in the newest era's layout, for code that reads or writes raw
/// buffer headers (`etl::header::offsets`: the members it uses have the same offsets on x86
/// and x64 since 6.0). Evaluated at compile time there: a field the table does not give for
/// the newest era, or gives at different offsets on x86 and x64, fails the build.
pub(crate) const fn newest_offset(field: &str) -> usize {
    let (mut i, mut found) = (0, None);
    while i < ROWS.len() {
        let r = &ROWS[i];
        if same(r.name.as_bytes(), field.as_bytes()) {
            if let (Some(x86), Some(x64)) = (newest(r.x86), newest(r.x64)) {
                assert!(x86 == x64, "x86 and x64 offsets differ");
                assert!(found.is_none(), "two rows of that name in the newest era");
                found = Some(x64 as usize);
            }
        }
        i += 1;
    }
    match found {
        Some(o) => o,
        None => panic!("no such field in the newest era"),
    }
}

/// The offset of the span that runs to the newest era.
const fn newest(spans: &[Span]) -> Option<u64> {
    let mut i = 0;
    while i < spans.len() {
        if spans[i].1 as u8 == END as u8 {
            return Some(spans[i].2);
        }
        i += 1;
    }
    None
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // 0x00: union { WNODE_HEADER Wnode; struct Lists; struct WNODE-compatible } (5.0-5.2),
    // union { Wnode; struct WNODE-compatible } (6.0)
    Row { name: "Wnode", ty: Struct("_WNODE_HEADER"), x86: &[(V50, V60Late, 0x00)], x64: &[(V52, V60Late, 0x00)] },
    // "Lists" (5.0-5.2)
    Row { name: "Reserved1", ty: U64, x86: &[(V50, V52, 0x00)], x64: &[(V52, V52, 0x00)] },
    Row { name: "Reserved2", ty: U64, x86: &[(V50, V52, 0x08)], x64: &[(V52, V52, 0x08)] },
    Row { name: "Reserved3", ty: LargeInt, x86: &[(V50, V52, 0x10)], x64: &[(V52, V52, 0x10)] },
    // LIST_ENTRY Entry: 0x18 (5.0; 5.1-5.2 in a union), 0x38 in 6.0 ("previously at 0x18")
    Row { name: "Entry", ty: Struct("_LIST_ENTRY"), x86: &[(V50, V52, 0x18), (V60Early, V60Late, 0x38)], x64: &[(V52, V52, 0x18), (V60Early, V60Late, 0x38)] },
    // 5.1-5.2: struct { PVOID Alignment; SINGLE_LIST_ENTRY SlistEntry; } in union with Entry
    Row { name: "Alignment", ty: VoidPtr, x86: &[(V51, V52, 0x18)], x64: &[(V52, V52, 0x18)] },
    // SlistEntry: 0x1C/0x20 (5.1-5.2), 0x38 (early 6.0), 0x20 (late 6.0 and higher)
    Row { name: "SlistEntry", ty: Struct("_SINGLE_LIST_ENTRY"), x86: &[(V51, V52, 0x1C), (V60Early, V60Early, 0x38), (V60Late, END, 0x20)], x64: &[(V52, V52, 0x20), (V60Early, V60Early, 0x38), (V60Late, END, 0x20)] },
    // "WNODE-compatible" members (direct members from 6.1)
    Row { name: "ReferenceCount", ty: I32, x86: &[(V50, V52, 0x00), (V60Early, END, 0x0C)], x64: &[(V52, V52, 0x00), (V60Early, END, 0x0C)] },
    Row { name: "BufferSize", ty: U32, x86: &[(V60Early, END, 0x00)], x64: &[(V60Early, END, 0x00)] },
    Row { name: "SavedOffset", ty: U32, x86: &[(V50, END, 0x04)], x64: &[(V52, END, 0x04)] },
    Row { name: "CurrentOffset", ty: U32, x86: &[(V50, END, 0x08)], x64: &[(V52, END, 0x08)] },
    Row { name: "UsePerfClock", ty: U32, x86: &[(V50, V52, 0x0C)], x64: &[(V52, V52, 0x0C)] },
    Row { name: "TimeStamp", ty: LargeInt, x86: &[(V50, END, 0x10)], x64: &[(V52, END, 0x10)] },
    // 6.0: union { LARGE_INTEGER TimeStamp; LARGE_INTEGER StartPerfClock; }
    Row { name: "StartPerfClock", ty: LargeInt, x86: &[(V60Early, V60Late, 0x10)], x64: &[(V60Early, V60Late, 0x10)] },
    Row { name: "Guid", ty: Struct("_GUID"), x86: &[(V50, V52, 0x18)], x64: &[(V52, V52, 0x18)] },
    Row { name: "SequenceNumber", ty: I64, x86: &[(V60Early, END, 0x18)], x64: &[(V60Early, END, 0x18)] },
    // 0x20
    Row { name: "Spare0", ty: U32, x86: &[(V60Early, V60Early, 0x20)], x64: &[(V60Early, V60Early, 0x20)] },
    Row { name: "Spare1", ty: U32, x86: &[(V60Early, V60Early, 0x24)], x64: &[(V60Early, V60Early, 0x24)] },
    Row { name: "Padding0", ty: U32Array(2), x86: &[(V60Late, V61, 0x20)], x64: &[(V60Late, V61, 0x20)] },
    Row { name: "ClockType", ty: Bits64(0, 3), x86: &[(V62, END, 0x20)], x64: &[(V62, END, 0x20)] },
    Row { name: "Frequency", ty: Bits64(3, 61), x86: &[(V62, END, 0x20)], x64: &[(V62, END, 0x20)] },
    // NextBuffer: 0x38 (early 6.0, in the tail), 0x20 (late 6.0 and higher)
    Row { name: "NextBuffer", ty: Ptr("_WMI_BUFFER_HEADER"), x86: &[(V60Early, V60Early, 0x38), (V60Late, END, 0x20)], x64: &[(V60Early, V60Early, 0x38), (V60Late, END, 0x20)] },
    // 0x28
    Row { name: "ClientContext", ty: Struct("_WMI_CLIENT_CONTEXT"), x86: &[(V50, V52, 0x28)], x64: &[(V52, V52, 0x28)] },
    Row { name: "ClientContext", ty: Struct("_ETW_BUFFER_CONTEXT"), x86: &[(V60Early, END, 0x28)], x64: &[(V60Early, END, 0x28)] },
    // 0x2C: ULONG Flags (5.0); union { WMI_BUFFER_STATE State; ULONG Flags; } (5.1-5.2);
    // union { ETW_BUFFER_STATE State; ULONG Flags; } (6.0); ETW_BUFFER_STATE State (6.1+)
    Row { name: "Flags", ty: U32, x86: &[(V50, V60Late, 0x2C)], x64: &[(V52, V60Late, 0x2C)] },
    Row { name: "State", ty: Struct("_WMI_BUFFER_STATE"), x86: &[(V51, V52, 0x2C)], x64: &[(V52, V52, 0x2C)] },
    Row { name: "State", ty: EtwBufferState, x86: &[(V60Early, END, 0x2C)], x64: &[(V60Early, END, 0x2C)] },
    // 0x30
    Row { name: "Offset", ty: U32, x86: &[(V50, END, 0x30)], x64: &[(V52, END, 0x30)] },
    Row { name: "EventsLost", ty: U32, x86: &[(V50, V51, 0x34)], x64: &[] },
    Row { name: "BufferFlag", ty: U16, x86: &[(V52, END, 0x34)], x64: &[(V52, END, 0x34)] },
    Row { name: "BufferType", ty: U16, x86: &[(V52, END, 0x36)], x64: &[(V52, END, 0x36)] },
    // 0x38: the tail
    Row { name: "InstanceGuid", ty: Struct("_GUID"), x86: &[(V50, V52, 0x38)], x64: &[(V52, V52, 0x38)] },
    Row { name: "Padding1", ty: U32Array(4), x86: &[(V60Early, END, 0x38)], x64: &[(V60Early, END, 0x38)] },
    Row { name: "StartTime", ty: LargeInt, x86: &[(V60Early, V60Late, 0x38)], x64: &[(V60Early, V60Late, 0x38)] },
    Row { name: "ReferenceTime", ty: Struct("_ETW_REF_CLOCK"), x86: &[(V61, END, 0x38)], x64: &[(V61, END, 0x38)] },
    Row { name: "LoggerContext", ty: VoidPtr, x86: &[(V50, V52, 0x38)], x64: &[(V52, V52, 0x38)] },
    Row { name: "Padding2", ty: VoidPtr, x86: &[(V60Late, V60Late, 0x38)], x64: &[(V60Late, V60Late, 0x38)] },
    // GlobalEntry: SINGLE_LIST_ENTRY after a pointer (5.0 to 6.0), LIST_ENTRY at 0x38 (6.1+)
    Row { name: "GlobalEntry", ty: Struct("_SINGLE_LIST_ENTRY"), x86: &[(V50, V60Late, 0x3C)], x64: &[(V52, V60Late, 0x40)] },
    Row { name: "GlobalEntry", ty: Struct("_LIST_ENTRY"), x86: &[(V61, END, 0x38)], x64: &[(V61, END, 0x38)] },
    // struct { PVOID Pointer0; PVOID Pointer1; } (late 6.0 and higher)
    Row { name: "Pointer0", ty: VoidPtr, x86: &[(V60Late, END, 0x38)], x64: &[(V60Late, END, 0x38)] },
    Row { name: "Pointer1", ty: VoidPtr, x86: &[(V60Late, END, 0x3C)], x64: &[(V60Late, END, 0x40)] },
];

#[cfg(test)]
mod tests {
    use super::super::layouts;
    use super::super::tests::off;
    use super::super::TableFamily::{self, X64, X86};

    fn at(build: u32, family: TableFamily, field: &str) -> Option<u64> {
        off(
            &layouts(build, family).unwrap(),
            "_WMI_BUFFER_HEADER",
            field,
        )
    }

    /// etw-internals.md §2.1 (6.1+) and crash-dump-format.md §2.3 (every build to 22000).
    #[test]
    fn modern_layout() {
        for b in [7601, 9200, 9600, 14393, 17763, 19041, 20348, 22000] {
            for family in [X86, X64] {
                if layouts(b, family).is_none() {
                    continue;
                }
                for (f, o) in [
                    ("BufferSize", 0),
                    ("SavedOffset", 4),
                    ("CurrentOffset", 8),
                    ("ReferenceCount", 0xC),
                    ("TimeStamp", 0x10),
                    ("SequenceNumber", 0x18),
                    ("SlistEntry", 0x20),
                    ("NextBuffer", 0x20),
                    ("ClientContext", 0x28),
                    ("State", 0x2C),
                    ("Offset", 0x30),
                    ("BufferFlag", 0x34),
                    ("BufferType", 0x36),
                    ("ReferenceTime", 0x38),
                    ("GlobalEntry", 0x38),
                    ("Padding1", 0x38),
                    ("Pointer0", 0x38),
                ] {
                    assert_eq!(at(b, family, f), Some(o), "{b} {family:?} {f}");
                }
                assert_eq!(at(b, family, "Pointer1"), Some(family.pick(0x3C, 0x40)));
                assert_eq!(at(b, family, "Wnode"), None);
            }
        }
        assert_eq!(at(7601, X64, "Padding0"), Some(0x20));
        assert_eq!(at(7601, X64, "ClockType"), None);
        assert_eq!(at(9200, X64, "ClockType"), Some(0x20));
        assert_eq!(at(9200, X64, "Frequency"), Some(0x20));
        assert_eq!(at(9200, X64, "Padding0"), None);
    }

    /// etw-internals.md §2.2 (older layouts).
    #[test]
    fn older_layouts() {
        // 5.x: ReferenceCount at 0, UsePerfClock 0xC, Guid 0x18, InstanceGuid / LoggerContext
        // at 0x38, GlobalEntry at 0x3C (x86) / 0x40 (x64).
        for (b, family) in [(2195, X86), (2600, X86), (3790, X86), (3790, X64)] {
            assert_eq!(at(b, family, "ReferenceCount"), Some(0));
            assert_eq!(at(b, family, "BufferSize"), None);
            assert_eq!(at(b, family, "UsePerfClock"), Some(0xC));
            assert_eq!(at(b, family, "Guid"), Some(0x18));
            assert_eq!(at(b, family, "ClientContext"), Some(0x28));
            assert_eq!(at(b, family, "Offset"), Some(0x30));
            assert_eq!(at(b, family, "LoggerContext"), Some(0x38));
            assert_eq!(at(b, family, "GlobalEntry"), Some(family.pick(0x3C, 0x40)));
        }
        assert_eq!(at(2195, X86, "Entry"), Some(0x18));
        assert_eq!(at(2195, X86, "SlistEntry"), None);
        assert_eq!(at(2195, X86, "State"), None);
        assert_eq!(at(2600, X86, "SlistEntry"), Some(0x1C));
        assert_eq!(at(3790, X64, "SlistEntry"), Some(0x20));
        assert_eq!(at(2600, X86, "EventsLost"), Some(0x34));
        assert_eq!(at(2600, X86, "BufferFlag"), None);
        assert_eq!(at(3790, X86, "BufferFlag"), Some(0x34));
        assert_eq!(at(3790, X86, "BufferType"), Some(0x36));
        // early 6.0: NextBuffer 0x38, GlobalEntry 0x3C / 0x40
        assert_eq!(at(6000, X86, "NextBuffer"), Some(0x38));
        assert_eq!(at(6000, X64, "GlobalEntry"), Some(0x40));
        assert_eq!(at(6000, X86, "GlobalEntry"), Some(0x3C));
        assert_eq!(at(6000, X86, "Spare0"), Some(0x20));
        // late 6.0: Padding0 ∪ SlistEntry ∪ NextBuffer at 0x20, {Padding2; GlobalEntry}
        assert_eq!(at(6001, X64, "NextBuffer"), Some(0x20));
        assert_eq!(at(6001, X64, "Padding2"), Some(0x38));
        assert_eq!(at(6001, X64, "GlobalEntry"), Some(0x40));
        assert_eq!(at(6001, X86, "StartPerfClock"), Some(0x10));
    }
}
