//! A layout is a hypothesis until the dump confirms it (issue 26, item 2): `_KPRCB.EtwSupport`
//! from a layout that is not the kernel's own (the nearest earlier build's, an era table) is
//! confirmed by what the blocks it points to hold, found by a validated search when memory
//! contradicts it, and said to be unconfirmed when nothing in memory can tell — on forge dumps
//! whose pending blocks the forge placed (from the reference).

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::ccswap::find_pending;
use etwdump::etw::etw_support::locate;
use etwdump::kernel::context::{KernelContext, LocatedHow, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};

/// The 22000 fixture's ETW dump with buffers and pending blocks. Its PDB identity is not a
/// corpus build's, so without symbols the layouts are the nearest earlier build's
/// (`builtin-nearest`): a hypothesis.
fn forged_22000() -> (etwdump_forge::Forged, Vec<u8>) {
    let mut c = Config::from_fixture(&common::fixture("x64-22000"));
    c.etw = Some(
        EtwSpec::standard(c.build)
            .with_buffers(c.build)
            .with_pending_ccswap(),
    );
    let f = forge(&c);
    let b = f.to_bytes();
    (f, b)
}

fn builtin(d: &DumpFile) -> KernelContext<'_> {
    KernelContext::open(d, &SymbolOptions::default()).unwrap()
}

/// (pending blocks found, their switches) through the located offset.
fn found(ctx: &KernelContext<'_>) -> (usize, usize) {
    let p = find_pending(ctx);
    let switches = p
        .blocks
        .iter()
        .filter_map(|b| b.decoded.batch.as_ref())
        .map(|b| b.switches.len())
        .sum();
    (p.blocks.len(), switches)
}

#[test]
fn etw_support_is_confirmed_searched_or_unconfirmed_by_evidence() {
    let (f, bytes) = forged_22000();
    let etw = f.etw.as_ref().unwrap();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let ctx = builtin(&d);
    let layout = ctx.symbols.layout("_KPRCB").unwrap();
    assert_eq!(layout.source.name(), "builtin-nearest");
    let off = layout.field("EtwSupport").unwrap().offset;

    // 1. The nearest layout's offset, confirmed by the blocks it leads to.
    let loc = locate(&ctx);
    assert_eq!(
        (loc.offset, loc.how),
        (Some(off), LocatedHow::Confirmed),
        "{}",
        loc.evidence
    );
    let cpus = u64::from(ctx.processors());
    assert!(
        loc.evidence.contains(&format!("of {cpus} CPUs")),
        "{}",
        loc.evidence
    );
    let (pending, switches) = found(&ctx);
    assert_eq!(pending, etw.pending.len());
    assert!(switches > 0);

    // 2. The pointer moved elsewhere in every KPRCB (as if this build kept it at another
    //    offset): the layout's offset is contradicted (NULL everywhere), the search finds the
    //    new one and everything is found through it.
    let prcbs: Vec<u64> = (0..cpus)
        .map(|c| etwdump::kernel::processes::prcb(&ctx, c).unwrap().get())
        .collect();
    let read = |va: u64| -> u64 {
        let o = common::file_offset(&d, va);
        u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap())
    };
    // A slot that is zero on every CPU, 0x100 bytes or more away from the real one.
    let new = (0x100..layout.size - 8)
        .step_by(8)
        .map(|k| ((off + k) % (layout.size - 8)) & !7)
        .find(|&o| prcbs.iter().all(|&p| read(p + o) == 0))
        .expect("a zero slot in the KPRCB");
    let mut moved = bytes.clone();
    for &p in &prcbs {
        let v = read(p + off);
        let (a, b) = (
            common::file_offset(&d, p + off),
            common::file_offset(&d, p + new),
        );
        moved[a..a + 8].copy_from_slice(&0u64.to_le_bytes());
        moved[b..b + 8].copy_from_slice(&v.to_le_bytes());
    }
    let d2 = DumpFile::from_bytes(moved, OpenOptions::default()).unwrap();
    let ctx2 = builtin(&d2);
    let loc = locate(&ctx2);
    assert_eq!(
        (loc.offset, loc.how),
        (Some(new), LocatedHow::Searched),
        "{}",
        loc.evidence
    );
    assert!(
        loc.evidence
            .contains(&format!("{off:#x} has no CPU's evidence")),
        "{}",
        loc.evidence
    );
    assert_eq!(found(&ctx2), (pending, switches));
    let w = find_pending(&ctx2).warnings;
    assert!(
        w.iter().any(|w| w.message.contains("found by search")),
        "{w:?}"
    );

    // 3. No evidence anywhere (every pointer cleared): the layout's offset is used and said
    //    to be unconfirmed, with what that means.
    let mut cleared = bytes.clone();
    for &p in &prcbs {
        let a = common::file_offset(&d, p + off);
        cleared[a..a + 8].copy_from_slice(&0u64.to_le_bytes());
    }
    let d3 = DumpFile::from_bytes(cleared, OpenOptions::default()).unwrap();
    let ctx3 = builtin(&d3);
    let loc = locate(&ctx3);
    // A NULL pointer on every CPU is not plausible: nothing can be confirmed.
    assert_eq!(
        (loc.offset, loc.how),
        (Some(off), LocatedHow::Unconfirmed),
        "{}",
        loc.evidence
    );
    let w = find_pending(&ctx3).warnings;
    assert!(
        w.iter()
            .any(|w| w.kind == etwdump::warning::WarningKind::Unconfirmed
                && w.message.contains("if it is wrong, none is found")),
        "{w:?}"
    );

    // 4. With the kernel's own layout (its PDB) the offset is taken as given.
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of("x64-22000")),
        ..SymbolOptions::default()
    };
    let ctx4 = KernelContext::open(&d2, &opts).unwrap();
    assert_eq!(locate(&ctx4).how, LocatedHow::Symbols);
}

