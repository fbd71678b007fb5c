//! .etl files that trace viewers read as their own (issue 16): each processor's buffers in
//! time order whatever their SequenceNumbers say, the records Windows writes after the header,
//! and the process/thread/image rundown synthesised from the dump.

mod common;

use common::pdb_of;
use etwdump::addr::{Pfn, VirtAddr};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etl::header::offsets::{CLIENT_CONTEXT, SAVED_OFFSET, SEQUENCE_NUMBER};
use etwdump::etl::records::first_record_time;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config};
use std::collections::BTreeMap;
use std::path::Path;

fn opts() -> SymbolOptions {
    SymbolOptions {
        pdb: Some(pdb_of("x64-19041")),
        ..SymbolOptions::default()
    }
}

/// The buffers of an .etl file: (processor, SequenceNumber, first record's timestamp) after
/// the header buffer.
fn file_buffers(path: &Path) -> Vec<(u8, u64, Option<u64>, u16)> {
    let bytes = std::fs::read(path).unwrap();
    let size = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert!(
        size >= 0x1000 && bytes.len() % size == 0,
        "{}",
        path.display()
    );
    bytes
        .chunks(size)
        .skip(1)
        .map(|b| {
            let saved = u32::from_le_bytes(b[SAVED_OFFSET..SAVED_OFFSET + 4].try_into().unwrap());
            let seq =
                u64::from_le_bytes(b[SEQUENCE_NUMBER..SEQUENCE_NUMBER + 8].try_into().unwrap());
            let hook_of_first = u16::from_le_bytes(b[0x4E..0x50].try_into().unwrap());
            (
                b[CLIENT_CONTEXT],
                seq,
                first_record_time(b, saved as usize),
                hook_of_first,
            )
        })
        .collect()
}

/// Swapping the SequenceNumbers of two buffers of one processor (so that flush order and time
/// order disagree) does not change the file's order: each processor's buffers stay in the
/// time order of their first records.
#[test]
fn each_processors_buffers_are_in_time_order() {
    let f = forge(&Config::sample_etw());
    let mut bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts()).unwrap();
    let rows = etwdump::report::buffers::analyse(&ctx, Some("0")).rows;
    // Two buffers of CPU 0 of the NT Kernel Logger, in time order.
    let mut cpu0: Vec<_> = rows
        .iter()
        .filter(|r| r.processor == Some(0) && r.source == "memory")
        .map(|r| {
            let va =
                VirtAddr::new(u64::from_str_radix(&r.address.clone().unwrap()[2..], 16).unwrap());
            (va, r.sequence_number.unwrap())
        })
        .collect();
    assert!(cpu0.len() >= 2, "{cpu0:?}");
    cpu0.sort_by_key(|&(_, s)| s);
    let (first, last) = (cpu0[0], cpu0[cpu0.len() - 1]);
    let off = |va: VirtAddr| {
        let t = ctx.space.translate(va).unwrap();
        d.page_file_offset(Pfn::new(t.pa.get() >> 12)).unwrap() + (t.pa.get() & 0xFFF)
    };
    let (a, b) = (off(first.0) as usize, off(last.0) as usize);
    drop(ctx);
    drop(d);
    let q = SEQUENCE_NUMBER;
    bytes[a + q..a + q + 8].copy_from_slice(&last.1.to_le_bytes());
    bytes[b + q..b + q + 8].copy_from_slice(&first.1.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("swapped.dmp");
    std::fs::write(&p, &bytes).unwrap();
    let d = etwdump::kernel::discover::open(&p, OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts()).unwrap();
    let out = dir.path().join("etl");
    let m = etwdump::report::extract::extract(&ctx, "swapped.dmp", &out, Some("0"), false).unwrap();
    let file = out.join(&m.sessions[0].file);
    let bufs = file_buffers(&file);
    let mut per_cpu: BTreeMap<u8, Vec<(u64, u64)>> = BTreeMap::new();
    for &(cpu, seq, t, _) in &bufs {
        if let Some(t) = t {
            per_cpu.entry(cpu).or_default().push((t, seq));
        }
    }
    let c0 = &per_cpu[&0];
    assert!(c0.len() >= 2);
    assert!(
        c0.windows(2).all(|w| w[0].0 <= w[1].0),
        "CPU 0 buffers not in time order: {c0:?}"
    );
    // The swap took effect: in this file CPU 0's SequenceNumbers are not ascending.
    assert!(
        c0.windows(2).any(|w| w[0].1 > w[1].1),
        "the swapped SequenceNumbers: {c0:?}"
    );
    for (cpu, v) in &per_cpu {
        assert!(v.windows(2).all(|w| w[0].0 <= w[1].0), "CPU {cpu}: {v:?}");
    }
}

/// One record of a buffer, as this test reads it (independently of etwdump's walker): hook,
/// header kind byte, header thread and process (SYSTEM), timestamp, payload.
struct Rec {
    hook: u16,
    kind: u8,
    version: u8,
    tid: u32,
    pid: u32,
    ts: u64,
    payload: Vec<u8>,
}

