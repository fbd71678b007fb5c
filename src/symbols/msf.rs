//! A guard in front of the `pdb` crate: the sizes and counts of a PDB's MSF container, type
//! streams and debug-information stream are checked against the file before the crate sees
//! it, because the crate trusts them (a TPI `TypeIndexEnd` of 0xFFFFFFFF makes it ask for 2 GiB;
//! a wild header size, for 16 GiB; issue 13). What is checked:
//!
//! * the MSF 7.00 superblock: magic, a block size of 512–4096, every block inside the file;
//! * the stream directory: its blocks inside the file, a stream count and stream sizes that fit
//!   the directory and the file, every stream block inside the file;
//! * the TPI (stream 2) and IPI (stream 4) headers: HeaderSize 56, TypeIndexBegin ≤
//!   TypeIndexEnd, at most one record per 4 bytes of TypeRecordBytes, TypeRecordBytes inside the
//!   stream;
//! * the DBI (stream 3) header: every substream size inside the stream, and their sum too.
//!
//! Anything else the crate gets wrong is contained by the caller (a panic becomes an error).

use std::borrow::Cow;
use std::io::{Read, Seek, SeekFrom};

const MAGIC: &[u8; 32] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";
/// Streams with more entries than this are not plausible (a kernel PDB has a few thousand).
const MAX_STREAMS: u32 = 1 << 20;
const TPI_HEADER: u32 = 56;
const DBI_HEADER: u32 = 64;

/// Why the file is not a PDB the `pdb` crate may be given.
pub(crate) type Reject = String;

struct Msf<'f, F> {
    file: &'f mut F,
    block_size: u32,
    num_blocks: u32,
    sizes: Vec<u32>,
    blocks: Vec<Vec<u32>>,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    b.get(o..o + 4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

impl<F: Read + Seek> Msf<'_, F> {
    fn block(&mut self, n: u32) -> Result<Vec<u8>, Reject> {
        if n >= self.num_blocks {
            return Err(format!(
                "block {n} is past the file's {} blocks",
                self.num_blocks
            ));
        }
        let mut b = vec![0u8; self.block_size as usize];
        self.file
            .seek(SeekFrom::Start(u64::from(n) * u64::from(self.block_size)))
            .and_then(|_| self.file.read_exact(&mut b))
            .map_err(|e| format!("block {n}: {e}"))?;
        Ok(b)
    }

    /// The first `len` bytes of stream `s` (fewer if the stream is shorter).
    fn stream_prefix(&mut self, s: usize, len: u32) -> Result<Vec<u8>, Reject> {
        let size = self.sizes[s].min(len);
        let mut out = Vec::with_capacity(size as usize);
        let list = self.blocks[s].clone();
        for b in list {
            if out.len() >= size as usize {
                break;
            }
            out.extend_from_slice(&self.block(b)?);
        }
        out.truncate(size as usize);
        Ok(out)
    }
}

