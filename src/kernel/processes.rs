//! The process list: PsActiveProcessHead → EPROCESS.ActiveProcessLinks, and each process's
//! threads through EPROCESS.ThreadListHead → ETHREAD.ThreadListEntry, read through the symbol
//! layouts. Walks are bounded and cycle-safe.

use super::context::KernelContext;
use super::view::View;
use crate::addr::VirtAddr;
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use std::collections::HashMap;

const MAX_PROCESSES: usize = 1 << 16;
const MAX_THREADS: usize = 1 << 16;

/// One process and its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub eprocess: VirtAddr,
    pub pid: u64,
    /// EPROCESS.ImageFileName (at most 15 characters).
    pub name: Untrusted,
    /// (ETHREAD address, thread id).
    pub threads: Vec<(VirtAddr, u64)>,
}

/// The processes on the active-process list, and the problems met walking it.
#[derive(Clone, Debug, Default)]
pub struct ProcessList {
    pub processes: Vec<Process>,
    pub warnings: Vec<Warning>,
}

impl ProcessList {
    /// Thread id → (process id, image name).
    pub fn by_tid(&self) -> HashMap<u64, (u64, &Untrusted)> {
        let mut m = HashMap::new();
        for p in &self.processes {
            for &(_, tid) in &p.threads {
                m.insert(tid, (p.pid, &p.name));
            }
        }
        m
    }
}

/// Walk the process list.
pub fn walk(ctx: &KernelContext<'_>) -> ProcessList {
    let mut out = ProcessList::default();
    let sym = &ctx.symbols;
    let (Some(ep), Some(et)) = (sym.layout("_EPROCESS"), sym.layout("_ETHREAD")) else {
        out.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                "no _EPROCESS/_ETHREAD layout (give the kernel's PDB or ISF): no process names",
            )
            .field("_EPROCESS"),
        );
        return out;
    };
    let off = |l: &crate::symbols::StructLayout, f: &str| l.field(f).map(|x| x.offset);
    let (Some(links), Some(_), Some(_), Some(tlh)) = (
        off(ep, "ActiveProcessLinks"),
        off(ep, "UniqueProcessId"),
        off(ep, "ImageFileName"),
        off(ep, "ThreadListHead"),
    ) else {
        out.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                "_EPROCESS lacks a field the walk needs",
            )
            .field("_EPROCESS"),
        );
        return out;
    };
    let (Some(tle), Some(_)) = (off(et, "ThreadListEntry"), off(et, "Cid")) else {
        out.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                "_ETHREAD lacks ThreadListEntry or Cid",
            )
            .field("_ETHREAD"),
        );
        return out;
    };
    // CLIENT_ID {UniqueProcess; UniqueThread}: the second pointer when the symbols lack it.
    let unique_thread = sym
        .layout("_CLIENT_ID")
        .and_then(|l| off(l, "UniqueThread"))
        .unwrap_or(ctx.space.arch().pointer_size());
    let space = &ctx.space;
    let head = ctx.process_head().unwrap_or(VirtAddr::new(0));
    let mut procs = match space.list_entries(head, MAX_PROCESSES as u64) {
        Ok(w) => w,
        Err(e) => {
            out.warnings.push(
                Warning::new(
                    WarningKind::Unreadable,
                    format!("PsActiveProcessHead {head}: {e}"),
                )
                .at(head)
                .field("PsActiveProcessHead"),
            );
            return out;
        }
    };
    for cur in procs.by_ref() {
        let e = cur.containing(links);
        let v = View::new(space, ep, e);
        let pid = match v.ptr("UniqueProcessId") {
            Ok(p) => p.get(),
            Err(err) => {
                out.warnings
                    .push(Warning::new(WarningKind::Unreadable, err.to_string()).at(e));
                break;
            }
        };
        let name = match image_file_name(&v) {
            Ok(n) => n,
            Err(err) => {
                out.warnings.push(
                    Warning::new(WarningKind::Unreadable, format!("process {pid}: {err}"))
                        .at(e)
                        .field("_EPROCESS.ImageFileName"),
                );
                Untrusted::default()
            }
        };
        let mut threads = Vec::new();
        let thead = e.offset(tlh);
        // A thread-list head outside the dump: the process is listed without threads.
        if let Ok(mut walk) = space.list_entries(thead, MAX_THREADS as u64) {
            for t in walk.by_ref() {
                let ethread = t.containing(tle);
                let tid = View::new(space, et, ethread)
                    .field_va("Cid")
                    .map_err(|e| e.to_string())
                    .and_then(|cid| {
                        space
                            .read_ptr(cid.offset(unique_thread))
                            .map_err(|e| e.to_string())
                    });
                match tid {
                    Ok(tid) => threads.push((ethread, tid.get())),
                    Err(err) => {
                        out.warnings.push(
                            Warning::new(
                                WarningKind::Unreadable,
                                format!("process {pid}: thread {ethread}: Cid: {err}"),
                            )
                            .at(ethread)
                            .field("_ETHREAD.Cid"),
                        );
                        break;
                    }
                }
            }
            if let Some(why) = walk.stopped() {
                out.warnings.push(
                    Warning::new(why.kind(), format!("process {pid}: thread list: {why}"))
                        .at(e)
                        .field("_EPROCESS.ThreadListHead"),
                );
            }
        }
        out.processes.push(Process {
            eprocess: e,
            pid,
            name,
            threads,
        });
    }
    if let Some(why) = procs.stopped() {
        out.warnings.push(
            Warning::new(why.kind(), format!("process list: {why}")).field("ActiveProcessLinks"),
        );
    }
    out
}

