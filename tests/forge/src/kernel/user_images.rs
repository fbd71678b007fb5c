//! User memory of the forged processes ([`crate::Config::with_user_images`], x64 fixtures with
//! the processes): each process but System gets its own address space (a PML4 built by
//! `dump/user_space.rs`, the one the realtime consumers' buffers use too) holding its PEB, its
//! loader data and the images of ntdll.dll, the exe, KERNEL32.DLL and KERNELBASE.dll, so that a
//! reader can check every process's `ntdll!EtwEventWrite` family against the image's shared
//! physical page. System (PID 4) keeps `EPROCESS.Peb` = 0 and its made-up DirectoryTableBase.
//!
//! ## Layouts (x64) and where they come from
//!
//! * `_EPROCESS.Peb`, `_KPROCESS.DirectoryTableBase`: the fixture's types.h.
//! * `_PEB` (not in the project's reference): `ImageBaseAddress` +0x10, `Ldr` +0x18. Microsoft
//!   Learn, "PEB structure (winternl.h)", Remarks, the 64-bit syntax: `BYTE Reserved1[2]; BYTE
//!   BeingDebugged; BYTE Reserved2[21]; PPEB_LDR_DATA LoaderData;` puts the loader data at
//!   2 + 1 + 21 = 0x18; the generic syntax's `PVOID Reserved3[2]` just before `Ldr` lie at
//!   +0x08 and +0x10 on x64, named `Mutant` (0x008) and `ImageBaseAddress` (0x010) by the PEB
//!   field table of wario.hezongjian.com's "Process Environment Block (PEB)" page (which
//!   mislabels 0x018 as ProcessParameters: Microsoft's 64-bit syntax is followed for `Ldr`).
//! * `_PEB_LDR_DATA`: phnt `ntpsapi.h` (NtDoc "PEB_LDR_DATA"): `ULONG Length` +0, `BOOLEAN
//!   Initialized` +4, `HANDLE SsHandle` +8, `InLoadOrderModuleList` +0x10,
//!   `InMemoryOrderModuleList` +0x20, `InInitializationOrderModuleList` +0x30, `EntryInProgress`
//!   +0x40, `ShutdownInProgress` +0x48, `ShutdownThreadId` +0x50: 0x58 bytes (the same fields in
//!   Zig's `std.os.windows.PEB_LDR_DATA`, which cites Geoff Chappell's PEB_LDR_DATA page).
//! * `_LDR_DATA_TABLE_ENTRY` (user mode): WinDbg's `dt ntdll!_LDR_DATA_TABLE_ENTRY` on 64-bit
//!   Windows 10 (as quoted on anhyoungbin.tistory.com, "_LDR_DATA_TABLE_ENTRY"):
//!   `InLoadOrderLinks` +0, `InMemoryOrderLinks` +0x10, `InInitializationOrderLinks` +0x20,
//!   `DllBase` +0x30, `EntryPoint` +0x38, `SizeOfImage` +0x40 (ULONG), `FullDllName` +0x48,
//!   `BaseDllName` +0x58 (UNICODE_STRING: Length, MaximumLength, 4 bytes padding, Buffer);
//!   Microsoft Learn's winternl.h `LDR_DATA_TABLE_ENTRY` agrees (`InMemoryOrderLinks` after
//!   two pointers, `DllBase` after two more, `FullDllName` after three).
//! * PE32+ headers and the export directory: the PE/COFF specification (IMAGE_DOS_HEADER
//!   `e_lfanew` +0x3C; "PE\0\0"; IMAGE_FILE_HEADER; IMAGE_OPTIONAL_HEADER64 Magic 0x20B,
//!   AddressOfEntryPoint +0x10, ImageBase +0x18, SizeOfImage +0x38, DataDirectory +0x70;
//!   IMAGE_EXPORT_DIRECTORY: Name +0x0C, Base +0x10, NumberOfFunctions +0x14, NumberOfNames
//!   +0x18, AddressOfFunctions +0x1C, AddressOfNames +0x20, AddressOfNameOrdinals +0x24; an
//!   export RVA inside the export directory's range is a forwarder string).
//!
//! ## What each process holds (PIDs and names of `STANDARD_PROCESSES` but System)
//!
//! * PEB at [`peb_va`]`(pid)` (one private page): `Mutant` = -1, `ImageBaseAddress` = the exe's
//!   base, `Ldr` = the PEB_LDR_DATA below; the rest zero. `EPROCESS.Peb` = that VA.
//! * Loader heap page at [`USER_LOADER_HEAP`] (the same VA in every process, a private page
//!   each): PEB_LDR_DATA at +0x40 (Length 0x58, Initialized 1, three list heads), the
//!   LDR_DATA_TABLE_ENTRYs from +0x100 every [`LDR_ENTRY_STRIDE`] bytes (the made-up spacing of
//!   a heap; only the documented fields written), their names (UTF-16LE, NUL-terminated,
//!   MaximumLength = Length + 2) from +0x600.
//! * Lists (Flink/Blink both ways, heads in PEB_LDR_DATA): InLoadOrder and InMemoryOrder: the
//!   exe, ntdll.dll, KERNEL32.DLL, KERNELBASE.dll; InInitializationOrder: ntdll.dll,
//!   KERNELBASE.dll, KERNEL32.DLL (the exe is on no initialization list: its links are zero).
//!   smss.exe is a native process: the exe and ntdll.dll only (as on Windows).
//! * Images, each page mapped at the same physical address in every process that maps it (an
//!   image section is shared): ntdll.dll at [`NTDLL_BASE`] (every page: headers, three .text
//!   pages, two .rdata pages, one .data page; [`NTDLL_SIZE_OF_IMAGE`]); KERNEL32.DLL,
//!   KERNELBASE.dll and the exe: their header page only (MZ, PE32+, SizeOfImage = the loader
//!   entry's, no export directory), the rest of their range unmapped. ntdll's LDR entry has
//!   EntryPoint 0 (as on Windows), the others base + AddressOfEntryPoint.
//! * Leaf PTEs: PEB and heap user read/write, NX; image headers, .rdata and .data user
//!   read-only, NX; .text user read-only executable (P|US|A).
//!
//! ## ntdll.dll (synthetic, well-formed PE32+)
//!
//! 90 functions of real ntdll names and one data export (`NlsMbCodePageTag`, in .data), two
//! exports by ordinal only, ordinal base 8 (the nameless ones first, so
//! `AddressOfNameOrdinals[i]` = i + 2), names sorted by their bytes, and one forwarder:
//! `RtlRestoreLastWin32Error` -> `"NTDLL.RtlSetLastWin32Error"` (made up; an RVA inside the
//! export directory). The export directory starts at RVA 0x4C80 and crosses into the next
//! page. Code: .text page 1 (RVA 0x1000) holds EtwEventWrite, EtwEventWriteFull,
//! EtwEventWriteEx and EtwEventWriteTransfer among other Etw functions, page 2 (0x2000)
//! EtwEventWriteString, EtwEventWriteNoRegistration, EtwWriteUMSecurityEvent, Ldr / Rtl / Tp
//! / Ki / CRT functions, page 3 (0x3000) the Nt system-call stubs (NtTraceEvent among them).
//! Entry bytes: EtwEventWrite begins `4C 8B DC 48 83 EC 58` (mov r11,rsp; sub rsp,58h: the
//! prologue the brief gives as Windows 10's), its rest and the other functions' bodies are
//! made up but plausible x64 prologues; every Nt stub is Windows 10's x64 stub shape `4C 8B D1
//! B8 nn nn 00 00 F6 04 25 08 03 FE 7F 01 75 03 0F 05 C3 CD 2E C3` (mov r10,rcx; mov eax,n;
//! test KUSER_SHARED_DATA.SystemCall,1; jne; syscall; ret; int 2Eh; ret) with made-up but
//! plausible numbers (NtTraceEvent 0x5E); int3 (CC) between functions.
//!
//! ## Tampered variants ([`TamperKind::WritePatch`], check `etw-write-patch`)
//!
//! A private copy is a new frame mapped (with the code leaf) only in that process's PML4 after
//! every other page of the dump, holding the shared page's bytes but for the patch, so that the
//! tampered dump reads like its clean twin but there: the process's PTE for that page and the
//! patched bytes.
//!
//! | variant | what is written | findings |
//! |---|---|---|
//! | `Ret` | explorer.exe (0x12E4): private copy of EtwEventWrite's page, `C3` at EtwEventWrite | one: address EtwEventWrite's VA |
//! | `XorEaxRet` | svchost.exe (0x44C): private copy, `33 C0 C3` at EtwEventWriteEx | one: EtwEventWriteEx |
//! | `Ret14` | explorer.exe: private copy, `C2 14 00` at EtwEventWriteTransfer | one: EtwEventWriteTransfer |
//! | `XorRaxRet` | smss.exe (0x184): private copy of the stub page, `48 33 C0 C3` at NtTraceEvent | one: NtTraceEvent |
//! | `MovEaxRet` | svchost.exe: private copy, `B8 00 00 00 00 C3` at EtwEventWriteString | one: EtwEventWriteString |
//! | `BenignCopy` | svchost.exe: private copy of page 2 with identical bytes | none |
//! | `SharedPage` | the shared page itself: `C3` at EtwEventWriteFull, seen by every process | exactly one: EtwEventWriteFull's VA |
//! | `Unreadable` | smss.exe: page 1 (EtwEventWrite ...) mapped by a valid PTE to a frame not in the dump | none (the reader reports it as not in the dump) |
//!
//! Each finding's `detail` names the PID and process (or "the shared page"), the function and
//! the bytes; `changed` = the patched bytes (user VAs). Clean dumps with user images have no
//! finding. `C3` on x64 and `C2 14 00` (x86's `ret 14h` for EtwEventWrite's five stack
//! arguments) are Adam Chester's EtwEventWrite patches (xpn, "Hiding your .NET – ETW", March
//! 2020, as cited by paragmali.com's "ETW: How Windows 2000's Performance Hack Became the EDR
//! Substrate"); the other three are the usual "return 0" variants of that patch.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::dump::paging::{Leaf, VirtMap};
use crate::dump::phys::PhysMem;
use crate::dump::user_space::{self, LateRemap, SpaceSpec, UserPage, UserSpace};
use crate::etw::tamper::{CheckId, ExpectedFinding, TamperKind, WritePatch};
use crate::kernel::processes::ExpectedProcess;
use crate::kernel::types_h::TypesH;
use crate::util::{put_u16, put_u32, put_u64, utf16le, PAGE_SIZE};

