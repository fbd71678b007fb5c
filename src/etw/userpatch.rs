//! The `etw-write-patch` check (issue 17): the `ntdll!EtwEventWrite` family patched in a
//! process ("return at entry" is the usual way to blind every user-mode provider of one
//! process), seen through each process's own page tables.
//!
//! The baseline is the image's own bytes as the dump holds them: ntdll is an image section, so
//! every process that did not write to a code page maps the *same physical page* (the
//! section's); a patch is a write, which gives the patching process a private copy-on-write
//! page. Per function, the physical page mapped by the most processes (at least two) is the
//! image's; a process whose page is another and whose first `PROLOGUE` bytes differ is a
//! finding, with both byte strings, both physical addresses and how many processes share
//! the image's page. A private page holding the image's bytes is not a finding (counted).
//! Where no page is shared by two processes (one process checked, or all copies private), a
//! prologue that returns at once (`ret`, `ret n`, `xor eax,eax; ret`, `mov eax,imm; ret`) is
//! still a finding, and one that only differs from the others is a notice. A baseline that
//! itself returns at once (patched in the image or the section) is a finding too.

use super::findings::{CheckId, Finding, Severity, TamperReport};
use crate::addr::VirtAddr;
use crate::kernel::context::KernelContext;
use std::collections::HashMap;

/// The functions compared: ntdll's event-writing exports and the system-call stub behind them.
pub(crate) const FUNCTIONS: &[&str] = &[
    "EtwEventWrite",
    "EtwEventWriteEx",
    "EtwEventWriteFull",
    "EtwEventWriteTransfer",
    "EtwEventWriteString",
    "EtwEventWriteNoRegistration",
    "EtwWriteUMSecurityEvent",
    "NtTraceEvent",
];

/// Bytes compared at each function's entry.
pub(crate) const PROLOGUE: usize = 16;
/// Most processes looked at.
pub(crate) const MAX_PROCESSES: usize = 16_384;

/// The check's id.
pub(crate) const CHECK: CheckId = CheckId::EtwWritePatch;

/// What the first bytes of a function do when they return at once (None: they do not).
pub(crate) fn returns_at_once(b: &[u8]) -> Option<&'static str> {
    match b {
        [0xC3, ..] => Some("ret"),
        [0xC2, _, _, ..] => Some("ret n"),
        [0x33 | 0x31, 0xC0, 0xC3, ..] => Some("xor eax,eax; ret"),
        [0x48, 0x33 | 0x31, 0xC0, 0xC3, ..] => Some("xor rax,rax; ret"),
        [0x33 | 0x31, 0xC0, 0xC2, ..] => Some("xor eax,eax; ret n"),
        [0xB8, _, _, _, _, 0xC3, ..] => Some("mov eax,imm32; ret"),
        [0xB8, _, _, _, _, 0xC2, ..] => Some("mov eax,imm32; ret n"),
        [0x48, 0xC7, 0xC0, _, _, _, _, 0xC3, ..] => Some("mov rax,imm32; ret"),
        _ => None,
    }
}

