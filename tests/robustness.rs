//! Hostile input: crafted lists and random corruption never panic or hang, and problems are
//! reported with the address that is wrong.

mod common;
use common::Rng;
use etwdump::addr::VirtAddr;
use etwdump::dump::{DumpFile, OpenOptions, RunList};
use etwdump::mem::AddressSpace;
use etwdump_forge::{forge, Config};

/// File offset of the byte behind a kernel virtual address of a full dump.
fn file_offset(d: &DumpFile, va: u64) -> usize {
    let t = AddressSpace::kernel(d)
        .translate(VirtAddr::new(va))
        .unwrap();
    let Some(r) = d.container::<RunList>() else {
        panic!("full dump expected")
    };
    (r.file_offset(t.pa.pfn()).unwrap() + t.pa.page_offset()) as usize
}

fn patch_ptr(bytes: &mut [u8], off: usize, v: u64, wide: bool) {
    if wide {
        bytes[off..off + 8].copy_from_slice(&v.to_le_bytes());
    } else {
        bytes[off..off + 4].copy_from_slice(&(v as u32).to_le_bytes());
    }
}

#[test]
fn cyclic_module_list_is_cut_and_reported() {
    for c in [Config::x64(), Config::x86_nonpae()] {
        let wide = matches!(c.arch, etwdump_forge::Arch::X64);
        let f = forge(&c);
        let mut bytes = f.to_bytes();
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
        let space = AddressSpace::kernel(&d);
        let l =
            etwdump::kernel::modules::walk(&space, VirtAddr::new(f.ps_loaded_module_list)).unwrap();
        let n = l.modules.len();
        assert!(n >= 3);
        // Last entry's Flink → second entry: a cycle that never reaches the head.
        let last = l.modules[n - 1].entry.get();
        let second = l.modules[1].entry.get();
        let off = file_offset(&d, last);
        patch_ptr(&mut bytes, off, second, wide);
        let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
        let space = AddressSpace::kernel(&d);
        let l =
            etwdump::kernel::modules::walk(&space, VirtAddr::new(f.ps_loaded_module_list)).unwrap();
        assert_eq!(l.modules.len(), n);
        assert_eq!(
            l.incomplete.as_deref(),
            Some(
                format!("the list loops back to entry {second:#x} without reaching the head")
                    .as_str()
            )
        );
        // info carries on and says why the list is incomplete.
        let r = etwdump::report::info::info(&d);
        assert_eq!(r.loaded_modules.count, n);
        assert!(r.loaded_modules.problem.unwrap().contains("loops back"));
        assert_eq!(r.kernel_base.address, Some(format!("{:#x}", c.kernel_base)));
    }
}

#[test]
fn module_entry_pointing_nowhere_is_reported() {
    let c = Config::x64();
    let f = forge(&c);
    let mut bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let space = AddressSpace::kernel(&d);
    let l = etwdump::kernel::modules::walk(&space, VirtAddr::new(f.ps_loaded_module_list)).unwrap();
    let off = file_offset(&d, l.modules[0].entry.get());
    patch_ptr(&mut bytes, off, 0xFFFF_8000_DEAD_0000, true);
    let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
    let space = AddressSpace::kernel(&d);
    let l = etwdump::kernel::modules::walk(&space, VirtAddr::new(f.ps_loaded_module_list)).unwrap();
    assert_eq!(l.modules.len(), 1);
    let why = l.incomplete.unwrap();
    // The error names the entry, the first unreadable field's address and the paging level.
    assert!(
        why.starts_with("entry 0xffff8000dead0000 is unreadable: 0xffff8000dead0030: PML4E 0x0"),
        "{why}"
    );
}

#[test]
fn random_corruption_never_panics() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for c in [Config::x64(), Config::x86_pae(), Config::x86_nonpae()] {
        let base = forge(&c).to_bytes();
        let hdr = if matches!(c.arch, etwdump_forge::Arch::X64) {
            0x2000
        } else {
            0x1000
        };
        let mut opened = 0;
        for i in 0..400 {
            let mut b = base.clone();
            // Half the rounds hit the header, half the page data (tables, KDBG, lists, PE).
            for _ in 0..(1 + rng.next() % 8) {
                let pos = if i % 2 == 0 {
                    (rng.next() % hdr) as usize
                } else {
                    (hdr + rng.next() % (b.len() as u64 - hdr)) as usize
                };
                b[pos] = rng.next() as u8;
            }
            if let Ok(d) = DumpFile::from_bytes(
                b,
                OpenOptions {
                    allow_truncated: true,
                },
            ) {
                opened += 1;
                let r = etwdump::report::info::info(&d);
                let _ = serde_json::to_string(&r).unwrap();
                let _ = r.to_table();
            }
        }
        // Most corruptions of page data leave a dump that still opens.
        assert!(opened >= 200, "only {opened} of 400 corrupted dumps opened");
    }
}
