//! Text from the input (a dump, an image, a symbol file or server, a layout file): the one
//! type that carries it, [`Untrusted`], and the one home of escaping it for a terminal.
//!
//! An attacker who controls a process name, a session name or a file on the suspect machine
//! controls these bytes. They leave the tool in two forms only:
//! - terminal-safe ([`Display`](fmt::Display), [`escape`], `csv_field` in `render::csv`):
//!   every C0 control, DEL, every C1 control (U+0080-U+009F), the bidi controls (U+061C,
//!   U+200E/F, U+202A-U+202E, U+2066-U+2069) and the line/paragraph separators (U+2028/9)
//!   become `\u{..}`;
//! - exact (`Serialize`, for JSON), where [`json_terminal_safe`] writes the same characters as
//!   `\uXXXX` escapes (still the same JSON string).
//!
//! The exact text is reached for comparisons and lookups through [`Untrusted::raw`], never for
//! printing: `tests/architecture.rs` keeps that accessor and other ways of decoding input
//! bytes out of the printing layers.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// Whether `c` must not reach a terminal raw: C0, DEL, C1, bidi controls, line separators.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// Whether every byte of `b` is printable ASCII (U+0020-U+007E): then no character of it
/// [`needs_escape`]. The fast path of the escaping functions (a byte loop the compiler
/// vectorizes; decoding characters costs about a fifth of a JSON Lines listing's time).
fn printable_ascii(b: &[u8]) -> bool {
    // 0x20..=0x7e is c - 0x20 <= 0x5e; 32-byte chunks folded without a branch per byte.
    let outside = |c: &u8| u8::from(c.wrapping_sub(0x20) > 0x5e);
    let mut chunks = b.chunks_exact(32);
    for ch in &mut chunks {
        if ch.iter().map(outside).fold(0, |a, x| a | x) != 0 {
            return false;
        }
    }
    // The rest (most names are all rest) eight bytes at a time, the last word padded with
    // spaces.
    let mut words = chunks.remainder().chunks_exact(8);
    let mut any = 0u64;
    for w in &mut words {
        any |= unprintable_bits(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut w = [b' '; 8];
        w[..tail.len()].copy_from_slice(tail);
        any |= unprintable_bits(u64::from_le_bytes(w));
    }
    any == 0
}

/// The high bit of each byte of `w` (eight bytes, little-endian) that is not printable ASCII
/// (below 0x20, or from 0x7F), and possibly of bytes above such a byte (Bit Twiddling Hacks'
/// `hasless` and `hasmore`): a borrow or carry between bytes only ever comes from a byte that
/// is itself such a byte, so the lowest bit set is exact, and none is set when no byte is
/// such. The word form of [`printable_ascii`]'s rule, shared with the JSON writer's.
#[inline]
pub(crate) fn unprintable_bits(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let del_or_high = w.wrapping_add(ONES) | w;
    (below_space | del_or_high) & (ONES * 0x80)
}

/// Whether every byte of `b` is ASCII below DEL (U+0000-U+007E): then [`json_terminal_safe`]
/// changes nothing (serde_json escaped the C0 controls in strings; those left are the line
/// breaks of pretty JSON). Byte loop folded like [`printable_ascii`]'s: a pretty document of
/// a few hundred kilobytes (`symbols --format json`) is checked in microseconds rather than
/// decoded character by character.
fn ascii_below_del(b: &[u8]) -> bool {
    let outside = |c: &u8| u8::from(*c >= 0x7f);
    let mut chunks = b.chunks_exact(32);
    for ch in &mut chunks {
        if ch.iter().map(outside).fold(0, |a, x| a | x) != 0 {
            return false;
        }
    }
    chunks.remainder().iter().map(outside).fold(0, |a, x| a | x) == 0
}

/// `s` made safe for a terminal: each character of [`needs_escape`] as `\u{..}`. Inline up
/// to the printable-ASCII check (nearly every name of a listing passes it: two in every
/// `cswitch` row's message).
#[inline]
pub fn escape(s: &str) -> Cow<'_, str> {
    if printable_ascii(s.as_bytes()) {
        return Cow::Borrowed(s);
    }
    escape_chars(s)
}

