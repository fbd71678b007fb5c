//! `providers` and `check` (issue 17) against forge dumps whose GUID tables, registrations,
//! kernel handles and tampering were written from the reference (tests/forge src/etw/
//! providers.rs, tamper.rs), independently of the reader: every provider, enable slot and
//! registration the forge placed is listed with the values it wrote, on every fixture era and
//! over seeded variations (7601/9600's undocumented table shapes included); clean dumps give no
//! finding; each tampered variant gives exactly its finding, at the address the forge names.

mod common;
use common::{etwdump, fixture, FIXTURES};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::loggers::list_sessions;
use etwdump::etw::providers::{ProviderTable, RegKind};
use etwdump::etw::tamper::{self, TamperReport};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_check_ids::CheckId;
use etwdump_forge::{
    forge, providers_config, tamper_scenarios, Config, Forged, TableShape, TamperKind, TamperSpec,
};
use std::path::{Path, PathBuf};

fn pdb(name: &str) -> PathBuf {
    let d = fixture(name);
    let x86 = d.join("ntkrpamp.pdb");
    if x86.exists() {
        x86
    } else {
        d.join("ntkrnlmp.pdb")
    }
}

struct Read {
    table: ProviderTable,
    report: TamperReport,
    /// `_WMI_LOGGER_CONTEXT.GetCpuClock`'s offset (clock-hook findings name the field).
    clock_offset: u64,
}

fn read(f: &Forged, pdb: &Path) -> Read {
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb.to_path_buf()),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let sessions = list_sessions(&ctx);
    let (table, _) = etwdump::report::providers::read(&ctx);
    let report = tamper::check(&ctx, &sessions.sessions, &table);
    let clock_offset = ctx
        .symbols
        .layout("_WMI_LOGGER_CONTEXT")
        .and_then(|l| l.field("GetCpuClock"))
        .map_or(0, |f| f.offset);
    Read {
        table,
        report,
        clock_offset,
    }
}

