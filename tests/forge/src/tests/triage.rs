//! Re-parses forged triage dumps with small helpers written from the references
//! (crash-dump-format.md §1.1/§1.3/§1.4, triage-etw.md §1-§4, etw-internals.md §2/§5), not
//! with the forge's own builders, and checks them against `ExpectedTriage`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::{
    forge_triage, triage_scenarios, ExpectedBlobSession, ExpectedEtwBlob, ExpectedRecord,
    ForgedTriage, NameConvention,
};

// ---------------------------------------------------------------------------------------
// Tiny readers
// ---------------------------------------------------------------------------------------

pub(super) fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
pub(super) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
pub(super) fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn align8(v: usize) -> usize {
    (v + 7) & !7
}

/// GUID bytes (Data1/2/3 little-endian) as lowercase dashed text.
fn guid_text(b: &[u8]) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{}",
        u32_at(b, 0),
        u16_at(b, 4),
        u16_at(b, 6),
        b[8],
        b[9],
        b[10..16]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    )
}

/// Every scenario, forged once.
pub(super) fn all() -> &'static Vec<ForgedTriage> {
    static ALL: OnceLock<Vec<ForgedTriage>> = OnceLock::new();
    ALL.get_or_init(|| triage_scenarios().iter().map(forge_triage).collect())
}

pub(super) fn scenario(name: &str) -> &'static ForgedTriage {
    all()
        .iter()
        .find(|f| f.expected.scenario == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

/// The triage data-block table: (VA, FileOffset, Size) per entry (§1.3: header +0x78/+0x7C).
pub(super) fn block_table(d: &[u8]) -> Vec<(u64, u32, u32)> {
    let off = u32_at(d, 0x2078) as usize;
    let n = u32_at(d, 0x207C) as usize;
    (0..n)
        .map(|i| {
            let e = off + 16 * i;
            (u64_at(d, e), u32_at(d, e + 8), u32_at(d, e + 12))
        })
        .collect()
}

/// Read `len` bytes at `va` through the first block (table order) that holds them entirely
/// and lies inside the file.
pub(super) fn read_va(
    d: &[u8],
    blocks: &[(u64, u32, u32)],
    va: u64,
    len: usize,
) -> Option<Vec<u8>> {
    blocks.iter().find_map(|&(bva, fo, sz)| {
        let end = bva + u64::from(sz);
        let in_file = fo as usize + sz as usize <= d.len();
        (in_file && va >= bva && va + len as u64 <= end).then(|| {
            let s = fo as usize + (va - bva) as usize;
            d[s..s + len].to_vec()
        })
    })
}

/// The KPRCB copy's size: 0xAF00 (19041 x64 ISF) or 0x9680 (ARM64, measured: data block #5).
fn kprcb_size(f: &ForgedTriage) -> usize {
    match f.expected.arch {
        crate::TriageArch::X64 => 0xAF00,
        crate::TriageArch::Arm64 => 0x9680,
    }
}

pub(super) fn isf(f: &ForgedTriage) -> Value {
    serde_json::from_str(&f.isf_json).expect("ISF is JSON")
}

pub(super) fn isf_rva(isf: &Value, name: &str) -> u64 {
    isf["symbols"][name]["address"]
        .as_u64()
        .unwrap_or_else(|| panic!("symbol {name} in ISF"))
}

fn field_offset(isf: &Value, ty: &str, field: &str) -> u64 {
    isf["user_types"][ty]["fields"][field]["offset"]
        .as_u64()
        .unwrap_or_else(|| panic!("{ty}.{field} in ISF"))
}

/// A record found by walking.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Walked {
    buffer_offset: usize,
    marker: u32,
    size: u16,
}

/// Record size per triage-etw.md §4.1 step 5: flags byte 0xC0; 0x11 PERFINFO64 / 0x02 SYSTEM64 /
/// 0x04 COMPACT64 have Size at +4, 0x13 / 0x12 EVENT_HEADER64 / 32 at +0; a TRACE_MESSAGE (byte 3 0x90)
/// at +0.
pub(super) fn record_size(b: &[u8], p: usize) -> Option<usize> {
    if p + 8 > b.len() {
        return None;
    }
    // TRACE_MESSAGE (etw-internals.md §5: byte 3 0x90, Size @+0).
    if b[p + 3] == 0x90 {
        let s = u16_at(b, p);
        return (s >= 8).then_some(usize::from(s));
    }
    if b[p + 3] != 0xC0 {
        return None;
    }
    let s = match b[p + 2] {
        0x11 | 0x02 | 0x04 => u16_at(b, p + 4),
        0x12 | 0x13 => u16_at(b, p),
        _ => return None,
    };
    (s >= 8).then_some(usize::from(s))
}

/// Walk records of `buf` (indexed from the buffer start) from `p` to exactly `valid`.
pub(super) fn walk(buf: &[u8], mut p: usize, valid: usize) -> Option<Vec<Walked>> {
    let mut out = Vec::new();
    while p < valid {
        let s = record_size(buf, p)?;
        if p + s > valid {
            return None;
        }
        out.push(Walked {
            buffer_offset: p,
            marker: u32_at(buf, p),
            size: s as u16,
        });
        p += align8(s);
    }
    (p == valid).then_some(out)
}

fn expected_of<'a>(f: &'a ForgedTriage, source: &str) -> Vec<&'a ExpectedRecord> {
    f.expected
        .records
        .iter()
        .filter(|r| r.source == source)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn scenarios_are_small_deterministic_and_distinct() {
    let names: Vec<&str> = all().iter().map(|f| f.expected.scenario.as_str()).collect();
    assert_eq!(names.len(), 20);
    assert_eq!(names[0], "standard");
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len());
    for (i, a) in all().iter().enumerate() {
        for b in &all()[i + 1..] {
            assert_ne!(a.bytes, b.bytes);
        }
    }
    for f in all() {
        assert!(
            f.bytes.len() < 2 << 20,
            "{} is too big",
            f.expected.scenario
        );
        assert_eq!(f.bytes.len() as u64, f.expected.file_len);
    }
    let again = forge_triage(&crate::TriageSpec::standard());
    assert_eq!(again.bytes, scenario("standard").bytes);
    assert_eq!(again.expected, scenario("standard").expected);
    assert_eq!(again.isf_json, scenario("standard").isf_json);
}

#[test]
fn expected_round_trips_through_json() {
    for f in all() {
        let text = serde_json::to_string(&f.expected).unwrap();
        let back: crate::ExpectedTriage = serde_json::from_str(&text).unwrap();
        assert_eq!(back, f.expected);
    }
    let v: Value = serde_json::to_value(&scenario("standard").expected).unwrap();
    assert_eq!(v["etw_blob"]["name_convention"], "x2");
    assert_eq!(
        serde_json::to_value(&scenario("names_x1").expected).unwrap()["etw_blob"]
            ["name_convention"],
        "x1"
    );
}

