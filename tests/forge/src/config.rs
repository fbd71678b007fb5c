//! What to forge: architecture, file layout and the machine/kernel parameters.

use std::path::Path;

use crate::etw::EtwSpec;
use crate::kernel::fixture::{Fixture, FixtureError};
use crate::util::guid_from_str;

/// Processor architecture / paging mode of the dumped machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// AMD64, 4-level paging, `PAGEDU64` header.
    X64,
    /// x86 with PAE paging (8-byte entries, 4-entry PDPT), `PAGEDUMP` header, PaeEnabled = 1.
    X86Pae,
    /// x86 with classic 2-level paging (4-byte entries), `PAGEDUMP` header, PaeEnabled = 0.
    X86NonPae,
}

impl Arch {
    pub fn is_x64(self) -> bool {
        self == Arch::X64
    }

    /// Short name used in the manifest: "x64", "x86pae" or "x86".
    pub fn name(self) -> &'static str {
        match self {
            Arch::X64 => "x64",
            Arch::X86Pae => "x86pae",
            Arch::X86NonPae => "x86",
        }
    }

    /// Size of a pointer in kernel structures (LIST_ENTRY, UNICODE_STRING.Buffer, ...).
    pub fn ptr_size(self) -> usize {
        if self.is_x64() {
            8
        } else {
            4
        }
    }

    /// Size of the dump header: 0x2000 (`DUMP_HEADER64`) or 0x1000 (`DUMP_HEADER32`), §1.1.
    pub fn header_size(self) -> u64 {
        if self.is_x64() {
            0x2000
        } else {
            0x1000
        }
    }
}

/// Signature of the bitmap summary header (§1.2a).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitmapSig {
    /// `SDMP` (kernel/summary bitmap dump).
    Sdmp,
    /// `FDMP` (full/active bitmap dump).
    Fdmp,
}

impl BitmapSig {
    pub fn magic(self) -> &'static [u8; 4] {
        match self {
            BitmapSig::Sdmp => b"SDMP",
            BitmapSig::Fdmp => b"FDMP",
        }
    }
}

/// How physical memory is stored in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// DumpType 1: every page of every PHYSICAL_MEMORY_DESCRIPTOR run, run after run (§1.2).
    Full,
    /// DumpType 5 or 6: summary header + bitmap at the end of the dump header (§1.2a);
    /// only the pages the forge uses (plus a few filler pages) are stored.
    Bitmap { sig: BitmapSig, dump_type: u32 },
}

impl Layout {
    /// The value written to the header's DumpType field.
    pub fn dump_type(self) -> u32 {
        match self {
            Layout::Full => 1,
            Layout::Bitmap { dump_type, .. } => dump_type,
        }
    }

    pub fn is_bitmap(self) -> bool {
        matches!(self, Layout::Bitmap { .. })
    }
}

/// The x64 PML4 self-reference index of Windows 7 .. 10 1511 (and of every forged dump unless
/// [`Config::self_map_index`] says otherwise).
pub const X64_DEFAULT_SELF_MAP_INDEX: u64 = 0x1ED;