// ------------------------------------------------------------------------------------------
// Offsets (x64; sources in the module documentation)

/// `_PEB.ImageBaseAddress`.
pub const PEB_IMAGE_BASE_ADDRESS: u64 = 0x10;
/// `_PEB.Ldr`.
pub const PEB_LDR: u64 = 0x18;
/// `_PEB.Mutant`.
const PEB_MUTANT: u64 = 0x08;
/// `_PEB_LDR_DATA`: Length, Initialized, the three list heads, its size.
pub const LDR_DATA_LENGTH: u64 = 0x00;
pub const LDR_DATA_INITIALIZED: u64 = 0x04;
pub const LDR_DATA_IN_LOAD_ORDER: u64 = 0x10;
pub const LDR_DATA_IN_MEMORY_ORDER: u64 = 0x20;
pub const LDR_DATA_IN_INIT_ORDER: u64 = 0x30;
pub const PEB_LDR_DATA_SIZE: u32 = 0x58;
/// `_LDR_DATA_TABLE_ENTRY` (user mode).
pub const LDTE_IN_LOAD_ORDER_LINKS: u64 = 0x00;
pub const LDTE_IN_MEMORY_ORDER_LINKS: u64 = 0x10;
pub const LDTE_IN_INIT_ORDER_LINKS: u64 = 0x20;
pub const LDTE_DLL_BASE: u64 = 0x30;
pub const LDTE_ENTRY_POINT: u64 = 0x38;
pub const LDTE_SIZE_OF_IMAGE: u64 = 0x40;
pub const LDTE_FULL_DLL_NAME: u64 = 0x48;
pub const LDTE_BASE_DLL_NAME: u64 = 0x58;

// ------------------------------------------------------------------------------------------
// Layout choices

/// ntdll.dll's base in every process (the same VA everywhere, as on Windows).
pub const NTDLL_BASE: u64 = 0x7FFB_2D10_0000;
/// ntdll.dll's SizeOfImage (every page of it is mapped).
pub const NTDLL_SIZE_OF_IMAGE: u32 = 0x7000;
/// The loader heap page (PEB_LDR_DATA, the LDR entries, their names) in every process.
pub const USER_LOADER_HEAP: u64 = 0x0000_0000_0062_0000;
/// PEB_LDR_DATA's offset in the loader heap page.
const LDR_DATA_OFFSET: u64 = 0x40;
/// First LDR_DATA_TABLE_ENTRY in the heap page and the distance between them.
const LDR_ENTRY_FIRST: u64 = 0x100;
pub const LDR_ENTRY_STRIDE: u64 = 0x140;
const LDR_STRINGS: u64 = 0x600;
/// The export directory's RVA (it crosses into the next page).
const EXPORT_DIR_RVA: u32 = 0x4C80;
/// Ordinal base of ntdll's export directory.
pub const NTDLL_ORDINAL_BASE: u32 = 8;
/// Bytes of each function's entry recorded in the expectations.
pub const ENTRY_BYTES: usize = 16;

/// The functions a reader checks ([`ExpectedNtdll::etw_functions`], in this order).
pub const ETW_WRITE_FUNCTIONS: [&str; 8] = [
    "EtwEventWrite",
    "EtwEventWriteEx",
    "EtwEventWriteFull",
    "EtwEventWriteTransfer",
    "EtwEventWriteString",
    "EtwEventWriteNoRegistration",
    "EtwWriteUMSecurityEvent",
    "NtTraceEvent",
];

/// Whether process `pid` gets user memory (every standard process but System).
pub fn has_user_memory(pid: u64) -> bool {
    pid != 4
}

/// The PEB of process `pid` (a made-up page-aligned VA per process).
pub fn peb_va(pid: u64) -> u64 {
    0x0000_00B8_7A3C_0000 + pid * 0x1000
}

/// Whether `cfg`'s fixture can carry user images: x64, the processes' layouts,
/// `_EPROCESS.Peb` and `_KPROCESS.DirectoryTableBase` (every x64 fixture).
pub fn user_images_supported(cfg: &Config) -> bool {
    let Some(fx) = &cfg.fixture else {
        return false;
    };
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    crate::etw::variation::processes_supported(cfg, &t)
        && t.has_field("_EPROCESS", "Peb")
        && t.has_field("_KPROCESS", "DirectoryTableBase")
}

// ------------------------------------------------------------------------------------------
// Expectations

