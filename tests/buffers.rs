//! `buffers` and `extract` against forge dumps with ETW buffers (tests/forge etw_buffers.rs,
//! written from etw-internals.md §2-§6 independently of the reader): every buffer is found on
//! the lists the forge put it on, with the valid/trimmed bytes and record counts it wrote; the
//! .etl files hold exactly the extractable buffers, in sequence order.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::report::buffers::analyse;
use etwdump_forge::{forge, Config, EtwSpec, Forged};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn forge_buffers(name: &str) -> Forged {
    let mut c = Config::from_fixture(&fixture(name));
    c.etw = Some(EtwSpec::standard(c.build).with_buffers(c.build));
    forge(&c)
}

fn opts(name: &str) -> SymbolOptions {
    SymbolOptions {
        pdb: Some(fixture(name).join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    }
}

const FIXTURES: &[&str] = &["x64-14393", "x64-17763", "x64-17763b", "x64-19041"];

#[test]
fn every_buffer_as_forged() {
    for name in FIXTURES {
        let f = forge_buffers(name);
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts(name)).unwrap();
        let rep = analyse(&ctx, None);
        let etw = f.etw.as_ref().unwrap();
        let mut expected = 0;
        for s in etw.sessions() {
            for e in &s.buffer_details {
                expected += 1;
                let addr = format!("{:#x}", e.address);
                let r = rep
                    .rows
                    .iter()
                    .find(|r| r.address.as_deref() == Some(addr.as_str()))
                    .unwrap_or_else(|| {
                        panic!(
                            "{name}: buffer {addr} of logger {} not found; warnings {:?}",
                            s.logger_id, rep.warnings
                        )
                    });
                let what = format!("{name}: logger {} buffer {addr}", s.logger_id);
                assert_eq!(r.session_id, Some(u64::from(e.session_id)), "{what}");
                let lists: Vec<String> = r
                    .lists
                    .iter()
                    .map(|l| {
                        serde_json::to_value(l)
                            .unwrap()
                            .as_str()
                            .unwrap()
                            .to_string()
                    })
                    .collect();
                let mut want_lists = e.lists.clone();
                want_lists.sort();
                let mut got_lists = lists.clone();
                got_lists.sort();
                assert_eq!(got_lists, want_lists, "{what}: lists");
                assert_eq!(r.state, Some(u64::from(e.state)), "{what}: state");
                assert_eq!(r.buffer_type, Some(u64::from(e.buffer_type)), "{what}");
                assert_eq!(r.buffer_flag, Some(u64::from(e.buffer_flag)), "{what}");
                assert_eq!(
                    r.processor,
                    Some(u64::from(e.processor)),
                    "{what}: processor"
                );
                assert_eq!(r.sequence_number, Some(e.sequence_number), "{what}");
                assert_eq!(r.buffer_size, Some(u64::from(e.buffer_size)), "{what}");
                assert_eq!(r.compressed, e.compressed, "{what}");
                assert_eq!(
                    r.valid_bytes,
                    u64::from(e.valid_bytes),
                    "{what}: valid bytes"
                );
                if !e.compressed {
                    assert_eq!(
                        r.trimmed_bytes,
                        u64::from(e.trimmed_bytes),
                        "{what}: trimmed; {:?}",
                        r.warnings
                    );
                    assert_eq!(
                        r.record_count, e.record_count as usize,
                        "{what}: records; {:?}",
                        r.warnings
                    );
                    let want: BTreeMap<String, u64> = e
                        .records_by_key
                        .iter()
                        .map(|(k, v)| (k.clone(), u64::from(*v)))
                        .collect();
                    assert_eq!(r.records_by_hook, want, "{what}");
                }
            }
        }
        assert_eq!(
            rep.rows.len(),
            expected,
            "{name}: buffers listed beyond the forge's"
        );
        assert!(expected >= 20, "{name}: only {expected} buffers");
        // The cyclic GlobalList is reported, not followed forever.
        assert!(
            rep.warnings.iter().any(|w| w.message.contains("a cycle")),
            "{name}: {:?}",
            rep.warnings
        );
    }
}

