//! `etwdump collect`: every artefact of a dump in one directory. The model of `collect.json`
//! (the artefacts, each with its files, and the warnings of them all, each once with the
//! artefacts that gave it), and the output directory: refused when it exists and is not
//! empty (unless replacing was asked for), written only through names etwdump chooses, each
//! file through a temporary name, counted and hashed as it is written.
//!
//! The artefacts are the other commands' outputs, made by their own models and renderers;
//! this module only holds what `collect` adds.

use super::extract::ExtractError;
use super::overview::DumpFacts;
use crate::warning::{Level, Warning};
use ring::digest::{Context, SHA256};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// `collect.json`: what was collected, from which dump, and how each artefact went.
#[derive(Debug, Serialize)]
pub struct Collection {
    /// The output contract's version ([`super::FORMAT_VERSION`]).
    pub format_version: u32,
    /// `collect`.
    pub command: &'static str,
    /// The dump as given on the command line.
    pub dump: String,
    pub etwdump_version: &'static str,
    pub summary: Summary,
    /// In the order they were made.
    pub artefacts: Vec<Artefact>,
    /// Every warning and note of every artefact, each once.
    pub warnings: Vec<CollectedWarning>,
    /// `index.html` (written after the rest; null until then).
    pub index: Option<FileEntry>,
}

/// The figures of the first table of `index.html`; null where the artefact that gives a
/// figure failed.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// The dump: kind, architecture, build, CPUs, time, symbols and how they were matched.
    pub dump: Option<DumpFacts>,
    /// The PDB or ISF file the symbols came from (null: built-in layouts).
    pub symbols_path: Option<String>,
    pub sessions: Option<u64>,
    pub buffers: Option<u64>,
    /// `.etl` files written by the extraction, and their records.
    pub etl_files: Option<u64>,
    pub etl_records: Option<u64>,
    /// Context switches (one per switch, as `cswitch` lists them).
    pub switches: Option<u64>,
    /// Records `events` lists (those without a time included).
    pub events: Option<u64>,
    pub providers: Option<u64>,
    /// Tamper-check findings.
    pub findings: Option<u64>,
    /// Objects the scan of physical memory found (buffers, pending blocks, logger contexts,
    /// orphan groups), and the carved .etl files written.
    pub scan_objects: Option<u64>,
    pub carved_files: Option<u64>,
    /// Artefacts made, and of them failed.
    pub artefacts: u64,
    pub failed: u64,
    /// Distinct warnings and notes.
    pub warnings: u64,
    pub notes: u64,
}

/// One artefact: the output of one command, in one or more files.
#[derive(Debug, Serialize)]
pub struct Artefact {
    /// `info`, `sessions`, `etl`, `cswitch`, ...
    pub name: &'static str,
    /// What it is, in words.
    pub title: &'static str,
    /// The command that writes the same files on its own.
    pub command: &'static str,
    pub status: Status,
    /// Why it failed (null when it did not).
    pub error: Option<String>,
    /// The files written (a failed artefact may have written some).
    pub files: Vec<FileEntry>,
    /// Its warnings and notes (in [`Collection::warnings`]).
    pub warnings: u64,
}

/// How an artefact went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
}

/// One file in the output directory.
#[derive(Clone, Debug, Serialize)]
pub struct FileEntry {
    /// Relative to the output directory, `/`-separated.
    pub path: String,
    pub bytes: u64,
    /// Rows (listings: lines or records written; .etl files: records), null for a document.
    pub rows: Option<u64>,
    pub sha256: String,
}

/// A warning and the artefacts that gave it.
#[derive(Debug, Serialize)]
pub struct CollectedWarning {
    #[serde(flatten)]
    pub warning: Warning,
    pub artefacts: Vec<&'static str>,
}