/// [`escape`] past its printable-ASCII check.
#[inline(never)]
fn escape_chars(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        push_escaped(&mut o, c);
    }
    Cow::Owned(o)
}

/// A page of our own lines (a table) made terminal-safe as a whole: line breaks kept, every
/// other character of [`needs_escape`] escaped. The last guard of the table outputs: text
/// from the input is escaped where it is formatted (`Untrusted`'s Display); this makes sure
/// no row type or page can put a raw control character on the terminal.
pub(crate) fn escape_lines(s: &str) -> Cow<'_, str> {
    if s.split('\n').all(|l| printable_ascii(l.as_bytes()))
        || !s.chars().any(|c| c != '\n' && needs_escape(c))
    {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c == '\n' {
            o.push(c);
        } else {
            push_escaped(&mut o, c);
        }
    }
    Cow::Owned(o)
}

/// Push `c`, escaped if it [`needs_escape`].
pub(crate) fn push_escaped(o: &mut String, c: char) {
    use fmt::Write;
    if needs_escape(c) {
        let _ = write!(o, "{}", c.escape_unicode());
    } else {
        o.push(c);
    }
}

/// [`escape`] as an owned string (text composed from input, e.g. a warning's message).
pub fn printable(s: &str) -> String {
    escape(s).into_owned()
}

