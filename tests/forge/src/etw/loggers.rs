//! The logger state of a fixture kernel: the logger-context array where the kernel keeps it
//! (global, inline in the silo state, or behind `EtwpLoggerContext`), the `_WMI_LOGGER_CONTEXT`s
//! with their strings and buffers, the per-CPU current-buffer routes, the silo state, and what
//! a reader must find in every slot (etw-internals.md §1-§3, §7).

use std::collections::{BTreeMap, HashMap};

use super::placement::{
    BufArea, BufferPlacement, CtxLinks, LayoutCache, Timeline, ETW_SUPPORT_BLOCK_SIZE,
    SILO_TRACING_BLOCK_SIZE,
};
use super::*;
use crate::etw::wmi_buffer::{BufferHeader, STATE_FLUSH};

/// Place the ETW state of `spec`: image variables are written into `img`, pool pages are
/// returned for `machine::build` to map. `rng` supplies the garbage page.
pub(crate) fn build(
    cfg: &Config,
    spec: &EtwSpec,
    img: &mut KernelImage,
    prcbs: &[u64],
    procs: &[crate::ExpectedProcess],
    rng: &mut Rng,
) -> EtwBuild {
    let fx = cfg
        .fixture
        .as_ref()
        .expect("Config::etw needs a fixture kernel (Config::from_fixture)");
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    let ptr = cfg.arch.ptr_size();
    assert_eq!(
        t.pointer_size, ptr as u64,
        "fixture {}: types.h pointer size",
        fx.name
    );
    let route = route_of(&t, fx).unwrap_or_else(|e| panic!("{e}"));
    // Variation mode: draw the parts that need the config (CPUs, route); see variation.rs.
    let materialized = spec
        .variation
        .as_ref()
        .map(|_| crate::etw::variation::materialize(cfg, spec, route, &t));
    let spec = materialized.as_ref().map_or(spec, |m| &m.spec);
    let mut b = LoggerBuilder::new(cfg, spec, &t, route, img.base, prcbs, rng);
    b.eprocess = procs.iter().map(|p| (p.pid, p.eprocess_va)).collect();
    for (&slot, content) in &spec.slots {
        let (value, exp) = b.place_slot(slot, content);
        b.slot_values[slot as usize] = value;
        b.expected[slot as usize] = exp;
    }
    let arr = b.write_array(img);
    // Variation mode places per-CPU buffers in its own EtwSupport blocks where they hang off
    // KPRCB.EtwSupport: 1607's inline route and the later-Win11 block (ProcessorBlocks NULL);
    // one writer of KPRCB.EtwSupport per dump.
    let var_per_cpu = b.var.is_some() && (route != EtwRoute::Pointer || b.late_win11());
    let mut es_blocks = Vec::new();
    let processor_blocks = if !b.per_cpu.is_empty() && !var_per_cpu {
        b.place_per_cpu(&mut es_blocks)
    } else {
        None
    };

    // Pending compact context-switch blocks (etw-internals.md §4).
    let (pending, pending_decoys) = if spec.pending_ccswap {
        place_pending(
            &PendingCtx {
                cfg,
                t: &t,
                route,
                prcbs,
            },
            &mut b.pool,
            &mut es_blocks,
            &mut b.kprcb_writes,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    // Variation mode: KPRCB.MHz, EtwCPUSpeedInMHz, EtwSupport blocks, pending blocks.
    let var_out = b.var.map(|v| {
        crate::etw::variation::place_cpu_state(
            &mut crate::etw::variation::CpuCtx {
                cfg,
                t: &t,
                route,
                prcbs,
                pool: &mut b.pool,
                img,
                kprcb_writes: &mut b.kprcb_writes,
                per_cpu: if var_per_cpu {
                    b.per_cpu.clone()
                } else {
                    Vec::new()
                },
                predrawn: materialized
                    .as_ref()
                    .and_then(|m| m.dup.as_ref())
                    .map(|d| &d.pending),
            },
            v,
        )
    });
    let (pending, pending_decoys) = match &var_out {
        Some(o) => (o.pending.clone(), o.decoys.clone()),
        None => (pending, pending_decoys),
    };
    b.write_silo_state(img, &arr, processor_blocks);
    let debugger_data_array_ptr_va = b.debugger_data_and_probes(img);

    // Scan scenarios: stopped sessions, stale copies, orphaned blocks, decoys (opt-in).
    let scan = spec
        .scan
        .is_some()
        .then(|| super::scan::plan(&mut b, &pending, &pending_decoys));
    // Providers (opt-in), placed after every other pool object; then the tampering (opt-in),
    // whose new objects go to pages mapped last.
    let mut prov = spec
        .providers
        .as_ref()
        .map(|p| super::providers::place(&mut b, img, p));
    let (findings, late_pages) = match &spec.tampering {
        Some(t) => super::tamper::apply(&mut b, img, t, prov.as_mut()),
        None => (Vec::new(), Vec::new()),
    };
    let mut switches = Vec::new();
    if let Some(m) = &materialized {
        switches = crate::etw::variation::locate_buffer_switches(m, &b.session_bufs);
    }
    if let Some(o) = &var_out {
        switches.extend(o.switches.iter().cloned());
    }
    let (same_switch, lookalikes) = match materialized.as_ref().and_then(|m| m.dup.as_ref()) {
        Some(d) => d.resolve(&switches, &b.session_bufs),
        None => (Vec::new(), Vec::new()),
    };
    let expected = ForgedEtw {
        route,
        array_va: b.array_va,
        capacity: b.capacity,
        silo_state_va: b.silo_va,
        host_silo_globals_va: if b.silo_va.is_some() {
            b.globals_va
        } else {
            None
        },
        debugger_data_array_ptr_va,
        slots: std::mem::take(&mut b.expected),
        pending,
        pending_decoys,
        switches,
        clock_model: var_out.as_ref().map(|o| o.clock_model.clone()),
        etw_support: var_out.as_ref().and_then(|o| o.etw_support.clone()),
        seed: b.var.map(|v| v.seed),
        guid_table: prov.as_ref().map(|p| p.table.clone()),
        reg_handles: prov.as_ref().map(|p| p.handles.clone()).unwrap_or_default(),
        providers: prov.map(|p| p.providers).unwrap_or_default(),
        findings,
        same_switch,
        lookalikes,
    };
    let probes = std::mem::take(&mut b.probes);
    let kprcb_writes = std::mem::take(&mut b.kprcb_writes);
    let realtime = b.realtime.take().map(|r| {
        let pcb = t.offset_of("_EPROCESS", "Pcb").unwrap_or(0);
        let dtb = t
            .offset_of("_KPROCESS", "DirectoryTableBase")
            .expect("realtime buffers: _KPROCESS.DirectoryTableBase");
        r.finish(pcb + dtb)
    });
    EtwBuild {
        pages: b.pages(),
        expected,
        probes,
        kprcb_writes,
        unstored_image_pages: var_out.map(|o| o.unstored_image_pages).unwrap_or_default(),
        scan,
        late_pages,
        realtime,
    }
}

/// A live session's slot, LoggerId, buffers and consumer PIDs (for [`rt_session`]).
struct RtFacts<'f> {
    slot: u32,
    logger_id: u32,
    sb: &'f SessionBuffers,
    pids: &'f [u64],
}

/// The session facts the realtime buffers of its consumers (`pids`) need: its flushed
/// kernel buffers with data (their bytes from the buffer pages) and the first
/// SequenceNumber after its kernel buffers'.
fn rt_session<'s>(
    cfg: &'s Config,
    lay: &'s Layouts<'s>,
    pages: &[EtwPage],
    s: &'s SessionSpec,
    f: &RtFacts,
) -> super::realtime::RtSession<'s> {
    let (sb, pids) = (f.sb, f.pids);
    let bs = s.buffer_size as usize;
    let kernel = sb
        .bufs
        .iter()
        .zip(&sb.details)
        .filter(|(_, d)| sb.with_data && d.state == STATE_FLUSH && !d.compressed)
        .map(|(&va, d)| super::realtime::KernelCopy {
            va,
            detail: d.clone(),
            bytes: page_bytes(pages, va, bs),
        })
        .collect();
    let next_seq = sb
        .details
        .iter()
        .map(|d| d.sequence_number + 1)
        .max()
        .unwrap_or(sb.bufs.len() as u64);
    let distinct: std::collections::BTreeSet<u64> = pids.iter().copied().collect();
    super::realtime::RtSession {
        cfg,
        lay,
        slot: f.slot,
        logger_id: f.logger_id,
        session: s,
        kernel,
        next_seq,
        n_consumers: pids.len(),
        pids_distinct: distinct.len() == pids.len(),
    }
}

