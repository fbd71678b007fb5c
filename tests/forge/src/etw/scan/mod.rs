//! Scan scenarios (issue 15): dumps in which a reader that scans all physical memory must find
//! every trace buffer, pending 'CCsw' block and logger context, reachable or not, and classify
//! each as live, orphaned or a stale copy; plus decoys it must not report. Opt-in through
//! [`EtwSpec::scan`] ([`EtwSpec::with_stopped_sessions`], [`EtwSpec::with_scan_extras`]);
//! without it nothing changes.
//!
//! Facts from shared/reference/etw-internals.md: §1.2 (free slot value: bit 0 set, 1 in
//! practice, 10.0+; 6.x "probably" the same [U]), §1.3 (context identity: LoggerId == slot),
//! §2 (WMI_BUFFER_HEADER, valid bytes §2.6, record alignment §5), §3.2 (GlobalList), §4.1-§4.2
//! ('CCsw' 0x400-byte blocks, UsedBytes 0 or 0x68..=0x400). Assumptions (the reference says
//! nothing): what a freed pool block's header looks like ([`super::Pool::mark_freed`]: pool
//! type bits 0, BlockSize and tag kept), that freed pages stay mapped until reused, that a
//! stopped logger's buffers keep their last contents and GlobalEntry links.
//!
//! Two phases: [`stopped`] and [`extras`] lay out bytes while the logger state is built
//! (virtual addresses known), [`place`] puts them into physical memory once the ETW pages are
//! mapped and resolves every expectation's physical addresses.
//!
//! ## What a buffer must satisfy to count (the rules the decoys break)
//!
//! A `_WMI_BUFFER_HEADER` at a physical address counts as a buffer iff
//! 1. `BufferSize` is a non-zero multiple of 0x400 (1 KiB, §1.3 [I]) and at most 1 MiB
//!    (§1.3; the forge never writes more);
//! 2. `valid` = `CurrentOffset` if `CurrentOffset <= BufferSize`, else `SavedOffset` (§2.6)
//!    satisfies `0x48 <= valid <= BufferSize`;
//! 3. `ClientContext.LoggerId` is below 256 (MaxLoggers <= 256, §1.1) and `State` is 0..=6
//!    (§2.4);
//! 4. the record chain walks: `valid == 0x48`, or the record at +0x48 has byte 3 bit 7 set
//!    (TRACE_HEADER_FLAG, §5), a known header type and a Size that fits in `valid`; following
//!    records at `offset + ALIGN8(Size)` (§5) until one fails or `valid` is reached.
//!
//! Compressed buffers (State 5 / BufferFlag 0x40) fail rule 4 by design (their payload is
//! not records): [`ScanBuffer::compressed`] says which. A 'CCsw' block counts iff its pool
//! tag is 'CCsw' and UsedBytes is 0 or 0x68..=0x400 (§4.2). A logger context counts iff its
//! pool tag is 'EtwL' and its LoggerId is below the array's capacity (§1.3) with a plausible
//! BufferSize (rule 1); the logger array itself is an 'EtwL' allocation on the pointer route
//! and is listed as a decoy.

mod extras;
pub(crate) mod place;
mod stopped;

use std::collections::BTreeMap;

use crate::config::Config;
use crate::etw::buffers::ExpectedBuffer;
use crate::etw::EtwSpec;

/// What to add for a scan scenario ([`EtwSpec::scan`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanSpec {
    /// Stopped sessions to plant ([`EtwSpec::with_stopped_sessions`]).
    pub stopped_sessions: u32,
    /// Stale copies of live buffers, orphaned 'CCsw' blocks and decoys
    /// ([`EtwSpec::with_scan_extras`]).
    pub extras: bool,
    /// One more stopped session, later than the others, in the first one's slot with the
    /// same name, BufferSize and clock: LoggerId and BufferSize reused by two sessions in turn
    /// ([`EtwSpec::with_reused_slot`]). Its context is new, so its buffers' SequenceNumbers
    /// start over (etw-internals.md §2: the per-logger BufferSequenceNumber).
    pub reused_slot: bool,
}

/// What kind of ETW object a scan finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScanKind {
    /// A `_WMI_BUFFER_HEADER` and its data.
    Buffer,
    /// A 0x400-byte 'CCsw' pending compact context-switch block (etw-internals.md §4).
    PendingBlock,
    /// A `_WMI_LOGGER_CONTEXT` in an 'EtwL' pool block.
    LoggerContext,
}

