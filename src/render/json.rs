//! Compact JSON written straight into a reused byte buffer (issue 30 item 1): the listings'
//! JSON Lines and CSV cells, millions of rows each.
//!
//! The text is byte for byte what `serde_json::to_writer` gives, and, in the terminal-safe
//! mode, what [`crate::text::json_terminal_safe`] then makes of it (DEL, the C1 controls, the
//! bidi controls and the line/paragraph separators as `\uXXXX`) — in one pass: a string is
//! copied in runs of bytes that need nothing and only the rare byte that needs an escape is
//! looked at, integers are written with `itoa` and floats with `zmij` (serde_json's own
//! formatters), and nothing is allocated per value. `tests` compare both texts on random
//! values and on real rows.

use serde::ser::{self, Serialize};
use std::fmt;

/// Why a value has no JSON text (a map key that is not a string or a number; a model's own
/// serialization error).
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::other(e)
    }
}

/// Append the compact JSON of `v` to `out`; `safe`: terminal-safe escapes as well.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T, safe: bool) -> Result<(), Error> {
    v.serialize(&mut Json { out, safe })
}

/// Hand-written rows (`Row::write_json` of the per-record listings): each function appends
/// what this serializer writes for the same value (terminal-safe), so that a row written
/// field by field with literal keys is the bytes `write` gives for it (checked on every row
/// in debug builds: `render::rows`).
pub(crate) mod field {
    use super::write_str;

    /// `"key":` with what comes before it (`{` or `,`), as one literal: e.g. `b",\"cpu\":"`.
    #[inline]
    pub fn key(out: &mut Vec<u8>, k: &'static [u8]) {
        super::push_bytes(out, k);
    }