/// `len` bytes at `va` from stored ETW pages (a buffer with data placed earlier).
fn page_bytes(pages: &[EtwPage], va: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for p in pages {
        if let EtwPage::Stored(pva, content) = p {
            let (lo, hi) = (*pva, *pva + PAGE_SIZE);
            if hi > va && lo < va + len as u64 {
                let from = lo.max(va);
                let to = hi.min(va + len as u64);
                out[(from - va) as usize..(to - va) as usize]
                    .copy_from_slice(&content[(from - lo) as usize..(to - lo) as usize]);
            }
        }
    }
    out
}

/// Everything the logger state is being placed with (the scan scenarios, [`super::scan`],
/// place their stopped sessions with it too).
pub(super) struct LoggerBuilder<'a> {
    pub(super) cfg: &'a Config,
    pub(super) fx: &'a crate::kernel::fixture::Fixture,
    pub(super) spec: &'a EtwSpec,
    pub(super) t: &'a TypesH,
    pub(super) lay: Layouts<'a>,
    pub(super) var: Option<&'a crate::etw::variation::Variation>,
    pub(super) route: EtwRoute,
    pub(super) x64: bool,
    pub(super) ptr: usize,
    pub(super) image_base: u64,
    prcbs: &'a [u64],
    pub(super) plan: EtwVaPlan,
    pub(super) pool: Pool,
    pub(super) capacity: u32,
    pub(super) silo_va: Option<u64>,
    pub(super) array_va: u64,
    globals_va: Option<u64>,
    /// A page of random bytes (the garbage slot's target).
    garbage: Vec<u8>,
    /// A page mapped but not in the dump (names written there are kept in this scratch copy
    /// only), and where its next allocation goes.
    missing: Vec<u8>,
    missing_cursor: usize,
    pub(super) slot_values: Vec<u64>,
    pub(super) expected: Vec<ExpectedSlot>,
    probes: Vec<(String, u64, usize)>,
    /// Buffers with data (EtwSpec::buffers): their own page-aligned area.
    pub(super) barea: BufArea,
    pub(super) buffer_pages: Vec<EtwPage>,
    pub(super) layout_cache: LayoutCache,
    /// The per-CPU current buffer values (cpu, LoggerId, EX_FAST_REF value).
    per_cpu: Vec<(u32, u32, u64)>,
    kprcb_writes: Vec<(u64, Vec<u8>)>,
    /// Slot -> buffer VAs (GlobalList order), for the variation's switch locations.
    session_bufs: BTreeMap<u32, Vec<u64>>,
    /// Every context placed for a slot, with its buffers (the scan scenarios' live objects).
    pub(super) placed: Vec<super::scan::PlacedContext>,
    /// PID -> EPROCESS of the forged processes (consumers point at them).
    pub(super) eprocess: HashMap<u64, u64>,
    /// The realtime consumers' queued buffers ([`EtwSpec::with_realtime_buffers`]).
    pub(super) realtime: Option<super::realtime::RealtimeState>,
}

/// A session's strings as placed.
pub(super) struct SessionStrings {
    pub(super) name16: Vec<u8>,
    pub(super) name_va: u64,
    pub(super) log16: Option<Vec<u8>>,
    pub(super) log_va: Option<u64>,
}

/// A session's buffers as placed.
pub(super) struct SessionBuffers {
    pub(super) bufs: Vec<u64>,
    pub(super) entries: Vec<u64>,
    pub(super) cycle_to: Option<u64>,
    pub(super) links: CtxLinks,
    pub(super) details: Vec<ExpectedBuffer>,
    pub(super) with_data: bool,
}

/// What the context holds besides the spec's values.
pub(super) struct ContextOut {
    clock: bool,
    max_event: u32,
    reference_time: Option<crate::etw::variation::RefClock>,
    flags: Option<u32>,
    cpu_clock: Option<super::cpu_clock::CpuClock>,
}

