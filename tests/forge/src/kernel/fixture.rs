//! Fixture kernels (`tests/fixtures/<name>/`): a tiny real PE32+/PE32 `ntoskrnl.exe` built with
//! clang + lld-link, its PDB with real type layouts, and `symbols.json` (PDB GUID/age/name, arch,
//! build, image size, timestamp, sections and the RVA of every public). See
//! tests/fixtures/README.md.
//!
//! The forge reads `symbols.json` and `ntoskrnl.exe` itself (no etwdump code, no PDB parsing)
//! and cross-checks them: sections, SizeOfImage, timestamp, entry point, and the RSDS record
//! against the PDB GUID/age/name of `symbols.json`. [`Fixture::mapped_pages`] then "loads" the
//! image at a new base the way the Windows loader does: headers and every section at its RVA,
//! base relocations applied (DIR64 on x64, HIGHLOW on x86) and OptionalHeader.ImageBase set to
//! the new base.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{align_up, get_u32, get_u64, guid_from_str, guid_to_string};

/// A PE section of the fixture image (as in its section table and in symbols.json).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureSection {
    pub name: String,
    pub rva: u32,
    pub virtual_size: u32,
    pub raw_offset: u32,
    pub raw_size: u32,
    pub characteristics: u32,
}

impl FixtureSection {
    /// Bytes the section occupies in memory: VirtualSize (or SizeOfRawData when that is 0)
    /// rounded up to whole pages.
    pub fn mapped_size(&self) -> u32 {
        let size = if self.virtual_size == 0 {
            self.raw_size
        } else {
            self.virtual_size
        };
        align_up(u64::from(size), 0x1000) as u32
    }

    pub fn contains(&self, rva: u32) -> bool {
        rva >= self.rva && rva < self.rva + self.mapped_size()
    }
}

/// A base relocation of the fixture image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    pub rva: u32,
    /// IMAGE_REL_BASED_HIGHLOW (3) or IMAGE_REL_BASED_DIR64 (10).
    pub kind: u8,
}

/// Why a fixture could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureError(pub String);

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FixtureError {}

fn err<T>(msg: impl Into<String>) -> Result<T, FixtureError> {
    Err(FixtureError(msg.into()))
}

/// Forge-placed kernel variables that the fixture does not define (it has no publics for them):
/// they go into the slack of the section holding KdDebuggerDataBlock (.data), after its
/// VirtualSize and inside its last page, so they are mapped and inside the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixtureExtras {
    /// KdpDebuggerDataListHead (LIST_ENTRY, 16 bytes): KDBG.Header.List and
    /// KdVersionBlock.DebuggerDataList point here.
    pub kdp_debugger_data_list_head: u32,
    /// MmPfnDatabase (pointer): KDBG.MmPfnDatabase and the header's PfnDataBase point here.
    pub mm_pfn_database: u32,
    /// CmNtCSDVersion (ULONG, 0): KDBG.CmNtCSDVersion points here (volatility's windows.info
    /// dereferences it).
    pub cm_nt_csd_version: u32,
}

/// The kernel variables the forge fills in and must find among the fixture's publics.
pub(crate) const REQUIRED_SYMBOLS: &[&str] = &[
    "KdDebuggerDataBlock",
    "KdVersionBlock",
    "KeNumberProcessors",
    "KiProcessorBlock",
    "NtBuildLabEx",
    "PsActiveProcessHead",
    "PsLoadedModuleList",
    "EtwpDebuggerData",
];

