//! Scan scenarios (issue 15): every expectation of `Forged::scan` checked against the dump
//! file with a small parser written here from etw-internals.md (§2.1 header offsets, §2.6
//! valid bytes, §5 record headers, §4.2 'CCsw' blocks, §3.1 LoggerId / BufferSize at 0 / 4),
//! not with the forge's writers: headers at the recorded physical addresses parse with the
//! recorded values, record chains walk to the recorded ends, orphans are on no live list and
//! nothing points at them but other orphans, decoys and lost objects fail the validity rules of
//! `etw::scan`'s documentation.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{fixture_dir, Walk};
use crate::util::{get_u32, get_u64};
use crate::{forge, Forged, GroupOrigin, ScanClass, ScanKind, ScanObject};

/// One physical page of the dump file (None: not stored).
fn page<'a>(w: &Walk<'a>, pa: u64) -> Option<&'a [u8]> {
    w.phys(pa & !0xFFF, 0x1000)
}

/// The bytes of a buffer stitched from its recorded pages, up to the first missing page.
fn stitched(w: &Walk, o: &ScanObject, len: u32) -> Vec<u8> {
    let b = o.buffer.as_ref().expect("buffer");
    let mut out = Vec::new();
    for (i, p) in b.pages.iter().enumerate() {
        let Some(pa) = p else { break };
        let start = i * 0x1000;
        if start >= len as usize {
            break;
        }
        let n = (len as usize - start)
            .min(0x1000 - (*pa & 0xFFF) as usize)
            .min(0x1000);
        out.extend_from_slice(w.phys(*pa, n).expect("stored"));
        if n < 0x1000 {
            break;
        }
    }
    out
}

/// Size of the record at `p` per §5 (None: not a record header).
fn record_size(b: &[u8], p: usize) -> Option<usize> {
    if p + 8 > b.len() || b[p + 3] & 0x80 == 0 {
        return None;
    }
    let (ty, flags) = (b[p + 2], b[p + 3]);
    let (size, min) = match ty {
        0x01 | 0x02 => (u16::from_le_bytes([b[p + 4], b[p + 5]]), 0x20),
        0x03 | 0x04 => (u16::from_le_bytes([b[p + 4], b[p + 5]]), 0x18),
        0x10 | 0x11 => (u16::from_le_bytes([b[p + 4], b[p + 5]]), 0x10),
        0x0A | 0x14 => (u16::from_le_bytes([b[p], b[p + 1]]), 0x30),
        0x0B | 0x15 => (u16::from_le_bytes([b[p], b[p + 1]]), 0x48),
        0x12 | 0x13 => (u16::from_le_bytes([b[p], b[p + 1]]), 0x50),
        0x00 if flags == 0x90 => (u16::from_le_bytes([b[p], b[p + 1]]), 0x20),
        _ => return None,
    };
    (usize::from(size) >= min).then_some(usize::from(size))
}

/// (records wholly inside `bytes[..end]` from +0x48, where the walk stops).
fn walk_records(bytes: &[u8], end: usize) -> (u32, usize) {
    let mut p = 0x48;
    let mut n = 0;
    while let Some(s) = record_size(bytes, p) {
        if p + s > end {
            break;
        }
        n += 1;
        p += (s + 7) & !7;
    }
    (n, p)
}

/// §2.6 valid bytes of a header.
fn valid_of(h: &[u8]) -> u32 {
    let (size, saved, current) = (get_u32(h, 0), get_u32(h, 4), get_u32(h, 8));
    if current <= size {
        current
    } else {
        saved
    }
}

/// The buffer rules of `etw::scan` (rules 1-4) on the bytes from a header on.
fn buffer_validates(b: &[u8]) -> bool {
    if b.len() < 0x48 {
        return false;
    }
    let size = get_u32(b, 0);
    let valid = valid_of(b);
    let rule1 = size != 0 && size.is_multiple_of(0x400) && size <= 0x10_0000;
    let rule2 = (0x48..=size).contains(&valid);
    let rule3 = u16::from_le_bytes([b[0x2A], b[0x2B]]) < 256 && get_u32(b, 0x2C) <= 6;
    let end = (valid as usize).min(b.len());
    let rule4 = valid == 0x48 || record_size(b, 0x48).is_some_and(|s| 0x48 + s <= end);
    rule1 && rule2 && rule3 && rule4
}

