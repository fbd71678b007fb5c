//! `info` as a table.

use crate::kernel::context::{KernelBaseSource, SymbolMatch};
use crate::report::info::InfoReport;
use crate::report::RowFormat;
use std::fmt::Write as _;

impl InfoReport {
    /// The human-readable rendering.
    pub fn to_table(&self) -> String {
        let mut t = Table(String::new());
        self.machine_rows(&mut t);
        self.kernel_rows(&mut t);
        self.symbol_rows(&mut t);
        self.etw_root_rows(&mut t);
        self.memory_rows(&mut t);
        for w in &self.warnings {
            t.row("Warning", super::text::printable(&w.message));
        }
        t.0
    }

    /// The dump and the machine: architecture, dump type, Windows version, header version,
    /// processors, bug check and times.
    fn machine_rows(&self, t: &mut Table) {
        t.row("Architecture", self.arch.into());
        t.row(
            "Dump type",
            format!("{} ({})", self.dump_type.name, self.dump_type.value),
        );
        t.row("File size", format!("{} bytes", self.file_size));
        let w = &self.windows;
        let ver = match (w.nt_major_version, w.nt_minor_version) {
            (Some(a), Some(b)) => format!(
                "{a}.{b}.{}{}",
                w.build,
                w.nt_build_number_raw
                    .as_ref()
                    .map(|r| format!(" (KUSER NtBuildNumber {r})"))
                    .unwrap_or_default()
            ),
            _ => format!(
                "build {} (from the header; {})",
                w.build,
                w.kuser_shared_data_unavailable.clone().unwrap_or_default()
            ),
        };
        t.row("Windows version", ver);
        t.row(
            "Header version",
            if self.dump_type.value == 0 {
                "none (a memory image has no header; see DTB and Kernel base for how they were found)".into()
            } else {
                format!(
                    "major {:#x}{}, minor (build) {}",
                    self.header_major_version,
                    match self.header_major_version {
                        0xF => " (free build)",
                        0xC => " (checked build)",
                        _ => "",
                    },
                    self.header_minor_version
                )
            },
        );
        if let Some(l) = &w.build_lab {
            t.row("Build lab", l.to_string());
        }
        t.row(
            "Processors",
            if self.processors == 0 {
                "unknown".into()
            } else {
                self.processors.to_string()
            },
        );
        t.row(
            "Bug check",
            format!(
                "{} ({})",
                self.bugcheck.code,
                self.bugcheck.parameters.join(", ")
            ),
        );
        t.row("System time (UTC)", self.system_time.clone());
        t.row("System up time", self.system_up_time.clone());
    }

    /// Where the kernel was found: DTB, the kernel globals, KDBG, the kernel base, its image
    /// and PDB.
    fn kernel_rows(&self, t: &mut Table) {
        t.row(
            "DTB",
            match self.found_by.get("dtb") {
                Some(how) if how != "dump header" => format!("{} ({how})", self.dtb),
                _ => self.dtb.clone(),
            },
        );
        t.row("PfnDataBase", self.pfn_database.clone());
        t.row("PsLoadedModuleList", self.ps_loaded_module_list.clone());
        t.row("PsActiveProcessHead", self.ps_active_process_head.clone());
        let k = &self.kd_debugger_data_block;
        t.row(
            "KdDebuggerDataBlock",
            format!(
                "{} (decoded KDBG: {}{})",
                k.address,
                if k.decoded { "yes" } else { "no" },
                match (&k.size, &k.note) {
                    (Some(s), _) => format!(", tag KDBG, size {s}"),
                    (None, Some(n)) => format!("; {n}"),
                    _ => String::new(),
                }
            ),
        );
        let b = &self.kernel_base;
        t.row(
            "Kernel base",
            match &b.address {
                Some(a) => format!(
                    "{a} (from {}; KDBG KernBase {}{})",
                    b.source.map_or("?", KernelBaseSource::name),
                    opt(&b.kdbg_kern_base),
                    match b.kdbg_agrees {
                        Some(true) => ", agrees",
                        Some(false) => ", DISAGREES",
                        None => "",
                    }
                ),
                None => "unknown".into(),
            },
        );
        if let Some(i) = &self.kernel_image {
            t.row(
                "Kernel image",
                format!(
                    "TimeDateStamp {}, SizeOfImage {}, {} sections",
                    i.time_date_stamp, i.size_of_image, i.number_of_sections
                ),
            );
        }
        match &self.kernel_pdb {
            Some(p) => {
                t.row("Kernel PDB", p.name.to_string());
                t.row("PDB GUID / age", format!("{} / {}", p.guid, p.age));
                t.row(
                    "Symbol store key",
                    format!("{}/{}/{}", p.name, p.store_key, p.name),
                );
            }
            None => t.row(
                "Kernel PDB",
                format!("unknown: {}", opt(&self.kernel_pdb_unavailable)),
            ),
        }
    }

