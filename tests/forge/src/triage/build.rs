//! Lays out a triage dump and derives its expectations from what was written.

use std::collections::BTreeMap;

use super::consts::*;
use super::gen::*;
use super::isf::isf_json;
use super::*;
use crate::config::Config;
use crate::dump::header::{self, HeaderInfo};
use crate::util::{align_up, guid_from_str, guid_to_string, put_bytes, put_u16, put_u32, put_u64};
use crate::util::{utf16le, Rng};

/// D1 values used as defaults for things the spec does not control.
const CRASH_THREAD: u64 = 0xFFFF_C08B_DE9E_1640;
const CPU0_PRCB: u64 = 0xFFFF_F804_782D_4180;
const ETW_SUPPORT: u64 = 0xFFFF_C08B_DCF5_7730;
/// RVA of the exception address in D1 (0xFFFFF8047BDF5A80 - KernBase).
const EXCEPTION_RVA: u64 = 0x3F5A80;
/// RVA of CPU 0's idle thread in D1 (0xFFFFF8047C727600 - KernBase).
const IDLE_THREAD0_RVA: u64 = 0xD27600;
/// D1's ErrorLogSessionOpened block: 0x10 bytes from nt+0xC456E0 would cover the variable at
/// +0xC (D1's block is 0x70 bytes from there).
const ERROR_LOG_OPENED_BLOCK_RVA: u64 = 0xC456E0;
const MM_OFFSET: usize = 0x2080;
const UNLOADED_OFFSET: usize = 0x20D0;
const TRIAGE_HEADER: usize = 0x2000;

fn arch_facts(arch: TriageArch) -> &'static ArchFacts {
    match arch {
        TriageArch::X64 => &X64_FACTS,
        TriageArch::Arm64 => &ARM64_FACTS,
    }
}

/// The kernel's symbols for `spec`: [`KERNEL_SYMBOLS`] with the four window globals placed per
/// `spec.globals` and `spec.arch` (Rising on x64 leaves them at D1's RVAs). Bases: x64
/// 0xC31450 (etw) / 0xC31440 (errlog) (EndBelowBase: 0xC31458 / 0xC31448, so the same four
/// addresses in the mirrored order); ARM64 0xC36AD0 (measured) / 0xC36AC0 (choice: the real
/// dump has no error-log window). Panics (a refused spec) when a spaced End would overlap
/// another symbol's 8 bytes.
pub(crate) fn spec_symbols(spec: &TriageSpec) -> Vec<(&'static str, u64)> {
    globals_symbols(spec.arch, spec.globals).unwrap_or_else(|| {
        panic!(
            "{:?}: an End global would overlap another symbol",
            spec.globals
        )
    })
}

