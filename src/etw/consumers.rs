//! The real-time consumers of a session (issue 17): `WMI_LOGGER_CONTEXT.Consumers`, a
//! LIST_ENTRY through `_ETW_REALTIME_CONSUMER.Links`, each consumer naming its process
//! (`ProcessObject`, an EPROCESS). Layouts from the symbols (the structure is in every public
//! kernel PDB since Windows 7; shared/layouts: Links at 0, ProcessObject at 0x18, LoggerId at
//! 0x58 on x64). The list is bounded and cycle-safe; an entry on the list is a consumer (the
//! list is its identity), a LoggerId that is not the session's, an unreadable process or a
//! count that disagrees with `NumConsumers` is a warning on what is still reported.

use crate::addr::VirtAddr;
use crate::kernel::context::KernelContext;
use crate::kernel::view::View;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Most consumers walked per session (a real session has a handful).
pub(crate) const MAX_CONSUMERS: u64 = 256;

/// One real-time consumer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Consumer {
    /// The `_ETW_REALTIME_CONSUMER`.
    pub address: VirtAddr,
    /// ProcessObject: the consumer's EPROCESS, its UniqueProcessId and ImageFileName.
    pub eprocess: Option<VirtAddr>,
    pub pid: Option<u64>,
    pub process: Option<crate::text::Untrusted>,
    /// ProcessHandle (the consumer's handle value, kernel side).
    pub process_handle: Option<u64>,
    pub logger_id: Option<u64>,
    pub buffers_lost: Option<u64>,
    pub empty_buffers: Option<u64>,
    /// The consumer process's KPROCESS.DirectoryTableBase (its address space, where the
    /// user-mode fields below point).
    pub directory_table_base: Option<u64>,
    /// UserBufferListHead: the user-mode list of the buffers queued for it ([`super::realtime`]).
    pub user_buffer_list_head: Option<VirtAddr>,
    /// UserBufferCount: the pointer, and the ULONG it points at in the consumer's memory.
    pub user_buffer_count_at: Option<VirtAddr>,
    pub user_buffer_count: Option<u64>,
    /// ReservedBufferSpace and ReservedBufferSpaceSize (user mode).
    pub reserved_buffer_space: Option<VirtAddr>,
    pub reserved_buffer_space_size: Option<u64>,
    /// Fields that could not be read or disagree, with the address (JSON: the messages).
    #[serde(serialize_with = "crate::warning::serialize_messages")]
    pub warnings: Vec<Warning>,
}

impl Consumer {
    /// Does the consumer point at a queue in its process's memory (a user buffer list or a
    /// reserved buffer space)?
    pub(crate) fn has_queue(&self) -> bool {
        [self.user_buffer_list_head, self.reserved_buffer_space]
            .iter()
            .any(|p| p.is_some_and(|p| !p.is_null()))
    }
}

/// The list head's field, named in its warnings.
const CONSUMERS: &str = "_WMI_LOGGER_CONTEXT.Consumers";

/// The consumers on the list of the context at `context` (logger `logger_id`), and the
/// session-level warnings (list walk stopped, NumConsumers disagreeing). Empty, without a
/// warning, where the symbols have no `Consumers` or no `_ETW_REALTIME_CONSUMER`.
pub fn read(
    ctx: &KernelContext<'_>,
    context: VirtAddr,
    logger_id: u64,
) -> (Vec<Consumer>, Vec<Warning>) {
    let sym = &ctx.symbols;
    let space = &ctx.space;
    let (Some(wlc), Some(rc)) = (
        sym.layout("_WMI_LOGGER_CONTEXT"),
        sym.layout("_ETW_REALTIME_CONSUMER"),
    ) else {
        return (Vec::new(), Vec::new());
    };
    let v = View::new(space, wlc, context);
    let Ok(head) = v.field_va("Consumers") else {
        return (Vec::new(), Vec::new());
    };
    let links = rc.field("Links").map_or(0, |f| f.offset);
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    let mut walk = match space.list_entries(head, MAX_CONSUMERS) {
        Ok(w) => w,
        Err(e) => {
            warnings.push(
                Warning::new(
                    WarningKind::Unreadable,
                    format!("_WMI_LOGGER_CONTEXT.Consumers at {head}: {e}"),
                )
                .at(head)
                .field(CONSUMERS),
            );
            return (out, warnings);
        }
    };
    for entry in walk.by_ref() {
        let at = entry.containing(links);
        out.push(read_one(ctx, rc, at, logger_id));
    }
    if let Some(why) = walk.stopped() {
        warnings.push(
            Warning::new(
                why.kind(),
                format!("_WMI_LOGGER_CONTEXT.Consumers at {head}: {why}"),
            )
            .at(head)
            .field(CONSUMERS),
        );
    }
    if let Ok(n) = v.uint("NumConsumers") {
        if walk.stopped().is_none() && n != out.len() as u64 {
            warnings.push(
                Warning::new(
                    WarningKind::Conflict,
                    format!(
                        "_WMI_LOGGER_CONTEXT.NumConsumers is {n} but the Consumers list holds {}",
                        out.len()
                    ),
                )
                .at(context)
                .field("_WMI_LOGGER_CONTEXT.NumConsumers"),
            );
        }
    }
    (out, warnings)
}

