//! Xpress compressors, Microsoft [MS-XCA]: Plain LZ77 (§2.3.4) and LZ77+Huffman (§2.1.4), for
//! forging hibernation files' compression sets. Written from the specification's compression
//! pseudo-code, not from etwdump's decoders.
//!
//! Both use one greedy matcher: a hash of the next three bytes gives the last position with the
//! same hash; the candidate is verified and extended byte by byte.

/// Greedy match finder over `data`: the last position of each 3-byte hash.
struct Matcher {
    head: Vec<u32>,
}

const HASH_BITS: u32 = 15;
const NO_POS: u32 = u32::MAX;

impl Matcher {
    fn new() -> Self {
        Matcher {
            head: vec![NO_POS; 1 << HASH_BITS],
        }
    }

    fn hash(data: &[u8], at: usize) -> usize {
        let v = u32::from(data[at]) | u32::from(data[at + 1]) << 8 | u32::from(data[at + 2]) << 16;
        (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
    }

    /// Records `at` (when three bytes are left) without looking for a match.
    fn insert(&mut self, data: &[u8], at: usize) {
        if at + 3 <= data.len() {
            self.head[Self::hash(data, at)] = at as u32;
        }
    }

    /// The longest match (length, distance) of at least 3 bytes for `data[at..end]` at a
    /// distance of at most `window`; records `at`.
    fn find(
        &mut self,
        data: &[u8],
        at: usize,
        end: usize,
        window: usize,
    ) -> Option<(usize, usize)> {
        if at + 3 > end {
            return None;
        }
        let h = Self::hash(data, at);
        let cand = self.head[h];
        self.head[h] = at as u32;
        if cand == NO_POS {
            return None;
        }
        let cand = cand as usize;
        let distance = at - cand;
        if distance == 0 || distance > window {
            return None;
        }
        let mut len = 0;
        while at + len < end && data[cand + len] == data[at + len] {
            len += 1;
        }
        (len >= 3).then_some((len, distance))
    }
}

/// Plain LZ77 ([MS-XCA] §2.3.4): 32-bit flag words, literal bytes, 16-bit matches (13-bit
/// distance − 1, 3-bit length − 3) with lengths escaped through a shared half-byte, a byte, a
/// u16 and a u32. Distances up to 8,192.
pub fn compress_lz77(input: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    let mut flags: u64 = 0;
    let mut flag_count = 0u32;
    let mut flag_pos = 0usize;
    // The byte whose high half-byte is free for the next long length (§2.3.4 LastLengthHalfByte).
    let mut half_byte: Option<usize> = None;
    let mut m = Matcher::new();
    let mut i = 0usize;

    let mut push_flag = |out: &mut Vec<u8>, flags: &mut u64, bit: u64| {
        *flags = (*flags << 1) | bit;
        flag_count += 1;
        if flag_count == 32 {
            out[flag_pos..flag_pos + 4].copy_from_slice(&(*flags as u32).to_le_bytes());
            flag_count = 0;
            flag_pos = out.len();
            out.extend_from_slice(&[0; 4]);
        }
        flag_count
    };

    let mut last_count = 0;
    while i < input.len() {
        match m.find(input, i, input.len(), 8192) {
            None => {
                out.push(input[i]);
                i += 1;
                last_count = push_flag(&mut out, &mut flags, 0);
            }
            Some((len, distance)) => {
                let extra = len - 3;
                let word = ((distance - 1) << 3) as u16;
                if extra < 7 {
                    out.extend_from_slice(&(word | extra as u16).to_le_bytes());
                } else {
                    out.extend_from_slice(&(word | 7).to_le_bytes());
                    let rest = extra - 7;
                    let nibble = rest.min(15) as u8;
                    match half_byte.take() {
                        None => {
                            half_byte = Some(out.len());
                            out.push(nibble);
                        }
                        Some(h) => out[h] |= nibble << 4,
                    }
                    if rest >= 15 {
                        let rest = rest - 15;
                        if rest < 255 {
                            out.push(rest as u8);
                        } else {
                            out.push(255);
                            // The full length − 3.
                            let total = rest + 15 + 7;
                            if total < 1 << 16 {
                                out.extend_from_slice(&(total as u16).to_le_bytes());
                            } else {
                                out.extend_from_slice(&[0, 0]);
                                out.extend_from_slice(&(total as u32).to_le_bytes());
                            }
                        }
                    }
                }
                for p in i + 1..i + len {
                    m.insert(input, p);
                }
                i += len;
                last_count = push_flag(&mut out, &mut flags, 1);
            }
        }
    }
    // The unused flags of the last word are ones.
    let fc = u64::from(last_count);
    let f = (flags << (32 - fc)) | ((1u64 << (32 - fc)) - 1);
    out[flag_pos..flag_pos + 4].copy_from_slice(&(f as u32).to_le_bytes());
    out
}

/// One LZ77+Huffman item of a block: a literal or a (length, distance) match.
#[derive(Clone, Copy)]
enum Item {
    Literal(u8),
    Match { len: usize, distance: usize },
}

/// Bit index of the highest set bit (`distance` > 0).
fn high_bit(distance: usize) -> u32 {
    usize::BITS - 1 - distance.leading_zeros()
}

fn match_symbol(len: usize, distance: usize) -> usize {
    256 + (len - 3).min(15) + 16 * high_bit(distance) as usize
}

/// Code lengths (≤ `limit` bits) for `freqs`: Huffman's construction; while the longest code is
/// over the limit the counts are halved (kept ≥ 1) and the code rebuilt. Symbols with count 0
/// get no code; when fewer than two symbols are used, one more (the lowest unused) gets a code
/// so that the lengths form a complete prefix code, as [MS-XCA] §2.2.4 requires.
pub fn code_lengths(freqs: &[u32], limit: u32) -> Vec<u8> {
    let mut f: Vec<u64> = freqs.iter().map(|&x| u64::from(x)).collect();
    let used = f.iter().filter(|&&x| x > 0).count();
    if used < 2 {
        for x in f.iter_mut().filter(|x| **x == 0).take(2 - used) {
            *x = 1;
        }
    }
    loop {
        let lens = huffman_depths(&f);
        if lens.iter().all(|&l| u32::from(l) <= limit) {
            return lens;
        }
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x).div_ceil(2);
        }
    }
}

