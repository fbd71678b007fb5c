//! A process list in fixture dumps ([`crate::Config::with_processes`], x64 fixtures whose
//! types.h declares `_EPROCESS`, `_ETHREAD`, `_KPROCESS`, `_KTHREAD` and `_CLIENT_ID`):
//! `_EPROCESS` objects in pool linked through `ActiveProcessLinks` into PsActiveProcessHead,
//! each with its `_ETHREAD`s linked through `ETHREAD.ThreadListEntry` into
//! `EPROCESS.ThreadListHead` (and, where the layout has them, `KTHREAD.ThreadListEntry` into
//! `KPROCESS.ThreadListHead`, `KTHREAD.Process` = the process). Every offset and size from the
//! fixture's types.h; nothing from etwdump.

use crate::config::{Arch, Config};
use crate::kernel::objects::pool_header;
use crate::kernel::pe::KernelImage;
use crate::kernel::types_h::TypesH;
use crate::util::{align_up, put_u64, PAGE_SIZE};

/// A process a correct reader finds by walking PsActiveProcessHead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedProcess {
    /// VA of the `_EPROCESS` (not of its ActiveProcessLinks).
    pub eprocess_va: u64,
    /// `UniqueProcessId`.
    pub pid: u64,
    /// `ImageFileName` up to its first NUL (15 bytes at most).
    pub name: String,
    /// (`_ETHREAD` VA, `Cid.UniqueThread`) in ThreadListHead Flink order.
    pub threads: Vec<(u64, u64)>,
}

/// (PID, ImageFileName, TIDs) of the forged processes, in ActiveProcessLinks Flink order.
/// The TIDs include every old-thread TID of the pending 'CCsw' batches
/// ([`crate::EtwSpec::with_pending_ccswap`]: 0x44, 0x48, 0x100, 0x200, 0x204, 0x310, 0x314,
/// 0x500, 0x504, 0x508).
pub const STANDARD_PROCESSES: &[(u64, &str, &[u64])] = &[
    (4, "System", &[0x0C, 0x44, 0x48, 0x100]),
    (0x184, "smss.exe", &[0x188, 0x200, 0x204]),
    (0x44C, "svchost.exe", &[0x310, 0x314, 0x450, 0x500]),
    (0x12E4, "explorer.exe", &[0x504, 0x508, 0x12E8]),
];

/// Pool area of the process objects (x64), away from the module-list, ETW and probe areas.
const PROC_POOL_VA: u64 = 0xFFFF_A08D_5300_0000;
const POOL_HEADER: usize = 0x10;
/// `_KOBJECTS` values in `_DISPATCHER_HEADER.Type`.
const PROCESS_OBJECT: u8 = 3;
const THREAD_OBJECT: u8 = 6;

pub(crate) struct ProcBuild {
    /// Pool pages to map (VA, content).
    pub pages: Vec<(u64, Vec<u8>)>,
    pub expected: Vec<ExpectedProcess>,
}

/// Bytes to write at KPRCB addresses: (VA, bytes).
pub(crate) type KprcbWrites = Vec<(u64, Vec<u8>)>;

/// KPRCB.CurrentThread of every CPU (fixtures with mapped KPRCBs and `processes`): CPU `c`
/// runs the `(3c + 1) mod n`-th thread of the process list (threads in list order). Returns
/// the KPRCB writes and, per CPU, (`_ETHREAD` VA, TID).
pub(crate) fn current_threads(
    cfg: &Config,
    prcbs: &[u64],
    procs: &[ExpectedProcess],
) -> (KprcbWrites, Vec<(u64, u64)>) {
    let fx = cfg.fixture.as_ref().expect("fixture");
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    let off = field(&t, "_KPRCB", "CurrentThread", 8) as u64;
    let threads: Vec<(u64, u64)> = procs.iter().flat_map(|p| p.threads.clone()).collect();
    let mut writes = Vec::new();
    let mut chosen = Vec::new();
    for (c, &prcb) in prcbs.iter().enumerate() {
        let th = threads[(3 * c + 1) % threads.len()];
        writes.push((prcb + off, th.0.to_le_bytes().to_vec()));
        chosen.push(th);
    }
    (writes, chosen)
}

/// Offset of `agg.field` from types.h, with its declared size checked.
fn field(t: &TypesH, agg: &str, field: &str, size: u64) -> usize {
    let off = t
        .offset_of(agg, field)
        .unwrap_or_else(|| panic!("types.h has no {agg}.{field}"));
    let got = t.field_size(agg, field);
    assert_eq!(got, Some(size), "types.h: size of {agg}.{field}");
    off as usize
}