impl<'a> LoggerBuilder<'a> {
    /// The pool, the array and (inline / pointer routes) the silo state, the special pages,
    /// KPRCB.MHz.
    fn new(
        cfg: &'a Config,
        spec: &'a EtwSpec,
        t: &'a TypesH,
        route: EtwRoute,
        image_base: u64,
        prcbs: &'a [u64],
        rng: &mut Rng,
    ) -> Self {
        let fx = cfg.fixture.as_ref().expect("fixture");
        let x64 = cfg.arch.is_x64();
        let ptr = cfg.arch.ptr_size();
        let plan = EtwVaPlan::new(x64);
        let pool = Pool::new(x64, plan.base, plan.limit as usize);
        let mut b = LoggerBuilder {
            cfg,
            fx,
            spec,
            t,
            lay: Layouts { t, ptr },
            var: spec.variation.as_deref(),
            route,
            x64,
            ptr,
            image_base,
            prcbs,
            plan,
            pool,
            capacity: 0,
            silo_va: None,
            array_va: 0,
            globals_va: None,
            garbage: vec![0u8; PAGE_SIZE as usize],
            missing: vec![0u8; PAGE_SIZE as usize],
            missing_cursor: 0x40,
            slot_values: Vec::new(),
            expected: Vec::new(),
            probes: Vec::new(),
            barea: BufArea::new(x64),
            buffer_pages: Vec::new(),
            layout_cache: HashMap::new(),
            per_cpu: Vec::new(),
            kprcb_writes: Vec::new(),
            session_bufs: BTreeMap::new(),
            placed: Vec::new(),
            eprocess: HashMap::new(),
            realtime: None,
        };
        if let Some(r) = &spec.realtime {
            assert!(
                spec.scan.is_none(),
                "realtime buffers and scan scenarios do not mix (the scan's ground truth would \
                 miss the user-mode copies)"
            );
            b.realtime = Some(super::realtime::RealtimeState::new(r, x64, b.plan.realtime));
        }
        b.globals_va = b
            .va_of("PspHostSiloGlobals")
            .filter(|_| t.has_field(GLOBALS, "EtwSiloState"));
        b.capacity = b.checked_capacity();
        b.silo_va = match route {
            EtwRoute::Global => None,
            _ => Some(b.pool.alloc(b.lay.size(SILO), b"EtwS")),
        };
        b.array_va = match route {
            EtwRoute::Global => b.va_of("WmipLoggerContext").expect("checked"),
            EtwRoute::Inline => b.silo_va.expect("silo") + b.lay.off(SILO, "WmipLoggerContext"),
            EtwRoute::Pointer => b.pool.alloc(b.capacity as usize * ptr, b"EtwL"),
        };
        // Special pages: random bytes; a page mapped but not in the dump.
        rng.fill(&mut b.garbage);
        b.slot_values = vec![1u64; b.capacity as usize];
        b.expected = (0..b.capacity)
            .map(|_| ExpectedSlot::Free { value: 1 })
            .collect();
        b.standard_mhz();
        b
    }

    pub(super) fn va_of(&self, name: &str) -> Option<u64> {
        self.fx
            .symbol(name)
            .map(|rva| self.image_base + u64::from(rva))
    }

    /// The array's number of slots, checked against the route and the spec.
    fn checked_capacity(&self) -> u32 {
        let (t, fx, spec, ptr) = (self.t, self.fx, self.spec, self.ptr);
        let capacity = match self.route {
            EtwRoute::Pointer => spec.max_loggers,
            EtwRoute::Inline => t
                .member(SILO, "WmipLoggerContext")
                .and_then(|m| m.count)
                .expect("WmipLoggerContext[N]") as u32,
            EtwRoute::Global => {
                (fx.storage_len("WmipLoggerContext").unwrap_or(0) as usize / ptr).min(64) as u32
            }
        };
        if self.route == EtwRoute::Pointer {
            assert!(
                (32..=256).contains(&spec.max_loggers),
                "MaxLoggers {} outside 32..=256",
                spec.max_loggers
            );
        } else {
            assert_eq!(
                spec.max_loggers,
                64,
                "fixture {}: MaxLoggers exists only in 1709+ layouts ({} route has 64 slots)",
                fx.name,
                self.route.name()
            );
            assert_eq!(capacity, 64, "fixture {}: array of {capacity}", fx.name);
        }
        if let Some((&last, _)) = spec.slots.iter().next_back() {
            assert!(last < capacity, "slot {last} >= capacity {capacity}");
        }
        capacity
    }

    /// The symbol-less route (`EtwpDebuggerData + 0x10` -> the array) and the array's probes;
    /// returns the address of that pointer.
    fn debugger_data_and_probes(&mut self, img: &mut KernelImage) -> u64 {
        write_var(
            img,
            self.fx,
            "EtwpDebuggerData",
            0x10,
            &ptr_bytes(self.ptr, self.array_va),
        );
        self.probes.insert(
            0,
            (
                "etw_logger_array".to_string(),
                self.array_va,
                self.capacity as usize * self.ptr,
            ),
        );
        self.probes.push((
            "etw_unmapped_slot_target".to_string(),
            self.plan.unmapped,
            0x10,
        ));
        self.va_of("EtwpDebuggerData").expect("required symbol") + 0x10
    }

    /// KPRCB.MHz on every CPU (every real KPRCB has it; the field the KDBG names with
    /// OffsetPrcbMhz): the speed of the standard dumps' 3 GHz cycle clock (clock_now). The
    /// variation draws its own speed.
    fn standard_mhz(&mut self) {
        if self.var.is_none() && self.fx.kprcb_size.is_some() {
            if let Some(mhz_off) = self.t.offset_of("_KPRCB", "MHz") {
                assert_eq!(self.t.field_size("_KPRCB", "MHz"), Some(4));
                for &p in self.prcbs {
                    self.kprcb_writes
                        .push((p + mhz_off, STANDARD_CPU_MHZ.to_le_bytes().to_vec()));
                }
            }
        }
    }

    /// The value of one slot and what a reader must find there.
    fn place_slot(&mut self, slot: u32, content: &SlotSpec) -> (u64, ExpectedSlot) {
        match content {
            SlotSpec::Free(v) => {
                assert!(
                    *v == 0 || (*v & 1) == 1,
                    "free slot {slot}: {v:#x} is neither 0 nor bit-0-tagged"
                );
                (*v, ExpectedSlot::Free { value: *v })
            }
            SlotSpec::Garbage => self.garbage_slot(slot),
            SlotSpec::Unmapped => (
                self.plan.unmapped,
                ExpectedSlot::Invalid {
                    va: self.plan.unmapped,
                    why: format!(
                        "context at {:#x} is not mapped (zero PTE)",
                        self.plan.unmapped
                    ),
                },
            ),
            SlotSpec::Session(s)
            | SlotSpec::WrongId { session: s, .. }
            | SlotSpec::FreeTagged(s) => self.place_session(slot, content, s),
        }
    }

