//! Built-in per-version layouts of the structures the tool reads, for when the symbols lack
//! them (public-only PDBs) or no symbols are given. Chosen by NT build number.
//!
//! Sources: the reference texts (Geoff Chappell's WMI_LOGGER_CONTEXT, WMI_BUFFER_HEADER,
//! ETW_SILODRIVERSTATE and KPRCB pages, etw-internals.md, crash-dump-format.md §2.3).
//! A test compares them field by field with the real ISF files.
//!
//! # Eras and build ranges
//!
//! Each table is keyed by a version *era*. A build number selects the era whose range covers
//! it; ranges run from one era's first build up to the next era's first build:
//!
//! | era | builds | x86 | x64 |
//! |---|---|---|---|
//! | 5.0 (2000) | 2195 – 2599 | yes | – |
//! | 5.1 (XP) | 2600 – 3789 | yes | – |
//! | 5.2 (2003, XP x64) | 3790 – 5999 | yes | yes |
//! | early 6.0 (Vista RTM) | 6000 | yes | yes |
//! | late 6.0 (Vista SP1+, 2008) | 6001 – 7599 | yes | yes |
//! | 6.1 (7) | 7600 – 9199 | yes | yes |
//! | 6.2 (8) | 9200 – 9599 | yes | yes |
//! | 6.3 (8.1) | 9600 – 10239 | yes | yes |
//! | 1507 (10.0) | 10240 – 10585 | yes | yes |
//! | 1511 | 10586 – 14392 | yes | yes |
//! | 1607 | 14393 – 15062 | yes | yes |
//! | 1703 | 15063 – 16298 | yes | yes |
//! | 1709 | 16299 – 17133 | yes | yes |
//! | 1803 | 17134 – 17762 | yes | yes |
//! | 1809 | 17763 – 18361 | yes | yes |
//! | 1903 (and 1909) | 18362 – 19040 | yes | yes |
//! | 2004 (19041 – 19045) | 19041 – 20347 | yes | yes |
//! | 20348 (Server 2022) | 20348 – 21999 | – | yes |
//! | 22000 (Windows 11 21H2) | 22000 | – | yes |
//!
//! Builds before 2195, after 22000, x64 before 5.2 and x86 from 20348 on give `None`.
//!
//! The eras up to 2004 come from Geoff Chappell's tables, which describe each version's
//! release-time symbols. crash-dump-format.md §2.3 (layouts from real PDBs of later service
//! builds) is the source for 20348 and 22000; where it shows a *different* layout for a later
//! service build of an earlier era, the table keeps Chappell's value and the difference is
//! listed in the notes.

pub(crate) mod buffer_header;
pub mod corpus;
mod kdbg;
mod kprcb;
mod logger_context;
mod silo;

use super::layout::{StructLayout, TypeRef};
use crate::dump::Arch;

/// Which family of the built-in tables a kernel's layouts come from: the x86 offsets or the
/// x64 offsets (each `Row` has both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TableFamily {
    X86,
    X64,
}

impl TableFamily {
    /// The family of the tables for a kernel of `arch`.
    pub fn of(arch: Arch) -> TableFamily {
        match arch {
            Arch::X86 { .. } => TableFamily::X86,
            Arch::X64 => TableFamily::X64,
            Arch::Arm64 => TableFamily::X86, // ARM64 takes the x86 tables today
        }
    }

    /// `x86` or `x64`, whichever is this family's.
    fn pick<T>(self, x86: T, x64: T) -> T {
        match self {
            TableFamily::X86 => x86,
            TableFamily::X64 => x64,
        }
    }
}

/// The layouts for one Windows version and architecture.
#[derive(Clone, Debug)]
pub struct BuiltinLayouts {
    /// The version era the tables describe: "5.0", "5.1", "5.2", "early 6.0", "late 6.0",
    /// "6.1", "6.2", "6.3", "1507", "1511", "1607", "1703", "1709", "1803", "1809", "1903",
    /// "2004", "20348" or "22000".
    pub era: &'static str,
    /// Which layout of the era: "release" (the version's release build, Chappell's tables)
    /// or a later service-build layout of the same build number (see [`variants`]).
    pub variant: &'static str,
    /// Layouts (source = Builtin, fields sorted): _WMI_LOGGER_CONTEXT, _WMI_BUFFER_HEADER,
    /// _KDDEBUGGER_DATA64, and where the version has them _ETW_SILODRIVERSTATE (1511+) and
    /// _KPRCB (size, and EtwSupport from 6.0), with only the fields the reference documents.
    /// _ESERVERSILO_GLOBALS is not built in: the reference gives no offset for EtwSiloState.
    pub types: Vec<StructLayout>,
    /// Caveats the user should see (e.g. "layouts vary between builds of 17763").
    pub notes: Vec<String>,
}

