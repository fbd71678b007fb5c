//! `read` as a hex dump.

/// Classic 16-bytes-per-line hex dump.
pub(crate) fn hexdump(addr: u64, bytes: &[u8]) -> String {
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

/// The bytes of a `read`, as a hex dump (table) or one JSON object on one line.
pub struct Read<'a> {
    pub address: u64,
    pub report: &'a crate::report::read::ReadReport,
    pub bytes: &'a [u8],
}

impl super::output::Render for Read<'_> {
    fn render(
        &self,
        out: &mut dyn std::io::Write,
        format: crate::report::RowFormat,
    ) -> std::io::Result<()> {
        match format {
            crate::report::RowFormat::Table => write!(out, "{}", hexdump(self.address, self.bytes)),
            _ => writeln!(
                out,
                "{}",
                serde_json::to_string(&crate::report::Document::new("read", self.report))
                    .map_err(std::io::Error::other)?
            ),
        }
    }
}
