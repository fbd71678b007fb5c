//! Tests of the realtime consumers' queued buffers ([`EtwSpec::with_realtime_buffers`]): every
//! x64 fixture that supports them is forged for several seeds (clean and damaged) and each
//! consumer's list is walked from the FILE BYTES with the tests' own page walker (`Walk`),
//! rooted at the consumer process's PML4 as its EPROCESS names it, at types.h offsets: the
//! process PML4 shares the kernel half and translates every user VA to the bytes written, the
//! list from `UserBufferListHead` visits exactly the expected nodes for each head / node shape,
//! the bitmap matches the used slots. Dumps without the option are unchanged (the committed
//! sample is still what the forge writes; the option only adds pages).

use std::collections::{BTreeMap, BTreeSet};

use super::{check_probes, fixture_dir, fixture_dirs, Walk};
use crate::etw::realtime::{fnv1a64, realtime_config, realtime_supported};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64};
use crate::{
    forge, Config, CountShape, EtwSpec, Expect, ExpectedConsumer, ExpectedRealtime,
    ExpectedSession, Forged, HeadShape, NodeShape, RealtimeBuffers, RealtimeDamage, RealtimeSpec,
    SlotSpec,
};

const RC: &str = "_ETW_REALTIME_CONSUMER";
const BUF: &str = "_WMI_BUFFER_HEADER";

fn off(t: &TypesH, agg: &str, field: &str) -> u64 {
    t.offset_of(agg, field)
        .unwrap_or_else(|| panic!("{agg}.{field}"))
}

fn u64_at(w: &Walk, va: u64) -> u64 {
    get_u64(
        &w.read(va, 8).unwrap_or_else(|e| panic!("{va:#x}: {e:#x}")),
        0,
    )
}

fn u32_at(w: &Walk, va: u64) -> u32 {
    get_u32(
        &w.read(va, 4).unwrap_or_else(|e| panic!("{va:#x}: {e:#x}")),
        0,
    )
}

/// The page walker of the dump rooted at `dtb` (a process's PML4).
pub(super) fn walk_at<'a>(file: &'a [u8], dtb: u64) -> Walk<'a> {
    Walk {
        dtb,
        ..Walk::new(file)
    }
}

/// The x64 fixtures that support realtime buffers.
fn realtime_fixtures() -> Vec<std::path::PathBuf> {
    let dirs: Vec<_> = fixture_dirs()
        .into_iter()
        .filter(|d| realtime_supported(&Config::from_fixture(d)))
        .collect();
    assert!(dirs.len() >= 9, "every x64 fixture: {dirs:?}");
    dirs
}

/// What the walks saw across configs (to prove every variant is exercised).
#[derive(Default)]
pub(super) struct Seen {
    kinds: BTreeSet<String>,
}

impl Seen {
    fn add(&mut self, k: impl Into<String>) {
        self.kinds.insert(k.into());
    }
}

/// The process PML4 at `dtb`: its kernel half is the kernel's (but for the self-reference,
/// which points at the process PML4), and every kernel VA the forge mapped translates as
/// through the kernel's PML4.
pub(super) fn check_kernel_half(f: &Forged, file: &[u8], dtb: u64) {
    let kw = Walk::new(file);
    let pw = walk_at(file, dtb);
    let sm = f.config.self_map_index;
    let kroot = kw.phys(f.page_table_root(), 0x1000).expect("kernel PML4");
    let proot = pw.phys(dtb, 0x1000).expect("process PML4 stored");
    for i in 0x100..0x200usize {
        let (k, p) = (get_u64(kroot, i * 8), get_u64(proot, i * 8));
        if i as u64 == sm {
            assert_eq!(p & 0x000F_FFFF_FFFF_F000, dtb, "self-reference");
            assert_eq!(p & 1, 1);
        } else {
            assert_eq!(k, p, "PML4[{i:#x}]");
        }
    }
    let self_map_va = crate::dump::paging::x64_self_map_va(sm);
    assert_eq!(pw.translate(self_map_va), Some(dtb));
    assert_eq!(f.user_physical_address(dtb, self_map_va), Some(dtb));
    let mut n = 0;
    for (va, size) in f.vmap.ranges() {
        if va < 0x8000_0000_0000 || va == self_map_va {
            continue;
        }
        for v in [va, va + size - 1] {
            assert_eq!(pw.translate(v), kw.translate(v), "{v:#x}");
            assert_eq!(f.user_physical_address(dtb, v), f.physical_address(v));
            n += 1;
        }
    }
    assert!(n > 100, "{n} kernel translations compared");
    // KUSER_SHARED_DATA's user alias, as in the kernel's tables.
    assert_eq!(pw.translate(f.kuser_user_va), kw.translate(f.kuser_user_va));
}

