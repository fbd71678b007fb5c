//! Registered providers (issue 17): the kernel's GUID hash table → `_ETW_GUID_ENTRY` (one per
//! provider GUID, with its enable state per session) → `_ETW_REG_ENTRY` (one per
//! registration, kernel or user mode).
//!
//! Where the table is (etw-internals.md §1.1, anchors.md "DRAKVUF etwmon"):
//! * 1511+: `_ETW_SILODRIVERSTATE.EtwpGuidHashTable[64]`, each `_ETW_HASH_BUCKET` holding
//!   `ListHead[3]`, one list per GUID type (`_ETW_GUID_TYPE`: trace, notification, group);
//!   layouts from the symbols.
//! * 6.1 - 6.3: the global `EtwpGuidHashTable`, whose element type no public PDB describes.
//!   Undocumented is not unknown: the table's shape is found by search — each candidate
//!   (64 buckets of 3 list heads and a lock, as later builds; 64 plain list heads) is read and
//!   every list head checked (empty, or Flink->Blink and Blink->Flink back at the head); the
//!   shape whose heads are all consistent wins, and the report says it was inferred.
//!
//! Identity decides, consistency warns: an entry on a bucket's list is a provider and an entry
//! on its `RegListHead` a registration (the lists are their identity); a back-pointer that
//! disagrees, an unreadable field, a count or a walk that stops are warnings on what is still
//! reported. Every walk is bounded (`MAX_GUID_ENTRIES`, [`MAX_REGISTRATIONS`]).

use crate::addr::VirtAddr;
use crate::bytes::guid_text;
use crate::kernel::context::KernelContext;
use crate::kernel::view::{View, ViewError};
use crate::symbols::layout::{StructLayout, TypeRef};
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Most GUID entries walked on one list (a busy system has a few thousand in all).
pub(crate) const MAX_GUID_ENTRIES: u64 = 16_384;
/// Most GUID entries walked in the whole table.
pub const MAX_PROVIDERS: usize = 65_536;
/// Most registrations walked per GUID entry.
pub const MAX_REGISTRATIONS: u64 = 4096;
/// `EnableInfo[8]`: one slot per session enabling the provider (MAX_ENABLE_INFO in the kernel).
pub const ENABLE_SLOTS: u64 = 8;
/// Buckets of the table (etw-internals.md: `EtwpGuidHashTable[64]`).
pub(crate) const BUCKETS: u64 = 64;

/// The names of the lists of a bucket, by `_ETW_GUID_TYPE` value.
pub(crate) fn guid_type_name(t: u64) -> &'static str {
    match t {
        0 => "trace",
        1 => "notification",
        2 => "group",
        _ => "unknown",
    }
}

/// How the GUID table was located.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GuidTable {
    /// The first bucket.
    pub address: VirtAddr,
    /// "EtwpHostSiloState -> _ETW_SILODRIVERSTATE.EtwpGuidHashTable", "logger contexts'
    /// SiloState -> _ETW_SILODRIVERSTATE.EtwpGuidHashTable" (no RVA: `etw::silo`) or "global
    /// EtwpGuidHashTable".
    pub route: &'static str,
    pub buckets: u64,
    /// List heads per bucket (3: one per GUID type; 1 for a table of plain list heads).
    pub lists_per_bucket: u64,
    /// Bytes from one bucket to the next.
    pub stride: u64,
    /// Offset of the first list head in a bucket (`_ETW_HASH_BUCKET.ListHead`; 0 for a
    /// searched shape, whose heads open the bucket).
    pub heads_offset: u64,
    /// How the shape is known: "symbols" (the bucket type's layout), or "search: …" (the
    /// candidate shapes tried and the heads that were consistent).
    pub shape_from: String,
}

impl GuidTable {
    /// The list head `list` of bucket `bucket` (list heads are LIST_ENTRYs: two pointers).
    pub fn head(&self, bucket: u64, list: u64, ptr: u64) -> VirtAddr {
        self.address
            .offset(bucket * self.stride + self.heads_offset + list * 2 * ptr)
    }
}