/// The 'CCsw' rule: tag, UsedBytes 0 or 0x68..=0x400. `blk` starts at the POOL_HEADER.
fn pending_validates(blk: &[u8], hdr: usize) -> bool {
    let used = get_u32(blk, hdr);
    &blk[4..8] == b"CCsw" && (used == 0 || (0x68..=0x400).contains(&used))
}

/// The pool type bits of a POOL_HEADER: x64 the byte at +3, x86 bits 9..15 at +2.
fn pool_type(blk: &[u8], x64: bool) -> u32 {
    if x64 {
        u32::from(blk[3])
    } else {
        u32::from(u16::from_le_bytes([blk[2], blk[3]]) >> 9)
    }
}

fn scenarios() -> Vec<(String, Forged, Vec<u8>)> {
    crate::scan_scenarios(&crate::default_fixtures_root())
        .into_iter()
        .map(|(name, cfg)| {
            let f = forge(&cfg);
            let file = f.to_bytes();
            (name, f, file)
        })
        .collect()
}

#[test]
fn scan_scenarios_cover_every_case() {
    let all = scenarios();
    assert_eq!(
        all.len(),
        6,
        "x64-19041 (3 + bitmap) and x86-14393 (2) scenarios"
    );
    for (name, f, _) in &all {
        let s = f.scan.as_ref().expect("scan");
        let c = s.counts();
        let orphan_bufs: Vec<_> = s.of(ScanKind::Buffer, ScanClass::Orphaned).collect();
        let stopped: Vec<_> = s
            .groups
            .iter()
            .filter(|g| g.origin == GroupOrigin::Stopped)
            .collect();
        let partial = |overwritten: bool| {
            orphan_bufs
                .iter()
                .filter(|o| {
                    let b = o.buffer.as_ref().unwrap();
                    !b.complete && b.overwritten_pages.is_empty() != overwritten
                })
                .count()
        };
        let multi_scattered = |class| {
            s.of(ScanKind::Buffer, class).any(|o| {
                let b = o.buffer.as_ref().unwrap();
                b.complete && b.valid_bytes > 0x1000 && !b.physically_contiguous && !b.header_only
            })
        };
        println!(
            "{name}: {c:?}; groups {} ({} stopped); lost {}; decoys {}; partial overwritten {}, \
             unmapped {}",
            s.groups.len(),
            stopped.len(),
            s.lost.len(),
            s.decoys.len(),
            partial(true),
            partial(false)
        );
        // Three stopped sessions, and a fourth in the first one's slot where the slot is reused
        // (same LoggerId and BufferSize, a later window, SequenceNumbers starting over).
        let reused = matches!(
            name.as_str(),
            "scan-x64-19041" | "scan-x64-19041-bitmap" | "scan-x86-14393-var5"
        );
        assert_eq!(stopped.len(), 3 + usize::from(reused), "{name}");
        if reused {
            let (a, z) = (stopped[0], stopped[3]);
            assert_eq!(
                (a.logger_id, a.buffer_size, a.clock_type),
                (z.logger_id, z.buffer_size, z.clock_type),
                "{name}"
            );
            assert!(
                z.timestamp_window.unwrap().0 > a.timestamp_window.unwrap().1,
                "{name}"
            );
            assert!(
                z.buffers.iter().any(|q| a.buffers.contains(q)),
                "{name}: no SequenceNumber in common"
            );
        }
        assert!(partial(true) >= 3 && partial(false) >= 3, "{name}");
        assert!(s.lost.iter().filter(|l| l.kind == ScanKind::Buffer).count() >= 3);
        assert_eq!(
            s.lost
                .iter()
                .filter(|l| l.kind == ScanKind::LoggerContext)
                .count(),
            1,
            "{name}: the second stopped session's context was reused"
        );
        assert!(multi_scattered(ScanClass::Orphaned), "{name}");
        assert!(multi_scattered(ScanClass::Live), "{name}");
        assert_eq!(c[&("buffer", "stale_copy")], 2, "{name}");
        assert_eq!(c[&("pending_block", "orphaned")], 2, "{name}");
        assert!(s.decoys.len() >= 8, "{name}");
        assert_eq!(s.free_slot_value, 1);
    }
}

