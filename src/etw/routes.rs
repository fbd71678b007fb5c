//! The routes to the kernel's ETW state, one table each (etw-internals.md §1.1, §3.3, §4.1):
//!
//! - **the logger-context array**: `EtwpHostSiloState` (or `PspHostSiloGlobals.EtwSiloState`)
//!   → `_ETW_SILODRIVERSTATE`, whose `EtwpLoggerContext` points to `MaxLoggers` pointers
//!   (1709+) or whose `WmipLoggerContext` is the inline array (1511-1703); the global
//!   `WmipLoggerContext` array (XP-1507); and `KDDEBUGGER_DATA64.EtwpDebuggerData` + 0x10 (no
//!   symbols needed). [`resolve_logger_array`] follows every route once and returns both the
//!   arrays found (for `sessions`) and each root with whether the dump holds it (for `info`).
//! - **the EtwSupport block** (`_KPRCB.EtwSupport`, x64): [`ETW_SUPPORT_ROUTES`], the
//!   documented offsets of the per-CPU current-buffer route and of the pending compact
//!   context-switch block pointers, identified by the build's `_KPRCB.EtwSupport` offset.

use crate::addr::VirtAddr;
use crate::dump::Arch;
use crate::kernel::context::KernelContext;
use crate::kernel::view::View;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Largest MaxLoggers accepted (the registry allows 32-256).
pub(crate) const MAX_CAPACITY: u64 = 1024;
/// Capacity used when nothing says otherwise (MAXLOGGERS).
pub(crate) const DEFAULT_CAPACITY: u64 = 64;

/// How the array was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `_ETW_SILODRIVERSTATE.EtwpLoggerContext` (pointer) and MaxLoggers (1709+).
    SiloPointer,
    /// `_ETW_SILODRIVERSTATE.WmipLoggerContext[64]` (1511-1703).
    SiloInline,
    /// The global `WmipLoggerContext` array (XP-1507).
    GlobalArray,
    /// `KDDEBUGGER_DATA64.EtwpDebuggerData` + 0x10.
    KdbgEtwpDebuggerData,
}

impl Route {
    /// What the route reads, for the output.
    pub fn describe(self) -> &'static str {
        match self {
            Route::SiloPointer => "EtwpHostSiloState -> _ETW_SILODRIVERSTATE.EtwpLoggerContext",
            Route::SiloInline => "EtwpHostSiloState -> _ETW_SILODRIVERSTATE.WmipLoggerContext[64]",
            Route::GlobalArray => "global WmipLoggerContext[]",
            Route::KdbgEtwpDebuggerData => "KDBG.EtwpDebuggerData + 0x10",
        }
    }
}

/// The array as one route found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoggerArray {
    pub route: Route,
    pub address: VirtAddr,
    pub capacity: u64,
    /// The silo state the array belongs to, when reached through it.
    pub silo_state: Option<VirtAddr>,
}

/// One root of the ETW state and what the dump says about it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct EtwRoot {
    /// e.g. "EtwpHostSiloState", "logger array (EtwpLoggerContext)".
    pub name: String,
    /// Where it is, when known.
    pub address: Option<VirtAddr>,
    /// The bytes at `address` are in the dump.
    pub present: bool,
    /// The pointer it holds, for pointer roots.
    pub value: Option<VirtAddr>,
    /// How it was found, or why it could not be.
    pub note: String,
}

/// What following every route gave.
#[derive(Clone, Debug, Default)]
pub struct Resolution {
    /// The arrays found, in order of preference (the silo state's, the global array, the
    /// KDBG's).
    pub arrays: Vec<LoggerArray>,
    /// Every root the symbols and the KDBG allow to locate, with its presence.
    pub roots: Vec<EtwRoot>,
    /// Why a route gave nothing, and disagreements between them.
    pub warnings: Vec<Warning>,
    /// The host silo state (`EtwpHostSiloState`, else `PspHostSiloGlobals.EtwSiloState`),
    /// where the build has one and it was read.
    pub silo_state: Option<VirtAddr>,
}

impl Resolution {
    fn root(
        &mut self,
        name: &str,
        address: Option<VirtAddr>,
        present: bool,
        value: Option<VirtAddr>,
        note: impl Into<String>,
    ) {
        self.roots.push(EtwRoot {
            name: name.to_string(),
            address,
            present,
            value,
            note: note.into(),
        });
    }
}

