//! `forge OUTDIR [--with-16g] [--with-large] [--images] [--fixtures DIR | --no-fixtures]`: write the standard set of
//! synthetic dumps and manifest.json. The set includes one dump per fixture kernel found in
//! DIR (default: tests/fixtures of this checkout), `fixture-<name>.dmp` (x64: full dump,
//! DumpType 1; x86: PAE full dump), and the same with ETW logger state
//! (`EtwSpec::standard`), `fixture-<name>-etw.dmp`, plus `fixture-x64-19041-etw-max80.dmp`
//! (MaxLoggers 0x50); their manifest entries carry `"etw"` (route, array, expected slots).
//! x64 fixtures of 1607+ also get `fixture-<name>-etw-buffers.dmp` (`EtwSpec::with_buffers`:
//! buffers with records; each session's `"buffer_details"` in the manifest) and
//! `fixture-<name>-etw-ccswap.dmp` (the same plus `EtwSpec::with_pending_ccswap`: pending
//! 'CCsw' blocks, `"pending"` / `"pending_decoys"` in the manifest's `"etw"`). `--with-large`
//! adds `fixture-x64-19041-etw-large.dmp` (512 MiB machine, 256 MiB of buffers; BUFFERS.md).
//! `--images` also writes every dump's physical memory as memory images next to it
//! (`Forged::write_image`): `<stem>.raw`, `<stem>.vmem` + `<stem>.vmss`, `<stem>.vmsn` (VMware
//! with embedded memory) and `<stem>.elf` (QEMU-style ELF core), and gives each manifest entry
//! an `"images"` array (`image_json`); without it the output is unchanged.
//! `--scan` adds the scan scenarios (`scan_scenarios`: stopped sessions, stale copies, orphaned
//! 'CCsw' blocks, decoys; `scan-<name>.dmp`), whose manifest entries carry `"scan"`
//! (`scan_json`); without it the output is unchanged.
//! `--providers` adds `fixture-<name>-etw-providers.dmp` per fixture (`providers_config`: the
//! standard sessions with the standard providers, on x64 the processes and real-time consumers);
//! `--tampered` adds those and their tampered variants `fixture-<name>-tampered-<name>.dmp`
//! (`tamper_scenarios`: one per `TamperKind` that applies, `etw-write-patch-<variant>` for the
//! ntdll patches on x64); their `"etw"` carries `"guid_table"`, `"providers"`,
//! `"reg_handles"` and `"findings"` (empty for the clean twins). Dumps with user images
//! (`Config::with_user_images`: the x64 providers twins and their tampered variants) carry
//! `"ntdll"` (`ntdll_json`: the image, the eight functions, every process's PEB, loader and
//! ntdll pages, the write patches).
//! Every session of every manifest has `"get_cpu_clock"` and `"clock_routine"`.
//! `--realtime` adds, per x64 fixture, `fixture-<name>-etw-realtime-s<seed>.dmp` (seeds 0..3)
//! and `fixture-<name>-etw-realtime-damaged.dmp` (`realtime_scenarios`: buffers queued for the
//! real-time consumers in their processes' own address spaces); their consumers carry
//! `"realtime"` (`realtime_json`: the process DTB, the list head and count, the reserved space
//! and bitmap, every node and copy in list order, the decoys); without it the output is
//! unchanged.
//! `forge --sample-realtime PATH`: write `Config::sample_realtime()` (the ETW sample with
//! queued buffers for its three consumers) and `PATH.json` (its consumers' `"realtime"`).
//! `forge --random-image PATH [SIZE_MIB [SEED]]`: a raw image of pseudo-random bytes (default
//! 1024 MiB, seed 1), streamed (`write_random_image`), for the "no false buffers" check.
//! `forge --sample PATH`: write the small committed sample (x64 bitmap SDMP, type 5).
//! `forge --bench-dump PATH BUFFERS`: the performance benchmarks' dump (benches/limits.py,
//! benches/stream.rs): the 19041 fixture machine with one session of BUFFERS × 64 KiB buffers
//! (`EtwSpec::with_large_buffers`: half the records CSwitch events) in
//! `BUFFERS × 64 KiB + 512 MiB` of RAM; deterministic (no seed: the same bytes every time).
//! `forge --xpress DIR`: the Xpress sample texts (`xpress::sample_set`) as `NAME.bin` and their
//! Plain LZ77 / LZ77+Huffman encodings `NAME.lz77` / `NAME.huff` (tests/interop/xpress_check.py).
//! `forge --hiberfil OUTDIR`: Windows 8+ x64 hibernation files (`Forged::write_hiberfil`) of
//! the x64 fixture machines (`providers_config`: processes with user memory where the kernel
//! supports it), one machine per `HiberVersion` (`HiberVersion::for_build`; Windows 10
//! 1507–1511, which no fixture has, over the 14393 machine): every version × codec × variant
//! `hiber-<version>-<codec>-<variant>.sys`, plus one `WAKE` and one wiped file; each machine's
//! raw image `<machine>.raw`, each FastStartup file's crash dump of exactly its pages
//! (`Forged::write_dump_of_pages`, `<stem>.dmp`) and `manifest.json` (every file's
//! `HiberTruth`: `hiber_json`) for tests/interop/hiber_check.py.
//! `forge --triage OUTDIR`: write every synthetic triage-dump scenario (`triage_scenarios()`),
//! each in `OUTDIR/<scenario>/`: `<scenario>.dmp`, the ISF `<GUID>-<age>.json` (Volatility 3
//! naming, e.g. `5278AFF86C341677D7D7835C85B7B844-1.json`) and `expected.json`, and
//! `OUTDIR/manifest.json` (per scenario: files, arch, globals order, windows, record counts,
//! message flags).
//! `forge --triage-arm64 OUTDIR`: the same for the ARM64 scenarios only
//! (`TriageSpec::arm64_scenarios()`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use etwdump_forge::{
    default_fixtures_root, fixture_dirs, forge, forge_triage, guid_to_string, providers_config,
    realtime_scenarios, scan_scenarios, tamper_scenarios, triage_scenarios, write_random_image,
    BitmapSig, Config, EtwSpec, Expect, ExpectedBuffer, ExpectedConsumer, ExpectedEnableInfo,
    ExpectedRealtime, ExpectedSlot, Forged, ForgedEtw, ForgedScan, HeadShape, ImageKind, Layout,
    NodeShape, ScanObject, RANDOM_IMAGE_SIZE,
};
use serde_json::{json, Value};

