//! The buffers queued for real-time consumers, in the consumer's own address space
//! ([`EtwSpec::with_realtime_buffers`], x64 fixtures with [`crate::Config::with_processes`]).
//!
//! Every x64 `_ETW_REALTIME_CONSUMER` of the fixtures (7601 .. 22000) has `UserBufferCount`
//! (ULONG *) and `UserBufferListHead` (SINGLE_LIST_ENTRY *), user-mode pointers into the
//! consuming process, and `ReservedBufferSpaceBitMap` (RTL_BITMAP), `ReservedBufferSpace`
//! (UCHAR *, user mode), `ReservedBufferSpaceSize`, `UserPagesAllocated`, `UserPagesReused`
//! (every offset from the fixture's types.h). What the list holds is **not known**
//! (etw-internals.md §3.4: "semantics [U]"); etw-scan (anchors.md §1) follows
//! `UserBufferListHead` in the consumer's address space, takes the node it points at as the
//! first one, follows `SINGLE_LIST_ENTRY.Next` for up to `*UserBufferCount` nodes and reads an
//! 8-byte buffer pointer at node + 0x28. The forge therefore VARIES the unknowns per consumer
//! ([`RealtimeSpec`], drawn from a seed or given), so that a reader cannot depend on one reading:
//!
//! | unknown | variants ([`RealtimeSpec`] field) |
//! |---|---|
//! | node shape (`node`) | [`NodeShape::Embedded`]: the list links the buffer copies through `_WMI_BUFFER_HEADER.SlistEntry` (node = copy + offsetof(SlistEntry), 0x20); [`NodeShape::Descriptor`]: 0x40-byte descriptors whose pointer at `ptr_offset` (0x28 = etw-scan's reading, 0x10, 0x18, 0x30) is the copy |
//! | head shape (`head`) | [`HeadShape::SeparateHead`]: `UserBufferListHead` -> a bare SINGLE_LIST_ENTRY whose Next is the first node; [`HeadShape::FirstNode`]: `UserBufferListHead` = the first node |
//! | `*UserBufferCount` (`count`) | the true node count, or a stale other value ([`CountShape::Stale`], e.g. n + 2 or 0) |
//! | where the copies are (`reserved`) | one per slot of the ReservedBufferSpace region (bitmap bits set for the used slots, free slots zero or a decoy copy of another LoggerId), or ReservedBufferSpace NULL / size 0 and the copies elsewhere in user memory |
//! | list order (`newest_first`) | SequenceNumbers ascending or descending along the list |
//! | user VA (`shared_va`) | distinct per consumer, or the same VA for every consumer of the session (in their different processes: a reader must key user memory by (address space, VA)) |
//! | damage (`damage`, opt-in) | a copy mapped by a valid PTE to a page not in the dump; the last node's Next looping back to an earlier node; a descriptor whose buffer pointer is NULL |
//! | duplicate (`duplicate`) | one copy byte-identical to a flushed kernel buffer of the session still on its lists |
//!
//! ## What is written, per consumer
//!
//! User memory of the consuming process, at `B` = [`REALTIME_USER_BASE`] + slot * 4 GiB (+ the
//! consumer's index * 256 MiB unless `shared_va`), mapped by user PTEs (P|RW|US|A|D, NX) of the
//! process's own PML4:
//!
//! * `B` (one page, the "control page"): `*UserBufferCount` (ULONG) at `B + 0x10`; with
//!   `SeparateHead` the head SINGLE_LIST_ENTRY at `B + 0x40` (Next = first node or 0);
//!   with `Descriptor` the 0x40-byte descriptors at `B + 0x100 + k * 0x40`, `k` a drawn
//!   permutation of 0..60 (list order is not address order): Next at +0, the copy's VA at
//!   `ptr_offset` (0 for a NULL-buffer node), and in every other quadword a small integer (+0x08
//!   BufferSize, +0x10 the node index | 0x10000, +0x18 the SequenceNumber & 0xFFFF, +0x20 the
//!   processor, +0x28 3, +0x30 the LoggerId, +0x38 0x48; never a user address of the forge, all
//!   below 0x100000).
//! * `reserved`: the region `B + 0x10_0000`, `slots * BufferSize` bytes, every page mapped
//!   (zero but for the copies); copy `i` in a drawn slot at `slot * BufferSize`; a decoy (a
//!   flushed buffer of LoggerId = the session's + 0x20, SequenceNumber 0x40 + its slot) in one
//!   free slot when `decoy`. Kernel side: `ReservedBufferSpace` = the region,
//!   `ReservedBufferSpaceSize` = its size, `ReservedBufferSpaceBitMap` = {SizeOfBitMap = slots,
//!   Buffer = a kernel pool ULONG array (tag 'EtwU', in a pool page mapped after every other
//!   page of the dump) with bit `s` set for every slot holding a queued copy}.
//! * no `reserved`: `ReservedBufferSpace` NULL, size 0, bitmap {0, NULL}; copy `i` at
//!   `B + 0x100_0000 + i * (BufferSize + 0x1000)` (an unmapped page after each).
//! * each copy: a real buffer of the session: `_WMI_BUFFER_HEADER` with BufferSize and
//!   ClientContext.LoggerId of the session, ProcessorIndex 0x800 | a drawn CPU, SequenceNumber
//!   continuing after the session's kernel buffers (the `index`-th consumer's from max + 1 +
//!   16 * index, so that no two copies of a session share one; in list order, or reversed with
//!   `newest_first`), State 3 (EtwBufferStateFlush, the state of the forge's flushed kernel
//!   buffers: a delivered buffer is a full or closed one), CurrentOffset = SavedOffset = Offset
//!   = the valid length, TimeStamp as the forge's flushed kernel buffers get it (the first
//!   record's time plus 9 999 999 clock units, at most 1% of the uptime before the dump),
//!   EVENT_HEADER64 records (written by `wmi_buffer.rs`), the rest zero or 0xFF; +0x20
//!   (SlistEntry) = the next node (`Embedded`) or 0; GlobalEntry 0. A duplicate is the kernel
//!   buffer's bytes unchanged (kernel pointers included).
//!
//! Kernel side, in the `_ETW_REALTIME_CONSUMER`: `UserBufferCount` = `B + 0x10`,
//! `UserBufferListHead` = `B + 0x40` (`SeparateHead`) or the first node (`FirstNode`; NULL
//! without nodes), `UserPagesAllocated` = the user pages mapped for copies (the whole reserved
//! region, or every copy's pages), `UserPagesReused` = queued / 2 (made-up plausible values).
//!
//! Each consuming process with user buffers gets its own PML4 (built after every kernel
//! mapping by `dump/user_space.rs`, shared with the user images of `kernel/user_images.rs`:
//! entries 256..511 copied from the kernel PML4, the self-reference entry pointing at the
//! process PML4 itself, KUSER_SHARED_DATA at 0x7FFE0000 as in the kernel's tables), and its
//! EPROCESS `KPROCESS.DirectoryTableBase` holds that PML4's physical address. Processes
//! without user buffers keep their made-up DirectoryTableBase. Without the option nothing is
//! drawn or allocated: those dumps are byte-identical to the ones forged before it existed.
//!
//! [`crate::ExpectedConsumer::realtime`] ([`ExpectedRealtime`]) says what a reader must find.

