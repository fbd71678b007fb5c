//! Duplicate switches (`Config::with_duplicate_switches`, after `with_variation`): the same
//! context switch recorded by two sessions, as a real kernel records it when both the NT
//! Kernel Logger (compact: 0x0525 batches, and the per-CPU pending 'CCsw' block of its clock
//! type) and the Circular Kernel Context Logger (0x0524 CSwitch events) trace context switches.
//!
//! From etw-internals.md only: §4.1 (compact batches go to the kernel sessions with
//! PERF_COMPACT_CSWITCH, kept per CPU per clock type; the other sessions get 0x0524 events),
//! §4.3 (a batch switch's old thread, time = FirstTimeStamp + deltas, new thread = the next
//! switch's old thread: unknown for a batch's last switch), §5.2 (the CSwitch payload: new and
//! old thread ids, priorities, wait reason, state, wait time) and §7 (each session stamps in
//! its own clock). The switch's instant is the compact record's (its uptime under the
//! forge's clock model); the CSwitch event carries the same instant in the event session's
//! clock (`ClockModel::raw_at`, rounded down), so the two raw values differ by the clocks'
//! resolutions only.
//!
//! Per CPU the event session's buffers hold, in time order: mirrors of about 60% of the
//! compact session's batch switches and of the pending blocks' switches whose new thread is
//! known (not a batch's or block's last switch), each with the original's old thread,
//! priority, state, wait reason and wait time; **lookalikes** (15%): the same old and new
//! thread 1 to 20 ms before or after an original (distinct switches a reader must keep
//! apart); and 0 to 7 independent events. Lookalikes and independent events are never
//! within 2 ms of an original with the same threads. The buffers (one current, sometimes a
//! flushed one before it) are the session's own (BufferSize, clock, per-CPU pointer); records
//! are thinned at random to fit.
//!
//! When the dump has no NT Kernel Logger or no CKCL among its switch sessions, nothing is
//! mirrored (`ForgedEtw::same_switch` is empty). When both exist, the NT Kernel Logger gets
//! compact cswitch and the CKCL 0x0524 events whatever the seed drew.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Config;
use crate::etw::ccswap::{self, Batch};
use crate::etw::variation::{
    batch_truth, cpu_buffer, cswitch_record, cx_slot_clock, draw_pending_block, draw_state,
    ExpectedSwitch, PendingDraw, SessionBuffers, SwitchDraw, SwitchSession, VarRng, Variation,
    CKCL, FILETIME_PER_SEC, NTKL,
};
use crate::etw::wmi_buffer::{RecSpec, HOOK_CSWITCH, WMI_BUFFER_HEADER_SIZE};
use crate::etw::{max_wait_reason, EtwSpec, SlotSpec};
use crate::kernel::types_h::TypesH;

const SALT_DUP: u64 = 0xD0B1_0000_0000_0005;

/// The largest CSwitch record (0x10 header + PEBS + 2 PMC counters + 0x18 payload), aligned.
const MAX_RECORD: usize = 0x40;

/// Two switches with the same threads closer than this (100 ns units: 2 ms) are only ever
/// forged as the same switch.
const CLEAR: u64 = 20_000;

/// Pending blocks drawn ahead, by (cpu, clock): (bytes, batch, StartTick).
pub(crate) type Predrawn = BTreeMap<(u32, u32), (Vec<u8>, Option<Batch>, u32)>;

/// Where a record is, before buffers have addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecKey {
    /// The `index`-th switch (batches: record << 16 | switch) of buffer `buf` of `slot`'s plan.
    Buffer { slot: u32, buf: usize, index: u32 },
    /// The `index`-th switch of the pending block of (cpu, clock).
    Pending { cpu: u32, clock: u32, index: u32 },
}

/// What the duplicate mode drew.
pub(crate) struct DupPlan {
    pub pending: Predrawn,
    compact_slot: Option<u32>,
    /// (event, original, the same switch (true) or a lookalike (false)).
    links: Vec<(RecKey, RecKey, bool)>,
}

impl Config {
    /// After [`Config::with_variation`]: the same context switches recorded by two sessions
    /// (module `duplicates`; `ForgedEtw::same_switch`, `ForgedEtw::lookalikes`). Where the
    /// seed drew both the NT Kernel Logger and the CKCL, the former gets compact cswitch and
    /// the latter 0x0524 events.
    pub fn with_duplicate_switches(mut self) -> Config {
        let etw = self
            .etw
            .as_mut()
            .expect("with_duplicate_switches: call with_variation first");
        let slots = etw.slots.clone();
        let v = etw
            .variation
            .as_deref_mut()
            .expect("with_duplicate_switches: call with_variation first");
        v.duplicates = true;
        let named = |want: &str| {
            v.switch_sessions
                .iter()
                .copied()
                .find(|s| matches!(slots.get(s), Some(SlotSpec::Session(x)) if x.name == want))
        };
        if let (Some(n), Some(c)) = (named(NTKL), named(CKCL)) {
            if !v.compact_cswitch.contains(&n) {
                v.compact_cswitch.push(n);
            }
            v.compact_cswitch.retain(|&s| s != c);
        }
        self
    }
}

