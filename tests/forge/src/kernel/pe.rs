//! The in-memory kernel image (ntoskrnl): PE headers, section table, debug directory with an
//! RSDS record, and the .data variables the dump header and KDBG point to. Built by hand
//! (crash-dump-format.md §1.4 "PDB match"); only the pages the forge writes are mapped.

use std::collections::BTreeMap;

use crate::config::{Arch, Config};
use crate::kernel::fixture::Fixture;
use crate::util::{align_up, put_bytes, put_u16, put_u32, put_u64, PAGE_SIZE};

const IMAGE_SCN_CNT_CODE: u32 = 0x0000_0020;
const IMAGE_SCN_CNT_INITIALIZED_DATA: u32 = 0x0000_0040;
const IMAGE_SCN_MEM_DISCARDABLE: u32 = 0x0200_0000;
const IMAGE_SCN_MEM_NOT_PAGED: u32 = 0x0800_0000;
const IMAGE_SCN_MEM_EXECUTE: u32 = 0x2000_0000;
const IMAGE_SCN_MEM_READ: u32 = 0x4000_0000;
const IMAGE_SCN_MEM_WRITE: u32 = 0x8000_0000;

const CODE: u32 = IMAGE_SCN_CNT_CODE | IMAGE_SCN_MEM_EXECUTE | IMAGE_SCN_MEM_READ;
const CODE_NP: u32 = CODE | IMAGE_SCN_MEM_NOT_PAGED;
const RDATA: u32 = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ | IMAGE_SCN_MEM_NOT_PAGED;
const DATA: u32 = RDATA | IMAGE_SCN_MEM_WRITE;
const PAGEDATA: u32 = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ | IMAGE_SCN_MEM_WRITE;
const INIT: u32 = CODE | IMAGE_SCN_MEM_DISCARDABLE;
const RSRC: u32 = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ;
const RELOC: u32 = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ | IMAGE_SCN_MEM_DISCARDABLE;

const FILE_ALIGNMENT: u32 = 0x200;
const SECTION_ALIGNMENT: u32 = 0x1000;
const SIZE_OF_HEADERS: u32 = 0x1000;
const E_LFANEW: u32 = 0x108;

const IMAGE_DEBUG_TYPE_CODEVIEW: u32 = 2;
const IMAGE_DEBUG_TYPE_POGO: u32 = 13;
const IMAGE_DEBUG_TYPE_REPRO: u32 = 16;

#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub name: String,
    pub rva: u32,
    pub vsize: u32,
    pub raw_ptr: u32,
    pub raw_size: u32,
    pub chars: u32,
}

/// RVAs of the kernel variables the forge fills in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Symbols {
    pub kd_debugger_data_block: u32,
    pub etwp_debugger_data: u32,
    pub ps_active_process_head: u32,
    pub ps_loaded_module_list: u32,
    pub nt_build_lab: u32,
    pub mm_pfn_database: u32,
    pub ki_processor_block: u32,
    pub kdp_debugger_data_list_head: u32,
    /// Fixture kernels only (the hand-made kernel leaves these variables out): KdVersionBlock,
    /// KeNumberProcessors and CmNtCSDVersion.
    pub kd_version_block: Option<u32>,
    pub ke_number_processors: Option<u32>,
    pub cm_nt_csd_version: Option<u32>,
}

impl Symbols {
    /// (name, RVA) of every variable the forge places.
    pub(crate) fn named(&self) -> Vec<(&'static str, u32)> {
        let mut v = vec![
            ("KdDebuggerDataBlock", self.kd_debugger_data_block),
            ("EtwpDebuggerData", self.etwp_debugger_data),
            ("PsActiveProcessHead", self.ps_active_process_head),
            ("PsLoadedModuleList", self.ps_loaded_module_list),
            ("NtBuildLabEx", self.nt_build_lab),
            ("MmPfnDatabase", self.mm_pfn_database),
            ("KiProcessorBlock", self.ki_processor_block),
            ("KdpDebuggerDataListHead", self.kdp_debugger_data_list_head),
        ];
        for (name, rva) in [
            ("KdVersionBlock", self.kd_version_block),
            ("KeNumberProcessors", self.ke_number_processors),
            ("CmNtCSDVersion", self.cm_nt_csd_version),
        ] {
            if let Some(rva) = rva {
                v.push((name, rva));
            }
        }
        v
    }
}

