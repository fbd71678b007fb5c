//! Where a logger's buffers hang (etw-internals.md §3) and how many bytes of each are valid
//! (§2.6). Every list walk is bounded and cycle-safe; each buffer is kept once, with the lists
//! it was found on.

use crate::addr::{PointerWidth, VirtAddr};
use crate::etl::header::BufferHeader;
use crate::etw::loggers::{Session, MAX_BUFFER_SIZE};
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::etw::realtime::{BufferOwner, FoundVia};
use crate::etw::routes::{etw_support_route, BufferRoute, LoggerArray};
use crate::kernel::context::KernelContext;
use crate::kernel::view::{View, ViewError};
use crate::mem::{AddressSpace, ListStop, MemError};
use crate::symbols::{StructLayout, TypeRef};
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::BTreeSet;
use thiserror::Error;

/// Most CPUs whose per-CPU buffers are looked at.
const MAX_CPUS: u64 = 2048;
/// Entries walked per buffer list at most (a million buffers is 4 GiB of 4 KiB buffers; no
/// count read from memory raises or lowers it).
pub(crate) const MAX_BUFFERS_PER_LIST: u64 = 1 << 20;

/// The lists a buffer can be found on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferList {
    GlobalList,
    CurrentBuffer,
    PerCpu,
    BufferQueue,
    OverflowQueue,
    DirtyChain,
    BatchedBufferList,
    CompressionTarget,
    ScratchArray,
    /// A real-time consumer's user buffer list (`UserBufferListHead`, in its process).
    UserBufferList,
    /// A real-time consumer's `ReservedBufferSpace` (searched, in its process).
    ReservedBufferSpace,
}

impl BufferList {
    /// The name used in JSON and CSV (`global_list`, `per_cpu`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BufferList::GlobalList => "global_list",
            BufferList::CurrentBuffer => "current_buffer",
            BufferList::PerCpu => "per_cpu",
            BufferList::BufferQueue => "buffer_queue",
            BufferList::OverflowQueue => "overflow_queue",
            BufferList::DirtyChain => "dirty_chain",
            BufferList::BatchedBufferList => "batched_buffer_list",
            BufferList::CompressionTarget => "compression_target",
            BufferList::ScratchArray => "scratch_array",
            BufferList::UserBufferList => "user_buffer_list",
            BufferList::ReservedBufferSpace => "reserved_buffer_space",
        }
    }
}

/// One buffer found.
#[derive(Clone, Debug, Serialize)]
pub struct FoundBuffer {
    pub address: VirtAddr,
    pub lists: BTreeSet<BufferList>,
    /// CPU whose current buffer it is (per-CPU route).
    pub cpu: Option<u64>,
    pub header: BufferHeader,
    /// The real-time consumer in whose address space the buffer is (None: kernel memory).
    pub owner: Option<BufferOwner>,
    /// How a consumer's buffer was found (the first route that led to it).
    pub via: Option<FoundVia>,
    /// A consumer's buffer whose bytes are those of this kernel buffer of the session (same
    /// SequenceNumber, same bytes): listed, not extracted twice.
    pub copy_of: Option<VirtAddr>,
}

/// All buffers of one session.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionBuffers {
    pub buffers: Vec<FoundBuffer>,
    pub warnings: Vec<Warning>,
}

struct Finder<'a, 'd> {
    ctx: &'a KernelContext<'d>,
    header_layout: &'a StructLayout,
    session: &'a Session,
    found: Vec<FoundBuffer>,
    /// (address space: None for the kernel, else the consumer's DirectoryTableBase; address)
    /// → index in `found`.
    index: std::collections::HashMap<(Option<u64>, VirtAddr), usize>,
    warnings: Vec<Warning>,
    /// Upper bound on entries walked per list.
    bound: u64,
}

impl<'a, 'd> Finder<'a, 'd> {
    fn new(
        ctx: &'a KernelContext<'d>,
        header_layout: &'a StructLayout,
        session: &'a Session,
        bound: u64,
    ) -> Self {
        Finder {
            ctx,
            header_layout,
            session,
            found: Vec::new(),
            index: std::collections::HashMap::new(),
            warnings: Vec::new(),
            bound,
        }
    }
}

