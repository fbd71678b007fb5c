//! ETW data that Windows saves into triage dumps (minidumps, DumpType 4) at bug check
//! (triage-etw.md):
//!
//! * the **saved windows**: KiSaveCurrentEtwTraceBuffer stores the current buffer of logger 2
//!   on the crashing CPU (at most its last 0x2000 valid bytes) and, when the error-log session
//!   is open, the last 0x1000 valid bytes of its buffer, each as one data block, and records the
//!   buffer's base and end in `KiCurrentEtwBufferBase`/`KiCurrentEtwBufferOffset` and
//!   `KiCurrentErrLogBufferBase`/`KiCurrentErrLogBufferOffset` (the "Offset" globals hold an
//!   end address). Found through those globals with symbols, else by what the data blocks
//!   hold: a window followed by two pointer blocks whose values are the buffer's base and the
//!   window's own end, in either order and at any spacing of the globals (`block_pattern`;
//!   §4.1 step 3 generalised after the ARM64 22000 dump, whose end global lies below the base);
//! * the **ETW secondary data** blob tagged `nt!EtwSecondaryDumpDataGuid` after SizeOfDump
//!   (§1.3): a header (KeMaximumIncrement, NtBuildNumber, EtwCPUSpeedInMHz, EtwpBootTime,
//!   EtwPerfFreq), then per session started with EVENT_TRACE_ADDTO_TRIAGE_DUMP a 0x30-byte
//!   header and its name (2 × Length bytes on 19041, Length bytes on later builds: the parser
//!   accepts whichever is followed by a valid part), then the session's buffers, each cut at its
//!   valid length.
//!
//! Nothing here scans for record markers: windows that start inside a buffer are
//! re-synchronised on the 8-byte record chain relative to the buffer base
//! ([`crate::etl::records::resync`]).

use crate::addr::VirtAddr;
use crate::bytes::LeBytes;
use crate::dump::{Blob, DataBlock, TriageView};
use crate::etl::header::BufferHeader;
use crate::etl::header::BUFFER_HEADER_SIZE;
use crate::etl::records::{resync, walk_from};
use crate::etw::loggers::MAX_BUFFER_SIZE;
use crate::kernel::context::KernelContext;
use crate::mem::MemError;
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use thiserror::Error;

/// `nt!EtwSecondaryDumpDataGuid`, the tag of the ETW buffers blob (triage-etw.md §1.3).
pub const ETW_SECONDARY_DUMP_DATA_GUID: &str = "2b88b710-1c93-4f7c-b06c-655ecc50decc";
/// Session header signature in the ETW blob.
const SESSION_SIGNATURE: u32 = 0x01EB_AFE1;
const BLOB_HEADER_SIZE: usize = 0x20;
const SESSION_HEADER_SIZE: usize = 0x30;
/// Most sessions / buffers accepted from one blob (the kernel has at most 64 loggers).
const MAX_SESSIONS: usize = 256;
const MAX_BUFFERS: usize = 1 << 16;

/// Which saved window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// Logger 2's current buffer on the crashing CPU (limit 0x2000).
    CurrentBuffer,
    /// The tail of the error-log session's buffer (limit 0x1000).
    ErrlogTail,
}

impl WindowKind {
    pub fn source(self) -> &'static str {
        match self {
            WindowKind::CurrentBuffer => "current_buffer",
            WindowKind::ErrlogTail => "errlog_tail",
        }
    }
    pub fn limit(self) -> u64 {
        match self {
            WindowKind::CurrentBuffer => 0x2000,
            WindowKind::ErrlogTail => 0x1000,
        }
    }
    fn globals(self) -> (&'static str, &'static str) {
        match self {
            WindowKind::CurrentBuffer => ("KiCurrentEtwBufferBase", "KiCurrentEtwBufferOffset"),
            WindowKind::ErrlogTail => ("KiCurrentErrLogBufferBase", "KiCurrentErrLogBufferOffset"),
        }
    }
}

/// A blob buffer, by position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BlobBufferRef {
    pub session: usize,
    pub buffer: usize,
}

