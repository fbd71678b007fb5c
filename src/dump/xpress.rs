//! Xpress decompression, Microsoft [MS-XCA]: Plain LZ77 (§2.4) and LZ77+Huffman (§2.2), the
//! codecs of a hibernation file's compression sets (`shared/reference/hibernation-format.md`,
//! "Codecs"). Written from the specification's pseudo-code (release 10.0, April 2024).
//!
//! Both decoders produce exactly `expected` bytes: a compression set knows how many pages it
//! holds, so decoding stops there (an end-of-stream symbol or trailing bytes after it are not
//! read). Input that ends before `expected` bytes are decoded, a match that reaches before the
//! start of the output or past `expected`, a bad length escape and (Huffman) a code-length table
//! that is not a complete prefix code are typed errors naming the input offset. Nothing panics;
//! the output is the only allocation that grows with the input's claims and it is bounded by
//! `expected`, itself at most [`MAX_EXPECTED`]. Every step of either loop writes at least one
//! byte, so the work is bounded by `expected` too.

use thiserror::Error;

/// The largest output either decoder accepts (64 MiB; a hibernation compression set holds at
/// most 64 KiB).
pub const MAX_EXPECTED: usize = 64 << 20;

/// Why an Xpress stream could not be decoded. Offsets are byte offsets in the compressed input.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum XpressError {
    #[error("expected output of {expected} bytes is over the limit of {limit} bytes")]
    TooLarge { expected: usize, limit: usize },
    #[error("compressed data ends at input offset {offset} after {produced} of {expected} bytes")]
    Truncated {
        offset: usize,
        produced: usize,
        expected: usize,
    },
    #[error(
        "match at input offset {offset} reaches {distance} bytes back, before the start of the \
         output ({produced} bytes decoded)"
    )]
    DistanceTooFar {
        offset: usize,
        distance: usize,
        produced: usize,
    },
    #[error(
        "match at input offset {offset} of {length} bytes overruns the expected size {expected} \
         ({produced} bytes decoded)"
    )]
    Overrun {
        offset: usize,
        length: u64,
        produced: usize,
        expected: usize,
    },
    #[error("invalid match length escape {value} at input offset {offset}")]
    BadLength { offset: usize, value: u32 },
    #[error("Huffman code-length table at input offset {offset} is {problem}")]
    BadTable {
        offset: usize,
        problem: TableProblem,
    },
}

/// What is wrong with a Huffman code-length table ([MS-XCA] §2.2.4 requires the lengths to fill
/// the 2^15-entry decoding table exactly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableProblem {
    /// The codes need more than 2^15 table entries (Kraft sum above one).
    OverSubscribed,
    /// The codes leave table entries unused (Kraft sum below one; all lengths zero included).
    Incomplete,
}

impl std::fmt::Display for TableProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TableProblem::OverSubscribed => "over-subscribed (not a prefix code)",
            TableProblem::Incomplete => "incomplete (codes left unused)",
        })
    }
}

fn check_expected(expected: usize) -> Result<(), XpressError> {
    if expected > MAX_EXPECTED {
        return Err(XpressError::TooLarge {
            expected,
            limit: MAX_EXPECTED,
        });
    }
    Ok(())
}

/// Copies a match of `length` bytes from `distance` back, byte-wise semantics (a match may
/// overlap the bytes it writes). The caller checked `distance <= pos` and `pos + length <= len`.
#[inline]
fn copy_match(out: &mut [u8], pos: usize, distance: usize, length: usize) {
    let src = pos - distance;
    if distance >= length {
        out.copy_within(src..src + length, pos);
    } else if distance == 1 {
        let b = out[src];
        out[pos..pos + length].fill(b);
    } else {
        for i in 0..length {
            out[pos + i] = out[src + i];
        }
    }
}