/// What a reader must find in the processes' user memory ([`crate::Forged::ntdll`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedNtdll {
    /// ntdll.dll's base (= DllBase in every process) and SizeOfImage.
    pub base: u64,
    pub size_of_image: u32,
    /// DataDirectory[0]: the export directory's VA and size.
    pub export_directory: (u64, u32),
    /// The export directory's ordinal base.
    pub ordinal_base: u32,
    /// Every named export in AddressOfNames order (ascending bytes) with its VA (a forwarder:
    /// the VA of its forwarder string, inside the export directory).
    pub exports: Vec<(String, u64)>,
    /// The forwarded exports: (name, forwarder string).
    pub forwarders: Vec<(String, String)>,
    /// The eight functions of [`ETW_WRITE_FUNCTIONS`].
    pub etw_functions: Vec<ExpectedEtwFunction>,
    /// ntdll's pages as the image section maps them: (VA, PA), every page of the image; every
    /// process maps these physical pages but where its
    /// [`ExpectedUserProcess::ntdll_pages`] says otherwise.
    pub shared_pages: Vec<(u64, u64)>,
    /// The processes with user memory (ascending PID).
    pub processes: Vec<ExpectedUserProcess>,
    /// The `etw-write-patch` tamperings applied.
    pub patches: Vec<ExpectedWritePatch>,
}

/// One of the eight functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedEtwFunction {
    pub name: String,
    pub va: u64,
    /// The VA of its code page.
    pub page_va: u64,
    /// Its first [`ENTRY_BYTES`] bytes in the clean image.
    pub entry: Vec<u8>,
}

/// One process's user memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedUserProcess {
    pub pid: u64,
    pub name: String,
    pub eprocess: u64,
    /// Its PML4 = `KPROCESS.DirectoryTableBase`.
    pub dtb: u64,
    /// `EPROCESS.Peb`, `PEB.Ldr`, `PEB.ImageBaseAddress`.
    pub peb: u64,
    pub ldr: u64,
    pub image_base: u64,
    /// In InLoadOrder (= InMemoryOrder).
    pub modules: Vec<ExpectedUserModule>,
    /// BaseDllNames in InInitializationOrder.
    pub init_order: Vec<String>,
    /// Each ntdll page in this process: (VA, PA, state).
    pub ntdll_pages: Vec<(u64, u64, NtdllPage)>,
    /// Each function of [`ETW_WRITE_FUNCTIONS`]: its first [`ENTRY_BYTES`] bytes as this
    /// process reads them (None: not in the dump).
    pub etw_entries: Vec<(String, Option<Vec<u8>>)>,
}

/// One loader entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedUserModule {
    pub base_name: String,
    pub full_name: String,
    pub base: u64,
    pub size_of_image: u32,
    pub entry_point: u64,
    /// The LDR_DATA_TABLE_ENTRY's VA.
    pub ldr_entry: u64,
}

/// How a process maps one ntdll page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NtdllPage {
    /// The image section's page (the same PA in every process).
    Shared,
    /// A private copy (another PA; patched or identical).
    PrivateCopy,
    /// A valid PTE to a frame not in the dump.
    NotInDump,
}

/// One `etw-write-patch` tampering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedWritePatch {
    pub variant: WritePatch,
    /// The process (None: the shared page, every process).
    pub pid: Option<u64>,
    /// The function patched, or whose page is copied / not in the dump.
    pub function: String,
    /// The function's VA.
    pub va: u64,
    /// The bytes written at `va` (empty: none).
    pub bytes: Vec<u8>,
    /// The page's PA in that process (the private copy, the unstored frame or the shared page).
    pub page_pa: u64,
}

// ------------------------------------------------------------------------------------------
// The images

/// A module's identity.
struct ModuleDef {
    base_name: String,
    full_name: String,
    base: u64,
    size: u32,
    entry_rva: u32,
    dll: bool,
    subsystem: u16,
}

fn kernel32() -> ModuleDef {
    ModuleDef {
        base_name: "KERNEL32.DLL".into(),
        full_name: r"C:\Windows\System32\KERNEL32.DLL".into(),
        base: 0x7FFB_2C3E_0000,
        size: 0xBD000,
        entry_rva: 0x1_7A10,
        dll: true,
        subsystem: 3,
    }
}

fn kernelbase() -> ModuleDef {
    ModuleDef {
        base_name: "KERNELBASE.dll".into(),
        full_name: r"C:\Windows\System32\KERNELBASE.dll".into(),
        base: 0x7FFB_2A8F_0000,
        size: 0x2A_1000,
        entry_rva: 0x3_A1C0,
        dll: true,
        subsystem: 3,
    }
}

fn ntdll_def() -> ModuleDef {
    ModuleDef {
        base_name: "ntdll.dll".into(),
        full_name: r"C:\Windows\SYSTEM32\ntdll.dll".into(),
        base: NTDLL_BASE,
        size: NTDLL_SIZE_OF_IMAGE,
        entry_rva: 0,
        dll: true,
        subsystem: 3,
    }
}

/// The exe of process `name` (the standard ones with their Windows paths).
fn exe(pid: u64, name: &str) -> ModuleDef {
    let (base_name, full_name, base, size, entry_rva, subsystem) = match name {
        "smss.exe" => (
            "smss.exe",
            r"\SystemRoot\System32\smss.exe".to_string(),
            0x7FF7_1C4A_0000,
            0x2_5000,
            0x1_3A20,
            1,
        ),
        "svchost.exe" => (
            "svchost.exe",
            r"C:\Windows\system32\svchost.exe".to_string(),
            0x7FF6_8E2B_0000,
            0x1_2000,
            0x4F20,
            2,
        ),
        "explorer.exe" => (
            "Explorer.EXE",
            r"C:\Windows\Explorer.EXE".to_string(),
            0x7FF7_8A5D_0000,
            0x3E_8000,
            0x9_4C10,
            2,
        ),
        other => (
            other,
            format!(r"C:\Windows\System32\{other}"),
            0x7FF7_0000_0000 + pid * 0x10_0000,
            0x2_0000,
            0x1010,
            2,
        ),
    };
    ModuleDef {
        base_name: base_name.to_string(),
        full_name,
        base,
        size,
        entry_rva,
        dll: false,
        subsystem,
    }
}

/// The modules of process `name` in load order.
fn modules_of(pid: u64, name: &str) -> Vec<ModuleDef> {
    let mut v = vec![exe(pid, name), ntdll_def()];
    if name != "smss.exe" {
        v.push(kernel32());
        v.push(kernelbase());
    }
    v
}

