//! The records a kernel session's .etl file carries besides the buffers: the partition
//! information Windows writes after the header event (hook 0x0050), and the process, thread
//! and image rundown (DCStart, hooks 0x0303, 0x0503, 0x1403) that names every process for a
//! trace viewer. Bytes only; what goes in them is the caller's.
//!
//! Layouts, as Windows 10 writes them (checked against the real ShutdownPerfDiagLogger.etl of
//! shared/data and read back by etl-parser and dissect.etl, whose definitions name the fields):
//! * 0x0050 `Header_PartitionInformation`: SYSTEM header (version 2, the header event's
//!   thread, process and time), 0x30 bytes: EventVersion u16, Reserved u16, PartitionType u32,
//!   QpcOffsetFromRoot i64, PartitionId GUID, ParentId GUID; all zero on the host partition
//!   (so in every real file of shared/data).
//! * 0x0303 `Process_V4_TypeGroup1` (DCStart = type 3): PERFINFO header (version 4), then
//!   UniqueProcessKey ptr, ProcessId, ParentId, SessionId, ExitStatus u32, DirectoryTableBase
//!   ptr, Flags u32, UserSID (a TOKEN_USER: 2 pointers, then the SID), ImageFileName (ANSI,
//!   NUL), CommandLine, PackageFullName, ApplicationId (UTF-16, NUL).
//! * 0x0503 `Thread_V3_TypeGroup1`: SYSTEM header (version 3, thread and process 0 as in real
//!   files), then ProcessId, TThreadId u32, StackBase, StackLimit, UserStackBase,
//!   UserStackLimit, Affinity, Win32StartAddr, TebBase ptr, SubProcessTag u32, BasePriority,
//!   PagePriority, IoPriority, ThreadFlags u8.
//! * 0x1403 `Image_Load` (version 3): SYSTEM header, then ImageBase, ImageSize ptr, ProcessId,
//!   ImageCheckSum, TimeDateStamp u32, SignatureLevel, SignatureType u8, Reserved0 u16,
//!   DefaultBase ptr, Reserved1-4 u32, FileName (UTF-16, NUL).

use super::writer::{perfinfo_record, system_record, wide};
use crate::dump::Arch;
// The partition information goes into the header buffer (`writer::header_buffer`): it is
// built there, and named here too with the other rundown records.
pub use super::writer::{partition_info, HOOK_PARTITION_INFO};

/// Hooks written here.
pub(crate) const HOOK_PROCESS_DCSTART: u16 = 0x0303;
/// Thread DCStart (0x0503, version 3).
pub const HOOK_THREAD_DCSTART: u16 = 0x0503;
/// Image DCStart (0x1403, version 3).
pub(crate) const HOOK_IMAGE_DCSTART: u16 = 0x1403;

/// The SID written as a process's user: S-1-0-0 (the null SID), as the user is not read.
const NULL_SID: [u8; 12] = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// Pointer-size-aware little-endian payload builder.
struct Payload {
    arch: Arch,
    b: Vec<u8>,
}

impl Payload {
    fn new(arch: Arch) -> Payload {
        Payload {
            arch,
            b: Vec::new(),
        }
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.b.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.b.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.b.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn ptr(&mut self, v: u64) -> &mut Self {
        if wide(self.arch) {
            self.b.extend_from_slice(&v.to_le_bytes());
        } else {
            self.b.extend_from_slice(&(v as u32).to_le_bytes());
        }
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.b.extend_from_slice(v);
        self
    }
    fn wstr(&mut self, s: &str) -> &mut Self {
        for u in s.encode_utf16() {
            self.u16(u);
        }
        self.u16(0)
    }
}

/// One process for the rundown.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProcessRundown<'a> {
    /// UniqueProcessKey: the EPROCESS address.
    pub key: u64,
    pub pid: u32,
    pub parent_pid: u32,
    /// 0xFFFFFFFF where unknown (as Windows writes for processes outside any session).
    pub session_id: u32,
    pub exit_status: u32,
    pub directory_table_base: u64,
    /// EPROCESS.ImageFileName (its bytes; a NUL ends it, at most 255 are written).
    pub image_file_name: &'a [u8],
}

/// The 0x0303 Process DCStart record.
pub(crate) fn process_dcstart(arch: Arch, ts: u64, p: &ProcessRundown<'_>) -> Vec<u8> {
    let mut b = Payload::new(arch);
    b.ptr(p.key)
        .u32(p.pid)
        .u32(p.parent_pid)
        .u32(p.session_id)
        .u32(p.exit_status)
        .ptr(p.directory_table_base)
        .u32(0); // Flags
                 // TOKEN_USER {PSID Sid; ULONG Attributes} as the kernel copies it: two pointer-sized
                 // slots (the Sid pointer is not kept: 0), then the SID itself.
    b.ptr(0).ptr(0).bytes(&NULL_SID);
    let name: Vec<u8> = p
        .image_file_name
        .iter()
        .copied()
        .take_while(|&c| c != 0)
        .take(255)
        .collect();
    b.bytes(&name).u8(0);
    b.wstr("").wstr("").wstr("");
    perfinfo_record(arch, 4, HOOK_PROCESS_DCSTART, ts, &b.b)
}