    /// The symbols: where they came from, how they match the kernel, the built-in table, the
    /// layouts used and their checks.
    fn symbol_rows(&self, t: &mut Table) {
        let sy = &self.symbols;
        t.row(
            "Symbols",
            match sy.source {
                "none" => "none (built-in layouts; give --pdb, --isf or --symbols)".into(),
                k => format!(
                    "{k} {}{}",
                    opt(&sy.path),
                    sy.pdb
                        .as_ref()
                        .map(|p| format!(" ({p})"))
                        .unwrap_or_default()
                ),
            },
        );
        if sy.source != "none" {
            t.row(
                "Symbol match",
                match &sy.matched {
                    SymbolMatch::NoSymbols => "-".into(),
                    SymbolMatch::Rsds => "GUID and age equal the kernel's CodeView record".into(),
                    SymbolMatch::SymbolOffsets { checks } => format!(
                        "by symbol offsets: {} of {} globals at the same RVA ({})",
                        checks.iter().filter(|c| c.agrees).count(),
                        checks.len(),
                        checks
                            .iter()
                            .map(|c| c.symbol)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    SymbolMatch::Unverified { reason } => format!("NOT VERIFIED: {reason}"),
                },
            );
        }
        if let Some(c) = &sy.builtin_corpus {
            t.row(
                "Built-in table",
                format!(
                    "{}{}",
                    c.description,
                    if c.rvas {
                        " (layouts, global RVAs and enums)"
                    } else {
                        "; global RVAs not used"
                    }
                ),
            );
        }
        t.row(
            "Layouts",
            format!(
                "{}{}",
                sy.layouts
                    .iter()
                    .map(|(t, src)| format!("{t} {}", src.unwrap_or("none")))
                    .collect::<Vec<_>>()
                    .join(", "),
                match (sy.builtin_era, &sy.builtin_corpus) {
                    (Some(e), _) => format!("; built-in era {e}"),
                    (None, Some(_)) => String::new(),
                    (None, None) => "; no built-in layouts for this build".into(),
                }
            ),
        );
        for c in &self.layout_checks {
            t.row(
                "Layout check",
                format!(
                    "{} [{}]: {}",
                    c.what,
                    serde_json::to_value(c.how)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    c.evidence
                ),
            );
        }
    }

    /// The ETW roots and the loaded-module list.
    fn etw_root_rows(&self, t: &mut Table) {
        for r in &self.etw_roots {
            t.row(
                "ETW root",
                match r.address {
                    None => format!("{}: not located ({})", r.name, r.note),
                    Some(a) => format!(
                        "{} {a}: {}{} ({})",
                        r.name,
                        if r.present {
                            "in the dump"
                        } else {
                            "NOT in the dump"
                        },
                        r.value.map(|v| format!(", holds {v}")).unwrap_or_default(),
                        r.note
                    ),
                },
            );
        }
        let m = &self.loaded_modules;
        t.row(
            "Loaded modules",
            match &m.problem {
                None => format!(
                    "{} (first: {})",
                    m.count,
                    crate::text::shown_or(m.first.as_ref(), "-")
                ),
                Some(p) => format!("{} read; {p}", m.count),
            },
        );
    }

    /// The dump's memory: what it stores, its image format and ranges, paging, and a triage
    /// dump's contents.
    fn memory_rows(&self, t: &mut Table) {
        let mem = &self.memory;
        if self.triage.is_none() {
            t.row(
                "Memory",
                format!(
                    "{}: {} pages ({} bytes){}{}",
                    mem.kind,
                    mem.physical_pages_stored,
                    mem.physical_bytes_stored,
                    mem.runs
                        .map(|r| format!(" in {r} runs"))
                        .unwrap_or_default(),
                    match (&mem.bitmap_signature, mem.bitmap_bits) {
                        (Some(s), Some(bits)) => format!(", bitmap {s} covering {bits} PFNs"),
                        _ => String::new(),
                    }
                ),
            );
        }
        if let Some(f) = mem.format {
            t.row(
                "Image format",
                match &mem.metadata_file {
                    Some(m) => format!("{f} (layout from {m})"),
                    None => f.into(),
                },
            );
        }
        for r in mem.ranges.iter().flatten() {
            t.row(
                "  physical range",
                format!(
                    "{} + {} at file offset {}",
                    r.physical_address, r.size, r.file_offset
                ),
            );
        }
        if let Some(h) = &mem.hibernation {
            hibernation_rows(h, t);
        }
        if let Some(p) = mem.paging {
            t.row("Paging", p.into());
        }
        if let Some(u) = &mem.translation_unsupported {
            t.row("Address translation", u.clone());
        }
        if let Some(tri) = &self.triage {
            t.row("Triage memory", tri.summary.clone());
            t.row(
                "Triage VA range",
                format!(
                    "{} - {}",
                    opt(&tri.lowest_address),
                    opt(&tri.highest_address)
                ),
            );
            t.row(
                "Triage contents",
                format!(
                    "context {}, exception {}, KPRCB {}, process {}, thread {}, call stack {} bytes, kernel header {} bytes, secondary data {} bytes",
                    yes(tri.context),
                    yes(tri.exception),
                    yes(tri.prcb),
                    yes(tri.process),
                    yes(tri.thread),
                    tri.call_stack_bytes,
                    tri.kernel_header_bytes,
                    tri.secondary_data_bytes
                ),
            );
        }
    }
}

/// Rows of the table being written: a 26-column key, then its value.
struct Table(String);

impl Table {
    /// One row.
    fn row(&mut self, k: &str, v: String) {
        let _ = writeln!(self.0, "{k:<26}{v}");
    }
}

/// An optional value, or "-".
fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".into())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl super::output::Render for InfoReport {
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        match format {
            RowFormat::Json => {
                super::output::json(out, &crate::report::Document::new("info", self))
            }
            _ => super::output::table(out, &self.to_table()),
        }
    }
}