/// A PE32+ section: name, RVA, VirtualSize, Characteristics.
type SectionDef = (&'static str, u32, u32, u32);

const SCN_CODE: u32 = 0x6000_0020; // CNT_CODE | MEM_EXECUTE | MEM_READ
const SCN_RDATA: u32 = 0x4000_0040; // CNT_INITIALIZED_DATA | MEM_READ
const SCN_DATA: u32 = 0xC000_0040; // CNT_INITIALIZED_DATA | MEM_READ | MEM_WRITE

/// A header page: IMAGE_DOS_HEADER (e_lfanew 0xE8), "PE\0\0", IMAGE_FILE_HEADER,
/// IMAGE_OPTIONAL_HEADER64 and the section table.
fn pe_header(m: &ModuleDef, sections: &[SectionDef], export: (u32, u32)) -> Vec<u8> {
    let mut h = vec![0u8; PAGE_SIZE as usize];
    h[0..2].copy_from_slice(b"MZ");
    put_u16(&mut h, 0x02, 0x90);
    put_u16(&mut h, 0x04, 3);
    put_u16(&mut h, 0x08, 4);
    put_u16(&mut h, 0x0C, 0xFFFF);
    put_u16(&mut h, 0x10, 0xB8);
    put_u16(&mut h, 0x18, 0x40);
    let stub = b"This program cannot be run in DOS mode.\r\r\n$";
    h[0x4E..0x4E + stub.len()].copy_from_slice(stub);
    let pe = 0xE8usize;
    put_u32(&mut h, 0x3C, pe as u32);
    h[pe..pe + 4].copy_from_slice(b"PE\0\0");
    let coff = pe + 4;
    put_u16(&mut h, coff, 0x8664);
    put_u16(&mut h, coff + 2, sections.len() as u16);
    put_u32(&mut h, coff + 4, 0x5F3D_9C21 ^ (m.size & 0xFFFF));
    put_u16(&mut h, coff + 16, 0xF0);
    put_u16(&mut h, coff + 18, if m.dll { 0x2022 } else { 0x0022 });
    let opt = coff + 20;
    put_u16(&mut h, opt, 0x20B);
    h[opt + 2] = 14;
    h[opt + 3] = 0x1E;
    let code: u32 = sections
        .iter()
        .filter(|s| s.3 & 0x20 != 0)
        .map(|s| s.2)
        .sum();
    put_u32(&mut h, opt + 0x04, code);
    put_u32(&mut h, opt + 0x10, m.entry_rva);
    put_u32(&mut h, opt + 0x14, 0x1000);
    put_u64(&mut h, opt + 0x18, m.base);
    put_u32(&mut h, opt + 0x20, 0x1000);
    put_u32(&mut h, opt + 0x24, 0x200);
    put_u16(&mut h, opt + 0x28, 10);
    put_u16(&mut h, opt + 0x2C, 10);
    put_u16(&mut h, opt + 0x30, 10);
    put_u32(&mut h, opt + 0x38, m.size);
    put_u32(&mut h, opt + 0x3C, 0x400);
    put_u16(&mut h, opt + 0x44, m.subsystem);
    put_u16(&mut h, opt + 0x46, 0x4160);
    put_u64(&mut h, opt + 0x48, 0x4_0000);
    put_u64(&mut h, opt + 0x50, 0x1000);
    put_u64(&mut h, opt + 0x58, 0x10_0000);
    put_u64(&mut h, opt + 0x60, 0x1000);
    put_u32(&mut h, opt + 0x6C, 16);
    put_u32(&mut h, opt + 0x70, export.0);
    put_u32(&mut h, opt + 0x74, export.1);
    let mut at = opt + 0xF0;
    for &(name, rva, vsize, chars) in sections {
        h[at..at + name.len()].copy_from_slice(name.as_bytes());
        put_u32(&mut h, at + 8, vsize);
        put_u32(&mut h, at + 12, rva);
        put_u32(&mut h, at + 16, vsize.next_multiple_of(0x200));
        put_u32(&mut h, at + 20, rva - 0xC00);
        put_u32(&mut h, at + 36, chars);
        at += 40;
    }
    h
}

/// ntdll's code page 1 (RVA 0x1000): Etw functions, 0x40-byte slots from +0x20.
const PAGE1: &[&str] = &[
    "EtwEventRegister",
    "EtwEventUnregister",
    "EtwEventWrite",
    "EtwEventEnabled",
    "EtwEventProviderEnabled",
    "EtwEventWriteFull",
    "EtwEventActivityIdControl",
    "EtwEventWriteEx",
    "EtwEventSetInformation",
    "EtwEventWriteTransfer",
    "EtwRegisterTraceGuidsW",
    "EtwUnregisterTraceGuids",
    "EtwGetTraceLoggerHandle",
    "EtwGetTraceEnableLevel",
    "EtwGetTraceEnableFlags",
    "EtwLogTraceEvent",
    "EtwTraceMessage",
    "EtwEventWriteStartScenario",
    "EtwEventWriteEndScenario",
    "EtwNotificationRegister",
];

/// Code page 2 (RVA 0x2000); `None`: a function exported by ordinal only.
const PAGE2: &[Option<&str>] = &[
    Some("EtwEventWriteString"),
    Some("EtwEventWriteNoRegistration"),
    Some("EtwWriteUMSecurityEvent"),
    Some("LdrLoadDll"),
    Some("LdrUnloadDll"),
    Some("LdrGetProcedureAddress"),
    Some("LdrGetDllHandle"),
    None,
    Some("RtlAllocateHeap"),
    Some("RtlFreeHeap"),
    Some("RtlReAllocateHeap"),
    Some("RtlCreateHeap"),
    Some("RtlInitUnicodeString"),
    Some("RtlMoveMemory"),
    Some("RtlZeroMemory"),
    Some("RtlFillMemory"),
    Some("RtlCompareMemory"),
    Some("RtlGetVersion"),
    Some("RtlNtStatusToDosError"),
    Some("RtlGetLastWin32Error"),
    Some("RtlSetLastWin32Error"),
    Some("RtlEnterCriticalSection"),
    Some("RtlLeaveCriticalSection"),
    Some("RtlInitializeCriticalSection"),
    Some("RtlCaptureContext"),
    Some("RtlLookupFunctionEntry"),
    Some("RtlVirtualUnwind"),
    Some("RtlUserThreadStart"),
    Some("RtlExitUserThread"),
    Some("RtlAcquireSRWLockExclusive"),
    Some("RtlReleaseSRWLockExclusive"),
    Some("RtlQueryPerformanceCounter"),
    Some("RtlImageNtHeader"),
    None,
    Some("TpAllocWork"),
    Some("TpPostWork"),
    Some("TpReleaseWork"),
    Some("KiUserExceptionDispatcher"),
    Some("KiUserApcDispatcher"),
    Some("DbgBreakPoint"),
    Some("DbgPrint"),
    Some("CsrClientCallServer"),
    Some("memcpy"),
    Some("memset"),
    Some("strlen"),
    Some("wcslen"),
    Some("_wcsicmp"),
];

/// Code page 3 (RVA 0x3000): system-call stubs (name, number), 0x20 bytes each, by number.
const PAGE3: &[(&str, u32)] = &[
    ("NtWaitForSingleObject", 0x04),
    ("NtReadFile", 0x06),
    ("NtDeviceIoControlFile", 0x07),
    ("NtWriteFile", 0x08),
    ("NtSetInformationThread", 0x0D),
    ("NtClose", 0x0F),
    ("NtAllocateVirtualMemory", 0x18),
    ("NtQueryInformationProcess", 0x19),
    ("NtFreeVirtualMemory", 0x1E),
    ("NtQueryVirtualMemory", 0x23),
    ("NtOpenProcess", 0x26),
    ("NtMapViewOfSection", 0x28),
    ("NtUnmapViewOfSection", 0x2A),
    ("NtTerminateProcess", 0x2C),
    ("NtOpenFile", 0x33),
    ("NtDelayExecution", 0x34),
    ("NtQuerySystemInformation", 0x36),
    ("NtWriteVirtualMemory", 0x3A),
    ("NtReadVirtualMemory", 0x3F),
    ("NtContinue", 0x43),
    ("NtProtectVirtualMemory", 0x50),
    ("NtCreateFile", 0x55),
    ("NtTraceEvent", 0x5E),
    ("NtCreateThreadEx", 0xC1),
    ("NtTraceControl", 0x1B1),
];

/// The data export (in .data) and the forwarder.
const DATA_EXPORT: (&str, u32) = ("NlsMbCodePageTag", 0x6010);
const FORWARDER: (&str, &str) = ("RtlRestoreLastWin32Error", "NTDLL.RtlSetLastWin32Error");

/// The made-up but plausible bodies of the eight functions but NtTraceEvent (each ends in
/// `C3`); EtwEventWrite's `E8` call is patched to call EtwEventWriteFull.
fn etw_body(name: &str) -> Option<Vec<u8>> {
    let b: &[u8] = match name {
        "EtwEventWrite" => &[
            0x4C, 0x8B, 0xDC, 0x48, 0x83, 0xEC, 0x58, 0x4D, 0x89, 0x4B, 0xE8, 0x33, 0xC0, 0x45,
            0x89, 0x43, 0xE0, 0x45, 0x33, 0xC9, 0x49, 0x89, 0x43, 0xD8, 0x45, 0x33, 0xC0, 0x49,
            0x89, 0x43, 0xD0, 0xE8, 0, 0, 0, 0, 0x48, 0x83, 0xC4, 0x58, 0xC3,
        ],
        "EtwEventWriteFull" => &[
            0x48, 0x8B, 0xC4, 0x48, 0x89, 0x58, 0x08, 0x48, 0x89, 0x68, 0x10, 0x48, 0x89, 0x70,
            0x18, 0x57, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0x48, 0x81, 0xEC, 0x40,
            0x01, 0x00, 0x00, 0x33, 0xC0, 0x48, 0x81, 0xC4, 0x40, 0x01, 0x00, 0x00, 0x41, 0x5F,
            0x41, 0x5E, 0x41, 0x5D, 0x41, 0x5C, 0x5F, 0xC3,
        ],
        "EtwEventWriteEx" => &[
            0x4C, 0x8B, 0xDC, 0x48, 0x83, 0xEC, 0x68, 0x48, 0x8B, 0x84, 0x24, 0x98, 0x00, 0x00,
            0x00, 0x49, 0x89, 0x43, 0xF0, 0x33, 0xC0, 0x48, 0x83, 0xC4, 0x68, 0xC3,
        ],
        "EtwEventWriteTransfer" => &[
            0x48, 0x83, 0xEC, 0x58, 0x4C, 0x8B, 0x94, 0x24, 0x80, 0x00, 0x00, 0x00, 0x4C, 0x89,
            0x54, 0x24, 0x40, 0x33, 0xC0, 0x48, 0x83, 0xC4, 0x58, 0xC3,
        ],
        "EtwEventWriteString" => &[
            0x48, 0x89, 0x5C, 0x24, 0x08, 0x48, 0x89, 0x74, 0x24, 0x10, 0x57, 0x48, 0x83, 0xEC,
            0x50, 0x49, 0x8B, 0xF9, 0x33, 0xC0, 0x48, 0x8B, 0x5C, 0x24, 0x60, 0x48, 0x83, 0xC4,
            0x50, 0x5F, 0xC3,
        ],
        "EtwEventWriteNoRegistration" => &[
            0x48, 0x89, 0x5C, 0x24, 0x10, 0x48, 0x89, 0x74, 0x24, 0x18, 0x55, 0x57, 0x41, 0x56,
            0x48, 0x8B, 0xEC, 0x48, 0x83, 0xEC, 0x70, 0x33, 0xC0, 0x48, 0x83, 0xC4, 0x70, 0x41,
            0x5E, 0x5F, 0x5D, 0xC3,
        ],
        "EtwWriteUMSecurityEvent" => &[
            0x48, 0x8B, 0xC4, 0x48, 0x89, 0x58, 0x10, 0x48, 0x89, 0x70, 0x18, 0x48, 0x89, 0x78,
            0x20, 0x55, 0x41, 0x56, 0x41, 0x57, 0x48, 0x8D, 0x68, 0xA1, 0x33, 0xC0, 0x41, 0x5F,
            0x41, 0x5E, 0x5D, 0xC3,
        ],
        _ => return None,
    };
    Some(b.to_vec())
}

/// A generic body (one of three made-up prologue / epilogue shapes by `k`).
fn generic_body(k: usize) -> Vec<u8> {
    match k % 3 {
        0 => vec![
            0x48, 0x89, 0x5C, 0x24, 0x08, 0x57, 0x48, 0x83, 0xEC, 0x20, 0x48, 0x8B, 0xD9, 0x48,
            0x8B, 0xFA, 0x33, 0xC0, 0x48, 0x8B, 0x5C, 0x24, 0x30, 0x48, 0x83, 0xC4, 0x20, 0x5F,
            0xC3,
        ],
        1 => vec![
            0x40, 0x53, 0x48, 0x83, 0xEC, 0x20, 0x48, 0x8B, 0xD9, 0x48, 0x85, 0xC9, 0x74, 0x03,
            0x33, 0xC0, 0x90, 0x48, 0x83, 0xC4, 0x20, 0x5B, 0xC3,
        ],
        _ => vec![
            0x48, 0x8B, 0xC4, 0x48, 0x89, 0x58, 0x08, 0x48, 0x89, 0x68, 0x10, 0x48, 0x89, 0x70,
            0x18, 0x57, 0x48, 0x83, 0xEC, 0x30, 0x33, 0xC0, 0x48, 0x8B, 0x5C, 0x24, 0x40, 0x48,
            0x83, 0xC4, 0x30, 0x5F, 0xC3,
        ],
    }
}

/// The x64 system-call stub for `number` (0x20 bytes with its padding).
fn syscall_stub(number: u32) -> Vec<u8> {
    let mut s = vec![0x4C, 0x8B, 0xD1, 0xB8];
    s.extend_from_slice(&number.to_le_bytes());
    s.extend_from_slice(&[
        0xF6, 0x04, 0x25, 0x08, 0x03, 0xFE, 0x7F, 0x01, 0x75, 0x03, 0x0F, 0x05, 0xC3, 0xCD, 0x2E,
        0xC3,
    ]);
    s.extend_from_slice(&[0x0F, 0x1F, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00]);
    s
}

/// The synthetic ntdll.dll.
struct Ntdll {
    /// SizeOfImage bytes.
    image: Vec<u8>,
    /// Every function and data export: name -> RVA.
    rvas: BTreeMap<String, u32>,
    /// Named exports in AddressOfNames order: (name, RVA).
    exports: Vec<(String, u32)>,
    export_dir: (u32, u32),
}

impl Ntdll {
    fn build() -> Ntdll {
        let mut image = vec![0u8; NTDLL_SIZE_OF_IMAGE as usize];
        image[0x1000..0x4000].fill(0xCC);
        let mut rvas = BTreeMap::new();
        let mut nameless = Vec::new();
        let place = |image: &mut Vec<u8>, rva: u32, body: &[u8]| {
            image[rva as usize..rva as usize + body.len()].copy_from_slice(body);
        };
        for (k, name) in PAGE1.iter().enumerate() {
            let rva = 0x1020 + k as u32 * 0x40;
            let body = etw_body(name).unwrap_or_else(|| generic_body(k));
            place(&mut image, rva, &body);
            rvas.insert(name.to_string(), rva);
        }
        for (k, name) in PAGE2.iter().enumerate() {
            let rva = 0x2020 + k as u32 * 0x40;
            let body = name.and_then(etw_body).unwrap_or_else(|| generic_body(k));
            place(&mut image, rva, &body);
            match name {
                Some(n) => {
                    rvas.insert(n.to_string(), rva);
                }
                None => nameless.push(rva),
            }
        }
        for (k, (name, number)) in PAGE3.iter().enumerate() {
            let rva = 0x3000 + k as u32 * 0x20;
            place(&mut image, rva, &syscall_stub(*number));
            rvas.insert(name.to_string(), rva);
        }
        // EtwEventWrite calls EtwEventWriteFull (rel32 after the E8 at +31).
        let call = rvas["EtwEventWrite"] + 31;
        let rel = rvas["EtwEventWriteFull"] as i64 - (call as i64 + 5);
        image[call as usize + 1..call as usize + 5].copy_from_slice(&(rel as i32).to_le_bytes());
        image[DATA_EXPORT.1 as usize] = 1;
        rvas.insert(DATA_EXPORT.0.to_string(), DATA_EXPORT.1);
        let (export_dir, exports) = Self::export_directory(&mut image, &rvas, &nameless);
        let sections: [SectionDef; 3] = [
            (".text", 0x1000, 0x2F40, SCN_CODE),
            (".rdata", 0x4000, 0x1E80, SCN_RDATA),
            (".data", 0x6000, 0x0400, SCN_DATA),
        ];
        let header = pe_header(&ntdll_def(), &sections, export_dir);
        image[..PAGE_SIZE as usize].copy_from_slice(&header);
        Ntdll {
            image,
            rvas,
            exports,
            export_dir,
        }
    }

    /// IMAGE_EXPORT_DIRECTORY at [`EXPORT_DIR_RVA`]: the nameless functions first, then the
    /// named ones (functions, the data export, the forwarder) in name order; returns
    /// DataDirectory[0] and the named exports (RVA; a forwarder's = its string's).
    fn export_directory(
        image: &mut [u8],
        rvas: &BTreeMap<String, u32>,
        nameless: &[u32],
    ) -> ((u32, u32), Vec<(String, u32)>) {
        let mut named: Vec<(String, Option<u32>)> =
            rvas.iter().map(|(n, &r)| (n.clone(), Some(r))).collect();
        named.push((FORWARDER.0.to_string(), None));
        named.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let n_fn = nameless.len() + named.len();
        let dir = EXPORT_DIR_RVA as usize;
        let funcs = dir + 0x28;
        let names = funcs + 4 * n_fn;
        let ords = names + 4 * named.len();
        let mut strings = ords + 2 * named.len();
        let mut put_str = |image: &mut [u8], s: &str| -> u32 {
            let at = strings;
            image[at..at + s.len()].copy_from_slice(s.as_bytes());
            image[at + s.len()] = 0;
            strings += s.len() + 1;
            at as u32
        };
        let dll_name = put_str(image, "ntdll.dll");
        let mut out = Vec::new();
        for (i, &r) in nameless.iter().enumerate() {
            put_u32(image, funcs + 4 * i, r);
        }
        for (j, (name, rva)) in named.iter().enumerate() {
            let index = nameless.len() + j;
            let name_rva = put_str(image, name);
            let target = match rva {
                Some(r) => *r,
                None => put_str(image, FORWARDER.1),
            };
            put_u32(image, funcs + 4 * index, target);
            put_u32(image, names + 4 * j, name_rva);
            put_u16(image, ords + 2 * j, index as u16);
            out.push((name.clone(), target));
        }
        let size = (strings - dir) as u32;
        assert!(
            dir + (size as usize) < 0x6000,
            "ntdll: exports fit in .rdata"
        );
        put_u32(image, dir + 0x04, 0x5F3D_9C21);
        put_u32(image, dir + 0x0C, dll_name);
        put_u32(image, dir + 0x10, NTDLL_ORDINAL_BASE);
        put_u32(image, dir + 0x14, n_fn as u32);
        put_u32(image, dir + 0x18, named.len() as u32);
        put_u32(image, dir + 0x1C, funcs as u32);
        put_u32(image, dir + 0x20, names as u32);
        put_u32(image, dir + 0x24, ords as u32);
        ((EXPORT_DIR_RVA, size), out)
    }

    /// The leaf kind of page `rva`.
    fn leaf(rva: u32) -> Leaf {
        if (0x1000..0x4000).contains(&rva) {
            Leaf::UserCode
        } else {
            Leaf::UserReadOnly
        }
    }
}

// ------------------------------------------------------------------------------------------
// Building (after every kernel mapping; machine::map_last)

/// What `machine::build` maps for the user images, and the expectations to finish once the
/// address spaces exist.
pub(crate) struct ImagesBuild {
    pub(crate) specs: Vec<SpaceSpec>,
    pub(crate) late: Vec<LateRemap>,
    expected: ExpectedNtdll,
    /// (ntdll page VA, PFN) of the shared pages.
    shared: Vec<(u64, u64)>,
    /// (pid, page VA, state) of the late pages.
    late_pages: Vec<(u64, u64, NtdllPage)>,
    findings: Vec<ExpectedFinding>,
}

/// One process's private pages: its PEB page, its loader heap page, its expectation.
fn process_pages(p: &ExpectedProcess) -> (Vec<u8>, Vec<u8>, ExpectedUserProcess) {
    let mods = modules_of(p.pid, &p.name);
    let heap = USER_LOADER_HEAP;
    let ldr = heap + LDR_DATA_OFFSET;
    let entry_va = |i: usize| heap + LDR_ENTRY_FIRST + i as u64 * LDR_ENTRY_STRIDE;
    let mut h = vec![0u8; PAGE_SIZE as usize];
    let hoff = |va: u64| (va - heap) as usize;
    put_u32(&mut h, hoff(ldr + LDR_DATA_LENGTH), PEB_LDR_DATA_SIZE);
    h[hoff(ldr + LDR_DATA_INITIALIZED)] = 1;
    let mut strings = heap + LDR_STRINGS;
    let mut modules = Vec::new();
    for (i, m) in mods.iter().enumerate() {
        let e = entry_va(i);
        put_u64(&mut h, hoff(e + LDTE_DLL_BASE), m.base);
        let ep = if m.entry_rva == 0 {
            0
        } else {
            m.base + u64::from(m.entry_rva)
        };
        put_u64(&mut h, hoff(e + LDTE_ENTRY_POINT), ep);
        put_u32(&mut h, hoff(e + LDTE_SIZE_OF_IMAGE), m.size);
        for (field, s) in [
            (LDTE_FULL_DLL_NAME, &m.full_name),
            (LDTE_BASE_DLL_NAME, &m.base_name),
        ] {
            let mut u = utf16le(s);
            let len = u.len();
            u.extend_from_slice(&[0, 0]);
            let at = hoff(strings);
            h[at..at + u.len()].copy_from_slice(&u);
            put_u16(&mut h, hoff(e + field), len as u16);
            put_u16(&mut h, hoff(e + field) + 2, (len + 2) as u16);
            put_u64(&mut h, hoff(e + field) + 8, strings);
            strings = (strings + u.len() as u64).next_multiple_of(8);
        }
        modules.push(ExpectedUserModule {
            base_name: m.base_name.clone(),
            full_name: m.full_name.clone(),
            base: m.base,
            size_of_image: m.size,
            entry_point: ep,
            ldr_entry: e,
        });
    }
    assert!(strings <= heap + PAGE_SIZE, "loader heap page overflow");
    let all: Vec<u64> = (0..mods.len()).map(entry_va).collect();
    // InInitializationOrder: ntdll, then KERNELBASE, KERNEL32 where loaded.
    let init: Vec<usize> = match mods.len() {
        2 => vec![1],
        _ => vec![1, 3, 2],
    };
    let init_entries: Vec<u64> = init.iter().map(|&i| entry_va(i)).collect();
    for (head, link, entries) in [
        (LDR_DATA_IN_LOAD_ORDER, LDTE_IN_LOAD_ORDER_LINKS, &all),
        (LDR_DATA_IN_MEMORY_ORDER, LDTE_IN_MEMORY_ORDER_LINKS, &all),
        (
            LDR_DATA_IN_INIT_ORDER,
            LDTE_IN_INIT_ORDER_LINKS,
            &init_entries,
        ),
    ] {
        let mut ring = vec![ldr + head];
        ring.extend(entries.iter().map(|e| e + link));
        for i in 0..ring.len() {
            let flink = ring[(i + 1) % ring.len()];
            let blink = ring[(i + ring.len() - 1) % ring.len()];
            put_u64(&mut h, hoff(ring[i]), flink);
            put_u64(&mut h, hoff(ring[i]) + 8, blink);
        }
    }
    let peb = peb_va(p.pid);
    let mut pg = vec![0u8; PAGE_SIZE as usize];
    put_u64(&mut pg, PEB_MUTANT as usize, u64::MAX);
    put_u64(&mut pg, PEB_IMAGE_BASE_ADDRESS as usize, mods[0].base);
    put_u64(&mut pg, PEB_LDR as usize, ldr);
    let e = ExpectedUserProcess {
        pid: p.pid,
        name: p.name.clone(),
        eprocess: p.eprocess_va,
        dtb: 0,
        peb,
        ldr,
        image_base: mods[0].base,
        modules,
        init_order: init.iter().map(|&i| mods[i].base_name.clone()).collect(),
        ntdll_pages: Vec::new(),
        etw_entries: Vec::new(),
    };
    (pg, h, e)
}

/// (process, function, bytes; None: a page-level variant) of a [`WritePatch`].
fn patch_target(w: WritePatch) -> (Option<u64>, &'static str, Option<&'static [u8]>) {
    match w {
        WritePatch::Ret => (Some(0x12E4), "EtwEventWrite", Some(&[0xC3])),
        WritePatch::XorEaxRet => (Some(0x44C), "EtwEventWriteEx", Some(&[0x33, 0xC0, 0xC3])),
        WritePatch::Ret14 => (
            Some(0x12E4),
            "EtwEventWriteTransfer",
            Some(&[0xC2, 0x14, 0x00]),
        ),
        WritePatch::XorRaxRet => (Some(0x184), "NtTraceEvent", Some(&[0x48, 0x33, 0xC0, 0xC3])),
        WritePatch::MovEaxRet => (
            Some(0x44C),
            "EtwEventWriteString",
            Some(&[0xB8, 0x00, 0x00, 0x00, 0x00, 0xC3]),
        ),
        WritePatch::BenignCopy => (Some(0x44C), "EtwEventWriteNoRegistration", None),
        WritePatch::SharedPage => (None, "EtwEventWriteFull", Some(&[0xC3])),
        WritePatch::Unreadable => (Some(0x184), "EtwEventWrite", None),
    }
}

/// `bytes` as "C3" / "33 C0 C3".
fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `etw-write-patch` variants of `cfg`'s tampering, in spec order.
fn write_patches(cfg: &Config) -> Vec<WritePatch> {
    cfg.etw
        .iter()
        .flat_map(|e| e.tampering.iter().flat_map(|t| t.kinds.iter()))
        .filter_map(|k| match k {
            TamperKind::WritePatch(w) => Some(*w),
            _ => None,
        })
        .collect()
}

/// The findings and expectations of the tamperings so far.
#[derive(Default)]
struct Patched {
    findings: Vec<ExpectedFinding>,
    patches: Vec<ExpectedWritePatch>,
}

impl Ntdll {
    fn va(&self, name: &str) -> u64 {
        NTDLL_BASE + u64::from(self.rvas[name])
    }

    /// `SharedPage`: the image section itself patched (every process sees it).
    fn patch_shared(&mut self, users: &[&ExpectedProcess], out: &mut Patched) {
        let w = WritePatch::SharedPage;
        let (_, f, bytes) = patch_target(w);
        let bytes = bytes.expect("bytes");
        let rva = self.rvas[f] as usize;
        let before = hex(&self.image[rva..rva + ENTRY_BYTES]);
        self.image[rva..rva + bytes.len()].copy_from_slice(bytes);
        let va = self.va(f);
        let pids: Vec<String> = users.iter().map(|p| format!("{:#x}", p.pid)).collect();
        out.findings.push(ExpectedFinding {
            check: CheckId::EtwWritePatch,
            address: va,
            detail: format!(
                "ntdll!{f} at {va:#x} begins {} on the image's shared page, in every process \
                 (PIDs {}); the image file's bytes are {before}",
                hex(bytes),
                pids.join(", "),
            ),
            changed: vec![(va, bytes.len())],
        });
        out.patches.push(ExpectedWritePatch {
            variant: w,
            pid: None,
            function: f.to_string(),
            va,
            bytes: bytes.to_vec(),
            page_pa: 0,
        });
    }
}

/// VA -> (PFN, leaf) of the shared image pages.
type Frames = BTreeMap<u64, (u64, Leaf)>;

/// The shared frames (allocated now): ntdll's pages in RVA order, then the header pages of
/// KERNEL32.DLL, KERNELBASE.dll and each exe. Returns ntdll's (VA, PFN) and VA -> (PFN, leaf)
/// of every shared page.
fn shared_frames(
    ntdll: &Ntdll,
    users: &[&ExpectedProcess],
    pm: &mut PhysMem,
) -> (Vec<(u64, u64)>, Frames) {
    let mut shared = Vec::new();
    let mut frame_of = BTreeMap::new();
    for rva in (0..NTDLL_SIZE_OF_IMAGE).step_by(PAGE_SIZE as usize) {
        let f = pm.alloc();
        pm.set_page(f, &ntdll.image[rva as usize..(rva + 0x1000) as usize]);
        let va = NTDLL_BASE + u64::from(rva);
        shared.push((va, f));
        frame_of.insert(va, (f, Ntdll::leaf(rva)));
    }
    let header_sections: [SectionDef; 2] = [
        (".text", 0x1000, 0x1000, SCN_CODE),
        (".rdata", 0x2000, 0x1000, SCN_RDATA),
    ];
    let mut images: Vec<ModuleDef> = vec![kernel32(), kernelbase()];
    images.extend(users.iter().map(|p| exe(p.pid, &p.name)));
    for m in &images {
        if frame_of.contains_key(&m.base) {
            continue;
        }
        let f = pm.alloc();
        pm.set_page(f, &pe_header(m, &header_sections, (0, 0)));
        frame_of.insert(m.base, (f, Leaf::UserReadOnly));
    }
    (shared, frame_of)
}

/// Each process's spec (PEB, loader heap, its images' pages in VA order) and expectation.
fn process_specs(
    users: &[&ExpectedProcess],
    frame_of: &Frames,
    dtb_off: u64,
) -> (Vec<SpaceSpec>, Vec<ExpectedUserProcess>) {
    let mut specs = Vec::new();
    let mut procs = Vec::new();
    for p in users {
        let (peb_page, heap_page, e) = process_pages(p);
        let mut pages = vec![
            (e.peb, UserPage::Private(peb_page), Leaf::UserData),
            (
                USER_LOADER_HEAP,
                UserPage::Private(heap_page),
                Leaf::UserData,
            ),
        ];
        for m in &e.modules {
            let n = if m.base == NTDLL_BASE {
                u64::from(NTDLL_SIZE_OF_IMAGE) / PAGE_SIZE
            } else {
                1
            };
            for k in 0..n {
                let va = m.base + k * PAGE_SIZE;
                let (f, leaf) = frame_of[&va];
                pages.push((va, UserPage::Shared(f), leaf));
            }
        }
        pages.sort_by_key(|x| x.0);
        specs.push(SpaceSpec {
            pid: p.pid,
            dtb_field_va: p.eprocess_va + dtb_off,
            pages,
        });
        procs.push(e);
    }
    (specs, procs)
}

/// The private copies and unreadable pages of `patches` (but `SharedPage`): the late remaps,
/// (pid, page VA, state) of each, and the findings / expectations in `out`.
fn private_pages(
    ntdll: &Ntdll,
    users: &[&ExpectedProcess],
    patches: &[WritePatch],
    out: &mut Patched,
) -> (Vec<LateRemap>, Vec<(u64, u64, NtdllPage)>) {
    // (pid, page VA) -> the page's bytes (None: not in the dump).
    let mut late_map: BTreeMap<(u64, u64), Option<Vec<u8>>> = BTreeMap::new();
    for &w in patches.iter().filter(|&&w| w != WritePatch::SharedPage) {
        let (pid, f, bytes) = patch_target(w);
        let pid = pid.expect("a process");
        let p = users
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("{}: no process {pid:#x}", CheckId::EtwWritePatch));
        let va = ntdll.va(f);
        let page = va & !(PAGE_SIZE - 1);
        let rva = (page - NTDLL_BASE) as usize;
        let slot = late_map
            .entry((pid, page))
            .or_insert_with(|| Some(ntdll.image[rva..rva + 0x1000].to_vec()));
        if w == WritePatch::Unreadable {
            *slot = None;
        }
        if let (Some(b), Some(c)) = (bytes, slot.as_mut()) {
            let o = (va - page) as usize;
            c[o..o + b.len()].copy_from_slice(b);
            let before = &ntdll.image[rva + o..rva + o + ENTRY_BYTES];
            out.findings.push(ExpectedFinding {
                check: CheckId::EtwWritePatch,
                address: va,
                detail: format!(
                    "PID {pid:#x} ({}): ntdll!{f} at {va:#x} begins {} on a private copy of its \
                     code page; the image's shared page holds {}",
                    p.name,
                    hex(b),
                    hex(before)
                ),
                changed: vec![(va, b.len())],
            });
        }
        out.patches.push(ExpectedWritePatch {
            variant: w,
            pid: Some(pid),
            function: f.to_string(),
            va,
            bytes: bytes.map(<[u8]>::to_vec).unwrap_or_default(),
            page_pa: 0,
        });
    }
    let mut late = Vec::new();
    let mut late_pages = Vec::new();
    for ((pid, va), content) in late_map {
        let (page, state) = match content {
            Some(c) => (UserPage::Private(c), NtdllPage::PrivateCopy),
            None => (UserPage::Unstored, NtdllPage::NotInDump),
        };
        late.push(LateRemap {
            pid,
            va,
            page,
            leaf: Leaf::UserCode,
        });
        late_pages.push((pid, va, state));
    }
    (late, late_pages)
}

