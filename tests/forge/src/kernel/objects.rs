//! Kernel objects: KDDEBUGGER_DATA64, KUSER_SHARED_DATA, the loaded-module list
//! (KLDR_DATA_TABLE_ENTRY in pool pages) and the .data variables around them.

use crate::config::{Arch, Config};
use crate::kernel::pe::KernelImage;
use crate::util::{put_bytes, put_u16, put_u32, put_u64, sign_extend32, utf16le, Rng, PAGE_SIZE};
use crate::Module;

/// KDDEBUGGER_DATA64 field offsets (§1.4 B; identical on x86 and x64).
mod kdbg {
    pub const LIST_FLINK: usize = 0x00;
    pub const LIST_BLINK: usize = 0x08;
    pub const OWNER_TAG: usize = 0x10;
    pub const SIZE: usize = 0x14;
    pub const KERN_BASE: usize = 0x18;
    pub const BREAKPOINT_WITH_STATUS: usize = 0x20;
    pub const PAE_ENABLED: usize = 0x36;
    pub const KI_CALL_USER_MODE: usize = 0x38;
    pub const PS_LOADED_MODULE_LIST: usize = 0x48;
    pub const PS_ACTIVE_PROCESS_HEAD: usize = 0x50;
    pub const MM_PFN_DATABASE: usize = 0xC0;
    pub const NT_BUILD_LAB: usize = 0x208;
    pub const CM_NT_CSD_VERSION: usize = 0x268;
    pub const KI_PROCESSOR_BLOCK: usize = 0x218;
    pub const ETWP_DEBUGGER_DATA: usize = 0x330;
    /// USHORT OffsetPrcbMhz (WDBGEXTS.H KDDEBUGGER_DATA64: SizePrcb 0x2B0,
    /// OffsetPrcbDpcRoutine 0x2B2, OffsetPrcbCurrentThread 0x2B4, OffsetPrcbMhz 0x2B6).
    pub const OFFSET_PRCB_MHZ: usize = 0x2B6;
    /// Bytes the forge writes (the 19041 size).
    pub const BLOCK_LEN: usize = 0x380;
}

/// The 'KDBG' owner tag as a little-endian u32 (0x4742444B).
pub(crate) const KDBG_TAG: &[u8; 4] = b"KDBG";

/// KDDEBUGGER_DATA64.Header.Size: 0x380 from build 19041 on, 0x340 in old layouts (§1.4 B).
pub(crate) fn kdbg_size(build: u32) -> u32 {
    if build >= 19041 {
        0x380
    } else {
        0x340
    }
}

/// NtBuildLab(Ex) string the KDBG points to.
pub(crate) fn nt_build_lab(cfg: &Config) -> String {
    if let Some(lab) = cfg.fixture.as_ref().and_then(|f| f.nt_build_lab.clone()) {
        return lab;
    }
    let arch = if cfg.arch.is_x64() {
        "amd64fre"
    } else {
        "x86fre"
    };
    if cfg.build == 19041 {
        format!("19041.1.{arch}.vb_release.191206-1406")
    } else {
        format!("{}.1.{arch}.synthetic_release.000000-0000", cfg.build)
    }
}

/// A pointer as stored in a KDBG field: x86 addresses are sign-extended to 64 bits.
fn kdbg_ptr(arch: Arch, va: u64) -> u64 {
    if arch.is_x64() {
        va
    } else {
        sign_extend32(va)
    }
}

/// Write a native pointer (8 bytes on x64, 4 on x86).
fn put_ptr(arch: Arch, buf: &mut [u8], off: usize, va: u64) {
    if arch.is_x64() {
        put_u64(buf, off, va);
    } else {
        put_u32(buf, off, u32::try_from(va).expect("32-bit pointer"));
    }
}

