//! Unit tests of the process list ([`Config::with_processes`]): every x64 fixture with the
//! process types is forged and the list is walked from the FILE BYTES with the tests' own page
//! walker (`Walk`), starting at the header's PsActiveProcessHead, at types.h offsets.

use std::collections::BTreeSet;

use super::{check_probes, fixture_dirs, Walk};
use crate::kernel::types_h::TypesH;
use crate::util::get_u64;
use crate::{forge, Config, EtwSpec, ExpectedProcess, Forged, STANDARD_PROCESSES};

const WANTED: [&str; 5] = [
    "x64-14393",
    "x64-17763",
    "x64-17763b",
    "x64-19041",
    "x64-26100",
];

fn u64_at(w: &Walk, va: u64) -> u64 {
    get_u64(
        &w.read(va, 8)
            .unwrap_or_else(|e| panic!("{va:#x}: unreadable at {e:#x}")),
        0,
    )
}

fn off(t: &TypesH, agg: &str, field: &str) -> u64 {
    t.offset_of(agg, field)
        .unwrap_or_else(|| panic!("{agg}.{field}"))
}

/// Walk a circular LIST_ENTRY list from `head`, checking every Blink; returns the entries.
fn walk_list(w: &Walk, head: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut prev = head;
    let mut cur = u64_at(w, head);
    while cur != head {
        assert_eq!(u64_at(w, cur + 8), prev, "Blink of {cur:#x}");
        assert!(
            out.len() < 64,
            "list at {head:#x} does not return to its head"
        );
        out.push(cur);
        prev = cur;
        cur = u64_at(w, cur);
    }
    assert_eq!(u64_at(w, head + 8), prev, "Blink of the head {head:#x}");
    out
}

/// What a reader finds by walking PsActiveProcessHead (taken from the dump header).
fn walk_processes(f: &Forged, file: &[u8]) -> Vec<ExpectedProcess> {
    let w = Walk::new(file);
    let t = TypesH::load(&f.config.fixture.as_ref().unwrap().dir).unwrap();
    let pah = get_u64(file, 0x28);
    assert_eq!(pah, f.ps_active_process_head);
    let links = off(&t, "_EPROCESS", "ActiveProcessLinks");
    walk_list(&w, pah)
        .into_iter()
        .map(|entry| {
            let ep = entry - links;
            assert_eq!(w.read(ep, 1).unwrap()[0], 3, "Pcb.Header.Type");
            let pid = u64_at(&w, ep + off(&t, "_EPROCESS", "UniqueProcessId"));
            let raw = w
                .read(ep + off(&t, "_EPROCESS", "ImageFileName"), 15)
                .unwrap();
            let n = raw.iter().position(|&b| b == 0).unwrap_or(15);
            assert!(raw[n..].iter().all(|&b| b == 0), "ImageFileName NUL padded");
            let name = String::from_utf8(raw[..n].to_vec()).unwrap();
            let te = off(&t, "_ETHREAD", "ThreadListEntry");
            let cid = off(&t, "_ETHREAD", "Cid");
            let ethreads = walk_list(&w, ep + off(&t, "_EPROCESS", "ThreadListHead"));
            // The kernel-side list holds the same threads in the same order.
            let kthreads = walk_list(&w, ep + off(&t, "_KPROCESS", "ThreadListHead"));
            let ke = off(&t, "_KTHREAD", "ThreadListEntry");
            assert_eq!(
                kthreads.iter().map(|k| k - ke).collect::<Vec<_>>(),
                ethreads.iter().map(|e| e - te).collect::<Vec<_>>()
            );
            let threads = ethreads
                .into_iter()
                .map(|e| {
                    let th = e - te;
                    assert_eq!(w.read(th, 1).unwrap()[0], 6, "Tcb.Header.Type");
                    assert_eq!(u64_at(&w, th + off(&t, "_KTHREAD", "Process")), ep);
                    let up = off(&t, "_CLIENT_ID", "UniqueProcess");
                    let ut = off(&t, "_CLIENT_ID", "UniqueThread");
                    assert_eq!(u64_at(&w, th + cid + up), pid, "Cid.UniqueProcess");
                    let tid = u64_at(&w, th + cid + ut);
                    // The thread facts, at the fields types.h names (where it has them:
                    // x64-26100's public layouts keep few KTHREAD / ETHREAD members).
                    let facts = crate::thread_facts(pid, tid);
                    let at = |agg: &str, f: &str| t.offset_of(agg, f).map(|o| th + o);
                    for (agg, f, want) in [
                        ("_KTHREAD", "StackBase", facts.stack_base),
                        ("_KTHREAD", "StackLimit", facts.stack_limit),
                        ("_KTHREAD", "Teb", facts.teb),
                        ("_ETHREAD", "Win32StartAddress", facts.win32_start),
                    ] {
                        if let Some(va) = at(agg, f) {
                            assert_eq!(u64_at(&w, va), want, "{agg}.{f}");
                        }
                    }
                    if let Some(va) = at("_KTHREAD", "BasePriority") {
                        assert_eq!(w.read(va, 1).unwrap()[0], facts.base_priority);
                    }
                    (th, tid)
                })
                .collect();
            ExpectedProcess {
                eprocess_va: ep,
                pid,
                name,
                threads,
                // 0 where types.h has no such field (x64-26100), as the forge records it.
                parent_pid: t
                    .offset_of("_EPROCESS", "InheritedFromUniqueProcessId")
                    .map_or(0, |o| u64_at(&w, ep + o)),
                directory_table_base: u64_at(&w, ep + off(&t, "_KPROCESS", "DirectoryTableBase")),
            }
        })
        .collect()
}