/// Page protection of an image page, from its section's characteristics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageProt {
    ReadWrite,
    ReadOnly,
}

#[derive(Clone, Debug)]
pub(crate) struct KernelImage {
    pub base: u64,
    pub size_of_image: u32,
    pub timestamp: u32,
    pub sections: Vec<Section>,
    pub sym: Symbols,
    pub debug_dir_rva: u32,
    pub debug_dir_size: u32,
    pub rsds_rva: u32,
    pub rsds_len: u32,
    /// Page-aligned RVA -> page content, for every page the forge writes (and maps).
    pub pages: BTreeMap<u32, Vec<u8>>,
}

/// (name, virtual size, characteristics, raw-size divisor) of the sections, in RVA order.
/// A divisor > 1 models uninitialised data (raw size smaller than virtual size).
type SectionSpec = (&'static str, u32, u32, u32);

const X64_SECTIONS: &[SectionSpec] = &[
    (".text", 0x3F_D5E4, CODE_NP, 1),
    ("PAGELK", 0x2_A3B0, CODE_NP, 1),
    ("POOLCODE", 0x2F1C, CODE_NP, 1),
    (".rdata", 0x1A_4F30, RDATA, 1),
    (".pdata", 0x5_C9B4, RDATA, 1),
    ("PAGE", 0x5D_0B71, CODE, 1),
    (".data", 0x10_D4F0, DATA, 6),
    ("ALMOSTRO", 0x2_D1C0, DATA, 1),
    ("PAGEDATA", 0xB_3A28, PAGEDATA, 1),
    ("PAGEVRFY", 0xA_9E4C, CODE, 1),
    ("INIT", 0x6_F2D6, INIT, 1),
    (".rsrc", 0x13_5AC8, RSRC, 1),
    (".reloc", 0x5F38, RELOC, 1),
];

const X86_SECTIONS: &[SectionSpec] = &[
    (".text", 0x2F_7C21, CODE_NP, 1),
    ("PAGELK", 0x1_D4E0, CODE_NP, 1),
    ("POOLCODE", 0x2B18, CODE_NP, 1),
    (".rdata", 0xC_2F51, RDATA, 1),
    ("PAGE", 0x2A_2C44, CODE, 1),
    (".data", 0x9_A2D4, DATA, 6),
    ("ALMOSTRO", 0x1F80, DATA, 1),
    ("PAGEDATA", 0x7C00, PAGEDATA, 1),
    ("INIT", 0x5_E8B0, INIT, 1),
    (".rsrc", 0x3_8C10, RSRC, 1),
    (".reloc", 0x2_A1D8, RELOC, 1),
];

fn build_sections(spec: &[SectionSpec]) -> Vec<Section> {
    let mut rva = SECTION_ALIGNMENT;
    let mut raw = SIZE_OF_HEADERS;
    spec.iter()
        .map(|&(name, vsize, chars, div)| {
            let raw_size = align_up((vsize / div) as u64, FILE_ALIGNMENT as u64) as u32;
            let s = Section {
                name: name.to_string(),
                rva,
                vsize,
                raw_ptr: raw,
                raw_size,
                chars,
            };
            rva += align_up(vsize as u64, SECTION_ALIGNMENT as u64) as u32;
            raw += raw_size;
            s
        })
        .collect()
}

impl KernelImage {
    pub(crate) fn section(&self, name: &str) -> &Section {
        self.sections
            .iter()
            .find(|s| s.name == name)
            .expect("section exists")
    }

    fn section_of(&self, rva: u32) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| rva >= s.rva && rva < s.rva + align_up(s.vsize as u64, 0x1000) as u32)
    }

    /// File offset of `rva` (what IMAGE_DEBUG_DIRECTORY.PointerToRawData holds).
    fn file_offset(&self, rva: u32) -> u32 {
        let s = self.section_of(rva).expect("rva inside a section");
        s.raw_ptr + (rva - s.rva)
    }

    pub(crate) fn page_prot(&self, page_rva: u32) -> PageProt {
        match self.section_of(page_rva) {
            None => PageProt::ReadWrite, // the header page: RW + NX on Windows 10
            Some(s) if s.chars & IMAGE_SCN_MEM_WRITE != 0 => PageProt::ReadWrite,
            Some(_) => PageProt::ReadOnly,
        }
    }

    /// Write `data` at `rva`, creating (zero-filled) pages as needed.
    pub(crate) fn write(&mut self, rva: u32, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let cur = rva + done as u32;
            let page = cur & !0xFFF;
            let off = (cur & 0xFFF) as usize;
            let n = (PAGE_SIZE as usize - off).min(data.len() - done);
            let buf = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE_SIZE as usize]);
            buf[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    pub(crate) fn va(&self, rva: u32) -> u64 {
        self.base + rva as u64
    }

    /// Build the headers and the debug directory page for `cfg`.
    pub(crate) fn new(cfg: &Config) -> Self {
        let x64 = cfg.arch.is_x64();
        let sections = build_sections(if x64 { X64_SECTIONS } else { X86_SECTIONS });
        let last = sections.last().expect("sections");
        let size_of_image = last.rva + align_up(last.vsize as u64, 0x1000) as u32;
        let data_rva = sections
            .iter()
            .find(|s| s.name == ".data")
            .expect(".data")
            .rva;
        let rdata_rva = sections
            .iter()
            .find(|s| s.name == ".rdata")
            .expect(".rdata")
            .rva;
        // x64: the RVAs of the real 19041 kernel GUID 5278AFF8...-1 (§2.2).
        // x86: made-up but plausible offsets inside .data.
        let sym = if x64 {
            Symbols {
                kd_debugger_data_block: 0xC0_0B20,
                etwp_debugger_data: 0xC1_0D58,
                ps_active_process_head: 0xC1_E200,
                ps_loaded_module_list: 0xC2_A390,
                nt_build_lab: 0xC4_C0A0,
                mm_pfn_database: 0xCF_C500,
                ki_processor_block: 0xCF_DC80,
                kdp_debugger_data_list_head: 0xC0_0AF0,
                kd_version_block: None,
                ke_number_processors: None,
                cm_nt_csd_version: None,
            }
        } else {
            Symbols {
                kd_debugger_data_block: data_rva + 0x2_5C48,
                etwp_debugger_data: data_rva + 0x2_E730,
                ps_active_process_head: data_rva + 0x3_A2D8,
                ps_loaded_module_list: data_rva + 0x4_1B70,
                nt_build_lab: data_rva + 0x4_E260,
                mm_pfn_database: data_rva + 0x6_A294,
                ki_processor_block: data_rva + 0x7_C0C0,
                kdp_debugger_data_list_head: data_rva + 0x2_5C20,
                kd_version_block: None,
                ke_number_processors: None,
                cm_nt_csd_version: None,
            }
        };
        let data_end = data_rva
            + sections
                .iter()
                .find(|s| s.name == ".data")
                .expect(".data")
                .vsize;
        for rva in [
            sym.kd_debugger_data_block,
            sym.etwp_debugger_data,
            sym.ps_active_process_head,
            sym.ps_loaded_module_list,
            sym.nt_build_lab,
            sym.mm_pfn_database,
            sym.ki_processor_block,
            sym.kdp_debugger_data_list_head,
        ] {
            assert!((data_rva..data_end).contains(&rva), "symbol outside .data");
        }
        let timestamp = if x64 { 0x0D83_33E6 } else { 0x5B1A_7C3D };
        let mut img = KernelImage {
            base: cfg.kernel_base,
            size_of_image,
            timestamp,
            sections,
            sym,
            debug_dir_rva: rdata_rva + 0x37A0,
            debug_dir_size: 3 * 28,
            rsds_rva: 0,
            rsds_len: 0,
            pages: BTreeMap::new(),
        };
        img.build_debug_directory(cfg);
        img.build_headers(cfg);
        img
    }

    /// The fixture's image loaded at `cfg.kernel_base` (every page of the headers and sections,
    /// relocated) with the kernel variables at the fixture's public RVAs; the variables the
    /// fixture lacks (KdpDebuggerDataListHead, MmPfnDatabase, CmNtCSDVersion) go into the slack
    /// after .data's VirtualSize (see `Fixture::extras`).
    pub(crate) fn from_fixture(cfg: &Config, fx: &Fixture) -> Self {
        let extras = fx.extras().expect("checked by Config::validate");
        let rva = |name: &str| fx.symbol(name).expect("required public (checked by load)");
        let sym = Symbols {
            kd_debugger_data_block: rva("KdDebuggerDataBlock"),
            etwp_debugger_data: rva("EtwpDebuggerData"),
            ps_active_process_head: rva("PsActiveProcessHead"),
            ps_loaded_module_list: rva("PsLoadedModuleList"),
            nt_build_lab: rva("NtBuildLabEx"),
            mm_pfn_database: extras.mm_pfn_database,
            ki_processor_block: rva("KiProcessorBlock"),
            kdp_debugger_data_list_head: extras.kdp_debugger_data_list_head,
            kd_version_block: Some(rva("KdVersionBlock")),
            ke_number_processors: Some(rva("KeNumberProcessors")),
            cm_nt_csd_version: Some(extras.cm_nt_csd_version),
        };
        let sections = fx
            .sections
            .iter()
            .map(|s| Section {
                name: s.name.clone(),
                rva: s.rva,
                vsize: s.virtual_size,
                raw_ptr: s.raw_offset,
                raw_size: s.raw_size,
                chars: s.characteristics,
            })
            .collect();
        KernelImage {
            base: cfg.kernel_base,
            size_of_image: fx.size_of_image,
            timestamp: fx.timestamp,
            sections,
            sym,
            debug_dir_rva: fx.debug_dir.0,
            debug_dir_size: fx.debug_dir.1,
            rsds_rva: fx.rsds_rva,
            rsds_len: fx.rsds_len,
            pages: fx.mapped_pages(cfg.kernel_base),
        }
    }

    /// Debug directory (3 entries, REPRO first, then CodeView, then POGO) followed by the
    /// RSDS, REPRO and POGO data, all in one .rdata page (not the header page).
    fn build_debug_directory(&mut self, cfg: &Config) {
        let dir = self.debug_dir_rva;
        let rsds_rva = dir + self.debug_dir_size;
        let mut rsds = Vec::new();
        rsds.extend_from_slice(b"RSDS");
        rsds.extend_from_slice(&cfg.pdb_guid);
        rsds.extend_from_slice(&cfg.pdb_age.to_le_bytes());
        rsds.extend_from_slice(cfg.pdb_name.as_bytes());
        rsds.push(0);
        let repro_rva = align_up((rsds_rva as usize + rsds.len()) as u64, 4) as u32;
        // REPRO data: u32 hash length + hash (here: GUID bytes and 16 more bytes).
        let mut repro = Vec::new();
        repro.extend_from_slice(&32u32.to_le_bytes());
        repro.extend_from_slice(&cfg.pdb_guid);
        repro.extend_from_slice(&self.timestamp.to_le_bytes());
        repro.extend_from_slice(&[0x5A, 0x3C, 0xE1, 0x07, 0x9B, 0x44, 0x2D, 0x81]);
        repro.extend_from_slice(&cfg.pdb_age.to_le_bytes());
        let pogo_rva = align_up((repro_rva as usize + repro.len()) as u64, 4) as u32;
        // POGO data: 'LTCG' then {u32 rva, u32 size, NUL-terminated name padded to 4}.
        let mut pogo = Vec::new();
        pogo.extend_from_slice(b"LTCG");
        let text_rva = self.section(".text").rva;
        let data_rva = self.section(".data").rva;
        for (rva, size, name) in [
            (text_rva, 0x1_2A40u32, ".text$lp00ntoskrnl.exe!20_pri7"),
            (text_rva + 0x1_2A40, 0x3E_0B10, ".text$mn"),
            (data_rva, 0x1_0C00, ".data"),
        ] {
            pogo.extend_from_slice(&rva.to_le_bytes());
            pogo.extend_from_slice(&size.to_le_bytes());
            let mut n = name.as_bytes().to_vec();
            n.push(0);
            while n.len() % 4 != 0 {
                n.push(0);
            }
            pogo.extend_from_slice(&n);
        }
        let entries = [
            (IMAGE_DEBUG_TYPE_REPRO, repro_rva, repro.len()),
            (IMAGE_DEBUG_TYPE_CODEVIEW, rsds_rva, rsds.len()),
            (IMAGE_DEBUG_TYPE_POGO, pogo_rva, pogo.len()),
        ];
        let mut d = vec![0u8; entries.len() * 28];
        for (i, &(ty, rva, len)) in entries.iter().enumerate() {
            let o = i * 28;
            put_u32(&mut d, o, 0); // Characteristics
            put_u32(&mut d, o + 4, self.timestamp);
            put_u16(&mut d, o + 8, 0); // MajorVersion
            put_u16(&mut d, o + 10, 0); // MinorVersion
            put_u32(&mut d, o + 12, ty);
            put_u32(&mut d, o + 16, len as u32); // SizeOfData
            put_u32(&mut d, o + 20, rva); // AddressOfRawData: an RVA
            put_u32(&mut d, o + 24, self.file_offset(rva)); // PointerToRawData: file offset
        }
        assert!(
            (pogo_rva as usize + pogo.len()) as u32 <= (dir & !0xFFF) + 0x1000,
            "debug data must stay in one page"
        );
        self.write(dir, &d);
        self.write(rsds_rva, &rsds);
        self.write(repro_rva, &repro);
        self.write(pogo_rva, &pogo);
        self.rsds_rva = rsds_rva;
        self.rsds_len = rsds.len() as u32;
    }

    /// DOS header + stub, PE signature, COFF header, optional header (PE32+ or PE32) with 16
    /// data directories, and the section table.
    fn build_headers(&mut self, cfg: &Config) {
        let x64 = cfg.arch == Arch::X64;
        let mut h = vec![0u8; PAGE_SIZE as usize];
        // IMAGE_DOS_HEADER
        put_bytes(&mut h, 0, b"MZ");
        put_u16(&mut h, 0x02, 0x90); // e_cblp
        put_u16(&mut h, 0x04, 3); // e_cp
        put_u16(&mut h, 0x08, 4); // e_cparhdr
        put_u16(&mut h, 0x0C, 0xFFFF); // e_maxalloc
        put_u16(&mut h, 0x10, 0xB8); // e_sp
        put_u16(&mut h, 0x18, 0x40); // e_lfarlc
        put_u32(&mut h, 0x3C, E_LFANEW);
        let stub: &[u8] = &[
            0x0E, 0x1F, 0xBA, 0x0E, 0x00, 0xB4, 0x09, 0xCD, 0x21, 0xB8, 0x01, 0x4C, 0xCD, 0x21,
        ];
        put_bytes(&mut h, 0x40, stub);
        put_bytes(
            &mut h,
            0x4E,
            b"This program cannot be run in DOS mode.\r\r\n$",
        );

        let pe = E_LFANEW as usize;
        put_bytes(&mut h, pe, b"PE\0\0");
        let coff = pe + 4;
        let opt_size: u16 = if x64 { 0xF0 } else { 0xE0 };
        put_u16(&mut h, coff, if x64 { 0x8664 } else { 0x014C });
        put_u16(&mut h, coff + 2, self.sections.len() as u16);
        put_u32(&mut h, coff + 4, self.timestamp);
        put_u32(&mut h, coff + 8, 0); // PointerToSymbolTable
        put_u32(&mut h, coff + 12, 0); // NumberOfSymbols
        put_u16(&mut h, coff + 16, opt_size);
        // x64: EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE; x86: EXECUTABLE_IMAGE | 32BIT_MACHINE.
        put_u16(&mut h, coff + 18, if x64 { 0x0022 } else { 0x0102 });

        let opt = coff + 20;
        let size_of = |pred: &dyn Fn(&Section) -> bool| -> u32 {
            self.sections
                .iter()
                .filter(|s| pred(s))
                .map(|s| s.raw_size)
                .sum()
        };
        let size_of_code = size_of(&|s| s.chars & IMAGE_SCN_CNT_CODE != 0);
        let size_of_idata = size_of(&|s| s.chars & IMAGE_SCN_CNT_INITIALIZED_DATA != 0);
        let init = self.section("INIT");
        let entry = init.rva + 0x4_E010;
        put_u16(&mut h, opt, if x64 { 0x20B } else { 0x10B });
        h[opt + 2] = 14; // MajorLinkerVersion
        h[opt + 3] = 20; // MinorLinkerVersion
        put_u32(&mut h, opt + 4, size_of_code);
        put_u32(&mut h, opt + 8, size_of_idata);
        put_u32(&mut h, opt + 12, 0); // SizeOfUninitializedData
        put_u32(&mut h, opt + 16, entry); // AddressOfEntryPoint (KiSystemStartup in INIT)
        put_u32(&mut h, opt + 20, self.section(".text").rva); // BaseOfCode
        if x64 {
            put_u64(&mut h, opt + 24, self.base); // ImageBase
        } else {
            put_u32(&mut h, opt + 24, self.section(".rdata").rva); // BaseOfData
            put_u32(&mut h, opt + 28, self.base as u32); // ImageBase
        }
        put_u32(&mut h, opt + 32, SECTION_ALIGNMENT);
        put_u32(&mut h, opt + 36, FILE_ALIGNMENT);
        put_u16(&mut h, opt + 40, 10); // MajorOperatingSystemVersion
        put_u16(&mut h, opt + 42, 0);
        put_u16(&mut h, opt + 44, 10); // MajorImageVersion
        put_u16(&mut h, opt + 46, 0);
        put_u16(&mut h, opt + 48, 10); // MajorSubsystemVersion
        put_u16(&mut h, opt + 50, 0);
        put_u32(&mut h, opt + 52, 0); // Win32VersionValue
        put_u32(&mut h, opt + 56, self.size_of_image);
        put_u32(&mut h, opt + 60, SIZE_OF_HEADERS);
        let checksum = if x64 { 0x00A4_B5C3 } else { 0x0072_1E6F };
        put_u32(&mut h, opt + 64, checksum);
        put_u16(&mut h, opt + 68, 1); // Subsystem NATIVE
                                      // DllCharacteristics: GUARD_CF | NX_COMPAT | DYNAMIC_BASE (| HIGH_ENTROPY_VA on x64).
        put_u16(&mut h, opt + 70, if x64 { 0x4160 } else { 0x4140 });
        let dirs_at = if x64 {
            put_u64(&mut h, opt + 72, 0x8_0000); // SizeOfStackReserve
            put_u64(&mut h, opt + 80, 0x1000); // SizeOfStackCommit
            put_u64(&mut h, opt + 88, 0x10_0000); // SizeOfHeapReserve
            put_u64(&mut h, opt + 96, 0x1000); // SizeOfHeapCommit
            put_u32(&mut h, opt + 104, 0); // LoaderFlags
            put_u32(&mut h, opt + 108, 16); // NumberOfRvaAndSizes
            opt + 112
        } else {
            put_u32(&mut h, opt + 72, 0x4_0000);
            put_u32(&mut h, opt + 76, 0x1000);
            put_u32(&mut h, opt + 80, 0x10_0000);
            put_u32(&mut h, opt + 84, 0x1000);
            put_u32(&mut h, opt + 88, 0);
            put_u32(&mut h, opt + 92, 16);
            opt + 96
        };
        assert_eq!(dirs_at + 16 * 8, opt + opt_size as usize);
        // Data directories (plausible values; only DEBUG's target is mapped).
        let rdata = self.section(".rdata").rva;
        let rsrc = self.section(".rsrc");
        let reloc = self.section(".reloc");
        let mut dirs: [(u32, u32); 16] = [(0, 0); 16];
        dirs[0] = (rdata + 0x1_1000, 0x1_5F2A); // EXPORT
        dirs[1] = (rdata + 0x4_8A20, 0x1E0); // IMPORT
        dirs[2] = (rsrc.rva, rsrc.vsize); // RESOURCE
        if x64 {
            let pdata = self.section(".pdata");
            dirs[3] = (pdata.rva, pdata.vsize); // EXCEPTION
        }
        // SECURITY holds a file offset (certificate table after the last section).
        dirs[4] = (reloc.raw_ptr + reloc.raw_size, 0x2_1F18);
        dirs[5] = (reloc.rva, reloc.vsize); // BASERELOC
        dirs[6] = (self.debug_dir_rva, self.debug_dir_size); // DEBUG
        dirs[10] = (rdata + 0x2_2C30, if x64 { 0x118 } else { 0xBC }); // LOAD_CONFIG
        dirs[12] = (rdata, 0x6C8); // IAT
        for (i, (rva, size)) in dirs.iter().enumerate() {
            put_u32(&mut h, dirs_at + i * 8, *rva);
            put_u32(&mut h, dirs_at + i * 8 + 4, *size);
        }
        // Section table.
        let sec_at = opt + opt_size as usize;
        for (i, s) in self.sections.iter().enumerate() {
            let o = sec_at + i * 40;
            let mut name = [0u8; 8];
            name[..s.name.len()].copy_from_slice(s.name.as_bytes());
            put_bytes(&mut h, o, &name);
            put_u32(&mut h, o + 8, s.vsize);
            put_u32(&mut h, o + 12, s.rva);
            put_u32(&mut h, o + 16, s.raw_size);
            put_u32(&mut h, o + 20, s.raw_ptr);
            put_u32(&mut h, o + 36, s.chars);
        }
        assert!(sec_at + self.sections.len() * 40 <= SIZE_OF_HEADERS as usize);
        self.write(0, &h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::{get_u32, get_u64};

    #[test]
    fn x64_layout_matches_real_kernel_size() {
        let img = KernelImage::new(&Config::x64());
        assert_eq!(img.size_of_image, 0x104_6000);
        assert_eq!(img.section(".data").rva, 0xC0_0000);
        let data = img.section(".data");
        for rva in [img.sym.kd_debugger_data_block, img.sym.ki_processor_block] {
            assert!(rva >= data.rva && rva < data.rva + data.vsize);
        }
    }

    #[test]
    fn debug_directory_points_to_rsds_by_rva_not_file_offset() {
        for cfg in [Config::x64(), Config::x86_pae()] {
            let img = KernelImage::new(&cfg);
            let hdr = &img.pages[&0];
            let lfanew = get_u32(hdr, 0x3C) as usize;
            let opt = lfanew + 24;
            let dirs = opt + if cfg.arch.is_x64() { 112 } else { 96 };
            let dbg_rva = get_u32(hdr, dirs + 6 * 8);
            assert_ne!(
                dbg_rva & !0xFFF,
                0,
                "debug directory not on the header page"
            );
            let page = &img.pages[&(dbg_rva & !0xFFF)];
            let e1 = (dbg_rva & 0xFFF) as usize + 28;
            assert_eq!(get_u32(page, e1 + 12), 2);
            let rva = get_u32(page, e1 + 20);
            let ptr = get_u32(page, e1 + 24);
            assert_ne!(rva, ptr);
            assert_eq!(&page[(rva & 0xFFF) as usize..][..4], b"RSDS");
            if cfg.arch.is_x64() {
                assert_eq!(get_u64(hdr, opt + 24), cfg.kernel_base);
            }
        }
    }
}
