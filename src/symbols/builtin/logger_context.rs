//! `_WMI_LOGGER_CONTEXT`: the kernel's state for one event tracing session.
//!
//! Eras 5.0 to 2004 (x86 and x64): Geoff Chappell, "WMI_LOGGER_CONTEXT"
//! (geoffchappell.com …/inc/ntos/etwp/wmi_logger_context/index.htm, last modified 17 October
//! 2022; copies in /work/shared/reference/wmi_logger_context.txt and chappell/), which takes
//! the sizes and the offsets from the public symbols (XP SP3 and 2003 SP2 onwards; earlier
//! versions inferred from the code). Each row below is one row of that table: its offset
//! cells read as "offset (versions)", the last, bare offset applying to the remaining versions
//! of the row, which end with 2004 (the newest version the page covers).
//!
//! 20348 and 22000 (x64 only): crash-dump-format.md §2.3 (JPCERT ISF files from real PDBs),
//! which gives only the size and nine members.
//!
//! Only the members the tool reads are built in: those that locate buffers or count them, the
//! session's identity, mode, clock and times, and its silo.
//!
//! Reading notes:
//! * In Chappell's x64 cells for BuffersWritten, LogBuffersLost, RealTimeBuffersDelivered and
//!   RealTimeBuffersLost, the entry after "(6.2)" reads "(6.2 to 1511)"; it is read as
//!   "(6.3 to 1511)", as the x86 cells of the same rows and etw-internals.md §3.1 have it (6.3
//!   inserted PeakBuffersCount at x64 0x104, where 6.2 has BuffersWritten).
//! * Types are Chappell's: `LONG volatile` → LONG, `ULONG volatile` → ULONG, NTSTATUS → LONG,
//!   unions of a ULONG with bit fields → the ULONG (Flags).

use super::Era::{self, *};
use super::Ty::{self, *};
use super::{add_rows, lookup, Row, Span, TableFamily};
use crate::symbols::layout::{LayoutSource, StructLayout};

const NAME: &str = "_WMI_LOGGER_CONTEXT";

/// Sizes per era (Chappell's size table; §2.3 for 20348 and 22000, whose early builds'
/// sizes are used: the later builds are 0x550 and 0x540).
const SIZE_X86: &[Span] = &[
    (V50, V50, 0x140),
    (V51, V51, 0x1C8),
    (V52, V52, 0x1D8),
    (V60Early, V60Early, 0x270),
    (V60Late, V60Late, 0x280),
    (V61, V61, 0x238),
    (V62, V62, 0x270),
    (V63, V63, 0x278),
    (V1507, V1511, 0x288),
    (V1607, V1607, 0x2F0),
    (V1703, V1703, 0x310),
    (V1709, V1709, 0x5A0),
    (V1803, V1803, 0x370),
    (V1809, V1809, 0x380),
    (V1903, V1903, 0x390),
    (V2004, V2004, 0x398),
];
const SIZE_X64: &[Span] = &[
    (V52, V52, 0x280),
    (V60Early, V60Early, 0x350),
    (V60Late, V60Late, 0x370),
    (V61, V61, 0x330),
    (V62, V63, 0x378),
    (V1507, V1507, 0x398),
    (V1511, V1511, 0x390),
    (V1607, V1607, 0x440),
    (V1703, V1703, 0x468),
    (V1709, V1709, 0x990),
    (V1803, V1803, 0x510),
    (V1809, V1809, 0x520),
    (V1903, V1903, 0x540),
    (V2004, V2004, 0x550),
    (B20348, B20348, 0x570),
    (B22000, B22000, 0x560),
];

/// The layout for `era`, or `None` where the reference has no size for it.
pub(super) fn layout(era: Era, family: TableFamily) -> Option<StructLayout> {
    let size = lookup(family.pick(SIZE_X86, SIZE_X64), era)?;
    let layout = StructLayout::new(NAME, size, LayoutSource::Builtin);
    let layout = add_rows(layout, ROWS, era, family);
    Some(add_rows(layout, ROWS_2_3, era, family))
}

/// 20348 and 22000 (x64): the members crash-dump-format.md §2.3 lists. Types as in 2004.
const ROWS_2_3: &[Row] = &[
    row_2_3("LoggerId", U32, &[(B20348, B22000, 0x0)]),
    row_2_3("BufferSize", U32, &[(B20348, B22000, 0x4)]),
    row_2_3("LoggerMode", U32, &[(B20348, B22000, 0xC)]),
    row_2_3(
        "BufferQueue",
        Struct("_ETW_BUFFER_QUEUE"),
        &[(B20348, B20348, 0x40), (B22000, B22000, 0x30)],
    ),
    row_2_3(
        "GlobalList",
        Struct("_LIST_ENTRY"),
        &[(B20348, B20348, 0x60), (B22000, B22000, 0x50)],
    ),
    row_2_3(
        "CurrentBuffer",
        Struct("_EX_FAST_REF"),
        &[(B20348, B20348, 0x90), (B22000, B22000, 0x80)],
    ),
    row_2_3(
        "LoggerName",
        Struct("_UNICODE_STRING"),
        &[(B20348, B20348, 0x98), (B22000, B22000, 0x88)],
    ),
    row_2_3(
        "LogFileName",
        Struct("_UNICODE_STRING"),
        &[(B20348, B20348, 0xA8), (B22000, B22000, 0x98)],
    ),
    row_2_3(
        "InstanceGuid",
        Struct("_GUID"),
        &[(B20348, B20348, 0x124), (B22000, B22000, 0x114)],
    ),
];

const fn row_2_3(name: &'static str, ty: Ty, x64: &'static [Span]) -> Row {
    Row {
        name,
        ty,
        x86: &[],
        x64,
    }
}