/// Parameters of a forged dump. Start from [`Config::x64`], [`Config::x86_pae`],
/// [`Config::x86_nonpae`] or [`Config::from_fixture`] and change fields.
///
/// `Debug` is written by hand (below) so that a config with the default
/// [`Config::self_map_index`] prints exactly as before the field existed: the golden check
/// (examples/golden.rs) hashes that rendering.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    pub arch: Arch,
    pub layout: Layout,
    /// Header MinorVersion and KUSER_SHARED_DATA.NtBuildNumber (e.g. 19041).
    pub build: u32,
    pub cpus: u32,
    /// Virtual address of the kernel image (x86: a 32-bit value).
    pub kernel_base: u64,
    pub pdb_name: String,
    /// GUID bytes in on-disk order, exactly as in the RSDS record.
    pub pdb_guid: [u8; 16],
    pub pdb_age: u32,
    /// FILETIME: header SystemTime and KUSER_SHARED_DATA.SystemTime.
    pub system_time: u64,
    /// 100 ns units: header SystemUpTime and KUSER_SHARED_DATA.InterruptTime.
    pub system_up_time: u64,
    pub bugcheck_code: u32,
    /// On x86 only the low 32 bits are written.
    pub bugcheck_params: [u64; 4],
    /// false: the KDBG block holds pseudo-random bytes without the `KDBG` tag (an encoded copy).
    pub kdbg_decoded: bool,
    /// Size of the machine's physical memory; a multiple of 1 MiB, at least 16 MiB.
    pub physical_memory_bytes: u64,
    /// The page holding the debug directory and RSDS record is not stored in the dump.
    pub omit_debug_directory_page: bool,
    /// x64 only: bits ORed into the header DirectoryTableBase (PCID-like, e.g. 0x2).
    pub dtb_low_bits: u64,
    /// A fixture kernel (`tests/fixtures/<name>/`) mapped instead of the forge's hand-made PE;
    /// see [`Config::from_fixture`]. `None` (every other constructor): the hand-made kernel.
    /// With a fixture, `build`, `pdb_name`, `pdb_guid`, `pdb_age` and the x86-ness of `arch`
    /// must equal the fixture's (checked by `forge`).
    pub fixture: Option<Fixture>,
    /// ETW logger state (fixture configs only): the logger array where the fixture's kernel
    /// keeps it, sessions, anomalies; see [`EtwSpec`] and [`crate::Forged::etw`]. `None` (every
    /// constructor): nothing is added, the dump is byte-identical to one forged without it.
    pub etw: Option<EtwSpec>,
    /// A process list (x64 fixture configs only): `_EPROCESS`es with their `_ETHREAD`s linked
    /// into PsActiveProcessHead; see [`Config::with_processes`] and [`crate::Forged::processes`].
    /// `false` (every constructor): PsActiveProcessHead stays an empty list and the dump is
    /// byte-identical to one forged without it.
    pub processes: bool,
    /// User memory in the processes (x64 fixtures with `processes`): each process but System
    /// gets its own PML4 with its PEB, loader data (PEB_LDR_DATA and the module lists) and the
    /// images of ntdll.dll (a PE32+ with an export directory, the same physical pages in every
    /// process), the exe, KERNEL32.DLL and KERNELBASE.dll; `EPROCESS.Peb` and
    /// `KPROCESS.DirectoryTableBase` point at them. See [`Config::with_user_images`] and
    /// [`crate::Forged::ntdll`]. `false` (every constructor): nothing is drawn or allocated and
    /// the dump is byte-identical to one forged without it.
    pub user_images: bool,
    /// x64 only: the PML4 index of the page-table self-map (the entry that points at the PML4
    /// itself). Windows 7 .. 10 1511 used 0x1ED ([`X64_DEFAULT_SELF_MAP_INDEX`], every
    /// constructor); from 1607 on Windows draws it at boot among the kernel-half indices
    /// 0x100..0x1FF (0x1FF itself holds the HAL / loader area, and volatility3's DTB scan tries
    /// `range(0x100, 0x1FF)`); the forge accepts 0x100..=0x1FE. [`Config::with_self_map_index`]
    /// sets one, [`Config::with_random_self_map`]
    /// draws one. x86 keeps Windows' fixed self-map (PAE: the four page directories mapped at
    /// 0xC0000000 by PD 3 entries 0..3; non-PAE: PD[0x300]), so x86 configs must leave 0x1ED.
    /// The forge's own kernel-half mappings use PML4 slots 0x141 (pool, KPCRs, probes, ETW),
    /// 0x1C6 (the MmPfnDatabase value), 0x1EF (KUSER_SHARED_DATA) and 0x1F0 (the kernel
    /// image); those are refused ([`FORGE_PML4_SLOTS`]).
    pub self_map_index: u64,
}

