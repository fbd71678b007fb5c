//! Tamper checks (issue 17): what attackers change to blind ETW that stays visible in kernel
//! memory. Each check compares what the dump holds with what a clean kernel holds and reports
//! a [`Finding`] with the evidence (the field, its address and value) and the expectation.
//!
//! | check | what a clean kernel holds | evidence of tampering |
//! |---|---|---|
//! | `reg-handle-null` | every `Etw*ProvRegHandle` global the build has holds the address of the kernel's registration of that provider (registered at boot) | the global is NULL |
//! | `reg-handle-invalid` | that address is an `_ETW_REG_ENTRY` on the `RegListHead` of a GUID entry of the GUID table, of the provider the handle is named for | it points elsewhere, at a registration no GUID entry lists, or at another provider's |
//! | `provider-enable-state` | a GUID entry enabled by a live session (an `EnableInfo[i]` slot) has its aggregate `ProviderEnableInfo.IsEnabled` set | the aggregate is cleared (the provider's events are dropped at the source). A registration's `EnableMask` without bit i is not judged: filters can narrow it legitimately (`providers` shows it) |
//! | `enable-unknown-logger` | every enabled `EnableInfo` slot names a live session | it names a logger id with no session |
//! | `clock-hook` | `GetCpuClock`: before 19041 a pointer to one of the kernel's clock routines (`EtwpGetPerfCounter`, `EtwpGetSystemTime`, `EtwpGetCycleCount`, ...); from 19041 an index 0-3 | a pointer elsewhere (outside the kernel image: "InfinityHook"); an index above 3 (the kernel fails fast on it) or an address where an index belongs |
//! | `consumer-mode` | real-time consumers only on sessions in real-time mode (`EVENT_TRACE_REAL_TIME_MODE`) | consumers on a session without it |
//! | `etw-write-patch` | each process maps ntdll's `EtwEventWrite`-family entries from the image's shared page ([`super::userpatch`]) | another page with other bytes (a copy-on-write patch), or an entry that returns at once |

use crate::addr::VirtAddr;
use crate::etw::loggers::Session;
use crate::etw::providers::{Provider, ProviderTable, RegKind};
use crate::kernel::context::KernelContext;
use crate::kernel::view::View;
use crate::symbols::layout::TypeRef;
// The report's types are in their own file, which the user-memory check (`userpatch`) shares.
pub use crate::etw::findings::{CheckId, CheckRun, Finding, Severity, TamperReport};
use std::collections::{HashMap, HashSet};

/// `EVENT_TRACE_REAL_TIME_MODE` (evntrace.h).
pub const EVENT_TRACE_REAL_TIME_MODE: u64 = 0x100;

pub use crate::symbols::CLOCK_ROUTINES;

/// Largest `GetCpuClock` index a clean kernel holds where the field is an index (integer
/// layouts, 19041+ in the corpus): `EtwpGetLoggerTimeStamp` dispatches 0 (system time,
/// RtlGetSystemTimePrecise), 1 (QPC, KeQueryPerformanceCounter), 2 (a HAL callback) and 3
/// (RDTSC), and calls `__fastfail(0x3D)` on anything greater (public decompilations of
/// EtwpGetLoggerTimeStamp of Windows 10/11 builds, e.g. code-index file 65661481785). A value
/// above it was not written by the kernel's clock setup.
pub(crate) const MAX_CLOCK_INDEX: u64 = 3;

fn provider_label(p: &Provider) -> String {
    format!(
        "provider {{{}}}{}",
        p.guid.as_deref().unwrap_or("unreadable GUID"),
        p.name.map(|n| format!(" ({n})")).unwrap_or_default()
    )
}

fn session_label(s: &Session) -> String {
    match &s.name {
        Some(n) => format!("session {} ({n})", s.logger_id),
        None => format!("session {} (name unreadable)", s.logger_id),
    }
}

/// Run every check.
pub fn check(ctx: &KernelContext<'_>, sessions: &[Session], table: &ProviderTable) -> TamperReport {
    let mut r = TamperReport::default();
    reg_handles(ctx, table, &mut r);
    enable_state(sessions, table, &mut r);
    clocks(ctx, sessions, &mut r);
    consumer_mode(sessions, &mut r);
    crate::etw::userpatch::check(ctx, &mut r);
    r
}

/// The kernel's global provider registration handles the symbols name: `Etw*ProvRegHandle`,
/// `Etw*RegHandle`.
pub(crate) fn handle_globals(ctx: &KernelContext<'_>) -> Vec<(String, VirtAddr)> {
    let mut names: Vec<String> = ctx
        .symbols
        .all_symbols()
        .chain(ctx.symbols.builtin_symbols())
        .map(|(n, _)| n)
        .filter(|n| crate::symbols::is_reg_handle(n))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| ctx.global(&n).map(|va| (n, va)))
        .collect()
}

