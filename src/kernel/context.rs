//! The kernel as found in a dump: address space, debugger data block, kernel base and image,
//! build number, and the symbols (PDB, ISF, symbol store or built-in) checked against it.

use super::kdbg::{KdDebuggerData, KdbgState};
use super::kuser::KUserSharedData;
use super::modules::{self, ModuleList};
use super::pe::KernelImage;
use crate::addr::VirtAddr;
use crate::dump::DumpFile;
use crate::mem::{AddressSpace, Machine, MemError, Memory};
use crate::symbols::{store, PdbIdentity, SymbolError, Symbols, TableFamily, WANTED_TYPES};
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::path::PathBuf;

/// Which symbols to use.
#[derive(Clone, Debug, Default)]
pub struct SymbolOptions {
    pub pdb: Option<PathBuf>,
    pub isf: Option<PathBuf>,
    /// Local symbol stores (`--symbols DIR`).
    pub stores: Vec<PathBuf>,
    /// The value of `_NT_SYMBOL_PATH`, if it should be consulted.
    pub nt_symbol_path: Option<String>,
    /// Use symbols whose identity does not match the dump's kernel.
    pub force: bool,
    /// Symbol servers to fetch the kernel's PDB from when no local store has it (`--symbol-server
    /// URL`): (URL, cache directory). Empty: no network.
    pub servers: Vec<(String, PathBuf)>,
    /// Also fetch through the `srv*CACHE*URL` entries of `_NT_SYMBOL_PATH` (`--fetch-symbols`);
    /// without it their caches are only searched. `default_cache` for `srv*URL` entries.
    pub fetch_nt_symbol_path: bool,
    /// The cache of servers named without one.
    pub default_cache: Option<PathBuf>,
}

/// Where the kernel base came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum KernelBaseSource {
    /// DllBase of the first entry of the loaded-module list.
    #[serde(rename = "PsLoadedModuleList")]
    ModuleList,
    /// Entry 0 of a triage dump's driver list.
    #[serde(rename = "triage driver list")]
    TriageDriverList,
    /// KDDEBUGGER_DATA64.KernBase (used only when neither list is readable).
    #[serde(rename = "KDBG.KernBase")]
    Kdbg,
    /// A memory image without a header: the PE image in the kernel-image region whose CodeView
    /// record names the kernel ([`super::discover::find_kernel`]).
    #[serde(rename = "CodeView scan")]
    CodeViewScan,
}

impl KernelBaseSource {
    /// The name as the output shows it.
    pub fn name(self) -> &'static str {
        match self {
            KernelBaseSource::ModuleList => "PsLoadedModuleList",
            KernelBaseSource::TriageDriverList => "triage driver list",
            KernelBaseSource::Kdbg => "KDBG.KernBase",
            KernelBaseSource::CodeViewScan => "CodeView scan",
        }
    }
}

/// One global whose RVA the dump and the symbols both give.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RvaCheck {
    pub symbol: &'static str,
    pub dump_rva: String,
    pub symbols_rva: String,
    pub agrees: bool,
}

/// How the symbols were matched to the dump's kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum SymbolMatch {
    /// No symbol file in use.
    NoSymbols,
    /// The kernel's CodeView GUID/age equals the symbols'.
    Rsds,
    /// The dump lacks the CodeView record; RVAs of globals known from the dump's header and
    /// KDBG equal the symbols'.
    SymbolOffsets { checks: Vec<RvaCheck> },
    /// Not verified, and `--force` was given (or there was nothing to compare).
    Unverified { reason: String },
}