/// One `_TRACE_ENABLE_INFO`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EnableInfo {
    /// The `EnableInfo[]` slot (None: the `ProviderEnableInfo` aggregate).
    pub slot: Option<u64>,
    pub is_enabled: u64,
    pub level: u64,
    pub logger_id: u64,
    pub enable_property: u64,
    pub match_any_keyword: u64,
    pub match_all_keyword: u64,
}

/// Kernel or user mode registration, and how that is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegKind {
    Kernel,
    User,
    Unknown,
}

impl RegKind {
    /// The name as the output shows it.
    pub fn name(self) -> &'static str {
        match self {
            RegKind::Kernel => "kernel",
            RegKind::User => "user",
            RegKind::Unknown => "unknown",
        }
    }
}

/// One `_ETW_REG_ENTRY`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Registration {
    pub address: VirtAddr,
    pub kind: RegKind,
    /// What told the kind: "Flags.DbgKernelRegistration", "Flags.DbgUserRegistration",
    /// "Callback set", "Callback NULL", "Callback in the kernel image", "Process is an EPROCESS".
    pub kind_from: &'static str,
    /// User mode: the registering process.
    pub eprocess: Option<VirtAddr>,
    pub pid: Option<u64>,
    pub process: Option<crate::text::Untrusted>,
    /// Kernel mode: the provider's enable callback and its context.
    pub callback: Option<VirtAddr>,
    pub callback_context: Option<VirtAddr>,
    /// Bit i: `EnableInfo[i]` applies to this registration.
    pub enable_mask: Option<u64>,
    pub group_enable_mask: Option<u64>,
    pub index: Option<u64>,
    pub flags: Option<u64>,
    /// `GuidEntry` (the back-pointer; it should be the provider's GUID entry).
    pub guid_entry: Option<VirtAddr>,
    pub warnings: Vec<Warning>,
}

/// One `_ETW_GUID_ENTRY`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provider {
    pub guid_entry: VirtAddr,
    /// Upper-case GUID text; None when its 16 bytes are not in the dump.
    pub guid: Option<String>,
    #[serde(skip)]
    pub guid_bytes: Option<[u8; 16]>,
    /// From the generated table of known providers.
    pub name: Option<&'static str>,
    pub bucket: u64,
    /// `_ETW_GUID_TYPE` of the list it is on (0 trace, 1 notification, 2 group).
    pub guid_type: u64,
    pub ref_count: Option<u64>,
    /// `ProviderEnableInfo`: the aggregate over the sessions.
    pub aggregate: Option<EnableInfo>,
    /// The `EnableInfo[]` slots whose IsEnabled is set.
    pub enabled: Vec<EnableInfo>,
    pub registrations: Vec<Registration>,
    pub warnings: Vec<Warning>,
}

impl Provider {
    /// Some session enables it (an enabled `EnableInfo` slot).
    pub fn is_enabled(&self) -> bool {
        !self.enabled.is_empty()
    }
}

/// What the walk found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProviderTable {
    pub table: Option<GuidTable>,
    pub providers: Vec<Provider>,
    pub warnings: Vec<Warning>,
    /// Every list head of the table is NULL: never initialised, or zeroed (no walk).
    pub zeroed: bool,
}

/// Layouts the walk needs.
struct Layouts<'s> {
    guid_entry: &'s StructLayout,
    reg_entry: Option<&'s StructLayout>,
    enable_info: Option<&'s StructLayout>,
}

