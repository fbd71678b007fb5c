//! Puts it all together: physical memory, page tables, kernel image, kernel objects, probes,
//! file layout and header.

use crate::config::{Arch, Config};
use crate::dump::header::{self, HeaderInfo};
use crate::dump::layout::{self, FileImage};
use crate::dump::paging::{Leaf, Pager, VirtMap};
use crate::dump::phys::PhysMem;
use crate::dump::probes::{self, ProbeArea, ProbeSpec};
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
    let plan = VaPlan::for_arch(arch);

    // Root table first, then the large-page block, then everything else at random PFNs.
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
            let p = Pager::new_x64(&mut pm, root_pfn);
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
    let mode = pager.mode;
    let mut vmap = VirtMap::default();

    // Kernel image (hand-made or a fixture's) and the variables in its .data.
    let mut img = match &cfg.fixture {
        Some(fx) => KernelImage::from_fixture(cfg, fx),
        None => KernelImage::new(cfg),
    };
    let prcbs = objects::kprcb_addresses(cfg, &img);
    let nt_build_lab =
        objects::write_data_variables(cfg, &mut img, plan.pfn_database, &prcbs, pm.rng());
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
    let etw_build = cfg
        .etw
        .as_ref()
        .map(|spec| crate::etw::build(cfg, spec, &mut img, &prcbs, pm.rng()));

    // Map the image pages the forge wrote; all other image pages have PTE 0.
    let debug_page = img.debug_dir_rva & !0xFFF;
    for (&rva, content) in &img.pages {
        let va = img.va(rva);
        let kind = match img.page_prot(rva) {
            PageProt::ReadWrite => Leaf::KernelData,
            PageProt::ReadOnly => Leaf::KernelReadOnly,
        };
        let etw_unstored = etw_build
            .as_ref()
            .is_some_and(|e| e.unstored_image_pages.contains(&rva));
        let pfn = if (rva == debug_page && cfg.omit_debug_directory_page) || etw_unstored {
            pm.alloc_unstored()
        } else {
            let pfn = pm.alloc();
            pm.set_page(pfn, content);
            pfn
        };
        pager.set_pte(&mut pm, va, mode.leaf(pfn, kind));
        vmap.insert(va, PAGE_SIZE, pfn << 12);
    }

    // KUSER_SHARED_DATA, one physical page at both VAs.
    let run_pages: u64 = pm.runs.iter().map(|r| r.1).sum();
    let kuser_pfn = pm.alloc();
    pm.set_page(kuser_pfn, &objects::kuser_shared_data(cfg, run_pages));
    pager.set_pte(&mut pm, plan.kuser, mode.leaf(kuser_pfn, Leaf::KernelData));
    vmap.insert(plan.kuser, PAGE_SIZE, kuser_pfn << 12);
    pager.set_pte(
        &mut pm,
        plan.kuser_user,
        mode.leaf(kuser_pfn, Leaf::UserReadOnly),
    );
    vmap.insert(plan.kuser_user, PAGE_SIZE, kuser_pfn << 12);

    // Pool pages of the module list.
    for (va, content) in [
        (plan.pool_entries, &entries_page),
        (plan.pool_names, &names_page),
    ] {
        let pfn = pm.alloc();
        pm.set_page(pfn, content);
        pager.set_pte(&mut pm, va, mode.leaf(pfn, Leaf::KernelData));
        vmap.insert(va, PAGE_SIZE, pfn << 12);
    }

    // Fixture kernels with a known sizeof(_KPRCB): map each CPU's KPCR/KPRCB pages
    // (zero-filled, for later work to fill).
    let kprcb_size = cfg.fixture.as_ref().and_then(|fx| fx.kprcb_size);
    // KPRCB.CurrentThread (processes only).
    let (thread_writes, current_threads) = match (&proc_build, kprcb_size) {
        (Some(pb), Some(_)) => crate::kernel::processes::current_threads(cfg, &prcbs, &pb.expected),
        _ => (Vec::new(), Vec::new()),
    };
    if let Some(size) = kprcb_size {
        for &prcb in &prcbs {
            let first = prcb & !0xFFF;
            let end = crate::util::align_up(prcb + u64::from(size), PAGE_SIZE);
            for va in (first..end).step_by(PAGE_SIZE as usize) {
                let pfn = pm.alloc();
                let mut content = vec![0u8; PAGE_SIZE as usize];
                // ETW writes into the KPRCB (EtwSupport, buffers option only).
                let etw_writes = etw_build.iter().flat_map(|e| &e.kprcb_writes);
                for (wva, bytes) in etw_writes.chain(&thread_writes) {
                    if *wva >= va && *wva + bytes.len() as u64 <= va + PAGE_SIZE {
                        let o = (*wva - va) as usize;
                        content[o..o + bytes.len()].copy_from_slice(bytes);
                    }
                }
                pm.set_page(pfn, &content);
                pager.set_pte(&mut pm, va, mode.leaf(pfn, Leaf::KernelData));
                vmap.insert(va, PAGE_SIZE, pfn << 12);
            }
        }
    }

    // ETW pool pages.
    if let Some(eb) = &etw_build {
        for page in &eb.pages {
            match page {
                EtwPage::Stored(va, content) => {
                    let pfn = pm.alloc();
                    pm.set_page(pfn, content);
                    pager.set_pte(&mut pm, *va, mode.leaf(pfn, Leaf::KernelData));
                    vmap.insert(*va, PAGE_SIZE, pfn << 12);
                }
                EtwPage::NotInDump(va) => {
                    let pfn = pm.alloc_unstored();
                    pager.set_pte(&mut pm, *va, mode.leaf(pfn, Leaf::KernelData));
                    vmap.insert(*va, PAGE_SIZE, pfn << 12);
                }
                EtwPage::ZeroPte(va) => pager.ensure_pt(&mut pm, *va),
            }
        }
    }

    // Process pool pages.
    for (va, content) in proc_build.iter().flat_map(|p| &p.pages) {
        let pfn = pm.alloc();
        pm.set_page(pfn, content);
        pager.set_pte(&mut pm, *va, mode.leaf(pfn, Leaf::KernelData));
        vmap.insert(*va, PAGE_SIZE, pfn << 12);
    }

    // The self-map makes one page-table page visible at a fixed VA.
    let (sm_va, sm_pa) = pager.self_map_page;
    vmap.insert(sm_va, PAGE_SIZE, sm_pa);

    // Paging probes.
    let area = ProbeArea {
        base: plan.probe_base,
        huge_va: plan.huge_va,
        large_block_pfn,
    };
    let mut specs = probes::build(&mut pm, &pager, &mut vmap, &area);

    // Probes on kernel objects.
    let p = arch.ptr_size();
    let kdbg_va = img.va(img.sym.kd_debugger_data_block);
    let head = img.va(img.sym.ps_loaded_module_list);
    let pah = img.va(img.sym.ps_active_process_head);
    let lab_va = img.va(img.sym.nt_build_lab);
    let dir_va = img.va(img.debug_dir_rva);
    let rsds_va = img.va(img.rsds_rva);
    // Self-map probe: PML4[0x1ED] (x64), PD3[0..3] (PAE), PD[0x300..] (non-PAE).
    let sm_entry_off = match arch {
        Arch::X64 => crate::dump::paging::X64_SELF_REF_INDEX * 8,
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
    add("debug_directory", dir_va, img.debug_dir_size as usize);
    add("rsds_record", rsds_va, img.rsds_len as usize);
    add("nt_build_lab", lab_va, nt_build_lab.len() + 1);
    add("ps_loaded_module_list_head", head, 2 * p);
    add("ps_active_process_head", pah, 2 * p);
    add(
        "ldr_entry_ntoskrnl",
        entry_vas[0],
        if arch.is_x64() { 0xA0 } else { 0x3C },
    );
    add("kuser_shared_data", plan.kuser, 0x40);
    add("kuser_nt_version", plan.kuser + 0x260, 0x14);
    add("kuser_user_alias", plan.kuser_user + 0x260, 0x14);
    add("page_table_via_self_map", sm_va + sm_entry_off, 0x20);
    if let Some(fx) = &cfg.fixture {
        let sym = img.sym;
        if let Some(rva) = sym.kd_version_block {
            add("kd_version_block", img.va(rva), 0x28);
        }
        if let Some(rva) = sym.ke_number_processors {
            add("ke_number_processors", img.va(rva), 4);
        }
        add(
            "ki_processor_block",
            img.va(sym.ki_processor_block),
            p * prcbs.len(),
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
        if kprcb_size.is_some() {
            add("kprcb0", prcbs[0], 0x40);
        }
    }
    if let Some(eb) = &etw_build {
        for (name, va, len) in &eb.probes {
            add(name, *va, *len);
        }
    }

    // Filler pages (stored, unreferenced) so that "used" != "stored".
    for _ in 0..FILLER_PAGES {
        pm.add_random_page();
    }

    // File layout, then the header (it records the file length).
    let header_size = arch.header_size();
    let placement = layout::place(cfg.layout, header_size, &pm);
    let exception_address = match &cfg.fixture {
        Some(fx) => cfg.kernel_base + u64::from(fx.entry_rva),
        None => cfg.kernel_base + if arch.is_x64() { 0x3F_5A80 } else { 0x15_A2B0 },
    };
    let info = HeaderInfo {
        dtb,
        pfn_database: img.va(img.sym.mm_pfn_database),
        ps_loaded_module_list: head,
        ps_active_process_head: pah,
        kdbg_va,
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
        pages: placement.pages,
    };

    let probes = specs
        .into_iter()
        .map(|(name, va, len): ProbeSpec| {
            let expect = match vmap.read(&pm, va, len) {
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
        .collect();

    // name -> VA of every kernel variable placed (fixture: all its publics too).
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

    Forged {
        config: cfg.clone(),
        dtb,
        kdbg_va,
        kuser_va: plan.kuser,
        ps_loaded_module_list: head,
        ps_active_process_head: pah,
        pfn_database: info.pfn_database,
        nt_build_lab,
        modules,
        probes,
        stored_pages: placement.stored_pages,
        runs: pm.runs.clone(),
        header_size,
        first_page_offset: placement.first_page_offset,
        kuser_user_va: plan.kuser_user,
        nt_build_lab_va: lab_va,
        debug_directory_va: dir_va,
        rsds_va,
        ldr_entries: entry_vas,
        ki_processor_block: img.va(img.sym.ki_processor_block),
        etwp_debugger_data: img.va(img.sym.etwp_debugger_data),
        mm_pfn_database_value: plan.pfn_database,
        symbols,
        kprcbs: prcbs,
        kprcb_size,
        etw: etw_build.map(|eb| {
            let mut e = eb.expected;
            crate::etw::variation::fill_current_threads(&mut e, &current_threads);
            e
        }),
        processes: proc_build.map(|p| p.expected).unwrap_or_default(),
        current_threads,
        file,
        pm,
        vmap,
    }
}
