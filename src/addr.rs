//! Address newtypes. A virtual address, a physical address and a page frame number are
//! different things; the type system keeps them apart.

use std::fmt;

/// Size of a small page on every architecture the tool reads.
pub const PAGE_SIZE: u64 = 0x1000;
/// `log2(PAGE_SIZE)`.
pub(crate) const PAGE_SHIFT: u32 = 12;

/// The dumped machine's pointer width: what an address's kernel half and an EX_FAST_REF's
/// reference-count bits depend on (`dump::Arch::width` gives it for an architecture).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointerWidth {
    Bits32,
    Bits64,
}

/// A virtual address in the dumped machine's kernel address space.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(u64);

/// A physical address in the dumped machine.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PhysAddr(u64);

/// A physical page frame number (physical address >> 12).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(u64);

impl VirtAddr {
    /// A virtual address (any 64-bit value; canonical form is not checked here).
    pub const fn new(v: u64) -> VirtAddr {
        VirtAddr(v)
    }
    /// The address as a number.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The address `n` bytes further on, wrapping like the CPU does.
    pub fn offset(self, n: u64) -> VirtAddr {
        VirtAddr(self.0.wrapping_add(n))
    }
    /// Offset of the address inside its 4 KiB page.
    pub fn page_offset(self) -> u64 {
        self.0 & (PAGE_SIZE - 1)
    }
    /// The start of the record whose member at `field_offset` is at this address
    /// (CONTAINING_RECORD), wrapping like the CPU does.
    pub fn containing(self, field_offset: u64) -> VirtAddr {
        VirtAddr(self.0.wrapping_sub(field_offset))
    }
    /// The object an EX_FAST_REF value points to: the value without its reference-count bits
    /// (4 with 64-bit pointers, 3 with 32-bit; etw-internals.md §2.7).
    pub fn fast_ref_object(self, width: PointerWidth) -> VirtAddr {
        VirtAddr(
            self.0
                & match width {
                    PointerWidth::Bits64 => !0xF,
                    PointerWidth::Bits32 => !0x7,
                },
        )
    }
    /// NULL.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
    /// Whether the address lies in the kernel half of the address space: canonical and at or
    /// above 0xFFFF800000000000 with 64-bit pointers, at or above 0x80000000 (and 32-bit) with
    /// 32-bit pointers.
    pub fn is_kernel(self, width: PointerWidth) -> bool {
        match width {
            PointerWidth::Bits64 => self.0 >= 0xFFFF_8000_0000_0000,
            PointerWidth::Bits32 => (0x8000_0000..=0xFFFF_FFFF).contains(&self.0),
        }
    }
}

impl PhysAddr {
    /// A physical address.
    pub const fn new(v: u64) -> PhysAddr {
        PhysAddr(v)
    }
    /// The address as a number.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The number of the page that holds it.
    pub fn pfn(self) -> Pfn {
        Pfn(self.0 >> PAGE_SHIFT)
    }
    /// Its offset in its page (0-4095).
    pub fn page_offset(self) -> u64 {
        self.0 & (PAGE_SIZE - 1)
    }
    /// The address `n` bytes further on (wrapping at 2^64).
    pub fn offset(self, n: u64) -> PhysAddr {
        PhysAddr(self.0.wrapping_add(n))
    }
}

impl Pfn {
    /// A page frame number.
    pub const fn new(v: u64) -> Pfn {
        Pfn(v)
    }
    /// The page frame number as a number.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The physical address of the page's first byte.
    pub fn addr(self) -> PhysAddr {
        PhysAddr(self.0 << PAGE_SHIFT)
    }
}

macro_rules! hex_fmt {
    ($t:ty, $name:literal) => {
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($name, "({:#x})"), self.0)
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
        impl fmt::LowerHex for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}
hex_fmt!(VirtAddr, "VirtAddr");