    /// An integer (a single digit, common in a row — CPU, logger, clock — without `itoa`).
    #[inline]
    pub fn int<T: itoa::Integer + TryInto<u8> + Copy>(out: &mut Vec<u8>, v: T) {
        match v.try_into() {
            Ok(d) if d < 10 => out.push(b'0' + d),
            _ => super::push_bytes(out, itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    /// An integer or null.
    #[inline]
    pub fn opt_int<T: itoa::Integer + TryInto<u8> + Copy>(out: &mut Vec<u8>, v: Option<T>) {
        match v {
            Some(v) => int(out, v),
            None => out.extend_from_slice(b"null"),
        }
    }

    /// A string (escaped, terminal-safe).
    #[inline]
    pub fn str(out: &mut Vec<u8>, v: &str) {
        write_str(out, v, true);
    }

    /// A string or null.
    #[inline]
    pub fn opt_str(out: &mut Vec<u8>, v: Option<&str>) {
        match v {
            Some(v) => write_str(out, v, true),
            None => out.extend_from_slice(b"null"),
        }
    }

    /// An address (`"0x…"`, as its serde form) or null.
    #[inline]
    pub fn opt_addr(out: &mut Vec<u8>, v: Option<crate::addr::VirtAddr>) {
        match v {
            Some(a) => {
                out.push(b'"');
                super::push_bytes(out, crate::addr::hex_str(a.get(), &mut [0; 18]).as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
    }

    /// Any other value, through the serializer.
    #[inline]
    pub fn value<T: serde::Serialize + ?Sized>(
        out: &mut Vec<u8>,
        v: &T,
    ) -> Result<(), super::Error> {
        super::write(out, v, true)
    }
}

/// Append `s` as a JSON string (quotes included).
#[inline]
pub fn write_str(out: &mut Vec<u8>, s: &str, safe: bool) {
    let b = s.as_bytes();
    // Most strings of a row need nothing: quotes and bytes with one reservation.
    let i = next_special(b, 0);
    if i == b.len() {
        push_quoted(out, b);
    } else {
        write_str_from(out, s, i, safe);
    }
}

/// [`write_str`] of a string whose first byte to decide is at `i`.
#[inline(never)]
fn write_str_from(out: &mut Vec<u8>, s: &str, i: usize, safe: bool) {
    out.push(b'"');
    escape_into(out, s, i, safe);
    out.push(b'"');
}

/// Append `b` (nothing in it to escape) between quotes, with one reservation.
#[inline]
fn push_quoted(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n > 32 {
        out.reserve(n + 2);
        out.push(b'"');
        out.extend_from_slice(b);
        out.push(b'"');
        return;
    }
    out.reserve(34);
    let at = out.len();
    // SAFETY: `reserve(34)` leaves at least 34 bytes of capacity after `at`; the quote at
    // `at`, the bytes at `at + 1 .. at + 1 + n` (n ≤ 32, written by `copy_small`, which
    // stores only inside its destination range) and the quote at `at + 1 + n` all land in
    // `at .. at + n + 2`, which they cover, so every byte below the new length is initialised.
    unsafe {
        let d = out.as_mut_ptr().add(at);
        *d = b'"';
        copy_small(d.add(1), b);
        *d.add(n + 1) = b'"';
        out.set_len(at + n + 2);
    }
}

/// Append `b` to `out`: a run of up to 32 bytes (keys, most names, numbers, addresses and
/// times of a row) as two overlapping copies instead of a call to `memcpy`; longer runs as
/// `extend_from_slice`.
#[inline]
pub(crate) fn push_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n > 32 {
        out.extend_from_slice(b);
        return;
    }
    out.reserve(32);
    let at = out.len();
    // SAFETY: `reserve(32)` leaves at least 32 bytes of capacity after `at`; `copy_small`
    // stores exactly `at..at + n` (n ≤ 32), so every byte below the new length is initialised.
    unsafe {
        copy_small(out.as_mut_ptr().add(at), b);
        out.set_len(at + n);
    }
}

/// Copy `b` (at most 32 bytes) to `d`: the first and last 16 (n ≥ 16), 8 (n ≥ 8), 4 (n ≥ 4)
/// or 1 bytes of `b`, read from `b` itself (bounds-checked slices), written unaligned;
/// together they cover `d .. d + n` and nothing else.
///
/// # Safety
/// `d .. d + b.len()` must be valid for writes, and `b.len() <= 32`.
#[inline]
unsafe fn copy_small(d: *mut u8, b: &[u8]) {
    let n = b.len();
    debug_assert!(n <= 32);
    // SAFETY: every store is inside `d .. d + n`, which the caller guarantees is writable.
    unsafe {
        if n >= 16 {
            let (first, last) = (word16(&b[..16]), word16(&b[n - 16..]));
            std::ptr::write_unaligned(d.cast::<u128>(), first);
            std::ptr::write_unaligned(d.add(n - 16).cast::<u128>(), last);
        } else if n >= 8 {
            let (first, last) = (word8(&b[..8]), word8(&b[n - 8..]));
            std::ptr::write_unaligned(d.cast::<u64>(), first);
            std::ptr::write_unaligned(d.add(n - 8).cast::<u64>(), last);
        } else if n >= 4 {
            let (first, last) = (word4(&b[..4]), word4(&b[n - 4..]));
            std::ptr::write_unaligned(d.cast::<u32>(), first);
            std::ptr::write_unaligned(d.add(n - 4).cast::<u32>(), last);
        } else if n > 0 {
            *d = b[0];
            *d.add(n / 2) = b[n / 2];
            *d.add(n - 1) = b[n - 1];
        }
    }
}

/// Sixteen bytes as a native word (for a copy: the byte order is kept).
#[inline]
fn word16(b: &[u8]) -> u128 {
    u128::from_ne_bytes(<[u8; 16]>::try_from(b).unwrap_or_default())
}

/// Eight bytes as a native word (for a copy: the byte order is kept).
#[inline]
fn word8(b: &[u8]) -> u64 {
    u64::from_ne_bytes(<[u8; 8]>::try_from(b).unwrap_or_default())
}

/// Four bytes as a native word.
#[inline]
fn word4(b: &[u8]) -> u32 {
    u32::from_ne_bytes(<[u8; 4]>::try_from(b).unwrap_or_default())
}

/// What a byte needs in a JSON string: 0 nothing, b'u' `\u00XX`, else the short escape's letter.
/// Bytes from 0x80 are decided per character (`safe` mode only); DEL is decided in `escape_into`.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_u_escape(out: &mut Vec<u8>, c: u32) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        HEX[(c >> 12) as usize & 0xf],
        HEX[(c >> 8) as usize & 0xf],
        HEX[(c >> 4) as usize & 0xf],
        HEX[c as usize & 0xf],
    ]);
}

/// The contents of a JSON string for `s` (without quotes).
/// `first`: the first byte to decide (`next_special(s, 0)`).
fn escape_into(out: &mut Vec<u8>, s: &str, first: usize, safe: bool) {
    let b = s.as_bytes();
    let mut start = 0;
    // Runs that need nothing are skipped sixteen (or eight) bytes at a time to the next byte
    // to decide: most strings are such a run to their end, copied at once.
    let mut i = first;
    while i < b.len() {
        let c = b[i];
        let e = ESCAPE[c as usize];
        if e != 0 {
            push_bytes(out, &b[start..i]);
            match e {
                b'u' => push_u_escape(out, u32::from(c)),
                letter => out.extend_from_slice(&[b'\\', letter]),
            }
            i += 1;
            start = i;
        } else if !safe && c >= 0x7f {
            // DEL and the bytes of multi-byte characters need nothing outside safe mode.
            i += 1;
        } else {
            // safe mode, DEL or a byte of a multi-byte character: the whole character decides.
            let ch = s[i..].chars().next().unwrap_or('\0');
            let n = ch.len_utf8();
            if crate::text::needs_escape(ch) {
                push_bytes(out, &b[start..i]);
                push_u_escape(out, u32::from(ch));
                start = i + n;
            }
            i += n;
        }
        i = next_special(b, i);
    }
    push_bytes(out, &b[start..]);
}

/// Pretty JSON (serde_json's `to_writer_pretty`) written to `w` as it is serialized,
/// terminal-safe: the text [`crate::text::json_terminal_safe`] makes of serde_json's pretty
/// text, without holding the text whole first (a model of a few hundred kilobytes, `symbols
/// --format json`, was built in a growing buffer, checked, then copied: a third of that run's
/// page faults).
///
/// serde_json escapes `"`, `\\` and the C0 controls itself and hands every other character of
/// a string to the formatter as a string fragment of whole characters; the characters
/// `json_terminal_safe` rewrites (all at or above U+0020, and only ever inside strings) are
/// escaped there, as the same `\\uXXXX` text. `tests` compare both on random values.
pub fn write_pretty<W: std::io::Write, T: Serialize + ?Sized>(
    w: W,
    v: &T,
) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::with_formatter(w, TerminalSafePretty::default());
    v.serialize(&mut ser)
}

/// serde_json's `PrettyFormatter` (two spaces a level; the same text), with string fragments
/// made terminal-safe, and each line break written with its indentation in one piece (the
/// wrapped formatter wrote the indentation a level at a time: most of `symbols --format json`'s
/// writes).
#[derive(Default)]
struct TerminalSafePretty {
    level: usize,
    has_value: bool,
}

/// A line break and the indentation of up to `(INDENTED.len() - 1) / 2` levels.
const INDENTED: &[u8; 129] = b"\n                                                                                                                                ";

impl TerminalSafePretty {
    /// A line break (after `comma`), then the current level's indentation.
    fn line<W: ?Sized + std::io::Write>(&self, w: &mut W, comma: bool) -> std::io::Result<()> {
        if comma {
            w.write_all(b",")?;
        }
        let mut spaces = 2 * self.level;
        let first = spaces.min(INDENTED.len() - 1);
        w.write_all(&INDENTED[..1 + first])?;
        spaces -= first;
        while spaces > 0 {
            let n = spaces.min(INDENTED.len() - 1);
            w.write_all(&INDENTED[1..1 + n])?;
            spaces -= n;
        }
        Ok(())
    }

    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(c)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level = self.level.saturating_sub(1);
        if self.has_value {
            self.line(w, false)?;
        }
        w.write_all(c)
    }
}