/// One saved window.
#[derive(Clone, Debug, Serialize)]
pub struct SavedWindow {
    pub kind: WindowKind,
    /// The buffer's base and end (the two globals).
    pub base: VirtAddr,
    pub end: VirtAddr,
    /// end − base: the buffer's valid length at bug check.
    pub valid: u64,
    /// First byte saved: base, or end − limit.
    pub start: VirtAddr,
    /// Where the window's data block is in the file, and its index in the table.
    pub file_offset: Option<u64>,
    pub block_index: Option<usize>,
    #[serde(skip)]
    pub data: Vec<u8>,
    /// The window starts at the buffer base (it holds the WMI_BUFFER_HEADER).
    pub starts_at_base: bool,
    pub header: Option<BufferHeader>,
    /// From the header; for logger 2's window without a header, 2 (KiSaveCurrentEtwTraceBuffer
    /// asks for logger 2); for the error-log tail, IopErrorLogSession or the blob buffer it
    /// duplicates.
    pub logger_id: Option<u64>,
    pub processor: Option<u64>,
    /// Offset in the window of the first whole record (None: no record chain).
    pub first_record: Option<usize>,
    /// Bytes before the first whole record that are the tail of a record cut by the window.
    pub partial_bytes: usize,
    /// How the window was found.
    pub evidence: WindowEvidence,
    /// The blob buffer whose last bytes this window repeats (error-log tail).
    pub duplicate_of: Option<BlobBufferRef>,
}

/// The ETW blob's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BlobHeader {
    pub maximum_increment: u32,
    pub build_number: u32,
    pub cpu_speed_mhz: u32,
    /// EtwpBootTime (FILETIME).
    pub boot_time: u64,
    /// EtwPerfFreq (QPC frequency).
    pub perf_freq: u64,
}

/// One buffer in the blob.
#[derive(Clone, Debug, Serialize)]
pub struct BlobBuffer {
    pub file_offset: u64,
    /// Where the buffer starts in the blob's data (what it is read by).
    #[serde(skip)]
    pub offset: u64,
    pub header: BufferHeader,
    /// Bytes stored (the valid length).
    pub valid: u64,
}

/// One session in the blob.
#[derive(Clone, Debug, Serialize)]
pub struct BlobSession {
    pub header_offset: u64,
    pub logger_id: u64,
    pub logger_mode: u64,
    pub clock_type: u64,
    pub buffer_size: u64,
    /// LoggerName.Length (bytes).
    pub name_length: u32,
    pub name: Untrusted,
    /// "x2" (2 × Length bytes follow the header, 19041) or "x1" (Length bytes, later builds).
    pub name_convention: &'static str,
    pub start_time: u64,
    pub reference_system_time: u64,
    pub reference_perf_clock: u64,
    pub buffers: Vec<BlobBuffer>,
}

/// The parsed ETW blob.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EtwBlob {
    pub file_offset: u64,
    /// The secondary-data blob it was parsed from (None: parsed from bytes alone).
    #[serde(skip)]
    pub stored: Option<Blob>,
    pub size: u64,
    pub header: Option<BlobHeader>,
    pub sessions: Vec<BlobSession>,
    /// Offset in the blob where parsing ended (== size when everything was understood).
    pub parsed: u64,
    pub warnings: Vec<Warning>,
}

/// The crashing CPU's KPRCB copy (TRIAGE_DUMP.PrcbOffset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CrashCpu {
    pub number: Option<u64>,
    pub mhz: Option<u64>,
    pub start_cycles: Option<u64>,
    pub current_thread: Option<u64>,
}

/// Everything recovered from a triage dump.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TriageEtw {
    pub windows: Vec<SavedWindow>,
    pub blob: Option<EtwBlob>,
    pub crash_cpu: Option<CrashCpu>,
    pub warnings: Vec<Warning>,
}