use std::collections::BTreeMap;

use super::placement::Timeline;
use super::wmi_buffer::{
    align8, lay_out, BufferHeader, RecSpec, BUFFER_TYPE_GENERIC, STATE_FLUSH,
    WMI_BUFFER_HEADER_SIZE,
};
use super::*;
use crate::dump::paging::Leaf;
use crate::dump::user_space::{SpaceSpec, UserPage, UserSpace, USER_TOP};
use crate::util::put_u32;

/// First user VA of the consumers' areas (slot `s`: + `s` * 4 GiB).
pub const REALTIME_USER_BASE: u64 = 0x0000_01F0_0000_0000;
const SLOT_STRIDE: u64 = 0x1_0000_0000;
const CONSUMER_STRIDE: u64 = 0x1000_0000;
/// `*UserBufferCount` at B + 0x10, the separate head at B + 0x40, descriptors from B + 0x100.
pub const REALTIME_COUNT_OFFSET: u64 = 0x10;
pub const REALTIME_HEAD_OFFSET: u64 = 0x40;
pub const REALTIME_DESCRIPTOR_AREA: u64 = 0x100;
pub const REALTIME_DESCRIPTOR_SIZE: u64 = 0x40;
const DESCRIPTOR_POSITIONS: u64 = (PAGE_SIZE - REALTIME_DESCRIPTOR_AREA) / REALTIME_DESCRIPTOR_SIZE;
/// The reserved region at B + 0x10_0000; copies outside it from B + 0x100_0000.
pub const REALTIME_RESERVED_OFFSET: u64 = 0x10_0000;
pub const REALTIME_ELSEWHERE_OFFSET: u64 = 0x100_0000;
/// A decoy copy's LoggerId = the session's + this.
pub const REALTIME_DECOY_ID_DELTA: u32 = 0x20;
/// The descriptor pointer offsets drawn (0x28: etw-scan's reading).
pub const DESCRIPTOR_PTR_OFFSETS: [u64; 4] = [0x28, 0x10, 0x18, 0x30];
/// At most this many nodes per consumer.
pub const REALTIME_MAX_QUEUED: u32 = 16;
const RC: &str = "_ETW_REALTIME_CONSUMER";

// ------------------------------------------------------------------------------------------
// Specs

/// How the nodes of a consumer's queued-buffer list are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeShape {
    /// The buffer copies themselves, linked through `_WMI_BUFFER_HEADER.SlistEntry`:
    /// node = copy + offsetof(SlistEntry) (0x20), copy = node - that offset.
    Embedded,
    /// A separate 0x40-byte descriptor per node: Next at +0, the copy's VA at `ptr_offset`
    /// (a multiple of 8 in 0x08..=0x38), small integers elsewhere.
    Descriptor { ptr_offset: u64 },
}

/// What `UserBufferListHead` points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeadShape {
    /// A bare SINGLE_LIST_ENTRY (in the control page) whose Next is the first node.
    SeparateHead,
    /// The first node itself (NULL without nodes).
    FirstNode,
}

/// What `*UserBufferCount` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CountShape {
    /// The number of nodes on the list.
    True,
    /// A stale value other than the number of nodes.
    Stale(u32),
}

/// The ReservedBufferSpace region: `slots` slots of BufferSize bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReservedSpec {
    pub slots: u32,
    /// A stale buffer copy of another LoggerId in one free slot.
    pub decoy: bool,
}

/// Damaged lists (opt-in); indices are node indices in list order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RealtimeDamage {
    /// This node's copy is mapped by valid PTEs to pages not in the dump (`Embedded`: must
    /// be the last node, whose Next is then unreadable too).
    pub unreadable: Option<u32>,
    /// The last node's Next points back to this earlier node (< queued - 1).
    pub cycle_to: Option<u32>,
    /// This descriptor's buffer pointer is NULL (`Descriptor` only; no copy for it).
    pub null_buffer: Option<u32>,
}

/// One consumer's queued buffers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RealtimeSpec {
    /// Nodes on the list (0..=[`REALTIME_MAX_QUEUED`]).
    pub queued: u32,
    pub node: NodeShape,
    pub head: HeadShape,
    pub count: CountShape,
    /// None: ReservedBufferSpace NULL / size 0, the copies elsewhere.
    pub reserved: Option<ReservedSpec>,
    pub damage: RealtimeDamage,
    /// This node's copy is byte-identical to a flushed kernel buffer of the session (where
    /// the session has buffers with data; `Embedded`: the last node, and the kernel buffer's
    /// +0x20 must be 0, else no duplicate is placed).
    pub duplicate: Option<u32>,
    /// SequenceNumbers descend along the list.
    pub newest_first: bool,
    /// The session's slot VA, the same for every consumer of the session (in different
    /// processes).
    pub shared_va: bool,
    /// Seed of the content (records, processors, descriptor positions, slots).
    pub seed: u64,
}

impl RealtimeSpec {
    /// `queued` descriptors read the etw-scan way (0x28), the head at the first node, the true
    /// count, a reserved region with one spare slot, no damage.
    pub fn new(queued: u32) -> RealtimeSpec {
        RealtimeSpec {
            queued,
            node: NodeShape::Descriptor { ptr_offset: 0x28 },
            head: HeadShape::FirstNode,
            count: CountShape::True,
            reserved: Some(ReservedSpec {
                slots: queued + 1,
                decoy: false,
            }),
            damage: RealtimeDamage::default(),
            duplicate: None,
            newest_first: false,
            shared_va: false,
            seed: u64::from(queued),
        }
    }

