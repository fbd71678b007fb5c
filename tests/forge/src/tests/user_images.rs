//! Tests of the processes' user memory ([`Config::with_user_images`]): every x64 fixture is
//! forged with the user images (alone, and in its providers twin with every `etw-write-patch`
//! variant) and each process is walked from the FILE BYTES with the tests' own page walker
//! (`Walk`) rooted at the PML4 its EPROCESS names: EPROCESS.Peb -> PEB.Ldr -> the three module
//! lists (Flink and Blink), each entry's names and image header, ntdll's export directory
//! resolving the eight functions, their entry bytes, the shared pages' physical addresses; the
//! tampered variants against their clean twins page by page; dumps without the option
//! unchanged.

use std::collections::{BTreeMap, BTreeSet};

use super::realtime::{check_dump, check_kernel_half, walk_at, Seen};
use super::{check_probes, fixture_dir, fixture_dirs, Walk};
use crate::kernel::types_h::TypesH;
use crate::kernel::user_images::*;
use crate::util::{get_u32, get_u64};
use crate::{
    forge, providers_config, CheckId, Config, ExpectedNtdll, ExpectedUserProcess, Forged,
    TamperKind, TamperSpec, WritePatch,
};

fn off(t: &TypesH, agg: &str, field: &str) -> u64 {
    t.offset_of(agg, field)
        .unwrap_or_else(|| panic!("{agg}.{field}"))
}

fn rd(w: &Walk, va: u64, n: usize) -> Vec<u8> {
    w.read(va, n)
        .unwrap_or_else(|e| panic!("{va:#x}: unreadable at {e:#x}"))
}

fn u64_at(w: &Walk, va: u64) -> u64 {
    get_u64(&rd(w, va, 8), 0)
}

fn u32_at(w: &Walk, va: u64) -> u32 {
    get_u32(&rd(w, va, 4), 0)
}

fn u16_at(w: &Walk, va: u64) -> u16 {
    u16::from_le_bytes(rd(w, va, 2).try_into().unwrap())
}

/// The x64 fixtures that support user images.
fn user_fixtures() -> Vec<std::path::PathBuf> {
    let dirs: Vec<_> = fixture_dirs()
        .into_iter()
        .filter(|d| user_images_supported(&Config::from_fixture(d)))
        .collect();
    assert!(dirs.len() >= 9, "every x64 fixture: {dirs:?}");
    dirs
}

/// The nodes of the LIST_ENTRY ring at `head` (Flink order, head excluded), each Blink checked.
fn ring(w: &Walk, head: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let (mut prev, mut cur) = (head, u64_at(w, head));
    while cur != head {
        assert_eq!(u64_at(w, cur + 8), prev, "Blink of {cur:#x}");
        assert!(out.len() < 16, "a ring without end");
        out.push(cur);
        (prev, cur) = (cur, u64_at(w, cur));
    }
    assert_eq!(u64_at(w, head + 8), prev, "the head's Blink");
    out
}

/// A UNICODE_STRING's text (MaximumLength = Length + 2, NUL-terminated).
fn unicode(w: &Walk, at: u64) -> String {
    let len = u16_at(w, at) as usize;
    assert_eq!(u16_at(w, at + 2) as usize, len + 2);
    let buf = u64_at(w, at + 8);
    let b = rd(w, buf, len + 2);
    assert_eq!(&b[len..], &[0, 0]);
    let units: Vec<u16> = b[..len]
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).unwrap()
}

/// A PE32+ image's headers and export directory, read through `w` at `base`.
struct Pe {
    size_of_image: u32,
    export: (u32, u32),
    ordinal_base: u32,
    /// AddressOfFunctions.
    functions: Vec<u32>,
    /// (name, index into AddressOfFunctions) in AddressOfNames order.
    names: Vec<(String, u16)>,
}

fn c_string(w: &Walk, va: u64) -> String {
    let mut s = Vec::new();
    loop {
        let b = rd(w, va + s.len() as u64, 1)[0];
        if b == 0 {
            return String::from_utf8(s).unwrap();
        }
        s.push(b);
    }
}