/// Parse the ETW blob's bytes (`file_offset` only labels offsets in the result).
pub fn parse_blob(b: &[u8], file_offset: u64) -> EtwBlob {
    let mut out = EtwBlob {
        file_offset,
        size: b.len() as u64,
        ..EtwBlob::default()
    };
    let at = |o: usize| file_offset + o as u64;
    if b.len() < BLOB_HEADER_SIZE {
        out.warnings.push(Warning::new(WarningKind::Decode, format!(
            "ETW blob at file offset {file_offset:#x}: {} bytes, shorter than its {BLOB_HEADER_SIZE:#x}-byte header",
            b.len()
        )));
        return out;
    }
    out.header = Some(BlobHeader {
        maximum_increment: b.u32_at(0).unwrap_or(0),
        build_number: b.u32_at(4).unwrap_or(0),
        cpu_speed_mhz: b.u32_at(8).unwrap_or(0),
        boot_time: b.u64_at(0x10).unwrap_or(0),
        perf_freq: b.u64_at(0x18).unwrap_or(0),
    });
    let mut o = BLOB_HEADER_SIZE;
    let mut buffers = 0usize;
    while o < b.len() {
        if b.u32_at(o) == Some(SESSION_SIGNATURE) {
            if out.sessions.len() >= MAX_SESSIONS {
                out.warnings.push(Warning::new(
                    WarningKind::Bound,
                    format!("ETW blob: more than {MAX_SESSIONS} sessions; stopped"),
                ));
                break;
            }
            let Some(h) = b.bytes_at(o, SESSION_HEADER_SIZE) else {
                out.warnings.push(Warning::new(
                    WarningKind::Decode,
                    format!(
                    "ETW blob: session header at file offset {:#x} is cut off by the blob's end",
                    at(o)
                ),
                ));
                break;
            };
            let logger_id = u64::from(h.u32_at(4).unwrap_or(0));
            let buffer_size = u64::from(h.u32_at(0x10).unwrap_or(0));
            let len = h.u32_at(0x14).unwrap_or(0);
            // The next part: 2·Length (19041) or Length (later builds) after the header,
            // whichever is followed by something valid (§4.1 step 4).
            let fits = |next: usize| -> bool {
                next == b.len()
                    || b.u32_at(next) == Some(SESSION_SIGNATURE)
                    || BufferHeader::from_bytes(&b[next.min(b.len())..]).is_some_and(|bh| {
                        bh.buffer_size == buffer_size && bh.logger_id == logger_id
                    })
            };
            let body = o + SESSION_HEADER_SIZE;
            let x2 = body.checked_add(2 * len as usize).filter(|&n| n <= b.len());
            let x1 = body.checked_add(len as usize).filter(|&n| n <= b.len());
            let found = match (x2, x1) {
                (Some(n), _) if fits(n) => Some((n, "x2")),
                (_, Some(n)) if fits(n) => Some((n, "x1")),
                _ => None,
            };
            // The name: the first Length bytes (as many as the blob holds).
            let avail = b.len().saturating_sub(body).min(len as usize) & !1;
            out.sessions.push(BlobSession {
                header_offset: at(o),
                logger_id,
                logger_mode: u64::from(h.u32_at(8).unwrap_or(0)),
                clock_type: u64::from(h.u32_at(0xC).unwrap_or(0)),
                buffer_size,
                name_length: len,
                name: b
                    .bytes_at(body, avail)
                    .map(Untrusted::from_utf16le_z)
                    .unwrap_or_default(),
                name_convention: found.map_or("unknown", |f| f.1),
                start_time: h.u64_at(0x18).unwrap_or(0),
                reference_system_time: h.u64_at(0x20).unwrap_or(0),
                reference_perf_clock: h.u64_at(0x28).unwrap_or(0),
                buffers: Vec::new(),
            });
            let Some((next, _)) = found else {
                out.warnings.push(Warning::new(WarningKind::Decode, format!(
                    "ETW blob: session {logger_id} at file offset {:#x}: name length {len:#x} leads to nothing valid (neither 2×{len:#x} nor {len:#x} bytes after the header); listed without buffers, stopped",
                    at(o)
                )));
                break;
            };
            o = next;
            continue;
        }
        // A buffer of the current session.
        let Some(s) = out.sessions.last_mut() else {
            out.warnings.push(Warning::new(WarningKind::Decode, format!(
                "ETW blob: file offset {:#x}: expected a session header (signature {SESSION_SIGNATURE:#010x}), found {:#010x}; stopped",
                at(o),
                b.u32_at(o).unwrap_or(0)
            )));
            break;
        };
        let Some(h) =
            BufferHeader::from_bytes(&b[o..]).filter(|_| o + BUFFER_HEADER_SIZE <= b.len())
        else {
            out.warnings.push(Warning::new(WarningKind::Decode, format!(
                "ETW blob: buffer header at file offset {:#x} is cut off by the blob's end; stopped",
                at(o)
            )));
            break;
        };
        if h.buffer_size != s.buffer_size || h.logger_id != s.logger_id {
            out.warnings.push(Warning::new(WarningKind::Decode, format!(
                "ETW blob: file offset {:#x}: not a buffer of session {} (BufferSize {:#x}, LoggerId {}; expected {:#x}, {}); stopped",
                at(o), s.logger_id, h.buffer_size, h.logger_id, s.buffer_size, s.logger_id
            )));
            break;
        }
        let Some(valid) = h.valid_bytes() else {
            out.warnings.push(Warning::new(WarningKind::Decode, format!(
                "ETW blob: buffer at file offset {:#x}: no plausible valid length (CurrentOffset {:#x}, SavedOffset {:#x}, BufferSize {:#x}); stopped",
                at(o), h.current_offset, h.saved_offset, h.buffer_size
            )));
            break;
        };
        if o as u64 + valid > b.len() as u64 {
            out.warnings.push(Warning::new(WarningKind::Decode, format!(
                "ETW blob: buffer at file offset {:#x}: valid length {valid:#x} runs past the blob's end ({:#x}); stopped",
                at(o),
                file_offset + b.len() as u64
            )));
            break;
        }
        buffers += 1;
        if buffers > MAX_BUFFERS {
            out.warnings.push(Warning::new(
                WarningKind::Bound,
                format!("ETW blob: more than {MAX_BUFFERS} buffers; stopped"),
            ));
            break;
        }
        s.buffers.push(BlobBuffer {
            file_offset: at(o),
            offset: o as u64,
            header: h,
            valid,
        });
        o += valid as usize;
    }
    out.parsed = o.min(b.len()) as u64;
    out
}