/// Chappell's rows (x86 and x64 offsets per era, 5.0 to 2004).
#[rustfmt::skip]
const ROWS: &[Row] = &[
    // ULONG LoggerId;  (6.1 and higher)
    Row { name: "LoggerId", ty: U32, x86: &[(V61, V2004, 0x0)], x64: &[(V61, V2004, 0x0)] },
    // ULONG BufferSize;  (6.1 and higher)
    Row { name: "BufferSize", ty: U32, x86: &[(V61, V2004, 0x4)], x64: &[(V61, V2004, 0x4)] },
    // ULONG MaximumEventSize;  (6.1 and higher)
    Row { name: "MaximumEventSize", ty: U32, x86: &[(V61, V2004, 0x8)], x64: &[(V61, V2004, 0x8)] },
    // LONG CollectionOn;  (6.1 only)
    Row { name: "CollectionOn", ty: I32, x86: &[(V61, V61, 0xC)], x64: &[(V61, V61, 0xC)] },
    // ULONG LoggerMode;  (6.1 and higher)
    Row { name: "LoggerMode", ty: U32, x86: &[(V61, V61, 0x10), (V62, V2004, 0xC)], x64: &[(V61, V61, 0x10), (V62, V2004, 0xC)] },
    // LONG AcceptNewEvents;  (6.1 and higher)
    Row { name: "AcceptNewEvents", ty: I32, x86: &[(V61, V61, 0x14), (V62, V2004, 0x10)], x64: &[(V61, V61, 0x14), (V62, V2004, 0x10)] },
    // LONGLONG (*GetCpuClock) (VOID);  (6.1 and higher)
    Row { name: "GetCpuClock", ty: FnPtr, x86: &[(V61, V61, 0x18), (V62, V2004, 0x20)], x64: &[(V61, V61, 0x18), (V62, V1903, 0x28)] },
    // In x64 2004-family kernels GetCpuClock is already a ULONGLONG (a clock selector), not a
    // function pointer: the real 19041 ISFs (JPCERT 5278AFF8..., BBED7C29..., 733830EC...)
    // type it `unsigned long long`; etw-internals §3.1 dates the change to 19569, which the
    // ISFs contradict. The offset is unchanged.
    Row { name: "GetCpuClock", ty: U64, x86: &[], x64: &[(V2004, V2004, 0x28)] },
    // LARGE_INTEGER StartTime;  (5.0 to 6.1)
    Row { name: "StartTime", ty: LargeInt, x86: &[(V50, V52, 0x8), (V60Early, V60Late, 0x0), (V61, V61, 0x20)], x64: &[(V52, V52, 0x8), (V60Early, V60Late, 0x0), (V61, V61, 0x20)] },
    // ETHREAD *LoggerThread;  (5.1 and higher)
    Row { name: "LoggerThread", ty: Ptr("_ETHREAD"), x86: &[(V51, V52, 0x28), (V60Early, V60Late, 0xC), (V61, V61, 0x2C), (V62, V2004, 0x24)], x64: &[(V52, V52, 0x38), (V60Early, V60Late, 0x10), (V61, V2004, 0x30)] },
    // NTSTATUS LoggerStatus;  (5.0 and higher)
    Row { name: "LoggerStatus", ty: I32, x86: &[(V50, V50, 0x3C), (V51, V52, 0x4C), (V60Early, V60Late, 0x10), (V61, V61, 0x30), (V62, V2004, 0x28)], x64: &[(V52, V52, 0x70), (V60Early, V60Late, 0x18), (V61, V2004, 0x38)] },
    // ULONG LoggerId;  (5.0 to 6.0)
    Row { name: "LoggerId", ty: U32, x86: &[(V50, V50, 0x40), (V51, V52, 0x50), (V60Early, V60Late, 0x14)], x64: &[(V52, V52, 0x74), (V60Early, V60Late, 0x1C)] },
    // LONG BuffersAvailable;  (5.0 to 5.2)
    Row { name: "BuffersAvailable", ty: I32, x86: &[(V50, V50, 0x44), (V51, V52, 0x54)], x64: &[(V52, V52, 0x78)] },
    // ULONG UsePerfClock;  (5.1 to 5.2)
    Row { name: "UsePerfClock", ty: U32, x86: &[(V51, V52, 0x58)], x64: &[(V52, V52, 0x7C)] },
    // ULONG BuffersDirty;  (5.1 only)
    Row { name: "BuffersDirty", ty: U32, x86: &[(V51, V51, 0x60)], x64: &[] },
    // LONG BuffersDirty;  (5.2 only)
    Row { name: "BuffersDirty", ty: I32, x86: &[(V52, V52, 0x60)], x64: &[(V52, V52, 0x84)] },
    // ULONG BuffersInUse;  (5.1 only)
    Row { name: "BuffersInUse", ty: U32, x86: &[(V51, V51, 0x64)], x64: &[] },
    // LONG BuffersInUse;  (5.2 only)
    Row { name: "BuffersInUse", ty: I32, x86: &[(V52, V52, 0x64)], x64: &[(V52, V52, 0x88)] },
    // PVOID NBQHead;  (6.0 to 6.1)
    Row { name: "NBQHead", ty: VoidPtr, x86: &[(V60Early, V60Late, 0x18), (V61, V61, 0x34)], x64: &[(V60Early, V60Late, 0x20), (V61, V61, 0x40)] },
    // ETW_BUFFER_QUEUE BufferQueue;  (6.2 and higher)
    Row { name: "BufferQueue", ty: Struct("_ETW_BUFFER_QUEUE"), x86: &[(V62, V2004, 0x30)], x64: &[(V62, V2004, 0x40)] },
    // PVOID OverflowNBQHead;  (6.0 to 6.1)
    Row { name: "OverflowNBQHead", ty: VoidPtr, x86: &[(V60Early, V60Late, 0x1C), (V61, V61, 0x38)], x64: &[(V60Early, V60Late, 0x28), (V61, V61, 0x48)] },
    // ETW_BUFFER_QUEUE OverflowQueue;  (6.2 and higher)
    Row { name: "OverflowQueue", ty: Struct("_ETW_BUFFER_QUEUE"), x86: &[(V62, V1511, 0x3C), (V1607, V2004, 0x38)], x64: &[(V62, V1511, 0x58), (V1607, V2004, 0x50)] },
    // LIST_ENTRY FreeList;  (5.0 only)
    Row { name: "FreeList", ty: Struct("_LIST_ENTRY"), x86: &[(V50, V50, 0x48)], x64: &[] },
    // SLIST_HEADER FreeList;  (5.1 to 5.2)
    Row { name: "FreeList", ty: Struct("_SLIST_HEADER"), x86: &[(V51, V52, 0x70)], x64: &[(V52, V52, 0x90)] },
    // SLIST_HEADER FlushList;  (5.1 to 5.2)
    Row { name: "FlushList", ty: Struct("_SLIST_HEADER"), x86: &[(V51, V52, 0x78)], x64: &[(V52, V52, 0xA0)] },
    // SLIST_HEADER WaitList;  (5.2 only)
    Row { name: "WaitList", ty: Struct("_SLIST_HEADER"), x86: &[(V52, V52, 0x80)], x64: &[(V52, V52, 0xB0)] },
    // LIST_ENTRY GlobalList;  (5.0 only)
    Row { name: "GlobalList", ty: Struct("_LIST_ENTRY"), x86: &[(V50, V50, 0x50)], x64: &[] },
    // SLIST_HEADER GlobalList;  (5.1 to 6.0)
    Row { name: "GlobalList", ty: Struct("_SLIST_HEADER"), x86: &[(V51, V51, 0x80), (V52, V52, 0x88), (V60Early, V60Late, 0x28)], x64: &[(V52, V52, 0xC0), (V60Early, V60Late, 0x40)] },
    // LIST_ENTRY GlobalList;  (6.1 and higher)
    Row { name: "GlobalList", ty: Struct("_LIST_ENTRY"), x86: &[(V61, V1511, 0x48), (V1607, V2004, 0x40)], x64: &[(V61, V61, 0x60), (V62, V1511, 0x70), (V1607, V2004, 0x60)] },
    // WMI_BUFFER_HEADER **ProcessorBuffers;  (5.0 only)
    Row { name: "ProcessorBuffers", ty: PtrPtr("_WMI_BUFFER_HEADER"), x86: &[(V50, V50, 0x5C)], x64: &[] },
    // SLIST_HEADER *ProcessorBuffers;  (5.1 only)
    Row { name: "ProcessorBuffers", ty: Ptr("_SLIST_HEADER"), x86: &[(V51, V51, 0x88)], x64: &[] },
    // WMI_BUFFER_HEADER **ProcessorBuffers;  (5.2 only)
    Row { name: "ProcessorBuffers", ty: PtrPtr("_WMI_BUFFER_HEADER"), x86: &[(V52, V52, 0x90)], x64: &[(V52, V52, 0xD0)] },
    // WMI_BUFFER_HEADER *BatchedBufferList;  (late 6.0)
    Row { name: "BatchedBufferList", ty: Ptr("_WMI_BUFFER_HEADER"), x86: &[(V60Late, V60Late, 0x30)], x64: &[(V60Late, V60Late, 0x50)] },
    // union { WMI_BUFFER_HEADER *BatchedBufferList; EX_FAST_REF CurrentBuffer; };  (6.1 and higher)
    Row { name: "BatchedBufferList", ty: Ptr("_WMI_BUFFER_HEADER"), x86: &[(V61, V61, 0x50), (V62, V1511, 0x58), (V1607, V1703, 0x50), (V1709, V2004, 0x58)], x64: &[(V61, V61, 0x70), (V62, V1511, 0x90), (V1607, V1703, 0x80), (V1709, V2004, 0x90)] },
    // union { WMI_BUFFER_HEADER *BatchedBufferList; EX_FAST_REF CurrentBuffer; };  (6.1 and higher)
    Row { name: "CurrentBuffer", ty: Struct("_EX_FAST_REF"), x86: &[(V61, V61, 0x50), (V62, V1511, 0x58), (V1607, V1703, 0x50), (V1709, V2004, 0x58)], x64: &[(V61, V61, 0x70), (V62, V1511, 0x90), (V1607, V1703, 0x80), (V1709, V2004, 0x90)] },
    // UNICODE_STRING LoggerName;  (5.0 and higher)
    Row { name: "LoggerName", ty: Struct("_UNICODE_STRING"), x86: &[(V50, V50, 0x60), (V51, V51, 0x8C), (V52, V52, 0x94), (V60Early, V60Early, 0x30), (V60Late, V60Late, 0x34), (V61, V61, 0x54), (V62, V1511, 0x5C), (V1607, V1703, 0x54), (V1709, V2004, 0x5C)], x64: &[(V52, V52, 0xD8), (V60Early, V60Early, 0x50), (V60Late, V60Late, 0x58), (V61, V61, 0x78), (V62, V1511, 0x98), (V1607, V1703, 0x88), (V1709, V2004, 0x98)] },
    // UNICODE_STRING LogFileName;  (5.0 and higher)
    Row { name: "LogFileName", ty: Struct("_UNICODE_STRING"), x86: &[(V50, V50, 0x68), (V51, V51, 0x94), (V52, V52, 0x9C), (V60Early, V60Early, 0x38), (V60Late, V60Late, 0x3C), (V61, V61, 0x5C), (V62, V1511, 0x64), (V1607, V1703, 0x5C), (V1709, V2004, 0x64)], x64: &[(V52, V52, 0xE8), (V60Early, V60Early, 0x60), (V60Late, V60Late, 0x68), (V61, V61, 0x88), (V62, V1511, 0xA8), (V1607, V1703, 0x98), (V1709, V2004, 0xA8)] },
    // UNICODE_STRING LogFilePattern;  (5.1 and higher)
    Row { name: "LogFilePattern", ty: Struct("_UNICODE_STRING"), x86: &[(V51, V51, 0x9C), (V52, V52, 0xA4), (V60Early, V60Early, 0x40), (V60Late, V60Late, 0x44), (V61, V61, 0x64), (V62, V1511, 0x6C), (V1607, V1703, 0x64), (V1709, V2004, 0x6C)], x64: &[(V52, V52, 0xF8), (V60Early, V60Early, 0x70), (V60Late, V60Late, 0x78), (V61, V61, 0x98), (V62, V1511, 0xB8), (V1607, V1703, 0xA8), (V1709, V2004, 0xB8)] },
    // ULONG ClockType;  (6.0 and higher)
    Row { name: "ClockType", ty: U32, x86: &[(V60Early, V60Early, 0x50), (V60Late, V60Late, 0x54), (V61, V61, 0x74), (V62, V1511, 0x7C), (V1607, V1703, 0x74), (V1709, V2004, 0x7C)], x64: &[(V60Early, V60Early, 0x90), (V60Late, V60Late, 0x98), (V61, V61, 0xB8), (V62, V1511, 0xD8), (V1607, V1703, 0xC8), (V1709, V2004, 0xD8)] },
    // LONG CollectionOn;  (5.0 to 6.0)
    Row { name: "CollectionOn", ty: I32, x86: &[(V50, V50, 0x74), (V51, V51, 0xB0), (V52, V52, 0xB8), (V60Early, V60Early, 0x54), (V60Late, V60Late, 0x58)], x64: &[(V52, V52, 0x120), (V60Early, V60Early, 0x94), (V60Late, V60Late, 0x9C)] },
    // ULONG MaximumFileSize;  (5.0 to 6.1)
    Row { name: "MaximumFileSize", ty: U32, x86: &[(V50, V50, 0x84), (V51, V51, 0xC4), (V52, V52, 0xCC), (V60Early, V60Early, 0x58), (V60Late, V60Late, 0x5C), (V61, V61, 0x78)], x64: &[(V52, V52, 0x134), (V60Early, V60Early, 0x98), (V60Late, V60Late, 0xA0), (V61, V61, 0xBC)] },
    // union { ULONG LoggerMode; WMI_LOGGER_MODE LoggerModeFlags; };  (5.0 to 5.2)
    Row { name: "LoggerMode", ty: U32, x86: &[(V50, V50, 0x88), (V51, V51, 0xC8), (V52, V52, 0xD0)], x64: &[(V52, V52, 0x138)] },
    // ULONG LoggerMode;  (6.0)
    Row { name: "LoggerMode", ty: U32, x86: &[(V60Early, V60Early, 0x5C), (V60Late, V60Late, 0x60)], x64: &[(V60Early, V60Early, 0x9C), (V60Late, V60Late, 0xA4)] },
    // ULONG LastFlushedBuffer;  (5.0 and higher)
    Row { name: "LastFlushedBuffer", ty: U32, x86: &[(V50, V50, 0x8C), (V51, V51, 0xCC), (V52, V52, 0xD8), (V60Early, V60Early, 0x60), (V60Late, V60Late, 0x64), (V61, V61, 0x7C), (V62, V1511, 0x80), (V1607, V1703, 0x78), (V1709, V2004, 0x80)], x64: &[(V52, V52, 0x140), (V60Early, V60Early, 0xA0), (V60Late, V60Late, 0xA8), (V61, V61, 0xC0), (V62, V1511, 0xDC), (V1607, V1703, 0xCC), (V1709, V2004, 0xDC)] },
    // LARGE_INTEGER FlushTimer;  (5.0 only)
    Row { name: "FlushTimer", ty: LargeInt, x86: &[(V50, V50, 0x90)], x64: &[] },
    // ULONG FlushTimer;  (5.1 and higher)
    Row { name: "FlushTimer", ty: U32, x86: &[(V51, V51, 0xD4), (V52, V52, 0xE0), (V60Early, V60Early, 0x64), (V60Late, V60Late, 0x68), (V61, V61, 0x80), (V62, V1511, 0x84), (V1607, V1703, 0x7C), (V1709, V2004, 0x84)], x64: &[(V52, V52, 0x148), (V60Early, V60Early, 0xA4), (V60Late, V60Late, 0xAC), (V61, V61, 0xC4), (V62, V1511, 0xE0), (V1607, V1703, 0xD0), (V1709, V2004, 0xE0)] },
    // ULONG FlushThreshold;  (late 6.0 and higher)
    Row { name: "FlushThreshold", ty: U32, x86: &[(V60Late, V60Late, 0x6C), (V61, V61, 0x84), (V62, V1511, 0x88), (V1607, V1703, 0x80), (V1709, V2004, 0x88)], x64: &[(V60Late, V60Late, 0xB0), (V61, V61, 0xC8), (V62, V1511, 0xE4), (V1607, V1703, 0xD4), (V1709, V2004, 0xE4)] },
    // LARGE_INTEGER FirstBufferOffset;  (5.0 to 5.2)
    Row { name: "FirstBufferOffset", ty: LargeInt, x86: &[(V50, V50, 0x98), (V51, V51, 0xD8), (V52, V52, 0xE8)], x64: &[(V52, V52, 0x150)] },
    // LARGE_INTEGER ByteOffset;  (5.0 and higher)
    Row { name: "ByteOffset", ty: LargeInt, x86: &[(V50, V50, 0xA0), (V51, V51, 0xE0), (V52, V52, 0xF0), (V60Early, V60Early, 0x68), (V60Late, V60Late, 0x70), (V61, V61, 0x88), (V62, V1511, 0x90), (V1607, V1703, 0x88), (V1709, V2004, 0x90)], x64: &[(V52, V52, 0x158), (V60Early, V60Early, 0xA8), (V60Late, V60Late, 0xB8), (V61, V61, 0xD0), (V62, V1511, 0xE8), (V1607, V1703, 0xD8), (V1709, V2004, 0xE8)] },
    // LARGE_INTEGER BufferAgeLimit;  (5.0 to 5.2)
    Row { name: "BufferAgeLimit", ty: LargeInt, x86: &[(V50, V50, 0xA8), (V51, V51, 0xE8), (V52, V52, 0xF8)], x64: &[(V52, V52, 0x160)] },
    // ULONG BufferSize;  (5.0 only)
    Row { name: "BufferSize", ty: U32, x86: &[(V50, V50, 0xB0)], x64: &[] },
    // LONG NumberOfBuffers;  (5.0 only)
    Row { name: "NumberOfBuffers", ty: I32, x86: &[(V50, V50, 0xB4)], x64: &[] },
    // ULONG MaximumBuffers;  (5.0 to 5.2)
    Row { name: "MaximumBuffers", ty: U32, x86: &[(V50, V50, 0xB8), (V51, V51, 0xF0), (V52, V52, 0x100)], x64: &[(V52, V52, 0x168)] },
    // ULONG MinimumBuffers;  (5.0 and higher)
    Row { name: "MinimumBuffers", ty: U32, x86: &[(V50, V50, 0xBC), (V51, V51, 0xF4), (V52, V52, 0x104), (V60Early, V60Early, 0x78), (V60Late, V60Late, 0x80), (V61, V61, 0x90), (V62, V1511, 0x98), (V1607, V1703, 0x90), (V1709, V2004, 0x98)], x64: &[(V52, V52, 0x16C), (V60Early, V60Early, 0xB8), (V60Late, V60Late, 0xC8), (V61, V61, 0xD8), (V62, V1511, 0xF0), (V1607, V1703, 0xE0), (V1709, V2004, 0xF0)] },
    // LONG volatile BuffersAvailable;  (6.0 and higher)
    Row { name: "BuffersAvailable", ty: I32, x86: &[(V60Early, V60Early, 0x7C), (V60Late, V60Late, 0x84), (V61, V61, 0x94), (V62, V1511, 0x9C), (V1607, V1703, 0x94), (V1709, V2004, 0x9C)], x64: &[(V60Early, V60Early, 0xBC), (V60Late, V60Late, 0xCC), (V61, V61, 0xDC), (V62, V1511, 0xF4), (V1607, V1703, 0xE4), (V1709, V2004, 0xF4)] },
    // LONG volatile NumberOfBuffers;  (6.0 and higher)
    Row { name: "NumberOfBuffers", ty: I32, x86: &[(V60Early, V60Early, 0x80), (V60Late, V60Late, 0x88), (V61, V61, 0x98), (V62, V1511, 0xA0), (V1607, V1703, 0x98), (V1709, V2004, 0xA0)], x64: &[(V60Early, V60Early, 0xC0), (V60Late, V60Late, 0xD0), (V61, V61, 0xE0), (V62, V1511, 0xF8), (V1607, V1703, 0xE8), (V1709, V2004, 0xF8)] },
    // ULONG MaximumBuffers;  (6.0 and higher)
    Row { name: "MaximumBuffers", ty: U32, x86: &[(V60Early, V60Early, 0x84), (V60Late, V60Late, 0x8C), (V61, V61, 0x9C), (V62, V1511, 0xA4), (V1607, V1703, 0x9C), (V1709, V2004, 0xA4)], x64: &[(V60Early, V60Early, 0xC4), (V60Late, V60Late, 0xD4), (V61, V61, 0xE4), (V62, V1511, 0xFC), (V1607, V1703, 0xEC), (V1709, V2004, 0xFC)] },
    // ULONG EventsLost;  (5.0 to 5.2)
    Row { name: "EventsLost", ty: U32, x86: &[(V50, V50, 0xC0), (V51, V51, 0xF8), (V52, V52, 0x108)], x64: &[(V52, V52, 0x170)] },
    // ULONG volatile EventsLost;  (6.0 and higher)
    Row { name: "EventsLost", ty: U32, x86: &[(V60Early, V60Early, 0x88), (V60Late, V60Late, 0x90), (V61, V61, 0xA0), (V62, V1511, 0xA8), (V1607, V1703, 0xA0), (V1709, V2004, 0xA8)], x64: &[(V60Early, V60Early, 0xC8), (V60Late, V60Late, 0xD8), (V61, V61, 0xE8), (V62, V1511, 0x100), (V1607, V1703, 0xF0), (V1709, V2004, 0x100)] },
    // LONG volatile PeakBuffersCount;  (6.3 and higher)
    Row { name: "PeakBuffersCount", ty: I32, x86: &[(V63, V1511, 0xAC), (V1607, V1703, 0xA4), (V1709, V2004, 0xAC)], x64: &[(V63, V1511, 0x104), (V1607, V1703, 0xF4), (V1709, V2004, 0x104)] },
    // ULONG BuffersWritten;  (5.0 and higher)
    Row { name: "BuffersWritten", ty: U32, x86: &[(V50, V50, 0xC4), (V51, V51, 0xFC), (V52, V52, 0x10C), (V60Early, V60Early, 0x8C), (V60Late, V60Late, 0x94), (V61, V61, 0xA4), (V62, V62, 0xAC), (V63, V1511, 0xB0), (V1607, V1703, 0xA8), (V1709, V2004, 0xB0)], x64: &[(V52, V52, 0x174), (V60Early, V60Early, 0xCC), (V60Late, V60Late, 0xDC), (V61, V61, 0xEC), (V62, V62, 0x104), (V63, V1511, 0x108), (V1607, V1703, 0xF8), (V1709, V2004, 0x108)] },
    // ULONG LogBuffersLost;  (5.0 and higher)
    Row { name: "LogBuffersLost", ty: U32, x86: &[(V50, V50, 0xC8), (V51, V51, 0x100), (V52, V52, 0x110), (V60Early, V60Early, 0x90), (V60Late, V60Late, 0x98), (V61, V61, 0xA8), (V62, V62, 0xB0), (V63, V1511, 0xB4), (V1607, V1703, 0xAC), (V1709, V2004, 0xB4)], x64: &[(V52, V52, 0x178), (V60Early, V60Early, 0xD0), (V60Late, V60Late, 0xE0), (V61, V61, 0xF0), (V62, V62, 0x108), (V63, V1511, 0x10C), (V1607, V1703, 0xFC), (V1709, V2004, 0x10C)] },
    // ULONG RealTimeBuffersDelivered;  (6.0 and higher)
    Row { name: "RealTimeBuffersDelivered", ty: U32, x86: &[(V60Early, V60Early, 0x94), (V60Late, V60Late, 0x9C), (V61, V61, 0xAC), (V62, V62, 0xB4), (V63, V1511, 0xB8), (V1607, V1703, 0xB0), (V1709, V2004, 0xB8)], x64: &[(V60Early, V60Early, 0xD4), (V60Late, V60Late, 0xE4), (V61, V61, 0xF4), (V62, V62, 0x10C), (V63, V1511, 0x110), (V1607, V1703, 0x100), (V1709, V2004, 0x110)] },
    // ULONG RealTimeBuffersLost;  (5.0 and higher)
    Row { name: "RealTimeBuffersLost", ty: U32, x86: &[(V50, V50, 0xCC), (V51, V51, 0x104), (V52, V52, 0x114), (V60Early, V60Early, 0x98), (V60Late, V60Late, 0xA0), (V61, V61, 0xB0), (V62, V62, 0xB8), (V63, V1511, 0xBC), (V1607, V1703, 0xB4), (V1709, V2004, 0xBC)], x64: &[(V52, V52, 0x17C), (V60Early, V60Early, 0xD8), (V60Late, V60Late, 0xE8), (V61, V61, 0xF8), (V62, V62, 0x110), (V63, V1511, 0x114), (V1607, V1703, 0x104), (V1709, V2004, 0x114)] },
    // ULONG BufferSize;  (5.1 to 6.0)
    Row { name: "BufferSize", ty: U32, x86: &[(V51, V51, 0x108), (V52, V52, 0x118), (V60Early, V60Early, 0x9C), (V60Late, V60Late, 0xA4)], x64: &[(V52, V52, 0x180), (V60Early, V60Early, 0xDC), (V60Late, V60Late, 0xEC)] },
    // LONG NumberOfBuffers;  (5.1 to 5.2)
    Row { name: "NumberOfBuffers", ty: I32, x86: &[(V51, V51, 0x10C), (V52, V52, 0x11C)], x64: &[(V52, V52, 0x184)] },
    // ULONG MaximumEventSize;  (6.0)
    Row { name: "MaximumEventSize", ty: U32, x86: &[(V60Early, V60Early, 0xA0), (V60Late, V60Late, 0xA8)], x64: &[(V60Early, V60Early, 0xE0), (V60Late, V60Late, 0xF0)] },
    // GUID InstanceGuid;  (5.0 and higher)
    Row { name: "InstanceGuid", ty: Struct("_GUID"), x86: &[(V50, V50, 0xD4), (V51, V51, 0x114), (V52, V52, 0x124), (V60Early, V60Early, 0xAC), (V60Late, V60Late, 0xB4), (V61, V61, 0xBC), (V62, V62, 0xC4), (V63, V1511, 0xC8), (V1607, V1703, 0xC0), (V1709, V2004, 0xC8)], x64: &[(V52, V52, 0x190), (V60Early, V60Early, 0xF4), (V60Late, V60Late, 0x104), (V61, V61, 0x10C), (V62, V1511, 0x124), (V1607, V1703, 0x114), (V1709, V2004, 0x124)] },
    // ULONG UsePerfClock;  (5.0 only)
    Row { name: "UsePerfClock", ty: U32, x86: &[(V50, V50, 0xE4)], x64: &[] },
    // LONGLONG (*GetCpuClock) (VOID);  (5.1 to 6.0)
    Row { name: "GetCpuClock", ty: FnPtr, x86: &[(V51, V51, 0x128), (V52, V52, 0x138), (V60Early, V60Early, 0xBC), (V60Late, V60Late, 0xC4)], x64: &[(V52, V52, 0x1A8), (V60Early, V60Early, 0x108), (V60Late, V60Late, 0x118)] },
    // ULONG MaximumFileSize;  (6.2 and higher)
    Row { name: "MaximumFileSize", ty: U32, x86: &[(V62, V62, 0xD4), (V63, V1511, 0xD8), (V1607, V1703, 0xD0), (V1709, V2004, 0xD8)], x64: &[(V62, V1511, 0x134), (V1607, V1703, 0x124), (V1709, V2004, 0x134)] },
    // VOID (*BufferCallback) ( WMI_BUFFER_HEADER *, PVOID);  (5.1 to 5.2)
    Row { name: "BufferCallback", ty: FnPtr, x86: &[(V51, V51, 0x1A8), (V52, V52, 0x1B8)], x64: &[(V52, V52, 0x258)] },
    // VOID (* volatile BufferCallback) ( WMI_BUFFER_HEADER *, PVOID);  (6.0 to 6.1)
    Row { name: "BufferCallback", ty: FnPtr, x86: &[(V60Early, V60Early, 0xC4), (V60Late, V60Late, 0xCC), (V61, V61, 0xD0)], x64: &[(V60Early, V60Early, 0x118), (V60Late, V60Late, 0x128), (V61, V61, 0x120)] },
    // POOL_TYPE PoolType;  (5.1 and higher)
    Row { name: "PoolType", ty: PoolType, x86: &[(V51, V51, 0x1B0), (V52, V52, 0x1C0), (V60Early, V60Early, 0xC8), (V60Late, V60Late, 0xD0), (V61, V61, 0xD4), (V62, V62, 0xDC), (V63, V1511, 0xE0), (V1607, V1703, 0xD8), (V1709, V2004, 0xE0)], x64: &[(V52, V52, 0x268), (V60Early, V60Early, 0x120), (V60Late, V60Late, 0x130), (V61, V61, 0x128), (V62, V1511, 0x13C), (V1607, V1703, 0x12C), (V1709, V2004, 0x13C)] },
    // LARGE_INTEGER ReferenceSystemTime;  (5.1 to 5.2)
    Row { name: "ReferenceSystemTime", ty: LargeInt, x86: &[(V51, V51, 0x1B8), (V52, V52, 0x1C8)], x64: &[(V52, V52, 0x270)] },
    // LARGE_INTEGER ReferenceTimeStamp;  (5.1 to 5.2)
    Row { name: "ReferenceTimeStamp", ty: LargeInt, x86: &[(V51, V51, 0x1C0), (V52, V52, 0x1D0)], x64: &[(V52, V52, 0x278)] },
    // ETW_REF_CLOCK ReferenceTime;  (6.0 and higher)
    Row { name: "ReferenceTime", ty: Struct("_ETW_REF_CLOCK"), x86: &[(V60Early, V60Early, 0xD0), (V60Late, V61, 0xD8), (V62, V62, 0xE0), (V63, V1511, 0xE8), (V1607, V1703, 0xE0), (V1709, V2004, 0xE8)], x64: &[(V60Early, V60Early, 0x128), (V60Late, V60Late, 0x138), (V61, V61, 0x130), (V62, V1511, 0x140), (V1607, V1703, 0x130), (V1709, V2004, 0x140)] },
    // LONG CollectionOn;  (6.2 and higher)
    Row { name: "CollectionOn", ty: I32, x86: &[(V62, V62, 0xF0), (V63, V1511, 0xF8), (V1607, V1703, 0xF0), (V1709, V2004, 0xF8)], x64: &[(V62, V1511, 0x150), (V1607, V1703, 0x140), (V1709, V2004, 0x150)] },
    // ULONG RealtimeBuffersSaved;  (6.0 and higher)
    Row { name: "RealtimeBuffersSaved", ty: U32, x86: &[(V60Early, V60Early, 0x128), (V60Late, V60Late, 0x138), (V61, V61, 0x130), (V62, V62, 0x140), (V63, V1511, 0x148), (V1607, V1703, 0x140), (V1709, V2004, 0x148)], x64: &[(V60Early, V60Early, 0x1A8), (V60Late, V60Late, 0x1C0), (V61, V61, 0x1A0), (V62, V1511, 0x1B8), (V1607, V1703, 0x1A8), (V1709, V2004, 0x1B8)] },
    // WMI_BUFFER_HEADER DummyBufferForMarker;  (6.0 only)
    Row { name: "DummyBufferForMarker", ty: Struct("_WMI_BUFFER_HEADER"), x86: &[(V60Early, V60Early, 0x1F0), (V60Late, V60Late, 0x200)], x64: &[(V60Early, V60Early, 0x2C8), (V60Late, V60Late, 0x2E8)] },
    // LARGE_INTEGER StartTime;  (6.2 and higher)
    Row { name: "StartTime", ty: LargeInt, x86: &[(V62, V62, 0x230), (V63, V63, 0x238), (V1507, V1511, 0x240), (V1607, V1703, 0x238), (V1709, V2004, 0x240)], x64: &[(V62, V63, 0x320), (V1507, V1511, 0x328), (V1607, V1703, 0x318), (V1709, V2004, 0x328)] },
    // LONGLONG BufferSequenceNumber;  (6.0 and higher)
    Row { name: "BufferSequenceNumber", ty: I64, x86: &[(V60Early, V60Early, 0x238), (V60Late, V60Late, 0x248), (V61, V61, 0x220), (V62, V62, 0x240), (V63, V63, 0x248), (V1507, V1511, 0x250), (V1607, V1703, 0x248), (V1709, V2004, 0x250)], x64: &[(V60Early, V60Early, 0x310), (V60Late, V60Late, 0x330), (V61, V61, 0x308), (V62, V63, 0x330), (V1507, V1511, 0x338), (V1607, V1703, 0x328), (V1709, V2004, 0x338)] },
    // LONG AcceptNewEvents;  (6.0 only)
    Row { name: "AcceptNewEvents", ty: I32, x86: &[(V60Early, V60Early, 0x240), (V60Late, V60Late, 0x250)], x64: &[(V60Early, V60Early, 0x318), (V60Late, V60Late, 0x338)] },
    // union { ULONG Flags; struct { /* bit fields, follow link */ }; };  (6.0 and higher)
    Row { name: "Flags", ty: U32, x86: &[(V60Early, V60Early, 0x244), (V60Late, V60Late, 0x254), (V61, V61, 0x228), (V62, V62, 0x248), (V63, V63, 0x250), (V1507, V1511, 0x258), (V1607, V1703, 0x250), (V1709, V2004, 0x258)], x64: &[(V60Early, V60Early, 0x31C), (V60Late, V60Late, 0x33C), (V61, V61, 0x310), (V62, V63, 0x338), (V1507, V1511, 0x340), (V1607, V1703, 0x330), (V1709, V2004, 0x340)] },
    // WMI_BUFFER_HEADER **ScratchArray;  (6.2 and higher)
    Row { name: "ScratchArray", ty: PtrPtr("_WMI_BUFFER_HEADER"), x86: &[(V62, V62, 0x268), (V63, V63, 0x270), (V1507, V1511, 0x278), (V1607, V1703, 0x270), (V1709, V1709, 0x504), (V1803, V2004, 0x2D0)], x64: &[(V62, V63, 0x370), (V1507, V1511, 0x378), (V1607, V1703, 0x368), (V1709, V1709, 0x888), (V1803, V2004, 0x410)] },
    // ETW_SILODRIVERSTATE *SiloState;  (1607 and higher)
    Row { name: "SiloState", ty: Ptr("_ETW_SILODRIVERSTATE"), x86: &[(V1607, V1607, 0x280), (V1703, V1703, 0x29C), (V1709, V1709, 0x52C), (V1803, V2004, 0x2FC)], x64: &[(V1607, V1607, 0x388), (V1703, V1703, 0x3B0), (V1709, V1709, 0x8D0), (V1803, V2004, 0x458)] },
    // WMI_BUFFER_HEADER *CompressionTarget;  (1607 and higher)
    Row { name: "CompressionTarget", ty: Ptr("_WMI_BUFFER_HEADER"), x86: &[(V1607, V1607, 0x29C), (V1703, V1703, 0x2B8), (V1709, V1709, 0x548), (V1803, V2004, 0x318)], x64: &[(V1607, V1607, 0x3C0), (V1703, V1703, 0x3E8), (V1709, V1709, 0x908), (V1803, V2004, 0x490)] },
    // LONG CompressionOn;  (1607 and higher)
    Row { name: "CompressionOn", ty: I32, x86: &[(V1607, V1607, 0x2A4), (V1703, V1703, 0x2C0), (V1709, V1709, 0x550), (V1803, V2004, 0x320)], x64: &[(V1607, V1607, 0x3D0), (V1703, V1703, 0x3F8), (V1709, V1709, 0x918), (V1803, V2004, 0x4A0)] },
    // ULONG PartialBufferCompressionLevel;  (1607 and higher)
    Row { name: "PartialBufferCompressionLevel", ty: U32, x86: &[(V1607, V1607, 0x2AC), (V1703, V1703, 0x2C8), (V1709, V1709, 0x558), (V1803, V2004, 0x328)], x64: &[(V1607, V1607, 0x3D8), (V1703, V1703, 0x400), (V1709, V1709, 0x920), (V1803, V2004, 0x4A8)] },
    // LARGE_INTEGER LastBufferSwitchTime;  (1607 and higher)
    Row { name: "LastBufferSwitchTime", ty: LargeInt, x86: &[(V1607, V1607, 0x2D8), (V1703, V1703, 0x2F8), (V1709, V1709, 0x588), (V1803, V2004, 0x358)], x64: &[(V1607, V1607, 0x428), (V1703, V1703, 0x450), (V1709, V1709, 0x970), (V1803, V2004, 0x4F8)] },
    // LARGE_INTEGER BufferWriteDuration;  (1607 and higher)
    Row { name: "BufferWriteDuration", ty: LargeInt, x86: &[(V1607, V1607, 0x2E0), (V1703, V1703, 0x300), (V1709, V1709, 0x590), (V1803, V2004, 0x360)], x64: &[(V1607, V1607, 0x430), (V1703, V1703, 0x458), (V1709, V1709, 0x978), (V1803, V2004, 0x500)] },
    // LARGE_INTEGER BufferCompressDuration;  (1607 and higher)
    Row { name: "BufferCompressDuration", ty: LargeInt, x86: &[(V1607, V1607, 0x2E8), (V1703, V1703, 0x308), (V1709, V1709, 0x598), (V1803, V2004, 0x368)], x64: &[(V1607, V1607, 0x438), (V1703, V1703, 0x460), (V1709, V1709, 0x980), (V1803, V2004, 0x508)] },
    // MDL *BufferMdl;  (2004 and higher)
    Row { name: "BufferMdl", ty: Ptr("_MDL"), x86: &[(V2004, V2004, 0x394)], x64: &[(V2004, V2004, 0x540)] },
];

