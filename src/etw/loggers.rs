//! The logger-context array and the sessions in it (etw-internals.md §1).
//!
//! The array is reached by every route of [`crate::etw::routes`]; the first is used and the
//! others compared with it: a disagreement is reported (it can mean tampering).

use crate::addr::VirtAddr;
use crate::bytes::guid_text;
use crate::etw::mode::{clock_type_name, logger_mode_flags};
use crate::etw::routes::resolve_logger_array;
use crate::etw::routes::LoggerArray;
use crate::kernel::context::KernelContext;
use crate::kernel::view::View;
use crate::kernel::UnicodeString;
use crate::symbols::{StructLayout, SymbolSource};
use crate::text::Untrusted;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// One active session.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Session {
    pub logger_id: u64,
    pub name: Option<Untrusted>,
    pub log_file: Option<Untrusted>,
    pub instance_guid: Option<String>,
    pub address: VirtAddr,
    pub logger_mode: Option<u64>,
    pub logger_mode_flags: Vec<String>,
    pub clock_type: Option<u64>,
    pub clock_type_name: Option<&'static str>,
    pub buffer_size: Option<u64>,
    pub minimum_buffers: Option<u64>,
    pub maximum_buffers: Option<u64>,
    pub number_of_buffers: Option<u64>,
    pub buffers_written: Option<u64>,
    pub events_lost: Option<u64>,
    pub log_buffers_lost: Option<u64>,
    pub real_time_buffers_lost: Option<u64>,
    pub start_time: Option<String>,
    pub pool_type: Option<u64>,
    pub layout_source: &'static str,
    // Beyond the contract:
    pub maximum_event_size: Option<u64>,
    pub start_time_raw: Option<u64>,
    /// Real-time consumers on the context's `Consumers` list ([`super::consumers`]).
    pub consumers: Vec<super::consumers::Consumer>,
    /// The evidence that made the slot a session: "logger_id", "silo_state", "buffer_size",
    /// "logger_name", "pool_tag". A slot is a session when the context has a logger's identity,
    /// and only then (docs/reference.md "`sessions`"): a canonical, pointer-aligned kernel address whose
    /// LoggerId is readable and equals the slot; on 1607+ (reached through a silo state) a
    /// SiloState equal to that silo state; and at least one more piece of evidence (SiloState
    /// match, a plausible BufferSize of 1 KiB-64 MiB, a sane non-empty LoggerName descriptor, or
    /// the 'EtwL' pool tag). Odd counts, times, modes and sizes are anomalies.
    pub identity: Vec<&'static str>,
    /// Values that are odd for a live logger (reported; never a reason to drop the session).
    pub anomalies: Vec<Anomaly>,
    /// Fields that could not be read, with the address (JSON: the messages).
    #[serde(serialize_with = "crate::warning::serialize_messages")]
    pub warnings: Vec<Warning>,
}

/// A value that is odd for a live logger: the field, its value and why it is odd.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Anomaly {
    pub field: &'static str,
    pub value: u64,
    pub why: String,
}

/// A slot whose non-free value does not lead to a logger context.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RejectedSlot {
    pub slot: u64,
    /// The slot's raw value (the pointer).
    pub value: VirtAddr,
    /// The field whose value denied the identity, when one did.
    pub field: Option<&'static str>,
    pub reason: String,
}

/// Largest buffer read (`etw::buffers`, `etw::triage`) (BufferSize is validated against the session's; this bounds a crafted
/// session too).
pub(crate) const MAX_BUFFER_SIZE: u64 = 64 << 20;

/// A BufferSize a logger can have: 1 KiB to 64 MiB (`MAX_ETW_BUFFERSIZE` is 1 MiB before 6.2
/// and larger in 2.0-format loggers; etw-internals.md §1.3).
pub(crate) fn plausible_buffer_size(size: u64) -> bool {
    (0x400..=MAX_BUFFER_SIZE).contains(&size)
}