/// `_WMI_LOGGER_CONTEXT` of another build (the nearest earlier one) is confirmed by the pool
/// blocks that hold the contexts, contradicted when a block is too small for it, and left
/// unconfirmed when a block is larger; the warning names the columns at stake.
#[test]
fn logger_context_layout_is_checked_against_its_pool_blocks() {
    use etwdump::etw::loggers::list_sessions;
    let (_, bytes) = forged_22000();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let ctx = builtin(&d);
    let list = list_sessions(&ctx);
    let c = list.layout_check.clone().unwrap();
    assert_eq!(
        (c.source, c.how),
        ("builtin-nearest", LocatedHow::Confirmed),
        "{}",
        c.evidence
    );
    let size = c.size;
    let ids: Vec<u64> = list.sessions.iter().map(|s| s.logger_id).collect();
    assert!(c.evidence.contains(&format!("{ids:?}")), "{}", c.evidence);
    // The POOL_HEADER's BlockSize (byte 2, 16-byte units) of every context, set to `units`.
    let with_units = |delta: i64| -> Vec<u8> {
        let mut b = bytes.clone();
        for s in &list.sessions {
            let o = common::file_offset(&d, s.address.get() - 0x10);
            let units = (size + 0x10).div_ceil(0x10) as i64 + delta;
            b[o + 2] = units as u8;
        }
        b
    };
    // One block too small: contradicted.
    let d2 = DumpFile::from_bytes(with_units(-1), OpenOptions::default()).unwrap();
    let ctx2 = builtin(&d2);
    let l2 = list_sessions(&ctx2);
    let c2 = l2.layout_check.clone().unwrap();
    assert_eq!(c2.how, LocatedHow::Contradicted, "{}", c2.evidence);
    assert_eq!(
        l2.sessions.len(),
        ids.len(),
        "sessions still listed (identity decides)"
    );
    let w = l2
        .warnings
        .iter()
        .find(|w| w.kind == etwdump::warning::WarningKind::Unconfirmed)
        .expect("a warning");
    assert!(w.message.contains("memory contradicts it"), "{}", w.message);
    assert!(w
        .message
        .contains("name, mode, clock, buffer counts, events lost, start time"));
    // Larger blocks: unconfirmed (the structure may have grown).
    let d3 = DumpFile::from_bytes(with_units(2), OpenOptions::default()).unwrap();
    let c3 = list_sessions(&builtin(&d3)).layout_check.unwrap();
    assert_eq!(c3.how, LocatedHow::Unconfirmed, "{}", c3.evidence);
    assert!(
        c3.evidence.contains("larger than this layout"),
        "{}",
        c3.evidence
    );
    // With the PDB: the kernel's own layout, nothing to confirm.
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of("x64-22000")),
        ..SymbolOptions::default()
    };
    let c4 = list_sessions(&KernelContext::open(&d3, &opts).unwrap())
        .layout_check
        .unwrap();
    assert_eq!((c4.source, c4.how), ("pdb", LocatedHow::Symbols));
}

/// A session as compared: logger id, name, BufferSize, ClockType.
type SessionKey = (u64, Option<String>, Option<u64>, Option<u64>);

