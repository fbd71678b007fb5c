//! Puts it all together: physical memory, page tables, kernel image, kernel objects, probes,
//! file layout and header.

use crate::config::{Arch, Config};
use crate::dump::header::{self, HeaderInfo};
use crate::dump::layout::{self, FileImage};
use crate::dump::paging::{Leaf, Pager, VirtMap};
use crate::dump::phys::PhysMem;
use crate::dump::probes::{self, ProbeArea, ProbeSpec};
use crate::dump::user_space::{self, UserSpace};
use crate::etw::EtwPage;
use crate::kernel::objects::{self, ModuleListPlan};
use crate::kernel::pe::{KernelImage, PageProt};
use crate::util::PAGE_SIZE;
use crate::{Expect, Forged, Probe};

/// Fixed virtual addresses of the forged machine.
struct VaPlan {
    kuser: u64,
    kuser_user: u64,
    pool_entries: u64,
    pool_names: u64,
    probe_base: u64,
    huge_va: Option<u64>,
    pfn_database: u64,
}

const KUSER_USER_VA: u64 = 0x7FFE_0000;

impl VaPlan {
    fn for_arch(arch: Arch) -> Self {
        match arch {
            Arch::X64 => VaPlan {
                kuser: 0xFFFF_F780_0000_0000,
                kuser_user: KUSER_USER_VA,
                pool_entries: 0xFFFF_A08D_4F2C_1000,
                pool_names: 0xFFFF_A08D_4F37_A000,
                probe_base: 0xFFFF_A08D_5E00_0000,
                huge_va: Some(0xFFFF_A08E_0000_0000),
                pfn_database: 0xFFFF_E300_0000_0000,
            },
            Arch::X86Pae | Arch::X86NonPae => VaPlan {
                kuser: 0xFFDF_0000,
                kuser_user: KUSER_USER_VA,
                pool_entries: 0x86A3_E000,
                pool_names: 0x86A7_1000,
                probe_base: 0x8C00_0000,
                huge_va: None,
                pfn_database: 0x8420_0000,
            },
        }
    }
}

/// Root page-table page: 0x1AD on x64 (the DTB of the real dump D1), 0x185 on x86.
const X64_PML4_PFN: u64 = 0x1AD;
const X86_ROOT_PFN: u64 = 0x185;
/// The PAE PDPT sits at this offset inside its page (32-byte aligned, not page aligned).
const PAE_PDPT_OFFSET: u64 = 0x1A0;
/// Stored filler pages nobody references.
const FILLER_PAGES: usize = 3;

