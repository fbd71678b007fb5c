//! CSV text that stays inert in a terminal and a spreadsheet whatever memory put in it.

use crate::text::{needs_escape, push_escaped};

/// One CSV field, safe for a terminal and a spreadsheet whatever memory put in it: control
/// characters (and bidi controls: [`needs_escape`]) are escaped as `\u{..}` (as in the table); a text that a spreadsheet would take
/// for a formula (first character `=`, `+`, `-` or `@`, or a leading tab or CR), unless it is a
/// plain number, gets a `'` in front (the OWASP "CSV injection" advice); then RFC 4180 quoting
/// (fields with `,`, `"` or line breaks in double quotes, `"` doubled).
pub(crate) fn csv_field(s: &str) -> String {
    let mut t = String::with_capacity(s.len() + 2);
    push_csv_field(&mut t, s);
    t
}

/// [`csv_field`] appended to `t` (the listings' CSV rows: no allocation per field).
pub(crate) fn push_csv_field(t: &mut String, s: &str) {
    let formula = matches!(
        s.as_bytes().first(),
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r')
    ) && s.parse::<f64>().is_err();
    // Control characters are escaped below, so only `,` and `"` call for quotes.
    let quote = s.contains([',', '"']);
    let plain = !formula && !quote && !s.chars().any(needs_escape);
    if plain {
        t.push_str(s);
        return;
    }
    if quote {
        t.push('"');
    }
    if formula {
        t.push('\'');
    }
    for c in s.chars() {
        match c {
            '"' => t.push_str("\"\""),
            c => push_escaped(t, c),
        }
    }
    if quote {
        t.push('"');
    }
}

/// One CSV line: every field through [`csv_field`], comma separated, newline terminated.
pub(crate) fn csv_line<S: AsRef<str>>(fields: &[S]) -> String {
    let mut o = fields
        .iter()
        .map(|f| csv_field(f.as_ref()))
        .collect::<Vec<_>>()
        .join(",");
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_inert() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a\x1b[31mb"), "a\\u{1b}[31mb");
        assert_eq!(
            csv_field("line\nbreak\r\x07"),
            "line\\u{a}break\\u{d}\\u{7}"
        );
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("+cmd"), "'+cmd");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("-2+3"), "'-2+3");
        assert_eq!(csv_field("\tx"), "'\\u{9}x");
        assert_eq!(csv_field("-12"), "-12");
        assert_eq!(csv_field("-1.5e3"), "-1.5e3");
        assert_eq!(csv_line(&["1", "a,b", "=x"]), "1,\"a,b\",'=x\n");
    }

    /// The single-pass field equals the straightforward definition (escape the controls,
    /// prefix a formula, then quote) on 20,000 strings drawn from the characters that matter.
    #[test]
    fn csv_field_equals_its_definition() {
        fn definition(s: &str) -> String {
            let mut t: String = s
                .chars()
                .map(|c| {
                    if needs_escape(c) {
                        c.escape_unicode().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            let formula = matches!(s.chars().next(), Some('=' | '+' | '-' | '@' | '\t' | '\r'));
            if formula && s.parse::<f64>().is_err() {
                t.insert(0, '\'');
            }
            if t.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", t.replace('"', "\"\""))
            } else {
                t
            }
        }
        let alphabet = [
            'a', '1', '.', 'e', '=', '+', '-', '@', '\t', '\r', '\n', ',', '"', '\'', '\u{1b}',
            '\u{7f}', '\u{9b}', 'é', '€', ' ', '\u{202e}',
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 7) as usize;
            let s: String = (0..len)
                .map(|i| alphabet[((x >> (8 + 5 * i)) % alphabet.len() as u64) as usize])
                .collect();
            assert_eq!(csv_field(&s), definition(&s), "{s:?}");
        }
    }
}