/// [`spec_symbols`] for `arch` and `order`; None when two globals or a global and another
/// symbol would overlap.
pub(crate) fn globals_symbols(
    arch: TriageArch,
    order: GlobalsOrder,
) -> Option<Vec<(&'static str, u64)>> {
    let (etw_base, errlog_base) = match (arch, order) {
        (TriageArch::X64, GlobalsOrder::EndBelowBase) => (0xC3_1458, 0xC3_1448),
        (TriageArch::X64, _) => (0xC3_1450, 0xC3_1440),
        (TriageArch::Arm64, _) => (ARM64_ETW_BASE_RVA, ARM64_ETW_BASE_RVA - 0x10),
    };
    let mut syms: Vec<(&'static str, u64)> = KERNEL_SYMBOLS
        .iter()
        .filter(|(n, _)| !n.starts_with("KiCurrent"))
        .copied()
        .collect();
    syms.push(("KiCurrentEtwBufferBase", etw_base));
    syms.push(("KiCurrentErrLogBufferBase", errlog_base));
    for (which, end_name, base) in [
        ("etw", "KiCurrentEtwBufferOffset", etw_base),
        ("errlog", "KiCurrentErrLogBufferOffset", errlog_base),
    ] {
        let end = base.wrapping_add_signed(order.delta(which));
        if syms.iter().any(|(_, r)| r.abs_diff(end) < 8) {
            return None;
        }
        syms.push((end_name, end));
    }
    // KERNEL_SYMBOLS' order: the ISF's `symbols` object keeps insertion order where the
    // workspace enables serde_json's preserve_order.
    let pos = |n: &str| KERNEL_SYMBOLS.iter().position(|(k, _)| *k == n);
    syms.sort_by_key(|(n, _)| pos(n));
    Some(syms)
}

fn sym_rva(syms: &[(&'static str, u64)], name: &str) -> u64 {
    syms.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| rva(name))
}

fn prcb_va(n: u32) -> u64 {
    if n == 0 {
        CPU0_PRCB
    } else {
        0xFFFF_9B00_0220_0180 + u64::from(n) * 0x10_0000
    }
}

fn lower_guid(s: &str) -> String {
    guid_to_string(&guid_from_str(s)).to_lowercase()
}

fn base_name(full: &str) -> String {
    full.rsplit('\\').next().unwrap_or(full).to_string()
}

/// A data block before placement.
struct Block {
    va: u64,
    data: Vec<u8>,
    role: &'static str,
}

/// A descriptor as written.
#[derive(Clone, Copy)]
struct Desc {
    va: u64,
    file_offset: u32,
    size: u32,
    role: &'static str,
}

/// A window being saved.
struct Win {
    which: &'static str,
    limit: u32,
    buf: GenBuffer,
    start_off: u32,
    save_base: bool,
    save_end: bool,
    /// Blob (session, buffer) it copies.
    dup: Option<(usize, usize)>,
    block: usize,
    base_block: Option<usize>,
    end_block: Option<usize>,
    base_global_va: u64,
    end_global_va: u64,
}

impl Win {
    fn bytes(&self) -> &[u8] {
        &self.buf.bytes[self.start_off as usize..self.buf.valid as usize]
    }
    fn start_va(&self) -> u64 {
        self.buf.va + u64::from(self.start_off)
    }
    fn end_va(&self) -> u64 {
        self.buf.va + u64::from(self.buf.valid)
    }
}

fn window_start(valid: u32, limit: u32) -> u32 {
    valid - valid.min(limit)
}

/// Whether a window cut from `buf` starts mid-record and resyncs to its true first record.
fn window_ok(buf: &GenBuffer, limit: u32) -> bool {
    let start = window_start(buf.valid, limit);
    if start == 0 {
        return true;
    }
    let first = buf
        .records
        .iter()
        .find(|r| r.offset >= start)
        .map(|r| r.offset);
    let Some(first) = first else {
        return false;
    };
    first != start && resync(&buf.bytes, start as usize, buf.valid as usize) == Some(first as usize)
}

fn header_expect(h: &BufferHeader) -> ExpectedBufferHeader {
    ExpectedBufferHeader {
        buffer_size: h.buffer_size,
        saved_offset: h.saved_offset,
        current_offset: h.current_offset,
        timestamp: h.timestamp,
        sequence_number: h.sequence_number,
        processor_index: h.processor_index,
        logger_id: h.logger_id,
        state: h.state,
        offset: h.offset,
        buffer_flag: h.buffer_flag,
        buffer_type: h.buffer_type,
    }
}

fn clock_name(ct: u32) -> &'static str {
    match ct {
        1 => "qpc",
        2 => "filetime",
        3 => "cycles",
        _ => "raw",
    }
}

/// Parameters of blob buffer `b` of session `s` holding `records` events on `processor`:
/// timestamps from 0.1 s after the reference time (FILETIME sessions: [`filetime_first`]) to
/// SystemTime + `filetime_end` (FILETIME) or 0.5 ms before SystemTime (other clocks).
fn blob_buffer_params(
    spec: &TriageSpec,
    s: &BlobSessionSpec,
    b: usize,
    records: usize,
    processor: u16,
    filetime_end: i64,
) -> EventBufferParams {
    let (first, last) = if s.clock_type == 2 {
        (
            filetime_first(spec),
            spec.system_time.wrapping_add_signed(filetime_end),
        )
    } else {
        (
            clock_at(s, spec, s.reference_system_time + 1_000_000),
            clock_at(s, spec, spec.system_time - 5_000),
        )
    };
    let head = s.context_va + 0x60;
    let n = s.buffers.len();
    let va = |b: usize| s.first_buffer_va + b as u64 * u64::from(s.buffer_size);
    EventBufferParams {
        va: va(b),
        buffer_size: s.buffer_size,
        records,
        logger_id: s.logger_id,
        processor,
        sequence_number: b as u64 + 1,
        first_timestamp: first,
        last_timestamp: last,
        kernel_general_first: None,
        last_record_extra: 0,
        messages: None,
        global_flink: if b + 1 < n { va(b + 1) + 0x38 } else { head },
        global_blink: if b > 0 { va(b - 1) + 0x38 } else { head },
        valid_override: None,
    }
}

/// The first FILETIME of event buffers: boot + 0.36 s (D1), but at most 5 s before the
/// header's SystemTime (a long-running system such as the ARM64 dump, 796 s up).
fn filetime_first(spec: &TriageSpec) -> u64 {
    (spec.boot_time + 3_600_000).max(spec.system_time - 50_000_000)
}

/// Session clock value at FILETIME `t`.
fn clock_at(s: &BlobSessionSpec, spec: &TriageSpec, t: u64) -> u64 {
    match s.clock_type {
        2 => t,
        1 => {
            let d = i128::from(t) - i128::from(s.reference_system_time);
            let q =
                i128::from(s.reference_perf_clock) + d * i128::from(spec.perf_freq) / 10_000_000;
            q as u64
        }
        3 => spec.start_cycles - (spec.system_time - t) * u64::from(spec.mhz) / 10,
        _ => t,
    }
}

struct BlobSessionBuild {
    buffers: Vec<GenBuffer>,
}

fn session_buffers(
    spec: &TriageSpec,
    si: usize,
    s: &BlobSessionSpec,
    errlog_target: Option<usize>,
    rng: &mut Rng,
) -> BlobSessionBuild {
    let head = s.context_va + 0x60;
    let n = s.buffers.len();
    let va = |b: usize| s.first_buffer_va + b as u64 * u64::from(s.buffer_size);
    let flink = |b: usize| if b + 1 < n { va(b + 1) + 0x38 } else { head };
    let blink = |b: usize| if b > 0 { va(b - 1) + 0x38 } else { head };
    let mut out = Vec::with_capacity(n);
    for (b, bs) in s.buffers.iter().enumerate() {
        match bs {
            BlobBufferSpec::Empty => {
                let slist = match s.buffers.get(b + 1) {
                    Some(BlobBufferSpec::Empty) => va(b + 1) + 0x20,
                    _ => 0,
                };
                out.push(empty_buffer(
                    BufferHeader {
                        buffer_size: s.buffer_size,
                        saved_offset: 0,
                        current_offset: WMI_BUFFER_HEADER_SIZE,
                        reference_count: 0,
                        timestamp: 0,
                        sequence_number: b as u64 + 1,
                        next: slist,
                        processor_index: 0,
                        logger_id: s.logger_id,
                        state: 0,
                        offset: WMI_BUFFER_HEADER_SIZE,
                        buffer_flag: 0x100,
                        buffer_type: 0,
                        global_flink: flink(b),
                        global_blink: blink(b),
                    },
                    va(b),
                ));
            }
            BlobBufferSpec::Events { records, processor } => {
                // FILETIME sessions: boot + 0.36 s .. 0.19 ms after the header's SystemTime
                // (D1); other clocks: 0.1 s after the reference time .. 0.5 ms before SystemTime.
                let base = EventBufferParams {
                    kernel_general_first: (s.clock_type == 2 && b == 0).then_some(KernelGeneral {
                        build: spec.build,
                        qfe: spec.qfe,
                        boot_time: spec.boot_time,
                    }),
                    ..blob_buffer_params(spec, s, b, *records, *processor, 1_892)
                };
                let is_errlog = errlog_target == Some(b);
                let params = |extra: u16| EventBufferParams {
                    last_record_extra: extra,
                    ..base.clone()
                };
                let g = unambiguous_event_buffer(params, rng, is_errlog).unwrap_or_else(|| {
                    panic!("session {si} buffer {b}: no unambiguous error-log window")
                });
                if is_errlog {
                    assert!(
                        g.valid >= ERRLOG_WINDOW_LIMIT + WMI_BUFFER_HEADER_SIZE,
                        "the error-log buffer of a blob session needs valid >= 0x1048"
                    );
                }
                out.push(g);
            }
            BlobBufferSpec::Messages {
                records,
                processor,
                flags,
                event_every,
            } => {
                assert!(
                    !flags.is_empty(),
                    "session {si} buffer {b}: no message flags"
                );
                assert!(
                    errlog_target != Some(b),
                    "the error-log source holds events"
                );
                let p = EventBufferParams {
                    messages: Some((flags.clone(), *event_every)),
                    ..blob_buffer_params(spec, s, b, *records, *processor, -5_000)
                };
                out.push(event_buffer(&p, rng));
            }
        }
    }
    BlobSessionBuild { buffers: out }
}

pub(crate) fn build(spec: &TriageSpec) -> ForgedTriage {
    assert!(spec.crash_cpu < spec.cpus, "crash_cpu out of range");
    assert!(spec.cpus >= 1);
    let mut rng = Rng::new(spec.seed);
    let kb = spec.kernel_base;
    let af = arch_facts(spec.arch);
    let syms = spec_symbols(spec);
    let drivers = expected_drivers(kb);
    let module_bases: Vec<(String, u64)> = drivers
        .iter()
        .map(|d| (d.base_name.clone(), d.base))
        .collect();
    let cpus = expected_cpus(spec, &mut rng);
    let crash = cpus[spec.crash_cpu as usize].clone();
    let sessions = blob_sessions(spec, &mut rng);
    let mut wins: Vec<Win> = Vec::new();
    if let Some(cb) = &spec.current_buffer {
        wins.push(current_buffer_window(spec, cb, &module_bases, &mut rng));
    }
    if let Some(e) = &spec.errlog {
        wins.push(errlog_window(spec, e, &sessions, &mut rng));
    }
    let blocks = data_blocks(spec, &syms, &cpus, &mut wins, &mut rng);
    let table_count = blocks.len() + extra_descriptor_count(spec);
    let fx = fixed_layout(&drivers, table_count, af);

    let mut file: Vec<u8> = vec![0u8; fx.data_start];
    let h = dump_header(spec);
    file[..h.len()].copy_from_slice(&h);
    write_fixed_parts(&mut file, spec, &fx, &crash, &drivers, &mut rng);
    let mut descs = write_blocks(&mut file, &blocks);
    let data_end = file.len();
    let valid_offset = align_up(data_end as u64, 8) as usize + 0x80;
    file.resize(valid_offset, 0);
    file.extend_from_slice(b"TRGD");
    let size_of_dump = file.len();

    let sec = write_secondary(&mut file, spec, &sessions, &mut rng);
    let truncate_at = errlog_truncation(spec, &wins, &descs);
    let final_len = truncate_at.unwrap_or(file.len());
    add_descriptor_faults(spec, &wins, &mut descs, final_len);
    assert_eq!(descs.len(), table_count);
    for (i, d) in descs.iter().enumerate() {
        let e = fx.data_blocks_offset + 16 * i;
        put_u64(&mut file, e, d.va);
        put_u32(&mut file, e + 8, d.file_offset);
        put_u32(&mut file, e + 12, d.size);
    }
    let th = TriageHeaderValues {
        size_of_dump,
        valid_offset,
        driver_count: drivers.len(),
        table_count,
    };
    write_triage_header(&mut file, &fx, &th, af);
    if let Some(n) = truncate_at {
        file.truncate(n);
    }
    assert_eq!(file.len(), final_len);

    let cx = ExpectCx {
        spec,
        file: &file,
        file_len: file.len() as u64,
        module_bases: &module_bases,
        sessions: &sessions,
        crash: &crash,
    };
    let data_blocks = expected_blocks(&descs, cx.file_len);
    let blob = expected_etw_blob(&cx, &sec);
    let win = expected_windows(&cx, &wins, &data_blocks, &blob);
    let (records, duplicates, record_counts) =
        number_records(win.current, win.errlog, blob.records, &win.duplicates_local);
    let mut windows = win.windows;
    let n_current = record_counts.get("current_buffer").copied().unwrap_or(0);
    for w in windows.iter_mut().filter(|w| w.which == "errlog") {
        for i in &mut w.record_indexes {
            *i += n_current;
        }
    }
    let expected = ExpectedTriage {
        scenario: spec.name.clone(),
        arch: spec.arch,
        globals_order: spec.globals,
        arm64_context: (spec.arch == TriageArch::Arm64).then(|| expected_arm64_context(kb)),
        file_len: cx.file_len,
        build: spec.build,
        machine_image_type: af.machine,
        number_processors: spec.cpus,
        bugcheck_code: spec.bugcheck_code,
        bugcheck_params: spec.bugcheck_params,
        system_time: spec.system_time,
        system_up_time: spec.system_up_time,
        directory_table_base: af.dtb,
        kern_base: kb,
        kdbg_va: kb + rva("KdDebuggerDataBlock"),
        ps_loaded_module_list: kb + rva("PsLoadedModuleList"),
        ps_active_process_head: kb + rva("PsActiveProcessHead"),
        pdb_guid: spec.pdb_guid.to_uppercase(),
        pdb_age: spec.pdb_age,
        triage: expected_triage_header(&fx, &th),
        overlaps: overlaps(&descs),
        data_blocks,
        drivers,
        crash_cpu: crash.clone(),
        cpus,
        symbols: syms
            .iter()
            .map(|(n, r)| ((*n).to_string(), kb + r))
            .collect(),
        error_log_session_opened: spec.errlog.is_some(),
        windows,
        orphan_window_blocks: win.orphans,
        secondary: expected_secondary(&sec, cx.file_len),
        etw_blob: blob.etw_blob,
        records,
        duplicates,
        record_counts,
    };
    ForgedTriage {
        bytes: file,
        isf_json: isf_json(&spec.pdb_guid, spec.pdb_age, &syms, af),
        expected,
    }
}

/// The driver list (D1's modules; ntoskrnl at the spec's kernel base).
fn expected_drivers(kb: u64) -> Vec<ExpectedDriver> {
    DRIVERS
        .iter()
        .enumerate()
        .map(|(i, d)| ExpectedDriver {
            index: i,
            full_name: d.full_name.to_string(),
            base_name: base_name(d.full_name),
            base: if i == 0 { kb } else { d.base },
            size: d.size,
            checksum: d.checksum,
            timestamp: d.timestamp,
        })
        .collect()
}

/// The idle thread of CPU `n`.
fn idle_thread(kb: u64, n: u32, prcb: u64) -> u64 {
    if n == 0 {
        kb + IDLE_THREAD0_RVA
    } else {
        prcb + 0xB2C0
    }
}

/// Every CPU's KPRCB values.
fn expected_cpus(spec: &TriageSpec, rng: &mut Rng) -> Vec<ExpectedCpu> {
    let mhz = u64::from(spec.mhz);
    (0..spec.cpus)
        .map(|n| ExpectedCpu {
            number: n,
            mhz: spec.mhz,
            start_cycles: if n == spec.crash_cpu {
                spec.start_cycles
            } else {
                // Frozen 47-64 µs after the crashing CPU (D1).
                spec.start_cycles + mhz * 47 + rng.range(0, mhz * 17)
            },
            current_thread: if n == spec.crash_cpu {
                CRASH_THREAD
            } else {
                idle_thread(spec.kernel_base, n, prcb_va(n))
            },
            prcb_va: prcb_va(n),
        })
        .collect()
}

/// A KPRCB (the 19041 ISF's offsets) with `c`'s values.
fn kprcb_bytes(kb: u64, c: &ExpectedCpu, arch: TriageArch) -> Vec<u8> {
    let mut k = vec![0u8; arch_facts(arch).kprcb_size];
    if arch == TriageArch::X64 {
        put_u32(&mut k, KPRCB_MXCSR, 0x1F80);
    }
    put_u64(&mut k, KPRCB_CURRENT_THREAD, c.current_thread);
    put_u64(
        &mut k,
        KPRCB_IDLE_THREAD,
        idle_thread(kb, c.number, c.prcb_va),
    );
    put_u32(&mut k, KPRCB_NUMBER, c.number);
    put_u32(&mut k, KPRCB_MHZ, c.mhz);
    put_u64(&mut k, KPRCB_START_CYCLES, c.start_cycles);
    put_u64(
        &mut k,
        KPRCB_ETW_SUPPORT,
        ETW_SUPPORT + u64::from(c.number) * 0x1000,
    );
    k
}

/// The buffers of every session of the ETW blob.
fn blob_sessions(spec: &TriageSpec, rng: &mut Rng) -> Vec<BlobSessionBuild> {
    let errlog_blob = match spec.errlog.as_ref().map(|e| &e.source) {
        Some(ErrlogSource::BlobBuffer { session, buffer }) => Some((*session, *buffer)),
        _ => None,
    };
    match &spec.etw_blob {
        Some(b) => b
            .sessions
            .iter()
            .enumerate()
            .map(|(si, s)| {
                let target = errlog_blob.filter(|(es, _)| *es == si).map(|(_, eb)| eb);
                session_buffers(spec, si, s, target, rng)
            })
            .collect(),
        None => Vec::new(),
    }
}

/// A window being saved from `buf` (no blocks yet).
fn new_window(
    which: &'static str,
    limit: u32,
    buf: GenBuffer,
    saves: (bool, bool),
    dup: Option<(usize, usize)>,
) -> Win {
    Win {
        which,
        limit,
        start_off: window_start(buf.valid, limit),
        buf,
        save_base: saves.0,
        save_end: saves.1,
        dup,
        block: 0,
        base_block: None,
        end_block: None,
        base_global_va: 0,
        end_global_va: 0,
    }
}

/// Logger 2's current buffer and its window (KiCurrentEtwBuffer*): the first record count
/// from `cb.records` up whose window resyncs unambiguously.
fn current_buffer_window(
    spec: &TriageSpec,
    cb: &CurrentBufferSpec,
    module_bases: &[(String, u64)],
    rng: &mut Rng,
) -> Win {
    let base_rng = rng.clone();
    let mut chosen = None;
    for extra in 0..32 {
        let mut r = base_rng.clone();
        let g = perf_buffer(
            &PerfBufferParams {
                va: cb.va,
                buffer_size: cb.buffer_size,
                records: cb.records + extra,
                logger_id: 2,
                processor: spec.crash_cpu as u16,
                sequence_number: cb.sequence_number,
                last_timestamp: spec.start_cycles - cb.last_record_before_start_cycles,
                mhz: spec.mhz,
                routines: RoutineMap {
                    kernel_base: spec.kernel_base,
                    modules: module_bases,
                },
                valid_override: cb.valid_override,
                mix: cb.mix,
            },
            &mut r,
        );
        if window_ok(&g, ETW_WINDOW_LIMIT) {
            *rng = r;
            chosen = Some(g);
            break;
        }
    }
    let g = chosen.expect("no unambiguous logger-2 window");
    new_window(
        "etw",
        ETW_WINDOW_LIMIT,
        g,
        (cb.save_base, cb.save_end),
        None,
    )
}

/// The error-log buffer and its window (KiCurrentErrLogBuffer*): a blob session's buffer, or a
/// standalone one whose window resyncs unambiguously.
fn errlog_window(
    spec: &TriageSpec,
    e: &ErrlogSpec,
    sessions: &[BlobSessionBuild],
    rng: &mut Rng,
) -> Win {
    let (g, dup) = match &e.source {
        ErrlogSource::BlobBuffer { session, buffer } => {
            let g = sessions
                .get(*session)
                .and_then(|s| s.buffers.get(*buffer))
                .expect("errlog source names a blob buffer")
                .clone();
            assert!(!g.records.is_empty(), "errlog source buffer has no records");
            (g, Some((*session, *buffer)))
        }
        ErrlogSource::Standalone {
            va,
            logger_id,
            buffer_size,
            records,
            valid_override,
        } => {
            let params = |extra: u16| EventBufferParams {
                va: *va,
                buffer_size: *buffer_size,
                records: *records,
                logger_id: *logger_id,
                processor: 0,
                sequence_number: 1,
                first_timestamp: filetime_first(spec),
                last_timestamp: spec.system_time + 1_892,
                kernel_general_first: Some(KernelGeneral {
                    build: spec.build,
                    qfe: spec.qfe,
                    boot_time: spec.boot_time,
                }),
                last_record_extra: extra,
                messages: None,
                global_flink: *va + u64::from(*buffer_size) + 0x38,
                global_blink: 0xFFFF_C08B_DE9D_5AA0,
                valid_override: *valid_override,
            };
            let g = unambiguous_event_buffer(params, rng, true);
            (g.expect("no unambiguous error-log window"), None)
        }
    };
    new_window(
        "errlog",
        ERRLOG_WINDOW_LIMIT,
        g,
        (e.save_base, e.save_end),
        dup,
    )
}

/// The first event buffer (last record 0, 8, .. 504 bytes longer) whose error-log window
/// resyncs unambiguously (any, if `!need_window`); `rng` advances past the chosen one.
fn unambiguous_event_buffer(
    params: impl Fn(u16) -> EventBufferParams,
    rng: &mut Rng,
    need_window: bool,
) -> Option<GenBuffer> {
    let base_rng = rng.clone();
    for extra in (0..64u16).map(|k| k * 8) {
        let mut r = base_rng.clone();
        let g = event_buffer(&params(extra), &mut r);
        if !need_window || window_ok(&g, ERRLOG_WINDOW_LIMIT) {
            *rng = r;
            return Some(g);
        }
    }
    None
}

/// The data blocks in table order: KPRCBs, KiProcessorBlock, NtBuildLabEx, each window with
/// its base / end variables, ErrorLogSessionOpened, a decoy. Sets the windows' block indexes.
fn data_blocks(
    spec: &TriageSpec,
    syms: &[(&'static str, u64)],
    cpus: &[ExpectedCpu],
    wins: &mut [Win],
    rng: &mut Rng,
) -> Vec<Block> {
    let kb = spec.kernel_base;
    let sym = |name: &str| kb + rva(name);
    let mut blocks: Vec<Block> = Vec::new();
    for c in cpus {
        blocks.push(Block {
            va: c.prcb_va,
            data: kprcb_bytes(kb, c, spec.arch),
            role: "kprcb",
        });
    }
    let mut kpb = vec![0u8; 8 * cpus.len()];
    for (i, c) in cpus.iter().enumerate() {
        put_u64(&mut kpb, 8 * i, c.prcb_va);
    }
    blocks.push(Block {
        va: sym("KiProcessorBlock"),
        data: kpb,
        role: "ki_processor_block",
    });
    let lab = if spec.build >= 22000 {
        format!("{}.1.amd64fre.ni_release.220506-1250", spec.build)
    } else {
        format!("{}.1.amd64fre.vb_release.191206-1406", spec.build)
    };
    let mut lab_bytes = vec![0u8; 0x100];
    put_bytes(&mut lab_bytes, 0, lab.as_bytes());
    blocks.push(Block {
        va: sym("NtBuildLabEx"),
        data: lab_bytes,
        role: "nt_build_lab",
    });
    for w in wins.iter_mut() {
        window_blocks(&mut blocks, w, kb, syms);
    }
    let mut opened = vec![0u8; 0x10];
    put_u32(&mut opened, 0xC, u32::from(spec.errlog.is_some()));
    blocks.push(Block {
        va: kb + ERROR_LOG_OPENED_BLOCK_RVA,
        data: opened,
        role: "error_log_session_opened",
    });
    // Marker-like dwords that are not records (a raw scan's false positives, §4.3).
    let mut decoy = vec![0u8; 0x100];
    rng.fill(&mut decoy);
    for (k, m) in [0xC011_0002u32, 0xC013_0000, 0xC010_0002, 0xC004_0000]
        .iter()
        .enumerate()
    {
        put_u32(&mut decoy, 0x10 + 0x30 * k, *m);
        put_u16(&mut decoy, 0x14 + 0x30 * k, 0x7FF0);
    }
    blocks.push(Block {
        va: 0xFFFF_C08B_E3D4_AE40,
        data: decoy,
        role: "decoy",
    });
    blocks
}

/// A window's block and, where saved, its base and end variables.
fn window_blocks(blocks: &mut Vec<Block>, w: &mut Win, kb: u64, syms: &[(&'static str, u64)]) {
    let (wr, br, er, bs, es) = if w.which == "etw" {
        (
            "etw_window",
            "etw_base",
            "etw_end",
            "KiCurrentEtwBufferBase",
            "KiCurrentEtwBufferOffset",
        )
    } else {
        (
            "errlog_window",
            "errlog_base",
            "errlog_end",
            "KiCurrentErrLogBufferBase",
            "KiCurrentErrLogBufferOffset",
        )
    };
    w.base_global_va = kb + sym_rva(syms, bs);
    w.end_global_va = kb + sym_rva(syms, es);
    w.block = blocks.len();
    blocks.push(Block {
        va: w.start_va(),
        data: w.bytes().to_vec(),
        role: wr,
    });
    if w.save_base {
        w.base_block = Some(blocks.len());
        blocks.push(Block {
            va: kb + sym_rva(syms, bs),
            data: w.buf.va.to_le_bytes().to_vec(),
            role: br,
        });
    }
    if w.save_end {
        w.end_block = Some(blocks.len());
        blocks.push(Block {
            va: kb + sym_rva(syms, es),
            data: w.end_va().to_le_bytes().to_vec(),
            role: er,
        });
    }
}

/// Descriptors the faults add beyond the data blocks.
fn extra_descriptor_count(spec: &TriageSpec) -> usize {
    spec.faults
        .iter()
        .map(|f| match f {
            Fault::BlocksPastEof => 2,
            Fault::OverlappingBlocks => 5,
            _ => 0,
        })
        .sum::<usize>()
}

/// File offsets of the fixed triage parts, and the driver names' string pool.
struct FixedLayout {
    prcb_offset: usize,
    process_offset: usize,
    thread_offset: usize,
    call_stack_offset: usize,
    kdbg_offset: usize,
    driver_list_offset: usize,
    string_pool_offset: usize,
    pool: Vec<u8>,
    name_offsets: Vec<usize>,
    data_blocks_offset: usize,
    data_start: usize,
}

fn fixed_layout(drivers: &[ExpectedDriver], table_count: usize, af: &ArchFacts) -> FixedLayout {
    let prcb_offset = UNLOADED_OFFSET + 8 + 0x38;
    let process_offset = prcb_offset + af.kprcb_size;
    let thread_offset = process_offset + af.eprocess_size;
    let call_stack_offset = thread_offset + af.ethread_size;
    let kdbg_offset = call_stack_offset + af.call_stack_size;
    let driver_list_offset = kdbg_offset + KDBG_SIZE;
    let string_pool_offset = driver_list_offset + DRIVER_ENTRY_SIZE * drivers.len();
    let mut pool = Vec::new();
    let mut name_offsets = Vec::new();
    for d in drivers {
        name_offsets.push(string_pool_offset + pool.len());
        let u = utf16le(&d.full_name);
        pool.extend_from_slice(&((u.len() / 2) as u32).to_le_bytes());
        pool.extend_from_slice(&u);
        pool.extend_from_slice(&[0, 0]);
        pool.resize(align_up(pool.len() as u64, 8) as usize, 0);
    }
    let data_blocks_offset = string_pool_offset + pool.len();
    FixedLayout {
        prcb_offset,
        process_offset,
        thread_offset,
        call_stack_offset,
        kdbg_offset,
        driver_list_offset,
        string_pool_offset,
        pool,
        name_offsets,
        data_blocks_offset,
        data_start: data_blocks_offset + 16 * table_count,
    }
}

/// The DUMP_HEADER64 of a triage dump (DumpType 4).
fn dump_header(spec: &TriageSpec) -> Vec<u8> {
    let kb = spec.kernel_base;
    let sym = |name: &str| kb + rva(name);
    let mut cfg = Config::x64();
    cfg.build = spec.build;
    cfg.cpus = spec.cpus;
    cfg.kernel_base = kb;
    cfg.bugcheck_code = spec.bugcheck_code;
    cfg.bugcheck_params = spec.bugcheck_params;
    cfg.system_time = spec.system_time;
    cfg.system_up_time = spec.system_up_time;
    let info = HeaderInfo {
        dtb: arch_facts(spec.arch).dtb,
        pfn_database: sym("MmPfnDatabase"),
        ps_loaded_module_list: sym("PsLoadedModuleList"),
        ps_active_process_head: sym("PsActiveProcessHead"),
        kdbg_va: sym("KdDebuggerDataBlock"),
        runs: Vec::new(),
        dump_type: 4,
        required_dump_space: 0,
        exception_address: kb + EXCEPTION_RVA,
    };
    let mut h = header::build(&cfg, &info);
    // Triage dumps: PhysicalMemoryBlock unused, `PAGE` fill (crash-dump-format.md §2.1).
    for (i, b) in h[0x88..0x348].iter_mut().enumerate() {
        *b = b"PAGE"[(0x88 + i) % 4];
    }
    put_u32(&mut h, 0x1038, 0xCFF); // MiniDumpFields (D1 and the ARM64 dump)
    if spec.arch == TriageArch::Arm64 {
        arm64_header_parts(&mut h, spec);
    }
    h
}

/// The ARM64 dump's differences (measured on `triage_arm64.dmp`): MachineImageType 0xAA64, the
/// ContextRecord area (0x348..0xF00) zero except an ARM64_NT_CONTEXT (0x390 bytes) at 0x348,
/// the exception address = Pc, BootId 0xD at 0x1054.
fn arm64_header_parts(h: &mut [u8], spec: &TriageSpec) {
    let kb = spec.kernel_base;
    put_u32(h, 0x30, 0xAA64);
    let c = 0x348;
    h[c..0xF00].fill(0);
    put_bytes(h, c, &arm64_context(kb));
    put_u64(h, 0xF00 + 0x10, kb + ARM64_PC_RVA);
    put_u32(h, 0x1054, ARM64_BOOT_ID);
}

/// The ARM64_NT_CONTEXT written at 0x348 (see [`ARM64_X`]): V registers drawn from a fixed
/// seed except V2 and V8..V15 (zero, as measured), Lr 0, Fp = Sp = TopOfStack.
pub(crate) fn arm64_context(kb: u64) -> Vec<u8> {
    let mut c = vec![0u8; ARM64_CONTEXT_SIZE];
    put_u32(&mut c, 0, ARM64_CONTEXT_FLAGS);
    put_u32(&mut c, 4, ARM64_CPSR);
    for (i, (v, rel)) in ARM64_X.iter().enumerate() {
        put_u64(&mut c, 8 + 8 * i, if *rel { kb + v } else { *v });
    }
    let sp = ARM64_FACTS.top_of_stack;
    put_u64(&mut c, 0xF0, sp); // Fp
    put_u64(&mut c, 0xF8, 0); // Lr
    put_u64(&mut c, 0x100, sp); // Sp
    put_u64(&mut c, 0x108, kb + ARM64_PC_RVA); // Pc
    let mut rng = Rng::new(0xAA64_C0DE);
    for v in 0..32 {
        // Measured: V2 and V8..V15 are zero, V26 too.
        if v != 2 && v != 26 && !(8..16).contains(&v) {
            rng.fill(&mut c[0x110 + 16 * v..0x120 + 16 * v]);
        }
    }
    put_u32(&mut c, 0x310, 0); // Fpcr
    put_u32(&mut c, 0x314, ARM64_FPSR);
    c
}

/// Mm info, unloaded drivers, the crashing CPU's KPRCB copy, the call stack, KDBG, the driver
/// list and its string pool.
fn write_fixed_parts(
    file: &mut [u8],
    spec: &TriageSpec,
    fx: &FixedLayout,
    crash: &ExpectedCpu,
    drivers: &[ExpectedDriver],
    rng: &mut Rng,
) {
    let kb = spec.kernel_base;
    // Mm info and unloaded drivers (D1: {1, 0x50, ...}; one 0x38-byte entry).
    put_u32(file, MM_OFFSET, 1);
    put_u32(file, MM_OFFSET + 4, 0x50);
    put_u32(file, UNLOADED_OFFSET, 1);
    let ue = UNLOADED_OFFSET + 8;
    let dam = utf16le("dam.sys");
    put_u16(file, ue, dam.len() as u16);
    put_u16(file, ue + 2, dam.len() as u16);
    put_bytes(file, ue + 0x10, &dam);
    put_u64(file, ue + 0x28, 0xFFFF_F804_87DE_0000);
    put_u64(file, ue + 0x30, 0xFFFF_F804_87DF_C000);
    // KPRCB copy of the crashing CPU.
    put_bytes(file, fx.prcb_offset, &kprcb_bytes(kb, crash, spec.arch));
    // Call stack.
    let stack_size = arch_facts(spec.arch).call_stack_size;
    let mut stack = vec![0u8; stack_size];
    for i in (0..stack_size).step_by(16) {
        put_u64(&mut stack, i, kb + 0x3F_0000 + rng.range(0, 0x1_0000));
    }
    put_bytes(file, fx.call_stack_offset, &stack);
    // KDBG.
    for (off, v) in KDBG_SLOTS {
        let val = match v {
            KdbgVal::Sym(n) => kb + rva(n),
            KdbgVal::Rva(r) => kb + r,
            KdbgVal::KernBase => kb,
            KdbgVal::Const(c) => *c,
        };
        put_u64(file, fx.kdbg_offset + off, val);
    }
    // Driver list + string pool.
    for (i, d) in drivers.iter().enumerate() {
        let e = fx.driver_list_offset + DRIVER_ENTRY_SIZE * i;
        put_u32(file, e, fx.name_offsets[i] as u32);
        put_u64(file, e + 0x38, d.base);
        put_u32(file, e + 0x48, d.size);
        put_u32(file, e + 0x80, d.checksum);
        put_u32(file, e + 0x88, d.timestamp);
    }
    put_bytes(file, fx.string_pool_offset, &fx.pool);
}

/// The blocks' data, back to back at the end of `file`; their descriptors.
fn write_blocks(file: &mut Vec<u8>, blocks: &[Block]) -> Vec<Desc> {
    let mut descs = Vec::with_capacity(blocks.len());
    for b in blocks {
        descs.push(Desc {
            va: b.va,
            file_offset: file.len() as u32,
            size: b.data.len() as u32,
            role: b.role,
        });
        file.extend_from_slice(&b.data);
    }
    descs
}

/// The secondary-data blobs as written: (entry, true data size), and where the ETW blob's
/// parts are.
struct Secondary {
    offset: usize,
    build_number: u32,
    entries: Vec<(ExpectedBlobEntry, u32)>,
    etw: Option<EtwLayout>,
}

impl Secondary {
    /// Append a blob: header {0x20, GUID, DataSize = `claimed`, PrePad, PostPad}, padding, data.
    fn push(
        &mut self,
        file: &mut Vec<u8>,
        guid: &str,
        data: &[u8],
        pads: (u32, u32),
        claimed: u32,
    ) {
        let (pre, post) = pads;
        let hdr = file.len();
        file.extend_from_slice(&0x20u32.to_le_bytes());
        file.extend_from_slice(&guid_from_str(guid));
        file.extend_from_slice(&claimed.to_le_bytes());
        file.extend_from_slice(&pre.to_le_bytes());
        file.extend_from_slice(&post.to_le_bytes());
        file.extend(std::iter::repeat_n(0u8, pre as usize));
        let data_offset = file.len();
        file.extend_from_slice(data);
        file.extend(std::iter::repeat_n(0u8, post as usize));
        self.entries.push((
            ExpectedBlobEntry {
                index: self.entries.len(),
                header_offset: hdr as u64,
                header_size: 0x20,
                guid: lower_guid(guid),
                data_offset: data_offset as u64,
                data_size: claimed,
                pre_pad: pre,
                post_pad: post,
                data_in_file: 0,
            },
            data.len() as u32,
        ));
    }
}

/// The secondary data ("DumpBlob" header, other blobs, the ETW blob last).
fn write_secondary(
    file: &mut Vec<u8>,
    spec: &TriageSpec,
    sessions: &[BlobSessionBuild],
    rng: &mut Rng,
) -> Secondary {
    let mut sec = Secondary {
        offset: file.len(),
        build_number: 0xF000_0000 | spec.build,
        entries: Vec::new(),
        etw: None,
    };
    file.extend_from_slice(b"DumpBlob");
    file.extend_from_slice(&0x10u32.to_le_bytes());
    file.extend_from_slice(&sec.build_number.to_le_bytes());
    if spec.other_blobs {
        other_blobs(&mut sec, file, rng);
    }
    if let Some(eb) = &spec.etw_blob {
        etw_blob(&mut sec, file, spec, eb, sessions);
    }
    sec
}

/// Blobs of other components, as in D1.
fn other_blobs(sec: &mut Secondary, file: &mut Vec<u8>, rng: &mut Rng) {
    let mut d0 = vec![0u8; 0x100];
    rng.fill(&mut d0);
    sec.push(
        file,
        "54c84888-01d1-4c1e-bed6-282c98241303",
        &d0,
        (0, 0),
        0x100,
    );
    let mut d1 = vec![0u8; 0x44];
    put_bytes(&mut d1, 0, b"AmdPPM");
    put_u32(&mut d1, 0x40, 0x0001_0001);
    sec.push(
        file,
        "67fc721a-2852-4f62-a3b1-2afc53953777",
        &d1,
        (0, 4),
        0x44,
    );
    sec.push(file, "00000000-0000-0000-0000-000000000000", &[], (0, 0), 0);
    // A PCI-config-like blob with PERFINFO32-looking dwords (D1 has 5 such false hits).
    let mut d3 = vec![0u8; 0x1FD];
    put_bytes(&mut d3, 0, b"PCfg");
    put_u32(&mut d3, 4, 0x7C);
    for k in 0..5 {
        put_u32(&mut d3, 0x40 + 0x50 * k, 0xC010_0002);
        put_u16(&mut d3, 0x44 + 0x50 * k, 0x18 + 8 * k as u16);
    }
    sec.push(
        file,
        "9276c055-eb87-425c-b8b5-04e4d247f6cd",
        &d3,
        (8, 3),
        0x1FD,
    );
}

/// The ETW blob: its header, then per session its part and its buffers' valid bytes.
fn etw_blob(
    sec: &mut Secondary,
    file: &mut Vec<u8>,
    spec: &TriageSpec,
    eb: &EtwBlobSpec,
    sessions: &[BlobSessionBuild],
) {
    let mut data = Vec::new();
    data.extend_from_slice(&spec.max_increment.to_le_bytes());
    data.extend_from_slice(&sec.build_number.to_le_bytes());
    data.extend_from_slice(&spec.mhz.to_le_bytes());
    data.extend_from_slice(&0u32.to_le_bytes());
    data.extend_from_slice(&spec.boot_time.to_le_bytes());
    data.extend_from_slice(&spec.perf_freq.to_le_bytes());
    let mut sess_layout = Vec::new();
    for (si, s) in eb.sessions.iter().enumerate() {
        sess_layout.push(session_part(&mut data, spec, eb, si, s, &sessions[si]));
    }
    let true_size = data.len() as u32;
    let lie = spec.faults.iter().find_map(|f| match f {
        Fault::BlobDataSizeLies(x) => Some(*x),
        _ => None,
    });
    let (claimed, post) = match lie {
        Some(x) => (true_size + x, 0),
        None => (
            true_size,
            align_up(u64::from(true_size), 8) as u32 - true_size,
        ),
    };
    sec.push(file, ETW_BLOB_GUID, &data, (0, post), claimed);
    if lie.is_some() {
        // Nothing after the data: the file ends where the true content ends.
        let (e, _) = sec.entries.last().expect("etw blob");
        file.truncate(e.data_offset as usize + true_size as usize);
    }
    sec.etw = Some(EtwLayout {
        blob_index: sec.entries.len() - 1,
        sessions: sess_layout,
    });
}

/// One session's part of the ETW blob; returns (its offset in the blob, claimed name Length,
/// true Length, the blob offsets of its buffers).
fn session_part(
    data: &mut Vec<u8>,
    spec: &TriageSpec,
    eb: &EtwBlobSpec,
    si: usize,
    s: &BlobSessionSpec,
    built: &BlobSessionBuild,
) -> (usize, u32, u32, Vec<usize>) {
    let name = utf16le(&s.name);
    let true_len = name.len() as u32;
    let claimed_len = spec
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::SessionNameLengthOverrun { session, length } if *session == si => Some(*length),
            _ => None,
        })
        .unwrap_or(true_len);
    let rel = data.len();
    data.extend_from_slice(&SESSION_SIGNATURE.to_le_bytes());
    data.extend_from_slice(&u32::from(s.logger_id).to_le_bytes());
    data.extend_from_slice(&s.logger_mode.to_le_bytes());
    data.extend_from_slice(&s.clock_type.to_le_bytes());
    data.extend_from_slice(&s.buffer_size.to_le_bytes());
    data.extend_from_slice(&claimed_len.to_le_bytes());
    data.extend_from_slice(&s.start_time.to_le_bytes());
    data.extend_from_slice(&s.reference_system_time.to_le_bytes());
    data.extend_from_slice(&s.reference_perf_clock.to_le_bytes());
    data.extend_from_slice(&name);
    if eb.name_convention == NameConvention::Doubled {
        data.extend(std::iter::repeat_n(0u8, name.len()));
        let tail = &s.name_pad_tail;
        assert!(
            tail.len() <= name.len(),
            "name_pad_tail longer than the name"
        );
        let at = data.len() - tail.len();
        data[at..].copy_from_slice(tail);
    }
    let mut bufs = Vec::new();
    for g in &built.buffers {
        bufs.push(data.len());
        // The callback writes the valid length into Offset (+0x30); the forge's
        // buffers already hold it there.
        data.extend_from_slice(&g.bytes[..g.valid as usize]);
    }
    (rel, claimed_len, true_len, bufs)
}

fn find_window<'a>(wins: &'a [Win], which: &str) -> &'a Win {
    wins.iter()
        .find(|w| w.which == which)
        .unwrap_or_else(|| panic!("{which} window"))
}

/// Where `Fault::TruncateInErrlogWindow` cuts the file.
fn errlog_truncation(spec: &TriageSpec, wins: &[Win], descs: &[Desc]) -> Option<usize> {
    let mut truncate_at = None;
    for f in &spec.faults {
        if let Fault::TruncateInErrlogWindow(n) = f {
            let d = descs[find_window(wins, "errlog").block];
            assert!(*n < d.size, "cut must fall inside the error-log window");
            truncate_at = Some(d.file_offset as usize + *n as usize);
        }
    }
    truncate_at
}

/// Descriptors past the end of the file, a moved errlog end, overlapping descriptors.
fn add_descriptor_faults(spec: &TriageSpec, wins: &[Win], descs: &mut Vec<Desc>, final_len: usize) {
    for f in &spec.faults {
        match f {
            Fault::BlocksPastEof => {
                descs.push(Desc {
                    va: 0xFFFF_A000_0000_0000,
                    file_offset: (final_len + 0x1000) as u32,
                    size: 0x100,
                    role: "bad_past_eof",
                });
                descs.push(Desc {
                    va: 0xFFFF_A000_0000_1000,
                    file_offset: (final_len - 0x10) as u32,
                    size: 0x100,
                    role: "bad_past_eof",
                });
            }
            Fault::ErrlogEndPastEof => {
                let i = find_window(wins, "errlog")
                    .end_block
                    .expect("errlog end block");
                descs[i].file_offset = (final_len + 0x2000) as u32;
            }
            Fault::OverlappingBlocks => overlapping_descriptors(wins, descs),
            _ => {}
        }
    }
}

/// Five descriptors overlapping the ETW window, the errlog window, the header, the decoy and
/// NtBuildLabEx.
fn overlapping_descriptors(wins: &[Win], descs: &mut Vec<Desc>) {
    let ew = descs[find_window(wins, "etw").block];
    assert!(ew.size >= 0x180);
    let lw = descs[find_window(wins, "errlog").block];
    let decoy = *descs.iter().find(|d| d.role == "decoy").expect("decoy");
    let lab = *descs
        .iter()
        .find(|d| d.role == "nt_build_lab")
        .expect("lab");
    for (va, file_offset, size) in [
        (ew.va + 0x100, ew.file_offset + 0x100, 0x80),
        (0xFFFF_A000_1000_0000, lw.file_offset, 0x200),
        (0xFFFF_A000_2000_0000, 0, 0x100),
        (0xFFFF_8504_2989_0000, decoy.file_offset, 0x40),
        (0xFFFF_8504_2989_0000, lab.file_offset, 0x40),
    ] {
        descs.push(Desc {
            va,
            file_offset,
            size,
            role: "bad_overlap",
        });
    }
}

/// Triage-header values known only once the file is laid out.
struct TriageHeaderValues {
    size_of_dump: usize,
    valid_offset: usize,
    driver_count: usize,
    table_count: usize,
}

/// The TRIAGE_DUMP header at 0x2000 and RequiredDumpSpace.
fn write_triage_header(file: &mut [u8], fx: &FixedLayout, th: &TriageHeaderValues, af: &ArchFacts) {
    let t = TRIAGE_HEADER;
    let dwords = [
        (0x00, 0),
        (0x04, th.size_of_dump as u32),
        (0x08, th.valid_offset as u32),
        (0x0C, 0x348),
        (0x10, 0xF00),
        (0x14, MM_OFFSET as u32),
        (0x18, UNLOADED_OFFSET as u32),
        (0x1C, fx.prcb_offset as u32),
        (0x20, fx.process_offset as u32),
        (0x24, fx.thread_offset as u32),
        (0x28, fx.call_stack_offset as u32),
        (0x2C, af.call_stack_size as u32),
        (0x30, fx.driver_list_offset as u32),
        (0x34, th.driver_count as u32),
        (0x38, fx.string_pool_offset as u32),
        (0x3C, fx.pool.len() as u32),
        (0x40, 0),
        (0x44, 0xFFFF_FFFF),
    ];
    for (off, v) in dwords {
        put_u32(file, t + off, v);
    }
    put_u64(file, t + 0x48, af.top_of_stack);
    put_u32(file, t + 0x70, fx.kdbg_offset as u32);
    put_u32(file, t + 0x74, KDBG_SIZE as u32);
    put_u32(file, t + 0x78, fx.data_blocks_offset as u32);
    put_u32(file, t + 0x7C, th.table_count as u32);
    // RequiredDumpSpace: the untruncated file rounded up to pages.
    let required = align_up(file.len() as u64, 0x1000);
    put_u64(file, 0xFA0, required);
}

fn expected_triage_header(fx: &FixedLayout, th: &TriageHeaderValues) -> ExpectedTriageHeader {
    ExpectedTriageHeader {
        size_of_dump: th.size_of_dump as u32,
        valid_offset: th.valid_offset as u32,
        prcb_offset: fx.prcb_offset as u32,
        process_offset: fx.process_offset as u32,
        thread_offset: fx.thread_offset as u32,
        driver_list_offset: fx.driver_list_offset as u32,
        driver_count: th.driver_count as u32,
        string_pool_offset: fx.string_pool_offset as u32,
        string_pool_size: fx.pool.len() as u32,
        debugger_data_offset: fx.kdbg_offset as u32,
        debugger_data_size: KDBG_SIZE as u32,
        data_blocks_offset: fx.data_blocks_offset as u32,
        data_blocks_count: th.table_count as u32,
    }
}

/// What the expectations are derived from.
struct ExpectCx<'a> {
    spec: &'a TriageSpec,
    file: &'a [u8],
    file_len: u64,
    module_bases: &'a [(String, u64)],
    sessions: &'a [BlobSessionBuild],
    crash: &'a ExpectedCpu,
}

