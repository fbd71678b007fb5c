//! Payloads of classic kernel (MOF) events (issue 29 item 1): the events of the NT Kernel
//! Logger and the system loggers, decoded field by field with names and typed values.
//!
//! A record's hook is `group << 8 | type`; its version is the header's low byte; its pointer
//! width is its header type's (SYSTEM32/COMPACT32/PERFINFO32 four bytes, the 64-bit kinds
//! eight). Each group's classes are a table in a submodule, one home per layout, fields in wire
//! order, each class with the sources its layout comes from:
//!
//! - `process`: process, thread and image events (group 0x03, 0x05, 0x14);
//! - `perfinfo`: the trace header group's extension records (0x00) and PerfInfo (0x0F):
//!   DPC, ISR, sampled profile, system calls;
//! - `io`: DiskIo (0x01) and FileIo (0x04);
//! - `net`: TcpIp (0x06) and UdpIp (0x08);
//! - `system`: PageFault (0x02), Registry (0x09) and SystemConfig (0x0B).
//!
//! Only the (hook, version) pairs whose layouts are established are decoded; any other version
//! is not decoded (no guess). A payload too short for a field stops the decoding there and
//! says so, and bytes after the last field are reported; nothing reads past the record.

mod io;
mod net;
mod perfinfo;
mod process;
mod system;

use crate::etl::records::{Record, RecordKind};
use crate::text::Untrusted;

use super::payload::sid;
pub use super::payload::{Payload, Value};

/// A field's wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    U8,
    U16,
    U32,
    U64,
    /// A signed 16-bit integer (MOF sint16).
    I16,
    /// A signed 32-bit integer (MOF sint32).
    I32,
    /// A signed 64-bit integer (MOF sint64).
    I64,
    /// A 32-bit status (NTSTATUS), shown in hexadecimal.
    Hex32,
    /// A kernel pointer (the record's width), shown as an address.
    Ptr,
    /// A pointer-sized count (MOF `extension("SizeT")`), shown as a number.
    SizeT,
    /// A TCP/UDP port: 16 bits in network byte order (MOF `extension("Port")`).
    Port,
    /// An IPv4 address, four bytes in network order (MOF `extension("IPAddrV4")`).
    Ipv4,
    /// An IPv6 address, sixteen bytes (MOF `extension("IPAddrV6")`).
    Ipv6,
    /// A fixed array of `n` UTF-16 code units (MOF `char16 Name[n]`), text up to its first NUL.
    Utf16Fixed(u16),
    /// TOKEN_USER as the kernel copies it (two pointer-sized slots: the SID pointer and the
    /// attributes, padded) followed by the SID itself.
    TokenUserSid,
    /// NUL-terminated 8-bit string.
    AnsiZ,
    /// NUL-terminated UTF-16LE string.
    Utf16Z,
}

/// A named field.
type Field = (&'static str, Ty);

/// One decodable class: a layout, the event types (the hook's low byte) of its group that use
/// it, and the version.
struct Class {
    name: &'static str,
    types: &'static [u8],
    version: u8,
    /// The fields in wire order, as runs that are concatenated (layouts that share a prefix
    /// share its run).
    fields: &'static [&'static [Field]],
    /// Fields newer builds append: decoded only when the payload goes on after `fields`.
    tail: &'static [Field],
}

/// The classes of hook group `group`.
fn classes(group: u8) -> &'static [Class] {
    match group {
        0x00 => perfinfo::HEADER,
        0x01 => io::DISK_IO,
        0x02 => system::PAGE_FAULT,
        0x03 => process::PROCESS,
        0x04 => io::FILE_IO,
        0x05 => process::THREAD,
        0x06 => net::TCP_IP,
        0x08 => net::UDP_IP,
        0x09 => system::REGISTRY,
        0x0B => system::SYSTEM_CONFIG,
        0x0F => perfinfo::PERFINFO,
        0x14 => process::IMAGE,
        _ => &[],
    }
}

