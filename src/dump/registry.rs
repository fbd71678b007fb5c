//! The detection registry (issue 28, step 1): one ordered table of the formats a file may be
//! in. [`super::DumpFile::open`] and [`super::DumpFile::from_bytes`] ask each entry's probe in
//! order (the first bytes of the file, its name, the crash-dump header once parsed) and open
//! the file with the first that says yes; when none does, the crash-dump header's own error
//! (not a dump, an unsupported DumpType) is the answer.
//!
//! After Volatility 3's automagic stacker (each layer class offers a cheap `stack` check and
//! the first that claims the file builds the layer) and gimli's `object` crate
//! (`FileKind::parse` then one module per format), reduced to a static table: no plugin
//! loading, and the order is the precedence.
//!
//! **A new container** (docs/memory-stack.md) is one file under `src/dump/` holding its
//! parser, a type implementing [`super::Container`], a probe and an open function, plus one
//! line in [`FORMATS`].

use super::format::{Format, Input, Opened};
use super::header::DumpHeader;
use super::{bitmap, hiberfil, image, runs, triage, DumpError};

/// The formats, in order of precedence: the first whose probe says yes opens the file.
pub(crate) static FORMATS: &[Format] = &[
    image::VMWARE_STATE,
    image::VMWARE_VMEM,
    image::ELF_CORE,
    hiberfil::HIBERFIL,
    image::RAW,
    runs::FULL_DUMP,
    bitmap::BITMAP_DUMP,
    triage::TRIAGE_DUMP,
    image::RDMP_DUMP,
];

/// Open `input` with the first format whose probe says yes.
pub(crate) fn open(input: Input<'_>) -> Result<Opened, DumpError> {
    match FORMATS.iter().find(|f| (f.probe)(&input)) {
        Some(f) => (f.open)(input).map(|o| Opened {
            format: f.name,
            ..o
        }),
        None => Err(unrecognised(input.bytes())),
    }
}

/// Why no format took the file: the crash-dump header's error, or its DumpType that no
/// format opens.
fn unrecognised(file: &[u8]) -> DumpError {
    let header = match DumpHeader::parse(file) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let other = header.dump_type;
    match other.name() {
        Some(name) => DumpError::UnsupportedDumpType {
            value: other.0,
            name,
        },
        None => DumpError::UnknownDumpType {
            value: other.0,
            offset: header.dump_type_offset(),
        },
    }
}
