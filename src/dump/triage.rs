//! DumpType 4 (triage / kernel minidump): a TRIAGE_DUMP header after the dump header and
//! blocks of memory tagged with their virtual address. There are no page tables: the blocks
//! are the whole address space (crash-dump-format.md §1.3, verified on the real dumps).

use super::format::{self, Format};
use super::header::{Arch, DumpHeader};
use super::DumpError;
use crate::bytes::LeBytes;
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Where a virtually addressed piece of a triage dump came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentSource {
    DataBlock,
    DebuggerData,
    DataPage,
}

/// `len` bytes of virtual memory at `va`, stored at `file_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub va: u64,
    pub file_offset: u64,
    pub len: u64,
    pub source: SegmentSource,
}

/// One entry of the data-block table, in table order (the order of the kernel's
/// IoAddTriageDumpDataBlock calls, triage-etw.md §1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DataBlock {
    pub index: usize,
    pub va: u64,
    pub file_offset: u64,
    pub size: u32,
    /// False when the block runs past the end of the file (it is not mapped).
    pub in_file: bool,
}

/// A driver from the triage driver list.
#[derive(Clone, Debug, Serialize)]
pub struct TriageDriver {
    pub name: Untrusted,
    pub base: u64,
    pub size: u32,
    pub time_date_stamp: u32,
}

/// Field offsets of TRIAGE_DUMP32/64 (rizin dmp_specs.h; x64 verified on real dumps).
struct TriageLayout {
    top_of_stack_wide: bool,
    data_page_address: usize,
    data_page_offset: usize,
    debugger_data_offset: usize,
    data_blocks_offset: usize,
    block_size: usize,
    driver_entry_size: usize,
    /// Offset in a driver entry of the KLDR_DATA_TABLE_ENTRY copy.
    ldr: usize,
    ldr_dll_base: usize,
    ldr_size_of_image: usize,
    ldr_time_date_stamp: usize,
}

const TRIAGE64: TriageLayout = TriageLayout {
    top_of_stack_wide: true,
    data_page_address: 0x60,
    data_page_offset: 0x68,
    debugger_data_offset: 0x70,
    data_blocks_offset: 0x78,
    block_size: 16,
    driver_entry_size: 0x90,
    ldr: 8,
    ldr_dll_base: 0x30,
    ldr_size_of_image: 0x40,
    ldr_time_date_stamp: 0x80,
};

// x86: from rizin's dmp32_triage / dmp_driver_entry32 (no real x86 triage dump was available).
const TRIAGE32: TriageLayout = TriageLayout {
    top_of_stack_wide: false,
    data_page_address: 0x4C,
    data_page_offset: 0x50,
    debugger_data_offset: 0x58,
    data_blocks_offset: 0x60,
    block_size: 12,
    driver_entry_size: 0x4C,
    ldr: 4,
    ldr_dll_base: 0x18,
    ldr_size_of_image: 0x20,
    ldr_time_date_stamp: 0x44,
};

/// Largest driver count accepted (real dumps: ~150-250).
const MAX_DRIVERS: u32 = 65_536;
/// Longest driver name accepted, in UTF-16 units.
const MAX_NAME_CHARS: u32 = 32_768;

/// The parsed triage dump.
#[derive(Clone, Debug)]
pub struct Triage {
    pub size_of_dump: u32,
    /// The u32 at ValidOffset reads "TRGD".
    pub valid_tag_ok: bool,
    pub context_offset: u32,
    pub exception_offset: u32,
    pub prcb_offset: u32,
    pub process_offset: u32,
    pub thread_offset: u32,
    pub call_stack_offset: u32,
    pub size_of_call_stack: u32,
    pub top_of_stack: u64,
    pub debugger_data_offset: u32,
    pub debugger_data_size: u32,
    pub data_blocks_count: u32,
    /// Bytes in the data blocks accepted.
    pub data_blocks_bytes: u64,
    pub drivers: Vec<TriageDriver>,
    /// Bytes after SizeOfDump (secondary data, "DumpBlob" format).
    pub secondary_data_bytes: u64,
    /// The data-block table as stored (bounded by the file: 16 bytes per entry).
    pub blocks: Vec<DataBlock>,
    /// Address space: sorted, non-overlapping.
    segments: Vec<Segment>,
    pub warnings: Vec<Warning>,
}

