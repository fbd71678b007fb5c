//! Pending (never flushed) CCSWAP blocks in each CPU's KPRCB.EtwSupport block (forge
//! src/etw.rs `with_pending_ccswap`, encoded with the independent forge encoder): found by the
//! documented offset on 14393 and by the validated search on 1709+, decoded exactly; decoys
//! (wrong pool tag, invalid UsedBytes) rejected.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::ccswap::{find_pending, FoundBy};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};
use std::path::Path;

/// A forge dump of fixture `name` with buffers (and pending blocks when `pending`), opened,
/// with the options naming the fixture's PDB.
fn forged(name: &str, pending: bool) -> (etwdump_forge::Forged, DumpFile, SymbolOptions) {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let mut c = Config::from_fixture(&fx);
    let spec = EtwSpec::standard(c.build).with_buffers(c.build);
    c.etw = Some(if pending {
        spec.with_pending_ccswap()
    } else {
        spec
    });
    let f = forge(&c);
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    (f, d, opts)
}

#[test]
fn pending_blocks_as_forged() {
    for name in ["x64-14393", "x64-17763", "x64-17763b", "x64-19041"] {
        let (f, d, opts) = forged(name, true);
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let got = find_pending(&ctx);
        let etw = f.etw.as_ref().unwrap();
        assert!(etw.pending.len() >= 4, "{name}");
        assert_eq!(
            got.blocks.len(),
            etw.pending.len(),
            "{name}: {:?}",
            got.warnings
        );
        let mut switches = 0;
        for e in &etw.pending {
            let g = got
                .blocks
                .iter()
                .find(|b| b.block.get() == e.block_va)
                .unwrap_or_else(|| {
                    panic!(
                        "{name}: block {:#x} not found; {:?}",
                        e.block_va, got.warnings
                    )
                });
            let w = format!("{name}: CPU {} block {:#x}", e.cpu, e.block_va);
            assert_eq!(g.cpu, u64::from(e.cpu), "{w}");
            assert_eq!(g.pointer.get(), e.pointer_va, "{w}");
            assert_eq!(g.clock, e.clock.map(u64::from), "{w}");
            match (e.clock, g.found_by) {
                (Some(k), FoundBy::KnownOffset { offset }) => {
                    assert_eq!(offset, 0xB20 + 8 * u64::from(k), "{w}")
                }
                (None, FoundBy::Search { .. }) => {}
                (c, fb) => panic!("{w}: clock {c:?} found by {fb:?}"),
            }
            assert_eq!(g.decoded.used_bytes, e.used_bytes, "{w}");
            assert_eq!(g.decoded.start_tick, e.start_tick, "{w}");
            match (&e.batch, &g.decoded.batch) {
                (None, None) => {}
                (Some(want), Some(have)) => {
                    assert!(have.warnings.is_empty(), "{w}: {:?}", have.warnings);
                    assert_eq!(have.first_time, want.first_time, "{w}");
                    assert_eq!(have.switches.len(), want.switches.len(), "{w}");
                    for (i, (h, s)) in have.switches.iter().zip(&want.switches).enumerate() {
                        assert_eq!((h.time, h.old_tid), (s.time, s.old_tid), "{w}: switch {i}");
                        if s.old_tid != 0 {
                            assert_eq!(
                                h.old_priority,
                                Some(s.old_priority as i8),
                                "{w}: switch {i}"
                            );
                            assert_eq!(h.old_state, Some(s.old_state), "{w}: switch {i}");
                            assert_eq!(
                                h.old_wait_reason,
                                (s.old_state == 5).then_some(s.old_wait_reason),
                                "{w}: switch {i}"
                            );
                        }
                    }
                    switches += have.switches.len();
                }
                (a, b) => panic!(
                    "{w}: batch expected {} decoded {}",
                    a.is_some(),
                    b.is_some()
                ),
            }
        }
        // Decoys: the 'Etwp'-tagged block is ignored; the 'CCsw' block with UsedBytes 0x50 is
        // reported.
        for dcy in &etw.pending_decoys {
            assert!(
                got.blocks.iter().all(|b| b.block.get() != dcy.block_va),
                "{name}: decoy {:#x} listed",
                dcy.block_va
            );
        }
        if f.config.build > 14393 {
            assert_eq!(
                etw.pending_decoys.len(),
                2 * usize::try_from(f.config.cpus).unwrap(),
                "{name}"
            );
            let bad = etw
                .pending_decoys
                .iter()
                .filter(|d| d.why.contains("UsedBytes"))
                .count();
            assert_eq!(
                bad,
                usize::try_from(f.config.cpus).unwrap(),
                "{name}: {:?}",
                etw.pending_decoys
            );
            let reported = got
                .warnings
                .iter()
                .filter(|w| {
                    w.message.contains("fails validation") && w.message.contains("UsedBytes 0x50")
                })
                .count();
            assert_eq!(reported, bad, "{name}: {:?}", got.warnings);
        }
        // cswitch lists every pending switch with its CPU.
        let rep = etwdump::report::cswitch::collect(&ctx, None);
        assert_eq!(
            rep.rows.iter().filter(|r| r.source == "pending").count(),
            switches,
            "{name}"
        );
    }
}

