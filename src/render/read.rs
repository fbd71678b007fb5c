//! `read` as a hex dump.

/// Classic 16-bytes-per-line hex dump.
pub fn hexdump(addr: u64, bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!(
            "{:016x}  {:<47}  {}\n",
            addr.wrapping_add(i as u64 * 16),
            hex.join(" "),
            ascii
        ));
    }
    out
}