fn parse_pe(w: &Walk, base: u64) -> Pe {
    assert_eq!(rd(w, base, 2), b"MZ");
    let pe = base + u64::from(u32_at(w, base + 0x3C));
    assert_eq!(rd(w, pe, 4), b"PE\0\0");
    assert_eq!(u16_at(w, pe + 4), 0x8664);
    let opt = pe + 24;
    assert_eq!(u16_at(w, opt), 0x20B);
    assert_eq!(u64_at(w, opt + 0x18), base, "ImageBase");
    let size_of_image = u32_at(w, opt + 0x38);
    let export = (u32_at(w, opt + 0x70), u32_at(w, opt + 0x74));
    let mut p = Pe {
        size_of_image,
        export,
        ordinal_base: 0,
        functions: Vec::new(),
        names: Vec::new(),
    };
    if export.0 == 0 {
        return p;
    }
    let d = base + u64::from(export.0);
    p.ordinal_base = u32_at(w, d + 0x10);
    let (nf, nn) = (u32_at(w, d + 0x14), u32_at(w, d + 0x18));
    let (af, an, ao) = (
        u32_at(w, d + 0x1C),
        u32_at(w, d + 0x20),
        u32_at(w, d + 0x24),
    );
    assert_eq!(
        c_string(w, base + u64::from(u32_at(w, d + 0x0C))),
        "ntdll.dll"
    );
    for i in 0..u64::from(nf) {
        p.functions.push(u32_at(w, base + u64::from(af) + 4 * i));
    }
    for i in 0..u64::from(nn) {
        let name = c_string(w, base + u64::from(u32_at(w, base + u64::from(an) + 4 * i)));
        let ord = u16_at(w, base + u64::from(ao) + 2 * i);
        assert!(u32::from(ord) < nf);
        p.names.push((name, ord));
    }
    p
}

impl Pe {
    /// `name`'s RVA by a binary search of AddressOfNames (names sorted by their bytes).
    fn resolve(&self, name: &str) -> Option<u32> {
        let i = self
            .names
            .binary_search_by(|(n, _)| n.as_bytes().cmp(name.as_bytes()))
            .ok()?;
        Some(self.functions[usize::from(self.names[i].1)])
    }

    fn is_forwarder(&self, rva: u32) -> bool {
        (self.export.0..self.export.0 + self.export.1).contains(&rva)
    }
}

/// ntdll's export directory as the file holds it, against the expectations.
fn check_exports(w: &Walk, n: &ExpectedNtdll) {
    let pe = parse_pe(w, n.base);
    assert_eq!(pe.size_of_image, n.size_of_image);
    assert_eq!(
        (n.base + u64::from(pe.export.0), pe.export.1),
        n.export_directory
    );
    assert_eq!(pe.ordinal_base, n.ordinal_base);
    assert!(pe.functions.len() > pe.names.len(), "ordinal-only exports");
    assert!(pe.names.len() > 60);
    for pair in pe.names.windows(2) {
        assert!(pair[0].0.as_bytes() < pair[1].0.as_bytes(), "names sorted");
    }
    // The export directory crosses a page boundary.
    let dir = pe.export.0;
    assert_ne!(dir / 0x1000, (dir + pe.export.1 - 1) / 0x1000);
    let got: Vec<(String, u64)> = pe
        .names
        .iter()
        .map(|(name, o)| {
            (
                name.clone(),
                n.base + u64::from(pe.functions[usize::from(*o)]),
            )
        })
        .collect();
    assert_eq!(got, n.exports);
    for f in &n.etw_functions {
        let rva = pe.resolve(&f.name).unwrap_or_else(|| panic!("{}", f.name));
        assert!(!pe.is_forwarder(rva));
        assert!(rva < pe.size_of_image);
        assert_eq!(n.base + u64::from(rva), f.va, "{}", f.name);
        assert_eq!(f.page_va, f.va & !0xFFF);
    }
    // The eight functions lie on at least two code pages.
    let pages: BTreeSet<u64> = n.etw_functions.iter().map(|f| f.page_va).collect();
    assert!(pages.len() >= 2);
    for (name, target) in &n.forwarders {
        let rva = pe.resolve(name).unwrap();
        assert!(pe.is_forwarder(rva), "{name} is forwarded");
        assert_eq!(&c_string(w, n.base + u64::from(rva)), target);
    }
    assert!(!n.forwarders.is_empty());
}