#[test]
fn extract_writes_the_extractable_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let name = "x64-19041";
    let f = forge_buffers(name);
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts(name)).unwrap();
    let out = dir.path().join("out");
    let m = etwdump::report::extract::extract(&ctx, "forge", &out, None, false).unwrap();
    let etw = f.etw.as_ref().unwrap();
    for s in etw.sessions() {
        let ms = m
            .sessions
            .iter()
            .find(|x| x.logger_id == u64::from(s.logger_id))
            .unwrap();
        let mut want: Vec<_> = s
            .buffer_details
            .iter()
            .filter(|b| b.extractable())
            .collect();
        // The recovered buffers (the file's order, time order, is tests/etl_viewers.rs's;
        // a kernel session's rundown buffers have no address).
        want.sort_by_key(|b| b.address);
        let mut got: Vec<(u64, String)> = ms.buffer_list[1..]
            .iter()
            .filter(|b| b.source != "rundown")
            .map(|b| {
                let a = b.address.clone().unwrap();
                (u64::from_str_radix(&a[2..], 16).unwrap(), a)
            })
            .collect();
        got.sort();
        let got: Vec<String> = got.into_iter().map(|(_, a)| a).collect();
        assert_eq!(
            got,
            want.iter()
                .map(|b| format!("{:#x}", b.address))
                .collect::<Vec<_>>(),
            "logger {}",
            s.logger_id
        );
        // Re-read the file with the walker: the same records per buffer, nothing torn.
        let bytes = std::fs::read(out.join(&ms.file)).unwrap();
        assert_eq!(bytes.len() as u64, ms.bytes);
        let sha: String = {
            use sha2::Digest;
            sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        assert_eq!(Some(sha), ms.sha256);
        let etl = etwdump::etl::reader::read(&bytes);
        assert!(etl.problem.is_none());
        assert_eq!(etl.buffers.len(), ms.buffer_list.len());
        for (b, mb) in etl.buffers.iter().zip(&ms.buffer_list) {
            assert_eq!(b.records, mb.records);
            assert_eq!(b.trimmed_bytes, 0);
            assert!(b.torn.is_none());
            assert_eq!(b.offset, mb.file_offset);
        }
        // Each recovered buffer keeps the forge's record count (matched by address).
        for w in &want {
            let at = format!("{:#x}", w.address);
            let i = ms
                .buffer_list
                .iter()
                .position(|b| b.address.as_deref() == Some(at.as_str()))
                .unwrap();
            assert_eq!(etl.buffers[i].records, w.record_count as usize, "{at}");
        }
        // Header buffer: BufferType 4, the SYSTEM header record with hook 0.
        assert_eq!(etl.buffers[0].buffer_type, 4);
        assert_eq!(etl.buffers[0].walk.first.unwrap().hook, Some(0));
        // BuffersWritten in TRACE_LOGFILE_HEADER = buffers in the file.
        let tlh = 0x48 + 0x20;
        assert_eq!(
            u32::from_le_bytes(bytes[tlh + 0x24..tlh + 0x28].try_into().unwrap()) as usize,
            etl.buffers.len()
        );
        // Compressed buffers are skipped with the reason.
        for b in s.buffer_details.iter().filter(|b| b.compressed) {
            assert!(ms.skipped.iter().any(
                |x| x.address == format!("{:#x}", b.address) && x.reason.contains("compressed")
            ));
        }
    }
    // A second run refuses to overwrite; no temporary files are left behind.
    let e = etwdump::report::extract::extract(&ctx, "forge", &out, None, false).unwrap_err();
    assert!(
        matches!(e, etwdump::report::extract::ExtractError::Exists(_))
            && e.to_string().ends_with("already exists"),
        "{e}"
    );
    assert!(std::fs::read_dir(&out).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".tmp-")));
    etwdump::report::extract::extract(&ctx, "forge", &out, None, true).unwrap();
    // Without hashing (`--no-hash`): the same files byte for byte, the same manifest but for
    // `sha256`, which is null.
    let bare = dir.path().join("bare");
    let n =
        etwdump::report::extract::extract_with(&ctx, "forge", &bare, None, false, false).unwrap();
    assert_eq!(n.sessions.len(), m.sessions.len());
    for (a, b) in m.sessions.iter().zip(&n.sessions) {
        assert!(a.sha256.is_some() && b.sha256.is_none(), "{}", a.file);
        assert_eq!((&a.file, a.bytes, a.records), (&b.file, b.bytes, b.records));
        assert_eq!(
            std::fs::read(out.join(&a.file)).unwrap(),
            std::fs::read(bare.join(&b.file)).unwrap(),
            "{}",
            a.file
        );
    }
}