fn hex_addr(v: u64) -> String {
    format!("{v:#x}")
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The standard set: (file stem, config).
fn standard_set(with_16g: bool) -> Vec<(String, Config)> {
    let v: Vec<(&str, Config)> = vec![
        ("x64-full", Config::x64()),
        (
            "x64-bitmap-sdmp",
            Config {
                layout: Layout::Bitmap {
                    sig: BitmapSig::Sdmp,
                    dump_type: 5,
                },
                ..Config::x64()
            },
        ),
        (
            "x64-bitmap-fdmp-type6",
            Config {
                layout: Layout::Bitmap {
                    sig: BitmapSig::Fdmp,
                    dump_type: 6,
                },
                ..Config::x64()
            },
        ),
        (
            "x64-full-pcid",
            Config {
                dtb_low_bits: 0x2,
                ..Config::x64()
            },
        ),
        ("x86pae-full", Config::x86_pae()),
        ("x86-full", Config::x86_nonpae()),
    ];
    let mut v: Vec<(String, Config)> = v.into_iter().map(|(s, c)| (s.to_string(), c)).collect();
    if with_16g {
        let big = 16u64 << 30;
        v.push((
            "x64-full-16g".to_string(),
            Config {
                physical_memory_bytes: big,
                ..Config::x64()
            },
        ));
        v.push((
            "x64-bitmap-16g".to_string(),
            Config {
                physical_memory_bytes: big,
                layout: Layout::Bitmap {
                    sig: BitmapSig::Sdmp,
                    dump_type: 5,
                },
                ..Config::x64()
            },
        ));
    }
    v
}

fn manifest_entry(file: &str, f: &Forged) -> Value {
    let probes: Vec<Value> = f
        .probes
        .iter()
        .map(|p| {
            let expect = match &p.expect {
                Expect::Bytes(b) => Value::String(hex_bytes(b)),
                Expect::Unreadable {
                    first_unreadable_va,
                } => {
                    // Extra key: the bytes before the first unreadable one.
                    let prefix_len = (first_unreadable_va - p.va) as usize;
                    let prefix = match f.expected_read(p.va, prefix_len) {
                        Expect::Bytes(b) => hex_bytes(&b),
                        Expect::Unreadable { .. } => unreachable!("prefix is readable"),
                    };
                    json!({"unreadable_at": hex_addr(*first_unreadable_va), "prefix": prefix})
                }
            };
            // Extra key: where the forge mapped the first byte (null: no translation).
            let pa = f.physical_address(p.va).map(hex_addr);
            json!({"name": p.name, "va": hex_addr(p.va), "len": p.len, "expect": expect, "pa": pa})
        })
        .collect();
    let modules: Vec<Value> = f
        .modules
        .iter()
        .map(|m| {
            json!({"base_name": m.base_name, "full_name": m.full_name,
                   "base": hex_addr(m.base), "size": hex_addr(m.size as u64)})
        })
        .collect();
    let c = &f.config;
    let mut entry = json!({
        "file": file,
        "arch": c.arch.name(),
        "dump_type": f.dump_type(),
        "layout": if c.layout.is_bitmap() { "bitmap" } else { "full" },
        "dtb": hex_addr(f.dtb),
        "kernel_base": hex_addr(c.kernel_base),
        "kdbg_va": hex_addr(f.kdbg_va),
        "kdbg_decoded": c.kdbg_decoded,
        "kuser_va": hex_addr(f.kuser_va),
        "ps_loaded_module_list": hex_addr(f.ps_loaded_module_list),
        "ps_active_process_head": hex_addr(f.ps_active_process_head),
        "pfn_database": hex_addr(f.pfn_database),
        "nt_build_lab": f.nt_build_lab,
        "build": c.build,
        "cpus": c.cpus,
        "bugcheck_code": hex_addr(c.bugcheck_code as u64),
        "system_time": c.system_time,
        "pdb": {"name": c.pdb_name, "key": c.pdb_symbol_key(), "age": c.pdb_age,
                "guid": guid_to_string(&c.pdb_guid)},
        "physical_memory_bytes": c.physical_memory_bytes,
        "runs": f.runs.iter().map(|r| json!([hex_addr(r.0), hex_addr(r.1)])).collect::<Vec<_>>(),
        "stored_pages": f.stored_pages,
        "file_len": f.file_len(),
        "modules": modules,
        "probes": probes,
    });
    if !f.processes.is_empty() {
        entry["processes"] = f
            .processes
            .iter()
            .map(|p| {
                json!({"pid": p.pid, "name": p.name, "parent_pid": p.parent_pid,
                       "eprocess": hex_addr(p.eprocess_va),
                       "threads": p.threads.iter().map(|t| t.1).collect::<Vec<_>>()})
            })
            .collect::<Vec<_>>()
            .into();
    }
    if let Some(n) = &f.ntdll {
        entry["ntdll"] = ntdll_json(n);
    }
    if let Some(fx) = &c.fixture {
        let symbols: serde_json::Map<String, Value> = f
            .symbols
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(hex_addr(*v))))
            .collect();
        let extra = json!({
            "fixture": fx.name,
            "kernel_size": hex_addr(fx.size_of_image.into()),
            "symbols": symbols,
            "kprcbs": f.kprcbs.iter().map(|v| hex_addr(*v)).collect::<Vec<_>>(),
            "kprcb_size": f.kprcb_size.map(|s| hex_addr(s.into())),
        });
        let extra = match (&f.etw, extra) {
            (Some(e), Value::Object(mut x)) => {
                x.insert("etw".to_string(), etw_json(e));
                if let Some(s) = &f.scan {
                    x.insert("scan".to_string(), scan_json(s));
                }
                Value::Object(x)
            }
            (_, x) => x,
        };
        let (Value::Object(e), Value::Object(x)) = (&mut entry, extra) else {
            unreachable!("objects")
        };
        e.extend(x);
    }
    entry
}