/// The list from UserBufferListHead in the process: the nodes visited (each once) and the
/// node a Next looped back to.
fn walk_user_list(pw: &Walk, r: &ExpectedRealtime, head: u64) -> (Vec<u64>, Option<u64>) {
    let mut cur = match r.head {
        HeadShape::SeparateHead => u64_at(pw, head),
        HeadShape::FirstNode => head,
    };
    let mut seen = Vec::new();
    while cur != 0 {
        if seen.contains(&cur) {
            return (seen, Some(cur));
        }
        seen.push(cur);
        assert!(seen.len() <= 64, "a list without end");
        match pw.read(cur, 8) {
            Ok(b) => cur = get_u64(&b, 0),
            Err(_) => break,
        }
    }
    (seen, None)
}

/// One consumer's realtime facts, from the file: the kernel fields, the DTB, the list, each
/// copy's bytes, the bitmap and the decoys.
fn check_consumer(
    f: &Forged,
    file: &[u8],
    t: &TypesH,
    s: &ExpectedSession,
    c: &ExpectedConsumer,
    seen: &mut Seen,
) {
    let r = c.realtime.as_ref().expect("realtime");
    let kw = Walk::new(file);
    // KPROCESS.DirectoryTableBase = the process PML4, the forge's expectations agree.
    let dtb = u64_at(&kw, c.eprocess + off(t, "_KPROCESS", "DirectoryTableBase"));
    assert_eq!(dtb, r.dtb);
    assert!(f.user_address_spaces().contains(&(c.pid, dtb)));
    let p = f
        .processes
        .iter()
        .find(|p| p.pid == c.pid)
        .expect("process");
    assert_eq!(p.directory_table_base, dtb);
    let pw = walk_at(file, dtb);
    // The consumer's kernel fields.
    let head = u64_at(&kw, c.va + off(t, RC, "UserBufferListHead"));
    assert_eq!(head, r.user_buffer_list_head);
    let count_va = u64_at(&kw, c.va + off(t, RC, "UserBufferCount"));
    assert_eq!(count_va, r.user_buffer_count_va);
    assert!(count_va < 0x8000_0000_0000 && head < 0x8000_0000_0000);
    let count = u32_at(&pw, count_va);
    assert_eq!(count, r.user_buffer_count);
    assert_eq!(count == r.queued, r.spec.count == CountShape::True);
    seen.add(if count == r.queued {
        "count-true"
    } else {
        "count-stale"
    });
    // The list.
    let (nodes, cycle) = walk_user_list(&pw, r, head);
    let want: Vec<u64> = r.user_buffers.iter().map(|b| b.node_va).collect();
    assert_eq!(nodes, want, "pid {:#x} logger {}", c.pid, s.logger_id);
    assert_eq!(cycle, r.list_cycle_to);
    assert_eq!(nodes.len() as u32, r.queued);
    seen.add(format!("{:?}", r.head));
    if cycle.is_some() {
        seen.add("damage-cycle");
    }
    check_copies(f, file, t, s, r, &pw, seen);
    check_reserved(file, t, s, c, r, &pw, seen);
}