impl Triage {
    /// Parse the triage part. `allow_truncated`: a SizeOfDump past the end of the file is a
    /// warning (the blocks that are in the file are read) instead of an error.
    pub fn parse(
        file: &[u8],
        header: &DumpHeader,
        allow_truncated: bool,
    ) -> Result<Triage, DumpError> {
        let l = if header.arch.is_64bit() {
            &TRIAGE64
        } else {
            &TRIAGE32
        };
        let base = header.header_size as usize;
        let need = l.data_blocks_offset + 8;
        let t = file.bytes_at(base, need).ok_or(DumpError::Truncated {
            what: "the TRIAGE_DUMP header".into(),
            end: (base + need) as u64,
            file_len: file.len() as u64,
        })?;
        let f = |o: usize| t.u32_at(o).unwrap_or(0);
        let file_len = file.len() as u64;
        let mut warnings = Vec::new();

        let size_of_dump = f(0x04);
        if u64::from(size_of_dump) > file_len && allow_truncated {
            warnings.push(Warning::new(super::TRUNCATION, format!(
                "truncated dump: the triage data (SizeOfDump {size_of_dump:#x}) ends past the end of the file ({file_len:#x}); reading what is there"
            )));
        } else if u64::from(size_of_dump) > file_len {
            return Err(DumpError::Truncated {
                what: format!("the triage data (SizeOfDump {size_of_dump:#x})"),
                end: u64::from(size_of_dump),
                file_len,
            });
        }
        let valid_offset = f(0x08) as usize;
        let valid_tag_ok = file.bytes_at(valid_offset, 4) == Some(b"TRGD");
        if !valid_tag_ok {
            warnings.push(Warning::new(
                WarningKind::Anomaly,
                format!("TRIAGE_DUMP.ValidOffset {valid_offset:#x} does not point at \"TRGD\""),
            ));
        }
        let top_of_stack = if l.top_of_stack_wide {
            t.u64_at(0x48).unwrap_or(0)
        } else {
            u64::from(f(0x48))
        };
        let data_page_address = if header.arch.is_64bit() {
            t.u64_at(l.data_page_address).unwrap_or(0)
        } else {
            u64::from(f(l.data_page_address))
        };
        let data_page_offset = f(l.data_page_offset);
        let data_page_size = f(l.data_page_offset + 4);
        let debugger_data_offset = f(l.debugger_data_offset);
        let debugger_data_size = f(l.debugger_data_offset + 4);
        let blocks_offset = f(l.data_blocks_offset);
        let blocks_count = f(l.data_blocks_offset + 4);

        let (blocks, mut raw, blocks_bytes) = Self::block_table(
            file,
            header.arch,
            (blocks_offset, blocks_count),
            &mut warnings,
        )?;
        let kdbg = header.kd_debugger_data_block.get();
        let fits = |offset: u32, size: u32| u64::from(offset) + u64::from(size) <= file_len;
        if debugger_data_size > 0 && kdbg != 0 {
            if fits(debugger_data_offset, debugger_data_size) {
                raw.push(Segment {
                    va: kdbg,
                    file_offset: u64::from(debugger_data_offset),
                    len: u64::from(debugger_data_size),
                    source: SegmentSource::DebuggerData,
                });
            } else {
                warnings.push(Warning::new(WarningKind::Anomaly, format!(
                    "the KDBG copy ({debugger_data_size:#x} bytes at file offset {debugger_data_offset:#x}) runs past the end of the file"
                )));
            }
        }
        if data_page_size > 0 && data_page_address != 0 {
            if fits(data_page_offset, data_page_size) {
                raw.push(Segment {
                    va: data_page_address,
                    file_offset: u64::from(data_page_offset),
                    len: u64::from(data_page_size),
                    source: SegmentSource::DataPage,
                });
            } else {
                warnings.push(Warning::new(
                    WarningKind::Anomaly,
                    "the triage data page runs past the end of the file",
                ));
            }
        }
        let segments = Self::flatten(raw, header.arch, &mut warnings);

        let drivers = Self::drivers(file, t, l, &mut warnings);
        Ok(Triage {
            size_of_dump,
            valid_tag_ok,
            context_offset: f(0x0C),
            exception_offset: f(0x10),
            prcb_offset: f(0x1C),
            process_offset: f(0x20),
            thread_offset: f(0x24),
            call_stack_offset: f(0x28),
            size_of_call_stack: f(0x2C),
            top_of_stack,
            debugger_data_offset,
            debugger_data_size,
            data_blocks_count: blocks_count,
            data_blocks_bytes: blocks_bytes,
            drivers,
            blocks,
            secondary_data_bytes: file_len.saturating_sub(u64::from(size_of_dump)),
            segments,
            warnings,
        })
    }

