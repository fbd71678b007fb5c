//! DumpTypes 5 and 6 (bitmap): a summary header after the dump header with a bitmap of
//! stored PFNs (crash-dump-format.md §1.2a). A rank index built once at open makes every
//! PFN → file offset lookup O(1).

use super::format::{self, Format};
use super::header::DumpType;
use super::DumpError;
use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::{tag_text, LeBytes};
use crate::warning::{Warning, WarningKind};

const SUMMARY_HEADER_SIZE: usize = 0x38;

/// The parsed bitmap with its rank index.
#[derive(Clone, Debug)]
pub struct Bitmap {
    /// "SDMP" or "FDMP".
    pub signature: String,
    /// Absolute file offset of the first stored page (FirstPage).
    pub first_page: u64,
    /// TotalPresentPages as declared.
    pub declared_present: u64,
    /// Number of PFNs the bitmap covers (Pages).
    pub bits: u64,
    /// Set bits actually counted.
    pub present: u64,
    /// File offset of the bitmap.
    bitmap_offset: usize,
    /// `rank[w]` = number of set bits in words `0..w`.
    rank: Vec<u64>,
}

impl Bitmap {
    /// The stored pages as runs (first PFN, count) of consecutive set bits, in PFN order.
    pub fn runs(&self, file: &[u8]) -> Vec<(u64, u64)> {
        let bytes = file
            .get(self.bitmap_offset..)
            .map(|b| &b[..b.len().min(self.bits.div_ceil(8) as usize)])
            .unwrap_or_default();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (i, &byte) in bytes.iter().enumerate() {
            if byte == 0 {
                continue;
            }
            for bit in 0..8u64 {
                let pfn = i as u64 * 8 + bit;
                if byte >> bit & 1 == 0 || pfn >= self.bits {
                    continue;
                }
                match out.last_mut() {
                    Some((start, n)) if *start + *n == pfn => *n += 1,
                    _ => out.push((pfn, 1)),
                }
            }
        }
        out
    }

    /// Parse the summary header at `offset` of `file`.
    pub fn parse(file: &[u8], offset: u64) -> Result<Bitmap, DumpError> {
        let bad = |reason: String| DumpError::BadBitmap { offset, reason };
        let off = usize::try_from(offset).map_err(|_| bad("offset too large".into()))?;
        let h = file
            .bytes_at(off, SUMMARY_HEADER_SIZE)
            .ok_or_else(|| DumpError::Truncated {
                what: "the bitmap summary header".into(),
                end: offset + SUMMARY_HEADER_SIZE as u64,
                file_len: file.len() as u64,
            })?;
        let sig = &h[0..4];
        if sig != b"SDMP" && sig != b"FDMP" {
            return Err(bad(format!(
                "signature is \"{}\" (expected \"SDMP\" or \"FDMP\")",
                tag_text(sig)
            )));
        }
        if &h[4..8] != b"DUMP" {
            return Err(bad(format!(
                "ValidDump is \"{}\" (expected \"DUMP\")",
                tag_text(&h[4..8])
            )));
        }
        let first_page = h.u64_at(0x20).unwrap_or(0);
        let declared_present = h.u64_at(0x28).unwrap_or(0);
        let bits = h.u64_at(0x30).unwrap_or(0);
        let bitmap_offset = off + SUMMARY_HEADER_SIZE;
        let bitmap_bytes = bits.div_ceil(8);
        let bitmap_end = (bitmap_offset as u64).checked_add(bitmap_bytes);
        if bitmap_end.is_none_or(|e| e > file.len() as u64) {
            return Err(DumpError::Truncated {
                what: format!(
                    "the bitmap ({bits:#x} bits = {bitmap_bytes:#x} bytes from file offset {bitmap_offset:#x})"
                ),
                end: bitmap_end.unwrap_or(u64::MAX),
                file_len: file.len() as u64,
            });
        }
        let bitmap_end = bitmap_end.unwrap_or(0);
        if first_page < bitmap_end {
            return Err(bad(format!(
                "FirstPage {first_page:#x} lies inside the bitmap, which ends at {bitmap_end:#x}"
            )));
        }
        // Rank index over 64-bit words (bounded by the file length checked above).
        let words = bits.div_ceil(64) as usize;
        let mut rank = Vec::with_capacity(words + 1);
        let mut count = 0u64;
        let mut me = Bitmap {
            signature: tag_text(sig),
            first_page,
            declared_present,
            bits,
            present: 0,
            bitmap_offset,
            rank: Vec::new(),
        };
        for w in 0..words {
            rank.push(count);
            count += u64::from(me.word(file, w).count_ones());
        }
        rank.push(count);
        me.rank = rank;
        me.present = count;
        Ok(me)
    }

    /// Word `w` of the bitmap with bits past `self.bits` cleared.
    fn word(&self, file: &[u8], w: usize) -> u64 {
        let start = self.bitmap_offset + w * 8;
        let total_bytes = self.bits.div_ceil(8) as usize;
        let avail = total_bytes.saturating_sub(w * 8).min(8);
        let mut buf = [0u8; 8];
        if let Some(src) = file.bytes_at(start, avail) {
            buf[..avail].copy_from_slice(src);
        }
        let v = u64::from_le_bytes(buf);
        let first_bit = w as u64 * 64;
        let valid = self.bits.saturating_sub(first_bit).min(64);
        if valid == 64 {
            v
        } else {
            v & ((1u64 << valid) - 1)
        }
    }

