//! The container interface (issue 28, step 1): what each format of file gives once it is
//! open. A format is one type implementing [`Container`] (a full dump's [`super::RunList`], a
//! bitmap dump's [`super::Bitmap`], a triage dump's [`super::Triage`], the physical ranges of
//! an image or RDMP dump, [`super::PhysImage`]) plus one line of the detection registry
//! ([`super::registry`]) that recognises and opens it. [`super::DumpFile`] is the opened file:
//! it holds the file's bytes and one `Box<dyn Container>`, and asks the container, never the
//! format, where a page is.
//!
//! The shape follows gimli's `object` crate (one `File` over per-format modules, each
//! implementing the same `Object` trait) and memflow's connectors (a connector is anything
//! that answers physical reads; memflow 0.2 `PhysicalMemory`), narrowed to read-only pages.

use super::PageLookup;
use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::LeBytes;
use std::any::Any;

/// How a container stores memory, as `info` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Storage {
    /// "physical (runs)", "physical (bitmap)", "virtual blocks (triage)", "physical (ranges)".
    pub kind: &'static str,
    /// Runs or ranges, where the container has them.
    pub runs: Option<usize>,
    /// A bitmap dump's signature ("SDMP" / "FDMP").
    pub bitmap_signature: Option<String>,
    /// The PFNs a bitmap covers.
    pub bitmap_bits: Option<u64>,
}

/// One opened format's memory, over the file's bytes (`file`: the whole file as
/// [`super::DumpFile`] holds it; a container keeps offsets into it, not the bytes).
pub trait Container: Any + Send + Sync + std::fmt::Debug {
    /// Where stored physical page `pfn`'s 4096 bytes are in `file`, when the container keeps
    /// them there as they are (None: not held, or not stored as plain file bytes). The
    /// default [`Container::page`] and the positioned reads and read-ahead of
    /// [`super::DumpFile`] use it.
    fn page_offset(&self, file: &[u8], pfn: Pfn) -> Option<u64>;

    /// The page `pfn`. The default borrows the page at [`Container::page_offset`]; a
    /// container that has to make its pages (a compressed one) answers
    /// [`super::PageRef::Shared`] from its own bounded cache instead.
    fn page<'a>(&'a self, file: &'a [u8], pfn: Pfn) -> PageLookup<'a> {
        match self.page_offset(file, pfn) {
            None => PageLookup::NotInDump,
            Some(o) => match usize::try_from(o)
                .ok()
                .and_then(|o| file.bytes_at(o, PAGE_SIZE as usize))
            {
                Some(p) => PageLookup::Present(super::PageRef::Borrowed(p)),
                None => PageLookup::BeyondEof { file_offset: o },
            },
        }
    }

    /// The stored physical pages as runs (first PFN, count) in PFN order, only pages the
    /// file holds (see [`super::DumpFile::physical_runs`]).
    fn physical_runs(&self, file: &[u8]) -> Vec<(u64, u64)>;

    /// The stored pages as runs in the order they are cheapest to read all of: a compressed
    /// container's set by set, so that a pass over all memory decodes each block once.
    /// Default: [`Container::physical_runs`] (PFN order, which is file order for the plain
    /// formats).
    fn runs_in_storage_order(&self, file: &[u8]) -> Vec<(u64, u64)> {
        self.physical_runs(file)
    }

    /// Number of physical pages the container says it stores.
    fn stored_pages(&self) -> u64;

    /// How memory is stored, for `info`.
    fn storage(&self) -> Storage;

    /// Whether the container holds physical memory (false: a triage dump's virtual blocks).
    fn has_physical_memory(&self) -> bool {
        true
    }

    /// Whether the memory comes without a crash-dump header (an image, a hibernation file):
    /// the machine is then found by discovery (`kernel::discover::machine`) and the kernel's
    /// lists by its symbols.
    fn headerless(&self) -> bool {
        false
    }

    /// Problems met while reading pages since the open (a damaged compressed block), each
    /// once; the open's own warnings are [`super::DumpFile::warnings`].
    fn read_warnings(&self) -> Vec<crate::warning::Warning> {
        Vec::new()
    }

    /// The container as `Any`, so [`super::DumpFile::container`] can name its type.
    fn as_any(&self) -> &dyn Any;
}

/// How many of `count` pages stored from file offset `offset` a file of `len` bytes holds.
pub(super) fn held(len: u64, offset: Option<u64>, count: u64) -> u64 {
    match offset {
        Some(o) if o < len => ((len - o) / PAGE_SIZE).min(count),
        _ => 0,
    }
}
