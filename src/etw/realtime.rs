//! The buffers queued for a session's real-time consumers (issue 17), in each consumer's own
//! address space.
//!
//! What the symbols give (every public kernel PDB since 6.1): `_ETW_REALTIME_CONSUMER.
//! UserBufferListHead` (a `SINGLE_LIST_ENTRY *`) and `UserBufferCount` (a `ULONG *`), both
//! user-mode pointers into the consumer process, and `ReservedBufferSpace` /
//! `ReservedBufferSpaceSize`, a user-mode region. What the reference leaves open
//! (etw-internals.md §3.4 \[U\]): what a list node is. etw-scan reads the node the head pointer
//! points at and each following `Next`, taking the pointer 0x28 bytes into a node as the
//! buffer; the kernel links its own buffers through `_WMI_BUFFER_HEADER.SlistEntry`. So
//! nothing here assumes one reading: from each node of the list (the one UserBufferListHead
//! points at included), a buffer is *searched* — the node as the buffer's own `SlistEntry`,
//! then every pointer in the node's first `NODE_SPAN` bytes — and kept only when it has the
//! identity of this session's buffer (BufferSize and `ClientContext.LoggerId` the session's,
//! checked by the caller). How each was found is reported. `ReservedBufferSpace` is searched
//! too (a buffer header every `SCAN_STEP` bytes), so copies that no readable node leads to
//! are still found. `UserBufferCount` is a consistency value only: it never bounds a walk.

use crate::addr::VirtAddr;
use crate::etl::header::BufferHeader;
use crate::etw::consumers::Consumer;
use crate::mem::{AddressSpace, ListStop};
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use thiserror::Error;

/// Most nodes followed on one consumer's user buffer list (a consumer keeps a few hundred
/// buffers at most; the value UserBufferCount holds does not raise it).
pub(crate) const MAX_USER_NODES: u64 = 1 << 16;
/// Bytes of a list node searched for a pointer to its buffer.
pub(crate) const NODE_SPAN: u64 = 0x40;
/// Largest ReservedBufferSpace searched (a larger ReservedBufferSpaceSize is cut to this, with
/// a warning).
pub(crate) const MAX_RESERVED_SPACE: u64 = 256 << 20;
/// ReservedBufferSpace is searched for a buffer header every this many bytes (ETW buffer
/// sizes are whole KiB); after a buffer, the search goes on past its end.
pub(crate) const SCAN_STEP: u64 = 0x400;

/// How a queued buffer was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum FoundVia {
    /// The list node is the buffer's own `SlistEntry` (`offset` into the buffer).
    SlistEntry { node: VirtAddr, offset: u64 },
    /// A pointer `offset` bytes into the list node at `node` leads to the buffer.
    NodePointer { node: VirtAddr, offset: u64 },
    /// Found by searching ReservedBufferSpace (`offset` into it).
    ReservedSpace { offset: u64 },
}

impl std::fmt::Display for FoundVia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoundVia::SlistEntry { node, offset } => {
                write!(f, "list node {node} is its SlistEntry (+{offset:#x})")
            }
            FoundVia::NodePointer { node, offset } => {
                write!(f, "pointer at +{offset:#x} of list node {node}")
            }
            FoundVia::ReservedSpace { offset } => {
                write!(f, "ReservedBufferSpace+{offset:#x}")
            }
        }
    }
}

/// The consumer process whose address space holds a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BufferOwner {
    /// The `_ETW_REALTIME_CONSUMER`.
    pub consumer: VirtAddr,
    pub eprocess: Option<VirtAddr>,
    pub pid: Option<u64>,
    pub process: Option<crate::text::Untrusted>,
    /// KPROCESS.DirectoryTableBase: the address space the buffer is read from.
    pub directory_table_base: u64,
}

/// One buffer found in a consumer's memory.
#[derive(Clone, Debug)]
pub struct UserBuffer {
    pub address: VirtAddr,
    pub header: BufferHeader,
    pub via: FoundVia,
}

/// What one consumer's memory gave.
#[derive(Clone, Debug, Default)]
pub struct Queued {
    /// Buffers on the user buffer list, in list order.
    pub listed: Vec<UserBuffer>,
    /// Buffers found in ReservedBufferSpace (those on the list too included).
    pub reserved: Vec<UserBuffer>,
    pub warnings: Vec<Warning>,
}