/// A bracket pair's four `Formatter` methods: open, close, an element's (or key's) line, and
/// an element (or value) written.
macro_rules! brackets {
    ($open:ident, $close:ident, $element:ident, $written:ident, $o:expr, $c:expr) => {
        fn $open<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            self.open(w, $o)
        }

        fn $close<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            self.close(w, $c)
        }

        fn $element<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            self.line(w, !first)
        }

        fn $written<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
            self.has_value = true;
            Ok(())
        }
    };
}

impl serde_json::ser::Formatter for TerminalSafePretty {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let b = fragment.as_bytes();
        // Fast path: ASCII below DEL needs nothing (C0 never reaches a fragment).
        if b.iter().all(|&c| c < 0x7f) {
            return w.write_all(b);
        }
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if crate::text::needs_escape(c) && u32::from(c) >= 0x20 {
                w.write_all(&b[start..i])?;
                let mut e = Vec::with_capacity(6);
                push_u_escape(&mut e, u32::from(c));
                w.write_all(&e)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&b[start..])
    }

    brackets!(
        begin_array,
        end_array,
        begin_array_value,
        end_array_value,
        b"[",
        b"]"
    );
    brackets!(
        begin_object,
        end_object,
        begin_object_key,
        end_object_value,
        b"{",
        b"}"
    );

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Pretty JSON written by hand into a buffer, for a model of hundreds of kilobytes whose
/// serde form went through the generic serializer value by value (`symbols --format json`:
/// a quarter of its instructions): each method appends what serde_json's pretty printer and
/// [`TerminalSafePretty`] write at that point (keys and strings as [`write_str`] writes
/// them, terminal-safe), so a writer that calls them in its model's serde order gives the
/// same text as [`write_pretty`] (tests compare both). The text goes to `w` each time the
/// buffer holds 64 KiB, and at [`finish_line`](Self::finish_line).
///
/// Its layout rules (`line`, `open`, `close`) are [`TerminalSafePretty`]'s, written for a
/// buffer: calling that formatter's methods on the buffer instead (through `io::Write`) gave
/// the same bytes and 0.7 M more instructions on the large PDB's document (18.0 M against
/// 17.3 M), so the rules are kept twice; the property and depth tests hold both to serde_json.
pub(crate) struct Pretty<'w> {
    buf: Vec<u8>,
    w: &'w mut dyn std::io::Write,
    level: usize,
    /// Whether the innermost open object or array has a value yet (the next one follows a
    /// comma).
    has_value: bool,
}

/// The buffer's size before it goes to the writer.
const PRETTY_FLUSH: usize = 1 << 16;

impl<'w> Pretty<'w> {
    pub fn new(w: &'w mut dyn std::io::Write) -> Self {
        Pretty {
            buf: Vec::with_capacity(PRETTY_FLUSH + 4096),
            w,
            level: 0,
            has_value: false,
        }
    }

    /// A line break (after a comma when the container has a value), then the indentation.
    fn line(&mut self, comma: bool) {
        if comma {
            self.buf.push(b',');
        }
        let mut spaces = 2 * self.level;
        let first = spaces.min(INDENTED.len() - 1);
        self.buf.extend_from_slice(&INDENTED[..1 + first]);
        spaces -= first;
        while spaces > 0 {
            let n = spaces.min(INDENTED.len() - 1);
            self.buf.extend_from_slice(&INDENTED[1..1 + n]);
            spaces -= n;
        }
    }