/// Locate the GUID table and walk it.
pub fn read(ctx: &KernelContext<'_>, silo_state: Option<VirtAddr>) -> ProviderTable {
    let mut out = ProviderTable::default();
    let Some(ge) = crate::etw::silo::layout(ctx, "_ETW_GUID_ENTRY") else {
        out.warnings.push(Warning::new(
            WarningKind::NotFound,
            "the symbols have no _ETW_GUID_ENTRY layout: providers cannot be listed (give the kernel's PDB, or an ISF with the ETW types)",
        ));
        return out;
    };
    let lay = Layouts {
        guid_entry: ge,
        reg_entry: crate::etw::silo::layout(ctx, "_ETW_REG_ENTRY"),
        enable_info: crate::etw::silo::layout(ctx, "_TRACE_ENABLE_INFO"),
    };
    if lay.reg_entry.is_none() {
        out.warnings.push(Warning::new(
            WarningKind::NotFound,
            "the symbols have no _ETW_REG_ENTRY layout: registrations are not listed",
        ));
    }
    let Some(table) = locate(ctx, silo_state, &mut out.warnings) else {
        return out;
    };
    walk(ctx, &lay, &table, &mut out);
    out.table = Some(table);
    out
}

/// The table: the silo state's field where the symbols have it, else the global (shape
/// searched where the symbols do not describe it).
fn locate(
    ctx: &KernelContext<'_>,
    silo_state: Option<VirtAddr>,
    warnings: &mut Vec<Warning>,
) -> Option<GuidTable> {
    let ptr = ctx.space.arch().pointer_size();
    let silo_field = crate::etw::silo::layout(ctx, "_ETW_SILODRIVERSTATE")
        .and_then(|l| l.field("EtwpGuidHashTable").map(|f| (l, f)));
    if let Some((_, f)) = silo_field {
        let Some(silo) = silo_state else {
            warnings.push(Warning::new(
                WarningKind::NotFound,
                "the GUID table is in the host silo state, which could not be located (see the sessions' warnings)",
            ).field("_ETW_SILODRIVERSTATE.EtwpGuidHashTable"));
            return None;
        };
        let (count, stride, lists, heads_offset) = match &f.ty {
            TypeRef::Array { element, count } => {
                let stride = match element.as_ref() {
                    TypeRef::Struct { name } => {
                        crate::etw::silo::layout(ctx, name.raw()).map(|b| b.size)
                    }
                    _ => None,
                }
                .unwrap_or(7 * ptr);
                let lists = match element.as_ref() {
                    TypeRef::Struct { name } => crate::etw::silo::layout(ctx, name.raw())
                        .and_then(|b| b.field("ListHead"))
                        .and_then(|h| match &h.ty {
                            TypeRef::Array { count, .. } => Some(*count),
                            _ => None,
                        })
                        .unwrap_or(3),
                    _ => 3,
                };
                let heads_offset = match element.as_ref() {
                    TypeRef::Struct { name } => crate::etw::silo::layout(ctx, name.raw())
                        .and_then(|b| b.field("ListHead"))
                        .map_or(0, |h| h.offset),
                    _ => 0,
                };
                (*count, stride, lists, heads_offset)
            }
            _ => (BUCKETS, 7 * ptr, 3, 0),
        };
        // Bounds on what a symbol file says (a hostile ISF can say anything).
        let count = count.min(1024);
        let lists = lists.clamp(1, 8);
        let stride = stride.clamp(2 * ptr * lists, 0x1000);
        // The heads must fit in the bucket.
        let heads_offset = heads_offset.min(stride - 2 * ptr * lists);
        return Some(GuidTable {
            address: silo.offset(f.offset),
            route: if ctx.global("EtwpHostSiloState").is_none()
                && crate::etw::silo::check(ctx).address == Some(silo)
            {
                "logger contexts' SiloState -> _ETW_SILODRIVERSTATE.EtwpGuidHashTable"
            } else {
                "EtwpHostSiloState -> _ETW_SILODRIVERSTATE.EtwpGuidHashTable"
            },
            buckets: count,
            lists_per_bucket: lists,
            stride,
            heads_offset,
            shape_from: "symbols".into(),
        });
    }
    let Some(va) = ctx.global("EtwpGuidHashTable") else {
        warnings.push(Warning::new(
            WarningKind::NotFound,
            "neither _ETW_SILODRIVERSTATE.EtwpGuidHashTable nor the global EtwpGuidHashTable is known (give the kernel's PDB)",
        ));
        return None;
    };
    // The bucket type where the symbols have it (a PDB may); else search.
    if let Some(b) = crate::etw::silo::layout(ctx, "_ETW_HASH_BUCKET") {
        let lists = b
            .field("ListHead")
            .and_then(|h| match &h.ty {
                TypeRef::Array { count, .. } => Some(*count),
                _ => None,
            })
            .unwrap_or(3)
            .clamp(1, 8);
        let stride = b.size.clamp(2 * ptr * lists, 0x1000);
        let heads_offset = b
            .field("ListHead")
            .map_or(0, |h| h.offset)
            .min(stride - 2 * ptr * lists);
        return Some(GuidTable {
            address: va,
            route: "global EtwpGuidHashTable",
            buckets: BUCKETS,
            lists_per_bucket: lists,
            stride,
            heads_offset,
            shape_from: "symbols (_ETW_HASH_BUCKET)".into(),
        });
    }
    search_shape(ctx, va, warnings)
}

