//! Tampered variants ([`crate::EtwSpec::with_tampering`]): the ETW state a rootkit leaves, each
//! with the finding a checker must report ([`ExpectedFinding`]).
//!
//! A tampered dump is its clean twin (the same config without `tampering`) with a few bytes
//! changed and, where the tampering needs new memory (a garbage block, hook code), pages mapped
//! after every other page of the dump ([`crate::etw::EtwBuild::late_pages`]), so that no other
//! page moves: read by virtual address, the twins differ exactly in
//! [`ExpectedFinding::changed`]. Every clean dump (every spec without `tampering`) has no
//! findings.
//!
//! | check | what the forge does | `address` |
//! |---|---|---|
//! | `reg-handle-null` | zeroes `EtwThreatIntProvRegHandle` (where the build has it; else the Kernel-Process handle); the kernel registration stays on its GUID entry | the global |
//! | `reg-handle-invalid` | points `EtwKernelProvRegHandle` at a pool block tagged 'EtwR' holding random bytes (mapped late): not an `_ETW_REG_ENTRY` of a GUID entry on the table | the global |
//! | `provider-enable-state` | zeroes `ProviderEnableInfo.IsEnabled` of the Threat-Intelligence GUID entry (else Kernel-Process) while its `EnableInfo` slot still enables it for a live session | the GUID entry |
//! | `enable-unknown-logger` | adds an enabled `EnableInfo` slot (LoggerId = the lowest free slot of the logger array) to a provider no session enables, with the aggregate and the registrations' EnableMask bit to match | the GUID entry |
//! | `clock-hook` | redirects the CKCL's (else the first session's) `GetCpuClock`: pointer era to a late pool block holding `rdtsc; ...; ret`, outside the image; integer era to that kernel address instead of an index | the logger context |
//! | `clock-hook` ([`TamperKind::ClockIndex`]) | integer era only: sets that `GetCpuClock` to an index 4..=0xFF, which EtwpGetLoggerTimeStamp rejects (it dispatches 0-3 and fails fast above) | the logger context |
//! | `consumer-mode` | clears EVENT_TRACE_REAL_TIME_MODE (0x100) in the LoggerMode of a session with real-time consumers on its `Consumers` list (needs the forged processes: x64) | the logger context |
//! | `etw-write-patch` | [`TamperKind::WritePatch`]: a process's view of ntdll's `EtwEventWrite` family patched (a private copy of a code page, or the shared page itself), or a private copy with identical bytes, or a code page not in the dump (needs [`Config::with_user_images`]; applied by `kernel/user_images.rs`, which documents each [`WritePatch`]) | the patched function's VA |

use super::loggers::LoggerBuilder;
use super::provider_guids as pg;
use super::providers::{ExpectedProvider, ProvidersOut};
use super::*;
/// The checks' ids, shared with etwdump (a crate of their own: the forge does not depend on
/// the reader).
pub use etwdump_check_ids::CheckId;

/// One kind of tampering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TamperKind {
    RegHandleNull,
    RegHandleInvalid,
    ProviderEnableState,
    EnableUnknownLogger,
    ClockHook,
    /// `clock-hook` on an integer-era layout (19041+): the CKCL's (else the first session's)
    /// `GetCpuClock` set to this index, which a clean kernel never holds: its time-stamp
    /// routine (EtwpGetLoggerTimeStamp) accepts 0-3 and fails fast above (issue 26, public
    /// decompilations). Values 4..=0xFF; not in [`TamperKind::ALL`] (tests draw the values).
    ClockIndex(u8),
    ConsumerMode,
    /// `etw-write-patch`: ntdll's `EtwEventWrite` family in the processes' user memory
    /// ([`Config::with_user_images`]); see [`WritePatch`] for each variant and its findings.
    WritePatch(WritePatch),
}