    /// A pointer into the page of random bytes, whose LoggerId there is not the slot.
    fn garbage_slot(&mut self, slot: u32) -> (u64, ExpectedSlot) {
        let off = 0x3A0usize;
        let id_off = self.lay.off(CTX, "LoggerId") as usize;
        let garbage = &mut self.garbage;
        let id = u32::from_le_bytes(
            garbage[off + id_off..off + id_off + 4]
                .try_into()
                .expect("4"),
        );
        if id == slot {
            garbage[off + id_off] ^= 0x5A;
        }
        let id = u32::from_le_bytes(
            garbage[off + id_off..off + id_off + 4]
                .try_into()
                .expect("4"),
        );
        let va = self.plan.garbage_page + off as u64;
        (
            va,
            ExpectedSlot::Invalid {
                va,
                why: format!("points into a page of random bytes: LoggerId {id:#x} != slot {slot}"),
            },
        )
    }

    /// A complete `_WMI_LOGGER_CONTEXT` (a session, a stale one, or a free-tagged one).
    fn place_session(
        &mut self,
        slot: u32,
        content: &SlotSpec,
        s: &SessionSpec,
    ) -> (u64, ExpectedSlot) {
        let logger_id = match content {
            SlotSpec::WrongId { logger_id, .. } => *logger_id,
            _ => slot,
        };
        let sv = self.var.and_then(|v| v.sessions.get(&slot));
        // Buffers really linked on GlobalList (NumberOfBuffers may be an odd value).
        let n = sv.map_or(s.number_of_buffers, |x| x.linked_buffers) as usize;
        self.check_session(s, sv, n);
        let ctx = self.pool.alloc(self.lay.size(CTX), b"EtwL");
        assert_eq!(ctx % if self.x64 { 16 } else { 8 }, 0);
        let strings = self.session_strings(s);
        // Buffers on GlobalList: bare headers, or (EtwSpec::buffers) buffers with data.
        let plan = match content {
            SlotSpec::Session(_) => self.spec.buffers.get(&slot),
            _ => None,
        };
        let sb = self.session_buffers(s, plan, n, ctx, logger_id);
        let co = self.write_context(s, sv, ctx, logger_id, &strings, &sb);
        let live = matches!(content, SlotSpec::Session(_)).then_some(slot);
        let consumers = self.place_consumers(s, ctx, logger_id, live, &sb);

        let probe_len = self.lay.size(CTX);
        self.probes
            .push((format!("etw_logger_context_{slot}"), ctx, probe_len));
        if s.name_unreadable {
            self.probes.push((
                format!("etw_logger_name_unreadable_{slot}"),
                strings.name_va,
                strings.name16.len(),
            ));
        }
        self.session_bufs.insert(slot, sb.bufs.clone());
        self.placed.push(super::scan::PlacedContext {
            slot,
            logger_id,
            kind: match content {
                SlotSpec::WrongId { .. } => super::scan::PlacedKind::WrongId,
                SlotSpec::FreeTagged(_) => super::scan::PlacedKind::FreeTagged,
                _ => super::scan::PlacedKind::Live,
            },
            ctx,
            name: (!s.name_unreadable).then(|| s.name.clone()),
            buffer_size: s.buffer_size,
            clock_type: co.clock.then_some(s.clock_type),
            bufs: sb.bufs.clone(),
            details: sb.details.clone(),
        });
        let exp = match content {
            SlotSpec::WrongId { logger_id, .. } => ExpectedSlot::Invalid {
                va: ctx,
                why: format!("LoggerId {logger_id:#x} != slot {slot} (a stale context)"),
            },
            SlotSpec::FreeTagged(_) => ExpectedSlot::Free { value: ctx | 1 },
            _ => ExpectedSlot::Session(Box::new(ExpectedSession {
                logger_id,
                name: (!s.name_unreadable).then(|| s.name.clone()),
                log_file: s.log_file.clone(),
                logger_mode: s.logger_mode,
                clock_type: co.clock.then_some(s.clock_type),
                buffer_size: s.buffer_size,
                minimum_buffers: s.minimum_buffers,
                maximum_buffers: s.maximum_buffers,
                number_of_buffers: s.number_of_buffers,
                buffers_written: s.buffers_written,
                events_lost: s.events_lost,
                log_buffers_lost: s.log_buffers_lost,
                real_time_buffers_lost: s.real_time_buffers_lost,
                start_time: s.start_time,
                pool_type: s.pool_type,
                instance_guid: guid_to_string(&s.instance_guid),
                context_va: ctx,
                maximum_event_size: co.max_event,
                flags: co.flags,
                name_va: strings.name_va,
                buffers: sb.bufs.clone(),
                global_list_cycle_to: sb.cycle_to,
                buffer_details: sb.details,
                odd_fields: sv.map(|x| x.odd_fields.clone()).unwrap_or_default(),
                reference_time: co.reference_time,
                consumers,
                get_cpu_clock: co.cpu_clock.as_ref().map(|c| c.value),
                clock_routine: co.cpu_clock.and_then(|c| c.routine),
            })),
        };
        let value = match content {
            SlotSpec::FreeTagged(_) => ctx | 1,
            _ => ctx,
        };
        (value, exp)
    }

    fn check_session(
        &self,
        s: &SessionSpec,
        sv: Option<&crate::etw::variation::SessionVariation>,
        n: usize,
    ) {
        let odd = sv.is_some_and(|x| !x.odd_fields.is_empty());
        assert!(
            s.start_time < self.cfg.system_time,
            "session {}: StartTime after the dump's SystemTime",
            s.name
        );
        assert!(
            odd || s.number_of_buffers <= s.maximum_buffers
                && s.minimum_buffers <= s.maximum_buffers,
            "session {}: buffer counts",
            s.name
        );
        assert!(
            s.buffer_size as usize > self.lay.size(BUF),
            "session {}: BufferSize",
            s.name
        );
        assert!(
            self.t
                .enum_name_of("_POOL_TYPE", s.pool_type.into())
                .is_some(),
            "session {}: PoolType {:#x} is not a _POOL_TYPE of fixture {}",
            s.name,
            s.pool_type,
            self.fx.name
        );
        if s.global_list == GlobalListSpec::Cyclic {
            assert!(n >= 2, "a cyclic GlobalList needs 2 buffers");
        }
    }