/// Read the KPRCB copy of the crashing CPU.
fn crash_cpu(ctx: &KernelContext<'_>, view: &TriageView<'_>) -> Option<CrashCpu> {
    let l = ctx.symbols.layout("_KPRCB")?;
    if !view.has_saved_prcb() {
        return None;
    }
    let field = |name: &str| -> Option<u64> {
        let f = l.field(name)?;
        let size =
            f.ty.size(ctx.symbols.pointer_size, ctx.symbols.own_types())?;
        let b = view.saved_prcb(f.offset, size as usize)?;
        Some(match size {
            1 => u64::from(b[0]),
            2 => u64::from(b.u16_at(0)?),
            4 => u64::from(b.u32_at(0)?),
            8 => b.u64_at(0)?,
            _ => return None,
        })
    };
    Some(CrashCpu {
        number: field("Number"),
        mhz: field("MHz"),
        start_cycles: field("StartCycles"),
        current_thread: field("CurrentThread"),
    })
}

/// Recover the windows and the blob of a triage dump. Empty for other dump types.
pub fn read(ctx: &KernelContext<'_>) -> TriageEtw {
    let mut out = TriageEtw::default();
    let Some(view) = ctx.dump.triage_view() else {
        return out;
    };
    let t = view.triage();
    out.crash_cpu = crash_cpu(ctx, &view);
    // The secondary data and the ETW blob.
    let sd = view.secondary_data();
    out.warnings.extend(sd.warnings.iter().cloned());
    let mut blob_data: Option<&[u8]> = None;
    if let Some(blob) = sd.find(ETW_SECONDARY_DUMP_DATA_GUID) {
        if let Some(bytes) = view.blob(blob) {
            let mut parsed = parse_blob(bytes, blob.data_offset);
            parsed.stored = Some(blob.clone());
            out.blob = Some(parsed);
            blob_data = Some(bytes);
        }
    }
    // The saved windows.
    let with_symbols = [WindowKind::CurrentBuffer, WindowKind::ErrlogTail]
        .iter()
        .all(|k| ctx.global(k.globals().0).is_some() && ctx.global(k.globals().1).is_some());
    let found: Vec<(Triple, &'static str)> = if with_symbols {
        let mut v = Vec::new();
        for kind in [WindowKind::CurrentBuffer, WindowKind::ErrlogTail] {
            let (bn, en) = kind.globals();
            let (Some(bva), Some(eva)) = (ctx.global(bn), ctx.global(en)) else {
                continue;
            };
            match (ctx.space.read_ptr(bva), ctx.space.read_ptr(eva)) {
                (Ok(b), Ok(e)) if !b.is_null() || !e.is_null() => v.push((
                    Triple {
                        kind,
                        base: b,
                        end: e,
                        base_global: bva,
                        end_global: eva,
                    },
                    "symbols",
                )),
                (Ok(_), Ok(_)) => out.warnings.push(Warning::new(
                    WarningKind::NotFound,
                    format!("{bn} and {en} are NULL: nothing saved"),
                )),
                (Err(x), _) => out.warnings.push(Warning::new(
                    WarningKind::Unreadable,
                    format!(
                        "{bn} at {bva} is not in the dump ({x}): {} not saved or not recoverable",
                        kind.source()
                    ),
                )),
                (_, Err(x)) => out.warnings.push(Warning::new(
                    WarningKind::Unreadable,
                    format!(
                        "{en} at {eva} is not in the dump ({x}): {} not saved or not recoverable",
                        kind.source()
                    ),
                )),
            }
        }
        v
    } else {
        let psize = ctx.space.arch().pointer_size();
        let v = block_pattern(ctx, &t.blocks, psize);
        if v.is_empty() {
            out.warnings.push(Warning::new(WarningKind::NotFound, format!(
                "no saved ETW window: no data block is followed by two {psize}-byte blocks holding a buffer base and the block's own end (give the kernel's symbols to look the Ki*Buffer* globals up)"
            )));
        } else {
            out.warnings.push(Warning::new(WarningKind::Inferred, "no symbols for the Ki*Buffer* globals: saved windows found by what the data blocks hold (a window followed by two pointer blocks, one holding the window's end and the other the buffer base below it); which window is logger 2's is told by the buffer header's LoggerId, or by the kernel's limit (0x2000 / 0x1000) when the window is cut"));
        }
        v.into_iter().map(|t| (t, "block pattern")).collect()
    };
    for (triple, found_by) in found {
        match window(ctx, &t.blocks, triple, found_by) {
            Ok(w) => out.windows.push(w),
            Err(e) => out.warnings.push(Warning::new(
                WarningKind::Unreadable,
                format!("{}: {e}", triple.kind.source()),
            )),
        }
    }
    // The error-log tail usually repeats the end of a blob buffer: recognise it.
    if let Some(blob) = &out.blob {
        for w in out.windows.iter_mut().filter(|w| !w.starts_at_base) {
            'outer: for (si, s) in blob.sessions.iter().enumerate() {
                for (bi, b) in s.buffers.iter().enumerate() {
                    if b.valid != w.valid {
                        continue;
                    }
                    let tail = (b.offset + b.valid)
                        .checked_sub(w.data.len() as u64)
                        .and_then(|from| usize::try_from(from).ok())
                        .and_then(|from| blob_data?.bytes_at(from, w.data.len()));
                    if tail == Some(&w.data[..]) {
                        w.duplicate_of = Some(BlobBufferRef {
                            session: si,
                            buffer: bi,
                        });
                        w.logger_id = w.logger_id.or(Some(s.logger_id));
                        break 'outer;
                    }
                }
            }
        }
    }
    out
}