/// Follow every route to the logger-context array.
pub fn resolve_logger_array(ctx: &KernelContext<'_>) -> Resolution {
    let mut r = Resolution::default();
    let silo = host_silo_state(ctx, &mut r);
    r.silo_state = silo;
    let global = global_array(ctx, &mut r);
    let host_read = r
        .roots
        .iter()
        .any(|x| x.name == "EtwpHostSiloState" && x.present);
    if let Some(s) = silo {
        silo_arrays(ctx, s, &mut r);
    } else if ctx.symbols.rva("EtwpHostSiloState").is_some() && !host_read {
        r.root(
            "logger array",
            None,
            false,
            None,
            "unknown: EtwpHostSiloState is not in the dump",
        );
    }
    r.arrays.extend(global);
    kdbg_array(ctx, &mut r);
    if ctx.build < 2600 {
        // etw-internals.md §1.1: 5.0 keeps its 32 logger pointers in the WMI service device's
        // extension (WMISERVDEVEXT.LoggerContextTable), a route only inferred from one source.
        r.warnings.clear();
        r.warnings.push(Warning::new(WarningKind::Unsupported, format!(
            "Windows 2000 (build {}) keeps its 32 logger contexts in the WMI service device extension (WmipServiceDeviceObject -> WMISERVDEVEXT.LoggerContextTable); etwdump does not support that route",
            ctx.build
        )));
        r.arrays.clear();
    }
    r
}

/// The host silo state, by its two names (`EtwpHostSiloState`, `PspHostSiloGlobals
/// .EtwSiloState`); the first non-NULL one is followed, a disagreement is a warning.
fn host_silo_state(ctx: &KernelContext<'_>, r: &mut Resolution) -> Option<VirtAddr> {
    let space = &ctx.space;
    let mut silos: Vec<VirtAddr> = Vec::new();
    const HOST: &str = "EtwpHostSiloState";
    match ctx.global(HOST) {
        None => r.root(HOST, None, false, None, missing_symbol(ctx, HOST)),
        Some(va) => match space.read_ptr(va) {
            Ok(v) => {
                r.root(HOST, Some(va), true, Some(v), "symbol");
                if !v.is_null() {
                    silos.push(v);
                } else {
                    r.warnings.push(
                        Warning::new(WarningKind::NotFound, format!("{HOST} at {va} is NULL"))
                            .at(va)
                            .field(HOST),
                    );
                }
            }
            Err(e) => {
                r.root(HOST, Some(va), false, None, e.to_string());
                r.warnings.push(
                    Warning::new(WarningKind::Unreadable, format!("{HOST}: {e}"))
                        .at(va)
                        .field(HOST),
                );
            }
        },
    }
    const GLOBALS: &str = "PspHostSiloGlobals.EtwSiloState";
    if let Some(va) = ctx.global("PspHostSiloGlobals") {
        match ctx.symbols.layout("_ESERVERSILO_GLOBALS") {
            Some(l) if l.field("EtwSiloState").is_some() => {
                let v = View::new(space, l, va);
                let at = v.field_va("EtwSiloState").ok();
                match v.ptr("EtwSiloState") {
                    Ok(p) => {
                        r.root(
                            GLOBALS,
                            at,
                            true,
                            Some(p),
                            "symbol + _ESERVERSILO_GLOBALS layout",
                        );
                        if !p.is_null() {
                            silos.push(p);
                        }
                    }
                    Err(e) => {
                        r.root(GLOBALS, at, false, None, e.to_string());
                        r.warnings.push(
                            Warning::new(WarningKind::Unreadable, e.to_string()).field(GLOBALS),
                        );
                    }
                }
            }
            _ => r.root(
                GLOBALS,
                Some(va),
                false,
                None,
                "no _ESERVERSILO_GLOBALS.EtwSiloState layout",
            ),
        }
    }
    if silos.len() == 2 && silos[0] != silos[1] {
        r.warnings.push(Warning::new(
            WarningKind::Conflict,
            format!(
                "EtwpHostSiloState points to {} but PspHostSiloGlobals.EtwSiloState to {} (this can mean tampering)",
                silos[0], silos[1]
            ),
        ));
    }
    silos.first().copied()
}

/// The global `WmipLoggerContext` array (XP-1507).
fn global_array(ctx: &KernelContext<'_>, r: &mut Resolution) -> Option<LoggerArray> {
    let va = ctx.global("WmipLoggerContext")?;
    let mut b = [0u8; 8];
    let present = ctx
        .space
        .try_read(va, &mut b[..ctx.space.arch().pointer_size() as usize])
        .ok()
        .flatten()
        .is_some();
    r.root(
        "WmipLoggerContext",
        Some(va),
        present,
        None,
        "global array (XP-1507)",
    );
    Some(LoggerArray {
        route: Route::GlobalArray,
        address: va,
        capacity: if ctx.build < 2600 {
            32
        } else {
            DEFAULT_CAPACITY
        },
        silo_state: None,
    })
}

