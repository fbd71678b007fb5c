//! Writing an .etl file (etw-internals.md §6.1): a header buffer whose first record is a
//! SYSTEM_TRACE header (hook 0x0000) carrying a TRACE_LOGFILE_HEADER, then buffers of the same
//! BufferSize, each fixed up as a flushed buffer (SavedOffset = CurrentOffset = Offset = the end
//! of the last complete record, the rest 0xFF, State Flush, the processor index).
//!
//! This module owns the bytes; what goes into them (which buffers, which clock facts) is the
//! caller's. `EtlFileWriter` writes one file to a temporary name, hashes it on a second
//! thread and renames it into place only when it is complete.

use super::header::{
    offsets, BUFFER_HEADER_SIZE, BUFFER_TYPE_HEADER, FLAG_PROCESSOR_INDEX, STATE_FLUSH,
};
use super::records::{walk, Walk};
use crate::dump::Arch;
use ring::digest::{Context as Sha256, SHA256};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// LogFileMode bits a file header never carries: REAL_TIME (0x100) and the hybrid-shutdown
/// bits 0x00400000 / 0x00800000 (§6.1).
const MODE_NOT_IN_FILE: u32 = 0x100 | 0x0040_0000 | 0x0080_0000;

/// What the TRACE_LOGFILE_HEADER of a file says (§6.1; the x64 layout is 0x118 bytes, x86
/// 0x110, then LoggerName and LogFileName as NUL-terminated UTF-16).
#[derive(Clone, Debug)]
pub struct LogfileHeader<'a> {
    /// The traced machine: its pointer size gives the header's layout and PointerSize.
    pub arch: Arch,
    pub buffer_size: u32,
    /// VersionDetail: MajorVersion, MinorVersion (SubVersion 1, SubMinorVersion 5 are fixed).
    pub os_version: (u8, u8),
    pub build: u32,
    pub processors: u32,
    /// EndTime (FILETIME).
    pub end_time: u64,
    pub timer_resolution: u32,
    /// LogFileMode as the logger had it (the bits a file never carries are cleared here).
    pub log_file_mode: u32,
    /// BuffersWritten: the buffers in the file, the header buffer included.
    pub buffers_written: u32,
    pub events_lost: u32,
    pub cpu_speed_mhz: u32,
    /// BootTime (FILETIME).
    pub boot_time: u64,
    pub perf_freq: u64,
    /// StartTime (FILETIME, as WMI_LOGGER_CONTEXT.StartTime and real files hold it).
    pub start_time: u64,
    /// The header event's SYSTEM_TRACE_HEADER: its time in the logger's clock (real files:
    /// when the file was started) and the process and thread that wrote it (real files: the
    /// controller's or the logger thread's); 0 where unknown.
    pub header_event_time: u64,
    pub header_event_pid: u32,
    pub header_event_tid: u32,
    pub clock_type: u32,
    pub buffers_lost: u32,
    /// ClientContext.LoggerId of the header buffer.
    pub logger_id: u64,
    pub logger_name: &'a str,
    pub log_file_name: &'a str,
}

fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn utf16z(s: &str) -> Vec<u8> {
    s.encode_utf16()
        .chain([0])
        .flat_map(|u| u.to_le_bytes())
        .collect()
}

/// Whether records and headers written for `arch` take their 64-bit forms.
pub(crate) fn wide(arch: Arch) -> bool {
    match arch {
        Arch::X86 { .. } => false,
        Arch::X64 => true,
        Arch::Arm64 => true, // ARM64 writes the 64-bit forms (as x64) today
    }
}