    /// A spec drawn from `seed` for the `index`-th consumer of `slot`. `shared`: the session's
    /// consumers share their VA; `duplicate_possible`: the session has flushed buffers with
    /// data; `damage`: one damage per consumer (unreadable copy, cycle or NULL buffer).
    pub fn draw(
        seed: u64,
        slot: u32,
        index: usize,
        shared: bool,
        duplicate_possible: bool,
        damage: bool,
    ) -> RealtimeSpec {
        let mut r = Rng::new(
            0x5254_4255_4631_0000
                ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (u64::from(slot) << 40)
                ^ index as u64,
        );
        let mut pick = |n: u64| r.next_u64() % n;
        let queued = if damage { 2 + pick(3) } else { 1 + pick(4) } as u32;
        let node = if pick(2) == 0 {
            NodeShape::Embedded
        } else {
            NodeShape::Descriptor {
                ptr_offset: DESCRIPTOR_PTR_OFFSETS[pick(4) as usize],
            }
        };
        let head = if pick(2) == 0 {
            HeadShape::SeparateHead
        } else {
            HeadShape::FirstNode
        };
        let count = match pick(4) {
            0 => CountShape::Stale(queued + 2),
            1 => CountShape::Stale(0),
            _ => CountShape::True,
        };
        let reserved = (pick(4) != 0).then(|| {
            let extra = pick(3) as u32;
            ReservedSpec {
                slots: queued + extra,
                decoy: extra > 0 && pick(2) == 0,
            }
        });
        let newest_first = pick(2) == 0;
        let mut d = RealtimeDamage::default();
        let q = u64::from(queued);
        let last = queued - 1;
        if damage {
            match (pick(3), node) {
                (0, NodeShape::Descriptor { .. }) => d.unreadable = Some(pick(q) as u32),
                (1, _) => d.cycle_to = Some(pick(q - 1) as u32),
                (2, NodeShape::Descriptor { .. }) => d.null_buffer = Some(pick(q) as u32),
                _ => d.unreadable = Some(last),
            }
        }
        let duplicate = (duplicate_possible && !damage && pick(3) == 0).then(|| match node {
            NodeShape::Embedded => last,
            NodeShape::Descriptor { .. } => pick(q) as u32,
        });
        RealtimeSpec {
            queued,
            node,
            head,
            count,
            reserved,
            damage: d,
            duplicate,
            newest_first,
            shared_va: shared,
            seed: r.next_u64(),
        }
    }

    /// Panics on a spec the forge cannot place.
    pub(crate) fn check(&self, buffer_size: u32) {
        let (n, d) = (self.queued, self.damage);
        assert!(n <= REALTIME_MAX_QUEUED, "realtime: at most 16 nodes");
        assert!(
            u64::from(buffer_size).is_multiple_of(PAGE_SIZE),
            "realtime: BufferSize {buffer_size:#x} is not a multiple of a page"
        );
        if let NodeShape::Descriptor { ptr_offset } = self.node {
            assert!(
                ptr_offset % 8 == 0 && (8..REALTIME_DESCRIPTOR_SIZE).contains(&ptr_offset),
                "realtime: descriptor pointer offset {ptr_offset:#x}"
            );
        }
        if let CountShape::Stale(v) = self.count {
            assert_ne!(v, n, "realtime: a stale count differs from the node count");
        }
        let copies = n - u32::from(d.null_buffer.is_some());
        if let Some(r) = self.reserved {
            assert!(
                r.slots >= copies + u32::from(r.decoy) && r.slots <= 32,
                "realtime: {} slots for {copies} copies (decoy {})",
                r.slots,
                r.decoy
            );
        }
        for i in [d.unreadable, d.null_buffer, self.duplicate]
            .into_iter()
            .flatten()
        {
            assert!(i < n, "realtime: node index {i} >= {n}");
        }
        if let Some(j) = d.cycle_to {
            assert!(
                n >= 2 && j < n - 1,
                "realtime: a cycle needs an earlier node"
            );
        }
        let distinct = [d.unreadable, d.null_buffer, self.duplicate];
        for (a, x) in distinct.iter().enumerate() {
            for y in &distinct[a + 1..] {
                assert!(x.is_none() || x != y, "realtime: one damage per node");
            }
        }
        if self.node == NodeShape::Embedded {
            assert!(
                d.null_buffer.is_none(),
                "realtime: an embedded node has a buffer"
            );
            let tail = [d.unreadable, self.duplicate, d.cycle_to.map(|_| n - 1)];
            assert!(
                tail.iter().flatten().count() <= 1,
                "realtime: embedded lists take one of unreadable / duplicate / cycle (all at \
                 the last node)"
            );
            for i in [d.unreadable, self.duplicate].into_iter().flatten() {
                assert_eq!(i, n - 1, "realtime: embedded: must be the last node");
            }
        }
    }
}

/// [`EtwSpec::realtime`]: the consumers that get queued buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RealtimeBuffers {
    /// Every consumer not listed in `consumers` gets a spec drawn from this seed
    /// ([`RealtimeSpec::draw`]); None: only the listed ones.
    pub seed: Option<u64>,
    /// Drawn specs carry one damage each.
    pub damage: bool,
    /// (slot, PID) -> the spec of that consumer.
    pub consumers: BTreeMap<(u32, u64), RealtimeSpec>,
}

impl EtwSpec {
    /// This spec with buffers queued for every real-time consumer ([`SessionSpec::consumers`];
    /// x64 fixtures with [`crate::Config::with_processes`]), each consumer's
    /// [`RealtimeSpec`] drawn from `seed`, in the consumer process's own address space (see
    /// the module documentation of `etw/realtime.rs` and [`ExpectedRealtime`]). Not with scan
    /// scenarios (their ground truth would miss the user copies).
    pub fn with_realtime_buffers(mut self, seed: u64) -> EtwSpec {
        self.realtime.get_or_insert_with(Default::default).seed = Some(seed);
        self
    }

    /// The drawn realtime specs carry one damage each (an unreadable copy, a looping list or a
    /// NULL buffer pointer).
    pub fn with_realtime_damage(mut self) -> EtwSpec {
        self.realtime.get_or_insert_with(Default::default).damage = true;
        self
    }

    /// The consumer of process `pid` on the session in `slot` gets exactly `spec`.
    pub fn with_realtime_consumer(mut self, slot: u32, pid: u64, spec: RealtimeSpec) -> EtwSpec {
        self.realtime
            .get_or_insert_with(Default::default)
            .consumers
            .insert((slot, pid), spec);
        self
    }
}