#[test]
fn dump_header_is_a_triage_dump() {
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        assert_eq!(&d[0..8], b"PAGEDU64");
        assert_eq!(u32_at(d, 0x0C), e.build);
        assert_eq!(u64_at(d, 0x10), e.directory_table_base);
        assert_eq!(u32_at(d, 0x30), e.machine_image_type);
        let (dtb, machine, bugcheck) = match e.arch {
            crate::TriageArch::X64 => (0x1AD000, 0x8664, 0x1000_007E),
            // Measured on triage_arm64.dmp.
            crate::TriageArch::Arm64 => (0x946A_A000, 0xAA64, 0x1C8),
        };
        assert_eq!(
            (e.directory_table_base, e.machine_image_type),
            (dtb, machine)
        );
        assert_eq!(u32_at(d, 0x34), e.number_processors);
        assert_eq!(u32_at(d, 0x38), bugcheck);
        assert_eq!(&d[0x3C..0x40], b"PAGE");
        assert_eq!(u64_at(d, 0x48), e.bugcheck_params[1]);
        assert_eq!(u64_at(d, 0x80), e.kdbg_va);
        assert_eq!(u64_at(d, 0x20), e.ps_loaded_module_list);
        assert_eq!(u64_at(d, 0x28), e.ps_active_process_head);
        // PhysicalMemoryBlock unused: PAGE fill, as in D1.
        assert_eq!(&d[0x88..0x8C], b"PAGE");
        assert_eq!(&d[0x340..0x344], b"PAGE");
        assert_eq!(u32_at(d, 0xF98), 4);
        assert_eq!(u64_at(d, 0xFA8), e.system_time);
        assert_eq!(u64_at(d, 0x1030), e.system_up_time);
        assert_eq!(u32_at(d, 0x1038), 0xCFF);
        let t = &e.triage;
        assert_eq!(u32_at(d, 0x2004), t.size_of_dump);
        assert_eq!(u32_at(d, 0x2008), t.valid_offset);
        assert_eq!(t.size_of_dump, t.valid_offset + 4);
        assert_eq!(u32_at(d, 0x200C), 0x348);
        assert_eq!(u32_at(d, 0x2010), 0xF00);
        assert_eq!(u32_at(d, 0x201C), t.prcb_offset);
        assert_eq!(u32_at(d, 0x2030), t.driver_list_offset);
        assert_eq!(u32_at(d, 0x2034), t.driver_count);
        assert_eq!(u32_at(d, 0x2038), t.string_pool_offset);
        assert_eq!(u32_at(d, 0x203C), t.string_pool_size);
        assert_eq!(u32_at(d, 0x2070), t.debugger_data_offset);
        assert_eq!(u32_at(d, 0x2074), 0x380);
        assert_eq!(u32_at(d, 0x2078), t.data_blocks_offset);
        assert_eq!(u32_at(d, 0x207C), t.data_blocks_count);
        if (t.valid_offset as usize) + 4 <= d.len() {
            assert_eq!(&d[t.valid_offset as usize..][..4], b"TRGD");
        } else {
            assert_eq!(e.scenario, "bad_truncated");
        }
    }
}

#[test]
fn data_block_table_matches_expected() {
    for f in all() {
        let d = &f.bytes;
        let table = block_table(d);
        let e = &f.expected;
        assert_eq!(table.len(), e.data_blocks.len(), "{}", e.scenario);
        for (i, (b, x)) in table.iter().zip(&e.data_blocks).enumerate() {
            assert_eq!(x.index, i);
            assert_eq!(
                (b.0, b.1, b.2),
                (x.va, x.file_offset, x.size),
                "{} #{i}",
                e.scenario
            );
            assert_eq!(x.in_file, b.1 as usize + b.2 as usize <= d.len());
        }
        // The regular blocks lie back to back right after the table (as in D1).
        let mut next = e.triage.data_blocks_offset + 16 * e.triage.data_blocks_count;
        for b in e.data_blocks.iter().filter(|b| !b.role.starts_with("bad_")) {
            // bad_blocks_past_eof redirects the errlog End descriptor past EOF.
            if !(b.role == "errlog_end" && e.scenario == "bad_blocks_past_eof") {
                assert_eq!(b.file_offset, next, "{} block {}", e.scenario, b.index);
            }
            next += b.size;
        }
    }
    // Standard: one KPRCB per CPU, the window triples in call order, no overlaps.
    let s = scenario("standard");
    let roles: Vec<&str> = s
        .expected
        .data_blocks
        .iter()
        .map(|b| b.role.as_str())
        .collect();
    assert_eq!(roles.iter().filter(|r| **r == "kprcb").count(), 16);
    let w = roles.iter().position(|r| *r == "etw_window").unwrap();
    assert_eq!(
        &roles[w..w + 6],
        &[
            "etw_window",
            "etw_base",
            "etw_end",
            "errlog_window",
            "errlog_base",
            "errlog_end"
        ]
    );
    assert!(s.expected.overlaps.is_empty());
}

#[test]
fn overlapping_and_out_of_file_blocks_are_flagged() {
    let o = &scenario("bad_overlapping_blocks").expected;
    let kinds: Vec<(usize, usize, &str)> = o
        .overlaps
        .iter()
        .map(|x| (x.a, x.b, x.kind.as_str()))
        .collect();
    let etw = o.windows.iter().find(|w| w.which == "etw").unwrap();
    let errlog = o.windows.iter().find(|w| w.which == "errlog").unwrap();
    let bad: Vec<usize> = o
        .data_blocks
        .iter()
        .filter(|b| b.role == "bad_overlap")
        .map(|b| b.index)
        .collect();
    assert_eq!(bad.len(), 5);
    assert!(kinds.contains(&(etw.block_index, bad[0], "va")));
    assert!(kinds.contains(&(etw.block_index, bad[0], "file")));
    assert!(kinds.contains(&(errlog.block_index, bad[1], "file")));
    assert!(kinds.contains(&(bad[3], bad[4], "va")));
    assert_eq!(o.data_blocks[bad[2]].file_offset, 0);
    // The two descriptors for one VA hold different bytes.
    let d = &scenario("bad_overlapping_blocks").bytes;
    let (a, b) = (&o.data_blocks[bad[3]], &o.data_blocks[bad[4]]);
    assert_eq!(a.va, b.va);
    assert_ne!(
        &d[a.file_offset as usize..][..0x40],
        &d[b.file_offset as usize..][..0x40]
    );

    let p = &scenario("bad_blocks_past_eof").expected;
    let past: Vec<_> = p
        .data_blocks
        .iter()
        .filter(|b| b.role == "bad_past_eof")
        .collect();
    assert_eq!(past.len(), 2);
    assert!(past.iter().all(|b| !b.in_file));
    assert!(u64::from(past[0].file_offset) > p.file_len);
    assert!(u64::from(past[1].file_offset) < p.file_len);
    let end = p
        .data_blocks
        .iter()
        .find(|b| b.role == "errlog_end")
        .unwrap();
    assert!(!end.in_file);
    assert_eq!(p.orphan_window_blocks.len(), 1);
    assert_eq!(p.orphan_window_blocks[0].which, "errlog");
    assert!(p.orphan_window_blocks[0].base_readable);
    assert!(!p.orphan_window_blocks[0].end_readable);
}