/// PML4 slots the forge's fixed virtual-address plan occupies on x64 (pool / KPCR / probe /
/// ETW / process area, the MmPfnDatabase value, KUSER_SHARED_DATA, the kernel image): a
/// self-map there would clash with a mapping, so [`Config::self_map_index`] may not name one.
pub const FORGE_PML4_SLOTS: [u64; 4] = [0x141, 0x1C6, 0x1EF, 0x1F0];

impl std::fmt::Debug for Config {
    /// The derived rendering of every field but `user_images` and `self_map_index`, which are
    /// appended only when they differ from the default (so golden hashes of existing configs
    /// do not change).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Config");
        d.field("arch", &self.arch)
            .field("layout", &self.layout)
            .field("build", &self.build)
            .field("cpus", &self.cpus)
            .field("kernel_base", &self.kernel_base)
            .field("pdb_name", &self.pdb_name)
            .field("pdb_guid", &self.pdb_guid)
            .field("pdb_age", &self.pdb_age)
            .field("system_time", &self.system_time)
            .field("system_up_time", &self.system_up_time)
            .field("bugcheck_code", &self.bugcheck_code)
            .field("bugcheck_params", &self.bugcheck_params)
            .field("kdbg_decoded", &self.kdbg_decoded)
            .field("physical_memory_bytes", &self.physical_memory_bytes)
            .field("omit_debug_directory_page", &self.omit_debug_directory_page)
            .field("dtb_low_bits", &self.dtb_low_bits)
            .field("fixture", &self.fixture)
            .field("etw", &self.etw)
            .field("processes", &self.processes);
        if self.user_images {
            d.field("user_images", &self.user_images);
        }
        if self.self_map_index != X64_DEFAULT_SELF_MAP_INDEX {
            d.field("self_map_index", &self.self_map_index);
        }
        d.finish()
    }
}

/// GUID of the 19041 kernel of the real triage dump D1 (crash-dump-format.md §2.2); the shared
/// JPCERT ISF `5278AFF86C341677D7D7835C85B7B844-1` describes it, and the forge places
/// KdDebuggerDataBlock, PsLoadedModuleList, PsActiveProcessHead, NtBuildLabEx, MmPfnDatabase,
/// KiProcessorBlock and EtwpDebuggerData at that kernel's RVAs.
pub const X64_19041_GUID: &str = "5278AFF8-6C34-1677-D7D7-835C85B7B844";
/// Made-up GUIDs for the x86 kernels (no real x86 PDB is available).
pub const X86_PAE_GUID: &str = "7D4C8A1E-3B52-4F6E-9A0D-2C81B5E7F913";
pub const X86_NONPAE_GUID: &str = "E1A94C27-58D3-4B0F-8E6A-93C2D7F10B45";

/// The session name of [`Config::hostile_etw`].
pub const HOSTILE_NAME: &str = "=HYPERLINK(\"http://x\")\u{1b}[31m\u{7}\u{7f}\u{9b}";
/// The log file of [`Config::hostile_etw`].
pub const HOSTILE_LOG_FILE: &str = "@SUM(A1)\r\nx";

impl Config {
    /// x64 full dump of a 16 MiB, 4-CPU build-19041 machine; header values as in the real
    /// triage dump D1 (bug check 0x1000007E, SystemTime 132583451029877657).
    pub fn x64() -> Self {
        Config {
            arch: Arch::X64,
            layout: Layout::Full,
            build: 19041,
            cpus: 4,
            kernel_base: 0xFFFF_F804_7BA0_0000,
            pdb_name: "ntkrnlmp.pdb".to_string(),
            pdb_guid: guid_from_str(X64_19041_GUID),
            pdb_age: 1,
            system_time: 132_583_451_029_877_657,
            system_up_time: 37_470_697,
            bugcheck_code: 0x1000_007E,
            bugcheck_params: [
                0xFFFF_FFFF_C000_0005,
                0xFFFF_F804_8B58_334C,
                0xFFFF_8504_2989_1EE8,
                0xFFFF_8504_2989_1720,
            ],
            kdbg_decoded: true,
            physical_memory_bytes: 16 << 20,
            omit_debug_directory_page: false,
            dtb_low_bits: 0,
            fixture: None,
            etw: None,
            processes: false,
            user_images: false,
            self_map_index: X64_DEFAULT_SELF_MAP_INDEX,
        }
    }