/// Checks a match against the output so far and the expected size, then copies it.
#[inline]
fn apply_match(
    out: &mut [u8],
    pos: usize,
    distance: usize,
    length: u64,
    offset: usize,
) -> Result<usize, XpressError> {
    if distance > pos {
        return Err(XpressError::DistanceTooFar {
            offset,
            distance,
            produced: pos,
        });
    }
    let room = (out.len() - pos) as u64;
    if length > room {
        return Err(XpressError::Overrun {
            offset,
            length,
            produced: pos,
            expected: out.len(),
        });
    }
    let length = length as usize;
    copy_match(out, pos, distance, length);
    Ok(pos + length)
}

/// Runs `decode` over `out` resized to `expected` zero bytes (after checking the bound);
/// `out` is left empty on error.
fn decode_with(
    decode: fn(&[u8], &mut [u8]) -> Result<(), XpressError>,
    input: &[u8],
    out: &mut Vec<u8>,
    expected: usize,
) -> Result<(), XpressError> {
    check_expected(expected)?;
    out.clear();
    out.resize(expected, 0);
    let r = decode(input, out);
    if r.is_err() {
        out.clear();
    }
    r
}

/// Decodes a Plain LZ77 stream ([MS-XCA] §2.4) into `out`, which is cleared and left holding
/// exactly `expected` bytes on success (empty on error).
pub fn decompress_lz77(
    input: &[u8],
    out: &mut Vec<u8>,
    expected: usize,
) -> Result<(), XpressError> {
    decode_with(lz77_into, input, out, expected)
}

fn lz77_into(input: &[u8], out: &mut [u8]) -> Result<(), XpressError> {
    let expected = out.len();
    let mut pos = 0usize;
    let mut ip = 0usize;
    let mut flags: u32 = 0;
    let mut flag_count: u32 = 0;
    // Where the shared length half-byte is, when one is waiting for its second user.
    let mut half_byte: Option<usize> = None;
    let truncated = |offset: usize, pos: usize| XpressError::Truncated {
        offset,
        produced: pos,
        expected,
    };
    while pos < expected {
        if flag_count == 0 {
            let w = input.get(ip..ip + 4).ok_or(truncated(ip, pos))?;
            flags = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            ip += 4;
            flag_count = 32;
        }
        // Literals: the run of zero flags from the next one down, copied at once.
        let pending = flags & (((1u64 << flag_count) - 1) as u32);
        let run = if pending == 0 {
            flag_count
        } else {
            flag_count - 1 - (31 - pending.leading_zeros())
        } as usize;
        if run > 0 {
            let n = run.min(expected - pos);
            let src = input.get(ip..ip + n).ok_or_else(|| {
                let have = input.len().saturating_sub(ip).min(n);
                truncated(ip + have, pos + have)
            })?;
            out[pos..pos + n].copy_from_slice(src);
            pos += n;
            ip += n;
            flag_count -= n as u32;
            continue;
        }
        // A match.
        flag_count -= 1;
        let at = ip;
        let m = input.get(ip..ip + 2).ok_or(truncated(ip, pos))?;
        let match_bytes = u16::from_le_bytes([m[0], m[1]]);
        ip += 2;
        let mut length = u64::from(match_bytes & 7);
        let distance = usize::from(match_bytes >> 3) + 1;
        if length == 7 {
            length = match half_byte.take() {
                None => {
                    let b = *input.get(ip).ok_or(truncated(ip, pos))?;
                    half_byte = Some(ip);
                    ip += 1;
                    u64::from(b & 15)
                }
                Some(h) => u64::from(input[h] >> 4),
            };
            if length == 15 {
                let b = *input.get(ip).ok_or(truncated(ip, pos))?;
                ip += 1;
                length = u64::from(b);
                if length == 255 {
                    let w = input.get(ip..ip + 2).ok_or(truncated(ip, pos))?;
                    let escape_at = ip;
                    ip += 2;
                    let mut v = u32::from(u16::from_le_bytes([w[0], w[1]]));
                    if v == 0 {
                        let d = input.get(ip..ip + 4).ok_or(truncated(ip, pos))?;
                        v = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                        ip += 4;
                    }
                    if v < 15 + 7 {
                        return Err(XpressError::BadLength {
                            offset: escape_at,
                            value: v,
                        });
                    }
                    length = u64::from(v) - (15 + 7);
                }
                length += 15;
            }
            length += 7;
        }
        length += 3;
        pos = apply_match(out, pos, distance, length, at)?;
    }
    Ok(())
}