    /// `{` (or `[`): a container opens.
    pub fn open(&mut self, bracket: u8) {
        self.level += 1;
        self.has_value = false;
        self.buf.push(bracket);
    }

    /// `}` (or `]`): the innermost container closes (on a line of its own unless empty).
    pub fn close(&mut self, bracket: u8) {
        self.level = self.level.saturating_sub(1);
        if self.has_value {
            self.line(false);
        }
        self.buf.push(bracket);
        self.has_value = true;
    }

    /// An object's key: a name of etwdump's own (`format_version`, `fields`, ...), plain
    /// ASCII with nothing to escape, copied as it is.
    pub fn key(&mut self, k: &'static str) {
        debug_assert!(next_special(k.as_bytes(), 0) == k.len(), "{k}");
        self.line(self.has_value);
        self.buf.reserve(k.len() + 4);
        self.buf.push(b'"');
        self.buf.extend_from_slice(k.as_bytes());
        self.buf.extend_from_slice(b"\": ");
    }

    /// An object's key from the input (escaped as its serde form is).
    pub fn key_of<K: Serialize + ?Sized>(&mut self, k: &K) -> Result<(), Error> {
        self.line(self.has_value);
        write(&mut self.buf, k, true)?;
        self.buf.extend_from_slice(b": ");
        Ok(())
    }

    /// An object's key from the input, and an object under it opening.
    pub fn object_under<K: Serialize + ?Sized>(&mut self, k: &K) -> Result<(), Error> {
        self.key_of(k)?;
        self.open(b'{');
        Ok(())
    }

    /// The next element of an array (its value follows).
    pub fn element(&mut self) {
        self.line(self.has_value);
    }

    /// A string value.
    pub fn str(&mut self, v: &str) {
        write_str(&mut self.buf, v, true);
        self.has_value = true;
    }

    /// An integer value.
    pub fn int<T: itoa::Integer>(&mut self, v: T) {
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self.has_value = true;
    }

    /// `true` or `false`.
    pub fn bool(&mut self, v: bool) {
        self.buf
            .extend_from_slice(if v { b"true" } else { b"false" });
        self.has_value = true;
    }

    /// A key (etwdump's own) and its integer.
    pub fn key_int<T: itoa::Integer>(&mut self, k: &'static str, v: T) {
        self.key(k);
        self.int(v);
    }

    /// A key (etwdump's own) and its string.
    pub fn key_str(&mut self, k: &'static str, v: &str) {
        self.key(k);
        self.str(v);
    }

    /// `null`.
    pub fn null(&mut self) {
        self.buf.extend_from_slice(b"null");
        self.has_value = true;
    }

    /// Any other value through its serde form, compact: only for values without an object
    /// or array inside (strings, numbers), whose compact and pretty texts are the same.
    pub fn value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        write(&mut self.buf, v, true)?;
        self.has_value = true;
        Ok(())
    }

    /// Hand the text so far to the writer once the buffer holds 64 KiB.
    pub fn flush_if_full(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= PRETTY_FLUSH {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// End the text with a line break and write out the rest of it.
    pub fn finish_line(mut self) -> std::io::Result<()> {
        self.buf.push(b'\n');
        self.w.write_all(&self.buf)?;
        self.w.flush()
    }
}

/// Whether every byte of `b` is printable ASCII other than `"` and `\\` (nothing to escape
/// in either mode).
#[cfg(test)]
fn plain(b: &[u8]) -> bool {
    next_special(b, 0) == b.len()
}

/// The index of the first byte of `b` from `from` on that is not printable ASCII other than
/// `"` and `\\` (one to escape or decide), else `b.len()` — most strings of a listing are
/// plain, and short. Sixteen bytes at a time with SSE2 (part of x86-64's baseline) from 16
/// bytes on, the last 16 read again overlapping; shorter strings eight at a time
/// ([`next_special_words`]).
#[cfg(target_arch = "x86_64")]
#[inline]
fn next_special(b: &[u8], from: usize) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let n = b.len();
    if n < 16 || from >= n {
        return next_special_words(b, from);
    }
    // A bit per byte of the 16 at `at` that needs something: below 0x20 or from 0x80 (both
    // below 0x20 as signed bytes), DEL, `"` and `\\`.
    let special = |at: usize| -> u32 {
        assert!(at + 16 <= n);
        // SAFETY: `at + 16 <= b.len()` (asserted), so the unaligned 16-byte load reads only
        // `b`'s bytes; the other intrinsics are SSE2 arithmetic on registers.
        let m = unsafe {
            let x = _mm_loadu_si128(b.as_ptr().add(at).cast::<__m128i>());
            let control_or_high = _mm_cmpgt_epi8(_mm_set1_epi8(0x20), x);
            let del = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f));
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(
                _mm_or_si128(control_or_high, del),
                _mm_or_si128(quote, backslash),
            ))
        };
        m as u32
    };
    let mut at = from;
    while at + 16 <= n {
        let m = special(at);
        if m != 0 {
            return at + m.trailing_zeros() as usize;
        }
        at += 16;
    }
    if at == n {
        return n;
    }
    // The last 16 bytes, without those before `at` (already passed).
    let m = special(n - 16) >> (at - (n - 16));
    if m != 0 {
        at + m.trailing_zeros() as usize
    } else {
        n
    }
}