/// The provider whose registration handle the global `name` should hold (when the kernel's
/// list of handles names it) and how a finding says what was expected.
fn expected_registration(name: &str) -> (Option<[u8; 16]>, String) {
    let expected_guid = crate::etw::provider_names::KERNEL_REG_HANDLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, g)| *g);
    let expect_text = match expected_guid {
        Some(g) => format!(
            "the address of the kernel's _ETW_REG_ENTRY of {{{}}}{}",
            crate::bytes::guid_text(&g).to_uppercase(),
            crate::etw::provider_names::provider_name(&g)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        None => "the address of the kernel's _ETW_REG_ENTRY of this provider".into(),
    };
    (expected_guid, expect_text)
}

/// The finding for the NULL handle `name` at `va` when the kernel's registration of its
/// provider (`expected_guid`) is still on the GUID table: the handle was cleared under it.
/// None when the provider has no kernel registration there (never registered on this system,
/// or unregistered: not told apart).
fn cleared_handle(
    table: &ProviderTable,
    name: &str,
    va: VirtAddr,
    expected_guid: Option<[u8; 16]>,
    expect_text: String,
) -> Option<Finding> {
    let still = expected_guid.and_then(|g| {
        table.providers.iter().find(|p| {
            p.guid_bytes == Some(g) && p.registrations.iter().any(|x| x.kind == RegKind::Kernel)
        })
    });
    let p = still?;
    let evidence = format!(
        "{name} at {va} is NULL while the kernel's registration of {} is still on the GUID table ({}): the handle was cleared, the provider's kernel events are not written",
        provider_label(p),
        p.registrations
            .iter()
            .filter(|x| x.kind == RegKind::Kernel)
            .map(|x| x.address.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Some(Finding {
        check: CheckId::RegHandleNull.as_str(),
        severity: Severity::Alert,
        subject: name.to_string(),
        address: Some(va),
        field: Some(name.to_string()),
        logger_id: None,
        evidence,
        expected: expect_text,
    })
}

/// Why the handle `name` at `va`, holding `v`, points at the wrong thing: at no registration
/// of the GUID table (`regs`), or at one of another provider than `expected_guid`. None when
/// it is right.
fn wrong_target(
    regs: &HashMap<VirtAddr, &Provider>,
    name: &str,
    va: VirtAddr,
    v: VirtAddr,
    expected_guid: Option<[u8; 16]>,
) -> Option<String> {
    match regs.get(&v) {
        None => Some(format!(
            "{name} at {va} holds {v}, which is no registration on any GUID entry of the GUID table"
        )),
        Some(p) => match (expected_guid, p.guid_bytes) {
            (Some(want), Some(have)) if want != have => Some(format!(
                "{name} at {va} holds {v}, a registration of {} instead",
                provider_label(p)
            )),
            _ => None,
        },
    }
}

/// The registration-handle checks: each `Etw*RegHandle` global the symbols name is NULL while
/// its provider's kernel registration is still on the GUID `table` (`reg-handle-null`), or
/// points at no registration, or at another provider's (`reg-handle-invalid`).
fn reg_handles(ctx: &KernelContext<'_>, table: &ProviderTable, r: &mut TamperReport) {
    let before = r.findings.len();
    let handles = handle_globals(ctx);
    if handles.is_empty() {
        r.push_run(
            CheckId::RegHandleNull,
            0,
            before,
            Some("the symbols name no Etw*RegHandle global (give the kernel's PDB)".into()),
        );
        r.push_run(
            CheckId::RegHandleInvalid,
            0,
            before,
            Some(format!("as {}", CheckId::RegHandleNull)),
        );
        return;
    }
    // Every registration on a GUID entry's list, with its provider.
    let mut regs: HashMap<VirtAddr, &Provider> = HashMap::new();
    for p in &table.providers {
        for g in &p.registrations {
            regs.insert(g.address, p);
        }
    }
    // Walked: the table was located and its heads initialised (a zeroed table is no walk:
    // providers::read warns about it).
    let walked = table.table.is_some() && !table.zeroed;
    let mut invalid = Vec::new();
    let mut unreadable = 0;
    let mut null_unjudged = 0;
    // NULL handles whose provider has no kernel registration on the table.
    let mut unregistered: Vec<String> = Vec::new();
    for (name, va) in &handles {
        let v = match ctx.space.read_ptr(*va) {
            Ok(v) => v,
            Err(_) => {
                unreadable += 1;
                continue;
            }
        };
        let (expected_guid, expect_text) = expected_registration(name);
        if v.is_null() {
            // A NULL handle is tampering when the kernel's registration of that provider is
            // still on the table (the handle was cleared under it); where the table cannot be
            // walked, or the provider has no kernel registration there, it cannot be told from
            // a provider never registered on this system.
            if !walked {
                null_unjudged += 1;
                continue;
            }
            match cleared_handle(table, name, *va, expected_guid, expect_text) {
                Some(f) => r.findings.push(f),
                None => unregistered.push(name.clone()),
            }
            continue;
        }
        if !walked {
            continue;
        }
        let wrong = wrong_target(&regs, name, *va, v, expected_guid);
        if let Some(evidence) = wrong {
            invalid.push(Finding {
                check: CheckId::RegHandleInvalid.as_str(),
                severity: Severity::Alert,
                subject: name.clone(),
                address: Some(*va),
                field: Some(name.clone()),
                logger_id: None,
                evidence,
                expected: expect_text,
            });
        }
    }
    let n = handles.len() as u64;
    let limit =
        (unreadable > 0).then(|| format!("{unreadable} of the {n} globals are not in the dump"));
    let mut notes: Vec<String> = limit.iter().cloned().collect();
    if null_unjudged > 0 {
        notes.push(format!(
            "{null_unjudged} of the {n} globals are NULL but the GUID table could not be walked, so a cleared handle cannot be told from a provider never registered"
        ));
    }
    if !unregistered.is_empty() {
        notes.push(format!(
            "NULL with no kernel registration of their provider on the GUID table (never registered on this system, or unregistered: not told apart): {}",
            unregistered.join(", ")
        ));
    }
    let null_limit = (!notes.is_empty()).then(|| notes.join("; "));
    r.push_run(CheckId::RegHandleNull, n, before, null_limit);
    let before = r.findings.len();
    r.findings.extend(invalid);
    r.push_run(CheckId::RegHandleInvalid,
        n,
        before,
        if walked {
            limit
        } else {
            Some("the GUID table could not be walked (see the warnings): the handles' targets are not checked".into())
        },
    );
}

fn enable_state(sessions: &[Session], table: &ProviderTable, r: &mut TamperReport) {
    let live: HashSet<u64> = sessions.iter().map(|s| s.logger_id).collect();
    let limit = (table.table.is_none() || table.zeroed)
        .then(|| "the GUID table could not be walked (see the warnings)".to_string());
    let before = r.findings.len();
    let mut unknown = Vec::new();
    for p in &table.providers {
        for e in &p.enabled {
            let slot = e.slot.unwrap_or(0);
            if !live.contains(&e.logger_id) {
                unknown.push(Finding {
                    check: CheckId::EnableUnknownLogger.as_str(),
                    severity: Severity::Alert,
                    subject: provider_label(p),
                    address: Some(p.guid_entry),
                    field: Some(format!("_ETW_GUID_ENTRY.EnableInfo[{slot}].LoggerId")),
                    logger_id: Some(e.logger_id),
                    evidence: format!(
                        "EnableInfo[{slot}] of GUID entry {} enables it for logger {}, which is no live session",
                        p.guid_entry, e.logger_id
                    ),
                    expected: "enabled slots name live sessions (the kernel clears a slot when its session stops)".into(),
                });
                continue;
            }
            if let Some(a) = &p.aggregate {
                if a.is_enabled == 0 {
                    r.findings.push(Finding {
                        check: CheckId::ProviderEnableState.as_str(),
                        severity: Severity::Alert,
                        subject: provider_label(p),
                        address: Some(p.guid_entry),
                        field: Some("_ETW_GUID_ENTRY.ProviderEnableInfo.IsEnabled".into()),
                        logger_id: Some(e.logger_id),
                        evidence: format!(
                            "ProviderEnableInfo.IsEnabled of GUID entry {} is 0 while EnableInfo[{slot}] enables it for live logger {}: the provider's events are dropped before they reach the session",
                            p.guid_entry, e.logger_id
                        ),
                        expected: "ProviderEnableInfo.IsEnabled = 1 while any session enables the provider".into(),
                    });
                }
            }
        }
    }
    let examined = table.providers.len() as u64;
    r.push_run(
        CheckId::ProviderEnableState,
        examined,
        before,
        limit.clone(),
    );
    let before = r.findings.len();
    r.findings.extend(unknown);
    r.push_run(CheckId::EnableUnknownLogger, examined, before, limit);
}

fn clocks(ctx: &KernelContext<'_>, sessions: &[Session], r: &mut TamperReport) {
    let before = r.findings.len();
    let Some(wlc) = ctx.symbols.layout("_WMI_LOGGER_CONTEXT") else {
        r.push_run(
            CheckId::ClockHook,
            0,
            before,
            Some("no _WMI_LOGGER_CONTEXT layout".into()),
        );
        return;
    };
    let Some(f) = wlc.field("GetCpuClock") else {
        r.push_run(
            CheckId::ClockHook,
            0,
            before,
            Some("this build's _WMI_LOGGER_CONTEXT has no GetCpuClock".into()),
        );
        return;
    };
    let pointer_era = matches!(f.ty, TypeRef::Pointer { .. });
    let routines: Vec<(&str, VirtAddr)> = CLOCK_ROUTINES
        .iter()
        .filter_map(|n| ctx.global(n).map(|va| (*n, va)))
        .collect();
    let image = ctx.base.and_then(|b| {
        ctx.image
            .as_ref()
            .and_then(|i| i.headers.as_ref().ok())
            .map(|h| (b, u64::from(h.size_of_image)))
    });
    let mut limit = None;
    if pointer_era && routines.is_empty() {
        limit = Some(if image.is_some() {
            "the symbols name none of the clock routines: only checked that GetCpuClock points into the kernel image".to_string()
        } else {
            "neither the clock routines nor the kernel image's extent are known: GetCpuClock not checked".to_string()
        });
    }
    let mut examined = 0;
    for s in sessions {
        let v = View::new(&ctx.space, wlc, s.address);
        let (Ok(value), Ok(at)) = (v.uint("GetCpuClock"), v.field_va("GetCpuClock")) else {
            continue;
        };
        examined += 1;
        let base = |evidence: String, expected: String| Finding {
            check: CheckId::ClockHook.as_str(),
            severity: Severity::Alert,
            subject: session_label(s),
            address: Some(at),
            field: Some("_WMI_LOGGER_CONTEXT.GetCpuClock".into()),
            logger_id: Some(s.logger_id),
            evidence,
            expected,
        };
        if !pointer_era {
            if value > MAX_CLOCK_INDEX {
                let what = if value > 0xFF {
                    "an address where this build keeps a clock index"
                } else {
                    "an index the kernel never stores (its time-stamp routine fails fast on any index above 3)"
                };
                r.findings.push(base(
                    format!("GetCpuClock of {} is {value:#x}, {what}", session_label(s)),
                    format!("a clock index 0-{MAX_CLOCK_INDEX} (0 system time, 1 QPC, 2 HAL counter, 3 CPU cycles: the only values EtwpGetLoggerTimeStamp accepts)"),
                ));
            }
            continue;
        }
        let va = VirtAddr::new(value);
        if routines.iter().any(|&(_, rv)| rv == va) {
            continue;
        }
        let inside = image.is_some_and(|(b, n)| value >= b.get() && value - b.get() < n);
        let names: Vec<&str> = routines.iter().map(|(n, _)| *n).collect();
        let expected = if names.is_empty() {
            "a kernel clock routine (inside the kernel image)".to_string()
        } else {
            format!("one of the kernel's clock routines ({})", names.join(", "))
        };
        if !routines.is_empty() || (image.is_some() && !inside) {
            r.findings.push(base(
                format!(
                    "GetCpuClock of {} is {va}, {}",
                    session_label(s),
                    if inside {
                        "inside the kernel image but none of its clock routines"
                    } else {
                        "outside the kernel image: every event's time stamp calls that code"
                    }
                ),
                expected,
            ));
        }
    }
    r.push_run(CheckId::ClockHook, examined, before, limit);
}

fn consumer_mode(sessions: &[Session], r: &mut TamperReport) {
    let before = r.findings.len();
    let mut examined = 0;
    for s in sessions {
        let Some(mode) = s.logger_mode else { continue };
        examined += 1;
        if !s.consumers.is_empty() && mode & EVENT_TRACE_REAL_TIME_MODE == 0 {
            r.findings.push(Finding {
                check: CheckId::ConsumerMode.as_str(),
                severity: Severity::Alert,
                subject: session_label(s),
                address: Some(s.address),
                field: Some("_WMI_LOGGER_CONTEXT.LoggerMode".into()),
                logger_id: Some(s.logger_id),
                evidence: format!(
                    "{} has {} real-time consumer(s) ({}) but LoggerMode {mode:#x} lacks EVENT_TRACE_REAL_TIME_MODE (0x100)",
                    session_label(s),
                    s.consumers.len(),
                    s.consumers
                        .iter()
                        .map(|c| format!(
                            "{} {}",
                            c.pid.map_or_else(|| "?".into(), |p| p.to_string()),
                            c.process.clone().unwrap_or_else(|| "?".into())
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                expected: "real-time consumers only on sessions whose LoggerMode has EVENT_TRACE_REAL_TIME_MODE (the mode was changed under a live consumer)".into(),
            });
        }
    }
    r.push_run(CheckId::ConsumerMode, examined, before, None);
}