/// Is the LIST_ENTRY head at `head` consistent: empty (Flink = Blink = head) or its first
/// and last entries point back at it? None: not readable.
fn head_consistent(ctx: &KernelContext<'_>, head: VirtAddr) -> Option<bool> {
    let s = &ctx.space;
    let ptr = s.arch().pointer_size();
    let flink = s.read_ptr(head).ok()?;
    let blink = s.read_ptr(head.offset(ptr)).ok()?;
    if flink == head && blink == head {
        return Some(true);
    }
    if flink.is_null() || blink.is_null() {
        return Some(false);
    }
    let back = s.read_ptr(flink.offset(ptr)).ok();
    let fwd = s.read_ptr(blink).ok();
    Some(back == Some(head) && fwd == Some(head))
}

/// The shape of a global table no symbol file describes: each candidate's list heads are
/// checked; the one whose heads are all consistent (and most of them) wins.
fn search_shape(
    ctx: &KernelContext<'_>,
    va: VirtAddr,
    warnings: &mut Vec<Warning>,
) -> Option<GuidTable> {
    let ptr = ctx.space.arch().pointer_size();
    // (lists per bucket, stride): the later _ETW_HASH_BUCKET shape (3 heads and a lock), and
    // plain LIST_ENTRY heads.
    let candidates = [(3u64, 7 * ptr), (1u64, 2 * ptr)];
    let mut tried = Vec::new();
    let mut best: Option<(u64, u64, u64, u64)> = None; // (lists, stride, consistent, read)
    for &(lists, stride) in &candidates {
        let (mut good, mut read) = (0u64, 0u64);
        for b in 0..BUCKETS {
            for l in 0..lists {
                let head = va.offset(b * stride + l * 2 * ptr);
                if let Some(ok) = head_consistent(ctx, head) {
                    read += 1;
                    good += u64::from(ok);
                }
            }
        }
        tried.push(format!(
            "{lists} head(s) per bucket, stride {stride:#x}: {good} of {} heads consistent ({read} readable)",
            BUCKETS * lists
        ));
        let all = good == BUCKETS * lists;
        let better = match best {
            None => all,
            Some((bl, _, bg, _)) => all && (good > bg || (good == bg && lists > bl)),
        };
        if better {
            best = Some((lists, stride, good, read));
        }
    }
    let Some((lists, stride, _, _)) = best else {
        warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "the global EtwpGuidHashTable at {va}: no candidate shape has every list head consistent ({})",
                    tried.join("; ")
                ),
            )
            .at(va)
            .field("EtwpGuidHashTable"),
        );
        return None;
    };
    let how = format!("search: {}", tried.join("; "));
    warnings.push(
        Warning::new(
            WarningKind::Inferred,
            format!(
                "the global EtwpGuidHashTable at {va}: no symbol file describes its elements; shape inferred ({lists} list head(s) per bucket, stride {stride:#x}) from its list heads ({})",
                tried.join("; ")
            ),
        )
        .at(va)
        .field("EtwpGuidHashTable"),
    );
    Some(GuidTable {
        address: va,
        route: "global EtwpGuidHashTable",
        buckets: BUCKETS,
        lists_per_bucket: lists,
        stride,
        heads_offset: 0,
        shape_from: how,
    })
}

