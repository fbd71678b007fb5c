//! etwdump-forge: builds SYNTHETIC Windows kernel crash dumps for etwdump's tests.
//!
//! Everything here is derived from the reference documents
//! (`shared/reference/crash-dump-format.md`, `tooling-notes.md`), never from etwdump's reader,
//! so that a misreading on either side shows up as a test failure.
//!
//! ```no_run
//! use etwdump_forge::{forge, Config, Expect};
//! let forged = forge(&Config::x64());
//! forged.write_to(std::path::Path::new("/tmp/x64.dmp")).unwrap();
//! for p in &forged.probes {
//!     match &p.expect {
//!         Expect::Bytes(b) => println!("{} {:#x} -> {} bytes", p.name, p.va, b.len()),
//!         Expect::Unreadable { first_unreadable_va } => {
//!             println!("{} {:#x} -> unreadable at {:#x}", p.name, p.va, first_unreadable_va)
//!         }
//!     }
//! }
//! ```
//!
//! A forged dump holds: the dump header (§1.1), physical memory as a full (DumpType 1) or
//! bitmap (5/6) dump (§1.2/§1.2a), page tables built by the forge (§1.5), a hand-made kernel PE
//! image with a debug directory and RSDS record, KDDEBUGGER_DATA64, the loaded-module list,
//! KUSER_SHARED_DATA, and a probe area whose reads have known results.
//!
//! [`Config::from_fixture`] replaces the hand-made PE with a fixture kernel of
//! `tests/fixtures/<name>/` (a tiny real PE whose PDB has real type layouts): the image is mapped
//! and relocated at the kernel base and the kernel objects are placed at the fixture's public
//! RVAs (KdDebuggerDataBlock, KdVersionBlock, KeNumberProcessors, KiProcessorBlock, ...); see
//! [`Forged::symbols`] and the README.
//!
//! With a fixture, [`Config::etw`] ([`EtwSpec`], e.g. [`Config::with_standard_etw`]) adds ETW
//! logger state: the logger-context array where that kernel keeps it (global, inline in the
//! silo state, or behind `EtwpLoggerContext`), `_WMI_LOGGER_CONTEXT`s laid out from the
//! fixture's types.h, and anomalies; [`Forged::etw`] ([`ForgedEtw`]) says what a reader must
//! find in every slot.
//!
//! [`Forged::write_image`] renders the same physical memory as images that are not crash dumps
//! (raw, VMware `.vmem` + `.vmss` or embedded `.vmsn`, a QEMU-style ELF core; [`ImageKind`]), and
//! [`Config::self_map_index`] moves the x64 page-table self-map away from 0x1ED.
//! [`Forged::write_hiberfil`] writes it as a Windows 8+ x64 hibernation file ([`HiberSpec`],
//! [`HiberTruth`]) and [`Forged::write_dump_of_pages`] as a crash dump of any page set.

mod config;
mod dump;
pub(crate) mod etw;
mod image;
mod kernel;
mod triage;
mod util;
pub mod xpress;

/// The compact context-switch encoder (etw-internals.md §4), public for etwdump's tests.
pub use etw::ccswap;
/// Variation mode (seeded values a real kernel may hold), public for etwdump's tests.
pub use etw::variation;

use std::path::{Path, PathBuf};