/// Whether `cfg`'s fixture can carry realtime buffers: x64, the forged processes' layouts and
/// `_ETW_REALTIME_CONSUMER.UserBufferListHead` (every x64 fixture).
pub fn realtime_supported(cfg: &Config) -> bool {
    let Some(fx) = &cfg.fixture else {
        return false;
    };
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    crate::etw::variation::processes_supported(cfg, &t)
        && t.has_field(RC, "UserBufferListHead")
        && t.has_field(RC, "UserBufferCount")
        && t.has_field("_KPROCESS", "DirectoryTableBase")
}

/// A realtime config of the fixture in `dir`: [`EtwSpec::standard`] (with
/// [`EtwSpec::with_buffers`] on 1607+, so that duplicates of kernel buffers are possible),
/// the processes, consumers svchost.exe (0x44C) and explorer.exe (0x12E4) on EventLog-System
/// (slot 3) and UBPM (slot 6), and [`EtwSpec::with_realtime_buffers`]`(seed)` (with
/// [`EtwSpec::with_realtime_damage`] when `damage`). Panics where not
/// [`realtime_supported`].
pub fn realtime_config(dir: &std::path::Path, seed: u64, damage: bool) -> Config {
    let c = Config::from_fixture(dir);
    assert!(
        realtime_supported(&c),
        "fixture {}: no realtime buffers",
        dir.display()
    );
    let mut etw = EtwSpec::standard(c.build);
    if c.build >= 14393 {
        etw = etw.with_buffers(c.build);
    }
    for slot in [3u32, 6] {
        if let Some(SlotSpec::Session(s)) = etw.slots.get_mut(&slot) {
            s.consumers = vec![0x44C, 0x12E4];
        }
    }
    etw = etw.with_realtime_buffers(seed);
    if damage {
        etw = etw.with_realtime_damage();
    }
    c.with_etw(etw).with_processes()
}

/// Per fixture below `root` that supports them: `fixture-<name>-etw-realtime-s<seed>` for
/// seeds 0..3 and `fixture-<name>-etw-realtime-damaged` (seed 0 with damage).
pub fn realtime_scenarios(root: &std::path::Path) -> Vec<(String, Config)> {
    let mut out = Vec::new();
    for d in crate::fixture_dirs(root) {
        let c = Config::from_fixture(&d);
        if !realtime_supported(&c) {
            continue;
        }
        let name = c
            .fixture
            .as_ref()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        for seed in 0..3 {
            out.push((
                format!("fixture-{name}-etw-realtime-s{seed}"),
                realtime_config(&d, seed, false),
            ));
        }
        out.push((
            format!("fixture-{name}-etw-realtime-damaged"),
            realtime_config(&d, 0, true),
        ));
    }
    out
}

impl Config {
    /// [`Config::sample_etw`] with buffers queued for its three real-time consumers
    /// (`forge --sample-realtime`):
    ///
    /// * EventLog-System (slot 3) by svchost.exe: 3 descriptors read the etw-scan way
    ///   (pointer at +0x28, head = first node, true count), in a 5-slot reserved region with a
    ///   decoy, the second copy a duplicate of a flushed kernel buffer;
    /// * UBPM (slot 6) by svchost.exe: 2 embedded copies (linked through SlistEntry) behind a
    ///   separate head, count 0, no reserved region, newest first;
    /// * UBPM by explorer.exe: 3 descriptors (pointer at +0x18), separate head, count 5, a
    ///   4-slot reserved region; at the same VA as svchost.exe's UBPM consumer.
    pub fn sample_realtime() -> Config {
        let mut c = Config::sample_etw();
        let el = RealtimeSpec {
            reserved: Some(ReservedSpec {
                slots: 5,
                decoy: true,
            }),
            duplicate: Some(1),
            seed: 0x5A31,
            ..RealtimeSpec::new(3)
        };
        let ubpm_svc = RealtimeSpec {
            node: NodeShape::Embedded,
            head: HeadShape::SeparateHead,
            count: CountShape::Stale(0),
            reserved: None,
            newest_first: true,
            shared_va: true,
            seed: 0x5A32,
            ..RealtimeSpec::new(2)
        };
        let ubpm_exp = RealtimeSpec {
            node: NodeShape::Descriptor { ptr_offset: 0x18 },
            head: HeadShape::SeparateHead,
            count: CountShape::Stale(5),
            reserved: Some(ReservedSpec {
                slots: 4,
                decoy: false,
            }),
            shared_va: true,
            seed: 0x5A33,
            ..RealtimeSpec::new(3)
        };
        c.etw = c.etw.take().map(|e| {
            e.with_realtime_consumer(3, 0x44C, el)
                .with_realtime_consumer(6, 0x44C, ubpm_svc)
                .with_realtime_consumer(6, 0x12E4, ubpm_exp)
        });
        c
    }
}

// ------------------------------------------------------------------------------------------
// Expectations

/// What a reader must find for one consumer's queued buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedRealtime {
    /// The spec placed (drawn or given).
    pub spec: RealtimeSpec,
    pub node: NodeShape,
    pub head: HeadShape,
    /// The consumer process's PML4 (physical address, page aligned) = its
    /// `KPROCESS.DirectoryTableBase`.
    pub dtb: u64,
    /// `B`: the consumer's user area (control page).
    pub user_base: u64,
    /// The value of `UserBufferListHead` (a user VA; 0 for `FirstNode` without nodes).
    pub user_buffer_list_head: u64,
    /// `UserBufferCount` (a user VA) and the ULONG written there.
    pub user_buffer_count_va: u64,
    pub user_buffer_count: u32,
    /// Nodes on the list (the true count).
    pub queued: u32,
    /// `ReservedBufferSpace` and `ReservedBufferSpaceSize` (None: NULL / 0).
    pub reserved_space: Option<(u64, u32)>,
    /// `ReservedBufferSpaceBitMap` {Buffer (kernel VA), SizeOfBitMap} (None: {NULL, 0}).
    pub reserved_bitmap: Option<(u64, u32)>,
    /// Slots whose bit is set (ascending).
    pub used_slots: Vec<u32>,
    pub user_pages_allocated: u32,
    pub user_pages_reused: u32,
    /// The nodes in list order (each once), with their buffers.
    pub user_buffers: Vec<ExpectedUserBuffer>,
    /// The node the last node's Next points back to (a cycle); None: the list ends with
    /// Next = 0 (or at an unreadable node).
    pub list_cycle_to: Option<u64>,
    /// Decoy copies in free slots (another LoggerId).
    pub decoys: Vec<ExpectedUserDecoy>,
}