/// Each node's buffer copy: where the node shape says, with the bytes and header expected.
fn check_copies(
    f: &Forged,
    file: &[u8],
    t: &TypesH,
    s: &ExpectedSession,
    r: &ExpectedRealtime,
    pw: &Walk,
    seen: &mut Seen,
) {
    let kw = Walk::new(file);
    let bs = s.buffer_size as usize;
    let slist = off(t, BUF, "SlistEntry");
    for b in &r.user_buffers {
        let va = match r.node {
            NodeShape::Embedded => b.node_va - slist,
            NodeShape::Descriptor { ptr_offset } => {
                let d = pw.read(b.node_va, 0x40).expect("descriptor readable");
                for q in (8..0x40).step_by(8).filter(|&q| q != ptr_offset as usize) {
                    assert!(get_u64(&d, q) < 0x10_0000, "junk at +{q:#x} is small");
                }
                seen.add(format!("descriptor-{ptr_offset:#x}"));
                get_u64(&d, ptr_offset as usize)
            }
        };
        assert_eq!(va, b.va);
        if va == 0 {
            assert!(!b.readable);
            seen.add("damage-null");
            continue;
        }
        let Ok(bytes) = pw.read(va, bs) else {
            assert!(!b.readable, "{va:#x} unreadable");
            assert_eq!(
                f.expected_user_read(r.dtb, va, bs),
                Some(Expect::Unreadable {
                    first_unreadable_va: va
                })
            );
            // Mapped by a valid PTE nonetheless.
            assert!(pw.translate(va).is_some());
            seen.add("damage-unreadable");
            continue;
        };
        assert!(b.readable);
        assert_eq!(
            f.expected_user_read(r.dtb, va, bs),
            Some(Expect::Bytes(bytes.clone()))
        );
        assert_eq!(fnv1a64(&bytes), b.fnv1a64);
        assert_eq!(&bytes[..0x48], &b.header[..]);
        let cc = off(t, BUF, "ClientContext") as usize;
        let field = |name: &str| get_u32(&bytes, off(t, BUF, name) as usize);
        assert_eq!(field("BufferSize"), s.buffer_size);
        let id = u16::from_le_bytes([bytes[cc + 2], bytes[cc + 3]]);
        assert_eq!(u32::from(id), s.logger_id);
        assert_eq!(
            get_u64(&bytes, off(t, BUF, "SequenceNumber") as usize),
            b.sequence_number
        );
        assert_eq!(field("State"), b.state);
        assert_eq!(u32::from(bytes[cc]), b.processor);
        assert_eq!(
            get_u64(&bytes, off(t, BUF, "TimeStamp") as usize),
            b.timestamp
        );
        assert!(b.timestamp > 0);
        match b.duplicate_of {
            Some(k) => {
                assert_eq!(kw.read(k, bs).as_deref(), Ok(&bytes[..]), "duplicate");
                assert!(s.buffers.contains(&k));
                seen.add("duplicate");
            }
            None => {
                assert_eq!(b.state, 3);
                let valid = field("SavedOffset");
                assert_eq!((field("CurrentOffset"), field("Offset")), (valid, valid));
                assert_eq!(valid, b.valid_bytes);
                assert!(b.record_count > 0);
                // Sequence numbers continue after the kernel buffers'.
                let kmax = s.buffer_details.iter().map(|d| d.sequence_number).max();
                assert!(kmax.is_none_or(|m| b.sequence_number > m));
                assert!(b.sequence_number >= s.buffers.len() as u64);
            }
        }
        seen.add(match r.node {
            NodeShape::Embedded => "embedded",
            NodeShape::Descriptor { .. } => "descriptor",
        });
    }
}