    /// The name (in pool, or on the page missing from the dump) and the log file name;
    /// NUL-terminated, MaximumLength = Length + 2.
    pub(super) fn session_strings(&mut self, s: &SessionSpec) -> SessionStrings {
        let name16 = utf16le(&s.name);
        let name_va = if s.name_unreadable {
            let hdr = self.pool.header_size();
            let start = align_up(self.missing_cursor as u64, hdr as u64) as usize;
            let arch = if self.x64 {
                crate::config::Arch::X64
            } else {
                crate::config::Arch::X86Pae
            };
            pool_header(arch, &mut self.missing, start, name16.len() + 2, b"EtwN");
            self.missing[start + hdr..start + hdr + name16.len()].copy_from_slice(&name16);
            self.missing_cursor = start + hdr + name16.len() + 2;
            self.plan.missing_page + (start + hdr) as u64
        } else {
            let va = self.pool.alloc(name16.len() + 2, b"EtwN");
            self.pool
                .slice_mut(va, name16.len())
                .copy_from_slice(&name16);
            va
        };
        let log16 = s.log_file.as_deref().map(utf16le);
        let log_va = log16.as_ref().map(|l| {
            let va = self.pool.alloc(l.len() + 2, b"EtwN");
            self.pool.slice_mut(va, l.len()).copy_from_slice(l);
            va
        });
        SessionStrings {
            name16,
            name_va,
            log16,
            log_va,
        }
    }

    /// `n` buffers on the session's GlobalList: 0x48-byte headers in pool, or the planned
    /// buffers with data in their own area.
    fn session_buffers(
        &mut self,
        s: &SessionSpec,
        plan: Option<&Vec<BufferSpec>>,
        n: usize,
        ctx: u64,
        logger_id: u32,
    ) -> SessionBuffers {
        let buf_size = self.lay.size(BUF);
        let bufs: Vec<u64> = match plan {
            None => (0..n).map(|_| self.pool.alloc(buf_size, b"EtwB")).collect(),
            Some(p) => {
                assert_eq!(
                    p.len(),
                    n,
                    "session {}: number_of_buffers != buffers planned",
                    s.name
                );
                assert!(
                    self.x64 || self.var.is_some(),
                    "buffers with data: x64 fixtures only (x86: variation mode)"
                );
                p.iter().map(|_| self.barea.alloc(s.buffer_size)).collect()
            }
        };
        let ge = self.lay.off(BUF, "GlobalEntry");
        let head = ctx + self.lay.off(CTX, "GlobalList");
        let entries: Vec<u64> = bufs.iter().map(|b| b + ge).collect();
        let cycle_to = (s.global_list == GlobalListSpec::Cyclic).then(|| entries[n - 2]);
        let mut out = SessionBuffers {
            bufs,
            entries,
            cycle_to,
            links: CtxLinks::default(),
            details: Vec::new(),
            with_data: plan.is_some(),
        };
        if let Some(p) = plan {
            let placed = BufferPlacement {
                lay: &self.lay,
                plan: p,
                bufs: &out.bufs,
                entries: &out.entries,
                head,
                cycle_to,
                buffer_size: s.buffer_size,
                logger_id,
                timeline: Timeline::new(self.cfg, s.clock_type, p),
            };
            let (details, l) = placed.place(&mut self.buffer_pages, &mut self.layout_cache);
            out.details = details;
            out.links = l;
            for (cpu, v) in &out.links.per_cpu {
                assert!(*cpu < self.cfg.cpus, "per-CPU buffer of CPU {cpu} >= cpus");
                self.per_cpu.push((*cpu, logger_id, *v));
            }
        } else {
            self.header_only_buffers(s, &out, head, logger_id);
        }
        out
    }

    /// Bare headers: BufferSize, offsets 0x48, SequenceNumber, ClientContext, State 1 for the
    /// first buffer (in use), 0 (free) for the others.
    fn header_only_buffers(
        &mut self,
        s: &SessionSpec,
        sb: &SessionBuffers,
        head: u64,
        logger_id: u32,
    ) {
        let buf_size = self.lay.size(BUF);
        let n = sb.bufs.len();
        for (i, &b) in sb.bufs.iter().enumerate() {
            let mut h = vec![0u8; buf_size];
            let flink = if i + 1 < n {
                sb.entries[i + 1]
            } else {
                sb.cycle_to.unwrap_or(head)
            };
            let blink = if i == 0 { head } else { sb.entries[i - 1] };
            let cpu = (i as u32) % self.cfg.cpus;
            BufferHeader {
                buffer_size: s.buffer_size,
                saved_offset: buf_size as u32,
                current_offset: buf_size as u32,
                offset: buf_size as u32,
                sequence_number: i as u64,
                state: u32::from(i == 0),
                processor_index: BufferHeader::processor_index(cpu),
                logger_id: logger_id as u16,
                global_flink: flink,
                global_blink: blink,
                ..BufferHeader::default()
            }
            .write(&mut h, &self.lay);
            self.pool.slice_mut(b, buf_size).copy_from_slice(&h);
        }
    }