/// One process's loader data and images, walked from its PEB.
fn check_process(f: &Forged, file: &[u8], t: &TypesH, e: &ExpectedUserProcess) {
    let n = f.ntdll.as_ref().unwrap();
    let kw = Walk::new(file);
    let eprocess = e.eprocess;
    assert_eq!(u64_at(&kw, eprocess + off(t, "_EPROCESS", "Peb")), e.peb);
    let dtb = u64_at(&kw, eprocess + off(t, "_KPROCESS", "DirectoryTableBase"));
    assert_eq!(dtb, e.dtb);
    assert!(f.user_address_spaces().contains(&(e.pid, dtb)));
    let pw = walk_at(file, dtb);
    let ldr = u64_at(&pw, e.peb + PEB_LDR);
    assert_eq!(ldr, e.ldr);
    assert_eq!(u64_at(&pw, e.peb + PEB_IMAGE_BASE_ADDRESS), e.image_base);
    assert_eq!(u32_at(&pw, ldr + LDR_DATA_LENGTH), PEB_LDR_DATA_SIZE);
    assert_eq!(rd(&pw, ldr + LDR_DATA_INITIALIZED, 1)[0], 1);
    let load: Vec<u64> = ring(&pw, ldr + LDR_DATA_IN_LOAD_ORDER)
        .iter()
        .map(|x| x - LDTE_IN_LOAD_ORDER_LINKS)
        .collect();
    let memory: Vec<u64> = ring(&pw, ldr + LDR_DATA_IN_MEMORY_ORDER)
        .iter()
        .map(|x| x - LDTE_IN_MEMORY_ORDER_LINKS)
        .collect();
    let init: Vec<u64> = ring(&pw, ldr + LDR_DATA_IN_INIT_ORDER)
        .iter()
        .map(|x| x - LDTE_IN_INIT_ORDER_LINKS)
        .collect();
    assert_eq!(load, memory);
    let want: Vec<u64> = e.modules.iter().map(|m| m.ldr_entry).collect();
    assert_eq!(load, want);
    let names = |v: &[u64]| -> Vec<String> {
        v.iter()
            .map(|&x| unicode(&pw, x + LDTE_BASE_DLL_NAME))
            .collect()
    };
    assert_eq!(names(&init), e.init_order);
    assert_eq!(e.init_order[0], "ntdll.dll");
    let mut ntdll = None;
    for m in &e.modules {
        let x = m.ldr_entry;
        assert_eq!(unicode(&pw, x + LDTE_BASE_DLL_NAME), m.base_name);
        assert_eq!(unicode(&pw, x + LDTE_FULL_DLL_NAME), m.full_name);
        assert!(m.full_name.ends_with(&m.base_name));
        assert_eq!(u64_at(&pw, x + LDTE_DLL_BASE), m.base);
        assert_eq!(u64_at(&pw, x + LDTE_ENTRY_POINT), m.entry_point);
        assert_eq!(u32_at(&pw, x + LDTE_SIZE_OF_IMAGE), m.size_of_image);
        let pe = parse_pe(&pw, m.base);
        assert_eq!(pe.size_of_image, m.size_of_image, "{}", m.base_name);
        if m.base_name.eq_ignore_ascii_case("ntdll.dll") {
            ntdll = Some(m.base);
            assert_eq!(m.entry_point, 0);
        } else {
            assert!((m.base..m.base + u64::from(m.size_of_image)).contains(&m.entry_point));
            assert_eq!(pe.export, (0, 0));
        }
    }
    assert_eq!(ntdll, Some(n.base));
    assert_eq!(e.image_base, e.modules[0].base);
    check_exports(&pw, n);
    // Entry bytes and the ntdll pages.
    for (func, (name, bytes)) in n.etw_functions.iter().zip(&e.etw_entries) {
        assert_eq!(&func.name, name);
        assert_eq!(
            pw.read(func.va, ENTRY_BYTES).ok().as_ref(),
            bytes.as_ref(),
            "{name}"
        );
    }
    let shared: BTreeMap<u64, u64> = n.shared_pages.iter().copied().collect();
    assert_eq!(e.ntdll_pages.len(), shared.len());
    for &(va, pa, state) in &e.ntdll_pages {
        assert_eq!(pw.translate(va), Some(pa), "{va:#x}");
        assert_eq!(f.user_physical_address(dtb, va), Some(pa));
        assert_eq!(pa == shared[&va], state == NtdllPage::Shared, "{va:#x}");
        assert_eq!(pw.read(va, 1).is_ok(), state != NtdllPage::NotInDump);
    }
}