/// A consumer whose process's address space is not known.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("_ETW_REALTIME_CONSUMER at {consumer}: its process's DirectoryTableBase is unknown")]
pub struct UnknownOwner {
    pub consumer: VirtAddr,
}

/// The address space of the consumer `c` (its process's DirectoryTableBase), or why there is
/// none.
pub fn owner(c: &Consumer) -> Result<BufferOwner, UnknownOwner> {
    let dtb = c.directory_table_base.ok_or(UnknownOwner {
        consumer: c.address,
    })?;
    Ok(BufferOwner {
        consumer: c.address,
        eprocess: c.eprocess,
        pid: c.pid,
        process: c.process.clone(),
        directory_table_base: dtb,
    })
}

/// Find the buffers of consumer `c` in `space` (its process's address space). `check` tells
/// whether a user-mode address holds a buffer of the session (and reads its header);
/// `slist_offset` is `_WMI_BUFFER_HEADER.SlistEntry`'s offset (None where the layout has none).
pub fn queued(
    space: &AddressSpace<'_>,
    c: &Consumer,
    slist_offset: Option<u64>,
    check: &dyn Fn(VirtAddr) -> Option<BufferHeader>,
) -> Queued {
    let mut out = Queued::default();
    let who = format!(
        "consumer {} (PID {})",
        c.address,
        c.pid.map_or_else(|| "?".into(), |p| p.to_string())
    );
    if let Some(head) = c.user_buffer_list_head.filter(|h| !h.is_null()) {
        walk_list(space, c, head, slist_offset, check, &who, &mut out);
    }
    if let (Some(base), Some(size)) = (c.reserved_buffer_space, c.reserved_buffer_space_size) {
        if !base.is_null() && size != 0 {
            search_reserved(space, base, size, check, &who, &mut out);
        }
    }
    out
}

fn walk_list(
    space: &AddressSpace<'_>,
    c: &Consumer,
    head: VirtAddr,
    slist_offset: Option<u64>,
    check: &dyn Fn(VirtAddr) -> Option<BufferHeader>,
    who: &str,
    out: &mut Queued,
) {
    let field = "_ETW_REALTIME_CONSUMER.UserBufferListHead";
    if !space.is_user(head) {
        out.warnings.push(
            Warning::new(
                WarningKind::Anomaly,
                format!(
                    "{who}: UserBufferListHead {head} is not a user-mode address: not followed"
                ),
            )
            .at(c.address)
            .field(field),
        );
        return;
    }
    let psize = space.arch().pointer_size();
    let mut walk = space.chain(head, 0, MAX_USER_NODES);
    let mut nodes = 0u64;
    for node in walk.by_ref() {
        nodes += 1;
        if !space.is_user(node) {
            out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!("{who}: user buffer list node {node} is not a user-mode address: the list is not followed further"),
                )
                .at(node)
                .field(field),
            );
            return;
        }
        match find_in_node(space, node, slist_offset, psize, check) {
            Some(b) => {
                if !out.listed.iter().any(|x| x.address == b.address) {
                    out.listed.push(b);
                }
            }
            // The node UserBufferListHead points at may be a bare list head.
            None if node == head => {}
            None => out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!(
                        "{who}: user buffer list node {node} leads to no buffer of this session (neither as a buffer's SlistEntry nor by a pointer in its first {NODE_SPAN:#x} bytes)"
                    ),
                )
                .at(node)
                .field(field),
            ),
        }
    }
    match walk.stopped() {
        Some(ListStop::Bound { after }) => out.warnings.push(
            Warning::new(
                WarningKind::Bound,
                format!("{who}: user buffer list stopped after {after} nodes (the cap of {MAX_USER_NODES})"),
            )
            .field(field),
        ),
        Some(why) => out.warnings.push(
            Warning::new(why.kind(), format!("{who}: user buffer list from {head}: {why}"))
                .field(field),
        ),
        None => {}
    }
    // UserBufferCount: a consistency value, in the consumer's memory.
    if let Some(n) = c.user_buffer_count {
        let found = out.listed.len() as u64;
        if n != found && walk.stopped().is_none() {
            out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!(
                        "{who}: UserBufferCount says {n} but the user buffer list ({nodes} nodes from {head}) leads to {found} buffers of this session"
                    ),
                )
                .at(c.address)
                .field("_ETW_REALTIME_CONSUMER.UserBufferCount"),
            );
        }
    }
}

