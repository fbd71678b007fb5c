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