/// Everything about the user memory of `f`, from the file; returns the processes walked.
fn check_user_memory(f: &Forged, file: &[u8]) -> usize {
    let n = f.ntdll.as_ref().expect("user images");
    let t = TypesH::load(&f.config.fixture.as_ref().unwrap().dir).unwrap();
    let kw = Walk::new(file);
    let peb_off = off(&t, "_EPROCESS", "Peb");
    let mut walked = 0;
    for p in &f.processes {
        let e = n.processes.iter().find(|e| e.pid == p.pid);
        if !has_user_memory(p.pid) {
            assert!(e.is_none());
            assert_eq!(u64_at(&kw, p.eprocess_va + peb_off), 0, "System's Peb");
            assert!(f.user_address_spaces().iter().all(|s| s.0 != p.pid));
            continue;
        }
        let e = e.expect("a process with user memory");
        assert_eq!((e.eprocess, &e.name), (p.eprocess_va, &p.name));
        assert_eq!(p.directory_table_base, e.dtb);
        check_process(f, file, &t, e);
        check_kernel_half(f, file, e.dtb);
        walked += 1;
    }
    assert_eq!(walked, n.processes.len());
    // The shared pages: one PA per page in every process that does not hold its own copy.
    let mut pas: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for e in &n.processes {
        for &(va, pa, state) in &e.ntdll_pages {
            if state == NtdllPage::Shared {
                pas.entry(va).or_default().insert(pa);
            }
        }
    }
    for (va, set) in pas {
        assert_eq!(set.len(), 1, "{va:#x}");
    }
    check_probes(f, file);
    walked
}

/// The clean entry bytes a process sees for every function it can read.
fn assert_clean_entries(n: &ExpectedNtdll, e: &ExpectedUserProcess) {
    for (func, (_, bytes)) in n.etw_functions.iter().zip(&e.etw_entries) {
        assert_eq!(bytes.as_ref(), Some(&func.entry), "{}", func.name);
    }
}

#[test]
fn user_images_walk_back_from_the_file_in_every_x64_fixture() {
    for dir in user_fixtures() {
        for cfg in [
            Config::from_fixture(&dir).with_user_images(),
            providers_config(&dir),
        ] {
            assert!(cfg.user_images);
            let f = forge(&cfg);
            let file = f.to_bytes();
            assert_eq!(check_user_memory(&f, &file), 3, "{}", dir.display());
            let n = f.ntdll.as_ref().unwrap();
            for e in &n.processes {
                assert_clean_entries(n, e);
                assert!(e.ntdll_pages.iter().all(|p| p.2 == NtdllPage::Shared));
            }
            assert!(n.patches.is_empty());
            if let Some(etw) = &f.etw {
                assert!(etw.findings.is_empty(), "a clean dump has no finding");
            }
            // smss.exe is native: the exe and ntdll only.
            let smss = n.processes.iter().find(|e| e.name == "smss.exe").unwrap();
            assert_eq!(smss.modules.len(), 2);
            assert_eq!(forge(&cfg).to_bytes(), file, "deterministic");
        }
    }
}

/// The entry bytes of the image: EtwEventWrite's documented prologue, NtTraceEvent's stub.
#[test]
fn ntdll_entry_bytes_are_the_documented_ones() {
    let f = forge(&Config::from_fixture(&fixture_dir("x64-19041")).with_user_images());
    let n = f.ntdll.unwrap();
    let entry = |name: &str| {
        n.etw_functions
            .iter()
            .find(|x| x.name == name)
            .unwrap()
            .entry
            .clone()
    };
    assert_eq!(
        &entry("EtwEventWrite")[..7],
        &[0x4C, 0x8B, 0xDC, 0x48, 0x83, 0xEC, 0x58]
    );
    let stub = entry("NtTraceEvent");
    assert_eq!(&stub[..4], &[0x4C, 0x8B, 0xD1, 0xB8]);
    assert_eq!(
        &stub[8..16],
        &[0xF6, 0x04, 0x25, 0x08, 0x03, 0xFE, 0x7F, 0x01]
    );
    let names: Vec<&str> = n.etw_functions.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ETW_WRITE_FUNCTIONS);
    // No two functions share an entry.
    let set: BTreeSet<Vec<u8>> = n.etw_functions.iter().map(|x| x.entry.clone()).collect();
    assert_eq!(set.len(), 8);
}