fn walk(ctx: &KernelContext<'_>, lay: &Layouts<'_>, table: &GuidTable, out: &mut ProviderTable) {
    let space = &ctx.space;
    let ptr = space.arch().pointer_size();
    let link = lay.guid_entry.field("GuidList").map_or(0, |f| f.offset);
    let width = space.arch().width();
    let mut seen = std::collections::HashSet::new();
    // List heads whose Flink is NULL: a table never initialised (or zeroed): one warning.
    let mut null_heads = 0u64;
    'buckets: for b in 0..table.buckets {
        for l in 0..table.lists_per_bucket {
            let head = table.head(b, l, ptr);
            if let Ok(f) = space.read_ptr(head) {
                if f.is_null() {
                    null_heads += 1;
                    continue;
                }
            }
            let mut w = match space.list_entries(head, MAX_GUID_ENTRIES) {
                Ok(w) => w,
                Err(e) => {
                    out.warnings.push(
                        Warning::new(
                            WarningKind::Unreadable,
                            format!("GUID table bucket {b} list {l} at {head}: {e}"),
                        )
                        .at(head)
                        .field("_ETW_HASH_BUCKET.ListHead"),
                    );
                    continue;
                }
            };
            for entry in w.by_ref() {
                if !entry.is_kernel(width) {
                    out.warnings.push(
                        Warning::new(
                            WarningKind::Anomaly,
                            format!("GUID table bucket {b} list {l} at {head}: a link is {entry}, not a kernel address; the rest of the list is not walked"),
                        )
                        .at(head)
                        .field("_ETW_GUID_ENTRY.GuidList"),
                    );
                    break;
                }
                let at = entry.containing(link);
                if !seen.insert(at) {
                    out.warnings.push(
                        Warning::new(
                            WarningKind::Anomaly,
                            format!("GUID entry {at} is on more than one list of the GUID table (bucket {b} list {l}); reported once"),
                        )
                        .at(at),
                    );
                    continue;
                }
                out.providers.push(read_guid_entry(ctx, lay, at, b, l));
                if out.providers.len() >= MAX_PROVIDERS {
                    out.warnings.push(Warning::new(
                        WarningKind::Bound,
                        format!("the GUID table holds more than {MAX_PROVIDERS} entries: the walk stopped there"),
                    ));
                    break 'buckets;
                }
            }
            if let Some(why) = w.stopped() {
                out.warnings.push(
                    Warning::new(
                        why.kind(),
                        format!("GUID table bucket {b} list {l} at {head}: {why}"),
                    )
                    .at(head)
                    .field("_ETW_HASH_BUCKET.ListHead"),
                );
            }
        }
    }
    out.zeroed = null_heads == table.buckets * table.lists_per_bucket;
    out.warnings.extend(null_heads_warning(table, null_heads));
}

fn null_heads_warning(table: &GuidTable, null_heads: u64) -> Option<Warning> {
    (null_heads > 0).then(|| {
        Warning::new(
            WarningKind::Anomaly,
            format!(
                "{null_heads} of the {} list heads of the GUID table at {} are NULL (a kernel initialises every head to an empty list: this table was never initialised, or was zeroed)",
                table.buckets * table.lists_per_bucket,
                table.address
            ),
        )
        .at(table.address)
        .field("_ETW_HASH_BUCKET.ListHead")
    })
}

fn enable_info(
    ctx: &KernelContext<'_>,
    l: &StructLayout,
    va: VirtAddr,
    slot: Option<u64>,
) -> Result<EnableInfo, ViewError> {
    let v = View::new(&ctx.space, l, va);
    let get = |n: &str| v.uint(n);
    Ok(EnableInfo {
        slot,
        is_enabled: get("IsEnabled")?,
        level: get("Level")?,
        logger_id: get("LoggerId")?,
        enable_property: get("EnableProperty").unwrap_or(0),
        match_any_keyword: get("MatchAnyKeyword")?,
        match_all_keyword: get("MatchAllKeyword")?,
    })
}