/// KiProcessorBlock[0..cpus]: the KPRCB addresses. Hand-made kernel: CPU 0 inside the
/// kernel's KiInitialPcr area, the others in per-processor pool. Fixture kernels (whose image is
/// a few pages): every KPCR in per-processor pool, KPRCB = KPCR + 0x180 (x64) / + 0x120 (x86),
/// KPCRs `stride` apart so that `kprcb_size` bytes fit.
pub(crate) fn kprcb_addresses(cfg: &Config, img: &KernelImage) -> Vec<u64> {
    let x64 = cfg.arch.is_x64();
    if let Some(fx) = &cfg.fixture {
        let size = u64::from(fx.kprcb_size.unwrap_or(0));
        return (0..u64::from(cfg.cpus))
            .map(|i| {
                if x64 {
                    let stride = crate::util::align_up(0x180 + size, 0x1000).max(0x11_4000);
                    0xFFFF_A081_6C1C_0000 + i * stride + 0x180
                } else {
                    let stride = crate::util::align_up(0x120 + size, 0x1000).max(0x4000);
                    0x8A20_0000 + i * stride + 0x120
                }
            })
            .collect();
    }
    (0..u64::from(cfg.cpus))
        .map(|i| match (x64, i) {
            (true, 0) => img.base + 0xD1_0180,
            (true, _) => 0xFFFF_A081_6C1C_0180 + (i - 1) * 0x11_4000,
            (false, 0) => img.base + 0x70_E120,
            (false, _) => 0x8A20_0120 + (i - 1) * 0x4000,
        })
        .collect()
}

/// Write `data` at the public `name` of a fixture image, checking that it fits the variable's
/// storage (up to the next public or the end of the section).
fn write_fixture_var(cfg: &Config, img: &mut KernelImage, name: &str, rva: u32, data: &[u8]) {
    if let Some(fx) = &cfg.fixture {
        if let Some(len) = fx.storage_len(name) {
            assert!(
                data.len() <= len as usize,
                "fixture {}: {name} has {len:#x} bytes, the forge writes {:#x}",
                fx.name,
                data.len()
            );
        }
    }
    img.write(rva, data);
}

