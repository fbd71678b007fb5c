//! DUMP_HEADER32 ("PAGEDUMP", 0x1000 bytes) and DUMP_HEADER64 ("PAGEDU64", 0x2000 bytes),
//! crash-dump-format.md §1.1. Unused bytes keep the `PAGE` fill, as in the real dump D1
//! (e.g. the x64 padding at 0x3C, VersionUser, Comment, Attributes).

use crate::config::{Arch, Config};
use crate::util::{put_bytes, put_u16, put_u32, put_u64};

/// Values of the header that come from the forged machine.
#[derive(Clone, Debug)]
pub(crate) struct HeaderInfo {
    /// DirectoryTableBase as written (x64: including the PCID-like low bits).
    pub dtb: u64,
    pub pfn_database: u64,
    pub ps_loaded_module_list: u64,
    pub ps_active_process_head: u64,
    pub kdbg_va: u64,
    /// The machine's memory runs (BasePage, PageCount) for PHYSICAL_MEMORY_DESCRIPTOR.
    pub runs: Vec<(u64, u64)>,
    pub dump_type: u32,
    pub required_dump_space: u64,
    /// EXCEPTION_RECORD.ExceptionAddress.
    pub exception_address: u64,
}

/// x64 offsets (§1.1).
mod x64 {
    pub const DTB: usize = 0x10;
    pub const PFN_DATABASE: usize = 0x18;
    pub const PS_LOADED_MODULE_LIST: usize = 0x20;
    pub const PS_ACTIVE_PROCESS_HEAD: usize = 0x28;
    pub const MACHINE: usize = 0x30;
    pub const NUMBER_PROCESSORS: usize = 0x34;
    pub const BUGCHECK_CODE: usize = 0x38;
    pub const BUGCHECK_PARAMS: usize = 0x40;
    pub const KDBG: usize = 0x80;
    pub const PHYSICAL_MEMORY_BLOCK: usize = 0x88;
    pub const CONTEXT: usize = 0x348;
    pub const CONTEXT_LEN: usize = 3000;
    pub const EXCEPTION: usize = 0xF00;
    pub const DUMP_TYPE: usize = 0xF98;
    pub const REQUIRED_DUMP_SPACE: usize = 0xFA0;
    pub const SYSTEM_TIME: usize = 0xFA8;
    pub const SYSTEM_UP_TIME: usize = 0x1030;
    pub const PRODUCT_TYPE: usize = 0x1040;
    pub const SUITE_MASK: usize = 0x1044;
    pub const WRITER_STATUS: usize = 0x1048;
    pub const KD_SECONDARY_VERSION: usize = 0x104D;
    pub const SIZE: usize = 0x2000;
}

/// Rewrite DumpType and RequiredDumpSpace of a built header `h` (x64 or x86).
pub(crate) fn set_dump_type(h: &mut [u8], x64_header: bool, dump_type: u32, required: u64) {
    if x64_header {
        crate::util::put_u32(h, x64::DUMP_TYPE, dump_type);
        crate::util::put_u64(h, x64::REQUIRED_DUMP_SPACE, required);
    } else {
        crate::util::put_u32(h, x86::DUMP_TYPE, dump_type);
        crate::util::put_u64(h, x86::REQUIRED_DUMP_SPACE, required);
    }
}

/// x86 offsets (§1.1).
mod x86 {
    pub const DTB: usize = 0x10;
    pub const PFN_DATABASE: usize = 0x14;
    pub const PS_LOADED_MODULE_LIST: usize = 0x18;
    pub const PS_ACTIVE_PROCESS_HEAD: usize = 0x1C;
    pub const MACHINE: usize = 0x20;
    pub const NUMBER_PROCESSORS: usize = 0x24;
    pub const BUGCHECK_CODE: usize = 0x28;
    pub const BUGCHECK_PARAMS: usize = 0x2C;
    pub const PAE_ENABLED: usize = 0x5C;
    pub const KD_SECONDARY_VERSION: usize = 0x5D;
    pub const KDBG: usize = 0x60;
    pub const PHYSICAL_MEMORY_BLOCK: usize = 0x64;
    pub const CONTEXT: usize = 0x320;
    pub const CONTEXT_LEN: usize = 1200;
    pub const EXCEPTION: usize = 0x7D0;
    pub const DUMP_TYPE: usize = 0xF88;
    pub const PRODUCT_TYPE: usize = 0xF94;
    pub const SUITE_MASK: usize = 0xF98;
    pub const WRITER_STATUS: usize = 0xF9C;
    pub const REQUIRED_DUMP_SPACE: usize = 0xFA0;
    pub const SYSTEM_UP_TIME: usize = 0xFB8;
    pub const SYSTEM_TIME: usize = 0xFC0;
    pub const SIZE: usize = 0x1000;
}