fn read_guid_entry(
    ctx: &KernelContext<'_>,
    lay: &Layouts<'_>,
    at: VirtAddr,
    bucket: u64,
    list: u64,
) -> Provider {
    let v = View::new(&ctx.space, lay.guid_entry, at);
    let mut warnings = Vec::new();
    let warn = |w: &mut Vec<Warning>, field: &str, e: String| {
        w.push(
            Warning::new(WarningKind::Unreadable, format!("GUID entry {at}: {e}"))
                .at(at)
                .field(format!("_ETW_GUID_ENTRY.{field}")),
        )
    };
    let guid_bytes = match v.bytes("Guid", 16) {
        Ok(b) => <[u8; 16]>::try_from(b.as_slice()).ok(),
        Err(e) => {
            warn(&mut warnings, "Guid", e.to_string());
            None
        }
    };
    let ref_count = v.uint("RefCount").ok();
    let mut aggregate = None;
    let mut enabled = Vec::new();
    if let Some(tl) = lay.enable_info {
        match v.field_va("ProviderEnableInfo") {
            Ok(pva) => match enable_info(ctx, tl, pva, None) {
                Ok(e) => aggregate = Some(e),
                Err(e) => warn(&mut warnings, "ProviderEnableInfo", e.to_string()),
            },
            Err(e) => warn(&mut warnings, "ProviderEnableInfo", e.to_string()),
        }
        match v.field_va("EnableInfo") {
            Ok(base) => {
                let size = tl.size.clamp(0x20, 0x100);
                for i in 0..ENABLE_SLOTS {
                    match enable_info(ctx, tl, base.offset(i * size), Some(i)) {
                        Ok(e) if e.is_enabled != 0 => enabled.push(e),
                        Ok(_) => {}
                        Err(e) => warn(&mut warnings, &format!("EnableInfo[{i}]"), e.to_string()),
                    }
                }
            }
            Err(e) => warn(&mut warnings, "EnableInfo", e.to_string()),
        }
    }
    let registrations = match lay.reg_entry {
        Some(rl) => read_registrations(ctx, rl, &v, at, &mut warnings),
        None => Vec::new(),
    };
    Provider {
        guid_entry: at,
        guid: guid_bytes.as_ref().map(|g| guid_text(g).to_uppercase()),
        name: guid_bytes
            .as_ref()
            .and_then(crate::etw::provider_names::provider_name),
        guid_bytes,
        bucket,
        guid_type: list,
        ref_count,
        aggregate,
        enabled,
        registrations,
        warnings,
    }
}

fn read_registrations(
    ctx: &KernelContext<'_>,
    rl: &StructLayout,
    ge: &View<'_, '_>,
    at: VirtAddr,
    warnings: &mut Vec<Warning>,
) -> Vec<Registration> {
    let Ok(head) = ge.field_va("RegListHead") else {
        return Vec::new();
    };
    let link = rl.field("RegList").map_or(0, |f| f.offset);
    let mut out = Vec::new();
    let mut w = match ctx.space.list_entries(head, MAX_REGISTRATIONS) {
        Ok(w) => w,
        Err(e) => {
            warnings.push(
                Warning::new(
                    WarningKind::Unreadable,
                    format!("GUID entry {at}: RegListHead at {head}: {e}"),
                )
                .at(head)
                .field("_ETW_GUID_ENTRY.RegListHead"),
            );
            return out;
        }
    };
    for e in w.by_ref() {
        out.push(read_registration(ctx, rl, e.containing(link), at));
    }
    if let Some(why) = w.stopped() {
        warnings.push(
            Warning::new(
                why.kind(),
                format!("GUID entry {at}: RegListHead at {head}: {why}"),
            )
            .at(head)
            .field("_ETW_GUID_ENTRY.RegListHead"),
        );
    }
    out
}

