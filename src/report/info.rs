//! `etwdump info`: what the dump is and what kernel it came from.

use super::hex;
use crate::addr::VirtAddr;
use crate::dump::{Arch, DumpFile, PhysImage};
use crate::etw::routes::{resolve_logger_array, EtwRoot};
use crate::kernel::context::{KernelBaseSource, KernelContext, SymbolMatch};
use crate::kernel::kdbg::KdbgState;
use crate::kernel::kuser::KUserSharedData;
use crate::mem::AddressSpace;
use crate::symbols::{CorpusUse, PdbIdentity};
use crate::time::{duration_100ns, filetime_to_iso8601};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Debug, Serialize)]
pub struct InfoReport {
    pub file_size: u64,
    pub arch: &'static str,
    pub machine_image_type: String,
    pub dump_type: DumpTypeInfo,
    pub header_major_version: u32,
    /// The NT build number from the header (MinorVersion).
    pub header_minor_version: u32,
    pub windows: WindowsVersion,
    pub processors: u32,
    pub bugcheck: BugCheck,
    /// ISO-8601 UTC; for an impossible time ([`Self::system_time_flag`]) the text says so
    /// and gives the raw value.
    pub system_time: String,
    pub system_time_raw: u64,
    /// `not_a_filetime`, `before_build` or `after_file_written` when the SystemTime cannot be
    /// right (a warning says why); null otherwise.
    pub system_time_flag: Option<&'static str>,
    pub system_up_time: String,
    pub dtb: String,
    pub pfn_database: String,
    pub ps_loaded_module_list: String,
    pub ps_active_process_head: String,
    pub kd_debugger_data_block: KdbgInfo,
    pub kernel_base: KernelBase,
    pub kernel_image: Option<ImageInfo>,
    pub kernel_pdb: Option<PdbIdentity>,
    /// Why `kernel_pdb` is null.
    pub kernel_pdb_unavailable: Option<String>,
    pub loaded_modules: ModulesInfo,
    pub memory: MemoryInfo,
    pub triage: Option<TriageInfo>,
    pub symbols: SymbolsInfo,
    pub etw_roots: Vec<EtwRoot>,
    /// Which layouts and offsets of another build memory confirmed, contradicted or left
    /// unconfirmed (`_WMI_LOGGER_CONTEXT` by its pool blocks, `_KPRCB.EtwSupport` by what its
    /// blocks hold), and what each means; the kernel's own layouts are `symbols`.
    pub layout_checks: Vec<LayoutConfirmation>,
    /// How each machine fact was found: "dump header" for crash dumps; for memory images the
    /// discovery step (DTB: page-table self-reference scan; processors: KeNumberProcessors;
    /// times: KUSER_SHARED_DATA; list heads and KDBG: the symbols).
    pub found_by: BTreeMap<&'static str, String>,
    pub warnings: Vec<crate::warning::Warning>,
}

/// One layout or offset as memory confirmed it.
#[derive(Debug, Serialize)]
pub struct LayoutConfirmation {
    /// e.g. "_WMI_LOGGER_CONTEXT", "_KPRCB.EtwSupport".
    pub what: &'static str,
    /// `symbols`, `confirmed`, `searched`, `unconfirmed`, `ambiguous`, `contradicted`.
    pub how: crate::kernel::context::LocatedHow,
    pub evidence: String,
}

#[derive(Debug, Serialize)]
pub struct SymbolsInfo {
    /// "pdb", "isf" or "none".
    pub source: &'static str,
    pub path: Option<String>,
    /// The identity the symbol file declares.
    pub pdb: Option<PdbIdentity>,
    /// How the symbols were matched to this dump's kernel.
    #[serde(rename = "match")]
    pub matched: SymbolMatch,
    /// The hand-written built-in layout era for this build, if one covers it.
    pub builtin_era: Option<&'static str>,
    pub builtin_notes: Vec<String>,
    /// The built-in corpus entry in use (`match`: "exact" or "nearest", `version`, `guid`,
    /// `age`, `rvas`, `description`), null when none is.
    pub builtin_corpus: Option<CorpusUse>,
    /// Where each structure's layout comes from ("pdb", "isf", "builtin", "builtin-exact",
    /// "builtin-nearest"), null if none.
    pub layouts: BTreeMap<String, Option<&'static str>>,
}

