//! Dump-file layer: header, run list, bitmap, triage block table, DumpBlob secondary data and
//! the ETW blob, opened with `allow_truncated` (and without it where the result can differ:
//! every truncated input, and one in four of the others); then the kernel layer without
//! symbols (KDBG, KUSER, module list, PE image, the built-in tables for the build found) and,
//! on triage dumps, the ETW windows and blob (`etw::triage::read`).
//!
//! The kernel context is `KernelContext::without_symbols` on 1 input in 8
//! (ETWDUMP_FUZZ_CONTEXT_EVERY sets the 8; 1: every input) and otherwise the same context
//! assembled by the harness from the same readers with the built-in tables memoized
//! (`quick_context`): building those tables is 4/5 of a run and depends only on the build,
//! the architecture and the kernel's PDB identity.
//!
//! Oracle: a dump that opens without `allow_truncated` opens with it, with the same warnings,
//! length and pages; one that opens only with it failed with `DumpError::Truncated` and carries
//! the truncation warning.
#![no_main]

// Linked for its allocation guard (src/lib.rs) even where no helper is used.
extern crate etwdump_fuzz;

use etwdump::addr::Pfn;
use etwdump::dump::{Bitmap, DumpError, DumpFile, OpenOptions, PageLookup, PhysImage, RunList};
use etwdump::etw::triage::{parse_blob, ETW_SECONDARY_DUMP_DATA_GUID};
use etwdump::kernel::context::{KernelContext, SymbolMatch};
use etwdump::kernel::kdbg::{KdDebuggerData, KdbgState};
use etwdump::kernel::kuser::KUserSharedData;
use etwdump::kernel::modules;
use etwdump::kernel::pe::KernelImage;
use etwdump::mem::AddressSpace;
use etwdump::mem::MemError;
use etwdump::symbols::{PdbIdentity, Symbols, TableFamily};
use libfuzzer_sys::fuzz_target;

fn exercise(d: &DumpFile, whole_kernel_layer: bool) {
    let h = d.header();
    let _ = (
        d.len(),
        d.stored_pages(),
        d.warnings().len(),
        d.has_physical_memory(),
    );
    if let Some(r) = d.container::<RunList>() {
        for run in r.runs().iter().take(64) {
            let _ = d.page(run.base);
            let _ = d.page(Pfn::new(
                run.base.get().wrapping_add(run.count).wrapping_sub(1),
            ));
        }
        let _ = r.data_end();
    } else if let Some(b) = d.container::<Bitmap>() {
        for pfn in [
            0,
            1,
            b.bits / 2,
            b.bits.saturating_sub(1),
            b.bits,
            u64::MAX >> 12,
        ] {
            if let PageLookup::Present(p) = d.page(Pfn::new(pfn)) {
                assert_eq!(p.len(), 4096);
            }
        }
        let _ = b.data_end();
    } else if let Some(v) = d.triage_view() {
        let t = v.triage();
        for s in t.segments().iter().take(256) {
            let _ = v.bytes_at(s.va, s.len as usize);
            let _ = t.segment(s.va);
            let _ = t.segment(s.va.wrapping_add(s.len));
        }
        let sec = v.secondary_data();
        if let Some(b) = sec.find(ETW_SECONDARY_DUMP_DATA_GUID) {
            if let Some(bytes) = v.blob(b) {
                let _ = parse_blob(bytes, b.data_offset);
            }
        }
    } else if let Some(img) = d.container::<PhysImage>() {
        // Every range's first and last page, and the pages just outside.
        for r in img.ranges().iter().take(256) {
            let (first, last) = (r.start >> 12, (r.start + r.size) >> 12);
            for pfn in [first, last.saturating_sub(1), last, first.saturating_sub(1)] {
                if let PageLookup::Present(p) = d.page(Pfn::new(pfn)) {
                    assert_eq!(p.len(), 4096);
                }
            }
        }
        let _ = img.data_end();
    }
    // A few virtual reads through the header's pointers.
    let space = AddressSpace::kernel(d);
    let mut buf = [0u8; 64];
    for va in [
        h.kd_debugger_data_block,
        h.ps_loaded_module_list,
        h.ps_active_process_head,
        h.pfn_database,
    ] {
        let _ = space.translate(va);
        let _ = space.read(va, &mut buf);
    }
    // The kernel layer. `KernelContext::without_symbols` spends ~1 ms (4/5 of a run) building
    // the built-in tables for the build it finds, a pure function of (build, architecture,
    // the kernel's PDB identity). So the harness assembles the same context from the same
    // readers with those tables memoized (`quick_context`), on every input, and the real
    // `without_symbols` (which also checks the tables' RVAs against the dump) runs on 1 input
    // in 8. On triage dumps, the ETW windows and blob are read from that context.
    if whole_kernel_layer {
        let ctx = KernelContext::without_symbols(d);
        if d.triage().is_some() {
            let _ = etwdump::etw::triage::read(&ctx);
        }
    } else {
        let ctx = quick_context(d);
        if d.triage().is_some() {
            let _ = etwdump::etw::triage::read(&ctx);
        }
        SYMBOLS.with(|c| c.borrow_mut().put(ctx));
    }
}