impl ScanKind {
    /// "buffer", "pending_block" or "logger_context" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            ScanKind::Buffer => "buffer",
            ScanKind::PendingBlock => "pending_block",
            ScanKind::LoggerContext => "logger_context",
        }
    }
}

/// How a scan must classify an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScanClass {
    /// Reachable: a context through a slot of the logger array that validates (value not
    /// bit-0 tagged, LoggerId == slot); a buffer through such a context's lists (GlobalList,
    /// queues, CurrentBuffer) or a CPU's per-processor pointer; a 'CCsw' block through a
    /// KPRCB.EtwSupport block.
    Live,
    /// Not reachable that way (stopped sessions, free-tagged slots, a stale context's buffers,
    /// orphaned 'CCsw' blocks).
    Orphaned,
    /// A duplicate of a live object left elsewhere: a copy of a live buffer's bytes, or a
    /// complete context whose LoggerId is not its slot's (the standard set's slot 8).
    StaleCopy,
}

impl ScanClass {
    /// "live", "orphaned" or "stale_copy" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            ScanClass::Live => "live",
            ScanClass::Orphaned => "orphaned",
            ScanClass::StaleCopy => "stale_copy",
        }
    }
}

/// Buffer facts of a [`ScanObject`] of kind [`ScanKind::Buffer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanBuffer {
    /// ClientContext.LoggerId.
    pub logger_id: u32,
    pub buffer_size: u32,
    pub sequence_number: u64,
    pub state: u32,
    /// §2.6: CurrentOffset if <= BufferSize, else SavedOffset (header included).
    pub valid_bytes: u32,
    /// Complete records in the valid bytes (0 for compressed and header-only buffers).
    pub record_count: u32,
    /// Physical address of buffer byte `i * 0x1000` for every `i` below
    /// ceil(BufferSize / 0x1000) (the page starts for page-aligned buffers); None where that
    /// byte has no translation (its page is no longer mapped, or was never).
    pub pages: Vec<Option<u64>>,
    /// Indices into `pages` of pages whose physical page now holds unrelated data.
    pub overwritten_pages: Vec<u32>,
    /// All of [0, valid) holds the buffer's bytes and is reachable (mapped, or physically
    /// contiguous from the header).
    pub complete: bool,
    /// Length of the prefix of [0, valid) that holds the buffer's bytes (= `valid_bytes` when
    /// complete): up to the first overwritten or unmapped page.
    pub intact_bytes: u32,
    /// Where a record-chain walk over the intact prefix ends: the 8-aligned end of the last
    /// record that lies wholly inside it (= valid - trimmed for complete buffers; 0x48 if none).
    pub recoverable_bytes: u32,
    /// Records wholly inside the intact prefix (= `record_count` for complete buffers).
    pub recoverable_records: u32,
    /// The `pages` covering [0, intact_bytes) are all present and physically consecutive.
    pub physically_contiguous: bool,
    /// A 0x48-byte header of a session without data, in small pool (not page aligned): the
    /// bytes after the header are not the buffer's.
    pub header_only: bool,
    /// State 5 / BufferFlag 0x40: the payload is not records (fails the chain rule).
    pub compressed: bool,
    /// Stale copies: the physical address of the live buffer this is a copy of.
    pub copy_of: Option<u64>,
}

/// 'CCsw' block facts of a [`ScanObject`] of kind [`ScanKind::PendingBlock`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPending {
    /// UsedBytes at +0 (0, or 0x68..=0x400).
    pub used_bytes: u32,
    /// StartTick at +4.
    pub start_tick: u32,
    /// The clock type whose units the batch's times are in.
    pub clock_type: u32,
    /// Switches in the batch (0 when UsedBytes is 0 or no packet was written).
    pub switches: u32,
    /// FirstTimeStamp and the last switch's time (None when UsedBytes is 0).
    pub first_time: Option<u64>,
    pub last_time: Option<u64>,
    /// The CPU whose KPRCB points at it (live blocks).
    pub cpu: Option<u32>,
    /// The pool header's pool type bits are those of a freed block.
    pub pool_freed: bool,
}