/// How the two pointer globals of a saved window lie relative to each other (the kernel writes
/// them as consecutive data blocks after the window; their addresses differ per build and
/// architecture: 19041 x64 has the end global 8 bytes above the base global, 22000 ARM64 8 bytes
/// below it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalOrder {
    /// The end global directly follows the base global (end = base + pointer size).
    EndAfterBase,
    /// The end global directly precedes the base global (end = base − pointer size).
    EndBeforeBase,
    /// Anywhere else.
    Apart,
}

impl GlobalOrder {
    fn of(base_global: u64, end_global: u64, psize: u64) -> GlobalOrder {
        if base_global.checked_add(psize) == Some(end_global) {
            GlobalOrder::EndAfterBase
        } else if end_global.checked_add(psize) == Some(base_global) {
            GlobalOrder::EndBeforeBase
        } else {
            GlobalOrder::Apart
        }
    }
}

/// How a saved window was found: through the symbols of the `KiCurrent*Buffer*` globals, or
/// (no symbols) through what the data blocks hold; where its base and end pointers were read
/// and how the two globals lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WindowEvidence {
    /// "symbols" or "block pattern".
    pub found_by: &'static str,
    pub base_global: VirtAddr,
    pub end_global: VirtAddr,
    pub global_order: GlobalOrder,
}