/// Check the structure of the PDB in `file` (`len` bytes long).
pub fn check<F: Read + Seek>(file: &mut F, len: u64) -> Result<(), Reject> {
    let mut sb = [0u8; 56];
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_exact(&mut sb))
        .map_err(|_| "shorter than an MSF superblock".to_string())?;
    if &sb[..32] != MAGIC {
        return Err("not an MSF 7.00 file (bad magic)".into());
    }
    let block_size = u32_at(&sb, 32).unwrap_or(0);
    let num_blocks = u32_at(&sb, 40).unwrap_or(0);
    let dir_bytes = u32_at(&sb, 44).unwrap_or(0);
    let map_addr = u32_at(&sb, 52).unwrap_or(0);
    if !matches!(block_size, 512 | 1024 | 2048 | 4096) {
        return Err(format!("block size {block_size} is not 512-4096"));
    }
    if u64::from(num_blocks) * u64::from(block_size) > len {
        return Err(format!(
            "{num_blocks} blocks of {block_size} bytes do not fit the {len}-byte file"
        ));
    }
    if u64::from(dir_bytes) > len {
        return Err(format!(
            "stream directory of {dir_bytes} bytes in a {len}-byte file"
        ));
    }
    let mut msf = Msf {
        file,
        block_size,
        num_blocks,
        sizes: Vec::new(),
        blocks: Vec::new(),
    };
    // The block map (at map_addr) lists the directory's blocks.
    let dir_blocks = dir_bytes.div_ceil(block_size);
    if u64::from(dir_blocks) * 4 > u64::from(block_size) {
        return Err(format!(
            "stream directory of {dir_bytes} bytes needs more than one map block"
        ));
    }
    let map = msf.block(map_addr)?;
    let mut dir = Vec::with_capacity(dir_bytes as usize);
    for i in 0..dir_blocks as usize {
        let b = u32_at(&map, i * 4).unwrap_or(u32::MAX);
        dir.extend_from_slice(&msf.block(b)?);
    }
    dir.truncate(dir_bytes as usize);
    let streams = u32_at(&dir, 0).ok_or("empty stream directory")?;
    if streams > MAX_STREAMS || u64::from(streams) * 4 + 4 > u64::from(dir_bytes) {
        return Err(format!(
            "{streams} streams do not fit a {dir_bytes}-byte directory"
        ));
    }
    let mut pos = 4 + streams as usize * 4;
    for s in 0..streams as usize {
        let size = u32_at(&dir, 4 + s * 4).unwrap_or(0);
        let size = if size == u32::MAX { 0 } else { size }; // a nil stream
        if u64::from(size) > len {
            return Err(format!("stream {s} of {size} bytes in a {len}-byte file"));
        }
        let n = size.div_ceil(block_size) as usize;
        let mut list = Vec::with_capacity(n.min(dir.len() / 4));
        for _ in 0..n {
            let b = u32_at(&dir, pos)
                .ok_or_else(|| format!("the directory ends inside stream {s}'s block list"))?;
            if b >= num_blocks {
                return Err(format!(
                    "stream {s} names block {b} past the file's {num_blocks}"
                ));
            }
            list.push(b);
            pos += 4;
        }
        msf.sizes.push(size);
        msf.blocks.push(list);
    }
    for (s, name) in [(2usize, "TPI"), (4, "IPI")] {
        if s < msf.sizes.len() && msf.sizes[s] > 0 {
            let h = msf.stream_prefix(s, TPI_HEADER)?;
            check_type_stream(name, &h, msf.sizes[s])?;
        }
    }
    if msf.sizes.len() > 3 && msf.sizes[3] > 0 {
        let h = msf.stream_prefix(3, DBI_HEADER)?;
        check_dbi(&h, msf.sizes[3])?;
    }
    Ok(())
}

fn check_type_stream(name: &str, h: &[u8], stream: u32) -> Result<(), Reject> {
    if h.len() < TPI_HEADER as usize {
        return Err(format!(
            "{name} stream of {stream} bytes is shorter than its header"
        ));
    }
    let header_size = u32_at(h, 4).unwrap_or(0);
    let begin = u32_at(h, 8).unwrap_or(0);
    let end = u32_at(h, 12).unwrap_or(0);
    let bytes = u32_at(h, 16).unwrap_or(0);
    if header_size != TPI_HEADER {
        return Err(format!("{name} HeaderSize {header_size}, not {TPI_HEADER}"));
    }
    if begin > end {
        return Err(format!(
            "{name} TypeIndexBegin {begin:#x} > TypeIndexEnd {end:#x}"
        ));
    }
    if u64::from(bytes) + u64::from(header_size) > u64::from(stream) {
        return Err(format!(
            "{name} TypeRecordBytes {bytes} do not fit its {stream}-byte stream"
        ));
    }
    // Every record is at least 4 bytes (length and kind).
    if u64::from(end - begin) > u64::from(bytes) / 4 + 1 {
        return Err(format!(
            "{name} claims {} types (TypeIndexEnd {end:#x}) in {bytes} bytes of records",
            end - begin
        ));
    }
    Ok(())
}

