//! Reading layouts and global symbols from a PDB, without a PDB library (issue 30 item 4).
//!
//! The file is mapped (not read into a buffer) and its MSF container checked
//! (`msf::check`, then `msf::Streams`); a stream whose blocks are consecutive,
//! as linkers write them, is used where it lies in the mapping, any other is copied block by
//! block. Then, from the mapped bytes:
//!
//! * identity and machine: the PDB information stream (GUID, age) and the DBI header (age,
//!   machine);
//! * layouts: each structure's first definition by name (members usually reference forward
//!   declarations, resolved by name) is found through the type stream's hash stream, as a
//!   debugger finds it, each record read checked against it; without a usable hash stream, or
//!   where what is read contradicts it, one pass over the type stream reads each record's
//!   length and the heads of the named definitions instead. Only the requested structures, what
//!   they embed by value, and the wanted enumerations' field lists are parsed
//!   (`symbols::codeview`, which says what the hash path cannot see);
//! * global addresses: the publics (S_PUB32, what Microsoft's public PDBs have) and global data
//!   records (S_GDATA32 and the other data kinds), mapped to RVAs through the section headers
//!   (and the OMAP, when the PDB has one); every record is walked, but only the names the
//!   [`Globals`] selection keeps are looked up and stored (`symbols --pdb` without
//!   `--all-symbols` needs a few dozen of the ~26,000 a kernel names).
//!
//! The result is the one the `pdb` crate gave ([`super::pdb_reference`], kept as the tests'
//! oracle): the same records are accepted and the same names, sizes and addresses result,
//! wherever the crate reads the file at all (but for a structure the hash stream files under
//! another hash, which may be missing: the crate never read the hash stream). Everything the
//! file gives is bounded before it drives a loop, an allocation or a slice; damage gives
//! [`SymbolError::BadPdb`] naming the file and what is wrong, or the degraded result the crate
//! gave (a record that does not parse is skipped where the crate skipped it).

use super::codeview::{self, u16_at, u32_at};
use super::{Globals, PdbIdentity, SymbolError};
use std::borrow::Cow;
use std::fs::File;
use std::path::Path;

/// What a PDB gave.
#[derive(Debug, PartialEq)]
pub struct PdbContents {
    pub identity: PdbIdentity,
    pub pointer_size: u64,
    /// Machine type from the DBI stream (0x8664, 0x14C, ...), if present.
    pub machine: Option<u16>,
    pub types: super::TypeStore,
    /// Global symbol → RVA (x86 names without their leading underscore).
    pub symbols: super::SymbolMap,
}

