//! The host silo state found from the logger contexts, and which layout of its structures
//! the dump has (issue 26: "where several layouts of one build exist, choose by evidence").
//!
//! Since 1607 every `_WMI_LOGGER_CONTEXT` keeps a `SiloState` pointer to the silo state
//! whose logger array holds it, and the silo state keeps that array (`EtwpLoggerContext`, a
//! pointer, 1709+; `WmipLoggerContext`, inline, 1511-1703). Without the `EtwpHostSiloState`
//! RVA (no symbols, a build the built-in table has no RVAs for) the array is still reached
//! through the KDBG (`EtwpDebuggerData + 0x10`); the contexts in it then name the silo state,
//! and it has the silo state's identity only when its array field, at the offset of the
//! layout, leads back to the array. One pointer-sized comparison per candidate layout:
//!
//! * it confirms (or contradicts) a nearest-earlier `_ETW_SILODRIVERSTATE` layout;
//! * where the table holds two public layouts of the build (26100: `_ETW_SILODRIVERSTATE`
//!   0x1238 with the array at +0x1C8, or 0x1348 with it at +0x2C8, the silo state embedding
//!   a `_ETW_GUID_ENTRY` of 0x1A8 or 0x2A8 bytes), the one whose offset leads back is chosen,
//!   with its `_ETW_GUID_ENTRY` and `_ETW_REG_ENTRY`;
//! * the silo state found lets `providers`, `check` and the per-CPU buffers
//!   (`ProcessorBlocks`) work without the RVA.

use crate::addr::VirtAddr;
use crate::kernel::context::{KernelContext, LocatedHow, SiloLayout};
use crate::kernel::view::View;
use crate::symbols::{LayoutSource, StructLayout, TypeRef};

/// The structures a second layout of the build replaces together (they embed one another).
const SILO_TYPES: &[&str] = &["_ETW_SILODRIVERSTATE", "_ETW_GUID_ENTRY", "_ETW_REG_ENTRY"];

/// At most this many logger slots are read (the registry allows up to 256 loggers).
const MAX_SLOTS: u64 = 256;

/// The host silo state and its layout for this dump (computed once).
pub fn check<'a>(ctx: &'a KernelContext<'_>) -> &'a SiloLayout {
    ctx.silo.get_or_init(|| compute(ctx))
}

/// The layout of `name` for this dump: the chosen layout's where evidence chose another
/// layout of the build ([`check`]), else the symbols'.
pub fn layout<'a>(ctx: &'a KernelContext<'_>, name: &str) -> Option<&'a StructLayout> {
    if SILO_TYPES.contains(&name) {
        if let Some(l) = check(ctx).layouts.iter().find(|l| l.name == name) {
            return Some(l);
        }
    }
    ctx.symbols.layout(name)
}

/// The logger array the KDBG names (`KDDEBUGGER_DATA64.EtwpDebuggerData + 0x10`).
pub(crate) fn kdbg_logger_array(ctx: &KernelContext<'_>) -> Option<VirtAddr> {
    let d = ctx.kdbg()?.etwp_debugger_data()?;
    let d = ctx.space.normalize(d).ok()?;
    let arr = ctx.space.read_ptr(d.offset(0x10)).ok()?;
    (!arr.is_null()).then_some(arr)
}

/// Where a silo layout keeps the logger array: (offset, true when a pointer to the array,
/// false when the array is inline).
fn array_field(l: &StructLayout) -> Option<(u64, bool)> {
    if let Some(f) = l.field("EtwpLoggerContext") {
        return Some((f.offset, f.ty.is_pointer()));
    }
    l.field("WmipLoggerContext")
        .filter(|f| matches!(f.ty, TypeRef::Array { .. }))
        .map(|f| (f.offset, false))
}

