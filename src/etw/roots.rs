//! The roots of the kernel's ETW state and whether the dump holds them
//! (etw-internals.md §1.1): `EtwpHostSiloState` → `_ETW_SILODRIVERSTATE` (1511+),
//! `PspHostSiloGlobals.EtwSiloState`, the global `WmipLoggerContext` array (XP–1507), and
//! `KDDEBUGGER_DATA64.EtwpDebuggerData` (+0x10: the logger array) for symbol-less dumps.

use crate::addr::VirtAddr;
use crate::kernel::context::KernelContext;
use crate::kernel::view::View;
use serde::Serialize;

/// One root and what the dump says about it.
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

fn root(
    name: &str,
    address: Option<VirtAddr>,
    present: bool,
    value: Option<VirtAddr>,
    note: String,
) -> EtwRoot {
    EtwRoot {
        name: name.to_string(),
        address,
        present,
        value,
        note,
    }
}

/// Report every root the symbols and the KDBG allow to locate.
pub fn find_roots(ctx: &KernelContext<'_>) -> Vec<EtwRoot> {
    let space = &ctx.space;
    let sym = &ctx.symbols;
    let mut out = Vec::new();
    let global = |name: &str| ctx.global(name);
    // A pointer-sized global: is it present, and what does it hold?
    let read_ptr_root = |out: &mut Vec<EtwRoot>, name: &str| -> Option<VirtAddr> {
        match global(name) {
            None => {
                out.push(root(name, None, false, None, missing_symbol(ctx, name)));
                None
            }
            Some(va) => match space.read_ptr(va) {
                Ok(v) => {
                    out.push(root(name, Some(va), true, Some(v), "symbol".into()));
                    Some(v)
                }
                Err(e) => {
                    out.push(root(name, Some(va), false, None, e.to_string()));
                    None
                }
            },
        }
    };

    let silo = read_ptr_root(&mut out, "EtwpHostSiloState");
    // PspHostSiloGlobals is a structure; EtwSiloState is a field of it.
    if let Some(va) = global("PspHostSiloGlobals") {
        match sym.layout("_ESERVERSILO_GLOBALS") {
            Some(l) if l.field("EtwSiloState").is_some() => {
                let v = View::new(space, l, va);
                match v.ptr("EtwSiloState") {
                    Ok(p) => out.push(root(
                        "PspHostSiloGlobals.EtwSiloState",
                        v.field_va("EtwSiloState").ok(),
                        true,
                        Some(p),
                        "symbol + _ESERVERSILO_GLOBALS layout".into(),
                    )),
                    Err(e) => out.push(root(
                        "PspHostSiloGlobals.EtwSiloState",
                        v.field_va("EtwSiloState").ok(),
                        false,
                        None,
                        e.to_string(),
                    )),
                }
            }
            _ => out.push(root(
                "PspHostSiloGlobals.EtwSiloState",
                Some(va),
                false,
                None,
                "no _ESERVERSILO_GLOBALS.EtwSiloState layout".into(),
            )),
        }
    }
    if let Some(va) = global("WmipLoggerContext") {
        let mut b = [0u8; 8];
        let present = space
            .try_read(va, &mut b[..ctx.space.arch().pointer_size() as usize])
            .ok()
            .flatten()
            .is_some();
        out.push(root(
            "WmipLoggerContext",
            Some(va),
            present,
            None,
            "global array (XP-1507)".into(),
        ));
    }
    // The logger array through the silo state.
    if sym.rva("EtwpHostSiloState").is_some() && silo.is_none() {
        out.push(root(
            "logger array",
            None,
            false,
            None,
            "unknown: EtwpHostSiloState is not in the dump".into(),
        ));
    }
    if let Some(s) = silo.filter(|v| v.0 != 0) {
        match sym.layout("_ETW_SILODRIVERSTATE") {
            Some(l) => {
                let v = View::new(space, l, s);
                if v.has("EtwpLoggerContext") {
                    match v.ptr("EtwpLoggerContext") {
                        Ok(arr) => {
                            let n = v.uint("MaxLoggers").ok();
                            let present =
                                space.try_read(arr, &mut [0u8; 8]).ok().flatten().is_some();
                            out.push(root(
                                "logger array (EtwpLoggerContext)",
                                Some(arr),
                                present,
                                None,
                                match n {
                                    Some(n) => format!(
                                        "_ETW_SILODRIVERSTATE.EtwpLoggerContext, MaxLoggers {n}"
                                    ),
                                    None => "_ETW_SILODRIVERSTATE.EtwpLoggerContext".into(),
                                },
                            ));
                        }
                        Err(e) => out.push(root(
                            "logger array (EtwpLoggerContext)",
                            v.field_va("EtwpLoggerContext").ok(),
                            false,
                            None,
                            e.to_string(),
                        )),
                    }
                } else if v.has("WmipLoggerContext") {
                    let arr = v.field_va("WmipLoggerContext").ok();
                    let present = arr
                        .is_some_and(|a| space.try_read(a, &mut [0u8; 8]).ok().flatten().is_some());
                    out.push(root(
                        "logger array (WmipLoggerContext[64] in the silo state)",
                        arr,
                        present,
                        None,
                        "inline array".into(),
                    ));
                }
            }
            None => out.push(root(
                "logger array",
                None,
                false,
                None,
                "no _ETW_SILODRIVERSTATE layout for this build".into(),
            )),
        }
    }
    // The symbol-less route.
    if let Some(k) = ctx.kdbg() {
        if let Some(d) = k.etwp_debugger_data().and_then(|d| space.normalize(d).ok()) {
            let arr_ptr = d.offset(0x10);
            match space.read_ptr(arr_ptr) {
                Ok(v) => out.push(root(
                    "KDBG.EtwpDebuggerData (+0x10: logger array)",
                    Some(d),
                    true,
                    Some(v),
                    "KDDEBUGGER_DATA64 +0x330".into(),
                )),
                Err(e) => out.push(root(
                    "KDBG.EtwpDebuggerData (+0x10: logger array)",
                    Some(d),
                    false,
                    None,
                    e.to_string(),
                )),
            }
        }
    }
    out
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