/// Depths of the leaves of a Huffman tree over the non-zero counts (ties by lower node id).
fn huffman_depths(f: &[u64]) -> Vec<u8> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Nodes: leaves 0..n, then internal nodes; parent links give depths.
    let n = f.len();
    let mut parent = vec![usize::MAX; 2 * n];
    let mut heap = BinaryHeap::new();
    for (s, &w) in f.iter().enumerate() {
        if w > 0 {
            heap.push(Reverse((w, s)));
        }
    }
    let mut next = n;
    while heap.len() > 1 {
        let Reverse((w1, a)) = heap.pop().unwrap();
        let Reverse((w2, b)) = heap.pop().unwrap();
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((w1 + w2, next)));
        next += 1;
    }
    (0..n)
        .map(|s| {
            if f[s] == 0 {
                return 0;
            }
            let mut d = 0u8;
            let mut x = s;
            while parent[x] != usize::MAX {
                x = parent[x];
                d += 1;
            }
            d
        })
        .collect()
}

/// Canonical codes for `lens`: by length, then by symbol, counting up from all zeros.
fn canonical_codes(lens: &[u8]) -> Vec<u32> {
    let mut codes = vec![0u32; lens.len()];
    let mut code = 0u32;
    for bits in 1..=15u8 {
        for (s, &l) in lens.iter().enumerate() {
            if l == bits {
                codes[s] = code;
                code += 1;
            }
        }
        code <<= 1;
    }
    codes
}

