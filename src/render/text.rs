//! Text from memory made safe for a terminal.

/// Neutralise text from memory before it reaches a terminal: control characters are escaped.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Make JSON text terminal-safe: serde_json escapes only U+0000-U+001F, so DEL (U+007F) and
/// the C1 controls (U+0080-U+009F, e.g. U+009B, a one-character CSI on some terminals) from
/// memory would reach a terminal raw; they become `\u007f` / `\u0080`... escapes (still the
/// same JSON string). They can only occur inside strings, where the escape is valid.
pub fn json_terminal_safe(text: &mut Vec<u8>) {
    let needs = text
        .windows(2)
        .any(|w| w[0] == 0x7F || (w[0] == 0xC2 && (0x80..=0x9F).contains(&w[1])))
        || text.last() == Some(&0x7F);
    if !needs {
        return;
    }
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b == 0x7F {
            out.extend_from_slice(b"\\u007f");
            i += 1;
        } else if b == 0xC2 && text.get(i + 1).is_some_and(|c| (0x80..=0x9F).contains(c)) {
            out.extend_from_slice(format!("\\u{:04x}", text[i + 1]).as_bytes());
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    *text = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_keeps_its_meaning_without_raw_controls() {
        let v = serde_json::json!({"name": "a\u{9b}31m\u{7f}b\u{1b}é"});
        let mut t = serde_json::to_vec(&v).unwrap();
        json_terminal_safe(&mut t);
        assert!(!t.iter().any(|&b| b == 0x7F || b == 0x1B));
        assert!(!String::from_utf8(t.clone())
            .unwrap()
            .chars()
            .any(|c| c.is_control()));
        let back: serde_json::Value = serde_json::from_slice(&t).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn printable_escapes_controls() {
        assert_eq!(printable("a\x1b[31mb"), "a\\u{1b}[31mb");
    }
}