/// The variants of [`TamperKind::WritePatch`] (written by `kernel/user_images.rs`, whose module
/// documentation gives the processes, functions, bytes and findings of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WritePatch {
    /// explorer.exe: a private copy of EtwEventWrite's code page with `C3` (ret) at it.
    Ret,
    /// svchost.exe: EtwEventWriteEx begins `33 C0 C3` (xor eax,eax; ret) on a private copy.
    XorEaxRet,
    /// explorer.exe: EtwEventWriteTransfer begins `C2 14 00` (ret 0x14) on a private copy.
    Ret14,
    /// smss.exe: NtTraceEvent begins `48 33 C0 C3` (xor rax,rax; ret) on a private copy.
    XorRaxRet,
    /// svchost.exe: EtwEventWriteString begins `B8 00 00 00 00 C3` (mov eax,0; ret) on a
    /// private copy.
    MovEaxRet,
    /// svchost.exe: a private copy of the code page of EtwEventWriteString,
    /// EtwEventWriteNoRegistration and EtwWriteUMSecurityEvent with identical bytes: no finding.
    BenignCopy,
    /// The shared code page itself: `C3` at EtwEventWriteFull in every process; one finding.
    SharedPage,
    /// smss.exe: the code page of EtwEventWrite mapped by a valid PTE to a frame not in the
    /// dump: no finding (the reader reports the page as not in the dump).
    Unreadable,
}

impl WritePatch {
    pub const ALL: [WritePatch; 8] = [
        WritePatch::Ret,
        WritePatch::XorEaxRet,
        WritePatch::Ret14,
        WritePatch::XorRaxRet,
        WritePatch::MovEaxRet,
        WritePatch::BenignCopy,
        WritePatch::SharedPage,
        WritePatch::Unreadable,
    ];

    /// The variant's name in scenario names (`fixture-<name>-tampered-etw-write-patch-<name>`).
    pub fn name(self) -> &'static str {
        match self {
            WritePatch::Ret => "ret",
            WritePatch::XorEaxRet => "xor-eax-ret",
            WritePatch::Ret14 => "ret-14",
            WritePatch::XorRaxRet => "xor-rax-ret",
            WritePatch::MovEaxRet => "mov-eax-ret",
            WritePatch::BenignCopy => "benign-copy",
            WritePatch::SharedPage => "shared-page",
            WritePatch::Unreadable => "unreadable",
        }
    }

    /// How many findings a checker must report for this variant (1, or 0 for `BenignCopy` and
    /// `Unreadable`).
    pub fn findings(self) -> usize {
        match self {
            WritePatch::BenignCopy | WritePatch::Unreadable => 0,
            _ => 1,
        }
    }
}

impl TamperKind {
    /// The kinds on kernel ETW state (not [`TamperKind::WritePatch`], which needs user images:
    /// see [`TamperKind::WRITE_PATCHES`]).
    pub const ALL: [TamperKind; 6] = [
        TamperKind::RegHandleNull,
        TamperKind::RegHandleInvalid,
        TamperKind::ProviderEnableState,
        TamperKind::EnableUnknownLogger,
        TamperKind::ClockHook,
        TamperKind::ConsumerMode,
    ];

    /// Every [`TamperKind::WritePatch`] variant (check `etw-write-patch`).
    pub const WRITE_PATCHES: [TamperKind; 8] = [
        TamperKind::WritePatch(WritePatch::Ret),
        TamperKind::WritePatch(WritePatch::XorEaxRet),
        TamperKind::WritePatch(WritePatch::Ret14),
        TamperKind::WritePatch(WritePatch::XorRaxRet),
        TamperKind::WritePatch(WritePatch::MovEaxRet),
        TamperKind::WritePatch(WritePatch::BenignCopy),
        TamperKind::WritePatch(WritePatch::SharedPage),
        TamperKind::WritePatch(WritePatch::Unreadable),
    ];

    /// The check id a checker reports ([`ExpectedFinding::check`]).
    pub fn check(self) -> CheckId {
        match self {
            TamperKind::RegHandleNull => CheckId::RegHandleNull,
            TamperKind::RegHandleInvalid => CheckId::RegHandleInvalid,
            TamperKind::ProviderEnableState => CheckId::ProviderEnableState,
            TamperKind::EnableUnknownLogger => CheckId::EnableUnknownLogger,
            TamperKind::ClockHook | TamperKind::ClockIndex(_) => CheckId::ClockHook,
            TamperKind::ConsumerMode => CheckId::ConsumerMode,
            TamperKind::WritePatch(_) => CheckId::EtwWritePatch,
        }
    }