/// Fill the kernel's .data variables: KDBG (decoded or encoded), KdpDebuggerDataListHead,
/// PsActiveProcessHead (empty list), NtBuildLabEx, MmPfnDatabase and KiProcessorBlock
/// (`prcbs`, see [`kprcb_addresses`]); for fixture kernels also KdVersionBlock,
/// KeNumberProcessors and CmNtCSDVersion.
/// `pfn_db` is the value of the MmPfnDatabase variable (the database's VA).
pub(crate) fn write_data_variables(
    cfg: &Config,
    img: &mut KernelImage,
    pfn_db: u64,
    prcbs: &[u64],
    rng: &mut Rng,
) -> String {
    let arch = cfg.arch;
    let sym = img.sym;
    let p = arch.ptr_size();
    let image_base = img.base;
    let va = move |rva: u32| image_base + rva as u64;
    let kdbg_va = va(sym.kd_debugger_data_block);
    let list_head_va = va(sym.kdp_debugger_data_list_head);

    // KDDEBUGGER_DATA64
    let mut k = vec![0u8; kdbg::BLOCK_LEN];
    if cfg.kdbg_decoded {
        put_u64(&mut k, kdbg::LIST_FLINK, kdbg_ptr(arch, list_head_va));
        put_u64(&mut k, kdbg::LIST_BLINK, kdbg_ptr(arch, list_head_va));
        put_bytes(&mut k, kdbg::OWNER_TAG, KDBG_TAG);
        put_u32(&mut k, kdbg::SIZE, kdbg_size(cfg.build));
        put_u64(&mut k, kdbg::KERN_BASE, kdbg_ptr(arch, img.base));
        let text = img.section(".text").rva;
        put_u64(
            &mut k,
            kdbg::BREAKPOINT_WITH_STATUS,
            kdbg_ptr(arch, va(text + 0x1_F2A0)),
        );
        if arch == Arch::X86Pae {
            put_u16(&mut k, kdbg::PAE_ENABLED, 1);
        }
        put_u64(
            &mut k,
            kdbg::KI_CALL_USER_MODE,
            kdbg_ptr(arch, va(text + 0x1_F6C0)),
        );
        put_u64(
            &mut k,
            kdbg::PS_LOADED_MODULE_LIST,
            kdbg_ptr(arch, va(sym.ps_loaded_module_list)),
        );
        put_u64(
            &mut k,
            kdbg::PS_ACTIVE_PROCESS_HEAD,
            kdbg_ptr(arch, va(sym.ps_active_process_head)),
        );
        put_u64(
            &mut k,
            kdbg::MM_PFN_DATABASE,
            kdbg_ptr(arch, va(sym.mm_pfn_database)),
        );
        put_u64(
            &mut k,
            kdbg::NT_BUILD_LAB,
            kdbg_ptr(arch, va(sym.nt_build_lab)),
        );
        put_u64(
            &mut k,
            kdbg::KI_PROCESSOR_BLOCK,
            kdbg_ptr(arch, va(sym.ki_processor_block)),
        );
        put_u64(
            &mut k,
            kdbg::ETWP_DEBUGGER_DATA,
            kdbg_ptr(arch, va(sym.etwp_debugger_data)),
        );
        if let Some(csd) = sym.cm_nt_csd_version {
            put_u64(&mut k, kdbg::CM_NT_CSD_VERSION, kdbg_ptr(arch, va(csd)));
        }
        // Where the KPRCB keeps the CPU speed (as a real kernel fills it), from the fixture's
        // types.h.
        if let Some(fx) = cfg.fixture.as_ref() {
            if let Ok(t) = crate::kernel::types_h::TypesH::load(&fx.dir) {
                if let Some(o) = t.offset_of("_KPRCB", "MHz") {
                    k[kdbg::OFFSET_PRCB_MHZ..kdbg::OFFSET_PRCB_MHZ + 2]
                        .copy_from_slice(&(o as u16).to_le_bytes());
                }
            }
        }
    } else {
        // An encoded copy looks like noise: no 'KDBG' tag, no recognisable pointers.
        rng.fill(&mut k);
        if &k[kdbg::OWNER_TAG..kdbg::OWNER_TAG + 4] == KDBG_TAG {
            k[kdbg::OWNER_TAG] ^= 0xFF;
        }
    }
    write_fixture_var(
        cfg,
        img,
        "KdDebuggerDataBlock",
        sym.kd_debugger_data_block,
        &k,
    );

    // KdpDebuggerDataListHead: a LIST_ENTRY whose only element is the KDBG.
    let mut head = vec![0u8; 2 * p];
    put_ptr(arch, &mut head, 0, kdbg_va);
    put_ptr(arch, &mut head, p, kdbg_va);
    img.write(sym.kdp_debugger_data_list_head, &head);

    // PsActiveProcessHead: an empty list (points to itself).
    let pah = va(sym.ps_active_process_head);
    let mut l = vec![0u8; 2 * p];
    put_ptr(arch, &mut l, 0, pah);
    put_ptr(arch, &mut l, p, pah);
    write_fixture_var(
        cfg,
        img,
        "PsActiveProcessHead",
        sym.ps_active_process_head,
        &l,
    );

    // NtBuildLabEx string (ASCII, NUL-terminated).
    let lab = nt_build_lab(cfg);
    let mut s = lab.as_bytes().to_vec();
    s.push(0);
    write_fixture_var(cfg, img, "NtBuildLabEx", sym.nt_build_lab, &s);

    // MmPfnDatabase variable -> PFN database VA.
    let mut v = vec![0u8; p];
    put_ptr(arch, &mut v, 0, pfn_db);
    img.write(sym.mm_pfn_database, &v);

    // KiProcessorBlock[cpus]: KPRCB addresses. The hand-made kernel's KPRCBs are not mapped.
    let mut arr = vec![0u8; p * prcbs.len()];
    for (i, &prcb) in prcbs.iter().enumerate() {
        put_ptr(arch, &mut arr, i * p, prcb);
    }
    write_fixture_var(cfg, img, "KiProcessorBlock", sym.ki_processor_block, &arr);

    // Fixture kernels: KdVersionBlock, KeNumberProcessors, CmNtCSDVersion.
    if let Some(rva) = sym.kd_version_block {
        let v = kd_version_block(cfg, image_base, va(sym.ps_loaded_module_list), list_head_va);
        write_fixture_var(cfg, img, "KdVersionBlock", rva, &v);
    }
    if let Some(rva) = sym.ke_number_processors {
        write_fixture_var(cfg, img, "KeNumberProcessors", rva, &cfg.cpus.to_le_bytes());
    }
    if let Some(rva) = sym.cm_nt_csd_version {
        img.write(rva, &0u32.to_le_bytes()); // no service pack
    }
    lab
}

