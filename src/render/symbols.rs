//! `symbols` as a table.

use crate::report::symbols::{type_text, SymbolsReport};
use crate::report::RowFormat;
use std::fmt::Write as _;

impl SymbolsReport {
    /// The table form.
    pub fn to_table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Symbol source: {}{}",
            self.symbol_source.kind,
            self.symbol_source
                .path
                .as_ref()
                .map(|p| format!(" {p}"))
                .unwrap_or_default()
        );
        if let Some(p) = &self.pdb {
            let _ = writeln!(o, "PDB: {p}");
        }
        for (name, t) in &self.types {
            let _ = writeln!(
                o,
                "\n{} {name} (size {:#x}, from {})",
                if t.is_union { "union" } else { "struct" },
                t.size,
                t.source
            );
            let mut fields: Vec<_> = t.fields.iter().collect();
            fields.sort_by_key(|&(n, f)| (f.offset, n));
            for (n, f) in fields {
                let _ = writeln!(o, "  +{:#06x} {n:<32} {}", f.offset, type_text(&f.ty));
            }
        }
        if !self.missing_types.is_empty() {
            let _ = writeln!(o, "\nNot available: {}", self.missing_types.join(", "));
        }
        if !self.symbols.is_empty() {
            let _ = writeln!(o, "\nSymbols (RVA):");
            for (n, v) in &self.symbols {
                let _ = writeln!(o, "  {v:>10} {n}");
            }
        }
        o
    }
}

impl super::output::Render for SymbolsReport {
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        match format {
            RowFormat::Json => {
                super::output::json(out, &crate::report::Document::new("symbols", self))
            }
            _ => super::output::table(out, &self.to_table()),
        }
    }
}