/// Is `va` inside the kernel image or a loaded module?
fn in_kernel_code(ctx: &KernelContext<'_>, va: VirtAddr) -> bool {
    let v = va.get();
    let image_size = ctx
        .image
        .as_ref()
        .and_then(|i| i.headers.as_ref().ok())
        .map(|h| u64::from(h.size_of_image));
    if let (Some(base), Some(size)) = (ctx.base, image_size) {
        if v >= base.get() && v - base.get() < size {
            return true;
        }
    }
    ctx.loaded_modules()
        .iter()
        .any(|&(b, s, _)| v >= b && v - b < s)
}

/// One `_ETW_REG_ENTRY` at `at` on the list of the GUID entry `owner`.
pub(crate) fn read_registration(
    ctx: &KernelContext<'_>,
    rl: &StructLayout,
    at: VirtAddr,
    owner: VirtAddr,
) -> Registration {
    let v = View::new(&ctx.space, rl, at);
    let mut warnings = Vec::new();
    let guid_entry = v.ptr("GuidEntry").ok();
    if let Some(g) = guid_entry.filter(|&g| g != owner) {
        warnings.push(
            Warning::new(
                WarningKind::Anomaly,
                format!("registration {at} is on the list of GUID entry {owner} but its GuidEntry is {g}"),
            )
            .at(at)
            .field("_ETW_REG_ENTRY.GuidEntry"),
        );
    }
    let flag = |n: &str| {
        if rl.field(n).is_some() {
            v.uint(n).ok()
        } else {
            None
        }
    };
    let same_slot = match (rl.field("Process"), rl.field("Callback")) {
        (Some(p), Some(c)) => p.offset == c.offset,
        _ => false,
    };
    let callback = v.ptr("Callback").ok();
    let (kind, kind_from) = if flag("DbgKernelRegistration") == Some(1) {
        (RegKind::Kernel, "Flags.DbgKernelRegistration")
    } else if flag("DbgUserRegistration") == Some(1) {
        (RegKind::User, "Flags.DbgUserRegistration")
    } else if !same_slot && rl.field("Callback").is_some() {
        match callback {
            Some(c) if !c.is_null() => (RegKind::Kernel, "Callback set"),
            Some(_) => (RegKind::User, "Callback NULL"),
            None => (RegKind::Unknown, "Callback unreadable"),
        }
    } else {
        // 6.1: Process and Callback share a slot: a kernel callback is code in a module.
        match callback {
            Some(c) if !c.is_null() && in_kernel_code(ctx, c) => {
                (RegKind::Kernel, "Callback in the kernel image")
            }
            Some(c) if !c.is_null() && crate::kernel::processes::identify(ctx, c).is_ok() => {
                (RegKind::User, "Process is an EPROCESS")
            }
            _ => (
                RegKind::Unknown,
                "neither a kernel callback nor an EPROCESS",
            ),
        }
    };
    let (mut eprocess, mut pid, mut process) = (None, None, None);
    let (mut cb, mut cb_ctx) = (None, None);
    match kind {
        RegKind::User => {
            let pr = crate::kernel::processes::process_field(
                ctx,
                &v,
                "Process",
                &format!("registration {at}"),
            );
            if let Some((kind, m)) = pr.problem {
                warnings.push(Warning::new(kind, m).at(at).field("_ETW_REG_ENTRY.Process"));
            }
            (eprocess, pid, process) = (pr.eprocess, pr.pid, pr.image);
        }
        RegKind::Kernel => {
            cb = callback;
            cb_ctx = v.ptr("CallbackContext").ok();
        }
        RegKind::Unknown => {}
    }
    Registration {
        address: at,
        kind,
        kind_from,
        eprocess,
        pid,
        process,
        callback: cb,
        callback_context: cb_ctx,
        enable_mask: v.uint("EnableMask").ok(),
        group_enable_mask: v.uint("GroupEnableMask").ok(),
        index: v.uint("Index").ok(),
        flags: v.uint("Flags").ok(),
        guid_entry,
        warnings,
    }
}