/// Random corruption of buffer headers and contents never panics, and whatever `extract`
/// writes is a consistent ETL: each buffer re-walks completely and the manifest matches it.
#[test]
fn corrupted_buffers_still_give_consistent_etl() {
    use etwdump::addr::VirtAddr;
    use etwdump::dump::RunList;
    let name = "x64-19041";
    let f = forge_buffers(name);
    let base = f.to_bytes();
    let d = DumpFile::from_bytes(base.clone(), OpenOptions::default()).unwrap();
    let space = etwdump::mem::AddressSpace::kernel(&d);
    let Some(runs) = d.container::<RunList>() else {
        panic!("full dump")
    };
    // File offsets of the first bytes of every forged buffer.
    let offs: Vec<usize> = f
        .etw
        .as_ref()
        .unwrap()
        .sessions()
        .flat_map(|s| s.buffer_details.iter().map(|b| b.address))
        .map(|va| {
            let t = space.translate(VirtAddr::new(va)).unwrap();
            (runs.file_offset(t.pa.pfn()).unwrap() + t.pa.page_offset()) as usize
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut rng: u64 = 0x0BAD_5EED;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..40 {
        let mut b = base.clone();
        for _ in 0..(1 + next() % 24) {
            let o = offs[(next() % offs.len() as u64) as usize];
            // Mostly the 0x48-byte header, sometimes the first records.
            let pos = o + (next() % if next() % 3 == 0 { 0x400 } else { 0x48 }) as usize;
            b[pos] = next() as u8;
        }
        let d = DumpFile::from_bytes(b, OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts(name)).unwrap();
        let r = analyse(&ctx, None);
        let _ = etwdump::render::rows::to_string(
            &r.rows,
            &r.warnings,
            etwdump::report::RowFormat::Csv,
            "buffers",
        );
        let out = dir.path().join(format!("r{round}"));
        let m = etwdump::report::extract::extract(&ctx, "x", &out, None, true).unwrap();
        for s in &m.sessions {
            let bytes = std::fs::read(out.join(&s.file)).unwrap();
            let etl = etwdump::etl::reader::read(&bytes);
            assert!(etl.problem.is_none(), "round {round}: {:?}", etl.problem);
            assert_eq!(etl.buffers.len(), s.buffer_list.len(), "round {round}");
            for (x, mb) in etl.buffers.iter().zip(&s.buffer_list) {
                assert!(
                    x.torn.is_none() && x.trimmed_bytes == 0,
                    "round {round}: {:?}",
                    x.torn
                );
                assert_eq!(x.records, mb.records, "round {round}");
            }
        }
    }
}

/// The validated search of the KPRCB.EtwSupport blocks (used on builds without a documented
/// route) finds, on the 14393 forge dump, exactly the per-CPU current buffers the documented
/// route finds, at EtwSupport + 0x40 + 8·LoggerId; the decoy-free search finds nothing else.
#[test]
fn etw_support_search_matches_the_documented_route() {
    use etwdump::etw::buffers::{find_buffers, search_per_cpu, BufferList};
    let fx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-14393");
    let mut c = etwdump_forge::Config::from_fixture(&fx);
    c.etw = Some(etwdump_forge::EtwSpec::standard(c.build).with_buffers(c.build));
    let f = etwdump_forge::forge(&c);
    let d = etwdump::dump::DumpFile::from_bytes(f.to_bytes(), Default::default()).unwrap();
    let opts = etwdump::kernel::context::SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..Default::default()
    };
    let ctx = etwdump::kernel::context::KernelContext::open(&d, &opts).unwrap();
    let list = etwdump::etw::loggers::list_sessions(&ctx);
    let array = list.array.as_ref().unwrap();
    let mut compared = 0;
    for s in &list.sessions {
        let mut want: Vec<(u64, u64, u64)> = find_buffers(&ctx, array, s)
            .buffers
            .iter()
            .filter(|b| b.lists.contains(&BufferList::PerCpu))
            .map(|b| (b.cpu.unwrap(), b.address.get(), 0x40 + 8 * s.logger_id))
            .collect();
        let mut got: Vec<(u64, u64, u64)> = search_per_cpu(&ctx, s)
            .into_iter()
            .map(|(cpu, b, off)| (cpu, b.get(), off))
            .collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "logger {}", s.logger_id);
        compared += want.len();
    }
    assert!(compared >= 4, "{compared}");
}