/// Place the processes: writes PsActiveProcessHead into `img`, returns the pool pages.
pub(crate) fn build(cfg: &Config, img: &mut KernelImage) -> ProcBuild {
    let fx = cfg
        .fixture
        .as_ref()
        .expect("Config::processes needs a fixture kernel (Config::from_fixture)");
    assert_eq!(
        cfg.arch,
        Arch::X64,
        "Config::processes: x64 fixtures only ({})",
        fx.name
    );
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    assert_eq!(
        t.pointer_size, 8,
        "fixture {}: types.h pointer size",
        fx.name
    );
    let size = |s: &str| {
        t.size_of(s)
            .unwrap_or_else(|| panic!("fixture {}: types.h has no sizeof {s}", fx.name))
            as usize
    };
    let (ep_size, et_size) = (size("_EPROCESS"), size("_ETHREAD"));
    assert_eq!(size("_CLIENT_ID"), 0x10);
    assert_eq!(size("_LIST_ENTRY"), 0x10);
    let links = field(&t, "_EPROCESS", "ActiveProcessLinks", 0x10);
    let pid_off = field(&t, "_EPROCESS", "UniqueProcessId", 8);
    let name_off = field(&t, "_EPROCESS", "ImageFileName", 15);
    let thead = field(&t, "_EPROCESS", "ThreadListHead", 0x10);
    let tentry = field(&t, "_ETHREAD", "ThreadListEntry", 0x10);
    let cid = field(&t, "_ETHREAD", "Cid", 0x10);
    let cid_p = field(&t, "_CLIENT_ID", "UniqueProcess", 8);
    let cid_t = field(&t, "_CLIENT_ID", "UniqueThread", 8);
    // The kernel-side lists (Pcb / Tcb), where the layout has them.
    let pcb = t.offset_of("_EPROCESS", "Pcb").map(|o| o as usize);
    let tcb = t.offset_of("_ETHREAD", "Tcb").map(|o| o as usize);
    let k_head = t.offset_of("_KPROCESS", "ThreadListHead");
    let k_entry = t.offset_of("_KTHREAD", "ThreadListEntry");
    let k_proc = t.offset_of("_KTHREAD", "Process");
    for (what, o) in [("_EPROCESS.Pcb", pcb), ("_ETHREAD.Tcb", tcb)] {
        assert_eq!(o, Some(0), "fixture {}: {what}", fx.name);
    }

    // Bump allocator: 16-byte POOL_HEADER, object inside one page (as the small pool does).
    let mut buf: Vec<u8> = Vec::new();
    let mut alloc = |size: usize, tag: &[u8; 4]| -> usize {
        assert!(size + POOL_HEADER <= PAGE_SIZE as usize);
        let mut start = align_up(buf.len() as u64, 16) as usize;
        if start / PAGE_SIZE as usize != (start + POOL_HEADER + size - 1) / PAGE_SIZE as usize {
            start = align_up(start as u64, PAGE_SIZE) as usize;
        }
        buf.resize(start + POOL_HEADER + size, 0);
        pool_header(Arch::X64, &mut buf, start, size, tag);
        start + POOL_HEADER
    };
    // Offsets first, then contents.
    let objs: Vec<(usize, Vec<usize>)> = STANDARD_PROCESSES
        .iter()
        .map(|(_, _, tids)| {
            let ep = alloc(ep_size, b"Proc");
            let ths = tids.iter().map(|_| alloc(et_size, b"Thre")).collect();
            (ep, ths)
        })
        .collect();
    let va = |off: usize| PROC_POOL_VA + off as u64;
    let pah = img.va(img.sym.ps_active_process_head);

    // A circular LIST_ENTRY list through `head` and `entries` (VAs); entries in the pool
    // buffer are written, a head outside it (PsActiveProcessHead) is returned for the caller.
    let in_pool = |v: u64| (PROC_POOL_VA..PROC_POOL_VA + 0x100_0000).contains(&v);
    let ring = |buf: &mut Vec<u8>, head: u64, entries: &[u64]| -> Vec<(u64, u64, u64)> {
        let mut all = vec![head];
        all.extend_from_slice(entries);
        (0..all.len())
            .map(|i| {
                let flink = all[(i + 1) % all.len()];
                let blink = all[(i + all.len() - 1) % all.len()];
                if in_pool(all[i]) {
                    let o = (all[i] - PROC_POOL_VA) as usize;
                    put_u64(buf, o, flink);
                    put_u64(buf, o + 8, blink);
                }
                (all[i], flink, blink)
            })
            .collect()
    };

    // ActiveProcessLinks ring through PsActiveProcessHead.
    let entries: Vec<u64> = objs.iter().map(|(ep, _)| va(*ep + links)).collect();
    let head_links = ring(&mut buf, pah, &entries);
    let mut h = [0u8; 16];
    put_u64(&mut h, 0, head_links[0].1);
    put_u64(&mut h, 8, head_links[0].2);
    img.write(img.sym.ps_active_process_head, &h);

    let mut expected = Vec::new();
    for (&(pid, name, tids), (ep, ths)) in STANDARD_PROCESSES.iter().zip(&objs) {
        let ep = *ep;
        assert!(name.len() <= 15 && tids.iter().all(|t| t % 4 == 0) && pid % 4 == 0);
        buf[ep] = PROCESS_OBJECT;
        put_u64(&mut buf, ep + pid_off, pid);
        buf[ep + name_off..ep + name_off + name.len()].copy_from_slice(name.as_bytes());
        let t_entries: Vec<u64> = ths.iter().map(|&th| va(th + tentry)).collect();
        ring(&mut buf, va(ep + thead), &t_entries);
        if let (Some(kh), Some(ke)) = (k_head, k_entry) {
            let k_entries: Vec<u64> = ths.iter().map(|&th| va(th) + ke).collect();
            ring(&mut buf, va(ep) + kh, &k_entries);
        }
        let mut threads = Vec::new();
        for (&th, &tid) in ths.iter().zip(tids.iter()) {
            buf[th] = THREAD_OBJECT;
            put_u64(&mut buf, th + cid + cid_p, pid);
            put_u64(&mut buf, th + cid + cid_t, tid);
            if let Some(kp) = k_proc {
                put_u64(&mut buf, th + kp as usize, va(ep));
            }
            threads.push((va(th), tid));
        }
        expected.push(ExpectedProcess {
            eprocess_va: va(ep),
            pid,
            name: name.to_string(),
            threads,
        });
    }

    buf.resize(align_up(buf.len() as u64, PAGE_SIZE) as usize, 0);
    let pages = buf
        .chunks(PAGE_SIZE as usize)
        .enumerate()
        .map(|(i, c)| (PROC_POOL_VA + i as u64 * PAGE_SIZE, c.to_vec()))
        .collect();
    ProcBuild { pages, expected }
}