pub(crate) fn build(cfg: &Config) -> Forged {
    cfg.validate();
    let arch = cfg.arch;
    let plan = VaPlan::for_arch(arch);
    let (mut m, dtb, large_block_pfn) = memory(cfg);

    // Kernel image (hand-made or a fixture's) and the variables in its .data.
    let mut img = match &cfg.fixture {
        Some(fx) => KernelImage::from_fixture(cfg, fx),
        None => KernelImage::new(cfg),
    };
    let prcbs = objects::kprcb_addresses(cfg, &img);
    let nt_build_lab =
        objects::write_data_variables(cfg, &mut img, plan.pfn_database, &prcbs, m.pm.rng());
    let modules = objects::modules(cfg, &img);
    let ml_plan = ModuleListPlan {
        entries_page: plan.pool_entries,
        names_page: plan.pool_names,
    };
    let (entries_page, names_page, entry_vas) =
        objects::module_list_pages(cfg, &img, &ml_plan, &modules);
    objects::write_module_list_head(cfg, &mut img, &entry_vas);
    // Process list (`processes` only; rewrites PsActiveProcessHead, allocates nothing otherwise).
    let proc_build = cfg
        .processes
        .then(|| crate::kernel::processes::build(cfg, &mut img));
    // ETW logger state (fixture configs with `etw` only; nothing is drawn from the RNG or
    // allocated otherwise, so other dumps stay byte-identical).
    let mut etw_build = cfg.etw.as_ref().map(|spec| {
        let procs = proc_build
            .as_ref()
            .map_or(&[][..], |p| p.expected.as_slice());
        crate::etw::build(cfg, spec, &mut img, &prcbs, procs, m.pm.rng())
    });

    let unstored: &[u32] = etw_build
        .as_ref()
        .map_or(&[], |e| e.unstored_image_pages.as_slice());
    m.map_image(cfg, &img, unstored);
    m.map_kuser(cfg, &plan);
    // Pool pages of the module list.
    m.map_stored(plan.pool_entries, &entries_page, Leaf::KernelData);
    m.map_stored(plan.pool_names, &names_page, Leaf::KernelData);

    // Fixture kernels with a known sizeof(_KPRCB): map each CPU's KPCR/KPRCB pages
    // (zero-filled but for the ETW and CurrentThread writes).
    let kprcb_size = cfg.fixture.as_ref().and_then(|fx| fx.kprcb_size);
    // KPRCB.CurrentThread (processes only).
    let (thread_writes, current_threads) = match (&proc_build, kprcb_size) {
        (Some(pb), Some(_)) => crate::kernel::processes::current_threads(cfg, &prcbs, &pb.expected),
        _ => (Vec::new(), Vec::new()),
    };
    if let Some(size) = kprcb_size {
        // ETW writes into the KPRCB (EtwSupport, MHz).
        let etw_writes = etw_build.iter().flat_map(|e| &e.kprcb_writes);
        let writes: Vec<&(u64, Vec<u8>)> = etw_writes.chain(&thread_writes).collect();
        m.map_kprcbs(&prcbs, size, &writes);
    }
    if let Some(eb) = &etw_build {
        m.map_etw_pages(&eb.pages);
    }
    // Scan scenarios (opt-in): stopped sessions' pages, copies, decoys, by physical address.
    let scan = etw_build
        .as_mut()
        .and_then(|e| e.scan.take())
        .map(|s| crate::etw::scan::place::place(s, &mut m.pm, &m.pager, &mut m.vmap));
    // Process pool pages.
    for (va, content) in proc_build.iter().flat_map(|p| &p.pages) {
        m.map_stored(*va, content, Leaf::KernelData);
    }

    // The self-map makes one page-table page visible at a fixed VA.
    let (sm_va, sm_pa) = m.pager.self_map_page;
    m.vmap.insert(sm_va, PAGE_SIZE, sm_pa);

    // Paging probes, then probes on kernel objects.
    let area = ProbeArea {
        base: plan.probe_base,
        huge_va: plan.huge_va,
        large_block_pfn,
    };
    let mut specs = probes::build(&mut m.pm, &m.pager, &mut m.vmap, &area);
    let ko = KernelObjects {
        img: &img,
        plan: &plan,
        prcbs: &prcbs,
        entry_vas: &entry_vas,
        nt_build_lab: &nt_build_lab,
        self_map_va: sm_va,
        kprcb_mapped: kprcb_size.is_some(),
    };
    object_probes(cfg, &ko, &mut specs);
    if let Some(eb) = &etw_build {
        specs.extend(eb.probes.iter().cloned());
    }

    // Filler pages (stored, unreferenced) so that "used" != "stored".
    for _ in 0..FILLER_PAGES {
        m.pm.add_random_page();
    }
    // Tampered objects and the processes' own address spaces (realtime buffers, user images),
    // mapped last.
    let procs = proc_build.map(|p| p.expected).unwrap_or_default();
    let (etw, processes, user_spaces, ntdll) = m.map_last(cfg, etw_build, procs, &current_threads);
    let Mapper { pm, vmap, pager } = m;
    let (file, placement, info) = file_image(cfg, &pm, &img, dtb);
    let probes = resolve_probes(specs, &vmap, &pm);

    Forged {
        config: cfg.clone(),
        dtb,
        kdbg_va: info.kdbg_va,
        kuser_va: plan.kuser,
        ps_loaded_module_list: info.ps_loaded_module_list,
        ps_active_process_head: info.ps_active_process_head,
        pfn_database: info.pfn_database,
        nt_build_lab,
        modules,
        probes,
        stored_pages: placement.stored_pages,
        runs: pm.runs.clone(),
        header_size: arch.header_size(),
        first_page_offset: placement.first_page_offset,
        kuser_user_va: plan.kuser_user,
        nt_build_lab_va: img.va(img.sym.nt_build_lab),
        debug_directory_va: img.va(img.debug_dir_rva),
        rsds_va: img.va(img.rsds_rva),
        ldr_entries: entry_vas,
        ki_processor_block: img.va(img.sym.ki_processor_block),
        etwp_debugger_data: img.va(img.sym.etwp_debugger_data),
        mm_pfn_database_value: plan.pfn_database,
        symbols: symbols(cfg, &img),
        kprcbs: prcbs,
        kprcb_size,
        etw,
        processes,
        current_threads,
        scan,
        ntdll,
        file,
        page_table_root: pager.root,
        pm,
        vmap,
        user_spaces,
    }
}