pub(crate) fn bad(path: &Path, e: impl std::fmt::Display) -> SymbolError {
    SymbolError::BadPdb {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Read `wanted` structures (and what they embed) and the global symbols `globals` selects
/// from a PDB.
///
/// The file is mapped read-only (read into memory when it cannot be mapped, e.g. a pipe).
pub fn load(path: &Path, wanted: &[&str], globals: Globals) -> Result<PdbContents, SymbolError> {
    let io = |e| SymbolError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.len() == 0 || !meta.is_file() {
        use std::io::Read;
        // Bounded like any file we read: a PDB is at most 4 GiB of 4 KiB blocks (u32 count).
        let mut bytes = Vec::new();
        file.take(1 << 32).read_to_end(&mut bytes).map_err(io)?;
        return load_bytes(path, &bytes, wanted, globals);
    }
    // SAFETY: the mapping is read-only and private to this call; the bytes are only read
    // through bounds-checked slices. A file truncated by another process while mapped would
    // fault (SIGBUS), as for any mapped input (dumps are mapped the same way).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    load_bytes(path, &map, wanted, globals)
}

/// [`load`] on the bytes of a PDB held in memory (same checks, same result); `name` stands for
/// the file: in errors, and its file name in the identity.
pub fn load_bytes(
    name: &Path,
    bytes: &[u8],
    wanted: &[&str],
    globals: Globals,
) -> Result<PdbContents, SymbolError> {
    let streams = super::msf::Streams::open(bytes).map_err(|why| bad(name, why))?;
    let stream = |n: usize, what: &str| -> Result<Cow<'_, [u8]>, SymbolError> {
        streams
            .get(n)
            .map_err(|why| bad(name, why))?
            .ok_or_else(|| bad(name, format!("no {what} stream (stream {n})")))
    };
    let info = stream(1, "PDB information")?;
    let dbi = stream(3, "debug information (DBI)")?;
    let dbi = Dbi::parse(&dbi).map_err(|why| bad(name, why))?;
    let (info_age, guid) = match (u32_at(&info, 8), info.get(12..28)) {
        (Some(age), Some(g)) if info.len() >= 32 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(g);
            (age, b)
        }
        _ => {
            return Err(bad(
                name,
                format!("PDB information stream of {} bytes", info.len()),
            ))
        }
    };
    // The DBI age is the one the image's CodeView record carries.
    let age = if dbi.age != 0 { dbi.age } else { info_age };
    let file_name = crate::text::Untrusted::new(
        name.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let identity = PdbIdentity::from_guid_bytes(file_name, &guid, age, false);
    let machine = Some(known_machine(dbi.machine));
    let pointer_size = match machine {
        Some(0x14C) | Some(0x1C4) => 4,
        _ => 8,
    };

    let tpi = stream(2, "type information (TPI)")?;
    // The TPI header names the hash stream (an unreadable one is only not used: the records
    // are then found by walking them all).
    let hash = u16_at(&tpi, 20)
        .filter(|&n| n != u16::MAX)
        .and_then(|n| streams.get(usize::from(n)).ok().flatten());
    let read_globals = || read_symbols(&streams, &dbi, pointer_size == 4, globals);
    // The global symbols are read on a second thread while the types are (the walk of their
    // records, a name pattern, is about a third of the load once the types come through the
    // hash stream: `symbols` 5.1 -> 4.7 ms a call on the idle 2-core VM; on a machine whose
    // other core was busy, earlier, a second thread made the load slower: docs/performance.md).
    // Where no thread can be started, they are read after the types.
    let (types, symbols) = std::thread::scope(|scope| {
        let globals = std::thread::Builder::new().spawn_scoped(scope, read_globals);
        let types = codeview::read_pdb_types(&tpi, hash.as_deref(), wanted, pointer_size);
        let symbols = match globals {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err("the symbol records' reader stopped".into())),
            Err(_) => read_globals(),
        };
        (types, symbols)
    });
    let types = types.map_err(|why| bad(name, why))?;
    let symbols = symbols.map_err(|why| bad(name, why))?;
    Ok(PdbContents {
        identity,
        pointer_size,
        machine,
        types,
        symbols,
    })
}

impl super::Symbols {
    /// [`Symbols::from_pdb`](super::Symbols::from_pdb) on the bytes of a PDB held in memory
    /// (through [`load_bytes`]); `name` is the source path recorded and named in errors.
    pub fn from_pdb_bytes(
        name: &Path,
        bytes: &[u8],
        wanted: &[&str],
    ) -> Result<super::Symbols, SymbolError> {
        Self::from_pdb_bytes_keeping(name, bytes, wanted, Globals::All)
    }

    /// [`from_pdb_bytes`](Self::from_pdb_bytes) keeping only the global symbols `globals`
    /// selects.
    pub fn from_pdb_bytes_keeping(
        name: &Path,
        bytes: &[u8],
        wanted: &[&str],
        globals: Globals,
    ) -> Result<super::Symbols, SymbolError> {
        let c = load_bytes(name, bytes, wanted, globals)?;
        Ok(super::Symbols {
            source: super::SymbolSource::Pdb(name.to_path_buf()),
            identity: Some(c.identity),
            pointer_size: c.pointer_size,
            machine: c.machine,
            types: c.types,
            rvas: c.symbols,
            ..super::Symbols::none(c.pointer_size)
        })
    }
}