/// The manifest's `"etw"` object: route, array, capacity and every slot as a reader must
/// classify it (`kind`: "session" / "free" / "invalid").
fn etw_json(e: &ForgedEtw) -> Value {
    let opt_hex = |v: Option<u64>| v.map(hex_addr);
    let slots: Vec<Value> = e
        .slots
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            ExpectedSlot::Free { value } => {
                json!({"slot": i, "kind": "free", "value": hex_addr(*value)})
            }
            ExpectedSlot::Invalid { va, why } => {
                json!({"slot": i, "kind": "invalid", "va": hex_addr(*va), "why": why})
            }
            ExpectedSlot::Session(x) => json!({
                "slot": i,
                "kind": "session",
                "logger_id": x.logger_id,
                "name": x.name,
                "log_file": x.log_file,
                "logger_mode": x.logger_mode,
                "clock_type": x.clock_type,
                "buffer_size": x.buffer_size,
                "minimum_buffers": x.minimum_buffers,
                "maximum_buffers": x.maximum_buffers,
                "number_of_buffers": x.number_of_buffers,
                "buffers_written": x.buffers_written,
                "events_lost": x.events_lost,
                "log_buffers_lost": x.log_buffers_lost,
                "real_time_buffers_lost": x.real_time_buffers_lost,
                "start_time": x.start_time,
                "pool_type": x.pool_type,
                "instance_guid": x.instance_guid,
                "context_va": hex_addr(x.context_va),
                "maximum_event_size": x.maximum_event_size,
                "flags": x.flags,
                "name_va": hex_addr(x.name_va),
                "buffers": x.buffers.iter().map(|b| hex_addr(*b)).collect::<Vec<_>>(),
                "global_list_cycle_to": opt_hex(x.global_list_cycle_to),
                "buffer_details": x.buffer_details.iter().map(buffer_json).collect::<Vec<_>>(),
                "consumers": x.consumers.iter().map(consumer_json).collect::<Vec<_>>(),
                "get_cpu_clock": opt_hex(x.get_cpu_clock),
                "clock_routine": x.clock_routine,
            }),
        })
        .collect();
    let mut v = json!({
        "route": e.route.name(),
        "array": hex_addr(e.array_va),
        "capacity": e.capacity,
        "silo_state": opt_hex(e.silo_state_va),
        "host_silo_globals": opt_hex(e.host_silo_globals_va),
        "debugger_data_array_ptr": hex_addr(e.debugger_data_array_ptr_va),
        "slots": slots,
    });
    // Pending compact cswitch blocks (EtwSpec::with_pending_ccswap); absent when off, so the
    // other manifests are unchanged.
    if !e.pending.is_empty() || !e.pending_decoys.is_empty() {
        let pending: Vec<Value> = e
            .pending
            .iter()
            .map(|p| {
                json!({
                    "cpu": p.cpu,
                    "clock": p.clock,
                    "true_clock": p.true_clock,
                    "documented_offset": p.documented_offset,
                    "block_va": hex_addr(p.block_va),
                    "pointer_va": hex_addr(p.pointer_va),
                    "used_bytes": p.used_bytes,
                    "start_tick": p.start_tick,
                    "max_wait_reason": p.max_wait_reason,
                    "switches": p.batch.as_ref().map(|b| b.switches.len()),
                    "first_time": p.batch.as_ref().map(|b| b.first_time),
                    "last_time": p.batch.as_ref().map(|b| b.last_time()),
                })
            })
            .collect();
        let decoys: Vec<Value> = e
            .pending_decoys
            .iter()
            .map(|d| {
                json!({
                    "cpu": d.cpu,
                    "pointer_va": hex_addr(d.pointer_va),
                    "block_va": hex_addr(d.block_va),
                    "why": d.why,
                })
            })
            .collect();
        v["pending"] = Value::from(pending);
        v["pending_decoys"] = Value::from(decoys);
    }
    // Providers and tampering (EtwSpec::with_providers / with_tampering); absent otherwise.
    if e.guid_table.is_some() || !e.findings.is_empty() {
        providers_json(e, &mut v);
    }
    v
}