    /// The kind's name in scenario names: its check id, and for [`TamperKind::WritePatch`]
    /// `etw-write-patch-<variant>` ([`WritePatch::name`]).
    pub fn name(self) -> String {
        match self {
            TamperKind::WritePatch(w) => format!("{}-{}", CheckId::EtwWritePatch, w.name()),
            TamperKind::ClockIndex(v) => format!("clock-index-{v:#x}"),
            k => k.check().to_string(),
        }
    }

    /// How many findings a checker must report for this kind alone (1; a [`WritePatch`]'s
    /// [`WritePatch::findings`]).
    pub fn findings(self) -> usize {
        match self {
            TamperKind::WritePatch(w) => w.findings(),
            _ => 1,
        }
    }

    /// Whether `cfg` (a fixture config with providers, e.g. [`providers_config`]) can carry
    /// this tampering: `consumer-mode` needs real-time consumers, so the forged processes (x64
    /// fixtures); `etw-write-patch` needs the user images ([`Config::with_user_images`]); the
    /// others apply to every fixture (the four provider kinds need
    /// [`EtwSpec::with_providers`]).
    pub fn applies_to(self, cfg: &Config) -> bool {
        match self {
            TamperKind::ConsumerMode => cfg.processes,
            TamperKind::WritePatch(_) => cfg.user_images,
            // GetCpuClock is an index from 19041 on (the forge's clock encoding).
            TamperKind::ClockIndex(_) => cfg.build >= 19041,
            // The handle kinds, and the enable state of the kernel providers they register,
            // need kernel `Etw*RegHandle` globals (x64-26100 has none: its layout source has no
            // symbol list).
            TamperKind::RegHandleNull
            | TamperKind::RegHandleInvalid
            | TamperKind::ProviderEnableState => cfg
                .fixture
                .as_ref()
                .is_some_and(|f| !super::providers::handle_names(f).is_empty()),
            _ => true,
        }
    }
}

/// [`EtwSpec::tampering`]: the kinds to apply (each once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TamperSpec {
    pub kinds: Vec<TamperKind>,
}

impl TamperSpec {
    /// Exactly one kind.
    pub fn one(kind: TamperKind) -> TamperSpec {
        TamperSpec { kinds: vec![kind] }
    }
}

impl EtwSpec {
    /// This spec with the tampering of `t` applied after everything else is placed (the
    /// provider kinds need [`EtwSpec::with_providers`]; `consumer-mode` needs a session with
    /// real-time consumers). [`ForgedEtw::findings`] says what a checker must report.
    pub fn with_tampering(mut self, t: TamperSpec) -> EtwSpec {
        self.tampering = Some(t);
        self
    }
}

/// What a checker must report for a tampered dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedFinding {
    /// The check that reports it.
    pub check: CheckId,
    /// The object the finding is about: the handle global, the GUID entry or the logger
    /// context; for `etw-write-patch` the patched function's (user) VA.
    pub address: u64,
    pub detail: String,
    /// The bytes the tampering changed or added (VA, length): read by VA, the dump differs from
    /// its clean twin exactly inside these ranges. For `etw-write-patch` these are user VAs of
    /// the patched process (of every process for the shared page) and
    /// [`crate::ExpectedNtdll::patches`] says which.
    pub changed: Vec<(u64, usize)>,
}

