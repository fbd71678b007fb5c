//! `buffers` as a table and as CSV.

use crate::report::buffers::BufferReport;
use std::fmt::Write as _;

impl BufferReport {
    pub fn to_table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{:>3}  {:<18} {:<18} {:>4} {:>8} {:>9} {:>8} {:>7}  Lists",
            "ID", "Address", "State", "CPU", "Seq", "Valid", "Trimmed", "Records"
        );
        for r in &self.rows {
            let _ = writeln!(
                o,
                "{:>3}  {:<18} {:<18} {:>4} {:>8} {:>9} {:>8} {:>7}  {}",
                r.session_id,
                r.address,
                format!("{} ({})", r.state_name, r.state),
                r.processor.map(|p| p.to_string()).unwrap_or_default(),
                r.sequence_number,
                format!("{:#x}", r.valid_bytes),
                r.trimmed_bytes,
                if r.compressed {
                    "compr.".to_string()
                } else {
                    r.record_count.to_string()
                },
                r.lists
                    .iter()
                    .map(|l| l.name())
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        for r in &self.rows {
            for w in &r.warnings {
                let _ = writeln!(o, "warning: buffer {}: {w}", r.address);
            }
        }
        for w in self.warnings.iter().chain(&self.sessions.warnings) {
            let _ = writeln!(o, "warning: {}", super::text::printable(&w.message));
        }
        o
    }

    pub fn to_csv(&self) -> String {
        let mut o = String::from("session_id,session_name,address,lists,state,state_name,buffer_type,buffer_flag,processor,sequence_number,buffer_size,valid_bytes,trimmed_bytes,record_count,compressed\n");
        for r in &self.rows {
            let lists: Vec<&str> = r.lists.iter().map(|l| l.name()).collect();
            let fields = [
                r.session_id.to_string(),
                r.session_name.clone().unwrap_or_default(),
                r.address.clone(),
                lists.join("|"),
                r.state.to_string(),
                r.state_name.to_string(),
                r.buffer_type.to_string(),
                r.buffer_flag.to_string(),
                r.processor.map(|p| p.to_string()).unwrap_or_default(),
                r.sequence_number.to_string(),
                r.buffer_size.to_string(),
                r.valid_bytes.to_string(),
                r.trimmed_bytes.to_string(),
                r.record_count.to_string(),
                r.compressed.to_string(),
            ];
            o.push_str(&crate::render::csv::csv_line(&fields));
        }
        o
    }
}