impl std::fmt::Display for WindowEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let order = match self.global_order {
            GlobalOrder::EndAfterBase => "end after base",
            GlobalOrder::EndBeforeBase => "end before base",
            GlobalOrder::Apart => "apart",
        };
        write!(
            f,
            "found by {}: base at {}, end at {} ({order})",
            self.found_by, self.base_global, self.end_global
        )
    }
}

/// A saved window as the data-block table shows it: the window block and the two pointer
/// blocks, with the values they hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Triple {
    kind: WindowKind,
    base: VirtAddr,
    end: VirtAddr,
    base_global: VirtAddr,
    end_global: VirtAddr,
}

/// The windows without symbols, by what the blocks hold (§4.1 step 3), whatever the order or
/// spacing of the two globals: a block `W` followed by two pointer-sized blocks whose values
/// are the buffer's base `B` and end `E`, told apart by content alone — `E` is the one equal to
/// `W.VA + W.Size` (the window ends at the buffer's valid end), `B` the other, with
/// `B ≤ W.VA < E`, `E − B` a plausible buffer length, and either `W.VA == B` (the whole valid
/// part was saved: the window begins with a buffer header) or `W` exactly one of the kernel's
/// limits (0x2000 for logger 2, 0x1000 for the error-log tail).
///
/// Which window is which is decided by evidence, not by position: a window that starts at the
/// base holds a buffer header whose LoggerId says it (2: logger 2's current buffer; any other:
/// the error-log session); one that does not is cut at its limit, and the limit (0x2000 or
/// 0x1000) says it.
fn block_pattern(ctx: &KernelContext<'_>, blocks: &[DataBlock], psize: u64) -> Vec<Triple> {
    let Some(view) = ctx.dump.triage_view() else {
        return Vec::new();
    };
    let value = |b: &DataBlock| -> Option<u64> {
        if !b.in_file || u64::from(b.size) != psize {
            return None;
        }
        let x = view.block(b)?;
        if psize == 4 {
            x.u32_at(0).map(u64::from)
        } else {
            x.u64_at(0)
        }
    };
    let mut v: Vec<Triple> = Vec::new();
    for i in 0..blocks.len().saturating_sub(2) {
        let (w, a, b) = (&blocks[i], &blocks[i + 1], &blocks[i + 2]);
        if !w.in_file || w.size == 0 {
            continue;
        }
        let (Some(va), Some(vb)) = (value(a), value(b)) else {
            continue;
        };
        let Some(w_end) = w.va.checked_add(u64::from(w.size)) else {
            continue;
        };
        // Which of the two holds the end: the one equal to the window's end.
        let (base, end, base_block, end_block) = if vb == w_end && va != w_end {
            (va, vb, a, b)
        } else if va == w_end && vb != w_end {
            (vb, va, b, a)
        } else {
            continue;
        };
        let plausible = base <= w.va
            && end - base <= MAX_BUFFER_SIZE
            && (w.va == base || w.size == 0x1000 || w.size == 0x2000);
        if !plausible {
            continue;
        }
        let kind = if w.va == base {
            // The window holds the buffer's start: its header names the logger.
            let header = view
                .block(w)
                .and_then(|b| b.get(..b.len().min(BUFFER_HEADER_SIZE)))
                .and_then(BufferHeader::from_bytes);
            match header {
                Some(h) if h.logger_id == 2 => WindowKind::CurrentBuffer,
                Some(_) => WindowKind::ErrlogTail,
                // No readable header where one must be: not a saved window.
                None => continue,
            }
        } else if w.size == 0x2000 {
            WindowKind::CurrentBuffer
        } else {
            WindowKind::ErrlogTail
        };
        if v.iter().any(|t| t.kind == kind) {
            continue;
        }
        v.push(Triple {
            kind,
            base: VirtAddr::new(base),
            end: VirtAddr::new(end),
            base_global: VirtAddr::new(base_block.va),
            end_global: VirtAddr::new(end_block.va),
        });
        if v.len() == 2 {
            break;
        }
    }
    v
}