#[test]
fn kdbg_header_and_isf_agree() {
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        let isf = isf(f);
        let kdbg = e.triage.debugger_data_offset as usize;
        assert_eq!(&d[kdbg + 0x10..kdbg + 0x14], b"KDBG");
        assert_eq!(u32_at(d, kdbg + 0x14), 0x380);
        let kb = u64_at(d, kdbg + 0x18);
        assert_eq!(kb, e.kern_base);
        // Driver list entry 0 is ntoskrnl.exe at KernBase.
        let dl = e.triage.driver_list_offset as usize;
        assert_eq!(u64_at(d, dl + 0x38), kb);
        let rv = |n: &str| kb + isf_rva(&isf, n);
        assert_eq!(u64_at(d, 0x80), rv("KdDebuggerDataBlock"));
        assert_eq!(u64_at(d, 0x20), rv("PsLoadedModuleList"));
        assert_eq!(u64_at(d, 0x28), rv("PsActiveProcessHead"));
        assert_eq!(u64_at(d, 0x18), rv("MmPfnDatabase"));
        for (off, n) in [
            (0x48, "PsLoadedModuleList"),
            (0x50, "PsActiveProcessHead"),
            (0xC0, "MmPfnDatabase"),
            (0x208, "NtBuildLabEx"),
            (0x218, "KiProcessorBlock"),
            (0x330, "EtwpDebuggerData"),
            (0x00, "KdpDebuggerDataListHead"),
        ] {
            assert_eq!(u64_at(d, kdbg + off), rv(n), "KDBG+{off:#x}");
        }
        for (name, va) in &e.symbols {
            assert_eq!(*va, rv(name), "{name}");
        }
        // NtBuildLab string through the VA map.
        let blocks = block_table(d);
        let lab = read_va(d, &blocks, rv("NtBuildLabEx"), 0x20).unwrap();
        assert!(lab.starts_with(format!("{}.1.amd64fre.", e.build).as_bytes()));
    }
}

#[test]
fn isf_is_a_volatility_isf_with_the_needed_symbols_and_types() {
    for f in all() {
        let v = isf(f);
        assert_eq!(v["metadata"]["format"], "6.1.0");
        let pdb = &v["metadata"]["windows"]["pdb"];
        assert_eq!(
            pdb["GUID"].as_str().unwrap(),
            f.expected.pdb_guid.replace('-', "")
        );
        assert_eq!(pdb["age"], f.expected.pdb_age);
        assert_eq!(pdb["database"], "ntkrnlmp.pdb");
        assert_eq!(pdb["machine_type"], f.expected.machine_image_type);
        assert_eq!(v["base_types"]["pointer"]["size"], 8);
        for n in [
            "KiCurrentEtwBufferBase",
            "KiCurrentEtwBufferOffset",
            "KiCurrentErrLogBufferBase",
            "KiCurrentErrLogBufferOffset",
            "ErrorLogSessionOpened",
            "IopErrorLogSession",
            "KdDebuggerDataBlock",
            "PsLoadedModuleList",
            "PsActiveProcessHead",
            "KiProcessorBlock",
            "PpmCheckPeriodicStart",
            "AnFwpProgressIndicatorTimer",
        ] {
            isf_rva(&v, n);
        }
        // triage-etw.md §1.2 RVAs (x64, rising); ARM64: measured (Base nt+0xC36AD0).
        let (eb, lb) = match (f.expected.arch, f.expected.globals_order) {
            (crate::TriageArch::X64, crate::GlobalsOrder::EndBelowBase) => (0xC31458, 0xC31448),
            (crate::TriageArch::X64, _) => (0xC31450, 0xC31440),
            (crate::TriageArch::Arm64, _) => (0xC36AD0, 0xC36AC0),
        };
        assert_eq!(isf_rva(&v, "KiCurrentEtwBufferBase"), eb);
        assert_eq!(isf_rva(&v, "KiCurrentErrLogBufferBase"), lb);
        let (de, dl) = (
            isf_rva(&v, "KiCurrentEtwBufferOffset") as i64 - eb as i64,
            isf_rva(&v, "KiCurrentErrLogBufferOffset") as i64 - lb as i64,
        );
        match f.expected.globals_order {
            crate::GlobalsOrder::Rising => assert_eq!((de, dl), (8, 8)),
            crate::GlobalsOrder::EndBelowBase => assert_eq!((de, dl), (-8, -8)),
            crate::GlobalsOrder::Spaced { .. } => {
                assert!(de.abs() >= 0x10 && dl.abs() >= 0x10 && de % 8 == 0 && dl % 8 == 0)
            }
        }
        assert_eq!(isf_rva(&v, "ErrorLogSessionOpened"), 0xC456EC);
        // _KPRCB (crash-dump-format.md §2.2/§2.3, triage-etw.md §2.4) and _WMI_BUFFER_HEADER.
        let kprcb_size = kprcb_size(f);
        assert_eq!(v["user_types"]["_KPRCB"]["size"], kprcb_size);
        assert_eq!(field_offset(&v, "_KPRCB", "Number"), 0x24);
        assert_eq!(field_offset(&v, "_KPRCB", "MHz"), 0x44);
        assert_eq!(field_offset(&v, "_KPRCB", "StartCycles"), 0x7EC0);
        assert_eq!(field_offset(&v, "_KPRCB", "CurrentThread"), 0x8);
        assert_eq!(field_offset(&v, "_KPRCB", "EtwSupport"), 0x8328);
        assert_eq!(v["user_types"]["_WMI_BUFFER_HEADER"]["size"], 0x48);
        for (fname, off) in [
            ("BufferSize", 0),
            ("SavedOffset", 4),
            ("CurrentOffset", 8),
            ("TimeStamp", 0x10),
            ("SequenceNumber", 0x18),
            ("ClientContext", 0x28),
            ("State", 0x2C),
            ("Offset", 0x30),
            ("BufferFlag", 0x34),
            ("BufferType", 0x36),
        ] {
            assert_eq!(field_offset(&v, "_WMI_BUFFER_HEADER", fname), off);
        }
        assert_eq!(field_offset(&v, "_ETW_BUFFER_CONTEXT", "LoggerId"), 2);
        // Every type a field refers to is defined.
        fn refs(t: &Value, out: &mut Vec<(String, String)>) {
            if let (Some(k), Some(n)) = (t["kind"].as_str(), t["name"].as_str()) {
                out.push((k.to_string(), n.to_string()));
            }
            for sub in ["subtype", "type"] {
                if t.get(sub).is_some() {
                    refs(&t[sub], out);
                }
            }
        }
        let mut all_refs = Vec::new();
        for (_, ty) in v["user_types"].as_object().unwrap() {
            for (_, fld) in ty["fields"].as_object().unwrap() {
                refs(&fld["type"], &mut all_refs);
            }
        }
        for (kind, name) in all_refs {
            let section = match kind.as_str() {
                "struct" | "union" | "class" => "user_types",
                "enum" => "enums",
                "base" => "base_types",
                other => panic!("unexpected kind {other}"),
            };
            assert!(v[section].get(&name).is_some(), "{kind} {name} missing");
        }
    }
}