/// Symbols of the LZ77+Huffman alphabet and the longest code.
const SYMBOLS: usize = 512;
const MAX_BITS: u32 = 15;
const TABLE_SIZE: usize = 1 << MAX_BITS;
/// Output per Huffman block.
const BLOCK: usize = 65536;

/// Builds the 2^15-entry decoding table (entry = symbol << 4 | code length) from the 256-byte
/// table of 4-bit lengths at `lengths`, canonically: by length, then by symbol ([MS-XCA]
/// §2.2.4). The lengths must fill the table exactly.
fn build_table(lengths: &[u8], table: &mut [u16], offset: usize) -> Result<(), XpressError> {
    let len_of = |s: usize| (lengths[s / 2] >> ((s & 1) * 4)) & 15;
    let mut count = [0u32; 16];
    for s in 0..SYMBOLS {
        count[usize::from(len_of(s))] += 1;
    }
    let mut used: u64 = 0;
    for (bits, &n) in count.iter().enumerate().skip(1) {
        used += u64::from(n) << (MAX_BITS as usize - bits);
    }
    if used > TABLE_SIZE as u64 {
        return Err(XpressError::BadTable {
            offset,
            problem: TableProblem::OverSubscribed,
        });
    }
    if used < TABLE_SIZE as u64 {
        return Err(XpressError::BadTable {
            offset,
            problem: TableProblem::Incomplete,
        });
    }
    // Start of each length's entries, then every symbol in order within its length.
    let mut next = [0usize; 16];
    let mut at = 0usize;
    for bits in 1..16 {
        next[bits] = at;
        at += (count[bits] as usize) << (MAX_BITS as usize - bits);
    }
    for s in 0..SYMBOLS {
        let bits = usize::from(len_of(s));
        if bits == 0 {
            continue;
        }
        let n = 1usize << (MAX_BITS as usize - bits);
        let start = next[bits];
        table[start..start + n].fill(((s as u16) << 4) | bits as u16);
        next[bits] = start + n;
    }
    Ok(())
}

/// The LZ77+Huffman bit reader of [MS-XCA] §2.2.4: a 32-bit register of the next bits, read
/// MSB first from 16-bit little-endian words, and the byte position shared with the extra length
/// bytes. Words past the end of the input read as zero and are counted: decoding a bit from one
/// is a truncation.
struct Bits<'a> {
    input: &'a [u8],
    next_bits: u32,
    /// The spec's ExtraBitCount: unconsumed bits in the register are 16 + this.
    extra: i32,
    pos: usize,
    /// Zero words supplied past the end of the input.
    missing: i32,
}

impl<'a> Bits<'a> {
    fn new(input: &'a [u8], pos: usize) -> Self {
        let mut b = Bits {
            input,
            next_bits: 0,
            extra: 16,
            pos,
            missing: 0,
        };
        let hi = b.word();
        let lo = b.word();
        b.next_bits = (hi << 16) | lo;
        b
    }

    #[inline]
    fn word(&mut self) -> u32 {
        let p = self.pos;
        self.pos += 2;
        match self.input.get(p..p + 2) {
            Some(w) => u32::from(u16::from_le_bytes([w[0], w[1]])),
            None => {
                self.missing += 1;
                0
            }
        }
    }

    #[inline]
    fn consume(&mut self, n: u32) {
        self.next_bits <<= n;
        self.extra -= n as i32;
        if self.extra < 0 {
            self.next_bits |= self.word() << (-self.extra) as u32;
            self.extra += 16;
        }
    }