/// Why a saved window's globals give no window.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
enum BadWindow {
    #[error("base {base} and end {end} do not bound a buffer")]
    Bounds { base: VirtAddr, end: VirtAddr },
    #[error("window [{start}, {end}) is not in the dump: {source}")]
    NotInDump {
        start: VirtAddr,
        end: VirtAddr,
        source: MemError,
    },
}

fn window(
    ctx: &KernelContext<'_>,
    blocks: &[DataBlock],
    triple: Triple,
    found_by: &'static str,
) -> Result<SavedWindow, BadWindow> {
    let Triple {
        kind,
        base,
        end,
        base_global,
        end_global,
    } = triple;
    let valid = end
        .get()
        .checked_sub(base.get())
        .filter(|&v| v <= MAX_BUFFER_SIZE)
        .ok_or(BadWindow::Bounds { base, end })?;
    let limit = kind.limit();
    let start = if valid >= limit {
        VirtAddr::new(end.get() - limit)
    } else {
        base
    };
    let len = (end.get() - start.get()) as usize;
    let data = ctx
        .space
        .read_vec(start, len)
        .map_err(|source| BadWindow::NotInDump { start, end, source })?;
    let block = blocks.iter().find(|b| b.in_file && b.va == start.get());
    let mut w = SavedWindow {
        kind,
        base,
        end,
        valid,
        start,
        file_offset: block.map(|b| b.file_offset),
        block_index: block.map(|b| b.index),
        data,
        starts_at_base: start == base,
        header: None,
        logger_id: None,
        processor: None,
        first_record: None,
        partial_bytes: 0,
        evidence: WindowEvidence {
            found_by,
            base_global,
            end_global,
            global_order: GlobalOrder::of(
                base_global.get(),
                end_global.get(),
                ctx.space.arch().pointer_size(),
            ),
        },
        duplicate_of: None,
    };
    if w.starts_at_base {
        if len >= BUFFER_HEADER_SIZE {
            let h = BufferHeader::from_bytes(&w.data);
            w.logger_id = h.as_ref().map(|h| h.logger_id);
            w.processor = h.as_ref().map(|h| h.processor_index);
            w.header = h;
            let walk = walk_from(&w.data, BUFFER_HEADER_SIZE, len, |_| {});
            w.first_record = walk.first.map(|r| r.offset);
        }
    } else {
        let phase = (8 - ((start.get() - base.get()) % 8) as usize) % 8;
        w.first_record = resync(&w.data, phase);
        w.partial_bytes = w.first_record.unwrap_or(0);
    }
    if kind == WindowKind::CurrentBuffer && w.logger_id.is_none() {
        w.logger_id = Some(2);
    }
    if kind == WindowKind::ErrlogTail && w.logger_id.is_none() {
        w.logger_id = ctx
            .global("IopErrorLogSession")
            .and_then(|g| ctx.space.read_u32(g).ok())
            .map(|v| u64::from(v as u16));
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(size: u32, logger: u16, valid: u32, seq: u64) -> Vec<u8> {
        let mut b = vec![0u8; valid as usize];
        b[0..4].copy_from_slice(&size.to_le_bytes());
        b[8..12].copy_from_slice(&valid.to_le_bytes());
        b[0x18..0x20].copy_from_slice(&seq.to_le_bytes());
        b[0x2A..0x2C].copy_from_slice(&logger.to_le_bytes());
        b[0x30..0x34].copy_from_slice(&valid.to_le_bytes());
        b
    }

    fn session(id: u32, size: u32, name: &str, doubled: bool) -> Vec<u8> {
        let n: Vec<u8> = name.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        let mut h = vec![0u8; SESSION_HEADER_SIZE];
        h[0..4].copy_from_slice(&SESSION_SIGNATURE.to_le_bytes());
        h[4..8].copy_from_slice(&id.to_le_bytes());
        h[0xC..0x10].copy_from_slice(&2u32.to_le_bytes());
        h[0x10..0x14].copy_from_slice(&size.to_le_bytes());
        h[0x14..0x18].copy_from_slice(&(n.len() as u32).to_le_bytes());
        h.extend(&n);
        if doubled {
            h.extend(vec![0u8; n.len()]);
        }
        h
    }

    #[test]
    fn blob_with_both_name_conventions() {
        for doubled in [true, false] {
            let mut b = vec![0u8; BLOB_HEADER_SIZE];
            b[8..12].copy_from_slice(&3593u32.to_le_bytes());
            b[0x18..0x20].copy_from_slice(&10_000_000u64.to_le_bytes());
            b.extend(session(10, 0x1000, "EventLog-System", doubled));
            b.extend(buffer(0x1000, 10, 0x48, 1));
            b.extend(buffer(0x1000, 10, 0x48, 2));
            b.extend(session(12, 0x2000, "Rdp", doubled));
            b.extend(buffer(0x2000, 12, 0x48, 1));
            let p = parse_blob(&b, 0x1000);
            assert!(p.warnings.is_empty(), "{:?}", p.warnings);
            assert_eq!(p.parsed, b.len() as u64);
            assert_eq!(p.header.unwrap().cpu_speed_mhz, 3593);
            assert_eq!(p.sessions.len(), 2);
            assert_eq!(p.sessions[0].name, "EventLog-System");
            assert_eq!(
                p.sessions[0].name_convention,
                if doubled { "x2" } else { "x1" }
            );
            assert_eq!(p.sessions[0].buffers.len(), 2);
            assert_eq!(
                p.sessions[1].buffers[0].file_offset,
                0x1000 + b.len() as u64 - 0x48
            );
        }
        // 0 sessions: header only.
        let p = parse_blob(&[0u8; BLOB_HEADER_SIZE], 0);
        assert!(p.sessions.is_empty() && p.warnings.is_empty());
    }

    #[test]
    fn lying_blobs_stop_with_the_offset() {
        let mut b = vec![0u8; BLOB_HEADER_SIZE];
        b.extend(session(10, 0x1000, "S", true));
        let mut buf = buffer(0x1000, 10, 0x48, 1);
        buf[8..12].copy_from_slice(&0x800u32.to_le_bytes()); // valid 0x800, only 0x48 stored
        b.extend(buf);
        let p = parse_blob(&b, 0x100);
        assert_eq!(p.sessions[0].buffers.len(), 0);
        assert!(
            p.warnings[0]
                .message
                .contains("valid length 0x800 runs past"),
            "{:?}",
            p.warnings
        );
        // A name length that overruns.
        let mut b = vec![0u8; BLOB_HEADER_SIZE];
        let mut s = session(10, 0x1000, "S", true);
        s[0x14..0x18].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        b.extend(s);
        let p = parse_blob(&b, 0);
        assert_eq!(p.sessions.len(), 1);
        assert!(p.sessions[0].buffers.is_empty());
        assert!(
            p.warnings[0].message.contains("name length 0xfffffff0"),
            "{:?}",
            p.warnings
        );
        // A buffer of another logger.
        let mut b = vec![0u8; BLOB_HEADER_SIZE];
        b.extend(session(10, 0x1000, "S", false));
        b.extend(buffer(0x1000, 10, 0x48, 1));
        b.extend(buffer(0x1000, 11, 0x48, 1));
        let p = parse_blob(&b, 0);
        assert_eq!(p.sessions[0].buffers.len(), 1);
        assert!(
            p.warnings[0]
                .message
                .contains("file offset 0x9a: not a buffer of session 10"),
            "{:?}",
            p.warnings
        );
        // Shorter than the header.
        assert!(parse_blob(&[0u8; 8], 0x10).warnings[0]
            .message
            .contains("shorter than its 0x20-byte header"));
    }
}