fn expected_blocks(descs: &[Desc], file_len: u64) -> Vec<ExpectedBlock> {
    descs
        .iter()
        .enumerate()
        .map(|(i, d)| ExpectedBlock {
            index: i,
            va: d.va,
            file_offset: d.file_offset,
            size: d.size,
            in_file: u64::from(d.file_offset) + u64::from(d.size) <= file_len,
            role: d.role.to_string(),
        })
        .collect()
}

/// Pairs of descriptors whose VA or file ranges intersect.
fn overlaps(descs: &[Desc]) -> Vec<ExpectedOverlap> {
    let mut overlaps = Vec::new();
    let inter = |a0: u64, a1: u64, b0: u64, b1: u64| a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
    for i in 0..descs.len() {
        for j in i + 1..descs.len() {
            let (a, b) = (&descs[i], &descs[j]);
            if inter(
                a.va,
                a.va + u64::from(a.size),
                b.va,
                b.va + u64::from(b.size),
            ) {
                overlaps.push(ExpectedOverlap {
                    a: i,
                    b: j,
                    kind: "va".into(),
                });
            }
            let (af, bf) = (u64::from(a.file_offset), u64::from(b.file_offset));
            if inter(af, af + u64::from(a.size), bf, bf + u64::from(b.size)) {
                overlaps.push(ExpectedOverlap {
                    a: i,
                    b: j,
                    kind: "file".into(),
                });
            }
        }
    }
    overlaps
}