/// Built-in layouts for NT build `build` from the x64 or the x86 tables (`family`).
/// `None` when the build is outside every table.
pub fn layouts(build: u32, family: TableFamily) -> Option<BuiltinLayouts> {
    let era = Era::from_build(build)?;
    if family == TableFamily::X64 && era < Era::V52 {
        return None; // no 64-bit Windows before 5.2
    }
    if family == TableFamily::X86 && era >= Era::B20348 {
        return None; // no 32-bit x86 release of these; the references give x64 only
    }
    let mut types = vec![
        logger_context::layout(era, family)?,
        buffer_header::layout(era, family),
        kdbg::layout(),
    ];
    types.extend(silo::layout(era, family));
    types.extend(kprcb::layout(era, family));
    for t in &mut types {
        t.normalize();
    }
    Some(BuiltinLayouts {
        era: era.name(),
        variant: "release",
        types,
        notes: notes(era, family),
    })
}

/// The first build of the hand-written era that covers `build` (e.g. 19041 for 19042, 9200
/// for 9400); None outside every era. A caller choosing between an era table and the corpus
/// layouts of an earlier build uses it to prefer the closer one.
pub fn era_start(build: u32) -> Option<u32> {
    let era = Era::from_build(build)?;
    ERA_STARTS
        .iter()
        .find(|(_, e)| *e == era)
        .map(|&(start, _)| start)
}

/// The caveat about the fixed `_KDDEBUGGER_DATA64` layout (shown whenever it is built in).
pub(crate) const KDBG_NOTE: &str = "_KDDEBUGGER_DATA64 is the fixed public layout (WDBGEXTS.H); \
     members past the block's own Size (0x340 in old kernels, 0x380 on 19041) are absent";

/// The public, fixed KDDEBUGGER_DATA64 layout (WDBGEXTS.H; the same for every version and
/// for x86 and x64; which fields a kernel has is given by the block's Size).
pub(crate) fn kdbg_layout() -> StructLayout {
    let mut l = kdbg::layout();
    l.normalize();
    l
}

/// Every known layout for a build: the release layout first, then the layouts later service
/// builds of the same build number have (crash-dump-format.md §2.3: layouts change inside one
/// build number, e.g. with the 2018 KPRCB growth). A service variant carries only the fields
/// the reference states for it; which variant a dump has is for the caller to validate.
pub fn variants(build: u32, family: TableFamily) -> Vec<BuiltinLayouts> {
    let Some(base) = layouts(build, family) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if family == TableFamily::X64 {
        for v in SERVICE_VARIANTS
            .iter()
            .filter(|v| v.builds.contains(&build))
        {
            out.push(v.apply(&base));
        }
    }
    out.insert(0, base);
    out
}

/// A later service-build layout, as a patch of the release layout (x64; crash-dump-format.md
/// §2.3, from the JPCERT ISFs of those builds).
struct ServiceVariant {
    builds: std::ops::RangeInclusive<u32>,
    name: &'static str,
    patches: &'static [Patch],
}

/// One structure's change: (type, new size, fields kept (None: all), field offsets set).
type Patch = (
    &'static str,
    Option<u64>,
    Option<&'static [&'static str]>,
    &'static [(&'static str, u64)],
);

/// The logger-context fields §2.3 tabulates for every build (the only ones a service variant
/// of _WMI_LOGGER_CONTEXT keeps when its size changed).
const WLC_23: &[&str] = &[
    "LoggerId",
    "BufferSize",
    "LoggerMode",
    "BufferQueue",
    "GlobalList",
    "CurrentBuffer",
    "BatchedBufferList",
    "LoggerName",
    "LogFileName",
    "InstanceGuid",
];
const SILO_23: &[&str] = &["MaxLoggers", "EtwpLoggerContext", "ProcessorBlocks"];