/// DBGKD_GET_VERSION64 (0x28 bytes): MajorVersion 0xF (free build), MinorVersion = build,
/// ProtocolVersion 6, Flags (MP | DATA, + PTR64 on x64), MachineType, MaxPacketType 0x0C,
/// MaxStateChange 3, MaxManipulate 0x33, then KernBase, PsLoadedModuleList and
/// DebuggerDataList (-> KdpDebuggerDataListHead) as 64-bit values (x86: sign-extended).
/// The constant bytes are those of the fixture images (and of real kernels).
pub(crate) fn kd_version_block(
    cfg: &Config,
    kern_base: u64,
    ps_loaded_module_list: u64,
    debugger_data_list: u64,
) -> Vec<u8> {
    let arch = cfg.arch;
    let mut v = vec![0u8; 0x28];
    put_u16(&mut v, 0x00, 0xF);
    put_u16(
        &mut v,
        0x02,
        u16::try_from(cfg.build).expect("16-bit build"),
    );
    v[0x04] = 6; // ProtocolVersion
    v[0x05] = 0; // KdSecondaryVersion
    put_u16(&mut v, 0x06, if arch.is_x64() { 7 } else { 3 }); // Flags
    put_u16(&mut v, 0x08, if arch.is_x64() { 0x8664 } else { 0x014C });
    v[0x0A] = 0x0C; // MaxPacketType
    v[0x0B] = 3; // MaxStateChange
    v[0x0C] = 0x33; // MaxManipulate
    put_u64(&mut v, 0x10, kdbg_ptr(arch, kern_base));
    put_u64(&mut v, 0x18, kdbg_ptr(arch, ps_loaded_module_list));
    put_u64(&mut v, 0x20, kdbg_ptr(arch, debugger_data_list));
    v
}

/// KUSER_SHARED_DATA page (offsets checked against a real ISF).
pub(crate) fn kuser_shared_data(cfg: &Config, physical_pages: u64) -> Vec<u8> {
    let mut k = vec![0u8; PAGE_SIZE as usize];
    put_u32(&mut k, 0x04, 0x0FA0_0000); // TickCountMultiplier
                                        // InterruptTime (KSYSTEM_TIME at 0x08) = up time.
    put_ksystem_time(&mut k, 0x08, cfg.system_up_time);
    // SystemTime (KSYSTEM_TIME at 0x14): LowPart, High1Time, High2Time (= High1Time).
    put_ksystem_time(&mut k, 0x14, cfg.system_time);
    // TimeZoneBias (KSYSTEM_TIME at 0x20): UTC.
    let machine: u16 = if cfg.arch.is_x64() { 0x8664 } else { 0x014C };
    put_u16(&mut k, 0x2C, machine); // ImageNumberLow
    put_u16(&mut k, 0x2E, machine); // ImageNumberHigh
    put_bytes(&mut k, 0x30, &utf16le("C:\\Windows")); // NtSystemRoot WCHAR[260]
    put_u32(&mut k, 0x260, cfg.build); // NtBuildNumber
    put_u32(&mut k, 0x264, 1); // NtProductType = NtProductWinNt
    k[0x268] = 1; // ProductTypeIsValid
    put_u32(&mut k, 0x26C, 10); // NtMajorVersion
    put_u32(&mut k, 0x270, 0); // NtMinorVersion
    put_u32(&mut k, 0x2E8, physical_pages as u32); // NumberOfPhysicalPages
    match crate::etw::variation::of(cfg) {
        None => put_u64(&mut k, 0x300, 10_000_000), // QpcFrequency
        Some(v) => {
            // Variation mode: the drawn QpcFrequency where the build's layout has the field
            // (types.h), nothing otherwise.
            let fx = cfg.fixture.as_ref().expect("variation needs a fixture");
            let t = crate::kernel::types_h::TypesH::load(&fx.dir)
                .unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
            if let Some(off) = t.offset_of("_KUSER_SHARED_DATA", "QpcFrequency") {
                put_u64(&mut k, off as usize, v.clock.qpc_frequency);
            }
        }
    }
    // TickCount (KSYSTEM_TIME at 0x320), in 15.625 ms ticks.
    put_ksystem_time(&mut k, 0x320, cfg.system_up_time / 156_250);
    put_u32(&mut k, 0x3C0, cfg.cpus); // ActiveProcessorCount
    k
}