    /// A machine whose kernel is the fixture in `dir` (`<dir>/symbols.json` and
    /// `<dir>/ntoskrnl.exe`, e.g. tests/fixtures/x64-19041): [`Config::x64`] (a full dump,
    /// DumpType 1) or, for an x86 fixture, [`Config::x86_pae`], with the build number and the
    /// PDB name/GUID/age of symbols.json. Everything else (memory layout, probes, KUSER, header) is
    /// as for those configs. Panics if the fixture cannot be loaded; see
    /// [`Config::try_from_fixture`].
    pub fn from_fixture(dir: &Path) -> Self {
        Self::try_from_fixture(dir).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Config::from_fixture`] returning the load error instead of panicking.
    pub fn try_from_fixture(dir: &Path) -> Result<Self, FixtureError> {
        Fixture::load(dir).map(Self::with_fixture)
    }

    /// [`Config::from_fixture`] for an already loaded fixture.
    pub fn with_fixture(fixture: Fixture) -> Self {
        let base = if fixture.x64 {
            Config::x64()
        } else {
            Config::x86_pae()
        };
        Config {
            build: fixture.build,
            pdb_name: fixture.pdb_name.clone(),
            pdb_guid: fixture.pdb_guid,
            pdb_age: fixture.pdb_age,
            fixture: Some(fixture),
            ..base
        }
    }

    /// This config with ETW logger state `spec` (needs a fixture kernel).
    pub fn with_etw(self, spec: EtwSpec) -> Self {
        Config {
            etw: Some(spec),
            ..self
        }
    }

    /// This config with a process list (x64 fixture kernels whose types.h has `_EPROCESS`,
    /// `_ETHREAD`, `_CLIENT_ID`): System (PID 4), smss.exe, svchost.exe and explorer.exe
    /// ([`crate::STANDARD_PROCESSES`]) in pool, linked through `ActiveProcessLinks` into
    /// PsActiveProcessHead, each with its threads on `ThreadListHead`; see
    /// [`crate::Forged::processes`].
    pub fn with_processes(self) -> Self {
        Config {
            processes: true,
            ..self
        }
    }

    /// This config with the processes ([`Config::with_processes`]) and their user memory
    /// ([`Config::user_images`]: PEB, loader data, ntdll.dll and the other images in each
    /// process's own address space; x64 fixtures; see `kernel/user_images.rs` and
    /// [`crate::Forged::ntdll`]).
    pub fn with_user_images(self) -> Self {
        Config {
            processes: true,
            user_images: true,
            ..self
        }
    }

    /// This config with the x64 PML4 self-map at `index` (0x100..=0x1FE, not one of
    /// [`FORGE_PML4_SLOTS`]; checked by `forge`).
    pub fn with_self_map_index(self, index: u64) -> Self {
        Config {
            self_map_index: index,
            ..self
        }
    }

    /// This config with a self-map index drawn as Windows 1607+ does at boot: from the seed
    /// of [`Config::with_variation`] when the config has one, else from seed 0, in
    /// 0x100..=0x1FE without [`FORGE_PML4_SLOTS`] (see
    /// [`crate::variation::random_self_map_index`]). Opt-in, not part of `with_variation`:
    /// moving the self-map rewrites the PML4, which would change every golden variation dump.
    /// x64 only (x86 keeps its fixed self-map; this returns x86 configs unchanged).
    pub fn with_random_self_map(self) -> Self {
        if !self.arch.is_x64() {
            return self;
        }
        let seed = crate::etw::variation::of(&self).map_or(0, |v| v.seed);
        let index = crate::etw::variation::random_self_map_index(seed);
        self.with_self_map_index(index)
    }

    /// This config with [`EtwSpec::standard`] for its build (needs a fixture kernel).
    pub fn with_standard_etw(self) -> Self {
        let spec = EtwSpec::standard(self.build);
        self.with_etw(spec)
    }

    /// x86 PAE full dump (kernel `ntkrpamp.pdb` at 0x82A00000).
    /// The committed sample (tests/data/sample-x64.dmp): x64 bitmap dump (SDMP, type 5),
    /// build 19041, KASLR base, the real 19041 kernel's PDB GUID/age
    /// (5278AFF8-6C34-1677-D7D7-835C85B7B844, age 1).
    /// The committed ETW sample (tests/data/sample-x64-etw.dmp): the 19041 fixture kernel
    /// (tests/fixtures/x64-19041) in an x64 bitmap dump (SDMP, type 5) with the standard ETW
    /// sessions and their buffers (every BufferSize capped at 16 KiB), pending CCSWAP blocks
    /// and the standard processes, so the README's first command (`overview`) and the others
    /// work on a fresh clone with `--pdb tests/fixtures/x64-19041/ntkrnlmp.pdb`.
    pub fn sample_etw() -> Self {
        let dir = crate::kernel::fixture::default_fixtures_root().join("x64-19041");
        let mut c = Config::from_fixture(&dir);
        c.layout = Layout::Bitmap {
            sig: BitmapSig::Sdmp,
            dump_type: 5,
        };
        let mut etw = crate::EtwSpec::standard(c.build)
            .with_buffers(c.build)
            .with_pending_ccswap()
            .with_buffer_size_cap(0x4000);
        // Real-time consumers: EventLog-System read by the event log's svchost.exe, the
        // session in slot 6 by svchost.exe and explorer.exe.
        for (slot, pids) in [(3u32, vec![0x44Cu64]), (6, vec![0x44C, 0x12E4])] {
            if let Some(crate::SlotSpec::Session(s)) = etw.slots.get_mut(&slot) {
                s.consumers = pids;
            }
        }
        // Providers (the standard set: the kernel's handles and a few user-mode providers of
        // the processes, some enabled by the sessions).
        c.etw = Some(etw.with_providers());
        c.with_processes()
    }

    /// [`Config::sample_etw`] with hostile text in memory: session slot 4 named
    /// `=HYPERLINK("http://x")` + ESC `[31m` + BEL + DEL + U+009B (a one-character CSI), its
    /// log file `@SUM(A1)` CR LF `x` (formula prefixes and control characters a reader must
    /// not pass to a terminal or spreadsheet raw).
    pub fn hostile_etw() -> Self {
        let mut c = Config::sample_etw();
        if let Some(crate::SlotSpec::Session(s)) = c.etw.as_mut().and_then(|e| e.slots.get_mut(&4))
        {
            s.name = HOSTILE_NAME.to_string();
            s.log_file = Some(HOSTILE_LOG_FILE.to_string());
        }
        c
    }

    pub fn sample() -> Self {
        Config {
            layout: Layout::Bitmap {
                sig: BitmapSig::Sdmp,
                dump_type: 5,
            },
            ..Config::x64()
        }
    }

    pub fn x86_pae() -> Self {
        Config {
            arch: Arch::X86Pae,
            kernel_base: 0x82A0_0000,
            pdb_name: "ntkrpamp.pdb".to_string(),
            pdb_guid: guid_from_str(X86_PAE_GUID),
            pdb_age: 1,
            bugcheck_params: [0xC000_0005, 0x82B1_F34C, 0x8C5E_7A18, 0x8C5E_7730],
            ..Config::x64()
        }
    }

    /// x86 non-PAE full dump (kernel `ntoskrnl.pdb` at 0x82A00000).
    pub fn x86_nonpae() -> Self {
        Config {
            arch: Arch::X86NonPae,
            pdb_name: "ntoskrnl.pdb".to_string(),
            pdb_guid: guid_from_str(X86_NONPAE_GUID),
            pdb_age: 2,
            ..Config::x86_pae()
        }
    }

    /// Symbol-store key of the kernel PDB (GUID + age), e.g. "5278AFF86C341677D7D7835C85B7B8441".
    pub fn pdb_symbol_key(&self) -> String {
        crate::util::pdb_symbol_key(&self.pdb_guid, self.pdb_age)
    }

    fn validate_self_map(&self) {
        let i = self.self_map_index;
        if self.arch.is_x64() {
            assert!(
                (0x100..=0x1FE).contains(&i) && !FORGE_PML4_SLOTS.contains(&i),
                "self_map_index {i:#x}: must be a kernel-half PML4 index 0x100..=0x1FE other \
                 than the forge's own slots {FORGE_PML4_SLOTS:#x?}"
            );
        } else {
            assert_eq!(
                i, X64_DEFAULT_SELF_MAP_INDEX,
                "self_map_index is x64 only (x86 has Windows' fixed self-map)"
            );
        }
    }

    pub(crate) fn validate(&self) {
        let mib = 1u64 << 20;
        assert!(
            self.physical_memory_bytes >= 16 * mib
                && self.physical_memory_bytes.is_multiple_of(mib),
            "physical_memory_bytes must be a multiple of 1 MiB and at least 16 MiB"
        );
        assert!(self.cpus >= 1 && self.cpus <= 256, "cpus must be 1..=256");
        assert_eq!(
            self.kernel_base & 0xFFFF,
            0,
            "kernel_base must be 64 KiB aligned"
        );
        if let Layout::Bitmap { dump_type, .. } = self.layout {
            assert!(
                dump_type == 5 || dump_type == 6,
                "bitmap dumps have DumpType 5 or 6"
            );
        }
        match self.arch {
            Arch::X64 => {
                assert!(
                    self.kernel_base >= 0xFFFF_F800_0000_0000,
                    "x64 kernel_base must be in the system image range 0xFFFFF800..."
                );
                assert!(
                    self.dtb_low_bits < 0x1000,
                    "dtb_low_bits must be below 0x1000"
                );
            }
            Arch::X86Pae | Arch::X86NonPae => {
                assert!(
                    (0x8000_0000..0x8500_0000).contains(&self.kernel_base),
                    "x86 kernel_base must be a 32-bit value in 0x80000000..0x85000000 \
                     (pool and probe areas of the forge start at 0x86000000)"
                );
                assert_eq!(self.dtb_low_bits, 0, "dtb_low_bits is x64 only");
            }
        }
        self.validate_self_map();
        assert!(
            self.etw.is_none() || self.fixture.is_some(),
            "Config::etw needs a fixture kernel (Config::from_fixture)"
        );
        assert!(
            !self.processes || self.fixture.is_some() && self.arch == Arch::X64,
            "Config::processes needs an x64 fixture kernel (Config::from_fixture)"
        );
        assert!(
            !self.user_images || self.processes,
            "Config::user_images needs the processes (Config::with_user_images)"
        );
        let write_patch = self
            .etw
            .iter()
            .flat_map(|e| e.tampering.iter().flat_map(|t| t.kinds.iter()))
            .any(|k| matches!(k, crate::TamperKind::WritePatch(_)));
        assert!(
            !write_patch || self.user_images,
            "tampering {} needs Config::with_user_images",
            crate::CheckId::EtwWritePatch
        );
        if let Some(fx) = &self.fixture {
            assert_eq!(
                fx.x64,
                self.arch.is_x64(),
                "fixture {} does not match arch {:?}",
                fx.name,
                self.arch
            );
            assert!(
                self.build == fx.build
                    && self.pdb_name == fx.pdb_name
                    && self.pdb_guid == fx.pdb_guid
                    && self.pdb_age == fx.pdb_age,
                "with fixture {} the build and the PDB name/GUID/age are the fixture's",
                fx.name
            );
            let slots =
                fx.storage_len("KiProcessorBlock").unwrap_or(0) as usize / self.arch.ptr_size();
            assert!(
                self.cpus as usize <= slots,
                "fixture {}: KiProcessorBlock holds {slots} entries, cpus = {}",
                fx.name,
                self.cpus
            );
            if let Err(e) = fx.extras() {
                panic!("fixture {}: {e}", fx.name);
            }
        }
    }
}