const SERVICE_VARIANTS: &[ServiceVariant] = &[
    ServiceVariant {
        builds: 7601..=7601,
        name: "7601 SP1, later updates",
        patches: &[
            ("_WMI_LOGGER_CONTEXT", Some(0x340), Some(WLC_23), &[]),
            ("_KPRCB", Some(0x6F00), None, &[("EtwSupport", 0x51F0)]),
        ],
    },
    ServiceVariant {
        builds: 9600..=9600,
        name: "9600, later updates",
        patches: &[
            ("_WMI_LOGGER_CONTEXT", Some(0x390), Some(WLC_23), &[]),
            ("_KPRCB", Some(0x7EC0), None, &[("EtwSupport", 0x5F18)]),
        ],
    },
    ServiceVariant {
        builds: 14393..=14393,
        name: "14393, later updates",
        patches: &[("_KPRCB", Some(0x7EC0), None, &[])],
    },
    ServiceVariant {
        builds: 17763..=17763,
        name: "17763, later updates",
        patches: &[
            ("_WMI_LOGGER_CONTEXT", Some(0x500), Some(WLC_23), &[]),
            (
                "_ETW_SILODRIVERSTATE",
                Some(0x11E8),
                Some(SILO_23),
                &[("EtwpLoggerContext", 0x1C8), ("ProcessorBlocks", 0x1028)],
            ),
        ],
    },
    ServiceVariant {
        builds: 18362..=18363,
        name: "18362.720 and later",
        patches: &[(
            "_ETW_SILODRIVERSTATE",
            Some(0x1220),
            Some(SILO_23),
            &[("EtwpLoggerContext", 0x1C8), ("ProcessorBlocks", 0x1028)],
        )],
    },
    ServiceVariant {
        builds: 19041..=19045,
        name: "19041.1466 and later",
        patches: &[("_WMI_LOGGER_CONTEXT", Some(0x530), Some(WLC_23), &[])],
    },
    ServiceVariant {
        builds: 20348..=20348,
        name: "20348, later",
        patches: &[("_WMI_LOGGER_CONTEXT", Some(0x550), Some(WLC_23), &[])],
    },
    ServiceVariant {
        builds: 22000..=22000,
        name: "22000, later",
        patches: &[("_WMI_LOGGER_CONTEXT", Some(0x540), Some(WLC_23), &[])],
    },
];

impl ServiceVariant {
    fn apply(&self, base: &BuiltinLayouts) -> BuiltinLayouts {
        let mut v = base.clone();
        v.variant = self.name;
        for &(ty, size, keep, set) in self.patches {
            if let Some(t) = v.types.iter_mut().find(|t| t.name == ty) {
                if let Some(sz) = size {
                    t.size = sz;
                }
                if let Some(keep) = keep {
                    t.fields.retain(|f| keep.contains(&f.name.raw()));
                }
                for &(field, off) in set {
                    if let Some(f) = t.fields.iter_mut().find(|f| f.name == field) {
                        f.offset = off;
                    }
                }
                t.normalize();
            }
        }
        v
    }
}

/// A version era of the tables, in release order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Era {
    V50,
    V51,
    V52,
    V60Early,
    V60Late,
    V61,
    V62,
    V63,
    V1507,
    V1511,
    V1607,
    V1703,
    V1709,
    V1803,
    V1809,
    V1903,
    V2004,
    B20348,
    B22000,
}

/// First build of each era, in order. The last era ends at `LAST_BUILD`.
const ERA_STARTS: &[(u32, Era)] = &[
    (2195, Era::V50),
    (2600, Era::V51),
    (3790, Era::V52),
    (6000, Era::V60Early),
    (6001, Era::V60Late),
    (7600, Era::V61),
    (9200, Era::V62),
    (9600, Era::V63),
    (10240, Era::V1507),
    (10586, Era::V1511),
    (14393, Era::V1607),
    (15063, Era::V1703),
    (16299, Era::V1709),
    (17134, Era::V1803),
    (17763, Era::V1809),
    (18362, Era::V1903),
    (19041, Era::V2004),
    (20348, Era::B20348),
    (22000, Era::B22000),
];