/// A fixture kernel, loaded and cross-checked. Cheap to clone (about 10 KB of PE bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct Fixture {
    /// Directory name, e.g. "x64-19041".
    pub name: String,
    pub dir: PathBuf,
    pub x64: bool,
    pub build: u32,
    /// PDB name, GUID (on-disk byte order, as in the RSDS record) and age, from symbols.json
    /// (checked against the PE's RSDS record).
    pub pdb_name: String,
    pub pdb_guid: [u8; 16],
    pub pdb_age: u32,
    /// OptionalHeader.ImageBase of the file (0x140000000 / 0x400000).
    pub image_base: u64,
    pub size_of_image: u32,
    pub size_of_headers: u32,
    pub timestamp: u32,
    pub entry_rva: u32,
    pub sections: Vec<FixtureSection>,
    /// Undecorated public name -> RVA (symbols.json "symbols"; x86 "publics" carry a leading
    /// underscore, checked to agree).
    pub symbols: BTreeMap<String, u32>,
    /// `DataDirectory[DEBUG]` (RVA, size).
    pub debug_dir: (u32, u32),
    /// The CodeView entry's AddressOfRawData and SizeOfData.
    pub rsds_rva: u32,
    pub rsds_len: u32,
    pub relocations: Vec<Relocation>,
    /// symbols.json "nt_build_lab" if given, else the string stored at NtBuildLabEx in the
    /// image; None if neither exists (the forge then uses its own).
    pub nt_build_lab: Option<String>,
    /// sizeof(_KPRCB): symbols.json "type_sizes"."_KPRCB" or "kprcb_size" if given, else the
    /// `_Static_assert(sizeof(struct _KPRCB) == ...)` of the fixture's types.h; None if neither
    /// exists (the KPRCBs then stay unmapped).
    pub kprcb_size: Option<u32>,
    /// The PE file.
    pub pe: Vec<u8>,
}

impl fmt::Debug for Fixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fixture")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("x64", &self.x64)
            .field("build", &self.build)
            .field("pdb_name", &self.pdb_name)
            .field("pdb_guid", &guid_to_string(&self.pdb_guid))
            .field("pdb_age", &self.pdb_age)
            .field("size_of_image", &format_args!("{:#x}", self.size_of_image))
            .field("symbols", &self.symbols.len())
            .finish_non_exhaustive()
    }
}

/// "0x1a2b" (or a JSON number) -> u64.
fn hex_value(v: &Value, what: &str) -> Result<u64, FixtureError> {
    match v {
        Value::String(s) => {
            let t = s.trim();
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse::<u64>(),
            };
            parsed.or_else(|_| err(format!("{what}: bad number {s:?}")))
        }
        Value::Number(n) => n
            .as_u64()
            .map_or_else(|| err(format!("{what}: bad number {n}")), Ok),
        _ => err(format!("{what}: missing or not a number")),
    }
}

fn hex_u32(v: &Value, what: &str) -> Result<u32, FixtureError> {
    let x = hex_value(v, what)?;
    u32::try_from(x).or_else(|_| err(format!("{what}: {x:#x} does not fit 32 bits")))
}