#[test]
fn kprcb_copies_and_processor_block() {
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        let isf = isf(f);
        let blocks = block_table(d);
        let p = e.triage.prcb_offset as usize;
        let ks = kprcb_size(f);
        assert_eq!(e.triage.process_offset as usize, p + ks);
        let copy = &d[p..p + ks];
        assert_eq!(u32_at(copy, 0x24), e.crash_cpu.number);
        assert_eq!(u32_at(copy, 0x44), e.crash_cpu.mhz);
        assert_eq!(u64_at(copy, 0x7EC0), e.crash_cpu.start_cycles);
        assert_eq!(u64_at(copy, 0x8), e.crash_cpu.current_thread);
        // KiProcessorBlock -> each KPRCB block; the crash CPU's block equals the copy.
        let kpb = e.kern_base + isf_rva(&isf, "KiProcessorBlock");
        let ptrs = read_va(d, &blocks, kpb, 8 * e.cpus.len()).unwrap();
        assert_eq!(e.cpus.len() as u32, e.number_processors);
        for (n, c) in e.cpus.iter().enumerate() {
            let va = u64_at(&ptrs, 8 * n);
            assert_eq!(va, c.prcb_va);
            let k = read_va(d, &blocks, va, ks).unwrap();
            assert_eq!(u32_at(&k, 0x24), n as u32);
            assert_eq!(u32_at(&k, 0x44), e.crash_cpu.mhz);
            assert_eq!(u64_at(&k, 0x7EC0), c.start_cycles);
            assert_eq!(u64_at(&k, 0x8), c.current_thread);
            if c.number == e.crash_cpu.number {
                assert_eq!(&k[..], copy);
            } else {
                // Frozen 47-64 µs after the crashing CPU (triage-etw.md §2.4).
                let dt = c.start_cycles - e.crash_cpu.start_cycles;
                let mhz = u64::from(e.crash_cpu.mhz);
                assert!((47 * mhz..=64 * mhz).contains(&dt), "cpu {n}: {dt}");
            }
        }
    }
    let s = &scenario("standard").expected;
    assert_eq!(s.crash_cpu.number, 0);
    assert_eq!(s.crash_cpu.start_cycles, 0xD_9D65_25C4);
    assert_eq!(scenario("logger2_cut").expected.crash_cpu.number, 3);
}

#[test]
fn driver_list_and_routine_resolution() {
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        let isf = isf(f);
        let dl = e.triage.driver_list_offset as usize;
        let mut mods = Vec::new();
        for i in 0..e.triage.driver_count as usize {
            let ent = dl + 0x90 * i;
            let name_off = u32_at(d, ent) as usize;
            let chars = u32_at(d, name_off) as usize;
            let units: Vec<u16> = (0..chars)
                .map(|k| u16_at(d, name_off + 4 + 2 * k))
                .collect();
            assert_eq!(u16_at(d, name_off + 4 + 2 * chars), 0, "NUL");
            assert_eq!(name_off % 8, 0);
            let name = String::from_utf16(&units).unwrap();
            let x = &e.drivers[i];
            assert_eq!(name, x.full_name);
            assert_eq!(u64_at(d, ent + 0x38), x.base);
            assert_eq!(u32_at(d, ent + 0x48), x.size);
            assert_eq!(u32_at(d, ent + 0x88), x.timestamp);
            mods.push((x.base_name.clone(), x.base, u64::from(x.size)));
        }
        assert_eq!(mods[0].0, "ntoskrnl.exe");
        for r in e.records.iter().filter(|r| r.header_type == "perfinfo64") {
            let rt = r.routine.unwrap();
            let (m, base, _) = mods
                .iter()
                .find(|(_, b, s)| rt >= *b && rt < b + s)
                .expect("routine inside a listed module");
            assert_eq!(Some(m), r.routine_module.as_ref());
            assert_eq!(Some(rt - base), r.routine_offset);
            match &r.routine_symbol {
                Some(sym) => {
                    assert_eq!(m, "ntoskrnl.exe");
                    assert_eq!(rt, e.kern_base + isf_rva(&isf, sym));
                }
                None => assert_ne!(m, "ntoskrnl.exe"),
            }
        }
    }
    // The routines of triage-etw.md §2.1.
    let s = scenario("standard");
    let msi: Vec<_> = expected_of(s, "current_buffer")
        .into_iter()
        .filter(|r| r.hook_id == Some(0x0F32))
        .collect();
    assert!(!msi.is_empty());
    for r in &msi {
        assert_eq!(r.routine_module.as_deref(), Some("storport.sys"));
        assert_eq!(r.routine_offset, Some(0xDF70));
        assert_eq!(r.vector, Some(0x60));
        assert_eq!(r.return_value, Some(1));
        assert_eq!(r.size, 0x28);
    }
}

/// triage-etw.md §4.1 step 3, independently: pointers through the VA map, window bounds, header
/// or resync, walk to exactly `valid`.
#[test]
fn windows_follow_the_recipe() {
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        let isf = isf(f);
        let blocks = block_table(d);
        let mut found = Vec::new();
        for (which, bsym, esym, limit) in [
            (
                "etw",
                "KiCurrentEtwBufferBase",
                "KiCurrentEtwBufferOffset",
                0x2000u64,
            ),
            (
                "errlog",
                "KiCurrentErrLogBufferBase",
                "KiCurrentErrLogBufferOffset",
                0x1000,
            ),
        ] {
            let b = read_va(d, &blocks, e.kern_base + isf_rva(&isf, bsym), 8);
            let en = read_va(d, &blocks, e.kern_base + isf_rva(&isf, esym), 8);
            let (Some(b), Some(en)) = (b, en) else {
                continue;
            };
            let (base, end) = (u64_at(&b, 0), u64_at(&en, 0));
            let valid = end - base;
            let start = if valid >= limit { end - limit } else { base };
            // One whole block [start, end).
            let (bi, &(_, fo, sz)) = blocks
                .iter()
                .enumerate()
                .find(|(_, x)| x.0 == start && x.0 + u64::from(x.2) == end)
                .expect("window block");
            let win = &d[fo as usize..fo as usize + sz as usize];
            // Index bytes from the buffer base: pad the front.
            let lead = (start - base) as usize;
            let mut buf = vec![0u8; lead];
            buf.extend_from_slice(win);
            let (first, header_logger) = if start == base {
                if valid >= 0x48 {
                    (Some(0x48usize), Some(u16_at(win, 0x2A)))
                } else {
                    (None, None)
                }
            } else {
                let p0 = align8(lead);
                let p = (p0..valid as usize)
                    .step_by(8)
                    .find(|&p| walk(&buf, p, valid as usize).is_some());
                (p, None)
            };
            let walked = first
                .map(|p| walk(&buf, p, valid as usize).expect("chain ends at valid"))
                .unwrap_or_default();
            found.push(which);
            let x = e
                .windows
                .iter()
                .find(|w| w.which == which)
                .unwrap_or_else(|| panic!("{}: {which} window expected", e.scenario));
            assert_eq!(
                (x.base, x.end, x.valid, x.start_va),
                (base, end, valid, start)
            );
            assert_eq!((x.file_offset, x.size), (u64::from(fo), u64::from(sz)));
            assert_eq!(x.block_index, bi);
            assert_eq!(x.starts_at_base, start == base);
            assert_eq!(x.header.is_some(), header_logger.is_some());
            if let (Some(h), Some(l)) = (&x.header, header_logger) {
                assert_eq!(h.logger_id, l);
                assert_eq!(h.buffer_size, u32_at(win, 0));
                assert_eq!(h.current_offset, u32_at(win, 8));
                assert_eq!(h.sequence_number, u64_at(win, 0x18));
                assert_eq!(h.processor_index, u16_at(win, 0x28));
                assert_eq!(h.state, u32_at(win, 0x2C));
                let v = if h.current_offset <= h.buffer_size {
                    h.current_offset
                } else {
                    h.saved_offset
                };
                assert_eq!(u64::from(v), valid);
            }
            assert_eq!(
                x.first_record_offset,
                first.map(|p| p as u64),
                "{}",
                e.scenario
            );
            let partial = match first {
                _ if start == base => 0,
                Some(p) => p - lead,
                None => sz as usize,
            };
            assert_eq!(x.partial_bytes, partial as u64);
            assert_eq!(x.record_count, walked.len());
            let source = if which == "etw" {
                "current_buffer"
            } else {
                "errlog_tail"
            };
            let exp = expected_of(f, source);
            assert_eq!(exp.len(), walked.len(), "{} {which}", e.scenario);
            for (w, r) in walked.iter().zip(&exp) {
                assert_eq!(r.buffer_offset, w.buffer_offset as u64);
                assert_eq!(
                    r.file_offset,
                    u64::from(fo) + (w.buffer_offset - lead) as u64
                );
                assert_eq!((r.marker, r.size), (w.marker, w.size));
            }
        }
        let exp_windows: Vec<&str> = e.windows.iter().map(|w| w.which.as_str()).collect();
        assert_eq!(found, exp_windows, "{}", e.scenario);
    }
}