/// The probes with their expectations, from the forge's record of what it mapped.
fn resolve_probes(specs: Vec<ProbeSpec>, vmap: &VirtMap, pm: &PhysMem) -> Vec<Probe> {
    specs
        .into_iter()
        .map(|(name, va, len): ProbeSpec| {
            let expect = match vmap.read(pm, va, len) {
                Ok(bytes) => Expect::Bytes(bytes),
                Err(first) => Expect::Unreadable {
                    first_unreadable_va: first,
                },
            };
            Probe {
                name,
                va,
                len,
                expect,
            }
        })
        .collect()
}

/// Physical memory, page tables and the VA -> PA record of what the forge mapped.
struct Mapper {
    pm: PhysMem,
    pager: Pager,
    vmap: VirtMap,
}

impl Mapper {
    /// Map `va` to `pfn` (stored or not).
    fn map_pfn(&mut self, va: u64, pfn: u64, kind: Leaf) {
        let mode = self.pager.mode;
        self.pager.set_pte(&mut self.pm, va, mode.leaf(pfn, kind));
        self.vmap.insert(va, PAGE_SIZE, pfn << 12);
    }

    /// A new stored page with `content`, mapped at `va`.
    fn map_stored(&mut self, va: u64, content: &[u8], kind: Leaf) {
        let pfn = self.pm.alloc();
        self.pm.set_page(pfn, content);
        self.map_pfn(va, pfn, kind);
    }

    /// The image pages the forge wrote; all other image pages have PTE 0. The debug-directory
    /// page (`omit_debug_directory_page`) and `unstored` pages are mapped but not stored.
    fn map_image(&mut self, cfg: &Config, img: &KernelImage, unstored: &[u32]) {
        let debug_page = img.debug_dir_rva & !0xFFF;
        for (&rva, content) in &img.pages {
            let va = img.va(rva);
            let kind = match img.page_prot(rva) {
                PageProt::ReadWrite => Leaf::KernelData,
                PageProt::ReadOnly => Leaf::KernelReadOnly,
            };
            if (rva == debug_page && cfg.omit_debug_directory_page) || unstored.contains(&rva) {
                let pfn = self.pm.alloc_unstored();
                self.map_pfn(va, pfn, kind);
            } else {
                self.map_stored(va, content, kind);
            }
        }
    }

    /// KUSER_SHARED_DATA, one physical page at both VAs.
    fn map_kuser(&mut self, cfg: &Config, plan: &VaPlan) {
        let run_pages: u64 = self.pm.runs.iter().map(|r| r.1).sum();
        let kuser_pfn = self.pm.alloc();
        self.pm
            .set_page(kuser_pfn, &objects::kuser_shared_data(cfg, run_pages));
        self.map_pfn(plan.kuser, kuser_pfn, Leaf::KernelData);
        self.map_pfn(plan.kuser_user, kuser_pfn, Leaf::UserReadOnly);
    }

    /// Each CPU's pages from its KPCR's page to the end of its KPRCB, zero but for `writes`
    /// (va, bytes) that fit in one page.
    fn map_kprcbs(&mut self, prcbs: &[u64], size: u32, writes: &[&(u64, Vec<u8>)]) {
        for &prcb in prcbs {
            let first = prcb & !0xFFF;
            let end = crate::util::align_up(prcb + u64::from(size), PAGE_SIZE);
            for va in (first..end).step_by(PAGE_SIZE as usize) {
                let mut content = vec![0u8; PAGE_SIZE as usize];
                for (wva, bytes) in writes.iter().map(|w| (&w.0, &w.1)) {
                    if *wva >= va && *wva + bytes.len() as u64 <= va + PAGE_SIZE {
                        let o = (*wva - va) as usize;
                        content[o..o + bytes.len()].copy_from_slice(bytes);
                    }
                }
                self.map_stored(va, &content, Leaf::KernelData);
            }
        }
    }