/// Buffers: the header at `pa` (and the stitched pages) parse with the recorded values.
fn check_buffer(w: &Walk, f: &Forged, o: &ScanObject, name: &str) {
    let b = o.buffer.as_ref().unwrap();
    let at = format!("{name}: buffer {:#x} ({:?})", o.pa, o.class);
    assert_eq!(b.pages.first().copied().flatten(), Some(o.pa), "{at}");
    let h = w.phys(o.pa, 0x48).expect("header stored");
    assert_eq!(get_u32(h, 0), b.buffer_size, "{at}");
    assert_eq!(get_u64(h, 0x18), b.sequence_number, "{at}");
    assert_eq!(
        u32::from(u16::from_le_bytes([h[0x2A], h[0x2B]])),
        b.logger_id,
        "{at}"
    );
    assert_eq!(get_u32(h, 0x2C), b.state, "{at}");
    assert_eq!(valid_of(h), b.valid_bytes, "{at}");
    // Pages: the VA translation where mapped; nothing where not.
    if let Some(va) = o.va {
        for (i, p) in b.pages.iter().enumerate() {
            assert_eq!(w.translate(va + i as u64 * 0x1000), *p, "{at} page {i}");
        }
    }
    if b.header_only {
        assert_eq!((b.valid_bytes, b.record_count), (0x48, 0), "{at}");
        return;
    }
    let bytes = stitched(w, o, b.intact_bytes);
    assert_eq!(
        bytes.len(),
        b.intact_bytes as usize,
        "{at}: intact bytes present"
    );
    assert!(b.complete == (b.intact_bytes == b.valid_bytes), "{at}");
    assert_eq!(
        b.complete,
        b.overwritten_pages.is_empty()
            && b.pages
                .iter()
                .take(b.valid_bytes.div_ceil(0x1000) as usize)
                .all(Option::is_some),
        "{at}"
    );
    if !b.compressed {
        let (n, end) = walk_records(&bytes, b.intact_bytes as usize);
        assert_eq!(n, b.recoverable_records, "{at}");
        assert_eq!(end as u32, b.recoverable_bytes, "{at}");
        assert!(buffer_validates(&bytes), "{at}: rules 1-4");
        if b.complete {
            assert_eq!(n, b.record_count, "{at}");
        }
    }
    if let Some(orig) = b.copy_of {
        let live = f
            .scan
            .as_ref()
            .unwrap()
            .objects
            .iter()
            .find(|x| x.pa == orig && x.kind == ScanKind::Buffer)
            .expect("original");
        assert_eq!(live.class, ScanClass::Live);
        let a = stitched(w, live, b.valid_bytes);
        assert_eq!(a, bytes, "{at}: a copy of {orig:#x}");
    }
}

