//! Where pages go in the file (full: run after run, §1.2; bitmap: summary header + bitmap,
//! §1.2a) and the sparse writer.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use crate::config::{BitmapSig, Layout};
use crate::dump::phys::PhysMem;
use crate::util::{align_up, put_bytes, put_u64, PAGE_SIZE};

/// The dump file: a prefix (header, summary, bitmap) and non-zero pages at their offsets.
/// Everything else is zero.
#[derive(Clone)]
pub(crate) struct FileImage {
    pub len: u64,
    pub prefix: Vec<u8>,
    /// (file offset, page content), sorted by offset.
    pub pages: Vec<(u64, Box<[u8]>)>,
}

impl std::fmt::Debug for FileImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileImage")
            .field("len", &self.len)
            .field("prefix_len", &self.prefix.len())
            .field("nonzero_pages", &self.pages.len())
            .finish()
    }
}

/// Result of placing physical pages in the file.
pub(crate) struct Placement {
    pub file_len: u64,
    pub first_page_offset: u64,
    pub stored_pages: u64,
    /// Bytes that follow the dump header before the first page (bitmap dumps: summary header
    /// + bitmap + zero padding; full dumps: empty).
    pub after_header: Vec<u8>,
    pub pages: Vec<(u64, Box<[u8]>)>,
}

/// Full dump: for PFN `BasePage + i` of run k, offset = header_size + (pages of runs 0..k + i)
/// × 0x1000.
fn place_full(header_size: u64, pm: &PhysMem) -> Placement {
    let total: u64 = pm.runs.iter().map(|r| r.1).sum();
    let mut pages = Vec::new();
    for (&pfn, content) in pm.pages() {
        let mut before = 0u64;
        let mut offset = None;
        for &(base, count) in &pm.runs {
            if pfn >= base && pfn < base + count {
                offset = Some(header_size + (before + pfn - base) * PAGE_SIZE);
                break;
            }
            before += count;
        }
        let offset = offset.unwrap_or_else(|| panic!("page {pfn:#x} outside the runs"));
        if content.iter().any(|&b| b != 0) {
            pages.push((offset, content.clone()));
        }
    }
    Placement {
        file_len: header_size + total * PAGE_SIZE,
        first_page_offset: header_size,
        stored_pages: total,
        after_header: Vec::new(),
        pages,
    }
}

/// Bitmap dump: summary header at the end of the dump header:
/// +0 signature, +4 `DUMP`, +0x20 FirstPage (absolute, page aligned), +0x28 TotalPresentPages,
/// +0x30 Pages (bits), +0x38 bitmap (LSB first). Stored pages follow in PFN order.
fn place_bitmap(header_size: u64, pm: &PhysMem, sig: BitmapSig) -> Placement {
    let bits = pm.total_pfns;
    // Whole u32 words (volatility reads the bitmap as u32s); padding bits stay 0.
    let bitmap_len = align_up(bits.div_ceil(8), 4) as usize;
    let first_page = align_up(header_size + 0x38 + bitmap_len as u64, PAGE_SIZE);
    let mut after = vec![0u8; (first_page - header_size) as usize];
    put_bytes(&mut after, 0, sig.magic());
    put_bytes(&mut after, 4, b"DUMP");
    let stored: Vec<u64> = pm.pages().keys().copied().collect();
    put_u64(&mut after, 0x20, first_page);
    put_u64(&mut after, 0x28, stored.len() as u64);
    put_u64(&mut after, 0x30, bits);
    let mut pages = Vec::new();
    for (i, (&pfn, content)) in pm.pages().iter().enumerate() {
        assert!(pfn < bits);
        after[0x38 + (pfn / 8) as usize] |= 1 << (pfn % 8);
        if content.iter().any(|&b| b != 0) {
            pages.push((first_page + i as u64 * PAGE_SIZE, content.clone()));
        }
    }
    Placement {
        file_len: first_page + stored.len() as u64 * PAGE_SIZE,
        first_page_offset: first_page,
        stored_pages: stored.len() as u64,
        after_header: after,
        pages,
    }
}

pub(crate) fn place(layout: Layout, header_size: u64, pm: &PhysMem) -> Placement {
    match layout {
        Layout::Full => place_full(header_size, pm),
        Layout::Bitmap { sig, .. } => place_bitmap(header_size, pm, sig),
    }
}

impl FileImage {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let len = usize::try_from(self.len).expect("file fits in memory");
        assert!(
            self.len <= 1 << 31,
            "to_bytes is for small dumps ({} bytes requested); use write_to",
            self.len
        );
        let mut out = vec![0u8; len];
        out[..self.prefix.len()].copy_from_slice(&self.prefix);
        for (off, page) in &self.pages {
            let o = *off as usize;
            out[o..o + page.len()].copy_from_slice(page);
        }
        out
    }

    /// Sparse write: only the prefix and the non-zero pages are written; the file is then
    /// extended to its full length without writing the zero areas.
    pub(crate) fn write_to(&self, path: &Path) -> std::io::Result<()> {
        let pages = self.pages.iter().map(|(off, page)| (*off, &page[..]));
        write_sparse(path, &self.prefix, pages, self.len)
    }
}

/// Write `prefix` at offset 0 and each `(file offset, bytes)` of `pages` (ascending, not
/// overlapping the prefix or each other), skipping all-zero pages and coalescing adjacent ones
/// into one write; then extend the file to `len` without writing the zero areas (a sparse file
/// where the file system allows). Used for the dump and for the memory images.
pub(crate) fn write_sparse<'a>(
    path: &Path,
    prefix: &[u8],
    pages: impl IntoIterator<Item = (u64, &'a [u8])>,
    len: u64,
) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(prefix)?;
    let mut pos = prefix.len() as u64;
    // The pending run of adjacent pages: its start offset and bytes.
    let mut run: Option<(u64, Vec<u8>)> = None;
    fn flush(f: &mut File, run: &mut Option<(u64, Vec<u8>)>, pos: &mut u64) -> std::io::Result<()> {
        if let Some((start, buf)) = run.take() {
            if start != *pos {
                f.seek(SeekFrom::Start(start))?;
            }
            f.write_all(&buf)?;
            *pos = start + buf.len() as u64;
        }
        Ok(())
    }
    for (off, page) in pages {
        if page.iter().all(|&b| b == 0) {
            continue;
        }
        match &mut run {
            Some((start, buf)) if *start + buf.len() as u64 == off && buf.len() < 1 << 24 => {
                buf.extend_from_slice(page);
            }
            _ => {
                flush(&mut f, &mut run, &mut pos)?;
                run = Some((off, page.to_vec()));
            }
        }
    }
    flush(&mut f, &mut run, &mut pos)?;
    f.set_len(len)?;
    Ok(())
}
