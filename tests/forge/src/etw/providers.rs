//! Providers and registrations ([`crate::EtwSpec::with_providers`]): the kernel's GUID hash
//! table, `_ETW_GUID_ENTRY`s with their enable state, `_ETW_REG_ENTRY`s of kernel and user-mode
//! registrations, and the `Etw*RegHandle` globals that name the kernel's own registrations.
//!
//! | era (fixtures) | table | element |
//! |---|---|---|
//! | 7601, 9600 | the global `EtwpGuidHashTable` (.data; the fixture gives it 64 x 0x38 bytes) | undocumented: 64 [`TableShape::Buckets`] (3 LIST_ENTRY heads + a pointer-sized lock, stride 7 pointers) or 64 [`TableShape::ListHeads`] (one LIST_ENTRY each); buckets unless the spec or the variation says otherwise |
//! | 1607+ (x64-14393, x86-14393, 17763, 17763b, 18362, 19041, 20348, 22000) | `_ETW_SILODRIVERSTATE.EtwpGuidHashTable[64]` of the host silo state | `_ETW_HASH_BUCKET` { `ListHead[3]`, `BucketLock` } (types.h) |
//!
//! Facts and their standing (confirmed / inferred / chosen):
//!
//! * **Where** [C]: etw-internals.md §1.1 (EtwpGuidHashTable[64] in the silo state), anchors.md
//!   (DRAKVUF etwmon: "64 buckets x 3 list heads"). One list per `_ETW_GUID_TYPE`:
//!   EtwTraceGuidType 0, EtwNotificationGuidType 1, EtwGroupGuidType 2 (the enum of every ISF /
//!   corpus entry of 1607+ in shared/; it is not in the fixtures' types.h, hence the constants
//!   below). Decompiled `EtwpAddGuidEntry` (the public pseudocode index etw-internals.md cites as
//!   S16; builds with the global table and with the silo table at +0x598 / +0x1D0 / +0x2D0) picks
//!   the list `bucket + 16 * type` and inserts a new entry at the head.
//! * **Bucket** [C for those builds]: the same code hashes `(Data1 ^ dw1 ^ dw2 ^ dw3) & 0x3F` over
//!   the GUID's four little-endian DWORDs ([`guid_hash_bucket`]). The forge uses it everywhere
//!   ([`BucketRule::XorHash`]) except in the varied sets of 7601 / 9600, whose code is not
//!   decompiled anywhere public: there the variation draws [`BucketRule::Drawn`] (a seeded bucket
//!   per GUID) in half of the dumps. [`ExpectedProvider::bucket`] always records it.
//! * **7601 / 9600 element** [I]: not in their PDBs; both ISFs put the next symbol exactly 0xE00
//!   = 64 x 0x38 bytes after the table, which fits the bucket shape (default); the list-head
//!   shape is forged too ([`ProvidersSpec::table_shape`], the variation), recorded in
//!   [`ExpectedGuidTable::shape`].
//! * **`_ETW_GUID_ENTRY`** [C]: NonPagedPoolNx, tag 'EtwG' (decompiled `EtwpAllocGuidEntry`:
//!   `ExAllocatePoolWithTag(NonPagedPoolNx, 0x190, 'EtwG')`, Windows 11 `ExAllocatePool2(.., 0x1A8,
//!   'EtwG')`), RefCount starts at 1, RegListHead an empty list, SiloState the silo. The forge
//!   writes RefCount = 1 + registrations [I], `Guid`, `RegListHead` (its registrations'
//!   `RegList`, in spec order), `EnableInfo[i]` per enabling session (IsEnabled 1, Level,
//!   LoggerId, MatchAnyKeyword, MatchAllKeyword, EnableProperty), `ProviderEnableInfo` as the
//!   aggregate of the enabled slots — IsEnabled 1 if any is, Level the highest, MatchAnyKeyword
//!   the OR, MatchAllKeyword the AND, EnableProperty the OR: **inferred** (what a provider must
//!   see to write every event some session wants; not read from kernel code) — `SiloState`
//!   where the layout has it, every other LIST_ENTRY (19041+: `SiloGuidList`) an empty list.
//! * **`_ETW_REG_ENTRY`** [choice for the tag]: pool tag 'EtwR' (the object type is
//!   "EtwRegistration"; the forge writes no `_OBJECT_HEADER`, as for the consumers). `RegList`,
//!   `GuidEntry`, `Index` (position on the GUID entry's list) [choice], the `Dbg*` flag bits where
//!   the layout has them (DbgKernelRegistration or DbgUserRegistration, DbgModernRegistration,
//!   DbgInserted) [I], `EnableMask` (bit i per enabled `EnableInfo[i]` that applies to the
//!   registration: all of them unless the spec narrows it), and per kind: user-mode —
//!   `Process` = the EPROCESS (offset from types.h: it shares its place with `CallbackContext`,
//!   on 7601 with `Callback`); kernel — `Callback` inside the image's .text and `CallbackContext`
//!   a small 'EtwK' pool block holding the GUID [choice]. `GroupRegList` is an empty list;
//!   `GroupEntry`, `GroupEnableMask`, `HostEnableMask` (19041+), `UseDescriptorType`, `Traits`,
//!   `Caller` / `SessionId` / `ReplySlot` are 0 [choice]; the aggregate's LoggerId is 0.
//! * **Handles** [C / I, see `provider_guids.rs`]: each `Etw*RegHandle` global holds the address
//!   of the kernel `_ETW_REG_ENTRY` registered with it.
//! * Every list head of the table that holds no entry is an empty list (Flink = Blink = &head),
//!   as the kernel initialises them; the bucket locks are 0.