/// Every provider, slot and registration the forge placed, as it wrote them; nothing else.
fn compare(name: &str, f: &Forged, t: &ProviderTable) {
    let e = f.etw.as_ref().unwrap();
    let gt = e
        .guid_table
        .as_ref()
        .expect("the forge placed a GUID table");
    let tb = t
        .table
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no GUID table; {:?}", t.warnings));
    assert_eq!(tb.address.get(), gt.va, "{name}: table address");
    assert_eq!(tb.stride, gt.stride, "{name}: stride ({})", tb.shape_from);
    assert_eq!(
        tb.lists_per_bucket,
        u64::from(gt.lists),
        "{name}: lists per bucket"
    );
    assert_eq!(tb.buckets, u64::from(gt.buckets), "{name}: buckets");
    if gt.global {
        assert!(
            tb.shape_from.starts_with("search"),
            "{name}: a global table's shape is inferred: {}",
            tb.shape_from
        );
    }
    let mut want: Vec<_> = e.providers.iter().collect();
    want.sort_by_key(|p| p.guid_entry_va);
    let mut got: Vec<_> = t.providers.iter().collect();
    got.sort_by_key(|p| p.guid_entry.get());
    assert_eq!(
        got.iter().map(|p| p.guid_entry.get()).collect::<Vec<_>>(),
        want.iter().map(|p| p.guid_entry_va).collect::<Vec<_>>(),
        "{name}: GUID entries; warnings {:?}",
        t.warnings
    );
    for (g, w) in got.iter().zip(&want) {
        let what = format!("{name}: provider {} ({})", w.guid, w.name);
        assert_eq!(g.guid.as_deref(), Some(w.guid.as_str()), "{what}: GUID");
        assert_eq!(g.bucket, u64::from(w.bucket), "{what}: bucket");
        assert_eq!(g.guid_type, u64::from(w.guid_type), "{what}: type");
        assert_eq!(g.ref_count, Some(w.ref_count), "{what}: RefCount");
        let a = g.aggregate.as_ref().expect("aggregate");
        assert_eq!(
            (
                a.is_enabled,
                a.level,
                a.logger_id,
                a.match_any_keyword,
                a.match_all_keyword,
                a.enable_property
            ),
            (
                u64::from(w.aggregate.is_enabled),
                u64::from(w.aggregate.level),
                u64::from(w.aggregate.logger_id),
                w.aggregate.match_any,
                w.aggregate.match_all,
                u64::from(w.aggregate.enable_property)
            ),
            "{what}: ProviderEnableInfo"
        );
        let slots: Vec<_> = g
            .enabled
            .iter()
            .map(|s| {
                (
                    s.slot,
                    s.level,
                    s.logger_id,
                    s.match_any_keyword,
                    s.match_all_keyword,
                    s.enable_property,
                )
            })
            .collect();
        let want_slots: Vec<_> = w
            .enable_slots
            .iter()
            .map(|s| {
                (
                    s.index.map(u64::from),
                    u64::from(s.level),
                    u64::from(s.logger_id),
                    s.match_any,
                    s.match_all,
                    u64::from(s.enable_property),
                )
            })
            .collect();
        assert_eq!(slots, want_slots, "{what}: enabled slots");
        assert_eq!(
            g.registrations
                .iter()
                .map(|r| r.address.get())
                .collect::<Vec<_>>(),
            w.registrations.iter().map(|r| r.va).collect::<Vec<_>>(),
            "{what}: registrations in list order"
        );
        for (r, x) in g.registrations.iter().zip(&w.registrations) {
            let what = format!("{what}: registration {:#x}", x.va);
            assert_eq!(
                r.kind,
                if x.kernel {
                    RegKind::Kernel
                } else {
                    RegKind::User
                },
                "{what}: kind (told by {})",
                r.kind_from
            );
            assert_eq!(
                r.enable_mask,
                Some(u64::from(x.enable_mask)),
                "{what}: EnableMask"
            );
            assert_eq!(r.index, Some(u64::from(x.index)), "{what}: Index");
            assert_eq!(
                r.guid_entry.map(|v| v.get()),
                Some(w.guid_entry_va),
                "{what}: GuidEntry"
            );
            if x.kernel {
                assert_eq!(r.callback.map(|v| v.get()), x.callback, "{what}: Callback");
                assert_eq!(
                    r.callback_context.map(|v| v.get()),
                    x.callback_context,
                    "{what}: CallbackContext"
                );
            } else {
                assert_eq!(r.eprocess.map(|v| v.get()), x.eprocess, "{what}: EPROCESS");
                assert_eq!(r.pid, x.pid, "{what}: PID");
                assert!(r.process.is_some(), "{what}: image name; {:?}", r.warnings);
            }
            assert!(r.warnings.is_empty(), "{what}: {:?}", r.warnings);
        }
        assert!(g.warnings.is_empty(), "{what}: {:?}", g.warnings);
    }
    // Clean tables raise no warning but the inferred shape of a global one.
    for w in &t.warnings {
        assert_eq!(
            w.kind,
            etwdump::warning::WarningKind::Inferred,
            "{name}: unexpected warning {w}"
        );
    }
}

fn no_findings(name: &str, r: &TamperReport) {
    assert!(
        r.findings.is_empty(),
        "{name}: findings on a clean dump: {:#?}",
        r.findings
    );
}

#[test]
fn every_era_lists_what_the_forge_placed_and_finds_nothing() {
    for name in FIXTURES {
        let c = providers_config(&fixture(name));
        let f = forge(&c);
        let r = read(&f, &pdb(name));
        compare(name, &f, &r.table);
        no_findings(name, &r.report);
        let e = f.etw.as_ref().unwrap();
        assert!(
            !e.providers.is_empty(),
            "{name}: the forge placed providers"
        );
        // Every check ran, once, in the order of CheckId::ALL.
        let ran: Vec<&str> = r.report.runs.iter().map(|x| x.check).collect();
        assert_eq!(ran, CheckId::ALL.map(CheckId::as_str), "{name}");
        // Every kernel check ran in full: the symbols name the handles and clock routines.
        // These dumps hold no process's user memory: the user-mode check says so.
        for run in &r.report.runs {
            if run.check == CheckId::EtwWritePatch.as_str() {
                match &f.ntdll {
                    // x64: every process with user memory is examined, in full.
                    Some(n) => {
                        assert_eq!(run.examined, n.processes.len() as u64, "{name}");
                        assert_eq!(run.limit, None, "{name}");
                    }
                    // x86: the forge writes no processes there.
                    None => assert!(
                        run.limit
                            .as_deref()
                            .is_some_and(|l| l.starts_with("no process list")),
                        "{name}: {:?}",
                        run.limit
                    ),
                }
                continue;
            }
            // A fixture whose layout source names no kernel handle global (x64-26100: its
            // public layouts carry no symbol list) has none to examine, and the check says so.
            if e.reg_handles.is_empty() && run.check.starts_with("reg-handle") {
                assert!(
                    run.limit.as_deref().is_some_and(
                        |l| l.contains("no Etw*RegHandle") || l.contains("as reg-handle-null")
                    ),
                    "{name}: {} {:?}",
                    run.check,
                    run.limit
                );
                continue;
            }
            // Clock routines: where the fixture names none, only "inside the image" is checked.
            if run.check == CheckId::ClockHook.as_str() && run.limit.is_some() {
                assert!(
                    f.etw
                        .as_ref()
                        .unwrap()
                        .sessions()
                        .all(|s| s.clock_routine.is_none()),
                    "{name}: clock-hook limited although routines exist: {:?}",
                    run.limit
                );
                continue;
            }
            assert_eq!(run.limit, None, "{name}: {} limited", run.check);
        }
        let handles = r
            .report
            .runs
            .iter()
            .find(|x| x.check == CheckId::RegHandleNull.as_str())
            .unwrap();
        assert_eq!(
            handles.examined,
            e.reg_handles.len() as u64,
            "{name}: handles examined"
        );
    }
}