/// The user images of `cfg` (`Config::user_images`): the shared image frames are allocated
/// now (ntdll's pages in RVA order, then the other images' header pages), the processes'
/// specs and the `etw-write-patch` late remaps returned for `user_space::build` /
/// `user_space::apply_late`.
pub(crate) fn build(cfg: &Config, processes: &[ExpectedProcess], pm: &mut PhysMem) -> ImagesBuild {
    let fx = cfg.fixture.as_ref().expect("user images: a fixture");
    assert!(
        cfg.processes && user_images_supported(cfg),
        "fixture {}: Config::with_user_images needs an x64 fixture with the processes' layouts \
         and _EPROCESS.Peb",
        fx.name
    );
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    let dtb_off = t
        .offset_of("_KPROCESS", "DirectoryTableBase")
        .expect("DirectoryTableBase");
    let patches = write_patches(cfg);
    let users: Vec<&ExpectedProcess> = processes
        .iter()
        .filter(|p| has_user_memory(p.pid))
        .collect();
    let mut ntdll = Ntdll::build();
    let clean = ntdll.image.clone();
    let mut out = Patched::default();
    if patches.contains(&WritePatch::SharedPage) {
        ntdll.patch_shared(&users, &mut out);
    }
    let (shared, frame_of) = shared_frames(&ntdll, &users, pm);
    let (specs, procs) = process_specs(&users, &frame_of, dtb_off);
    let (late, late_pages) = private_pages(&ntdll, &users, &patches, &mut out);
    let etw_functions = ETW_WRITE_FUNCTIONS
        .iter()
        .map(|&f| {
            let va = ntdll.va(f);
            let rva = ntdll.rvas[f] as usize;
            ExpectedEtwFunction {
                name: f.to_string(),
                va,
                page_va: va & !(PAGE_SIZE - 1),
                entry: clean[rva..rva + ENTRY_BYTES].to_vec(),
            }
        })
        .collect();
    let expected = ExpectedNtdll {
        base: NTDLL_BASE,
        size_of_image: NTDLL_SIZE_OF_IMAGE,
        export_directory: (
            NTDLL_BASE + u64::from(ntdll.export_dir.0),
            ntdll.export_dir.1,
        ),
        ordinal_base: NTDLL_ORDINAL_BASE,
        exports: ntdll
            .exports
            .iter()
            .map(|(n, r)| (n.clone(), NTDLL_BASE + u64::from(*r)))
            .collect(),
        forwarders: vec![(FORWARDER.0.to_string(), FORWARDER.1.to_string())],
        etw_functions,
        shared_pages: Vec::new(),
        processes: procs,
        patches: out.patches,
    };
    ImagesBuild {
        specs,
        late,
        expected,
        shared,
        late_pages,
        findings: out.findings,
    }
}