/// Why an address holds no buffer header of the session.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum NotABuffer {
    #[error("not an aligned {} address", if *.user { "user-mode" } else { "kernel" })]
    Unaligned { user: bool },
    #[error("{0}")]
    Field(ViewError),
    #[error("WNODE_HEADER.BufferSize at {va}: {source}")]
    WnodeSize { va: VirtAddr, source: MemError },
    #[error("ClientContext at {at}: {source}")]
    ClientContext { at: VirtAddr, source: MemError },
    #[error("BufferSize {0:#x} is not plausible (and the session's BufferSize is not either)")]
    ImplausibleSize(u64),
    #[error("BufferSize {size:#x} differs from the session's {session:#x}")]
    OtherSize { size: u64, session: u64 },
    #[error("ClientContext.LoggerId {found} is not the session's {session}")]
    OtherLogger { found: u64, session: u64 },
}

/// Find every buffer of `session`.
pub fn find_buffers(
    ctx: &KernelContext<'_>,
    array: &LoggerArray,
    session: &Session,
) -> SessionBuffers {
    let mut out = SessionBuffers::default();
    let (Some(ctx_layout), Some(header_layout)) = (
        ctx.symbols.layout("_WMI_LOGGER_CONTEXT"),
        ctx.symbols.layout("_WMI_BUFFER_HEADER"),
    ) else {
        out.warnings.push(Warning::new(
            WarningKind::NotFound,
            "no _WMI_LOGGER_CONTEXT/_WMI_BUFFER_HEADER layout for this build",
        ));
        return out;
    };
    // The walk bound does not trust NumberOfBuffers/MaximumBuffers (they may be odd or wild,
    // issue 11): every list ends at its head or at a repeat; this cap only stops a crafted
    // list that never repeats.
    let mut f = Finder::new(ctx, header_layout, session, MAX_BUFFERS_PER_LIST);
    let v = View::new(&ctx.space, ctx_layout, session.address);
    f.global_list(&v);
    f.queue(&v, "BufferQueue", BufferList::BufferQueue);
    f.queue(&v, "OverflowQueue", BufferList::OverflowQueue);
    let per_cpu_mode = session.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING == 0;
    // CurrentBuffer (EX_FAST_REF) and BatchedBufferList share one field (§3.1).
    let cur_field = if v.has("CurrentBuffer") {
        Some("CurrentBuffer")
    } else if v.has("BatchedBufferList") {
        Some("BatchedBufferList")
    } else {
        None
    };
    if let Some(field) = cur_field {
        let list = if per_cpu_mode {
            BufferList::BatchedBufferList
        } else {
            BufferList::CurrentBuffer
        };
        f.fast_ref_field(&v, field, list);
    }
    if v.has("CompressionTarget") {
        f.fast_ref_field(&v, "CompressionTarget", BufferList::CompressionTarget);
    }
    if v.has("ScratchArray") {
        f.scratch_array(&v);
    }
    if v.has("ProcessorBuffers") {
        f.processor_buffers(&v);
    } else if per_cpu_mode {
        f.per_cpu(array);
    }
    // The dirty chain: each current buffer's +0x20 (NextBuffer) is its unwritten predecessor.
    let currents: Vec<VirtAddr> = f
        .found
        .iter()
        .filter(|b| {
            b.lists.contains(&BufferList::PerCpu) || b.lists.contains(&BufferList::CurrentBuffer)
        })
        .map(|b| b.address)
        .collect();
    for c in currents {
        f.dirty_chain(c);
    }
    // The buffers queued for the session's real-time consumers, in their processes.
    f.realtime_consumers();
    f.found
        .sort_by_key(|b| (b.header.sequence_number, b.address));
    out.buffers = f.found;
    out.warnings = f.warnings;
    out
}

impl Finder<'_, '_> {
    fn width(&self) -> PointerWidth {
        self.ctx.space.arch().width()
    }

    fn psize(&self) -> u64 {
        self.ctx.space.arch().pointer_size()
    }

    /// Read and check a candidate buffer; add it (or the list) on success.
    fn add(&mut self, va: VirtAddr, list: BufferList, cpu: Option<u64>) -> bool {
        if let Some(b) = self.index.get(&(None, va)).map(|&i| &mut self.found[i]) {
            b.lists.insert(list);
            if cpu.is_some() {
                b.cpu = cpu;
            }
            return true;
        }
        match self.header(va) {
            Ok(h) => {
                let mut lists = BTreeSet::new();
                lists.insert(list);
                self.index.insert((None, va), self.found.len());
                self.found.push(FoundBuffer {
                    address: va,
                    lists,
                    cpu,
                    header: h,
                    owner: None,
                    via: None,
                    copy_of: None,
                });
                true
            }
            Err(why) => {
                self.warnings.push(
                    Warning::new(WarningKind::Anomaly, format!("{list:?} entry {va}: {why}"))
                        .at(va),
                );
                false
            }
        }
    }