#[test]
fn varied_providers_are_listed_exactly_and_clean() {
    // Seeded variations: provider counts, buckets, GUID types, registrations, enable slots,
    // narrowed masks; on 7601/9600 both table shapes and drawn buckets.
    let mut shapes = std::collections::BTreeSet::new();
    for seed in 0..24u64 {
        let name = FIXTURES[(seed as usize) % FIXTURES.len()];
        let c = Config::from_fixture(&fixture(name))
            .with_variation(seed)
            .with_providers();
        let f = forge(&c);
        let what = format!("{name} seed {seed}");
        let r = read(&f, &pdb(name));
        compare(&what, &f, &r.table);
        no_findings(&what, &r.report);
        let gt = f.etw.as_ref().unwrap().guid_table.as_ref().unwrap();
        if gt.global {
            shapes.insert(gt.shape);
        }
    }
    assert!(
        shapes.contains(&TableShape::ListHeads) && shapes.contains(&TableShape::Buckets),
        "both shapes of the 6.1-6.3 table were exercised: {shapes:?}"
    );
}

#[test]
fn each_tampered_variant_gives_exactly_its_finding() {
    let root = fixture("x64-19041").parent().unwrap().to_path_buf();
    let mut seen = std::collections::BTreeSet::new();
    for (label, c) in tamper_scenarios(&root) {
        let f = forge(&c);
        let name = c.fixture.as_ref().unwrap().name.clone();
        let r = read(&f, &pdb(&name));
        let want = &f.etw.as_ref().unwrap().findings;
        let got: Vec<(&str, u64)> = r
            .report
            .findings
            .iter()
            .map(|x| {
                // The forge names the logger context; the finding its GetCpuClock field.
                let at = x.address.map_or(0, |a| a.get());
                let at = if x.check == CheckId::ClockHook.as_str() {
                    at - r.clock_offset
                } else {
                    at
                };
                (x.check, at)
            })
            .collect();
        let want_v: Vec<(&str, u64)> = want.iter().map(|x| (x.check.as_str(), x.address)).collect();
        assert_eq!(got, want_v, "{label}: findings {:#?}", r.report.findings);
        for x in want {
            seen.insert((x.check.as_str(), name.clone()));
        }
    }
    // Every check was proven on every era where it applies.
    for check in [
        CheckId::RegHandleNull,
        CheckId::RegHandleInvalid,
        CheckId::ProviderEnableState,
        CheckId::EnableUnknownLogger,
        CheckId::ClockHook,
    ] {
        for name in FIXTURES {
            // The handle kinds need the build's kernel handle globals (x64-26100 has none).
            let no_handles = !providers_config(&fixture(name))
                .fixture
                .as_ref()
                .unwrap()
                .symbols
                .keys()
                .any(|k| etwdump::symbols::is_reg_handle(k));
            if no_handles
                && matches!(
                    check,
                    CheckId::RegHandleNull
                        | CheckId::RegHandleInvalid
                        | CheckId::ProviderEnableState
                )
            {
                continue;
            }
            assert!(
                seen.contains(&(check.as_str(), name.to_string())),
                "{check} on {name}"
            );
        }
    }
    assert!(seen
        .iter()
        .any(|(c, _)| *c == CheckId::ConsumerMode.as_str()));
    for name in FIXTURES.iter().filter(|n| n.starts_with("x64")) {
        assert!(
            seen.contains(&(CheckId::EtwWritePatch.as_str(), name.to_string())),
            "{name}"
        );
    }
}