/// Addresses serialize as `"0x…"` strings: JSON numbers cannot hold every u64 exactly.
/// `v` as `{:#x}` formats it (`0x` then lower-case digits, no leading zeros), in `buf`.
pub(crate) fn hex_str(v: u64, buf: &mut [u8; 18]) -> &str {
    // All sixteen digits at once, then `0x` written over the last leading zeros.
    buf[2..10].copy_from_slice(&hex_digits(v >> 32));
    buf[10..18].copy_from_slice(&hex_digits(v & 0xffff_ffff));
    let start = 16 - digits(v);
    buf[start] = b'0';
    buf[start + 1] = b'x';
    std::str::from_utf8(&buf[start..]).unwrap_or("0x?")
}

/// The hexadecimal digits `v` needs (at least one).
fn digits(v: u64) -> usize {
    (16 - v.leading_zeros() as usize / 4).max(1)
}

/// The eight lower-case hexadecimal digits of `v` (below 2^32), most significant first: each
/// nibble spread to a byte, then `'0'` added, and `'a' - '0' - 10` more where it is above 9 (a
/// nibble above 9 is one that reaches 16 when 6 is added), without a branch or a table.
fn hex_digits(v: u64) -> [u8; 8] {
    const LOW: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    let mut x = v & 0xffff_ffff;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & LOW;
    // Byte i holds nibble i (least significant first): the text's order is the reverse.
    let above_nine = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    let ascii = x + 0x3030_3030_3030_3030 + above_nine * u64::from(b'a' - b'0' - 10);
    ascii.to_be_bytes()
}

/// `v` as `0x…` with at least `min_digits` hexadecimal digits (zero-padded): the text of
/// `format!("{v:#0w$x}")` with `w = min_digits + 2`, without the formatting machinery (a
/// listing formats millions of these).
pub(crate) fn hex_string(v: u64, min_digits: usize) -> String {
    let mut buf = [0u8; 18];
    let shown = hex_str(v, &mut buf);
    let digits = shown.len() - 2;
    let mut s = String::with_capacity(2 + digits.max(min_digits));
    s.push_str("0x");
    for _ in digits..min_digits {
        s.push('0');
    }
    s.push_str(&shown[2..]);
    s
}

macro_rules! hex_serde {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                // `{:#x}` without `fmt` or an allocation (every row of a listing has one).
                let mut buf = [0u8; 18];
                s.serialize_str(hex_str(self.0, &mut buf))
            }
        }
    };
}
hex_serde!(VirtAddr);
hex_serde!(PhysAddr);
hex_fmt!(PhysAddr, "PhysAddr");
hex_fmt!(Pfn, "Pfn");

#[cfg(test)]
mod tests {

    /// The serialized hex is `{:#x}`'s text, at the edges and on 100,000 values of every width.
    #[test]
    fn hex_str_is_lower_hex() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut vals = vec![0, 1, 0xf, 0x10, 0xff, 0x100, u64::MAX, 1 << 63];
        for i in 0..100_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x >> (i % 64));
        }
        for v in vals {
            assert_eq!(hex_str(v, &mut [0; 18]), format!("{v:#x}"));
            assert_eq!(hex_string(v, 1), format!("{v:#x}"));
            assert_eq!(hex_string(v, 4), format!("{v:#06x}"));
            assert_eq!(hex_string(v, 16), format!("{v:#018x}"));
        }
        assert_eq!(
            serde_json::to_string(&VirtAddr::new(0xfffff80312345000)).unwrap(),
            "\"0xfffff80312345000\""
        );
    }

    use super::*;

    #[test]
    fn page_math() {
        let va = VirtAddr(0xFFFF_F804_7BA0_1234);
        assert_eq!(va.page_offset(), 0x234);
        assert_eq!(PhysAddr(0x1AD_123).pfn(), Pfn(0x1AD));
        assert_eq!(Pfn(0x1AD).addr(), PhysAddr(0x1AD_000));
        assert_eq!(format!("{}", va), "0xfffff8047ba01234");
        assert_eq!(VirtAddr(u64::MAX).offset(2), VirtAddr(1));
    }
}