#[test]
fn window_shapes_per_scenario() {
    let w = |s: &str, which: &str| {
        scenario(s)
            .expected
            .windows
            .iter()
            .find(|w| w.which == which)
            .cloned()
    };
    // Standard: logger 2 saved whole from its header; the error-log window is the last 0x1000
    // bytes, starting mid-record.
    let etw = w("standard", "etw").unwrap();
    assert!(etw.starts_at_base && etw.valid < 0x2000 && etw.partial_bytes == 0);
    let h = etw.header.unwrap();
    assert_eq!(
        (h.logger_id, h.processor_index, h.buffer_size),
        (2, 0, 0x1000)
    );
    assert_eq!((h.sequence_number, h.state), (0x9E, 1));
    assert_eq!(etw.record_count, 92);
    let el = w("standard", "errlog").unwrap();
    assert!(!el.starts_at_base && el.size == 0x1000 && el.partial_bytes > 0);
    assert_eq!(el.logger_id, Some(10));
    // logger2_cut: 0x2000 from the end of a larger buffer, mid-record, no header.
    let cut = w("logger2_cut", "etw").unwrap();
    assert!(!cut.starts_at_base && cut.valid > 0x2000 && cut.size == 0x2000);
    assert!(cut.header.is_none() && cut.partial_bytes > 0 && cut.processor_index.is_none());
    assert_eq!(cut.logger_id, Some(2));
    assert!(expected_of(scenario("logger2_cut"), "current_buffer")
        .iter()
        .all(|r| r.cpu == Some(3)));
    // short_windows: 0x20 bytes of header; a zero-size error-log window.
    let sw = w("short_windows", "etw").unwrap();
    assert_eq!((sw.valid, sw.size, sw.record_count), (0x20, 0x20, 0));
    assert!(sw.header.is_none() && sw.first_record_offset.is_none());
    let sz = w("short_windows", "errlog").unwrap();
    assert_eq!((sz.valid, sz.size, sz.base), (0, 0, sz.end));
    // missing_globals: both windows orphaned.
    let mg = &scenario("missing_globals").expected;
    assert!(mg.windows.is_empty());
    let o: Vec<(&str, bool, bool)> = mg
        .orphan_window_blocks
        .iter()
        .map(|o| (o.which.as_str(), o.base_readable, o.end_readable))
        .collect();
    assert_eq!(o, vec![("etw", false, false), ("errlog", false, true)]);
    // bad_truncated: the error-log window is cut, the secondary data is gone.
    let t = &scenario("bad_truncated").expected;
    assert!(t.file_len < u64::from(t.triage.size_of_dump));
    assert!(t.secondary.is_none() && t.etw_blob.is_none());
    assert_eq!(t.windows.len(), 1);
    assert_eq!(t.orphan_window_blocks[0].which, "errlog");
    let eb = &t.data_blocks[t.orphan_window_blocks[0].block_index];
    assert!(!eb.in_file && u64::from(eb.file_offset) < t.file_len);
}

/// A blob of the secondary data as walked: (header offset, GUID, data offset, data size,
/// pre pad, post pad).
type BlobRow = (usize, String, usize, u32, u32, u32);

/// The signature in front of each session of the ETW blob (triage-etw.md §1.3).
const BLOB_SESSION_SIGNATURE: u32 = 0x01EB_AFE1;

/// The secondary data and ETW blob, walked per triage-etw.md §1.3 / §4.1 step 4 with the
/// convention detection of the recipe.
#[test]
fn blob_walk_matches_expected() {
    for f in all() {
        let e = &f.expected;
        let Some(blobs) = walk_secondary_data(f) else {
            continue;
        };
        let etw = blobs
            .iter()
            .position(|b| b.1 == "2b88b710-1c93-4f7c-b06c-655ecc50decc");
        let Some(xb) = &e.etw_blob else {
            assert!(etw.is_none());
            continue;
        };
        let bi = etw.expect("ETW blob");
        assert_eq!(bi, blobs.len() - 1);
        assert_eq!(bi, xb.blob_index);
        let (_, _, start, size, _, _) = blobs[bi];
        check_etw_blob(f, xb, start, size);
    }
    check_blob_shapes_of_the_real_dump();
}