/// `etw-write-patch` on every x64 kernel and every patch variant: each finding says which
/// process, function and bytes, the image's bytes and both physical pages; a private copy
/// with the image's bytes and an entry page not in the dump are no findings (the latter is
/// the check's limit); a patch of the shared page is one finding.
#[test]
fn write_patch_findings_carry_their_evidence() {
    let root = fixture("x64-19041").parent().unwrap().to_path_buf();
    let mut variants = std::collections::BTreeSet::new();
    for (label, c) in tamper_scenarios(&root) {
        if !label.contains(CheckId::EtwWritePatch.as_str()) {
            continue;
        }
        let f = forge(&c);
        let name = c.fixture.as_ref().unwrap().name.clone();
        let r = read(&f, &pdb(&name));
        let n = f.ntdll.as_ref().unwrap();
        let p = &n.patches[0];
        variants.insert(format!("{:?}", p.variant));
        let got: Vec<_> = r
            .report
            .findings
            .iter()
            .filter(|x| x.check == CheckId::EtwWritePatch.as_str())
            .collect();
        let run = r
            .report
            .runs
            .iter()
            .find(|x| x.check == CheckId::EtwWritePatch.as_str())
            .unwrap();
        assert_eq!(run.examined, n.processes.len() as u64, "{label}");
        let func = n
            .etw_functions
            .iter()
            .find(|x| x.name == p.function)
            .unwrap();
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02X}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let label_of = |pid: u64| {
            let up = n.processes.iter().find(|u| u.pid == pid).unwrap();
            format!("PID {} ({}) ntdll!{}", pid, up.name, p.function)
        };
        match format!("{:?}", p.variant).as_str() {
            "BenignCopy" => assert!(got.is_empty(), "{label}: {got:#?}"),
            "Unreadable" => {
                assert!(got.is_empty(), "{label}: {got:#?}");
                let l = run.limit.as_deref().unwrap_or("");
                assert!(
                    l.contains("function entries not in the dump"),
                    "{label}: {l}"
                );
            }
            "SharedPage" => {
                assert_eq!(got.len(), 1, "{label}");
                let x = got[0];
                assert_eq!(x.address.map(|a| a.get()), Some(p.va));
                assert!(
                    x.subject.contains(&format!(
                        "ntdll!{} (image page shared by {} processes)",
                        p.function,
                        n.processes.len()
                    )),
                    "{label}: {}",
                    x.subject
                );
                assert!(
                    x.evidence.contains(&format!("PA {:#x}", p.page_pa)),
                    "{}",
                    x.evidence
                );
                assert!(x.evidence.contains("`ret`"), "{}", x.evidence);
            }
            _ => {
                assert_eq!(got.len(), 1, "{label}");
                let x = got[0];
                let pid = p.pid.unwrap();
                assert_eq!(x.subject, label_of(pid), "{label}");
                assert_eq!(x.address.map(|a| a.get()), Some(p.va));
                assert_eq!(
                    x.field.as_deref(),
                    Some(format!("ntdll!{}", p.function).as_str())
                );
                // The bytes found: the patch over the image's bytes.
                let mut found = func.entry.clone();
                found[..p.bytes.len()].copy_from_slice(&p.bytes);
                assert!(
                    x.evidence.starts_with(&hex(&found)),
                    "{label}: {}",
                    x.evidence
                );
                assert!(
                    x.evidence
                        .contains(&format!("on a private page (PA {:#x})", p.page_pa)),
                    "{label}: {}",
                    x.evidence
                );
                let shared = n
                    .shared_pages
                    .iter()
                    .find(|(va, _)| *va == func.page_va)
                    .unwrap()
                    .1;
                assert!(x.expected.starts_with(&hex(&func.entry)), "{}", x.expected);
                assert!(
                    x.expected.contains(&format!("(PA {shared:#x})")),
                    "{label}: {}",
                    x.expected
                );
                assert!(
                    x.evidence.contains("at the entry)"),
                    "{label}: every patch variant returns at once: {}",
                    x.evidence
                );
            }
        }
    }
    assert_eq!(variants.len(), 8, "{variants:?}");
}