    /// The data-block table (`(offset, count)` from the TRIAGE_DUMP header): every entry as
    /// stored, the segments of those inside the file, and their bytes.
    fn block_table(
        file: &[u8],
        arch: Arch,
        (blocks_offset, blocks_count): (u32, u32),
        warnings: &mut Vec<Warning>,
    ) -> Result<(Vec<DataBlock>, Vec<Segment>, u64), DumpError> {
        let l = if arch.is_64bit() {
            &TRIAGE64
        } else {
            &TRIAGE32
        };
        let file_len = file.len() as u64;
        let table_end = u64::from(blocks_offset) + u64::from(blocks_count) * l.block_size as u64;
        if blocks_count > 0 && table_end > file_len {
            return Err(DumpError::BadTriage {
                field: "DataBlocksCount",
                reason: format!(
                    "{blocks_count} blocks of {} bytes from file offset {blocks_offset:#x} end at {table_end:#x}, past the end of the file ({file_len:#x})",
                    l.block_size
                ),
            });
        }
        let mut raw = Vec::with_capacity(blocks_count as usize + 2);
        let mut blocks = Vec::with_capacity(blocks_count as usize);
        let mut blocks_bytes = 0u64;
        for i in 0..blocks_count as usize {
            let e = blocks_offset as usize + i * l.block_size;
            let (va, off, size) = if arch.is_64bit() {
                (
                    file.u64_at(e).unwrap_or(0),
                    file.u32_at(e + 8).unwrap_or(0),
                    file.u32_at(e + 12).unwrap_or(0),
                )
            } else {
                (
                    u64::from(file.u32_at(e).unwrap_or(0)),
                    file.u32_at(e + 4).unwrap_or(0),
                    file.u32_at(e + 8).unwrap_or(0),
                )
            };
            let in_file = u64::from(off) + u64::from(size) <= file_len;
            blocks.push(DataBlock {
                index: i,
                va,
                file_offset: u64::from(off),
                size,
                in_file,
            });
            if !in_file {
                warnings.push(Warning::new(WarningKind::Anomaly, format!(
                    "data block {i} (VA {va:#x}, {size:#x} bytes at file offset {off:#x}) runs past the end of the file; skipped"
                )));
                continue;
            }
            blocks_bytes += u64::from(size);
            raw.push(Segment {
                va,
                file_offset: u64::from(off),
                len: u64::from(size),
                source: SegmentSource::DataBlock,
            });
        }
        Ok((blocks, raw, blocks_bytes))
    }

