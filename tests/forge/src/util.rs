//! Small helpers: little-endian writers, UTF-16 strings and a deterministic PRNG.

pub(crate) const PAGE_SIZE: u64 = 0x1000;

pub(crate) fn put_u16(buf: &mut [u8], off: usize, v: u16) {
    buf[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) {
    buf[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], off: usize, v: u64) {
    buf[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(buf: &mut [u8], off: usize, data: &[u8]) {
    buf[off..off + data.len()].copy_from_slice(data);
}

pub(crate) fn get_u64(buf: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(buf[off..off + 8].try_into().expect("8 bytes"))
}

pub(crate) fn get_u32(buf: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(buf[off..off + 4].try_into().expect("4 bytes"))
}

/// UTF-16LE bytes of `s`, without a terminating NUL.
pub(crate) fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|c| c.to_le_bytes()).collect()
}

pub(crate) fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// A 32-bit x86 kernel address as stored in a 64-bit field of KDDEBUGGER_DATA64:
/// sign-extended (0x82A00000 -> 0xFFFFFFFF82A00000).
pub(crate) fn sign_extend32(v: u64) -> u64 {
    v as u32 as i32 as i64 as u64
}

/// SplitMix64: small, deterministic, good enough for filler bytes and PFN picks.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish value in `lo..hi` (`hi > lo`).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(hi > lo, "empty range {lo:#x}..{hi:#x}");
        lo + self.next_u64() % (hi - lo)
    }

    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Parse "5278AFF8-6C34-1677-D7D7-835C85B7B844" (or without dashes) into the 16 bytes of
/// a GUID in on-disk order (Data1 u32 LE, Data2 u16 LE, Data3 u16 LE, Data4[8]), as stored
/// in an RSDS record.
pub fn guid_from_str(s: &str) -> [u8; 16] {
    let hex: String = s
        .chars()
        .filter(|c| !matches!(c, '-' | '{' | '}'))
        .collect();
    assert_eq!(hex.len(), 32, "GUID must have 32 hex digits: {s}");
    let b: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex digit"))
        .collect();
    let mut out = [0u8; 16];
    // Data1 (4 bytes), Data2 (2), Data3 (2) are little-endian on disk; Data4 is a byte array.
    out[0..4].copy_from_slice(&[b[3], b[2], b[1], b[0]]);
    out[4..6].copy_from_slice(&[b[5], b[4]]);
    out[6..8].copy_from_slice(&[b[7], b[6]]);
    out[8..16].copy_from_slice(&b[8..16]);
    out
}

/// The GUID of on-disk bytes as "5278AFF8-6C34-1677-D7D7-835C85B7B844" (uppercase, dashed);
/// the inverse of [`guid_from_str`].
pub fn guid_to_string(guid: &[u8; 16]) -> String {
    let d1 = u32::from_le_bytes(guid[0..4].try_into().expect("4"));
    let d2 = u16::from_le_bytes(guid[4..6].try_into().expect("2"));
    let d3 = u16::from_le_bytes(guid[6..8].try_into().expect("2"));
    let tail: String = guid[10..16].iter().map(|b| format!("{b:02X}")).collect();
    format!(
        "{d1:08X}-{d2:04X}-{d3:04X}-{:02X}{:02X}-{tail}",
        guid[8], guid[9]
    )
}

/// The symbol-store key of a PDB: `%08X%04X%04X` + hex(Data4) + `%X` age
/// (crash-dump-format.md §1.4 "PDB match"), from on-disk GUID bytes.
pub fn pdb_symbol_key(guid: &[u8; 16], age: u32) -> String {
    let d1 = u32::from_le_bytes(guid[0..4].try_into().expect("4"));
    let d2 = u16::from_le_bytes(guid[4..6].try_into().expect("2"));
    let d3 = u16::from_le_bytes(guid[6..8].try_into().expect("2"));
    let mut s = format!("{d1:08X}{d2:04X}{d3:04X}");
    for b in &guid[8..16] {
        s.push_str(&format!("{b:02X}"));
    }
    s.push_str(&format!("{age:X}"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_round_trip() {
        let g = guid_from_str("5278AFF8-6C34-1677-D7D7-835C85B7B844");
        assert_eq!(
            g,
            [
                0xF8, 0xAF, 0x78, 0x52, 0x34, 0x6C, 0x77, 0x16, 0xD7, 0xD7, 0x83, 0x5C, 0x85, 0xB7,
                0xB8, 0x44
            ]
        );
        assert_eq!(pdb_symbol_key(&g, 1), "5278AFF86C341677D7D7835C85B7B8441");
        assert_eq!(guid_to_string(&g), "5278AFF8-6C34-1677-D7D7-835C85B7B844");
    }

    #[test]
    fn sign_extension() {
        assert_eq!(sign_extend32(0x82A0_0000), 0xFFFF_FFFF_82A0_0000);
        assert_eq!(sign_extend32(0x7FFE_0000), 0x7FFE_0000);
    }
}