fn compute(ctx: &KernelContext<'_>) -> SiloLayout {
    let mut out = SiloLayout::default();
    let Some(in_use) = ctx.symbols.layout("_ETW_SILODRIVERSTATE") else {
        out.evidence = "this build's layouts have no silo state".into();
        return out;
    };
    let own = !matches!(
        in_use.source,
        LayoutSource::Builtin | LayoutSource::BuiltinNearest
    );
    // The other layouts of the build the table holds (only with a nearest-earlier entry).
    let others: Vec<&'static crate::symbols::builtin::corpus::CorpusBuild> =
        match &ctx.symbols.builtin_corpus {
            Some(c) if !own && c.kind == crate::symbols::CorpusMatch::Nearest => {
                crate::symbols::builtin::corpus::entries()
                    .iter()
                    .find(|b| b.version == c.version && b.variant.is_none())
                    .map(crate::symbols::builtin::corpus::variants)
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
    // With the kernel's own layouts and the host silo's global, nothing to decide.
    if own && ctx.global("EtwpHostSiloState").is_some() {
        out.how = Some(LocatedHow::Symbols);
        out.evidence = "the kernel's own layout; the silo state from EtwpHostSiloState".into();
        return out;
    }
    let Some(arr) = kdbg_logger_array(ctx) else {
        out.evidence = "no logger array through KDBG.EtwpDebuggerData to weigh it against".into();
        return out;
    };
    let Some(ctx_layout) = ctx.symbols.layout("_WMI_LOGGER_CONTEXT") else {
        out.evidence = "no _WMI_LOGGER_CONTEXT layout".into();
        return out;
    };
    if ctx_layout.field("LoggerId").is_none() || ctx_layout.field("SiloState").is_none() {
        out.evidence = "the _WMI_LOGGER_CONTEXT layout has no SiloState (before 1607)".into();
        return out;
    }
    let Some((silo, n, voters)) = vote(ctx, ctx_layout, arr) else {
        out.evidence = format!(
            "no logger context of the array at {arr} (KDBG) passed its identity and named a silo state"
        );
        return out;
    };
    let space = &ctx.space;
    // Which layouts have the array where the silo state keeps it.
    let fits = |l: &StructLayout| -> Option<bool> {
        let (off, ptr) = array_field(l)?;
        Some(if ptr {
            space.read_ptr(silo.offset(off)).ok()? == arr
        } else {
            silo.offset(off) == arr
        })
    };
    let describe = |l: &StructLayout| {
        array_field(l).map_or("no logger array field".to_string(), |(o, p)| {
            if p {
                format!("+{o:#x} (EtwpLoggerContext)")
            } else {
                format!("+{o:#x} (WmipLoggerContext, inline)")
            }
        })
    };
    let in_use_fits = fits(in_use);
    let mut variant_fits: Vec<(&str, &StructLayout)> = Vec::new();
    for b in &others {
        if let Some(l) = b.layout("_ETW_SILODRIVERSTATE") {
            if fits(l) == Some(true) {
                variant_fits.push((b.variant.as_deref().unwrap_or("?"), l));
            }
        }
    }
    let named =
        format!("{n} of {voters} logger contexts (LoggerId = slot) name the silo state {silo}");
    match (in_use_fits, variant_fits.as_slice()) {
        (Some(true), []) => {
            out.address = Some(silo);
            out.how = Some(if own {
                LocatedHow::Symbols
            } else {
                LocatedHow::Confirmed
            });
            out.evidence = format!(
                "{named}, whose array field at {} of this layout ({:#x} bytes) holds the logger array {arr}{}",
                describe(in_use),
                in_use.size,
                if others.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; the build's other layout ({}) does not",
                        others
                            .iter()
                            .filter_map(|b| b.variant.as_deref())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
        }
        (Some(true), [(label, _), ..]) | (Some(false) | None, [(label, _), _, ..]) => {
            out.address = Some(silo);
            out.how = Some(LocatedHow::Ambiguous);
            out.evidence = format!(
                "{named}; both the layout in use and {label} have the logger array {arr} where it points: the layout in use is kept, unconfirmed"
            );
        }
        (Some(false) | None, [(label, l)]) => {
            let Some(b) = others.iter().find(|b| b.variant.as_deref() == Some(*label)) else {
                return out;
            };
            out.address = Some(silo);
            out.how = Some(LocatedHow::Confirmed);
            out.chosen = Some(label.to_string());
            out.layouts = SILO_TYPES
                .iter()
                .filter_map(|t| b.layout(t))
                .map(|l| {
                    let mut l = l.clone();
                    l.source = LayoutSource::BuiltinNearest;
                    l
                })
                .collect();
            out.evidence = format!(
                "{named}; its array field is at {} as in the build's layout {label} ({:#x} bytes), not at {} as in the first ({:#x} bytes): {label}'s _ETW_SILODRIVERSTATE, _ETW_GUID_ENTRY and _ETW_REG_ENTRY are used",
                describe(l),
                l.size,
                describe(in_use),
                in_use.size
            );
        }
        (_, []) => {
            out.how = Some(LocatedHow::Contradicted);
            out.evidence = format!(
                "{named}, but its array field at {} of this layout does not hold the logger array {arr}{}: it is not used as the silo state",
                describe(in_use),
                if others.is_empty() { "" } else { ", nor does any other layout of the build" }
            );
        }
    }
    out
}

/// The silo state the logger contexts of the array at `arr` name: each context that passes
/// its identity (LoggerId == slot) votes with its SiloState. (address, its votes, voters).
fn vote(
    ctx: &KernelContext<'_>,
    ctx_layout: &StructLayout,
    arr: VirtAddr,
) -> Option<(VirtAddr, u64, u64)> {
    let space = &ctx.space;
    let psize = space.arch().pointer_size();
    let mut votes: Vec<(VirtAddr, u64)> = Vec::new();
    let mut voters = 0u64;
    for slot in 0..MAX_SLOTS {
        let Ok(v) = space.read_ptr(arr.offset(slot * psize)) else {
            break;
        };
        if v.is_null() || v.get() & 1 != 0 || !v.is_kernel(space.arch().width()) {
            continue;
        }
        let view = View::new(space, ctx_layout, v);
        if view.uint("LoggerId").ok() != Some(slot) {
            continue;
        }
        let Ok(s) = view.ptr("SiloState") else {
            continue;
        };
        if s.is_null() {
            continue;
        }
        voters += 1;
        match votes.iter_mut().find(|(a, _)| *a == s) {
            Some((_, n)) => *n += 1,
            None => votes.push((s, 1)),
        }
    }
    votes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    votes.first().map(|&(s, n)| (s, n, voters))
}