/// Make JSON text terminal-safe: serde_json escapes only U+0000-U+001F, so DEL, the C1
/// controls (e.g. U+009B, a one-character CSI on some terminals) and the bidi controls and
/// line separators of [`needs_escape`] would reach a terminal raw; they become `\u007f`,
/// `\u009b`, `\u202e`... escapes (still the same JSON string). They can only occur inside
/// strings, where the escape is valid.
pub fn json_terminal_safe(text: &mut Vec<u8>) {
    if ascii_below_del(text) {
        return;
    }
    let Ok(s) = std::str::from_utf8(text) else {
        return;
    };
    if !s.chars().any(needs_escape) {
        return;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in s.chars() {
        // serde_json has escaped C0 already; what is left needs \uXXXX (all in the BMP).
        if needs_escape(c) && u32::from(c) >= 0x20 {
            use fmt::Write;
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    *text = out.into_bytes();
}

/// `s` as HTML text, for an element's content or a quoted attribute value: terminal-safe as
/// [`escape`] makes it (each character of [`needs_escape`] as `\u{..}`, so a page shows no
/// control or bidi character either), and `&`, `<`, `>`, `"`, `'` as character references, so
/// no text can open a tag, end an attribute or start an entity.
pub fn html(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => push_escaped(&mut o, c),
        }
    }
    o
}

/// A relative path of our own (`/`-separated) as a URL path: every byte but ASCII letters,
/// digits and `-._~/` percent-encoded (a space, `#`, `?`, `%` or `:` cannot change what the
/// link names).
pub fn url_path(path: &str) -> String {
    use fmt::Write;
    let mut o = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            o.push(char::from(b));
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

/// The terminal-safe form of `t`, or `fallback` (our own text) when there is none.
pub fn shown_or(t: Option<&Untrusted>, fallback: &str) -> String {
    t.map_or_else(|| fallback.to_string(), Untrusted::to_string)
}

/// Text from the input. Shown escaped ([`fmt::Display`]), serialized exactly (JSON); the
/// exact text is reached only through [`Untrusted::raw`] (comparisons, lookups) — there is no
/// `Deref` or `AsRef<str>`.
///
/// Cloning is cheap (a reference count, or nothing for a name from etwdump's tables): a
/// process name is cloned into every context-switch row that names it.
#[derive(Clone, Default)]
pub struct Untrusted(Text);

/// The text of an [`Untrusted`]: shared, or static (a name from etwdump's own tables).
#[derive(Clone)]
enum Text {
    Static(&'static str),
    Shared(std::sync::Arc<str>),
}

impl Default for Text {
    fn default() -> Text {
        Text::Static("")
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Static(s) => s,
            Text::Shared(s) => s,
        }
    }
}

impl Text {
    fn owned(s: String) -> Text {
        Text::Shared(s.into())
    }
}

impl PartialEq for Untrusted {
    fn eq(&self, o: &Untrusted) -> bool {
        *self.0 == *o.0
    }
}
impl Eq for Untrusted {}
impl std::hash::Hash for Untrusted {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (*self.0).hash(h)
    }
}
impl PartialOrd for Untrusted {
    fn partial_cmp(&self, o: &Untrusted) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Untrusted {
    fn cmp(&self, o: &Untrusted) -> std::cmp::Ordering {
        (*self.0).cmp(&*o.0)
    }
}
impl Serialize for Untrusted {
    /// The exact text, as a string (escaping is the serializer's).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}
impl<'de> Deserialize<'de> for Untrusted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Untrusted, D::Error> {
        String::deserialize(d).map(Untrusted::new)
    }
}

impl Untrusted {
    /// Text already decoded (from a parser of the input).
    pub fn new(s: impl Into<String>) -> Untrusted {
        Untrusted(Text::owned(s.into()))
    }

    /// A name from etwdump's own tables that stands where input text may (a decoded
    /// payload's field names sit beside TraceLogging's, which come from the record): kept
    /// without a copy, treated as untrusted text like the others.
    pub(crate) const fn from_static(s: &'static str) -> Untrusted {
        Untrusted(Text::Static(s))
    }

    /// Bytes of the input as UTF-8 (invalid sequences replaced).
    pub fn from_utf8_lossy(b: &[u8]) -> Untrusted {
        Untrusted(Text::owned(String::from_utf8_lossy(b).into_owned()))
    }

    /// Bytes up to the first NUL (or all), as UTF-8 (invalid sequences replaced).
    pub(crate) fn from_utf8_z(b: &[u8]) -> Untrusted {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Untrusted::from_utf8_lossy(&b[..end])
    }

    /// UTF-16LE bytes, invalid units replaced, up to the first NUL unit.
    pub(crate) fn from_utf16le_z(bytes: &[u8]) -> Untrusted {
        let units: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&u| u != 0)
            .collect();
        Untrusted(Text::owned(String::from_utf16_lossy(&units)))
    }

    /// UTF-16 code units as text, exactly: None when they hold a lone surrogate (not text).
    pub(crate) fn from_utf16_exact(units: &[u16]) -> Option<Untrusted> {
        String::from_utf16(units).ok().map(Untrusted::new)
    }

    /// The exact text, for comparisons, lookups and parsing: never for printing (the
    /// printing layers may not call this; `tests/architecture.rs`).
    pub fn raw(&self) -> &str {
        &self.0
    }

    /// The exact text, owned (for a parser that goes on with it; not for printing).
    pub fn into_raw(self) -> String {
        self.0.to_string()
    }

    /// New untrusted text made from this one (e.g. `name (pid)`): the result stays untrusted.
    pub fn map(&self, f: impl FnOnce(&str) -> String) -> Untrusted {
        Untrusted(Text::owned(f(&self.0)))
    }

    /// The text is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Length in bytes of the exact text.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The exact text as one cell of a CSV row that goes through `render::csv::csv_line` /
    /// `csv_field` (which escape every cell as [`escape`] does and defuse formulas); only for
    /// building CSV rows.
    pub(crate) fn csv_cell(&self) -> String {
        self.0.to_string()
    }

    /// At most `n` characters of it.
    pub fn truncated(&self, n: usize) -> Untrusted {
        Untrusted(Text::owned(self.0.chars().take(n).collect()))
    }

    /// The terminal-safe form (the same as `to_string()`).
    pub fn escaped(&self) -> Cow<'_, str> {
        escape(&self.0)
    }
}

impl Untrusted {
    /// Append the text as [`fmt::Display`] shows it (escaped), without `fmt`.
    pub fn push_shown(&self, out: &mut String) {
        out.push_str(&escape(&self.0));
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape(&self.0))
    }
}

