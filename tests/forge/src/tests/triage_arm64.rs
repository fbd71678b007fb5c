//! ARM64 triage dumps and the placement of KiSaveCurrentEtwTraceBuffer's globals, read back with
//! the triage tests' own readers (data-block table, VA map, ISF) and, where present, compared
//! with the real ARM64 dump `shared/data/dumps/triage_arm64.dmp` (read at test time, never
//! copied into the project).

use super::message::parse_message;
use super::triage::{block_table, isf, isf_rva, read_va, scenario, u16_at, u32_at, u64_at};
use crate::{
    all_message_flag_combinations, forge_triage, ErrlogSource, ErrlogSpec, ForgedTriage,
    GlobalsOrder, TriageArch, TriageSpec,
};

/// The window triples of triage-etw.md §4.1 step 3, found through the ISF: for each
/// (Base symbol, End symbol, limit), the pointers read through the VA map and the block
/// holding `[End - min(valid, limit), End)`; returns (base, end, base global VA, end global VA,
/// window block index, base block index, end block index).
fn windows_via_isf(f: &ForgedTriage) -> Vec<(u64, u64, u64, u64, usize, usize, usize)> {
    let d = &f.bytes;
    let blocks = block_table(d);
    let v = isf(f);
    let kb = f.expected.kern_base;
    let mut out = Vec::new();
    for (bs, es, limit) in [
        (
            "KiCurrentEtwBufferBase",
            "KiCurrentEtwBufferOffset",
            0x2000u64,
        ),
        (
            "KiCurrentErrLogBufferBase",
            "KiCurrentErrLogBufferOffset",
            0x1000,
        ),
    ] {
        let (bva, eva) = (kb + isf_rva(&v, bs), kb + isf_rva(&v, es));
        let (Some(b), Some(e)) = (read_va(d, &blocks, bva, 8), read_va(d, &blocks, eva, 8)) else {
            continue;
        };
        let (base, end) = (u64_at(&b, 0), u64_at(&e, 0));
        let valid = end - base;
        let start = end - valid.min(limit);
        let idx = |va: u64, size: u64| {
            blocks
                .iter()
                .position(|&(a, _, s)| a == va && u64::from(s) == size)
                .expect("block")
        };
        out.push((
            base,
            end,
            bva,
            eva,
            idx(start, end - start),
            idx(bva, 8),
            idx(eva, 8),
        ));
    }
    out
}