/// A hibernation file's header and restore sets.
fn hibernation_rows(h: &crate::report::info::HibernationInfo, t: &mut Table) {
    t.row(
        "Hibernation file",
        format!(
            "{}, signature {}, {}",
            h.arch,
            h.signature,
            match (&h.length_self, h.windows) {
                (Some(l), Some(w)) => format!("header layout {w} (LengthSelf {l})"),
                (Some(l), None) => format!("unknown header layout (LengthSelf {l})"),
                (None, _) => "header wiped".into(),
            }
        ),
    );
    t.row(
        "  written (UTC)",
        h.written
            .clone()
            .unwrap_or_else(|| "unknown (header wiped)".into()),
    );
    t.row(
        "  variant",
        match (h.variant, h.variant_unknown) {
            ("fast_startup", _) => "Fast Startup (hybrid shutdown): kernel memory only".into(),
            ("full", _) => "full hibernation".into(),
            (_, Some(why)) => format!("unknown: {why}"),
            (v, None) => v.into(),
        },
    );
    for s in &h.restore_sets {
        t.row(
            &format!("  {} restore set", s.name),
            format!(
                "file offset {}: {} pages in {} compression sets{}",
                s.file_offset,
                s.pages_read,
                s.compression_sets,
                match s.pages_declared {
                    Some(d) if d != s.pages_read => format!(" (the header declares {d})"),
                    Some(_) => String::new(),
                    None => " (page count not declared)".into(),
                }
            ),
        );
    }
    t.row(
        "  compression sets",
        format!(
            "{} Plain LZ77, {} LZ77+Huffman, {} stored{}",
            h.sets_lz77,
            h.sets_huffman,
            h.sets_stored,
            if h.duplicate_pages > 0 {
                format!("; {} pages stored more than once", h.duplicate_pages)
            } else {
                String::new()
            }
        ),
    );
}