/// The §2.1.4.3 bit writer: 16-bit words, MSB first, written to slots reserved ahead of the
/// bytes (extra length bytes) that follow them.
struct BitWriter {
    free_bits: i32,
    next_word: u64,
    slot1: usize,
    slot2: usize,
}

impl BitWriter {
    /// Starts after the 256-byte table that ends at `out.len()`.
    fn new(out: &mut Vec<u8>) -> Self {
        let slot1 = out.len();
        out.extend_from_slice(&[0; 4]);
        BitWriter {
            free_bits: 16,
            next_word: 0,
            slot1,
            slot2: slot1 + 2,
        }
    }

    fn write_bits(&mut self, out: &mut Vec<u8>, n: u32, bits: u32) {
        let n = n as i32;
        let bits = u64::from(bits);
        if self.free_bits >= n {
            self.free_bits -= n;
            self.next_word = (self.next_word << n) + bits;
        } else {
            self.next_word <<= self.free_bits;
            self.next_word += bits >> (n - self.free_bits);
            self.free_bits -= n;
            let w = (self.next_word & 0xFFFF) as u16;
            out[self.slot1..self.slot1 + 2].copy_from_slice(&w.to_le_bytes());
            self.slot1 = self.slot2;
            self.slot2 = out.len();
            out.extend_from_slice(&[0, 0]);
            self.free_bits += 16;
            self.next_word = bits;
        }
    }

    fn flush(&mut self, out: &mut [u8]) {
        self.next_word <<= self.free_bits;
        let w = (self.next_word & 0xFFFF) as u16;
        out[self.slot1..self.slot1 + 2].copy_from_slice(&w.to_le_bytes());
        out[self.slot2..self.slot2 + 2].copy_from_slice(&[0, 0]);
    }
}

/// LZ77+Huffman ([MS-XCA] §2.1): per 64 KiB of input a 256-byte table of 4-bit code lengths
/// (canonical codes ≤ 15 bits for 512 symbols) and the block's bit stream, flushed at the end of
/// the block; the last block ends with the end-of-stream symbol 256. Matches stay inside their
/// block and reach back at most 65,535 bytes (into earlier blocks too). An empty input, or one
/// of a multiple of 64 KiB, ends with a block holding only the end-of-stream symbol.
pub fn compress_huffman(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut m = Matcher::new();
    let mut start = 0usize;
    loop {
        let end = (start + 65536).min(input.len());
        // The end-of-stream symbol goes after the last byte, in the same block unless that
        // block is full: a decoder ends a block after 64 KiB of output, so an input of a
        // multiple of 64 KiB (or none) gets a last block of the symbol alone.
        let last = end == input.len() && (end - start) < 65536;
        // LZ77 phase: items and symbol counts.
        let mut items = Vec::new();
        let mut freqs = vec![0u32; 512];
        let mut i = start;
        while i < end {
            match m.find(input, i, end, 65535) {
                None => {
                    items.push(Item::Literal(input[i]));
                    freqs[usize::from(input[i])] += 1;
                    i += 1;
                }
                Some((len, distance)) => {
                    items.push(Item::Match { len, distance });
                    freqs[match_symbol(len, distance)] += 1;
                    for p in i + 1..i + len {
                        m.insert(input, p);
                    }
                    i += len;
                }
            }
        }
        if last {
            freqs[256] += 1;
        }
        // Code construction.
        let lens = code_lengths(&freqs, 15);
        let codes = canonical_codes(&lens);
        // Final encoding.
        for pair in lens.chunks(2) {
            out.push(pair[0] | pair[1] << 4);
        }
        let mut w = BitWriter::new(&mut out);
        let sym = |w: &mut BitWriter, out: &mut Vec<u8>, s: usize| {
            w.write_bits(out, u32::from(lens[s]), codes[s]);
        };
        for item in items {
            match item {
                Item::Literal(b) => sym(&mut w, &mut out, usize::from(b)),
                Item::Match { len, distance } => {
                    sym(&mut w, &mut out, match_symbol(len, distance));
                    let mut l = len - 3;
                    if l >= 15 {
                        l -= 15;
                        if l < 255 {
                            out.push(l as u8);
                        } else {
                            out.push(255);
                            l += 15;
                            if l < 65536 {
                                out.extend_from_slice(&(l as u16).to_le_bytes());
                            } else {
                                out.extend_from_slice(&[0, 0]);
                                out.extend_from_slice(&(l as u32).to_le_bytes());
                            }
                        }
                    }
                    let hb = high_bit(distance);
                    w.write_bits(&mut out, hb, (distance - (1 << hb)) as u32);
                }
            }
        }
        if last {
            sym(&mut w, &mut out, 256);
        }
        w.flush(&mut out);
        if last {
            return out;
        }
        start = end;
    }
}