    /// `s.consumers` as `_ETW_REALTIME_CONSUMER`s on the context's `Consumers` list (the
    /// context at `ctx` is already written), `NumConsumers` set; nothing where types.h lacks
    /// the structure or a PID is not a forged process. Each: Links in the ring, ProcessHandle
    /// a handle-like value, ProcessObject the EPROCESS, LoggerId, BuffersLost and
    /// EmptyBuffersCount from the PID; the user-mode pointers are left NULL unless the
    /// consumer gets queued buffers ([`EtwSpec::with_realtime_buffers`], live sessions: `slot`
    /// is Some; `realtime.rs` writes them).
    fn place_consumers(
        &mut self,
        s: &SessionSpec,
        ctx: u64,
        logger_id: u32,
        slot: Option<u32>,
        sb: &SessionBuffers,
    ) -> Vec<ExpectedConsumer> {
        const RC: &str = "_ETW_REALTIME_CONSUMER";
        if s.consumers.is_empty() || self.t.size_of(RC).is_none() {
            return Vec::new();
        }
        let size = self.lay.size(RC);
        let placed: Vec<(u64, u64, u64)> = s
            .consumers
            .iter()
            .filter_map(|pid| self.eprocess.get(pid).map(|&ep| (*pid, ep)))
            .map(|(pid, ep)| (self.pool.alloc(size, b"EtwC"), pid, ep))
            .collect();
        let head = ctx + self.lay.off(CTX, "Consumers");
        let n = placed.len();
        let pids: Vec<u64> = placed.iter().map(|p| p.1).collect();
        let rt = slot.filter(|_| self.realtime.is_some()).map(|slot| {
            let facts = RtFacts {
                slot,
                logger_id,
                sb,
                pids: &pids,
            };
            rt_session(self.cfg, &self.lay, &self.buffer_pages, s, &facts)
        });
        let mut out = Vec::new();
        for (i, &(va, pid, ep)) in placed.iter().enumerate() {
            let mut c = vec![0u8; size];
            let flink = placed.get(i + 1).map_or(head, |p| p.0);
            let blink = if i == 0 { head } else { placed[i - 1].0 };
            self.lay
                .put_list(&mut c, self.lay.off(RC, "Links") as usize, flink, blink);
            self.lay.put(&mut c, RC, "ProcessHandle", 0x1000 + 4 * pid);
            self.lay.put(&mut c, RC, "ProcessObject", ep);
            self.lay.put(&mut c, RC, "LoggerId", logger_id.into());
            let (lost, empty) = ((pid % 7) as u32, 2 + (pid % 3) as u32);
            self.lay.put(&mut c, RC, "BuffersLost", lost.into());
            self.lay.put(&mut c, RC, "EmptyBuffersCount", empty.into());
            let realtime = match (&rt, self.realtime.as_mut()) {
                (Some(r), Some(st)) => st.place(r, i, pid, ep, &mut c),
                _ => None,
            };
            self.pool.slice_mut(va, size).copy_from_slice(&c);
            out.push(ExpectedConsumer {
                va,
                pid,
                eprocess: ep,
                logger_id,
                buffers_lost: lost,
                empty_buffers: empty,
                realtime,
            });
        }
        if n > 0 {
            let mut h = vec![0u8; 2 * self.ptr];
            self.lay.put_list(&mut h, 0, placed[0].0, placed[n - 1].0);
            self.pool.slice_mut(head, h.len()).copy_from_slice(&h);
            let nc = ctx + self.lay.off(CTX, "NumConsumers");
            self.pool
                .slice_mut(nc, 4)
                .copy_from_slice(&(n as u32).to_le_bytes());
        }
        out
    }

    /// The `_WMI_LOGGER_CONTEXT` at `ctx`.
    pub(super) fn write_context(
        &mut self,
        s: &SessionSpec,
        sv: Option<&crate::etw::variation::SessionVariation>,
        ctx: u64,
        logger_id: u32,
        strings: &SessionStrings,
        sb: &SessionBuffers,
    ) -> ContextOut {
        let (lay, t) = (&self.lay, self.t);
        let mut c = vec![0u8; lay.size(CTX)];
        lay.put(&mut c, CTX, "LoggerId", logger_id.into());
        lay.put(&mut c, CTX, "BufferSize", s.buffer_size.into());
        let max_event = s.buffer_size - lay.size(BUF) as u32;
        lay.put_opt(&mut c, CTX, "MaximumEventSize", max_event.into());
        lay.put(&mut c, CTX, "LoggerMode", s.logger_mode.into());
        lay.put_opt(&mut c, CTX, "AcceptNewEvents", 1);
        lay.put_opt(&mut c, CTX, "CollectionOn", 1);
        let clock = lay.put_opt(&mut c, CTX, "ClockType", s.clock_type.into());
        let cpu_clock = self.cpu_clock(s.clock_type);
        if let Some(cc) = &cpu_clock {
            lay.put(&mut c, CTX, "GetCpuClock", cc.value);
        }
        lay.put(&mut c, CTX, "MinimumBuffers", s.minimum_buffers.into());
        lay.put(&mut c, CTX, "MaximumBuffers", s.maximum_buffers.into());
        lay.put(&mut c, CTX, "NumberOfBuffers", s.number_of_buffers.into());
        lay.put_opt(
            &mut c,
            CTX,
            "BuffersAvailable",
            u64::from(s.number_of_buffers.saturating_sub(1)),
        );
        lay.put(&mut c, CTX, "BuffersWritten", s.buffers_written.into());
        lay.put(&mut c, CTX, "EventsLost", s.events_lost.into());
        lay.put(&mut c, CTX, "LogBuffersLost", s.log_buffers_lost.into());
        lay.put(
            &mut c,
            CTX,
            "RealTimeBuffersLost",
            s.real_time_buffers_lost.into(),
        );
        lay.put_bytes(&mut c, CTX, "InstanceGuid", &s.instance_guid);
        lay.put(&mut c, CTX, "PoolType", s.pool_type.into());
        // StartTime is a LARGE_INTEGER (8 bytes).
        let st = lay.off(CTX, "StartTime") as usize;
        assert_eq!(t.field_size(CTX, "StartTime"), Some(8));
        put_u64(&mut c, st, s.start_time);
        let reference_time = self.put_reference_time(&mut c, s, sv);
        if let Some(silo) = self.silo_va {
            lay.put_opt(&mut c, CTX, "SiloState", silo);
        }
        let ln = lay.off(CTX, "LoggerName") as usize;
        let nlen = u16::try_from(strings.name16.len()).expect("name length");
        lay.put_unicode(&mut c, ln, nlen, nlen + 2, strings.name_va);
        let lf = lay.off(CTX, "LogFileName") as usize;
        match (&strings.log16, strings.log_va) {
            (Some(l), Some(va)) => {
                let len = u16::try_from(l.len()).expect("log file length");
                lay.put_unicode(&mut c, lf, len, len + 2, va);
            }
            _ => lay.put_unicode(&mut c, lf, 0, 0, 0),
        }
        if sb.with_data {
            sb.links.write(lay, &mut c, ctx);
        }
        let flags = self.put_flags(&mut c, s);
        self.put_list_heads(&mut c, ctx, sb);
        self.pool.slice_mut(ctx, c.len()).copy_from_slice(&c);
        ContextOut {
            clock,
            max_event,
            reference_time,
            flags,
            cpu_clock,
        }
    }