/// Logger-context facts of a [`ScanObject`] of kind [`ScanKind::LoggerContext`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanContext {
    pub logger_id: u32,
    /// None: LoggerName's characters are not in the dump.
    pub name: Option<String>,
    pub buffer_size: u32,
    pub clock_type: Option<u32>,
    /// The array slot whose value points at it (live and stale contexts; free-tagged ones:
    /// the slot whose value is the pointer with bit 0 set).
    pub slot: Option<u32>,
    /// The pool header's pool type bits are those of a freed block.
    pub pool_freed: bool,
}

/// One object a scan must report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanObject {
    pub kind: ScanKind,
    pub class: ScanClass,
    /// Physical address of the object's first byte: the buffer header, the block's UsedBytes
    /// (after its POOL_HEADER), the `_WMI_LOGGER_CONTEXT` (after its POOL_HEADER).
    pub pa: u64,
    /// Its virtual address when the first byte is mapped.
    pub va: Option<u64>,
    /// Orphans of a session: the [`ScanGroup::group`] they belong to.
    pub group: Option<u32>,
    pub buffer: Option<ScanBuffer>,
    pub pending: Option<ScanPending>,
    pub context: Option<ScanContext>,
}

/// Where an orphaned session's evidence comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupOrigin {
    /// A session planted by [`EtwSpec::with_stopped_sessions`]: its slot holds the free value.
    Stopped,
    /// A [`crate::SlotSpec::FreeTagged`] context (slot value = context | 1).
    FreeTagged,
    /// The buffers of a [`crate::SlotSpec::WrongId`] context (the context is a stale copy).
    StaleContext,
}

impl GroupOrigin {
    /// "stopped", "free_tagged" or "stale_context" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            GroupOrigin::Stopped => "stopped",
            GroupOrigin::FreeTagged => "free_tagged",
            GroupOrigin::StaleContext => "stale_context",
        }
    }
}

/// An orphaned session: the objects of one former logger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanGroup {
    /// 0, 1, ...: stopped sessions first (in planting order), then free-tagged and stale
    /// contexts in slot order.
    pub group: u32,
    pub origin: GroupOrigin,
    /// The LoggerId in its buffers and context.
    pub logger_id: u32,
    /// The slot it held (stopped: now holding the free value).
    pub slot: u32,
    pub name: String,
    pub buffer_size: u32,
    pub clock_type: u32,
    /// Physical address of its surviving `_WMI_LOGGER_CONTEXT`; None: the context's pool block
    /// was reused (see [`ForgedScan::lost`]).
    pub context_pa: Option<u64>,
    /// SequenceNumbers of its buffers a scan finds (complete or partial), ascending.
    pub buffers: Vec<u64>,
    /// SequenceNumbers of its buffers whose header page was reused (not findable).
    pub lost_buffers: Vec<u64>,
    /// Every record timestamp of its buffers lies in this window (session clock units);
    /// None for header-only buffers.
    pub timestamp_window: Option<(u64, u64)>,
    /// The same window as FILETIMEs (UTC): the session ran from `utc_window.0` (when its
    /// clock read `timestamp_window.0`, exactly) to no later than `utc_window.1`. None with
    /// `timestamp_window`.
    pub utc_window: Option<(u64, u64)>,
}

/// An object that existed but whose first page now holds unrelated data: a scan cannot find
/// it (listed so that tests can check it is not reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanLost {
    pub kind: ScanKind,
    pub group: u32,
    pub logger_id: u32,
    /// Buffers: their SequenceNumber.
    pub sequence_number: Option<u64>,
    pub va: u64,
    /// Where its first byte was (now unrelated data).
    pub pa: u64,
    pub why: String,
}

/// Bytes that look like an ETW object but must not be reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanDecoy {
    /// "random_page", "records_without_header", "broken_chain", "offsets_past_buffer_size",
    /// "valid_below_header", "fake_logger_context", "fake_pending_block", "pending_decoy"
    /// (the pointed-to decoys of `with_pending_ccswap` / variation), "logger_array".
    pub what: String,
    /// Physical address of the decoy's first byte (a header, block or page start).
    pub pa: u64,
    pub va: Option<u64>,
    /// Which rule of the module documentation it breaks.
    pub why: String,
}

/// What a scan of all physical memory must find ([`crate::Forged::scan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgedScan {
    /// Every buffer, 'CCsw' block and logger context in the dump, ordered by kind then
    /// physical address.
    pub objects: Vec<ScanObject>,
    pub groups: Vec<ScanGroup>,
    pub lost: Vec<ScanLost>,
    pub decoys: Vec<ScanDecoy>,
    /// The value a freed slot of the logger array holds for this build (§1.2: 1).
    pub free_slot_value: u64,
}

