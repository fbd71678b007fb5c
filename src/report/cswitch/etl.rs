//! `etl FILE… --cswitch` (issue 29 item 4): the context switches of .etl files (a session's
//! own log file, `extract`'s output), per CPU in UTC order, through the same merge, names and
//! one-row-per-switch rule as a dump's ([`super`]), so a responder can lay the flushed and the
//! in-memory parts of a session side by side.
//!
//! What differs from a dump:
//! * **Units** are the files' buffers (every buffer after the header buffer, read again from
//!   the file when the merge reaches it: one buffer per open stream in memory); a buffer's CPU
//!   is its `ProcessorIndex`. A record's `sources` entry names the file and the record's offset
//!   in it.
//! * **Times** come from each file's own header ([`crate::report::events::etl_converter`]);
//!   a file is one clock group and one *recorder*: the same switch in two files (a buffer kept
//!   both in the log file and in memory) is one row with two sources.
//! * **MaximumWaitReason** (the state bias of compact switches) is the built-in table's for the
//!   build the file's header names (TRACE_LOGFILE_HEADER.ProviderVersion); a build the table
//!   does not pin leaves compact switches' state and wait reason empty, as for a dump.
//! * **Process names** come from the files' own Process and Thread events (start, end and
//!   rundown: `extract` writes the dump's process and thread list as a rundown into a kernel
//!   session's file): thread id → process id from the Thread events, process id → image name
//!   from the Process events. A thread id or process id the events give two different owners
//!   or names (reused over the trace) is not named (a warning counts them); thread 0 is Idle.
//! * No time is flagged as after the dump or before boot: a file has no dump time.
//!
//! Bounded: the buffers are walked as `etl --events` walks them (a BufferSize that does not fit
//! the file ends that file's walk with a warning); the name tables hold at most
//! [`MAX_NAMES`] entries each.

use super::{
    buffer_switches, key_of, resolution, run, Feed, Group, Last, Names, Plan, Raw, Source, Stream,
    SwitchRow,
};
use crate::decode::names::{maximum_wait_reason, MwrSource};
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE, FLAG_PROCESSOR_INDEX};
use crate::etl::records;
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

/// Entries kept in each name table (thread → process, process → name).
const MAX_NAMES: usize = 1 << 20;

/// Buffers with switches planned at most (about 90 bytes each, 90 MiB; 1 Mi buffers of 64 KiB
/// are 64 GiB of trace data). Beyond it a warning says the rest is not listed.
const MAX_STREAMS: usize = 1 << 20;

/// One .etl file to read switches from: the name it is shown by, and the open file.
pub struct EtlCswitchFile {
    pub name: String,
    pub file: std::fs::File,
}

/// The files and their buffers ([`Feed::Etl`]).
pub(super) struct EtlFeed {
    pub(super) files: Vec<FileEntry>,
    pub(super) buffers: Vec<Buf>,
}

pub(super) struct FileEntry {
    pub(super) name: String,
    file: std::fs::File,
    /// The file's MaximumWaitReason (its header's build), when known.
    mwr: Option<u8>,
}

/// One buffer of a file.
pub(super) struct Buf {
    pub(super) file: usize,
    /// The buffer's offset in its file.
    pub(super) offset: u64,
    size: usize,
    /// SavedOffset: the end of its records.
    valid: usize,
}

impl EtlFeed {
    /// Buffer `i`'s bytes, read again from its file (None when the read fails: the file
    /// changed since it was planned).
    fn bytes(&self, i: usize) -> Option<Vec<u8>> {
        let b = self.buffers.get(i)?;
        let mut f = &self.files.get(b.file)?.file;
        let mut data = vec![0u8; b.size];
        f.seek(SeekFrom::Start(b.offset)).ok()?;
        f.read_exact(&mut data).ok()?;
        Some(data)
    }