/// Every order, for many seeds, on x64 and ARM64: the blocks are added in call order
/// `[window][Base][End]` wherever the globals lie; the globals' relative placement is the
/// spec's; `ExpectedWindow` says where each one is; the ISF-free heuristic of §4.1 step 3
/// (consecutive `[buf][8][8]` with `buf.VA + buf.Size == End`) finds the same triples.
#[test]
fn every_globals_order_for_many_seeds() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..36u64 {
        let order = GlobalsOrder::drawn(seed);
        let mut spec = if seed % 2 == 0 {
            TriageSpec::standard()
        } else {
            let mut s = TriageSpec::arm64();
            s.errlog = Some(ErrlogSpec {
                source: ErrlogSource::Standalone {
                    va: 0xFFFF_BB8E_B200_0000,
                    logger_id: 11,
                    buffer_size: 0x10000,
                    records: 40 + seed as usize,
                    valid_override: None,
                },
                save_base: true,
                save_end: true,
            });
            s
        };
        spec = spec.with_globals(order);
        spec.name = format!("seed{seed}");
        spec.cpus = 2;
        spec.crash_cpu = (seed % 2) as u32;
        spec.seed ^= seed << 20;
        let f = forge_triage(&spec);
        let e = &f.expected;
        assert_eq!(e.globals_order, order);
        let found = windows_via_isf(&f);
        assert_eq!(found.len(), 2, "seed {seed}");
        for ((base, end, bva, eva, wi, bi, ei), w) in found.iter().zip(&e.windows) {
            assert_eq!(
                (*bi, *ei),
                (wi + 1, wi + 2),
                "call order [window][Base][End]"
            );
            assert_eq!(
                (w.block_index, w.base_block_index, w.end_block_index),
                (*wi, *bi, *ei)
            );
            assert_eq!((w.base, w.end), (*base, *end));
            assert_eq!((w.base_global_va, w.end_global_va), (*bva, *eva));
            let delta = *eva as i64 - *bva as i64;
            assert_eq!(w.end_global_delta, delta);
            assert_eq!(delta, order.delta(&w.which), "seed {seed} {}", w.which);
            let name = match delta {
                8 => "rising",
                -8 => "end_below_base",
                _ => "spaced",
            };
            assert_eq!(w.globals_order, name);
            assert_eq!(name, order.name());
            seen.insert((e.arch == TriageArch::Arm64, name));
            assert_eq!(w.cpu, (w.which == "etw").then_some(spec.crash_cpu));
            assert_eq!(w.record_indexes.len(), w.record_count);
            for &i in &w.record_indexes {
                let r = &e.records[i];
                let src = if w.which == "etw" {
                    "current_buffer"
                } else {
                    "errlog_tail"
                };
                assert_eq!(r.source, src);
                assert!(r.file_offset >= w.file_offset && r.file_offset < w.file_offset + w.size);
            }
            // The globals' blocks hold the pointers.
            let d = &f.bytes;
            let blocks = block_table(d);
            assert_eq!(u64_at(&read_va(d, &blocks, *bva, 8).unwrap(), 0), *base);
            assert_eq!(u64_at(&read_va(d, &blocks, *eva, 8).unwrap(), 0), *end);
        }
        // Without the ISF: consecutive [buf][8][8] with buf.VA + buf.Size == End and
        // (buf.VA == Base or a full window).
        let blocks = block_table(&f.bytes);
        let mut triples = Vec::new();
        for i in 0..blocks.len().saturating_sub(2) {
            let (wva, _, wsz) = blocks[i];
            if blocks[i + 1].2 != 8 || blocks[i + 2].2 != 8 {
                continue;
            }
            let rd = |k: usize| u64_at(&f.bytes, blocks[k].1 as usize);
            let (b, en) = (rd(i + 1), rd(i + 2));
            if wva + u64::from(wsz) == en && (wva == b || matches!(wsz, 0x1000 | 0x2000)) {
                triples.push(i);
            }
        }
        let want: Vec<usize> = e.windows.iter().map(|w| w.block_index).collect();
        assert_eq!(triples, want, "seed {seed}");
    }
    // Every order on both architectures.
    assert_eq!(seen.len(), 6, "{seen:?}");
}

/// The named scenarios' orders.
#[test]
fn named_scenarios_place_the_globals() {
    for (name, etw, errlog) in [
        ("standard", 8, Some(8)),
        ("globals_end_below_base", -8, Some(-8)),
        ("globals_spaced", -0x1A8, Some(0x2E0)),
        ("arm64", -8, None),
        ("arm64_errlog_rising", 8, Some(8)),
        ("arm64_errlog_end_below_base", -8, Some(-8)),
        ("arm64_errlog_spaced", 0x120, Some(-0x3F8)),
    ] {
        let e = &scenario(name).expected;
        let d: Vec<i64> = e.windows.iter().map(|w| w.end_global_delta).collect();
        let want: Vec<i64> = std::iter::once(etw).chain(errlog).collect();
        assert_eq!(d, want, "{name}");
    }
    // ARM64: the measured addresses (block #26 Base nt+0xC36AD0, block #27 End nt+0xC36AC8).
    let a = &scenario("arm64").expected;
    let w = &a.windows[0];
    assert_eq!(w.base_global_va - a.kern_base, 0xC3_6AD0);
    assert_eq!(w.end_global_va - a.kern_base, 0xC3_6AC8);
}

