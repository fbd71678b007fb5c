//! The buffers queued for real-time consumers (issue 17) against forge dumps whose consumers
//! hold them in their own address spaces (tests/forge src/etw/realtime.rs, written from the
//! reference independently of the reader, varying what the reference leaves open: the node
//! shape — the buffer's own SlistEntry or a descriptor with the pointer at 0x10/0x18/0x28/0x30
//! —, the head shape, a stale UserBufferCount, the reserved region with decoys, shared user
//! VAs in two processes, duplicates of kernel buffers, and damage).

mod common;
use common::{etwdump, fixture, pdb_of, FIXTURES};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::buffers::{find_buffers, read_buffer, BufferList, FoundBuffer};
use etwdump::etw::loggers::list_sessions;
use etwdump::etw::realtime::FoundVia;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::warning::Warning;
use etwdump_forge::{
    fnv1a64, forge, realtime_config, Config, CountShape, ExpectedConsumer, Forged, NodeShape,
};
use std::collections::HashMap;

/// What the reader found: per session (logger id) its buffers and warnings, and the
/// hash of every consumer buffer's bytes (by address space and address), read as `extract`
/// reads them.
struct Found {
    sessions: HashMap<u64, (Vec<FoundBuffer>, Vec<Warning>)>,
    hashes: HashMap<(u64, u64), u64>,
}

fn read_all(f: &Forged, name: &str) -> Found {
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb_of(name)),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let l = list_sessions(&ctx);
    let array = l.array.as_ref().expect("array");
    let mut out = Found {
        sessions: HashMap::new(),
        hashes: HashMap::new(),
    };
    for s in &l.sessions {
        let found = find_buffers(&ctx, array, s);
        for b in &found.buffers {
            if let Some(o) = &b.owner {
                let bytes = read_buffer(&ctx, b).unwrap();
                out.hashes
                    .insert((o.directory_table_base, b.address.get()), fnv1a64(&bytes));
            }
        }
        out.sessions
            .insert(s.logger_id, (found.buffers, found.warnings));
    }
    out
}