/// ReservedBufferSpace, its bitmap (a kernel ULONG array) and the decoys.
fn check_reserved(
    file: &[u8],
    t: &TypesH,
    s: &ExpectedSession,
    c: &ExpectedConsumer,
    r: &ExpectedRealtime,
    pw: &Walk,
    seen: &mut Seen,
) {
    let kw = Walk::new(file);
    let bm = c.va + off(t, RC, "ReservedBufferSpaceBitMap");
    let size_of = u32_at(&kw, bm + off(t, "_RTL_BITMAP", "SizeOfBitMap"));
    let buffer = u64_at(&kw, bm + off(t, "_RTL_BITMAP", "Buffer"));
    let space = u64_at(&kw, c.va + off(t, RC, "ReservedBufferSpace"));
    let space_size = u32_at(&kw, c.va + off(t, RC, "ReservedBufferSpaceSize"));
    let pages = u32_at(&kw, c.va + off(t, RC, "UserPagesAllocated"));
    assert_eq!(pages, r.user_pages_allocated);
    assert_eq!(
        u32_at(&kw, c.va + off(t, RC, "UserPagesReused")),
        r.user_pages_reused
    );
    let Some((rva, rsize)) = r.reserved_space else {
        assert_eq!((space, space_size, size_of, buffer), (0, 0, 0, 0));
        assert!(r.user_buffers.iter().all(|b| b.slot.is_none()));
        assert!(r.decoys.is_empty());
        seen.add("elsewhere");
        return;
    };
    seen.add("reserved");
    assert_eq!((space, space_size), (rva, rsize));
    assert_eq!(rva % 0x1000, 0);
    assert_eq!(rsize % s.buffer_size, 0);
    assert_eq!(pages, rsize / 0x1000);
    assert_eq!(Some((buffer, size_of)), r.reserved_bitmap);
    assert!(
        buffer >= 0xFFFF_8000_0000_0000,
        "the bitmap is in kernel pool"
    );
    let words = kw.read(buffer, size_of.div_ceil(32) as usize * 4).unwrap();
    let set: Vec<u32> = (0..size_of)
        .filter(|&i| words[(i / 8) as usize] >> (i % 8) & 1 == 1)
        .collect();
    assert_eq!(set, r.used_slots);
    let mut slots: Vec<u32> = r.user_buffers.iter().filter_map(|b| b.slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, r.used_slots);
    for b in r.user_buffers.iter().filter(|b| b.va != 0) {
        let slot = b.slot.expect("a copy in the region");
        assert_eq!(b.va, rva + u64::from(slot) * u64::from(s.buffer_size));
    }
    // Every page of the region is mapped (free slots read as zeros or the decoy).
    for b in 0..size_of {
        let va = rva + u64::from(b) * u64::from(s.buffer_size);
        assert!(pw.translate(va).is_some(), "slot {b} mapped");
        let used = r.used_slots.contains(&b);
        let decoy = r.decoys.iter().find(|d| d.slot == b);
        if !used {
            let h = pw.read(va, 0x48).expect("free slot readable");
            match decoy {
                None => assert!(h.iter().all(|&x| x == 0), "free slot {b} zero"),
                Some(d) => {
                    assert_eq!(d.va, va);
                    let cc = off(t, BUF, "ClientContext") as usize;
                    let id = u32::from(u16::from_le_bytes([h[cc + 2], h[cc + 3]]));
                    assert_eq!(id, d.logger_id);
                    assert_ne!(id, s.logger_id);
                    let seq = get_u64(&h, off(t, BUF, "SequenceNumber") as usize);
                    assert_eq!(seq, d.sequence_number);
                    seen.add("decoy");
                }
            }
        } else {
            assert!(decoy.is_none());
        }
    }
}