#[derive(Debug, Serialize)]
pub struct DumpTypeInfo {
    pub value: u32,
    pub name: &'static str,
}

#[derive(Debug, Serialize)]
pub struct WindowsVersion {
    /// From KUSER_SHARED_DATA; null when that page is not in the dump.
    pub nt_major_version: Option<u32>,
    pub nt_minor_version: Option<u32>,
    pub nt_build_number: Option<u32>,
    pub nt_build_number_raw: Option<String>,
    /// Why the KUSER_SHARED_DATA fields are null.
    pub kuser_shared_data_unavailable: Option<String>,
    /// KDBG.NtBuildLab, e.g. "19041.1.amd64fre.vb_release.191206-1406".
    pub build_lab: Option<crate::text::Untrusted>,
    /// The build the tool goes by: KUSER NtBuildNumber when present, else the header's.
    pub build: u32,
}

#[derive(Debug, Serialize)]
pub struct BugCheck {
    pub code: String,
    pub parameters: [String; 4],
}

#[derive(Debug, Serialize)]
pub struct KdbgInfo {
    pub address: String,
    /// A readable block with the `KDBG` tag was found.
    pub decoded: bool,
    pub tag: Option<String>,
    pub size: Option<String>,
    pub kern_base: Option<String>,
    pub ps_loaded_module_list: Option<String>,
    pub etwp_debugger_data: Option<String>,
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct KernelBase {
    pub address: Option<String>,
    pub source: Option<KernelBaseSource>,
    pub kdbg_kern_base: Option<String>,
    /// Whether the KDBG's KernBase agrees; null when there is nothing to compare.
    pub kdbg_agrees: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct ImageInfo {
    pub time_date_stamp: String,
    pub size_of_image: String,
    pub number_of_sections: u16,
    pub machine: String,
}

#[derive(Debug, Serialize)]
pub struct ModulesInfo {
    pub count: usize,
    pub first: Option<crate::text::Untrusted>,
    /// Why the list could not be walked completely.
    pub problem: Option<String>,
}

/// The `dump_type` names of memory without a crash-dump header: a memory image, a
/// hibernation file.
pub const NO_HEADER_DUMP_TYPES: [&str; 2] = ["none (memory image)", "none (hibernation file)"];

#[derive(Debug, Serialize)]
pub struct MemoryInfo {
    /// "physical (runs)", "physical (bitmap)" or "virtual blocks (triage)".
    pub kind: &'static str,
    pub physical_pages_stored: u64,
    pub physical_bytes_stored: u64,
    pub runs: Option<usize>,
    pub bitmap_signature: Option<String>,
    pub bitmap_bits: Option<u64>,
    pub paging: Option<&'static str>,
    /// Why virtual reads cannot work, if they cannot.
    pub translation_unsupported: Option<String>,
    /// Memory images and RDMP dumps: the container (`raw`, `elf_core`, `vmware_vmem`,
    /// `vmware_snapshot`, `rdmp`).
    pub format: Option<&'static str>,
    /// Memory images and RDMP dumps: every physical range and where it is in the file.
    pub ranges: Option<Vec<RangeInfo>>,
    /// A .vmem's layout file (.vmss/.vmsn).
    pub metadata_file: Option<crate::text::Untrusted>,
    /// A hibernation file's header and restore sets.
    pub hibernation: Option<HibernationInfo>,
}

/// What a hibernation file's header and sets say ([`crate::dump::hiberfil`]).
#[derive(Debug, Serialize)]
pub struct HibernationInfo {
    /// "HIBR", "WAKE", "RSTR" (as in the file, escaped), or "wiped".
    pub signature: String,
    /// `LengthSelf`, hex (None: wiped header).
    pub length_self: Option<String>,
    /// The Windows releases whose layout `LengthSelf` names (None: unknown or wiped).
    pub windows: Option<&'static str>,
    /// "x64" or "x86" (4-byte restore pages and page descriptors).
    pub arch: &'static str,
    /// When the image was written (`SystemTime`), ISO 8601 UTC or why not; None: wiped.
    pub written: Option<String>,
    pub written_raw: Option<u64>,
    /// "fast_startup" (kernel only), "full", or "unknown".
    pub variant: &'static str,
    /// Why the variant is unknown.
    pub variant_unknown: Option<&'static str>,
    pub highest_physical_page: Option<String>,
    pub restore_sets: Vec<RestoreSetInfo>,
    pub sets_stored: u64,
    pub sets_lz77: u64,
    pub sets_huffman: u64,
    pub duplicate_pages: u64,
}

/// One restore set (or, in a file whose header is wiped, one chain of compression sets found).
#[derive(Debug, Serialize)]
pub struct RestoreSetInfo {
    /// "boot", "kernel" or "carved".
    pub name: &'static str,
    pub file_offset: String,
    pub end_offset: String,
    /// Pages the header declares (None: not declared).
    pub pages_declared: Option<u64>,
    pub pages_read: u64,
    pub compression_sets: u64,
}

impl HibernationInfo {
    fn of(h: &crate::dump::hiberfil::HiberInfo) -> HibernationInfo {
        let (variant, variant_unknown) = match h.fast_startup {
            Some(true) => ("fast_startup", None),
            Some(false) => ("full", None),
            None if h.length_self.is_none() => ("unknown", Some("the header is wiped")),
            None => (
                "unknown",
                Some("the offset of Hiberboot is not known for this header layout"),
            ),
        };
        HibernationInfo {
            signature: h.signature.clone(),
            length_self: h.length_self.map(|l| hex(u64::from(l))),
            windows: h.windows,
            arch: if h.x86 { "x86" } else { "x64" },
            written: h.system_time.map(crate::time::filetime_text),
            written_raw: h.system_time,
            variant,
            variant_unknown,
            highest_physical_page: h.highest_physical_page.map(hex),
            restore_sets: h
                .restore_sets
                .iter()
                .map(|s| RestoreSetInfo {
                    name: s.name,
                    file_offset: hex(s.file_offset),
                    end_offset: hex(s.end_offset),
                    pages_declared: s.pages_declared,
                    pages_read: s.pages_read,
                    compression_sets: s.compression_sets,
                })
                .collect(),
            sets_stored: h.sets_stored,
            sets_lz77: h.sets_lz77,
            sets_huffman: h.sets_huffman,
            duplicate_pages: h.duplicate_pages,
        }
    }
}

/// One physical range of an image.
#[derive(Debug, Serialize)]
pub struct RangeInfo {
    pub physical_address: String,
    pub size: String,
    pub file_offset: String,
}

#[derive(Debug, Serialize)]
pub struct TriageInfo {
    pub data_blocks: u32,
    pub data_block_bytes: u64,
    pub lowest_address: Option<String>,
    pub highest_address: Option<String>,
    pub kdbg_copy_bytes: u32,
    pub drivers: usize,
    pub context: bool,
    pub exception: bool,
    pub prcb: bool,
    pub process: bool,
    pub thread: bool,
    pub call_stack_bytes: u32,
    pub secondary_data_bytes: u64,
    pub kernel_header_bytes: u64,
    pub kuser_shared_data: bool,
    pub summary: String,
}

/// Gather the report (built-in layouts only; no symbol file).
pub fn info(dump: &DumpFile) -> InfoReport {
    info_with(&KernelContext::without_symbols(dump))
}

/// Gather the report for a kernel context (with whatever symbols it has).
pub fn info_with(ctx: &KernelContext<'_>) -> InfoReport {
    let dump = ctx.dump;
    let h = dump.header();
    let space = &ctx.space;
    let warnings = ctx.warnings.clone();
    let kdbg = ctx.kdbg();
    let kdbg_info = kdbg_info(space, &ctx.kdbg);

    let build_lab = kdbg.and_then(|k| k.read_build_lab(space));
    let windows = windows_version(ctx, build_lab);

    let loaded_modules = modules_info(ctx);
    let kernel_base = kernel_base(ctx);

    let (kernel_image, kernel_pdb, kernel_pdb_unavailable) = kernel_image(ctx);

    let memory = memory_info(dump, ctx.machine.arch, space);
    let triage = triage_info(dump, ctx.base);
    let image = dump.headerless();
    let module_head = if image {
        ctx.global("PsLoadedModuleList")
    } else {
        Some(h.ps_loaded_module_list)
    };
    let found_by = found_by(ctx, image);

    InfoReport {
        file_size: dump.len(),
        arch: ctx.machine.arch.name(),
        machine_image_type: hex(u64::from(if image && ctx.machine.is_known() {
            // An image has no header: the machine type of the architecture found.
            match ctx.machine.arch {
                Arch::X64 => crate::dump::MACHINE_AMD64,
                Arch::X86 { .. } => crate::dump::MACHINE_I386,
                Arch::Arm64 => crate::dump::MACHINE_ARM64,
            }
        } else {
            h.machine_image_type
        })),
        dump_type: DumpTypeInfo {
            value: h.dump_type.0,
            name: if dump
                .container::<crate::dump::hiberfil::Hiberfil>()
                .is_some()
            {
                NO_HEADER_DUMP_TYPES[1]
            } else if image {
                NO_HEADER_DUMP_TYPES[0]
            } else {
                h.dump_type.name().unwrap_or("unknown")
            },
        },
        header_major_version: h.major_version,
        header_minor_version: h.minor_version,
        windows,
        processors: ctx.processors_known().unwrap_or(0),
        bugcheck: BugCheck {
            code: hex(u64::from(h.bugcheck_code)),
            parameters: h.bugcheck_params.map(hex),
        },
        system_time: {
            let ft = ctx.system_time().unwrap_or(0);
            match ctx.system_time_flag() {
                Some(("not_a_filetime", _)) => crate::time::filetime_text(ft),
                Some((flag, _)) => format!("{} ({flag}: raw {ft:#x})", filetime_to_iso8601(ft)),
                None => filetime_to_iso8601(ft),
            }
        },
        system_time_raw: ctx.system_time().unwrap_or(0),
        system_time_flag: ctx.system_time_flag().map(|f| f.0),
        system_up_time: duration_100ns(ctx.up_time().unwrap_or(0)),
        dtb: hex(ctx.machine.dtb),
        pfn_database: h.pfn_database.to_string(),
        ps_loaded_module_list: module_head.unwrap_or(VirtAddr::new(0)).to_string(),
        ps_active_process_head: ctx.process_head().unwrap_or(VirtAddr::new(0)).to_string(),
        kd_debugger_data_block: kdbg_info,
        kernel_base,
        kernel_image,
        kernel_pdb,
        kernel_pdb_unavailable,
        loaded_modules,
        memory,
        triage,
        symbols: symbols_info(ctx),
        etw_roots: resolve_logger_array(ctx).roots,
        layout_checks: layout_checks(ctx),
        found_by,
        warnings,
    }
}

/// The Windows version: from KUSER_SHARED_DATA (NtBuildNumber from Windows 10), with the
/// build lab KDBG gives and the build the context uses.
fn windows_version(
    ctx: &KernelContext<'_>,
    build_lab: Option<crate::text::Untrusted>,
) -> WindowsVersion {
    match &ctx.kuser {
        Ok(k) => {
            let has_build = k.nt_major_version >= 10 && k.build_number() != 0;
            WindowsVersion {
                nt_major_version: Some(k.nt_major_version),
                nt_minor_version: Some(k.nt_minor_version),
                nt_build_number: has_build.then(|| k.build_number()),
                nt_build_number_raw: has_build.then(|| hex(u64::from(k.nt_build_number_raw))),
                kuser_shared_data_unavailable: (!has_build).then(|| {
                    "NtBuildNumber is not kept in KUSER_SHARED_DATA before Windows 10".into()
                }),
                build_lab,
                build: ctx.build,
            }
        }
        Err(e) => WindowsVersion {
            nt_major_version: None,
            nt_minor_version: None,
            nt_build_number: None,
            nt_build_number_raw: None,
            kuser_shared_data_unavailable: Some(format!(
                "KUSER_SHARED_DATA at {} is not readable: {e}",
                KUserSharedData::address(ctx.machine.arch)
            )),
            build_lab,
            build: ctx.build,
        },
    }
}

/// The loaded-module list: how many modules, the first one's name, and what cut it short.
fn modules_info(ctx: &KernelContext<'_>) -> ModulesInfo {
    let h = ctx.dump.header();
    match &ctx.modules {
        Ok(l) => ModulesInfo {
            count: l.modules.len(),
            first: l.modules.first().and_then(|m| m.full_name.clone()),
            problem: l.incomplete.clone(),
        },
        Err(e) => ModulesInfo {
            count: 0,
            first: None,
            problem: Some(format!(
                "the list head PsLoadedModuleList {} is not readable: {e}",
                h.ps_loaded_module_list
            )),
        },
    }
}

/// The kernel base, where it was found, and whether KDBG's KernBase agrees.
fn kernel_base(ctx: &KernelContext<'_>) -> KernelBase {
    let kdbg_agrees = match (ctx.base, ctx.kdbg_base, ctx.base_source) {
        (Some(b), Some(k), Some(s)) if s != KernelBaseSource::Kdbg => Some(b == k),
        _ => None,
    };
    KernelBase {
        address: ctx.base.map(|b| b.to_string()),
        source: ctx.base_source,
        kdbg_kern_base: ctx.kdbg_base.map(|b| b.to_string()),
        kdbg_agrees,
    }
}

/// The kernel image's headers and its PDB identity, or why the PDB is not known.
fn kernel_image(
    ctx: &KernelContext<'_>,
) -> (Option<ImageInfo>, Option<PdbIdentity>, Option<String>) {
    match &ctx.image {
        Some(img) => {
            let image = img.headers.as_ref().ok().map(|p| ImageInfo {
                time_date_stamp: hex(u64::from(p.time_date_stamp)),
                size_of_image: hex(u64::from(p.size_of_image)),
                number_of_sections: p.number_of_sections,
                machine: hex(u64::from(p.machine)),
            });
            match &img.pdb {
                Ok(p) => (image, Some(p.clone()), None),
                Err(e) => (image, None, Some(e.to_string())),
            }
        }
        None => (None, None, Some("the kernel base is unknown".into())),
    }
}

/// How each of the machine's facts was found (`image`: a memory image, which has no header).
fn found_by(ctx: &KernelContext<'_>, image: bool) -> BTreeMap<&'static str, String> {
    let mut found_by = BTreeMap::new();
    let header_or = |image_how: &str| {
        if image {
            image_how.to_string()
        } else {
            "dump header".to_string()
        }
    };
    found_by.insert(
        "dtb",
        match (ctx.machine.found_by(), ctx.machine.problem()) {
            (Some(how), _) => how.to_string(),
            (None, Some(why)) => format!("not found: {why}"),
            (None, None) => header_or("not found"),
        },
    );
    found_by.insert(
        "processors",
        match ctx.processors_known() {
            Some(_) => header_or("KeNumberProcessors (symbols)"),
            None => "unknown (no KeNumberProcessors)".into(),
        },
    );
    found_by.insert(
        "system_time",
        header_or("KUSER_SHARED_DATA.SystemTime; up time: InterruptTime"),
    );
    found_by.insert(
        "ps_loaded_module_list",
        header_or("PsLoadedModuleList (symbols)"),
    );
    found_by.insert(
        "ps_active_process_head",
        header_or("PsActiveProcessHead (symbols)"),
    );
    found_by.insert(
        "kd_debugger_data_block",
        header_or("KdDebuggerDataBlock (symbols)"),
    );
    found_by
}

/// The layout checks of a memory dump (none for a triage dump, which holds no logger context
/// or KPRCB.EtwSupport block).
fn layout_checks(ctx: &KernelContext<'_>) -> Vec<LayoutConfirmation> {
    if ctx.dump.triage().is_some() {
        return Vec::new();
    }
    let mut v = Vec::new();
    if let Some(c) = crate::etw::loggers::list_sessions(ctx).layout_check {
        v.push(LayoutConfirmation {
            what: c.type_name,
            how: c.how,
            evidence: c.evidence,
        });
    }
    let silo = crate::etw::silo::check(ctx);
    if let Some(how) = silo.how {
        v.push(LayoutConfirmation {
            what: "_ETW_SILODRIVERSTATE",
            how,
            evidence: silo.evidence.clone(),
        });
    }
    let es = crate::etw::etw_support::locate(ctx);
    v.push(LayoutConfirmation {
        what: "_KPRCB.EtwSupport",
        how: es.how,
        evidence: es.evidence,
    });
    v
}

fn symbols_info(ctx: &KernelContext<'_>) -> SymbolsInfo {
    let s = &ctx.symbols;
    SymbolsInfo {
        source: s.source.kind(),
        path: s.source.path().map(|p| p.display().to_string()),
        pdb: s.identity.clone(),
        matched: ctx.symbol_match.clone(),
        builtin_era: s.builtin_era,
        builtin_notes: s.builtin_notes.clone(),
        builtin_corpus: s.builtin_corpus.clone(),
        layouts: LAYOUT_REPORT
            .iter()
            .map(|t| (t.to_string(), s.layout(t).map(|l| l.source.name())))
            .collect(),
    }
}

/// The structures whose layout source `info` reports.
const LAYOUT_REPORT: &[&str] = &[
    "_WMI_LOGGER_CONTEXT",
    "_WMI_BUFFER_HEADER",
    "_ETW_SILODRIVERSTATE",
    "_KPRCB",
    "_KDDEBUGGER_DATA64",
];

fn kdbg_info(space: &AddressSpace<'_>, state: &KdbgState) -> KdbgInfo {
    let mut i = KdbgInfo {
        address: String::new(),
        decoded: false,
        tag: None,
        size: None,
        kern_base: None,
        ps_loaded_module_list: None,
        etwp_debugger_data: None,
        note: None,
    };
    match state {
        KdbgState::Decoded(k) => {
            i.address = k.va.to_string();
            i.decoded = true;
            i.tag = Some("KDBG".into());
            i.size = Some(hex(u64::from(k.size)));
            let norm = |v: Option<VirtAddr>| {
                v.map(|a| {
                    space
                        .normalize(a)
                        .map(|n| n.to_string())
                        .unwrap_or_else(|_| a.to_string())
                })
            };
            i.kern_base = norm(k.kern_base());
            i.ps_loaded_module_list = norm(k.ps_loaded_module_list());
            i.etwp_debugger_data = norm(k.etwp_debugger_data());
        }
        KdbgState::NotDecoded { va, tag } => {
            i.address = va.to_string();
            i.tag = Some(tag.clone());
            i.note = Some(format!(
                "no \"KDBG\" tag at +0x10 (found \"{tag}\"): the block is encoded or not a debugger data block"
            ));
        }
        KdbgState::NoAddress => {
            i.address = "0x0".into();
            i.note = Some("the header gives no KdDebuggerDataBlock address".into());
        }
        KdbgState::Unreadable { va, error } => {
            i.address = va.to_string();
            i.note = Some(format!("not in the dump: {error}"));
        }
    }
    i
}

fn memory_info(dump: &DumpFile, arch: Arch, space: &AddressSpace<'_>) -> MemoryInfo {
    let paging = match (dump.has_physical_memory(), arch) {
        (false, _) => None,
        (true, Arch::X64) => Some("x64 4-level"),
        (true, Arch::X86 { pae: true }) => Some("x86 PAE"),
        (true, Arch::X86 { pae: false }) => Some("x86 2-level (non-PAE)"),
        (true, Arch::Arm64) => None,
    };
    let translation_unsupported = match arch {
        Arch::Arm64 if dump.has_physical_memory() => {
            Some("ARM64 address translation is not supported yet: virtual memory cannot be read".into())
        }
        Arch::Arm64 => Some(
            "ARM64 address translation is not supported yet (this triage dump's blocks are read by virtual address)"
                .into(),
        ),
        _ if !space.translation_supported() => Some("not supported".into()),
        _ => None,
    };
    let pages = dump.stored_pages();
    let storage = dump.storage();
    let (kind, runs, sig, bits) = (
        storage.kind,
        storage.runs,
        storage.bitmap_signature,
        storage.bitmap_bits,
    );
    let image = dump.container::<PhysImage>();
    MemoryInfo {
        kind,
        physical_pages_stored: pages,
        physical_bytes_stored: pages * 0x1000,
        runs,
        bitmap_signature: sig,
        bitmap_bits: bits,
        paging,
        translation_unsupported,
        format: image.map(|i| i.format.name()),
        ranges: image.map(|i| {
            i.ranges()
                .iter()
                .map(|r| RangeInfo {
                    physical_address: hex(r.start),
                    size: hex(r.size),
                    file_offset: hex(r.file_offset),
                })
                .collect()
        }),
        metadata_file: image.and_then(|i| i.metadata.clone()),
        hibernation: dump
            .container::<crate::dump::hiberfil::Hiberfil>()
            .map(|h| HibernationInfo::of(h.info())),
    }
}

fn triage_info(dump: &DumpFile, kernel_base: Option<VirtAddr>) -> Option<TriageInfo> {
    let t = dump.triage()?;
    let segs = t.segments();
    let kernel_header_bytes = kernel_base
        .and_then(|b| t.segment(b.get()).map(|s| s.len - (b.get() - s.va)))
        .unwrap_or(0);
    let kuser = t
        .segment(KUserSharedData::address(dump.header().arch).get())
        .is_some();
    let mut summary = format!(
        "{} memory blocks ({} bytes) addressed by virtual address; no page tables, so only these bytes are readable",
        t.data_blocks_count, t.data_blocks_bytes
    );
    if t.debugger_data_size > 0 {
        let _ = write!(summary, "; a {:#x}-byte KDBG copy", t.debugger_data_size);
    }
    let _ = write!(summary, "; {} drivers listed", t.drivers.len());
    if !kuser {
        summary.push_str("; KUSER_SHARED_DATA is not included");
    }
    Some(TriageInfo {
        data_blocks: t.data_blocks_count,
        data_block_bytes: t.data_blocks_bytes,
        lowest_address: segs.first().map(|s| hex(s.va)),
        highest_address: segs.last().map(|s| hex(s.va + s.len - 1)),
        kdbg_copy_bytes: t.debugger_data_size,
        drivers: t.drivers.len(),
        context: t.context_offset != 0,
        exception: t.exception_offset != 0,
        prcb: t.prcb_offset != 0,
        process: t.process_offset != 0,
        thread: t.thread_offset != 0,
        call_stack_bytes: t.size_of_call_stack,
        secondary_data_bytes: t.secondary_data_bytes,
        kernel_header_bytes,
        kuser_shared_data: kuser,
        summary,
    })
}
