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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls() {
        assert_eq!(printable("a\x1b[31mb"), "a\\u{1b}[31mb");
    }
}
