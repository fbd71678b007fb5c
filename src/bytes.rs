//! Bounds-checked little-endian reads from byte slices. Every read returns `None` instead of
//! panicking when the slice is too short, so a truncated or crafted structure can never crash
//! the tool.

/// Little-endian reader over a byte slice.
pub(crate) trait LeBytes {
    /// The byte at `off`, if in bounds.
    fn u8_at(&self, off: usize) -> Option<u8>;
    /// The little-endian u16 at `off`, if all its bytes are in bounds.
    fn u16_at(&self, off: usize) -> Option<u16>;
    /// The little-endian u32 at `off`, if all its bytes are in bounds.
    fn u32_at(&self, off: usize) -> Option<u32>;
    /// The little-endian u64 at `off`, if all its bytes are in bounds.
    fn u64_at(&self, off: usize) -> Option<u64>;
    /// The little-endian i64 at `off`, if all its bytes are in bounds.
    fn i64_at(&self, off: usize) -> Option<i64> {
        self.u64_at(off).map(|v| v as i64)
    }
    /// `len` bytes at `off`, if all of them are inside the slice.
    fn bytes_at(&self, off: usize, len: usize) -> Option<&[u8]>;
}

impl LeBytes for [u8] {
    fn u8_at(&self, off: usize) -> Option<u8> {
        self.get(off).copied()
    }
    fn u16_at(&self, off: usize) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes_at(off, 2)?.try_into().ok()?))
    }
    fn u32_at(&self, off: usize) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes_at(off, 4)?.try_into().ok()?))
    }
    fn u64_at(&self, off: usize) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes_at(off, 8)?.try_into().ok()?))
    }
    fn bytes_at(&self, off: usize, len: usize) -> Option<&[u8]> {
        self.get(off..off.checked_add(len)?)
    }
}

/// Four-character tag as text, with non-printable bytes escaped (for error messages).
pub(crate) fn tag_text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

/// A GUID from its 16 in-memory bytes (Data1..3 little-endian), as
/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lower case, no braces): the one form every output
/// uses (session instance GUIDs, event providers, DumpBlob tags). PDB identities keep the
/// symbol-store form of their own (`symbols::identity`).
pub fn guid_text(b: &[u8; 16]) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{}",
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_le_bytes([b[4], b[5]]),
        u16::from_le_bytes([b[6], b[7]]),
        b[8],
        b[9],
        b[10..]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_have_one_form() {
        // The ETW kernel provider {9E814AAD-3204-11D2-9A82-006008A86939} as stored in memory.
        let b = [
            0xAD, 0x4A, 0x81, 0x9E, 0x04, 0x32, 0xD2, 0x11, 0x9A, 0x82, 0x00, 0x60, 0x08, 0xA8,
            0x69, 0x39,
        ];
        assert_eq!(guid_text(&b), "9e814aad-3204-11d2-9a82-006008a86939");
    }

    #[test]
    fn reads_are_bounded() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(b.u16_at(0), Some(0x0201));
        assert_eq!(b.u32_at(5), Some(0x0908_0706));
        assert_eq!(b.u32_at(6), None);
        assert_eq!(b.u64_at(1), Some(0x0908_0706_0504_0302));
        assert_eq!(b.u64_at(usize::MAX), None);
        assert_eq!(b.bytes_at(usize::MAX - 1, 4), None);
    }

    #[test]
    fn tags_and_strings() {
        assert_eq!(tag_text(b"PAGE"), "PAGE");
        assert_eq!(tag_text(&[0x4b, 0, 0xff, 0x47]), "K\\x00\\xffG");
    }
}