#[test]
fn cli_providers_and_check_on_the_sample() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample-x64-etw.dmp");
    let s = sample.to_str().unwrap();
    let p = pdb("x64-19041");
    let p = p.to_str().unwrap();
    let o = etwdump(&["providers", s, "--pdb", p, "--all", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["command"], "providers");
    let rows = v["records"].as_array().unwrap();
    assert!(!rows.is_empty());
    // The Threat-Intelligence provider is registered by the kernel, named from the table.
    let ti = rows
        .iter()
        .find(|r| r["guid"] == "F4E1897C-BB5D-5668-F1D8-040F4D8DD344")
        .expect("Threat-Intelligence listed");
    assert_eq!(ti["name"], "Microsoft-Windows-Threat-Intelligence");
    assert_eq!(ti["kind"], "kernel");
    let o = etwdump(&["check", s, "--pdb", p, "--format", "json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["checks"].as_array().unwrap().len(), 7);
}

/// The bytes of a forged dump with `patch` applied at kernel VAs (through the dump's own page
/// tables: common::file_offset).
fn patched(f: &Forged, patch: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = f.to_bytes();
    let d = DumpFile::from_bytes(b.clone(), OpenOptions::default()).unwrap();
    for (va, bytes) in patch {
        let off = common::file_offset(&d, *va);
        b[off..off + bytes.len()].copy_from_slice(bytes);
    }
    b
}

fn read_bytes(b: Vec<u8>, pdb: &Path) -> Read {
    let d = DumpFile::from_bytes(b, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb.to_path_buf()),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let sessions = list_sessions(&ctx);
    let (table, _) = etwdump::report::providers::read(&ctx);
    let report = tamper::check(&ctx, &sessions.sessions, &table);
    Read {
        table,
        report,
        clock_offset: 0,
    }
}

#[test]
fn damaged_tables_are_reported_and_the_rest_still_listed() {
    let name = "x64-19041";
    let f = forge(&providers_config(&fixture(name)));
    let e = f.etw.as_ref().unwrap();
    let pdb = pdb(name);
    // A provider with two registrations (the RPC provider: svchost and explorer).
    let two = e
        .providers
        .iter()
        .find(|p| p.registrations.len() == 2)
        .expect("a provider with two registrations");
    let (r0, r1) = (&two.registrations[0], &two.registrations[1]);

    // 1. The second registration's RegList.Flink points back at the first: the walk loops.
    //    Identity decides: both registrations are still listed, the loop is a warning.
    let b = patched(&f, &[(r1.va, r0.va.to_le_bytes().to_vec())]);
    let r = read_bytes(b, &pdb);
    let p = r
        .table
        .providers
        .iter()
        .find(|p| p.guid_entry.get() == two.guid_entry_va)
        .unwrap();
    assert_eq!(
        p.registrations
            .iter()
            .map(|x| x.address.get())
            .collect::<Vec<_>>(),
        vec![r0.va, r1.va]
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.field.as_deref() == Some("_ETW_GUID_ENTRY.RegListHead")),
        "{:?}",
        p.warnings
    );
    assert_eq!(
        r.table.providers.len(),
        e.providers.len(),
        "every provider still listed"
    );

    // 2. A registration whose GuidEntry back-pointer is wrong: listed, with the field named.
    let ge_off = {
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let opts = SymbolOptions {
            pdb: Some(pdb.clone()),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let l = ctx.symbols.layout("_ETW_REG_ENTRY").unwrap();
        l.field("GuidEntry").unwrap().offset
    };
    let b = patched(
        &f,
        &[(
            r0.va + ge_off,
            0xffff_8000_dead_0000u64.to_le_bytes().to_vec(),
        )],
    );
    let r = read_bytes(b, &pdb);
    let p = r
        .table
        .providers
        .iter()
        .find(|p| p.guid_entry.get() == two.guid_entry_va)
        .unwrap();
    let reg = &p.registrations[0];
    assert_eq!(reg.address.get(), r0.va);
    assert_eq!(reg.warnings.len(), 1, "{:?}", reg.warnings);
    assert_eq!(
        reg.warnings[0].field.as_deref(),
        Some("_ETW_REG_ENTRY.GuidEntry")
    );
    assert_eq!(reg.warnings[0].address.map(|a| a.get()), Some(r0.va));

    // 3. A bucket list whose first entry links to itself: bounded, reported, the other buckets
    //    still walked.
    let gt = e.guid_table.as_ref().unwrap();
    let victim = &e.providers[0];
    let b = patched(
        &f,
        &[(
            victim.guid_entry_va,
            victim.guid_entry_va.to_le_bytes().to_vec(),
        )],
    );
    let r = read_bytes(b, &pdb);
    assert!(r
        .table
        .providers
        .iter()
        .any(|p| p.guid_entry.get() == victim.guid_entry_va));
    let others = e
        .providers
        .iter()
        .filter(|p| p.list_head_va != victim.list_head_va)
        .count();
    assert!(
        r.table
            .providers
            .iter()
            .filter(|p| e
                .providers
                .iter()
                .any(|w| w.guid_entry_va == p.guid_entry.get()
                    && w.list_head_va != victim.list_head_va))
            .count()
            == others
    );
    assert!(
        r.table
            .warnings
            .iter()
            .any(|w| w.address.map(|a| a.get()) == Some(victim.list_head_va)),
        "{:?}",
        r.table.warnings
    );
    assert!(gt.buckets == 64);

    // 4. Random bytes over the table's pages, the GUID entries and registrations: never a
    //    panic, and the listing stays within its bounds.
    let mut targets: Vec<u64> = e.providers.iter().map(|p| p.guid_entry_va).collect();
    targets.extend(
        e.providers
            .iter()
            .flat_map(|p| p.registrations.iter().map(|r| r.va)),
    );
    targets.push(gt.va);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..120 {
        let mut patch = Vec::new();
        for _ in 0..(1 + next() % 12) {
            let t = targets[(next() % targets.len() as u64) as usize];
            patch.push((t + next() % 0x100 / 8 * 8, next().to_le_bytes().to_vec()));
        }
        let r = read_bytes(patched(&f, &patch), &pdb);
        assert!(r.table.providers.len() <= etwdump::etw::providers::MAX_PROVIDERS);
        for p in &r.table.providers {
            assert!(p.registrations.len() as u64 <= etwdump::etw::providers::MAX_REGISTRATIONS);
            assert!(p.enabled.len() as u64 <= etwdump::etw::providers::ENABLE_SLOTS);
        }
    }
}

/// `clock-hook` on builds whose `GetCpuClock` is an index (19041+): the kernel's time-stamp
/// routine accepts 0-3 and fails fast above, so every index 4..=0xFF the forge plants (fixed
/// edge values and seeded random ones) is exactly one finding at the logger context, and each
/// of 0-3 written into the clean twin is none.
#[test]
fn clock_index_outside_0_to_3_is_a_finding() {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut checked = 0;
    for name in FIXTURES {
        let clean = providers_config(&fixture(name));
        if !TamperKind::ClockIndex(4).applies_to(&clean) {
            continue;
        }
        let pdb = pdb(name);
        let mut values = vec![4u8, 5, 0x10, 0x7F, 0xFF];
        values.extend((0..4).map(|_| 4 + (next() % 252) as u8));
        for v in values {
            let mut c = clean.clone();
            c.etw = c
                .etw
                .map(|e| e.with_tampering(TamperSpec::one(TamperKind::ClockIndex(v))));
            let f = forge(&c);
            let want = &f.etw.as_ref().unwrap().findings;
            assert_eq!(want.len(), 1);
            let r = read(&f, &pdb);
            let got: Vec<(&str, u64)> = r
                .report
                .findings
                .iter()
                .map(|x| (x.check, x.address.map_or(0, |a| a.get()) - r.clock_offset))
                .collect();
            assert_eq!(
                got,
                [(CheckId::ClockHook.as_str(), want[0].address)],
                "{name} index {v:#x}"
            );
            let ev = &r.report.findings[0].evidence;
            assert!(
                ev.contains(&format!("is {v:#x}, an index the kernel never stores")),
                "{name}: {ev}"
            );
            checked += 1;
        }
        // 0-3 are the kernel's own values: no finding.
        let f = forge(&clean);
        let ctx_va = f
            .etw
            .as_ref()
            .unwrap()
            .sessions()
            .next()
            .unwrap()
            .context_va;
        let off = read(&f, &pdb).clock_offset;
        for v in 0u64..=3 {
            let b = patched(&f, &[(ctx_va + off, vec![v as u8])]);
            let r = read_bytes(b, &pdb);
            assert!(
                r.report
                    .findings
                    .iter()
                    .all(|x| x.check != CheckId::ClockHook.as_str()),
                "{name} index {v}: {:#?}",
                r.report.findings
            );
        }
    }
    // 19041, 20348, 22000, 26100 and x86 19569 (integer GetCpuClock), nine values each.
    assert_eq!(checked, 45);
}