/// EPROCESS.ImageFileName (15 bytes) up to its first NUL, of the EPROCESS `v` views.
fn image_file_name(v: &View<'_, '_>) -> Result<Untrusted, super::view::ViewError> {
    Ok(Untrusted::from_utf8_z(&v.bytes("ImageFileName", 15)?))
}

/// The process id and image name of the EPROCESS at `eprocess` (a pointer met elsewhere, e.g.
/// a real-time consumer's ProcessObject), or what could not be read.
pub(crate) fn identify(
    ctx: &KernelContext<'_>,
    eprocess: VirtAddr,
) -> Result<(u64, Untrusted), String> {
    let ep = ctx
        .symbols
        .layout("_EPROCESS")
        .ok_or("no _EPROCESS layout")?;
    let v = View::new(&ctx.space, ep, eprocess);
    let pid = v.uint("UniqueProcessId").map_err(|e| e.to_string())?;
    let name = image_file_name(&v).map_err(|e| e.to_string())?;
    Ok((pid, name))
}

/// The process a pointer field of a kernel object names (`_ETW_REALTIME_CONSUMER.ProcessObject`,
/// `_ETW_REG_ENTRY.Process`): its EPROCESS, PID and image, and what was wrong (the pointer
/// NULL or unreadable, the EPROCESS unreadable) with the warning's kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcessRef {
    pub eprocess: Option<VirtAddr>,
    pub pid: Option<u64>,
    pub image: Option<Untrusted>,
    pub problem: Option<(crate::warning::WarningKind, String)>,
}

/// Follow the pointer field `field` of `v` (`owner` names the object in messages).
pub(crate) fn process_field(
    ctx: &KernelContext<'_>,
    v: &View<'_, '_>,
    field: &str,
    owner: &str,
) -> ProcessRef {
    use crate::warning::WarningKind;
    let mut r = ProcessRef::default();
    match v.ptr(field) {
        Ok(p) if p.is_null() => {
            r.problem = Some((WarningKind::Anomaly, format!("{owner}: {field} is NULL")));
        }
        Ok(p) => {
            r.eprocess = Some(p);
            match identify(ctx, p) {
                Ok((id, name)) => {
                    r.pid = Some(id);
                    r.image = Some(name);
                }
                Err(e) => {
                    r.problem = Some((
                        WarningKind::Unreadable,
                        format!("{owner}: its process {p}: {e}"),
                    ))
                }
            }
        }
        Err(e) => r.problem = Some((WarningKind::Unreadable, format!("{owner}: {e}"))),
    }
    r
}

/// The KPRCB of `cpu`: KiProcessorBlock\[cpu\] (the global, else the KDBG's copy of its
/// address), a non-NULL kernel pointer.
pub fn prcb(ctx: &KernelContext<'_>, cpu: u64) -> Result<VirtAddr, String> {
    let space = &ctx.space;
    let kpb = ctx
        .global("KiProcessorBlock")
        .or_else(|| ctx.kdbg().and_then(|k| k.ki_processor_block()))
        .ok_or("KiProcessorBlock is unknown (no symbols and no KDBG)")?;
    let slot = kpb.offset(cpu * space.arch().pointer_size());
    let prcb = space
        .read_ptr(slot)
        .map_err(|e| format!("KiProcessorBlock[{cpu}] at {slot}: {e}"))?;
    if !prcb.is_kernel(space.arch().width()) {
        return Err(format!(
            "KiProcessorBlock[{cpu}] at {slot} is {prcb}, not a kernel address"
        ));
    }
    Ok(prcb)
}

/// The thread running on `cpu` at dump time: KiProcessorBlock\[cpu\] → KPRCB.CurrentThread →
/// ETHREAD.Cid.UniqueThread. Returns (ETHREAD address, thread id), or what could not be read.
pub fn current_thread(ctx: &KernelContext<'_>, cpu: u64) -> Result<(VirtAddr, u64), String> {
    let sym = &ctx.symbols;
    let space = &ctx.space;
    let prcb_l = sym.layout("_KPRCB").ok_or("no _KPRCB layout")?;
    let prcb = prcb(ctx, cpu)?;
    let thread = View::new(space, prcb_l, prcb)
        .ptr("CurrentThread")
        .map_err(|e| format!("CPU {cpu}: {e}"))?;
    if thread.is_null() {
        return Err(format!("CPU {cpu}: KPRCB.CurrentThread is NULL"));
    }
    let (_, tid) =
        thread_cid(ctx, thread).map_err(|e| format!("CPU {cpu}: current thread: {e}"))?;
    Ok((thread, tid))
}