pub use config::{
    Arch, BitmapSig, Config, Layout, FORGE_PML4_SLOTS, HOSTILE_LOG_FILE, HOSTILE_NAME,
    X64_19041_GUID, X64_DEFAULT_SELF_MAP_INDEX, X86_NONPAE_GUID, X86_PAE_GUID,
};
pub use etw::buffers::{BufferSpec, ExpectedBuffer, QueueKind};
pub use etw::message::{
    all_message_flag_combinations, ExpectedMessage, MessageSpec, MESSAGE_FLAG_BITS,
    MESSAGE_VERSION_BYTE, TRACE_MESSAGE_COMPONENTID, TRACE_MESSAGE_GUID,
    TRACE_MESSAGE_PERFORMANCE_TIMESTAMP, TRACE_MESSAGE_POINTER32, TRACE_MESSAGE_POINTER64,
    TRACE_MESSAGE_SEQUENCE, TRACE_MESSAGE_SYSTEMINFO, TRACE_MESSAGE_TIMESTAMP,
};
pub use etw::payloads;
pub use etw::providers::{
    guid_hash_bucket, BucketRule, EnableSpec, ExpectedEnableInfo, ExpectedGuidTable,
    ExpectedProvider, ExpectedRegHandle, ExpectedRegistration, ProviderSet, ProviderSpec,
    ProvidersSpec, Registrant, RegistrationSpec, TableShape, ETW_GROUP_GUID_TYPE,
    ETW_NOTIFICATION_GUID_TYPE, ETW_TRACE_GUID_TYPE, GUID_TABLE_BUCKETS,
};
pub use etw::realtime::{
    fnv1a64, realtime_config, realtime_scenarios, realtime_supported, CountShape, ExpectedRealtime,
    ExpectedUserBuffer, ExpectedUserDecoy, HeadShape, NodeShape, RealtimeBuffers, RealtimeDamage,
    RealtimeSpec, ReservedSpec, DESCRIPTOR_PTR_OFFSETS, REALTIME_COUNT_OFFSET,
    REALTIME_DECOY_ID_DELTA, REALTIME_DESCRIPTOR_AREA, REALTIME_DESCRIPTOR_SIZE,
    REALTIME_ELSEWHERE_OFFSET, REALTIME_HEAD_OFFSET, REALTIME_MAX_QUEUED, REALTIME_RESERVED_OFFSET,
    REALTIME_USER_BASE,
};
pub use etw::scan::{
    scan_scenarios, ForgedScan, GroupOrigin, ScanBuffer, ScanClass, ScanContext, ScanDecoy,
    ScanGroup, ScanKind, ScanLost, ScanObject, ScanPending, ScanSpec,
};
pub use etw::tamper::{
    providers_config, tamper_scenarios, CheckId, ExpectedFinding, TamperKind, TamperSpec,
    WritePatch,
};
pub use etw::variation::{
    ClockModel, CpuSpeedGlobal, ExpectedEtwSupport, ExpectedSwitch, RefClock, SessionVariation,
    Variation,
};
pub use etw::wmi_buffer::{cswitch_version, Offsets, RecSpec, Tail};
/// The later-Win11 EtwSupport block (etw-internals.md §3.3 / §4.1) and its offsets.
pub use etw::{late_win11_etw_support, CCSWAP_LATE_WIN11_OFFSET, LATE_WIN11_BUFFERS_OFFSET};
pub use etw::{
    EtwRoute, EtwSpec, ExpectedConsumer, ExpectedPending, ExpectedPendingDecoy, ExpectedSession,
    ExpectedSlot, ForgedEtw, GlobalListSpec, SessionSpec, SlotSpec, EVENT_TRACE_BUFFERING_MODE,
    EVENT_TRACE_FILE_MODE_CIRCULAR, EVENT_TRACE_FILE_MODE_SEQUENTIAL,
    EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING, EVENT_TRACE_REAL_TIME_MODE,
    EVENT_TRACE_SYSTEM_LOGGER_MODE, EVENT_TRACE_USE_PAGED_MEMORY, LARGE_SESSION_SLOT,
    NON_PAGED_POOL, NON_PAGED_POOL_NX, PAGED_POOL,
};
pub use image::hiberfil::{
    HiberCodec, HiberLayout, HiberSetTruth, HiberSignature, HiberSpec, HiberTruth, HiberVariant,
    HiberVersion, RestoreSet, HIBER_CHECKSUM_OFFSET, HIBER_FEATURE_FLAGS_OFFSET,
    HIBER_IMAGE_TYPE_OFFSET, HIBER_INTERRUPT_TIME_OFFSET, HIBER_LENGTH_SELF_OFFSET,
    HIBER_NUM_PAGES_FOR_LOADER_OFFSET, HIBER_PAGE_SIZE_OFFSET, HIBER_SIGNATURE_OFFSET,
    HIBER_SYSTEM_TIME_OFFSET,
};
pub use image::random::{random_image_bytes, write_random_image, RANDOM_IMAGE_SIZE};
pub use image::{ImageKind, ImageRange};
pub use kernel::fixture::{
    default_fixtures_root, fixture_dirs, Fixture, FixtureError, FixtureExtras, FixtureSection,
    Relocation,
};
pub use kernel::processes::{thread_facts, ExpectedProcess, ThreadFacts, STANDARD_PROCESSES};
pub use kernel::user_images::{
    has_user_memory, peb_va, user_images_supported, ExpectedEtwFunction, ExpectedNtdll,
    ExpectedUserModule, ExpectedUserProcess, ExpectedWritePatch, NtdllPage, ENTRY_BYTES,
    ETW_WRITE_FUNCTIONS, LDR_DATA_INITIALIZED, LDR_DATA_IN_INIT_ORDER, LDR_DATA_IN_LOAD_ORDER,
    LDR_DATA_IN_MEMORY_ORDER, LDR_DATA_LENGTH, LDR_ENTRY_STRIDE, LDTE_BASE_DLL_NAME, LDTE_DLL_BASE,
    LDTE_ENTRY_POINT, LDTE_FULL_DLL_NAME, LDTE_IN_INIT_ORDER_LINKS, LDTE_IN_LOAD_ORDER_LINKS,
    LDTE_IN_MEMORY_ORDER_LINKS, LDTE_SIZE_OF_IMAGE, NTDLL_BASE, NTDLL_ORDINAL_BASE,
    NTDLL_SIZE_OF_IMAGE, PEB_IMAGE_BASE_ADDRESS, PEB_LDR, PEB_LDR_DATA_SIZE, USER_LOADER_HEAP,
};
pub use triage::{
    forge_triage, triage_scenarios, BlobBufferSpec, BlobSessionSpec, CurrentBufferSpec,
    ErrlogSource, ErrlogSpec, EtwBlobSpec, ExpectedArm64Context, ExpectedBlobBuffer,
    ExpectedBlobEntry, ExpectedBlobSession, ExpectedBlock, ExpectedBufferHeader, ExpectedBufferRef,
    ExpectedCpu, ExpectedDriver, ExpectedDuplicate, ExpectedEtwBlob, ExpectedOrphan,
    ExpectedOverlap, ExpectedRecord, ExpectedSecondary, ExpectedTriage, ExpectedTriageHeader,
    ExpectedWindow, Fault, ForgedTriage, GlobalsOrder, NameConvention, PerfMix, TriageArch,
    TriageSpec, EVENTLOG_SYSTEM_MODE, QPC_SESSION_MODE,
};
pub use util::{guid_from_str, guid_to_string, pdb_symbol_key};