fn expected_secondary(sec: &Secondary, file_len: u64) -> Option<ExpectedSecondary> {
    (sec.offset as u64 + 0x10 <= file_len).then(|| ExpectedSecondary {
        file_offset: sec.offset as u64,
        header_size: 0x10,
        build_number: sec.build_number,
        blobs: sec
            .entries
            .iter()
            .filter(|(e, _)| e.header_offset + 0x20 <= file_len)
            .map(|(e, _)| {
                let avail = file_len.saturating_sub(e.data_offset);
                ExpectedBlobEntry {
                    data_in_file: u64::from(e.data_size).min(avail) as u32,
                    ..e.clone()
                }
            })
            .collect(),
    })
}

/// The ETW blob as a reader must parse it, and its records.
#[derive(Default)]
struct BlobExpect {
    etw_blob: Option<ExpectedEtwBlob>,
    records: Vec<ExpectedRecord>,
    /// Record index of blob records by (session, buffer, offset).
    record_index: BTreeMap<(usize, usize, u32), usize>,
    buffer_offsets: BTreeMap<(usize, usize), u64>,
}

fn expected_etw_blob(cx: &ExpectCx, sec: &Secondary) -> BlobExpect {
    let mut out = BlobExpect::default();
    let (Some(eb), Some(lay)) = (&cx.spec.etw_blob, &sec.etw) else {
        return out;
    };
    let (entry, true_size) = &sec.entries[lay.blob_index];
    let data_off = entry.data_offset;
    if data_off + u64::from(*true_size) > cx.file_len {
        return out;
    }
    let mut exp_sessions = Vec::new();
    let mut parse_end = 0x20u64;
    for (si, s) in eb.sessions.iter().enumerate() {
        let (rel, claimed_len, true_len, _) = &lay.sessions[si];
        let part = |len: u32| {
            0x30 + match eb.name_convention {
                NameConvention::Doubled => 2 * u64::from(len),
                NameConvention::Single => u64::from(len),
            }
        };
        let complete = claimed_len == true_len;
        let mut exp_bufs = Vec::new();
        if complete {
            exp_bufs = expected_blob_buffers(cx, &mut out, data_off, lay, si, s);
            parse_end = (*rel
                + part(*true_len) as usize
                + cx.sessions[si]
                    .buffers
                    .iter()
                    .map(|g| g.valid as usize)
                    .sum::<usize>()) as u64;
        } else {
            parse_end = *rel as u64;
        }
        exp_sessions.push(ExpectedBlobSession {
            index: si,
            file_offset: data_off + *rel as u64,
            logger_id: u32::from(s.logger_id),
            logger_mode: s.logger_mode,
            clock_type: s.clock_type,
            buffer_size: s.buffer_size,
            name_length: *claimed_len,
            name: complete.then(|| s.name.clone()),
            name_convention: eb.name_convention,
            start_time: s.start_time,
            reference_system_time: s.reference_system_time,
            reference_perf_clock: s.reference_perf_clock,
            part_length: part(*claimed_len),
            buffers: exp_bufs,
            complete,
        });
        if !complete {
            break;
        }
    }
    out.etw_blob = Some(ExpectedEtwBlob {
        blob_index: lay.blob_index,
        data_offset: data_off,
        data_size: entry.data_size,
        data_in_file: *true_size,
        max_increment: cx.spec.max_increment,
        nt_build_number: sec.build_number,
        cpu_speed_mhz: cx.spec.mhz,
        boot_time: cx.spec.boot_time,
        perf_freq: cx.spec.perf_freq,
        name_convention: eb.name_convention,
        sessions: exp_sessions,
        parse_end,
        complete: parse_end == u64::from(entry.data_size),
    });
    out
}