/// PHYSICAL_MEMORY_DESCRIPTOR capacity inside the 700-byte union.
pub(crate) fn max_runs(arch: Arch) -> usize {
    if arch.is_x64() {
        (700 - 0x10) / 16
    } else {
        (700 - 8) / 8
    }
}

fn page_filled(size: usize) -> Vec<u8> {
    b"PAGE".iter().copied().cycle().take(size).collect()
}

pub(crate) fn build(cfg: &Config, info: &HeaderInfo) -> Vec<u8> {
    assert!(info.runs.len() <= max_runs(cfg.arch), "too many runs");
    if cfg.arch.is_x64() {
        build64(cfg, info)
    } else {
        build32(cfg, info)
    }
}

fn build64(cfg: &Config, info: &HeaderInfo) -> Vec<u8> {
    use x64::*;
    let mut h = page_filled(SIZE);
    put_bytes(&mut h, 0, b"PAGEDU64");
    put_u32(&mut h, 0x08, 0xF); // MajorVersion: free build
    put_u32(&mut h, 0x0C, cfg.build); // MinorVersion
    put_u64(&mut h, DTB, info.dtb);
    put_u64(&mut h, PFN_DATABASE, info.pfn_database);
    put_u64(&mut h, PS_LOADED_MODULE_LIST, info.ps_loaded_module_list);
    put_u64(&mut h, PS_ACTIVE_PROCESS_HEAD, info.ps_active_process_head);
    put_u32(&mut h, MACHINE, 0x8664);
    put_u32(&mut h, NUMBER_PROCESSORS, cfg.cpus);
    put_u32(&mut h, BUGCHECK_CODE, cfg.bugcheck_code);
    for (i, p) in cfg.bugcheck_params.iter().enumerate() {
        put_u64(&mut h, BUGCHECK_PARAMS + 8 * i, *p);
    }
    put_u64(&mut h, KDBG, info.kdbg_va);

    // PHYSICAL_MEMORY_DESCRIPTOR64: u32 NumberOfRuns, pad, u64 NumberOfPages, runs from +0x10.
    let pmb = PHYSICAL_MEMORY_BLOCK;
    put_u32(&mut h, pmb, info.runs.len() as u32);
    put_u32(&mut h, pmb + 4, 0);
    put_u64(&mut h, pmb + 8, info.runs.iter().map(|r| r.1).sum());
    for (i, &(base, count)) in info.runs.iter().enumerate() {
        put_u64(&mut h, pmb + 0x10 + 16 * i, base);
        put_u64(&mut h, pmb + 0x18 + 16 * i, count);
    }

    // CONTEXT (AMD64): the 3000-byte ContextRecord area is zeroed, as in D1.
    let c = CONTEXT;
    h[c..c + CONTEXT_LEN].fill(0);
    put_u32(&mut h, c + 0x30, 0x0010_001F); // ContextFlags: CONTEXT_AMD64 | FULL | SEGMENTS
    put_u32(&mut h, c + 0x34, 0x1F80); // MxCsr
    put_u16(&mut h, c + 0x38, 0x10); // SegCs
    put_u16(&mut h, c + 0x3A, 0x2B); // SegDs
    put_u16(&mut h, c + 0x3C, 0x2B); // SegEs
    put_u16(&mut h, c + 0x3E, 0x53); // SegFs
    put_u16(&mut h, c + 0x40, 0x2B); // SegGs
    put_u16(&mut h, c + 0x42, 0x18); // SegSs
    put_u32(&mut h, c + 0x44, 0x0005_0246); // EFlags
    put_u64(&mut h, c + 0x98, 0xFFFF_8504_2989_2120); // Rsp
    put_u64(&mut h, c + 0xF8, cfg.bugcheck_params[1]); // Rip
    put_u16(&mut h, c + 0x100, 0x027F); // FltSave.ControlWord
                                        // kdmp-parser check (tooling-notes §5): MxCsr (+0x34) == FltSave.MxCsr (+0x118).
    put_u32(&mut h, c + 0x118, 0x1F80);
    put_u32(&mut h, c + 0x11C, 0xFFFF); // FltSave.MxCsr_Mask

    // EXCEPTION_RECORD64: D1 writes code, flags, record, address and NumberParameters only.
    let e = EXCEPTION;
    put_u32(&mut h, e, 0x8000_0003);
    put_u32(&mut h, e + 4, 1);
    put_u64(&mut h, e + 8, 0);
    put_u64(&mut h, e + 0x10, info.exception_address);
    put_u32(&mut h, e + 0x18, 0);

    put_u32(&mut h, DUMP_TYPE, info.dump_type);
    put_u64(&mut h, REQUIRED_DUMP_SPACE, info.required_dump_space);
    put_u64(&mut h, SYSTEM_TIME, cfg.system_time);
    put_u64(&mut h, SYSTEM_UP_TIME, cfg.system_up_time);
    put_u32(&mut h, PRODUCT_TYPE, 1);
    put_u32(&mut h, SUITE_MASK, 0x110);
    put_u32(&mut h, WRITER_STATUS, 0);
    h[KD_SECONDARY_VERSION] = 0;
    h
}