    /// Sort the segments and clip overlaps (the first one listed wins), so that a lookup is
    /// one binary search.
    fn flatten(mut raw: Vec<Segment>, arch: Arch, warnings: &mut Vec<Warning>) -> Vec<Segment> {
        let limit = if arch.is_64bit() {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        for s in &mut raw {
            // x86 addresses are 32-bit; clamp blocks that would wrap past 4 GiB (or, on x64,
            // past 2^64: va + len must stay representable, so the address space's very last
            // byte is never covered).
            if arch.pointer_size() == 4 {
                s.va &= 0xFFFF_FFFF;
            }
            s.len = s.len.min(limit - s.va);
        }
        raw.retain(|s| s.len > 0);
        raw.sort_by_key(|s| s.va);
        let mut out: Vec<Segment> = Vec::with_capacity(raw.len());
        let mut overlaps = 0usize;
        for mut s in raw {
            if let Some(prev) = out.last() {
                let prev_end = prev.va + prev.len; // no overflow: clamped above
                if s.va < prev_end {
                    overlaps += 1;
                    let skip = prev_end - s.va;
                    if skip >= s.len {
                        continue;
                    }
                    s.va += skip;
                    s.file_offset += skip;
                    s.len -= skip;
                }
            }
            out.push(s);
        }
        if overlaps > 0 {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "{overlaps} triage memory blocks overlap others; the overlapping bytes are taken from the block with the lower address"
            )));
        }
        out
    }

    fn drivers(
        file: &[u8],
        t: &[u8],
        l: &TriageLayout,
        warnings: &mut Vec<Warning>,
    ) -> Vec<TriageDriver> {
        let list = t.u32_at(0x30).unwrap_or(0) as usize;
        let count = t.u32_at(0x34).unwrap_or(0);
        if count == 0 {
            return Vec::new();
        }
        if count > MAX_DRIVERS
            || list as u64 + u64::from(count) * l.driver_entry_size as u64 > file.len() as u64
        {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "TRIAGE_DUMP.DriverCount {count} at DriverListOffset {list:#x} does not fit in the file; driver list ignored"
            )));
            return Vec::new();
        }
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let e = list + i * l.driver_entry_size;
            let name_off = file.u32_at(e).unwrap_or(0) as usize;
            let ldr = e + l.ldr;
            let base = if l.top_of_stack_wide {
                file.u64_at(ldr + l.ldr_dll_base).unwrap_or(0)
            } else {
                u64::from(file.u32_at(ldr + l.ldr_dll_base).unwrap_or(0))
            };
            let name = match file.u32_at(name_off) {
                Some(n) if n <= MAX_NAME_CHARS => file
                    .bytes_at(name_off + 4, n as usize * 2)
                    .map(Untrusted::from_utf16le_z),
                _ => None,
            };
            let name = name.unwrap_or_else(|| {
                warnings.push(Warning::new(
                    WarningKind::Anomaly,
                    format!("driver {i}: name at file offset {name_off:#x} is unreadable"),
                ));
                Untrusted::default()
            });
            out.push(TriageDriver {
                name,
                base,
                size: file.u32_at(ldr + l.ldr_size_of_image).unwrap_or(0),
                time_date_stamp: file.u32_at(ldr + l.ldr_time_date_stamp).unwrap_or(0),
            });
        }
        out
    }

    /// The segment holding `va`, if any.
    pub fn segment(&self, va: u64) -> Option<&Segment> {
        let i = self
            .segments
            .partition_point(|s| s.va <= va)
            .checked_sub(1)?;
        let s = &self.segments[i];
        (va - s.va < s.len).then_some(s)
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

impl super::Container for Triage {
    /// A triage dump holds no physical pages.
    fn page_offset(&self, _file: &[u8], _pfn: crate::addr::Pfn) -> Option<u64> {
        None
    }

    fn physical_runs(&self, _file: &[u8]) -> Vec<(u64, u64)> {
        Vec::new()
    }

    fn stored_pages(&self) -> u64 {
        0
    }

    fn storage(&self) -> super::Storage {
        super::Storage {
            kind: "virtual blocks (triage)",
            ..Default::default()
        }
    }

    fn has_physical_memory(&self) -> bool {
        false
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// DumpType 4: a triage dump, virtually addressed blocks after the TRIAGE_DUMP header.
pub(crate) const TRIAGE_DUMP: Format = Format {
    name: "triage crash dump",
    probe: |i| i.dump_type() == Some(super::DumpType::TRIAGE),
    open: |input| {
        let header = format::dump_header(&input)?;
        let t = Triage::parse(input.bytes(), &header, input.opts.allow_truncated)?;
        let warnings = t.warnings.clone();
        format::crash_dump(input, header, Box::new(t), Some(0), String::new(), warnings)
    },
};

/// A triage dump's memory and saved data in its own terms (issue 28 step 2: nothing above
/// the containers reads a file offset): the bytes behind a virtual address, a data block's
/// bytes, the crashing CPU's saved KPRCB, the secondary data and a blob's data.
#[derive(Clone, Copy, Debug)]
pub struct TriageView<'d> {
    triage: &'d Triage,
    file: &'d [u8],
}

impl<'d> TriageView<'d> {
    pub(super) fn new(triage: &'d Triage, file: &'d [u8]) -> TriageView<'d> {
        TriageView { triage, file }
    }

    /// The parsed triage dump.
    pub fn triage(&self) -> &'d Triage {
        self.triage
    }

    /// The bytes stored contiguously from virtual address `va` (one segment), at most
    /// `len`; None when no segment holds `va`.
    pub fn bytes_at(&self, va: u64, len: usize) -> Option<&'d [u8]> {
        let s = self.triage.segment(va)?;
        let skip = va - s.va;
        let n = usize::try_from(s.len - skip).unwrap_or(usize::MAX).min(len);
        self.at(s.file_offset.checked_add(skip)?, n)
    }

    /// A data block's bytes (None when it runs past the end of the file).
    pub fn block(&self, b: &DataBlock) -> Option<&'d [u8]> {
        self.at(b.file_offset, b.size as usize)
    }

    /// Whether the dump saved the crashing CPU's KPRCB (TRIAGE_DUMP.PrcbOffset is set).
    pub(crate) fn has_saved_prcb(&self) -> bool {
        self.triage.prcb_offset != 0
    }

    /// `len` bytes at `offset` into the crashing CPU's saved KPRCB (None: not saved, or past
    /// the end of the file).
    pub(crate) fn saved_prcb(&self, offset: u64, len: usize) -> Option<&'d [u8]> {
        if !self.has_saved_prcb() {
            return None;
        }
        self.at(u64::from(self.triage.prcb_offset).checked_add(offset)?, len)
    }

    /// The secondary data after SizeOfDump (its blobs; empty when there is none).
    pub fn secondary_data(&self) -> super::SecondaryData {
        super::SecondaryData::parse(self.file, u64::from(self.triage.size_of_dump))
    }

    /// A blob's data (None when it runs past the end of the file).
    pub fn blob(&self, b: &super::Blob) -> Option<&'d [u8]> {
        self.at(b.data_offset, b.data_size as usize)
    }

    fn at(&self, offset: u64, len: usize) -> Option<&'d [u8]> {
        self.file.bytes_at(usize::try_from(offset).ok()?, len)
    }
}