    /// The switches of buffer `i`, in record order.
    pub(super) fn switches(&self, i: usize, _plan_mwr: Option<u8>) -> Vec<Raw> {
        let Some(b) = self.buffers.get(i) else {
            return Vec::new();
        };
        let mwr = self.files[b.file].mwr;
        match self.bytes(i) {
            Some(data) => buffer_switches(&data, BUFFER_HEADER_SIZE, b.valid, mwr),
            None => Vec::new(),
        }
    }
}

/// Thread → process and process → name, from the files' Process and Thread events.
#[derive(Default)]
struct NameTables {
    /// tid → pid (None: the events name two processes).
    threads: HashMap<u32, Option<u32>>,
    /// pid → image name (None: the events give two names).
    processes: HashMap<u32, Option<Untrusted>>,
    /// Entries not kept: the tables were full.
    dropped: usize,
}

impl NameTables {
    fn thread(&mut self, tid: u32, pid: u32) {
        let full = self.threads.len() >= MAX_NAMES;
        match self.threads.get_mut(&tid) {
            Some(v) if *v != Some(pid) => *v = None,
            Some(_) => {}
            None if full => self.dropped += 1,
            None => {
                self.threads.insert(tid, Some(pid));
            }
        }
    }

    fn process(&mut self, pid: u32, name: &Untrusted) {
        let full = self.processes.len() >= MAX_NAMES;
        match self.processes.get_mut(&pid) {
            Some(v) if v.as_ref() != Some(name) => *v = None,
            Some(_) => {}
            None if full => self.dropped += 1,
            None => {
                self.processes.insert(pid, Some(name.clone()));
            }
        }
    }

    /// Learn from every Process and Thread event of buffer `data` (records up to `valid`).
    fn learn(&mut self, data: &[u8], valid: usize) {
        records::walk_from(data, BUFFER_HEADER_SIZE, valid, |r| {
            // Windows writes Process rundown with PERFINFO headers, Thread events with SYSTEM
            // headers (the real ShutdownPerfDiagLogger.etl): any kernel header will do.
            let Some(group) = r.hook.map(|h| h >> 8) else {
                return;
            };
            // Start, end, rundown start and end (types 1-4) of the Process (0x03) and Thread
            // (0x05) groups.
            if !matches!(r.hook.map(|h| h & 0xFF), Some(1..=4)) {
                return;
            }
            let Some(p) = crate::decode::mof::decode(data, r) else {
                return;
            };
            let pid = p.number("ProcessId").and_then(|v| u32::try_from(v).ok());
            match (group, pid) {
                (0x03, Some(pid)) => {
                    if let Some(name) = p.text("ImageFileName") {
                        self.process(pid, name);
                    }
                }
                (0x05, Some(pid)) => {
                    if let Some(tid) = p.number("TThreadId").and_then(|v| u32::try_from(v).ok()) {
                        self.thread(tid, pid);
                    }
                }
                _ => {}
            }
        });
    }
}