impl Session {
    /// A session known only by its id and logger-context address (everything else unknown),
    /// for callers that learn the rest elsewhere (a triage dump's ETW blob, a test).
    pub fn bare(logger_id: u64, address: VirtAddr, layout_source: &'static str) -> Session {
        Session {
            logger_id,
            name: None,
            log_file: None,
            instance_guid: None,
            address,
            logger_mode: None,
            logger_mode_flags: Vec::new(),
            clock_type: None,
            clock_type_name: None,
            buffer_size: None,
            minimum_buffers: None,
            maximum_buffers: None,
            number_of_buffers: None,
            buffers_written: None,
            events_lost: None,
            log_buffers_lost: None,
            real_time_buffers_lost: None,
            start_time: None,
            pool_type: None,
            layout_source,
            maximum_event_size: None,
            start_time_raw: None,
            consumers: Vec::new(),
            identity: Vec::new(),
            anomalies: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Everything `sessions` found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionList {
    /// The array used.
    pub array: Option<LoggerArray>,
    /// Every route that gave an array.
    pub routes: Vec<LoggerArray>,
    pub sessions: Vec<Session>,
    /// Free slots (NULL or bit 0 set).
    pub free_slots: u64,
    /// Non-free slots that do not lead to a logger context, with the reason.
    pub rejected: Vec<RejectedSlot>,
    /// Slots rejected, routes that disagree, fields that could not be read.
    pub warnings: Vec<Warning>,
    /// Whether memory confirms the `_WMI_LOGGER_CONTEXT` layout used.
    pub layout_check: Option<LayoutCheck>,
}

/// Why no route gave the logger array, with the next step that works: the failures warned
/// above; roots the symbols name whose memory the dump does not hold; symbols that name none
/// of the routes' globals; or, with no symbols at all, to give them.
fn no_route(
    ctx: &KernelContext<'_>,
    warned: bool,
    roots: &[crate::etw::routes::EtwRoot],
) -> String {
    if warned {
        return "every route above failed".into();
    }
    let absent: Vec<String> = roots
        .iter()
        .filter(|r| !r.present)
        .filter_map(|r| r.address.map(|a| format!("{} at {a}", r.name)))
        .collect();
    match &ctx.symbols.source {
        _ if !absent.is_empty() => format!(
            "no route (not in the dump: {}; the memory that holds it is missing)",
            absent.join(", ")
        ),
        SymbolSource::Pdb(_) | SymbolSource::Isf(_) if ctx.base.is_none() => format!(
            "no route (the kernel's base address is unknown, so the {}'s globals cannot be placed in memory, and no KDBG in the dump gives EtwpDebuggerData)",
            ctx.symbols.source.kind()
        ),
        // Symbols were given: asking for them again is no next step.
        SymbolSource::Pdb(_) | SymbolSource::Isf(_) => format!(
            "no route (the {} names none of EtwpHostSiloState, EtwpLoggerContext, WmipLoggerContext or EtwpDebuggerData, and no KDBG in the dump gives EtwpDebuggerData)",
            ctx.symbols.source.kind()
        ),
        SymbolSource::None => "no route (give symbols with --pdb, --isf or --symbols; without them only KDBG.EtwpDebuggerData can lead to it)".into(),
    }
}

/// Find the array and read every session in it.
pub fn list_sessions(ctx: &KernelContext<'_>) -> SessionList {
    let mut out = SessionList::default();
    let resolution = resolve_logger_array(ctx);
    out.warnings = resolution.warnings;
    let routes = resolution.arrays;
    let Some(primary) = routes.first().cloned() else {
        let why = no_route(ctx, !out.warnings.is_empty(), &resolution.roots);
        out.warnings.push(Warning::new(
            WarningKind::NotFound,
            format!("the logger-context array could not be located: {why}"),
        ));
        return out;
    };
    for r in &routes[1..] {
        if r.address != primary.address {
            out.warnings.push(
                Warning::new(
                    WarningKind::Conflict,
                    format!(
                        "routes disagree: {} gives the logger array at {}, {} gives {} (this can mean tampering); using the first",
                        primary.route.describe(),
                        primary.address,
                        r.route.describe(),
                        r.address
                    ),
                )
                .at(r.address),
            );
        }
    }
    let Some(layout) = ctx.symbols.layout("_WMI_LOGGER_CONTEXT") else {
        out.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "no _WMI_LOGGER_CONTEXT layout for build {} (no symbols with it, no built-in table)",
                    ctx.build
                ),
            )
            .field("_WMI_LOGGER_CONTEXT"),
        );
        out.array = Some(primary);
        out.routes = routes;
        return out;
    };
    read_slots(ctx, layout, &primary, &mut out);
    out.layout_check = Some(check_context_layout(ctx, layout, &out.sessions));
    if let Some(w) = out.layout_check.as_ref().and_then(LayoutCheck::warning) {
        out.warnings.push(w);
    }
    out.array = Some(primary);
    out.routes = routes;
    out
}