/// 'CCsw' blocks and contexts: the pool header before `pa` and the first fields.
fn check_pool_object(w: &Walk, f: &Forged, o: &ScanObject, name: &str) {
    let x64 = f.config.arch.is_x64();
    let hdr = if x64 { 0x10 } else { 8 };
    let at = format!("{name}: {:?} {:?} {:#x}", o.kind, o.class, o.pa);
    let blk = w.phys(o.pa - hdr, hdr as usize + 0x20).expect("stored");
    if let Some(p) = &o.pending {
        assert!(pending_validates(blk, hdr as usize), "{at}");
        assert_eq!(get_u32(blk, hdr as usize), p.used_bytes, "{at}");
        assert_eq!(p.pool_freed, pool_type(blk, x64) == 0, "{at}");
        if p.used_bytes != 0 {
            assert_eq!(
                Some(get_u64(blk, hdr as usize + 0x10)),
                p.first_time,
                "{at}"
            );
            assert_eq!(Some(get_u64(blk, hdr as usize + 8)), p.last_time, "{at}");
        }
    }
    if let Some(c) = &o.context {
        assert_eq!(&blk[4..8], b"EtwL", "{at}");
        assert_eq!(get_u32(blk, hdr as usize), c.logger_id, "{at}");
        assert_eq!(get_u32(blk, hdr as usize + 4), c.buffer_size, "{at}");
        assert_eq!(c.pool_freed, pool_type(blk, x64) == 0, "{at}");
        let e = f.etw.as_ref().unwrap();
        let ptr = if x64 { 8 } else { 4 };
        if let Some(slot) = c.slot {
            let v = super::ptr_at(w, x64, e.array_va + u64::from(slot) * ptr);
            assert_eq!(v & !1, o.va.unwrap(), "{at}: slot {slot}");
            assert_eq!(v & 1 == 1, o.class == ScanClass::Orphaned, "{at}");
        }
    }
}

/// Every object, group and stopped slot of `f` against the file.
fn check_recorded(name: &str, f: &Forged, file: &[u8]) {
    let w = Walk::new(file);
    let s = f.scan.as_ref().unwrap();
    for o in &s.objects {
        if let Some(va) = o.va {
            assert_eq!(w.translate(va), Some(o.pa), "{name}: {o:?}");
        }
        match o.kind {
            ScanKind::Buffer => check_buffer(&w, f, o, name),
            _ => check_pool_object(&w, f, o, name),
        }
    }
    // Groups: members agree; stopped slots hold the free value; the context says the id.
    let e = f.etw.as_ref().unwrap();
    let x64 = f.config.arch.is_x64();
    for g in &s.groups {
        let members: Vec<_> = s
            .objects
            .iter()
            .filter(|o| o.group == Some(g.group))
            .collect();
        let mut seqs: Vec<u64> = members
            .iter()
            .filter_map(|o| o.buffer.as_ref())
            .map(|b| b.sequence_number)
            .collect();
        seqs.sort_unstable();
        assert_eq!(seqs, g.buffers, "{name}: group {}", g.group);
        for o in &members {
            if let Some(b) = &o.buffer {
                assert_eq!((b.logger_id, b.buffer_size), (g.logger_id, g.buffer_size));
                if let Some((lo, hi)) = g.timestamp_window {
                    let ts = get_u64(w.phys(o.pa + 0x10, 8).unwrap(), 0);
                    assert!((lo..=hi).contains(&ts), "{name}: header TimeStamp");
                }
            }
        }
        if let Some(pa) = g.context_pa {
            assert_eq!(get_u32(w.phys(pa, 4).unwrap(), 0), g.logger_id);
        }
        if g.origin == GroupOrigin::Stopped {
            let ptr = if x64 { 8 } else { 4 };
            let v = super::ptr_at(&w, x64, e.array_va + u64::from(g.slot) * ptr);
            assert_eq!(v, s.free_slot_value, "{name}: stopped slot {}", g.slot);
        }
    }
}

#[test]
fn recorded_objects_parse_at_their_physical_addresses() {
    for (name, f, file) in scenarios() {
        check_recorded(&name, &f, &file);
    }
}

/// Every fixture (every route, x86 included) with the standard sessions (header-only buffers
/// but on 1607+ x64) and the scan options.
#[test]
fn stopped_sessions_on_every_fixture_read_back() {
    for dir in super::fixture_dirs() {
        let cfg = crate::Config::from_fixture(&dir)
            .with_standard_etw()
            .with_stopped_sessions(4)
            .with_scan_extras();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let f = forge(&cfg);
        let file = f.to_bytes();
        check_recorded(&name, &f, &file);
        let s = f.scan.as_ref().unwrap();
        let stopped = s.groups.iter().filter(|g| g.origin == GroupOrigin::Stopped);
        assert_eq!(stopped.count(), 4, "{name}");
        assert_eq!(
            s.counts().get(&("pending_block", "orphaned")),
            Some(&2),
            "{name}"
        );
    }
}