use std::collections::BTreeMap;

use super::loggers::LoggerBuilder;
use super::provider_guids::{self as pg, KnownProvider};
use super::*;
use crate::etw::variation::VarRng;

/// `_ETW_GUID_TYPE` (ISF / corpus enum of 1607+; absent from types.h).
pub const ETW_TRACE_GUID_TYPE: u32 = 0;
pub const ETW_NOTIFICATION_GUID_TYPE: u32 = 1;
pub const ETW_GROUP_GUID_TYPE: u32 = 2;

const GE: &str = "_ETW_GUID_ENTRY";
const RE: &str = "_ETW_REG_ENTRY";
const TEI: &str = "_TRACE_ENABLE_INFO";
const BUCKET: &str = "_ETW_HASH_BUCKET";
/// Buckets in every GUID table.
pub const GUID_TABLE_BUCKETS: u32 = 64;

/// The element of the 7601 / 9600 global table (undocumented).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableShape {
    /// One LIST_ENTRY per bucket (stride 2 pointers); every GUID type shares it.
    ListHeads,
    /// The later `_ETW_HASH_BUCKET`: 3 LIST_ENTRY heads (one per GUID type) and a pointer-sized
    /// push lock (stride 7 pointers: 0x38 on x64).
    Buckets,
}

impl TableShape {
    /// "list-heads" / "buckets" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            TableShape::ListHeads => "list-heads",
            TableShape::Buckets => "buckets",
        }
    }
}

/// How GUIDs were assigned to buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BucketRule {
    /// The kernel's hash ([`guid_hash_bucket`]) or the spec's explicit bucket.
    XorHash,
    /// A seeded bucket per GUID (variation mode, 7601 / 9600 only).
    Drawn,
}

impl BucketRule {
    /// "xor-hash" / "drawn" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            BucketRule::XorHash => "xor-hash",
            BucketRule::Drawn => "drawn",
        }
    }
}

/// The bucket decompiled `EtwpAddGuidEntry` computes: the XOR of the GUID's four little-endian
/// DWORDs, low 6 bits (`guid` in on-disk byte order).
pub fn guid_hash_bucket(guid: &[u8; 16]) -> u32 {
    let d = |i: usize| u32::from_le_bytes(guid[4 * i..4 * i + 4].try_into().expect("4"));
    (d(0) ^ d(1) ^ d(2) ^ d(3)) & (GUID_TABLE_BUCKETS - 1)
}

/// Who registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registrant {
    /// A kernel-mode registration (`EtwRegister`); `handle` names the `Etw*RegHandle` global
    /// that holds it, if any (the fixture must have that public).
    Kernel { handle: Option<String> },
    /// A user-mode registration by the process `pid` (one of [`crate::Config::with_processes`]').
    User { pid: u64 },
}

/// One `_ETW_REG_ENTRY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationSpec {
    pub registrant: Registrant,
    /// `EnableMask`: None = every enabled slot; Some(m) must be a subset of them.
    pub enable_mask: Option<u8>,
}

/// One `EnableInfo[i]` slot (i = its position in [`ProviderSpec::enables`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnableSpec {
    /// The enabling session's LoggerId (its slot; a live session in every clean spec).
    pub logger_id: u16,
    pub level: u8,
    pub match_any: u64,
    pub match_all: u64,
    pub enable_property: u32,
}

/// One `_ETW_GUID_ENTRY` and its registrations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The provider's manifest name (recorded, not written to memory).
    pub name: String,
    /// On-disk GUID bytes (see [`crate::guid_from_str`]).
    pub guid: [u8; 16],
    /// `_ETW_GUID_TYPE`: [`ETW_TRACE_GUID_TYPE`], [`ETW_NOTIFICATION_GUID_TYPE`],
    /// [`ETW_GROUP_GUID_TYPE`] (< the number of lists per bucket).
    pub guid_type: u32,
    pub registrations: Vec<RegistrationSpec>,
    /// Up to 8 enabled `EnableInfo` slots, in slot order.
    pub enables: Vec<EnableSpec>,
    /// None: the kernel's hash (or, [`BucketRule::Drawn`], a drawn one).
    pub bucket: Option<u32>,
}

/// Which providers to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderSet {
    /// The standard set, resolved at forge time from the fixture's handles, the spec's sessions
    /// and the forged processes (see [`EtwSpec::with_providers`]).
    Standard,
    /// A set drawn from this seed (see [`EtwSpec::with_varied_providers`]).
    Varied(u64),
    /// Exactly these.
    List(Vec<ProviderSpec>),
}

/// [`EtwSpec::providers`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvidersSpec {
    pub set: ProviderSet,
    /// 7601 / 9600 (the global table) only: its element shape. None: buckets, or (varied set)
    /// drawn. Must be None or `Buckets` on 1607+ (the layout's `_ETW_HASH_BUCKET`).
    pub table_shape: Option<TableShape>,
}