/// One node of a consumer's list and its buffer copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedUserBuffer {
    /// The node (the SINGLE_LIST_ENTRY a Next points at).
    pub node_va: u64,
    /// The copy's user VA; 0: the descriptor's buffer pointer is NULL.
    pub va: u64,
    /// Its slot in the reserved region.
    pub slot: Option<u32>,
    /// false: NULL, or mapped to pages not in the dump (the values below are what the forge
    /// meant to place; `header` empty and `fnv1a64` 0).
    pub readable: bool,
    /// Byte-identical to the kernel buffer at this VA (on the session's GlobalList).
    pub duplicate_of: Option<u64>,
    pub logger_id: u32,
    pub sequence_number: u64,
    pub processor: u32,
    pub buffer_size: u32,
    pub state: u32,
    pub timestamp: u64,
    /// CurrentOffset = SavedOffset = Offset (etw-internals.md §2.6).
    pub valid_bytes: u32,
    /// Complete records.
    pub record_count: u32,
    /// The first 0x48 bytes (the `_WMI_BUFFER_HEADER`).
    pub header: Vec<u8>,
    /// [`fnv1a64`] of the copy's BufferSize bytes.
    pub fnv1a64: u64,
}

/// A stale copy in a free slot of the reserved region that a reader must not take as the
/// session's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedUserDecoy {
    pub va: u64,
    pub slot: u32,
    pub logger_id: u32,
    pub sequence_number: u64,
}

/// FNV-1a (64-bit) of `bytes` ([`ExpectedUserBuffer::fnv1a64`]).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

// ------------------------------------------------------------------------------------------
// Placing (during the logger state's build)

/// A session whose consumers get queued buffers.
pub(super) struct RtSession<'a> {
    pub(super) cfg: &'a Config,
    pub(super) lay: &'a Layouts<'a>,
    pub(super) slot: u32,
    pub(super) logger_id: u32,
    pub(super) session: &'a SessionSpec,
    /// The session's flushed kernel buffers with data (duplicate candidates).
    pub(super) kernel: Vec<KernelCopy>,
    /// The first SequenceNumber after the kernel buffers'.
    pub(super) next_seq: u64,
    pub(super) n_consumers: usize,
    pub(super) pids_distinct: bool,
}

/// A flushed kernel buffer of the session: its VA, expectation and bytes.
pub(super) struct KernelCopy {
    pub(super) va: u64,
    pub(super) detail: ExpectedBuffer,
    pub(super) bytes: Vec<u8>,
}

/// A process's user pages: VA -> content (None: mapped, not in the dump).
#[derive(Default)]
struct UserMem {
    pages: BTreeMap<u64, Option<Vec<u8>>>,
}

impl UserMem {
    fn pages_of(va: u64, len: u64) -> impl Iterator<Item = u64> {
        let first = va & !(PAGE_SIZE - 1);
        (first..va + len).step_by(PAGE_SIZE as usize)
    }

    /// Map `va..va+len` (zero pages where nothing is mapped yet).
    fn map_zero(&mut self, va: u64, len: u64) {
        assert!(va + len <= USER_TOP);
        for p in Self::pages_of(va, len) {
            self.pages
                .entry(p)
                .or_insert_with(|| Some(vec![0u8; PAGE_SIZE as usize]));
        }
    }

    fn write(&mut self, va: u64, bytes: &[u8]) {
        self.map_zero(va, bytes.len() as u64);
        let mut done = 0usize;
        while done < bytes.len() {
            let cur = va + done as u64;
            let page = cur & !(PAGE_SIZE - 1);
            let off = (cur - page) as usize;
            let n = (PAGE_SIZE as usize - off).min(bytes.len() - done);
            let p = self.pages.get_mut(&page).expect("mapped").as_mut();
            let p = p.unwrap_or_else(|| panic!("realtime: write to the unstored page {page:#x}"));
            p[off..off + n].copy_from_slice(&bytes[done..done + n]);
            done += n;
        }
    }

    /// Map `va..va+len` to pages that are not in the dump.
    fn unstored(&mut self, va: u64, len: u64) {
        for p in Self::pages_of(va, len) {
            self.pages.insert(p, None);
        }
    }
}

struct ProcSpace {
    eprocess: u64,
    mem: UserMem,
    /// User areas `B` of its consumers.
    bases: Vec<u64>,
}

/// The realtime state being built ([`super::loggers::LoggerBuilder`]).
pub(super) struct RealtimeState {
    spec: RealtimeBuffers,
    /// Kernel pool for the bitmaps, mapped after every other page.
    pool: Pool,
    /// PID -> user memory.
    spaces: BTreeMap<u64, ProcSpace>,
}

/// Where one consumer's nodes and copies go.
struct Plan {
    base: u64,
    bs: u64,
    node_vas: Vec<u64>,
    /// 0: NULL buffer.
    copy_vas: Vec<u64>,
    slots: Vec<Option<u32>>,
    decoy_slot: Option<u32>,
    /// SequenceNumber per node (0 for NULL).
    seqs: Vec<u64>,
    cpus: Vec<u32>,
    /// (node index, kernel buffer index).
    dup: Option<(usize, usize)>,
    /// Next of each node.
    next: Vec<u64>,
    reserved_va: u64,
}

impl RealtimeState {
    pub(super) fn new(spec: &RealtimeBuffers, x64: bool, pool_va: u64) -> RealtimeState {
        assert!(x64, "realtime buffers: x64 fixtures only");
        RealtimeState {
            spec: spec.clone(),
            pool: Pool::new(true, pool_va, 0x1_0000),
            spaces: BTreeMap::new(),
        }
    }

    /// The spec of consumer `index` (process `pid`) of `s`, if it gets queued buffers.
    fn spec_for(&self, s: &RtSession, index: usize, pid: u64) -> Option<RealtimeSpec> {
        if let Some(x) = self.spec.consumers.get(&(s.slot, pid)) {
            return Some(x.clone());
        }
        let seed = self.spec.seed?;
        let shared = s.n_consumers >= 2
            && s.pids_distinct
            && Rng::new(0x5348_4152_4544_0000 ^ seed ^ (u64::from(s.slot) << 24))
                .next_u64()
                .is_multiple_of(2);
        Some(RealtimeSpec::draw(
            seed,
            s.slot,
            index,
            shared,
            !s.kernel.is_empty(),
            self.spec.damage,
        ))
    }