/// A SYSTEM_TRACE_HEADER record (0x20 bytes + payload; 32-bit form 0xC001, 64-bit 0xC002).
pub(crate) fn system_record(
    arch: Arch,
    version: u16,
    hook: u16,
    tid: u32,
    pid: u32,
    ts: u64,
    payload: &[u8],
) -> Vec<u8> {
    let size = 0x20 + payload.len();
    let mut r = Vec::with_capacity(size);
    let form = if wide(arch) {
        0xC002_0000u32
    } else {
        0xC001_0000
    };
    let marker = form | u32::from(version);
    r.extend_from_slice(&marker.to_le_bytes());
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.extend_from_slice(&hook.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(&[0u8; 8]); // KernelTime, UserTime
    r.extend_from_slice(payload);
    r
}

/// The hook of the partition information Windows writes after the header event.
pub const HOOK_PARTITION_INFO: u16 = 0x0050;

/// The 0x0050 partition-information record of the host partition (all zero; its layout is
/// described with the rundown's records, `etl::rundown`).
pub fn partition_info(arch: Arch, tid: u32, pid: u32, ts: u64) -> Vec<u8> {
    system_record(arch, 2, HOOK_PARTITION_INFO, tid, pid, ts, &[0u8; 0x30])
}

/// A PERFINFO_TRACE_HEADER record (0x10 bytes + payload; 32-bit form 0xC010, 64-bit 0xC011).
pub(crate) fn perfinfo_record(
    arch: Arch,
    version: u16,
    hook: u16,
    ts: u64,
    payload: &[u8],
) -> Vec<u8> {
    let size = 0x10 + payload.len();
    let mut r = Vec::with_capacity(size);
    let form = if wide(arch) {
        0xC011_0000u32
    } else {
        0xC010_0000
    };
    let marker = form | u32::from(version);
    r.extend_from_slice(&marker.to_le_bytes());
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.extend_from_slice(&hook.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    r.extend_from_slice(payload);
    r
}

/// The header buffer: WMI_BUFFER_HEADER + SYSTEM_TRACE_HEADER + TRACE_LOGFILE_HEADER + names,
/// `h.buffer_size` bytes (more only if the names do not fit), the rest 0xFF.
pub fn header_buffer(h: &LogfileHeader<'_>) -> Vec<u8> {
    let wide = wide(h.arch);
    let mut tlh = vec![0u8; if wide { 0x118 } else { 0x110 }];
    put32(&mut tlh, 0x00, h.buffer_size);
    tlh[0x04..0x08].copy_from_slice(&[h.os_version.0, h.os_version.1, 1, 5]);
    put32(&mut tlh, 0x08, h.build);
    put32(&mut tlh, 0x0C, h.processors);
    put64(&mut tlh, 0x10, h.end_time);
    put32(&mut tlh, 0x18, h.timer_resolution);
    put32(&mut tlh, 0x20, h.log_file_mode & !MODE_NOT_IN_FILE);
    put32(&mut tlh, 0x24, h.buffers_written);
    put32(&mut tlh, 0x28, 1); // StartBuffers
    put32(&mut tlh, 0x2C, if wide { 8 } else { 4 });
    put32(&mut tlh, 0x30, h.events_lost);
    put32(&mut tlh, 0x34, h.cpu_speed_mhz);
    let tail = if wide { 0xF8 } else { 0xF0 };
    put64(&mut tlh, tail, h.boot_time);
    put64(&mut tlh, tail + 8, h.perf_freq);
    put64(&mut tlh, tail + 0x10, h.start_time);
    put32(&mut tlh, tail + 0x18, h.clock_type);
    put32(&mut tlh, tail + 0x1C, h.buffers_lost);
    tlh.extend(utf16z(h.logger_name));
    tlh.extend(utf16z(h.log_file_name));
    // Keep the record 8-aligned (zeros after the strings are inside the record).
    while (0x20 + tlh.len()) % 8 != 0 {
        tlh.push(0);
    }
    let mut rec = system_record(
        h.arch,
        2,
        0x0000,
        h.header_event_tid,
        h.header_event_pid,
        h.header_event_time,
        &tlh,
    );
    // Then, as in every real file (shared/data), the partition information of the host
    // partition, stamped like the header event (rundown.rs).
    rec.extend(partition_info(
        h.arch,
        h.header_event_tid,
        h.header_event_pid,
        h.header_event_time,
    ));
    let end = BUFFER_HEADER_SIZE + rec.len();
    let mut b = vec![0u8; BUFFER_HEADER_SIZE];
    put32(&mut b, offsets::BUFFER_SIZE, h.buffer_size);
    put32(&mut b, offsets::SAVED_OFFSET, end as u32);
    put32(&mut b, offsets::CURRENT_OFFSET, end as u32);
    put32(&mut b, offsets::CLIENT_CONTEXT, (h.logger_id as u32) << 16);
    put32(&mut b, offsets::STATE, STATE_FLUSH);
    put32(&mut b, offsets::OFFSET, end as u32);
    b[offsets::BUFFER_FLAG..offsets::BUFFER_FLAG + 2]
        .copy_from_slice(&(0x01 | FLAG_PROCESSOR_INDEX).to_le_bytes());
    b[offsets::BUFFER_TYPE..offsets::BUFFER_TYPE + 2]
        .copy_from_slice(&BUFFER_TYPE_HEADER.to_le_bytes());
    b.extend(rec);
    b.resize((h.buffer_size as usize).max(end), 0xFF);
    b
}

/// What a synthetic WMI_BUFFER_HEADER says.
#[derive(Clone, Debug)]
pub(crate) struct SyntheticHeader {
    pub size: usize,
    pub logger_id: u64,
    pub sequence_number: u64,
    pub timestamp: u64,
    pub buffer_type: u16,
    pub processor: Option<u64>,
}

/// A file buffer of `h.size` bytes: a WMI_BUFFER_HEADER built from `h` (BufferSize,
/// TimeStamp, SequenceNumber, ClientContext.LoggerId, BufferType), then `records` from 0x48
/// (laid out as in a buffer), the valid end 8-aligned with a zero pad, fixed up like a
/// recovered buffer. None when the records do not fit.
pub(crate) fn synthetic_buffer(h: &SyntheticHeader, records: &[u8]) -> Option<(Vec<u8>, Walk)> {
    let end = BUFFER_HEADER_SIZE + records.len().next_multiple_of(8);
    if end > h.size {
        return None;
    }
    let mut b = vec![0u8; h.size];
    put32(&mut b, offsets::BUFFER_SIZE, h.size as u32);
    put64(&mut b, offsets::TIME_STAMP, h.timestamp);
    put64(&mut b, offsets::SEQUENCE_NUMBER, h.sequence_number);
    put32(&mut b, offsets::CLIENT_CONTEXT, (h.logger_id as u32) << 16);
    b[offsets::BUFFER_TYPE..offsets::BUFFER_TYPE + 2].copy_from_slice(&h.buffer_type.to_le_bytes());
    b[BUFFER_HEADER_SIZE..BUFFER_HEADER_SIZE + records.len()].copy_from_slice(records);
    let w = walk(&b, end);
    fix_up(&mut b, h.processor, w.end);
    Some((b, w))
}

/// A file buffer of `size` bytes from a saved buffer start (`saved` = its header and its
/// valid bytes), fixed up like a recovered buffer. None when `saved` is longer than `size`.
pub(crate) fn saved_buffer(
    size: usize,
    processor: Option<u64>,
    saved: &[u8],
) -> Option<(Vec<u8>, Walk)> {
    let mut b = vec![0u8; size];
    b.get_mut(..saved.len())?.copy_from_slice(saved);
    let w = walk(&b, saved.len());
    fix_up(&mut b, processor, w.end);
    Some((b, w))
}

/// Fix a buffer up for the file, in place: SavedOffset = CurrentOffset = Offset = `end` (the
/// end of its last complete record), State Flush, the processor index (with the BufferFlag bit
/// saying it is valid) when known, and 0xFF after `end`.
pub(crate) fn fix_up(d: &mut [u8], processor: Option<u64>, end: usize) {
    put32(d, offsets::SAVED_OFFSET, end as u32);
    put32(d, offsets::CURRENT_OFFSET, end as u32);
    put32(d, offsets::STATE, STATE_FLUSH);
    put32(d, offsets::OFFSET, end as u32);
    if let Some(cpu) = processor {
        let cc = u16::try_from(cpu & 0x7FF).unwrap_or(0);
        d[offsets::CLIENT_CONTEXT..offsets::CLIENT_CONTEXT + 2].copy_from_slice(&cc.to_le_bytes());
        let f = offsets::BUFFER_FLAG;
        let flag = u16::from_le_bytes([d[f], d[f + 1]]) | FLAG_PROCESSOR_INDEX;
        d[f..f + 2].copy_from_slice(&flag.to_le_bytes());
    }
    d[end..].fill(0xFF);
}

/// A file name for a logger: `<id>-<name>.etl`, with the name reduced to `[A-Za-z0-9._ -]`,
/// no leading dots or spaces, at most 80 characters. Logger names come from memory an attacker
/// may control: the result never leaves the output directory.
pub fn file_name(id: u64, name: Option<&str>) -> String {
    let mut clean: String = name
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " ._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    while clean.contains("..") {
        clean = clean.replace("..", "_");
    }
    let clean = clean.trim_matches(|c| c == '.' || c == ' ').to_string();
    let clean: String = clean.chars().take(80).collect();
    let clean = if clean.is_empty() {
        "logger".to_string()
    } else {
        clean
    };
    format!("{id:02}-{clean}.etl")
}

type Shared = Arc<Vec<u8>>;

/// One .etl file being written: buffers are appended in order to `.<name>.tmp-<pid>` in the
/// output directory and hashed (SHA-256) on a second thread, which hands each buffer back for
/// reuse ([`EtlFileWriter::spare`]: no zero-fill, no new page faults); [`EtlFileWriter::commit`]
/// renames the file into place. Dropped without a commit, the temporary file is removed, so a
/// partial file never carries the final name. Without hashing (`extract --no-hash`) the second
/// thread writes the file instead, so that reading the next buffers and writing these overlap.
pub(crate) struct EtlFileWriter {
    tmp: PathBuf,
    path: PathBuf,
    /// Hashing: the file, written on this thread.
    file: Option<File>,
    /// The second thread: buffers to hash (or, without hashing, to write) in order.
    to_worker: Option<SyncSender<Job>>,
    back: Receiver<Shared>,
    worker: Option<JoinHandle<Worked>>,
    len: u64,
    rehash: bool,
    committed: bool,
}

/// Work for the second thread.
enum Job {
    /// Hash (or write) these bytes next.
    Append(Shared),
    /// Without hashing: write these bytes at the start of the file (the header buffer again).
    Rewrite(Vec<u8>),
}

/// What the second thread gives back: the hash, or the file it wrote (or the write's error).
enum Worked {
    Hashed(Box<Sha256>),
    Written(std::io::Result<File>),
}

impl EtlFileWriter {
    /// Start `dir/name` (the directory must exist); `hash`: compute its SHA-256.
    pub fn create_with(dir: &Path, name: &str, hash: bool) -> std::io::Result<EtlFileWriter> {
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let file = File::create(&tmp)?;
        let (back_tx, back) = channel::<Shared>();
        let (to_worker, rx) = sync_channel::<Job>(16);
        let (file, worker) = if hash {
            let h = std::thread::spawn(move || {
                let mut h = Sha256::new(&SHA256);
                for job in rx {
                    if let Job::Append(b) = job {
                        h.update(&b);
                        // The writer may be gone (error path): then the buffer is dropped.
                        let _ = back_tx.send(b);
                    }
                }
                Worked::Hashed(Box::new(h))
            });
            (Some(file), h)
        } else {
            let h = std::thread::spawn(move || {
                let mut file = file;
                for job in rx {
                    let r = match job {
                        Job::Append(b) => {
                            let r = file.write_all(&b);
                            let _ = back_tx.send(b);
                            r
                        }
                        Job::Rewrite(b) => file
                            .seek(SeekFrom::Start(0))
                            .and_then(|_| file.write_all(&b))
                            .and_then(|()| file.seek(SeekFrom::End(0)).map(|_| ())),
                    };
                    // The first error ends the thread; the writer learns it at its next push.
                    if let Err(e) = r {
                        return Worked::Written(Err(e));
                    }
                }
                Worked::Written(Ok(file))
            });
            (None, h)
        };
        Ok(EtlFileWriter {
            tmp,
            path: dir.join(name),
            file,
            to_worker: Some(to_worker),
            back,
            worker: Some(worker),
            len: 0,
            rehash: false,
            committed: false,
        })
    }

    /// The temporary file's path (for error messages).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// A buffer handed back by the second thread, or a new empty one.
    pub fn spare(&mut self) -> Vec<u8> {
        self.back
            .try_recv()
            .ok()
            .and_then(|a| Arc::try_unwrap(a).ok())
            .unwrap_or_default()
    }

    /// Bytes written so far: the file offset of the next buffer.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The second thread's result once it has stopped (its error, when writing failed).
    fn stopped(&mut self) -> std::io::Error {
        self.to_worker = None;
        match self.worker.take().map(JoinHandle::join) {
            Some(Ok(Worked::Written(Err(e)))) => e,
            _ => std::io::Error::other("the writing thread stopped"),
        }
    }

    /// Append one buffer.
    pub fn push(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
        if self.committed {
            return Err(closed());
        }
        if let Some(file) = self.file.as_mut() {
            file.write_all(&bytes)?;
        }
        let n = bytes.len() as u64;
        let sent = self
            .to_worker
            .as_ref()
            .map(|tx| tx.send(Job::Append(Arc::new(bytes))).is_ok());
        if sent != Some(true) {
            return Err(self.stopped());
        }
        self.len += n;
        Ok(())
    }

    /// Replace the file's first bytes (the header buffer, when BuffersWritten changed after it
    /// was written); the hash is then computed again from the file at commit.
    pub(crate) fn rewrite_start(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.committed {
            return Err(closed());
        }
        match self.file.as_mut() {
            Some(file) => {
                file.seek(SeekFrom::Start(0))?;
                file.write_all(bytes)?;
                file.seek(SeekFrom::End(0))?;
            }
            None => {
                let sent = self
                    .to_worker
                    .as_ref()
                    .map(|tx| tx.send(Job::Rewrite(bytes.to_vec())).is_ok());
                if sent != Some(true) {
                    return Err(self.stopped());
                }
            }
        }
        self.rehash = true;
        Ok(())
    }

    /// Finish: rename the file into place. Returns (bytes, SHA-256 in hex: None when the
    /// file was not hashed).
    pub(crate) fn commit(mut self) -> std::io::Result<(u64, Option<String>)> {
        if self.committed {
            return Err(closed());
        }
        drop(self.to_worker.take()); // ends the second thread's loop
        let worked = self
            .worker
            .take()
            .ok_or_else(closed)?
            .join()
            .map_err(|_| std::io::Error::other("the second thread panicked"))?;
        let hasher = match worked {
            Worked::Hashed(_) if self.rehash => {
                // Read back in 1 MiB steps (the file may be gigabytes; this thread wrote it).
                let mut h = Sha256::new(&SHA256);
                let mut f = File::open(&self.tmp)?;
                let mut step = vec![0u8; 1 << 20];
                loop {
                    match std::io::Read::read(&mut f, &mut step) {
                        Ok(0) => break,
                        Ok(n) => h.update(&step[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(h)
            }
            Worked::Hashed(h) => Some(*h),
            Worked::Written(file) => {
                drop(file?);
                None
            }
        };
        // No fsync: the rename is what keeps a partial file from ever carrying the final name.
        drop(self.file.take());
        std::fs::rename(&self.tmp, &self.path)?;
        self.committed = true;
        let hex = hasher.map(|h| {
            h.finish()
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        });
        Ok((self.len, hex))
    }
}

fn closed() -> std::io::Error {
    std::io::Error::other("the file is already finished")
}

impl Drop for EtlFileWriter {
    fn drop(&mut self) {
        drop(self.to_worker.take());
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
        drop(self.file.take());
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::header::BufferHeader;

    #[test]
    fn hostile_names_become_safe_file_names() {
        assert_eq!(
            file_name(2, Some("Circular Kernel Context Logger")),
            "02-Circular Kernel Context Logger.etl"
        );
        assert_eq!(
            file_name(3, Some("../../etc/passwd")),
            "03-____etc_passwd.etl"
        );
        assert_eq!(
            file_name(4, Some("a/b\\c:d*e?f\"g<h>i|j")),
            "04-a_b_c_d_e_f_g_h_i_j.etl"
        );
        assert_eq!(file_name(5, Some("..")), "05-_.etl");
        assert_eq!(file_name(6, Some("\u{0}\u{1b}[31m")), "06-___31m.etl");
        assert_eq!(file_name(7, None), "07-logger.etl");
        assert_eq!(file_name(8, Some("   ")), "08-logger.etl");
        let long = "x".repeat(5000);
        assert_eq!(file_name(9, Some(&long)).len(), 3 + 80 + 4);
        assert_eq!(file_name(10, Some("Ünïcode名")), "10-_n_code_.etl");
        for n in ["CON", "nul", "COM1"] {
            // Reserved device names never stand alone: the id prefix is always there.
            assert!(file_name(1, Some(n)).starts_with("01-"));
        }
    }

    fn logfile(arch: Arch) -> LogfileHeader<'static> {
        LogfileHeader {
            arch,
            buffer_size: 0x1000,
            os_version: (10, 0),
            build: 19041,
            processors: 4,
            end_time: 0x01D7_0000_0000_0000,
            timer_resolution: 156_250,
            log_file_mode: 0x100 | 0x2,
            buffers_written: 3,
            events_lost: 7,
            cpu_speed_mhz: 3000,
            boot_time: 0x01D6_0000_0000_0000,
            perf_freq: 10_000_000,
            start_time: 12345,
            header_event_time: 0x1234_5678,
            header_event_pid: 4,
            header_event_tid: 0x44,
            clock_type: 1,
            buffers_lost: 2,
            logger_id: 5,
            logger_name: "Test",
            log_file_name: "C:\\t.etl",
        }
    }

    #[test]
    fn header_buffer_reads_back_through_the_header_and_record_walk() {
        for arch in [Arch::X64, Arch::X86 { pae: true }] {
            let b = header_buffer(&logfile(arch));
            assert_eq!(b.len(), 0x1000);
            let h = BufferHeader::from_bytes(&b).unwrap();
            assert_eq!((h.buffer_size, h.logger_id, h.state), (0x1000, 5, 3));
            assert_eq!(h.buffer_type, u64::from(BUFFER_TYPE_HEADER));
            let end = h.saved_offset as usize;
            assert_eq!(h.valid_bytes(), Some(end as u64));
            // The header event, then the 0x0050 partition record.
            let w = walk(&b, end);
            assert_eq!((w.count, w.end), (2, end));
            assert_eq!(w.first.as_ref().and_then(|r| r.hook), Some(0x0000));
            assert!(b[end..].iter().all(|&x| x == 0xFF));
            let tlh = BUFFER_HEADER_SIZE + 0x20;
            let le32 = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            // The header event's thread, process and time (SYSTEM_TRACE_HEADER +8, +0xC, +0x10).
            let ev = BUFFER_HEADER_SIZE;
            assert_eq!((le32(ev + 8), le32(ev + 0xC)), (0x44, 4));
            assert_eq!(
                u64::from_le_bytes(b[ev + 0x10..ev + 0x18].try_into().unwrap()),
                0x1234_5678
            );
            // LogFileMode without REAL_TIME; PointerSize; CpuSpeedInMHz; PerfFreq.
            assert_eq!(le32(tlh + 0x20), 0x2);
            assert_eq!(le32(tlh + 0x2C), if arch.is_64bit() { 8 } else { 4 });
            assert_eq!(le32(tlh + 0x34), 3000);
            let tail = tlh + if arch.is_64bit() { 0xF8 } else { 0xF0 };
            assert_eq!(
                u64::from_le_bytes(b[tail + 8..tail + 16].try_into().unwrap()),
                10_000_000
            );
        }
    }

    #[test]
    fn synthetic_and_saved_buffers_are_fixed_up() {
        // One 0x20-byte SYSTEM_TRACE record.
        let mut rec = vec![0u8; 0x20];
        rec[0..4].copy_from_slice(&0xC002_0002u32.to_le_bytes());
        rec[4..6].copy_from_slice(&0x20u16.to_le_bytes());
        rec[6..8].copy_from_slice(&0x0524u16.to_le_bytes());
        let h = SyntheticHeader {
            size: 0x200,
            logger_id: 9,
            sequence_number: 42,
            timestamp: 77,
            buffer_type: 2,
            processor: Some(3),
        };
        let (b, w) = synthetic_buffer(&h, &rec).unwrap();
        assert_eq!((w.count, w.end), (1, 0x68));
        let bh = BufferHeader::from_bytes(&b).unwrap();
        assert_eq!(
            (
                bh.saved_offset,
                bh.offset,
                bh.processor_index,
                bh.logger_id,
                bh.sequence_number
            ),
            (0x68, 0x68, 3, 9, 42)
        );
        assert_eq!(bh.buffer_flag & u64::from(FLAG_PROCESSOR_INDEX), 0x20);
        assert!(synthetic_buffer(&SyntheticHeader { size: 0x60, ..h }, &rec).is_none());
        let (c, w2) = saved_buffer(0x200, None, &b[..0x68]).unwrap();
        assert_eq!((w2.count, c[..0x68].to_vec()), (1, b[..0x68].to_vec()));
        assert!(saved_buffer(0x40, None, &b[..0x68]).is_none());
    }

    #[test]
    fn a_file_is_renamed_into_place_only_when_committed() {
        let dir = std::env::temp_dir().join(format!("etwdump-writer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = EtlFileWriter::create_with(&dir, "a.etl", true).unwrap();
        w.push(vec![1; 16]).unwrap();
        w.push(vec![2; 16]).unwrap();
        w.rewrite_start(&[3; 4]).unwrap();
        let (len, sha) = w.commit().unwrap();
        let bytes = std::fs::read(dir.join("a.etl")).unwrap();
        assert_eq!((len, bytes.len()), (32, 32));
        assert_eq!(&bytes[..5], &[3, 3, 3, 3, 1]);
        let mut h = Sha256::new(&SHA256);
        h.update(&bytes);
        let want: String = h
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, Some(want));
        // Not hashed (written on the second thread): the same bytes, no digest.
        let mut w = EtlFileWriter::create_with(&dir, "c.etl", false).unwrap();
        w.push(vec![1; 16]).unwrap();
        w.push(vec![2; 16]).unwrap();
        w.rewrite_start(&[3; 4]).unwrap();
        assert_eq!(w.commit().unwrap(), (32, None));
        assert_eq!(std::fs::read(dir.join("c.etl")).unwrap(), bytes);
        // Larger than the 1 MiB steps of the read-back: with and without a rewrite, the
        // digest is the file's.
        let sha_of = |p: &Path| -> String {
            let mut h = Sha256::new(&SHA256);
            h.update(&std::fs::read(p).unwrap());
            h.finish()
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        for (name, rewrite) in [("e.etl", false), ("f.etl", true)] {
            let mut w = EtlFileWriter::create_with(&dir, name, true).unwrap();
            for i in 0..40u8 {
                w.push(vec![i; 65536 + usize::from(i)]).unwrap();
            }
            if rewrite {
                w.rewrite_start(&[0xee; 4096]).unwrap();
            }
            let (len, sha) = w.commit().unwrap();
            let p = dir.join(name);
            assert_eq!(len, std::fs::metadata(&p).unwrap().len());
            assert_eq!(len, 40 * 65536 + (0..40).sum::<u64>());
            assert_eq!(sha, Some(sha_of(&p)), "{name}");
            assert_eq!(
                std::fs::read(&p).unwrap()[4095],
                if rewrite { 0xee } else { 0 }
            );
        }
        let mut dropped = EtlFileWriter::create_with(&dir, "b.etl", true).unwrap();
        dropped.push(vec![0; 8]).unwrap();
        let tmp = dropped.temp_path().to_path_buf();
        drop(dropped);
        assert!(!tmp.exists() && !dir.join("b.etl").exists());
        let mut dropped = EtlFileWriter::create_with(&dir, "d.etl", false).unwrap();
        dropped.push(vec![0; 8]).unwrap();
        let tmp = dropped.temp_path().to_path_buf();
        drop(dropped);
        assert!(!tmp.exists() && !dir.join("d.etl").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
