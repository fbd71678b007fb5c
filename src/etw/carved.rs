//! The buffers the pass over physical memory (`etw::carve`) finds: their class, what was
//! recovered of each, and how to read their bytes again (for the ETW source's units of origin
//! `carved`).

use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::dump::PageLookup;
use crate::kernel::context::KernelContext;
use serde::Serialize;

/// What a carved object is to the live state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Live,
    Orphaned,
    StaleCopy,
    /// Nothing found leads to it, but the live state itself could not be established (no
    /// logger array located, e.g. without symbols): it may belong to a running session.
    Unknown,
}

/// A trace buffer found by the pass.
#[derive(Clone, Debug, Serialize)]
pub struct CarvedBuffer {
    /// Physical address of the header.
    pub physical_address: PhysAddr,
    /// Where it is mapped, when the kernel's page tables still map it.
    pub virtual_address: Option<VirtAddr>,
    pub class: Class,
    pub logger_id: u64,
    pub buffer_size: u64,
    pub sequence_number: u64,
    pub timestamp: u64,
    pub processor: u64,
    /// The valid length the header gives.
    pub valid_bytes: u64,
    /// Bytes recovered from the start (the valid length when complete).
    pub recovered_bytes: u64,
    /// Complete records in the recovered bytes (the chain may end before the valid end, as
    /// in a live buffer whose last record was being written).
    pub records: usize,
    /// Where the record chain ends in the recovered bytes: the valid end for an intact buffer;
    /// earlier where a page was overwritten, or where a live buffer's last record was being
    /// written.
    pub chain_end: u64,
    /// Every valid byte was recovered from the buffer's own pages: all of them were read (a
    /// buffer whose later pages are no longer mapped is recovered as far as they still are,
    /// else up to the end of its first physical page) and the record chain runs from 0x48 to
    /// the valid end. A later page reused by another allocation breaks the chain: the buffer
    /// is then not complete, and only the bytes up to `chain_end` are the buffer's for sure.
    pub complete: bool,
    /// Where the record chain stops short of the recovered bytes (None: it reaches them).
    pub chain_break: Option<ChainBreak>,
    /// No virtual address maps it, and it was recovered past its first page from the
    /// physically following pages, because its record chain runs through them to exactly
    /// the valid end (the evidence that they are its own; a buffer's pages need not be
    /// physically consecutive, and where they are not it stays partial).
    pub physically_contiguous: bool,
    /// The orphan group it belongs to.
    pub group: Option<usize>,
}

/// Where a carved buffer's record chain stops before its recovered bytes end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// Offset in the buffer (= `chain_end`).
    pub offset: u64,
    /// Which of the buffer's pages (0: the first) holds that offset, and its physical address
    /// where known.
    pub page: u32,
    pub physical_address: Option<PhysAddr>,
    /// The chain stops exactly at a page boundary: what follows is a page whose bytes are no
    /// record (typically reused by another allocation); otherwise a record inside the page is
    /// cut or damaged (or, in a live buffer, still being written).
    pub page_boundary: bool,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record chain ends at +{:#x} in page {}",
            self.offset, self.page
        )?;
        if let Some(p) = self.physical_address {
            write!(f, " (physical {p})")?;
        }
        if self.page_boundary && self.page > 0 {
            write!(f, ", at the page's start: that page holds no record of this buffer (reused by another allocation?)")?;
        }
        Ok(())
    }
}

/// A carved buffer's bytes, BufferSize long: read through its virtual address as far as it is
/// mapped, else its first physical page's bytes (the rest zero); with the end of what was
/// recovered.
pub fn buffer_bytes(ctx: &KernelContext<'_>, b: &CarvedBuffer) -> Option<(Vec<u8>, usize)> {
    let size = b.buffer_size as usize;
    if let Some(va) = b.virtual_address {
        let mut v = vec![0u8; size];
        let n = ctx.space.read_prefix(va, &mut v) as u64;
        if n > 0 && n >= b.recovered_bytes {
            return Some((v, b.recovered_bytes as usize));
        }
    }
    let pa = b.physical_address.get();
    if b.physically_contiguous {
        let mut v = vec![0u8; size];
        let mut n = 0usize;
        while n < b.recovered_bytes as usize {
            let at = pa + n as u64;
            let PageLookup::Present(p) = ctx.dump.page(PhysAddr::new(at).pfn()) else {
                break;
            };
            let o = (at % PAGE_SIZE) as usize;
            let take = p
                .len()
                .saturating_sub(o)
                .min(b.recovered_bytes as usize - n);
            if take == 0 {
                break;
            }
            v[n..n + take].copy_from_slice(&p[o..o + take]);
            n += take;
        }
        return Some((v, n));
    }
    let PageLookup::Present(p) = ctx.dump.page(b.physical_address.pfn()) else {
        return None;
    };
    let o = (pa % PAGE_SIZE) as usize;
    let have = (p.len() - o).min(size);
    let mut v = vec![0u8; size];
    v[..have].copy_from_slice(&p[o..o + have]);
    Some((v, (b.recovered_bytes as usize).min(have)))
}