impl EtwSpec {
    /// This spec with the standard provider set (resolved at forge time):
    ///
    /// * a kernel registration for every `Etw*RegHandle` of the fixture whose provider a public
    ///   source names (`provider_guids.rs`), held by that global; enabled: Kernel-General by
    ///   EventLog-System (slot 3, level 4, MatchAny 0x8000000000000000), Kernel-Process by
    ///   WdiContextLog (slot 4, level 4, 0x10), Threat-Intelligence by EventLog-System (level 4,
    ///   0x15), Kernel-Network by LwtNetLog (slot 5, level 5, 0x30) — where those sessions are
    ///   in the spec; the others enabled by none;
    /// * with the forged processes ([`crate::Config::with_processes`], x64): Microsoft-Windows-
    ///   Eventlog by svchost.exe (enabled by EventLog-System), Microsoft-Windows-RPC by
    ///   svchost.exe and explorer.exe (enabled by LwtNetLog and UBPM; explorer's EnableMask has
    ///   only LwtNetLog's bit), Microsoft-Windows-Shell-Core by explorer.exe (enabled by none), and
    ///   where buckets have 3 lists a notification-type entry for the Eventlog GUID registered by
    ///   svchost.exe (enabled by none).
    ///
    /// Levels and keywords are plausible values chosen for the forge, not measured ones.
    pub fn with_providers(mut self) -> EtwSpec {
        self.providers = Some(ProvidersSpec {
            set: ProviderSet::Standard,
            table_shape: None,
        });
        self
    }

    /// This spec with a provider set drawn from `seed` (variation mode): the kernel handles'
    /// providers (each in 90% of dumps), 0-10 user-mode providers of the forged processes
    /// (real names and GUIDs, then drawn ones), GUID types 0 / 1 / 2 where buckets have 3
    /// lists, 1-4 registrations, 0-8 enabled slots by distinct live sessions with drawn levels
    /// and keywords, narrowed EnableMasks; on 7601 / 9600 the table shape and the bucket rule.
    pub fn with_varied_providers(mut self, seed: u64) -> EtwSpec {
        self.providers = Some(ProvidersSpec {
            set: ProviderSet::Varied(seed),
            table_shape: None,
        });
        self
    }

    /// This spec with exactly `spec`'s providers.
    pub fn with_provider_spec(mut self, spec: ProvidersSpec) -> EtwSpec {
        self.providers = Some(spec);
        self
    }
}

impl crate::Config {
    /// This config's ETW spec with providers: the set drawn from the variation seed when the
    /// config has one ([`crate::Config::with_variation`]), else the standard set. Needs
    /// [`crate::Config::etw`].
    pub fn with_providers(mut self) -> crate::Config {
        let seed = crate::etw::variation::of(&self).map(|v| v.seed);
        let etw = self
            .etw
            .take()
            .expect("Config::with_providers needs an ETW spec (with_standard_etw, with_variation)");
        self.etw = Some(match seed {
            Some(s) => etw.with_varied_providers(s),
            None => etw.with_providers(),
        });
        self
    }
}

// ------------------------------------------------------------------------------------------
// Expectations

/// The GUID hash table as placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedGuidTable {
    /// Address of bucket 0.
    pub va: u64,
    /// The global `EtwpGuidHashTable` (7601, 9600) or the silo state's.
    pub global: bool,
    pub shape: TableShape,
    pub buckets: u32,
    /// Bytes per bucket.
    pub stride: u64,
    /// LIST_ENTRY heads per bucket (one per GUID type; 1 for list heads).
    pub lists: u32,
    /// Offset of the first head in a bucket, and of the lock (None: no lock).
    pub list_offset: u64,
    pub lock_offset: Option<u64>,
    pub rule: BucketRule,
}

impl ExpectedGuidTable {
    /// Address of the list head for (`bucket`, `list`).
    pub fn head(&self, bucket: u32, list: u32, ptr: u64) -> u64 {
        self.va + u64::from(bucket) * self.stride + self.list_offset + u64::from(list) * 2 * ptr
    }
}

/// A `_TRACE_ENABLE_INFO` as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedEnableInfo {
    /// Its `EnableInfo` index (None: the aggregate `ProviderEnableInfo`).
    pub index: Option<u8>,
    pub is_enabled: u32,
    pub level: u8,
    pub logger_id: u16,
    pub match_any: u64,
    pub match_all: u64,
    pub enable_property: u32,
}

/// One `_ETW_REG_ENTRY` as placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedRegistration {
    pub va: u64,
    pub kernel: bool,
    /// User-mode: the registering process.
    pub pid: Option<u64>,
    pub eprocess: Option<u64>,
    /// Kernel: `Callback` (in the image's .text) and `CallbackContext`.
    pub callback: Option<u64>,
    pub callback_context: Option<u64>,
    pub index: u16,
    /// `Flags` where the layout has the `Dbg*` bits.
    pub flags: Option<u16>,
    pub enable_mask: u8,
    /// The `Etw*RegHandle` global holding this entry's address.
    pub handle: Option<String>,
}

/// One `_ETW_GUID_ENTRY` as placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedProvider {
    pub name: String,
    /// "XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX".
    pub guid: String,
    pub guid_entry_va: u64,
    pub guid_type: u32,
    pub bucket: u32,
    /// The list head (bucket, type) the entry is linked into.
    pub list_head_va: u64,
    pub ref_count: u64,
    /// In `RegListHead` order.
    pub registrations: Vec<ExpectedRegistration>,
    /// The enabled `EnableInfo` slots (the others are zero).
    pub enable_slots: Vec<ExpectedEnableInfo>,
    /// `ProviderEnableInfo`.
    pub aggregate: ExpectedEnableInfo,
    /// `SiloState` as written (None where the layout has no such field).
    pub silo_state: Option<u64>,
}

/// One `Etw*RegHandle` global of the fixture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedRegHandle {
    pub name: String,
    /// The global's address.
    pub va: u64,
    /// What it holds (0: NULL).
    pub value: u64,
    /// The provider a public source says it registers (None: unknown, left NULL).
    pub provider: Option<String>,
    pub guid: Option<String>,
    /// The `_ETW_REG_ENTRY` it holds when that is a registration on the table.
    pub reg_entry: Option<u64>,
}

// ------------------------------------------------------------------------------------------
// Resolving the set