/// The clean providers config of a fixture: [`EtwSpec::standard`] with the standard providers;
/// on x64 fixtures whose layouts allow it also the processes with their user images (ntdll
/// mapped in every process but System: [`Config::with_user_images`]) and, as in
/// [`Config::sample_etw`], real-time consumers (EventLog-System by svchost.exe, UBPM by
/// svchost.exe and explorer.exe).
pub fn providers_config(dir: &std::path::Path) -> Config {
    let mut c = Config::from_fixture(dir);
    let fx = c.fixture.as_ref().expect("fixture");
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    let processes = crate::etw::variation::processes_supported(&c, &t);
    let mut etw = EtwSpec::standard(c.build);
    if processes {
        for (slot, pids) in [(3u32, vec![0x44Cu64]), (6, vec![0x44C, 0x12E4])] {
            if let Some(SlotSpec::Session(s)) = etw.slots.get_mut(&slot) {
                s.consumers = pids;
            }
        }
        c.processes = true;
        c.user_images = crate::kernel::user_images::user_images_supported(&c);
    }
    c.etw = Some(etw.with_providers());
    c
}

/// Per fixture below `root`: the clean twin `fixture-<name>-etw-providers` and one tampered
/// variant `fixture-<name>-tampered-<name>` ([`TamperKind::name`]) per kind of
/// [`TamperKind::ALL`] and [`TamperKind::WRITE_PATCHES`] that applies
/// ([`TamperKind::applies_to`]).
pub fn tamper_scenarios(root: &std::path::Path) -> Vec<(String, Config)> {
    let mut out = Vec::new();
    for d in crate::fixture_dirs(root) {
        let clean = providers_config(&d);
        let name = clean
            .fixture
            .as_ref()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        out.push((format!("fixture-{name}-etw-providers"), clean.clone()));
        for k in TamperKind::ALL.into_iter().chain(TamperKind::WRITE_PATCHES) {
            if k.applies_to(&clean) {
                let mut c = clean.clone();
                c.etw = c.etw.map(|e| e.with_tampering(TamperSpec::one(k)));
                out.push((format!("fixture-{name}-tampered-{}", k.name()), c));
            }
        }
    }
    out
}

/// Apply `spec` (after every other object is placed): returns the findings and the late pages.
pub(super) fn apply(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    spec: &TamperSpec,
    mut prov: Option<&mut ProvidersOut>,
) -> (Vec<ExpectedFinding>, Vec<EtwPage>) {
    let mut late = Pool::new(b.x64, b.plan.late, 0x1_0000);
    let mut findings = Vec::new();
    for &k in &spec.kinds {
        let f = match k {
            // Applied to the user images after every kernel mapping (`kernel/user_images.rs`).
            TamperKind::WritePatch(_) => continue,
            TamperKind::RegHandleNull => handle_null(b, img, need(&mut prov, k)),
            TamperKind::RegHandleInvalid => handle_invalid(b, img, need(&mut prov, k), &mut late),
            TamperKind::ProviderEnableState => enable_state(b, need(&mut prov, k)),
            TamperKind::EnableUnknownLogger => unknown_logger(b, need(&mut prov, k)),
            TamperKind::ClockHook => clock_hook(b, &mut late),
            TamperKind::ClockIndex(v) => clock_index(b, v),
            TamperKind::ConsumerMode => consumer_mode(b),
        };
        findings.push(f);
    }
    let pages = if late.holds(b.plan.late, 1) {
        late.into_pages()
    } else {
        Vec::new()
    };
    (findings, pages)
}

/// The providers a provider tampering needs.
fn need<'a>(prov: &'a mut Option<&mut ProvidersOut>, k: TamperKind) -> &'a mut ProvidersOut {
    prov.as_deref_mut()
        .unwrap_or_else(|| panic!("tampering {}: needs EtwSpec::with_providers", k.check()))
}

/// The handle of the first provider named in `names` that holds a registration on the table.
fn handle_of(prov: &ProvidersOut, names: &[&str]) -> usize {
    names
        .iter()
        .find_map(|n| {
            prov.handles
                .iter()
                .position(|h| h.provider.as_deref() == Some(n) && h.reg_entry.is_some())
        })
        .unwrap_or_else(|| panic!("tampering: no registered handle of {names:?}"))
}

/// The handle no longer names its registration.
fn unname(prov: &mut ProvidersOut, handle: &str) {
    for r in prov
        .providers
        .iter_mut()
        .flat_map(|p| p.registrations.iter_mut())
    {
        if r.handle.as_deref() == Some(handle) {
            r.handle = None;
        }
    }
}