    /// What is mapped after every other page, in this order: the realtime consumers' bitmaps'
    /// pool page (EtwSpec::with_realtime_buffers), the shared image frames of the user images
    /// (Config::with_user_images), the processes' own address spaces (`dump/user_space.rs`:
    /// each process's PML4 with its kernel half copied from the kernel PML4, its realtime and
    /// image pages), the tampered objects (EtwSpec::with_tampering) and last the
    /// `etw-write-patch` private copies; so that a tampered dump keeps every other page at its
    /// clean twin's physical address and reads like it but where the finding says. Nothing is
    /// allocated without those options. (The tampered objects' pool lies in a PML4 slot the
    /// kernel half already holds, so the process PML4s see them too.) Returns the ETW
    /// expectations (current threads, consumer DTBs and write-patch findings filled in), the
    /// processes (DTBs filled in), the address spaces and the user images' expectations.
    fn map_last(
        &mut self,
        cfg: &Config,
        etw_build: Option<crate::etw::EtwBuild>,
        mut processes: Vec<crate::ExpectedProcess>,
        current_threads: &[(u64, u64)],
    ) -> (
        Option<crate::etw::ForgedEtw>,
        Vec<crate::ExpectedProcess>,
        Vec<UserSpace>,
        Option<crate::ExpectedNtdll>,
    ) {
        let mut rt_specs = Vec::new();
        let mut late_pages = Vec::new();
        let mut etw = None;
        if let Some(mut eb) = etw_build {
            late_pages = std::mem::take(&mut eb.late_pages);
            if let Some(rt) = eb.realtime.take() {
                self.map_etw_pages(&rt.kernel_pages);
                rt_specs = rt.spaces;
            }
            etw = Some(eb.expected);
        }
        let mut images = cfg
            .user_images
            .then(|| crate::kernel::user_images::build(cfg, &processes, &mut self.pm));
        let (img_specs, late) = match images.as_mut() {
            Some(b) => (std::mem::take(&mut b.specs), std::mem::take(&mut b.late)),
            None => (Vec::new(), Vec::new()),
        };
        let specs = user_space::merge(rt_specs, img_specs);
        let kuser = (KUSER_USER_VA, self.vmap.translate(KUSER_USER_VA));
        let mut spaces = user_space::build(
            specs,
            cfg.self_map_index,
            &mut self.pm,
            &self.pager,
            &self.vmap,
            kuser,
        );
        self.map_etw_pages(&late_pages);
        user_space::apply_late(&mut spaces, late, &mut self.pm);
        let ntdll = images.map(|b| {
            let (n, findings) =
                crate::kernel::user_images::finish(b, &spaces, &self.vmap, &self.pm);
            if let Some(e) = etw.as_mut() {
                e.findings.extend(findings);
            }
            n
        });
        match etw.as_mut() {
            Some(e) => {
                crate::etw::variation::fill_current_threads(e, current_threads);
                crate::etw::realtime::fill_dtbs(e, &mut processes, &spaces);
            }
            None => user_space::fill_process_dtbs(&mut processes, &spaces),
        }
        (etw, processes, spaces, ntdll)
    }

    /// ETW pool pages: stored, mapped but not in the dump, or a page table with a zero PTE.
    fn map_etw_pages(&mut self, pages: &[EtwPage]) {
        for page in pages {
            match page {
                EtwPage::Stored(va, content) => self.map_stored(*va, content, Leaf::KernelData),
                EtwPage::NotInDump(va) => {
                    let pfn = self.pm.alloc_unstored();
                    self.map_pfn(*va, pfn, Leaf::KernelData);
                }
                EtwPage::ZeroPte(va) => self.pager.ensure_pt(&mut self.pm, *va),
            }
        }
    }
}