fn check_dbi(h: &[u8], stream: u32) -> Result<(), Reject> {
    if h.len() < DBI_HEADER as usize {
        return Err(format!(
            "DBI stream of {stream} bytes is shorter than its header"
        ));
    }
    let mut sum = u64::from(DBI_HEADER);
    for (o, what) in [
        (24, "module info"),
        (28, "section contribution"),
        (32, "section map"),
        (36, "source info"),
        (40, "type server map"),
        (48, "optional debug header"),
        (52, "EC"),
    ] {
        let v = u32_at(h, o).unwrap_or(0) as i32;
        if v < 0 || v as u32 > stream {
            return Err(format!(
                "DBI {what} substream size {v} in a {stream}-byte stream"
            ));
        }
        sum += v as u64;
    }
    if sum > u64::from(stream) {
        return Err(format!(
            "DBI substreams of {sum} bytes in a {stream}-byte stream"
        ));
    }
    Ok(())
}

/// The streams of a PDB held in memory (a mapped file or a buffer), for the crate-free loader
/// (`super::pdb`): the container is checked by [`check`] first (same checks, same messages), then
/// a stream is borrowed from the file's bytes when its blocks are consecutive (what linkers
/// write) and copied block by block otherwise. Every block number and size was bounded by
/// [`check`]; the accessors bound them again, so no index from the file can slice out of range.
pub(crate) struct Streams<'a> {
    file: &'a [u8],
    block_size: usize,
    /// Per stream: its size (None: a nil stream) and where its block list starts in `dir`.
    entries: Vec<(Option<u32>, usize)>,
    dir: Vec<u8>,
}

impl<'a> Streams<'a> {
    /// Check the container (as [`check`]) and index its streams.
    pub(crate) fn open(file: &'a [u8]) -> Result<Streams<'a>, Reject> {
        check(&mut std::io::Cursor::new(file), file.len() as u64)?;
        // `check` accepted these; read them again without trusting that.
        let block_size = u32_at(file, 32).unwrap_or(0) as usize;
        let dir_bytes = u32_at(file, 44).unwrap_or(0) as usize;
        let map_addr = u32_at(file, 52).unwrap_or(0) as usize;
        if block_size == 0 {
            return Err("block size 0".into());
        }
        let block = |n: usize| -> Result<&'a [u8], Reject> {
            n.checked_mul(block_size)
                .and_then(|o| file.get(o..o.checked_add(block_size)?))
                .ok_or_else(|| format!("block {n} is past the end of the file"))
        };
        let map = block(map_addr)?;
        let mut dir = Vec::with_capacity(dir_bytes.min(file.len()));
        for i in 0..dir_bytes.div_ceil(block_size) {
            let b = u32_at(map, i * 4).ok_or("the stream directory's block map is too long")?;
            dir.extend_from_slice(block(b as usize)?);
        }
        dir.truncate(dir_bytes);
        let count = u32_at(&dir, 0).ok_or("empty stream directory")? as usize;
        if count > MAX_STREAMS as usize || count.saturating_mul(4) + 4 > dir.len() {
            return Err(format!("{count} streams do not fit the directory"));
        }
        let mut entries = Vec::with_capacity(count);
        let mut pos = 4 + count * 4;
        for s in 0..count {
            let size = u32_at(&dir, 4 + s * 4).unwrap_or(0);
            let blocks = if size == u32::MAX {
                0
            } else {
                (size as usize).div_ceil(block_size)
            };
            entries.push(((size != u32::MAX).then_some(size), pos));
            pos = pos.saturating_add(blocks.saturating_mul(4));
        }
        Ok(Streams {
            file,
            block_size,
            entries,
            dir,
        })
    }