/// The builds nothing was built against (issue 26 "done when"): the x64 26100 and x86 19569
/// fixture kernels' varied ETW dumps read without symbols give the sessions, buffers and
/// switches (with their UTC times) the kernel's own PDB gives; no compact switch gets a
/// state or wait-reason name on 26100, whose MaximumWaitReason no source gives (the packed
/// value is kept); and the layouts of another build are checked, not trusted.
#[test]
fn newest_and_x86_builds_without_symbols_equal_the_pdb() {
    use etwdump::etw::loggers::list_sessions;
    let seeds: u64 = std::env::var("VARIATION_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut compact = 0;
    for name in ["x64-26100", "x86-19569"] {
        for seed in 0..seeds {
            let w = format!("{name} seed {seed}");
            let f = forge(&Config::from_fixture(&common::fixture(name)).with_variation(seed));
            let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
            let with = KernelContext::open(
                &d,
                &SymbolOptions {
                    pdb: Some(common::pdb_of(name)),
                    ..SymbolOptions::default()
                },
            )
            .unwrap();
            let without = builtin(&d);
            let (a, b) = (list_sessions(&with), list_sessions(&without));
            let ids = |l: &etwdump::etw::loggers::SessionList| -> Vec<SessionKey> {
                l.sessions
                    .iter()
                    .map(|s| {
                        (
                            s.logger_id,
                            s.name.as_ref().map(|n| n.raw().to_string()),
                            s.buffer_size,
                            s.clock_type,
                        )
                    })
                    .collect()
            };
            assert_eq!(ids(&a), ids(&b), "{w}: sessions: {:?}", b.warnings);
            assert!(!a.sessions.is_empty(), "{w}");
            // The layout check says how the logger context layout is known.
            let c = b.layout_check.as_ref().unwrap();
            assert_ne!(c.how, LocatedHow::Contradicted, "{w}: {}", c.evidence);
            // Buffers: the same addresses.
            let bufs = |ctx: &KernelContext<'_>| -> Vec<String> {
                let mut v: Vec<String> = etwdump::report::buffers::analyse(ctx, None)
                    .rows
                    .iter()
                    .filter_map(|r| r.address.clone())
                    .collect();
                v.sort();
                v
            };
            assert_eq!(bufs(&with), bufs(&without), "{w}: buffers");
            // Switches: the same rows, times and state information.
            let key = |r: &etwdump::report::cswitch::SwitchRow| {
                (
                    r.cpu,
                    r.timestamp,
                    r.old_tid,
                    r.new_tid,
                    r.time.clone(),
                    r.old_state.clone(),
                    r.old_wait_reason.clone(),
                    r.old_state_wr,
                )
            };
            let ra = etwdump::report::cswitch::collect(&with, None);
            let rb = etwdump::report::cswitch::collect(&without, None);
            let (ka, kb): (Vec<_>, Vec<_>) = (
                ra.rows.iter().map(key).collect(),
                rb.rows.iter().map(key).collect(),
            );
            assert!(
                ka == kb,
                "{w}: switches differ without symbols: {:?}",
                rb.warnings
            );
            eprintln!(
                "{w}: {} sessions, {} buffers, {} switches ({} timed) without symbols; {}: {}",
                b.sessions.len(),
                bufs(&without).len(),
                kb.len(),
                kb.iter().filter(|k| k.4.is_some()).count(),
                c.type_name,
                c.evidence
            );
            if name == "x64-26100" {
                for r in rb.rows.iter().filter(|r| r.old_state_wr.is_some()) {
                    assert_eq!((&r.old_state, &r.old_wait_reason), (&None, &None), "{w}");
                    compact += 1;
                }
            }
        }
    }
    assert!(
        compact > 0,
        "26100: compact switches with their packed state only"
    );
}

/// The 26100 fixture's ETW dump with providers: without symbols, the layouts are the public
/// 24H2 ones (`builtin-nearest`), and the table holds a second layout of the provider
/// structures (`type-layouts-11-24H2`).
fn forged_26100() -> (etwdump_forge::Forged, Vec<u8>) {
    let mut c = Config::from_fixture(&common::fixture("x64-26100"));
    c.etw = Some(EtwSpec::standard(c.build).with_providers());
    let c = c.with_processes();
    let f = forge(&c);
    let b = f.to_bytes();
    (f, b)
}

fn provider_guids(ctx: &KernelContext<'_>) -> Vec<String> {
    let (t, _) = etwdump::report::providers::read(ctx);
    let mut g: Vec<String> = t
        .providers
        .iter()
        .map(|p| p.guid.clone().unwrap_or_default())
        .collect();
    g.sort();
    g
}