/// The user images (`Config::with_user_images`): ntdll's base, size, export directory, the
/// eight functions, the shared pages, each process's PEB / loader / modules / ntdll pages /
/// entry bytes, and the `etw-write-patch` tamperings.
fn ntdll_json(n: &etwdump_forge::ExpectedNtdll) -> Value {
    let hexes = |v: &[u8]| hex_bytes(v);
    let processes: Vec<Value> = n
        .processes
        .iter()
        .map(|p| {
            json!({
                "pid": p.pid, "name": p.name, "eprocess": hex_addr(p.eprocess),
                "dtb": hex_addr(p.dtb), "peb": hex_addr(p.peb), "ldr": hex_addr(p.ldr),
                "image_base": hex_addr(p.image_base),
                "modules": p.modules.iter().map(|m| json!({
                    "base_name": m.base_name, "full_name": m.full_name,
                    "base": hex_addr(m.base), "size_of_image": hex_addr(m.size_of_image.into()),
                    "entry_point": hex_addr(m.entry_point), "ldr_entry": hex_addr(m.ldr_entry),
                })).collect::<Vec<_>>(),
                "init_order": p.init_order,
                "ntdll_pages": p.ntdll_pages.iter().map(|(va, pa, s)| json!({
                    "va": hex_addr(*va), "pa": hex_addr(*pa), "state": format!("{s:?}"),
                })).collect::<Vec<_>>(),
                "etw_entries": p.etw_entries.iter().map(|(name, b)| json!({
                    "name": name, "bytes": b.as_deref().map(hexes),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "base": hex_addr(n.base),
        "size_of_image": hex_addr(n.size_of_image.into()),
        "export_directory": [hex_addr(n.export_directory.0), n.export_directory.1],
        "ordinal_base": n.ordinal_base,
        "exports": n.exports.len(),
        "forwarders": n.forwarders,
        "etw_functions": n.etw_functions.iter().map(|x| json!({
            "name": x.name, "va": hex_addr(x.va), "page_va": hex_addr(x.page_va),
            "entry": hexes(&x.entry),
        })).collect::<Vec<_>>(),
        "shared_pages": n.shared_pages.iter()
            .map(|(va, pa)| json!([hex_addr(*va), hex_addr(*pa)])).collect::<Vec<_>>(),
        "processes": processes,
        "patches": n.patches.iter().map(|x| json!({
            "variant": x.variant.name(), "pid": x.pid, "function": x.function,
            "va": hex_addr(x.va), "bytes": hexes(&x.bytes), "page_pa": hex_addr(x.page_pa),
        })).collect::<Vec<_>>(),
    })
}

/// One real-time consumer; `"realtime"` only where buffers are queued for it.
fn consumer_json(c: &ExpectedConsumer) -> Value {
    let mut v = json!({
        "address": hex_addr(c.va), "pid": c.pid, "eprocess": hex_addr(c.eprocess),
        "logger_id": c.logger_id, "buffers_lost": c.buffers_lost,
        "empty_buffers": c.empty_buffers});
    if let Some(r) = &c.realtime {
        v["realtime"] = realtime_json(r);
    }
    v
}

/// A consumer's queued buffers (`ExpectedRealtime`): VAs as hex strings, `fnv1a64` as hex.
fn realtime_json(r: &ExpectedRealtime) -> Value {
    let opt_hex = |v: Option<u64>| v.map(hex_addr);
    let (node, ptr_offset) = match r.node {
        NodeShape::Embedded => ("embedded", None),
        NodeShape::Descriptor { ptr_offset } => ("descriptor", Some(hex_addr(ptr_offset))),
    };
    let bufs: Vec<Value> = r
        .user_buffers
        .iter()
        .map(|b| {
            json!({
                "node_va": hex_addr(b.node_va), "va": hex_addr(b.va), "slot": b.slot,
                "readable": b.readable, "duplicate_of": opt_hex(b.duplicate_of),
                "logger_id": b.logger_id, "sequence_number": b.sequence_number,
                "processor": b.processor, "buffer_size": b.buffer_size, "state": b.state,
                "timestamp": b.timestamp, "valid_bytes": b.valid_bytes,
                "record_count": b.record_count, "fnv1a64": hex_addr(b.fnv1a64),
            })
        })
        .collect();
    let decoys: Vec<Value> = r
        .decoys
        .iter()
        .map(|d| {
            json!({"va": hex_addr(d.va), "slot": d.slot, "logger_id": d.logger_id,
                   "sequence_number": d.sequence_number})
        })
        .collect();
    json!({
        "dtb": hex_addr(r.dtb),
        "user_base": hex_addr(r.user_base),
        "node": node,
        "ptr_offset": ptr_offset,
        "head": match r.head {
            HeadShape::SeparateHead => "separate_head",
            HeadShape::FirstNode => "first_node",
        },
        "user_buffer_list_head": hex_addr(r.user_buffer_list_head),
        "user_buffer_count_va": hex_addr(r.user_buffer_count_va),
        "user_buffer_count": r.user_buffer_count,
        "queued": r.queued,
        "reserved_space": r.reserved_space.map(|(va, n)| json!([hex_addr(va), n])),
        "reserved_bitmap": r.reserved_bitmap.map(|(va, n)| json!([hex_addr(va), n])),
        "used_slots": r.used_slots,
        "user_pages_allocated": r.user_pages_allocated,
        "user_pages_reused": r.user_pages_reused,
        "list_cycle_to": opt_hex(r.list_cycle_to),
        "user_buffers": bufs,
        "decoys": decoys,
    })
}

/// `--sample-realtime PATH`: the realtime sample and `PATH.json` (its consumers).
fn write_realtime_sample(path: &Path) -> std::io::Result<()> {
    let f = forge(&Config::sample_realtime());
    f.write_to(path)?;
    let consumers: Vec<Value> = f
        .etw
        .iter()
        .flat_map(|e| e.sessions())
        .flat_map(|s| &s.consumers)
        .filter(|c| c.realtime.is_some())
        .map(consumer_json)
        .collect();
    let mut json_path = path.as_os_str().to_owned();
    json_path.push(".json");
    let text = serde_json::to_string_pretty(&Value::from(consumers)).expect("json");
    std::fs::write(&json_path, text + "\n")?;
    eprintln!(
        "wrote {}: {} bytes, and {}",
        path.display(),
        f.file_len(),
        PathBuf::from(json_path).display()
    );
    Ok(())
}

/// One `_TRACE_ENABLE_INFO` (an EnableInfo slot, or the aggregate when `index` is null).
fn enable_info_json(s: &ExpectedEnableInfo) -> Value {
    json!({
        "index": s.index,
        "is_enabled": s.is_enabled,
        "level": s.level,
        "logger_id": s.logger_id,
        "match_any_keyword": hex_addr(s.match_any),
        "match_all_keyword": hex_addr(s.match_all),
        "enable_property": s.enable_property,
    })
}

/// The manifest's `"guid_table"`, `"providers"`, `"reg_handles"` and `"findings"` (VAs as hex
/// strings; `findings` is empty for every clean dump).
fn providers_json(e: &ForgedEtw, v: &mut Value) {
    let opt_hex = |x: Option<u64>| x.map(hex_addr);
    if let Some(t) = &e.guid_table {
        v["guid_table"] = json!({
            "va": hex_addr(t.va),
            "global": t.global,
            "shape": t.shape.name(),
            "buckets": t.buckets,
            "stride": hex_addr(t.stride),
            "lists_per_bucket": t.lists,
            "list_offset": hex_addr(t.list_offset),
            "lock_offset": opt_hex(t.lock_offset),
            "bucket_rule": t.rule.name(),
        });
    }
    let providers: Vec<Value> = e
        .providers
        .iter()
        .map(|p| {
            let regs: Vec<Value> = p
                .registrations
                .iter()
                .map(|r| {
                    json!({
                        "address": hex_addr(r.va),
                        "mode": if r.kernel { "kernel" } else { "user" },
                        "pid": r.pid,
                        "eprocess": opt_hex(r.eprocess),
                        "callback": opt_hex(r.callback),
                        "callback_context": opt_hex(r.callback_context),
                        "index": r.index,
                        "flags": r.flags,
                        "enable_mask": r.enable_mask,
                        "handle": r.handle,
                    })
                })
                .collect();
            json!({
                "name": p.name,
                "guid": p.guid,
                "guid_entry": hex_addr(p.guid_entry_va),
                "guid_type": p.guid_type,
                "bucket": p.bucket,
                "list_head": hex_addr(p.list_head_va),
                "ref_count": p.ref_count,
                "silo_state": opt_hex(p.silo_state),
                "registrations": regs,
                "enable_slots": p.enable_slots.iter().map(enable_info_json).collect::<Vec<_>>(),
                "provider_enable_info": enable_info_json(&p.aggregate),
            })
        })
        .collect();
    let handles: Vec<Value> = e
        .reg_handles
        .iter()
        .map(|h| {
            json!({
                "name": h.name,
                "address": hex_addr(h.va),
                "value": hex_addr(h.value),
                "provider": h.provider,
                "guid": h.guid,
                "reg_entry": opt_hex(h.reg_entry),
            })
        })
        .collect();
    let findings: Vec<Value> = e
        .findings
        .iter()
        .map(|f| {
            json!({
                "check": f.check.as_str(),
                "address": hex_addr(f.address),
                "detail": f.detail,
                "changed": f.changed.iter().map(|(va, n)| json!([hex_addr(*va), n])).collect::<Vec<_>>(),
            })
        })
        .collect();
    v["providers"] = Value::from(providers);
    v["reg_handles"] = Value::from(handles);
    v["findings"] = Value::from(findings);
}

/// One scan object (`etwdump_forge::ScanObject`): kind, class, physical address of its first
/// byte, VA (null: not mapped), group, and the kind's facts.
fn scan_object_json(o: &ScanObject) -> Value {
    let opt_hex = |v: Option<u64>| v.map(hex_addr);
    let mut v = json!({
        "kind": o.kind.name(),
        "class": o.class.name(),
        "pa": hex_addr(o.pa),
        "va": opt_hex(o.va),
        "group": o.group,
    });
    if let Some(b) = &o.buffer {
        v["buffer"] = json!({
            "logger_id": b.logger_id,
            "buffer_size": b.buffer_size,
            "sequence_number": b.sequence_number,
            "state": b.state,
            "valid_bytes": b.valid_bytes,
            "record_count": b.record_count,
            "pages": b.pages.iter().map(|p| opt_hex(*p)).collect::<Vec<_>>(),
            "overwritten_pages": b.overwritten_pages,
            "complete": b.complete,
            "intact_bytes": b.intact_bytes,
            "recoverable_bytes": b.recoverable_bytes,
            "recoverable_records": b.recoverable_records,
            "physically_contiguous": b.physically_contiguous,
            "header_only": b.header_only,
            "compressed": b.compressed,
            "copy_of": opt_hex(b.copy_of),
        });
    }
    if let Some(p) = &o.pending {
        v["pending"] = json!({
            "used_bytes": p.used_bytes,
            "start_tick": p.start_tick,
            "clock_type": p.clock_type,
            "switches": p.switches,
            "first_time": p.first_time,
            "last_time": p.last_time,
            "cpu": p.cpu,
            "pool_freed": p.pool_freed,
        });
    }
    if let Some(c) = &o.context {
        v["context"] = json!({
            "logger_id": c.logger_id,
            "name": c.name,
            "buffer_size": c.buffer_size,
            "clock_type": c.clock_type,
            "slot": c.slot,
            "pool_freed": c.pool_freed,
        });
    }
    v
}

/// The manifest's `"scan"` object (scan scenarios): objects, orphan groups, lost objects and
/// decoys, with physical addresses as hex strings.
fn scan_json(s: &ForgedScan) -> Value {
    let opt_hex = |v: Option<u64>| v.map(hex_addr);
    let groups: Vec<Value> = s
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.group,
                "origin": g.origin.name(),
                "logger_id": g.logger_id,
                "slot": g.slot,
                "name": g.name,
                "buffer_size": g.buffer_size,
                "clock_type": g.clock_type,
                "context_pa": opt_hex(g.context_pa),
                "buffers": g.buffers,
                "lost_buffers": g.lost_buffers,
                "timestamp_window": g.timestamp_window.map(|(a, b)| [a, b]),
                "utc_window": g.utc_window.map(|(a, b)| [a, b]),
            })
        })
        .collect();
    let lost: Vec<Value> = s
        .lost
        .iter()
        .map(|l| {
            json!({"kind": l.kind.name(), "group": l.group, "logger_id": l.logger_id,
                   "sequence_number": l.sequence_number, "va": hex_addr(l.va),
                   "pa": hex_addr(l.pa), "why": l.why})
        })
        .collect();
    let decoys: Vec<Value> = s
        .decoys
        .iter()
        .map(|d| json!({"what": d.what, "pa": hex_addr(d.pa), "va": opt_hex(d.va), "why": d.why}))
        .collect();
    json!({
        "free_slot_value": s.free_slot_value,
        "objects": s.objects.iter().map(scan_object_json).collect::<Vec<_>>(),
        "groups": groups,
        "lost": lost,
        "decoys": decoys,
    })
}

/// Physical memory of the `-etw-large` dump (its 256 MiB of buffers must fit).
const LARGE_MEMORY: u64 = 512 << 20;

/// One buffer's expectations (BUFFERS.md): the fields of `etwdump buffers --format json`
/// ("records_by_key" for its "records_by_hook") plus the raw offsets and `extractable`.
fn buffer_json(b: &ExpectedBuffer) -> Value {
    json!({
        "session_id": b.session_id,
        "address": hex_addr(b.address),
        "lists": b.lists,
        "state": b.state,
        "buffer_type": b.buffer_type,
        "buffer_flag": b.buffer_flag,
        "processor": b.processor,
        "sequence_number": b.sequence_number,
        "buffer_size": b.buffer_size,
        "valid_bytes": b.valid_bytes,
        "trimmed_bytes": b.trimmed_bytes,
        "record_count": b.record_count,
        "records_by_key": b.records_by_key,
        "compressed": b.compressed,
        "extractable": b.extractable(),
        "current_offset": b.current_offset,
        "saved_offset": b.saved_offset,
        "offset": b.offset,
    })
}

/// One full dump per fixture directory below `root`: `fixture-<name>`, then the same kernels
/// with [`EtwSpec::standard`]: `fixture-<name>-etw`, and `fixture-x64-19041-etw-max80`
/// (MaxLoggers 0x50).
fn fixture_set(root: &Path, with_large: bool) -> Result<Vec<(String, Config)>, String> {
    let dirs = fixture_dirs(root);
    if dirs.is_empty() {
        return Err(format!("no fixture kernels in {}", root.display()));
    }
    let plain: Vec<(String, Config)> = dirs
        .iter()
        .map(|d| {
            let cfg = Config::try_from_fixture(d).map_err(|e| e.to_string())?;
            let name = cfg
                .fixture
                .as_ref()
                .map(|f| f.name.clone())
                .unwrap_or_default();
            Ok((format!("fixture-{name}"), cfg))
        })
        .collect::<Result<_, String>>()?;
    let mut set = plain.clone();
    for (stem, cfg) in &plain {
        set.push((format!("{stem}-etw"), cfg.clone().with_standard_etw()));
    }
    // Buffers with data: x64 fixtures of 1607+ (per-CPU routes known).
    for (stem, cfg) in &plain {
        if cfg.arch.is_x64() && cfg.build >= 14393 {
            let spec = EtwSpec::standard(cfg.build).with_buffers(cfg.build);
            set.push((
                format!("{stem}-etw-buffers"),
                cfg.clone().with_etw(spec.clone()),
            ));
            // The same with pending compact cswitch blocks ('CCsw', etw-internals.md §4).
            set.push((
                format!("{stem}-etw-ccswap"),
                cfg.clone().with_etw(spec.with_pending_ccswap()),
            ));
        }
    }
    if with_large {
        if let Some((stem, cfg)) = plain.iter().find(|(s, _)| s == "fixture-x64-19041") {
            let spec = EtwSpec::standard(cfg.build).with_large_buffers(cfg.build, 4096, 0x1_0000);
            let mut c = cfg.clone().with_etw(spec);
            c.physical_memory_bytes = LARGE_MEMORY;
            set.push((format!("{stem}-etw-large"), c));
        }
    }
    if let Some((stem, cfg)) = plain.iter().find(|(s, _)| s == "fixture-x64-19041") {
        set.push((
            format!("{stem}-etw-max80"),
            cfg.clone()
                .with_etw(EtwSpec::standard_with_max_loggers(cfg.build, 0x50)),
        ));
    }
    Ok(set)
}

/// One memory image's manifest object: the format, the files (names in OUTDIR; `memory_file`
/// holds the memory), the full CR3 of the dump header (`dtb`), the page-table root's physical
/// address (PML4 / PAE PDPT / PD), the x64 self-map index (null on x86), kernel base, build and
/// every physical range `{start, size, file_offset}` (offset in `memory_file`).
fn image_json(f: &Forged, kind: ImageKind, files: &[PathBuf]) -> Value {
    let name = |p: &PathBuf| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let memory_file = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == kind.memory_extension()))
        .map(name);
    let ranges: Vec<Value> = f
        .image_ranges(kind)
        .iter()
        .map(|r| {
            json!({"start": hex_addr(r.start), "size": hex_addr(r.size),
                   "file_offset": hex_addr(r.file_offset)})
        })
        .collect();
    json!({
        "format": kind.name(),
        "files": files.iter().map(name).collect::<Vec<_>>(),
        "memory_file": memory_file,
        "dtb": hex_addr(f.dtb),
        "page_table_root": hex_addr(f.page_table_root()),
        "self_map_index": f.self_map_index().map(hex_addr),
        "kernel_base": hex_addr(f.config.kernel_base),
        "build": f.config.build,
        "ranges": ranges,
    })
}