/// Plan the switches of `files` (of CPU `cpu_filter`, all when None): read every buffer once
/// for its time range and the name tables. An error when a file is not an .etl file at all
/// (named in the message).
fn plan_etl(
    files: Vec<EtlCswitchFile>,
    cpu_filter: Option<u64>,
    max_streams: usize,
) -> std::io::Result<Plan<'static, 'static>> {
    let mut warnings = Vec::new();
    let mut cut = false;
    let mut groups: Vec<Group> = Vec::new();
    let mut streams = Vec::new();
    let mut feed = EtlFeed {
        files: Vec::new(),
        buffers: Vec::new(),
    };
    let mut names = NameTables::default();
    for EtlCswitchFile { name, file } in files {
        let fi = feed.files.len();
        let len = file.metadata()?.len();
        let mut r = &file;
        r.seek(SeekFrom::Start(0))?;
        let mut off = 0u64;
        let mut mwr = None;
        let mut g = None;
        let mut buf = Vec::new();
        while off < len {
            if let Err(why) = crate::etl::reader::read_buffer(&mut r, off, len, &mut buf)? {
                if off == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{name}: not an ETL file: {why}"),
                    ));
                }
                warnings.push(Warning::new(
                    WarningKind::Bound,
                    format!("{name}: buffers stop: {why}"),
                ));
                break;
            }
            let size = buf.len() as u64;
            let saved = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
            let valid = saved.min(buf.len());
            let gi = match g {
                Some(gi) => gi,
                None => {
                    // The header buffer: the clock and the build.
                    let (conv, _, w) = crate::report::events::etl_clock(&name, &buf)
                        .map_err(|e| std::io::Error::new(e.kind(), format!("{name}: {e}")))?;
                    warnings.extend(w);
                    let header = crate::etl::logfile::parse(&buf).ok();
                    let build = header.map(|h| h.build);
                    mwr = file_mwr(&name, build, &mut warnings);
                    groups.push(Group {
                        resolution: resolution(&conv, build.unwrap_or(0)),
                        conv,
                        whose: name.clone(),
                        logger_id: None,
                        clock: None,
                        clock_type: header.map(|h| u64::from(h.clock_type)),
                        found_by: None,
                        block: None,
                    });
                    g = Some(groups.len() - 1);
                    groups.len() - 1
                }
            };
            names.learn(&buf, valid);
            let h = BufferHeader::from_bytes(&buf);
            let cpu = h.map(|h| {
                if h.buffer_flag & u64::from(FLAG_PROCESSOR_INDEX) != 0 {
                    h.processor_index
                } else {
                    h.processor_index & 0xFF
                }
            });
            let at = off;
            off += size;
            if cpu_filter.is_some_and(|c| cpu != Some(c)) {
                continue;
            }
            let rows = buffer_switches(&buf, BUFFER_HEADER_SIZE, valid, mwr);
            let conv = &groups[gi].conv;
            let (Some(first), Some(last)) = (
                rows.iter().map(|r| key_of(conv, gi, r.ts)).min(),
                rows.iter().map(|r| r.ts).max(),
            ) else {
                continue;
            };
            // Only buffers with switches are kept, at most `max_streams` of them: a crafted
            // file of many tiny buffers must not grow the plan without bound.
            if streams.len() >= max_streams {
                cut = true;
                continue;
            }
            let bi = feed.buffers.len();
            feed.buffers.push(Buf {
                file: fi,
                offset: at,
                size: buf.len(),
                valid,
            });
            streams.push(Stream {
                cpu,
                group: gi,
                source: Source::Unit(bi),
                first_key: first,
                last_ts: last,
            });
        }
        feed.files.push(FileEntry { name, file, mwr });
    }
    if cut {
        warnings.push(Warning::new(
            WarningKind::Bound,
            format!(
                "the files hold more than {max_streams} buffers with context switches: the switches of the buffers after those are not listed"
            ),
        ));
    }
    let by_tid = name_warnings(&names, &mut warnings);
    let by_tid = super::threads(by_tid.iter().map(|(t, (p, n))| (*t, *p, n)));
    Ok(Plan {
        names: Names::new(None),
        feed: Feed::Etl(feed),
        facts: None,
        groups,
        streams,
        by_tid,
        mwr: None,
        warnings,
        late_warnings: Vec::new(),
    })
}