/// What placing needs besides the providers: the table and the rule.
pub(super) struct Resolved {
    pub providers: Vec<ProviderSpec>,
    pub rule: BucketRule,
    /// Drawn buckets (rule Drawn): index i -> bucket of providers[i].
    pub drawn: Vec<u32>,
}

/// The `Etw*RegHandle` publics of the fixture (the names extra_globals.py adds).
pub(super) fn handle_names(fx: &crate::kernel::fixture::Fixture) -> Vec<String> {
    fx.symbols
        .keys()
        .filter(|n| n.starts_with("Etw") && n.ends_with("RegHandle"))
        .cloned()
        .collect()
}

/// The sessions of the spec a provider can be enabled by: LoggerId (= slot) of every live
/// session.
fn live_sessions(spec: &EtwSpec) -> Vec<u16> {
    spec.slots
        .iter()
        .filter(|(_, c)| matches!(c, SlotSpec::Session(_)))
        .map(|(s, _)| *s as u16)
        .collect()
}

fn known(p: KnownProvider) -> (String, [u8; 16]) {
    (p.name.to_string(), crate::util::guid_from_str(p.guid))
}

fn enable(logger_id: u16, level: u8, match_any: u64) -> EnableSpec {
    EnableSpec {
        logger_id,
        level,
        match_any,
        match_all: 0,
        enable_property: 0,
    }
}

fn kernel_reg(handle: Option<String>) -> RegistrationSpec {
    RegistrationSpec {
        registrant: Registrant::Kernel { handle },
        enable_mask: None,
    }
}

fn user_reg(pid: u64, enable_mask: Option<u8>) -> RegistrationSpec {
    RegistrationSpec {
        registrant: Registrant::User { pid },
        enable_mask,
    }
}

const SVCHOST: u64 = 0x44C;
const EXPLORER: u64 = 0x12E4;

/// The standard set (see [`EtwSpec::with_providers`]).
fn standard_set(b: &LoggerBuilder, lists: u32) -> Vec<ProviderSpec> {
    let live = live_sessions(b.spec);
    let by = |slot: u16, level: u8, any: u64| -> Vec<EnableSpec> {
        if live.contains(&slot) {
            vec![enable(slot, level, any)]
        } else {
            Vec::new()
        }
    };
    let mut out = Vec::new();
    for h in handle_names(b.fx) {
        let Some(kp) = pg::provider_of_handle(&h) else {
            continue;
        };
        let enables = match kp.name {
            n if n == pg::KERNEL_GENERAL.name => by(3, 4, 0x8000_0000_0000_0000),
            n if n == pg::KERNEL_PROCESS.name => by(4, 4, 0x10),
            n if n == pg::THREAT_INTELLIGENCE.name => by(3, 4, 0x15),
            n if n == pg::KERNEL_NETWORK.name => by(5, 5, 0x30),
            _ => Vec::new(),
        };
        let (name, guid) = known(kp);
        out.push(ProviderSpec {
            name,
            guid,
            guid_type: ETW_TRACE_GUID_TYPE,
            registrations: vec![kernel_reg(Some(h))],
            enables,
            bucket: None,
        });
    }
    let procs = [SVCHOST, EXPLORER];
    if procs.iter().all(|p| b.eprocess.contains_key(p)) {
        let user =
            |kp: KnownProvider, ty: u32, regs: Vec<RegistrationSpec>, en: Vec<EnableSpec>| {
                let (name, guid) = known(kp);
                ProviderSpec {
                    name,
                    guid,
                    guid_type: ty,
                    registrations: regs,
                    enables: en,
                    bucket: None,
                }
            };
        out.push(user(
            pg::EVENTLOG,
            ETW_TRACE_GUID_TYPE,
            vec![user_reg(SVCHOST, None)],
            by(3, 4, 0x8000_0000_0000_0000),
        ));
        let mut rpc_en = by(5, 5, 0x1);
        rpc_en.extend(by(6, 2, 0));
        let explorer_mask = (!rpc_en.is_empty()).then_some(1u8);
        out.push(user(
            pg::RPC,
            ETW_TRACE_GUID_TYPE,
            vec![user_reg(SVCHOST, None), user_reg(EXPLORER, explorer_mask)],
            rpc_en,
        ));
        out.push(user(
            pg::SHELL_CORE,
            ETW_TRACE_GUID_TYPE,
            vec![user_reg(EXPLORER, None)],
            Vec::new(),
        ));
        if lists > ETW_NOTIFICATION_GUID_TYPE {
            out.push(user(
                pg::EVENTLOG,
                ETW_NOTIFICATION_GUID_TYPE,
                vec![user_reg(SVCHOST, None)],
                Vec::new(),
            ));
        }
    }
    out
}

/// Salt of the provider draws (independent of the variation's other draws).
const SALT_PROVIDERS: u64 = 0x9A0F_1DE5_0000_0005;