/// `--images`: every image kind of `f` next to its dump `<stem>.dmp`; their manifest objects.
fn write_images(outdir: &Path, stem: &str, f: &Forged) -> std::io::Result<Vec<Value>> {
    let mut out = Vec::new();
    for kind in ImageKind::ALL {
        let path = outdir.join(format!("{stem}.{}", kind.memory_extension()));
        let files = f.write_image(&path, kind)?;
        out.push(image_json(f, kind, &files));
    }
    eprintln!("wrote {stem}.raw, .vmem + .vmss, .vmsn, .elf");
    Ok(out)
}

fn write_set(a: &SetArgs) -> std::io::Result<()> {
    let outdir = a.outdir.as_path();
    let mut set = standard_set(a.with_16g);
    if let Some(root) = &a.fixtures {
        set.extend(fixture_set(root, a.with_large).map_err(std::io::Error::other)?);
        if a.scan {
            set.extend(scan_scenarios(root));
        }
        if a.realtime {
            set.extend(realtime_scenarios(root));
        }
        if a.tampered {
            set.extend(tamper_scenarios(root));
        } else if a.providers {
            for d in fixture_dirs(root) {
                let cfg = providers_config(&d);
                let name = cfg
                    .fixture
                    .as_ref()
                    .map(|f| f.name.clone())
                    .unwrap_or_default();
                set.push((format!("fixture-{name}-etw-providers"), cfg));
            }
        }
    }
    std::fs::create_dir_all(outdir)?;
    let mut entries = Vec::new();
    for (stem, cfg) in set {
        let f = forge(&cfg);
        let file = format!("{stem}.dmp");
        f.write_to(&outdir.join(&file))?;
        eprintln!(
            "wrote {file}: {} bytes, {} stored pages, {} probes",
            f.file_len(),
            f.stored_pages,
            f.probes.len()
        );
        let mut entry = manifest_entry(&file, &f);
        if a.images {
            entry["images"] = Value::from(write_images(outdir, &stem, &f)?);
        }
        entries.push(entry);
    }
    let text = serde_json::to_string_pretty(&Value::Array(entries)).expect("json");
    std::fs::write(outdir.join("manifest.json"), text + "\n")?;
    Ok(())
}