/// The `arm64` scenario's shape, as measured on the real dump.
#[test]
fn arm64_scenario_mirrors_the_real_dump() {
    let f = scenario("arm64");
    let e = &f.expected;
    assert_eq!(e.arch, TriageArch::Arm64);
    assert_eq!(
        (e.build, e.number_processors, e.bugcheck_code),
        (22000, 8, 0x1C8)
    );
    assert_eq!(e.bugcheck_params[0], 0x1B58);
    assert!(!e.error_log_session_opened);
    assert_eq!(e.windows.len(), 1);
    let w = &e.windows[0];
    // Block #25: 0xFFFFBB8EB5AAE000, 0x8B8 bytes from the base, header LoggerId 2, CPU 0.
    assert_eq!(
        (w.which.as_str(), w.base, w.size),
        ("etw", 0xFFFF_BB8E_B5AA_E000, 0x8B8)
    );
    assert!(w.starts_at_base);
    let h = w.header.as_ref().unwrap();
    assert_eq!(
        (h.logger_id, h.processor_index, h.buffer_size),
        (2, 0, 0x1000)
    );
    assert_eq!(h.sequence_number, 14232);
    let mut hooks = std::collections::BTreeMap::new();
    for &i in &w.record_indexes {
        *hooks.entry(e.records[i].hook_id.unwrap()).or_insert(0) += 1;
    }
    let want: std::collections::BTreeMap<u16, i32> = [(0x0F43, 22), (0x0F44, 38), (0x0F45, 2)]
        .into_iter()
        .collect();
    assert_eq!(hooks, want);
    // The blob: 4 sessions; name parts 2 x Length (0x3C, 0xAC, 0x2C, 0x24) as measured.
    let b = e.etw_blob.as_ref().unwrap();
    assert_eq!(
        (
            b.max_increment,
            b.nt_build_number,
            b.cpu_speed_mhz,
            b.perf_freq
        ),
        (156_250, 0xF000_55F0, 1516, 19_200_000)
    );
    let rows: Vec<(u32, u32, u32, u32, u64)> = b
        .sessions
        .iter()
        .map(|s| {
            (
                s.logger_id,
                s.logger_mode,
                s.clock_type,
                s.buffer_size,
                s.part_length,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (11, 0x9880_0180, 2, 0x10000, 0x30 + 0x3C),
            (19, 0x8080_0002, 1, 0x10000, 0x30 + 0xAC),
            (35, 0x8080_0002, 1, 0x14000, 0x30 + 0x2C),
            (40, 0x9080_0002, 2, 0x1000, 0x30 + 0x24),
        ]
    );
    // WiFiSession and CldFltLog hold messages, all with flags 0xAA (GUID | TIMESTAMP |
    // SYSTEMINFO | POINTER64), Size >= 0x28.
    let msgs: Vec<_> = e.records.iter().filter(|r| r.message.is_some()).collect();
    assert_eq!(msgs.len(), 120 + 90 + 100 + 40 + 1);
    for r in &msgs {
        let m = r.message.as_ref().unwrap();
        assert_eq!(m.flags, 0xAA);
        assert!(r.size >= 0x28);
        assert!(m.guid.is_some() && m.timestamp.is_some() && m.tid.is_some());
        assert_eq!(m.pointer_size, Some(8));
        assert!(matches!(r.logger_id, Some(35 | 40)));
    }
    // Between the messages: EVENT_HEADER64 and some EVENT_HEADER32 records (A has two).
    let h32 = e
        .records
        .iter()
        .filter(|r| r.header_type == "event_header32")
        .count();
    assert!(h32 >= 2, "{h32}");
    assert!(e
        .records
        .iter()
        .filter(|r| r.header_type == "event_header32")
        .all(|r| r.logger_id == Some(35) && r.marker >> 16 == 0xC012));
    let cpus: Vec<u16> = b.sessions[2].buffers[..4]
        .iter()
        .map(|x| x.header.processor_index)
        .collect();
    assert_eq!(cpus, vec![6, 3, 2, 4]);
}

/// Every OptionFlags combination occurs in the all-flags scenarios, each record decoded at
/// its file offset by the consumer-order parser.
#[test]
fn message_scenarios_hold_every_flag_combination() {
    for name in ["messages_all_flags", "arm64_messages_all_flags"] {
        let f = scenario(name);
        let mut seen = std::collections::BTreeSet::new();
        for r in &f.expected.records {
            if let Some(m) = &r.message {
                assert_eq!(&parse_message(&f.bytes, r.file_offset as usize), m);
                assert_eq!(r.buffer_offset % 8, 0);
                seen.insert(m.flags);
            }
        }
        let all: std::collections::BTreeSet<u16> =
            all_message_flag_combinations().into_iter().collect();
        assert_eq!(seen, all, "{name}");
    }
}

/// The forged ARM64 header, triage header and CONTEXT against the measured facts.
#[test]
fn arm64_header_and_context() {
    for f in crate::triage_scenarios()
        .iter()
        .filter(|s| s.arch == TriageArch::Arm64)
        .map(forge_triage)
    {
        let d = &f.bytes;
        let e = &f.expected;
        let kb = e.kern_base;
        assert_eq!(u32_at(d, 0x30), 0xAA64);
        assert_eq!(u64_at(d, 0x10), 0x946A_A000);
        assert_eq!(u32_at(d, 0x1054), 0xD, "BootId");
        assert_eq!(&d[0x1050..0x1054], b"PAGE", "Attributes");
        assert_eq!(&d[0x103C..0x1040], b"PAGE", "SecondaryDataState");
        let c = 0x348;
        let x = e.arm64_context.as_ref().unwrap();
        assert_eq!(u32_at(d, c), 0x0040_0007);
        assert_eq!(u32_at(d, c + 4), 0x8000_0144);
        assert_eq!(x.x.len(), 29);
        for (i, v) in x.x.iter().enumerate() {
            assert_eq!(u64_at(d, c + 8 + 8 * i), *v);
        }
        assert_eq!(x.x[25], e.bugcheck_params[0]);
        assert_eq!(x.x[26], e.bugcheck_params[1]);
        assert_eq!(u64_at(d, c + 0x100), 0xFFFF_E00E_0E4B_C4A0, "Sp");
        assert_eq!(u64_at(d, c + 0xF0), x.fp);
        assert_eq!(u64_at(d, c + 0x108), kb + 0x4D_E014, "Pc");
        assert_eq!(u64_at(d, c + 0x108), x.pc);
        assert_eq!(u32_at(d, c + 0x314), 0x10, "Fpsr");
        assert!(d[c + 0x390..0xF00].iter().all(|&z| z == 0));
        assert_eq!(u32_at(d, 0xF00), 0x8000_0003);
        assert_eq!(u64_at(d, 0xF10), x.pc, "exception address = Pc");
        let t = 0x2000;
        assert_eq!(u32_at(d, t + 0x1C), 0x2110);
        assert_eq!(u32_at(d, t + 0x20) - u32_at(d, t + 0x1C), 0x9680);
        assert_eq!(u32_at(d, t + 0x24) - u32_at(d, t + 0x20), 0xC80);
        assert_eq!(u32_at(d, t + 0x28) - u32_at(d, t + 0x24), 0x910);
        assert_eq!(u32_at(d, t + 0x2C), 0xB60);
        assert_eq!(u64_at(d, t + 0x48), 0xFFFF_E00E_0E4B_C4A0, "TopOfStack");
        let v = isf(&f);
        assert_eq!(v["metadata"]["windows"]["pdb"]["machine_type"], 0xAA64);
        assert_eq!(v["user_types"]["_KPRCB"]["size"], 0x9680);
    }
}

/// Where the real ARM64 dump is available, compare the measured fields directly.
#[test]
fn arm64_matches_the_real_dump_where_measured() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/dumps/triage_arm64.dmp");
    let Ok(r) = std::fs::read(&path) else {
        eprintln!("skipped: {} not found", path.display());
        return;
    };
    let f = scenario("arm64");
    let d = &f.bytes;
    for (o, n) in [
        (0x00usize, 8usize), // PAGEDU64
        (0x08, 8),           // Major / Minor (0xF / 22000)
        (0x10, 8),           // DirectoryTableBase
        (0x30, 0x10),        // Machine, NumberProcessors, BugCheckCode, pad `PAGE`
        (0x40, 8),           // P1
        (0x50, 0x10),        // P3, P4
        (0xF98, 4),          // DumpType
        (0x1038, 0x1C),      // MiniDumpFields .. WriterStatus
        (0x1050, 8),         // Attributes `PAGE`, BootId
        (0x348, 8),          // ContextFlags, Cpsr
        (0x348 + 0x100, 8),  // Sp
        (0x348 + 0x310, 8),  // Fpcr, Fpsr
        (0xF00, 0x10),       // exception code, flags, record
        (0x200C, 0x10),      // ContextOffset .. UnloadedDriversOffset
        (0x202C, 4),         // SizeOfCallStack
        (0x2044, 4),         // TriageOptions
        (0x2048, 8),         // TopOfStack
        (0x2074, 4),         // DebuggerDataSize
    ] {
        assert_eq!(&d[o..o + n], &r[o..o + n], "header bytes at {o:#x}");
    }
    // KernBase-relative values: Pc, the exception address, X3/X6/X9/X26, the ETW globals.
    let rkb = u64_at(&r, u32_at(&r, 0x2070) as usize + 0x18);
    let kb = f.expected.kern_base;
    assert_eq!(rkb, kb);
    for o in [0x348 + 0x108, 0xF10, 0x48] {
        assert_eq!(u64_at(d, o) - kb, u64_at(&r, o) - rkb, "{o:#x}");
    }
    for i in 0..29 {
        let o = 0x348 + 8 + 8 * i;
        assert_eq!(u64_at(d, o), u64_at(&r, o), "X{i}");
    }
    // Sizes of the fixed parts.
    for (a, b) in [(0x1C, 0x20), (0x20, 0x24), (0x24, 0x28)] {
        assert_eq!(
            u32_at(d, 0x2000 + b) - u32_at(d, 0x2000 + a),
            u32_at(&r, 0x2000 + b) - u32_at(&r, 0x2000 + a)
        );
    }
    // The saved window: blocks #25..#27 of the real dump vs the forged triple.
    let rb = block_table(&r);
    let (w, bg, eg) = (rb[25], rb[26], rb[27]);
    let x = &f.expected.windows[0];
    assert_eq!((x.start_va, x.size), (w.0, u64::from(w.2)));
    assert_eq!((x.base_global_va, x.end_global_va), (bg.0, eg.0));
    let rh = &r[w.1 as usize..];
    let h = x.header.as_ref().unwrap();
    assert_eq!(
        (h.buffer_size, h.current_offset, h.sequence_number),
        (u32_at(rh, 0), u32_at(rh, 8), u64_at(rh, 0x18))
    );
    assert_eq!(
        (h.processor_index, h.logger_id),
        (u16_at(rh, 0x28), u16_at(rh, 0x2A))
    );
    // The ETW blob header and session headers.
    let b = f.expected.etw_blob.as_ref().unwrap();
    let rblob = 0xBB02C;
    assert_eq!(
        &d[b.data_offset as usize..][..0x20],
        &r[rblob..rblob + 0x20]
    );
    let mut q = rblob + 0x20;
    for s in &b.sessions {
        assert_eq!(u32_at(&r, q), 0x01EB_AFE1);
        let forged = &d[s.file_offset as usize..][..0x30];
        // Signature .. Length, StartTime, ReferenceTime: every header field.
        assert_eq!(&forged[..0x30], &r[q..q + 0x30], "session {}", s.logger_id);
        assert_eq!(
            s.part_length as usize,
            0x30 + 2 * u32_at(&r, q + 0x14) as usize
        );
        // Skip to the next session.
        let mut p = q + s.part_length as usize;
        while p + 4 <= r.len() && p < rblob + 0x6DF80 && u32_at(&r, p) != 0x01EB_AFE1 {
            let (bsz, saved, cur) = (u32_at(&r, p), u32_at(&r, p + 4), u32_at(&r, p + 8));
            p += if cur <= bsz { cur } else { saved } as usize;
        }
        q = p;
    }
    // RdpIdd's stray name-padding bytes.
    let rdp = &b.sessions[1];
    let end = (rdp.file_offset + rdp.part_length) as usize;
    assert_eq!(&d[end - 12..end], &r[0xBBD94 - 12..0xBBD94]);
    // The first real message and every forged one share the header shape.
    let m = parse_message(&r, 0xBC2B8);
    assert_eq!((m.flags, m.pointer_size), (0xAA, Some(8)));
}