/// `ScratchArray` (semantics undocumented): an array of buffer pointers; entries that validate
/// as the session's buffers are kept (and listed), the rest ignored. The forge leaves it NULL,
/// so this test points the CKCL's ScratchArray at its own CompressionTarget field (a one-entry
/// "array" followed by the context's other fields, which must not validate).
#[test]
fn scratch_array_entries_are_validated() {
    use etwdump::dump::PageLookup;
    use etwdump::etw::buffers::{find_buffers, BufferList};
    let fx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041");
    let mut c = etwdump_forge::Config::from_fixture(&fx);
    c.etw = Some(etwdump_forge::EtwSpec::standard(c.build).with_buffers(c.build));
    let f = etwdump_forge::forge(&c);
    let mut bytes = f.to_bytes();
    let opts = etwdump::kernel::context::SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..Default::default()
    };
    let (patch_at, target_field) = {
        let d = etwdump::dump::DumpFile::from_bytes(bytes.clone(), Default::default()).unwrap();
        let ctx = etwdump::kernel::context::KernelContext::open(&d, &opts).unwrap();
        let l = ctx.symbols.layout("_WMI_LOGGER_CONTEXT").unwrap();
        let list = etwdump::etw::loggers::list_sessions(&ctx);
        let s = list.sessions.iter().find(|s| s.logger_id == 2).unwrap();
        let sa = s.address.offset(l.field("ScratchArray").unwrap().offset);
        let ct = s
            .address
            .offset(l.field("CompressionTarget").unwrap().offset);
        let pa = ctx.space.translate(sa).unwrap().pa;
        let PageLookup::Present(page) = d.page(pa.pfn()) else {
            panic!("context page not stored")
        };
        let off =
            page.as_ptr() as usize - d.whole_file().as_ptr() as usize + pa.page_offset() as usize;
        (off, ct.get())
    };
    assert_eq!(
        &bytes[patch_at..patch_at + 8],
        &[0u8; 8],
        "ScratchArray is NULL as forged"
    );
    bytes[patch_at..patch_at + 8].copy_from_slice(&target_field.to_le_bytes());
    let d = etwdump::dump::DumpFile::from_bytes(bytes, Default::default()).unwrap();
    let ctx = etwdump::kernel::context::KernelContext::open(&d, &opts).unwrap();
    let list = etwdump::etw::loggers::list_sessions(&ctx);
    let s = list.sessions.iter().find(|s| s.logger_id == 2).unwrap();
    let found = find_buffers(&ctx, list.array.as_ref().unwrap(), s);
    let scratch: Vec<_> = found
        .buffers
        .iter()
        .filter(|b| b.lists.contains(&BufferList::ScratchArray))
        .collect();
    assert_eq!(scratch.len(), 1, "{:?}", found.warnings);
    assert!(scratch[0].lists.contains(&BufferList::CompressionTarget));
    let e = f.etw.as_ref().unwrap();
    let want = e
        .sessions()
        .find(|x| x.logger_id == 2)
        .unwrap()
        .buffers
        .len();
    assert_eq!(
        found.buffers.len(),
        want,
        "no extra buffers from the other entries"
    );
}