/// A drawn set (see [`EtwSpec::with_varied_providers`]).
fn varied_set(b: &LoggerBuilder, lists: u32, rng: &mut VarRng) -> Vec<ProviderSpec> {
    let live = live_sessions(b.spec);
    let pids: Vec<u64> = {
        let mut v: Vec<u64> = b.eprocess.keys().copied().collect();
        v.sort_unstable();
        v
    };
    let draw_enables = |rng: &mut VarRng| -> Vec<EnableSpec> {
        let n = (rng.below(9) as usize).min(live.len());
        let mut pool = live.clone();
        (0..n)
            .map(|_| {
                let i = rng.below(pool.len() as u64) as usize;
                let logger_id = pool.remove(i);
                EnableSpec {
                    logger_id,
                    level: rng.pick(&[1, 2, 3, 4, 4, 5, 5, 0xFF]),
                    match_any: match rng.below(4) {
                        0 => 0,
                        1 => u64::MAX,
                        2 => 1 << rng.below(64),
                        _ => rng.next_u64() & 0xFFFF_0000_0000_FFFF,
                    },
                    match_all: if rng.chance(20) {
                        1 << rng.below(16)
                    } else {
                        0
                    },
                    enable_property: if rng.chance(15) { 0x40 } else { 0 },
                }
            })
            .collect()
    };
    let draw_type = |rng: &mut VarRng| -> u32 {
        if lists > ETW_GROUP_GUID_TYPE && rng.chance(20) {
            rng.pick(&[ETW_NOTIFICATION_GUID_TYPE, ETW_GROUP_GUID_TYPE])
        } else {
            ETW_TRACE_GUID_TYPE
        }
    };
    let narrow = |rng: &mut VarRng, en: &[EnableSpec]| -> Option<u8> {
        let all = ((1u16 << en.len()) - 1) as u8;
        (all != 0 && rng.chance(25)).then(|| all & (rng.next_u64() as u8))
    };
    let mut out = Vec::new();
    for h in handle_names(b.fx) {
        let Some(kp) = pg::provider_of_handle(&h) else {
            continue;
        };
        if !rng.chance(90) {
            continue;
        }
        let (name, guid) = known(kp);
        let enables = draw_enables(rng);
        let mut registrations = vec![RegistrationSpec {
            registrant: Registrant::Kernel { handle: Some(h) },
            enable_mask: narrow(rng, &enables),
        }];
        // Sometimes a second kernel registration of the same provider (no handle).
        if rng.chance(10) {
            registrations.push(kernel_reg(None));
        }
        out.push(ProviderSpec {
            name,
            guid,
            guid_type: ETW_TRACE_GUID_TYPE,
            registrations,
            enables,
            bucket: None,
        });
    }
    if !pids.is_empty() {
        let n = rng.below(11);
        for k in 0..n {
            let (name, guid) = match pg::USER_PROVIDERS.get(k as usize) {
                Some(&kp) => known(kp),
                None => (
                    format!("Etwdump-Forge-Provider-{k}"),
                    crate::etw::variation::draw_guid(rng),
                ),
            };
            let enables = draw_enables(rng);
            let regs = (0..rng.range(1, 4))
                .map(|_| RegistrationSpec {
                    registrant: if rng.chance(15) {
                        Registrant::Kernel { handle: None }
                    } else {
                        Registrant::User {
                            pid: rng.pick(&pids),
                        }
                    },
                    enable_mask: narrow(rng, &enables),
                })
                .collect();
            out.push(ProviderSpec {
                name,
                guid,
                guid_type: draw_type(rng),
                registrations: regs,
                enables,
                bucket: None,
            });
        }
    }
    // Notification / group entries carry no enable state.
    for p in &mut out {
        if p.guid_type != ETW_TRACE_GUID_TYPE {
            p.enables.clear();
            for r in &mut p.registrations {
                r.enable_mask = None;
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Placing

/// Where the table is and its element layout.
struct Table {
    exp: ExpectedGuidTable,
    /// Size of the table in bytes (64 buckets).
    size: usize,
}

fn locate_table(
    b: &LoggerBuilder,
    shape: Option<TableShape>,
    varied: bool,
    rng: &mut VarRng,
) -> Table {
    let ptr = b.ptr as u64;
    if let (Some(silo), true) = (b.silo_va, b.t.has_field(SILO, "EtwpGuidHashTable")) {
        assert!(
            matches!(shape, None | Some(TableShape::Buckets)),
            "fixture {}: the silo state's table has _ETW_HASH_BUCKET elements",
            b.fx.name
        );
        let count =
            b.t.member(SILO, "EtwpGuidHashTable")
                .and_then(|m| m.count)
                .expect("EtwpGuidHashTable[N]");
        assert_eq!(count, u64::from(GUID_TABLE_BUCKETS));
        let lists =
            b.t.member(BUCKET, "ListHead")
                .and_then(|m| m.count)
                .expect("_ETW_HASH_BUCKET.ListHead[N]") as u32;
        let stride = b.lay.size(BUCKET) as u64;
        return Table {
            exp: ExpectedGuidTable {
                va: silo + b.lay.off(SILO, "EtwpGuidHashTable"),
                global: false,
                shape: TableShape::Buckets,
                buckets: GUID_TABLE_BUCKETS,
                stride,
                lists,
                list_offset: b.lay.off(BUCKET, "ListHead"),
                lock_offset: b.t.offset_of(BUCKET, "BucketLock"),
                rule: BucketRule::XorHash,
            },
            size: (stride * count) as usize,
        };
    }
    let va = b.va_of("EtwpGuidHashTable").unwrap_or_else(|| {
        panic!(
            "fixture {}: no GUID table (no _ETW_SILODRIVERSTATE.EtwpGuidHashTable and no global \
             EtwpGuidHashTable; rebuild the fixtures)",
            b.fx.name
        )
    });
    let shape = shape.unwrap_or(if varied && rng.chance(50) {
        TableShape::ListHeads
    } else {
        TableShape::Buckets
    });
    let (stride, lists, lock) = match shape {
        TableShape::ListHeads => (2 * ptr, 1, None),
        TableShape::Buckets => (7 * ptr, 3, Some(6 * ptr)),
    };
    let size = (stride * u64::from(GUID_TABLE_BUCKETS)) as usize;
    let room = b.fx.storage_len("EtwpGuidHashTable").unwrap_or(0) as usize;
    assert!(
        room >= size,
        "fixture {}: EtwpGuidHashTable has {room:#x} bytes, {size:#x} needed",
        b.fx.name
    );
    let rule = if varied && rng.chance(50) {
        BucketRule::Drawn
    } else {
        BucketRule::XorHash
    };
    Table {
        exp: ExpectedGuidTable {
            va,
            global: true,
            shape,
            buckets: GUID_TABLE_BUCKETS,
            stride,
            lists,
            list_offset: 0,
            lock_offset: lock,
            rule,
        },
        size,
    }
}

/// Everything placed (what the tampering and the expectations need).
pub(super) struct ProvidersOut {
    pub table: ExpectedGuidTable,
    pub providers: Vec<ExpectedProvider>,
    pub handles: Vec<ExpectedRegHandle>,
}

/// Addresses of one provider's objects (pass 1).
struct Placed {
    entry: u64,
    regs: Vec<u64>,
    contexts: Vec<Option<u64>>,
    bucket: u32,
    list: u32,
}

/// Place the providers of `ps` (after every other ETW object of the pool).
pub(super) fn place(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    ps: &ProvidersSpec,
) -> ProvidersOut {
    let seed = match ps.set {
        ProviderSet::Varied(s) => Some(s),
        _ => None,
    };
    let mut rng = VarRng::new(seed.unwrap_or(0) ^ SALT_PROVIDERS ^ (u64::from(b.cfg.build) << 40));
    let table = locate_table(b, ps.table_shape, seed.is_some(), &mut rng);
    let providers = match &ps.set {
        ProviderSet::Standard => standard_set(b, table.exp.lists),
        ProviderSet::Varied(_) => varied_set(b, table.exp.lists, &mut rng),
        ProviderSet::List(v) => v.clone(),
    };
    let drawn: Vec<u32> = providers
        .iter()
        .map(|_| rng.below(u64::from(GUID_TABLE_BUCKETS)) as u32)
        .collect();
    let r = Resolved {
        providers,
        rule: table.exp.rule,
        drawn,
    };
    check_specs(b, &r, &table.exp);
    // Pass 1: allocate (entry, its registrations, kernel callback contexts), in spec order.
    let placed: Vec<Placed> = r
        .providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let entry = b.pool.alloc(b.lay.size(GE), b"EtwG");
            let mut regs = Vec::new();
            let mut contexts = Vec::new();
            for reg in &p.registrations {
                regs.push(b.pool.alloc(b.lay.size(RE), b"EtwR"));
                contexts.push(match reg.registrant {
                    Registrant::Kernel { .. } => Some(b.pool.alloc(0x10, b"EtwK")),
                    Registrant::User { .. } => None,
                });
            }
            let bucket = match (p.bucket, r.rule) {
                (Some(bk), _) => bk,
                (None, BucketRule::XorHash) => guid_hash_bucket(&p.guid),
                (None, BucketRule::Drawn) => r.drawn[i],
            };
            let list = if table.exp.shape == TableShape::ListHeads {
                0
            } else {
                p.guid_type
            };
            Placed {
                entry,
                regs,
                contexts,
                bucket,
                list,
            }
        })
        .collect();
    // The lists: the kernel inserts at the head, so the last placed entry comes first.
    let mut lists: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    for p in placed.iter().rev() {
        lists.entry((p.bucket, p.list)).or_default().push(p.entry);
    }
    write_table(b, img, &table, &lists);
    let mut kernel_ordinal = 0u64;
    let mut out = Vec::new();
    for (p, pl) in r.providers.iter().zip(&placed) {
        out.push(write_provider(
            b,
            p,
            pl,
            &table.exp,
            &lists,
            &mut kernel_ordinal,
        ));
    }
    let handles = write_handles(b, img, &mut out);
    ProvidersOut {
        table: table.exp,
        providers: out,
        handles,
    }
}

fn check_specs(b: &LoggerBuilder, r: &Resolved, table: &ExpectedGuidTable) {
    let live = live_sessions(b.spec);
    let handles = handle_names(b.fx);
    let mut used_handles = Vec::new();
    for p in &r.providers {
        assert!(
            p.enables.len() <= 8,
            "{}: more than 8 EnableInfo slots",
            p.name
        );
        assert!(
            p.guid_type < table.lists.max(3),
            "{}: GUID type {} has no list",
            p.name,
            p.guid_type
        );
        if let Some(bk) = p.bucket {
            assert!(bk < GUID_TABLE_BUCKETS, "{}: bucket {bk}", p.name);
        }
        for e in &p.enables {
            assert!(
                live.contains(&e.logger_id),
                "{}: EnableInfo for LoggerId {} which is no live session of the spec",
                p.name,
                e.logger_id
            );
        }
        let all = ((1u16 << p.enables.len()) - 1) as u8;
        for reg in &p.registrations {
            if let Some(m) = reg.enable_mask {
                assert_eq!(
                    m & !all,
                    0,
                    "{}: EnableMask {m:#x} beyond the enabled slots",
                    p.name
                );
            }
            match &reg.registrant {
                Registrant::User { pid } => assert!(
                    b.eprocess.contains_key(pid),
                    "{}: user-mode registration of PID {pid:#x} needs that process \
                     (Config::with_processes, x64 fixtures)",
                    p.name
                ),
                Registrant::Kernel { handle: Some(h) } => {
                    assert!(
                        handles.contains(h),
                        "fixture {} has no public {h}",
                        b.fx.name
                    );
                    assert!(
                        !used_handles.contains(h),
                        "handle {h} names two registrations"
                    );
                    used_handles.push(h.clone());
                }
                Registrant::Kernel { handle: None } => {}
            }
        }
    }
}

/// Every head of the table: the lists of `lists`, the others empty.
fn write_table(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    table: &Table,
    lists: &BTreeMap<(u32, u32), Vec<u64>>,
) {
    let t = &table.exp;
    let ptr = b.ptr as u64;
    let link = b.lay.off(GE, "GuidList");
    let mut bytes = vec![0u8; table.size];
    for bucket in 0..t.buckets {
        for list in 0..t.lists {
            let head = t.head(bucket, list, ptr);
            let off = (head - t.va) as usize;
            match lists.get(&(bucket, list)) {
                Some(v) => {
                    let (first, last) = (v[0] + link, v[v.len() - 1] + link);
                    b.lay.put_list(&mut bytes, off, first, last);
                }
                None => b.lay.put_list(&mut bytes, off, head, head),
            }
        }
    }
    if t.global {
        write_var(img, b.fx, "EtwpGuidHashTable", 0, &bytes);
    } else {
        b.pool.slice_mut(t.va, bytes.len()).copy_from_slice(&bytes);
    }
}

/// The aggregate of the enabled slots (inferred, see the module docs).
pub(super) fn aggregate(slots: &[ExpectedEnableInfo]) -> ExpectedEnableInfo {
    let on: Vec<&ExpectedEnableInfo> = slots.iter().filter(|s| s.is_enabled != 0).collect();
    ExpectedEnableInfo {
        index: None,
        is_enabled: u32::from(!on.is_empty()),
        level: on.iter().map(|s| s.level).max().unwrap_or(0),
        logger_id: 0,
        match_any: on.iter().fold(0, |a, s| a | s.match_any),
        match_all: if on.is_empty() {
            0
        } else {
            on.iter().fold(u64::MAX, |a, s| a & s.match_all)
        },
        enable_property: on.iter().fold(0, |a, s| a | s.enable_property),
    }
}

impl Layouts<'_> {
    /// A `_TRACE_ENABLE_INFO` at `off` of `obj`.
    pub(super) fn put_enable_info(&self, obj: &mut [u8], off: usize, e: &ExpectedEnableInfo) {
        let size = self.size(TEI);
        let s = &mut obj[off..off + size];
        self.put(s, TEI, "IsEnabled", e.is_enabled.into());
        self.put(s, TEI, "Level", e.level.into());
        self.put(s, TEI, "LoggerId", e.logger_id.into());
        self.put(s, TEI, "EnableProperty", e.enable_property.into());
        self.put(s, TEI, "MatchAnyKeyword", e.match_any);
        self.put(s, TEI, "MatchAllKeyword", e.match_all);
    }
}

/// The GUID entry of `p` and its registrations.
fn write_provider(
    b: &mut LoggerBuilder,
    p: &ProviderSpec,
    pl: &Placed,
    table: &ExpectedGuidTable,
    lists: &BTreeMap<(u32, u32), Vec<u64>>,
    kernel_ordinal: &mut u64,
) -> ExpectedProvider {
    let lay = &b.lay;
    let ptr = b.ptr as u64;
    let mut e = vec![0u8; lay.size(GE)];
    // GuidList: neighbours on its list (or the head).
    let head = table.head(pl.bucket, pl.list, ptr);
    let link = lay.off(GE, "GuidList");
    let v = &lists[&(pl.bucket, pl.list)];
    let i = v.iter().position(|&x| x == pl.entry).expect("on its list");
    let next = v.get(i + 1).map_or(head, |n| n + link);
    let prev = if i == 0 { head } else { v[i - 1] + link };
    lay.put_list(&mut e, link as usize, next, prev);
    let ref_count = p.registrations.len() as u64 + 1;
    lay.put(&mut e, GE, "RefCount", ref_count);
    lay.put_bytes(&mut e, GE, "Guid", &p.guid);
    // RegListHead: the registrations' RegList, in spec order.
    let rl = lay.off(RE, "RegList");
    let rh = pl.entry + lay.off(GE, "RegListHead");
    let n = pl.regs.len();
    if n == 0 {
        lay.put_list(&mut e, lay.off(GE, "RegListHead") as usize, rh, rh);
    } else {
        lay.put_list(
            &mut e,
            lay.off(GE, "RegListHead") as usize,
            pl.regs[0] + rl,
            pl.regs[n - 1] + rl,
        );
    }
    // EnableInfo[i] and the aggregate.
    let tei = lay.size(TEI);
    let slots: Vec<ExpectedEnableInfo> = p
        .enables
        .iter()
        .enumerate()
        .map(|(i, s)| ExpectedEnableInfo {
            index: Some(i as u8),
            is_enabled: 1,
            level: s.level,
            logger_id: s.logger_id,
            match_any: s.match_any,
            match_all: s.match_all,
            enable_property: s.enable_property,
        })
        .collect();
    let ei = lay.off(GE, "EnableInfo") as usize;
    for s in &slots {
        lay.put_enable_info(&mut e, ei + tei * s.index.expect("slot") as usize, s);
    }
    let agg = aggregate(&slots);
    lay.put_enable_info(&mut e, lay.off(GE, "ProviderEnableInfo") as usize, &agg);
    let silo_state = b.silo_va.filter(|_| b.t.has_field(GE, "SiloState"));
    if let Some(s) = silo_state {
        lay.put(&mut e, GE, "SiloState", s);
    }
    // Every other LIST_ENTRY (SiloGuidList) is an empty list.
    for m in b.t.members_of_type(GE, "struct _LIST_ENTRY") {
        if m != "GuidList" && m != "RegListHead" {
            let off = lay.off(GE, &m);
            lay.put_list(&mut e, off as usize, pl.entry + off, pl.entry + off);
        }
    }
    b.pool.slice_mut(pl.entry, e.len()).copy_from_slice(&e);
    let all = ((1u16 << slots.len()) - 1) as u8;
    let mut regs = Vec::new();
    for (k, reg) in p.registrations.iter().enumerate() {
        let r = write_registration(b, p, pl, k, reg.enable_mask.unwrap_or(all), kernel_ordinal);
        regs.push(r);
    }
    ExpectedProvider {
        name: p.name.clone(),
        guid: guid_to_string(&p.guid),
        guid_entry_va: pl.entry,
        guid_type: p.guid_type,
        bucket: pl.bucket,
        list_head_va: head,
        ref_count,
        registrations: regs,
        enable_slots: slots,
        aggregate: agg,
        silo_state,
    }
}

/// The `Dbg*` flag bits of a registration where the layout has them.
fn reg_flags(b: &LoggerBuilder, kernel: bool) -> Option<u16> {
    let bits = [
        if kernel {
            "DbgKernelRegistration"
        } else {
            "DbgUserRegistration"
        },
        "DbgModernRegistration",
        "DbgInserted",
    ];
    let mut v = 0u16;
    for name in bits {
        let bf = b.t.bitfield(RE, name)?;
        assert_eq!(
            Some(bf.offset),
            b.t.offset_of(RE, "Flags"),
            "{name} is not in Flags"
        );
        v |= ((1u16 << bf.width) - 1) << bf.position;
    }
    Some(v)
}

/// Registration `k` of `p`.
fn write_registration(
    b: &mut LoggerBuilder,
    p: &ProviderSpec,
    pl: &Placed,
    k: usize,
    mask: u8,
    kernel_ordinal: &mut u64,
) -> ExpectedRegistration {
    let lay = &b.lay;
    let va = pl.regs[k];
    let mut r = vec![0u8; lay.size(RE)];
    let rl = lay.off(RE, "RegList");
    let head = pl.entry + lay.off(GE, "RegListHead");
    let next = pl.regs.get(k + 1).map_or(head, |n| n + rl);
    let prev = if k == 0 { head } else { pl.regs[k - 1] + rl };
    lay.put_list(&mut r, rl as usize, next, prev);
    for m in b.t.members_of_type(RE, "struct _LIST_ENTRY") {
        if m != "RegList" {
            let off = lay.off(RE, &m);
            lay.put_list(&mut r, off as usize, va + off, va + off);
        }
    }
    lay.put(&mut r, RE, "GuidEntry", pl.entry);
    lay.put(&mut r, RE, "Index", k as u64);
    lay.put(&mut r, RE, "EnableMask", mask.into());
    let reg = &p.registrations[k];
    let kernel = matches!(reg.registrant, Registrant::Kernel { .. });
    let flags = reg_flags(b, kernel);
    if let Some(f) = flags {
        lay.put(&mut r, RE, "Flags", f.into());
    }
    let mut exp = ExpectedRegistration {
        va,
        kernel,
        pid: None,
        eprocess: None,
        callback: None,
        callback_context: None,
        index: k as u16,
        flags,
        enable_mask: mask,
        handle: None,
    };
    match &reg.registrant {
        Registrant::User { pid } => {
            let ep = b.eprocess[pid];
            lay.put(&mut r, RE, "Process", ep);
            exp.pid = Some(*pid);
            exp.eprocess = Some(ep);
        }
        Registrant::Kernel { handle } => {
            let text =
                b.fx.sections
                    .iter()
                    .find(|s| s.name == ".text")
                    .expect("fixture .text");
            let slots = u64::from(text.virtual_size / 0x10).max(1);
            let callback = b.image_base + u64::from(text.rva) + 0x10 * (*kernel_ordinal % slots);
            *kernel_ordinal += 1;
            let ctx = pl.contexts[k].expect("kernel context");
            b.pool.slice_mut(ctx, 0x10).copy_from_slice(&p.guid);
            lay.put(&mut r, RE, "Callback", callback);
            lay.put(&mut r, RE, "CallbackContext", ctx);
            exp.callback = Some(callback);
            exp.callback_context = Some(ctx);
            exp.handle = handle.clone();
        }
    }
    b.pool.slice_mut(va, r.len()).copy_from_slice(&r);
    exp
}

/// Every `Etw*RegHandle` global: the kernel registration named by it, or NULL.
fn write_handles(
    b: &mut LoggerBuilder,
    img: &mut KernelImage,
    providers: &mut [ExpectedProvider],
) -> Vec<ExpectedRegHandle> {
    let mut out = Vec::new();
    for h in handle_names(b.fx) {
        let named = providers.iter().find_map(|p| {
            p.registrations
                .iter()
                .find(|r| r.handle.as_deref() == Some(h.as_str()))
                .map(|r| (r.va, p.name.clone(), p.guid.clone()))
        });
        let known = pg::provider_of_handle(&h);
        let value = named.as_ref().map_or(0, |n| n.0);
        write_var(img, b.fx, &h, 0, &ptr_bytes(b.ptr, value));
        out.push(ExpectedRegHandle {
            va: b.va_of(&h).expect("handle public"),
            value,
            provider: named
                .as_ref()
                .map(|n| n.1.clone())
                .or_else(|| known.map(|k| k.name.to_string())),
            guid: named
                .as_ref()
                .map(|n| n.2.clone())
                .or_else(|| known.map(|k| k.guid.to_string())),
            reg_entry: named.map(|n| n.0),
            name: h,
        });
    }
    out
}