/// Physical memory with the root table first, then the large-page block, then everything
/// else at random PFNs; the header's DTB; the large-page block's first PFN.
fn memory(cfg: &Config) -> (Mapper, u64, u64) {
    let arch = cfg.arch;
    let total_pfns = cfg.physical_memory_bytes / PAGE_SIZE;
    let alloc_limit = if arch == Arch::X86NonPae {
        0x10_0000 // 4 GiB: non-PAE entries hold 20-bit PFNs
    } else {
        u64::MAX
    };
    let seed = 0xE7D0_F0A6_0000_0000
        ^ ((arch as u64) << 8)
        ^ u64::from(cfg.layout.is_bitmap())
        ^ (total_pfns << 16);
    let mut pm = PhysMem::new(total_pfns, cfg.layout.is_bitmap(), alloc_limit, seed);
    let root_pfn = pm.claim(if arch.is_x64() {
        X64_PML4_PFN
    } else {
        X86_ROOT_PFN
    });
    let usable = total_pfns.min(alloc_limit);
    let pde_pages = if arch == Arch::X86NonPae {
        0x400
    } else {
        0x200
    };
    let large_block_pfn = pm.reserve_aligned_block(pde_pages, usable * 3 / 8);
    let (pager, dtb) = match arch {
        Arch::X64 => {
            let p = Pager::new_x64(&mut pm, root_pfn, cfg.self_map_index);
            let dtb = p.root | cfg.dtb_low_bits;
            (p, dtb)
        }
        Arch::X86Pae => {
            let p = Pager::new_pae(&mut pm, root_pfn, PAE_PDPT_OFFSET);
            let dtb = p.root;
            (p, dtb)
        }
        Arch::X86NonPae => {
            let p = Pager::new_nonpae(&mut pm, root_pfn);
            let dtb = p.root;
            (p, dtb)
        }
    };
    let m = Mapper {
        pm,
        pager,
        vmap: VirtMap::default(),
    };
    (m, dtb, large_block_pfn)
}

/// What the probes on kernel objects are placed from.
struct KernelObjects<'a> {
    img: &'a KernelImage,
    plan: &'a VaPlan,
    prcbs: &'a [u64],
    entry_vas: &'a [u64],
    nt_build_lab: &'a str,
    self_map_va: u64,
    kprcb_mapped: bool,
}

/// Probes on the kernel image, KDBG, the lists, KUSER_SHARED_DATA and the self-map; with a
/// fixture also on its variables.
fn object_probes(cfg: &Config, ko: &KernelObjects, specs: &mut Vec<ProbeSpec>) {
    let (arch, img, plan) = (cfg.arch, ko.img, ko.plan);
    let p = arch.ptr_size();
    let kdbg_va = img.va(img.sym.kd_debugger_data_block);
    // Self-map probe: PML4[self_map_index] (x64, 0x1ED by default), PD3[0..3] (PAE),
    // PD[0x300..] (non-PAE).
    let sm_entry_off = match arch {
        Arch::X64 => cfg.self_map_index * 8,
        Arch::X86Pae => 0,
        Arch::X86NonPae => 0x300 * 4,
    };
    let mut add = |name: &str, va: u64, len: usize| specs.push((name.to_string(), va, len));
    add("kernel_mz_header", cfg.kernel_base, 64);
    add("kernel_pe_header_page", cfg.kernel_base, PAGE_SIZE as usize);
    // Hand-made kernel: a .text page with PTE 0. Fixture kernels map every image page, so the
    // page after SizeOfImage (same page table, PTE 0) is used.
    let unmapped_image_va = match &cfg.fixture {
        None => cfg.kernel_base + 0x1000 + 0x40,
        Some(_) => {
            cfg.kernel_base + crate::util::align_up(img.size_of_image.into(), PAGE_SIZE) + 0x40
        }
    };
    add("kernel_image_unmapped_page", unmapped_image_va, 0x10);
    add("kdbg", kdbg_va, 0x20);
    add(
        "kdbg_block",
        kdbg_va,
        objects::kdbg_size(cfg.build) as usize,
    );
    add(
        "debug_directory",
        img.va(img.debug_dir_rva),
        img.debug_dir_size as usize,
    );
    add("rsds_record", img.va(img.rsds_rva), img.rsds_len as usize);
    add(
        "nt_build_lab",
        img.va(img.sym.nt_build_lab),
        ko.nt_build_lab.len() + 1,
    );
    add(
        "ps_loaded_module_list_head",
        img.va(img.sym.ps_loaded_module_list),
        2 * p,
    );
    add(
        "ps_active_process_head",
        img.va(img.sym.ps_active_process_head),
        2 * p,
    );
    add(
        "ldr_entry_ntoskrnl",
        ko.entry_vas[0],
        if arch.is_x64() { 0xA0 } else { 0x3C },
    );
    add("kuser_shared_data", plan.kuser, 0x40);
    add("kuser_nt_version", plan.kuser + 0x260, 0x14);
    add("kuser_user_alias", plan.kuser_user + 0x260, 0x14);
    add(
        "page_table_via_self_map",
        ko.self_map_va + sm_entry_off,
        0x20,
    );
    if let Some(fx) = &cfg.fixture {
        fixture_probes(fx, ko, p, &mut add);
    }
}