fn handle_null(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    prov: &mut ProvidersOut,
) -> ExpectedFinding {
    let i = handle_of(
        prov,
        &[pg::THREAT_INTELLIGENCE.name, pg::KERNEL_PROCESS.name],
    );
    let h = prov.handles[i].clone();
    write_var(img, b.fx, &h.name, 0, &ptr_bytes(b.ptr, 0));
    prov.handles[i].value = 0;
    prov.handles[i].reg_entry = None;
    unname(prov, &h.name);
    ExpectedFinding {
        check: TamperKind::RegHandleNull.check(),
        address: h.va,
        detail: format!(
            "{} is NULL while the GUID entry of {} ({}) still holds its kernel registration {:#x}",
            h.name,
            h.provider.as_deref().unwrap_or("?"),
            h.guid.as_deref().unwrap_or("?"),
            h.value
        ),
        changed: vec![(h.va, b.ptr)],
    }
}

fn handle_invalid(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    prov: &mut ProvidersOut,
    late: &mut Pool,
) -> ExpectedFinding {
    let i = handle_of(prov, &[pg::KERNEL_GENERAL.name, pg::KERNEL_PROCESS.name]);
    let h = prov.handles[i].clone();
    let size = b.lay.size("_ETW_REG_ENTRY");
    let block = late.alloc(size, b"EtwR");
    let mut rng = Rng::new(0x6A_5B_4C_3D_2E_1F ^ block);
    rng.fill(late.slice_mut(block, size));
    write_var(img, b.fx, &h.name, 0, &ptr_bytes(b.ptr, block));
    prov.handles[i].value = block;
    prov.handles[i].reg_entry = None;
    unname(prov, &h.name);
    let hdr = late.header_size() as u64;
    ExpectedFinding {
        check: TamperKind::RegHandleInvalid.check(),
        address: h.va,
        detail: format!(
            "{} points at {block:#x}, a pool block tagged 'EtwR' of random bytes, not an \
             _ETW_REG_ENTRY of a GUID entry on the table ({}'s registration is {:#x})",
            h.name,
            h.provider.as_deref().unwrap_or("?"),
            h.value
        ),
        changed: vec![(h.va, b.ptr), (block - hdr, size + hdr as usize)],
    }
}

/// Index of the first trace-type provider named in `names` that a live session enables.
fn enabled_provider(prov: &ProvidersOut, names: &[&str]) -> usize {
    names
        .iter()
        .find_map(|n| {
            prov.providers.iter().position(|p| {
                p.name == *n
                    && p.guid_type == providers::ETW_TRACE_GUID_TYPE
                    && !p.enable_slots.is_empty()
            })
        })
        .unwrap_or_else(|| panic!("tampering: no enabled provider among {names:?}"))
}

/// VA of `field` of the `_TRACE_ENABLE_INFO` at `tei`.
fn tei_field(b: &LoggerBuilder, tei: u64, field: &str) -> u64 {
    tei + b.lay.off("_TRACE_ENABLE_INFO", field)
}

fn enable_state(b: &mut LoggerBuilder, prov: &mut ProvidersOut) -> ExpectedFinding {
    let i = enabled_provider(
        prov,
        &[pg::THREAT_INTELLIGENCE.name, pg::KERNEL_PROCESS.name],
    );
    let p = &mut prov.providers[i];
    let pei = p.guid_entry_va + b.lay.off("_ETW_GUID_ENTRY", "ProviderEnableInfo");
    let at = tei_field(b, pei, "IsEnabled");
    b.pool.slice_mut(at, 4).copy_from_slice(&0u32.to_le_bytes());
    p.aggregate.is_enabled = 0;
    let s = &p.enable_slots[0];
    ExpectedFinding {
        check: TamperKind::ProviderEnableState.check(),
        address: p.guid_entry_va,
        detail: format!(
            "ProviderEnableInfo.IsEnabled of {} ({}) is 0 while EnableInfo[{}] enables it for the \
             live session {} (level {}, MatchAnyKeyword {:#x})",
            p.name,
            p.guid,
            s.index.unwrap_or(0),
            s.logger_id,
            s.level,
            s.match_any
        ),
        changed: vec![(at, 4)],
    }
}