/// The payload of a SYSTEM, COMPACT or PERFINFO record (after its header), and its pointer
/// width; None for other header kinds or a record `buf` does not hold.
pub(crate) fn kernel_payload<'a>(buf: &'a [u8], r: &Record) -> Option<(&'a [u8], usize)> {
    let (header, ptr) = match r.kind {
        RecordKind::System32 => (0x20, 4),
        RecordKind::System64 => (0x20, 8),
        RecordKind::Compact32 => (0x18, 4),
        RecordKind::Compact64 => (0x18, 8),
        RecordKind::PerfInfo32 => return Some((r.perfinfo_payload(buf)?, 4)),
        RecordKind::PerfInfo64 => return Some((r.perfinfo_payload(buf)?, 8)),
        _ => return None,
    };
    Some((buf.get(r.offset + header..r.offset + r.size)?, ptr))
}

/// The class that decodes (hook, version), if any.
fn class_of(hook: u16, version: u8) -> Option<&'static Class> {
    let [ty, group] = hook.to_le_bytes();
    classes(group)
        .iter()
        .find(|c| c.version == version && c.types.contains(&ty))
}

/// Decode `r`'s payload when its hook and version have a known layout.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    let class = class_of(r.hook?, r.version)?;
    let (p, ptr) = kernel_payload(buf, r)?;
    Some(decode_fields(class, p, ptr))
}

/// The class's fields read from `p` in order.
fn decode_fields(class: &Class, p: &[u8], ptr: usize) -> Payload {
    let fixed: usize = class.fields.iter().map(|run| run.len()).sum();
    let mut out = Payload {
        class: class.name,
        // Every fixed field's place at once (one allocation per row, not one per doubling).
        fields: Vec::with_capacity(fixed),
        ..Payload::default()
    };
    let mut at = 0usize;
    let mut last = "";
    let fields = class.fields.iter().flat_map(|run| run.iter());
    for (i, &(name, ty)) in fields.chain(class.tail).enumerate() {
        // A field of the tail is there only if the payload goes on.
        if i >= fixed && at == p.len() {
            break;
        }
        last = name;
        match read(ty, p, at, ptr) {
            Ok((v, n)) => {
                out.fields.push((Untrusted::from_static(name), v));
                at += n;
            }
            Err(why) => {
                out.problem = Some(format!("{name} at payload +{at:#x}: {why}"));
                return out;
            }
        }
    }
    if at < p.len() {
        let n = p.len() - at;
        out.problem = Some(if last.is_empty() {
            format!("{n} bytes where the class has no fields")
        } else {
            format!("{n} bytes after the last field ({last})")
        });
    }
    out
}

/// One value of type `ty` at `p[at..]`: the value and its size on the wire.
fn read(ty: Ty, p: &[u8], at: usize, ptr: usize) -> Result<(Value, usize), String> {
    let short = |n: usize| {
        format!(
            "needs {n} bytes, the payload has {}",
            p.len().saturating_sub(at)
        )
    };
    let bytes = |n: usize| p.get(at..at.saturating_add(n)).ok_or_else(|| short(n));
    let num = |n: usize| -> Result<u64, String> {
        Ok(bytes(n)?
            .iter()
            .rev()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    };
    Ok(match ty {
        Ty::U8 => (Value::Number(num(1)?), 1),
        Ty::U16 => (Value::Number(num(2)?), 2),
        Ty::U32 => (Value::Number(num(4)?), 4),
        Ty::U64 => (Value::Number(num(8)?), 8),
        Ty::I16 => (Value::Signed(i64::from(num(2)? as u16 as i16)), 2),
        Ty::I32 => (Value::Signed(i64::from(num(4)? as u32 as i32)), 4),
        Ty::I64 => (Value::Signed(num(8)? as i64), 8),
        Ty::Hex32 => (Value::Address(num(4)?), 4),
        Ty::Ptr => (Value::Address(num(ptr)?), ptr),
        Ty::SizeT => (Value::Number(num(ptr)?), ptr),
        Ty::Port => {
            let b = bytes(2)?;
            (
                Value::Number(u64::from(u16::from_be_bytes([b[0], b[1]]))),
                2,
            )
        }
        Ty::Ipv4 => {
            let b = bytes(4)?;
            (
                Value::Formatted(format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])),
                4,
            )
        }
        Ty::Ipv6 => {
            let b: [u8; 16] = bytes(16)?.try_into().map_err(|_| short(16))?;
            (
                Value::Formatted(std::net::Ipv6Addr::from(b).to_string()),
                16,
            )
        }
        Ty::Utf16Fixed(n) => {
            let b = bytes(2 * usize::from(n))?;
            (Value::Text(Untrusted::from_utf16le_z(b)), b.len())
        }
        Ty::TokenUserSid => {
            let sid_at = at.saturating_add(2 * ptr);
            let (sid, n) = sid(p, sid_at)?;
            (Value::Text(Untrusted::from(sid)), 2 * ptr + n)
        }
        Ty::AnsiZ => {
            let rest = p.get(at..).unwrap_or_default();
            let end = rest
                .iter()
                .position(|&c| c == 0)
                .ok_or("no terminating NUL before the end of the record")?;
            (
                Value::Text(Untrusted::from_utf8_lossy(&rest[..end])),
                end + 1,
            )
        }
        Ty::Utf16Z => {
            let rest = p.get(at..).unwrap_or_default();
            let end = rest
                .chunks_exact(2)
                .position(|u| u == [0, 0])
                .ok_or("no terminating NUL (UTF-16) before the end of the record")?;
            (
                Value::Text(Untrusted::from_utf16le_z(&rest[..2 * end])),
                2 * end + 2,
            )
        }
    })
}