/// The buffers of complete blob session `si`, their records added to `out`.
fn expected_blob_buffers(
    cx: &ExpectCx,
    out: &mut BlobExpect,
    data_off: u64,
    lay: &EtwLayout,
    si: usize,
    s: &BlobSessionSpec,
) -> Vec<ExpectedBlobBuffer> {
    let bufs = &lay.sessions[si].3;
    let mut exp_bufs = Vec::new();
    for (bi, g) in cx.sessions[si].buffers.iter().enumerate() {
        let fo = data_off + bufs[bi] as u64;
        out.buffer_offsets.insert((si, bi), fo);
        let per_cpu = s.logger_mode & 0x1000_0000 == 0;
        for r in &g.records {
            let idx = out.records.len();
            out.record_index.insert((si, bi, r.offset), idx);
            let mut e = record_expect(r, cx.module_bases, cx.spec.kernel_base, None);
            e.source = "secondary_data".into();
            e.logger_id = Some(s.logger_id);
            e.session_index = Some(si);
            e.buffer_index = Some(bi);
            e.file_offset = fo + u64::from(r.offset);
            e.clock = Some(clock_name(s.clock_type).into());
            e.cpu = per_cpu.then_some(u32::from(g.header.processor_index));
            out.records.push(e);
        }
        exp_bufs.push(ExpectedBlobBuffer {
            index: bi,
            file_offset: fo,
            valid: g.valid,
            header: header_expect(&g.header),
            record_count: g.records.len(),
            va: g.va,
        });
    }
    exp_bufs
}