fn unknown_logger(b: &mut LoggerBuilder, prov: &mut ProvidersOut) -> ExpectedFinding {
    let (id, value) = b
        .expected
        .iter()
        .enumerate()
        .find_map(|(i, s)| match s {
            ExpectedSlot::Free { value } => Some((i as u16, *value)),
            _ => None,
        })
        .expect("tampering: no free slot in the logger array");
    let i = prov
        .providers
        .iter()
        .position(|p| p.guid_type == providers::ETW_TRACE_GUID_TYPE && p.enable_slots.is_empty())
        .or_else(|| prov.providers.iter().position(|p| p.enable_slots.len() < 8))
        .expect("tampering: no provider with a free EnableInfo slot");
    let lay = &b.lay;
    let p: &mut ExpectedProvider = &mut prov.providers[i];
    let index = p.enable_slots.len() as u8;
    let slot = providers::ExpectedEnableInfo {
        index: Some(index),
        is_enabled: 1,
        level: 5,
        logger_id: id,
        match_any: 0xFFFF_FFFF_FFFF_FFFF,
        match_all: 0,
        enable_property: 0,
    };
    let tei = lay.size("_TRACE_ENABLE_INFO");
    let ge = "_ETW_GUID_ENTRY";
    let ei = p.guid_entry_va + lay.off(ge, "EnableInfo") + tei as u64 * u64::from(index);
    let pei = p.guid_entry_va + lay.off(ge, "ProviderEnableInfo");
    lay.put_enable_info(b.pool.slice_mut(ei, tei), 0, &slot);
    p.enable_slots.push(slot);
    let on = p.enable_slots.clone();
    p.aggregate = providers::aggregate(&on);
    lay.put_enable_info(b.pool.slice_mut(pei, tei), 0, &p.aggregate);
    let mut changed = vec![(ei, tei), (pei, tei)];
    let em = lay.off("_ETW_REG_ENTRY", "EnableMask");
    for r in &mut p.registrations {
        r.enable_mask |= 1 << index;
        b.pool.slice_mut(r.va + em, 1)[0] = r.enable_mask;
        changed.push((r.va + em, 1));
    }
    ExpectedFinding {
        check: TamperKind::EnableUnknownLogger.check(),
        address: p.guid_entry_va,
        detail: format!(
            "EnableInfo[{index}] of {} ({}) enables it for LoggerId {id}, whose logger-array \
             slot is free ({value:#x})",
            p.name, p.guid
        ),
        changed,
    }
}

/// The code of the hook: `rdtsc; shl rdx, 32; or rax, rdx; ret` (x64), `rdtsc; ret` (x86).
fn hook_code(x64: bool) -> &'static [u8] {
    if x64 {
        &[0x0F, 0x31, 0x48, 0xC1, 0xE2, 0x20, 0x48, 0x09, 0xD0, 0xC3]
    } else {
        &[0x0F, 0x31, 0xC3]
    }
}

/// The slot whose `GetCpuClock` a clock tampering changes: the CKCL's (slot 2), else the
/// first session's.
fn clock_victim(b: &LoggerBuilder) -> usize {
    let pick = |slot: usize, s: &ExpectedSlot| match s {
        ExpectedSlot::Session(x) if x.get_cpu_clock.is_some() => Some(slot),
        _ => None,
    };
    pick(
        2,
        b.expected
            .get(2)
            .unwrap_or(&ExpectedSlot::Free { value: 1 }),
    )
    .or_else(|| b.expected.iter().enumerate().find_map(|(i, s)| pick(i, s)))
    .expect("tampering clock-hook: no session")
}