/// The expectations once the address spaces exist: DTBs, the pages' physical addresses, the
/// entry bytes as each process reads them; and the findings.
pub(crate) fn finish(
    b: ImagesBuild,
    spaces: &[UserSpace],
    kvmap: &VirtMap,
    pm: &PhysMem,
) -> (ExpectedNtdll, Vec<ExpectedFinding>) {
    let mut e = b.expected;
    e.shared_pages = b.shared.iter().map(|&(va, f)| (va, f << 12)).collect();
    for p in &mut e.processes {
        let space = spaces
            .iter()
            .find(|s| s.pid == p.pid)
            .expect("a space per process");
        p.dtb = space.dtb;
        p.ntdll_pages = b
            .shared
            .iter()
            .map(|&(va, _)| {
                let pa = user_space::translate(space, kvmap, va).expect("ntdll mapped");
                let state = b
                    .late_pages
                    .iter()
                    .find(|l| l.0 == p.pid && l.1 == va)
                    .map_or(NtdllPage::Shared, |l| l.2);
                (va, pa, state)
            })
            .collect();
        p.etw_entries = e
            .etw_functions
            .iter()
            .map(|f| {
                let bytes = user_space::read(space, kvmap, pm, f.va, ENTRY_BYTES).ok();
                (f.name.clone(), bytes)
            })
            .collect();
    }
    for x in &mut e.patches {
        let page = x.va & !(PAGE_SIZE - 1);
        x.page_pa = match x.pid {
            None => e.shared_pages.iter().find(|s| s.0 == page).expect("page").1,
            Some(pid) => {
                let p = e.processes.iter().find(|p| p.pid == pid).expect("process");
                p.ntdll_pages.iter().find(|s| s.0 == page).expect("page").1
            }
        };
    }
    (e, b.findings)
}