/// [`next_special`] on other targets.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn next_special(b: &[u8], from: usize) -> usize {
    next_special_words(b, from)
}

/// [`next_special`] without vector instructions: eight bytes at a time, the last eight read
/// again overlapping (the x86-64 build uses it for strings shorter than 16 bytes; its tests
/// hold it to the byte rule on every length).
#[inline]
fn next_special_words(b: &[u8], from: usize) -> usize {
    let n = b.len();
    let word = |at: usize| {
        b.get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let mut at = from;
    while at + 8 <= n {
        let m = escape_bits(word(at));
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    if at >= n {
        return n;
    }
    if n >= 8 {
        // The last eight bytes, those before `at` (passed, and maybe a byte decided before)
        // replaced by one that needs nothing, so no borrow or carry comes from them.
        let before = (1u64 << (8 * (at - (n - 8)))) - 1;
        let w = (word(n - 8) & !before) | (u64::from_le_bytes([b'a'; 8]) & before);
        let m = escape_bits(w) & !before;
        return if m != 0 {
            n - 8 + (m.trailing_zeros() / 8) as usize
        } else {
            n
        };
    }
    b[at..]
        .iter()
        .position(|&c| special_byte(c))
        .map_or(n, |k| at + k)
}

/// Whether byte `c` is not printable ASCII other than `"` and `\\`: a byte [`escape_into`]
/// escapes or decides (the rule `next_special`'s vector and word forms compute in bulk).
#[inline]
fn special_byte(c: u8) -> bool {
    c.wrapping_sub(0x20) > 0x5e || c == b'"' || c == b'\\'
}

/// The high bit of each byte of `w` that is below 0x20, at or above 0x7F
/// ([`crate::text::unprintable_bits`]), `"` or `\\` (Bit Twiddling Hacks' `haszero`), and
/// possibly of bytes above such a byte: a borrow between bytes only ever comes from a byte
/// that is itself such a byte, so the lowest bit set is exact, and none is set when no byte
/// is such.
#[inline]
fn escape_bits(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let s = w ^ (ONES * u64::from(b'\\'));
    let backslash = s.wrapping_sub(ONES) & !s;
    crate::text::unprintable_bits(w) | ((quote | backslash) & HIGH)
}

struct Json<'a> {
    out: &'a mut Vec<u8>,
    safe: bool,
}

impl Json<'_> {
    fn int(&mut self, v: impl itoa::Integer) -> Result<(), Error> {
        push_bytes(self.out, itoa::Buffer::new().format(v).as_bytes());
        Ok(())
    }
}

/// A sequence, map or struct being written: whether the next element is the first.
pub struct Compound<'a, 'b> {
    ser: &'b mut Json<'a>,
    first: bool,
    /// The closing bytes (`]`, `}`, or `}}` for an enum variant wrapped in an object).
    close: &'static [u8],
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if !self.first {
            self.ser.out.push(b',');
        }
        self.first = false;
    }
    /// A struct field's key: a name in etwdump's own code (`serde` derive: a Rust field name or
    /// a `rename`), never text from the input (map keys, which may be, go through `MapKey`):
    /// copied as it is. The output's keys are checked against `docs/schema` by
    /// tests/json_schema.rs.
    fn key(&mut self, k: &'static str) {
        debug_assert!(
            k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'),
            "{k}"
        );
        self.comma();
        let out = &mut *self.ser.out;
        out.reserve(k.len() + 3);
        out.push(b'"');
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b"\":");
    }
}

/// Integer serializer methods, each writing the number: `json` on `&mut Json`, `cell` on
/// [`Cell`] (through its `Json`).
macro_rules! ints {
    (json; $($f:ident: $t:ty),*) => {$(
        fn $f(self, v: $t) -> Result<(), Error> {
            self.int(v)
        }
    )*};
    (cell; $($f:ident: $t:ty),*) => {$(
        fn $f(self, v: $t) -> Result<(), Error> {
            self.0.int(v)
        }
    )*};
}

impl<'a, 'b> ser::Serializer for &'b mut Json<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    ints!(json; serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    // serde_json: finite floats by ryu, the others as null.
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() {
            self.out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            self.out
                .extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v, self.safe);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        let mut s = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for b in v {
            ser::SerializeSeq::serialize_element(&mut s, b)?;
        }
        ser::SerializeSeq::end(s)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        write_str(self.out, variant, self.safe);
        self.out.push(b':');
        v.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'[');
        Ok(Compound {
            ser: self,
            first: true,
            close: b"]",
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant, self.safe);
        self.out.extend_from_slice(b":[");
        Ok(Compound {
            ser: self,
            first: true,
            close: b"]}",
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'{');
        Ok(Compound {
            ser: self,
            first: true,
            close: b"}",
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant, self.safe);
        self.out.extend_from_slice(b":{");
        Ok(Compound {
            ser: self,
            first: true,
            close: b"}}",
        })
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.comma();
        v.serialize(&mut *self.ser)
    }
    fn end(self) -> Result<(), Error> {
        self.ser.out.extend_from_slice(self.close);
        Ok(())
    }
}

/// The tuple shapes: elements of a sequence (serde's traits differ only in the method's name).
macro_rules! as_seq {
    ($($tr:ident::$m:ident),*) => {$(
        impl ser::$tr for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
                ser::SerializeSeq::serialize_element(self, v)
            }
            fn end(self) -> Result<(), Error> {
                ser::SerializeSeq::end(self)
            }
        }
    )*};
}