    fn header(&self, va: VirtAddr) -> Result<BufferHeader, NotABuffer> {
        self.header_in(&self.ctx.space, va, false)
    }

    /// The header of a buffer of this session at `va` in `space` (a kernel address, or with
    /// `user` a user-mode one), or why there is none.
    fn header_in(
        &self,
        space: &AddressSpace<'_>,
        va: VirtAddr,
        user: bool,
    ) -> Result<BufferHeader, NotABuffer> {
        let half_ok = if user {
            space.is_user(va)
        } else if space.arch().is_64bit() {
            va.get() >= 0xFFFF_8000_0000_0000
        } else {
            va.get() >= 0x8000_0000
        };
        if !half_ok || va.get() % 8 != 0 {
            return Err(NotABuffer::Unaligned { user });
        }
        let v = View::new(space, self.header_layout, va);
        let u = |name: &str| v.uint(name).map_err(NotABuffer::Field);
        // Fields that older layouts lack or shape differently (5.x: BufferSize is the
        // WNODE_HEADER's at +0, State a bit-field structure, no SequenceNumber / BufferFlag /
        // BufferType in 5.0-5.1): absent → None, a structure → its first ULONG.
        let opt = |name: &str| match v.uint(name) {
            Ok(x) => Ok(Some(x)),
            Err(crate::kernel::view::ViewError::MissingField { .. }) => Ok(None),
            Err(crate::kernel::view::ViewError::Shape { .. }) => v
                .bytes(name, 4)
                .map(|b| Some(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))))
                .map_err(NotABuffer::Field),
            Err(e) => Err(NotABuffer::Field(e)),
        };
        let wnode_size = || {
            space
                .read_u32(va)
                .map(u64::from)
                .map_err(|source| NotABuffer::WnodeSize { va, source })
        };
        // ClientContext: {ProcessorNumber/Index (u8/u16); LoggerId (u16 at +2)}.
        let cc = v.field_va("ClientContext").map_err(NotABuffer::Field)?;
        let cc_raw = space
            .read_u32(cc)
            .map_err(|source| NotABuffer::ClientContext { at: cc, source })?;
        let h = BufferHeader {
            buffer_size: match opt("BufferSize")? {
                Some(x) => x,
                None => wnode_size()?,
            },
            saved_offset: u("SavedOffset")?,
            current_offset: u("CurrentOffset")?,
            offset: u("Offset")?,
            sequence_number: opt("SequenceNumber")?.unwrap_or(0),
            processor_index: u64::from(cc_raw & 0x07FF),
            logger_id: u64::from(cc_raw >> 16),
            state: opt("State")?.unwrap_or(0),
            buffer_flag: opt("BufferFlag")?.unwrap_or(0),
            buffer_type: opt("BufferType")?.unwrap_or(0),
        };
        let session_size_plausible = self
            .session
            .buffer_size
            .is_some_and(crate::etw::loggers::plausible_buffer_size);
        if !session_size_plausible && !crate::etw::loggers::plausible_buffer_size(h.buffer_size) {
            return Err(NotABuffer::ImplausibleSize(h.buffer_size));
        }
        if session_size_plausible && Some(h.buffer_size) != self.session.buffer_size {
            return Err(NotABuffer::OtherSize {
                size: h.buffer_size,
                session: self.session.buffer_size.unwrap_or(0),
            });
        }
        if h.logger_id != self.session.logger_id {
            return Err(NotABuffer::OtherLogger {
                found: h.logger_id,
                session: self.session.logger_id,
            });
        }
        Ok(h)
    }

    fn global_list(&mut self, v: &View<'_, '_>) {
        let Ok(head) = v.field_va("GlobalList") else {
            return;
        };
        let head_type = v.layout.field("GlobalList").map(|f| &f.ty);
        let entry_type = self.header_layout.field("GlobalEntry").map(|f| &f.ty);
        let is = |t: Option<&TypeRef>, name: &str| matches!(t, Some(TypeRef::Struct { name: n }) if n == name);
        // 5.1-6.0: an SLIST_HEADER linked through SINGLE_LIST_ENTRY GlobalEntry (§3.2).
        if is(head_type, "_SLIST_HEADER") {
            self.slist_global_list(head);
            return;
        }
        // 5.0: a LIST_ENTRY whose buffers are linked through their LIST_ENTRY Entry (§3.2).
        if is(entry_type, "_SINGLE_LIST_ENTRY") {
            match self.header_layout.field("Entry").map(|f| (f.offset, &f.ty)) {
                Some((off, t)) if is(Some(t), "_LIST_ENTRY") => self.list_entry_walk(head, off),
                _ => self.warnings.push(Warning::new(
                    WarningKind::Unsupported,
                    "GlobalList is a LIST_ENTRY but the buffer header has no LIST_ENTRY Entry to walk it by",
                )),
            }
            return;
        }
        let Some(entry_off) = self.header_layout.field("GlobalEntry").map(|f| f.offset) else {
            self.warnings.push(Warning::new(
                WarningKind::Unsupported,
                "this build's buffer header has no GlobalEntry: GlobalList not walked",
            ));
            return;
        };
        self.list_entry_walk(head, entry_off);
    }

    /// 5.1-6.0: the SLIST_HEADER's first entry, then SINGLE_LIST_ENTRY.Next to NULL.
    fn slist_global_list(&mut self, head: VirtAddr) {
        let Some(entry_off) = self.header_layout.field("GlobalEntry").map(|f| f.offset) else {
            self.warnings.push(
                Warning::new(
                    WarningKind::NotFound,
                    "GlobalList is an SLIST but the buffer header has no GlobalEntry",
                )
                .field("_WMI_BUFFER_HEADER.GlobalEntry"),
            );
            return;
        };
        let space = &self.ctx.space;
        let first = if space.arch().is_64bit() {
            // x64 SLIST_HEADER: the 16-byte form keeps NextEntry in bits 4-63 of the second
            // quadword. The 8-byte form of some 5.2/6.0 kernels packs it with region bits
            // the reference does not give: an entry that does not lead to a buffer of this
            // session is reported, not guessed at.
            space
                .read_u64(head.offset(8))
                .map(|q| VirtAddr::new(q & !0xF))
        } else {
            space.read_u32(head).map(|v| VirtAddr::new(u64::from(v)))
        };
        let first = match first {
            Ok(f) => f,
            Err(e) => {
                self.warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("_WMI_LOGGER_CONTEXT.GlobalList (SLIST) at {head}: {e}"),
                    )
                    .at(head)
                    .field("_WMI_LOGGER_CONTEXT.GlobalList"),
                );
                return;
            }
        };
        let mut walk = space.chain(first, 0, self.bound);
        let mut first_entry = true;
        for e in walk.by_ref() {
            if !self.add(e.containing(entry_off), BufferList::GlobalList, None) {
                if space.arch().is_64bit() && first_entry {
                    self.warnings.push(Warning::new(
                        WarningKind::Unsupported,
                        "GlobalList: the x64 SLIST_HEADER's first entry does not lead to a buffer (8-byte SLIST encoding not decoded)",
                    ));
                }
                return;
            }
            first_entry = false;
        }
        if let Some(why) = walk.stopped() {
            self.warnings.push(
                Warning::new(why.kind(), format!("GlobalList (SLIST): {why}"))
                    .field("_WMI_LOGGER_CONTEXT.GlobalList"),
            );
        }
    }

    /// A LIST_ENTRY GlobalList (6.1+ through GlobalEntry, 5.0 through Entry): Flink from the
    /// head to the head again, each entry `entry_off` into its buffer; bounded, cycle-safe.
    fn list_entry_walk(&mut self, head: VirtAddr, entry_off: u64) {
        let ctx = self.ctx;
        let mut walk = match ctx.space.list_entries(head, self.bound) {
            Ok(w) => w,
            Err(e) => {
                self.warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("_WMI_LOGGER_CONTEXT.GlobalList at {head}: {e}"),
                    )
                    .at(head)
                    .field("_WMI_LOGGER_CONTEXT.GlobalList"),
                );
                return;
            }
        };
        for cur in walk.by_ref() {
            if !self.add(cur.containing(entry_off), BufferList::GlobalList, None) {
                return;
            }
        }
        match walk.stopped() {
            Some(ListStop::Bound { after }) => self.warnings.push(Warning::new(
                WarningKind::Bound,
                format!(
                    "GlobalList: stopped after {after} entries (the hard cap of {MAX_BUFFERS_PER_LIST} entries per list)"
                ),
            ).field("_WMI_LOGGER_CONTEXT.GlobalList")),
            Some(why) => self.warnings.push(
                Warning::new(why.kind(), format!("GlobalList: {why}"))
                    .field("_WMI_LOGGER_CONTEXT.GlobalList"),
            ),
            None => {}
        }
    }

    /// 5.0 and 5.2: `ProcessorBuffers` = `WMI_BUFFER_HEADER **`, one current buffer per CPU
    /// (§3.3). 5.1's per-CPU SLIST headers are reported, not walked (their link is not given).
    fn processor_buffers(&mut self, v: &View<'_, '_>) {
        let Some(f) = v.layout.field("ProcessorBuffers") else {
            return;
        };
        let TypeRef::Pointer { target } = &f.ty else {
            return;
        };
        if !matches!(&**target, TypeRef::Pointer { .. }) {
            self.warnings.push(Warning::new(
                WarningKind::Unsupported,
                "5.1 ProcessorBuffers (per-CPU SLIST headers) are not walked; the current buffers are on GlobalList",
            ));
            return;
        }
        let arr = match v.ptr("ProcessorBuffers") {
            Ok(p) if !p.is_null() => p,
            Ok(_) => return,
            Err(e) => {
                self.warnings
                    .push(Warning::new(WarningKind::Unreadable, e.to_string()));
                return;
            }
        };
        let p = self.psize();
        for cpu in 0..self.cpus() {
            let res = self.ctx.space.read_ptr(arr.offset(cpu * p));
            self.add_per_cpu(res, cpu, "ProcessorBuffers");
        }
    }

    fn queue(&mut self, v: &View<'_, '_>, field: &str, list: BufferList) {
        let Ok(q) = v.field_va(field) else {
            return;
        };
        let Some(slist_off) = self.header_layout.field("SlistEntry").map(|f| f.offset) else {
            return;
        };
        let space = &self.ctx.space;
        // ETW_BUFFER_QUEUE {QueueTail; SINGLE_LIST_ENTRY QueueEntry}: QueueEntry.Next is the first.
        let first = match space.read_ptr(q.offset(self.psize())) {
            Ok(p) => p,
            Err(e) => {
                self.warnings.push(
                    Warning::new(WarningKind::Unreadable, format!("{field} at {q}: {e}"))
                        .at(q)
                        .field(format!("_WMI_LOGGER_CONTEXT.{field}")),
                );
                return;
            }
        };
        let mut walk = space.chain(first, 0, self.bound);
        for cur in walk.by_ref() {
            if !self.add(cur.containing(slist_off), list, None) {
                return;
            }
        }
        if let Some(why) = walk.stopped() {
            self.warnings.push(
                Warning::new(why.kind(), format!("{field}: {why}"))
                    .field(format!("_WMI_LOGGER_CONTEXT.{field}")),
            );
        }
    }

    fn fast_ref_field(&mut self, v: &View<'_, '_>, field: &str, list: BufferList) {
        match v.ptr(field) {
            Ok(p) => {
                let b = p.fast_ref_object(self.width());
                if !b.is_null() {
                    self.add(b, list, None);
                }
            }
            Err(e) => self
                .warnings
                .push(Warning::new(WarningKind::Unreadable, e.to_string())),
        }
    }

    /// `ScratchArray` (6.2+, `_WMI_BUFFER_HEADER **`; its semantics are not documented,
    /// etw-internals.md §3.4 [U]): an array of buffer pointers, read for as many entries as
    /// the machine has CPUs; an entry is kept only when it validates as this session's buffer
    /// (LoggerId, BufferSize), others are ignored silently (the array's length is unknown).
    fn scratch_array(&mut self, v: &View<'_, '_>) {
        let arr = match v.ptr("ScratchArray") {
            Ok(p) => p.fast_ref_object(self.width()),
            Err(e) => {
                self.warnings
                    .push(Warning::new(WarningKind::Unreadable, e.to_string()));
                return;
            }
        };
        if arr.is_null() {
            return;
        }
        let p = self.psize();
        for i in 0..self.cpus() {
            let Ok(e) = self.ctx.space.read_ptr(arr.offset(i * p)) else {
                return;
            };
            let b = e.fast_ref_object(self.width());
            if !b.is_null() && self.header(b).is_ok() {
                self.add(b, BufferList::ScratchArray, None);
            }
        }
    }

    /// NextBuffer links from `from`, followed while they lead to this session's buffers (an
    /// unreadable link or a foreign buffer ends the chain silently: its end is not marked).
    fn dirty_chain(&mut self, from: VirtAddr) {
        let ctx = self.ctx;
        let Some(next_off) = self.header_layout.field("NextBuffer").map(|f| f.offset) else {
            return;
        };
        for next in ctx.space.chain(from, next_off, self.bound).skip(1) {
            // Only follow links that lead to this session's buffers.
            if self.header(next).is_err() {
                return;
            }
            self.add(next, BufferList::DirtyChain, None);
        }
    }

    /// Each real-time consumer's queued buffers ([`crate::etw::realtime`]), in its process's
    /// address space; then, per consumer buffer, whether it is a copy of a kernel buffer of
    /// the session still in memory (same SequenceNumber and bytes).
    fn realtime_consumers(&mut self) {
        let session = self.session;
        let slist = self.header_layout.field("SlistEntry").map(|f| f.offset);
        for c in &session.consumers {
            if !c.has_queue() {
                continue;
            }
            let owner = match crate::etw::realtime::owner(c) {
                Ok(o) => o,
                Err(why) => {
                    self.warnings.push(
                        Warning::new(WarningKind::Unreadable, why.to_string())
                            .at(c.address)
                            .field("_KPROCESS.DirectoryTableBase"),
                    );
                    continue;
                }
            };
            let space = self.ctx.space.with_root(owner.directory_table_base);
            let q = crate::etw::realtime::queued(&space, c, slist, &|va| {
                self.header_in(&space, va, true).ok()
            });
            self.warnings.extend(q.warnings);
            for (bufs, list) in [
                (q.listed, BufferList::UserBufferList),
                (q.reserved, BufferList::ReservedBufferSpace),
            ] {
                for b in bufs {
                    let key = (Some(owner.directory_table_base), b.address);
                    if let Some(&i) = self.index.get(&key) {
                        self.found[i].lists.insert(list);
                        continue;
                    }
                    self.index.insert(key, self.found.len());
                    self.found.push(FoundBuffer {
                        address: b.address,
                        lists: BTreeSet::from([list]),
                        cpu: None,
                        header: b.header,
                        owner: Some(owner.clone()),
                        via: Some(b.via),
                        copy_of: None,
                    });
                }
            }
        }
        self.mark_copies();
    }

    /// A consumer's buffer with the SequenceNumber of a kernel buffer of the session and the
    /// same bytes is a copy of it (`copy_of`); its records are taken once, from the kernel's.
    fn mark_copies(&mut self) {
        let mut by_seq: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        for (i, b) in self.found.iter().enumerate() {
            if b.owner.is_none() {
                by_seq.entry(b.header.sequence_number).or_default().push(i);
            }
        }
        let users: Vec<usize> = (0..self.found.len())
            .filter(|&i| self.found[i].owner.is_some())
            .collect();
        for u in users {
            let Some(kernel) = by_seq.get(&self.found[u].header.sequence_number) else {
                continue;
            };
            let Ok(mine) = read_buffer(self.ctx, &self.found[u]) else {
                continue;
            };
            let same = kernel.iter().copied().find(|&k| {
                self.found[k].header.buffer_size == self.found[u].header.buffer_size
                    && read_buffer(self.ctx, &self.found[k]).is_ok_and(|theirs| theirs == mine)
            });
            if let Some(k) = same {
                self.found[u].copy_of = Some(self.found[k].address);
            }
        }
    }

    fn cpus(&self) -> u64 {
        u64::from(self.ctx.processors()).clamp(1, MAX_CPUS)
    }

    /// A per-CPU EX_FAST_REF value (or why it could not be read).
    fn add_per_cpu(&mut self, value: Result<VirtAddr, MemError>, cpu: u64, route: &str) {
        match value {
            Ok(p) => {
                let b = p.fast_ref_object(self.width());
                if !b.is_null() {
                    self.add(b, BufferList::PerCpu, Some(cpu));
                }
            }
            Err(e) => self.warnings.push(
                Warning::new(WarningKind::Unreadable, format!("CPU {cpu}: {route}: {e}")).cpu(cpu),
            ),
        }
    }

    /// KiProcessorBlock[cpu] → KPRCB.EtwSupport, for every CPU (None where unreadable).
    fn etw_support_blocks(&mut self) -> Option<(u64, Vec<Option<VirtAddr>>)> {
        let ctx = self.ctx;
        let loc = crate::etw::etw_support::locate(ctx);
        let es_off = loc.offset?;
        if matches!(
            loc.how,
            crate::kernel::context::LocatedHow::Searched
                | crate::kernel::context::LocatedHow::Unconfirmed
        ) {
            let kind = if loc.how == crate::kernel::context::LocatedHow::Searched {
                WarningKind::Inferred
            } else {
                WarningKind::Unconfirmed
            };
            crate::warning::push_once(
                &mut self.warnings,
                Warning::new(kind, format!("per-CPU current buffers: {}", loc.evidence))
                    .field("_KPRCB.EtwSupport"),
            );
        }
        let kpb = ctx
            .global("KiProcessorBlock")
            .or_else(|| ctx.kdbg().and_then(|k| k.ki_processor_block()))?;
        let p = self.psize();
        let blocks = (0..self.cpus())
            .map(|cpu| {
                ctx.space
                    .read_ptr(kpb.offset(cpu * p))
                    .and_then(|prcb| ctx.space.read_ptr(prcb.offset(es_off)))
                    .ok()
                    .filter(|b| b.get() != 0)
            })
            .collect();
        Some((es_off, blocks))
    }

    fn per_cpu(&mut self, array: &LoggerArray) {
        let ctx = self.ctx;
        let space = &ctx.space;
        let id = self.session.logger_id;
        let p = self.psize();
        let silo_field = array.silo_state.zip(
            crate::etw::silo::layout(ctx, "_ETW_SILODRIVERSTATE")
                .and_then(|l| l.field("ProcessorBlocks")),
        );
        // 1709+: silo.ProcessorBlocks (pointer) -> ETW_SILO_TRACING_BLOCK[cpu] {EX_FAST_REF
        // *ProcessorBuffers; ...} -> ProcessorBuffers[id]. NULL in the host silo of later
        // Windows 11 builds, which use EtwSupport + 0x140 instead (§3.3).
        if let Some((silo, f)) = silo_field.filter(|(_, f)| f.ty.is_pointer()) {
            match space.read_ptr(silo.offset(f.offset)) {
                Ok(blocks) if !blocks.is_null() => {
                    let block_size = ctx
                        .symbols
                        .layout("_ETW_SILO_TRACING_BLOCK")
                        .map_or(0x40, |l| l.size.max(8));
                    let pb_off = ctx
                        .symbols
                        .layout("_ETW_SILO_TRACING_BLOCK")
                        .and_then(|l| l.field("ProcessorBuffers"))
                        .map_or(0, |f| f.offset);
                    for cpu in 0..self.cpus() {
                        let block = blocks.offset(cpu * block_size);
                        let res: Result<VirtAddr, MemError> = space
                            .read_ptr(block.offset(pb_off))
                            .and_then(|arr| space.read_ptr(arr.offset(id * p)));
                        self.add_per_cpu(res, cpu, "ProcessorBlocks route");
                    }
                    return;
                }
                Ok(_) => self.warnings.push(Warning::new(
                    WarningKind::NotFound,
                    "_ETW_SILODRIVERSTATE.ProcessorBlocks is NULL (the host silo of later Windows 11 builds); trying KPRCB.EtwSupport",
                ).field("_ETW_SILODRIVERSTATE.ProcessorBlocks")),
                Err(e) => self.warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("_ETW_SILODRIVERSTATE.ProcessorBlocks: {e}"),
                    )
                    .field("_ETW_SILODRIVERSTATE.ProcessorBlocks"),
                ),
            }
        } else if let Some((silo, f)) = silo_field {
            // 1703: ProcessorBlocks inline in the silo state: ETW_SILO_TRACING_BLOCK[cpu]
            // {EX_FAST_REF ProcessorBuffers[64]; ULONGLONG EventsLoggedCount[64]} (0x400
            // bytes on x64).
            let block_size = ctx
                .symbols
                .layout("_ETW_SILO_TRACING_BLOCK")
                .map_or(128 * p, |l| l.size.max(8));
            for cpu in 0..self.cpus() {
                let at = silo.offset(f.offset + cpu * block_size + id * p);
                let res = space.read_ptr(at);
                self.add_per_cpu(res, cpu, "inline ProcessorBlocks route");
            }
            return;
        }
        let Some((es_off, blocks)) = self.etw_support_blocks() else {
            self.warnings.push(Warning::new(
                WarningKind::NotFound,
                format!(
                    "per-CPU current buffers: no KPRCB.EtwSupport layout or KiProcessorBlock for build {}; current buffers are still found on GlobalList",
                    ctx.build
                ),
            ));
            return;
        };
        // Documented EtwSupport routes, identified by the KPRCB.EtwSupport offset (§3.3).
        let known = etw_support_route(space.arch(), ctx.build, es_off)
            .and_then(|r| r.buffers.map(|b| (r.name, b)));
        if let Some((route, how)) = known {
            for (cpu, es) in blocks.iter().enumerate() {
                let Some(es) = es else {
                    self.warnings.push(
                        Warning::new(
                            WarningKind::Unreadable,
                            format!("CPU {cpu}: KPRCB.EtwSupport is unreadable or NULL"),
                        )
                        .cpu(cpu as u64)
                        .field("_KPRCB.EtwSupport"),
                    );
                    continue;
                };
                let res = match how {
                    BufferRoute::Indirect(off) => space
                        .read_ptr(es.offset(off))
                        .and_then(|arr| space.read_ptr(arr.offset(id * p))),
                    BufferRoute::Direct(off) => space.read_ptr(es.offset(off + id * p)),
                };
                self.add_per_cpu(res, cpu as u64, route);
            }
            return;
        }
        // Unknown build: the validated search of each EtwSupport block (§3.3 [I]).
        let mut hits = 0;
        for (cpu, es) in blocks.iter().enumerate() {
            if let Some(es) = es {
                for (b, _) in search_etw_support(self, *es) {
                    self.add(b, BufferList::PerCpu, Some(cpu as u64));
                    hits += 1;
                }
            }
        }
        self.warnings.push(Warning::new(
            WarningKind::Inferred,
            format!(
                "per-CPU current buffers: no documented route for build {} (KPRCB.EtwSupport at {es_off:#x}); a validated search of the EtwSupport blocks found {hits}",
                ctx.build
            ),
        ));
    }
}