/// Plain texts for the codecs' tests, bench and interop check: (name, bytes). Empty and tiny
/// inputs, the [MS-XCA] §3 example texts, all-zero and pseudo-random pages, text, and the pages
/// of a forged crash dump (`Config::sample()`: headers, page tables, kernel image, zeros), in
/// sizes on and off the 64 KiB block size.
pub fn sample_set() -> Vec<(String, Vec<u8>)> {
    let text: Vec<u8> = (0..4000)
        .flat_map(|i| {
            format!(
                "line {i}: the quick brown fox jumps over the lazy dog {}\n",
                i * 7919 % 1013
            )
            .into_bytes()
        })
        .collect();
    let dump = crate::forge(&crate::Config::sample()).to_bytes();
    let v = vec![
        ("empty", Vec::new()),
        ("one-byte", vec![0x41]),
        ("alphabet", b"abcdefghijklmnopqrstuvwxyz".to_vec()),
        ("abc-x100", b"abc".repeat(100)),
        ("zero-page", vec![0; 4096]),
        ("zeros-200k", vec![0; 200 * 1024]),
        ("random-page", crate::random_image_bytes(7, 0, 4096)),
        ("random-70000", crate::random_image_bytes(8, 0, 70000)),
        ("text-65536", text[..65536].to_vec()),
        ("text-150001", text[..150_001].to_vec()),
        ("dump-16-pages", dump[..65536].to_vec()),
        ("dump-3-pages", dump[0x10000..0x13000].to_vec()),
        ("dump-1m", dump[..dump.len().min(1 << 20)].to_vec()),
    ];
    v.into_iter().map(|(n, b)| (n.to_string(), b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kraft(lens: &[u8]) -> u64 {
        lens.iter()
            .filter(|&&l| l > 0)
            .map(|&l| 1u64 << (15 - l))
            .sum()
    }

    #[test]
    fn fibonacci_counts_are_limited_to_15_bits_and_complete() {
        // Fibonacci counts give a Huffman tree as deep as there are symbols.
        let mut freqs = vec![0u32; 512];
        let (mut a, mut b) = (1u32, 1u32);
        for f in freqs.iter_mut().take(25) {
            *f = a;
            (a, b) = (b, a + b);
        }
        let unlimited = huffman_depths(&freqs.iter().map(|&x| u64::from(x)).collect::<Vec<_>>());
        assert_eq!(unlimited.iter().max(), Some(&24));
        let lens = code_lengths(&freqs, 15);
        assert!((5..=15).contains(lens.iter().max().unwrap()));
        assert_eq!(kraft(&lens), 1 << 15);
        assert_eq!(lens.iter().filter(|&&l| l > 0).count(), 25);
    }

    #[test]
    fn one_used_symbol_gets_a_partner() {
        let mut freqs = vec![0u32; 512];
        freqs[256] = 1;
        let lens = code_lengths(&freqs, 15);
        assert_eq!((lens[0], lens[256]), (1, 1));
        assert_eq!(kraft(&lens), 1 << 15);
    }
}