/// The ARM64 message scenarios for many seeds: every blob buffer walks from 0x48 to exactly its
/// valid length (messages and events), every expected message decodes at its offset, every
/// combination occurs, the window is still the measured 0x8B8 bytes with End below Base.
#[test]
fn arm64_messages_for_many_seeds() {
    for k in 0..10u64 {
        let mut spec = TriageSpec::arm64_messages_all_flags();
        spec.seed ^= k << 32;
        spec.crash_cpu = (k % 8) as u32;
        let f = forge_triage(&spec);
        let e = &f.expected;
        let w = &e.windows[0];
        assert_eq!(
            (w.size, w.end_global_delta, w.cpu),
            (0x8B8, -8, Some(spec.crash_cpu))
        );
        let b = e.etw_blob.as_ref().unwrap();
        assert!(b.complete);
        let mut walked = 0;
        for s in &b.sessions {
            for x in &s.buffers {
                let fo = x.file_offset as usize;
                let buf = &f.bytes[fo..fo + x.valid as usize];
                let recs = super::triage::walk(buf, 0x48, x.valid as usize).expect("walks");
                assert_eq!(recs.len(), x.record_count);
                walked += recs.len();
            }
        }
        assert_eq!(walked, e.record_counts["secondary_data"]);
        let mut seen = std::collections::BTreeSet::new();
        for r in e.records.iter().filter(|r| r.message.is_some()) {
            let m = parse_message(&f.bytes, r.file_offset as usize);
            assert_eq!(Some(&m), r.message.as_ref(), "seed {k}");
            seen.insert(m.flags);
        }
        assert_eq!(seen.len(), 192);
    }
}