    /// Queued buffers for the `index`-th consumer (process `pid`, EPROCESS `eprocess`) of
    /// `s`: user memory, the bitmap, the consumer's fields in `c` (its bytes).
    pub(super) fn place(
        &mut self,
        s: &RtSession,
        index: usize,
        pid: u64,
        eprocess: u64,
        c: &mut [u8],
    ) -> Option<ExpectedRealtime> {
        let spec = self.spec_for(s, index, pid)?;
        spec.check(s.session.buffer_size);
        let shared = spec.shared_va && s.pids_distinct;
        let base = REALTIME_USER_BASE
            + u64::from(s.slot) * SLOT_STRIDE
            + if shared {
                0
            } else {
                index as u64 * CONSUMER_STRIDE
            };
        assert!(
            s.slot < 0x200 && index < 16,
            "realtime: user area out of range"
        );
        let space = self.spaces.entry(pid).or_insert_with(|| ProcSpace {
            eprocess,
            mem: UserMem::default(),
            bases: Vec::new(),
        });
        assert!(
            !space.bases.contains(&base),
            "realtime: two consumers of process {pid:#x} at {base:#x}"
        );
        space.bases.push(base);
        let plan = Plan::new(&spec, s, base, index);
        let user_buffers = write_copies(&spec, s, &plan, &mut space.mem);
        let decoys = write_decoy(s, &plan, &mut space.mem);
        let (list_head, count) = write_list(&spec, s, &plan, &mut space.mem, &user_buffers);
        let used_slots: Vec<u32> = {
            let mut v: Vec<u32> = plan.slots.iter().flatten().copied().collect();
            v.sort_unstable();
            v
        };
        let lay = s.lay;
        let count_va = base + REALTIME_COUNT_OFFSET;
        lay.put(c, RC, "UserBufferCount", count_va);
        lay.put(c, RC, "UserBufferListHead", list_head);
        let (reserved_space, reserved_bitmap, pages) = match spec.reserved {
            Some(r) => {
                let size = u64::from(r.slots) * plan.bs;
                let bitmap = self.bitmap(lay, c, r.slots, &used_slots);
                lay.put_opt(c, RC, "ReservedBufferSpace", plan.reserved_va);
                lay.put_opt(c, RC, "ReservedBufferSpaceSize", size);
                (
                    Some((plan.reserved_va, size as u32)),
                    bitmap.map(|b| (b, r.slots)),
                    size / PAGE_SIZE,
                )
            }
            None => (None, None, copies_pages(&plan)),
        };
        lay.put_opt(c, RC, "UserPagesAllocated", pages);
        let reused = spec.queued / 2;
        lay.put_opt(c, RC, "UserPagesReused", reused.into());
        Some(ExpectedRealtime {
            node: spec.node,
            head: spec.head,
            dtb: 0,
            user_base: base,
            user_buffer_list_head: list_head,
            user_buffer_count_va: count_va,
            user_buffer_count: count,
            queued: spec.queued,
            reserved_space,
            reserved_bitmap,
            used_slots,
            user_pages_allocated: pages as u32,
            user_pages_reused: reused,
            user_buffers,
            list_cycle_to: spec.damage.cycle_to.map(|j| plan.node_vas[j as usize]),
            decoys,
            spec,
        })
    }

    /// The ULONG bitmap in kernel pool and `ReservedBufferSpaceBitMap` in `c`; its VA.
    fn bitmap(&mut self, lay: &Layouts, c: &mut [u8], slots: u32, used: &[u32]) -> Option<u64> {
        if !lay.t.has_field(RC, "ReservedBufferSpaceBitMap") {
            return None;
        }
        let words = slots.div_ceil(32).max(1) as usize;
        let va = self.pool.alloc(words * 4, b"EtwU");
        let bits = self.pool.slice_mut(va, words * 4);
        for &s in used {
            let w = (s / 32) as usize * 4;
            let v = u32::from_le_bytes(bits[w..w + 4].try_into().expect("4")) | 1 << (s % 32);
            put_u32(bits, w, v);
        }
        let at = lay.off(RC, "ReservedBufferSpaceBitMap") as usize;
        let size_off = at + lay.off("_RTL_BITMAP", "SizeOfBitMap") as usize;
        put_u32(c, size_off, slots);
        lay.put_ptr_at(c, at + lay.off("_RTL_BITMAP", "Buffer") as usize, va);
        Some(va)
    }

    /// The kernel pool pages and every process's user pages (`dtb_offset`: that of
    /// `KPROCESS.DirectoryTableBase` in the EPROCESS, Pcb at 0).
    pub(super) fn finish(self, dtb_offset: u64) -> RealtimeBuild {
        let kernel_pages = self.pool.into_pages();
        let spaces = self
            .spaces
            .into_iter()
            .map(|(pid, sp)| SpaceSpec {
                pid,
                dtb_field_va: sp.eprocess + dtb_offset,
                pages: sp
                    .mem
                    .pages
                    .into_iter()
                    .map(|(va, c)| {
                        let page = match c {
                            Some(c) => UserPage::Private(c),
                            None => UserPage::Unstored,
                        };
                        (va, page, Leaf::UserData)
                    })
                    .collect(),
            })
            .collect();
        RealtimeBuild {
            kernel_pages,
            spaces,
        }
    }
}

/// Pages of the copies outside a reserved region.
fn copies_pages(plan: &Plan) -> u64 {
    plan.copy_vas.iter().filter(|&&v| v != 0).count() as u64 * plan.bs / PAGE_SIZE
}

