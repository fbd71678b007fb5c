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
    /// EPROCESS.InheritedFromUniqueProcessId (where the fixture's types.h has the field, else 0).
    pub parent_pid: u64,
    /// KPROCESS.DirectoryTableBase (likewise).
    pub directory_table_base: u64,
}

/// What the forge writes into a thread's KTHREAD/ETHREAD besides its ids (where types.h has
/// the fields): KTHREAD.StackBase, StackLimit, Teb, BasePriority and ETHREAD.Win32StartAddress,
/// each a function of the process and thread ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadFacts {
    pub stack_base: u64,
    pub stack_limit: u64,
    pub teb: u64,
    pub win32_start: u64,
    pub base_priority: u8,
}

/// The [`ThreadFacts`] of thread `tid` of process `pid`.
pub fn thread_facts(pid: u64, tid: u64) -> ThreadFacts {
    let stack_base = 0xFFFF_E300_0000_0000 + tid * 0x2000 + 0x6000;
    ThreadFacts {
        stack_base,
        stack_limit: stack_base - 0x6000,
        teb: if pid == 4 {
            0
        } else {
            0x0000_00A0_0000_0000 + tid * 0x1000
        },
        win32_start: 0xFFFF_F804_7BB0_0000 + tid * 0x40,
        base_priority: 8 + (tid / 4 % 8) as u8,
    }
}

/// EPROCESS.InheritedFromUniqueProcessId of the standard process `pid`.
fn parent_of(pid: u64) -> u64 {
    match pid {
        4 => 0,
        0x184 => 4,
        0x44C => 0x184,
        _ => 0x44C,
    }
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

/// EPROCESS.Peb of process `pid` at `ep` in `buf` (Config::user_images only; left 0
/// otherwise, and for System).
fn write_peb(cfg: &Config, t: &TypesH, buf: &mut [u8], ep: usize, pid: u64) {
    if cfg.user_images && crate::kernel::user_images::has_user_memory(pid) {
        let o = field(t, "_EPROCESS", "Peb", 8);
        put_u64(buf, ep + o, crate::kernel::user_images::peb_va(pid));
    }
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

    // Optional fields (present in every x64 types.h the processes are built for).
    let opt = |agg: &str, f: &str| t.offset_of(agg, f).map(|o| o as usize);
    let parent_off = opt("_EPROCESS", "InheritedFromUniqueProcessId");
    let dtb_off = opt("_KPROCESS", "DirectoryTableBase");
    let stack_base_off = opt("_KTHREAD", "StackBase");
    let stack_limit_off = opt("_KTHREAD", "StackLimit");
    let teb_off = opt("_KTHREAD", "Teb");
    let prio_off = opt("_KTHREAD", "BasePriority");
    let start_off = opt("_ETHREAD", "Win32StartAddress");
    let mut expected = Vec::new();
    for (i, (&(pid, name, tids), (ep, ths))) in STANDARD_PROCESSES.iter().zip(&objs).enumerate() {
        let ep = *ep;
        assert!(name.len() <= 15 && tids.iter().all(|t| t % 4 == 0) && pid % 4 == 0);
        buf[ep] = PROCESS_OBJECT;
        put_u64(&mut buf, ep + pid_off, pid);
        buf[ep + name_off..ep + name_off + name.len()].copy_from_slice(name.as_bytes());
        let parent_pid = parent_off.map_or(0, |o| {
            put_u64(&mut buf, ep + o, parent_of(pid));
            parent_of(pid)
        });
        let directory_table_base = dtb_off.map_or(0, |o| {
            let dtb = 0x0800_0000 + i as u64 * 0x10_0000;
            put_u64(&mut buf, ep + o, dtb);
            dtb
        });
        write_peb(cfg, &t, &mut buf, ep, pid);
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
            let f = thread_facts(pid, tid);
            for (o, v) in [
                (stack_base_off, f.stack_base),
                (stack_limit_off, f.stack_limit),
                (teb_off, f.teb),
                (start_off, f.win32_start),
            ] {
                if let Some(o) = o {
                    put_u64(&mut buf, th + o, v);
                }
            }
            if let Some(o) = prio_off {
                buf[th + o] = f.base_priority;
            }
            threads.push((va(th), tid));
        }
        expected.push(ExpectedProcess {
            eprocess_va: va(ep),
            pid,
            name: name.to_string(),
            threads,
            parent_pid,
            directory_table_base,
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