/// The newest build the tables cover (Windows 11 21H2).
const LAST_BUILD: u32 = 22000;

impl Era {
    fn from_build(build: u32) -> Option<Era> {
        if build > LAST_BUILD {
            return None;
        }
        ERA_STARTS
            .iter()
            .rev()
            .find(|(start, _)| build >= *start)
            .map(|&(_, era)| era)
    }

    fn name(self) -> &'static str {
        match self {
            Era::V50 => "5.0",
            Era::V51 => "5.1",
            Era::V52 => "5.2",
            Era::V60Early => "early 6.0",
            Era::V60Late => "late 6.0",
            Era::V61 => "6.1",
            Era::V62 => "6.2",
            Era::V63 => "6.3",
            Era::V1507 => "1507",
            Era::V1511 => "1511",
            Era::V1607 => "1607",
            Era::V1703 => "1703",
            Era::V1709 => "1709",
            Era::V1803 => "1803",
            Era::V1809 => "1809",
            Era::V1903 => "1903",
            Era::V2004 => "2004",
            Era::B20348 => "20348",
            Era::B22000 => "22000",
        }
    }
}

/// `(first era, last era, value)`, both ends inclusive.
type Span = (Era, Era, u64);

/// The value of the span that covers `era`, if any.
fn lookup(spans: &[Span], era: Era) -> Option<u64> {
    spans
        .iter()
        .find(|(from, to, _)| *from <= era && era <= *to)
        .map(|&(_, _, v)| v)
}