    /// File offset of the page, if its bit is set. O(1).
    pub fn file_offset(&self, file: &[u8], pfn: Pfn) -> Option<u64> {
        if pfn.get() >= self.bits {
            return None;
        }
        let w = (pfn.get() / 64) as usize;
        let bit = pfn.get() % 64;
        let word = self.word(file, w);
        if word & (1 << bit) == 0 {
            return None;
        }
        let below = self.rank[w] + u64::from((word & ((1u64 << bit) - 1)).count_ones());
        below
            .checked_mul(PAGE_SIZE)
            .and_then(|o| o.checked_add(self.first_page))
    }

    /// File offset one past the last stored page.
    pub fn data_end(&self) -> Option<u64> {
        self.present
            .checked_mul(PAGE_SIZE)?
            .checked_add(self.first_page)
    }
}

impl super::Container for Bitmap {
    fn page_offset(&self, file: &[u8], pfn: Pfn) -> Option<u64> {
        self.file_offset(file, pfn)
    }

    fn physical_runs(&self, file: &[u8]) -> Vec<(u64, u64)> {
        // Stored in PFN order: the k-th set bit's page is at FirstPage + k pages.
        let len = file.len() as u64;
        let mut out = Vec::new();
        let mut index = 0u64;
        for (pfn, count) in self.runs(file) {
            let at = index
                .checked_mul(PAGE_SIZE)
                .and_then(|o| o.checked_add(self.first_page));
            let n = super::container::held(len, at, count);
            if n > 0 {
                out.push((pfn, n));
            }
            if n < count {
                break; // every later page is further into the file
            }
            index += count;
        }
        out
    }

    fn stored_pages(&self) -> u64 {
        self.present
    }

    fn storage(&self) -> super::Storage {
        super::Storage {
            kind: "physical (bitmap)",
            runs: None,
            bitmap_signature: Some(self.signature.clone()),
            bitmap_bits: Some(self.bits),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// DumpTypes 5 and 6: a bitmap of the stored pages after the header.
pub(crate) const BITMAP_DUMP: Format = Format {
    name: "bitmap crash dump",
    probe: |i| {
        i.dump_type()
            .is_some_and(|t| t == DumpType::BITMAP_FULL || t == DumpType::BITMAP_KERNEL)
    },
    open: |input| {
        let header = format::dump_header(&input)?;
        let bm = Bitmap::parse(input.bytes(), header.header_size)?;
        let mut warnings = Vec::new();
        if bm.present != bm.declared_present {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "bitmap header TotalPresentPages is {:#x} but {:#x} bits are set; the bitmap is used",
                bm.declared_present, bm.present
            )));
        }
        let end = bm.data_end();
        let what = format!("the page data of {:#x} bitmap pages", bm.present);
        format::crash_dump(input, header, Box::new(bm), end, what, warnings)
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn make(bits: u64, set: &[u64], first_page: u64) -> Vec<u8> {
        let mut f = vec![0u8; 0x38 + bits.div_ceil(8) as usize];
        f[0..8].copy_from_slice(b"SDMPDUMP");
        f[0x20..0x28].copy_from_slice(&first_page.to_le_bytes());
        f[0x28..0x30].copy_from_slice(&(set.len() as u64).to_le_bytes());
        f[0x30..0x38].copy_from_slice(&bits.to_le_bytes());
        for &p in set {
            f[0x38 + (p / 8) as usize] |= 1 << (p % 8);
        }
        f
    }

    #[test]
    fn rank_lookup_matches_bit_count() {
        let set = [0u64, 1, 63, 64, 65, 200, 1000, 1023];
        let f = make(1024, &set, 0x1000);
        let b = Bitmap::parse(&f, 0).unwrap();
        assert_eq!(b.present, set.len() as u64);
        for (i, &p) in set.iter().enumerate() {
            assert_eq!(
                b.file_offset(&f, Pfn::new(p)),
                Some(0x1000 + i as u64 * PAGE_SIZE)
            );
        }
        assert_eq!(b.file_offset(&f, Pfn::new(2)), None);
        assert_eq!(b.file_offset(&f, Pfn::new(1024)), None);
        assert_eq!(b.file_offset(&f, Pfn::new(u64::MAX)), None);
    }

    #[test]
    fn bits_past_the_declared_count_are_ignored() {
        // 70 bits: byte 8 holds bits 64..71; set bit 71 (beyond) and 69 (inside).
        let mut f = make(70, &[69], 0x1000);
        f[0x38 + 8] |= 0x80;
        let b = Bitmap::parse(&f, 0).unwrap();
        assert_eq!(b.present, 1);
        assert_eq!(b.file_offset(&f, Pfn::new(71)), None);
    }

    #[test]
    fn absurd_sizes_are_rejected_before_allocating() {
        let mut f = make(64, &[1], 0x1000);
        f[0x30..0x38].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(matches!(
            Bitmap::parse(&f, 0),
            Err(DumpError::Truncated { .. })
        ));
        let mut f = make(64, &[1], 0x10);
        f[0..4].copy_from_slice(b"XDMP");
        assert!(matches!(
            Bitmap::parse(&f, 0),
            Err(DumpError::BadBitmap { .. })
        ));
        let f = make(64, &[1], 0x10);
        assert!(matches!(
            Bitmap::parse(&f, 0),
            Err(DumpError::BadBitmap { .. })
        ));
    }
}