/// The MaximumWaitReason of the file `name` whose header names `build` (a note says where it
/// came from; a warning when it is not known).
fn file_mwr(name: &str, build: Option<u32>, warnings: &mut Vec<Warning>) -> Option<u8> {
    let found = build.and_then(maximum_wait_reason);
    match (build, found) {
        (Some(b), Some((v, how))) => {
            let how = match how {
                MwrSource::Known => "the built-in per-build table".to_string(),
                MwrSource::Between(a, c) => format!(
                    "the built-in per-build table, inferred: build {b} lies between {a} and {c}, which have the same value"
                ),
            };
            warnings.push(Warning::new(
                WarningKind::Inferred,
                format!("{name}: compact switches split with MaximumWaitReason {v} of build {b} (the header's ProviderVersion), from {how}"),
            ));
            Some(v)
        }
        (b, _) => {
            warnings.push(
                Warning::new(
                    WarningKind::NotFound,
                    format!(
                        "{name}: MaximumWaitReason of {} is unknown (no corpus build pins it): compact switches' OldThreadStateWr cannot be split, so their old state and wait reason are left empty (CSwitch events carry both and are decoded)",
                        b.map_or("the file's build (its header cannot be read)".to_string(), |b| format!("build {b} (the header's ProviderVersion)"))
                    ),
                )
                .field("TRACE_LOGFILE_HEADER.ProviderVersion"),
            );
            None
        }
    }
}

/// The thread table as [`Plan`] keeps it (tid → (pid, "name")), and the warnings about what
/// the events could not name.
fn name_warnings(
    names: &NameTables,
    warnings: &mut Vec<Warning>,
) -> HashMap<u64, (u64, Untrusted)> {
    let mut by_tid = HashMap::new();
    let (mut threads_reused, mut unnamed) = (0usize, 0usize);
    for (&tid, pid) in &names.threads {
        let Some(pid) = pid else {
            threads_reused += 1;
            continue;
        };
        match names.processes.get(pid) {
            Some(Some(n)) => {
                by_tid.insert(u64::from(tid), (u64::from(*pid), n.clone()));
            }
            _ => unnamed += 1,
        }
    }
    let processes_reused = names.processes.values().filter(|v| v.is_none()).count();
    if names.threads.is_empty() {
        warnings.push(Warning::new(
            WarningKind::NotFound,
            "no Thread events (start, end or rundown) in the files: switches show thread ids without processes".to_string(),
        ));
    } else {
        warnings.push(Warning::new(
            WarningKind::Inferred,
            format!(
                "process names from the files' own Process and Thread events: {} threads of {} processes named",
                by_tid.len(),
                names.processes.len()
            ),
        ));
    }
    if threads_reused + processes_reused + unnamed + names.dropped > 0 {
        // Ids the events name twice, and tables cut short, leave out names the files hold:
        // a warning. Threads of processes the files never describe are only unnamed, as
        // their rows show: a note.
        let kind = if threads_reused + processes_reused + names.dropped > 0 {
            WarningKind::NotFound
        } else {
            WarningKind::Inferred
        };
        warnings.push(Warning::new(
            kind,
            format!(
                "not named: {threads_reused} thread ids the Thread events give to two processes, {processes_reused} process ids the Process events give two names (ids reused over the trace), {unnamed} threads of processes without a Process event{}",
                if names.dropped > 0 {
                    format!(", and {} ids past the {MAX_NAMES}-entry tables", names.dropped)
                } else {
                    String::new()
                }
            ),
        ));
    }
    by_tid
}