/// Whether memory confirms the `_WMI_LOGGER_CONTEXT` layout in use (issue 26: a layout is a
/// hypothesis until the dump confirms it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LayoutCheck {
    pub type_name: &'static str,
    /// `pdb`, `isf`, `builtin`, `builtin-exact`, `builtin-nearest`.
    pub source: &'static str,
    pub size: u64,
    pub how: crate::kernel::context::LocatedHow,
    pub evidence: String,
}

impl LayoutCheck {
    /// The warning a non-confirmed layout gives (None when it is the kernel's own or
    /// confirmed).
    pub fn warning(&self) -> Option<Warning> {
        use crate::kernel::context::LocatedHow as H;
        let what = match self.how {
            H::Symbols | H::Confirmed => return None,
            H::Contradicted => "memory contradicts it",
            _ => "unconfirmed",
        };
        Some(
            Warning::new(
                WarningKind::Unconfirmed,
                format!(
                    "_WMI_LOGGER_CONTEXT layout ({}, {:#x} bytes) {what}: {}; every session passed its identity check (LoggerId), but its other columns (name, mode, clock, buffer counts, events lost, start time) are read at this layout's offsets and may be wrong (give the kernel's PDB or ISF)",
                    self.source, self.size, self.evidence
                ),
            )
            .field("_WMI_LOGGER_CONTEXT"),
        )
    }
}

/// The pool block that holds each logger context says how large the kernel's structure is:
/// the pool rounds `sizeof(WMI_LOGGER_CONTEXT)` plus its POOL_HEADER up to its granularity
/// (16 bytes on x64, 8 on x86), so the block's bytes after the header lie in [size, size +
/// granularity). A layout of another build is confirmed when every readable block fits it,
/// contradicted when one is too small to hold it; a larger block leaves it unconfirmed (the
/// structure may have grown, or the kernel allocated more).
fn check_context_layout(
    ctx: &KernelContext<'_>,
    layout: &StructLayout,
    sessions: &[Session],
) -> LayoutCheck {
    use crate::kernel::context::LocatedHow as H;
    let mut c = LayoutCheck {
        type_name: "_WMI_LOGGER_CONTEXT",
        source: layout.source.name(),
        size: layout.size,
        how: H::Symbols,
        evidence: "the kernel's own layout".into(),
    };
    if !matches!(
        layout.source,
        crate::symbols::LayoutSource::Builtin | crate::symbols::LayoutSource::BuiltinNearest
    ) {
        return c;
    }
    let gran = crate::kernel::pool::header_size(&ctx.space);
    let (mut fits, mut small, mut large) = (Vec::new(), Vec::new(), Vec::new());
    for s in sessions {
        if crate::kernel::pool::tag_before(&ctx.space, s.address) != Some(*b"EtwL") {
            continue;
        }
        let Some(bytes) = crate::kernel::pool::block_bytes(&ctx.space, s.address) else {
            continue;
        };
        if bytes < layout.size {
            small.push((s.logger_id, bytes));
        } else if bytes >= layout.size + gran {
            large.push((s.logger_id, bytes));
        } else {
            fits.push(s.logger_id);
        }
    }
    let range = |b: u64| format!("{:#x}-{b:#x}", b.saturating_sub(gran - 1));
    (c.how, c.evidence) = if let Some(&(id, b)) = small.first() {
        (
            H::Contradicted,
            format!(
                "logger {id}'s context is a {b:#x}-byte pool block ('EtwL'): the kernel's structure is {} bytes, too small for this layout",
                range(b)
            ),
        )
    } else if let Some(&(id, b)) = large.first() {
        (
            H::Unconfirmed,
            format!(
                "logger {id}'s context is a {b:#x}-byte pool block ('EtwL'): the kernel's structure may be {} bytes, larger than this layout{}",
                range(b),
                if fits.is_empty() { String::new() } else { format!(" (loggers {fits:?} fit it)") }
            ),
        )
    } else if fits.is_empty() {
        (
            H::Unconfirmed,
            "no session's context lies in a small-pool block whose size can be read".into(),
        )
    } else {
        (
            H::Confirmed,
            format!(
                "the 'EtwL' pool blocks of loggers {fits:?} hold exactly a structure of this size"
            ),
        )
    };
    c
}