/// Probes on a fixture kernel's variables.
fn fixture_probes(
    fx: &crate::kernel::fixture::Fixture,
    ko: &KernelObjects,
    p: usize,
    add: &mut impl FnMut(&str, u64, usize),
) {
    let (img, sym) = (ko.img, ko.img.sym);
    if let Some(rva) = sym.kd_version_block {
        add("kd_version_block", img.va(rva), 0x28);
    }
    if let Some(rva) = sym.ke_number_processors {
        add("ke_number_processors", img.va(rva), 4);
    }
    add(
        "ki_processor_block",
        img.va(sym.ki_processor_block),
        p * ko.prcbs.len(),
    );
    add("etwp_debugger_data", img.va(sym.etwp_debugger_data), 0x20);
    add("mm_pfn_database_variable", img.va(sym.mm_pfn_database), p);
    for (probe, public, len) in [
        ("etwp_host_silo_state", "EtwpHostSiloState", p),
        ("psp_host_silo_globals", "PspHostSiloGlobals", 0x40),
        ("wmip_logger_context", "WmipLoggerContext", 64 * p),
    ] {
        if let Some(rva) = fx.symbol(public) {
            add(probe, img.va(rva), len);
        }
    }
    if ko.kprcb_mapped {
        add("kprcb0", ko.prcbs[0], 0x40);
    }
}

/// The file: layout, then the header (it records the file length).
fn file_image(
    cfg: &Config,
    pm: &PhysMem,
    img: &KernelImage,
    dtb: u64,
) -> (FileImage, layout::Placement, HeaderInfo) {
    let arch = cfg.arch;
    let header_size = arch.header_size();
    let mut placement = layout::place(cfg.layout, header_size, pm);
    let exception_address = match &cfg.fixture {
        Some(fx) => cfg.kernel_base + u64::from(fx.entry_rva),
        None => cfg.kernel_base + if arch.is_x64() { 0x3F_5A80 } else { 0x15_A2B0 },
    };
    let info = HeaderInfo {
        dtb,
        pfn_database: img.va(img.sym.mm_pfn_database),
        ps_loaded_module_list: img.va(img.sym.ps_loaded_module_list),
        ps_active_process_head: img.va(img.sym.ps_active_process_head),
        kdbg_va: img.va(img.sym.kd_debugger_data_block),
        runs: pm.runs.clone(),
        dump_type: cfg.layout.dump_type(),
        required_dump_space: placement.file_len,
        exception_address,
    };
    let mut prefix = header::build(cfg, &info);
    assert_eq!(prefix.len() as u64, header_size);
    prefix.extend_from_slice(&placement.after_header);
    let file = FileImage {
        len: placement.file_len,
        prefix,
        pages: std::mem::take(&mut placement.pages),
    };
    (file, placement, info)
}

/// name -> VA of every kernel variable placed (fixture: all its publics too).
fn symbols(cfg: &Config, img: &KernelImage) -> std::collections::BTreeMap<String, u64> {
    let mut symbols: std::collections::BTreeMap<String, u64> = img
        .sym
        .named()
        .into_iter()
        .map(|(n, rva)| (n.to_string(), img.va(rva)))
        .collect();
    if let Some(fx) = &cfg.fixture {
        for (n, &rva) in &fx.symbols {
            symbols.insert(n.clone(), img.va(rva));
        }
    }
    symbols
}
