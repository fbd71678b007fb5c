//! Memory images (issue 14): the forge writes each scenario as a crash dump and as a raw image,
//! a VMware .vmem + .vmss pair, a .vmsn holding the memory and an ELF core (written by the
//! forge from the format definitions, not from etwdump's reader). On every image etwdump must
//! find the page-table root the forge built (x64 with the self-map index varied, x86 PAE) and
//! the kernel, and give the same `sessions`, `buffers`, `cswitch` and `events` records as on
//! the crash dump of the same memory.

mod common;

use etwdump::dump::{Arch, DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelBaseSource, KernelContext, SymbolOptions};
use etwdump::kernel::discover;
use etwdump_forge::{forge, Config, Forged, ImageKind};
use serde_json::Value;

/// The records of the four ETW listings on `d`, as JSON (warnings left out: a crash dump
/// warns of what its header says, an image of how it was read).
fn listings(d: &DumpFile, opts: &SymbolOptions) -> [Value; 4] {
    let ctx = KernelContext::open(d, opts).unwrap();
    let sessions =
        serde_json::to_value(etwdump::report::sessions::Sessions::open(&ctx).records()).unwrap();
    let buffers = serde_json::to_value(etwdump::report::buffers::analyse(&ctx, None).rows).unwrap();
    let cswitch = serde_json::to_value(etwdump::report::cswitch::collect(&ctx, None).rows).unwrap();
    let events = serde_json::to_value(etwdump::report::events::collect(&ctx, None).rows).unwrap();
    [sessions, buffers, cswitch, events]
}

fn arch_of(a: etwdump_forge::Arch) -> Arch {
    match a {
        etwdump_forge::Arch::X64 => Arch::X64,
        etwdump_forge::Arch::X86Pae => Arch::X86 { pae: true },
        etwdump_forge::Arch::X86NonPae => Arch::X86 { pae: false },
    }
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, |a| a.len())
}

/// Forge `c`, write the dump and every image, and compare them.
fn check(c: &Config, fixture: &str, what: &str) -> usize {
    let f = forge(c);
    let dir = tempfile::tempdir().unwrap();
    let dump_path = dir.path().join("m.dmp");
    f.write_to(&dump_path).unwrap();
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fixture)),
        ..SymbolOptions::default()
    };
    let dump = discover::open(&dump_path, OpenOptions::default()).unwrap();
    let want = listings(&dump, &opts);
    assert!(
        count(&want[0]) > 0 && count(&want[1]) > 0,
        "{what}: no ETW data"
    );
    eprintln!(
        "{what}: {} session records, {} buffers, {} switches, {} events on the dump",
        count(&want[0]),
        count(&want[1]),
        count(&want[2]),
        count(&want[3])
    );
    let mut checked = 0;
    for kind in ImageKind::ALL {
        let files = f
            .write_image(&dir.path().join(format!("m-{}", kind.name())), kind)
            .unwrap();
        // Open every file the image has (a .vmem or its .vmss: the same memory).
        for file in &files {
            let label = format!("{what} {}: {}", kind.name(), file.display());
            let d = discover::open(file, OpenOptions::default())
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            check_machine(&f, &d, &label);
            let got = listings(&d, &opts);
            if kind == ImageKind::Raw {
                // A raw image holds zeros where the dump stores no page (no format can tell
                // an absent page from a zero one): a field the dump cannot read may read as
                // zeros there. The same sessions and buffers are found, at the same places.
                for (i, keys) in [
                    (0, ["kind", "logger_id", "address"]),
                    (1, ["session_id", "source", "address"]),
                ] {
                    let project = |v: &Value| -> Vec<Vec<Value>> {
                        v.as_array()
                            .unwrap()
                            .iter()
                            .map(|r| keys.iter().map(|k| r[*k].clone()).collect())
                            .collect()
                    };
                    assert_eq!(project(&got[i]), project(&want[i]), "{label}: listing {i}");
                }
                checked += 1;
                continue;
            }
            for (i, name) in ["sessions", "buffers", "cswitch", "events"]
                .iter()
                .enumerate()
            {
                assert_eq!(
                    count(&got[i]),
                    count(&want[i]),
                    "{label}: {name} count differs"
                );
                if got[i] != want[i] {
                    let (g, w) = (got[i].as_array().unwrap(), want[i].as_array().unwrap());
                    let k = g.iter().zip(w).position(|(a, b)| a != b).unwrap_or(0);
                    panic!(
                        "{label}: {name} records differ, first at {k}:\n image {}\n dump  {}",
                        g[k], w[k]
                    );
                }
            }
            checked += 1;
        }
    }
    checked
}

/// Discovery found what the forge built: the architecture, the root, the self-map index, the
/// kernel base (by its CodeView record) and its PDB identity.
fn check_machine(f: &Forged, d: &DumpFile, label: &str) {
    let root = f.page_table_root();
    assert_eq!(d.header().directory_table_base, root, "{label}: DTB");
    assert_eq!(d.header().arch, arch_of(f.config.arch), "{label}: arch");
    let how = d.machine_source().expect("found by discovery");
    match f.self_map_index() {
        Some(i) => assert!(
            how.contains(&format!("self-reference at index {i:#x}")),
            "{label}: {how}"
        ),
        None => assert!(
            how.contains("PAE") || how.contains("0x300"),
            "{label}: {how}"
        ),
    }
    let ctx = KernelContext::without_symbols(d);
    assert_eq!(
        ctx.base_source,
        Some(KernelBaseSource::CodeViewScan),
        "{label}"
    );
    assert_eq!(
        ctx.base.map(|b| b.get()),
        Some(f.config.kernel_base),
        "{label}: kernel base"
    );
    assert!(ctx.kernel_pdb().is_some(), "{label}: CodeView identity");
    assert_eq!(ctx.build, f.config.build, "{label}: build");
}