/// Every user page of process `e` (PEB, loader heap, the images' mapped pages).
fn user_pages(n: &ExpectedNtdll, e: &ExpectedUserProcess) -> Vec<u64> {
    let mut v = vec![e.peb, USER_LOADER_HEAP];
    for m in &e.modules {
        if m.base == n.base {
            v.extend(n.shared_pages.iter().map(|s| s.0));
        } else {
            v.push(m.base);
        }
    }
    v
}

/// `bad` (a write-patch variant) against its clean twin `clean`: the kernel's pages hold the
/// same bytes at the same physical addresses, every process's user pages too but where the
/// variant says.
fn diff_user_twins(clean: &Forged, cf: &[u8], bad: &Forged, bf: &[u8], w: WritePatch) {
    let (cn, bn) = (clean.ntdll.as_ref().unwrap(), bad.ntdll.as_ref().unwrap());
    let (wc, wb) = (Walk::new(cf), Walk::new(bf));
    for (va, size) in clean.vmap.ranges().filter(|r| r.1 <= 4 << 20) {
        for pg in (va..va + size).step_by(0x1000) {
            assert_eq!(wc.translate(pg), wb.translate(pg), "{pg:#x}");
            assert_eq!(
                wc.read(pg, 0x1000).ok(),
                wb.read(pg, 0x1000).ok(),
                "{pg:#x}"
            );
        }
    }
    assert_eq!(cn.shared_pages, bn.shared_pages);
    let fd = &bad.etw.as_ref().unwrap().findings;
    assert_eq!(fd.len(), w.findings());
    let changed: Vec<(u64, usize)> = fd.iter().flat_map(|f| f.changed.clone()).collect();
    assert_eq!(bn.patches.len(), 1);
    let x = &bn.patches[0];
    assert_eq!(x.variant, w);
    let mut differing_pages = 0;
    for (ce, be) in cn.processes.iter().zip(&bn.processes) {
        assert_eq!((ce.pid, ce.dtb, ce.peb), (be.pid, be.dtb, be.peb));
        let (pc, pb) = (walk_at(cf, ce.dtb), walk_at(bf, be.dtb));
        let target = x.pid.is_none_or(|p| p == ce.pid);
        for pg in user_pages(cn, ce) {
            let own = target && pg == x.va & !0xFFF;
            let (ta, tb) = (pc.translate(pg), pb.translate(pg));
            assert_eq!(
                ta == tb,
                !own || x.pid.is_none(),
                "pid {:#x} {pg:#x}",
                ce.pid
            );
            let (a, b) = (pc.read(pg, 0x1000), pb.read(pg, 0x1000));
            let a = a.expect("clean pages readable");
            let Ok(b) = b else {
                assert!(own && w == WritePatch::Unreadable, "{pg:#x} unreadable");
                differing_pages += 1;
                continue;
            };
            let diff: Vec<u64> = (0..0x1000u64)
                .filter(|&i| a[i as usize] != b[i as usize])
                .map(|i| pg + i)
                .collect();
            if own {
                differing_pages += 1;
                assert_eq!(tb, Some(x.page_pa));
            }
            if !own || x.bytes.is_empty() {
                assert!(diff.is_empty(), "pid {:#x} {pg:#x}: {diff:x?}", ce.pid);
                continue;
            }
            // Exactly the patched bytes, as the finding's `changed` says.
            let want: Vec<u64> = (x.va..x.va + x.bytes.len() as u64)
                .filter(|&v| a[(v - pg) as usize] != x.bytes[(v - x.va) as usize])
                .collect();
            assert_eq!(diff, want);
            assert_eq!(
                &b[(x.va - pg) as usize..(x.va - pg) as usize + x.bytes.len()],
                &x.bytes[..]
            );
            assert!(changed.contains(&(x.va, x.bytes.len())));
        }
    }
    let expect_pages = if x.pid.is_none() {
        cn.processes.len()
    } else {
        1
    };
    assert_eq!(differing_pages, expect_pages, "{w:?}");
}