/// The kernel found in a dump.
pub struct KernelContext<'d> {
    pub dump: &'d DumpFile,
    pub space: AddressSpace<'d>,
    pub kdbg: KdbgState,
    pub kuser: Result<KUserSharedData, MemError>,
    pub modules: Result<ModuleList, MemError>,
    pub base: Option<VirtAddr>,
    pub base_source: Option<KernelBaseSource>,
    /// KDBG.KernBase, normalized.
    pub kdbg_base: Option<VirtAddr>,
    pub image: Option<KernelImage>,
    /// The build the tool goes by: KUSER NtBuildNumber (10.0+) or the header's.
    pub build: u32,
    pub symbols: Symbols,
    pub symbol_match: SymbolMatch,
    pub warnings: Vec<Warning>,
    /// Where `_KPRCB.EtwSupport` is, once established (`etw::etw_support::locate`).
    pub etw_support: std::sync::OnceLock<Located>,
    /// The host silo state and the layout of its structures, once established from the
    /// logger contexts (`etw::silo::check`).
    pub silo: std::sync::OnceLock<SiloLayout>,
    /// The machine: architecture and page-table root, from the header or found in an image.
    pub machine: Machine,
}

/// The machine of `dump` as discovery finds it; for an image without Windows page tables,
/// unknown with the reason (nothing virtual is read).
fn discovered(dump: &DumpFile) -> Machine {
    crate::kernel::discover::machine(dump).unwrap_or_else(|e| {
        let mut m = Machine::of_container(dump);
        m.source = crate::mem::MachineSource::Unknown(e.to_string());
        m
    })
}

/// A structure whose address and layout were established together from evidence in memory
/// (the host silo state: the logger contexts point to it, and only one of the build's
/// layouts has the logger array where it points back).
#[derive(Clone, Debug, Default)]
pub struct SiloLayout {
    /// Its address, when memory confirms it.
    pub address: Option<VirtAddr>,
    /// None when no evidence was weighed (nothing to decide, or nothing to read).
    pub how: Option<LocatedHow>,
    /// The label of another layout of the build chosen by the evidence (e.g.
    /// `type-layouts-11-24H2`); None: the layouts in use.
    pub chosen: Option<String>,
    /// The chosen layout's structures, replacing the symbols' for this dump.
    pub layouts: Vec<crate::symbols::StructLayout>,
    /// What established it, or why it could not be.
    pub evidence: String,
}

/// A structure field's offset as established for this dump: given by the kernel's own layout,
/// confirmed by evidence in memory, found by a validated search, or unconfirmed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Located {
    /// The offset used (None: none can be used).
    pub offset: Option<u64>,
    pub how: LocatedHow,
    /// What established it, or why it could not be.
    pub evidence: String,
}

/// How a [`Located`] offset is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocatedHow {
    /// The kernel's own layout (PDB, ISF, exact built-in match): used as given.
    Symbols,
    /// Another build's layout, confirmed by evidence in this dump.
    Confirmed,
    /// Another build's layout was not confirmed; a validated search found the offset.
    Searched,
    /// Another build's layout, neither confirmed nor contradicted (no evidence either way).
    Unconfirmed,
    /// Several offsets have the same evidence: none is used.
    Ambiguous,
    /// Memory contradicts another build's layout (it is still used where nothing better
    /// exists; the warning says what that means).
    Contradicted,
}

impl<'d> KernelContext<'d> {
    /// Find the kernel and load the symbols `opts` names (built-in layouts as fallback). An
    /// image's machine is found here ([`crate::kernel::discover::machine`]); a caller that
    /// opened it with `discover::open` has it already: [`Self::open_memory`].
    pub fn open(dump: &'d DumpFile, opts: &SymbolOptions) -> Result<Self, SymbolError> {
        Self::open_on(dump, discovered(dump), opts)
    }

    /// [`Self::open`] on memory whose machine is known.
    pub fn open_memory(mem: &'d Memory, opts: &SymbolOptions) -> Result<Self, SymbolError> {
        Self::open_on(&mem.dump, mem.machine.clone(), opts)
    }

    fn open_on(
        dump: &'d DumpFile,
        machine: Machine,
        opts: &SymbolOptions,
    ) -> Result<Self, SymbolError> {
        let mut me = Self::without_symbols_on(dump, machine);
        let (symbols, matched) = me.load_symbols(opts)?;
        let kernel = me.kernel_pdb().cloned();
        me.symbols =
            symbols.with_builtin_for(me.build, TableFamily::of(me.machine.arch), kernel.as_ref());
        me.symbol_match = matched;
        me.check_builtin_rvas();
        me.find_lists_by_symbols();
        Ok(me)
    }