as_seq!(
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Error> {
        self.comma();
        k.serialize(MapKey(&mut *self.ser))?;
        self.ser.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        v.serialize(&mut *self.ser)
    }
    fn end(self) -> Result<(), Error> {
        self.ser.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        k: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.key(k);
        v.serialize(&mut *self.ser)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeMap::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        k: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, k, v)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeMap::end(self)
    }
}

/// A map key: strings as they are; integers, chars, booleans and finite floats quoted
/// (serde_json's rules); anything else is an error, as in serde_json.
struct MapKey<'s, 'a>(&'s mut Json<'a>);

macro_rules! int_key {
    ($($f:ident: $t:ty),*) => {$(
        fn $f(self, v: $t) -> Result<(), Error> {
            self.0.out.push(b'"');
            self.0.int(v)?;
            self.0.out.push(b'"');
            Ok(())
        }
    )*};
}

fn key_error() -> Error {
    Error("key must be a string".into())
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.0.out, v, self.0.safe);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    int_key!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.0
            .out
            .extend_from_slice(if v { b"\"true\"" } else { b"\"false\"" });
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error("float key must be finite".into()));
        }
        self.0.out.push(b'"');
        ser::Serializer::serialize_f32(&mut *self.0, v)?;
        self.0.out.push(b'"');
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error("float key must be finite".into()));
        }
        self.0.out.push(b'"');
        ser::Serializer::serialize_f64(&mut *self.0, v)?;
        self.0.out.push(b'"');
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

/// The top-level fields of the struct `v` as CSV cell texts (the listings' CSV rows: a string
/// as it is, null as nothing, anything else as compact JSON — the text they had through
/// `serde_json::to_value`): each field's text appended to `text`, its span put in `cells` at
/// the index of the column named as the field (fields without a column are left out; a column
/// without a field keeps `None`, an empty cell).
pub fn cells<T: Serialize + ?Sized>(
    v: &T,
    columns: &[String],
    text: &mut Vec<u8>,
    cells: &mut [Option<std::ops::Range<usize>>],
) -> Result<(), Error> {
    v.serialize(Cells {
        columns,
        text,
        cells,
    })
}

struct Cells<'c> {
    columns: &'c [String],
    text: &'c mut Vec<u8>,
    cells: &'c mut [Option<std::ops::Range<usize>>],
}

struct CellsStruct<'c> {
    c: Cells<'c>,
    /// The column after the last one written (fields come in column order).
    next: usize,
    /// A flattened map's pending key's column.
    key: Option<usize>,
}

impl CellsStruct<'_> {
    fn column(&mut self, k: &str) -> Option<usize> {
        let cols = self.c.columns;
        let i = if cols.get(self.next).is_some_and(|c| c == k) {
            Some(self.next)
        } else {
            cols.iter().position(|c| c == k)
        };
        if let Some(i) = i {
            self.next = i + 1;
        }
        i
    }
    fn field<T: Serialize + ?Sized>(&mut self, col: Option<usize>, v: &T) -> Result<(), Error> {
        let Some(i) = col else { return Ok(()) };
        let start = self.c.text.len();
        v.serialize(Cell(&mut Json {
            out: self.c.text,
            safe: false,
        }))?;
        self.c.cells[i] = (self.c.text.len() > start).then_some(start..self.c.text.len());
        Ok(())
    }
}

impl ser::SerializeStruct for CellsStruct<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        k: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        let col = self.column(k);
        self.field(col, v)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl ser::SerializeMap for CellsStruct<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Error> {
        let mut t = Vec::new();
        k.serialize(MapKey(&mut Json {
            out: &mut t,
            safe: false,
        }))?;
        let name: String = serde_json::from_slice(&t).map_err(|e| Error(e.to_string()))?;
        self.key = self.column(&name);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let col = self.key.take();
        self.field(col, v)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

fn not_a_row() -> Error {
    Error("a CSV row is a struct or a map".into())
}

/// The serializer methods of a row that is not a struct or a map: an error.
macro_rules! refuse {
    ($($f:ident($($t:ty),*);)*) => {$(
        fn $f(self, $(_: $t),*) -> Result<(), Error> {
            Err(not_a_row())
        }
    )*};
}

impl<'c> ser::Serializer for Cells<'c> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = CellsStruct<'c>;
    type SerializeStruct = CellsStruct<'c>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    refuse! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_u8(u8); serialize_u16(u16); serialize_u32(u32);
        serialize_u64(u64); serialize_f32(f32); serialize_f64(f64); serialize_char(char);
        serialize_str(&str); serialize_bytes(&[u8]); serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(not_a_row())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_a_row())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_a_row())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_a_row())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_a_row())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<CellsStruct<'c>, Error> {
        Ok(CellsStruct {
            c: self,
            next: 0,
            key: None,
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<CellsStruct<'c>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_a_row())
    }
}