/// The windows as a reader must find them, and their records.
#[derive(Default)]
struct WindowsExpect {
    windows: Vec<ExpectedWindow>,
    orphans: Vec<ExpectedOrphan>,
    current: Vec<ExpectedRecord>,
    errlog: Vec<ExpectedRecord>,
    /// (errlog record index, blob record index).
    duplicates_local: Vec<(usize, usize)>,
}

fn expected_windows(
    cx: &ExpectCx,
    wins: &[Win],
    data_blocks: &[ExpectedBlock],
    blob: &BlobExpect,
) -> WindowsExpect {
    let readable = |i: Option<usize>| i.map(|i| data_blocks[i].in_file).unwrap_or(false);
    let mut out = WindowsExpect::default();
    for w in wins {
        let base_ok = readable(w.base_block);
        let end_ok = readable(w.end_block);
        let block_ok = data_blocks[w.block].in_file;
        if !(base_ok && end_ok && block_ok) {
            out.orphans.push(ExpectedOrphan {
                which: w.which.into(),
                block_index: w.block,
                base_readable: base_ok,
                end_readable: end_ok,
                base_global_va: w.base_global_va,
                end_global_va: w.end_global_va,
            });
            continue;
        }
        let window = expected_window(cx, w, data_blocks, blob, &mut out);
        out.windows.push(window);
    }
    out
}