/// The field types used by the tables, turned into [`TypeRef`]s by [`Ty::type_ref`].
#[derive(Clone, Copy, Debug)]
enum Ty {
    /// UCHAR
    U8,
    /// USHORT
    U16,
    /// ULONG
    U32,
    /// ULONGLONG / ULONG64
    U64,
    /// LONG, NTSTATUS
    I32,
    /// LONGLONG
    I64,
    /// LARGE_INTEGER
    LargeInt,
    /// POOL_TYPE
    PoolType,
    /// ETW_BUFFER_STATE
    EtwBufferState,
    /// A structure by name.
    Struct(&'static str),
    /// A pointer to a named structure.
    Ptr(&'static str),
    /// A pointer to a pointer to a named structure.
    PtrPtr(&'static str),
    /// PVOID
    VoidPtr,
    /// A pointer to a function.
    FnPtr,
    /// `ULONG name[n]`
    U32Array(u64),
    /// `STRUCT *name[n]`
    PtrArray(&'static str, u64),
    /// `STRUCT name[n]`
    StructArray(&'static str, u64),
    /// A bit field of `length` bits at bit `position` of a ULONGLONG.
    Bits64(u32, u32),
    /// A bit field of `length` bits at bit `position` of a USHORT.
    Bits16(u32, u32),
}

impl Ty {
    fn type_ref(self) -> TypeRef {
        match self {
            Ty::U8 => TypeRef::uint(1),
            Ty::U16 => TypeRef::uint(2),
            Ty::U32 => TypeRef::uint(4),
            Ty::U64 => TypeRef::uint(8),
            Ty::I32 => TypeRef::int(4),
            Ty::I64 => TypeRef::int(8),
            Ty::LargeInt => TypeRef::Union {
                name: "_LARGE_INTEGER".into(),
            },
            Ty::PoolType => TypeRef::Enum {
                name: "_POOL_TYPE".into(),
                size: 4,
            },
            Ty::EtwBufferState => TypeRef::Enum {
                name: "_ETW_BUFFER_STATE".into(),
                size: 4,
            },
            Ty::Struct(name) => TypeRef::strukt(name),
            Ty::Ptr(name) => TypeRef::ptr_to(name),
            Ty::PtrPtr(name) => TypeRef::Pointer {
                target: Box::new(TypeRef::ptr_to(name)),
            },
            Ty::VoidPtr => TypeRef::void_ptr(),
            Ty::FnPtr => TypeRef::Pointer {
                target: Box::new(TypeRef::Function),
            },
            Ty::U32Array(count) => TypeRef::Array {
                element: Box::new(TypeRef::uint(4)),
                count,
            },
            Ty::PtrArray(name, count) => TypeRef::Array {
                element: Box::new(TypeRef::ptr_to(name)),
                count,
            },
            Ty::StructArray(name, count) => TypeRef::Array {
                element: Box::new(TypeRef::strukt(name)),
                count,
            },
            Ty::Bits64(position, length) => TypeRef::Bitfield {
                base: Box::new(TypeRef::uint(8)),
                position,
                length,
            },
            Ty::Bits16(position, length) => TypeRef::Bitfield {
                base: Box::new(TypeRef::uint(2)),
                position,
                length,
            },
        }
    }
}

/// One member of a table: its offsets per era and architecture. A member whose type changed
/// between versions has one row per type.
struct Row {
    name: &'static str,
    ty: Ty,
    x86: &'static [Span],
    x64: &'static [Span],
}

/// Adds to `layout` every row that has an offset for `era` on the architecture.
fn add_rows(mut layout: StructLayout, rows: &[Row], era: Era, family: TableFamily) -> StructLayout {
    for row in rows {
        let spans = family.pick(row.x86, row.x64);
        if let Some(offset) = lookup(spans, era) {
            layout = layout.with(row.name, offset, row.ty.type_ref());
        }
    }
    layout
}

/// The caveats for an era and architecture.
fn notes(era: Era, family: TableFamily) -> Vec<String> {
    let x64 = family == TableFamily::X64;
    let mut n: Vec<&str> = vec![
        "built-in layouts (no PDB types): offsets are those of the version's release build \
         as published (Geoff Chappell's symbol-derived tables; crash-dump-format.md §2.3 for \
         20348 and 22000); later service builds can differ, so a PDB for the exact kernel \
         takes precedence",
        "_ESERVERSILO_GLOBALS.EtwSiloState: the reference gives no offset, so it is not \
         built in (use the PDB, or the EtwpHostSiloState pointer)",
        KDBG_NOTE,
    ];
    if era == Era::V50 {
        n.push(
            "5.0: no type information in the symbols; Chappell infers the WMI_LOGGER_CONTEXT \
             and WMI_BUFFER_HEADER layouts from the code, and members whose names are unknown \
             are left out. The logger array has 32 entries and is reached through the WMI \
             service device extension (no WmipLoggerContext global)",
        );
    }
    if era == Era::V51 || era == Era::V52 {
        n.push(
            "5.1/5.2: the layouts are those of the XP SP3 / 2003 SP2 symbols; earlier service \
             packs are inferred from the code",
        );
    }
    if era <= Era::V52 {
        n.push(
            "5.x: per-processor current buffers are WMI_LOGGER_CONTEXT.ProcessorBuffers; \
             GlobalList is an SLIST_HEADER in 5.1-6.0 (a LIST_ENTRY in 5.0 and 6.1+)",
        );
    }
    if era == Era::V52 && !x64 {
        n.push(
            "5.2 x86: _KPRCB is left out: 2003 RTM (0xDD0 bytes) and SP1+ (0xEC0) share build \
             3790",
        );
    }
    if era == Era::V60Early || era == Era::V60Late {
        n.push(
            "6.0: build 6000 is 'early 6.0' (before SP1), builds 6001 and later are 'late 6.0'; \
             the two layouts differ",
        );
    }
    if (Era::V60Early..=Era::V63).contains(&era) {
        n.push(
            "6.0-6.3: the layout of the block KPRCB.EtwSupport points to (ETW_TRACING_BLOCK) \
             is unknown; find current buffers through WMI_LOGGER_CONTEXT.GlobalList",
        );
    }
    if !x64 && era >= Era::V60Early {
        n.push(
            "x86: offsets inside the KPRCB.EtwSupport block (per-CPU current buffers, CCSwap \
             batches) are unknown",
        );
    }
    if era == Era::V61 && x64 {
        n.push(
            "6.1 x64: a later 7601 service build (crash-dump-format.md §2.3) has a 0x340-byte \
             _WMI_LOGGER_CONTEXT (table: 0x330) and a 0x6F00-byte _KPRCB with EtwSupport at \
             0x51F0 (table: 0x4D00, 0x49F0): verify with a PDB",
        );
    }
    if era == Era::V63 && x64 {
        n.push(
            "6.3 x64: a later 9600 service build (crash-dump-format.md §2.3) has a 0x390-byte \
             _WMI_LOGGER_CONTEXT (table: 0x378) and a 0x7EC0-byte _KPRCB with EtwSupport at \
             0x5F18 (table: 0x5BC0, 0x5718): verify with a PDB",
        );
    }
    if era == Era::V1607 && x64 {
        n.push(
            "1607 x64: a later 14393 service build has a 0x7EC0-byte _KPRCB (table: 0x6900; \
             EtwSupport 0x5FD8 in both)",
        );
    }
    if era == Era::V1507 {
        n.push(
            "1507: the logger array is the global WmipLoggerContext[64]; 1507 has an \
             ETW_SILODRIVERSTATE but without the logger array, and it is not built in",
        );
    }
    if (Era::V1511..=Era::V1703).contains(&era) {
        n.push(
            "1511-1703: the logger array is ETW_SILODRIVERSTATE.WmipLoggerContext, inline, 64 \
             entries",
        );
    }
    if era >= Era::V1709 {
        n.push(
            "1709+: ETW_SILODRIVERSTATE.EtwpLoggerContext points to a separate array of \
             MaxLoggers entries; free slots hold a value with bit 0 set",
        );
    }
    if era >= Era::V1709 && x64 {
        n.push("1709+ x64: WMI_LOGGER_CONTEXT is 16-byte aligned (its StackTraceBlock is)");
    }
    if era >= Era::V1809 {
        n.push(
            "17763, 18362, 19041, 20348 and 22000 each have two different layouts of some \
             structures within one build number (crash-dump-format.md §2.3): verify with a PDB",
        );
    }
    if era == Era::V1809 && x64 {
        n.push(
            "1809 x64: later 17763 builds have a 0x500-byte _WMI_LOGGER_CONTEXT and a \
             0x11E8-byte _ETW_SILODRIVERSTATE with EtwpLoggerContext at 0x1C8 and \
             ProcessorBlocks at 0x1028 (table, as 17763.379/.437: 0x520, 0x11C0, 0x1B0, 0x1010)",
        );
    }
    if era == Era::V1903 && x64 {
        n.push(
            "1903 x64: 18362.720 and later have a 0x1220-byte _ETW_SILODRIVERSTATE with \
             EtwpLoggerContext at 0x1C8 and ProcessorBlocks at 0x1028 (table, as 18362.30-.657: \
             0x11F8, 0x1B0, 0x1010)",
        );
    }
    if era == Era::V2004 {
        n.push(
            "2004: the table serves 19041-19045 (one kernel line). On x64, 19041.1466 and later \
             have a 0x530-byte _WMI_LOGGER_CONTEXT (table: 0x550); the members listed \
             here are unchanged there, the last members may not be",
        );
        n.push(
            "2004: in builds from 19569 on (Insider), GetCpuClock is an integer, not a function \
             pointer (etw-internals.md §3.1)",
        );
    }
    if era >= Era::B20348 {
        n.push(
            "20348/22000: only the members crash-dump-format.md §2.3 lists are built in \
             (WMI_LOGGER_CONTEXT: LoggerId, BufferSize, LoggerMode, BufferQueue, GlobalList, \
             CurrentBuffer, LoggerName, LogFileName, InstanceGuid; ETW_SILODRIVERSTATE: \
             MaxLoggers, EtwpLoggerContext, ProcessorBlocks; KPRCB: EtwSupport)",
        );
    }
    if era == Era::B20348 {
        n.push(
            "20348: _WMI_LOGGER_CONTEXT is 0x570 bytes in early builds and 0x550 later (table: \
             0x570)",
        );
    }
    if era == Era::B22000 {
        n.push(
            "22000: _WMI_LOGGER_CONTEXT is 0x560 bytes in early builds and 0x540 later (table: \
             0x560)",
        );
    }
    n.into_iter().map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::layout::LayoutSource;
    use std::collections::HashSet;
    use TableFamily::{X64, X86};

    /// Representative builds of every era (and the boundaries).
    pub(super) const BUILDS: &[u32] = &[
        2195, 2600, 3790, 6000, 6001, 6002, 7600, 7601, 9200, 9600, 10240, 10586, 14393, 15063,
        16299, 17134, 17763, 18362, 18363, 19041, 19045, 20348, 22000,
    ];

    pub(super) fn get<'a>(l: &'a BuiltinLayouts, name: &str) -> Option<&'a StructLayout> {
        l.types.iter().find(|t| t.name == name)
    }

    pub(super) fn off(l: &BuiltinLayouts, ty: &str, field: &str) -> Option<u64> {
        get(l, ty)?.field(field).map(|f| f.offset)
    }

    /// The size of a field's type as far as the tables know it (unknown structures count
    /// as one byte).
    fn approx_size(ty: &TypeRef, family: TableFamily) -> u64 {
        let p = family.pick(4, 8);
        match ty {
            TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => *size,
            TypeRef::Pointer { .. } => p,
            TypeRef::Array { element, count } => approx_size(element, family) * count,
            TypeRef::Bitfield { base, .. } => approx_size(base, family),
            TypeRef::Union { name } | TypeRef::Struct { name } => match name.raw() {
                "_LARGE_INTEGER" => 8,
                "_UNICODE_STRING" | "_LIST_ENTRY" | "_ETW_BUFFER_QUEUE" => 2 * p,
                "_SLIST_HEADER" => family.pick(8, 16),
                "_SINGLE_LIST_ENTRY" | "_EX_FAST_REF" => p,
                "_GUID" | "_ETW_REF_CLOCK" | "_LIST_ENTRY64" => 16,
                "_WMI_BUFFER_HEADER" => 0x48,
                "_WNODE_HEADER" => 0x30,
                "_DBGKD_DEBUG_DATA_HEADER64" => 0x18,
                "_WMI_CLIENT_CONTEXT" | "_ETW_BUFFER_CONTEXT" | "_WMI_BUFFER_STATE" => 4,
                _ => 1,
            },
            TypeRef::Function | TypeRef::Void => 1,
        }
    }

    #[test]
    fn boundary_builds_pick_the_right_era() {
        let era = |b: u32, f: TableFamily| layouts(b, f).map(|l| l.era);
        assert_eq!(era(2194, X86), None);
        assert_eq!(era(2195, X86), Some("5.0"));
        assert_eq!(era(2599, X86), Some("5.0"));
        assert_eq!(era(2600, X86), Some("5.1"));
        assert_eq!(era(2600, X64), None);
        assert_eq!(era(3790, X86), Some("5.2"));
        assert_eq!(era(3790, X64), Some("5.2"));
        assert_eq!(era(6000, X64), Some("early 6.0"));
        assert_eq!(era(6001, X64), Some("late 6.0"));
        assert_eq!(era(6002, X86), Some("late 6.0"));
        assert_eq!(era(7599, X64), Some("late 6.0"));
        assert_eq!(era(7600, X64), Some("6.1"));
        assert_eq!(era(7601, X86), Some("6.1"));
        assert_eq!(era(9200, X64), Some("6.2"));
        assert_eq!(era(9600, X64), Some("6.3"));
        assert_eq!(era(10239, X64), Some("6.3"));
        assert_eq!(era(10240, X64), Some("1507"));
        assert_eq!(era(10586, X64), Some("1511"));
        assert_eq!(era(14392, X64), Some("1511"));
        assert_eq!(era(14393, X64), Some("1607"));
        assert_eq!(era(15063, X64), Some("1703"));
        assert_eq!(era(16298, X64), Some("1703"));
        assert_eq!(era(16299, X64), Some("1709"));
        assert_eq!(era(17134, X64), Some("1803"));
        assert_eq!(era(17763, X64), Some("1809"));
        assert_eq!(era(18361, X64), Some("1809"));
        assert_eq!(era(18362, X64), Some("1903"));
        assert_eq!(era(18363, X64), Some("1903"));
        assert_eq!(era(19040, X64), Some("1903"));
        assert_eq!(era(19041, X64), Some("2004"));
        assert_eq!(era(19045, X64), Some("2004"));
        assert_eq!(era(19045, X86), Some("2004"));
        assert_eq!(era(20347, X64), Some("2004"));
        assert_eq!(era(20348, X64), Some("20348"));
        assert_eq!(era(20348, X86), None);
        assert_eq!(era(21999, X64), Some("20348"));
        assert_eq!(era(22000, X64), Some("22000"));
        assert_eq!(era(22000, X86), None);
        assert_eq!(era(22001, X64), None);
        assert_eq!(era(22621, X64), None);
        assert_eq!(era(0, X64), None);
    }

    #[test]
    fn every_layout_is_sorted_unique_builtin_and_inside_its_size() {
        for &b in BUILDS {
            for family in [X86, X64] {
                let Some(l) = layouts(b, family) else {
                    continue;
                };
                assert!(!l.notes.is_empty());
                for t in &l.types {
                    let ctx = format!("{} {} {family:?} {}", b, l.era, t.name);
                    assert_eq!(t.source, LayoutSource::Builtin, "{ctx}");
                    assert!(t.size > 0, "{ctx}");
                    // _KPRCB is size-only before 6.0 (no EtwSupport yet)
                    assert!(!t.fields.is_empty() || t.name == "_KPRCB", "{ctx}");
                    let mut names = HashSet::new();
                    for f in &t.fields {
                        assert!(names.insert(f.name.raw()), "{ctx}: duplicate {}", f.name);
                        let end = f.offset + approx_size(&f.ty, family);
                        assert!(end <= t.size, "{ctx}: {} ends at {end:#x}", f.name);
                    }
                    for w in t.fields.windows(2) {
                        assert!(
                            (w[0].offset, &w[0].name) <= (w[1].offset, &w[1].name),
                            "{ctx}: not sorted at {}",
                            w[1].name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn expected_structures_per_era() {
        for &b in BUILDS {
            for family in [X86, X64] {
                let Some(l) = layouts(b, family) else {
                    continue;
                };
                for name in [
                    "_WMI_LOGGER_CONTEXT",
                    "_WMI_BUFFER_HEADER",
                    "_KDDEBUGGER_DATA64",
                ] {
                    assert!(get(&l, name).is_some(), "{b} {name}");
                }
                assert_eq!(get(&l, "_ETW_SILODRIVERSTATE").is_some(), b >= 10586, "{b}");
            }
        }
        // KPRCB: from 6.0 on (EtwSupport); sizes only before.
        let l = layouts(19041, X64).unwrap();
        assert_eq!(off(&l, "_KPRCB", "EtwSupport"), Some(0x8328));
        assert!(get(&layouts(3790, X86).unwrap(), "_KPRCB").is_none());
    }

    #[test]
    fn the_x64_logger_context_fields_of_crash_dump_format_2_3() {
        // build, LoggerId, BufferSize, LoggerMode, BufferQueue, GlobalList, CurrentBuffer,
        // LoggerName, LogFileName, InstanceGuid (BufferQueue absent in 7601).
        #[rustfmt::skip]
        let table: &[(u32, [Option<u64>; 9])] = &[
            (7601, [Some(0), Some(4), Some(0x10), None, Some(0x60), Some(0x70), Some(0x78), Some(0x88), Some(0x10C)]),
            (9600, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x70), Some(0x90), Some(0x98), Some(0xA8), Some(0x124)]),
            (14393, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x60), Some(0x80), Some(0x88), Some(0x98), Some(0x114)]),
            (17763, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x60), Some(0x90), Some(0x98), Some(0xA8), Some(0x124)]),
            (18362, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x60), Some(0x90), Some(0x98), Some(0xA8), Some(0x124)]),
            (19041, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x60), Some(0x90), Some(0x98), Some(0xA8), Some(0x124)]),
            (20348, [Some(0), Some(4), Some(0xC), Some(0x40), Some(0x60), Some(0x90), Some(0x98), Some(0xA8), Some(0x124)]),
            (22000, [Some(0), Some(4), Some(0xC), Some(0x30), Some(0x50), Some(0x80), Some(0x88), Some(0x98), Some(0x114)]),
        ];
        let names = [
            "LoggerId",
            "BufferSize",
            "LoggerMode",
            "BufferQueue",
            "GlobalList",
            "CurrentBuffer",
            "LoggerName",
            "LogFileName",
            "InstanceGuid",
        ];
        for (build, want) in table {
            let l = layouts(*build, X64).unwrap();
            for (name, want) in names.iter().zip(want) {
                assert_eq!(
                    off(&l, "_WMI_LOGGER_CONTEXT", name),
                    *want,
                    "{build} {name}"
                );
            }
        }
    }
}