/// Bytes of an EtwSupport block searched for per-CPU buffer pointers.
const ES_SEARCH_BYTES: usize = 0x1000;

/// The validated search of one EtwSupport block (§3.3 [I]): pointer-sized values (EX_FAST_REF,
/// low bits masked) that point at a WMI_BUFFER_HEADER of this session (LoggerId and
/// BufferSize match), directly or through one array indexed by LoggerId. Returns (buffer,
/// offset in the block).
fn search_etw_support(f: &Finder<'_, '_>, es: VirtAddr) -> Vec<(VirtAddr, u64)> {
    let space = &f.ctx.space;
    let p = f.psize() as usize;
    let id = f.session.logger_id;
    let mut area = vec![0u8; ES_SEARCH_BYTES];
    let n = space.read_prefix(es, &mut area);
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for off in (0..n.saturating_sub(p - 1)).step_by(p) {
        let raw = if p == 8 {
            u64::from_le_bytes(area[off..off + 8].try_into().unwrap_or([0; 8]))
        } else {
            u64::from(u32::from_le_bytes(
                area[off..off + 4].try_into().unwrap_or([0; 4]),
            ))
        };
        let v = VirtAddr::new(raw).fast_ref_object(f.width());
        if v.is_null() {
            continue;
        }
        let direct = f.header(v).is_ok().then_some(v);
        let via_array = || {
            space
                .read_ptr(v.offset(id * p as u64))
                .ok()
                .map(|q| q.fast_ref_object(f.width()))
                .filter(|q| !q.is_null() && f.header(*q).is_ok())
        };
        if let Some(b) = direct.or_else(via_array) {
            if seen.insert(b) {
                out.push((b, off as u64));
            }
        }
    }
    out
}