/// The arrays of the silo state at `silo`: `EtwpLoggerContext` + `MaxLoggers` (1709+) or the
/// inline `WmipLoggerContext` (1511-1703). Counts from memory or the symbol file are bounded.
fn silo_arrays(ctx: &KernelContext<'_>, silo: VirtAddr, r: &mut Resolution) {
    let space = &ctx.space;
    let Some(l) = crate::etw::silo::layout(ctx, "_ETW_SILODRIVERSTATE") else {
        r.root(
            "logger array",
            None,
            false,
            None,
            "no _ETW_SILODRIVERSTATE layout for this build",
        );
        r.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "no _ETW_SILODRIVERSTATE layout for build {}: the silo state at {silo} cannot be read",
                    ctx.build
                ),
            )
            .at(silo)
            .field("_ETW_SILODRIVERSTATE"),
        );
        return;
    };
    let v = View::new(space, l, silo);
    let in_dump = |a: VirtAddr| space.try_read(a, &mut [0u8; 8]).ok().flatten().is_some();
    const POINTER: &str = "logger array (EtwpLoggerContext)";
    if v.has("EtwpLoggerContext") {
        let arr = match v.ptr("EtwpLoggerContext") {
            Ok(a) => a,
            Err(e) => {
                r.root(
                    POINTER,
                    v.field_va("EtwpLoggerContext").ok(),
                    false,
                    None,
                    e.to_string(),
                );
                r.warnings.push(
                    Warning::new(WarningKind::Unreadable, e.to_string())
                        .at(silo)
                        .field("_ETW_SILODRIVERSTATE.EtwpLoggerContext"),
                );
                return;
            }
        };
        let max = v.uint("MaxLoggers");
        r.root(
            POINTER,
            Some(arr),
            in_dump(arr),
            None,
            match &max {
                Ok(n) => format!("_ETW_SILODRIVERSTATE.EtwpLoggerContext, MaxLoggers {n}"),
                Err(_) => "_ETW_SILODRIVERSTATE.EtwpLoggerContext".into(),
            },
        );
        if arr.is_null() {
            r.warnings.push(
                Warning::new(
                    WarningKind::NotFound,
                    format!("_ETW_SILODRIVERSTATE.EtwpLoggerContext at {silo} is NULL"),
                )
                .at(silo)
                .field("_ETW_SILODRIVERSTATE.EtwpLoggerContext"),
            );
            return;
        }
        let capacity = match max {
            Ok(n) if (1..=MAX_CAPACITY).contains(&n) => n,
            Ok(n) => {
                let at = v.field_va("MaxLoggers").unwrap_or(silo);
                r.warnings.push(
                    Warning::new(
                        WarningKind::Anomaly,
                        format!(
                            "_ETW_SILODRIVERSTATE.MaxLoggers at {at} is {n}, outside 1-{MAX_CAPACITY}; reading {DEFAULT_CAPACITY} slots"
                        ),
                    )
                    .at(at)
                    .field("_ETW_SILODRIVERSTATE.MaxLoggers"),
                );
                DEFAULT_CAPACITY
            }
            Err(e) => {
                r.warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("{e}; reading {DEFAULT_CAPACITY} slots"),
                    )
                    .field("_ETW_SILODRIVERSTATE.MaxLoggers"),
                );
                DEFAULT_CAPACITY
            }
        };
        r.arrays.push(LoggerArray {
            route: Route::SiloPointer,
            address: arr,
            capacity,
            silo_state: Some(silo),
        });
    } else if let Ok(f) = v.field("WmipLoggerContext") {
        let arr = silo.offset(f.offset);
        r.root(
            "logger array (WmipLoggerContext[64] in the silo state)",
            Some(arr),
            in_dump(arr),
            None,
            "inline array",
        );
        // The count comes from the symbol file: bounded like MaxLoggers.
        let capacity = match &f.ty {
            crate::symbols::TypeRef::Array { count, .. } if (1..=MAX_CAPACITY).contains(count) => {
                *count
            }
            crate::symbols::TypeRef::Array { count, .. } => {
                r.warnings.push(
                    Warning::new(
                        WarningKind::Anomaly,
                        format!(
                            "the symbols give _ETW_SILODRIVERSTATE.WmipLoggerContext {count} entries, outside 1-{MAX_CAPACITY}; reading {DEFAULT_CAPACITY} slots"
                        ),
                    )
                    .field("_ETW_SILODRIVERSTATE.WmipLoggerContext"),
                );
                DEFAULT_CAPACITY
            }
            _ => DEFAULT_CAPACITY,
        };
        r.arrays.push(LoggerArray {
            route: Route::SiloInline,
            address: arr,
            capacity,
            silo_state: Some(silo),
        });
    }
}