/// Every consumer with queued buffers in `f`, checked from the file; returns how many.
pub(super) fn check_dump(f: &Forged, file: &[u8], seen: &mut Seen) -> usize {
    let t = TypesH::load(&f.config.fixture.as_ref().unwrap().dir).unwrap();
    let mut n = 0;
    let mut by_base: BTreeMap<(u32, u64), Vec<(u64, u64)>> = BTreeMap::new();
    for s in f.etw.as_ref().unwrap().sessions() {
        for c in &s.consumers {
            let Some(r) = &c.realtime else { continue };
            check_consumer(f, file, &t, s, c, seen);
            by_base
                .entry((s.logger_id, r.user_base))
                .or_default()
                .push((c.pid, r.dtb));
            n += 1;
        }
    }
    // No two copies of a session share a SequenceNumber (duplicates have their kernel
    // buffer's, which no copy has).
    let mut seqs = BTreeSet::new();
    for s in f.etw.as_ref().unwrap().sessions() {
        let kernel: BTreeSet<u64> = s.buffer_details.iter().map(|d| d.sequence_number).collect();
        for c in &s.consumers {
            for b in c.realtime.iter().flat_map(|r| &r.user_buffers) {
                if b.va != 0 && b.duplicate_of.is_none() {
                    assert!(seqs.insert((s.logger_id, b.sequence_number)));
                    assert!(!kernel.contains(&b.sequence_number));
                }
            }
        }
    }
    for ((_, base), v) in by_base {
        if v.len() >= 2 {
            // The same user VA in different processes: different physical pages.
            let pas: BTreeSet<Option<u64>> = v
                .iter()
                .map(|&(_, dtb)| walk_at(file, dtb).translate(base))
                .collect();
            assert_eq!(pas.len(), v.len(), "{base:#x} in {v:x?}");
            seen.add("shared-va");
        }
    }
    let spaces = f.user_address_spaces();
    for &(_, dtb) in &spaces {
        check_kernel_half(f, file, dtb);
    }
    // One address space per consuming process, none for the others.
    let pids: BTreeSet<u64> = spaces.iter().map(|s| s.0).collect();
    assert_eq!(pids.len(), spaces.len());
    // The others keep their made-up DirectoryTableBase (0x08000000 + i MiB).
    for p in &f.processes {
        let made_up = (0x0800_0000..0x0840_0000).contains(&p.directory_table_base);
        assert_eq!(pids.contains(&p.pid), !made_up, "pid {:#x}", p.pid);
    }
    check_probes(f, file);
    n
}

#[test]
fn realtime_buffers_walk_back_from_the_file_in_every_fixture() {
    let mut seen = Seen::default();
    for (i, dir) in realtime_fixtures().into_iter().enumerate() {
        let base = 10 * i as u64;
        for (k, damage) in [(0, false), (1, false), (2, false), (3, true), (4, true)] {
            let seed = base + k;
            let f = forge(&realtime_config(&dir, seed, damage));
            let file = f.to_bytes();
            let n = check_dump(&f, &file, &mut seen);
            assert_eq!(n, 4, "{} seed {seed}", dir.display());
        }
    }
    for k in [
        "count-true",
        "count-stale",
        "SeparateHead",
        "FirstNode",
        "descriptor-0x28",
        "descriptor-0x10",
        "descriptor-0x18",
        "descriptor-0x30",
        "reserved",
        "elsewhere",
        "decoy",
        "duplicate",
        "shared-va",
        "damage-cycle",
        "damage-null",
        "damage-unreadable",
    ] {
        assert!(seen.kinds.contains(k), "{k} never seen: {:?}", seen.kinds);
    }
    assert!(seen.kinds.contains("embedded") && seen.kinds.contains("descriptor"));
}

#[test]
fn the_realtime_sample_is_as_documented() {
    let f = forge(&Config::sample_realtime());
    let file = f.to_bytes();
    let mut seen = Seen::default();
    assert_eq!(check_dump(&f, &file, &mut seen), 3);
    let etw = f.etw.as_ref().unwrap();
    let rt = |slot: usize, pid: u64| -> ExpectedRealtime {
        let crate::ExpectedSlot::Session(s) = &etw.slots[slot] else {
            panic!("slot {slot}")
        };
        let c = s.consumers.iter().find(|c| c.pid == pid).unwrap();
        c.realtime.clone().unwrap()
    };
    let el = rt(3, 0x44C);
    assert_eq!(el.node, NodeShape::Descriptor { ptr_offset: 0x28 });
    assert_eq!(el.head, HeadShape::FirstNode);
    assert_eq!(el.user_buffer_list_head, el.user_buffers[0].node_va);
    assert!(el.user_buffers[1].duplicate_of.is_some());
    assert_eq!(el.decoys.len(), 1);
    let (a, b) = (rt(6, 0x44C), rt(6, 0x12E4));
    assert_eq!(a.node, NodeShape::Embedded);
    assert_eq!((a.user_buffer_count, b.user_buffer_count), (0, 5));
    assert_eq!(a.user_base, b.user_base, "shared VA");
    assert_ne!(a.dtb, b.dtb);
    // svchost.exe's two consumers are in one address space.
    assert_eq!(el.dtb, a.dtb);
    assert!(a.reserved_space.is_none() && b.reserved_space.is_some());
    // newest first: descending sequence numbers.
    assert!(a.user_buffers[0].sequence_number > a.user_buffers[1].sequence_number);
    for k in ["duplicate", "decoy", "shared-va", "elsewhere", "reserved"] {
        assert!(seen.kinds.contains(k), "{k}");
    }
    // Forging is deterministic.
    assert_eq!(forge(&Config::sample_realtime()).to_bytes(), file);
}