/// A loaded module as listed by PsLoadedModuleList.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    pub base_name: String,
    pub full_name: String,
    pub base: u64,
    pub size: u32,
}

/// What a correct reader returns for a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// All bytes are readable and equal these.
    Bytes(Vec<u8>),
    /// The read fails; the bytes before `first_unreadable_va` are readable. If the very first
    /// byte is unreadable, `first_unreadable_va` is the probe's `va` itself (not page aligned
    /// in general); otherwise it is the start of the first unreadable page.
    Unreadable { first_unreadable_va: u64 },
}

/// A virtual read with a known result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub name: String,
    pub va: u64,
    pub len: usize,
    pub expect: Expect,
}

/// A forged dump and everything a test needs to know about it.
#[derive(Clone, Debug)]
pub struct Forged {
    pub config: Config,
    /// The DirectoryTableBase written in the header (x64: including `dtb_low_bits`;
    /// PAE: the 32-byte-aligned PDPT address).
    pub dtb: u64,
    pub kdbg_va: u64,
    /// KUSER_SHARED_DATA kernel VA (0xFFFFF78000000000 / 0xFFDF0000).
    pub kuser_va: u64,
    pub ps_loaded_module_list: u64,
    pub ps_active_process_head: u64,
    /// The header's PfnDataBase = KDBG.MmPfnDatabase = address of the MmPfnDatabase variable
    /// (as measured on the real dump D1), not the database itself; see `mm_pfn_database_value`.
    pub pfn_database: u64,
    pub nt_build_lab: String,
    /// In load order; [0] is ntoskrnl.exe.
    pub modules: Vec<Module>,
    pub probes: Vec<Probe>,
    /// Physical pages actually stored in the file.
    pub stored_pages: u64,