#[cfg(test)]
mod tests {
    use super::super::layouts;
    use super::super::tests::off;
    use super::super::TableFamily::{self, X64, X86};

    fn at(build: u32, family: TableFamily, field: &str) -> Option<u64> {
        off(
            &layouts(build, family).unwrap(),
            "_WMI_LOGGER_CONTEXT",
            field,
        )
    }

    fn size(build: u32, family: TableFamily) -> u64 {
        let l = layouts(build, family).unwrap();
        super::super::tests::get(&l, "_WMI_LOGGER_CONTEXT")
            .unwrap()
            .size
    }

    #[test]
    fn sizes_from_the_size_table() {
        let x86 = [
            (2195, 0x140),
            (2600, 0x1C8),
            (3790, 0x1D8),
            (6000, 0x270),
            (6001, 0x280),
            (7601, 0x238),
            (9200, 0x270),
            (9600, 0x278),
            (10240, 0x288),
            (10586, 0x288),
            (14393, 0x2F0),
            (15063, 0x310),
            (16299, 0x5A0),
            (17134, 0x370),
            (17763, 0x380),
            (18362, 0x390),
            (19041, 0x398),
        ];
        let x64 = [
            (3790, 0x280),
            (6000, 0x350),
            (6002, 0x370),
            (7600, 0x330),
            (9200, 0x378),
            (9600, 0x378),
            (10240, 0x398),
            (10586, 0x390),
            (14393, 0x440),
            (15063, 0x468),
            (16299, 0x990),
            (17134, 0x510),
            (17763, 0x520),
            (18363, 0x540),
            (19045, 0x550),
            (20348, 0x570),
            (22000, 0x560),
        ];
        for (b, s) in x86 {
            assert_eq!(size(b, X86), s, "x86 {b}");
        }
        for (b, s) in x64 {
            assert_eq!(size(b, X64), s, "x64 {b}");
        }
    }