    /// What a clean kernel stores in `GetCpuClock` for `clock_type` (`cpu_clock.rs`): the VA
    /// of the clock routine (function-pointer layouts) or the index (integer layouts); None
    /// where the layout has no GetCpuClock.
    pub(super) fn cpu_clock(&self, clock_type: u32) -> Option<super::cpu_clock::CpuClock> {
        let m = self.t.member(CTX, "GetCpuClock")?;
        Some(if m.ty == "fnptr" || m.ty.ends_with('*') {
            let name = super::cpu_clock::routine_for(clock_type);
            let va = self.va_of(name).unwrap_or_else(|| {
                panic!(
                    "fixture {}: no public {name} for GetCpuClock (rebuild the fixtures: \
                     tests/fixtures/build.sh adds the clock routines)",
                    self.fx.name
                )
            });
            super::cpu_clock::CpuClock {
                value: va,
                routine: Some(name.to_string()),
            }
        } else {
            super::cpu_clock::CpuClock {
                value: super::cpu_clock::index_for(clock_type),
                routine: None,
            }
        })
    }

    /// ReferenceTime {StartTime, StartPerfClock} where the layout has it.
    fn put_reference_time(
        &self,
        c: &mut [u8],
        s: &SessionSpec,
        sv: Option<&crate::etw::variation::SessionVariation>,
    ) -> Option<crate::etw::variation::RefClock> {
        let (lay, cfg) = (&self.lay, self.cfg);
        if !self.t.has_field(CTX, "ReferenceTime") {
            return None;
        }
        let rt = lay.off(CTX, "ReferenceTime") as usize;
        let r = "_ETW_REF_CLOCK";
        let rc = match sv {
            Some(x) => x.reference_time.clone(),
            // A QPC value at 10 MHz since boot.
            None => crate::etw::variation::RefClock {
                start_time: s.start_time,
                start_perf_clock: s
                    .start_time
                    .saturating_sub(cfg.system_time - cfg.system_up_time),
            },
        };
        put_u64(c, rt + lay.off(r, "StartTime") as usize, rc.start_time);
        put_u64(
            c,
            rt + lay.off(r, "StartPerfClock") as usize,
            rc.start_perf_clock,
        );
        Some(rc)
    }

    /// The Flags bits of the spec, where the layout has Flags.
    fn put_flags(&self, c: &mut [u8], s: &SessionSpec) -> Option<u32> {
        let (lay, t) = (&self.lay, self.t);
        if !t.has_field(CTX, "Flags") {
            return None;
        }
        let mut v = 0u32;
        for b in &s.flag_bits {
            if let Some(bf) = t.bitfield(CTX, b) {
                assert_eq!(bf.offset, lay.off(CTX, "Flags"), "{b} is not in Flags");
                v |= ((1u32 << bf.width) - 1) << bf.position;
            }
        }
        lay.put(c, CTX, "Flags", v.into());
        Some(v)
    }

    /// Every other LIST_ENTRY of the context is an empty list head; GlobalList is the buffer
    /// list.
    fn put_list_heads(&self, c: &mut [u8], ctx: u64, sb: &SessionBuffers) {
        let n = sb.bufs.len();
        for m in self.t.members_of_type(CTX, "struct _LIST_ENTRY") {
            let off = self.lay.off(CTX, &m) as usize;
            let me = ctx + off as u64;
            if m == "GlobalList" && n != 0 {
                self.lay.put_list(c, off, sb.entries[0], sb.entries[n - 1]);
            } else {
                self.lay.put_list(c, off, me, me);
            }
        }
    }

    /// The array itself (a global, or in pool / the silo state); returns its bytes.
    fn write_array(&mut self, img: &mut KernelImage) -> Vec<u8> {
        let ptr = self.ptr;
        let mut arr = vec![0u8; self.capacity as usize * ptr];
        for (i, &v) in self.slot_values.iter().enumerate() {
            arr[i * ptr..(i + 1) * ptr].copy_from_slice(&ptr_bytes(ptr, v));
        }
        match self.route {
            EtwRoute::Global => write_var(img, self.fx, "WmipLoggerContext", 0, &arr),
            EtwRoute::Inline | EtwRoute::Pointer => self
                .pool
                .slice_mut(self.array_va, arr.len())
                .copy_from_slice(&arr),
        }
        arr
    }

    /// Per-CPU current buffers (etw-internals.md §3.3): ProcessorBlocks (pointer route, its VA
    /// returned) or KPRCB.EtwSupport blocks (inline route, 1607 x64; added to `es_blocks`).
    fn place_per_cpu(&mut self, es_blocks: &mut Vec<u64>) -> Option<u64> {
        match self.route {
            EtwRoute::Pointer if self.late_win11() => {
                self.late_win11_blocks(es_blocks);
                None
            }
            EtwRoute::Pointer => Some(self.processor_blocks()),
            EtwRoute::Inline => {
                self.etw_support_blocks(es_blocks);
                None
            }
            EtwRoute::Global => panic!(
                "fixture {}: per-CPU current buffers are not known for this era",
                self.fx.name
            ),
        }
    }

    /// _ETW_SILODRIVERSTATE.ProcessorBlocks -> cpus x 0x40-byte _ETW_SILO_TRACING_BLOCK
    /// {EX_FAST_REF *ProcessorBuffers; ULONGLONG *EventsLoggedCount; LONGLONG *QpcDelta; ...};
    /// ProcessorBuffers[LoggerId].
    fn processor_blocks(&mut self) -> u64 {
        let (cpus, capacity, ptr) = (self.cfg.cpus, self.capacity as usize, self.ptr);
        let pool = &mut self.pool;
        let blocks = pool.alloc(cpus as usize * SILO_TRACING_BLOCK_SIZE, b"EtwB");
        for cpu in 0..cpus {
            let arr = pool.alloc(capacity * ptr, b"EtwB");
            let counts = pool.alloc(capacity * 8, b"EtwB");
            let qpc = pool.alloc(8, b"EtwB");
            // Pointers are pointer-sized (x86: 4 bytes; ETW_SILO_TRACING_BLOCK {ProcessorBuffers
            // +0, EventsLoggedCount +4, QpcDelta +8} in the 20H1 x86 headers); the counts are
            // ULONGLONGs on both.
            let p = ptr as u64;
            for &(c, id, v) in &self.per_cpu {
                if c == cpu {
                    let slot = pool.slice_mut(arr + u64::from(id) * p, ptr);
                    slot.copy_from_slice(&v.to_le_bytes()[..ptr]);
                    put_u64(
                        pool.slice_mut(counts + u64::from(id) * 8, 8),
                        0,
                        1000 + u64::from(id) * 37 + u64::from(cpu),
                    );
                }
            }
            let b = blocks + u64::from(cpu) * SILO_TRACING_BLOCK_SIZE as u64;
            let blk = pool.slice_mut(b, 3 * ptr);
            for (i, v) in [arr, counts, qpc].into_iter().enumerate() {
                blk[i * ptr..(i + 1) * ptr].copy_from_slice(&v.to_le_bytes()[..ptr]);
            }
        }
        blocks
    }

