//! Payloads of classic kernel (MOF) events (issue 29 item 1, first classes): the process,
//! thread and image events of the NT Kernel Logger and the system loggers, decoded field by
//! field with names and typed values.
//!
//! Only the (hook, version) pairs whose layouts are established are decoded: the layouts
//! `etl::rundown` writes, which were checked against the real ShutdownPerfDiagLogger.etl of
//! shared/data and are read back field by field by etl-parser and dissect.etl
//! (tests/interop/etl_viewers_check.py). One layout serves a class's event types (the
//! documented MOF classes `Process_V4_TypeGroup1`: Start, End, DCStart, DCEnd;
//! `Thread_V3_TypeGroup1`; `Image_Load` version 3: Load, Unload, DCStart, DCEnd). Any other
//! version is not decoded (no guess), a payload too short for a field stops the decoding there
//! and says so, and bytes after the last field are reported; nothing reads past the record.

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
    /// A kernel pointer or pointer-sized count (the record's width).
    Ptr,
    /// TOKEN_USER as the kernel copies it (two pointer-sized slots: the SID pointer and the
    /// attributes, padded) followed by the SID itself.
    TokenUserSid,
    /// NUL-terminated 8-bit string.
    AnsiZ,
    /// NUL-terminated UTF-16LE string.
    Utf16Z,
}

/// One decodable class.
struct Class {
    name: &'static str,
    hooks: &'static [u16],
    version: u8,
    fields: &'static [(&'static str, Ty)],
    /// Fields newer builds append: decoded only when the payload goes on after `fields`.
    tail: &'static [(&'static str, Ty)],
}

/// The classes decoded, one home for their layouts (etl::rundown writes the same fields).
const CLASSES: &[Class] = &[
    Class {
        name: "Process_V4_TypeGroup1",
        hooks: &[0x0301, 0x0302, 0x0303, 0x0304],
        version: 4,
        fields: &[
            ("UniqueProcessKey", Ty::Ptr),
            ("ProcessId", Ty::U32),
            ("ParentId", Ty::U32),
            ("SessionId", Ty::U32),
            ("ExitStatus", Ty::U32),
            ("DirectoryTableBase", Ty::Ptr),
            ("Flags", Ty::U32),
            ("UserSID", Ty::TokenUserSid),
            ("ImageFileName", Ty::AnsiZ),
            ("CommandLine", Ty::Utf16Z),
            ("PackageFullName", Ty::Utf16Z),
            ("ApplicationId", Ty::Utf16Z),
        ],
        tail: &[],
    },
    Class {
        name: "Thread_V3_TypeGroup1",
        hooks: &[0x0501, 0x0502, 0x0503, 0x0504],
        version: 3,
        fields: &[
            ("ProcessId", Ty::U32),
            ("TThreadId", Ty::U32),
            ("StackBase", Ty::Ptr),
            ("StackLimit", Ty::Ptr),
            ("UserStackBase", Ty::Ptr),
            ("UserStackLimit", Ty::Ptr),
            ("Affinity", Ty::Ptr),
            ("Win32StartAddr", Ty::Ptr),
            ("TebBase", Ty::Ptr),
            ("SubProcessTag", Ty::U32),
            ("BasePriority", Ty::U8),
            ("PagePriority", Ty::U8),
            ("IoPriority", Ty::U8),
            ("ThreadFlags", Ty::U8),
        ],
        // The real ShutdownPerfDiagLogger.etl (shared/data) has it on every thread event:
        // an empty name is its 2-byte NUL (records of 0x6a bytes), a named thread longer.
        tail: &[("ThreadName", Ty::Utf16Z)],
    },
    Class {
        name: "Image_Load",
        hooks: &[0x140a, 0x1402, 0x1403, 0x1404],
        version: 3,
        fields: &[
            ("ImageBase", Ty::Ptr),
            ("ImageSize", Ty::Ptr),
            ("ProcessId", Ty::U32),
            ("ImageCheckSum", Ty::U32),
            ("TimeDateStamp", Ty::U32),
            ("SignatureLevel", Ty::U8),
            ("SignatureType", Ty::U8),
            ("Reserved0", Ty::U16),
            ("DefaultBase", Ty::Ptr),
            ("Reserved1", Ty::U32),
            ("Reserved2", Ty::U32),
            ("Reserved3", Ty::U32),
            ("Reserved4", Ty::U32),
            ("FileName", Ty::Utf16Z),
        ],
        tail: &[],
    },
];

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

/// Decode `r`'s payload when its hook and version have a known layout.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    let hook = r.hook?;
    let class = CLASSES
        .iter()
        .find(|c| c.version == r.version && c.hooks.contains(&hook))?;
    let (p, ptr) = kernel_payload(buf, r)?;
    Some(decode_fields(class, p, ptr))
}

/// The class's fields read from `p` in order.
fn decode_fields(class: &Class, p: &[u8], ptr: usize) -> Payload {
    let mut out = Payload {
        class: class.name,
        ..Payload::default()
    };
    let mut at = 0usize;
    let mut last = "";
    for (i, &(name, ty)) in class.fields.iter().chain(class.tail).enumerate() {
        // A field of the tail is there only if the payload goes on.
        if i >= class.fields.len() && at == p.len() {
            break;
        }
        last = name;
        match read(ty, p, at, ptr) {
            Ok((v, n)) => {
                out.fields.push((Untrusted::from(name), v));
                at += n;
            }
            Err(why) => {
                out.problem = Some(format!("{name} at payload +{at:#x}: {why}"));
                return out;
            }
        }
    }
    if at < p.len() {
        out.problem = Some(format!(
            "{} bytes after the last field ({last})",
            p.len() - at
        ));
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
    let num = |n: usize| -> Result<u64, String> {
        let b = p.get(at..at.saturating_add(n)).ok_or_else(|| short(n))?;
        Ok(b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    };
    Ok(match ty {
        Ty::U8 => (Value::Number(num(1)?), 1),
        Ty::U16 => (Value::Number(num(2)?), 2),
        Ty::U32 => (Value::Number(num(4)?), 4),
        Ty::Ptr => (Value::Address(format!("{:#x}", num(ptr)?)), ptr),
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
            assert_eq!(p.number("ExitStatus"), Some(259));
            assert_eq!(
                p.get("DirectoryTableBase"),
                Some(&Value::Address("0x1aa000".into()))
            );
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
            assert_eq!(
                t.get("Win32StartAddr"),
                Some(&Value::Address("0x4242".into()))
            );
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
            assert_eq!(i.get("ImageSize"), Some(&Value::Address("0xa40000".into())));
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
        // Version 3 of the process class: not decoded.
        let mut v3 = rec.clone();
        v3[0] = 3;
        let mut buf = v3.clone();
        buf.resize(crate::etl::records::align8(v3.len()), 0);
        let mut got = Some(Payload::default());
        walk_from(&buf, 0, buf.len(), |r| got = decode(&buf, r));
        assert_eq!(got, None);
    }
}