/// One finding's facts: the check, the address (the function's VA), the detail naming the PID
/// (or the shared page), the function and the bytes.
fn check_findings(bad: &Forged, w: WritePatch) {
    let n = bad.ntdll.as_ref().unwrap();
    let x = &n.patches[0];
    let fd = &bad.etw.as_ref().unwrap().findings;
    for f in fd {
        assert_eq!(f.check, CheckId::EtwWritePatch);
        assert_eq!(f.address, x.va);
        assert!(f.detail.contains(&x.function), "{}", f.detail);
        let hex: Vec<String> = x.bytes.iter().map(|b| format!("{b:02X}")).collect();
        assert!(f.detail.contains(&hex.join(" ")), "{}", f.detail);
        match x.pid {
            Some(pid) => assert!(f.detail.contains(&format!("PID {pid:#x}")), "{}", f.detail),
            None => assert!(f.detail.contains("shared page"), "{}", f.detail),
        }
    }
    // What each process reads at the function.
    for e in &n.processes {
        let target = x.pid.is_none_or(|p| p == e.pid);
        let func = n.etw_functions.iter().position(|f| f.name == x.function);
        for (i, (func_e, (_, got))) in n.etw_functions.iter().zip(&e.etw_entries).enumerate() {
            let same_page = func_e.page_va == x.va & !0xFFF;
            match (target, w) {
                (true, WritePatch::Unreadable) if same_page => assert!(got.is_none()),
                (true, _) if Some(i) == func && !x.bytes.is_empty() => {
                    let got = got.as_ref().unwrap();
                    assert_eq!(&got[..x.bytes.len()], &x.bytes[..]);
                    assert_eq!(&got[x.bytes.len()..], &func_e.entry[x.bytes.len()..]);
                }
                _ => assert_eq!(got.as_ref(), Some(&func_e.entry), "{}", func_e.name),
            }
        }
    }
}

/// Every `etw-write-patch` variant of every x64 fixture: its findings, its twin diff, its
/// user memory walked back.
#[test]
fn write_patch_variants_differ_from_their_clean_twins_where_the_findings_say() {
    let mut seen = BTreeSet::new();
    for dir in user_fixtures() {
        let clean_cfg = providers_config(&dir);
        let clean = forge(&clean_cfg);
        let cf = clean.to_bytes();
        for k in TamperKind::WRITE_PATCHES {
            assert!(k.applies_to(&clean_cfg));
            let TamperKind::WritePatch(w) = k else {
                unreachable!()
            };
            let mut cfg = clean_cfg.clone();
            cfg.etw = cfg.etw.map(|e| e.with_tampering(TamperSpec::one(k)));
            let bad = forge(&cfg);
            let bf = bad.to_bytes();
            assert_eq!(check_user_memory(&bad, &bf), 3);
            diff_user_twins(&clean, &cf, &bad, &bf, w);
            check_findings(&bad, w);
            assert_eq!(k.check(), CheckId::EtwWritePatch);
            seen.insert(w);
        }
    }
    assert_eq!(seen.len(), WritePatch::ALL.len());
}

/// The tampered scenarios list the write patches (x64) under their own names.
#[test]
fn tamper_scenarios_name_the_write_patches() {
    let names: Vec<String> = crate::tamper_scenarios(&crate::default_fixtures_root())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for w in WritePatch::ALL {
        let s = format!("fixture-x64-19041-tampered-etw-write-patch-{}", w.name());
        assert!(names.contains(&s), "{s}");
    }
    assert!(names.contains(&"fixture-x64-19041-tampered-clock-hook".to_string()));
    assert!(!names
        .iter()
        .any(|n| n.starts_with("fixture-x86-14393-tampered-etw-write")));
}