#[cfg(test)]
mod table_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::Arch;
    use crate::etl::records::walk_from;
    use crate::etl::rundown::{
        image_dcstart, process_dcstart, thread_dcstart, ImageRundown, ProcessRundown, ThreadRundown,
    };

    fn one(rec: &[u8]) -> Payload {
        let mut buf = rec.to_vec();
        buf.resize(crate::etl::records::align8(rec.len()), 0);
        let mut got = None;
        walk_from(&buf, 0, buf.len(), |r| got = decode(&buf, r));
        got.expect("decoded")
    }

    /// Every field name of every class is an identifier: non-empty, starting with an ASCII
    /// letter (the Timesketch message of a kernel event relies on it: it writes the first
    /// field without a leading blank instead of trimming blanks off).
    #[test]
    fn field_names_are_identifiers() {
        let mut n = 0;
        for group in 0..=255u8 {
            for c in classes(group) {
                for &(name, _) in c.fields.iter().flat_map(|run| run.iter()).chain(c.tail) {
                    assert!(
                        name.starts_with(|ch: char| ch.is_ascii_alphabetic())
                            && name
                                .chars()
                                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_'),
                        "{}: {name:?}",
                        c.name
                    );
                    n += 1;
                }
            }
        }
        assert!(n > 100, "{n} field names");
    }

    /// What etl::rundown writes decodes back to the same values, on both widths.
    #[test]
    fn rundown_records_decode_back() {
        for arch in [Arch::X64, Arch::X86 { pae: true }] {
            let w = if arch == Arch::X64 { 8 } else { 4 };
            let p = one(&process_dcstart(
                arch,
                7,
                &ProcessRundown {
                    key: 0xffff_a08d_8010_0080 & if w == 8 { u64::MAX } else { 0xffff_ffff },
                    pid: 4312,
                    parent_pid: 4100,
                    session_id: 1,
                    exit_status: 259,
                    directory_table_base: 0x1aa000,
                    image_file_name: b"powershell.exe\0junk",
                },
            ));
            assert_eq!(p.class, "Process_V4_TypeGroup1");
            assert_eq!(p.problem, None);
            assert_eq!(p.number("ProcessId"), Some(4312));
            assert_eq!(p.number("ParentId"), Some(4100));
            assert_eq!(p.get("ExitStatus"), Some(&Value::Signed(259)));
            assert_eq!(p.get("DirectoryTableBase"), Some(&Value::Address(0x1aa000)));
            assert_eq!(p.text("UserSID"), Some(&Untrusted::from("S-1-0-0")));
            assert_eq!(
                p.text("ImageFileName"),
                Some(&Untrusted::from("powershell.exe"))
            );
            assert_eq!(p.text("CommandLine"), Some(&Untrusted::from("")));
            assert_eq!(p.fields.len(), 12);

            let t = one(&thread_dcstart(
                arch,
                7,
                &ThreadRundown {
                    pid: 4,
                    tid: 8,
                    stack_base: 0x1000,
                    stack_limit: 0x800,
                    teb: 0x7ff0,
                    win32_start: 0x4242,
                    base_priority: 13,
                },
            ));
            assert_eq!(
                (t.class, t.problem.as_deref()),
                ("Thread_V3_TypeGroup1", None)
            );
            assert_eq!(t.number("TThreadId"), Some(8));
            assert_eq!(t.get("Win32StartAddr"), Some(&Value::Address(0x4242)));
            assert_eq!(t.number("BasePriority"), Some(13));
            assert_eq!(t.number("ThreadFlags"), Some(0));

            let i = one(&image_dcstart(
                arch,
                1,
                2,
                7,
                &ImageRundown {
                    base: 0x8000_0000,
                    size: 0xa4_0000,
                    pid: 0,
                    check_sum: 0x99,
                    time_date_stamp: 0x5f00_0000,
                    file_name: "\\SystemRoot\\system32\\ntoskrnl.exe",
                },
            ));
            assert_eq!((i.class, i.problem.as_deref()), ("Image_Load", None));
            assert_eq!(i.get("ImageSize"), Some(&Value::Address(0xa40000)));
            assert_eq!(i.number("TimeDateStamp"), Some(0x5f00_0000));
            assert_eq!(
                i.text("FileName"),
                Some(&Untrusted::from("\\SystemRoot\\system32\\ntoskrnl.exe"))
            );
        }
    }

    /// A short payload stops at the field it cannot hold; extra bytes are reported; a SID
    /// that is not one stops the decoding; another version is not decoded at all.
    #[test]
    fn hostile_payloads_are_reported_not_guessed() {
        let rec = process_dcstart(Arch::X64, 7, &ProcessRundown::default());
        // Cut inside ParentId: Size (u16 at +4) and the buffer both shortened.
        let mut cut = rec[..0x10 + 8 + 4 + 2].to_vec();
        let n = cut.len() as u16;
        cut[4..6].copy_from_slice(&n.to_le_bytes());
        let p = one(&cut);
        assert_eq!(p.fields.len(), 2);
        assert_eq!(
            p.problem.as_deref(),
            Some("ParentId at payload +0xc: needs 4 bytes, the payload has 2")
        );
        // A broken SID (revision 7).
        let mut bad = rec.clone();
        let sid_at = 0x10 + 8 + 16 + 8 + 4 + 16;
        bad[sid_at] = 7;
        let p = one(&bad);
        assert_eq!(p.fields.len(), 7);
        assert!(p
            .problem
            .unwrap()
            .starts_with("UserSID at payload +0x24: not a SID (revision 7"));
        // Four extra bytes.
        let mut long = rec.clone();
        long.extend_from_slice(&[1, 2, 3, 4]);
        let n = long.len() as u16;
        long[4..6].copy_from_slice(&n.to_le_bytes());
        let p = one(&long);
        assert_eq!(p.fields.len(), 12);
        assert_eq!(
            p.problem.as_deref(),
            Some("4 bytes after the last field (ApplicationId)")
        );
        // A string without terminator: ApplicationId's NUL removed (the last two bytes).
        let mut open = rec.clone();
        open.truncate(open.len() - 2);
        let n = open.len() as u16;
        open[4..6].copy_from_slice(&n.to_le_bytes());
        let p = one(&open);
        assert_eq!(p.fields.len(), 11);
        assert!(p.problem.unwrap().starts_with("ApplicationId at payload +"));
        // Version 6 of the process class: not decoded (no layout is known).
        let mut v3 = rec.clone();
        v3[0] = 6;
        let mut buf = v3.clone();
        buf.resize(crate::etl::records::align8(v3.len()), 0);
        let mut got = Some(Payload::default());
        walk_from(&buf, 0, buf.len(), |r| got = decode(&buf, r));
        assert_eq!(got, None);
    }
}
