//! CSV text that stays inert in a terminal and a spreadsheet whatever memory put in it.

/// One CSV field, safe for a terminal and a spreadsheet whatever memory put in it: control
/// characters are escaped as `\u{..}` (as in the table); a text that a spreadsheet would take
/// for a formula (first character `=`, `+`, `-` or `@`, or a leading tab or CR), unless it is a
/// plain number, gets a `'` in front (the OWASP "CSV injection" advice); then RFC 4180 quoting
/// (fields with `,`, `"` or line breaks in double quotes, `"` doubled).
pub fn csv_field(s: &str) -> String {
    let mut t: String = s
        .chars()
        .map(|c| {
            if c.is_control() {
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

/// One CSV line: every field through [`csv_field`], comma separated, newline terminated.
pub fn csv_line<S: AsRef<str>>(fields: &[S]) -> String {
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
}