impl DupPlan {
    /// Draws the pending blocks ahead (the CPUs' blocks of every compact clock, as
    /// `place_cpu_state` places them) when the fixture has KPRCB.EtwSupport.
    pub(crate) fn new(cfg: &Config, spec: &EtwSpec, v: &Variation, t: &TypesH) -> DupPlan {
        let compact_slot = v
            .switch_sessions
            .iter()
            .copied()
            .find(|s| v.compact_cswitch.contains(s));
        let mut pending = Predrawn::new();
        let fx = cfg.fixture.as_ref().expect("fixture");
        let has_blocks = fx.kprcb_size.is_some() && t.offset_of("_KPRCB", "EtwSupport").is_some();
        if compact_slot.is_some() && has_blocks {
            let clocks: BTreeSet<u32> = v
                .compact_cswitch
                .iter()
                .filter_map(|s| cx_slot_clock(cfg, s))
                .collect();
            debug_assert!(v.compact_cswitch.iter().all(|s| spec.slots.contains_key(s)));
            let mut rng = VarRng::new(v.seed ^ SALT_DUP ^ u64::from(cfg.cpus));
            let d = PendingDraw {
                mwr: max_wait_reason(cfg.build),
                tids: crate::etw::variation::tid_pool(),
                up: v.clock.up_time(),
                clock: &v.clock,
            };
            for cpu in 0..cfg.cpus {
                for &c in &clocks {
                    pending.insert((cpu, c), draw_pending_block(&mut rng, &d, c));
                }
            }
        }
        DupPlan {
            pending,
            compact_slot,
            links: Vec::new(),
        }
    }

    /// Whether `ss`'s buffers mirror the compact session's switches.
    pub(crate) fn mirrors(&self, ss: &SwitchSession) -> bool {
        !ss.compact && self.compact_slot.is_some_and(|s| s != ss.slot)
    }

    /// The compact session's switches on `cpu` whose new thread is known: its batches' (drawn
    /// before this session) and the pending blocks'.
    fn originals(
        &self,
        d: &SwitchDraw,
        cpu: u32,
        out: &SessionBuffers,
    ) -> Vec<(RecKey, ExpectedSwitch)> {
        let mut v: Vec<(RecKey, ExpectedSwitch)> = out
            .switches
            .iter()
            .filter(|(slot, _, e)| Some(*slot) == self.compact_slot && e.cpu == cpu)
            .map(|(slot, buf, e)| {
                let k = RecKey::Buffer {
                    slot: *slot,
                    buf: *buf,
                    index: e.index,
                };
                (k, e.clone())
            })
            .collect();
        for (&(pc, c), (_, batch, _)) in &self.pending {
            let Some(b) = batch.as_ref().filter(|_| pc == cpu) else {
                continue;
            };
            for e in batch_truth(b, "pending", cpu, None, c, d.clock, 0, None) {
                let k = RecKey::Pending {
                    cpu,
                    clock: c,
                    index: e.index,
                };
                v.push((k, e));
            }
        }
        v.retain(|(_, e)| e.new_tid.is_some());
        v
    }

    /// One CPU's buffers of the event session `ss`: mirrors, lookalikes and independent
    /// CSwitch events in time order (module documentation).
    pub(crate) fn draw_mirror_cpu_buffers(
        &mut self,
        rng: &mut VarRng,
        d: &SwitchDraw,
        ss: &SwitchSession,
        cpu: u32,
        out: &mut SessionBuffers,
    ) {
        let originals = self.originals(d, cpu, out);
        let mut planned = plan_events(rng, d, ss, &originals);
        let per_buffer = (ss.buffer_size as usize - WMI_BUFFER_HEADER_SIZE) / MAX_RECORD;
        let nbuf = if planned.len() >= 2 && rng.chance(50) {
            2
        } else {
            1
        };
        while planned.len() > nbuf * per_buffer {
            let i = rng.below(planned.len() as u64) as usize;
            planned.remove(i);
        }
        let split = if nbuf == 2 { planned.len() / 2 } else { 0 };
        let parts: Vec<&[Planned]> = if nbuf == 2 {
            vec![&planned[..split], &planned[split..]]
        } else {
            vec![&planned[..]]
        };
        for (b, part) in parts.iter().enumerate() {
            let current = b + 1 == parts.len();
            let idx = out.plan.len();
            let mut records = Vec::new();
            let mut last_raw = 0;
            for (i, p) in part.iter().enumerate() {
                let (bytes, truth) = event_record(rng, d, ss, cpu, p, i as u32);
                last_raw = truth.raw_timestamp;
                out.switches.push((ss.slot, idx, truth));
                records.push(RecSpec::Raw {
                    key: format!("0x{HOOK_CSWITCH:04x}"),
                    bytes,
                });
                if let Some((orig, same)) = p.link {
                    let ev = RecKey::Buffer {
                        slot: ss.slot,
                        buf: idx,
                        index: i as u32,
                    };
                    self.links.push((ev, orig, same));
                }
            }
            let bs = cpu_buffer(rng, d, cpu, out.seq, current, records, last_raw);
            out.seq += 1;
            out.plan.push(bs);
        }
    }