/// One cell's text, as `serde_json::to_value` then the CSV rule gave it: a string (or a char,
/// or a unit variant's name) as it is, null (and a non-finite float, which serde_json's
/// `Value` holds as null) as nothing, anything else as compact JSON.
struct Cell<'b, 'a>(&'b mut Json<'a>);

impl<'a, 'b> ser::Serializer for Cell<'b, 'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_none(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() {
            ser::Serializer::serialize_f32(self.0, v)?;
        }
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            ser::Serializer::serialize_f64(self.0, v)?;
        }
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.0.serialize_bool(v)
    }
    ints!(cell; serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64);
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.0.serialize_bytes(v)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        n: &'static str,
        i: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.0.serialize_newtype_variant(n, i, variant, v)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_seq(len)
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_tuple(len)
    }
    fn serialize_tuple_struct(
        self,
        n: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_tuple_struct(n, len)
    }
    fn serialize_tuple_variant(
        self,
        n: &'static str,
        i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_tuple_variant(n, i, variant, len)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_map(len)
    }
    fn serialize_struct(self, n: &'static str, len: usize) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_struct(n, len)
    }
    fn serialize_struct_variant(
        self,
        n: &'static str,
        i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.0.serialize_struct_variant(n, i, variant, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// serde_json's text, then the terminal-safety pass when `safe`.
    fn reference(v: &Value, safe: bool) -> Vec<u8> {
        let mut t = serde_json::to_vec(v).unwrap();
        if safe {
            crate::text::json_terminal_safe(&mut t);
        }
        t
    }

    fn ours(v: &Value, safe: bool) -> Vec<u8> {
        let mut t = Vec::new();
        write(&mut t, v, safe).unwrap();
        t
    }

    /// Characters every escape rule touches: C0, `"`, `\`, DEL, C1, bidi and separators,
    /// other non-ASCII (kept), astral characters (kept).
    fn tricky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            (0u32..0x80).prop_map(|c| char::from_u32(c).unwrap()),
            (0x80u32..0xa0).prop_map(|c| char::from_u32(c).unwrap()),
            prop::sample::select(vec![
                '\u{061C}',
                '\u{200D}',
                '\u{200E}',
                '\u{200F}',
                '\u{2028}',
                '\u{2029}',
                '\u{202A}',
                '\u{202E}',
                '\u{202F}',
                '\u{2065}',
                '\u{2066}',
                '\u{2069}',
                '\u{206A}',
                'é',
                'ß',
                '字',
                '\u{1F600}',
                '\u{FEFF}',
                '\u{A0}'
            ]),
            any::<char>(),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop::collection::vec(tricky_char(), 0..24)
                .prop_map(|c| Value::from(c.into_iter().collect::<String>())),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec((prop::collection::vec(tricky_char(), 0..8), inner), 0..6)
                    .prop_map(|kv| Value::Object(
                        kv.into_iter()
                            .map(|(k, v)| (k.into_iter().collect(), v))
                            .collect()
                    )),
            ]
        })
    }

    /// `push_bytes` appends exactly the bytes `extend_from_slice` does (and `push_quoted`
    /// the same between quotes), for every length up to 40, onto buffers of every fill up to
    /// 20 bytes and with capacity exactly used up (so that it must grow).
    #[test]
    fn push_bytes_is_extend_from_slice() {
        let src: Vec<u8> = (0..40u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for n in 0..=40 {
            for fill in 0..=20usize {
                for tight in [false, true] {
                    let mut out = Vec::with_capacity(if tight { fill } else { 64 });
                    out.extend((0..fill).map(|i| 200 + i as u8));
                    let mut want = out.clone();
                    want.extend_from_slice(&src[..n]);
                    let mut quoted = out.clone();
                    push_bytes(&mut out, &src[..n]);
                    assert_eq!(out, want, "n {n} fill {fill} tight {tight}");
                    // `push_quoted` is the same between quotes.
                    push_quoted(&mut quoted, &src[..n]);
                    let mut want = want[..fill].to_vec();
                    want.push(b'"');
                    want.extend_from_slice(&src[..n]);
                    want.push(b'"');
                    assert_eq!(quoted, want, "quoted: n {n} fill {fill} tight {tight}");
                }
            }
        }
    }

    /// `next_special` (vector and word forms) against the byte-by-byte definition: every
    /// byte value at every position of every length up to 40 (one, two and a part of 16-byte
    /// steps, the overlapping last step), among bytes that need nothing, from every start.
    #[test]
    fn next_special_is_the_byte_rule() {
        let needs = |c: u8| c.wrapping_sub(0x20) > 0x5e || c == b'"' || c == b'\\';
        // From the start, around the bytes that matter and each step's edges.
        let check = |v: &[u8], pos: usize| {
            let near = [
                pos.saturating_sub(1),
                pos,
                pos + 1,
                pos + 2,
                pos + 9,
                pos + 10,
            ];
            let edges = [
                0,
                1,
                7,
                8,
                9,
                15,
                16,
                17,
                v.len().saturating_sub(1),
                v.len(),
            ];
            for from in near.into_iter().chain(edges).filter(|&f| f <= v.len()) {
                let want = v[from..]
                    .iter()
                    .position(|&c| needs(c))
                    .map_or(v.len(), |k| from + k);
                assert_eq!(next_special(v, from), want, "{v:?} from {from}");
                assert_eq!(next_special_words(v, from), want, "{v:?} from {from}");
            }
            assert_eq!(plain(v), !v.iter().any(|&x| needs(x)), "{v:?}");
        };
        for len in 0..=40usize {
            for pos in 0..len.max(1) {
                for c in 0..=255u8 {
                    let mut v = vec![b'x'; len];
                    if len > 0 {
                        v[pos] = c;
                    }
                    check(&v, pos);
                    // Neighbours that carry or borrow (0xFF, 0x00, 0x7E, 0x1F) after it, and
                    // a second byte to decide further on.
                    for n in [0xffu8, 0x00, 0x7e, 0x1f, 0x21, 0x5b, b'"'] {
                        if pos + 1 < len {
                            let mut w = v.clone();
                            w[pos + 1] = n;
                            check(&w, pos);
                        }
                        if pos + 9 < len {
                            let mut w = v.clone();
                            w[pos + 9] = n;
                            check(&w, pos);
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Byte for byte serde_json's text (and the terminal-safety pass's) on random values.
        #[test]
        fn same_text_as_serde_json(v in value()) {
            prop_assert_eq!(ours(&v, false), reference(&v, false));
            prop_assert_eq!(ours(&v, true), reference(&v, true));
        }

        /// `write_pretty` is serde_json's pretty text after the terminal-safety pass.
        #[test]
        fn pretty_is_serde_pretty_made_safe(v in value()) {
            prop_assert_eq!(pretty_ours(&v), pretty_reference(&v));
        }
    }

    /// Nesting deeper than one piece of indentation holds (64 levels), empty and one-element
    /// arrays and objects at every depth: serde_json's pretty text.
    #[test]
    fn pretty_indentation_at_every_depth() {
        for depth in [0usize, 1, 2, 63, 64, 65, 130, 200] {
            for leaf in [
                json!([]),
                json!({}),
                json!([1]),
                json!({"k": "v"}),
                json!(null),
            ] {
                let mut v = leaf.clone();
                for i in 0..depth {
                    v = if i % 2 == 0 {
                        json!([v, 2, {}])
                    } else {
                        json!({"a": v, "b": [], "c": {"d": 1}})
                    };
                }
                assert_eq!(
                    pretty_ours(&v),
                    pretty_reference(&v),
                    "depth {depth}, {leaf}"
                );
            }
        }
    }

    fn pretty_reference<T: serde::Serialize + ?Sized>(v: &T) -> String {
        let mut t = serde_json::to_vec_pretty(v).unwrap();
        crate::text::json_terminal_safe(&mut t);
        String::from_utf8(t).unwrap()
    }

    fn pretty_ours<T: serde::Serialize + ?Sized>(v: &T) -> String {
        let mut t = Vec::new();
        write_pretty(&mut t, v).unwrap();
        String::from_utf8(t).unwrap()
    }

    #[derive(serde::Serialize)]
    enum E {
        Unit,
        New(u8),
        Tup(u8, &'static str),
        Rec { a: Option<u8>, b: char },
    }

    #[derive(serde::Serialize)]
    struct S<'a> {
        e: Vec<E>,
        bytes: &'a [u8],
        t: (i8, f32),
        m: std::collections::BTreeMap<u16, &'a str>,
        c: std::collections::BTreeMap<char, ()>,
        k: std::collections::BTreeMap<bool, Option<i8>>,
        u: (),
        x: u128,
        nan: f64,
    }

    /// The serde data model's other shapes (enums, bytes, tuples, integer and char keys,
    /// u128, non-finite floats) as serde_json writes them.
    #[test]
    fn every_shape_as_serde_json() {
        let s = S {
            e: vec![
                E::Unit,
                E::New(7),
                E::Tup(1, "\u{1b}\u{85}"),
                E::Rec {
                    a: None,
                    b: '\u{202e}',
                },
            ],
            bytes: &[0, 255],
            t: (-3, 1.5),
            m: [(9, "x"), (65535, "\u{7f}")].into_iter().collect(),
            c: [('k', ())].into_iter().collect(),
            k: [(true, Some(-1)), (false, None)].into_iter().collect(),
            u: (),
            x: u128::MAX,
            nan: f64::NAN,
        };
        for safe in [false, true] {
            let mut want = serde_json::to_vec(&s).unwrap();
            if safe {
                crate::text::json_terminal_safe(&mut want);
            }
            let mut got = Vec::new();
            write(&mut got, &s, safe).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
        assert_eq!(pretty_ours(&s), pretty_reference(&s));
        // A key serde_json refuses is refused here too.
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 1)].into_iter().collect();
        assert!(serde_json::to_vec(&bad).is_err());
        assert!(write(&mut Vec::new(), &bad, true).is_err());
        assert_eq!(ours(&json!("\u{7f}"), true), b"\"\\u007f\"");
        assert_eq!(ours(&json!("\u{7f}"), false), "\"\u{7f}\"".as_bytes());
    }
}