fn read_slots(
    ctx: &KernelContext<'_>,
    layout: &StructLayout,
    arr: &LoggerArray,
    out: &mut SessionList,
) {
    let space = &ctx.space;
    let psize = space.arch().pointer_size();
    // Unreadable entries are summarised in one warning (a missing page holds 512 of them).
    let mut unreadable: Vec<u64> = Vec::new();
    let mut first_error = None;
    for slot in 0..arr.capacity {
        let slot_va = arr.address.offset(slot * psize);
        let value = match space.read_ptr(slot_va) {
            Ok(v) => v,
            Err(e) => {
                unreadable.push(slot);
                first_error.get_or_insert(e);
                continue;
            }
        };
        if value.get() == 0 || value.get() & 1 != 0 {
            out.free_slots += 1;
            continue;
        }
        // 5.x marks a slot whose logger is starting or stopping with a pointer back to the
        // array itself (etw-internals.md §1.2); later kernels use bit 0 only.
        if value == arr.address && ctx.build < 6000 {
            out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!(
                        "slot {slot}: points back to the array ({value}): a logger starting or stopping (in transition)"
                    ),
                )
                .slot(slot)
                .at(value),
            );
            continue;
        }
        match read_session(ctx, layout, arr, slot, value) {
            Ok(s) => out.sessions.push(s),
            Err((field, reason)) => {
                let mut w = Warning::new(
                    WarningKind::Anomaly,
                    format!("slot {slot}: {value} is not a logger context: {reason}"),
                )
                .slot(slot)
                .at(value);
                if let Some(f) = field {
                    w = w.field(format!("_WMI_LOGGER_CONTEXT.{f}"));
                }
                out.warnings.push(w);
                out.rejected.push(RejectedSlot {
                    slot,
                    value,
                    field,
                    reason,
                });
            }
        }
    }
    if let (Some(&first), Some(&last), Some(e)) =
        (unreadable.first(), unreadable.last(), first_error)
    {
        let w = if unreadable.len() == 1 {
            Warning::new(
                WarningKind::Unreadable,
                format!("slot {first}: the array entry is unreadable: {e}"),
            )
            .slot(first)
        } else {
            Warning::new(
                WarningKind::Unreadable,
                format!(
                    "{} slots between {first} and {last} are unreadable (not in the dump); the first: {e}",
                    unreadable.len()
                ),
            )
        };
        out.warnings.push(w.at(arr.address.offset(first * psize)));
    }
}

/// Reason a slot is not a logger: the field that denied it (if one did) and why.
type Rejection = (Option<&'static str>, String);

/// The identity of a logger context (the rule: `Session::identity`): the evidence found, or
/// why not.
fn identity(
    ctx: &KernelContext<'_>,
    v: &View<'_, '_>,
    arr: &LoggerArray,
    slot: u64,
    buffer_size: Option<u64>,
    name: &NameDescriptor,
) -> Result<Vec<&'static str>, Rejection> {
    let space = &ctx.space;
    let va = v.va;
    if !va.is_kernel(space.arch().width()) {
        return Err((None, "not a kernel address".into()));
    }
    if va.get() % space.arch().pointer_size() != 0 {
        return Err((None, "misaligned".into()));
    }
    let logger_id = v
        .uint("LoggerId")
        .map_err(|e| (Some("LoggerId"), e.to_string()))?;
    if logger_id != slot {
        return Err((
            Some("LoggerId"),
            format!("LoggerId is {logger_id}, not the slot index"),
        ));
    }
    let mut evidence = vec!["logger_id"];
    if let (Some(silo), true) = (arr.silo_state, v.has("SiloState")) {
        match v.ptr("SiloState") {
            Ok(back) if back == silo => evidence.push("silo_state"),
            Ok(back) => {
                return Err((
                    Some("SiloState"),
                    format!("SiloState is {back}, not the silo state {silo} the array belongs to"),
                ))
            }
            // Unreadable: no evidence either way.
            Err(_) => {}
        }
    }
    if buffer_size.is_some_and(plausible_buffer_size) {
        evidence.push("buffer_size");
    }
    if matches!(name, NameDescriptor::Sane { length, .. } if *length > 0) {
        evidence.push("logger_name");
    }
    let tag = crate::kernel::pool::tag_before(space, va);
    if tag == Some(*LOGGER_POOL_TAG) {
        evidence.push("pool_tag");
    }
    if evidence.len() == 1 {
        return Err((
            None,
            format!(
                "LoggerId equals the slot but nothing else says logger: BufferSize {}, LoggerName {}, pool tag {}",
                buffer_size.map_or("unreadable".into(), |b| format!("{b:#x}")),
                name.describe(),
                tag.map_or("unreadable".into(), |t| format!("'{}'", crate::bytes::tag_text(&t))),
            ),
        ));
    }
    Ok(evidence)
}