/// Stream the context switches of the .etl `files` to `emit`, as [`super::stream_with`] does
/// for a dump (module documentation): per CPU in UTC order, one row per switch (one per
/// record with `per_record`), `--cpu` and `--last` applied (`--last` counts back from the
/// newest switch: a file has no dump time). Returns the warnings; an error when a file is not
/// an .etl file or cannot be read.
pub fn stream_etl(
    files: Vec<EtlCswitchFile>,
    cpu_filter: Option<u64>,
    last: Option<u64>,
    per_record: bool,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let p = plan_etl(files, cpu_filter, MAX_STREAMS)?;
    let last = last.map(|window| Last { window, end: None });
    run(p, last, per_record, emit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etw::clock::Converter;

    #[test]
    fn name_tables_mark_reused_ids_unknown() {
        let mut t = NameTables::default();
        t.thread(8, 4);
        t.thread(8, 4);
        t.thread(12, 4);
        t.thread(12, 900);
        t.process(4, &Untrusted::from("System"));
        t.process(900, &Untrusted::from("a.exe"));
        t.process(900, &Untrusted::from("b.exe"));
        let mut w = Vec::new();
        let by_tid = name_warnings(&t, &mut w);
        assert_eq!(by_tid.len(), 1);
        assert_eq!(by_tid[&8].0, 4);
        assert_eq!(by_tid[&8].1.raw(), "System");
        let text: Vec<String> = w.iter().map(|w| w.message.clone()).collect();
        assert!(
            text.iter().any(|m| m.contains("1 thread ids the Thread events give to two processes, 1 process ids the Process events give two names")),
            "{text:?}"
        );
    }

    #[test]
    fn name_tables_are_bounded() {
        let mut t = NameTables::default();
        for i in 0..(MAX_NAMES as u32 + 10) {
            t.thread(i, 4);
        }
        assert_eq!(t.threads.len(), MAX_NAMES);
        assert_eq!(t.dropped, 10);
    }

    #[test]
    fn unknown_build_leaves_mwr_unknown_with_a_warning() {
        let mut w = Vec::new();
        assert_eq!(file_mwr("f.etl", Some(26100), &mut w), None);
        assert!(w[0].message.contains("build 26100"), "{}", w[0].message);
        let mut w = Vec::new();
        assert_eq!(file_mwr("f.etl", Some(19041), &mut w), Some(40));
        assert_eq!(w[0].kind, WarningKind::Inferred);
        let mut w = Vec::new();
        assert_eq!(file_mwr("f.etl", None, &mut w), None);
    }

    /// The plan keeps only buffers with switches, at most the bound: beyond it, one warning,
    /// and the rows of the buffers within it (the sample's files, written by `extract`).
    #[test]
    fn the_plan_is_bounded() {
        use crate::dump::{DumpFile, OpenOptions};
        use crate::kernel::context::{KernelContext, SymbolOptions};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let d = DumpFile::open(
            &root.join("tests/data/sample-x64-etw.dmp"),
            OpenOptions::default(),
        )
        .unwrap();
        let opts = SymbolOptions {
            pdb: Some(root.join("tests/fixtures/x64-19041/ntkrnlmp.pdb")),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let dir = std::env::temp_dir().join(format!("etwdump-plan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        crate::report::extract::extract(&ctx, "sample", &dir, None, false).unwrap();
        let files = || {
            let mut paths: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "etl"))
                .collect();
            paths.sort();
            paths
                .into_iter()
                .map(|p| EtlCswitchFile {
                    name: p.display().to_string(),
                    file: std::fs::File::open(&p).unwrap(),
                })
                .collect::<Vec<_>>()
        };
        let all = plan_etl(files(), None, MAX_STREAMS).unwrap();
        // Every planned buffer has switches: one stream each.
        let Feed::Etl(f) = &all.feed else {
            panic!("an .etl plan")
        };
        assert_eq!(f.buffers.len(), all.streams.len());
        assert!(all.streams.len() > 3, "{}", all.streams.len());
        assert!(!all.warnings.iter().any(|w| w.kind == WarningKind::Bound));
        let cut = plan_etl(files(), None, 3).unwrap();
        assert_eq!(cut.streams.len(), 3);
        let Feed::Etl(f) = &cut.feed else {
            panic!("an .etl plan")
        };
        assert_eq!(f.buffers.len(), 3);
        let w: Vec<&str> = cut.warnings.iter().map(|w| w.message.as_str()).collect();
        assert!(
            w.contains(&"the files hold more than 3 buffers with context switches: the switches of the buffers after those are not listed"),
            "{w:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn converter_unknown_is_no_time() {
        // A group whose clock cannot be converted keys its rows after every timed one.
        let conv = Converter::Unknown("x".into());
        assert_eq!(key_of(&conv, 3, 77), (1, 3, 77));
    }
}