#[test]
fn decoys_and_lost_objects_fail_the_rules() {
    for (name, f, file) in scenarios() {
        let w = Walk::new(&file);
        let s = f.scan.as_ref().unwrap();
        let hdr = if f.config.arch.is_x64() { 0x10 } else { 8 };
        for d in &s.decoys {
            let at = format!("{name}: decoy {} at {:#x}", d.what, d.pa);
            let bytes = page(&w, d.pa).expect("stored");
            let b = &bytes[(d.pa & 0xFFF) as usize..];
            assert!(!buffer_validates(b), "{at}");
            if d.what.contains("pending") {
                let blk = w.phys(d.pa - hdr, hdr as usize + 8).unwrap();
                assert!(!pending_validates(blk, hdr as usize), "{at}");
            }
            if d.what == "fake_logger_context" || d.what == "logger_array" {
                let blk = w.phys(d.pa - hdr, hdr as usize + 8).unwrap();
                assert_eq!(&blk[4..8], b"EtwL", "{at}");
                let capacity = f.etw.as_ref().unwrap().capacity;
                let id = get_u32(blk, hdr as usize);
                let size = get_u32(blk, hdr as usize + 4);
                assert!(
                    id >= capacity || size == 0 || !size.is_multiple_of(0x400),
                    "{at}"
                );
            }
        }
        for l in &s.lost {
            let b = &page(&w, l.pa).unwrap()[(l.pa & 0xFFF) as usize..];
            assert!(!buffer_validates(b), "{name}: lost {l:?}");
            if l.kind == ScanKind::LoggerContext {
                assert_ne!(
                    &w.phys(l.pa - hdr, 8).unwrap()[4..8],
                    b"EtwL",
                    "{name}: {l:?}"
                );
            }
        }
    }
}

/// The buffers reachable from the logger array: slots whose value is a context pointer with
/// LoggerId == slot, then their GlobalList (types.h offsets, capped at 10000 entries).
fn live_list_buffers(w: &Walk, f: &Forged) -> HashSet<u64> {
    let e = f.etw.as_ref().unwrap();
    let x64 = f.config.arch.is_x64();
    let ptr = if x64 { 8 } else { 4 };
    let t = crate::kernel::types_h::TypesH::load(&f.config.fixture.as_ref().unwrap().dir).unwrap();
    let gl = t.offset_of("_WMI_LOGGER_CONTEXT", "GlobalList").unwrap();
    let ge = t.offset_of("_WMI_BUFFER_HEADER", "GlobalEntry").unwrap();
    let mut out = HashSet::new();
    for slot in 0..u64::from(e.capacity) {
        let v = super::ptr_at(w, x64, e.array_va + slot * ptr);
        if v == 0 || v & 1 == 1 {
            continue;
        }
        match w.read(v, 4) {
            Ok(b) if u64::from(get_u32(&b, 0)) == slot => {}
            _ => continue,
        }
        let head = v + gl;
        let mut cur = super::ptr_at(w, x64, head);
        for _ in 0..10_000 {
            if cur == head || !out.insert(cur - ge) {
                break;
            }
            match w.read(cur, ptr as usize) {
                Ok(_) => cur = super::ptr_at(w, x64, cur),
                Err(_) => break,
            }
        }
    }
    out
}