fn read_one(
    ctx: &KernelContext<'_>,
    rc: &crate::symbols::StructLayout,
    at: VirtAddr,
    logger_id: u64,
) -> Consumer {
    let v = View::new(&ctx.space, rc, at);
    let mut warnings = Vec::new();
    let mut opt = |name: &str| match v.uint(name) {
        Ok(x) => Some(x),
        Err(e) => {
            warnings.push(e.warning());
            None
        }
    };
    let id = opt("LoggerId");
    let buffers_lost = opt("BuffersLost");
    let empty_buffers = opt("EmptyBuffersCount");
    let process_handle = opt("ProcessHandle");
    if let Some(i) = id.filter(|&i| i != logger_id) {
        warnings.push(
            Warning::new(
                WarningKind::Anomaly,
                format!(
                    "_ETW_REALTIME_CONSUMER.LoggerId at {at} is {i}, not the session's {logger_id}"
                ),
            )
            .at(at)
            .field("_ETW_REALTIME_CONSUMER.LoggerId"),
        );
    }
    let pr = crate::kernel::processes::process_field(
        ctx,
        &v,
        "ProcessObject",
        &format!("_ETW_REALTIME_CONSUMER at {at}"),
    );
    warnings.extend(pr.problem.map(|(kind, m)| {
        Warning::new(kind, m)
            .at(at)
            .field("_ETW_REALTIME_CONSUMER.ProcessObject")
    }));
    let (eprocess, pid, process) = (pr.eprocess, pr.pid, pr.image);
    // The user-mode side (absent from layouts without the fields: None, no warning).
    let user_ptr = |name: &str| v.ptr(name).ok();
    let user_buffer_list_head = user_ptr("UserBufferListHead");
    let user_buffer_count_at = user_ptr("UserBufferCount");
    let reserved_buffer_space = user_ptr("ReservedBufferSpace");
    let reserved_buffer_space_size = v.uint("ReservedBufferSpaceSize").ok();
    let uses_user_memory = [
        user_buffer_list_head,
        user_buffer_count_at,
        reserved_buffer_space,
    ]
    .iter()
    .any(|p| p.is_some_and(|p| !p.is_null()));
    let directory_table_base = match eprocess {
        Some(ep) if uses_user_memory => {
            match crate::kernel::processes::directory_table_base(ctx, ep) {
                Ok(d) => Some(d),
                Err(e) => {
                    warnings.push(Warning::new(WarningKind::Unreadable, format!(
                        "_ETW_REALTIME_CONSUMER at {at}: its process {ep}: DirectoryTableBase: {e} (its queued buffers cannot be read)"
                    )).at(ep));
                    None
                }
            }
        }
        _ => None,
    };
    let mut user_buffer_count = None;
    if let (Some(dtb), Some(p)) = (directory_table_base, user_buffer_count_at) {
        let space = ctx.space.with_root(dtb);
        if space.is_user(p) {
            match space.read_u32(p) {
                Ok(n) => user_buffer_count = Some(u64::from(n)),
                Err(e) => warnings.push(Warning::new(WarningKind::Unreadable, format!(
                    "_ETW_REALTIME_CONSUMER.UserBufferCount at {at} points at {p} in PID {}'s memory: {e}",
                    pid.map_or_else(|| "?".into(), |x| x.to_string())
                )).at(p).field("_ETW_REALTIME_CONSUMER.UserBufferCount")),
            }
        }
    }
    Consumer {
        address: at,
        eprocess,
        pid,
        process,
        process_handle,
        logger_id: id,
        buffers_lost,
        empty_buffers,
        directory_table_base,
        user_buffer_list_head,
        user_buffer_count_at,
        user_buffer_count,
        reserved_buffer_space,
        reserved_buffer_space_size,
        warnings,
    }
}
