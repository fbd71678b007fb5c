//! What a container format is to the detection registry ([`super::registry`]): a
//! [`Format`] (name, probe, open), what its probe and open see ([`Input`]) and what its open
//! gives ([`Opened`]), and the steps every crash-dump format shares. Each format's file
//! imports this one; only the registry imports the formats.

use super::header::{DumpHeader, DumpType};
use super::{Backing, Container, DumpError, OpenOptions};
use crate::warning::Warning;
use std::cell::OnceCell;
use std::fs::File;
use std::path::Path;

/// What a format's probe and open see: the file (mapped or held in memory), its open handle
/// and path when opened from a path, and the options.
pub(crate) struct Input<'p> {
    pub backing: Backing,
    pub file: Option<File>,
    pub path: Option<&'p Path>,
    pub opts: OpenOptions,
    /// The crash-dump header, parsed once for the probes that ask.
    header: OnceCell<Option<DumpHeader>>,
}

impl<'p> Input<'p> {
    pub fn new(
        backing: Backing,
        file: Option<File>,
        path: Option<&'p Path>,
        opts: OpenOptions,
    ) -> Input<'p> {
        Input {
            backing,
            file,
            path,
            opts,
            header: OnceCell::new(),
        }
    }

    /// The file's bytes (mapped: only what is touched is read).
    pub fn bytes(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// The crash-dump header, if the file starts with a valid one.
    pub fn header(&self) -> Option<&DumpHeader> {
        self.header
            .get_or_init(|| DumpHeader::parse(self.bytes()).ok())
            .as_ref()
    }

    /// The crash-dump header's DumpType, if the file has a valid header.
    pub fn dump_type(&self) -> Option<DumpType> {
        self.header().map(|h| h.dump_type)
    }
}

/// What a format's open gives: the bytes the container reads (for a VMware state file
/// opened by path, its .vmem's), the container, the header (an image's is
/// [`DumpHeader::none`]) and the warnings of the open.
pub(crate) struct Opened {
    /// The registry entry's name ([`Format::name`]; "hosted layout" for `--layout`).
    pub format: &'static str,
    pub backing: Backing,
    pub file: Option<File>,
    pub header: DumpHeader,
    pub container: Box<dyn Container>,
    pub warnings: Vec<Warning>,
}

/// One format of the registry.
pub(crate) struct Format {
    /// For the reader of the table and of errors.
    pub name: &'static str,
    /// Cheap: the first bytes, the file name, the parsed header; no page is read.
    pub probe: fn(&Input<'_>) -> bool,
    /// Parse and validate the container (every extent against the file's length).
    pub open: fn(Input<'_>) -> Result<Opened, DumpError>,
}

/// The crash-dump header of a file a crash-dump format's probe took.
pub(crate) fn dump_header(input: &Input<'_>) -> Result<DumpHeader, DumpError> {
    match input.header() {
        Some(h) => Ok(h.clone()),
        None => DumpHeader::parse(input.bytes()),
    }
}

/// A crash dump's container opened: its page data, described by `what`, ends at file offset
/// `data_end` (None: past 2^64), checked against the file's length.
pub(crate) fn crash_dump(
    input: Input<'_>,
    header: DumpHeader,
    container: Box<dyn Container>,
    data_end: Option<u64>,
    what: String,
    mut warnings: Vec<Warning>,
) -> Result<Opened, DumpError> {
    let file_len = input.bytes().len() as u64;
    match data_end {
        Some(end) if end <= file_len => {}
        end => super::check_truncation(
            what,
            end.unwrap_or(u64::MAX),
            file_len,
            input.opts,
            &mut warnings,
        )?,
    }
    Ok(Opened {
        format: "",
        backing: input.backing,
        file: input.file,
        header,
        container,
        warnings,
    })
}