/// The sample the repository ships (tests/data/sample-x64-etw.dmp) is still exactly what the
/// forge writes for [`Config::sample_etw`]: the realtime option changed no other dump.
#[test]
fn sample_etw_is_still_the_committed_sample() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/sample-x64-etw.dmp");
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = forge(&Config::sample_etw());
    assert!(f.user_address_spaces().is_empty());
    assert!(
        f.to_bytes() == committed,
        "sample_etw differs from {}",
        path.display()
    );
    let dbg = format!("{:?}{:?}", f.config, f.etw);
    assert!(!dbg.contains("realtime"), "Debug renderings unchanged");
}

/// A realtime spec that places nothing (no seed, no listed consumer; or consumers whose PIDs
/// are not processes) changes nothing: the same bytes and the same expectations.
#[test]
fn realtime_option_without_consumers_changes_nothing() {
    let dir = fixture_dir("x64-19041");
    let mut plain = realtime_config(&dir, 0, false);
    plain.etw.as_mut().unwrap().realtime = None;
    let base = forge(&plain);
    let mut empty = plain.clone();
    empty.etw.as_mut().unwrap().realtime = Some(RealtimeBuffers::default());
    let mut other_pid = plain.clone();
    other_pid.etw = other_pid
        .etw
        .map(|e| e.with_realtime_consumer(3, 0x999, RealtimeSpec::new(2)));
    for cfg in [empty, other_pid] {
        let f = forge(&cfg);
        assert!(f.to_bytes() == base.to_bytes());
        assert_eq!(f.etw, base.etw);
        assert_eq!(f.processes, base.processes);
        assert!(f.user_address_spaces().is_empty());
    }
}