fn process_fixtures() -> Vec<std::path::PathBuf> {
    let dirs: Vec<_> = fixture_dirs()
        .into_iter()
        .filter(|d| WANTED.iter().any(|w| d.ends_with(w)))
        .collect();
    assert_eq!(dirs.len(), WANTED.len(), "fixtures {WANTED:?}");
    dirs
}

#[test]
fn process_list_walks_back_from_the_file_in_every_fixture() {
    for dir in process_fixtures() {
        let f = forge(&Config::from_fixture(&dir).with_processes());
        let file = f.to_bytes();
        let found = walk_processes(&f, &file);
        assert_eq!(found, f.processes, "{}", dir.display());
        // The expectation is the standard table.
        assert_eq!(found.len(), STANDARD_PROCESSES.len());
        for (p, &(pid, name, tids)) in found.iter().zip(STANDARD_PROCESSES) {
            assert_eq!((p.pid, p.name.as_str()), (pid, name));
            assert_eq!(p.threads.iter().map(|t| t.1).collect::<Vec<_>>(), tids);
        }
        check_probes(&f, &file);
    }
}

#[test]
fn processes_together_with_etw_buffers_and_pending_ccswap() {
    let dir = process_fixtures().pop().unwrap();
    let base = Config::from_fixture(&dir);
    let spec = EtwSpec::standard(base.build)
        .with_buffers(base.build)
        .with_pending_ccswap();
    let f = forge(&base.with_etw(spec).with_processes());
    let file = f.to_bytes();
    assert_eq!(walk_processes(&f, &file), f.processes);
    check_probes(&f, &file);
}

#[test]
fn process_tids_cover_the_pending_ccswap_batches() {
    let tids: BTreeSet<u64> = STANDARD_PROCESSES
        .iter()
        .flat_map(|p| p.2.iter().copied())
        .collect();
    let all: Vec<u64> = STANDARD_PROCESSES
        .iter()
        .flat_map(|p| p.2.iter().copied())
        .collect();
    assert_eq!(tids.len(), all.len(), "TIDs are unique");
    // The batches place_pending uses (etw.rs), decoy included.
    for (desc, batch, _) in crate::etw::ccswap::known_batches() {
        let used = [
            "block filled",
            "priority increments",
            "open batch with no",
            "delta limits",
            "idle switches",
            "wait time 0 and 1",
        ]
        .iter()
        .any(|p| desc.starts_with(p));
        if used {
            for s in &batch.switches {
                assert!(
                    s.old_tid == 0 || tids.contains(&u64::from(s.old_tid)),
                    "{desc}: TID {:#x}",
                    s.old_tid
                );
            }
        }
    }
}

#[test]
fn without_processes_nothing_changes() {
    let dir = process_fixtures().pop().unwrap();
    let off = Config::from_fixture(&dir);
    assert!(!off.processes);
    let f = forge(&off);
    assert!(f.processes.is_empty());
    let bytes = f.to_bytes();
    let w = Walk::new(&bytes);
    let pah = f.ps_active_process_head;
    assert_eq!((u64_at(&w, pah), u64_at(&w, pah + 8)), (pah, pah));
    let on = forge(&off.clone().with_processes());
    assert_ne!(on.to_bytes(), bytes);
    assert_eq!(on.to_bytes(), forge(&off.with_processes()).to_bytes());
}

#[test]
#[should_panic(expected = "x64 fixture")]
fn processes_need_a_fixture() {
    forge(&Config::x64().with_processes());
}

/// The real-time consumers of the sample ([`Config::sample_etw`]): walked from the FILE BYTES,
/// each session's `Consumers` list holds exactly the expected `_ETW_REALTIME_CONSUMER`s in
/// order, each pointing at its process's EPROCESS (whose UniqueProcessId is the PID), with
/// its LoggerId, and `NumConsumers` counts them; sessions without consumers keep an empty list.
#[test]
fn realtime_consumers_walk_back_from_the_file() {
    let f = forge(&Config::sample_etw());
    let file = f.to_bytes();
    let w = Walk::new(&file);
    let t = TypesH::load(&f.config.fixture.as_ref().unwrap().dir).unwrap();
    let rc = "_ETW_REALTIME_CONSUMER";
    let mut with = 0;
    for s in f.etw.as_ref().unwrap().sessions() {
        let head = s.context_va + off(&t, "_WMI_LOGGER_CONTEXT", "Consumers");
        let got = walk_list(&w, head);
        let want: Vec<u64> = s.consumers.iter().map(|c| c.va).collect();
        assert_eq!(got, want, "logger {}", s.logger_id);
        let n = w
            .read(
                s.context_va + off(&t, "_WMI_LOGGER_CONTEXT", "NumConsumers"),
                4,
            )
            .unwrap();
        assert_eq!(
            u32::from_le_bytes(n[..4].try_into().unwrap()) as usize,
            want.len()
        );
        for c in &s.consumers {
            let ep = u64_at(&w, c.va + off(&t, rc, "ProcessObject"));
            assert_eq!(ep, c.eprocess);
            assert_eq!(
                u64_at(&w, ep + off(&t, "_EPROCESS", "UniqueProcessId")),
                c.pid
            );
            let id = w.read(c.va + off(&t, rc, "LoggerId"), 2).unwrap();
            assert_eq!(u32::from(u16::from_le_bytes([id[0], id[1]])), s.logger_id);
        }
        with += usize::from(!want.is_empty());
    }
    assert_eq!(with, 2, "sessions 3 and 6 have consumers");
}