    // ---- extras beyond the agreed API ----
    /// The machine's memory runs (BasePage, PageCount), as in PHYSICAL_MEMORY_DESCRIPTOR.
    pub runs: Vec<(u64, u64)>,
    /// 0x2000 (x64) or 0x1000 (x86).
    pub header_size: u64,
    /// File offset of the first stored page.
    pub first_page_offset: u64,
    /// 0x7FFE0000: the user-mode alias of KUSER_SHARED_DATA.
    pub kuser_user_va: u64,
    pub nt_build_lab_va: u64,
    pub debug_directory_va: u64,
    pub rsds_va: u64,
    /// VAs of the KLDR_DATA_TABLE_ENTRYs, in load order.
    pub ldr_entries: Vec<u64>,
    /// Address of KiProcessorBlock (an array of `cpus` KPRCB pointers; the KPRCBs are not
    /// mapped).
    pub ki_processor_block: u64,
    /// Address of EtwpDebuggerData (KDBG+0x330 points here; the page is not mapped).
    pub etwp_debugger_data: u64,
    /// Value stored in the MmPfnDatabase variable (the PFN database VA; not mapped).
    pub mm_pfn_database_value: u64,
    /// Name -> VA (as placed) of the kernel variables: KdDebuggerDataBlock, EtwpDebuggerData,
    /// PsActiveProcessHead, PsLoadedModuleList, NtBuildLabEx, MmPfnDatabase, KiProcessorBlock,
    /// KdpDebuggerDataListHead; with a fixture also KdVersionBlock, KeNumberProcessors,
    /// CmNtCSDVersion and every public of the fixture's symbols.json (undecorated names, e.g.
    /// EtwpHostSiloState, PspHostSiloGlobals, WmipLoggerContext, KiSystemStartup). With a fixture,
    /// MmPfnDatabase, KdpDebuggerDataListHead and CmNtCSDVersion are not publics of its PDB: the
    /// forge puts them in the slack after .data's VirtualSize (still inside the mapped image).
    /// The PDB identity is `config.pdb_name` / `config.pdb_guid` (on-disk bytes; see
    /// [`guid_to_string`]) / `config.pdb_age`: with a fixture, those of its symbols.json, equal
    /// to the RSDS record in the mapped image.
    pub symbols: std::collections::BTreeMap<String, u64>,
    /// The KPRCB addresses stored in KiProcessorBlock (`cpus` entries).
    pub kprcbs: Vec<u64>,
    /// `Some(sizeof(_KPRCB))` when the KPRCBs are mapped (fixtures whose size is known:
    /// zero-filled pages from each KPCR's page to the end of its KPRCB); `None`: not mapped.
    pub kprcb_size: Option<u32>,
    /// `Some` when `config.etw` was given: the logger array, its route and what a correct
    /// reader finds in every slot (see [`ForgedEtw`]).
    pub etw: Option<ForgedEtw>,
    /// With `config.processes` ([`Config::with_processes`]): the processes a walk of
    /// PsActiveProcessHead finds, in Flink order, with their threads; empty otherwise.
    pub processes: Vec<ExpectedProcess>,
    /// With `processes` and mapped KPRCBs: per CPU, KPRCB.CurrentThread as (`_ETHREAD` VA,
    /// TID); empty otherwise. The last pending compact switch's new thread is this TID
    /// (etw-internals.md §4.3).
    pub current_threads: Vec<(u64, u64)>,
    /// With [`EtwSpec::scan`] ([`EtwSpec::with_stopped_sessions`], [`EtwSpec::with_scan_extras`]):
    /// every buffer, 'CCsw' block and logger context in the dump as a scan of all physical
    /// memory must find and classify it (live / orphaned / stale copy), the orphaned sessions'
    /// groups, the objects lost to reused pages and the decoys; None otherwise.
    pub scan: Option<ForgedScan>,
    /// With [`Config::with_user_images`]: every process's PEB, loader lists and ntdll.dll (its
    /// exports, the eight `EtwEventWrite`-family functions, the image's shared pages, each
    /// process's view of them) and the `etw-write-patch` tamperings applied; None otherwise.
    pub ntdll: Option<ExpectedNtdll>,

    file: dump::layout::FileImage,
    /// Physical address of the page-table root (PML4, PAE PDPT, non-PAE PD).
    page_table_root: u64,
    pm: dump::phys::PhysMem,
    vmap: dump::paging::VirtMap,
    /// The processes' own address spaces ([`EtwSpec::with_realtime_buffers`],
    /// [`Config::with_user_images`]); empty otherwise.
    user_spaces: Vec<dump::user_space::UserSpace>,
}