/// Compare one consumer's expected queued buffers with what the reader found; returns the
/// number of buffers compared.
fn compare_consumer(
    what: &str,
    c: &ExpectedConsumer,
    bufs: &[FoundBuffer],
    warnings: &[Warning],
    hashes: &HashMap<(u64, u64), u64>,
) -> usize {
    let Some(rt) = &c.realtime else { return 0 };
    let mine: Vec<&FoundBuffer> = bufs
        .iter()
        .filter(|b| {
            b.owner
                .as_ref()
                .is_some_and(|o| o.directory_table_base == rt.dtb)
        })
        .collect();
    let text: Vec<String> = warnings.iter().map(|w| w.message.clone()).collect();
    let mut compared = 0;
    let mut want_vas = Vec::new();
    for (k, u) in rt.user_buffers.iter().enumerate() {
        if u.va == 0 || !u.readable {
            // A NULL pointer or a copy not in the dump: no buffer, and a warning names the
            // node (or, for an embedded node inside the copy, the list's unreadable link).
            assert!(
                !mine.iter().any(|b| u.va != 0 && b.address.get() == u.va),
                "{what}: node {k}: an unreadable/NULL copy was reported"
            );
            let node = format!("{:#x}", u.node_va);
            let named = text.iter().any(|t| t.contains(&node));
            let head_node = u.node_va == rt.user_buffer_list_head && k == 0;
            assert!(
                named || head_node,
                "{what}: node {k} at {node}: no warning names it: {text:?}"
            );
            continue;
        }
        want_vas.push(u.va);
        let b = mine
            .iter()
            .find(|b| b.address.get() == u.va)
            .unwrap_or_else(|| panic!("{what}: node {k}: copy {:#x} not found; {text:?}", u.va));
        assert_eq!(b.header.sequence_number, u.sequence_number, "{what} {k}");
        assert_eq!(
            b.header.processor_index,
            u64::from(u.processor & 0x7FF),
            "{what} {k}"
        );
        assert_eq!(b.header.logger_id, u64::from(u.logger_id), "{what} {k}");
        assert_eq!(b.header.state, u64::from(u.state), "{what} {k}");
        assert_eq!(
            b.header.valid_bytes(),
            Some(u64::from(u.valid_bytes)),
            "{what} {k}"
        );
        assert_eq!(
            hashes.get(&(rt.dtb, u.va)).copied(),
            Some(u.fnv1a64),
            "{what} {k}: bytes read through the consumer's page tables"
        );
        assert!(b.lists.contains(&BufferList::UserBufferList), "{what} {k}");
        assert_eq!(
            b.lists.contains(&BufferList::ReservedBufferSpace),
            u.slot.is_some(),
            "{what} {k}: lists {:?}",
            b.lists
        );
        let want_via = match rt.node {
            NodeShape::Embedded => FoundVia::SlistEntry {
                node: etwdump::addr::VirtAddr::new(u.node_va),
                offset: 0x20,
            },
            NodeShape::Descriptor { ptr_offset } => FoundVia::NodePointer {
                node: etwdump::addr::VirtAddr::new(u.node_va),
                offset: ptr_offset,
            },
        };
        assert_eq!(b.via, Some(want_via), "{what} {k}");
        assert_eq!(
            b.copy_of.map(|a| a.get()),
            u.duplicate_of,
            "{what} {k}: duplicate"
        );
        let o = b.owner.as_ref().unwrap();
        assert_eq!(o.consumer.get(), c.va, "{what} {k}");
        assert_eq!(o.pid, Some(c.pid), "{what} {k}");
        compared += 1;
    }
    // Nothing else of this consumer's: the decoys (another LoggerId) are not taken.
    for b in &mine {
        assert!(
            want_vas.contains(&b.address.get()),
            "{what}: unexpected buffer {} ({:?})",
            b.address,
            b.lists
        );
    }
    for d in &rt.decoys {
        assert!(
            !mine.iter().any(|b| b.address.get() == d.va),
            "{what}: decoy"
        );
    }
    // UserBufferCount: a warning exactly when it disagrees with the buffers the list gives
    // (and the list was walked to its end).
    let count_warned = text.iter().any(|t| {
        t.contains(&format!("consumer {:#x}", c.va)) && t.contains("UserBufferCount says")
    });
    let damaged = rt.spec.damage != Default::default();
    if !damaged {
        let stale = matches!(rt.spec.count, CountShape::Stale(v) if v as usize != want_vas.len());
        assert_eq!(count_warned, stale, "{what}: count warning; {text:?}");
    }
    compared
}

fn check_config(
    what: &str,
    name: &str,
    c: &Config,
    shapes: &mut std::collections::HashSet<String>,
) -> usize {
    let f = forge(c);
    let got = read_all(&f, name);
    let e = f.etw.as_ref().unwrap();
    let mut n = 0;
    for s in e.sessions() {
        let (bufs, warnings) = &got.sessions[&u64::from(s.logger_id)];
        for c in &s.consumers {
            if let Some(rt) = &c.realtime {
                shapes.insert(format!("{:?} {:?}", rt.node, rt.head));
            }
            n += compare_consumer(
                &format!("{what} logger {} PID {:#x}", s.logger_id, c.pid),
                c,
                bufs,
                warnings,
                &got.hashes,
            );
        }
        // Kernel buffers are still found as before (none of them owned).
        assert!(
            bufs.iter()
                .filter(|b| b.owner.is_none())
                .all(|b| b.header.logger_id == u64::from(s.logger_id)),
            "{what}"
        );
    }
    n
}