/// The DumpBlob header after SizeOfDump and its blobs, against `ExpectedSecondary`; None when
/// the dump has no secondary data.
fn walk_secondary_data(f: &ForgedTriage) -> Option<Vec<BlobRow>> {
    let d = &f.bytes;
    let e = &f.expected;
    let sod = e.triage.size_of_dump as usize;
    let Some(sec) = &e.secondary else {
        assert!(sod + 0x10 > d.len());
        return None;
    };
    assert_eq!(&d[sod..sod + 8], b"DumpBlob");
    assert_eq!(u32_at(d, sod + 8), 0x10);
    assert_eq!(u32_at(d, sod + 12), 0xF000_0000 | e.build);
    assert_eq!(sec.file_offset, sod as u64);
    let mut p = sod + 0x10;
    let mut blobs = Vec::new();
    while p + 0x20 <= d.len() {
        let hs = u32_at(d, p) as usize;
        let guid = guid_text(&d[p + 4..p + 20]);
        let (ds, pre, post) = (u32_at(d, p + 20), u32_at(d, p + 24), u32_at(d, p + 28));
        let data = p + hs + pre as usize;
        blobs.push((p, guid, data, ds, pre, post));
        p = data + ds as usize + post as usize;
    }
    assert_eq!(blobs.len(), sec.blobs.len(), "{}", e.scenario);
    for (b, x) in blobs.iter().zip(&sec.blobs) {
        assert_eq!(
            (b.0 as u64, b.1.as_str(), b.2 as u64, b.3, b.4, b.5),
            (
                x.header_offset,
                x.guid.as_str(),
                x.data_offset,
                x.data_size,
                x.pre_pad,
                x.post_pad
            )
        );
        assert_eq!((b.2 - sod) % 8, 0, "blob data 8-aligned in the region");
    }
    if e.scenario == "standard" {
        assert!(sec.blobs.iter().any(|b| b.pre_pad == 8));
        assert!(sec.blobs.iter().any(|b| b.data_size == 0));
    }
    Some(blobs)
}

/// The ETW blob at file offset `start`: its header, then session by session (header, name
/// part, buffers), and the records of its buffers.
fn check_etw_blob(f: &ForgedTriage, xb: &ExpectedEtwBlob, start: usize, size: u32) {
    let d = &f.bytes;
    let e = &f.expected;
    let avail = (d.len() - start).min(size as usize);
    let blob = &d[start..start + avail];
    assert_eq!(avail as u32, xb.data_in_file);
    assert_eq!(u32_at(blob, 0), xb.max_increment);
    assert_eq!(u32_at(blob, 4), 0xF000_0000 | e.build);
    assert_eq!(u32_at(blob, 8), xb.cpu_speed_mhz);
    assert_eq!(u64_at(blob, 0x10), xb.boot_time);
    assert_eq!(u64_at(blob, 0x18), xb.perf_freq);
    // Sessions.
    let mut q = 0x20usize;
    let mut si = 0usize;
    let mut walked_records: Vec<(usize, u32, u16)> = Vec::new();
    while q + 0x30 <= blob.len() && u32_at(blob, q) == BLOB_SESSION_SIGNATURE {
        let x = &xb.sessions[si];
        let what = format!("{} session {si}", e.scenario);
        let Some(part) = check_blob_session_part(blob, q, start, x, xb, &what) else {
            break;
        };
        q += part;
        q = walk_blob_session_buffers(blob, q, start, x, &mut walked_records);
        si += 1;
    }
    if xb.complete {
        assert_eq!(q, size as usize);
        assert_eq!(xb.parse_end, q as u64);
    }
    if e.scenario == "bad_blob_size" {
        assert!(!xb.complete && q == blob.len() && (size as usize) > d.len() - start);
        assert_eq!(xb.parse_end, q as u64);
    }
    assert_eq!(
        si + usize::from(!xb.sessions.iter().all(|s| s.complete)),
        xb.sessions.len()
    );
    let exp: Vec<(usize, u32, u16)> = expected_of(f, "secondary_data")
        .iter()
        .map(|r| (r.file_offset as usize, r.marker, r.size))
        .collect();
    assert_eq!(walked_records, exp, "{}", e.scenario);
}

/// A session's header and name part at blob offset `q`: the part's length, or None when no
/// naming convention fits (an incomplete session, where a correct walk stops).
fn check_blob_session_part(
    blob: &[u8],
    q: usize,
    start: usize,
    x: &ExpectedBlobSession,
    xb: &ExpectedEtwBlob,
    what: &str,
) -> Option<usize> {
    let (lid, mode, ct, bsz, len) = (
        u32_at(blob, q + 4),
        u32_at(blob, q + 8),
        u32_at(blob, q + 12),
        u32_at(blob, q + 16),
        u32_at(blob, q + 20) as usize,
    );
    assert_eq!(x.file_offset, (start + q) as u64);
    assert_eq!(
        (x.logger_id, x.logger_mode, x.clock_type, x.buffer_size),
        (lid, mode, ct, bsz)
    );
    assert_eq!(x.name_length as usize, len);
    assert_eq!(x.start_time, u64_at(blob, q + 0x18));
    assert_eq!(x.reference_system_time, u64_at(blob, q + 0x20));
    assert_eq!(x.reference_perf_clock, u64_at(blob, q + 0x28));
    // Accept the convention whose next part is a session, the end, or a buffer of this
    // session.
    let fits = |n: usize| {
        n == blob.len()
            || (n + 4 <= blob.len() && u32_at(blob, n) == BLOB_SESSION_SIGNATURE)
            || (n + 0x48 <= blob.len()
                && u32_at(blob, n) == bsz
                && u32::from(u16_at(blob, n + 0x2A)) == lid)
    };
    let conv = if fits(q + 0x30 + 2 * len) {
        NameConvention::Doubled
    } else if fits(q + 0x30 + len) {
        NameConvention::Single
    } else {
        assert!(!x.complete, "{what}");
        assert_eq!(xb.parse_end, q as u64);
        return None;
    };
    assert_eq!(conv, xb.name_convention);
    assert!(x.complete);
    let units: Vec<u16> = (0..len / 2)
        .map(|k| u16_at(blob, q + 0x30 + 2 * k))
        .collect();
    assert_eq!(Some(String::from_utf16(&units).unwrap()), x.name);
    let part = match conv {
        NameConvention::Doubled => {
            // The second half is zero, but for at most 12 stray bytes at its end (measured on
            // the ARM64 dump's RdpIdd session; a reader must not require zeros).
            let half = &blob[q + 0x30 + len..q + 0x30 + 2 * len];
            let cut = len.saturating_sub(12);
            assert!(half[..cut].iter().all(|&z| z == 0));
            0x30 + 2 * len
        }
        NameConvention::Single => 0x30 + len,
    };
    assert_eq!(x.part_length, part as u64);
    Some(part)
}

/// The buffers of a session from blob offset `q` up to the next session: their headers and
/// records (appended to `walked` as file offset, marker, size). Returns the offset after them.
fn walk_blob_session_buffers(
    blob: &[u8],
    mut q: usize,
    start: usize,
    x: &ExpectedBlobSession,
    walked: &mut Vec<(usize, u32, u16)>,
) -> usize {
    let (bsz, lid) = (x.buffer_size, x.logger_id);
    let mut nb = 0;
    while q + 0x48 <= blob.len() && u32_at(blob, q) != BLOB_SESSION_SIGNATURE {
        let h = &blob[q..];
        assert_eq!(u32_at(h, 0), bsz);
        assert_eq!(u32::from(u16_at(h, 0x2A)), lid);
        let (cur, saved) = (u32_at(h, 8), u32_at(h, 4));
        let valid = if cur <= bsz { cur } else { saved } as usize;
        assert_eq!(u32_at(h, 0x30) as usize, valid, "Offset = valid");
        let xbuf = &x.buffers[nb];
        assert_eq!(xbuf.file_offset, (start + q) as u64);
        assert_eq!(xbuf.valid as usize, valid);
        assert_eq!(xbuf.header.sequence_number, u64_at(h, 0x18));
        assert_eq!(xbuf.header.state, u32_at(h, 0x2C));
        assert_eq!(xbuf.header.buffer_flag, u16_at(h, 0x34));
        let recs = walk(&h[..valid], 0x48, valid).expect("buffer walks to valid");
        assert_eq!(recs.len(), xbuf.record_count);
        if recs.is_empty() {
            assert_eq!(valid, 0x48);
            assert_eq!((xbuf.header.state, xbuf.header.buffer_flag), (0, 0x100));
        }
        for r in recs {
            walked.push((start + q + r.buffer_offset, r.marker, r.size));
        }
        q += valid;
        nb += 1;
    }
    assert_eq!(nb, x.buffers.len());
    q
}