fn read_u16(b: &[u8], off: usize) -> Result<u16, FixtureError> {
    b.get(off..off + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .map_or_else(|| err(format!("PE truncated at {off:#x}")), Ok)
}

fn read_u32(b: &[u8], off: usize) -> Result<u32, FixtureError> {
    b.get(off..off + 4)
        .map(|s| get_u32(s, 0))
        .map_or_else(|| err(format!("PE truncated at {off:#x}")), Ok)
}

fn read_u64(b: &[u8], off: usize) -> Result<u64, FixtureError> {
    b.get(off..off + 8)
        .map(|s| get_u64(s, 0))
        .map_or_else(|| err(format!("PE truncated at {off:#x}")), Ok)
}

/// What the forge reads from the PE headers.
struct PeInfo {
    x64: bool,
    timestamp: u32,
    entry_rva: u32,
    image_base: u64,
    size_of_image: u32,
    size_of_headers: u32,
    /// Offset of OptionalHeader.ImageBase in the headers.
    image_base_off: usize,
    dirs: Vec<(u32, u32)>,
    sections: Vec<FixtureSection>,
}

fn parse_pe(pe: &[u8]) -> Result<PeInfo, FixtureError> {
    if pe.get(..2) != Some(b"MZ") {
        return err("ntoskrnl.exe: no MZ header");
    }
    let lfanew = read_u32(pe, 0x3C)? as usize;
    if pe.get(lfanew..lfanew + 4) != Some(b"PE\0\0") {
        return err("ntoskrnl.exe: no PE signature");
    }
    let coff = lfanew + 4;
    let machine = read_u16(pe, coff)?;
    let nsec = read_u16(pe, coff + 2)? as usize;
    let timestamp = read_u32(pe, coff + 4)?;
    let opt_size = read_u16(pe, coff + 16)? as usize;
    let opt = coff + 20;
    let magic = read_u16(pe, opt)?;
    let x64 = match (machine, magic) {
        (0x8664, 0x20B) => true,
        (0x014C, 0x10B) => false,
        _ => {
            return err(format!(
                "ntoskrnl.exe: machine {machine:#x} / magic {magic:#x}"
            ))
        }
    };
    let entry_rva = read_u32(pe, opt + 16)?;
    let (image_base, image_base_off) = if x64 {
        (read_u64(pe, opt + 24)?, opt + 24)
    } else {
        (u64::from(read_u32(pe, opt + 28)?), opt + 28)
    };
    let section_alignment = read_u32(pe, opt + 32)?;
    if section_alignment != 0x1000 {
        return err(format!(
            "ntoskrnl.exe: SectionAlignment {section_alignment:#x}, the forge maps 4 KiB pages"
        ));
    }
    let size_of_image = read_u32(pe, opt + 56)?;
    let size_of_headers = read_u32(pe, opt + 60)?;
    let (ndirs_off, dirs_off) = if x64 {
        (opt + 108, opt + 112)
    } else {
        (opt + 92, opt + 96)
    };
    let ndirs = read_u32(pe, ndirs_off)?.min(16) as usize;
    let mut dirs = Vec::with_capacity(ndirs);
    for i in 0..ndirs {
        dirs.push((
            read_u32(pe, dirs_off + 8 * i)?,
            read_u32(pe, dirs_off + 8 * i + 4)?,
        ));
    }
    let sec_at = opt + opt_size;
    let mut sections = Vec::with_capacity(nsec);
    for i in 0..nsec {
        let o = sec_at + 40 * i;
        let raw_name = pe
            .get(o..o + 8)
            .map_or_else(|| err("ntoskrnl.exe: section table truncated"), Ok)?;
        let name: String = raw_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as char)
            .collect();
        sections.push(FixtureSection {
            name,
            virtual_size: read_u32(pe, o + 8)?,
            rva: read_u32(pe, o + 12)?,
            raw_size: read_u32(pe, o + 16)?,
            raw_offset: read_u32(pe, o + 20)?,
            characteristics: read_u32(pe, o + 36)?,
        });
    }
    if size_of_headers as u64 > 0x1000 || size_of_headers as usize > pe.len() {
        return err(format!(
            "ntoskrnl.exe: SizeOfHeaders {size_of_headers:#x} (the forge maps one header page)"
        ));
    }
    Ok(PeInfo {
        x64,
        timestamp,
        entry_rva,
        image_base,
        size_of_image,
        size_of_headers,
        image_base_off,
        dirs,
        sections,
    })
}

/// File offset of `rva` (inside a section's raw data).
fn file_offset(sections: &[FixtureSection], rva: u32, len: u32) -> Result<usize, FixtureError> {
    for s in sections {
        if rva >= s.rva && rva + len <= s.rva + s.raw_size.min(s.mapped_size()) {
            return Ok((s.raw_offset + (rva - s.rva)) as usize);
        }
    }
    err(format!("RVA {rva:#x}+{len:#x} is not file-backed"))
}