    /// Whether this fixture's KPRCB.EtwSupport offset selects the later-Win11 block
    /// ([`super::pending::late_win11_etw_support`]).
    fn late_win11(&self) -> bool {
        self.t
            .offset_of("_KPRCB", "EtwSupport")
            .is_some_and(|o| super::pending::late_win11_etw_support(self.x64, o))
    }

    /// `_KPRCB.EtwSupport`'s offset, for per-CPU blocks (which need mapped KPRCBs).
    fn etw_support_offset(&self) -> u64 {
        assert!(
            self.fx.kprcb_size.is_some(),
            "fixture {}: per-CPU buffers need mapped KPRCBs",
            self.fx.name
        );
        self.t
            .offset_of("_KPRCB", "EtwSupport")
            .expect("_KPRCB.EtwSupport")
    }

    /// Later Win11 x64 (§3.3): each CPU's KPRCB.EtwSupport -> a 0x1000-byte 'Etwp' block whose
    /// +0x140 points to an array of MaxLoggers EX_FAST_REFs ('EtwB'), ProcessorBuffers[LoggerId];
    /// the host silo state's ProcessorBlocks stays NULL (as S14 shows for the host).
    fn late_win11_blocks(&mut self, es_blocks: &mut Vec<u64>) {
        use super::pending::{ETW_SUPPORT_BLOCK_SIZE_LATE_WIN11, LATE_WIN11_BUFFERS_OFFSET};
        let es_off = self.etw_support_offset();
        let capacity = self.capacity as usize;
        for cpu in 0..self.cfg.cpus {
            let block = self.pool.alloc(ETW_SUPPORT_BLOCK_SIZE_LATE_WIN11, b"Etwp");
            let arr = self.pool.alloc(capacity * 8, b"EtwB");
            es_blocks.push(block);
            put_u64(
                self.pool.slice_mut(block + LATE_WIN11_BUFFERS_OFFSET, 8),
                0,
                arr,
            );
            for &(c, id, v) in &self.per_cpu {
                if c == cpu {
                    put_u64(self.pool.slice_mut(arr + u64::from(id) * 8, 8), 0, v);
                }
            }
            self.kprcb_writes.push((
                self.prcbs[cpu as usize] + es_off,
                block.to_le_bytes().to_vec(),
            ));
        }
    }

    /// 10.0-1607 x64: *(KPRCB.EtwSupport + 0x40 + 8*LoggerId), event count at
    /// EtwSupport + 0x240 + 8*LoggerId.
    fn etw_support_blocks(&mut self, es_blocks: &mut Vec<u64>) {
        assert!(self.x64, "EtwSupport offsets are known for x64 only");
        let es_off = self.etw_support_offset();
        for cpu in 0..self.cfg.cpus {
            let block = self.pool.alloc(ETW_SUPPORT_BLOCK_SIZE, b"Etwp");
            es_blocks.push(block);
            for &(c, id, v) in &self.per_cpu {
                if c == cpu {
                    let o = 0x40 + u64::from(id) * 8;
                    put_u64(self.pool.slice_mut(block + o, 8), 0, v);
                    let o = 0x240 + u64::from(id) * 8;
                    put_u64(self.pool.slice_mut(block + o, 8), 0, 500 + u64::from(id));
                }
            }
            self.kprcb_writes.push((
                self.prcbs[cpu as usize] + es_off,
                block.to_le_bytes().to_vec(),
            ));
        }
    }

    /// The silo state and the globals that point to it.
    fn write_silo_state(
        &mut self,
        img: &mut KernelImage,
        arr: &[u8],
        processor_blocks: Option<u64>,
    ) {
        let Some(silo) = self.silo_va else {
            return;
        };
        let (lay, fx, ptr) = (&self.lay, self.fx, self.ptr);
        let size = lay.size(SILO);
        let mut s = vec![0u8; size];
        if self.route == EtwRoute::Pointer {
            lay.put(&mut s, SILO, "EtwpLoggerContext", self.array_va);
            lay.put_opt(&mut s, SILO, "MaxLoggers", self.capacity.into());
        }
        lay.put_opt(&mut s, SILO, "Silo", 0);
        if let Some(g) = self.globals_va {
            lay.put_opt(&mut s, SILO, "SiloGlobals", g);
        }
        if let Some(b) = processor_blocks {
            lay.put(&mut s, SILO, "ProcessorBlocks", b);
        }
        // The inline array (1511 - 1703) lives inside the silo state.
        if self.route == EtwRoute::Inline {
            let off = lay.off(SILO, "WmipLoggerContext") as usize;
            s[off..off + arr.len()].copy_from_slice(arr);
        }
        self.pool.slice_mut(silo, size).copy_from_slice(&s);
        write_var(img, fx, "EtwpHostSiloState", 0, &ptr_bytes(ptr, silo));
        if self.globals_va.is_some() {
            write_var(
                img,
                fx,
                "PspHostSiloGlobals",
                self.lay.off(GLOBALS, "EtwSiloState"),
                &ptr_bytes(ptr, silo),
            );
        }
    }

    /// Pages: the normal area, the garbage page, the page missing from the dump, the zero-PTE
    /// page and the buffers with data.
    fn pages(self) -> Vec<EtwPage> {
        let LoggerBuilder {
            mut pool,
            plan,
            garbage,
            buffer_pages,
            ..
        } = self;
        let used = align_up(pool.buf.len() as u64, PAGE_SIZE) as usize;
        pool.buf.resize(used, 0);
        let mut pages: Vec<EtwPage> = pool
            .buf
            .chunks(PAGE_SIZE as usize)
            .enumerate()
            .map(|(i, c)| EtwPage::Stored(plan.base + (i as u64) * PAGE_SIZE, c.to_vec()))
            .collect();
        pages.push(EtwPage::Stored(plan.garbage_page, garbage));
        pages.push(EtwPage::NotInDump(plan.missing_page));
        pages.push(EtwPage::ZeroPte(plan.unmapped & !(PAGE_SIZE - 1)));
        pages.extend(buffer_pages);
        pages
    }
}