fn put_ksystem_time(buf: &mut [u8], off: usize, v: u64) {
    put_u32(buf, off, v as u32);
    put_u32(buf, off + 4, (v >> 32) as u32);
    put_u32(buf, off + 8, (v >> 32) as u32);
}

/// Where the loaded-module list lives in pool.
#[derive(Clone, Debug)]
pub(crate) struct ModuleListPlan {
    /// VA of the pool page holding the KLDR_DATA_TABLE_ENTRYs.
    pub entries_page: u64,
    /// VA of the pool page holding the name buffers.
    pub names_page: u64,
}

/// Offsets inside a pool page where the forge puts allocations (pool header first).
const X64_ENTRY_SLOTS: [u64; 4] = [0x1B0, 0x5E0, 0x8A0, 0xC50];
const X86_ENTRY_SLOTS: [u64; 4] = [0x0F8, 0x4D0, 0x7A8, 0xB60];
const NAME_SLOTS: [u64; 4] = [0x040, 0x3C0, 0x780, 0xB10];

/// The modules of the forged machine, in load order ([0] = ntoskrnl.exe).
pub(crate) fn modules(cfg: &Config, img: &KernelImage) -> Vec<Module> {
    let kb = cfg.kernel_base;
    let (hal, kd, clfs) = if cfg.arch.is_x64() {
        (
            (kb + 0x10C_0000, 0x6_C000u32),
            (kb + 0x113_0000, 0xB_000),
            (0xFFFF_F804_7E60_0000, 0x6_A000),
        )
    } else {
        (
            (kb + 0x80_0000, 0x4_1000),
            (kb + 0x84_2000, 0x9_000),
            (0x8B6A_0000, 0x5_C000),
        )
    };
    let m = |base_name: &str, full_name: &str, base: u64, size: u32| Module {
        base_name: base_name.to_string(),
        full_name: full_name.to_string(),
        base,
        size,
    };
    vec![
        m(
            "ntoskrnl.exe",
            "\\SystemRoot\\system32\\ntoskrnl.exe",
            kb,
            img.size_of_image,
        ),
        m("hal.dll", "\\SystemRoot\\system32\\hal.dll", hal.0, hal.1),
        m("kd.dll", "\\SystemRoot\\system32\\kd.dll", kd.0, kd.1),
        m(
            "CLFS.SYS",
            "\\SystemRoot\\System32\\drivers\\CLFS.SYS",
            clfs.0,
            clfs.1,
        ),
    ]
}

/// Pool header before an allocation: x64 POOL_HEADER (16 bytes: PreviousSize, PoolIndex,
/// BlockSize in 16-byte units, PoolType, tag, ProcessBilled) or x86 (8 bytes, 8-byte units).
pub(crate) fn pool_header(arch: Arch, buf: &mut [u8], off: usize, size: usize, tag: &[u8; 4]) {
    if arch.is_x64() {
        buf[off] = 0;
        buf[off + 1] = 0;
        buf[off + 2] = size.div_ceil(16) as u8 + 1;
        buf[off + 3] = 0x02; // NonPagedPoolNx-ish
        put_bytes(buf, off + 4, tag);
    } else {
        put_u16(buf, off, 0);
        put_u16(buf, off + 2, (size.div_ceil(8) as u16 + 1) | (1 << 9));
        put_bytes(buf, off + 4, tag);
    }
}

