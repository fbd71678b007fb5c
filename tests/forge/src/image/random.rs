//! A raw physical image of pseudo-random bytes (issue 15's "zero false buffers on random
//! data" check): file offset = physical address, every byte drawn from `seed`, no ETW object
//! planted. Counter-based, so any range can be regenerated without the file
//! ([`random_image_bytes`]), and streamed to disk in 1 MiB chunks ([`write_random_image`]):
//! a 1 GiB image ([`RANDOM_IMAGE_SIZE`]) never sits in memory.

use std::io::Write;
use std::path::Path;

/// The size of the scenario's image: 1 GiB.
pub const RANDOM_IMAGE_SIZE: u64 = 1 << 30;

/// The 8-byte word `index` of the image of `seed` (SplitMix64's output function applied to a
/// counter, so words are independent of the order they are drawn in).
fn word(seed: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_add(0x5EED_0F1A_6E00_0000)
        .wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Bytes `offset .. offset + len` of the random image of `seed` (any size of image: the
/// content does not depend on it).
pub fn random_image_bytes(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 16);
    let first = offset / 8;
    let skip = (offset % 8) as usize;
    let words = (skip + len).div_ceil(8) as u64;
    for i in 0..words {
        out.extend_from_slice(&word(seed, first + i).to_le_bytes());
    }
    out.drain(..skip);
    out.truncate(len);
    out
}

/// Write the random image of `seed`, `size` bytes long, to `path`, 1 MiB at a time.
pub fn write_random_image(path: &Path, size: u64, seed: u64) -> std::io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    let mut f = std::io::BufWriter::with_capacity(CHUNK as usize, std::fs::File::create(path)?);
    let mut buf = vec![0u8; CHUNK as usize];
    let mut off = 0u64;
    while off < size {
        let n = CHUNK.min(size - off) as usize;
        let first = off / 8;
        for (i, chunk) in buf[..n.div_ceil(8) * 8].chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&word(seed, first + i as u64).to_le_bytes());
        }
        f.write_all(&buf[..n])?;
        off += n as u64;
    }
    f.flush()
}