fn parse_relocations(
    pe: &[u8],
    sections: &[FixtureSection],
    dir: (u32, u32),
    x64: bool,
) -> Result<Vec<Relocation>, FixtureError> {
    let (rva, size) = dir;
    let mut out = Vec::new();
    if size == 0 {
        return Ok(out);
    }
    let base = file_offset(sections, rva, size)?;
    let mut off = 0usize;
    while off + 8 <= size as usize {
        let page = read_u32(pe, base + off)?;
        let block = read_u32(pe, base + off + 4)? as usize;
        if block < 8 || off + block > size as usize {
            return err(format!(
                "bad base relocation block at {:#x}",
                rva as usize + off
            ));
        }
        for i in 0..(block - 8) / 2 {
            let e = read_u16(pe, base + off + 8 + 2 * i)?;
            let kind = (e >> 12) as u8;
            let at = page + u32::from(e & 0xFFF);
            match (kind, x64) {
                (0, _) => {} // IMAGE_REL_BASED_ABSOLUTE: padding
                (10, true) | (3, _) => out.push(Relocation { rva: at, kind }),
                _ => {
                    return err(format!(
                        "unsupported base relocation type {kind} at {at:#x}"
                    ))
                }
            }
        }
        off += block;
    }
    Ok(out)
}

/// `_Static_assert(sizeof(struct _KPRCB) == 0xaf00, ...)` in types.h.
fn kprcb_size_from_types_h(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("types.h")).ok()?;
    let key = "sizeof(struct _KPRCB) ==";
    let at = text.find(key)? + key.len();
    let rest = text[at..].trim_start();
    let end = rest.find(|c: char| !c.is_ascii_alphanumeric())?;
    let num = &rest[..end];
    match num.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => num.parse().ok(),
    }
}

/// symbols.json's PDB: (name, GUID as on-disk bytes, age).
fn pdb_identity(j: &Value) -> Result<(String, [u8; 16], u32), FixtureError> {
    let pdb = &j["pdb"];
    let pdb_name = pdb["name"]
        .as_str()
        .map_or_else(|| err("pdb.name missing"), Ok)?
        .to_string();
    let guid_str = pdb["guid"]
        .as_str()
        .map_or_else(|| err("pdb.guid missing"), Ok)?;
    let hex_digits = guid_str.chars().filter(char::is_ascii_hexdigit).count();
    if hex_digits != 32 {
        return err(format!("pdb.guid {guid_str:?} is not a GUID"));
    }
    let pdb_guid = guid_from_str(guid_str);
    let pdb_age = hex_u32(&pdb["age"], "pdb.age")?;
    Ok((pdb_name, pdb_guid, pdb_age))
}

/// symbols.json must describe this very image: SizeOfImage, timestamp, entry point and the
/// section table.
fn check_image_matches(j: &Value, info: &PeInfo) -> Result<(), FixtureError> {
    let size = hex_u32(&j["image_size"], "image_size")?;
    if size != info.size_of_image {
        return err(format!(
            "image_size {size:#x} != SizeOfImage {:#x}",
            info.size_of_image
        ));
    }
    let ts = hex_u32(&j["timestamp"], "timestamp")?;
    if ts != info.timestamp {
        return err(format!("timestamp {ts:#x} != PE {:#x}", info.timestamp));
    }
    let entry = hex_u32(&j["entry_rva"], "entry_rva")?;
    if entry != info.entry_rva {
        return err(format!("entry_rva {entry:#x} != PE {:#x}", info.entry_rva));
    }
    let json_sections = j["sections"]
        .as_array()
        .map_or_else(|| err("sections missing"), Ok)?;
    if json_sections.len() != info.sections.len() {
        return err("symbols.json sections differ from the PE section table");
    }
    for (js, s) in json_sections.iter().zip(&info.sections) {
        let same = js["name"].as_str() == Some(s.name.as_str())
            && hex_u32(&js["rva"], "section rva")? == s.rva
            && hex_u32(&js["virtual_size"], "section virtual_size")? == s.virtual_size
            && hex_u32(&js["raw_offset"], "section raw_offset")? == s.raw_offset
            && hex_u32(&js["raw_size"], "section raw_size")? == s.raw_size
            && hex_u32(&js["characteristics"], "section characteristics")? == s.characteristics;
        if !same {
            return err(format!(
                "section {} differs from the PE section table",
                s.name
            ));
        }
        if s.rva % 0x1000 != 0
            || s.rva + s.mapped_size() > align_up(u64::from(info.size_of_image), 0x1000) as u32
        {
            return err(format!(
                "section {} is not page aligned inside the image",
                s.name
            ));
        }
    }
    Ok(())
}