impl CollectedWarning {
    /// Each distinct warning of `all` once (in the order first given), with the artefacts
    /// that gave it.
    pub fn dedup(all: Vec<(&'static str, Warning)>) -> Vec<CollectedWarning> {
        let mut out: Vec<CollectedWarning> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (artefact, w) in all {
            let key = serde_json::to_string(&w).unwrap_or_else(|_| w.message.clone());
            match seen.get(&key) {
                Some(&i) => {
                    if !out[i].artefacts.contains(&artefact) {
                        out[i].artefacts.push(artefact);
                    }
                }
                None => {
                    seen.insert(key, out.len());
                    out.push(CollectedWarning {
                        warning: w,
                        artefacts: vec![artefact],
                    });
                }
            }
        }
        out
    }

    /// (warnings, notes) among `w`.
    pub fn counts(w: &[CollectedWarning]) -> (u64, u64) {
        let notes = w.iter().filter(|w| w.warning.level == Level::Note).count() as u64;
        (w.len() as u64 - notes, notes)
    }
}

/// The output directory of a collection. Every name written in it is etwdump's own (a
/// constant, or an .etl name made safe by `etl::writer::file_name`); nothing from the input
/// becomes a path.
pub struct OutputDir {
    root: PathBuf,
}

impl OutputDir {
    /// Refuse `dir` when it exists and is not empty, unless `overwrite` (then the files a
    /// collection writes replace those there; the others are left alone).
    pub fn check(dir: &Path, overwrite: bool) -> Result<(), ExtractError> {
        let io = |source| ExtractError::Io {
            path: dir.to_path_buf(),
            source,
        };
        match std::fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() && !overwrite {
                    return Err(ExtractError::Exists(dir.to_path_buf()));
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(e)),
        }
    }