/// The pool tag of logger-context allocations ("EtwL - nt!etw - Etw LoggerContext" in
/// pooltag.txt; the reference texts name no tag, so it is evidence, never a requirement).
const LOGGER_POOL_TAG: &[u8; 4] = b"EtwL";

/// A UNICODE_STRING descriptor of a logger context as read.
enum NameDescriptor {
    Absent,
    Unreadable(String),
    Insane { length: u64, maximum_length: u64 },
    Sane { length: u64, us: UnicodeString },
}

impl NameDescriptor {
    fn read(v: &View<'_, '_>, field: &str) -> NameDescriptor {
        if !v.has(field) {
            return NameDescriptor::Absent;
        }
        let at = match v.field_va(field) {
            Ok(a) => a,
            Err(e) => return NameDescriptor::Unreadable(e.to_string()),
        };
        match UnicodeString::read(v.space, at) {
            Err(e) => NameDescriptor::Unreadable(format!("{}.{field} at {at}: {e}", v.layout.name)),
            Ok(us) if us.length > us.maximum_length || us.length % 2 != 0 => {
                NameDescriptor::Insane {
                    length: u64::from(us.length),
                    maximum_length: u64::from(us.maximum_length),
                }
            }
            Ok(us) => NameDescriptor::Sane {
                length: u64::from(us.length),
                us,
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            NameDescriptor::Absent => "absent from the layout".into(),
            NameDescriptor::Unreadable(_) => "unreadable".into(),
            NameDescriptor::Insane {
                length,
                maximum_length,
            } => format!("Length {length} MaximumLength {maximum_length}"),
            NameDescriptor::Sane { length: 0, .. } => "empty".into(),
            NameDescriptor::Sane { .. } => "sane".into(),
        }
    }

    /// The text: None (with a warning or an anomaly) when it cannot be read.
    fn text(
        &self,
        v: &View<'_, '_>,
        field: &'static str,
        warnings: &mut Vec<Warning>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Option<Untrusted> {
        match self {
            NameDescriptor::Absent => None,
            NameDescriptor::Unreadable(e) => {
                warnings.push(
                    Warning::new(WarningKind::Unreadable, e.clone())
                        .field(format!("{}.{field}", v.layout.name)),
                );
                None
            }
            NameDescriptor::Insane {
                length,
                maximum_length,
            } => {
                anomalies.push(Anomaly {
                    field,
                    value: *length,
                    why: format!(
                        "{field}.Length {length} is odd or exceeds MaximumLength {maximum_length}: the text is not read"
                    ),
                });
                None
            }
            NameDescriptor::Sane { length: 0, .. } => Some(Untrusted::default()),
            NameDescriptor::Sane { us, .. } => match us.text(v.space) {
                Ok(t) => Some(t),
                Err(e) => {
                    warnings.push(
                        Warning::new(
                            WarningKind::Unreadable,
                            format!(
                                "{}.{field}: the text at {} is unreadable: {e}",
                                v.layout.name, us.buffer
                            ),
                        )
                        .at(us.buffer)
                        .field(format!("{}.{field}", v.layout.name)),
                    );
                    None
                }
            },
        }
    }
}

/// Slack allowed between a logger's StartTime and the dump's SystemTime (clock skew and the
/// KUSER_SHARED_DATA update interval): 1 s.
const START_TIME_SLACK: u64 = 10_000_000;

/// The session of the logger context at `va` (`layout`), in slot `slot` of `arr`: its
/// fields, what is odd about them, its names and consumers; rejected when the context does not
/// look like one.
fn read_session(
    ctx: &KernelContext<'_>,
    layout: &StructLayout,
    arr: &LoggerArray,
    slot: u64,
    va: VirtAddr,
) -> Result<Session, Rejection> {
    let space = &ctx.space;
    let v = View::new(space, layout, va);
    let buffer_size = v.uint("BufferSize").ok();
    let name_desc = NameDescriptor::read(&v, "LoggerName");
    let identity = identity(ctx, &v, arr, slot, buffer_size, &name_desc)?;
    let mut warnings = Vec::new();
    let c = ContextCounts::read(&v, &mut warnings);
    if buffer_size.is_none() {
        if let Err(e) = v.uint("BufferSize") {
            warnings.push(e.warning());
        }
    }
    let mut anomalies = c.anomalies(ctx, buffer_size, va);
    let name = name_desc.text(&v, "LoggerName", &mut warnings, &mut anomalies);
    let log_file = NameDescriptor::read(&v, "LogFileName").text(
        &v,
        "LogFileName",
        &mut warnings,
        &mut anomalies,
    );
    let instance_guid = if v.has("InstanceGuid") {
        match v.bytes("InstanceGuid", 16) {
            Ok(b) => b.try_into().ok().map(|g: [u8; 16]| guid_text(&g)),
            Err(e) => {
                warnings.push(e.warning());
                None
            }
        }
    } else {
        None
    };
    let (consumers, consumer_warnings) = super::consumers::read(ctx, va, slot);
    warnings.extend(consumer_warnings);
    Ok(Session {
        logger_id: slot,
        name,
        log_file: log_file.filter(|s| !s.is_empty()),
        instance_guid,
        address: va,
        logger_mode: c.logger_mode,
        logger_mode_flags: c
            .logger_mode
            .map(|m| logger_mode_flags(m as u32))
            .unwrap_or_default(),
        clock_type: c.clock_type,
        clock_type_name: c.clock_type.and_then(clock_type_name),
        buffer_size,
        minimum_buffers: c.minimum_buffers,
        maximum_buffers: c.maximum_buffers,
        number_of_buffers: c.number_of_buffers,
        buffers_written: c.buffers_written,
        events_lost: c.events_lost,
        log_buffers_lost: c.log_buffers_lost,
        real_time_buffers_lost: c.real_time_buffers_lost,
        start_time: c
            .start_time_raw
            .filter(|&t| t != 0)
            .map(filetime_to_iso8601),
        pool_type: c.pool_type,
        layout_source: layout.source.name(),
        maximum_event_size: c.maximum_event_size,
        start_time_raw: c.start_time_raw,
        consumers,
        identity,
        anomalies,
        warnings,
    })
}

/// The numeric fields of a logger context (None: not in the layout, or unreadable).
struct ContextCounts {
    maximum_event_size: Option<u64>,
    clock_type: Option<u64>,
    number_of_buffers: Option<u64>,
    maximum_buffers: Option<u64>,
    logger_mode: Option<u64>,
    minimum_buffers: Option<u64>,
    buffers_written: Option<u64>,
    events_lost: Option<u64>,
    log_buffers_lost: Option<u64>,
    real_time_buffers_lost: Option<u64>,
    start_time_raw: Option<u64>,
    pool_type: Option<u64>,
}

impl ContextCounts {
    /// Read them from the context `v`; a field the layout has but the dump cannot give is a
    /// warning.
    fn read(v: &View<'_, '_>, warnings: &mut Vec<Warning>) -> ContextCounts {
        let mut opt = |name: &str| -> Option<u64> {
            if !v.has(name) {
                return None;
            }
            match v.uint(name) {
                Ok(x) => Some(x),
                Err(e) => {
                    warnings.push(e.warning());
                    None
                }
            }
        };
        ContextCounts {
            maximum_event_size: opt("MaximumEventSize"),
            clock_type: opt("ClockType"),
            number_of_buffers: opt("NumberOfBuffers"),
            maximum_buffers: opt("MaximumBuffers"),
            logger_mode: opt("LoggerMode"),
            minimum_buffers: opt("MinimumBuffers"),
            buffers_written: opt("BuffersWritten"),
            events_lost: opt("EventsLost"),
            log_buffers_lost: opt("LogBuffersLost"),
            real_time_buffers_lost: opt("RealTimeBuffersLost"),
            start_time_raw: opt("StartTime"),
            pool_type: opt("PoolType"),
        }
    }

    /// What is odd about them (with the context's `buffer_size`) and about the pool tag
    /// before the context at `va`.
    fn anomalies(
        &self,
        ctx: &KernelContext<'_>,
        buffer_size: Option<u64>,
        va: VirtAddr,
    ) -> Vec<Anomaly> {
        let mut anomalies = Vec::new();
        let mut odd = |field: &'static str, value: u64, why: String| {
            anomalies.push(Anomaly { field, value, why })
        };
        if let Some(b) = buffer_size {
            if !plausible_buffer_size(b) {
                odd(
                    "BufferSize",
                    b,
                    format!(
                        "{b:#x} is outside 1 KiB-64 MiB: buffers are checked by their own BufferSize"
                    ),
                );
            } else if b % 0x400 != 0 {
                odd(
                    "BufferSize",
                    b,
                    format!("{b:#x} is not a multiple of 1 KiB"),
                );
            }
            if let Some(m) = self.maximum_event_size.filter(|&m| m > b) {
                odd(
                    "MaximumEventSize",
                    m,
                    format!("{m:#x} exceeds BufferSize {b:#x}"),
                );
            }
        }
        if let Some(c) = self.clock_type.filter(|&c| c > 3) {
            odd(
                "ClockType",
                c,
                format!("{c} is not a clock type (0-3): times are not converted"),
            );
        }
        if let (Some(n), Some(m)) = (self.number_of_buffers, self.maximum_buffers) {
            if n > m {
                odd(
                    "NumberOfBuffers",
                    n,
                    format!("{n} exceeds MaximumBuffers {m} (a count caught mid-update, limits changed while the session ran, or damage); the buffer walks do not rely on it"),
                );
            }
        }
        if let (Some(n), Some(m)) = (self.minimum_buffers, self.maximum_buffers) {
            if n > m {
                odd(
                    "MinimumBuffers",
                    n,
                    format!("{n} exceeds MaximumBuffers {m}"),
                );
            }
        }
        if let (Some(t), Some(now)) = (
            self.start_time_raw.filter(|&t| t != 0),
            dump_system_time(ctx),
        ) {
            if t > now.saturating_add(START_TIME_SLACK) {
                odd(
                    "StartTime",
                    t,
                    format!(
                        "{} is after the dump's SystemTime {}",
                        filetime_to_iso8601(t),
                        filetime_to_iso8601(now)
                    ),
                );
            }
        }
        let tag = crate::kernel::pool::tag_before(&ctx.space, va);
        if let Some(t) = tag.filter(|t| t != LOGGER_POOL_TAG) {
            odd(
                "PoolTag",
                u64::from(u32::from_le_bytes(t)),
                format!(
                    "the pool header before the context says '{}', not 'EtwL'",
                    crate::bytes::tag_text(&t)
                ),
            );
        }
        anomalies
    }
}

/// The dump's SystemTime: KUSER_SHARED_DATA, else the dump header.
pub(crate) fn dump_system_time(ctx: &KernelContext<'_>) -> Option<u64> {
    ctx.kuser
        .as_ref()
        .ok()
        .and_then(|k| k.system_time)
        .or(Some(ctx.dump.header().system_time))
        .filter(|&t| t != 0 && t <= crate::time::MAX_FILETIME)
}

/// A kernel session (etw-internals.md §4.1): the NT Kernel Logger (logger 0 or its name) or a
/// crate::etw::mode::SYSTEM_LOGGER_MODE session; these are the ones pending CCSWAP batches are flushed to.
pub(crate) fn is_kernel_session(s: &Session) -> bool {
    s.logger_id == 0
        || s.name.as_ref().is_some_and(|n| n == "NT Kernel Logger")
        || s.logger_mode
            .is_some_and(|m| m & crate::etw::mode::SYSTEM_LOGGER_MODE != 0)
}