#[test]
fn orphans_are_on_no_live_list_and_only_orphans_point_at_them() {
    for (name, f, file) in scenarios() {
        let w = Walk::new(&file);
        let s = f.scan.as_ref().unwrap();
        let live = live_list_buffers(&w, &f);
        for o in s.of(ScanKind::Buffer, ScanClass::Live) {
            assert!(
                live.contains(&o.va.unwrap()),
                "{name}: live {:#x} listed",
                o.pa
            );
        }
        let x64 = f.config.arch.is_x64();
        // Every VA an orphan or stale object starts at (and its GlobalEntry).
        let mut needles: HashMap<u64, String> = HashMap::new();
        // (A stale or free-tagged context is what its slot points at, by design.)
        let unpointed = |o: &&ScanObject| {
            o.class != ScanClass::Live && o.context.as_ref().is_none_or(|c| c.slot.is_none())
        };
        for o in s.objects.iter().filter(unpointed) {
            if let Some(va) = o.va {
                assert!(!live.contains(&va), "{name}: {va:#x} on a live list");
                needles.insert(va, format!("{:?}", o.kind));
                if o.kind == ScanKind::Buffer {
                    // GlobalEntry at +0x38 on x86 and x64 (§2.1).
                    needles.insert(va + 0x38, "entry".into());
                }
            }
        }
        // Where the orphans of groups live (their pages): the only places allowed to hold
        // pointers to orphans (stale GlobalEntry links, stopped contexts' GlobalList).
        let mut allowed: BTreeSet<u64> = BTreeSet::new();
        let orphan_side = |o: &&ScanObject| {
            o.group.is_some() || (o.kind == ScanKind::LoggerContext && o.class != ScanClass::Live)
        };
        for o in s.objects.iter().filter(orphan_side) {
            allowed.insert(o.pa & !0xFFF);
        }
        for l in &s.lost {
            allowed.insert(l.pa & !0xFFF);
        }
        let step = if x64 { 8 } else { 4 };
        for &pfn in f.pm.pages().keys() {
            let pg = page(&w, pfn << 12).unwrap();
            for off in (0..0x1000).step_by(step) {
                let v = if x64 {
                    get_u64(pg, off)
                } else {
                    u64::from(get_u32(pg, off))
                };
                if let Some(what) = needles.get(&v) {
                    assert!(
                        allowed.contains(&(pfn << 12)),
                        "{name}: pointer to orphan {what} {v:#x} at PA {:#x}",
                        (pfn << 12) + off as u64
                    );
                }
            }
        }
    }
}

#[test]
fn scan_options_are_opt_in_and_deterministic() {
    let dir = fixture_dir("x64-19041");
    let plain = forge(&crate::Config::from_fixture(&dir).with_variation(1));
    assert!(plain.scan.is_none());
    let cfg = crate::Config::from_fixture(&dir)
        .with_variation(1)
        .with_stopped_sessions(2);
    assert!(format!("{:?}", cfg.etw).contains("scan"));
    assert!(!format!("{:?}", plain.config.etw).contains("scan"));
    let (a, b) = (forge(&cfg), forge(&cfg));
    assert_eq!(a.scan, b.scan);
    assert_eq!(a.to_bytes(), b.to_bytes());
    let s = a.scan.unwrap();
    assert_eq!(
        s.groups.len(),
        2 + s
            .groups
            .iter()
            .filter(|g| g.origin != GroupOrigin::Stopped)
            .count()
    );
    assert_eq!(s.counts().get(&("buffer", "stale_copy")), None);
}

#[test]
fn random_image_is_streamed_and_reproducible() {
    let path = super::temp_path("random.raw");
    let size = (4 << 20) + 13;
    crate::write_random_image(&path, size, 7).unwrap();
    let data = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(data.len() as u64, size);
    assert_eq!(
        &data[..],
        &crate::random_image_bytes(7, 0, size as usize)[..]
    );
    assert_eq!(
        &data[0x12345..0x12400],
        &crate::random_image_bytes(7, 0x12345, 0xBB)[..]
    );
    assert_ne!(
        crate::random_image_bytes(8, 0, 64),
        crate::random_image_bytes(7, 0, 64)
    );
    // No page of it passes the buffer rules at its start (the property the 1 GiB image
    // checks for a real scanner).
    for pg in data.chunks(0x1000) {
        assert!(!buffer_validates(pg));
    }
}

/// The 1 GiB image (`forge --random-image`): streamed, never held (run with --ignored).
#[test]
#[ignore]
fn random_image_of_one_gib() {
    let path = super::temp_path("random-1g.raw");
    crate::write_random_image(&path, crate::RANDOM_IMAGE_SIZE, 1).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(len, crate::RANDOM_IMAGE_SIZE);
}