/// The sample with every tampering of [`TamperKind::ALL`] (its findings in the manifest).
fn tampered_sample() -> Config {
    let mut c = Config::sample_etw();
    c.etw = c.etw.take().map(|e| {
        e.with_tampering(etwdump_forge::TamperSpec {
            kinds: etwdump_forge::TamperKind::ALL.to_vec(),
        })
    });
    c
}

/// The realtime sample ([`Config::sample_realtime`]: buffers queued for its three real-time
/// consumers) with ntdll in every process and explorer.exe's `EtwEventWrite` patched to `ret`.
fn realtime_sample() -> Config {
    let mut c = Config::sample_realtime().with_user_images();
    c.etw = c.etw.take().map(|e| {
        e.with_tampering(etwdump_forge::TamperSpec {
            kinds: vec![etwdump_forge::TamperKind::WritePatch(
                etwdump_forge::WritePatch::Ret,
            )],
        })
    });
    c
}

/// `--plugin-set OUTDIR`: the host-framework plugins' test set: `sample-etw` (the shipped
/// sample's memory), `hostile-etw` (hostile names), `tampered-etw` (the sample with every
/// kernel tampering the checks look for) and `realtime-etw` ([`realtime_sample`]: consumers'
/// queued buffers in their processes, user memory, a patched `EtwEventWrite`), each as its
/// crash dump and every memory image, with manifest.json (entries as for the standard set,
/// with "images").
fn write_plugin_set(outdir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(outdir)?;
    let mut entries = Vec::new();
    for (stem, cfg) in [
        ("sample-etw", Config::sample_etw()),
        ("hostile-etw", Config::hostile_etw()),
        ("tampered-etw", tampered_sample()),
        ("realtime-etw", realtime_sample()),
    ] {
        let f = forge(&cfg);
        let file = format!("{stem}.dmp");
        f.write_to(&outdir.join(&file))?;
        let mut entry = manifest_entry(&file, &f);
        entry["images"] = Value::from(write_images(outdir, stem, &f)?);
        entries.push(entry);
    }
    let text = serde_json::to_string_pretty(&Value::Array(entries)).expect("json");
    std::fs::write(outdir.join("manifest.json"), text + "\n")
}

/// `--payloads OUTDIR`: the dumps of `etwdump_forge::payloads::payload_set` (buffers with
/// realistic payloads of every class of `etwdump_forge::payloads`, x64 and x86), with
/// manifest.json (entries as for the standard set, plus "pdb": the fixture's PDB, and
/// "payload_sessions": the logger ids whose buffers hold the payloads).
fn write_payload_set(outdir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(outdir)?;
    let mut entries = Vec::new();
    for (stem, cfg) in etwdump_forge::payloads::payload_set() {
        let f = forge(&cfg);
        let file = format!("{stem}.dmp");
        f.write_to(&outdir.join(&file))?;
        let mut entry = manifest_entry(&file, &f);
        let dir = &cfg.fixture.as_ref().expect("fixture").dir;
        let pdb = dir.join(&f.config.pdb_name);
        entry["pdb"] = Value::String(pdb.to_string_lossy().into_owned());
        let spec = cfg.etw.as_ref().expect("etw");
        entry["payload_sessions"] = Value::from(etwdump_forge::payloads::payload_slots(spec));
        entries.push(entry);
        eprintln!("wrote {file}: {} bytes", f.file_len());
    }
    let text = serde_json::to_string_pretty(&Value::Array(entries)).expect("json");
    std::fs::write(outdir.join("manifest.json"), text + "\n")
}

/// `--triage OUTDIR` / `--triage-arm64 OUTDIR`: one directory per triage scenario with the
/// dump, its ISF and expected.json, and `OUTDIR/manifest.json` (`triage_manifest_entry` per
/// scenario).
fn write_triage(outdir: &Path, specs: Vec<etwdump_forge::TriageSpec>) -> std::io::Result<()> {
    let mut entries = Vec::new();
    for spec in specs {
        let f = forge_triage(&spec);
        let dir = outdir.join(&spec.name);
        std::fs::create_dir_all(&dir)?;
        let dmp = format!("{}.dmp", spec.name);
        std::fs::write(dir.join(&dmp), &f.bytes)?;
        let guid: String = spec.pdb_guid.chars().filter(|c| *c != '-').collect();
        let isf = format!("{}-{}.json", guid.to_uppercase(), spec.pdb_age);
        std::fs::write(dir.join(&isf), &f.isf_json)?;
        let text = serde_json::to_string_pretty(&f.expected).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("expected.json"), text + "\n")?;
        eprintln!(
            "wrote {}/{dmp}: {} bytes, {} records; {isf}; expected.json",
            spec.name,
            f.bytes.len(),
            f.expected.records.len()
        );
        entries.push(triage_manifest_entry(&spec.name, &dmp, &isf, &f.expected));
    }
    std::fs::create_dir_all(outdir)?;
    let text = serde_json::to_string_pretty(&Value::Array(entries)).expect("json");
    std::fs::write(outdir.join("manifest.json"), text + "\n")
}