/// The validated search on every CPU's EtwSupport block for `session`'s current buffers
/// (what `find_buffers` uses on builds without a documented route). Returns (CPU, buffer,
/// offset in the block).
pub fn search_per_cpu(ctx: &KernelContext<'_>, session: &Session) -> Vec<(u64, VirtAddr, u64)> {
    let Some(header_layout) = ctx.symbols.layout("_WMI_BUFFER_HEADER") else {
        return Vec::new();
    };
    let mut f = Finder::new(ctx, header_layout, session, 64);
    let Some((_, blocks)) = f.etw_support_blocks() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (cpu, es) in blocks.iter().enumerate() {
        if let Some(es) = es {
            for (b, off) in search_etw_support(&f, *es) {
                out.push((cpu as u64, b, off));
            }
        }
    }
    out
}

/// The address space a buffer is in: the kernel's, or its consumer process's.
pub(crate) fn space_of<'d>(ctx: &KernelContext<'d>, b: &FoundBuffer) -> AddressSpace<'d> {
    match &b.owner {
        None => ctx.space,
        Some(o) => ctx.space.with_root(o.directory_table_base),
    }
}

/// Read a buffer's `BufferSize` bytes (in `space_of` it).
pub fn read_buffer(ctx: &KernelContext<'_>, b: &FoundBuffer) -> Result<Vec<u8>, MemError> {
    let size = b.header.buffer_size.min(MAX_BUFFER_SIZE) as usize;
    let mut v = vec![0u8; size];
    space_of(ctx, b).read_bulk(b.address, &mut v)?;
    Ok(v)
}
