//! Reading the TRACE_LOGFILE_HEADER of an .etl file (etw-internals.md §6.1): the first record
//! of the header buffer, a SYSTEM_TRACE_HEADER with HookId 0 whose payload is the header, in
//! its 32-bit (0x110 bytes) or 64-bit (0x118 bytes) form as PointerSize says. What a reader
//! needs to date the file's records: the clock (ReservedFlags), its rate (PerfFreq,
//! CpuSpeedInMHz), StartTime and the header event's own TimeStamp (the same instant in the
//! logger's clock), and the file's time range.

use super::header::BUFFER_HEADER_SIZE;
use crate::bytes::LeBytes;
use serde::Serialize;

/// The facts of a TRACE_LOGFILE_HEADER a reader dates records with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LogfileInfo {
    /// VersionDetail.MajorVersion (the traced OS's major version).
    pub os_major: u8,
    /// ProviderVersion: the traced OS's build number (e.g. 19041).
    pub build: u32,
    /// PointerSize: 4 or 8.
    pub pointer_size: u32,
    /// ReservedFlags: the logger's ClockType (1 QPC, 2 system time, 3 CPU cycles; before 6.0,
    /// 1 for the performance counter and 0 for system time).
    pub clock_type: u32,
    pub perf_freq: u64,
    pub cpu_speed_mhz: u32,
    /// StartTime, EndTime and BootTime (FILETIMEs; 0 where the logger left them unset).
    pub start_time: u64,
    pub end_time: u64,
    pub boot_time: u64,
    /// The header event's TimeStamp: StartTime's instant in the logger's clock.
    pub header_timestamp: u64,
}

/// The header of the file whose header buffer is `buf` (its first BufferSize bytes, or at
/// least its first record), or why it cannot be read.
pub fn parse(buf: &[u8]) -> Result<LogfileInfo, String> {
    let at = BUFFER_HEADER_SIZE;
    let (Some(marker), Some(size), Some(hook)) =
        (buf.u32_at(at), buf.u16_at(at + 4), buf.u16_at(at + 6))
    else {
        return Err("the header buffer holds no record".into());
    };
    let ty = (marker >> 16) & 0xFF;
    if marker >> 24 != 0xC0 || !(1..=4).contains(&ty) || hook != 0 {
        return Err(format!(
            "the first record is not the logfile header event (marker {marker:#010x}, hook {hook:#06x})"
        ));
    }
    // SYSTEM_TRACE_HEADER: 0x20 bytes, the compact forms (3, 4) 0x18; SystemTime at +0x10.
    let tlh = at + if ty >= 3 { 0x18 } else { 0x20 };
    let end = (at + usize::from(size)).min(buf.len());
    let b = buf.get(tlh..end).unwrap_or_default();
    let pointer_size = b.u32_at(0x2C).unwrap_or(0);
    let tail = match pointer_size {
        8 => 0xF8,
        4 => 0xF0,
        p => return Err(format!("the header's PointerSize is {p}, not 4 or 8")),
    };
    let need = tail + 0x1C;
    if b.len() < need {
        return Err(format!(
            "the logfile header event holds {:#x} bytes of TRACE_LOGFILE_HEADER, fewer than the {need:#x} its clock fields need",
            b.len()
        ));
    }
    let u32_ = |o: usize| b.u32_at(o).unwrap_or(0);
    let u64_ = |o: usize| b.u64_at(o).unwrap_or(0);
    Ok(LogfileInfo {
        os_major: b.get(4).copied().unwrap_or(0),
        build: u32_(8),
        pointer_size,
        clock_type: u32_(tail + 0x18),
        perf_freq: u64_(tail + 8),
        cpu_speed_mhz: u32_(0x34),
        start_time: u64_(tail + 0x10),
        end_time: u64_(0x10),
        boot_time: u64_(tail),
        header_timestamp: buf.u64_at(at + 0x10).unwrap_or(0),
    })
}