/// One readable window; its whole records go to `out`.
fn expected_window(
    cx: &ExpectCx,
    w: &Win,
    data_blocks: &[ExpectedBlock],
    blob: &BlobExpect,
    out: &mut WindowsExpect,
) -> ExpectedWindow {
    let valid = w.buf.valid;
    let starts_at_base = w.start_off == 0;
    let whole: Vec<&GenRecord> = w
        .buf
        .records
        .iter()
        .filter(|r| r.offset >= w.start_off && r.offset + u32::from(r.size) <= valid)
        .collect();
    let wfo = u64::from(data_blocks[w.block].file_offset);
    let header =
        (starts_at_base && valid >= WMI_BUFFER_HEADER_SIZE).then(|| header_expect(&w.buf.header));
    let dup_ref = w.dup.and_then(|(si, bi)| {
        blob.buffer_offsets
            .get(&(si, bi))
            .map(|fo| ExpectedBufferRef {
                session_index: si,
                buffer_index: bi,
                logger_id: w.buf.header.logger_id,
                file_offset: *fo,
            })
    });
    if let Some(d) = &dup_ref {
        // The window is byte-identical to the blob buffer's tail.
        let tail_start = (d.file_offset + u64::from(w.start_off)) as usize;
        assert_eq!(
            &cx.file[tail_start..tail_start + w.bytes().len()],
            &cx.file[wfo as usize..wfo as usize + w.bytes().len()],
            "errlog window differs from the blob buffer tail"
        );
    }
    let first = whole.first().map(|r| u64::from(r.offset));
    let window_size = u64::from(valid - w.start_off);
    // Bytes of a cut record before the first whole one (a header is not a cut record).
    let partial = match first {
        _ if starts_at_base => 0,
        Some(f) => f - u64::from(w.start_off),
        None => window_size,
    };
    let (logger_id, processor_index) = if w.which == "etw" {
        (Some(2u16), header.as_ref().map(|h| h.processor_index))
    } else {
        (dup_ref.as_ref().map(|d| d.logger_id), None)
    };
    let first_index = if w.which == "etw" {
        out.current.len()
    } else {
        out.errlog.len()
    };
    for r in &whole {
        window_record(cx, w, r, wfo, logger_id, dup_ref.as_ref(), blob, out);
    }
    let delta = w.end_global_va.wrapping_sub(w.base_global_va) as i64;
    ExpectedWindow {
        which: w.which.into(),
        limit: w.limit,
        base: w.buf.va,
        end: w.end_va(),
        valid: u64::from(valid),
        start_va: w.start_va(),
        file_offset: wfo,
        size: window_size,
        block_index: w.block,
        base_block_index: w.base_block.expect("readable"),
        end_block_index: w.end_block.expect("readable"),
        base_global_va: w.base_global_va,
        end_global_va: w.end_global_va,
        end_global_delta: delta,
        globals_order: match delta {
            8 => "rising",
            -8 => "end_below_base",
            _ => "spaced",
        }
        .into(),
        cpu: (w.which == "etw").then_some(cx.spec.crash_cpu),
        starts_at_base,
        header,
        logger_id,
        processor_index,
        first_record_offset: first,
        partial_bytes: partial,
        record_count: whole.len(),
        // Local indexes for now; `number_records` makes them global.
        record_indexes: (first_index..first_index + whole.len()).collect(),
        duplicate_of: dup_ref,
    }
}