    /// A memory image has no header to give PsLoadedModuleList and KdDebuggerDataBlock: take
    /// them from the symbols. On every dump kind, a KDBG Windows keeps encoded is decoded.
    fn find_lists_by_symbols(&mut self) {
        if !self.dump.headerless() {
            self.decode_kdbg();
            return;
        }
        if self.modules.is_err() {
            if let Some(head) = self.global("PsLoadedModuleList") {
                self.modules = modules::walk(&self.space, head);
            }
        }
        if matches!(self.kdbg, KdbgState::NoAddress) {
            if let Some(va) = self.global("KdDebuggerDataBlock") {
                self.kdbg = KdDebuggerData::read(&self.space, va);
            }
        }
        self.decode_kdbg();
    }

    /// A KDBG without its tag, while `KdpDataBlockEncoded` says it is encoded: decode it with
    /// KiWaitNever and KiWaitAlways (Windows 8+ live memory keeps it so; dumps written at bug
    /// check hold it decoded).
    fn decode_kdbg(&mut self) {
        let KdbgState::NotDecoded { va, .. } = &self.kdbg else {
            return;
        };
        let va = *va;
        let (Some(flag), Some(never), Some(always)) = (
            self.global("KdpDataBlockEncoded"),
            self.global("KiWaitNever"),
            self.global("KiWaitAlways"),
        ) else {
            return;
        };
        let mut b = [0u8; 1];
        let encoded = self.space.read(flag, &mut b).is_ok() && b[0] != 0;
        let (Ok(n), Ok(a)) = (self.space.read_u64(never), self.space.read_u64(always)) else {
            return;
        };
        if !encoded {
            return;
        }
        if let d @ KdbgState::Decoded(_) =
            KdDebuggerData::read_encoded(&self.space, va, (n, a, flag.get()))
        {
            self.kdbg = d;
            self.warnings.push(
                Warning::new(
                    WarningKind::Inferred,
                    format!(
                        "the KDBG at {va} is encoded (KdpDataBlockEncoded = {}): decoded with KiWaitNever and KiWaitAlways as KdCopyDataBlock does",
                        b[0]
                    ),
                )
                .at(va),
            );
        }
    }

    /// How many processors the machine has: the dump header's count, else (memory images)
    /// KeNumberProcessors, else 1 (and `None` from [`Self::processors_known`]).
    pub fn processors(&self) -> u32 {
        self.processors_known().unwrap_or(1)
    }

    /// The processor count when the dump or its kernel says.
    pub fn processors_known(&self) -> Option<u32> {
        let h = self.dump.header().number_processors;
        if h > 0 {
            return Some(h);
        }
        self.global_u32("KeNumberProcessors")
            .filter(|&n| (1..=4096).contains(&n))
    }

    /// The system time when the memory was taken (FILETIME): the dump header's, else
    /// (memory images) KUSER_SHARED_DATA.SystemTime.
    pub fn system_time(&self) -> Option<u64> {
        let h = self.dump.header().system_time;
        if h > 0 {
            return Some(h);
        }
        self.kuser.as_ref().ok().and_then(|k| k.system_time)
    }

    /// Time since boot (100 ns): the dump header's SystemUpTime, else (memory images)
    /// KUSER_SHARED_DATA.InterruptTime.
    pub fn up_time(&self) -> Option<u64> {
        let h = self.dump.header();
        if h.system_time > 0 {
            return Some(h.system_up_time);
        }
        self.kuser.as_ref().ok().and_then(|k| k.interrupt_time)
    }

    /// PsActiveProcessHead: the dump header's, else (memory images) from the symbols.
    pub(crate) fn process_head(&self) -> Option<VirtAddr> {
        let h = self.dump.header().ps_active_process_head;
        if !h.is_null() {
            return Some(h);
        }
        self.global("PsActiveProcessHead")
    }

    /// Find the kernel; built-in layouts only.
    pub fn without_symbols(dump: &'d DumpFile) -> Self {
        Self::without_symbols_on(dump, discovered(dump))
    }