    /// True when a bit decoded so far came from a word past the end of the input.
    #[inline]
    fn overread(&self) -> bool {
        self.missing > 0 && 16 + self.extra < 16 * self.missing
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.input.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        let w = self.input.get(self.pos..self.pos + 2)?;
        self.pos += 2;
        Some(u16::from_le_bytes([w[0], w[1]]))
    }
}

/// Decodes an LZ77+Huffman stream ([MS-XCA] §2.2) into `out`, which is cleared and left
/// holding exactly `expected` bytes on success (empty on error). Each 64 KiB of output has its
/// own 256-byte code-length table; decoding stops at `expected` bytes, so an end-of-stream
/// symbol (256) after them is not read.
pub fn decompress_huffman(
    input: &[u8],
    out: &mut Vec<u8>,
    expected: usize,
) -> Result<(), XpressError> {
    decode_with(huffman_into, input, out, expected)
}

fn huffman_into(input: &[u8], out: &mut [u8]) -> Result<(), XpressError> {
    let expected = out.len();
    let mut table = vec![0u16; TABLE_SIZE];
    let mut pos = 0usize;
    let mut ip = 0usize;
    let truncated = |offset: usize, pos: usize| XpressError::Truncated {
        offset,
        produced: pos,
        expected,
    };
    while pos < expected {
        let lengths = input.get(ip..ip + 256).ok_or(truncated(ip, pos))?;
        build_table(lengths, &mut table, ip)?;
        let mut bits = Bits::new(input, ip + 256);
        let block_end = pos.saturating_add(BLOCK).min(expected);
        while pos < block_end {
            let symbol_at = bits.pos;
            let e = table[(bits.next_bits >> (32 - MAX_BITS)) as usize];
            bits.consume(u32::from(e & 15));
            let symbol = usize::from(e >> 4);
            if symbol < 256 {
                if bits.overread() {
                    return Err(truncated(input.len(), pos));
                }
                out[pos] = symbol as u8;
                pos += 1;
                continue;
            }
            let m = symbol - 256;
            let mut length = (m & 15) as u64;
            let distance_bits = (m >> 4) as u32;
            if length == 15 {
                let at = bits.pos;
                length = u64::from(bits.byte().ok_or(truncated(at, pos))?);
                if length == 255 {
                    let at = bits.pos;
                    let v = bits.u16().ok_or(truncated(at, pos))?;
                    if v < 15 {
                        return Err(XpressError::BadLength {
                            offset: at,
                            value: u32::from(v),
                        });
                    }
                    length = u64::from(v) - 15;
                }
                length += 15;
            }
            length += 3;
            let mut distance = 1usize << distance_bits;
            if distance_bits > 0 {
                distance += (bits.next_bits >> (32 - distance_bits)) as usize;
            }
            bits.consume(distance_bits);
            if bits.overread() {
                return Err(truncated(input.len(), pos));
            }
            pos = apply_match(out, pos, distance, length, symbol_at)?;
        }
        ip = bits.pos;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_two_one_bit_codes() {
        let mut lengths = [0u8; 256];
        lengths[0] = 0x10; // symbol 1: 1 bit
        lengths[128] = 0x01; // symbol 256: 1 bit
        let mut table = vec![0u16; TABLE_SIZE];
        build_table(&lengths, &mut table, 0).unwrap();
        assert_eq!(table[0], (1 << 4) | 1);
        assert_eq!(table[TABLE_SIZE / 2 - 1], (1 << 4) | 1);
        assert_eq!(table[TABLE_SIZE / 2], (256 << 4) | 1);
        assert_eq!(table[TABLE_SIZE - 1], (256 << 4) | 1);
    }

    #[test]
    fn copy_match_overlapping_is_bytewise() {
        let mut out = *b"abc\0\0\0\0\0\0\0";
        copy_match(&mut out, 3, 2, 7);
        assert_eq!(&out, b"abcbcbcbcb");
        let mut out = *b"x\0\0\0";
        copy_match(&mut out, 1, 1, 3);
        assert_eq!(&out, b"xxxx");
    }
}