/// A finding of this check on ntdll's `function` at `va`.
fn finding(
    severity: Severity,
    subject: String,
    va: VirtAddr,
    function: &str,
    evidence: String,
    expected: String,
) -> Finding {
    Finding {
        check: CHECK.as_str(),
        severity,
        subject,
        address: Some(va),
        field: Some(format!("ntdll!{function}")),
        logger_id: None,
        evidence,
        expected,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One function's entry in one process.
struct Seen {
    pid: u64,
    process: crate::text::Untrusted,
    va: VirtAddr,
    /// Physical address of the entry (its page: `pa & !0xFFF`).
    pa: u64,
    bytes: Vec<u8>,
}

/// Run the check over every process of the active process list.
pub fn check(ctx: &KernelContext<'_>, r: &mut TamperReport) {
    let before = r.findings.len();
    let procs = crate::kernel::processes::walk(ctx);
    if procs.processes.is_empty() {
        let why = procs
            .warnings
            .first()
            .map_or("no process found".to_string(), |w| w.message.clone());
        r.push_run(CHECK, 0, before, Some(format!("no process list: {why}")));
        return;
    }
    let entries = Entries::read(ctx, &procs.processes);
    let mut unjudged: Vec<&str> = Vec::new();
    for name in FUNCTIONS {
        let Some(seen) = entries.by_fn.get(name) else {
            continue;
        };
        match image_page(seen) {
            Some((page, sharing)) => judge_against_image(r, name, seen, page, sharing),
            None => {
                unjudged.push(name);
                judge_without_image(r, name, seen);
            }
        }
    }
    r.push_run(CHECK, entries.examined, before, entries.limits(&unjudged));
}

/// The entries of [`FUNCTIONS`] in the processes looked at, and what could not be read.
#[derive(Default)]
struct Entries {
    by_fn: HashMap<&'static str, Vec<Seen>>,
    /// Processes whose ntdll exports were read.
    examined: u64,
    /// Processes whose PEB or loader list is not readable.
    no_user: u64,
    /// Processes whose ntdll image or export table is not in the dump.
    no_ntdll: u64,
    /// Function entries not in the dump.
    unreadable: u64,
}

impl Entries {
    /// Each function's entry in each of (at most [`MAX_PROCESSES`] of) `processes`, through
    /// the process's own page tables.
    fn read(ctx: &KernelContext<'_>, processes: &[crate::kernel::processes::Process]) -> Entries {
        let mut e = Entries::default();
        let mut export_cache: HashMap<(u64, u64, u64), Vec<Option<VirtAddr>>> = HashMap::new();
        for p in processes.iter().take(MAX_PROCESSES) {
            let up = match crate::kernel::userland::open(ctx, p.eprocess) {
                Ok(u) => u,
                // A process without user mode: nothing to check, nothing missing.
                Err(crate::kernel::userland::UserError::NoPeb) => continue,
                Err(_) => {
                    e.no_user += 1;
                    continue;
                }
            };
            let Ok(nt) = up.module("ntdll.dll") else {
                e.no_ntdll += 1;
                continue;
            };
            // ntdll's export table is resolved once per distinct image (its header and export
            // directory on the same physical pages: the image section every process shares).
            let key = crate::kernel::userland::export_pages(&up.space, nt.base)
                .map(|(h, d)| (nt.base.get(), h, d));
            let cached = key.and_then(|k| export_cache.get(&k).cloned());
            let addrs = match cached {
                Some(a) => a,
                None => match crate::kernel::userland::exports(&up.space, nt.base, FUNCTIONS) {
                    Ok(a) => {
                        if let Some(k) = key {
                            export_cache.insert(k, a.clone());
                        }
                        a
                    }
                    Err(_) => {
                        e.no_ntdll += 1;
                        continue;
                    }
                },
            };
            e.examined += 1;
            for (name, va) in FUNCTIONS.iter().zip(addrs) {
                let Some(va) = va else { continue };
                let mut bytes = vec![0u8; PROLOGUE];
                let (Ok(t), Ok(())) = (up.space.translate(va), up.space.read(va, &mut bytes))
                else {
                    e.unreadable += 1;
                    continue;
                };
                e.by_fn.entry(name).or_default().push(Seen {
                    pid: p.pid,
                    process: p.name.clone(),
                    va,
                    pa: t.pa.get(),
                    bytes,
                });
            }
        }
        e
    }

    /// The run's limits (None when there are none): what could not be read, and the
    /// functions `unjudged` for want of a shared image page.
    fn limits(&self, unjudged: &[&str]) -> Option<String> {
        let (no_user, no_ntdll, unreadable) = (self.no_user, self.no_ntdll, self.unreadable);
        let mut limits = Vec::new();
        if no_user > 0 {
            limits.push(format!(
                "{no_user} processes whose PEB or loader list is not readable (paged out, or a dump without user memory)"
            ));
        }
        if no_ntdll > 0 {
            limits.push(format!(
                "{no_ntdll} processes whose ntdll image or export table is not in the dump"
            ));
        }
        if unreadable > 0 {
            limits.push(format!("{unreadable} function entries not in the dump"));
        }
        if !unjudged.is_empty() {
            limits.push(format!(
                "no image page shared by two processes for {}: only entries that return at once are judged there",
                unjudged.join(", ")
            ));
        }
        if self.examined == 0 {
            limits.insert(0, "no process's ntdll could be read (a kernel memory dump holds no user memory: use a complete dump)".into());
        }
        (!limits.is_empty()).then(|| limits.join("; "))
    }
}

/// The image's page of one function's entries `seen`: the physical page the most processes
/// (at least two) map, and how many do; ties go to the lowest page.
fn image_page(seen: &[Seen]) -> Option<(u64, usize)> {
    let mut pages: HashMap<u64, usize> = HashMap::new();
    for s in seen {
        *pages.entry(s.pa & !0xFFF).or_default() += 1;
    }
    pages
        .iter()
        .filter(|(_, &n)| n >= 2)
        .max_by_key(|(&pg, &n)| (n, std::cmp::Reverse(pg)))
        .map(|(&pg, &n)| (pg, n))
}

/// How a finding names the process and function of entry `s`.
fn label(s: &Seen, name: &str) -> String {
    format!("PID {} ({}) ntdll!{name}", s.pid, s.process)
}

/// Judge function `name`'s entries `seen` against the image's page `page` (shared by
/// `sharing` processes): an alert when the image's bytes return at once, and one per private
/// page whose bytes differ from the image's.
fn judge_against_image(r: &mut TamperReport, name: &str, seen: &[Seen], page: u64, sharing: usize) {
    let Some(base) = seen.iter().find(|s| s.pa & !0xFFF == page) else {
        return;
    };
    if let Some(what) = returns_at_once(&base.bytes) {
        r.findings.push(finding(
            Severity::Alert,
            format!("ntdll!{name} (image page shared by {sharing} processes)"),
            base.va,
            name,
            format!(
                "the shared image page (PA {page:#x}) holds `{what}` at the entry: {}",
                hex(&base.bytes)
            ),
            "the function's own code (it never returns at its entry): the image itself or its section was patched".into(),
        ));
    }
    for s in seen.iter().filter(|s| s.pa & !0xFFF != page) {
        if s.bytes == base.bytes {
            // A private copy holding the image's bytes: not a patch.
            continue;
        }
        let what = returns_at_once(&s.bytes)
            .map(|w| format!(" (`{w}` at the entry)"))
            .unwrap_or_default();
        r.findings.push(finding(
            Severity::Alert,
            label(s, name),
            s.va,
            name,
            format!(
                "{}{what} on a private page (PA {:#x})",
                hex(&s.bytes),
                s.pa & !0xFFF
            ),
            format!(
                "{}: the bytes of ntdll's image page (PA {page:#x}) that {sharing} other processes map",
                hex(&base.bytes)
            ),
        ));
    }
}

/// Judge function `name`'s entries `seen` with no shared page to compare with: an entry that
/// returns at once is still a patch (an alert); bytes that only differ from what most
/// processes hold are a notice.
fn judge_without_image(r: &mut TamperReport, name: &str, seen: &[Seen]) {
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for s in seen {
        *counts.entry(&s.bytes).or_default() += 1;
    }
    let common = counts
        .iter()
        .max_by_key(|(b, &n)| (n, std::cmp::Reverse(b.to_vec())))
        .map(|(b, &n)| (b.to_vec(), n));
    for s in seen {
        if let Some(what) = returns_at_once(&s.bytes) {
            r.findings.push(finding(
                Severity::Alert,
                label(s, name),
                s.va,
                name,
                format!("`{what}` at the entry: {}", hex(&s.bytes)),
                "the function's own code (it never returns at its entry)".into(),
            ));
        } else if let Some((b, n)) = &common {
            if *n >= 2 && s.bytes != *b {
                r.findings.push(finding(
                    Severity::Notice,
                    label(s, name),
                    s.va,
                    name,
                    format!("{} (PA {:#x})", hex(&s.bytes), s.pa & !0xFFF),
                    format!(
                        "{}: what {n} other processes hold (no image page is shared to tell which is the image's)",
                        hex(b)
                    ),
                ));
            }
        }
    }
}