/// The symbol-less route: `KDDEBUGGER_DATA64.EtwpDebuggerData` (+0x330 in the KDBG) + 0x10.
fn kdbg_array(ctx: &KernelContext<'_>, r: &mut Resolution) {
    const NAME: &str = "KDBG.EtwpDebuggerData (+0x10: logger array)";
    let space = &ctx.space;
    let Some(d) = ctx
        .kdbg()
        .and_then(|k| k.etwp_debugger_data())
        .and_then(|d| space.normalize(d).ok())
    else {
        return;
    };
    match space.read_ptr(d.offset(0x10)) {
        Ok(arr) => {
            r.root(NAME, Some(d), true, Some(arr), "KDDEBUGGER_DATA64 +0x330");
            if !arr.is_null() {
                let capacity = match r.arrays.first() {
                    Some(a) => a.capacity,
                    None if ctx.build >= 16299 => capacity_from_pool(ctx, arr, &mut r.warnings),
                    None => DEFAULT_CAPACITY,
                };
                // Without the host silo's global, the silo state the logger contexts name,
                // once it leads back to this array (etw::silo).
                let silo_state = match r.silo_state {
                    Some(s) => Some(s),
                    None => inferred_silo(ctx, r),
                };
                r.arrays.push(LoggerArray {
                    route: Route::KdbgEtwpDebuggerData,
                    address: arr,
                    capacity,
                    silo_state,
                });
            }
        }
        Err(e) => {
            r.root(NAME, Some(d), false, None, e.to_string());
            r.warnings.push(
                Warning::new(
                    WarningKind::Unreadable,
                    format!("KDBG.EtwpDebuggerData + 0x10: {e}"),
                )
                .at(d.offset(0x10))
                .field("KDDEBUGGER_DATA64.EtwpDebuggerData"),
            );
        }
    }
}

/// The host silo state found from the logger contexts ([`crate::etw::silo::check`]), as a
/// root; a layout memory contradicts, or cannot tell from another, is a warning.
fn inferred_silo(ctx: &KernelContext<'_>, r: &mut Resolution) -> Option<VirtAddr> {
    use crate::kernel::context::LocatedHow as H;
    let c = crate::etw::silo::check(ctx);
    let how = c.how?;
    if matches!(how, H::Contradicted | H::Ambiguous) {
        r.warnings.push(
            Warning::new(
                WarningKind::Unconfirmed,
                format!(
                    "_ETW_SILODRIVERSTATE layout {}: {}",
                    if how == H::Ambiguous {
                        "ambiguous"
                    } else {
                        "contradicted by memory"
                    },
                    c.evidence
                ),
            )
            .field("_ETW_SILODRIVERSTATE"),
        );
    }
    let s = c.address?;
    r.root(
        "host silo state (the logger contexts' SiloState)",
        Some(s),
        true,
        None,
        c.evidence.clone(),
    );
    r.silo_state = Some(s);
    Some(s)
}

/// MaxLoggers of a 1709+ array reached without symbols: the array is a pool allocation of
/// MaxLoggers pointers, so its POOL_HEADER's BlockSize bounds it (the pool rounds the size up,
/// so a few slots past the end may be read: they are judged like any slot). Accepted when it
/// gives 32-256 slots (the registry's range, etw-internals.md §1.1); else 64, said so.
fn capacity_from_pool(ctx: &KernelContext<'_>, arr: VirtAddr, warnings: &mut Vec<Warning>) -> u64 {
    let psize = ctx.space.arch().pointer_size();
    match crate::kernel::pool::block_bytes(&ctx.space, arr).map(|b| b / psize) {
        Some(n) if (32..=256).contains(&n) => {
            warnings.push(
                Warning::new(
                    WarningKind::Inferred,
                    format!(
                        "the logger array's capacity (MaxLoggers) is not known (no silo state was readable): reading {n} slots, the size of the array's pool allocation (BlockSize; an upper bound)"
                    ),
                )
                .at(arr),
            );
            n
        }
        other => {
            warnings.push(
                Warning::new(
                    WarningKind::NotFound,
                    format!(
                        "the logger array's capacity (MaxLoggers) is unknown (no silo state was readable){}; reading {DEFAULT_CAPACITY} slots (Windows 10 1709+ may have up to 256)",
                        match other {
                            Some(n) => format!(" (its pool header says {n} slots, outside 32-256)"),
                            None => String::new(),
                        }
                    ),
                )
                .at(arr),
            );
            DEFAULT_CAPACITY
        }
    }
}

