//! The kernel's in-memory PE image: headers and the CodeView (RSDS) debug record that names
//! its PDB. Parsing uses goblin on the pages actually present; only the header page, the
//! debug directory and the record itself are read (crash-dump-format.md §1.4 "PDB match").

use crate::addr::VirtAddr;
use crate::mem::{AddressSpace, MemError};
use crate::symbols::PdbIdentity;
use goblin::pe::debug::{CodeviewPDB70DebugInfo, ImageDebugDirectory, IMAGE_DEBUG_TYPE_CODEVIEW};
use serde::Serialize;
use std::fmt;

const HEADER_PAGE: usize = 0x1000;
const DEBUG_ENTRY_SIZE: u32 = 28;
/// More debug-directory entries than this is not a real image.
const MAX_DEBUG_ENTRIES: u32 = 64;
/// Longest RSDS record accepted (24 bytes + a path of at most 1 KiB).
const MAX_RSDS: u32 = 24 + 1024;

/// Facts from the PE headers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeHeaders {
    pub machine: u16,
    pub time_date_stamp: u32,
    pub size_of_image: u32,
    pub number_of_sections: u16,
    pub image_base: u64,
    /// OptionalHeader.CheckSum.
    pub check_sum: u32,
}

/// Why the PDB identity could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PdbIdError {
    HeaderUnreadable(MemError),
    BadHeader(String),
    NoDebugDirectory,
    DebugDirectoryUnreadable(MemError),
    NoCodeView,
    RecordUnreadable(MemError),
    BadRecord(String),
}

impl fmt::Display for PdbIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PdbIdError::HeaderUnreadable(e) => write!(f, "PE header not in the dump ({e})"),
            PdbIdError::BadHeader(s) => write!(f, "PE header is invalid: {s}"),
            PdbIdError::NoDebugDirectory => f.write_str("the image has no debug directory"),
            PdbIdError::DebugDirectoryUnreadable(e) => {
                write!(f, "debug directory not in the dump ({e})")
            }
            PdbIdError::NoCodeView => f.write_str("no CodeView entry in the debug directory"),
            PdbIdError::RecordUnreadable(e) => write!(f, "CodeView record not in the dump ({e})"),
            PdbIdError::BadRecord(s) => write!(f, "CodeView record is invalid: {s}"),
        }
    }
}

/// The kernel image as far as it could be read.
#[derive(Clone, Debug)]
pub struct KernelImage {
    pub base: VirtAddr,
    pub headers: Result<PeHeaders, PdbIdError>,
    pub pdb: Result<PdbIdentity, PdbIdError>,
}

impl KernelImage {
    /// The kernel image at `base`: its PE headers and CodeView (PDB) identity, each or why not
    /// (a triage dump may hold less than a page of the header).
    pub fn read(space: &AddressSpace<'_>, base: VirtAddr) -> KernelImage {
        // Triage dumps may hold less than a page of the header (the real ARM64 one: 256
        // bytes); parse what is there.
        let mut page = vec![0u8; HEADER_PAGE];
        let have = space.read_prefix(base, &mut page);
        if have == 0 {
            let e = space
                .read(base, &mut page[..1])
                .err()
                .unwrap_or(MemError::NotInTriage { va: base });
            let err = PdbIdError::HeaderUnreadable(e);
            return KernelImage {
                base,
                headers: Err(err.clone()),
                pdb: Err(err),
            };
        }
        page.truncate(have);
        let header = match goblin::pe::header::Header::parse(&page) {
            Ok(h) => h,
            Err(e) => {
                let err = if have < HEADER_PAGE {
                    PdbIdError::BadHeader(format!(
                        "only {have:#x} bytes of it are in the dump ({e})"
                    ))
                } else {
                    PdbIdError::BadHeader(e.to_string())
                };
                return KernelImage {
                    base,
                    headers: Err(err.clone()),
                    pdb: Err(err),
                };
            }
        };
        let opt = header.optional_header;
        let headers = Ok(PeHeaders {
            machine: header.coff_header.machine,
            time_date_stamp: header.coff_header.time_date_stamp,
            size_of_image: opt.map_or(0, |o| o.windows_fields.size_of_image),
            number_of_sections: header.coff_header.number_of_sections,
            image_base: opt.map_or(0, |o| o.windows_fields.image_base),
            check_sum: opt.map_or(0, |o| o.windows_fields.check_sum),
        });
        let debug = opt.and_then(|o| o.data_directories.get_debug_table().copied());
        let pdb = match debug {
            Some(d) if d.virtual_address != 0 && d.size != 0 => {
                read_codeview(space, base, d.virtual_address, d.size)
            }
            _ => Err(PdbIdError::NoDebugDirectory),
        };
        KernelImage { base, headers, pdb }
    }
}

fn read_codeview(
    space: &AddressSpace<'_>,
    base: VirtAddr,
    rva: u32,
    size: u32,
) -> Result<PdbIdentity, PdbIdError> {
    let count = (size / DEBUG_ENTRY_SIZE).min(MAX_DEBUG_ENTRIES);
    let mut dir = vec![0u8; (count * DEBUG_ENTRY_SIZE) as usize];
    space
        .read(base.offset(u64::from(rva)), &mut dir)
        .map_err(PdbIdError::DebugDirectoryUnreadable)?;
    let entry = dir
        .chunks_exact(DEBUG_ENTRY_SIZE as usize)
        .map(parse_debug_entry)
        .find(|e| e.data_type == IMAGE_DEBUG_TYPE_CODEVIEW)
        .ok_or(PdbIdError::NoCodeView)?;
    if entry.size_of_data < 24 || entry.size_of_data > MAX_RSDS {
        return Err(PdbIdError::BadRecord(format!(
            "SizeOfData {:#x} is not a plausible RSDS record size",
            entry.size_of_data
        )));
    }
    // In a mapped image the record is at AddressOfRawData (an RVA), not PointerToRawData.
    let mut record = vec![0u8; entry.size_of_data as usize];
    space
        .read(
            base.offset(u64::from(entry.address_of_raw_data)),
            &mut record,
        )
        .map_err(PdbIdError::RecordUnreadable)?;
    // Hand goblin the record alone: an entry describing it at offset 0.
    let local = ImageDebugDirectory {
        address_of_raw_data: 0,
        pointer_to_raw_data: 0,
        ..entry
    };
    let cv = CodeviewPDB70DebugInfo::parse(&record, &local)
        .map_err(|e| PdbIdError::BadRecord(e.to_string()))?
        .ok_or_else(|| PdbIdError::BadRecord("signature is not RSDS".into()))?;
    let name_end = cv
        .filename
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(cv.filename.len());
    let name = crate::text::Untrusted::from_utf8_lossy(&cv.filename[..name_end]);
    Ok(PdbIdentity::from_guid_bytes(
        name,
        &cv.signature,
        cv.age,
        false,
    ))
}

fn parse_debug_entry(b: &[u8]) -> ImageDebugDirectory {
    use crate::bytes::LeBytes;
    let u32_ = |o| b.u32_at(o).unwrap_or(0);
    let u16_ = |o| b.u16_at(o).unwrap_or(0);
    ImageDebugDirectory {
        characteristics: u32_(0),
        time_date_stamp: u32_(4),
        major_version: u16_(8),
        minor_version: u16_(10),
        data_type: u32_(12),
        size_of_data: u32_(16),
        address_of_raw_data: u32_(20),
        pointer_to_raw_data: u32_(24),
    }
}