/// Build a dump for `config`. Deterministic: the same config gives the same bytes.
pub fn forge(config: &Config) -> Forged {
    kernel::machine::build(config)
}

impl Forged {
    pub fn file_len(&self) -> u64 {
        self.file.len
    }

    /// The whole file in memory (small dumps only; panics above 2 GiB).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.file.to_bytes()
    }

    /// Write the file sparsely: only the header, bitmap and non-zero pages are written; zero
    /// and unstored areas are skipped with seeks and `set_len`.
    pub fn write_to(&self, path: &Path) -> std::io::Result<()> {
        self.file.write_to(path)
    }

    /// Write the machine's physical memory as a memory image of `kind` (not a crash dump) and
    /// return every file written: [`ImageKind::Raw`] and [`ImageKind::Elf`] write `path`;
    /// [`ImageKind::Vmware`] writes `path` with the extensions `.vmem` and `.vmss`;
    /// [`ImageKind::VmwareEmbedded`] writes `path` with the extension `.vmsn`. The images hold
    /// the same bytes as the dump for every stored physical page; VMware and ELF images hold
    /// exactly the stored pages (as runs, see [`Forged::image_ranges`]), the raw image every
    /// address from 0 to the end of the last stored page (unstored pages zero). Sparse like
    /// [`Forged::write_to`].
    pub fn write_image(&self, path: &Path, kind: ImageKind) -> std::io::Result<Vec<PathBuf>> {
        image::write(self, path, kind)
    }

    /// Write a Windows 8+ x64 hibernation file (`hiberfil.sys`) of the machine's physical
    /// memory as `spec` says ([`HiberSpec`]: format version, codec, full or Fast Startup
    /// image, signature, seed for everything the format leaves open) and return what a reader
    /// must find in it ([`HiberTruth`]). Every stored page of the machine (FastStartup: less
    /// the user-only frames, [`HiberVariant::FastStartup`]) is in exactly one compression set,
    /// with the bytes [`Forged::write_image`] puts at its physical address (zero pages
    /// included). Errors for x86 machines (no public x86 `PO_MEMORY_IMAGE` here) and on I/O
    /// failure. See `image/hiberfil.rs` for the format and its sources.
    pub fn write_hiberfil(&self, path: &Path, spec: &HiberSpec) -> std::io::Result<HiberTruth> {
        image::hiberfil::write(self, path, spec)
    }

    /// The PFNs a hibernation file of `variant` stores (ascending): what
    /// [`Forged::write_hiberfil`] puts in its sets, without writing it.
    pub fn hiberfil_pfns(&self, variant: HiberVariant) -> Vec<u64> {
        image::hiberfil::stored_pfns(self, variant)
    }

    /// Write a crash dump of this machine that stores exactly `pfns` (any order, duplicates
    /// ignored; each must be in a memory run): the same dump header (DirectoryTableBase,
    /// KdDebuggerDataBlock, memory runs, ...) with DumpType 5 and an `SDMP` bitmap of `pfns`,
    /// pages the forge wrote no content for stored as zero pages. With
    /// `write_dump_of_pages(p, &truth.pfns)` a test compares a hibernation file with the crash
    /// dump of exactly the same memory. Returns the file length.
    pub fn write_dump_of_pages(&self, path: &Path, pfns: &[u64]) -> std::io::Result<u64> {
        let mut sorted = pfns.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if let Some(&bad) = sorted.iter().find(|&&p| !self.pm.in_run(p)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("PFN {bad:#x} is not in a memory run of the machine"),
            ));
        }
        let pm = self.pm.restricted_to(&sorted);
        let layout = Layout::Bitmap {
            sig: BitmapSig::Sdmp,
            dump_type: 5,
        };
        let header_size = self.header_size;
        let placement = dump::layout::place(layout, header_size, &pm);
        let mut prefix = self.file.prefix[..header_size as usize].to_vec();
        dump::header::set_dump_type(
            &mut prefix,
            self.config.arch.is_x64(),
            5,
            placement.file_len,
        );
        prefix.extend_from_slice(&placement.after_header);
        let pages = placement.pages.iter().map(|(off, p)| (*off, &p[..]));
        dump::layout::write_sparse(path, &prefix, pages, placement.file_len)?;
        Ok(placement.file_len)
    }

    /// Where [`Forged::write_image`] puts physical memory for `kind`: one [`ImageRange`] per
    /// run of stored pages (a full dump's memory runs; a bitmap dump's stored pages
    /// coalesced), ascending, with its offset in the file that holds the memory (the raw file,
    /// `.vmem`, `.vmsn` or ELF file).
    pub fn image_ranges(&self, kind: ImageKind) -> Vec<ImageRange> {
        image::ranges(self, kind)
    }

    /// Physical address of the page-table root: the PML4 (x64; `dtb` without its low bits),
    /// the 32-byte-aligned PAE PDPT (= `dtb`) or the non-PAE page directory.
    pub fn page_table_root(&self) -> u64 {
        self.page_table_root
    }

    /// x64: the PML4 index of the self-map entry (`config.self_map_index`); x86: `None` (the
    /// fixed self-map: PAE page directories at 0xC0000000, non-PAE PD[0x300]).
    pub fn self_map_index(&self) -> Option<u64> {
        self.config
            .arch
            .is_x64()
            .then_some(self.config.self_map_index)
    }

    /// What a correct reader returns for `len` bytes at `va`, according to the mappings the
    /// forge made. Addresses the forge did not map read as unreadable (this includes the
    /// page-table self-map region except the one page listed in the probes).
    pub fn expected_read(&self, va: u64, len: usize) -> Expect {
        match self.vmap.read(&self.pm, va, len) {
            Ok(b) => Expect::Bytes(b),
            Err(first) => Expect::Unreadable {
                first_unreadable_va: first,
            },
        }
    }

    /// The physical address the forge mapped `va` to: by a valid or a transition PTE, or by a
    /// large page. `None` where a correct reader finds no translation. The page may still be
    /// absent from the file (see [`Forged::expected_read`]).
    pub fn physical_address(&self, va: u64) -> Option<u64> {
        self.vmap.translate(va)
    }

    /// The address spaces the forge built for processes with user memory (consumers with
    /// queued realtime buffers, [`EtwSpec::with_realtime_buffers`]; every process but System
    /// with [`Config::with_user_images`]), as (PID, PML4 physical address = its
    /// `KPROCESS.DirectoryTableBase`), ascending by PID; empty without those options (every
    /// other process has a made-up DirectoryTableBase with no page tables behind it).
    pub fn user_address_spaces(&self) -> Vec<(u64, u64)> {
        self.user_spaces.iter().map(|u| (u.pid, u.dtb)).collect()
    }

    /// What a correct reader returns for `len` bytes at `va` in the address space whose PML4
    /// is at `dtb` (one of [`Forged::user_address_spaces`]): its user pages, its self-map
    /// page (its own PML4), and otherwise the kernel's mappings (the kernel half is shared).
    /// `None` if `dtb` is not such an address space.
    pub fn expected_user_read(&self, dtb: u64, va: u64, len: usize) -> Option<Expect> {
        let space = self.user_spaces.iter().find(|u| u.dtb == dtb)?;
        Some(
            match dump::user_space::read(space, &self.vmap, &self.pm, va, len) {
                Ok(b) => Expect::Bytes(b),
                Err(first) => Expect::Unreadable {
                    first_unreadable_va: first,
                },
            },
        )
    }

    /// The physical address `va` translates to in the address space whose PML4 is at `dtb`
    /// (see [`Forged::expected_user_read`]); `None` if not mapped or `dtb` is unknown.
    pub fn user_physical_address(&self, dtb: u64, va: u64) -> Option<u64> {
        let space = self.user_spaces.iter().find(|u| u.dtb == dtb)?;
        dump::user_space::translate(space, &self.vmap, va)
    }

    /// The probe named `name`.
    pub fn probe(&self, name: &str) -> Option<&Probe> {
        self.probes.iter().find(|p| p.name == name)
    }

    /// The dump type written in the header (1, 5 or 6).
    pub fn dump_type(&self) -> u32 {
        self.config.layout.dump_type()
    }
}

#[cfg(test)]
mod tests;