/// `extract` writes every open pending batch into the ETL of each kernel session of its clock
/// type (etw-internals.md §4.1) as one 0x0525 PERFINFO event in a CTX_SWAP buffer (BufferType
/// 2): the event's payload decodes to exactly the forge's switches, its timestamp is the block's
/// LastTimeStamp, the buffer carries the CPU; the manifest lists the buffers as
/// "pending_ccswap".
#[test]
fn pending_batches_in_extracted_etl() {
    let (f, d, opts) = forged("x64-14393", true);
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m = etwdump::report::extract::extract(&ctx, "d.dmp", dir.path(), None, false).unwrap();
    let etw = f.etw.as_ref().unwrap();
    let mut written = 0;
    for s in &m.sessions {
        let want_clock = match s.logger_id {
            0 => Some(3), // NT Kernel Logger, CPU cycles
            2 => Some(1), // CKCL: SYSTEM_LOGGER_MODE, QPC
            _ => None,
        };
        let want: Vec<_> = etw
            .pending
            .iter()
            .filter(|p| p.clock.is_some() && p.clock == want_clock)
            .filter(|p| p.batch.as_ref().is_some_and(|b| !b.switches.is_empty()))
            .collect();
        let bytes = std::fs::read(dir.path().join(&s.file)).unwrap();
        let etl = etwdump::etl::reader::read(&bytes);
        let listed: Vec<_> = s
            .buffer_list
            .iter()
            .filter(|b| b.source == "pending_ccswap")
            .collect();
        // The synthetic buffers are the file's last ones, all CTX_SWAP.
        let ctx_swap: Vec<_> = etl.buffers[etl.buffers.len() - listed.len()..]
            .iter()
            .collect();
        assert!(ctx_swap.iter().all(|b| b.buffer_type == 2));
        assert_eq!(ctx_swap.len(), want.len(), "logger {}", s.logger_id);
        assert_eq!(listed.len(), want.len(), "logger {}", s.logger_id);
        for ((b, l), p) in ctx_swap.iter().zip(&listed).zip(&want) {
            let w = format!("logger {} CPU {}", s.logger_id, p.cpu);
            assert_eq!(l.address, Some(format!("{:#x}", p.block_va)), "{w}");
            assert_eq!(l.cpu, Some(u64::from(p.cpu)), "{w}");
            assert_eq!(l.file_offset, b.offset, "{w}");
            let off = b.offset as usize;
            let buf = &bytes[off..off + b.buffer_size as usize];
            assert_eq!(buf[0x28], p.cpu as u8, "{w}: ProcessorIndex");
            assert_eq!(
                u16::from_le_bytes([buf[0x2A], buf[0x2B]]),
                s.logger_id as u16
            );
            let recs = etwdump::etl::records::records(buf, b.saved_offset as usize);
            assert_eq!(recs.len(), 1, "{w}");
            assert_eq!(recs[0].hook, Some(0x0525), "{w}");
            let batch = p.batch.as_ref().unwrap();
            assert_eq!(
                recs[0].perfinfo_timestamp(buf),
                Some(batch.last_time()),
                "{w}: LastTimeStamp"
            );
            let payload = recs[0].perfinfo_payload(buf).unwrap();
            assert_eq!(payload.len(), p.used_bytes as usize - 0x10, "{w}");
            let got = etwdump::decode::ccswap::decode(payload, Some(p.max_wait_reason));
            assert!(got.warnings.is_empty(), "{w}: {:?}", got.warnings);
            assert_eq!(got.first_time, batch.first_time, "{w}");
            let pairs: Vec<(u64, u32)> = got.switches.iter().map(|s| (s.time, s.old_tid)).collect();
            let want_pairs: Vec<(u64, u32)> =
                batch.switches.iter().map(|s| (s.time, s.old_tid)).collect();
            assert_eq!(pairs, want_pairs, "{w}");
            written += 1;
        }
        assert_eq!(s.buffers, s.buffer_list.len() - 1);
    }
    assert_eq!(
        written, 3,
        "CKCL: CPUs 0 and 1 (QPC); NT Kernel Logger: CPU 3 (cycles)"
    );
}