fn records(buf: &[u8]) -> Vec<Rec> {
    let saved =
        u32::from_le_bytes(buf[SAVED_OFFSET..SAVED_OFFSET + 4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    let mut at = 0x48;
    while at + 8 <= saved {
        let size = u16::from_le_bytes([buf[at + 4], buf[at + 5]]) as usize;
        let hook = u16::from_le_bytes([buf[at + 6], buf[at + 7]]);
        let (kind, version) = (buf[at + 2], buf[at]);
        let u32_at = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap());
        let (tid, pid, ts, hdr) = match kind {
            0x02 => (u32_at(at + 8), u32_at(at + 12), u64_at(at + 16), 0x20),
            0x11 => (0, 0, u64_at(at + 8), 0x10),
            k => panic!("header kind {k:#x} at {at:#x}"),
        };
        out.push(Rec {
            hook,
            kind,
            version,
            tid,
            pid,
            ts,
            payload: buf[at + hdr..at + size].to_vec(),
        });
        at += size.next_multiple_of(8);
    }
    out
}

fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// The NT Kernel Logger's file of the sample's memory: the header buffer holds the header
/// event and the host partition's 0x0050 record (stamped alike, 0x30 zero bytes, as in every
/// real file of shared/data); the next buffer is the rundown: one Process DCStart per forged
/// process (EPROCESS key, pid, parent, directory table base, name), one Thread DCStart per
/// thread (ids, stacks, TEB, start address, priority as the forge wrote them) and one Image
/// DCStart per kernel module (base, size, full name), all stamped with the first record time
/// of the file's data. A session that is not a kernel session gets no rundown.
#[test]
fn kernel_session_files_carry_the_partition_record_and_the_rundown() {
    let f = forge(&Config::sample_etw());
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m = etwdump::report::extract::extract(&ctx, "sample", dir.path(), None, false).unwrap();
    let ntkl = m.sessions.iter().find(|s| s.logger_id == 0).unwrap();
    let bytes = std::fs::read(dir.path().join(&ntkl.file)).unwrap();
    let size = le32(&bytes, 0) as usize;
    let header = records(&bytes[..size]);
    assert_eq!(header.len(), 2);
    assert_eq!((header[0].hook, header[1].hook), (0x0000, 0x0050));
    assert_eq!((header[1].kind, header[1].version), (0x02, 2));
    assert_eq!(
        (header[1].tid, header[1].pid, header[1].ts),
        (header[0].tid, header[0].pid, header[0].ts)
    );
    assert_eq!(header[1].payload, vec![0u8; 0x30]);

    let rundown = records(&bytes[size..2 * size]);
    assert_eq!(ntkl.buffer_list[1].source, "rundown");
    let data_first = file_buffers(&dir.path().join(&ntkl.file))
        .iter()
        .skip(1)
        .filter_map(|b| b.2)
        .min()
        .unwrap();
    assert!(
        rundown.iter().all(|r| r.ts == data_first),
        "rundown stamped with the first data time {data_first}"
    );
    let procs: Vec<&Rec> = rundown.iter().filter(|r| r.hook == 0x0303).collect();
    assert_eq!(procs.len(), f.processes.len());
    for (r, p) in procs.iter().zip(&f.processes) {
        assert_eq!((r.kind, r.version), (0x11, 4));
        let b = &r.payload;
        assert_eq!(le64(b, 0), p.eprocess_va, "UniqueProcessKey");
        assert_eq!(u64::from(le32(b, 8)), p.pid);
        assert_eq!(u64::from(le32(b, 12)), p.parent_pid);
        assert_eq!(le32(b, 16), u32::MAX, "SessionId unknown");
        assert_eq!(le64(b, 24), p.directory_table_base);
        // TOKEN_USER (16 bytes), the null SID (12), then the name.
        assert_eq!(&b[36 + 16..36 + 28], &[1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let name_at = 36 + 28;
        let end = name_at + b[name_at..].iter().position(|&c| c == 0).unwrap();
        assert_eq!(&b[name_at..end], p.name.as_bytes());
        assert_eq!(&b[end..], &[0u8; 7], "NUL, then three empty UTF-16 strings");
    }
    let threads: Vec<&Rec> = rundown.iter().filter(|r| r.hook == 0x0503).collect();
    let want: Vec<(u64, u64)> = f
        .processes
        .iter()
        .flat_map(|p| p.threads.iter().map(move |&(_, tid)| (p.pid, tid)))
        .collect();
    assert_eq!(threads.len(), want.len());
    for (r, &(pid, tid)) in threads.iter().zip(&want) {
        assert_eq!((r.kind, r.version, r.tid, r.pid), (0x02, 3, 0, 0));
        let b = &r.payload;
        let facts = etwdump_forge::thread_facts(pid, tid);
        assert_eq!((u64::from(le32(b, 0)), u64::from(le32(b, 4))), (pid, tid));
        assert_eq!(le64(b, 8), facts.stack_base);
        assert_eq!(le64(b, 16), facts.stack_limit);
        assert_eq!(le64(b, 48), facts.win32_start);
        assert_eq!(le64(b, 56), facts.teb);
        assert_eq!(b[68], facts.base_priority);
        assert_eq!(b.len(), 72);
    }
    let images: Vec<&Rec> = rundown.iter().filter(|r| r.hook == 0x1403).collect();
    assert_eq!(images.len(), f.modules.len());
    for (r, md) in images.iter().zip(&f.modules) {
        let b = &r.payload;
        assert_eq!((le64(b, 0), le64(b, 8)), (md.base, u64::from(md.size)));
        assert_eq!(le32(b, 16), 0, "ProcessId of a kernel module");
        let name: Vec<u16> = b[56..b.len() - 2]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(String::from_utf16(&name).unwrap(), md.full_name);
        assert_eq!((r.tid, r.pid), (header[0].tid, header[0].pid));
    }
    assert_eq!(rundown.len(), procs.len() + threads.len() + images.len());
    // A session that is not a kernel session: no rundown, still the 0x0050 record.
    let other = m.sessions.iter().find(|s| s.logger_id == 3).unwrap();
    assert!(other.buffer_list.iter().all(|b| b.source != "rundown"));
    let ob = std::fs::read(dir.path().join(&other.file)).unwrap();
    let oh = records(&ob[..le32(&ob, 0) as usize]);
    assert_eq!(
        oh.iter().map(|r| r.hook).collect::<Vec<_>>(),
        [0x0000, 0x0050]
    );
}