    #[test]
    fn x64_2004_fields() {
        for (f, o) in [
            ("LoggerId", 0),
            ("BufferSize", 4),
            ("MaximumEventSize", 8),
            ("LoggerMode", 0xC),
            ("AcceptNewEvents", 0x10),
            ("GetCpuClock", 0x28),
            ("LoggerThread", 0x30),
            ("LoggerStatus", 0x38),
            ("BufferQueue", 0x40),
            ("OverflowQueue", 0x50),
            ("GlobalList", 0x60),
            ("BatchedBufferList", 0x90),
            ("CurrentBuffer", 0x90),
            ("LoggerName", 0x98),
            ("LogFileName", 0xA8),
            ("LogFilePattern", 0xB8),
            ("ClockType", 0xD8),
            ("LastFlushedBuffer", 0xDC),
            ("FlushTimer", 0xE0),
            ("FlushThreshold", 0xE4),
            ("ByteOffset", 0xE8),
            ("MinimumBuffers", 0xF0),
            ("BuffersAvailable", 0xF4),
            ("NumberOfBuffers", 0xF8),
            ("MaximumBuffers", 0xFC),
            ("EventsLost", 0x100),
            ("PeakBuffersCount", 0x104),
            ("BuffersWritten", 0x108),
            ("LogBuffersLost", 0x10C),
            ("RealTimeBuffersDelivered", 0x110),
            ("RealTimeBuffersLost", 0x114),
            ("InstanceGuid", 0x124),
            ("MaximumFileSize", 0x134),
            ("PoolType", 0x13C),
            ("ReferenceTime", 0x140),
            ("CollectionOn", 0x150),
            ("RealtimeBuffersSaved", 0x1B8),
            ("StartTime", 0x328),
            ("BufferSequenceNumber", 0x338),
            ("Flags", 0x340),
            ("ScratchArray", 0x410),
            ("SiloState", 0x458),
            ("CompressionTarget", 0x490),
            ("CompressionOn", 0x4A0),
            ("BufferMdl", 0x540),
        ] {
            assert_eq!(at(19041, X64, f), Some(o), "{f}");
        }
    }