/// The real dump's shape: part lengths 0x30 + 2*Length (19041); the names_x1 and
/// blob_no_sessions variants.
fn check_blob_shapes_of_the_real_dump() {
    let s = scenario("standard").expected.etw_blob.as_ref().unwrap();
    let names: Vec<(u32, u32, usize)> = s
        .sessions
        .iter()
        .map(|x| (x.logger_id, x.name_length, x.buffers.len()))
        .collect();
    assert_eq!(names, vec![(10, 0x1E, 2), (12, 0x56, 32), (18, 0x16, 32)]);
    let parts: Vec<u64> = s.sessions.iter().map(|x| x.part_length).collect();
    assert_eq!(parts, vec![0x6C, 0xDC, 0x5C]);
    assert_eq!(
        (
            s.max_increment,
            s.nt_build_number,
            s.cpu_speed_mhz,
            s.perf_freq
        ),
        (156_250, 0xF000_4A61, 3593, 10_000_000)
    );
    let x1 = scenario("names_x1").expected.etw_blob.as_ref().unwrap();
    let parts: Vec<u64> = x1.sessions.iter().map(|x| x.part_length).collect();
    assert_eq!(parts, vec![0x4E, 0x86, 0x46]);
    let ns = scenario("blob_no_sessions")
        .expected
        .etw_blob
        .as_ref()
        .unwrap();
    assert!(ns.sessions.is_empty() && ns.data_size == 0x20 && ns.complete);
}

#[test]
fn errlog_tail_duplicates_the_blob_buffer_tail() {
    let mut checked = 0;
    for f in all() {
        let d = &f.bytes;
        let e = &f.expected;
        for w in &e.windows {
            let Some(dup) = &w.duplicate_of else {
                continue;
            };
            assert_eq!(w.which, "errlog");
            let blob = e.etw_blob.as_ref().unwrap();
            let buf = &blob.sessions[dup.session_index].buffers[dup.buffer_index];
            assert_eq!(u64::from(buf.valid), w.valid, "same valid length");
            let tail = (buf.file_offset + w.valid - w.size) as usize;
            let win = w.file_offset as usize;
            assert_eq!(
                &d[tail..tail + w.size as usize],
                &d[win..win + w.size as usize]
            );
            // The blob's next buffer links back to Base + 0x38 (triage-etw.md §2.5).
            if let Some(next) = blob.sessions[dup.session_index]
                .buffers
                .get(dup.buffer_index + 1)
            {
                assert_eq!(u64_at(d, next.file_offset as usize + 0x40), w.base + 0x38);
            }
            checked += 1;
        }
        let tails = expected_of(f, "errlog_tail");
        if e.windows
            .iter()
            .any(|w| w.which == "errlog" && w.duplicate_of.is_some())
        {
            assert_eq!(e.duplicates.len(), tails.len());
        } else {
            assert!(e.duplicates.is_empty());
            assert!(tails.iter().all(|r| r.logger_id.is_none()));
        }
        for dup in &e.duplicates {
            let (a, b) = (&e.records[dup.errlog_record], &e.records[dup.blob_record]);
            assert_eq!(a.source, "errlog_tail");
            assert_eq!(b.source, "secondary_data");
            assert_eq!(a.duplicate_of, Some(b.index));
            assert_eq!(a.buffer_offset, b.buffer_offset);
            let n = usize::from(a.size);
            assert_eq!(
                &d[a.file_offset as usize..][..n],
                &d[b.file_offset as usize..][..n]
            );
        }
    }
    assert!(checked >= 5);
}

/// Each expected record, decoded at its file offset (etw-internals.md §5).
#[test]
fn records_decode_at_their_offsets() {
    for f in all() {
        let d = &f.bytes;
        for r in &f.expected.records {
            let o = r.file_offset as usize;
            assert_eq!(u32_at(d, o), r.marker);
            assert_eq!(
                r.index,
                f.expected.records.iter().position(|x| x == r).unwrap()
            );
            match r.header_type.as_str() {
                "perfinfo64" => {
                    assert_eq!(r.marker, 0xC011_0002);
                    assert_eq!(u16_at(d, o + 4), r.size);
                    assert_eq!(Some(u16_at(d, o + 6)), r.hook_id);
                    assert_eq!(u64_at(d, o + 8), r.timestamp);
                    assert_eq!(Some(u64_at(d, o + 0x10)), r.initial_time);
                    assert_eq!(Some(u64_at(d, o + 0x18)), r.routine);
                    let expect_size = match r.hook_id.unwrap() {
                        0x0F32 => 0x28,
                        0x0F43 => 0x24,
                        0x0F44 | 0x0F45 => 0x20,
                        h => panic!("hook {h:#x}"),
                    };
                    assert_eq!(r.size, expect_size);
                    if let Some(v) = r.vector {
                        assert_eq!(d[o + 0x20], r.return_value.unwrap());
                        assert_eq!(u16_at(d, o + 0x21), v);
                    }
                    assert!(r.initial_time.unwrap() < r.timestamp);
                    assert!(r.pid.is_none() && r.tid.is_none());
                }
                "event_header" | "event_header32" => {
                    let ty = if r.header_type == "event_header" {
                        0xC013
                    } else {
                        0xC012
                    };
                    assert_eq!(r.marker >> 16, ty);
                    assert_eq!(u16_at(d, o), r.size);
                    assert_eq!(Some(u16_at(d, o + 4)), r.flags);
                    assert_eq!(Some(u16_at(d, o + 6)), r.event_property);
                    assert_eq!(Some(u32_at(d, o + 8)), r.tid);
                    assert_eq!(Some(u32_at(d, o + 0xC)), r.pid);
                    assert_eq!(u64_at(d, o + 0x10), r.timestamp);
                    assert_eq!(Some(guid_text(&d[o + 0x18..o + 0x28])), r.provider);
                    assert_eq!(Some(u16_at(d, o + 0x28)), r.event_id);
                    assert_eq!(Some(d[o + 0x2A]), r.version);
                    assert_eq!(Some(d[o + 0x2B]), r.channel);
                    assert_eq!(Some(d[o + 0x2C]), r.level);
                    assert_eq!(Some(u16_at(d, o + 0x2E)), r.task);
                    assert_eq!(Some(u64_at(d, o + 0x30)), r.keyword);
                    // Extended items: {u16 size, u16 type, u16 more, u16 DataSize} + data.
                    let mut types = Vec::new();
                    if u16_at(d, o + 4) & 1 != 0 {
                        let mut q = o + 0x50;
                        loop {
                            let (isz, ty, more, ds) = (
                                u16_at(d, q),
                                u16_at(d, q + 2),
                                u16_at(d, q + 4),
                                u16_at(d, q + 6),
                            );
                            assert_eq!(usize::from(isz), 8 + align8(usize::from(ds)));
                            if ty == 2 {
                                assert_eq!(&d[q + 8..q + 16], &[1, 1, 0, 0, 0, 0, 0, 5]);
                            }
                            types.push(ty);
                            q += usize::from(isz);
                            if more & 1 == 0 {
                                break;
                            }
                        }
                        assert!(q <= o + usize::from(r.size));
                    }
                    assert_eq!(types, r.ext_types);
                }
                "message" => {
                    // MESSAGE_TRACE_HEADER, parsed in the consumer's order (tests/message.rs).
                    let m = super::message::parse_message(d, o);
                    assert_eq!(u16_at(d, o), r.size);
                    assert_eq!(r.marker >> 24, 0x90);
                    assert_eq!(Some(&m), r.message.as_ref());
                    assert_eq!((m.tid, m.pid), (r.tid, r.pid));
                    assert_eq!(m.timestamp.unwrap_or(0), r.timestamp);
                    assert_eq!(m.payload_offset + m.payload_len, u32::from(r.size));
                }
                t => panic!("header type {t}"),
            }
        }
    }
    // Extended items of both kinds, legacy entries and odd sizes all occur.
    let s = &scenario("standard").expected.records;
    assert!(s.iter().any(|r| r.ext_types == [2, 12]));
    assert!(s.iter().any(|r| r.ext_types == [2]));
    assert!(s.iter().any(|r| r.event_property == Some(4)));
    assert!(s.iter().any(|r| r.size % 8 != 0));
}