/// A triage scenario in manifest.json: its files (relative to OUTDIR), arch, build, the
/// placement of the window globals, per window (which, logger, CPU, base, end, valid, the
/// window / Base / End blocks and the globals' VAs, record count) and the record counts by
/// source and by header type, and the message OptionFlags that occur. The full truth is in
/// the scenario's expected.json.
fn triage_manifest_entry(
    name: &str,
    dmp: &str,
    isf: &str,
    e: &etwdump_forge::ExpectedTriage,
) -> Value {
    let hex = |v: u64| Value::String(format!("{v:#x}"));
    let windows: Vec<Value> = e
        .windows
        .iter()
        .map(|w| {
            json!({
                "which": w.which,
                "logger_id": w.logger_id,
                "cpu": w.cpu,
                "base": hex(w.base),
                "end": hex(w.end),
                "valid": hex(w.valid),
                "window_block": w.block_index,
                "base_block": w.base_block_index,
                "end_block": w.end_block_index,
                "base_global_va": hex(w.base_global_va),
                "end_global_va": hex(w.end_global_va),
                "end_global_delta": w.end_global_delta,
                "globals_order": w.globals_order,
                "records": w.record_count,
            })
        })
        .collect();
    let mut by_type = std::collections::BTreeMap::new();
    let mut flags = std::collections::BTreeSet::new();
    for r in &e.records {
        *by_type.entry(r.header_type.clone()).or_insert(0usize) += 1;
        if let Some(m) = &r.message {
            flags.insert(format!("{:#04x}", m.flags));
        }
    }
    json!({
        "scenario": name,
        "dump": format!("{name}/{dmp}"),
        "isf": format!("{name}/{isf}"),
        "expected": format!("{name}/expected.json"),
        "arch": e.arch,
        "build": e.build,
        "machine_image_type": hex(u64::from(e.machine_image_type)),
        "globals_order": e.globals_order,
        "windows": windows,
        "record_counts": e.record_counts,
        "records_by_header_type": by_type,
        "message_flags": flags,
    })
}

/// The benchmarks' machine (`--bench-dump`): the x64 19041 fixture with one session of
/// `buffers` 64 KiB buffers.
fn bench_config(buffers: u32) -> Config {
    let fx = default_fixtures_root().join("x64-19041");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = (u64::from(buffers) << 16) + (512 << 20);
    cfg.etw = Some(EtwSpec::standard(cfg.build).with_large_buffers(cfg.build, buffers, 0x1_0000));
    cfg
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: forge OUTDIR [--with-16g] [--with-large] [--images] [--scan] [--providers] [--tampered] [--realtime] [--fixtures DIR | --no-fixtures]\n       forge --sample PATH\n       forge --sample-realtime PATH\n       forge --triage OUTDIR\n       forge --triage-arm64 OUTDIR\n       forge --plugin-set OUTDIR\n       forge --payloads OUTDIR\n       forge --xpress DIR\n       forge --hiberfil OUTDIR\n       forge --random-image PATH [SIZE_MIB [SEED]]\n       forge --bench-dump PATH BUFFERS"
    );
    ExitCode::from(2)
}

/// Options of the `forge OUTDIR ...` form.
struct SetArgs {
    outdir: PathBuf,
    with_16g: bool,
    with_large: bool,
    /// Also write the memory images of every dump (`--images`).
    images: bool,
    /// Add the scan scenarios (`--scan`).
    scan: bool,
    /// Add the standard providers dump per fixture (`--providers`).
    providers: bool,
    /// Add the providers dump and its tampered variants per fixture (`--tampered`).
    tampered: bool,
    /// Add the realtime-buffer dumps per x64 fixture (`--realtime`).
    realtime: bool,
    fixtures: Option<PathBuf>,
}

fn parse_set_args(args: &[String]) -> Option<SetArgs> {
    let (dir, rest) = args.split_first()?;
    if dir.starts_with('-') {
        return None;
    }
    let mut a = SetArgs {
        outdir: PathBuf::from(dir),
        with_16g: false,
        with_large: false,
        images: false,
        scan: false,
        providers: false,
        tampered: false,
        realtime: false,
        fixtures: Some(default_fixtures_root()),
    };
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--with-16g" => a.with_16g = true,
            "--with-large" => a.with_large = true,
            "--images" => a.images = true,
            "--scan" => a.scan = true,
            "--providers" => a.providers = true,
            "--tampered" => a.tampered = true,
            "--realtime" => a.realtime = true,
            "--no-fixtures" => a.fixtures = None,
            "--fixtures" => a.fixtures = Some(PathBuf::from(it.next()?)),
            _ => return None,
        }
    }
    Some(a)
}

/// `--xpress DIR`: each of `xpress::sample_set()` as `NAME.bin` (plain), `NAME.lz77` and
/// `NAME.huff` (the forge's compressors), for tests/interop/xpress_check.py.
fn write_xpress_set(dir: &Path) -> std::io::Result<()> {
    use etwdump_forge::xpress;
    std::fs::create_dir_all(dir)?;
    let set = xpress::sample_set();
    for (name, plain) in &set {
        std::fs::write(dir.join(format!("{name}.bin")), plain)?;
        std::fs::write(
            dir.join(format!("{name}.lz77")),
            xpress::compress_lz77(plain),
        )?;
        std::fs::write(
            dir.join(format!("{name}.huff")),
            xpress::compress_huffman(plain),
        )?;
    }
    eprintln!(
        "wrote {} plain texts and their Xpress encodings to {}",
        set.len(),
        dir.display()
    );
    Ok(())
}

/// A `HiberTruth` as JSON: the header facts, the stored PFNs as runs `[first, count]`, and
/// every compression set.
fn hiber_json(t: &etwdump_forge::HiberTruth) -> Value {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &p in &t.pfns {
        match runs.last_mut() {
            Some((b, n)) if *b + *n == p => *n += 1,
            _ => runs.push((p, 1)),
        }
    }
    let sets: Vec<Value> = t
        .sets
        .iter()
        .map(|s| {
            json!({
                "restore_set": match s.restore_set {
                    etwdump_forge::RestoreSet::Boot => "boot",
                    etwdump_forge::RestoreSet::Kernel => "kernel",
                },
                "offset": s.offset,
                "method": s.method,
                "descriptors": s.descriptors,
                "compressed_size": s.compressed_size,
                "pages": s.pages,
                "uncompressed": s.uncompressed,
            })
        })
        .collect();
    json!({
        "version": t.version.name(),
        "length_self": t.length_self,
        "codec": t.codec.name(),
        "signature": t.signature.name(),
        "variant": t.variant.name(),
        "system_time": t.system_time,
        "highest_physical_page": t.highest_physical_page,
        "hiberboot": t.hiberboot,
        "pfn_count": t.pfns.len(),
        "pfn_runs": runs,
        "boot_pages": t.boot_pages,
        "kernel_pages": t.kernel_pages,
        "boot_set_offset": t.boot_set_offset,
        "kernel_set_offset": t.kernel_set_offset,
        "data_end": t.data_end,
        "file_len": t.file_len,
        "sets": sets,
    })
}