/// A whole record of window `w` (file offset `wfo`), as a current-buffer or errlog-tail record.
#[allow(clippy::too_many_arguments)]
fn window_record(
    cx: &ExpectCx,
    w: &Win,
    r: &GenRecord,
    wfo: u64,
    logger_id: Option<u16>,
    dup_ref: Option<&ExpectedBufferRef>,
    blob: &BlobExpect,
    out: &mut WindowsExpect,
) {
    let mut e = record_expect(
        r,
        cx.module_bases,
        cx.spec.kernel_base,
        Some(cx.crash.start_cycles),
    );
    e.file_offset = wfo + u64::from(r.offset - w.start_off);
    if w.which == "etw" {
        e.source = "current_buffer".into();
        e.logger_id = Some(2);
        e.cpu = Some(cx.spec.crash_cpu);
        e.clock = Some("cycles".into());
        out.current.push(e);
        return;
    }
    e.source = "errlog_tail".into();
    e.logger_id = logger_id;
    e.cycles_before_crash = None;
    if let Some(d) = dup_ref {
        let s = &cx.spec.etw_blob.as_ref().expect("blob").sessions[d.session_index];
        e.clock = Some(clock_name(s.clock_type).into());
        let bi = blob.record_index[&(d.session_index, d.buffer_index, r.offset)];
        out.duplicates_local.push((out.errlog.len(), bi));
    }
    out.errlog.push(e);
}

/// All records in order (current buffer, errlog tail, secondary data), numbered; the
/// duplicates; the count per source.
fn number_records(
    current: Vec<ExpectedRecord>,
    errlog: Vec<ExpectedRecord>,
    blob: Vec<ExpectedRecord>,
    duplicates_local: &[(usize, usize)],
) -> (
    Vec<ExpectedRecord>,
    Vec<ExpectedDuplicate>,
    BTreeMap<String, usize>,
) {
    let mut records = current;
    let errlog_base = records.len();
    let blob_base = errlog_base + errlog.len();
    records.extend(errlog);
    records.extend(blob);
    let mut duplicates = Vec::new();
    for &(el, bl) in duplicates_local {
        let (a, b) = (errlog_base + el, blob_base + bl);
        records[a].duplicate_of = Some(b);
        duplicates.push(ExpectedDuplicate {
            errlog_record: a,
            blob_record: b,
        });
    }
    for (i, r) in records.iter_mut().enumerate() {
        r.index = i;
    }
    let mut record_counts = BTreeMap::new();
    for s in ["current_buffer", "errlog_tail", "secondary_data"] {
        record_counts.insert(
            s.to_string(),
            records.iter().filter(|r| r.source == s).count(),
        );
    }
    (records, duplicates, record_counts)
}

struct EtwLayout {
    blob_index: usize,
    /// Per session: (blob-relative offset of its header, claimed Length, true Length,
    /// blob-relative offsets of its buffers).
    sessions: Vec<(usize, u32, u32, Vec<usize>)>,
}

/// The source-independent fields of a record's expectation.
fn record_expect(
    r: &GenRecord,
    modules: &[(String, u64)],
    kb: u64,
    start_cycles: Option<u64>,
) -> ExpectedRecord {
    let mut e = ExpectedRecord {
        index: 0,
        source: String::new(),
        logger_id: None,
        session_index: None,
        buffer_index: None,
        file_offset: 0,
        buffer_offset: u64::from(r.offset),
        header_type: String::new(),
        marker: r.marker,
        size: r.size,
        timestamp: r.timestamp,
        clock: None,
        cpu: None,
        pid: None,
        tid: None,
        hook_id: None,
        initial_time: None,
        routine: None,
        routine_module: None,
        routine_offset: None,
        routine_symbol: None,
        vector: None,
        return_value: None,
        cycles_before_crash: None,
        provider: None,
        event_id: None,
        version: None,
        channel: None,
        level: None,
        opcode: None,
        task: None,
        keyword: None,
        flags: None,
        event_property: None,
        ext_types: Vec::new(),
        message: None,
        duplicate_of: None,
    };
    match &r.kind {
        GenKind::Perf {
            hook,
            initial_time,
            routine,
            target,
            vector,
            return_value,
        } => {
            e.header_type = "perfinfo64".into();
            e.hook_id = Some(*hook);
            e.initial_time = Some(*initial_time);
            e.routine = Some(*routine);
            let (module, base) = modules
                .iter()
                .filter(|(_, b)| *b <= *routine)
                .max_by_key(|(_, b)| *b)
                .expect("routine inside a module");
            e.routine_module = Some(module.clone());
            e.routine_offset = Some(routine - base);
            if let Routine::Kernel(name) = target {
                assert_eq!(*routine, kb + rva(name));
                e.routine_symbol = Some((*name).to_string());
            }
            e.vector = *vector;
            e.return_value = *return_value;
            e.cycles_before_crash = start_cycles.map(|s| s - r.timestamp);
        }
        GenKind::Event {
            provider,
            id,
            version,
            channel,
            level,
            opcode,
            task,
            keyword,
            flags,
            property,
            tid,
            pid,
            ext_types,
        } => {
            e.header_type = if r.marker >> 16 == 0xC012 {
                "event_header32"
            } else {
                "event_header"
            }
            .into();
            e.provider = Some(lower_guid(provider));
            e.event_id = Some(*id);
            e.version = Some(*version);
            e.channel = Some(*channel);
            e.level = Some(*level);
            e.opcode = Some(*opcode);
            e.task = Some(*task);
            e.keyword = Some(*keyword);
            e.flags = Some(*flags);
            e.event_property = Some(*property);
            e.tid = Some(*tid);
            e.pid = Some(*pid);
            e.ext_types = ext_types.clone();
        }
        GenKind::Message(m) => {
            let x = m.expected();
            e.header_type = "message".into();
            e.timestamp = x.timestamp.unwrap_or(0);
            e.tid = x.tid;
            e.pid = x.pid;
            e.message = Some(x);
        }
    }
    e
}

/// The ARM64 CONTEXT as written by [`arm64_context`].
fn expected_arm64_context(kb: u64) -> ExpectedArm64Context {
    let c = arm64_context(kb);
    let q = |o: usize| crate::util::get_u64(&c, o);
    let d = |o: usize| crate::util::get_u32(&c, o);
    ExpectedArm64Context {
        file_offset: 0x348,
        size: ARM64_CONTEXT_SIZE as u32,
        context_flags: d(0),
        cpsr: d(4),
        x: (0..29).map(|i| q(8 + 8 * i)).collect(),
        fp: q(0xF0),
        lr: q(0xF8),
        sp: q(0x100),
        pc: q(0x108),
        fpcr: d(0x310),
        fpsr: d(0x314),
        exception_address: kb + ARM64_PC_RVA,
        boot_id: ARM64_BOOT_ID,
    }
}