#[test]
fn every_image_format_gives_the_crash_dumps_listings_x64() {
    let fx = common::fixture("x64-19041");
    let mut n = 0;
    for seed in [3u64, 11] {
        let c = Config::from_fixture(&fx)
            .with_variation(seed)
            .with_random_self_map();
        let i = c.self_map_index;
        n += check(
            &c,
            "x64-19041",
            &format!("x64-19041 seed {seed} self-map {i:#x}"),
        );
    }
    // Raw, .vmem, .vmss, .vmsn and ELF for each.
    assert_eq!(n, 2 * 5);
}

#[test]
fn every_image_format_gives_the_crash_dumps_listings_x86_pae() {
    let fx = common::fixture("x86-14393");
    let c = Config::from_fixture(&fx).with_variation(5);
    assert_eq!(arch_of(c.arch), Arch::X86 { pae: true });
    assert_eq!(check(&c, "x86-14393", "x86-14393 PAE seed 5"), 5);
}

/// Bad images: each a clear one-line error or a warning, never a guess presented as fact.
#[test]
fn bad_images_are_refused_or_warned_about() {
    let fx = "x64-19041";
    let c = Config::from_fixture(&common::fixture(fx)).with_variation(3);
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    // A .vmss without its .vmem.
    let files = f.write_image(&p("v"), ImageKind::Vmware).unwrap();
    let vmss = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "vmss"))
        .unwrap();
    let vmem = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "vmem"))
        .unwrap();
    std::fs::rename(vmem, p("elsewhere.bin")).unwrap();
    let e = discover::open(vmss, OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("without the memory") && e.contains(".vmem"),
        "{e}"
    );
    // An ELF core whose segments have no physical addresses (p_paddr 0 everywhere).
    let elf = f.write_image(&p("e"), ImageKind::Elf).unwrap().remove(0);
    let mut b = std::fs::read(&elf).unwrap();
    let (phoff, n) = (
        u64::from_le_bytes(b[32..40].try_into().unwrap()) as usize,
        u16::from_le_bytes(b[56..58].try_into().unwrap()) as usize,
    );
    for i in 0..n {
        let h = phoff + i * 56;
        b[h + 24..h + 32].fill(0);
    }
    std::fs::write(p("nophys.elf"), &b).unwrap();
    let e = discover::open(&p("nophys.elf"), OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no physical addresses") || e.contains("overlap"),
        "{e}"
    );
    // A raw image cut in the middle of a page: the partial page is said to be missing, the
    // rest reads as before.
    let raw = f.write_image(&p("r"), ImageKind::Raw).unwrap().remove(0);
    let mut b = std::fs::read(&raw).unwrap();
    b.extend_from_slice(&[0xCC; 0x800]);
    std::fs::write(p("cut.raw"), &b).unwrap();
    let d = discover::open(&p("cut.raw"), OpenOptions::default()).unwrap();
    assert!(
        d.warnings()
            .iter()
            .any(|w| w.contains("ends 0x800 bytes into a page")),
        "{:?}",
        d.warnings()
    );
    assert_eq!(d.header().directory_table_base, f.page_table_root());
    // An ELF core cut short: refused with --strict, warned about and read otherwise.
    let b = std::fs::read(&elf).unwrap();
    std::fs::write(p("short.elf"), &b[..b.len() - 0x1800]).unwrap();
    let strict = discover::open(&p("short.elf"), OpenOptions::default());
    assert!(strict.unwrap_err().to_string().contains("truncated"));
    let d = discover::open(
        &p("short.elf"),
        OpenOptions {
            allow_truncated: true,
        },
    )
    .unwrap();
    assert!(d.truncation().is_some());
    // Several page-table roots: a copy of the PML4 (its self-reference pointed at the copy)
    // in a free page just above the root. The first root in physical order is used; the
    // other is listed, never silently preferred.
    let mut b = std::fs::read(&raw).unwrap();
    let root = f.page_table_root() as usize;
    let idx = f.self_map_index().unwrap() as usize;
    let copy = (root + 0x1000..b.len() - 0x1000)
        .step_by(0x1000)
        .find(|&o| b[o..o + 0x1000].iter().all(|&x| x == 0))
        .expect("a free page");
    let pml4: Vec<u8> = b[root..root + 0x1000].to_vec();
    b[copy..copy + 0x1000].copy_from_slice(&pml4);
    let e = u64::from_le_bytes(pml4[idx * 8..idx * 8 + 8].try_into().unwrap());
    let moved = (e & !0x000F_FFFF_FFFF_F000) | copy as u64;
    b[copy + idx * 8..copy + idx * 8 + 8].copy_from_slice(&moved.to_le_bytes());
    std::fs::write(p("two.raw"), &b).unwrap();
    let d = discover::open(&p("two.raw"), OpenOptions::default()).unwrap();
    assert_eq!(d.header().directory_table_base, root as u64);
    let how = d.machine_source().unwrap();
    assert!(
        how.contains("1 other page-table roots also pass") && how.contains(&format!("{copy:#x}")),
        "{how}"
    );
    // A file of no memory at all: one error naming both readings.
    std::fs::write(p("noise.bin"), vec![0x5Au8; 2 << 20]).unwrap();
    let e = discover::open(&p("noise.bin"), OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a Windows kernel crash dump")
            && e.contains("no x64 or x86 kernel page tables"),
        "{e}"
    );
}