/// `--hiberfil OUTDIR`: see the module documentation.
fn write_hiber_set(outdir: &Path, fixtures: &Path) -> std::io::Result<()> {
    use etwdump_forge::{HiberCodec, HiberSignature, HiberSpec, HiberVariant, HiberVersion};
    std::fs::create_dir_all(outdir)?;
    // One machine per version: the newest x64 fixture whose build writes it.
    let mut machines: Vec<(HiberVersion, PathBuf)> = Vec::new();
    for d in fixture_dirs(fixtures) {
        let Ok(fx) = etwdump_forge::Fixture::load(&d) else {
            continue;
        };
        if !fx.x64 {
            continue;
        }
        if let Some(v) = HiberVersion::for_build(fx.build) {
            machines.retain(|(w, _)| *w != v);
            machines.push((v, d.clone()));
        }
        // Versions without a fixture of their builds: the nearest later machine.
        for (build, v) in [
            (14393, HiberVersion::Win10_1507),
            (17763, HiberVersion::Win10_1703),
        ] {
            if fx.build == build {
                machines.retain(|(w, _)| *w != v);
                machines.push((v, d.clone()));
            }
        }
    }
    machines.sort();
    let mut entries = Vec::new();
    let mut raws: Vec<String> = Vec::new();
    let mut seed = 1u64;
    for (i, (version, dir)) in machines.iter().enumerate() {
        let cfg = providers_config(dir);
        let name = cfg
            .fixture
            .as_ref()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        let f = forge(&cfg);
        let raw = format!("{name}.raw");
        if !raws.contains(&raw) {
            f.write_image(&outdir.join(&raw), ImageKind::Raw)?;
            raws.push(raw.clone());
        }
        let mut specs = Vec::new();
        for codec in HiberCodec::ALL {
            for variant in HiberVariant::ALL {
                specs.push(HiberSpec {
                    version: *version,
                    codec,
                    variant,
                    signature: HiberSignature::Hibr,
                    seed,
                });
                seed += 1;
            }
        }
        // One WAKE and one wiped file, on the last machine.
        if i + 1 == machines.len() {
            for (signature, codec) in [
                (HiberSignature::Wake, HiberCodec::Huffman),
                (HiberSignature::Wiped, HiberCodec::Lz77),
            ] {
                specs.push(HiberSpec {
                    version: *version,
                    codec,
                    variant: HiberVariant::Full,
                    signature,
                    seed,
                });
                seed += 1;
            }
        }
        for spec in specs {
            let mut stem = format!(
                "hiber-{}-{}-{}",
                spec.version.name(),
                spec.codec.name(),
                spec.variant.name()
            );
            if spec.signature != HiberSignature::Hibr {
                stem = format!("{stem}-{}", spec.signature.name());
            }
            let file = format!("{stem}.sys");
            let truth = f.write_hiberfil(&outdir.join(&file), &spec)?;
            let dump = if spec.variant == HiberVariant::FastStartup {
                let dump = format!("{stem}.dmp");
                f.write_dump_of_pages(&outdir.join(&dump), &truth.pfns)?;
                Some(dump)
            } else {
                None
            };
            let mut v = hiber_json(&truth);
            let o = v.as_object_mut().expect("object");
            o.insert("file".into(), json!(file));
            o.insert("machine".into(), json!(name));
            o.insert("build".into(), json!(f.config.build));
            o.insert("seed".into(), json!(spec.seed));
            o.insert("raw".into(), json!(raw));
            o.insert("dump".into(), json!(dump));
            o.insert("dtb".into(), json!(hex_addr(f.dtb)));
            o.insert("kernel_base".into(), json!(hex_addr(f.config.kernel_base)));
            o.insert(
                "machine_pages".into(),
                json!(f.hiberfil_pfns(HiberVariant::Full).len()),
            );
            entries.push(v);
        }
        eprintln!("wrote the hibernation files of {name} ({})", version.name());
    }
    let text = serde_json::to_string_pretty(&json!({ "hiberfiles": entries }))
        .map_err(std::io::Error::other)?;
    std::fs::write(outdir.join("manifest.json"), text + "\n")?;
    eprintln!(
        "wrote {} hibernation files to {}",
        entries.len(),
        outdir.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, path] if flag == "--sample-etw" => {
            let f = forge(&Config::sample_etw());
            let path = PathBuf::from(path);
            f.write_to(&path).map(|()| {
                eprintln!("wrote {}: {} bytes", path.display(), f.file_len());
            })
        }
        [flag, dir] if flag == "--triage" => write_triage(&PathBuf::from(dir), triage_scenarios()),
        [flag, dir] if flag == "--triage-arm64" => write_triage(
            &PathBuf::from(dir),
            etwdump_forge::TriageSpec::arm64_scenarios(),
        ),
        [flag, path] if flag == "--sample-realtime" => write_realtime_sample(&PathBuf::from(path)),
        [flag, dir] if flag == "--plugin-set" => write_plugin_set(&PathBuf::from(dir)),
        [flag, dir] if flag == "--payloads" => write_payload_set(&PathBuf::from(dir)),
        [flag, dir] if flag == "--xpress" => write_xpress_set(&PathBuf::from(dir)),
        [flag, dir] if flag == "--hiberfil" => {
            write_hiber_set(&PathBuf::from(dir), &default_fixtures_root())
        }
        [flag, path, rest @ ..] if flag == "--random-image" && rest.len() <= 2 => {
            let mib = rest.first().map(|v| v.parse::<u64>());
            let seed = rest.get(1).map(|v| v.parse::<u64>());
            match (mib, seed) {
                (Some(Err(_)), _) | (_, Some(Err(_))) => return usage(),
                (m, s) => {
                    let size = m.map_or(RANDOM_IMAGE_SIZE, |v| v.unwrap_or(0) << 20);
                    let seed = s.map_or(1, |v| v.unwrap_or(1));
                    write_random_image(&PathBuf::from(path), size, seed).map(|()| {
                        eprintln!("wrote {path}: {size} random bytes (seed {seed})");
                    })
                }
            }
        }
        [flag, path, n] if flag == "--bench-dump" => match n.parse::<u32>() {
            Ok(buffers) if (1..=1 << 20).contains(&buffers) => {
                let path = PathBuf::from(path);
                let cfg = bench_config(buffers);
                let f = forge(&cfg);
                f.write_to(&path).map(|()| {
                    eprintln!(
                        "wrote {}: {} buffers x 64 KiB, {} bytes",
                        path.display(),
                        buffers,
                        f.file_len()
                    )
                })
            }
            _ => return usage(),
        },
        [flag, path] if flag == "--sample" => {
            let f = forge(&Config::sample());
            let path = PathBuf::from(path);
            f.write_to(&path).map(|()| {
                eprintln!(
                    "wrote {}: {} bytes, {} stored pages",
                    path.display(),
                    f.file_len(),
                    f.stored_pages
                )
            })
        }
        _ => match parse_set_args(&args) {
            Some(a) => write_set(&a),
            None => return usage(),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forge: {e}");
            ExitCode::FAILURE
        }
    }
}