/// Symbols: "symbols" (undecorated) and "publics" (x86: leading underscore) must agree; every
/// required public present, every symbol inside a section.
fn read_symbols(
    j: &Value,
    x64: bool,
    info: &PeInfo,
) -> Result<BTreeMap<String, u32>, FixtureError> {
    let mut symbols = BTreeMap::new();
    if let Some(m) = j["symbols"].as_object() {
        for (k, v) in m {
            symbols.insert(k.clone(), hex_u32(v, k)?);
        }
    }
    if let Some(m) = j["publics"].as_object() {
        for (k, v) in m {
            let rva = hex_u32(v, k)?;
            let plain = if x64 {
                k.as_str()
            } else {
                k.strip_prefix('_').unwrap_or(k)
            };
            match symbols.get(plain) {
                Some(&r) if r != rva => {
                    return err(format!(
                        "public {k} at {rva:#x} but symbol {plain} at {r:#x}"
                    ))
                }
                Some(_) => {}
                None => {
                    symbols.insert(plain.to_string(), rva);
                }
            }
        }
    }
    for req in REQUIRED_SYMBOLS {
        if !symbols.contains_key(*req) {
            return err(format!("no public {req}"));
        }
    }
    for (k, &rva) in &symbols {
        if !info.sections.iter().any(|s| s.contains(rva)) {
            return err(format!("symbol {k} at {rva:#x} lies in no section"));
        }
    }
    Ok(symbols)
}

/// Debug directory -> CodeView -> RSDS, compared with the PDB of symbols.json. Returns the
/// debug directory (RVA, size) and the RSDS record's RVA and length.
fn check_rsds(
    pe: &[u8],
    info: &PeInfo,
    pdb_name: &str,
    pdb_guid: &[u8; 16],
    pdb_age: u32,
) -> Result<((u32, u32), u32, u32), FixtureError> {
    let debug_dir = *info.dirs.get(6).unwrap_or(&(0, 0));
    if debug_dir.1 == 0 || !debug_dir.1.is_multiple_of(28) {
        return err("no debug directory");
    }
    let dd = file_offset(&info.sections, debug_dir.0, debug_dir.1)?;
    let mut rsds = None;
    for i in 0..(debug_dir.1 / 28) as usize {
        let e = dd + 28 * i;
        if read_u32(pe, e + 12)? == 2 {
            rsds = Some((
                read_u32(pe, e + 20)?,
                read_u32(pe, e + 16)?,
                read_u32(pe, e + 24)?,
            ));
        }
    }
    let Some((rsds_rva, rsds_len, rsds_ptr)) = rsds else {
        return err("no CodeView debug entry");
    };
    let r = pe
        .get(rsds_ptr as usize..(rsds_ptr + rsds_len) as usize)
        .map_or_else(|| err("RSDS record outside the file"), Ok)?;
    if rsds_len < 25 || &r[..4] != b"RSDS" {
        return err("CodeView entry is not RSDS");
    }
    let rsds_name: Vec<u8> = r[24..].iter().copied().take_while(|&c| c != 0).collect();
    if r[4..20] != *pdb_guid || get_u32(r, 20) != pdb_age || rsds_name != pdb_name.as_bytes() {
        return err(format!(
            "RSDS {} {} {} differs from symbols.json {} {} {}",
            guid_to_string(r[4..20].try_into().expect("16")),
            get_u32(r, 20),
            String::from_utf8_lossy(&rsds_name),
            guid_to_string(pdb_guid),
            pdb_age,
            pdb_name
        ));
    }
    // The in-memory copy (by RVA) must be the same bytes as the file copy.
    if file_offset(&info.sections, rsds_rva, rsds_len)? != rsds_ptr as usize {
        return err("CodeView AddressOfRawData and PointerToRawData disagree");
    }
    Ok((debug_dir, rsds_rva, rsds_len))
}