fn build32(cfg: &Config, info: &HeaderInfo) -> Vec<u8> {
    use x86::*;
    let u32v = |v: u64| u32::try_from(v).expect("32-bit header value");
    let mut h = page_filled(SIZE);
    put_bytes(&mut h, 0, b"PAGEDUMP");
    put_u32(&mut h, 0x08, 0xF);
    put_u32(&mut h, 0x0C, cfg.build);
    put_u32(&mut h, DTB, u32v(info.dtb));
    put_u32(&mut h, PFN_DATABASE, u32v(info.pfn_database));
    put_u32(
        &mut h,
        PS_LOADED_MODULE_LIST,
        u32v(info.ps_loaded_module_list),
    );
    put_u32(
        &mut h,
        PS_ACTIVE_PROCESS_HEAD,
        u32v(info.ps_active_process_head),
    );
    put_u32(&mut h, MACHINE, 0x014C);
    put_u32(&mut h, NUMBER_PROCESSORS, cfg.cpus);
    put_u32(&mut h, BUGCHECK_CODE, cfg.bugcheck_code);
    for (i, p) in cfg.bugcheck_params.iter().enumerate() {
        put_u32(&mut h, BUGCHECK_PARAMS + 4 * i, *p as u32);
    }
    h[PAE_ENABLED] = u8::from(cfg.arch == Arch::X86Pae);
    h[KD_SECONDARY_VERSION] = 0;
    put_u32(&mut h, KDBG, u32v(info.kdbg_va));

    // PHYSICAL_MEMORY_DESCRIPTOR32: u32 NumberOfRuns, u32 NumberOfPages, runs {u32, u32}.
    let pmb = PHYSICAL_MEMORY_BLOCK;
    put_u32(&mut h, pmb, info.runs.len() as u32);
    put_u32(&mut h, pmb + 4, u32v(info.runs.iter().map(|r| r.1).sum()));
    for (i, &(base, count)) in info.runs.iter().enumerate() {
        put_u32(&mut h, pmb + 8 + 8 * i, u32v(base));
        put_u32(&mut h, pmb + 12 + 8 * i, u32v(count));
    }

    // CONTEXT (i386), 1200-byte area zeroed.
    let c = CONTEXT;
    h[c..c + CONTEXT_LEN].fill(0);
    put_u32(&mut h, c, 0x0001_003F); // ContextFlags: CONTEXT_ALL
    put_u32(&mut h, c + 0x1C, 0x027F); // FloatSave.ControlWord
    put_u32(&mut h, c + 0x90, 0x30); // SegFs
    put_u32(&mut h, c + 0x94, 0x23); // SegEs
    put_u32(&mut h, c + 0x98, 0x23); // SegDs
    put_u32(&mut h, c + 0xB4, 0x8C5E_7B40); // Ebp
    put_u32(&mut h, c + 0xB8, cfg.bugcheck_params[1] as u32); // Eip
    put_u32(&mut h, c + 0xBC, 0x08); // SegCs
    put_u32(&mut h, c + 0xC0, 0x0001_0246); // EFlags
    put_u32(&mut h, c + 0xC4, 0x8C5E_7A10); // Esp
    put_u32(&mut h, c + 0xC8, 0x10); // SegSs
    put_u16(&mut h, c + 0xCC, 0x027F); // ExtendedRegisters (FXSAVE): FCW
    put_u32(&mut h, c + 0xCC + 0x18, 0x1F80); // FXSAVE MxCsr
    put_u32(&mut h, c + 0xCC + 0x1C, 0xFFFF); // FXSAVE MxCsr_Mask

    // EXCEPTION_RECORD32: code, flags, record, address, NumberParameters.
    let e = EXCEPTION;
    put_u32(&mut h, e, 0x8000_0003);
    put_u32(&mut h, e + 4, 1);
    put_u32(&mut h, e + 8, 0);
    put_u32(&mut h, e + 0xC, u32v(info.exception_address));
    put_u32(&mut h, e + 0x10, 0);

    put_u32(&mut h, DUMP_TYPE, info.dump_type);
    put_u32(&mut h, PRODUCT_TYPE, 1);
    put_u32(&mut h, SUITE_MASK, 0x110);
    put_u32(&mut h, WRITER_STATUS, 0);
    put_u64(&mut h, REQUIRED_DUMP_SPACE, info.required_dump_space);
    put_u64(&mut h, SYSTEM_UP_TIME, cfg.system_up_time);
    put_u64(&mut h, SYSTEM_TIME, cfg.system_time);
    h
}