/// ETHREAD.Cid of `thread`: (UniqueProcess, UniqueThread), or what could not be read.
pub(crate) fn thread_cid(ctx: &KernelContext<'_>, thread: VirtAddr) -> Result<(u64, u64), String> {
    let sym = &ctx.symbols;
    let space = &ctx.space;
    let et = sym.layout("_ETHREAD").ok_or("no _ETHREAD layout")?;
    let p = space.arch().pointer_size();
    let field = |n: &str, default: u64| {
        sym.layout("_CLIENT_ID")
            .and_then(|l| l.field(n))
            .map_or(default, |f| f.offset)
    };
    let cid = View::new(space, et, thread)
        .field_va("Cid")
        .map_err(|e| e.to_string())?;
    let pid = space
        .read_ptr(cid.offset(field("UniqueProcess", 0)))
        .map_err(|e| format!("{thread}: Cid.UniqueProcess: {e}"))?;
    let tid = space
        .read_ptr(cid.offset(field("UniqueThread", p)))
        .map_err(|e| format!("{thread}: Cid.UniqueThread: {e}"))?;
    Ok((pid.get(), tid.get()))
}

/// What a process rundown says of a process beyond its id and name; `None` where the field
/// is not in the symbols or its memory not in the dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessDetails {
    /// EPROCESS.InheritedFromUniqueProcessId.
    pub parent_pid: Option<u64>,
    /// KPROCESS.DirectoryTableBase (EPROCESS.Pcb).
    pub directory_table_base: Option<u64>,
    /// EPROCESS.ExitStatus.
    pub exit_status: Option<u32>,
}

/// What a thread rundown says of a thread beyond its ids; `None` as for [`ProcessDetails`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ThreadDetails {
    /// KTHREAD.StackBase / StackLimit (the kernel stack).
    pub stack_base: Option<u64>,
    pub stack_limit: Option<u64>,
    /// KTHREAD.Teb.
    pub teb: Option<u64>,
    /// ETHREAD.Win32StartAddress.
    pub win32_start: Option<u64>,
    /// KTHREAD.BasePriority.
    pub base_priority: Option<u8>,
}

/// KPROCESS.DirectoryTableBase of the EPROCESS at `eprocess` (the root of its address space).
pub fn directory_table_base(ctx: &KernelContext<'_>, eprocess: VirtAddr) -> Result<u64, String> {
    let sym = &ctx.symbols;
    let ep = sym.layout("_EPROCESS").ok_or("no _EPROCESS layout")?;
    let kp = sym.layout("_KPROCESS").ok_or("no _KPROCESS layout")?;
    // EPROCESS.Pcb (offset 0 in every build) is the KPROCESS.
    let pcb = ep.field("Pcb").map_or(0, |f| f.offset);
    View::new(&ctx.space, kp, eprocess.offset(pcb))
        .uint("DirectoryTableBase")
        .map_err(|e| e.to_string())
}

/// [`ProcessDetails`] of the EPROCESS at `p.eprocess`.
pub fn details(ctx: &KernelContext<'_>, p: &Process) -> ProcessDetails {
    let sym = &ctx.symbols;
    let mut d = ProcessDetails::default();
    if let Some(ep) = sym.layout("_EPROCESS") {
        let v = View::new(&ctx.space, ep, p.eprocess);
        d.parent_pid = v.uint("InheritedFromUniqueProcessId").ok();
        d.exit_status = v.uint("ExitStatus").ok().map(|x| x as u32);
        d.directory_table_base = directory_table_base(ctx, p.eprocess).ok();
    }
    d
}

/// [`ThreadDetails`] of the ETHREAD at `ethread`.
pub(crate) fn thread_details(ctx: &KernelContext<'_>, ethread: VirtAddr) -> ThreadDetails {
    let sym = &ctx.symbols;
    let mut d = ThreadDetails::default();
    if let Some(et) = sym.layout("_ETHREAD") {
        d.win32_start = View::new(&ctx.space, et, ethread)
            .uint("Win32StartAddress")
            .ok();
        let tcb = et.field("Tcb").map_or(0, |f| f.offset);
        if let Some(kt) = sym.layout("_KTHREAD") {
            let v = View::new(&ctx.space, kt, ethread.offset(tcb));
            d.stack_base = v.uint("StackBase").ok();
            d.stack_limit = v.uint("StackLimit").ok();
            d.teb = v.uint("Teb").ok();
            d.base_priority = v.uint("BasePriority").ok().map(|x| x as u8);
        }
    }
    d
}