impl Plan {
    /// VAs, slots, SequenceNumbers, processors and the duplicate of the `index`-th consumer.
    fn new(spec: &RealtimeSpec, s: &RtSession, base: u64, index: usize) -> Plan {
        let n = spec.queued as usize;
        let bs = u64::from(s.session.buffer_size);
        let mut r = Rng::new(spec.seed ^ 0x504C_414E);
        let has_copy: Vec<bool> = (0..n)
            .map(|i| spec.damage.null_buffer != Some(i as u32))
            .collect();
        let reserved_va = base + REALTIME_RESERVED_OFFSET;
        let mut free: Vec<u32> = (0..spec.reserved.map_or(0, |x| x.slots)).collect();
        shuffle(&mut free, &mut r);
        let mut slots = vec![None; n];
        let mut copy_vas = vec![0u64; n];
        for i in 0..n {
            if !has_copy[i] {
                continue;
            }
            copy_vas[i] = match spec.reserved {
                Some(_) => {
                    let slot = free.pop().expect("checked: enough slots");
                    slots[i] = Some(slot);
                    reserved_va + u64::from(slot) * bs
                }
                None => base + REALTIME_ELSEWHERE_OFFSET + i as u64 * (bs + PAGE_SIZE),
            };
        }
        let decoy_slot = spec.reserved.filter(|x| x.decoy).and_then(|_| free.pop());
        let slist = s.lay.off(BUF, "SlistEntry");
        let node_vas: Vec<u64> = match spec.node {
            NodeShape::Embedded => copy_vas.iter().map(|v| v + slist).collect(),
            NodeShape::Descriptor { .. } => {
                let mut pos: Vec<u64> = (0..DESCRIPTOR_POSITIONS).collect();
                shuffle(&mut pos, &mut r);
                pos[..n]
                    .iter()
                    .map(|p| base + REALTIME_DESCRIPTOR_AREA + p * REALTIME_DESCRIPTOR_SIZE)
                    .collect()
            }
        };
        let dup = spec.duplicate.and_then(|i| {
            let ok: Vec<usize> = (0..s.kernel.len())
                .filter(|&k| {
                    spec.node != NodeShape::Embedded
                        || crate::util::get_u64(&s.kernel[k].bytes, slist as usize) == 0
                })
                .collect();
            (!ok.is_empty()).then(|| (i as usize, ok[(r.next_u64() % ok.len() as u64) as usize]))
        });
        let own: Vec<usize> = (0..n)
            .filter(|&i| has_copy[i] && dup.map(|d| d.0) != Some(i))
            .collect();
        let mut seqs = vec![0u64; n];
        for (j, &i) in own.iter().enumerate() {
            let k = if spec.newest_first {
                own.len() - 1 - j
            } else {
                j
            };
            seqs[i] = s.next_seq + index as u64 * u64::from(REALTIME_MAX_QUEUED) + k as u64;
        }
        if let Some((i, k)) = dup {
            seqs[i] = s.kernel[k].detail.sequence_number;
        }
        let cpus = (0..n)
            .map(|_| (r.next_u64() % u64::from(s.cfg.cpus)) as u32)
            .collect();
        let mut next: Vec<u64> = (0..n)
            .map(|i| node_vas.get(i + 1).copied().unwrap_or(0))
            .collect();
        if let (Some(j), Some(last)) = (spec.damage.cycle_to, next.last_mut()) {
            *last = node_vas[j as usize];
        }
        Plan {
            base,
            bs,
            node_vas,
            copy_vas,
            slots,
            decoy_slot,
            seqs,
            cpus,
            dup,
            next,
            reserved_va,
        }
    }
}