    /// Stream `n`'s bytes: None if the directory has no such stream or it is nil.
    pub(crate) fn get(&self, n: usize) -> Result<Option<Cow<'a, [u8]>>, Reject> {
        let Some(&(Some(size), list)) = self.entries.get(n) else {
            return Ok(None);
        };
        let size = size as usize;
        let bs = self.block_size;
        let count = size.div_ceil(bs);
        let blocks = list
            .checked_add(count * 4)
            .and_then(|end| self.dir.get(list..end))
            .ok_or_else(|| format!("the directory ends inside stream {n}'s block list"))?;
        let at = |i: usize| u32_at(blocks, i * 4).unwrap_or(u32::MAX) as usize;
        let range = |b: usize, len: usize| -> Result<std::ops::Range<usize>, Reject> {
            let start = b
                .checked_mul(bs)
                .filter(|s| s.saturating_add(len) <= self.file.len());
            start
                .map(|s| s..s + len)
                .ok_or_else(|| format!("stream {n} names block {b} past the end of the file"))
        };
        if count == 0 {
            return Ok(Some(Cow::Borrowed(&[])));
        }
        let first = at(0);
        if (1..count).all(|i| at(i) == first.wrapping_add(i)) {
            return Ok(Some(Cow::Borrowed(&self.file[range(first, size)?])));
        }
        let mut out = Vec::with_capacity(size);
        for i in 0..count {
            let len = bs.min(size - i * bs);
            out.extend_from_slice(&self.file[range(at(i), len)?]);
        }
        Ok(Some(Cow::Owned(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn fixture() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/x64-19041/ntkrnlmp.pdb"
        ))
        .unwrap()
    }

    fn checked(b: &[u8]) -> Result<(), Reject> {
        check(&mut Cursor::new(b.to_vec()), b.len() as u64)
    }

    /// The stream's first block (where its header is) as a file offset.
    fn stream_offset(b: &[u8], s: usize) -> usize {
        let bs = u32_at(b, 32).unwrap() as usize;
        let dir_bytes = u32_at(b, 44).unwrap() as usize;
        let map = u32_at(b, 52).unwrap() as usize * bs;
        let mut dir = Vec::new();
        for i in 0..dir_bytes.div_ceil(bs) {
            let blk = u32_at(b, map + i * 4).unwrap() as usize;
            dir.extend_from_slice(&b[blk * bs..blk * bs + bs]);
        }
        let n = u32_at(&dir, 0).unwrap() as usize;
        let mut pos = 4 + n * 4;
        for i in 0..s {
            let size = u32_at(&dir, 4 + i * 4).unwrap();
            let size = if size == u32::MAX { 0 } else { size } as usize;
            pos += size.div_ceil(bs) * 4;
        }
        u32_at(&dir, pos).unwrap() as usize * bs
    }

    #[test]
    fn fixture_pdb_passes() {
        checked(&fixture()).unwrap();
    }

    #[test]
    fn wild_type_index_end_is_refused() {
        let mut b = fixture();
        let tpi = stream_offset(&b, 2);
        b[tpi + 12..tpi + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = checked(&b).unwrap_err();
        assert!(e.contains("TPI claims"), "{e}");
    }

    #[test]
    fn wild_header_size_and_record_bytes_are_refused() {
        let mut b = fixture();
        let tpi = stream_offset(&b, 2);
        b[tpi + 4..tpi + 8].copy_from_slice(&0x4000_0000u32.to_le_bytes());
        assert!(checked(&b).unwrap_err().contains("HeaderSize"));
        let mut b = fixture();
        b[tpi + 16..tpi + 20].copy_from_slice(&0xFFFF_0000u32.to_le_bytes());
        assert!(checked(&b).unwrap_err().contains("TypeRecordBytes"));
    }

    #[test]
    fn container_damage_is_refused() {
        let b = fixture();
        assert!(checked(&b[..40]).unwrap_err().contains("superblock"));
        let mut x = b.clone();
        x[0] = b'X';
        assert!(checked(&x).unwrap_err().contains("magic"));
        let mut x = b.clone();
        x[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(checked(&x).unwrap_err().contains("do not fit"));
        let mut x = b.clone();
        x[32..36].copy_from_slice(&3u32.to_le_bytes());
        assert!(checked(&x).unwrap_err().contains("block size"));
        assert!(checked(&b[..b.len() / 2]).is_err());
    }
}