/// The host silo state without its RVA: the logger contexts name it, and the one layout of
/// the build whose logger-array field leads back to the array is used (issue 26, item 1:
/// choose between a build's layouts by evidence).
#[test]
fn silo_state_and_its_layout_from_the_logger_contexts() {
    use etwdump::etw::silo;
    let (f, mut bytes) = forged_26100();
    let etw = f.etw.as_ref().unwrap();
    let silo_va = etw.silo_state_va.expect("26100 has a silo state");
    let (guids_pdb, n_pdb) = {
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(
            &d,
            &SymbolOptions {
                pdb: Some(common::pdb_of("x64-26100")),
                ..Default::default()
            },
        )
        .unwrap();
        let g = provider_guids(&ctx);
        let n = g.len();
        (g, n)
    };
    assert!(n_pdb > 0, "the forge planted providers");
    eprintln!("providers with the PDB: {n_pdb}");

    // 1. The first layout (the one in use): confirmed; providers without symbols equal the
    //    PDB's.
    {
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
        let ctx = builtin(&d);
        assert!(ctx.global("EtwpHostSiloState").is_none());
        let c = silo::check(&ctx);
        assert_eq!(c.address.map(|a| a.get()), Some(silo_va), "{}", c.evidence);
        assert_eq!(c.how, Some(LocatedHow::Confirmed), "{}", c.evidence);
        assert_eq!(c.chosen, None);
        assert!(
            c.evidence.contains("+0x1c8 (EtwpLoggerContext)"),
            "{}",
            c.evidence
        );
        assert!(
            c.evidence.contains("type-layouts-11-24H2"),
            "{}",
            c.evidence
        );
        assert_eq!(
            silo::layout(&ctx, "_ETW_GUID_ENTRY").unwrap().size,
            0x1A8,
            "the first layout's GUID entry"
        );
        assert_eq!(provider_guids(&ctx), guids_pdb);
        let (t, _) = etwdump::report::providers::read(&ctx);
        assert_eq!(
            t.table.unwrap().route,
            "logger contexts' SiloState -> _ETW_SILODRIVERSTATE.EtwpGuidHashTable"
        );
        let info = etwdump::report::info::info_with(&ctx);
        let row = info
            .layout_checks
            .iter()
            .find(|c| c.what == "_ETW_SILODRIVERSTATE")
            .expect("info reports the silo layout check");
        assert_eq!(row.how, LocatedHow::Confirmed);
    }

    // 2. The array pointer where the second layout keeps it (+0x2C8, first layout's +0x1C8
    //    zeroed): that layout is chosen, with its GUID and registration entries.
    let d0 = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let a = common::file_offset(&d0, silo_va + 0x1C8);
    let b = common::file_offset(&d0, silo_va + 0x2C8);
    drop(d0);
    let arr: [u8; 8] = bytes[a..a + 8].try_into().unwrap();
    assert_eq!(u64::from_le_bytes(arr), etw.array_va);
    let saved_b: [u8; 8] = bytes[b..b + 8].try_into().unwrap();
    bytes[a..a + 8].fill(0);
    bytes[b..b + 8].copy_from_slice(&arr);
    {
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
        let ctx = builtin(&d);
        let c = silo::check(&ctx);
        assert_eq!(c.address.map(|a| a.get()), Some(silo_va), "{}", c.evidence);
        assert_eq!(c.how, Some(LocatedHow::Confirmed));
        assert_eq!(c.chosen.as_deref(), Some("type-layouts-11-24H2"));
        assert!(
            c.evidence.contains("+0x2c8 (EtwpLoggerContext)"),
            "{}",
            c.evidence
        );
        for (t, size) in [
            ("_ETW_SILODRIVERSTATE", 0x1348),
            ("_ETW_GUID_ENTRY", 0x2A8),
            ("_ETW_REG_ENTRY", 0x78),
        ] {
            assert_eq!(silo::layout(&ctx, t).unwrap().size, size, "{t}");
        }
        // The rest of the layouts stay the first's.
        assert_eq!(
            silo::layout(&ctx, "_WMI_LOGGER_CONTEXT").unwrap().size,
            0x650
        );
    }

    // 3. Neither offset leads back: no silo state, and a warning says why.
    bytes[b..b + 8].copy_from_slice(&saved_b);
    {
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
        let ctx = builtin(&d);
        let c = silo::check(&ctx);
        assert_eq!(c.address, None);
        assert_eq!(c.how, Some(LocatedHow::Contradicted), "{}", c.evidence);
        let r = etwdump::etw::routes::resolve_logger_array(&ctx);
        assert!(r.silo_state.is_none());
        assert!(
            r.warnings.iter().any(|w| w
                .to_string()
                .contains("_ETW_SILODRIVERSTATE layout contradicted")),
            "{:?}",
            r.warnings
        );
        // Sessions are still listed through the KDBG's array.
        let list = etwdump::etw::loggers::list_sessions(&ctx);
        assert_eq!(
            list.sessions.len(),
            etw.slots
                .iter()
                .filter(|s| matches!(s, etwdump_forge::ExpectedSlot::Session(_)))
                .count()
        );
    }
}