fn clock_index(b: &mut LoggerBuilder, v: u8) -> ExpectedFinding {
    assert!(v > 3, "clock index {v} is one a clean kernel holds");
    let i = clock_victim(b);
    let ExpectedSlot::Session(s) = &mut b.expected[i] else {
        unreachable!("picked a session")
    };
    assert!(
        s.clock_routine.is_none(),
        "clock-index tampering needs an integer GetCpuClock (19041+)"
    );
    let field = s.context_va + b.lay.off(CTX, "GetCpuClock");
    let size = b.t.field_size(CTX, "GetCpuClock").expect("GetCpuClock") as usize;
    let old = s.get_cpu_clock.expect("clock");
    let mut bytes = vec![0u8; size];
    bytes[0] = v;
    b.pool.slice_mut(field, size).copy_from_slice(&bytes);
    let detail = format!(
        "GetCpuClock of session {} is {v:#x}, a clock index the kernel never stores (clean: {old} \
         for ClockType {})",
        s.logger_id,
        s.clock_type.unwrap_or(0)
    );
    s.get_cpu_clock = Some(u64::from(v));
    ExpectedFinding {
        check: TamperKind::ClockIndex(v).check(),
        address: s.context_va,
        detail,
        changed: vec![(field, size)],
    }
}

fn clock_hook(b: &mut LoggerBuilder, late: &mut Pool) -> ExpectedFinding {
    let i = clock_victim(b);
    let code = hook_code(b.x64);
    let block = late.alloc(0x10, b"Hook");
    late.slice_mut(block, code.len()).copy_from_slice(code);
    let hdr = late.header_size() as u64;
    let ExpectedSlot::Session(s) = &mut b.expected[i] else {
        unreachable!("picked a session")
    };
    let field = s.context_va + b.lay.off(CTX, "GetCpuClock");
    let size = b.t.field_size(CTX, "GetCpuClock").expect("GetCpuClock") as usize;
    let pointer = s.clock_routine.is_some();
    let old = s.get_cpu_clock.expect("clock");
    b.pool
        .slice_mut(field, size)
        .copy_from_slice(&block.to_le_bytes()[..size]);
    let detail = if pointer {
        format!(
            "GetCpuClock of session {} is {block:#x}, outside the kernel image (a pool block \
             holding code), not {} ({old:#x}) of ClockType {}",
            s.logger_id,
            s.clock_routine.as_deref().unwrap_or("?"),
            s.clock_type.unwrap_or(0)
        )
    } else {
        format!(
            "GetCpuClock of session {} is {block:#x}, a kernel address instead of a clock index \
             (clean: {old} for ClockType {})",
            s.logger_id,
            s.clock_type.unwrap_or(0)
        )
    };
    s.get_cpu_clock = Some(block);
    s.clock_routine = None;
    ExpectedFinding {
        check: TamperKind::ClockHook.check(),
        address: s.context_va,
        detail,
        changed: vec![(field, size), (block - hdr, 0x10 + hdr as usize)],
    }
}

fn consumer_mode(b: &mut LoggerBuilder) -> ExpectedFinding {
    let s = b
        .expected
        .iter_mut()
        .find_map(|s| match s {
            ExpectedSlot::Session(x)
                if !x.consumers.is_empty() && x.logger_mode & EVENT_TRACE_REAL_TIME_MODE != 0 =>
            {
                Some(x)
            }
            _ => None,
        })
        .expect(
            "tampering consumer-mode: no session with real-time consumers (x64 with processes)",
        );
    s.logger_mode &= !EVENT_TRACE_REAL_TIME_MODE;
    let field = s.context_va + b.lay.off(CTX, "LoggerMode");
    b.pool
        .slice_mut(field, 4)
        .copy_from_slice(&s.logger_mode.to_le_bytes());
    ExpectedFinding {
        check: TamperKind::ConsumerMode.check(),
        address: s.context_va,
        detail: format!(
            "session {} has LoggerMode {:#x} without EVENT_TRACE_REAL_TIME_MODE (0x100) while {} \
             real-time consumers are on its Consumers list",
            s.logger_id,
            s.logger_mode,
            s.consumers.len()
        ),
        changed: vec![(field, 4)],
    }
}