    #[test]
    fn x86_examples() {
        assert_eq!(at(7601, X86, "LoggerName"), Some(0x54));
        assert_eq!(at(7601, X86, "GlobalList"), Some(0x48));
        assert_eq!(at(7601, X86, "CurrentBuffer"), Some(0x50));
        assert_eq!(at(7601, X86, "NBQHead"), Some(0x34));
        assert_eq!(at(7601, X86, "BufferQueue"), None);
        assert_eq!(at(19041, X86, "LoggerName"), Some(0x5C));
        assert_eq!(at(19041, X86, "BufferMdl"), Some(0x394));
        assert_eq!(at(2195, X86, "ProcessorBuffers"), Some(0x5C));
        assert_eq!(at(2195, X86, "LoggerId"), Some(0x40));
        assert_eq!(at(2195, X86, "GetCpuClock"), None);
    }

    /// etw-internals.md §3.1, "WMI_LOGGER_CONTEXT fields that matter": (field, build,
    /// x86 offset, x64 offset).
    #[test]
    fn etw_internals_3_1_table() {
        #[rustfmt::skip]
        let table: &[(&str, u32, Option<u64>, Option<u64>)] = &[
            ("LoggerId", 2195, Some(0x40), None),
            ("LoggerId", 2600, Some(0x50), None),
            ("LoggerId", 3790, Some(0x50), Some(0x74)),
            ("LoggerId", 6000, Some(0x14), Some(0x1C)),
            ("LoggerId", 6001, Some(0x14), Some(0x1C)),
            ("LoggerId", 7601, Some(0), Some(0)),
            ("BufferSize", 2195, Some(0xB0), None),
            ("BufferSize", 2600, Some(0x108), None),
            ("BufferSize", 3790, Some(0x118), Some(0x180)),
            ("BufferSize", 6000, Some(0x9C), Some(0xDC)),
            ("BufferSize", 6001, Some(0xA4), Some(0xEC)),
            ("LoggerMode", 2195, Some(0x88), None),
            ("LoggerMode", 2600, Some(0xC8), None),
            ("LoggerMode", 3790, Some(0xD0), Some(0x138)),
            ("LoggerMode", 6000, Some(0x5C), Some(0x9C)),
            ("LoggerMode", 6001, Some(0x60), Some(0xA4)),
            ("LoggerMode", 7601, Some(0x10), Some(0x10)),
            ("LoggerMode", 9200, Some(0xC), Some(0xC)),
            ("GetCpuClock", 2600, Some(0x128), None),
            ("GetCpuClock", 3790, Some(0x138), Some(0x1A8)),
            ("GetCpuClock", 6000, Some(0xBC), Some(0x108)),
            ("GetCpuClock", 6001, Some(0xC4), Some(0x118)),
            ("GetCpuClock", 7601, Some(0x18), Some(0x18)),
            ("GetCpuClock", 9600, Some(0x20), Some(0x28)),
            ("NBQHead", 6000, Some(0x18), Some(0x20)),
            ("NBQHead", 7601, Some(0x34), Some(0x40)),
            ("BufferQueue", 9200, Some(0x30), Some(0x40)),
            ("BufferQueue", 14393, Some(0x30), Some(0x40)),
            ("OverflowNBQHead", 6000, Some(0x1C), Some(0x28)),
            ("OverflowNBQHead", 7601, Some(0x38), Some(0x48)),
            ("OverflowQueue", 9600, Some(0x3C), Some(0x58)),
            ("OverflowQueue", 15063, Some(0x38), Some(0x50)),
            ("OverflowQueue", 19041, Some(0x38), Some(0x50)),
            ("GlobalList", 2195, Some(0x50), None),
            ("GlobalList", 2600, Some(0x80), None),
            ("GlobalList", 3790, Some(0x88), Some(0xC0)),
            ("GlobalList", 6000, Some(0x28), Some(0x40)),
            ("GlobalList", 6001, Some(0x28), Some(0x40)),
            ("GlobalList", 7601, Some(0x48), Some(0x60)),
            ("GlobalList", 10586, Some(0x48), Some(0x70)),
            ("GlobalList", 14393, Some(0x40), Some(0x60)),
            ("ProcessorBuffers", 2195, Some(0x5C), None),
            ("ProcessorBuffers", 2600, Some(0x88), None),
            ("ProcessorBuffers", 3790, Some(0x90), Some(0xD0)),
            ("ProcessorBuffers", 6001, None, None),
            ("BatchedBufferList", 6000, None, None),
            ("BatchedBufferList", 6001, Some(0x30), Some(0x50)),
            ("CurrentBuffer", 6001, None, None),
            ("CurrentBuffer", 7601, Some(0x50), Some(0x70)),
            ("CurrentBuffer", 9200, Some(0x58), Some(0x90)),
            ("CurrentBuffer", 15063, Some(0x50), Some(0x80)),
            ("CurrentBuffer", 16299, Some(0x58), Some(0x90)),
            ("LoggerName", 2195, Some(0x60), None),
            ("LoggerName", 2600, Some(0x8C), None),
            ("LoggerName", 3790, Some(0x94), Some(0xD8)),
            ("LoggerName", 6000, Some(0x30), Some(0x50)),
            ("LoggerName", 6001, Some(0x34), Some(0x58)),
            ("LoggerName", 7601, Some(0x54), Some(0x78)),
            ("LoggerName", 9200, Some(0x5C), Some(0x98)),
            ("LoggerName", 14393, Some(0x54), Some(0x88)),
            ("LoggerName", 19041, Some(0x5C), Some(0x98)),
            ("ClockType", 6000, Some(0x50), Some(0x90)),
            ("ClockType", 6001, Some(0x54), Some(0x98)),
            ("ClockType", 7601, Some(0x74), Some(0xB8)),
            ("ClockType", 9200, Some(0x7C), Some(0xD8)),
            ("ClockType", 14393, Some(0x74), Some(0xC8)),
            ("ClockType", 19041, Some(0x7C), Some(0xD8)),
            ("NumberOfBuffers", 2195, Some(0xB4), None),
            ("NumberOfBuffers", 2600, Some(0x10C), None),
            ("NumberOfBuffers", 3790, Some(0x11C), Some(0x184)),
            ("NumberOfBuffers", 6000, Some(0x80), Some(0xC0)),
            ("NumberOfBuffers", 6001, Some(0x88), Some(0xD0)),
            ("NumberOfBuffers", 7601, Some(0x98), Some(0xE0)),
            ("NumberOfBuffers", 9200, Some(0xA0), Some(0xF8)),
            ("NumberOfBuffers", 14393, Some(0x98), Some(0xE8)),
            ("NumberOfBuffers", 19041, Some(0xA0), Some(0xF8)),
            ("BuffersWritten", 2195, Some(0xC4), None),
            ("BuffersWritten", 2600, Some(0xFC), None),
            ("BuffersWritten", 3790, Some(0x10C), Some(0x174)),
            ("BuffersWritten", 6000, Some(0x8C), Some(0xCC)),
            ("BuffersWritten", 6001, Some(0x94), Some(0xDC)),
            ("BuffersWritten", 7601, Some(0xA4), Some(0xEC)),
            ("BuffersWritten", 9200, Some(0xAC), Some(0x104)),
            ("BuffersWritten", 9600, Some(0xB0), Some(0x108)),
            ("BuffersWritten", 10586, Some(0xB0), Some(0x108)),
            ("BuffersWritten", 14393, Some(0xA8), Some(0xF8)),
            ("BuffersWritten", 19041, Some(0xB0), Some(0x108)),
            ("InstanceGuid", 2195, Some(0xD4), None),
            ("InstanceGuid", 2600, Some(0x114), None),
            ("InstanceGuid", 3790, Some(0x124), Some(0x190)),
            ("InstanceGuid", 6000, Some(0xAC), Some(0xF4)),
            ("InstanceGuid", 6001, Some(0xB4), Some(0x104)),
            ("InstanceGuid", 7601, Some(0xBC), Some(0x10C)),
            ("InstanceGuid", 9200, Some(0xC4), Some(0x124)),
            ("InstanceGuid", 9600, Some(0xC8), Some(0x124)),
            ("InstanceGuid", 14393, Some(0xC0), Some(0x114)),
            ("InstanceGuid", 19041, Some(0xC8), Some(0x124)),
            ("PoolType", 2195, None, None),
            ("PoolType", 2600, Some(0x1B0), None),
            ("PoolType", 3790, Some(0x1C0), Some(0x268)),
            ("PoolType", 6000, Some(0xC8), Some(0x120)),
            ("PoolType", 6001, Some(0xD0), Some(0x130)),
            ("PoolType", 7601, Some(0xD4), Some(0x128)),
            ("PoolType", 9200, Some(0xDC), Some(0x13C)),
            ("PoolType", 9600, Some(0xE0), Some(0x13C)),
            ("PoolType", 14393, Some(0xD8), Some(0x12C)),
            ("PoolType", 19041, Some(0xE0), Some(0x13C)),
            ("ReferenceSystemTime", 2600, Some(0x1B8), None),
            ("ReferenceTimeStamp", 2600, Some(0x1C0), None),
            ("ReferenceSystemTime", 3790, Some(0x1C8), Some(0x270)),
            ("ReferenceTimeStamp", 3790, Some(0x1D0), Some(0x278)),
            ("ReferenceTime", 6000, Some(0xD0), Some(0x128)),
            ("ReferenceTime", 6001, Some(0xD8), Some(0x138)),
            ("ReferenceTime", 7601, Some(0xD8), Some(0x130)),
            ("ReferenceTime", 9200, Some(0xE0), Some(0x140)),
            ("ReferenceTime", 9600, Some(0xE8), Some(0x140)),
            ("ReferenceTime", 14393, Some(0xE0), Some(0x130)),
            ("ReferenceTime", 19041, Some(0xE8), Some(0x140)),
            ("StartTime", 2195, Some(0x08), None),
            ("StartTime", 2600, Some(0x08), None),
            ("StartTime", 3790, Some(0x08), Some(0x08)),
            ("StartTime", 6000, Some(0), Some(0)),
            ("StartTime", 6001, Some(0), Some(0)),
            ("StartTime", 7601, Some(0x20), Some(0x20)),
            ("StartTime", 9200, Some(0x230), Some(0x320)),
            ("StartTime", 9600, Some(0x238), Some(0x320)),
            ("StartTime", 10240, Some(0x240), Some(0x328)),
            ("StartTime", 14393, Some(0x238), Some(0x318)),
            ("StartTime", 19041, Some(0x240), Some(0x328)),
            ("SiloState", 10586, None, None),
            ("SiloState", 14393, Some(0x280), Some(0x388)),
            ("SiloState", 15063, Some(0x29C), Some(0x3B0)),
            ("SiloState", 16299, Some(0x52C), Some(0x8D0)),
            ("SiloState", 17134, Some(0x2FC), Some(0x458)),
            ("SiloState", 19041, Some(0x2FC), Some(0x458)),
        ];
        for &(field, build, x86, x64) in table {
            assert_eq!(at(build, X86, field), x86, "x86 {build} {field}");
            if let Some(l) = layouts(build, X64) {
                assert_eq!(
                    off(&l, "_WMI_LOGGER_CONTEXT", field),
                    x64,
                    "x64 {build} {field}"
                );
            }
        }
    }