/// With the option on, the dump is the one without it plus new pages: every stored page of the
/// plain dump holds the same bytes but for the EPROCESS pages (Peb, DirectoryTableBase), and
/// every kernel VA translates as before; the Debug rendering of configs without it is
/// unchanged.
#[test]
fn user_images_only_add_pages() {
    for (name, bitmap) in [("x64-7601", false), ("x64-19041", true)] {
        let dir = fixture_dir(name);
        let mut off_cfg = Config::from_fixture(&dir).with_processes();
        if bitmap {
            off_cfg = super::bitmap(off_cfg, crate::BitmapSig::Sdmp, 5);
        }
        let on_cfg = off_cfg.clone().with_user_images();
        assert!(!format!("{off_cfg:?}").contains("user_images"));
        assert!(format!("{on_cfg:?}").contains("user_images: true"));
        let (on, plain) = (forge(&on_cfg), forge(&off_cfg));
        assert!(plain.ntdll.is_none() && plain.user_address_spaces().is_empty());
        let (on_file, off_file) = (on.to_bytes(), plain.to_bytes());
        let (won, woff) = (Walk::new(&on_file), Walk::new(&off_file));
        let t = TypesH::load(&dir).unwrap();
        let mut allowed = BTreeSet::new();
        for p in &plain.processes {
            let va = p.eprocess_va + off(&t, "_EPROCESS", "Peb");
            allowed.insert(plain.physical_address(va).unwrap() >> 12);
            let va = p.eprocess_va + off(&t, "_KPROCESS", "DirectoryTableBase");
            allowed.insert(plain.physical_address(va).unwrap() >> 12);
        }
        for &pfn in woff.pages.keys() {
            let (a, b) = (woff.phys(pfn << 12, 0x1000), won.phys(pfn << 12, 0x1000));
            let b = b.expect("every page of the plain dump is stored");
            if a != Some(b) {
                let fresh = a.is_some_and(|a| a.iter().all(|&x| x == 0));
                assert!(allowed.contains(&pfn) || fresh, "{name}: PFN {pfn:#x}");
            }
        }
        for (va, _) in plain.vmap.ranges() {
            assert_eq!(on.physical_address(va), plain.physical_address(va));
        }
        assert_eq!(on.probes, plain.probes);
        assert_eq!(on.stored_pages > plain.stored_pages, bitmap);
        check_user_memory(&on, &on_file);
    }
}

/// Realtime buffers and user images together: one PML4 per process holds both, and both walk
/// back.
#[test]
fn realtime_buffers_and_user_images_share_the_address_space() {
    let dir = fixture_dir("x64-19041");
    let cfg = crate::realtime_config(&dir, 1, false).with_user_images();
    let f = forge(&cfg);
    let file = f.to_bytes();
    let mut seen = Seen::default();
    assert_eq!(check_dump(&f, &file, &mut seen), 4);
    assert_eq!(check_user_memory(&f, &file), 3);
    let n = f.ntdll.as_ref().unwrap();
    for s in f.etw.as_ref().unwrap().sessions() {
        for c in &s.consumers {
            let r = c.realtime.as_ref().unwrap();
            let e = n.processes.iter().find(|e| e.pid == c.pid).unwrap();
            assert_eq!(r.dtb, e.dtb);
        }
    }
    assert_eq!(f.user_address_spaces().len(), 3);
}

#[test]
#[should_panic(expected = "etw-write-patch needs Config::with_user_images")]
fn a_write_patch_needs_the_user_images() {
    let mut c = providers_config(&fixture_dir("x64-19041"));
    c.user_images = false;
    c.etw = c
        .etw
        .map(|e| e.with_tampering(TamperSpec::one(TamperKind::WritePatch(WritePatch::Ret))));
    forge(&c);
}

#[test]
#[should_panic(expected = "needs an x64 fixture kernel")]
fn user_images_are_x64_only() {
    forge(&Config::from_fixture(&fixture_dir("x86-14393")).with_user_images());
}

/// Prints the findings, patches and processes of the x64-19041 user images
/// (`cargo test -p etwdump-forge user_images_summary -- --ignored --nocapture`).
#[test]
#[ignore]
fn user_images_summary() {
    let d = fixture_dir("x64-19041");
    for w in WritePatch::ALL {
        let mut c = providers_config(&d);
        c.etw = c
            .etw
            .map(|e| e.with_tampering(TamperSpec::one(TamperKind::WritePatch(w))));
        let f = forge(&c);
        for fd in &f.etw.as_ref().unwrap().findings {
            println!("{w:?}: {:#x} {} {:x?}", fd.address, fd.detail, fd.changed);
        }
        println!("{w:?}: {:x?}", f.ntdll.as_ref().unwrap().patches);
    }
    let f = forge(&providers_config(&d));
    let n = f.ntdll.unwrap();
    println!(
        "{:#x} {:#x} {:x?} {} exports",
        n.base,
        n.size_of_image,
        n.export_directory,
        n.exports.len()
    );
    for x in &n.etw_functions {
        println!("{} {:#x} {:02x?}", x.name, x.va, x.entry);
    }
    for p in &n.processes {
        println!("{:x?}", p);
    }
}