    /// The links as indices into the dump's `switches`: (same switch pairs, lookalike pairs),
    /// each [event, original].
    pub(crate) fn resolve(
        &self,
        switches: &[ExpectedSwitch],
        session_bufs: &BTreeMap<u32, Vec<u64>>,
    ) -> (Vec<[usize; 2]>, Vec<[usize; 2]>) {
        let find = |k: &RecKey| -> usize {
            switches
                .iter()
                .position(|s| match *k {
                    RecKey::Buffer { slot, buf, index } => {
                        s.source != "pending"
                            && s.logger_id == Some(slot)
                            && s.container_va == session_bufs[&slot][buf]
                            && s.index == index
                    }
                    RecKey::Pending { cpu, clock, index } => {
                        s.source == "pending"
                            && s.cpu == cpu
                            && s.clock_type == clock
                            && s.index == index
                    }
                })
                .unwrap_or_else(|| panic!("duplicates: {k:?} was not placed"))
        };
        let (mut same, mut alike) = (Vec::new(), Vec::new());
        for (ev, orig, is_same) in &self.links {
            let pair = [find(ev), find(orig)];
            if *is_same {
                same.push(pair);
            } else {
                alike.push(pair);
            }
        }
        (same, alike)
    }
}

/// A CSwitch event to write: its instant (uptime, 100 ns), its fields, and its link.
struct Planned {
    up: u64,
    old: u32,
    new: u32,
    prio: u8,
    state: u8,
    wait_reason: u8,
    wait: u32,
    link: Option<(RecKey, bool)>,
}

/// The events of one CPU in time order: mirrors, lookalikes, independent events.
fn plan_events(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    originals: &[(RecKey, ExpectedSwitch)],
) -> Vec<Planned> {
    let lo = ss.start_up + FILETIME_PER_SEC;
    let end = d.up;
    let instant = |e: &ExpectedSwitch| d.clock.uptime_of(e.clock_type, e.raw_timestamp);
    // No original with these threads within CLEAR of `t`.
    let clear = |t: u64, old: u32, new: u32| {
        originals.iter().all(|(_, e)| {
            e.old_tid != old || e.new_tid != Some(new) || instant(e).abs_diff(t) >= CLEAR
        })
    };
    let mut planned = Vec::new();
    for (k, e) in originals {
        let u = instant(e);
        if u <= lo || u >= end {
            continue;
        }
        let new = e.new_tid.expect("originals have a new thread");
        if rng.chance(60) {
            planned.push(Planned {
                up: u,
                old: e.old_tid,
                new,
                prio: e.old_priority,
                state: e.old_state,
                wait_reason: e.old_wait_reason,
                wait: e.new_thread_wait_time,
                link: Some((*k, true)),
            });
        }
        if rng.chance(15) {
            let off = rng.range(10_000, 200_000);
            let t = if u + off < end { u + off } else { u - off };
            if t > lo && clear(t, e.old_tid, new) {
                let (state, wait_reason) = draw_state(rng, d.mwr);
                planned.push(Planned {
                    up: t,
                    old: e.old_tid,
                    new,
                    prio: rng.range(0, 31) as u8,
                    state,
                    wait_reason,
                    wait: rng.range(0, 500) as u32,
                    link: Some((*k, false)),
                });
            }
        }
    }
    if end > lo + 2 {
        for _ in 0..rng.range(0, 7) {
            let t = rng.range(lo + 1, end - 1);
            let old = if rng.chance(20) { 0 } else { rng.pick(&d.tids) };
            let new = if rng.chance(20) { 0 } else { rng.pick(&d.tids) };
            let (state, wait_reason) = draw_state(rng, d.mwr);
            if clear(t, old, new) {
                planned.push(Planned {
                    up: t,
                    old,
                    new,
                    prio: rng.range(0, 31) as u8,
                    state,
                    wait_reason,
                    wait: rng.range(0, 500) as u32,
                    link: None,
                });
            }
        }
    }
    planned.sort_by_key(|p| p.up);
    planned
}

/// A 0x0524 record for `p` in `ss`'s clock, the `index`-th of its buffer, and its truth.
fn event_record(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    p: &Planned,
    index: u32,
) -> (Vec<u8>, ExpectedSwitch) {
    let raw = d.clock.raw_at(ss.clock_type, p.up);
    let cs = ccswap::CSwitch {
        new_tid: p.new,
        old_tid: p.old,
        new_priority: rng.range(0, 31) as i8,
        old_priority: p.prio as i8,
        previous_cstate: 0,
        spare_byte: 0,
        old_wait_reason: p.wait_reason,
        old_wait_mode_or_flags: rng.below(2) as u8,
        old_state: p.state,
        old_ideal_processor: cpu as u8,
        new_thread_wait_time: p.wait,
        old_remaining_quantum: rng.range(0, 0x10_0000) as i32,
    };
    cswitch_record(rng, d, ss, cpu, raw, index, &cs)
}