thread_local! {
    static CONTAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f`, turning a panic into Err(its message). While `f` runs on this thread the panic is
/// not printed (a process-wide hook, installed once, skips threads inside `contained` and
/// calls the previous hook for every other panic). Used around third-party code that may
/// panic on hostile input (the symbol server's HTTP and CAB code, the reference loader).
pub(crate) fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    CONTAINING.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINING.with(|c| c.set(false));
    r.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into())
    })
}

/// The machine types the `pdb` crate names (`MachineType`); any other value was reported as
/// 0 (`Unknown`), and etwdump kept that.
fn known_machine(m: u16) -> u16 {
    const KNOWN: &[u16] = &[
        0xFFFF, 0x13, 0x8664, 0x1C0, 0xAA64, 0x1C4, 0xEBC, 0x14C, 0x200, 0x9041, 0x266, 0x366,
        0x466, 0x1F0, 0x1F1, 0x166, 0x5032, 0x5064, 0x5128, 0x1A2, 0x1A3, 0x1A6, 0x1A8, 0x1C2,
        0x169,
    ];
    if KNOWN.contains(&m) {
        m
    } else {
        0
    }
}

/// The DBI header fields the loader uses, and the optional debug header's stream numbers.
struct Dbi {
    age: u32,
    machine: u16,
    symbol_records: u16,
    /// The optional debug header (stream numbers, u16 each), if the stream holds it.
    debug_header: Result<Vec<u16>, String>,
}

const DBI_HEADER: usize = 64;

impl Dbi {
    fn parse(b: &[u8]) -> Result<Dbi, String> {
        if b.len() < DBI_HEADER {
            return Err(format!("DBI stream of {} bytes", b.len()));
        }
        let field = |o| u32_at(b, o).unwrap_or(0) as usize;
        if field(0) != u32::MAX as usize {
            return Err("DBI header of an unsupported (ancient) version".into());
        }
        // Module info, section contributions, section map, source info, type server map, EC
        // (msf::check bounded each and their sum by the stream's size).
        let before = [24, 28, 32, 36, 40, 52]
            .iter()
            .fold(DBI_HEADER, |a, &o| a.saturating_add(field(o)));
        let size = field(48);
        let debug_header = match before.checked_add(size).and_then(|end| b.get(before..end)) {
            Some(h) if h.len() % 2 == 0 => Ok(h
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()),
            Some(_) => Err("the DBI optional debug header has an odd size".to_string()),
            None => Err("the DBI optional debug header is past the stream's end".to_string()),
        };
        Ok(Dbi {
            age: u32_at(b, 8).unwrap_or(0),
            machine: u16_at(b, 58).unwrap_or(0),
            symbol_records: u16_at(b, 20).unwrap_or(u16::MAX),
            debug_header,
        })
    }

    /// Stream number `i` of the optional debug header (None: absent, 0xFFFF or not listed).
    fn extra(&self, i: usize) -> Result<Option<usize>, String> {
        let h = self.debug_header.as_ref().map_err(Clone::clone)?;
        Ok(h.get(i)
            .copied()
            .filter(|&s| s != u16::MAX)
            .map(usize::from))
    }
}

/// Section header virtual addresses (40-byte IMAGE_SECTION_HEADERs; a partial one is damage).
fn section_addresses(streams: &super::msf::Streams<'_>, n: usize) -> Result<Vec<u32>, String> {
    let s = streams
        .get(n)?
        .ok_or_else(|| format!("the section header stream {n} is missing"))?;
    if s.len() % 40 != 0 {
        return Err(format!("section header stream of {} bytes", s.len()));
    }
    Ok(s.chunks_exact(40)
        .map(|h| u32_at(h, 12).unwrap_or(0))
        .collect())
}

/// Section offsets to RVAs, as the `pdb` crate's `AddressMap` does.
struct AddressMap {
    /// The sections the symbols' offsets refer to (the original ones when there is an OMAP).
    sections: Vec<u32>,
    /// (source, target) records of the OMAP from the original to the image's addresses.
    omap: Option<Vec<(u32, u32)>>,
}

impl AddressMap {
    fn read(streams: &super::msf::Streams<'_>, dbi: &Dbi) -> Result<AddressMap, String> {
        const OMAP_TO_SRC: usize = 3;
        const OMAP_FROM_SRC: usize = 4;
        const SECTION_HEADERS: usize = 5;
        const ORIGINAL_SECTION_HEADERS: usize = 10;
        let sections = match dbi.extra(SECTION_HEADERS)? {
            Some(n) => section_addresses(streams, n)?,
            None => Vec::new(),
        };
        let Some(orig) = dbi.extra(ORIGINAL_SECTION_HEADERS)? else {
            return Ok(AddressMap {
                sections,
                omap: None,
            });
        };
        let original = section_addresses(streams, orig)?;
        let omap = |i| -> Result<Vec<(u32, u32)>, String> {
            let n = dbi.extra(i)?.ok_or("an OMAP stream is missing")?;
            let s = streams.get(n)?.ok_or("an OMAP stream is missing")?;
            if s.len() % 8 != 0 {
                return Err(format!("OMAP stream of {} bytes", s.len()));
            }
            Ok(s.chunks_exact(8)
                .map(|r| (u32_at(r, 0).unwrap_or(0), u32_at(r, 4).unwrap_or(0)))
                .collect())
        };
        let from_src = omap(OMAP_FROM_SRC)?;
        omap(OMAP_TO_SRC)?;
        Ok(AddressMap {
            sections: original,
            omap: Some(from_src),
        })
    }

    fn rva(&self, section: u16, offset: u32) -> Option<u32> {
        let base = self.sections.get(usize::from(section).checked_sub(1)?)?;
        let internal = base.wrapping_add(offset);
        match &self.omap {
            None => Some(internal),
            Some(records) => {
                let i = match records.binary_search_by_key(&internal, |r| r.0) {
                    Ok(i) => i,
                    Err(0) => return None,
                    Err(i) => i - 1,
                };
                let (source, target) = records[i];
                // A target of 0: the address does not exist in the image.
                (target != 0).then(|| internal.wrapping_sub(source).wrapping_add(target))
            }
        }
    }
}

const S_ALIGN: u16 = 0x0402;
const S_SKIP: u16 = 0x0007;
const S_PUB32: u16 = 0x110E;
const S_PUB32_ST: u16 = 0x1009;
// The data records the `pdb` crate parsed as `SymbolData::Data`.
const S_LDATA32: u16 = 0x110C;
const S_LDATA32_ST: u16 = 0x1007;
const S_GDATA32: u16 = 0x110D;
const S_GDATA32_ST: u16 = 0x1008;
const S_LMANDATA: u16 = 0x111C;
const S_LMANDATA_ST: u16 = 0x1020;
const S_GMANDATA: u16 = 0x111D;
const S_GMANDATA_ST: u16 = 0x1021;
/// Kinds below this carry a length-prefixed name; others a NUL-terminated one.
const S_ST_MAX: u16 = 0x1100;

/// The public and data records of the symbol record stream that `globals` keeps, by name
/// (first one wins). Every record is walked either way (a damaged one fails the load alike).
fn read_symbols(
    streams: &super::msf::Streams<'_>,
    dbi: &Dbi,
    x86: bool,
    globals: Globals,
) -> Result<super::SymbolMap, String> {
    let map = AddressMap::read(streams, dbi)?;
    let n = dbi.symbol_records;
    let records = (n != u16::MAX)
        .then(|| streams.get(usize::from(n)))
        .transpose()?
        .flatten()
        .ok_or_else(|| format!("no global symbol records (stream {n})"))?;
    let records: &[u8] = &records;
    // About one record per 40 bytes in a kernel PDB, half of them publics, half data records
    // of the same names, a name per 90 bytes of records; bounded by the stream's size.
    let mut out = match globals {
        Globals::All => super::SymbolMap::with_capacity(records.len() / 64, records.len() / 6),
        Globals::Tool => super::SymbolMap::default(),
    };
    let mut pos = 0usize;
    while pos < records.len() {
        let len = usize::from(
            u16_at(records, pos).ok_or("the symbol records end inside a record's length")?,
        );
        if len < 2 {
            return Err(format!("symbol record at {pos} of {len} bytes"));
        }
        let rec = records
            .get(pos + 2..pos + 2 + len)
            .ok_or_else(|| format!("symbol record at {pos} runs past the stream's end"))?;
        pos += 2 + len;
        let kind = u16::from_le_bytes([rec[0], rec[1]]);
        if kind == S_ALIGN || kind == S_SKIP {
            continue;
        }
        let public = match kind {
            S_PUB32 | S_PUB32_ST => true,
            S_LDATA32 | S_LDATA32_ST | S_GDATA32 | S_GDATA32_ST | S_LMANDATA | S_LMANDATA_ST
            | S_GMANDATA | S_GMANDATA_ST => false,
            _ => continue,
        };
        // Public: flags, offset, segment, name; data: type, offset, segment, name.
        let (Some(offset), Some(section)) = (u32_at(rec, 6), u16_at(rec, 10)) else {
            continue;
        };
        if globals == Globals::Tool {
            // The name's first two bytes (after the length byte of the old kinds, and the
            // underscore an x86 public loses): a name the selection cannot keep is skipped
            // before its end is looked for. A kept name is a tool global, whose first two
            // characters are ASCII: the same two bytes before decoding.
            let mut at = if kind < S_ST_MAX { 13 } else { 12 };
            if x86 && public && rec.get(at) == Some(&b'_') {
                at += 1;
            }
            if !super::may_be_tool_global(rec.get(at..).unwrap_or_default()) {
                continue;
            }
        }
        let Some(name) = codeview::record_name(&rec[12..], kind < S_ST_MAX) else {
            continue;
        };
        let key = match name.strip_prefix(b"_") {
            Some(stripped) if x86 && public => stripped,
            _ => name,
        };
        // An ASCII key is the name the map would be given: a name `globals` does not keep is
        // skipped before anything else is done for it (the selection depends on the name only,
        // so the names kept get the address of their first record, as in the full map). Other
        // keys are decoded first, then selected.
        if globals == Globals::Tool && key.is_ascii() && !super::is_tool_global_bytes(key) {
            continue;
        }
        let Some(rva) = map.rva(section, offset) else {
            continue;
        };
        // Each global is named twice (its public and its data record): a name the map has is
        // valid UTF-8 as it stands, the key it would be given, so it is not decoded again. (The
        // underscore stripped above is one byte, whether before or after decoding.)
        let Some(absent) = out.absent(key) else {
            continue;
        };
        if let Ok(key) = std::str::from_utf8(key) {
            if globals.keeps(key) {
                out.insert_absent(absent, key, u64::from(rva));
            }
            continue;
        }
        // x86 publics carry the C decoration (a leading underscore); S_GDATA32 names do not.
        // (Stripped after the lossy conversion, as the crate-based loader did: a name of an
        // underscore then invalid UTF-8 keeps its replacement characters.)
        let name = crate::text::Untrusted::from_utf8_lossy(name).into_raw();
        let name = match name.strip_prefix('_') {
            Some(stripped) if x86 && public => stripped,
            _ => &name,
        };
        if globals.keeps(name) {
            out.insert_first(name, u64::from(rva));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Symbols, WANTED_TYPES};
    use std::path::Path;

    fn fixture() -> Vec<u8> {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041/ntkrnlmp.pdb"),
        )
        .unwrap()
    }

    /// Everything a load gives, as text (layouts in name order, symbols sorted).
    fn summary(s: &Symbols) -> String {
        let mut names: Vec<&str> = s.types.names().collect();
        names.sort_unstable();
        let layouts: Vec<String> = names
            .iter()
            .map(|n| format!("{:?}", s.types.get(n)))
            .collect();
        let mut rvas: Vec<_> = s.rvas.iter().collect();
        rvas.sort();
        format!(
            "{:?} {:?} {} {:?} {layouts:?} {rvas:?} {}",
            s.source,
            s.identity,
            s.pointer_size,
            s.machine,
            ["_KWAIT_REASON", "_KTHREAD_STATE", "_ETW_BUFFER_STATE"]
                .iter()
                .map(|e| format!("{:?}", s.types.enum_name(e, 1)))
                .collect::<String>()
        )
    }

    /// `from_pdb_bytes` gives what `from_pdb` gives on the same bytes: the fixture, and damaged
    /// copies of it (one to three dwords overwritten, as in tests/symbols.rs) that load, or are
    /// refused (same error text).
    #[test]
    fn bytes_load_like_the_file() {
        let src = fixture();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ntkrnlmp.pdb");
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ok, mut refused) = (0, 0);
        for i in 0..60 {
            let mut b = src.clone();
            if i > 0 {
                for _ in 0..1 + next() % 3 {
                    let off = (next() as usize % (b.len() / 4)) * 4;
                    let v: u32 = match next() % 3 {
                        0 => u32::MAX,
                        1 => 0,
                        _ => next() as u32,
                    };
                    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            if i == 59 {
                b.truncate(b.len() / 2);
            }
            std::fs::write(&p, &b).unwrap();
            let from_file = Symbols::from_pdb(&p, WANTED_TYPES);
            let from_bytes = Symbols::from_pdb_bytes(&p, &b, WANTED_TYPES);
            match (from_file, from_bytes) {
                (Ok(f), Ok(m)) => {
                    assert_eq!(summary(&f), summary(&m), "variant {i}");
                    if i == 0 {
                        assert!(f.types.get("_WMI_LOGGER_CONTEXT").is_some());
                        assert!(f.rva("EtwpHostSiloState").is_some());
                    }
                    ok += 1;
                }
                (Err(f), Err(m)) => {
                    assert_eq!(f.to_string(), m.to_string(), "variant {i}");
                    refused += 1;
                }
                (f, m) => panic!("variant {i}: file {:?}, bytes {:?}", f.err(), m.err()),
            }
        }
        assert!(ok > 1 && refused > 1, "{ok} loaded, {refused} refused");
    }

    #[test]
    fn bytes_errors_name_the_given_path() {
        let name = Path::new("in-memory.pdb");
        for b in [
            &b""[..],
            b"Microsoft C/C++ MSF 7.00\r\n",
            &fixture()[..4096],
        ] {
            let e = Symbols::from_pdb_bytes(name, b, WANTED_TYPES).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("in-memory.pdb: not a readable PDB"),
                "{e}"
            );
        }
    }

    /// An empty file is read, not mapped, and refused like any short file.
    #[test]
    fn empty_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty.pdb");
        std::fs::write(&p, b"").unwrap();
        let e = Symbols::from_pdb(&p, WANTED_TYPES).unwrap_err();
        assert!(e.to_string().contains("not a readable PDB"), "{e}");
    }
}