    /// [`OutputDir::check`], then create `dir` (and its parents) if needed.
    pub fn create(dir: &Path, overwrite: bool) -> Result<OutputDir, ExtractError> {
        Self::check(dir, overwrite)?;
        std::fs::create_dir_all(dir).map_err(|source| ExtractError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(OutputDir {
            root: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Start the file `name` (one of etwdump's names, no directory part).
    pub fn file(&self, name: &'static str) -> Result<OutputFile, ExtractError> {
        OutputFile::create(&self.root, name)
    }

    /// The subdirectory `name`, created if needed; an error when something else than a
    /// directory has that name (a symbolic link is not followed: nothing is written outside
    /// the output directory).
    pub fn subdir(&self, name: &'static str) -> Result<PathBuf, ExtractError> {
        let p = self.root.join(name);
        let err = |source| ExtractError::Io {
            path: p.clone(),
            source,
        };
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_dir() => Ok(p),
            Ok(_) => Err(err(io::Error::other(
                "exists and is not a directory (a symbolic link is not followed)",
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(&p).map_err(err)?;
                Ok(p)
            }
            Err(e) => Err(err(e)),
        }
    }

    /// The entry of a file already written at `rel` (e.g. an extraction's manifest.json): its
    /// size and SHA-256, read back.
    pub fn entry(&self, rel: &str, rows: Option<u64>) -> Result<FileEntry, ExtractError> {
        let p = self.root.join(rel);
        let bytes = std::fs::read(&p).map_err(|source| ExtractError::Io { path: p, source })?;
        let mut h = Context::new(&SHA256);
        h.update(&bytes);
        Ok(FileEntry {
            path: rel.to_string(),
            bytes: bytes.len() as u64,
            rows,
            sha256: hex(h),
        })
    }
}

fn hex(h: Context) -> String {
    h.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One file of a collection being written: to `.<name>.tmp-<pid>` (created new, so no link
/// already there is followed), counted and hashed as it goes; [`OutputFile::finish`] renames
/// it into place (replacing, not following, what had the name). Dropped unfinished, the
/// temporary file is removed.
pub struct OutputFile {
    tmp: PathBuf,
    path: PathBuf,
    name: &'static str,
    out: Option<BufWriter<File>>,
    hash: Context,
    bytes: u64,
}

impl OutputFile {
    fn create(dir: &Path, name: &'static str) -> Result<OutputFile, ExtractError> {
        debug_assert!(!name.contains(['/', '\\']) && !name.starts_with('.'));
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let open = || File::options().write(true).create_new(true).open(&tmp);
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A leftover of an earlier run with this process id: removed (a link is
                // removed, not followed), then created anew.
                let _ = std::fs::remove_file(&tmp);
                open()
            }
            r => r,
        }
        .map_err(|source| ExtractError::Io {
            path: tmp.clone(),
            source,
        })?;
        Ok(OutputFile {
            path: dir.join(name),
            tmp,
            name,
            out: Some(BufWriter::with_capacity(1 << 16, file)),
            hash: Context::new(&SHA256),
            bytes: 0,
        })
    }

    /// Flush, rename into place; the file's entry (`rows` as given).
    pub fn finish(mut self, rows: Option<u64>) -> Result<FileEntry, ExtractError> {
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ExtractError::Io { path, source }
        };
        let out = self
            .out
            .take()
            .ok_or_else(|| err(&self.tmp)(io::Error::other("the file is already finished")))?;
        out.into_inner()
            .map_err(|e| err(&self.tmp)(e.into_error()))?;
        std::fs::rename(&self.tmp, &self.path).map_err(err(&self.path))?;
        let hash = std::mem::replace(&mut self.hash, Context::new(&SHA256));
        Ok(FileEntry {
            path: self.name.to_string(),
            bytes: self.bytes,
            rows,
            sha256: hex(hash),
        })
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| io::Error::other("the file is already finished"))?;
        let n = out.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out.as_mut() {
            Some(o) => o.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warning::WarningKind;

    /// A file is written under a temporary name, renamed into place with its size and hash;
    /// an unfinished one leaves nothing.
    #[test]
    fn files_are_counted_hashed_and_renamed() {
        let d = tempfile::tempdir().unwrap();
        let out = OutputDir::create(&d.path().join("o"), false).unwrap();
        let mut f = out.file("a.txt").unwrap();
        f.write_all(b"abc").unwrap();
        let e = f.finish(Some(1)).unwrap();
        assert_eq!(e.path, "a.txt");
        assert_eq!(e.bytes, 3);
        assert_eq!(
            e.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(std::fs::read(out.path().join("a.txt")).unwrap(), b"abc");
        let mut g = out.file("b.txt").unwrap();
        g.write_all(b"partial").unwrap();
        drop(g);
        let names: Vec<_> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["a.txt"]);
        // Not empty now: refused unless replacing is asked for.
        assert!(matches!(
            OutputDir::create(out.path(), false),
            Err(ExtractError::Exists(_))
        ));
        assert!(OutputDir::create(out.path(), true).is_ok());
    }

    /// A link where a subdirectory goes is not followed.
    #[cfg(unix)]
    #[test]
    fn a_linked_subdirectory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let out = OutputDir::create(&d.path().join("o"), false).unwrap();
        std::os::unix::fs::symlink(&outside, out.path().join("etl")).unwrap();
        let e = out.subdir("etl").unwrap_err().to_string();
        assert!(e.ends_with("etl: exists and is not a directory (a symbolic link is not followed)"));
        assert_eq!(out.subdir("scan").unwrap(), out.path().join("scan"));
        assert!(out.path().join("scan").is_dir());
    }

    #[test]
    fn warnings_are_kept_once_with_their_artefacts() {
        let a = Warning::new(WarningKind::Anomaly, "odd").logger(2);
        let b = Warning::new(WarningKind::Inferred, "found");
        let w = CollectedWarning::dedup(vec![
            ("sessions", a.clone()),
            ("buffers", b.clone()),
            ("events", a.clone()),
            ("events", a),
            ("scan", b),
        ]);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].artefacts, ["sessions", "events"]);
        assert_eq!(w[1].artefacts, ["buffers", "scan"]);
        assert_eq!(CollectedWarning::counts(&w), (1, 1));
        let j = serde_json::to_value(&w[0]).unwrap();
        assert_eq!(j["kind"], "anomaly");
        assert_eq!(j["logger_id"], 2);
        assert_eq!(j["artefacts"], serde_json::json!(["sessions", "events"]));
    }
}
