//! Errors of the dump-file layer. Every variant names the field or extent that is wrong.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DumpError {
    #[error("cannot read the dump file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the file is empty (0 bytes): not a crash dump")]
    Empty,
    #[error("not a Windows kernel crash dump: the file is only {len} bytes long")]
    TooShort { len: u64 },
    #[error("this is a user-mode minidump (signature MDMP), not a kernel crash dump")]
    UserModeMinidump,
    #[error(
        "not a Windows kernel crash dump: signature at offset 0 is \"{found}\" (expected \"PAGE\")"
    )]
    BadSignature { found: String },
    #[error("not a Windows kernel crash dump: ValidDump at offset 4 is \"{found}\" (expected \"DUMP\" or \"DU64\")")]
    BadValidDump { found: String },
    #[error(
        "truncated header: the {which} header needs {need:#x} bytes but the file has {have:#x}"
    )]
    TruncatedHeader {
        which: &'static str,
        need: u64,
        have: u64,
    },
    #[error("unsupported architecture: MachineImageType {machine:#x} in a {which} header")]
    UnsupportedArch { machine: u32, which: &'static str },
    #[error("DumpType {value} ({name}) is not supported yet")]
    UnsupportedDumpType { value: u32, name: &'static str },
    #[error("unknown DumpType {value:#x} at header offset {offset:#x}")]
    UnknownDumpType { value: u32, offset: u64 },
    #[error("corrupt physical memory run list: {0}")]
    BadRunList(String),
    #[error("corrupt bitmap header at file offset {offset:#x}: {reason}")]
    BadBitmap { offset: u64, reason: String },
    #[error("corrupt triage dump: {field}: {reason}")]
    BadTriage { field: &'static str, reason: String },
    #[error("corrupt {format} image: {reason}")]
    BadImage {
        format: &'static str,
        reason: ImageError,
    },
    #[error("corrupt hibernation file: {reason}")]
    BadHiberfil { reason: String },
    #[error("{0}")]
    Missing(String),
    #[error("{format} image: {reason}")]
    NoWindows {
        format: &'static str,
        reason: String,
    },
    #[error("not a Windows kernel crash dump (signature at offset 0 is \"{signature}\", expected \"PAGE\"), nor, read as a raw physical memory image, Windows memory: {reason}")]
    NotMemory { signature: String, reason: String },
    #[error("truncated dump: {what} ends at file offset {end:#x} but the file has only {file_len:#x} bytes (use --allow-truncated to read what is there)")]
    Truncated {
        what: String,
        end: u64,
        file_len: u64,
    },
}

/// Why a memory image's layout cannot be used; each names the field that is wrong.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ImageError {
    // ---- the physical ranges of any image ----
    #[error("{count} ranges (at most {max})")]
    TooManyRanges { count: usize, max: usize },
    #[error("range at physical {start:#x} ({size:#x} bytes) is not page aligned")]
    Unaligned { start: u64, size: u64 },
    #[error("range at physical {start:#x} ({size:#x} bytes) ends beyond 2^52")]
    BeyondPhysical { start: u64, size: u64 },
    #[error("ranges at physical {first:#x} and {second:#x} overlap")]
    Overlap { first: u64, second: u64 },
    // ---- ELF core ----
    #[error("only {len} bytes long: too short for an ELF header")]
    ElfTooShort { len: usize },
    #[error("e_ident[EI_DATA]: not little endian")]
    ElfNotLittleEndian,
    #[error("e_ident[EI_CLASS] {0}: neither ELF32 nor ELF64")]
    ElfClass(u8),
    #[error("ELF header: {len} bytes, needs {need}")]
    ElfHeaderShort { len: usize, need: usize },
    #[error("e_type {0}: not a core file (ET_CORE = 4)")]
    ElfNotCore(u16),
    #[error("e_phnum 0: no program headers")]
    ElfNoProgramHeaders,
    #[error("e_phentsize {size} < {min}")]
    ElfEntrySize { size: usize, min: usize },
    #[error("program headers at {phoff:#x} ({phnum} × {phentsize} bytes) run past the file end {len:#x}")]
    ElfHeadersPastEnd {
        phoff: u64,
        phnum: usize,
        phentsize: usize,
        len: usize,
    },
    #[error("PT_LOAD {index}: p_paddr {paddr:#x} is past the physical address space")]
    ElfPaddr { index: usize, paddr: u64 },
    #[error("no PT_LOAD segment with file bytes: an ELF core without physical memory")]
    ElfNoMemory,
    #[error("{0} PT_LOAD segments all at p_paddr 0: the core has no physical addresses")]
    ElfNoAddresses(usize),
    #[error("PT_LOAD: {0}")]
    ElfRanges(Box<ImageError>),
    // ---- VMware state ----
    #[error("not a VMware state file (magic)")]
    VmwareMagic,
    #[error("header: group count")]
    VmwareGroupCount,
    #[error("header: {0} groups (at most 4096)")]
    VmwareTooManyGroups(usize),
    #[error("group {group} at {at:#x}: past the file end")]
    VmwareGroupPastEnd { group: usize, at: usize },
    #[error("no \"memory\" group")]
    VmwareNoMemoryGroup,
    #[error("tag at {0:#x}: past the file end")]
    VmwareTagPastEnd(usize),
    #[error("tag name length past the file end")]
    VmwareTagNameLength,
    #[error("tag name at {0:#x}: past the file end")]
    VmwareTagNamePastEnd(usize),
    #[error("tag {tag}: {what} past the file end")]
    VmwareTagValue {
        tag: crate::text::Untrusted,
        what: &'static str,
    },
    #[error("tag {tag}: {size:#x} data bytes at {at:#x} run past the file end {len:#x}")]
    VmwareTagData {
        tag: crate::text::Untrusted,
        size: u64,
        at: u64,
        len: usize,
    },
    #[error("more than {0} tags in the memory group")]
    VmwareTooManyTags(usize),
    #[error("regionsCount {count} (at most {max})")]
    VmwareRegionCount { count: u64, max: usize },
    #[error("region {0}: regionPPN, regionPageNum or regionSize missing")]
    VmwareRegionIncomplete(u32),
    #[error("{0} overflows")]
    VmwareOverflow(&'static str),
    /// The error of the state file at a path (`.vmem` opened by its memory file's name).
    #[error("{path}: {error}")]
    VmwareAt {
        path: String,
        error: Box<ImageError>,
    },
    // ---- RDMP (DumpType 8, 9, 0xA) ----
    #[error("RDMP header at 0x2000: past the file end")]
    RdmpHeaderPastEnd,
    #[error("Marker {0:#x} (expected 0x40)")]
    RdmpMarker(u32),
    #[error("signature is not RDMP/DUMP")]
    RdmpSignature,
    #[error("MetadataSize {meta:#x} and FirstPageOffset {first:#x} disagree (MetadataSize − 0x20 ≠ FirstPageOffset − 0x2040)")]
    RdmpSizes { meta: u64, first: u64 },
    #[error("range {index}: {field} {value:#x} overflows")]
    RdmpOverflow {
        index: usize,
        field: &'static str,
        value: u64,
    },
}

/// Why a layout file (`--layout`, a host framework's hand-off) cannot be used.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("{len} bytes (at most {max})")]
    TooLarge { len: usize, max: u64 },
    /// The JSON parser's message, which can quote the file's bytes.
    #[error("not a layout: {0}")]
    NotJson(crate::text::Untrusted),
    #[error("etwdump_layout {found} (this build reads version {supported})")]
    Version { found: u64, supported: u64 },
    #[error("ranges: {count} (at most {max})")]
    TooManyRanges { count: usize, max: usize },
    #[error("arch: \"{0}\" (x64, x86-pae or x86)")]
    Arch(crate::text::Untrusted),
    #[error("dtb: {dtb:#x} is not a {align:#x}-aligned physical address")]
    Dtb { dtb: u64, align: u64 },
    #[error("arch and dtb: give both or neither")]
    Machine,
    #[error("{0}")]
    Io(String),
}