#[test]
fn clocks_cpus_and_timestamps() {
    for f in all() {
        let e = &f.expected;
        let cb = expected_of(f, "current_buffer");
        // Logger 2: CPU cycles, increasing, ending a few hundred cycles before StartCycles.
        for w in cb.windows(2) {
            assert!(w[0].timestamp < w[1].timestamp);
        }
        for r in &cb {
            assert_eq!(r.clock.as_deref(), Some("cycles"));
            assert_eq!(r.cpu, Some(e.crash_cpu.number));
            assert_eq!(r.logger_id, Some(2));
            assert_eq!(
                r.cycles_before_crash,
                Some(e.crash_cpu.start_cycles - r.timestamp)
            );
            // Within a second of the anchor.
            assert!(r.cycles_before_crash.unwrap() < u64::from(e.crash_cpu.mhz) * 1_000_000);
        }
        if let Some(last) = cb.last() {
            assert_eq!(last.cycles_before_crash, Some(252));
        }
        // Blob records: FILETIME sessions have no CPU; per-processor sessions do.
        let blob = e.etw_blob.as_ref();
        for r in expected_of(f, "secondary_data") {
            let s = &blob.unwrap().sessions[r.session_index.unwrap()];
            if r.message.as_ref().is_some_and(|m| m.timestamp.is_none()) {
                // A message without TRACE_MESSAGE_TIMESTAMP carries no time.
                assert_eq!(r.timestamp, 0);
                continue;
            }
            assert_eq!(r.logger_id, Some(s.logger_id as u16));
            let buf = &s.buffers[r.buffer_index.unwrap()];
            if s.logger_mode & 0x1000_0000 != 0 {
                assert_eq!(r.cpu, None);
            } else {
                assert_eq!(r.cpu, Some(u32::from(buf.header.processor_index)));
            }
            match s.clock_type {
                2 => {
                    assert_eq!(r.clock.as_deref(), Some("filetime"));
                    // Between boot and just after the header's SystemTime.
                    assert!(r.timestamp > e.system_time - 100_000_000);
                    assert!(r.timestamp <= e.system_time + 10_000);
                }
                1 => {
                    assert_eq!(r.clock.as_deref(), Some("qpc"));
                    assert!(r.timestamp > s.reference_perf_clock);
                }
                c => panic!("clock {c}"),
            }
        }
    }
    let x1 = scenario("names_x1");
    let qpc: Vec<_> = expected_of(x1, "secondary_data")
        .into_iter()
        .filter(|r| r.clock.as_deref() == Some("qpc"))
        .collect();
    assert_eq!(qpc.len(), 6);
    assert!(qpc
        .iter()
        .all(|r| r.cpu == Some(3) && r.logger_id == Some(18)));
}

#[test]
fn no_cswitch_records_and_counts_like_d1() {
    for f in all() {
        assert!(f
            .expected
            .records
            .iter()
            .all(|r| !matches!(r.hook_id, Some(0x0524 | 0x0525))));
        let counts: BTreeMap<&str, usize> =
            f.expected.records.iter().fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r.source.as_str()).or_default() += 1;
                m
            });
        for (k, v) in &f.expected.record_counts {
            assert_eq!(counts.get(k.as_str()).copied().unwrap_or(0), *v);
        }
    }
    let s = &scenario("standard").expected;
    assert_eq!(s.record_counts["current_buffer"], 92);
    assert_eq!(s.record_counts["secondary_data"], 107);
    assert!((10..=30).contains(&s.record_counts["errlog_tail"]));
    let hooks: Vec<u16> = s.records.iter().filter_map(|r| r.hook_id).collect();
    assert_eq!(hooks.iter().filter(|h| **h == 0x0F43).count(), 1);
    for h in [0x0F32, 0x0F44, 0x0F45] {
        assert!(hooks.contains(&h), "hook {h:#x}");
    }
    assert!(s.error_log_session_opened);
}

/// The recipe's resync (smallest aligned offset whose chain ends at `valid`) lands on the
/// true first record even with a permissive header check.
#[test]
fn resync_is_unambiguous() {
    for f in all() {
        let d = &f.bytes;
        for w in &f.expected.windows {
            if w.starts_at_base {
                continue;
            }
            let lead = (w.start_va - w.base) as usize;
            let mut buf = vec![0u8; lead];
            buf.extend_from_slice(&d[w.file_offset as usize..][..w.size as usize]);
            let valid = w.valid as usize;
            // Permissive: any flags byte with the top bit, Size at +4 or +0.
            let chain = |mut p: usize| -> bool {
                while p < valid {
                    if buf[p + 3] & 0x80 == 0 {
                        return false;
                    }
                    let s = match buf[p + 2] {
                        0x01..=0x04 | 0x10 | 0x11 => u16_at(&buf, p + 4),
                        _ => u16_at(&buf, p),
                    } as usize;
                    if s < 8 || p + s > valid {
                        return false;
                    }
                    p += align8(s);
                }
                p == valid
            };
            let first = (align8(lead)..valid).step_by(8).find(|&p| chain(p));
            assert_eq!(first.map(|p| p as u64), w.first_record_offset);
            assert!(w.partial_bytes > 0);
        }
    }
}