/// symbols.json's `nt_build_lab`, else the printable string at NtBuildLabEx in the image.
fn nt_build_lab(
    j: &Value,
    pe: &[u8],
    info: &PeInfo,
    symbols: &BTreeMap<String, u32>,
) -> Result<Option<String>, FixtureError> {
    Ok(match j.get("nt_build_lab").and_then(Value::as_str) {
        Some(s) => Some(s.to_string()),
        None => {
            let rva = symbols["NtBuildLabEx"];
            let off = file_offset(&info.sections, rva, 1)?;
            let s: Vec<u8> = pe[off..].iter().copied().take_while(|&c| c != 0).collect();
            (!s.is_empty() && s.iter().all(|c| c.is_ascii_graphic()))
                .then(|| String::from_utf8_lossy(&s).into_owned())
        }
    })
}

impl Fixture {
    /// Load `<dir>/symbols.json` and `<dir>/ntoskrnl.exe` and cross-check them.
    pub fn load(dir: &Path) -> Result<Fixture, FixtureError> {
        let ctx = |e: &dyn fmt::Display, what: &str| {
            FixtureError(format!("{}: {what}: {e}", dir.display()))
        };
        let json_text = std::fs::read_to_string(dir.join("symbols.json"))
            .map_err(|e| ctx(&e, "symbols.json"))?;
        let j: Value = serde_json::from_str(&json_text).map_err(|e| ctx(&e, "symbols.json"))?;
        let pe = std::fs::read(dir.join("ntoskrnl.exe")).map_err(|e| ctx(&e, "ntoskrnl.exe"))?;
        Self::from_parts(dir, &j, pe).map_err(|e| ctx(&e, "fixture"))
    }

    fn from_parts(dir: &Path, j: &Value, pe: Vec<u8>) -> Result<Fixture, FixtureError> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (pdb_name, pdb_guid, pdb_age) = pdb_identity(j)?;
        let x64 = match j["arch"].as_str() {
            Some("x64") => true,
            Some("x86") => false,
            other => return err(format!("arch {other:?}")),
        };
        let build = hex_u32(&j["build"], "build")?;

        let info = parse_pe(&pe)?;
        if info.x64 != x64 {
            return err("symbols.json arch differs from the PE machine");
        }
        check_image_matches(j, &info)?;
        let symbols = read_symbols(j, x64, &info)?;
        let (debug_dir, rsds_rva, rsds_len) =
            check_rsds(&pe, &info, &pdb_name, &pdb_guid, pdb_age)?;
        let relocations = parse_relocations(
            &pe,
            &info.sections,
            *info.dirs.get(5).unwrap_or(&(0, 0)),
            x64,
        )?;
        let nt_build_lab = nt_build_lab(j, &pe, &info, &symbols)?;
        let kprcb_size = match j
            .get("type_sizes")
            .and_then(|t| t.get("_KPRCB"))
            .or_else(|| j.get("kprcb_size"))
        {
            Some(v) => Some(hex_u32(v, "_KPRCB size")?),
            None => kprcb_size_from_types_h(dir),
        };