/// Every x64 fixture kernel, several seeds and the damaged variant: each consumer's queued
/// buffers are found in its own address space, with the header, bytes, lists and route the
/// forge placed; decoys are not taken; a stale UserBufferCount is a warning.
#[test]
fn queued_buffers_of_every_consumer_as_forged() {
    let mut total = 0;
    let mut shapes = std::collections::HashSet::new();
    for name in FIXTURES.iter().filter(|n| n.starts_with("x64")) {
        for seed in 0..4u64 {
            let c = realtime_config(&fixture(name), seed, false);
            total += check_config(&format!("{name} seed {seed}"), name, &c, &mut shapes);
        }
        let c = realtime_config(&fixture(name), 0, true);
        total += check_config(&format!("{name} damaged"), name, &c, &mut shapes);
    }
    println!("{total} consumer buffers compared");
    assert!(total > 200, "{total} buffers compared");
    // Embedded and the four descriptor offsets, and both head shapes.
    let nodes: std::collections::HashSet<&str> = shapes
        .iter()
        .map(|s| s.rsplit_once(' ').unwrap().0)
        .collect();
    let heads: std::collections::HashSet<&str> = shapes
        .iter()
        .map(|s| s.rsplit_once(' ').unwrap().1)
        .collect();
    assert_eq!((nodes.len(), heads.len()), (5, 2), "{shapes:?}");
}