fn missing_symbol(ctx: &KernelContext<'_>, name: &str) -> String {
    if ctx.base.is_none() {
        "the kernel base is unknown".into()
    } else if ctx.symbols.symbol_count() == 0 {
        "no symbols (give --pdb, --isf or --symbols)".into()
    } else {
        format!("the symbols have no {name}")
    }
}

/// How a CPU's current buffer of logger `id` hangs off its EtwSupport block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferRoute {
    /// `*(EtwSupport + off + 8·id)`.
    Direct(u64),
    /// `(*(EtwSupport + off))[id]`.
    Indirect(u64),
}

/// One documented layout of the EtwSupport block (x64).
#[derive(Clone, Copy, Debug)]
pub struct EtwSupportRoute {
    /// The build's `_KPRCB.EtwSupport` offset, which identifies the layout (§3.3, §4.1).
    pub kprcb_offset: u64,
    /// Builds the layout is known for, used when the KPRCB offset is not one of the table's.
    pub builds: (u32, u32),
    /// The per-CPU current-buffer route, where documented (1703 keeps them in the silo
    /// state's ProcessorBlocks instead).
    pub buffers: Option<BufferRoute>,
    /// Offset of the clock-0 pointer of the pending CCSWAP block group (+8 per clock type).
    pub pending: u64,
    /// What the reference calls it.
    pub name: &'static str,
}

/// The documented EtwSupport layouts (etw-internals.md §3.3, §4.1).
pub const ETW_SUPPORT_ROUTES: &[EtwSupportRoute] = &[
    EtwSupportRoute {
        kprcb_offset: 0x5FD8,
        builds: (10240, 14393),
        buffers: Some(BufferRoute::Direct(0x40)),
        pending: 0xB20,
        name: "KPRCB.EtwSupport route",
    },
    EtwSupportRoute {
        kprcb_offset: 0x60D0,
        builds: (15063, 15063),
        buffers: None,
        pending: 0x6D8,
        name: "KPRCB.EtwSupport route (1703)",
    },
    EtwSupportRoute {
        kprcb_offset: 0x8BE8,
        builds: (0, 0),
        buffers: Some(BufferRoute::Indirect(0x140)),
        pending: 0x198,
        name: "KPRCB.EtwSupport + 0x140 route",
    },
];

/// The documented EtwSupport layout of this kernel: by its `_KPRCB.EtwSupport` offset, else
/// by build number. None on x86 (no documented offsets) and on other builds (searched).
pub(crate) fn etw_support_route(
    arch: Arch,
    build: u32,
    kprcb_offset: u64,
) -> Option<&'static EtwSupportRoute> {
    match arch {
        Arch::X86 { .. } => return None,
        Arch::X64 => {}
        Arch::Arm64 => {} // ARM64 takes the x64 routes today
    }
    ETW_SUPPORT_ROUTES
        .iter()
        .find(|r| r.kprcb_offset == kprcb_offset)
        .or_else(|| {
            ETW_SUPPORT_ROUTES
                .iter()
                .find(|r| (r.builds.0..=r.builds.1).contains(&build) && r.builds.0 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etw_support_routes_by_kprcb_offset_then_build() {
        let r = etw_support_route(Arch::X64, 19041, 0x5FD8).unwrap();
        assert_eq!(
            (r.pending, r.buffers),
            (0xB20, Some(BufferRoute::Direct(0x40)))
        );
        let r = etw_support_route(Arch::X64, 14393, 0x1234).unwrap();
        assert_eq!(r.kprcb_offset, 0x5FD8);
        let r = etw_support_route(Arch::X64, 15063, 0x9999).unwrap();
        assert_eq!((r.pending, r.buffers), (0x6D8, None));
        let r = etw_support_route(Arch::X64, 22621, 0x8BE8).unwrap();
        assert_eq!(
            (r.pending, r.buffers),
            (0x198, Some(BufferRoute::Indirect(0x140)))
        );
        assert!(etw_support_route(Arch::X64, 19041, 0x8F40).is_none());
        assert!(etw_support_route(Arch::X64, 0, 0x1).is_none());
        assert!(etw_support_route(Arch::X86 { pae: true }, 14393, 0x5FD8).is_none());
    }
}