impl fmt::Debug for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", escape(&self.0))
    }
}

impl From<String> for Untrusted {
    fn from(s: String) -> Untrusted {
        Untrusted(Text::owned(s))
    }
}

impl From<&str> for Untrusted {
    fn from(s: &str) -> Untrusted {
        Untrusted(Text::owned(s.to_owned()))
    }
}

impl PartialEq<str> for Untrusted {
    fn eq(&self, o: &str) -> bool {
        *self.0 == *o
    }
}

impl PartialEq<&str> for Untrusted {
    fn eq(&self, o: &&str) -> bool {
        *self.0 == **o
    }
}

impl PartialEq<String> for Untrusted {
    fn eq(&self, o: &String) -> bool {
        *self.0 == **o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class of dangerous character, as it arrives and as it leaves.
    const HOSTILE: &str =
        "a\u{1b}[31m\u{7}\r\n\u{0}\u{7f}\u{9b}\u{85}\u{202e}\u{2066}\u{200f}\u{61c}\u{2028}z";

    /// The printable-ASCII fast path changes no result: every byte value, at every position
    /// of a 32-byte chunk and of the tail, in otherwise clean text, gives what the
    /// character-by-character path gives (the oracle is `needs_escape` itself).
    #[test]
    fn fast_path_agrees_with_the_character_walk() {
        for len in (1usize..=40).chain([63, 64, 65, 70]) {
            for pos in 0..len {
                for b in 0u8..=0xff {
                    for fill in [b' ', b'a', b'~'] {
                        let mut v = vec![fill; len];
                        v[pos] = b;
                        let printable = (0x20..=0x7e).contains(&b);
                        assert_eq!(printable_ascii(&v), printable, "{b:#x} at {pos}/{len}");
                    }
                    if b > 0x7f {
                        continue;
                    }
                    let mut v = vec![b'a'; len];
                    v[pos] = b;
                    let s = std::str::from_utf8(&v).unwrap();
                    let hit = needs_escape(char::from(b));
                    assert_eq!(!printable_ascii(&v), hit, "{b:#x} at {pos}/{len}");
                    let mut shown = String::from("<");
                    Untrusted::new(s).push_shown(&mut shown);
                    assert_eq!(shown, format!("<{}", escape(s)), "{b:#x} at {pos}/{len}");
                    assert_eq!(matches!(escape(s), Cow::Owned(_)), hit, "{b:#x}");
                    let lines_hit = hit && b != b'\n';
                    assert_eq!(
                        matches!(escape_lines(s), Cow::Owned(_)),
                        lines_hit,
                        "{b:#x} at {pos}/{len}"
                    );
                }
            }
        }
        // Non-ASCII text leaves the fast path: a C1 control after 40 clean bytes is found.
        let mut j = format!("\"{}\u{9b}\"", "x".repeat(40)).into_bytes();
        json_terminal_safe(&mut j);
        assert_eq!(j, format!("\"{}\\u009b\"", "x".repeat(40)).into_bytes());
        // CR in a multi-line page is escaped (a `lines()` split would have dropped it).
        assert_eq!(escape_lines("a\r\nb\n"), "a\\u{d}\nb\n");
    }

    /// HTML: markup characters as references, controls and bidi as for a terminal; our
    /// paths percent-encoded byte by byte.
    #[test]
    fn html_and_url_path() {
        assert_eq!(
            html("<script>a=\"1\" & 'b'</script>"),
            "&lt;script&gt;a=&quot;1&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
        assert_eq!(
            html(HOSTILE),
            "a\\u{1b}[31m\\u{7}\\u{d}\\u{a}\\u{0}\\u{7f}\\u{9b}\\u{85}\\u{202e}\\u{2066}\\u{200f}\\u{61c}\\u{2028}z"
        );
        assert_eq!(html("é ü 日本"), "é ü 日本");
        assert_eq!(
            url_path("etl/02-Circular Kernel Context Logger.etl"),
            "etl/02-Circular%20Kernel%20Context%20Logger.etl"
        );
        assert_eq!(url_path("a#b?c%d:e\"f"), "a%23b%3Fc%25d%3Ae%22f");
        assert_eq!(url_path("é"), "%C3%A9");
    }

    #[test]
    fn display_escapes_c0_del_c1_bidi() {
        let t = Untrusted::new(HOSTILE);
        let shown = t.to_string();
        assert_eq!(
            shown,
            "a\\u{1b}[31m\\u{7}\\u{d}\\u{a}\\u{0}\\u{7f}\\u{9b}\\u{85}\\u{202e}\\u{2066}\\u{200f}\\u{61c}\\u{2028}z"
        );
        assert!(!shown.chars().any(needs_escape));
        assert_eq!(format!("{t:?}"), format!("\"{shown}\""));
        // Padding applies to the escaped form (tables).
        assert_eq!(format!("{:<6}|", Untrusted::new("a\u{7}")), "a\\u{7}|");
        assert_eq!(format!("{:<4}|", Untrusted::new("ab")), "ab  |");
        // Plain text is untouched and not copied.
        assert!(matches!(escape("System"), Cow::Borrowed("System")));
    }

    #[test]
    fn json_is_exact_and_terminal_safe() {
        let t = Untrusted::new(HOSTILE);
        let mut j = serde_json::to_vec(&t).unwrap();
        json_terminal_safe(&mut j);
        let s = String::from_utf8(j.clone()).unwrap();
        assert!(!s.chars().any(needs_escape), "{s}");
        assert!(s.contains("\\u009b") && s.contains("\\u202e") && s.contains("\\u007f"));
        let back: Untrusted = serde_json::from_slice(&j).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.raw(), HOSTILE);
    }

    #[test]
    fn decoders_stop_at_nul() {
        assert_eq!(Untrusted::from_utf8_z(b"ab\0cd"), "ab");
        assert_eq!(Untrusted::from_utf16le_z(b"n\0t\0\0\0x\0"), "nt");
        assert_eq!(Untrusted::from_utf16le_z(&[0x2e, 0x20]).raw(), "\u{202e}");
        assert_eq!(
            Untrusted::new("svchost.exe").map(|s| format!("{s} (4)")),
            "svchost.exe (4)"
        );
    }

    /// Pretty JSON (line breaks) of ASCII below DEL is left as it is; DEL, C1 and bidi
    /// controls are escaped wherever they stand (in the 32-byte chunks or the remainder of the
    /// fast check), other non-ASCII text is kept.
    #[test]
    fn pretty_json_checked_below_del() {
        let plain = serde_json::json!({"a": "x~".repeat(40), "b": [1, 2]});
        let mut t = serde_json::to_vec_pretty(&plain).unwrap();
        let before = t.clone();
        json_terminal_safe(&mut t);
        assert_eq!(t, before);
        for c in ["\u{7f}", "\u{9b}", "\u{202e}", "é"] {
            let long = "x".repeat(40);
            for v in [
                serde_json::json!({"a": format!("{c}{long}"), "b": 1}),
                serde_json::json!({"a": long, "b": c}),
            ] {
                let mut t = serde_json::to_vec_pretty(&v).unwrap();
                json_terminal_safe(&mut t);
                let s = String::from_utf8(t).unwrap();
                assert!(!s.chars().any(|ch| ch != '\n' && needs_escape(ch)), "{s}");
                assert_eq!(s.contains('é'), c == "é");
                assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
            }
        }
    }

    #[test]
    fn json_text_keeps_its_meaning_without_raw_controls() {
        let v = serde_json::json!({"name": "a\u{9b}31m\u{7f}b\u{1b}é\u{202e}"});
        let mut t = serde_json::to_vec(&v).unwrap();
        json_terminal_safe(&mut t);
        assert!(!t.iter().any(|&b| b == 0x7F || b == 0x1B));
        let back: serde_json::Value = serde_json::from_slice(&t).unwrap();
        assert_eq!(back, v);
    }
}