/// The buffer a list node leads to: the node as a buffer's SlistEntry, else a pointer in the
/// node's first [`NODE_SPAN`] bytes (in order of offset).
fn find_in_node(
    space: &AddressSpace<'_>,
    node: VirtAddr,
    slist_offset: Option<u64>,
    psize: u64,
    check: &dyn Fn(VirtAddr) -> Option<BufferHeader>,
) -> Option<UserBuffer> {
    if let Some(off) = slist_offset {
        if node.get() >= off {
            let at = node.containing(off);
            if let Some(header) = check(at) {
                return Some(UserBuffer {
                    address: at,
                    header,
                    via: FoundVia::SlistEntry { node, offset: off },
                });
            }
        }
    }
    let mut bytes = vec![0u8; NODE_SPAN as usize];
    let n = space.read_prefix(node, &mut bytes) as u64;
    let mut offset = psize;
    while offset + psize <= n {
        let o = offset as usize;
        let p = if psize == 8 {
            u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]))
        } else {
            u64::from(u32::from_le_bytes(
                bytes[o..o + 4].try_into().unwrap_or([0; 4]),
            ))
        };
        let at = VirtAddr::new(p);
        if space.is_user(at) && p % 8 == 0 && at != node {
            if let Some(header) = check(at) {
                return Some(UserBuffer {
                    address: at,
                    header,
                    via: FoundVia::NodePointer { node, offset },
                });
            }
        }
        offset += psize;
    }
    None
}

fn search_reserved(
    space: &AddressSpace<'_>,
    base: VirtAddr,
    size: u64,
    check: &dyn Fn(VirtAddr) -> Option<BufferHeader>,
    who: &str,
    out: &mut Queued,
) {
    let field = "_ETW_REALTIME_CONSUMER.ReservedBufferSpace";
    if !space.is_user(base) || base.get() % SCAN_STEP != 0 {
        out.warnings.push(
            Warning::new(
                WarningKind::Anomaly,
                format!("{who}: ReservedBufferSpace {base} is not an aligned user-mode address: not searched"),
            )
            .field(field),
        );
        return;
    }
    let mut len = size;
    if size > MAX_RESERVED_SPACE {
        out.warnings.push(
            Warning::new(
                WarningKind::Bound,
                format!("{who}: ReservedBufferSpaceSize {size:#x} is over {MAX_RESERVED_SPACE:#x}: only the first {MAX_RESERVED_SPACE:#x} bytes are searched"),
            )
            .field("_ETW_REALTIME_CONSUMER.ReservedBufferSpaceSize"),
        );
        len = MAX_RESERVED_SPACE;
    }
    let user_end = if space.arch().is_64bit() {
        0x0000_8000_0000_0000
    } else {
        0x8000_0000
    };
    len = len.min(user_end - base.get());
    let mut off = 0u64;
    let mut unreadable_pages = 0u64;
    while off < len {
        let at = base.offset(off);
        if space.translate(at).is_err() {
            // Not mapped or not in the dump: on to the next page.
            unreadable_pages += 1;
            off = (off | 0xFFF) + 1;
            continue;
        }
        match check(at) {
            Some(header) => {
                let step = header.buffer_size.max(SCAN_STEP);
                out.reserved.push(UserBuffer {
                    address: at,
                    header,
                    via: FoundVia::ReservedSpace { offset: off },
                });
                off = off.saturating_add(step.div_ceil(SCAN_STEP) * SCAN_STEP);
            }
            None => off += SCAN_STEP,
        }
    }
    if unreadable_pages > 0 {
        out.warnings.push(
            Warning::new(
                WarningKind::Unreadable,
                format!("{who}: {unreadable_pages} pages of ReservedBufferSpace [{base}, +{len:#x}) are not mapped or not in the dump (not searched)"),
            )
            .at(base)
            .field(field),
        );
    }
}