/// (build, table family, pointer size, kernel PDB identity): what the built-in tables depend on.
type SymbolsKey = (u32, TableFamily, u64, Option<PdbIdentity>);

/// Memoized `Symbols::none(..).with_builtin_for(..)`, lent to one context at a time.
#[derive(Default)]
struct SymbolCache(Vec<(SymbolsKey, Option<Symbols>)>);

impl SymbolCache {
    fn take(&mut self, key: &SymbolsKey) -> Symbols {
        if let Some((_, s)) = self.0.iter_mut().find(|(k, _)| k == key) {
            if let Some(s) = s.take() {
                return s;
            }
        }
        let (build, family, pointer_size, pdb) = key;
        Symbols::none(*pointer_size).with_builtin_for(*build, *family, pdb.as_ref())
    }

    /// Give the context's symbols back (kept for at most 32 keys).
    fn put(&mut self, ctx: KernelContext<'_>) {
        let key = symbols_key(&ctx);
        if let Some(i) = self.0.iter().position(|(k, _)| *k == key) {
            self.0[i].1 = Some(ctx.symbols);
        } else if self.0.len() < 32 {
            self.0.push((key, Some(ctx.symbols)));
        }
    }
}

thread_local! {
    static SYMBOLS: std::cell::RefCell<SymbolCache> = Default::default();
}

fn symbols_key(ctx: &KernelContext<'_>) -> SymbolsKey {
    let arch = ctx.dump.header().arch;
    (
        ctx.build,
        TableFamily::of(arch),
        arch.pointer_size(),
        ctx.kernel_pdb().cloned(),
    )
}

/// `KernelContext::without_symbols(d)` as src/kernel/context.rs assembles it (same readers,
/// same kernel base and build choice), with the built-in tables from [`SymbolCache`] and
/// without the check of their RVAs and the warnings.
fn quick_context(d: &DumpFile) -> KernelContext<'_> {
    let h = d.header();
    let space = AddressSpace::kernel(d);
    let kdbg = KdDebuggerData::read(&space, h.kd_debugger_data_block);
    let kuser = KUserSharedData::read(&space);
    let modules = if h.ps_loaded_module_list.get() != 0 {
        modules::walk(&space, h.ps_loaded_module_list)
    } else {
        Err(MemError::NonCanonical {
            va: h.ps_loaded_module_list,
        })
    };
    let kdbg_base = match &kdbg {
        KdbgState::Decoded(k) => k.kern_base().and_then(|b| space.normalize(b).ok()),
        _ => None,
    };
    let (base, base_source) = etwdump::kernel::context::kernel_base(&modules, d, kdbg_base);
    let build = match &kuser {
        Ok(k) if k.nt_major_version >= 10 && k.build_number() != 0 => k.build_number(),
        _ => h.minor_version,
    };
    let image = base.map(|b| KernelImage::read(&space, b));
    let key = (
        build,
        TableFamily::of(h.arch),
        h.arch.pointer_size(),
        image.as_ref().and_then(|i| i.pdb.as_ref().ok()).cloned(),
    );
    let symbols = SYMBOLS.with(|c| c.borrow_mut().take(&key));
    KernelContext {
        dump: d,
        space,
        kdbg,
        kuser,
        modules,
        base,
        base_source,
        kdbg_base,
        image,
        build,
        symbols,
        symbol_match: SymbolMatch::NoSymbols,
        // without_symbols starts from the dump's warnings; nothing below reads them.
        warnings: Vec::new(),
        etw_support: std::sync::OnceLock::new(),
        silo: std::sync::OnceLock::new(),
        machine: etwdump::mem::Machine::of_container(d),
    }
}