/// The pre-6.1 list forms, through the built-in 5.0 and 5.1 x86 layouts (there is no pre-6.1
/// fixture kernel, so the structures are written into a stored page of an x86 forge dump, the
/// KUSER_SHARED_DATA page, and the symbols are replaced by the built-in tables of the era):
/// 5.1 GlobalList is an SLIST_HEADER (first pointer) followed through the buffers'
/// SINGLE_LIST_ENTRY GlobalEntry (+0x3C) to NULL; 5.0 GlobalList is a LIST_ENTRY (+0x50) through
/// the buffers' Entry (+0x18); 5.0 ProcessorBuffers (+0x5C) is one pointer per CPU. BufferSize
/// comes from the WNODE_HEADER at +0 in both.
#[test]
fn pre_61_global_lists() {
    use etwdump::dump::PageLookup;
    use etwdump::etw::buffers::{find_buffers, BufferList};
    use etwdump::etw::loggers::Session;
    use etwdump::etw::routes::{LoggerArray, Route};
    let f = etwdump_forge::forge(&etwdump_forge::Config::x86_pae());
    let page = f.kuser_va;
    for build in [2600u32, 2195] {
        let mut bytes = f.to_bytes();
        let at = {
            let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
            let ctx = KernelContext::without_symbols(&d);
            let pa = ctx
                .space
                .translate(etwdump::addr::VirtAddr::new(page))
                .unwrap()
                .pa;
            let PageLookup::Present(p) = d.page(pa.pfn()) else {
                panic!("KUSER page not stored")
            };
            p.as_ptr() as usize - d.whole_file().as_ptr() as usize
        };
        let pg = &mut bytes[at..at + 0x1000];
        pg.fill(0);
        let put = |pg: &mut [u8], o: usize, v: u32| pg[o..o + 4].copy_from_slice(&v.to_le_bytes());
        let bufs = [0x400usize, 0x800, 0xC00];
        for &b in &bufs {
            put(pg, b, 0x400); // WNODE_HEADER.BufferSize
            put(pg, b + 0x08, 0x48); // CurrentOffset
            put(pg, b + 0x04, 0x48); // SavedOffset
            pg[b + 0x2A..b + 0x2C].copy_from_slice(&5u16.to_le_bytes()); // ClientContext.LoggerId
        }
        let va = |o: usize| page as u32 + o as u32;
        if build == 2600 {
            // SLIST_HEADER at +0x80: Next = first buffer's GlobalEntry (+0x3C).
            put(pg, 0x80, va(bufs[0] + 0x3C));
            put(pg, bufs[0] + 0x3C, va(bufs[1] + 0x3C));
            put(pg, bufs[1] + 0x3C, va(bufs[2] + 0x3C));
        } else {
            // LIST_ENTRY at +0x50 through Entry (+0x18), circular.
            let ring = [0x50, bufs[0] + 0x18, bufs[1] + 0x18, bufs[2] + 0x18];
            for i in 0..ring.len() {
                put(pg, ring[i], va(ring[(i + 1) % ring.len()]));
                put(pg, ring[i] + 4, va(ring[(i + ring.len() - 1) % ring.len()]));
            }
            // ProcessorBuffers (+0x5C) -> array at +0x200: CPU 0 = buffer 1, CPU 1 = NULL.
            put(pg, 0x5C, va(0x200));
            put(pg, 0x200, va(bufs[1]));
        }
        let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
        let mut ctx = KernelContext::without_symbols(&d);
        ctx.symbols = etwdump::symbols::Symbols::none(4)
            .with_builtin(build, etwdump::symbols::TableFamily::X86);
        let s = Session {
            logger_mode: Some(0),
            buffer_size: Some(0x400),
            number_of_buffers: Some(3),
            ..Session::bare(5, etwdump::addr::VirtAddr::new(page), "builtin")
        };
        let array = LoggerArray {
            route: Route::GlobalArray,
            address: etwdump::addr::VirtAddr::new(0),
            capacity: 32,
            silo_state: None,
        };
        let found = find_buffers(&ctx, &array, &s);
        let got: Vec<u64> = found.buffers.iter().map(|b| b.address.get()).collect();
        let want: Vec<u64> = bufs.iter().map(|&b| page + b as u64).collect();
        assert_eq!(got, want, "build {build}: {:?}", found.warnings);
        assert!(found
            .buffers
            .iter()
            .all(|b| b.lists.contains(&BufferList::GlobalList) && b.header.buffer_size == 0x400));
        if build == 2195 {
            assert_eq!(found.buffers[1].cpu, Some(0));
            assert!(found.buffers[1].lists.contains(&BufferList::PerCpu));
        } else {
            assert!(found
                .warnings
                .iter()
                .any(|w| w.message.contains("5.1 ProcessorBuffers")));
        }
    }
}