/// One thread for the rundown.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThreadRundown {
    pub pid: u32,
    pub tid: u32,
    pub stack_base: u64,
    pub stack_limit: u64,
    pub teb: u64,
    pub win32_start: u64,
    pub base_priority: u8,
}

/// The 0x0503 Thread DCStart record.
pub(crate) fn thread_dcstart(arch: Arch, ts: u64, t: &ThreadRundown) -> Vec<u8> {
    let mut b = Payload::new(arch);
    b.u32(t.pid)
        .u32(t.tid)
        .ptr(t.stack_base)
        .ptr(t.stack_limit)
        .ptr(0) // UserStackBase
        .ptr(0) // UserStackLimit
        .ptr(0) // Affinity
        .ptr(t.win32_start)
        .ptr(t.teb)
        .u32(0) // SubProcessTag
        .u8(t.base_priority)
        .u8(0) // PagePriority
        .u8(0) // IoPriority
        .u8(0); // ThreadFlags
    system_record(arch, 3, HOOK_THREAD_DCSTART, 0, 0, ts, &b.b)
}

/// One image (a kernel module: ProcessId 0) for the rundown.
#[derive(Clone, Debug, Default)]
pub(crate) struct ImageRundown<'a> {
    pub base: u64,
    pub size: u64,
    pub pid: u32,
    pub check_sum: u32,
    pub time_date_stamp: u32,
    pub file_name: &'a str,
}

/// Most UTF-16 units of an image's file name written (a record's Size is 16 bits; real
/// paths are far shorter): a longer name from memory is cut there.
pub(crate) const MAX_FILE_NAME_UNITS: usize = 4096;

/// The 0x1403 Image DCStart record (header thread/process: the writer's, as for the header
/// event). The file name is cut at [`MAX_FILE_NAME_UNITS`].
pub(crate) fn image_dcstart(
    arch: Arch,
    tid: u32,
    pid: u32,
    ts: u64,
    i: &ImageRundown<'_>,
) -> Vec<u8> {
    let mut units = 0;
    let name: String = i
        .file_name
        .chars()
        .take_while(|c| {
            units += c.len_utf16();
            units <= MAX_FILE_NAME_UNITS
        })
        .collect();
    let mut b = Payload::new(arch);
    b.ptr(i.base)
        .ptr(i.size)
        .u32(i.pid)
        .u32(i.check_sum)
        .u32(i.time_date_stamp)
        .u8(0) // SignatureLevel
        .u8(0) // SignatureType
        .u16(0) // Reserved0
        .ptr(0) // DefaultBase
        .u32(0)
        .u32(0)
        .u32(0)
        .u32(0)
        .wstr(&name);
    system_record(arch, 3, HOOK_IMAGE_DCSTART, tid, pid, ts, &b.b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::records::walk;

    /// Each record walks as one complete record of its hook and version, with the size
    /// Windows gives it for the same contents (the real file's Idle process: 0x5b; a thread
    /// without ThreadName: 0x68; ntoskrnl.exe's image: 0x9c).
    #[test]
    fn records_have_windows_sizes_and_walk() {
        let idle = process_dcstart(
            Arch::X64,
            7,
            &ProcessRundown {
                key: 0xFFFF_F802_42A3_99C0,
                session_id: u32::MAX,
                directory_table_base: 0x1AD000,
                image_file_name: b"Idle\0\0\0",
                ..Default::default()
            },
        );
        assert_eq!(idle.len(), 0x5B);
        assert_eq!(&idle[..8], &[4, 0, 0x11, 0xC0, 0x5B, 0, 3, 3]);
        let t = thread_dcstart(Arch::X64, 7, &ThreadRundown::default());
        assert_eq!(t.len(), 0x68);
        let img = image_dcstart(
            Arch::X64,
            4156,
            4,
            7,
            &ImageRundown {
                file_name: "\\SystemRoot\\system32\\ntoskrnl.exe",
                ..Default::default()
            },
        );
        assert_eq!(img.len(), 0x9C);
        let part = partition_info(Arch::X64, 1, 2, 3);
        assert_eq!(part.len(), 0x50);
        // In a buffer, back to back 8-aligned: four records, no tear.
        let mut buf = vec![0u8; 0x48];
        for r in [&part, &idle, &t, &img] {
            buf.extend_from_slice(r);
            buf.resize(buf.len().next_multiple_of(8), 0);
        }
        let valid = buf.len();
        let w = walk(&buf, valid);
        assert_eq!(w.count, 4);
        assert!(w.torn.is_none());
        // A name from memory longer than any path is cut so the record's 16-bit Size holds.
        let long = "\\x".repeat(40_000);
        let r = image_dcstart(
            Arch::X64,
            0,
            0,
            0,
            &ImageRundown {
                file_name: &long,
                ..Default::default()
            },
        );
        assert_eq!(r.len(), 0x58 + 2 * (MAX_FILE_NAME_UNITS + 1));
        assert_eq!(usize::from(u16::from_le_bytes([r[4], r[5]])), r.len());
        // x86: 4-byte pointers.
        assert_eq!(
            thread_dcstart(Arch::X86 { pae: true }, 7, &ThreadRundown::default()).len(),
            0x20 + 8 + 7 * 4 + 8
        );
    }
}