/// `events` on a full dump: one row per record of every recovered buffer (the counts `buffers`
/// gives), with the session's logger id, the buffer address, hook names for kernel hooks, and
/// the session's clock; CSwitch events named.
#[test]
fn events_on_a_full_dump() {
    let (_, d, opts) = forged("x64-14393", false);
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let b = etwdump::report::buffers::analyse(&ctx, None);
    let ev = etwdump::report::events::collect(&ctx, None);
    let mut want: std::collections::BTreeMap<(u64, String), usize> = Default::default();
    for r in b.rows.iter().filter(|r| !r.compressed) {
        *want
            .entry((r.session_id.unwrap(), r.address.clone().unwrap()))
            .or_default() += r.record_count;
    }
    let mut got: std::collections::BTreeMap<(u64, String), usize> = Default::default();
    for r in &ev.rows {
        assert_eq!(r.source, "memory");
        *got.entry((r.logger_id.unwrap(), r.buffer.clone().unwrap()))
            .or_default() += 1;
    }
    want.retain(|_, n| *n > 0);
    assert_eq!(got, want);
    assert!(ev.rows.len() > 1000, "{}", ev.rows.len());
    let cs = ev
        .rows
        .iter()
        .filter(|r| r.hook.as_deref() == Some("0x0524"))
        .count();
    assert!(cs > 0);
    assert!(ev
        .rows
        .iter()
        .filter(|r| r.hook.as_deref() == Some("0x0524"))
        .all(|r| r.hook_name == Some("CONTEXTSWAP (CSwitch)")));
    // SystemTime sessions: time = the raw FILETIME.
    let sys: Vec<_> = ev
        .rows
        .iter()
        .filter(|r| r.logger_id == Some(3) && r.timestamp.is_some())
        .collect();
    assert!(!sys.is_empty());
    assert!(sys.iter().all(|r| r.filetime == r.timestamp));
}

/// Blocks found by the validated search (1709+: no documented offset) get their clock by
/// inference: the forge puts the clock-1 (QPC) pointer at EtwSupport+0x2A8 on every CPU and
/// stamps the batches with QPC times before the dump; the inferred clock is 1 and every switch
/// of a block with a batch is timed, within the dump's time range.
#[test]
fn search_found_blocks_get_an_inferred_clock() {
    for name in ["x64-17763", "x64-17763b", "x64-19041"] {
        let (f, d, opts) = forged(name, true);
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let list = etwdump::etw::loggers::list_sessions(&ctx);
        let facts = etwdump::etw::clock::ClockFacts::gather(&ctx, &list.sessions);
        let mut got = find_pending(&ctx);
        etwdump::etw::ccswap::infer_clocks(&ctx, &facts, &list.sessions, &mut got);
        let etw = f.etw.as_ref().unwrap();
        assert_eq!(got.blocks.len(), etw.pending.len(), "{name}");
        for b in &got.blocks {
            assert!(
                matches!(b.found_by, FoundBy::Search { offset: 0x2A8 }),
                "{name}"
            );
            if b.decoded.batch.is_some() {
                assert_eq!(b.clock, Some(1), "{name} CPU {}: {}", b.cpu, b.clock_how);
                assert!(b.clock_how.starts_with("inferred"), "{}", b.clock_how);
            }
        }
        let rep = etwdump::report::cswitch::collect(&ctx, None);
        let pending: Vec<_> = rep.rows.iter().filter(|r| r.source == "pending").collect();
        assert!(!pending.is_empty());
        assert!(
            pending
                .iter()
                .all(|r| r.time.is_some() && r.time_flag.is_none()),
            "{name}: {:?}",
            rep.warnings
        );
    }
}