    /// Union members share an offset; no other members of the built-in subset overlap.
    #[test]
    fn no_overlaps_except_the_current_buffer_union() {
        use crate::symbols::layout::TypeRef;
        fn bytes(ty: &TypeRef, family: TableFamily) -> u64 {
            let p = family.pick(4, 8);
            match ty {
                TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => *size,
                TypeRef::Pointer { .. } => p,
                TypeRef::Union { .. } => 8,
                TypeRef::Struct { name } => match name.raw() {
                    "_UNICODE_STRING" | "_LIST_ENTRY" | "_ETW_BUFFER_QUEUE" => 2 * p,
                    "_SLIST_HEADER" => family.pick(8, 16),
                    "_EX_FAST_REF" => p,
                    "_GUID" | "_ETW_REF_CLOCK" => 16,
                    "_WMI_BUFFER_HEADER" => 0x48,
                    other => panic!("unexpected {other}"),
                },
                other => panic!("unexpected {other:?}"),
            }
        }
        for &b in super::super::tests::BUILDS {
            for family in [X86, X64] {
                let Some(l) = layouts(b, family) else {
                    continue;
                };
                let t = super::super::tests::get(&l, "_WMI_LOGGER_CONTEXT").unwrap();
                for w in t.fields.windows(2) {
                    let union = w[0].offset == w[1].offset
                        && [w[0].name.raw(), w[1].name.raw()]
                            == ["BatchedBufferList", "CurrentBuffer"];
                    if !union {
                        assert!(
                            w[0].offset + bytes(&w[0].ty, family) <= w[1].offset,
                            "{b} {family:?}: {} overlaps {}",
                            w[0].name,
                            w[1].name
                        );
                    }
                }
            }
        }
    }
}