/// Build the two pool pages of the module list and the list head contents.
/// Returns (entries page, names page, VAs of the entries).
pub(crate) fn module_list_pages(
    cfg: &Config,
    img: &KernelImage,
    plan: &ModuleListPlan,
    mods: &[Module],
) -> (Vec<u8>, Vec<u8>, Vec<u64>) {
    let arch = cfg.arch;
    let x64 = arch.is_x64();
    let hdr = if x64 { 0x10 } else { 0x8 };
    let entry_size = if x64 { 0xA0 } else { 0x78 };
    let slots = if x64 {
        X64_ENTRY_SLOTS
    } else {
        X86_ENTRY_SLOTS
    };
    assert!(mods.len() <= slots.len());
    let head = img.va(img.sym.ps_loaded_module_list);
    let entry_vas: Vec<u64> = (0..mods.len())
        .map(|i| plan.entries_page + slots[i] + hdr as u64)
        .collect();
    let mut entries = vec![0u8; PAGE_SIZE as usize];
    let mut names = vec![0u8; PAGE_SIZE as usize];
    for (i, m) in mods.iter().enumerate() {
        let eo = (slots[i] + hdr as u64) as usize;
        pool_header(arch, &mut entries, eo - hdr, entry_size, b"MmLd");
        let flink = if i + 1 < mods.len() {
            entry_vas[i + 1]
        } else {
            head
        };
        let blink = if i == 0 { head } else { entry_vas[i - 1] };
        // Name buffer: FullDllName with a terminating NUL; BaseDllName points into it.
        let full = utf16le(&m.full_name);
        let base = utf16le(&m.base_name);
        assert!(full.ends_with(&base));
        let no = (NAME_SLOTS[i] + hdr as u64) as usize;
        pool_header(arch, &mut names, no - hdr, full.len() + 2, b"MmLn");
        put_bytes(&mut names, no, &full);
        let full_va = plan.names_page + no as u64;
        let base_va = full_va + (full.len() - base.len()) as u64;
        let entry_point = m.base + if i == 0 { 0xE_E8010 } else { 0x1_0A0 };
        let e = &mut entries[eo..eo + entry_size];
        if x64 {
            // KLDR_DATA_TABLE_ENTRY (x64, real ISF): InLoadOrderLinks 0x0, DllBase 0x30,
            // EntryPoint 0x38, SizeOfImage 0x40, FullDllName 0x48, BaseDllName 0x58,
            // Flags 0x68, TimeDateStamp 0x9C.
            put_u64(e, 0x00, flink);
            put_u64(e, 0x08, blink);
            put_u64(e, 0x30, m.base);
            put_u64(e, 0x38, entry_point);
            put_u32(e, 0x40, m.size);
            put_unicode_string(arch, e, 0x48, full.len(), full_va);
            put_unicode_string(arch, e, 0x58, base.len(), base_va);
            put_u32(e, 0x68, 0x4910_4000);
            put_u16(e, 0x6C, 1); // LoadCount
            put_u32(e, 0x9C, if i == 0 { img.timestamp } else { 0x5E8A_2C11 });
        } else {
            // x86: InLoadOrderLinks 0x0, DllBase 0x18, EntryPoint 0x1C, SizeOfImage 0x20,
            // FullDllName 0x24, BaseDllName 0x2C, Flags 0x34.
            put_u32(e, 0x00, flink as u32);
            put_u32(e, 0x04, blink as u32);
            put_u32(e, 0x18, m.base as u32);
            put_u32(e, 0x1C, entry_point as u32);
            put_u32(e, 0x20, m.size);
            put_unicode_string(arch, e, 0x24, full.len(), full_va);
            put_unicode_string(arch, e, 0x2C, base.len(), base_va);
            put_u32(e, 0x34, 0x4910_4000);
            put_u16(e, 0x38, 1);
        }
    }
    (entries, names, entry_vas)
}

/// Write the PsLoadedModuleList head (Flink = first entry, Blink = last entry).
pub(crate) fn write_module_list_head(cfg: &Config, img: &mut KernelImage, entry_vas: &[u64]) {
    let p = cfg.arch.ptr_size();
    let mut l = vec![0u8; 2 * p];
    put_ptr(cfg.arch, &mut l, 0, entry_vas[0]);
    put_ptr(cfg.arch, &mut l, p, *entry_vas.last().expect("entries"));
    let rva = img.sym.ps_loaded_module_list;
    write_fixture_var(cfg, img, "PsLoadedModuleList", rva, &l);
}

/// UNICODE_STRING: x64 {u16 Length (bytes), u16 MaximumLength, u32 pad, u64 Buffer};
/// x86 {u16, u16, u32 Buffer}.
fn put_unicode_string(arch: Arch, buf: &mut [u8], off: usize, len: usize, buffer: u64) {
    put_u16(buf, off, len as u16);
    put_u16(buf, off + 2, len as u16 + 2);
    if arch.is_x64() {
        put_u32(buf, off + 4, 0);
        put_u64(buf, off + 8, buffer);
    } else {
        put_u32(buf, off + 4, buffer as u32);
    }
}