/// The CLI on the realtime sample: `buffers` rows of consumer buffers name the consumer and
/// the route; `extract` writes the session's kernel and consumer buffers (not the duplicate)
/// into its .etl.
#[test]
fn cli_buffers_and_extract_on_the_realtime_sample() {
    let c = Config::sample_realtime();
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rt.dmp");
    f.write_to(&p).unwrap();
    let pdb = pdb_of("x64-19041");
    let s = p.to_str().unwrap();
    let pdb_text = pdb.to_str().unwrap().to_string();
    let o = etwdump(&["buffers", s, "--pdb", &pdb_text, "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["records"].as_array().unwrap();
    let e = f.etw.as_ref().unwrap();
    let mut user_rows = 0;
    for sess in e.sessions() {
        for con in &sess.consumers {
            let Some(rt) = &con.realtime else { continue };
            for u in rt.user_buffers.iter().filter(|u| u.readable && u.va != 0) {
                let addr = format!("{:#x}", u.va);
                let r = rows
                    .iter()
                    .find(|r| r["address"] == addr.as_str() && r["consumer_pid"] == con.pid)
                    .unwrap_or_else(|| panic!("no row for {addr} of PID {}", con.pid));
                assert_eq!(r["session_id"], sess.logger_id);
                assert_eq!(r["sequence_number"], u.sequence_number);
                assert_eq!(r["record_count"], u.record_count);
                assert!(r["found_via"].as_str().unwrap().contains("list node"));
                match u.duplicate_of {
                    Some(k) => assert_eq!(r["duplicate_of"], format!("{k:#x}")),
                    None => assert!(r["duplicate_of"].is_null()),
                }
                user_rows += 1;
            }
        }
    }
    assert_eq!(user_rows, 8, "3 + 2 + 3 queued copies in the sample");
    // extract: each session's file holds its consumers' copies (the duplicate once, as the
    // kernel buffer it repeats), with the records the forge wrote.
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let out = dir.path().join("etl");
    let m = etwdump::report::extract::extract(&ctx, "forge", &out, None, false).unwrap();
    let mut written = 0;
    for sess in e.sessions() {
        let ms = m
            .sessions
            .iter()
            .find(|x| x.logger_id == u64::from(sess.logger_id))
            .unwrap();
        let bytes = std::fs::read(out.join(&ms.file)).unwrap();
        let etl = etwdump::etl::reader::read(&bytes);
        assert!(etl.problem.is_none());
        for con in &sess.consumers {
            let Some(rt) = &con.realtime else { continue };
            for u in rt.user_buffers.iter().filter(|u| u.readable && u.va != 0) {
                let at = format!("{:#x}", u.va);
                let hits: Vec<usize> = ms
                    .buffer_list
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.address.as_deref() == Some(at.as_str()))
                    .map(|(i, _)| i)
                    .collect();
                if let Some(k) = u.duplicate_of {
                    assert!(hits.is_empty(), "the duplicate {at} is written once");
                    let kat = format!("{k:#x}");
                    assert_eq!(
                        ms.buffer_list
                            .iter()
                            .filter(|b| b.address.as_deref() == Some(kat.as_str()))
                            .count(),
                        1
                    );
                    continue;
                }
                // Copies of two consumers may share a VA (their own processes): at least one.
                assert!(
                    !hits.is_empty(),
                    "logger {}: {at} not in the file: {:?} skipped {:?}",
                    sess.logger_id,
                    ms.buffer_list
                        .iter()
                        .map(|b| (b.address.clone(), b.source))
                        .collect::<Vec<_>>(),
                    ms.skipped
                );
                assert!(
                    hits.iter()
                        .any(|&i| etl.buffers[i].records == u.record_count as usize),
                    "logger {}: {at}: records",
                    sess.logger_id
                );
                written += 1;
            }
        }
    }
    assert_eq!(written, 7, "8 copies, one a duplicate");
}

/// Hostile consumer fields: a UserBufferListHead in kernel space, a ReservedBufferSpaceSize
/// of 4 GiB, a DirectoryTableBase that leads nowhere. Each is a warning naming the field
/// and the consumer; the other consumers' buffers are still found; every walk stays bounded.
#[test]
fn hostile_consumer_fields_are_warnings() {
    let name = "x64-19041";
    let c = realtime_config(&fixture(name), 1, false);
    let f = forge(&c);
    let e = f.etw.as_ref().unwrap();
    let s3 = e.sessions().find(|s| s.logger_id == 3).unwrap();
    let (a, b) = (&s3.consumers[0], &s3.consumers[1]);
    // x64 offsets of every build (shared/layouts): _ETW_REALTIME_CONSUMER.UserBufferListHead
    // 0x48, ReservedBufferSpaceSize 0x78; KPROCESS.DirectoryTableBase 0x28.
    let mut bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let mut put = |va: u64, v: &[u8]| {
        let off = common::file_offset(&d, va);
        bytes[off..off + v.len()].copy_from_slice(v);
    };
    put(a.va + 0x48, &0xFFFF_F800_0000_0000u64.to_le_bytes());
    put(a.va + 0x78, &u32::MAX.to_le_bytes());
    // The other session's consumer in the same process keeps its buffers; the explorer.exe
    // consumer of logger 3 loses its address space.
    put(b.eprocess + 0x28, &0x7FFF_FFFF_F000u64.to_le_bytes());
    let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb_of(name)),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let l = list_sessions(&ctx);
    let array = l.array.as_ref().unwrap();
    let s = l.sessions.iter().find(|s| s.logger_id == 3).unwrap();
    let t0 = std::time::Instant::now();
    let found = find_buffers(&ctx, array, s);
    let took = t0.elapsed();
    let text: Vec<String> = found.warnings.iter().map(|w| w.message.clone()).collect();
    let ca = format!("consumer {:#x}", a.va);
    assert!(
        text.iter().any(|t| t.contains(&ca)
            && t.contains("UserBufferListHead 0xfffff80000000000 is not a user-mode address")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|t| t.contains(&ca)
            && t.contains("ReservedBufferSpaceSize 0xffffffff is over 0x10000000")),
        "{text:?}"
    );
    // The reserved region is still searched: consumer A's copies there are found.
    let rt_a = a.realtime.as_ref().unwrap();
    let in_reserved: Vec<u64> = rt_a
        .user_buffers
        .iter()
        .filter(|u| u.readable && u.va != 0 && u.slot.is_some())
        .map(|u| u.va)
        .collect();
    assert!(
        !in_reserved.is_empty(),
        "seed 1 gives consumer A a reserved region"
    );
    for va in &in_reserved {
        let got = found
            .buffers
            .iter()
            .find(|x| {
                x.address.get() == *va && x.owner.as_ref().is_some_and(|o| o.pid == Some(a.pid))
            })
            .unwrap_or_else(|| panic!("{va:#x}"));
        assert_eq!(
            got.lists.iter().copied().collect::<Vec<_>>(),
            vec![BufferList::ReservedBufferSpace]
        );
    }
    // Consumer B: its process's page tables are not in the dump; nothing of it is reported.
    assert!(!found
        .buffers
        .iter()
        .any(|x| x.owner.as_ref().is_some_and(|o| o.pid == Some(b.pid))));
    assert!(
        text.iter()
            .any(|t| t.contains(&format!("consumer {:#x}", b.va))),
        "{text:?}"
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

/// Random damage in the consumers' own memory (list nodes, descriptors, copies' headers, the
/// count): 120 rounds of random bytes written at random places of those pages. Every walk
/// ends; every consumer buffer still reported has the session's identity (LoggerId and
/// BufferSize) and lies in user space; nothing panics.
#[test]
fn random_damage_in_consumer_memory_stays_bounded() {
    use etwdump::dump::RunList;
    let name = "x64-19041";
    let f = forge(&realtime_config(&fixture(name), 2, false));
    let clean = f.to_bytes();
    // The user pages worth damaging: each consumer's nodes, head, count and copies' headers.
    let mut spots: Vec<(u64, u64)> = Vec::new(); // (dtb, va)
    for s in f.etw.as_ref().unwrap().sessions() {
        for c in &s.consumers {
            let Some(rt) = &c.realtime else { continue };
            spots.push((rt.dtb, rt.user_buffer_list_head));
            spots.push((rt.dtb, rt.user_buffer_count_va));
            for u in &rt.user_buffers {
                spots.push((rt.dtb, u.node_va));
                if u.va != 0 {
                    spots.push((rt.dtb, u.va));
                }
            }
        }
    }
    spots.retain(|&(dtb, va)| va != 0 && f.user_physical_address(dtb, va).is_some());
    assert!(spots.len() > 20);
    let d0 = DumpFile::from_bytes(clean.clone(), OpenOptions::default()).unwrap();
    let Some(runs) = d0.container::<RunList>() else {
        panic!("full dump expected")
    };
    let file_off = |pa: u64| {
        (runs.file_offset(etwdump::addr::Pfn::new(pa >> 12)).unwrap() + (pa & 0xFFF)) as usize
    };
    let offsets: Vec<usize> = spots
        .iter()
        .map(|&(dtb, va)| file_off(f.user_physical_address(dtb, va).unwrap()))
        .collect();
    let opts = SymbolOptions {
        pdb: Some(pdb_of(name)),
        ..SymbolOptions::default()
    };
    let owned_warnings = |b: Vec<u8>| -> (usize, usize) {
        let d = DumpFile::from_bytes(b, OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let l = list_sessions(&ctx);
        let array = l.array.as_ref().unwrap();
        l.sessions
            .iter()
            .filter(|s| !s.consumers.is_empty())
            .map(|s| {
                let f = find_buffers(&ctx, array, s);
                (
                    f.buffers.iter().filter(|x| x.owner.is_some()).count(),
                    f.warnings.len(),
                )
            })
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    let baseline = owned_warnings(clean.clone());
    let mut changed = 0;
    let mut rng = common::Rng(0x5EED_2017);
    for round in 0..120 {
        let mut b = clean.clone();
        for _ in 0..1 + rng.next() % 6 {
            let at = offsets[(rng.next() % offsets.len() as u64) as usize]
                + (rng.next() % 0x48) as usize;
            let n = 1 + (rng.next() % 8) as usize;
            for k in 0..n {
                if at + k < b.len() {
                    b[at + k] = rng.next() as u8;
                }
            }
        }
        if owned_warnings(b.clone()) != baseline {
            changed += 1;
        }
        let d = DumpFile::from_bytes(b, OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let l = list_sessions(&ctx);
        let array = l.array.as_ref().unwrap();
        for s in l.sessions.iter().filter(|s| !s.consumers.is_empty()) {
            let found = find_buffers(&ctx, array, s);
            for x in found.buffers.iter().filter(|x| x.owner.is_some()) {
                assert_eq!(x.header.logger_id, s.logger_id, "round {round}");
                assert_eq!(Some(x.header.buffer_size), s.buffer_size, "round {round}");
                assert!(x.address.get() < 0x0000_8000_0000_0000, "round {round}");
            }
        }
    }
    // The damage reached the reader: most rounds changed what it found or said.
    assert!(changed > 40, "{changed} of 120 rounds changed the outcome");
}