        Ok(Fixture {
            name,
            dir: dir.to_path_buf(),
            x64,
            build,
            pdb_name,
            pdb_guid,
            pdb_age,
            image_base: info.image_base,
            size_of_image: info.size_of_image,
            size_of_headers: info.size_of_headers,
            timestamp: info.timestamp,
            entry_rva: info.entry_rva,
            sections: info.sections,
            symbols,
            debug_dir,
            rsds_rva,
            rsds_len,
            relocations,
            nt_build_lab,
            kprcb_size,
            pe,
        })
    }

    /// RVA of the public `name` (undecorated).
    pub fn symbol(&self, name: &str) -> Option<u32> {
        self.symbols.get(name).copied()
    }

    /// The section holding `rva`.
    pub fn section_of(&self, rva: u32) -> Option<&FixtureSection> {
        self.sections.iter().find(|s| s.contains(rva))
    }

    /// Bytes available at the public `name`: up to the next public in the same section, or to
    /// the end of the section's VirtualSize.
    pub fn storage_len(&self, name: &str) -> Option<u32> {
        let rva = self.symbol(name)?;
        let s = self.section_of(rva)?;
        let end = self
            .symbols
            .values()
            .copied()
            .filter(|&r| r > rva && s.contains(r))
            .min()
            .unwrap_or(
                s.rva
                    + if s.virtual_size == 0 {
                        s.raw_size
                    } else {
                        s.virtual_size
                    },
            );
        Some(end - rva)
    }

    /// Where the forge puts the variables the fixture lacks (see [`FixtureExtras`]).
    pub fn extras(&self) -> Result<FixtureExtras, FixtureError> {
        let kdbg = self.symbols["KdDebuggerDataBlock"];
        let s = self
            .section_of(kdbg)
            .map_or_else(|| err("KdDebuggerDataBlock in no section"), Ok)?;
        let start = align_up(u64::from(s.rva + s.virtual_size), 16) as u32;
        let end = s.rva + s.mapped_size();
        if start + 0x20 > end {
            return err(format!(
                "no slack after section {} for the forge's variables",
                s.name
            ));
        }
        Ok(FixtureExtras {
            kdp_debugger_data_list_head: start,
            mm_pfn_database: start + 0x10,
            cm_nt_csd_version: start + 0x18,
        })
    }

    /// The image as loaded at `base`: page-aligned RVA -> 4 KiB page, for the header page and
    /// every page of every section (zero-filled beyond the raw data), with the base
    /// relocations applied for `base` and OptionalHeader.ImageBase = `base`.
    pub fn mapped_pages(&self, base: u64) -> BTreeMap<u32, Vec<u8>> {
        let info = parse_pe(&self.pe).expect("checked by load");
        let mut img = PageMap::default();
        img.write(0, &self.pe[..self.size_of_headers as usize]);
        for s in &self.sections {
            // Every page of the section exists (zero-filled beyond the raw data).
            for page in (s.rva..s.rva + s.mapped_size()).step_by(0x1000) {
                img.page(page);
            }
            let start = s.raw_offset as usize;
            let end = (start + s.raw_size.min(s.mapped_size()) as usize).min(self.pe.len());
            img.write(s.rva, &self.pe[start..end]);
        }
        // OptionalHeader.ImageBase as the loader leaves it in memory.
        if self.x64 {
            img.write(info.image_base_off as u32, &base.to_le_bytes());
        } else {
            let b = u32::try_from(base).expect("32-bit base");
            img.write(info.image_base_off as u32, &b.to_le_bytes());
        }
        let delta = base.wrapping_sub(self.image_base);
        for r in &self.relocations {
            if r.kind == 10 {
                let old = get_u64(&img.read(r.rva, 8), 0);
                img.write(r.rva, &old.wrapping_add(delta).to_le_bytes());
            } else {
                let old = get_u32(&img.read(r.rva, 4), 0);
                img.write(r.rva, &old.wrapping_add(delta as u32).to_le_bytes());
            }
        }
        img.0
    }
}

/// Image pages by page-aligned RVA, created zero-filled on first use.
#[derive(Default)]
struct PageMap(BTreeMap<u32, Vec<u8>>);

impl PageMap {
    fn page(&mut self, rva: u32) -> &mut Vec<u8> {
        self.0
            .entry(rva & !0xFFF)
            .or_insert_with(|| vec![0u8; 0x1000])
    }

    fn write(&mut self, rva: u32, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = rva + i as u32;
            self.page(at)[(at & 0xFFF) as usize] = b;
        }
    }

    fn read(&mut self, rva: u32, len: u32) -> Vec<u8> {
        (rva..rva + len)
            .map(|at| self.page(at)[(at & 0xFFF) as usize])
            .collect()
    }
}

/// The fixture directories below `root` (those with a symbols.json), sorted by name.
pub fn fixture_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("symbols.json").is_file() && p.join("ntoskrnl.exe").is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `<repo>/tests/fixtures`, found from this crate's manifest directory.
pub fn default_fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}