/// 1 in N inputs gets `KernelContext::without_symbols` (N = ETWDUMP_FUZZ_CONTEXT_EVERY,
/// default 8; 0: never, 1: every input); the others the harness's `quick_context`.
fn context_every() -> u32 {
    static N: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("ETWDUMP_FUZZ_CONTEXT_EVERY")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(8)
    })
}

/// FNV-1a over the length and 64 bytes spread over the input: a deterministic choice per
/// input (libFuzzer needs runs to be reproducible) that most mutations move.
fn sample_hash(data: &[u8]) -> u32 {
    let step = (data.len() / 64).max(1);
    let mut h = 0x811C_9DC5u32 ^ data.len() as u32;
    for x in data.iter().step_by(step).take(64) {
        h = (h ^ u32::from(*x)).wrapping_mul(0x0100_0193);
    }
    h
}

fuzz_target!(|data: &[u8]| {
    let hash = sample_hash(data);
    let lenient = DumpFile::from_bytes(
        data.to_vec(),
        OpenOptions {
            allow_truncated: true,
        },
    );
    // `allow_truncated` only turns "the data ends past the end of the file" into a warning
    // (src/dump/mod.rs, triage.rs). So the strict open must fail with `Truncated` exactly when
    // the lenient one warns of truncation, and otherwise give the same dump; it is checked on
    // every truncated input and on a quarter of the others (a second copy and parse of the
    // input is a fifth of a run).
    // Memory images (ELF cores, VMware snapshots with their memory; raw images need 1 MiB,
    // more than -max_len): the discovery of the architecture and DTB, then the kernel-image
    // scan of the kernel layer below.
    // The machine discovery finds (an image's; a crash dump's header); its warnings.
    let lenient_machine = lenient
        .as_ref()
        .ok()
        .map(|l| etwdump::kernel::discover::machine(l));
    if let (Ok(l), Some(Ok(m))) = (&lenient, &lenient_machine) {
        if l.image().is_some() {
            // As the CLI: the kernel is looked for only through page tables discovery found.
            let ctx = KernelContext::without_symbols_on(l, m.clone());
            let _ = etwdump::kernel::discover::find_kernel(&ctx.space);
        }
    }
    if let Ok(l) = &lenient {
        let truncated = l.truncation().is_some();
        if truncated || hash % 4 == 1 {
            match DumpFile::from_bytes(data.to_vec(), OpenOptions::default()) {
                Ok(s) => {
                    // The same discovery as the lenient dump had (it may add a warning).
                    let machine = etwdump::kernel::discover::machine(&s);
                    assert_eq!(
                        machine.as_ref().ok().map(|m| &m.warnings),
                        lenient_machine
                            .as_ref()
                            .and_then(|m| m.as_ref().ok())
                            .map(|m| &m.warnings),
                        "the same dump, other discovery warnings"
                    );
                    assert!(
                        !truncated,
                        "opens without allow_truncated, yet warns of truncation"
                    );
                    assert_eq!(s.warnings(), l.warnings(), "the same dump, other warnings");
                    assert_eq!(
                        (s.len(), s.stored_pages(), s.has_physical_memory()),
                        (l.len(), l.stored_pages(), l.has_physical_memory())
                    );
                }
                Err(e) => assert!(
                    truncated && matches!(e, DumpError::Truncated { .. }),
                    "only truncation may separate the two opens: {e}; warnings {:?}",
                    l.warnings()
                ),
            }
        }
        let n = context_every();
        exercise(l, n != 0 && hash % n == 0);
    }
});