/// With the option on, the dump is the one without it plus new pages: every stored page of
/// the plain dump holds the same bytes, but for the pages of the consumers (their user-mode
/// pointers) and of the EPROCESSes (their DirectoryTableBase); every kernel VA translates to
/// the same physical address.
#[test]
fn realtime_buffers_only_add_pages() {
    for (name, bitmap) in [("x64-7601", false), ("x64-19041", true)] {
        let dir = fixture_dir(name);
        let mut on_cfg = realtime_config(&dir, 2, true);
        if bitmap {
            on_cfg = super::bitmap(on_cfg, crate::BitmapSig::Sdmp, 5);
        }
        let mut off_cfg = on_cfg.clone();
        off_cfg.etw.as_mut().unwrap().realtime = None;
        let (on, plain) = (forge(&on_cfg), forge(&off_cfg));
        let (on_file, off_file) = (on.to_bytes(), plain.to_bytes());
        let (won, woff) = (Walk::new(&on_file), Walk::new(&off_file));
        let t = TypesH::load(&dir).unwrap();
        let rc_end = t.size_of(RC).unwrap() - 1;
        let dtb = off(&t, "_KPROCESS", "DirectoryTableBase");
        let mut allowed = BTreeSet::new();
        for s in plain.etw.as_ref().unwrap().sessions() {
            for c in &s.consumers {
                allowed.insert(plain.physical_address(c.va).unwrap() >> 12);
                allowed.insert(plain.physical_address(c.va + rc_end).unwrap() >> 12);
            }
        }
        for p in &plain.processes {
            allowed.insert(plain.physical_address(p.eprocess_va + dtb).unwrap() >> 12);
        }
        // The kernel page table that maps the bitmaps' pool page gains its PTE.
        for s in on.etw.as_ref().unwrap().sessions() {
            for r in s.consumers.iter().filter_map(|c| c.realtime.as_ref()) {
                if let Some((va, _)) = r.reserved_bitmap {
                    allowed.insert(pt_pfn(&won, va));
                }
            }
        }
        let mut changed = BTreeSet::new();
        for &pfn in woff.pages.keys() {
            let (a, b) = (woff.phys(pfn << 12, 0x1000), won.phys(pfn << 12, 0x1000));
            let b = b.expect("every page of the plain dump is stored");
            if a != Some(b) {
                let fresh = a.is_some_and(|a| a.iter().all(|&x| x == 0));
                assert!(
                    allowed.contains(&pfn) || fresh,
                    "{name}: PFN {pfn:#x} changed"
                );
                if !fresh {
                    changed.insert(pfn);
                }
            }
        }
        assert!(!changed.is_empty());
        for (va, _) in plain.vmap.ranges() {
            assert_eq!(
                on.physical_address(va),
                plain.physical_address(va),
                "{va:#x}"
            );
        }
        // A full dump stores every page anyway; a bitmap dump stores the new ones too.
        assert_eq!(on.stored_pages > plain.stored_pages, bitmap);
        assert_eq!(on.probes, plain.probes);
    }
}

/// The PFN of the last-level page table that holds `va`'s PTE (x64, 4 KiB pages).
fn pt_pfn(w: &Walk, va: u64) -> u64 {
    let mut table = w.dtb & !0xFFF;
    for shift in [39, 30, 21] {
        let e = get_u64(w.phys(table + ((va >> shift) & 0x1FF) * 8, 8).unwrap(), 0);
        assert_eq!(e & 0x81, 1, "a table entry above {va:#x}");
        table = e & 0x000F_FFFF_FFFF_F000;
    }
    table >> 12
}

#[test]
fn drawn_specs_are_valid_and_vary() {
    let mut shapes = BTreeSet::new();
    for seed in 0..200 {
        for damage in [false, true] {
            let s = RealtimeSpec::draw(seed, 3, (seed % 2) as usize, false, true, damage);
            s.check(0x2000);
            shapes.insert(format!("{:?}{:?}", s.node, s.head));
            if damage {
                let d = s.damage;
                assert_eq!(
                    [d.unreadable, d.cycle_to, d.null_buffer]
                        .iter()
                        .flatten()
                        .count(),
                    1
                );
            } else {
                assert_eq!(s.damage, RealtimeDamage::default());
            }
        }
    }
    assert_eq!(shapes.len(), 10, "{shapes:?}");
}

#[test]
#[should_panic(expected = "an embedded node has a buffer")]
fn an_embedded_null_buffer_is_refused() {
    let dir = fixture_dir("x64-19041");
    let mut c = realtime_config(&dir, 0, false);
    let spec = RealtimeSpec {
        node: NodeShape::Embedded,
        damage: RealtimeDamage {
            null_buffer: Some(0),
            ..Default::default()
        },
        ..RealtimeSpec::new(2)
    };
    c.etw = c.etw.map(|e| e.with_realtime_consumer(3, 0x44C, spec));
    forge(&c);
}

#[test]
#[should_panic(expected = "x64 fixtures only")]
fn realtime_buffers_are_x64_only() {
    let dir = fixture_dir("x86-14393");
    let mut etw = EtwSpec::standard(14393);
    if let Some(SlotSpec::Session(s)) = etw.slots.get_mut(&3) {
        s.consumers = vec![0x44C];
    }
    forge(&Config::from_fixture(&dir).with_etw(etw.with_realtime_buffers(0)));
}