impl ForgedScan {
    /// The objects of `kind` and `class`.
    pub fn of(&self, kind: ScanKind, class: ScanClass) -> impl Iterator<Item = &ScanObject> {
        self.objects
            .iter()
            .filter(move |o| o.kind == kind && o.class == class)
    }

    /// Counts per (kind, class) name, e.g. ("buffer", "orphaned") -> 9.
    pub fn counts(&self) -> BTreeMap<(&'static str, &'static str), usize> {
        let mut m = BTreeMap::new();
        for o in &self.objects {
            *m.entry((o.kind.name(), o.class.name())).or_insert(0) += 1;
        }
        m
    }
}

impl EtwSpec {
    /// This spec with `n` stopped sessions besides the live ones: each a `_WMI_LOGGER_CONTEXT`
    /// in freed 'EtwL' pool whose slot holds the free value (§1.2), with its own LoggerId (the
    /// freed slot), BufferSize, ClockType and name, and 5 flushed buffers (valid headers and
    /// record chains, SequenceNumbers in order, timestamps in its clock) that no live list
    /// reaches. Some pages were reused: a buffer whose header page holds unrelated data (lost),
    /// a buffer with a later page overwritten (partial), a buffer whose later pages are no
    /// longer mapped and whose first pages are physically contiguous (partial); the others are
    /// complete, their pages mapped at consecutive VAs but physically scattered. The second
    /// session's context block was reused too. See [`crate::Forged::scan`].
    pub fn with_stopped_sessions(mut self, n: u32) -> EtwSpec {
        self.scan
            .get_or_insert_with(ScanSpec::default)
            .stopped_sessions = n;
        self
    }

    /// This spec with the other scan objects: two stale copies of live buffers (one in
    /// unmapped, physically contiguous pages, one in freed pool still mapped), two orphaned
    /// 'CCsw' blocks with valid batches (freed pool, and an unmapped page) and the decoys of
    /// the module documentation. Stale copies need a live buffer with data.
    pub fn with_scan_extras(mut self) -> EtwSpec {
        self.scan.get_or_insert_with(ScanSpec::default).extras = true;
        self
    }

    /// This spec with a last stopped session reusing the first one's slot ([`ScanSpec::reused_slot`]).
    pub fn with_reused_slot(mut self) -> EtwSpec {
        self.scan.get_or_insert_with(ScanSpec::default).reused_slot = true;
        self
    }
}

impl Config {
    /// `f` applied to this config's ETW spec (`what` names the caller in the panic when there
    /// is none: set one first, e.g. with [`Config::with_variation`] or [`Config::with_etw`]).
    fn map_etw(mut self, what: &str, f: impl FnOnce(EtwSpec) -> EtwSpec) -> Config {
        let spec = self.etw.take().unwrap_or_else(|| {
            panic!("{what} needs Config::etw (with_etw / with_variation first)")
        });
        self.etw = Some(f(spec));
        self
    }

    /// [`EtwSpec::with_stopped_sessions`] on this config's ETW spec.
    pub fn with_stopped_sessions(self, n: u32) -> Config {
        self.map_etw("with_stopped_sessions", |s| s.with_stopped_sessions(n))
    }

    /// [`EtwSpec::with_reused_slot`] on this config's ETW spec.
    pub fn with_reused_slot(self) -> Config {
        self.map_etw("with_reused_slot", EtwSpec::with_reused_slot)
    }

    /// [`EtwSpec::with_scan_extras`] on this config's ETW spec.
    pub fn with_scan_extras(self) -> Config {
        self.map_etw("with_scan_extras", EtwSpec::with_scan_extras)
    }
}