/// Fisher-Yates with the forge's RNG.
fn shuffle<T>(v: &mut [T], r: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = (r.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// EVENT_HEADER64 records filling 30..90% of a `bs`-byte buffer.
fn copy_records(bs: u32, r: &mut Rng) -> Vec<RecSpec> {
    let room = bs as usize - WMI_BUFFER_HEADER_SIZE - 0x200;
    let target = room * (30 + (r.next_u64() % 60) as usize) / 100;
    let mut used = 0;
    let mut out = Vec::new();
    while used < target {
        let rec = RecSpec::EventHeader {
            x64: true,
            ext: if r.next_u64().is_multiple_of(3) {
                vec![(1, 16)]
            } else {
                Vec::new()
            },
            data: 0x21 + (r.next_u64() % 0x60) as usize,
        };
        let n = align8(rec.size());
        if used + n > room {
            break;
        }
        used += n;
        out.push(rec);
    }
    out
}

/// A laid-out flushed buffer of the session (or of `logger_id`) and its expectation.
struct Copy {
    bytes: Vec<u8>,
    timestamp: u64,
    valid: u32,
    count: u32,
}

/// The flushed buffer `spec` of `logger_id` on `tl`, with +0x20 = `next`.
fn make_copy(
    s: &RtSession,
    spec: &BufferSpec,
    logger_id: u32,
    tl: &Timeline,
    next: u64,
    seed: u64,
) -> Copy {
    let bs = s.session.buffer_size;
    let ts0 = tl.first_record(spec.sequence_number);
    let lo = lay_out(spec, bs, (ts0, tl.step_max()), &mut Rng::new(seed));
    let mut bytes = lo.bytes;
    let timestamp = tl.flushed_stamp(ts0);
    BufferHeader {
        buffer_size: bs,
        saved_offset: lo.saved_offset,
        current_offset: lo.current_offset,
        timestamp,
        sequence_number: spec.sequence_number,
        next,
        processor_index: BufferHeader::processor_index(spec.processor),
        logger_id: logger_id as u16,
        state: spec.state,
        offset: lo.offset,
        buffer_type: BUFFER_TYPE_GENERIC,
        ..BufferHeader::default()
    }
    .write(&mut bytes, s.lay);
    Copy {
        bytes,
        timestamp,
        valid: lo.valid,
        count: lo.count,
    }
}

/// The copies (and the reserved region's zero pages); the nodes' expectations in list order
/// (`header` / `fnv1a64` filled for readable copies).
fn write_copies(
    spec: &RealtimeSpec,
    s: &RtSession,
    plan: &Plan,
    mem: &mut UserMem,
) -> Vec<ExpectedUserBuffer> {
    let n = spec.queued as usize;
    let mut r = Rng::new(spec.seed ^ 0x434F_5059);
    if let Some(x) = spec.reserved {
        mem.map_zero(plan.reserved_va, u64::from(x.slots) * plan.bs);
    }
    let specs: Vec<BufferSpec> = (0..n)
        .map(|i| {
            let mut b = BufferSpec::new(
                STATE_FLUSH,
                plan.cpus[i],
                plan.seqs[i],
                copy_records(s.session.buffer_size, &mut r),
            );
            b.fill_ff = r.next_u64().is_multiple_of(2);
            b
        })
        .collect();
    let tl = Timeline::new(s.cfg, s.session.clock_type, &specs);
    let slist = s.lay.off(BUF, "SlistEntry") + s.lay.off("_SINGLE_LIST_ENTRY", "Next");
    let embedded = spec.node == NodeShape::Embedded;
    let mut out = Vec::with_capacity(n);
    for (i, bspec) in specs.iter().enumerate() {
        let va = plan.copy_vas[i];
        let mut e = ExpectedUserBuffer {
            node_va: plan.node_vas[i],
            va,
            slot: plan.slots[i],
            readable: va != 0 && spec.damage.unreadable != Some(i as u32),
            duplicate_of: None,
            logger_id: s.logger_id,
            sequence_number: plan.seqs[i],
            processor: plan.cpus[i],
            buffer_size: s.session.buffer_size,
            state: STATE_FLUSH,
            timestamp: 0,
            valid_bytes: 0,
            record_count: 0,
            header: Vec::new(),
            fnv1a64: 0,
        };
        if va == 0 {
            out.push(e);
            continue;
        }
        let next = if embedded { plan.next[i] } else { 0 };
        let bytes = match plan.dup {
            Some((d, k)) if d == i => {
                let kc = &s.kernel[k];
                e.duplicate_of = Some(kc.va);
                e.processor = kc.detail.processor;
                e.state = kc.detail.state;
                e.valid_bytes = kc.detail.valid_bytes;
                e.record_count = kc.detail.record_count;
                let ts = s.lay.off(BUF, "TimeStamp") as usize;
                e.timestamp = crate::util::get_u64(&kc.bytes, ts);
                kc.bytes.clone()
            }
            _ => {
                let seed = spec.seed ^ 0xC0_0000 ^ i as u64;
                let c = make_copy(s, bspec, s.logger_id, &tl, next, seed);
                e.timestamp = c.timestamp;
                e.valid_bytes = c.valid;
                e.record_count = c.count;
                c.bytes
            }
        };
        if embedded {
            let got = crate::util::get_u64(&bytes, slist as usize);
            assert_eq!(got, next, "realtime: an embedded node's Next");
        }
        if e.readable {
            mem.write(va, &bytes);
            e.header = bytes[..WMI_BUFFER_HEADER_SIZE].to_vec();
            e.fnv1a64 = fnv1a64(&bytes);
        } else {
            mem.unstored(va, plan.bs);
        }
        out.push(e);
    }
    out
}

/// The decoy in a free slot (a flushed buffer of another LoggerId).
fn write_decoy(s: &RtSession, plan: &Plan, mem: &mut UserMem) -> Vec<ExpectedUserDecoy> {
    let Some(slot) = plan.decoy_slot else {
        return Vec::new();
    };
    let mut r = Rng::new(plan.base ^ 0xDEC0);
    let seq = 0x40 + u64::from(slot);
    let id = s.logger_id + REALTIME_DECOY_ID_DELTA;
    let spec = BufferSpec::new(
        STATE_FLUSH,
        0,
        seq,
        copy_records(s.session.buffer_size, &mut r),
    );
    let tl = Timeline::new(s.cfg, s.session.clock_type, std::slice::from_ref(&spec));
    let va = plan.reserved_va + u64::from(slot) * plan.bs;
    let c = make_copy(s, &spec, id, &tl, 0, plan.base ^ 0xDEC1);
    mem.write(va, &c.bytes);
    vec![ExpectedUserDecoy {
        va,
        slot,
        logger_id: id,
        sequence_number: seq,
    }]
}

/// The control page: the count, the head, the descriptors; returns (UserBufferListHead,
/// *UserBufferCount).
fn write_list(
    spec: &RealtimeSpec,
    s: &RtSession,
    plan: &Plan,
    mem: &mut UserMem,
    bufs: &[ExpectedUserBuffer],
) -> (u64, u32) {
    let base = plan.base;
    mem.map_zero(base, PAGE_SIZE);
    let count = match spec.count {
        CountShape::True => spec.queued,
        CountShape::Stale(v) => v,
    };
    mem.write(base + REALTIME_COUNT_OFFSET, &count.to_le_bytes());
    let first = plan.node_vas.first().copied().unwrap_or(0);
    let next_off = s.lay.off("_SINGLE_LIST_ENTRY", "Next") as usize;
    let head = match spec.head {
        HeadShape::SeparateHead => {
            let h = base + REALTIME_HEAD_OFFSET;
            mem.write(h + next_off as u64, &first.to_le_bytes());
            h
        }
        HeadShape::FirstNode => first,
    };
    if let NodeShape::Descriptor { ptr_offset } = spec.node {
        for (i, b) in bufs.iter().enumerate() {
            let mut d = [0u8; REALTIME_DESCRIPTOR_SIZE as usize];
            let junk = [
                u64::from(s.session.buffer_size),
                i as u64 | 0x1_0000,
                plan.seqs[i] & 0xFFFF,
                u64::from(plan.cpus[i]),
                3,
                u64::from(s.logger_id),
                WMI_BUFFER_HEADER_SIZE as u64,
            ];
            for (k, v) in junk.iter().enumerate() {
                put_u64(&mut d, (k + 1) * 8, *v);
            }
            put_u64(&mut d, ptr_offset as usize, b.va);
            put_u64(&mut d, next_off, plan.next[i]);
            mem.write(plan.node_vas[i], &d);
        }
    }
    (head, count)
}

// ------------------------------------------------------------------------------------------
// Mapping (after every kernel mapping of the dump: `dump/user_space.rs`)

/// What `machine::build` maps for the realtime buffers.
pub(crate) struct RealtimeBuild {
    /// The bitmaps' kernel pool pages (mapped after every other page).
    pub(crate) kernel_pages: Vec<EtwPage>,
    /// Each consumer process's user pages (ascending PID; `Leaf::UserData`, `Private` or
    /// `Unstored`), for `user_space::build`.
    pub(crate) spaces: Vec<SpaceSpec>,
}

/// Every consumer's `dtb` and every process's `directory_table_base` from `spaces`.
pub(crate) fn fill_dtbs(
    etw: &mut ForgedEtw,
    procs: &mut [crate::ExpectedProcess],
    spaces: &[UserSpace],
) {
    crate::dump::user_space::fill_process_dtbs(procs, spaces);
    let dtb_of = |pid: u64| spaces.iter().find(|u| u.pid == pid).map(|u| u.dtb);
    for slot in &mut etw.slots {
        if let ExpectedSlot::Session(s) = slot {
            for c in &mut s.consumers {
                if let Some(r) = c.realtime.as_mut() {
                    r.dtb = dtb_of(c.pid).expect("a space per consumer process");
                }
            }
        }
    }
}