    /// [`Self::without_symbols`] on a known machine.
    pub fn without_symbols_on(dump: &'d DumpFile, machine: Machine) -> Self {
        let h = dump.header();
        let space = AddressSpace::new(dump, &machine);
        let mut warnings: Vec<Warning> = dump
            .warnings()
            .iter()
            .chain(&machine.warnings)
            .cloned()
            .collect();
        let kdbg = KdDebuggerData::read(&space, h.kd_debugger_data_block);
        let kuser = KUserSharedData::read(&space);
        let modules = if !h.ps_loaded_module_list.is_null() {
            modules::walk(&space, h.ps_loaded_module_list)
        } else {
            Err(MemError::NonCanonical {
                va: h.ps_loaded_module_list,
            })
        };
        let kdbg_base = match &kdbg {
            KdbgState::Decoded(k) => k.kern_base().and_then(|b| space.normalize(b).ok()),
            _ => None,
        };
        let (mut base, mut base_source) = kernel_base(&modules, dump, kdbg_base);
        // A memory image has no header to lead to the kernel: look for its image.
        let mut scanned = None;
        if base.is_none() && dump.headerless() && space.translation_supported() {
            match super::discover::find_kernel(&space) {
                Some(img) => {
                    base = Some(img.base);
                    base_source = Some(KernelBaseSource::CodeViewScan);
                    scanned = Some(img);
                }
                None => warnings.push(Warning::new(
                    WarningKind::NotFound,
                    "no kernel image (a PE whose CodeView record names ntkrnlmp/ntoskrnl/ntkrnlpa/ntkrpamp.pdb) in the kernel-image region of this image",
                )),
            }
        }
        if let (Some(b), Some(k), Some(s)) = (base, kdbg_base, base_source) {
            if s != KernelBaseSource::Kdbg && b != k {
                warnings.push(
                    Warning::new(
                        WarningKind::Conflict,
                        format!(
                            "kernel base from the {} ({b}) differs from KDBG.KernBase ({k})",
                            s.name()
                        ),
                    )
                    .at(b)
                    .field("KDDEBUGGER_DATA64.KernBase"),
                );
            }
        }
        let image = scanned.or_else(|| base.map(|b| KernelImage::read(&space, b)));
        // A memory image has no header build: before Windows 10 (no NtBuildNumber in
        // KUSER_SHARED_DATA) the kernel's PDB identity names it when the layout corpus knows it.
        let identity_build = || {
            image
                .as_ref()
                .and_then(|i| i.pdb.as_ref().ok())
                .and_then(crate::symbols::builtin::corpus::exact)
                .map(|b| b.major)
        };
        let build = match &kuser {
            Ok(k) if k.nt_major_version >= 10 && k.build_number() != 0 => {
                if k.build_number() != h.minor_version && !dump.headerless() {
                    warnings.push(
                        Warning::new(
                            WarningKind::Conflict,
                            format!(
                                "KUSER_SHARED_DATA.NtBuildNumber {} differs from the header's MinorVersion {}",
                                k.build_number(),
                                h.minor_version
                            ),
                        )
                        .field("KUSER_SHARED_DATA.NtBuildNumber"),
                    );
                }
                k.build_number()
            }
            _ if h.minor_version == 0 && dump.headerless() => identity_build().unwrap_or(0),
            _ => h.minor_version,
        };
        let symbols = Symbols::none(machine.arch.pointer_size()).with_builtin_for(
            build,
            TableFamily::of(machine.arch),
            image.as_ref().and_then(|i| i.pdb.as_ref().ok()),
        );
        let mut me = KernelContext {
            dump,
            space,
            kdbg,
            kuser,
            modules,
            base,
            base_source,
            kdbg_base,
            image,
            build,
            symbols,
            symbol_match: SymbolMatch::NoSymbols,
            warnings,
            etw_support: std::sync::OnceLock::new(),
            silo: std::sync::OnceLock::new(),
            machine,
        };
        me.check_builtin_rvas();
        if let (Some(ft), Some((_, why))) = (me.system_time(), me.system_time_flag()) {
            me.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!(
                        "the dump's SystemTime cannot be right: {why}; shown with its raw value {ft:#x}, not as fact"
                    ),
                )
                .field("SystemTime"),
            );
        }
        me
    }

    /// Why the dump's SystemTime ([`Self::system_time`]) cannot be right, with its flag
    /// (`not_a_filetime`, `before_build`, `after_file_written`): see
    /// `crate::time::implausible_dump_time`.
    pub fn system_time_flag(&self) -> Option<(&'static str, String)> {
        crate::time::implausible_dump_time(self.system_time()?, self.build, self.dump.written())
    }

    /// The built-in table's RVAs (exact corpus match) must agree with the globals the dump
    /// itself reveals; otherwise they are dropped, with a warning.
    fn check_builtin_rvas(&mut self) {
        let known = self.known_rvas();
        if let Some(w) = self.symbols.check_builtin_rvas(&known) {
            crate::warning::push_once(&mut self.warnings, Warning::new(WarningKind::Conflict, w));
        }
    }

    /// The kernel's PDB identity from its CodeView record, if the dump holds it.
    pub fn kernel_pdb(&self) -> Option<&PdbIdentity> {
        self.image.as_ref().and_then(|i| i.pdb.as_ref().ok())
    }

    /// The address of a kernel global, from the kernel base and the symbols.
    pub fn global(&self, name: &str) -> Option<VirtAddr> {
        Some(self.base?.offset(self.symbols.rva(name)?))
    }

    /// The loaded kernel modules as (base, size, file name): a triage dump's driver list (its
    /// names are paths such as `\SystemRoot\System32\drivers\x.sys`: the last part is
    /// kept), else the PsLoadedModuleList walk; empty when neither is there.
    pub fn loaded_modules(&self) -> Vec<(u64, u64, Untrusted)> {
        match self.dump.triage() {
            Some(t) => t
                .drivers
                .iter()
                .map(|d| {
                    let n = d.name.raw();
                    let base = n.rsplit(['\\', '/']).next().unwrap_or(n);
                    (d.base, u64::from(d.size), Untrusted::from(base))
                })
                .collect(),
            None => self.modules.as_ref().map_or_else(
                |_| Vec::new(),
                |l| {
                    l.modules
                        .iter()
                        .map(|m| {
                            (
                                m.base.get(),
                                u64::from(m.size),
                                m.base_name.clone().unwrap_or_else(|| "?".into()),
                            )
                        })
                        .collect()
                },
            ),
        }
    }

    /// A ULONG kernel global's value, if the symbols name it and the dump holds it.
    pub(crate) fn global_u32(&self, name: &str) -> Option<u32> {
        self.space.read_u32(self.global(name)?).ok()
    }

    /// The decoded KDBG, if any.
    pub fn kdbg(&self) -> Option<&KdDebuggerData> {
        match &self.kdbg {
            KdbgState::Decoded(k) => Some(k),
            _ => None,
        }
    }

    /// RVAs of globals the dump itself reveals (header and KDBG), for matching symbols.
    pub(crate) fn known_rvas(&self) -> Vec<(&'static str, u64)> {
        let Some(base) = self.base else {
            return Vec::new();
        };
        let h = self.dump.header();
        let rva = |va: VirtAddr| {
            self.space
                .normalize(va)
                .ok()
                .filter(|v| v.get() > base.get() && v.get() - base.get() < 0x1_0000_0000)
                .map(|v| v.get() - base.get())
        };
        let mut out = Vec::new();
        let mut push = |name: &'static str, va: Option<VirtAddr>| {
            if let Some(r) = va.and_then(rva) {
                if !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, r));
                }
            }
        };
        push("PsLoadedModuleList", Some(h.ps_loaded_module_list));
        push("PsActiveProcessHead", Some(h.ps_active_process_head));
        push("KdDebuggerDataBlock", Some(h.kd_debugger_data_block));
        if let Some(k) = self.kdbg() {
            push("KiProcessorBlock", k.ki_processor_block());
            push("EtwpDebuggerData", k.etwp_debugger_data());
            push("MmPfnDatabase", k.mm_pfn_database());
            push("NtBuildLabEx", k.nt_build_lab());
        }
        out
    }

    /// The kernel's PDB `id` from the first of `servers` (URL, cache) that gives it.
    #[cfg(feature = "fetch")]
    fn fetch(
        &mut self,
        servers: &[(String, PathBuf)],
        id: &crate::symbols::PdbIdentity,
        searched: usize,
    ) -> Result<Symbols, SymbolError> {
        let mut why = Vec::new();
        for (url, cache) in servers {
            let srv = crate::symbols::server::Server::new(url, cache.clone());
            match crate::symbols::server::fetch(&srv, id) {
                Ok((s, _)) => return Ok(s),
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(SymbolError::NotFetched {
            wanted: id.to_string(),
            searched,
            why: why.join("; "),
        })
    }

    #[cfg(not(feature = "fetch"))]
    fn fetch(
        &mut self,
        _servers: &[(String, PathBuf)],
        id: &crate::symbols::PdbIdentity,
        searched: usize,
    ) -> Result<Symbols, SymbolError> {
        Err(SymbolError::NotFetched {
            wanted: id.to_string(),
            searched,
            why: "this build of etwdump has no symbol-server support (feature `fetch`)".into(),
        })
    }

    fn load_symbols(
        &mut self,
        opts: &SymbolOptions,
    ) -> Result<(Symbols, SymbolMatch), SymbolError> {
        let symbols = if let Some(p) = &opts.pdb {
            Symbols::from_pdb(p, WANTED_TYPES)?
        } else if let Some(p) = &opts.isf {
            Symbols::from_isf(p, WANTED_TYPES)?
        } else {
            let mut dirs = opts.stores.clone();
            // Servers to ask when no local directory has the PDB; their caches are searched
            // first like any store.
            let mut servers = opts.servers.clone();
            if let (true, Some(v)) = (opts.fetch_nt_symbol_path, &opts.nt_symbol_path) {
                for (cache, url) in store::nt_symbol_path_servers(v) {
                    match cache.or_else(|| opts.default_cache.clone()) {
                        Some(c) => servers.push((url, c)),
                        None => self.warnings.push(Warning::new(
                            WarningKind::NotFound,
                            format!("_NT_SYMBOL_PATH server {url} has no cache directory and no default cache: not used"),
                        )),
                    }
                }
            }
            for (_, c) in &servers {
                if !dirs.contains(c) {
                    dirs.push(c.clone());
                }
            }
            let explicit = !dirs.is_empty();
            if let Some(v) = &opts.nt_symbol_path {
                dirs.extend(store::nt_symbol_path_dirs(v));
            }
            if dirs.is_empty() {
                return Ok((
                    Symbols::none(self.space.arch().pointer_size()),
                    SymbolMatch::NoSymbols,
                ));
            }
            let Some(id) = self.kernel_pdb().cloned() else {
                let why = match self.image.as_ref().map(|i| &i.pdb) {
                    Some(Err(e)) => e.to_string(),
                    _ => "the kernel base is unknown".to_string(),
                };
                if explicit {
                    return Err(SymbolError::NoIdentity(format!(
                        "{why}; give the PDB or ISF file with --pdb or --isf"
                    )));
                }
                self.warnings.push(Warning::new(
                    WarningKind::NotFound,
                    format!("_NT_SYMBOL_PATH not used: the kernel's PDB GUID is unknown ({why})"),
                ));
                return Ok((
                    Symbols::none(self.space.arch().pointer_size()),
                    SymbolMatch::NoSymbols,
                ));
            };
            match store::find(&dirs, &id) {
                (Some(store::Found::Pdb(p)), _) => Symbols::from_pdb(&p, WANTED_TYPES)?,
                (Some(store::Found::Isf(p)), _) => Symbols::from_isf(&p, WANTED_TYPES)?,
                (None, tried) if !servers.is_empty() => self.fetch(&servers, &id, tried.len())?,
                (None, tried) => {
                    if explicit {
                        return Err(SymbolError::NotInStore {
                            wanted: id.to_string(),
                            searched: tried.len(),
                            first: tried
                                .first()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default(),
                        });
                    }
                    self.warnings.push(Warning::new(
                        WarningKind::NotFound,
                        format!(
                            "no symbols for {id} in the _NT_SYMBOL_PATH directories; using built-in layouts"
                        ),
                    ));
                    return Ok((
                        Symbols::none(self.space.arch().pointer_size()),
                        SymbolMatch::NoSymbols,
                    ));
                }
            }
        };
        let matched = self.check_match(&symbols, opts.force)?;
        Ok((symbols, matched))
    }

    fn check_match(&self, symbols: &Symbols, force: bool) -> Result<SymbolMatch, SymbolError> {
        let kind = symbols.source.kind();
        let source_kind = if kind == "pdb" { "PDB" } else { "ISF" };
        if let (Some(dump_id), Some(sym_id)) = (self.kernel_pdb(), symbols.identity.as_ref()) {
            if dump_id.same_build(sym_id) {
                return Ok(SymbolMatch::Rsds);
            }
            if !force {
                return Err(SymbolError::Mismatch {
                    dump: dump_id.to_string(),
                    symbols: sym_id.to_string(),
                    source_kind,
                });
            }
            return Ok(SymbolMatch::Unverified {
                reason: format!("forced: the dump's kernel is {dump_id}, the symbols are {sym_id}"),
            });
        }
        let checks: Vec<RvaCheck> = self
            .known_rvas()
            .into_iter()
            .filter_map(|(name, dump_rva)| {
                symbols.rva(name).map(|s| RvaCheck {
                    symbol: name,
                    dump_rva: format!("{dump_rva:#x}"),
                    symbols_rva: format!("{s:#x}"),
                    agrees: s == dump_rva,
                })
            })
            .collect();
        let bad: Vec<&RvaCheck> = checks.iter().filter(|c| !c.agrees).collect();
        if !bad.is_empty() && !force {
            let what = bad
                .iter()
                .map(|c| {
                    format!(
                        "{} at RVA {} (symbols: {})",
                        c.symbol, c.dump_rva, c.symbols_rva
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SymbolError::Mismatch {
                dump: format!("a kernel with {what}"),
                symbols: symbols
                    .identity
                    .as_ref()
                    .map_or_else(|| "unidentified".to_string(), |i| i.to_string()),
                source_kind,
            });
        }
        if checks.len() >= 2 && bad.is_empty() {
            return Ok(SymbolMatch::SymbolOffsets { checks });
        }
        let why = match self.image.as_ref().map(|i| &i.pdb) {
            Some(Err(e)) => format!("the kernel's CodeView record is unreadable ({e})"),
            _ => "the symbols carry no PDB identity".into(),
        };
        Ok(SymbolMatch::Unverified {
            reason: if bad.is_empty() {
                format!(
                    "{why}, and only {} global RVA(s) could be compared",
                    checks.len()
                )
            } else {
                format!("forced although {} global RVA(s) disagree", bad.len())
            },
        })
    }
}

/// The kernel base and where it comes from: the first loaded module, else the triage driver
/// list's first entry, else KDBG.KernBase.
pub fn kernel_base(
    modules: &Result<ModuleList, MemError>,
    dump: &DumpFile,
    kdbg_base: Option<VirtAddr>,
) -> (Option<VirtAddr>, Option<KernelBaseSource>) {
    match (modules, dump.triage()) {
        (Ok(l), _) if !l.modules.is_empty() => {
            (Some(l.modules[0].base), Some(KernelBaseSource::ModuleList))
        }
        (_, Some(t)) if !t.drivers.is_empty() => (
            Some(VirtAddr::new(t.drivers[0].base)),
            Some(KernelBaseSource::TriageDriverList),
        ),
        _ => (kdbg_base, kdbg_base.map(|_| KernelBaseSource::Kdbg)),
    }
}