/// The scan scenarios (name, config) for the fixtures below `root` that exist: x64-19041
/// with the standard sessions, their buffers and pending blocks (`scan-x64-19041`), the same
/// as a bitmap dump, x64-19041 in variation mode (seeds 1 and 8) and x86-14393 (PAE) in
/// variation mode (seeds 1 and 5); each with 3 stopped sessions and the extras. (Seeds with
/// live multi-page buffers and live pending blocks.)
pub fn scan_scenarios(root: &std::path::Path) -> Vec<(String, Config)> {
    let mut v = Vec::new();
    let x64 = root.join("x64-19041");
    if x64.join("symbols.json").exists() {
        let cfg = Config::from_fixture(&x64);
        let b = cfg.build;
        let spec = EtwSpec::standard(b)
            .with_buffers(b)
            .with_pending_ccswap()
            .with_stopped_sessions(3)
            .with_scan_extras()
            .with_reused_slot();
        let std = cfg.clone().with_etw(spec);
        v.push(("scan-x64-19041".to_string(), std.clone()));
        let mut bm = std;
        bm.layout = crate::Layout::Bitmap {
            sig: crate::BitmapSig::Sdmp,
            dump_type: 5,
        };
        v.push(("scan-x64-19041-bitmap".to_string(), bm));
        for seed in [1, 8] {
            v.push((
                format!("scan-x64-19041-var{seed}"),
                cfg.clone()
                    .with_variation(seed)
                    .with_stopped_sessions(3)
                    .with_scan_extras(),
            ));
        }
    }
    let x86 = root.join("x86-14393");
    if x86.join("symbols.json").exists() {
        for seed in [1, 5] {
            v.push((format!("scan-x86-14393-var{seed}"), {
                let c = Config::from_fixture(&x86)
                    .with_variation(seed)
                    .with_stopped_sessions(3)
                    .with_scan_extras();
                if seed == 5 {
                    c.with_reused_slot()
                } else {
                    c
                }
            }));
        }
    }
    v
}

// ------------------------------------------------------------------------------------------
// Phase 1 -> phase 2

/// How a placed context is reached (what `loggers` placed for each session-like slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlacedKind {
    Live,
    WrongId,
    FreeTagged,
}

/// A context `loggers` placed, with its buffers (for the live and odd objects' expectations).
#[derive(Clone, Debug)]
pub(crate) struct PlacedContext {
    pub slot: u32,
    pub logger_id: u32,
    pub kind: PlacedKind,
    pub ctx: u64,
    pub name: Option<String>,
    pub buffer_size: u32,
    pub clock_type: Option<u32>,
    /// Buffer VAs in GlobalList order.
    pub bufs: Vec<u64>,
    /// Buffers with data (empty: 0x48-byte headers only).
    pub details: Vec<ExpectedBuffer>,
}

/// One page of a [`PhysItem`] and what became of it.
#[derive(Clone, Debug)]
pub(crate) enum PageFate {
    /// The page holds these (the object's) bytes; mapped when the item has a VA.
    Data(Vec<u8>),
    /// The object's page, reused: it now holds these unrelated bytes (still mapped).
    Overwritten(Vec<u8>),
    /// No longer mapped (PTE zero); its physical page now holds these unrelated bytes.
    Unmapped(Vec<u8>),
}

impl PageFate {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            PageFate::Data(b) | PageFate::Overwritten(b) | PageFate::Unmapped(b) => b,
        }
    }
}

/// Pages to put into physical memory: at consecutive VAs (`va`) or unmapped (`va` None),
/// physically scattered (no two consecutive pages adjacent) or contiguous.
#[derive(Clone, Debug)]
pub(crate) struct PhysItem {
    pub va: Option<u64>,
    pub pages: Vec<PageFate>,
    pub contiguous: bool,
}

/// Where an expected object's first byte is: a VA the ETW pages map, or an offset in an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    Va(u64),
    Item(usize, u64),
}

/// An object before its physical addresses are known.
#[derive(Clone, Debug)]
pub(crate) struct PendingObject {
    pub loc: Loc,
    pub kind: ScanKind,
    pub class: ScanClass,
    pub group: Option<u32>,
    pub buffer: Option<ScanBuffer>,
    pub pending: Option<ScanPending>,
    pub context: Option<ScanContext>,
    /// Stale copies: where the original's header is.
    pub copy_of: Option<Loc>,
}

/// A group before its context's physical address is known.
#[derive(Clone, Debug)]
pub(crate) struct PendingGroup {
    pub group: ScanGroup,
    pub context: Option<Loc>,
}

/// Phase 1's output ([`super::EtwBuild::scan`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ScanBuild {
    pub items: Vec<PhysItem>,
    pub objects: Vec<PendingObject>,
    pub groups: Vec<PendingGroup>,
    /// (kind, group, logger id, sequence number, where it was, why).
    pub lost: Vec<(ScanKind, u32, u32, Option<u64>, Loc, String)>,
    /// (what, where, why).
    pub decoys: Vec<(String, Loc, String)>,
    pub free_slot_value: u64,
}

pub(super) use stopped::plan;
